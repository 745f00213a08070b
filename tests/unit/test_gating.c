/* Unit tests for the admission gate's controller (src/control/gating.c), with the real
 * ledger and ugm and the gate removal replaced by a recorder (kq_gating_opts_t.ungate).
 * Expected orders are worked out by hand from the policy in docs/gating.md: stride
 * scheduling over users (pass += cpu millicores / weight, ties by arrival; a pod's DRA
 * devices by their share of the queue in the queue's cpu when that is more), then priority,
 * age and arrival within a user. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include <cmocka.h>

#include "kubequota/app.h"
#include "kubequota/base/log.h"
#include "kubequota/control/claims.h"
#include "kubequota/control/gating.h"
#include "kubequota/control/ledger.h"
#include "kubequota/kube/claim.h"
#include "kubequota/engine/fairshare.h"

#include "testutil.h"

#define SCHED "kubequota-scheduler"
#define DGPU "gpu.example.com.deviceclass.resource.k8s.io/devices"

static const char YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: open\n"
    "          - name: weighted\n"
    "            properties:\n"
    "              kubequota.io/gating.weight.user.a: \"3\"\n"
    "          - name: four\n"
    "            resources:\n"
    "              max:\n"
    "                vcore: 4\n"
    "          - name: drf\n"
    "            resources:\n"
    "              max: {vcore: 10, memory: 16Gi}\n"
    "            properties:\n"
    "              kubequota.io/gating.policy: usage\n"
    "              kubequota.io/gating.halflife: \"0\"\n"
    "          - name: hist\n"
    "            resources:\n"
    "              max: {vcore: 4}\n"
    "            properties:\n"
    "              kubequota.io/gating.policy: usage\n"
    "              kubequota.io/gating.halflife: 1h\n"
    "          - name: dyn\n"
    "            parent: true\n"
    "            resources:\n"
    "              max: {vcore: 8}\n"
    "            properties:\n"
    "              kubequota.io/gating.policy: usage\n"
    "              kubequota.io/gating.halflife: \"0\"\n"
    "              kubequota.io/gating.weight.user.b: \"2\"\n"
    "          - name: pergroup\n"
    "            limits:\n"
    "              - limit: team\n"
    "                groups: [\"team\"]\n"
    "                maxresources: {vcore: 2}\n"
    "          - name: peruser\n"
    "            limits:\n"
    "              - limit: each\n"
    "                users: [\"*\"]\n"
    "                maxresources: {vcore: 1}\n"
    "          - name: gpus\n"
    "            resources:\n"
    "              max: {vcore: 16, " DGPU ": 8}\n"
    "          - name: gpuuse\n"
    "            resources:\n"
    "              max: {vcore: 16}\n"
    "            properties:\n"
    "              kubequota.io/gating.policy: usage\n"
    "              kubequota.io/gating.halflife: \"0\"\n";

typedef struct fx {
    kq_config_t *cfg;
    kq_app_t app;
    kq_claims_t *claims; /* the ledger's claim table (DRA) */
    kq_gating_t *g;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char names[256][32];
    uint32_t idx[256];
    size_t n;
} fx_t;

static int record(void *ud, const char *ns, const char *name, const char *uid, uint32_t gate_idx, char *err,
                  size_t errlen)
{
    fx_t *f = ud;
    pthread_mutex_lock(&f->mu);
    if (f->n < 256) {
        snprintf(f->names[f->n], sizeof f->names[0], "%s", name);
        f->idx[f->n] = gate_idx;
        f->n++;
    }
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return 0;
}

static long interval_ms; /* 0: the default (a timed pass every second) */

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    if ((f->cfg = test_config(YAML)) == NULL)
        return -1;
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->app.partition = "default";
    f->app.scheduler_name = SCHED;
    f->app.config = kq_config_holder_new(f->cfg);
    f->app.ugm = kq_ugm_new("default");
    if (f->app.ugm == NULL || kq_ugm_set_config(f->app.ugm, f->cfg) != 0)
        return -1;
    f->app.ledger = kq_ledger_new(f->app.ugm, SCHED);
    if (f->app.ledger == NULL || (f->claims = kq_claims_new()) == NULL)
        return -1;
    kq_ledger_set_claims(f->app.ledger, f->claims);
    atomic_init(&f->app.ready, true);
    kq_gating_opts_t o;
    kq_gating_opts_default(&o);
    o.ungate = record;
    o.ungate_ud = f;
    if (interval_ms > 0)
        o.interval_ms = interval_ms;
    f->g = kq_gating_new(&f->app, &o);
    f->app.gating = f->g;
    *state = f;
    return f->g ? 0 : -1;
}

