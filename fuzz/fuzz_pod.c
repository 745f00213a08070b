/* libFuzzer target for the pod model: the bytes are decoded (kq_jdoc) and handed to
 * kq_pod_parse (and, for extender arguments and watch events, the embedded Pod too),
 * with a small built-in queue configuration so queue resolution runs every branch.
 * Nothing may crash, leak or trip the sanitizers whatever the JSON shape; the informer's
 * filtered view and the jansson entry point (kq_pod_parse_json) must parse to the same
 * result, or fail with the same reason, as the whole document.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Iinclude -D_GNU_SOURCE \
 *     fuzz/fuzz_pod.c src/kube/pod.c src/engine/config.c src/engine/resource.c src/base/error.c src/base/log.c \
 *     -ljansson -lyaml -o build/fuzz_pod
 *   build/fuzz_pod -max_total_time=60 fuzz/corpus/pod
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/log.h"
#include "kubequota/kube/pod.h"

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

/* the same queues with YuniKorn placement rules (placement.h): every rule kind, a parent
 * chain, a regexp filter and a child template */
static const char PLACED[] =
    "partitions:\n"
    "  - name: default\n"
    "    placementrules:\n"
    "      - name: provided\n"
    "        create: true\n"
    "        parent:\n"
    "          name: tag\n"
    "          value: namespace.parentqueue\n"
    "      - name: user\n"
    "        create: true\n"
    "        filter:\n"
    "          type: deny\n"
    "          groups: ['^sys.*$']\n"
    "        parent:\n"
    "          name: fixed\n"
    "          value: dev\n"
    "      - name: tag\n"
    "        value: namespace\n"
    "        create: true\n"
    "    queues:\n"
    "      - name: root\n"
    "        childtemplate:\n"
    "          maxapplications: 3\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: dev\n"
    "            parent: true\n"
    "            queues:\n"
    "              - name: alice\n";

static kq_config_t *cfg, *cfg_placed;
static kq_pod_opts_t opts, opts_placed;
static char ident_note[128]; /* short, so long reasons are cut */

static bool parent_of_ns(void *arg, const char *ns, char *buf, size_t len)
{
    (void)arg;
    if (ns[0] == '\0' || ns[0] == 'x')
        return false;
    snprintf(buf, len, "%s", ns[0] == 'p' ? "root.dev" : ns);
    return true;
}

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
    kq_diags_init(&d);
    if (kq_config_load_buffer(PLACED, strlen(PLACED), "fuzz.yaml", &cfg_placed, &d) != 0)
        abort();
    kq_diags_free(&d);
    opts_placed = opts;
    opts_placed.partition = kq_config_partition(cfg_placed, "default");
    opts_placed.ns_parent_queue = parent_of_ns;
    opts_placed.app_id_fallback = KQ_APPID_YUNIKORN_UNIQUE;
    opts_placed.identity_note = ident_note; /* the reason a malformed user-info is not used */
    opts_placed.identity_note_len = sizeof(ident_note);
    return 0;
}

