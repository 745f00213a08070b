/* libFuzzer target for the resource module's parsers of untrusted input:
 * kq_quantity_parse() for several resource names (each unit class), and
 * kq_resource_from_json() on whatever jansson makes of the input.
 *
 * Checked beyond "no crash": every accepted value is >= 0, formats and parses back to
 * the same value; the 64-bit shortcut and the exact path agree (code, value, reason);
 * both agree with an independent reference of Kubernetes' rounding (ref_parse below);
 * a whole number with a tiny fraction added reads one unit more; errors are
 * NUL-terminated and leave the output untouched; a set read from JSON survives
 * to_json -> from_json unchanged.
 *
 * Sets of any size (issue 15): the name limit is lifted, so JSON objects with many
 * names spill to the heap, and fuzz_many() builds two sets of up to 128 names each
 * from the input's bytes and checks add/add_check/sub/max/fill/min/fits/equal/copy/move
 * against a plain per-name array model (ASan checks the ownership of the heap arrays).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude fuzz/fuzz_quantity.c \
 *     src/engine/resource.c src/base/error.c src/base/log.c -ljansson -o /tmp/fuzz_quantity
 *   /tmp/fuzz_quantity -max_total_time=60 fuzz/corpus/quantity
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/base/log.h"
#include "kubequota/engine/resource.h"

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const names[] = {"cpu", "vcore", "memory", "hugepages-2Mi", "nvidia.com/gpu"};

static void check_round_trip(const char *name, int64_t v)
{
    char buf[64];
    size_t n = kq_quantity_format(name, v, buf, sizeof(buf));
    CHECK(n > 0 && n < sizeof(buf) && strlen(buf) == n);
    int64_t back = -1;
    char err[256];
    int rc = kq_quantity_parse(name, buf, &back, err, sizeof(err));
    if (rc != 0 || back != v) {
        fprintf(stderr, "%s: %lld formatted as \"%s\" read back rc=%d %lld (%s)\n", name, (long long)v,
                buf, rc, (long long)back, err);
        abort();
    }
}

/* ------------------------------------------------------------------------------
 * An independent reference of how Kubernetes reads a quantity (ParseQuantity, then
 * Value() for bytes and counts, MilliValue() for cpu), written from
 * kubernetes/apimachinery pkg/api/resource/quantity.go and suffix.go with plain
 * decimal-digit arithmetic: the digits are doubled p2 times for a binary suffix, the
 * decimal point moved by the exponent, and the integer part compared with INT64_MAX as
 * a string. It shares nothing with src/engine/resource.c but the answer. */

enum ref_kind { REF_SKIP, REF_OK, REF_ERR, REF_NEG, REF_BIG };