/* No timed pass within a test: whatever is released is released by an event. */
static int setup_no_timer(void **state)
{
    interval_ms = 3600 * 1000L;
    int rc = setup(state);
    interval_ms = 0;
    return rc;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    kq_gating_free(f->g);
    kq_ledger_free(f->app.ledger);
    kq_claims_free(f->claims);
    kq_ugm_free(f->app.ugm);
    kq_config_holder_free(f->app.config);
    kq_config_unref(f->cfg);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    free(f);
    return 0;
}

static const char *next_gang;
static uint32_t next_gang_min;
static int64_t next_mem; /* bytes of memory the next gated pods ask (0: none) */
static const char *next_group; /* the group of the next gated pods' user (NULL: none) */
static const char *next_claim; /* the ResourceClaim the next gated pods use (NULL: none) */

/* A gated pod of `user` in `queue` (our gate at gate_idx), observed like the informer does. */
static void gated(fx_t *f, const char *name, const char *user, const char *queue, int64_t cpu_m, int32_t prio,
                  int64_t created, uint32_t gate_idx)
{
    kq_pod_t p;
    memset(&p, 0, sizeof(p));
    p.uid = strdup(name);
    p.ns = strdup("ns");
    p.name = strdup(name);
    p.scheduler_name = strdup(SCHED);
    p.user = strdup(user);
    p.queue = strdup(queue);
    p.app_id = strdup(name);
    p.priority = prio;
    p.created = created;
    p.preemptible = true;
    p.gate_pos = gate_idx + 1;
    p.n_gates = gate_idx + 1;
    assert_int_equal(kq_resource_set(&p.request, "cpu", cpu_m), 0);
    if (next_mem > 0)
        assert_int_equal(kq_resource_set(&p.request, "memory", next_mem), 0);
    if (next_group != NULL) {
        p.groups = calloc(1, sizeof(char *));
        p.groups[0] = strdup(next_group);
        p.n_groups = 1;
    }
    if (next_gang != NULL) {
        p.gang = strdup(next_gang);
        p.gang_min = next_gang_min;
    }
    if (next_claim != NULL) {
        p.claims = calloc(1, sizeof(char *));
        p.claims[0] = strdup(next_claim);
        p.n_claims = 1;
    }
    kq_ledger_observe(f->app.ledger, &p);
    kq_gating_observe(f->g, &p);
    kq_pod_clear(&p);
}

/* A pod that went away, as the informer reports it: the ledger forgets it, then the
 * controller hears of it with the ledger's copy (src/control/sync.c). */
static void gone(fx_t *f, const char *uid, const char *user)
{
    kq_pod_t p;
    bool known = kq_ledger_lookup(f->app.ledger, uid, &p) == 0;
    assert_true(known);
    assert_string_equal(p.user, user);
    kq_ledger_remove(f->app.ledger, uid);
    kq_gating_remove(f->g, uid, &p);
    kq_pod_clear(&p);
}

/* Waits until n releases were recorded; fails (rather than hangs) after 20 s. */
static void wait_n(fx_t *f, size_t n)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 20;
    pthread_mutex_lock(&f->mu);
    int rc = 0;
    while (f->n < n && rc == 0)
        rc = pthread_cond_timedwait(&f->cv, &f->mu, &dl);
    size_t got = f->n;
    pthread_mutex_unlock(&f->mu);
    if (got < n)
        fail_msg("%zu releases after 20 s, expected %zu", got, n);
}

/* Waits long enough for a pass that would release more to have run (no time assertion:
 * the check is that nothing more was released). */
static size_t settle(fx_t *f)
{
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&f->mu);
    size_t n = f->n;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static void order(fx_t *f, const char *const *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        assert_string_equal(f->names[i], want[i]);
}

