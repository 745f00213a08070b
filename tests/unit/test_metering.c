/* Unit tests for metering: Hops' multiplier and charging cases re-encoded for pods (the
 * numbers are worked out by hand in each test's comment), minimum runtime, resize, dominant
 * resource, day split, budgets, checkpoint round trip and corruption, leadership, and
 * feeding from several threads while the compute thread runs. Time comes from an injected
 * clock; no test depends on how fast anything runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/log.h"
#include "kubequota/kube/jscan.h"
#include "kubequota/control/metering.h"
#include "kubequota/engine/ugm.h"
#include "kubequota/kube/pod.h"
#include "kubequota/engine/resource.h"

#include "testutil.h"

#define T0 1700000000.0 /* 2023-11-14T22:13:20Z */
#define GI (1LL << 30)
#define EPS 1e-9

/* ------------------------------------------------------------------ fixtures */

static atomic_llong clock_ms;

static double fake_clock(void *ud)
{
    (void)ud;
    return (double)atomic_load(&clock_ms) / 1000.0;
}

static void set_clock(double t)
{
    atomic_store(&clock_ms, (long long)llround(t * 1000));
}

static void opts_init(kq_metering_opts_t *o)
{
    kq_metering_opts_default(o);
    o->clock = fake_clock;
}

static kq_metering_t *meter(const kq_metering_opts_t *o)
{
    char err[512] = "";
    kq_metering_t *m = kq_metering_new(o, err, sizeof(err));
    if (m == NULL)
        fail_msg("kq_metering_new: %s", err);
    return m;
}

static kq_resource_t res(int64_t cpu_milli, int64_t mem, int64_t gpus)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, "cpu", cpu_milli), 0);
    assert_int_equal(kq_resource_set(&r, "memory", mem), 0);
    if (gpus > 0)
        assert_int_equal(kq_resource_set(&r, "nvidia.com/gpu", gpus), 0);
    return r;
}

/* A pod as kq_pod_parse would leave it (strings borrowed: metering copies them). */
static kq_pod_t podv(const char *uid, const char *user, const char *queue, kq_resource_t r)
{
    kq_pod_t p = {0};
    p.uid = (char *)uid;
    p.ns = (char *)"default";
    p.name = (char *)uid;
    p.user = (char *)user;
    p.queue = (char *)queue;
    p.request = r;
    return p;
}

static void bind(kq_metering_t *m, const char *uid, const char *user, const char *group, const char *queue,
                 kq_resource_t r, double at)
{
    kq_pod_t p = podv(uid, user, queue, r);
    assert_int_equal(kq_metering_pod_bound(m, &p, group, at), 0);
}

static kq_config_t *config(const char *yaml)
{
    kq_config_t *cfg = test_config(yaml);
    if (cfg == NULL)
        fail_msg("config refused (diagnostics above)");
    return cfg;
}

static void assert_credits(kq_metering_t *m, const char *kind, const char *name, double want)
{
    double got = kq_metering_charged(m, kind, name);
    if (fabs(got - want) > 1e-6)
        fail_msg("%s %s charged %.6f, want %.6f", kind, name, got, want);
}

