/* Usage over time: a bounded, in-memory history of what each queue and each user uses,
 * sampled from the ugm's views at a fixed interval, for the dashboard's charts
 * (GET /ws/v1/partition/{p}/history[/queue/{q}|/user/{u}], docs/endpoints.md).
 *
 * What is kept. Every interval (--history-interval, default 1m; 0: no history) one sample
 * of the queue view (allocatedResource of every queue) and of the users view (each user's
 * usage at root): cpu (vcore, millicores), memory (bytes) and pods. Each series is a ring
 * of KQ_HISTORY_POINTS samples (60: one hour at the default interval); all series share
 * one timeline. At most KQ_HISTORY_SERIES series (256, queues and users together; queues
 * are sampled first, so they get a slot before users); a name beyond the cap is counted
 * (seriesDropped) but not kept. A user series with nothing used for a whole window, and a
 * queue series no longer in the queue view and idle for a whole window, give their slot
 * back. Memory is therefore at most 256 x 60 x 24 bytes of samples plus the names.
 *
 * Denials. A callback (wired by main: the filter's and bind's denied decisions, a
 * cumulative counter) is read at every sample and at every read; its increase is kept in
 * 60 one-minute buckets, so denialsLastHour is the denials of the last 60 minutes whatever
 * the interval (the increase since the last sample is added at read time).
 *
 * Threads. One sampler thread (kq_history_start). It builds the ugm views under the ugm's
 * own locks with no lock of ours held, then takes the history's private lock (a leaf) to
 * push the numbers. Readers (civetweb workers) copy out under the same lock and build their
 * JSON from the copy. Nothing on the filter/bind path touches this module.
 */
#ifndef KUBEQUOTA_HISTORY_H
#define KUBEQUOTA_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/ugm.h"

#define KQ_HISTORY_POINTS 60
#define KQ_HISTORY_SERIES 256

typedef struct kq_history kq_history_t;

/* A cumulative count (denials so far); called with no lock of the history held. */
typedef unsigned long (*kq_history_count_fn)(void *ud);

typedef struct kq_history_opts {
    long interval_ms;             /* between samples (> 0) */
    size_t points;                /* samples per series, 2..KQ_HISTORY_POINTS (0: KQ_HISTORY_POINTS) */
    size_t max_series;            /* 1..KQ_HISTORY_SERIES (0: KQ_HISTORY_SERIES) */
    kq_history_count_fn denials;  /* may be NULL: denialsLastHour stays 0 */
    void *denials_ud;
} kq_history_opts_t;

/* New history over ugm (borrowed; outlives the history), no thread yet. NULL on ENOMEM
 * or a bad option. */
kq_history_t *kq_history_new(kq_ugm_t *ugm, const kq_history_opts_t *o);
/* Starts the sampler thread (first sample at once). 0 or KQ_ENOMEM. */
int kq_history_start(kq_history_t *h) KQ_WUR;
/* Stops the thread and frees. NULL is a no-op. */
void kq_history_free(kq_history_t *h);

/* One sample now (wall-clock seconds): what the thread does every interval. */
void kq_history_sample(kq_history_t *h, double now);

/* Views, new references (NULL on ENOMEM):
 *   kq_history_summary_json: {intervalSeconds, points, windowSeconds, maxSeries, samples,
 *     seriesDropped, denialsLastHour, queues:[names], users:[names]}
 *   kq_history_series_json: kind "queue" or "user": {kind, name, intervalSeconds,
 *     points:[{time, vcore, memory, pods}], oldest first}; *found false (and NULL) when
 *     no such series is kept. */
json_t *kq_history_summary_json(kq_history_t *h, double now);
json_t *kq_history_series_json(kq_history_t *h, const char *kind, const char *name, bool *found);

#endif