/* Equal weights: round-robin across users in one pass; within a user priority, then age. */
static void test_round_robin_priority_age(void **state)
{
    fx_t *f = *state;
    gated(f, "a-old", "a", "root.open", 1000, 0, 100, 0);
    gated(f, "a-new", "a", "root.open", 1000, 0, 200, 0);
    gated(f, "a-prio", "a", "root.open", 1000, 10, 300, 0);
    gated(f, "b-1", "b", "root.open", 1000, 0, 50, 0);
    gated(f, "b-2", "b", "root.open", 1000, 0, 60, 2);
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 5);
    /* passes: a 0, b 0 (a first: arrived first); each release +1000 */
    static const char *const want[] = {"a-prio", "b-1", "a-old", "b-2", "a-new"};
    order(f, want, 5);
    assert_int_equal(f->idx[3], 2); /* b-2's gate index, as observed */
    assert_int_equal(kq_ledger_reserved_count(f->app.ledger), 5);
    kq_gating_stats_t st;
    kq_gating_stats(f->g, &st);
    assert_int_equal(st.waiting, 0);
    assert_int_equal(st.releases, 5);
}

/* Weight 3 for a: a's pass grows by 333 per release, b's by 1000: a a a b a a a b ... */
static void test_weights(void **state)
{
    fx_t *f = *state;
    char n[32];
    for (int i = 0; i < 6; i++) {
        snprintf(n, sizeof n, "a-%d", i);
        gated(f, n, "a", "root.weighted", 1000, 0, 100 + i, 0);
    }
    for (int i = 0; i < 2; i++) {
        snprintf(n, sizeof n, "b-%d", i);
        gated(f, n, "b", "root.weighted", 1000, 0, 100 + i, 0);
    }
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 8);
    /* a 0 b 0 -> a (a 333); a 333 < b 0? no: b 0 -> b (1000); a 333 -> a (666) -> a (999)
     * -> a (1332); b 1000 -> b (2000); a a a ... */
    static const char *const want[] = {"a-0", "b-0", "a-1", "a-2", "a-3", "b-1", "a-4", "a-5"};
    order(f, want, 8);
}

/* A queue max of 4 cpu: exactly 4 released, the rest wait with the queue's reason; a pod
 * that goes away frees room for exactly one more, in fair order. */
static void test_queue_full_and_deletion(void **state)
{
    fx_t *f = *state;
    char n[32];
    for (int i = 0; i < 6; i++) {
        snprintf(n, sizeof n, "a-%d", i);
        gated(f, n, "a", "root.four", 1000, 0, 100 + i, 0);
    }
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "b-%d", i);
        gated(f, n, "b", "root.four", 1000, 0, 100 + i, 0);
    }
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 4);
    assert_int_equal(settle(f), 4);
    static const char *const want[] = {"a-0", "b-0", "a-1", "b-1"};
    order(f, want, 4);
    json_t *view = kq_gating_waiting_json(f->g, "root.four");
    json_t *q = json_array_get(view, 0);
    assert_int_equal(json_integer_value(json_object_get(q, "waiting")), 5);
    json_t *first = json_array_get(json_object_get(q, "pods"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "name")), "a-2");
    assert_non_null(strstr(json_string_value(json_object_get(first, "reason")), "root.four"));
    json_decref(view);
    /* a-0 ends: one more, a's turn (a 2000 vs b 2000: a arrived first) */
    gone(f, "a-0", "a");
    wait_n(f, 5);
    assert_int_equal(settle(f), 5);
    assert_string_equal(f->names[4], "a-2");
}

/* Users at their own limit are parked, and released again when one of their pods ends. */
static void test_user_limit_parks(void **state)
{
    fx_t *f = *state;
    gated(f, "a-0", "a", "root.peruser", 1000, 0, 100, 0);
    gated(f, "a-1", "a", "root.peruser", 1000, 0, 101, 0);
    gated(f, "b-0", "b", "root.peruser", 1000, 0, 100, 0);
    gated(f, "b-1", "b", "root.peruser", 1000, 0, 101, 0);
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 2);
    assert_int_equal(settle(f), 2);
    gone(f, "b-0", "b");
    wait_n(f, 3);
    assert_string_equal(f->names[2], "b-1");
    assert_int_equal(settle(f), 3);
}

/* A gang of 3 (min 3) in a 4-cpu queue: nothing of it goes while it is incomplete, nothing
 * while only 1 cpu is free (not 1 of 3), and all 3 at once when 3 cpu are free. */
