/* Koordinator's multi-tree quotas (koordinator-sh/koordinator pkg/quota-controller/profile,
 * pkg/scheduler/plugins/elasticquota/quota_handler.go). An ElasticQuotaProfile names a root
 * quota (spec.quotaName) and a node selector; Koordinator's profile controller writes that
 * root quota with the tree-id / is-root labels and the matching nodes' allocatable (times
 * spec.resourceRatio) as its min and total, and the scheduler runs one GroupQuotaManager
 * per tree whose total is that, taking it off the default tree's total. kubequota reads
 * the profiles itself and keeps every tree in its one quota tree: a profile's root group
 * is a first-level group whose min and max are the tree's total and which lends nothing
 * (allow-lent-resource false), so its total is kept off what the other first-level groups
 * (the default tree) share, and its children share at most that total: no borrowing
 * across trees either way. An ElasticQuota object named like a profile's root (the one
 * Koordinator's controller wrote) is that root: its spec is not read (elastic.c). Rules:
 * include/kubequota/control/profiles.h.
 *
 * DESIGN
 * The profile table (keyed "namespace/name", with each tree's last computed total) is
 * serialised by the caller (the elastic module's apply lock); nodes come in as a view the
 * caller builds under its node lock, so this module keeps no node of its own. The
 * placement snapshot (which tree each group and each node is in) is rebuilt whole by
 * kq_profiles_place and swapped in under mu, a leaf rwlock the extender's lookups take for
 * reading. n_profiles mirrors the table's size for lock-free "any tree?" checks.
 */
#include "kubequota/control/profiles.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "kubequota/base/log.h"
#include "kubequota/control/koordinator.h"
#include "kubequota/engine/quota_tree.h"
#include "kubequota/kube/kube.h"

#define LABEL_IGNORE_DEFAULT_TREE KQ_EQ_LABEL_PREFIX "ignore-default-tree"
#define ANN_RESOURCE_KEYS KQ_EQ_LABEL_PREFIX "resource-keys"

/* ================================================================== types ==== */

/* An ElasticQuotaProfile (quota.koordinator.sh/v1alpha1): one quota tree. */
typedef struct kq_profile {
    char *key; /* namespace/name */
    UT_hash_handle hh;
    char *tree_id;       /* label tree-id, else Koordinator's hash of the key */
    char *quota;         /* spec.quotaName: the tree's root quota group */
    double ratio;        /* spec.resourceRatio, 1 when absent or out of (0, 1] */
    json_t *selector;    /* spec.nodeSelector (own copy, checked); NULL selects no node */
    bool is_parent;      /* spec.quotaLabels' is-parent */
    char **keys;         /* annotation resource-keys (default cpu, memory): the root's min/max */
    size_t n_keys;
    kq_resource_t total; /* the tree's total, as last computed */
    size_t n_nodes;
    uint64_t list_gen;
} profile_t;

/* The placement snapshot: a group's or a node's tree id. */
typedef struct treeof {
    char *name;
    char *tree;
    UT_hash_handle hh;
} treeof_t;


struct kq_profiles {
    profile_t *profiles;  /* the caller's lock */
    uint64_t list_gen;    /* the caller's lock */
    atomic_int n_profiles; /* HASH_COUNT(profiles), read with no lock */

    pthread_rwlock_t mu;  /* guards the placement snapshot */
    treeof_t *tgroups;    /* groups in a profile's tree -> its tree id */
    treeof_t *tnodes;     /* nodes a profile selects -> its tree id (the first profile) */
};

static const char *kv(const json_t *map, const char *key)
{
    const char *s = json_string_value(json_object_get(map, key));
    return s && *s ? s : NULL;
}

/* ================================================================== profiles ==== */

static int strcmp_key(const profile_t *a, const profile_t *b)
{
    return strcmp(a->key, b->key);
}

static void profile_free(profile_t *p)
{
    if (p == NULL)
        return;
    free(p->key);
    free(p->tree_id);
    free(p->quota);
    json_decref(p->selector);
    for (size_t i = 0; i < p->n_keys; i++)
        free(p->keys[i]);
    free(p->keys);
    kq_resource_free(&p->total);
    free(p);
}

/* Whether a node's labels satisfy a metav1.LabelSelector (checked by sel_check):
 * matchLabels and matchExpressions ANDed, as metav1.LabelSelectorAsSelector builds it;
 * an empty selector selects every node, a NULL one none. */