static char *tmpdir(void)
{
    char tmpl[] = "/tmp/kq-metering-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void rmdir_all(char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            char p[1024];
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
    free(dir);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    char *buf = calloc(1, 1 << 20);
    size_t n = fread(buf, 1, (1 << 20) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* ------------------------------------------------------------------ multiplier (Hops) */

/* Hops' TestPriceMultiplicationFactorService: tipping points 0.2, increments 10 (general)
 * and 20 (GPU); half the memory and every GPU allocated. general = 1 + (0.5 - 0.2) x 10
 * = 4; GPU = 1 + (1 - 0.2) x 20 = 17. Here: 14 GiB and 20 cpus allocatable, one GPU; seven
 * pods of 1 cpu and 1 GiB, one of them with the GPU (cpu 7/20 = 0.35 < memory 0.5). */
static void test_hops_multiplier(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    o.increment = 10;
    o.gpu_increment = 20;
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    kq_resource_t cap = res(20000, 14 * GI, 1);
    kq_metering_set_nodes_allocatable(m, &cap);

    double g = 0, gpu = 0;
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_multipliers(m, &g, &gpu);
    assert_true(fabs(g - 1) < EPS && fabs(gpu - 1) < EPS); /* empty cluster: base price */

    char uid[16];
    for (int i = 0; i < 7; i++) {
        snprintf(uid, sizeof(uid), "p%d", i);
        bind(m, uid, "u", NULL, "root.a", res(1000, GI, i == 0 ? 1 : 0), T0);
    }
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_multipliers(m, &g, &gpu);
    assert_true(fabs(g - 4) < EPS);
    assert_true(fabs(gpu - 17) < EPS);

    json_t *pj = kq_metering_prices_json(m);
    assert_non_null(pj);
    const json_t *u = json_object_get(pj, "utilisation");
    assert_true(fabs(json_real_value(json_object_get(u, "memory")) - 0.5) < EPS);
    assert_true(fabs(json_real_value(json_object_get(u, "cpu")) - 0.35) < EPS);
    assert_true(fabs(json_real_value(json_object_get(u, "general")) - 0.5) < EPS);
    assert_true(fabs(json_real_value(json_object_get(u, "gpu")) - 1) < EPS);
    assert_string_equal(json_string_value(json_object_get(json_object_get(pj, "units"), "memory")), "1Gi");
    assert_string_equal(json_string_value(json_object_get(pj, "computedAt")), "2023-11-14T22:13:20Z");
    json_decref(pj);

    /* The GPU pod ends: GPU utilisation 0, so the GPU multiplier falls back to the general
     * one, which is 1 + (6/14 - 0.2) x 10. */
    assert_int_equal(kq_metering_pod_ended(m, "p0", T0), 0);
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_multipliers(m, &g, &gpu);
    assert_true(fabs(g - (1 + (6.0 / 14 - 0.2) * 10)) < EPS);
    assert_true(fabs(gpu - g) < EPS);
    kq_metering_free(m);
}

/* Pending requests count as used for cpu and memory (Hops: used = allocated + pending),
 * never for GPUs; a pending pod that is bound stops being pending. */
static void test_pending_counts(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    o.increment = 10;
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    kq_resource_t cap = res(100000, 10 * GI, 2);
    kq_metering_set_nodes_allocatable(m, &cap);
    kq_resource_t r = res(1000, 5 * GI, 2);
    assert_int_equal(kq_metering_pod_pending(m, "w", &r), 0);
    assert_int_equal(kq_metering_compute_now(m), 0);
    double g, gpu;
    kq_metering_multipliers(m, &g, &gpu);
    assert_true(fabs(g - 4) < EPS);   /* 1 + (0.5 - 0.2) x 10 */
    assert_true(fabs(gpu - 4) < EPS); /* pending GPUs do not count: floor = general */
    /* Announced again with a new size: replaced, not added. */
    r = res(1000, 2 * GI, 0);
    assert_int_equal(kq_metering_pod_pending(m, "w", &r), 0);
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_multipliers(m, &g, NULL);
    assert_true(fabs(g - 1) < EPS); /* 0.2: at the tipping point, not above */
    /* Bound now: counted once, as running. */
    bind(m, "w", "u", NULL, "root", res(1000, 3 * GI, 0), T0);
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_multipliers(m, &g, NULL);
    assert_true(fabs(g - (1 + (0.3 - 0.2) * 10)) < EPS);
    /* A pending pod not re-announced by a relist is forgotten. */
    r = res(0, 6 * GI, 0);
    assert_int_equal(kq_metering_pod_pending(m, "x", &r), 0);
    kq_metering_resync_begin(m);
    bind(m, "w", "u", NULL, "root", res(1000, 3 * GI, 0), T0);
    kq_metering_resync_end(m);
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_multipliers(m, &g, NULL);
    assert_true(fabs(g - 2) < EPS);
    kq_metering_pod_pending_gone(m, "nobody-knows-me");
    kq_metering_free(m);
}

/* ------------------------------------------------------------------ charging (Hops) */

static const char HOPS_YAML[] = "partitions:\n"
                                "  - name: default\n"
                                "    queues:\n"
                                "      - name: root\n"
                                "        queues:\n"
                                "          - name: project07\n"
                                "            properties:\n"
                                "              kubequota.io/budget: \"50\"\n";

/* Hops' TestQuotaService with pods: 1 cpu / 1 GiB pods (units 1 cpu and 1 GiB: one credit
 * per second), multiplier 1, minimum runtime 10 s, a 50-credit budget on the project's
 * queue. Pods (i, j) for j < i < 10, 45 in all, bound at T0:
 *   i in 0..2  ( 3 pods) end after 1 s             -> minimum runtime: 10 each   =  30
 *   i in 3..9  (42 pods) computed at 10 s          -> 10 each                    = 420
 *   i in 3..5  (12 pods) end at 19 s               -> 9 each                     = 108
 *   i in 6..9  (30 pods) resized to 2 GiB at 20 s  -> the past at 1 GiB: 10 each = 300
 *                        end at 30 s               -> 10 s at 2 GiB: 20 each     = 600
 * total 1458 credits; remaining budget 50 - 1458 = -1408; all of it on one day. */
static void test_hops_quota_service(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    kq_config_t *cfg = config(HOPS_YAML);
    kq_diags_t d;
    kq_diags_init(&d);
    assert_int_equal(kq_metering_set_config(m, kq_config_partition(cfg, "default"), &d), 0);
    kq_diags_free(&d);

    char uid[32];
    int npods = 0;
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < i; j++) {
            snprintf(uid, sizeof(uid), "c-%d-%d", i, j);
            bind(m, uid, "rizvi", NULL, "root.project07", res(1000, GI, 0), T0);
            npods++;
        }
    assert_int_equal(npods, 45);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < i; j++) {
            snprintf(uid, sizeof(uid), "c-%d-%d", i, j);
            assert_int_equal(kq_metering_pod_ended(m, uid, T0 + 1), 0);
        }
    set_clock(T0 + 10);
    assert_int_equal(kq_metering_compute_now(m), 0);
    for (int i = 3; i < 6; i++)
        for (int j = 0; j < i; j++) {
            snprintf(uid, sizeof(uid), "c-%d-%d", i, j);
            assert_int_equal(kq_metering_pod_ended(m, uid, T0 + 19), 0);
        }
    kq_resource_t big = res(1000, 2 * GI, 0);
    for (int i = 6; i < 10; i++)
        for (int j = 0; j < i; j++) {
            snprintf(uid, sizeof(uid), "c-%d-%d", i, j);
            assert_int_equal(kq_metering_pod_resized(m, uid, &big, T0 + 20), 0);
        }
    for (int i = 6; i < 10; i++)
        for (int j = 0; j < i; j++) {
            snprintf(uid, sizeof(uid), "c-%d-%d", i, j);
            assert_int_equal(kq_metering_pod_ended(m, uid, T0 + 30), 0);
        }
    assert_credits(m, "user", "rizvi", 1458);
    assert_credits(m, "queue", "root.project07", 1458);
    assert_credits(m, "queue", "root", 1458);
    assert_int_equal(kq_metering_pod_ended(m, "c-9-0", T0 + 40), KQ_ENOENT); /* ended once */

    json_t *cj = NULL;
    char err[256];
    assert_int_equal(kq_metering_charges_json(m, NULL, NULL, "root.project07", NULL, NULL, &cj, err, sizeof(err)), 0);
    const json_t *q = json_array_get(json_object_get(cj, "queues"), 0);
    assert_string_equal(json_string_value(json_object_get(q, "name")), "root.project07");
    assert_true(fabs(json_real_value(json_object_get(q, "totalCredits")) - 1458) < 1e-6);
    assert_true(fabs(json_real_value(json_object_get(q, "budget")) - 50) < 1e-6);
    assert_true(fabs(json_real_value(json_object_get(q, "remaining")) - (-1408)) < 1e-6);
    const json_t *days = json_object_get(q, "days");
    assert_int_equal(json_array_size(days), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(days, 0), "day")), "2023-11-14");
    assert_true(fabs(json_real_value(json_object_get(json_array_get(days, 0), "credits")) - 1458) < 1e-6);
    assert_int_equal(json_array_size(json_object_get(cj, "users")), 0); /* filtered to queues */
    json_decref(cj);

    char reason[512];
    assert_int_equal(kq_metering_check_budget(m, "rizvi", NULL, "root.project07", reason, sizeof(reason), NULL),
                     KQ_EDENIED);
    assert_non_null(strstr(reason, "queue \"root.project07\""));
    assert_non_null(strstr(reason, "1458.00 credits of its 50.00 credit budget"));
    assert_int_equal(kq_metering_check_budget(m, "rizvi", NULL, "root.other", reason, sizeof(reason), NULL), 0);
    kq_config_unref(cfg);
    kq_metering_free(m);
}

/* A pod that lives less than the minimum runtime pays the minimum, however its life was
 * cut into intervals; longer pods pay their life. */
static void test_minimum_runtime(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    bind(m, "short", "a", NULL, "root", res(1000, 0, 0), T0);
    assert_int_equal(kq_metering_pod_ended(m, "short", T0 + 3), 0);
    assert_credits(m, "user", "a", 10);

    bind(m, "cut", "b", NULL, "root", res(1000, 0, 0), T0);
    set_clock(T0 + 4);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "user", "b", 4);
    assert_int_equal(kq_metering_pod_ended(m, "cut", T0 + 6), 0);
    assert_credits(m, "user", "b", 10);

    bind(m, "long", "c", NULL, "root", res(1000, 0, 0), T0);
    assert_int_equal(kq_metering_pod_ended(m, "long", T0 + 25), 0);
    assert_credits(m, "user", "c", 25);
    kq_metering_free(m);

    assert_int_equal(kq_metering_opts_set(&o, "min-runtime=0", NULL, 0), 0);
    set_clock(T0 + 1); /* a new ledger's epoch: history before it is not billed */
    m = meter(&o);
    bind(m, "old", "d", NULL, "root", res(1000, 0, 0), T0 - 3600);
    assert_int_equal(kq_metering_pod_ended(m, "old", T0 + 5), 0);
    assert_credits(m, "user", "d", 4);
    kq_metering_free(m);
    set_clock(T0);
    m = meter(&o);
    bind(m, "short", "a", NULL, "root", res(1000, 0, 0), T0);
    assert_int_equal(kq_metering_pod_ended(m, "short", T0 + 3), 0);
    assert_credits(m, "user", "a", 3);
    kq_metering_free(m);
}

