/* libFuzzer target for ResourceSlices and DeviceClasses as their informers deliver them
 * (control/slices.c). The input is one JSON document: applied as a slice ADDED, MODIFIED,
 * then as a DeviceClass; every device it names is looked up (counters under a class), a claim
 * allocated every such device is charged, and then the slice and class are DELETED. Nothing
 * may crash or leak, a charge never goes negative, and once everything is deleted the tables
 * are empty again.
 *
 *   make fuzz FUZZ_SECONDS=60     (seeds: fuzz/corpus/slices)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "kubequota/base/log.h"
#include "kubequota/control/slices.h"
#include "kubequota/kube/kube.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    (void)kq_log_set_level("error");
    return 0;
}

static void no_negative(const kq_resource_t *r)
{
    for (uint32_t i = 0; i < r->n; i++)
        CHECK(KQ_RES_E(r)[i].value >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *obj = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (obj == NULL)
        return 0;
    kq_slices_t *s = kq_slices_new();
    CHECK(s != NULL);
    (void)kq_slices_apply_slice(s, KQ_WATCH_ADDED, obj);
    (void)kq_slices_apply_slice(s, KQ_WATCH_MODIFIED, obj);
    (void)kq_slices_apply_class(s, KQ_WATCH_ADDED, obj);

    /* every device the document names, looked up and charged through one claim */
    const json_t *spec = json_object_get(obj, "spec");
    const char *driver = json_string_value(json_object_get(spec, "driver"));
    const char *pool = json_string_value(json_object_get(json_object_get(spec, "pool"), "name"));
    json_t *results = json_array();
    size_t i;
    const json_t *d;
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    json_array_foreach(json_object_get(spec, "devices"), i, d) {
        const char *name = json_string_value(json_object_get(d, "name"));
        if (driver == NULL || pool == NULL || name == NULL)
            continue;
        (void)kq_slices_device_counters(s, "c", driver, pool, name, &r);
        json_array_append_new(results, json_pack("{s:s,s:s,s:s,s:s}", "request", "r", "driver", driver, "pool", pool,
                                                 "device", name));
    }
    no_negative(&r);
    json_t *claim = json_pack("{s:{s:{s:[{s:s,s:{s:s}}]}},s:{s:{s:{s:o}}}}", "spec", "devices", "requests", "name",
                              "r", "exactly", "deviceClassName", "c", "status", "allocation", "devices", "results",
                              results);
    kq_resource_t cr = KQ_RESOURCE_EMPTY;
    size_t missing = 0;
    if (claim != NULL) {
        (void)kq_slices_claim_counters(s, claim, &cr, &missing);
        no_negative(&cr);
        json_decref(claim);
    }
    kq_resource_t mapped = KQ_RESOURCE_EMPTY;
    const char *ext = json_string_value(json_object_get(spec, "extendedResourceName"));
    if (ext != NULL) {
        kq_resource_t req = KQ_RESOURCE_EMPTY;
        if (kq_resource_set(&req, ext, 1) == 0 && kq_slices_extended_devices(s, &req, &mapped) == 0)
            no_negative(&mapped);
        kq_resource_free(&req);
    }

    (void)kq_slices_apply_slice(s, KQ_WATCH_DELETED, obj);
    (void)kq_slices_apply_class(s, KQ_WATCH_DELETED, obj);
    size_t ns, nd, nc;
    kq_slices_stats(s, &ns, &nd, &nc);
    CHECK(ns == 0 && nd == 0 && nc == 0);
    kq_resource_free(&r);
    kq_resource_free(&cr);
    kq_resource_free(&mapped);
    kq_slices_free(s);
    json_decref(obj);
    return 0;
}
