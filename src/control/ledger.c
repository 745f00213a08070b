/* Pod ledger: the only place that turns pod events (bind, watch, relist) into quota
 * engine increases and decreases, keyed by pod UID, so that each pod is counted at most
 * once and released exactly once. See include/kubequota/ledger.h for the states.
 *
 * What is counted is remembered: an entry that counts a pod keeps its own copy of the
 * queue, application, user (and groups) and request it gave the engine, and releases
 * exactly that, whatever the pod's labels say later. A label change on a counted pod
 * therefore does not move its usage; an in-place resize (the request changes) adds the
 * new request and then releases the old one under the same identity, so the application
 * never stops running in between.
 *
 * A bound pod whose queue cannot be resolved (queue NULL: no such queue, parent queue)
 * is still counted — reality is never refused — against "root", and a warning is logged
 * once for that pod. The same fallback is used when the engine rejects the pod's queue
 * path (a configuration reload removed it).
 *
 * Pending resources: for pods of our scheduler that are known and unassigned, the pod's
 * request is added to its queue's pending resources (kq_ugm_pending_add); the entry
 * remembers the queue and amount and subtracts exactly that when the pod is counted,
 * changes, or goes away.
 *
 * Resync uses generations: resync_begin increments the generation; observe stamps the
 * entry with it; assume stamps the assumption with it. resync_end forgets (and releases)
 * every entry not observed in the current generation, except those assumed in it.
 * The relist must include unassigned pods of our scheduler, or pods assumed before the
 * relist whose bind has not reached the API server would be released.
 *
 * Elastic quota. With a quota tree wired, every entry also keeps the tree in step:
 * tree_sync() compares what the entry contributes to its group's request (rq_group,
 * rq_req) with what it should (counted: the counted group and request; a pending pod of
 * ours: its resolved group and request; otherwise nothing) and moves the difference. Used
 * is added with the count (counted_t.group, .np) and subtracted with the release. A
 * bound pod whose group is gone or a parent is counted in KQ_QTREE_DEFAULT. Removing a
 * group goes through kq_ledger_remove_group, which renames the entries' groups to the
 * default group under the ledger lock in the same step as the tree moves the usage.
 * Resolution is level-triggered: kq_ledger_reresolve asks the resolver again for every
 * entry (under the lock) and moves what changed, used and request together
 * (reresolve_entry). A resolution made with no lock held is stamped with resolve_gen
 * first; if a re-resolution ran before the entry was stored, the entry is asked again
 * (reresolve_if_stale), so no answer older than the last quota event survives.
 *
 * Re-placement (issue 38): a pod's queue is a function of the pod and the config in force,
 * like its group. kq_ledger_place_again asks the placement function (set by the informer,
 * which owns the config holder and the placement hooks) again for every entry; an entry
 * whose answer differs takes it, and a counted one moves what it counted (counted_t.queue)
 * in two phases, all releases and then all counts (place_release, place_count), so that
 * nothing is counted twice or lost and an application whose pods all move is counted
 * afresh where it lands. Then the groups of the pods that moved are asked again. A pod
 * placed by a config older than the one in force when it is stored (parsed just before a
 * reload) is placed again by the informer (kq_ledger_place_again_pod).
 *
 * In-flight preemption (ledger.h): a second uthash table, keyed by preemptor UID, holds
 * the victims the preempt verb answered, per node. A victim's entry points at the record
 * that claims it (entry_t.claim), so that one victim is discounted for one preemptor
 * only; freeing a record clears its claims (one lookup per victim). The discount is read
 * under the ledger lock from the entries themselves (still counted, same quota group, that
 * node), so a victim released meanwhile is simply no longer discounted: nothing is
 * subtracted twice.
 *
 * Resize reservations (kq_ledger_check_resize, ledger.h): an entry whose resize was
 * admitted and not yet shown by the watch keeps the admitted request (rs_req) and sits on
 * a doubly linked list, so that expiry costs O(such entries), never a table scan. What it
 * makes counted is ordinary usage: a growth is committed at admission by grow_locked, the
 * same check-and-commit that bind uses for a reserved pod whose request grew.
 *
 * Admission reservations (ledger.h): an entry counted by kq_ledger_admit for a pod being
 * created with spec.nodeName, under the UID the API server gave it, is an ASSUMED entry
 * that is also in a doubly linked list in reservation order (entry_t.adm_prev/adm_next), so
 * that expiry looks only at the list's head. release() and the watch's first sight of the
 * pod bound take it off the list; nothing else changes: the watch finds the entry by UID
 * and turns it BOUND, so the pod is counted once.
 *
 * DESIGN: one mutex guards the UID table (uthash), the in-flight preemption table, the
 * resize reservation list, the admission list and the counters. Engine calls that
 * change usage are made under it, so the table and the engine never disagree (lock
 * order: ledger -> ugm -> quota tree, never the reverse). kq_ledger_check calls the engine after
 * dropping the ledger lock: it changes nothing, and filter must not serialise on the
 * ledger. No I/O under the lock: bind POSTs happen in the caller between assume and
 * forget. Entries and pod copies for kq_ledger_assume are allocated before the lock is
 * taken, so a successful engine increase can never be lost to an allocation failure.
 * seen_cv goes with the ledger mutex: kq_ledger_observe broadcasts it when someone waits
 * (seen_waiters, guarded by the mutex) for the watch to show a pod; the waiter
 * (kq_ledger_wait_observed, the filter) holds no other lock.
 */
#include "kubequota/control/ledger.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"
#include "kubequota/control/claims.h"

typedef enum { ST_PENDING = 0, ST_ASSUMED, ST_BOUND } state_t;

static const char *const state_names[] = {"pending", "assumed", "bound"};

/* What was given to the engine, released verbatim. */
/* A request as an entry keeps it: only the resources it names (a pod names two or three;
 * a kq_resource_t has room for KQ_RES_INLINE), so that 150,000 entries fit in the chart's
 * memory limit. NULL is the empty set. Read it through RV(). */
typedef struct rpack {
    uint32_t n;
    kq_res_entry_t e[];
} rpack_t;

/* *dst = a copy of src (NULL when empty); the old one is freed. KQ_ENOMEM changes nothing. */
static int rpack_set(rpack_t **dst, const kq_resource_t *src)
{
    rpack_t *p = NULL;
    if (src != NULL && src->n > 0) {
        p = malloc(sizeof(*p) + src->n * sizeof(kq_res_entry_t));
        if (p == NULL)
            return KQ_ENOMEM;
        p->n = src->n;
        memcpy(p->e, KQ_RES_E(src), src->n * sizeof(kq_res_entry_t));
    }
    free(*dst);
    *dst = p;
    return 0;
}

/* p as a kq_resource_t, in tmp: up to KQ_RES_INLINE entries copied inline, more borrowed
 * (tmp's heap is p's array). Read only, never freed: valid while p is unchanged. */
static const kq_resource_t *rpack_view(const rpack_t *p, kq_resource_t *tmp)
{
    tmp->n = 0;
    tmp->cap = 0;
    tmp->heap = NULL;
    if (p != NULL && p->n > KQ_RES_INLINE) {
        tmp->heap = (kq_res_entry_t *)p->e;
        tmp->cap = p->n;
        tmp->n = p->n;
    } else if (p != NULL) {
        memcpy(tmp->inl, p->e, p->n * sizeof(kq_res_entry_t));
        tmp->n = p->n;
    }
    return tmp;
}

/* A view valid until the end of the enclosing block. */
#define RV(p) rpack_view((p), &(kq_resource_t){.n = 0})

static bool rpack_equal(const rpack_t *p, const kq_resource_t *r)
{
    return kq_resource_equal(RV(p), r);
}

/* The latest facts of a pod as an entry keeps them: a kq_pod_t whose request is an rpack_t.
 * Same field names as kq_pod_t; read it as one through EPOD(). A field added to kq_pod_t
 * must be added here and to SPOD_FIELDS (the assertion below notices). */
typedef struct spod {
    char *uid;
    char *ns, *name;
    char *node;
    char *scheduler_name;
    kq_pod_phase_t phase;
    bool deleting;
    char *user;
    char **groups;
    size_t n_groups;
    char *queue;
    char *queue_error;
    kq_denial_t queue_denial;
    bool queue_named;
    char *queue_value;
    const char *queue_source;
    char *app_id;
    bool app_named;
    rpack_t *request;
    int32_t priority;
    bool preemptible;
    int64_t created;
    char *quota_name;
    char *quota_group;
    uint32_t n_gates;
    uint32_t gate_pos;
    char *gang;
    uint32_t gang_min;
    char **claims;
    size_t n_claims;
} spod_t;

#define SPOD_FIELDS(X)                                                                                               \
    X(uid) X(ns) X(name) X(node) X(scheduler_name) X(phase) X(deleting) X(user) X(groups) X(n_groups) X(queue)        \
    X(queue_error) X(queue_denial) X(queue_named) X(queue_value) X(queue_source) X(app_id) X(app_named) X(priority) X(preemptible) X(created) X(quota_name) X(quota_group) X(n_gates) X(gate_pos) \
    X(gang) X(gang_min) X(claims) X(n_claims)

_Static_assert(sizeof(spod_t) - sizeof(rpack_t *) == sizeof(kq_pod_t) - sizeof(kq_resource_t),
               "spod_t has every field of kq_pod_t");

/* s as a kq_pod_t in t, sharing s's strings (read only; valid while s is unchanged). */
static const kq_pod_t *spod_view(const spod_t *s, kq_pod_t *t)
{
#define SPOD_COPY(f) t->f = s->f;
    SPOD_FIELDS(SPOD_COPY)
#undef SPOD_COPY
    rpack_view(s->request, &t->request);
    return t;
}

/* A kq_pod_t view of an entry's pod, valid until the end of the enclosing block. */
#define EPOD(s) spod_view((s), &(kq_pod_t){.n_groups = 0})

static void spod_clear(spod_t *s)
{
    kq_pod_t t;
    spod_view(s, &t);
    t.request = KQ_RESOURCE_EMPTY;
    kq_pod_clear(&t); /* frees the strings */
    free(s->request);
    memset(s, 0, sizeof(*s));
}

/* *dst = src's facts (the old ones freed); src's strings move and src is emptied. KQ_ENOMEM
 * changes nothing. */
static int spod_take(spod_t *dst, kq_pod_t *src)
{
    rpack_t *r = NULL;
    int rc = rpack_set(&r, &src->request);
    if (rc != 0)
        return rc;
    spod_clear(dst);
#define SPOD_MOVE(f) dst->f = src->f;
    SPOD_FIELDS(SPOD_MOVE)
#undef SPOD_MOVE
    dst->request = r;
    kq_resource_free(&src->request);
    memset(src, 0, sizeof(*src));
    return 0;
}

typedef struct counted {
    char *queue, *app, *user;
    char **groups;
    size_t n_groups;
    rpack_t *req;
    char *group; /* quota tree group the used was added to; NULL: not in the tree */
    bool np;     /* counted as non-preemptible used */
} counted_t;

/* One preemptor's in-flight preemption: the victims the preempt verb answered on each node
 * (victim[first[i] .. first[i+1]) are node[i]'s), until until_ms (monotonic). */
typedef struct inflight {
    char *uid; /* the preemptor; key */
    UT_hash_handle hh;
    int64_t until_ms;
    size_t n_nodes, n_victims;
    char **node;
    size_t *first; /* n_nodes + 1 */
    char **victim;
} inflight_t;

typedef struct entry {
    char *uid; /* key */
    UT_hash_handle hh;
    state_t state;
    spod_t pod;           /* latest facts (watch, or the bind's pod) */
    bool observed;        /* seen by the watch or a relist at least once */
    counted_t c;          /* valid when state != ST_PENDING */
    bool pending;         /* pending resources added for p_queue/p_req */
    char *p_queue;
    rpack_t *p_req;
    uint64_t seen_gen;    /* generation of the last observe */
    uint64_t assumed_gen; /* generation of the assume that counted it */
    char *rq_group;       /* quota tree: group whose request holds rq_req; NULL none */
    rpack_t *rq_req;
    int64_t born;         /* monotonic seconds when the entry was made */
    /* Gating (kq_ledger_reserve): an ASSUMED entry counted for the admission controller
     * before its gate went; it stays counted through failed binds until the watch shows
     * it bound, or until kq_ledger_unreserve / kq_ledger_expire_reserved release it. */
    bool reserved;
    bool res_done;        /* its reservation ended unbound: never reserved again by observe */
    bool want_res;        /* seen ungated during a relist: reserved (checked) at its end */
    int64_t reserved_at;  /* monotonic seconds of the reservation */
    inflight_t *claim;    /* the in-flight preemption this pod is a victim of, or NULL */
    /* A resize admitted by kq_ledger_check_resize that the watch has not shown yet: the
     * request the pod is to have. Until the watch shows a request at least this large (or
     * rs_until_ms passes), the pod is counted with at least it: a counted pod's growth was
     * committed at admission, and a pod counted later (gate, bind) is counted with it.
     * Entries with one are on the list l->resizing (rs_prev, rs_next). */
    rpack_t *rs_req;
    int64_t rs_until_ms;  /* monotonic */
    struct entry *rs_prev, *rs_next;
    /* Admission reservation (kq_ledger_admit): an ASSUMED entry counted by the validating
     * webhook for a pod created with spec.nodeName, keyed by the UID the API server gave
     * it, until the watch shows it (then simply counted) or the TTL ends it. In the
     * ledger's admission list, oldest first. */
    bool admitted;
    int64_t admitted_ms;  /* monotonic ms of the reservation */
    struct entry *adm_prev, *adm_next;
    /* DRA ResourceClaims (pod.n_claims > 0): pod.request is the full charge, base the
     * containers' request it was computed from (see "DRA ResourceClaims" below). */
    rpack_t *base;
    /* Metering (kq_ledger_set_charge_hook): a counted pod whose charge moved through its
     * claims, not yet handed to the hook (kq_ledger_flush_charges); a list, l->ch_head. */
    bool ch_noted;
    struct entry *ch_prev, *ch_next;
} entry_t;

/* The pods the ledger knows that use one ResourceClaim (key "<ns>/<name>"), and the
 * earliest-created counted one among them, which is charged the claim's devices. */
typedef struct cref {
    UT_hash_handle hh;
    entry_t **pods;
    size_t n, cap;
    entry_t *owner; /* NULL: none of them is counted */
    size_t ns_len;  /* key[0..ns_len) is the namespace */
    char key[];
} cref_t;

struct kq_ledger {
    pthread_mutex_t mu;
    kq_ugm_t *ugm;
    char *scheduler_name;
    entry_t *table;
    size_t n_counted;
    uint64_t gen;
    bool resyncing;
    kq_qtree_t *qt;             /* NULL: no elastic quota */
    kq_qtree_t *batch_qt;       /* the tree a resync batches (kq_qtree_batch_begin), or NULL */
    kq_ledger_resolve_fn resolve;
    void *resolve_ud;
    atomic_uint_fast64_t resolve_gen; /* bumped (under mu) by each kq_ledger_reresolve */
    kq_ledger_place_fn place;   /* kq_ledger_set_placement: places a pod by the config now */
    void *place_ud;
    atomic_uint_fast64_t place_gen; /* bumped (under mu) by each kq_ledger_place_again */
    bool gating;                /* kq_ledger_set_gating: ungated unbound pods of ours are reserved */
    bool gate_only;             /* kq_ledger_set_gate_only: a reservation is never dropped for a resize */
    size_t n_reserved;
    kq_fairshare_t *fs;         /* kq_ledger_set_fairshare: told of every count and release, or NULL */
    inflight_t *inflight;       /* in-flight preemptions by preemptor UID */
    size_t n_inflight;
    int64_t preempt_ttl_ms;
    void (*on_release)(void *ud); /* kq_ledger_set_release_hook, or NULL */
    void *on_release_ud;
    entry_t *resizing;          /* entries with a resize reservation (rs_req), a list */
    int64_t resize_ttl_ms;      /* kq_ledger_set_resize_ttl_ms */
    int64_t rs_next_ms;         /* no resize reservation ends before this (monotonic) */
    entry_t *adm_head, *adm_tail; /* admission reservations, oldest first (kq_ledger_admit) */
    size_t n_admitted;
    int64_t admit_ttl_ms;
    pthread_cond_t seen_cv;     /* with mu: broadcast when the watch shows a pod and seen_waiters > 0 */
    unsigned seen_waiters;      /* threads in kq_ledger_wait_observed */
    kq_claims_t *claims;        /* kq_ledger_set_claims: the claim table (borrowed), or NULL */
    cref_t *crefs;              /* claim key -> the entries that use it */
    /* Metering (kq_ledger_set_charge_hook). feed_mu is taken before mu, never under it, and
     * held while the hook runs, so charges reach it in the order they were read. */
    pthread_mutex_t feed_mu;
    kq_ledger_charge_fn charge_fn; /* under both feed_mu and mu */
    void *charge_ud;
    entry_t *ch_head;           /* entries with ch_noted */
    atomic_size_t n_ch;         /* their number (read without a lock by the flush) */
};

static int64_t mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec;
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------------- */
/* helpers (all called with the ledger lock held, unless said otherwise)               */

/* The usage history follows what the ugm counts (fairshare's lock nests inside ours). */
static void fs_note(kq_ledger_t *l, const char *queue, const char *user, const kq_resource_t *req, int sign)
{
    if (l->fs != NULL)
        kq_fairshare_change(l->fs, queue, user, req, sign, kq_fairshare_now());
}

static void counted_clear(counted_t *c)
{
    free(c->queue);
    free(c->app);
    free(c->user);
    free(c->group);
    free(c->req);
    for (size_t i = 0; i < c->n_groups; i++)
        free(c->groups[i]);
    free(c->groups);
    memset(c, 0, sizeof(*c));
}

