/* Unit tests for ugm.c: tracking at every level, group selection, limits of users, groups
 * and queues, denials that change nothing, cleanup, configuration changes, the REST views,
 * the compact storage (usage growing to 16 resource names and shrinking, applications in
 * several queues, hundreds of applications per user) and a multi-threaded run whose totals
 * are checked exactly. Configurations are loaded
 * from YAML text with kq_config_load_buffer; expected values are written out by hand. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/log.h"
#include "kubequota/engine/resource.h"
#include "kubequota/engine/ugm.h"

#include "testutil.h"

#define MI (INT64_C(1024) * 1024)
#define GI (MI * 1024)

/* ------------------------------------------------------------------ helpers */

static kq_config_t *load(const char *yaml)
{
    kq_config_t *cfg = test_config(yaml);
    assert_non_null(cfg);
    return cfg;
}

/* A manager for partition "default" with the configuration (NULL: none). */
static kq_ugm_t *mgr(const char *yaml)
{
    kq_ugm_t *m = kq_ugm_new("default");
    assert_non_null(m);
    if (yaml != NULL) {
        kq_config_t *cfg = load(yaml);
        assert_int_equal(kq_ugm_set_config(m, cfg), 0);
        kq_config_unref(cfg);
    }
    return m;
}

static void apply(kq_ugm_t *m, const char *yaml)
{
    kq_config_t *cfg = load(yaml);
    assert_int_equal(kq_ugm_set_config(m, cfg), 0);
    kq_config_unref(cfg);
}

/* cpu in millicores, memory in bytes; 0 leaves the resource out. */
static kq_resource_t res(int64_t cpu, int64_t mem)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    if (cpu != 0)
        assert_int_equal(kq_resource_set(&r, "cpu", cpu), 0);
    if (mem != 0)
        assert_int_equal(kq_resource_set(&r, "memory", mem), 0);
    return r;
}

static kq_user_t usr(const char *name, const char *const *groups, size_t n)
{
    kq_user_t u = {.name = name, .groups = groups, .n_groups = n};
    return u;
}

static char reason[512];
static kq_denial_t kind; /* the kind of the last inc's denial */

static int inc(kq_ugm_t *m, const char *q, const char *app, const kq_user_t *u, int64_t cpu, int64_t mem)
{
    kq_resource_t r = res(cpu, mem);
    reason[0] = 'x';
    kind = KQ_DENIAL_COUNT; /* not a kind: the call must set it */
    return kq_ugm_increase(m, q, app, u, &r, reason, sizeof(reason), &kind);
}

static int dec(kq_ugm_t *m, const char *q, const char *app, const char *user, int64_t cpu, int64_t mem)
{
    kq_resource_t r = res(cpu, mem);
    return kq_ugm_decrease(m, q, app, user, &r);
}

/* The Usage node with queuePath == path inside a Usage tree, or NULL. */
static json_t *find_usage(json_t *u, const char *path)
{
    if (u == NULL)
        return NULL;
    const char *p = json_string_value(json_object_get(u, "queuePath"));
    if (p != NULL && strcmp(p, path) == 0)
        return u;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(u, "children"), i, c) {
        json_t *hit = find_usage(c, path);
        if (hit != NULL)
            return hit;
    }
    return NULL;
}

/* The queue object with queuename == path inside the queue view, or NULL. */
static json_t *find_queue(json_t *q, const char *path)
{
    if (q == NULL)
        return NULL;
    const char *p = json_string_value(json_object_get(q, "queuename"));
    if (p != NULL && strcmp(p, path) == 0)
        return q;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(q, "children"), i, c) {
        json_t *hit = find_queue(c, path);
        if (hit != NULL)
            return hit;
    }
    return NULL;
}

/* The views name cpu "vcore", as YuniKorn's shim does. */
static int64_t jres(json_t *map, const char *name)
{
    json_t *v = json_object_get(map, strcmp(name, "cpu") == 0 ? "vcore" : name);
    return v != NULL ? (int64_t)json_integer_value(v) : 0;
}

/* Usage of user (or group) at path: resource `name`; -1 when the node is missing. */
static int64_t used_at(kq_ugm_t *m, bool group, const char *who, const char *path, const char *name)
{
    json_t *t = group ? kq_ugm_group_json(m, who) : kq_ugm_user_json(m, who);
    if (t == NULL)
        return -1;
    json_t *n = find_usage(json_object_get(t, "queues"), path);
    int64_t v = n != NULL ? jres(json_object_get(n, "resourceUsage"), name) : -1;
    json_decref(t);
    return v;
}

/* Number of running applications of user (or group) at path; -1 when missing. */
static int apps_at(kq_ugm_t *m, bool group, const char *who, const char *path)
{
    json_t *t = group ? kq_ugm_group_json(m, who) : kq_ugm_user_json(m, who);
    if (t == NULL)
        return -1;
    json_t *n = find_usage(json_object_get(t, "queues"), path);
    int v = n != NULL ? (int)json_array_size(json_object_get(n, "runningApplications")) : -1;
    json_decref(t);
    return v;
}

static int64_t queue_alloc(kq_ugm_t *m, const char *path, const char *name)
{
    json_t *v = kq_ugm_queues_json(m);
    assert_non_null(v);
    json_t *q = find_queue(v, path);
    int64_t r = q != NULL ? jres(json_object_get(q, "allocatedResource"), name) : -1;
    json_decref(v);
    return r;
}

static int64_t queue_apps(kq_ugm_t *m, const char *path)
{
    json_t *v = kq_ugm_queues_json(m);
    assert_non_null(v);
    json_t *q = find_queue(v, path);
    int64_t r = q != NULL ? (int64_t)json_integer_value(json_object_get(q, "runningApps")) : -1;
    json_decref(v);
    return r;
}

/* The group the user's application is tracked against, or NULL (copied). */
static char *app_group(kq_ugm_t *m, const char *user, const char *app)
{
    json_t *t = kq_ugm_user_json(m, user);
    assert_non_null(t);
    const char *g = json_string_value(json_object_get(json_object_get(t, "groups"), app));
    char *out = g != NULL ? strdup(g) : NULL;
    json_decref(t);
    return out;
}

static void assert_app_group(kq_ugm_t *m, const char *user, const char *app, const char *want)
{
    char *g = app_group(m, user, app);
    if (want == NULL) {
        assert_null(g);
    } else {
        assert_non_null(g);
        assert_string_equal(g, want);
    }
    free(g);
}

/* All three views as one canonical string (caller frees). */
static char *snapshot(kq_ugm_t *m)
{
    json_t *all = json_pack("{s:o s:o s:o}", "users", kq_ugm_users_json(m), "groups", kq_ugm_groups_json(m),
                            "queues", kq_ugm_queues_json(m));
    assert_non_null(all);
    char *s = json_dumps(all, JSON_SORT_KEYS | JSON_COMPACT);
    json_decref(all);
    assert_non_null(s);
    return s;
}

#define CFG_HEAD "partitions:\n  - name: default\n    queues:\n      - name: root\n"

/* ------------------------------------------------------------------ tracking */

static void test_tracking_totals(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(NULL);
    const char *g[] = {"dev"};
    kq_user_t alice = usr("alice", g, 1), bob = usr("bob", NULL, 0);

    assert_int_equal(inc(m, "root.a.b", "app1", &alice, 500, 1 * GI), 0);
    assert_string_equal(reason, "");
    assert_int_equal(inc(m, "root.a.b", "app1", &alice, 500, 1 * GI), 0);
    assert_int_equal(inc(m, "root.a.c", "app2", &alice, 250, 0), 0);
    assert_int_equal(inc(m, "root.d", "app3", &bob, 1000, 2 * GI), 0);

    assert_int_equal(used_at(m, false, "alice", "root", "cpu"), 1250);
    assert_int_equal(used_at(m, false, "alice", "root", "memory"), 2 * GI);
    assert_int_equal(used_at(m, false, "alice", "root.a", "cpu"), 1250);
    assert_int_equal(used_at(m, false, "alice", "root.a.b", "cpu"), 1000);
    assert_int_equal(used_at(m, false, "alice", "root.a.c", "cpu"), 250);
    assert_int_equal(used_at(m, false, "alice", "root.d", "cpu"), -1);
    assert_int_equal(apps_at(m, false, "alice", "root"), 2);
    assert_int_equal(apps_at(m, false, "alice", "root.a.b"), 1);
    assert_int_equal(used_at(m, false, "bob", "root", "cpu"), 1000);

    assert_int_equal(queue_alloc(m, "root", "cpu"), 2250);
    assert_int_equal(queue_alloc(m, "root", "memory"), 4 * GI);
    assert_int_equal(queue_alloc(m, "root.a", "cpu"), 1250);
    assert_int_equal(queue_alloc(m, "root.a.b", "cpu"), 1000);
    assert_int_equal(queue_alloc(m, "root.d", "cpu"), 1000);
    assert_int_equal(queue_apps(m, "root"), 3);
    assert_int_equal(queue_apps(m, "root.a"), 2);

    /* without a configuration there are no group limits: no group tracking */
    assert_int_equal(kq_ugm_group_count(m), 0);
    assert_int_equal(kq_ugm_user_count(m), 2);

    /* one of app1's two allocations goes: still running, half the usage */
    assert_int_equal(dec(m, "root.a.b", "app1", "alice", 500, 1 * GI), 0);
    assert_int_equal(used_at(m, false, "alice", "root.a.b", "cpu"), 500);
    assert_int_equal(apps_at(m, false, "alice", "root.a.b"), 1);
    assert_int_equal(dec(m, "root.a.b", "app1", "alice", 500, 1 * GI), 0);
    assert_int_equal(used_at(m, false, "alice", "root.a.b", "cpu"), -1); /* pruned */
    assert_int_equal(apps_at(m, false, "alice", "root"), 1);
    assert_int_equal(used_at(m, false, "alice", "root", "memory"), 0);
    assert_int_equal(queue_alloc(m, "root", "cpu"), 1250);
    assert_int_equal(queue_apps(m, "root"), 2);
    kq_ugm_free(m);
}

