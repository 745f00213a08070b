/* Unit tests for resource.c: quantity parsing and formatting, interned names, resource
 * set arithmetic and JSON. Expected values are written out by hand or computed by the
 * independent reference tests/unit/quantity_ref.py (Kubernetes semantics), never by the
 * code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "kubequota/engine/resource.h"

#define GPU "nvidia.com/gpu"
#define KI INT64_C(1024)
#define MI (KI * 1024)
#define GI (MI * 1024)
#define EI (GI * 1024 * 1024 * 1024)

/* ------------------------------------------------------------- parse: accepted */

struct parse_ok {
    const char *name, *in;
    int64_t want;
};

static const struct parse_ok parse_ok_cases[] = {
    /* the examples, cpu in millicores */
    {"cpu", "500m", 500},
    {"cpu", "2", 2000},
    {"cpu", "1.5", 1500},
    {"cpu", "2Gi", 2 * GI * 1000},
    {"cpu", "1G", INT64_C(1000000000000)},
    {"cpu", "1e3", 1000000},
    {"cpu", "100Ki", 100 * 1024 * 1000},
    /* ... and memory in bytes */
    {"memory", "2", 2},
    {"memory", "2Gi", 2 * GI},
    {"memory", "1G", 1000000000},
    {"memory", "1e3", 1000},
    {"memory", "100Ki", 102400},
    /* sign and decimal point forms */
    {"cpu", "+1", 1000},
    {"cpu", "1.", 1000},
    {"cpu", ".5", 500},
    {"cpu", "0.001", 1},
    {"cpu", "+.25", 250},
    {"cpu", "31800m", 31800},
    {"cpu", "1500000u", 1500},
    {"cpu", "1000000n", 1},
    {"cpu", "0.0005k", 500},
    {"cpu", "1.G", INT64_C(1000000000000)},
    {"cpu", "9223372036854775.807", INT64_MAX},
    {"cpu", "9223372036854775807m", INT64_MAX},
    /* zero in every spelling, including negative zero */
    {"cpu", "0", 0},
    {"cpu", "-0", 0},
    {"memory", "-0.0", 0},
    {"memory", "0Ki", 0},
    {"memory", "0e9", 0},
    {"memory", "0.000n", 0},
    {"memory", "000", 0},
    /* exponent forms */
    {"cpu", "1e-3", 1},
    {"cpu", "1E-3", 1},
    {"cpu", "0.5e-2", 5},
    {"cpu", "1.3E+6", INT64_C(1300000000)},
    {"memory", "1E6", 1000000},
    {"memory", "1.2e3", 1200},
    {"memory", "129e6", 129000000},
    {"memory", "1.7E18", INT64_C(1700000000000000000)},
    {"memory", "12000e-3", 12},
    {"memory", "1e18", INT64_C(1000000000000000000)},
    /* binary and decimal suffixes on bytes */
    {"memory", "1.5Gi", 1610612736},
    {"memory", "0.5Ki", 512},
    {"memory", "131900000Ki", INT64_C(135065600000)},
    {"memory", "1Ei", EI},
    {"memory", "7Ei", 7 * EI},
    {"memory", "9E", INT64_C(9000000000000000000)},
    {"memory", "1000m", 1},
    {"memory", "1000000000n", 1},
    {"memory", "1k", 1000},
    {"memory", "1M", 1000000},
    {"memory", "1T", INT64_C(1000000000000)},
    {"memory", "1P", INT64_C(1000000000000000)},
    {"memory", "1Mi", MI},
    {"memory", "1Ti", GI * 1024},
    {"memory", "1Pi", GI * 1024 * 1024},
    {"memory", "9223372036854775807", INT64_MAX},
    {"ephemeral-storage", "10Gi", 10 * GI},
    {"storage", "1Ti", GI * 1024},
    {"hugepages-2Mi", "1Gi", GI},
    /* counts */
    {GPU, "1", 1},
    {GPU, "8", 8},
    {GPU, "1k", 1000},
    {GPU, "2e0", 2},
    {GPU, "2000m", 2},
    {"pods", "110", 110},
    /* alias */
    {"vcore", "1.5", 1500},
    /* any length (Kubernetes has no limit) */
    {"memory", "0000000000000000000000000000000000000000000000000000000000000001", 1},
    {"memory", "00000000000000000000000000000000000000000000000000000000000000000000000000000001Ki", 1024},
    {"cpu", "0.000000000000000000000000000000000000000000000000000000000000000000000000000001", 1},
    /* the examples: rounded up as Value() / MilliValue() do */
    {"memory", "1.1Gi", INT64_C(1181116007)},          /* 1181116006.4 bytes */
    {"memory", "1181116006400m", INT64_C(1181116007)}, /* how the API server stores 1.1Gi */
    {"cpu", "100500u", 101},                           /* 100.5m */
    {"memory", "19660.8Mi", INT64_C(20615843021)},     /* 20615843020.8 bytes */
    {"cpu", "0.5m", 1},
    {"cpu", "1.0001", 1001},
    {"cpu", "1n", 1},
    {"cpu", "1e-4", 1},
    {"memory", "0.5", 1},
    {"memory", "500m", 1},
    {"memory", "1n", 1},
    {"memory", "1.1Ki", 1127}, /* 1126.4 */
    {"memory", "1e-1000", 1},
    {GPU, "1.5", 2},
    {GPU, "500m", 1},
    {GPU, "1e-1", 1},
    /* white space around the value, as Quantity.UnmarshalJSON trims it (Go's unicode.IsSpace) */
    {"memory", " 1", 1},
    {"memory", "1 ", 1},
    {"memory", "\t1Gi\n", GI},
    {"memory", "\xc2\xa0" "2\xe3\x80\x80", 2}, /* U+00A0, U+3000 */
    /* no digits at all: Kubernetes' scanner reads zero */
    {"memory", ".", 0},
    {"memory", "+", 0},
    {"memory", "-", 0},
    {"memory", "Ki", 0},
    {"memory", "e-9", 0},
    /* a binary-suffixed quantity is capped at 2^63-1 of its unit, as Kubernetes caps it */
    {"memory", "8Ei", INT64_MAX},
    {"memory", "9007199254740993Ki", INT64_MAX},
    {GPU, "9223372036854775807Ki", INT64_MAX},
    /* the exponent is truncated to int32 as Kubernetes' suffixer does: 2^32 is 0 */
    {"memory", "1e4294967296", 1},
    {"memory", "3e4294967299", 3000},
};

static void test_parse_accepts(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_ok_cases) / sizeof(parse_ok_cases[0]); i++) {
        const struct parse_ok *c = &parse_ok_cases[i];
        int64_t v = -42;
        char err[256] = "untouched";
        int rc = kq_quantity_parse(c->name, c->in, &v, err, sizeof(err));
        if (rc != 0 || v != c->want)
            fail_msg("%s %s: rc=%d v=%lld want %lld (%s)", c->name, c->in, rc, (long long)v,
                     (long long)c->want, err);
    }
}

/* ------------------------------------------------------------- parse: rejected */

struct parse_bad {
    const char *name, *in;
    int rc;
    const char *words; /* must appear in the error text */
};

static const struct parse_bad parse_bad_cases[] = {
    /* syntax */
    {"memory", "", KQ_EPARSE, "empty"},
    {"memory", " \t", KQ_EPARSE, "empty"},
    {"memory", "1 2", KQ_EPARSE, "unknown suffix"},
    {"memory", "aoeu", KQ_EPARSE, "unknown suffix"},
    {"memory", "e-10", KQ_EPARSE, "expected a number"}, /* below nano Kubernetes wants a digit */
    {"memory", "++1", KQ_EPARSE, "unknown suffix"},
    {"memory", "-+", KQ_EPARSE, "unknown suffix"},
    {"memory", "1.5e-2147483647", KQ_EPARSE, "exponent out of range"}, /* Kubernetes' int32 scale wraps */
    {"memory", "12x", KQ_EPARSE, "unknown suffix \"x\""},
    {"memory", "1.1.M", KQ_EPARSE, "unknown suffix \".M\""},
    {"memory", "1+1.0M", KQ_EPARSE, "unknown suffix"},
    {"memory", "0.1mi", KQ_EPARSE, "unknown suffix \"mi\""},
    {"memory", "1i", KQ_EPARSE, "unknown suffix"},
    {"memory", "1K", KQ_EPARSE, "unknown suffix \"K\""},
    {"memory", "1KiB", KQ_EPARSE, "unknown suffix \"KiB\""},
    {"memory", "1e", KQ_EPARSE, "unknown suffix \"e\""},
    {"memory", "0x10", KQ_EPARSE, "unknown suffix \"x10\""},
    {"memory", "1m3", KQ_EPARSE, "unknown suffix"},
    {"memory", "1\xff", KQ_EPARSE, "unknown suffix \"\\xff\""},
    {"memory", "-3.01e-", KQ_EPARSE, "malformed exponent"},
    {"memory", "1e+", KQ_EPARSE, "malformed exponent"},
    {"memory", "1e3.5", KQ_EPARSE, "unknown suffix"},
    {"memory", "1e3k", KQ_EPARSE, "unknown suffix"},
    {"memory", "1ee5", KQ_EPARSE, "malformed exponent"},
    {"memory", "1e99999999999999999999", KQ_EPARSE, "exponent out of range"},
    {"memory", "0e99999999999999999999", KQ_EPARSE, "exponent out of range"},
    /* negative */
    {"cpu", "-1", KQ_ERANGE, "negative"},
    {"cpu", "-0.5m", KQ_ERANGE, "negative"},
    {"memory", "-1Gi", KQ_ERANGE, "negative"},
    {GPU, "-1", KQ_ERANGE, "negative"},
    {"cpu", "-1n", KQ_ERANGE, "negative"},
    /* overflow: beyond int64 Kubernetes' own Value()/MilliValue() overflow */
    {"memory", "9223372036854775808", KQ_ERANGE, "too large"},
    {"cpu", "9223372036854775807", KQ_ERANGE, "too large"},
    {"cpu", "9223372036854775808m", KQ_ERANGE, "too large"},
    {"cpu", "9223372036854775.808", KQ_ERANGE, "too large"},
    {"cpu", "8Ei", KQ_ERANGE, "too large"}, /* capped at 2^63-1 cores: 1000 times too many millicores */
    {"memory", "9223372036854775807.5", KQ_ERANGE, "too large"},
    {"memory", "10E", KQ_ERANGE, "too large"},
    {"memory", "1e19", KQ_ERANGE, "too large"},
    {"memory", "10e18", KQ_ERANGE, "too large"},
    {"memory", "1e1000000", KQ_ERANGE, "too large"},
    {"memory", "9999999999999999999999999999999999999999999999999999999999999999", KQ_ERANGE,
     "too large"},
    {"memory", "9999999999999999999999999999999999999999999999999999999999999999999999999999999",
     KQ_ERANGE, "too large"},
    /* name */
    {"", "1", KQ_EPARSE, "invalid resource name"},
    {"bad name", "1", KQ_EPARSE, "invalid resource name"},
};

