/* Row 9: the admission gate's controller (src/control/gating.c) alone, with the pod ledger
 * and the ugm it reserves in, and the gate removal replaced by a counter (no API server:
 * the row measures kubequota's own work, not the API's latency).
 *
 *  - releases per second: --pods gated pods of --users users in one unlimited queue are
 *    handed to the controller, which is then started; the time until every pod's gate
 *    removal was called.
 *  - deletion to next gate removal: a queue whose max lets --fit pods run; --pods more wait
 *    across --users users. Each sample deletes one released pod (ledger + controller, as
 *    the informer does) and times until the next gate removal is called.
 * Deletion to next removal also with every user held by one group's limit (root.pgroup).
 * Both again in queues with kubequota.io/gating.policy: usage (half-life 1h): each release
 * also moves the usage history and re-ranks the user by its dominant share.
 * Nothing here asserts on time.
 */
#include "bench.h"

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "kubequota/app.h"
#include "kubequota/base/log.h"
#include "kubequota/control/gating.h"
#include "kubequota/control/ledger.h"

typedef struct hook {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned long calls;
    char **uids; /* released, in order */
    size_t n, cap;
    double last;
} hook_t;

static int fake_ungate(void *ud, const char *ns, const char *name, const char *uid, uint32_t idx, char *err,
                       size_t errlen)
{
    hook_t *h = ud;
    double t = now_s();
    pthread_mutex_lock(&h->mu);
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 1024;
        h->uids = realloc(h->uids, h->cap * sizeof(char *));
    }
    h->uids[h->n++] = strdup(uid);
    h->calls++;
    h->last = t;
    pthread_cond_broadcast(&h->cv);
    pthread_mutex_unlock(&h->mu);
    return 0;
}

static kq_pod_t mkpod(int i, int users, const char *queue)
{
    kq_pod_t p;
    memset(&p, 0, sizeof(p));
    char b[64];
    snprintf(b, sizeof b, "uid-%s-%d", queue, i);
    p.uid = strdup(b);
    p.ns = strdup("bench");
    p.name = strdup(b);
    p.scheduler_name = strdup("kubequota-scheduler");
    snprintf(b, sizeof b, "user-%d", i % users);
    p.user = strdup(b);
    p.queue = strdup(queue);
    p.app_id = strdup(p.uid);
    p.preemptible = true;
    p.created = 1700000000 + i;
    if (strcmp(queue, "root.pgroup") == 0) { /* every user in one group, whose limit is the queue's fit */
        p.groups = calloc(1, sizeof(char *));
        p.groups[0] = strdup("everyone");
        p.n_groups = 1;
    }
    p.gate_pos = 1;
    p.n_gates = 1;
    if (kq_resource_set(&p.request, "cpu", 1000) != 0)
        abort();
    return p;
}

typedef struct world {
    kq_config_t *cfg;
    kq_app_t app;
    kq_gating_t *g;
    hook_t h;
} world_t;

static void world_init(world_t *w, int fit)
{
    char yaml[1024];
    snprintf(yaml, sizeof yaml,
             "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n"
             "          - name: open\n          - name: small\n            resources:\n              max:\n"
             "                vcore: %d\n          - name: peruser\n            limits:\n"
             "              - limit: each\n                users: [\"*\"]\n                maxresources: {vcore: 1}\n"
             "          - name: uopen\n            resources: {max: {vcore: 1000000}}\n"
             "            properties: {kubequota.io/gating.policy: usage, kubequota.io/gating.halflife: 1h}\n"
             "          - name: usmall\n            resources: {max: {vcore: %d}}\n"
             "            properties: {kubequota.io/gating.policy: usage, kubequota.io/gating.halflife: 1h}\n"
             "          - name: pgroup\n            limits:\n              - limit: everyone\n"
             "                groups: [everyone]\n                maxresources: {vcore: %d}\n",
             fit > 0 ? fit : 1, fit > 0 ? fit : 1, fit > 0 ? fit : 1);
    kq_diags_t d;
    kq_diags_init(&d);
    if (kq_config_load_buffer(yaml, strlen(yaml), "bench", &w->cfg, &d) != 0)
        abort();
    kq_diags_free(&d);
    memset(&w->app, 0, sizeof(w->app));
    w->app.partition = "default";
    w->app.scheduler_name = "kubequota-scheduler";
    w->app.config = kq_config_holder_new(w->cfg);
    w->app.ugm = kq_ugm_new("default");
    if (w->app.ugm == NULL || kq_ugm_set_config(w->app.ugm, w->cfg) != 0)
        abort();
    w->app.ledger = kq_ledger_new(w->app.ugm, "kubequota-scheduler");
    atomic_init(&w->app.ready, true);
    memset(&w->h, 0, sizeof(w->h));
    pthread_mutex_init(&w->h.mu, NULL);
    pthread_cond_init(&w->h.cv, NULL);
    kq_gating_opts_t o;
    kq_gating_opts_default(&o);
    o.reserve_timeout_ms = 3600 * 1000;
    o.ungate = fake_ungate;
    o.ungate_ud = &w->h;
    w->g = kq_gating_new(&w->app, &o);
    w->app.gating = w->g;
}