static void test_gang_all_or_nothing(void **state)
{
    fx_t *f = *state;
    gated(f, "a-0", "a", "root.four", 1000, 0, 100, 0);
    gated(f, "a-1", "a", "root.four", 1000, 0, 101, 0);
    gated(f, "a-2", "a", "root.four", 1000, 0, 102, 0);
    next_gang = "kueue:ns/job";
    next_gang_min = 3;
    gated(f, "g-0", "b", "root.four", 1000, 0, 100, 0);
    gated(f, "g-1", "b", "root.four", 1000, 0, 101, 0);
    next_gang = NULL;
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 3);
    assert_int_equal(settle(f), 3); /* a's three; the gang is incomplete */
    json_t *view = kq_gating_waiting_json(f->g, "root.four");
    const char *why = json_string_value(
        json_object_get(json_array_get(json_object_get(json_array_get(view, 0), "pods"), 0), "reason"));
    assert_non_null(strstr(why, "gang kueue:ns/job: 2 of its 3 pods are waiting"));
    json_decref(view);
    next_gang = "kueue:ns/job";
    gated(f, "g-2", "b", "root.four", 1000, 0, 102, 0);
    next_gang = NULL;
    assert_int_equal(settle(f), 3); /* complete, but 1 cpu free: none of it */
    assert_int_equal(kq_ledger_reserved_count(f->app.ledger), 3);
    gone(f, "a-0", "a");
    assert_int_equal(settle(f), 3); /* 2 cpu free: still none */
    gone(f, "a-1", "a");
    wait_n(f, 6);
    assert_int_equal(settle(f), 6);
    for (size_t i = 3; i < 6; i++)
        assert_int_equal(f->names[i][0], 'g');
}

/* Policy "usage" with half-life 0 (dominant-resource fairness on current usage). The queue
 * caps 10 cpu and 16Gi: a's pods (1 cpu, 256Mi) weigh 1/10 each (cpu dominates), b's
 * (1 cpu, 3Gi) 3/16 = 0.1875 (memory dominates). The smallest share goes next, ties by
 * arrival (a first):
 *   a 0 b 0 -> a (0.1); b 0 -> b (0.1875); a 0.1 -> a (0.2); b 0.1875 -> b (0.375);
 *   a 0.2 -> a (0.3); a 0.3 -> a (0.4); b 0.375 -> b (0.5625); a 0.4 -> a (0.5);
 *   a 0.5 -> a (0.6); b 0.5625 -> b (0.75); now 10 cpu are used: a's next does not fit.
 * Counting cpu alone (policy "fair") would alternate a b a b a b a b a a. */
static void test_usage_dominant_share(void **state)
{
    fx_t *f = *state;
    char n[32];
    next_mem = 256LL << 20;
    for (int i = 0; i < 8; i++) {
        snprintf(n, sizeof n, "a-%d", i);
        gated(f, n, "a", "root.drf", 1000, 0, 100 + i, 0);
    }
    next_mem = 3LL << 30;
    for (int i = 0; i < 4; i++) {
        snprintf(n, sizeof n, "b-%d", i);
        gated(f, n, "b", "root.drf", 1000, 0, 100 + i, 0);
    }
    next_mem = 0;
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 10);
    assert_int_equal(settle(f), 10);
    static const char *const want[] = {"a-0", "b-0", "a-1", "b-1", "a-2", "a-3", "b-2", "a-4", "a-5", "b-3"};
    order(f, want, 10);
    /* the REST view says why: the policy, and each waiting user's share */
    json_t *view = kq_gating_waiting_json(f->g, "root.drf");
    json_t *q = json_array_get(view, 0);
    assert_string_equal(json_string_value(json_object_get(q, "policy")), "usage");
    json_t *u = json_array_get(json_object_get(q, "users"), 0);
    assert_string_equal(json_string_value(json_object_get(u, "user")), "a");
    assert_true(json_real_value(json_object_get(u, "share")) == 0.6);
    assert_string_equal(json_string_value(json_object_get(json_object_get(u, "current"), "cpu")), "6");
    assert_string_equal(json_string_value(json_object_get(json_object_get(u, "current"), "memory")), "1536Mi");
    json_decref(view);
}

/* Policy "usage" with history: a document says user a averaged 3500m in root.hist (4 cpu)
 * just now, so a ranks at 3500/4000 = 0.875 before running anything, b at 0. b goes until
 * its own share passes a's: 0.25, 0.5, 0.75, 1.0 (its 4th: 0.75 < 0.875); the queue is
 * then full. When one of b's pods ends, only a waits: a goes. */