/* A resize charges the past at the old size: 2 cpus for 30 s, then 4 cpus for 10 s = 100.
 * A bound pod announced again with another request is the same resize, at "now". */
static void test_resize_mid_run(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    bind(m, "p", "a", NULL, "root", res(2000, 0, 0), T0);
    kq_resource_t r4 = res(4000, 0, 0);
    assert_int_equal(kq_metering_pod_resized(m, "p", &r4, T0 + 30), 0);
    assert_credits(m, "user", "a", 60);
    assert_int_equal(kq_metering_pod_ended(m, "p", T0 + 40), 0);
    assert_credits(m, "user", "a", 100);
    assert_int_equal(kq_metering_pod_resized(m, "p", &r4, T0 + 50), KQ_ENOENT);

    bind(m, "q", "b", NULL, "root", res(1000, 0, 0), T0);
    set_clock(T0 + 20);
    bind(m, "q", "b", NULL, "root", res(3000, 0, 0), T0); /* watch MODIFIED: resized */
    assert_credits(m, "user", "b", 20);
    bind(m, "q", "b", NULL, "root", res(3000, 0, 0), T0); /* unchanged: nothing */
    assert_int_equal(kq_metering_pod_ended(m, "q", T0 + 30), 0);
    assert_credits(m, "user", "b", 50);
    kq_metering_free(m);
}

/* The pod pays its dominant resource. Multipliers: general 1 (1% of cpu and memory);
 * GPU 1 + (1 - 0.2) x 2 = 2.6 (all 4 GPUs used).
 *   A: 2 cpu, 3 GiB, 1 GPU for 10 s -> cpu 20, memory 30, GPU 26     -> 30 (memory)
 *   B: 1 cpu, 1 GiB, 3 GPUs         -> cpu 10, memory 10, GPU 78     -> 78 (GPU)
 *   C: 5 cpu, 1 GiB at price-cpu 2  -> cpu 100, memory 10            -> 100 (cpu) */
static void test_dominant_resource(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    kq_resource_t cap = res(1000000, 1000 * GI, 4);
    kq_resource_t a = res(2000, 3 * GI, 1);
    kq_metering_set_nodes_allocatable(m, &cap);
    bind(m, "A", "a", NULL, "root", a, T0);
    bind(m, "B", "b", NULL, "root", res(1000, GI, 3), T0);
    assert_int_equal(kq_metering_compute_now(m), 0);
    double g, gpu;
    kq_metering_multipliers(m, &g, &gpu);
    assert_true(fabs(g - 1) < EPS && fabs(gpu - 2.6) < EPS);
    assert_int_equal(kq_metering_pod_ended(m, "A", T0 + 10), 0);
    assert_int_equal(kq_metering_pod_ended(m, "B", T0 + 10), 0);
    assert_credits(m, "user", "a", 30);
    assert_credits(m, "user", "b", 78);
    kq_metering_free(m);

    opts_init(&o);
    assert_int_equal(kq_metering_opts_set(&o, "price-cpu=2", NULL, 0), 0);
    m = meter(&o);
    bind(m, "C", "c", NULL, "root", res(5000, GI, 0), T0);
    assert_int_equal(kq_metering_pod_ended(m, "C", T0 + 10), 0);
    assert_credits(m, "user", "c", 100);
    kq_metering_free(m);
}

/* An interval across 00:00 UTC is split: 10 s on the first day, 20 s on the next. */
static void test_day_boundary(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    double midnight = (floor(T0 / 86400) + 1) * 86400; /* 2023-11-15T00:00:00Z */
    set_clock(midnight - 100);
    kq_metering_t *m = meter(&o);
    bind(m, "p", "a", "dev", "root.x", res(1000, 0, 0), midnight - 10);
    set_clock(midnight + 20);
    assert_int_equal(kq_metering_compute_now(m), 0);
    json_t *cj = NULL;
    char err[256];
    assert_int_equal(kq_metering_charges_json(m, "a", "dev", NULL, NULL, NULL, &cj, err, sizeof(err)), 0);
    for (int k = 0; k < 2; k++) {
        const json_t *c = json_array_get(json_object_get(cj, k ? "groups" : "users"), 0);
        const json_t *days = json_object_get(c, "days");
        assert_int_equal(json_array_size(days), 2);
        assert_string_equal(json_string_value(json_object_get(json_array_get(days, 0), "day")), "2023-11-14");
        assert_true(fabs(json_real_value(json_object_get(json_array_get(days, 0), "credits")) - 10) < 1e-6);
        assert_string_equal(json_string_value(json_object_get(json_array_get(days, 1), "day")), "2023-11-15");
        assert_true(fabs(json_real_value(json_object_get(json_array_get(days, 1), "credits")) - 20) < 1e-6);
        assert_true(fabs(json_real_value(json_object_get(c, "totalCredits")) - 30) < 1e-6);
        assert_null(json_object_get(c, "budget"));
    }
    assert_int_equal(json_array_size(json_object_get(cj, "queues")), 0);
    json_decref(cj);

    /* A day range keeps only its days. */
    assert_int_equal(kq_metering_charges_json(m, "a", NULL, NULL, "2023-11-15", "2023-11-15", &cj, err, sizeof(err)),
                     0);
    const json_t *c = json_array_get(json_object_get(cj, "users"), 0);
    assert_int_equal(json_array_size(json_object_get(c, "days")), 1);
    assert_true(fabs(json_real_value(json_object_get(c, "rangeCredits")) - 20) < 1e-6);
    assert_true(fabs(json_real_value(json_object_get(c, "totalCredits")) - 30) < 1e-6);
    json_decref(cj);

    /* No filter: every owner; queues hierarchically (root and root.x). */
    assert_int_equal(kq_metering_charges_json(m, NULL, NULL, NULL, NULL, "2023-11-14", &cj, err, sizeof(err)), 0);
    const json_t *qs = json_object_get(cj, "queues");
    assert_int_equal(json_array_size(qs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(qs, 0), "name")), "root");
    assert_string_equal(json_string_value(json_object_get(json_array_get(qs, 1), "name")), "root.x");
    assert_true(fabs(json_real_value(json_object_get(json_array_get(qs, 1), "rangeCredits")) - 10) < 1e-6);
    json_decref(cj);

    cj = NULL;
    assert_int_equal(kq_metering_charges_json(m, NULL, NULL, NULL, "2023-02-30", NULL, &cj, err, sizeof(err)),
                     KQ_EINVAL);
    assert_non_null(strstr(err, "2023-02-30"));
    assert_int_equal(kq_metering_charges_json(m, NULL, NULL, NULL, "2023-11-15", "2023-11-14", &cj, err, sizeof(err)),
                     KQ_EINVAL);
    assert_int_equal(kq_metering_charges_json(m, NULL, NULL, NULL, "15-11-2023", NULL, &cj, err, sizeof(err)),
                     KQ_EINVAL);
    assert_null(cj);
    kq_metering_free(m);
}

