/* Requeue pokes (requeue.h): a capped table of the pods the filter denied lately; when the
 * ledger releases usage, the recent ones get an annotation so that kube-scheduler retries
 * them at once instead of after its 5-minute flush.
 *
 * DESIGN
 * - The table is a uthash keyed by pod uid, kept in insertion order (a new denial of a pod
 *   moves it to the tail), so expired entries are dropped from the head: recording a
 *   denial is O(1) amortised, and no entry outlives window_s unless a poke of it is due.
 * - Releases are counted in an atomic sequence. Filter reads it before deciding (the mark)
 *   and records it with the denial: a denial whose mark is below the sequence when the
 *   worker looks was decided before some release was applied, so it may have counted what
 *   was released. A denial recorded after the worker already handled that release (the
 *   decision ran across it) is due at once.
 * - rq->mu guards everything but the sequence; it is a leaf under the ledger's lock
 *   (kq_requeue_released runs in the ledger's release()). The worker copies due pods out,
 *   unlocks, pokes, and puts back the pokes the writer could not queue.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strndup */
#endif
#include "kubequota/control/requeue.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "kubequota/base/log.h"
#include "kubequota/kube/kube.h"

#define BATCH_MAX 64        /* pokes copied out per pass */
#define DUE_RETRY_S 0.2     /* how soon the worker looks again while pokes wait */
#define IDLE_S 1.0          /* how often an idle worker prunes */
#define NAME_MAX_BYTES 253  /* namespace and name as the API server allows them */
#define UID_MAX_BYTES 128

typedef struct denial {
    UT_hash_handle hh;
    double at;        /* monotonic seconds of the latest denial */
    uint64_t mark;    /* release sequence before that decision */
    double last_poke; /* monotonic seconds of the last poke, < 0: never */
    bool due;         /* a poke is due */
    bool poked;       /* the latest denial has been poked */
    char *ns, *name;
    char uid[];       /* key */
} denial_t;

struct kq_requeue {
    pthread_mutex_t mu; /* everything below but seq */
    pthread_cond_t cond;
    kq_requeue_opts_t o;
    kq_requeue_poke_fn poke;
    void *ud;
    denial_t *table;
    size_t n, n_due;
    atomic_uint_least64_t seq; /* releases so far */
    uint64_t seen;             /* the sequence the worker last matched against */
    double released_at;        /* monotonic seconds of the latest release */
    bool stop, started;
    pthread_t thread;
    unsigned long poked, deferred;
};

static double mono_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void kq_requeue_opts_default(kq_requeue_opts_t *o)
{
    o->window_s = 10;
    o->min_interval_s = 2;
    o->max_pods = 4096;
}

bool kq_requeue_kind_liftable(kq_denial_t kind)
{
    return kind == KQ_DENIAL_OVER_LIMIT || kind == KQ_DENIAL_OVER_RUNTIME || kind == KQ_DENIAL_APP_OWNER;
}

kq_requeue_t *kq_requeue_new(const kq_requeue_opts_t *opts, kq_requeue_poke_fn poke, void *ud)
{
    kq_requeue_t *rq = calloc(1, sizeof(*rq));
    if (rq == NULL)
        return NULL;
    if (opts != NULL)
        rq->o = *opts;
    else
        kq_requeue_opts_default(&rq->o);
    if (rq->o.max_pods == 0)
        rq->o.max_pods = 1;
    rq->poke = poke;
    rq->ud = ud;
    atomic_init(&rq->seq, 0);
    pthread_mutex_init(&rq->mu, NULL);
    pthread_cond_init(&rq->cond, NULL);
    return rq;
}

/* ------------------------------------------------------------------ table (mu held) */

static void set_due(kq_requeue_t *rq, denial_t *d, bool due)
{
    if (d->due != due)
        rq->n_due += due ? 1 : (size_t)-1;
    d->due = due;
}

static void drop(kq_requeue_t *rq, denial_t *d)
{
    set_due(rq, d, false);
    HASH_DEL(rq->table, d);
    rq->n--;
    free(d->ns);
    free(d->name);
    free(d);
}

/* Drops from the head the entries older than the window with nothing due and no recent
 * poke (the poke interval must outlive them), then the oldest beyond max_pods. */
static void prune(kq_requeue_t *rq, double now)
{
    denial_t *d, *tmp;
    HASH_ITER(hh, rq->table, d, tmp) {
        bool old = now - d->at > rq->o.window_s && !d->due &&
                   (d->last_poke < 0 || now - d->last_poke >= rq->o.min_interval_s);
        if (!old && rq->n <= rq->o.max_pods)
            break;
        drop(rq, d);
    }
}

