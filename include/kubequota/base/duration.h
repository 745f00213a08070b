/* Durations in Go's syntax (time.ParseDuration), the one syntax for every duration flag
 * and metering key: a sequence of decimal numbers, each with an optional fraction and a
 * unit, "500ms", "15s", "2m", "1h30m", "1.5h". Units: ns, us (or µs), ms, s, m, h; a
 * result is whole milliseconds (rounded down; a non-zero duration shorter than 1ms is an
 * error rather than silently 0). Reference: docs/cli.md.
 */
#ifndef KUBEQUOTA_DURATION_H
#define KUBEQUOTA_DURATION_H

#include <stddef.h>
#include <time.h>

#include "kubequota/base/error.h"

/* Largest accepted duration: 7 days. */
#define KQ_DURATION_MAX_MS (7L * 24 * 3600 * 1000)

/* Parses s into *ms. legacy_unit_ms > 0 also accepts a bare number, read in that unit
 * (the flags' old syntax: --reload-interval 2000 meant milliseconds); 0 requires a unit,
 * except for "0". Returns 0, or KQ_EINVAL with *ms untouched and the reason in err
 * (may be NULL). */
int kq_duration_parse(const char *s, long legacy_unit_ms, long *ms, char *err, size_t errlen) KQ_WUR;

/* ms in the same syntax, shortest form ("1h30m", "1500ms", "0s"); returns buf. */
const char *kq_duration_format(long ms, char *buf, size_t len);

/* Adds ms (>= 0) to *t, carrying into seconds: a deadline for pthread_cond_timedwait from
 * clock_gettime on the condition variable's clock. */
void kq_timespec_add_ms(struct timespec *t, long ms);

#endif
