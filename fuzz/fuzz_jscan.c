/* libFuzzer target for jscan (src/kube/jscan.c), the validating JSON scanner that the
 * extender's filter trusts instead of jansson: it must never crash, and it must accept
 * exactly what jansson accepts. The input is the JSON text, as is.
 *
 * The equivalence enforced (any mismatch aborts), jansson 2.14, LC_NUMERIC "C", for
 * every input that holds no raw NUL byte:
 *   1. kq_jscan_validate(text, KQ_JSCAN_JANSSON) == 0  <=>  json_loadb(text,
 *      JSON_DECODE_ANY) != NULL. Duplicate keys are valid for both, and the flag
 *      KQ_JSCAN_JANSSON makes jscan reject what jansson rejects beyond RFC 8259
 *      (\u0000 in strings, integers outside int64, reals overflowing a double). The
 *      nesting limit is the same (2048 values deep, scalars counting).
 *   0. Inputs with a raw NUL byte: jscan rejects them all (a NUL is neither whitespace
 *      nor allowed raw in a string). jansson does too, except that it silently drops a
 *      NUL directly after a number or a literal ("[1\0]" and "true\0" load): its
 *      one-byte lookahead buffer uses NUL as "empty". Only rejection is checked there.
 *   2. Without flags jscan accepts a superset of (1).
 *   3. kq_jscan_object(text, KQ_JSCAN_JANSSON) == 0  <=>  json_loadb(text, 0) is an
 *      object; KQ_EINVAL  <=>  jansson accepts the text and it is not an object.
 *   4. The reported type of the whole text is jansson's; an array's count is jansson's
 *      size, an object's count at least jansson's size (equal without duplicate keys),
 *      and elem_types the OR of the children's types.
 *   5. Every member of an object: its decoded name is a key of jansson's object, and for
 *      the last member of each name (jansson keeps the last) the value span, parsed by
 *      jansson on its own, is json_equal to jansson's value.
 *   6. Iterating an array yields exactly jansson's elements (spans parsed alone are
 *      json_equal to them); iterating strings succeeds exactly for arrays of strings
 *      and decodes each to jansson's bytes.
 *   7. A top-level string decodes to jansson's bytes, and kq_jscan_str_equal agrees.
 *   8. kq_jscan_json succeeds exactly when jansson does, with a json_equal tree (same
 *      types: integer vs real, same values, last duplicate key kept).
 *   9. kq_jscan_json_filtered with a fixed filter succeeds exactly when jansson does, and
 *      its tree equals jansson's tree pruned by the filter (pruned here, independently);
 *      so does each element kq_jscan_iter_next_json builds while iterating an array.
 *  10. kq_jdoc_parse, whole and filtered, succeeds exactly when jansson does; the document
 *      is well formed and the same value as jansson's tree (pruned for the filter), into
 *      a fresh document and into one reused from the previous input; so is each element
 *      kq_jscan_iter_next_doc decodes.
 *  11. kq_jscan_object_find_doc succeeds exactly when jansson finds an object, finds the
 *      same spans as kq_jscan_object_find, and decodes member "a" as jansson's value of
 *      "a" pruned by the filter (doc empty when "a" is absent or the text is not valid).
 *
 *   make build/fuzz/fuzz_jscan && build/fuzz/fuzz_jscan -max_total_time=60 fuzz/corpus/jscan
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/jdoc_check.h"

#include <jansson.h>

#include "kubequota/kube/jscan.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static kq_jtype_t jtype(const json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: return KQ_JOBJECT;
    case JSON_ARRAY: return KQ_JARRAY;
    case JSON_STRING: return KQ_JSTRING;
    case JSON_INTEGER:
    case JSON_REAL: return KQ_JNUMBER;
    case JSON_TRUE: return KQ_JTRUE;
    case JSON_FALSE: return KQ_JFALSE;
    default: return KQ_JNULL;
    }
}

/* A value span parsed on its own by jansson equals want. */
static void check_span(const kq_jvalue_t *v, const json_t *want)
{
    json_error_t e;
    json_t *j = json_loadb(v->ptr, v->len, JSON_DECODE_ANY, &e);
    CHECK(j != NULL);
    CHECK(json_equal(j, want));
    CHECK(jtype(j) == v->type);
    json_decref(j);
}

