/* Pod ledger: the only place that turns pod events into quota engine increases and
 * decreases. Keyed by pod UID; each pod is counted at most once and released exactly
 * once, whichever path (bind, watch, relist) sees it first.
 *
 * States of a known pod:
 *   PENDING  known (from the watch or a filter/bind lookup), not counted
 *   ASSUMED  counted by kq_ledger_assume at bind time, not yet seen bound by the watch
 *            (or RESERVED: counted by kq_ledger_reserve for the admission gate, below)
 *   BOUND    counted, and the watch has shown it bound to a node
 * A pod that is deleted or terminal is released (if counted) and forgotten.
 * The ledger remembers exactly what it counted (queue, application, user, request) and
 * releases that, even if the pod's labels change later. A bound pod without a valid queue
 * is counted against "root" (and a warning logged). An in-place resize of a bound pod
 * releases the old request and counts the new one; a resize admitted by
 * kq_ledger_check_resize is counted from its admission (see there).
 *
 * Relist (after a 410 or at start): kq_ledger_resync_begin, kq_ledger_observe for each
 * listed pod, kq_ledger_resync_end: pods not listed are released, except pods assumed
 * after the resync began (their bind may be in flight).
 *
 * Elastic quota (kq_ledger_set_qtree): each pod is also accounted in the quota tree, in
 * the quota group the resolver names for it (see resolve.h): its request while it is a
 * pending pod of our scheduler or counted (kq_qtree_request_add/sub), and its request as
 * used while counted (kq_qtree_used_add/sub; non-preemptible pods also as non-preemptible
 * used). Like the queue, the group a pod is counted in is remembered and released
 * verbatim. Enforcement at bind is check-and-commit across the ugm AND the quota tree:
 * both are committed or neither. A bound pod whose group is gone or is a parent is
 * counted in KQ_QTREE_DEFAULT. Without a quota tree the ledger behaves as before.
 *
 * In-flight preemption (kq_ledger_preempt_note): the victims the preempt verb answered
 * for a preemptor, per node, for as long as they may still be counted; filter and bind of
 * that preemptor (only it) on such a node check the quota tree as if those victims were
 * gone. See "in-flight preemption" below.
 *
 * Admission reservations (kq_ledger_admit): a pod created with spec.nodeName never meets
 * filter or bind, so the validating webhook counts it, checked, before the API server
 * stores it; see "admission of pods created with spec.nodeName" below.
 *
 * DESIGN: one mutex guards the UID table, the in-flight preemption table and the list of
 * admission reservations; engine calls
 * are made under it (lock order: ledger -> ugm -> quota tree, and ledger -> fairshare and
 * ledger -> requeue, leaves). No I/O under the lock:
 * bind POSTs happen in the caller, between assume and forget. The resolver is called with
 * no ledger lock held, except by re-resolution (kq_ledger_reresolve, and a pod resolved
 * while one ran), which calls it under the ledger lock: the resolver may take only locks
 * that come after the ledger's (the resolver's lock, the quota tree's). A second, private
 * feed lock orders the charges handed to metering; it is taken before the ledger lock and
 * held while metering is called, never under the ledger lock (see "metering: a pod's
 * charge"): feed -> ledger, feed -> metering.
 */
#ifndef KUBEQUOTA_LEDGER_H
#define KUBEQUOTA_LEDGER_H

#include <stdbool.h>
#include <stddef.h>

#include "kubequota/base/error.h"
#include "kubequota/control/claims.h"
#include "kubequota/kube/pod.h"
#include "kubequota/engine/fairshare.h"
#include "kubequota/engine/quota_tree.h"
#include "kubequota/engine/ugm.h"

typedef struct kq_ledger kq_ledger_t;

/* The ledger borrows ugm (it must outlive the ledger). scheduler_name: pods with this
 * spec.schedulerName are "ours" (pending resources are shown for them). */
kq_ledger_t *kq_ledger_new(kq_ugm_t *ugm, const char *scheduler_name);
void kq_ledger_free(kq_ledger_t *l);

/* Issue 29: may the pod join its application? 0 yes (nobody owns the application id, or
 * the pod's user does); KQ_EDENIED when another user owns it, with the owner in owner[]
 * (for logs only; may be NULL) and the reason in reason[]. O(1). Takes no ledger lock. */
int kq_ledger_app_owner(kq_ledger_t *l, const kq_pod_t *pod, char *owner, size_t owner_len, char *reason,
                        size_t reason_len) KQ_WUR;

