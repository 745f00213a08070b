/* Resources: Kubernetes quantity strings parsed into canonical integers, interned
 * resource names, and small sorted resource sets with the arithmetic quota checks need.
 *
 * Quantities are read as a Kubernetes component reads them: the scanner and suffixes of
 * kubernetes/apimachinery pkg/api/resource (ParseQuantity: an optional sign, digits with
 * an optional decimal point, digits optional throughout, then Ki..Ei, n u m k M G T P E
 * or a decimal exponent e/E whose value is truncated to int32), surrounding white space
 * dropped as Quantity.UnmarshalJSON drops it, and the value rounded UP to the canonical
 * unit (millicores, bytes or a count) as Value() and MilliValue() round. A binary
 * quantity of bytes or counts above 2^63-1 is capped there as ParseQuantity caps it;
 * other values beyond int64 are errors (Kubernetes' own accessors overflow there), as
 * are negative values, and exponents where Kubernetes' int32 scale arithmetic wraps
 * (exponent - fraction digits below -(2^31-1)). The value is computed exactly, one
 * decimal digit of D * 2^p2 at a time (no double, no big-number buffer, no length
 * limit). kq_quantity_parse_whole keeps the strict reading (no rounding, no cap) for
 * formats with their own rules (YuniKorn's queues.yaml).
 *
 * DESIGN
 * Interned names: an insert-only open-addressing hash table of NAMES_SLOTS atomic
 * pointers (twice KQ_RES_NAMES_MAX, so probes stay short and always end at an empty
 * slot). A slot changes exactly once, from NULL to a fully built entry, with a release
 * store; readers probe with acquire loads and no lock, so lookups on the hot path never
 * contend. Writers serialise on names_lock, probe again under it, then publish.
 * Entries are never freed (names live until exit and stay reachable from the table).
 *
 * Resource sets (kq_resource_t) are plain values owned by the caller; no locks. The
 * invariant every function keeps: e[0..n) sorted by strcmp(name), names unique and
 * interned (so equal names are equal pointers), values >= 0. Functions that can fail
 * build the result in a local copy and assign it only on success.
 */
#include "kubequota/engine/resource.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/base/log.h"

/* ===================================================================== units ==== */

enum unit { UNIT_MILLI, UNIT_BYTES, UNIT_COUNT };

static enum unit unit_of(const char *name)
{
    if (name == NULL)
        return UNIT_COUNT;
    if (strcmp(name, "cpu") == 0 || strcmp(name, "vcore") == 0)
        return UNIT_MILLI;
    if (strcmp(name, "memory") == 0 || strcmp(name, "ephemeral-storage") == 0 ||
        strcmp(name, "storage") == 0 || strncmp(name, "hugepages-", 10) == 0)
        return UNIT_BYTES;
    return UNIT_COUNT;
}

/* ============================================================ interned names ==== */

#define NAMES_SLOTS (2 * KQ_RES_NAMES_MAX) /* power of two */

struct name_entry {
    uint64_t hash;
    char name[]; /* NUL-terminated */
};

static _Atomic(struct name_entry *) names[NAMES_SLOTS];
static size_t names_count; /* guarded by names_lock */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool names_full_logged;

static bool name_char_ok(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* 1..KQ_RES_NAME_MAX characters of [A-Za-z0-9._-], with at most one '/' separating a
 * non-empty prefix from a non-empty name. */
static bool name_valid(const char *s, size_t len)
{
    if (len == 0 || len > KQ_RES_NAME_MAX)
        return false;
    int slashes = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '/')
            slashes++;
        else if (!name_char_ok(c))
            return false;
    }
    if (slashes > 1)
        return false;
    if (slashes == 1 && (s[0] == '/' || s[len - 1] == '/'))
        return false;
    return true;
}

