/* Admission controller behind the scheduling gate "kubequota.io/admission": releases gated
 * pods when they fit, in weighted fair order across the users of each queue. The policy,
 * the restart semantics and the lock order are in include/kubequota/control/gating.h and
 * docs/gating.md.
 *
 * Structures: every gated pod we know is a gpod_t in a uid table. A waiting gpod sits in
 * its guser_t's binary heap (priority, age, arrival); every guser_t with waiting pods
 * sits in its gqueue_t's heap keyed by pass (stride scheduling). A released gpod leaves
 * the heaps (releasing = true) and stays in the table until the watch shows its gate
 * gone, so a refused patch can put it back. A gpod that can never fit as it is is set aside:
 * out of the heaps, in kq_gating.never (still counted in its queue's waiting), until a
 * reload or the timed pass puts it back in its user's heap to be checked again.
 *
 * DESIGN: one thread runs passes (woken by the informer's events, at least every
 * interval). g->mu guards everything in struct kq_gating except what is marked otherwise
 * (the pods, users, queues, heaps, parked and never sets, counters); g->o and g->app are
 * set before the thread starts and only read after. A pass holds g->mu
 * while it chooses and reserves, in fair order (the ledger's lock nests inside: gating ->
 * ledger -> ugm -> quota tree), and logs each decision (event=gate_released) there, so the
 * log has the release order. Then it unlocks and does the API calls (patches, Events).
 * The gate removals of one pass go out from up to o.ungate_parallel threads at once (the
 * controller thread and short-lived helpers, joined before the pass's Events): they share
 * only the pass's worklist, read-only, and an atomic index into it; each takes the ledger's
 * lock alone (kq_ledger_unreserve) and then g->mu, never both, and only for a failed
 * removal. Which pods a pass releases, and in what order, is decided under g->mu; which
 * PATCH lands first is not an order anyone may rely on. Only the leader passes; every
 * replica follows the gated pods (so a new leader starts at once) and expires old
 * reservations in its own ledger.
 */
#include "kubequota/control/gating.h"
#include "kubequota/control/elastic.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"
#include "kubequota/control/ledger.h"
#include "kubequota/control/metering.h"
#include "kubequota/control/profiles.h"
#include "kubequota/control/resolve.h"
#include "kubequota/control/slices.h"
#include "kubequota/engine/fairshare.h"
#include "kubequota/kube/kube.h"

const double kq_gating_wait_bounds[KQ_GATING_WAIT_BUCKETS] = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800};

/* ------------------------------------------------------------------ binary heap */

typedef bool (*less_fn)(const void *a, const void *b);
typedef void (*idx_fn)(void *x, size_t i);

typedef struct heap {
    void **v;
    size_t n, cap;
} heap_t;

static void h_set(heap_t *h, size_t i, void *x, idx_fn setidx)
{
    h->v[i] = x;
    if (setidx)
        setidx(x, i);
}

static void h_up(heap_t *h, size_t i, less_fn less, idx_fn setidx)
{
    void *x = h->v[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!less(x, h->v[p]))
            break;
        h_set(h, i, h->v[p], setidx);
        i = p;
    }
    h_set(h, i, x, setidx);
}

static void h_down(heap_t *h, size_t i, less_fn less, idx_fn setidx)
{
    void *x = h->v[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && less(h->v[c + 1], h->v[c]))
            c++;
        if (!less(h->v[c], x))
            break;
        h_set(h, i, h->v[c], setidx);
        i = c;
    }
    h_set(h, i, x, setidx);
}

static int h_push(heap_t *h, void *x, less_fn less, idx_fn setidx)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 8;
        void **v = realloc(h->v, cap * sizeof(*v));
        if (v == NULL)
            return KQ_ENOMEM;
        h->v = v;
        h->cap = cap;
    }
    h->v[h->n++] = x;
    h_up(h, h->n - 1, less, setidx);
    return 0;
}

/* Removes the element at i and returns it. */
static void *h_remove(heap_t *h, size_t i, less_fn less, idx_fn setidx)
{
    void *x = h->v[i];
    h->n--;
    if (i < h->n) {
        h_set(h, i, h->v[h->n], setidx);
        h_down(h, i, less, setidx);
        h_up(h, i, less, setidx);
    }
    if (setidx)
        setidx(x, SIZE_MAX);
    return x;
}

/* ------------------------------------------------------------------ state */

struct guser;
struct gqueue;
struct ggang;

typedef struct gpod {
    char *uid; /* key */
    UT_hash_handle hh;
    kq_pod_t pod;
    struct guser *user; /* NULL while releasing */
    size_t hidx;
    uint64_t seq;
    int64_t since_ms;   /* monotonic ms when first seen gated */
    bool releasing;     /* reserved and (being) ungated */
    uint64_t seen_gen;
    uint64_t posted_ver; /* the user's reason version its last Event said (0: none) */
    struct ggang *gang;  /* its gang while the gang has not started, else NULL */
    size_t gidx;         /* its index in gang->v */
    /* Set aside (never fits, below): out of its user's heap, counted in nq->waiting. */
    char *never;         /* why it can never fit as it is (last check); NULL: it may */
    char *never_key;     /* that, without the usage it names: a new Event only when this changes */
    struct gqueue *nq;   /* its queue while set aside */
    size_t nidx;         /* its index in kq_gating.never while set aside, SIZE_MAX: not */
} gpod_t;

/* A gang (kq_pod_t.gang) of one user in one queue: its waiting pods are released all
 * together, gang_min of them at once; after that ("started") the rest go one by one. */
typedef struct ggang {
    char *key; /* queue "\n" user "\n" gang */
    UT_hash_handle hh;
    uint32_t min;
    gpod_t **v; /* waiting members */
    size_t n, cap;
    bool started;
} ggang_t;

typedef struct guser {
    char *key; /* queue "\n" user */
    UT_hash_handle hh;
    struct gqueue *q;
    char *name;
    heap_t pods;
    double pass, weight;
    size_t qidx; /* SIZE_MAX: not in its queue's heap */
    uint64_t seq;
    char *reason;         /* why its head pod waits (last pass), NULL: not decided yet */
    uint64_t reason_ver;  /* bumped when reason changes */
    size_t fresh;         /* pods enqueued since its pods' Events were last brought up to date */
    bool parked;          /* blocked by a limit that only some pods' end can lift: out of the heap */
    size_t pidx;          /* its index in its parkset_t while parked */
    char *pkey;           /* the parkset it is in (owned) while parked */
    char *woken;          /* "g:<group>": woken from that group's parkset, not tried since */
} guser_t;

/* The parked guser_t waiting for the same kind of change, across queues (a limit may sit on
 * a parent queue). Keys: "u:<user>" (a limit of the user's own, or an ACL), "g:<group>"
 * (a group limit), "q:" (a quota group's max or runtime: any pod that ends may lift it). */
typedef struct parkset {
    char *key;
    UT_hash_handle hh;
    guser_t **v;
    size_t n, cap;
} parkset_t;

typedef struct gqueue {
    char *path; /* key ("" for pods without a valid queue) */
    UT_hash_handle hh;
    heap_t users;
    bool usage;         /* policy "usage": a user's pass is its weighted dominant share */
    double halflife;    /* seconds, of the usage history (policy "usage") */
    kq_resource_t caps; /* per resource, the smallest resources.max on the queue's path */
    double vclock;
    size_t waiting;
    char *full;   /* the queue-level denial that ended the last pass early, NULL: none */
    size_t fresh; /* pods enqueued since the users' reasons were last brought up to date */
} gqueue_t;

typedef struct ucount {
    char *user;
    UT_hash_handle hh;
    unsigned long n;
} ucount_t;

struct kq_gating {
    kq_app_t *app;
    kq_gating_opts_t o;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool started, stop, dirty;
    gpod_t *pods;
    gqueue_t *queues;
    guser_t *users;
    ucount_t *ucounts;
    parkset_t *parked;
    ggang_t *gangs;
    gpod_t **never; /* pods set aside because they can never fit as they are */
    size_t n_never, cap_never;
    uint64_t seq, gen;
    bool resyncing;
    kq_config_t *cfg; /* the snapshot the weights were read from (a reference) */
    kq_fairshare_t *fs; /* usage history (owned; the ledger reports to it) */
    /* usage history checkpoint (controller thread only, no lock): */
    bool fs_loaded;     /* merged from the ConfigMap since this replica last became leader */
    char *fs_rv;        /* the ConfigMap's resourceVersion we last saw; NULL: none */
    int64_t fs_saved_ms, fs_retry_ms;
    bool fs_off;        /* refused (403): no checkpoint at all, said once */
    size_t waiting, n_parked;
    unsigned long releases, patch_errors, expired;
    unsigned long usage_saves, usage_save_errors; /* written by the controller thread under mu */
    double usage_saved_at;
    unsigned long wait_bucket[KQ_GATING_WAIT_BUCKETS];
    double wait_sum;
    unsigned long wait_count;
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool pod_less(const void *a, const void *b)
{
    const gpod_t *x = a, *y = b;
    if (x->pod.priority != y->pod.priority)
        return x->pod.priority > y->pod.priority;
    if (x->pod.created != y->pod.created)
        return x->pod.created < y->pod.created;
    return x->seq < y->seq;
}

static void pod_idx(void *x, size_t i)
{
    ((gpod_t *)x)->hidx = i;
}

static bool user_less(const void *a, const void *b)
{
    const guser_t *x = a, *y = b;
    if (x->pass != y->pass)
        return x->pass < y->pass;
    return x->seq < y->seq;
}

static void user_idx(void *x, size_t i)
{
    ((guser_t *)x)->qidx = i;
}

/* The size of a set for the order: cpu millicores, else memory MiB, else 0. */
static double res_cost(const kq_resource_t *r)
{
    int64_t v = kq_resource_get(r, "cpu", NULL);
    if (v > 0)
        return (double)v;
    v = kq_resource_get(r, "memory", NULL) / (1024 * 1024);
    return v > 0 ? (double)v : 0.0;
}

/* DRA (issue 39): what the devices of a pod's claims stand for, in cpu millicores of the
 * queue, so that they weigh in the same order as cpu. A resource of a device class,
 * "<class>.deviceclass.resource.k8s.io/<name>" (a device count, or a counter of
 * partitionable devices), that the queue's path caps, as does cpu: amount * cpu cap / its
 * cap (its share of the queue, in the queue's cpu: 2 of 8 GPUs in a 16-cpu queue stand for
 * 4 cpu). A device count nobody caps: DEVICE_COST_M per device (one cpu); a counter nobody
 * caps: nothing (its devices are counted already). The largest over those resources (the
 * dominant one, as policy usage's share; Kueue likewise counts a DeviceClass as a resource
 * of a ClusterQueue's usage, which its fair sharing's dominant share reads: kubernetes-sigs/
 * kueue keps/2941-DRA); 0 without any. O(names in r). */
#define DEVICE_COST_M 1000.0

static double device_cost(const gqueue_t *q, const kq_resource_t *r)
{
    const kq_res_entry_t *e = KQ_RES_E(r);
    double cpu = (double)kq_resource_get(&q->caps, "cpu", NULL), top = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        if (e[i].value <= 0 || strstr(e[i].name, KQ_DRA_CLASS_SUFFIX) == NULL)
            continue;
        bool count = kq_dra_is_devices(e[i].name);
        double cap = (double)kq_resource_get(&q->caps, e[i].name, NULL), c = 0;
        if (cap > 0 && cpu > 0)
            c = (double)e[i].value * cpu / cap;
        else if (count)
            c = (double)e[i].value * DEVICE_COST_M;
        if (c > top)
            top = c;
    }
    return top;
}

