/* Elastic quota wiring: fills the quota tree (quota_tree.h) from queues.yaml, ElasticQuota
 * objects and ElasticQuotaProfiles (profiles.h), keeps its cluster total in step with the
 * nodes, drives reclaim (reclaim.h), writes ElasticQuota status, feeds the resolver that
 * names the quota group of each pod (resolve.h), and validates ElasticQuota objects for
 * the admission webhook.
 *
 * Groups.
 *  - queues.yaml: every queue below root is a quota group named by its full path
 *    ("root.team-a"; the root queue is the tree's hidden root). min = resources.guaranteed
 *    (a parent queue without a guaranteed value for a resource guarantees the sum of its
 *    children's, as YuniKorn accounts it), max = resources.max (missing = unlimited),
 *    properties kubequota.io/shared-weight ("cpu=4,memory=8Gi"; default: max) and
 *    kubequota.io/allow-lent ("true"/"false"; default true). A queue with children, or
 *    "parent: true", is a parent group. Reapplied on every config reload.
 *  - ElasticQuota objects of scheduler-plugins (scheduling.x-k8s.io/v1alpha1): one flat
 *    first-level group per object named "namespace/name" (objects of the same name in two
 *    namespaces are two groups), spec.min / spec.max; Koordinator's labels and
 *    annotations on them are ignored with a warning.
 *  - ElasticQuota objects of Koordinator (scheduling.sigs.k8s.io/v1alpha1): the group is
 *    metadata.name; spec.min / spec.max; labels quota.scheduling.koordinator.sh/parent
 *    (default and "koordinator-root-quota": first level; may name a queue group such as
 *    "root.team-a"), .../is-parent ("true"), .../allow-lent-resource (lending unless
 *    "false"); annotation .../shared-weight (JSON ResourceList; default: max). An object
 *    named "koordinator-default-quota" sets the default group; "koordinator-root-quota"
 *    and "koordinator-system-quota" are ignored. When two sources name the same group, a
 *    queue wins over an object and the first object seen wins over later ones (the loser
 *    is logged and ignored until the winner goes away). A group the tree refuses (its
 *    parent does not exist yet, rule broken) is retried after every change and logged.
 *    Removing an object removes the group; its pods fall to the default group
 *    (kq_ledger_remove_group).
 *  - The system group (pods of the system namespaces, --system-namespaces, default
 *    kube-system) and the default group (--default-quota-min/max) exist from the start.
 *  - ElasticQuotaProfiles (profiles.h): one first-level group per profile, its tree's root,
 *    min = max = the tree's total, lending nothing. An ElasticQuota object of that name is
 *    that root: its spec is not read.
 *
 * A pod's quota group: the resolver (resolve.h), which reconcile feeds with the applied
 * groups, the namespaces their objects bind and who may name each group. A pod keeps the
 * group it was counted in until what the resolver reads changes; then the ledger asks again
 * for every pod (kq_ledger_reresolve).
 *
 * Cluster total: the sum of status.allocatable of nodes without spec.unschedulable, set
 * after the first full node list (before it, runtime bounds nothing).
 *
 * ElasticQuota informers: each API group's path is probed (GET ?limit=1) before its
 * informer starts; a 404 means the cluster does not serve that CRD: it is probed again
 * later, with the delay doubling from 1s up to 60s.
 *
 * Reclaim (reclaim.h): the timer runs a pass every tick_ms, with the sources, grace and
 * delays of the options; the elastic module tells it where each group comes from (the
 * owner reconcile recorded) and which config snapshot it applied.
 *
 * Status: at most every status_interval_ms per object and at most status_burst writes
 * per tick, each applied ElasticQuota whose group's used or runtime changed gets a
 * merge PATCH of status.used (on the status subresource; where that is 404, in the main
 * object) and of Koordinator's annotations (JSON ResourceLists) on the object:
 * quota.scheduling.koordinator.sh/runtime (the keys its max names; the default group: its
 * max), .../request (what the group asks of its parent), .../child-request (its pods'
 * requests, or its children's asks) and .../non-preemptible-used.
 *
 * Threads and locks: informer threads (nodes, one per served ElasticQuota API group,
 * profiles) and one timer thread (config changes, CRD probes, reclaim, status, ledger
 * expiry). All changes to the tree's groups and to the profile table are serialised by a
 * private apply lock; the nodes have their own lock; the resolver (resolve.h) and the
 * trees' placement snapshot (profiles.h) have theirs. Lock order: apply -> ledger -> ugm ->
 * quota tree; apply -> ledger -> resolver -> quota tree; apply -> resolver; apply -> nodes
 * -> placement; nodes -> quota tree. No I/O under any lock: evictions, events and status
 * writes work on copies taken under the locks.
 */
