/* Unit tests for the elastic quota wiring (src/control/elastic.c) and the pod ledger's quota tree
 * accounting: groups from queues.yaml and ElasticQuota objects, the cluster total from
 * nodes, pod -> group resolution, check-and-commit across ugm and tree, exact release,
 * group removal, reclaim order, the preempt verb and the admission hook. Every expected
 * number is worked out by hand in the comments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pthread.h>

#include <cmocka.h>

#include "kubequota/app.h"
#include "kubequota/engine/config.h"
#include "kubequota/control/elastic.h"
#include "kubequota/serve/extender.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/control/reclaim.h"
#include "kubequota/control/resolve.h"
#include "kubequota/base/log.h"
#include "kubequota/kube/pod.h"
#include "kubequota/engine/quota_tree.h"
#include "kubequota/engine/ugm.h"

#include "testapp.h"
#include "testutil.h"

#define OURS "kubequota"
#define CPU(n) ((int64_t)(n) * 1000)

/* A and B lend to each other; org is a parent queue without guaranteed (its min is its
 * children's, 1 cpu); team-c keeps its min (allow-lent false). */
static const char QUEUES_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: team-a\n"
    "            resources:\n"
    "              guaranteed: {vcore: 4}\n"
    "              max: {vcore: 10}\n"
    "            properties:\n"
    "              kubequota.io/shared-weight: \"cpu=1\"\n"
    "          - name: team-b\n"
    "            resources:\n"
    "              guaranteed: {vcore: 4}\n"
    "              max: {vcore: 10}\n"
    "            properties:\n"
    "              kubequota.io/shared-weight: \"cpu=1\"\n"
    "          - name: org\n"
    "            queues:\n"
    "              - name: child\n"
    "                resources:\n"
    "                  guaranteed: {vcore: 1}\n"
    "          - name: team-c\n"
    "            resources:\n"
    "              guaranteed: {vcore: 1}\n"
    "            properties:\n"
    "              kubequota.io/allow-lent: \"false\"\n";

typedef struct evict_call {
    char uid[64];
} evict_call_t;

typedef struct fx {
    kq_config_t *cfg;
    kq_app_t app;
    kq_elastic_t *e;
    kq_qtree_t *qt;
    evict_call_t calls[64];
    size_t n_calls;
    int evict_rc;
} fx_t;

static int test_evict(void *ud, const char *ns, const char *name, const char *uid, char *err, size_t len)
{
    fx_t *f = ud;
    if (f->n_calls < 64)
        snprintf(f->calls[f->n_calls++].uid, sizeof(f->calls[0].uid), "%s", uid);
    if (f->evict_rc != 0)
        snprintf(err, len, "refused by a PodDisruptionBudget");
    return f->evict_rc;
}

static long g_min_runtime_ms; /* opts.reclaim_min_runtime_ms of the next fixture */
static unsigned g_sources = KQ_RECLAIM_DEFAULT; /* opts.reclaim_sources of the next fixture */
static bool g_preempt_default; /* opts.preempt_default of the next fixture */

static int setup_yaml(void **state, const char *yaml)
{
    fx_t *f = calloc(1, sizeof(*f));
    if ((f->cfg = test_config(yaml)) == NULL)
        return -1;
    *state = f;
    if (test_app_start(&f->app, f->cfg, OURS, TEST_APP_HOLDER | TEST_APP_LEDGER) != 0)
        return -1;
    kq_elastic_opts_t o;
    kq_elastic_opts_default(&o);
    o.watch_nodes = o.watch_quotas = false;
    o.reclaim_grace_ms = 5000;
    o.reclaim_min_runtime_ms = g_min_runtime_ms;
    o.reclaim_sources = g_sources;
    g_sources = KQ_RECLAIM_DEFAULT;
    o.preempt_default = g_preempt_default;
    o.evict = test_evict;
    o.evict_ud = f;
    f->e = kq_elastic_new(&f->app, &o);
    f->app.elastic = f->e;
    f->qt = kq_elastic_qtree(f->e);
    return f->e ? 0 : -1;
}

static int setup(void **state)
{
    g_min_runtime_ms = 0;
    g_preempt_default = false;
    return setup_yaml(state, QUEUES_YAML);
}

static int setup_preempt_default(void **state)
{
    g_min_runtime_ms = 0;
    g_preempt_default = true;
    return setup_yaml(state, QUEUES_YAML);
}

static int setup_minrun(void **state)
{
    g_min_runtime_ms = 3600 * 1000;
    g_preempt_default = false;
    return setup_yaml(state, QUEUES_YAML);
}

static int teardown(void **state)
{
    fx_t *f = *state;
    kq_elastic_stop(f->e);
    kq_ledger_free(f->app.ledger); /* (before the quota tree it may point into) */
    f->app.ledger = NULL;
    kq_elastic_free(f->e);
    test_app_stop(&f->app);
    kq_config_unref(f->cfg);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------------ helpers -- */

static kq_pod_t mk(const char *uid, const char *ns, const char *queue, int64_t cpu, const char *node)
{
    kq_pod_t p;
    memset(&p, 0, sizeof(p));
    p.uid = strdup(uid);
    p.ns = strdup(ns);
    p.name = strdup(uid);
    p.node = node ? strdup(node) : NULL;
    p.scheduler_name = strdup(OURS);
    p.phase = node ? KQ_POD_RUNNING : KQ_POD_PENDING;
    p.user = strdup("alice");
    p.queue = queue ? strdup(queue) : NULL;
    p.app_id = strdup(uid);
    p.preemptible = true;
    assert_int_equal(kq_resource_set(&p.request, "cpu", cpu), 0);
    return p;
}

static void set_node(kq_pod_t *p, const char *node)
{
    free(p->node);
    p->node = node ? strdup(node) : NULL;
    p->phase = node ? KQ_POD_RUNNING : KQ_POD_PENDING;
}

static kq_qgroup_info_t info(fx_t *f, const char *g)
{
    kq_qgroup_info_t i;
    int rc = kq_qtree_info(f->qt, g, &i);
    if (rc != 0)
        fail_msg("group %s: %s", g, kq_strerror(rc));
    return i;
}

static int64_t cpu_of(const kq_resource_t *r)
{
    return kq_resource_get(r, "cpu", NULL);
}

static int64_t min_of(fx_t *f, const char *g)
{
    kq_qgroup_info_t i = info(f, g);
    return cpu_of(&i.min);
}

static int64_t max_of(fx_t *f, const char *g)
{
    kq_qgroup_info_t i = info(f, g);
    return cpu_of(&i.max);
}

static int64_t used(fx_t *f, const char *g)
{
    kq_qgroup_info_t i = info(f, g);
    return cpu_of(&i.used);
}

static int64_t request(fx_t *f, const char *g)
{
    kq_qgroup_info_t i = info(f, g);
    return cpu_of(&i.request);
}

static int64_t runtime(fx_t *f, const char *g)
{
    kq_qgroup_info_t i = info(f, g);
    bool has = false;
    int64_t v = kq_resource_get(&i.runtime, "cpu", &has);
    return has ? v : -1;
}

static void node(fx_t *f, int type, const char *name, const char *cpu, bool unschedulable)
{
    json_t *n = json_pack("{s:{s:s},s:{s:b},s:{s:{s:s,s:s}}}", "metadata", "name", name, "spec", "unschedulable",
                          unschedulable, "status", "allocatable", "cpu", cpu, "pods", "110");
    kq_elastic_node_event(f->e, type, n);
    json_decref(n);
}

static void nodes_total(fx_t *f, const char *cpu)
{
    kq_elastic_nodes_list_begin(f->e);
    node(f, KQ_WATCH_ADDED, "n1", cpu, false);
    kq_elastic_nodes_list_end(f->e);
}

static void eq(fx_t *f, int type, const char *json)
{
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    if (o == NULL)
        fail_msg("test JSON: %s", je.text);
    char err[512] = "";
    int rc = kq_elastic_quota_event(f->e, type, o, NULL, err, sizeof(err));
    json_decref(o);
    if (rc != 0)
        fail_msg("quota event: %s", err);
}

static void resolve(fx_t *f, const kq_pod_t *p, const char *want)
{
    char g[KQ_QTREE_NAME_MAX + 1];
    assert_int_equal(kq_resolve_pod(kq_elastic_resolver(f->e), p, g, sizeof(g)), 0);
    assert_string_equal(g, want);
}

/* ------------------------------------------------------------------------- tests -- */

/* Queue groups carry guaranteed/max/properties; a parent without guaranteed guarantees its
 * children's sum; the default and system groups exist. */
static void test_queue_groups(void **state)
{
    fx_t *f = *state;
    kq_qgroup_info_t a = info(f, "root.team-a");
    assert_int_equal(cpu_of(&a.min), CPU(4));
    assert_int_equal(cpu_of(&a.max), CPU(10));
    assert_int_equal(cpu_of(&a.shared_weight), CPU(1));
    assert_true(a.allow_lent);
    assert_false(a.is_parent);
    kq_qgroup_info_t org = info(f, "root.org");
    assert_true(org.is_parent);
    assert_int_equal(cpu_of(&org.min), CPU(1)); /* the child's guaranteed */
    kq_qgroup_info_t child = info(f, "root.org.child");
    assert_string_equal(child.parent, "root.org");
    assert_false(info(f, "root.team-c").allow_lent);
    assert_true(kq_qtree_lookup(f->qt, KQ_QTREE_DEFAULT, NULL));
    assert_true(kq_qtree_lookup(f->qt, KQ_QTREE_SYSTEM, NULL));
    /* no node known: runtime bounds nothing */
    assert_int_equal(runtime(f, "root.team-a"), -1);
}

/* Resolution order: system namespace, label, ElasticQuota of the namespace, queue group,
 * default. A scheduler-plugins object is the group "namespace/name". */
static void test_resolution(void **state)
{
    fx_t *f = *state;
    kq_pod_t p = mk("p", "team-x", "root.team-a", CPU(1), NULL);
    resolve(f, &p, "root.team-a");                 /* 4: the queue's group */
    free(p.queue);
    p.queue = strdup("root.org");                   /* a parent queue is no pod's group */
    resolve(f, &p, KQ_QTREE_DEFAULT);
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"kind\":\"ElasticQuota\","
                          "\"metadata\":{\"name\":\"eq-x\",\"namespace\":\"team-x\"},"
                          "\"spec\":{\"min\":{\"cpu\":1},\"max\":{\"cpu\":\"2\"}}}");
    resolve(f, &p, "team-x/eq-x");                  /* 3: the namespace's object */
    p.quota_name = strdup("root.team-b");
    resolve(f, &p, "team-x/eq-x");                  /* another queue's group: not taken (issue 37) */
    free(p.queue);
    p.queue = strdup("root.team-b");
    resolve(f, &p, "root.team-b");                  /* 2: the label (its own queue's group) */
    free(p.quota_name);
    p.quota_name = strdup("no-such-group");         /* unknown label: Koordinator's default group */
    resolve(f, &p, KQ_QTREE_DEFAULT);
    free(p.quota_name);
    p.quota_name = strdup(KQ_QTREE_SYSTEM);         /* nobody labels into the system group, nor */
    resolve(f, &p, "team-x/eq-x");                  /* out of a namespace's own quota (issue 37) */
    free(p.quota_name);
    p.quota_name = strdup("koordinator-system-quota");
    resolve(f, &p, "team-x/eq-x");
    free(p.ns);
    p.ns = strdup("team-y");                        /* a namespace without a quota: the default */
    resolve(f, &p, KQ_QTREE_DEFAULT);
    free(p.ns);
    p.ns = strdup("kube-system");
    resolve(f, &p, KQ_QTREE_SYSTEM);                /* 1: system namespace */
    kq_pod_clear(&p);
    /* "cpu: 1" as a JSON number is one core, not one millicore */
    assert_int_equal(min_of(f, "team-x/eq-x"), CPU(1));
}

/* scheduler-plugins objects are per namespace: the same name in two namespaces is two
 * quotas, each bounding its own namespace (scheduler-plugins keys its ElasticQuotaInfos by
 * namespace: kubernetes-sigs/scheduler-plugins pkg/capacityscheduling/capacity_scheduling.go). */
static void test_upstream_per_namespace(void **state)
{
    fx_t *f = *state;
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"quota\","
                          "\"namespace\":\"ns1\"},\"spec\":{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"2\"}}}");
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"quota\","
                          "\"namespace\":\"ns2\"},\"spec\":{\"min\":{\"cpu\":\"3\"},\"max\":{\"cpu\":\"4\"}}}");
    /* a second object in ns1: the earlier one keeps the namespace */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"a-first\","
                          "\"namespace\":\"ns1\"},\"spec\":{\"max\":{\"cpu\":\"9\"}}}");
    assert_int_equal(max_of(f, "ns1/quota"), CPU(2));
    assert_int_equal(max_of(f, "ns2/quota"), CPU(4));
    assert_int_equal(min_of(f, "ns2/quota"), CPU(3));
    kq_pod_t p1 = mk("p1", "ns1", NULL, CPU(1), NULL), p2 = mk("p2", "ns2", NULL, CPU(1), NULL);
    resolve(f, &p1, "ns1/quota");
    resolve(f, &p2, "ns2/quota");
    /* Koordinator's labels mean nothing on a scheduler-plugins object: still flat */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"q\","
                          "\"namespace\":\"ns3\",\"labels\":{\"quota.scheduling.koordinator.sh/parent\":\"x\"}},"
                          "\"spec\":{\"max\":{\"cpu\":\"1\"}}}");
    assert_string_equal(info(f, "ns3/q").parent, KQ_QTREE_ROOT);
    /* deleting ns1's quota leaves ns1 to the later object, ns2 untouched */
    eq(f, KQ_WATCH_DELETED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"quota\","
                            "\"namespace\":\"ns1\"}}");
    resolve(f, &p1, "ns1/a-first");
    resolve(f, &p2, "ns2/quota");
    kq_pod_clear(&p1);
    kq_pod_clear(&p2);
}