/* What a release of a pod charged `r` costs a user's pass (policy "fair"): the larger of
 * res_cost and device_cost, at least 1. r is what the ledger charged it (request plus its
 * claims' devices, kq_ledger_reserve_charged), so a pod of 8 GPUs and no cpu does not cost
 * the minimum. */
static double pod_cost(const gqueue_t *q, const kq_resource_t *r)
{
    double c = res_cost(r), d = device_cost(q, r);
    if (d > c)
        c = d;
    return c > 0 ? c : 1.0;
}

/* A set's share of a queue (policy "usage"): its dominant share of the queue's caps, with
 * the devices nobody caps weighed as device_cost says (over the queue's cpu cap); a queue
 * without resources.max on its path ranks by the fair cost instead. */
static double res_share(const gqueue_t *q, const kq_resource_t *r)
{
    double s = kq_fairshare_dominant(r, &q->caps);
    if (s < 0) {
        double c = res_cost(r), d = device_cost(q, r);
        return d > c ? d : c;
    }
    double cpu = (double)kq_resource_get(&q->caps, "cpu", NULL);
    if (cpu > 0) {
        double d = device_cost(q, r) / cpu;
        if (d > s)
            s = d;
    }
    return s;
}

/* A user's pass under policy "usage": the dominant share of max(average, current) of its
 * usage in the queue, divided by its weight. */
static double usage_pass(kq_gating_t *g, const guser_t *u, double now)
{
    kq_resource_t use;
    kq_resource_init(&use);
    double s = 0;
    if (kq_fairshare_usage(g->fs, u->q->path, u->name, now, &use) == 0)
        s = res_share(u->q, &use);
    kq_resource_free(&use);
    return s / (u->weight > 0 ? u->weight : 1.0);
}

/* What the REST view's simulation adds to a user's pass for one more release: by what the
 * pod would be charged now (its claims' devices too: kq_ledger_charge, one lookup per claim;
 * a pod without claims takes no ledger lock). Lock held (gating -> ledger -> claims). */
static double pod_step(kq_gating_t *g, const gqueue_t *q, const guser_t *u, const kq_pod_t *p)
{
    kq_resource_t ch = KQ_RESOURCE_EMPTY;
    const kq_resource_t *r = &p->request;
    if (p->n_claims > 0 && g->app->ledger != NULL && kq_ledger_charge(g->app->ledger, p, &ch) == 0)
        r = &ch;
    double c = q->usage ? res_share(q, r) : pod_cost(q, r);
    kq_resource_free(&ch);
    return c / (u->weight > 0 ? u->weight : 1.0);
}

/* Sets u's pass and restores its place in its queue's heap (lock held). */
static void repass(guser_t *u, double pass)
{
    if (u->pass == pass)
        return;
    u->pass = pass;
    if (u->qidx != SIZE_MAX) {
        h_up(&u->q->users, u->qidx, user_less, user_idx);
        h_down(&u->q->users, u->qidx, user_less, user_idx);
    }
}

double kq_gating_weight(const kq_queue_conf_t *q, const char *user, const char *const *groups, size_t n_groups)
{
    if (q == NULL)
        return 1.0;
    size_t lu = strlen(KQ_PROP_GATING_WEIGHT_USER), lg = strlen(KQ_PROP_GATING_WEIGHT_GROUP);
    double best = 0;
    for (size_t i = 0; i < q->n_properties; i++) {
        const kq_property_t *p = &q->properties[i];
        double w = strtod(p->value, NULL);
        if (!(w > 0) || !isfinite(w))
            continue;
        if (user != NULL && strncmp(p->key, KQ_PROP_GATING_WEIGHT_USER, lu) == 0 && strcmp(p->key + lu, user) == 0)
            return w;
        if (strncmp(p->key, KQ_PROP_GATING_WEIGHT_GROUP, lg) == 0)
            for (size_t k = 0; k < n_groups; k++)
                if (strcmp(p->key + lg, groups[k]) == 0 && w > best)
                    best = w;
    }
    return best > 0 ? best : 1.0;
}

static const kq_queue_conf_t *queue_conf(kq_gating_t *g, const char *path)
{
    if (g->cfg == NULL || path == NULL || *path == '\0')
        return NULL;
    const kq_partition_conf_t *part = kq_config_partition(g->cfg, g->app->partition);
    return part ? kq_config_queue(part, path) : NULL;
}

/* The queue's configuration, else its nearest configured ancestor's (a dynamic queue that
 * placement created below a parent takes the parent's gating properties); NULL: none. */