static void test_usage_history(void **state)
{
    fx_t *f = *state;
    char n[32], doc[512], ts[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(doc, sizeof doc,
             "{\"kind\":\"GatingUsage\",\"apiVersion\":\"kubequota.io/v1\",\"updated\":\"%s\",\"queues\":"
             "[{\"queue\":\"root.hist\",\"users\":[{\"user\":\"a\",\"average\":{\"cpu\":\"3500m\"}}]}]}", ts);
    char err[256] = "";
    size_t merged = 0;
    assert_int_equal(kq_fairshare_load_text(kq_gating_fairshare(f->g), doc, strlen(doc), (double)now, &merged, err,
                                            sizeof err), 0);
    assert_int_equal(merged, 1);
    for (int i = 0; i < 4; i++) {
        snprintf(n, sizeof n, "a-%d", i);
        gated(f, n, "a", "root.hist", 1000, 0, 100 + i, 0);
    }
    for (int i = 0; i < 4; i++) {
        snprintf(n, sizeof n, "b-%d", i);
        gated(f, n, "b", "root.hist", 1000, 0, 100 + i, 0);
    }
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 4);
    assert_int_equal(settle(f), 4);
    static const char *const want[] = {"b-0", "b-1", "b-2", "b-3"};
    order(f, want, 4);
    gone(f, "b-0", "b");
    wait_n(f, 5);
    assert_int_equal(settle(f), 5);
    assert_string_equal(f->names[4], "a-0");
}

static bool parked_in_view(fx_t *f, const char *queue, const char *user)
{
    json_t *view = kq_gating_waiting_json(f->g, queue);
    json_t *users = json_object_get(json_array_get(view, 0), "users");
    bool parked = false;
    for (size_t i = 0; i < json_array_size(users); i++) {
        json_t *u = json_array_get(users, i);
        if (strcmp(json_string_value(json_object_get(u, "user")), user) == 0)
            parked = json_is_true(json_object_get(u, "parked"));
    }
    json_decref(view);
    return parked;
}

/* A group limit (team: 2 cpu) blocks every member: they are parked (not tried by each
 * pass), and the end of one member's pod wakes the others. Round-robin: a-0, b-0; then c,
 * a and b wait for the group. b-0 ends: c's turn (c's pass is the queue's, 0; a's and
 * b's are 1000), though none of c's own pods ended. No timed pass runs in this test, so c
 * can only have been woken by the end of its group member's pod. */
static void test_group_limit_parks_members(void **state)
{
    fx_t *f = *state;
    next_group = "team";
    gated(f, "a-0", "a", "root.pergroup", 1000, 0, 100, 0);
    gated(f, "a-1", "a", "root.pergroup", 1000, 0, 101, 0);
    gated(f, "b-0", "b", "root.pergroup", 1000, 0, 100, 0);
    gated(f, "b-1", "b", "root.pergroup", 1000, 0, 101, 0);
    gated(f, "c-0", "c", "root.pergroup", 1000, 0, 100, 0);
    next_group = NULL;
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 2);
    assert_int_equal(settle(f), 2);
    static const char *const want[] = {"a-0", "b-0"};
    order(f, want, 2);
    assert_true(parked_in_view(f, "root.pergroup", "a"));
    assert_true(parked_in_view(f, "root.pergroup", "b"));
    assert_true(parked_in_view(f, "root.pergroup", "c"));
    kq_gating_stats_t st;
    kq_gating_stats(f->g, &st);
    assert_int_equal(st.parked, 3);
    gone(f, "b-0", "b");
    wait_n(f, 3);
    assert_int_equal(settle(f), 3);
    assert_string_equal(f->names[2], "c-0");
    kq_gating_stats(f->g, &st); /* a and b were woken in turn, held by the group again */
    assert_int_equal(st.parked, 2);
}

/* A dynamic queue (root.dyn.x, created below the parent root.dyn, not in the file) takes its
 * nearest configured ancestor's gating properties: the usage policy, half-life 0, b's
 * weight 2, and the parent's max (8 cpu) as its capacity. a-0 and b-0 (4 cpu each) fill
 * it; a-1 and b-1 wait. a's share is 4/8 = 0.5 (weight 1: pass 0.5), b's 0.5 too (weight 2:
 * pass 0.25), so b-1 is first in line. */
