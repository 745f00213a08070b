/* Unit tests for the log module: every body renders as one klog text line or one JSON
 * object with ts, caller, v (or level) and msg; keys keep their values through quoting
 * and escaping; the limiter lets one line per key per window through and counts the rest.
 *
 * Formats as Kubernetes documents them for its components
 * (kubernetes/website content/en/docs/concepts/cluster-administration/system-logs.md):
 * text "I1025 00:15:15.525108       1 file.go:79] "msg" key=value",
 * JSON {"ts":1580306777.04728,"v":4,"msg":"...", keys...}.
 * The JSON is checked with jansson, an independent parser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "kubequota/base/log.h"

static const struct timespec T0 = {1732458380, 555123456}; /* 2024-11-24T14:26:20.555123456Z */

static json_t *render_json(int level, int v, const char *body)
{
    char buf[8192];
    size_t n = kq_log_render(buf, sizeof(buf), KQ_LOG_JSON, level, v, &T0, "src/serve/extender.c", 583, body);
    assert_true(n > 0);
    assert_int_equal(buf[n - 1], '\n');
    assert_null(memchr(buf, '\n', n - 1)); /* one line */
    json_error_t je;
    json_t *j = json_loadb(buf, n, 0, &je);
    if (j == NULL)
        fail_msg("not JSON (%s): %s", je.text, buf);
    assert_true(json_is_object(j));
    return j;
}

static void test_json_fields(void **state)
{
    (void)state;
    json_t *j = render_json(KQ_LOG_INFO, 0,
                            "event=bind result=bound pod=ns1/p1 uid=u-1 user=alice queue=root.a counted=yes "
                            "attempts=3 reason=\"over the max: \\\"cpu\\\" 2 > 1\"");
    assert_true(json_is_number(json_object_get(j, "ts")));
    /* ts is seconds since the epoch with millisecond precision */
    assert_true(json_number_value(json_object_get(j, "ts")) > 1732458380.5 &&
                json_number_value(json_object_get(j, "ts")) < 1732458380.6);
    assert_string_equal(json_string_value(json_object_get(j, "caller")), "extender.c:583");
    assert_int_equal(json_integer_value(json_object_get(j, "v")), 0);
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "bind");
    assert_string_equal(json_string_value(json_object_get(j, "event")), "bind");
    assert_string_equal(json_string_value(json_object_get(j, "pod")), "ns1/p1");
    assert_string_equal(json_string_value(json_object_get(j, "user")), "alice");
    assert_string_equal(json_string_value(json_object_get(j, "queue")), "root.a");
    assert_int_equal(json_integer_value(json_object_get(j, "attempts")), 3);
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "over the max: \"cpu\" 2 > 1");
    assert_null(json_object_get(j, "level"));
    json_decref(j);
    /* quotes inside a quoted value that the call site did not escape */
    j = render_json(KQ_LOG_INFO, 0, "event=filter reason=\"limit \"one core\" (user *) exceeded\" user=bob "
                                    "msg=\"say \"hi\"\"");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "limit \"one core\" (user *) exceeded");
    assert_string_equal(json_string_value(json_object_get(j, "user")), "bob");
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "say \"hi\"");
    json_decref(j);
    /* a quotation inside a value that looks like key=value */
    j = render_json(KQ_LOG_INFO, 0, "event=config_rejected errors=\"bad (expected e.g. \"cpu=4,memory=8Gi\")\" n=1");
    assert_string_equal(json_string_value(json_object_get(j, "errors")), "bad (expected e.g. \"cpu=4,memory=8Gi\")");
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 1);
    json_decref(j);
    /* an unescaped inner quote followed by " key=" ends the value early; escaped with
     * kq_log_quote (as the config_rejected line does) the whole text comes through */
    const char *text = "got \"a\" b=2\" (expected e.g. \"cpu=4\")";
    char q[256], body[512];
    snprintf(body, sizeof(body), "event=config_rejected errors=\"%s\" n=2", kq_log_quote(q, sizeof(q), text));
    j = render_json(KQ_LOG_ERROR, 0, body);
    assert_string_equal(json_string_value(json_object_get(j, "errors")), text);
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 2);
    json_decref(j);
    snprintf(body, sizeof(body), "event=config_rejected errors=\"%s\" n=2", text);
    j = render_json(KQ_LOG_ERROR, 0, body);
    assert_string_not_equal(json_string_value(json_object_get(j, "errors")), text);
    json_decref(j);
}