static void test_parse_rejects(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(parse_bad_cases) / sizeof(parse_bad_cases[0]); i++) {
        const struct parse_bad *c = &parse_bad_cases[i];
        int64_t v = 12345;
        char err[256] = "";
        int rc = kq_quantity_parse(c->name, c->in, &v, err, sizeof(err));
        if (rc != c->rc || v != 12345 || strstr(err, c->words) == NULL)
            fail_msg("%s \"%s\": rc=%d (want %d) v=%lld err=\"%s\" (want \"%s\")", c->name, c->in, rc,
                     c->rc, (long long)v, err, c->words);
        if (c->rc == KQ_ERANGE && strstr(err, c->name) == NULL)
            fail_msg("%s \"%s\": error does not name the resource: %s", c->name, c->in, err);
    }
}

static void test_parse_error_text(void **state)
{
    (void)state;
    int64_t v = 7;
    char err[256];
    assert_int_equal(kq_quantity_parse("memory", "12x", &v, err, sizeof(err)), KQ_EPARSE);
    assert_string_equal(err, "invalid quantity \"12x\" for memory: unknown suffix \"x\" (expected Ki Mi "
                             "Gi Ti Pi Ei, n u m k M G T P E, or e<exponent>)");
    assert_int_equal(kq_quantity_parse_whole("cpu", "0.5m", &v, err, sizeof(err)), KQ_ERANGE);
    assert_string_equal(err, "invalid quantity \"0.5m\" for cpu: not a whole number of millicores "
                             "(1m = 0.001 cpu)");
    assert_int_equal(kq_quantity_parse("memory", "9223372036854775808", &v, err, sizeof(err)), KQ_ERANGE);
    assert_string_equal(err, "invalid quantity \"9223372036854775808\" for memory: too large (at most "
                             "9223372036854775807 bytes)");
    /* control characters are escaped, long input is cut */
    assert_int_equal(kq_quantity_parse("memory", "1\x01", &v, err, sizeof(err)), KQ_EPARSE);
    assert_non_null(strstr(err, "\"1\\x01\""));
    char longin[100];
    memset(longin, '7', sizeof(longin) - 1);
    longin[sizeof(longin) - 1] = '\0';
    assert_int_equal(kq_quantity_parse("memory", longin, &v, err, sizeof(err)), KQ_ERANGE);
    assert_non_null(strstr(err, "7777...\" for memory: too large"));
    /* small and absent error buffers */
    char tiny[8];
    assert_int_equal(kq_quantity_parse("memory", "12x", &v, tiny, sizeof(tiny)), KQ_EPARSE);
    assert_string_equal(tiny, "invalid");
    assert_int_equal(kq_quantity_parse("memory", "12x", &v, NULL, 0), KQ_EPARSE);
    assert_int_equal(kq_quantity_parse("memory", NULL, &v, err, sizeof(err)), KQ_EPARSE);
    assert_int_equal(kq_quantity_parse(NULL, "1", &v, err, sizeof(err)), KQ_EPARSE);
    assert_int_equal(v, 7);
    /* success clears a stale message */
    strcpy(err, "stale");
    assert_int_equal(kq_quantity_parse("memory", "1", &v, err, sizeof(err)), 0);
    assert_string_equal(err, "");
}

/* -------------------------------------------- Kubernetes' own test inputs, rounded */

/* Every input of TestQuantityParse, TestQuantityParseEmit and TestParseQuantity (the
 * non-negative ones) in kubernetes/apimachinery pkg/api/resource/quantity_test.go, read
 * as memory (Value(): bytes, rounded up) and as cpu (MilliValue(): millicores, rounded
 * up). The expected values were computed by tests/unit/quantity_ref.py, an independent
 * reference written from quantity.go with Python's fractions.Fraction (regenerate with
 * `python3 tests/unit/quantity_ref.py grid`). Q_BIG: beyond int64 in that unit, where
 * Kubernetes' int64 accessors overflow and kubequota says "too large". */
