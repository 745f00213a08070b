/* Unit tests for fairshare.c: the decayed average (worked out by hand with half-lives that
 * make the factors exact powers of two), usage = max(average, current), the dominant share,
 * the changed-pairs list, and the persistence document (round trip with decay over the
 * time it was stored, merge by maximum, and every kind of bad document refused without
 * changing anything). Expected numbers are computed in the comments, never by the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kubequota/base/log.h"
#include "kubequota/engine/fairshare.h"
#include "kubequota/engine/resource.h"

static const double T0 = 1790000000.0; /* 2026-09-21T14:13:20Z */

static kq_resource_t R(const char *s)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = '\0';
        assert_int_equal(kq_resource_set(&r, tok, strtoll(eq + 1, NULL, 10)), 0);
    }
    return r;
}

static int64_t get(const kq_resource_t *r, const char *name)
{
    return kq_resource_get(r, name, NULL);
}

static void avg_cur(kq_fairshare_t *fs, const char *q, const char *u, double now, int64_t *avg_cpu, int64_t *cur_cpu)
{
    kq_resource_t c = KQ_RESOURCE_EMPTY, a = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_fairshare_get(fs, q, u, now, &c, &a), 0);
    *avg_cpu = get(&a, "cpu");
    *cur_cpu = get(&c, "cpu");
    kq_resource_free(&c);
    kq_resource_free(&a);
}

/* Half-life 100 s. 8 cpu from T0: after one half-life the average is half way (4000m),
 * after two three quarters (8000 - 4000/2 = 6000m). Stopped then, it halves every 100 s:
 * 3000m, 1500m. usage = max(average, current): 8000m while running, the average after. */
static void test_decay_by_hand(void **state)
{
    (void)state;
    kq_fairshare_t *fs = kq_fairshare_new(100);
    assert_non_null(fs);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 100, T0), 0);
    kq_resource_t req = R("cpu=8000");
    kq_fairshare_change(fs, "root.a", "alice", &req, +1, T0);
    int64_t a, c;
    avg_cur(fs, "root.a", "alice", T0, &a, &c);
    assert_int_equal(a, 0);
    assert_int_equal(c, 8000);
    avg_cur(fs, "root.a", "alice", T0 + 100, &a, &c);
    assert_int_equal(a, 4000);
    avg_cur(fs, "root.a", "alice", T0 + 200, &a, &c);
    assert_int_equal(a, 6000);
    kq_resource_t u = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_fairshare_usage(fs, "root.a", "alice", T0 + 200, &u), 0);
    assert_int_equal(get(&u, "cpu"), 8000);
    kq_fairshare_change(fs, "root.a", "alice", &req, -1, T0 + 200);
    avg_cur(fs, "root.a", "alice", T0 + 300, &a, &c);
    assert_int_equal(a, 3000);
    assert_int_equal(c, 0);
    assert_int_equal(kq_fairshare_usage(fs, "root.a", "alice", T0 + 400, &u), 0);
    assert_int_equal(get(&u, "cpu"), 1500);
    /* a clock that steps back: no time passed, nothing decays */
    avg_cur(fs, "root.a", "alice", T0 + 350, &a, &c);
    assert_int_equal(a, 1500);
    /* an unknown pair: empty */
    assert_int_equal(kq_fairshare_usage(fs, "root.a", "bob", T0 + 400, &u), 0);
    assert_true(kq_resource_is_zero(&u));
    kq_resource_free(&u);
    kq_fairshare_free(fs);
}

/* Half-life 0: no history, the average is the current usage at every moment (DRF). */
static void test_no_history(void **state)
{
    (void)state;
    kq_fairshare_t *fs = kq_fairshare_new(0);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 0, T0), 0);
    kq_resource_t req = R("cpu=2000,memory=1024");
    kq_fairshare_change(fs, "root.a", "alice", &req, +1, T0);
    kq_fairshare_change(fs, "root.a", "alice", &req, +1, T0);
    int64_t a, c;
    avg_cur(fs, "root.a", "alice", T0, &a, &c);
    assert_int_equal(a, 4000);
    assert_int_equal(c, 4000);
    kq_fairshare_change(fs, "root.a", "alice", &req, -1, T0 + 1);
    avg_cur(fs, "root.a", "alice", T0 + 1, &a, &c);
    assert_int_equal(a, 2000);
    /* a stop never takes current below zero */
    kq_fairshare_change(fs, "root.a", "alice", &req, -1, T0 + 2);
    kq_fairshare_change(fs, "root.a", "alice", &req, -1, T0 + 3);
    avg_cur(fs, "root.a", "alice", T0 + 3, &a, &c);
    assert_int_equal(a, 0);
    assert_int_equal(c, 0);
    kq_fairshare_free(fs);
}