static uint64_t name_hash(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Lock-free probe; NULL when the name was never interned. */
static const struct name_entry *names_find(const char *s, uint64_t h)
{
    for (size_t i = (size_t)h & (NAMES_SLOTS - 1);; i = (i + 1) & (NAMES_SLOTS - 1)) {
        const struct name_entry *e = atomic_load_explicit(&names[i], memory_order_acquire);
        if (e == NULL)
            return NULL;
        if (e->hash == h && strcmp(e->name, s) == 0)
            return e;
    }
}

/* Canonical spelling of a valid name (the "vcore" alias), or NULL when invalid. Sets
 * *len to the canonical length. */
static const char *name_canonical(const char *name, size_t *len)
{
    if (name == NULL)
        return NULL;
    size_t n = strnlen(name, KQ_RES_NAME_MAX + 1);
    if (!name_valid(name, n))
        return NULL;
    if (strcmp(name, "vcore") == 0) {
        name = "cpu";
        n = 3;
    }
    *len = n;
    return name;
}

/* Interned pointer for name if it was ever interned; never inserts. */
static const char *name_lookup(const char *name)
{
    size_t len;
    const char *c = name_canonical(name, &len);
    if (c == NULL)
        return NULL;
    const struct name_entry *e = names_find(c, name_hash(c, len));
    return e ? e->name : NULL;
}

const char *kq_resource_name(const char *name)
{
    size_t len;
    const char *c = name_canonical(name, &len);
    if (c == NULL)
        return NULL;
    uint64_t h = name_hash(c, len);
    const struct name_entry *e = names_find(c, h);
    if (e != NULL)
        return e->name;

    const char *ret = NULL;
    struct name_entry *ne;
    size_t i;
    pthread_mutex_lock(&names_lock);
    e = names_find(c, h);
    if (e != NULL) {
        ret = e->name;
        goto out;
    }
    if (names_count >= KQ_RES_NAMES_MAX) {
        if (!atomic_exchange(&names_full_logged, true))
            kq_error("resource name table full, rejecting new resource names max=%d",
                     KQ_RES_NAMES_MAX);
        goto out;
    }
    ne = malloc(sizeof(*ne) + len + 1);
    if (ne == NULL)
        goto out;
    ne->hash = h;
    memcpy(ne->name, c, len + 1);
    i = (size_t)h & (NAMES_SLOTS - 1);
    while (atomic_load_explicit(&names[i], memory_order_relaxed) != NULL)
        i = (i + 1) & (NAMES_SLOTS - 1);
    atomic_store_explicit(&names[i], ne, memory_order_release);
    names_count++;
    ret = ne->name;
out:
    pthread_mutex_unlock(&names_lock);
    return ret;
}

/* ============================================== error text for untrusted input ==== */

/* Writes s (at most `max` input bytes) quoted, with non-printable bytes escaped, so an
 * error message is always one readable line. */
static void quote(char *dst, size_t dstlen, const char *s, size_t max)
{
    size_t o = 0;
    dst[o++] = '"';
    size_t i = 0;
    for (; s[i] != '\0' && i < max && o + 5 < dstlen; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            dst[o++] = '\\';
            dst[o++] = (char)c;
        } else if (c < 0x20 || c >= 0x7f) {
            o += (size_t)snprintf(dst + o, dstlen - o, "\\x%02x", c);
        } else {
            dst[o++] = (char)c;
        }
    }
    if (s[i] != '\0' && o + 5 <= dstlen) {
        memcpy(dst + o, "...", 3);
        o += 3;
    }
    dst[o++] = '"';
    dst[o] = '\0';
}

#define QUOTE_BUF 200 /* holds quote(..., 40) */

/* `invalid quantity "<s>" for <name>: <why>`; returns rc. */
static int qerr(char *err, size_t errlen, int rc, const char *name, const char *s, const char *fmt,
                ...) KQ_PRINTF(6, 7);
static int qerr(char *err, size_t errlen, int rc, const char *name, const char *s, const char *fmt,
                ...)
{
    if (err == NULL || errlen == 0)
        return rc;
    char why[256], qs[QUOTE_BUF];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    quote(qs, sizeof(qs), s, 40);
    snprintf(err, errlen, "invalid quantity %s for %s: %s", qs, name, why);
    return rc;
}

/* ================================================================ quantities ==== */

static const struct {
    const char *s;
    int p10, p2;
} suffixes[] = {
    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},   {"G", 9, 0},
    {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30},
    {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
};
#define NSUFFIXES (sizeof(suffixes) / sizeof(suffixes[0]))

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

static const uint64_t pow10_u64[20] = {1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull,
                                       10000000ull, 100000000ull, 1000000000ull, 10000000000ull,
                                       100000000000ull, 1000000000000ull, 10000000000000ull,
                                       100000000000000ull, 1000000000000000ull, 10000000000000000ull,
                                       100000000000000000ull, 1000000000000000000ull,
                                       10000000000000000000ull};

/* The common case in 64 bits: [+]digits[.digits][suffix] with 1..18 digits and a suffix
 * from the table (no exponent), whose value in canonical units, rounded up, fits an
 * int64. Anything else (or any error) returns false and goes the exact way, which also
 * words the errors; this path only ever returns values that one computes. */
static bool quantity_fast(enum unit u, const char *s, bool round, int64_t *out)
{
    const char *p = s;
    if (*p == '+')
        p++;
    uint64_t m = 0;
    int ndigits = 0, nfrac = 0;
    for (; is_digit(*p); p++, ndigits++)
        m = m * 10 + (uint64_t)(*p - '0');
    if (*p == '.')
        for (p++; is_digit(*p); p++, ndigits++, nfrac++)
            m = m * 10 + (uint64_t)(*p - '0');
    if (ndigits == 0 || ndigits > 18) /* (18 digits cannot overflow the loops above) */
        return false;
    int p10 = 0, p2 = 0;
    if (*p != '\0') {
        size_t k = 0;
        while (k < NSUFFIXES && strcmp(p, suffixes[k].s) != 0)
            k++;
        if (k == NSUFFIXES)
            return false;
        p10 = suffixes[k].p10;
        p2 = suffixes[k].p2;
    }
    int t = p10 - nfrac + (u == UNIT_MILLI ? 3 : 0);
    unsigned __int128 x = (unsigned __int128)m << p2; /* m < 10^18 < 2^60, p2 <= 60 */
    if (t < 0) {
        if (t < -18)
            return false;
        bool frac = x % pow10_u64[-t] != 0;
        if (frac && !round)
            return false;
        x = x / pow10_u64[-t] + (frac ? 1 : 0); /* Kubernetes rounds up */
    } else {
        if (t > 18 || x > (unsigned __int128)INT64_MAX)
            return false;
        x *= pow10_u64[t]; /* < 2^63 * 10^18 < 2^127 */
    }
    if (x > (unsigned __int128)INT64_MAX)
        return false;
    *out = (int64_t)x;
    return true;
}