static bool sel_match(const json_t *sel, const json_t *labels)
{
    if (sel == NULL)
        return false;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)json_object_get(sel, "matchLabels"), k, v) {
        const char *have = json_string_value(json_object_get(labels, k));
        if (have == NULL || strcmp(have, json_string_value(v)) != 0)
            return false;
    }
    size_t i;
    const json_t *x;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, x) {
        const char *key = json_string_value(json_object_get(x, "key"));
        const char *op = json_string_value(json_object_get(x, "operator"));
        const char *have = json_string_value(json_object_get(labels, key));
        bool in = false;
        size_t j;
        const json_t *val;
        json_array_foreach(json_object_get(x, "values"), j, val) {
            if (have != NULL && strcmp(have, json_string_value(val)) == 0)
                in = true;
        }
        bool ok = strcmp(op, "In") == 0 ? in
                  : strcmp(op, "NotIn") == 0 ? !in
                  : strcmp(op, "Exists") == 0 ? have != NULL
                                               : have == NULL; /* DoesNotExist */
        if (!ok)
            return false;
    }
    return true;
}

/* Checks a nodeSelector as metav1.LabelSelectorAsSelector does; 0 or KQ_EPARSE with why. */
static int sel_check(const json_t *sel, const char *what, char *err, size_t len)
{
    if (!json_is_object(sel)) {
        kq_errf(err, len, "%s: not an object", what);
        return KQ_EPARSE;
    }
    const json_t *ml = json_object_get(sel, "matchLabels");
    const char *k;
    const json_t *v;
    if (ml != NULL && !json_is_object(ml)) {
        kq_errf(err, len, "%s.matchLabels: not an object", what);
        return KQ_EPARSE;
    }
    json_object_foreach((json_t *)ml, k, v) {
        if (!json_is_string(v)) {
            kq_errf(err, len, "%s.matchLabels[%s]: not a string", what, k);
            return KQ_EPARSE;
        }
    }
    const json_t *me = json_object_get(sel, "matchExpressions");
    if (me != NULL && !json_is_array(me)) {
        kq_errf(err, len, "%s.matchExpressions: not an array", what);
        return KQ_EPARSE;
    }
    size_t i;
    const json_t *x;
    json_array_foreach(me, i, x) {
        const char *key = json_string_value(json_object_get(x, "key"));
        const char *op = json_string_value(json_object_get(x, "operator"));
        const json_t *vals = json_object_get(x, "values");
        size_t n = json_array_size(vals);
        if (key == NULL || *key == '\0') {
            kq_errf(err, len, "%s.matchExpressions[%zu].key: missing", what, i);
            return KQ_EPARSE;
        }
        if (vals != NULL && !json_is_array(vals)) {
            kq_errf(err, len, "%s.matchExpressions[%zu].values: not an array", what, i);
            return KQ_EPARSE;
        }
        for (size_t j = 0; j < n; j++)
            if (!json_is_string(json_array_get(vals, j))) {
                kq_errf(err, len, "%s.matchExpressions[%zu].values[%zu]: not a string", what, i, j);
                return KQ_EPARSE;
            }
        bool set_op = op != NULL && (strcmp(op, "In") == 0 || strcmp(op, "NotIn") == 0);
        bool exist_op = op != NULL && (strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0);
        if (!set_op && !exist_op) {
            kq_errf(err, len, "%s.matchExpressions[%zu].operator: \"%s\" is not a valid label selector operator",
                    what, i, op ? op : "");
            return KQ_EPARSE;
        }
        if (set_op && n == 0) {
            kq_errf(err, len, "%s.matchExpressions[%zu].values: for 'in', 'notin' operators, values set can't be "
                    "empty", what, i);
            return KQ_EPARSE;
        }
        if (exist_op && n != 0) {
            kq_errf(err, len, "%s.matchExpressions[%zu].values: values set must be empty for exists and does not "
                    "exist", what, i);
            return KQ_EPARSE;
        }
    }
    return 0;
}

/* Koordinator's tree id of a profile without the label: fnv-64a of "namespace/name", in
 * decimal (profile_controller.go, hash). */
