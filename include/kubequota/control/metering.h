/* Metering and variable pricing (the Hops "Yarn quota" model for pods): a price multiplier
 * that follows cluster utilisation, and a ledger that charges the owners of running pods
 * over time, checkpointed so that nothing is lost or charged twice across restarts.
 *
 * Price multiplier. At every compute (a background thread, every interval; or
 * kq_metering_compute_now) the module computes, from its own view:
 *   cpu utilisation     = (requests of bound live pods + pending requests) / allocatable
 *   memory utilisation  = the same for memory
 *   general utilisation = max(cpu, memory)      (pending counts as used, as in Hops; so it
 *                                                 can exceed 1: demand, not occupancy)
 *   GPU utilisation     = GPUs of bound live pods / allocatable GPUs (GPU resource names
 *                         are configurable, default nvidia.com/gpu; pending not counted;
 *                         DRA device-class names are priced as GPUs but left out here:
 *                         node allocatable never holds them)
 *   general multiplier  = 1 + max(0, general utilisation - tipping point) x increment
 *   GPU multiplier      = max(1 + max(0, GPU utilisation - GPU tipping point) x GPU
 *                         increment, general multiplier)
 * An allocatable of 0 (not known yet) gives a utilisation of 0.
 *
 * Charging. A pod is charged from its PodScheduled time (or from the ledger's epoch, the
 * moment this ledger was first created, when it was bound before that: history from before
 * kubequota metered is never billed) until it ends. An interval [a, b] costs, per resource,
 *   seconds x (request / unit) x multiplier x base price
 * (cpu and memory at the general multiplier, GPUs at the GPU multiplier) and the pod pays
 * its dominant resource: the largest of the three. A pod's request here is what the pod
 * ledger charges it (ledger.h "metering: a pod's charge"): its containers' request plus the
 * devices of the DRA ResourceClaims it is charged, under their class names, so a GPU taken
 * through a claim is priced as a GPU when its class name is in gpu-resources. When that
 * charge moves after bind (a claim allocated, deallocated; a shared claim moving to or
 * from the pod) the informers call kq_metering_pod_resized: a resize. Intervals are charged at every compute,
 * at a resize (the past at the old size) and at the end, always at the multiplier in force
 * at that moment (the last computed one; never frozen for a period). A pod that lived less
 * than the minimum runtime is charged up to bound time + minimum runtime at its end. An
 * interval that crosses 00:00 UTC is split, each part booked to its own day. Every charge is
 * rounded to a micro-credit (1e-6) and booked, as integers, to the pod's user, to its
 * tracked group (if any) and to its queue and every ancestor queue (root holds the
 * partition's total), as running totals and per UTC day.
 *
 * Budgets (optional) come from queues.yaml properties and follow config reloads:
 *   any queue:   kubequota.io/budget: "500"                credits for the queue's subtree
 *   root queue:  kubequota.io/budget.user.<user>: "100"    credits for that user
 *                kubequota.io/budget.group.<group>: "250"  credits for that group
 * A budget is a total since the ledger's epoch (raise it to grant more). When what an owner
 * was charged reaches its budget, kq_metering_check_budget denies new pods of that owner
 * (running pods keep running and keep being charged). Without budgets nothing is denied.
 *
 * Checkpoint (state_dir set). At every compute and shortly after a pod ends, the whole
 * state (multipliers, epoch, totals, days and every running pod with its last charged time)
 * is written as JSON (a "version" field) to state_dir/metering-checkpoint.json: written to a
 * temporary file, fsync'ed, the current file renamed to metering-checkpoint.prev.json, the
 * new one renamed into place, the directory fsync'ed. On start, kq_metering_new resumes from
 * it: running pods are charged from their last charged time, so an interval across a
 * restart is charged once. If the checkpoint is unreadable or corrupt it is moved aside to
 * metering-checkpoint.corrupt-<unix time>.json (never deleted or overwritten), the error is
 * logged, and the previous checkpoint is used (charges since it are made again from its
 * times, once); when no good checkpoint exists but a file does, kq_metering_new fails with
 * the reason: the ledger is never silently reset to zero. An empty ledger starts only
 * when state_dir holds no checkpoint at all.
 *
 * Restart and relist. Pods restored from a checkpoint are not charged until the pod
 * informer confirms them (kq_metering_pod_bound). The informer must wrap every full list
 * in kq_metering_resync_begin / kq_metering_resync_end: a pod not listed is ended then, at
 * "now" if this process saw it running, at its last charged time if it was only restored
 * (it ended while kubequota was down, at an unknown time: only what is known is billed).
 *
 * Leadership. Only the leader charges and writes the checkpoint. opts.is_leader (NULL:
 * always leader, the single-replica case) is asked at each compute; a follower keeps its
 * view and multipliers current but charges nothing. When a replica becomes leader it first
 * re-reads the checkpoint in state_dir (which must then be shared storage, or be replaced
 * by an API-backed store) and resumes from it exactly as on a restart.
 *
 * Thread safety: every function may be called from any thread. One private mutex guards
 * the state (taken after any ledger/ugm lock if a caller holds one; nothing is called out
 * while it is held) and a second one serialises checkpoint writes (checkpoint lock ->
 * state lock; no file I/O under the state lock). Filter-path calls
 * (kq_metering_check_budget) are hash lookups, O(queue depth). The pod ledger feeds charge
 * changes under its feed lock (ledger.h), never under its own lock, so filter and bind
 * never wait for a compute pass; opts.before_compute runs before either metering lock is
 * taken.
 *
 * Ownership: strings are copied; JSON views are new references; kq_metering_metrics
 * returns a malloc'ed string.
 */
