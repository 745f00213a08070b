/* jscan: a strict, validating JSON scanner that builds nothing (see jscan.h for what is
 * valid, the flags and the spans it reports).
 *
 * DESIGN: one pass, no allocation, no recursion. scan_value() walks one value of any
 * depth with an explicit stack of one bit per open container (object or array), so a
 * hostile body of 2,048 nested brackets costs 256 bytes of stack, not 2,048 frames; the
 * nesting limit is jansson's, counted the same way (a scalar is a level). The hot loop is
 * the inside of strings (node names are most of an ExtenderArgs body): sixteen bytes at a
 * time (SSE2), else eight (word arithmetic), are tested for the only bytes that need a
 * closer look (quote, backslash, control characters, bytes >= 0x80), and the scan jumps
 * straight to the first such byte (SSE2 or little-endian words). Everything after a hit is checked byte by byte:
 * escapes (\u with surrogate pairs), UTF-8 (well-formed, shortest form, no surrogates,
 * <= U+10FFFF). Numbers are checked by grammar; with KQ_JSCAN_NUM_RANGE integers are
 * compared digit-wise with the int64 limits and reals go through strtod as jansson does.
 * Errors carry the byte offset; line and column are only computed when an error is
 * reported. Functions are pure over the caller's text: safe from any thread.
 */
#include "kubequota/kube/jscan.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

typedef const unsigned char *ptr_t;

typedef struct build build_t;

typedef struct scan {
    ptr_t start, end;
    unsigned flags;
    kq_jscan_error_t *err;
    int rc;     /* the code when a scanning function returned NULL */
    build_t *b; /* kq_jscan_json: the jansson tree being built, else NULL */
} scan_t;

/* ------------------------------------------------------------------ errors */

static void locate(kq_jscan_error_t *err, ptr_t start, ptr_t at)
{
    int line = 1, column = 1;
    for (ptr_t p = start; p < at; p++) {
        if (*p == '\n') {
            line++;
            column = 1;
        } else if ((*p & 0xC0) != 0x80) {
            column++;
        }
    }
    err->offset = (size_t)(at - start);
    err->line = line;
    err->column = column;
}

static ptr_t fail(scan_t *s, ptr_t at, int rc, const char *fmt, ...) KQ_PRINTF(4, 5);
static ptr_t fail(scan_t *s, ptr_t at, int rc, const char *fmt, ...)
{
    s->rc = rc;
    if (s->err != NULL) {
        locate(s->err, s->start, at);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->err->text, sizeof(s->err->text), fmt, ap);
        va_end(ap);
    }
    return NULL;
}

/* A byte for a message: the character when printable ASCII, else its hex code. */
static const char *show(unsigned c, char buf[8])
{
    if (c >= 0x21 && c < 0x7F)
        snprintf(buf, 8, "'%c'", (char)c);
    else
        snprintf(buf, 8, "0x%02x", c);
    return buf;
}

static ptr_t fail_unexpected(scan_t *s, ptr_t at, const char *expected)
{
    char b[8];
    if (at >= s->end)
        return fail(s, at, KQ_EPARSE, "%s expected, found the end of the input", expected);
    return fail(s, at, KQ_EPARSE, "%s expected, found %s", expected, show(*at, b));
}

/* ------------------------------------------------------------------ tokens */

static inline ptr_t skip_ws(ptr_t p, ptr_t end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    return p;
}

static inline bool is_digit(unsigned c)
{
    return c - '0' < 10u;
}

/* Value of four hex digits at p, or -1. */
static long hex4(ptr_t p, ptr_t end)
{
    if (end - p < 4)
        return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        v <<= 4;
        if (is_digit(c))
            v |= (long)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (long)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (long)(c - 'A' + 10);
        else
            return -1;
    }
    return v;
}

/* One escape at p (a backslash); returns the byte after it. */
static ptr_t scan_escape(scan_t *s, ptr_t p)
{
    ptr_t end = s->end;
    char b[8];
    if (end - p < 2)
        return fail(s, p, KQ_EPARSE, "unterminated string");
    switch (p[1]) {
    case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
        return p + 2;
    case 'u':
        break;
    default:
        return fail(s, p, KQ_EPARSE, "invalid escape: backslash followed by %s", show(p[1], b));
    }
    long u = hex4(p + 2, end);
    if (u < 0)
        return fail(s, p, KQ_EPARSE, "invalid \\u escape (four hex digits expected)");
    if (u == 0 && (s->flags & KQ_JSCAN_NO_NUL))
        return fail(s, p, KQ_EPARSE, "\\u0000 is not allowed in a string");
    if (u >= 0xDC00 && u <= 0xDFFF)
        return fail(s, p, KQ_EPARSE, "unpaired UTF-16 surrogate \\u%04lX", u);
    if (u < 0xD800 || u > 0xDBFF)
        return p + 6;
    long lo = (end - p >= 8 && p[6] == '\\' && p[7] == 'u') ? hex4(p + 8, end) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF)
        return fail(s, p, KQ_EPARSE, "unpaired UTF-16 surrogate \\u%04lX (a \\uDC00-\\uDFFF escape must follow)", u);
    return p + 12;
}

/* One UTF-8 sequence of two to four bytes at p (*p >= 0x80); returns the byte after it. */
static ptr_t scan_utf8(scan_t *s, ptr_t p)
{
    unsigned c = *p, lo = 0x80, hi = 0xBF;
    ptrdiff_t n;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0; /* shorter forms are overlong */
        else if (c == 0xED)
            hi = 0x9F; /* ED A0..BF are UTF-16 surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90; /* overlong */
        else if (c == 0xF4)
            hi = 0x8F; /* above U+10FFFF */
    } else {
        return fail(s, p, KQ_EPARSE, "invalid UTF-8: byte 0x%02x cannot start a character", c);
    }
    if (s->end - p < n)
        return fail(s, p, KQ_EPARSE, "invalid UTF-8: character truncated by the end of the input");
    bool ok = p[1] >= lo && p[1] <= hi;
    for (ptrdiff_t i = 2; ok && i < n; i++)
        ok = (p[i] & 0xC0) == 0x80;
    if (!ok)
        return fail(s, p, KQ_EPARSE, "invalid UTF-8 sequence starting with byte 0x%02x", c);
    return p + n;
}

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