static void tree_hash(const char *key, char *out, size_t len)
{
    uint64_t h = 14695981039346656037ULL;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        h ^= *p;
        h *= 1099511628211ULL;
    }
    snprintf(out, len, "%llu", (unsigned long long)h);
}

static int profile_parse(const json_t *obj, profile_t **out, char *err, size_t len)
{
    const json_t *meta = json_object_get(obj, "metadata");
    const json_t *spec = json_object_get(obj, "spec");
    const char *name = kv(meta, "name"), *ns = kv(meta, "namespace");
    if (name == NULL) {
        kq_errf(err, len, "ElasticQuotaProfile: metadata.name missing");
        return KQ_EPARSE;
    }
    if (ns == NULL)
        ns = "default";
    char what[300];
    snprintf(what, sizeof(what), "ElasticQuotaProfile %.100s/%.100s", ns, name);
    const char *quota = kv(spec, "quotaName");
    if (quota == NULL) {
        kq_errf(err, len, "%s: spec.quotaName missing (it names the tree's root quota)", what);
        return KQ_EPARSE;
    }
    if (strlen(quota) > KQ_QTREE_NAME_MAX || strcmp(quota, KQ_KOORD_ROOT) == 0 || strcmp(quota, KQ_KOORD_SYSTEM) == 0 ||
        strcmp(quota, KQ_KOORD_DEFAULT) == 0 || strcmp(quota, KQ_QTREE_DEFAULT) == 0 ||
        strcmp(quota, KQ_QTREE_SYSTEM) == 0 || strcmp(quota, KQ_QTREE_ROOT) == 0) {
        kq_errf(err, len, "%s: spec.quotaName \"%.64s\" is reserved or longer than %d bytes", what, quota,
                KQ_QTREE_NAME_MAX);
        return KQ_EPARSE;
    }
    const json_t *sel = json_object_get(spec, "nodeSelector");
    char swhat[320];
    snprintf(swhat, sizeof(swhat), "%s: spec.nodeSelector", what);
    if (sel != NULL && !json_is_null(sel) && sel_check(sel, swhat, err, len) != 0)
        return KQ_EPARSE;
    profile_t *p = calloc(1, sizeof(*p));
    if (p == NULL)
        goto nomem;
    p->ratio = 1.0;
    const char *rr = json_string_value(json_object_get(spec, "resourceRatio"));
    if (rr != NULL) { /* DecorateResourceByResourceRatio: a bad or out-of-range ratio is 1 */
        char *end;
        double r = strtod(rr, &end);
        if (end != rr && *end == '\0' && r > 0 && r <= 1.0)
            p->ratio = r;
        else
            kq_warn("event=profile_ratio_ignored profile=%s/%s resourceRatio=\"%.32s\" msg=\"not a number in "
                    "(0, 1]: ratio 1, as Koordinator\"", ns, name, rr);
    }
    char hash[24];
    const char *tid = kv(json_object_get(meta, "labels"), KQ_KOORD_LABEL_TREE_ID);
    if (tid == NULL) {
        char key[600];
        snprintf(key, sizeof(key), "%s/%s", ns, name);
        tree_hash(key, hash, sizeof(hash));
        tid = hash;
    }
    const char *isp = kv(json_object_get(spec, "quotaLabels"), KQ_KOORD_LABEL_IS_PARENT);
    p->is_parent = isp != NULL && strcmp(isp, "true") == 0;
    if (kv(json_object_get(spec, "quotaLabels"), LABEL_IGNORE_DEFAULT_TREE) != NULL)
        kq_warn("event=profile_key_ignored profile=%s/%s key=%s msg=\"not honoured: the tree's total is taken off "
                "the default tree's, as without the label\"", ns, name, LABEL_IGNORE_DEFAULT_TREE);
    /* the root quota's min and max name these resources (profile_controller.go: the
     * resource-keys annotation, a JSON list; unreadable: warned, the default) */
    const char *rk = kv(json_object_get(meta, "annotations"), ANN_RESOURCE_KEYS);
    json_t *keys = rk != NULL ? json_loads(rk, 0, NULL) : NULL;
    bool keys_ok = json_is_array(keys) && json_array_size(keys) <= 64;
    for (size_t i = 0; keys_ok && i < json_array_size(keys); i++)
        keys_ok = json_is_string(json_array_get(keys, i)) && kq_resource_name(json_string_value(json_array_get(keys, i)));
    if (rk != NULL && !keys_ok)
        kq_warn("event=profile_resource_keys_ignored profile=%s/%s value=\"%.64s\" msg=\"not a JSON list of "
                "resource names: cpu and memory, as Koordinator\"", ns, name, rk);
    size_t nk = keys_ok ? json_array_size(keys) : 2;
    p->keys = calloc(nk + 1, sizeof(char *));
    for (size_t i = 0; p->keys != NULL && i < nk; i++) {
        const char *k = keys_ok ? json_string_value(json_array_get(keys, i)) : (i == 0 ? "cpu" : "memory");
        if ((p->keys[p->n_keys] = strdup(k)) != NULL)
            p->n_keys++;
    }
    json_decref(keys);
    if (p->keys == NULL || p->n_keys != nk)
        goto nomem;
    if (asprintf(&p->key, "%s/%s", ns, name) < 0)
        p->key = NULL;
    p->tree_id = strdup(tid);
    p->quota = strdup(quota);
    if (sel != NULL && !json_is_null(sel))
        p->selector = json_deep_copy(sel);
    if (p->key == NULL || p->tree_id == NULL || p->quota == NULL || (sel != NULL && !json_is_null(sel) && !p->selector))
        goto nomem;
    *out = p;
    return 0;
nomem:
    profile_free(p);
    kq_errf(err, len, "out of memory");
    return KQ_ENOMEM;
}

