/* Unit tests for jscan, the validating JSON scanner: texts that must be accepted or
 * rejected (written out by hand from RFC 8259 and jansson's documented limits), the spans
 * and types it reports, member lookup, the string iterator and string decoding. Each
 * accept/reject case is also checked against jansson (json_loadb with JSON_DECODE_ANY),
 * which the flags KQ_JSCAN_JANSSON promise to match. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kubequota/kube/jscan.h"

#include "../jdoc_check.h"

#define S(lit) lit, sizeof(lit) - 1

/* ------------------------------------------------------------------ accept / reject */

struct doc_case {
    const char *text;
    size_t len;
    kq_jtype_t type; /* KQ_JNONE: must be rejected */
};

static const struct doc_case docs[] = {
    /* scalars and containers */
    {S("{}"), KQ_JOBJECT},
    {S("[]"), KQ_JARRAY},
    {S(" \t\r\n[ 1 , 2 ]\n "), KQ_JARRAY},
    {S("\"\""), KQ_JSTRING},
    {S("0"), KQ_JNUMBER},
    {S("-0"), KQ_JNUMBER},
    {S("-0.0e-0"), KQ_JNUMBER},
    {S("12.5E+3"), KQ_JNUMBER},
    {S("1e5"), KQ_JNUMBER},
    {S("true"), KQ_JTRUE},
    {S("false"), KQ_JFALSE},
    {S("null"), KQ_JNULL},
    {S("{\"a\":[1,{\"b\":null}],\"c\":\"d\",\"a\":2}"), KQ_JOBJECT}, /* duplicate keys are JSON */
    /* strings: every escape, UTF-8 of every length, surrogate pairs */
    {S("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uABCD\""), KQ_JSTRING},
    {S("\"\\ud83d\\ude00\""), KQ_JSTRING},
    {S("\"\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xed\x9f\xbf \xee\x80\x80\""), KQ_JSTRING},
    {S("\"\x7f\""), KQ_JSTRING},
    {S("\"a long string of plain ASCII that crosses several 8-byte words, with a \\\"quote\\\" late\""),
     KQ_JSTRING},
    /* int64 limits, tiny reals (underflow is not an error for jansson) */
    {S("[9223372036854775807,-9223372036854775808]"), KQ_JARRAY},
    {S("1e-400"), KQ_JNUMBER},
    {S("1.7976931348623157e308"), KQ_JNUMBER},

    /* grammar errors */
    {S(""), KQ_JNONE},
    {S("   "), KQ_JNONE},
    {S("[1,]"), KQ_JNONE},
    {S("{\"a\":1,}"), KQ_JNONE},
    {S("{\"a\" 1}"), KQ_JNONE},
    {S("{1:2}"), KQ_JNONE},
    {S("{'a':1}"), KQ_JNONE},
    {S("[1 2]"), KQ_JNONE},
    {S("[1]]"), KQ_JNONE},
    {S("[[1]"), KQ_JNONE},
    {S("{} {}"), KQ_JNONE},
    {S("[true1]"), KQ_JNONE},
    {S("tru"), KQ_JNONE},
    {S("True"), KQ_JNONE},
    {S("nul"), KQ_JNONE},
    {S("[1] x"), KQ_JNONE},
    {S("[1]\0"), KQ_JNONE},
    {S("/* c */ 1"), KQ_JNONE},
    /* numbers */
    {S("01"), KQ_JNONE},
    {S("-01"), KQ_JNONE},
    {S("-"), KQ_JNONE},
    {S("+1"), KQ_JNONE},
    {S("1."), KQ_JNONE},
    {S(".5"), KQ_JNONE},
    {S("1e"), KQ_JNONE},
    {S("1e+"), KQ_JNONE},
    {S("0x10"), KQ_JNONE},
    {S("NaN"), KQ_JNONE},
    {S("Infinity"), KQ_JNONE},
    /* strings */
    {S("\"abc"), KQ_JNONE},
    {S("\"a\nb\""), KQ_JNONE},
    {S("\"a\tb\""), KQ_JNONE},
    {S("\"a\0b\""), KQ_JNONE},
    {S("\"\\x\""), KQ_JNONE},
    {S("\"\\u12\""), KQ_JNONE},
    {S("\"\\u12G4\""), KQ_JNONE},
    {S("\"\\"), KQ_JNONE},
    {S("\"\\ud83d\""), KQ_JNONE},        /* high surrogate alone */
    {S("\"\\ud83dx\\ude00\""), KQ_JNONE}, /* not adjacent */
    {S("\"\\ude00\""), KQ_JNONE},        /* low surrogate alone */
    {S("\"\\ud83d\\ud83d\""), KQ_JNONE}, /* two high ones */
    /* UTF-8 */
    {S("\"\x80\""), KQ_JNONE},             /* continuation byte first */
    {S("\"\xc0\x80\""), KQ_JNONE},         /* overlong NUL */
    {S("\"\xc1\xbf\""), KQ_JNONE},         /* overlong */
    {S("\"\xe0\x80\x80\""), KQ_JNONE},     /* overlong */
    {S("\"\xe0\x9f\xbf\""), KQ_JNONE},     /* overlong */
    {S("\"\xed\xa0\x80\""), KQ_JNONE},     /* UTF-16 surrogate */
    {S("\"\xf0\x8f\xbf\xbf\""), KQ_JNONE}, /* overlong */
    {S("\"\xf4\x90\x80\x80\""), KQ_JNONE}, /* above U+10FFFF */
    {S("\"\xf5\x80\x80\x80\""), KQ_JNONE},
    {S("\"\xff\""), KQ_JNONE},
    {S("\"\xc3\""), KQ_JNONE},             /* truncated by the quote */
    {S("\"\xe2\x82"), KQ_JNONE},           /* truncated by the end */
    {S("\xc3\xa9"), KQ_JNONE},             /* valid UTF-8 outside a string */
};

/* Rejected only with the jansson flags. */
static const struct doc_case jansson_only[] = {
    {S("\"\\u0000\""), KQ_JSTRING},
    {S("{\"\\u0000\":1}"), KQ_JOBJECT},
    {S("9223372036854775808"), KQ_JNUMBER},
    {S("-9223372036854775809"), KQ_JNUMBER},
    {S("[123456789012345678901234567890]"), KQ_JARRAY},
    {S("1e400"), KQ_JNUMBER},
    {S("-1.8e308"), KQ_JNUMBER},
    {S("[1e99999999999999999999]"), KQ_JARRAY},
};

