/* Elastic quota wiring: builds the quota tree's groups from queues.yaml and ElasticQuota
 * objects, keeps the cluster total in step with the nodes, drives reclaim (reclaim.c),
 * writes ElasticQuota status, feeds the pod -> quota group resolver (resolve.c) and
 * validates ElasticQuota objects for admission. Rules: include/kubequota/elastic.h.
 *
 * DESIGN
 * Desired and applied groups. Two sources describe groups: the queue groups of the
 * current config snapshot (qsrc table, replaced on reload) and the ElasticQuota objects
 * (objs table, keyed "apiGroup/namespace/name", each with an arrival number). reconcile()
 * merges them into the desired set (queue first, then objects by arrival; a name already
 * taken is a conflict) and drives the tree towards it: set_group for every desired group
 * whose spec differs from what was applied, remove (through the ledger, so its pods'
 * groups are renamed in the same step) for every applied group no longer desired, in
 * passes until nothing changes, so a parent is created before its children and removed
 * after them whatever order the events came in. What the tree refuses stays as it was and
 * is logged when the reason changes. What the resolver reads (the namespace -> group map,
 * the bounded queue groups, who may name each group) is rebuilt at the end of every
 * reconcile and swapped into the resolver whole (rebuild_resolver). Resolution is
 * level-triggered: when a reconcile changed what the resolver answers (groups, leaf or
 * parent, the namespace map), the ledger re-resolves every pod (reresolve(); deferred to
 * the end of a list, so a restart files no pod before its quota is listed for good).
 *
 * Threads. Informer threads (nodes; one per served ElasticQuota API group; profiles) and
 * the timer thread call in. Locks: apply_mu serialises everything that changes groups or
 * the objs table (reconcile, object events, status bookkeeping) and the profile table
 * (profiles.c leaves its table to the caller's lock); node_mu guards the node table (with
 * the nodes' labels) and the total. The resolver (resolve.c) and the trees' placement
 * snapshot (profiles.c) have their own locks. Order: apply_mu -> ledger -> ugm -> quota
 * tree; apply_mu -> ledger -> resolver -> quota tree (re-resolution calls the resolver
 * under the ledger lock); apply_mu -> resolver (the swap); apply_mu -> node_mu (a tree's
 * total is summed from the nodes) -> placement (the snapshot is built from a node view);
 * node_mu -> quota tree. Node events take apply_mu only after releasing node_mu.
 * The timer thread alone runs reclaim (reclaim.c, whose state is that thread's) and
 * touches the CRD probe state. No I/O under a lock: probes, evictions, events and
 * status PATCHes use copies made under the locks.
 */
#include "kubequota/control/elastic.h"
#include "kubequota/kube/leader.h"
#include "kubequota/control/metering.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/control/reclaim.h"
#include "kubequota/control/resolve.h"
#include "kubequota/base/log.h"

#define LABEL_PARENT KQ_EQ_LABEL_PREFIX "parent"
#define LABEL_ALLOW_LENT KQ_EQ_LABEL_PREFIX "allow-lent-resource"
#define LABEL_FORCE KQ_EQ_LABEL_PREFIX "allow-force-update"
#define LABEL_IS_ROOT KQ_EQ_LABEL_PREFIX "is-root"
#define LABEL_IGNORE_DEFAULT_TREE KQ_EQ_LABEL_PREFIX "ignore-default-tree"
#define ANN_STRICT_KEYS KQ_EQ_LABEL_PREFIX "max-strict-check-resource-keys"
#define ANN_SHARED_WEIGHT KQ_EQ_LABEL_PREFIX "shared-weight"
#define ANN_NAMESPACES KQ_EQ_LABEL_PREFIX "namespaces"
#define ANN_REQUEST KQ_EQ_LABEL_PREFIX "request"
#define ANN_CHILD_REQUEST KQ_EQ_LABEL_PREFIX "child-request"
#define ANN_NP_USED KQ_EQ_LABEL_PREFIX "non-preemptible-used"
#define ANN_RESOURCE_KEYS KQ_EQ_LABEL_PREFIX "resource-keys" /* on an ElasticQuotaProfile */
#define PROBE_MIN_MS 1000
#define PROBE_MAX_MS 60000
#define EXPIRE_EVERY_MS 30000
#define EXPIRE_AGE_S 120
#define N_API 2
#define ERR_MAX 512

static const char *const api_groups[N_API] = {KQ_EQ_GROUP_UPSTREAM, KQ_EQ_GROUP_KOORD};

/* ================================================================== types ==== */

typedef struct gspec {
    char *name;
    char *parent; /* NULL: first level */
    kq_resource_t min, max, weight;
    bool allow_lent, is_parent;
    bool sum_of_mins; /* scheduler-plugins' admission rule */
    bool force;       /* Koordinator's allow-force-update label */
} gspec_t;

/* A desired group from a queue, or an applied group. */
typedef struct gent {
    gspec_t s;
    char *owner; /* "queue", "default", or the object key */
    UT_hash_handle hh;
} gent_t;

/* What the status of an object says (status.used and Koordinator's annotations). */
typedef struct stvals {
    kq_resource_t used, runtime, request, child_request, np_used;
} stvals_t;

static void stvals_free(stvals_t *v)
{
    kq_resource_free(&v->used);
    kq_resource_free(&v->runtime);
    kq_resource_free(&v->request);
    kq_resource_free(&v->child_request);
    kq_resource_free(&v->np_used);
}

/* *dst = *src (dst's old sets freed), src left empty. */
static void stvals_move(stvals_t *dst, stvals_t *src)
{
    kq_resource_move(&dst->used, &src->used);
    kq_resource_move(&dst->runtime, &src->runtime);
    kq_resource_move(&dst->request, &src->request);
    kq_resource_move(&dst->child_request, &src->child_request);
    kq_resource_move(&dst->np_used, &src->np_used);
    stvals_free(src);
}

typedef struct eqobj {
    char *key; /* apiGroup/ns/name */
    UT_hash_handle hh;
    char *api_group, *ns, *name;
    gspec_t s;          /* s.name: the group (metadata.name, or "default") */
    char **nss;         /* namespaces annotation */
    size_t n_nss;
    char *tree_id;      /* label quota.scheduling.koordinator.sh/tree-id, NULL none */
    bool is_root;       /* label quota.scheduling.koordinator.sh/is-root: "true" */
    bool ignored;       /* koordinator root/system quota */
    uint64_t seq;       /* arrival order */
    uint64_t list_gen;
    bool conflict;      /* logged as conflicting */
    bool ns_conflict;   /* logged: a namespace it binds is bound to an earlier object */
    /* status bookkeeping (timer thread, under apply_mu) */
    bool st_written;
    stvals_t st;
    int64_t st_last_ms;
} eqobj_t;

typedef struct node {
    char *name;
    UT_hash_handle hh;
    kq_resource_t alloc; /* counted part: allocatable when schedulable, else empty */
    uint64_t gen;
    json_t *labels;      /* metadata.labels (own copy), for ElasticQuotaProfile selectors */
} node_t;

typedef struct failmsg {
    char *name;
    char *msg;
    UT_hash_handle hh;
} failmsg_t;

struct informer_ud {
    kq_elastic_t *e;
    const char *api_group;
};

struct kq_elastic {
    kq_app_t *app;
    kq_elastic_opts_t o;
    kq_qtree_t *qt;

    pthread_mutex_t apply_mu;
    gent_t *qsrc;      /* desired queue groups */
    eqobj_t *objs;
    gent_t *applied;
    failmsg_t *fails;
    uint64_t seq;
    uint64_t list_gen[N_API];
    bool listing[N_API];  /* an ElasticQuota list is being applied (between begin and end) */
    bool prof_listing;    /* the same for ElasticQuotaProfiles */
    bool reresolve_due;   /* resolution changed while listing: re-resolve at the list's end */
    kq_config_t *cfg;  /* last applied snapshot (timer thread) */

    kq_resolver_t *resolver; /* fed by reconcile (rebuild_resolver); its own lock */


    pthread_mutex_t node_mu;
    node_t *nodes;
    kq_resource_t total;
    bool nodes_synced;
    uint64_t node_gen;

    /* threads */
    pthread_mutex_t tmu;
    pthread_cond_t tcv;
    bool stopping, started;
    pthread_t timer;
    kq_watch_t *node_watch;
    kq_watch_t *eq_watch[N_API];
    kq_watch_t *prof_watch; /* ElasticQuotaProfiles, started like eq_watch once served */
    int64_t prof_probe_at, prof_probe_delay;
    bool prof_probe_logged;
    kq_profiles_t *profiles; /* the table under apply_mu; its placement snapshot under its own lock */
    struct informer_ud iud[N_API];
    int64_t probe_at[N_API], probe_delay[N_API];
    bool probe_logged[N_API];
    bool no_status_sub[N_API]; /* timer thread: /status answered 404 (Koordinator's CRD) */

    /* timer thread only */
    kq_reclaim_t *reclaim; /* its state is the timer thread's (reclaim.h) */
    int64_t next_expire_ms;

    atomic_ulong st_ok, st_failed;
};

/* multi-tree quotas (section "trees") */
static int trees_desired(kq_elastic_t *e, gent_t **want);
static bool tree_root_object(const kq_elastic_t *e, const eqobj_t *o);
static void trees_refresh(kq_elastic_t *e);
static void trees_snapshot(kq_elastic_t *e);

/* ================================================================== helpers ==== */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool str_eq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void gspec_clear(gspec_t *s)
{
    free(s->name);
    free(s->parent);
    kq_resource_free(&s->min);
    kq_resource_free(&s->max);
    kq_resource_free(&s->weight);
    memset(s, 0, sizeof(*s));
}

/* dst (not initialised) = a deep copy of src. KQ_ENOMEM leaves dst cleared. */
static int gspec_copy(gspec_t *dst, const gspec_t *src)
{
    *dst = *src; /* flags; every pointer is replaced just below */
    kq_resource_init(&dst->min);
    kq_resource_init(&dst->max);
    kq_resource_init(&dst->weight);
    dst->name = strdup(src->name);
    dst->parent = src->parent ? strdup(src->parent) : NULL;
    if (dst->name == NULL || (src->parent && dst->parent == NULL) || kq_resource_copy(&dst->min, &src->min) != 0 ||
        kq_resource_copy(&dst->max, &src->max) != 0 || kq_resource_copy(&dst->weight, &src->weight) != 0) {
        gspec_clear(dst);
        return KQ_ENOMEM;
    }
    return 0;
}

static bool gspec_same(const gspec_t *a, const gspec_t *b)
{
    return str_eq(a->name, b->name) && str_eq(a->parent, b->parent) && kq_resource_equal(&a->min, &b->min) &&
           kq_resource_equal(&a->weight, &b->weight) && a->allow_lent == b->allow_lent &&
           a->is_parent == b->is_parent && a->sum_of_mins == b->sum_of_mins && a->force == b->force &&
           a->max.n == b->max.n &&
           (a->max.n == 0 || memcmp(KQ_RES_E(&a->max), KQ_RES_E(&b->max), a->max.n * sizeof(KQ_RES_E(&a->max)[0])) == 0);
}

static void to_qspec(const gspec_t *s, kq_qgroup_spec_t *q)
{
    kq_qgroup_spec_init(q, s->name);
    q->parent = s->parent;
    q->min = s->min;
    q->max = s->max;
    q->shared_weight = s->weight;
    q->allow_lent = s->allow_lent;
    q->is_parent = s->is_parent;
    q->sum_of_mins = s->sum_of_mins;
    q->allow_force_update = s->force;
}

static void gent_free(gent_t *g)
{
    if (g == NULL)
        return;
    gspec_clear(&g->s);
    free(g->owner);
    free(g);
}

static gent_t *gent_new(const gspec_t *s, const char *owner)
{
    gent_t *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    if (gspec_copy(&g->s, s) != 0 || (g->owner = strdup(owner)) == NULL) {
        gent_free(g);
        return NULL;
    }
    return g;
}

static void gent_table_free(gent_t **t)
{
    gent_t *g, *tmp;
    HASH_ITER(hh, *t, g, tmp) {
        HASH_DEL(*t, g);
        gent_free(g);
    }
}

static void eqobj_free(eqobj_t *o)
{
    if (o == NULL)
        return;
    free(o->key);
    free(o->api_group);
    free(o->ns);
    free(o->name);
    free(o->tree_id);
    gspec_clear(&o->s);
    stvals_free(&o->st);
    for (size_t i = 0; i < o->n_nss; i++)
        free(o->nss[i]);
    free(o->nss);
    free(o);
}

