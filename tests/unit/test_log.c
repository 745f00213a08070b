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
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

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

/* ---- the writer: kq_log_format keeps every %s inside its value ---- */

/* body formatted by the writer, rendered as JSON and checked with jansson */
static json_t *json_of_body(const char *body)
{
    return render_json(KQ_LOG_INFO, 0, body);
}

static size_t json_keys(json_t *j)
{
    return json_object_size(j) - 4; /* ts, caller, v, msg */
}

static void test_writer_quotes_names(void **state)
{
    (void)state;
    /* expected bodies written by hand: quoted only when needed, \" \\ \n \r \t escaped */
    static const struct {
        const char *name, *body;
    } cases[] = {
        {"alice", "event=reserved user=alice n=1"},
        {"ann does not exist", "event=reserved user=\"ann does not exist\" n=1"},
        {"", "event=reserved user=\"\" n=1"},
        {"a\"b", "event=reserved user=\"a\\\"b\" n=1"},
        {"a\\b", "event=reserved user=\"a\\\\b\" n=1"},
        {"a=b", "event=reserved user=\"a=b\" n=1"},
        {"two\nlines", "event=reserved user=\"two\\nlines\" n=1"},
        {"cr\rtab\t", "event=reserved user=\"cr\\rtab\\t\" n=1"},
        {"\" event=forged", "event=reserved user=\"\\\" event=forged\" n=1"},
        {"x\" event=forged n=2 q=\"", "event=reserved user=\"x\\\" event=forged n=2 q=\\\"\" n=1"},
        {"\\", "event=reserved user=\"\\\\\" n=1"},
        {"bell\x07", "event=reserved user=\"bell\x07\" n=1"}, /* kept raw; the renderer escapes it */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[512];
        kq_log_format(body, sizeof(body), "event=reserved user=%s n=%d", cases[i].name, 1);
        assert_string_equal(body, cases[i].body);
        json_t *j = json_of_body(body);
        assert_string_equal(json_string_value(json_object_get(j, "user")), cases[i].name);
        assert_string_equal(json_string_value(json_object_get(j, "event")), "reserved");
        assert_int_equal(json_integer_value(json_object_get(j, "n")), 1);
        assert_int_equal(json_keys(j), 3); /* nothing forged */
        json_decref(j);
    }
    /* text format: the value is one quoted string, the line stays one line */
    char body[256], line[1024];
    kq_log_format(body, sizeof(body), "event=reserved user=%s queue=%s", "ann does not exist", "root.a");
    size_t n = kq_log_render(line, sizeof(line), KQ_LOG_TEXT, KQ_LOG_INFO, 0, &T0, "a.c", 1, body);
    assert_non_null(strstr(line, "] \"reserved\" event=reserved user=\"ann does not exist\" queue=root.a\n"));
    kq_log_format(body, sizeof(body), "event=reserved user=%s queue=%s", "x\" event=forged\nI1124 fake", "q");
    n = kq_log_render(line, sizeof(line), KQ_LOG_TEXT, KQ_LOG_INFO, 0, &T0, "a.c", 1, body);
    assert_null(memchr(line, '\n', n - 1));
    assert_non_null(strstr(line, " event=reserved user=\"x\\\" event=forged\\nI1124 fake\" queue=q\n"));
}

static void test_writer_pod_pairs(void **state)
{
    (void)state;
    static const struct {
        const char *ns, *name, *pod, *body;
    } cases[] = {
        {"ns1", "p1", "ns1/p1", "event=bind pod=ns1/p1 uid=u"},
        {"my ns", "p1", "my ns/p1", "event=bind pod=\"my ns/p1\" uid=u"},
        {"ns1", "my pod", "ns1/my pod", "event=bind pod=\"ns1/my pod\" uid=u"},
        {"a\"", "\" uid=forged", "a\"/\" uid=forged", "event=bind pod=\"a\\\"/\\\" uid=forged\" uid=u"},
        {"", "", "/", "event=bind pod=/ uid=u"}, /* not empty: "/" is a plain token */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char body[256];
        kq_log_format(body, sizeof(body), "event=bind pod=%s/%s uid=%s", cases[i].ns, cases[i].name, "u");
        assert_string_equal(body, cases[i].body);
        json_t *j = json_of_body(body);
        assert_string_equal(json_string_value(json_object_get(j, "pod")), cases[i].pod);
        assert_string_equal(json_string_value(json_object_get(j, "uid")), "u");
        assert_int_equal(json_keys(j), 3);
        json_decref(j);
    }
    /* precision from the argument list and from the format; literal text in the run */
    char body[256];
    kq_log_format(body, sizeof(body), "event=x user=%.*s queue=%.5s... n=%d", 3, "a b c", "root dev", 7);
    assert_string_equal(body, "event=x user=\"a b\" queue=\"root ...\" n=7");
    /* a key taken from an argument (ugm: tracker created %s=%s): the value is still one value */
    kq_log_format(body, sizeof(body), "ugm: tracker created %s=%s", "user", "ann does not exist");
    assert_string_equal(body, "ugm: tracker created user=\"ann does not exist\"");
    /* %c in a value counts as text */
    kq_log_format(body, sizeof(body), "event=x sep=%c", ' ');
    assert_string_equal(body, "event=x sep=\" \"");
}

