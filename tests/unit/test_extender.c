/* Unit tests for the scheduler extender: filter, bind and preempt over kube-scheduler's real
 * extender/v1 JSON (fixtures in tests/data/k8s, copied from the shared protocol reference).
 *
 * The quota: queue root.team-a, user alice may use one nvidia.com/gpu; the fixture pod (in
 * namespace team-a, so queue root.team-a) requests one GPU, so one such pod fits and a
 * second is denied. Bind tests run against a small fake API server (civetweb, plain HTTP)
 * that records binding POSTs and events and answers with a configurable status.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <cmocka.h>
#include <civetweb.h>
#include <jansson.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/serve/extender.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/kube/pod.h"
#include "kubequota/serve/server.h"
#include "kubequota/engine/ugm.h"

#include "testapp.h"
#include "testutil.h"

#define OURS "quota-scheduler" /* the fixtures' spec.schedulerName */
#define POD_UID "3f6c2a1e-8b9d-4e2f-a1c3-5d7e9f0b1a2c"

/* civetweb 1.15 signals shutdown through a plain volatile int (mg_stop writes it, its
 * threads poll it), so ThreadSanitizer reports mg_stop and the frees that flag orders.
 * Only those civetweb shutdown paths are suppressed (read by TSan builds only). */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void)
{
    return "race:mg_stop\nrace:close_all_listening_sockets\nrace:STOP_FLAG_ASSIGN\n";
}

static const char QUEUES_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: team-a\n"
    "            limits:\n"
    "              - limit: one gpu for alice\n"
    "                users: [alice]\n"
    "                maxresources:\n"
    "                  nvidia.com/gpu: 1\n";

/* ------------------------------------------------------------------ fixtures */

static json_t *fixture(const char *name)
{
    const char *dir = getenv("KQ_TEST_DATA");
    char path[1024];
    snprintf(path, sizeof(path), "%s/k8s/%s", dir && *dir ? dir : "tests/data", name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (j == NULL)
        fail_msg("cannot load fixture %s: %s (line %d)", path, e.text, e.line);
    return j;
}

static char *dump(const json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT);
    assert_non_null(s);
    return s;
}

/* The fixture's Pod inside `args`, with alice's identity and the given uid. */
static void set_pod(json_t *args, const char *uid, const char *user)
{
    json_t *pod = json_object_get(args, "Pod");
    json_t *meta = json_object_get(pod, "metadata");
    assert_non_null(meta);
    json_object_set_new(meta, "uid", json_string(uid));
    if (user != NULL) {
        char info[256];
        snprintf(info, sizeof(info), "{\"user\":\"%s\",\"groups\":[\"dev\"]}", user);
        json_object_set_new(json_object_get(meta, "annotations"), "kubequota.io/user-info", json_string(info));
    }
}

typedef struct fx {
    kq_config_t *cfg;
    kq_app_t app;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    if ((f->cfg = test_config(QUEUES_YAML)) == NULL)
        return -1;
    *state = f;
    return test_app_start(&f->app, f->cfg, OURS, TEST_APP_HOLDER | TEST_APP_LEDGER | TEST_APP_METRICS);
}

static int teardown(void **state)
{
    fx_t *f = *state;
    test_app_stop(&f->app);
    kq_config_unref(f->cfg);
    free(f);
    return 0;
}

/* Calls an extender verb with `args`; returns the status, *res the parsed reply. */
typedef int (*verb_fn)(kq_app_t *, const char *, size_t, char **, size_t *);

static int call(fx_t *f, verb_fn fn, const json_t *args, json_t **res)
{
    char *body = dump(args);
    char *out = NULL;
    size_t out_len = 0;
    int st = fn(&f->app, body, strlen(body), &out, &out_len);
    free(body);
    assert_non_null(out);
    assert_int_equal(out_len, strlen(out));
    json_error_t e;
    *res = json_loads(out, 0, &e);
    if (*res == NULL)
        fail_msg("reply is not JSON: %s: %s", e.text, out);
    free(out);
    return st;
}

/* Counts one GPU for alice in root.team-a through the ledger (as a bind would). */
static void occupy(fx_t *f, const char *uid)
{
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, uid, "alice");
    kq_pod_opts_t o = {.partition = kq_config_partition(f->cfg, "default"), .default_user = "nobody"};
    kq_pod_t pod;
    char err[256];
    assert_int_equal(kq_pod_parse_json(json_object_get(args, "Pod"), &o, &pod, err, sizeof(err)), 0);
    char reason[512];
    assert_int_equal(kq_ledger_assume(f->app.ledger, &pod, reason, sizeof(reason), NULL), 0);
    kq_pod_clear(&pod);
    json_decref(args);
}

/* Makes the fixture pod known to the ledger as pending (as the watch would). */
static void observe_pending(fx_t *f, const char *uid)
{
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, uid, "alice");
    kq_pod_opts_t o = {.partition = kq_config_partition(f->cfg, "default"), .default_user = "nobody"};
    kq_pod_t pod;
    char err[256];
    assert_int_equal(kq_pod_parse_json(json_object_get(args, "Pod"), &o, &pod, err, sizeof(err)), 0);
    kq_ledger_observe(f->app.ledger, &pod);
    kq_pod_clear(&pod);
    json_decref(args);
}