static bool jansson_accepts(const char *text, size_t len)
{
    json_error_t e;
    json_t *j = json_loadb(text, len, JSON_DECODE_ANY, &e);
    json_decref(j);
    return j != NULL;
}

static void test_documents(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        const struct doc_case *c = &docs[i];
        kq_jvalue_t v = {.type = KQ_JNONE};
        kq_jscan_error_t e;
        int rc = kq_jscan_validate(c->text, c->len, 0, &v, &e);
        int rcj = kq_jscan_validate(c->text, c->len, KQ_JSCAN_JANSSON, NULL, NULL);
        if (c->type == KQ_JNONE) {
            if (rc != KQ_EPARSE || rcj != KQ_EPARSE)
                fail_msg("case %zu: accepted %.*s", i, (int)c->len, c->text);
            assert_true(e.offset <= c->len);
            assert_true(e.text[0] != '\0');
        } else {
            if (rc != 0 || rcj != 0)
                fail_msg("case %zu: rejected %.*s: %s", i, (int)c->len, c->text, e.text);
            assert_int_equal(v.type, c->type);
        }
        if (jansson_accepts(c->text, c->len) != (c->type != KQ_JNONE))
            fail_msg("case %zu: jansson disagrees about %.*s", i, (int)c->len, c->text);
    }
}

static void test_jansson_flags(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(jansson_only) / sizeof(jansson_only[0]); i++) {
        const struct doc_case *c = &jansson_only[i];
        kq_jvalue_t v;
        kq_jscan_error_t e;
        if (kq_jscan_validate(c->text, c->len, 0, &v, &e) != 0)
            fail_msg("case %zu: RFC 8259 text rejected: %s", i, e.text);
        assert_int_equal(v.type, c->type);
        if (kq_jscan_validate(c->text, c->len, KQ_JSCAN_JANSSON, NULL, &e) != KQ_EPARSE)
            fail_msg("case %zu: accepted with the jansson flags: %.*s", i, (int)c->len, c->text);
        assert_false(jansson_accepts(c->text, c->len));
    }
    /* each flag alone */
    assert_int_equal(kq_jscan_validate(S("\"\\u0000\""), KQ_JSCAN_NUM_RANGE, NULL, NULL), 0);
    assert_int_equal(kq_jscan_validate(S("\"\\u0000\""), KQ_JSCAN_NO_NUL, NULL, NULL), KQ_EPARSE);
    assert_int_equal(kq_jscan_validate(S("1e400"), KQ_JSCAN_NO_NUL, NULL, NULL), 0);
    assert_int_equal(kq_jscan_validate(S("1e400"), KQ_JSCAN_NUM_RANGE, NULL, NULL), KQ_EPARSE);
}

/* Reals longer than the scanner's stack copy: checked in place when followed by a
 * delimiter, from a heap copy at the very end of the text. */
static void test_long_reals(void **state)
{
    (void)state;
    char big[400], doc[420];
    memset(big, '9', 350);
    memcpy(big + 350, ".5e-42", 7); /* 351 digits, times 1e-42: 1e308-ish, fits */
    assert_int_equal(kq_jscan_validate(big, strlen(big), KQ_JSCAN_JANSSON, NULL, NULL), 0);
    assert_true(jansson_accepts(big, strlen(big)));
    snprintf(doc, sizeof(doc), "[%s]", big);
    assert_int_equal(kq_jscan_validate(doc, strlen(doc), KQ_JSCAN_JANSSON, NULL, NULL), 0);
    memcpy(big + 350, ".5e-40", 7); /* 1e310-ish: overflows */
    assert_int_equal(kq_jscan_validate(big, strlen(big), KQ_JSCAN_JANSSON, NULL, NULL), KQ_EPARSE);
    assert_false(jansson_accepts(big, strlen(big)));
    snprintf(doc, sizeof(doc), "[%s]", big);
    assert_int_equal(kq_jscan_validate(doc, strlen(doc), KQ_JSCAN_JANSSON, NULL, NULL), KQ_EPARSE);
    assert_int_equal(kq_jscan_validate(doc, strlen(doc), 0, NULL, NULL), 0);
}

/* jansson's limit: at most 2048 nested values, a scalar counting as one. */
static void test_depth(void **state)
{
    (void)state;
    size_t n = KQ_JSCAN_MAX_DEPTH + 1;
    char *b = malloc(2 * n + 1);
    assert_non_null(b);
    for (size_t d = KQ_JSCAN_MAX_DEPTH - 1; d <= KQ_JSCAN_MAX_DEPTH + 1; d++) {
        memset(b, '[', d);
        memset(b + d, ']', d);
        int want = d <= KQ_JSCAN_MAX_DEPTH ? 0 : KQ_EPARSE;
        assert_int_equal(kq_jscan_validate(b, 2 * d, 0, NULL, NULL), want);
        assert_int_equal(jansson_accepts(b, 2 * d), want == 0);
        /* a scalar inside d arrays is one level deeper */
        memset(b, '[', d);
        b[d] = '1';
        memset(b + d + 1, ']', d);
        want = d + 1 <= KQ_JSCAN_MAX_DEPTH ? 0 : KQ_EPARSE;
        assert_int_equal(kq_jscan_validate(b, 2 * d + 1, 0, NULL, NULL), want);
        assert_int_equal(jansson_accepts(b, 2 * d + 1), want == 0);
    }
    /* the same through objects */
    kq_jscan_error_t e;
    char *o = malloc(8 * n + 8);
    assert_non_null(o);
    size_t len = 0;
    for (size_t i = 0; i < KQ_JSCAN_MAX_DEPTH; i++)
        len += (size_t)sprintf(o + len, "{\"a\":");
    o[len++] = '1';
    memset(o + len, '}', KQ_JSCAN_MAX_DEPTH);
    len += KQ_JSCAN_MAX_DEPTH;
    assert_int_equal(kq_jscan_validate(o, len, 0, NULL, &e), KQ_EPARSE);
    assert_non_null(strstr(e.text, "deep"));
    assert_int_equal(kq_jscan_object(o, len, 0, NULL, NULL, &e), KQ_EPARSE);
    free(o);
    free(b);
}