/* Length of the white space (Go's unicode.IsSpace, which strings.TrimSpace uses) that
 * starts at p (< e), or 0. */
static size_t space_at(const unsigned char *p, const unsigned char *e)
{
    size_t n = (size_t)(e - p);
    if (*p == ' ' || (*p >= '\t' && *p <= '\r'))
        return 1;
    if (n >= 2 && p[0] == 0xc2 && (p[1] == 0x85 || p[1] == 0xa0)) /* U+0085, U+00A0 */
        return 2;
    if (n < 3)
        return 0;
    if (p[0] == 0xe1 && p[1] == 0x9a && p[2] == 0x80) /* U+1680 */
        return 3;
    if (p[0] == 0xe2 && p[1] == 0x80 && (p[2] <= 0x8a || p[2] == 0xa8 || p[2] == 0xa9 || p[2] == 0xaf) &&
        p[2] >= 0x80) /* U+2000..U+200A, U+2028, U+2029, U+202F */
        return 3;
    if (p[0] == 0xe2 && p[1] == 0x81 && p[2] == 0x9f) /* U+205F */
        return 3;
    if (p[0] == 0xe3 && p[1] == 0x80 && p[2] == 0x80) /* U+3000 */
        return 3;
    return 0;
}

/* Same, for white space that ends at e (> b). */
static size_t space_before(const unsigned char *b, const unsigned char *e)
{
    for (size_t k = 1; k <= 3 && k <= (size_t)(e - b); k++)
        if (space_at(e - k, e) == k)
            return k;
    return 0;
}

/* Adds decimal digit d at position pos (10^pos) of a value being rounded up to an
 * integer: a fraction below position 0, an overflow above 18. */
static void put_digit(unsigned d, int64_t pos, uint64_t *acc, bool *frac, bool *over, bool *nonzero)
{
    if (d == 0)
        return;
    *nonzero = true;
    if (pos < 0)
        *frac = true;
    else if (pos > 18)
        *over = true;
    else
        *acc += d * pow10_u64[pos];
}

/* How a quantity is read: as Kubernetes reads it, the same without the 64-bit
 * shortcut, or as a whole number of canonical units (no rounding, no cap). */
enum qmode { Q_KUBE, Q_KUBE_EXACT, Q_WHOLE };

static int quantity_parse(const char *name, const char *s, int64_t *out, char *err, size_t errlen, enum qmode mode);

int kq_quantity_parse(const char *name, const char *s, int64_t *out, char *err, size_t errlen)
{
    return quantity_parse(name, s, out, err, errlen, Q_KUBE);
}

int kq_quantity_parse_exact(const char *name, const char *s, int64_t *out, char *err, size_t errlen)
{
    return quantity_parse(name, s, out, err, errlen, Q_KUBE_EXACT);
}

int kq_quantity_parse_whole(const char *name, const char *s, int64_t *out, char *err, size_t errlen)
{
    return quantity_parse(name, s, out, err, errlen, Q_WHOLE);
}

static const char *unit_words(enum unit u)
{
    switch (u) {
    case UNIT_MILLI:
        return "millicores (1m = 0.001 cpu)";
    case UNIT_BYTES:
        return "bytes";
    default:
        return "units";
    }
}