/* alice's GPU usage at root.team-a from the ugm user view (0 when not tracked). */
static int64_t alice_gpus(fx_t *f)
{
    json_t *u = kq_ugm_user_json(f->app.ugm, "alice");
    if (u == NULL)
        return 0;
    int64_t total = 0;
    const json_t *q = json_object_get(u, "queues");
    /* root's resourceUsage holds the user's total */
    const json_t *v = json_object_get(json_object_get(q, "resourceUsage"), "nvidia.com/gpu");
    if (json_is_integer(v))
        total = json_integer_value(v);
    json_decref(u);
    return total;
}

static void assert_contains(const char *hay, const char *needle)
{
    if (hay == NULL || strstr(hay, needle) == NULL)
        fail_msg("\"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

/* The reply has exactly the keys of the fixture reply of the same type. */
static void assert_same_keys(const json_t *res, const char *fixture_name)
{
    json_t *fx = fixture(fixture_name);
    assert_int_equal(json_object_size(res), json_object_size(fx));
    const char *k;
    json_t *v;
    json_object_foreach(fx, k, v) {
        if (json_object_get(res, k) == NULL)
            fail_msg("reply lacks key %s", k);
    }
    json_decref(fx);
}

static bool empty_map(const json_t *v)
{
    return json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0);
}

/* ------------------------------------------------------------------ explain */

static int explain_call(fx_t *f, const char *partition, const json_t *body, json_t **res)
{
    char *text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(text);
    char *out = NULL;
    size_t out_len = 0;
    int st = kq_extender_explain(&f->app, partition, text, strlen(text), &out, &out_len);
    free(text);
    assert_non_null(out);
    *res = json_loads(out, 0, NULL);
    if (*res == NULL)
        fail_msg("reply is not JSON: %s", out);
    free(out);
    return st;
}

/* Explain says what filter says (the same reason, word for word) and changes nothing:
 * no usage, no count, no decision metric. */
static void test_explain_matches_filter_and_changes_nothing(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid");
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_t *res;
    assert_int_equal(explain_call(f, "default", json_object_get(args, "Pod"), &res), 200);
    assert_false(json_is_true(json_object_get(res, "fits")));
    assert_false(json_is_true(json_object_get(res, "neverFits")));
    const json_t *b = json_array_get(json_object_get(res, "blockers"), 0);
    assert_string_equal(json_string_value(json_object_get(b, "kind")), "user");
    assert_string_equal(json_string_value(json_object_get(b, "name")), "alice");
    assert_string_equal(json_string_value(json_object_get(b, "resource")), "nvidia.com/gpu");
    assert_string_equal(json_string_value(json_object_get(b, "used")), "1");
    assert_string_equal(json_string_value(json_object_get(b, "max")), "1");
    assert_string_equal(json_string_value(json_object_get(b, "reason")), "QuotaExceeded");
    char *msg = strdup(json_string_value(json_object_get(b, "message")));
    json_decref(res);
    assert_int_equal(alice_gpus(f), 1);
    assert_false(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_DENIED), 0);
    /* the filter's reason is the same text */
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    const json_t *failed = json_object_get(res, "FailedAndUnresolvableNodes");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)failed, k, v) assert_string_equal(json_string_value(v), msg);
    assert_true(json_object_size(failed) > 0);
    free(msg);
    json_decref(res);
    json_decref(args);
}

static bool only_dev(const void *ctx, const char *group)
{
    (void)ctx;
    return strcmp(group, "dev") == 0;
}

/* Self-service: a caller may explain only pods of their own user (and, for posted pods, of
 * their own groups); refused pods answer 403 and show no numbers. */
static void test_explain_self_service(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid");
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice"); /* groups ["dev"] */
    char *text = json_dumps(json_object_get(args, "Pod"), JSON_COMPACT);
    assert_non_null(text);
    char *out = NULL;
    size_t len = 0;
    kq_explain_self_t alice = {.user = "alice", .in_group = only_dev};
    assert_int_equal(kq_extender_explain_as(&f->app, "default", text, strlen(text), &alice, &out, &len), 200);
    assert_contains(out, "\"blockers\"");
    free(out);
    kq_explain_self_t bob = {.user = "bob", .in_group = only_dev};
    assert_int_equal(kq_extender_explain_as(&f->app, "default", text, strlen(text), &bob, &out, &len), 403);
    assert_contains(out, "own identity");
    assert_null(strstr(out, "nvidia.com/gpu")); /* nothing of alice's usage */
    free(out);
    kq_explain_self_t alice_no_groups = {.user = "alice", .in_group = NULL};
    assert_int_equal(kq_extender_explain_as(&f->app, "default", text, strlen(text), &alice_no_groups, &out, &len),
                     403);
    free(out);
    free(text);
    json_decref(args);
}