/* ================================================================== parsing ==== */

/* A ResourceList: values are quantity strings or JSON numbers meaning whole quantities
 * ("cpu: 10" is ten cores, as Kubernetes reads it). */
static int rlist_into(const json_t *obj, const char *what, kq_resource_t *r, char *err, size_t len);

/* *out (initialised) = the list; on error *out is unchanged. */
static int rlist(const json_t *obj, const char *what, kq_resource_t *out, char *err, size_t len)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    int rc = rlist_into(obj, what, &r, err, len);
    if (rc == 0)
        kq_resource_move(out, &r);
    kq_resource_free(&r);
    return rc;
}

static int rlist_into(const json_t *obj, const char *what, kq_resource_t *rp, char *err, size_t len)
{
#define r (*rp)
    if (obj == NULL || json_is_null(obj))
        return 0;
    if (!json_is_object(obj)) {
        kq_errf(err, len, "%s: expected a map of resource quantities", what);
        return KQ_EPARSE;
    }
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v) {
        char num[64], why[256] = "";
        const char *q = num;
        if (json_is_string(v))
            q = json_string_value(v); /* any length: Kubernetes has no limit */
        else if (json_is_integer(v))
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
        else if (json_is_real(v))
            snprintf(num, sizeof(num), "%.15g", json_real_value(v));
        else {
            kq_errf(err, len, "%s.%.64s: expected a quantity", what, k);
            return KQ_EPARSE;
        }
        const char *name = kq_resource_name(k);
        int64_t val;
        if (name == NULL) {
            kq_errf(err, len, "%s: \"%.64s\" is not a valid resource name", what, k);
            return KQ_EPARSE;
        }
        if (kq_quantity_parse(name, q, &val, why, sizeof(why)) != 0) {
            kq_errf(err, len, "%s.%s: %s", what, name, why);
            return KQ_EPARSE;
        }
        if (kq_resource_set(&r, name, val) != 0) {
            kq_errf(err, len, "%s: out of memory", what);
            return KQ_ENOMEM;
        }
    }
    return 0;
#undef r
}

static const char *kv(const json_t *map, const char *key)
{
    const char *s = json_string_value(json_object_get(map, key));
    return s && *s ? s : NULL;
}

/* The shared-weight annotation as Koordinator's webhook stores it (koordinator-sh/koordinator
 * pkg/webhook/elasticquota/quota_topology.go fixedSharedWeight): exactly the resources of
 * max, those the annotation leaves out weighing their max. (One that is 0 in every resource
 * then means the max: quota_tree.h.) 0 or KQ_ENOMEM (*w unchanged). */
static int weight_as_max_keys(kq_resource_t *w, const kq_resource_t *max)
{
    kq_resource_t fixed = KQ_RESOURCE_EMPTY;
    for (uint32_t i = 0; i < max->n; i++) {
        bool has = false;
        int64_t v = kq_resource_get(w, KQ_RES_E(max)[i].name, &has);
        if (kq_resource_put(&fixed, KQ_RES_E(max)[i].name, has ? v : KQ_RES_E(max)[i].value) != 0) {
            kq_resource_free(&fixed);
            return KQ_ENOMEM;
        }
    }
    kq_resource_move(w, &fixed);
    kq_resource_free(&fixed);
    return 0;
}

/* API group of an object from its apiVersion, else the hint. NULL when neither is one of ours. */
static const char *api_group_of(const json_t *obj, const char *hint)
{
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    for (int i = 0; i < N_API; i++) {
        size_t n = strlen(api_groups[i]);
        if (av != NULL && strncmp(av, api_groups[i], n) == 0 && av[n] == '/')
            return api_groups[i];
    }
    for (int i = 0; i < N_API; i++)
        if (hint != NULL && strcmp(hint, api_groups[i]) == 0)
            return api_groups[i];
    return NULL;
}

/* An ElasticQuota object into a new eqobj_t (not in any table). */
static int eq_parse(const json_t *obj, const char *hint, const char *ns_hint, eqobj_t **out, char *err, size_t len)
{
    eqobj_t *o = NULL;
    int rc = KQ_EPARSE;
    bool fix_weight = false;
    const json_t *meta = json_object_get(obj, "metadata");
    const char *grp = api_group_of(obj, hint);
    const char *name = kv(meta, "name");
    const char *ns = kv(meta, "namespace");
    if (!json_is_object(obj) || !json_is_object(meta) || name == NULL) {
        kq_errf(err, len, "ElasticQuota: metadata.name missing");
        goto out;
    }
    if (grp == NULL) {
        kq_errf(err, len, "ElasticQuota %s: apiVersion is neither %s nor %s", name, KQ_EQ_GROUP_UPSTREAM,
               KQ_EQ_GROUP_KOORD);
        goto out;
    }
    if (ns == NULL)
        ns = ns_hint && *ns_hint ? ns_hint : "default";
    if (strlen(name) > KQ_QTREE_NAME_MAX || strlen(ns) > KQ_QTREE_NAME_MAX) {
        kq_errf(err, len, "ElasticQuota %.64s: name or namespace too long", name);
        goto out;
    }
    if ((o = calloc(1, sizeof(*o))) == NULL)
        goto nomem;
    o->api_group = strdup(grp);
    o->ns = strdup(ns);
    o->name = strdup(name);
    if (asprintf(&o->key, "%s/%s/%s", grp, ns, name) < 0)
        o->key = NULL;
    if (!o->api_group || !o->ns || !o->name || !o->key)
        goto nomem;
    const json_t *labels = json_object_get(meta, "labels");
    const json_t *anns = json_object_get(meta, "annotations");
    const json_t *spec = json_object_get(obj, "spec");
    char what[256];
    o->s.allow_lent = true;
    if (strcmp(grp, KQ_EQ_GROUP_UPSTREAM) == 0) {
        /* scheduler-plugins: one flat quota per namespace, named "namespace/name" so that
         * objects of the same name in two namespaces are two groups; Koordinator's labels
         * and annotations mean nothing there (kq_elastic_quota_event warns about them) */
        if (strlen(ns) + 1 + strlen(name) > KQ_QTREE_NAME_MAX) {
            kq_errf(err, len, "ElasticQuota %.64s/%.64s: namespace/name longer than %d bytes", ns, name,
                   KQ_QTREE_NAME_MAX);
            goto out;
        }
        if (asprintf(&o->s.name, "%s/%s", ns, name) < 0) {
            o->s.name = NULL;
            goto nomem;
        }
        o->s.sum_of_mins = true;
        goto limits;
    }
    o->ignored = strcmp(name, KQ_KOORD_ROOT) == 0 || strcmp(name, KQ_KOORD_SYSTEM) == 0;
    o->s.name = strdup(strcmp(name, KQ_KOORD_DEFAULT) == 0 ? KQ_QTREE_DEFAULT : name);
    if (o->s.name == NULL)
        goto nomem;

    const char *parent = kv(labels, LABEL_PARENT);
    if (parent != NULL && strcmp(parent, KQ_KOORD_ROOT) != 0 && strcmp(parent, KQ_QTREE_ROOT) != 0) {
        if (strlen(parent) > KQ_QTREE_NAME_MAX) {
            kq_errf(err, len, "ElasticQuota %s/%s: label %s too long", ns, name, LABEL_PARENT);
            goto out;
        }
        if ((o->s.parent = strdup(parent)) == NULL)
            goto nomem;
    }
    const char *isp = kv(labels, KQ_KOORD_LABEL_IS_PARENT);
    o->s.is_parent = isp != NULL && strcmp(isp, "true") == 0;
    const char *lent = kv(labels, LABEL_ALLOW_LENT);
    o->s.allow_lent = !(lent != NULL && strcmp(lent, "false") == 0);
    const char *force = kv(labels, LABEL_FORCE);
    o->s.force = force != NULL && strcmp(force, "true") == 0;
    const char *tid = kv(labels, KQ_KOORD_LABEL_TREE_ID);
    if (tid != NULL && (o->tree_id = strdup(tid)) == NULL)
        goto nomem;
    const char *isr = kv(labels, LABEL_IS_ROOT);
    o->is_root = isr != NULL && strcmp(isr, "true") == 0;
    const char *sw = kv(anns, ANN_SHARED_WEIGHT);
    if (sw != NULL) {
        json_error_t je;
        json_t *j = json_loads(sw, 0, &je);
        snprintf(what, sizeof(what), "ElasticQuota %.50s/%.50s annotation %s", ns, name, ANN_SHARED_WEIGHT);
        if (j == NULL) {
            kq_errf(err, len, "%s: not JSON: %s", what, je.text);
            goto out;
        }
        rc = rlist(j, what, &o->s.weight, err, len);
        json_decref(j);
        if (rc != 0)
            goto out;
        rc = KQ_EPARSE;
        fix_weight = true;
    }
    const char *nss = kv(anns, ANN_NAMESPACES);
    if (nss != NULL) {
        json_t *j = json_loads(nss, 0, NULL);
        if (!json_is_array(j) || json_array_size(j) > 1024) {
            json_decref(j);
            kq_errf(err, len, "ElasticQuota %s/%s: annotation %s: expected a JSON array of namespace names", ns,
                   name, ANN_NAMESPACES);
            goto out;
        }
        o->nss = calloc(json_array_size(j) + 1, sizeof(char *));
        size_t i;
        json_t *v;
        bool bad = o->nss == NULL;
        json_array_foreach(j, i, v) {
            if (bad)
                break;
            const char *s = json_string_value(v);
            if (s == NULL || *s == '\0' || strlen(s) > 253) {
                kq_errf(err, len, "ElasticQuota %s/%s: annotation %s[%zu]: not a namespace name", ns, name,
                       ANN_NAMESPACES, i);
                json_decref(j);
                goto out;
            }
            if ((o->nss[o->n_nss] = strdup(s)) == NULL)
                bad = true;
            else
                o->n_nss++;
        }
        json_decref(j);
        if (bad)
            goto nomem;
    }
limits:
    snprintf(what, sizeof(what), "ElasticQuota %.50s/%.50s spec.min", ns, name);
    if ((rc = rlist(json_object_get(spec, "min"), what, &o->s.min, err, len)) != 0)
        goto out;
    snprintf(what, sizeof(what), "ElasticQuota %.50s/%.50s spec.max", ns, name);
    if ((rc = rlist(json_object_get(spec, "max"), what, &o->s.max, err, len)) != 0)
        goto out;
    if (fix_weight && weight_as_max_keys(&o->s.weight, &o->s.max) != 0)
        goto nomem;
    *out = o;
    return 0;
nomem:
    kq_errf(err, len, "out of memory");
    rc = KQ_ENOMEM;
out:
    eqobj_free(o);
    return rc;
}

/* ================================================================== reconcile ==== */

static void note_fail(kq_elastic_t *e, const char *name, const char *msg)
{
    failmsg_t *f;
    HASH_FIND_STR(e->fails, name, f);
    if (f != NULL && str_eq(f->msg, msg))
        return;
    if (msg == NULL) {
        if (f != NULL) {
            HASH_DEL(e->fails, f);
            free(f->name);
            free(f->msg);
            free(f);
        }
        return;
    }
    kq_warn("event=quota_group_rejected group=%s reason=\"%s\" msg=\"kept as it was; retried after the next "
            "change\"", name, msg);
    if (f == NULL) {
        if ((f = calloc(1, sizeof(*f))) == NULL || (f->name = strdup(name)) == NULL) {
            free(f);
            return;
        }
        HASH_ADD_KEYPTR(hh, e->fails, f->name, strlen(f->name), f);
    }
    free(f->msg);
    f->msg = strdup(msg);
}

