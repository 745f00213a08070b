/* Unit tests for slices.c: what an allocated device consumes of its pool's shared counters
 * (by class and counter name, summed over counter sets), pool generations (a stale slice's
 * devices are not counted), slice replace/delete and relist, a claim's counter charge from
 * its allocation (requests and firstAvailable subrequests), the extended-resource path
 * (extendedResourceName and the implicit deviceclass.resource.kubernetes.io/<class>, the
 * special claim recognised by annotation and controller, and the de-duplication).
 *
 * The partitionable layout is KEP-4815's and Kubernetes' own test fixtures' (k8s.io/
 * dynamic-resource-allocation structured/internal/allocatortesting: a counter set per
 * physical device, partitions consuming from it); the de-duplication mirrors the
 * ResourceQuota evaluator's (pkg/quota/v1/evaluator/core/resource_claims_test.go,
 * "extended resource claim" cases: the claim's devices minus the pod's own request),
 * turned around: kubequota charges the pod's request as devices and takes them off the
 * special claim. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kubequota/base/log.h"
#include "kubequota/control/claims.h"
#include "kubequota/control/slices.h"
#include "kubequota/kube/claim.h"
#include "kubequota/kube/kube.h"

#define GiB (INT64_C(1) << 30)

static json_t *J(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (j == NULL)
        fail_msg("bad JSON in test: %s: %s", e.text, text);
    return j;
}

static void apply(kq_slices_t *s, int type, const char *text)
{
    json_t *j = J(text);
    assert_int_equal(kq_slices_apply_slice(s, type, j), 0);
    json_decref(j);
}

/* Two GPUs of 80Gi as two counter sets (a slice of their own), and per GPU a whole device
 * and two halves, as tests/cluster/cluster.py publish_devices(partitions=...) writes them. */
#define COUNTERS_SLICE                                                                                        \
    "{\"metadata\":{\"name\":\"n0-0\"},\"spec\":{\"driver\":\"mig.example.com\",\"nodeName\":\"n0\","        \
    "\"pool\":{\"name\":\"n0\",\"generation\":1,\"resourceSliceCount\":2},\"sharedCounters\":["             \
    "{\"name\":\"gpu-0\",\"counters\":{\"memory\":{\"value\":\"80Gi\"}}},"                                  \
    "{\"name\":\"gpu-1\",\"counters\":{\"memory\":{\"value\":\"80Gi\"}}}]}}"

static const char *dev(char *buf, size_t len, int gpu, const char *part, const char *mem)
{
    snprintf(buf, len,
             "{\"name\":\"gpu-%d-%s\",\"consumesCounters\":[{\"counterSet\":\"gpu-%d\",\"counters\":{\"memory\":"
             "{\"value\":\"%s\"},\"sm\":{\"value\":\"%s\"}}}]}",
             gpu, part, gpu, mem, strcmp(part, "full") == 0 ? "8" : "4");
    return buf;
}

static void devices_slice(kq_slices_t *s, int type, int generation)
{
    char text[4096], a[256], b[256], c[256], d[256];
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"n0-1\"},\"spec\":{\"driver\":\"mig.example.com\",\"nodeName\":\"n0\","
             "\"pool\":{\"name\":\"n0\",\"generation\":%d,\"resourceSliceCount\":2},\"devices\":[%s,%s,%s,%s,"
             "{\"name\":\"plain\"}]}}",
             generation, dev(a, sizeof(a), 0, "full", "80Gi"), dev(b, sizeof(b), 0, "half0", "40Gi"),
             dev(c, sizeof(c), 1, "half1", "40Gi"), dev(d, sizeof(d), 1, "full", "80Gi"));
    apply(s, type, text);
}

static int64_t get(const kq_resource_t *r, const char *name)
{
    return kq_resource_get(r, name, NULL);
}

