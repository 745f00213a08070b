/* Quota tree: hierarchical elastic quota groups (min, max, shared weight, allow-lent) and
 * the runtime each group may use now (Koordinator's multi-hierarchy elastic quota design).
 *
 * Groups. Every group has a name (unique in the tree), a parent (a parent group, or the
 * hidden root for first-level groups), min (guaranteed), max (names missing from max are
 * unlimited), a shared weight and allow-lent (default true). Only leaf groups run pods.
 * Two groups exist from the start and cannot be removed:
 *   - KQ_QTREE_SYSTEM: no min/max bound, outside the tree; pods in it are always
 *     admitted and its used is subtracted from the cluster total;
 *   - KQ_QTREE_DEFAULT: a first-level leaf (min 0, max unlimited at start); its min, max,
 *     weight and allow-lent are changed with kq_qtree_set_group like any group, but it
 *     must stay a first-level leaf. As Koordinator's default quota it is bounded by its
 *     max alone: it asks its root for what it uses (not what its pods request), takes that
 *     first, before any other group's share, so pending requests elsewhere never starve
 *     it, and it is never over its runtime (never reclaimed). Its pods are checked against
 *     its max and the cluster total.
 * KQ_QTREE_ROOT names the hidden root: as a parent name it means "first level" (like
 * NULL or ""); no group may be called "root" or "system".
 *
 * Cluster total (root runtime) = the allocatable the caller sets with
 * kq_qtree_set_cluster_total minus the system group's used, per resource named in the
 * allocatable. Runtime governs exactly those resources: a resource no schedulable node
 * offers is bounded only by max (until the first kq_qtree_set_cluster_total, runtime
 * bounds nothing). Set the total before serving filter requests.
 *
 * Scaled min (Koordinator's ScaleMinQuotaManager, koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/core/scale_minquota_when_over_root_res.go, called
 * from GroupQuotaManager.refreshRuntime). At every parent, per resource of the cluster
 * total, when the sum S of its children's mins exceeds E, what the parent shares (its
 * runtime; at the root the cluster total less what the default group takes first), each
 * child's scaled min is E * min / S computed in float64 and truncated, as Koordinator
 * computes it (so they may sum to a few units less than E); 0 when E is 0. The default
 * group is never scaled and not in S. Otherwise the scaled min is the min. Below the first
 * level this happens whenever a parent's runtime is less than its children's mins (an
 * idle parent lends, or nodes were lost).
 *
 * Masking (Koordinator's). A group whose max names some resources is not limited by it in
 * the others: it asks none of them, its runtime does not bound them (only its ancestors
 * and the cluster total do) and they are never "over" for reclaim; kq_qgroup_info_t.limit
 * and the JSON runtime carry only the named ones. A group with no max at all is governed
 * by runtime in every resource of the cluster total.
 *
 * Request. A leaf's request is the sum of the requests of its pods (pending and running:
 * kq_qtree_request_add/sub, one call per pod). What a group asks of its parent is
 * min(request, max) per resource its max names (see Masking); for a group with allow-lent false it is
 * min(max(request, min), max), because such a group keeps its whole min and its parent
 * must ask for it (Koordinator's request of a quota that does not lend: its min, not its
 * scaled min). A parent's request is the sum of what its children ask.
 *
 * Runtime, per resource and top-down, as Koordinator's RuntimeQuotaCalculator computes it
 * (runtime_quota_calculator.go: redistribution, iterationForRedistribution,
 * computeHamiltonDeltas): each child first gets min(asked, scaled min) (a group with
 * allow-lent false thus its whole scaled min, and it is hungry for the rest of its min);
 * what remains of the parent's runtime is shared among children whose ask exceeds what
 * they got, in proportion to shared weight, in rounds: floor shares, then the leftover
 * units one at a time by largest remainder (ties by name); a child that got more than its
 * ask gives the excess back and drops out, and what was given back is shared again among
 * the rest, until nothing is left or nobody is hungry. Units are the canonical integers of
 * resource.h (milli-cpu, bytes: Koordinator's MilliValue/Value); nothing is lost or
 * invented. A child's weight of a resource is its shared weight's value if named, else its
 * max if named, else the cluster total (an unlimited group weighs as much as the cluster).
 * A shared weight that is 0 in every resource (or names none) is no weight: the max
 * weighs instead, as Koordinator's GetSharedWeight falls back to the max. A weight of 0 in
 * one resource beside a non-zero one gets nothing of that resource from sharing (capacity
 * nobody else wants then stays idle). If the children's first shares ever exceed the
 * parent's runtime (only when the default group uses more than the cluster), the default
 * group keeps what it uses up to the runtime and the rest is apportioned in proportion to
 * the others' first shares.
 *
 * Enforcement (kq_qtree_check / kq_qtree_assume): a pod of group G with request R is
 * admitted when, at G and every ancestor including the root, for the resources that
 * level's max names (all, for a level without max), used + R <= runtime (for resources
 * runtime governs; not at the default group) and used + R <= max; a non-preemptible pod also needs
 * used of non-preemptible pods + R <= scaled min at each of those levels, for the
 * resources whose min that level names (the root's is the cluster total; a group without
 * a min for a resource guarantees nothing and is not checked for it). A pod naming a
 * parent group is denied. A group with sum_of_mins (scheduler-plugins' CapacityScheduling,
 * kubernetes-sigs/scheduler-plugins pkg/capacityscheduling) is not held to its own runtime
 * but to its max and to the sum rule instead: what all sum_of_mins groups use plus R must
 * stay within the sum of their mins, with CapacityScheduling's rules for names a max or a min
 * does not name (see sp_prefilter_locked: a max without cpu admits no cpu; a resource no
 * min names has a sum of mins of 0); its ancestors (the root) are checked as usual. Its
 * runtime is still computed and reclaim still uses it (on top of the preempt verb's
 * cross-namespace preemption, which scheduler-plugins alone relies on). Pods of the system
 * group are always admitted.
 *
 * Cost. kq_qtree_check and kq_qtree_assume, used_add/sub: O(depth x resources), reading
 * runtimes computed earlier; nothing is recomputed on a check. A request change
 * recomputes the request of each ancestor (O(children) per level, stopping where nothing
 * changes) and redistributes at each parent whose inputs or runtime changed, top-down,
 * descending only into children whose runtime changed. A change of the cluster total
 * (node or system-group used change) redistributes the whole tree: O(groups), about 2-3
 * ms for 10,000 groups on a 2-core VM. kq_qtree_set_group costs O(siblings) plus the
 * redistribution it causes, which may reach the whole tree (a new child changes what its
 * siblings get); bulk loads (10,000 groups, 100,000 pods) belong in a batch
 * (kq_qtree_batch_begin/end), where the whole load costs one O(groups) recomputation.
 *
 * Thread safety: every function may be called from any thread. One private mutex guards
 * the tree; it is taken after any ugm lock (ledger -> user -> group -> quota tree) and
 * nothing is called out (no I/O, no logging, no callbacks) while it is held.
 *
 * Ownership: specs and resources passed in are copied; kq_qtree_json returns a new
 * reference; kq_qtree_over_runtime returns a malloc'ed array the caller free()s.
 */