static int quantity_parse(const char *name, const char *s, int64_t *out, char *err, size_t errlen, enum qmode mode)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    size_t namelen = name ? strnlen(name, KQ_RES_NAME_MAX + 1) : 0;
    if (name == NULL || !name_valid(name, namelen)) {
        char qn[QUOTE_BUF];
        quote(qn, sizeof(qn), name ? name : "", 40);
        kq_errf(err, errlen, "invalid resource name %s: expected 1-%d characters of [A-Za-z0-9._-] "
               "with at most one '/'", qn, KQ_RES_NAME_MAX);
        return KQ_EPARSE;
    }
    if (s == NULL) {
        kq_errf(err, errlen, "missing quantity for %s", name);
        return KQ_EPARSE;
    }
    enum unit u = unit_of(name);
    if (mode != Q_KUBE_EXACT && quantity_fast(u, s, mode == Q_KUBE, out))
        return 0;

    const unsigned char *b = (const unsigned char *)s, *e = b + strlen(s);
    if (mode == Q_WHOLE) {
        for (const unsigned char *q = b; q < e; q++)
            if (space_at(q, e) > 0)
                return qerr(err, errlen, KQ_EPARSE, name, s, "whitespace is not allowed");
    }
    /* Like Quantity.UnmarshalJSON: white space around the quantity is dropped. */
    for (size_t k; b < e && (k = space_at(b, e)) > 0;)
        b += k;
    for (size_t k; e > b && (k = space_before(b, e)) > 0;)
        e -= k;
    if (b == e)
        return qerr(err, errlen, KQ_EPARSE, name, s, "empty");

    /* The scanner of Kubernetes' parseQuantityString: [sign] digits [. digits] then a
     * suffix of letters from "eEinumkKMGTP", an optional sign and digits. Digits are
     * optional everywhere ("." and "Ki" are zero). */
    const char *p = (const char *)b, *end = (const char *)e;
    bool negative = false;
    if (*p == '+' || *p == '-')
        negative = *p++ == '-';
    const char *int_b = p;
    while (p < end && is_digit(*p))
        p++;
    const char *int_e = p, *frac_b = p, *frac_e = p;
    if (p < end && *p == '.') {
        frac_b = ++p;
        while (p < end && is_digit(*p))
            p++;
        frac_e = p;
    }
    const char *suf = p;
    while (p < end && strchr("eEinumkKMGTP", *p) != NULL)
        p++;
    if (p < end && (*p == '+' || *p == '-'))
        p++;
    while (p < end && is_digit(*p))
        p++;
    size_t suflen = (size_t)(end - suf);
    char qsuf[QUOTE_BUF];
    if (p != end) {
        quote(qsuf, sizeof(qsuf), suf, suflen < 40 ? suflen : 40);
        return qerr(err, errlen, KQ_EPARSE, name, s,
                    "unknown suffix %s (expected Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)",
                    qsuf);
    }

    /* The suffix, as Kubernetes' suffixer interprets it. */
    int64_t p10 = 0;
    int p2 = 0;
    bool exponent = false;
    if (suflen > 0) {
        size_t k = 0;
        while (k < NSUFFIXES && !(strlen(suffixes[k].s) == suflen && memcmp(suf, suffixes[k].s, suflen) == 0))
            k++;
        if (k < NSUFFIXES) {
            p10 = suffixes[k].p10;
            p2 = suffixes[k].p2;
        } else if ((suf[0] == 'e' || suf[0] == 'E') && suflen > 1) {
            /* strconv.ParseInt(rest, 10, 64), then truncated to int32 as Kubernetes does
             * ("1e4294967296" is 1) */
            const char *q = suf + 1;
            bool eneg = false;
            if (*q == '+' || *q == '-')
                eneg = *q++ == '-';
            if (q == end || !is_digit(*q)) {
                quote(qsuf, sizeof(qsuf), suf, suflen < 40 ? suflen : 40);
                return qerr(err, errlen, KQ_EPARSE, name, s, "malformed exponent %s", qsuf);
            }
            uint64_t ev = 0, limit = (uint64_t)INT64_MAX + (eneg ? 1u : 0u);
            for (; q < end && is_digit(*q); q++) {
                uint64_t d = (uint64_t)(*q - '0');
                if (ev > (limit - d) / 10)
                    return qerr(err, errlen, KQ_EPARSE, name, s, "exponent out of range");
                ev = ev * 10 + d;
            }
            if (q != end) {
                quote(qsuf, sizeof(qsuf), suf, suflen < 40 ? suflen : 40);
                return qerr(err, errlen, KQ_EPARSE, name, s, "malformed exponent %s", qsuf);
            }
            uint64_t bits = eneg ? (uint64_t)0 - ev : ev;
            p10 = (int32_t)(uint32_t)bits;
            exponent = true;
        } else {
            quote(qsuf, sizeof(qsuf), suf, suflen < 40 ? suflen : 40);
            return qerr(err, errlen, KQ_EPARSE, name, s,
                        "unknown suffix %s (expected Ki Mi Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)",
                        qsuf);
        }
    }

    int64_t nfrac = (int64_t)(frac_e - frac_b);
    if (int_b == int_e && frac_b == frac_e) {
        /* No digits at all. Kubernetes reads zero, except below its nano scale, where it
         * re-reads the number with a decimal parser that wants a digit. */
        if (mode == Q_WHOLE || (exponent && p10 < -9))
            return qerr(err, errlen, KQ_EPARSE, name, s, "expected a number such as 500m, 2, 1.5 or 2Gi");
        *out = 0;
        return 0;
    }

    /* The value is D * 2^p2 * 10^t for the digit string D; Kubernetes rounds it up to
     * the canonical unit (Value(), MilliValue()). D * 2^p2 is produced one decimal digit
     * at a time from the right (digit * 2^p2 + carry stays below 10 * 2^60 < 2^64); digit
     * i lands at position i + t: below 0 it is a fraction, above 18 an overflow. */
    int64_t t = p10 - nfrac + (u == UNIT_MILLI ? 3 : 0);
    uint64_t acc = 0, carry = 0;
    bool frac = false, over = false, nonzero = false;
    int64_t pos = t;
    for (const char *q = frac_e; q-- > int_b;) {
        if (*q == '.')
            continue;
        uint64_t x = ((uint64_t)(*q - '0') << p2) + carry;
        carry = x / 10;
        put_digit((unsigned)(x % 10), pos++, &acc, &frac, &over, &nonzero);
    }
    for (; carry != 0; carry /= 10)
        put_digit((unsigned)(carry % 10), pos++, &acc, &frac, &over, &nonzero);
    if (!nonzero) { /* "0", "-0", "0.0Gi", "0e9": zero whatever the sign */
        *out = 0;
        return 0;
    }
    if (negative)
        return qerr(err, errlen, KQ_ERANGE, name, s, "negative quantities are not allowed");
    if (p10 - nfrac < -(int64_t)INT32_MAX) /* Kubernetes' int32 scale arithmetic wraps there */
        return qerr(err, errlen, KQ_EPARSE, name, s, "exponent out of range");
    if (frac && mode == Q_WHOLE && !over)
        return qerr(err, errlen, KQ_ERANGE, name, s, "not a whole number of %s", unit_words(u));
    if (!over && acc <= (uint64_t)INT64_MAX - (frac ? 1 : 0)) {
        *out = (int64_t)acc + (frac ? 1 : 0);
        return 0;
    }
    /* Kubernetes caps a binary-suffixed quantity at 2^63-1 of its base unit ("8Ei" bytes
     * is 2^63-1); beyond int64 everything else only overflows there. */
    if (p2 > 0 && u != UNIT_MILLI && mode != Q_WHOLE) {
        *out = INT64_MAX;
        return 0;
    }
    return qerr(err, errlen, KQ_ERANGE, name, s, "too large (at most %lld%s)", (long long)INT64_MAX,
                u == UNIT_MILLI ? "m" : u == UNIT_BYTES ? " bytes" : "");
}