/* A job of two one-GPU pods with alice's limit of one: the first fits, the second only
 * with the first assumed, which is said; nothing is assumed in the ledger. */
static void test_explain_list_cumulative(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_t *pod = json_object_get(args, "Pod");
    json_t *second = json_deep_copy(pod);
    json_object_del(json_object_get(second, "metadata"), "uid"); /* not created yet */
    json_t *list = json_pack("{s:s,s:[O,o]}", "kind", "List", "items", pod, second);
    json_t *res;
    assert_int_equal(explain_call(f, "default", list, &res), 200);
    assert_int_equal(json_integer_value(json_object_get(res, "fitCount")), 1);
    assert_int_equal(json_integer_value(json_object_get(res, "podCount")), 2);
    assert_false(json_is_true(json_object_get(res, "fits")));
    assert_false(json_is_true(json_object_get(res, "neverFits")));
    const json_t *b = json_array_get(json_object_get(res, "blockers"), 0);
    assert_string_equal(json_string_value(json_object_get(b, "request")), "2");
    assert_contains(json_string_value(json_object_get(b, "message")), "with the earlier pods of the list admitted");
    assert_null(strstr(json_string_value(json_object_get(b, "message")), "never fit"));
    /* 2 alone is over alice's 1, but that is the sum: over the limit, not never fits */
    assert_string_equal(json_string_value(json_object_get(b, "reason")), "QuotaExceeded");
    json_decref(res);
    assert_int_equal(alice_gpus(f), 0);
    /* another user's pod in the list: refused, not guessed */
    json_t *bob = json_deep_copy(pod);
    json_object_set_new(json_object_get(json_object_get(bob, "metadata"), "annotations"), "kubequota.io/user-info",
                        json_string("{\"user\":\"bob\"}"));
    json_t *mixed = json_pack("[O,o]", pod, bob);
    assert_int_equal(explain_call(f, "default", mixed, &res), 400);
    json_decref(res);
    assert_int_equal(explain_call(f, "other", pod, &res), 404);
    json_decref(res);
    json_t *num = json_integer(3);
    assert_int_equal(explain_call(f, "default", num, &res), 400);
    json_decref(res);
    json_decref(num);
    json_decref(mixed);
    json_decref(list);
    json_decref(args);
}

/* ------------------------------------------------------------------ filter */

static void test_filter_node_names_allowed(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_same_keys(res, "extender-filter-result.json");
    assert_true(json_equal(json_object_get(res, "NodeNames"), json_object_get(args, "NodeNames")));
    assert_true(json_is_null(json_object_get(res, "Nodes")));
    assert_true(json_is_object(json_object_get(res, "FailedNodes")));
    assert_int_equal(json_object_size(json_object_get(res, "FailedNodes")), 0);
    assert_true(empty_map(json_object_get(res, "FailedAndUnresolvableNodes")));
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    /* filter changes nothing */
    assert_int_equal(alice_gpus(f), 0);
    assert_false(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_ALLOWED), 1);
    json_decref(res);
    json_decref(args);
}

static void test_filter_nodes_allowed(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-filter-args.nodecachecapable-false.json");
    set_pod(args, POD_UID, "alice");
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_true(json_is_null(json_object_get(res, "NodeNames")));
    const json_t *nodes = json_object_get(res, "Nodes");
    assert_int_equal(json_array_size(json_object_get(nodes, "items")), 2);
    assert_true(json_equal(nodes, json_object_get(args, "Nodes")));
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    assert_true(empty_map(json_object_get(res, "FailedAndUnresolvableNodes")));
    json_decref(res);
    json_decref(args);
}

static void test_filter_denied_node_names(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid");
    assert_int_equal(alice_gpus(f), 1);
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_same_keys(res, "extender-filter-result.json");
    const json_t *names = json_object_get(res, "NodeNames");
    assert_true(json_is_array(names));
    assert_int_equal(json_array_size(names), 0);
    assert_true(json_is_null(json_object_get(res, "Nodes")));
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    assert_true(empty_map(json_object_get(res, "FailedNodes")));
    const json_t *failed = json_object_get(res, "FailedAndUnresolvableNodes");
    assert_int_equal(json_object_size(failed), 3);
    const char *first = NULL;
    size_t i;
    const json_t *n;
    json_array_foreach(json_object_get(args, "NodeNames"), i, n) {
        const char *why = json_string_value(json_object_get(failed, json_string_value(n)));
        assert_non_null(why);
        assert_contains(why, "alice");
        assert_contains(why, "root.team-a");
        assert_contains(why, "nvidia.com/gpu");
        if (first == NULL)
            first = why;
        assert_string_equal(why, first); /* one clear reason for all */
    }
    /* still nothing changed by filter */
    assert_int_equal(alice_gpus(f), 1);
    assert_false(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_DENIED), 1);
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_ALLOWED), 0);
    json_decref(res);
    json_decref(args);
}

