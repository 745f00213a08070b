/* Unit tests for DRA ResourceClaims: the charge of one claim per device class (kube/claim.c)
 * and the claim table (control/claims.c). The cases follow Kubernetes' ResourceQuota claim
 * evaluator tests (k8s.io/kubernetes pkg/quota/v1/evaluator/core/resource_claims_test.go,
 * TestResourceClaimEvaluatorUsage: a simple request, many requests, an exact count,
 * allocationMode All, an unknown mode, prioritized lists (firstAvailable) with one and several
 * subrequests and classes) and Kueue's DRA tests (kubernetes-sigs/kueue pkg/dra: a template
 * claim of ExactCount devices counts as that many devices of its class). Allocated results
 * are kubequota's own: what was given replaces what may be taken. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kubequota/control/claims.h"
#include "kubequota/kube/claim.h"

#define GPU "gpu.example.com" KQ_CLAIM_RES_SUFFIX
#define TPU "tpu.example.com" KQ_CLAIM_RES_SUFFIX

static const char META[] = "\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\","
                           "\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"uid\":\"u1\"}";

static void parse_ok(const char *json, kq_claim_t *c)
{
    char err[256] = "";
    int rc = kq_claim_parse_text(json, strlen(json), c, err, sizeof(err));
    if (rc != 0)
        fail_msg("parse failed: %d %s\n%s", rc, err, json);
}

static char *claim_json(const char *spec_requests, const char *status)
{
    char *s = NULL;
    if (asprintf(&s, "{%s,\"spec\":{\"devices\":{\"requests\":[%s]}}%s%s%s}", META, spec_requests,
                 status ? ",\"status\":" : "", status ? status : "", "") < 0)
        return NULL;
    return s;
}

static int64_t devs(const kq_claim_t *c, const char *res)
{
    return kq_resource_get(kq_claim_devices(c), res, NULL);
}

static void expect(const char *requests, const char *status, int64_t gpu, int64_t tpu)
{
    char *j = claim_json(requests, status);
    kq_claim_t c;
    parse_ok(j, &c);
    if (devs(&c, GPU) != gpu || devs(&c, TPU) != tpu)
        fail_msg("want gpu=%lld tpu=%lld, got %lld %lld for\n%s", (long long)gpu, (long long)tpu,
                 (long long)devs(&c, GPU), (long long)devs(&c, TPU), j);
    kq_claim_clear(&c);
    free(j);
}

/* evaluator "simple": one exactly request without count or mode is one device (defaults) */
static void test_simple(void **state)
{
    (void)state;
    expect("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\"}}", NULL, 1, 0);
    kq_claim_t c;
    char *j = claim_json("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\"}}", NULL);
    parse_ok(j, &c);
    assert_string_equal(c.ns, "ns");
    assert_string_equal(c.name, "c");
    assert_string_equal(c.uid, "u1");
    assert_false(c.allocated);
    assert_null(c.owner_pod);
    kq_claim_clear(&c);
    free(j);
}

/* evaluator "count" (and Kueue's ExactCount template): count devices */
static void test_exact_count(void **state)
{
    (void)state;
    expect("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"allocationMode\":\"ExactCount\","
           "\"count\":3}}", NULL, 3, 0);
}

/* evaluator "many-requests": requests of one class add up */
static void test_many_requests(void **state)
{
    (void)state;
    expect("{\"name\":\"a\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"count\":2}},"
           "{\"name\":\"b\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\"}}", NULL, 3, 0);
}

/* two classes: each under its own resource name */
static void test_two_classes(void **state)
{
    (void)state;
    expect("{\"name\":\"a\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"count\":2}},"
           "{\"name\":\"b\",\"exactly\":{\"deviceClassName\":\"tpu.example.com\",\"count\":4}}", NULL, 2, 4);
}

/* evaluator "all": allocationMode All is the most an allocation holds (AllocationResultsMaxSize) */
static void test_all(void **state)
{
    (void)state;
    expect("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"allocationMode\":\"All\"}}",
           NULL, KQ_CLAIM_ALL_MAX, 0);
    /* ... until allocated: then what was given (2 devices) */
    expect("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"allocationMode\":\"All\"}}",
           "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\",\"driver\":\"d\",\"pool\":\"p\",\"device\":"
           "\"g0\"},{\"request\":\"r\",\"driver\":\"d\",\"pool\":\"p\",\"device\":\"g1\"}]}}}", 2, 0);
}

/* evaluator "unknown-count-mode": a mode of a newer API counts nothing (never a parse error) */
static void test_unknown_mode(void **state)
{
    (void)state;
    expect("{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"allocationMode\":\"Future\","
           "\"count\":5}}", NULL, 0, 0);
}

/* evaluator "prioritized-list": firstAvailable is its largest alternative per class, and
 * alternatives of different classes each count (the worst case per class) */