/* Filter: would the pod fit? 0 when it fits, or when it is already counted and its request
 * (pod->request) has not grown past what it is counted with (a growth is checked as
 * kq_ledger_check_resize checks one, committing nothing); KQ_EDENIED with the
 * reason (also for an unresolvable queue) and, when kind is not NULL, its kind (the ugm's,
 * the quota tree's, or the pod's queue_denial). Changes nothing: a filter request may name
 * a pod the API server does not know (anyone who reaches the port can send one), so it
 * leaves no state behind; the watch makes pods known. Every function below that gives a
 * reason gives its kind the same way. */
int kq_ledger_check(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                    kq_denial_t *kind) KQ_WUR;

/* Bind: check and count the pod (enforced). 0 when counted now or already counted;
 * KQ_EDENIED with the reason, no usage changed. A pod counted already (the gate's
 * reservation) whose request grew since (a resize) is counted with the new request: the
 * growth is checked and committed, or the bind denied. A pod with a resize reservation
 * (kq_ledger_check_resize) is counted with at least its request. With a quota tree: ugm and tree are both
 * committed or neither; a pod not known yet is first remembered as pending (its request
 * enters its group's request, which its group's runtime depends on) and stays so when
 * denied. */
int kq_ledger_assume(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                     kq_denial_t *kind) KQ_WUR;

/* Bind failed: release what kq_ledger_assume counted, unless the watch has confirmed the
 * pod bound meanwhile. KQ_ENOENT when the pod is not assumed. */
int kq_ledger_forget(kq_ledger_t *l, const char *uid);

/* Watch ADDED/MODIFIED (and relist items): bound and alive -> counted (unchecked: reality
 * is never refused); terminal or deleted -> released; unassigned -> pending. */
void kq_ledger_observe(kq_ledger_t *l, const kq_pod_t *pod);

/* Watch DELETED: release if counted, forget. */
void kq_ledger_remove(kq_ledger_t *l, const char *uid);

void kq_ledger_resync_begin(kq_ledger_t *l);
void kq_ledger_resync_end(kq_ledger_t *l);

/* Copy of what the ledger knows of a pod (for bind, which only gets name/namespace/uid).
 * 0 or KQ_ENOENT. */
int kq_ledger_lookup(kq_ledger_t *l, const char *uid, kq_pod_t *out) KQ_WUR;

bool kq_ledger_is_counted(kq_ledger_t *l, const char *uid);

/* True when the watch (or a relist) has shown the pod: the API server knows it. */
bool kq_ledger_is_observed(kq_ledger_t *l, const char *uid);

/* Waits up to timeout_ms for the watch (or a relist) to show the pod with this uid; true
 * when it has, false at once for timeout_ms <= 0 and an unseen pod. For the filter of a
 * pod kube-scheduler's watch showed before ours (ours usually follows within a few ms).
 * Call it holding no other lock: it waits on the ledger's lock. */
bool kq_ledger_wait_observed(kq_ledger_t *l, const char *uid, int timeout_ms);

/* The user group the pod's application is (or would be) tracked against, as the ugm
 * chooses it (kq_ugm_group_of; an unresolvable queue counts at "root"). out gets "" for no
 * group. No ledger lock is taken. */
int kq_ledger_pod_group(kq_ledger_t *l, const kq_pod_t *pod, char *out, size_t outlen) KQ_WUR;

/* ---- elastic quota ---- */

/* Names the quota group of a pod in group (NUL-terminated, at most len-1 bytes). 0, or
 * KQ_ENOENT when the pod is not subject to the quota tree. Called with no ledger lock
 * held; it may take its own locks and the quota tree's. */
typedef int (*kq_ledger_resolve_fn)(void *ud, const kq_pod_t *pod, char *group, size_t len);

/* Wires the quota tree (borrowed; must outlive the ledger) and the group resolver. Call
 * once, before any pod is known to the ledger. */
void kq_ledger_set_qtree(kq_ledger_t *l, kq_qtree_t *t, kq_ledger_resolve_fn resolve, void *ud);

/* kq_ledger_check that also says whether a denial came from the quota tree (*by_tree;
 * preemption inside the group may then help) rather than from a user/group/queue limit.
 * Like kq_ledger_check it changes nothing: a pod the watch has not shown yet does not
 * enter its group's request here (a forged filter could otherwise raise any group's
 * request and cut another group's runtime); the watch adds it a moment later. */
int kq_ledger_check_ex(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                       bool *by_tree, kq_denial_t *kind) KQ_WUR;

/* With a quota tree: remembers a pod of our scheduler the ledger does not know yet as
 * pending (its request enters its group's request, as the watch would do a moment
 * later; a group's runtime depends on its request). The caller has confirmed with the API
 * server that the pod exists (filter GETs it): a forged filter must leave nothing. An
 * entry the watch never confirms is dropped by kq_ledger_expire_unobserved or the next
 * relist. No-op without a quota tree or for a known pod. */