static void test_filter_denied_nodes(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid");
    json_t *args = fixture("extender-filter-args.nodecachecapable-false.json");
    set_pod(args, POD_UID, "alice");
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    const json_t *nodes = json_object_get(res, "Nodes");
    assert_true(json_is_object(nodes));
    assert_true(json_is_array(json_object_get(nodes, "items")));
    assert_int_equal(json_array_size(json_object_get(nodes, "items")), 0);
    assert_true(json_is_null(json_object_get(res, "NodeNames")));
    const json_t *failed = json_object_get(res, "FailedAndUnresolvableNodes");
    assert_int_equal(json_object_size(failed), 2);
    assert_contains(json_string_value(json_object_get(failed, "gpu-node-1")), "alice");
    assert_contains(json_string_value(json_object_get(failed, "gpu-node-2")), "root.team-a");
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    json_decref(res);
    json_decref(args);
}

/* Another user (bob) has no limit: his own application is allowed even while alice is
 * full. (A pod of alice's application would be charged to alice, whoever submits it.) */
static void test_filter_other_user_allowed(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid");
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "bob");
    json_t *meta = json_object_get(json_object_get(args, "Pod"), "metadata");
    if (json_object_get(meta, "labels") == NULL)
        json_object_set_new(meta, "labels", json_object());
    json_object_set_new(json_object_get(meta, "labels"), "kubequota.io/app-id", json_string("bob-app"));
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_true(json_equal(json_object_get(res, "NodeNames"), json_object_get(args, "NodeNames")));
    json_decref(res);
    json_decref(args);
}

static void test_filter_other_scheduler_passes(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid"); /* alice is full: a pod of ours would be denied */
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_object_set_new(json_object_get(json_object_get(args, "Pod"), "spec"), "schedulerName",
                        json_string("default-scheduler"));
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_true(json_equal(json_object_get(res, "NodeNames"), json_object_get(args, "NodeNames")));
    assert_true(empty_map(json_object_get(res, "FailedAndUnresolvableNodes")));
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_SKIPPED), 1);
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_DENIED), 0);
    json_decref(res);

    /* also with no schedulerName at all (the API server's default-scheduler) */
    json_object_del(json_object_get(json_object_get(args, "Pod"), "spec"), "schedulerName");
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_true(json_equal(json_object_get(res, "NodeNames"), json_object_get(args, "NodeNames")));
    json_decref(res);
    json_decref(args);
}

static void test_filter_malformed(void **state)
{
    fx_t *f = *state;
    static const char *const bodies[] = {"", "{", "{\"Pod\": ", "[1,2,3]", "\"Pod\"", "null", "{\"Pod\":{}}}"};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        char *out = NULL;
        size_t len = 0;
        int st = kq_extender_filter(&f->app, bodies[i], strlen(bodies[i]), &out, &len);
        assert_int_equal(st, 400);
        json_t *e = json_loads(out, 0, NULL);
        assert_non_null(e);
        assert_true(json_is_string(json_object_get(e, "error")));
        assert_true(strlen(json_string_value(json_object_get(e, "error"))) > 0);
        json_decref(e);
        free(out);
    }
    /* a truncated real request */
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    char *body = dump(args);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(kq_extender_filter(&f->app, body, strlen(body) / 2, &out, &len), 400);
    free(out);
    free(body);
    json_decref(args);
    assert_int_equal(kq_ugm_user_count(f->app.ugm), 0);
    assert_int_equal(kq_ledger_size(f->app.ledger, NULL), 0);
}

/* A JSON object that is not a usable ExtenderArgs: 200 with Error, no nodes. */
static void test_filter_bad_args_is_error(void **state)
{
    fx_t *f = *state;
    json_t *res;
    json_t *args = json_pack("{s:s,s:n,s:[s]}", "Pod", "not-a-pod", "Nodes", "NodeNames", "n1");
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_same_keys(res, "extender-filter-result.error.json");
    assert_true(strlen(json_string_value(json_object_get(res, "Error"))) > 0);
    assert_true(json_is_null(json_object_get(res, "NodeNames")));
    json_decref(res);
    json_decref(args);

    /* a pod without uid cannot be resolved */
    args = fixture("extender-filter-args.nodecachecapable-true.json");
    json_object_del(json_object_get(json_object_get(args, "Pod"), "metadata"), "uid");
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_contains(json_string_value(json_object_get(res, "Error")), "uid");
    json_decref(res);

    /* NodeNames holding a number */
    json_decref(args);
    args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_array_append_new(json_object_get(args, "NodeNames"), json_integer(7));
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_contains(json_string_value(json_object_get(res, "Error")), "NodeNames");
    json_decref(res);
    json_decref(args);
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_FILTER, KQ_RESULT_ERROR), 3);
    assert_int_equal(kq_ugm_user_count(f->app.ugm), 0);
}