#define Q_BIG INT64_MIN
static const struct {
    const char *in;
    int64_t bytes, millis;
} k8s_grid[] = {
    {"0", INT64_C(0), INT64_C(0)},
    {"0n", INT64_C(0), INT64_C(0)},
    {"0u", INT64_C(0), INT64_C(0)},
    {"0m", INT64_C(0), INT64_C(0)},
    {"0Ki", INT64_C(0), INT64_C(0)},
    {"0k", INT64_C(0), INT64_C(0)},
    {"0Mi", INT64_C(0), INT64_C(0)},
    {"0M", INT64_C(0), INT64_C(0)},
    {"0Gi", INT64_C(0), INT64_C(0)},
    {"0G", INT64_C(0), INT64_C(0)},
    {"0Ti", INT64_C(0), INT64_C(0)},
    {"0T", INT64_C(0), INT64_C(0)},
    {"1", INT64_C(1), INT64_C(1000)},
    {"1Ki", INT64_C(1024), INT64_C(1024000)},
    {"8Ki", INT64_C(8192), INT64_C(8192000)},
    {"7Mi", INT64_C(7340032), INT64_C(7340032000)},
    {"6Gi", INT64_C(6442450944), INT64_C(6442450944000)},
    {"5Ti", INT64_C(5497558138880), INT64_C(5497558138880000)},
    {"4Pi", INT64_C(4503599627370496), INT64_C(4503599627370496000)},
    {"3Ei", INT64_C(3458764513820540928), Q_BIG},
    {"10Ti", INT64_C(10995116277760), INT64_C(10995116277760000)},
    {"100Ti", INT64_C(109951162777600), INT64_C(109951162777600000)},
    {"5n", INT64_C(1), INT64_C(1)},
    {"4u", INT64_C(1), INT64_C(1)},
    {"3m", INT64_C(1), INT64_C(3)},
    {"9", INT64_C(9), INT64_C(9000)},
    {"8k", INT64_C(8000), INT64_C(8000000)},
    {"50k", INT64_C(50000), INT64_C(50000000)},
    {"7M", INT64_C(7000000), INT64_C(7000000000)},
    {"6G", INT64_C(6000000000), INT64_C(6000000000000)},
    {"5T", INT64_C(5000000000000), INT64_C(5000000000000000)},
    {"40T", INT64_C(40000000000000), INT64_C(40000000000000000)},
    {"300T", INT64_C(300000000000000), INT64_C(300000000000000000)},
    {"2P", INT64_C(2000000000000000), INT64_C(2000000000000000000)},
    {"1E", INT64_C(1000000000000000000), Q_BIG},
    {"1E-3", INT64_C(1), INT64_C(1)},
    {"1e3", INT64_C(1000), INT64_C(1000000)},
    {"1E6", INT64_C(1000000), INT64_C(1000000000)},
    {"1e9", INT64_C(1000000000), INT64_C(1000000000000)},
    {"1E12", INT64_C(1000000000000), INT64_C(1000000000000000)},
    {"1e15", INT64_C(1000000000000000), INT64_C(1000000000000000000)},
    {"1E18", INT64_C(1000000000000000000), Q_BIG},
    {"1e14", INT64_C(100000000000000), INT64_C(100000000000000000)},
    {"1e13", INT64_C(10000000000000), INT64_C(10000000000000000)},
    {"100.035k", INT64_C(100035), INT64_C(100035000)},
    {"0.001", INT64_C(1), INT64_C(1)},
    {"0.0005k", INT64_C(1), INT64_C(500)},
    {"0.005", INT64_C(1), INT64_C(5)},
    {"0.05", INT64_C(1), INT64_C(50)},
    {"0.5", INT64_C(1), INT64_C(500)},
    {"0.00050k", INT64_C(1), INT64_C(500)},
    {"0.00500", INT64_C(1), INT64_C(5)},
    {"0.05000", INT64_C(1), INT64_C(50)},
    {"0.50000", INT64_C(1), INT64_C(500)},
    {"0.5e0", INT64_C(1), INT64_C(500)},
    {"0.5e-1", INT64_C(1), INT64_C(50)},
    {"0.5e-2", INT64_C(1), INT64_C(5)},
    {"10.035M", INT64_C(10035000), INT64_C(10035000000)},
    {"1.2e3", INT64_C(1200), INT64_C(1200000)},
    {"1.3E+6", INT64_C(1300000), INT64_C(1300000000)},
    {"1.40e9", INT64_C(1400000000), INT64_C(1400000000000)},
    {"1.53E12", INT64_C(1530000000000), INT64_C(1530000000000000)},
    {"1.6e15", INT64_C(1600000000000000), INT64_C(1600000000000000000)},
    {"1.7E18", INT64_C(1700000000000000000), Q_BIG},
    {"9.01", INT64_C(10), INT64_C(9010)},
    {"8.1k", INT64_C(8100), INT64_C(8100000)},
    {"7.123456M", INT64_C(7123456), INT64_C(7123456000)},
    {"6.987654321G", INT64_C(6987654321), INT64_C(6987654321000)},
    {"5.444T", INT64_C(5444000000000), INT64_C(5444000000000000)},
    {"40.1T", INT64_C(40100000000000), INT64_C(40100000000000000)},
    {"300.2T", INT64_C(300200000000000), INT64_C(300200000000000000)},
    {"2.5P", INT64_C(2500000000000000), INT64_C(2500000000000000000)},
    {"1.01E", INT64_C(1010000000000000000), Q_BIG},
    {"3.001n", INT64_C(1), INT64_C(1)},
    {"1.1E-9", INT64_C(1), INT64_C(1)},
    {"0.0000000001", INT64_C(1), INT64_C(1)},
    {"0.0000000005", INT64_C(1), INT64_C(1)},
    {"0.00000000050", INT64_C(1), INT64_C(1)},
    {"0.5e-9", INT64_C(1), INT64_C(1)},
    {"0.9n", INT64_C(1), INT64_C(1)},
    {"0.00000012345", INT64_C(1), INT64_C(1)},
    {"0.00000012354", INT64_C(1), INT64_C(1)},
    {"9Ei", INT64_C(9223372036854775807), Q_BIG},
    {"9223372036854775807Ki", INT64_C(9223372036854775807), Q_BIG},
    {"12E", Q_BIG, Q_BIG},
    {"100.035Ki", INT64_C(102436), INT64_C(102435840)},
    {"0.5Mi", INT64_C(524288), INT64_C(524288000)},
    {"0.05Gi", INT64_C(53687092), INT64_C(53687091200)},
    {"0.025Ti", INT64_C(27487790695), INT64_C(27487790694400)},
    {"0.000000000001Ki", INT64_C(1), INT64_C(1)},
    {".001", INT64_C(1), INT64_C(1)},
    {".0001k", INT64_C(1), INT64_C(100)},
    {"1.", INT64_C(1), INT64_C(1000)},
    {"1.G", INT64_C(1000000000), INT64_C(1000000000000)},
    {"1Mi", INT64_C(1048576), INT64_C(1048576000)},
    {"1Gi", INT64_C(1073741824), INT64_C(1073741824000)},
    {"1024Mi", INT64_C(1073741824), INT64_C(1073741824000)},
    {"1000M", INT64_C(1000000000), INT64_C(1000000000000)},
    {".001Ki", INT64_C(2), INT64_C(1024)},
    {".000001Ki", INT64_C(1), INT64_C(2)},
    {".000000001Ki", INT64_C(1), INT64_C(1)},
    {".000000000001Ki", INT64_C(1), INT64_C(1)},
    {"999999999999999999", INT64_C(999999999999999999), Q_BIG},
    {"999999999999999999.0", INT64_C(999999999999999999), Q_BIG},
    {"999999999999999999.1", INT64_C(1000000000000000000), Q_BIG},
    {"9999999999999999999", Q_BIG, Q_BIG},
    {"1000000000000000000", INT64_C(1000000000000000000), Q_BIG},
    {"9999999999999999999.0", Q_BIG, Q_BIG},
    {"1.0E", INT64_C(1000000000000000000), Q_BIG},
    {"1000000000000000000.0", INT64_C(1000000000000000000), Q_BIG},
    {"9999999999999999999000m", Q_BIG, Q_BIG},
    {"9999999999999999999.1", Q_BIG, Q_BIG},
    {"1.0000000000000000001E", INT64_C(1000000000000000001), Q_BIG},
    {"1000000000000000000.1", INT64_C(1000000000000000001), Q_BIG},
    {"1.000000000000000001E", INT64_C(1000000000000000001), Q_BIG},
    {"1000000000000000001", INT64_C(1000000000000000001), Q_BIG},
    {"10E", Q_BIG, Q_BIG},
    {"10000000000000000000", Q_BIG, Q_BIG},
    {"10.0E", Q_BIG, Q_BIG},
    {"10000000000000000000.0", Q_BIG, Q_BIG},
    {"10000000000000000000000m", Q_BIG, Q_BIG},
    {"10.0000000000000000001E", Q_BIG, Q_BIG},
    {"10000000000000000000.1", Q_BIG, Q_BIG},
    {"10.000000000000000001E", Q_BIG, Q_BIG},
    {"10000000000000000001", Q_BIG, Q_BIG},
    {"9223372036854775806", INT64_C(9223372036854775806), Q_BIG},
    {"9223372036854775806.0", INT64_C(9223372036854775806), Q_BIG},
    {"9223372036854775806000m", INT64_C(9223372036854775806), Q_BIG},
    {"9223372036854775806.1", INT64_C(9223372036854775807), Q_BIG},
    {"9223372036854775807", INT64_C(9223372036854775807), Q_BIG},
    {"9223372036854775807.0", INT64_C(9223372036854775807), Q_BIG},
    {"9223372036854775807000m", INT64_C(9223372036854775807), Q_BIG},
    {"9223372036854775807.1", Q_BIG, Q_BIG},
    {"9223372036854775808", Q_BIG, Q_BIG},
    {"9223372036854775808.0", Q_BIG, Q_BIG},
    {"9223372036854775808000m", Q_BIG, Q_BIG},
    {"9223372036854775808.1", Q_BIG, Q_BIG},
};

static void check_grid(const char *name, const char *in, int64_t want)
{
    int64_t v = -1;
    char err[256] = "";
    int rc = kq_quantity_parse(name, in, &v, err, sizeof(err));
    if (want == Q_BIG) {
        if (rc != KQ_ERANGE || strstr(err, "too large") == NULL)
            fail_msg("%s \"%s\": rc=%d v=%lld err=\"%s\", want too large", name, in, rc, (long long)v, err);
    } else if (rc != 0 || v != want) {
        fail_msg("%s \"%s\": rc=%d v=%lld err=\"%s\", want %lld", name, in, rc, (long long)v, err,
                 (long long)want);
    }
}

static void test_parse_kubernetes_grid(void **state)
{
    (void)state;
    size_t n = sizeof(k8s_grid) / sizeof(k8s_grid[0]);
    for (size_t i = 0; i < n; i++) {
        check_grid("memory", k8s_grid[i].in, k8s_grid[i].bytes);
        check_grid(GPU, k8s_grid[i].in, k8s_grid[i].bytes); /* counts use Value() too */
        check_grid("cpu", k8s_grid[i].in, k8s_grid[i].millis);
        /* Kubernetes' test also reads every input with an explicit "+" */
        char plus[128];
        snprintf(plus, sizeof(plus), "+%s", k8s_grid[i].in);
        check_grid("memory", plus, k8s_grid[i].bytes);
    }
    assert_true(n > 100);
    /* its invalid list, which must stay invalid (the white space ones are trimmed, as
     * Quantity.UnmarshalJSON trims them) */
    static const char *const invalid[] = {"1.1.M", "1+1.0M", "0.1mi", "0.1am", "aoeu", ".5i", "1i", "-3.01i", "-3.01e-"};
    for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++) {
        int64_t v = 5;
        if (kq_quantity_parse("memory", invalid[i], &v, NULL, 0) != KQ_EPARSE || v != 5)
            fail_msg("\"%s\" is accepted", invalid[i]);
    }
}

/* queues.yaml's own rules go through kq_quantity_parse_whole: no rounding, no cap. */
static void test_parse_whole(void **state)
{
    (void)state;
    int64_t v = 9;
    char err[256];
    assert_int_equal(kq_quantity_parse_whole("cpu", "1500m", &v, err, sizeof(err)), 0);
    assert_int_equal(v, 1500);
    assert_int_equal(kq_quantity_parse_whole("memory", "2Gi", &v, err, sizeof(err)), 0);
    assert_true(v == 2 * GI);
    assert_int_equal(kq_quantity_parse_whole("memory", "1.5Ki", &v, err, sizeof(err)), 0);
    assert_int_equal(v, 1536);
    v = 9;
    assert_int_equal(kq_quantity_parse_whole("memory", "1.1Ki", &v, err, sizeof(err)), KQ_ERANGE);
    assert_non_null(strstr(err, "not a whole number of bytes"));
    assert_int_equal(kq_quantity_parse_whole(GPU, "1.5", &v, err, sizeof(err)), KQ_ERANGE);
    assert_non_null(strstr(err, "not a whole number of units"));
    assert_int_equal(kq_quantity_parse_whole("memory", "8Ei", &v, err, sizeof(err)), KQ_ERANGE);
    assert_non_null(strstr(err, "too large"));
    assert_int_equal(kq_quantity_parse_whole("memory", " 1", &v, err, sizeof(err)), KQ_EPARSE);
    assert_non_null(strstr(err, "whitespace"));
    assert_int_equal(kq_quantity_parse_whole("memory", "Ki", &v, err, sizeof(err)), KQ_EPARSE);
    assert_non_null(strstr(err, "expected a number"));
    assert_int_equal(v, 9);
}

