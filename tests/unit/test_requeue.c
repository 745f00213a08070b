/* Unit tests for requeue.c: the table of recent denials (insert, a repeat replacing the
 * pod's entry, expiry after the window, the cap), which denials a release makes due
 * (decided before it, recent then; or decided across it), one poke per denial and at most
 * one per interval, a poke the writer refuses kept due, and the worker thread. Times are
 * explicit (the *_at functions); the poke function records what it is asked to write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kubequota/base/log.h"
#include "kubequota/control/requeue.h"

typedef struct rec {
    int n;
    int refuse; /* refuse this many pokes first */
    char uid[8][64];
    char value[64];
} rec_t;

static bool record(void *ud, const char *ns, const char *name, const char *uid, const char *key, const char *value)
{
    rec_t *r = ud;
    assert_string_equal(key, KQ_REQUEUE_ANNOTATION);
    assert_string_equal(ns, "default");
    assert_non_null(name);
    if (r->refuse > 0) {
        r->refuse--;
        return false;
    }
    if (r->n < 8)
        snprintf(r->uid[r->n], sizeof(r->uid[0]), "%s", uid);
    snprintf(r->value, sizeof(r->value), "%s", value);
    r->n++;
    return true;
}

static kq_requeue_t *new_rq(rec_t *r, size_t max_pods)
{
    kq_requeue_opts_t o;
    kq_requeue_opts_default(&o);
    o.window_s = 10;
    o.min_interval_s = 2;
    if (max_pods > 0)
        o.max_pods = max_pods;
    memset(r, 0, sizeof(*r));
    kq_requeue_t *rq = kq_requeue_new(&o, record, r);
    assert_non_null(rq);
    return rq;
}

static void deny(kq_requeue_t *rq, const char *uid, double now)
{
    kq_requeue_denied_at(rq, "default", uid, uid, kq_requeue_mark(rq), now);
}

static void test_release_pokes_recent_denial(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    deny(rq, "u1", 100);
    deny(rq, "u2", 100.5);
    assert_int_equal(kq_requeue_size(rq), 2);
    assert_int_equal(kq_requeue_run(rq, 101), 0); /* no release: nothing */
    kq_requeue_released_at(rq, 101);
    assert_int_equal(kq_requeue_run(rq, 101.1), 2);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.uid[0], "u1"); /* oldest first */
    assert_string_equal(r.uid[1], "u2");
    /* RFC 3339, UTC, milliseconds */
    assert_int_equal(strlen(r.value), 24);
    assert_int_equal(r.value[23], 'Z');
    unsigned long poked, deferred;
    kq_requeue_stats(rq, &poked, &deferred);
    assert_int_equal(poked, 2);
    assert_int_equal(deferred, 0);
    kq_requeue_free(rq);
}

static void test_denial_after_release_not_poked(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    kq_requeue_released_at(rq, 100);
    deny(rq, "u1", 100.2); /* decided after the release: it saw the freed usage */
    assert_int_equal(kq_requeue_run(rq, 100.3), 0);
    assert_int_equal(r.n, 0);
    kq_requeue_free(rq);
}

static void test_decision_across_release(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    uint64_t mark = kq_requeue_mark(rq); /* the filter starts deciding */
    kq_requeue_released_at(rq, 100);
    assert_int_equal(kq_requeue_run(rq, 100), 0); /* the worker handles the release: table empty */
    kq_requeue_denied_at(rq, "default", "late", "late", mark, 100.1); /* the decision ends */
    assert_int_equal(kq_requeue_run(rq, 100.2), 1);
    assert_string_equal(r.uid[0], "late");
    kq_requeue_free(rq);
}

static void test_window_expiry(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    deny(rq, "old", 100);
    deny(rq, "recent", 108);
    kq_requeue_released_at(rq, 112); /* "old" is 12 s before: past the 10 s window */
    assert_int_equal(kq_requeue_run(rq, 112), 1);
    assert_string_equal(r.uid[0], "recent");
    assert_int_equal(kq_requeue_size(rq), 1); /* "old" dropped from the head */
    deny(rq, "x", 125); /* inserting prunes too: "recent" is past the window and its poke */
    assert_int_equal(kq_requeue_size(rq), 1);
    kq_requeue_free(rq);
}