/* kube-scheduler may send 5,000 names: all back when allowed, all failed when denied. */
static void test_filter_many_nodes(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_t *names = json_array();
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "node-%04d", i);
        json_array_append_new(names, json_string(name));
    }
    json_object_set_new(args, "NodeNames", names);
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_true(json_equal(json_object_get(res, "NodeNames"), names));
    json_decref(res);

    occupy(f, "other-pod-uid");
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_int_equal(json_array_size(json_object_get(res, "NodeNames")), 0);
    const json_t *failed = json_object_get(res, "FailedAndUnresolvableNodes");
    assert_int_equal(json_object_size(failed), 5000);
    assert_non_null(json_object_get(failed, "node-0000"));
    assert_non_null(json_object_get(failed, "node-4999"));
    json_decref(res);
    json_decref(args);
}

/* Names that need escaping come back byte for byte, allowed and denied. */
static void test_filter_escaped_names(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_t *names = json_pack("[s,s,s,s,s]", "quote\"d", "back\\slash", "ctl\x01\n\t", "unicod\xc3\xa9 \xe2\x82\xac",
                              "slash/ok");
    json_object_set_new(args, "NodeNames", names);
    json_t *res;
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_true(json_equal(json_object_get(res, "NodeNames"), names));
    json_decref(res);

    occupy(f, "other-pod-uid");
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    const json_t *failed = json_object_get(res, "FailedAndUnresolvableNodes");
    assert_int_equal(json_object_size(failed), 5);
    size_t i;
    const json_t *n;
    json_array_foreach(names, i, n) {
        assert_non_null(json_object_get(failed, json_string_value(n)));
    }
    json_decref(res);
    json_decref(args);
}

/* ------------------------------------------------------------------ fake API server */

typedef struct fake_api {
    struct mg_context *ctx;
    int port;
    atomic_int bind_status;   /* status for binding POSTs */
    atomic_int bind_posts;
    atomic_int event_posts;
    atomic_int quota_events;  /* events with reason QuotaExceeded mentioning alice */
    char *pod_json;           /* served for GET .../pods/{name}; NULL -> 404 */
    pthread_mutex_t mu;
} fake_api_t;

static fake_api_t fake;

static void fake_reply(struct mg_connection *c, int status, const char *body)
{
    mg_printf(c, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n%s",
              status, strlen(body), body);
}

static int fake_request(struct mg_connection *c)
{
    const struct mg_request_info *ri = mg_get_request_info(c);
    char body[65536];
    int n = 0, r;
    while (n < (int)sizeof(body) - 1 && (r = mg_read(c, body + n, sizeof(body) - 1 - (size_t)n)) > 0)
        n += r;
    body[n] = '\0';
    const char *uri = ri->local_uri;
    if (strcmp(ri->request_method, "POST") == 0 && strstr(uri, "/binding") != NULL) {
        atomic_fetch_add(&fake.bind_posts, 1);
        int st = atomic_load(&fake.bind_status);
        if (st == 201) {
            fake_reply(c, 201, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"code\":201}");
        } else {
            fake_reply(c, st, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                              "\"message\":\"pod train-7c9d8-x2kqp is already assigned to node gpu-node-2\","
                              "\"reason\":\"Conflict\",\"code\":409}");
        }
        return 1;
    }
    if (strcmp(ri->request_method, "POST") == 0 && strstr(uri, "/events") != NULL) {
        atomic_fetch_add(&fake.event_posts, 1);
        if (strstr(body, "QuotaExceeded") && strstr(body, "alice"))
            atomic_fetch_add(&fake.quota_events, 1);
        fake_reply(c, 201, "{}");
        return 1;
    }
    if (strcmp(ri->request_method, "GET") == 0 && strstr(uri, "/pods/") != NULL) {
        pthread_mutex_lock(&fake.mu);
        if (fake.pod_json)
            fake_reply(c, 200, fake.pod_json);
        else
            fake_reply(c, 404, "{\"kind\":\"Status\",\"status\":\"Failure\",\"reason\":\"NotFound\",\"code\":404}");
        pthread_mutex_unlock(&fake.mu);
        return 1;
    }
    fake_reply(c, 404, "{}");
    return 1;
}

static int fake_setup(void **state)
{
    if (setup(state) != 0)
        return -1;
    fx_t *f = *state;
    kq_server_global_init();
    memset(&fake, 0, sizeof(fake));
    pthread_mutex_init(&fake.mu, NULL);
    atomic_init(&fake.bind_status, 201);
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof(cb));
    cb.begin_request = fake_request;
    const char *opts[] = {"listening_ports", "127.0.0.1:0", "num_threads", "8", NULL};
    fake.ctx = mg_start(&cb, NULL, opts);
    if (fake.ctx == NULL)
        return -1;
    struct mg_server_port p[1];
    if (mg_get_server_ports(fake.ctx, 1, p) < 1)
        return -1;
    fake.port = p[0].port;
    char server[64];
    snprintf(server, sizeof(server), "http://127.0.0.1:%d", fake.port);
    kq_kube_conf_t conf = {.server = server};
    f->app.kube = kq_kube_new(&conf);
    return f->app.kube ? 0 : -1;
}

static int fake_teardown(void **state)
{
    fx_t *f = *state;
    kq_kube_free(f->app.kube);
    f->app.kube = NULL;
    mg_stop(fake.ctx);
    free(fake.pod_json);
    pthread_mutex_destroy(&fake.mu);
    return teardown(state);
}