/* Per queue half-lives; a change of half-life applies from then on. */
static void test_halflife_per_queue(void **state)
{
    (void)state;
    kq_fairshare_t *fs = kq_fairshare_new(100);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 100, T0), 0);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.b", 50, T0), 0);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.b", -1, T0), KQ_EINVAL);
    kq_resource_t req = R("cpu=1000");
    kq_fairshare_change(fs, "root.a", "u", &req, +1, T0);
    kq_fairshare_change(fs, "root.b", "u", &req, +1, T0);
    int64_t a, c;
    avg_cur(fs, "root.a", "u", T0 + 100, &a, &c);
    assert_int_equal(a, 500); /* one half-life of 100 s */
    avg_cur(fs, "root.b", "u", T0 + 100, &a, &c);
    assert_int_equal(a, 750); /* two half-lives of 50 s: 1000 - 1000/4 */
    /* root.a switches to 200 s at T0+100 (average 500): 200 s later 1000 - 500/2 = 750 */
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 200, T0 + 100), 0);
    avg_cur(fs, "root.a", "u", T0 + 300, &a, &c);
    assert_int_equal(a, 750);
    kq_fairshare_free(fs);
}

/* Dominant share: the largest usage / cap over the resources the caps name. */
static void test_dominant(void **state)
{
    (void)state;
    kq_resource_t u = R("cpu=3000,memory=4294967296,nvidia.com/gpu=1");
    kq_resource_t caps = R("cpu=12000,memory=8589934592");
    assert_true(kq_fairshare_dominant(&u, &caps) == 0.5); /* memory 4Gi of 8Gi beats cpu 3 of 12 */
    kq_resource_t gcap = R("cpu=12000,nvidia.com/gpu=4");
    assert_true(kq_fairshare_dominant(&u, &gcap) == 0.25); /* cpu 0.25, gpu 0.25 */
    kq_resource_t other = R("ephemeral-storage=100");
    assert_true(kq_fairshare_dominant(&u, &other) == 0); /* capped, but not used */
    kq_resource_t none = KQ_RESOURCE_EMPTY;
    assert_true(kq_fairshare_dominant(&u, &none) == -1);
    kq_resource_t zero = R("cpu=0");
    assert_true(kq_fairshare_dominant(&u, &zero) == -1); /* a zero cap is no capacity */
    kq_resource_free(&u);
}

static bool has_key(char **k, size_t n, const char *want)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(k[i], want) == 0)
            return true;
    return false;
}

static void free_keys(char **k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i]);
    free(k);
}