static void test_device_counters_by_class_and_counter(void **state)
{
    (void)state;
    kq_slices_t *s = kq_slices_new();
    apply(s, KQ_WATCH_ADDED, COUNTERS_SLICE);
    devices_slice(s, KQ_WATCH_ADDED, 1);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    /* a half: 40Gi of memory and 4 SMs, under the class it was allocated through */
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-0-half0", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 40 * GiB);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/sm"), 4);
    /* a full GPU adds 80Gi and 8 SMs: a full GPU and a half are not charged alike */
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-1-full", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 120 * GiB);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/sm"), 12);
    /* the same device through another class is charged under that class */
    kq_resource_t other = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_slices_device_counters(s, "big", "mig.example.com", "n0", "gpu-1-full", &other), 0);
    assert_int_equal(get(&other, "big.deviceclass.resource.k8s.io/memory"), 80 * GiB);
    /* a device that consumes nothing: found, charges nothing */
    kq_resource_t none = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "plain", &none), 0);
    assert_true(kq_resource_is_zero(&none));
    /* unknown device, pool or driver: KQ_ENOENT, out untouched */
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-9-full", &none), KQ_ENOENT);
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n1", "gpu-0-full", &none), KQ_ENOENT);
    assert_int_equal(kq_slices_device_counters(s, "mig", "gpu.example.com", "n0", "gpu-0-full", &none), KQ_ENOENT);
    assert_int_equal(none.n, 0);
    size_t nsl, ndev, ncls;
    kq_slices_stats(s, &nsl, &ndev, &ncls);
    assert_int_equal(nsl, 2);
    assert_int_equal(ndev, 4);
    assert_int_equal(ncls, 0);
    kq_resource_free(&r);
    kq_resource_free(&other);
    kq_slices_free(s);
}

static void test_counter_sets_summed_and_devices_reserved(void **state)
{
    (void)state;
    kq_slices_t *s = kq_slices_new();
    /* a device consuming from two counter sets (the most allowed): memory adds up; a counter
     * named "devices" is not charged (it would be the device count of the class) */
    apply(s, KQ_WATCH_ADDED,
          "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"driver\":\"d\",\"pool\":{\"name\":\"p\",\"generation\":3},"
          "\"devices\":[{\"name\":\"two\",\"consumesCounters\":["
          "{\"counterSet\":\"a\",\"counters\":{\"memory\":{\"value\":\"1Gi\"},\"devices\":{\"value\":\"1\"}}},"
          "{\"counterSet\":\"b\",\"counters\":{\"memory\":{\"value\":\"512Mi\"},\"bad\":{\"value\":\"junk\"}}}]}]}}");
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_slices_device_counters(s, "c", "d", "p", "two", &r), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(get(&r, "c.deviceclass.resource.k8s.io/memory"), GiB + GiB / 2);
    kq_resource_free(&r);
    kq_slices_free(s);
}

static void test_pool_generation_and_slice_lifecycle(void **state)
{
    (void)state;
    kq_slices_t *s = kq_slices_new();
    uint64_t g0 = kq_slices_generation(s);
    apply(s, KQ_WATCH_ADDED, COUNTERS_SLICE);
    devices_slice(s, KQ_WATCH_ADDED, 1);
    assert_true(kq_slices_generation(s) > g0);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    /* the driver publishes generation 2 of the pool in a new slice without gpu-0-half0:
     * generation 1's devices no longer count, even while its slice is still listed */
    apply(s, KQ_WATCH_ADDED,
          "{\"metadata\":{\"name\":\"n0-2\"},\"spec\":{\"driver\":\"mig.example.com\",\"pool\":{\"name\":\"n0\","
          "\"generation\":2},\"devices\":[{\"name\":\"gpu-0-full\",\"consumesCounters\":[{\"counterSet\":\"gpu-0\","
          "\"counters\":{\"memory\":{\"value\":\"70Gi\"}}}]}]}}");
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-0-half0", &r), KQ_ENOENT);
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-0-full", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 70 * GiB);
    /* the newest slice deleted: generation 1 is the newest again */
    apply(s, KQ_WATCH_DELETED, "{\"metadata\":{\"name\":\"n0-2\"},\"spec\":{\"driver\":\"mig.example.com\","
                               "\"pool\":{\"name\":\"n0\",\"generation\":2}}}");
    kq_resource_clear(&r);
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-0-half0", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 40 * GiB);
    /* a MODIFIED slice replaces its devices: half0 now consumes 30Gi */
    apply(s, KQ_WATCH_MODIFIED,
          "{\"metadata\":{\"name\":\"n0-1\"},\"spec\":{\"driver\":\"mig.example.com\",\"pool\":{\"name\":\"n0\","
          "\"generation\":1},\"devices\":[{\"name\":\"gpu-0-half0\",\"consumesCounters\":[{\"counterSet\":\"gpu-0\","
          "\"counters\":{\"memory\":{\"value\":\"30Gi\"}}}]}]}}");
    kq_resource_clear(&r);
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-0-half0", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 30 * GiB);
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-1-full", &r), KQ_ENOENT);
    /* a relist that no longer has n0-1 drops it */
    kq_slices_resync_begin(s, false);
    apply(s, KQ_WATCH_ADDED, COUNTERS_SLICE);
    kq_slices_resync_end(s, false);
    assert_int_equal(kq_slices_device_counters(s, "mig", "mig.example.com", "n0", "gpu-0-half0", &r), KQ_ENOENT);
    size_t nsl;
    kq_slices_stats(s, &nsl, NULL, NULL);
    assert_int_equal(nsl, 1);
    /* a slice without a driver, a pool or a name changes nothing */
    json_t *bad = J("{\"metadata\":{\"name\":\"b\"},\"spec\":{\"pool\":{\"name\":\"p\"}}}");
    assert_int_equal(kq_slices_apply_slice(s, KQ_WATCH_ADDED, bad), KQ_EINVAL);
    json_decref(bad);
    kq_resource_free(&r);
    kq_slices_free(s);
}