/* Kubernetes' canonical form of a DecimalSI quantity m * 10^exp: the mantissa without
 * trailing zeros, the exponent lowered to a multiple of 3 and written as a suffix. */
static int format_decimal_si(int64_t m, int exp, char *buf, size_t len)
{
    static const char *const sfx[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
    if (m == 0)
        return snprintf(buf, len, "0");
    while (m % 10 == 0) {
        m /= 10;
        exp++;
    }
    while (((exp % 3) + 3) % 3 != 0) { /* fewer factors than were removed: no overflow */
        m *= 10;
        exp--;
    }
    if (exp < -9 || exp > 18) /* not reachable from an int64 of millis, bytes or units */
        return snprintf(buf, len, "%llde%d", (long long)m, exp);
    return snprintf(buf, len, "%lld%s", (long long)m, sfx[(exp + 9) / 3]);
}

size_t kq_quantity_format(const char *name, int64_t value, char *buf, size_t len)
{
    static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    int n;
    switch (unit_of(name)) {
    case UNIT_MILLI:
        n = format_decimal_si(value, -3, buf, len);
        break;
    case UNIT_BYTES:
        if (value > -1024 && value < 1024) { /* BinarySI below 1Ki is written as DecimalSI */
            n = format_decimal_si(value, 0, buf, len);
        } else {
            int k = 0;
            while (value % 1024 == 0) {
                value /= 1024;
                k++;
            }
            n = snprintf(buf, len, "%lld%s", (long long)value, bin[k]);
        }
        break;
    default:
        n = format_decimal_si(value, 0, buf, len);
        break;
    }
    return n < 0 ? 0 : (size_t)n;
}

/* ============================================================= resource sets ==== */

/* Order of interned names; equal names are equal pointers. */
static int name_cmp(const char *a, const char *b) { return a == b ? 0 : strcmp(a, b); }

static inline uint32_t capacity(const kq_resource_t *r) { return r->cap ? r->cap : KQ_RES_INLINE; }

static _Atomic uint32_t max_names = KQ_RES_NAMES_MAX;

uint32_t kq_resource_max_names(void) { return atomic_load_explicit(&max_names, memory_order_relaxed); }

void kq_resource_set_max_names(uint32_t n) { atomic_store_explicit(&max_names, n, memory_order_relaxed); }

void kq_resource_free(kq_resource_t *r)
{
    if (r == NULL)
        return;
    if (r->cap != 0) /* else heap shares its bytes with the inline entries */
        free(r->heap);
    r->cap = 0;
    r->n = 0;
}

/* Room for `need` entries, keeping the n in use. Once spilled a set stays on the heap
 * until freed (so a set that grew once never allocates again at that size). */
static int grow(kq_resource_t *r, uint32_t need)
{
    if (need > kq_resource_max_names())
        return KQ_ERANGE;
    if (need <= capacity(r))
        return 0;
    uint32_t cap = capacity(r) * 2;
    while (cap < need)
        cap *= 2;
    kq_res_entry_t *h = malloc((size_t)cap * sizeof *h);
    if (h == NULL)
        return KQ_ENOMEM;
    memcpy(h, KQ_RES_E(r), (size_t)r->n * sizeof *h);
    if (r->cap != 0)
        free(r->heap);
    r->heap = h;
    r->cap = cap;
    return 0;
}

int kq_resource_reserve(kq_resource_t *r, uint32_t n) { return grow(r, n); }

int kq_resource_copy(kq_resource_t *dst, const kq_resource_t *src)
{
    if (dst == src)
        return 0;
    if (src->n > capacity(dst)) {
        kq_resource_t t = KQ_RESOURCE_EMPTY;
        int rc = grow(&t, src->n);
        if (rc != 0)
            return rc;
        kq_resource_move(dst, &t);
    }
    memcpy(KQ_RES_E(dst), KQ_RES_E(src), (size_t)src->n * sizeof(kq_res_entry_t));
    dst->n = src->n;
    return 0;
}

void kq_resource_move(kq_resource_t *dst, kq_resource_t *src)
{
    if (dst == src)
        return;
    if (src->cap == 0) { /* inline entries fit any set's storage: dst keeps its own */
        memcpy(KQ_RES_E(dst), src->inl, (size_t)src->n * sizeof(kq_res_entry_t));
        dst->n = src->n;
        src->n = 0;
        return;
    }
    if (dst->cap != 0)
        free(dst->heap);
    dst->n = src->n;
    dst->cap = src->cap;
    dst->heap = src->heap;
    src->n = 0;
    src->cap = 0;
}

static int find_index(const kq_resource_t *r, const char *iname)
{
    const kq_res_entry_t *e = KQ_RES_E(r);
    for (uint32_t i = 0; i < r->n; i++)
        if (e[i].name == iname)
            return (int)i;
    return -1;
}

/* Inserts a name known to be absent, keeping the order. */
static int insert_sorted(kq_resource_t *r, const char *iname, int64_t value)
{
    int rc = grow(r, r->n + 1);
    if (rc != 0)
        return rc;
    kq_res_entry_t *e = KQ_RES_E(r);
    uint32_t i = r->n;
    while (i > 0 && strcmp(e[i - 1].name, iname) > 0) {
        e[i] = e[i - 1];
        i--;
    }
    e[i].name = iname;
    e[i].value = value;
    r->n++;
    return 0;
}

int kq_resource_put(kq_resource_t *r, const char *iname, int64_t value)
{
    int i = find_index(r, iname);
    if (i >= 0) {
        KQ_RES_E(r)[i].value = value;
        return 0;
    }
    return insert_sorted(r, iname, value);
}

int64_t kq_resource_get(const kq_resource_t *r, const char *name, bool *present)
{
    const char *iname = name_lookup(name);
    int i = iname ? find_index(r, iname) : -1;
    if (present != NULL)
        *present = i >= 0;
    return i >= 0 ? KQ_RES_E(r)[i].value : 0;
}

int kq_resource_set(kq_resource_t *r, const char *name, int64_t value)
{
    if (value < 0)
        return KQ_EINVAL;
    const char *iname = kq_resource_name(name);
    if (iname == NULL) {
        size_t len;
        return name_canonical(name, &len) == NULL ? KQ_EINVAL : KQ_ENOMEM; /* bad name; table full */
    }
    return kq_resource_put(r, iname, value);
}

enum merge_op { MERGE_ADD, MERGE_MAX, MERGE_FILL, MERGE_CHECK /* ADD's first pass only */ };

/* Names in both sets are combined by op, in place, without a temporary copy (an inline
 * copy of a bounded size compiles to rep movs, slow for a few entries): a first pass
 * counts the union and checks sums, r grows once; then when every name of b is already
 * in r (the steady state: usage already names what a pod requests) one forward pass
 * combines the values, else a merge from the back, so no entry of r is overwritten before
 * it is read (b may be r). */
static inline __attribute__((always_inline)) int merge(kq_resource_t *r, const kq_resource_t *b,
                                                       enum merge_op op)
{
    const kq_res_entry_t *re = KQ_RES_E(r), *be = KQ_RES_E(b);
    uint32_t i = 0, j = 0, cnt = 0;
    while (i < r->n && j < b->n) {
        int c = name_cmp(re[i].name, be[j].name);
        int64_t s;
        if (c == 0 && (op == MERGE_ADD || op == MERGE_CHECK) && __builtin_add_overflow(re[i].value, be[j].value, &s))
            return KQ_ERANGE;
        i += c <= 0;
        j += c >= 0;
        cnt++;
    }
    cnt += (r->n - i) + (b->n - j);
    int rc = grow(r, cnt);
    if (rc != 0)
        return rc;
    if (op == MERGE_CHECK)
        return 0;
    kq_res_entry_t *out = KQ_RES_E(r);
    be = KQ_RES_E(b); /* b == r may have moved */
    if (cnt == r->n) { /* b's names are all in r */
        for (i = 0, j = 0; j < b->n; i++) {
            if (out[i].name != be[j].name)
                continue;
            int64_t v = be[j++].value;
            if (op == MERGE_ADD)
                out[i].value += v; /* checked above */
            else if (op == MERGE_MAX && v > out[i].value)
                out[i].value = v;
        }
        return 0;
    }
    uint32_t k = cnt;
    i = r->n;
    j = b->n;
    while (j > 0) { /* once b is used up, r's remaining entries are in place */
        int c = i == 0 ? -1 : name_cmp(out[i - 1].name, be[j - 1].name);
        if (c > 0) {
            out[--k] = out[--i];
        } else if (c < 0) {
            out[--k] = be[--j];
        } else {
            kq_res_entry_t x = out[--i];
            int64_t v = be[--j].value;
            if (op == MERGE_ADD)
                x.value += v; /* checked above */
            else if (op == MERGE_MAX && v > x.value)
                x.value = v;
            out[--k] = x;
        }
    }
    r->n = cnt;
    return 0;
}

int kq_resource_add(kq_resource_t *r, const kq_resource_t *b)
{
    return merge(r, b, MERGE_ADD);
}

int kq_resource_add_check(kq_resource_t *r, const kq_resource_t *b)
{
    return merge(r, b, MERGE_CHECK);
}

int kq_resource_max(kq_resource_t *r, const kq_resource_t *b)
{
    return merge(r, b, MERGE_MAX);
}

int kq_resource_fill(kq_resource_t *r, const kq_resource_t *b)
{
    return merge(r, b, MERGE_FILL);
}

bool kq_resource_sub(kq_resource_t *r, const kq_resource_t *b)
{
    bool exact = true;
    uint32_t i = 0;
    uint32_t bn = b->n; /* r and b may be the same set */
    kq_res_entry_t *re = KQ_RES_E(r);
    const kq_res_entry_t *bs = KQ_RES_E(b);
    for (uint32_t j = 0; j < bn; j++) {
        const kq_res_entry_t be = bs[j];
        while (i < r->n && name_cmp(re[i].name, be.name) < 0)
            i++;
        if (i < r->n && re[i].name == be.name) {
            if (re[i].value >= be.value) {
                re[i].value -= be.value;
            } else {
                re[i].value = 0;
                exact = false;
            }
        } else if (be.value > 0) {
            exact = false;
        }
    }
    return exact;
}

bool kq_resource_is_zero(const kq_resource_t *r)
{
    const kq_res_entry_t *e = KQ_RES_E(r);
    for (uint32_t i = 0; i < r->n; i++)
        if (e[i].value != 0)
            return false;
    return true;
}

bool kq_resource_equal(const kq_resource_t *a, const kq_resource_t *b)
{
    const kq_res_entry_t *ae = KQ_RES_E(a), *be = KQ_RES_E(b);
    uint32_t i = 0, j = 0;
    for (;;) {
        while (i < a->n && ae[i].value == 0)
            i++;
        while (j < b->n && be[j].value == 0)
            j++;
        if (i >= a->n || j >= b->n)
            return i >= a->n && j >= b->n;
        if (ae[i].name != be[j].name || ae[i].value != be[j].value)
            return false;
        i++;
        j++;
    }
}

/* Index of iname in max's entries me[0..n), advancing the merge cursor *j (names asked in
 * order). */
static int merge_find(const kq_res_entry_t *me, uint32_t n, uint32_t *j, const char *iname)
{
    while (*j < n && name_cmp(me[*j].name, iname) < 0)
        (*j)++;
    return *j < n && me[*j].name == iname ? (int)*j : -1;
}

bool kq_resource_fits_in(const kq_resource_t *a, const kq_resource_t *max)
{
    const kq_res_entry_t *ae = KQ_RES_E(a), *me = KQ_RES_E(max);
    uint32_t j = 0;
    for (uint32_t i = 0; i < a->n; i++) {
        if (ae[i].value == 0)
            continue;
        int k = merge_find(me, max->n, &j, ae[i].name);
        if (k >= 0 && ae[i].value > me[k].value)
            return false;
    }
    return true;
}

bool kq_resource_fits(const kq_resource_t *used, const kq_resource_t *req, const kq_resource_t *max,
                      const char **failed)
{
    const kq_res_entry_t *ue = KQ_RES_E(used), *qe = KQ_RES_E(req), *me = KQ_RES_E(max);
    uint32_t jm = 0, ju = 0;
    for (uint32_t i = 0; i < req->n; i++) {
        const kq_res_entry_t *q = &qe[i];
        if (q->value == 0)
            continue;
        int k = merge_find(me, max->n, &jm, q->name);
        if (k < 0)
            continue;
        int u = merge_find(ue, used->n, &ju, q->name);
        int64_t total;
        if (__builtin_add_overflow(u >= 0 ? ue[u].value : 0, q->value, &total) || total > me[k].value) {
            if (failed != NULL)
                *failed = q->name;
            return false;
        }
    }
    return true;
}

int kq_resource_min(kq_resource_t *out, const kq_resource_t *a, const kq_resource_t *b)
{
    kq_resource_t t = KQ_RESOURCE_EMPTY;
    int rc = grow(&t, a->n + b->n < kq_resource_max_names() ? a->n + b->n : kq_resource_max_names());
    if (rc != 0)
        return rc;
    const kq_res_entry_t *ae = KQ_RES_E(a), *be = KQ_RES_E(b);
    kq_res_entry_t *te = KQ_RES_E(&t);
    uint32_t i = 0, j = 0;
    while (i < a->n || j < b->n) {
        int c = i >= a->n ? 1 : j >= b->n ? -1 : name_cmp(ae[i].name, be[j].name);
        kq_res_entry_t x;
        if (c < 0) {
            x = ae[i++];
        } else if (c > 0) {
            x = be[j++];
        } else {
            x = ae[i].value <= be[j].value ? ae[i] : be[j];
            i++;
            j++;
        }
        if (t.n == capacity(&t)) {
            kq_resource_free(&t);
            return KQ_ERANGE; /* beyond the limit */
        }
        te[t.n++] = x;
    }
    kq_resource_move(out, &t);
    return 0;
}

/* ====================================================================== JSON ==== */

json_t *kq_resource_to_json(const kq_resource_t *r)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    for (uint32_t i = 0; i < r->n; i++) {
        if (json_object_set_new(o, KQ_RES_E(r)[i].name, json_integer(KQ_RES_E(r)[i].value)) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_INTEGER:
        return "an integer";
    case JSON_REAL:
        return "a number with a fraction or exponent";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    default:
        return "null";
    }
}

int kq_resource_from_json(const json_t *obj, kq_resource_t *out, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (obj == NULL || !json_is_object(obj)) {
        kq_errf(err, errlen, "resources: expected an object of resource name to quantity, got %s",
               obj ? json_type_name(obj) : "nothing");
        return KQ_EPARSE;
    }
    kq_resource_t t = KQ_RESOURCE_EMPTY;
    int rc = 0;
    const char *key;
    size_t key_len;
    json_t *val;
    char qk[QUOTE_BUF];
    json_object_keylen_foreach((json_t *)obj, key, key_len, val)
    {
        quote(qk, sizeof(qk), key, 40);
        size_t clen;
        if (key_len != strlen(key) || name_canonical(key, &clen) == NULL) {
            kq_errf(err, errlen, "invalid resource name %s: expected 1-%d characters of "
                   "[A-Za-z0-9._-] with at most one '/'", qk, KQ_RES_NAME_MAX);
            rc = KQ_EPARSE;
            goto out;
        }
        int64_t v;
        if (json_is_string(val)) {
            const char *s = json_string_value(val);
            if (json_string_length(val) != strlen(s)) {
                kq_errf(err, errlen, "invalid quantity for %s: contains a NUL character", qk);
                rc = KQ_EPARSE;
                goto out;
            }
            rc = kq_quantity_parse(key, s, &v, err, errlen);
            if (rc != 0)
                goto out;
        } else if (json_is_integer(val)) {
            json_int_t iv = json_integer_value(val);
            if (iv < 0) {
                kq_errf(err, errlen, "invalid quantity %lld for %s: negative quantities are not allowed",
                       (long long)iv, qk);
                rc = KQ_ERANGE;
                goto out;
            }
            v = (int64_t)iv;
        } else {
            kq_errf(err, errlen, "invalid quantity for %s: expected a quantity string or a "
                   "non-negative integer, got %s", qk, json_type_name(val));
            rc = KQ_EPARSE;
            goto out;
        }
        const char *iname = kq_resource_name(key);
        if (iname == NULL) {
            kq_errf(err, errlen, "resource %s: too many distinct resource names (at most %d)", qk,
                   KQ_RES_NAMES_MAX);
            rc = KQ_ERANGE;
            goto out;
        }
        if (find_index(&t, iname) >= 0) {
            kq_errf(err, errlen, "resource %s: %s is given more than once", qk, iname);
            rc = KQ_EPARSE;
            goto out;
        }
        rc = insert_sorted(&t, iname, v);
        if (rc != 0) {
            if (rc == KQ_ERANGE)
                kq_errf(err, errlen, "resource %s: too many resources (at most %u)", qk, kq_resource_max_names());
            else
                kq_errf(err, errlen, "resource %s: out of memory", qk);
            goto out;
        }
    }
    kq_resource_move(out, &t);
out:
    kq_resource_free(&t);
    return rc;
}

/* ================================================================ formatting ==== */

static void put(char *buf, size_t len, size_t *pos, const char *s)
{
    size_t n = strlen(s);
    if (*pos + 1 < len) {
        size_t room = len - 1 - *pos;
        memcpy(buf + *pos, s, n < room ? n : room);
    }
    *pos += n;
}

size_t kq_resource_format(const kq_resource_t *r, char *buf, size_t len)
{
    size_t pos = 0;
    char q[32];
    for (uint32_t i = 0; i < r->n; i++) {
        if (i > 0)
            put(buf, len, &pos, " ");
        const kq_res_entry_t *e = &KQ_RES_E(r)[i];
        put(buf, len, &pos, e->name);
        put(buf, len, &pos, "=");
        kq_quantity_format(e->name, e->value, q, sizeof(q));
        put(buf, len, &pos, q);
    }
    if (len > 0)
        buf[pos < len ? pos : len - 1] = '\0';
    return pos;
}