void kq_ledger_note_pending(kq_ledger_t *l, const kq_pod_t *pod);
bool kq_ledger_has_qtree(kq_ledger_t *l);

/* Admission of an in-place resize (pods/resize; pod is the object after it). What a pod
 * counts with is always its request at the moment it is counted, so:
 *  - a counted pod (bound, being bound, or reserved by the gate): its growth (pod->request
 *    above what it is counted with, per resource) is checked against the queue,
 *    application, user and quota group it is counted in (the growth enters the group's
 *    request first: a group's runtime follows its request) and COMMITTED, check and commit
 *    under the ledger lock, so that two resizes admitted one after the other never pass a
 *    limit together. KQ_EDENIED with the reason when it does not fit (kind NEVER_FITS when
 *    pod->request alone is over a max); except a reserved pod that still carries its gate
 *    (its gate removal in flight), whose reservation is dropped instead (0): it is decided
 *    afresh with the new request;
 *  - a pod not counted (waiting at the gate or for kube-scheduler): refused only when
 *    pod->request can never fit (KQ_EDENIED, kind NEVER_FITS); whoever counts it later
 *    (the gate, a bind, the watch) counts the new request;
 *  - a pod the ledger does not know: 0.
 * An admitted resize is remembered as the pod's *resize reservation* until the watch shows
 * the pod with at least that request, or for KQ_LEDGER_RESIZE_TTL_MS (a resize refused
 * after this admission, by the API server or another webhook): meanwhile the pod counts
 * with at least it, and when it ends unseen a counted pod goes back to the request the
 * watch shows. Expired reservations end at the next pod event, gate timer tick, bind or
 * resize admission after their time. */
int kq_ledger_check_resize(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                           kq_denial_t *kind) KQ_WUR;

/* A dry run's resize (AdmissionReview request.dryRun, e.g. kubectl --dry-run=server): the
 * decision kq_ledger_check_resize would make now, with nothing committed: no growth
 * counted, no resize reservation, no reservation dropped. */
int kq_ledger_check_resize_dry(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                               kq_denial_t *kind) KQ_WUR;

#define KQ_LEDGER_RESIZE_TTL_MS 30000

/* Changes the lifetime of new resize reservations (tests). */
void kq_ledger_set_resize_ttl_ms(kq_ledger_t *l, int64_t ttl_ms);

/* Removes the quota group `group` from the tree (kq_qtree_remove_group) and, in the same
 * step under the ledger lock, makes every pod counted or pending in it belong to
 * KQ_QTREE_DEFAULT, so each is still released exactly once. Errors as
 * kq_qtree_remove_group; KQ_ESTATE when no quota tree is wired. */
int kq_ledger_remove_group(kq_ledger_t *l, const char *group, char *err, size_t errlen) KQ_WUR;

/* Level-triggered resolution (issue 38): asks the resolver again for every known pod and
 * moves each pod whose answer changed, under the ledger lock, in one step: its request
 * (pending or counted) and, when counted, its used and non-preemptible used, from the
 * group it is in to the new one (a new group that is gone or a parent: the default group).
 * A counted pod is moved unchecked, as Koordinator's migrateDefaultQuotaGroupsPod moves a
 * running pod (koordinator-sh/koordinator pkg/scheduler/plugins/elasticquota/plugin.go):
 * what runs is never refused. Call it after anything the resolver reads has changed (a
 * quota created, updated or deleted, a profile, the config) and once the quota objects
 * have been listed, so that the tree a pod is filed in never depends on the order in which
 * the pod and its quota arrived. O(pods) with the ledger lock held: for quota events,
 * never for filter or bind. A pod resolved with no lock held while a re-resolution ran is
 * asked again when it is stored. When a pod moved, the release hook is called once (a pod
 * denied a moment ago, say for want of its quota, may fit now: control/requeue.h pokes it).
 * Returns how many pods moved. No-op without a tree. */
size_t kq_ledger_reresolve(kq_ledger_t *l);

/* Re-placement (issue 38): a pod's queue is a function of the pod and the config in force
 * now, as its quota group is. place fills pod->queue (or queue_error and queue_denial) by
 * the config in force when it is called (kq_pod_place); 0 or KQ_ENOMEM. It is called under
 * the ledger lock: it may take only locks that come after the ledger's (the config
 * holder's, the ugm's for the dynamic queue hooks, the namespace table's). NULL stops. */