static enum ref_kind ref_parse(const char *name, const char *in, int64_t *out)
{
    bool milli = strcmp(name, "cpu") == 0 || strcmp(name, "vcore") == 0;
    size_t len = strlen(in);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)in[i] >= 0x80)
            return REF_SKIP; /* (Unicode white space is left to the unit tests) */
    const char *ws = " \t\n\v\f\r";
    while (len > 0 && strchr(ws, in[len - 1]) != NULL)
        len--;
    size_t b = strspn(in, ws);
    if (b >= len)
        return REF_ERR;
    char s[512];
    if (len - b >= sizeof(s))
        return REF_SKIP;
    memcpy(s, in + b, len - b);
    s[len - b] = '\0';

    const char *digits = "0123456789", *p = s;
    bool neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    const char *ip = p;
    size_t ni = strspn(p, digits), nf = 0;
    p += ni;
    const char *fp = p;
    if (*p == '.') {
        fp = ++p;
        nf = strspn(p, digits);
        p += nf;
    }
    const char *suf = p;
    p += strspn(p, "eEinumkKMGTP");
    if (*p == '+' || *p == '-')
        p++;
    p += strspn(p, digits);
    if (*p != '\0')
        return REF_ERR;

    static const struct {
        const char *s;
        int p10, p2;
    } tab[] = {{"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
               {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
               {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60}};
    long long p10 = 0;
    int p2 = -1;
    bool expo = false;
    for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++)
        if (strcmp(suf, tab[k].s) == 0) {
            p10 = tab[k].p10;
            p2 = tab[k].p2;
        }
    if (p2 < 0) {
        if ((suf[0] != 'e' && suf[0] != 'E') || suf[1] == '\0')
            return REF_ERR;
        const char *x = suf + 1;
        if (*x == '+' || *x == '-')
            x++;
        if (*x == '\0' || strspn(x, digits) != strlen(x))
            return REF_ERR;
        errno = 0;
        long long e = strtoll(suf + 1, NULL, 10);
        if (errno == ERANGE)
            return REF_ERR;
        p10 = (int32_t)(uint32_t)(unsigned long long)e; /* Kubernetes keeps an int32 */
        p2 = 0;
        expo = true;
    }
    if (ni == 0 && nf == 0) {
        if (expo && p10 < -9)
            return REF_ERR;
        *out = 0;
        return REF_OK;
    }
    if (p10 > 400 || p10 < -400)
        return REF_SKIP;

    /* the digit string D, most significant first, with room to double it 60 times */
    static char d[512 + 64];
    size_t n = 0;
    for (size_t k = 0; k < ni; k++)
        d[n++] = (char)(ip[k] - '0');
    for (size_t k = 0; k < nf; k++)
        d[n++] = (char)(fp[k] - '0');
    bool zero = true;
    for (size_t k = 0; k < n; k++)
        zero = zero && d[k] == 0;
    if (zero) {
        *out = 0;
        return REF_OK;
    }
    if (neg)
        return REF_NEG;
    for (int k = 0; k < p2; k++) { /* D *= 2 */
        int c = 0;
        for (size_t j = n; j-- > 0;) {
            int v = d[j] * 2 + c;
            d[j] = (char)(v % 10);
            c = v / 10;
        }
        if (c) {
            memmove(d + 1, d, n);
            d[0] = (char)c;
            n++;
        }
    }
    /* value = D * 10^t: the integer part is the first n + t digits */
    long long t = p10 - (long long)nf + (milli ? 3 : 0);
    long long nint = (long long)n + t;
    bool frac = false;
    for (long long k = nint < 0 ? 0 : nint; k < (long long)n; k++)
        frac = frac || d[k] != 0;
    char ints[1024];
    size_t m = 0;
    for (long long k = 0; k < nint; k++) {
        char c = k < (long long)n ? (char)('0' + d[k]) : '0';
        if (m == 0 && c == '0')
            continue;
        if (m + 1 >= sizeof(ints))
            return REF_SKIP;
        ints[m++] = c;
    }
    ints[m] = '\0';
    const char *max = "9223372036854775807";
    bool big = m > 19 || (m == 19 && strcmp(ints, max) > 0) || (m == 19 && frac && strcmp(ints, max) == 0);
    if (big) {
        if (suf[0] != '\0' && suf[1] == 'i' && !milli) { /* BinarySI: capped at 2^63-1 */
            *out = INT64_MAX;
            return REF_OK;
        }
        return REF_BIG;
    }
    *out = (m == 0 ? 0 : strtoll(ints, NULL, 10)) + (frac ? 1 : 0);
    return REF_OK;
}

static void check_reference(const char *name, const char *s, int rc, int64_t v, const char *err)
{
    int64_t want = -1;
    enum ref_kind k = ref_parse(name, s, &want);
    bool ok;
    switch (k) {
    case REF_SKIP:
        return;
    case REF_OK:
        ok = rc == 0 && v == want;
        break;
    case REF_NEG:
        ok = rc == KQ_ERANGE && strstr(err, "negative") != NULL;
        break;
    case REF_BIG:
        ok = rc == KQ_ERANGE && strstr(err, "too large") != NULL;
        break;
    default:
        ok = rc == KQ_EPARSE;
        break;
    }
    if (!ok) {
        fprintf(stderr, "%s \"%s\": rc=%d v=%lld (%s), reference kind %d value %lld\n", name, s, rc,
                (long long)v, err, (int)k, (long long)want);
        abort();
    }
}

static void fuzz_quantity(const char *s)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int64_t v = -7;
        char err[256];
        memset(err, 'x', sizeof(err));
        int rc = kq_quantity_parse(names[i], s, &v, err, sizeof(err));
        CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        int64_t ve = -7;
        char eerr[256];
        int rce = kq_quantity_parse_exact(names[i], s, &ve, eerr, sizeof(eerr));
        CHECK(rce == rc && ve == v && strcmp(eerr, err) == 0);
        check_reference(names[i], s, rc, v, err);
        /* rounding: a value read with a tiny fraction added rounds up by one unit */
        if (rc == 0 && v < INT64_MAX - 1 && strlen(s) < 200 && strspn(s, "0123456789") == strlen(s) && s[0] != '\0') {
            char up[256];
            snprintf(up, sizeof(up), "%s.000000000000000000001", s);
            int64_t vu = -1, vs = -1;
            CHECK(kq_quantity_parse(names[i], up, &vu, NULL, 0) == 0);
            CHECK(kq_quantity_parse(names[i], s, &vs, NULL, 0) == 0 && vu == vs + 1);
        }
        if (rc == 0) {
            CHECK(v >= 0);
            CHECK(err[0] == '\0');
            check_round_trip(names[i], v);
        } else {
            CHECK(rc == KQ_EPARSE || rc == KQ_ERANGE);
            CHECK(v == -7);
            CHECK(err[0] != '\0');
        }
    }
    /* the input as a resource name */
    int64_t v;
    (void)kq_quantity_parse(s, "1", &v, NULL, 0);
}