/* Koordinator's namespace rules (koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/plugin_helper.go, GetQuotaName): the quota named like
 * the namespace, in it; else the quota whose namespaces annotation lists it; never "the
 * first quota of the namespace". */
static void test_koord_namespaces(void **state)
{
    fx_t *f = *state;
    /* in namespace dev but not named dev: binds nothing by itself */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"aaa\","
                          "\"namespace\":\"dev\"},\"spec\":{\"max\":{\"cpu\":\"1\"}}}");
    kq_pod_t p = mk("p", "dev", NULL, CPU(1), NULL);
    resolve(f, &p, KQ_QTREE_DEFAULT);
    /* listed in two quotas' namespaces annotation: the first one seen binds it */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"zzz\","
                          "\"namespace\":\"other\",\"annotations\":{\"quota.scheduling.koordinator.sh/namespaces\":"
                          "\"[\\\"dev\\\"]\"}},\"spec\":{\"max\":{\"cpu\":\"1\"}}}");
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"bbb\","
                          "\"namespace\":\"other\",\"annotations\":{\"quota.scheduling.koordinator.sh/namespaces\":"
                          "\"[\\\"dev\\\"]\"}},\"spec\":{\"max\":{\"cpu\":\"1\"}}}");
    resolve(f, &p, "zzz");
    /* a scheduler-plugins object in dev ranks below Koordinator's annotation */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"up\","
                          "\"namespace\":\"dev\"},\"spec\":{\"max\":{\"cpu\":\"1\"}}}");
    resolve(f, &p, "zzz");
    /* the quota named like the namespace, in it, ranks first */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"dev\","
                          "\"namespace\":\"dev\"},\"spec\":{\"max\":{\"cpu\":\"1\"}}}");
    resolve(f, &p, "dev");
    kq_pod_clear(&p);
}

/* Koordinator objects: a child before its parent, deletion order, conflicts, the default
 * quota object, a relist that misses an object. */
static void test_objects(void **state)
{
    fx_t *f = *state;
    static const char child[] =
        "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"kind\":\"ElasticQuota\","
        "\"metadata\":{\"name\":\"team-k\",\"namespace\":\"team-k\",\"labels\":{"
        "\"quota.scheduling.koordinator.sh/parent\":\"org-ml\","
        "\"quota.scheduling.koordinator.sh/allow-lent-resource\":\"false\"},"
        "\"annotations\":{\"quota.scheduling.koordinator.sh/shared-weight\":\"{\\\"cpu\\\":\\\"3\\\"}\","
        "\"quota.scheduling.koordinator.sh/namespaces\":\"[\\\"team-k-dev\\\"]\"}},"
        "\"spec\":{\"min\":{\"cpu\":\"2\"},\"max\":{\"cpu\":\"4\"}}}";
    static const char parent[] =
        "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"kind\":\"ElasticQuota\","
        "\"metadata\":{\"name\":\"org-ml\",\"namespace\":\"kube-system\",\"labels\":{"
        "\"quota.scheduling.koordinator.sh/is-parent\":\"true\"}},"
        "\"spec\":{\"min\":{\"cpu\":\"3\"},\"max\":{\"cpu\":\"8\"}}}";
    eq(f, KQ_WATCH_ADDED, child);
    assert_false(kq_qtree_lookup(f->qt, "team-k", NULL)); /* parent not there yet */
    eq(f, KQ_WATCH_ADDED, parent);
    kq_qgroup_info_t k = info(f, "team-k");
    assert_string_equal(k.parent, "org-ml");
    assert_false(k.allow_lent);
    assert_int_equal(cpu_of(&k.shared_weight), CPU(3));
    kq_pod_t p = mk("p", "team-k-dev", NULL, CPU(1), NULL); /* namespaces annotation */
    resolve(f, &p, "team-k");
    kq_pod_clear(&p);
    /* the parent cannot go while it has a child: it stays until the child goes */
    eq(f, KQ_WATCH_DELETED, parent);
    assert_true(kq_qtree_lookup(f->qt, "org-ml", NULL));
    eq(f, KQ_WATCH_DELETED, child);
    assert_false(kq_qtree_lookup(f->qt, "team-k", NULL));
    assert_false(kq_qtree_lookup(f->qt, "org-ml", NULL));
    /* an object named like a queue group is ignored */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":"
                          "\"root.team-a\",\"namespace\":\"a\"},\"spec\":{\"min\":{\"cpu\":\"9\"},\"max\":{\"cpu\":\"9\"}}}");
    assert_int_equal(min_of(f, "root.team-a"), CPU(4));
    /* koordinator-default-quota sets the default group */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":"
                          "\"koordinator-default-quota\",\"namespace\":\"kube-system\"},\"spec\":{\"max\":{\"cpu\":\"5\"}}}");
    assert_int_equal(max_of(f, KQ_QTREE_DEFAULT), CPU(5));
    /* a relist of that API group without it: the default group's max is unlimited again */
    kq_elastic_quotas_list_begin(f->e, KQ_EQ_GROUP_KOORD);
    kq_elastic_quotas_list_end(f->e, KQ_EQ_GROUP_KOORD);
    assert_int_equal(info(f, KQ_QTREE_DEFAULT).max.n, 0);
    /* a bad object is refused with a reason and changes nothing */
    json_t *bad = json_loads("{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"b\"},"
                             "\"spec\":{\"min\":{\"cpu\":\"lots\"}}}", 0, NULL);
    char err[512] = "";
    assert_int_equal(kq_elastic_quota_event(f->e, KQ_WATCH_ADDED, bad, NULL, err, sizeof(err)), KQ_EPARSE);
    assert_non_null(strstr(err, "spec.min"));
    assert_false(kq_qtree_lookup(f->qt, "b", NULL));
    json_decref(bad);
}

/* Nodes: schedulable allocatable summed; unschedulable and deleted nodes not counted; the
 * tree's runtime follows. */
static void test_nodes(void **state)
{
    fx_t *f = *state;
    kq_pod_t p = mk("a1", "x", "root.team-a", CPU(6), NULL);
    kq_ledger_observe(f->app.ledger, &p); /* pending: request 6 */
    assert_int_equal(request(f, "root.team-a"), CPU(6));
    kq_elastic_nodes_list_begin(f->e);
    node(f, KQ_WATCH_ADDED, "n1", "4", false);
    node(f, KQ_WATCH_ADDED, "n2", "4", false);
    node(f, KQ_WATCH_ADDED, "n3", "100", true); /* cordoned */
    kq_elastic_nodes_list_end(f->e);
    /* total 8; first-level mins 4+4+1+1 = 10 > 8: scaled to 8 in proportion, truncated as
     * Koordinator truncates (8000*4000/10000 = 3200, 3200, 800, 800); team-a asks 6: its
     * scaled min 3200m; team-c does not lend, so it asks its whole min 1000 (Koordinator's
     * request of a quota that does not lend) and first gets its scaled 800. Left: 4000,
     * shared by team-a (weight cpu=1: 1000) and team-c (no weight, no max: the total, 8000):
     * 444 and 3555 + the leftover unit (remainder 5000 > 4000) = 3556; team-c needs only 200
     * and gives 3356 back, which team-a takes up to its ask: 3200 + 2800 = 6000 */
    assert_int_equal(runtime(f, "root.team-a"), CPU(6));
    assert_int_equal(runtime(f, "root.team-c"), CPU(1));
    node(f, KQ_WATCH_DELETED, "n2", "4", false); /* total 4: mins 1600/1600/400/400 */
    /* 4000 - 1600 - 400 = 2000 shared 1000:4000: team-a 400, team-c 1600 of which it needs
     * 600 (up to its min): 1000 back to team-a -> team-a 1600 + 400 + 1000 = 3000, team-c
     * keeps its whole min 1000 */
    assert_int_equal(runtime(f, "root.team-a"), 3000);
    assert_int_equal(runtime(f, "root.team-c"), CPU(1));
    node(f, KQ_WATCH_MODIFIED, "n3", "100", false); /* uncordoned: total 104 */
    assert_int_equal(runtime(f, "root.team-a"), CPU(6));
    kq_elastic_nodes_list_begin(f->e); /* relist without n3 */
    node(f, KQ_WATCH_ADDED, "n1", "4", false);
    kq_elastic_nodes_list_end(f->e);
    assert_int_equal(runtime(f, "root.team-a"), 3000);
    kq_ledger_remove(f->app.ledger, "a1");
    assert_int_equal(request(f, "root.team-a"), 0);
    kq_pod_clear(&p);
}

/* Bind is check-and-commit across the ugm and the tree; release is exact. */
static void test_check_and_commit(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "8");
    char why[512];
    /* team-c: min 1, keeps it, max unlimited; others idle -> runtime = ask */
    kq_pod_t c1 = mk("c1", "x", "root.team-c", CPU(1), NULL);
    kq_ledger_observe(f->app.ledger, &c1);
    assert_int_equal(kq_ledger_assume(f->app.ledger, &c1, why, sizeof(why), NULL), 0);
    assert_int_equal(used(f, "root.team-c"), CPU(1));
    /* team-a pod of 9 cpu: team-a max 10, but the cluster is 8, minus team-c's kept 1 */
    kq_pod_t a1 = mk("a1", "x", "root.team-a", CPU(9), NULL);
    kq_ledger_observe(f->app.ledger, &a1);
    bool by_tree = false;
    kq_denial_t kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_ex(f->app.ledger, &a1, why, sizeof(why), &by_tree, &kind), KQ_EDENIED);
    assert_true(by_tree);
    assert_non_null(strstr(why, "root.team-a"));
    assert_int_equal(kind, KQ_DENIAL_OVER_RUNTIME); /* 9 > runtime 7, under the max 10 */
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_assume(f->app.ledger, &a1, why, sizeof(why), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_OVER_RUNTIME);
    /* nothing committed anywhere */
    assert_int_equal(used(f, "root.team-a"), 0);
    assert_false(kq_ledger_is_counted(f->app.ledger, "a1"));
    json_t *u = kq_ugm_user_json(f->app.ugm, "alice");
    const json_t *ru = json_object_get(json_object_get(u, "queues"), "resourceUsage");
    const json_t *uc = json_object_get(ru, "cpu") ? json_object_get(ru, "cpu") : json_object_get(ru, "vcore");
    assert_int_equal(json_integer_value(uc), CPU(1));
    json_decref(u);
    /* a 7 cpu pod fits (8 - team-c's 1) */
    kq_ledger_remove(f->app.ledger, "a1");
    kq_pod_t a2 = mk("a2", "x", "root.team-a", CPU(7), NULL);
    kq_ledger_observe(f->app.ledger, &a2);
    assert_int_equal(runtime(f, "root.team-a"), CPU(7));
    assert_int_equal(kq_ledger_assume(f->app.ledger, &a2, why, sizeof(why), NULL), 0);
    assert_int_equal(used(f, "root.team-a"), CPU(7));
    assert_int_equal(used(f, KQ_QTREE_ROOT), CPU(8));
    /* the watch shows it bound, then resized to 6, then deleted: used follows exactly */
    set_node(&a2, "n1");
    kq_ledger_observe(f->app.ledger, &a2);
    assert_int_equal(used(f, "root.team-a"), CPU(7));
    assert_int_equal(kq_resource_set(&a2.request, "cpu", CPU(6)), 0);
    kq_ledger_observe(f->app.ledger, &a2);
    assert_int_equal(used(f, "root.team-a"), CPU(6));
    assert_int_equal(request(f, "root.team-a"), CPU(6));
    kq_ledger_remove(f->app.ledger, "a2");
    kq_ledger_remove(f->app.ledger, "a2");
    assert_int_equal(used(f, "root.team-a"), 0);
    assert_int_equal(request(f, "root.team-a"), 0);
    /* a bind that fails releases in both */
    kq_pod_t b1 = mk("b1", "x", "root.team-b", CPU(2), NULL);
    assert_int_equal(kq_ledger_assume(f->app.ledger, &b1, why, sizeof(why), NULL), 0);
    assert_int_equal(used(f, "root.team-b"), CPU(2));
    assert_int_equal(kq_ledger_forget(f->app.ledger, "b1"), 0);
    assert_int_equal(used(f, "root.team-b"), 0);
    assert_int_equal(request(f, "root.team-b"), 0);
    /* a ugm denial leaves the tree untouched: root.default has no limit, so use a pod with
     * no queue (denied by queue rules) */
    kq_pod_t q = mk("q", "x", NULL, CPU(1), NULL);
    q.queue_error = strdup("queue \"root.nope\" does not exist");
    assert_int_equal(kq_ledger_assume(f->app.ledger, &q, why, sizeof(why), NULL), KQ_EDENIED);
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    kq_ledger_remove(f->app.ledger, "c1");
    assert_int_equal(used(f, KQ_QTREE_ROOT), 0);
    kq_pod_clear(&c1);
    kq_pod_clear(&a1);
    kq_pod_clear(&a2);
    kq_pod_clear(&b1);
    kq_pod_clear(&q);
}

/* A check of a pod the watch has not shown yet leaves nothing behind (a forged filter
 * must not raise a group's request and so cut another group's runtime: issue 20); once
 * confirmed (kq_ledger_note_pending) its request enters its group's; a pod naming a
 * parent group is denied with that reason. */