/* ------------------------------------------------------------------ budgets */

static const char BUDGET_YAML[] = "partitions:\n"
                                  "  - name: default\n"
                                  "    queues:\n"
                                  "      - name: root\n"
                                  "        properties:\n"
                                  "          kubequota.io/budget.user.alice: \"15\"\n"
                                  "          kubequota.io/budget.group.dev: \"100\"\n"
                                  "        queues:\n"
                                  "          - name: a\n"
                                  "            properties:\n"
                                  "              kubequota.io/budget: \"1000\"\n"
                                  "            limits:\n"
                                  "              - limit: devs\n"
                                  "                groups: [dev]\n"
                                  "                maxapplications: 10\n"
                                  "              - limit: others\n"
                                  "                groups: [\"*\"]\n"
                                  "                maxapplications: 10\n"
                                  "          - name: b\n";

static void apply_yaml(kq_metering_t *m, const char *yaml, int want_rc, const char *want_text)
{
    kq_config_t *cfg = config(yaml);
    kq_diags_t d;
    kq_diags_init(&d);
    assert_int_equal(kq_metering_check_config(kq_config_partition(cfg, "default"), &d), want_rc);
    kq_diags_free(&d);
    kq_diags_init(&d);
    assert_int_equal(kq_metering_set_config(m, kq_config_partition(cfg, "default"), &d), want_rc);
    if (want_text != NULL) {
        char *all = kq_diags_join(&d, "\n");
        assert_non_null(all);
        if (strstr(all, want_text) == NULL)
            fail_msg("diagnostics \"%s\" do not say \"%s\"", all, want_text);
        free(all);
    }
    kq_diags_free(&d);
    kq_config_unref(cfg);
}

static void test_budget_exhaustion(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    char reason[512];
    /* Without budgets nothing is denied. */
    assert_int_equal(kq_metering_check_budget(m, "alice", "dev", "root.a", reason, sizeof(reason), NULL), 0);
    apply_yaml(m, BUDGET_YAML, 0, NULL);

    bind(m, "p1", "alice", "dev", "root.a", res(1000, 0, 0), T0);
    set_clock(T0 + 10);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_int_equal(kq_metering_check_budget(m, "alice", "dev", "root.a", reason, sizeof(reason), NULL), 0);
    set_clock(T0 + 15);
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_denial_t kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_metering_check_budget(m, "alice", "dev", "root.a", reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_non_null(strstr(reason, "user \"alice\" has been charged 15.00 credits of its 15.00 credit budget"));
    assert_int_equal(kind, KQ_DENIAL_BUDGET);
    assert_int_equal(kq_metering_check_budget(m, "bob", "dev", "root.a", reason, sizeof(reason), &kind), 0);
    assert_int_equal(kind, KQ_DENIAL_NONE);
    /* The running pod keeps running and being charged. */
    set_clock(T0 + 20);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "user", "alice", 20);

    /* The group's budget, then the parent queue's, bind other users. */
    apply_yaml(m,
               "partitions:\n"
               "  - name: default\n"
               "    queues:\n"
               "      - name: root\n"
               "        properties:\n"
               "          kubequota.io/budget.group.dev: \"20\"\n"
               "        queues:\n"
               "          - name: a\n"
               "            properties:\n"
               "              kubequota.io/budget: \"30\"\n"
               "            queues:\n"
               "              - name: c\n",
               0, NULL);
    assert_int_equal(kq_metering_check_budget(m, "alice", NULL, "root.a", reason, sizeof(reason), NULL), 0);
    assert_int_equal(kq_metering_check_budget(m, "bob", "dev", "root.b", reason, sizeof(reason), NULL), KQ_EDENIED);
    assert_non_null(strstr(reason, "group \"dev\""));
    set_clock(T0 + 30);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_int_equal(kq_metering_check_budget(m, "bob", NULL, "root.a.c", reason, sizeof(reason), NULL), KQ_EDENIED);
    assert_non_null(strstr(reason, "queue \"root.a\" has been charged 30.00 credits of its 30.00 credit budget"));

    json_t *cj = NULL;
    char err[128];
    assert_int_equal(kq_metering_charges_json(m, "bob", NULL, NULL, NULL, NULL, &cj, err, sizeof(err)), 0);
    const json_t *b = json_array_get(json_object_get(cj, "users"), 0);
    assert_string_equal(json_string_value(json_object_get(b, "name")), "bob"); /* listed though never charged */
    assert_true(json_real_value(json_object_get(b, "totalCredits")) == 0);
    json_decref(cj);

    /* Bad budgets are rejected whole: the budgets in force stay. */
    apply_yaml(m,
               "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n"
               "          - name: a\n            properties:\n              kubequota.io/budget.user.bob: \"5\"\n",
               KQ_EPARSE, "user and group budgets belong on the root queue");
    apply_yaml(m,
               "partitions:\n  - name: default\n    queues:\n      - name: root\n        properties:\n"
               "          kubequota.io/budget: \"ten\"\n",
               KQ_EPARSE, "\"ten\" is not a number of credits");
    apply_yaml(m,
               "partitions:\n  - name: default\n    queues:\n      - name: root\n        properties:\n"
               "          kubequota.io/budgets: \"1\"\n",
               KQ_EPARSE, "unknown budget property");
    assert_int_equal(kq_metering_check_budget(m, "bob", "dev", "root.b", reason, sizeof(reason), NULL), KQ_EDENIED);

    /* Budgets removed: nothing denied. */
    kq_diags_t d;
    kq_diags_init(&d);
    assert_int_equal(kq_metering_set_config(m, NULL, &d), 0);
    kq_diags_free(&d);
    assert_int_equal(kq_metering_check_budget(m, "bob", "dev", "root.a.c", reason, sizeof(reason), NULL), 0);
    kq_metering_free(m);
}

/* Charges are booked to the group the ugm tracks the application against (the same choice
 * as usage): kq_ledger_pod_group -> kq_ugm_group_of. */
static const char *tracked_group(kq_ugm_t *u, const kq_pod_t *pod, char *buf, size_t len)
{
    kq_user_t who = {.name = pod->user, .groups = (const char *const *)pod->groups, .n_groups = pod->n_groups};
    assert_int_equal(kq_ugm_group_of(u, pod->queue, pod->app_id, &who, buf, len), 0);
    return buf[0] ? buf : NULL;
}