static json_t *bind_args(const char *uid)
{
    json_t *a = fixture("extender-bind-args.json");
    json_object_set_new(a, "PodUID", json_string(uid));
    return a;
}

/* ------------------------------------------------------------------ bind */

static void test_bind_without_kube_rolls_back(void **state)
{
    fx_t *f = *state;
    observe_pending(f, POD_UID);
    assert_int_equal(alice_gpus(f), 0);
    json_t *args = bind_args(POD_UID);
    json_t *res;
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_same_keys(res, "extender-bind-result.json");
    assert_contains(json_string_value(json_object_get(res, "Error")), "no API server client configured");
    assert_false(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(alice_gpus(f), 0);
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_BIND, KQ_RESULT_ERROR), 1);
    json_decref(res);

    /* the rollback released the GPU: another pod of alice still fits */
    occupy(f, "next-pod");
    assert_int_equal(alice_gpus(f), 1);
    json_decref(args);
}

static void test_bind_unknown_pod_without_kube(void **state)
{
    fx_t *f = *state;
    json_t *args = bind_args("never-seen");
    json_t *res;
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_contains(json_string_value(json_object_get(res, "Error")), "not known");
    assert_int_equal(kq_ugm_user_count(f->app.ugm), 0);
    json_decref(res);
    json_decref(args);
}

static void test_bind_bad_args(void **state)
{
    fx_t *f = *state;
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(kq_extender_bind(&f->app, "{\"PodName\":", 11, &out, &len), 400);
    free(out);
    json_t *args = bind_args(POD_UID);
    json_object_del(args, "Node");
    json_t *res;
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_contains(json_string_value(json_object_get(res, "Error")), "Node");
    json_decref(res);
    json_decref(args);
    assert_int_equal(kq_ugm_user_count(f->app.ugm), 0);
}

static void test_bind_success(void **state)
{
    fx_t *f = *state;
    observe_pending(f, POD_UID);
    json_t *args = bind_args(POD_UID);
    json_t *res;
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    json_t *want = fixture("extender-bind-result.json");
    assert_true(json_equal(res, want));
    json_decref(want);
    assert_int_equal(atomic_load(&fake.bind_posts), 1);
    assert_true(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(alice_gpus(f), 1);
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_BIND, KQ_RESULT_ALLOWED), 1);
    json_decref(res);
    json_decref(args);
}

static void test_bind_denied(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid");
    observe_pending(f, POD_UID);
    json_t *args = bind_args(POD_UID);
    json_t *res;
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    const char *e = json_string_value(json_object_get(res, "Error"));
    assert_contains(e, "alice");
    assert_contains(e, "root.team-a");
    assert_int_equal(atomic_load(&fake.bind_posts), 0); /* never asked the API server */
    assert_false(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(alice_gpus(f), 1);
    assert_int_equal(kq_metrics_decision_count(f->app.metrics, KQ_VERB_BIND, KQ_RESULT_DENIED), 1);
    /* the denial is posted as a Warning event (asynchronously) */
    for (int i = 0; i < 500 && atomic_load(&fake.quota_events) == 0; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&fake.quota_events), 1);
    json_decref(res);
    json_decref(args);
}

