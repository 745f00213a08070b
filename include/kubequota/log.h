/* Leveled logging: one line per event, key=value style, to stderr.
 *
 * KQ_LOG() checks the level before evaluating its arguments, so a disabled debug
 * line costs one comparison. Never log tokens, keys or other secrets.
 */
#ifndef KUBEQUOTA_LOG_H
#define KUBEQUOTA_LOG_H

#include "kubequota/error.h"

enum kq_log_level { KQ_LOG_ERROR = 0, KQ_LOG_WARN = 1, KQ_LOG_INFO = 2, KQ_LOG_DEBUG = 3 };

extern int kq_log_level_current;

/* Sets the level from a name ("error", "warn", "info", "debug"). Returns 0 or KQ_EINVAL. */
int kq_log_set_level(const char *name);
void kq_log_write(int level, const char *fmt, ...) KQ_PRINTF(2, 3);

#define KQ_LOG(level, ...)                         \
    do {                                           \
        if ((level) <= kq_log_level_current)       \
            kq_log_write((level), __VA_ARGS__);    \
    } while (0)
#define kq_error(...) KQ_LOG(KQ_LOG_ERROR, __VA_ARGS__)
#define kq_warn(...)  KQ_LOG(KQ_LOG_WARN, __VA_ARGS__)
#define kq_info(...)  KQ_LOG(KQ_LOG_INFO, __VA_ARGS__)
#define kq_debug(...) KQ_LOG(KQ_LOG_DEBUG, __VA_ARGS__)

#endif
