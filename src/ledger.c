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
 * DESIGN: one mutex guards the UID table (uthash) and the counters. Engine calls that
 * change usage are made under it, so the table and the engine never disagree (lock
 * order: ledger -> ugm, never the reverse). kq_ledger_check calls the engine after
 * dropping the ledger lock: it changes nothing, and filter must not serialise on the
 * ledger. No I/O under the lock: bind POSTs happen in the caller between assume and
 * forget. Entries and pod copies for kq_ledger_assume are allocated before the lock is
 * taken, so a successful engine increase can never be lost to an allocation failure.
 */
#include "kubequota/ledger.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "kubequota/log.h"

typedef enum { ST_PENDING = 0, ST_ASSUMED, ST_BOUND } state_t;

static const char *const state_names[] = {"pending", "assumed", "bound"};

/* What was given to the engine, released verbatim. */
typedef struct counted {
    char *queue, *app, *user;
    char **groups;
    size_t n_groups;
    kq_resource_t req;
} counted_t;

typedef struct entry {
    char *uid; /* key */
    UT_hash_handle hh;
    state_t state;
    kq_pod_t pod;         /* latest facts (watch, or the bind's pod) */
    bool observed;        /* seen by the watch or a relist at least once */
    counted_t c;          /* valid when state != ST_PENDING */
    bool pending;         /* pending resources added for p_queue/p_req */
    char *p_queue;
    kq_resource_t p_req;
    uint64_t seen_gen;    /* generation of the last observe */
    uint64_t assumed_gen; /* generation of the assume that counted it */
} entry_t;

struct kq_ledger {
    pthread_mutex_t mu;
    kq_ugm_t *ugm;
    char *scheduler_name;
    entry_t *table;
    size_t n_counted;
    uint64_t gen;
    bool resyncing;
};

/* ---------------------------------------------------------------------------------- */
/* helpers (all called with the ledger lock held, unless said otherwise)               */

static void counted_clear(counted_t *c)
{
    free(c->queue);
    free(c->app);
    free(c->user);
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
    c->req = pod->request;
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
    kq_pod_clear(&e->pod);
    counted_clear(&e->c);
    free(e->p_queue);
    free(e);
}

static bool is_ours(const kq_ledger_t *l, const kq_pod_t *pod)
{
    return l->scheduler_name != NULL && pod->scheduler_name != NULL &&
           strcmp(l->scheduler_name, pod->scheduler_name) == 0;
}

static void pending_drop(kq_ledger_t *l, entry_t *e)
{
    if (!e->pending)
        return;
    kq_ugm_pending_sub(l->ugm, e->p_queue, &e->p_req);
    free(e->p_queue);
    e->p_queue = NULL;
    e->pending = false;
}

/* Makes the pending resources of an unassigned pod match `pod`. */
static void pending_set(kq_ledger_t *l, entry_t *e, const kq_pod_t *pod)
{
    bool want = is_ours(l, pod) && pod->queue != NULL && !kq_resource_is_zero(&pod->request);
    if (e->pending && want && strcmp(e->p_queue, pod->queue) == 0 &&
        kq_resource_equal(&e->p_req, &pod->request))
        return;
    pending_drop(l, e);
    if (!want)
        return;
    char *q = strdup(pod->queue);
    if (q == NULL) {
        kq_error("event=pending_add_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name,
                 pod->uid);
        return;
    }
    kq_ugm_pending_add(l->ugm, q, &pod->request);
    e->p_queue = q;
    e->p_req = pod->request;
    e->pending = true;
}

/* Releases what the entry counted; the entry becomes PENDING (not counted). */
static void release(kq_ledger_t *l, entry_t *e)
{
    if (e->state == ST_PENDING)
        return;
    int rc = kq_ugm_decrease(l->ugm, e->c.queue, e->c.app, e->c.user, &e->c.req);
    if (rc != 0)
        kq_error("event=release_failed uid=%s queue=%s app=%s user=%s error=\"%s\"", e->uid, e->c.queue,
                 e->c.app, e->c.user, kq_strerror(rc));
    counted_clear(&e->c);
    e->state = ST_PENDING;
    l->n_counted--;
}

