/* Leveled logging to stderr with an ISO-8601 UTC timestamp. Each line is written with a
 * single write() so lines from different threads never interleave. */
#include "kubequota/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int kq_log_level_current = KQ_LOG_INFO;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int kq_log_set_level(const char *name)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(name, level_names[i]) == 0) {
            kq_log_level_current = i;
            return 0;
        }
    }
    return KQ_EINVAL;
}

void kq_log_write(int level, const char *fmt, ...)
{
    char line[4096];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
    int m = snprintf(line + n, sizeof(line) - n, ".%03ldZ level=%s ", ts.tv_nsec / 1000000,
                     level_names[level < 0 ? 0 : level > 3 ? 3 : level]);
    if (m > 0)
        n += (size_t)m;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
    va_end(ap);
    if (k > 0)
        n += (size_t)k < sizeof(line) - n - 1 ? (size_t)k : sizeof(line) - n - 2;
    line[n++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}
