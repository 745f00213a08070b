/* The pod -> quota group resolver: answers which group a pod counts in and whether it may
 * name the quota its label names, from a snapshot the elastic module builds. Rules:
 * include/kubequota/control/resolve.h.
 *
 * DESIGN
 * The snapshot is three tables: the namespace map (namespace -> group and the rank that
 * bound it, resolution step 3), the queue groups that bound something (step 4) and, per
 * applied group, who may name it by the quota label (issue 37). The elastic module builds a
 * new snapshot at the end of every reconcile (kq_resolve_map_*, no lock here) and swaps it
 * in whole under the write lock, so a reader sees either the old or the new answer for
 * every namespace, never a mix. Readers (any thread: civetweb workers, the pod informer,
 * the gate, the ledger's re-resolution under the ledger lock) hold the read lock for hash
 * lookups only; the quota tree is asked (kq_qtree_lookup, its own lock) after or inside
 * it: order ledger -> resolver -> quota tree, elastic apply -> resolver.
 */
#include "kubequota/control/resolve.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "kubequota/base/log.h"
#include "kubequota/control/koordinator.h"


/* ================================================================== types ==== */

typedef struct nsmap {
    char *ns;
    char *group;
    int prio;
    UT_hash_handle hh;
} nsmap_t;

/* Which namespaces may name a group by the label quota.scheduling.koordinator.sh/name
 * (issue 37; section "quota names"): a snapshot rebuilt with the namespace map. */
typedef struct govern {
    char *group;
    UT_hash_handle hh;
    int kind;     /* GOV_OBJECT: an ElasticQuota object or a profile's root; GOV_QUEUE; GOV_DEFAULT */
    char *ns;     /* GOV_OBJECT: the object's (or profile's) namespace */
    char **nss;   /* GOV_OBJECT: its namespaces annotation (own copies) */
    size_t n_nss;
} govern_t;

enum { GOV_OBJECT = KQ_RESOLVE_GOV_OBJECT, GOV_QUEUE = KQ_RESOLVE_GOV_QUEUE, GOV_DEFAULT = KQ_RESOLVE_GOV_DEFAULT };

struct kq_resolve_map {
    nsmap_t *nsmap;
    nsmap_t *qbound; /* queue groups that bound something (ns = group name) */
    govern_t *gov;
    bool gov_oom;    /* an entry of gov could not be allocated: keep the previous gov */
};

struct kq_resolver {
    kq_qtree_t *qt;
    const char *const *system_namespaces; /* borrowed */
    size_t n_system_namespaces;

    pthread_rwlock_t mu; /* guards the snapshot */
    kq_resolve_map_t cur;
};

/* ================================================================== helpers ==== */