typedef int (*kq_ledger_place_fn)(void *ud, kq_pod_t *pod);
void kq_ledger_set_placement(kq_ledger_t *l, kq_ledger_place_fn place, void *ud);

/* Asks placement again for every known pod, after the config (or anything else placement
 * reads) changed, and moves each pod whose queue changed in one step under the ledger
 * lock: a counted pod's usage and application membership (user, group and queue trackers)
 * from the queue it was counted in to its new one, unchecked, as a running pod is never
 * refused (a queue may so exceed its max; later pods are refused until it is back under);
 * a pending pod's pending request; then the quota groups of the pods that moved are asked
 * again (resolution step 4 reads the queue), as kq_ledger_reresolve does. Counted pods
 * move in two phases (every release, then every count), so an application whose pods all
 * move is counted afresh in its new queue, as by a freshly started kubequota; one whose
 * pods end in two queues runs in both, as the ugm counts any such application. A dynamic
 * queue is made for a moved pod as for a new one (the placement hooks). O(pods) with the
 * lock held: for reloads, never for filter or bind. The release hook is called when pods
 * moved. Returns how many pods moved. No-op without a placement function. */
size_t kq_ledger_place_again(kq_ledger_t *l);

/* The same for one pod (a pod placed by a config older than the one in force when it was
 * stored: the informer parsed it just before a reload). true when it moved.
 * With a placement wired, kq_ledger_assume, _assume_on and _reserve also place the pod
 * they are given again before counting it (one placement: O(rules), never O(pods)), so a
 * copy older than the last reload (a pod that waited at the gate across it, a bind's
 * lookup just before it) is checked and counted where the config in force puts it; one
 * placed while a kq_ledger_place_again ran is placed again under the lock. */
bool kq_ledger_place_again_pod(kq_ledger_t *l, const char *uid);

/* A counted pod of a quota group, for reclaim (copies; free with kq_ledger_victims_free). */
typedef struct kq_ledger_victim {
    char *uid, *ns, *name;
    char *group;          /* its quota group; NULL: not in the tree */
    char *app, *queue;    /* the application and queue it is counted in */
    int32_t priority;
    int64_t created;      /* seconds since epoch, 0 unknown */
    bool preemptible;
    kq_resource_t req;    /* what it is counted with */
} kq_ledger_victim_t;

/* Every counted pod of `group` (a scan of the ledger: for the reclaim timer, never for
 * filter or bind). *out NULL when *n is 0. 0 or KQ_ENOMEM. */
int kq_ledger_group_pods(kq_ledger_t *l, const char *group, kq_ledger_victim_t **out, size_t *n) KQ_WUR;
/* Every counted pod bound to `node` (a scan of the ledger: for preemption, never for
 * filter or bind; a pod whose bind is still in flight has no node yet). */
int kq_ledger_node_pods(kq_ledger_t *l, const char *node, kq_ledger_victim_t **out, size_t *n) KQ_WUR;
void kq_ledger_victims_free(kq_ledger_victim_t *v, size_t n);
/* What the counted pods bound to each of `nodes` (n names, sorted by strcmp) request, with
 * pods: 1 each (as the ugm counts them): used[i] (initialised sets) gains the sum for nodes[i]. One scan of the ledger under its lock, for
 * the REST node views (never for filter or bind). 0 or KQ_ENOMEM. */
int kq_ledger_nodes_used(kq_ledger_t *l, const char *const *nodes, size_t n, kq_resource_t *used) KQ_WUR;

/* Whether the ledger holds a pod (pending or counted) that match accepts; its namespace and
 * name then go into ns / name (may be NULL). A scan of the ledger under its lock, for the
 * admission webhook: match must not call into the ledger, block or do I/O. */
bool kq_ledger_find_pod(kq_ledger_t *l, bool (*match)(void *ud, const kq_pod_t *pod), void *ud, char *ns,
                        size_t nslen, char *name, size_t namelen);

/* The quota group and request a counted pod is counted with, and its priority. KQ_ENOENT
 * when the pod is not counted or not in the quota tree; KQ_ENOMEM. req (if non-NULL) is an
 * initialised set (kq_resource_copy). */
int kq_ledger_counted_group(kq_ledger_t *l, const char *uid, char *group, size_t glen, kq_resource_t *req,
                            int32_t *priority) KQ_WUR;

/* Forgets pending entries known only from filter/bind (never seen by the watch) that are
 * older than max_age_s seconds. Returns how many were dropped. */