#ifndef KUBEQUOTA_ELASTIC_H
#define KUBEQUOTA_ELASTIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/base/error.h"
#include "kubequota/kube/pod.h"
#include "kubequota/engine/quota_tree.h"
#include "kubequota/engine/resource.h"
#include "kubequota/control/koordinator.h"
#include "kubequota/control/profiles.h"
#include "kubequota/control/reclaim.h"
#include "kubequota/control/resolve.h"

#define KQ_EQ_GROUP_UPSTREAM "scheduling.x-k8s.io"
#define KQ_EQ_GROUP_KOORD    "scheduling.sigs.k8s.io"
#define KQ_PROFILE_GROUP "quota.koordinator.sh" /* Koordinator's ElasticQuotaProfile */
#define KQ_EQ_ANN_RUNTIME    "quota.scheduling.koordinator.sh/runtime"

typedef struct kq_elastic kq_elastic_t;

typedef struct kq_elastic_opts {
    const char *const *system_namespaces; /* borrowed; NULL = {"kube-system"} */
    size_t n_system_namespaces;
    kq_resource_t default_min;            /* default group's min (empty) */
    kq_resource_t default_max;            /* default group's max (empty = unlimited) */
    unsigned reclaim_sources;             /* KQ_RECLAIM_DEFAULT */
    long reclaim_grace_ms;                /* 60000: queues and scheduler-plugins objects */
    long koord_delay_ms;                  /* 120000: Koordinator objects (delayEvictTime) */
    long reclaim_min_runtime_ms;          /* 0: reclaim skips pods running for less */
    long tick_ms;                         /* 1000 */
    long status_interval_ms;              /* 10000 */
    int status_burst;                     /* 20 */
    bool watch_nodes;                     /* true: nodes informer sets the cluster total */
    bool watch_quotas;                    /* true: ElasticQuota informers */
    bool preempt_default;                 /* false: default-group pods are never preemption
                                           * victims (Koordinator's default) */
    kq_reclaim_evict_fn evict;            /* NULL = kq_kube_evict (reclaim.h) */
    void *evict_ud;
} kq_elastic_opts_t;

void kq_elastic_opts_default(kq_elastic_opts_t *o);

/* New module with a new quota tree: the queues of app->config's partition app->partition
 * become groups, and app->ledger (when set) is wired to the tree and the module's resolver
 * (kq_ledger_set_qtree with kq_resolve_pod): call before any pod reaches the ledger. app is borrowed and must
 * outlive the module; opts is copied (system_namespaces stays borrowed). NULL on ENOMEM. */
kq_elastic_t *kq_elastic_new(kq_app_t *app, const kq_elastic_opts_t *opts);
/* Starts the informers (when app->kube is set) and the timer thread. 0 or KQ_ENOMEM. */
int kq_elastic_start(kq_elastic_t *e) KQ_WUR;
/* Stops the threads (idempotent). */
void kq_elastic_stop(kq_elastic_t *e);
/* Stops and frees. The tree is freed too: free the ledger first, or unwire nothing else
 * uses it. NULL is a no-op. */
void kq_elastic_free(kq_elastic_t *e);

/* A node's counted allocatable (empty when unschedulable) copied into *out (initialised).
 * KQ_ENOENT for a node the nodes informer has not shown, KQ_ENOMEM. */
int kq_elastic_node_allocatable(kq_elastic_t *e, const char *node, kq_resource_t *out) KQ_WUR;
/* Whether pods of the default group may be preemption victims (opts.preempt_default). */
bool kq_elastic_preempt_default(const kq_elastic_t *e);

/* The tree (borrowed, lives as long as the module). */
kq_qtree_t *kq_elastic_qtree(kq_elastic_t *e);

/* The nodes seen by the nodes informer, sorted by name: [{"name", "allocatable" (canonical
 * resource map; {} for an unschedulable node)}]. New reference; NULL on ENOMEM. */
json_t *kq_elastic_nodes_json(kq_elastic_t *e);

/* The quota trees of the ElasticQuotaProfiles, sorted by profile: [{"tree", "profile"
 * (namespace/name), "rootQuota", "resourceRatio", "nodes" (names), "totalResource"}]. New
 * reference; NULL on ENOMEM. */
json_t *kq_elastic_trees_json(kq_elastic_t *e);
/* Sets "tree" (Koordinator's QuotaInfoSummary field: the tree id, "" for the default tree)
 * on every group of a kq_qtree_json view. 0 or KQ_ENOMEM. */