static void test_claim_counters(void **state)
{
    (void)state;
    kq_slices_t *s = kq_slices_new();
    apply(s, KQ_WATCH_ADDED, COUNTERS_SLICE);
    devices_slice(s, KQ_WATCH_ADDED, 1);
    /* a claim of two requests (one with firstAvailable subrequests of two classes), three
     * devices allocated, one of them on a pool nobody published */
    json_t *claim = J(
        "{\"metadata\":{\"name\":\"c\"},\"spec\":{\"devices\":{\"requests\":["
        "{\"name\":\"a\",\"exactly\":{\"deviceClassName\":\"mig\",\"count\":2}},"
        "{\"name\":\"b\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":\"mig-big\"},"
        "{\"name\":\"small\",\"deviceClassName\":\"mig\"}]}]}},"
        "\"status\":{\"allocation\":{\"devices\":{\"results\":["
        "{\"request\":\"a\",\"driver\":\"mig.example.com\",\"pool\":\"n0\",\"device\":\"gpu-0-half0\"},"
        "{\"request\":\"a\",\"driver\":\"mig.example.com\",\"pool\":\"n9\",\"device\":\"gpu-0-half1\"},"
        "{\"request\":\"b/big\",\"driver\":\"mig.example.com\",\"pool\":\"n0\",\"device\":\"gpu-1-full\"}]}}}}");
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    size_t missing = 99;
    assert_int_equal(kq_slices_claim_counters(s, claim, &r, &missing), 0);
    assert_int_equal(missing, 1);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 40 * GiB);
    assert_int_equal(get(&r, "mig-big.deviceclass.resource.k8s.io/memory"), 80 * GiB);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/sm"), 4);
    /* the slice for n9 arrives: the same claim now charges its device too (the caller
     * recomputes when the generation moves) */
    uint64_t g = kq_slices_generation(s);
    apply(s, KQ_WATCH_ADDED,
          "{\"metadata\":{\"name\":\"n9\"},\"spec\":{\"driver\":\"mig.example.com\",\"pool\":{\"name\":\"n9\","
          "\"generation\":1},\"devices\":[{\"name\":\"gpu-0-half1\",\"consumesCounters\":[{\"counterSet\":\"gpu-0\","
          "\"counters\":{\"memory\":{\"value\":\"40Gi\"}}}]}]}}");
    assert_true(kq_slices_generation(s) != g);
    kq_resource_t r2 = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_slices_claim_counters(s, claim, &r2, &missing), 0);
    assert_int_equal(missing, 0);
    assert_int_equal(get(&r2, "mig.deviceclass.resource.k8s.io/memory"), 80 * GiB);
    json_decref(claim);
    /* unallocated: nothing */
    json_t *pending = J("{\"spec\":{\"devices\":{\"requests\":[{\"name\":\"a\",\"exactly\":"
                        "{\"deviceClassName\":\"mig\",\"count\":1}}]}}}");
    kq_resource_t r3 = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_slices_claim_counters(s, pending, &r3, &missing), 0);
    assert_int_equal(r3.n, 0);
    assert_int_equal(missing, 0);
    json_decref(pending);
    kq_resource_free(&r);
    kq_resource_free(&r2);
    kq_slices_free(s);
}