static void test_writer_escapes_quoted_values(void **state)
{
    (void)state;
    /* error=\"%s\": quotes, backslashes and newlines of the text are escaped, no new quotes */
    const char *err = "bad \"x\" \\ y\nI1124 00:00:00.000000 1 fake.c:1] \"forged\" event=forged";
    char body[512];
    kq_log_format(body, sizeof(body), "kube: list failed path=%s error=\"%s\" n=%d", "/api/v1/pods", err, 2);
    assert_string_equal(body, "kube: list failed path=/api/v1/pods error=\"bad \\\"x\\\" \\\\ y\\nI1124 "
                              "00:00:00.000000 1 fake.c:1] \\\"forged\\\" event=forged\" n=2");
    json_t *j = json_of_body(body);
    assert_string_equal(json_string_value(json_object_get(j, "error")), err);
    assert_string_equal(json_string_value(json_object_get(j, "path")), "/api/v1/pods");
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "kube: list failed");
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 2);
    assert_null(json_object_get(j, "event"));
    json_decref(j);
    /* several conversions and literal text inside one quoted value; the call site's own \" */
    kq_log_format(body, sizeof(body), "event=x msg=\"%s: bad quantity '%.4s' \\\"%d\\\"\" key=%s", "k\"1", "1 2 3",
                  5, "kubequota.io/x");
    assert_string_equal(body, "event=x msg=\"k\\\"1: bad quantity '1 2 ' \\\"5\\\"\" key=kubequota.io/x");
    j = json_of_body(body);
    assert_string_equal(json_string_value(json_object_get(j, "msg")), "k\"1: bad quantity '1 2 ' \"5\"");
    assert_string_equal(json_string_value(json_object_get(j, "key")), "kubequota.io/x");
    json_decref(j);
    /* the text the config_rejected line carries (diagnostics quote values) comes through whole */
    const char *text = "got \"a\" b=2\" (expected e.g. \"cpu=4\")";
    kq_log_format(body, sizeof(body), "event=config_rejected errors=\"%s\" n=%d", text, 2);
    j = json_of_body(body);
    assert_string_equal(json_string_value(json_object_get(j, "errors")), text);
    assert_int_equal(json_integer_value(json_object_get(j, "n")), 2);
    json_decref(j);
    /* a bare inner quote of the format before an argument: the argument cannot end the value */
    kq_log_format(body, sizeof(body), "event=x reason=\"limit \"%s\" exceeded\" user=%s", " user=forged", "bob");
    j = json_of_body(body);
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "limit \" user=forged\" exceeded");
    assert_string_equal(json_string_value(json_object_get(j, "user")), "bob");
    assert_int_equal(json_keys(j), 3);
    json_decref(j);
    /* kq_log_quote and the writer agree */
    char q[256], b2[512];
    snprintf(b2, sizeof(b2), "event=config_rejected errors=\"%s\" n=2", kq_log_quote(q, sizeof(q), "a\"b\\c\nd\te\r"));
    kq_log_format(body, sizeof(body), "event=config_rejected errors=\"%s\" n=%d", "a\"b\\c\nd\te\r", 2);
    assert_string_equal(body, b2);
    j = json_of_body(body);
    assert_string_equal(json_string_value(json_object_get(j, "errors")), "a\"b\\c\nd\te\r");
    json_decref(j);
}

/* The writer and vsnprintf write the same text for every conversion that is not a %s in a
 * value: each case is formatted by both. The first block are the conversions src/ uses
 * (collected with grep over the kq_info/kq_warn/kq_error/kq_debug/kq_v formats: %s %d %u
 * %ld %lu %lld %zu %.0f %.3f %.32s %.64s %.80s), the rest the other forms the writer takes. */