static void test_dynamic_queue_inherits(void **state)
{
    fx_t *f = *state;
    gated(f, "a-0", "a", "root.dyn.x", 4000, 0, 100, 0);
    gated(f, "b-0", "b", "root.dyn.x", 4000, 0, 100, 0);
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 2);
    gated(f, "a-1", "a", "root.dyn.x", 1000, 0, 101, 0);
    gated(f, "b-1", "b", "root.dyn.x", 1000, 0, 101, 0);
    assert_int_equal(settle(f), 2);
    json_t *view = kq_gating_waiting_json(f->g, "root.dyn.x");
    json_t *q = json_array_get(view, 0);
    assert_non_null(q);
    assert_string_equal(json_string_value(json_object_get(q, "policy")), "usage");
    json_t *users = json_object_get(q, "users");
    assert_int_equal(json_array_size(users), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *u = json_array_get(users, i);
        bool is_b = strcmp(json_string_value(json_object_get(u, "user")), "b") == 0;
        assert_true(json_real_value(json_object_get(u, "share")) == 0.5);
        assert_true(json_real_value(json_object_get(u, "weight")) == (is_b ? 2.0 : 1.0));
    }
    json_t *first = json_array_get(json_object_get(q, "pods"), 0);
    assert_string_equal(json_string_value(json_object_get(first, "name")), "b-1");
    json_decref(view);
}

static bool is_tracked(fx_t *f, const char *queue)
{
    char **v = NULL;
    size_t n = 0;
    assert_int_equal(kq_fairshare_tracked(kq_gating_fairshare(f->g), &v, &n), 0);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        found = found || strcmp(v[i], queue) == 0;
        free(v[i]);
    }
    free(v);
    return found;
}

/* A dynamic usage queue keeps its history through a configuration reload while none of its
 * pods waits (its nearest configured ancestor still makes it a usage queue); a reload that
 * turns the parent to "fair" drops it. */
static void test_dynamic_queue_history_survives_reload(void **state)
{
    fx_t *f = *state;
    gated(f, "a-0", "a", "root.dyn.y", 1000, 0, 100, 0);
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 1);
    assert_int_equal(settle(f), 1); /* released: nothing of root.dyn.y waits any more */
    assert_true(is_tracked(f, "root.dyn.y"));
    kq_config_t *same = test_config(YAML);
    kq_config_holder_swap(f->app.config, same); /* a reload, same text */
    kq_config_unref(same);
    gated(f, "o-0", "o", "root.open", 1000, 0, 100, 0);       /* an event: a pass reads it */
    wait_n(f, 2);
    assert_true(is_tracked(f, "root.dyn.y"));
    char *fair = strdup(YAML);
    char *at = strstr(fair, "          - name: dyn\n");
    assert_non_null(at);
    char *pol = strstr(at, "policy: usage");
    memcpy(pol, "policy: fair ", strlen("policy: fair ")); /* same length, still valid YAML */
    kq_config_t *cf = test_config(fair);
    kq_config_holder_swap(f->app.config, cf);
    kq_config_unref(cf);
    free(fair);
    gated(f, "o-1", "o", "root.open", 1000, 0, 101, 0);
    wait_n(f, 3);
    assert_false(is_tracked(f, "root.dyn.y"));
}

/* Issue 37 route 5: a waiting pod resized while gated (pods/resize) is decided with its new
 * request. root.four has max 4 cpu: a-0 (3 cpu) goes first; b-0 asked 1 cpu, then was
 * resized to 2 cpu before the pass: it must wait (3 + 2 > 4), not be reserved for 1 cpu
 * and bound at 2. When a-0 ends it is released, reserved for 2 cpu. */
static void test_resized_while_gated(void **state)
{
    fx_t *f = *state;
    gated(f, "a-0", "a", "root.four", 3000, 0, 100, 0);
    gated(f, "b-0", "b", "root.four", 1000, 0, 101, 0);
    gated(f, "b-0", "b", "root.four", 2000, 0, 101, 0); /* the watch shows the resize */
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 1);
    assert_int_equal(settle(f), 1);
    assert_string_equal(f->names[0], "a-0");
    assert_false(kq_ledger_is_reserved(f->app.ledger, "b-0"));
    gone(f, "a-0", "a");
    wait_n(f, 2);
    assert_string_equal(f->names[1], "b-0");
    assert_true(kq_ledger_is_reserved(f->app.ledger, "b-0"));
    kq_resource_t used = KQ_RESOURCE_EMPTY;
    size_t apps = 0, pods = 0;
    assert_int_equal(kq_ugm_totals(f->app.ugm, &used, &apps, &pods), 0);
    assert_int_equal(kq_resource_get(&used, "cpu", NULL), 2000);
    kq_resource_free(&used);
}