static void test_unseen_pod_and_parent(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "8");
    kq_pod_t a = mk("a", "x", "root.team-a", CPU(5), NULL);
    char why[512];
    assert_int_equal(kq_ledger_check(f->app.ledger, &a, why, sizeof(why), NULL), KQ_EDENIED);
    assert_int_equal(request(f, "root.team-a"), 0);
    size_t counted = 1;
    assert_int_equal(kq_ledger_size(f->app.ledger, &counted), 0);
    assert_int_equal(counted, 0);
    assert_int_equal(kq_ledger_expire_unobserved(f->app.ledger, 0), 0);
    /* once the caller has confirmed the pod exists, it enters its group's request */
    kq_ledger_note_pending(f->app.ledger, &a);
    assert_int_equal(request(f, "root.team-a"), CPU(5));
    assert_int_equal(kq_ledger_check(f->app.ledger, &a, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ledger_expire_unobserved(f->app.ledger, 3600), 0);
    assert_int_equal(kq_ledger_expire_unobserved(f->app.ledger, 0), 1);
    assert_int_equal(request(f, "root.team-a"), 0);
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"px\","
                          "\"namespace\":\"x\",\"labels\":{\"quota.scheduling.koordinator.sh/is-parent\":\"true\"}},"
                          "\"spec\":{\"max\":{\"cpu\":\"4\"}}}");
    a.quota_name = strdup("px"); /* a parent quota of the pod's namespace */
    bool by_tree = false;
    kq_denial_t kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_ex(f->app.ledger, &a, why, sizeof(why), &by_tree, &kind), KQ_EDENIED);
    assert_non_null(strstr(why, "parent group"));
    assert_int_equal(kind, KQ_DENIAL_GROUP_NOT_LEAF);
    kq_ledger_remove(f->app.ledger, "a");
    kq_pod_clear(&a);
}

/* Removing an ElasticQuota moves its pods to the default group; when a group of the same
 * name comes back its pods move back into it (resolution is level-triggered, issue 38: a
 * restart would file them there); they are released exactly once, wherever they are. */
static void test_remove_group(void **state)
{
    fx_t *f = *state;
    static const char obj[] = "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"eq-r\","
                              "\"namespace\":\"r\"},\"spec\":{\"max\":{\"cpu\":\"10\"}}}";
    eq(f, KQ_WATCH_ADDED, obj);
    kq_pod_t p = mk("p", "r", NULL, CPU(2), "n1");
    free(p.queue);
    p.queue = strdup("root.default");
    kq_ledger_observe(f->app.ledger, &p);
    kq_pod_t w = mk("w", "r", "root.default", CPU(1), NULL); /* pending */
    kq_ledger_observe(f->app.ledger, &w);
    assert_int_equal(used(f, "r/eq-r"), CPU(2));
    assert_int_equal(request(f, "r/eq-r"), CPU(3));
    eq(f, KQ_WATCH_DELETED, obj);
    assert_false(kq_qtree_lookup(f->qt, "r/eq-r", NULL));
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), CPU(2));
    assert_int_equal(request(f, KQ_QTREE_DEFAULT), CPU(3));
    eq(f, KQ_WATCH_ADDED, obj); /* back: p (2 cpu, bound) and w (1 cpu, pending) move back */
    assert_int_equal(used(f, "r/eq-r"), CPU(2));
    assert_int_equal(request(f, "r/eq-r"), CPU(3));
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    assert_int_equal(request(f, KQ_QTREE_DEFAULT), 0);
    kq_ledger_remove(f->app.ledger, "p");
    kq_ledger_remove(f->app.ledger, "w");
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    assert_int_equal(request(f, KQ_QTREE_DEFAULT), 0);
    assert_int_equal(used(f, "r/eq-r"), 0);
    kq_pod_clear(&p);
    kq_pod_clear(&w);
}

/* Issue 38, items 1 and 2: pods that arrive before the ElasticQuota they name count in the
 * default group until it exists, then move into it, request and used, in one step. After
 * Koordinator's TestPlugin_migrateDefaultQuotaGroupsPod (koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/plugin_test.go): four running pods of 10 cpu labelled
 * with quota test1 are added before test1 exists (default: request 40, used 40); test1 is
 * added (min 96, max 160) and the four are in test1, none in default. Here also a pending
 * pod of 30 cpu, whose bind was denied before ("0 runtime") and fits after. */
static void test_pod_before_quota(void **state)
{
    fx_t *f = *state;
    static const char test1[] = "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":"
                                "\"test1\",\"namespace\":\"ns1\"},\"spec\":{\"min\":{\"cpu\":\"96\"},\"max\":{"
                                "\"cpu\":\"160\"}}}";
    nodes_total(f, "200");
    kq_pod_t p[4];
    for (int i = 0; i < 4; i++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "%d", i + 1);
        p[i] = mk(uid, "ns1", "root.default", CPU(10), "test");
        p[i].quota_name = strdup("test1");
        kq_ledger_observe(f->app.ledger, &p[i]);
    }
    kq_pod_t w = mk("w", "ns1", "root.default", CPU(30), NULL);
    w.quota_name = strdup("test1");
    kq_ledger_observe(f->app.ledger, &w);
    /* 4 x 10 bound + 30 pending, all in the default group */
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), CPU(40));
    assert_int_equal(request(f, KQ_QTREE_DEFAULT), CPU(70));
    eq(f, KQ_WATCH_ADDED, test1);
    assert_int_equal(used(f, "test1"), CPU(40));
    assert_int_equal(request(f, "test1"), CPU(70));
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    assert_int_equal(request(f, KQ_QTREE_DEFAULT), 0);
    /* test1 asks 70 of its min 96: runtime 70, and 40 used + 30 fits */
    assert_int_equal(runtime(f, "test1"), CPU(70));
    char why[512] = "";
    assert_int_equal(kq_ledger_assume(f->app.ledger, &w, why, sizeof(why), NULL), 0);
    assert_int_equal(used(f, "test1"), CPU(70));
    /* the quota goes: its pods fall to the default group, request and used */
    eq(f, KQ_WATCH_DELETED, test1);
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), CPU(70));
    assert_int_equal(request(f, KQ_QTREE_DEFAULT), CPU(70));
    for (int i = 0; i < 4; i++) {
        kq_ledger_remove(f->app.ledger, p[i].uid);
        kq_pod_clear(&p[i]);
    }
    kq_ledger_remove(f->app.ledger, "w");
    kq_pod_clear(&w);
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    assert_int_equal(request(f, KQ_QTREE_DEFAULT), 0);
    assert_int_equal(used(f, KQ_QTREE_ROOT), 0);
}

/* Issue 38, item 3: the order in which a (re)started kubequota's informers answer does not
 * show in the tree. The same objects applied in three orders (quotas listed before the
 * pods; the pods before the quotas, as when the pod list is answered first; the pods
 * between the two API groups' lists) give the same used, request and runtime in every
 * group. Objects: scheduler-plugins quota a/qa (min 4, max 6) for namespace a; Koordinator
 * quota k1 (min 2, max 4) whose namespaces annotation lists b; pods a1 (a, 2 cpu bound),
 * a2 (a, 3 cpu pending), b1 (b, 1 cpu bound), d1 (x, 1 cpu bound: no quota). By hand:
 * a/qa used 2, request 5, runtime 5 (its min 4 first, the 1 more it asks from the 200 left);
 * k1 used 1, request 1, runtime 1; default used 1, request 1. */
#define ORDER_GROUPS 4
static const char *const order_groups[ORDER_GROUPS] = {"a/qa", "k1", KQ_QTREE_DEFAULT, KQ_QTREE_ROOT};

static void order_quotas(fx_t *f, const char *api_group)
{
    kq_elastic_quotas_list_begin(f->e, api_group);
    if (strcmp(api_group, KQ_EQ_GROUP_UPSTREAM) == 0)
        eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"qa\","
                              "\"namespace\":\"a\"},\"spec\":{\"min\":{\"cpu\":\"4\"},\"max\":{\"cpu\":\"6\"}}}");
    else
        eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"k1\","
                              "\"namespace\":\"kq\",\"annotations\":{\"quota.scheduling.koordinator.sh/namespaces\":"
                              "\"[\\\"b\\\"]\"}},\"spec\":{\"min\":{\"cpu\":\"2\"},\"max\":{\"cpu\":\"4\"}}}");
    kq_elastic_quotas_list_end(f->e, api_group);
}

static void order_pods(fx_t *f)
{
    kq_pod_t p[] = {mk("a1", "a", "root.default", CPU(2), "n1"), mk("a2", "a", "root.default", CPU(3), NULL),
                    mk("b1", "b", "root.default", CPU(1), "n1"), mk("d1", "x", "root.default", CPU(1), "n1")};
    kq_ledger_resync_begin(f->app.ledger);
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        kq_ledger_observe(f->app.ledger, &p[i]);
    kq_ledger_resync_end(f->app.ledger);
    for (size_t i = 0; i < sizeof(p) / sizeof(p[0]); i++)
        kq_pod_clear(&p[i]);
}

static void order_tree(fx_t *f, int64_t out[ORDER_GROUPS][3])
{
    for (int i = 0; i < ORDER_GROUPS; i++) {
        out[i][0] = used(f, order_groups[i]);
        out[i][1] = request(f, order_groups[i]);
        out[i][2] = strcmp(order_groups[i], KQ_QTREE_ROOT) == 0 ? 0 : runtime(f, order_groups[i]);
    }
}

static void test_restart_order(void **state)
{
    (void)state;
    static const int64_t want[ORDER_GROUPS][3] = {
        {CPU(2), CPU(5), CPU(5)}, /* a/qa */
        {CPU(1), CPU(1), CPU(1)}, /* k1 */
        {CPU(1), CPU(1), -2},     /* default: runtime not compared (unbounded, it takes first) */
        {CPU(4), CPU(8), 0},      /* root: used 2+1+1; request 5+1+1 and team-c's kept min 1 */
    };
    for (int order = 0; order < 3; order++) {
        void *st = NULL;
        g_min_runtime_ms = 0;
        g_preempt_default = false;
        assert_int_equal(setup_yaml(&st, QUEUES_YAML), 0);
        fx_t *f = st;
        nodes_total(f, "210");
        if (order == 0) { /* quotas first: nothing to move */
            order_quotas(f, KQ_EQ_GROUP_UPSTREAM);
            order_quotas(f, KQ_EQ_GROUP_KOORD);
            order_pods(f);
        } else if (order == 1) { /* the pod list answered first (issue 38, item 3) */
            order_pods(f);
            order_quotas(f, KQ_EQ_GROUP_UPSTREAM);
            order_quotas(f, KQ_EQ_GROUP_KOORD);
        } else { /* the pods between the two groups' lists */
            order_quotas(f, KQ_EQ_GROUP_KOORD);
            order_pods(f);
            order_quotas(f, KQ_EQ_GROUP_UPSTREAM);
        }
        int64_t got[ORDER_GROUPS][3];
        order_tree(f, got);
        for (int i = 0; i < ORDER_GROUPS; i++) {
            for (int k = 0; k < 3; k++) {
                if (want[i][k] == -2)
                    continue;
                if (got[i][k] != want[i][k])
                    fail_msg("order %d: group %s %s = %lld, want %lld", order, order_groups[i],
                             k == 0 ? "used" : k == 1 ? "request" : "runtime", (long long)got[i][k],
                             (long long)want[i][k]);
            }
        }
        teardown(&st);
    }
}

/* During a list, pods wait for the list's end to move (one walk per list): a quota listed
 * while a pod is known does not move the pod before kq_elastic_quotas_list_end. */
static void test_reresolve_waits_for_list_end(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "20");
    kq_pod_t a1 = mk("a1", "a", "root.default", CPU(2), "n1");
    kq_ledger_observe(f->app.ledger, &a1);
    kq_elastic_quotas_list_begin(f->e, KQ_EQ_GROUP_UPSTREAM);
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"qa\","
                          "\"namespace\":\"a\"},\"spec\":{\"min\":{\"cpu\":\"4\"},\"max\":{\"cpu\":\"6\"}}}");
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), CPU(2));
    assert_int_equal(used(f, "a/qa"), 0);
    kq_elastic_quotas_list_end(f->e, KQ_EQ_GROUP_UPSTREAM);
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    assert_int_equal(used(f, "a/qa"), CPU(2));
    /* a later watch event moves at once: the quota's namespace binding is lost when a
     * Koordinator quota named like the namespace takes it (rank 0 beats scheduler-plugins) */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"a\","
                          "\"namespace\":\"a\"},\"spec\":{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"3\"}}}");
    assert_int_equal(used(f, "a/qa"), 0);
    assert_int_equal(used(f, "a"), CPU(2));
    kq_ledger_remove(f->app.ledger, "a1");
    assert_int_equal(used(f, "a"), 0);
    assert_int_equal(used(f, KQ_QTREE_ROOT), 0);
    kq_pod_clear(&a1);
}

static int g_hook_calls;
static void count_hook(void *ud)
{
    (void)ud;
    g_hook_calls++;
}

/* kq_ledger_reresolve itself: it says how many pods moved; a non-preemptible pod's
 * non-preemptible used moves with its used; the pod counts (pods, pods_used) follow; the
 * release hook (requeue's poke) is called once per re-resolution that moved something and
 * not for one that moved nothing. */