static void test_first_available(void **state)
{
    (void)state;
    expect("{\"name\":\"r\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":\"gpu.example.com\","
           "\"count\":4},{\"name\":\"small\",\"deviceClassName\":\"gpu.example.com\",\"count\":1}]}", NULL, 4, 0);
    expect("{\"name\":\"r\",\"firstAvailable\":[{\"name\":\"g\",\"deviceClassName\":\"gpu.example.com\","
           "\"count\":2},{\"name\":\"t\",\"deviceClassName\":\"tpu.example.com\",\"count\":3}]}", NULL, 2, 3);
    expect("{\"name\":\"r\",\"firstAvailable\":[{\"name\":\"g\",\"deviceClassName\":\"gpu.example.com\","
           "\"allocationMode\":\"All\"},{\"name\":\"h\",\"deviceClassName\":\"gpu.example.com\"}]},"
           "{\"name\":\"x\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\"}}", NULL, KQ_CLAIM_ALL_MAX + 1, 0);
}

/* allocated: one device per result, charged to the class of the request it names; a
 * firstAvailable result names "parent/sub" and takes the subrequest's class */
static void test_allocated_results(void **state)
{
    (void)state;
    const char *req = "{\"name\":\"r\",\"firstAvailable\":[{\"name\":\"g\",\"deviceClassName\":\"gpu.example.com\","
                      "\"count\":4},{\"name\":\"t\",\"deviceClassName\":\"tpu.example.com\",\"count\":1}]},"
                      "{\"name\":\"x\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"count\":2}}";
    /* before: gpu 4 + 2, tpu 1 */
    expect(req, NULL, 6, 1);
    /* allocated the fallback t (one tpu) and x's two gpus */
    expect(req,
           "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r/t\",\"driver\":\"d\",\"pool\":\"p\",\"device\":"
           "\"t0\"},{\"request\":\"x\",\"device\":\"g0\"},{\"request\":\"x\",\"device\":\"g1\"}]}},"
           "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"p1\",\"uid\":\"pod-1\"}]}",
           2, 1);
    /* allocated with no results (nothing needed): nothing charged */
    expect(req, "{\"allocation\":{\"devices\":{}}}", 0, 0);
    /* a result naming no request is charged to the "unknown" class, never lost */
    char *j = claim_json(req, "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"zz\",\"device\":\"q\"}]}}}");
    kq_claim_t c;
    parse_ok(j, &c);
    assert_true(c.allocated);
    assert_int_equal(devs(&c, KQ_CLAIM_UNKNOWN_CLASS KQ_CLAIM_RES_SUFFIX), 1);
    kq_claim_clear(&c);
    free(j);
}

static void test_meta(void **state)
{
    (void)state;
    const char *j = "{\"metadata\":{\"name\":\"pod-a-gpu-x7\",\"namespace\":\"team\",\"uid\":\"cu\","
                    "\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"pod-a\",\"uid\":\"pod-uid\","
                    "\"controller\":true,\"blockOwnerDeletion\":true}]},"
                    "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":"
                    "\"gpu.example.com\"}}]}},"
                    "\"status\":{\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"pod-a\",\"uid\":\"pod-uid\"},"
                    "{\"apiGroup\":\"x\",\"resource\":\"things\",\"name\":\"t\",\"uid\":\"o\"}]}}";
    kq_claim_t c;
    parse_ok(j, &c);
    assert_string_equal(c.owner_pod, "pod-uid");
    assert_int_equal(c.n_reserved, 1);
    assert_string_equal(c.reserved[0], "pod-uid");
    assert_int_equal(devs(&c, GPU), 1);
    kq_claim_clear(&c);
    kq_claim_clear(NULL);
}

static void test_resource_name(void **state)
{
    (void)state;
    const char *n = kq_claim_resource_name("gpu.example.com");
    assert_non_null(n);
    assert_string_equal(n, "gpu.example.com.deviceclass.resource.k8s.io/devices");
    /* the name parses as a plain count wherever a resource is */
    int64_t v = 0;
    assert_int_equal(kq_quantity_parse(n, "4", &v, NULL, 0), 0);
    assert_int_equal(v, 4);
    assert_int_equal(kq_quantity_parse_whole(n, "8", &v, NULL, 0), 0);
    assert_int_equal(v, 8);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, "a100.nvidia.com.deviceclass.resource.k8s.io/devices", 2), 0);
    assert_int_equal(kq_resource_get(&r, "a100.nvidia.com.deviceclass.resource.k8s.io/devices", NULL), 2);
    kq_resource_free(&r);
    /* a class of the longest DNS subdomain still makes a name */
    char longc[254];
    memset(longc, 'a', 253);
    longc[253] = '\0';
    assert_non_null(kq_claim_resource_name(longc));
    assert_null(kq_claim_resource_name(""));
    assert_null(kq_claim_resource_name("bad class"));
}