static void test_json_message_sources(void **state)
{
    (void)state;
    /* msg= wins over the event name */
    json_t *j = render_json(KQ_LOG_WARN, 0, "event=config_rejected file=/x msg=\"keeping the old one\"");
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "keeping the old one");
    assert_string_equal(json_string_value(json_object_get(j, "level")), "warning");
    assert_string_equal(json_string_value(json_object_get(j, "event")), "config_rejected");
    json_decref(j);
    /* leading words form the message; words after keys join it too */
    /* prose around a key=value stays one sentence; the keys are still extracted */
    j = render_json(KQ_LOG_ERROR, 0, "ugm: limits applied partition=default queues=3, for now");
    assert_string_equal(json_string_value(json_object_get(j, "msg")),
                        "ugm: limits applied partition=default queues=3, for now");
    assert_string_equal(json_string_value(json_object_get(j, "partition")), "default");
    assert_string_equal(json_string_value(json_object_get(j, "queues")), "3,");
    assert_string_equal(json_string_value(json_object_get(j, "level")), "error");
    assert_null(json_object_get(j, "v")); /* error lines carry no verbosity, as in component-base */
    json_decref(j);
    /* debug is V(4) */
    j = render_json(KQ_LOG_DEBUG, KQ_LOG_DEBUG_V, "event=filter result=allowed");
    assert_int_equal(json_integer_value(json_object_get(j, "v")), 4);
    json_decref(j);
    /* reserved names in the body cannot overwrite the envelope */
    j = render_json(KQ_LOG_INFO, 0, "event=x ts=yesterday v=9 level=high caller=me");
    assert_true(json_is_number(json_object_get(j, "ts")));
    assert_int_equal(json_integer_value(json_object_get(j, "v")), 0);
    assert_string_equal(json_string_value(json_object_get(j, "x_ts")), "yesterday");
    assert_int_equal(json_integer_value(json_object_get(j, "x_v")), 9);
    json_decref(j);
}

static void test_json_hostile_bodies(void **state)
{
    (void)state;
    static const char *bodies[] = {
        "", "=", "==", "\"", "event=", "a=\"unterminated", "msg=\"\\", "k=\"\\\\\" tail", "ctl=\x01\x02\x7f x",
        "utf8=\xc3\xa9t\xc3\xa9 \xff\xfe", "  lots   of   spaces   ", "k=v=w", "9key=1 _k=-0 n=-12 big=123456789012345678901",
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        char buf[8192];
        size_t n = kq_log_render(buf, sizeof(buf), KQ_LOG_JSON, KQ_LOG_INFO, 0, &T0, "f.c", 1, bodies[i]);
        json_error_t je;
        json_t *j = json_loadb(buf, n, JSON_ALLOW_NUL, &je);
        /* invalid UTF-8 passes through as bytes; jansson refuses it, everything else must parse */
        if (strstr(bodies[i], "\xff") == NULL && j == NULL)
            fail_msg("body %zu not JSON (%s): %s", i, je.text, buf);
        if (j != NULL)
            assert_non_null(json_object_get(j, "msg"));
        json_decref(j);
    }
    /* a line longer than the buffer stays one whole object, members dropped whole */
    char body[4000];
    size_t off = 0;
    for (int i = 0; off + 40 < sizeof(body); i++)
        off += (size_t)snprintf(body + off, sizeof(body) - off, "k%d=\"%s\" ", i, "a \\\"quoted\\\" value");
    char small[600];
    size_t n = kq_log_render(small, sizeof(small), KQ_LOG_JSON, KQ_LOG_INFO, 0, &T0, "f.c", 1, body);
    assert_true(n < sizeof(small));
    json_error_t je;
    json_t *j = json_loadb(small, n, 0, &je);
    if (j == NULL)
        fail_msg("cut line not JSON (%s): %s", je.text, small);
    assert_string_equal(json_string_value(json_object_get(j, "k0")), "a \"quoted\" value");
    json_decref(j);
}

