/* Requeue pokes: pods the filter denied shortly before a release of usage get one
 * annotation written, so that kube-scheduler looks at them again.
 *
 * Why. A pod denied by the filter (an extender) goes to kube-scheduler's unschedulable pool
 * with no rejector plugin, and leaves it on the next cluster event (say, the DELETE of
 * another pod) or on the periodic flush (podMaxInUnschedulablePodsDuration, 5 minutes).
 * kube-scheduler and kubequota watch the API server separately: when kube-scheduler sees
 * the DELETE first and retries the pod at once, the filter still counts the deleted pod and
 * denies again, and nothing else moves the pod for minutes. An update of the pod itself is
 * such a cluster event (kube-scheduler's PriorityQueue.Update: Pod/Update on the target pod;
 * with no rejector plugin the pod is "worth requeuing" and goes back after its backoff).
 * So when the ledger releases usage (kq_ledger_set_release_hook), every pod the filter
 * denied within the last `window_s` before that release — its decision may have counted
 * what was just released — gets a merge PATCH of KQ_REQUEUE_ANNOTATION with the time
 * (docs/events.md, "Requeue").
 *
 * Which denials. Only kinds a release can lift (over a limit, over a runtime, an
 * application owned by another user); a denial of another kind is not recorded. A release
 * is not matched to the limit that denied a pod (a queue's limit is an ancestor's too, a
 * quota group's runtime depends on its siblings): every recent denial is poked. The table
 * bounds that.
 *
 * Bounds. A table of at most max_pods recent denials (uid, namespace, name, when): a new
 * denial replaces the pod's earlier one (it moves to the tail); entries older than
 * window_s with no poke due are dropped from the head; beyond max_pods the oldest goes.
 * A pod is poked at most once per recorded denial (a new denial re-arms it) and at most
 * once per min_interval_s (a poke due sooner waits). A poke the writer cannot queue now
 * (its token bucket is empty or its queue is full) stays due and is tried again.
 *
 * Threads. kq_requeue_denied runs on civetweb workers (filter), kq_requeue_released on
 * whichever thread releases usage, under the ledger's lock; both are O(1) under the
 * module's lock. One worker thread (kq_requeue_start) matches and pokes: it copies the due
 * pods out under the lock and calls the poke function with no lock held.
 *
 * DESIGN: one mutex (rq->mu) guards the table, the release stamps and the counters. It is
 * a leaf: taken under the ledger's lock (ledger -> requeue), never the reverse, and nothing
 * is called under it. The release sequence is an atomic as well, so that filter reads it
 * (kq_requeue_mark) with no lock.
 */
#ifndef KUBEQUOTA_REQUEUE_H
#define KUBEQUOTA_REQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kubequota/base/error.h"

#define KQ_REQUEUE_ANNOTATION "kubequota.io/requeue"

typedef struct kq_requeue kq_requeue_t;

typedef struct kq_requeue_opts {
    double window_s;       /* a denial at most this old when usage is released is poked: 10 */
    double min_interval_s; /* least time between two pokes of one pod: 2 */
    size_t max_pods;       /* recent denials kept: 4096 */
} kq_requeue_opts_t;
void kq_requeue_opts_default(kq_requeue_opts_t *o);

/* Writes the annotation on the pod (borrowed strings, valid for the call). True when the
 * write is queued; false: try again later. Called with no lock held. */
typedef bool (*kq_requeue_poke_fn)(void *ud, const char *ns, const char *name, const char *uid, const char *key,
                                   const char *value);

/* New table (opts NULL: defaults), no thread yet. NULL on ENOMEM. */
kq_requeue_t *kq_requeue_new(const kq_requeue_opts_t *opts, kq_requeue_poke_fn poke, void *ud);
/* Starts the worker thread. 0 or KQ_ENOMEM. */
int kq_requeue_start(kq_requeue_t *rq) KQ_WUR;
/* Stops the worker and frees. Pokes not made yet are dropped. NULL is a no-op. */
void kq_requeue_free(kq_requeue_t *rq);

/* The release sequence now: read before a filter decision, handed to kq_requeue_denied,
 * so that a release applied while the decision ran is not missed. No lock. */
uint64_t kq_requeue_mark(kq_requeue_t *rq);

/* The filter denied the pod (copies the strings). mark: kq_requeue_mark before the
 * decision. O(1). rq NULL is a no-op. */
void kq_requeue_denied(kq_requeue_t *rq, const char *ns, const char *name, const char *uid, uint64_t mark);

/* The ledger released a pod's usage: recent denials become due. O(1); called under the
 * ledger's lock. ud is the kq_requeue_t (the ledger's release hook). */
void kq_requeue_released(void *ud);

/* True when the filter should record a denial of this kind (a release may lift it). */
bool kq_requeue_kind_liftable(kq_denial_t kind);

/* The same with an explicit monotonic time in seconds (tests). */
void kq_requeue_denied_at(kq_requeue_t *rq, const char *ns, const char *name, const char *uid, uint64_t mark,
                          double now);
void kq_requeue_released_at(kq_requeue_t *rq, double now);
/* One pass of the worker at time now: marks the denials the releases since the last pass
 * make due, and pokes those due (no lock held while poking). Returns the pokes queued. */
size_t kq_requeue_run(kq_requeue_t *rq, double now);

/* Pods in the table; pokes queued so far; pokes that had to wait (bucket, queue). */
size_t kq_requeue_size(kq_requeue_t *rq);
void kq_requeue_stats(kq_requeue_t *rq, unsigned long *poked, unsigned long *deferred);

/* A kq_requeue_poke_fn writing through the API client: ud is the kq_kube_t
 * (kq_kube_pod_annotate). */
bool kq_requeue_poke_kube(void *ud, const char *ns, const char *name, const char *uid, const char *key,
                          const char *value);

#endif