size_t kq_ledger_expire_unobserved(kq_ledger_t *l, int64_t max_age_s);
/* ---- gating (control/gating.h) ----
 *
 * RESERVED is an ASSUMED pod counted for the admission controller before its scheduling
 * gate is removed: counted (filter answers "fits", bind finds it counted and adds nothing,
 * the watch turns it BOUND), but a failed bind (kq_ledger_forget) keeps it. It ends when
 * the watch shows it bound (it is then simply counted), when it goes away, with
 * kq_ledger_unreserve, or when kq_ledger_expire_reserved finds it older than the timeout;
 * an ended reservation is not taken again by the watch: filter and bind then decide the
 * pod like any other. */

/* With gating on, the watch (and a relist after a restart or a leader change) reserves
 * every pod of our scheduler that has no admission gate and no node, checked against
 * its limits (a refusal is logged; filter and bind decide that pod). Off (default): no
 * reservation from the watch, today's behaviour. */
void kq_ledger_set_gating(kq_ledger_t *l, bool on);

/* Gate-only (kube-scheduler calls no extender): the gate's reservation is the only quota
 * decision a pod gets, so it is never given up. A resize that grows a reserved pod past
 * what fits is refused rather than dropping the reservation to decide the pod afresh
 * (there is no filter or bind to decide it). Off (default): the extender path. */
void kq_ledger_set_gate_only(kq_ledger_t *l, bool on);

/* Check and count the pod as reserved (kq_ledger_assume's check and commit, with the same
 * rules for a grown request and a resize reservation). The reservation remembers the
 * request it counted; filter and bind of the pod check, and bind counts, any growth past
 * it. 0 when counted now or already counted; KQ_EDENIED with the reason. */
int kq_ledger_reserve(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                      kq_denial_t *kind) KQ_WUR;

/* kq_ledger_reserve that also says what the pod is charged: on 0, *charged (an initialised
 * set) becomes the set it is counted with (its containers' request and, with the claim
 * table wired, the devices of the claims it carries: a shared claim another counted pod
 * holds adds nothing; at least the request of an admitted resize), read under the same
 * lock as the check, so no second lookup. Untouched on a denial (and, logged, when out of
 * memory). For the gate's fair order (gating.h). */
int kq_ledger_reserve_charged(kq_ledger_t *l, const kq_pod_t *pod, kq_resource_t *charged, char *reason,
                              size_t reason_len, kq_denial_t *kind) KQ_WUR;

/* What the pod is, or would be, charged now (changes nothing): *out (initialised) becomes
 * its containers' request plus the devices of the claims it would carry if it were counted
 * now (a claim not known yet: nothing); a counted pod's is what it is counted with. A pod
 * without claims (or no claim table) takes no lock. 0, KQ_EINVAL or KQ_ENOMEM (*out
 * unchanged). O(its claims). For the gate's view of its order (gating.h). */
int kq_ledger_charge(kq_ledger_t *l, const kq_pod_t *pod, kq_resource_t *out) KQ_WUR;

/* Releases a reservation (its gate could not be removed). KQ_ENOENT when not reserved. */
int kq_ledger_unreserve(kq_ledger_t *l, const char *uid);

/* Releases every reservation older than max_age_s (a scan: for a timer). Returns how many. */
size_t kq_ledger_expire_reserved(kq_ledger_t *l, int64_t max_age_s);

bool kq_ledger_is_reserved(kq_ledger_t *l, const char *uid);
size_t kq_ledger_reserved_count(kq_ledger_t *l);

/* Usage history (fairshare.h): from now on every count and release of a pod is also
 * reported to fs, under the ledger's lock (fairshare's lock nests inside it). Set it
 * before the first pod is counted; NULL stops. fs must outlive its use here. */
void kq_ledger_set_fairshare(kq_ledger_t *l, kq_fairshare_t *fs);