static void test_error_position(void **state)
{
    (void)state;
    kq_jscan_error_t e;
    static const char text[] = "{\n  \"a\": [1, 2],\n  \"\xc3\xa9t\xc3\xa9\": tru\n}";
    assert_int_equal(kq_jscan_validate(text, strlen(text), 0, NULL, &e), KQ_EPARSE);
    assert_int_equal(e.line, 3);
    assert_int_equal(e.column, 10); /* two-byte characters count once */
    assert_int_equal(e.offset, (size_t)(strstr(text, "tru") - text));
    assert_non_null(strstr(e.text, "a value expected"));

    assert_int_equal(kq_jscan_validate(S("\"abc"), 0, NULL, &e), KQ_EPARSE);
    assert_int_equal(e.offset, 4);
    assert_non_null(strstr(e.text, "unterminated"));
    assert_int_equal(kq_jscan_validate(S("[\"\\q\"]"), 0, NULL, &e), KQ_EPARSE);
    assert_int_equal(e.offset, 2);
    assert_non_null(strstr(e.text, "'q'"));
    assert_int_equal(kq_jscan_validate(S("[1,\n\"a\x01\"]"), 0, NULL, &e), KQ_EPARSE);
    assert_int_equal(e.line, 2);
    assert_int_equal(e.column, 3);
    assert_non_null(strstr(e.text, "control character 0x01"));
}

/* ------------------------------------------------------------------ spans */

static void test_value_spans(void **state)
{
    (void)state;
    static const char text[] = "  [ \"a\", {\"k\": [1]}, 2.5e1, true, \"b\\n\" ]  ";
    kq_jvalue_t v;
    assert_int_equal(kq_jscan_validate(text, strlen(text), 0, &v, NULL), 0);
    assert_int_equal(v.type, KQ_JARRAY);
    assert_ptr_equal(v.ptr, text + 2);
    assert_int_equal(v.len, strlen("[ \"a\", {\"k\": [1]}, 2.5e1, true, \"b\\n\" ]"));
    assert_int_equal(v.count, 5);
    assert_int_equal(v.elem_types, KQ_JSTRING | KQ_JOBJECT | KQ_JNUMBER | KQ_JTRUE);

    assert_int_equal(kq_jscan_validate(S("\"a\\\"b\""), 0, &v, NULL), 0);
    assert_true(v.escaped);
    assert_int_equal(v.len, 6);
    assert_int_equal(kq_jscan_validate(S("[]"), 0, &v, NULL), 0);
    assert_int_equal(v.count, 0);
    assert_int_equal(v.elem_types, 0);
    assert_int_equal(kq_jscan_validate(S("[\"x\",\"y\"]"), 0, &v, NULL), 0);
    assert_int_equal(v.elem_types, KQ_JSTRING);
    assert_int_equal(v.count, 2);
}

typedef struct seen {
    int n;
    char keys[8][16];
    kq_jvalue_t values[8];
} seen_t;

static int record(void *ctx, const kq_jmember_t *m)
{
    seen_t *s = ctx;
    if (s->n >= 8)
        return 99;
    size_t k = kq_jscan_str_decode(&m->key, s->keys[s->n]);
    s->keys[s->n][k] = '\0';
    s->values[s->n++] = m->value;
    return 0;
}