#ifndef KUBEQUOTA_QUOTA_TREE_H
#define KUBEQUOTA_QUOTA_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"

#define KQ_QTREE_ROOT "root"
#define KQ_QTREE_SYSTEM "system"
#define KQ_QTREE_DEFAULT "default"
#define KQ_QTREE_NAME_MAX 253 /* group names: 1..253 of [A-Za-z0-9._:/#@-] (queue paths fit) */
#define KQ_QTREE_MAX_DEPTH 32 /* first-level groups have depth 1 */

typedef struct kq_qtree kq_qtree_t;

/* Read-only for kq_qtree_set_group/validate_group, which copy what they keep: its sets may
 * be shallow copies of sets the caller keeps alive for the call (never freed through it). */
typedef struct kq_qgroup_spec {
    const char *name;            /* borrowed for the call */
    const char *parent;          /* NULL, "" or KQ_QTREE_ROOT: first level */
    kq_resource_t min;           /* guaranteed; missing names are 0 */
    kq_resource_t max;           /* missing names are unlimited */
    kq_resource_t shared_weight; /* missing names default to max, else the cluster total;
                                  * 0 in every name: no weight (see Runtime) */
    bool allow_lent;             /* default true */
    bool is_parent;              /* default false */
    bool sum_of_mins;            /* scheduler-plugins' admission rule (see Enforcement) */
    bool allow_force_update;     /* skip the children's-min-sum checks (Koordinator's
                                  * allow-force-update; scaled mins absorb the excess) */
} kq_qgroup_spec_t;