static int eq_seq_cmp(const eqobj_t *a, const eqobj_t *b)
{
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

static int gent_name_cmp(const gent_t *a, const gent_t *b)
{
    return strcmp(a->s.name, b->s.name);
}

/* The default group's spec from the options (borrowing the options' sets: never cleared). */
static void default_spec(const kq_elastic_t *e, gspec_t *s)
{
    memset(s, 0, sizeof(*s));
    s->name = (char *)KQ_QTREE_DEFAULT;
    s->min = e->o.default_min;
    s->max = e->o.default_max;
    s->allow_lent = true;
}

static int desired_add(gent_t **d, const gspec_t *s, const char *owner)
{
    gent_t *g = gent_new(s, owner);
    if (g == NULL)
        return KQ_ENOMEM;
    HASH_ADD_KEYPTR(hh, *d, g->s.name, strlen(g->s.name), g);
    return 0;
}

/* Who may name each applied group by the quota label (resolve.h, issue 37) into m. apply_mu
 * held. */
static void govern_into(kq_elastic_t *e, kq_resolve_map_t *m)
{
    gent_t *a, *atmp;
    HASH_ITER(hh, e->applied, a, atmp) {
        const eqobj_t *o = NULL;
        if (strcmp(a->s.name, KQ_QTREE_DEFAULT) == 0 || strcmp(a->owner, "default") == 0) {
            kq_resolve_map_govern(m, a->s.name, KQ_RESOLVE_GOV_DEFAULT, NULL, NULL, 0);
        } else if (strcmp(a->owner, "queue") == 0) {
            kq_resolve_map_govern(m, a->s.name, KQ_RESOLVE_GOV_QUEUE, NULL, NULL, 0);
        } else if (strncmp(a->owner, "profile ", 8) == 0) {
            char ns[254];
            const char *key = a->owner + 8, *slash = strchr(key, '/');
            snprintf(ns, sizeof(ns), "%.*s", slash != NULL ? (int)(slash - key) : (int)strlen(key), key);
            kq_resolve_map_govern(m, a->s.name, KQ_RESOLVE_GOV_OBJECT, ns, NULL, 0);
        } else {
            HASH_FIND_STR(e->objs, a->owner, o);
            if (o == NULL)
                continue;
            bool upstream = strcmp(o->api_group, KQ_EQ_GROUP_UPSTREAM) == 0;
            kq_resolve_map_govern(m, a->s.name, KQ_RESOLVE_GOV_OBJECT, o->ns, o->nss, upstream ? 0 : o->n_nss);
        }
    }
}

/* The resolver's snapshot (resolve.h): the namespace -> group map (resolution step 3), the
 * queue groups that bound something (step 4) and who may name each group, built from the
 * applied groups and swapped in whole. Objects are visited in arrival order (reconcile
 * sorts them), so of two objects binding a namespace at the same rank the earlier one
 * keeps it and the later one is logged once. apply_mu held. True when the resolver now
 * answers differently (pods may have to move). */
static bool rebuild_resolver(kq_elastic_t *e)
{
    kq_resolve_map_t *m = kq_resolve_map_new();
    if (m == NULL) {
        kq_error("event=quota_names_not_rebuilt error=\"out of memory\" msg=\"keeping the previous namespace "
                 "map\"");
        return false;
    }
    eqobj_t *o, *tmp;
    HASH_ITER(hh, e->objs, o, tmp) {
        gent_t *a;
        HASH_FIND_STR(e->applied, o->s.name, a);
        if (o->ignored || a == NULL || strcmp(a->owner, o->key) != 0 || a->s.is_parent ||
            strcmp(o->s.name, KQ_QTREE_DEFAULT) == 0)
            continue;
        bool upstream = strcmp(o->api_group, KQ_EQ_GROUP_UPSTREAM) == 0;
        bool lost = false;
        char lost_ns[254] = "", lost_to[KQ_QTREE_NAME_MAX + 1] = "";
        for (size_t i = 0; i <= o->n_nss; i++) {
            const char *ns;
            int prio;
            if (i == 0 && upstream) {
                ns = o->ns, prio = KQ_RESOLVE_RANK_UPSTREAM; /* scheduler-plugins: the quota of its namespace */
            } else if (i == 0) {
                if (strcmp(o->name, o->ns) != 0)
                    continue;                  /* Koordinator: only a quota named like it */
                ns = o->ns, prio = KQ_RESOLVE_RANK_NAMED;
            } else {
                if (upstream)
                    break;
                ns = o->nss[i - 1], prio = KQ_RESOLVE_RANK_LISTED; /* Koordinator's namespaces annotation */
            }
            const char *holder = NULL;
            if (!kq_resolve_map_bind(m, ns, o->s.name, prio, &holder) && holder != NULL && !lost) {
                lost = true;
                snprintf(lost_ns, sizeof(lost_ns), "%s", ns);
                snprintf(lost_to, sizeof(lost_to), "%s", holder);
            }
        }
        if (lost && !o->ns_conflict)
            kq_warn("event=namespace_bound_twice object=%s namespace=%s group=%s msg=\"the namespace is already "
                    "bound to quota group %s (the earlier object wins)\"", o->key, lost_ns, o->s.name, lost_to);
        o->ns_conflict = lost;
    }
    /* queue groups with a min or a max of their own or of an ancestor queue: a queue that
     * bounds nothing is no quota, and its pods belong to the default group (resolution
     * step 4) */
    gent_t *g, *gtmp;
    HASH_ITER(hh, e->qsrc, g, gtmp) {
        bool bounded = false;
        for (const gent_t *x = g; x != NULL && !bounded;) {
            bounded = x->s.min.n > 0 || x->s.max.n > 0;
            const char *par = x->s.parent;
            x = NULL;
            if (par != NULL)
                HASH_FIND_STR(e->qsrc, par, x);
        }
        if (bounded)
            kq_resolve_map_bounded_queue(m, g->s.name);
    }
    govern_into(e, m);
    return kq_resolve_swap(e->resolver, m);
}

/* Level-triggered resolution (issue 38): after a change to what the resolver reads (a group
 * created or removed, a group becoming or ceasing to be a parent, the namespace map), every
 * known pod whose group changed moves with its request and used (kq_ledger_reresolve).
 * While an informer applies a list, this waits for the list's end: one O(pods) walk per
 * list rather than one per object, and none before the objects a restart lists are all in
 * (a pod listed before its quota would otherwise stay in the default group). apply_mu held
 * (order apply_mu -> ledger -> resolver -> quota tree). */
static void reresolve(kq_elastic_t *e)
{
    bool listing = e->prof_listing;
    for (int i = 0; i < N_API; i++)
        listing = listing || e->listing[i];
    if (listing) {
        e->reresolve_due = true;
        return;
    }
    e->reresolve_due = false;
    if (e->app != NULL && e->app->ledger != NULL)
        (void)kq_ledger_reresolve(e->app->ledger);
}

static int remove_group(kq_elastic_t *e, const char *name, char *err, size_t len)
{
    if (e->app != NULL && e->app->ledger != NULL)
        return kq_ledger_remove_group(e->app->ledger, name, err, len);
    return kq_qtree_remove_group(e->qt, name, err, len);
}

/* apply_mu held. */
static void reconcile(kq_elastic_t *e)
{
    gent_t *want = NULL, *g, *tmp;
    bool oom = false;
    /* 1. desired: queues, the default group, then objects by arrival */
    HASH_ITER(hh, e->qsrc, g, tmp) {
        if (desired_add(&want, &g->s, "queue") != 0)
            oom = true;
    }
    if (trees_desired(e, &want) != 0)
        oom = true;
    HASH_SRT(hh, e->objs, eq_seq_cmp);
    eqobj_t *o, *otmp;
    bool have_default = false;
    HASH_ITER(hh, e->objs, o, otmp) {
        if (o->ignored || tree_root_object(e, o))
            continue;
        gent_t *x;
        HASH_FIND_STR(want, o->s.name, x);
        if (x != NULL || strcmp(o->s.name, KQ_QTREE_SYSTEM) == 0 || strcmp(o->s.name, KQ_QTREE_ROOT) == 0) {
            if (!o->conflict)
                kq_warn("event=elasticquota_conflict object=%s group=%s msg=\"group already defined by %s; "
                        "object ignored\"", o->key, o->s.name, x ? x->owner : "kubequota (reserved name)");
            o->conflict = true;
            continue;
        }
        if (o->conflict)
            kq_info("event=elasticquota_conflict_resolved object=%s group=%s", o->key, o->s.name);
        o->conflict = false;
        if (strcmp(o->s.name, KQ_QTREE_DEFAULT) == 0)
            have_default = true;
        if (desired_add(&want, &o->s, o->key) != 0)
            oom = true;
    }
    if (!have_default) {
        gspec_t d;
        default_spec(e, &d);
        if (desired_add(&want, &d, "default") != 0)
            oom = true;
    }
    if (oom) {
        kq_error("event=quota_reconcile_failed error=\"out of memory\"");
        gent_table_free(&want);
        return;
    }
    HASH_SRT(hh, want, gent_name_cmp);

    /* 2. drive the tree towards it, recomputing runtimes once at the end (a ConfigMap or
     * CRD resync may bring thousands of groups) */
    bool progress = true;
    bool moved = false; /* a group appeared, went, or changed between leaf and parent */
    char err[ERR_MAX];
    kq_qtree_batch_begin(e->qt);
    for (int pass = 0; progress && pass < KQ_QTREE_MAX_DEPTH + 2; pass++) {
        progress = false;
        HASH_ITER(hh, want, g, tmp) {
            gent_t *a;
            HASH_FIND_STR(e->applied, g->s.name, a);
            if (a != NULL && gspec_same(&a->s, &g->s)) {
                if (strcmp(a->owner, g->owner) != 0) {
                    char *ow = strdup(g->owner);
                    if (ow != NULL) {
                        free(a->owner);
                        a->owner = ow;
                    }
                }
                continue;
            }
            kq_qgroup_spec_t q;
            to_qspec(&g->s, &q);
            err[0] = '\0';
            int rc = kq_qtree_set_group(e->qt, &q, err, sizeof(err));
            if (rc != 0)
                continue;
            gent_t *n = gent_new(&g->s, g->owner);
            if (n == NULL) {
                kq_error("event=quota_reconcile_failed error=\"out of memory\"");
                continue;
            }
            if (a == NULL || a->s.is_parent != n->s.is_parent)
                moved = true;
            if (a != NULL) {
                HASH_DEL(e->applied, a);
                gent_free(a);
            }
            HASH_ADD_KEYPTR(hh, e->applied, n->s.name, strlen(n->s.name), n);
            note_fail(e, g->s.name, NULL);
            kq_info("event=quota_group_applied group=%s parent=%s source=%s", n->s.name,
                    n->s.parent ? n->s.parent : KQ_QTREE_ROOT, n->owner);
            progress = true;
        }
        HASH_ITER(hh, e->applied, g, tmp) {
            gent_t *w;
            HASH_FIND_STR(want, g->s.name, w);
            if (w != NULL || strcmp(g->s.name, KQ_QTREE_DEFAULT) == 0)
                continue;
            err[0] = '\0';
            int rc = remove_group(e, g->s.name, err, sizeof(err));
            if (rc != 0 && rc != KQ_ENOENT)
                continue;
            kq_info("event=quota_group_removed group=%s msg=\"its pods fall to the default group\"", g->s.name);
            note_fail(e, g->s.name, NULL);
            HASH_DEL(e->applied, g);
            gent_free(g);
            progress = true;
            moved = true;
        }
    }
    kq_qtree_batch_end(e->qt);
    /* 3. what is still different: say why (once per reason) */
    HASH_ITER(hh, want, g, tmp) {
        gent_t *a;
        HASH_FIND_STR(e->applied, g->s.name, a);
        if (a != NULL && gspec_same(&a->s, &g->s))
            continue;
        kq_qgroup_spec_t q;
        to_qspec(&g->s, &q);
        err[0] = '\0';
        if (kq_qtree_validate_group(e->qt, &q, err, sizeof(err)) != 0)
            note_fail(e, g->s.name, err[0] ? err : "rejected");
    }
    HASH_ITER(hh, e->applied, g, tmp) {
        gent_t *w;
        HASH_FIND_STR(want, g->s.name, w);
        if (w == NULL && strcmp(g->s.name, KQ_QTREE_DEFAULT) != 0)
            note_fail(e, g->s.name, "cannot be removed while it has child groups");
    }
    gent_table_free(&want);
    if (rebuild_resolver(e))
        moved = true;
    trees_snapshot(e);
    if (moved || e->reresolve_due)
        reresolve(e);
}

/* ================================================================== config ==== */

/* Queue groups below q; returns the min q accounts for towards its parent (guaranteed,
 * with the children's sum for resources it does not name). */
static kq_resource_t add_queue(gent_t **t, const kq_queue_conf_t *q, bool *oom)
{
    /* The set returned is the caller's (kq_resource_free). */
    kq_resource_t sum = KQ_RESOURCE_EMPTY;
    for (size_t i = 0; i < q->n_children; i++) {
        kq_resource_t k = add_queue(t, q->children[i], oom);
        if (kq_resource_add(&sum, &k) != 0)
            *oom = true;
        kq_resource_free(&k);
    }
    kq_resource_t min = KQ_RESOURCE_EMPTY;
    if (q->has_guaranteed && kq_resource_copy(&min, &q->guaranteed) != 0)
        *oom = true;
    for (uint32_t i = 0; i < sum.n; i++) {
        bool has = false;
        (void)kq_resource_get(&min, KQ_RES_E(&sum)[i].name, &has);
        if (!has && kq_resource_set(&min, KQ_RES_E(&sum)[i].name, KQ_RES_E(&sum)[i].value) != 0)
            *oom = true;
    }
    kq_resource_free(&sum);
    if (q->parent == NULL)
        return min; /* root: the tree's hidden root */
    if (strlen(q->path) > KQ_QTREE_NAME_MAX) {
        kq_warn("event=queue_not_a_quota_group queue=%.80s... msg=\"path longer than %d bytes\"", q->path,
                KQ_QTREE_NAME_MAX);
        return min;
    }
    gspec_t s = { /* borrows min, the configuration's max and the strings; owns weight */
        .name = (char *)q->path,
        .parent = q->parent->parent == NULL ? NULL : (char *)q->parent->path,
        .min = min,
        .max = q->has_max ? q->max : KQ_RESOURCE_EMPTY,
        .allow_lent = true,
        .is_parent = q->is_parent,
    };
    for (size_t i = 0; i < q->n_properties; i++) {
        const kq_property_t *p = &q->properties[i];
        if (strcmp(p->key, KQ_PROP_SHARED_WEIGHT) == 0) {
            if (kq_config_parse_resource_list(p->value, &s.weight, NULL, 0) != 0)
                kq_warn("event=bad_property queue=%s key=%s", q->path, p->key);
        } else if (strcmp(p->key, KQ_PROP_ALLOW_LENT) == 0) {
            s.allow_lent = strcmp(p->value, "false") != 0;
        }
    }
    if (desired_add(t, &s, "queue") != 0)
        *oom = true;
    kq_resource_free(&s.weight);
    return min;
}

void kq_elastic_apply_config(kq_elastic_t *e, const kq_partition_conf_t *part)
{
    gent_t *t = NULL;
    bool oom = false;
    if (part != NULL && part->root != NULL) {
        kq_resource_t root_min = add_queue(&t, part->root, &oom);
        kq_resource_free(&root_min);
    }
    if (oom) {
        kq_error("event=quota_config_failed error=\"out of memory\" msg=\"queue groups unchanged\"");
        gent_table_free(&t);
        return;
    }
    pthread_mutex_lock(&e->apply_mu);
    gent_t *old = e->qsrc;
    e->qsrc = t;
    reconcile(e);
    pthread_mutex_unlock(&e->apply_mu);
    gent_table_free(&old);
}

/* ================================================================== nodes ==== */

/* The schedulable nodes' allocatable goes to the quota tree and to metering (utilisation
 * for prices). node_mu held; both take only their own locks, which nest inside it. */
static void publish_total(kq_elastic_t *e)
{
    kq_qtree_set_cluster_total(e->qt, &e->total);
    if (e->app != NULL && e->app->metering != NULL)
        kq_metering_set_nodes_allocatable(e->app->metering, &e->total);
}

static void set_total_locked(kq_elastic_t *e)
{
    if (e->nodes_synced)
        publish_total(e);
}

/* Replaces a node's counted allocatable; node_mu held. */
static void node_put(kq_elastic_t *e, node_t *n, const kq_resource_t *alloc)
{
    if (kq_resource_equal(&n->alloc, alloc) && n->alloc.n == alloc->n)
        return;
    kq_resource_t t = KQ_RESOURCE_EMPTY, na = KQ_RESOURCE_EMPTY;
    int rc = kq_resource_copy(&t, &e->total);
    if (rc == 0)
        rc = kq_resource_copy(&na, alloc);
    if (rc == 0) {
        (void)kq_resource_sub(&t, &n->alloc);
        rc = kq_resource_add(&t, alloc);
    }
    if (rc != 0) {
        kq_warn("event=cluster_total_overflow node=%s msg=\"node not counted\" error=\"%s\"", n->name,
                kq_strerror(rc));
        kq_resource_free(&t);
        kq_resource_free(&na);
        return;
    }
    kq_resource_move(&e->total, &t);
    kq_resource_move(&n->alloc, &na);
    kq_resource_free(&t);
    kq_resource_free(&na);
    set_total_locked(e);
}

void kq_elastic_node_event(kq_elastic_t *e, int type, const json_t *node)
{
    const char *name = kv(json_object_get(node, "metadata"), "name");
    if (name == NULL)
        return;
    kq_resource_t alloc = KQ_RESOURCE_EMPTY;
    if (type != KQ_WATCH_DELETED && !json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"))) {
        char err[256];
        if (rlist(json_object_get(json_object_get(node, "status"), "allocatable"), "status.allocatable", &alloc,
                  err, sizeof(err)) != 0) {
            kq_warn("event=bad_node node=%s error=\"%s\" msg=\"not counted\"", name, err);
            kq_resource_clear(&alloc); /* rlist left it unchanged: empty */
        }
    }
    json_t *labels = NULL; /* copied off-lock, for the profiles' node selectors */
    if (type != KQ_WATCH_DELETED && json_is_object(json_object_get(json_object_get(node, "metadata"), "labels")))
        labels = json_deep_copy(json_object_get(json_object_get(node, "metadata"), "labels"));
    bool moved = false; /* what the trees read changed: allocatable, labels, the node itself */
    pthread_mutex_lock(&e->node_mu);
    node_t *n;
    HASH_FIND_STR(e->nodes, name, n);
    if (type == KQ_WATCH_DELETED) {
        if (n != NULL) {
            moved = true;
            node_put(e, n, &alloc);
            HASH_DEL(e->nodes, n);
            free(n->name);
            kq_resource_free(&n->alloc);
            json_decref(n->labels);
            free(n);
        }
    } else {
        if (n == NULL) {
            n = calloc(1, sizeof(*n));
            if (n != NULL && (n->name = strdup(name)) == NULL) {
                free(n);
                n = NULL;
            }
            if (n != NULL)
                HASH_ADD_KEYPTR(hh, e->nodes, n->name, strlen(n->name), n);
            else
                kq_error("event=node_not_counted node=%s error=\"out of memory\"", name);
        }
        if (n != NULL) {
            n->gen = e->node_gen;
            moved = !(kq_resource_equal(&n->alloc, &alloc) && n->alloc.n == alloc.n) ||
                    (n->labels == NULL) != (labels == NULL) || (labels != NULL && !json_equal(n->labels, labels));
            node_put(e, n, &alloc);
            json_decref(n->labels);
            n->labels = labels;
            labels = NULL;
        }
    }
    pthread_mutex_unlock(&e->node_mu);
    json_decref(labels);
    kq_resource_free(&alloc);
    /* node status updates (conditions, heartbeats) change nothing the trees read */
    if (moved && kq_profiles_has_trees(e->profiles))
        trees_refresh(e);
}

void kq_elastic_nodes_list_begin(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->node_mu);
    e->node_gen++;
    pthread_mutex_unlock(&e->node_mu);
}