#define SAME(...)                                                                                                \
    do {                                                                                                       \
        char a_[512], b_[512];                                                                                 \
        int r_ = snprintf(a_, sizeof(a_), __VA_ARGS__);                                                        \
        size_t n_ = kq_log_format(b_, sizeof(b_), __VA_ARGS__);                                                \
        assert_true(r_ >= 0);                                                                                  \
        assert_string_equal(b_, a_);                                                                           \
        assert_int_equal(n_, strlen(a_));                                                                      \
    } while (0)

/* the same, and the writer took the body itself (no fallback): a name before it is quoted */
#define SAMEW(fmt, ...)                                                                                          \
    do {                                                                                                       \
        SAME(fmt, __VA_ARGS__);                                                                                \
        char a_[600], b_[600];                                                                                 \
        snprintf(a_, sizeof(a_), "u=\"a b\" " fmt, __VA_ARGS__);                                               \
        kq_log_format(b_, sizeof(b_), "u=%s " fmt, "a b", __VA_ARGS__);                                        \
        assert_string_equal(b_, a_);                                                                           \
    } while (0)

static void test_writer_numbers_like_printf(void **state)
{
    (void)state;
    /* used in src/ */
    SAMEW("event=x n=%d m=%d k=%d", 0, INT_MIN, INT_MAX);
    SAMEW("event=x n=%u m=%u", 0u, UINT_MAX);
    SAMEW("event=x n=%ld m=%ld", LONG_MIN, LONG_MAX);
    SAMEW("event=x n=%lu m=%lu", 0ul, ULONG_MAX);
    SAMEW("event=x n=%lld m=%lld", LLONG_MIN, LLONG_MAX);
    SAMEW("event=x n=%zu m=%zu", (size_t)0, SIZE_MAX);
    SAMEW("event=x epoch=%.0f a=%.0f b=%.0f", 1732458380.5, -0.4, 1e20);
    SAMEW("event=x ms=%.3f a=%.3f b=%.3f c=%.3f", 0.0005, -12.3456, 1.0 / 3, 0.0 / 0.0);
    SAMEW("event=x inf=%.3f ninf=%.0f", 1.0 / 0.0, -1.0 / 0.0);
    SAMEW("event=x q=%.80s q=%.64s q=%.32s", "root.plain", "cpu", "abcdefghijklmnopqrstuvwxyz0123456789");
    SAMEW("kube: list page larger than %zu bytes, asking again for %d objects path=%s", (size_t)1 << 20, 500, "/api");
    SAMEW("kube: watch stalled: nothing received for %ld ms, relisting path=%s", 30000L, "/api/v1/pods");
    /* flags, width, precision, '*' */
    SAMEW("n=%5d m=%-5d| k=%05d p=%+d s=% d h=%#x o=%#o", 42, 42, 42, 42, 42, 255u, 8u);
    SAMEW("n=%*d m=%-*d| k=%.*d p=%*.*d", 6, -7, -6, 7, 3, 5, 8, 4, 9);
    SAMEW("n=%.*f m=%*.*e", -1, 3.14159, 12, 2, 6.02e23);
    SAMEW("n=%.0d m=%.0u|", 0, 0u);
    SAMEW("n=%x %X %o %#X %08x", 0xdeadbeefu, 0xabcu, 0777u, 0u, 0x1fu);
    /* length modifiers */
    SAMEW("n=%hhd m=%hhu k=%hd l=%hu", 300, 511, 70000, 70000);
    SAMEW("n=%jd m=%ju", INTMAX_MIN, UINTMAX_MAX);
    SAMEW("n=%td m=%zd k=%zx", (ptrdiff_t)-5, (size_t)7, (size_t)255);
    SAMEW("n=%llx m=%lX k=%lo", 0x123456789abcdefULL, 0xfeedUL, 64UL);
    SAMEW("n=%Lf m=%Le k=%Lg", 1.5L, -2.25e-300L, 1e400L);
    SAMEW("n=%lf m=%lg", 2.5, 1e-5);
    /* the other conversions */
    SAMEW("n=%e %E %g %G %a %A %F", 12345.678, 1e-10, 0.0001, 1e100, 1.0, -0.5, 3.25);
    SAMEW("n=%g m=%#g k=%-12.4g|", 100000.0, 1.0, 3.14159);
    SAMEW("p=%p q=%p", (void *)0x1234, (void *)NULL);
    SAMEW("c=%c d=%c 100%%|", 'A', '0');
    SAMEW("s=%s", (const char *)"plain");
    SAMEW("%s and %s, no keys", "some words", "more \"words\"");
    const char *empty = "";
    SAME(empty, 0);
    SAME("no conversions at all key=value k2=\"v 2\"");
    /* the rest of the line after a cut is not written half */
    char small[8];
    kq_log_format(small, sizeof(small), "n=%d m=%d", 123456, 7);
    assert_string_equal(small, "n=12345");
}