/* Fills *spec with the defaults: no min, max or weight, allow_lent true, leaf, first level. */
void kq_qgroup_spec_init(kq_qgroup_spec_t *spec, const char *name);

typedef struct kq_qgroup_info {
    char name[KQ_QTREE_NAME_MAX + 1];
    char parent[KQ_QTREE_NAME_MAX + 1]; /* "" for the root and the system group */
    bool is_parent, allow_lent, system;
    int depth;                          /* root 0, first level 1; system 1 */
    size_t n_children;
    int64_t pods;                       /* request_add minus request_sub calls */
    int64_t pods_used;                  /* used_add minus used_sub calls */
    kq_resource_t min, scaled_min, max, shared_weight;
    kq_resource_t request;              /* leaf: sum of pod requests; parent: sum of asks */
    kq_resource_t ask;                  /* what it asks of its parent (see Request) */
    kq_resource_t used, used_nonpreemptible, runtime;
    kq_resource_t limit;                /* runtime as it limits the group: only the resources
                                         * its max names (all, when it has no max); the
                                         * default group: its max; {} = unlimited */
} kq_qgroup_info_t;

/* A leaf group whose used exceeds its runtime or max (for reclaim). */
typedef struct kq_qgroup_over {
    char name[KQ_QTREE_NAME_MAX + 1];
    kq_resource_t over; /* per resource: used - min(runtime, max), only positive entries */
} kq_qgroup_over_t;

/* New tree with the root, the system group and the default group; no cluster total.
 * NULL on ENOMEM. */
kq_qtree_t *kq_qtree_new(void);
/* Frees the tree. NULL is a no-op. */
void kq_qtree_free(kq_qtree_t *t);

/* Creates or updates the group spec->name, validated against the current tree:
 * name valid and not reserved; the parent exists (KQ_ENOENT) and is a parent group; no
 * cycle, depth <= KQ_QTREE_MAX_DEPTH; min <= max per resource; below the first level the
 * children's mins sum to at most the parent's min (both for the group among its new
 * siblings and for its own children); a group with children cannot become a leaf and a
 * leaf with pods (pods, pods_used, request or used non-zero) cannot become a parent
 * (KQ_ESTATE); the default group stays a first-level leaf. Moving a group (with its
 * subtree and usage) to another parent is allowed when these rules hold.
 * Applies atomically or changes nothing: KQ_EINVAL/KQ_ENOENT/KQ_ESTATE with the reason in
 * err, KQ_ERANGE when moved usage would overflow, KQ_ENOMEM. */
int kq_qtree_set_group(kq_qtree_t *t, const kq_qgroup_spec_t *spec, char *err, size_t errlen) KQ_WUR;

/* The same checks as kq_qtree_set_group without changing anything (admission webhook). */
int kq_qtree_validate_group(kq_qtree_t *t, const kq_qgroup_spec_t *spec, char *err, size_t errlen) KQ_WUR;

/* Removes a group. KQ_ENOENT unknown; KQ_EINVAL for root, system, default; KQ_ESTATE when
 * it has children. Its pods fall to the default group: its request, used, non-preemptible
 * used and pod counts move to KQ_QTREE_DEFAULT, and the caller must from now on add and
 * release those pods against KQ_QTREE_DEFAULT. KQ_ERANGE (nothing changed) if that
 * would overflow the default group's counters. */
int kq_qtree_remove_group(kq_qtree_t *t, const char *name, char *err, size_t errlen) KQ_WUR;