static const kq_queue_conf_t *queue_conf_near(kq_gating_t *g, const char *path)
{
    const kq_queue_conf_t *c = queue_conf(g, path);
    if (c != NULL || path == NULL)
        return c;
    char buf[KQ_UGM_PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return NULL;
    char *dot;
    while (c == NULL && (dot = strrchr(buf, '.')) != NULL) {
        *dot = '\0';
        c = queue_conf(g, buf);
    }
    return c;
}

/* A gating property of the queue, else of its nearest ancestor that has it; NULL: none. */
static const char *inherited_property(const kq_queue_conf_t *q, const char *key)
{
    for (; q != NULL; q = q->parent)
        for (size_t i = 0; i < q->n_properties; i++)
            if (strcmp(q->properties[i].key, key) == 0)
                return q->properties[i].value;
    return NULL;
}

/* Whether c (a queue's configuration, or its nearest configured ancestor's) makes it a
 * usage queue, and the half-life of its history in seconds (default 1h). */
static bool usage_policy(const kq_queue_conf_t *c, double *halflife_s)
{
    const char *pol = inherited_property(c, KQ_PROP_GATING_POLICY);
    const char *hl = inherited_property(c, KQ_PROP_GATING_HALFLIFE);
    long ms = 3600 * 1000L;
    if (hl != NULL && kq_duration_parse(hl, 0, &ms, NULL, 0) != 0)
        ms = 3600 * 1000L; /* the configuration was validated: not reached */
    *halflife_s = (double)ms / 1000.0;
    return pol != NULL && strcmp(pol, "usage") == 0;
}

/* Tracks queue in the usage history with its half-life (lock held). */
static void track(kq_gating_t *g, const char *queue, double halflife_s)
{
    if (kq_fairshare_set_halflife(g->fs, queue, halflife_s, kq_fairshare_now()) != 0)
        kq_error("event=gating_halflife_failed queue=%s error=\"out of memory\"", queue);
}

/* Every waiting user of q takes its pass afresh (policy usage: its weighted share; fair:
 * the queue's current pass) and q's heap is rebuilt: O(users of q) (lock held). */
static void repass_all(kq_gating_t *g, gqueue_t *q)
{
    double now = kq_fairshare_now();
    for (size_t i = 0; i < q->users.n; i++) {
        guser_t *u = q->users.v[i];
        u->pass = q->usage ? usage_pass(g, u, now) : q->vclock;
    }
    for (size_t i = q->users.n / 2; i-- > 0;)
        h_down(&q->users, i, user_less, user_idx);
}

/* Policy, half-life and caps of a queue from the configuration (lock held). */
static void queue_policy(kq_gating_t *g, gqueue_t *q)
{
    const kq_queue_conf_t *c = queue_conf_near(g, q->path);
    bool usage = usage_policy(c, &q->halflife);
    kq_resource_clear(&q->caps);
    for (const kq_queue_conf_t *a = c; a != NULL; a = a->parent) {
        if (!a->has_max)
            continue;
        const kq_res_entry_t *e = KQ_RES_E(&a->max);
        for (uint32_t i = 0; i < a->max.n; i++) {
            bool have = false;
            int64_t v = kq_resource_get(&q->caps, e[i].name, &have);
            if ((!have || e[i].value < v) && kq_resource_put(&q->caps, e[i].name, e[i].value) != 0)
                kq_error("event=gating_caps_failed queue=%s error=\"out of memory\"", q->path);
        }
    }
    if (usage)
        track(g, q->path, q->halflife);
    if (usage != q->usage) { /* every user's pass changes meaning */
        q->usage = usage;
        repass_all(g, q);
    }
}

static void user_weigh(kq_gating_t *g, guser_t *u, const kq_pod_t *p)
{
    u->weight = kq_gating_weight(queue_conf_near(g, u->q->path), p->user, (const char *const *)p->groups, p->n_groups);
}

static void gpod_free(gpod_t *gp)
{
    if (gp == NULL)
        return;
    free(gp->uid);
    free(gp->never);
    free(gp->never_key);
    kq_pod_clear(&gp->pod);
    free(gp);
}

static void queue_free(gqueue_t *q)
{
    free(q->path);
    free(q->full);
    free(q->users.v);
    kq_resource_free(&q->caps);
    free(q);
}

static void user_free(guser_t *u)
{
    free(u->key);
    free(u->name);
    free(u->reason);
    free(u->pkey);
    free(u->woken);
    free(u->pods.v);
    free(u);
}

/* ---- parking: a user blocked by a limit that only the end of some pods can lift is not
 * offered a release again until such a pod ends or goes away (its own for a user limit or an
 * ACL; any member's for a group limit; any pod for a quota group), a pod of the user
 * arrives, or the configuration changes, and at the latest at the next timed pass. So a
 * pass does not retry every such user. */

/* The parkset key for a denial, NULL when the denial does not park (a queue's own limits
 * end the pass instead; anything else is tried again next pass). */
static char *park_key(const guser_t *u, const char *reason)
{
    char *k = NULL;
    const char *e;
    if (strncmp(reason, "user ", 5) == 0) {
        if (asprintf(&k, "u:%s", u->name) < 0)
            k = NULL;
    } else if (strncmp(reason, "group ", 6) == 0 && (e = strstr(reason + 6, " in queue ")) != NULL) {
        if (asprintf(&k, "g:%.*s", (int)(e - (reason + 6)), reason + 6) < 0)
            k = NULL;
    } else if (strncmp(reason, "quota group ", 12) == 0) {
        k = strdup("q:");
    }
    return k;
}

/* Parks u under key (taken over; lock held). */
static void park(kq_gating_t *g, guser_t *u, char *key)
{
    parkset_t *ps;
    HASH_FIND_STR(g->parked, key, ps);
    if (ps == NULL) {
        if ((ps = calloc(1, sizeof(*ps))) == NULL || (ps->key = strdup(key)) == NULL) {
            free(ps);
            goto fallback;
        }
        HASH_ADD_KEYPTR(hh, g->parked, ps->key, strlen(ps->key), ps);
    }
    if (ps->n == ps->cap) {
        size_t cap = ps->cap ? 2 * ps->cap : 4;
        guser_t **v = realloc(ps->v, cap * sizeof(*v));
        if (v == NULL)
            goto fallback;
        ps->v = v;
        ps->cap = cap;
    }
    u->pidx = ps->n;
    ps->v[ps->n++] = u;
    u->parked = true;
    g->n_parked++;
    free(u->pkey);
    u->pkey = key;
    return;
fallback: /* cannot park it: back in the heap */
    free(key);
    if (h_push(&u->q->users, u, user_less, user_idx) != 0)
        kq_error("event=gating_requeue_failed user=%s error=\"out of memory\"", u->name);
}

/* Takes u out of its parkset (lock held); it is in no heap afterwards. */
static void unpark_one(kq_gating_t *g, guser_t *u)
{
    parkset_t *ps = NULL;
    if (u->pkey != NULL)
        HASH_FIND_STR(g->parked, u->pkey, ps);
    u->parked = false;
    free(u->pkey);
    u->pkey = NULL;
    if (ps == NULL || u->pidx >= ps->n || ps->v[u->pidx] != u)
        return;
    g->n_parked--;
    ps->v[u->pidx] = ps->v[--ps->n];
    ps->v[u->pidx]->pidx = u->pidx;
}

static void requeue(kq_gating_t *g, guser_t *u)
{
    if (u->q->usage)
        u->pass = usage_pass(g, u, kq_fairshare_now());
    else if (u->pass < u->q->vclock)
        u->pass = u->q->vclock;
    if (u->pods.n > 0 && u->qidx == SIZE_MAX && h_push(&u->q->users, u, user_less, user_idx) != 0)
        kq_error("event=gating_requeue_failed user=%s error=\"out of memory\"", u->name);
}

static void unpark_set(kq_gating_t *g, parkset_t *ps)
{
    for (size_t i = 0; i < ps->n; i++) {
        guser_t *u = ps->v[i];
        u->parked = false;
        free(u->pkey);
        u->pkey = NULL;
        requeue(g, u);
    }
    if (ps->n > 0)
        g->dirty = true;
    g->n_parked -= ps->n;
    ps->n = 0;
}

/* Every guser_t parked under key (NULL: every parked one) back into its queue's heap. */
static void unpark(kq_gating_t *g, const char *key)
{
    parkset_t *ps, *tmp;
    if (key != NULL) {
        HASH_FIND_STR(g->parked, key, ps);
        if (ps != NULL)
            unpark_set(g, ps);
        return;
    }
    HASH_ITER(hh, g->parked, ps, tmp) {
        unpark_set(g, ps);
        HASH_DEL(g->parked, ps);
        free(ps->key);
        free(ps->v);
        free(ps);
    }
}

static void unpark_key(kq_gating_t *g, const char *prefix, const char *name)
{
    char *k = NULL;
    if (asprintf(&k, "%s%s", prefix, name) < 0) {
        unpark(g, NULL); /* cannot name it: wake everyone rather than miss one */
        return;
    }
    unpark(g, k);
    free(k);
}

/* A group limit is shared by all its members: room freed in it goes to the member whose
 * turn it is (the smallest pass; found by a scan of the parked members, no ledger work),
 * which is woken alone. If that member is released, the next one is woken (room may be
 * left); if it is held by something else, too; if the group holds it again, the group is
 * full and its members stay parked (lock held). */
static void wake_group_one(kq_gating_t *g, const char *key)
{
    parkset_t *ps;
    HASH_FIND_STR(g->parked, key, ps);
    if (ps == NULL || ps->n == 0)
        return;
    size_t best = 0;
    for (size_t i = 1; i < ps->n; i++)
        if (user_less(ps->v[i], ps->v[best]))
            best = i;
    guser_t *u = ps->v[best];
    g->n_parked--;
    ps->v[best] = ps->v[--ps->n];
    if (best < ps->n)
        ps->v[best]->pidx = best;
    u->parked = false;
    free(u->pkey);
    u->pkey = NULL;
    free(u->woken);
    u->woken = strdup(key); /* NULL on ENOMEM: then nobody is woken after it but by the timer */
    requeue(g, u);
    g->dirty = true;
}

static void wake_groups_of(kq_gating_t *g, const kq_pod_t *pod)
{
    for (size_t i = 0; pod != NULL && i < pod->n_groups; i++) {
        char *k = NULL;
        if (asprintf(&k, "g:%s", pod->groups[i]) < 0)
            continue;
        wake_group_one(g, k);
        free(k);
    }
}

/* A pod of ours ended or went away (or, without pod, one of user's): wake whoever its end
 * may let through (lock held). */
static void unpark_for(kq_gating_t *g, const kq_pod_t *pod, const char *user)
{
    if (pod != NULL && pod->user != NULL)
        user = pod->user;
    if (user != NULL)
        unpark_key(g, "u:", user);
    wake_groups_of(g, pod);
    if (pod == NULL && user == NULL)
        return;
    unpark(g, "q:");
}

/* ---- gangs ---- */

static void gang_free(ggang_t *gg)
{
    free(gg->key);
    free(gg->v);
    free(gg);
}

/* A waiting pod with a gang that has not started joins it (lock held). */
static void gang_join(kq_gating_t *g, gpod_t *gp)
{
    const kq_pod_t *p = &gp->pod;
    if (p->gang == NULL || p->gang_min <= 1 || gp->gang != NULL)
        return;
    char *key = NULL;
    if (asprintf(&key, "%s\n%s\n%s", p->queue ? p->queue : "", p->user ? p->user : "nobody", p->gang) < 0)
        return;
    ggang_t *gg;
    HASH_FIND_STR(g->gangs, key, gg);
    if (gg == NULL) {
        if ((gg = calloc(1, sizeof(*gg))) == NULL) {
            free(key);
            return;
        }
        gg->key = key;
        key = NULL;
        gg->min = p->gang_min;
        HASH_ADD_KEYPTR(hh, g->gangs, gg->key, strlen(gg->key), gg);
    }
    free(key);
    if (gg->started)
        return;
    if (gg->n == gg->cap) {
        size_t cap = gg->cap ? 2 * gg->cap : 8;
        gpod_t **v = realloc(gg->v, cap * sizeof(*v));
        if (v == NULL)
            return;
        gg->v = v;
        gg->cap = cap;
    }
    gp->gidx = gg->n;
    gg->v[gg->n++] = gp;
    gp->gang = gg;
}

static void gang_leave(kq_gating_t *g, gpod_t *gp)
{
    ggang_t *gg = gp->gang;
    if (gg == NULL)
        return;
    gp->gang = NULL;
    if (gp->gidx < gg->n && gg->v[gp->gidx] == gp) {
        gg->v[gp->gidx] = gg->v[--gg->n];
        gg->v[gp->gidx]->gidx = gp->gidx;
    }
    if (gg->n == 0 && !gg->started) {
        HASH_DEL(g->gangs, gg);
        gang_free(gg);
    }
}

/* Puts a waiting pod into its user's heap (lock held). */
static int enqueue(kq_gating_t *g, gpod_t *gp)
{
    const char *qp = gp->pod.queue ? gp->pod.queue : "";
    const char *un = gp->pod.user ? gp->pod.user : "nobody";
    gqueue_t *q;
    HASH_FIND_STR(g->queues, qp, q);
    if (q == NULL) {
        if ((q = calloc(1, sizeof(*q))) == NULL || (q->path = strdup(qp)) == NULL) {
            free(q);
            return KQ_ENOMEM;
        }
        HASH_ADD_KEYPTR(hh, g->queues, q->path, strlen(q->path), q);
        queue_policy(g, q);
    }
    size_t kl = strlen(qp) + 1 + strlen(un);
    char *key = malloc(kl + 1);
    if (key == NULL)
        return KQ_ENOMEM;
    snprintf(key, kl + 1, "%s\n%s", qp, un);
    guser_t *u;
    HASH_FIND_STR(g->users, key, u);
    if (u == NULL) {
        if ((u = calloc(1, sizeof(*u))) == NULL || (u->name = strdup(un)) == NULL) {
            free(u);
            free(key);
            return KQ_ENOMEM;
        }
        u->key = key;
        key = NULL;
        u->q = q;
        u->qidx = SIZE_MAX;
        u->pass = q->vclock; /* joins at the queue's current pass: idle time earns nothing */
        u->seq = ++g->seq;
        user_weigh(g, u, &gp->pod);
        if (q->usage)
            u->pass = usage_pass(g, u, kq_fairshare_now());
        HASH_ADD_KEYPTR(hh, g->users, u->key, strlen(u->key), u);
    }
    free(key);
    if (h_push(&u->pods, gp, pod_less, pod_idx) != 0)
        return KQ_ENOMEM;
    if (u->parked) /* a new pod may be the one that fits */
        unpark_one(g, u);
    if (u->qidx == SIZE_MAX) {
        if (q->usage)
            u->pass = usage_pass(g, u, kq_fairshare_now());
        else if (u->pass < q->vclock)
            u->pass = q->vclock;
        if (h_push(&q->users, u, user_less, user_idx) != 0) {
            h_remove(&u->pods, gp->hidx, pod_less, pod_idx);
            return KQ_ENOMEM;
        }
    }
    gp->user = u;
    u->fresh++;
    q->fresh++;
    q->waiting++;
    g->waiting++;
    gang_join(g, gp);
    return 0;
}

/* Drops a user without waiting pods (lock held). */
static void user_drop_if_empty(kq_gating_t *g, guser_t *u)
{
    if (u->pods.n > 0)
        return;
    if (u->parked)
        unpark_one(g, u);
    if (u->qidx != SIZE_MAX)
        h_remove(&u->q->users, u->qidx, user_less, user_idx);
    gqueue_t *q = u->q;
    HASH_DEL(g->users, u);
    user_free(u);
    if (q->users.n == 0 && q->waiting == 0) {
        HASH_DEL(g->queues, q);
        queue_free(q);
    }
}

/* Takes a waiting pod out of the heaps (lock held). */
static void dequeue(kq_gating_t *g, gpod_t *gp)
{
    gang_leave(g, gp);
    if (gp->nidx != SIZE_MAX && gp->nidx < g->n_never && g->never[gp->nidx] == gp) {
        gqueue_t *q = gp->nq;
        g->never[gp->nidx] = g->never[--g->n_never];
        g->never[gp->nidx]->nidx = gp->nidx;
        gp->nidx = SIZE_MAX;
        gp->nq = NULL;
        q->waiting--;
        g->waiting--;
        if (q->users.n == 0 && q->waiting == 0) {
            HASH_DEL(g->queues, q);
            queue_free(q);
        }
        return;
    }
    guser_t *u = gp->user;
    if (u == NULL)
        return;
    h_remove(&u->pods, gp->hidx, pod_less, pod_idx);
    gp->user = NULL;
    u->q->waiting--;
    g->waiting--;
    if (u->pods.n == 0)
        user_drop_if_empty(g, u);
}

static void forget(kq_gating_t *g, gpod_t *gp)
{
    dequeue(g, gp);
    HASH_DEL(g->pods, gp);
    gpod_free(gp);
}

/* ------------------------------------------------------------------ informer hooks */

/* A pod of kubequota's scheduler (only those are counted). */
static bool is_ours(const kq_gating_t *g, const kq_pod_t *p)
{
    return p->scheduler_name != NULL && g->app->scheduler_name != NULL &&
           strcmp(p->scheduler_name, g->app->scheduler_name) == 0;
}

static bool is_waiting(const kq_gating_t *g, const kq_pod_t *p)
{
    return kq_pod_is_gated(p) && !kq_pod_is_terminal(p) && !p->deleting && p->node == NULL && is_ours(g, p);
}

/* DRA (issue 39; lock held): the names of a waiting pod's claims come later than the pod:
 * kube-controller-manager creates a template's claim and then writes its name into the
 * pod's status.resourceClaimStatuses (pod.h claims). The gate decides with the names the
 * pod has now, or it would wait for "the claim of its template" forever. */
static void refresh_claims(kq_gating_t *g, gpod_t *gp, kq_pod_t *now)
{
    bool same = gp->pod.n_claims == now->n_claims;
    for (size_t i = 0; same && i < now->n_claims; i++)
        same = (gp->pod.claims[i] == NULL) == (now->claims[i] == NULL) &&
               (now->claims[i] == NULL || strcmp(gp->pod.claims[i], now->claims[i]) == 0);
    if (same)
        return;
    char **c = gp->pod.claims;
    size_t n = gp->pod.n_claims;
    gp->pod.claims = now->claims;
    gp->pod.n_claims = now->n_claims;
    now->claims = c; /* the old ones are freed with now */
    now->n_claims = n;
    if (gp->pod.user != NULL)
        unpark_key(g, "u:", gp->pod.user);
}

void kq_gating_observe(kq_gating_t *g, const kq_pod_t *pod)
{
    if (g == NULL || pod == NULL || pod->uid == NULL)
        return;
    bool waiting = is_waiting(g, pod);
    kq_pod_t copy;
    memset(&copy, 0, sizeof(copy));
    if (waiting && kq_pod_copy(&copy, pod) != 0) {
        kq_error("event=gating_observe_failed pod=%s/%s error=\"out of memory\"", pod->ns, pod->name);
        return;
    }
    pthread_mutex_lock(&g->mu);
    gpod_t *gp;
    HASH_FIND_STR(g->pods, pod->uid, gp);
    if (!waiting) {
        if (gp != NULL)
            forget(g, gp);
        bool ours = is_ours(g, pod); /* another scheduler's pod frees nothing we count */
        if (ours && kq_pod_is_terminal(pod)) /* its usage is released: whoever it held back may fit */
            unpark_for(g, pod, NULL);
        else if (ours && pod->user != NULL) /* its usage may have changed (a resize) */
            unpark_key(g, "u:", pod->user);
    } else if (gp != NULL) {
        gp->pod.gate_pos = copy.gate_pos; /* placement is immutable (admission.h): only the index moves */
        gp->pod.n_gates = copy.n_gates;
        gp->seen_gen = g->gen;
        /* ... and the request, by a resize (pods/resize): the gate decides with the request
         * the pod has now, never the one it came with (the ledger counts a released pod with
         * at least the request of a resize it admitted, whichever the gate saw). A pod that
         * shrank may fit now: its user is offered a try again. */
        if (!kq_resource_equal(&gp->pod.request, &copy.request)) {
            kq_resource_t t = gp->pod.request;
            gp->pod.request = copy.request;
            copy.request = t; /* the old one is freed with copy */
            if (gp->pod.user != NULL)
                unpark_key(g, "u:", gp->pod.user);
        }
        refresh_claims(g, gp, &copy);
    } else if ((gp = calloc(1, sizeof(*gp))) == NULL || (gp->uid = strdup(pod->uid)) == NULL) {
        free(gp);
        kq_error("event=gating_observe_failed pod=%s/%s error=\"out of memory\"", pod->ns, pod->name);
    } else {
        gp->pod = copy;
        memset(&copy, 0, sizeof(copy));
        gp->seq = ++g->seq;
        gp->since_ms = mono_ms();
        gp->seen_gen = g->gen;
        gp->nidx = SIZE_MAX;
        HASH_ADD_KEYPTR(hh, g->pods, gp->uid, strlen(gp->uid), gp);
        if (enqueue(g, gp) != 0) {
            HASH_DEL(g->pods, gp);
            gpod_free(gp);
            kq_error("event=gating_observe_failed pod=%s/%s error=\"out of memory\"", pod->ns, pod->name);
        }
    }
    g->dirty = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    kq_pod_clear(&copy);
}

void kq_gating_remove(kq_gating_t *g, const char *uid, const kq_pod_t *gone)
{
    if (g == NULL || uid == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    gpod_t *gp;
    HASH_FIND_STR(g->pods, uid, gp);
    if (gp != NULL)
        forget(g, gp);
    if (gone != NULL)
        unpark_for(g, gone, NULL);
    g->dirty = true; /* a pod gone frees quota */
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void kq_gating_resync_begin(kq_gating_t *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    g->gen++;
    g->resyncing = true;
    pthread_mutex_unlock(&g->mu);
}

void kq_gating_resync_end(kq_gating_t *g)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    if (g->resyncing) {
        gpod_t *gp, *tmp;
        HASH_ITER(hh, g->pods, gp, tmp) {
            if (gp->seen_gen != g->gen)
                forget(g, gp);
        }
        g->resyncing = false;
    }
    g->dirty = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

/* ------------------------------------------------------------------ a pass */

typedef struct work {
    char *uid, *ns, *name, *reason; /* reason: an Event to post; NULL: a gate to remove */
    uint32_t gate_idx;
    bool warning; /* the Event is a Warning: the pod can never fit as it is */
} work_t;

typedef struct worklist {
    work_t *v;
    size_t n, cap;
} worklist_t;

static void work_add(worklist_t *w, const gpod_t *gp, const char *reason)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        work_t *v = realloc(w->v, cap * sizeof(*v));
        if (v == NULL)
            return;
        w->v = v;
        w->cap = cap;
    }
    work_t *x = &w->v[w->n];
    x->uid = strdup(gp->uid);
    x->ns = strdup(gp->pod.ns);
    x->name = strdup(gp->pod.name);
    x->reason = reason ? strdup(reason) : NULL;
    x->gate_idx = gp->pod.gate_pos > 0 ? gp->pod.gate_pos - 1 : 0;
    x->warning = false;
    if (x->uid == NULL || x->ns == NULL || x->name == NULL || (reason != NULL && x->reason == NULL)) {
        free(x->uid);
        free(x->ns);
        free(x->name);
        free(x->reason);
        return;
    }
    w->n++;
}

static void worklist_free(worklist_t *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->v[i].uid);
        free(w->v[i].ns);
        free(w->v[i].name);
        free(w->v[i].reason);
    }
    free(w->v);
    memset(w, 0, sizeof(*w));
}

