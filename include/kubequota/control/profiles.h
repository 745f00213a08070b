/* Koordinator's multi-tree quotas: the ElasticQuotaProfiles (quota.koordinator.sh/v1alpha1,
 * koordinator-sh/koordinator pkg/quota-controller/profile,
 * pkg/scheduler/plugins/elasticquota/quota_handler.go), the total of each profile's tree
 * and which tree each group and node is in. The elastic module (elastic.h) feeds it the
 * objects and the nodes and turns each profile into its tree's root group.
 *
 * For each profile:
 *  - tree id: its quota.scheduling.koordinator.sh/tree-id label, else fnv-64a of
 *    "namespace/name" in decimal, as the profile controller generates it;
 *  - total: the counted allocatable of the nodes spec.nodeSelector selects (matchLabels and
 *    matchExpressions, as metav1.LabelSelectorAsSelector; no selector selects nothing), each
 *    quantity times spec.resourceRatio and truncated (a ratio that is not a number in
 *    (0, 1] counts as 1, as in Koordinator);
 *  - root group spec.quotaName: first level, min = max = the total of each resource key (the
 *    annotation quota.scheduling.koordinator.sh/resource-keys, a JSON list; default cpu and
 *    memory), lends nothing, a parent when spec.quotaLabels has is-parent "true".
 * A node two profiles select is placed in the tree of the first profile by namespace/name.
 *
 * Threads and locks: the profile table is the caller's to serialise: every function below
 * but the placement lookups (kq_profiles_has_trees, kq_profiles_group_tree,
 * kq_profiles_node_in_tree) is called under one lock of the caller's (the elastic module's
 * apply lock). The placement snapshot has the module's own rwlock, a leaf: lookups take it
 * for reading from any thread (the extender filter), kq_profiles_place for writing. No I/O.
 */
#ifndef KUBEQUOTA_PROFILES_H
#define KUBEQUOTA_PROFILES_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"

typedef struct kq_profiles kq_profiles_t;
typedef struct kq_profile kq_profile_t;

/* A node as the profiles read it (borrowed from the caller's node table, valid while the
 * caller holds that table's lock). */
typedef struct kq_profile_node {
    const char *name;
    const json_t *labels;       /* metadata.labels, NULL: none */
    const kq_resource_t *alloc; /* counted allocatable (empty when unschedulable) */
} kq_profile_node_t;

/* NULL on ENOMEM. */
kq_profiles_t *kq_profiles_new(void);
/* NULL is a no-op. */
void kq_profiles_free(kq_profiles_t *ps);

/* An ElasticQuotaProfile event (kube.h's KQ_WATCH_*): added or replaced, or removed. 0, or
 * KQ_EPARSE / KQ_ENOMEM with what, where and why in err (nothing changed). *p: the profile
 * now in the table (borrowed until the next change; NULL after a delete), *existed: one of
 * that name was there before. */
int kq_profiles_event(kq_profiles_t *ps, int type, const json_t *obj, const kq_profile_t **p, bool *existed, char *err,
                      size_t len) KQ_WUR;
/* Logs a profile's tree (event ev: profile_added, profile_updated). */
void kq_profile_log(const kq_profile_t *p, const char *ev);
/* A full list starts; at its end the profiles it did not show are removed (true when one
 * was). */
void kq_profiles_list_begin(kq_profiles_t *ps);
bool kq_profiles_list_end(kq_profiles_t *ps);
size_t kq_profiles_count(const kq_profiles_t *ps);

/* Recomputes every tree's total from nodes[n] (no node counts before the first full node
 * list: synced false); true when one changed. */
bool kq_profiles_compute(kq_profiles_t *ps, const kq_profile_node_t *nodes, size_t n, bool synced);

/* Calls fn for each profile's root group, by profile: its profile ("namespace/name"), its
 * name, its min and max (the tree's total of each resource key, 0 when its nodes have
 * none) and whether it is a parent. Stops at and returns fn's first non-zero answer. */
typedef int (*kq_profiles_root_fn)(void *ud, const char *profile, const char *group, const kq_resource_t *min_max,
                                   bool is_parent);
int kq_profiles_roots(kq_profiles_t *ps, kq_profiles_root_fn fn, void *ud) KQ_WUR;
/* Whether group is a profile's root group. */
bool kq_profiles_is_root(const kq_profiles_t *ps, const char *group);

/* Whether kq_profiles_place has anything to do (a profile, or a snapshot to empty). */
bool kq_profiles_placing(const kq_profiles_t *ps);
/* Rebuilds the placement snapshot: groups[i] (whose first-level ancestor is tops[i]) in the
 * tree whose root that is, nodes[n_nodes] in the tree of the first profile selecting them.
 * On ENOMEM the last snapshot stays (logged). */
void kq_profiles_place(kq_profiles_t *ps, const char *const *groups, const char *const *tops, size_t n,
                       const kq_profile_node_t *nodes, size_t n_nodes);
/* Placement lookups, for the extender filter: any profile (one atomic load); the tree of
 * `group` (copied into tree, len bytes with the NUL); whether a node (name of node_len
 * bytes) is in tree `tree`. Hash lookups under the read lock; no allocation. */
bool kq_profiles_has_trees(kq_profiles_t *ps);
bool kq_profiles_group_tree(kq_profiles_t *ps, const char *group, char *tree, size_t len);
bool kq_profiles_node_in_tree(kq_profiles_t *ps, const char *tree, const char *node, size_t node_len);

/* The trees, sorted by profile: [{"tree", "profile", "rootQuota", "resourceRatio", "nodes"
 * (the names of those of nodes[n] it selects), "totalResource"}]. New reference; NULL on
 * ENOMEM. */
json_t *kq_profiles_json(kq_profiles_t *ps, const kq_profile_node_t *nodes, size_t n);
/* Sets "tree" (the tree id, "" for the default tree) on every group of a kq_qtree_json
 * view. 0 or KQ_ENOMEM. */
int kq_profiles_tree_of_groups(kq_profiles_t *ps, json_t *qtree) KQ_WUR;

#endif
