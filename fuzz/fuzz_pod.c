/* libFuzzer target for the pod model: the bytes are parsed as JSON and handed to
 * kq_pod_parse (and, for extender arguments and watch events, the embedded Pod too),
 * with a small built-in queue configuration so queue resolution runs every branch.
 * Nothing may crash, leak or trip the sanitizers whatever the JSON shape.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -D_GNU_SOURCE \
 *     fuzz/fuzz_pod.c src/pod.c src/config.c src/resource.c src/error.c src/log.c \
 *     -ljansson -lyaml -o build/fuzz_pod
 *   build/fuzz_pod -max_total_time=60 fuzz/corpus/pod
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/config.h"
#include "kubequota/log.h"
#include "kubequota/pod.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char QUEUES[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: team-a\n"
    "          - name: dev\n"
    "            queues:\n"
    "              - name: alice\n"
    "              - name: shared\n"
    "          - name: prod\n"
    "            queues:\n"
    "              - name: shared\n";

static kq_config_t *cfg;
static kq_pod_opts_t opts;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kq_log_set_level("error");
    kq_diags_t d;
    kq_diags_init(&d);
    if (kq_config_load_buffer(QUEUES, strlen(QUEUES), "fuzz.yaml", &cfg, &d) != 0)
        abort();
    kq_diags_free(&d);
    opts.partition = kq_config_partition(cfg, "default");
    opts.default_user = "nobody";
    return 0;
}

static void one(const json_t *obj)
{
    kq_pod_t p, q;
    char err[256];
    if (kq_pod_parse(obj, &opts, &p, err, sizeof(err)) == 0) {
        /* invariants of a parsed pod */
        if (p.uid == NULL || p.ns == NULL || p.name == NULL || p.user == NULL || p.app_id == NULL ||
            p.scheduler_name == NULL || (p.queue == NULL) == (p.queue_error == NULL))
            abort();
        if (kq_pod_copy(&q, &p) == 0)
            kq_pod_clear(&q);
        kq_pod_clear(&p);
    } else if (p.uid != NULL || err[0] == '\0') {
        abort(); /* failure leaves *out zeroed and says why */
    }
    kq_resource_t r;
    (void)!kq_pod_request(json_object_get(obj, "spec"), &r, err, sizeof(err));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    one(j);
    one(json_object_get(j, "Pod"));    /* extender arguments */
    one(json_object_get(j, "object")); /* watch events */
    json_decref(j);
    return 0;
}