/* Non-zero when one of the eight bytes in v is a quote, a backslash, below 0x20 or at
 * least 0x80. A byte may also be flagged wrongly, but only above (later in memory on a
 * little-endian machine than) a byte flagged rightly, so the lowest flag is always right. */
static inline uint64_t special8(uint64_t v)
{
    uint64_t q = v ^ (ONES * '"'), b = v ^ (ONES * '\\');
    return (((v - ONES * 0x20) & ~v) | ((q - ONES) & ~q) | ((b - ONES) & ~b) | v) & HIGHS;
}

/* The contents of a string: p is just after the opening quote; returns just after the
 * closing one. */
static ptr_t scan_string(scan_t *s, ptr_t p, bool *escaped)
{
    ptr_t end = s->end;
    bool esc = false;
    for (;;) {
#if defined(__SSE2__)
        /* Sixteen bytes at a time: quote, backslash, and (signed) less than 0x20, which
         * takes in both control characters and every byte >= 0x80. */
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)p);
            __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                  _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                     _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            unsigned mask = (unsigned)_mm_movemask_epi8(m);
            if (mask != 0) {
                p += __builtin_ctz(mask);
                goto special;
            }
            p += 16;
        }
#endif
        while (end - p >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            uint64_t m = special8(v);
            if (m != 0) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                p += (unsigned)__builtin_ctzll(m) >> 3;
#endif
                break;
            }
            p += 8;
        }
#if defined(__SSE2__)
    special:
#endif
        if (p >= end)
            return fail(s, p, KQ_EPARSE, "unterminated string");
        unsigned c = *p;
        if (c == '"') {
            *escaped = esc;
            return p + 1;
        }
        if (c == '\\') {
            esc = true;
            p = scan_escape(s, p);
        } else if (c < 0x20) {
            return fail(s, p, KQ_EPARSE, "control character 0x%02x in a string (must be escaped)", c);
        } else if (c < 0x80) {
            p++;
        } else {
            p = scan_utf8(s, p);
        }
        if (p == NULL)
            return NULL;
    }
}

/* The real number text [p, stop) through strtod, as jansson reads it; *overflow when
 * strtod gives +-HUGE_VAL with ERANGE (jansson's "real number overflow"). 0 or
 * KQ_ENOMEM. */
static int real_value(ptr_t p, ptr_t stop, ptr_t end, double *d, bool *overflow)
{
    size_t n = (size_t)(stop - p);
    char buf[128];
    char *copy = NULL;
    const char *text;
    if (n < sizeof(buf)) {
        memcpy(buf, p, n);
        buf[n] = '\0';
        text = buf;
    } else if (stop < end) {
        /* The byte after a complete JSON number cannot continue it for strtod either. */
        text = (const char *)p;
    } else {
        copy = malloc(n + 1);
        if (copy == NULL)
            return KQ_ENOMEM;
        memcpy(copy, p, n);
        copy[n] = '\0';
        text = copy;
    }
    errno = 0;
    *d = strtod(text, NULL);
    *overflow = (*d == HUGE_VAL || *d == -HUGE_VAL) && errno == ERANGE;
    free(copy);
    return 0;
}

/* A number's value, for the builder. */
typedef struct num {
    bool real;
    long long i;
    double d;
} num_t;

static ptr_t scan_number(scan_t *s, ptr_t p, num_t *num)
{
    ptr_t start = p, end = s->end;
    bool neg = *p == '-', real = false;
    if (neg)
        p++;
    ptr_t digits = p;
    if (p >= end || !is_digit(*p))
        return fail_unexpected(s, p, "a digit after '-'");
    if (*p == '0') {
        p++;
        if (p < end && is_digit(*p))
            return fail(s, start, KQ_EPARSE, "number with a leading zero");
    } else {
        while (p < end && is_digit(*p))
            p++;
    }
    size_t ndigits = (size_t)(p - digits);
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p))
            return fail_unexpected(s, p, "a digit after the decimal point");
        while (p < end && is_digit(*p))
            p++;
        real = true;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            return fail_unexpected(s, p, "a digit in the exponent");
        while (p < end && is_digit(*p))
            p++;
        real = true;
    }
    num->real = real;
    if (!(s->flags & KQ_JSCAN_NUM_RANGE) && s->b == NULL)
        return p;
    if (!real) {
        /* No leading zeros, so the digit count and then the digits order the values. */
        const char *limit = neg ? "9223372036854775808" : "9223372036854775807";
        if (ndigits > 19 || (ndigits == 19 && memcmp(digits, limit, 19) > 0)) {
            if (s->flags & KQ_JSCAN_NUM_RANGE)
                return fail(s, start, KQ_EPARSE, "integer out of the 64-bit range");
            return p;
        }
        long long v = 0;
        for (ptr_t q = digits; q < digits + ndigits; q++)
            v = v * 10 - (long long)(*q - '0'); /* negative, so that INT64_MIN fits */
        num->i = neg ? v : -v;
        return p;
    }
    bool over;
    if (real_value(start, p, end, &num->d, &over) != 0)
        return fail(s, start, KQ_ENOMEM, "out of memory reading a number");
    if (over && (s->flags & KQ_JSCAN_NUM_RANGE))
        return fail(s, start, KQ_EPARSE, "real number overflows a double");
    return p;
}

static ptr_t scan_literal(scan_t *s, ptr_t p, const char *word, size_t n)
{
    if ((size_t)(s->end - p) < n || memcmp(p, word, n) != 0)
        return fail_unexpected(s, p, "a value");
    return p + n;
}

/* ------------------------------------------------------------------ building */

/* kq_jscan_json's state: the open containers (borrowed: each is owned by its parent,
 * the root by `root`) and the decoded name of the member whose value comes next. */
