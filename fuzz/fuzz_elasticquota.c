/* libFuzzer target for ElasticQuota objects (both API groups) and Node objects as the
 * informers deliver them, and for the ElasticQuota admission hook. The input is one JSON
 * document: an object is applied as ADDED, MODIFIED and DELETED in turn (a node too), and
 * also validated as an AdmissionReview request. Nothing may crash or leak, a rejected object
 * must say why, and once every object is deleted again the quota tree must be back to the
 * groups the queues file defines (nothing applied half-way stays behind).
 *
 *   make fuzz FUZZ_SECONDS=60     (seeds: fuzz/corpus/elasticquota)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/control/elastic.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/engine/quota_tree.h"
#include "kubequota/engine/ugm.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char QUEUES[] = "partitions:\n"
                             "  - name: default\n"
                             "    queues:\n"
                             "      - name: root\n"
                             "        queues:\n"
                             "          - name: default\n"
                             "          - name: teams\n"
                             "            resources: {guaranteed: {cpu: \"8\"}, max: {cpu: \"16\"}}\n"
                             "            queues:\n"
                             "              - name: a\n"
                             "                resources: {guaranteed: {cpu: \"4\"}}\n";

static kq_app_t app;
static kq_elastic_t *el;
static char *baseline;

static char *tree_text(void)
{
    json_t *j = kq_qtree_json(kq_elastic_qtree(el));
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return s;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kq_log_level_current = -1;
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    if (kq_config_load_buffer(QUEUES, sizeof(QUEUES) - 1, "fuzz.yaml", &cfg, &d) != 0)
        abort();
    app.partition = "default";
    app.scheduler_name = "kubequota-scheduler";
    app.default_user = "nobody";
    app.config = kq_config_holder_new(cfg);
    app.ugm = kq_ugm_new("default");
    if (app.ugm == NULL || kq_ugm_set_config(app.ugm, cfg) != 0)
        abort();
    app.ledger = kq_ledger_new(app.ugm, app.scheduler_name);
    kq_elastic_opts_t o;
    kq_elastic_opts_default(&o);
    o.watch_nodes = false; /* no threads: the fuzzer feeds the events itself */
    o.watch_quotas = false;
    el = kq_elastic_new(&app, &o);
    if (el == NULL)
        abort();
    kq_elastic_apply_config(el, kq_config_partition(cfg, "default"));
    kq_config_unref(cfg);
    kq_diags_free(&d);
    baseline = tree_text();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *obj = json_loadb((const char *)data, size, 0, NULL);
    if (obj == NULL)
        return 0;
    static const char *const groups[] = {KQ_EQ_GROUP_UPSTREAM, KQ_EQ_GROUP_KOORD};
    const char *g = groups[size % 2];
    char err[512];
    for (int type = KQ_WATCH_ADDED; type <= KQ_WATCH_DELETED; type++) {
        err[0] = '\0';
        if (kq_elastic_quota_event(el, type, obj, g, err, sizeof(err)) != 0 && err[0] == '\0')
            abort(); /* a rejection says why */
        kq_elastic_node_event(el, type, obj);
    }
    json_t *review = json_pack("{s:s, s:s, s:{s:s, s:s, s:O, s:{s:s}}}", "apiVersion", "admission.k8s.io/v1",
                               "kind", "AdmissionReview", "request", "uid", "u", "operation", "CREATE", "object",
                               obj, "userInfo", "username", "fuzz");
    if (review != NULL) {
        char msg[512];
        (void)kq_elastic_validate_admission(el, json_object_get(review, "request"), msg, sizeof(msg));
        /* the same as an UPDATE of itself (Koordinator's rules compare with oldObject) */
        json_t *req = json_object_get(review, "request");
        if (json_object_set_new(req, "operation", json_string("UPDATE")) == 0 &&
            json_object_set(req, "oldObject", obj) == 0)
            (void)kq_elastic_validate_admission(el, req, msg, sizeof(msg));
        json_decref(review);
        /* read as a Pod: the pod rules of the admission webhook */
        (void)kq_elastic_check_pod(el, obj, obj, msg, sizeof(msg));
        (void)kq_elastic_check_pod(el, obj, NULL, msg, sizeof(msg));
    }
    json_decref(obj);
    char *now = tree_text();
    if (now == NULL || baseline == NULL || strcmp(now, baseline) != 0)
        abort(); /* deleting what was added leaves nothing behind */
    free(now);
    return 0;
}