/* ------------------------------------------------------------------ recording */

uint64_t kq_requeue_mark(kq_requeue_t *rq)
{
    return rq != NULL ? atomic_load(&rq->seq) : 0;
}

void kq_requeue_denied(kq_requeue_t *rq, const char *ns, const char *name, const char *uid, uint64_t mark)
{
    kq_requeue_denied_at(rq, ns, name, uid, mark, mono_now());
}

void kq_requeue_denied_at(kq_requeue_t *rq, const char *ns, const char *name, const char *uid, uint64_t mark,
                          double now)
{
    if (rq == NULL || ns == NULL || name == NULL || uid == NULL || uid[0] == '\0')
        return;
    size_t ulen = strnlen(uid, UID_MAX_BYTES + 1);
    if (ulen > UID_MAX_BYTES)
        return;
    /* a new entry is built outside the lock (most denials repeat a known pod, though) */
    denial_t *fresh = calloc(1, sizeof(*fresh) + ulen + 1);
    if (fresh == NULL || (fresh->ns = strndup(ns, NAME_MAX_BYTES)) == NULL ||
        (fresh->name = strndup(name, NAME_MAX_BYTES)) == NULL) {
        if (fresh != NULL) {
            free(fresh->ns);
            free(fresh);
        }
        return;
    }
    memcpy(fresh->uid, uid, ulen + 1);
    fresh->last_poke = -1;

    pthread_mutex_lock(&rq->mu);
    denial_t *d = NULL;
    HASH_FIND_STR(rq->table, uid, d);
    if (d != NULL) { /* the pod again: its latest denial, at the tail */
        HASH_DEL(rq->table, d);
        HASH_ADD_STR(rq->table, uid, d);
    } else {
        d = fresh;
        fresh = NULL;
        HASH_ADD_STR(rq->table, uid, d);
        rq->n++;
    }
    d->at = now;
    d->mark = mark;
    d->poked = false;
    /* A release applied while the decision ran, and already matched by the worker: due now. */
    bool due = mark < rq->seen;
    set_due(rq, d, due);
    prune(rq, now);
    if (due)
        pthread_cond_signal(&rq->cond);
    pthread_mutex_unlock(&rq->mu);
    if (fresh != NULL) {
        free(fresh->ns);
        free(fresh->name);
        free(fresh);
    }
}

void kq_requeue_released(void *ud)
{
    kq_requeue_released_at(ud, mono_now());
}

void kq_requeue_released_at(kq_requeue_t *rq, double now)
{
    if (rq == NULL)
        return;
    pthread_mutex_lock(&rq->mu);
    rq->released_at = now;
    atomic_fetch_add(&rq->seq, 1);
    pthread_cond_signal(&rq->cond);
    pthread_mutex_unlock(&rq->mu);
}

/* ------------------------------------------------------------------ the worker */

typedef struct poke {
    char *ns, *name, *uid;
    double prev_poke;
} poke_t;

static void poke_clear(poke_t *p)
{
    free(p->ns);
    free(p->name);
    free(p->uid);
}

/* RFC 3339 UTC with milliseconds: a new value on every poke (the same value would not
 * change the pod, and kube-scheduler would see no update). */
static void poke_value(char *out, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char base[32];
    strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, len, "%s.%03ldZ", base, ts.tv_nsec / 1000000);
}