struct build {
    json_t *root;
    json_t **open;
    size_t depth, cap;
    json_t *inline_open[32];
    char *key;
    size_t key_len, key_cap;
    char inline_key[64];
    /* kq_jscan_json_filtered: what to keep. filt[i] belongs to open[i] (NULL = all of it);
     * `next` applies to the value that comes next (set by its member name, or inherited
     * from the open array); `skip` counts the containers open inside a value that is not
     * kept (nothing is built while it is nonzero); `skip_next` marks the next value as
     * not kept (its member name was not in the filter). */
    const kq_jfilter_t **filt;
    const kq_jfilter_t *inline_filt[32];
    const kq_jfilter_t *next;
    size_t skip;
    bool skip_next, filtered;
    /* kq_jdoc_parse: the document being built. Then open/root/key are unused: the open
     * containers are doc->open (node positions) and a member name is decoded straight into
     * doc->text at key_off, where the next string goes. */
    kq_jdoc_t *doc;
    size_t key_off; /* bytes of doc->text in use */
    size_t key_pos; /* where the name of the member whose value comes next is */
};

static int doc_key(build_t *b, ptr_t p, ptr_t stop, bool escaped);
static int doc_value(build_t *b, kq_jtype_t t, ptr_t p, ptr_t stop, bool escaped, const num_t *num);
static void doc_close(build_t *b);

/* Decoded string contents in a buffer of the builder's (kept until the next call). */
static char *build_text(build_t *b, ptr_t p, ptr_t stop, bool escaped, size_t *len)
{
    kq_jstr_t raw = {.ptr = (const char *)p, .len = (size_t)(stop - p), .escaped = escaped};
    if (raw.len + 1 > b->key_cap) {
        char *k = malloc(raw.len + 1);
        if (k == NULL)
            return NULL;
        if (b->key != b->inline_key)
            free(b->key);
        b->key = k;
        b->key_cap = raw.len + 1;
    }
    *len = kq_jscan_str_decode(&raw, b->key);
    b->key[*len] = '\0';
    return b->key;
}

/* Whether the NUL-terminated k equals the n raw bytes at p, which hold no NUL (a string
 * without escapes: raw control bytes are invalid), so the loop stops at k's end. Inline:
 * most names differ in their first byte. */
static inline bool key_is(const char *k, ptr_t p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (k[i] != (char)p[i])
            return false;
    return k[n] == '\0';
}

/* The entry of a filter list whose name equals the raw member name, or NULL. */
static const kq_jfilter_t *filter_match(const kq_jfilter_t *f, ptr_t p, ptr_t stop, bool escaped)
{
    size_t n = (size_t)(stop - p);
    for (; f->key != NULL; f++) {
        if (!escaped) {
            if (key_is(f->key, p, n))
                return f;
        } else {
            kq_jstr_t raw = {.ptr = (const char *)p, .len = n, .escaped = true};
            if (kq_jscan_str_equal(&raw, f->key))
                return f;
        }
    }
    return NULL;
}

static int build_key(build_t *b, ptr_t p, ptr_t stop, bool escaped)
{
    if (b->skip > 0)
        return 0;
    if (b->filtered) {
        const kq_jfilter_t *f = b->filt[b->depth - 1];
        if (f != NULL) {
            const kq_jfilter_t *m = filter_match(f, p, stop, escaped);
            if (m == NULL) {
                b->skip_next = true;
                return 0;
            }
            b->next = m->sub;
        } else {
            b->next = NULL;
        }
    }
    if (b->doc != NULL)
        return doc_key(b, p, stop, escaped);
    return build_text(b, p, stop, escaped, &b->key_len) != NULL ? 0 : KQ_ENOMEM;
}

/* A new value (containers empty, then pushed) attached to the open container. */
static int build_value(build_t *b, kq_jtype_t t, ptr_t p, ptr_t stop, bool escaped, const num_t *num)
{
    if (b->skip > 0 || b->skip_next) {
        b->skip_next = false;
        if (t == KQ_JOBJECT || t == KQ_JARRAY)
            b->skip++;
        return 0;
    }
    if (b->doc != NULL)
        return doc_value(b, t, p, stop, escaped, num);
    const kq_jfilter_t *filt = NULL; /* what is kept of this value when it is a container */
    if (b->filtered) {
        if (b->depth == 0)
            filt = b->next;
        else if (json_is_array(b->open[b->depth - 1]))
            filt = b->filt[b->depth - 1]; /* elements are filtered like their array */
        else
            filt = b->next;
    }
    json_t *v = NULL;
    switch (t) {
    case KQ_JOBJECT: v = json_object(); break;
    case KQ_JARRAY: v = json_array(); break;
    case KQ_JSTRING:
        if (!escaped) {
            v = json_stringn_nocheck((const char *)p + 1, (size_t)(stop - p) - 2);
        } else {
            char small[256], *text = small;
            kq_jstr_t raw = {.ptr = (const char *)p + 1, .len = (size_t)(stop - p) - 2, .escaped = true};
            if (raw.len > sizeof(small) && (text = malloc(raw.len)) == NULL)
                return KQ_ENOMEM;
            v = json_stringn_nocheck(text, kq_jscan_str_decode(&raw, text));
            if (text != small)
                free(text);
        }
        break;
    case KQ_JNUMBER: v = num->real ? json_real(num->d) : json_integer((json_int_t)num->i); break;
    case KQ_JTRUE: v = json_true(); break;
    case KQ_JFALSE: v = json_false(); break;
    default: v = json_null(); break;
    }
    if (v == NULL)
        return KQ_ENOMEM;
    if (b->depth == 0) {
        b->root = v;
    } else {
        json_t *parent = b->open[b->depth - 1];
        int rc = json_is_object(parent) ? json_object_setn_new_nocheck(parent, b->key, b->key_len, v)
                                        : json_array_append_new(parent, v);
        if (rc != 0)
            return KQ_ENOMEM; /* v was released by jansson */
    }
    if (t == KQ_JOBJECT || t == KQ_JARRAY) {
        if (b->depth == b->cap) {
            size_t cap = b->cap * 2;
            json_t **open = malloc(cap * sizeof(*open));
            const kq_jfilter_t **fl = b->filtered ? malloc(cap * sizeof(*fl)) : NULL;
            if (open == NULL || (b->filtered && fl == NULL)) {
                free(open);
                free(fl);
                return KQ_ENOMEM;
            }
            memcpy(open, b->open, b->depth * sizeof(*open));
            if (b->open != b->inline_open)
                free(b->open);
            b->open = open;
            if (fl != NULL) {
                memcpy(fl, b->filt, b->depth * sizeof(*fl));
                if (b->filt != b->inline_filt)
                    free(b->filt);
                b->filt = fl;
            }
            b->cap = cap;
        }
        if (b->filtered)
            b->filt[b->depth] = filt;
        b->open[b->depth++] = v;
    }
    return 0;
}

