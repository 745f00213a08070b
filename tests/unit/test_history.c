/* Unit tests for history.c: the ring keeps the last `points` samples of each series, the
 * series cap holds (queues first), idle users give their slot back, denials count only the
 * last 60 minutes, and a user's series is found by name. Times are given explicitly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kubequota/control/history.h"
#include "kubequota/engine/config.h"
#include "kubequota/engine/resource.h"
#include "kubequota/engine/ugm.h"

#include "testutil.h"

#define CONFIG "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: \"*\"\n" \
               "        queues:\n          - name: a\n"

static unsigned long denials;
static unsigned long count_denials(void *ud)
{
    (void)ud;
    return denials;
}

static kq_ugm_t *mgr(void)
{
    kq_ugm_t *m = kq_ugm_new("default");
    kq_config_t *cfg = test_config(CONFIG);
    assert_non_null(cfg);
    assert_int_equal(kq_ugm_set_config(m, cfg), 0);
    kq_config_unref(cfg);
    return m;
}

static void use(kq_ugm_t *m, const char *user, int64_t cpu, bool add)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, "cpu", cpu), 0);
    kq_user_t u = {.name = user};
    char why[256];
    if (add)
        assert_int_equal(kq_ugm_increase(m, "root.a", user, &u, &r, why, sizeof(why), NULL), 0);
    else
        assert_int_equal(kq_ugm_decrease(m, "root.a", user, user, &r), 0);
    kq_resource_free(&r);
}

static json_t *series(kq_history_t *h, const char *kind, const char *name)
{
    bool found = false;
    json_t *o = kq_history_series_json(h, kind, name, &found);
    assert_true(found == (o != NULL));
    return o;
}

static void ring_keeps_the_last_points(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr();
    use(m, "alice", 1500, true);
    kq_history_opts_t o = {.interval_ms = 60000, .points = 4};
    kq_history_t *h = kq_history_new(m, &o);
    assert_non_null(h);
    for (int i = 0; i < 6; i++)
        kq_history_sample(h, 1000.0 + 60.0 * i);
    json_t *s = series(h, "user", "alice");
    assert_non_null(s);
    json_t *pts = json_object_get(s, "points");
    assert_int_equal(json_array_size(pts), 4);
    /* oldest first: samples 2..5 */
    assert_true(json_real_value(json_object_get(json_array_get(pts, 0), "time")) == 1120.0);
    assert_true(json_real_value(json_object_get(json_array_get(pts, 3), "time")) == 1300.0);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(pts, 3), "vcore")), 1500);
    json_decref(s);
    s = series(h, "queue", "root.a");
    assert_int_equal(json_array_size(json_object_get(s, "points")), 4);
    json_decref(s);
    assert_null(series(h, "user", "bob"));
    assert_null(series(h, "group", "alice"));
    json_t *sum = kq_history_summary_json(h, 1300.0);
    assert_int_equal(json_integer_value(json_object_get(sum, "samples")), 4);
    assert_int_equal(json_array_size(json_object_get(sum, "users")), 1);
    assert_int_equal(json_array_size(json_object_get(sum, "queues")), 2); /* root, root.a */
    json_decref(sum);

    /* a new series starts with its first sample: bob has one point */
    use(m, "bob", 500, true);
    kq_history_sample(h, 1360.0);
    s = series(h, "user", "bob");
    assert_int_equal(json_array_size(json_object_get(s, "points")), 1);
    json_decref(s);

    /* alice stops: after a whole window of nothing her slot is given back */
    use(m, "alice", 1500, false);
    for (int i = 0; i < 3; i++)
        kq_history_sample(h, 1420.0 + 60.0 * i);
    s = series(h, "user", "alice");
    assert_non_null(s); /* 3 zero samples after her last use: still within the window */
    json_decref(s);
    kq_history_sample(h, 1660.0);
    assert_null(series(h, "user", "alice"));
    kq_history_free(h);
    kq_ugm_free(m);
}

static void series_cap_holds(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr();
    use(m, "alice", 1000, true);
    use(m, "bob", 1000, true);
    kq_history_opts_t o = {.interval_ms = 1000, .points = 4, .max_series = 3};
    kq_history_t *h = kq_history_new(m, &o);
    kq_history_sample(h, 10.0);
    json_t *sum = kq_history_summary_json(h, 10.0);
    /* queues first: root and root.a, then one user; the other is counted, not kept */
    assert_int_equal(json_array_size(json_object_get(sum, "queues")), 2);
    assert_int_equal(json_array_size(json_object_get(sum, "users")), 1);
    assert_int_equal(json_integer_value(json_object_get(sum, "seriesDropped")), 1);
    assert_int_equal(json_integer_value(json_object_get(sum, "maxSeries")), 3);
    json_decref(sum);
    kq_history_free(h);
    /* bounds are refused */
    kq_history_opts_t bad = {.interval_ms = 1000, .points = KQ_HISTORY_POINTS + 1};
    assert_null(kq_history_new(m, &bad));
    bad.points = 0;
    bad.interval_ms = 0;
    assert_null(kq_history_new(m, &bad));
    kq_ugm_free(m);
}

static void denials_of_the_last_hour(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr();
    denials = 5; /* before the history started: not counted */
    kq_history_opts_t o = {.interval_ms = 60000, .denials = count_denials};
    kq_history_t *h = kq_history_new(m, &o);
    double t0 = 6000.0 * 60.0;
    kq_history_sample(h, t0);
    denials = 8;
    kq_history_sample(h, t0 + 60.0); /* 3 in minute 1 */
    denials = 10;                    /* 2 not sampled yet: counted at read time */
    json_t *sum = kq_history_summary_json(h, t0 + 90.0);
    assert_int_equal(json_integer_value(json_object_get(sum, "denialsLastHour")), 5);
    json_decref(sum);
    kq_history_sample(h, t0 + 120.0); /* the 2 in minute 2 */
    /* 60 minutes after minute 1, only minute 2's remain */
    sum = kq_history_summary_json(h, t0 + 60.0 + 3600.0);
    assert_int_equal(json_integer_value(json_object_get(sum, "denialsLastHour")), 2);
    json_decref(sum);
    sum = kq_history_summary_json(h, t0 + 120.0 + 3600.0);
    assert_int_equal(json_integer_value(json_object_get(sum, "denialsLastHour")), 0);
    json_decref(sum);
    kq_history_free(h);
    kq_ugm_free(m);
}

static void thread_samples_and_stops(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr();
    kq_history_opts_t o = {.interval_ms = 3600000};
    kq_history_t *h = kq_history_new(m, &o);
    assert_int_equal(kq_history_start(h), 0);
    /* the first sample is taken at once; free wakes the sleeping thread */
    for (int i = 0; i < 2000; i++) {
        json_t *sum = kq_history_summary_json(h, 0);
        json_int_t n = json_integer_value(json_object_get(sum, "samples"));
        json_decref(sum);
        if (n == 1)
            break;
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    json_t *sum = kq_history_summary_json(h, 0);
    assert_int_equal(json_integer_value(json_object_get(sum, "samples")), 1);
    json_decref(sum);
    kq_history_free(h);
    kq_history_free(NULL);
    kq_ugm_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ring_keeps_the_last_points),
        cmocka_unit_test(series_cap_holds),
        cmocka_unit_test(denials_of_the_last_hour),
        cmocka_unit_test(thread_samples_and_stops),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