static void world_free(world_t *w)
{
    kq_gating_free(w->g);
    kq_ledger_free(w->app.ledger);
    kq_ugm_free(w->app.ugm);
    kq_config_holder_free(w->app.config);
    kq_config_unref(w->cfg);
    for (size_t i = 0; i < w->h.n; i++)
        free(w->h.uids[i]);
    free(w->h.uids);
}

static void wait_calls(hook_t *h, unsigned long n)
{
    pthread_mutex_lock(&h->mu);
    while (h->calls < n)
        pthread_cond_wait(&h->cv, &h->mu);
    pthread_mutex_unlock(&h->mu);
}

static double releases_per_s(int pods, int users, const char *queue)
{
    world_t w;
    world_init(&w, 1);
    for (int i = 0; i < pods; i++) {
        kq_pod_t p = mkpod(i, users, queue);
        kq_ledger_observe(w.app.ledger, &p);
        kq_gating_observe(w.g, &p);
        kq_pod_clear(&p);
    }
    double t0 = now_s();
    if (kq_gating_start(w.g) != 0)
        abort();
    wait_calls(&w.h, (unsigned long)pods);
    double rate = pods / (w.h.last - t0);
    world_free(&w);
    return rate;
}

/* queue "root.small": its max lets `fit` pods run; "root.peruser": every user may run one
 * pod (the first `users` are released), so each pass also tries every blocked user. */
static void delete_to_release(const char *queue, int fit, int pods, int users, int samples, lat_t *lat)
{
    world_t w;
    world_init(&w, fit);
    if (strcmp(queue, "root.peruser") == 0)
        fit = users;
    for (int i = 0; i < fit + pods; i++) {
        kq_pod_t p = mkpod(i, users, queue);
        kq_ledger_observe(w.app.ledger, &p);
        kq_gating_observe(w.g, &p);
        kq_pod_clear(&p);
    }
    if (kq_gating_start(w.g) != 0)
        abort();
    wait_calls(&w.h, (unsigned long)fit);
    struct timespec pause = {0, 2000000}; /* let the pass that released them end */
    nanosleep(&pause, NULL);
    for (int s = 0; s < samples && s < pods; s++) {
        pthread_mutex_lock(&w.h.mu);
        unsigned long before = w.h.calls;
        char *victim = strdup(w.h.uids[(size_t)s % w.h.n]); /* an early released pod finishes */
        pthread_mutex_unlock(&w.h.mu);
        double t0 = now_s();
        kq_pod_t gone; /* what the informer does on DELETED (src/control/sync.c) */
        bool known = kq_ledger_lookup(w.app.ledger, victim, &gone) == 0;
        kq_ledger_remove(w.app.ledger, victim);
        kq_gating_remove(w.g, victim, known ? &gone : NULL);
        if (known)
            kq_pod_clear(&gone);
        wait_calls(&w.h, before + 1);
        lat_add(lat, now_s() - t0);
        free(victim);
        nanosleep(&pause, NULL);
    }
    world_free(&w);
}

int bench_gating_main(int argc, char **argv)
{
    int pods = 10000, users = 1000, fit = 100, samples = 300, reps = 3;
    static const struct option opts[] = {
        {"pods", 1, NULL, 'p'}, {"users", 1, NULL, 'u'}, {"fit", 1, NULL, 'f'},
        {"samples", 1, NULL, 's'}, {"reps", 1, NULL, 'r'}, {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': pods = atoi(optarg); break;
        case 'u': users = atoi(optarg); break;
        case 'f': fit = atoi(optarg); break;
        case 's': samples = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default: return 2;
        }
    }
    (void)kq_log_set_level("error");
    char cmd[256], what[160], val[160];
    snprintf(cmd, sizeof cmd, "%s gating --pods %d --users %d --fit %d --samples %d --reps %d", bench_self(), pods,
             users, fit, samples, reps);
    double *r = calloc((size_t)reps, sizeof(double));
    static const char *const rq[] = {"root.open", "root.uopen"};
    static const char *const rwhy[] = {"", ", policy usage"};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < reps; i++)
            r[i] = releases_per_s(pods, users, rq[k]);
        double med = median(r, (size_t)reps);
        snprintf(what, sizeof what, "gate releases/s, %d waiting pods across %d users%s (no API)", pods, users,
                 rwhy[k]);
        snprintf(val, sizeof val, "%.0f releases/s (%.2f us/release)", med, 1e6 / med);
        row_print("9", what, val, "-", cmd);
    }
    free(r);
    static const char *const qs[] = {"root.small", "root.peruser", "root.usmall", "root.pgroup"};
    static const char *const why[] = {"queue max full", "every user at its own limit", "queue max full, policy usage",
                                      "every user held by its group's limit"};
    for (int k = 0; k < 4; k++) {
        lat_t lat = {0};
        for (int i = 0; i < reps; i++)
            delete_to_release(qs[k], fit, pods, users, samples, &lat);
        lat_sort(&lat);
        snprintf(what, sizeof what, "pod deletion -> next gate removal, %d waiting across %d users, %s (no API)",
                 pods, users, why[k]);
        snprintf(val, sizeof val, "p50 %.0f us, p99 %.0f us, max %.0f us", lat_pct(&lat, 50) * 1e6,
                 lat_pct(&lat, 99) * 1e6, lat_pct(&lat, 100) * 1e6);
        row_print("9", what, val, "-", cmd);
        lat_free(&lat);
    }
    return 0;
}