static bool str_eq(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static void nsmap_free(nsmap_t *m)
{
    nsmap_t *x, *tmp;
    HASH_ITER(hh, m, x, tmp) {
        HASH_DEL(m, x);
        free(x->ns);
        free(x->group);
        free(x);
    }
}

static void govern_free_one(govern_t *g)
{
    if (g == NULL)
        return;
    for (size_t i = 0; i < g->n_nss; i++)
        free(g->nss[i]);
    free(g->nss);
    free(g->ns);
    free(g->group);
    free(g);
}

static void govern_free(govern_t *t)
{
    govern_t *g, *tmp;
    HASH_ITER(hh, t, g, tmp) {
        HASH_DEL(t, g);
        govern_free_one(g);
    }
}

/* A new entry for group of kind, with namespace ns (may be NULL) and the namespaces
 * nss[n] copied; NULL on ENOMEM. */
static govern_t *govern_new(const char *group, int kind, const char *ns, char *const *nss, size_t n)
{
    govern_t *g = calloc(1, sizeof(*g));
    if (g == NULL || (g->group = strdup(group)) == NULL || (ns != NULL && (g->ns = strdup(ns)) == NULL) ||
        (n > 0 && (g->nss = calloc(n, sizeof(*g->nss))) == NULL))
        goto fail;
    g->kind = kind;
    for (; g->n_nss < n; g->n_nss++)
        if ((g->nss[g->n_nss] = strdup(nss[g->n_nss])) == NULL)
            goto fail;
    return g;
fail:
    govern_free_one(g);
    return NULL;
}

/* Whether two namespace maps give every namespace the same group. */
static bool nsmap_same(nsmap_t *a, nsmap_t *b)
{
    if (HASH_COUNT(a) != HASH_COUNT(b))
        return false;
    for (nsmap_t *x = a; x != NULL; x = x->hh.next) {
        nsmap_t *y;
        HASH_FIND_STR(b, x->ns, y);
        if (y == NULL || !str_eq(x->group, y->group))
            return false;
    }
    return true;
}

/* ================================================================== snapshot ==== */

kq_resolve_map_t *kq_resolve_map_new(void)
{
    return calloc(1, sizeof(kq_resolve_map_t));
}

void kq_resolve_map_free(kq_resolve_map_t *m)
{
    if (m == NULL)
        return;
    nsmap_free(m->nsmap);
    nsmap_free(m->qbound);
    govern_free(m->gov);
    free(m);
}

bool kq_resolve_map_bind(kq_resolve_map_t *m, const char *ns, const char *group, int prio, const char **lost_to)
{
    if (lost_to != NULL)
        *lost_to = NULL;
    nsmap_t *x;
    HASH_FIND_STR(m->nsmap, ns, x);
    if (x != NULL && x->prio <= prio) {
        if (x->prio == prio && strcmp(x->group, group) != 0 && lost_to != NULL)
            *lost_to = x->group;
        return false;
    }
    char *g = strdup(group);
    if (g == NULL)
        return true;
    if (x == NULL) {
        if ((x = calloc(1, sizeof(*x))) == NULL || (x->ns = strdup(ns)) == NULL) {
            free(x);
            free(g);
            return true;
        }
        HASH_ADD_KEYPTR(hh, m->nsmap, x->ns, strlen(x->ns), x);
    }
    free(x->group);
    x->group = g;
    x->prio = prio;
    return true;
}

void kq_resolve_map_bounded_queue(kq_resolve_map_t *m, const char *group)
{
    nsmap_t *y;
    if ((y = calloc(1, sizeof(*y))) == NULL)
        return;
    if ((y->ns = strdup(group)) == NULL) {
        free(y);
        return;
    }
    HASH_ADD_KEYPTR(hh, m->qbound, y->ns, strlen(y->ns), y);
}

void kq_resolve_map_govern(kq_resolve_map_t *m, const char *group, int kind, const char *ns, char *const *nss,
                           size_t n)
{
    if (m->gov_oom)
        return;
    govern_t *g = govern_new(group, kind, ns, nss, n);
    if (g == NULL) {
        m->gov_oom = true;
        return;
    }
    HASH_ADD_KEYPTR(hh, m->gov, g->group, strlen(g->group), g);
}

bool kq_resolve_swap(kq_resolver_t *r, kq_resolve_map_t *m)
{
    if (m->gov_oom) {
        kq_error("event=quota_names_not_rebuilt error=\"out of memory\" msg=\"keeping the previous view of "
                 "which namespaces may name each quota\"");
        govern_free(m->gov);
        m->gov = NULL;
    }
    pthread_rwlock_wrlock(&r->mu);
    kq_resolve_map_t old = r->cur;
    r->cur.nsmap = m->nsmap;
    r->cur.qbound = m->qbound;
    if (!m->gov_oom)
        r->cur.gov = m->gov;
    pthread_rwlock_unlock(&r->mu);
    bool changed = !nsmap_same(old.nsmap, m->nsmap) || !nsmap_same(old.qbound, m->qbound);
    nsmap_free(old.nsmap);
    nsmap_free(old.qbound);
    if (!m->gov_oom)
        govern_free(old.gov);
    free(m);
    return changed;
}

/* ================================================================== quota names ==== */

/* Issue 37: the label quota.scheduling.koordinator.sh/name may name only a quota that
 * governs the pod's namespace. An ElasticQuota object governs its own namespace and those
 * its namespaces annotation lists (a scheduler-plugins object: its namespace); a profile's
 * root group, the profile's namespace; a queue group, the pods of that queue; the default
 * group (and the names that mean it), the namespaces without a quota of their own. */

bool kq_resolve_system_ns(const kq_resolver_t *r, const char *ns)
{
    for (size_t i = 0; ns != NULL && i < r->n_system_namespaces; i++)
        if (strcmp(r->system_namespaces[i], ns) == 0)
            return true;
    return false;
}

/* The names the resolver takes as the default group (Koordinator's reserved quotas, the
 * tree's reserved groups). */
static bool default_name(const char *name)
{
    return strcmp(name, KQ_QTREE_DEFAULT) == 0 || strcmp(name, KQ_KOORD_DEFAULT) == 0 ||
           strcmp(name, KQ_KOORD_ROOT) == 0 || strcmp(name, KQ_KOORD_SYSTEM) == 0 || strcmp(name, KQ_QTREE_ROOT) == 0 ||
           strcmp(name, KQ_QTREE_SYSTEM) == 0;
}

/* May a pod of namespace ns (its queue; NULL when not known, as at admission) name quota
 * `name`? 0, or KQ_EDENIED with msg (pod names the pod) and *kind. The lock taken for
 * reading; nothing else. */
int kq_resolve_check_name(kq_resolver_t *e, const char *ns, const char *pod, const char *name, const char *queue,
                          char *msg, size_t len, kq_denial_t *kind)
{
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (e == NULL || name == NULL || ns == NULL || kq_resolve_system_ns(e, ns))
        return 0;
    int rc = 0;
    pthread_rwlock_rdlock(&e->mu);
    govern_t *g = NULL;
    nsmap_t *own = NULL;
    HASH_FIND_STR(e->cur.nsmap, ns, own);
    if (!default_name(name))
        HASH_FIND_STR(e->cur.gov, name, g);
    if (default_name(name) || (g != NULL && g->kind == GOV_DEFAULT)) {
        if (own != NULL && strcmp(own->group, KQ_QTREE_DEFAULT) != 0) {
            kq_errf(msg, len, "pod %s/%s: label %sname names %s, the default quota, but namespace %s has a quota of "
                    "its own, %s: a pod may name only a quota that governs its namespace", ns, pod,
                    KQ_EQ_LABEL_PREFIX, name, ns, own->group);
            kq_denial_set(kind, KQ_DENIAL_QUOTA_OTHER_NS);
            rc = KQ_EDENIED;
        }
    } else if (g == NULL) {
        kq_errf(msg, len, "pod %s/%s: elastic quota %s not found: label %sname names no ElasticQuota, queue or "
                "quota group of that name", ns, pod, name, KQ_EQ_LABEL_PREFIX);
        kq_denial_set(kind, KQ_DENIAL_QUOTA_NOT_FOUND);
        rc = KQ_EDENIED;
    } else if (g->kind == GOV_QUEUE) {
        if (queue != NULL && strcmp(queue, name) != 0) {
            kq_errf(msg, len, "pod %s/%s: label %sname names quota group %s, the group of queue %s, not of the pod's "
                    "queue %s", ns, pod, KQ_EQ_LABEL_PREFIX, name, name, queue);
            kq_denial_set(kind, KQ_DENIAL_QUOTA_OTHER_NS);
            rc = KQ_EDENIED;
        }
    } else {
        bool ok = g->ns != NULL && strcmp(g->ns, ns) == 0;
        for (size_t i = 0; !ok && i < g->n_nss; i++)
            ok = strcmp(g->nss[i], ns) == 0;
        if (!ok) {
            kq_errf(msg, len, "pod %s/%s: label %sname names quota %s of namespace %s, which does not govern "
                    "namespace %s: a pod may name only a quota of its own namespace or one whose %snamespaces "
                    "annotation lists it", ns, pod, KQ_EQ_LABEL_PREFIX, name, g->ns ? g->ns : "-", ns,
                    KQ_EQ_LABEL_PREFIX);
            kq_denial_set(kind, KQ_DENIAL_QUOTA_OTHER_NS);
            rc = KQ_EDENIED;
        }
    }
    pthread_rwlock_unlock(&e->mu);
    return rc;
}

int kq_resolve_check_quota_name(kq_resolver_t *r, const kq_pod_t *pod, char *msg, size_t len, kq_denial_t *kind)
{
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (r == NULL || pod == NULL)
        return 0;
    return kq_resolve_check_name(r, pod->ns, pod->name ? pod->name : "-", pod->quota_name, pod->queue, msg, len,
                                 kind);
}

bool kq_resolve_namespace_quota(kq_resolver_t *r, const char *ns, int max_rank, char *group, size_t len)
{
    bool bound = false;
    pthread_rwlock_rdlock(&r->mu);
    nsmap_t *m;
    HASH_FIND_STR(r->cur.nsmap, ns, m);
    if (m != NULL && m->prio <= max_rank) {
        snprintf(group, len, "%s", m->group);
        bound = true;
    }
    pthread_rwlock_unlock(&r->mu);
    return bound;
}

/* ================================================================== resolver ==== */

int kq_resolve_pod(void *ud, const kq_pod_t *pod, char *group, size_t len)
{
    kq_resolver_t *e = ud;
    const char *pick = KQ_QTREE_DEFAULT;
    bool parent = false;
    char found[KQ_QTREE_NAME_MAX + 1];
    if (kq_resolve_system_ns(e, pod->ns)) {
        pick = KQ_QTREE_SYSTEM;
        goto out;
    }
    kq_denial_t nk = KQ_DENIAL_NONE;
    if (pod->quota_name != NULL &&
        (kq_resolve_check_name(e, pod->ns, "-", pod->quota_name, pod->queue, NULL, 0, &nk) == 0 ||
         nk == KQ_DENIAL_QUOTA_NOT_FOUND)) {
        /* Koordinator: a label naming no quota (or a reserved one) means the default group */
        if (strcmp(pod->quota_name, KQ_QTREE_SYSTEM) != 0 && strcmp(pod->quota_name, KQ_QTREE_ROOT) != 0 &&
            kq_qtree_lookup(e->qt, pod->quota_name, &parent))
            pick = pod->quota_name;
        goto out;
    }
    /* a label naming a quota that does not govern the namespace is not taken (issue 37): the
     * pod is denied at filter and bind; one bound by someone else counts as if unlabelled */
    found[0] = '\0';
    pthread_rwlock_rdlock(&e->mu);
    nsmap_t *m = NULL;
    if (pod->ns != NULL)
        HASH_FIND_STR(e->cur.nsmap, pod->ns, m);
    if (m != NULL && kq_qtree_lookup(e->qt, m->group, &parent) && !parent)
        snprintf(found, sizeof(found), "%s", m->group);
    bool qbounded = false;
    if (found[0] == '\0' && pod->queue != NULL) {
        nsmap_t *q;
        HASH_FIND_STR(e->cur.qbound, pod->queue, q);
        qbounded = q != NULL;
    }
    pthread_rwlock_unlock(&e->mu);
    if (found[0] != '\0') {
        pick = found;
        goto out;
    }
    if (qbounded && kq_qtree_lookup(e->qt, pod->queue, &parent) && !parent)
        pick = pod->queue;
out:
    snprintf(group, len, "%s", pick);
    return 0;
}

/* ================================================================== lifecycle ==== */

kq_resolver_t *kq_resolver_new(kq_qtree_t *qt, const char *const *system_namespaces, size_t n)
{
    kq_resolver_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->qt = qt;
    r->system_namespaces = system_namespaces;
    r->n_system_namespaces = n;
    pthread_rwlock_init(&r->mu, NULL);
    return r;
}

void kq_resolver_free(kq_resolver_t *r)
{
    if (r == NULL)
        return;
    nsmap_free(r->cur.nsmap);
    nsmap_free(r->cur.qbound);
    govern_free(r->cur.gov);
    pthread_rwlock_destroy(&r->mu);
    free(r);
}