static void build_close(build_t *b)
{
    if (b->skip > 0)
        b->skip--;
    else if (b->doc != NULL)
        doc_close(b);
    else
        b->depth--;
}

/* ---- the same, into a kq_jdoc_t ----
 * Nodes refer to each other only by position; their strings point into doc->text. When
 * doc->text has to grow, the strings built so far are moved and re-pointed (a warm
 * document that has seen a text of this size never grows). */

/* Room in doc->text for raw bytes of string contents decoded (never longer) plus a NUL. */
static int doc_room(build_t *b, size_t raw)
{
    kq_jdoc_t *d = b->doc;
    if (b->key_off + raw + 1 <= d->text_cap)
        return 0;
    size_t cap = d->text_cap ? d->text_cap : 4096;
    while (cap < b->key_off + raw + 1)
        cap *= 2;
    char *t = malloc(cap);
    if (t == NULL)
        return KQ_ENOMEM;
    if (d->text != NULL) {
        memcpy(t, d->text, b->key_off);
        for (size_t i = 0; i < d->n; i++) {
            kq_jnode_t *n = &d->nodes[i];
            if (n->key != NULL)
                n->key = t + (n->key - d->text);
            if (n->str != NULL)
                n->str = t + (n->str - d->text);
        }
        free(d->text);
    }
    d->text = t;
    d->text_cap = cap;
    return 0;
}

/* Appends raw's decoded contents and a NUL to doc->text (room made by doc_room first);
 * returns where they start and their length in *len. */
static char *doc_put(build_t *b, const kq_jstr_t *raw, size_t *len)
{
    char *out = b->doc->text + b->key_off;
    if (raw->escaped) {
        *len = kq_jscan_str_decode(raw, out);
    } else {
        memcpy(out, raw->ptr, raw->len);
        *len = raw->len;
    }
    out[*len] = '\0';
    b->key_off += *len + 1;
    return out;
}

static int doc_key(build_t *b, ptr_t p, ptr_t stop, bool escaped)
{
    kq_jstr_t raw = {.ptr = (const char *)p, .len = (size_t)(stop - p), .escaped = escaped};
    if (doc_room(b, raw.len) != 0)
        return KQ_ENOMEM;
    b->key_pos = (size_t)(doc_put(b, &raw, &b->key_len) - b->doc->text);
    return 0;
}

static int doc_value(build_t *b, kq_jtype_t t, ptr_t p, ptr_t stop, bool escaped, const num_t *num)
{
    kq_jdoc_t *d = b->doc;
    kq_jstr_t raw = {.ptr = (const char *)p + 1, .len = (size_t)(stop - p) - 2, .escaped = escaped};
    if (t == KQ_JSTRING && doc_room(b, raw.len) != 0)
        return KQ_ENOMEM;
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 64;
        kq_jnode_t *nodes = realloc(d->nodes, cap * sizeof(*nodes));
        if (nodes == NULL)
            return KQ_ENOMEM;
        d->nodes = nodes;
        d->cap = cap;
    }
    kq_jnode_t *parent = b->depth > 0 ? &d->nodes[d->open[b->depth - 1]] : NULL;
    const kq_jfilter_t *filt = NULL; /* what is kept of this value when it is a container */
    if (b->filtered)
        filt = parent != NULL && parent->type == KQ_JARRAY ? b->filt[b->depth - 1] : b->next;
    kq_jnode_t *n = &d->nodes[d->n];
    *n = (kq_jnode_t){.type = t, .size = 1};
    if (parent != NULL) {
        parent->count++;
        if (parent->type == KQ_JOBJECT) {
            n->key = d->text + b->key_pos;
            n->key_len = b->key_len;
        }
    }
    if (t == KQ_JSTRING) {
        n->str = doc_put(b, &raw, &n->len);
    } else if (t == KQ_JNUMBER) {
        n->real = num->real;
        n->i = num->real ? 0 : num->i;
        n->d = num->real ? num->d : (double)num->i;
    }
    d->n++;
    if (t != KQ_JOBJECT && t != KQ_JARRAY)
        return 0;
    if (b->depth == d->open_cap) {
        size_t cap = d->open_cap ? d->open_cap * 2 : 32;
        uint32_t *open = realloc(d->open, cap * sizeof(*open));
        if (open == NULL)
            return KQ_ENOMEM;
        d->open = open;
        d->open_cap = cap;
    }
    if (b->filtered) {
        if (b->depth == b->cap) {
            size_t cap = b->cap * 2;
            const kq_jfilter_t **fl = malloc(cap * sizeof(*fl));
            if (fl == NULL)
                return KQ_ENOMEM;
            memcpy(fl, b->filt, b->depth * sizeof(*fl));
            if (b->filt != b->inline_filt)
                free(b->filt);
            b->filt = fl;
            b->cap = cap;
        }
        b->filt[b->depth] = filt;
    }
    d->open[b->depth++] = (uint32_t)(d->n - 1);
    return 0;
}

static bool same_key(const kq_jnode_t *a, const kq_jnode_t *c)
{
    return a->key_len == c->key_len && memcmp(a->key, c->key, a->key_len) == 0;
}

/* Bottom-up merge sort of member positions by name; stable, so equal names stay in text
 * order. Sorts v[0..m) using tmp[0..m); returns whichever of the two holds the result. */
static uint32_t *sort_by_key(const kq_jnode_t *base, uint32_t *v, uint32_t *tmp, size_t m)
{
    for (size_t w = 1; w < m; w *= 2) {
        for (size_t lo = 0; lo < m; lo += 2 * w) {
            size_t mid = lo + w < m ? lo + w : m, hi = lo + 2 * w < m ? lo + 2 * w : m;
            size_t i = lo, j = mid, o = lo;
            while (i < mid && j < hi) {
                const kq_jnode_t *x = &base[v[i]], *y = &base[v[j]];
                size_t l = x->key_len < y->key_len ? x->key_len : y->key_len;
                int c = memcmp(x->key, y->key, l);
                if (c == 0)
                    c = x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
                tmp[o++] = c <= 0 ? v[i++] : v[j++];
            }
            while (i < mid)
                tmp[o++] = v[i++];
            while (j < hi)
                tmp[o++] = v[j++];
        }
        uint32_t *t = v;
        v = tmp;
        tmp = t;
    }
    return v;
}

