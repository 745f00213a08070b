/* Admission controller behind a scheduling gate (docs/gating.md).
 *
 * With gating on, the mutating webhook creates every pod of kubequota's scheduler with the
 * scheduling gate "kubequota.io/admission" (admission.h), so kube-scheduler never sees it.
 * This controller (its own thread; only the leader acts) follows the gated pods from the
 * pod informer and removes the gate of a pod when it fits every limit it is subject to,
 * in a fair order across the users of each queue:
 *
 *  - Fit: the pod ledger's check and commit (kq_ledger_reserve: user, group and queue
 *    maxima and maxapplications, ACLs, the quota group's runtime) after the owner's credit
 *    budget (kq_metering_check_budget), the checks filter and bind make. A pod released
 *    is counted at once as RESERVED (ledger.h), so no combination of released pods can
 *    exceed a limit; filter and bind stay the final check and find it counted.
 *  - Removal: one JSON patch with preconditions (the pod's uid, and our gate's name at
 *    the index the informer saw), so another controller's gates are never touched; a
 *    patch the API server refuses releases the reservation and the pod waits again.
 *  - Order inside a queue: users are served by weighted fair queueing (stride
 *    scheduling): each user with waiting pods has a pass; the user with the smallest pass
 *    is offered the next release and its pass grows by cost / weight, cost being the
 *    pod's cpu in millicores (memory in MiB when it asks no cpu; 1 when neither) or, when
 *    larger, what the DRA devices it is charged stand for in the queue's cpu (a device
 *    class capped on the queue's path as cpu is: its share of the queue times the cpu
 *    cap; uncapped: 1000 per device). The cost is read from what the ledger charged the
 *    pod when it reserved it (kq_ledger_reserve_charged: request plus its claims'
 *    devices, a shared claim another counted pod holds adding nothing). A user
 *    who starts waiting joins at the queue's current pass, so idle time earns no credit.
 *    Equal weights give round-robin. Weights come from the queue's properties
 *    kubequota.io/gating.weight.user.<name> and kubequota.io/gating.weight.group.<name>
 *    (the user's own weight, else the largest of its groups', else 1). Within a user:
 *    higher priority first, then older (creationTimestamp), then first seen.
 *    A user whose head pod does not fit is skipped for the rest of the pass (smaller pods
 *    behind it wait: no overtaking within a user); blocked by a limit of its own (or an
 *    ACL), it is parked until one of its pods ends; by its group's limit, until a pod of a
 *    member of that group ends; by a quota group (max or runtime), until any pod ends;
 *    and in every case until a new pod of it arrives, the configuration changes or the
 *    next timed pass. Blocked by the queue itself, the queue's pass ends. A release
 *    costs O(log users + log pods of that user).
 *    Policy "usage" (queue property kubequota.io/gating.policy, inherited by a subtree):
 *    a user's pass is instead its dominant share of max(decayed average, current) usage
 *    in the queue (engine/fairshare.h; half-life kubequota.io/gating.halflife, default
 *    1h; DRA devices nobody caps weigh 1000 millicores each against the cpu cap), divided
 *    by its weight; users whose usage changed are re-ranked at each pass,
 *    all of them at each timed pass. The history survives restarts in a ConfigMap.
 *  - Timeout: a reservation not bound within reserve_timeout is released
 *    (kq_ledger_expire_reserved); gates cannot be added back, so such a pod is then
 *    decided by filter and bind like an ungated pod.
 *  - Restart or leader change: the ledger reserves every ungated, unbound pod of ours
 *    it sees (kq_ledger_set_gating), checked, so the reserved set is rebuilt from the API.
 *
 * DESIGN: one mutex (gating.mu) guards the waiting pods, the per-queue user heaps and the
 * counters. Lock order: gating.mu -> ledger -> ugm -> quota tree, gating.mu -> ledger ->
 * claims (a pod's device charge, at a release and in the waiting view), and gating.mu ->
 * metering; no module calls into gating while holding its own lock. No API I/O under
 * gating.mu: a pass chooses and reserves under it, then patches (up to ungate_parallel at
 * once, from short-lived threads that take gating.mu or the ledger's lock, one at a time,
 * only for a failed patch) and posts Events after unlocking. Observe/remove are called by
 * the informer thread and only queue work.
 */
#ifndef KUBEQUOTA_GATING_H
#define KUBEQUOTA_GATING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/app.h"
#include "kubequota/base/error.h"
#include "kubequota/kube/pod.h"

/* Queue properties of the fair order: KQ_PROP_GATING_WEIGHT_USER / _GROUP (config.h). */

/* The Event reason on a gated pod, and the wait-time histogram's bounds (seconds). */
#define KQ_GATING_EVENT_REASON "WaitingForQuota"
#define KQ_GATING_WAIT_BUCKETS 12

typedef struct kq_gating kq_gating_t;

/* kq_gating_opts_t.ungate_parallel: its default and its largest value. */
#define KQ_GATING_RELEASE_PARALLEL_DEFAULT 16
#define KQ_GATING_RELEASE_PARALLEL_MAX 64

