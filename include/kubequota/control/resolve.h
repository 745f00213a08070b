/* The pod -> quota group resolver: which group of the quota tree a pod counts in, and
 * whether a pod may name the quota its label names. Called by the pod ledger (counting and
 * level-triggered re-resolution), the extender's filter, bind, preempt and explain, the
 * admission webhooks (kq_elastic_check_pod, kq_elastic_validate_admission) and the
 * admission gate. The elastic module (elastic.h) builds what it reads from the groups it
 * applied and hands it over whole (kq_resolve_swap).
 *
 * A pod's quota group (kq_resolve_pod), first match wins:
 *   1. the pod's namespace is a system namespace -> KQ_QTREE_SYSTEM;
 *   2. label quota.scheduling.koordinator.sh/name: the group it names (a parent group
 *      too: the pod is then denied, "only leaf groups run pods"); a name that is no
 *      group ("koordinator-default-quota", "koordinator-system-quota", unknown names)
 *      -> the default group, as Koordinator does (a label never reaches the system group).
 *      Not taken when the group does not govern the pod's namespace
 *      (kq_resolve_check_quota_name, issue 37): the next steps decide;
 *   3. the namespace's quota, in this order: the Koordinator object named like the
 *      namespace in that namespace; the Koordinator object whose annotation
 *      quota.scheduling.koordinator.sh/namespaces lists it; the scheduler-plugins object
 *      in the namespace. Never "the first object of the namespace": of two objects at the
 *      same rank the one seen first binds the namespace and the other is logged;
 *   4. the quota group of the pod's queue (kubequota.io/queue or the namespace queue,
 *      see pod.h), when that group exists, is a leaf and bounds something (the queue or
 *      one of its parents has guaranteed or max resources: a queue without any is no
 *      quota, so Koordinator's default-quota rules apply to its pods);
 *   5. KQ_QTREE_DEFAULT.
 * Resolution is level-triggered (issue 38): the answer is a function of what exists now,
 * and the ledger asks again for every pod when a swap changed it (kq_ledger_reresolve).
 *
 * Threads and locks: one private rwlock guards the snapshot (namespace map, bounded queue
 * groups, who may name each group); readers take it for reading, kq_resolve_swap for
 * writing, for O(1) steps with no allocation and no I/O. The quota tree's lock is taken
 * after it (order: ledger -> resolver -> quota tree; the elastic module swaps under its
 * apply lock: apply -> resolver).
 */
#ifndef KUBEQUOTA_RESOLVE_H
#define KUBEQUOTA_RESOLVE_H

#include <stdbool.h>
#include <stddef.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/quota_tree.h"
#include "kubequota/kube/pod.h"

typedef struct kq_resolver kq_resolver_t;
/* A snapshot being built (kq_resolve_map_*), then swapped in whole. */
typedef struct kq_resolve_map kq_resolve_map_t;

/* New resolver over the tree qt (borrowed; must outlive it) with the system namespaces
 * ns[n] (borrowed, as kq_elastic_opts_t's). NULL on ENOMEM. */
kq_resolver_t *kq_resolver_new(kq_qtree_t *qt, const char *const *system_namespaces, size_t n);
/* NULL is a no-op. */
void kq_resolver_free(kq_resolver_t *r);

/* Whether ns is one of the system namespaces. No lock. */
bool kq_resolve_system_ns(const kq_resolver_t *r, const char *ns);

/* The pod's quota group (rules above) in group; 0. KQ_ENOENT never: every pod has one.
 * Matches kq_ledger_resolve_fn (ud = the resolver). */
int kq_resolve_pod(void *ud, const kq_pod_t *pod, char *group, size_t len);

/* Issue 37: may the pod name the quota its label quota.scheduling.koordinator.sh/name names?
 * Only a quota that governs its namespace: an ElasticQuota object of its namespace, or one
 * whose namespaces annotation lists it (a scheduler-plugins object: of its namespace); a
 * profile's root group of its namespace; the quota group of the pod's own queue (pod->queue;
 * not checked while NULL); the default group (or a name that means it:
 * koordinator-default-quota, -root-quota, -system-quota, root, system) only when the
 * namespace has no quota of its own. Pods of system namespaces and pods without the label
 * pass, and so does every pod when r is NULL. 0, or KQ_EDENIED with msg and *kind:
 * KQ_DENIAL_QUOTA_NOT_FOUND (no group of that name: not applied yet, or never) or
 * KQ_DENIAL_QUOTA_OTHER_NS. A read lock, no allocation. kq_resolve_pod does not take a label
 * this refuses for another namespace: such a pod, bound by someone else, counts as if it
 * had no label. */
int kq_resolve_check_quota_name(kq_resolver_t *r, const kq_pod_t *pod, char *msg, size_t len,
                                kq_denial_t *kind) KQ_WUR;
/* The same for a pod known by its namespace ns and name pod (for messages) naming quota
 * `name`, of queue `queue` (NULL when not known, as at admission). kind may be NULL. */
int kq_resolve_check_name(kq_resolver_t *r, const char *ns, const char *pod, const char *name, const char *queue,
                          char *msg, size_t len, kq_denial_t *kind) KQ_WUR;

/* Ranks of a namespace's quota (resolution step 3; the lower wins). */
#define KQ_RESOLVE_RANK_NAMED    0 /* Koordinator's object named like the namespace, in it */
#define KQ_RESOLVE_RANK_LISTED   1 /* a Koordinator object's namespaces annotation lists it */
#define KQ_RESOLVE_RANK_UPSTREAM 2 /* the scheduler-plugins object in the namespace */

/* Whether namespace ns is bound to a quota at a rank of at most max_rank; its group is then
 * copied into group (len bytes with the NUL). A read lock. */
bool kq_resolve_namespace_quota(kq_resolver_t *r, const char *ns, int max_rank, char *group, size_t len);

/* ---- the snapshot (built by the elastic module from the groups it applied) ---- */

/* Who may name a group by the quota label (kq_resolve_check_name). */
enum { KQ_RESOLVE_GOV_OBJECT, KQ_RESOLVE_GOV_QUEUE, KQ_RESOLVE_GOV_DEFAULT };

/* An empty snapshot; NULL on ENOMEM. */
kq_resolve_map_t *kq_resolve_map_new(void);
/* NULL is a no-op. */
void kq_resolve_map_free(kq_resolve_map_t *m);
/* Namespace ns resolves to group at rank (step 3) unless it is bound already at a rank as
 * low: then false, and *lost_to (may be NULL) names the holder when it holds the same rank
 * for another group (NULL otherwise; borrowed from m). True when bound (an entry that cannot
 * be allocated is left out, as if bound). */
bool kq_resolve_map_bind(kq_resolve_map_t *m, const char *ns, const char *group, int rank, const char **lost_to);
/* Queue group `group` bounds something (step 4). Left out on ENOMEM. */
void kq_resolve_map_bounded_queue(kq_resolve_map_t *m, const char *group);
/* Who may name group: kind (KQ_RESOLVE_GOV_*), for GOV_OBJECT the namespace ns and the
 * namespaces nss[n] (copied). On ENOMEM the snapshot remembers it and kq_resolve_swap keeps
 * the previous view of the names (logged). */
void kq_resolve_map_govern(kq_resolve_map_t *m, const char *group, int kind, const char *ns, char *const *nss,
                           size_t n);
/* Swaps m in (takes ownership) under the write lock. True when a pod may now resolve
 * differently (the namespace map or the bounded queues changed). */
bool kq_resolve_swap(kq_resolver_t *r, kq_resolve_map_t *m);

#endif