static void check_string(const kq_jstr_t *s, const char *want, size_t want_len)
{
    char *buf = malloc(s->len + 1);
    CHECK(buf != NULL);
    size_t n = kq_jscan_str_decode(s, buf);
    CHECK(n == want_len && memcmp(buf, want, n) == 0);
    buf[n] = '\0';
    if (memchr(want, '\0', want_len) == NULL)
        CHECK(kq_jscan_str_equal(s, buf));
    free(buf);
}

#define MAX_MEMBERS 64

typedef struct members {
    size_t n, total;
    kq_jmember_t m[MAX_MEMBERS];
} members_t;

static int collect(void *ctx, const kq_jmember_t *m)
{
    members_t *ms = ctx;
    ms->total++;
    if (ms->n < MAX_MEMBERS)
        ms->m[ms->n++] = *m;
    return 0;
}

static bool same_key(const kq_jstr_t *a, const kq_jstr_t *b)
{
    char *x = malloc(a->len + 1), *y = malloc(b->len + 1);
    CHECK(x != NULL && y != NULL);
    size_t nx = kq_jscan_str_decode(a, x), ny = kq_jscan_str_decode(b, y);
    bool same = nx == ny && memcmp(x, y, nx) == 0;
    free(x);
    free(y);
    return same;
}

static void check_object(const char *text, size_t len, const json_t *obj)
{
    members_t ms = {0};
    CHECK(kq_jscan_object(text, len, KQ_JSCAN_JANSSON, collect, &ms, NULL) == 0);
    for (size_t i = 0; i < ms.n; i++) {
        const kq_jstr_t *k = &ms.m[i].key;
        char *key = malloc(k->len + 1);
        CHECK(key != NULL);
        size_t n = kq_jscan_str_decode(k, key);
        const json_t *want = json_object_getn(obj, key, n);
        CHECK(want != NULL);
        bool last = true;
        for (size_t j = i + 1; j < ms.n && last; j++)
            last = !same_key(k, &ms.m[j].key);
        if (last && ms.total <= MAX_MEMBERS)
            check_span(&ms.m[i].value, want);
        free(key);
    }
}