static void test_tracked_group(void **state)
{
    (void)state;
    kq_config_t *cfg = config(BUDGET_YAML);
    kq_ugm_t *u = kq_ugm_new("default");
    assert_non_null(u);
    assert_int_equal(kq_ugm_set_config(u, cfg), 0);
    char buf[256];
    char *g1[] = {"ops", "dev"};
    kq_pod_t pod = podv("u", "alice", "root.a", res(0, 0, 0));
    pod.app_id = (char *)"app-1";
    pod.groups = g1;
    pod.n_groups = 2;
    assert_string_equal(tracked_group(u, &pod, buf, sizeof(buf)), "dev"); /* named limit beats "*" */
    char *g2[] = {"", "ops", "qa"};
    pod.groups = g2;
    pod.n_groups = 3;
    assert_string_equal(tracked_group(u, &pod, buf, sizeof(buf)), "*"); /* "*": the wildcard group itself */
    pod.queue = (char *)"root.b";
    assert_null(tracked_group(u, &pod, buf, sizeof(buf))); /* no group limit up to root */
    pod.queue = (char *)"root.a";
    pod.n_groups = 0;
    assert_null(tracked_group(u, &pod, buf, sizeof(buf)));
    /* once the application runs, its group is the one usage fixed at its first pod, even if a
     * later pod of it carries other groups first */
    pod.groups = g1;
    pod.n_groups = 2;
    kq_user_t who = {.name = "alice", .groups = (const char *const *)g1, .n_groups = 2};
    kq_resource_t one = res(1000, 0, 0);
    char reason[256];
    assert_int_equal(kq_ugm_increase(u, "root.a", "app-1", &who, &one, reason, sizeof(reason), NULL), 0);
    pod.groups = g2;
    pod.n_groups = 3;
    assert_string_equal(tracked_group(u, &pod, buf, sizeof(buf)), "dev");
    assert_int_equal(kq_ugm_decrease(u, "root.a", "app-1", "alice", &one), 0);
    assert_string_equal(tracked_group(u, &pod, buf, sizeof(buf)), "*"); /* app ended: chosen anew */
    kq_ugm_free(u);
    kq_config_unref(cfg);
}

/* ------------------------------------------------------------------ checkpoint */

/* Restart in the middle: the interval across it is charged once. A, 1 cpu, runs from T0;
 * B, 1 cpu, from T0 and ends while kubequota is down. First process: charged up to
 * T0 + 20 (A 20, B 20), checkpoint, gone. Second process starts at T0 + 50: totals come
 * back (40); restored pods are not charged before the informer confirms them (compute at
 * T0 + 55 changes nothing); the list shows A but not B: B is closed at its last charged
 * time; at T0 + 60 A has paid 60 in all, the downtime once. A third start from the second's
 * checkpoint shows exactly the same ledger. */
static void test_checkpoint_restart(void **state)
{
    (void)state;
    char *dir = tmpdir();
    kq_metering_opts_t o;
    opts_init(&o);
    o.state_dir = dir;
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    bind(m, "A", "alice", "dev", "root.a", res(1000, 0, 0), T0);
    bind(m, "B", "bob", NULL, "root.a", res(1000, 0, 0), T0);
    set_clock(T0 + 10);
    assert_int_equal(kq_metering_compute_now(m), 0);
    set_clock(T0 + 20);
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_free(m); /* no final pass (thread never started): like a crash after a checkpoint */

    set_clock(T0 + 50);
    m = meter(&o);
    assert_credits(m, "queue", "root", 40);
    set_clock(T0 + 55);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "queue", "root", 40);
    json_t *pj = kq_metering_prices_json(m);
    assert_string_equal(json_string_value(json_object_get(json_object_get(pj, "checkpoint"), "restoredFrom")),
                        KQ_METERING_CHECKPOINT);
    json_decref(pj);

    kq_metering_resync_begin(m);
    bind(m, "A", "alice", "dev", "root.a", res(1000, 0, 0), T0);
    kq_metering_resync_end(m);
    assert_credits(m, "user", "bob", 20);
    set_clock(T0 + 60);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "user", "alice", 60);
    assert_credits(m, "group", "dev", 60);
    assert_credits(m, "queue", "root.a", 80);
    json_t *before = NULL;
    char err[128];
    assert_int_equal(kq_metering_charges_json(m, NULL, NULL, NULL, NULL, NULL, &before, err, sizeof(err)), 0);
    kq_metering_free(m);

    m = meter(&o);
    json_t *after = NULL;
    assert_int_equal(kq_metering_charges_json(m, NULL, NULL, NULL, NULL, NULL, &after, err, sizeof(err)), 0);
    assert_true(json_equal(before, after));
    json_decref(before);
    json_decref(after);
    /* A is still running: confirmed at T0 + 70, it pays exactly from T0 + 60. */
    set_clock(T0 + 70);
    kq_metering_resync_begin(m);
    bind(m, "A", "alice", "dev", "root.a", res(1000, 0, 0), T0);
    kq_metering_resync_end(m);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "user", "alice", 70);
    kq_metering_free(m);
    rmdir_all(dir);
}

/* With the compute thread: kq_metering_free charges up to now and leaves a checkpoint, so a
 * clean stop loses nothing either. */
static void test_checkpoint_clean_stop(void **state)
{
    (void)state;
    char *dir = tmpdir();
    kq_metering_opts_t o;
    opts_init(&o);
    o.state_dir = dir;
    o.interval_ms = 3600 * 1000; /* the thread never computes on its own here */
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    assert_int_equal(kq_metering_start(m), 0);
    assert_int_equal(kq_metering_start(m), KQ_ESTATE);
    bind(m, "A", "alice", NULL, "root", res(1000, 0, 0), T0);
    set_clock(T0 + 33);
    kq_metering_free(m);
    m = meter(&o);
    assert_credits(m, "user", "alice", 33);
    kq_metering_free(m);
    rmdir_all(dir);
}

static bool find_corrupt(const char *dir, char *out, size_t len)
{
    DIR *d = opendir(dir);
    bool found = false;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL)
        if (strncmp(e->d_name, "metering-checkpoint.corrupt-", 28) == 0) {
            snprintf(out, len, "%s/%s", dir, e->d_name);
            found = true;
        }
    if (d)
        closedir(d);
    return found;
}

/* A corrupt checkpoint is reported, kept aside (never overwritten) and the previous one is
 * used; when no good checkpoint is left, kubequota refuses to start rather than starting at
 * zero, and touches nothing. */