/* The checks filter and bind make, as one check and commit: budget, then the ledger's
 * reservation. On 0, *charged (initialised) is what the ledger counted the pod with (its
 * claims' devices too), for the release's cost. Lock held. */
static int admit(kq_gating_t *g, const kq_pod_t *p, kq_resource_t *charged, char *reason, size_t len,
                 kq_denial_t *kind)
{
    *kind = KQ_DENIAL_NONE;
    kq_app_t *app = g->app;
    if (app->metering != NULL && !kq_ledger_is_counted(app->ledger, p->uid)) {
        char group[KQ_UGM_PATH_MAX];
        if (kq_ledger_pod_group(app->ledger, p, group, sizeof(group)) != 0)
            group[0] = '\0';
        int rc = kq_metering_check_budget(app->metering, p->user, group[0] ? group : NULL, p->queue, reason, len, kind);
        if (rc != 0)
            return rc;
    }
    /* a quota label naming no quota, or one of another namespace (issue 37), as filter */
    if (app->elastic != NULL && p->quota_name != NULL && !kq_ledger_is_counted(app->ledger, p->uid)) {
        int rc = kq_resolve_check_quota_name(kq_elastic_resolver(app->elastic), p, reason, len, kind);
        if (rc != 0)
            return rc;
    }
    /* gate-only: the extender filter is what keeps a multi-tree quota's pod on its tree's
     * nodes; with no filter such a pod is held rather than placed anywhere */
    char group[KQ_QTREE_NAME_MAX + 1], tree[64];
    if (g->o.gate_only && app->elastic != NULL && kq_profiles_has_trees(kq_elastic_profiles(app->elastic)) &&
        kq_resolve_pod(kq_elastic_resolver(app->elastic), p, group, sizeof(group)) == 0 &&
        kq_profiles_group_tree(kq_elastic_profiles(app->elastic), group, tree, sizeof(tree))) {
        snprintf(reason, len,
                 "quota group %.120s is in quota tree %.60s, whose node placement only the scheduler extender enforces; "
                 "kubequota runs gate-only (chart scheduler.extender.mode gate-only), so it "
                 "does not release this pod",
                 group, tree);
        *kind = KQ_DENIAL_NEVER_FITS;
        return KQ_EDENIED;
    }
    return kq_ledger_reserve_charged(app->ledger, p, charged, reason, len, kind);
}

/* What releasing the pod costs its user's pass under policy "fair": by what the ledger
 * charged it at the reservation (ch, from admit), else (out of memory) its request. */
static double release_cost(const gqueue_t *q, const kq_pod_t *p, const kq_resource_t *ch)
{
    return pod_cost(q, kq_resource_is_zero(ch) ? &p->request : ch);
}

static bool never_kind(kq_denial_t k)
{
    return k == KQ_DENIAL_NEVER_FITS || k == KQ_DENIAL_QUEUE_MISSING || k == KQ_DENIAL_QUEUE_NOT_LEAF ||
           k == KQ_DENIAL_GROUP_MISSING || k == KQ_DENIAL_GROUP_NOT_LEAF;
}

/* A denied pod that can never fit as it is: its request alone is over some max, or its
 * queue or quota group is missing or not a leaf. The reservation checks the quota group's
 * runtime first, which may report a fitting-looking overrun ("needs 4 more cpu") for a pod
 * that a queue's max forbids outright, so a denial that is not one of those is checked
 * again the way filter and explain check it (kq_ledger_check: changes nothing). True with
 * the reason that forbids it in never (lock held). */
static bool can_never_fit(kq_gating_t *g, const kq_pod_t *p, kq_denial_t kind, const char *reason, char *never,
                          size_t len)
{
    if (never_kind(kind)) {
        snprintf(never, len, "%s", reason);
        return true;
    }
    if (kind == KQ_DENIAL_BUDGET || kind == KQ_DENIAL_APP_OWNER || kind == KQ_DENIAL_ACL)
        return false;
    kq_denial_t k = KQ_DENIAL_NONE;
    never[0] = '\0';
    if (kq_ledger_check(g->app->ledger, p, never, len, &k) == KQ_EDENIED && never_kind(k) && never[0] != '\0')
        return true;
    never[0] = '\0';
    return false;
}

/* The Event text of a pod set aside: the limit that forbids it, and what its owner can do. */
static void never_text(const char *reason, char *out, size_t len)
{
    snprintf(out, len,
             "never fits: %.400s. The admission gate does not release it; delete it and create it with a request "
             "that fits, or ask for that limit to be raised (it is checked again when the configuration changes)",
             reason);
}

