/* User group manager: usage per user, group and queue, and enforcement of the limits in
 * the queue configuration (YuniKorn's user/group quota design).
 *
 * One manager per partition. It holds
 *   - user trackers, created on first use and removed when empty: per user a sparse
 *     queue tree (root holds the total) with used resources and running applications,
 *     and the application -> tracked group map;
 *   - group trackers, the same per group, plus the users with usage in the group;
 *   - a queue tracker tree: total used and running applications per queue (the view's
 *     allocatedResource), checked against the queue's resources.max and maxapplications.
 *
 * An application is tracked against zero or one group, chosen at its first increase by
 * walking the configured limits from the leaf queue up to root and taking the first group
 * limit that names a group the user belongs to (a "*" group limit matches the user's first
 * group). The choice is fixed until the application's last allocation is released. An
 * application belongs to the user of its first allocation (see "Application ownership"). An
 * application is running from its first allocation until its last one is released; the
 * manager counts allocations per (user, application) itself.
 *
 * Enforcement: an increase is checked from the leaf queue up to root against the queue's
 * max, the user's limit (a named user limit beats the "*" limit at the same queue) and the
 * selected group's limit, resources and max applications, at every level. It is committed
 * only if everything fits; otherwise nothing changes and the caller gets KQ_EDENIED with a
 * human-readable reason: who, which queue, which limit, used + requested > max.
 * A decrease is never denied.
 *
 * Thread safety: every function may be called from any thread. Locks, in the only order
 * they are ever taken: manager lock -> user tracker -> group tracker -> queue tree (all
 * private; callers hold none of them across calls). A tracker is pinned
 * (reference count) while in use, and removed for emptiness only under the manager lock
 * when nobody holds it, so a concurrent increase can never land on a removed tracker.
 */
#ifndef KUBEQUOTA_UGM_H
#define KUBEQUOTA_UGM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/error.h"
#include "kubequota/engine/placement.h"
#include "kubequota/engine/resource.h"

typedef struct kq_ugm kq_ugm_t;

/* Queue paths: "root" or "root.a.b"; at most KQ_UGM_MAX_DEPTH levels and
 * KQ_UGM_PATH_MAX bytes, no empty level. Anything else is KQ_EINVAL. Queue names are
 * case-insensitive (compared in lowercase, like the configuration stores them). */
#define KQ_UGM_MAX_DEPTH 65
#define KQ_UGM_PATH_MAX 4352

/* The group that applications matched by a "*" group limit are tracked against. */
#define KQ_UGM_WILDCARD "*"

typedef struct kq_user {
    const char *name;
    const char *const *groups; /* in the order the API server gave them */
    size_t n_groups;
} kq_user_t;

/* New empty manager for the partition `partition` (name copied). NULL on ENOMEM. */
kq_ugm_t *kq_ugm_new(const char *partition);
/* Frees the manager and every tracker. NULL is a no-op. */
void kq_ugm_free(kq_ugm_t *m);

/* Applies the limits of cfg's partition (the manager takes its own reference and drops
 * the previous one). Existing trackers see the new limits from the next increase: a
 * removed limit is cleared, a new one applies. Never blocks tracking for long (the
 * limit tables are built before the manager lock is taken). KQ_ENOENT when cfg has no
 * such partition (nothing changes). */
int kq_ugm_set_config(kq_ugm_t *m, kq_config_t *cfg) KQ_WUR;

/* Would one more allocation `req` of application app_id of `user` in queue_path fit?
 * Changes nothing. 0, or KQ_EDENIED with the reason in reason[] and its kind in *kind
 * (KQ_DENIAL_OVER_LIMIT, _NEVER_FITS or _ACL; kind may be NULL). */
int kq_ugm_check(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                 const kq_resource_t *req, char *reason, size_t reason_len, kq_denial_t *kind) KQ_WUR;

/* The pod behind an allocation: when it was created (metadata.creationTimestamp, seconds)
 * and its UID, which order the users that share an application id, and whether the pod
 * named its application id (see "Application ownership"). */
typedef struct kq_ugm_pod {
    int64_t created;
    const char *uid;
    bool generated_app; /* the id was not named by the pod (its controller's or its own UID,
                         * YuniKorn's generated ids): each user has an application of that id
                         * of their own, and is never refused for another's */
    bool counted;       /* already counted in this queue (the growth of a resize): the queue's
                         * submitacl/adminacl are not asked again. Every other allocation is
                         * checked against them, the first of its application or not */
} kq_ugm_pod_t;