static void fuzz_json(const uint8_t *data, size_t size)
{
    json_error_t jerr;
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, &jerr);
    if (j == NULL)
        return;
    kq_resource_t r = KQ_RESOURCE_EMPTY, untouched = KQ_RESOURCE_EMPTY;
    char err[256];
    int rc = kq_resource_from_json(j, &r, err, sizeof(err));
    json_decref(j);
    if (rc != 0) {
        CHECK(rc == KQ_EPARSE || rc == KQ_ERANGE);
        CHECK(r.n == untouched.n);
        CHECK(strlen(err) > 0);
        return;
    }
    for (uint32_t i = 0; i < r.n; i++) {
        CHECK(KQ_RES_E(&r)[i].value >= 0);
        CHECK(kq_resource_name(KQ_RES_E(&r)[i].name) == KQ_RES_E(&r)[i].name);
        if (i > 0)
            CHECK(strcmp(KQ_RES_E(&r)[i - 1].name, KQ_RES_E(&r)[i].name) < 0);
        check_round_trip(KQ_RES_E(&r)[i].name, KQ_RES_E(&r)[i].value);
    }
    json_t *back = kq_resource_to_json(&r);
    CHECK(back != NULL);
    kq_resource_t r2 = KQ_RESOURCE_EMPTY;
    CHECK(kq_resource_from_json(back, &r2, err, sizeof(err)) == 0);
    json_decref(back);
    CHECK(kq_resource_equal(&r, &r2) && r.n == r2.n);

    /* set arithmetic on what was read */
    char buf[1024];
    size_t n = kq_resource_format(&r, buf, sizeof(buf));
    CHECK(n == strlen(buf) || n >= sizeof(buf));
    kq_resource_t sum = KQ_RESOURCE_EMPTY;
    CHECK(kq_resource_copy(&sum, &r) == 0);
    if (kq_resource_add(&sum, &r) == 0) {
        CHECK(kq_resource_fits_in(&r, &sum));
        CHECK(kq_resource_sub(&sum, &r));
        CHECK(kq_resource_equal(&sum, &r));
    } else {
        CHECK(kq_resource_equal(&sum, &r));
    }
    kq_resource_t m = KQ_RESOURCE_EMPTY;
    CHECK(kq_resource_min(&m, &r, &r2) == 0);
    CHECK(kq_resource_equal(&m, &r));
    CHECK(kq_resource_fits_in(&r, &r));
    kq_resource_free(&r);
    kq_resource_free(&r2);
    kq_resource_free(&sum);
    kq_resource_free(&m);
}

/* ------------------------------------------------------------ many names ---- */

#define FM 128 /* model names example.com/f000 .. f127 */

static const char *fname(int i)
{
    static const char *cache[FM];
    if (cache[i] == NULL) {
        char b[32];
        snprintf(b, sizeof(b), "example.com/f%03d", i);
        cache[i] = kq_resource_name(b);
    }
    return cache[i];
}

/* Set from model v (-1 = absent), inserted in the order of the bytes that named them
 * (every present name was named by some byte; repeats only update). */
static void build(kq_resource_t *r, const int64_t *v, const uint8_t *order, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        int i = order[k] % FM;
        if (v[i] >= 0)
            CHECK(kq_resource_set(r, fname(i), v[i]) == 0);
    }
}

static void check_model(const kq_resource_t *r, const int64_t *v)
{
    uint32_t n = 0;
    for (int i = 0; i < FM; i++) {
        bool present = false;
        int64_t got = kq_resource_get(r, fname(i), &present);
        CHECK(present == (v[i] >= 0));
        CHECK(v[i] < 0 || got == v[i]);
        n += v[i] >= 0;
    }
    CHECK(r->n == n);
    for (uint32_t i = 1; i < r->n; i++)
        CHECK(strcmp(KQ_RES_E(r)[i - 1].name, KQ_RES_E(r)[i].name) < 0);
}