/* text without its "<quantity> used + " parts: what a never-fits reason says apart from
 * the usage of the moment, which moves while the pod waits. New string or NULL. */
static char *without_usage(const char *text)
{
    char *out = strdup(text);
    if (out == NULL)
        return NULL;
    char *at;
    while ((at = strstr(out, " used + ")) != NULL) {
        char *start = at;
        while (start > out && start[-1] != ' ')
            start--;
        memmove(start, at + 8, strlen(at + 8) + 1);
    }
    return out;
}

/* Takes u's head pod out of the fair order because it can never fit as it is (lock held;
 * u is out of the queue's heap). It stays counted as waiting, listed apart with its reason,
 * and gets one Warning Event per change of that reason. */
static int set_aside(kq_gating_t *g, gqueue_t *q, guser_t *u, gpod_t *gp, const char *never, worklist_t *events)
{
    char text[768];
    never_text(never, text, sizeof(text));
    if (g->n_never == g->cap_never) {
        size_t cap = g->cap_never ? 2 * g->cap_never : 16;
        gpod_t **v = realloc(g->never, cap * sizeof(*v));
        if (v == NULL)
            return KQ_ENOMEM;
        g->never = v;
        g->cap_never = cap;
    }
    char *t = strdup(text), *key = without_usage(never);
    if (t == NULL || key == NULL) {
        free(t);
        free(key);
        return KQ_ENOMEM;
    }
    bool changed = gp->never_key == NULL || strcmp(gp->never_key, key) != 0;
    free(gp->never);
    gp->never = t;
    free(gp->never_key);
    gp->never_key = key;
    h_remove(&u->pods, gp->hidx, pod_less, pod_idx);
    gp->user = NULL;
    gp->nq = q;
    gp->nidx = g->n_never;
    g->never[g->n_never++] = gp;
    if (changed) {
        size_t n = events->n;
        work_add(events, gp, gp->never);
        if (events->n > n)
            events->v[n].warning = true;
        kq_info("event=gate_never_fits pod=%s/%s uid=%s user=%s queue=%s reason=\"%s\"", gp->pod.ns, gp->pod.name,
                gp->uid, u->name, q->path, never);
    }
    return 0;
}

/* Puts every pod set aside back in the fair order, to be checked again: the configuration
 * (or an ElasticQuota's max) may have changed (lock held; not during a pass). */
static void restore_never(kq_gating_t *g)
{
    while (g->n_never > 0) {
        gpod_t *gp = g->never[--g->n_never];
        gqueue_t *q = gp->nq;
        gp->nidx = SIZE_MAX;
        gp->nq = NULL;
        q->waiting--; /* enqueue counts it again */
        g->waiting--;
        if (enqueue(g, gp) != 0) {
            kq_error("event=gating_requeue_failed pod=%s/%s error=\"out of memory\"", gp->pod.ns, gp->pod.name);
            if (q->users.n == 0 && q->waiting == 0) {
                HASH_DEL(g->queues, q);
                queue_free(q);
            }
            HASH_DEL(g->pods, gp);
            gpod_free(gp);
        }
    }
}

static void note_release(kq_gating_t *g, gpod_t *gp)
{
    g->releases++;
    double waited = (double)(mono_ms() - gp->since_ms) / 1000.0;
    for (size_t i = 0; i < KQ_GATING_WAIT_BUCKETS; i++)
        if (waited <= kq_gating_wait_bounds[i])
            g->wait_bucket[i]++;
    g->wait_sum += waited;
    g->wait_count++;
    const char *un = gp->pod.user ? gp->pod.user : "nobody";
    ucount_t *c;
    HASH_FIND_STR(g->ucounts, un, c);
    if (c == NULL && (c = calloc(1, sizeof(*c))) != NULL) {
        if ((c->user = strdup(un)) == NULL) {
            free(c);
            c = NULL;
        } else {
            HASH_ADD_KEYPTR(hh, g->ucounts, c->user, strlen(c->user), c);
        }
    }
    if (c != NULL)
        c->n++;
}

static void set_halflives(kq_gating_t *g, const kq_queue_conf_t *c)
{
    if (c == NULL)
        return;
    double hl;
    if (!c->is_parent && usage_policy(c, &hl))
        track(g, c->path, hl);
    for (size_t i = 0; i < c->n_children; i++)
        set_halflives(g, c->children[i]);
}

/* Weights and policies follow the configuration: re-read when the snapshot changed. */
static void refresh_config(kq_gating_t *g)
{
    kq_config_t *cfg = kq_config_holder_get(g->app->config);
    if (cfg == g->cfg) {
        kq_config_unref(cfg);
        return;
    }
    kq_config_unref(g->cfg);
    g->cfg = cfg;
    unpark(g, NULL); /* limits may have changed */
    restore_never(g); /* and what never fitted may fit now */
    guser_t *u, *tmp;
    HASH_ITER(hh, g->users, u, tmp) {
        if (u->pods.n > 0)
            user_weigh(g, u, &((gpod_t *)u->pods.v[0])->pod);
    }
    /* the history of every usage queue decays at its own half-life, waiting pods or not */
    const kq_partition_conf_t *part = cfg ? kq_config_partition(cfg, g->app->partition) : NULL;
    if (part != NULL) { /* the usage queues keep history; a queue no longer one loses it */
        kq_fairshare_track_begin(g->fs);
        set_halflives(g, part->root);
    }
    gqueue_t *q, *qt;
    HASH_ITER(hh, g->queues, q, qt) {
        bool was = q->usage;
        queue_policy(g, q); /* also tracks a waiting dynamic queue that is a usage queue */
        if (was && q->usage) /* weights may have changed (a switch re-ranked already) */
            repass_all(g, q);
    }
    if (part != NULL) {
        /* a dynamic queue (not in the file) keeps its history while its nearest configured
         * ancestor still makes it a usage queue, waiting pods or not */
        char **tracked = NULL;
        size_t nt = 0;
        if (kq_fairshare_tracked(g->fs, &tracked, &nt) == 0) {
            for (size_t i = 0; i < nt; i++) {
                double hl;
                if (queue_conf(g, tracked[i]) == NULL && usage_policy(queue_conf_near(g, tracked[i]), &hl))
                    track(g, tracked[i], hl);
                free(tracked[i]);
            }
            free(tracked);
        }
        kq_fairshare_track_end(g->fs);
    }
}

/* Records why a user's pods wait; one Event per pod per change of reason, and one for
 * each pod that arrived since (lock held). */
static void user_reason(guser_t *u, const char *reason, worklist_t *events)
{
    if (u->reason == NULL || strcmp(u->reason, reason) != 0) {
        char *r = strdup(reason);
        if (r == NULL)
            return;
        free(u->reason);
        u->reason = r;
        u->reason_ver++;
        u->fresh = 1;
    }
    if (u->fresh == 0)
        return;
    for (size_t i = 0; i < u->pods.n; i++) {
        gpod_t *x = u->pods.v[i];
        if (x->posted_ver != u->reason_ver) {
            x->posted_ver = u->reason_ver;
            work_add(events, x, u->reason);
        }
    }
    u->fresh = 0;
}

/* A denial of the queue itself (its resources.max or maxapplications, or a parent's): no
 * other user of the queue may overtake the one whose turn it is, so the pass of this
 * queue ends there (a release then costs O(log users), not a try per waiting user). */
static bool queue_level(const char *reason)
{
    return strncmp(reason, "queue ", 6) == 0;
}

/* What a release costs u's pass: policy usage re-ranks it by its share (the reservation is
 * in the history already); fair advances it by cost / weight from where it was served. */
static void charge(kq_gating_t *g, gqueue_t *q, guser_t *u, double cost)
{
    if (q->usage) {
        u->pass = usage_pass(g, u, kq_fairshare_now());
    } else {
        q->vclock = u->pass;
        u->pass += cost / (u->weight > 0 ? u->weight : 1.0);
    }
}

/* u had a release this pass (it is out of the heap): back in line, or gone with its last
 * pod (lock held). */
static void after_release(kq_gating_t *g, gqueue_t *q, guser_t *u)
{
    free(u->woken); /* its group's room was used */
    u->woken = NULL;
    if (u->pods.n > 0) {
        if (h_push(&q->users, u, user_less, user_idx) != 0)
            kq_error("event=gating_requeue_failed user=%s error=\"out of memory\"", u->name);
    } else {
        HASH_DEL(g->users, u);
        user_free(u);
    }
}

/* The head pod of u is in a gang that has not started: release gang->min of its waiting
 * pods (the head first) if all of them fit together, else none. 0 released; otherwise
 * the reason is set (lock held). */
static int gang_release(kq_gating_t *g, gqueue_t *q, guser_t *u, gpod_t *head, worklist_t *rel, char *reason,
                        size_t len)
{
    ggang_t *gg = head->gang;
    const char *name = head->pod.gang;
    if (gg->n < gg->min) {
        snprintf(reason, len, "gang %.200s: %zu of its %u pods are waiting; they are released together", name, gg->n,
                 gg->min);
        return KQ_EDENIED;
    }
    gpod_t **pick = malloc(gg->min * sizeof(*pick));
    if (pick == NULL)
        return KQ_ENOMEM;
    size_t n = 0;
    pick[n++] = head;
    for (size_t i = 0; i < gg->n && n < gg->min; i++)
        if (gg->v[i] != head)
            pick[n++] = gg->v[i];
    char why[512] = "";
    int rc = 0;
    size_t done = 0;
    kq_denial_t kind;
    double cost = 0; /* the members' charges, read as each is reserved */
    for (; done < n; done++) {
        kq_resource_t ch = KQ_RESOURCE_EMPTY;
        rc = admit(g, &pick[done]->pod, &ch, why, sizeof(why), &kind);
        if (rc == 0)
            cost += release_cost(q, &pick[done]->pod, &ch);
        kq_resource_free(&ch);
        if (rc != 0)
            break;
    }
    if (rc != 0) { /* all or nothing */
        for (size_t i = 0; i < done; i++)
            (void)kq_ledger_unreserve(g->app->ledger, pick[i]->uid);
        snprintf(reason, len, "gang %.100s: its %u pods do not fit together: %.350s", name, gg->min,
                 why[0] ? why : kq_strerror(rc));
        free(pick);
        return rc;
    }
    gg->started = true; /* first: gang_leave keeps a started gang; its later pods go one by one */
    for (size_t i = 0; i < n; i++) {
        gpod_t *m = pick[i];
        gang_leave(g, m);
        h_remove(&u->pods, m->hidx, pod_less, pod_idx);
        m->user = NULL;
        m->releasing = true;
        q->waiting--;
        g->waiting--;
        note_release(g, m);
        wake_groups_of(g, &m->pod); /* room may be left in its groups */
        work_add(rel, m, NULL);
        kq_info("event=gate_released pod=%s/%s uid=%s user=%s queue=%s gang=%s waited_ms=%lld", m->pod.ns,
                m->pod.name, m->uid, u->name, q->path, name, (long long)(mono_ms() - m->since_ms));
    }
    /* the members beyond min that wait now go one by one too */
    while (gg->n > 0)
        gang_leave(g, gg->v[gg->n - 1]);
    charge(g, q, u, cost);
    free(pick);
    return 0;
}