typedef struct kq_gating_opts {
    long reserve_timeout_ms; /* a released pod not bound within this loses its reservation (default 2m) */
    long interval_ms;        /* a pass at least this often (default 1s); events wake it sooner */
    bool (*is_leader)(void *ud); /* NULL: always acts */
    void *leader_ud;
    /* Removes the gate at index gate_idx of the pod (NULL: the JSON patch through app->kube).
     * 0 removed; KQ_ENOENT pod gone; KQ_ECONFLICT refused; KQ_EIO outcome unknown. For
     * benchmarks and tests; called on the controller thread with no lock held. */
    int (*ungate)(void *ud, const char *ns, const char *name, const char *uid, uint32_t gate_idx, char *err,
                  size_t errlen);
    void *ungate_ud;
    /* Gate removals (JSON patches through app->kube) of one pass in flight at once, 1 to
     * KQ_GATING_RELEASE_PARALLEL_MAX (default 16; 1: one after the other; out of range is
     * clamped). One at a time capped releases at one per PATCH round trip (BENCHMARKS.md,
     * "What bounds the extender path"). A hook (ungate) is always called one at a time, in
     * release order. */
    int ungate_parallel;
    /* Usage history checkpoint (policy "usage", docs/gating.md): the ConfigMap
     * usage_ns/usage_name (usage_name NULL: none) holds it under the key "usage.json". A
     * replica merges it when it becomes leader (or starts leading), and writes it every
     * usage_checkpoint_ms while it leads and once more when it stops. */
    const char *usage_ns, *usage_name;
    long usage_checkpoint_ms; /* default 30s */
    /* Gate-only (--admission-gate-only, the chart's scheduler.extender.mode gate-only):
     * kube-scheduler calls no extender, so the release is the only quota decision and no
     * filter keeps a pod of a Koordinator multi-tree quota on its tree's nodes. Such a pod
     * is never released: it is set aside (never fits, with an Event naming the mode), and
     * checked again when the configuration changes. A released pod's reservation does not
     * expire (reserve_timeout_ms is not applied): nothing would check it again before it
     * binds. */
    bool gate_only;
} kq_gating_opts_t;

void kq_gating_opts_default(kq_gating_opts_t *o);

/* Borrows app (ledger, kube, config, metering); turns the ledger's gating on. NULL on
 * allocation failure. */
kq_gating_t *kq_gating_new(kq_app_t *app, const kq_gating_opts_t *o);
/* Starts the controller thread. 0 or KQ_ENOMEM. */
int kq_gating_start(kq_gating_t *g) KQ_WUR;
/* Stops the thread and frees. NULL is a no-op. */
void kq_gating_free(kq_gating_t *g);

/* Informer hooks (any thread, no lock of the caller held): every pod event after the
 * ledger's, the DELETED ones, and a relist's bracket (pods not listed are forgotten). */
void kq_gating_observe(kq_gating_t *g, const kq_pod_t *pod);
/* gone: the deleted pod as the ledger knew it (kq_ledger_lookup), so the waiting users its
 * end may let through (its user's, its groups' members', those held by a quota group) are
 * offered a release again; NULL: unknown (the next timed pass offers). */
void kq_gating_remove(kq_gating_t *g, const char *uid, const kq_pod_t *gone);
void kq_gating_resync_begin(kq_gating_t *g);
void kq_gating_resync_end(kq_gating_t *g);

/* Waiting pods of queue (NULL: every queue), in release order per queue:
 * [{"queue":..., "waiting":N, "pods":[{"namespace","name","uid","user","position",
 *   "priority","waitingSeconds","reason","neverFits"}...]}...]. Position is 1-based within the
 * queue, by the order of the users' passes (the next release first); pods that can never fit
 * as they are (set aside: never released until a reload or the timed pass finds they fit)
 * come last, with position null. New reference or NULL. */
json_t *kq_gating_waiting_json(kq_gating_t *g, const char *queue);

typedef struct kq_gating_stats {
    size_t waiting;           /* gated pods known */
    size_t reserved;          /* released, not bound yet (the ledger's count) */
    unsigned long releases;   /* gates removed */
    unsigned long patch_errors;
    unsigned long expired;    /* reservations that timed out */
    size_t parked;            /* waiting users parked (not tried by each pass) */
    unsigned long usage_saves, usage_save_errors; /* usage history checkpoints written / failed */
    double usage_saved_at;    /* wall-clock seconds of the last one written, 0: none */
    /* wait time of released pods: cumulative counts per bucket bound, sum and count */
    unsigned long wait_bucket[KQ_GATING_WAIT_BUCKETS];
    double wait_sum;
    unsigned long wait_count;
} kq_gating_stats_t;

extern const double kq_gating_wait_bounds[KQ_GATING_WAIT_BUCKETS];

void kq_gating_stats(kq_gating_t *g, kq_gating_stats_t *out);

/* Releases per user so far: calls fn for each (user, count), under gating.mu (fn must not
 * call back into gating). */
void kq_gating_foreach_user(kq_gating_t *g, void (*fn)(void *ud, const char *user, unsigned long releases),
                            void *ud);

/* The usage history the controller ranks by (policy "usage"): owned by g, fed by the
 * ledger from kq_gating_new on. For tests and the REST view. */
struct kq_fairshare *kq_gating_fairshare(kq_gating_t *g);

/* The weight of a user in a queue's fair order (properties above); 1 without one. */
double kq_gating_weight(const kq_queue_conf_t *q, const char *user, const char *const *groups, size_t n_groups);

#endif