/* ------------------------------------------------------------ DRA devices (issue 39) -- */

/* The claim ns/name of n devices of class gpu.example.com (ExactCount, not allocated: it
 * is charged what it may take), put in the claim table as the claim informer does. */
static void claim_put(fx_t *f, const char *name, int n)
{
    char *j = NULL;
    assert_true(asprintf(&j, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"cu-%s\"},"
                             "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":"
                             "\"gpu.example.com\",\"count\":%d}}]}}}",
                         name, name, n) > 0);
    kq_claim_t c;
    char err[256];
    assert_int_equal(kq_claim_parse_text(j, strlen(j), &c, err, sizeof(err)), 0);
    free(j);
    assert_int_equal(kq_claims_put(f->claims, &c, NULL), 0);
    (void)kq_ledger_claim_changed(f->app.ledger, "ns", name);
}

/* A gated pod of `user` asking 100m cpu and the devices of its own new claim "<name>-gpu"
 * of n devices (a template's claim, as kube-controller-manager makes it). */
static void gated_gpus(fx_t *f, const char *name, const char *user, const char *queue, int n, int64_t created)
{
    char cn[64];
    snprintf(cn, sizeof cn, "%s-gpu", name);
    claim_put(f, cn, n);
    next_claim = cn;
    gated(f, name, user, queue, 100, 0, created, 0);
    next_claim = NULL;
}

/* Policy fair, a queue capping 16 cpu and 8 devices: a device stands for 16/8 = 2 cpu of
 * the queue (docs/gating.md "Fair order"). a's pods ask 100m cpu and a claim of 4 devices:
 * cost max(100, 4 * 16000 / 8) = 8000; b's ask 1 cpu: cost 1000. Both start at pass 0, a
 * first (arrived first):
 *   a 0 -> a-0 (a 8000); b 0, 1000, ..., 7000 -> b-0 .. b-7 (b 8000);
 *   a 8000 = b 8000, a arrived first -> a-1 (a 16000; 8 of 8 devices now);
 *   b 8000 -> b-8 (9000), b 9000 -> b-9 (10000, b has no more);
 *   a 16000 -> a-2: 12 devices > 8, the queue is full: 12 released, a-2 waits.
 * Costed by the containers' request alone (100 per a pod, the bug this guards against) a
 * would go a-0, b-0, a-1 and then hold the full queue's turn with a-2: 3 releases. */
static void test_fair_devices_cost_their_share(void **state)
{
    fx_t *f = *state;
    char n[32];
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "a-%d", i);
        gated_gpus(f, n, "a", "root.gpus", 4, 100 + i);
    }
    for (int i = 0; i < 10; i++) {
        snprintf(n, sizeof n, "b-%d", i);
        gated(f, n, "b", "root.gpus", 1000, 0, 100 + i, 0);
    }
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 12);
    assert_int_equal(settle(f), 12);
    static const char *const want[] = {"a-0", "b-0", "b-1", "b-2", "b-3", "b-4",
                                       "b-5", "b-6", "b-7", "a-1", "b-8", "b-9"};
    order(f, want, 12);
    assert_false(kq_ledger_is_reserved(f->app.ledger, "a-2"));
}

/* A claim shared by two of c's pods is charged once, to the first counted (ledger.h), so
 * the second costs only its cpu: c-0 and c-1 share "shared" (4 devices), c-2 has its own 4.
 *   c 0 -> c-0 (8000); d 0 .. 7000 -> d-0 .. d-7 (d 8000);
 *   c 8000 = d 8000, c first -> c-1: the claim is c-0's, cost max(100, 0) = 100 (c 8100);
 *   d 8000 -> d-8 (9000); c 8100 -> c-2 (4 + 4 devices fit; c 16100); d 9000 -> d-9.
 * Charging c-1 the claim again would give ... c-1, d-8, d-9, c-2. */
static void test_fair_shared_claim_costs_once(void **state)
{
    fx_t *f = *state;
    char n[32];
    claim_put(f, "shared", 4);
    next_claim = "shared";
    gated(f, "c-0", "c", "root.gpus", 100, 0, 100, 0);
    gated(f, "c-1", "c", "root.gpus", 100, 0, 101, 0);
    next_claim = NULL;
    gated_gpus(f, "c-2", "c", "root.gpus", 4, 102);
    for (int i = 0; i < 10; i++) {
        snprintf(n, sizeof n, "d-%d", i);
        gated(f, n, "d", "root.gpus", 1000, 0, 100 + i, 0);
    }
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 13);
    assert_int_equal(settle(f), 13);
    static const char *const want[] = {"c-0", "d-0", "d-1", "d-2", "d-3", "d-4", "d-5",
                                       "d-6", "d-7", "c-1", "d-8", "c-2", "d-9"};
    order(f, want, 13);
}