int kq_profiles_event(kq_profiles_t *e, int type, const json_t *obj, const kq_profile_t **out, bool *existed,
                      char *err, size_t len)
{
    profile_t *p = NULL;
    *out = NULL;
    *existed = false;
    int rc = profile_parse(obj, &p, err, len);
    if (rc != 0)
        return rc;
    profile_t *cur;
    HASH_FIND_STR(e->profiles, p->key, cur);
    if (cur != NULL) {
        HASH_DEL(e->profiles, cur);
        profile_free(cur);
    }
    if (type == KQ_WATCH_DELETED) {
        kq_info("event=profile_deleted profile=%s", p->key);
        profile_free(p);
        p = NULL;
    } else {
        p->list_gen = e->list_gen;
        HASH_ADD_KEYPTR(hh, e->profiles, p->key, strlen(p->key), p);
    }
    atomic_store(&e->n_profiles, (int)HASH_COUNT(e->profiles));
    *out = p;
    *existed = cur != NULL;
    return 0;
}

void kq_profile_log(const kq_profile_t *p, const char *ev)
{
    char buf[512];
    kq_resource_format(&p->total, buf, sizeof(buf));
    kq_info("event=%s profile=%s tree=%s root=%s nodes=%zu total=\"%s\"", ev, p->key, p->tree_id, p->quota,
            p->n_nodes, buf);
}

void kq_profiles_list_begin(kq_profiles_t *e)
{
    e->list_gen++;
}

bool kq_profiles_list_end(kq_profiles_t *e)
{
    profile_t *p, *tmp;
    bool changed = false;
    HASH_ITER(hh, e->profiles, p, tmp) {
        if (p->list_gen == e->list_gen)
            continue;
        HASH_DEL(e->profiles, p);
        profile_free(p);
        changed = true;
    }
    atomic_store(&e->n_profiles, (int)HASH_COUNT(e->profiles));
    return changed;
}

size_t kq_profiles_count(const kq_profiles_t *e)
{
    return HASH_COUNT(e->profiles);
}

/* ================================================================== totals ==== */

bool kq_profiles_compute(kq_profiles_t *e, const kq_profile_node_t *nodes, size_t n_nodes, bool synced)
{
    bool changed = false;
    for (profile_t *p = e->profiles; p != NULL; p = p->hh.next) {
        kq_resource_t t = KQ_RESOURCE_EMPTY;
        size_t n = 0;
        int rc = 0;
        for (size_t i = 0; synced && rc == 0 && i < n_nodes; i++)
            if (sel_match(p->selector, nodes[i].labels)) {
                rc = kq_resource_add(&t, nodes[i].alloc);
                n++;
            }
        if (rc != 0) {
            kq_warn("event=tree_total_overflow tree=%s error=\"%s\" msg=\"total kept\"", p->tree_id, kq_strerror(rc));
            kq_resource_free(&t);
            continue;
        }
        for (uint32_t i = 0; p->ratio < 1.0 && i < t.n; i++) /* MultiplyQuantity: truncated */
            KQ_RES_E(&t)[i].value = (int64_t)((double)KQ_RES_E(&t)[i].value * p->ratio);
        if (!kq_resource_equal(&t, &p->total) || t.n != p->total.n || n != p->n_nodes) {
            kq_resource_move(&p->total, &t);
            p->n_nodes = n;
            changed = true;
        }
        kq_resource_free(&t);
    }
    return changed;
}