static void test_reresolve_moves_everything(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "20");
    kq_ledger_set_release_hook(f->app.ledger, count_hook, NULL);
    g_hook_calls = 0;
    kq_pod_t n = mk("np", "m", "root.default", CPU(2), "n1");
    n.preemptible = false;
    kq_ledger_observe(f->app.ledger, &n);
    kq_pod_t w = mk("w", "m", "root.default", CPU(1), NULL);
    kq_ledger_observe(f->app.ledger, &w);
    assert_int_equal(kq_ledger_reresolve(f->app.ledger), 0); /* nothing changed */
    assert_int_equal(g_hook_calls, 0);
    /* a Koordinator quota named like namespace m, created with no re-resolution (as a
     * list does), then one re-resolution moves both */
    kq_elastic_quotas_list_begin(f->e, KQ_EQ_GROUP_KOORD);
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"m\","
                          "\"namespace\":\"m\"},\"spec\":{\"min\":{\"cpu\":\"4\"},\"max\":{\"cpu\":\"8\"}}}");
    assert_int_equal(kq_ledger_reresolve(f->app.ledger), 2);
    assert_int_equal(g_hook_calls, 1);
    kq_qgroup_info_t m = info(f, "m"), d = info(f, KQ_QTREE_DEFAULT);
    assert_int_equal(cpu_of(&m.used), CPU(2));
    assert_int_equal(cpu_of(&m.used_nonpreemptible), CPU(2));
    assert_int_equal(cpu_of(&m.request), CPU(3));
    assert_int_equal(m.pods, 2);
    assert_int_equal(m.pods_used, 1);
    assert_int_equal(cpu_of(&d.used), 0);
    assert_int_equal(cpu_of(&d.used_nonpreemptible), 0);
    assert_int_equal(d.pods, 0);
    assert_int_equal(d.pods_used, 0);
    kq_elastic_quotas_list_end(f->e, KQ_EQ_GROUP_KOORD); /* nothing left to move */
    assert_int_equal(g_hook_calls, 1);
    kq_ledger_remove(f->app.ledger, "np");
    kq_ledger_remove(f->app.ledger, "w");
    m = info(f, "m");
    assert_int_equal(cpu_of(&m.used), 0);
    assert_int_equal(cpu_of(&m.used_nonpreemptible), 0);
    assert_int_equal(cpu_of(&m.request), 0);
    kq_ledger_set_release_hook(f->app.ledger, NULL, NULL);
    kq_pod_clear(&n);
    kq_pod_clear(&w);
}

static kq_pod_t bound(fx_t *f, const char *uid, const char *queue, int64_t cpu, int32_t prio, int64_t created,
                      bool preemptible)
{
    kq_pod_t p = mk(uid, "x", queue, cpu, "n1");
    p.priority = prio;
    p.created = created;
    p.preemptible = preemptible;
    kq_ledger_observe(f->app.ledger, &p);
    return p;
}

/* Reclaim evicts the smallest set (Koordinator's assign-back, koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/quota_overuse_revoke.go getToRevokePodList), and
 * skips pods younger than --reclaim-min-runtime (this fixture: one hour). */
static void test_reclaim_smallest_set(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "10");
    int64_t now_s = (int64_t)time(NULL);
    kq_pod_t a[5];
    a[0] = bound(f, "np", "root.team-a", CPU(3), 0, 100, false);
    a[1] = bound(f, "p1", "root.team-a", CPU(1), 1, 100, true);
    a[2] = bound(f, "p2", "root.team-a", CPU(1), 2, 100, true);
    a[3] = bound(f, "p3", "root.team-a", CPU(3), 3, 100, true);
    a[4] = bound(f, "young", "root.team-a", CPU(1), 0, now_s - 10, true); /* 10 s old */
    kq_pod_t b = mk("b", "x", "root.team-b", CPU(4), NULL);
    kq_ledger_observe(f->app.ledger, &b);
    /* team-a uses 3+1+1+3+1 = 9; runtime 10 - team-b 4 - team-c 1 = 5: over by 4 */
    assert_int_equal(runtime(f, "root.team-a"), CPU(5));
    assert_int_equal(kq_elastic_reclaim_once(f->e, 1000), 0);
    /* Lowest priority first: young (prio 0) is too young, np never; p1, p2, p3 are taken
     * (1 + 1 + 3 = 5 >= 4, 1 spare); given back from the highest: p3 (3) cannot go back
     * (spare 1), p2 (1) can (spare 0), p1 then cannot: p1 and p3 are evicted, not p2. */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 7000), 2);
    assert_int_equal(f->n_calls, 2);
    assert_string_equal(f->calls[0].uid, "p1");
    assert_string_equal(f->calls[1].uid, "p3");
    for (int i = 0; i < 5; i++) {
        kq_ledger_remove(f->app.ledger, a[i].uid);
        kq_pod_clear(&a[i]);
    }
    kq_ledger_remove(f->app.ledger, "b");
    kq_pod_clear(&b);
}

/* Reclaim per source (--reclaim-sources). Koordinator's revoke controller runs only with
 * monitorAllQuotas (default false) and then revokes after delayEvictTime (default 120 s),
 * waiting that long again after each revoke (koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/quota_overuse_revoke.go Start and
 * QuotaOverUsedGroupMonitor.monitor; pkg/scheduler/apis/config/v1/defaults.go). team (min
 * 2) borrows: 6 used; other asks its min 6 back: team's runtime 2, over by 4. */
static const char PLAIN_YAML[] = "partitions:\n  - name: default\n    queues:\n      - name: root\n"
                                 "        queues:\n          - name: default\n";

#define KOORD_EQ(name, min, max)                                                                              \
    "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"" \
    name "\"},\"spec\":{\"min\":{\"cpu\":\"" min "\"},\"max\":{\"cpu\":\"" max "\"}}}"

static void koord_over(fx_t *f, kq_pod_t *t, kq_pod_t *o)
{
    nodes_total(f, "8");
    eq(f, KQ_WATCH_ADDED, KOORD_EQ("team", "2", "8"));
    eq(f, KQ_WATCH_ADDED, KOORD_EQ("other", "6", "8"));
    for (int i = 0; i < 3; i++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "t%d", i + 1);
        t[i] = mk(uid, "team", "root.default", CPU(2), "n1");
        t[i].priority = i + 1;
        t[i].created = 100;
        kq_ledger_observe(f->app.ledger, &t[i]);
    }
    *o = mk("o1", "other", "root.default", CPU(6), NULL);
    kq_ledger_observe(f->app.ledger, o);
    assert_int_equal(used(f, "team"), CPU(6));
    assert_int_equal(runtime(f, "team"), CPU(2));
}

static void test_reclaim_sources(void **state)
{
    (void)state;
    unsigned v = 0;
    char err[256];
    assert_int_equal(kq_reclaim_parse_sources("queues,koordinator", &v, err, sizeof(err)), 0);
    assert_int_equal(v, KQ_RECLAIM_QUEUES | KQ_RECLAIM_KOORD);
    assert_int_equal(kq_reclaim_parse_sources("none", &v, err, sizeof(err)), 0);
    assert_int_equal(v, 0);
    assert_int_equal(kq_reclaim_parse_sources("", &v, err, sizeof(err)), 0);
    assert_int_equal(v, 0);
    assert_int_equal(kq_reclaim_parse_sources("scheduler-plugins", &v, err, sizeof(err)), 0);
    assert_int_equal(v, KQ_RECLAIM_UPSTREAM);
    assert_int_equal(kq_reclaim_parse_sources("queues,yunikorn", &v, err, sizeof(err)), KQ_EINVAL);
    assert_non_null(strstr(err, "yunikorn"));
    kq_elastic_opts_t o;
    kq_elastic_opts_default(&o);
    assert_int_equal(o.reclaim_sources, KQ_RECLAIM_QUEUES); /* neither peer reclaims by default */
    assert_int_equal(o.koord_delay_ms, 120000);

    /* default: Koordinator's quotas are never reclaimed, however long they stay over */
    void *st = NULL;
    assert_int_equal(setup_yaml(&st, PLAIN_YAML), 0);
    fx_t *f = st;
    kq_pod_t t[3], p;
    koord_over(f, t, &p);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 1000), 0);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 3600 * 1000), 0);
    assert_int_equal(f->n_calls, 0);
    for (int i = 0; i < 3; i++) {
        kq_ledger_remove(f->app.ledger, t[i].uid);
        kq_pod_clear(&t[i]);
    }
    kq_ledger_remove(f->app.ledger, "o1");
    kq_pod_clear(&p);
    teardown(&st);

    /* on: after Koordinator's default delay (120 s), the two lowest pods go */
    g_sources = KQ_RECLAIM_DEFAULT | KQ_RECLAIM_KOORD;
    assert_int_equal(setup_yaml(&st, PLAIN_YAML), 0);
    f = st;
    koord_over(f, t, &p);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 1000), 0);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 120999), 0);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 121000), 2);
    assert_string_equal(f->calls[0].uid, "t1");
    assert_string_equal(f->calls[1].uid, "t2");
    /* t1 and t2 are still going (counted); t4 arrives and team is over again, by 2 beyond
     * the evictions under way. Koordinator's monitor started its clock again at the revoke:
     * the next one is a whole delay later (241 000), not at once */
    kq_pod_t t4 = mk("t4", "team", "root.default", CPU(2), "n1");
    t4.priority = 9;
    t4.created = 100;
    kq_ledger_observe(f->app.ledger, &t4);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 122000), 0);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 240999), 0);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 241000), 1);
    assert_string_equal(f->calls[2].uid, "t3");
    for (int i = 0; i < 3; i++) {
        kq_ledger_remove(f->app.ledger, t[i].uid);
        kq_pod_clear(&t[i]);
    }
    kq_ledger_remove(f->app.ledger, "t4");
    kq_pod_clear(&t4);
    kq_ledger_remove(f->app.ledger, "o1");
    kq_pod_clear(&p);
    teardown(&st);

    /* none: even a queue borrowing its neighbour's min keeps its pods */
    g_sources = 0;
    assert_int_equal(setup_yaml(&st, QUEUES_YAML), 0);
    f = st;
    nodes_total(f, "10");
    kq_pod_t a = bound(f, "a", "root.team-a", CPU(9), 0, 100, true);
    kq_pod_t b = mk("b", "x", "root.team-b", CPU(4), NULL);
    kq_ledger_observe(f->app.ledger, &b);
    assert_int_equal(runtime(f, "root.team-a"), CPU(5));
    assert_int_equal(kq_elastic_reclaim_once(f->e, 1000), 0);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 3600 * 1000), 0);
    assert_int_equal(f->n_calls, 0);
    kq_ledger_remove(f->app.ledger, "a");
    kq_ledger_remove(f->app.ledger, "b");
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    teardown(&st);
}

/* A pod without a queue (none named, none configured for it) is admitted in the root queue
 * when an ElasticQuota group governs it (issue 27: Koordinator has no queues), and held to
 * that group; not when it named a queue, an ACL refused it, or it falls to the default group. */