/* Byte pairs (name, value) for a, then for b after a 0xff separator; values near
 * INT64_MAX when the value byte's top bit is set, so sums overflow sometimes. */
static void fuzz_many(const uint8_t *data, size_t size)
{
    int64_t a[FM], b[FM];
    for (int i = 0; i < FM; i++)
        a[i] = b[i] = -1;
    int64_t *cur = a;
    for (size_t k = 0; k + 1 < size; k += 2) {
        if (data[k] == 0xff) {
            cur = b;
            k--; /* the separator is one byte */
            continue;
        }
        uint8_t vb = data[k + 1];
        cur[data[k] % FM] = vb & 0x80 ? INT64_MAX - (vb & 0x7f) : vb;
    }
    kq_resource_t ra = KQ_RESOURCE_EMPTY, rb = KQ_RESOURCE_EMPTY;
    build(&ra, a, data, size);
    build(&rb, b, data, size);
    check_model(&ra, a);
    check_model(&rb, b);

    /* add, add_check: model sum or KQ_ERANGE with nothing changed */
    bool over = false;
    int64_t sum[FM], mx[FM], fl[FM], mn[FM], sub[FM];
    bool sub_exact = true, fits = true, fits_in = true, equal = true;
    for (int i = 0; i < FM; i++) {
        int64_t x = a[i] < 0 ? 0 : a[i], y = b[i] < 0 ? 0 : b[i];
        sum[i] = a[i] < 0 && b[i] < 0 ? -1 : (__builtin_add_overflow(x, y, &sum[i]) ? (over = true, 0) : x + y);
        mx[i] = a[i] > b[i] ? a[i] : b[i];
        fl[i] = a[i] >= 0 ? a[i] : b[i];
        mn[i] = a[i] < 0 ? b[i] : b[i] < 0 ? a[i] : (a[i] < b[i] ? a[i] : b[i]);
        sub[i] = a[i] < 0 ? -1 : (x >= y ? x - y : 0);
        if (y > 0 && (a[i] < 0 || x < y))
            sub_exact = false;
        /* fits(used=a, req=b, max=a): used + req <= max for requested names max lists */
        if (y > 0 && a[i] >= 0)
            fits = false; /* x + y > x */
        if (x > 0 && b[i] >= 0 && x > y)
            fits_in = false;
        if (x != y)
            equal = false;
    }
    kq_resource_t t = KQ_RESOURCE_EMPTY;
    CHECK(kq_resource_copy(&t, &ra) == 0);
    int rc = kq_resource_add_check(&t, &rb);
    CHECK(rc == (over ? KQ_ERANGE : 0));
    check_model(&t, a);
    rc = kq_resource_add(&t, &rb);
    CHECK(rc == (over ? KQ_ERANGE : 0));
    check_model(&t, over ? a : sum);

    kq_resource_t u = KQ_RESOURCE_EMPTY;
    CHECK(kq_resource_copy(&u, &ra) == 0);
    CHECK(kq_resource_sub(&u, &rb) == sub_exact);
    check_model(&u, sub);
    kq_resource_move(&u, &t); /* u's heap array (if any) is released */
    check_model(&u, over ? a : sum);
    CHECK(t.n == 0);

    CHECK(kq_resource_copy(&t, &ra) == 0);
    CHECK(kq_resource_max(&t, &rb) == 0);
    check_model(&t, mx);
    CHECK(kq_resource_copy(&t, &ra) == 0);
    CHECK(kq_resource_fill(&t, &rb) == 0);
    check_model(&t, fl);
    CHECK(kq_resource_min(&t, &ra, &rb) == 0);
    check_model(&t, mn);
    CHECK(kq_resource_fits(&ra, &rb, &ra, NULL) == fits);
    CHECK(kq_resource_fits_in(&ra, &rb) == fits_in);
    CHECK(kq_resource_equal(&ra, &rb) == equal);
    kq_resource_free(&ra);
    kq_resource_free(&rb);
    kq_resource_free(&t);
    kq_resource_free(&u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        kq_log_level_current = -1; /* quiet: the intern table fills up under fuzzing */
        kq_resource_set_max_names(UINT32_MAX); /* sets of any size (issue 15) */
        for (int i = 0; i < FM; i++) /* before the intern table fills up */
            (void)fname(i);
        init = 1;
    }
    if (size > 4096)
        return 0;
    char *s = malloc(size + 1);
    if (s == NULL)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    fuzz_quantity(s);
    free(s);
    fuzz_json(data, size);
    fuzz_many(data, size);
    return 0;
}
