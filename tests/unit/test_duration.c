/* Unit tests for Go-style durations: a table of inputs with the milliseconds Go's
 * time.ParseDuration gives for them (golang/go src/time/time_test.go parseDurationTests
 * lists the same forms), the legacy bare numbers, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "kubequota/base/duration.h"

static void test_table(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        long legacy;
        long ms; /* -1: error */
    } cases[] = {
        {"500ms", 0, 500},        {"15s", 0, 15000},         {"2m", 0, 120000},      {"1h30m", 0, 5400000},
        {"1h", 0, 3600000},       {"1.5h", 0, 5400000},      {"1m30s", 0, 90000},    {"0", 0, 0},
        {"0s", 0, 0},             {"1500ms", 0, 1500},       {"2.5s", 0, 2500},      {".5s", 0, 500},
        {"1.s", 0, 1000},         {"1000us", 0, 1},          {"1000000ns", 0, 1},    {"1000\xc2\xb5s", 0, 1},
        {"1h1m1s1ms", 0, 3661001}, {"168h", 0, 604800000},
        /* legacy bare numbers in the flag's old unit */
        {"2000", 1, 2000},        {"10", 1000, 10000},       {"2000", 0, -1},
        /* errors */
        {"", 0, -1},              {"s", 0, -1},              {"15", 0, -1},          {"15x", 0, -1},
        {"-1s", 0, -1},           {"1s2", 0, -1},            {"1 s", 0, -1},         {"1d", 0, -1},
        {"169h", 0, -1},          {"999999999999999999999h", 0, -1}, {"1us", 0, -1}, {".s", 0, -1},
        {"1.5.5s", 0, -1},        {"-5", 1, -1},             {"100000000000", 1, -1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long ms = -42;
        char err[256] = "";
        int rc = kq_duration_parse(cases[i].in, cases[i].legacy, &ms, err, sizeof(err));
        if (cases[i].ms < 0) {
            if (rc != KQ_EINVAL)
                fail_msg("\"%s\": accepted as %ld", cases[i].in, ms);
            assert_int_equal(ms, -42); /* untouched */
            assert_non_null(strstr(err, "is not a duration"));
        } else {
            if (rc != 0)
                fail_msg("\"%s\": %s", cases[i].in, err);
            assert_int_equal(ms, cases[i].ms);
        }
    }
}

static void test_format_round_trips(void **state)
{
    (void)state;
    static const struct {
        long ms;
        const char *out;
    } cases[] = {{0, "0s"}, {500, "500ms"}, {15000, "15s"}, {120000, "2m"}, {5400000, "1h30m"}, {1500, "1500ms"},
                 {61500, "1m1.500s"}, {3600000, "1h"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char buf[32];
        assert_string_equal(kq_duration_format(cases[i].ms, buf, sizeof(buf)), cases[i].out);
        long back = -1;
        assert_int_equal(kq_duration_parse(buf, 0, &back, NULL, 0), 0);
        assert_int_equal(back, cases[i].ms);
    }
}

/* Deadlines for pthread_cond_timedwait: milliseconds added with the carry into seconds
 * (tv_nsec stays below 1e9, as pthread_cond_timedwait requires). */
static void test_timespec_add_ms(void **state)
{
    (void)state;
    struct timespec t = {.tv_sec = 10, .tv_nsec = 999000000L};
    kq_timespec_add_ms(&t, 1);
    assert_int_equal(t.tv_sec, 11);
    assert_int_equal(t.tv_nsec, 0);
    t = (struct timespec){.tv_sec = 10, .tv_nsec = 500000000L};
    kq_timespec_add_ms(&t, 2750);
    assert_int_equal(t.tv_sec, 13);
    assert_int_equal(t.tv_nsec, 250000000L);
    t = (struct timespec){.tv_sec = 10, .tv_nsec = 123};
    kq_timespec_add_ms(&t, 0);
    assert_int_equal(t.tv_sec, 10);
    assert_int_equal(t.tv_nsec, 123);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_format_round_trips),
        cmocka_unit_test(test_timespec_add_ms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