void kq_elastic_nodes_list_end(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->node_mu);
    node_t *n, *tmp;
    kq_resource_t none = KQ_RESOURCE_EMPTY;
    HASH_ITER(hh, e->nodes, n, tmp) {
        if (n->gen == e->node_gen)
            continue;
        node_put(e, n, &none);
        HASH_DEL(e->nodes, n);
        free(n->name);
        kq_resource_free(&n->alloc);
        json_decref(n->labels);
        free(n);
    }
    bool first = !e->nodes_synced;
    e->nodes_synced = true;
    publish_total(e);
    size_t count = HASH_COUNT(e->nodes);
    char buf[512];
    kq_resource_format(&e->total, buf, sizeof(buf));
    pthread_mutex_unlock(&e->node_mu);
    kq_info("event=%s nodes=%zu cluster_total=\"%s\"", first ? "nodes_synced" : "nodes_resynced", count, buf);
    if (kq_profiles_has_trees(e->profiles))
        trees_refresh(e);
}

typedef struct node_row {
    char *name;
    kq_resource_t alloc;
} node_row_t;

static int cmp_node_row(const void *a, const void *b)
{
    return strcmp(((const node_row_t *)a)->name, ((const node_row_t *)b)->name);
}

json_t *kq_elastic_nodes_json(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->node_mu);
    size_t n = HASH_COUNT(e->nodes), k = 0;
    node_row_t *v = n > 0 ? calloc(n, sizeof(*v)) : NULL;
    bool ok = n == 0 || v != NULL;
    for (node_t *x = e->nodes; ok && x != NULL; x = x->hh.next) {
        v[k].name = strdup(x->name);
        ok = kq_resource_copy(&v[k].alloc, &x->alloc) == 0; /* calloc: initialised */
        ok = v[k++].name != NULL && ok;
    }
    pthread_mutex_unlock(&e->node_mu);
    if (ok && k > 1)
        qsort(v, k, sizeof(*v), cmp_node_row);
    json_t *out = ok ? json_array() : NULL;
    for (size_t i = 0; out != NULL && i < k; i++) {
        json_t *o = json_pack("{s:s,s:o}", "name", v[i].name, "allocatable", kq_resource_to_json(&v[i].alloc));
        if (o == NULL || json_array_append_new(out, o) != 0) {
            json_decref(out);
            out = NULL;
        }
    }
    for (size_t i = 0; i < k; i++) {
        free(v[i].name);
        kq_resource_free(&v[i].alloc);
    }
    free(v);
    return out;
}

/* ================================================================== objects ==== */

/* The first Koordinator label or annotation key (quota.scheduling.koordinator.sh/...) on
 * an object, or NULL. */
static const char *koord_key_of(const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    static const char *const maps[] = {"labels", "annotations"};
    for (size_t i = 0; i < 2; i++) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)json_object_get(meta, maps[i]), k, v) {
            if (strncmp(k, KQ_EQ_LABEL_PREFIX, strlen(KQ_EQ_LABEL_PREFIX)) == 0 && strcmp(k, KQ_EQ_ANN_RUNTIME) != 0)
                return k;
        }
    }
    return NULL;
}

int kq_elastic_quota_event(kq_elastic_t *e, int type, const json_t *obj, const char *api_group, char *err,
                           size_t errlen)
{
    eqobj_t *o = NULL;
    int rc = eq_parse(obj, api_group, NULL, &o, err, errlen);
    if (rc != 0)
        return rc;
    pthread_mutex_lock(&e->apply_mu);
    eqobj_t *cur;
    HASH_FIND_STR(e->objs, o->key, cur);
    int gi = strcmp(o->api_group, KQ_EQ_GROUP_UPSTREAM) == 0 ? 0 : 1;
    if (type == KQ_WATCH_DELETED) {
        if (cur != NULL) {
            HASH_DEL(e->objs, cur);
            kq_info("event=elasticquota_deleted object=%s group=%s", cur->key, cur->s.name);
            eqobj_free(cur);
            reconcile(e);
        }
        eqobj_free(o);
    } else {
        o->list_gen = e->list_gen[gi];
        if (cur != NULL) {
            bool same = gspec_same(&cur->s, &o->s) && cur->n_nss == o->n_nss;
            for (size_t i = 0; same && i < o->n_nss; i++)
                same = strcmp(cur->nss[i], o->nss[i]) == 0;
            /* keep arrival order and status bookkeeping */
            o->seq = cur->seq;
            o->conflict = cur->conflict;
            o->ns_conflict = cur->ns_conflict;
            o->st_written = cur->st_written;
            stvals_move(&o->st, &cur->st);
            o->st_last_ms = cur->st_last_ms;
            HASH_DEL(e->objs, cur);
            eqobj_free(cur);
            HASH_ADD_KEYPTR(hh, e->objs, o->key, strlen(o->key), o);
            if (!same)
                reconcile(e);
        } else {
            o->seq = ++e->seq;
            HASH_ADD_KEYPTR(hh, e->objs, o->key, strlen(o->key), o);
            kq_info("event=elasticquota_added object=%s group=%s", o->key, o->s.name);
            const char *koord_key = strcmp(o->api_group, KQ_EQ_GROUP_UPSTREAM) == 0 ? koord_key_of(obj) : NULL;
            if (koord_key != NULL)
                kq_warn("event=elasticquota_key_ignored object=%s key=%s msg=\"scheduler-plugins ElasticQuota "
                        "objects are flat, one per namespace; Koordinator's labels and annotations apply to %s "
                        "objects only\"", o->key, koord_key, KQ_EQ_GROUP_KOORD);
            reconcile(e);
        }
    }
    pthread_mutex_unlock(&e->apply_mu);
    return 0;
}