int kq_profiles_roots(kq_profiles_t *e, kq_profiles_root_fn fn, void *ud)
{
    HASH_SRT(hh, e->profiles, strcmp_key);
    for (profile_t *p = e->profiles; p != NULL; p = p->hh.next) {
        /* min and max: the tree's total of each resource key (0 when its nodes have none),
         * as the profile controller sets the root's min; the max is that total too, not
         * Koordinator's MaxInt64/2000, as the tree's manager caps its root by its total */
        kq_resource_t mm = KQ_RESOURCE_EMPTY;
        int rc = 0;
        for (size_t i = 0; rc == 0 && i < p->n_keys; i++)
            rc = kq_resource_set(&mm, p->keys[i], kq_resource_get(&p->total, p->keys[i], NULL));
        if (rc == 0)
            rc = fn(ud, p->key, p->quota, &mm, p->is_parent);
        kq_resource_free(&mm);
        if (rc != 0)
            return rc;
    }
    return 0;
}

bool kq_profiles_is_root(const kq_profiles_t *e, const char *group)
{
    for (const profile_t *p = e->profiles; p != NULL; p = p->hh.next)
        if (strcmp(p->quota, group) == 0)
            return true;
    return false;
}

/* ================================================================== placement ==== */

static void treeof_free(treeof_t *t)
{
    treeof_t *x, *tmp;
    HASH_ITER(hh, t, x, tmp) {
        HASH_DEL(t, x);
        free(x->name);
        free(x->tree);
        free(x);
    }
}

static int treeof_add(treeof_t **t, const char *name, const char *tree)
{
    treeof_t *x;
    HASH_FIND_STR(*t, name, x);
    if (x != NULL)
        return 0; /* the first profile (by key) keeps it */
    if ((x = calloc(1, sizeof(*x))) == NULL || (x->name = strdup(name)) == NULL ||
        (x->tree = strdup(tree)) == NULL) {
        if (x != NULL)
            free(x->name);
        free(x);
        return KQ_ENOMEM;
    }
    HASH_ADD_KEYPTR(hh, *t, x->name, strlen(x->name), x);
    return 0;
}

bool kq_profiles_placing(const kq_profiles_t *e)
{
    return e->profiles != NULL || e->tgroups != NULL || e->tnodes != NULL;
}

void kq_profiles_place(kq_profiles_t *e, const char *const *groups, const char *const *tops, size_t n,
                       const kq_profile_node_t *nodes, size_t n_nodes)
{
    treeof_t *tg = NULL, *tn = NULL;
    int rc = 0;
    HASH_SRT(hh, e->profiles, strcmp_key);
    for (size_t i = 0; rc == 0 && e->profiles != NULL && i < n; i++)
        for (const profile_t *p = e->profiles; rc == 0 && p != NULL; p = p->hh.next)
            if (strcmp(p->quota, tops[i]) == 0)
                rc = treeof_add(&tg, groups[i], p->tree_id);
    for (size_t i = 0; rc == 0 && e->profiles != NULL && i < n_nodes; i++)
        for (const profile_t *p = e->profiles; rc == 0 && p != NULL; p = p->hh.next)
            if (sel_match(p->selector, nodes[i].labels))
                rc = treeof_add(&tn, nodes[i].name, p->tree_id);
    if (rc != 0) {
        kq_error("event=tree_snapshot_failed error=\"%s\" msg=\"the last placement snapshot stays\"",
                 kq_strerror(rc));
        treeof_free(tg);
        treeof_free(tn);
        return;
    }
    pthread_rwlock_wrlock(&e->mu);
    treeof_t *og = e->tgroups, *on = e->tnodes;
    e->tgroups = tg;
    e->tnodes = tn;
    pthread_rwlock_unlock(&e->mu);
    treeof_free(og);
    treeof_free(on);
}

