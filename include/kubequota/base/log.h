/* Leveled, structured logging to stderr in kube-scheduler's two formats.
 *
 * Call sites write one printf-style body per event: an optional leading message in
 * words, then key=value pairs (values with spaces in double quotes, \" escaped):
 *
 *     kq_info("event=bind result=bound pod=%s/%s user=%s", ...);
 *     kq_warn("kube: list failed path=%s error=\"%s\"", ...);
 *
 * The writer turns that body into one line of the chosen format (--logging-format):
 *   text  klog's header and layout:  I1124 14:26:20.555123   4711 extender.c:583] "bind" event=bind ...
 *   json  one object per line:       {"ts":1732458380.555,"caller":"extender.c:583","v":0,"msg":"bind",...}
 * The message ("msg") is the value of a msg= key if there is one, else the leading words,
 * else the event name. Every other key becomes a structured key. Verbosity follows klog:
 * -v=N shows V(n) lines with n <= N; kq_info is V(0), kq_debug is V(4).
 *
 * KQ_LOG() checks the level before evaluating its arguments, so a disabled line costs one
 * comparison. Never log tokens, keys or other secrets. Reference: docs/logging.md.
 */
#ifndef KUBEQUOTA_LOG_H
#define KUBEQUOTA_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "kubequota/base/error.h"

enum kq_log_level { KQ_LOG_ERROR = 0, KQ_LOG_WARN = 1, KQ_LOG_INFO = 2, KQ_LOG_DEBUG = 3 };
typedef enum kq_log_format { KQ_LOG_TEXT = 0, KQ_LOG_JSON = 1 } kq_log_format_t;

/* The verbosity of kq_debug lines (klog's convention: V(4) is debug). */
#define KQ_LOG_DEBUG_V 4

extern int kq_log_level_current;
extern int kq_log_verbosity;

/* Sets the level from a name ("error", "warn", "info", "debug"). Returns 0 or KQ_EINVAL.
 * "debug" also sets the verbosity to KQ_LOG_DEBUG_V. */
int kq_log_set_level(const char *name);
/* -v=N: 0..10. N >= KQ_LOG_DEBUG_V shows kq_debug lines. Returns 0 or KQ_EINVAL. */
int kq_log_set_verbosity(int v);
/* --logging-format: "text" or "json". Returns 0 or KQ_EINVAL. */
int kq_log_set_format(const char *name);
kq_log_format_t kq_log_get_format(void);

void kq_log_write(int level, int v, const char *file, int line, const char *fmt, ...) KQ_PRINTF(5, 6);

/* Formats a call site's body as kq_log_write does, into out (always NUL-terminated, cut to
 * fit); returns its length. Not plain printf: the text a %s (or %c) puts into a value is
 * kept inside that value, whatever it holds. The text after a key= up to the next space of
 * the format (user=%s, pod=%s/%s, and %s=%s) is written in quotes, escaped (\" \\ \n \r \t),
 * when its text needs it (empty, or holds a space, '"', '\\', '=' or a control character); a
 * %s inside a value the format quotes (error=\"%s\") is escaped the same way. Every other
 * conversion (flags, width, precision incl. '*', hh h l ll z j t L; d i u x X o c s p f F
 * e E g G a A %) comes out exactly as vsnprintf writes it. A conversion outside that list
 * makes the whole body plain vsnprintf output. For tests and fuzzing. */
size_t kq_log_format(char *out, size_t cap, const char *fmt, ...) KQ_PRINTF(3, 4);
size_t kq_log_vformat(char *out, size_t cap, const char *fmt, va_list ap) KQ_PRINTF(3, 0);

/* Renders one body (see above) as one line of the given format, newline included, into
 * out (always NUL-terminated; a long line is cut, never split). Returns its length. For
 * tests and for kq_log_write; ts NULL means now. */
size_t kq_log_render(char *out, size_t cap, kq_log_format_t fmt, int level, int v, const struct timespec *ts,
                     const char *file, int line, const char *body);

#define KQ_LOG_AT(level, v, ...)                                                   \
    do {                                                                           \
        if ((level) <= kq_log_level_current && (v) <= kq_log_verbosity)            \
            kq_log_write((level), (v), __FILE__, __LINE__, __VA_ARGS__);           \
    } while (0)
#define KQ_LOG(level, ...) KQ_LOG_AT((level), (level) == KQ_LOG_DEBUG ? KQ_LOG_DEBUG_V : 0, __VA_ARGS__)
#define kq_error(...) KQ_LOG(KQ_LOG_ERROR, __VA_ARGS__)
#define kq_warn(...)  KQ_LOG(KQ_LOG_WARN, __VA_ARGS__)
#define kq_info(...)  KQ_LOG(KQ_LOG_INFO, __VA_ARGS__)
#define kq_debug(...) KQ_LOG(KQ_LOG_DEBUG, __VA_ARGS__)
/* s escaped for a "..." value of a body (\" \\ \n \r \t), cut to fit; returns buf. kq_log_write
 * escapes %s values itself: this is for bodies handed to kq_log_render directly. */
const char *kq_log_quote(char *buf, size_t cap, const char *s);

/* klog's V(n).InfoS: an info line shown from -v=n on. */
#define kq_v(n, ...)  KQ_LOG_AT(KQ_LOG_INFO, (n), __VA_ARGS__)

/* ---- rate limit for lines a client can cause in a flood (denials of retried pods) ----
 * A fixed table remembers recent keys (e.g. a pod uid + reason): the same key is let
 * through at most once per window; a global token bucket bounds all keys together. Lines
 * held back are counted and reported by the next line let through (suppressed=N). Cost
 * per call: one hash and one short lock, independent of how many pods or users exist. */
typedef struct kq_log_limiter kq_log_limiter_t;

/* window_s: least time between two lines of one key; per_s/burst: the global bucket.
 * New object, or NULL. */
kq_log_limiter_t *kq_log_limiter_new(double window_s, double per_s, double burst);
void kq_log_limiter_free(kq_log_limiter_t *l);
/* true when a line for key may be written now; *suppressed (may be NULL) is then the
 * number of lines held back since the last one let through. now_s NULL means now
 * (CLOCK_MONOTONIC). Thread-safe. */
bool kq_log_limiter_allow(kq_log_limiter_t *l, const char *key, const double *now_s, unsigned long *suppressed);

#endif