/* Copy of the identity the pod is counted with; queue NULL becomes "root". No lock. */
static int counted_from_pod(counted_t *c, const kq_pod_t *pod)
{
    memset(c, 0, sizeof(*c));
    c->queue = strdup(pod->queue ? pod->queue : "root");
    c->app = strdup(pod->app_id ? pod->app_id : pod->uid);
    c->user = strdup(pod->user ? pod->user : "nobody");
    if (!c->queue || !c->app || !c->user)
        goto nomem;
    if (pod->n_groups > 0) {
        if ((c->groups = calloc(pod->n_groups, sizeof(char *))) == NULL)
            goto nomem;
        for (; c->n_groups < pod->n_groups; c->n_groups++)
            if ((c->groups[c->n_groups] = strdup(pod->groups[c->n_groups])) == NULL)
                goto nomem;
    }
    if (rpack_set(&c->req, &pod->request) != 0)
        goto nomem;
    if (pod->quota_group != NULL && (c->group = strdup(pod->quota_group)) == NULL)
        goto nomem;
    c->np = !pod->preemptible;
    return 0;
nomem:
    counted_clear(c);
    return KQ_ENOMEM;
}

static kq_user_t counted_user(const counted_t *c)
{
    return (kq_user_t){.name = c->user, .groups = (const char *const *)c->groups, .n_groups = c->n_groups};
}

static void entry_free(entry_t *e)
{
    if (e == NULL)
        return;
    free(e->uid);
    spod_clear(&e->pod);
    counted_clear(&e->c);
    free(e->p_queue);
    free(e->p_req);
    free(e->rq_group);
    free(e->rq_req);
    free(e->rs_req);
    free(e->base);
    free(e);
}

static bool is_ours(const kq_ledger_t *l, const kq_pod_t *pod)
{
    return l->scheduler_name != NULL && pod->scheduler_name != NULL &&
           strcmp(l->scheduler_name, pod->scheduler_name) == 0;
}

/* ---- quota tree (lock held) ---- */

/* What the entry should contribute to a group's request. */
static const char *rq_want(const kq_ledger_t *l, const entry_t *e, const kq_resource_t **req, kq_resource_t *tmp)
{
    if (e->state != ST_PENDING) {
        *req = rpack_view(e->c.req, tmp);
        return e->c.group;
    }
    const kq_pod_t *pod = EPOD(&e->pod);
    if (!is_ours(l, pod) || pod->quota_group == NULL || kq_pod_is_terminal(pod) || kq_resource_is_zero(&pod->request))
        return NULL;
    *req = rpack_view(e->pod.request, tmp);
    return e->pod.quota_group;
}

/* Makes the entry's contribution to the tree's requests what it should be. */
static void tree_sync(kq_ledger_t *l, entry_t *e, bool gone)
{
    if (l->qt == NULL)
        return;
    const kq_resource_t *req = NULL;
    kq_resource_t tmp;
    const char *want = gone ? NULL : rq_want(l, e, &req, &tmp);
    if (e->rq_group != NULL && want != NULL && strcmp(e->rq_group, want) == 0 && rpack_equal(e->rq_req, req))
        return;
    if (e->rq_group != NULL) {
        int rc = kq_qtree_request_sub(l->qt, e->rq_group, RV(e->rq_req));
        if (rc != 0)
            kq_error("event=quota_request_release_failed uid=%s group=%s error=\"%s\"", e->uid, e->rq_group,
                     kq_strerror(rc));
        free(e->rq_group);
        e->rq_group = NULL;
    }
    if (want == NULL)
        return;
    char *g = strdup(want);
    if (g == NULL || rpack_set(&e->rq_req, req) != 0) {
        kq_error("event=quota_request_failed uid=%s group=%s error=\"out of memory\"", e->uid, want);
        free(g);
        return;
    }
    int rc = kq_qtree_request_add(l->qt, g, req);
    if (rc != 0) {
        /* a parent group (denied at filter/bind) or a group removed meanwhile */
        kq_debug("event=quota_request_skipped uid=%s group=%s error=\"%s\"", e->uid, g, kq_strerror(rc));
        free(g);
        return;
    }
    e->rq_group = g;
}

/* Adds the counted pod's used to its group (unchecked); a group that is gone or a parent
 * falls back to the default group; failing that, the pod stays out of the tree. */