static void test_case_insensitive_paths(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: a\n"
                      "            limits:\n"
                      "              - limit: alice-limit\n"
                      "                users: [alice]\n"
                      "                maxresources: {cpu: \"1\"}\n");
    kq_user_t alice = usr("alice", NULL, 0);
    assert_int_equal(inc(m, "root.A", "app", &alice, 1000, 0), 0);
    assert_int_equal(inc(m, "ROOT.a", "app", &alice, 1, 0), KQ_EDENIED);
    assert_int_equal(used_at(m, false, "alice", "root.a", "cpu"), 1000);
    assert_int_equal(dec(m, "Root.A", "app", "alice", 1000, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ group selection */

static const char *groups_cfg = CFG_HEAD
    "        limits:\n"
    "          - limit: root-eng\n"
    "            groups: [eng]\n"
    "            maxapplications: 100\n"
    "          - limit: root-any\n"
    "            groups: [other, \"*\"]\n"
    "            maxapplications: 100\n"
    "        queues:\n"
    "          - name: a\n"
    "            limits:\n"
    "              - limit: a-ops\n"
    "                groups: [ops]\n"
    "                maxapplications: 50\n"
    "            queues:\n"
    "              - name: b\n"
    "                limits:\n"
    "                  - limit: b-dev\n"
    "                    groups: [dev]\n"
    "                    maxapplications: 10\n"
    "              - name: c\n"
    "              - name: d\n"
    "                limits:\n"
    "                  - limit: d-order\n"
    "                    groups: [g2, g1]\n"
    "                    maxapplications: 10\n";

static void test_group_selection(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(groups_cfg);
    const char *cg[] = {"eng", "ops", "dev"};
    kq_user_t carol = usr("carol", cg, 3);
    /* limit on the leaf wins */
    assert_int_equal(inc(m, "root.a.b", "c1", &carol, 100, 0), 0);
    assert_app_group(m, "carol", "c1", "dev");
    /* no group limit on the leaf: the parent's */
    assert_int_equal(inc(m, "root.a.c", "c2", &carol, 100, 0), 0);
    assert_app_group(m, "carol", "c2", "ops");
    /* a queue the configuration does not know: root's named group */
    assert_int_equal(inc(m, "root.e", "c3", &carol, 100, 0), 0);
    assert_app_group(m, "carol", "c3", "eng");

    /* several groups match at one queue: the one listed first in the file */
    const char *dg[] = {"g1", "g2"};
    kq_user_t dave = usr("dave", dg, 2);
    assert_int_equal(inc(m, "root.a.d", "d1", &dave, 100, 0), 0);
    assert_app_group(m, "dave", "d1", "g2");

    /* a named group beats the wildcard even when the user lists another group first */
    const char *eg[] = {"zeta", "eng"};
    kq_user_t erin = usr("erin", eg, 2);
    assert_int_equal(inc(m, "root.a.c", "e1", &erin, 100, 0), 0);
    assert_app_group(m, "erin", "e1", "eng");

    /* only the wildcard matches: the application is tracked against the group "*" itself
     * (apache/yunikorn-core pkg/scheduler/ugm/manager.go ensureGroupInternal) */
    const char *fg[] = {"zeta", "yotta"};
    kq_user_t frank = usr("frank", fg, 2);
    assert_int_equal(inc(m, "root.a.b", "f1", &frank, 100, 0), 0);
    assert_app_group(m, "frank", "f1", "*");

    /* no groups: no group */
    kq_user_t gina = usr("gina", NULL, 0);
    assert_int_equal(inc(m, "root.a.b", "g1", &gina, 100, 0), 0);
    assert_app_group(m, "gina", "g1", NULL);

    assert_int_equal(kq_ugm_group_count(m), 5); /* dev ops eng g2 * */
    assert_int_equal(used_at(m, true, "eng", "root", "cpu"), 200);
    assert_int_equal(used_at(m, true, "eng", "root.e", "cpu"), 100);
    assert_int_equal(used_at(m, true, "dev", "root.a.b", "cpu"), 100);
    assert_int_equal(used_at(m, true, "*", "root.a.b", "cpu"), 100);
    assert_null(kq_ugm_group_json(m, "zeta"));
    assert_null(kq_ugm_group_json(m, "yotta"));
    /* g1 is named in a limit: shown with its limit before any use */
    json_t *g1 = kq_ugm_group_json(m, "g1");
    assert_non_null(g1);
    assert_null(json_object_get(g1, "applications"));
    json_t *g1d = find_usage(json_object_get(g1, "queues"), "root.a.d");
    assert_non_null(g1d);
    assert_int_equal(json_integer_value(json_object_get(g1d, "maxApplications")), 10);
    assert_null(json_object_get(g1d, "resourceUsage"));
    json_decref(g1);

    /* the group view lists users and applications */
    json_t *eng = kq_ugm_group_json(m, "eng");
    assert_non_null(eng);
    char *s = json_dumps(json_object_get(eng, "users"), JSON_COMPACT);
    assert_string_equal(s, "[\"carol\",\"erin\"]");
    free(s);
    s = json_dumps(json_object_get(eng, "applications"), JSON_COMPACT);
    assert_string_equal(s, "[\"c3\",\"e1\"]");
    free(s);
    json_decref(eng);
    kq_ugm_free(m);
}

static void test_no_group_limits_no_group_tracking(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        limits:\n"
                      "          - limit: users-only\n"
                      "            users: [alice]\n"
                      "            maxapplications: 5\n");
    const char *g[] = {"dev", "ops"};
    kq_user_t alice = usr("alice", g, 2);
    assert_int_equal(inc(m, "root.a", "app", &alice, 100, 0), 0);
    assert_int_equal(kq_ugm_group_count(m), 0);
    assert_app_group(m, "alice", "app", NULL);
    kq_ugm_free(m);
}

static void test_group_fixed_for_app_life(void **state)
{
    (void)state;
    const char *cfg_dev = CFG_HEAD
        "        queues:\n"
        "          - name: a\n"
        "            limits:\n"
        "              - limit: dev-apps\n"
        "                groups: [dev]\n"
        "                maxapplications: 10\n";
    const char *cfg_ops = CFG_HEAD
        "        queues:\n"
        "          - name: a\n"
        "            limits:\n"
        "              - limit: ops-apps\n"
        "                groups: [ops]\n"
        "                maxapplications: 10\n";
    kq_ugm_t *m = mgr(cfg_dev);
    const char *g[] = {"ops", "dev"};
    kq_user_t hank = usr("hank", g, 2);
    assert_int_equal(inc(m, "root.a", "app1", &hank, 100, 0), 0);
    assert_app_group(m, "hank", "app1", "dev");

    apply(m, cfg_ops);
    /* the running application stays with its group */
    assert_int_equal(inc(m, "root.a", "app1", &hank, 100, 0), 0);
    assert_app_group(m, "hank", "app1", "dev");
    assert_int_equal(used_at(m, true, "dev", "root.a", "cpu"), 200);
    /* ops, named by the new limit, is shown with it (no usage) */
    assert_int_equal(used_at(m, true, "ops", "root.a", "cpu"), 0);
    /* dev's removed limit is no longer shown */
    json_t *dev = kq_ugm_group_json(m, "dev");
    json_t *n = find_usage(json_object_get(dev, "queues"), "root.a");
    assert_non_null(n);
    assert_null(json_object_get(n, "maxApplications"));
    json_decref(dev);
    /* a new application follows the new configuration */
    assert_int_equal(inc(m, "root.a", "app2", &hank, 100, 0), 0);
    assert_app_group(m, "hank", "app2", "ops");

    /* once app1's last allocation is released, it starts afresh */
    assert_int_equal(dec(m, "root.a", "app1", "hank", 100, 0), 0);
    assert_app_group(m, "hank", "app1", "dev");
    assert_int_equal(dec(m, "root.a", "app1", "hank", 100, 0), 0);
    assert_null(kq_ugm_group_json(m, "dev"));
    assert_int_equal(inc(m, "root.a", "app1", &hank, 100, 0), 0);
    assert_app_group(m, "hank", "app1", "ops");
    assert_int_equal(apps_at(m, true, "ops", "root.a"), 2);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ user limits */

static void test_named_user_beats_wildcard(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        limits:\n"
                      "          - limit: root-everyone\n"
                      "            users: [\"*\"]\n"
                      "            maxresources: {cpu: \"6\"}\n"
                      "        queues:\n"
                      "          - name: a\n"
                      "            limits:\n"
                      "              - limit: alice-limit\n"
                      "                users: [alice]\n"
                      "                maxresources: {cpu: \"1\"}\n"
                      "              - limit: everyone\n"
                      "                users: [\"*\"]\n"
                      "                maxresources: {cpu: \"4\"}\n"
                      "          - name: b\n");
    kq_user_t alice = usr("alice", NULL, 0), bob = usr("bob", NULL, 0);
    assert_int_equal(inc(m, "root.a", "a1", &alice, 500, 0), 0);
    assert_int_equal(inc(m, "root.a", "a1", &alice, 500, 0), 0);
    assert_int_equal(inc(m, "root.a", "a1", &alice, 500, 0), KQ_EDENIED);
    assert_string_equal(reason, "user alice in queue root.a: limit \"alice-limit\" exceeded: "
                                "cpu 1 used + 500m requested > 1 max; needs 500m more cpu");
    for (int i = 0; i < 4; i++)
        assert_int_equal(inc(m, "root.a", "b1", &bob, 1000, 0), 0);
    assert_int_equal(inc(m, "root.a", "b1", &bob, 1000, 0), KQ_EDENIED);
    assert_string_equal(reason, "user bob in queue root.a: limit \"everyone\" (user *) exceeded: "
                                "cpu 4 used + 1 requested > 4 max; needs 1 more cpu");
    /* alice's named limit at root.a does not lift the wildcard limit at root */
    assert_int_equal(inc(m, "root.b", "a2", &alice, 5000, 0), 0);
    assert_int_equal(inc(m, "root.b", "a2", &alice, 500, 0), KQ_EDENIED);
    assert_string_equal(reason, "user alice in queue root: limit \"root-everyone\" (user *) exceeded: "
                                "cpu 6 used + 500m requested > 6 max; needs 500m more cpu");
    /* a request without cpu is not held back by a cpu limit */
    assert_int_equal(inc(m, "root.b", "a2", &alice, 0, 1 * GI), 0);

    /* the view shows the limit in force for each user at each queue */
    json_t *u = kq_ugm_user_json(m, "alice");
    json_t *n = find_usage(json_object_get(u, "queues"), "root.a");
    assert_int_equal(jres(json_object_get(n, "maxResources"), "cpu"), 1000);
    n = find_usage(json_object_get(u, "queues"), "root");
    assert_int_equal(jres(json_object_get(n, "maxResources"), "cpu"), 6000);
    n = find_usage(json_object_get(u, "queues"), "root.b");
    assert_null(json_object_get(n, "maxResources"));
    assert_null(json_object_get(n, "maxApplications"));
    json_decref(u);
    u = kq_ugm_user_json(m, "bob");
    n = find_usage(json_object_get(u, "queues"), "root.a");
    assert_int_equal(jres(json_object_get(n, "maxResources"), "cpu"), 4000);
    json_decref(u);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ denials */

static void test_denied_increase_changes_nothing(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        limits:\n"
                      "          - limit: dev-limit\n"
                      "            groups: [dev]\n"
                      "            maxresources: {cpu: \"2\"}\n"
                      "        queues:\n"
                      "          - name: a\n"
                      "            queues:\n"
                      "              - name: b\n");
    const char *dev[] = {"dev"};
    kq_user_t alice = usr("alice", dev, 1), bob = usr("bob", dev, 1);
    assert_int_equal(inc(m, "root.a.b", "a1", &alice, 1500, 1 * GI), 0);
    char *before = snapshot(m);

    /* a new user, application and group level: denied at root by the group limit */
    assert_int_equal(inc(m, "root.a.b", "b1", &bob, 1000, 0), KQ_EDENIED);
    assert_string_equal(reason, "group dev in queue root: limit \"dev-limit\" exceeded: "
                                "cpu 1500m used + 1 requested > 2 max; needs 500m more cpu");
    char *after = snapshot(m);
    assert_string_equal(before, after);
    free(after);
    assert_int_equal(kq_ugm_user_count(m), 1);
    assert_int_equal(kq_ugm_group_count(m), 1);

    /* an existing application, denied as well */
    assert_int_equal(inc(m, "root.a.b", "a1", &alice, 600, 0), KQ_EDENIED);
    after = snapshot(m);
    assert_string_equal(before, after);
    free(after);

    /* a check changes nothing either way */
    kq_resource_t r = res(500, 0);
    assert_int_equal(kq_ugm_check(m, "root.a.b", "b1", &bob, &r, reason, sizeof(reason), NULL), 0);
    r = res(501, 0);
    assert_int_equal(kq_ugm_check(m, "root.a.b", "b1", &bob, &r, reason, sizeof(reason), NULL), KQ_EDENIED);
    assert_string_equal(reason, "group dev in queue root: limit \"dev-limit\" exceeded: "
                                "cpu 1500m used + 501m requested > 2 max; needs 1m more cpu");
    after = snapshot(m);
    assert_string_equal(before, after);
    free(after);
    assert_int_equal(kq_ugm_user_count(m), 1);
    free(before);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ maxapplications */

static const char *apps_cfg = CFG_HEAD
    "        queues:\n"
    "          - name: u\n"
    "            limits:\n"
    "              - limit: alice-apps\n"
    "                users: [alice]\n"
    "                maxapplications: 2\n"
    "          - name: g\n"
    "            limits:\n"
    "              - limit: dev-apps\n"
    "                groups: [dev]\n"
    "                maxapplications: 2\n"
    "          - name: q\n"
    "            maxapplications: 2\n";

static void test_max_applications_user(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(apps_cfg);
    kq_user_t alice = usr("alice", NULL, 0), bob = usr("bob", NULL, 0);
    assert_int_equal(inc(m, "root.u", "app1", &alice, 100, 0), 0);
    assert_int_equal(inc(m, "root.u", "app2", &alice, 100, 0), 0);
    /* more allocations of a running application do not count as new applications */
    assert_int_equal(inc(m, "root.u", "app1", &alice, 100, 0), 0);
    assert_int_equal(inc(m, "root.u", "app3", &alice, 100, 0), KQ_EDENIED);
    assert_string_equal(reason, "user alice in queue root.u: limit \"alice-apps\" exceeded: "
                                "applications 2 running + 1 new > 2 max");
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(inc(m, "root.u", "bob-app", &bob, 100, 0), 0); /* bob has no limit */
    /* app1 runs until its last allocation is released */
    assert_int_equal(dec(m, "root.u", "app1", "alice", 100, 0), 0);
    assert_int_equal(inc(m, "root.u", "app3", &alice, 100, 0), KQ_EDENIED);
    assert_int_equal(dec(m, "root.u", "app1", "alice", 100, 0), 0);
    assert_int_equal(inc(m, "root.u", "app3", &alice, 100, 0), 0);
    kq_ugm_free(m);
}

static void test_max_applications_group(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(apps_cfg);
    const char *dev[] = {"dev"};
    kq_user_t alice = usr("alice", dev, 1), bob = usr("bob", dev, 1), carol = usr("carol", dev, 1);
    assert_int_equal(inc(m, "root.g", "a1", &alice, 100, 0), 0);
    assert_int_equal(inc(m, "root.g", "b1", &bob, 100, 0), 0);
    assert_int_equal(inc(m, "root.g", "c1", &carol, 100, 0), KQ_EDENIED);
    assert_string_equal(reason, "group dev in queue root.g: limit \"dev-apps\" exceeded: "
                                "applications 2 running + 1 new > 2 max");
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(inc(m, "root.g", "b1", &bob, 100, 0), 0);
    assert_int_equal(apps_at(m, true, "dev", "root.g"), 2);
    json_t *g = kq_ugm_group_json(m, "dev");
    json_t *n = find_usage(json_object_get(g, "queues"), "root.g");
    assert_int_equal(json_integer_value(json_object_get(n, "maxApplications")), 2);
    json_decref(g);
    assert_int_equal(dec(m, "root.g", "a1", "alice", 100, 0), 0);
    assert_int_equal(inc(m, "root.g", "c1", &carol, 100, 0), 0);
    kq_ugm_free(m);
}

static void test_max_applications_queue(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(apps_cfg);
    kq_user_t x = usr("x", NULL, 0), y = usr("y", NULL, 0), z = usr("z", NULL, 0);
    assert_int_equal(inc(m, "root.q", "q1", &x, 100, 0), 0);
    assert_int_equal(inc(m, "root.q", "q2", &y, 100, 0), 0);
    assert_int_equal(inc(m, "root.q", "q3", &z, 100, 0), KQ_EDENIED);
    assert_string_equal(reason, "queue root.q: maxapplications exceeded: applications 2 running + 1 new > 2 max");
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(inc(m, "root.q", "q2", &y, 100, 0), 0);
    assert_int_equal(queue_apps(m, "root.q"), 2);
    assert_int_equal(queue_apps(m, "root"), 2);
    assert_int_equal(dec(m, "root.q", "q1", "x", 100, 0), 0);
    assert_int_equal(inc(m, "root.q", "q3", &z, 100, 0), 0);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ queue max */

static void test_queue_max_resources(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: a\n"
                      "            resources:\n"
                      "              max: {cpu: \"2\", memory: 4Gi}\n"
                      "            queues:\n"
                      "              - name: b\n"
                      "                resources:\n"
                      "                  guaranteed: {cpu: \"1\"}\n");
    kq_user_t alice = usr("alice", NULL, 0), bob = usr("bob", NULL, 0);
    assert_int_equal(inc(m, "root.a.b", "a1", &alice, 1500, 1 * GI), 0);
    assert_int_equal(inc(m, "root.a.b", "b1", &bob, 1000, 0), KQ_EDENIED);
    assert_string_equal(reason, "queue root.a: resources.max exceeded: cpu 1500m used + 1 requested > 2 max; needs 500m more cpu");
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(inc(m, "root.a.b", "b1", &bob, 0, 3 * GI), 0);
    assert_int_equal(inc(m, "root.a", "b2", &bob, 0, 1), KQ_EDENIED);
    assert_string_equal(reason, "queue root.a: resources.max exceeded: memory 4Gi used + 1 requested > 4Gi max; needs 1 more memory");
    assert_int_equal(inc(m, "root.a", "b2", &bob, 500, 0), 0);
    assert_int_equal(queue_alloc(m, "root.a", "cpu"), 2000);
    assert_int_equal(queue_alloc(m, "root.a.b", "cpu"), 1500);

    /* the queue view: configured maxima and guarantees, usage, applications */
    json_t *v = kq_ugm_queues_json(m);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "queuename")), "root");
    assert_string_equal(json_string_value(json_object_get(v, "partition")), "default");
    assert_true(json_is_true(json_object_get(v, "isManaged")));
    assert_false(json_is_true(json_object_get(v, "isLeaf")));
    json_t *a = find_queue(v, "root.a");
    assert_non_null(a);
    assert_int_equal(jres(json_object_get(a, "maxResource"), "cpu"), 2000);
    assert_int_equal(jres(json_object_get(a, "maxResource"), "memory"), 4 * GI);
    assert_int_equal(jres(json_object_get(a, "allocatedResource"), "memory"), 4 * GI);
    assert_int_equal(json_integer_value(json_object_get(a, "runningApps")), 3);
    assert_string_equal(json_string_value(json_object_get(a, "parent")), "root");
    json_t *b = find_queue(v, "root.a.b");
    assert_int_equal(jres(json_object_get(b, "guaranteedResource"), "cpu"), 1000);
    assert_null(json_object_get(b, "maxResource"));
    assert_true(json_is_true(json_object_get(b, "isLeaf")));
    json_decref(v);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ cleanup */

