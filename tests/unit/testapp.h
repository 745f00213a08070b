/* An app wired for a unit test the way main wires it (partition "default", default user
 * "nobody", ready), with the parts a test asks for. Shared by the tests of the modules
 * that take a kq_app_t (extender, rest, elastic). */
#ifndef KUBEQUOTA_TESTAPP_H
#define KUBEQUOTA_TESTAPP_H

#include <stdatomic.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/engine/ugm.h"

enum {
    TEST_APP_HOLDER = 1u << 0,  /* app->config: a holder of cfg */
    TEST_APP_LEDGER = 1u << 1,  /* app->ledger for scheduler */
    TEST_APP_METRICS = 1u << 2, /* app->metrics */
};

/* Fills *app (zeroed first) with a ugm configured from cfg (borrowed: the caller keeps
 * its reference) and the parts named; 0, or -1 when one could not be made. */
static inline int test_app_start(kq_app_t *app, kq_config_t *cfg, const char *scheduler, unsigned parts)
{
    *app = (kq_app_t){.partition = "default", .scheduler_name = scheduler, .default_user = "nobody"};
    atomic_init(&app->ready, true);
    if ((parts & TEST_APP_HOLDER) && (app->config = kq_config_holder_new(cfg)) == NULL)
        return -1;
    if ((app->ugm = kq_ugm_new("default")) == NULL || kq_ugm_set_config(app->ugm, cfg) != 0)
        return -1;
    if ((parts & TEST_APP_LEDGER) && (app->ledger = kq_ledger_new(app->ugm, scheduler)) == NULL)
        return -1;
    if ((parts & TEST_APP_METRICS) && (app->metrics = kq_metrics_new()) == NULL)
        return -1;
    return 0;
}

/* Frees what test_app_start made, and a kube client the test set. */
static inline void test_app_stop(kq_app_t *app)
{
    kq_kube_free(app->kube);
    kq_ledger_free(app->ledger);
    kq_ugm_free(app->ugm);
    kq_metrics_free(app->metrics);
    kq_config_holder_free(app->config);
    *app = (kq_app_t){0};
}

#endif