static void one_with(const kq_jnode_t *obj, const kq_pod_opts_t *o)
{
    kq_pod_t p, q;
    char err[256];
    if (kq_pod_parse(obj, o, &p, err, sizeof(err)) == 0) {
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
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    (void)!kq_pod_request(kq_jnode_get(obj, "spec"), &r, err, sizeof(err));
    kq_resource_free(&r);
}

static void one(const kq_jnode_t *obj)
{
    one_with(obj, &opts);
    opts_placed.scratch = opts.scratch;
    one_with(obj, &opts_placed);
}

static bool same_str(const char *a, const char *b)
{
    return (a == NULL) == (b == NULL) && (a == NULL || strcmp(a, b) == 0);
}

/* Two parses must give the same result (or fail with the same reason). */
static void same_parse(int ra, kq_pod_t *a, const char *ea, int rb, kq_pod_t *b, const char *eb)
{
    if (ra != rb || strcmp(ea, eb) != 0)
        abort();
    if (ra != 0)
        return;
    bool same = same_str(a->uid, b->uid) && same_str(a->ns, b->ns) && same_str(a->name, b->name) &&
                same_str(a->node, b->node) && same_str(a->scheduler_name, b->scheduler_name) &&
                same_str(a->user, b->user) && same_str(a->queue, b->queue) &&
                same_str(a->queue_error, b->queue_error) && same_str(a->app_id, b->app_id) &&
                a->app_named == b->app_named &&
                same_str(a->quota_name, b->quota_name) && a->n_groups == b->n_groups && a->phase == b->phase &&
                a->deleting == b->deleting && a->priority == b->priority && a->preemptible == b->preemptible &&
                a->created == b->created && kq_resource_equal(&a->request, &b->request);
    for (size_t i = 0; same && i < a->n_groups; i++)
        same = same_str(a->groups[i], b->groups[i]);
    same = same && a->n_claims == b->n_claims;
    for (size_t i = 0; same && i < a->n_claims; i++)
        same = same_str(a->claims[i], b->claims[i]);
    if (!same)
        abort();
    kq_pod_clear(a);
    kq_pod_clear(b);
}

/* The informer decodes pods with only kq_pod_fields: a pod must parse to the same result
 * from that view as from the whole document. */
static void same_as_filtered(const kq_jnode_t *whole, const kq_jnode_t *filtered)
{
    kq_pod_t a, b;
    char ea[256] = "", eb[256] = "";
    int ra = kq_pod_parse(whole, &opts, &a, ea, sizeof(ea));
    int rb = kq_pod_parse(filtered, &opts, &b, eb, sizeof(eb));
    same_parse(ra, &a, ea, rb, &b, eb);
}

/* The Pod of extender arguments and the object of a watch event, filtered the same way. */
static const kq_jfilter_t envelope[] = {{"Pod", kq_pod_fields}, {"object", kq_pod_fields}, {NULL, NULL}};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static kq_jdoc_t whole, filtered, env, scratch; /* reused, as the informer reuses its own */
    opts.scratch = &scratch;
    const char *text = (const char *)data;
    json_t *j = json_loadb(text, size, JSON_DECODE_ANY, NULL);
    int rw = kq_jdoc_parse(&whole, text, size, NULL, NULL);
    if (memchr(data, '\0', size) == NULL && (rw == 0) != (j != NULL))
        abort(); /* the same texts are JSON for jansson and for jscan (jansson drops a NUL after
                  * a number; jscan refuses it) */
    if (rw != 0) {
        json_decref(j);
        return 0;
    }
    const kq_jnode_t *root = kq_jdoc_root(&whole);
    one(root);
    one(kq_jnode_get(root, "Pod"));    /* extender arguments */
    one(kq_jnode_get(root, "object")); /* watch events */
    if (kq_jdoc_parse(&filtered, text, size, kq_pod_fields, NULL) != 0 ||
        kq_jdoc_parse(&env, text, size, envelope, NULL) != 0)
        abort(); /* valid whole: valid filtered */
    same_as_filtered(root, kq_jdoc_root(&filtered));
    same_as_filtered(kq_jnode_get(root, "Pod"), kq_jnode_get(kq_jdoc_root(&env), "Pod"));
    same_as_filtered(kq_jnode_get(root, "object"), kq_jnode_get(kq_jdoc_root(&env), "object"));
    /* the jansson entry point (a GET, preemption arguments) agrees too */
    if (j != NULL && json_is_object(j)) {
        kq_pod_t a, b;
        char ea[256] = "", eb[256] = "";
        int ra = kq_pod_parse(root, &opts, &a, ea, sizeof(ea));
        int rb = kq_pod_parse_json(j, &opts, &b, eb, sizeof(eb));
        same_parse(ra, &a, ea, rb, &b, eb);
    }
    json_decref(j);
    return 0;
}