/* ---- in-flight preemption ----
 *
 * kube-scheduler deletes the victims of a preemption asynchronously and retries the
 * preemptor at once, on the nominated node; its own view of that node already leaves the
 * victims out, but the watch may not have shown them deleted yet, so the quota tree still
 * counts them and the preemptor would be denied and preempt a second time. As
 * kube-scheduler does for a pod nominated on a node whose victims are terminating
 * (k8s.io/kubernetes pkg/scheduler/framework/preemption, PodEligibleToPreemptOthers) and
 * as scheduler-plugins' CapacityScheduling does while it simulates victims away
 * (kubernetes-sigs/scheduler-plugins pkg/capacityscheduling, PreFilterExtensions
 * RemovePod), the ledger remembers, per preemptor UID, the victims the preempt verb
 * answered on each node, and kq_ledger_check_on / kq_ledger_assume_on of that preemptor on
 * such a node check its quota group and every ancestor (runtime, max, the root's cluster
 * total) with those victims' usage discounted:
 *   - only victims still counted, in the preemptor's quota group, bound to that node
 *     (for a preemptor of a scheduler-plugins group, also those of other scheduler-plugins
 *     groups: they lower the sum of what those groups use, CapacityScheduling's
 *     cross-namespace preemption; kq_qtree_check_across);
 *   - a victim is claimed by one preemptor at a time (a later preemptor does not discount
 *     it), so one release is never spent twice;
 *   - a record ends when its preemptor is deleted or terminal, when a later preempt call
 *     for it replaces it, when none of its victims is counted any more (checked when a
 *     record is added), and at the latest after the TTL (kq_ledger_set_preempt_ttl_ms,
 *     default KQ_LEDGER_PREEMPT_TTL_MS): a preemption that never deleted its victims stops
 *     being discounted then. A bound preemptor's record keeps its claims until then (its
 *     own checks no longer need it: a counted pod is always admitted).
 * Other pods are checked against the full usage. Bounds: at most KQ_LEDGER_PREEMPT_MAX
 * records (beyond: expired ones go first, then the oldest) of at most
 * KQ_LEDGER_PREEMPT_VICTIMS victims each (further nodes are not recorded): at most about
 * 20 KB per record and 10 MB for a full table of 128-byte UIDs; a few hundred bytes per
 * record in practice. filter and bind pay one hash lookup of the preemptor and one per
 * victim on the node in question: nothing scales with users, groups or pods. */
#define KQ_LEDGER_PREEMPT_TTL_MS 30000
#define KQ_LEDGER_PREEMPT_MAX 512
#define KQ_LEDGER_PREEMPT_VICTIMS 128

/* The victims the preempt verb answered on one node (UIDs borrowed for the call). */
typedef struct kq_ledger_preempt_node {
    const char *node;
    const char *const *victims;
    size_t n;
} kq_ledger_preempt_node_t;

/* Remembers the victims of `preemptor_uid`'s preemption, replacing an earlier record of
 * it. Nodes without victims are skipped. 0, KQ_EINVAL, or KQ_ENOMEM (nothing kept). */
int kq_ledger_preempt_note(kq_ledger_t *l, const char *preemptor_uid, const kq_ledger_preempt_node_t *nodes,
                           size_t n_nodes) KQ_WUR;

/* The nodes of the pod's live record that still have a discounted victim, as new strings
 * (free each and the array). *n 0 (and *out NULL) when none. 0 or KQ_ENOMEM. */
int kq_ledger_preempt_nodes(kq_ledger_t *l, const char *preemptor_uid, char ***out, size_t *n) KQ_WUR;

/* Changes the lifetime of new records (tests); <= 0 expires them at once. */
void kq_ledger_set_preempt_ttl_ms(kq_ledger_t *l, int64_t ttl_ms);

/* Number of live records. */
size_t kq_ledger_preempt_count(kq_ledger_t *l);

/* kq_ledger_check_ex for the pod placed on `node`: the pod's in-flight victims on that node
 * are discounted from its quota group's usage (above). node NULL: kq_ledger_check_ex. */
int kq_ledger_check_on(kq_ledger_t *l, const kq_pod_t *pod, const char *node, char *reason, size_t reason_len,
                       bool *by_tree, kq_denial_t *kind) KQ_WUR;

/* kq_ledger_assume for a bind to `node`, with the same discount (check and commit in one
 * step under the ledger lock). node NULL: kq_ledger_assume. */
int kq_ledger_assume_on(kq_ledger_t *l, const kq_pod_t *pod, const char *node, char *reason, size_t reason_len,
                        kq_denial_t *kind) KQ_WUR;