size_t kq_requeue_run(kq_requeue_t *rq, double now)
{
    if (rq == NULL)
        return 0;
    poke_t batch[BATCH_MAX];
    size_t nb = 0;
    pthread_mutex_lock(&rq->mu);
    uint64_t seq = atomic_load(&rq->seq);
    denial_t *d, *tmp;
    if (seq != rq->seen) {
        /* decided before a release was applied, and recent then: its decision may have
         * counted what was released */
        HASH_ITER(hh, rq->table, d, tmp) {
            if (!d->poked && d->mark < seq && rq->released_at - d->at <= rq->o.window_s)
                set_due(rq, d, true);
        }
        rq->seen = seq;
    }
    if (rq->n_due > 0) {
        HASH_ITER(hh, rq->table, d, tmp) {
            if (nb == BATCH_MAX)
                break;
            if (!d->due || (d->last_poke >= 0 && now - d->last_poke < rq->o.min_interval_s))
                continue;
            poke_t *p = &batch[nb];
            p->ns = strdup(d->ns);
            p->name = strdup(d->name);
            p->uid = strdup(d->uid);
            p->prev_poke = d->last_poke;
            if (p->ns == NULL || p->name == NULL || p->uid == NULL) {
                poke_clear(p);
                break;
            }
            nb++;
            set_due(rq, d, false);
            d->poked = true;
            d->last_poke = now;
        }
    }
    prune(rq, now);
    pthread_mutex_unlock(&rq->mu);

    size_t done = 0;
    char value[48];
    poke_value(value, sizeof(value));
    for (; done < nb; done++) {
        poke_t *p = &batch[done];
        if (rq->poke == NULL || !rq->poke(rq->ud, p->ns, p->name, p->uid, KQ_REQUEUE_ANNOTATION, value))
            break;
        kq_debug("event=requeue_poke pod=%s/%s uid=%s msg=\"denied shortly before usage was released\"", p->ns,
                 p->name, p->uid);
    }
    if (done > 0) /* one line per pass, not per pod */
        kq_info("event=requeue_poked pods=%zu first=%s/%s msg=\"pods denied shortly before usage was released "
                "were annotated %s so that the scheduler retries them\"",
                done, batch[0].ns, batch[0].name, KQ_REQUEUE_ANNOTATION);
    pthread_mutex_lock(&rq->mu);
    rq->poked += done;
    for (size_t i = done; i < nb; i++) { /* the writer is full: due again, as before */
        HASH_FIND_STR(rq->table, batch[i].uid, d);
        if (d != NULL && d->poked && d->last_poke == now) {
            d->poked = false;
            d->last_poke = batch[i].prev_poke;
            set_due(rq, d, true);
        }
        rq->deferred++;
    }
    pthread_mutex_unlock(&rq->mu);
    for (size_t i = 0; i < nb; i++)
        poke_clear(&batch[i]);
    return done;
}

static void *worker_main(void *arg)
{
    kq_requeue_t *rq = arg;
    pthread_mutex_lock(&rq->mu);
    while (!rq->stop) {
        if (atomic_load(&rq->seq) == rq->seen) {
            double wait = rq->n_due > 0 ? DUE_RETRY_S : IDLE_S;
            struct timespec until;
            clock_gettime(CLOCK_REALTIME, &until);
            long ns = until.tv_nsec + (long)(wait * 1e9);
            until.tv_sec += ns / 1000000000L;
            until.tv_nsec = ns % 1000000000L;
            (void)pthread_cond_timedwait(&rq->cond, &rq->mu, &until);
            if (rq->stop)
                break;
        }
        pthread_mutex_unlock(&rq->mu);
        (void)kq_requeue_run(rq, mono_now());
        pthread_mutex_lock(&rq->mu);
    }
    pthread_mutex_unlock(&rq->mu);
    return NULL;
}

int kq_requeue_start(kq_requeue_t *rq)
{
    if (rq == NULL)
        return KQ_EINVAL;
    pthread_mutex_lock(&rq->mu);
    bool started = rq->started;
    if (!started && pthread_create(&rq->thread, NULL, worker_main, rq) == 0)
        rq->started = started = true;
    pthread_mutex_unlock(&rq->mu);
    return started ? 0 : KQ_ENOMEM;
}

void kq_requeue_free(kq_requeue_t *rq)
{
    if (rq == NULL)
        return;
    pthread_mutex_lock(&rq->mu);
    rq->stop = true;
    bool started = rq->started;
    pthread_cond_signal(&rq->cond);
    pthread_mutex_unlock(&rq->mu);
    if (started)
        pthread_join(rq->thread, NULL);
    denial_t *d, *tmp;
    HASH_ITER(hh, rq->table, d, tmp) {
        drop(rq, d);
    }
    pthread_cond_destroy(&rq->cond);
    pthread_mutex_destroy(&rq->mu);
    free(rq);
}

size_t kq_requeue_size(kq_requeue_t *rq)
{
    if (rq == NULL)
        return 0;
    pthread_mutex_lock(&rq->mu);
    size_t n = rq->n;
    pthread_mutex_unlock(&rq->mu);
    return n;
}

void kq_requeue_stats(kq_requeue_t *rq, unsigned long *poked, unsigned long *deferred)
{
    unsigned long p = 0, q = 0;
    if (rq != NULL) {
        pthread_mutex_lock(&rq->mu);
        p = rq->poked;
        q = rq->deferred;
        pthread_mutex_unlock(&rq->mu);
    }
    if (poked != NULL)
        *poked = p;
    if (deferred != NULL)
        *deferred = q;
}

bool kq_requeue_poke_kube(void *ud, const char *ns, const char *name, const char *uid, const char *key,
                          const char *value)
{
    return kq_kube_pod_annotate(ud, ns, name, uid, key, value);
}