static void test_errors(void **state)
{
    (void)state;
    static const struct {
        const char *json, *want;
    } cases[] = {
        {"[]", "not a JSON object"},
        {"{\"metadata\":{\"name\":\"c\"}}", "metadata.uid: missing"},
        {"{\"metadata\":{\"uid\":\"u\"}}", "metadata.name: missing"},
        {"{\"metadata\":{\"uid\":\"u\",\"name\":\"c\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\"}]}}}",
         "neither exactly nor firstAvailable"},
        {"{\"metadata\":{\"uid\":\"u\",\"name\":\"c\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\","
         "\"exactly\":{\"count\":1}}]}}}", "deviceClassName: missing"},
        {"{\"metadata\":{\"uid\":\"u\",\"name\":\"c\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\","
         "\"exactly\":{\"deviceClassName\":\"g\",\"count\":0}}]}}}", "count: not a whole number"},
        {"{\"metadata\":{\"uid\":\"u\",\"name\":\"c\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\","
         "\"exactly\":{\"deviceClassName\":\"g\",\"count\":\"2\"}}]}}}", "count: wrong type"},
        {"{\"metadata\":{\"uid\":\"u\",\"name\":\"c\"},\"spec\":{\"devices\":[]}}", "spec.devices: wrong type"},
        {"{\"metadata\":{\"uid\":\"u\",\"name\":\"c\"},\"status\":{\"allocation\":[]}}", "status.allocation: wrong"},
        {"{\"metadata\":", "resourceclaim: line 1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kq_claim_t c;
        char err[256] = "";
        int rc = kq_claim_parse_text(cases[i].json, strlen(cases[i].json), &c, err, sizeof(err));
        if (rc != KQ_EPARSE || strstr(err, cases[i].want) == NULL)
            fail_msg("case %zu: rc %d err \"%s\", want \"%s\"", i, rc, err, cases[i].want);
        assert_null(c.uid);
    }
}

/* ---- the claim table ---- */

static void put(kq_claims_t *t, const char *name, const char *requests, const char *status, bool want_changed)
{
    char *j = NULL;
    assert_true(asprintf(&j, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"u-%s\"},\"spec\":"
                             "{\"devices\":{\"requests\":[%s]}}%s%s}", name, name, requests,
                         status ? ",\"status\":" : "", status ? status : "") > 0);
    kq_claim_t c;
    parse_ok(j, &c);
    bool changed = !want_changed;
    assert_int_equal(kq_claims_put(t, &c, &changed), 0);
    assert_int_equal(changed, want_changed);
    assert_null(c.uid); /* taken */
    free(j);
}

static int64_t table_gpus(kq_claims_t *t, const char *name, int *rc)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    *rc = kq_claims_devices(t, "ns", name, &r);
    int64_t v = kq_resource_get(&r, GPU, NULL);
    kq_resource_free(&r);
    return v;
}

static int gone_calls;
static void on_gone(void *ud, const char *ns, const char *name)
{
    (void)ud;
    assert_string_equal(ns, "ns");
    assert_string_equal(name, "b");
    gone_calls++;
}

static void test_table(void **state)
{
    (void)state;
    kq_claims_t *t = kq_claims_new();
    int rc;
    const char *two = "{\"name\":\"r\",\"exactly\":{\"deviceClassName\":\"gpu.example.com\",\"count\":2}}";
    table_gpus(t, "a", &rc);
    assert_int_equal(rc, KQ_ENOENT);
    put(t, "a", two, NULL, true);
    assert_int_equal(table_gpus(t, "a", &rc), 2);
    assert_int_equal(rc, 0);
    put(t, "a", two, NULL, false); /* the same again: unchanged */
    put(t, "a", two, "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\",\"device\":\"g\"}]}}}", true);
    assert_int_equal(table_gpus(t, "a", &rc), 1);
    assert_true(kq_claims_allocated(t, "ns", "a"));
    put(t, "b", two, NULL, true);
    size_t alloc = 9;
    assert_int_equal(kq_claims_size(t, &alloc), 2);
    assert_int_equal(alloc, 1);
    /* a relist that shows only a: b is dropped and reported */
    kq_claims_resync_begin(t);
    put(t, "a", two, "{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"r\",\"device\":\"g\"}]}}}", false);
    gone_calls = 0;
    assert_int_equal(kq_claims_resync_end(t, on_gone, NULL), 1);
    assert_int_equal(gone_calls, 1);
    assert_int_equal(kq_claims_size(t, NULL), 1);
    assert_true(kq_claims_delete(t, "ns", "a"));
    assert_false(kq_claims_delete(t, "ns", "a"));
    assert_int_equal(kq_claims_size(t, &alloc), 0);
    assert_int_equal(alloc, 0);
    kq_claims_free(t);
    kq_claims_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simple),          cmocka_unit_test(test_exact_count),
        cmocka_unit_test(test_many_requests),   cmocka_unit_test(test_two_classes),
        cmocka_unit_test(test_all),             cmocka_unit_test(test_unknown_mode),
        cmocka_unit_test(test_first_available), cmocka_unit_test(test_allocated_results),
        cmocka_unit_test(test_meta),            cmocka_unit_test(test_resource_name),
        cmocka_unit_test(test_errors),          cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