#ifndef KUBEQUOTA_METERING_H
#define KUBEQUOTA_METERING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/error.h"
#include "kubequota/kube/pod.h"
#include "kubequota/engine/resource.h"

#define KQ_METERING_MAX_GPU_NAMES 8
/* gpu-resources' one wildcard: the devices of every DRA device class. */
#define KQ_METERING_ALL_CLASSES "*.deviceclass.resource.k8s.io/devices"
/* Property keys in queues.yaml. */
#define KQ_METERING_PROP_BUDGET "kubequota.io/budget"
#define KQ_METERING_PROP_USER_BUDGET "kubequota.io/budget.user."
#define KQ_METERING_PROP_GROUP_BUDGET "kubequota.io/budget.group."
/* File names inside state_dir. */
#define KQ_METERING_CHECKPOINT "metering-checkpoint.json"
#define KQ_METERING_CHECKPOINT_PREV "metering-checkpoint.prev.json"
#define KQ_METERING_CHECKPOINT_VERSION 1

typedef struct kq_metering kq_metering_t;

typedef struct kq_metering_opts {
    int interval_ms;            /* compute period: 10000 */
    double tipping_point;       /* general: 0.2 */
    double gpu_tipping_point;   /* 0.2 */
    double increment;           /* general: 1 */
    double gpu_increment;       /* 2 */
    double price_cpu;           /* credits per unit-second at multiplier 1: 1 */
    double price_memory;        /* 1 */
    double price_gpu;           /* 1 */
    int64_t unit_cpu;           /* canonical (millicores): 1000 = 1 cpu */
    int64_t unit_memory;        /* bytes: 1 GiB */
    int64_t unit_gpu;           /* count: 1 */
    const char *gpu_resources[KQ_METERING_MAX_GPU_NAMES]; /* interned names; {"nvidia.com/gpu"} */
    size_t n_gpu_resources;
    bool gpu_all_classes;       /* KQ_METERING_ALL_CLASSES listed: every DRA class's devices */
    double min_runtime_s;       /* 10 */
    const char *state_dir;      /* checkpoint folder (copied); NULL = no checkpoint */
    double (*clock)(void *ud);  /* seconds since the Unix epoch; NULL = wall clock */
    void *clock_ud;
    bool (*is_leader)(void *ud); /* NULL = always leader (single replica) */
    void *leader_ud;
    /* Called at the start of every compute, with no metering lock held (it may feed
     * metering): serve flushes the charges the ledger noted (ledger.h "metering: a pod's
     * charge"), so one moved by a bind is priced within an interval even when no pod or
     * claim event follows. NULL: nothing. */
    void (*before_compute)(void *ud);
    void *before_compute_ud;
} kq_metering_opts_t;

/* Fills the defaults above. */
void kq_metering_opts_default(kq_metering_opts_t *o);