static void test_object_members(void **state)
{
    (void)state;
    static const char text[] =
        "{ \"Pod\" : {\"metadata\":{\"name\":\"p\"}} , \"Nodes\":null,\"NodeNames\":[\"n1\",\"n\\u0032\"],"
        "\"x\\u0041\":-1 }";
    seen_t s = {0};
    assert_int_equal(kq_jscan_object(text, strlen(text), KQ_JSCAN_JANSSON, record, &s, NULL), 0);
    assert_int_equal(s.n, 4);
    assert_string_equal(s.keys[0], "Pod");
    assert_int_equal(s.values[0].type, KQ_JOBJECT);
    assert_int_equal(s.values[0].len, strlen("{\"metadata\":{\"name\":\"p\"}}"));
    assert_memory_equal(s.values[0].ptr, "{\"metadata\":{\"name\":\"p\"}}", s.values[0].len);
    assert_int_equal(s.values[0].count, 1);
    assert_string_equal(s.keys[1], "Nodes");
    assert_int_equal(s.values[1].type, KQ_JNULL);
    assert_memory_equal(s.values[1].ptr, "null", 4);
    assert_string_equal(s.keys[2], "NodeNames");
    assert_int_equal(s.values[2].type, KQ_JARRAY);
    assert_int_equal(s.values[2].count, 2);
    assert_int_equal(s.values[2].elem_types, KQ_JSTRING);
    assert_string_equal(s.keys[3], "xA"); /* decoded */
    assert_int_equal(s.values[3].type, KQ_JNUMBER);
    assert_int_equal(s.values[3].len, 2);

    /* the callback can stop the scan */
    static const char many[] = "{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9}";
    seen_t full = {0};
    assert_int_equal(kq_jscan_object(many, strlen(many), 0, record, &full, NULL), 99);
    assert_int_equal(full.n, 8);

    /* not an object: KQ_EINVAL when valid JSON, KQ_EPARSE when not */
    kq_jscan_error_t e;
    assert_int_equal(kq_jscan_object(S("[1,2]"), 0, NULL, NULL, &e), KQ_EINVAL);
    assert_non_null(strstr(e.text, "object"));
    assert_non_null(strstr(e.text, "array"));
    assert_int_equal(kq_jscan_object(S(" null "), 0, NULL, NULL, &e), KQ_EINVAL);
    assert_int_equal(kq_jscan_object(S("[1,"), 0, NULL, NULL, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_object(S(""), 0, NULL, NULL, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_object(NULL, 0, 0, NULL, NULL, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_object(S("{}"), 0, NULL, NULL, &e), 0);
    assert_int_equal(kq_jscan_object(S(" { } "), 0, NULL, NULL, &e), 0);
    assert_int_equal(kq_jscan_object(S("{} x"), 0, NULL, NULL, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_object(S("{\"a\":1,}"), 0, NULL, NULL, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_object(S("{\"a\":1 \"b\":2}"), 0, NULL, NULL, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_object(S("{\"a\" 1}"), 0, NULL, NULL, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_object(S("{\"a\":}"), 0, NULL, NULL, &e), KQ_EPARSE);
    /* members before a syntax error were reported, but the scan fails */
    seen_t partial = {0};
    assert_int_equal(kq_jscan_object(S("{\"a\":1,\"b\":[}"), 0, record, &partial, &e), KQ_EPARSE);
    assert_int_equal(partial.n, 1);
}

static void test_object_find(void **state)
{
    (void)state;
    static const char *const keys[] = {"Pod", "Nodes", "NodeNames"};
    kq_jvalue_t v[3];
    /* the last of repeated names wins (jansson does the same); escapes are decoded;
     * names are case-sensitive */
    static const char text[] = "{\"Pod\":1,\"pod\":{},\"P\\u006fd\":[true],\"NODES\":{},\"NodeNames\":null}";
    assert_int_equal(kq_jscan_object_find(text, strlen(text), 0, keys, 3, v, NULL), 0);
    assert_int_equal(v[0].type, KQ_JARRAY);
    assert_memory_equal(v[0].ptr, "[true]", 6);
    assert_int_equal(v[1].type, KQ_JNONE);
    assert_null(v[1].ptr);
    assert_int_equal(v[2].type, KQ_JNULL);

    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    assert_true(json_is_array(json_object_get(j, "Pod")));
    json_decref(j);

    /* on failure the outputs are untouched */
    v[0].type = KQ_JTRUE;
    assert_int_equal(kq_jscan_object_find(S("{\"Pod\":1"), 0, keys, 3, v, NULL), KQ_EPARSE);
    assert_int_equal(v[0].type, KQ_JTRUE);
    static const char *const too_many[17] = {"a"};
    kq_jvalue_t w[17];
    assert_int_equal(kq_jscan_object_find(S("{}"), 0, too_many, 17, w, NULL), KQ_EINVAL);
}

/* ------------------------------------------------------------------ iteration */

static void test_iter_strings(void **state)
{
    (void)state;
    static const char text[] = " [ \"node-a\" , \"q\\\"d\",\"\\u00e9\",\"\"] ";
    kq_jscan_iter_t it;
    kq_jscan_error_t e;
    kq_jstr_t s;
    assert_int_equal(kq_jscan_iter_begin(&it, text, strlen(text), KQ_JSCAN_JANSSON, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 1);
    assert_int_equal(s.len, 6);
    assert_memory_equal(s.ptr, "node-a", 6);
    assert_false(s.escaped);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 1);
    assert_int_equal(s.len, 4);
    assert_memory_equal(s.ptr, "q\\\"d", 4);
    assert_true(s.escaped);
    assert_true(kq_jscan_str_equal(&s, "q\"d"));
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 1);
    assert_true(s.escaped);
    char buf[16];
    assert_int_equal(kq_jscan_str_decode(&s, buf), 2);
    assert_memory_equal(buf, "\xc3\xa9", 2);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 1);
    assert_int_equal(s.len, 0);
    assert_int_equal(it.index, 4);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 0);

    /* empty */
    assert_int_equal(kq_jscan_iter_begin(&it, S(" [ ] "), 0, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 0);

    /* a number in the middle: KQ_EINVAL naming the element, then every call fails */
    assert_int_equal(kq_jscan_iter_begin(&it, S("[\"a\",7,\"b\"]"), 0, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 1);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), KQ_EINVAL);
    assert_non_null(strstr(e.text, "element 1"));
    assert_int_equal(e.offset, 5);
    assert_true(kq_jscan_iter_next_string(&it, &s, &e) < 0);

    /* malformed: a bad string, a missing comma, trailing text, not an array */
    assert_int_equal(kq_jscan_iter_begin(&it, S("[\"a\\u12\"]"), 0, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_iter_begin(&it, S("[\"a\" \"b\"]"), 0, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_iter_begin(&it, S("[\"a\",]"), 0, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), 1);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_iter_begin(&it, S("[\"a\"] x"), 0, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_iter_begin(&it, S("[] x"), 0, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_iter_begin(&it, S("{\"a\":1}"), 0, &e), KQ_EINVAL);
    assert_int_equal(kq_jscan_iter_begin(&it, S("[1"), 0, &e), 0); /* elements are checked as they come */
    kq_jvalue_t v;
    assert_int_equal(kq_jscan_iter_next(&it, &v, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_iter_begin(&it, S("["), 0, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_iter_begin(&it, S("[\"\\u0000\"]"), KQ_JSCAN_NO_NUL, &e), 0);
    assert_int_equal(kq_jscan_iter_next_string(&it, &s, &e), KQ_EPARSE);
}

static void test_iter_values(void **state)
{
    (void)state;
    static const char text[] = "[{\"metadata\":{\"name\":\"n1\"}}, [1,2], null]";
    kq_jscan_iter_t it;
    kq_jvalue_t v;
    assert_int_equal(kq_jscan_iter_begin(&it, text, strlen(text), 0, NULL), 0);
    assert_int_equal(kq_jscan_iter_next(&it, &v, NULL), 1);
    assert_int_equal(v.type, KQ_JOBJECT);
    assert_int_equal(v.len, strlen("{\"metadata\":{\"name\":\"n1\"}}"));
    assert_int_equal(kq_jscan_iter_next(&it, &v, NULL), 1);
    assert_int_equal(v.type, KQ_JARRAY);
    assert_int_equal(v.count, 2);
    assert_int_equal(kq_jscan_iter_next(&it, &v, NULL), 1);
    assert_int_equal(v.type, KQ_JNULL);
    assert_int_equal(kq_jscan_iter_next(&it, &v, NULL), 0);

    assert_int_equal(kq_jscan_iter_begin(&it, S("[1,{]"), 0, NULL), 0);
    assert_int_equal(kq_jscan_iter_next(&it, &v, NULL), 1);
    assert_int_equal(kq_jscan_iter_next(&it, &v, NULL), KQ_EPARSE);
    /* never begun */
    kq_jscan_iter_t zero = {0};
    assert_true(kq_jscan_iter_next(&zero, &v, NULL) < 0);
}

/* ------------------------------------------------------------------ strings */

static void test_decode(void **state)
{
    (void)state;
    static const struct {
        const char *raw, *want;
        size_t want_len;
    } cases[] = {
        {"plain", "plain", 5},
        {"\\\"\\\\\\/\\b\\f\\n\\r\\t", "\"\\/\b\f\n\r\t", 8},
        {"\\u0041\\u00e9\\u20AC", "A\xc3\xa9\xe2\x82\xac", 6},
        {"\\ud83d\\ude00!", "\xf0\x9f\x98\x80!", 5},
        {"a\\u0000b", "a\0b", 3},
        {"\xc3\xa9", "\xc3\xa9", 2},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kq_jstr_t s = {.ptr = cases[i].raw, .len = strlen(cases[i].raw), .escaped = strchr(cases[i].raw, '\\') != NULL};
        char out[64];
        size_t n = kq_jscan_str_decode(&s, out);
        assert_int_equal(n, cases[i].want_len);
        assert_memory_equal(out, cases[i].want, n);
        if (memchr(cases[i].want, '\0', cases[i].want_len) == NULL)
            assert_true(kq_jscan_str_equal(&s, cases[i].want));
    }
    kq_jstr_t s = {.ptr = "a\\u0000b", .len = 8, .escaped = true};
    assert_false(kq_jscan_str_equal(&s, "a"));
    assert_false(kq_jscan_str_equal(&s, "a b"));
    kq_jstr_t p = {.ptr = "P\\u006fd", .len = 8, .escaped = true};
    assert_true(kq_jscan_str_equal(&p, "Pod"));
    assert_false(kq_jscan_str_equal(&p, "Po"));
    assert_false(kq_jscan_str_equal(&p, "Pods"));
    assert_false(kq_jscan_str_equal(&p, "pod"));
    kq_jstr_t plain = {.ptr = "Nodes", .len = 5};
    assert_true(kq_jscan_str_equal(&plain, "Nodes"));
    assert_false(kq_jscan_str_equal(&plain, "Node"));
    assert_false(kq_jscan_str_equal(&plain, "NodeNames"));
    /* text that never went through the scanner is read within bounds */
    kq_jstr_t broken = {.ptr = "x\\u12", .len = 5, .escaped = true};
    char out[8];
    assert_int_equal(kq_jscan_str_decode(&broken, out), 5);
    assert_memory_equal(out, "x\\u12", 5);
    kq_jstr_t tail = {.ptr = "x\\", .len = 2, .escaped = true};
    assert_int_equal(kq_jscan_str_decode(&tail, out), 2);
}

/* kq_jscan_json builds the tree jansson would, from the same texts. */
static void test_json_tree(void **state)
{
    (void)state;
    static const char text[] =
        "{\"a\":[1,-0,2.5,1e2,-9223372036854775808,true,false,null],\"s\":\"x\\u00e9\\n\","
        "\"o\":{\"k\":{}},\"a\":\"last\",\"e\":[]}";
    json_t *j = NULL;
    assert_int_equal(kq_jscan_json(text, strlen(text), &j, NULL), 0);
    assert_true(json_is_object(j));
    assert_int_equal(json_object_size(j), 4);
    assert_string_equal(json_string_value(json_object_get(j, "a")), "last"); /* last duplicate wins */
    assert_string_equal(json_string_value(json_object_get(j, "s")), "x\xc3\xa9\n");
    assert_true(json_is_object(json_object_get(json_object_get(j, "o"), "k")));
    assert_int_equal(json_array_size(json_object_get(j, "e")), 0);
    json_t *want = json_loads(text, 0, NULL);
    assert_true(json_equal(j, want));
    json_decref(want);
    json_decref(j);

    static const char nums[] = "[1,-0,2.5,1e2,-9223372036854775808,9223372036854775807,0.1e-5]";
    assert_int_equal(kq_jscan_json(nums, strlen(nums), &j, NULL), 0);
    assert_true(json_is_integer(json_array_get(j, 0)));
    assert_int_equal(json_integer_value(json_array_get(j, 1)), 0);
    assert_true(json_is_integer(json_array_get(j, 1)));
    assert_true(json_is_real(json_array_get(j, 2)));
    assert_true(json_real_value(json_array_get(j, 3)) == 100.0);
    assert_true(json_is_real(json_array_get(j, 3)));
    assert_true(json_integer_value(json_array_get(j, 4)) == INT64_MIN);
    assert_true(json_integer_value(json_array_get(j, 5)) == INT64_MAX);
    assert_true(json_real_value(json_array_get(j, 6)) == 0.1e-5);
    json_decref(j);

    /* scalars, a long escaped string, and failures leaving *out untouched */
    assert_int_equal(kq_jscan_json(S(" \"\\ud83d\\ude00\" "), &j, NULL), 0);
    assert_string_equal(json_string_value(j), "\xf0\x9f\x98\x80");
    json_decref(j);
    char big[700];
    memset(big, 'a', sizeof(big));
    big[0] = '"';
    memcpy(big + 300, "\\n", 2);
    big[sizeof(big) - 1] = '"';
    assert_int_equal(kq_jscan_json(big, sizeof(big), &j, NULL), 0);
    assert_int_equal(json_string_length(j), sizeof(big) - 3);
    assert_int_equal(json_string_value(j)[299], '\n');
    json_decref(j);
    json_t *sentinel = json_true();
    j = sentinel;
    kq_jscan_error_t e;
    assert_int_equal(kq_jscan_json(S("{\"a\":[1,2}"), &j, &e), KQ_EPARSE);
    assert_ptr_equal(j, sentinel);
    assert_int_equal(kq_jscan_json(S("\"\\u0000\""), &j, &e), KQ_EPARSE);
    assert_int_equal(kq_jscan_json(S("1e400"), &j, &e), KQ_EPARSE);
    assert_ptr_equal(j, sentinel);
    /* deep nesting (more open containers than the builder's first stack) */
    char deep[2 * 100 + 1];
    memset(deep, '[', 100);
    deep[100] = '7';
    memset(deep + 101, ']', 100);
    assert_int_equal(kq_jscan_json(deep, sizeof(deep), &j, NULL), 0);
    json_t *want_deep = json_loadb(deep, sizeof(deep), 0, NULL);
    assert_true(json_equal(j, want_deep));
    json_decref(want_deep);
    json_decref(j);
}

static void test_json_filtered(void **state)
{
    (void)state;
    static const kq_jfilter_t ctr[] = {{"name", NULL}, {"resources", NULL}, {NULL, NULL}};
    static const kq_jfilter_t meta[] = {{"uid", NULL}, {"labels", NULL}, {NULL, NULL}};
    static const kq_jfilter_t keep[] = {
        {"metadata", meta}, {"containers", ctr}, {"n\xc3\xa9", NULL}, {"deep", ctr}, {NULL, NULL}};
    /* dropped members hold every kind of value (and a deep one), kept ones are whole or
     * filtered; an escaped member name matches its decoded form; arrays of objects are
     * filtered per element, arrays of arrays pass the filter down */
    static const char text[] =
        "{\"metadata\":{\"uid\":\"u1\",\"managedFields\":[{\"f\":{\"g\":[1,2,{\"h\":null}]}}],"
        "\"labels\":{\"a\":\"b\",\"c\":{\"d\":1}},\"name\":\"p\"},"
        "\"spec\":{\"x\":[[[]]],\"y\":\"s\"},\"big\":[{},[],\"t\",1.5,true,false,null],"
        "\"containers\":[{\"name\":\"c\",\"image\":\"i\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}},"
        "{\"env\":[{\"name\":\"E\"}]},\"scalar\",[{\"name\":\"n\",\"x\":1}]],"
        "\"n\\u00e9\":[1,{\"z\":2}],\"deep\":[[{\"name\":\"d\",\"drop\":{}}]],\"tail\":{\"k\":[1]}}";
    json_t *j = NULL;
    assert_int_equal(kq_jscan_json_filtered(text, strlen(text), keep, &j, NULL), 0);
    json_t *want = json_loads(
        "{\"metadata\":{\"uid\":\"u1\",\"labels\":{\"a\":\"b\",\"c\":{\"d\":1}}},"
        "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}},{},\"scalar\","
        "[{\"name\":\"n\"}]],\"n\xc3\xa9\":[1,{\"z\":2}],\"deep\":[[{\"name\":\"d\"}]]}",
        0, NULL);
    assert_non_null(want);
    assert_true(json_equal(j, want));
    json_decref(want);
    json_decref(j);

    /* NULL keeps everything; a scalar document is built whatever the filter */
    assert_int_equal(kq_jscan_json_filtered(text, strlen(text), NULL, &j, NULL), 0);
    json_t *all = json_loads(text, 0, NULL);
    assert_true(json_equal(j, all));
    json_decref(all);
    json_decref(j);
    assert_int_equal(kq_jscan_json_filtered(S("7"), keep, &j, NULL), 0);
    assert_int_equal(json_integer_value(j), 7);
    json_decref(j);

    /* an error inside a member that is not kept is still an error, *out untouched */
    json_t *sentinel = json_true();
    j = sentinel;
    kq_jscan_error_t e;
    assert_int_equal(kq_jscan_json_filtered(S("{\"spec\":{\"x\":[1,}}"), keep, &j, &e), KQ_EPARSE);
    assert_ptr_equal(j, sentinel);
    assert_int_equal(kq_jscan_json_filtered(S("{\"spec\":\"\\u0000\",\"metadata\":{}}"), keep, &j, &e),
                     KQ_EPARSE);
    assert_ptr_equal(j, sentinel);

    /* iterating an array and building each element, filtered, in the same pass */
    static const char list[] = " [ {\"metadata\":{\"uid\":\"a\",\"x\":1}} , 5, {\"spec\":{}} ,[{\"uid\":1}] ] ";
    const char *want_items[] = {"{\"metadata\":{\"uid\":\"a\"}}", "5", "{}", "[{}]"};
    kq_jscan_iter_t it;
    kq_jvalue_t v;
    size_t count = 0;
    int more;
    assert_int_equal(kq_jscan_iter_begin(&it, list, strlen(list), KQ_JSCAN_JANSSON, NULL), 0);
    while ((more = kq_jscan_iter_next_json(&it, keep, &v, &j, NULL)) == 1) {
        assert_true(count < 4);
        json_t *w = json_loads(want_items[count], JSON_DECODE_ANY, NULL);
        assert_true(json_equal(j, w));
        assert_true(v.ptr >= list && v.ptr + v.len <= list + strlen(list));
        json_decref(w);
        json_decref(j);
        count++;
    }
    assert_int_equal(more, 0);
    assert_int_equal(count, 4);
    /* a bad element fails the iteration; what was built of it is released (ASan) */
    static const char badlist[] = "[{\"metadata\":{\"uid\":\"a\"}},{\"metadata\":{\"uid\":[1,}}]";
    assert_int_equal(kq_jscan_iter_begin(&it, badlist, strlen(badlist), KQ_JSCAN_JANSSON, NULL), 0);
    assert_int_equal(kq_jscan_iter_next_json(&it, keep, &v, &j, NULL), 1);
    json_decref(j);
    j = sentinel;
    assert_int_equal(kq_jscan_iter_next_json(&it, keep, &v, &j, &e), KQ_EPARSE);
    assert_ptr_equal(j, sentinel);
    assert_int_equal(kq_jscan_iter_next_json(&it, keep, &v, &j, NULL), KQ_EPARSE);

    /* deeper than the builder's first stack, inside a kept and inside a dropped member */
    char deep[16 + 2 * 100 + 2];
    size_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        n = (size_t)sprintf(deep, "{\"%s\":", pass == 0 ? "deep" : "gone");
        memset(deep + n, '[', 100);
        n += 100;
        memset(deep + n, ']', 100);
        n += 100;
        deep[n++] = '}';
        assert_int_equal(kq_jscan_json_filtered(deep, n, keep, &j, NULL), 0);
        json_t *w = pass == 0 ? json_loadb(deep, n, 0, NULL) : json_object();
        assert_true(json_equal(j, w));
        json_decref(w);
        json_decref(j);
    }
}

/* Parses text into doc and requires the same value as jansson's tree of want_text. */
static void doc_is(kq_jdoc_t *doc, const char *text, size_t len, const kq_jfilter_t *keep, const char *want_text)
{
    assert_int_equal(kq_jdoc_parse(doc, text, len, keep, NULL), 0);
    json_t *want = json_loads(want_text, JSON_DECODE_ANY, NULL);
    assert_non_null(want);
    assert_true(jdoc_shape_ok(kq_jdoc_root(doc)));
    assert_true(jdoc_equal_json(kq_jdoc_root(doc), want));
    json_decref(want);
}

static void test_doc(void **state)
{
    (void)state;
    kq_jdoc_t doc = {0};
    /* scalars, integers and reals told apart, escapes decoded and NUL-terminated */
    doc_is(&doc, S("[1,-2,1.5,1e2,true,false,null,\"a\\u00e9\\n\"]"), NULL,
           "[1,-2,1.5,1e2,true,false,null,\"a\\u00e9\\n\"]");
    const kq_jnode_t *r = kq_jdoc_root(&doc);
    assert_int_equal(r->count, 8);
    assert_int_equal(r->size, 9);
    assert_false(r[1].real);
    assert_int_equal(r[2].i, -2);
    assert_true(r[4].real);
    assert_true(r[4].d == 100.0);
    assert_string_equal(kq_jnode_string(&r[8]), "a\xc3\xa9\n");
    assert_int_equal(r[8].len, 4);
    assert_null(kq_jnode_string(&r[1]));

    /* nested: next sibling is node + size; lookups by name; absent and wrong-type lookups */
    doc_is(&doc, S("{\"a\":{\"b\":[1,{\"c\":\"d\"}],\"e\":{}},\"f\":\"g\"}"), NULL,
           "{\"a\":{\"b\":[1,{\"c\":\"d\"}],\"e\":{}},\"f\":\"g\"}");
    r = kq_jdoc_root(&doc);
    const kq_jnode_t *a = kq_jnode_get(r, "a");
    assert_ptr_equal(kq_jnode_next(r, a), kq_jnode_get(r, "f"));
    assert_string_equal(kq_jnode_string(kq_jnode_get(r, "f")), "g");
    assert_string_equal(kq_jnode_string(kq_jnode_get(kq_jnode_next(kq_jnode_get(a, "b"),
                                                                    kq_jnode_first(kq_jnode_get(a, "b"))),
                                                     "c")),
                        "d");
    assert_null(kq_jnode_get(r, "zz"));
    assert_null(kq_jnode_get(kq_jnode_get(r, "f"), "x"));
    assert_null(kq_jnode_get(NULL, "x"));
    assert_null(kq_jnode_first(kq_jnode_get(a, "e")));
    assert_null(kq_jnode_first(kq_jnode_get(r, "f")));

    /* a repeated name: the last one counts (as in jansson), in small and large objects */
    doc_is(&doc, S("{\"x\":1,\"y\":{\"x\":5},\"x\":[2],\"z\":3,\"x\":\"last\"}"), NULL,
           "{\"x\":\"last\",\"y\":{\"x\":5},\"z\":3}");
    r = kq_jdoc_root(&doc);
    assert_int_equal(r->count, 3);
    assert_string_equal(kq_jnode_string(kq_jnode_get(r, "x")), "last");
    size_t live = 0;
    for (const kq_jnode_t *c = kq_jnode_first(r); c != NULL; c = kq_jnode_next(r, c))
        live++;
    assert_int_equal(live, 3);
    char big[4096], want[4096];
    size_t n = 0, w = 0;
    n += (size_t)sprintf(big + n, "{");
    w += (size_t)sprintf(want + w, "{");
    for (int i = 0; i < 40; i++) /* k0..k39, then k0..k19 again with new values */
        n += (size_t)sprintf(big + n, "%s\"k%d\":%d", i ? "," : "", i, i);
    for (int i = 0; i < 20; i++)
        n += (size_t)sprintf(big + n, ",\"k%d\":[%d]", i, 100 + i);
    big[n++] = '}';
    for (int i = 0; i < 40; i++)
        w += (size_t)(i < 20 ? sprintf(want + w, "%s\"k%d\":[%d]", i ? "," : "", i, 100 + i)
                             : sprintf(want + w, ",\"k%d\":%d", i, i));
    want[w++] = '}';
    want[w] = '\0';
    doc_is(&doc, big, n, NULL, want);
    assert_int_equal(kq_jdoc_root(&doc)->count, 40);

    /* strings longer than the document's first buffer: names and values built before it
     * moved still read right */
    size_t blen = 20000;
    char *huge = malloc(blen + 64), *hwant = malloc(blen + 64);
    assert_non_null(huge);
    assert_non_null(hwant);
    n = (size_t)sprintf(huge, "{\"first\":\"v\",\"s\":\"");
    memset(huge + n, 'q', blen);
    n += blen;
    n += (size_t)sprintf(huge + n, "\",\"last\":\"w\"}");
    huge[n] = '\0';
    memcpy(hwant, huge, n + 1);
    kq_jdoc_t cold = {0};
    doc_is(&cold, huge, n, NULL, hwant);
    assert_string_equal(kq_jnode_string(kq_jnode_get(kq_jdoc_root(&cold), "first")), "v");
    /* trimming: kept while small, released when large, usable either way */
    kq_jdoc_trim(&cold, 1u << 20);
    assert_non_null(cold.text);
    kq_jdoc_trim(&cold, 1024);
    assert_null(cold.text);
    assert_null(cold.nodes);
    doc_is(&cold, S("{\"a\":[1]}"), NULL, "{\"a\":[1]}");
    kq_jdoc_free(&cold);
    free(huge);
    free(hwant);

    /* filtered exactly as kq_jscan_json_filtered filters */
    static const kq_jfilter_t sub[] = {{"uid", NULL}, {NULL, NULL}};
    static const kq_jfilter_t keep[] = {{"metadata", sub}, {"items", sub}, {NULL, NULL}};
    doc_is(&doc, S("{\"metadata\":{\"uid\":\"u\",\"x\":[1,{}]},\"spec\":{\"a\":1},"
                   "\"items\":[{\"uid\":1,\"y\":2},[{\"uid\":2,\"z\":[]}],7]}"),
           keep, "{\"metadata\":{\"uid\":\"u\"},\"items\":[{\"uid\":1},[{\"uid\":2}],7]}");

    /* a failure leaves the document empty; a later parse works */
    kq_jscan_error_t e;
    assert_int_equal(kq_jdoc_parse(&doc, S("{\"a\":[1,}"), NULL, &e), KQ_EPARSE);
    assert_null(kq_jdoc_root(&doc));
    assert_true(e.offset > 0 && e.text[0] != '\0');
    assert_int_equal(kq_jdoc_parse(&doc, S("{\"a\":\"\\u0000\"}"), NULL, NULL), KQ_EPARSE);
    doc_is(&doc, S("[]"), NULL, "[]");

    /* deep nesting: 2,047 arrays are fine (jansson's limit), with no recursion */
    char *deep = malloc(2 * 2047);
    assert_non_null(deep);
    memset(deep, '[', 2047);
    memset(deep + 2047, ']', 2047);
    assert_int_equal(kq_jdoc_parse(&doc, deep, 2 * 2047, NULL, NULL), 0);
    assert_int_equal(kq_jdoc_root(&doc)->size, 2047);
    assert_true(jdoc_shape_ok(kq_jdoc_root(&doc)));
    free(deep);

    /* array elements decoded one by one */
    static const char list[] = "[{\"uid\":\"a\",\"x\":1}, 5, {\"y\":{}}]";
    const char *want_items[] = {"{\"uid\":\"a\"}", "5", "{}"};
    kq_jscan_iter_t it;
    kq_jvalue_t v;
    size_t count = 0;
    int more;
    assert_int_equal(kq_jscan_iter_begin(&it, list, strlen(list), KQ_JSCAN_JANSSON, NULL), 0);
    while ((more = kq_jscan_iter_next_doc(&it, sub, &v, &doc, NULL)) == 1) {
        assert_true(count < 3);
        json_t *wj = json_loads(want_items[count], JSON_DECODE_ANY, NULL);
        assert_true(jdoc_equal_json(kq_jdoc_root(&doc), wj));
        json_decref(wj);
        count++;
    }
    assert_int_equal(more, 0);
    assert_int_equal(count, 3);
    static const char badlist[] = "[{\"uid\":\"a\"},{\"uid\":[1,}]";
    assert_int_equal(kq_jscan_iter_begin(&it, badlist, strlen(badlist), KQ_JSCAN_JANSSON, NULL), 0);
    assert_int_equal(kq_jscan_iter_next_doc(&it, sub, &v, &doc, NULL), 1);
    assert_int_equal(kq_jscan_iter_next_doc(&it, sub, &v, &doc, NULL), KQ_EPARSE);
    assert_null(kq_jdoc_root(&doc));
    kq_jdoc_free(&doc);
    kq_jdoc_free(&doc); /* freeing twice is harmless */
}

static void test_object_find_doc(void **state)
{
    (void)state;
    static const char *const keys[] = {"Nodes", "NodeNames"};
    static const kq_jfilter_t meta[] = {{"uid", NULL}, {NULL, NULL}};
    static const kq_jfilter_t keep[] = {{"metadata", meta}, {NULL, NULL}};
    kq_jdoc_t doc = {0};
    kq_jvalue_t v[2], w[2];
    /* the spans are kq_jscan_object_find's; the Pod is decoded as kq_jdoc_parse decodes it */
    static const char body[] = "{\"Pod\":{\"metadata\":{\"uid\":\"u1\",\"name\":\"p\"},\"spec\":{}},"
                               "\"Nodes\":null,\"NodeNames\":[\"a\",\"b\"]}";
    assert_int_equal(kq_jscan_object_find_doc(S(body), keys, 2, v, "Pod", keep, &doc, NULL), 0);
    assert_int_equal(kq_jscan_object_find(S(body), KQ_JSCAN_JANSSON, keys, 2, w, NULL), 0);
    for (int i = 0; i < 2; i++) {
        assert_ptr_equal(v[i].ptr, w[i].ptr);
        assert_int_equal(v[i].len, w[i].len);
        assert_int_equal(v[i].type, w[i].type);
    }
    assert_int_equal(v[1].count, 2);
    json_t *want = json_loads("{\"metadata\":{\"uid\":\"u1\"}}", 0, NULL);
    assert_true(jdoc_equal_json(kq_jdoc_root(&doc), want));
    json_decref(want);
    /* a repeated member: the last one is decoded */
    static const char twice[] = "{\"Pod\":{\"metadata\":{\"uid\":\"old\"}},\"Pod\":{\"metadata\":{\"uid\":\"new\"}}}";
    assert_int_equal(kq_jscan_object_find_doc(S(twice), keys, 2, v, "Pod", keep, &doc, NULL), 0);
    assert_string_equal(kq_jnode_string(kq_jnode_get(kq_jnode_get(kq_jdoc_root(&doc), "metadata"), "uid")), "new");
    /* absent: an empty document */
    assert_int_equal(kq_jscan_object_find_doc(S("{\"NodeNames\":[]}"), keys, 2, v, "Pod", keep, &doc, NULL), 0);
    assert_null(kq_jdoc_root(&doc));
    assert_int_equal(v[1].type, KQ_JARRAY);
    /* an error after the Pod, or inside it: failure, an empty document, values untouched */
    kq_jvalue_t sentinel = {.type = KQ_JNULL};
    v[0] = v[1] = sentinel;
    kq_jscan_error_t e;
    assert_int_equal(kq_jscan_object_find_doc(S("{\"Pod\":{\"metadata\":{}},\"NodeNames\":[1,]}"), keys, 2, v,
                                              "Pod", keep, &doc, &e),
                     KQ_EPARSE);
    assert_null(kq_jdoc_root(&doc));
    assert_int_equal(v[0].type, KQ_JNULL);
    assert_int_equal(kq_jscan_object_find_doc(S("{\"Pod\":{\"metadata\":{\"uid\":\"\\u0000\"}}}"), keys, 2, v,
                                              "Pod", keep, &doc, &e),
                     KQ_EPARSE);
    assert_null(kq_jdoc_root(&doc));
    /* not an object */
    assert_int_equal(kq_jscan_object_find_doc(S("[1]"), keys, 2, v, "Pod", keep, &doc, &e), KQ_EINVAL);
    kq_jdoc_free(&doc);
}

static void test_type_names(void **state)
{
    (void)state;
    assert_string_equal(kq_jscan_type_name(KQ_JOBJECT), "object");
    assert_string_equal(kq_jscan_type_name(KQ_JNULL), "null");
    assert_string_equal(kq_jscan_type_name(KQ_JNONE), "none");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_documents),     cmocka_unit_test(test_jansson_flags),
        cmocka_unit_test(test_long_reals),    cmocka_unit_test(test_depth),
        cmocka_unit_test(test_error_position), cmocka_unit_test(test_value_spans),
        cmocka_unit_test(test_object_members), cmocka_unit_test(test_object_find),
        cmocka_unit_test(test_iter_strings),  cmocka_unit_test(test_iter_values),
        cmocka_unit_test(test_decode),        cmocka_unit_test(test_json_tree),     cmocka_unit_test(test_json_filtered),
        cmocka_unit_test(test_doc),           cmocka_unit_test(test_object_find_doc),
        cmocka_unit_test(test_type_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