/* Repeated member names: every member but the last of a name is shadowed. Objects of up
 * to 16 members compare pairwise; larger ones sort their members by name (so a hostile
 * object of many names costs n log n, not n^2). */
static void doc_dedupe(kq_jdoc_t *d, size_t ix)
{
    kq_jnode_t *obj = &d->nodes[ix], *end = obj + obj->size;
    size_t m = obj->count;
    if (m > 16 && d->sort_cap < 2 * m) {
        uint32_t *v = realloc(d->sort, 2 * m * sizeof(*v));
        if (v != NULL) {
            d->sort = v;
            d->sort_cap = 2 * m;
        }
    }
    if (m <= 16 || d->sort_cap < 2 * m) { /* (pairwise too when memory ran out) */
        for (kq_jnode_t *a = obj + 1; a < end; a += a->size)
            for (kq_jnode_t *c = a + a->size; c < end; c += c->size)
                if (same_key(a, c)) {
                    a->shadowed = true;
                    obj->count--;
                    break;
                }
        return;
    }
    size_t k = 0;
    for (kq_jnode_t *a = obj + 1; a < end; a += a->size)
        d->sort[k++] = (uint32_t)(a - d->nodes);
    const uint32_t *v = sort_by_key(d->nodes, d->sort, d->sort + m, m);
    for (size_t i = 0; i + 1 < m; i++)
        if (same_key(&d->nodes[v[i]], &d->nodes[v[i + 1]])) {
            d->nodes[v[i]].shadowed = true;
            obj->count--;
        }
}

static void doc_close(build_t *b)
{
    kq_jdoc_t *d = b->doc;
    size_t ix = d->open[--b->depth];
    d->nodes[ix].size = (uint32_t)(d->n - ix);
    if (d->nodes[ix].type == KQ_JOBJECT && d->nodes[ix].count > 1)
        doc_dedupe(d, ix);
}


/* ------------------------------------------------------------------ values */

/* One complete value starting at p (whitespace already skipped), itself nested inside
 * `level` containers. Fills *v; returns the byte after the value. */
static ptr_t scan_value(scan_t *s, ptr_t p, size_t level, kq_jvalue_t *v)
{
    ptr_t end = s->end, first = p;
    uint64_t kinds[KQ_JSCAN_MAX_DEPTH / 64]; /* bit set: that open container is an object */
    size_t depth = 0;                        /* containers open inside this value */
    *v = (kq_jvalue_t){0};
    for (;;) {
        /* A value starts at p. */
        if (level + depth >= KQ_JSCAN_MAX_DEPTH)
            return fail(s, p, KQ_EPARSE, "nested too deeply (more than %d levels)", KQ_JSCAN_MAX_DEPTH);
        if (p >= end)
            return fail_unexpected(s, p, "a value");
        kq_jtype_t t;
        bool escaped = false;
        num_t num = {0};
        ptr_t vstart = p;
        unsigned c = *p;
        switch (c) {
        case '{': t = KQ_JOBJECT; break;
        case '[': t = KQ_JARRAY; break;
        case '"':
            t = KQ_JSTRING;
            p = scan_string(s, p + 1, &escaped);
            break;
        case 't': t = KQ_JTRUE; p = scan_literal(s, p, "true", 4); break;
        case 'f': t = KQ_JFALSE; p = scan_literal(s, p, "false", 5); break;
        case 'n': t = KQ_JNULL; p = scan_literal(s, p, "null", 4); break;
        default:
            if (c != '-' && !is_digit(c))
                return fail_unexpected(s, p, "a value");
            t = KQ_JNUMBER;
            p = scan_number(s, p, &num);
            break;
        }
        if (p == NULL)
            return NULL;
        if (s->b != NULL && build_value(s->b, t, vstart, p, escaped, &num) != 0)
            return fail(s, vstart, KQ_ENOMEM, "out of memory building the JSON value");
        if (depth == 0) {
            v->type = t;
            v->escaped = escaped;
        } else if (depth == 1) {
            v->count++;
            v->elem_types |= t;
        }
        if (t == KQ_JOBJECT || t == KQ_JARRAY) {
            if (t == KQ_JOBJECT)
                kinds[depth / 64] |= UINT64_C(1) << (depth % 64);
            else
                kinds[depth / 64] &= ~(UINT64_C(1) << (depth % 64));
            depth++;
            p = skip_ws(p + 1, end);
            if (p < end && *p == (t == KQ_JOBJECT ? '}' : ']')) {
                p++;
                depth--;
                if (s->b != NULL)
                    build_close(s->b);
            } else if (t == KQ_JOBJECT) {
                goto member;
            } else {
                continue; /* the first element */
            }
        }
        /* After a complete value: close containers, or find the next value. */
        for (;;) {
            if (depth == 0) {
                v->ptr = (const char *)first;
                v->len = (size_t)(p - first);
                return p;
            }
            bool in_object = (kinds[(depth - 1) / 64] >> ((depth - 1) % 64)) & 1;
            p = skip_ws(p, end);
            if (p < end && *p == ',') {
                p = skip_ws(p + 1, end);
                if (in_object)
                    goto member;
                if (s->b == NULL && p < end && *p == '"') {
                    /* A string element after the first (a list of node names): scanned
                     * right here, then the same checks as after any value. The nesting
                     * limit was checked for the first element, at this same depth. */
                    bool esc;
                    p = scan_string(s, p + 1, &esc);
                    if (p == NULL)
                        return NULL;
                    if (depth == 1) {
                        v->count++;
                        v->elem_types |= KQ_JSTRING;
                    }
                    continue;
                }
                break;
            }
            if (p < end && *p == (in_object ? '}' : ']')) {
                p++;
                depth--;
                if (s->b != NULL)
                    build_close(s->b);
                continue;
            }
            return fail_unexpected(s, p, in_object ? "',' or '}'" : "',' or ']'");
        }
        continue;
    member:
        /* A member name, then its value. */
        if (p >= end || *p != '"')
            return fail_unexpected(s, p, "a member name (string)");
        bool key_escaped;
        ptr_t key = p + 1;
        p = scan_string(s, key, &key_escaped);
        if (p == NULL)
            return NULL;
        if (s->b != NULL && build_key(s->b, key, p - 1, key_escaped) != 0)
            return fail(s, key, KQ_ENOMEM, "out of memory building the JSON value");
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return fail_unexpected(s, p, "':' after a member name");
        p = skip_ws(p + 1, end);
    }
}

