/* Unit tests for the REST usage view: status codes, JSON error bodies for unknown
 * partitions/users/groups, the usage numbers after known increases, and validate-conf's
 * YuniKorn-shaped answers for valid and invalid queues.yaml bodies. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/base/log.h"
#include "kubequota/serve/rest.h"
#include "kubequota/engine/ugm.h"

#include "testapp.h"
#include "testutil.h"

static const char QUEUES_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: team-a\n"
    "            resources:\n"
    "              max:\n"
    "                vcore: 8\n"
    "            limits:\n"
    "              - limit: dev group\n"
    "                groups: [dev]\n"
    "                maxapplications: 10\n"
    "              - limit: alice\n"
    "                users: [alice]\n"
    "                maxresources:\n"
    "                  vcore: 4\n";

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
    return test_app_start(&f->app, f->cfg, "kubequota-scheduler", TEST_APP_HOLDER);
}

static int teardown(void **state)
{
    fx_t *f = *state;
    test_app_stop(&f->app);
    kq_config_unref(f->cfg);
    free(f);
    return 0;
}

/* alice (group dev) runs app-1 with 1500m cpu in root.team-a. */
static void add_usage(fx_t *f)
{
    const char *groups[] = {"dev"};
    kq_user_t u = {.name = "alice", .groups = groups, .n_groups = 1};
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, "cpu", 1500), 0);
    char reason[256];
    assert_int_equal(kq_ugm_increase(f->app.ugm, "root.team-a", "app-1", &u, &r, reason, sizeof(reason), NULL), 0);
}

/* body/len are read through pointers: the call producing them is an argument too. */
static json_t *parsed(int status, int want, char **bodyp, size_t *lenp)
{
    char *body = *bodyp;
    size_t len = *lenp;
    if (status != want)
        fail_msg("status %d, want %d: %s", status, want, body != NULL ? body : "(no body)");
    assert_non_null(body);
    assert_int_equal(len, strlen(body));
    json_error_t e;
    json_t *j = json_loads(body, 0, &e);
    if (j == NULL)
        fail_msg("not JSON (%s): %s", e.text, body);
    free(body);
    return j;
}

/* YuniKorn's error body (apache/yunikorn-core pkg/webservice/dao/error_info.go YAPIError):
 * {"status_code": int, "message": string, "description": string}. */
static void assert_yapi_error(const json_t *j, int status, const char *message)
{
    assert_int_equal(json_object_size(j), 3);
    assert_true(json_is_integer(json_object_get(j, "status_code")));
    assert_int_equal(json_integer_value(json_object_get(j, "status_code")), status);
    assert_string_equal(json_string_value(json_object_get(j, "message")), message);
    /* yunikorn-core pkg/webservice/dao/error_info.go NewYAPIError(nil, ...): description = message */
    assert_string_equal(json_string_value(json_object_get(j, "description")), message);
}

static const json_t *child_named(const json_t *node, const char *key, const char *path)
{
    size_t i;
    const json_t *c;
    json_array_foreach(json_object_get(node, "children"), i, c) {
        if (strcmp(json_is_string(json_object_get(c, key)) ? json_string_value(json_object_get(c, key)) : "", path) == 0)
            return c;
    }
    return NULL;
}

static void test_users_and_user(void **state)
{
    fx_t *f = *state;
    char *b;
    size_t n;
    /* alice is named in a limit: shown with it before any use */
    json_t *j = parsed(kq_rest_users(&f->app, "default", &b, &n), 200, &b, &n);
    assert_true(json_is_array(j));
    assert_int_equal(json_array_size(j), 1);
    assert_null(json_object_get(json_object_get(json_array_get(j, 0), "queues"), "resourceUsage"));
    json_decref(j);

    add_usage(f);
    j = parsed(kq_rest_users(&f->app, "default", &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "userName")), "alice");
    json_decref(j);

    j = parsed(kq_rest_user(&f->app, "default", "alice", &b, &n), 200, &b, &n);
    assert_string_equal(json_string_value(json_object_get(j, "userName")), "alice");
    const json_t *root = json_object_get(j, "queues");
    const json_t *team = child_named(root, "queuePath", "root.team-a");
    assert_non_null(team);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(team, "resourceUsage"), "vcore")), 1500);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(team, "resourceUsage"), "pods")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(team, "maxResources"), "vcore")), 4000);
    json_decref(j);

    j = parsed(kq_rest_user(&f->app, "default", "bob", &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "User not found");
    json_decref(j);

    /* a name outside configs.UserRegExp: 400, as yunikorn-core handlers.go getUserResourceUsage */
    j = parsed(kq_rest_user(&f->app, "default", "b\"o\\b\n\xff", &b, &n), 400, &b, &n);
    assert_yapi_error(j, 400, "Invalid user name");
    json_decref(j);
}