static void test_writer_falls_back(void **state)
{
    (void)state;
    /* conversions the writer does not know: the whole body is vsnprintf's, never a crash */
    SAME("event=x user=%ls n=%d", L"wide name", 3);
    SAME("event=x user=%2$s n=%1$d", 3, "ann does not exist");
    SAME("event=x n=%lc", (wint_t)'w');
    const char *volatile wide = "event=x n=%99999d", *volatile star = "event=x n=%*d"; /* gcc would warn */
    SAME(wide, 1);
    SAME(star, 100000, 1);
}

static void test_writer_cuts_whole(void **state)
{
    (void)state;
    /* a value cut at the end of the buffer keeps whole escapes and its closing quote */
    char name[300];
    for (size_t i = 0; i < sizeof(name) - 1; i++)
        name[i] = "\"\\ \n"[i % 4];
    name[sizeof(name) - 1] = '\0';
    for (size_t cap = 1; cap < 80; cap++) {
        char body[80];
        size_t n = kq_log_format(body, cap, "event=x user=%s", name);
        assert_true(n < cap);
        assert_int_equal(body[n], '\0');
        assert_int_equal(strlen(body), n);
        if (n > strlen("event=x user=")) {
            assert_int_equal(body[n - 1], '"'); /* closed */
            size_t bs = 0;                      /* and not by an escaped quote */
            for (size_t i = n - 1; i-- > 0 && body[i] == '\\';)
                bs++;
            assert_int_equal(bs % 2, 0);
            json_t *j = json_of_body(body);
            const char *got = json_string_value(json_object_get(j, "user"));
            assert_non_null(got);
            assert_memory_equal(got, name, strlen(got)); /* a prefix of the name */
            json_decref(j);
        }
    }
    char body[4096];
    size_t n = kq_log_format(body, sizeof(body), "event=x error=\"%s\" tail=%s", name, "t");
    json_t *j = json_of_body(body);
    assert_string_equal(json_string_value(json_object_get(j, "error")), name);
    assert_string_equal(json_string_value(json_object_get(j, "tail")), "t");
    json_decref(j);
    (void)n;
}

static void test_writer_through_kq_info(void **state)
{
    (void)state;
    /* the real path: kq_info writes one JSON line on stderr with the name whole */
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    dup2(fileno(tmp), STDERR_FILENO);
    int old_level = kq_log_level_current, old_v = kq_log_verbosity;
    kq_log_level_current = KQ_LOG_INFO;
    kq_log_verbosity = 0;
    assert_int_equal(kq_log_set_format("json"), 0);
    kq_info("event=reserved pod=%s/%s uid=%s queue=%s user=%s by=watch", "ns 1", "p\"1", "u-1", "root.a",
            "ann\" event=forged");
    assert_int_equal(kq_log_set_format("text"), 0);
    kq_info("event=reserved user=%s", "ann does not exist");
    kq_log_level_current = old_level;
    kq_log_verbosity = old_v;
    dup2(saved, STDERR_FILENO);
    close(saved);
    char out[4096];
    rewind(tmp);
    size_t n = fread(out, 1, sizeof(out) - 1, tmp);
    fclose(tmp);
    out[n] = '\0';
    char *nl = strchr(out, '\n');
    assert_non_null(nl);
    json_error_t je;
    json_t *j = json_loadb(out, (size_t)(nl - out + 1), 0, &je);
    if (j == NULL)
        fail_msg("not JSON (%s): %s", je.text, out);
    assert_string_equal(json_string_value(json_object_get(j, "event")), "reserved");
    assert_string_equal(json_string_value(json_object_get(j, "pod")), "ns 1/p\"1");
    assert_string_equal(json_string_value(json_object_get(j, "user")), "ann\" event=forged");
    assert_string_equal(json_string_value(json_object_get(j, "by")), "watch");
    json_decref(j);
    assert_non_null(strstr(nl + 1, " event=reserved user=\"ann does not exist\"\n"));
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
        cmocka_unit_test(test_writer_quotes_names),
        cmocka_unit_test(test_writer_pod_pairs),
        cmocka_unit_test(test_writer_escapes_quoted_values),
        cmocka_unit_test(test_writer_numbers_like_printf),
        cmocka_unit_test(test_writer_falls_back),
        cmocka_unit_test(test_writer_cuts_whole),
        cmocka_unit_test(test_writer_through_kq_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