static int scan_tail(scan_t *s, ptr_t p)
{
    p = skip_ws(p, s->end);
    if (p != s->end) {
        fail_unexpected(s, p, "the end of the input");
        return s->rc;
    }
    return 0;
}

/* The whole text as one value. */
static int scan_document(scan_t *s, kq_jvalue_t *v)
{
    ptr_t p = scan_value(s, skip_ws(s->start, s->end), 0, v);
    return p == NULL ? s->rc : scan_tail(s, p);
}

static void init(scan_t *s, const char *text, size_t len, unsigned flags, kq_jscan_error_t *err)
{
    static const char empty[1] = "";
    s->start = (ptr_t)(text != NULL ? text : empty);
    s->end = s->start + (text != NULL ? len : 0);
    s->flags = flags;
    s->err = err;
    s->rc = 0;
    s->b = NULL;
}

/* KQ_EINVAL for valid JSON of the wrong type, or the syntax error. */
static int wrong_type(scan_t *s, ptr_t at, const char *want)
{
    kq_jvalue_t v;
    int rc = scan_document(s, &v);
    if (rc != 0)
        return rc;
    fail(s, at, KQ_EINVAL, "expected a JSON %s (found: %s)", want, kq_jscan_type_name(v.type));
    return KQ_EINVAL;
}

/* ------------------------------------------------------------------ public API */

int kq_jscan_validate(const char *text, size_t len, unsigned flags, kq_jvalue_t *out, kq_jscan_error_t *err)
{
    scan_t s;
    init(&s, text, len, flags, err);
    kq_jvalue_t v;
    int rc = scan_document(&s, &v);
    if (rc == 0 && out != NULL)
        *out = v;
    return rc;
}

/* What kq_jscan_object_find_doc decodes while the object is scanned. */
typedef struct member_doc {
    const char *key;
    const kq_jfilter_t *keep;
    kq_jdoc_t *doc;
    bool seen;
} member_doc_t;

static int scan_object(const char *text, size_t len, unsigned flags, kq_jscan_member_fn fn, void *ctx,
                       member_doc_t *md, kq_jscan_error_t *err);
static void build_init(build_t *b, const kq_jfilter_t *keep);
static void build_done(build_t *b);

int kq_jscan_object(const char *text, size_t len, unsigned flags, kq_jscan_member_fn fn, void *ctx,
                    kq_jscan_error_t *err)
{
    return scan_object(text, len, flags, fn, ctx, NULL, err);
}

static int scan_object(const char *text, size_t len, unsigned flags, kq_jscan_member_fn fn, void *ctx,
                       member_doc_t *md, kq_jscan_error_t *err)
{
    scan_t s;
    init(&s, text, len, flags, err);
    ptr_t end = s.end;
    ptr_t p = skip_ws(s.start, end);
    if (p >= end || *p != '{')
        return wrong_type(&s, p, "object");
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}')
        return scan_tail(&s, p + 1);
    for (;;) {
        kq_jmember_t m;
        if (p >= end || *p != '"') {
            fail_unexpected(&s, p, "a member name (string)");
            return s.rc;
        }
        m.key.ptr = (const char *)p + 1;
        ptr_t q = scan_string(&s, p + 1, &m.key.escaped);
        if (q == NULL)
            return s.rc;
        m.key.len = (size_t)(q - 1 - (p + 1));
        p = skip_ws(q, end);
        if (p >= end || *p != ':') {
            fail_unexpected(&s, p, "':' after a member name");
            return s.rc;
        }
        if (md != NULL && kq_jscan_str_equal(&m.key, md->key)) {
            /* decoded in the same pass (a repeated name: the last one, as in jansson) */
            build_t b;
            build_init(&b, md->keep);
            b.doc = md->doc;
            md->doc->n = 0;
            s.b = &b;
            p = scan_value(&s, skip_ws(p + 1, end), 1, &m.value);
            s.b = NULL;
            build_done(&b);
            md->seen = true;
        } else {
            p = scan_value(&s, skip_ws(p + 1, end), 1, &m.value);
        }
        if (p == NULL)
            return s.rc;
        if (fn != NULL) {
            int rc = fn(ctx, &m);
            if (rc != 0)
                return rc;
        }
        p = skip_ws(p, end);
        if (p < end && *p == ',') {
            p = skip_ws(p + 1, end);
            continue;
        }
        if (p < end && *p == '}')
            return scan_tail(&s, p + 1);
        fail_unexpected(&s, p, "',' or '}'");
        return s.rc;
    }
}

typedef struct find {
    const char *const *keys;
    size_t nkeys;
    kq_jvalue_t *found;
} find_t;

static int find_member(void *ctx, const kq_jmember_t *m)
{
    find_t *f = ctx;
    for (size_t i = 0; i < f->nkeys; i++)
        if (kq_jscan_str_equal(&m->key, f->keys[i]))
            f->found[i] = m->value; /* later ones win, as in jansson */
    return 0;
}

#define FIND_MAX 16

/* kq_jscan_object_find, and with md kq_jscan_object_find_doc. */
static int object_find(const char *text, size_t len, unsigned flags, const char *const *keys, size_t nkeys,
                       kq_jvalue_t *values, member_doc_t *md, kq_jscan_error_t *err)
{
    kq_jvalue_t found[FIND_MAX];
    if (nkeys > FIND_MAX || (nkeys > 0 && (keys == NULL || values == NULL))) {
        if (err != NULL) {
            *err = (kq_jscan_error_t){.line = 1, .column = 1};
            snprintf(err->text, sizeof(err->text), "at most %d member names can be looked up at once", FIND_MAX);
        }
        return KQ_EINVAL;
    }
    for (size_t i = 0; i < nkeys; i++)
        found[i] = (kq_jvalue_t){0};
    find_t f = {.keys = keys, .nkeys = nkeys, .found = found};
    int rc = scan_object(text, len, flags, find_member, &f, md, err);
    if (rc == 0)
        memcpy(values, found, nkeys * sizeof(*values));
    return rc;
}