static void test_extended_resource_path(void **state)
{
    (void)state;
    kq_slices_t *s = kq_slices_new();
    json_t *cls = J("{\"metadata\":{\"name\":\"xgpu\"},\"spec\":{\"extendedResourceName\":\"example.com/gpu\"}}");
    json_t *plain = J("{\"metadata\":{\"name\":\"gpu\"},\"spec\":{}}");
    assert_int_equal(kq_slices_apply_class(s, KQ_WATCH_ADDED, cls), 0);
    assert_int_equal(kq_slices_apply_class(s, KQ_WATCH_ADDED, plain), 0);
    char buf[64];
    assert_true(kq_slices_extended_class(s, "example.com/gpu", buf, sizeof(buf)));
    assert_string_equal(buf, "xgpu");
    assert_false(kq_slices_extended_class(s, "example.com/fpga", buf, sizeof(buf)));
    /* the implicit name names its class whether or not the class exists (kube-scheduler) */
    assert_true(kq_slices_extended_class(s, "deviceclass.resource.kubernetes.io/gpu", buf, sizeof(buf)));
    assert_string_equal(buf, "gpu");

    /* a pod asking example.com/gpu: 2 and the implicit name for gpu: 1 is charged 2 xgpu
     * devices and 1 gpu device besides its requests */
    kq_resource_t req = KQ_RESOURCE_EMPTY, mapped = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&req, "cpu", 100), 0);
    assert_int_equal(kq_resource_set(&req, "example.com/gpu", 2), 0);
    assert_int_equal(kq_resource_set(&req, "deviceclass.resource.kubernetes.io/gpu", 1), 0);
    assert_int_equal(kq_resource_set(&req, "example.com/fpga", 1), 0);
    assert_int_equal(kq_slices_extended_devices(s, &req, &mapped), 0);
    assert_int_equal(mapped.n, 2);
    assert_int_equal(get(&mapped, "xgpu.deviceclass.resource.k8s.io/devices"), 2);
    assert_int_equal(get(&mapped, "gpu.deviceclass.resource.k8s.io/devices"), 1);

    /* the special claim kube-scheduler made for that pod: recognised by annotation and
     * controller; a template's claim (no annotation) or one of another pod is not it */
    json_t *special = J("{\"metadata\":{\"name\":\"p-extended-resources-x\",\"annotations\":{"
                        "\"resource.kubernetes.io/extended-resource-claim\":\"true\"},\"ownerReferences\":[{"
                        "\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"p\",\"uid\":\"u1\",\"controller\":true}]}}");
    json_t *templ = J("{\"metadata\":{\"name\":\"p-gpu\",\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Pod\","
                      "\"name\":\"p\",\"uid\":\"u1\",\"controller\":true}]}}");
    assert_true(kq_slices_is_extended_claim(special, "u1"));
    assert_true(kq_slices_is_extended_claim(special, NULL));
    assert_false(kq_slices_is_extended_claim(special, "u2"));
    assert_false(kq_slices_is_extended_claim(templ, "u1"));

    /* its allocation: 2 xgpu devices, 1 gpu device, and a counter: the devices go (already
     * charged through the requests), the counter stays */
    kq_resource_t claim = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&claim, "xgpu.deviceclass.resource.k8s.io/devices", 2), 0);
    assert_int_equal(kq_resource_set(&claim, "gpu.deviceclass.resource.k8s.io/devices", 1), 0);
    assert_int_equal(kq_resource_set(&claim, "xgpu.deviceclass.resource.k8s.io/memory", 5), 0);
    kq_slices_extended_dedup(&claim, &mapped);
    assert_int_equal(get(&claim, "xgpu.deviceclass.resource.k8s.io/devices"), 0);
    assert_int_equal(get(&claim, "gpu.deviceclass.resource.k8s.io/devices"), 0);
    assert_int_equal(get(&claim, "xgpu.deviceclass.resource.k8s.io/memory"), 5);
    /* a claim holding more than the requests (never from kube-scheduler, but say so): the rest stays */
    assert_int_equal(kq_resource_set(&claim, "xgpu.deviceclass.resource.k8s.io/devices", 3), 0);
    kq_slices_extended_dedup(&claim, &mapped);
    assert_int_equal(get(&claim, "xgpu.deviceclass.resource.k8s.io/devices"), 1);

    /* the class deleted: example.com/gpu is a plain extended resource again; a relist
     * without "gpu" drops it */
    assert_int_equal(kq_slices_apply_class(s, KQ_WATCH_DELETED, cls), 0);
    assert_false(kq_slices_extended_class(s, "example.com/gpu", buf, sizeof(buf)));
    kq_slices_resync_begin(s, true);
    kq_slices_resync_end(s, true);
    size_t ncls = 9;
    kq_slices_stats(s, NULL, NULL, &ncls);
    assert_int_equal(ncls, 0);
    json_decref(cls);
    json_decref(plain);
    json_decref(special);
    json_decref(templ);
    kq_resource_free(&req);
    kq_resource_free(&mapped);
    kq_resource_free(&claim);
    kq_slices_free(s);
    kq_slices_free(NULL);
}

