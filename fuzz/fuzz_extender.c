/* libFuzzer target for the scheduler extender's request decoding: the first byte picks the
 * verb (filter, bind, preempt, explain), the rest is the request body (explain's in JSON or
 * YAML: seed explain-yaml). With no API server client no
 * bind can complete, so whatever arrives, nothing may stay counted: every reply must be a
 * valid JSON document of the length reported, and the ledger must hold no counted pod
 * afterwards ("nothing is counted on bad input").
 *
 *   make fuzz FUZZ_SECONDS=60     (seeds: fuzz/corpus/extender, from the shared fixtures)
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/serve/extender.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/engine/ugm.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char QUEUES[] = "partitions:\n"
                             "  - name: default\n"
                             "    queues:\n"
                             "      - name: root\n"
                             "        queues:\n"
                             "          - name: default\n"
                             "          - name: dev\n"
                             "            limits:\n"
                             "              - limit: alice\n"
                             "                users: [alice]\n"
                             "                maxresources: {cpu: \"2\", memory: 4Gi}\n"
                             "              - limit: others\n"
                             "                users: [\"*\"]\n"
                             "                maxresources: {cpu: \"1\"}\n";

static kq_app_t app;

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
    app.metrics = kq_metrics_new();
    if (app.ugm == NULL || kq_ugm_set_config(app.ugm, cfg) != 0)
        abort();
    app.ledger = kq_ledger_new(app.ugm, app.scheduler_name);
    atomic_store(&app.ready, true); /* explain answers 503 before the first pod list */
    kq_config_unref(cfg);
    kq_diags_free(&d);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *body = (const char *)data + 1;
    size_t len = size - 1;
    char *out = NULL;
    size_t out_len = 0;
    int st;
    switch (data[0] % 4) {
    case 0: st = kq_extender_filter(&app, body, len, &out, &out_len); break;
    case 1: st = kq_extender_bind(&app, body, len, &out, &out_len); break;
    case 2: st = kq_extender_preempt(&app, body, len, &out, &out_len); break;
    default: st = kq_extender_explain(&app, "default", body, len, &out, &out_len); break;
    }
    if (st != 200 && st != 400 && st != 500 && !(data[0] % 4 == 3 && st == 503))
        abort();
    if (out != NULL) {
        json_error_t e;
        json_t *j = json_loadb(out, out_len, 0, &e);
        if (j == NULL)
            abort(); /* every reply is JSON of the length reported */
        json_decref(j);
    }
    free(out);
    size_t counted = 0;
    kq_ledger_size(app.ledger, &counted);
    if (counted != 0)
        abort(); /* without an API server nothing can be bound, so nothing may stay counted */
    return 0;
}