/* Bulk changes (an informer's initial LIST, a full resync of the group specs). Between
 * kq_qtree_batch_begin and kq_qtree_batch_end, group, request, used and cluster total
 * changes are validated and applied to specs, leaf requests and usage at once, but what
 * is derived from them (scaled mins, parents' requests, runtimes) is left pending: N
 * changes cost one O(groups) recomputation at the end instead of up to N of them. A call
 * that reads derived values (check, check_preempt, assume, runtime, info, over_runtime,
 * json) completes what is pending first (O(groups) once after changes), so every answer
 * is exact, batch or not. Batches nest (a counter); every begin needs one end; an end
 * without a begin is ignored. Any thread. */
void kq_qtree_batch_begin(kq_qtree_t *t);
void kq_qtree_batch_end(kq_qtree_t *t);

/* Sets the allocatable of the schedulable nodes (summed by the caller). */
void kq_qtree_set_cluster_total(kq_qtree_t *t, const kq_resource_t *allocatable);

/* One pod's request enters (pending or running) or leaves the group. KQ_ENOENT unknown
 * group, KQ_EINVAL for a parent group, KQ_ERANGE on overflow (nothing changed). A
 * subtraction is clamped at 0 and never fails for a known leaf. */
int kq_qtree_request_add(kq_qtree_t *t, const char *group, const kq_resource_t *req) KQ_WUR;
int kq_qtree_request_sub(kq_qtree_t *t, const char *group, const kq_resource_t *req) KQ_WUR;

/* One pod's resources become used (bound) or are released, at the group and every
 * ancestor; nonpreemptible also counts them as non-preemptible used. No quota check
 * (use kq_qtree_assume for that). Errors as for request_add/sub. */
int kq_qtree_used_add(kq_qtree_t *t, const char *group, const kq_resource_t *res, bool nonpreemptible) KQ_WUR;
int kq_qtree_used_sub(kq_qtree_t *t, const char *group, const kq_resource_t *res, bool nonpreemptible) KQ_WUR;

/* Would a pod of `group` with request `req` be admitted now? 0 when yes; KQ_EDENIED with a
 * reason naming the group, the resource and both numbers, e.g.
 * "quota group team-a: cpu used 6 + request 2 would exceed runtime 7"; KQ_ENOENT for an
 * unknown group. Changes nothing. *kind (may be NULL) gets the denial's kind:
 * KQ_DENIAL_OVER_RUNTIME, _OVER_LIMIT (a max, a min of non-preemptible pods, the sum of
 * mins), _NEVER_FITS, _GROUP_NOT_LEAF, or _GROUP_MISSING with KQ_ENOENT. */
int kq_qtree_check(kq_qtree_t *t, const char *group, const kq_resource_t *req, bool nonpreemptible,
                   char *reason, size_t reasonlen, kq_denial_t *kind) KQ_WUR;

/* kq_qtree_check for a pod whose request is not yet in its group's request (a pod being
 * created: the API server has not stored it, so no watch event has added it). A group's
 * runtime follows its request, so the plain check would hold the pod to a runtime computed
 * without it (0 for an idle group); here the request is added, the runtimes recomputed,
 * the pod checked and the request taken out again, all under the tree's lock: no other
 * reader ever sees the pod's request in. Changes nothing. Costs two request changes
 * (see Cost). */
int kq_qtree_check_new(kq_qtree_t *t, const char *group, const kq_resource_t *req, bool nonpreemptible,
                       char *reason, size_t reasonlen, kq_denial_t *kind) KQ_WUR;

/* As kq_qtree_check, as if `victims` (the summed requests of pods of the same group that
 * preemption would evict) were released first. Changes nothing. */
int kq_qtree_check_preempt(kq_qtree_t *t, const char *group, const kq_resource_t *req,
                           const kq_resource_t *victims, bool nonpreemptible, char *reason,
                           size_t reasonlen, kq_denial_t *kind) KQ_WUR;

/* kq_qtree_check and, when admitted, kq_qtree_used_add in one step under the lock. */
int kq_qtree_assume(kq_qtree_t *t, const char *group, const kq_resource_t *req, bool nonpreemptible,
                    char *reason, size_t reasonlen, kq_denial_t *kind) KQ_WUR;