/* Application ownership (issue 29). An application id belongs to one user, its owner: the
 * user of its first allocation. kq_ugm_check and kq_ugm_increase refuse an allocation of
 * any other user with KQ_EDENIED and KQ_DENIAL_APP_OWNER (the reason names the application
 * and the pod's user, not the owner); nothing is ever charged to another user.
 * kq_ugm_add_unchecked (reality) charges a pod of another user to that user, under an
 * entry of its own for the same application id; while it lasts the users sharing the id
 * are ordered by the earliest creation time (then UID) of their counted pods, and the
 * first is the owner, so counting the same bound pods in any order (a relist) gives the
 * same owner. When the owner's last allocation ends, the next user in that order owns it.
 * An allocation whose pod did not name its id (kq_ugm_pod_t.generated_app) is never refused
 * for it: it joins (or starts) its own user's application of that id.
 *
 * kq_ugm_app_owner: 0 when user may join app_id (nobody owns it, or user does); KQ_EDENIED
 * when another user owns it, with the owner's name in owner[] (for logs; may be NULL) and
 * the denial's reason in reason[]; KQ_EINVAL. O(1) plus the users sharing the id. */
int kq_ugm_app_owner(kq_ugm_t *m, const char *app_id, const char *user, char *owner, size_t owner_len,
                     char *reason, size_t reason_len) KQ_WUR;

/* Check and commit one allocation as one step. 0 when counted; KQ_EDENIED (reason[] and
 * *kind filled as kq_ugm_check's, nothing changed); KQ_EINVAL for a bad path; KQ_ERANGE
 * on overflow. */
int kq_ugm_increase(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                    const kq_resource_t *req, char *reason, size_t reason_len, kq_denial_t *kind) KQ_WUR;

/* Commits one allocation without checking any limit: for pods the API server shows bound
 * by someone else (reality is counted, never refused). Same accounting as an increase. */
int kq_ugm_add_unchecked(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                         const kq_resource_t *req) KQ_WUR;
/* The same three with the pod behind the allocation (NULL, as in the forms above: creation
 * unknown, ordered after every known one; the id named by the pod). */
int kq_ugm_check_pod(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                     const kq_resource_t *req, const kq_ugm_pod_t *pod, char *reason, size_t reason_len,
                     kq_denial_t *kind) KQ_WUR;
int kq_ugm_increase_pod(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                        const kq_resource_t *req, const kq_ugm_pod_t *pod, char *reason, size_t reason_len,
                        kq_denial_t *kind) KQ_WUR;
int kq_ugm_add_unchecked_pod(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                             const kq_resource_t *req, const kq_ugm_pod_t *pod) KQ_WUR;

/* Releases one allocation counted by kq_ugm_increase for the same (queue_path, app_id,
 * user name, usage). When it was the application's last allocation the application stops
 * running. Never denied; KQ_ENOENT if nothing was tracked for it at exactly queue_path
 * (nothing changes); KQ_EINVAL for a bad path. A usage larger than what is tracked is
 * clamped at 0 (and logged). */
int kq_ugm_decrease(kq_ugm_t *m, const char *queue_path, const char *app_id, const char *user,
                    const kq_resource_t *usage);

/* Pending (requested, not yet allocated) resources per queue, for the queue view only;
 * never enforced. */
/* The group application app_id of `user` is (or, before its first allocation, would be)
 * tracked against at queue_path: the group fixed at its first increase, else the one the
 * selection rule above picks with the limits in force now. Metering books charges to it, so
 * charges and usage always name the same group. out gets "" for no group. 0, or KQ_EINVAL. */
int kq_ugm_group_of(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user, char *out,
                    size_t outlen) KQ_WUR;

void kq_ugm_pending_add(kq_ugm_t *m, const char *queue_path, const kq_resource_t *req);
void kq_ugm_pending_sub(kq_ugm_t *m, const char *queue_path, const kq_resource_t *req);

/* REST views, new references (NULL on ENOMEM, or for an unknown user/group), in the
 * field names of YuniKorn's REST DAOs (ugm_info.go, queue_info.go).
 * Users: array of User; Groups: array of Group, both sorted by name.
 * User: {"userName","groups":{app:group},"queues":Usage}
 * Group: {"groupName","users":[...],"applications":[...],"queues":Usage}
 * Usage: {"queuename" (full path),"resourceUsage","runningApplications":[app ids],
 *         "maxApplications","maxResources" (the limit in force for that user/group at
 *         that queue; omitted when none),"children":[Usage...]}
 * Queues: {"queuename" (full path),"partition","isLeaf","isManaged","parent",
 *          "maxResource","guaranteedResource" (omitted when not configured),
 *          "allocatedResource","pendingResource","runningApps","maxRunningApps"
 *          (omitted when 0),"properties","children":[...]}
 * for every configured queue (isManaged true), plus tracked queues that the
 * configuration does not define (isManaged false). Resource maps use canonical
 * integers; lists and children are sorted by name. */