/* ---- admission of pods created with spec.nodeName ----
 *
 * Such a pod is bound from its creation: no scheduler, filter, bind or gate sees it, so it
 * is checked at admission whoever creates it (a tenant, or a controller creating a pod for a
 * tenant's workload: it carries the identity the workloads webhook stamped on the
 * template), as Kubernetes' ResourceQuota admission, a validating plugin, charges a create
 * for any requester and not on a dry run (k8s.io/apiserver
 * pkg/admission/plugin/resourcequota, QuotaAdmission.Validate). Two steps:
 *
 *  - the mutating webhook asks kq_ledger_check_new (changes nothing; the pod has no uid
 *    and, with generateName, no name yet);
 *  - the validating webhook asks kq_ledger_admit, which checks and counts the pod in one
 *    step under the ledger lock, so concurrent creates cannot together pass a limit.
 *
 * Key. The reservation is an ordinary ledger entry keyed by the pod's UID: the API server
 * fills metadata.uid (and the name generated from generateName) before it calls validating
 * webhooks (k8s.io/apiserver pkg/registry/generic/registry/store.go, Store.create:
 * FillObjectMetaSystemFields, then createValidation), and a mutating webhook may be called
 * several times for one create (two of kubequota's own match an opted-in pod, and
 * reinvocation), a validating one once per storage attempt. No synthetic key, no matching
 * by content: the watch event of the stored pod names the same UID.
 *
 * Match. When the watch (or a relist) shows the pod bound, its entry, ASSUMED by the
 * reservation, becomes BOUND like an assumed pod after its bind: the usage stays counted
 * once, under the queue, application, user and quota group the reservation counted, and
 * the reservation ends (kq_ledger_is_admitted false). A pod deleted or terminal is
 * released once, as any.
 *
 * TTL. A reservation the watch has not confirmed after the TTL (kq_ledger_set_admit_ttl_ms,
 * default KQ_LEDGER_ADMIT_TTL_MS) is released and its entry forgotten: a later webhook or
 * the storage refused the create, or a generateName conflict made the API server retry
 * with a new UID (each attempt is validated, and reserved, again). Expiry runs lazily on
 * every admission call and watch event and from kq_ledger_expire_admitted (a timer): at
 * most one list-head comparison when nothing is due. If the watch is slower than the TTL,
 * the reservation is released first and the watch then counts the pod unchecked: never
 * twice. A relist that does not list a reserved pod leaves its reservation to the watch
 * and the TTL: the list may have been read before the pod was stored (kq_ledger_resync_begin
 * runs when the first page arrives, after the API server read it), and releasing it let
 * a pod filtered meanwhile pass a limit with it (found by the soak). A dry run is checked
 * (kq_ledger_check_new), never reserved.
 *
 * Both checks hold the pod to its group's runtime as it would be with the pod's request in
 * its group's request (kq_qtree_check_new): a group's runtime follows its request, and a
 * new pod's request is not in it yet. kq_ledger_check_new is the reusable "what-if with the
 * pod's own request added to its group" for any pod the ledger does not know. */
#define KQ_LEDGER_ADMIT_TTL_MS 30000

/* Would a pod the ledger does not know yet fit its limits (queue, application, user, and
 * its quota group with its request added to the group's request)? 0 or KQ_EDENIED with the
 * reason and kind. Changes nothing (expired admission reservations aside). The pod's uid
 * is not looked up. */
int kq_ledger_check_new(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                        kq_denial_t *kind) KQ_WUR;

/* Checks and counts a pod being created with spec.nodeName (pod->uid: the UID the API
 * server assigned; pod->node set) as an admission reservation, check and commit under the
 * ledger lock. 0 when counted now or already counted; KQ_EDENIED with the reason (nothing
 * is left of the pod); KQ_EINVAL without a uid or a node; KQ_ENOMEM. */
int kq_ledger_admit(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                    kq_denial_t *kind) KQ_WUR;

/* Releases the admission reservations older than the TTL (also done lazily). How many. */
size_t kq_ledger_expire_admitted(kq_ledger_t *l);

/* Changes the TTL of admission reservations (tests); <= 0 expires them at the next call. */
void kq_ledger_set_admit_ttl_ms(kq_ledger_t *l, int64_t ttl_ms);

/* Live admission reservations, and whether uid holds one. */
size_t kq_ledger_admitted_count(kq_ledger_t *l);
bool kq_ledger_is_admitted(kq_ledger_t *l, const char *uid);

/* ---- DRA ResourceClaims (issue 39) ----
 *
 * What a pod is charged: its containers' request (pod.h) plus, per device class (resource
 * "<class>.deviceclass.resource.k8s.io/devices"), the devices of the ResourceClaims it
 * uses (pod->claims) as the claim table says each is charged now (claims.h: what the
 * claim may take as ResourceQuota counts it, then, once status.allocation is set, what was
 * allocated). Every path that counts, checks or shows a pod uses that charge: filter, bind,
 * the gate's reservation, preemption victims (they are counted with it), the pending
 * request of its queue and quota group.
 *  - A claim used by several pods is charged once, to the first counted pod that uses it,
 *    in the order of the claim's status.reservedFor (kube-scheduler appends each pod it
 *    binds: the pod that had the claim first keeps it), then by metadata.creationTimestamp,
 *    then uid. A pod not counted yet is checked as if it were: it carries the claim when it
 *    would come first, or when no pod using the claim is counted; a pod joining a claim
 *    that a counted pod holds costs no devices. When the charged pod is released (deleted,
 *    terminal) the claim moves to the next counted pod, unchecked; when the last one ends,
 *    it is released.
 *  - A claim that changes (allocated, deallocated, created after the pod, deleted) moves
 *    the charge of every pod that uses it at once: a counted pod's usage is moved
 *    unchecked, as an in-place resize the watch shows (what runs is never refused).
 *  - A claim the table does not know (a template's claim kube-controller-manager has not
 *    created yet, a named claim not created yet, a deleted one) is charged nothing, and
 *    a pod not counted is denied by filter, bind and the gate with "waiting for its
 *    ResourceClaim ..." (kind OVER_LIMIT: transient) until it is listed: no pod is admitted
 *    before its devices are known. A pod created with spec.nodeName (admission) is charged
 *    what is known.
 * Each step reads only the present (pods, claims, who is counted), so the order in which
 * claims and pods arrive does not show, and a restart rebuilds the same usage. Cost: one
 * claim-table lookup per claim of the pod on filter and bind; a change of a claim's charged
 * pod recharges the pods of that claim only.
 * kq_ledger_lookup gives a pod's own (containers') request back, never the charge. */