static void test_text_format(void **state)
{
    (void)state;
    char buf[4096];
    kq_log_render(buf, sizeof(buf), KQ_LOG_TEXT, KQ_LOG_WARN, 0, &T0, "src/kube/kube.c", 77,
                  "event=leader_lost lease=kube-system/kq reason=\"renew failed\" msg=\"stepping down\"");
    /* klog header: severity letter, mmdd, time with microseconds, pid, file:line] */
    char pid[16];
    snprintf(pid, sizeof(pid), " %d ", (int)getpid());
    assert_memory_equal(buf, "W1124 14:26:20.555123 ", 22);
    assert_non_null(strstr(buf, pid));
    assert_non_null(strstr(buf, " kube.c:77] \"stepping down\" event=leader_lost lease=kube-system/kq "
                                "reason=\"renew failed\"\n"));
    kq_log_render(buf, sizeof(buf), KQ_LOG_TEXT, KQ_LOG_ERROR, 0, &T0, "a.c", 1, "kube: boom");
    assert_int_equal(buf[0], 'E');
    assert_non_null(strstr(buf, "] \"kube: boom\"\n"));
    kq_log_render(buf, sizeof(buf), KQ_LOG_TEXT, KQ_LOG_DEBUG, 4, &T0, "a.c", 1, "event=x");
    assert_int_equal(buf[0], 'I');
}

static void test_levels_and_verbosity(void **state)
{
    (void)state;
    assert_int_equal(kq_log_set_format("json"), 0);
    assert_int_equal(kq_log_get_format(), KQ_LOG_JSON);
    assert_int_equal(kq_log_set_format("text"), 0);
    assert_int_equal(kq_log_set_format("yaml"), KQ_EINVAL);
    assert_int_equal(kq_log_set_verbosity(11), KQ_EINVAL);
    assert_int_equal(kq_log_set_verbosity(-1), KQ_EINVAL);
    assert_int_equal(kq_log_set_verbosity(2), 0);
    assert_int_equal(kq_log_level_current, KQ_LOG_INFO);
    assert_int_equal(kq_log_set_verbosity(4), 0);
    assert_int_equal(kq_log_level_current, KQ_LOG_DEBUG);
    assert_int_equal(kq_log_set_verbosity(0), 0);
    assert_int_equal(kq_log_level_current, KQ_LOG_INFO);
    assert_int_equal(kq_log_set_level("debug"), 0);
    assert_int_equal(kq_log_verbosity, KQ_LOG_DEBUG_V);
    /* arguments are not evaluated when the line is off */
    int evaluated = 0;
    kq_log_set_level("error");
    kq_log_verbosity = 0;
    kq_info("event=x n=%d", ++evaluated);
    kq_v(3, "event=x n=%d", ++evaluated);
    assert_int_equal(evaluated, 0);
}

static void test_limiter(void **state)
{
    (void)state;
    /* one line per key per 60 s; at most 2 per second overall, burst 3 */
    kq_log_limiter_t *l = kq_log_limiter_new(60, 2, 3);
    assert_non_null(l);
    unsigned long sup = 99;
    double t = 100;
    assert_true(kq_log_limiter_allow(l, "pod-a", &t, &sup));
    assert_int_equal(sup, 0);
    assert_false(kq_log_limiter_allow(l, "pod-a", &t, &sup)); /* same key, same window */
    t = 159.9;
    assert_false(kq_log_limiter_allow(l, "pod-a", &t, &sup));
    assert_true(kq_log_limiter_allow(l, "pod-b", &t, &sup));
    assert_int_equal(sup, 2); /* the two pod-a lines held back */
    /* a flood of distinct keys: the bucket (3 tokens, refilled by 2 per second) bounds it */
    t = 1000;
    int let = 0;
    for (int i = 0; i < 100; i++) {
        char key[16];
        snprintf(key, sizeof(key), "p%d", i);
        let += kq_log_limiter_allow(l, key, &t, NULL);
    }
    assert_int_equal(let, 3);
    t = 1001; /* one second later: two more tokens */
    let = 0;
    for (int i = 100; i < 200; i++) {
        char key[16];
        snprintf(key, sizeof(key), "p%d", i);
        let += kq_log_limiter_allow(l, key, &t, &sup);
    }
    assert_int_equal(let, 2);
    t = 1061; /* after the window the first key may speak again */
    assert_true(kq_log_limiter_allow(l, "pod-a", &t, NULL));
    kq_log_limiter_free(l);
    kq_log_limiter_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_fields),
        cmocka_unit_test(test_json_message_sources),
        cmocka_unit_test(test_json_hostile_bodies),
        cmocka_unit_test(test_text_format),
        cmocka_unit_test(test_levels_and_verbosity),
        cmocka_unit_test(test_limiter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