/* ---------------------------------------------------------------------- format */

struct fmt_case {
    const char *name;
    int64_t v;
    const char *want;
};

static const struct fmt_case fmt_cases[] = {
    {"cpu", 1500, "1500m"},
    {"cpu", 2000, "2"},
    {"cpu", 0, "0"},
    {"cpu", 1, "1m"},
    {"vcore", 4000, "4"},
    {"cpu", INT64_MAX, "9223372036854775807m"},
    {"memory", 2 * GI, "2Gi"},
    {"memory", 1536 * MI, "1536Mi"},
    {"memory", 1024, "1Ki"},
    {"memory", 1000, "1k"}, /* BinarySI below 1Ki is written as DecimalSI */
    {"memory", 512, "512"},
    {"memory", 1000000, "1000000"},
    {"memory", 1025, "1025"},
    {"memory", 0, "0"},
    {"memory", EI, "1Ei"},
    {"memory", 7 * EI, "7Ei"},
    {"memory", INT64_MAX, "9223372036854775807"},
    {"hugepages-1Gi", 4 * GI, "4Gi"},
    {"ephemeral-storage", 10 * GI, "10Gi"},
    {GPU, 4096, "4096"},
    {GPU, 1000, "1k"},
    {GPU, 1500, "1500"},
    {GPU, 2000000, "2M"},
    {"cpu", 1000000, "1k"},
    {"cpu", 1500000, "1500"},
    {"cpu", 10000, "10"},
    {"cpu", INT64_C(1000000000000000000), "1P"},
    {"pods", 110, "110"},
};

static void test_format(void **state)
{
    (void)state;
    char buf[64];
    for (size_t i = 0; i < sizeof(fmt_cases) / sizeof(fmt_cases[0]); i++) {
        const struct fmt_case *c = &fmt_cases[i];
        size_t n = kq_quantity_format(c->name, c->v, buf, sizeof(buf));
        if (strcmp(buf, c->want) != 0 || n != strlen(c->want))
            fail_msg("%s %lld: got \"%s\" (%zu), want \"%s\"", c->name, (long long)c->v, buf, n, c->want);
        /* and it reads back */
        int64_t back = -1;
        assert_int_equal(kq_quantity_parse(c->name, buf, &back, NULL, 0), 0);
        assert_true(back == c->v);
    }
    /* snprintf-like truncation */
    char small[4];
    assert_int_equal(kq_quantity_format("cpu", 1500, small, sizeof(small)), 5);
    assert_string_equal(small, "150");
    assert_int_equal(kq_quantity_format("cpu", 1500, NULL, 0), 5);
}

static void test_format_round_trip(void **state)
{
    (void)state;
    static const char *const names[] = {"cpu", "memory", GPU};
    static const int64_t values[] = {0, 1, 999, 1000, 1001, 1023, 1024, 1536, 1000000, 3 * MI, GI - 1,
                                     GI, 5 * EI, INT64_MAX - 1, INT64_MAX};
    char buf[64];
    for (size_t n = 0; n < 3; n++) {
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
            kq_quantity_format(names[n], values[i], buf, sizeof(buf));
            int64_t back = -1;
            if (kq_quantity_parse(names[n], buf, &back, NULL, 0) != 0 || back != values[i])
                fail_msg("%s %lld formatted as %s read back as %lld", names[n], (long long)values[i],
                         buf, (long long)back);
        }
    }
}

/* ----------------------------------------------------------------------- names */

static void test_names(void **state)
{
    (void)state;
    const char *cpu = kq_resource_name("cpu");
    assert_non_null(cpu);
    assert_string_equal(cpu, "cpu");
    char copy[8];
    strcpy(copy, "cpu");
    assert_ptr_equal(kq_resource_name(copy), cpu);
    assert_ptr_equal(kq_resource_name("vcore"), cpu);
    assert_ptr_not_equal(kq_resource_name("memory"), cpu);
    const char *gpu = kq_resource_name(GPU);
    assert_non_null(gpu);
    assert_string_equal(gpu, GPU);
    assert_ptr_equal(kq_resource_name("nvidia.com/gpu"), gpu);
    assert_non_null(kq_resource_name("example.com/foo_bar-1.x"));
    assert_non_null(kq_resource_name("hugepages-2Mi"));
    assert_ptr_not_equal(kq_resource_name("CPU"), cpu); /* names are case-sensitive */

    static const char *const bad[] = {"", "a b", "/gpu", "gpu/", "a/b/c", "gpu\n", "cpu=1", "gpü", "a:b"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (kq_resource_name(bad[i]) != NULL)
            fail_msg("\"%s\" accepted as a resource name", bad[i]);
    assert_null(kq_resource_name(NULL));

    char longname[KQ_RES_NAME_MAX + 2];
    memset(longname, 'a', sizeof(longname));
    longname[KQ_RES_NAME_MAX] = '\0';
    assert_non_null(kq_resource_name(longname));
    longname[KQ_RES_NAME_MAX] = 'a';
    longname[KQ_RES_NAME_MAX + 1] = '\0';
    assert_null(kq_resource_name(longname));
}

#define NTHREADS 8
#define NNAMES 100

static void *intern_worker(void *arg)
{
    const char **out = arg;
    char name[32];
    for (int i = 0; i < NNAMES; i++) {
        snprintf(name, sizeof(name), "example.com/thread-%d", i);
        out[i] = kq_resource_name(name);
    }
    return NULL;
}

static void test_names_threads(void **state)
{
    (void)state;
    static const char *got[NTHREADS][NNAMES];
    pthread_t t[NTHREADS];
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, intern_worker, got[i]), 0);
    for (int i = 0; i < NTHREADS; i++)
        assert_int_equal(pthread_join(t[i], NULL), 0);
    char name[32];
    for (int j = 0; j < NNAMES; j++) {
        snprintf(name, sizeof(name), "example.com/thread-%d", j);
        assert_non_null(got[0][j]);
        assert_string_equal(got[0][j], name);
        for (int i = 1; i < NTHREADS; i++)
            assert_ptr_equal(got[i][j], got[0][j]);
    }
}

/* ------------------------------------------------------------ resource sets */

static kq_resource_t mk(const char *spec)
{
    /* "cpu=1000 memory=5" in canonical units */
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = '\0';
        assert_int_equal(kq_resource_set(&r, tok, strtoll(eq + 1, NULL, 10)), 0);
    }
    return r;
}

static void assert_sorted(const kq_resource_t *r)
{
    for (uint32_t i = 1; i < r->n; i++)
        assert_true(strcmp(KQ_RES_E(r)[i - 1].name, KQ_RES_E(r)[i].name) < 0);
}

/* Same names (as pointers) and values; padding and unused slots are not compared. */
static void assert_same(const kq_resource_t *a, const kq_resource_t *b)
{
    assert_int_equal(a->n, b->n);
    for (uint32_t i = 0; i < a->n; i++) {
        assert_ptr_equal(KQ_RES_E(a)[i].name, KQ_RES_E(b)[i].name);
        assert_true(KQ_RES_E(a)[i].value == KQ_RES_E(b)[i].value);
    }
}

static int64_t val(const kq_resource_t *r, const char *name, bool *present)
{
    return kq_resource_get(r, name, present);
}

static void test_set_get(void **state)
{
    (void)state;
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    bool present = true;
    assert_int_equal(kq_resource_set(&r, "memory", 5), 0);
    assert_int_equal(kq_resource_set(&r, GPU, 2), 0);
    assert_int_equal(kq_resource_set(&r, "vcore", 1500), 0);
    assert_int_equal(r.n, 3);
    assert_string_equal(KQ_RES_E(&r)[0].name, "cpu");
    assert_string_equal(KQ_RES_E(&r)[1].name, "memory");
    assert_string_equal(KQ_RES_E(&r)[2].name, GPU);
    assert_ptr_equal(KQ_RES_E(&r)[0].name, kq_resource_name("cpu"));
    assert_int_equal(val(&r, "cpu", &present), 1500);
    assert_true(present);
    assert_int_equal(val(&r, "vcore", NULL), 1500);
    assert_int_equal(val(&r, "ephemeral-storage", &present), 0);
    assert_false(present);
    present = true;
    assert_int_equal(val(&r, "never.seen/before-xyz", &present), 0);
    assert_false(present);
    present = true;
    assert_int_equal(val(&r, "not a name", &present), 0);
    assert_false(present);

    /* update in place, 0 stays present */
    assert_int_equal(kq_resource_set(&r, "cpu", 0), 0);
    assert_int_equal(r.n, 3);
    assert_int_equal(val(&r, "cpu", &present), 0);
    assert_true(present);

    kq_resource_t before = r;
    assert_int_equal(kq_resource_set(&r, "memory", -1), KQ_EINVAL);
    assert_int_equal(kq_resource_set(&r, "bad name", 1), KQ_EINVAL);
    assert_int_equal(kq_resource_set(&r, NULL, 1), KQ_EINVAL);
    assert_same(&r, &before);
}