static void test_checkpoint_corrupt(void **state)
{
    (void)state;
    char *dir = tmpdir();
    char cur[512], prev[512], aside[512];
    snprintf(cur, sizeof(cur), "%s/%s", dir, KQ_METERING_CHECKPOINT);
    snprintf(prev, sizeof(prev), "%s/%s", dir, KQ_METERING_CHECKPOINT_PREV);
    kq_metering_opts_t o;
    opts_init(&o);
    o.state_dir = dir;
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    bind(m, "A", "alice", NULL, "root", res(1000, 0, 0), T0);
    set_clock(T0 + 10);
    assert_int_equal(kq_metering_compute_now(m), 0); /* -> prev after the next one: 10 */
    set_clock(T0 + 20);
    assert_int_equal(kq_metering_compute_now(m), 0); /* current: 20 */
    kq_metering_free(m);

    spit(cur, "{\"kind\": \"kubequota-metering-checkpoint\", \"version\": 1, trunc");
    set_clock(T0 + 30);
    m = meter(&o);
    assert_credits(m, "user", "alice", 10);
    json_t *pj = kq_metering_prices_json(m);
    assert_non_null(strstr(json_string_value(json_object_get(json_object_get(pj, "checkpoint"), "restoredFrom")),
                           "corrupt"));
    json_decref(pj);
    assert_true(find_corrupt(dir, aside, sizeof(aside)));
    char *kept = slurp(aside);
    assert_string_equal(kept, "{\"kind\": \"kubequota-metering-checkpoint\", \"version\": 1, trunc");
    free(kept);
    /* Resumed from the previous checkpoint's times: charged once from T0 + 10. */
    kq_metering_resync_begin(m);
    bind(m, "A", "alice", NULL, "root", res(1000, 0, 0), T0);
    kq_metering_resync_end(m);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "user", "alice", 30);
    kq_metering_free(m);

    /* Both files bad (one unparseable, one inconsistent): refuse, name them, keep them. */
    char *good = slurp(cur);
    assert_non_null(good);
    char *p = strstr(good, "\"total\":");
    assert_non_null(p);
    p[8] = p[8] == '9' ? '8' : '9'; /* the user's total no longer matches its days */
    spit(prev, good);
    spit(cur, "not json");
    char err[2048] = "";
    assert_null(kq_metering_new(&o, err, sizeof(err)));
    assert_non_null(strstr(err, KQ_METERING_CHECKPOINT));
    assert_non_null(strstr(err, "is not the sum of its days"));
    assert_non_null(strstr(err, "refusing to start"));
    char *c1 = slurp(cur), *c2 = slurp(prev);
    assert_string_equal(c1, "not json");
    assert_string_equal(c2, good);
    free(c1);
    free(c2);
    free(good);

    /* A missing current file with a good previous one (a crash between the renames). */
    unlink(cur);
    unlink(prev);
    unlink(aside);
    set_clock(T0);
    m = meter(&o);
    bind(m, "A", "alice", NULL, "root", res(1000, 0, 0), T0);
    set_clock(T0 + 5);
    assert_int_equal(kq_metering_compute_now(m), 0);
    kq_metering_free(m);
    assert_int_equal(rename(cur, prev), 0);
    m = meter(&o);
    assert_credits(m, "user", "alice", 5);
    kq_metering_free(m);
    rmdir_all(dir);
}

/* A checkpoint that cannot be written is reported (return code, prices view, metrics) and
 * charging goes on in memory. */
static void test_checkpoint_write_failure(void **state)
{
    (void)state;
    char *dir = tmpdir();
    kq_metering_opts_t o;
    opts_init(&o);
    o.state_dir = dir;
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    assert_int_equal(rmdir(dir), 0); /* the folder vanishes under it */
    bind(m, "A", "alice", NULL, "root", res(1000, 0, 0), T0);
    set_clock(T0 + 10);
    assert_int_equal(kq_metering_compute_now(m), KQ_EIO);
    assert_credits(m, "user", "alice", 10);
    json_t *pj = kq_metering_prices_json(m);
    const char *e = json_string_value(json_object_get(json_object_get(pj, "checkpoint"), "error"));
    assert_non_null(e);
    assert_non_null(strstr(e, KQ_METERING_CHECKPOINT ".tmp: cannot create"));
    json_decref(pj);
    char *t = kq_metering_metrics(m, false);
    assert_non_null(strstr(t, "kubequota_metering_checkpoint_failures_total 1\n"));
    free(t);
    /* The folder is back: the next compute writes and clears the error. */
    assert_int_equal(mkdir(dir, 0700), 0);
    assert_int_equal(kq_metering_compute_now(m), 0);
    pj = kq_metering_prices_json(m);
    assert_true(json_is_null(json_object_get(json_object_get(pj, "checkpoint"), "error")));
    json_decref(pj);
    kq_metering_free(m);
    rmdir_all(dir);
}

/* ------------------------------------------------------------------ leadership */

static atomic_bool leading;

static bool is_leader(void *ud)
{
    (void)ud;
    return atomic_load(&leading);
}

/* A follower charges nothing; once leader, pods are charged from their start, once. */
static void test_leader(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    o.is_leader = is_leader;
    atomic_store(&leading, false);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    bind(m, "A", "alice", NULL, "root", res(1000, 0, 0), T0);
    bind(m, "B", "bob", NULL, "root", res(1000, 0, 0), T0);
    assert_int_equal(kq_metering_pod_ended(m, "B", T0 + 12), 0); /* before any compute */
    set_clock(T0 + 10);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "queue", "root", 0);
    json_t *pj = kq_metering_prices_json(m);
    assert_false(json_is_true(json_object_get(pj, "leader")));
    json_decref(pj);
    atomic_store(&leading, true);
    set_clock(T0 + 20);
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_credits(m, "user", "alice", 20);
    kq_metering_free(m);
}

/* ------------------------------------------------------------------ misc */

/* A pod as the informer hands it over: only kq_pod_fields built (metering reads the
 * PodScheduled condition from that view, so the filter must keep what it needs). */
static const kq_jnode_t *informer_pod(kq_jdoc_t *doc, const char *text)
{
    assert_int_equal(kq_jdoc_parse(doc, text, strlen(text), kq_pod_fields, NULL), 0);
    return kq_jdoc_root(doc);
}

static void test_scheduled_time(void **state)
{
    (void)state;
    kq_jdoc_t doc = {0};
    const kq_jnode_t *pod = informer_pod(&doc, "{\"status\":{\"conditions\":["
                             "{\"type\":\"Initialized\",\"status\":\"True\",\"lastTransitionTime\":\"2020-01-01T00:00:00Z\"},"
                             "{\"type\":\"PodScheduled\",\"status\":\"True\",\"lastTransitionTime\":\"2023-11-14T22:13:20Z\"}]}}");
    double t = 0;
    assert_int_equal(kq_metering_pod_scheduled_time(pod, &t), 0);
    assert_true(t == T0);
    pod = informer_pod(&doc, "{\"status\":{\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"True\","
                             "\"lastTransitionTime\":\"2023-11-15T00:13:20.5+02:00\"}]}}");
    assert_int_equal(kq_metering_pod_scheduled_time(pod, &t), 0);
    assert_true(t == T0 + 0.5);
    t = 7;
    pod = informer_pod(&doc, "{\"status\":{\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"False\","
                             "\"lastTransitionTime\":\"2023-11-14T22:13:20Z\"}]}}");
    assert_int_equal(kq_metering_pod_scheduled_time(pod, &t), KQ_ENOENT);
    pod = informer_pod(&doc, "{\"status\":{\"conditions\":{\"type\":\"PodScheduled\"}}}");
    assert_int_equal(kq_metering_pod_scheduled_time(pod, &t), KQ_ENOENT); /* not an array */
    const char *bad[] = {"2023-11-14 22:13:20Z", "2023-11-14T22:13:20", "2023-13-14T22:13:20Z",
                         "2023-11-14T22:13:20.Z", "2023-11-14T22:13:20Zjunk", "2023-02-30T00:00:00Z"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text),
                 "{\"status\":{\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"True\","
                 "\"lastTransitionTime\":\"%s\"}]}}",
                 bad[i]);
        assert_int_equal(kq_metering_pod_scheduled_time(informer_pod(&doc, text), &t), KQ_EPARSE);
    }
    assert_int_equal(kq_metering_pod_scheduled_time(NULL, &t), KQ_ENOENT);
    assert_true(t == 7);
    kq_jdoc_free(&doc);
}