static void test_queueless_pod_of_a_quota(void **state)
{
    (void)state;
    void *st = NULL;
    assert_int_equal(setup_yaml(&st, PLAIN_YAML), 0);
    fx_t *f = st;
    nodes_total(f, "8");
    /* the quota lists the pods' namespace (issue 37: a pod names only a quota governing it) */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"ml\","
                          "\"namespace\":\"ml\",\"annotations\":{\"quota.scheduling.koordinator.sh/namespaces\":"
                          "\"[\\\"elsewhere\\\"]\"}},\"spec\":{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"2\"}}}");
    char why[512];
    kq_pod_t p[5];
    for (int i = 0; i < 5; i++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "p%d", i);
        p[i] = mk(uid, "elsewhere", NULL, CPU(1), NULL);
        p[i].queue_error = strdup("no queue named for the pod, and neither root.elsewhere nor root.default is a "
                                  "leaf queue");
        p[i].queue_denial = KQ_DENIAL_QUEUE_NOT_LEAF;
        p[i].quota_name = strdup("ml");
        if (i < 3)
            kq_ledger_observe(f->app.ledger, &p[i]); /* pending: their requests enter ml's */
    }
    assert_int_equal(kq_ledger_check(f->app.ledger, &p[0], why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ledger_assume(f->app.ledger, &p[0], why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ledger_assume(f->app.ledger, &p[1], why, sizeof(why), NULL), 0);
    assert_int_equal(used(f, "ml"), CPU(2));
    /* held to the quota: max 2 */
    assert_int_equal(kq_ledger_assume(f->app.ledger, &p[2], why, sizeof(why), NULL), KQ_EDENIED);
    assert_non_null(strstr(why, "quota group ml"));
    /* named a queue that does not exist, refused by an ACL, or no quota: no queue, refused */
    p[3].queue_named = true;
    assert_int_equal(kq_ledger_assume(f->app.ledger, &p[3], why, sizeof(why), NULL), KQ_EDENIED);
    assert_non_null(strstr(why, "no queue named"));
    p[3].queue_named = false;
    p[3].queue_denial = KQ_DENIAL_ACL;
    assert_int_equal(kq_ledger_check(f->app.ledger, &p[3], why, sizeof(why), NULL), KQ_EDENIED);
    free(p[4].quota_name);
    p[4].quota_name = strdup("nope");
    assert_int_equal(kq_ledger_assume(f->app.ledger, &p[4], why, sizeof(why), NULL), KQ_EDENIED);
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    for (int i = 0; i < 5; i++) {
        kq_ledger_remove(f->app.ledger, p[i].uid);
        kq_pod_clear(&p[i]);
    }
    assert_int_equal(used(f, "ml"), 0);
    teardown(&st);
}

/* A queue using more than its resources.max (a lowered max) is never evicted unless the
 * partition enables quota preemption and the queue has a delay, and then only after that
 * delay (YuniKorn: apache/yunikorn-core pkg/scheduler/objects/queue.go setPreemptionTime;
 * configs/configvalidator.go: quota.preemption.delay, default 0 = no quota preemption). */
static size_t over_max_evictions(const char *preemption, const char *delay, int64_t at_ms)
{
    char yaml[1024];
    snprintf(yaml, sizeof(yaml),
             "partitions:\n  - name: default\n%s    queues:\n      - name: root\n        queues:\n"
             "          - name: q\n            resources:\n              max: {vcore: 2}\n%s",
             preemption, delay);
    void *state = NULL;
    assert_int_equal(setup_yaml(&state, yaml), 0);
    fx_t *f = state;
    nodes_total(f, "10");
    kq_pod_t a = bound(f, "qa", "root.q", CPU(2), 0, 100, true);
    kq_pod_t b = bound(f, "qb", "root.q", CPU(2), 1, 100, true); /* 4 used, max 2: over by 2 */
    size_t done = kq_elastic_reclaim_once(f->e, 1000);
    done += kq_elastic_reclaim_once(f->e, at_ms - 1);
    assert_int_equal(done, 0); /* never before the delay */
    done += kq_elastic_reclaim_once(f->e, at_ms);
    kq_ledger_remove(f->app.ledger, "qa");
    kq_ledger_remove(f->app.ledger, "qb");
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    teardown(&state);
    return done;
}

static void test_lowered_max_needs_quota_preemption(void **state)
{
    (void)state;
    static const char delay30[] = "            properties:\n              quota.preemption.delay: 30s\n";
    static const char on[] = "    preemption:\n      quotapreemptionenabled: true\n";
    /* off (the default): never, however long (the reclaim grace is 5 s) */
    assert_int_equal(over_max_evictions("", delay30, 1000000), 0);
    /* on, but no delay on the queue: YuniKorn's default delay 0 means no quota preemption */
    assert_int_equal(over_max_evictions(on, "", 1000000), 0);
    /* on with a 30 s delay: nothing at 30 999 ms (over since 1000), one pod at 31 000 */
    assert_int_equal(over_max_evictions(on, delay30, 31000), 1);
}

/* The preempt verb's node list after narrowing: kept node names and the victims of one. */
static json_t *preempt(fx_t *f, const char *pre_uid, const char *queue, int cpu, int prio, const char *victims_json)
{
    char body[2048];
    snprintf(body, sizeof body,
             "{\"Pod\":{\"metadata\":{\"name\":\"%s\",\"namespace\":\"x\",\"uid\":\"%s\",\"labels\":{%s%s%s}},"
             "\"spec\":{\"schedulerName\":\"" OURS "\",\"priority\":%d,\"containers\":[{\"name\":\"c\","
             "\"resources\":{\"requests\":{\"cpu\":\"%d\"}}}]}},\"NodeNameToMetaVictims\":%s}",
             pre_uid, pre_uid, queue ? "\"kubequota.io/queue\":\"" : "", queue ? queue : "", queue ? "\"" : "",
             prio, cpu, victims_json);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(kq_extender_preempt(&f->app, body, strlen(body), &out, &len), 200);
    json_t *r = json_loads(out, 0, NULL);
    free(out);
    json_t *m = json_incref(json_object_get(r, "NodeNameToMetaVictims"));
    json_decref(r);
    assert_non_null(m);
    return m;
}

/* Koordinator's preemption rules (koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/preempt.go: a non-preemptible pod is no victim; the
 * node must fit the preemptor once its victims go). Nodes n1 and n2: 10 cpu each. */
static void test_preempt_rules(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "10");
    node(f, KQ_WATCH_ADDED, "n2", "10", false);
    kq_pod_t np = bound(f, "np", "root.team-a", CPU(3), 1, 1, false); /* non-preemptible */
    kq_pod_t lo = bound(f, "lo", "root.team-a", CPU(1), 1, 1, true);
    kq_pod_t b = bound(f, "b", "root.team-b", CPU(4), 1, 1, true);
    /* on n1: 3 + 1 + 4 = 8 of 10 cpu; team-a used 4 */
    kq_pod_t pre = mk("pre", "x", "root.team-a", CPU(3), NULL);
    pre.priority = 10;
    kq_ledger_observe(f->app.ledger, &pre);
    /* team-a asks 4 + 3 = 7: first 4 (min), team-b 4, team-c 1 (keeps its min); of the 11
     * left team-a takes its 3 more: runtime 7 */
    assert_int_equal(runtime(f, "root.team-a"), CPU(7));
    /* 1. np is never a victim; lo alone frees 1 cpu. A 4-cpu preemptor fits team-a
     * (4 - 1 + 4 = 7 <= 7) but not n1 (8 - 1 + 4 = 11 > 10): n1 is not returned */
    json_t *m = preempt(f, "pre", "root.team-a", 4, 10,
                        "{\"n1\":{\"Pods\":[{\"UID\":\"np\"},{\"UID\":\"lo\"}],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(m), 0);
    json_decref(m);
    /* 2. a 3-cpu preemptor fits both once lo goes: n1 8 - 1 + 3 = 10 <= 10; only lo kept */
    m = preempt(f, "pre", "root.team-a", 3, 10,
                "{\"n1\":{\"Pods\":[{\"UID\":\"np\"},{\"UID\":\"lo\"}],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(m), 1);
    json_t *pods = json_object_get(json_object_get(m, "n1"), "Pods");
    assert_int_equal(json_array_size(pods), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(pods, 0), "UID")), "lo");
    json_decref(m);
    /* 3. a node kubequota does not know is never returned; a pod counted on another node
     * is no victim on this one */
    m = preempt(f, "pre", "root.team-a", 2, 10, "{\"n9\":{\"Pods\":[{\"UID\":\"lo\"}],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(m), 0);
    json_decref(m);
    /* 4. default-group pods are no victims (unless --preempt-default-group) */
    kq_pod_t d = mk("d", "misc", NULL, CPU(1), "n1");
    d.priority = 1;
    kq_ledger_observe(f->app.ledger, &d);
    kq_pod_t dpre = mk("dpre", "misc", NULL, CPU(1), NULL);
    dpre.priority = 10;
    kq_ledger_observe(f->app.ledger, &dpre);
    char g[KQ_QTREE_NAME_MAX + 1];
    assert_int_equal(kq_resolve_pod(kq_elastic_resolver(f->e), &d, g, sizeof g), 0);
    assert_string_equal(g, KQ_QTREE_DEFAULT);
    m = preempt(f, "dpre", NULL, 1, 10, "{\"n1\":{\"Pods\":[{\"UID\":\"d\"}],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(m), 0);
    json_decref(m);
    const char *ids[] = {"np", "lo", "b", "pre", "d", "dpre"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        kq_ledger_remove(f->app.ledger, ids[i]);
    kq_pod_clear(&np);
    kq_pod_clear(&lo);
    kq_pod_clear(&b);
    kq_pod_clear(&pre);
    kq_pod_clear(&d);
    kq_pod_clear(&dpre);
}

/* --preempt-default-group: default-group pods may then be victims of a default-group
 * preemptor of higher priority (the node has room once the victim goes). */
static void test_preempt_default_configured(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "10");
    kq_pod_t d = mk("d", "misc", NULL, CPU(1), "n1");
    d.priority = 1;
    kq_ledger_observe(f->app.ledger, &d);
    kq_pod_t dpre = mk("dpre", "misc", NULL, CPU(1), NULL);
    dpre.priority = 10;
    kq_ledger_observe(f->app.ledger, &dpre);
    json_t *m = preempt(f, "dpre", NULL, 1, 10, "{\"n1\":{\"Pods\":[{\"UID\":\"d\"}],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(m), 1);
    json_decref(m);
    kq_ledger_remove(f->app.ledger, "d");
    kq_ledger_remove(f->app.ledger, "dpre");
    kq_pod_clear(&d);
    kq_pod_clear(&dpre);
}

/* A borrows B's idle min; B's pods arrive; A's runtime drops; after the grace period A's
 * pods are evicted, lowest priority first, then youngest; never a non-preemptible one. */
static void test_reclaim(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "10"); /* mins 4+4+1+1 = 10: no scaling */
    kq_pod_t a[5];
    a[0] = bound(f, "a-np", "root.team-a", CPU(1), 0, 100, false); /* non-preemptible, within min */
    a[1] = bound(f, "a-old-low", "root.team-a", CPU(2), 1, 100, true);
    a[2] = bound(f, "a-young-low", "root.team-a", CPU(2), 1, 200, true);
    a[3] = bound(f, "a-high", "root.team-a", CPU(2), 10, 50, true);
    a[4] = bound(f, "a-mid", "root.team-a", CPU(1), 5, 300, true);
    /* team-a uses 8 (min 4, borrowing team-b's idle 4); team-c keeps 1, child idle */
    assert_int_equal(runtime(f, "root.team-a"), CPU(8));
    assert_int_equal(kq_elastic_reclaim_once(f->e, 1000), 0);
    /* team-b's pods arrive: 3 cpu pending */
    kq_pod_t b = mk("b", "x", "root.team-b", CPU(3), NULL);
    kq_ledger_observe(f->app.ledger, &b);
    /* 10: team-b 3, team-c 1, child 0 (idle, lends), team-a min 4 + the rest 2 = 6 */
    assert_int_equal(runtime(f, "root.team-a"), CPU(6));
    char why[512];
    assert_int_equal(kq_ledger_check(f->app.ledger, &b, why, sizeof(why), NULL), KQ_EDENIED); /* 8+3 > 10 at root */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 2000), 0); /* over by 2 since t=2000 */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 6999), 0); /* grace 5000 not over */
    assert_int_equal(f->n_calls, 0);
    /* after the grace period: lowest priority (1), youngest first: a-young-low (2 cpu)
     * covers the 2 that are over */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 7000), 1);
    assert_int_equal(f->n_calls, 1);
    assert_string_equal(f->calls[0].uid, "a-young-low");
    /* in flight: not evicted again, nobody else either */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 8000), 0);
    assert_int_equal(f->n_calls, 1);
    /* the watch reports it gone; team-b binds */
    kq_ledger_remove(f->app.ledger, "a-young-low");
    assert_int_equal(kq_ledger_assume(f->app.ledger, &b, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 9000), 0);
    /* team-b wants 4 more: A must shrink to 4 cpu, i.e. lose 2 of its 6: a-old-low (prio 1)
     * then the mid one would be next; a-np is never chosen */
    kq_pod_t b2 = mk("b2", "x", "root.team-b", CPU(1), NULL);
    kq_ledger_observe(f->app.ledger, &b2);
    kq_pod_t b3 = mk("b3", "x", "root.team-b", CPU(1), NULL);
    kq_ledger_observe(f->app.ledger, &b3);
    /* team-b asks 5 > min 4: team-a and team-b share what is left by weight 1:1 */
    assert_int_equal(runtime(f, "root.team-a"), 4500);
    assert_int_equal(kq_elastic_reclaim_once(f->e, 10000), 0);
    f->evict_rc = KQ_ECONFLICT; /* a PDB refuses (429): that pod is set aside, another is chosen */
    /* over by 1.5: the plan is a-old-low (prio 1, 2 cpu, covers it): refused. Planned again
     * without it: a-mid (prio 5, 1 cpu) then a-high (prio 10, 2) are taken to cover 1.5;
     * giving back from the highest priority, a-high must go (2 taken back would leave 1.5
     * uncovered) but a-mid can stay (3 - 1.5 = 1.5 spare >= its 1): the smallest set is
     * a-high alone: refused. Planned again: a-mid alone cannot cover it, so it is evicted
     * as far as it goes (Koordinator evicts all it took then): refused. Each pod is asked
     * once: no loop. */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 15000), 0);
    assert_int_equal(f->n_calls, 4);
    assert_string_equal(f->calls[1].uid, "a-old-low");
    assert_string_equal(f->calls[2].uid, "a-high");
    assert_string_equal(f->calls[3].uid, "a-mid");
    unsigned long failed = 0;
    assert_int_equal(kq_elastic_evictions(f->e, &failed), 1);
    assert_int_equal(failed, 3);
    f->evict_rc = 0;
    /* refused pods are not asked again for 60 s: nothing to do, and no call */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 16000), 0);
    assert_int_equal(f->n_calls, 4);
    /* then the plan is made afresh: a-old-low's 2 cover 1.5 */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 75000), 1);
    assert_int_equal(f->n_calls, 5);
    assert_string_equal(f->calls[4].uid, "a-old-low");
    /* evicted once, never twice, however long its pod takes to go */
    assert_int_equal(kq_elastic_reclaim_once(f->e, 500000), 0);
    assert_int_equal(f->n_calls, 5);
    for (size_t i = 0; i < f->n_calls; i++)
        assert_string_not_equal(f->calls[i].uid, "a-np");
    for (int i = 0; i < 5; i++) {
        kq_ledger_remove(f->app.ledger, a[i].uid);
        kq_pod_clear(&a[i]);
    }
    kq_ledger_remove(f->app.ledger, "b");
    kq_ledger_remove(f->app.ledger, "b2");
    kq_ledger_remove(f->app.ledger, "b3");
    assert_int_equal(used(f, KQ_QTREE_ROOT), 0);
    assert_int_equal(request(f, "root.team-a"), 0);
    assert_int_equal(request(f, "root.team-b"), 0);
    kq_pod_clear(&b);
    kq_pod_clear(&b2);
    kq_pod_clear(&b3);
}

/* The preempt verb keeps only same-group, lower-priority victims, and only nodes where
 * the group then fits. */