/* The waiting view's order (the simulation of the next releases) costs a pod with claims
 * by the devices it would be charged too (kq_ledger_charge). z's 16-cpu pod fills the
 * queue first; then a (2 pods of 4 devices, 8000 each, as above) and b (3 pods of 1 cpu)
 * wait, both at pass 0, a first: a-0 (a 8000), b-0, b-1, b-2 (b 3000), a-1. By the
 * request alone it would read a-0, b-0, a-1, b-1, b-2. */
static void test_waiting_view_counts_devices(void **state)
{
    fx_t *f = *state;
    gated(f, "z-0", "z", "root.gpus", 16000, 0, 50, 0);
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 1);
    gated_gpus(f, "a-0", "a", "root.gpus", 4, 100);
    gated_gpus(f, "a-1", "a", "root.gpus", 4, 101);
    gated(f, "b-0", "b", "root.gpus", 1000, 0, 100, 0);
    gated(f, "b-1", "b", "root.gpus", 1000, 0, 101, 0);
    gated(f, "b-2", "b", "root.gpus", 1000, 0, 102, 0);
    assert_int_equal(settle(f), 1);
    json_t *view = kq_gating_waiting_json(f->g, "root.gpus");
    json_t *pods = json_object_get(json_array_get(view, 0), "pods");
    assert_int_equal(json_array_size(pods), 5);
    static const char *const want[] = {"a-0", "b-0", "b-1", "b-2", "a-1"};
    for (size_t i = 0; i < 5; i++) {
        json_t *p = json_array_get(pods, i);
        assert_string_equal(json_string_value(json_object_get(p, "name")), want[i]);
        assert_int_equal(json_integer_value(json_object_get(p, "position")), (json_int_t)i + 1);
    }
    json_decref(view);
}

/* Policy usage (half-life 0: plain dominant share) in a queue capping 16 cpu and no
 * devices: a device nobody caps weighs as one cpu of the queue, 1/16 (docs/gating.md
 * "Usage policy"). a's pods (100m, 4 devices) weigh 4/16 = 0.25 each, b's (1 cpu) 1/16:
 *   a 0 -> a-0 (0.25); b 0 .. 0.1875 -> b-0 .. b-3 (b 0.25);
 *   a 0.25 = b 0.25, a first -> a-1 (0.5); b 0.25 -> b-4 (0.3125).
 * With the devices ignored (a's share 0.1/16 a pod) it would be a-0, a-1, b-0 .. b-4. */
static void test_usage_share_counts_devices(void **state)
{
    fx_t *f = *state;
    char n[32];
    gated_gpus(f, "a-0", "a", "root.gpuuse", 4, 100);
    gated_gpus(f, "a-1", "a", "root.gpuuse", 4, 101);
    for (int i = 0; i < 5; i++) {
        snprintf(n, sizeof n, "b-%d", i);
        gated(f, n, "b", "root.gpuuse", 1000, 0, 100 + i, 0);
    }
    assert_int_equal(kq_gating_start(f->g), 0);
    wait_n(f, 7);
    assert_int_equal(settle(f), 7);
    static const char *const want[] = {"a-0", "b-0", "b-1", "b-2", "b-3", "a-1", "b-4"};
    order(f, want, 7);
}

int main(void)
{
    (void)kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_robin_priority_age, setup, teardown),
        cmocka_unit_test_setup_teardown(test_weights, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_full_and_deletion, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_limit_parks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resized_while_gated, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gang_all_or_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_dominant_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_history, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_limit_parks_members, setup_no_timer, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_queue_inherits, setup_no_timer, teardown),
        cmocka_unit_test_setup_teardown(test_dynamic_queue_history_survives_reload, setup_no_timer, teardown),
        cmocka_unit_test_setup_teardown(test_fair_devices_cost_their_share, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fair_shared_claim_costs_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waiting_view_counts_devices, setup_no_timer, teardown),
        cmocka_unit_test_setup_teardown(test_usage_share_counts_devices, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