static void test_options(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    kq_metering_opts_default(&o);
    assert_int_equal(o.interval_ms, 10000);
    assert_true(o.tipping_point == 0.2 && o.increment == 1 && o.gpu_increment == 2);
    assert_int_equal(o.unit_memory, GI);
    assert_int_equal(o.n_gpu_resources, 1);
    assert_string_equal(o.gpu_resources[0], "nvidia.com/gpu");
    char err[512];
    assert_int_equal(kq_metering_opts_set(&o, "interval=0.5", err, sizeof(err)), 0);
    assert_int_equal(o.interval_ms, 500);
    assert_int_equal(kq_metering_opts_set(&o, "unit-memory=512Mi", err, sizeof(err)), 0);
    assert_int_equal(o.unit_memory, 512LL << 20);
    assert_int_equal(kq_metering_opts_set(&o, "unit-cpu=500m", err, sizeof(err)), 0);
    assert_int_equal(o.unit_cpu, 500);
    assert_int_equal(kq_metering_opts_set(&o, "gpu-resources=nvidia.com/gpu,amd.com/gpu", err, sizeof(err)), 0);
    assert_int_equal(o.n_gpu_resources, 2);
    assert_int_equal(kq_metering_opts_set(&o, "state-dir=/var/lib/kq", err, sizeof(err)), 0);
    assert_string_equal(o.state_dir, "/var/lib/kq");
    kq_metering_opts_t before = o;
    const char *bad[][2] = {
        {"interval=0", "interval"},       {"tipping-point=-1", "tipping-point"}, {"increment=x", "increment"},
        {"unit-memory=0", "positive"},    {"unit-cpu=abc", "unit-cpu"},          {"gpu-resources=a,", "trailing"},
        {"colour=blue", "unknown key"},   {"noequals", "KEY=VALUE"},             {"state-dir=", "empty"},
        {"price-gpu=nan", "price-gpu"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(kq_metering_opts_set(&o, bad[i][0], err, sizeof(err)), KQ_EINVAL);
        if (strstr(err, bad[i][1]) == NULL)
            fail_msg("error for %s is \"%s\", should mention %s", bad[i][0], err, bad[i][1]);
    }
    assert_memory_equal(&o, &before, sizeof(o));
    assert_non_null(strstr(kq_metering_opts_help, "tipping-point"));

    kq_metering_opts_t z;
    kq_metering_opts_default(&z);
    z.unit_gpu = 0;
    assert_null(kq_metering_new(&z, err, sizeof(err)));
    assert_non_null(strstr(err, "units must be positive"));
    kq_metering_free(NULL);
}

/* DRA device classes as GPUs (issue 39). gpu-resources takes a class's device count by its
 * ResourceQuota name, or every class's with the one wildcard; counters of a class (here
 * memory) are never GPUs. Multipliers: GPU tipping point 0.2, increment 2; allocatable 4
 * nvidia.com/gpu.
 *   A: 1 nvidia.com/gpu, 10 s                       -> GPU utilisation 1/4 = 0.25;
 *      GPU multiplier 1 + 0.05 x 2 = 1.1            -> 10 x 1 x 1.1 = 11
 *   B: 2 a100 devices (+ 80Gi of a100 memory), 10 s -> 10 x 2 x 1.1 = 22 (the memory
 *      counter is not memory nor a GPU; cpu 0)
 * B's devices are priced as GPUs but not in the GPU utilisation (node allocatable has no
 * class names): with B alone the multiplier stays 1. */
#define A100 "a100.deviceclass.resource.k8s.io/devices"
#define A100MEM "a100.deviceclass.resource.k8s.io/memory"

static void test_device_class_gpus(void **state)
{
    (void)state;
    char err[512] = "";
    for (int wildcard = 0; wildcard < 2; wildcard++) {
        kq_metering_opts_t o;
        opts_init(&o);
        assert_int_equal(kq_metering_opts_set(&o, wildcard ? "gpu-resources=nvidia.com/gpu," KQ_METERING_ALL_CLASSES
                                                           : "gpu-resources=nvidia.com/gpu," A100,
                                              err, sizeof(err)),
                         0);
        assert_int_equal(o.n_gpu_resources, wildcard ? 1 : 2);
        assert_true(o.gpu_all_classes == (wildcard == 1));
        set_clock(T0);
        kq_metering_t *m = meter(&o);
        kq_resource_t cap = res(1000000, 1000 * GI, 4);
        kq_metering_set_nodes_allocatable(m, &cap);
        kq_resource_t b = res(0, 0, 0);
        assert_int_equal(kq_resource_set(&b, A100, 2), 0);
        assert_int_equal(kq_resource_set(&b, A100MEM, 80 * GI), 0);
        bind(m, "B", "bob", NULL, "root", b, T0);
        assert_int_equal(kq_metering_compute_now(m), 0);
        double g, gpu;
        kq_metering_multipliers(m, &g, &gpu);
        assert_true(fabs(g - 1) < EPS && fabs(gpu - 1) < EPS);
        bind(m, "A", "alice", NULL, "root", res(0, 0, 1), T0);
        assert_int_equal(kq_metering_compute_now(m), 0);
        kq_metering_multipliers(m, &g, &gpu);
        assert_true(fabs(gpu - 1.1) < EPS);
        set_clock(T0 + 10);
        assert_int_equal(kq_metering_pod_ended(m, "A", 0), 0);
        assert_int_equal(kq_metering_pod_ended(m, "B", 0), 0);
        assert_credits(m, "user", "alice", 11);
        assert_credits(m, "user", "bob", 22);
        json_t *pj = kq_metering_prices_json(m);
        const json_t *names = json_object_get(pj, "gpuResources");
        assert_int_equal(json_array_size(names), 2);
        assert_string_equal(json_string_value(json_array_get(names, 1)), wildcard ? KQ_METERING_ALL_CLASSES : A100);
        json_decref(pj);
        kq_metering_free(m);
    }

    /* the parser: class names are resource names; the wildcard is the one form with '*' */
    kq_metering_opts_t o;
    kq_metering_opts_default(&o);
    assert_int_equal(kq_metering_opts_set(&o, "gpu-resources=" KQ_METERING_ALL_CLASSES ",nvidia.com/gpu", err,
                                          sizeof(err)),
                     0);
    assert_true(o.gpu_all_classes);
    assert_int_equal(o.n_gpu_resources, 1);
    assert_int_equal(kq_metering_opts_set(&o, "gpu-resources=nvidia.com/gpu", err, sizeof(err)), 0);
    assert_false(o.gpu_all_classes); /* a new list replaces the old, wildcard included */
    const char *bad[] = {"gpu-resources=*.example.com/gpu", "gpu-resources=*", "gpu-resources=" KQ_METERING_ALL_CLASSES ","};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        kq_metering_opts_t before = o;
        err[0] = '\0';
        assert_int_equal(kq_metering_opts_set(&o, bad[i], err, sizeof(err)), KQ_EINVAL);
        assert_true(err[0] != '\0');
        assert_memory_equal(&o, &before, sizeof(o));
    }
    assert_non_null(strstr(kq_metering_opts_help, KQ_METERING_ALL_CLASSES));
}

/* A resize to the request the pod has already is not a resize: the interval is not cut (a
 * charge rounded once, not twice), and nothing is charged early. */