static void tree_count(kq_ledger_t *l, entry_t *e, counted_t *c, const kq_pod_t *pod)
{
    if (l->qt == NULL || c->group == NULL)
        return;
    int rc = kq_qtree_used_add(l->qt, c->group, RV(c->req), c->np);
    if ((rc == KQ_ENOENT || rc == KQ_EINVAL) && strcmp(c->group, KQ_QTREE_DEFAULT) != 0) {
        kq_warn("event=count_in_default_group pod=%s/%s uid=%s group=%s msg=\"quota group %s; counting the "
                "bound pod in the default group\"", pod->ns, pod->name, pod->uid, c->group,
                rc == KQ_ENOENT ? "does not exist" : "is a parent group");
        char *d = strdup(KQ_QTREE_DEFAULT);
        if (d != NULL) {
            free(c->group);
            c->group = d;
            rc = kq_qtree_used_add(l->qt, c->group, RV(c->req), c->np);
        }
    }
    if (rc != 0) {
        kq_error("event=quota_count_failed pod=%s/%s uid=%s group=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 c->group, kq_strerror(rc));
        free(c->group);
        c->group = NULL;
    }
    (void)e;
}

static void tree_release(kq_ledger_t *l, entry_t *e)
{
    if (l->qt == NULL || e->c.group == NULL)
        return;
    int rc = kq_qtree_used_sub(l->qt, e->c.group, RV(e->c.req), e->c.np);
    if (rc != 0)
        kq_error("event=quota_release_failed uid=%s group=%s error=\"%s\"", e->uid, e->c.group, kq_strerror(rc));
}


static void pending_drop(kq_ledger_t *l, entry_t *e)
{
    if (!e->pending)
        return;
    kq_ugm_pending_sub(l->ugm, e->p_queue, RV(e->p_req));
    free(e->p_queue);
    e->p_queue = NULL;
    free(e->p_req);
    e->p_req = NULL;
    e->pending = false;
}

/* Makes the pending resources of an unassigned pod match `pod`. */
static void pending_set(kq_ledger_t *l, entry_t *e, const kq_pod_t *pod)
{
    bool want = is_ours(l, pod) && pod->queue != NULL && !kq_resource_is_zero(&pod->request);
    if (e->pending && want && strcmp(e->p_queue, pod->queue) == 0 && rpack_equal(e->p_req, &pod->request))
        return;
    pending_drop(l, e);
    if (!want)
        return;
    char *q = strdup(pod->queue);
    if (q == NULL || rpack_set(&e->p_req, &pod->request) != 0) {
        free(q);
        kq_error("event=pending_add_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name,
                 pod->uid);
        return;
    }
    kq_ugm_pending_add(l->ugm, q, &pod->request);
    e->p_queue = q;
    e->pending = true;
}

/* ---- admission reservations (lock held) ---- */

/* Ends the entry's admission reservation, if it has one (what it counted stays counted). */
static void adm_unlink(kq_ledger_t *l, entry_t *e)
{
    if (!e->admitted)
        return;
    if (e->adm_prev != NULL)
        e->adm_prev->adm_next = e->adm_next;
    else
        l->adm_head = e->adm_next;
    if (e->adm_next != NULL)
        e->adm_next->adm_prev = e->adm_prev;
    else
        l->adm_tail = e->adm_prev;
    e->adm_prev = e->adm_next = NULL;
    e->admitted = false;
    l->n_admitted--;
}

static void adm_link(kq_ledger_t *l, entry_t *e, int64_t now_ms)
{
    e->admitted = true;
    e->admitted_ms = now_ms;
    e->adm_next = NULL;
    e->adm_prev = l->adm_tail;
    if (l->adm_tail != NULL)
        l->adm_tail->adm_next = e;
    else
        l->adm_head = e;
    l->adm_tail = e;
    l->n_admitted++;
}

static entry_t *uncount(kq_ledger_t *l, entry_t *e);

/* Releases the admission reservations older than the TTL (the pod was refused after our
 * webhook, or its create failed): the list is in reservation order, so this stops at the
 * first live one. Returns the entries to free after unlocking, chained through hh.next. */
static entry_t *adm_expire_locked(kq_ledger_t *l, int64_t now_ms, size_t *n)
{
    entry_t *gone = NULL;
    while (l->adm_head != NULL && now_ms - l->adm_head->admitted_ms >= l->admit_ttl_ms) {
        entry_t *e = l->adm_head;
        kq_info("event=admission_reservation_expired pod=%s/%s uid=%s queue=%s user=%s msg=\"the API server "
                "never showed the pod admitted with a node; its reservation is released\"",
                e->pod.ns ? e->pod.ns : "-", e->pod.name ? e->pod.name : "-", e->uid, e->c.queue ? e->c.queue : "-",
                e->c.user ? e->c.user : "-");
        entry_t *f = uncount(l, e); /* releases, which ends the reservation */
        if (f != NULL) {
            f->hh.next = gone;
            gone = f;
        }
        if (n != NULL)
            (*n)++;
    }
    return gone;
}

static void free_chain(entry_t *gone)
{
    while (gone != NULL) {
        entry_t *e = gone;
        gone = e->hh.next;
        entry_free(e);
    }
}

static void crefs_drop(kq_ledger_t *l, entry_t *e);
static void claims_counted_changed(kq_ledger_t *l, entry_t *e);

/* Releases what the entry counted; the entry becomes PENDING (not counted). */
static void release(kq_ledger_t *l, entry_t *e)
{
    if (e->state == ST_PENDING)
        return;
    if (e->reserved) {
        e->reserved = false;
        l->n_reserved--;
    }
    adm_unlink(l, e);
    int rc = kq_ugm_decrease(l->ugm, e->c.queue, e->c.app, e->c.user, RV(e->c.req));
    if (rc == 0)
        fs_note(l, e->c.queue, e->c.user, RV(e->c.req), -1);
    if (rc != 0)
        kq_error("event=release_failed uid=%s queue=%s app=%s user=%s error=\"%s\"", e->uid, e->c.queue,
                 e->c.app, e->c.user, kq_strerror(rc));
    tree_release(l, e);
    counted_clear(&e->c);
    e->state = ST_PENDING;
    l->n_counted--;
    claims_counted_changed(l, e); /* its claims may go to another pod now */
    if (l->on_release != NULL)
        l->on_release(l->on_release_ud);
}

static void rs_clear(kq_ledger_t *l, entry_t *e);
static void charge_unnote(kq_ledger_t *l, entry_t *e);

/* Releases everything and removes the entry from the table (not freed). */
static void unlink_entry(kq_ledger_t *l, entry_t *e)
{
    rs_clear(l, e);
    charge_unnote(l, e);
    release(l, e);
    pending_drop(l, e);
    tree_sync(l, e, true);
    crefs_drop(l, e);
    HASH_DEL(l->table, e);
}

/* Ends what a bind or a reservation counted for the entry: one the watch reports again goes
 * back to PENDING, one known only from the bind or the reservation leaves the table (the
 * watch will report it again if it exists). Lock held; returns the entry to free after
 * unlocking, or NULL. */
static entry_t *uncount(kq_ledger_t *l, entry_t *e)
{
    release(l, e);
    if (!e->observed) {
        unlink_entry(l, e);
        return e;
    }
    pending_set(l, e, EPOD(&e->pod));
    tree_sync(l, e, false);
    return NULL;
}

/* The pod as the ugm's application ownership needs it (ugm.h). */
static kq_ugm_pod_t since_of(const kq_pod_t *pod)
{
    return (kq_ugm_pod_t){.created = pod->created > 0 ? pod->created : INT64_MAX, .uid = pod->uid,
                          .generated_app = !pod->app_named};
}

/* A pod whose queue could not be resolved is still admitted, in the root queue, when an
 * ElasticQuota governs it instead: it names no queue itself, no ACL refused it, and its quota
 * group (group, as resolved) is neither the default nor the system group, e.g. a pod of a
 * Koordinator quota by its label quota.scheduling.koordinator.sh/name or its namespace, in a
 * cluster whose queues.yaml has no queue for it (Koordinator knows no queues). */
static bool queueless_ok(const kq_pod_t *pod, const char *group)
{
    return pod->queue == NULL && !pod->queue_named && pod->queue_denial != KQ_DENIAL_ACL && group != NULL &&
           strcmp(group, KQ_QTREE_DEFAULT) != 0 && strcmp(group, KQ_QTREE_SYSTEM) != 0;
}

/* Counts a pod the API server shows bound (unchecked). On failure the entry stays
 * PENDING and the next event retries. */
static void count_bound(kq_ledger_t *l, entry_t *e, const kq_pod_t *pod)
{
    counted_t c;
    if (counted_from_pod(&c, pod) != 0) {
        kq_error("event=count_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name, pod->uid);
        return;
    }
    if (pod->queue == NULL && !queueless_ok(pod, pod->quota_group))
        kq_warn("event=count_in_root pod=%s/%s uid=%s node=%s reason=\"%s\" msg=\"bound pod has no valid "
                "queue; counting it against root\"", pod->ns, pod->name, pod->uid, pod->node,
                pod->queue_error ? pod->queue_error : "no queue");
    kq_user_t u = counted_user(&c);
    kq_ugm_pod_t since = since_of(pod);
    int rc = kq_ugm_add_unchecked_pod(l->ugm, c.queue, c.app, &u, RV(c.req), &since);
    if (rc == KQ_EINVAL && strcmp(c.queue, "root") != 0) {
        kq_warn("event=count_in_root pod=%s/%s uid=%s queue=%s msg=\"engine rejected the queue; counting "
                "the bound pod against root\"", pod->ns, pod->name, pod->uid, c.queue);
        char *root = strdup("root");
        if (root != NULL) {
            free(c.queue);
            c.queue = root;
            rc = kq_ugm_add_unchecked_pod(l->ugm, c.queue, c.app, &u, RV(c.req), &since);
        }
    }
    if (rc != 0) {
        kq_error("event=count_failed pod=%s/%s uid=%s queue=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 c.queue, kq_strerror(rc));
        counted_clear(&c);
        return;
    }
    fs_note(l, c.queue, c.user, RV(c.req), +1);
    tree_count(l, e, &c, pod);
    pending_drop(l, e);
    e->c = c;
    e->state = ST_BOUND;
    l->n_counted++;
    claims_counted_changed(l, e);
    kq_debug("event=counted pod=%s/%s uid=%s queue=%s user=%s by=watch", pod->ns, pod->name, pod->uid,
             e->c.queue, e->c.user);
}

/* In-place resize of a counted pod: count the new request `to` (unchecked), then release
 * the old one, under the identity it was counted with. */
static void resize(kq_ledger_t *l, entry_t *e, const kq_pod_t *pod, const kq_resource_t *to)
{
    if (rpack_equal(e->c.req, to))
        return;
    rpack_t *req = NULL;
    if (rpack_set(&req, to) != 0) {
        kq_error("event=resize_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name, pod->uid);
        return;
    }
    bool tree = l->qt != NULL && e->c.group != NULL;
    int rc;
    if (tree && (rc = kq_qtree_used_add(l->qt, e->c.group, to, e->c.np)) != 0) {
        kq_error("event=resize_failed pod=%s/%s uid=%s group=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 e->c.group, kq_strerror(rc));
        free(req);
        return;
    }
    kq_user_t u = counted_user(&e->c);
    rc = kq_ugm_add_unchecked(l->ugm, e->c.queue, e->c.app, &u, to);
    if (rc != 0) {
        kq_error("event=resize_failed pod=%s/%s uid=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 kq_strerror(rc));
        if (tree && kq_qtree_used_sub(l->qt, e->c.group, to, e->c.np) != 0)
            kq_error("event=resize_undo_failed pod=%s/%s uid=%s", pod->ns, pod->name, pod->uid);
        free(req);
        return;
    }
    fs_note(l, e->c.queue, e->c.user, to, +1);
    rc = kq_ugm_decrease(l->ugm, e->c.queue, e->c.app, e->c.user, RV(e->c.req));
    if (rc == 0)
        fs_note(l, e->c.queue, e->c.user, RV(e->c.req), -1);
    if (rc != 0)
        kq_error("event=resize_release_failed pod=%s/%s uid=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 kq_strerror(rc));
    if (tree)
        tree_release(l, e);
    free(e->c.req);
    e->c.req = req;
    kq_debug("event=resized pod=%s/%s uid=%s", pod->ns, pod->name, pod->uid);
}


/* ---- resize reservations (lock held) ----
 *
 * kq_ledger_check_resize admits a resize before the API server stores it: the growth of a
 * counted pod is committed then (so that two resizes admitted one after the other see each
 * other), and the entry remembers the request admitted (rs_req) until the watch shows it.
 * Meanwhile the pod counts with at least that request: a watch event that still shows the
 * old request does not take the growth back, and a pod counted later (the gate's
 * reservation, a bind) is counted with it. A resize the watch never shows (refused after
 * kubequota admitted it: another webhook, validation, a dry run) ends after the TTL. */

/* Ends the entry's resize reservation (what it made counted stays: the caller recounts). */
static void rs_clear(kq_ledger_t *l, entry_t *e)
{
    if (e->rs_req == NULL)
        return;
    free(e->rs_req);
    e->rs_req = NULL;
    if (e->rs_prev != NULL)
        e->rs_prev->rs_next = e->rs_next;
    else
        l->resizing = e->rs_next;
    if (e->rs_next != NULL)
        e->rs_next->rs_prev = e->rs_prev;
    e->rs_prev = e->rs_next = NULL;
}

/* The entry's resize reservation becomes req, for the TTL. KQ_ENOMEM changes nothing. */
static int rs_set(kq_ledger_t *l, entry_t *e, const kq_resource_t *req)
{
    rpack_t *p = NULL;
    if (kq_resource_is_zero(req)) {
        rs_clear(l, e);
        return 0;
    }
    if (rpack_set(&p, req) != 0)
        return KQ_ENOMEM;
    if (e->rs_req == NULL) {
        e->rs_prev = NULL;
        e->rs_next = l->resizing;
        if (l->resizing != NULL)
            l->resizing->rs_prev = e;
        l->resizing = e;
    }
    free(e->rs_req);
    e->rs_req = p;
    e->rs_until_ms = mono_ms() + l->resize_ttl_ms;
    if (e->rs_until_ms < l->rs_next_ms)
        l->rs_next_ms = e->rs_until_ms;
    return 0;
}

/* True when req is at least the entry's resize reservation in every resource: the watch
 * shows the resize. */
static bool rs_shown(const entry_t *e, const kq_resource_t *req)
{
    if (e->rs_req == NULL)
        return true;
    kq_resource_t over = KQ_RESOURCE_EMPTY;
    if (kq_resource_copy(&over, RV(e->rs_req)) != 0)
        return false;
    (void)kq_resource_sub(&over, req);
    bool shown = kq_resource_is_zero(&over);
    kq_resource_free(&over);
    return shown;
}

/* *out (an initialised set) = req raised to the entry's resize reservation (e may be NULL):
 * the request the pod counts with. 0 or KQ_ENOMEM. */
static int with_rs(const entry_t *e, const kq_resource_t *req, kq_resource_t *out)
{
    int rc = kq_resource_copy(out, req);
    if (rc == 0 && e != NULL && e->rs_req != NULL)
        rc = kq_resource_max(out, RV(e->rs_req));
    return rc;
}

/* Ends the resize reservations whose time is up; a counted pod goes back to the request
 * its facts show. O(resize reservations), and nothing until the earliest one is due. */
static void rs_sweep(kq_ledger_t *l)
{
    if (l->resizing == NULL)
        return;
    int64_t now = mono_ms(), next = INT64_MAX;
    if (now < l->rs_next_ms)
        return;
    for (entry_t *e = l->resizing, *n; e != NULL; e = n) {
        n = e->rs_next;
        if (now < e->rs_until_ms) {
            if (e->rs_until_ms < next)
                next = e->rs_until_ms;
            continue;
        }
        kq_info("event=resize_reservation_expired pod=%s/%s uid=%s msg=\"the watch never showed the admitted "
                "resize; the pod counts with the request it shows\"", e->pod.ns ? e->pod.ns : "-",
                e->pod.name ? e->pod.name : "-", e->uid);
        rs_clear(l, e);
        if (e->state != ST_PENDING) {
            resize(l, e, EPOD(&e->pod), RV(e->pod.request));
            tree_sync(l, e, false);
        }
    }
    l->rs_next_ms = next;
}

/* A counted entry's request grows to cover `want` (per resource, the larger of what it is
 * counted with and want), checked against the queue, application, user and quota group it
 * is counted in, and committed under the ledger lock, so that growths (and binds) are
 * checked one after the other and never pass a limit together. The quota group's request
 * takes the growth before the check: a group's runtime follows its request, and a growth
 * not yet in it would be held to a runtime that leaves it out. commit false: only the
 * check (filter). *grew (may be NULL): something grew (was committed). 0 (also when
 * nothing grows), KQ_EDENIED with the reason, KQ_ENOMEM. */
static int grow_locked(kq_ledger_t *l, entry_t *e, const kq_resource_t *want, bool commit, bool *grew,
                       char *reason, size_t reason_len, kq_denial_t *kind)
{
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (grew != NULL)
        *grew = false;
    kq_resource_t up = KQ_RESOURCE_EMPTY, to = KQ_RESOURCE_EMPTY; /* freed at out */
    rpack_t *to_p = NULL;
    bool tree = l->qt != NULL && e->c.group != NULL, req_in = false, used_in = false, done = false;
    int rc = kq_resource_copy(&up, want);
    if (rc != 0)
        goto out;
    (void)kq_resource_sub(&up, RV(e->c.req)); /* clamped at 0: what grows */
    if (kq_resource_is_zero(&up))
        goto out;
    if (commit && (kq_resource_copy(&to, RV(e->c.req)) != 0 || kq_resource_max(&to, want) != 0 ||
                   rpack_set(&to_p, &to) != 0)) {
        rc = KQ_ENOMEM;
        goto out;
    }
    kq_user_t u = counted_user(&e->c);
    /* counted already, in its own user's entry of the application: not a join, so the
     * application's owner is not asked again (a pod counted unchecked beside another user's
     * may still grow within its own limits), nor its queue's ACLs */
    kq_ugm_pod_t counted = {.created = INT64_MAX, .uid = e->uid, .generated_app = true, .counted = true};
    rc = kq_ugm_check_pod(l->ugm, e->c.queue, e->c.app, &u, &up, &counted, reason, reason_len, kind);
    if (rc != 0)
        goto out;
    if (tree) {
        req_in = kq_qtree_request_add(l->qt, e->c.group, &up) == 0;
        rc = commit ? kq_qtree_assume(l->qt, e->c.group, &up, e->c.np, reason, reason_len, kind)
                    : kq_qtree_check(l->qt, e->c.group, &up, e->c.np, reason, reason_len, kind);
        used_in = commit && rc == 0;
        if (rc == KQ_ENOENT) { /* the group is gone: the pod is being moved to the default group */
            rc = 0;
            kq_denial_set(kind, KQ_DENIAL_NONE);
        }
        if (rc != 0)
            goto out;
    }
    if (!commit) /* checked only: without a tree too */
        goto out;
    /* the ugm (checked above, under the ledger lock that every commit takes): the grown
     * request is counted, then the old one released, as a resize seen by the watch is */
    rc = kq_ugm_add_unchecked(l->ugm, e->c.queue, e->c.app, &u, &to);
    if (rc != 0)
        goto out;
    fs_note(l, e->c.queue, e->c.user, &to, +1);
    if (kq_ugm_decrease(l->ugm, e->c.queue, e->c.app, e->c.user, RV(e->c.req)) == 0)
        fs_note(l, e->c.queue, e->c.user, RV(e->c.req), -1);
    else
        kq_error("event=resize_release_failed uid=%s queue=%s", e->uid, e->c.queue);
    /* the group's used: the grown request as one allocation, as the ugm's (the growth
     * assumed above goes at out: its check is done, and used never dips meanwhile) */
    if (used_in && kq_qtree_used_add(l->qt, e->c.group, &to, e->c.np) == 0)
        tree_release(l, e);
    else if (used_in)
        used_in = false; /* (keeps the growth as an allocation of its own; logged by the tree) */
    free(e->c.req);
    e->c.req = to_p;
    to_p = NULL;
    done = true;
    if (grew != NULL)
        *grew = true;
out:
    if (used_in && kq_qtree_used_sub(l->qt, e->c.group, &up, e->c.np) != 0)
        kq_error("event=resize_undo_failed uid=%s group=%s", e->uid, e->c.group);
    if (req_in && kq_qtree_request_sub(l->qt, e->c.group, &up) != 0)
        kq_error("event=resize_undo_failed uid=%s group=%s", e->uid, e->c.group);
    if (done)
        tree_sync(l, e, false); /* the entry's share of the group's request: the grown request */
    kq_resource_free(&up);
    kq_resource_free(&to);
    free(to_p);
    return rc;
}

static entry_t *entry_new(const char *uid)
{
    entry_t *e = calloc(1, sizeof(*e));
    if (e == NULL || (e->uid = strdup(uid)) == NULL) {
        free(e);
        return NULL;
    }
    e->born = mono_s();
    return e;
}

/* The pod's quota group from the resolver, as a new string in copy->quota_group (no lock
 * held). Nothing when no tree is wired or the pod is not in the tree. */
static int resolve_into(kq_ledger_t *l, const kq_pod_t *pod, kq_pod_t *copy)
{
    free(copy->quota_group);
    copy->quota_group = NULL;
    if (l->qt == NULL || l->resolve == NULL)
        return 0;
    char g[KQ_QTREE_NAME_MAX + 1];
    if (l->resolve(l->resolve_ud, pod, g, sizeof(g)) != 0)
        return 0;
    copy->quota_group = strdup(g);
    return copy->quota_group ? 0 : KQ_ENOMEM;
}

/* ---- DRA ResourceClaims (lock held) ----
 *
 * A pod's charge is its containers' request plus, for each ResourceClaim it uses, the
 * devices the claim table says the claim is charged now (what it may take, then what was
 * allocated), when the pod is the claim's charged pod. A claim used by several pods is
 * charged once: to the first *counted* pod that uses it (cref_t.owner) in the order of the
 * claim's status.reservedFor (kube-scheduler appends each pod it binds, so the pod that
 * had the claim first keeps it while it lives), then by creationTimestamp, then uid (pods
 * not reserved yet: the watch of the claim lags, or no scheduler reserved it). A pod is
 * always charged as if it were counted: a pod not counted yet is charged the claim when it
 * would come before the claim's owner or the claim has no owner, so that whoever counts it
 * (bind, the gate, the watch) checks what counting it would add, and two pods sharing a
 * claim never both escape it; a pod joining a claim another counted pod holds costs no
 * devices. When the owner changes (a
 * pod is counted or released, a pod appears or goes) or the claim does
 * (kq_ledger_claim_changed), every pod of the claim is recharged: a counted pod's usage
 * moves unchecked, like an in-place resize (reality is never refused), a pending pod's
 * pending request follows. Each step reads only the present (pods, claims, who is counted),
 * so the order of claim and pod events does not show in the result, and a restart gives
 * the same owners. A claim the table does not know (not created yet, deleted) is charged
 * nothing and makes the pod "waiting for its ResourceClaim" at filter, bind and the gate. */

static int64_t created_key(int64_t created)
{
    return created > 0 ? created : INT64_MAX;
}

/* Whether a pod (created, uid) comes before the entry o for the claim ns/name: first the
 * pods in the claim's status.reservedFor, in its order (kube-scheduler appends a pod when it
 * binds it, so the pod that has the claim first keeps it), then the others by
 * creationTimestamp, then uid. */
static bool before(kq_ledger_t *l, const char *ns, const char *name, int64_t created, const char *uid,
                   const entry_t *o)
{
    unsigned long ra = (unsigned long)kq_claims_reserved_index(l->claims, ns, name, uid);
    unsigned long rb = (unsigned long)kq_claims_reserved_index(l->claims, ns, name, o->uid);
    if (ra != rb)
        return ra < rb; /* -1 (not reserved) is the largest */
    int64_t a = created_key(created), b = created_key(o->pod.created);
    return a < b || (a == b && strcmp(uid, o->uid) < 0);
}

static bool claim_key(char *buf, size_t len, const char *ns, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", ns ? ns : "default", name);
    return n > 0 && (size_t)n < len;
}

#define CLAIM_KEY_MAX 512

/* Whether claims[i] already occurred earlier in the list (a claim used twice is one). */
static bool claim_repeat(char *const *claims, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (claims[j] != NULL && strcmp(claims[j], claims[i]) == 0)
            return true;
    return false;
}

/* *out = base + the devices of the pod's claims it is charged (see above). self: the pod's
 * entry, or NULL for a pod the ledger does not know. *missing (may be NULL): the first claim
 * the table does not know ("" for a template's claim not generated yet), else NULL. 0 or
 * KQ_ENOMEM / KQ_ERANGE. */
static int charge_locked(kq_ledger_t *l, const entry_t *self, const kq_pod_t *pod, const kq_resource_t *base,
                         kq_resource_t *out, const char **missing)
{
    if (missing != NULL)
        *missing = NULL;
    int rc = kq_resource_copy(out, base);
    for (size_t i = 0; rc == 0 && i < pod->n_claims; i++) {
        const char *name = pod->claims[i];
        if (name == NULL) {
            if (missing != NULL && *missing == NULL)
                *missing = "";
            continue;
        }
        if (claim_repeat(pod->claims, i))
            continue;
        char key[CLAIM_KEY_MAX];
        cref_t *cr = NULL;
        if (claim_key(key, sizeof(key), pod->ns, name))
            HASH_FIND_STR(l->crefs, key, cr);
        const entry_t *owner = cr != NULL ? cr->owner : NULL;
        bool owns = owner == NULL || owner == self ||
                    before(l, pod->ns, name, pod->created, pod->uid ? pod->uid : "", owner);
        kq_resource_t dev = KQ_RESOURCE_EMPTY;
        int d = kq_claims_devices(l->claims, pod->ns, name, &dev);
        if (d == KQ_ENOENT) {
            if (missing != NULL && *missing == NULL)
                *missing = name;
        } else if (d != 0) {
            rc = d;
        } else if (owns) {
            rc = kq_resource_add(out, &dev);
        }
        kq_resource_free(&dev);
    }
    return rc;
}

static void cref_remove(kq_ledger_t *l, cref_t *cr, entry_t *e)
{
    for (size_t i = 0; i < cr->n; i++)
        if (cr->pods[i] == e) {
            cr->pods[i] = cr->pods[--cr->n];
            break;
        }
}

/* The earliest-created counted entry of the claim, or NULL. O(pods of the claim). */
static entry_t *cref_min(kq_ledger_t *l, const cref_t *cr)
{
    entry_t *m = NULL;
    char key[CLAIM_KEY_MAX];
    snprintf(key, sizeof(key), "%s", cr->key);
    key[cr->ns_len] = '\0';
    const char *ns = key, *name = key + cr->ns_len + 1;
    for (size_t i = 0; i < cr->n; i++) {
        entry_t *x = cr->pods[i];
        if (x->state != ST_PENDING && (m == NULL || before(l, ns, name, x->pod.created, x->uid, m)))
            m = x;
    }
    return m;
}

static void recharge(kq_ledger_t *l, entry_t *e);

/* Metering: the entry's charge moved while counted; the hook is told at the next
 * kq_ledger_flush_charges. O(1); nothing when no hook is set. */
static void charge_note(kq_ledger_t *l, entry_t *e)
{
    if (l->charge_fn == NULL || e->ch_noted)
        return;
    e->ch_noted = true;
    e->ch_prev = NULL;
    e->ch_next = l->ch_head;
    if (l->ch_head != NULL)
        l->ch_head->ch_prev = e;
    l->ch_head = e;
    atomic_fetch_add(&l->n_ch, 1);
}

static void charge_unnote(kq_ledger_t *l, entry_t *e)
{
    if (!e->ch_noted)
        return;
    if (e->ch_prev != NULL)
        e->ch_prev->ch_next = e->ch_next;
    else
        l->ch_head = e->ch_next;
    if (e->ch_next != NULL)
        e->ch_next->ch_prev = e->ch_prev;
    e->ch_prev = e->ch_next = NULL;
    e->ch_noted = false;
    atomic_fetch_sub(&l->n_ch, 1);
}

/* Whether two pods' facts name the same claims (the watch shows most pods again and again). */
static bool claims_same(const spod_t *a, const spod_t *b)
{
    if (a->n_claims != b->n_claims || (a->n_claims > 0 && (a->ns == NULL || b->ns == NULL || strcmp(a->ns, b->ns) != 0)))
        return false;
    for (size_t i = 0; i < a->n_claims; i++)
        if ((a->claims[i] == NULL) != (b->claims[i] == NULL) ||
            (a->claims[i] != NULL && strcmp(a->claims[i], b->claims[i]) != 0))
            return false;
    return true;
}

/* Sets the claim's owner from its pods; when it changed, recharges every pod of the claim
 * but `skip` (whose own charge does not depend on its own state). */
static void cref_settle(kq_ledger_t *l, cref_t *cr, entry_t *skip)
{
    entry_t *m = cref_min(l, cr);
    if (m == cr->owner)
        return;
    cr->owner = m;
    for (size_t i = 0; i < cr->n; i++)
        if (cr->pods[i] != skip)
            recharge(l, cr->pods[i]);
}

/* The entry stops using its claims (before its facts change or it goes). */
static void crefs_drop(kq_ledger_t *l, entry_t *e)
{
    for (size_t i = 0; i < e->pod.n_claims; i++) {
        char key[CLAIM_KEY_MAX];
        cref_t *cr = NULL;
        if (e->pod.claims[i] == NULL || claim_repeat(e->pod.claims, i) ||
            !claim_key(key, sizeof(key), e->pod.ns, e->pod.claims[i]))
            continue;
        HASH_FIND_STR(l->crefs, key, cr);
        if (cr == NULL)
            continue;
        cref_remove(l, cr, e);
        if (cr->n == 0) {
            HASH_DEL(l->crefs, cr);
            free(cr->pods);
            free(cr);
        } else {
            cref_settle(l, cr, e);
        }
    }
}

/* The entry uses its claims (after its facts were set). */
static void crefs_add(kq_ledger_t *l, entry_t *e)
{
    for (size_t i = 0; i < e->pod.n_claims; i++) {
        char key[CLAIM_KEY_MAX];
        cref_t *cr = NULL;
        if (e->pod.claims[i] == NULL || claim_repeat(e->pod.claims, i) ||
            !claim_key(key, sizeof(key), e->pod.ns, e->pod.claims[i]))
            continue;
        HASH_FIND_STR(l->crefs, key, cr);
        if (cr == NULL) {
            size_t kl = strlen(key);
            if ((cr = calloc(1, sizeof(*cr) + kl + 1)) == NULL)
                goto nomem;
            memcpy(cr->key, key, kl + 1);
            cr->ns_len = strlen(e->pod.ns);
            HASH_ADD_STR(l->crefs, key, cr);
        }
        if (cr->n == cr->cap) {
            size_t cap = cr->cap ? cr->cap * 2 : 2;
            entry_t **p = realloc(cr->pods, cap * sizeof(*p));
            if (p == NULL)
                goto nomem;
            cr->pods = p;
            cr->cap = cap;
        }
        cr->pods[cr->n++] = e;
        cref_settle(l, cr, e);
        continue;
    nomem:
        kq_error("event=claim_ref_failed uid=%s claim=%s error=\"out of memory\"", e->uid, key);
    }
}

/* The entry's facts were just set from a pod (their request is its containers' request):
 * that request becomes the base and the facts' request the full charge. refs: the entry
 * starts using its claims (crefs_add; false when the facts it replaced named the same
 * claims). Nothing is told to the engine: the caller counts with the facts' request. */
static void facts_set(kq_ledger_t *l, entry_t *e, bool refs)
{
    free(e->base);
    e->base = NULL;
    if (e->pod.n_claims == 0 || l->claims == NULL)
        return;
    e->base = e->pod.request;
    e->pod.request = NULL;
    if (refs)
        crefs_add(l, e);
    kq_resource_t full = KQ_RESOURCE_EMPTY;
    if (charge_locked(l, e, EPOD(&e->pod), RV(e->base), &full, NULL) != 0 || rpack_set(&e->pod.request, &full) != 0) {
        kq_error("event=claim_charge_failed uid=%s error=\"out of memory\"", e->uid);
        (void)rpack_set(&e->pod.request, RV(e->base));
    }
    kq_resource_free(&full);
}

/* Computes the entry's charge again and moves what it counts or has pending to it. */
static void recharge(kq_ledger_t *l, entry_t *e)
{
    if (e->pod.n_claims == 0 || l->claims == NULL)
        return;
    kq_resource_t full = KQ_RESOURCE_EMPTY, want = KQ_RESOURCE_EMPTY;
    if (charge_locked(l, e, EPOD(&e->pod), RV(e->base), &full, NULL) != 0) {
        kq_error("event=claim_charge_failed uid=%s error=\"out of memory\"", e->uid);
        goto out;
    }
    if (rpack_equal(e->pod.request, &full) || rpack_set(&e->pod.request, &full) != 0)
        goto out;
    const kq_pod_t *ep = EPOD(&e->pod);
    if (e->state != ST_PENDING) {
        if (with_rs(e, &full, &want) == 0)
            resize(l, e, ep, &want);
        charge_note(l, e);
        char f[256];
        kq_resource_format(&full, f, sizeof(f));
        kq_info("event=claim_charge_moved pod=%s/%s uid=%s state=%s charge=\"%s\" msg=\"the devices of its "
                "ResourceClaims changed (allocated, deallocated, shared, created or deleted)\"", ep->ns, ep->name,
                e->uid, state_names[e->state], f);
    } else if (e->observed && ep->node == NULL) {
        pending_set(l, e, ep);
    }
    tree_sync(l, e, false);
out:
    kq_resource_free(&full);
    kq_resource_free(&want);
}

/* After the entry's counted state changed: the owners of its claims may change. */
static void claims_counted_changed(kq_ledger_t *l, entry_t *e)
{
    for (size_t i = 0; i < e->pod.n_claims && l->crefs != NULL; i++) {
        char key[CLAIM_KEY_MAX];
        cref_t *cr = NULL;
        if (e->pod.claims[i] == NULL || claim_repeat(e->pod.claims, i) ||
            !claim_key(key, sizeof(key), e->pod.ns, e->pod.claims[i]))
            continue;
        HASH_FIND_STR(l->crefs, key, cr);
        if (cr != NULL)
            cref_settle(l, cr, e);
    }
}

/* The pod's charge for a check (filter, bind, the gate, admission): *out = its containers'
 * request plus its claims' devices (as if counted). 0; KQ_EDENIED with "waiting for its
 * ResourceClaim" when a claim is not known (missing_ok false); KQ_ENOMEM. */
static int check_charge_locked(kq_ledger_t *l, const entry_t *self, const kq_pod_t *pod, bool missing_ok,
                               kq_resource_t *out, char *reason, size_t reason_len, kq_denial_t *kind)
{
    const char *missing = NULL;
    int rc = charge_locked(l, self, pod, &pod->request, out, &missing);
    if (rc != 0 || missing == NULL || missing_ok)
        return rc;
    if (reason != NULL && reason_len > 0) {
        if (missing[0] == '\0')
            snprintf(reason, reason_len, "waiting for its ResourceClaim: the claim of its template is not "
                     "created yet");
        else
            snprintf(reason, reason_len, "waiting for its ResourceClaim %s/%s", pod->ns, missing);
    }
    kq_denial_set(kind, KQ_DENIAL_OVER_LIMIT); /* transient: the claim appears */
    return KQ_EDENIED;
}

/* ---- re-resolution (lock held) ---- */

/* Level-triggered resolution: asks the resolver again for the entry's pod and, when the
 * answer differs from what the entry holds, moves the entry in one step: its pod's group
 * (so its request follows, through tree_sync) and, when counted, its used (and
 * non-preemptible used) from the group it was counted in to the new one, unchecked, as
 * Koordinator's migrateDefaultQuotaGroupsPod moves a running pod's used (a pod that
 * runs is reality, never refused). A new group that is gone or a parent means the default
 * group, as tree_count decides for a bound pod. true when something moved. */
static bool reresolve_entry(kq_ledger_t *l, entry_t *e)
{
    char g[KQ_QTREE_NAME_MAX + 1];
    const kq_pod_t *pod = EPOD(&e->pod);
    const char *want = l->resolve(l->resolve_ud, pod, g, sizeof(g)) == 0 ? g : NULL;
    bool moved = false;
    if (!(want == NULL ? e->pod.quota_group == NULL
                       : e->pod.quota_group != NULL && strcmp(e->pod.quota_group, want) == 0)) {
        char *ng = want != NULL ? strdup(want) : NULL;
        if (want != NULL && ng == NULL) {
            kq_error("event=reresolve_failed uid=%s error=\"out of memory\"", e->uid);
            return false;
        }
        free(e->pod.quota_group);
        e->pod.quota_group = ng;
        moved = true;
    }
    if (e->state != ST_PENDING && e->c.group != NULL && want != NULL) {
        bool parent = false;
        const char *to = kq_qtree_lookup(l->qt, want, &parent) && !parent ? want : KQ_QTREE_DEFAULT;
        if (strcmp(to, e->c.group) != 0) {
            char *ng = strdup(to);
            int rc = ng == NULL ? KQ_ENOMEM : kq_qtree_used_add(l->qt, to, RV(e->c.req), e->c.np);
            if (rc != 0) {
                kq_error("event=reresolve_failed pod=%s/%s uid=%s from=%s to=%s error=\"%s\"", pod->ns, pod->name,
                         e->uid, e->c.group, to, kq_strerror(rc));
                free(ng);
            } else {
                if (kq_qtree_used_sub(l->qt, e->c.group, RV(e->c.req), e->c.np) != 0)
                    kq_error("event=quota_release_failed uid=%s group=%s", e->uid, e->c.group);
                kq_info("event=pod_moved pod=%s/%s uid=%s from=%s to=%s state=%s msg=\"its quota group changed; "
                        "its request and used moved with it\"", pod->ns, pod->name, e->uid, e->c.group, to,
                        state_names[e->state]);
                free(e->c.group);
                e->c.group = ng;
                moved = true;
            }
        }
    } else if (moved && e->state == ST_PENDING) {
        kq_debug("event=pod_moved pod=%s/%s uid=%s to=%s state=pending", pod->ns, pod->name, e->uid,
                 want ? want : "-");
    }
    tree_sync(l, e, false);
    return moved;
}

/* After a resolution made with no lock held (gen read before it): when a re-resolution
 * ran in between, the answer may be stale; ask again under the lock. */
static void reresolve_if_stale(kq_ledger_t *l, entry_t *e, uint64_t gen)
{
    if (e != NULL && l->qt != NULL && l->resolve != NULL && atomic_load(&l->resolve_gen) != gen)
        (void)reresolve_entry(l, e);
}

/* ---- in-flight preemption (lock held unless said otherwise) ---- */

/* Frees a record that is in no table (no lock needed). */
static void inflight_destroy(inflight_t *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_nodes; i++)
        free(r->node[i]);
    for (size_t i = 0; i < r->n_victims; i++)
        free(r->victim[i]);
    free(r->node);
    free(r->first);
    free(r->victim);
    free(r->uid);
    free(r);
}

/* Takes the record out of the table and clears its claims; the caller destroys it. */
static void inflight_unlink(kq_ledger_t *l, inflight_t *r)
{
    for (size_t i = 0; i < r->n_victims; i++) {
        entry_t *e;
        HASH_FIND_STR(l->table, r->victim[i], e);
        if (e != NULL && e->claim == r)
            e->claim = NULL;
    }
    HASH_DEL(l->inflight, r);
    l->n_inflight--;
}

static void inflight_drop(kq_ledger_t *l, inflight_t *r)
{
    inflight_unlink(l, r);
    inflight_destroy(r);
}

/* The pod's record, unless expired (an expired one is dropped). */
static inflight_t *inflight_live(kq_ledger_t *l, const char *uid, int64_t now)
{
    inflight_t *r;
    HASH_FIND_STR(l->inflight, uid, r);
    if (r != NULL && now >= r->until_ms) {
        inflight_drop(l, r);
        r = NULL;
    }
    return r;
}

/* The record's victim i, when it is still to be discounted: counted, claimed by r, in
 * `group` (NULL: any) and bound to r's node `ni`. */
static const entry_t *inflight_victim(kq_ledger_t *l, const inflight_t *r, size_t ni, size_t i, const char *group)
{
    entry_t *e;
    HASH_FIND_STR(l->table, r->victim[i], e);
    if (e == NULL || e->state == ST_PENDING || e->claim != r || e->c.group == NULL || e->pod.node == NULL ||
        strcmp(e->pod.node, r->node[ni]) != 0 || (group != NULL && strcmp(e->c.group, group) != 0))
        return NULL;
    return e;
}

/* Sums into *out (an initialised set) the usage of the victims of the pod's in-flight
 * preemption on `node` that are still counted in `group`; and into *others (may be NULL)
 * those counted in other scheduler-plugins groups when `group` is one too (its
 * cross-namespace preemption: they lower only the sum of what those groups use). 0
 * (nothing when there is no live record or no such victim) or KQ_ENOMEM. */
static int inflight_discount(kq_ledger_t *l, const char *uid, const char *node, const char *group,
                             kq_resource_t *out, kq_resource_t *others)
{
    if (node == NULL || group == NULL || l->inflight == NULL)
        return 0;
    inflight_t *r = inflight_live(l, uid, mono_ms());
    bool sp = false;
    if (r != NULL && others != NULL && l->qt != NULL)
        (void)kq_qtree_sp_over_min(l->qt, group, NULL, &sp);
    for (size_t ni = 0; r != NULL && ni < r->n_nodes; ni++) {
        if (strcmp(r->node[ni], node) != 0)
            continue;
        for (size_t i = r->first[ni]; i < r->first[ni + 1]; i++) {
            const entry_t *e = inflight_victim(l, r, ni, i, NULL);
            bool vsp = false;
            if (e == NULL)
                continue;
            if (strcmp(e->c.group, group) == 0) {
                if (kq_resource_add(out, RV(e->c.req)) != 0)
                    return KQ_ENOMEM;
            } else if (sp && (kq_qtree_sp_over_min(l->qt, e->c.group, NULL, &vsp), vsp) &&
                       kq_resource_add(others, RV(e->c.req)) != 0) {
                return KQ_ENOMEM;
            }
        }
    }
    return 0;
}

/* True while some victim of r is still counted and claimed by it. */
static bool inflight_pending(kq_ledger_t *l, const inflight_t *r)
{
    for (size_t ni = 0; ni < r->n_nodes; ni++)
        for (size_t i = r->first[ni]; i < r->first[ni + 1]; i++)
            if (inflight_victim(l, r, ni, i, NULL) != NULL)
                return true;
    return false;
}

static void inflight_drop_uid(kq_ledger_t *l, const char *uid)
{
    inflight_t *r;
    if (l->inflight == NULL)
        return;
    HASH_FIND_STR(l->inflight, uid, r);
    if (r != NULL)
        inflight_drop(l, r);
}

/* ---------------------------------------------------------------------------------- */
/* public API                                                                          */

kq_ledger_t *kq_ledger_new(kq_ugm_t *ugm, const char *scheduler_name)
{
    kq_ledger_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    if (scheduler_name != NULL && (l->scheduler_name = strdup(scheduler_name)) == NULL) {
        free(l);
        return NULL;
    }
    if (pthread_mutex_init(&l->mu, NULL) != 0) {
        free(l->scheduler_name);
        free(l);
        return NULL;
    }
    if (pthread_mutex_init(&l->feed_mu, NULL) != 0) {
        pthread_mutex_destroy(&l->mu);
        free(l->scheduler_name);
        free(l);
        return NULL;
    }
    pthread_condattr_t ca;
    bool cv_ok = pthread_condattr_init(&ca) == 0;
    if (cv_ok) {
        cv_ok = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0 && pthread_cond_init(&l->seen_cv, &ca) == 0;
        pthread_condattr_destroy(&ca);
    }
    if (!cv_ok) {
        pthread_mutex_destroy(&l->feed_mu);
        pthread_mutex_destroy(&l->mu);
        free(l->scheduler_name);
        free(l);
        return NULL;
    }
    l->ugm = ugm;
    l->gen = 1;
    l->preempt_ttl_ms = KQ_LEDGER_PREEMPT_TTL_MS;
    l->resize_ttl_ms = KQ_LEDGER_RESIZE_TTL_MS;
    l->rs_next_ms = INT64_MAX;
    l->admit_ttl_ms = KQ_LEDGER_ADMIT_TTL_MS;
    return l;
}

/* Frees the table. The engine is not touched: usage stays as counted. */
void kq_ledger_free(kq_ledger_t *l)
{
    if (l == NULL)
        return;
    inflight_t *r, *rtmp;
    HASH_ITER(hh, l->inflight, r, rtmp) {
        HASH_DEL(l->inflight, r);
        inflight_destroy(r);
    }
    entry_t *e, *tmp;
    HASH_ITER(hh, l->table, e, tmp) {
        HASH_DEL(l->table, e);
        entry_free(e);
    }
    cref_t *cr, *ctmp;
    HASH_ITER(hh, l->crefs, cr, ctmp) {
        HASH_DEL(l->crefs, cr);
        free(cr->pods);
        free(cr);
    }
    pthread_cond_destroy(&l->seen_cv);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->feed_mu);
    free(l->scheduler_name);
    free(l);
}

void kq_ledger_set_claims(kq_ledger_t *l, kq_claims_t *claims)
{
    pthread_mutex_lock(&l->mu);
    l->claims = claims;
    pthread_mutex_unlock(&l->mu);
}

size_t kq_ledger_claim_changed(kq_ledger_t *l, const char *ns, const char *name)
{
    char key[CLAIM_KEY_MAX];
    cref_t *cr = NULL;
    size_t n = 0;
    if (name == NULL || !claim_key(key, sizeof(key), ns, name))
        return 0;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->crefs, key, cr);
    if (cr != NULL) {
        n = cr->n;
        cr->owner = cref_min(l, cr); /* its reservedFor may have changed */
        for (size_t i = 0; i < cr->n; i++)
            recharge(l, cr->pods[i]);
        if (l->on_release != NULL) /* a pod waiting for this claim may fit now */
            l->on_release(l->on_release_ud);
    }
    pthread_mutex_unlock(&l->mu);
    return n;
}

void kq_ledger_set_charge_hook(kq_ledger_t *l, kq_ledger_charge_fn fn, void *ud)
{
    pthread_mutex_lock(&l->feed_mu); /* waits for a flush in flight: the old hook is not called after */
    pthread_mutex_lock(&l->mu);
    l->charge_fn = fn;
    l->charge_ud = ud;
    if (fn == NULL)
        while (l->ch_head != NULL)
            charge_unnote(l, l->ch_head);
    pthread_mutex_unlock(&l->mu);
    pthread_mutex_unlock(&l->feed_mu);
}

size_t kq_ledger_flush_charges(kq_ledger_t *l)
{
    if (atomic_load(&l->n_ch) == 0)
        return 0; /* the common case: one atomic load, no lock */
    pthread_mutex_lock(&l->feed_mu);
    pthread_mutex_lock(&l->mu);
    size_t n = atomic_load(&l->n_ch), k = 0;
    char **uids = n ? calloc(n, sizeof(*uids)) : NULL;
    kq_resource_t *charges = n ? calloc(n, sizeof(*charges)) : NULL;
    kq_ledger_charge_fn fn = l->charge_fn;
    void *ud = l->charge_ud;
    if (n > 0 && (uids == NULL || charges == NULL)) {
        kq_error("event=charge_flush_failed pods=%zu error=\"out of memory\" msg=\"metering is told at the next "
                 "flush\"", n);
        n = 0;
    }
    while (k < n && l->ch_head != NULL) {
        entry_t *e = l->ch_head;
        if (e->state != ST_PENDING) { /* a pod released since is ended by the informer */
            if ((uids[k] = strdup(e->uid)) == NULL || kq_resource_copy(&charges[k], RV(e->pod.request)) != 0) {
                free(uids[k]);
                uids[k] = NULL;
                kq_error("event=charge_flush_failed uid=%s error=\"out of memory\"", e->uid);
                break; /* this one and the rest stay noted */
            }
            k++;
        }
        charge_unnote(l, e);
    }
    pthread_mutex_unlock(&l->mu);
    for (size_t i = 0; i < k; i++) {
        if (fn != NULL)
            fn(ud, uids[i], &charges[i]);
        free(uids[i]);
        kq_resource_free(&charges[i]);
    }
    pthread_mutex_unlock(&l->feed_mu);
    free(uids);
    free(charges);
    return k;
}

int kq_ledger_with_charge(kq_ledger_t *l, const kq_pod_t *pod, void (*use)(void *ud, const kq_resource_t *charge),
                          void *ud)
{
    if (pod->n_claims == 0 || pod->uid == NULL) { /* no claims: the charge is its own request */
        use(ud, &pod->request);
        return 0;
    }
    kq_resource_t charge = KQ_RESOURCE_EMPTY;
    int rc = 0;
    bool known = false;
    pthread_mutex_lock(&l->feed_mu);
    pthread_mutex_lock(&l->mu);
    entry_t *e = NULL;
    HASH_FIND_STR(l->table, pod->uid, e);
    if (e != NULL) {
        rc = kq_resource_copy(&charge, RV(e->pod.request));
        known = rc == 0;
        if (known)
            charge_unnote(l, e); /* handed over now: the flush need not repeat it */
    }
    pthread_mutex_unlock(&l->mu);
    if (rc == 0)
        use(ud, known ? &charge : &pod->request);
    pthread_mutex_unlock(&l->feed_mu);
    kq_resource_free(&charge);
    return rc;
}

void kq_ledger_set_qtree(kq_ledger_t *l, kq_qtree_t *t, kq_ledger_resolve_fn resolve, void *ud)
{
    pthread_mutex_lock(&l->mu);
    l->qt = t;
    l->resolve = resolve;
    l->resolve_ud = ud;
    pthread_mutex_unlock(&l->mu);
}

static void set_reason(char *reason, size_t len, const char *fmt, const char *arg)
{
    if (reason != NULL && len > 0)
        snprintf(reason, len, fmt, arg);
}

void kq_ledger_note_pending(kq_ledger_t *l, const kq_pod_t *pod)
{
    if (pod == NULL || pod->uid == NULL || !is_ours(l, pod) || pod->node != NULL || kq_pod_is_terminal(pod))
        return;
    entry_t *e;
    uint64_t gen = atomic_load(&l->resolve_gen); /* before resolving, with no lock held */
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, pod->uid, e);
    kq_qtree_t *qt = l->qt;
    kq_ledger_resolve_fn resolve = l->resolve;
    void *resolve_ud = l->resolve_ud;
    pthread_mutex_unlock(&l->mu);
    char group[KQ_QTREE_NAME_MAX + 1];
    if (e != NULL || qt == NULL || resolve == NULL || resolve(resolve_ud, pod, group, sizeof(group)) != 0)
        return;
    entry_t *fresh = entry_new(pod->uid);
    kq_pod_t copy = {.n_groups = 0};
    if (fresh == NULL || kq_pod_copy(&copy, pod) != 0 || spod_take(&fresh->pod, &copy) != 0) {
        kq_pod_clear(&copy);
        entry_free(fresh);
        return;
    }
    free(fresh->pod.quota_group);
    if ((fresh->pod.quota_group = strdup(group)) == NULL) {
        entry_free(fresh);
        return;
    }
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, pod->uid, e);
    if (e == NULL) {
        HASH_ADD_KEYPTR(hh, l->table, fresh->uid, strlen(fresh->uid), fresh);
        facts_set(l, fresh, true);
        tree_sync(l, fresh, false);
        reresolve_if_stale(l, fresh, gen);
        fresh = NULL;
    }
    pthread_mutex_unlock(&l->mu);
    entry_free(fresh);
}

/* A pod without a queue is denied with why its queue could not be resolved. */
static int no_queue(const kq_pod_t *pod, char *reason, size_t reason_len, kq_denial_t *kind)
{
    set_reason(reason, reason_len, "%s", pod->queue_error ? pod->queue_error : "pod has no queue");
    kq_denial_set(kind, pod->queue_error != NULL && pod->queue_denial != KQ_DENIAL_NONE ? pod->queue_denial
                                                                                     : KQ_DENIAL_QUEUE_MISSING);
    return KQ_EDENIED;
}

/* Whether req alone is over a max the counted entry is held to (its queue's, user's or
 * group's, its quota group's): with it the pod could never fit. The reason into never. */
static bool never_fits_locked(kq_ledger_t *l, const entry_t *e, const kq_resource_t *req, char *never, size_t len)
{
    kq_denial_t k = KQ_DENIAL_NONE;
    kq_user_t u = counted_user(&e->c);
    kq_ugm_pod_t counted = {.created = INT64_MAX, .uid = e->uid, .generated_app = true, .counted = true};
    char r[512] = "";
    if (kq_ugm_check_pod(l->ugm, e->c.queue, e->c.app, &u, req, &counted, r, sizeof(r), &k) == KQ_EDENIED &&
        k == KQ_DENIAL_NEVER_FITS)
        goto never;
    /* the quota group's own max (kq_qtree_check reports its runtime first) */
    kq_qgroup_info_t i;
    if (l->qt != NULL && e->c.group != NULL && kq_qtree_info(l->qt, e->c.group, &i) == 0) {
        bool over = false;
        for (uint32_t n = 0; n < req->n; n++) {
            const kq_res_entry_t *x = &KQ_RES_E(req)[n];
            bool named = false;
            int64_t max = kq_resource_get(&i.max, x->name, &named);
            over = over || (named && x->value > max);
        }
        if (over) {
            char rq[160], mx[160];
            kq_resource_format(req, rq, sizeof(rq));
            kq_resource_format(&i.max, mx, sizeof(mx));
            snprintf(r, sizeof(r), "quota group %s: the request (%s) alone is over its max (%s)", e->c.group, rq,
                     mx);
        }
        kq_qtree_info_free(&i);
        if (over)
            goto never;
    }
    return false;
never:
    set_reason(never, len, "%s", r);
    return true;
}

/* kq_ledger_check_resize (commit) and kq_ledger_check_resize_dry (!commit: the same decision,
 * nothing counted, reserved or dropped). */
static int check_resize(kq_ledger_t *l, const kq_pod_t *pod, bool commit, char *reason, size_t reason_len,
                        kq_denial_t *kind)
{
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (pod == NULL || pod->uid == NULL)
        return KQ_EINVAL;
    int rc = 0;
    entry_t *e, *gone = NULL;
    pthread_mutex_lock(&l->mu);
    rs_sweep(l);
    HASH_FIND_STR(l->table, pod->uid, e);
    bool known = e != NULL, counted = e != NULL && e->state != ST_PENDING;
    pthread_mutex_unlock(&l->mu);
    if (!known)
        return 0; /* not ours, or not seen yet: whoever counts it checks what it then requests */
    if (!counted) {
        /* Waiting (at the gate, or for kube-scheduler): whoever counts it later checks the
         * new request then; only a request that can never fit is refused now. */
        kq_denial_t k = KQ_DENIAL_NONE;
        rc = kq_ledger_check(l, pod, reason, reason_len, &k);
        if (rc == KQ_EDENIED && k == KQ_DENIAL_NEVER_FITS) {
            kq_denial_set(kind, k);
            return rc;
        }
        if (rc != 0 && rc != KQ_EDENIED)
            return rc;
        rc = 0;
        set_reason(reason, reason_len, "%s", "");
    }
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, pod->uid, e);
    if (e == NULL)
        goto out;
    if (e->state == ST_PENDING) {
        /* the gate, a bind or the watch counts it with at least this request from now on */
        if (commit)
            rc = rs_set(l, e, &pod->request);
        goto out;
    }
    bool grew = false;
    rc = grow_locked(l, e, &pod->request, commit, &grew, reason, reason_len, kind);
    if (rc == 0 && !commit) {
        /* a dry run: checked, nothing counted */
    } else if (rc == 0 && (grew || e->rs_req != NULL)) {
        if (rs_set(l, e, &pod->request) != 0)
            kq_error("event=resize_reservation_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name,
                     pod->uid);
    } else if (rc == KQ_EDENIED && e->reserved && kq_pod_is_gated(pod) && !l->gate_only &&
               !never_fits_locked(l, e, &pod->request, NULL, 0)) {
        /* Released by the gate a moment ago, its gate removal still in flight: the pod has
         * not reached kube-scheduler. Its reservation, made for the old request, goes; the
         * pod is decided afresh with the new one (the watch reserves it, checked, once the
         * gate is gone; else filter and bind). */
        if (!commit) {
            rc = 0;
            set_reason(reason, reason_len, "%s", "");
            kq_denial_set(kind, KQ_DENIAL_NONE);
            goto out;
        }
        kq_info("event=reservation_dropped pod=%s/%s uid=%s reason=\"%s\" msg=\"resized while its gate was being "
                "removed, to a request that does not fit now; decided afresh\"", pod->ns, pod->name, pod->uid,
                reason);
        gone = uncount(l, e);
        if (gone == NULL && rs_set(l, e, &pod->request) != 0)
            kq_error("event=resize_reservation_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name,
                     pod->uid);
        rc = 0;
        set_reason(reason, reason_len, "%s", "");
        kq_denial_set(kind, KQ_DENIAL_NONE);
    } else if (rc == KQ_EDENIED && never_fits_locked(l, e, &pod->request, reason, reason_len)) {
        kq_denial_set(kind, KQ_DENIAL_NEVER_FITS);
    }
out:
    pthread_mutex_unlock(&l->mu);
    entry_free(gone);
    return rc;
}

int kq_ledger_check_resize(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                           kq_denial_t *kind)
{
    return check_resize(l, pod, true, reason, reason_len, kind);
}

int kq_ledger_check_resize_dry(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len,
                               kq_denial_t *kind)
{
    return check_resize(l, pod, false, reason, reason_len, kind);
}

bool kq_ledger_has_qtree(kq_ledger_t *l)
{
    pthread_mutex_lock(&l->mu);
    bool has = l->qt != NULL;
    pthread_mutex_unlock(&l->mu);
    return has;
}

int kq_ledger_check_ex(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len, bool *by_tree,
                       kq_denial_t *kind)
{
    return kq_ledger_check_on(l, pod, NULL, reason, reason_len, by_tree, kind);
}

int kq_ledger_check_on(kq_ledger_t *l, const kq_pod_t *pod, const char *node, char *reason, size_t reason_len,
                       bool *by_tree, kq_denial_t *kind)
{
    if (by_tree != NULL)
        *by_tree = false;
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (pod == NULL || pod->uid == NULL)
        return KQ_EINVAL;
    entry_t *e;
    int rc = 0;
    kq_resource_t eff = KQ_RESOURCE_EMPTY; /* the request with a resize admitted; freed at out */
    kq_resource_t full = KQ_RESOURCE_EMPTY; /* containers and claims; freed at out */
    kq_pod_t raised;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, pod->uid, e);
    bool counted = e != NULL && e->state != ST_PENDING;
    /* The pod's claims: one lookup each (a claim not known yet: waiting for it). */
    if (pod->n_claims > 0 && l->claims != NULL) {
        rc = check_charge_locked(l, e, pod, counted, &full, reason, reason_len, kind);
        if (rc != 0) {
            pthread_mutex_unlock(&l->mu);
            goto out;
        }
        raised = *pod;
        raised.request = full; /* borrowed: full outlives every use of raised */
        pod = &raised;
    }
    /* Counted already: only a growth since (a resize the counted request lacks) is checked;
     * not counted: with at least the request of a resize admitted for it. */
    if (counted)
        rc = grow_locked(l, e, &pod->request, false, NULL, reason, reason_len, kind);
    else if (e != NULL && e->rs_req != NULL && with_rs(e, &pod->request, &eff) == 0) {
        raised = *pod;
        raised.request = eff; /* borrowed: eff outlives every use of raised */
        pod = &raised;
    }
    kq_qtree_t *qt = l->qt;
    kq_ledger_resolve_fn resolve = l->resolve;
    void *resolve_ud = l->resolve_ud;
    pthread_mutex_unlock(&l->mu);
    if (counted)
        goto out;
    char group[KQ_QTREE_NAME_MAX + 1];
    bool in_tree = qt != NULL && resolve != NULL && resolve(resolve_ud, pod, group, sizeof(group)) == 0;
    if (pod->queue == NULL && !(in_tree && queueless_ok(pod, group))) {
        rc = no_queue(pod, reason, reason_len, kind);
        goto out;
    }
    kq_user_t u = {.name = pod->user, .groups = (const char *const *)pod->groups, .n_groups = pod->n_groups};
    kq_ugm_pod_t since = since_of(pod);
    rc = kq_ugm_check_pod(l->ugm, pod->queue ? pod->queue : "root", pod->app_id, &u, &pod->request, &since,
                          reason, reason_len, kind);
    if (rc != 0 || !in_tree)
        goto out;
    bool done = false;
    if (node != NULL) {
        /* The preemptor of an in-flight preemption on this node: its victims are read and
         * the tree checked under the ledger lock, so that a victim released meanwhile is
         * not subtracted twice. Any other pod takes no ledger lock here. */
        kq_resource_t disc = KQ_RESOURCE_EMPTY, others = KQ_RESOURCE_EMPTY;
        pthread_mutex_lock(&l->mu);
        if (inflight_discount(l, pod->uid, node, group, &disc, &others) == 0 &&
            !(kq_resource_is_zero(&disc) && kq_resource_is_zero(&others))) {
            rc = kq_qtree_check_across(qt, group, &pod->request, &disc, &others, !pod->preemptible, reason,
                                       reason_len, kind);
            done = true;
        }
        pthread_mutex_unlock(&l->mu);
        kq_resource_free(&disc);
        kq_resource_free(&others);
    }
    if (!done)
        rc = kq_qtree_check(qt, group, &pod->request, !pod->preemptible, reason, reason_len, kind);
    if (rc == KQ_ENOENT) /* removed since it was resolved: the next resolution says default */
        rc = kq_qtree_check(qt, KQ_QTREE_DEFAULT, &pod->request, !pod->preemptible, reason, reason_len, kind);
    if (rc == KQ_EDENIED && by_tree != NULL)
        *by_tree = true;
out:
    kq_resource_free(&eff);
    kq_resource_free(&full);
    return rc;
}