/* Policy "usage": the users whose usage changed since the last pass (a pod counted or
 * released) take their new pass; O(changes), not O(users) (lock held). */
static void rerank(kq_gating_t *g)
{
    char **keys = NULL;
    size_t n = 0;
    if (kq_fairshare_drain(g->fs, &keys, &n) != 0) {
        kq_error("event=gating_rerank_failed error=\"out of memory\"");
        return;
    }
    double now = kq_fairshare_now();
    for (size_t i = 0; i < n; i++) {
        guser_t *u;
        HASH_FIND_STR(g->users, keys[i], u);
        if (u != NULL && u->q->usage)
            repass(u, usage_pass(g, u, now));
        free(keys[i]);
    }
    free(keys);
}

/* Policy "usage" with a half-life: averages move with time alone, so the timed pass
 * re-ranks every waiting user of such queues (O(users) once a second). */
static void rerank_all(kq_gating_t *g)
{
    gqueue_t *q, *qt;
    HASH_ITER(hh, g->queues, q, qt) {
        if (q->usage && q->halflife > 0)
            repass_all(g, q);
    }
}

/* One pass over every queue (lock held): releases what fits, in fair order. */
static void pass(kq_gating_t *g, worklist_t *rel, worklist_t *events)
{
    refresh_config(g);
    rerank(g);
    guser_t **blocked = NULL;
    size_t cap = 0;
    gqueue_t *q, *qtmp;
    HASH_ITER(hh, g->queues, q, qtmp) {
        size_t nb = 0;
        bool full = false;
        while (q->users.n > 0) {
            guser_t *u = h_remove(&q->users, 0, user_less, user_idx);
            gpod_t *gp = u->pods.v[0];
            char reason[512] = "";
            int rc;
            if (gp->gang != NULL) {
                rc = gang_release(g, q, u, gp, rel, reason, sizeof(reason));
                if (rc == 0) {
                    after_release(g, q, u);
                    continue;
                }
                goto blocked;
            }
            kq_denial_t kind;
            kq_resource_t ch = KQ_RESOURCE_EMPTY; /* what the ledger charges it, if released */
            rc = admit(g, &gp->pod, &ch, reason, sizeof(reason), &kind);
            double cost = rc == 0 ? release_cost(q, &gp->pod, &ch) : 0;
            kq_resource_free(&ch);
            char never[512];
            if (rc == KQ_EDENIED && can_never_fit(g, &gp->pod, kind, reason, never, sizeof(never)) &&
                set_aside(g, q, u, gp, never, events) == 0) {
                /* not a turn: the user's next pod is tried in its place */
                if (u->pods.n > 0) {
                    if (h_push(&q->users, u, user_less, user_idx) != 0)
                        kq_error("event=gating_requeue_failed user=%s error=\"out of memory\"", u->name);
                } else {
                    HASH_DEL(g->users, u);
                    user_free(u);
                }
                continue;
            }
            if (rc == 0) {
                h_remove(&u->pods, 0, pod_less, pod_idx);
                gp->user = NULL;
                gp->releasing = true;
                q->waiting--;
                g->waiting--;
                charge(g, q, u, cost);
                note_release(g, gp);
                wake_groups_of(g, &gp->pod); /* room may be left in its groups */
                work_add(rel, gp, NULL);
                kq_info("event=gate_released pod=%s/%s uid=%s user=%s queue=%s waited_ms=%lld", gp->pod.ns,
                        gp->pod.name, gp->uid, u->name, q->path, (long long)(mono_ms() - gp->since_ms));
                after_release(g, q, u);
                continue;
            }
        blocked:
            if (reason[0] == '\0')
                snprintf(reason, sizeof(reason), "%s", kq_strerror(rc));
            /* Every pod of the user waits for the same reason (its head cannot go). */
            user_reason(u, reason, events);
            char *pk = park_key(u, reason);
            if (u->woken != NULL) { /* woken for its group's room: if it cannot use it, the next may */
                if (pk == NULL || strcmp(pk, u->woken) != 0)
                    wake_group_one(g, u->woken);
                free(u->woken);
                u->woken = NULL;
            }
            if (pk != NULL) {
                park(g, u, pk);
                continue;
            }
            if (nb == cap) {
                size_t nc = cap ? 2 * cap : 16;
                guser_t **b = realloc(blocked, nc * sizeof(*b));
                if (b == NULL) { /* cannot remember it: back in the heap, and stop this queue */
                    (void)h_push(&q->users, u, user_less, user_idx);
                    break;
                }
                blocked = b;
                cap = nc;
            }
            blocked[nb++] = u;
            if (queue_level(reason)) {
                /* The users not tried wait for the same reason: brought up to date only
                 * when it changed or pods arrived, so a full queue costs nothing per pass. */
                if (q->full == NULL || strcmp(q->full, reason) != 0 || q->fresh > 0) {
                    free(q->full);
                    q->full = strdup(reason);
                    for (size_t i = 0; i < q->users.n; i++)
                        user_reason(q->users.v[i], reason, events);
                }
                q->fresh = 0;
                full = true;
                break;
            }
        }
        if (!full) {
            free(q->full);
            q->full = NULL;
        }
        for (size_t i = 0; i < nb; i++)
            if (h_push(&q->users, blocked[i], user_less, user_idx) != 0)
                kq_error("event=gating_requeue_failed user=%s error=\"out of memory\"", blocked[i]->name);
        if (q->users.n == 0 && q->waiting == 0) {
            HASH_DEL(g->queues, q);
            queue_free(q);
        }
    }
    free(blocked);
}

/* Removes our gate: a JSON patch whose tests make it a no-op unless the pod is the same
 * one and our gate is still at that index. 0 removed; KQ_ENOENT pod gone; KQ_ECONFLICT
 * refused (preconditions failed); KQ_EIO the outcome is unknown. */
static int ungate(kq_gating_t *g, const work_t *w, char *err, size_t errlen)
{
    if (g->o.ungate != NULL)
        return g->o.ungate(g->o.ungate_ud, w->ns, w->name, w->uid, w->gate_idx, err, errlen);
    char gpath[64], path[600];
    snprintf(gpath, sizeof(gpath), "/spec/schedulingGates/%u", w->gate_idx);
    char gname[80];
    snprintf(gname, sizeof(gname), "%s/name", gpath);
    json_t *ops = json_pack("[{s:s,s:s,s:s},{s:s,s:s,s:s},{s:s,s:s}]", "op", "test", "path", "/metadata/uid",
                            "value", w->uid, "op", "test", "path", gname, "value", KQ_POD_ADMISSION_GATE, "op",
                            "remove", "path", gpath);
    char *body = ops ? json_dumps(ops, JSON_COMPACT) : NULL;
    json_decref(ops);
    if (body == NULL) {
        snprintf(err, errlen, "out of memory");
        return KQ_EIO;
    }
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", w->ns, w->name);
    kq_kube_resp_t r = {0};
    int rc = g->app->kube ? kq_kube_request(g->app->kube, "PATCH", path, "application/json-patch+json", body, &r)
                          : KQ_ESTATE;
    free(body);
    if (rc != 0) {
        snprintf(err, errlen, "%s", kq_strerror(rc));
        rc = KQ_EIO;
    } else if (r.status == 200) {
        rc = 0;
    } else {
        snprintf(err, errlen, "HTTP %ld: %.300s", r.status, r.body ? r.body : "");
        rc = r.status == 404 ? KQ_ENOENT : (r.status == 409 || r.status == 422) ? KQ_ECONFLICT : KQ_EIO;
    }
    kq_kube_resp_free(&r);
    return rc;
}

/* One gate removal (no lock held): a failure puts the pod back in line and, unless the
 * outcome is unknown, releases its reservation. Any removal thread. */
static void apply_one(kq_gating_t *g, const work_t *w)
{
    char err[512] = "";
    int rc = ungate(g, w, err, sizeof(err));
    if (rc == 0)
        return;
    kq_warn("event=ungate_failed pod=%s/%s uid=%s error=\"%s\" msg=\"%s\"", w->ns, w->name, w->uid, err,
            rc == KQ_EIO ? "outcome unknown: kept reserved, retried" : "reservation released; the pod waits");
    if (rc != KQ_EIO)
        (void)kq_ledger_unreserve(g->app->ledger, w->uid); /* the ledger's lock alone */
    pthread_mutex_lock(&g->mu);
    g->patch_errors++;
    gpod_t *gp;
    HASH_FIND_STR(g->pods, w->uid, gp);
    if (gp != NULL && gp->releasing && rc != KQ_ENOENT) {
        gp->releasing = false;
        if (enqueue(g, gp) != 0)
            forget(g, gp);
    }
    pthread_mutex_unlock(&g->mu);
}

/* The removals of one pass, shared by its removal threads: rel is read-only while they
 * run; next is the index of the next removal to send. */
typedef struct remover {
    kq_gating_t *g;
    const worklist_t *rel;
    atomic_size_t next;
} remover_t;

static void *remove_gates(void *arg)
{
    remover_t *r = arg;
    size_t i;
    while ((i = atomic_fetch_add(&r->next, 1)) < r->rel->n)
        apply_one(r->g, &r->rel->v[i]);
    return NULL;
}

/* Sends the pass's removals, up to o.ungate_parallel at once: this thread and helpers
 * joined before it returns. A helper that cannot be created leaves its share to the
 * others (at worst this thread sends them all, one after the other). A hook (o.ungate) is
 * called from this thread only, in release order. */
static void apply_removals(kq_gating_t *g, const worklist_t *rel)
{
    size_t par = g->o.ungate != NULL ? 1 : (size_t)g->o.ungate_parallel;
    if (par > rel->n)
        par = rel->n;
    remover_t r = {.g = g, .rel = rel};
    atomic_init(&r.next, 0);
    pthread_t th[KQ_GATING_RELEASE_PARALLEL_MAX];
    size_t started = 0;
    for (size_t t = 1; t < par; t++)
        if (pthread_create(&th[started], NULL, remove_gates, &r) == 0)
            started++;
    remove_gates(&r);
    for (size_t t = 0; t < started; t++)
        pthread_join(th[t], NULL);
}

static void apply(kq_gating_t *g, worklist_t *rel, worklist_t *events)
{
    apply_removals(g, rel);
    for (size_t i = 0; i < events->n; i++) {
        const work_t *w = &events->v[i];
        if (g->app->kube != NULL)
            kq_kube_event(g->app->kube, w->ns, w->name, w->uid, w->warning ? "Warning" : "Normal",
                          KQ_GATING_EVENT_REASON, w->reason);
    }
}

/* ------------------------------------------------------------------ usage history checkpoint
 * (controller thread only, no lock held: API calls) */

#define USAGE_KEY "usage.json"
#define USAGE_MAX_BYTES 1000000 /* a ConfigMap holds at most 1 MiB */

static void usage_path(const kq_gating_t *g, bool item, char *buf, size_t len)
{
    if (item)
        snprintf(buf, len, "/api/v1/namespaces/%s/configmaps/%s", g->o.usage_ns, g->o.usage_name);
    else
        snprintf(buf, len, "/api/v1/namespaces/%s/configmaps", g->o.usage_ns);
}