static void test_preempt(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "10");
    kq_pod_t a1 = bound(f, "a1", "root.team-a", CPU(3), 1, 1, true);
    kq_pod_t a2 = bound(f, "a2", "root.team-a", CPU(1), 20, 1, true); /* higher than the preemptor */
    kq_pod_t b1 = bound(f, "b1", "root.team-b", CPU(3), 1, 1, true);
    /* the preemptors are pending pods the watch has shown (the scheduler filtered them) */
    kq_pod_t pre = mk("pre", "x", "root.team-a", CPU(6), NULL);
    pre.priority = 10;
    kq_ledger_observe(f->app.ledger, &pre);
    kq_pod_t pre2 = mk("pre2", "x", "root.team-a", CPU(4), NULL);
    pre2.priority = 10;
    kq_ledger_observe(f->app.ledger, &pre2);
    /* team-a asks 4 used + 10 pending; runtime 10 - team-b 3 - team-c 1 = 6 */
    assert_int_equal(runtime(f, "root.team-a"), CPU(6));
    /* team-a's max is 10; preemptor of team-a, priority 10, 8 cpu: used 4 + 8 > runtime */
    const char *body =
        "{\"Pod\":{\"metadata\":{\"name\":\"pre\",\"namespace\":\"x\",\"uid\":\"pre\","
        "\"labels\":{\"kubequota.io/queue\":\"root.team-a\"}},"
        "\"spec\":{\"schedulerName\":\"" OURS "\",\"priority\":10,\"containers\":[{\"name\":\"c\","
        "\"resources\":{\"requests\":{\"cpu\":\"6\"}}}]}},"
        "\"NodeNameToVictims\":null,\"NodeNameToMetaVictims\":{"
        "\"n1\":{\"Pods\":[{\"UID\":\"a1\"},{\"UID\":\"b1\"},{\"UID\":\"a2\"}],\"NumPDBViolations\":0},"
        "\"n2\":{\"Pods\":[{\"UID\":\"b1\"}],\"NumPDBViolations\":0},"
        "\"n3\":{\"Pods\":[{\"UID\":\"a2\"}],\"NumPDBViolations\":0}}}";
    char *out = NULL;
    size_t len = 0;
    /* without victims 4 + 6 > 6; with a1 (3): 1 + 6 > 6 */
    int st = kq_extender_preempt(&f->app, body, strlen(body), &out, &len);
    assert_int_equal(st, 200);
    json_t *r = json_loads(out, 0, NULL);
    free(out);
    json_t *m = json_object_get(r, "NodeNameToMetaVictims");
    assert_non_null(m);
    assert_int_equal(json_object_size(m), 0); /* n1: a1 alone is not enough; n2, n3: no own victim */
    json_decref(r);
    /* with less asked (4 cpu): n1 with a1 only fits: 4 - 3 + 4 = 5 <= 6 */
    const char *body2 =
        "{\"Pod\":{\"metadata\":{\"name\":\"pre2\",\"namespace\":\"x\",\"uid\":\"pre2\","
        "\"labels\":{\"kubequota.io/queue\":\"root.team-a\"}},"
        "\"spec\":{\"schedulerName\":\"" OURS "\",\"priority\":10,\"containers\":[{\"name\":\"c\","
        "\"resources\":{\"requests\":{\"cpu\":\"4\"}}}]}},"
        "\"NodeNameToMetaVictims\":{"
        "\"n1\":{\"Pods\":[{\"UID\":\"a1\"},{\"UID\":\"b1\"},{\"UID\":\"a2\"}],\"NumPDBViolations\":0},"
        "\"n2\":{\"Pods\":[{\"UID\":\"b1\"}],\"NumPDBViolations\":0}}}";
    st = kq_extender_preempt(&f->app, body2, strlen(body2), &out, &len);
    assert_int_equal(st, 200);
    r = json_loads(out, 0, NULL);
    free(out);
    m = json_object_get(r, "NodeNameToMetaVictims");
    assert_int_equal(json_object_size(m), 1);
    json_t *pods = json_object_get(json_object_get(m, "n1"), "Pods");
    assert_int_equal(json_array_size(pods), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(pods, 0), "UID")), "a1");
    json_decref(r);
    kq_ledger_remove(f->app.ledger, "a1");
    kq_ledger_remove(f->app.ledger, "a2");
    kq_ledger_remove(f->app.ledger, "b1");
    kq_ledger_remove(f->app.ledger, "pre");
    kq_ledger_remove(f->app.ledger, "pre2");
    assert_int_equal(used(f, KQ_QTREE_ROOT), 0);
    assert_int_equal(request(f, "root.team-a"), 0);
    kq_pod_clear(&a1);
    kq_pod_clear(&a2);
    kq_pod_clear(&b1);
    kq_pod_clear(&pre);
    kq_pod_clear(&pre2);
}

/* The filter verb's answer for a pod of team-a (1 cpu) on nodes n1 and n2: the node names
 * it gives back. */
static json_t *filter_nodes(fx_t *f, const char *uid, int prio)
{
    char body[2048];
    snprintf(body, sizeof body,
             "{\"Pod\":{\"metadata\":{\"name\":\"%s\",\"namespace\":\"x\",\"uid\":\"%s\",\"labels\":"
             "{\"kubequota.io/queue\":\"root.team-a\"}},\"spec\":{\"schedulerName\":\"" OURS "\",\"priority\":%d,"
             "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]}},"
             "\"NodeNames\":[\"n1\",\"n2\"]}",
             uid, uid, prio);
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(kq_extender_filter(&f->app, body, strlen(body), &out, &len), 200);
    json_t *r = json_loads(out, 0, NULL);
    free(out);
    assert_non_null(r);
    json_t *names = json_incref(json_object_get(r, "NodeNames"));
    /* every node not given back is a FailedNode (preemption may help), never unresolvable */
    assert_int_equal(json_array_size(names) + json_object_size(json_object_get(r, "FailedNodes")), 2);
    assert_int_equal(json_object_size(json_object_get(r, "FailedAndUnresolvableNodes")), 0);
    json_decref(r);
    return names;
}

/* kube-scheduler deletes the victims of a preemption asynchronously and retries the
 * preemptor at once (the real-cluster tier's a-high): until the watch shows the victim
 * gone, the preemptor (only it) is checked as if its victims on that node were gone.
 * Nodes n1, n2: 5 cpu each, 10 in all; team-c keeps 1. team-b asks 3 (b1), team-a uses 6
 * (a0..a5) and asks 1 more (pre): team-a's runtime = 4 + (9 - 4 - 3) = 6, so pre is denied
 * (6 + 1 > 6) and preempts a4 (n1) or a5 (n2). */
static void test_preempt_inflight(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "5");
    node(f, KQ_WATCH_ADDED, "n2", "5", false);
    kq_pod_t a[6];
    for (int i = 0; i < 6; i++) {
        char uid[16];
        snprintf(uid, sizeof uid, "a%d", i);
        a[i] = bound(f, uid, "root.team-a", CPU(1), 1, 1, true);
        if (i == 5) {
            set_node(&a[i], "n2");
            kq_ledger_observe(f->app.ledger, &a[i]);
        }
    }
    kq_pod_t b1 = bound(f, "b1", "root.team-b", CPU(3), 1, 1, true);
    set_node(&b1, "n2");
    kq_ledger_observe(f->app.ledger, &b1);
    kq_pod_t pre = mk("pre", "x", "root.team-a", CPU(1), NULL);
    pre.priority = 10;
    kq_ledger_observe(f->app.ledger, &pre);
    kq_pod_t other = mk("other", "x", "root.team-a", CPU(1), NULL); /* same group and priority */
    other.priority = 10;
    kq_ledger_observe(f->app.ledger, &other);
    assert_int_equal(runtime(f, "root.team-a"), CPU(6));
    assert_int_equal(used(f, "root.team-a"), CPU(6));
    char why[512];
    json_t *names = filter_nodes(f, "pre", 10);
    assert_int_equal(json_array_size(names), 0);
    json_decref(names);

    /* the preempt verb keeps a4 on n1 and a5 on n2 and remembers them for pre */
    json_t *m = preempt(f, "pre", "root.team-a", 1, 10,
                        "{\"n1\":{\"Pods\":[{\"UID\":\"a4\"}],\"NumPDBViolations\":0},"
                        "\"n2\":{\"Pods\":[{\"UID\":\"a5\"}],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(m), 2);
    json_decref(m);
    assert_int_equal(kq_ledger_preempt_count(f->app.ledger), 1);
    /* the scheduler deleted a4 (the watch has not shown it yet) and retries pre: the nodes
     * whose own victim is discounted are given back (each node's victims only) */
    names = filter_nodes(f, "pre", 10);
    assert_int_equal(json_array_size(names), 2);
    json_decref(names);
    assert_int_equal(kq_ledger_check_on(f->app.ledger, &pre, "n1", why, sizeof why, NULL, NULL), 0);
    assert_int_equal(kq_ledger_check_on(f->app.ledger, &pre, "n3", why, sizeof why, NULL, NULL), KQ_EDENIED);
    /* the victims still count for every other pod, with or without a node */
    names = filter_nodes(f, "other", 10);
    assert_int_equal(json_array_size(names), 0);
    json_decref(names);
    assert_int_equal(kq_ledger_check_on(f->app.ledger, &other, "n1", why, sizeof why, NULL, NULL), KQ_EDENIED);

    /* bind on n1: counted, with a4 discounted; a4 still counts until it is gone */
    assert_int_equal(kq_ledger_assume_on(f->app.ledger, &pre, "n1", why, sizeof why, NULL), 0);
    assert_int_equal(used(f, "root.team-a"), CPU(7));
    /* a second preemptor offered the same victim: a4 is pre's, so nothing is discounted
     * for it (one release is never spent twice) */
    kq_pod_t pre2 = mk("pre2", "x", "root.team-a", CPU(1), NULL);
    pre2.priority = 10;
    kq_ledger_observe(f->app.ledger, &pre2);
    assert_int_equal(kq_ledger_preempt_note(f->app.ledger, "pre2",
                                            &(kq_ledger_preempt_node_t){.node = "n1",
                                                                        .victims = (const char *[]){"a4"},
                                                                        .n = 1},
                                            1),
                     0);
    assert_int_equal(kq_ledger_check_on(f->app.ledger, &pre2, "n1", why, sizeof why, NULL, NULL), KQ_EDENIED);
    assert_int_equal(kq_ledger_assume_on(f->app.ledger, &pre2, "n1", why, sizeof why, NULL), KQ_EDENIED);
    /* the watch shows a4 gone: released once; team-a uses exactly its runtime */
    kq_ledger_remove(f->app.ledger, "a4");
    assert_int_equal(used(f, "root.team-a"), CPU(6));
    assert_int_equal(kq_ledger_check_on(f->app.ledger, &pre2, "n1", why, sizeof why, NULL, NULL), KQ_EDENIED);
    /* the preemptor deleted: its record goes */
    kq_ledger_remove(f->app.ledger, "pre");
    kq_ledger_remove(f->app.ledger, "pre2");
    assert_int_equal(kq_ledger_preempt_count(f->app.ledger), 0);

    /* a preemption that never deletes its victim: discounted only until the record expires */
    kq_pod_t pre3 = mk("pre3", "x", "root.team-a", CPU(2), NULL);
    pre3.priority = 10;
    kq_ledger_observe(f->app.ledger, &pre3);
    /* team-a: 5 used (a0..a3, a5) + 2 > runtime 6; with a5 gone 4 + 2 <= 6 */
    m = preempt(f, "pre3", "root.team-a", 2, 10, "{\"n2\":{\"Pods\":[{\"UID\":\"a5\"}],\"NumPDBViolations\":0}}");
    assert_int_equal(json_object_size(m), 1);
    json_decref(m);
    assert_int_equal(kq_ledger_check_on(f->app.ledger, &pre3, "n2", why, sizeof why, NULL, NULL), 0);
    kq_ledger_set_preempt_ttl_ms(f->app.ledger, 0);
    m = preempt(f, "pre3", "root.team-a", 2, 10, "{\"n2\":{\"Pods\":[{\"UID\":\"a5\"}],\"NumPDBViolations\":0}}");
    json_decref(m);
    assert_int_equal(kq_ledger_check_on(f->app.ledger, &pre3, "n2", why, sizeof why, NULL, NULL), KQ_EDENIED);
    assert_int_equal(kq_ledger_assume_on(f->app.ledger, &pre3, "n2", why, sizeof why, NULL), KQ_EDENIED);
    assert_int_equal(kq_ledger_preempt_count(f->app.ledger), 0);

    const char *ids[] = {"a0", "a1", "a2", "a3", "a5", "b1", "other", "pre3"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        kq_ledger_remove(f->app.ledger, ids[i]);
    assert_int_equal(used(f, KQ_QTREE_ROOT), 0);
    assert_int_equal(request(f, "root.team-a"), 0);
    for (int i = 0; i < 6; i++)
        kq_pod_clear(&a[i]);
    kq_pod_clear(&b1);
    kq_pod_clear(&pre);
    kq_pod_clear(&pre2);
    kq_pod_clear(&pre3);
    kq_pod_clear(&other);
}

static int admit(fx_t *f, const char *op, const char *obj, char *msg, size_t len)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{\"uid\":\"u\",\"operation\":\"%s\",\"namespace\":\"ns\",\"kind\":{\"group\":"
             "\"scheduling.sigs.k8s.io\",\"version\":\"v1alpha1\",\"kind\":\"ElasticQuota\"},"
             "\"object\":%s,\"oldObject\":%s}",
             op, strcmp(op, "DELETE") == 0 ? "null" : obj, strcmp(op, "CREATE") == 0 ? "null" : obj);
    json_t *req = json_loads(buf, 0, NULL);
    assert_non_null(req);
    msg[0] = '\0';
    int rc = kq_elastic_validate_admission(f->e, req, msg, len);
    json_decref(req);
    return rc;
}