/* Releases everything and removes the entry from the table (not freed). */
static void unlink_entry(kq_ledger_t *l, entry_t *e)
{
    release(l, e);
    pending_drop(l, e);
    HASH_DEL(l->table, e);
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
    if (pod->queue == NULL)
        kq_warn("event=count_in_root pod=%s/%s uid=%s node=%s reason=\"%s\" msg=\"bound pod has no valid "
                "queue; counting it against root\"", pod->ns, pod->name, pod->uid, pod->node,
                pod->queue_error ? pod->queue_error : "no queue");
    kq_user_t u = counted_user(&c);
    int rc = kq_ugm_add_unchecked(l->ugm, c.queue, c.app, &u, &c.req);
    if (rc == KQ_EINVAL && strcmp(c.queue, "root") != 0) {
        kq_warn("event=count_in_root pod=%s/%s uid=%s queue=%s msg=\"engine rejected the queue; counting "
                "the bound pod against root\"", pod->ns, pod->name, pod->uid, c.queue);
        char *root = strdup("root");
        if (root != NULL) {
            free(c.queue);
            c.queue = root;
            rc = kq_ugm_add_unchecked(l->ugm, c.queue, c.app, &u, &c.req);
        }
    }
    if (rc != 0) {
        kq_error("event=count_failed pod=%s/%s uid=%s queue=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 c.queue, kq_strerror(rc));
        counted_clear(&c);
        return;
    }
    pending_drop(l, e);
    e->c = c;
    e->state = ST_BOUND;
    l->n_counted++;
    kq_debug("event=counted pod=%s/%s uid=%s queue=%s user=%s by=watch", pod->ns, pod->name, pod->uid,
             e->c.queue, e->c.user);
}

/* In-place resize of a counted pod: count the new request, then release the old one,
 * under the identity it was counted with. */
static void resize(kq_ledger_t *l, entry_t *e, const kq_pod_t *pod)
{
    if (kq_resource_equal(&e->c.req, &pod->request))
        return;
    kq_user_t u = counted_user(&e->c);
    int rc = kq_ugm_add_unchecked(l->ugm, e->c.queue, e->c.app, &u, &pod->request);
    if (rc != 0) {
        kq_error("event=resize_failed pod=%s/%s uid=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 kq_strerror(rc));
        return;
    }
    rc = kq_ugm_decrease(l->ugm, e->c.queue, e->c.app, e->c.user, &e->c.req);
    if (rc != 0)
        kq_error("event=resize_release_failed pod=%s/%s uid=%s error=\"%s\"", pod->ns, pod->name, pod->uid,
                 kq_strerror(rc));
    e->c.req = pod->request;
    kq_debug("event=resized pod=%s/%s uid=%s", pod->ns, pod->name, pod->uid);
}

static entry_t *entry_new(const char *uid)
{
    entry_t *e = calloc(1, sizeof(*e));
    if (e == NULL || (e->uid = strdup(uid)) == NULL) {
        free(e);
        return NULL;
    }
    return e;
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
    l->ugm = ugm;
    l->gen = 1;
    return l;
}

/* Frees the table. The engine is not touched: usage stays as counted. */
void kq_ledger_free(kq_ledger_t *l)
{
    if (l == NULL)
        return;
    entry_t *e, *tmp;
    HASH_ITER(hh, l->table, e, tmp) {
        HASH_DEL(l->table, e);
        entry_free(e);
    }
    pthread_mutex_destroy(&l->mu);
    free(l->scheduler_name);
    free(l);
}

int kq_ledger_check(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len)
{
    if (pod == NULL || pod->uid == NULL)
        return KQ_EINVAL;
    entry_t *e;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, pod->uid, e);
    bool counted = e != NULL && e->state != ST_PENDING;
    pthread_mutex_unlock(&l->mu);
    if (counted)
        return 0;
    if (pod->queue == NULL) {
        if (reason != NULL && reason_len > 0)
            snprintf(reason, reason_len, "%s", pod->queue_error ? pod->queue_error : "pod has no queue");
        return KQ_EDENIED;
    }
    kq_user_t u = {.name = pod->user, .groups = (const char *const *)pod->groups, .n_groups = pod->n_groups};
    return kq_ugm_check(l->ugm, pod->queue, pod->app_id, &u, &pod->request, reason, reason_len);
}

int kq_ledger_assume(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len)
{
    if (pod == NULL || pod->uid == NULL)
        return KQ_EINVAL;
    if (pod->queue == NULL) {
        if (reason != NULL && reason_len > 0)
            snprintf(reason, reason_len, "%s", pod->queue_error ? pod->queue_error : "pod has no queue");
        return KQ_EDENIED;
    }
    /* Everything that may fail to allocate, before the engine commits. */
    counted_t c;
    entry_t *fresh = entry_new(pod->uid);
    if (fresh == NULL || kq_pod_copy(&fresh->pod, pod) != 0) {
        entry_free(fresh);
        return KQ_ENOMEM;
    }
    if (counted_from_pod(&c, pod) != 0) {
        entry_free(fresh);
        return KQ_ENOMEM;
    }

    int rc;
    entry_t *e;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, pod->uid, e);
    if (e != NULL && e->state != ST_PENDING) {
        rc = 0; /* already counted: idempotent */
        goto out;
    }
    kq_user_t u = counted_user(&c);
    rc = kq_ugm_increase(l->ugm, c.queue, c.app, &u, &c.req, reason, reason_len);
    if (rc != 0)
        goto out;
    if (e == NULL) {
        e = fresh;
        fresh = NULL;
        HASH_ADD_KEYPTR(hh, l->table, e->uid, strlen(e->uid), e);
    } else if (!e->observed) {
        kq_pod_t old = e->pod;
        e->pod = fresh->pod;
        fresh->pod = old;
    }
    pending_drop(l, e);
    e->c = c;
    memset(&c, 0, sizeof(c));
    e->state = ST_ASSUMED;
    e->assumed_gen = l->gen;
    l->n_counted++;
out:
    pthread_mutex_unlock(&l->mu);
    if (rc == 0)
        kq_debug("event=assumed pod=%s/%s uid=%s queue=%s user=%s", pod->ns, pod->name, pod->uid, pod->queue,
                 pod->user);
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
    if (e == NULL || e->state != ST_ASSUMED) {
        rc = KQ_ENOENT;
        goto out;
    }
    release(l, e);
    if (!e->observed) {
        /* Known only from the bind: the watch will report it again if it exists. */
        unlink_entry(l, e);
        gone = e;
    } else {
        pending_set(l, e, &e->pod);
    }
out:
    pthread_mutex_unlock(&l->mu);
    entry_free(gone);
    return rc;
}