/* kq_qtree_check_preempt and, when admitted, kq_qtree_used_add of req (the victims stay
 * used: they are released when their pods go) in one step under the lock. victims NULL is
 * kq_qtree_assume. For the preemptor of an in-flight preemption (ledger.h). */
int kq_qtree_assume_preempt(kq_qtree_t *t, const char *group, const kq_resource_t *req,
                            const kq_resource_t *victims, bool nonpreemptible, char *reason,
                            size_t reasonlen, kq_denial_t *kind) KQ_WUR;

/* kq_qtree_check_preempt / kq_qtree_assume_preempt with `others` (may be NULL): the
 * summed requests of victims in other scheduler-plugins (sum_of_mins) groups, which lower
 * only what all those groups use in the sum rule (CapacityScheduling's cross-namespace
 * preemption). */
int kq_qtree_check_across(kq_qtree_t *t, const char *group, const kq_resource_t *req, const kq_resource_t *victims,
                          const kq_resource_t *others, bool nonpreemptible, char *reason, size_t reasonlen,
                          kq_denial_t *kind) KQ_WUR;
int kq_qtree_assume_across(kq_qtree_t *t, const char *group, const kq_resource_t *req, const kq_resource_t *victims,
                           const kq_resource_t *others, bool nonpreemptible, char *reason, size_t reasonlen,
                           kq_denial_t *kind) KQ_WUR;

/* scheduler-plugins' usedOverMin (with NULL) or usedOverMinWith(with) of `group`
 * (pkg/capacityscheduling/elasticquota.go): whether its used (plus `with`) exceeds its min
 * in some resource, with cmp2's rules (an unnamed min is 0). *sum_of_mins (may be NULL)
 * says whether the group is a scheduler-plugins group at all; false and *sum_of_mins
 * false for any other or unknown group. */
bool kq_qtree_sp_over_min(kq_qtree_t *t, const char *group, const kq_resource_t *with, bool *sum_of_mins);

/* The group's current runtime (resources the cluster total names) into *out (an
 * initialised set, see resource.h). KQ_ENOENT unknown, KQ_ENOMEM. The system group's
 * runtime is empty (unlimited). */
int kq_qtree_runtime(kq_qtree_t *t, const char *group, kq_resource_t *out) KQ_WUR;

/* Whether the group exists (O(1)); *is_parent (if non-NULL) says whether it is a parent
 * group. The system group and the default group exist; KQ_QTREE_ROOT is a parent. */
bool kq_qtree_lookup(kq_qtree_t *t, const char *group, bool *is_parent);

/* Everything about one group (KQ_QTREE_ROOT included). KQ_ENOENT unknown, KQ_ENOMEM.
 * *out is overwritten (not freed first); on success the caller owns its sets and
 * releases them with kq_qtree_info_free. */
int kq_qtree_info(kq_qtree_t *t, const char *group, kq_qgroup_info_t *out) KQ_WUR;
/* Frees the sets of an info filled by kq_qtree_info (the struct itself is the caller's). */
void kq_qtree_info_free(kq_qgroup_info_t *info);

/* Leaf groups (default included, system excluded) whose used exceeds min(runtime, max) in
 * some resource, sorted by name. *out is a new array (NULL when *n is 0), released with
 * kq_qtree_over_free. 0 or KQ_ENOMEM. */
int kq_qtree_over_runtime(kq_qtree_t *t, kq_qgroup_over_t **out, size_t *n) KQ_WUR;
/* Frees an array from kq_qtree_over_runtime and its sets. NULL is a no-op. */
void kq_qtree_over_free(kq_qgroup_over_t *v, size_t n);

/* {"clusterAllocatable": {...}, "clusterTotal": {...}, "groups": [ {"name", "parent"
 * (null for root and system), "isParent", "minResource", "scaledMinResource",
 * "maxResource", "sharedWeight" (effective, per resource), "allowLent",
 * "requestResource", "allocatedResource", "nonPreemptibleAllocated", "runtimeResource"
 * (kq_qgroup_info_t.limit; {} = unlimited), "pods", "children": [names] }, ... ]}, groups in depth-first order
 * from the root with children by name, the system group last. New reference; NULL on
 * ENOMEM. */
json_t *kq_qtree_json(kq_qtree_t *t);

#endif
