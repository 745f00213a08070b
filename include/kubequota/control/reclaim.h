/* Reclaim: evicts pods of quota groups that use more than they may now, so that lent
 * resources come back. Driven by the elastic module's timer (kq_elastic_reclaim_once).
 *
 * Each pass lists the leaf groups whose used exceeds min(runtime, max) in a resource their
 * max names (never the default group). Reclaim is on per source of the group (sources):
 * queues.yaml and scheduler-plugins objects by default, Koordinator objects only when
 * asked (Koordinator's QuotaOverUsedRevokeController runs only with monitorAllQuotas,
 * default false: koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/quota_overuse_revoke.go, pkg/scheduler/apis/config/
 * v1/defaults.go). A queue group over its lowered resources.max alone is YuniKorn's quota
 * preemption instead (quota_preemption_delay), whatever the sources say. A group over
 * for at least its grace (grace_ms; Koordinator objects koord_delay_ms, Koordinator's
 * delayEvictTime, after which the clock starts again, as Koordinator's monitor does) loses
 * the smallest set of pods that brings it back (Koordinator's assign-back): pods are taken
 * lowest priority first, then youngest, until the excess is covered, then every taken pod
 * that can stay without going over again is given back, highest priority first; the rest
 * are evicted through the Eviction API. Never evicted: non-preemptible pods
 * (quota.scheduling.koordinator.sh/preemptible: "false"), pods whose creationTimestamp is
 * younger than min_runtime_ms, a pod evicted already (never twice, until it is gone), a pod
 * whose eviction was refused (a PodDisruptionBudget's 429, or any error) in the last 60s:
 * the plan is made again without it, so another pod is chosen and the refused one is not
 * asked at every tick. Every eviction is logged, counted (kq_reclaim_evictions) and
 * recorded as a Warning Event "Reclaimed" on the pod. A group that is over but not
 * reclaimed (its source's reclaim is off, or a queue over its max without quota
 * preemption) is logged once each time what it is over by changes.
 *
 * Threads and locks: one thread (the elastic timer; a test's) calls kq_reclaim_once; the
 * module's state (over-since table, groups logged as over, evictions in flight) is touched
 * by that thread alone and has no lock. The counters are atomics, read from any thread. A
 * pass takes the quota tree's and the ledger's locks (each for one call, never nested
 * here) and asks the group's source (kq_reclaim_source_fn) with no lock of its own held;
 * evictions and Events are I/O on copies with no lock held.
 */
#ifndef KUBEQUOTA_RECLAIM_H
#define KUBEQUOTA_RECLAIM_H

#include <stddef.h>
#include <stdint.h>

#include "kubequota/app.h"
#include "kubequota/base/error.h"
#include "kubequota/engine/config.h"
#include "kubequota/engine/quota_tree.h"

typedef struct kq_reclaim kq_reclaim_t;

/* Evicts a pod (default: kq_kube_evict on app->kube). 0, KQ_ECONFLICT (refused, e.g. a
 * PodDisruptionBudget), KQ_ENOENT (gone) or another error with err set. */
typedef int (*kq_reclaim_evict_fn)(void *ud, const char *ns, const char *name, const char *uid, char *err,
                                   size_t errlen);

/* Sources of quota groups, for the reclaim sources. */
#define KQ_RECLAIM_QUEUES   0x1u /* queues.yaml */
#define KQ_RECLAIM_UPSTREAM 0x2u /* scheduler-plugins ElasticQuota objects */
#define KQ_RECLAIM_KOORD    0x4u /* Koordinator ElasticQuota objects */
#define KQ_RECLAIM_DEFAULT KQ_RECLAIM_QUEUES

/* "queues,scheduler-plugins,koordinator" (any of them, comma-separated; "none" or "" for
 * none) into *out. 0, or KQ_EINVAL with the bad word in err. */
int kq_reclaim_parse_sources(const char *s, unsigned *out, char *err, size_t errlen) KQ_WUR;

/* The source (KQ_RECLAIM_*, 0: none of them) of quota group `group`. */
typedef unsigned (*kq_reclaim_source_fn)(void *ud, const char *group);

typedef struct kq_reclaim_opts {
    unsigned reclaim_sources;    /* KQ_RECLAIM_* */
    long reclaim_grace_ms;       /* queues and scheduler-plugins objects */
    long koord_delay_ms;         /* Koordinator objects (delayEvictTime) */
    long reclaim_min_runtime_ms; /* pods running for less are never evicted */
    kq_reclaim_evict_fn evict;   /* NULL = kq_kube_evict on app->kube */
    void *evict_ud;
} kq_reclaim_opts_t;

/* New module evicting from tree qt (borrowed) the pods app->ledger counts (app borrowed;
 * both must outlive it); source names each group's source. opts is copied. NULL on ENOMEM. */
kq_reclaim_t *kq_reclaim_new(kq_app_t *app, kq_qtree_t *qt, const kq_reclaim_opts_t *opts, kq_reclaim_source_fn source,
                             void *source_ud);
/* NULL is a no-op. */
void kq_reclaim_free(kq_reclaim_t *r);

/* Logs the reclaim configuration once (at start). */
void kq_reclaim_log_config(const kq_reclaim_t *r);

/* One pass at monotonic time now_ms; cfg (borrowed, may be NULL) gives the queues' quota
 * preemption. Returns the number of evictions that succeeded. */
size_t kq_reclaim_once(kq_reclaim_t *r, int64_t now_ms, const kq_config_t *cfg);

/* Evictions done / refused or failed so far (0 for NULL). */
unsigned long kq_reclaim_evictions(kq_reclaim_t *r, unsigned long *failed);

#endif