/* The claim table with the device tables wired: an allocated claim's devices are charged
 * their counters, recounted when slices change; kube-scheduler's special claim of the
 * extended-resource path loses its device counts and keeps its counters. */
static int recharged;
static void on_changed(void *ud, const char *ns, const char *name)
{
    (void)ud;
    assert_string_equal(ns, "t");
    assert_string_equal(name, "h1");
    recharged++;
}

static void put_claim(kq_claims_t *t, const char *text)
{
    kq_claim_t c;
    char err[256];
    assert_int_equal(kq_claim_parse_text(text, strlen(text), &c, err, sizeof(err)), 0);
    assert_int_equal(kq_claims_put(t, &c, NULL), 0);
}

#define HALF_CLAIM(name, extra)                                                                            \
    "{\"metadata\":{\"uid\":\"u-" name "\",\"name\":\"" name "\",\"namespace\":\"t\"" extra "},"     \
    "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"mig\"}}]}},"  \
    "\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\",\"driver\":"                \
    "\"mig.example.com\",\"pool\":\"n0\",\"device\":\"gpu-0-half0\"}]}}}}"

static void test_claim_table_counters_and_recount(void **state)
{
    (void)state;
    kq_slices_t *s = kq_slices_new();
    kq_claims_t *t = kq_claims_new();
    kq_claims_set_slices(t, s);
    /* the claim arrives before the slices that publish its device: devices only */
    put_claim(t, HALF_CLAIM("h1", ""));
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_claims_devices(t, "t", "h1", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/devices"), 1);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 0);
    /* the slices arrive: a recount moves the claim's charge and says so, once */
    apply(s, KQ_WATCH_ADDED, COUNTERS_SLICE);
    devices_slice(s, KQ_WATCH_ADDED, 1);
    recharged = 0;
    assert_int_equal(kq_claims_recount(t, on_changed, NULL), 1);
    assert_int_equal(recharged, 1);
    kq_resource_clear(&r);
    assert_int_equal(kq_claims_devices(t, "t", "h1", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/devices"), 1);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 40 * GiB);
    /* nothing changed: a second recount reports nothing (same as the claim put after the slices) */
    assert_int_equal(kq_claims_recount(t, on_changed, NULL), 0);
    put_claim(t, HALF_CLAIM("h1", ""));
    kq_resource_clear(&r);
    assert_int_equal(kq_claims_devices(t, "t", "h1", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 40 * GiB);
    /* the special claim of the extended-resource path: no device count, the counters stay */
    put_claim(t, HALF_CLAIM("x1", ",\"annotations\":{\"resource.kubernetes.io/extended-resource-claim\":\"true\"}"));
    kq_resource_clear(&r);
    assert_int_equal(kq_claims_devices(t, "t", "x1", &r), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/devices"), 0);
    assert_int_equal(get(&r, "mig.deviceclass.resource.k8s.io/memory"), 40 * GiB);
    kq_resource_free(&r);
    kq_claims_free(t);
    kq_slices_free(s);
}

static void test_claim_parse_keeps_devices(void **state)
{
    (void)state;
    const char *text = HALF_CLAIM("h1", "");
    kq_claim_t c;
    char err[256];
    assert_int_equal(kq_claim_parse_text(text, strlen(text), &c, err, sizeof(err)), 0);
    assert_int_equal(c.n_devs, 1);
    assert_string_equal(c.devs[0].driver, "mig.example.com");
    assert_string_equal(c.devs[0].pool, "n0");
    assert_string_equal(c.devs[0].device, "gpu-0-half0");
    assert_string_equal(c.devs[0].res, "mig.deviceclass.resource.k8s.io/devices");
    assert_false(c.extended);
    char cls[32];
    assert_true(kq_claim_class_of(c.devs[0].res, cls, sizeof(cls)));
    assert_string_equal(cls, "mig");
    assert_false(kq_claim_class_of("example.com/gpu", cls, sizeof(cls)));
    assert_false(kq_claim_class_of(c.devs[0].res, cls, 3));
    kq_claim_clear(&c);
}

int main(void)
{
    (void)kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_counters_by_class_and_counter),
        cmocka_unit_test(test_counter_sets_summed_and_devices_reserved),
        cmocka_unit_test(test_pool_generation_and_slice_lifecycle),
        cmocka_unit_test(test_claim_counters),
        cmocka_unit_test(test_extended_resource_path),
        cmocka_unit_test(test_claim_table_counters_and_recount),
        cmocka_unit_test(test_claim_parse_keeps_devices),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