/* The filter of check 9: names that short fuzz inputs produce, nested and repeated. */
static const kq_jfilter_t f_leaf[] = {{"a", NULL}, {"", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_mid[] = {{"b", f_leaf}, {"a", NULL}, {"\xc3\xa9", f_leaf}, {NULL, NULL}};
static const kq_jfilter_t f_top[] = {{"a", f_mid}, {"b", NULL}, {"c", f_top}, {NULL, NULL}};

/* jansson's value with what `keep` does not name removed (the reference for check 9). */
static json_t *prune(const json_t *v, const kq_jfilter_t *keep)
{
    if (keep == NULL)
        return json_deep_copy(v);
    if (json_is_array(v)) {
        json_t *out = json_array();
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) json_array_append_new(out, prune(e, keep));
        return out;
    }
    if (!json_is_object(v))
        return json_deep_copy(v);
    json_t *out = json_object();
    for (const kq_jfilter_t *f = keep; f->key != NULL; f++) {
        const json_t *m = json_object_get(v, f->key);
        if (m != NULL && json_object_get(out, f->key) == NULL)
            json_object_set_new(out, f->key, prune(m, f->sub));
    }
    return out;
}

static void check_array(const char *text, size_t len, const json_t *arr)
{
    kq_jscan_iter_t it;
    kq_jvalue_t v;
    size_t i = 0;
    int rc;
    CHECK(kq_jscan_iter_begin(&it, text, len, KQ_JSCAN_JANSSON, NULL) == 0);
    while ((rc = kq_jscan_iter_next(&it, &v, NULL)) == 1) {
        CHECK(i < json_array_size(arr));
        check_span(&v, json_array_get(arr, i));
        i++;
    }
    CHECK(rc == 0 && i == json_array_size(arr));
    /* 9: the same elements built in the same pass, filtered */
    json_t *b = NULL;
    i = 0;
    CHECK(kq_jscan_iter_begin(&it, text, len, KQ_JSCAN_JANSSON, NULL) == 0);
    while ((rc = kq_jscan_iter_next_json(&it, f_top, &v, &b, NULL)) == 1) {
        CHECK(i < json_array_size(arr));
        json_t *want = prune(json_array_get(arr, i), f_top);
        CHECK(json_equal(b, want));
        json_decref(want);
        json_decref(b);
        i++;
    }
    CHECK(rc == 0 && i == json_array_size(arr));
    /* 10: the same elements decoded into a document */
    kq_jdoc_t doc = {0};
    i = 0;
    CHECK(kq_jscan_iter_begin(&it, text, len, KQ_JSCAN_JANSSON, NULL) == 0);
    while ((rc = kq_jscan_iter_next_doc(&it, f_top, &v, &doc, NULL)) == 1) {
        CHECK(i < json_array_size(arr));
        json_t *want = prune(json_array_get(arr, i), f_top);
        CHECK(jdoc_shape_ok(kq_jdoc_root(&doc)) && jdoc_equal_json(kq_jdoc_root(&doc), want));
        json_decref(want);
        i++;
    }
    CHECK(rc == 0 && i == json_array_size(arr));
    kq_jdoc_free(&doc);

    bool all_strings = true;
    for (size_t j = 0; j < json_array_size(arr); j++)
        all_strings = all_strings && json_is_string(json_array_get(arr, j));
    kq_jstr_t s;
    i = 0;
    CHECK(kq_jscan_iter_begin(&it, text, len, KQ_JSCAN_JANSSON, NULL) == 0);
    while ((rc = kq_jscan_iter_next_string(&it, &s, NULL)) == 1) {
        const json_t *want = json_array_get(arr, i++);
        CHECK(json_is_string(want));
        check_string(&s, json_string_value(want), json_string_length(want));
    }
    CHECK(all_strings ? rc == 0 : rc == KQ_EINVAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    json_error_t e;
    json_t *any = json_loadb(text, size, JSON_DECODE_ANY, &e);

    kq_jvalue_t v;
    kq_jscan_error_t err;
    int rc = kq_jscan_validate(text, size, KQ_JSCAN_JANSSON, &v, &err);
    CHECK(rc != KQ_ENOMEM);
    if (memchr(text, '\0', size) != NULL) { /* 0 */
        CHECK(rc == KQ_EPARSE);
        json_t *j = NULL;
        CHECK(kq_jscan_json(text, size, &j, NULL) == KQ_EPARSE && j == NULL);
        CHECK(kq_jscan_validate(text, size, 0, NULL, NULL) == KQ_EPARSE);
        CHECK(kq_jscan_object(text, size, KQ_JSCAN_JANSSON, NULL, NULL, NULL) == KQ_EPARSE);
        json_decref(any);
        return 0;
    }
    CHECK((rc == 0) == (any != NULL)); /* 1 */
    json_t *built = NULL;
    int rcb = kq_jscan_json(text, size, &built, NULL); /* 8 */
    CHECK((rcb == 0) == (any != NULL));
    if (rcb == 0) {
        CHECK(json_equal(built, any));
        json_decref(built);
    }
    json_t *filtered = NULL;
    int rcf = kq_jscan_json_filtered(text, size, f_top, &filtered, NULL); /* 9 */
    CHECK((rcf == 0) == (any != NULL));
    if (rcf == 0) {
        json_t *want = prune(any, f_top);
        CHECK(json_equal(filtered, want));
        json_decref(want);
        json_decref(filtered);
    }
    /* 10: documents, fresh and reused (warm buffers from the last input) */
    static kq_jdoc_t warm;
    kq_jdoc_t fresh = {0};
    int rcd = kq_jdoc_parse(&fresh, text, size, NULL, NULL);
    int rcw = kq_jdoc_parse(&warm, text, size, f_top, NULL);
    CHECK((rcd == 0) == (any != NULL) && (rcw == 0) == (any != NULL));
    if (any != NULL) {
        CHECK(jdoc_shape_ok(kq_jdoc_root(&fresh)) && jdoc_equal_json(kq_jdoc_root(&fresh), any));
        json_t *want = prune(any, f_top);
        CHECK(jdoc_shape_ok(kq_jdoc_root(&warm)) && jdoc_equal_json(kq_jdoc_root(&warm), want));
        json_decref(want);
    } else {
        CHECK(kq_jdoc_root(&fresh) == NULL && kq_jdoc_root(&warm) == NULL);
    }
    kq_jdoc_free(&fresh);
    /* 11: one pass that finds members and decodes one of them */
    static const char *const fkeys[] = {"a", "b"};
    kq_jvalue_t fv[2], fw[2];
    int rf = kq_jscan_object_find(text, size, KQ_JSCAN_JANSSON, fkeys, 2, fv, NULL);
    int rfd = kq_jscan_object_find_doc(text, size, fkeys, 2, fw, "a", f_mid, &warm, NULL);
    CHECK(rf == rfd && (rfd == 0) == (any != NULL && json_is_object(any)));
    if (rfd == 0) {
        for (int i = 0; i < 2; i++)
            CHECK(fv[i].type == fw[i].type && fv[i].ptr == fw[i].ptr && fv[i].len == fw[i].len);
        const json_t *a = json_object_get(any, "a");
        if (a == NULL) {
            CHECK(kq_jdoc_root(&warm) == NULL);
        } else {
            json_t *want = prune(a, f_mid);
            CHECK(jdoc_shape_ok(kq_jdoc_root(&warm)) && jdoc_equal_json(kq_jdoc_root(&warm), want));
            json_decref(want);
        }
    } else {
        CHECK(kq_jdoc_root(&warm) == NULL);
    }
    if (rc != 0)
        CHECK(rc == KQ_EPARSE && err.offset <= size && err.line >= 1 && err.column >= 1 && err.text[0] != '\0');
    int rc0 = kq_jscan_validate(text, size, 0, NULL, NULL);
    if (rc == 0)
        CHECK(rc0 == 0); /* 2 */

    int rco = kq_jscan_object(text, size, KQ_JSCAN_JANSSON, NULL, NULL, NULL); /* 3 */
    CHECK((rco == 0) == (any != NULL && json_is_object(any)));
    CHECK((rco == KQ_EINVAL) == (any != NULL && !json_is_object(any)));

    if (any != NULL) {
        CHECK(v.type == jtype(any)); /* 4 */
        if (json_is_array(any)) {
            CHECK(v.count == json_array_size(any));
            unsigned types = 0;
            for (size_t i = 0; i < json_array_size(any); i++)
                types |= jtype(json_array_get(any, i));
            CHECK(v.elem_types == types);
            check_array(text, size, any); /* 6 */
        } else if (json_is_object(any)) {
            CHECK(v.count >= json_object_size(any));
            check_object(text, size, any); /* 5 */
        } else if (json_is_string(any)) {
            kq_jstr_t s = {.ptr = v.ptr + 1, .len = v.len - 2, .escaped = v.escaped};
            check_string(&s, json_string_value(any), json_string_length(any)); /* 7 */
        }
        check_span(&v, any);
    } else {
        /* Not JSON for jansson: iteration must fail somewhere, never crash. */
        kq_jscan_iter_t it;
        kq_jvalue_t ev;
        if (kq_jscan_iter_begin(&it, text, size, KQ_JSCAN_JANSSON, NULL) == 0) {
            int r;
            while ((r = kq_jscan_iter_next(&it, &ev, NULL)) == 1)
                ;
            CHECK(r < 0);
        }
    }
    json_decref(any);
    return 0;
}