json_t *kq_ugm_users_json(kq_ugm_t *m);
json_t *kq_ugm_user_json(kq_ugm_t *m, const char *user);
json_t *kq_ugm_groups_json(kq_ugm_t *m);
json_t *kq_ugm_group_json(kq_ugm_t *m, const char *group);
json_t *kq_ugm_queues_json(kq_ugm_t *m);

/* The users (groups) view one element at a time, for answers streamed in pieces: emit(ctx,
 * element) for each element of the array kq_ugm_users_json (kq_ugm_groups_json) returns,
 * in the same order, each built just before its call and freed after it returns
 * (borrowed). Who is listed and the limits in force are pinned when the walk starts (the
 * trackers stay alive, not locked); each element is built under its tracker's lock, as in
 * the array form, and no ugm lock is held while emit runs (it may do I/O). emit returns 0
 * to go on, anything else to stop. 0, KQ_EINVAL, KQ_ENOMEM or emit's non-zero result. */
typedef int (*kq_ugm_emit_fn)(void *ctx, json_t *element);
int kq_ugm_users_each(kq_ugm_t *m, kq_ugm_emit_fn emit, void *ctx) KQ_WUR;
int kq_ugm_groups_each(kq_ugm_t *m, kq_ugm_emit_fn emit, void *ctx) KQ_WUR;

/* Dynamic queues (placement.h): what the queue tree holds at queue_path right now
 * (KQ_QKIND_NONE when nothing is tracked there). Configured queues are the caller's to
 * look up. A dynamic leaf queue is checked against the child template in force at its
 * nearest configured ancestor (resources.max, maxapplications). The _hook form takes the
 * manager as void * (kq_place_in_t.dynamic_kind). Takes the queue tree lock only. */
kq_qkind_t kq_ugm_queue_kind(kq_ugm_t *m, const char *queue_path);
/* Limits from a namespace's annotations (yunikorn.apache.org/namespace.quota, .maxApps)
 * for the dynamic queue at queue_path (lowercase): they replace its child template's. max
 * NULL and max_apps 0 clear them. 0, KQ_EINVAL or KQ_ENOMEM. Takes the queue tree lock. */
int kq_ugm_set_dynamic_limits(kq_ugm_t *m, const char *queue_path, const kq_resource_t *max, uint64_t max_apps);
void kq_ugm_set_dynamic_limits_hook(void *ugm, const char *queue_path, const kq_resource_t *max, uint64_t max_apps);
kq_qkind_t kq_ugm_queue_kind_hook(void *ugm, const char *queue_path);
/* Placement's submit ACL hook (kq_place_in_t.may_submit, ugm as void *): may the user
 * submit to configured queue q, by the ACL rule increases enforce? */
bool kq_ugm_may_submit_hook(void *ugm, const kq_queue_conf_t *q, const char *user, const char *const *groups,
                            size_t n_groups);

/* Running applications (those with allocations), sorted by id, as YuniKorn's
 * ApplicationDAOInfo (dao/application_info.go): {"applicationID","usedResource",
 * "partition","queueName" (the queue of its first allocation),"applicationState":
 * "Running","user","groups"} (user and groups: the user of its first pod). Only those in
 * queue_path when it is not NULL. New reference; NULL on ENOMEM. */
json_t *kq_ugm_apps_json(kq_ugm_t *m, const char *queue_path);
/* The same one application at a time (see kq_ugm_users_each): the rows are copied under
 * the manager lock (a compact snapshot, no JSON), then each object is built, handed to
 * emit (borrowed) and freed, with no lock held. 0, KQ_EINVAL, KQ_ENOMEM or emit's result. */
int kq_ugm_apps_each(kq_ugm_t *m, const char *queue_path, kq_ugm_emit_fn emit, void *ctx) KQ_WUR;

/* The partition's total usage (the root queue's) into *used (an initialised set: release it
 * with kq_resource_free), running applications and counted pods. 0, KQ_EINVAL or KQ_ENOMEM. */
int kq_ugm_totals(kq_ugm_t *m, kq_resource_t *used, size_t *apps, size_t *pods) KQ_WUR;

/* Counts for tests and metrics. */
size_t kq_ugm_user_count(kq_ugm_t *m);
size_t kq_ugm_group_count(kq_ugm_t *m);

#endif