/* The checks of yunikorn-core pkg/webservice/handlers.go getPartitionApplicationsByState and
 * getQueueApplicationsByState, in their order (handlers_test.go
 * TestGetQueueApplicationsByStateHandler's illegal states and statuses). */
static void test_apps_select(void **state)
{
    fx_t *f = *state;
    add_usage(f);
    char *b = NULL;
    size_t n = 0;
    assert_int_equal(kq_rest_apps_select(&f->app, "default", NULL, "Active", "", &b, &n), 0);
    assert_null(b);
    assert_int_equal(kq_rest_apps_select(&f->app, "default", NULL, "active", "RUNNING", &b, &n), 0);
    json_t *j = parsed(kq_rest_apps_select(&f->app, "default", NULL, "active", "Accepted", &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 0);
    json_decref(j);
    j = parsed(kq_rest_apps_select(&f->app, "default", NULL, "active", "Invalid", &b, &n), 400, &b, &n);
    assert_true(strncmp(json_string_value(json_object_get(j, "message")),
                        "Only following active statuses are allowed: ", 44) == 0);
    json_decref(j);
    j = parsed(kq_rest_apps_select(&f->app, "default", NULL, "sleeping", "", &b, &n), 400, &b, &n);
    assert_yapi_error(j, 400, "Only following application states are allowed: active, rejected, completed");
    json_decref(j);
    j = parsed(kq_rest_apps_select(&f->app, "other", NULL, "sleeping", "", &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Partition not found");
    json_decref(j);
    /* the queue form: partition, queue name, queue, then the state (active only), then the status */
    assert_int_equal(kq_rest_apps_select(&f->app, "default", "root.team-a", "ACTIVE", NULL, &b, &n), 0);
    j = parsed(kq_rest_apps_select(&f->app, "default", "root.team-a", "Completed", "", &b, &n), 400, &b, &n);
    assert_yapi_error(j, 400, "Only following application states are allowed: active");
    json_decref(j);
    j = parsed(kq_rest_apps_select(&f->app, "default", "root.nope", "Completed", "", &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Queue not found");
    json_decref(j);
    j = parsed(kq_rest_application(&f->app, "default", NULL, "app-1", &b, &n), 200, &b, &n);
    assert_string_equal(json_string_value(json_object_get(j, "applicationID")), "app-1");
    json_decref(j);
    j = parsed(kq_rest_application(&f->app, "default", "root.team-a", "app-2", &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Application not found");
    json_decref(j);
}

/* /ws/v1/metrics: yunikorn-core pkg/metrics/queue.go's labelled families and the pre-1.7
 * per-queue names (formatMetricName: '.' becomes '_'). */
static void test_yunikorn_metrics(void **state)
{
    fx_t *f = *state;
    add_usage(f);
    size_t n = 0;
    char *t = kq_rest_metrics(&f->app, &n);
    assert_non_null(t);
    assert_int_equal(n, strlen(t));
    assert_non_null(strstr(t, "# TYPE yunikorn_queue_app gauge\n"));
    assert_non_null(strstr(t, "yunikorn_queue_app{queue=\"root.team-a\",state=\"running\"} 1\n"));
    assert_non_null(strstr(t, "yunikorn_queue_resource{queue=\"root.team-a\",resource=\"vcore\",state=\"allocated\"} 1500\n"));
    assert_non_null(strstr(t, "yunikorn_queue_resource{queue=\"root.team-a\",resource=\"vcore\",state=\"max\"} 8000\n"));
    assert_non_null(strstr(t, "# TYPE yunikorn_root_team_a_queue_app gauge\n"));
    assert_non_null(strstr(t, "yunikorn_root_team_a_queue_resource{resource=\"vcore\",state=\"allocated\"} 1500\n"));
    assert_non_null(strstr(t, "yunikorn_scheduler_application_total{state=\"running\"} 1\n"));
    assert_null(strstr(t, "alice")); /* no identities */
    free(t);
}

/* yunikorn-core pkg/common/configs/configvalidator.go UserRegExp and GroupRegExp, with the
 * names of pkg/webservice/handlers_test.go TestSpecificUserResourceUsage and
 * TestSpecificGroupResourceUsage */
static void test_name_patterns(void **state)
{
    (void)state;
    assert_true(kq_rest_user_name_valid("test_a-b_c@#d@do:mai/n.com"));
    assert_true(kq_rest_user_name_valid("system:serviceaccount:ns:sa"));
    assert_true(kq_rest_user_name_valid("machine$"));
    assert_true(kq_rest_user_name_valid("_x"));
    assert_false(kq_rest_user_name_valid("1InvalidUser"));
    assert_false(kq_rest_user_name_valid("a$b"));
    assert_false(kq_rest_user_name_valid(""));
    assert_false(kq_rest_user_name_valid("a b"));
    assert_true(kq_rest_group_name_valid("system:serviceaccounts:ns"));
    assert_true(kq_rest_group_name_valid("dev.ops-1_x"));
    assert_false(kq_rest_group_name_valid("test_a-b_c@#d@do:mai/n.com"));
    assert_false(kq_rest_group_name_valid("*"));
    assert_false(kq_rest_group_name_valid("grp$"));
    assert_false(kq_rest_group_name_valid("9grp"));
}

static void test_groups_and_group(void **state)
{
    fx_t *f = *state;
    add_usage(f);
    char *b;
    size_t n;
    json_t *j = parsed(kq_rest_groups(&f->app, "default", &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "groupName")), "dev");
    json_decref(j);

    j = parsed(kq_rest_group(&f->app, "default", "dev", &b, &n), 200, &b, &n);
    assert_string_equal(json_string_value(json_object_get(j, "groupName")), "dev");
    json_decref(j);

    j = parsed(kq_rest_group(&f->app, "default", "ops", &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Group not found");
    json_decref(j);
}

/* kq_rest_write_fn collecting into a growing buffer; fails once `fail_at` bytes were taken. */
typedef struct sink {
    char *buf;
    size_t len, cap, fail_at;
    int calls;
} sink_t;

static int sink_write(void *ctx, const char *p, size_t n)
{
    sink_t *k = ctx;
    k->calls++;
    if (k->fail_at > 0 && k->len + n > k->fail_at)
        return -1;
    if (k->len + n + 1 > k->cap) {
        k->cap = (k->len + n + 1) * 2;
        k->buf = realloc(k->buf, k->cap);
        assert_non_null(k->buf);
    }
    memcpy(k->buf + k->len, p, n);
    k->len += n;
    k->buf[k->len] = '\0';
    return 0;
}

/* The streamed users, groups and applications views are the buffered answers, byte for
 * byte: with no one, with one, and with many users in many groups. */
static void check_stream_same(fx_t *f, kq_rest_view_t view)
{
    char *b = NULL, *eb = NULL;
    size_t n = 0, en = 0;
    int st = view == KQ_REST_VIEW_GROUPS ? kq_rest_groups(&f->app, "default", &b, &n)
             : view == KQ_REST_VIEW_APPS ? kq_rest_apps(&f->app, "default", NULL, &b, &n)
                                         : kq_rest_users(&f->app, "default", &b, &n);
    assert_int_equal(st, 200);
    sink_t k = {0};
    assert_int_equal(kq_rest_stream(&f->app, view, "default", NULL, sink_write, &k, &eb, &en), 200);
    assert_null(eb);
    assert_int_equal(k.len, n);
    assert_memory_equal(k.buf, b, n);
    free(k.buf);
    free(b);
}

static void check_streams_same(fx_t *f)
{
    check_stream_same(f, KQ_REST_VIEW_USERS);
    check_stream_same(f, KQ_REST_VIEW_GROUPS);
    check_stream_same(f, KQ_REST_VIEW_APPS);
}

static void test_usage_stream_same_bytes(void **state)
{
    fx_t *f = *state;
    check_streams_same(f);
    add_usage(f);
    check_streams_same(f);
    char reason[256];
    for (int i = 0; i < 300; i++) {
        char name[32], group[32];
        snprintf(name, sizeof(name), "user-%03d", i);
        snprintf(group, sizeof(group), "g%d", i % 13);
        const char *gs[] = {group};
        kq_user_t u = {.name = name, .groups = gs, .n_groups = 1};
        kq_resource_t r = KQ_RESOURCE_EMPTY;
        assert_int_equal(kq_resource_set(&r, "cpu", 1 + i % 3), 0);
        char app[32];
        snprintf(app, sizeof(app), "batch-%d", i);
        assert_int_equal(kq_ugm_increase(f->app.ugm, "root.team-a", app, &u, &r, reason,
                                         sizeof(reason), NULL), 0);
        kq_resource_free(&r);
    }
    check_streams_same(f);

    /* a state kubequota keeps no history of: the buffered empty list, nothing written */
    sink_t k = {0};
    char *eb = NULL;
    size_t en = 0;
    assert_int_equal(kq_rest_stream(&f->app, KQ_REST_VIEW_APPS, "default", "completed", sink_write, &k, &eb, &en), 200);
    assert_int_equal(k.calls, 0);
    assert_string_equal(eb, "[]");
    free(eb);
    eb = NULL;
    assert_int_equal(kq_rest_stream(&f->app, KQ_REST_VIEW_APPS, "default", "bogus", sink_write, &k, &eb, &en), 400);
    assert_int_equal(k.calls, 0);
    free(eb);
    eb = NULL;
    /* an unknown partition: the buffered error, nothing written */
    assert_int_equal(kq_rest_stream(&f->app, KQ_REST_VIEW_USERS, "other", NULL, sink_write, &k, &eb, &en), 404);
    assert_int_equal(k.calls, 0);
    assert_non_null(eb);
    free(eb);
    /* a write that fails part way: cut off (-1), no more writes */
    k = (sink_t){.fail_at = 1000};
    assert_int_equal(kq_rest_stream(&f->app, KQ_REST_VIEW_USERS, "default", NULL, sink_write, &k, &eb, &en), -1);
    int calls = k.calls;
    assert_true(k.len <= 1000);
    free(k.buf);
    assert_true(calls > 1);
}

static void test_queues(void **state)
{
    fx_t *f = *state;
    add_usage(f);
    char *b;
    size_t n;
    json_t *j = parsed(kq_rest_queues(&f->app, "default", &b, &n), 200, &b, &n);
    assert_string_equal(json_string_value(json_object_get(j, "queuename")), "root");
    const json_t *team = child_named(j, "queuename", "root.team-a");
    assert_non_null(team);
    const json_t *alloc = json_object_get(team, "allocatedResource");
    assert_int_equal(json_integer_value(json_object_get(alloc, "cpu")) +
                         json_integer_value(json_object_get(alloc, "vcore")),
                     1500);
    json_decref(j);
}

static void test_unknown_partition(void **state)
{
    fx_t *f = *state;
    char *b;
    size_t n;
    json_t *j = parsed(kq_rest_users(&f->app, "other", &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Partition not found");
    json_decref(j);
    j = parsed(kq_rest_groups(&f->app, "other", &b, &n), 404, &b, &n);
    json_decref(j);
    j = parsed(kq_rest_queues(&f->app, "other", &b, &n), 404, &b, &n);
    json_decref(j);
    j = parsed(kq_rest_user(&f->app, "other", "alice", &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Partition not found");
    json_decref(j);
    j = parsed(kq_rest_group(&f->app, "", "dev", &b, &n), 404, &b, &n);
    json_decref(j);
}

static void test_validate_conf(void **state)
{
    (void)state;
    char *b;
    size_t n;
    json_t *j = parsed(kq_rest_validate_conf(NULL, QUEUES_YAML, strlen(QUEUES_YAML), &b, &n), 200, &b, &n);
    assert_true(json_is_true(json_object_get(j, "allowed")));
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "");
    json_decref(j);

    /* two problems: both are reported, with where they are */
    static const char bad[] =
        "partitions:\n"
        "  - name: default\n"
        "    queues:\n"
        "      - name: root\n"
        "        queues:\n"
        "          - name: a\n"
        "            resources:\n"
        "              max:\n"
        "                vcore: lots\n"
        "          - name: a\n";
    j = parsed(kq_rest_validate_conf(NULL, bad, strlen(bad), &b, &n), 200, &b, &n);
    assert_true(json_is_false(json_object_get(j, "allowed")));
    const char *reason = json_string_value(json_object_get(j, "reason"));
    assert_non_null(reason);
    assert_non_null(strstr(reason, "lots"));
    assert_non_null(strstr(reason, "; "));
    json_decref(j);

    static const char *const garbage[] = {":::\n- [", "partitions: 7\n", "- just\n- a list\n", "a: \xff\n"};
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        j = parsed(kq_rest_validate_conf(NULL, garbage[i], strlen(garbage[i]), &b, &n), 200, &b, &n);
        assert_true(json_is_false(json_object_get(j, "allowed")));
        assert_true(strlen(json_string_value(json_object_get(j, "reason"))) > 0);
        json_decref(j);
    }
}

static void test_error_body(void **state)
{
    (void)state;
    size_t n = 0;
    char *b = kq_rest_error_body(418, "a \"quoted\" thing", NULL, &n);
    json_t *j = json_loads(b, 0, NULL);
    assert_yapi_error(j, 418, "a \"quoted\" thing");
    assert_string_equal(json_string_value(json_object_get(j, "description")), "a \"quoted\" thing");
    assert_int_equal(n, strlen(b));
    json_decref(j);
    free(b);
}

/* The queue, applications, partitions, clusters, health and config views (shapes of
 * apache/yunikorn-core pkg/webservice/dao: queue_info.go, application_info.go,
 * partition_info.go, cluster_info.go, scheduler_health.go; errors as handlers.go). */
static void test_more_views(void **state)
{
    fx_t *f = *state;
    add_usage(f);
    char *b;
    size_t n;
    /* one queue: no children without ?subtree, childNames always */
    json_t *j = parsed(kq_rest_queue(&f->app, "default", "root", false, &b, &n), 200, &b, &n);
    assert_string_equal(json_string_value(json_object_get(j, "queuename")), "root");
    assert_null(json_object_get(j, "children"));
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "childNames"), 0)), "root.team-a");
    json_decref(j);
    j = parsed(kq_rest_queue(&f->app, "default", "ROOT.team-a", true, &b, &n), 200, &b, &n);
    assert_string_equal(json_string_value(json_object_get(j, "queuename")), "root.team-a");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "maxResource"), "vcore")), 8000);
    json_decref(j);
    j = parsed(kq_rest_queue(&f->app, "default", "root.nope", false, &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Queue not found");
    json_decref(j);
    j = parsed(kq_rest_queue(&f->app, "default", "root..x", false, &b, &n), 400, &b, &n);
    /* yunikorn-core pkg/common/errors.go ErrorInvalidQueueName */
    assert_yapi_error(j, 400, "invalid queue name, max 64 characters consisting of alphanumeric characters and "
                              "'-', '_', '#', '@', '/', ':' allowed");
    json_decref(j);
    j = parsed(kq_rest_queue(&f->app, "other", "root", false, &b, &n), 404, &b, &n);
    assert_yapi_error(j, 404, "Partition not found");
    json_decref(j);

    /* applications: app-1 of alice (group dev) in root.team-a */
    j = parsed(kq_rest_queue_apps(&f->app, "default", "root.team-a", &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 1);
    const json_t *a = json_array_get(j, 0);
    assert_string_equal(json_string_value(json_object_get(a, "applicationID")), "app-1");
    assert_string_equal(json_string_value(json_object_get(a, "queueName")), "root.team-a");
    assert_string_equal(json_string_value(json_object_get(a, "partition")), "default");
    assert_string_equal(json_string_value(json_object_get(a, "user")), "alice");
    assert_string_equal(json_string_value(json_array_get(json_object_get(a, "groups"), 0)), "dev");
    assert_string_equal(json_string_value(json_object_get(a, "applicationState")), "Running");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "usedResource"), "vcore")), 1500);
    json_decref(j);
    j = parsed(kq_rest_queue_apps(&f->app, "default", "root", &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 0); /* the application's queue is the leaf */
    json_decref(j);
    j = parsed(kq_rest_apps(&f->app, "default", NULL, &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 1);
    json_decref(j);
    j = parsed(kq_rest_apps(&f->app, "default", "completed", &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 0);
    json_decref(j);
    j = parsed(kq_rest_apps(&f->app, "default", "sleeping", &b, &n), 400, &b, &n);
    json_decref(j);

    /* partitions: one, with its usage and application count */
    j = parsed(kq_rest_partitions(&f->app, &b, &n), 200, &b, &n);
    assert_int_equal(json_array_size(j), 1);
    const json_t *p = json_array_get(j, 0);
    assert_string_equal(json_string_value(json_object_get(p, "name")), "default");
    assert_true(json_is_string(json_object_get(p, "clusterId")));
    assert_true(json_is_boolean(json_object_get(p, "preemptionEnabled")));
    assert_true(json_is_boolean(json_object_get(p, "quotaPreemptionEnabled")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(p, "capacity"), "usedCapacity"),
                                                        "vcore")),
                     1500);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "applications"), "total")), 1);
    assert_int_equal(json_integer_value(json_object_get(p, "totalContainers")), 1);
    json_decref(j);

    j = parsed(kq_rest_clusters(&f->app, &b, &n), 200, &b, &n);
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "partition")), "default");
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "clusterName")), "kubernetes");
    json_decref(j);

    j = parsed(kq_rest_healthcheck(&f->app, &b, &n), 200, &b, &n);
    assert_true(json_is_boolean(json_object_get(j, "Healthy")));
    assert_true(json_is_array(json_object_get(j, "HealthChecks")));
    json_decref(j);

    /* the configuration in force, reloadable as a queues.yaml */
    j = parsed(kq_rest_config(&f->app, &b, &n), 200, &b, &n);
    char *text = json_dumps(j, JSON_COMPACT);
    assert_non_null(strstr(text, "\"vcore\":\"8\""));
    assert_non_null(strstr(text, "\"limit\":\"alice\""));
    size_t tlen = strlen(text);
    json_t *v = parsed(kq_rest_validate_conf(&f->app, text, tlen, &b, &n), 200, &b, &n);
    assert_true(json_is_true(json_object_get(v, "allowed")));
    json_decref(v);
    free(text);
    json_decref(j);

    j = parsed(kq_rest_nodes(&f->app, "default", &b, &n), 200, &b, &n);
    assert_true(json_is_array(j));
    json_decref(j);
}

int main(void)
{
    kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_users_and_user, setup, teardown),
        cmocka_unit_test(test_name_patterns),
        cmocka_unit_test_setup_teardown(test_apps_select, setup, teardown),
        cmocka_unit_test_setup_teardown(test_yunikorn_metrics, setup, teardown),
        cmocka_unit_test_setup_teardown(test_groups_and_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queues, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage_stream_same_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_partition, setup, teardown),
        cmocka_unit_test(test_validate_conf),
        cmocka_unit_test(test_error_body),
        cmocka_unit_test_setup_teardown(test_more_views, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