static void fill(kq_resource_t *r, const char *prefix, int count)
{
    char name[64];
    for (int i = 0; i < count; i++) {
        snprintf(name, sizeof(name), "%s%02d", prefix, i);
        assert_int_equal(kq_resource_set(r, name, i + 1), 0);
    }
}

#define LIMIT16 16 /* a limit the tests below set (the default is KQ_RES_NAMES_MAX) */

static void test_too_many_names(void **state)
{
    (void)state;
    kq_resource_set_max_names(LIMIT16); /* restored at the end */
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    fill(&r, "example.com/r", LIMIT16);
    assert_int_equal(r.n, LIMIT16);
    assert_sorted(&r);
    kq_resource_t before = r;
    assert_int_equal(kq_resource_set(&r, "example.com/one-more", 1), KQ_ERANGE);
    assert_same(&r, &before);
    /* an existing name can still be updated when full */
    assert_int_equal(kq_resource_set(&r, "example.com/r07", 99), 0);
    assert_int_equal(val(&r, "example.com/r07", NULL), 99);

    /* add that would need more than LIMIT16 names */
    kq_resource_t a = KQ_RESOURCE_EMPTY, b = KQ_RESOURCE_EMPTY;
    fill(&a, "example.com/a", 10);
    fill(&b, "example.com/b", 7);
    kq_resource_t abefore = a;
    assert_int_equal(kq_resource_add(&a, &b), KQ_ERANGE);
    assert_same(&a, &abefore);
    /* 10 + 6 = 16 is fine */
    b.n = 6;
    assert_int_equal(kq_resource_add(&a, &b), 0);
    assert_int_equal(a.n, LIMIT16);
    assert_sorted(&a);
    kq_resource_set_max_names(KQ_RES_NAMES_MAX);
}

static void test_add(void **state)
{
    (void)state;
    kq_resource_t r = mk("memory=100 cpu=500");
    kq_resource_t b = mk("cpu=250 " GPU "=1");
    assert_int_equal(kq_resource_add(&r, &b), 0);
    assert_int_equal(r.n, 3);
    assert_sorted(&r);
    assert_int_equal(val(&r, "cpu", NULL), 750);
    assert_int_equal(val(&r, "memory", NULL), 100);
    assert_int_equal(val(&r, GPU, NULL), 1);
    /* r += r */
    assert_int_equal(kq_resource_add(&r, &r), 0);
    assert_int_equal(val(&r, "cpu", NULL), 1500);
    assert_int_equal(val(&r, GPU, NULL), 2);

    /* overflow leaves r unchanged */
    kq_resource_t big = mk("memory=9223372036854775806 cpu=1");
    kq_resource_t two = mk("memory=2 cpu=1");
    kq_resource_t before = big;
    assert_int_equal(kq_resource_add(&big, &two), KQ_ERANGE);
    assert_same(&big, &before);
    kq_resource_t one = mk("memory=1");
    assert_int_equal(kq_resource_add(&big, &one), 0);
    assert_true(val(&big, "memory", NULL) == INT64_MAX);
}

/* The 64-bit shortcut of kq_quantity_parse agrees with the exact path on a grid of the
 * forms it takes (and the forms next to them), for each unit class. */
static void test_quantity_fast_path(void **state)
{
    (void)state;
    static const char *const names[] = {"cpu", "memory", "nvidia.com/gpu"};
    static const char *const mants[] = {"0", "1", "+2", "007", "1.5", "0.001", ".5", "5.", "999999999999999999",
                                        "9999999999999999999", "9223372036854775807", "922337203685477.5807",
                                        "123456789012345678", "1.000000000000000001", "-1", "+", "1.2.3"};
    static const char *const sufs[] = {"", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi",
                                       "Ti", "Pi", "Ei", "e3", "x", "mi"};
    size_t checked = 0;
    for (size_t a = 0; a < sizeof(names) / sizeof(names[0]); a++)
        for (size_t b = 0; b < sizeof(mants) / sizeof(mants[0]); b++)
            for (size_t c = 0; c < sizeof(sufs) / sizeof(sufs[0]); c++) {
                char q[64], e1[160], e2[160];
                snprintf(q, sizeof(q), "%s%s", mants[b], sufs[c]);
                int64_t v1 = -1, v2 = -1;
                int r1 = kq_quantity_parse(names[a], q, &v1, e1, sizeof(e1));
                int r2 = kq_quantity_parse_exact(names[a], q, &v2, e2, sizeof(e2));
                if (r1 != r2 || v1 != v2 || strcmp(e1, e2) != 0)
                    fail_msg("%s \"%s\": shortcut rc=%d %lld \"%s\", exact rc=%d %lld \"%s\"", names[a], q, r1,
                             (long long)v1, e1, r2, (long long)v2, e2);
                checked++;
            }
    assert_int_equal(checked, 3 * 17 * 19);
    /* and values the shortcut computes, worked out by hand */
    int64_t v;
    assert_int_equal(kq_quantity_parse("cpu", "1.5", &v, NULL, 0), 0);
    assert_int_equal(v, 1500);
    assert_int_equal(kq_quantity_parse("memory", "8Gi", &v, NULL, 0), 0);
    assert_int_equal(v, 8LL << 30);
    assert_int_equal(kq_quantity_parse("memory", "1.5Ki", &v, NULL, 0), 0);
    assert_int_equal(v, 1536);
    assert_int_equal(kq_quantity_parse("cpu", "250m", &v, NULL, 0), 0);
    assert_int_equal(v, 250);
    assert_int_equal(kq_quantity_parse("memory", "7E", &v, NULL, 0), 0);
    assert_int_equal(v, 7000000000000000000LL);
    assert_int_equal(kq_quantity_parse("memory", "8Ei", &v, NULL, 0), 0); /* 2^63, capped */
    assert_true(v == INT64_MAX);
    assert_int_equal(kq_quantity_parse("cpu", "0.5m", &v, NULL, 0), 0);
    assert_int_equal(v, 1);
    assert_int_equal(kq_quantity_parse("memory", "1181116006400m", &v, NULL, 0), 0);
    assert_int_equal(v, 1181116007);
}

static void test_max_fill(void **state)
{
    (void)state;
    kq_resource_t r = mk("memory=100 cpu=500");
    kq_resource_t b = mk("cpu=250 memory=300 " GPU "=1");
    kq_resource_t m = r, f = r;
    assert_int_equal(kq_resource_max(&m, &b), 0);
    assert_sorted(&m);
    assert_int_equal(m.n, 3);
    assert_int_equal(val(&m, "cpu", NULL), 500);    /* r's larger value kept */
    assert_int_equal(val(&m, "memory", NULL), 300); /* b's larger value taken */
    assert_int_equal(val(&m, GPU, NULL), 1);        /* only in b: added */
    assert_int_equal(kq_resource_fill(&f, &b), 0);
    assert_sorted(&f);
    assert_int_equal(f.n, 3);
    assert_int_equal(val(&f, "cpu", NULL), 500);    /* r's own values stay, larger or not */
    assert_int_equal(val(&f, "memory", NULL), 100);
    assert_int_equal(val(&f, GPU, NULL), 1);
    /* more than the limit's names: KQ_ERANGE, unchanged */
    kq_resource_set_max_names(LIMIT16);
    kq_resource_t a = KQ_RESOURCE_EMPTY, c = KQ_RESOURCE_EMPTY;
    fill(&a, "example.com/a", 10);
    fill(&c, "example.com/c", 7);
    kq_resource_t before = a;
    assert_int_equal(kq_resource_max(&a, &c), KQ_ERANGE);
    assert_same(&a, &before);
    assert_int_equal(kq_resource_fill(&a, &c), KQ_ERANGE);
    assert_same(&a, &before);
    kq_resource_set_max_names(KQ_RES_NAMES_MAX);
}

static void test_sub(void **state)
{
    (void)state;
    kq_resource_t r = mk("cpu=1000 memory=100 " GPU "=2");
    kq_resource_t b = mk("cpu=400 memory=100");
    assert_true(kq_resource_sub(&r, &b));
    assert_int_equal(val(&r, "cpu", NULL), 600);
    bool present = false;
    assert_int_equal(val(&r, "memory", &present), 0);
    assert_true(present); /* reached 0, still present */
    assert_int_equal(r.n, 3);

    /* clamped at 0 */
    kq_resource_t c = mk("cpu=700");
    assert_false(kq_resource_sub(&r, &c));
    assert_int_equal(val(&r, "cpu", NULL), 0);
    assert_int_equal(val(&r, GPU, NULL), 2);

    /* a name missing from r with a non-zero amount counts as clamped, adds nothing */
    kq_resource_t d = mk("ephemeral-storage=5");
    assert_false(kq_resource_sub(&r, &d));
    assert_int_equal(r.n, 3);
    kq_resource_t z = mk("ephemeral-storage=0");
    assert_true(kq_resource_sub(&r, &z));

    /* r -= r */
    kq_resource_t s = mk("cpu=3 memory=4");
    assert_true(kq_resource_sub(&s, &s));
    assert_true(kq_resource_is_zero(&s));
    assert_int_equal(s.n, 2);
}