static void test_bind_conflict_rolls_back(void **state)
{
    fx_t *f = *state;
    observe_pending(f, POD_UID);
    atomic_store(&fake.bind_status, 409);
    json_t *args = bind_args(POD_UID);
    json_t *res;
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_contains(json_string_value(json_object_get(res, "Error")), "already assigned");
    assert_int_equal(atomic_load(&fake.bind_posts), 1);
    assert_false(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(alice_gpus(f), 0);
    json_decref(res);
    json_decref(args);
}

/* A 409 whose pod the API server shows bound (an earlier bind committed although its
 * answer was lost): the pod stays counted and, bound where asked, the bind succeeds; to
 * another node, it fails but still stays counted (issue 20). */
static void test_bind_conflict_but_bound(void **state)
{
    fx_t *f = *state;
    observe_pending(f, POD_UID);
    atomic_store(&fake.bind_status, 409);
    json_t *args = bind_args(POD_UID);
    json_t *pod = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(pod, POD_UID, "alice");
    json_object_set_new(json_object_get(json_object_get(pod, "Pod"), "spec"), "nodeName",
                        json_string(json_string_value(json_object_get(args, "Node"))));
    pthread_mutex_lock(&fake.mu);
    fake.pod_json = dump(json_object_get(pod, "Pod"));
    pthread_mutex_unlock(&fake.mu);
    json_t *res;
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    assert_true(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(alice_gpus(f), 1);
    json_decref(res);
    /* the same again, but asked for another node */
    json_object_set_new(args, "Node", json_string("some-other-node"));
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_contains(json_string_value(json_object_get(res, "Error")), "stays counted");
    assert_true(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(alice_gpus(f), 1);
    json_decref(res);
    json_decref(pod);
    json_decref(args);
}

/* Not in the ledger: the pod is fetched from the API server; its UID must match. */
static void test_bind_fetches_pod(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    fake.pod_json = dump(json_object_get(args, "Pod"));
    json_decref(args);

    json_t *res;
    args = bind_args("a-different-uid");
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_contains(json_string_value(json_object_get(res, "Error")), "replaced");
    assert_int_equal(atomic_load(&fake.bind_posts), 0);
    assert_int_equal(alice_gpus(f), 0);
    json_decref(res);
    json_decref(args);

    args = bind_args(POD_UID);
    assert_int_equal(call(f, kq_extender_bind, args, &res), 200);
    assert_string_equal(json_string_value(json_object_get(res, "Error")), "");
    assert_int_equal(atomic_load(&fake.bind_posts), 1);
    assert_true(kq_ledger_is_counted(f->app.ledger, POD_UID));
    assert_int_equal(alice_gpus(f), 1);
    json_decref(res);
    json_decref(args);
}

typedef struct race_arg {
    fx_t *f;
    const char *uid;
    pthread_barrier_t *go;
    char *error;
} race_arg_t;

static void *race_bind(void *p)
{
    race_arg_t *a = p;
    json_t *args = bind_args(a->uid);
    char *body = json_dumps(args, JSON_COMPACT);
    json_decref(args);
    char *out = NULL;
    size_t len = 0;
    pthread_barrier_wait(a->go);
    kq_extender_bind(&a->f->app, body, strlen(body), &out, &len);
    json_t *res = json_loads(out, 0, NULL);
    a->error = strdup(json_string_value(json_object_get(res, "Error")) ? json_string_value(json_object_get(res, "Error")) : "?");
    json_decref(res);
    free(out);
    free(body);
    return NULL;
}

/* Two pods of alice, room for one: exactly one is bound, whatever the interleaving. */
static void test_bind_race_one_wins(void **state)
{
    fx_t *f = *state;
    for (int round = 0; round < 20; round++) {
        char ua[32], ub[32];
        snprintf(ua, sizeof(ua), "race-a-%d", round);
        snprintf(ub, sizeof(ub), "race-b-%d", round);
        observe_pending(f, ua);
        observe_pending(f, ub);
        int posts0 = atomic_load(&fake.bind_posts);
        pthread_barrier_t go;
        pthread_barrier_init(&go, NULL, 2);
        race_arg_t a = {f, ua, &go, NULL}, b = {f, ub, &go, NULL};
        pthread_t ta, tb;
        pthread_create(&ta, NULL, race_bind, &a);
        pthread_create(&tb, NULL, race_bind, &b);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        pthread_barrier_destroy(&go);
        int ok = (a.error[0] == '\0') + (b.error[0] == '\0');
        assert_int_equal(ok, 1);
        assert_contains(a.error[0] ? a.error : b.error, "alice");
        assert_int_equal(atomic_load(&fake.bind_posts) - posts0, 1);
        assert_int_equal(alice_gpus(f), 1);
        /* release the winner for the next round */
        kq_ledger_remove(f->app.ledger, a.error[0] == '\0' ? ua : ub);
        kq_ledger_remove(f->app.ledger, a.error[0] == '\0' ? ub : ua);
        assert_int_equal(alice_gpus(f), 0);
        free(a.error);
        free(b.error);
    }
}

/* A filter denial is posted as a Warning event QuotaExceeded. */
/* A denial of a pod the watch has not shown yet is posted only once the API server has
 * confirmed the pod (GET, same uid): a forged filter request posts nothing (issue 20). */
static void test_filter_denial_posts_event(void **state)
{
    fx_t *f = *state;
    occupy(f, "other-pod-uid");
    json_t *args = fixture("extender-filter-args.nodecachecapable-true.json");
    set_pod(args, POD_UID, "alice");
    json_t *res;
    /* the API server does not know the pod (GET answers 404): no event */
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_int_equal(json_array_size(json_object_get(res, "NodeNames")), 0);
    json_decref(res);
    unsigned long posted = 0, dropped = 0;
    for (int i = 0; i < 500 && dropped == 0; i++) {
        usleep(10000);
        kq_kube_event_stats(f->app.kube, &posted, &dropped);
    }
    assert_int_equal(dropped, 1);
    assert_int_equal(posted, 0);
    assert_int_equal(atomic_load(&fake.event_posts), 0);
    /* the same pod, now known to the API server: posted (the dropped one left no dedup
     * entry behind) */
    pthread_mutex_lock(&fake.mu);
    fake.pod_json = dump(json_object_get(args, "Pod"));
    pthread_mutex_unlock(&fake.mu);
    assert_int_equal(call(f, kq_extender_filter, args, &res), 200);
    assert_int_equal(json_array_size(json_object_get(res, "NodeNames")), 0);
    for (int i = 0; i < 500 && atomic_load(&fake.quota_events) == 0; i++)
        usleep(10000);
    assert_int_equal(atomic_load(&fake.quota_events), 1);
    json_decref(res);
    json_decref(args);
}

/* ------------------------------------------------------------------ preempt */

static void test_preempt_meta_echo(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-preempt-args.nodecachecapable-true.json");
    json_t *res;
    assert_int_equal(call(f, kq_extender_preempt, args, &res), 200);
    json_t *want = fixture("extender-preempt-result.json");
    assert_true(json_equal(res, want));
    json_decref(want);
    json_decref(res);
    json_decref(args);
}

static void test_preempt_full_victims(void **state)
{
    fx_t *f = *state;
    json_t *args = fixture("extender-preempt-args.nodecachecapable-true.json");
    json_t *victim = json_deep_copy(json_object_get(args, "Pod"));
    json_object_set_new(json_object_get(victim, "metadata"), "uid", json_string("victim-uid-1"));
    json_object_set_new(args, "NodeNameToMetaVictims", json_null());
    json_object_set_new(args, "NodeNameToVictims",
                        json_pack("{s:{s:[o],s:i},s:{s:[],s:i}}", "gpu-node-1", "Pods", victim, "NumPDBViolations", 2,
                                  "gpu-node-2", "Pods", "NumPDBViolations", 0));
    json_t *res;
    assert_int_equal(call(f, kq_extender_preempt, args, &res), 200);
    json_t *want = json_pack("{s:{s:{s:[{s:s}],s:i},s:{s:[],s:i}}}", "NodeNameToMetaVictims", "gpu-node-1", "Pods",
                             "UID", "victim-uid-1", "NumPDBViolations", 2, "gpu-node-2", "Pods", "NumPDBViolations", 0);
    assert_true(json_equal(res, want));
    json_decref(want);
    json_decref(res);

    /* a victim without uid is a bad request (the result has no Error field) */
    json_object_del(json_object_get(victim, "metadata"), "uid");
    assert_int_equal(call(f, kq_extender_preempt, args, &res), 400);
    assert_non_null(json_object_get(res, "error"));
    json_decref(res);
    json_decref(args);

    char *out = NULL;
    size_t len = 0;
    assert_int_equal(kq_extender_preempt(&f->app, "nope", 4, &out, &len), 400);
    free(out);
}

/* Each kind of denial has the Event reason and metric label docs/events.md lists; a kind
 * out of range is an ordinary QuotaExceeded. */
static void test_denial_kind_table(void **state)
{
    (void)state;
    static const struct {
        kq_denial_t kind;
        const char *reason, *label;
    } want[] = {
        {KQ_DENIAL_NONE, "QuotaExceeded", "over_limit"},
        {KQ_DENIAL_OVER_LIMIT, "QuotaExceeded", "over_limit"},
        {KQ_DENIAL_OVER_RUNTIME, "QuotaRuntimeExceeded", "over_runtime"},
        {KQ_DENIAL_NEVER_FITS, "QuotaNeverFits", "never_fits"},
        {KQ_DENIAL_QUEUE_MISSING, "QueueNotFound", "queue_missing"},
        {KQ_DENIAL_QUEUE_NOT_LEAF, "QueueNotLeaf", "queue_not_leaf"},
        {KQ_DENIAL_GROUP_MISSING, "QuotaGroupNotFound", "queue_missing"},
        {KQ_DENIAL_GROUP_NOT_LEAF, "QuotaGroupNotLeaf", "queue_not_leaf"},
        {KQ_DENIAL_ACL, "QueueACLDenied", "acl"},
        {KQ_DENIAL_BUDGET, "BudgetExhausted", "budget"},
        {KQ_DENIAL_APP_OWNER, "ApplicationOfAnotherUser", "app_owner"},
        {KQ_DENIAL_QUOTA_NOT_FOUND, "QuotaNotFound", "quota_not_found"},
        {KQ_DENIAL_QUOTA_OTHER_NS, "QuotaOfAnotherNamespace", "quota_other_namespace"},
        {KQ_DENIAL_COUNT, "QuotaExceeded", "over_limit"},
    };
    assert_int_equal(sizeof(want) / sizeof(want[0]), KQ_DENIAL_COUNT + 1);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_string_equal(kq_extender_denial_reason(want[i].kind), want[i].reason);
        assert_string_equal(kq_extender_denial_label(want[i].kind), want[i].label);
    }
}

int main(void)
{
    kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_filter_node_names_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_nodes_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_denied_node_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_denied_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_other_user_allowed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_other_scheduler_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_bad_args_is_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_many_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_filter_escaped_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_without_kube_rolls_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_unknown_pod_without_kube, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_bad_args, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_success, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_bind_denied, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_bind_conflict_rolls_back, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_bind_conflict_but_bound, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_bind_fetches_pod, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_bind_race_one_wins, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_filter_denial_posts_event, fake_setup, fake_teardown),
        cmocka_unit_test_setup_teardown(test_explain_matches_filter_and_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explain_list_cumulative, setup, teardown),
        cmocka_unit_test_setup_teardown(test_explain_self_service, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_meta_echo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_full_victims, setup, teardown),
        cmocka_unit_test(test_denial_kind_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