static void set_rv(kq_gating_t *g, const json_t *obj)
{
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    free(g->fs_rv);
    g->fs_rv = rv ? strdup(rv) : NULL;
}

/* Merges the ConfigMap's history. true when done (merged, absent, or unusable and then
 * overwritten by the next checkpoint); false: try again. */
static bool usage_load(kq_gating_t *g)
{
    char path[700];
    usage_path(g, true, path, sizeof(path));
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(g->app->kube, "GET", path, NULL, NULL, &r);
    bool done = false;
    if (rc == 0 && (r.status == 401 || r.status == 403)) {
        kq_warn("event=gating_usage_forbidden configmap=%s/%s status=%ld msg=\"cannot read the usage history: "
                "it is not kept across restarts (RBAC: get, create and update on this ConfigMap)\"",
                g->o.usage_ns, g->o.usage_name, r.status);
        g->fs_off = true;
        done = true;
    } else if (rc != 0 || (r.status != 200 && r.status != 404)) {
        kq_warn("event=gating_usage_load_failed configmap=%s/%s status=%ld error=\"%s\" msg=\"retried\"",
                g->o.usage_ns, g->o.usage_name, r.status, rc ? kq_strerror(rc) : "unexpected status");
    } else if (r.status == 404) {
        free(g->fs_rv);
        g->fs_rv = NULL;
        kq_info("event=gating_usage_loaded configmap=%s/%s merged=0 msg=\"no usage history yet\"", g->o.usage_ns,
                g->o.usage_name);
        done = true;
    } else {
        json_t *obj = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
        set_rv(g, obj);
        const char *text = json_string_value(json_object_get(json_object_get(obj, "data"), USAGE_KEY));
        char err[300] = "";
        size_t merged = 0;
        rc = text == NULL ? KQ_EPARSE
                          : kq_fairshare_load_text(g->fs, text, strlen(text), kq_fairshare_now(), &merged, err,
                                                   sizeof(err));
        if (rc != 0)
            kq_warn("event=gating_usage_invalid configmap=%s/%s key=%s error=\"%s\" msg=\"history ignored; "
                    "overwritten by the next checkpoint\"", g->o.usage_ns, g->o.usage_name, USAGE_KEY,
                    text == NULL ? "no such key" : err);
        else
            kq_info("event=gating_usage_loaded configmap=%s/%s merged=%zu", g->o.usage_ns, g->o.usage_name, merged);
        json_decref(obj);
        done = true;
    }
    kq_kube_resp_free(&r);
    return done;
}

/* Writes the history: PUT with the resourceVersion last seen, or POST the first time. A
 * conflict (another leader wrote meanwhile) merges theirs first, at the next loop. */
static void note_save(kq_gating_t *g, bool ok)
{
    pthread_mutex_lock(&g->mu);
    if (ok) {
        g->usage_saves++;
        g->usage_saved_at = kq_fairshare_now();
    } else {
        g->usage_save_errors++;
    }
    pthread_mutex_unlock(&g->mu);
}

static void usage_save(kq_gating_t *g)
{
    size_t pairs = 0;
    json_t *doc = kq_fairshare_dump(g->fs, kq_fairshare_now(), &pairs);
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    if (text == NULL && pairs == SIZE_MAX) {
        kq_warn("event=gating_usage_too_big configmap=%s/%s max_pairs=%d msg=\"not saved: more user-queue pairs "
                "keep history than a ConfigMap holds (1 MiB)\"", g->o.usage_ns, g->o.usage_name,
                KQ_FAIRSHARE_DUMP_MAX);
        note_save(g, false);
        return;
    }
    if (text == NULL) {
        kq_error("event=gating_usage_save_failed error=\"out of memory\"");
        note_save(g, false);
        return;
    }
    if (strlen(text) > USAGE_MAX_BYTES) {
        kq_warn("event=gating_usage_too_big configmap=%s/%s bytes=%zu msg=\"not saved: a ConfigMap holds at most "
                "1 MiB\"", g->o.usage_ns, g->o.usage_name, strlen(text));
        free(text);
        note_save(g, false);
        return;
    }
    json_t *cm = json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s}},s:{s:s}}", "apiVersion", "v1", "kind", "ConfigMap",
                           "metadata", "name", g->o.usage_name, "namespace", g->o.usage_ns, "labels",
                           "app.kubernetes.io/managed-by", "kubequota", "data", USAGE_KEY, text);
    free(text);
    if (cm != NULL && g->fs_rv != NULL)
        json_object_set_new(json_object_get(cm, "metadata"), "resourceVersion", json_string(g->fs_rv));
    char *body = cm ? json_dumps(cm, JSON_COMPACT) : NULL;
    json_decref(cm);
    if (body == NULL) {
        kq_error("event=gating_usage_save_failed error=\"out of memory\"");
        note_save(g, false);
        return;
    }
    char path[700];
    usage_path(g, g->fs_rv != NULL, path, sizeof(path));
    kq_kube_resp_t r = {0};
    int rc = kq_kube_request(g->app->kube, g->fs_rv ? "PUT" : "POST", path, "application/json", body, &r);
    free(body);
    if (rc == 0 && (r.status == 200 || r.status == 201)) {
        json_t *obj = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
        set_rv(g, obj);
        json_decref(obj);
        kq_debug("event=gating_usage_saved configmap=%s/%s", g->o.usage_ns, g->o.usage_name);
        note_save(g, true);
    } else if (rc == 0 && (r.status == 409 || r.status == 404)) {
        /* written by someone else since (or deleted): read and merge it, then write */
        g->fs_loaded = false;
        kq_info("event=gating_usage_conflict configmap=%s/%s status=%ld msg=\"merging the stored history "
                "before the next checkpoint\"", g->o.usage_ns, g->o.usage_name, r.status);
    } else {
        kq_warn("event=gating_usage_save_failed configmap=%s/%s status=%ld error=\"%s\"", g->o.usage_ns,
                g->o.usage_name, r.status, rc ? kq_strerror(rc) : (r.body ? r.body : ""));
        note_save(g, false);
    }
    kq_kube_resp_free(&r);
}

/* The checkpoint's part of a loop (no lock held). */
static void usage_tick(kq_gating_t *g, bool leader, int64_t now)
{
    if (g->o.usage_name == NULL || g->app->kube == NULL || g->fs_off)
        return;
    if (!leader) {
        g->fs_loaded = false; /* merge again when this replica leads again */
        return;
    }
    if (!g->fs_loaded) {
        if (now < g->fs_retry_ms)
            return;
        g->fs_retry_ms = now + 5000; /* a failed read is retried every 5 s */
        pthread_mutex_lock(&g->mu);
        refresh_config(g); /* the half-lives the stored averages decay with */
        pthread_mutex_unlock(&g->mu);
        if ((g->fs_loaded = usage_load(g))) {
            pthread_mutex_lock(&g->mu);
            g->dirty = true; /* the merged users are re-ranked at the next pass */
            pthread_mutex_unlock(&g->mu);
            g->fs_saved_ms = now;
        }
        return;
    }
    if (now - g->fs_saved_ms >= g->o.usage_checkpoint_ms) {
        g->fs_saved_ms = now;
        if (kq_fairshare_tracks_any(g->fs)) /* no queue with policy "usage": nothing to keep */
            usage_save(g);
    }
}

static void *run(void *arg)
{
    kq_gating_t *g = arg;
    int64_t last_expire = 0, last_pass = 0;
    long timeout_s = (g->o.reserve_timeout_ms + 999) / 1000;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        int64_t now = mono_ms();
        if (!g->dirty && now - last_pass < g->o.interval_ms) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            long wait_ms = g->o.interval_ms - (long)(now - last_pass);
            if (wait_ms > 1000)
                wait_ms = 1000;
            kq_timespec_add_ms(&ts, wait_ms);
            pthread_cond_timedwait(&g->cv, &g->mu, &ts);
            now = mono_ms();
        }
        if (g->stop)
            break;
        pthread_mutex_unlock(&g->mu);
        /* every replica: reservations live in each ledger. Gate-only: a released pod keeps
         * its reservation until it binds or goes away (kube-scheduler may take longer than
         * the timeout to find it a node); with no filter to check it again, an expired
         * reservation would let it bind uncounted past a limit */
        if (!g->o.gate_only && now - last_expire >= 1000) {
            last_expire = now;
            size_t n = kq_ledger_expire_reserved(g->app->ledger, timeout_s);
            if (n > 0) {
                pthread_mutex_lock(&g->mu);
                g->expired += n;
                g->dirty = true;
                pthread_mutex_unlock(&g->mu);
            }
        }
        bool leader = g->o.is_leader == NULL || g->o.is_leader(g->o.leader_ud);
        usage_tick(g, leader, now);
        bool ready = atomic_load(&g->app->ready);
        worklist_t rel = {0}, events = {0};
        pthread_mutex_lock(&g->mu);
        if (g->dirty || now - last_pass >= g->o.interval_ms) {
            if (!g->dirty) { /* the timed pass: whatever no event told us about (expiries) */
                unpark(g, NULL);
                restore_never(g); /* an ElasticQuota's max may have moved */
                rerank_all(g);
            }
            g->dirty = false;
            last_pass = now;
            if (leader && ready && !g->resyncing)
                pass(g, &rel, &events);
        }
        pthread_mutex_unlock(&g->mu);
        if (rel.n > 0 || events.n > 0)
            apply(g, &rel, &events);
        worklist_free(&rel);
        worklist_free(&events);
        pthread_mutex_lock(&g->mu);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

/* ------------------------------------------------------------------ public API */

void kq_gating_opts_default(kq_gating_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->reserve_timeout_ms = 120000;
    o->interval_ms = 1000;
    o->usage_checkpoint_ms = 30000;
    o->ungate_parallel = KQ_GATING_RELEASE_PARALLEL_DEFAULT;
}