int kq_jscan_object_find(const char *text, size_t len, unsigned flags, const char *const *keys, size_t nkeys,
                         kq_jvalue_t *values, kq_jscan_error_t *err)
{
    return object_find(text, len, flags, keys, nkeys, values, NULL, err);
}

int kq_jscan_object_find_doc(const char *text, size_t len, const char *const *keys, size_t nkeys,
                             kq_jvalue_t *values, const char *doc_key, const kq_jfilter_t *keep, kq_jdoc_t *doc,
                             kq_jscan_error_t *err)
{
    doc->n = 0;
    if (doc_key == NULL) {
        if (err != NULL) {
            *err = (kq_jscan_error_t){.line = 1, .column = 1};
            snprintf(err->text, sizeof(err->text), "no member name to decode");
        }
        return KQ_EINVAL;
    }
    member_doc_t md = {.key = doc_key, .keep = keep, .doc = doc};
    int rc = object_find(text, len, KQ_JSCAN_JANSSON, keys, nkeys, values, &md, err);
    if (rc != 0 || !md.seen)
        doc->n = 0;
    return rc;
}

int kq_jscan_json(const char *text, size_t len, json_t **out, kq_jscan_error_t *err)
{
    return kq_jscan_json_filtered(text, len, NULL, out, err);
}

static void build_init(build_t *b, const kq_jfilter_t *keep)
{
    *b = (build_t){.cap = 32, .key_cap = sizeof(b->inline_key), .filtered = keep != NULL, .next = keep};
    b->open = b->inline_open;
    b->filt = b->inline_filt;
    b->key = b->inline_key;
}

static void build_done(build_t *b)
{
    if (b->open != b->inline_open)
        free(b->open);
    if (b->filt != b->inline_filt)
        free(b->filt);
    if (b->key != b->inline_key)
        free(b->key);
}

int kq_jscan_json_filtered(const char *text, size_t len, const kq_jfilter_t *keep, json_t **out,
                           kq_jscan_error_t *err)
{
    build_t b;
    build_init(&b, keep);
    scan_t s;
    init(&s, text, len, KQ_JSCAN_JANSSON, err);
    s.b = &b;
    kq_jvalue_t v;
    int rc = scan_document(&s, &v);
    build_done(&b);
    if (rc != 0) {
        json_decref(b.root);
        return rc;
    }
    *out = b.root;
    return 0;
}

int kq_jdoc_parse(kq_jdoc_t *doc, const char *text, size_t len, const kq_jfilter_t *keep, kq_jscan_error_t *err)
{
    scan_t s;
    init(&s, text, len, KQ_JSCAN_JANSSON, err);
    doc->n = 0;
    build_t b;
    build_init(&b, keep);
    b.doc = doc;
    s.b = &b;
    kq_jvalue_t v;
    int rc = scan_document(&s, &v);
    build_done(&b);
    if (rc != 0)
        doc->n = 0;
    return rc;
}

void kq_jdoc_free(kq_jdoc_t *doc)
{
    if (doc == NULL)
        return;
    free(doc->nodes);
    free(doc->text);
    free(doc->open);
    free(doc->sort);
    *doc = (kq_jdoc_t){0};
}

void kq_jdoc_trim(kq_jdoc_t *doc, size_t keep)
{
    if (doc != NULL && doc->cap * sizeof(kq_jnode_t) + doc->text_cap + doc->open_cap * sizeof(uint32_t) +
                               doc->sort_cap * sizeof(uint32_t) >
                           keep)
        kq_jdoc_free(doc);
}

const kq_jnode_t *kq_jnode_get(const kq_jnode_t *obj, const char *key)
{
    if (obj == NULL || obj->type != KQ_JOBJECT)
        return NULL;
    /* (no strlen: names rarely share a first byte, and the loop stops at key's end, as a
     * decoded name holds no NUL: KQ_JSCAN_JANSSON refuses \u0000) */
    for (const kq_jnode_t *c = kq_jnode_first(obj); c != NULL; c = kq_jnode_next(obj, c))
        if (c->key[0] == key[0] && key_is(key, (ptr_t)c->key, c->key_len))
            return c;
    return NULL;
}

/* ------------------------------------------------------------------ iteration */

int kq_jscan_iter_begin(kq_jscan_iter_t *it, const char *text, size_t len, unsigned flags, kq_jscan_error_t *err)
{
    scan_t s;
    init(&s, text, len, flags, err);
    ptr_t p = skip_ws(s.start, s.end);
    *it = (kq_jscan_iter_t){.start = (const char *)s.start, .end = (const char *)s.end, .flags = flags};
    if (p >= s.end || *p != '[') {
        it->state = wrong_type(&s, p, "array");
        return it->state;
    }
    p = skip_ws(p + 1, s.end);
    it->p = (const char *)p;
    it->state = 1;
    if (p < s.end && *p == ']') {
        it->state = scan_tail(&s, p + 1);
        if (it->state == 0)
            it->state = 2;
        else
            return it->state;
    }
    return 0;
}

/* After element it->index, which ended at p: a comma, or the closing bracket and the
 * end of the text. */
static int iter_after(kq_jscan_iter_t *it, scan_t *s, ptr_t p)
{
    p = skip_ws(p, s->end);
    if (p < s->end && *p == ',') {
        it->p = (const char *)skip_ws(p + 1, s->end);
        it->index++;
        return 1;
    }
    if (p < s->end && *p == ']') {
        int rc = scan_tail(s, p + 1);
        if (rc != 0)
            return it->state = rc;
        it->state = 2;
        it->index++;
        return 1;
    }
    fail_unexpected(s, p, "',' or ']'");
    return it->state = s->rc;
}

static int iter_start(kq_jscan_iter_t *it, scan_t *s, kq_jscan_error_t *err)
{
    init(s, it->start, (size_t)(it->end - it->start), it->flags, err);
    if (it->state == 2)
        return 0;
    if (it->state != 1) {
        if (err != NULL) {
            *err = (kq_jscan_error_t){.line = 1, .column = 1};
            snprintf(err->text, sizeof(err->text), "the iteration has already failed");
        }
        return it->state < 0 ? it->state : KQ_EINVAL;
    }
    return 1;
}