static void test_drain(void **state)
{
    (void)state;
    kq_fairshare_t *fs = kq_fairshare_new(60);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 60, T0), 0);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.b", 60, T0), 0);
    kq_resource_t req = R("cpu=1000");
    char **k;
    size_t n;
    assert_int_equal(kq_fairshare_drain(fs, &k, &n), 0);
    assert_int_equal(n, 0);
    kq_fairshare_change(fs, "root.a", "alice", &req, +1, T0);
    kq_fairshare_change(fs, "root.a", "alice", &req, +1, T0);
    kq_fairshare_change(fs, "root.b", "bob", &req, +1, T0);
    assert_int_equal(kq_fairshare_drain(fs, &k, &n), 0);
    assert_int_equal(n, 2); /* a pair changed twice is listed once */
    assert_true(has_key(k, n, "root.a\nalice"));
    assert_true(has_key(k, n, "root.b\nbob"));
    free_keys(k, n);
    assert_int_equal(kq_fairshare_drain(fs, &k, &n), 0);
    assert_int_equal(n, 0);
    /* a new half-life re-ranks every pair of that queue */
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 30, T0 + 1), 0);
    assert_int_equal(kq_fairshare_drain(fs, &k, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(k[0], "root.a\nalice");
    free_keys(k, n);
    kq_fairshare_free(fs);
}

/* Round trip: 4 cpu + 2Gi for one half-life (60 s) gives 2 cpu + 1Gi on average. Stored at
 * T0+60, loaded 120 s later (two half-lives) by a new process: a quarter, 500m and 256Mi. */
static void test_dump_load(void **state)
{
    (void)state;
    kq_fairshare_t *fs = kq_fairshare_new(60);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 60, T0), 0); /* tracked: dumped */
    assert_false(kq_fairshare_tracks_any(NULL));
    kq_resource_t req = R("cpu=4000,memory=2147483648");
    kq_fairshare_change(fs, "root.a", "alice", &req, +1, T0);
    kq_fairshare_change(fs, "root.other", "alice", &req, +1, T0); /* followed, never tracked: not dumped */
    assert_true(kq_fairshare_tracks_any(fs));
    kq_fairshare_change(fs, "root.a", "idle", &req, +1, T0);
    kq_fairshare_change(fs, "root.a", "idle", &req, -1, T0); /* nothing left: not stored */
    json_t *doc = kq_fairshare_dump(fs, T0 + 60, NULL);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "kind")), "GatingUsage");
    assert_string_equal(json_string_value(json_object_get(doc, "updated")), "2026-09-21T14:14:20Z");
    json_t *qs = json_object_get(doc, "queues");
    assert_int_equal(json_array_size(qs), 1);
    json_t *q0 = json_array_get(qs, 0);
    assert_string_equal(json_string_value(json_object_get(q0, "queue")), "root.a");
    assert_true(json_real_value(json_object_get(q0, "halfLifeSeconds")) == 60.0);
    json_t *users = json_object_get(q0, "users");
    assert_int_equal(json_array_size(users), 1);
    json_t *avg = json_object_get(json_array_get(users, 0), "average");
    assert_string_equal(json_string_value(json_object_get(avg, "cpu")), "2");
    assert_string_equal(json_string_value(json_object_get(avg, "memory")), "1Gi");
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);

    kq_fairshare_t *b = kq_fairshare_new(60);
    assert_false(kq_fairshare_tracks_any(b));
    size_t merged = 0;
    char err[256] = "";
    assert_int_equal(kq_fairshare_load_text(b, text, strlen(text), T0 + 180, &merged, err, sizeof err), 0);
    assert_int_equal(merged, 1);
    kq_resource_t a = KQ_RESOURCE_EMPTY, c = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_fairshare_get(b, "root.a", "alice", T0 + 180, &c, &a), 0);
    assert_int_equal(get(&a, "cpu"), 500);
    assert_int_equal(get(&a, "memory"), 268435456);
    assert_true(kq_resource_is_zero(&c)); /* current comes from the pods, never the document */
    char **k;
    size_t n;
    assert_int_equal(kq_fairshare_drain(b, &k, &n), 0);
    assert_int_equal(n, 1); /* a loaded pair is re-ranked */
    free_keys(k, n);

    /* merge by maximum: a replica that already averages 1 cpu keeps it over the loaded 500m */
    kq_fairshare_t *m = kq_fairshare_new(60);
    assert_int_equal(kq_fairshare_set_halflife(m, "root.a", 60, T0), 0);
    kq_resource_t one = R("cpu=1000");
    kq_fairshare_change(m, "root.a", "alice", &one, +1, T0);
    /* with half-life 60, at T0+180 it averages 1000 - 1000/8 = 875m */
    assert_int_equal(kq_fairshare_load_text(m, text, strlen(text), T0 + 180, &merged, err, sizeof err), 0);
    assert_int_equal(kq_fairshare_get(m, "root.a", "alice", T0 + 180, &c, &a), 0);
    assert_int_equal(get(&a, "cpu"), 875);
    assert_int_equal(get(&a, "memory"), 268435456); /* only the document knew memory */
    kq_resource_free(&a);
    kq_resource_free(&c);
    free(text);
    kq_fairshare_free(b);
    kq_fairshare_free(m);
    kq_fairshare_free(fs);
}

/* Only tracked queues keep history. An untracked queue follows the current usage alone and
 * forgets a user whose usage returns to zero; a queue that becomes tracked starts its
 * history then (with the current usage it already has); a tracked queue the configuration
 * no longer names (track_begin ... track_end) loses its history. */
