/* Placement: YuniKorn's placement rules (partition "placementrules") resolve a pod to the
 * leaf queue it runs in.
 *
 * Semantics (apache/yunikorn-core pkg/scheduler/placement/placement.go and *_rule.go;
 * apache/yunikorn-site docs/user_guide/placement_rules.md):
 *  - rules run in file order; the first that yields a usable queue wins;
 *  - provided: the queue the pod names; user: the user name; fixed: the rule's value;
 *    tag: the value of the pod's tag named by the rule's value ("namespace",
 *    "namespace.parentqueue" from the namespace annotation yunikorn.apache.org/parentqueue);
 *  - a name that is not fully qualified ("root." prefix) has its dots replaced by "_dot_"
 *    and is placed below the queue the parent rule yields (itself qualified, and which must
 *    not be an existing leaf: that is an error), else below root; a qualified name skips
 *    the parent rule; every level must be a valid queue name ([a-zA-Z0-9_:#/@-]{1,64}),
 *    else the placement fails with that error;
 *  - a filter (allow/deny, a user and group list or one regexp each) decides whether a
 *    rule applies to the user at all: list matching is case-sensitive, groups are tried
 *    one by one, a user or group match gives the filter's type, no match the opposite;
 *  - a rule whose queue does not exist matches only with create: true (it is then a
 *    dynamic queue, created on first use) and only when it can be created, i.e. its
 *    nearest existing ancestor is a parent queue; an existing queue must be a leaf;
 *    the submit ACL hook (when given) must allow the user on the queue (or, for a queue to
 *    be created, on its nearest existing ancestor); otherwise the next rule runs;
 *  - after the last rule: a pod already running (forced) goes to the recovery queue
 *    root.@recovery@; otherwise root.default when it exists, is a leaf and the ACL hook
 *    allows it; otherwise the pod is rejected ("no placement rule matched").
 * Names are case-insensitive: the result is lowercase. With no rules configured, callers
 * use kubequota's own resolution (see pod.h).
 *
 * Thread safety: pure functions of their arguments; the partition snapshot is read-only.
 * Cost: proportional to the number of rules and the path depth (hash lookups), never to
 * the number of users, groups or pods.
 */
#ifndef KUBEQUOTA_PLACEMENT_H
#define KUBEQUOTA_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/error.h"

/* The recovery queue (YuniKorn's common.RecoveryQueueFull). */
#define KQ_PLACEMENT_RECOVERY_QUEUE "root.@recovery@"
/* The fallback queue after the last rule (YuniKorn's common.DefaultPlacementQueue). */
#define KQ_PLACEMENT_DEFAULT_QUEUE "root.default"

/* What a queue that is not configured is right now (a dynamic queue in use). */
typedef enum kq_qkind { KQ_QKIND_NONE = 0, KQ_QKIND_LEAF, KQ_QKIND_PARENT } kq_qkind_t;

typedef struct kq_tag {
    const char *key, *value;   /* key lowercase ("namespace") */
} kq_tag_t;

typedef struct kq_place_in {
    const char *user;                /* required */
    const char *const *groups;
    size_t n_groups;
    const char *provided;            /* queue named by the pod, or NULL */
    const kq_tag_t *tags;            /* the pod's application tags */
    size_t n_tags;
    bool forced;                     /* the pod already runs (bound): recovery applies */
    /* dynamic queues: what an unconfigured full path is now; NULL = none exist */
    kq_qkind_t (*dynamic_kind)(void *arg, const char *path);
    /* submit ACL: may `user` submit to the configured queue q (and below)? NULL = yes */
    bool (*may_submit)(void *arg, const kq_queue_conf_t *q, const char *user, const char *const *groups,
                       size_t n_groups);
    void *arg;
} kq_place_in_t;

/* Runs the partition's rules. 0: *queue is a new lowercase full path (caller frees); it
 * may be a dynamic queue that does not exist yet. KQ_EDENIED: no rule
 * matched or a rule failed; reason says which rules were tried and why; *queue NULL;
 * *kind (may be NULL) KQ_DENIAL_QUEUE_NOT_LEAF when a rule's queue is a parent queue, else
 * KQ_DENIAL_QUEUE_MISSING when one does not exist, else KQ_DENIAL_ACL when the ACLs
 * refused one, else KQ_DENIAL_QUEUE_MISSING. KQ_ENOMEM. */
int kq_placement_place(const kq_partition_conf_t *part, const kq_place_in_t *in, char **queue,
                       char *reason, size_t reason_len, kq_denial_t *kind) KQ_WUR;

/* The child template in force for a dynamic leaf queue at `path` (the nearest configured
 * ancestor's, see config.h), or NULL when the path is configured or none applies. */
const kq_child_template_t *kq_placement_template(const kq_partition_conf_t *part, const char *path);

/* True when the filter of rule r lets the user through (no filter: true). */
bool kq_placement_filter_allows(const kq_rule_conf_t *r, const char *user, const char *const *groups,
                                size_t n_groups);

/* The partition's rules as YuniKorn's REST API shows them (GET
 * /ws/v1/partition/{p}/placementrules: an array of dao.RuleDAO, apache/yunikorn-core
 * pkg/webservice/dao/rule_info.go, built by each rule's ruleDAO()): {"name", "parameters"
 * (strings: create; fixed: queue, qualified; tag: tagName; recovery: queue), "filter"
 * ({"type","userList","groupList","userExp","groupExp"}, omitted when the rule has none),
 * "parentRule"}, the implicit recovery rule last; no rules configured: YuniKorn's implicit
 * provided rule (create false). Lists are sorted. New reference; NULL on ENOMEM. */
json_t *kq_placement_rules_json(const kq_partition_conf_t *part);

#endif