static void test_admission(void **state)
{
    fx_t *f = *state;
    char msg[1024];
    static const char parent[] = "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"labels\":{"
                                 "\"quota.scheduling.koordinator.sh/is-parent\":\"true\"}},"
                                 "\"spec\":{\"min\":{\"cpu\":\"2\"},\"max\":{\"cpu\":\"4\"}}}";
    if (admit(f, "CREATE", parent, msg, sizeof(msg)) != 0)
        fail_msg("%s", msg);
    assert_int_equal(admit(f, "CREATE", "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"min\":{\"cpu\":\"5\"},"
                                        "\"max\":{\"cpu\":\"4\"}}}", msg, sizeof(msg)), KQ_EDENIED);
    assert_non_null(strstr(msg, "ns/x"));
    assert_non_null(strstr(msg, "max"));
    assert_int_equal(admit(f, "CREATE", "{\"metadata\":{\"name\":\"x\"},\"spec\":{\"min\":{\"cpu\":\"many\"}}}",
                           msg, sizeof(msg)), KQ_EINVAL);
    assert_non_null(strstr(msg, "spec.min"));
    assert_int_equal(admit(f, "CREATE", "{\"metadata\":{\"name\":\"root.team-a\"},\"spec\":{}}", msg,
                           sizeof(msg)), KQ_EDENIED);
    assert_non_null(strstr(msg, "queues.yaml"));
    /* apply the parent, then a child whose min exceeds the parent's */
    char obj[1024];
    snprintf(obj, sizeof(obj), "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",%s", parent + 1);
    eq(f, KQ_WATCH_ADDED, obj);
    static const char child[] = "{\"metadata\":{\"name\":\"c\",\"labels\":{"
                                "\"quota.scheduling.koordinator.sh/parent\":\"p\"}},"
                                "\"spec\":{\"min\":{\"cpu\":\"3\"},\"max\":{\"cpu\":\"4\"}}}";
    assert_int_equal(admit(f, "CREATE", child, msg, sizeof(msg)), KQ_EDENIED);
    assert_non_null(strstr(msg, "min"));
    static const char child_ok[] = "{\"metadata\":{\"name\":\"c\",\"namespace\":\"ns\",\"labels\":{"
                                   "\"quota.scheduling.koordinator.sh/parent\":\"p\"}},"
                                   "\"spec\":{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"4\"}}}";
    assert_int_equal(admit(f, "CREATE", child_ok, msg, sizeof(msg)), 0);
    snprintf(obj, sizeof(obj), "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",%s", child_ok + 1);
    eq(f, KQ_WATCH_ADDED, obj);
    /* the parent cannot be deleted or become a leaf while it has a child */
    assert_int_equal(admit(f, "DELETE", parent, msg, sizeof(msg)), KQ_EDENIED);
    assert_non_null(strstr(msg, "child"));
    assert_int_equal(admit(f, "UPDATE", "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"min\":{\"cpu\":\"2\"}}}", msg,
                           sizeof(msg)), KQ_EDENIED);
    /* a child with a pod cannot become a parent */
    kq_pod_t p = mk("cp", "ns", NULL, CPU(1), "n1");
    p.quota_name = strdup("c");
    kq_ledger_observe(f->app.ledger, &p);
    assert_int_equal(used(f, "c"), CPU(1));
    assert_int_equal(admit(f, "UPDATE", "{\"metadata\":{\"name\":\"c\",\"labels\":{"
                                        "\"quota.scheduling.koordinator.sh/parent\":\"p\","
                                        "\"quota.scheduling.koordinator.sh/is-parent\":\"true\"}},\"spec\":{}}",
                           msg, sizeof(msg)), KQ_EDENIED);
    /* deleting a quota that still has pods is allowed, as Koordinator's ValidDeleteQuota
     * refuses only a quota with child quotas (issue 38, item 5): its pods fall to the
     * default group */
    assert_int_equal(admit(f, "DELETE", child_ok, msg, sizeof(msg)), 0);
    kq_ledger_remove(f->app.ledger, "cp");
    kq_pod_clear(&p);
    assert_int_equal(admit(f, "DELETE", child_ok, msg, sizeof(msg)), 0);
}

static int admit2(fx_t *f, const char *obj, const char *old, char *msg, size_t len)
{
    char buf[4096];
    snprintf(buf, sizeof(buf),
             "{\"uid\":\"u\",\"operation\":\"UPDATE\",\"namespace\":\"ns\",\"kind\":{\"group\":"
             "\"scheduling.sigs.k8s.io\",\"version\":\"v1alpha1\",\"kind\":\"ElasticQuota\"},"
             "\"object\":%s,\"oldObject\":%s}", obj, old);
    json_t *req = json_loads(buf, 0, NULL);
    assert_non_null(req);
    msg[0] = '\0';
    int rc = kq_elastic_validate_admission(f->e, req, msg, len);
    json_decref(req);
    return rc;
}

#define KOORD_OBJ(name, ns, labels, anns, spec)                                                          \
    "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"" name "\",\"namespace\":\"" ns \
    "\",\"labels\":{" labels "},\"annotations\":{" anns "}},\"spec\":" spec "}"
#define L_PARENT(p) "\"quota.scheduling.koordinator.sh/parent\":\"" p "\""
#define L_ISPARENT "\"quota.scheduling.koordinator.sh/is-parent\":\"true\""
#define L_TREE(t) "\"quota.scheduling.koordinator.sh/tree-id\":\"" t "\""

/* Koordinator's webhook rules (koordinator-sh/koordinator
 * pkg/webhook/elasticquota/quota_topology_check.go, validateQuotaSelfItem,
 * checkTreeID, checkSubAndParentGroupQuotaKey, checkMinQuotaValidate with
 * allow-force-update; apis/extension/elastic_quota.go IsForbiddenModify). */
static void test_admission_koord(void **state)
{
    fx_t *f = *state;
    char msg[1024];
    /* min keys must be max keys */
    assert_int_equal(admit(f, "CREATE", KOORD_OBJ("a", "ns", "", "", "{\"min\":{\"cpu\":\"1\",\"memory\":\"1Gi\"},"
                                                  "\"max\":{\"cpu\":\"2\"}}"), msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "memory is in spec.min but not in spec.max"));
    /* max-strict-check-resource-keys: max must cover what is used of those keys */
    assert_int_equal(admit(f, "CREATE",
                           "{\"metadata\":{\"name\":\"s\",\"namespace\":\"ns\",\"annotations\":{"
                           "\"quota.scheduling.koordinator.sh/max-strict-check-resource-keys\":\"[\\\"cpu\\\"]\"}},"
                           "\"spec\":{\"max\":{\"cpu\":\"2\"}},\"status\":{\"used\":{\"cpu\":\"3\"}}}",
                           msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "max-strict-check-resource-keys"));
    /* the built-in quotas cannot be created, changed or deleted; the default one not deleted */
    assert_int_equal(admit(f, "CREATE", KOORD_OBJ("koordinator-system-quota", "kube-system", "", "", "{}"), msg,
                           sizeof msg), KQ_EDENIED);
    assert_int_equal(admit(f, "DELETE", KOORD_OBJ("koordinator-root-quota", "kube-system", "", "", "{}"), msg,
                           sizeof msg), KQ_EDENIED);
    assert_int_equal(admit(f, "DELETE", KOORD_OBJ("koordinator-default-quota", "kube-system", "", "", "{}"), msg,
                           sizeof msg), KQ_EDENIED);
    assert_int_equal(admit(f, "UPDATE", KOORD_OBJ("koordinator-default-quota", "kube-system", "", "",
                                                  "{\"max\":{\"cpu\":\"5\"}}"), msg, sizeof msg), 0);
    /* a tree: parent t (tree-id t1, max cpu+memory), child c */
    eq(f, KQ_WATCH_ADDED, KOORD_OBJ("t", "kube-system", L_ISPARENT "," L_TREE("t1"), "",
                                    "{\"min\":{\"cpu\":\"4\",\"memory\":\"4Gi\"},\"max\":{\"cpu\":\"8\","
                                    "\"memory\":\"8Gi\"}}"));
    /* tree id differs from the parent's */
    assert_int_equal(admit(f, "CREATE", KOORD_OBJ("c", "ns", L_PARENT("t") "," L_TREE("t2"), "",
                                                  "{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"8\",\"memory\":\"8Gi\"}}"),
                           msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "tree id"));
    /* max keys differ from the parent's */
    assert_int_equal(admit(f, "CREATE", KOORD_OBJ("c", "ns", L_PARENT("t") "," L_TREE("t1"), "",
                                                  "{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"8\"}}"),
                           msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "same resources"));
    static const char c_ok[] = KOORD_OBJ("c", "ns", L_PARENT("t") "," L_TREE("t1"),
                                         "\"quota.scheduling.koordinator.sh/namespaces\":\"[\\\"dev\\\"]\"",
                                         "{\"min\":{\"cpu\":\"3\"},\"max\":{\"cpu\":\"8\",\"memory\":\"8Gi\"}}");
    assert_int_equal(admit(f, "CREATE", c_ok, msg, sizeof msg), 0);
    eq(f, KQ_WATCH_ADDED, c_ok);
    /* tree id cannot change */
    static const char c_t2[] = KOORD_OBJ("c", "ns", L_PARENT("t") "," L_TREE("t2"), "",
                                         "{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"8\",\"memory\":\"8Gi\"}}");
    assert_int_equal(admit2(f, c_t2, c_ok, msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "cannot change"));
    /* a second quota binding namespace dev */
    assert_int_equal(admit(f, "CREATE", KOORD_OBJ("d", "ns", "", "\"quota.scheduling.koordinator.sh/namespaces\":"
                                                  "\"[\\\"dev\\\"]\"", "{\"max\":{\"cpu\":\"1\"}}"),
                           msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "namespace dev is already bound to quota c"));
    /* a sibling whose min overflows the parent's min (3 + 2 > 4) is denied, unless forced */
    static const char sib[] = KOORD_OBJ("c2", "ns", L_PARENT("t") "," L_TREE("t1"), "",
                                        "{\"min\":{\"cpu\":\"2\"},\"max\":{\"cpu\":\"8\",\"memory\":\"8Gi\"}}");
    assert_int_equal(admit(f, "CREATE", sib, msg, sizeof msg), KQ_EDENIED);
    static const char sib_forced[] =
        KOORD_OBJ("c2", "ns", L_PARENT("t") "," L_TREE("t1") ",\"quota.scheduling.koordinator.sh/allow-force-update\":"
                  "\"true\"", "", "{\"min\":{\"cpu\":\"2\"},\"max\":{\"cpu\":\"8\",\"memory\":\"8Gi\"}}");
    assert_int_equal(admit(f, "CREATE", sib_forced, msg, sizeof msg), 0);
    eq(f, KQ_WATCH_ADDED, sib_forced);
    assert_true(kq_qtree_lookup(f->qt, "c2", NULL)); /* applied: scaled mins absorb it */
    /* pods (pkg/webhook/elasticquota/pod_check.go): not linked to a parent quota; the
     * preemptible label does not change on an update */
    json_t *pod = json_loads("{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"labels\":{"
                             "\"quota.scheduling.koordinator.sh/name\":\"t\"}}}", 0, NULL);
    assert_int_equal(kq_elastic_check_pod(f->e, pod, NULL, msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "parent quota"));
    json_object_set_new(json_object_get(json_object_get(pod, "metadata"), "labels"),
                        "quota.scheduling.koordinator.sh/name", json_string("c"));
    assert_int_equal(kq_elastic_check_pod(f->e, pod, NULL, msg, sizeof msg), 0);
    json_t *np = json_deep_copy(pod);
    json_object_set_new(json_object_get(json_object_get(np, "metadata"), "labels"),
                        "quota.scheduling.koordinator.sh/preemptible", json_string("false"));
    assert_int_equal(kq_elastic_check_pod(f->e, np, pod, msg, sizeof msg), KQ_EDENIED);
    assert_int_equal(kq_elastic_check_pod(f->e, np, np, msg, sizeof msg), 0);
    json_decref(np);
    json_decref(pod);
}

/* A config reload that drops a queue moves its pods to the default group. */
static void test_reload(void **state)
{
    fx_t *f = *state;
    kq_pod_t p = mk("p", "x", "root.team-b", CPU(2), "n1");
    kq_ledger_observe(f->app.ledger, &p);
    assert_int_equal(used(f, "root.team-b"), CPU(2));
    static const char y2[] = "partitions:\n  - name: default\n    queues:\n      - name: root\n        queues:\n"
                             "          - name: default\n          - name: team-a\n";
    kq_config_t *c2 = NULL;
    kq_diags_t d;
    kq_diags_init(&d);
    assert_int_equal(kq_config_load_buffer(y2, strlen(y2), "y2", &c2, &d), 0);
    kq_diags_free(&d);
    kq_elastic_apply_config(f->e, kq_config_partition(c2, "default"));
    assert_false(kq_qtree_lookup(f->qt, "root.team-b", NULL));
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), CPU(2));
    kq_ledger_remove(f->app.ledger, "p");
    assert_int_equal(used(f, KQ_QTREE_DEFAULT), 0);
    kq_config_unref(c2);
    kq_pod_clear(&p);
}


/* Issue 37 route 2: the label quota.scheduling.koordinator.sh/name names only a quota that
 * governs the pod's namespace. Follows Koordinator's pod webhook test
 * (koordinator-sh/koordinator pkg/webhook/pod/validating/evaluate_quota_test.go
 * TestEvaluateQuota): its "quota not found" case (a label naming no quota is refused with
 * "elastic quota quota2 not found") is kept; its "normal case 1" (a pod of ns1 names quota1
 * of kube-system and is admitted) is refused here unless quota1's namespaces annotation
 * lists ns1: isolation wins (README, "Coming from YuniKorn / Koordinator"). */
static json_t *labelled_pod(const char *ns, const char *quota)
{
    return json_pack("{s:{s:s,s:s,s:{s:s}}}", "metadata", "name", "p", "namespace", ns, "labels",
                     "quota.scheduling.koordinator.sh/name", quota);
}

static int name_verdict(fx_t *f, const char *ns, const char *quota, const char *queue, kq_denial_t *kind)
{
    kq_pod_t p = mk("n", ns, queue, CPU(1), NULL);
    p.quota_name = strdup(quota);
    char why[512] = "";
    int rc = kq_resolve_check_quota_name(kq_elastic_resolver(f->e), &p, why, sizeof(why), kind);
    kq_pod_clear(&p);
    return rc;
}