int kq_jscan_iter_next(kq_jscan_iter_t *it, kq_jvalue_t *v, kq_jscan_error_t *err)
{
    scan_t s;
    int rc = iter_start(it, &s, err);
    if (rc != 1)
        return rc;
    kq_jvalue_t e;
    ptr_t p = scan_value(&s, (ptr_t)it->p, 1, &e);
    if (p == NULL)
        return it->state = s.rc;
    rc = iter_after(it, &s, p);
    if (rc == 1)
        *v = e;
    return rc;
}

int kq_jscan_iter_next_json(kq_jscan_iter_t *it, const kq_jfilter_t *keep, kq_jvalue_t *v, json_t **out,
                            kq_jscan_error_t *err)
{
    scan_t s;
    int rc = iter_start(it, &s, err);
    if (rc != 1)
        return rc;
    build_t b;
    build_init(&b, keep);
    s.b = &b;
    kq_jvalue_t e;
    ptr_t p = scan_value(&s, (ptr_t)it->p, 1, &e);
    build_done(&b);
    if (p == NULL) {
        json_decref(b.root);
        return it->state = s.rc;
    }
    s.b = NULL;
    rc = iter_after(it, &s, p);
    if (rc != 1) {
        json_decref(b.root);
        return rc;
    }
    *v = e;
    *out = b.root;
    return 1;
}

int kq_jscan_iter_next_doc(kq_jscan_iter_t *it, const kq_jfilter_t *keep, kq_jvalue_t *v, kq_jdoc_t *doc,
                           kq_jscan_error_t *err)
{
    scan_t s;
    doc->n = 0;
    int rc = iter_start(it, &s, err);
    if (rc != 1)
        return rc;
    build_t b;
    build_init(&b, keep);
    b.doc = doc;
    s.b = &b;
    kq_jvalue_t e;
    ptr_t p = scan_value(&s, (ptr_t)it->p, 1, &e);
    build_done(&b);
    if (p == NULL) {
        doc->n = 0;
        return it->state = s.rc;
    }
    s.b = NULL;
    rc = iter_after(it, &s, p);
    if (rc != 1) {
        doc->n = 0;
        return rc;
    }
    *v = e;
    return 1;
}

int kq_jscan_iter_next_string(kq_jscan_iter_t *it, kq_jstr_t *str, kq_jscan_error_t *err)
{
    scan_t s;
    int rc = iter_start(it, &s, err);
    if (rc != 1)
        return rc;
    ptr_t p = (ptr_t)it->p;
    if (p >= s.end || *p != '"') {
        kq_jvalue_t v;
        if (scan_value(&s, p, 1, &v) == NULL)
            return it->state = s.rc;
        fail(&s, p, KQ_EINVAL, "element %zu is not a string (found: %s)", it->index, kq_jscan_type_name(v.type));
        return it->state = KQ_EINVAL;
    }
    kq_jstr_t e = {.ptr = (const char *)p + 1};
    ptr_t q = scan_string(&s, p + 1, &e.escaped);
    if (q == NULL)
        return it->state = s.rc;
    e.len = (size_t)(q - 1 - (p + 1));
    rc = iter_after(it, &s, q);
    if (rc == 1)
        *str = e;
    return rc;
}

/* ------------------------------------------------------------------ strings */

static size_t utf8_put(unsigned long cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* The bytes of the character or escape at *pp (advanced past it) into out[0..4). Bounds
 * are checked so that text that did not come from the scanner cannot be over-read: a
 * broken escape is then taken as its backslash alone. */
static size_t decode_one(ptr_t *pp, ptr_t end, unsigned char out[4])
{
    ptr_t p = *pp;
    if (*p != '\\' || end - p < 2) {
        *pp = p + 1;
        out[0] = *p;
        return 1;
    }
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *k = p[1] != 'u' ? strchr(from, p[1]) : NULL;
    if (k != NULL && *k != '\0') {
        *pp = p + 2;
        out[0] = (unsigned char)to[k - from];
        return 1;
    }
    long u = p[1] == 'u' ? hex4(p + 2, end) : -1;
    if (u < 0) {
        *pp = p + 1;
        out[0] = '\\';
        return 1;
    }
    unsigned long cp = (unsigned long)u;
    p += 6;
    if (u >= 0xD800 && u <= 0xDBFF && end - p >= 6 && p[0] == '\\' && p[1] == 'u') {
        long lo = hex4(p + 2, end);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            cp = 0x10000 + (((unsigned long)u - 0xD800) << 10) + ((unsigned long)lo - 0xDC00);
            p += 6;
        }
    }
    *pp = p;
    return utf8_put(cp, out);
}

bool kq_jscan_str_equal(const kq_jstr_t *raw, const char *s)
{
    if (!raw->escaped) {
        size_t n = strlen(s);
        return n == raw->len && memcmp(raw->ptr, s, n) == 0;
    }
    ptr_t p = (ptr_t)raw->ptr, end = p + raw->len;
    const unsigned char *q = (const unsigned char *)s;
    while (p < end) {
        unsigned char b[4];
        size_t n = decode_one(&p, end, b);
        for (size_t i = 0; i < n; i++, q++)
            if (*q == '\0' || *q != b[i])
                return false;
    }
    return *q == '\0';
}

size_t kq_jscan_str_decode(const kq_jstr_t *raw, char *out)
{
    if (!raw->escaped) {
        memcpy(out, raw->ptr, raw->len);
        return raw->len;
    }
    ptr_t p = (ptr_t)raw->ptr, end = p + raw->len;
    size_t n = 0;
    while (p < end) {
        unsigned char b[4];
        size_t k = decode_one(&p, end, b);
        memcpy(out + n, b, k);
        n += k;
    }
    return n;
}

const char *kq_jscan_type_name(kq_jtype_t type)
{
    switch (type) {
    case KQ_JOBJECT: return "object";
    case KQ_JARRAY: return "array";
    case KQ_JSTRING: return "string";
    case KQ_JNUMBER: return "number";
    case KQ_JTRUE: return "true";
    case KQ_JFALSE: return "false";
    case KQ_JNULL: return "null";
    default: return "none";
    }
}
