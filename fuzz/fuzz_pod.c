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
#include <stdbool.h>
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

static bool same_str(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0);
}

/* The informer decodes pods with only kq_pod_fields built: a pod must parse to the same
 * result (or fail with the same reason) from that tree as from the whole object. */
static void same_as_filtered(const json_t *whole, const json_t *filtered)
{
    kq_pod_t a, b;
    char ea[256] = "", eb[256] = "";
    int ra = kq_pod_parse(whole, &opts, &a, ea, sizeof(ea));
    int rb = kq_pod_parse(filtered, &opts, &b, eb, sizeof(eb));
    if (ra != rb || strcmp(ea, eb) != 0)
        abort();
    if (ra != 0)
        return;
    bool same = same_str(a.uid, b.uid) && same_str(a.ns, b.ns) && same_str(a.name, b.name) &&
                same_str(a.node, b.node) && same_str(a.scheduler_name, b.scheduler_name) &&
                same_str(a.user, b.user) && same_str(a.queue, b.queue) && same_str(a.queue_error, b.queue_error) &&
                same_str(a.app_id, b.app_id) && same_str(a.quota_name, b.quota_name) &&
                a.n_groups == b.n_groups && a.phase == b.phase && a.deleting == b.deleting &&
                a.priority == b.priority && a.preemptible == b.preemptible && a.created == b.created &&
                kq_resource_equal(&a.request, &b.request);
    for (size_t i = 0; same && i < a.n_groups; i++)
        same = same_str(a.groups[i], b.groups[i]);
    if (!same)
        abort();
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

/* The Pod of extender arguments and the object of a watch event, filtered the same way. */
static const kq_jfilter_t envelope[] = {{"Pod", kq_pod_fields}, {"object", kq_pod_fields}, {NULL, NULL}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *j = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (j == NULL)
        return 0;
    one(j);
    one(json_object_get(j, "Pod"));    /* extender arguments */
    one(json_object_get(j, "object")); /* watch events */
    json_t *f = NULL, *e = NULL;
    if (memchr(data, '\0', size) != NULL) { /* jansson drops a NUL after a number; jscan refuses */
        json_decref(j);
        return 0;
    }
    if (kq_jscan_json_filtered((const char *)data, size, kq_pod_fields, &f, NULL) != 0 ||
        kq_jscan_json_filtered((const char *)data, size, envelope, &e, NULL) != 0)
        abort(); /* jansson accepted it: so must jscan */
    same_as_filtered(j, f);
    same_as_filtered(json_object_get(j, "Pod"), json_object_get(e, "Pod"));
    same_as_filtered(json_object_get(j, "object"), json_object_get(e, "object"));
    json_decref(f);
    json_decref(e);
    json_decref(j);
    return 0;
}