void kq_elastic_quotas_list_begin(kq_elastic_t *e, const char *api_group)
{
    int gi = api_group != NULL && strcmp(api_group, KQ_EQ_GROUP_UPSTREAM) == 0 ? 0 : 1;
    pthread_mutex_lock(&e->apply_mu);
    e->list_gen[gi]++;
    e->listing[gi] = true;
    pthread_mutex_unlock(&e->apply_mu);
}

void kq_elastic_quotas_list_end(kq_elastic_t *e, const char *api_group)
{
    int gi = api_group != NULL && strcmp(api_group, KQ_EQ_GROUP_UPSTREAM) == 0 ? 0 : 1;
    bool changed = false;
    pthread_mutex_lock(&e->apply_mu);
    eqobj_t *o, *tmp;
    HASH_ITER(hh, e->objs, o, tmp) {
        if (strcmp(o->api_group, api_groups[gi]) != 0 || o->list_gen == e->list_gen[gi])
            continue;
        HASH_DEL(e->objs, o);
        eqobj_free(o);
        changed = true;
    }
    e->listing[gi] = false;
    if (changed)
        reconcile(e);
    else if (e->reresolve_due)
        reresolve(e);
    size_t n = HASH_COUNT(e->objs);
    pthread_mutex_unlock(&e->apply_mu);
    kq_info("event=elasticquotas_synced api_group=%s objects=%zu", api_groups[gi], n);
}

/* ================================================================== trees ==== */

/* Koordinator's multi-tree quotas (profiles.h): the profiles module keeps the profiles,
 * their trees' totals and the placement snapshot; this section feeds it the nodes (a view
 * of the node table, built under node_mu) and turns each profile into its tree's root
 * group, first level, lending nothing. An ElasticQuota object named like a profile's root
 * (the one Koordinator's controller wrote) is that root: its spec is not read. Data: the
 * profile table under apply_mu; node labels under node_mu (order apply_mu -> node_mu ->
 * the placement lock). */

/* The nodes as the profiles read them (borrowed: valid while node_mu is held), in *n. NULL
 * with *n = 0 when there are none or on ENOMEM (logged). node_mu held. */
static kq_profile_node_t *node_view(kq_elastic_t *e, size_t *n)
{
    *n = 0;
    size_t count = HASH_COUNT(e->nodes);
    kq_profile_node_t *v = count ? malloc(count * sizeof(*v)) : NULL;
    if (count > 0 && v == NULL) {
        kq_error("event=tree_nodes_unread error=\"out of memory\"");
        return NULL;
    }
    for (node_t *x = e->nodes; v != NULL && x != NULL; x = x->hh.next)
        v[(*n)++] = (kq_profile_node_t){.name = x->name, .labels = x->labels, .alloc = &x->alloc};
    return v;
}

/* Recomputes every tree's total from the nodes; true when one changed. apply_mu held. */
static bool trees_compute(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->node_mu);
    size_t n;
    kq_profile_node_t *v = node_view(e, &n);
    bool changed = kq_profiles_compute(e->profiles, v, n, e->nodes_synced);
    pthread_mutex_unlock(&e->node_mu);
    free(v);
    return changed;
}

struct root_want {
    kq_elastic_t *e;
    gent_t **want;
};

static int root_desired(void *ud, const char *profile, const char *group, const kq_resource_t *min_max,
                        bool is_parent)
{
    struct root_want *w = ud;
    gent_t *x;
    HASH_FIND_STR(*w->want, group, x);
    if (x != NULL) {
        note_fail(w->e, group, "ElasticQuotaProfile's root quota name is taken by a queue or another profile");
        return 0;
    }
    gspec_t s = {0};
    s.name = (char *)group;
    s.min = *min_max; /* borrowed: desired_add copies */
    s.max = *min_max;
    s.allow_lent = false;
    s.is_parent = is_parent;
    char owner[600];
    snprintf(owner, sizeof(owner), "profile %s", profile);
    return desired_add(w->want, &s, owner);
}

/* The profiles' root groups into the desired set (before the objects: the root is the
 * profile's, whatever object carries its name). apply_mu held. */
static int trees_desired(kq_elastic_t *e, gent_t **want)
{
    struct root_want w = {.e = e, .want = want};
    return kq_profiles_roots(e->profiles, root_desired, &w);
}

/* Whether an ElasticQuota object is the root quota of a profile's tree (its group is the
 * profile's). apply_mu held. */
static bool tree_root_object(const kq_elastic_t *e, const eqobj_t *o)
{
    return strcmp(o->api_group, KQ_EQ_GROUP_KOORD) == 0 && kq_profiles_is_root(e->profiles, o->s.name);
}

/* Node events: the trees' totals follow the nodes. Takes apply_mu (no lock held). */
static void trees_refresh(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->apply_mu);
    if (trees_compute(e))
        reconcile(e); /* takes the snapshot */
    else
        trees_snapshot(e); /* a node may have changed trees with no total changing */
    pthread_mutex_unlock(&e->apply_mu);
}

/* Rebuilds the placement snapshot the extender filter reads (kq_profiles_group_tree,
 * kq_profiles_node_in_tree): which tree each applied group (by its first-level ancestor)
 * and each node is in. apply_mu held; node_mu taken for the nodes. Nothing to do without
 * profiles once the old snapshot is empty. */
static void trees_snapshot(kq_elastic_t *e)
{
    if (!kq_profiles_placing(e->profiles))
        return;
    size_t n = HASH_COUNT(e->applied), k = 0;
    const char **groups = n ? malloc(n * sizeof(*groups)) : NULL, **tops = n ? malloc(n * sizeof(*tops)) : NULL;
    if (n > 0 && (groups == NULL || tops == NULL)) {
        kq_error("event=tree_snapshot_failed error=\"out of memory\" msg=\"the last placement snapshot stays\"");
        free(groups);
        free(tops);
        return;
    }
    for (gent_t *g = e->applied; g != NULL; g = g->hh.next) {
        const gent_t *top = g;
        for (int d = 0; d < KQ_QTREE_MAX_DEPTH && top->s.parent != NULL; d++) {
            gent_t *up;
            HASH_FIND_STR(e->applied, top->s.parent, up);
            if (up == NULL)
                break;
            top = up;
        }
        groups[k] = g->s.name;
        tops[k++] = top->s.name;
    }
    pthread_mutex_lock(&e->node_mu);
    size_t nn;
    kq_profile_node_t *v = node_view(e, &nn);
    kq_profiles_place(e->profiles, groups, tops, k, v, nn);
    pthread_mutex_unlock(&e->node_mu);
    free(v);
    free(groups);
    free(tops);
}

kq_profiles_t *kq_elastic_profiles(kq_elastic_t *e)
{
    return e ? e->profiles : NULL;
}

int kq_elastic_profile_event(kq_elastic_t *e, int type, const json_t *obj, char *err, size_t len)
{
    pthread_mutex_lock(&e->apply_mu);
    const kq_profile_t *p = NULL;
    bool existed = false;
    int rc = kq_profiles_event(e->profiles, type, obj, &p, &existed, err, len);
    if (rc != 0) {
        pthread_mutex_unlock(&e->apply_mu);
        return rc;
    }
    (void)trees_compute(e);
    reconcile(e);
    if (p != NULL)
        kq_profile_log(p, existed ? "profile_updated" : "profile_added");
    pthread_mutex_unlock(&e->apply_mu);
    return 0;
}

void kq_elastic_profiles_list_begin(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->apply_mu);
    kq_profiles_list_begin(e->profiles);
    e->prof_listing = true;
    pthread_mutex_unlock(&e->apply_mu);
}

void kq_elastic_profiles_list_end(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->apply_mu);
    bool changed = kq_profiles_list_end(e->profiles);
    e->prof_listing = false;
    if (trees_compute(e) || changed)
        reconcile(e);
    else if (e->reresolve_due)
        reresolve(e);
    size_t n = kq_profiles_count(e->profiles);
    pthread_mutex_unlock(&e->apply_mu);
    kq_info("event=profiles_synced profiles=%zu", n);
}

json_t *kq_elastic_trees_json(kq_elastic_t *e)
{
    pthread_mutex_lock(&e->apply_mu);
    pthread_mutex_lock(&e->node_mu);
    size_t n;
    kq_profile_node_t *v = node_view(e, &n);
    json_t *arr = kq_profiles_json(e->profiles, v, n);
    pthread_mutex_unlock(&e->node_mu);
    pthread_mutex_unlock(&e->apply_mu);
    free(v);
    return arr;
}

int kq_elastic_tree_of_groups(kq_elastic_t *e, json_t *qtree)
{
    pthread_mutex_lock(&e->apply_mu);
    int rc = kq_profiles_tree_of_groups(e->profiles, qtree);
    pthread_mutex_unlock(&e->apply_mu);
    return rc;
}

/* ================================================================== reclaim ==== */

/* Where a group comes from, for reclaim_sources: the owner reconcile() recorded. */
static unsigned group_source(void *ud, const char *name)
{
    kq_elastic_t *e = ud;
    unsigned src = 0;
    pthread_mutex_lock(&e->apply_mu);
    gent_t *a;
    HASH_FIND_STR(e->applied, name, a);
    if (a != NULL && strcmp(a->owner, "queue") == 0)
        src = KQ_RECLAIM_QUEUES;
    else if (a != NULL && strncmp(a->owner, KQ_EQ_GROUP_UPSTREAM "/", strlen(KQ_EQ_GROUP_UPSTREAM) + 1) == 0)
        src = KQ_RECLAIM_UPSTREAM;
    else if (a != NULL && strncmp(a->owner, KQ_EQ_GROUP_KOORD "/", strlen(KQ_EQ_GROUP_KOORD) + 1) == 0)
        src = KQ_RECLAIM_KOORD;
    pthread_mutex_unlock(&e->apply_mu);
    return src;
}

size_t kq_elastic_reclaim_once(kq_elastic_t *e, int64_t now)
{
    return kq_reclaim_once(e->reclaim, now, e->cfg);
}

unsigned long kq_elastic_evictions(kq_elastic_t *e, unsigned long *failed)
{
    return kq_reclaim_evictions(e ? e->reclaim : NULL, failed);
}

unsigned long kq_elastic_status_writes(kq_elastic_t *e, unsigned long *failed)
{
    if (failed != NULL)
        *failed = e ? atomic_load(&e->st_failed) : 0;
    return e ? atomic_load(&e->st_ok) : 0;
}

/* ================================================================== status ==== */