static void test_zero_equal(void **state)
{
    (void)state;
    kq_resource_t empty = KQ_RESOURCE_EMPTY;
    assert_true(kq_resource_is_zero(&empty));
    kq_resource_t z = mk("cpu=0 memory=0");
    assert_true(kq_resource_is_zero(&z));
    kq_resource_t nz = mk("cpu=0 memory=1");
    assert_false(kq_resource_is_zero(&nz));

    assert_true(kq_resource_equal(&z, &empty));
    assert_true(kq_resource_equal(&empty, &z));
    kq_resource_t a = mk("cpu=5 memory=0 " GPU "=1");
    kq_resource_t b = mk(GPU "=1 cpu=5");
    assert_true(kq_resource_equal(&a, &b));
    kq_resource_t c = mk("cpu=5 " GPU "=2");
    assert_false(kq_resource_equal(&a, &c));
    kq_resource_t d = mk("cpu=5");
    assert_false(kq_resource_equal(&a, &d));
    assert_false(kq_resource_equal(&d, &a));
    kq_resource_t e = mk("cpu=5 memory=1");
    assert_false(kq_resource_equal(&a, &e));
}

static void test_fits_in(void **state)
{
    (void)state;
    kq_resource_t max = mk("cpu=1000 " GPU "=0");
    kq_resource_t a = mk("cpu=1000 memory=9223372036854775807");
    assert_true(kq_resource_fits_in(&a, &max)); /* memory missing from max: unlimited */
    kq_resource_t b = mk("cpu=1001");
    assert_false(kq_resource_fits_in(&b, &max));
    kq_resource_t g = mk(GPU "=1");
    assert_false(kq_resource_fits_in(&g, &max)); /* explicit 0: nothing allowed */
    kq_resource_t g0 = mk(GPU "=0 cpu=1");
    assert_true(kq_resource_fits_in(&g0, &max));
    kq_resource_t empty = KQ_RESOURCE_EMPTY;
    assert_true(kq_resource_fits_in(&empty, &max));
    assert_true(kq_resource_fits_in(&b, &empty));
}

static void test_fits(void **state)
{
    (void)state;
    const char *failed = NULL;
    kq_resource_t max = mk("cpu=1000 memory=100 " GPU "=0");
    kq_resource_t used = mk("cpu=900 memory=100");

    kq_resource_t r1 = mk("cpu=100");
    assert_true(kq_resource_fits(&used, &r1, &max, &failed));
    assert_null(failed);

    kq_resource_t r2 = mk("cpu=101");
    assert_false(kq_resource_fits(&used, &r2, &max, &failed));
    assert_ptr_equal(failed, kq_resource_name("cpu"));

    /* a name max does not mention is unlimited */
    kq_resource_t r3 = mk("ephemeral-storage=9223372036854775807 pods=1");
    failed = NULL;
    assert_true(kq_resource_fits(&used, &r3, &max, &failed));
    assert_null(failed);

    /* explicit 0 allows nothing */
    kq_resource_t r4 = mk(GPU "=1");
    assert_false(kq_resource_fits(&used, &r4, &max, &failed));
    assert_ptr_equal(failed, kq_resource_name(GPU));

    /* only names with a non-zero request are checked, even if used is already over */
    kq_resource_t over = mk("cpu=5000 memory=1");
    kq_resource_t r5 = mk("memory=99 cpu=0");
    assert_true(kq_resource_fits(&over, &r5, &max, NULL));
    kq_resource_t r6 = mk("memory=100");
    assert_false(kq_resource_fits(&over, &r6, &max, NULL));

    /* the first failing name in name order */
    kq_resource_t r7 = mk("memory=1 cpu=200");
    assert_false(kq_resource_fits(&used, &r7, &max, &failed));
    assert_ptr_equal(failed, kq_resource_name("cpu"));

    /* used + req overflowing int64 does not fit */
    kq_resource_t umax = mk("memory=9223372036854775807");
    kq_resource_t r8 = mk("memory=1");
    assert_false(kq_resource_fits(&umax, &r8, &umax, &failed));
    assert_ptr_equal(failed, kq_resource_name("memory"));

    /* empty used, request exactly at the max */
    kq_resource_t empty = KQ_RESOURCE_EMPTY;
    kq_resource_t r9 = mk("cpu=1000 memory=100");
    assert_true(kq_resource_fits(&empty, &r9, &max, NULL));
}

static void test_min(void **state)
{
    (void)state;
    kq_resource_t a = mk("cpu=1000 memory=5");
    kq_resource_t b = mk("cpu=500 " GPU "=2");
    kq_resource_t out = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_min(&out, &a, &b), 0);
    kq_resource_t want = mk("cpu=500 memory=5 " GPU "=2");
    assert_int_equal(out.n, 3);
    assert_sorted(&out);
    assert_same(&out, &want);

    /* explicit 0 is kept: nothing allowed wins over unlimited */
    kq_resource_t z = mk(GPU "=0");
    kq_resource_t empty = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_min(&out, &empty, &z), 0);
    bool present = false;
    assert_int_equal(val(&out, GPU, &present), 0);
    assert_true(present);

    /* out may alias an input */
    assert_int_equal(kq_resource_min(&a, &a, &b), 0);
    assert_same(&a, &want);
}

/* ------------------------------------------------------------------- JSON */

static json_t *load(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &je);
    if (j == NULL)
        fail_msg("bad test JSON %s: %s", text, je.text);
    return j;
}

static void test_from_json(void **state)
{
    (void)state;
    json_t *j = load("{\"memory\": \"2Gi\", \"vcore\": \"1.5\", \"nvidia.com/gpu\": 1, "
                     "\"ephemeral-storage\": 1073741824, \"pods\": \"0\"}");
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char err[256] = "x";
    assert_int_equal(kq_resource_from_json(j, &r, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    json_decref(j);
    kq_resource_t want = mk("cpu=1500 memory=2147483648 " GPU "=1 ephemeral-storage=1073741824 pods=0");
    assert_same(&r, &want);

    json_t *empty = load("{}");
    kq_resource_t e = mk("cpu=1");
    assert_int_equal(kq_resource_from_json(empty, &e, err, sizeof(err)), 0);
    assert_int_equal(e.n, 0);
    json_decref(empty);
}

struct json_bad {
    const char *text;
    int rc;
    const char *words[2];
};

static const struct json_bad json_bad_cases[] = {
    {"[]", KQ_EPARSE, {"expected an object", "an array"}},
    {"\"1\"", KQ_EPARSE, {"expected an object", "a string"}},
    {"{\"cpu\": 1.5}", KQ_EPARSE, {"\"cpu\"", "fraction"}},
    {"{\"cpu\": 1e3}", KQ_EPARSE, {"\"cpu\"", "non-negative integer"}},
    {"{\"memory\": -1}", KQ_ERANGE, {"\"memory\"", "negative"}},
    {"{\"memory\": true}", KQ_EPARSE, {"\"memory\"", "a boolean"}},
    {"{\"memory\": null}", KQ_EPARSE, {"\"memory\"", "null"}},
    {"{\"memory\": {}}", KQ_EPARSE, {"\"memory\"", "an object"}},
    {"{\"bad name\": 1}", KQ_EPARSE, {"invalid resource name", "\"bad name\""}},
    {"{\"\": 1}", KQ_EPARSE, {"invalid resource name", "\"\""}},
    {"{\"cpu\": \"1\", \"memory\": \"12x\"}", KQ_EPARSE, {"for memory", "unknown suffix \"x\""}},
    {"{\"nvidia.com/gpu\": \"-1.5\"}", KQ_ERANGE, {"for nvidia.com/gpu", "negative"}},
    {"{\"cpu\": \"1\", \"vcore\": \"2\"}", KQ_EPARSE, {"cpu", "more than once"}},
    {"{\"memory\": \"1 x\"}", KQ_EPARSE, {"for memory", "unknown suffix"}},
};

static void test_from_json_rejects(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(json_bad_cases) / sizeof(json_bad_cases[0]); i++) {
        const struct json_bad *c = &json_bad_cases[i];
        json_t *j = load(c->text);
        kq_resource_t r = mk("cpu=7");
        kq_resource_t before = r;
        char err[256] = "";
        int rc = kq_resource_from_json(j, &r, err, sizeof(err));
        json_decref(j);
        if (rc != c->rc || strstr(err, c->words[0]) == NULL || strstr(err, c->words[1]) == NULL)
            fail_msg("%s: rc=%d (want %d) err=\"%s\"", c->text, rc, c->rc, err);
        assert_same(&r, &before);
    }

    /* a string with an embedded NUL is not silently cut */
    json_t *o = json_object();
    assert_int_equal(json_object_set_new(o, "memory", json_stringn("1\0junk", 6)), 0);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char err[256];
    assert_int_equal(kq_resource_from_json(o, &r, err, sizeof(err)), KQ_EPARSE);
    assert_non_null(strstr(err, "NUL"));
    json_decref(o);

    /* NULL and too many names */
    kq_resource_set_max_names(LIMIT16);
    assert_int_equal(kq_resource_from_json(NULL, &r, err, sizeof(err)), KQ_EPARSE);
    json_t *many = json_object();
    char name[32];
    for (int i = 0; i <= LIMIT16; i++) {
        snprintf(name, sizeof(name), "example.com/j%02d", i);
        assert_int_equal(json_object_set_new(many, name, json_integer(1)), 0);
    }
    assert_int_equal(kq_resource_from_json(many, &r, err, sizeof(err)), KQ_ERANGE);
    assert_non_null(strstr(err, "too many resources"));
    assert_int_equal(r.n, 0);
    json_decref(many);
    kq_resource_set_max_names(KQ_RES_NAMES_MAX);
}

static void test_json_round_trip(void **state)
{
    (void)state;
    kq_resource_t r = mk("cpu=1500 memory=9223372036854775807 " GPU "=0 hugepages-2Mi=4194304");
    json_t *j = kq_resource_to_json(&r);
    assert_non_null(j);
    assert_int_equal(json_object_size(j), 4);
    assert_true(json_integer_value(json_object_get(j, "cpu")) == 1500);
    assert_true(json_integer_value(json_object_get(j, "memory")) == INT64_MAX);
    assert_true(json_is_integer(json_object_get(j, GPU)));
    assert_true(json_integer_value(json_object_get(j, GPU)) == 0);
    char *text = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(text, "{\"cpu\":1500,\"hugepages-2Mi\":4194304,\"memory\":9223372036854775807,"
                              "\"nvidia.com/gpu\":0}");
    free(text);
    kq_resource_t back = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_from_json(j, &back, NULL, 0), 0);
    assert_same(&back, &r);
    json_decref(j);

    kq_resource_t empty = KQ_RESOURCE_EMPTY;
    j = kq_resource_to_json(&empty);
    assert_non_null(j);
    assert_int_equal(json_object_size(j), 0);
    json_decref(j);
}