int kq_ledger_app_owner(kq_ledger_t *l, const kq_pod_t *pod, char *owner, size_t owner_len, char *reason,
                        size_t reason_len)
{
    if (l == NULL || pod == NULL || pod->app_id == NULL || pod->user == NULL)
        return KQ_EINVAL;
    if (!pod->app_named)
        return 0; /* a generated id: its own user's application (ugm.h) */
    return kq_ugm_app_owner(l->ugm, pod->app_id, pod->user, owner, owner_len, reason, reason_len);
}

int kq_ledger_check(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len, kq_denial_t *kind)
{
    return kq_ledger_check_ex(l, pod, reason, reason_len, NULL, kind);
}

/* c (to be counted) with at least the request of the entry's resize reservation. */
static int raise_to_rs(const entry_t *e, counted_t *c)
{
    kq_resource_t want = KQ_RESOURCE_EMPTY;
    int rc = with_rs(e, RV(c->req), &want);
    if (rc == 0)
        rc = rpack_set(&c->req, &want);
    kq_resource_free(&want);
    return rc;
}

/* Check and commit of c across the quota tree and the ugm (lock held): both or neither.
 * 0 committed; KQ_EDENIED with the reason; other errors. */
static int commit_locked(kq_ledger_t *l, const counted_t *c, const kq_pod_t *pod, const kq_resource_t *victims,
                         const kq_resource_t *others, char *reason, size_t reason_len, kq_denial_t *kind)
{
    int rc;
    kq_denial_set(kind, KQ_DENIAL_NONE);
    /* another user's application first: its reason, not a quota group's, is the one to give */
    if (pod->app_named && (rc = kq_ugm_app_owner(l->ugm, c->app, c->user, NULL, 0, reason, reason_len)) != 0) {
        kq_denial_set(kind, rc == KQ_EDENIED ? KQ_DENIAL_APP_OWNER : KQ_DENIAL_NONE);
        return rc;
    }
    if (l->qt != NULL && c->group != NULL) {
        rc = kq_qtree_check_across(l->qt, c->group, RV(c->req), victims, others, c->np, reason, reason_len, kind);
        if (rc != 0)
            goto denied;
    }
    kq_user_t u = counted_user(c);
    kq_ugm_pod_t since = since_of(pod);
    rc = kq_ugm_increase_pod(l->ugm, c->queue, c->app, &u, RV(c->req), &since, reason, reason_len, kind);
    if (rc != 0)
        return rc;
    if (l->qt != NULL && c->group != NULL) {
        rc = kq_qtree_assume_across(l->qt, c->group, RV(c->req), victims, others, c->np, reason, reason_len,
                                    kind);
        if (rc != 0) {
            if (kq_ugm_decrease(l->ugm, c->queue, c->app, c->user, RV(c->req)) != 0)
                kq_error("event=assume_undo_failed pod=%s/%s uid=%s queue=%s", pod->ns, pod->name, pod->uid,
                         c->queue);
            goto denied;
        }
    }
    fs_note(l, c->queue, c->user, RV(c->req), +1);
    return 0;
denied:
    if (rc == KQ_ENOENT) { /* the group was removed since it was resolved: retry resolves again */
        set_reason(reason, reason_len, "quota group %s was removed; retry", c->group);
        kq_denial_set(kind, KQ_DENIAL_OVER_LIMIT); /* transient, as a limit that frees up */
        rc = KQ_EDENIED;
    }
    return rc;
}

