/* Go-style durations (include/kubequota/duration.h). Follows the grammar of Go's
 * time.ParseDuration (golang/go src/time/format.go): [0-9]*(\.[0-9]*)?unit, repeated;
 * a sign is not accepted (no duration here can be negative). */
#include "kubequota/base/duration.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void fail(char *err, size_t errlen, const char *s, const char *why)
{
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "\"%s\" is not a duration: %s (examples: 500ms, 15s, 2m, 1h30m)", s, why);
}

int kq_duration_parse(const char *s, long legacy_unit_ms, long *ms, char *err, size_t errlen)
{
    static const struct {
        const char *unit;
        long long ns;
    } units[] = {
        {"ns", 1LL}, {"us", 1000LL}, {"\xc2\xb5s", 1000LL}, {"\xce\xbcs", 1000LL}, {"ms", 1000000LL},
        {"s", 1000000000LL}, {"m", 60000000000LL}, {"h", 3600000000000LL},
    };
    const long long max_ns = (long long)KQ_DURATION_MAX_MS * 1000000LL;
    if (s == NULL || *s == '\0') {
        fail(err, errlen, s ? s : "", "empty");
        return KQ_EINVAL;
    }
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    if (legacy_unit_ms > 0) { /* a bare whole number in the flag's old unit */
        char *end;
        long long v = strtoll(s, &end, 10);
        if (*end == '\0' && s[0] >= '0' && s[0] <= '9') {
            if (v > KQ_DURATION_MAX_MS / legacy_unit_ms) {
                fail(err, errlen, s, "longer than 7 days");
                return KQ_EINVAL;
            }
            *ms = (long)(v * legacy_unit_ms);
            return 0;
        }
    }
    long long total = 0; /* nanoseconds */
    const char *p = s;
    while (*p != '\0') {
        long long ip = 0, frac = 0, scale = 1;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            if (ip > max_ns) {
                fail(err, errlen, s, "longer than 7 days");
                return KQ_EINVAL;
            }
            ip = ip * 10 + (*p++ - '0');
            digits++;
        }
        if (*p == '.') {
            p++;
            while (*p >= '0' && *p <= '9') {
                if (scale < 1000000000LL) { /* beyond nanoseconds: ignored */
                    frac = frac * 10 + (*p - '0');
                    scale *= 10;
                }
                p++;
                digits++;
            }
        }
        if (digits == 0) {
            fail(err, errlen, s, "expected a number");
            return KQ_EINVAL;
        }
        size_t u = 0, n = sizeof(units) / sizeof(units[0]), best = n, best_len = 0;
        for (; u < n; u++) { /* longest match: "ms" before "m" */
            size_t l = strlen(units[u].unit);
            if (strncmp(p, units[u].unit, l) == 0 && l > best_len) {
                best = u;
                best_len = l;
            }
        }
        if (best == n) {
            fail(err, errlen, s, *p ? "unknown unit (ns, us, ms, s, m, h)" : "missing unit (ns, us, ms, s, m, h)");
            return KQ_EINVAL;
        }
        p += best_len;
        long long unit = units[best].ns;
        if (ip > max_ns / unit) {
            fail(err, errlen, s, "longer than 7 days");
            return KQ_EINVAL;
        }
        total += ip * unit + (long long)((double)frac * (double)unit / (double)scale);
        if (total > max_ns) {
            fail(err, errlen, s, "longer than 7 days");
            return KQ_EINVAL;
        }
    }
    if (total > 0 && total < 1000000LL) {
        fail(err, errlen, s, "shorter than 1ms");
        return KQ_EINVAL;
    }
    *ms = (long)(total / 1000000LL);
    return 0;
}

const char *kq_duration_format(long ms, char *buf, size_t len)
{
    if (len == 0)
        return buf;
    if (ms <= 0) {
        snprintf(buf, len, "0s");
        return buf;
    }
    if (ms % 1000 != 0 && ms < 60000) {
        snprintf(buf, len, "%ldms", ms);
        return buf;
    }
    long h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, r = ms % 1000;
    size_t n = 0;
    buf[0] = '\0';
    if (h)
        n += (size_t)snprintf(buf + n, len - n, "%ldh", h);
    if (m && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%ldm", m);
    if (n < len && (s || r)) {
        if (r)
            n += (size_t)snprintf(buf + n, len - n, "%ld.%03lds", s, r);
        else
            n += (size_t)snprintf(buf + n, len - n, "%lds", s);
    }
    return buf;
}

void kq_timespec_add_ms(struct timespec *t, long ms)
{
    t->tv_sec += (time_t)(ms / 1000);
    t->tv_nsec += (ms % 1000) * 1000000L;
    if (t->tv_nsec >= 1000000000L) {
        t->tv_sec++;
        t->tv_nsec -= 1000000000L;
    }
}