static void test_resource_format(void **state)
{
    (void)state;
    char buf[128];
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_format(&r, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");

    r = mk("memory=2147483648 cpu=1500");
    assert_int_equal(kq_resource_format(&r, buf, sizeof(buf)), strlen("cpu=1500m memory=2Gi"));
    assert_string_equal(buf, "cpu=1500m memory=2Gi");

    r = mk(GPU "=2 cpu=2000 memory=1000 pods=0");
    kq_resource_format(&r, buf, sizeof(buf));
    assert_string_equal(buf, "cpu=2 memory=1k nvidia.com/gpu=2 pods=0");

    char small[8];
    assert_int_equal(kq_resource_format(&r, small, sizeof(small)),
                     strlen("cpu=2 memory=1k nvidia.com/gpu=2 pods=0"));
    assert_string_equal(small, "cpu=2 m");
    assert_int_equal(kq_resource_format(&r, NULL, 0), strlen("cpu=2 memory=1k nvidia.com/gpu=2 pods=0"));
}

/* Must run last: fills the process-wide intern table. */
static void test_intern_table_full(void **state)
{
    (void)state;
    const char *cpu = kq_resource_name("cpu");
    char name[64];
    int added = 0;
    while (added < 2 * KQ_RES_NAMES_MAX) {
        snprintf(name, sizeof(name), "fill.example.com/n%d", added);
        if (kq_resource_name(name) == NULL)
            break;
        added++;
    }
    /* earlier tests interned well under 300 names */
    assert_true(added <= KQ_RES_NAMES_MAX);
    assert_true(added > KQ_RES_NAMES_MAX - 300);
    /* full: new names are refused, old ones still resolve to the same pointers */
    assert_null(kq_resource_name("fill.example.com/one-more"));
    assert_ptr_equal(kq_resource_name("cpu"), cpu);
    assert_ptr_equal(kq_resource_name("vcore"), cpu);
    snprintf(name, sizeof(name), "fill.example.com/n%d", added - 1);
    assert_non_null(kq_resource_name(name));
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_not_equal(kq_resource_set(&r, "fill.example.com/one-more", 1), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(kq_resource_set(&r, "cpu", 1), 0);
    json_t *j = load("{\"fill.example.com/one-more\": 1}");
    char err[256];
    assert_int_equal(kq_resource_from_json(j, &r, err, sizeof(err)), KQ_ERANGE);
    assert_non_null(strstr(err, "too many distinct resource names"));
    json_decref(j);
    int64_t v;
    /* parsing does not need to intern */
    assert_int_equal(kq_quantity_parse("fill.example.com/one-more", "3", &v, NULL, 0), 0);
    assert_int_equal(v, 3);
}

/* ------------------------------------------------- beyond KQ_RES_INLINE names ---- */
/* Sets with more names than fit inline spill to the heap (resource.h, Storage and
 * ownership). The limit is lifted for these tests; every expected value comes from a
 * plain array model indexed by the name's number, not from the module. Run under
 * `make asan`, they also check that copy/move/free own the heap arrays exactly. */

#define NM 48 /* model names: example.com/m00 .. m47 */

static const char *mname(int i)
{
    char b[32];
    snprintf(b, sizeof(b), "example.com/m%02d", i);
    return kq_resource_name(b);
}

/* r from model v[0..NM): names with v[i] >= 0 are present, inserted in a scrambled order. */
static void from_model(kq_resource_t *r, const int64_t *v)
{
    for (int k = 0; k < NM; k++) {
        int i = (k * 29 + 7) % NM; /* 29 is prime to 48: every index once */
        if (v[i] >= 0)
            assert_int_equal(kq_resource_set(r, mname(i), v[i]), 0);
    }
}

static void assert_model(const kq_resource_t *r, const int64_t *v)
{
    uint32_t n = 0;
    for (int i = 0; i < NM; i++) {
        bool present = false;
        int64_t got = kq_resource_get(r, mname(i), &present);
        assert_int_equal(present, v[i] >= 0);
        if (v[i] >= 0) {
            assert_true(got == v[i]);
            n++;
        }
    }
    assert_int_equal(r->n, n);
    assert_sorted(r);
}

static int lift_limit(void **state)
{
    (void)state;
    kq_resource_set_max_names(UINT32_MAX);
    return 0;
}

static int restore_limit(void **state)
{
    (void)state;
    kq_resource_set_max_names(KQ_RES_NAMES_MAX); /* the default */
    return 0;
}

static void test_many_set_copy_move(void **state)
{
    (void)state;
    int64_t v[NM];
    for (int i = 0; i < NM; i++)
        v[i] = i % 3 == 0 ? -1 : i * 1000; /* 32 names */
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    from_model(&r, v);
    assert_true(r.n > KQ_RES_INLINE);
    assert_model(&r, v);

    /* copy into an empty set, an inline one and a spilled one; then they are independent */
    kq_resource_t c1 = KQ_RESOURCE_EMPTY, c2 = mk("cpu=1"), c3 = KQ_RESOURCE_EMPTY;
    from_model(&c3, v);
    assert_int_equal(kq_resource_set(&c3, "example.com/other", 5), 0);
    assert_int_equal(kq_resource_copy(&c1, &r), 0);
    assert_int_equal(kq_resource_copy(&c2, &r), 0);
    assert_int_equal(kq_resource_copy(&c3, &r), 0);
    assert_int_equal(kq_resource_set(&r, mname(1), 7), 0);
    int64_t w[NM];
    memcpy(w, v, sizeof w);
    w[1] = 7;
    assert_model(&r, w);
    assert_model(&c1, v);
    assert_model(&c2, v);
    assert_model(&c3, v);
    assert_int_equal(kq_resource_copy(&c1, &c1), 0); /* self-copy is a no-op */
    assert_model(&c1, v);

    /* move: the source is left empty, the destination's old heap array is released */
    kq_resource_move(&c2, &r);
    assert_model(&c2, w);
    assert_int_equal(r.n, 0);
    /* a spilled set shrunk back below KQ_RES_INLINE still works, and frees cleanly */
    kq_resource_t small = mk("cpu=2 memory=3");
    assert_int_equal(kq_resource_copy(&c3, &small), 0);
    assert_same(&c3, &small);
    kq_resource_move(&c3, &small); /* inline source into a spilled destination */
    assert_int_equal(c3.n, 2);
    assert_int_equal(val(&c3, "memory", NULL), 3);

    kq_resource_free(&r);
    kq_resource_free(&c1);
    kq_resource_free(&c2);
    kq_resource_free(&c3);
    kq_resource_free(&small);
    kq_resource_free(NULL);
    assert_int_equal(c1.n, 0);
}

static void test_many_add_sub(void **state)
{
    (void)state;
    int64_t a[NM], b[NM], want[NM];
    for (int i = 0; i < NM; i++) {
        a[i] = i < 30 ? 10 * i : -1;           /* m00..m29 */
        b[i] = i >= 14 && i < 44 ? i + 1 : -1; /* m14..m43 */
        want[i] = a[i] < 0 && b[i] < 0 ? -1 : (a[i] < 0 ? 0 : a[i]) + (b[i] < 0 ? 0 : b[i]);
    }
    kq_resource_t ra = KQ_RESOURCE_EMPTY, rb = KQ_RESOURCE_EMPTY;
    from_model(&ra, a);
    from_model(&rb, b);
    assert_int_equal(kq_resource_add_check(&ra, &rb), 0);
    assert_model(&ra, a); /* add_check changes no entry */
    assert_int_equal(kq_resource_add(&ra, &rb), 0);
    assert_model(&ra, want); /* 44 names */

    /* r += r */
    kq_resource_t d = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_copy(&d, &ra), 0);
    assert_int_equal(kq_resource_add(&d, &d), 0);
    int64_t twice[NM];
    for (int i = 0; i < NM; i++)
        twice[i] = want[i] < 0 ? -1 : 2 * want[i];
    assert_model(&d, twice);

    /* overflow in the last name: KQ_ERANGE, nothing changed */
    kq_resource_t big = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&big, mname(0), 1), 0);
    assert_int_equal(kq_resource_set(&big, mname(43), INT64_MAX), 0);
    assert_int_equal(kq_resource_set(&big, mname(47), 1), 0); /* a new name too */
    assert_int_equal(kq_resource_add_check(&ra, &big), KQ_ERANGE);
    assert_int_equal(kq_resource_add(&ra, &big), KQ_ERANGE);
    assert_model(&ra, want);

    /* sub back: exact; then once more: clamped at 0, names stay */
    assert_true(kq_resource_sub(&ra, &rb));
    int64_t back[NM];
    for (int i = 0; i < NM; i++)
        back[i] = want[i] < 0 ? -1 : (a[i] < 0 ? 0 : a[i]);
    assert_model(&ra, back);
    assert_false(kq_resource_sub(&ra, &rb));
    for (int i = 0; i < NM; i++)
        if (b[i] >= 0)
            back[i] = a[i] < 0 || a[i] < b[i] ? 0 : a[i] - b[i];
    assert_model(&ra, back);

    /* max and fill */
    kq_resource_t mx = KQ_RESOURCE_EMPTY, fl = KQ_RESOURCE_EMPTY;
    from_model(&mx, a);
    from_model(&fl, a);
    assert_int_equal(kq_resource_max(&mx, &rb), 0);
    assert_int_equal(kq_resource_fill(&fl, &rb), 0);
    int64_t wmax[NM], wfill[NM];
    for (int i = 0; i < NM; i++) {
        wmax[i] = a[i] > b[i] ? a[i] : b[i];
        wfill[i] = a[i] >= 0 ? a[i] : b[i];
    }
    assert_model(&mx, wmax);
    assert_model(&fl, wfill);

    /* min: a name missing on one side takes the other side's value */
    kq_resource_t mn = KQ_RESOURCE_EMPTY;
    from_model(&mn, b);
    assert_int_equal(kq_resource_min(&mn, &mn, &mx), 0); /* out aliases an input */
    int64_t wmin[NM];
    for (int i = 0; i < NM; i++)
        wmin[i] = b[i] < 0 ? wmax[i] : wmax[i] < 0 ? b[i] : (b[i] < wmax[i] ? b[i] : wmax[i]);
    assert_model(&mn, wmin);

    kq_resource_free(&ra);
    kq_resource_free(&rb);
    kq_resource_free(&d);
    kq_resource_free(&big);
    kq_resource_free(&mx);
    kq_resource_free(&fl);
    kq_resource_free(&mn);
}