static void test_resize_unchanged(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    bind(m, "p", "a", NULL, "root", res(1000, 0, 0), T0);
    kq_resource_t same = res(1000, 0, 0);
    assert_int_equal(kq_metering_pod_resized(m, "p", &same, T0 + 5), 0);
    assert_credits(m, "user", "a", 0);
    assert_int_equal(kq_metering_pod_ended(m, "p", T0 + 20), 0);
    assert_credits(m, "user", "a", 20);
    kq_metering_free(m);
}

static void test_metrics_text(void **state)
{
    (void)state;
    kq_metering_opts_t o;
    opts_init(&o);
    set_clock(T0);
    kq_metering_t *m = meter(&o);
    bind(m, "A", "al\"ice", "dev", "root.a", res(1000, 0, 0), T0);
    assert_int_equal(kq_metering_pod_ended(m, "A", T0 + 12.5), 0);
    char *t = kq_metering_metrics(m, false);
    assert_non_null(t);
    assert_non_null(strstr(t, "kubequota_price_multiplier{type=\"general\"} 1\n"));
    assert_non_null(strstr(t, "kubequota_queue_charged_credits_total{queue=\"root.a\"} 12.500000\n"));
    assert_non_null(strstr(t, "kubequota_queue_charged_credits_total{queue=\"root\"} 12.500000\n"));
    assert_non_null(strstr(t, "kubequota_metering_running_pods 0\n"));
    assert_null(strstr(t, "kubequota_user_charged_credits_total"));
    free(t);
    t = kq_metering_metrics(m, true);
    assert_non_null(strstr(t, "kubequota_user_charged_credits_total{user=\"al\\\"ice\"} 12.500000\n"));
    assert_non_null(strstr(t, "kubequota_user_group_charged_credits_total{user_group=\"dev\"} 12.500000\n"));
    free(t);
    kq_metering_free(m);
}

/* ------------------------------------------------------------------ concurrency */

/* Feeders bind, resize, mark pending and end pods from 4 threads while the compute thread
 * runs every millisecond and a reader asks for budgets and views. The clock stands at
 * T0 + 1000 during the run and every pod was bound k seconds before (k = 1..50), so
 * whichever thread charges it and in whatever order, each pod pays exactly k credits at
 * its old size (2 cpus: 2k), and the total is known. Run it under TSan. */
#define FEEDERS 4
#define PODS_PER 1000

typedef struct feed {
    kq_metering_t *m;
    int id;
} feed_t;

static void *feeder(void *arg)
{
    feed_t *f = arg;
    char uid[32], user[16];
    snprintf(user, sizeof(user), "user%d", f->id);
    kq_resource_t r2 = res(2000, 0, 0), r5 = res(5000, 0, 0);
    for (int i = 0; i < PODS_PER; i++) {
        snprintf(uid, sizeof(uid), "f%d-%d", f->id, i);
        assert_int_equal(kq_metering_pod_pending(f->m, uid, &r2), 0);
        kq_pod_t p = podv(uid, user, i % 2 ? "root.a" : "root.b", r2);
        assert_int_equal(kq_metering_pod_bound(f->m, &p, "g", T0 + 1000 - (1 + i % 50)), 0);
        if (i % 3 == 0)
            assert_int_equal(kq_metering_pod_resized(f->m, uid, &r5, 0), 0);
        assert_int_equal(kq_metering_pod_ended(f->m, uid, 0), 0);
    }
    return NULL;
}

static atomic_bool reader_stop;

static void *reader(void *arg)
{
    kq_metering_t *m = arg;
    char reason[256], err[128];
    while (!atomic_load(&reader_stop)) {
        if (kq_metering_check_budget(m, "user1", "g", "root.a", reason, sizeof(reason), NULL) != 0)
            fail_msg("no budget is set: %s", reason);
        json_t *j = kq_metering_prices_json(m);
        json_decref(j);
        j = NULL;
        if (kq_metering_charges_json(m, NULL, NULL, NULL, NULL, NULL, &j, err, sizeof(err)) == 0)
            json_decref(j);
        free(kq_metering_metrics(m, true));
        kq_resource_t cap = res(1000000, 1000 * GI, 0);
        kq_metering_set_nodes_allocatable(m, &cap);
    }
    return NULL;
}

static void test_concurrent_feeding(void **state)
{
    (void)state;
    char *dir = tmpdir();
    kq_metering_opts_t o;
    opts_init(&o);
    o.interval_ms = 1;
    o.min_runtime_s = 0;
    o.state_dir = dir;
    set_clock(T0); /* epoch: T0 */
    kq_metering_t *m = meter(&o);
    set_clock(T0 + 1000);
    assert_int_equal(kq_metering_start(m), 0);
    pthread_t th[FEEDERS], rd;
    feed_t f[FEEDERS];
    atomic_store(&reader_stop, false);
    assert_int_equal(pthread_create(&rd, NULL, reader, m), 0);
    for (int i = 0; i < FEEDERS; i++) {
        f[i] = (feed_t){m, i};
        assert_int_equal(pthread_create(&th[i], NULL, feeder, &f[i]), 0);
    }
    for (int i = 0; i < FEEDERS; i++)
        pthread_join(th[i], NULL);
    atomic_store(&reader_stop, true);
    pthread_join(rd, NULL);
    double per_user = 0;
    for (int i = 0; i < PODS_PER; i++)
        per_user += 2.0 * (1 + i % 50);
    kq_metering_free(m);
    m = meter(&o); /* what the final checkpoint says */
    for (int i = 0; i < FEEDERS; i++) {
        char user[16];
        snprintf(user, sizeof(user), "user%d", i);
        assert_credits(m, "user", user, per_user);
    }
    assert_credits(m, "group", "g", per_user * FEEDERS);
    assert_credits(m, "queue", "root", per_user * FEEDERS);
    assert_credits(m, "queue", "root.a", kq_metering_charged(m, "queue", "root") -
                                             kq_metering_charged(m, "queue", "root.b"));
    json_t *pj = kq_metering_prices_json(m);
    assert_int_equal(json_integer_value(json_object_get(pj, "runningPods")), 0);
    json_decref(pj);
    kq_metering_free(m);
    rmdir_all(dir);
}

int main(void)
{
    kq_log_set_level(getenv("KQ_TEST_LOG") ? getenv("KQ_TEST_LOG") : "error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hops_multiplier),
        cmocka_unit_test(test_pending_counts),
        cmocka_unit_test(test_hops_quota_service),
        cmocka_unit_test(test_minimum_runtime),
        cmocka_unit_test(test_resize_mid_run),
        cmocka_unit_test(test_dominant_resource),
        cmocka_unit_test(test_day_boundary),
        cmocka_unit_test(test_budget_exhaustion),
        cmocka_unit_test(test_tracked_group),
        cmocka_unit_test(test_checkpoint_restart),
        cmocka_unit_test(test_checkpoint_clean_stop),
        cmocka_unit_test(test_checkpoint_corrupt),
        cmocka_unit_test(test_checkpoint_write_failure),
        cmocka_unit_test(test_leader),
        cmocka_unit_test(test_scheduled_time),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_device_class_gpus),
        cmocka_unit_test(test_resize_unchanged),
        cmocka_unit_test(test_metrics_text),
        cmocka_unit_test(test_concurrent_feeding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