/* Sets one option from "KEY=VALUE" (for a repeatable --metering flag). Keys:
 *   interval, min-runtime            seconds (decimal, > 0 / >= 0)
 *   tipping-point, gpu-tipping-point  >= 0
 *   increment, gpu-increment          >= 0
 *   price-cpu, price-memory, price-gpu  credits per unit-second, >= 0
 *   unit-cpu, unit-memory, unit-gpu   Kubernetes quantities ("1", "500m", "1Gi"), > 0
 *   gpu-resources                     comma-separated resource names; a DRA device class's
 *                                     devices are "<class>.deviceclass.resource.k8s.io/devices"
 *                                     (what the pod ledger charges for its claims), and
 *                                     KQ_METERING_ALL_CLASSES counts every class's
 *   state-dir                         folder (the string is borrowed: keep it alive until
 *                                     kq_metering_new, which copies it)
 * KQ_EINVAL with the reason in err; *o unchanged on error. */
int kq_metering_opts_set(kq_metering_opts_t *o, const char *key_value, char *err, size_t errlen) KQ_WUR;

/* Usage text of the keys above, for --help. */
extern const char kq_metering_opts_help[];

/* New metering (no thread yet). With a state_dir: creates it if missing (mode 0700) and
 * resumes from its checkpoint (see above). NULL with the reason in err on a bad option,
 * an unusable state_dir, or when no good checkpoint can be read although one exists. */
kq_metering_t *kq_metering_new(const kq_metering_opts_t *o, char *err, size_t errlen);

/* Starts the compute thread. 0, KQ_ESTATE if already started, KQ_ENOMEM. */
int kq_metering_start(kq_metering_t *m) KQ_WUR;

/* When the thread was started: stops it, charges running pods up to now and writes a final
 * checkpoint (leader only). Then frees. Without a started thread nothing more is charged
 * or written (tests use this to stand for a crash). NULL is a no-op. */
void kq_metering_free(kq_metering_t *m);

/* ---- feeding (the pod informer; `at` <= 0 means "now" on the module's clock) ---- */

/* A bound, live pod: charged from max(bound_at, epoch). Idempotent: a pod already known is
 * confirmed (restored pods start being charged); a changed request is a resize at now.
 * group: the group the pod's application is tracked against (kq_ledger_pod_group),
 * or NULL. The pod's queue NULL (unresolvable) books to "root". 0, KQ_EINVAL (no uid or
 * user), KQ_ENOMEM. */
int kq_metering_pod_bound(kq_metering_t *m, const kq_pod_t *pod, const char *group, double bound_at) KQ_WUR;

/* The pod's request (its charge: containers and claims) changed: charges [last charged,
 * at] at the old size. 0 and nothing charged when new_request equals it; KQ_ENOENT when
 * the pod is not known. */
int kq_metering_pod_resized(kq_metering_t *m, const char *uid, const kq_resource_t *new_request, double at) KQ_WUR;

/* The pod was deleted or is terminal: charges up to max(at, bound time + minimum runtime)
 * and forgets it. KQ_ENOENT when not known (already ended: repeated calls are harmless). */
int kq_metering_pod_ended(kq_metering_t *m, const char *uid, double at);

/* Pending (not yet bound) pods: their cpu and memory count as used for utilisation.
 * _pending replaces the pod's previous pending request; _pending_gone forgets it (call it
 * when the pod is bound, deleted or terminal; unknown uids are ignored). */
int kq_metering_pod_pending(kq_metering_t *m, const char *uid, const kq_resource_t *req) KQ_WUR;
void kq_metering_pod_pending_gone(kq_metering_t *m, const char *uid);

/* Full list of pods: pods not confirmed by kq_metering_pod_bound between begin and end are
 * ended (see "Restart and relist"), pending pods not re-announced are forgotten. */
void kq_metering_resync_begin(kq_metering_t *m);
void kq_metering_resync_end(kq_metering_t *m);

/* Sum of the allocatable of the schedulable nodes. */
void kq_metering_set_nodes_allocatable(kq_metering_t *m, const kq_resource_t *total);

