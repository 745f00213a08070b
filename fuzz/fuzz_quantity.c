/* libFuzzer target for the resource module's parsers of untrusted input:
 * kq_quantity_parse() for several resource names (each unit class), and
 * kq_resource_from_json() on whatever jansson makes of the input.
 *
 * Checked beyond "no crash": every accepted value is >= 0, formats and parses back to
 * the same value; the 64-bit shortcut and the exact path agree (code, value, reason); errors are NUL-terminated and leave the output untouched; a set read
 * from JSON survives to_json -> from_json unchanged.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude fuzz/fuzz_quantity.c \
 *     src/resource.c src/error.c src/log.c -ljansson -o /tmp/fuzz_quantity
 *   /tmp/fuzz_quantity -max_total_time=60 fuzz/corpus/quantity
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/log.h"
#include "kubequota/resource.h"

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

static void fuzz_quantity(const char *s)
{
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        int64_t v = -7;
        char err[128];
        memset(err, 'x', sizeof(err));
        int rc = kq_quantity_parse(names[i], s, &v, err, sizeof(err));
        CHECK(memchr(err, '\0', sizeof(err)) != NULL);
        int64_t ve = -7;
        char eerr[128];
        int rce = kq_quantity_parse_exact(names[i], s, &ve, eerr, sizeof(eerr));
        CHECK(rce == rc && ve == v && strcmp(eerr, err) == 0);
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
    CHECK(r.n <= KQ_RES_MAX);
    for (uint32_t i = 0; i < r.n; i++) {
        CHECK(r.e[i].value >= 0);
        CHECK(kq_resource_name(r.e[i].name) == r.e[i].name);
        if (i > 0)
            CHECK(strcmp(r.e[i - 1].name, r.e[i].name) < 0);
        check_round_trip(r.e[i].name, r.e[i].value);
    }
    json_t *back = kq_resource_to_json(&r);
    CHECK(back != NULL);
    kq_resource_t r2;
    CHECK(kq_resource_from_json(back, &r2, err, sizeof(err)) == 0);
    json_decref(back);
    CHECK(kq_resource_equal(&r, &r2) && r.n == r2.n);

    /* set arithmetic on what was read */
    char buf[1024];
    size_t n = kq_resource_format(&r, buf, sizeof(buf));
    CHECK(n == strlen(buf) || n >= sizeof(buf));
    kq_resource_t sum = r;
    if (kq_resource_add(&sum, &r) == 0) {
        CHECK(kq_resource_fits_in(&r, &sum));
        CHECK(kq_resource_sub(&sum, &r));
        CHECK(kq_resource_equal(&sum, &r));
    } else {
        CHECK(kq_resource_equal(&sum, &r));
    }
    kq_resource_t m;
    kq_resource_min(&m, &r, &r2);
    CHECK(kq_resource_equal(&m, &r));
    CHECK(kq_resource_fits_in(&r, &r));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        kq_log_level_current = -1; /* quiet: the intern table fills up under fuzzing */
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
    return 0;
}