static void test_many_compare_fits(void **state)
{
    (void)state;
    int64_t mx[NM], used[NM], req[NM];
    for (int i = 0; i < NM; i++) {
        mx[i] = i < 24 ? 100 : -1;        /* a max naming 24 resources */
        used[i] = i < 20 ? 50 + i : -1;   /* used in 20 of them */
        req[i] = i >= 4 && i < 24 ? 5 : -1; /* a request naming 20 */
    }
    kq_resource_t m = KQ_RESOURCE_EMPTY, u = KQ_RESOURCE_EMPTY, q = KQ_RESOURCE_EMPTY;
    from_model(&m, mx);
    from_model(&u, used);
    from_model(&q, req);
    const char *failed = NULL;
    assert_true(kq_resource_fits(&u, &q, &m, &failed)); /* at most 69 + 5 <= 100 */
    assert_true(kq_resource_fits_in(&u, &m));
    /* m17 becomes the one that does not fit: 50+17 + 34 = 101 > 100; m19 too, later */
    assert_int_equal(kq_resource_set(&q, mname(17), 34), 0);
    assert_int_equal(kq_resource_set(&q, mname(19), 40), 0);
    assert_false(kq_resource_fits(&u, &q, &m, &failed));
    assert_ptr_equal(failed, mname(17));
    /* a name the max does not list is unlimited */
    assert_int_equal(kq_resource_set(&q, mname(17), 1), 0);
    assert_int_equal(kq_resource_set(&q, mname(19), 1), 0);
    assert_int_equal(kq_resource_set(&q, mname(40), INT64_MAX), 0);
    assert_true(kq_resource_fits(&u, &q, &m, NULL));
    /* fits_in(q, u): names missing from u (m20..m23, m40) are unlimited; m04..m19 fit */
    assert_true(kq_resource_fits_in(&q, &u));
    assert_int_equal(kq_resource_set(&q, mname(18), 69), 0); /* used has 50+18 = 68 */
    assert_false(kq_resource_fits_in(&q, &u));

    /* equal ignores zero entries and storage */
    kq_resource_t a = KQ_RESOURCE_EMPTY, b = mk("example.com/m05=9");
    for (int i = 0; i < 30; i++)
        assert_int_equal(kq_resource_set(&a, mname(i), i == 5 ? 9 : 0), 0);
    assert_true(a.n > KQ_RES_INLINE);
    assert_true(kq_resource_equal(&a, &b));
    assert_true(kq_resource_equal(&b, &a));
    assert_int_equal(kq_resource_set(&a, mname(29), 1), 0);
    assert_false(kq_resource_equal(&a, &b));
    assert_false(kq_resource_is_zero(&a));

    kq_resource_free(&m);
    kq_resource_free(&u);
    kq_resource_free(&q);
    kq_resource_free(&a);
    kq_resource_free(&b);
}

static void test_many_json_format(void **state)
{
    (void)state;
    json_t *o = json_object();
    for (int i = 0; i < 24; i++) {
        char k[32], q[32];
        snprintf(k, sizeof k, "example.com/m%02d", i);
        snprintf(q, sizeof q, "%d", i + 1);
        assert_int_equal(json_object_set_new(o, k, json_string(q)), 0);
    }
    assert_int_equal(json_object_set_new(o, "hugepages-1Gi", json_string("2Gi")), 0);
    kq_resource_t r = mk("cpu=1"); /* replaced, not added to */
    char err[256];
    assert_int_equal(kq_resource_from_json(o, &r, err, sizeof err), 0);
    assert_int_equal(r.n, 25);
    assert_int_equal(val(&r, "cpu", NULL), 0);
    assert_int_equal(val(&r, "hugepages-1Gi", NULL), 2 * GI);
    assert_int_equal(val(&r, "example.com/m23", NULL), 24);
    json_t *back = kq_resource_to_json(&r);
    assert_int_equal(json_object_size(back), 25);
    assert_int_equal(json_integer_value(json_object_get(back, "example.com/m07")), 8);
    char buf[2048];
    size_t len = kq_resource_format(&r, buf, sizeof buf);
    assert_int_equal(len, strlen(buf));
    assert_non_null(strstr(buf, "example.com/m00=1 example.com/m01=2 "));
    assert_non_null(strstr(buf, "example.com/m23=24 hugepages-1Gi=2Gi"));
    /* an error leaves r as it was */
    assert_int_equal(json_object_set_new(o, "example.com/bad", json_string("1x")), 0);
    assert_int_equal(kq_resource_from_json(o, &r, err, sizeof err), KQ_EPARSE);
    assert_int_equal(r.n, 25);
    /* the limit is enforced when set: 25 names > 20 */
    kq_resource_set_max_names(20);
    json_object_del(o, "example.com/bad");
    kq_resource_t s = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_from_json(o, &s, err, sizeof err), KQ_ERANGE);
    assert_non_null(strstr(err, "at most 20"));
    assert_int_equal(s.n, 0);
    kq_resource_set_max_names(UINT32_MAX);
    json_decref(o);
    json_decref(back);
    kq_resource_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_accepts),
        cmocka_unit_test(test_parse_rejects),
        cmocka_unit_test(test_parse_error_text),
        cmocka_unit_test(test_parse_kubernetes_grid),
        cmocka_unit_test(test_parse_whole),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_format_round_trip),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_names_threads),
        cmocka_unit_test(test_set_get),
        cmocka_unit_test(test_too_many_names),
        cmocka_unit_test(test_add),
        cmocka_unit_test(test_max_fill),
        cmocka_unit_test(test_quantity_fast_path),
        cmocka_unit_test(test_sub),
        cmocka_unit_test(test_zero_equal),
        cmocka_unit_test(test_fits_in),
        cmocka_unit_test(test_fits),
        cmocka_unit_test(test_min),
        cmocka_unit_test(test_from_json),
        cmocka_unit_test(test_from_json_rejects),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_resource_format),
        cmocka_unit_test_setup_teardown(test_many_set_copy_move, lift_limit, restore_limit),
        cmocka_unit_test_setup_teardown(test_many_add_sub, lift_limit, restore_limit),
        cmocka_unit_test_setup_teardown(test_many_compare_fits, lift_limit, restore_limit),
        cmocka_unit_test_setup_teardown(test_many_json_format, lift_limit, restore_limit),
        cmocka_unit_test(test_intern_table_full), /* last: it fills the name table */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