/* status.conditions[type=PodScheduled,status=True].lastTransitionTime (RFC 3339) as
 * seconds since the epoch. KQ_ENOENT when the pod has no such condition, KQ_EPARSE when the
 * time is malformed; *out untouched on error. */
int kq_metering_pod_scheduled_time(const kq_jnode_t *pod, double *out) KQ_WUR;

/* ---- budgets ---- */

/* Validates the budget properties of a partition (values: decimal credits >= 0, user and
 * group budget keys only on root). 0 or KQ_EPARSE with diagnostics (queue path, key). */
int kq_metering_check_config(const kq_partition_conf_t *p, kq_diags_t *diags) KQ_WUR;

/* Validates and applies the budgets of p (all or nothing: on error nothing changes).
 * p NULL clears every budget. */
int kq_metering_set_config(kq_metering_t *m, const kq_partition_conf_t *p, kq_diags_t *diags) KQ_WUR;

/* Filter: may a new pod of (user, group, queue) start? 0, or KQ_EDENIED with a reason
 * naming the owner, its budget and what it was charged, and *kind KQ_DENIAL_BUDGET (kind
 * may be NULL). group/queue may be NULL. */
int kq_metering_check_budget(kq_metering_t *m, const char *user, const char *group, const char *queue,
                             char *reason, size_t reason_len, kq_denial_t *kind) KQ_WUR;

/* ---- compute, views ---- */

/* Computes utilisation and multipliers, charges every running pod up to now (leader
 * only) and writes the checkpoint. 0, or KQ_EIO when the checkpoint could not be written
 * (charging goes on in memory; the error shows in the prices view and metrics). */
int kq_metering_compute_now(kq_metering_t *m);

/* Current multipliers (for tests and callers that price something). */
void kq_metering_multipliers(kq_metering_t *m, double *general, double *gpu);

/* Credits charged so far to an owner (kind "user", "group" or "queue"); 0 when none. */
double kq_metering_charged(kq_metering_t *m, const char *kind, const char *name);

/* GET /ws/v1/partition/{p}/prices: {"computedAt","computedAtUnix","leader",
 * "utilisation":{"cpu","memory","general","gpu"},"multipliers":{"general","gpu"},
 * "tippingPoints":{...},"increments":{...},"basePrices":{"cpu","memory","gpu"},
 * "units":{"cpu","memory","gpu"} (quantities),"gpuResources":[...],"intervalSeconds",
 * "minimumRuntimeSeconds","runningPods","checkpoint":{"dir","lastWrittenAt","error",
 * "restoredFrom"}}. New reference; NULL on ENOMEM. */
json_t *kq_metering_prices_json(kq_metering_t *m);

/* GET /ws/v1/partition/{p}/charges?user=&group=&queue=&from=&to=: days are "YYYY-MM-DD"
 * (UTC, inclusive; either may be NULL/empty). With no user/group/queue filter every owner
 * is listed; with filters only the filtered kinds, each with exactly the named owner
 * (listed even if never charged). Shape: {"from","to","users":[Charge],"groups":[Charge],
 * "queues":[Charge]} with Charge {"name","totalCredits","rangeCredits","days":[{"day",
 * "credits"}] (within the range, sorted),"budget","remaining"} (budget and remaining only
 * when a budget is set). 0 with *out a new reference; KQ_EINVAL (bad day, from > to) with
 * the reason in err; KQ_ENOMEM. */
int kq_metering_charges_json(kq_metering_t *m, const char *user, const char *group, const char *queue,
                             const char *day_from, const char *day_to, json_t **out, char *err,
                             size_t errlen) KQ_WUR;

/* Prometheus text (format 0.0.4) to append to /metrics:
 *   kubequota_price_multiplier{type="general|gpu"}            gauge
 *   kubequota_cluster_utilisation{resource="cpu|memory|general|gpu"}  gauge
 *   kubequota_queue_charged_credits_total{queue}              counter
 *   kubequota_user_charged_credits_total{user}                counter (per_owner only)
 *   kubequota_group_charged_credits_total{group}              counter (per_owner only)
 *   kubequota_metering_running_pods                           gauge
 *   kubequota_metering_checkpoint_failures_total              counter
 * New malloc'ed string; NULL on ENOMEM. */
char *kq_metering_metrics(kq_metering_t *m, bool per_owner);

#endif