static void test_tracking(void **state)
{
    (void)state;
    kq_fairshare_t *fs = kq_fairshare_new(100);
    kq_resource_t req = R("cpu=2000");
    kq_fairshare_change(fs, "root.a", "u", &req, +1, T0);
    int64_t a, c;
    avg_cur(fs, "root.a", "u", T0 + 100, &a, &c);
    assert_int_equal(c, 2000);
    assert_int_equal(a, 0); /* untracked: no history */
    char **k;
    size_t n;
    assert_int_equal(kq_fairshare_drain(fs, &k, &n), 0);
    assert_int_equal(n, 0); /* nobody is ranked by an untracked queue */
    assert_false(kq_fairshare_tracks_any(fs));
    /* tracked from T0+100: one half-life later the average is half of the 2 cpu */
    kq_fairshare_track_begin(fs);
    assert_int_equal(kq_fairshare_set_halflife(fs, "root.a", 100, T0 + 100), 0);
    kq_fairshare_track_end(fs);
    avg_cur(fs, "root.a", "u", T0 + 200, &a, &c);
    assert_int_equal(a, 1000);
    assert_int_equal(kq_fairshare_drain(fs, &k, &n), 0);
    assert_int_equal(n, 1); /* its pairs are ranked from then on */
    free(k[0]);
    free(k);
    /* a reload without it: history gone, current kept; back to zero: the pair goes */
    kq_fairshare_track_begin(fs);
    kq_fairshare_track_end(fs);
    assert_false(kq_fairshare_tracks_any(fs));
    avg_cur(fs, "root.a", "u", T0 + 300, &a, &c);
    assert_int_equal(a, 0);
    assert_int_equal(c, 2000);
    kq_fairshare_change(fs, "root.a", "u", &req, -1, T0 + 300);
    json_t *doc = kq_fairshare_dump(fs, T0 + 300, NULL);
    assert_int_equal(json_array_size(json_object_get(doc, "queues")), 0);
    json_decref(doc);
    kq_fairshare_free(fs);
}

/* Every bad document: an error naming what and where, and nothing changes. */
static void test_load_rejects(void **state)
{
    (void)state;
    static const struct {
        const char *doc, *want;
    } cases[] = {
        {"[]", "not a JSON object"},
        {"{\"kind\":\"Other\",\"updated\":\"2026-01-01T00:00:00Z\",\"queues\":[]}", "kind"},
        {"{\"kind\":\"GatingUsage\",\"updated\":\"yesterday\",\"queues\":[]}", "updated"},
        {"{\"kind\":\"GatingUsage\",\"updated\":\"2026-01-01T00:00:00Z\",\"queues\":{}}", "queues: expected an array"},
        {"{\"kind\":\"GatingUsage\",\"updated\":\"2026-01-01T00:00:00Z\",\"queues\":[{\"queue\":\"root.a\"}]}",
         "queues[0].users"},
        {"{\"kind\":\"GatingUsage\",\"updated\":\"2026-01-01T00:00:00Z\",\"queues\":[{\"queue\":\"root.a\","
         "\"users\":[{\"user\":\"a\",\"average\":{\"cpu\":\"1\"}},{\"user\":\"b\",\"average\":{\"cpu\":\"-1\"}}]}]}",
         "queues[0].users[1].average.cpu"},
        {"{\"kind\":\"GatingUsage\",\"updated\":\"2026-01-01T00:00:00Z\",\"queues\":[{\"queue\":\"root.a\","
         "\"users\":[{\"user\":\"a\",\"average\":{\"cpu\":2}}]}]}",
         "expected a quantity string"},
        {"{\"kind\":\"GatingUsage\",\"updated\":\"2026-01-01T00:00:00Z\",\"queues\":[{\"queue\":\"root.a\","
         "\"users\":[{\"user\":\"a\",\"average\":{\"cpu\":\"1\",\"vcore\":\"2\"}}]}]}",
         "given twice"},
        {"{\"kind\":\"GatingUsage\",\"updated\":\"2026-01-01T00:00:00Z\",\"queues\":[{\"queue\":\"root.a\","
         "\"users\":[{\"user\":\"a\\nb\",\"average\":{}}]}]}",
         "users[0].user"},
        {"{\"kind\":\"GatingUsage\",", "not JSON"},
    };
    kq_fairshare_t *fs = kq_fairshare_new(60);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "";
        size_t merged = 99;
        int rc = kq_fairshare_load_text(fs, cases[i].doc, strlen(cases[i].doc), T0, &merged, err, sizeof err);
        assert_int_not_equal(rc, 0);
        assert_int_equal(merged, 0);
        if (strstr(err, cases[i].want) == NULL)
            fail_msg("case %zu: error \"%s\" lacks \"%s\"", i, err, cases[i].want);
    }
    json_t *doc = kq_fairshare_dump(fs, T0, NULL);
    assert_int_equal(json_array_size(json_object_get(doc, "queues")), 0); /* nothing was merged */
    json_decref(doc);
    kq_fairshare_free(fs);
}

int main(void)
{
    kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decay_by_hand),   cmocka_unit_test(test_no_history),
        cmocka_unit_test(test_halflife_per_queue), cmocka_unit_test(test_dominant),
        cmocka_unit_test(test_drain),           cmocka_unit_test(test_dump_load),
        cmocka_unit_test(test_load_rejects),     cmocka_unit_test(test_tracking),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