static void test_dedupe(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    deny(rq, "u1", 100);
    kq_requeue_released_at(rq, 101);
    assert_int_equal(kq_requeue_run(rq, 101), 1);
    /* another release: the same denial is not poked twice */
    kq_requeue_released_at(rq, 101.5);
    assert_int_equal(kq_requeue_run(rq, 101.5), 0);
    /* kube-scheduler retried and the filter denied again: re-armed, but the interval
     * (2 s since the poke at 101) holds the next poke back */
    deny(rq, "u1", 102);
    assert_int_equal(kq_requeue_size(rq), 1); /* replaced, not added */
    kq_requeue_released_at(rq, 102.5);
    assert_int_equal(kq_requeue_run(rq, 102.5), 0);
    assert_int_equal(kq_requeue_run(rq, 102.9), 0);
    assert_int_equal(kq_requeue_run(rq, 103.1), 1);
    assert_int_equal(r.n, 2);
    kq_requeue_free(rq);
}

static void test_cap(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 3);
    const char *uids[] = {"p1", "p2", "p3", "p4", "p5"};
    for (int i = 0; i < 5; i++)
        deny(rq, uids[i], 100 + i * 0.1);
    assert_int_equal(kq_requeue_size(rq), 3);
    kq_requeue_released_at(rq, 101);
    assert_int_equal(kq_requeue_run(rq, 101), 3);
    assert_string_equal(r.uid[0], "p3"); /* the oldest went */
    assert_string_equal(r.uid[1], "p4");
    assert_string_equal(r.uid[2], "p5");
    kq_requeue_free(rq);
}

static void test_refused_poke_stays_due(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    deny(rq, "u1", 100);
    deny(rq, "u2", 100);
    r.refuse = 1; /* the writer's bucket is empty once */
    kq_requeue_released_at(rq, 101);
    assert_int_equal(kq_requeue_run(rq, 101), 0); /* stops at the first refusal */
    unsigned long poked, deferred;
    kq_requeue_stats(rq, &poked, &deferred);
    assert_int_equal(deferred, 2);
    assert_int_equal(kq_requeue_run(rq, 101.2), 2); /* tried again, no interval wait */
    kq_requeue_free(rq);
}

static void test_bad_input_and_null(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    char big[200];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    kq_requeue_denied_at(rq, "default", "n", big, 0, 100); /* a uid over 128 bytes */
    kq_requeue_denied_at(rq, "default", "n", "", 0, 100);
    kq_requeue_denied_at(rq, NULL, "n", "u", 0, 100);
    assert_int_equal(kq_requeue_size(rq), 0);
    kq_requeue_free(rq);
    kq_requeue_free(NULL);
    kq_requeue_denied(NULL, "default", "n", "u", 0);
    kq_requeue_released(NULL);
    assert_int_equal(kq_requeue_mark(NULL), 0);
    assert_true(kq_requeue_kind_liftable(KQ_DENIAL_OVER_LIMIT));
    assert_true(kq_requeue_kind_liftable(KQ_DENIAL_OVER_RUNTIME));
    assert_true(kq_requeue_kind_liftable(KQ_DENIAL_APP_OWNER));
    assert_false(kq_requeue_kind_liftable(KQ_DENIAL_NEVER_FITS));
    assert_false(kq_requeue_kind_liftable(KQ_DENIAL_QUEUE_MISSING));
    assert_false(kq_requeue_kind_liftable(KQ_DENIAL_ACL));
}

static void test_worker_thread(void **state)
{
    rec_t r;
    kq_requeue_t *rq = new_rq(&r, 0);
    assert_int_equal(kq_requeue_start(rq), 0);
    kq_requeue_denied(rq, "default", "w", "w", kq_requeue_mark(rq));
    kq_requeue_released(rq);
    unsigned long poked = 0;
    for (int i = 0; i < 200 && poked == 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        kq_requeue_stats(rq, &poked, NULL);
    }
    assert_int_equal(poked, 1);
    kq_requeue_free(rq); /* stops and joins */
}

int main(void)
{
    kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_release_pokes_recent_denial),
        cmocka_unit_test(test_denial_after_release_not_poked),
        cmocka_unit_test(test_decision_across_release),
        cmocka_unit_test(test_window_expiry),
        cmocka_unit_test(test_dedupe),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_refused_poke_stays_due),
        cmocka_unit_test(test_bad_input_and_null),
        cmocka_unit_test(test_worker_thread),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