bool kq_profiles_has_trees(kq_profiles_t *e)
{
    return e != NULL && atomic_load(&e->n_profiles) > 0;
}

bool kq_profiles_group_tree(kq_profiles_t *e, const char *group, char *tree, size_t len)
{
    bool found = false;
    pthread_rwlock_rdlock(&e->mu);
    treeof_t *x = NULL;
    if (e->tgroups != NULL)
        HASH_FIND_STR(e->tgroups, group, x);
    if (x != NULL && strlen(x->tree) < len) {
        memcpy(tree, x->tree, strlen(x->tree) + 1);
        found = true;
    }
    pthread_rwlock_unlock(&e->mu);
    return found;
}

bool kq_profiles_node_in_tree(kq_profiles_t *e, const char *tree, const char *node, size_t node_len)
{
    pthread_rwlock_rdlock(&e->mu);
    treeof_t *x = NULL;
    if (e->tnodes != NULL)
        HASH_FIND(hh, e->tnodes, node, node_len, x);
    bool in = x != NULL && strcmp(x->tree, tree) == 0;
    pthread_rwlock_unlock(&e->mu);
    return in;
}

/* ================================================================== views ==== */

json_t *kq_profiles_json(kq_profiles_t *e, const kq_profile_node_t *nodes_in, size_t n_nodes)
{
    json_t *arr = json_array();
    HASH_SRT(hh, e->profiles, strcmp_key);
    for (profile_t *p = e->profiles; arr != NULL && p != NULL; p = p->hh.next) {
        json_t *nodes = json_array();
        for (size_t i = 0; nodes != NULL && i < n_nodes; i++)
            if (sel_match(p->selector, nodes_in[i].labels) &&
                json_array_append_new(nodes, json_string(nodes_in[i].name)) != 0) {
                json_decref(nodes);
                nodes = NULL;
            }
        json_t *o = nodes ? json_pack("{s:s,s:s,s:s,s:f,s:o,s:o}", "tree", p->tree_id, "profile", p->key,
                                      "rootQuota", p->quota, "resourceRatio", p->ratio, "nodes", nodes,
                                      "totalResource", kq_resource_to_json(&p->total))
                          : NULL;
        if (o == NULL || json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

int kq_profiles_tree_of_groups(kq_profiles_t *e, json_t *qtree)
{
    json_t *groups = json_object_get(qtree, "groups");
    json_t *by = json_object();
    size_t i;
    json_t *g;
    int rc = by != NULL ? 0 : KQ_ENOMEM;
    json_array_foreach(groups, i, g) {
        const char *n = json_string_value(json_object_get(g, "name"));
        if (rc == 0 && n != NULL && json_object_set(by, n, g) != 0)
            rc = KQ_ENOMEM;
    }
    json_array_foreach(groups, i, g) {
        if (rc != 0)
            break;
        /* the first-level ancestor (depth is bounded by KQ_QTREE_MAX_DEPTH) */
        const json_t *top = g;
        for (int d = 0; d <= KQ_QTREE_MAX_DEPTH; d++) {
            const char *par = json_string_value(json_object_get(top, "parent"));
            const json_t *up = par != NULL ? json_object_get(by, par) : NULL;
            if (up == NULL || json_is_null(json_object_get(up, "parent")))
                break;
            top = up;
        }
        const char *tn = json_string_value(json_object_get(top, "name"));
        const char *tree = "";
        for (const profile_t *p = e->profiles; tn != NULL && p != NULL; p = p->hh.next)
            if (strcmp(p->quota, tn) == 0)
                tree = p->tree_id;
        if (json_object_set_new(g, "tree", json_string(tree)) != 0)
            rc = KQ_ENOMEM;
    }
    json_decref(by);
    return rc;
}



/* ================================================================== lifecycle ==== */

kq_profiles_t *kq_profiles_new(void)
{
    kq_profiles_t *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    pthread_rwlock_init(&e->mu, NULL);
    return e;
}

void kq_profiles_free(kq_profiles_t *e)
{
    if (e == NULL)
        return;
    profile_t *pf, *pftmp;
    HASH_ITER(hh, e->profiles, pf, pftmp) {
        HASH_DEL(e->profiles, pf);
        profile_free(pf);
    }
    treeof_free(e->tgroups);
    treeof_free(e->tnodes);
    pthread_rwlock_destroy(&e->mu);
    free(e);
}