/* Wires the claim table (borrowed; must outlive the ledger). Without it pods are charged
 * their containers' request only. Call before any pod is known. */
void kq_ledger_set_claims(kq_ledger_t *l, kq_claims_t *claims);

/* The claim ns/name changed in the claim table (put, deleted, dropped by a relist):
 * recharges the pods that use it and calls the release hook (a pod waiting for it may fit
 * now). Returns how many pods use it. Takes the ledger lock, then the claim table's. */
size_t kq_ledger_claim_changed(kq_ledger_t *l, const char *ns, const char *name);

/* ---- metering: a pod's charge (issue 39) ----
 *
 * Metering (metering.h) prices a bound pod by what the ledger charges it: its containers'
 * request plus the devices (and counters) of the claims it is charged, a shared claim only
 * in the charge of the pod that carries it. That charge moves after bind without an event
 * of the pod itself (a claim allocated, deallocated, created or deleted; a shared claim
 * moving to or from it when another pod is counted or released). With a charge hook set,
 * the ledger notes every counted pod whose charge so moved (O(1), under its lock) and
 * kq_ledger_flush_charges hands each one's charge *now* to the hook. Nothing calls the hook
 * under the ledger lock: the metering lock is never waited for by filter or bind.
 *
 * The feed lock. The hook and kq_ledger_with_charge's callback run under a private feed
 * lock (taken before the ledger lock, never under it; lock order: feed -> ledger, and
 * feed -> whatever the hook takes, the metering lock), so that two threads (the pod
 * informer, the claim informer, the slice informer) never hand metering an older charge
 * after a newer one: each reads the charge and applies it in one step. */

/* Called with a counted pod's uid and its charge now (both borrowed for the call). */
typedef void (*kq_ledger_charge_fn)(void *ud, const char *uid, const kq_resource_t *charge);

/* Sets (or, fn NULL, clears: pods noted are forgotten, and a flush in flight finishes
 * first) the hook. Without one nothing is noted. fn's state must outlive its use here. */
void kq_ledger_set_charge_hook(kq_ledger_t *l, kq_ledger_charge_fn fn, void *ud);

/* Hands the pods noted since the last flush that are still counted to the hook, each with
 * its charge now; returns how many. One atomic load when none is noted (call it after
 * every ledger call that may recharge: claim events, pod events, relists). The pods that a
 * bind or the gate recharged wait for the next flush (the bound pod's own watch event, or
 * metering's next compute, which flushes first: serve's before_compute). */
size_t kq_ledger_flush_charges(kq_ledger_t *l);

/* Calls use(ud, charge) once with the pod's charge now: the ledger's when it knows the pod
 * (containers and claims), else pod->request; a pod without claims is its own request (no
 * lock taken). Runs under the feed lock (above), with no ledger lock held. 0, or KQ_ENOMEM
 * (use not called). */
int kq_ledger_with_charge(kq_ledger_t *l, const kq_pod_t *pod, void (*use)(void *ud, const kq_resource_t *charge),
                          void *ud) KQ_WUR;

/* Calls fn(ud) each time a counted pod's usage is released (deleted, terminal, missing
 * from a relist, a failed bind, an ended reservation) and after a re-resolution moved pods
 * between quota groups (kq_ledger_reresolve), after the engine was told, under
 * the ledger's lock: fn must be O(1) and may take only a leaf lock (control/requeue.h's).
 * NULL stops. fn's state must outlive its use here. */
void kq_ledger_set_release_hook(kq_ledger_t *l, void (*fn)(void *ud), void *ud);

/* Number of known pods, and of counted ones. */
size_t kq_ledger_size(kq_ledger_t *l, size_t *counted);

#endif