void kq_ledger_observe(kq_ledger_t *l, const kq_pod_t *pod)
{
    if (pod == NULL || pod->uid == NULL)
        return;
    bool terminal = kq_pod_is_terminal(pod);
    kq_pod_t copy;
    memset(&copy, 0, sizeof(copy));
    if (!terminal && kq_pod_copy(&copy, pod) != 0) {
        kq_error("event=observe_failed pod=%s/%s uid=%s error=\"out of memory\"", pod->ns, pod->name, pod->uid);
        return;
    }

    entry_t *e, *gone = NULL;
    pthread_mutex_lock(&l->mu);
    HASH_FIND_STR(l->table, pod->uid, e);
    if (terminal) {
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
    {
        kq_pod_t old = e->pod;
        e->pod = copy;
        copy = old; /* freed after unlock */
    }
    if (pod->node != NULL) {
        if (e->state == ST_PENDING) {
            count_bound(l, e, pod);
        } else {
            e->state = ST_BOUND;
            resize(l, e, pod);
        }
    } else if (e->state == ST_PENDING) {
        pending_set(l, e, pod);
    }
    /* else ASSUMED without a node: the bind is in flight and the watch lags; keep it.
     * (BOUND without a node cannot happen: spec.nodeName never goes back to empty.) */
out:
    pthread_mutex_unlock(&l->mu);
    kq_pod_clear(&copy);
    entry_free(gone);
}

void kq_ledger_remove(kq_ledger_t *l, const char *uid)
{
    entry_t *e;
    pthread_mutex_lock(&l->mu);
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
            if (e->seen_gen == l->gen || (e->state == ST_ASSUMED && e->assumed_gen == l->gen))
                continue;
            unlink_entry(l, e);
            e->hh.next = gone; /* reuse the handle as a free list */
            gone = e;
            n++;
        }
        l->resyncing = false;
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
    rc = e ? kq_pod_copy(out, &e->pod) : KQ_ENOENT;
    pthread_mutex_unlock(&l->mu);
    return rc;
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

size_t kq_ledger_size(kq_ledger_t *l, size_t *counted)
{
    pthread_mutex_lock(&l->mu);
    size_t n = HASH_COUNT(l->table);
    if (counted != NULL)
        *counted = l->n_counted;
    pthread_mutex_unlock(&l->mu);
    return n;
}