static int assume(kq_ledger_t *l, const kq_pod_t *pod, const char *node, char *reason, size_t reason_len,
                  kq_denial_t *kind, bool reserve, kq_resource_t *charged);

int kq_ledger_assume(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len, kq_denial_t *kind)
{
    return assume(l, pod, NULL, reason, reason_len, kind, false, NULL);
}

int kq_ledger_assume_on(kq_ledger_t *l, const kq_pod_t *pod, const char *node, char *reason, size_t reason_len,
                        kq_denial_t *kind)
{
    return assume(l, pod, node, reason, reason_len, kind, false, NULL);
}

int kq_ledger_reserve(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len, kq_denial_t *kind)
{
    return assume(l, pod, NULL, reason, reason_len, kind, true, NULL);
}

int kq_ledger_reserve_charged(kq_ledger_t *l, const kq_pod_t *pod, kq_resource_t *charged, char *reason,
                              size_t reason_len, kq_denial_t *kind)
{
    return assume(l, pod, NULL, reason, reason_len, kind, true, charged);
}

int kq_ledger_charge(kq_ledger_t *l, const kq_pod_t *pod, kq_resource_t *out)
{
    if (pod == NULL)
        return KQ_EINVAL;
    if (pod->n_claims == 0 || l->claims == NULL) /* no claims: its request is its charge */
        return kq_resource_copy(out, &pod->request);
    entry_t *e = NULL;
    int rc;
    pthread_mutex_lock(&l->mu);
    if (pod->uid != NULL)
        HASH_FIND_STR(l->table, pod->uid, e);
    if (e != NULL && e->state != ST_PENDING) {
        rc = kq_resource_copy(out, RV(e->c.req));
    } else {
        kq_resource_t full = KQ_RESOURCE_EMPTY;
        rc = charge_locked(l, e, pod, &pod->request, &full, NULL);
        if (rc == 0)
            kq_resource_move(out, &full);
        kq_resource_free(&full);
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

static size_t place_locked(kq_ledger_t *l, entry_t **es, size_t n);
static void place_reresolve(kq_ledger_t *l, entry_t **es, size_t n);

/* Places the pod p by the config in force (l->place, called under the ledger lock as
 * everywhere), unless no placement is wired. 0 or KQ_ENOMEM. */
static int place_now(kq_ledger_t *l, kq_pod_t *p)
{
    pthread_mutex_lock(&l->mu);
    int rc = l->place != NULL ? l->place(l->place_ud, p) : 0;
    pthread_mutex_unlock(&l->mu);
    return rc;
}

static int assume(kq_ledger_t *l, const kq_pod_t *pod, const char *node, char *reason, size_t reason_len,
                  kq_denial_t *kind, bool reserve, kq_resource_t *charged)
{
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (pod == NULL || pod->uid == NULL)
        return KQ_EINVAL;
    /* Everything that may fail to allocate, before the engine commits. */
    counted_t c;
    uint64_t gen = atomic_load(&l->resolve_gen); /* before resolving, with no lock held */
    uint64_t pgen = atomic_load(&l->place_gen);   /* before placing */
    entry_t *fresh = entry_new(pod->uid);
    kq_pod_t copy = {.n_groups = 0};
    /* Counted where the config in force places it: the caller's copy may be older than
     * the last reload (a pod waiting at the gate across it, a lookup just before it). */
    if (fresh == NULL || kq_pod_copy(&copy, pod) != 0 || place_now(l, &copy) != 0 ||
        resolve_into(l, &copy, &copy) != 0 || spod_take(&fresh->pod, &copy) != 0) {
        kq_pod_clear(&copy);
        entry_free(fresh);
        return KQ_ENOMEM;
    }
    const kq_pod_t *fpod = EPOD(&fresh->pod); /* fresh's facts, for as long as fresh has them */
    if (fpod->queue == NULL && !queueless_ok(fpod, fpod->quota_group)) {
        int nrc = no_queue(fpod, reason, reason_len, kind);
        entry_free(fresh);
        return nrc;
    }
    if (counted_from_pod(&c, fpod) != 0) {
        entry_free(fresh);
        return KQ_ENOMEM;
    }

    int rc;
    entry_t *e;
    kq_resource_t disc = KQ_RESOURCE_EMPTY;   /* in-flight victims on node, discounted */
    kq_resource_t others = KQ_RESOURCE_EMPTY; /* those of other scheduler-plugins groups */
    kq_resource_t full = KQ_RESOURCE_EMPTY;  /* containers and claims */
    pthread_mutex_lock(&l->mu);
    rs_sweep(l);
    HASH_FIND_STR(l->table, pod->uid, e);
    /* its claims' devices (a claim not known yet: denied, counted or not) */
    rc = check_charge_locked(l, e, fpod, e != NULL && e->state != ST_PENDING, &full, reason, reason_len, kind);
    if (rc != 0)
        goto out;
    if (e != NULL && e->state != ST_PENDING) {
        /* Counted already (the gate's reservation, an earlier bind): counted with the request
         * the pod has now, which a resize may have grown since; the growth is checked. */
        kq_resource_t want = KQ_RESOURCE_EMPTY;
        rc = with_rs(e, &full, &want);
        if (rc == 0)
            rc = grow_locked(l, e, &want, true, NULL, reason, reason_len, kind);
        kq_resource_free(&want);
        goto out;
    }
    if (rpack_set(&c.req, &full) != 0 || (e != NULL && e->rs_req != NULL && raise_to_rs(e, &c) != 0)) {
        rc = KQ_ENOMEM;
        goto out;
    }
    if (l->qt != NULL && inflight_discount(l, pod->uid, node, c.group, &disc, &others) != 0) {
        kq_resource_free(&disc); /* out of memory: no discount */
        kq_resource_free(&others);
    }
    /* A group's runtime depends on its request: a pod the watch has not shown yet enters
     * its group's request first, as a pending entry (kept if the bind is denied). */
    if (l->qt != NULL && e == NULL && is_ours(l, fpod)) {
        e = fresh;
        fresh = NULL;
        HASH_ADD_KEYPTR(hh, l->table, e->uid, strlen(e->uid), e);
        facts_set(l, e, true);
        tree_sync(l, e, false);
    }
    /* Quota tree first (cheap, and most denials end here), then the ugm (check and
     * commit), then the tree's check and commit; a tree denial undoes the ugm commit.
     * Every commit happens under the ledger lock, so nothing changes used in between. */
    rc = commit_locked(l, &c, fpod, kq_resource_is_zero(&disc) ? NULL : &disc,
                       kq_resource_is_zero(&others) ? NULL : &others, reason, reason_len, kind);
    if (rc != 0)
        goto out;
    if (e == NULL) {
        e = fresh;
        fresh = NULL;
        HASH_ADD_KEYPTR(hh, l->table, e->uid, strlen(e->uid), e);
        facts_set(l, e, true);
    } else if (!e->observed && fresh != NULL) {
        crefs_drop(l, e);
        spod_t old = e->pod;
        e->pod = fresh->pod;
        fresh->pod = old;
        facts_set(l, e, true);
    }
    pending_drop(l, e);
    e->c = c;
    memset(&c, 0, sizeof(c));
    e->state = ST_ASSUMED;
    e->assumed_gen = l->gen;
    l->n_counted++;
    if (reserve) {
        e->reserved = true;
        e->reserved_at = mono_s();
        l->n_reserved++;
    }
    claims_counted_changed(l, e);
    tree_sync(l, e, false);
    reresolve_if_stale(l, e, gen);
    /* a reload re-placed the known pods while this one was being placed */
    if (l->place != NULL && atomic_load(&l->place_gen) != pgen && place_locked(l, &e, 1) > 0)
        place_reresolve(l, &e, 1);
out:
    /* what it is counted with, the same set the check used (its claims' devices included):
     * the gate's fair order costs the release by it (out of memory: charged untouched) */
    if (rc == 0 && charged != NULL && e != NULL && e->state != ST_PENDING &&
        kq_resource_copy(charged, RV(e->c.req)) != 0)
        kq_error("event=charge_copy_failed pod=%s/%s error=\"out of memory\"", pod->ns, pod->name);
    pthread_mutex_unlock(&l->mu);
    if (rc == 0)
        kq_debug("event=%s pod=%s/%s uid=%s queue=%s user=%s", reserve ? "reserved" : "assumed", pod->ns, pod->name,
                 pod->uid, pod->queue, pod->user);
    if (!kq_resource_is_zero(&others) && kq_resource_add(&disc, &others) != 0)
        kq_resource_free(&disc); /* (only the log line below loses it) */
    if (!kq_resource_is_zero(&disc) && (rc == 0 || rc == KQ_EDENIED)) {
        char d[256];
        kq_resource_format(&disc, d, sizeof(d));
        kq_info("event=assume_inflight_preemption pod=%s/%s uid=%s node=%s result=%s discounted=\"%s\" "
                "msg=\"checked as if its in-flight victims on the node were gone\"",
                pod->ns, pod->name, pod->uid, node, rc == 0 ? "counted" : "denied", d);
    }
    kq_resource_free(&disc);
    kq_resource_free(&others);
    kq_resource_free(&full);
    counted_clear(&c);
    entry_free(fresh);
    return rc;
}

int kq_ledger_forget(kq_ledger_t *l, const char *uid)
{
    entry_t *e, *gone = NULL;
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    if (e == NULL || e->state != ST_ASSUMED || e->reserved) { /* a reservation outlives a failed bind */
        rc = KQ_ENOENT;
        goto out;
    }
    gone = uncount(l, e);
out:
    pthread_mutex_unlock(&l->mu);
    entry_free(gone);
    return rc;
}

/* Gating: a pod of ours without the admission gate and without a node has been released
 * by the admission controller (this replica's, or a previous leader's before a restart):
 * it is counted as reserved, checked, so that no set of reservations exceeds a limit. A
 * reservation refused here, or ended earlier, is not retried: filter and bind decide that
 * pod. Lock held; true when counted. */
static bool reserve_observed(kq_ledger_t *l, entry_t *e)
{
    const kq_pod_t *pod = EPOD(&e->pod);
    if (!l->gating || e->res_done || !is_ours(l, pod) || kq_pod_is_gated(pod) || pod->deleting ||
        pod->node != NULL || (pod->queue == NULL && !queueless_ok(pod, pod->quota_group)))
        return false;
    if (l->resyncing) {
        /* During a relist the bound pods are not all counted yet and the quota tree's
         * runtimes are recomputed only at its end: check the reservation then. */
        e->want_res = true;
        return false;
    }
    e->want_res = false;
    counted_t c;
    char reason[512] = "";
    if (pod->n_claims > 0 && l->claims != NULL) {
        /* a claim not known yet: its devices are unknown; filter and bind decide it */
        const char *missing = NULL;
        kq_resource_t full = KQ_RESOURCE_EMPTY;
        int crc = charge_locked(l, e, pod, RV(e->base), &full, &missing);
        kq_resource_free(&full);
        if (crc != 0 || missing != NULL)
            return false;
    }
    if (counted_from_pod(&c, pod) != 0)
        return false;
    if (e->rs_req != NULL && raise_to_rs(e, &c) != 0) {
        counted_clear(&c);
        return false;
    }
    int rc = commit_locked(l, &c, pod, NULL, NULL, reason, sizeof(reason), NULL);
    if (rc != 0) {
        e->res_done = true;
        kq_info("event=reservation_refused pod=%s/%s uid=%s queue=%s user=%s reason=\"%s\" msg=\"an ungated pod "
                "does not fit; filter and bind decide it\"", pod->ns, pod->name, pod->uid, c.queue, c.user,
                reason[0] ? reason : kq_strerror(rc));
        counted_clear(&c);
        return false;
    }
    pending_drop(l, e);
    e->c = c;
    e->state = ST_ASSUMED;
    e->assumed_gen = l->gen;
    e->reserved = true;
    e->reserved_at = mono_s();
    l->n_counted++;
    l->n_reserved++;
    claims_counted_changed(l, e);
    kq_debug("event=reserved pod=%s/%s uid=%s queue=%s user=%s by=watch", pod->ns, pod->name, pod->uid, c.queue,
             c.user);
    return true;
}

void kq_ledger_observe(kq_ledger_t *l, const kq_pod_t *pod)
{
    if (pod == NULL || pod->uid == NULL)
        return;
    bool terminal = kq_pod_is_terminal(pod);
    uint64_t gen = atomic_load(&l->resolve_gen); /* before resolving, with no lock held */
    kq_pod_t tmp;
    memset(&tmp, 0, sizeof(tmp));
    spod_t copy;
    memset(&copy, 0, sizeof(copy));
    if (!terminal &&
        (kq_pod_copy(&tmp, pod) != 0 || resolve_into(l, pod, &tmp) != 0 || spod_take(&copy, &tmp) != 0)) {
        kq_pod_clear(&tmp);
        kq_error("event=observe_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name, pod->uid);
        return;
    }

    entry_t *e, *gone = NULL, *expired = NULL;
    pthread_mutex_lock(&l->mu);
    rs_sweep(l);
    if (l->adm_head != NULL)
        expired = adm_expire_locked(l, mono_ms(), NULL);
    HASH_FIND_STR(l->table, pod->uid, e);
    if (terminal) {
        inflight_drop_uid(l, pod->uid);
        if (e != NULL) {
            kq_debug("event=released pod=%s/%s uid=%s reason=terminal state=%s", pod->ns, pod->name, pod->uid,
                     state_names[e->state]);
            unlink_entry(l, e);
            gone = e;
        }
        goto out;
    }
    if (e == NULL) {
        if ((e = entry_new(pod->uid)) == NULL) {
            kq_error("event=observe_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name,
                     pod->uid);
            goto out;
        }
        HASH_ADD_KEYPTR(hh, l->table, e->uid, strlen(e->uid), e);
    }
    e->observed = true;
    e->seen_gen = l->gen;
    if (l->seen_waiters > 0)
        pthread_cond_broadcast(&l->seen_cv);
    {
        bool same = claims_same(&e->pod, &copy);
        if (!same)
            crefs_drop(l, e);
        spod_t old = e->pod;
        e->pod = copy;
        copy = old; /* freed after unlock */
        facts_set(l, e, !same); /* its request: containers and claims (the pod's own is only the former) */
    }
    kq_resource_t charged_v;
    const kq_resource_t *charged = rpack_view(e->pod.request, &charged_v);
    if (e->rs_req != NULL && rs_shown(e, charged))
        rs_clear(l, e); /* the watch shows the admitted resize: the pod counts with what it shows */
    if (pod->node != NULL) {
        if (e->state == ST_PENDING)
            count_bound(l, e, EPOD(&e->pod));
        else if (e->reserved) {
            e->reserved = false;
            l->n_reserved--;
        }
        if (e->state != ST_PENDING) {
            adm_unlink(l, e); /* the pod is real now: counted once, by this entry */
            e->state = ST_BOUND;
            /* a resize: counted with the request shown, or one admitted and not shown yet */
            kq_resource_t want = KQ_RESOURCE_EMPTY;
            if (with_rs(e, rpack_view(e->pod.request, &charged_v), &want) == 0)
                resize(l, e, pod, &want);
            else
                kq_error("event=resize_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name,
                         pod->uid);
            kq_resource_free(&want);
        }
    } else if (e->state == ST_PENDING) {
        if (!reserve_observed(l, e))
            pending_set(l, e, EPOD(&e->pod));
    }
    /* else ASSUMED without a node: the bind is in flight and the watch lags; keep it.
     * (BOUND without a node cannot happen: spec.nodeName never goes back to empty.) */
    tree_sync(l, e, false);
    reresolve_if_stale(l, e, gen);
out:
    pthread_mutex_unlock(&l->mu);
    spod_clear(&copy);
    entry_free(gone);
    free_chain(expired);
}

void kq_ledger_remove(kq_ledger_t *l, const char *uid)
{
    entry_t *e;
    pthread_mutex_lock(&l->mu);
    inflight_drop_uid(l, uid);
    HASH_FIND_STR(l->table, uid, e);
    if (e != NULL)
        unlink_entry(l, e);
    pthread_mutex_unlock(&l->mu);
    if (e != NULL)
        kq_debug("event=released uid=%s reason=deleted", uid);
    entry_free(e);
}

void kq_ledger_resync_begin(kq_ledger_t *l)
{
    pthread_mutex_lock(&l->mu);
    l->gen++;
    /* A (re)list re-adds every pod's request: one recomputation of the quota tree at the
     * end instead of one per pod (reads in between still see exact values). A list that
     * failed half way and starts over does not nest a second batch. */
    if (!l->resyncing && l->qt != NULL) {
        kq_qtree_batch_begin(l->qt);
        l->batch_qt = l->qt;
    }
    l->resyncing = true;
    pthread_mutex_unlock(&l->mu);
}

void kq_ledger_resync_end(kq_ledger_t *l)
{
    entry_t *e, *tmp, *gone = NULL;
    size_t n = 0;
    pthread_mutex_lock(&l->mu);
    if (l->resyncing) {
        HASH_ITER(hh, l->table, e, tmp) {
            /* An admission reservation stays: its pod is stored after our webhook, maybe after
             * the list was read; the watch or its TTL ends it. */
            if (e->seen_gen == l->gen || (e->state == ST_ASSUMED && (e->assumed_gen == l->gen || e->admitted)))
                continue;
            unlink_entry(l, e);
            e->hh.next = gone; /* reuse the handle as a free list */
            gone = e;
            n++;
        }
        l->resyncing = false;
        if (l->batch_qt != NULL)
            kq_qtree_batch_end(l->batch_qt);
        l->batch_qt = NULL;
        /* ungated unbound pods seen by the relist, now that every bound pod is counted */
        HASH_ITER(hh, l->table, e, tmp) {
            if (e->want_res && e->state == ST_PENDING && reserve_observed(l, e))
                tree_sync(l, e, false);
            e->want_res = false;
        }
    }
    pthread_mutex_unlock(&l->mu);
    while (gone != NULL) {
        e = gone;
        gone = e->hh.next;
        entry_free(e);
    }
    if (n > 0)
        kq_info("event=resync_released pods=%zu msg=\"pods missing from the relist were released\"", n);
}

int kq_ledger_lookup(kq_ledger_t *l, const char *uid, kq_pod_t *out)
{
    entry_t *e;
    int rc;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    rc = e ? kq_pod_copy(out, EPOD(&e->pod)) : KQ_ENOENT;
    /* the pod's own request (its containers'): the ledger adds its claims wherever it is
     * given the pod back (bind) */
    if (rc == 0 && e->base != NULL && kq_resource_copy(&out->request, RV(e->base)) != 0) {
        kq_pod_clear(out);
        rc = KQ_ENOMEM;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

int kq_ledger_pod_group(kq_ledger_t *l, const kq_pod_t *pod, char *out, size_t outlen)
{
    if (l == NULL || pod == NULL)
        return KQ_EINVAL;
    kq_user_t u = {.name = pod->user, .groups = (const char *const *)pod->groups, .n_groups = pod->n_groups};
    return kq_ugm_group_of(l->ugm, pod->queue ? pod->queue : "root", pod->app_id, &u, out, outlen);
}

bool kq_ledger_is_counted(kq_ledger_t *l, const char *uid)
{
    entry_t *e;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    bool counted = e != NULL && e->state != ST_PENDING;
    pthread_mutex_unlock(&l->mu);
    return counted;
}

static bool observed_locked(kq_ledger_t *l, const char *uid)
{
    entry_t *e;
    HASH_FIND_STR(l->table, uid, e);
    return e != NULL && e->observed;
}

bool kq_ledger_is_observed(kq_ledger_t *l, const char *uid)
{
    pthread_mutex_lock(&l->mu);
    bool seen = observed_locked(l, uid);
    pthread_mutex_unlock(&l->mu);
    return seen;
}

bool kq_ledger_wait_observed(kq_ledger_t *l, const char *uid, int timeout_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    if (timeout_ms > 0)
        kq_timespec_add_ms(&dl, timeout_ms);
    pthread_mutex_lock(&l->mu);
    l->seen_waiters++;
    bool seen;
    while (!(seen = observed_locked(l, uid)) && timeout_ms > 0) {
        if (pthread_cond_timedwait(&l->seen_cv, &l->mu, &dl) == ETIMEDOUT) {
            seen = observed_locked(l, uid);
            break;
        }
    }
    l->seen_waiters--;
    pthread_mutex_unlock(&l->mu);
    return seen;
}

size_t kq_ledger_size(kq_ledger_t *l, size_t *counted)
{
    pthread_mutex_lock(&l->mu);
    size_t n = HASH_COUNT(l->table);
    if (counted != NULL)
        *counted = l->n_counted;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* ---------------------------------------------------------------------------------- */
/* elastic quota                                                                       */

static int rename_group(char **slot, const char *from, char *to_spare)
{
    if (*slot == NULL || strcmp(*slot, from) != 0)
        return 0;
    free(*slot);
    *slot = to_spare;
    return 1;
}

int kq_ledger_remove_group(kq_ledger_t *l, const char *group, char *err, size_t errlen)
{
    if (group == NULL)
        return KQ_EINVAL;
    pthread_mutex_lock(&l->mu);
    if (l->qt == NULL) {
        pthread_mutex_unlock(&l->mu);
        set_reason(err, errlen, "%s", "no quota tree");
        return KQ_ESTATE;
    }
    /* Spare strings for every rename, allocated before the tree changes. */
    size_t need = 0;
    entry_t *e, *tmp;
    HASH_ITER(hh, l->table, e, tmp) {
        need += (e->c.group && strcmp(e->c.group, group) == 0) + (e->rq_group && strcmp(e->rq_group, group) == 0) +
                (e->pod.quota_group && strcmp(e->pod.quota_group, group) == 0);
    }
    char **spare = need ? calloc(need, sizeof(char *)) : NULL;
    int rc = 0;
    if (need > 0 && spare == NULL)
        rc = KQ_ENOMEM;
    for (size_t i = 0; rc == 0 && i < need; i++)
        if ((spare[i] = strdup(KQ_QTREE_DEFAULT)) == NULL)
            rc = KQ_ENOMEM;
    if (rc == 0)
        rc = kq_qtree_remove_group(l->qt, group, err, errlen);
    if (rc == 0) {
        size_t i = 0;
        HASH_ITER(hh, l->table, e, tmp) {
            if (i < need)
                i += rename_group(&e->c.group, group, spare[i]);
            if (i < need)
                i += rename_group(&e->rq_group, group, spare[i]);
            if (i < need)
                i += rename_group(&e->pod.quota_group, group, spare[i]);
        }
        need = 0; /* all used */
    } else if (rc == KQ_ENOMEM) {
        set_reason(err, errlen, "%s", "out of memory");
    }
    pthread_mutex_unlock(&l->mu);
    for (size_t i = 0; spare != NULL && i < need; i++)
        free(spare[i]);
    free(spare);
    return rc;
}

/* ---- re-placement (lock held) ---- */

static bool streq0(const char *a, const char *b)
{
    return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* Asks placement again for the entry's pod (l->place, the config in force now). When the
 * answer differs, the entry's pod takes it (queue, queue_error, queue_denial) and true is
 * returned; what the entry counted is moved by place_move. */
static bool place_entry(kq_ledger_t *l, entry_t *e)
{
    kq_pod_t p = {.n_groups = 0};
    if (kq_pod_copy(&p, EPOD(&e->pod)) != 0 || l->place(l->place_ud, &p) != 0) {
        kq_error("event=replace_failed uid=%s error=\"out of memory\"", e->uid);
        kq_pod_clear(&p);
        return false;
    }
    bool same = streq0(p.queue, e->pod.queue) && streq0(p.queue_error, e->pod.queue_error) &&
                p.queue_denial == e->pod.queue_denial;
    if (!same) {
        kq_debug("event=pod_replaced pod=%s/%s uid=%s from=%s to=%s", e->pod.ns, e->pod.name, e->uid,
                 e->pod.queue ? e->pod.queue : "-", p.queue ? p.queue : "-");
        char *t = e->pod.queue;
        e->pod.queue = p.queue;
        p.queue = t;
        t = e->pod.queue_error;
        e->pod.queue_error = p.queue_error;
        p.queue_error = t;
        e->pod.queue_denial = p.queue_denial;
    }
    kq_pod_clear(&p);
    return !same;
}

/* Where a counted entry belongs now: its pod's queue, root without one (count_bound). */
static const char *place_target(const entry_t *e)
{
    return e->pod.queue != NULL ? e->pod.queue : "root";
}

/* Phase 1 of a move: releases the counted entry's usage and application membership from
 * the queue it was counted in (its user, groups, application, request and quota group stay). */
static void place_release(kq_ledger_t *l, entry_t *e)
{
    int rc = kq_ugm_decrease(l->ugm, e->c.queue, e->c.app, e->c.user, RV(e->c.req));
    if (rc == 0)
        fs_note(l, e->c.queue, e->c.user, RV(e->c.req), -1);
    else
        kq_error("event=release_failed uid=%s queue=%s app=%s user=%s error=\"%s\"", e->uid, e->c.queue, e->c.app,
                 e->c.user, kq_strerror(rc));
}

/* Phase 2: counts it, unchecked (what runs is reality), in the queue it belongs to now
 * (root when the engine rejects that one, as count_bound does). On failure it goes back
 * to the queue it came from. */
static void place_count(kq_ledger_t *l, entry_t *e)
{
    kq_user_t u = counted_user(&e->c);
    kq_ugm_pod_t since = since_of(EPOD(&e->pod));
    const char *to = place_target(e);
    int rc = kq_ugm_add_unchecked_pod(l->ugm, to, e->c.app, &u, RV(e->c.req), &since);
    if (rc == KQ_EINVAL && strcmp(to, "root") != 0) {
        to = "root";
        rc = kq_ugm_add_unchecked_pod(l->ugm, to, e->c.app, &u, RV(e->c.req), &since);
    }
    char *nq = rc == 0 ? strdup(to) : NULL;
    if (rc == 0 && nq == NULL) {
        (void)kq_ugm_decrease(l->ugm, to, e->c.app, e->c.user, RV(e->c.req));
        rc = KQ_ENOMEM;
    }
    if (rc != 0) {
        kq_error("event=replace_failed pod=%s/%s uid=%s from=%s to=%s error=\"%s\" msg=\"the pod stays counted "
                 "in its old queue\"", e->pod.ns, e->pod.name, e->uid, e->c.queue, to, kq_strerror(rc));
        if (kq_ugm_add_unchecked_pod(l->ugm, e->c.queue, e->c.app, &u, RV(e->c.req), &since) == 0)
            fs_note(l, e->c.queue, e->c.user, RV(e->c.req), +1);
        return;
    }
    fs_note(l, to, e->c.user, RV(e->c.req), +1);
    kq_info("event=pod_moved pod=%s/%s uid=%s from=%s to=%s state=%s user=%s app=%s msg=\"the config changed its "
            "queue; its usage and application moved with it\"", e->pod.ns, e->pod.name, e->uid, e->c.queue, to,
            state_names[e->state], e->c.user, e->c.app);
    free(e->c.queue);
    e->c.queue = nq;
}

/* Re-places the entries of `es` (n of them; all when es is NULL) and moves what changed;
 * returns how many moved. Counted entries move in two phases, all releases before all
 * counts, so that an application whose pods all move is counted afresh in its new queue
 * (its tracked group chosen there), as a freshly started kubequota would count it. */
static size_t place_locked(kq_ledger_t *l, entry_t **es, size_t n)
{
    size_t moved = 0, cap = 0, nm = 0;
    entry_t **mv = NULL;
    entry_t *e;
    bool all = es == NULL;
    size_t i = 0;
    if (all)
        e = l->table;
    else
        e = n > 0 ? es[0] : NULL;
    while (e != NULL) {
        entry_t *next = all ? e->hh.next : (++i < n ? es[i] : NULL);
        if (place_entry(l, e)) {
            moved++;
            if (e->state != ST_PENDING && strcmp(place_target(e), e->c.queue) != 0) {
                if (nm == cap) {
                    size_t nc = cap ? cap * 2 : 16;
                    entry_t **m = realloc(mv, nc * sizeof(*m));
                    if (m == NULL) {
                        /* out of memory: this one moves on its own */
                        place_release(l, e);
                        place_count(l, e);
                        e = next;
                        continue;
                    }
                    mv = m;
                    cap = nc;
                }
                mv[nm++] = e;
            } else if (e->state == ST_PENDING && e->pod.node == NULL) {
                pending_set(l, e, EPOD(&e->pod));
            }
        }
        e = next;
    }
    for (size_t k = 0; k < nm; k++)
        place_release(l, mv[k]);
    for (size_t k = 0; k < nm; k++)
        place_count(l, mv[k]);
    free(mv);
    return moved;
}

void kq_ledger_set_placement(kq_ledger_t *l, kq_ledger_place_fn place, void *ud)
{
    pthread_mutex_lock(&l->mu);
    l->place = place;
    l->place_ud = ud;
    pthread_mutex_unlock(&l->mu);
}

/* The quota groups of the pods that moved, asked again (a group may come from the queue). */
static void place_reresolve(kq_ledger_t *l, entry_t **es, size_t n)
{
    if (l->qt == NULL || l->resolve == NULL)
        return;
    atomic_fetch_add(&l->resolve_gen, 1);
    kq_qtree_batch_begin(l->qt);
    if (es == NULL) {
        entry_t *e, *tmp;
        HASH_ITER(hh, l->table, e, tmp) (void)reresolve_entry(l, e);
    } else {
        for (size_t i = 0; i < n; i++)
            (void)reresolve_entry(l, es[i]);
    }
    kq_qtree_batch_end(l->qt);
}

size_t kq_ledger_place_again(kq_ledger_t *l)
{
    size_t moved = 0, n = 0;
    pthread_mutex_lock(&l->mu);
    if (l->place == NULL) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    n = HASH_COUNT(l->table);
    atomic_fetch_add(&l->place_gen, 1);
    moved = place_locked(l, NULL, 0);
    if (moved > 0) {
        place_reresolve(l, NULL, 0);
        /* a pod that moved may fit now, or another pod may: poke recent denials */
        if (l->on_release != NULL)
            l->on_release(l->on_release_ud);
    }
    pthread_mutex_unlock(&l->mu);
    kq_info("event=pods_replaced pods=%zu moved=%zu", n, moved);
    return moved;
}

bool kq_ledger_place_again_pod(kq_ledger_t *l, const char *uid)
{
    entry_t *e;
    bool moved = false;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    if (e != NULL && l->place != NULL && place_locked(l, &e, 1) > 0) {
        moved = true;
        place_reresolve(l, &e, 1);
        if (l->on_release != NULL)
            l->on_release(l->on_release_ud);
    }
    pthread_mutex_unlock(&l->mu);
    return moved;
}

size_t kq_ledger_reresolve(kq_ledger_t *l)
{
    size_t moved = 0, n = 0;
    pthread_mutex_lock(&l->mu);
    if (l->qt == NULL || l->resolve == NULL) {
        pthread_mutex_unlock(&l->mu);
        return 0;
    }
    atomic_fetch_add(&l->resolve_gen, 1);
    kq_qtree_batch_begin(l->qt);
    entry_t *e, *tmp;
    HASH_ITER(hh, l->table, e, tmp) {
        n++;
        moved += reresolve_entry(l, e);
    }
    kq_qtree_batch_end(l->qt);
    /* A pod that moved may fit now (its new group has room, or its old one was full): the
     * release hook pokes recent denials (control/requeue.h), as a release does. */
    if (moved > 0 && l->on_release != NULL)
        l->on_release(l->on_release_ud);
    pthread_mutex_unlock(&l->mu);
    kq_info("event=pods_reresolved pods=%zu moved=%zu", n, moved);
    return moved;
}

void kq_ledger_victims_free(kq_ledger_victim_t *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        free(v[i].uid);
        free(v[i].ns);
        free(v[i].name);
        free(v[i].group);
        free(v[i].app);
        free(v[i].queue);
        kq_resource_free(&v[i].req);
    }
    free(v);
}

/* Counted pods of `group` (when non-NULL) bound to `node` (when non-NULL). */
static int collect_pods(kq_ledger_t *l, const char *group, const char *node, kq_ledger_victim_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = 0;
    size_t cap = 0, k = 0;
    kq_ledger_victim_t *v = NULL;
    entry_t *e, *tmp;
    pthread_mutex_lock(&l->mu);
    HASH_ITER(hh, l->table, e, tmp) {
        if (e->state == ST_PENDING || (group != NULL && (e->c.group == NULL || strcmp(e->c.group, group) != 0)) ||
            (node != NULL && (e->pod.node == NULL || strcmp(e->pod.node, node) != 0)))
            continue;
        if (k == cap) {
            size_t nc = cap ? cap * 2 : 16;
            kq_ledger_victim_t *nv = realloc(v, nc * sizeof(*v));
            if (nv == NULL) {
                rc = KQ_ENOMEM;
                break;
            }
            v = nv;
            cap = nc;
        }
        kq_ledger_victim_t *x = &v[k];
        memset(x, 0, sizeof(*x));
        x->uid = strdup(e->uid);
        x->ns = strdup(e->pod.ns ? e->pod.ns : "default");
        x->name = strdup(e->pod.name ? e->pod.name : "");
        x->group = e->c.group ? strdup(e->c.group) : NULL;
        x->app = e->c.app ? strdup(e->c.app) : NULL;
        x->queue = e->c.queue ? strdup(e->c.queue) : NULL;
        k++;
        if (!x->uid || !x->ns || !x->name || (e->c.group && !x->group) || (e->c.app && !x->app) ||
            (e->c.queue && !x->queue)) {
            rc = KQ_ENOMEM;
            break;
        }
        x->priority = e->pod.priority;
        x->created = e->pod.created;
        x->preemptible = !e->c.np;
        if (kq_resource_copy(&x->req, RV(e->c.req)) != 0) {
            rc = KQ_ENOMEM;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    if (rc != 0) {
        kq_ledger_victims_free(v, k);
        return rc;
    }
    if (k == 0) {
        free(v);
        v = NULL;
    }
    *out = v;
    *n = k;
    return 0;
}

int kq_ledger_group_pods(kq_ledger_t *l, const char *group, kq_ledger_victim_t **out, size_t *n)
{
    if (group == NULL) {
        *out = NULL;
        *n = 0;
        return 0;
    }
    return collect_pods(l, group, NULL, out, n);
}

int kq_ledger_node_pods(kq_ledger_t *l, const char *node, kq_ledger_victim_t **out, size_t *n)
{
    if (node == NULL) {
        *out = NULL;
        *n = 0;
        return 0;
    }
    return collect_pods(l, NULL, node, out, n);
}

static int cmp_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

int kq_ledger_nodes_used(kq_ledger_t *l, const char *const *nodes, size_t n, kq_resource_t *used)
{
    int rc = 0;
    entry_t *e, *tmp;
    if (l == NULL || n == 0)
        return 0;
    pthread_mutex_lock(&l->mu);
    HASH_ITER(hh, l->table, e, tmp) {
        if (e->state == ST_PENDING || e->pod.node == NULL)
            continue;
        const char *const *hit = bsearch(e->pod.node, nodes, n, sizeof(*nodes), cmp_name);
        if (hit == NULL)
            continue;
        /* pods: 1 per pod, as the ugm counts it (YuniKorn's shim puts it in every pod's
         * resource: yunikorn-k8shim pkg/common/resource.go GetPodResource) */
        kq_resource_t *u = &used[hit - nodes];
        int64_t pods = kq_resource_get(u, "pods", NULL);
        if (kq_resource_add(u, RV(e->c.req)) != 0 || kq_resource_set(u, "pods", pods + 1) != 0) {
            rc = KQ_ENOMEM;
            break;
        }
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

bool kq_ledger_find_pod(kq_ledger_t *l, bool (*match)(void *ud, const kq_pod_t *pod), void *ud, char *ns,
                        size_t nslen, char *name, size_t namelen)
{
    bool found = false;
    pthread_mutex_lock(&l->mu);
    for (entry_t *e = l->table; e != NULL && !found; e = e->hh.next) {
        const kq_pod_t *pod = EPOD(&e->pod);
        if (pod->uid == NULL || !match(ud, pod))
            continue;
        found = true;
        if (ns != NULL && nslen > 0)
            snprintf(ns, nslen, "%s", pod->ns ? pod->ns : "");
        if (name != NULL && namelen > 0)
            snprintf(name, namelen, "%s", pod->name ? pod->name : "");
    }
    pthread_mutex_unlock(&l->mu);
    return found;
}

int kq_ledger_counted_group(kq_ledger_t *l, const char *uid, char *group, size_t glen, kq_resource_t *req,
                            int32_t *priority)
{
    entry_t *e;
    int rc = KQ_ENOENT;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    if (e != NULL && e->state != ST_PENDING && e->c.group != NULL) {
        if (group != NULL && glen > 0)
            snprintf(group, glen, "%s", e->c.group);
        rc = req != NULL ? kq_resource_copy(req, RV(e->c.req)) : 0;
        if (priority != NULL && rc == 0)
            *priority = e->pod.priority;
    }
    pthread_mutex_unlock(&l->mu);
    return rc;
}

size_t kq_ledger_expire_unobserved(kq_ledger_t *l, int64_t max_age_s)
{
    entry_t *e, *tmp, *gone = NULL;
    size_t n = 0;
    int64_t now = mono_s();
    pthread_mutex_lock(&l->mu);
    HASH_ITER(hh, l->table, e, tmp) {
        if (e->state != ST_PENDING || e->observed || now - e->born < max_age_s)
            continue;
        unlink_entry(l, e);
        e->hh.next = gone;
        gone = e;
        n++;
    }
    pthread_mutex_unlock(&l->mu);
    while (gone != NULL) {
        e = gone;
        gone = e->hh.next;
        entry_free(e);
    }
    if (n > 0)
        kq_info("event=expired_unobserved pods=%zu msg=\"pending pods known only from filter/bind that the "
                "watch never showed were forgotten\"", n);
    return n;
}

/* ---------------------------------------------------------------------------------- */
/* gating                                                                              */

void kq_ledger_set_gating(kq_ledger_t *l, bool on)
{
    pthread_mutex_lock(&l->mu);
    l->gating = on;
    pthread_mutex_unlock(&l->mu);
}

void kq_ledger_set_gate_only(kq_ledger_t *l, bool on)
{
    pthread_mutex_lock(&l->mu);
    l->gate_only = on;
    pthread_mutex_unlock(&l->mu);
}

void kq_ledger_set_release_hook(kq_ledger_t *l, void (*fn)(void *ud), void *ud)
{
    pthread_mutex_lock(&l->mu);
    l->on_release = fn;
    l->on_release_ud = ud;
    pthread_mutex_unlock(&l->mu);
}

void kq_ledger_set_fairshare(kq_ledger_t *l, kq_fairshare_t *fs)
{
    pthread_mutex_lock(&l->mu);
    l->fs = fs;
    pthread_mutex_unlock(&l->mu);
}

int kq_ledger_unreserve(kq_ledger_t *l, const char *uid)
{
    entry_t *e, *gone = NULL;
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    if (e == NULL || !e->reserved) {
        rc = KQ_ENOENT;
        goto out;
    }
    e->res_done = true;
    gone = uncount(l, e);
out:
    pthread_mutex_unlock(&l->mu);
    entry_free(gone);
    return rc;
}

bool kq_ledger_is_reserved(kq_ledger_t *l, const char *uid)
{
    entry_t *e;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    bool r = e != NULL && e->reserved;
    pthread_mutex_unlock(&l->mu);
    return r;
}

size_t kq_ledger_reserved_count(kq_ledger_t *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->n_reserved;
    pthread_mutex_unlock(&l->mu);
    return n;
}

size_t kq_ledger_expire_reserved(kq_ledger_t *l, int64_t max_age_s)
{
    entry_t *e, *tmp;
    size_t n = 0;
    int64_t now = mono_s();
    pthread_mutex_lock(&l->mu);
    rs_sweep(l); /* (this is the ledger's timer when the gate is on) */
    if (l->n_reserved == 0)
        goto out;
    HASH_ITER(hh, l->table, e, tmp) {
        if (!e->reserved || now - e->reserved_at < max_age_s)
            continue;
        kq_info("event=reservation_expired pod=%s/%s uid=%s queue=%s user=%s age_s=%lld msg=\"released but not "
                "bound in time; its reservation is released and filter decides it\"",
                e->pod.ns ? e->pod.ns : "-", e->pod.name ? e->pod.name : "-", e->uid, e->c.queue, e->c.user,
                (long long)(now - e->reserved_at));
        release(l, e);
        e->res_done = true;
        if (e->observed) {
            pending_set(l, e, EPOD(&e->pod));
            tree_sync(l, e, false);
        }
        n++;
    }
out:
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* ---------------------------------------------------------------------------------- */
/* in-flight preemption                                                                */

void kq_ledger_set_resize_ttl_ms(kq_ledger_t *l, int64_t ttl_ms)
{
    pthread_mutex_lock(&l->mu);
    l->resize_ttl_ms = ttl_ms;
    pthread_mutex_unlock(&l->mu);
}

void kq_ledger_set_preempt_ttl_ms(kq_ledger_t *l, int64_t ttl_ms)
{
    pthread_mutex_lock(&l->mu);
    l->preempt_ttl_ms = ttl_ms;
    pthread_mutex_unlock(&l->mu);
}

size_t kq_ledger_preempt_count(kq_ledger_t *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->n_inflight;
    pthread_mutex_unlock(&l->mu);
    return n;
}

/* A new record (no lock): the nodes with victims, up to KQ_LEDGER_PREEMPT_VICTIMS victims
 * (a node whose victims do not all fit is left out, and the nodes after it). NULL on
 * ENOMEM; *out NULL and 0 when there is no victim. */
static int inflight_build(const char *uid, const kq_ledger_preempt_node_t *nodes, size_t n_nodes, inflight_t **out)
{
    *out = NULL;
    size_t nn = 0, nv = 0;
    for (size_t i = 0; i < n_nodes; i++) {
        if (nodes[i].node == NULL || nodes[i].n == 0)
            continue;
        if (nv + nodes[i].n > KQ_LEDGER_PREEMPT_VICTIMS)
            break;
        nn++;
        nv += nodes[i].n;
    }
    if (nv == 0)
        return 0;
    inflight_t *r = calloc(1, sizeof(*r));
    if (r == NULL || (r->uid = strdup(uid)) == NULL || (r->node = calloc(nn, sizeof(char *))) == NULL ||
        (r->first = calloc(nn + 1, sizeof(size_t))) == NULL || (r->victim = calloc(nv, sizeof(char *))) == NULL)
        goto nomem;
    for (size_t i = 0; i < n_nodes && r->n_nodes < nn; i++) {
        if (nodes[i].node == NULL || nodes[i].n == 0)
            continue;
        if ((r->node[r->n_nodes] = strdup(nodes[i].node)) == NULL)
            goto nomem;
        r->first[r->n_nodes] = r->n_victims;
        r->n_nodes++;
        for (size_t k = 0; k < nodes[i].n; k++) {
            if (nodes[i].victims[k] == NULL)
                continue;
            if ((r->victim[r->n_victims] = strdup(nodes[i].victims[k])) == NULL)
                goto nomem;
            r->n_victims++;
        }
        r->first[r->n_nodes] = r->n_victims;
    }
    *out = r;
    return 0;
nomem:
    inflight_destroy(r);
    return KQ_ENOMEM;
}

int kq_ledger_preempt_note(kq_ledger_t *l, const char *preemptor_uid, const kq_ledger_preempt_node_t *nodes,
                           size_t n_nodes)
{
    if (l == NULL || preemptor_uid == NULL || (nodes == NULL && n_nodes > 0))
        return KQ_EINVAL;
    inflight_t *r = NULL;
    if (inflight_build(preemptor_uid, nodes, n_nodes, &r) != 0)
        return KQ_ENOMEM;
    size_t claimed = 0;
    int64_t now = mono_ms();
    pthread_mutex_lock(&l->mu);
    inflight_drop_uid(l, preemptor_uid); /* a new preemption replaces the earlier one */
    /* Ended records go first: expired, or none of their victims counted any more (a scan of
     * the records: the preempt verb only, never filter or bind). */
    inflight_t *x, *tmp;
    HASH_ITER(hh, l->inflight, x, tmp) {
        if (now >= x->until_ms || !inflight_pending(l, x))
            inflight_drop(l, x);
    }
    if (r != NULL) {
        if (l->n_inflight >= KQ_LEDGER_PREEMPT_MAX && l->inflight != NULL) {
            kq_warn("event=preempt_inflight_full preemptor_uid=%s dropped_uid=%s max=%d msg=\"in-flight "
                    "preemption table full; forgetting the oldest\"", preemptor_uid, l->inflight->uid,
                    KQ_LEDGER_PREEMPT_MAX);
            inflight_drop(l, l->inflight); /* uthash iterates in insertion order: the oldest */
        }
        r->until_ms = now + l->preempt_ttl_ms;
        for (size_t i = 0; i < r->n_victims; i++) {
            entry_t *e;
            HASH_FIND_STR(l->table, r->victim[i], e);
            if (e == NULL || e->state == ST_PENDING)
                continue;
            /* one victim, one preemptor: a victim claimed by a live record stays its */
            if (e->claim != NULL && now < e->claim->until_ms)
                continue;
            if (e->claim != NULL)
                inflight_drop(l, e->claim); /* expired: clears e->claim */
            e->claim = r;
            claimed++;
        }
        HASH_ADD_KEYPTR(hh, l->inflight, r->uid, strlen(r->uid), r);
        l->n_inflight++;
    }
    pthread_mutex_unlock(&l->mu);
    if (r != NULL)
        kq_debug("event=preempt_inflight_noted preemptor_uid=%s nodes=%zu victims=%zu claimed=%zu", preemptor_uid,
                 r->n_nodes, r->n_victims, claimed);
    return 0;
}

int kq_ledger_preempt_nodes(kq_ledger_t *l, const char *preemptor_uid, char ***out, size_t *n)
{
    *out = NULL;
    *n = 0;
    int rc = 0;
    pthread_mutex_lock(&l->mu);
    inflight_t *r = l->inflight != NULL && preemptor_uid != NULL ? inflight_live(l, preemptor_uid, mono_ms())
                                                                  : NULL;
    char **v = r != NULL ? calloc(r->n_nodes, sizeof(char *)) : NULL;
    if (r != NULL && v == NULL)
        rc = KQ_ENOMEM;
    size_t k = 0;
    for (size_t ni = 0; v != NULL && ni < r->n_nodes && rc == 0; ni++) {
        bool any = false;
        for (size_t i = r->first[ni]; i < r->first[ni + 1] && !any; i++)
            any = inflight_victim(l, r, ni, i, NULL) != NULL;
        if (any && (v[k++] = strdup(r->node[ni])) == NULL)
            rc = KQ_ENOMEM;
    }
    pthread_mutex_unlock(&l->mu);
    if (rc != 0 || k == 0) {
        for (size_t i = 0; i < k; i++)
            free(v[i]);
        free(v);
        return rc;
    }
    *out = v;
    *n = k;
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* admission of pods created with spec.nodeName                                        */

static int check_new_unlocked(kq_ledger_t *l, const kq_pod_t *pod, kq_qtree_t *qt, kq_ledger_resolve_fn resolve,
                              void *resolve_ud, char *reason, size_t reason_len, kq_denial_t *kind);

int kq_ledger_check_new(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len, kq_denial_t *kind)
{
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (l == NULL || pod == NULL)
        return KQ_EINVAL;
    entry_t *expired = NULL;
    kq_resource_t full = KQ_RESOURCE_EMPTY;
    kq_pod_t charged;
    int crc = 0;
    pthread_mutex_lock(&l->mu);
    if (l->adm_head != NULL)
        expired = adm_expire_locked(l, mono_ms(), NULL);
    if (pod->n_claims > 0 && l->claims != NULL) {
        /* the devices of the claims it uses, as far as they are known */
        crc = check_charge_locked(l, NULL, pod, true, &full, NULL, 0, NULL);
        charged = *pod;
        charged.request = full; /* borrowed: freed below, after the last use */
        pod = &charged;
    }
    kq_qtree_t *qt = l->qt;
    kq_ledger_resolve_fn resolve = l->resolve;
    void *resolve_ud = l->resolve_ud;
    pthread_mutex_unlock(&l->mu);
    free_chain(expired);
    int rc = crc != 0 ? crc : check_new_unlocked(l, pod, qt, resolve, resolve_ud, reason, reason_len, kind);
    kq_resource_free(&full);
    return rc;
}

static int check_new_unlocked(kq_ledger_t *l, const kq_pod_t *pod, kq_qtree_t *qt, kq_ledger_resolve_fn resolve,
                              void *resolve_ud, char *reason, size_t reason_len, kq_denial_t *kind)
{
    char group[KQ_QTREE_NAME_MAX + 1];
    bool in_tree = qt != NULL && resolve != NULL && resolve(resolve_ud, pod, group, sizeof(group)) == 0;
    if (pod->queue == NULL && !(in_tree && queueless_ok(pod, group)))
        return no_queue(pod, reason, reason_len, kind);
    kq_user_t u = {.name = pod->user, .groups = (const char *const *)pod->groups, .n_groups = pod->n_groups};
    kq_ugm_pod_t since = since_of(pod);
    int rc = kq_ugm_check_pod(l->ugm, pod->queue ? pod->queue : "root", pod->app_id, &u, &pod->request, &since,
                              reason, reason_len, kind);
    if (rc != 0 || !in_tree)
        return rc;
    rc = kq_qtree_check_new(qt, group, &pod->request, !pod->preemptible, reason, reason_len, kind);
    if (rc == KQ_ENOENT) /* removed since it was resolved: the next resolution says default */
        rc = kq_qtree_check_new(qt, KQ_QTREE_DEFAULT, &pod->request, !pod->preemptible, reason, reason_len, kind);
    return rc;
}

int kq_ledger_admit(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len, kq_denial_t *kind)
{
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (l == NULL || pod == NULL || pod->uid == NULL || *pod->uid == '\0' || pod->node == NULL)
        return KQ_EINVAL;
    /* Everything that may fail to allocate, before the engine commits. */
    counted_t c;
    entry_t *fresh = entry_new(pod->uid);
    kq_pod_t copy = {.n_groups = 0};
    if (fresh == NULL || kq_pod_copy(&copy, pod) != 0 || resolve_into(l, pod, &copy) != 0 ||
        spod_take(&fresh->pod, &copy) != 0) {
        kq_pod_clear(&copy);
        entry_free(fresh);
        return KQ_ENOMEM;
    }
    const kq_pod_t *fpod = EPOD(&fresh->pod); /* valid while fresh (or the entry it becomes) lives */
    if (fpod->queue == NULL && !queueless_ok(fpod, fpod->quota_group)) {
        entry_free(fresh);
        return no_queue(pod, reason, reason_len, kind);
    }
    if (counted_from_pod(&c, fpod) != 0) {
        entry_free(fresh);
        return KQ_ENOMEM;
    }

    int rc = 0;
    entry_t *e, *expired = NULL, *refused = NULL;
    int64_t now = mono_ms();
    pthread_mutex_lock(&l->mu);
    if (l->adm_head != NULL)
        expired = adm_expire_locked(l, now, NULL);
    HASH_FIND_STR(l->table, pod->uid, e);
    if (e != NULL && e->state != ST_PENDING)
        goto out; /* counted already (a validation retried for the same uid): idempotent */
    if (fpod->n_claims > 0 && l->claims != NULL) {
        /* the devices of its claims as far as they are known (kubelet runs no pod whose
         * claims are not allocated, and no scheduler allocates for a pod with a node) */
        kq_resource_t full = KQ_RESOURCE_EMPTY;
        rc = check_charge_locked(l, e, fpod, true, &full, reason, reason_len, kind);
        if (rc == 0 && rpack_set(&c.req, &full) != 0)
            rc = KQ_ENOMEM;
        kq_resource_free(&full);
        if (rc != 0)
            goto out;
    }
    if (e == NULL && l->qt != NULL && c.group != NULL) {
        /* The what-if first, in one step of the tree: a pod over its limits (a controller
         * retrying a create) is refused without its request ever entering its group. */
        rc = kq_qtree_check_new(l->qt, c.group, RV(c.req), c.np, reason, reason_len, kind);
        if (rc == KQ_EDENIED)
            goto out;
        rc = 0; /* KQ_ENOENT: commit_locked below says it as a bind would */
    }
    bool inserted = false;
    if (e == NULL) {
        /* As the watch will: the pod of ours enters its group's request, which its
         * group's runtime follows, and is then checked and counted. */
        e = fresh;
        fresh = NULL;
        HASH_ADD_KEYPTR(hh, l->table, e->uid, strlen(e->uid), e);
        facts_set(l, e, true);
        tree_sync(l, e, false);
        inserted = true;
    }
    rc = commit_locked(l, &c, EPOD(&e->pod), NULL, NULL, reason, reason_len, kind);
    if (rc != 0) {
        if (inserted) { /* the pod will not exist: nothing of it stays */
            unlink_entry(l, e);
            refused = e;
        }
        goto out;
    }
    pending_drop(l, e);
    e->c = c;
    memset(&c, 0, sizeof(c));
    e->state = ST_ASSUMED;
    e->assumed_gen = l->gen;
    l->n_counted++;
    adm_link(l, e, now);
    claims_counted_changed(l, e);
    tree_sync(l, e, false);
out:
    pthread_mutex_unlock(&l->mu);
    kq_info("event=admission_reservation pod=%s/%s uid=%s node=%s queue=%s user=%s result=%s", pod->ns ? pod->ns : "-",
            pod->name ? pod->name : "-", pod->uid, pod->node, pod->queue ? pod->queue : "-",
            pod->user ? pod->user : "-", rc == 0 ? "reserved" : rc == KQ_EDENIED ? "denied" : "error");
    counted_clear(&c);
    entry_free(fresh);
    entry_free(refused);
    free_chain(expired);
    return rc;
}

size_t kq_ledger_expire_admitted(kq_ledger_t *l)
{
    size_t n = 0;
    pthread_mutex_lock(&l->mu);
    entry_t *gone = adm_expire_locked(l, mono_ms(), &n);
    pthread_mutex_unlock(&l->mu);
    free_chain(gone);
    return n;
}

void kq_ledger_set_admit_ttl_ms(kq_ledger_t *l, int64_t ttl_ms)
{
    pthread_mutex_lock(&l->mu);
    l->admit_ttl_ms = ttl_ms;
    pthread_mutex_unlock(&l->mu);
}

size_t kq_ledger_admitted_count(kq_ledger_t *l)
{
    pthread_mutex_lock(&l->mu);
    size_t n = l->n_admitted;
    pthread_mutex_unlock(&l->mu);
    return n;
}

bool kq_ledger_is_admitted(kq_ledger_t *l, const char *uid)
{
    entry_t *e;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, uid, e);
    bool admitted = e != NULL && e->admitted;
    pthread_mutex_unlock(&l->mu);
    return admitted;
}