kq_gating_t *kq_gating_new(kq_app_t *app, const kq_gating_opts_t *o)
{
    kq_gating_t *g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    g->app = app;
    if (o != NULL)
        g->o = *o;
    else
        kq_gating_opts_default(&g->o);
    if (g->o.interval_ms <= 0)
        g->o.interval_ms = 1000;
    if (g->o.reserve_timeout_ms <= 0)
        g->o.reserve_timeout_ms = 120000;
    if (g->o.usage_checkpoint_ms <= 0)
        g->o.usage_checkpoint_ms = 30000;
    if (g->o.ungate_parallel <= 0)
        g->o.ungate_parallel = 1;
    if (g->o.ungate_parallel > KQ_GATING_RELEASE_PARALLEL_MAX)
        g->o.ungate_parallel = KQ_GATING_RELEASE_PARALLEL_MAX;
    if (g->o.usage_ns == NULL || g->o.usage_name == NULL || g->o.usage_name[0] == '\0')
        g->o.usage_name = NULL;
    if ((g->fs = kq_fairshare_new(3600)) == NULL) {
        free(g);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    if (pthread_mutex_init(&g->mu, NULL) != 0 || pthread_cond_init(&g->cv, &ca) != 0) {
        pthread_condattr_destroy(&ca);
        kq_fairshare_free(g->fs);
        free(g);
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    g->gen = 1;
    if (app->ledger != NULL) {
        kq_ledger_set_gating(app->ledger, true);
        kq_ledger_set_gate_only(app->ledger, o->gate_only);
        kq_ledger_set_fairshare(app->ledger, g->fs);
    }
    return g;
}

int kq_gating_start(kq_gating_t *g)
{
    if (pthread_create(&g->thread, NULL, run, g) != 0)
        return KQ_ENOMEM;
    g->started = true;
    kq_info("event=gating_started gate=%s reserve_timeout_ms=%ld release_parallel=%d", KQ_POD_ADMISSION_GATE,
            g->o.reserve_timeout_ms, g->o.ungate_parallel);
    return 0;
}

void kq_gating_free(kq_gating_t *g)
{
    if (g == NULL)
        return;
    if (g->started) {
        pthread_mutex_lock(&g->mu);
        g->stop = true;
        pthread_cond_signal(&g->cv);
        pthread_mutex_unlock(&g->mu);
        pthread_join(g->thread, NULL);
        /* the last checkpoint, while this replica still leads (main releases the lease after) */
        if (g->fs_loaded && !g->fs_off && kq_fairshare_tracks_any(g->fs) &&
            (g->o.is_leader == NULL || g->o.is_leader(g->o.leader_ud)))
            usage_save(g);
    }
    if (g->app->ledger != NULL)
        kq_ledger_set_fairshare(g->app->ledger, NULL);
    kq_fairshare_free(g->fs);
    free(g->fs_rv);
    gpod_t *gp, *tp;
    HASH_ITER(hh, g->pods, gp, tp) {
        HASH_DEL(g->pods, gp);
        gpod_free(gp);
    }
    guser_t *u, *tu;
    HASH_ITER(hh, g->users, u, tu) {
        HASH_DEL(g->users, u);
        user_free(u);
    }
    gqueue_t *q, *tq;
    HASH_ITER(hh, g->queues, q, tq) {
        HASH_DEL(g->queues, q);
        queue_free(q);
    }
    ggang_t *gg, *tgg;
    HASH_ITER(hh, g->gangs, gg, tgg) {
        HASH_DEL(g->gangs, gg);
        gang_free(gg);
    }
    parkset_t *ps, *tps;
    HASH_ITER(hh, g->parked, ps, tps) {
        HASH_DEL(g->parked, ps);
        free(ps->key);
        free(ps->v);
        free(ps);
    }
    free(g->never);
    ucount_t *c, *tc;
    HASH_ITER(hh, g->ucounts, c, tc) {
        HASH_DEL(g->ucounts, c);
        free(c->user);
        free(c);
    }
    kq_config_unref(g->cfg);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

struct kq_fairshare *kq_gating_fairshare(kq_gating_t *g)
{
    return g ? g->fs : NULL;
}

void kq_gating_stats(kq_gating_t *g, kq_gating_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    out->waiting = g->waiting;
    out->releases = g->releases;
    out->patch_errors = g->patch_errors;
    out->expired = g->expired;
    out->parked = g->n_parked;
    out->usage_saves = g->usage_saves;
    out->usage_save_errors = g->usage_save_errors;
    out->usage_saved_at = g->usage_saved_at;
    memcpy(out->wait_bucket, g->wait_bucket, sizeof(out->wait_bucket));
    out->wait_sum = g->wait_sum;
    out->wait_count = g->wait_count;
    pthread_mutex_unlock(&g->mu);
    out->reserved = g->app->ledger ? kq_ledger_reserved_count(g->app->ledger) : 0;
}

void kq_gating_foreach_user(kq_gating_t *g, void (*fn)(void *ud, const char *user, unsigned long releases), void *ud)
{
    if (g == NULL)
        return;
    pthread_mutex_lock(&g->mu);
    ucount_t *c, *tmp;
    HASH_ITER(hh, g->ucounts, c, tmp) {
        fn(ud, c->user, c->n);
    }
    pthread_mutex_unlock(&g->mu);
}

/* ---- the REST view: release order simulated on copies (not a hot path) ---- */

typedef struct simu {
    guser_t *u;
    gpod_t **pods; /* sorted by pod_less */
    size_t n, next;
    double pass;
    size_t idx;
} simu_t;

static bool simu_less(const void *a, const void *b)
{
    const simu_t *x = a, *y = b;
    if (x->pass != y->pass)
        return x->pass < y->pass;
    return x->u->seq < y->u->seq;
}

static int cmp_pod(const void *a, const void *b)
{
    const gpod_t *x = *(gpod_t *const *)a, *y = *(gpod_t *const *)b;
    return pod_less(x, y) ? -1 : pod_less(y, x) ? 1 : 0;
}

/* {"cpu":"1500m",...} in Kubernetes' canonical form (a JSON null on ENOMEM). */
static json_t *quantities(const kq_resource_t *r)
{
    json_t *o = json_object();
    const kq_res_entry_t *e = KQ_RES_E(r);
    for (uint32_t i = 0; o != NULL && i < r->n; i++) {
        char buf[64];
        kq_quantity_format(e[i].name, e[i].value, buf, sizeof(buf));
        json_object_set_new(o, e[i].name, json_string(buf));
    }
    return o ? o : json_null();
}

static json_t *queue_json(kq_gating_t *g, gqueue_t *q, int64_t now)
{
    json_t *pods = json_array(), *users = json_array(),
           *out = json_pack("{s:s,s:I,s:s}", "queue", q->path, "waiting", (json_int_t)q->waiting, "policy",
                            q->usage ? "usage" : "fair");
    if (out != NULL && q->usage)
        json_object_set_new(out, "halfLifeSeconds", json_real(q->halflife));
    /* the users in the heap, then the parked ones of this queue */
    size_t nu = q->users.n, cap = nu + 1;
    guser_t **us = malloc(cap * sizeof(*us));
    parkset_t *ps, *tps;
    if (us != NULL) {
        memcpy(us, q->users.v, nu * sizeof(*us));
        HASH_ITER(hh, g->parked, ps, tps) {
            for (size_t i = 0; i < ps->n; i++) {
                if (ps->v[i]->q != q)
                    continue;
                if (nu == cap) {
                    guser_t **v = realloc(us, 2 * cap * sizeof(*us));
                    if (v == NULL)
                        continue;
                    us = v;
                    cap *= 2;
                }
                us[nu++] = ps->v[i];
            }
        }
    }
    simu_t *s = calloc(nu ? nu : 1, sizeof(*s));
    heap_t h = {0};
    if (pods == NULL || users == NULL || out == NULL || s == NULL || us == NULL)
        goto fail;
    double wall = kq_fairshare_now();
    for (size_t i = 0; i < nu; i++) { /* each waiting user: what ranks it */
        guser_t *u = us[i];
        json_t *ju = json_pack("{s:s,s:f,s:I,s:b}", "user", u->name, "weight", u->weight, "waiting",
                               (json_int_t)u->pods.n, "parked", u->parked);
        if (ju != NULL && q->usage) {
            kq_resource_t cur, avg;
            kq_resource_init(&cur);
            kq_resource_init(&avg);
            if (kq_fairshare_get(g->fs, q->path, u->name, wall, &cur, &avg) == 0) {
                json_object_set_new(ju, "current", quantities(&cur));
                json_object_set_new(ju, "average", quantities(&avg));
                if (kq_resource_max(&avg, &cur) == 0) /* usage = max(average, current) */
                    json_object_set_new(ju, "share", json_real(res_share(q, &avg)));
            }
            kq_resource_free(&cur);
            kq_resource_free(&avg);
        }
        if (ju == NULL || json_array_append_new(users, ju) != 0)
            goto fail;
    }
    for (size_t i = 0; i < nu; i++) {
        guser_t *u = us[i];
        s[i].u = u;
        s[i].pass = u->pass;
        s[i].n = u->pods.n;
        if ((s[i].pods = malloc((u->pods.n ? u->pods.n : 1) * sizeof(gpod_t *))) == NULL)
            goto fail;
        memcpy(s[i].pods, u->pods.v, u->pods.n * sizeof(gpod_t *));
        qsort(s[i].pods, s[i].n, sizeof(gpod_t *), cmp_pod);
        if (h_push(&h, &s[i], simu_less, NULL) != 0)
            goto fail;
    }
    json_int_t pos = 0;
    while (h.n > 0) {
        simu_t *x = h_remove(&h, 0, simu_less, NULL);
        gpod_t *gp = x->pods[x->next++];
        json_t *e = json_pack("{s:s,s:s,s:s,s:s,s:I,s:i,s:f,s:s,s:b}", "namespace", gp->pod.ns, "name",
                              gp->pod.name, "uid", gp->uid, "user", x->u->name, "position", ++pos, "priority",
                              (int)gp->pod.priority, "waitingSeconds", (double)(now - gp->since_ms) / 1000.0, "reason",
                              x->u->reason ? x->u->reason : "waiting for the admission controller's next pass",
                              "neverFits", 0);
        if (e == NULL || json_array_append_new(pods, e) != 0)
            goto fail;
        x->pass += pod_step(g, q, x->u, &gp->pod);
        if (x->next < x->n && h_push(&h, x, simu_less, NULL) != 0)
            goto fail;
    }
    /* then the pods set aside: never released as they are, so without a position */
    for (size_t i = 0; i < g->n_never; i++) {
        gpod_t *gp = g->never[i];
        if (gp->nq != q)
            continue;
        json_t *e = json_pack("{s:s,s:s,s:s,s:s,s:n,s:i,s:f,s:s,s:b}", "namespace", gp->pod.ns, "name", gp->pod.name,
                              "uid", gp->uid, "user", gp->pod.user ? gp->pod.user : "nobody", "position",
                              "priority", (int)gp->pod.priority, "waitingSeconds",
                              (double)(now - gp->since_ms) / 1000.0, "reason", gp->never ? gp->never : "never fits",
                              "neverFits", 1);
        if (e == NULL || json_array_append_new(pods, e) != 0)
            goto fail;
    }
    for (size_t i = 0; i < nu; i++)
        free(s[i].pods);
    free(s);
    free(us);
    free(h.v);
    json_object_set_new(out, "users", users);
    json_object_set_new(out, "pods", pods);
    return out;
fail:
    if (s != NULL)
        for (size_t i = 0; i < nu; i++)
            free(s[i].pods);
    free(s);
    free(us);
    free(h.v);
    json_decref(pods);
    json_decref(users);
    json_decref(out);
    return NULL;
}

json_t *kq_gating_waiting_json(kq_gating_t *g, const char *queue)
{
    json_t *arr = json_array();
    if (arr == NULL || g == NULL)
        return arr;
    int64_t now = mono_ms();
    pthread_mutex_lock(&g->mu);
    gqueue_t *q, *tmp;
    HASH_ITER(hh, g->queues, q, tmp) {
        if (queue != NULL && strcmp(queue, q->path) != 0)
            continue;
        json_t *j = queue_json(g, q, now);
        if (j == NULL || json_array_append_new(arr, j) != 0) {
            json_decref(arr);
            arr = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
    return arr;
}