static void test_quota_name_governs(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "8");
    eq(f, KQ_WATCH_ADDED, KOORD_EQ("tenant-a", "1", "2"));
    eq(f, KQ_WATCH_ADDED, KOORD_EQ("tenant-b", "1", "8"));
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"shared\","
                          "\"namespace\":\"quotas\",\"annotations\":{\"quota.scheduling.koordinator.sh/namespaces\":"
                          "\"[\\\"tenant-c\\\"]\"}},\"spec\":{\"max\":{\"cpu\":\"4\"}}}");
    char msg[512];
    kq_denial_t kind = KQ_DENIAL_COUNT;

    /* another namespace's quota: refused at admission, naming it; not taken by the resolver */
    json_t *pod = labelled_pod("tenant-a", "tenant-b");
    assert_int_equal(kq_elastic_check_pod(f->e, pod, NULL, msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "names quota tenant-b of namespace tenant-b, which does not govern namespace "
                                "tenant-a"));
    json_decref(pod);
    assert_int_equal(name_verdict(f, "tenant-a", "tenant-b", NULL, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_QUOTA_OTHER_NS);
    kq_pod_t a = mk("a1", "tenant-a", NULL, CPU(1), NULL);
    a.quota_name = strdup("tenant-b");
    resolve(f, &a, "tenant-a");
    /* a pod that skipped the webhook and reached the ledger anyway counts in its own quota */
    char why[512];
    assert_int_equal(kq_ledger_assume(f->app.ledger, &a, why, sizeof(why), NULL), 0);
    assert_int_equal(used(f, "tenant-b"), 0);
    assert_int_equal(used(f, "tenant-a"), CPU(1));
    kq_ledger_remove(f->app.ledger, "a1");
    kq_pod_clear(&a);

    /* a name that matches no quota: refused with the name (Koordinator's wording) */
    pod = labelled_pod("tenant-a", "no-such-quota");
    assert_int_equal(kq_elastic_check_pod(f->e, pod, NULL, msg, sizeof msg), KQ_EDENIED);
    assert_non_null(strstr(msg, "elastic quota no-such-quota not found"));
    json_decref(pod);
    assert_int_equal(name_verdict(f, "tenant-a", "no-such-quota", NULL, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_QUOTA_NOT_FOUND);
    /* ... until it is created (in the pod's namespace): then it is the pod's */
    eq(f, KQ_WATCH_ADDED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":"
                          "\"no-such-quota\",\"namespace\":\"tenant-a\"},\"spec\":{\"max\":{\"cpu\":\"1\"}}}");
    assert_int_equal(name_verdict(f, "tenant-a", "no-such-quota", NULL, &kind), 0);

    /* no over-refusal: its own quota, one whose namespaces annotation lists it */
    pod = labelled_pod("tenant-a", "tenant-a");
    assert_int_equal(kq_elastic_check_pod(f->e, pod, NULL, msg, sizeof msg), 0);
    json_decref(pod);
    pod = labelled_pod("tenant-c", "shared");
    assert_int_equal(kq_elastic_check_pod(f->e, pod, NULL, msg, sizeof msg), 0);
    json_decref(pod);
    kq_pod_t c = mk("c1", "tenant-c", NULL, CPU(1), NULL);
    c.quota_name = strdup("shared");
    resolve(f, &c, "shared");
    kq_pod_clear(&c);
    /* ... but the annotation binds only the namespaces it lists */
    assert_int_equal(name_verdict(f, "tenant-b", "shared", NULL, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_QUOTA_OTHER_NS);

    /* the default quota: only for a namespace without a quota of its own */
    assert_int_equal(name_verdict(f, "tenant-a", "koordinator-default-quota", NULL, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_QUOTA_OTHER_NS);
    assert_int_equal(name_verdict(f, "elsewhere", "koordinator-default-quota", NULL, &kind), 0);
    /* a queue's group: only the pod's own queue (unknown at admission: checked at filter) */
    assert_int_equal(name_verdict(f, "tenant-a", "root.team-a", "root.team-b", &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_QUOTA_OTHER_NS);
    assert_int_equal(name_verdict(f, "tenant-a", "root.team-a", "root.team-a", &kind), 0);
    assert_int_equal(name_verdict(f, "tenant-a", "root.team-a", NULL, &kind), 0);
    /* system namespaces are never asked */
    assert_int_equal(name_verdict(f, "kube-system", "tenant-b", NULL, &kind), 0);
    /* removing the other namespace's listing takes the right away */
    eq(f, KQ_WATCH_MODIFIED, "{\"apiVersion\":\"scheduling.sigs.k8s.io/v1alpha1\",\"metadata\":{\"name\":\"shared\","
                             "\"namespace\":\"quotas\"},\"spec\":{\"max\":{\"cpu\":\"4\"}}}");
    assert_int_equal(name_verdict(f, "tenant-c", "shared", NULL, &kind), KQ_EDENIED);
    assert_int_equal(name_verdict(f, "quotas", "shared", NULL, &kind), 0);
}

/* Threads: pods counted, resized and released from several threads while nodes and
 * objects change; at the end every usage is back to zero (run under TSan too). */
typedef struct targ {
    fx_t *f;
    int id;
} targ_t;

static void *pod_thread(void *arg)
{
    targ_t *t = arg;
    char why[512];
    static const char *const queues[] = {"root.team-a", "root.team-b", "root.team-c", "root.org.child"};
    for (int i = 0; i < 300; i++) {
        char uid[32];
        snprintf(uid, sizeof(uid), "t%d-%d", t->id, i);
        kq_pod_t p = mk(uid, i % 5 == 0 ? "eqns" : "x", queues[(i + t->id) % 4], 100 + i % 7, NULL);
        p.preemptible = i % 3 != 0;
        kq_ledger_observe(t->f->app.ledger, &p);
        if (kq_ledger_assume(t->f->app.ledger, &p, why, sizeof(why), NULL) == 0) {
            if (i % 4 == 0) {
                (void)kq_ledger_forget(t->f->app.ledger, uid);
            } else {
                set_node(&p, "n1");
                kq_ledger_observe(t->f->app.ledger, &p);
                if (kq_resource_set(&p.request, "cpu", 50) != 0)
                    abort();
                kq_ledger_observe(t->f->app.ledger, &p);
            }
        }
        kq_ledger_remove(t->f->app.ledger, uid);
        kq_pod_clear(&p);
    }
    return NULL;
}

static void *churn_thread(void *arg)
{
    targ_t *t = arg;
    static const char obj[] = "{\"apiVersion\":\"scheduling.x-k8s.io/v1alpha1\",\"metadata\":{\"name\":\"eq-t\","
                              "\"namespace\":\"eqns\"},\"spec\":{\"min\":{\"cpu\":\"1\"},\"max\":{\"cpu\":\"3\"}}}";
    for (int i = 0; i < 100; i++) {
        node(t->f, KQ_WATCH_MODIFIED, "n1", i % 2 ? "8" : "6", false);
        json_t *o = json_loads(obj, 0, NULL);
        char err[256];
        assert_int_equal(kq_elastic_quota_event(t->f->e, i % 2 ? KQ_WATCH_DELETED : KQ_WATCH_ADDED, o, NULL, err,
                                                sizeof(err)), 0);
        json_decref(o);
        (void)kq_elastic_reclaim_once(t->f->e, i * 1000);
    }
    return NULL;
}

static void test_threads(void **state)
{
    fx_t *f = *state;
    nodes_total(f, "8");
    pthread_t th[4];
    targ_t args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (targ_t){.f = f, .id = i};
        pthread_create(&th[i], NULL, (i == 3 && !getenv("NOCHURN")) ? churn_thread : pod_thread, &args[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    assert_int_equal(kq_ledger_size(f->app.ledger, NULL), 0);
    assert_int_equal(used(f, KQ_QTREE_ROOT), 0);
    /* (the root's request is not 0: team-c, which does not lend, asks its min) */
    static const char *const leaves[] = {"root.team-a", "root.team-b", "root.team-c", "root.org.child", "root.default",
                                         KQ_QTREE_DEFAULT};
    for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
        assert_int_equal(used(f, leaves[i]), 0);
        assert_int_equal(request(f, leaves[i]), 0);
        assert_int_equal(info(f, leaves[i]).pods, 0);
        assert_int_equal(info(f, leaves[i]).pods_used, 0);
    }
    kq_qgroup_info_t r = info(f, KQ_QTREE_ROOT);
    assert_int_equal(cpu_of(&r.used_nonpreemptible), 0);
}

/* ---- ElasticQuotaProfile (multi-tree quotas) ---- */

static void lnode(fx_t *f, const char *name, const char *cpu, const char *labels)
{
    json_t *n = json_pack("{s:{s:s,s:o},s:{s:{s:s}}}", "metadata", "name", name, "labels",
                          json_loads(labels, 0, NULL), "status", "allocatable", "cpu", cpu);
    kq_elastic_node_event(f->e, KQ_WATCH_ADDED, n);
    json_decref(n);
}

static int profile(fx_t *f, const char *name, const char *selector, const char *ratio, char *err, size_t len)
{
    char buf[1024];
    snprintf(buf, sizeof(buf),
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"koordinator-system\"},\"spec\":{\"quotaName\":\"r-%s\""
             "%s%s%s%s%s}}", name, name, selector ? ",\"nodeSelector\":" : "", selector ? selector : "",
             ratio ? ",\"resourceRatio\":\"" : "", ratio ? ratio : "", ratio ? "\"" : "");
    json_t *o = json_loads(buf, 0, NULL);
    assert_non_null(o);
    int rc = kq_elastic_profile_event(f->e, KQ_WATCH_ADDED, o, err, len);
    json_decref(o);
    return rc;
}

/* Node selectors as metav1.LabelSelectorAsSelector builds them (k8s.io/apimachinery
 * pkg/labels/selector.go, Requirement.Matches: NotIn and DoesNotExist match a node without
 * the label; an empty selector selects everything, a nil one nothing), Koordinator's tree id
 * (koordinator-sh/koordinator pkg/quota-controller/profile/profile_controller.go hash():
 * fnv-64a of "namespace/name", here worked out with Python) and resourceRatio
 * (DecorateResourceByResourceRatio: truncated; outside (0, 1] it is 1). Nodes: a (3 cpu,
 * zone a, gpu), b (5 cpu, zone b), c (7 cpu, no labels). */
static void test_profiles(void **state)
{
    fx_t *f = *state;
    char err[512] = "";
    kq_elastic_nodes_list_begin(f->e);
    lnode(f, "a", "3", "{\"zone\":\"a\",\"gpu\":\"yes\"}");
    lnode(f, "b", "5", "{\"zone\":\"b\"}");
    lnode(f, "c", "7", "{}");
    kq_elastic_nodes_list_end(f->e);
    static const struct {
        const char *name, *sel, *ratio;
        int64_t cpu;
    } cases[] = {
        {"in", "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]}]}", NULL, 8000},
        {"notin", "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"a\"]}]}", NULL, 12000},
        {"exists", "{\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"Exists\"}]}", NULL, 3000},
        {"absent", "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"DoesNotExist\"}]}", NULL, 7000},
        {"both", "{\"matchLabels\":{\"zone\":\"a\"},\"matchExpressions\":[{\"key\":\"gpu\",\"operator\":\"In\","
                 "\"values\":[\"no\"]}]}", NULL, 0},
        {"all", "{}", NULL, 15000},
        {"none", NULL, NULL, 0},
        {"third", "{}", "0.333", 4995},
        {"over", "{}", "1.5", 15000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(profile(f, cases[i].name, cases[i].sel, cases[i].ratio, err, sizeof err), 0);
        char g[64];
        snprintf(g, sizeof g, "r-%s", cases[i].name);
        if (max_of(f, g) != cases[i].cpu || min_of(f, g) != cases[i].cpu)
            fail_msg("profile %s: min %lld max %lld, want %lld", cases[i].name, (long long)min_of(f, g),
                     (long long)max_of(f, g), (long long)cases[i].cpu);
    }
    json_t *trees = kq_elastic_trees_json(f->e);
    const char *tid = NULL;
    size_t i;
    json_t *t;
    json_array_foreach(trees, i, t) {
        if (strcmp(json_string_value(json_object_get(t, "profile")), "koordinator-system/in") == 0)
            tid = json_string_value(json_object_get(t, "tree"));
    }
    assert_non_null(tid);
    assert_string_equal(tid, "15482172437487018481"); /* fnv-64a("koordinator-system/in") */
    json_decref(trees);
    /* a bad operator: refused with where and why, nothing changed */
    assert_int_equal(profile(f, "in", "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"Near\","
                                      "\"values\":[\"a\"]}]}", NULL, err, sizeof err), KQ_EPARSE);
    assert_non_null(strstr(err, "ElasticQuotaProfile koordinator-system/in: spec.nodeSelector.matchExpressions[0]"
                                ".operator: \"Near\" is not a valid label selector operator"));
    assert_int_equal(max_of(f, "r-in"), 8000);
    /* In without values is refused as LabelSelectorAsSelector refuses it */
    assert_int_equal(profile(f, "in", "{\"matchExpressions\":[{\"key\":\"zone\",\"operator\":\"In\"}]}", NULL, err,
                             sizeof err), KQ_EPARSE);
    assert_non_null(strstr(err, "values set can't be empty"));
    /* a node leaving zone a leaves tree "in" */
    lnode(f, "a", "3", "{\"gpu\":\"yes\"}");
    assert_int_equal(max_of(f, "r-in"), 5000);
    assert_int_equal(max_of(f, "r-absent"), 10000);
}

int main(void)
{
    kq_log_set_level(getenv("KQ_LOG") ? getenv("KQ_LOG") : "error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_queue_groups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolution, setup, teardown),
        cmocka_unit_test_setup_teardown(test_upstream_per_namespace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_koord_namespaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_and_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unseen_pod_and_parent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pod_before_quota, setup, teardown),
        cmocka_unit_test(test_restart_order),
        cmocka_unit_test_setup_teardown(test_reresolve_waits_for_list_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reresolve_moves_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reclaim, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_inflight, setup, teardown),
        cmocka_unit_test(test_lowered_max_needs_quota_preemption),
        cmocka_unit_test(test_reclaim_sources),
        cmocka_unit_test(test_queueless_pod_of_a_quota),
        cmocka_unit_test_setup_teardown(test_reclaim_smallest_set, setup_minrun, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_default_configured, setup_preempt_default, teardown),
        cmocka_unit_test_setup_teardown(test_preempt_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admission, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admission_koord, setup, teardown),
        cmocka_unit_test_setup_teardown(test_profiles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_quota_name_governs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