int kq_elastic_tree_of_groups(kq_elastic_t *e, json_t *qtree) KQ_WUR;
/* The ElasticQuotaProfiles' trees (profiles.h), for the extender filter's placement lookups
 * (Koordinator's pod webhook gives a pod of a tree's quota a required node affinity for its
 * profile's nodeSelector): borrowed, lives as long as the module; NULL for a NULL module. */
kq_profiles_t *kq_elastic_profiles(kq_elastic_t *e);

/* The resolver (resolve.h) the module feeds: borrowed, lives as long as the module; NULL
 * for a NULL module. */
kq_resolver_t *kq_elastic_resolver(kq_elastic_t *e);

/* ---- inputs (the informers and the timer call these; public for tests) ---- */

/* Rebuilds the queue groups from a partition (NULL: no queue groups). */
void kq_elastic_apply_config(kq_elastic_t *e, const kq_partition_conf_t *part);
/* A Node object (ADDED/MODIFIED/DELETED, kube.h's KQ_WATCH_*), and list boundaries. */
void kq_elastic_node_event(kq_elastic_t *e, int type, const json_t *node);
void kq_elastic_nodes_list_begin(kq_elastic_t *e);
void kq_elastic_nodes_list_end(kq_elastic_t *e);
/* An ElasticQuota object of either API group (apiVersion says which; a list item without
 * apiVersion needs api_group). 0, or KQ_EPARSE with the reason in err (nothing changed). */
int kq_elastic_quota_event(kq_elastic_t *e, int type, const json_t *obj, const char *api_group, char *err,
                           size_t errlen) KQ_WUR;
/* A full list of one API group starts / ends (objects not listed are removed). */
void kq_elastic_quotas_list_begin(kq_elastic_t *e, const char *api_group);
void kq_elastic_quotas_list_end(kq_elastic_t *e, const char *api_group);
/* An ElasticQuotaProfile (quota.koordinator.sh/v1alpha1): one quota tree, whose root group
 * (spec.quotaName) has the selected nodes' allocatable times spec.resourceRatio as min and
 * max and lends nothing. 0, or KQ_EPARSE with what, where and why in err (nothing changed). */
int kq_elastic_profile_event(kq_elastic_t *e, int type, const json_t *obj, char *err, size_t errlen) KQ_WUR;
void kq_elastic_profiles_list_begin(kq_elastic_t *e);
void kq_elastic_profiles_list_end(kq_elastic_t *e);

/* One reclaim pass (kq_reclaim_once) at monotonic time now_ms (the timer passes its clock)
 * with the config the module last applied. Returns the number of evictions that
 * succeeded. Timer thread (or a test's, with the timer not started). */
size_t kq_elastic_reclaim_once(kq_elastic_t *e, int64_t now_ms);

/* Evictions done / refused or failed so far. */
unsigned long kq_elastic_evictions(kq_elastic_t *e, unsigned long *failed);
/* Status writes done / failed so far. */
unsigned long kq_elastic_status_writes(kq_elastic_t *e, unsigned long *failed);

/* ---- admission ----
 * kq_admission_eq_hook_t for kq_admission_opts_t.validate_elasticquota (ud = the
 * module): CREATE/UPDATE are checked with kq_qtree_validate_group against the current
 * tree (min <= max, children's min within the parent's min below the first level, the
 * parent exists and is a parent group, children/pods versus is-parent, moves), plus the
 * object's own syntax and name conflicts with queue groups; DELETE is denied while the
 * group has children or pods. Koordinator objects also get Koordinator's webhook rules:
 * spec.min names only resources of spec.max; for the keys of the annotation
 * .../max-strict-check-resource-keys, max covers status.used; the label .../tree-id never
 * changes and equals the parent's and the children's; max names the same resources as
 * the parent's (and the children's), min only resources of the parent's min; the label
 * .../allow-force-update "true" skips the children's-min-sum checks; a namespace listed
 * in .../namespaces must not be bound to another quota; koordinator-root-quota and
 * koordinator-system-quota cannot be created, changed or deleted, and
 * koordinator-default-quota not deleted. Denials say why. */
int kq_elastic_validate_admission(void *ud, const json_t *request, char *msg, size_t len);

/* kq_admission_pod_hook_t for kq_admission_opts_t.check_pod_quota (ud = the module),
 * Koordinator's pod rules (koordinator-sh/koordinator pkg/webhook/elasticquota/pod_check.go):
 * a pod whose label quota.scheduling.koordinator.sh/name names a parent quota group is
 * denied (CREATE and UPDATE), and so is one naming a quota kq_resolve_check_name refuses
 * (issue 37; the pod's queue not known here); an UPDATE may not change the label
 * quota.scheduling.koordinator.sh/preemptible (whether the pod counts within min). 0 or
 * KQ_EDENIED with msg. */
int kq_elastic_check_pod(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len);

#endif