static void test_cleanup(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(groups_cfg);
    const char *cg[] = {"eng", "ops", "dev"};
    const char *fg[] = {"zeta"};
    kq_user_t carol = usr("carol", cg, 3), frank = usr("frank", fg, 1);
    assert_int_equal(inc(m, "root.a.b", "c1", &carol, 100, 0), 0);
    assert_int_equal(inc(m, "root.a.b", "c1", &carol, 200, 0), 0);
    assert_int_equal(inc(m, "root.a.c", "c2", &carol, 300, 0), 0);
    assert_int_equal(inc(m, "root.x.y", "f1", &frank, 400, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 2);
    assert_int_equal(kq_ugm_group_count(m), 3);

    assert_int_equal(dec(m, "root.a.b", "c1", "carol", 100, 0), 0);
    assert_int_equal(dec(m, "root.a.b", "c1", "carol", 200, 0), 0);
    assert_int_equal(kq_ugm_group_count(m), 2); /* dev's tracker went with c1 */
    json_t *devj = kq_ugm_group_json(m, "dev"); /* still shown: named in a limit */
    assert_non_null(devj);
    assert_null(json_object_get(devj, "applications"));
    json_decref(devj);
    assert_int_equal(dec(m, "root.a.c", "c2", "carol", 300, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 1);
    assert_null(kq_ugm_user_json(m, "carol"));
    assert_int_equal(dec(m, "root.x.y", "f1", "frank", 400, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(kq_ugm_group_count(m), 0);

    /* no user is named in a limit; the groups named in limits (and "*") stay, unused */
    json_t *users = kq_ugm_users_json(m), *groups = kq_ugm_groups_json(m);
    assert_int_equal(json_array_size(users), 0);
    char *gs = json_dumps(groups, JSON_SORT_KEYS | JSON_COMPACT);
    assert_non_null(gs);
    assert_null(strstr(gs, "applications"));
    assert_null(strstr(gs, "resourceUsage"));
    free(gs);
    assert_int_equal(json_array_size(groups), 7); /* * dev eng g1 g2 ops other */
    assert_string_equal(json_string_value(json_object_get(json_array_get(groups, 0), "groupName")), "*");
    json_decref(users);
    json_decref(groups);
    assert_int_equal(queue_alloc(m, "root", "cpu"), 0);
    assert_int_equal(queue_apps(m, "root"), 0);
    assert_int_equal(queue_alloc(m, "root.x", "cpu"), -1); /* unconfigured and empty: gone */
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ configuration */

static void test_config_change(void **state)
{
    (void)state;
    const char *one = CFG_HEAD
        "        queues:\n"
        "          - name: a\n"
        "            limits:\n"
        "              - limit: alice-limit\n"
        "                users: [alice]\n"
        "                maxresources: {cpu: \"1\"}\n";
    const char *none = CFG_HEAD
        "        queues:\n"
        "          - name: a\n";
    const char *two = CFG_HEAD
        "        queues:\n"
        "          - name: a\n"
        "            queues:\n"
        "              - name: team-a\n"
        "                limits:\n"
        "                  - limit: alice-limit\n"
        "                    users: [alice]\n"
        "                    maxresources: {cpu: \"2\"}\n"
        "                    maxapplications: 3\n";
    kq_ugm_t *m = mgr(one);
    kq_user_t alice = usr("alice", NULL, 0);
    assert_int_equal(inc(m, "root.a.team-a", "app", &alice, 1000, 0), 0);
    assert_int_equal(inc(m, "root.a.team-a", "app", &alice, 500, 0), KQ_EDENIED);

    apply(m, none); /* the limit is removed: cleared */
    assert_int_equal(inc(m, "root.a.team-a", "app", &alice, 500, 0), 0);
    json_t *u = kq_ugm_user_json(m, "alice");
    json_t *n = find_usage(json_object_get(u, "queues"), "root.a");
    assert_non_null(n);
    assert_null(json_object_get(n, "maxResources"));
    json_decref(u);

    apply(m, two); /* a new limit applies from the next increase */
    assert_int_equal(used_at(m, false, "alice", "root.a.team-a", "cpu"), 1500);
    assert_int_equal(inc(m, "root.a.team-a", "app", &alice, 1000, 0), KQ_EDENIED);
    assert_string_equal(reason, "user alice in queue root.a.team-a: limit \"alice-limit\" exceeded: "
                                "cpu 1500m used + 1 requested > 2 max; needs 500m more cpu");
    u = kq_ugm_user_json(m, "alice");
    n = find_usage(json_object_get(u, "queues"), "root.a.team-a");
    assert_int_equal(jres(json_object_get(n, "maxResources"), "cpu"), 2000);
    assert_int_equal(json_integer_value(json_object_get(n, "maxApplications")), 3);
    json_decref(u);
    assert_int_equal(inc(m, "root.a.team-a", "app", &alice, 500, 0), 0);
    /* decreases are never denied */
    assert_int_equal(dec(m, "root.a.team-a", "app", "alice", 1000, 0), 0);

    /* a configuration without our partition changes nothing */
    kq_config_t *other = load("partitions:\n  - name: other\n    queues:\n      - name: root\n");
    assert_int_equal(kq_ugm_set_config(m, other), KQ_ENOENT);
    kq_config_unref(other);
    assert_int_equal(inc(m, "root.a.team-a", "app", &alice, 1001, 0), KQ_EDENIED);
    assert_int_equal(inc(m, "root.a.team-a", "app", &alice, 1000, 0), 0);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ unchecked, errors */

static void test_add_unchecked(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(apps_cfg);
    kq_user_t alice = usr("alice", NULL, 0);
    kq_resource_t r = res(100, 0);
    for (int i = 0; i < 3; i++) {
        char app[16];
        snprintf(app, sizeof(app), "app%d", i);
        assert_int_equal(kq_ugm_add_unchecked(m, "root.u", app, &alice, &r), 0);
    }
    assert_int_equal(apps_at(m, false, "alice", "root.u"), 3);
    assert_int_equal(inc(m, "root.u", "app0", &alice, 100, 0), 0); /* running already */
    assert_int_equal(inc(m, "root.u", "app9", &alice, 100, 0), KQ_EDENIED);
    assert_string_equal(reason, "user alice in queue root.u: limit \"alice-apps\" exceeded: "
                                "applications 3 running + 1 new > 2 max");
    kq_ugm_free(m);
}

static void test_decrease_unknown(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(NULL);
    kq_user_t alice = usr("alice", NULL, 0);
    assert_int_equal(inc(m, "root.a.b", "app", &alice, 100, 0), 0);
    char *before = snapshot(m);
    assert_int_equal(dec(m, "root.a.b", "other", "bob", 100, 0), KQ_ENOENT);
    assert_int_equal(dec(m, "root.a.b", "other", "alice", 100, 0), KQ_ENOENT);
    assert_int_equal(dec(m, "root.a.c", "app", "alice", 100, 0), KQ_ENOENT);
    assert_int_equal(dec(m, "root.a.b.c", "app", "alice", 100, 0), KQ_ENOENT);
    /* a decrease at the parent of where it was counted is not the same allocation */
    assert_int_equal(dec(m, "root.a", "app", "alice", 100, 0), KQ_ENOENT);
    assert_int_equal(dec(m, "root", "app", "alice", 100, 0), KQ_ENOENT);
    char *after = snapshot(m);
    assert_string_equal(before, after);
    free(after);
    free(before);
    assert_int_equal(used_at(m, false, "alice", "root.a.b", "cpu"), 100);
    /* the same allocation counted at a parent and at a leaf: each released where counted */
    assert_int_equal(inc(m, "root.a", "app", &alice, 50, 0), 0);
    assert_int_equal(dec(m, "root.a", "app", "alice", 50, 0), 0);
    assert_int_equal(dec(m, "root.a", "app", "alice", 50, 0), KQ_ENOENT);
    assert_int_equal(used_at(m, false, "alice", "root.a.b", "cpu"), 100);
    assert_int_equal(dec(m, "root.a.b", "app", "alice", 100, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    kq_ugm_free(m);
}

static void test_bad_arguments(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(NULL);
    kq_user_t alice = usr("alice", NULL, 0), noname = usr("", NULL, 0);
    kq_resource_t r = res(100, 0);
    const char *bad[] = {"", "a", "root.", ".root", "root..a", "rootx.a", "roo", NULL};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(kq_ugm_increase(m, bad[i], "app", &alice, &r, reason, sizeof(reason), NULL), KQ_EINVAL);
        assert_int_equal(kq_ugm_decrease(m, bad[i], "app", "alice", &r), KQ_EINVAL);
    }
    char deep[4 * KQ_UGM_MAX_DEPTH + 8] = "root";
    for (int i = 0; i < KQ_UGM_MAX_DEPTH; i++)
        strcat(deep, ".q");
    assert_int_equal(kq_ugm_increase(m, deep, "app", &alice, &r, reason, sizeof(reason), NULL), KQ_EINVAL);
    assert_int_equal(kq_ugm_increase(m, "root.a", "", &alice, &r, reason, sizeof(reason), NULL), KQ_EINVAL);
    assert_int_equal(kq_ugm_increase(m, "root.a", "app", &noname, &r, reason, sizeof(reason), NULL), KQ_EINVAL);
    assert_int_equal(kq_ugm_increase(m, "root.a", "app", &alice, NULL, reason, sizeof(reason), NULL), KQ_EINVAL);
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_null(kq_ugm_user_json(m, "alice"));
    kq_ugm_free(NULL);
    kq_ugm_free(m);
}

static void test_overflow(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(NULL);
    kq_user_t alice = usr("alice", NULL, 0);
    assert_int_equal(inc(m, "root.a", "app", &alice, INT64_MAX - 10, 0), 0);
    char *before = snapshot(m);
    assert_int_equal(inc(m, "root.a", "app", &alice, 11, 0), KQ_ERANGE);
    char *after = snapshot(m);
    assert_string_equal(before, after);
    free(before);
    free(after);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ views */

static void test_views(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: a\n"
                      "            maxapplications: 7\n"
                      "            limits:\n"
                      "              - limit: dev-limit\n"
                      "                groups: [dev]\n"
                      "                maxresources: {cpu: \"4\", memory: 8Gi}\n"
                      "                maxapplications: 5\n");
    const char *dev[] = {"dev"};
    kq_user_t alice = usr("alice", dev, 1), bob = usr("bob", NULL, 0);
    assert_int_equal(inc(m, "root.a", "app-2", &alice, 500, 1 * GI), 0);
    assert_int_equal(inc(m, "root.a", "app-1", &alice, 250, 0), 0);
    assert_int_equal(inc(m, "root.dyn.x", "bapp", &bob, 100, 0), 0);
    kq_resource_t p = res(300, 0);
    kq_ugm_pending_add(m, "root.a", &p);

    /* YuniKorn's DAO shapes (apache/yunikorn-core pkg/webservice/dao/ugm_info.go,
     * queue_info.go): queuePath, omitempty maps and lists, vcore/memory/pods named as the
     * shim names them; every pod counts pods: 1. */
    json_t *users = kq_ugm_users_json(m);
    char *s = json_dumps(users, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s,
        "[{\"groups\":{\"app-1\":\"dev\",\"app-2\":\"dev\"},"
        "\"queues\":{\"children\":[{\"queuePath\":\"root.a\","
        "\"resourceUsage\":{\"memory\":1073741824,\"pods\":2,\"vcore\":750},"
        "\"runningApplications\":[\"app-1\",\"app-2\"]}],"
        "\"queuePath\":\"root\",\"resourceUsage\":{\"memory\":1073741824,\"pods\":2,\"vcore\":750},"
        "\"runningApplications\":[\"app-1\",\"app-2\"]},\"userName\":\"alice\"},"
        "{\"queues\":{\"children\":[{\"children\":[{\"queuePath\":\"root.dyn.x\","
        "\"resourceUsage\":{\"pods\":1,\"vcore\":100},\"runningApplications\":[\"bapp\"]}],"
        "\"queuePath\":\"root.dyn\",\"resourceUsage\":{\"pods\":1,\"vcore\":100},\"runningApplications\":[\"bapp\"]}],"
        "\"queuePath\":\"root\",\"resourceUsage\":{\"pods\":1,\"vcore\":100},\"runningApplications\":[\"bapp\"]},"
        "\"userName\":\"bob\"}]");
    free(s);
    json_decref(users);

    json_t *groups = kq_ugm_groups_json(m);
    s = json_dumps(groups, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s,
        "[{\"applications\":[\"app-1\",\"app-2\"],\"groupName\":\"dev\","
        "\"queues\":{\"children\":[{\"maxApplications\":5,"
        "\"maxResources\":{\"memory\":8589934592,\"vcore\":4000},\"queuePath\":\"root.a\","
        "\"resourceUsage\":{\"memory\":1073741824,\"pods\":2,\"vcore\":750},"
        "\"runningApplications\":[\"app-1\",\"app-2\"]}],"
        "\"queuePath\":\"root\",\"resourceUsage\":{\"memory\":1073741824,\"pods\":2,\"vcore\":750},"
        "\"runningApplications\":[\"app-1\",\"app-2\"]},\"users\":[\"alice\"]}]");
    free(s);
    json_decref(groups);

#define ALWAYS "\"currentPriority\":0,"
#define FENCES "\"isPreemptionFence\":false,\"isPriorityFence\":false,"
#define FLAGS "\"preemptionEnabled\":false,\"prioritySorting\":false,"
    json_t *q = kq_ugm_queues_json(m);
    s = json_dumps(q, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s,
        "{\"allocatedResource\":{\"memory\":1073741824,\"pods\":3,\"vcore\":850},"
        "\"childNames\":[\"root.a\",\"root.dyn\"],\"children\":["
        "{\"allocatedResource\":{\"memory\":1073741824,\"pods\":2,\"vcore\":750}," ALWAYS
        "\"isLeaf\":true,\"isManaged\":true," FENCES "\"maxRunningApps\":7,\"parent\":\"root\","
        "\"partition\":\"default\",\"pendingResource\":{\"pods\":1,\"vcore\":300}," FLAGS
        "\"queuename\":\"root.a\",\"runningApps\":2,\"status\":\"Active\"},"
        "{\"allocatedResource\":{\"pods\":1,\"vcore\":100},\"childNames\":[\"root.dyn.x\"],\"children\":["
        "{\"allocatedResource\":{\"pods\":1,\"vcore\":100}," ALWAYS "\"isLeaf\":true,\"isManaged\":false," FENCES
        "\"parent\":\"root.dyn\",\"partition\":\"default\"," FLAGS
        "\"queuename\":\"root.dyn.x\",\"runningApps\":1,\"status\":\"Active\"}]," ALWAYS
        "\"isLeaf\":false,\"isManaged\":false," FENCES "\"parent\":\"root\",\"partition\":\"default\"," FLAGS
        "\"queuename\":\"root.dyn\",\"runningApps\":1,\"status\":\"Active\"}]," ALWAYS
        "\"isLeaf\":false,\"isManaged\":true," FENCES "\"partition\":\"default\","
        "\"pendingResource\":{\"pods\":1,\"vcore\":300}," FLAGS "\"queuename\":\"root\",\"runningApps\":3,"
        "\"status\":\"Active\"}");
#undef ALWAYS
#undef FENCES
#undef FLAGS
    free(s);
    json_decref(q);

    kq_ugm_pending_sub(m, "root.a", &p);
    assert_int_equal(dec(m, "root.dyn.x", "bapp", "bob", 100, 0), 0);
    q = kq_ugm_queues_json(m);
    assert_null(find_queue(q, "root.dyn"));
    assert_int_equal(jres(json_object_get(q, "pendingResource"), "cpu"), 0);
    json_decref(q);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ compact storage */

/* Usage of `who` at path as a JSON object (new reference), or NULL when the node is missing. */
static json_t *usage_obj(kq_ugm_t *m, const char *who, const char *path)
{
    json_t *t = kq_ugm_user_json(m, who);
    if (t == NULL)
        return NULL;
    json_t *n = find_usage(json_object_get(t, "queues"), path);
    json_t *r = n != NULL ? json_incref(json_object_get(n, "resourceUsage")) : NULL;
    json_decref(t);
    return r;
}

static int inc_one(kq_ugm_t *m, const char *q, const char *app, const kq_user_t *u, const char *name, int64_t v)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, name, v), 0);
    return kq_ugm_increase(m, q, app, u, &r, reason, sizeof(reason), NULL);
}

static int dec_one(kq_ugm_t *m, const char *q, const char *app, const char *user, const char *name, int64_t v)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&r, name, v), 0);
    return kq_ugm_decrease(m, q, app, user, &r);
}

/* Nodes store only the resources present and grow when a new name arrives: a node made
 * for one resource takes 15 more (names sorting before and after it), a name beyond the
 * process's limit (here set to 16; resource.h, Limit) is refused without any change, and
 * names whose usage returns to 0 disappear from the views. */
static void test_usage_grows_to_sixteen_names(void **state)
{
    (void)state;
    kq_resource_set_max_names(16);
    kq_ugm_t *m = mgr(NULL);
    kq_user_t alice = usr("alice", NULL, 0);
    char name[32];
    /* memory, 14 more names and "pods" (every pod counts pods: 1) */
    assert_int_equal(inc_one(m, "root.a.b", "app", &alice, "memory", 5 * GI), 0);
    for (int i = 0; i < 14; i++) {
        snprintf(name, sizeof(name), "%s.com/r%02d", i % 2 ? "zz" : "aa", i);
        assert_int_equal(inc_one(m, "root.a.b", "app", &alice, name, i + 1), 0);
    }
    const char *levels[] = {"root", "root.a", "root.a.b"};
    for (int l = 0; l < 3; l++) {
        json_t *u = usage_obj(m, "alice", levels[l]);
        assert_non_null(u);
        assert_int_equal(json_object_size(u), 16);
        assert_int_equal(jres(u, "memory"), 5 * GI);
        assert_int_equal(jres(u, "aa.com/r00"), 1);
        assert_int_equal(jres(u, "zz.com/r07"), 8);
        assert_int_equal(jres(u, "zz.com/r13"), 14);
        assert_int_equal(jres(u, "pods"), 15);
        json_decref(u);
    }
    assert_int_equal(queue_alloc(m, "root.a", "zz.com/r13"), 14);

    char *before = snapshot(m);
    assert_int_equal(inc_one(m, "root.a.b", "app", &alice, "bb.com/seventeenth", 1), KQ_ERANGE);
    char *after = snapshot(m);
    assert_string_equal(before, after);
    free(before);
    free(after);

    /* a new resource in a sibling queue: its nodes are made for it, the shared ones
     * already hold 16 names and refuse a 17th there too */
    assert_int_equal(inc_one(m, "root.a.c", "app2", &alice, "cc.com/other", 1), KQ_ERANGE);
    assert_int_equal(inc_one(m, "root.a.c", "app2", &alice, "aa.com/r00", 7), 0);
    assert_int_equal(used_at(m, false, "alice", "root.a.c", "aa.com/r00"), 7);
    assert_int_equal(used_at(m, false, "alice", "root", "aa.com/r00"), 8);

    /* usage back to 0: the name leaves the views, the others stay */
    assert_int_equal(dec_one(m, "root.a.b", "app", "alice", "memory", 5 * GI), 0);
    json_t *u = usage_obj(m, "alice", "root.a.b");
    assert_non_null(u);
    assert_int_equal(json_object_size(u), 15);
    assert_null(json_object_get(u, "memory"));
    json_decref(u);
    assert_int_equal(apps_at(m, false, "alice", "root.a.b"), 1); /* 14 allocations left */
    for (int i = 0; i < 14; i++) {
        snprintf(name, sizeof(name), "%s.com/r%02d", i % 2 ? "zz" : "aa", i);
        assert_int_equal(dec_one(m, "root.a.b", "app", "alice", name, i + 1), 0);
    }
    assert_int_equal(used_at(m, false, "alice", "root.a.b", "aa.com/r00"), -1); /* pruned */
    u = usage_obj(m, "alice", "root");
    assert_non_null(u);
    assert_int_equal(json_object_size(u), 2); /* app2's 7 of aa.com/r00 and its pod */
    assert_int_equal(jres(u, "aa.com/r00"), 7);
    json_decref(u);
    assert_int_equal(dec_one(m, "root.a.c", "app2", "alice", "aa.com/r00", 7), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(queue_alloc(m, "root", "memory"), 0);
    assert_int_equal(queue_apps(m, "root"), 0);
    kq_ugm_free(m);
    kq_resource_set_max_names(KQ_RES_NAMES_MAX);
}

/* Issue 15: with the default limit a node's usage grows past the names a set holds inline
 * (KQ_RES_INLINE): 24 names and pods, at three levels, in the user's, the group's and the
 * queue tree; limits on such names hold; decreases take it back to nothing. */
static void test_usage_beyond_inline_names(void **state)
{
    (void)state;
    const char *dev[] = {"dev"};
    kq_user_t alice = usr("alice", dev, 1);
    const char *cfg = CFG_HEAD
        "        limits:\n"
        "          - limit: dev\n"
        "            groups: [dev]\n"
        "            maxresources: {zz.com/r23: 50}\n";
    kq_ugm_t *m = mgr(cfg);
    char name[32];
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    for (int i = 0; i < 24; i++) {
        snprintf(name, sizeof(name), "%s.com/r%02d", i % 2 ? "zz" : "aa", i);
        assert_int_equal(kq_resource_set(&r, name, i + 1), 0);
    }
    assert_true(r.n > KQ_RES_INLINE);
    assert_int_equal(kq_ugm_increase(m, "root.a.b", "app", &alice, &r, NULL, 0, NULL), 0);
    assert_int_equal(kq_ugm_increase(m, "root.a.c", "app2", &alice, &r, NULL, 0, NULL), 0);
    const char *levels[] = {"root", "root.a", "root.a.b"};
    for (int l = 0; l < 3; l++) {
        json_t *u = usage_obj(m, "alice", levels[l]);
        assert_non_null(u);
        assert_int_equal(json_object_size(u), 25);
        int k = l == 2 ? 1 : 2; /* root and root.a hold both applications */
        assert_int_equal(jres(u, "aa.com/r00"), k * 1);
        assert_int_equal(jres(u, "zz.com/r23"), k * 24);
        assert_int_equal(jres(u, "pods"), k);
        json_decref(u);
    }
    assert_int_equal(used_at(m, true, "dev", "root", "zz.com/r17"), 36);
    assert_int_equal(queue_alloc(m, "root.a", "zz.com/r23"), 48);
    /* the group's limit on the 24th name: 48 + 24 > 50 for a third, nothing changes */
    char *before = snapshot(m);
    char why[512] = "";
    assert_int_equal(kq_ugm_increase(m, "root.a.b", "app", &alice, &r, why, sizeof(why), NULL), KQ_EDENIED);
    assert_non_null(strstr(why, "zz.com/r23"));
    char *after = snapshot(m);
    assert_string_equal(before, after);
    free(before);
    free(after);
    assert_int_equal(kq_ugm_decrease(m, "root.a.b", "app", "alice", &r), 0);
    assert_int_equal(kq_ugm_decrease(m, "root.a.c", "app2", "alice", &r), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(queue_alloc(m, "root", "zz.com/r23"), 0);
    kq_resource_free(&r);
    kq_ugm_free(m);
}

/* The same usage reached in different orders (one request with both resources, or one
 * resource at a time, the second one growing the nodes) gives the same views, and a
 * resource requested as an explicit 0 is not shown: yunikorn-core v1.8.0 prunes a tracker's
 * usage after every increase and decrease (pkg/scheduler/ugm/queue_tracker.go,
 * qt.resourceUsage.Prune(), "needed as we might be both adding and removing"; issue 38,
 * item 6). */
static void test_views_same_for_same_usage(void **state)
{
    (void)state;
    const char *dev[] = {"dev"};
    kq_user_t alice = usr("alice", dev, 1);
    const char *cfg = CFG_HEAD
        "        limits:\n"
        "          - limit: dev\n"
        "            groups: [dev]\n"
        "            maxapplications: 10\n";
    kq_ugm_t *one = mgr(cfg), *two = mgr(cfg);
    assert_int_equal(inc(one, "root.a.b", "app", &alice, 1000, 2 * GI), 0);
    assert_int_equal(inc(one, "root.a.b", "app", &alice, 500, 0), 0);
    assert_int_equal(inc(two, "root.a.b", "app", &alice, 0, 2 * GI), 0);
    assert_int_equal(inc(two, "root.a.b", "app", &alice, 1500, 0), 0);
    char *s1 = snapshot(one), *s2 = snapshot(two);
    assert_string_equal(s1, s2);
    free(s1);
    free(s2);
    kq_ugm_free(one);
    kq_ugm_free(two);

    kq_ugm_t *m = mgr(NULL);
    assert_int_equal(inc_one(m, "root.a", "app", &alice, "cpu", 0), 0);
    json_t *u = usage_obj(m, "alice", "root.a");
    assert_non_null(u);
    assert_int_equal(json_object_size(u), 1); /* pods 1; vcore 0 pruned */
    assert_null(json_object_get(u, "vcore"));
    assert_int_equal(json_integer_value(json_object_get(u, "pods")), 1);
    json_decref(u);
    assert_int_equal(dec_one(m, "root.a", "app", "alice", "cpu", 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    kq_ugm_free(m);
}

/* An application in several queues (a parent and its leaf, two leaves) runs once at the
 * levels they share: counts, limits and views agree, and it stops running at a level
 * only when its last allocation below that level goes. */
static void test_app_in_several_queues(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: p\n"
                      "            maxapplications: 2\n"
                      "            limits:\n"
                      "              - limit: per-user\n"
                      "                users: [\"*\"]\n"
                      "                maxapplications: 1\n"
                      "            queues:\n"
                      "              - name: l1\n"
                      "                maxapplications: 2\n"
                      "              - name: l2\n"
                      "                maxapplications: 2\n");
    kq_user_t alice = usr("alice", NULL, 0), bob = usr("bob", NULL, 0);
    kq_user_t carol = usr("carol", NULL, 0), dave = usr("dave", NULL, 0);
    assert_int_equal(inc(m, "root.p.l1", "a", &alice, 100, 0), 0);
    assert_int_equal(inc(m, "root.p.l2", "a", &alice, 200, 0), 0); /* same app: not new in root.p */
    assert_int_equal(inc(m, "root.p", "a", &alice, 400, 0), 0);
    assert_int_equal(inc(m, "root.p.l2", "b", &alice, 1, 0), KQ_EDENIED); /* a second app */
    assert_int_equal(apps_at(m, false, "alice", "root.p"), 1);
    assert_int_equal(apps_at(m, false, "alice", "root.p.l1"), 1);
    assert_int_equal(apps_at(m, false, "alice", "root.p.l2"), 1);
    assert_int_equal(used_at(m, false, "alice", "root.p", "cpu"), 700);
    assert_int_equal(queue_apps(m, "root.p"), 1);
    assert_int_equal(queue_apps(m, "root"), 1);

    /* bob's pod of alice's application "a" is refused (issue 29), never charged to alice */
    assert_int_equal(inc(m, "root.p.l1", "a", &bob, 10, 0), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_APP_OWNER);
    assert_string_equal(reason, "application \"a\" belongs to another user: a pod of user bob cannot join it (an "
                                "application is charged to the user who started it; give the pod an application id "
                                "of its own)");
    assert_int_equal(used_at(m, false, "alice", "root.p.l1", "cpu"), 100);
    assert_null(kq_ugm_user_json(m, "bob"));
    assert_int_equal(queue_apps(m, "root.p"), 1);
    assert_int_equal(inc(m, "root.p.l1", "c", &carol, 10, 0), 0);
    assert_int_equal(queue_apps(m, "root.p"), 2);
    assert_int_equal(inc(m, "root.p.l2", "d", &dave, 10, 0), KQ_EDENIED); /* queue: 2 apps */
    assert_string_equal(reason, "queue root.p: maxapplications exceeded: applications 2 running + 1 new > 2 max");
    assert_int_equal(inc(m, "root.p.l2", "a", &alice, 10, 0), 0); /* "a" runs there already */
    assert_int_equal(dec(m, "root.p.l2", "a", "alice", 10, 0), 0);
    assert_int_equal(dec(m, "root.p.l1", "c", "carol", 10, 0), 0);
    assert_int_equal(used_at(m, false, "alice", "root.p.l1", "cpu"), 100);

    /* nothing counted at exactly root for alice */
    assert_int_equal(dec(m, "root", "a", "alice", 100, 0), KQ_ENOENT);

    /* alice's app leaves l1: still running in root.p and l2, no longer in l1 */
    assert_int_equal(dec(m, "root.p.l1", "a", "alice", 100, 0), 0);
    assert_int_equal(apps_at(m, false, "alice", "root.p.l1"), -1);
    assert_int_equal(apps_at(m, false, "alice", "root.p"), 1);
    assert_int_equal(queue_apps(m, "root.p.l1"), 0);
    assert_int_equal(queue_apps(m, "root.p"), 1);
    assert_int_equal(dec(m, "root.p", "a", "alice", 400, 0), 0);
    assert_int_equal(apps_at(m, false, "alice", "root.p"), 1); /* via l2 */
    assert_int_equal(used_at(m, false, "alice", "root.p", "cpu"), 200);
    assert_int_equal(dec(m, "root.p.l2", "a", "alice", 200, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(queue_apps(m, "root"), 0);
    kq_ugm_free(m);
}

/* Many applications and queues per user (the per-tracker sets grow and shrink), added
 * and removed in a scrambled order, checked against counts kept here after every step. */
#define MANY_Q 24
#define MANY_A 300
static void test_many_apps_and_queues(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(NULL);
    kq_user_t alice = usr("alice", NULL, 0);
    static int64_t held[MANY_A][MANY_Q];
    memset(held, 0, sizeof(held));
    int64_t q_cpu[MANY_Q] = {0};
    unsigned seed = 12345;
    char app[16], q[32];
    for (int step = 0; step < 6000; step++) {
        seed = seed * 1103515245u + 12345u;
        int a = (int)((seed >> 8) % MANY_A);
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % MANY_Q);
        snprintf(app, sizeof(app), "app-%d", a);
        snprintf(q, sizeof(q), "root.d%d.q%d", k % 4, k);
        bool add = step < 3000 ? (seed >> 20) % 3 != 0 : (seed >> 20) % 3 == 0;
        if (add) {
            assert_int_equal(inc(m, q, app, &alice, a + 1, 0), 0);
            held[a][k] += a + 1;
            q_cpu[k] += a + 1;
        } else if (held[a][k] > 0) {
            assert_int_equal(dec(m, q, app, "alice", a + 1, 0), 0);
            held[a][k] -= a + 1;
            q_cpu[k] -= a + 1;
        } else {
            assert_int_equal(dec(m, q, app, "alice", a + 1, 0), KQ_ENOENT);
        }
        if (step % 500 != 499)
            continue;
        int running = 0;
        int64_t total = 0;
        for (int i = 0; i < MANY_A; i++) {
            bool any = false;
            for (int j = 0; j < MANY_Q; j++)
                any = any || held[i][j] > 0;
            running += any;
        }
        for (int j = 0; j < MANY_Q; j++) {
            snprintf(q, sizeof(q), "root.d%d.q%d", j % 4, j);
            int64_t want = q_cpu[j];
            int64_t got = used_at(m, false, "alice", q, "cpu");
            assert_int_equal(got < 0 ? 0 : got, want);
            int apps = 0;
            for (int i = 0; i < MANY_A; i++)
                apps += held[i][j] > 0;
            int gotapps = apps_at(m, false, "alice", q);
            assert_int_equal(gotapps < 0 ? 0 : gotapps, apps);
            assert_int_equal(queue_apps(m, q) < 0 ? 0 : queue_apps(m, q), apps);
            total += want;
        }
        assert_int_equal(queue_alloc(m, "root", "cpu") < 0 ? 0 : queue_alloc(m, "root", "cpu"), total);
        assert_int_equal(queue_apps(m, "root"), running);
    }
    for (int i = 0; i < MANY_A; i++) {
        for (int j = 0; j < MANY_Q; j++) {
            snprintf(app, sizeof(app), "app-%d", i);
            snprintf(q, sizeof(q), "root.d%d.q%d", j % 4, j);
            while (held[i][j] > 0) {
                assert_int_equal(dec(m, q, app, "alice", i + 1, 0), 0);
                held[i][j] -= i + 1;
            }
        }
    }
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(queue_apps(m, "root"), 0);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ threads */

#define N_THREADS 8
#define N_OPS 20000
#define N_USERS 6
#define N_APPS 5
#define HOLD_MAX 48

static const char *const t_users[N_USERS] = {"u0", "u1", "u2", "u3", "u4", "u5"};
static const char *const t_groups[2][1] = {{"team1"}, {"team2"}};
static const char *const t_queues[] = {"root.p.l1", "root.p.l2", "root.p", "root.x"};
#define N_QUEUES (sizeof(t_queues) / sizeof(t_queues[0]))
static const int64_t t_cpu[] = {100, 250, 500, 1000};

static const char *threads_cfg = CFG_HEAD
    "        limits:\n"
    "          - limit: team1-cap\n"
    "            groups: [team1]\n"
    "            maxresources: {cpu: \"20\"}\n"
    "          - limit: team2-cap\n"
    "            groups: [team2]\n"
    "            maxresources: {cpu: \"20\"}\n"
    "        queues:\n"
    "          - name: p\n"
    "            resources:\n"
    "              max: {cpu: \"30\"}\n"
    "            maxapplications: 20\n"
    "            limits:\n"
    "              - limit: per-user\n"
    "                users: [\"*\"]\n"
    "                maxresources: {cpu: \"8\"}\n"
    "                maxapplications: 4\n"
    "            queues:\n"
    "              - name: l1\n"
    "                maxapplications: 10\n"
    "              - name: l2\n"
    "                maxapplications: 10\n";

/* The same shape with a tighter per-user limit: swapped in and out during the run. */
static const char *threads_cfg2 = CFG_HEAD
    "        limits:\n"
    "          - limit: team1-cap\n"
    "            groups: [team1]\n"
    "            maxresources: {cpu: \"20\"}\n"
    "          - limit: team2-cap\n"
    "            groups: [team2]\n"
    "            maxresources: {cpu: \"20\"}\n"
    "        queues:\n"
    "          - name: p\n"
    "            resources:\n"
    "              max: {cpu: \"30\"}\n"
    "            maxapplications: 20\n"
    "            limits:\n"
    "              - limit: per-user\n"
    "                users: [\"*\"]\n"
    "                maxresources: {cpu: \"6\"}\n"
    "                maxapplications: 3\n"
    "            queues:\n"
    "              - name: l1\n"
    "                maxapplications: 10\n"
    "              - name: l2\n"
    "                maxapplications: 10\n";

typedef struct held {
    int user, app, queue;
    int64_t cpu;
} held_t;

typedef struct worker {
    kq_ugm_t *m;
    unsigned seed;
    bool keep;           /* keep what is held at the end (else release everything) */
    held_t held[HOLD_MAX];
    int n_held;
    long ok, denied, failures;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    char why[256];
    for (int i = 0; i < N_OPS; i++) {
        bool up = w->n_held == 0 || (w->n_held < HOLD_MAX && rand_r(&w->seed) % 2 == 0);
        if (up) {
            held_t h = {.user = rand_r(&w->seed) % N_USERS, .app = rand_r(&w->seed) % N_APPS,
                        .queue = rand_r(&w->seed) % (int)N_QUEUES, .cpu = t_cpu[rand_r(&w->seed) % 4]};
            kq_user_t u = {.name = t_users[h.user], .groups = t_groups[h.user % 2], .n_groups = 1};
            char app[32]; /* per user: an application is charged to the user of its first pod */;
            snprintf(app, sizeof(app), "u%d-app%d", h.user, h.app);
            kq_resource_t r = KQ_RESOURCE_EMPTY;
            if (kq_resource_set(&r, "cpu", h.cpu) != 0)
                w->failures++;
            int rc = kq_ugm_increase(w->m, t_queues[h.queue], app, &u, &r, why, sizeof(why), NULL);
            if (rc == 0)
                w->held[w->n_held++] = h;
            else if (rc == KQ_EDENIED && why[0] != '\0')
                w->denied++;
            else
                w->failures++;
            w->ok += rc == 0;
        } else {
            int k = rand_r(&w->seed) % w->n_held;
            held_t h = w->held[k];
            w->held[k] = w->held[--w->n_held];
            char app[32];
            snprintf(app, sizeof(app), "u%d-app%d", h.user, h.app);
            kq_resource_t r = KQ_RESOURCE_EMPTY;
            if (kq_resource_set(&r, "cpu", h.cpu) != 0)
                w->failures++;
            if (kq_ugm_decrease(w->m, t_queues[h.queue], app, t_users[h.user], &r) != 0)
                w->failures++;
        }
    }
    while (!w->keep && w->n_held > 0) {
        held_t h = w->held[--w->n_held];
        char app[32];
        snprintf(app, sizeof(app), "u%d-app%d", h.user, h.app);
        kq_resource_t r = KQ_RESOURCE_EMPTY;
        if (kq_resource_set(&r, "cpu", h.cpu) != 0)
            w->failures++;
        if (kq_ugm_decrease(w->m, t_queues[h.queue], app, t_users[h.user], &r) != 0)
            w->failures++;
    }
    return NULL;
}

typedef struct bystander {
    kq_ugm_t *m;
    kq_config_t *cfg[2];
    _Atomic int done;
} bystander_t;

/* Renders the views and swaps configurations while the workers run. */
static void *bystander_main(void *arg)
{
    bystander_t *b = arg;
    int i = 0;
    while (!b->done) {
        json_t *v = kq_ugm_users_json(b->m);
        json_decref(v);
        v = kq_ugm_groups_json(b->m);
        json_decref(v);
        v = kq_ugm_queues_json(b->m);
        json_decref(v);
        v = kq_ugm_user_json(b->m, "u1");
        json_decref(v);
        if (kq_ugm_set_config(b->m, b->cfg[i++ % 2]) != 0)
            break;
    }
    return NULL;
}

static void run_threads(bool keep)
{
    kq_ugm_t *m = mgr(threads_cfg);
    bystander_t b = {.m = m, .cfg = {load(threads_cfg2), load(threads_cfg)}};
    worker_t w[N_THREADS];
    pthread_t th[N_THREADS], bt;
    memset(w, 0, sizeof(w));
    assert_int_equal(pthread_create(&bt, NULL, bystander_main, &b), 0);
    for (int i = 0; i < N_THREADS; i++) {
        w[i].m = m;
        w[i].seed = 1234u + (unsigned)i * 7919u + (keep ? 17u : 0u);
        w[i].keep = keep;
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    long ok = 0, denied = 0;
    for (int i = 0; i < N_THREADS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
        ok += w[i].ok;
        denied += w[i].denied;
    }
    b.done = 1;
    assert_int_equal(pthread_join(bt, NULL), 0);
    /* the limits are tight enough to deny, loose enough to admit */
    assert_true(ok > 1000);
    assert_true(denied > 1000);
    /* the last configuration applied is threads_cfg (index 1) or threads_cfg2; use the looser */
    apply(m, threads_cfg);
    kq_config_unref(b.cfg[0]);
    kq_config_unref(b.cfg[1]);

    if (!keep) {
        assert_int_equal(kq_ugm_user_count(m), 0);
        assert_int_equal(kq_ugm_group_count(m), 0);
        assert_int_equal(queue_alloc(m, "root", "cpu"), 0);
        assert_int_equal(queue_apps(m, "root"), 0);
        assert_int_equal(queue_alloc(m, "root.x", "cpu"), -1);
        kq_ugm_free(m);
        return;
    }

    /* what the threads hold, summed by hand */
    int64_t user_root[N_USERS] = {0}, user_p[N_USERS] = {0}, group_root[2] = {0};
    int64_t q_root = 0, q_p = 0, q_l1 = 0, q_l2 = 0, q_x = 0;
    size_t held = 0;
    for (int i = 0; i < N_THREADS; i++) {
        for (int k = 0; k < w[i].n_held; k++) {
            held_t *h = &w[i].held[k];
            held++;
            user_root[h->user] += h->cpu;
            group_root[h->user % 2] += h->cpu;
            q_root += h->cpu;
            if (h->queue != 3) {
                user_p[h->user] += h->cpu;
                q_p += h->cpu;
            }
            q_l1 += h->queue == 0 ? h->cpu : 0;
            q_l2 += h->queue == 1 ? h->cpu : 0;
            q_x += h->queue == 3 ? h->cpu : 0;
        }
    }
    assert_true(held > 0);
    for (int u = 0; u < N_USERS; u++) {
        int64_t r = used_at(m, false, t_users[u], "root", "cpu");
        assert_int_equal(r < 0 ? 0 : r, user_root[u]);
        int64_t p = used_at(m, false, t_users[u], "root.p", "cpu");
        assert_int_equal(p < 0 ? 0 : p, user_p[u]);
        assert_true(user_p[u] <= 8000);
        assert_true(apps_at(m, false, t_users[u], "root.p") <= 4);
    }
    for (int g = 0; g < 2; g++) {
        int64_t r = used_at(m, true, t_groups[g][0], "root", "cpu");
        assert_int_equal(r < 0 ? 0 : r, group_root[g]);
        assert_true(group_root[g] <= 20000);
    }
    assert_int_equal(queue_alloc(m, "root", "cpu"), q_root);
    assert_int_equal(queue_alloc(m, "root.p", "cpu"), q_p);
    assert_int_equal(queue_alloc(m, "root.p.l1", "cpu"), q_l1);
    assert_int_equal(queue_alloc(m, "root.p.l2", "cpu"), q_l2);
    int64_t x = queue_alloc(m, "root.x", "cpu");
    assert_int_equal(x < 0 ? 0 : x, q_x);
    assert_true(q_p <= 30000);
    assert_true(queue_apps(m, "root.p") <= 20);

    /* and releasing it all leaves nothing */
    for (int i = 0; i < N_THREADS; i++) {
        for (int k = 0; k < w[i].n_held; k++) {
            held_t *h = &w[i].held[k];
            char app[32];
            snprintf(app, sizeof(app), "u%d-app%d", h->user, h->app);
            assert_int_equal(dec(m, t_queues[h->queue], app, t_users[h->user], h->cpu, 0), 0);
        }
    }
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(kq_ugm_group_count(m), 0);
    assert_int_equal(queue_alloc(m, "root", "cpu"), 0);
    kq_ugm_free(m);
}

/* ------------------------------------------------------------------ YuniKorn semantics */

/* "Specifying a wildcard for the group limit sets a cumulative limit for all users in
 * that queue" (apache/yunikorn-site docs/design/user_group_resource_usage_enforcement.md,
 * "Group"; apache/yunikorn-core pkg/scheduler/ugm/manager.go ensureGroupInternal tracks
 * such applications against the group "*"): users of different unnamed groups share the
 * "*" limit, a named group keeps its own. */
static void test_wildcard_group_cumulative(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: q\n"
                      "            limits:\n"
                      "              - limit: dev\n"
                      "                groups: [dev]\n"
                      "                maxresources: {vcore: \"10\"}\n"
                      "              - limit: everybody-else\n"
                      "                groups: [\"*\"]\n"
                      "                maxresources: {vcore: \"2\"}\n");
    const char *ga[] = {"a"}, *gb[] = {"b"}, *gc[] = {"c"}, *gd[] = {"dev"};
    kq_user_t u1 = usr("u1", ga, 1), u2 = usr("u2", gb, 1), u3 = usr("u3", gc, 1), d = usr("d", gd, 1);
    assert_int_equal(inc(m, "root.q", "app1", &u1, 1000, 0), 0);
    assert_int_equal(inc(m, "root.q", "app2", &u2, 1000, 0), 0);
    /* 1 + 1 of the 2 cores are used by two different groups: a third group is denied */
    assert_int_equal(inc(m, "root.q", "app3", &u3, 1000, 0), KQ_EDENIED);
    assert_string_equal(reason, "group * in queue root.q: limit \"everybody-else\" (group *) exceeded: "
                                "cpu 2 used + 1 requested > 2 max; needs 1 more cpu");
    assert_int_equal(used_at(m, true, "*", "root.q", "cpu"), 2000);
    assert_null(kq_ugm_group_json(m, "a"));
    /* the named group is not part of the wildcard's total */
    assert_int_equal(inc(m, "root.q", "app4", &d, 5000, 0), 0);
    assert_int_equal(used_at(m, true, "dev", "root.q", "cpu"), 5000);
    /* releasing one wildcard user's pod makes room for another's */
    assert_int_equal(dec(m, "root.q", "app1", "u1", 1000, 0), 0);
    assert_int_equal(inc(m, "root.q", "app3", &u3, 1000, 0), 0);
    kq_ugm_free(m);
}

/* An application's usage is charged to the user of its first pod: YuniKorn tracks every
 * allocation of an application with the application's user (apache/yunikorn-core
 * pkg/scheduler/objects/application.go calls IncreaseTrackedResource with sa.user). Issue 29:
 * a pod of another user never joins it — refused when checked, charged to its own user when
 * counted unchecked (bound by someone else); the users sharing an id are ordered by their
 * earliest pod's creation (then UID), whatever order they are counted in. */
static int add_pod(kq_ugm_t *m, const char *app, const kq_user_t *u, int64_t cpu, int64_t created, const char *uid)
{
    kq_resource_t r = res(cpu, 0);
    kq_ugm_pod_t p = {.created = created, .uid = uid};
    return kq_ugm_add_unchecked_pod(m, "root.q", app, u, &r, &p);
}

static void test_app_of_another_user(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: q\n"
                      "            limits:\n"
                      "              - limit: alice\n"
                      "                users: [alice]\n"
                      "                maxresources: {vcore: \"2\"}\n");
    const char *dev[] = {"dev"};
    kq_user_t alice = usr("alice", NULL, 0), bob = usr("bob", dev, 1);
    char owner[64], why[512];
    assert_int_equal(inc(m, "root.q", "spark-1", &alice, 1000, 0), 0);
    assert_int_equal(inc(m, "root.q", "spark-1", &alice, 1000, 0), 0);
    /* bob's pod of alice's application: refused by check and increase, nothing changes */
    kq_resource_t one = res(1000, 0);
    assert_int_equal(kq_ugm_check(m, "root.q", "spark-1", &bob, &one, reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_APP_OWNER);
    assert_null(strstr(reason, "alice")); /* the owner is not named to the caller */
    assert_int_equal(inc(m, "root.q", "spark-1", &bob, 1000, 0), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_APP_OWNER);
    assert_int_equal(used_at(m, false, "alice", "root.q", "cpu"), 2000);
    assert_null(kq_ugm_user_json(m, "bob"));
    assert_int_equal(kq_ugm_app_owner(m, "spark-1", "bob", owner, sizeof(owner), why, sizeof(why)), KQ_EDENIED);
    assert_string_equal(owner, "alice");
    assert_non_null(strstr(why, "spark-1"));
    assert_int_equal(kq_ugm_app_owner(m, "spark-1", "alice", owner, sizeof(owner), why, sizeof(why)), 0);
    assert_int_equal(kq_ugm_app_owner(m, "other", "bob", owner, sizeof(owner), why, sizeof(why)), 0);
    /* an id the pod did not name (its controller's UID, YuniKorn's autogen id) is its own
     * user's application of that id: never refused for another's */
    kq_ugm_pod_t gen = {.created = 5, .uid = "g", .generated_app = true};
    assert_int_equal(kq_ugm_increase_pod(m, "root.q", "spark-1", &bob, &one, &gen, reason, sizeof(reason), &kind), 0);
    assert_int_equal(used_at(m, false, "bob", "root.q", "cpu"), 1000);
    assert_int_equal(used_at(m, false, "alice", "root.q", "cpu"), 2000);
    char g[64];
    assert_int_equal(kq_ugm_group_of(m, "root.q", "spark-1", &bob, g, sizeof(g)), 0);
    assert_string_equal(g, ""); /* bob's own (no group limit), not alice's */
    assert_int_equal(dec(m, "root.q", "spark-1", "bob", 1000, 0), 0);
    assert_int_equal(used_at(m, false, "alice", "root.q", "cpu"), 2000);
    /* released: the application is gone and a new first pod makes bob its owner */
    assert_int_equal(dec(m, "root.q", "spark-1", "alice", 1000, 0), 0);
    assert_int_equal(dec(m, "root.q", "spark-1", "alice", 1000, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(inc(m, "root.q", "spark-1", &bob, 1000, 0), 0);
    assert_int_equal(used_at(m, false, "bob", "root.q", "cpu"), 1000);
    assert_int_equal(inc(m, "root.q", "spark-1", &alice, 1000, 0), KQ_EDENIED);
    assert_int_equal(dec(m, "root.q", "spark-1", "bob", 1000, 0), 0);
    assert_int_equal(kq_ugm_user_count(m), 0);

    /* unchecked (bound pods, a relist): each charged to its own user, and the owner is the
     * user of the earliest-created pod whatever the order of counting */
    for (int order = 0; order < 2; order++) {
        if (order == 0) {
            assert_int_equal(add_pod(m, "x", &bob, 100, 20, "b1"), 0);
            assert_int_equal(add_pod(m, "x", &alice, 100, 30, "a1"), 0);
            assert_int_equal(add_pod(m, "x", &alice, 100, 10, "a0"), 0); /* alice's earliest: she owns x */
        } else {
            assert_int_equal(add_pod(m, "x", &alice, 100, 10, "a0"), 0);
            assert_int_equal(add_pod(m, "x", &bob, 100, 20, "b1"), 0);
            assert_int_equal(add_pod(m, "x", &alice, 100, 30, "a1"), 0);
        }
        assert_int_equal(used_at(m, false, "alice", "root.q", "cpu"), 200);
        assert_int_equal(used_at(m, false, "bob", "root.q", "cpu"), 100);
        assert_int_equal(kq_ugm_app_owner(m, "x", "bob", owner, sizeof(owner), why, sizeof(why)), KQ_EDENIED);
        assert_string_equal(owner, "alice");
        assert_int_equal(kq_ugm_app_owner(m, "x", "alice", owner, sizeof(owner), why, sizeof(why)), 0);
        json_t *apps = kq_ugm_apps_json(m, NULL);
        assert_int_equal(json_array_size(apps), 2); /* one per user */
        json_decref(apps);
        /* alice's pods end: bob, next in order, owns it */
        assert_int_equal(dec(m, "root.q", "x", "alice", 100, 0), 0);
        assert_int_equal(dec(m, "root.q", "x", "alice", 100, 0), 0);
        assert_int_equal(kq_ugm_app_owner(m, "x", "alice", owner, sizeof(owner), why, sizeof(why)), KQ_EDENIED);
        assert_string_equal(owner, "bob");
        assert_int_equal(dec(m, "root.q", "x", "bob", 100, 0), 0);
        assert_int_equal(kq_ugm_user_count(m), 0);
    }
    kq_ugm_free(m);
}

/* "pods" in a limit or a queue's max counts pods: YuniKorn's shim adds pods: 1 to every
 * pod's resource (apache/yunikorn-k8shim pkg/common/resource.go GetPodResource). */
static void test_pods_enforced(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: q\n"
                      "            resources:\n"
                      "              max: {pods: 3}\n"
                      "            limits:\n"
                      "              - limit: one-pod-each\n"
                      "                users: [\"*\"]\n"
                      "                maxresources: {pods: 2}\n");
    kq_user_t alice = usr("alice", NULL, 0), bob = usr("bob", NULL, 0);
    assert_int_equal(inc(m, "root.q", "a", &alice, 100, 0), 0);
    assert_int_equal(inc(m, "root.q", "a", &alice, 100, 0), 0);
    assert_int_equal(inc(m, "root.q", "a", &alice, 100, 0), KQ_EDENIED);
    assert_string_equal(reason, "user alice in queue root.q: limit \"one-pod-each\" (user *) exceeded: "
                                "pods 2 used + 1 requested > 2 max; needs 1 more pods");
    assert_int_equal(inc(m, "root.q", "b", &bob, 100, 0), 0);
    assert_int_equal(inc(m, "root.q", "b", &bob, 100, 0), KQ_EDENIED);
    assert_string_equal(reason, "queue root.q: resources.max exceeded: pods 3 used + 1 requested > 3 max; needs 1 more pods");
    assert_int_equal(queue_alloc(m, "root.q", "pods"), 3);
    /* a pod without any request still counts */
    kq_resource_t none = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_ugm_check(m, "root.q", "c", &bob, &none, reason, sizeof(reason), NULL), KQ_EDENIED);
    assert_int_equal(dec(m, "root.q", "a", "alice", 100, 0), 0);
    assert_int_equal(kq_ugm_check(m, "root.q", "c", &bob, &none, reason, sizeof(reason), NULL), 0);
    kq_ugm_free(m);
}

/* submitacl/adminacl as YuniKorn reads and checks them: the cases of apache/yunikorn-core
 * pkg/common/security/acl_test.go TestACLAccess (those with a user name), and the
 * recursion of pkg/scheduler/objects/queue.go CheckSubmitAccess (a parent's ACL allows
 * its children, the adminacl allows submitting). */
static void test_acls(void **state)
{
    (void)state;
    static const struct {
        const char *acl, *user;
        const char *groups[2];
        size_t n;
        bool allowed;
    } cases[] = {
        {"user1,user2 group1,group2", "user1", {NULL}, 0, true},
        {"user1,user2 group1,group2", "user3", {"group1"}, 1, true},
        {"user1,user2 group1,group2", "user3", {"group3", "group1"}, 2, true},
        {"user1,user2 group1,group2", "user3", {"group3"}, 1, false},
        {"*", "user1", {"group1"}, 1, true},
        {"", "user1", {"group1"}, 1, false},
        {" ", "user1", {"group1"}, 1, false},
        {" group1", "user1", {"group1"}, 1, true},
        {"user1", "user2", {"group1"}, 1, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char yaml[512];
        snprintf(yaml, sizeof(yaml), CFG_HEAD "        queues:\n          - name: q\n            submitacl: '%s'\n",
                 cases[i].acl);
        kq_ugm_t *m = mgr(yaml);
        kq_user_t u = usr(cases[i].user, cases[i].groups, cases[i].n);
        kq_resource_t r = res(100, 0);
        int rc = kq_ugm_increase(m, "root.q", "app", &u, &r, reason, sizeof(reason), NULL);
        if (rc != (cases[i].allowed ? 0 : KQ_EDENIED))
            fail_msg("acl '%s' user %s: rc %d reason %s", cases[i].acl, cases[i].user, rc, reason);
        kq_ugm_free(m);
    }

    kq_ugm_t *m = mgr(CFG_HEAD
                      "        adminacl: admin\n"
                      "        queues:\n"
                      "          - name: p\n"
                      "            submitacl: alice\n"
                      "            queues:\n"
                      "              - name: c\n"
                      "          - name: open\n"
                      "            submitacl: '*'\n");
    const char *dev[] = {"dev", "ops"};
    kq_user_t alice = usr("alice", NULL, 0), bob = usr("bob", dev, 2), admin = usr("admin", NULL, 0);
    assert_int_equal(inc(m, "root.p.c", "a1", &alice, 100, 0), 0);      /* the parent's ACL */
    assert_int_equal(inc(m, "root.p.c.dyn", "a2", &alice, 100, 0), 0);  /* an unconfigured child */
    assert_int_equal(inc(m, "root.p.c", "a3", &admin, 100, 0), 0);      /* root's adminacl */
    assert_int_equal(inc(m, "root.open", "b1", &bob, 100, 0), 0);
    char *before = snapshot(m);
    assert_int_equal(inc(m, "root.p.c", "b2", &bob, 100, 0), KQ_EDENIED);
    assert_string_equal(reason, "user bob (groups: dev,ops) may not submit to queue root.p.c: neither the submitacl "
                                "nor the adminacl of the queue or of a parent queue allows the user or one of its groups");
    assert_int_equal(kind, KQ_DENIAL_ACL);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ugm_check(m, "root.p", "b2", &bob, &(kq_resource_t){.n = 0}, reason, sizeof(reason), &kind),
                     KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_ACL);
    char *after = snapshot(m);
    assert_string_equal(before, after);
    free(before);
    free(after);
    /* reality is counted, never refused */
    kq_resource_t r = res(100, 0);
    assert_int_equal(kq_ugm_add_unchecked(m, "root.p.c", "b3", &bob, &r), 0);
    kq_ugm_free(m);
}

/* Issue 37 route 3: the ACL is asked for every pod, not only for an application's first.
 * Follows YuniKorn's apache/yunikorn-core pkg/scheduler/partition.go addApplication (a leaf
 * queue whose CheckSubmitAccess, queue.go, refuses the user: "failed to find queue %s for
 * application %s") with the users and ACLs of test_acls above; YuniKorn asks once per
 * application because an application lives in one queue, while here a later pod of the same
 * application (a named id, or YuniKorn's autogen "yunikorn-<ns>-autogen") may name another
 * queue. The resize of a pod already counted (kq_ugm_pod_t.counted) is not asked again. */
static void test_acl_every_pod(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        submitacl: admin\n"
                      "        queues:\n"
                      "          - name: open\n"
                      "            submitacl: alice\n"
                      "          - name: closed\n"
                      "            submitacl: bob\n");
    kq_user_t alice = usr("alice", NULL, 0);
    kq_resource_t r = res(100, 0);
    static const char *const apps[] = {"x", "yunikorn-team-a-autogen"};
    for (size_t i = 0; i < 2; i++) {
        kq_ugm_pod_t named = {.created = 1, .uid = "p1", .generated_app = i == 1};
        assert_int_equal(kq_ugm_increase_pod(m, "root.open", apps[i], &alice, &r, &named, reason, sizeof(reason),
                                             &kind), 0);
        char *before = snapshot(m);
        /* the second pod of the running application names the closed queue */
        kq_ugm_pod_t second = {.created = 2, .uid = "p2", .generated_app = i == 1};
        kind = KQ_DENIAL_COUNT;
        assert_int_equal(kq_ugm_check_pod(m, "root.closed", apps[i], &alice, &r, &second, reason, sizeof(reason),
                                          &kind), KQ_EDENIED);
        assert_int_equal(kind, KQ_DENIAL_ACL);
        kind = KQ_DENIAL_COUNT;
        assert_int_equal(kq_ugm_increase_pod(m, "root.closed", apps[i], &alice, &r, &second, reason,
                                             sizeof(reason), &kind), KQ_EDENIED);
        assert_int_equal(kind, KQ_DENIAL_ACL);
        assert_string_equal(reason, "user alice (groups: none) may not submit to queue root.closed: neither the "
                                    "submitacl nor the adminacl of the queue or of a parent queue allows the user "
                                    "or one of its groups");
        assert_int_equal(queue_alloc(m, "root.closed", "pods"), 0);
        char *after = snapshot(m);
        assert_string_equal(before, after);
        free(before);
        free(after);
        /* a second pod in the queue it is allowed in still fits */
        assert_int_equal(kq_ugm_increase_pod(m, "root.open", apps[i], &alice, &r, &second, reason, sizeof(reason),
                                             &kind), 0);
    }
    /* the forms without a pod ask too */
    assert_int_equal(inc(m, "root.closed", "x", &alice, 100, 0), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_ACL);
    /* reality is still counted; its resize is not asked again */
    assert_int_equal(kq_ugm_add_unchecked(m, "root.closed", "x", &alice, &r), 0);
    kq_ugm_pod_t grow = {.created = INT64_MAX, .uid = "p3", .generated_app = true, .counted = true};
    assert_int_equal(kq_ugm_check_pod(m, "root.closed", "x", &alice, &r, &grow, reason, sizeof(reason), &kind), 0);
    kq_ugm_free(m);
}

/* Every denial reports its kind next to its text, whatever the names in the text say: a
 * limit described as "the pod can never fit" and users named after other denials are
 * still an ordinary over-the-limit denial; the request alone over a max never fits. */
static void test_denial_kinds(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: a\n"
                      "            limits:\n"
                      "              - limit: the pod can never fit\n"
                      "                users: ['*']\n"
                      "                maxresources: {cpu: \"1\"}\n"
                      "          - name: b\n"
                      "            resources:\n"
                      "              max: {cpu: \"2\"}\n");
    kq_user_t missing = usr("does not exist", NULL, 0), acl = usr("x may not submit to queue y", NULL, 0);
    /* 2 requested alone > 1 max */
    assert_int_equal(inc(m, "root.a", "a1", &missing, 2000, 0), KQ_EDENIED);
    assert_non_null(strstr(reason, "2 requested alone is over the max: the pod can never fit"));
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    assert_int_equal(inc(m, "root.a", "a1", &missing, 700, 0), 0);
    assert_int_equal(kind, KQ_DENIAL_NONE);
    /* 700m + 800m > 1 but 800m alone fits: over the limit now */
    assert_int_equal(inc(m, "root.a", "a2", &missing, 800, 0), KQ_EDENIED);
    assert_string_equal(reason, "user does not exist in queue root.a: limit \"the pod can never fit\" (user *) "
                                "exceeded: cpu 700m used + 800m requested > 1 max; needs 500m more cpu");
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    kq_resource_t r = res(800, 0);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ugm_check(m, "root.a", "a2", &missing, &r, reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    /* the queue's max: 3 alone > 2 never fits; 1500m + 1 > 2 is over now */
    assert_int_equal(inc(m, "root.b", "b1", &acl, 3000, 0), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    assert_int_equal(inc(m, "root.b", "b1", &acl, 1500, 0), 0);
    assert_int_equal(inc(m, "root.b", "b2", &acl, 1000, 0), KQ_EDENIED);
    assert_string_equal(reason, "queue root.b: resources.max exceeded: cpu 1500m used + 1 requested > 2 max; "
                                "needs 500m more cpu");
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    kq_ugm_free(m);
}

/* The users and groups named in limits are shown with their limits before any use (YuniKorn
 * creates their trackers at configuration load: apache/yunikorn-core
 * pkg/scheduler/ugm/manager.go internalProcessConfig -> setUserLimits/setGroupLimits). */
static void test_configured_trackers_visible(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(CFG_HEAD
                      "        queues:\n"
                      "          - name: a\n"
                      "            queues:\n"
                      "              - name: b\n"
                      "                limits:\n"
                      "                  - limit: bob\n"
                      "                    users: [bob]\n"
                      "                    maxresources: {vcore: 2, memory: 1Gi}\n"
                      "                    maxapplications: 3\n"
                      "                  - limit: teams\n"
                      "                    groups: [team]\n"
                      "                    maxapplications: 4\n"
                      "                  - limit: rest\n"
                      "                    groups: [\"*\"]\n"
                      "                    maxapplications: 1\n");
    json_t *bob = kq_ugm_user_json(m, "bob");
    assert_non_null(bob);
    char *s = json_dumps(bob, JSON_SORT_KEYS | JSON_COMPACT);
    assert_string_equal(s, "{\"queues\":{\"children\":[{\"children\":[{\"maxApplications\":3,"
                           "\"maxResources\":{\"memory\":1073741824,\"vcore\":2000},\"queuePath\":\"root.a.b\"}],"
                           "\"queuePath\":\"root.a\"}],\"queuePath\":\"root\"},\"userName\":\"bob\"}");
    free(s);
    json_decref(bob);
    assert_null(kq_ugm_user_json(m, "carol"));
    json_t *groups = kq_ugm_groups_json(m);
    assert_int_equal(json_array_size(groups), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(groups, 0), "groupName")), "*");
    json_t *wb = find_usage(json_object_get(json_array_get(groups, 0), "queues"), "root.a.b");
    assert_int_equal(json_integer_value(json_object_get(wb, "maxApplications")), 1);
    json_decref(groups);
    /* with usage the configured queue and the used one both show */
    kq_user_t b = usr("bob", NULL, 0);
    assert_int_equal(inc(m, "root.x", "app", &b, 100, 0), 0);
    assert_int_equal(used_at(m, false, "bob", "root.x", "cpu"), 100);
    assert_int_equal(used_at(m, false, "bob", "root.a.b", "cpu"), 0);
    json_t *users = kq_ugm_users_json(m);
    assert_int_equal(json_array_size(users), 1);
    json_decref(users);
    kq_ugm_free(m);
}

/* Threads sharing one application id under different users, counted unchecked (bound pods):
 * each pod is charged to its own user, the users' entries are linked and unlinked under the
 * one id concurrently, and releasing everything leaves nothing (an owner entry lives exactly
 * as long as its user's pods of the application). */
typedef struct shared_worker {
    kq_ugm_t *m;
    const char *user;
    long failures;
} shared_worker_t;

static void *shared_main(void *arg)
{
    shared_worker_t *w = arg;
    kq_user_t u = {.name = w->user, .groups = NULL, .n_groups = 0};
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    if (kq_resource_set(&r, "cpu", 10) != 0)
        w->failures++;
    char why[256];
    for (int round = 0; round < 200; round++) {
        for (int k = 0; k < 5; k++)
            if (kq_ugm_add_unchecked_pod(w->m, "root.s", "shared-app", &u, &r,
                                         &(kq_ugm_pod_t){.created = round * 5 + k, .uid = w->user}) != 0)
                w->failures++;
        (void)why;
        for (int k = 0; k < 5; k++)
            if (kq_ugm_decrease(w->m, "root.s", "shared-app", w->user, &r) != 0)
                w->failures++;
    }
    return NULL;
}

static void test_threads_shared_application(void **state)
{
    (void)state;
    kq_ugm_t *m = mgr(NULL);
    static const char *const names[] = {"t1", "t2", "t3", "t4"};
    shared_worker_t w[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (shared_worker_t){.m = m, .user = names[i]};
        assert_int_equal(pthread_create(&th[i], NULL, shared_main, &w[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(w[i].failures, 0);
    }
    assert_int_equal(kq_ugm_user_count(m), 0);
    assert_int_equal(queue_alloc(m, "root", "cpu"), 0); /* nothing left */
    json_t *apps = kq_ugm_apps_json(m, NULL);
    assert_int_equal(json_array_size(apps), 0);
    json_decref(apps);
    kq_ugm_free(m);
}

static void test_threads_release_all(void **state)
{
    (void)state;
    run_threads(false);
}

static void test_threads_keep_some(void **state)
{
    (void)state;
    run_threads(true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tracking_totals),
        cmocka_unit_test(test_case_insensitive_paths),
        cmocka_unit_test(test_group_selection),
        cmocka_unit_test(test_no_group_limits_no_group_tracking),
        cmocka_unit_test(test_group_fixed_for_app_life),
        cmocka_unit_test(test_named_user_beats_wildcard),
        cmocka_unit_test(test_denied_increase_changes_nothing),
        cmocka_unit_test(test_max_applications_user),
        cmocka_unit_test(test_max_applications_group),
        cmocka_unit_test(test_max_applications_queue),
        cmocka_unit_test(test_queue_max_resources),
        cmocka_unit_test(test_cleanup),
        cmocka_unit_test(test_config_change),
        cmocka_unit_test(test_add_unchecked),
        cmocka_unit_test(test_decrease_unknown),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_overflow),
        cmocka_unit_test(test_views),
        cmocka_unit_test(test_usage_grows_to_sixteen_names),
        cmocka_unit_test(test_usage_beyond_inline_names),
        cmocka_unit_test(test_views_same_for_same_usage),
        cmocka_unit_test(test_app_in_several_queues),
        cmocka_unit_test(test_many_apps_and_queues),
        cmocka_unit_test(test_threads_release_all),
        cmocka_unit_test(test_threads_keep_some),
        cmocka_unit_test(test_threads_shared_application),
        cmocka_unit_test(test_wildcard_group_cumulative),
        cmocka_unit_test(test_app_of_another_user),
        cmocka_unit_test(test_pods_enforced),
        cmocka_unit_test(test_acls),
        cmocka_unit_test(test_acl_every_pod),
        cmocka_unit_test(test_denial_kinds),
        cmocka_unit_test(test_configured_trackers_visible),
    };
    if (kq_log_set_level("warn") != 0)
        return 1;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