static json_t *quantities(const kq_resource_t *r)
{
    json_t *o = json_object();
    for (uint32_t i = 0; o != NULL && i < r->n; i++) {
        char q[64];
        kq_quantity_format(KQ_RES_E(r)[i].name, KQ_RES_E(r)[i].value, q, sizeof(q));
        if (json_object_set_new(o, KQ_RES_E(r)[i].name, json_string(q)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

typedef struct stwork {
    char *key, *api_group, *ns, *name;
    stvals_t v;
} stwork_t;

static bool res_same(const kq_resource_t *a, const kq_resource_t *b)
{
    return a->n == b->n && kq_resource_equal(a, b);
}

static bool stvals_same(const stvals_t *a, const stvals_t *b)
{
    return res_same(&a->used, &b->used) && res_same(&a->runtime, &b->runtime) && res_same(&a->request, &b->request) &&
           res_same(&a->child_request, &b->child_request) && res_same(&a->np_used, &b->np_used);
}

/* A ResourceList as the compact JSON text of an annotation; NULL on ENOMEM. */
static char *ann_text(const kq_resource_t *r)
{
    json_t *j = quantities(r);
    char *t = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return t;
}

static bool name_safe(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
            return false;
    return true;
}

static int patch(kq_elastic_t *e, const char *path, json_t *body, long *status)
{
    char *s = json_dumps(body, JSON_COMPACT);
    if (s == NULL)
        return KQ_ENOMEM;
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(e->app->kube, "PATCH", path, "application/merge-patch+json", s, &r);
    free(s);
    long st = r.status;
    *status = st;
    kq_kube_resp_free(&r);
    if (rc == 0 && (st < 200 || st > 299))
        rc = st == 404 ? KQ_ENOENT : KQ_EHTTP;
    return rc;
}

static int write_status(kq_elastic_t *e, const stwork_t *w)
{
    char base[1024];
    snprintf(base, sizeof(base), "/apis/%s/v1alpha1/namespaces/%s/elasticquotas/%s", w->api_group, w->ns, w->name);
    json_t *used = quantities(&w->v.used);
    char *rt_text = ann_text(&w->v.runtime), *req_text = ann_text(&w->v.request);
    char *creq_text = ann_text(&w->v.child_request), *np_text = ann_text(&w->v.np_used);
    int rc = KQ_ENOMEM;
    long st = 0;
    if (used == NULL || rt_text == NULL || req_text == NULL || creq_text == NULL || np_text == NULL)
        goto out;
    /* status.used on the status subresource; where there is none (Koordinator's CRD),
     * the status goes with the annotation in the object itself */
    int gi = strcmp(w->api_group, KQ_EQ_GROUP_UPSTREAM) == 0 ? 0 : 1;
    bool status_in_main = e->no_status_sub[gi];
    if (!status_in_main) {
        char spath[1100];
        snprintf(spath, sizeof(spath), "%s/status", base);
        json_t *sb = json_pack("{s:{s:O}}", "status", "used", used);
        rc = sb ? patch(e, spath, sb, &st) : KQ_ENOMEM;
        json_decref(sb);
        if (rc == KQ_ENOENT) {
            status_in_main = true; /* no status subresource, or the object is gone */
        } else if (rc != 0) {
            goto out;
        }
    }
    json_t *mb = json_pack("{s:{s:{s:s,s:s,s:s,s:s}}}", "metadata", "annotations", KQ_EQ_ANN_RUNTIME, rt_text,
                           ANN_REQUEST, req_text, ANN_CHILD_REQUEST, creq_text, ANN_NP_USED, np_text);
    if (mb != NULL && status_in_main)
        json_object_set_new(mb, "status", json_pack("{s:O}", "used", used));
    rc = mb ? patch(e, base, mb, &st) : KQ_ENOMEM;
    json_decref(mb);
    if (rc == 0 && status_in_main && !e->no_status_sub[gi]) {
        /* the object exists, so it was the status subresource that is missing */
        kq_info("event=elasticquota_no_status_subresource api_group=%s msg=\"status is written with the "
                "object\"", w->api_group);
        e->no_status_sub[gi] = true;
    }
out:
    if (rc == 0) {
        atomic_fetch_add(&e->st_ok, 1);
        kq_debug("event=elasticquota_status_written object=%s", w->key);
    } else {
        atomic_fetch_add(&e->st_failed, 1);
        kq_warn("event=elasticquota_status_failed object=%s status=%ld error=\"%s\"", w->key, st, kq_strerror(rc));
    }
    json_decref(used);
    free(rt_text);
    free(req_text);
    free(creq_text);
    free(np_text);
    return rc;
}

static void status_once(kq_elastic_t *e, int64_t now)
{
    if (e->app == NULL || e->app->kube == NULL)
        return;
    int burst = e->o.status_burst > 0 ? e->o.status_burst : 1;
    stwork_t *w = calloc((size_t)burst, sizeof(*w));
    if (w == NULL)
        return;
    int nw = 0;
    pthread_mutex_lock(&e->apply_mu);
    eqobj_t *o, *tmp;
    HASH_ITER(hh, e->objs, o, tmp) {
        if (nw >= burst)
            break;
        gent_t *a;
        HASH_FIND_STR(e->applied, o->s.name, a);
        if (o->ignored || a == NULL || strcmp(a->owner, o->key) != 0 || !name_safe(o->ns) || !name_safe(o->name))
            continue;
        if (o->st_written && now - o->st_last_ms < e->o.status_interval_ms)
            continue;
        kq_qgroup_info_t *info = malloc(sizeof(*info));
        if (info == NULL || kq_qtree_info(e->qt, o->s.name, info) != 0) {
            free(info);
            continue;
        }
        stvals_t v = {
            .used = info->used,
            .runtime = info->limit, /* only the keys its max names, as Koordinator writes it */
            .request = info->ask,
            .child_request = info->request,
            .np_used = info->used_nonpreemptible,
        }; /* takes over the info's sets (never freed through info) */
        kq_resource_init(&info->used);
        kq_resource_init(&info->limit);
        kq_resource_init(&info->ask);
        kq_resource_init(&info->request);
        kq_resource_init(&info->used_nonpreemptible);
        kq_qtree_info_free(info);
        if (o->st_written && stvals_same(&o->st, &v)) {
            stvals_free(&v);
            free(info);
            continue;
        }
        stwork_t *x = &w[nw];
        x->key = strdup(o->key);
        x->api_group = strdup(o->api_group);
        x->ns = strdup(o->ns);
        x->name = strdup(o->name);
        x->v = v;
        free(info);
        o->st_last_ms = now; /* rate bound even when the write fails */
        nw++;
    }
    pthread_mutex_unlock(&e->apply_mu);
    for (int i = 0; i < nw; i++) {
        if (w[i].key && w[i].api_group && w[i].ns && w[i].name && write_status(e, &w[i]) == 0) {
            pthread_mutex_lock(&e->apply_mu);
            HASH_FIND_STR(e->objs, w[i].key, o);
            if (o != NULL) {
                o->st_written = true;
                stvals_move(&o->st, &w[i].v);
            }
            pthread_mutex_unlock(&e->apply_mu);
        }
        stvals_free(&w[i].v);
        free(w[i].key);
        free(w[i].api_group);
        free(w[i].ns);
        free(w[i].name);
    }
    free(w);
}

/* ================================================================== threads ==== */

static void on_node_begin(void *ud) { kq_elastic_nodes_list_begin(ud); }
static void on_node_end(void *ud) { kq_elastic_nodes_list_end(ud); }
static void on_node(void *ud, int type, json_t *obj) { kq_elastic_node_event(ud, type, obj); }

/* What kq_elastic_node_event reads of a Node (plus the informer's resourceVersion): a
 * node's status also carries its image list and conditions, often tens of KB. */
static const kq_jfilter_t node_meta[] = {{"name", NULL}, {"resourceVersion", NULL}, {"labels", NULL}, {NULL, NULL}};
static const kq_jfilter_t node_spec[] = {{"unschedulable", NULL}, {NULL, NULL}};
static const kq_jfilter_t node_status[] = {{"allocatable", NULL}, {NULL, NULL}};
static const kq_jfilter_t node_fields[] = {
    {"metadata", node_meta}, {"spec", node_spec}, {"status", node_status}, {NULL, NULL}};

static void on_eq_begin(void *ud)
{
    struct informer_ud *i = ud;
    kq_elastic_quotas_list_begin(i->e, i->api_group);
}

static void on_eq_end(void *ud)
{
    struct informer_ud *i = ud;
    kq_elastic_quotas_list_end(i->e, i->api_group);
}

static void on_eq(void *ud, int type, json_t *obj)
{
    struct informer_ud *i = ud;
    char err[ERR_MAX] = "";
    if (kq_elastic_quota_event(i->e, type, obj, i->api_group, err, sizeof(err)) != 0)
        kq_warn("event=bad_elasticquota api_group=%s error=\"%s\" msg=\"object ignored\"", i->api_group, err);
}

static void on_prof_begin(void *ud) { kq_elastic_profiles_list_begin(ud); }
static void on_prof_end(void *ud) { kq_elastic_profiles_list_end(ud); }
static void on_prof(void *ud, int type, json_t *obj)
{
    char err[ERR_MAX] = "";
    if (kq_elastic_profile_event(ud, type, obj, err, sizeof(err)) != 0)
        kq_warn("event=bad_elasticquotaprofile error=\"%s\" msg=\"profile ignored (the last good one, if any, "
                "stays)\"", err);
}

#define PROFILE_PATH "/apis/quota.koordinator.sh/v1alpha1/elasticquotaprofiles" /* KQ_PROFILE_GROUP */

/* Starts the ElasticQuotaProfile informer once the cluster serves the CRD (timer thread),
 * as probe() does for the ElasticQuota groups. */
static void probe_profiles(kq_elastic_t *e, int64_t now)
{
    if (e->prof_watch != NULL || now < e->prof_probe_at)
        return;
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(e->app->kube, "GET", PROFILE_PATH "?limit=1", NULL, NULL, &r);
    long st = r.status;
    kq_kube_resp_free(&r);
    if (rc == 0 && st == 200) {
        kq_watch_handler_t h = {.list_begin = on_prof_begin, .object = on_prof, .list_end = on_prof_end, .ud = e};
        pthread_mutex_lock(&e->tmu);
        if (!e->stopping)
            e->prof_watch = kq_kube_watch_start(e->app->kube, PROFILE_PATH, NULL, &h);
        pthread_mutex_unlock(&e->tmu);
        if (e->prof_watch != NULL)
            kq_info("event=profile_watch_started api_group=%s", KQ_PROFILE_GROUP);
        return;
    }
    e->prof_probe_delay = e->prof_probe_delay ? e->prof_probe_delay * 2 : PROBE_MIN_MS;
    if (e->prof_probe_delay > PROBE_MAX_MS)
        e->prof_probe_delay = PROBE_MAX_MS;
    e->prof_probe_at = now + e->prof_probe_delay;
    if (!e->prof_probe_logged) {
        e->prof_probe_logged = true;
        if (st == 404)
            kq_info("event=profile_not_served api_group=%s msg=\"the cluster does not serve ElasticQuotaProfile; "
                    "one quota tree; probing again, up to every %ds\"", KQ_PROFILE_GROUP, PROBE_MAX_MS / 1000);
        else
            kq_warn("event=profile_probe_failed api_group=%s status=%ld error=\"%s\"", KQ_PROFILE_GROUP, st,
                    kq_strerror(rc != 0 ? rc : KQ_EHTTP));
    }
}

static void eq_path(int gi, char *buf, size_t len)
{
    snprintf(buf, len, "/apis/%s/v1alpha1/elasticquotas", api_groups[gi]);
}

/* Starts the informer of an API group once the cluster serves it (timer thread). */
static void probe(kq_elastic_t *e, int gi, int64_t now)
{
    if (e->eq_watch[gi] != NULL || now < e->probe_at[gi])
        return;
    char path[256], q[300];
    eq_path(gi, path, sizeof(path));
    snprintf(q, sizeof(q), "%s?limit=1", path);
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(e->app->kube, "GET", q, NULL, NULL, &r);
    long st = r.status;
    kq_kube_resp_free(&r);
    if (rc == 0 && st == 200) {
        kq_watch_handler_t h = {.list_begin = on_eq_begin, .object = on_eq, .list_end = on_eq_end, .ud = &e->iud[gi]};
        pthread_mutex_lock(&e->tmu);
        if (!e->stopping)
            e->eq_watch[gi] = kq_kube_watch_start(e->app->kube, path, NULL, &h);
        pthread_mutex_unlock(&e->tmu);
        if (e->eq_watch[gi] != NULL)
            kq_info("event=elasticquota_watch_started api_group=%s", api_groups[gi]);
        if (e->eq_watch[gi] != NULL && strcmp(api_groups[gi], KQ_EQ_GROUP_UPSTREAM) == 0 && !e->o.preempt_default)
            kq_warn("event=peer_difference api_group=%s option=--preempt-default-group msg=\"a preemptor of a "
                    "namespace without ElasticQuota takes no pod of the default group; CapacityScheduling takes "
                    "lower-priority pods of namespaces without quota (README, Coming from YuniKorn / "
                    "Koordinator)\"",
                    api_groups[gi]);
        return;
    }
    e->probe_delay[gi] = e->probe_delay[gi] ? e->probe_delay[gi] * 2 : PROBE_MIN_MS;
    if (e->probe_delay[gi] > PROBE_MAX_MS)
        e->probe_delay[gi] = PROBE_MAX_MS;
    e->probe_at[gi] = now + e->probe_delay[gi];
    if (!e->probe_logged[gi]) {
        e->probe_logged[gi] = true;
        if (st == 404)
            kq_info("event=elasticquota_not_served api_group=%s msg=\"the cluster does not serve this "
                    "ElasticQuota API group; probing again, up to every %ds\"", api_groups[gi], PROBE_MAX_MS / 1000);
        else
            kq_warn("event=elasticquota_probe_failed api_group=%s status=%ld error=\"%s\"", api_groups[gi], st,
                    kq_strerror(rc != 0 ? rc : KQ_EHTTP));
    }
}

static void config_poll(kq_elastic_t *e)
{
    if (e->app == NULL || e->app->config == NULL)
        return;
    kq_config_t *cfg = kq_config_holder_get(e->app->config);
    if (cfg == e->cfg) {
        kq_config_unref(cfg);
        return;
    }
    kq_elastic_apply_config(e, cfg ? kq_config_partition(cfg, e->app->partition) : NULL);
    kq_config_unref(e->cfg);
    e->cfg = cfg;
}

static void *timer_main(void *arg)
{
    kq_elastic_t *e = arg;
    int64_t next_status = 0;
    for (;;) {
        pthread_mutex_lock(&e->tmu);
        bool stop = e->stopping;
        pthread_mutex_unlock(&e->tmu);
        if (stop)
            break;
        int64_t now = now_ms();
        config_poll(e);
        if (e->o.watch_quotas && e->app->kube != NULL) {
            for (int gi = 0; gi < N_API; gi++)
                probe(e, gi, now);
            probe_profiles(e, now);
        }
        /* Only the leader evicts and writes status (all replicas compute the same tree). A
         * replica that becomes leader starts the grace period afresh, never early. */
        bool leads = kq_leader_acts(e->app->leader);
        if (leads)
            (void)kq_elastic_reclaim_once(e, now);
        if (leads && now >= next_status) {
            status_once(e, now);
            next_status = now + (e->o.tick_ms < e->o.status_interval_ms ? e->o.tick_ms : e->o.status_interval_ms);
        }
        if (now >= e->next_expire_ms && e->app->ledger != NULL) {
            (void)kq_ledger_expire_unobserved(e->app->ledger, EXPIRE_AGE_S);
            (void)kq_ledger_expire_admitted(e->app->ledger); /* nodeName creates that never came */
            e->next_expire_ms = now + EXPIRE_EVERY_MS;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        long ns = ts.tv_nsec + (e->o.tick_ms % 1000) * 1000000L;
        ts.tv_sec += e->o.tick_ms / 1000 + ns / 1000000000L;
        ts.tv_nsec = ns % 1000000000L;
        pthread_mutex_lock(&e->tmu);
        if (!e->stopping)
            pthread_cond_timedwait(&e->tcv, &e->tmu, &ts);
        pthread_mutex_unlock(&e->tmu);
    }
    return NULL;
}

/* ================================================================== lifecycle ==== */

static const char *const default_system_ns[] = {"kube-system"};

void kq_elastic_opts_default(kq_elastic_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->system_namespaces = default_system_ns;
    o->n_system_namespaces = 1;
    o->reclaim_sources = KQ_RECLAIM_DEFAULT;
    o->reclaim_grace_ms = 60000;
    o->koord_delay_ms = 120000; /* Koordinator's defaultDelayEvictTime */
    o->tick_ms = 1000;
    o->status_interval_ms = 10000;
    o->status_burst = 20;
    o->watch_nodes = true;
    o->watch_quotas = true;
}

kq_elastic_t *kq_elastic_new(kq_app_t *app, const kq_elastic_opts_t *opts)
{
    kq_elastic_t *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->app = app;
    if (opts != NULL)
        e->o = *opts; /* the sets are copied just below */
    else
        kq_elastic_opts_default(&e->o);
    kq_resource_init(&e->o.default_min);
    kq_resource_init(&e->o.default_max);
    if (opts != NULL && (kq_resource_copy(&e->o.default_min, &opts->default_min) != 0 ||
                         kq_resource_copy(&e->o.default_max, &opts->default_max) != 0)) {
        kq_resource_free(&e->o.default_min);
        free(e);
        return NULL;
    }
    if (e->o.system_namespaces == NULL) {
        e->o.system_namespaces = default_system_ns;
        e->o.n_system_namespaces = 1;
    }
    if (e->o.tick_ms <= 0)
        e->o.tick_ms = 1000;
    for (int i = 0; i < N_API; i++)
        e->iud[i] = (struct informer_ud){.e = e, .api_group = api_groups[i]};
    kq_reclaim_opts_t ro = {.reclaim_sources = e->o.reclaim_sources,
                            .reclaim_grace_ms = e->o.reclaim_grace_ms,
                            .koord_delay_ms = e->o.koord_delay_ms,
                            .reclaim_min_runtime_ms = e->o.reclaim_min_runtime_ms,
                            .evict = e->o.evict,
                            .evict_ud = e->o.evict_ud};
    pthread_mutex_init(&e->apply_mu, NULL);
    pthread_mutex_init(&e->node_mu, NULL);
    pthread_mutex_init(&e->tmu, NULL);
    pthread_cond_init(&e->tcv, NULL);
    if ((e->qt = kq_qtree_new()) == NULL ||
        (e->profiles = kq_profiles_new()) == NULL ||
        (e->resolver = kq_resolver_new(e->qt, e->o.system_namespaces, e->o.n_system_namespaces)) == NULL ||
        (e->reclaim = kq_reclaim_new(app, e->qt, &ro, group_source, e)) == NULL) {
        kq_elastic_free(e);
        return NULL;
    }
    /* the default group's configured bounds, then the queue groups */
    pthread_mutex_lock(&e->apply_mu);
    reconcile(e);
    pthread_mutex_unlock(&e->apply_mu);
    config_poll(e);
    if (app != NULL && app->ledger != NULL)
        kq_ledger_set_qtree(app->ledger, e->qt, kq_resolve_pod, e->resolver);
    return e;
}

int kq_elastic_start(kq_elastic_t *e)
{
    if (e->started)
        return 0;
    if (e->app != NULL && e->app->kube != NULL && e->o.watch_nodes) {
        kq_watch_handler_t h = {
            .list_begin = on_node_begin, .object = on_node, .list_end = on_node_end, .ud = e, .keep = node_fields};
        if ((e->node_watch = kq_kube_watch_start(e->app->kube, "/api/v1/nodes", NULL, &h)) == NULL)
            return KQ_ENOMEM;
    }
    if (pthread_create(&e->timer, NULL, timer_main, e) != 0) {
        kq_kube_watch_stop(e->node_watch);
        e->node_watch = NULL;
        return KQ_ENOMEM;
    }
    e->started = true;
    kq_reclaim_log_config(e->reclaim);
    return 0;
}

void kq_elastic_stop(kq_elastic_t *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&e->tmu);
    e->stopping = true;
    pthread_cond_broadcast(&e->tcv);
    pthread_mutex_unlock(&e->tmu);
    if (e->started) {
        pthread_join(e->timer, NULL);
        e->started = false;
    }
    kq_kube_watch_stop(e->node_watch);
    e->node_watch = NULL;
    for (int i = 0; i < N_API; i++) {
        kq_kube_watch_stop(e->eq_watch[i]);
        e->eq_watch[i] = NULL;
    }
    kq_kube_watch_stop(e->prof_watch);
    e->prof_watch = NULL;
}

void kq_elastic_free(kq_elastic_t *e)
{
    if (e == NULL)
        return;
    kq_elastic_stop(e);
    gent_table_free(&e->qsrc);
    gent_table_free(&e->applied);
    eqobj_t *o, *otmp;
    HASH_ITER(hh, e->objs, o, otmp) {
        HASH_DEL(e->objs, o);
        eqobj_free(o);
    }
    failmsg_t *f, *ftmp;
    HASH_ITER(hh, e->fails, f, ftmp) {
        HASH_DEL(e->fails, f);
        free(f->name);
        free(f->msg);
        free(f);
    }
    kq_resolver_free(e->resolver);
    node_t *n, *ntmp;
    HASH_ITER(hh, e->nodes, n, ntmp) {
        HASH_DEL(e->nodes, n);
        free(n->name);
        kq_resource_free(&n->alloc);
        json_decref(n->labels);
        free(n);
    }
    kq_profiles_free(e->profiles);
    kq_resource_free(&e->total);
    kq_resource_free(&e->o.default_min);
    kq_resource_free(&e->o.default_max);
    kq_reclaim_free(e->reclaim);
    kq_config_unref(e->cfg);
    kq_qtree_free(e->qt);
    pthread_mutex_destroy(&e->apply_mu);
    pthread_mutex_destroy(&e->node_mu);
    pthread_mutex_destroy(&e->tmu);
    pthread_cond_destroy(&e->tcv);
    free(e);
}

int kq_elastic_node_allocatable(kq_elastic_t *e, const char *node, kq_resource_t *out)
{
    int rc = KQ_ENOENT;
    pthread_mutex_lock(&e->node_mu);
    node_t *n;
    HASH_FIND_STR(e->nodes, node, n);
    if (n != NULL)
        rc = kq_resource_copy(out, &n->alloc);
    pthread_mutex_unlock(&e->node_mu);
    return rc;
}

bool kq_elastic_preempt_default(const kq_elastic_t *e)
{
    return e != NULL && e->o.preempt_default;
}

kq_qtree_t *kq_elastic_qtree(kq_elastic_t *e)
{
    return e ? e->qt : NULL;
}

kq_resolver_t *kq_elastic_resolver(kq_elastic_t *e)
{
    return e ? e->resolver : NULL;
}

/* ================================================================== admission ==== */

/* Every name of sub is in sup. */
static bool keys_in(const kq_resource_t *sub, const kq_resource_t *sup)
{
    for (uint32_t i = 0; i < sub->n; i++) {
        bool has = false;
        (void)kq_resource_get(sup, KQ_RES_E(sub)[i].name, &has);
        if (!has)
            return false;
    }
    return true;
}

static const char *str_or(const char *s, const char *dflt)
{
    return s != NULL ? s : dflt;
}

/* Pods bound to a Koordinator quota, as Koordinator's webhook finds them
 * (koordinator-sh/koordinator pkg/webhook/elasticquota/pod_check.go hasQuotaBoundedPods):
 * labelled quota.scheduling.koordinator.sh/name with it, in the namespace named like it, or
 * in a namespace its quota.scheduling.koordinator.sh/namespaces annotation lists. */
struct bound_pods {
    const eqobj_t *q;
};

static bool bound_pod(void *ud, const kq_pod_t *pod)
{
    const eqobj_t *q = ((const struct bound_pods *)ud)->q;
    if (str_eq(pod->quota_name, q->name) || str_eq(pod->ns, q->name))
        return true;
    for (size_t i = 0; i < q->n_nss; i++)
        if (str_eq(pod->ns, q->nss[i]))
            return true;
    return false;
}

/* A quota becoming a parent (label is-parent "true") while pods are bound to it is refused
 * with Koordinator's message (quota_topology_check.go checkIsParentChange; its test
 * quota_topology_test.go TestQuotaTopology_ValidUpdateQuota): the pods kubequota knows
 * (those of its scheduler). 0, or KQ_EDENIED with msg. */
static int koord_becomes_parent(kq_elastic_t *e, const eqobj_t *o, const eqobj_t *prev, char *msg, size_t len)
{
    char ns[254], name[254];
    struct bound_pods bp = {.q = prev};
    if (e->app == NULL || e->app->ledger == NULL ||
        !kq_ledger_find_pod(e->app->ledger, bound_pod, &bp, ns, sizeof(ns), name, sizeof(name)))
        return 0;
    kq_errf(msg, len, "ElasticQuota %s/%s: quota has bound pods, isParent is forbidden to modify as true, "
            "quotaName: %s (pod %s/%s)", o->ns, o->name, prev->name, ns, name);
    return KQ_EDENIED;
}

/* Koordinator's webhook rules for a CREATE/UPDATE of a Koordinator object o (old: the
 * object before an UPDATE, else NULL), beyond the tree's own (koordinator-sh/koordinator
 * pkg/webhook/elasticquota/quota_topology_check.go). 0, or KQ_EDENIED with msg. */
static int koord_rules(kq_elastic_t *e, const eqobj_t *o, const eqobj_t *old, const json_t *obj, char *msg,
                       size_t len)
{
    char what[600];
    snprintf(what, sizeof(what), "ElasticQuota %s/%s", o->ns, o->name);
    /* min's keys are max's keys */
    for (uint32_t i = 0; i < o->s.min.n; i++) {
        bool has = false;
        (void)kq_resource_get(&o->s.max, KQ_RES_E(&o->s.min)[i].name, &has);
        if (!has) {
            kq_errf(msg, len, "%s: resource %s is in spec.min but not in spec.max", what, KQ_RES_E(&o->s.min)[i].name);
            return KQ_EDENIED;
        }
    }
    /* max-strict-check-resource-keys: for those keys max must cover what is used */
    const json_t *meta = json_object_get(obj, "metadata");
    const char *sk = kv(json_object_get(meta, "annotations"), ANN_STRICT_KEYS);
    if (sk != NULL) {
        json_t *keys = json_loads(sk, 0, NULL);
        if (!json_is_array(keys)) {
            json_decref(keys);
            kq_errf(msg, len, "%s: annotation %s: expected a JSON array of resource names", what, ANN_STRICT_KEYS);
            return KQ_EDENIED;
        }
        kq_resource_t used = KQ_RESOURCE_EMPTY;
        char err[256] = "";
        const json_t *su = json_object_get(json_object_get(obj, "status"), "used");
        int rc = rlist(su, "status.used", &used, err, sizeof(err));
        size_t i;
        json_t *k;
        json_array_foreach(keys, i, k) {
            const char *name = json_string_value(k) ? kq_resource_name(json_string_value(k)) : NULL;
            if (rc != 0 || name == NULL)
                break;
            bool hu = false, hm = false;
            int64_t u = kq_resource_get(&used, name, &hu), m = kq_resource_get(&o->s.max, name, &hm);
            if (!hu)
                continue; /* never used: nothing to check */
            if (!hm || m < u) {
                char ub[64], mb[64];
                kq_quantity_format(name, u, ub, sizeof(ub));
                kq_quantity_format(name, m, mb, sizeof(mb));
                kq_errf(msg, len, "%s: %s is in %s and used (%s): spec.max must name it and be at least that%s%s",
                       what, name, ANN_STRICT_KEYS, ub, hm ? ", not " : "", hm ? mb : "");
                json_decref(keys);
                kq_resource_free(&used);
                return KQ_EDENIED;
            }
        }
        json_decref(keys);
        kq_resource_free(&used);
        if (rc != 0) {
            kq_errf(msg, len, "%s: %s", what, err);
            return KQ_EDENIED;
        }
    }
    int rc = 0;
    pthread_mutex_lock(&e->apply_mu);
    /* tree id: never changed, the same as the parent's and the children's */
    if (old != NULL && !str_eq(old->tree_id, o->tree_id)) {
        kq_errf(msg, len, "%s: label %s cannot change (%s -> %s)", what, KQ_KOORD_LABEL_TREE_ID, str_or(old->tree_id, "none"),
               str_or(o->tree_id, "none"));
        rc = KQ_EDENIED;
        goto out;
    }
    gent_t *pa = NULL;
    if (o->s.parent != NULL)
        HASH_FIND_STR(e->applied, o->s.parent, pa);
    if (pa != NULL) {
        eqobj_t *po = NULL;
        HASH_FIND_STR(e->objs, pa->owner, po);
        if (po != NULL && !str_eq(po->tree_id, o->tree_id)) {
            kq_errf(msg, len, "%s: tree id %s differs from its parent %s's (%s)", what, str_or(o->tree_id, "none"),
                   o->s.parent, str_or(po->tree_id, "none"));
            rc = KQ_EDENIED;
            goto out;
        }
        /* max keys the same as the parent's, min keys among the parent's */
        if (!(keys_in(&o->s.max, &pa->s.max) && keys_in(&pa->s.max, &o->s.max))) {
            kq_errf(msg, len, "%s: spec.max must name the same resources as its parent %s's", what, o->s.parent);
            rc = KQ_EDENIED;
            goto out;
        }
        if (!keys_in(&o->s.min, &pa->s.min)) {
            kq_errf(msg, len, "%s: spec.min names a resource its parent %s's min does not", what, o->s.parent);
            rc = KQ_EDENIED;
            goto out;
        }
    }
    gent_t *g, *gtmp;
    HASH_ITER(hh, e->applied, g, gtmp) {
        if (g->s.parent == NULL || strcmp(g->s.parent, o->s.name) != 0)
            continue;
        eqobj_t *co = NULL;
        HASH_FIND_STR(e->objs, g->owner, co);
        if (co != NULL && !str_eq(co->tree_id, o->tree_id)) {
            kq_errf(msg, len, "%s: tree id %s differs from its child %s's (%s)", what, str_or(o->tree_id, "none"),
                   g->s.name, str_or(co->tree_id, "none"));
            rc = KQ_EDENIED;
            goto out;
        }
        if (!(keys_in(&o->s.max, &g->s.max) && keys_in(&g->s.max, &o->s.max)) || !keys_in(&g->s.min, &o->s.min)) {
            kq_errf(msg, len, "%s: its child %s's max must name the same resources and its min only resources of "
                   "this min", what, g->s.name);
            rc = KQ_EDENIED;
            goto out;
        }
    }
out:
    pthread_mutex_unlock(&e->apply_mu);
    if (rc != 0)
        return rc;
    /* one namespace, one quota */
    for (size_t i = 0; i < o->n_nss && rc == 0; i++) {
        char bound[KQ_QTREE_NAME_MAX + 1];
        if (kq_resolve_namespace_quota(e->resolver, o->nss[i], KQ_RESOLVE_RANK_LISTED, bound, sizeof(bound)) &&
            strcmp(bound, o->s.name) != 0) {
            kq_errf(msg, len, "%s: namespace %s is already bound to quota %s", what, o->nss[i], bound);
            rc = KQ_EDENIED;
        }
    }
    return rc;
}

int kq_elastic_validate_admission(void *ud, const json_t *request, char *msg, size_t len)
{
    kq_elastic_t *e = ud;
    const char *op = json_string_value(json_object_get(request, "operation"));
    const json_t *obj = json_object_get(request, "object");
    const json_t *old = json_object_get(request, "oldObject");
    const char *rgroup = json_string_value(json_object_get(json_object_get(request, "kind"), "group"));
    if (op == NULL) {
        kq_errf(msg, len, "AdmissionReview request has no operation");
        return KQ_EINVAL;
    }
    if (strcmp(op, "CREATE") != 0 && strcmp(op, "UPDATE") != 0 && strcmp(op, "DELETE") != 0)
        return 0;
    eqobj_t *o = NULL;
    char err[ERR_MAX] = "";
    const char *rns = json_string_value(json_object_get(request, "namespace"));
    int rc = eq_parse(strcmp(op, "DELETE") == 0 ? old : obj, rgroup, rns, &o, err, sizeof(err));
    if (rc != 0) {
        if (strcmp(op, "DELETE") == 0) /* nothing to judge it by: let it go */
            return 0;
        kq_errf(msg, len, "%s", err);
        return rc == KQ_ENOMEM ? KQ_ENOMEM : KQ_EINVAL;
    }
    if (o->ignored) { /* Koordinator forbids changing them too (IsForbiddenModify) */
        kq_errf(msg, len, "ElasticQuota %s/%s: %s is built into kubequota (the tree's root and the system group) "
               "and cannot be created, changed or deleted", o->ns, o->name, o->name);
        eqobj_free(o);
        return KQ_EDENIED;
    }
    bool koord = strcmp(o->api_group, KQ_EQ_GROUP_KOORD) == 0;
    if (koord && strcmp(op, "DELETE") == 0 && strcmp(o->s.name, KQ_QTREE_DEFAULT) == 0) {
        kq_errf(msg, len, "ElasticQuota %s/%s: the default quota cannot be deleted (change its max instead)", o->ns,
               o->name);
        eqobj_free(o);
        return KQ_EDENIED;
    }
    pthread_mutex_lock(&e->apply_mu);
    gent_t *a;
    HASH_FIND_STR(e->applied, o->s.name, a);
    bool owned_by_other = a != NULL && strcmp(a->owner, o->key) != 0 &&
                          !(strcmp(o->s.name, KQ_QTREE_DEFAULT) == 0 && strcmp(a->owner, "default") == 0);
    char owner[600];
    snprintf(owner, sizeof(owner), "%s", a ? a->owner : "");
    pthread_mutex_unlock(&e->apply_mu);
    rc = 0;
    if (strcmp(op, "DELETE") == 0) {
        kq_qgroup_info_t *info = malloc(sizeof(*info));
        bool have = !owned_by_other && info != NULL && kq_qtree_info(e->qt, o->s.name, info) == 0;
        /* Only child groups refuse a deletion, as Koordinator's ValidDeleteQuota
         * (pkg/webhook/elasticquota/quota_topology.go) refuses it; scheduler-plugins has no
         * such webhook. A quota's pods fall to the default group (issue 38) and move
         * back if it returns: resolution is level-triggered (kq_ledger_reresolve). */
        if (have && info->n_children > 0) {
            kq_errf(msg, len, "ElasticQuota %s/%s: quota group %s still has %zu child group(s); delete or move them "
                   "first", o->ns, o->name, o->s.name, info->n_children);
            rc = KQ_EDENIED;
        }
        if (have)
            kq_qtree_info_free(info);
        free(info);
    } else if (strcmp(o->s.name, KQ_QTREE_SYSTEM) == 0 || strcmp(o->s.name, KQ_QTREE_ROOT) == 0) {
        kq_errf(msg, len, "ElasticQuota %s/%s: the name %s is reserved by kubequota", o->ns, o->name, o->s.name);
        rc = KQ_EDENIED;
    } else if (owned_by_other) {
        kq_errf(msg, len, "ElasticQuota %s/%s: quota group %s is already defined by %s%s", o->ns, o->name, o->s.name,
               strcmp(owner, "queue") == 0 ? "queues.yaml" : "ElasticQuota ", strcmp(owner, "queue") == 0 ? "" : owner);
        rc = KQ_EDENIED;
    } else {
        eqobj_t *prev = NULL;
        if (koord && strcmp(op, "UPDATE") == 0 && old != NULL && eq_parse(old, rgroup, rns, &prev, err, sizeof(err)) != 0)
            prev = NULL;
        kq_qgroup_spec_t q;
        to_qspec(&o->s, &q);
        if (prev != NULL && o->s.is_parent && !prev->s.is_parent)
            rc = koord_becomes_parent(e, o, prev, msg, len);
        if (rc == 0 && (rc = kq_qtree_validate_group(e->qt, &q, err, sizeof(err))) != 0) {
            kq_errf(msg, len, "ElasticQuota %s/%s: %s", o->ns, o->name, err[0] ? err : kq_strerror(rc));
            rc = rc == KQ_ENOMEM ? KQ_ENOMEM : KQ_EDENIED;
        } else if (rc == 0 && koord) {
            rc = koord_rules(e, o, prev, obj, msg, len);
        }
        eqobj_free(prev);
    }
    eqobj_free(o);
    return rc;
}

int kq_elastic_check_pod(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len)
{
    kq_elastic_t *e = ud;
    const json_t *meta = json_object_get(pod, "metadata");
    const json_t *labels = json_object_get(meta, "labels");
    const char *ns = str_or(json_string_value(json_object_get(meta, "namespace")), "-");
    const char *name = str_or(json_string_value(json_object_get(meta, "name")),
                              str_or(json_string_value(json_object_get(meta, "generateName")), "-"));
    const char *q = kv(labels, KQ_EQ_LABEL_PREFIX "name");
    bool parent = false;
    if (e != NULL && q != NULL && kq_qtree_lookup(e->qt, q, &parent) && parent) {
        kq_errf(msg, len, "pod %s/%s: label %sname names quota %s, a parent quota; pods can only be linked to leaf "
               "quotas", ns, name, KQ_EQ_LABEL_PREFIX, q);
        return KQ_EDENIED;
    }
    /* issue 37: only a quota that exists and governs the pod's namespace (a queue group's
     * pods are known only once the pod's queue is: that is checked at filter and bind) */
    if (e != NULL && q != NULL && kq_resolve_check_name(e->resolver, ns, name, q, NULL, msg, len, NULL) != 0)
        return KQ_EDENIED;
    if (old != NULL) {
        const char *a = json_string_value(json_object_get(json_object_get(json_object_get(old, "metadata"), "labels"),
                                                          KQ_EQ_LABEL_PREFIX "preemptible"));
        const char *b = json_string_value(json_object_get(labels, KQ_EQ_LABEL_PREFIX "preemptible"));
        if (!str_eq(a, b)) {
            kq_errf(msg, len, "pod %s/%s: label %spreemptible cannot be changed (%s -> %s)", ns, name,
                   KQ_EQ_LABEL_PREFIX, str_or(a, "unset"), str_or(b, "unset"));
            return KQ_EDENIED;
        }
    }
    return 0;
}
