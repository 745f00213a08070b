/* Unit tests for the pod ledger: counted once, released exactly once, whichever path
 * (bind, watch, relist) sees a pod first. Every test reads the engine's own views
 * (queue allocated/pending resources, user usage, tracker counts) and asserts exact
 * numbers worked out by hand. */
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

#include "kubequota/engine/config.h"
#include "kubequota/control/claims.h"
#include "kubequota/control/ledger.h"
#include "kubequota/control/metering.h"
#include "kubequota/kube/claim.h"
#include "kubequota/base/log.h"
#include "kubequota/kube/pod.h"
#include "kubequota/engine/ugm.h"

#include "testutil.h"

#define OURS "kubequota"

static const char QUEUES_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: team-a\n"
    "            resources:\n"
    "              max:\n"
    "                vcore: 1000m\n"
    "          - name: team-b\n";

typedef struct fx {
    kq_config_t *cfg;
    kq_ugm_t *ugm;
    kq_ledger_t *l;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    if ((f->cfg = test_config(QUEUES_YAML)) == NULL)
        return -1;
    f->ugm = kq_ugm_new("default");
    if (f->ugm == NULL || kq_ugm_set_config(f->ugm, f->cfg) != 0)
        return -1;
    f->l = kq_ledger_new(f->ugm, OURS);
    *state = f;
    return f->l ? 0 : -1;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    kq_ledger_free(f->l);
    kq_ugm_free(f->ugm);
    kq_config_unref(f->cfg);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------------ helpers -- */

static kq_pod_t mk(const char *uid, const char *queue, const char *user, int64_t cpu, const char *node)
{
    kq_pod_t p;
    memset(&p, 0, sizeof(p));
    p.uid = strdup(uid);
    p.ns = strdup("ns");
    p.name = strdup(uid);
    p.node = node ? strdup(node) : NULL;
    p.scheduler_name = strdup(OURS);
    p.phase = node ? KQ_POD_RUNNING : KQ_POD_PENDING;
    p.user = strdup(user);
    p.queue = queue ? strdup(queue) : NULL;
    p.queue_error = queue ? NULL : strdup("queue \"root.nope\" does not exist");
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

static int64_t res_value(const json_t *map, const char *res)
{
    const json_t *v = json_object_get(map, res);
    if (v == NULL && strcmp(res, "cpu") == 0)
        v = json_object_get(map, "vcore");
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

/* Finds the queue node for `path` in a queue view; names may be full paths or leaf names. */
static const json_t *find_queue(const json_t *node, const char *parent, const char *path)
{
    if (json_is_array(node)) {
        size_t i;
        const json_t *c;
        json_array_foreach(node, i, c) {
            const json_t *r = find_queue(c, parent, path);
            if (r)
                return r;
        }
        return NULL;
    }
    const char *name = json_string_value(json_object_get(node, "queuename"));
    if (name == NULL)
        name = json_string_value(json_object_get(node, "queuePath"));
    if (name == NULL)
        return NULL;
    char full[512];
    if (parent == NULL || strncmp(name, "root", 4) == 0)
        snprintf(full, sizeof(full), "%s", name);
    else
        snprintf(full, sizeof(full), "%s.%s", parent, name);
    if (strcmp(full, path) == 0)
        return node;
    const json_t *kids = json_object_get(node, "children");
    return kids ? find_queue(kids, full, path) : NULL;
}

/* queues view: field ("allocatedResource", "pendingResource") of queue path, resource. */
static int64_t qres(fx_t *f, const char *path, const char *field, const char *res)
{
    json_t *v = kq_ugm_queues_json(f->ugm);
    assert_non_null(v);
    const json_t *q = find_queue(v, NULL, path);
    if (q == NULL)
        fail_msg("queue %s not in the view", path);
    int64_t r = res_value(json_object_get(q, field), res);
    json_decref(v);
    return r;
}

static int64_t alloc_cpu(fx_t *f, const char *path)
{
    return qres(f, path, "allocatedResource", "cpu");
}

static int64_t pending_cpu(fx_t *f, const char *path)
{
    return qres(f, path, "pendingResource", "cpu");
}

static int64_t running_apps(fx_t *f, const char *path)
{
    json_t *v = kq_ugm_queues_json(f->ugm);
    const json_t *q = find_queue(v, NULL, path);
    assert_non_null(q);
    /* the view's field: "runningApplications" (count or list of ids) or "runningApps" */
    const json_t *ra = json_object_get(q, "runningApplications");
    if (ra == NULL)
        ra = json_object_get(q, "runningApps");
    /* absent: 0 (YuniKorn's DAO omits runningApps when 0) */
    int64_t r = json_is_array(ra) ? (int64_t)json_array_size(ra) : (int64_t)json_integer_value(ra);
    json_decref(v);
    return r;
}

/* A user's total usage (root of their queue tree); -1 when the user has no tracker. */
static int64_t user_cpu(fx_t *f, const char *user)
{
    json_t *v = kq_ugm_user_json(f->ugm, user);
    if (v == NULL)
        return -1;
    const json_t *q = json_object_get(v, "queues");
    int64_t r = res_value(json_object_get(q, "resourceUsage"), "cpu");
    json_decref(v);
    return r;
}

static void expect_size(fx_t *f, size_t known, size_t counted)
{
    size_t c = 99;
    size_t n = kq_ledger_size(f->l, &c);
    if (n != known || c != counted)
        fail_msg("ledger size: want %zu known / %zu counted, got %zu / %zu", known, counted, n, c);
}

static void expect_empty(fx_t *f)
{
    assert_int_equal(alloc_cpu(f, "root"), 0);
    assert_int_equal(pending_cpu(f, "root"), 0);
    assert_int_equal(running_apps(f, "root"), 0);
    assert_int_equal(kq_ugm_user_count(f->ugm), 0);
}

/* -------------------------------------------------------------------------- tests -- */

static void test_assume_then_bound(void **state)
{
    fx_t *f = *state;
    char why[256] = "";
    kq_pod_t p = mk("a", "root.team-a", "alice", 300, NULL);
    assert_int_equal(kq_ledger_assume(f->l, &p, why, sizeof(why), NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    assert_int_equal(alloc_cpu(f, "root"), 300);
    assert_true(kq_ledger_is_counted(f->l, "a"));
    expect_size(f, 1, 1);

    set_node(&p, "n1");
    kq_ledger_observe(f->l, &p); /* the watch confirms: nothing more counted */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    assert_int_equal(running_apps(f, "root"), 1);
    assert_int_equal(user_cpu(f, "alice"), 300);
    kq_ledger_observe(f->l, &p);
    assert_int_equal(kq_ledger_assume(f->l, &p, why, sizeof(why), NULL), 0); /* a retried bind */
    assert_int_equal(alloc_cpu(f, "root"), 300);
    expect_size(f, 1, 1);

    kq_ledger_remove(f->l, "a");
    expect_size(f, 0, 0);
    expect_empty(f);
    kq_pod_clear(&p);
}

static void test_bound_then_assume(void **state)
{
    fx_t *f = *state;
    char why[256] = "";
    kq_pod_t p = mk("a", "root.team-a", "alice", 300, "n1");
    kq_ledger_observe(f->l, &p);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    assert_int_equal(kq_ledger_assume(f->l, &p, why, sizeof(why), NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    expect_size(f, 1, 1);
    /* a bind failure reported late does not release a pod the watch confirmed */
    assert_int_equal(kq_ledger_forget(f->l, "a"), KQ_ENOENT);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    kq_ledger_remove(f->l, "a");
    expect_empty(f);
    kq_pod_clear(&p);
}

static void test_assume_then_forget(void **state)
{
    fx_t *f = *state;
    char why[256] = "";
    kq_pod_t p = mk("a", "root.team-a", "alice", 300, NULL);

    /* known only from the bind: forget releases and forgets */
    assert_int_equal(kq_ledger_assume(f->l, &p, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ledger_forget(f->l, "a"), 0);
    expect_size(f, 0, 0);
    expect_empty(f);
    assert_int_equal(kq_ledger_forget(f->l, "a"), KQ_ENOENT);
    assert_int_equal(kq_ledger_forget(f->l, "never"), KQ_ENOENT);

    /* seen pending by the watch first: pending -> counted -> pending again */
    kq_ledger_observe(f->l, &p);
    assert_int_equal(pending_cpu(f, "root.team-a"), 300);
    assert_int_equal(alloc_cpu(f, "root"), 0);
    expect_size(f, 1, 0);
    assert_int_equal(kq_ledger_assume(f->l, &p, why, sizeof(why), NULL), 0);
    assert_int_equal(pending_cpu(f, "root.team-a"), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    /* the watch lags: still unassigned, the assumption holds */
    kq_ledger_observe(f->l, &p);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    assert_int_equal(pending_cpu(f, "root.team-a"), 0);
    assert_int_equal(kq_ledger_forget(f->l, "a"), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    assert_int_equal(pending_cpu(f, "root.team-a"), 300);
    expect_size(f, 1, 0);
    kq_ledger_remove(f->l, "a");
    expect_size(f, 0, 0);
    expect_empty(f);
    kq_pod_clear(&p);
}

static void test_delete_once(void **state)
{
    fx_t *f = *state;
    kq_pod_t a = mk("a", "root.team-b", "alice", 300, "n1");
    kq_pod_t b = mk("b", "root.team-b", "alice", 200, "n1");
    kq_ledger_observe(f->l, &a);
    kq_ledger_observe(f->l, &b);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 500);
    assert_int_equal(running_apps(f, "root.team-b"), 2);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(alloc_cpu(f, "root.team-b"), 200);
    kq_ledger_remove(f->l, "a"); /* a second DELETED */
    kq_ledger_remove(f->l, "zzz");
    assert_int_equal(alloc_cpu(f, "root.team-b"), 200);
    assert_int_equal(user_cpu(f, "alice"), 200);
    expect_size(f, 1, 1);
    kq_ledger_remove(f->l, "b");
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

static void count_call(void *ud)
{
    (*(int *)ud)++;
}

/* The release hook (requeue pokes): once per release of a counted pod, never for a pod
 * that was not counted or a second DELETED. */
static void test_release_hook(void **state)
{
    fx_t *f = *state;
    int calls = 0;
    kq_ledger_set_release_hook(f->l, count_call, &calls);
    kq_pod_t a = mk("a", "root.team-b", "alice", 300, "n1");
    kq_pod_t p = mk("p", "root.team-b", "alice", 300, NULL); /* pending: not counted */
    kq_ledger_observe(f->l, &a);
    kq_ledger_observe(f->l, &p);
    assert_int_equal(calls, 0);
    kq_ledger_remove(f->l, "p");
    assert_int_equal(calls, 0);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(calls, 1);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(calls, 1);
    kq_ledger_set_release_hook(f->l, NULL, NULL);
    kq_ledger_observe(f->l, &a);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(calls, 1);
    kq_pod_clear(&a);
    kq_pod_clear(&p);
}

static void test_terminal_releases(void **state)
{
    fx_t *f = *state;
    char why[256] = "";
    kq_pod_t a = mk("a", "root.team-b", "alice", 300, "n1");
    kq_ledger_observe(f->l, &a);
    a.deleting = true; /* graceful deletion: still running, still counted */
    kq_ledger_observe(f->l, &a);
    assert_int_equal(alloc_cpu(f, "root"), 300);
    a.phase = KQ_POD_SUCCEEDED;
    kq_ledger_observe(f->l, &a);
    expect_size(f, 0, 0);
    expect_empty(f);
    kq_ledger_observe(f->l, &a); /* repeated terminal event */
    kq_ledger_remove(f->l, "a"); /* and the DELETED that follows */
    expect_empty(f);

    /* an assumed pod that fails */
    kq_pod_t b = mk("b", "root.team-b", "bob", 100, NULL);
    assert_int_equal(kq_ledger_assume(f->l, &b, why, sizeof(why), NULL), 0);
    b.phase = KQ_POD_FAILED;
    kq_ledger_observe(f->l, &b);
    expect_size(f, 0, 0);
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

static void test_label_change_releases_original(void **state)
{
    fx_t *f = *state;
    kq_pod_t a = mk("a", "root.team-a", "alice", 300, "n1");
    kq_ledger_observe(f->l, &a);
    kq_pod_t moved = mk("a", "root.team-b", "bob", 300, "n1"); /* labels edited afterwards */
    kq_ledger_observe(f->l, &moved);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 0);
    assert_int_equal(user_cpu(f, "alice"), 300);
    assert_int_equal(user_cpu(f, "bob"), -1);
    /* lookup shows the latest facts */
    kq_pod_t seen;
    assert_int_equal(kq_ledger_lookup(f->l, "a", &seen), 0);
    assert_string_equal(seen.queue, "root.team-b");
    kq_pod_clear(&seen);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 0);
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&moved);
}

static void test_resize(void **state)
{
    fx_t *f = *state;
    kq_pod_t a = mk("a", "root.team-b", "alice", 300, "n1");
    kq_ledger_observe(f->l, &a);
    assert_int_equal(kq_resource_set(&a.request, "cpu", 500), 0);
    kq_ledger_observe(f->l, &a);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 500);
    assert_int_equal(alloc_cpu(f, "root"), 500);
    assert_int_equal(user_cpu(f, "alice"), 500);
    assert_int_equal(running_apps(f, "root"), 1);
    kq_ledger_observe(f->l, &a); /* same size again: no change */
    assert_int_equal(alloc_cpu(f, "root"), 500);
    assert_int_equal(kq_resource_set(&a.request, "cpu", 100), 0); /* shrink */
    kq_ledger_observe(f->l, &a);
    assert_int_equal(alloc_cpu(f, "root"), 100);
    expect_size(f, 1, 1);
    kq_ledger_remove(f->l, "a");
    expect_empty(f);
    kq_pod_clear(&a);
}

static void test_resync(void **state)
{
    fx_t *f = *state;
    char why[256] = "";
    kq_pod_t A = mk("A", "root.team-b", "alice", 100, "n1");
    kq_pod_t B = mk("B", "root.team-b", "alice", 200, "n1");
    kq_pod_t C = mk("C", "root.team-b", "alice", 400, NULL);  /* assumed, then vanished */
    kq_pod_t C2 = mk("C2", "root.team-b", "alice", 32, NULL); /* assumed, listed unassigned */
    kq_pod_t P = mk("P", "root.team-b", "alice", 50, NULL);   /* pending, vanished */
    kq_pod_t D = mk("D", "root.team-b", "alice", 800, NULL);  /* assumed during the relist */
    kq_pod_t E = mk("E", "root.team-b", "bob", 16, "n2");     /* appeared during the outage */
    kq_ledger_observe(f->l, &A);
    kq_ledger_observe(f->l, &B);
    assert_int_equal(kq_ledger_assume(f->l, &C, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ledger_assume(f->l, &C2, why, sizeof(why), NULL), 0);
    kq_ledger_observe(f->l, &P);
    assert_int_equal(alloc_cpu(f, "root"), 100 + 200 + 400 + 32);
    assert_int_equal(pending_cpu(f, "root.team-b"), 50);

    kq_ledger_resync_begin(f->l);
    kq_ledger_observe(f->l, &A);
    assert_int_equal(kq_ledger_assume(f->l, &D, why, sizeof(why), NULL), 0);
    kq_ledger_observe(f->l, &C2);
    kq_ledger_observe(f->l, &E);
    kq_ledger_resync_end(f->l);

    /* A, C2, D, E stay counted; B and C released; P forgotten */
    assert_int_equal(alloc_cpu(f, "root"), 100 + 32 + 800 + 16);
    assert_int_equal(user_cpu(f, "alice"), 100 + 32 + 800);
    assert_int_equal(user_cpu(f, "bob"), 16);
    assert_int_equal(pending_cpu(f, "root.team-b"), 0);
    assert_int_equal(running_apps(f, "root"), 4);
    expect_size(f, 4, 4);
    assert_false(kq_ledger_is_counted(f->l, "B"));
    assert_false(kq_ledger_is_counted(f->l, "C"));
    assert_true(kq_ledger_is_counted(f->l, "D"));

    /* D was assumed during that relist; the next relist without it releases it */
    kq_ledger_resync_begin(f->l);
    kq_ledger_observe(f->l, &A);
    kq_ledger_observe(f->l, &C2);
    kq_ledger_observe(f->l, &E);
    kq_ledger_resync_end(f->l);
    assert_int_equal(alloc_cpu(f, "root"), 100 + 32 + 16);
    expect_size(f, 3, 3);
    kq_ledger_resync_end(f->l); /* without a begin: nothing happens */
    expect_size(f, 3, 3);

    kq_ledger_remove(f->l, "A");
    kq_ledger_remove(f->l, "C2");
    kq_ledger_remove(f->l, "E");
    expect_empty(f);
    kq_pod_t *all[] = {&A, &B, &C, &C2, &P, &D, &E};
    for (size_t i = 0; i < 7; i++)
        kq_pod_clear(all[i]);
}

static void test_pending_balance(void **state)
{
    fx_t *f = *state;
    kq_pod_t p = mk("p", "root.team-b", "alice", 50, NULL);
    kq_ledger_observe(f->l, &p);
    assert_int_equal(pending_cpu(f, "root.team-b"), 50);
    kq_ledger_observe(f->l, &p); /* the same again */
    assert_int_equal(pending_cpu(f, "root.team-b"), 50);
    free(p.queue);
    p.queue = strdup("root.team-a"); /* label changed while pending */
    kq_ledger_observe(f->l, &p);
    assert_int_equal(pending_cpu(f, "root.team-b"), 0);
    assert_int_equal(pending_cpu(f, "root.team-a"), 50);
    assert_int_equal(kq_resource_set(&p.request, "cpu", 70), 0);
    kq_ledger_observe(f->l, &p);
    assert_int_equal(pending_cpu(f, "root.team-a"), 70);
    assert_int_equal(pending_cpu(f, "root"), 70);
    set_node(&p, "n1"); /* bound by the default binder */
    kq_ledger_observe(f->l, &p);
    assert_int_equal(pending_cpu(f, "root"), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 70);
    kq_ledger_remove(f->l, "p");
    expect_empty(f);

    /* pending pod deleted before it was scheduled */
    kq_pod_t q = mk("q", "root.team-b", "alice", 40, NULL);
    kq_ledger_observe(f->l, &q);
    assert_int_equal(pending_cpu(f, "root"), 40);
    kq_ledger_remove(f->l, "q");
    assert_int_equal(pending_cpu(f, "root"), 0);

    /* not our scheduler, or no queue: known, but no pending resources */
    kq_pod_t other = mk("o", "root.team-b", "alice", 40, NULL);
    free(other.scheduler_name);
    other.scheduler_name = strdup("default-scheduler");
    kq_ledger_observe(f->l, &other);
    kq_pod_t noq = mk("n", NULL, "alice", 40, NULL);
    kq_ledger_observe(f->l, &noq);
    assert_int_equal(pending_cpu(f, "root"), 0);
    expect_size(f, 2, 0);
    kq_ledger_remove(f->l, "o");
    kq_ledger_remove(f->l, "n");
    expect_size(f, 0, 0);
    expect_empty(f);
    kq_pod_clear(&p);
    kq_pod_clear(&q);
    kq_pod_clear(&other);
    kq_pod_clear(&noq);
}

static void test_check_and_denials(void **state)
{
    fx_t *f = *state;
    char why[256];
    kq_pod_t noq = mk("x", NULL, "alice", 100, NULL);
    kq_denial_t kind = KQ_DENIAL_COUNT;
    why[0] = '\0';
    /* a queue error without a kind is a missing queue */
    assert_int_equal(kq_ledger_check(f->l, &noq, why, sizeof(why), &kind), KQ_EDENIED);
    assert_string_equal(why, "queue \"root.nope\" does not exist");
    assert_int_equal(kind, KQ_DENIAL_QUEUE_MISSING);
    /* the kind queue resolution gave, whatever the words */
    noq.queue_denial = KQ_DENIAL_QUEUE_NOT_LEAF;
    why[0] = '\0';
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_assume(f->l, &noq, why, sizeof(why), &kind), KQ_EDENIED);
    assert_string_equal(why, "queue \"root.nope\" does not exist");
    assert_int_equal(kind, KQ_DENIAL_QUEUE_NOT_LEAF);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_reserve(f->l, &noq, why, sizeof(why), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_QUEUE_NOT_LEAF);
    expect_size(f, 0, 0);

    kq_pod_t a = mk("a", "root.team-a", "alice", 800, NULL); /* team-a max 1000m */
    assert_int_equal(kq_ledger_check(f->l, &a, why, sizeof(why), NULL), 0);
    assert_int_equal(alloc_cpu(f, "root"), 0); /* check changes nothing */
    assert_int_equal(kq_ledger_assume(f->l, &a, why, sizeof(why), NULL), 0);
    assert_int_equal(kq_ledger_check(f->l, &a, why, sizeof(why), NULL), 0); /* already counted */

    kq_pod_t b = mk("b", "root.team-a", "bob", 300, NULL); /* 800 + 300 > 1000 */
    why[0] = '\0';
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check(f->l, &b, why, sizeof(why), &kind), KQ_EDENIED);
    assert_true(strlen(why) > 0);
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    why[0] = '\0';
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_assume(f->l, &b, why, sizeof(why), &kind), KQ_EDENIED);
    assert_true(strlen(why) > 0);
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    /* 1200m alone is over the 1000m max: never fits */
    kq_pod_t big = mk("big", "root.team-a", "bob", 1200, NULL);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check(f->l, &big, why, sizeof(why), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    kq_pod_clear(&big);
    /* a resize of a (800m counted) is checked for its growth: +100m fits (and is counted at
     * once: a's resize reservation); 1100m and 2000m alone are over the max */
    kq_pod_t ra = mk("a", "root.team-a", "alice", 900, NULL);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &ra, why, sizeof(why), &kind), 0);
    assert_int_equal(kind, KQ_DENIAL_NONE);
    assert_int_equal(kq_resource_set(&ra.request, "cpu", 1100), 0);
    assert_int_equal(kq_ledger_check_resize(f->l, &ra, why, sizeof(why), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    assert_int_equal(kq_resource_set(&ra.request, "cpu", 2000), 0);
    assert_int_equal(kq_ledger_check_resize(f->l, &ra, why, sizeof(why), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    kq_pod_clear(&ra);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    assert_int_equal(user_cpu(f, "bob"), -1);
    expect_size(f, 1, 1);
    kq_pod_t tmp;
    assert_int_equal(kq_ledger_lookup(f->l, "b", &tmp), KQ_ENOENT);

    /* reality is never refused: the same pod bound by someone else is counted */
    set_node(&b, "n1");
    kq_ledger_observe(f->l, &b);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 1200);
    expect_size(f, 2, 2);

    kq_ledger_remove(f->l, "a");
    kq_ledger_remove(f->l, "b");
    expect_empty(f);
    kq_pod_clear(&noq);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

static void test_bound_without_queue(void **state)
{
    fx_t *f = *state;
    kq_pod_t p = mk("x", NULL, "alice", 300, "n1");
    kq_ledger_observe(f->l, &p);
    assert_int_equal(alloc_cpu(f, "root"), 300); /* counted against root */
    assert_int_equal(user_cpu(f, "alice"), 300);
    expect_size(f, 1, 1);
    kq_ledger_remove(f->l, "x");
    expect_empty(f);
    kq_pod_clear(&p);
}

static void test_lookup(void **state)
{
    fx_t *f = *state;
    kq_pod_t p = mk("a", "root.team-b", "alice", 300, NULL);
    kq_pod_t out;
    assert_int_equal(kq_ledger_lookup(f->l, "a", &out), KQ_ENOENT);
    kq_ledger_observe(f->l, &p);
    assert_int_equal(kq_ledger_lookup(f->l, "a", &out), 0);
    assert_string_equal(out.uid, "a");
    assert_string_equal(out.queue, "root.team-b");
    assert_string_equal(out.user, "alice");
    assert_null(out.node);
    assert_int_equal(kq_resource_get(&out.request, "cpu", NULL), 300);
    kq_pod_clear(&out);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(kq_ledger_lookup(f->l, "a", &out), KQ_ENOENT);
    kq_pod_clear(&p);
    expect_empty(f);
}

/* The ledger keeps a pod's facts in a compact form (its request as only the resources it
 * names): what it gives back is every field it was given. */
static void test_lookup_keeps_every_field(void **state)
{
    fx_t *f = *state;
    kq_pod_t p = mk("full", "root.team-b", "alice", 1500, "n7");
    free(p.app_id);
    p.app_id = strdup("spark-1");
    p.n_groups = 2;
    p.groups = calloc(2, sizeof(char *));
    p.groups[0] = strdup("dev");
    p.groups[1] = strdup("ml");
    p.priority = -7;
    p.preemptible = false;
    p.created = 1732400000;
    p.quota_name = strdup("q-a");
    p.n_gates = 3;
    p.gate_pos = 2;
    p.deleting = true;
    p.queue_denial = KQ_DENIAL_ACL; /* not consistent with queue; only copied */
    assert_int_equal(kq_resource_set(&p.request, "memory", (int64_t)3 << 30), 0);
    assert_int_equal(kq_resource_set(&p.request, "nvidia.com/gpu", 2), 0);
    kq_ledger_observe(f->l, &p);
    kq_pod_t out;
    assert_int_equal(kq_ledger_lookup(f->l, "full", &out), 0);
    assert_string_equal(out.uid, "full");
    assert_string_equal(out.ns, "ns");
    assert_string_equal(out.name, "full");
    assert_string_equal(out.node, "n7");
    assert_string_equal(out.scheduler_name, OURS);
    assert_int_equal(out.phase, KQ_POD_RUNNING);
    assert_true(out.deleting);
    assert_string_equal(out.user, "alice");
    assert_int_equal(out.n_groups, 2);
    assert_string_equal(out.groups[0], "dev");
    assert_string_equal(out.groups[1], "ml");
    assert_string_equal(out.queue, "root.team-b");
    assert_null(out.queue_error);
    assert_int_equal(out.queue_denial, KQ_DENIAL_ACL);
    assert_string_equal(out.app_id, "spark-1");
    assert_true(kq_resource_equal(&out.request, &p.request));
    assert_int_equal(out.request.n, 3);
    assert_int_equal(out.priority, -7);
    assert_false(out.preemptible);
    assert_int_equal(out.created, 1732400000);
    assert_string_equal(out.quota_name, "q-a");
    assert_int_equal(out.n_gates, 3);
    assert_int_equal(out.gate_pos, 2);
    /* counted with all three resources */
    assert_int_equal(user_cpu(f, "alice"), 1500);
    kq_pod_clear(&out);
    kq_ledger_remove(f->l, "full");
    kq_pod_clear(&p);
    expect_empty(f);
}

static void test_parsed_pod(void **state)
{
    fx_t *f = *state;
    json_t *j = json_loads(
        "{\"metadata\":{\"name\":\"w\",\"namespace\":\"team-a\",\"uid\":\"w-1\","
        "\"annotations\":{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"alice\\\",\\\"groups\\\":[\\\"dev\\\"]}\"}},"
        "\"spec\":{\"nodeName\":\"n1\",\"schedulerName\":\"kubequota\",\"containers\":["
        "{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"2\"}}}]},\"status\":{\"phase\":\"Running\"}}",
        0, NULL);
    assert_non_null(j);
    kq_pod_opts_t o = {.partition = kq_config_partition(f->cfg, "default")};
    kq_pod_t p;
    char err[256];
    assert_int_equal(kq_pod_parse_json(j, &o, &p, err, sizeof(err)), 0);
    json_decref(j);
    assert_string_equal(p.queue, "root.team-a");
    kq_ledger_observe(f->l, &p); /* 2 cpu in a 1-cpu queue: counted anyway */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 2000);
    assert_int_equal(user_cpu(f, "alice"), 2000);
    kq_ledger_remove(f->l, "w-1");
    expect_empty(f);
    kq_pod_clear(&p);
}

/* ---------------------------------------------------------------- re-placement -- */

/* Issue 38: a pod's queue follows the config. A pod of namespace ns1 without a queue label
 * is in root.ns1 when that queue exists, else in root.default. */
static const char QUEUES_NS1_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: team-a\n"
    "            resources:\n"
    "              max:\n"
    "                vcore: 1000m\n"
    "          - name: team-b\n"
    "          - name: ns1\n"
    "            resources:\n"
    "              max:\n"
    "                vcore: 500m\n";

static kq_config_t *place_cfg; /* the config "in force" for the fixture's placement */

static int fx_place(void *ud, kq_pod_t *pod)
{
    (void)ud;
    kq_pod_opts_t o = {.partition = kq_config_partition(place_cfg, "default")};
    return kq_pod_place(&o, pod);
}

/* A pod of namespace ns (user alice, application app, queue label queue or none) parsed by
 * the config cfg. */
static kq_pod_t parse_ns_pod(kq_config_t *cfg, const char *uid, const char *ns, const char *app, const char *queue,
                             const char *cpu, const char *node)
{
    char text[2048];
    char labels[256];
    snprintf(labels, sizeof(labels), "\"kubequota.io/app-id\":\"%s\"%s%s%s", app, queue ? ",\"kubequota.io/queue\":\"" : "",
             queue ? queue : "", queue ? "\"" : "");
    snprintf(text, sizeof(text),
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\",\"uid\":\"%s\",\"labels\":{%s},"
             "\"annotations\":{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"alice\\\",\\\"groups\\\":[\\\"dev\\\"]}\"}},"
             "\"spec\":{%s%s%s\"schedulerName\":\"kubequota\",\"containers\":["
             "{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"%s\"}}}]},\"status\":{\"phase\":\"%s\"}}",
             uid, ns, uid, labels, node ? "\"nodeName\":\"" : "", node ? node : "", node ? "\"," : "", cpu,
             node ? "Running" : "Pending");
    kq_pod_opts_t o = {.partition = kq_config_partition(cfg, "default")};
    kq_pod_t p;
    char err[256];
    if (kq_pod_parse_text(text, strlen(text), &o, &p, err, sizeof(err)) != 0)
        fail_msg("parse: %s", err);
    return p;
}

static void apply_config(fx_t *f, kq_config_t *cfg)
{
    assert_int_equal(kq_ugm_set_config(f->ugm, cfg), 0);
    place_cfg = cfg;
}

static void test_reload_moves_pods(void **state)
{
    fx_t *f = *state;
    kq_config_t *with = test_config(QUEUES_NS1_YAML);
    assert_non_null(with);
    place_cfg = f->cfg;
    kq_ledger_set_placement(f->l, fx_place, NULL);
    /* Two bound pods of one application and a waiting pod, in ns1 (root.default: no
     * root.ns1 yet), and a bound pod of the same application that names root.team-b. */
    kq_pod_t p1 = parse_ns_pod(f->cfg, "p1", "ns1", "app", NULL, "400m", "n1");
    kq_pod_t p2 = parse_ns_pod(f->cfg, "p2", "ns1", "app", NULL, "300m", "n1");
    kq_pod_t p3 = parse_ns_pod(f->cfg, "p3", "ns1", "wait", NULL, "200m", NULL);
    kq_pod_t p4 = parse_ns_pod(f->cfg, "p4", "ns1", "app", "root.team-b", "100m", "n1");
    assert_string_equal(p1.queue, "root.default");
    kq_ledger_observe(f->l, &p1);
    kq_ledger_observe(f->l, &p2);
    kq_ledger_observe(f->l, &p3);
    kq_ledger_observe(f->l, &p4);
    assert_int_equal(alloc_cpu(f, "root.default"), 700);
    assert_int_equal(pending_cpu(f, "root.default"), 200);
    assert_int_equal(running_apps(f, "root.default"), 1);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 100);
    assert_int_equal(user_cpu(f, "alice"), 800);

    /* The reload adds root.ns1 (max 500m): the pods of ns1 move with their usage, their
     * application and their pending request, unchecked (700m > 500m: what runs is never
     * refused); the pod that names its queue stays. */
    apply_config(f, with);
    assert_int_equal(kq_ledger_place_again(f->l), 3);
    assert_int_equal(alloc_cpu(f, "root.default"), 0);
    assert_int_equal(pending_cpu(f, "root.default"), 0);
    assert_int_equal(running_apps(f, "root.default"), 0);
    assert_int_equal(alloc_cpu(f, "root.ns1"), 700);
    assert_int_equal(pending_cpu(f, "root.ns1"), 200);
    assert_int_equal(running_apps(f, "root.ns1"), 1);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 100);
    assert_int_equal(running_apps(f, "root.team-b"), 1);
    assert_int_equal(alloc_cpu(f, "root"), 800);
    assert_int_equal(user_cpu(f, "alice"), 800);
    kq_pod_t got;
    assert_int_equal(kq_ledger_lookup(f->l, "p3", &got), 0);
    assert_string_equal(got.queue, "root.ns1");
    kq_pod_clear(&got);
    /* the queue is over its max: the waiting pod is refused until it is back under */
    char why[256];
    kq_pod_t p3n = parse_ns_pod(with, "p3", "ns1", "wait", NULL, "200m", NULL);
    assert_int_equal(kq_ledger_assume(f->l, &p3n, why, sizeof(why), NULL), KQ_EDENIED);
    /* nothing moves twice */
    assert_int_equal(kq_ledger_place_again(f->l), 0);
    assert_int_equal(alloc_cpu(f, "root.ns1"), 700);

    /* The reload that removes root.ns1 moves them back, applications and all. */
    apply_config(f, f->cfg);
    assert_int_equal(kq_ledger_place_again(f->l), 3);
    assert_int_equal(alloc_cpu(f, "root.default"), 700);
    assert_int_equal(pending_cpu(f, "root.default"), 200);
    assert_int_equal(running_apps(f, "root.default"), 1);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 100);
    assert_int_equal(kq_ledger_lookup(f->l, "p3", &got), 0); /* bind binds what the ledger knows */
    assert_string_equal(got.queue, "root.default");
    assert_int_equal(kq_ledger_assume(f->l, &got, why, sizeof(why), NULL), 0);
    kq_pod_clear(&got);
    assert_int_equal(alloc_cpu(f, "root.default"), 900);

    /* released once each, from where they are now */
    kq_ledger_remove(f->l, "p1");
    kq_ledger_remove(f->l, "p2");
    kq_ledger_remove(f->l, "p3");
    kq_ledger_remove(f->l, "p4");
    expect_empty(f);
    kq_pod_clear(&p1);
    kq_pod_clear(&p2);
    kq_pod_clear(&p3);
    kq_pod_clear(&p3n);
    kq_pod_clear(&p4);
    kq_ledger_set_placement(f->l, NULL, NULL);
    place_cfg = NULL;
    kq_config_unref(with);
}

/* A pod created a moment after a reload, placed by the config before it (the informer
 * parsed it before the swap) and stored after the reload re-placed the known pods: the
 * informer sees that the config changed and places it again (control/sync.c), so it ends
 * where the new config puts it, as a kubequota started now would place it. */
static void test_pod_between_reload_and_apply(void **state)
{
    fx_t *f = *state;
    kq_config_t *with = test_config(QUEUES_NS1_YAML);
    assert_non_null(with);
    place_cfg = f->cfg;
    kq_ledger_set_placement(f->l, fx_place, NULL);
    kq_pod_t p = parse_ns_pod(f->cfg, "late", "ns1", "late", NULL, "250m", "n1"); /* placed by the old config */
    assert_string_equal(p.queue, "root.default");
    apply_config(f, with);
    assert_int_equal(kq_ledger_place_again(f->l), 0); /* the ledger does not know it yet */
    kq_ledger_observe(f->l, &p);
    assert_int_equal(alloc_cpu(f, "root.default"), 250);
    assert_true(kq_ledger_place_again_pod(f->l, "late"));
    assert_int_equal(alloc_cpu(f, "root.default"), 0);
    assert_int_equal(alloc_cpu(f, "root.ns1"), 250);
    assert_int_equal(running_apps(f, "root.ns1"), 1);
    assert_false(kq_ledger_place_again_pod(f->l, "late"));
    /* a later watch event of the pod (parsed by the new config) changes nothing */
    kq_pod_t again = parse_ns_pod(with, "late", "ns1", "late", NULL, "250m", "n1");
    kq_ledger_observe(f->l, &again);
    assert_int_equal(alloc_cpu(f, "root.ns1"), 250);
    /* a copy placed by the old config (a pod that waited at the gate across the reload)
     * is counted where the config in force puts it, and checked there */
    kq_pod_t gated = parse_ns_pod(f->cfg, "gated", "ns1", "gated", NULL, "200m", NULL);
    assert_string_equal(gated.queue, "root.default");
    char why[256];
    assert_int_equal(kq_ledger_reserve(f->l, &gated, why, sizeof(why), NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.default"), 0);
    assert_int_equal(alloc_cpu(f, "root.ns1"), 450);
    kq_pod_t big = parse_ns_pod(f->cfg, "big", "ns1", "big", NULL, "100m", NULL);
    assert_int_equal(kq_ledger_assume(f->l, &big, why, sizeof(why), NULL), KQ_EDENIED); /* 550m > 500m */
    kq_ledger_remove(f->l, "gated");
    kq_ledger_remove(f->l, "big");
    kq_ledger_remove(f->l, "late");
    expect_empty(f);
    kq_pod_clear(&gated);
    kq_pod_clear(&big);
    kq_pod_clear(&p);
    kq_pod_clear(&again);
    kq_ledger_set_placement(f->l, NULL, NULL);
    place_cfg = NULL;
    kq_config_unref(with);
}

/* ----------------------------------------------------------------------- threads -- */

#define T_UIDS 64
#define T_THREADS 8
#define T_OPS 20000

typedef struct targ {
    fx_t *f;
    unsigned seed;
    int unexpected; /* cmocka asserts only on the main thread */
} targ_t;

static void *worker(void *arg)
{
    targ_t *t = arg;
    char why[256];
    for (int i = 0; i < T_OPS; i++) {
        unsigned r = (unsigned)rand_r(&t->seed);
        int k = (int)(r % T_UIDS);
        char uid[16];
        snprintf(uid, sizeof(uid), "u%d", k);
        kq_pod_t p = mk(uid, "root.team-b", k % 2 ? "alice" : "bob", 100, NULL);
        switch ((r >> 8) % 8) {
        case 0:
        case 1:
            if (kq_ledger_assume(t->f->l, &p, why, sizeof(why), NULL) != 0) /* team-b has no limit */
                t->unexpected++;
            break;
        case 2:
            set_node(&p, "n1");
            kq_ledger_observe(t->f->l, &p);
            break;
        case 3:
            kq_ledger_observe(t->f->l, &p);
            break;
        case 4:
            kq_ledger_remove(t->f->l, uid);
            break;
        case 5:
            (void)kq_ledger_forget(t->f->l, uid);
            break;
        case 6:
            p.phase = KQ_POD_SUCCEEDED;
            kq_ledger_observe(t->f->l, &p);
            break;
        default:
            if ((r >> 16) % 64 == 0) {
                kq_ledger_resync_begin(t->f->l);
                set_node(&p, "n1");
                kq_ledger_observe(t->f->l, &p);
                kq_ledger_resync_end(t->f->l);
            } else {
                if (kq_ledger_check(t->f->l, &p, why, sizeof(why), NULL) != 0)
                    t->unexpected++;
                (void)kq_ledger_is_counted(t->f->l, uid);
            }
            break;
        }
        kq_pod_clear(&p);
    }
    return NULL;
}

static void test_threads(void **state)
{
    fx_t *f = *state;
    pthread_t th[T_THREADS];
    targ_t args[T_THREADS];
    for (int i = 0; i < T_THREADS; i++) {
        args[i] = (targ_t){.f = f, .seed = 1234u + (unsigned)i};
        assert_int_equal(pthread_create(&th[i], NULL, worker, &args[i]), 0);
    }
    for (int i = 0; i < T_THREADS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].unexpected, 0);
    }

    size_t counted = 0;
    size_t known = kq_ledger_size(f->l, &counted);
    assert_true(known <= T_UIDS);
    assert_true(counted <= known);
    /* every pod requests 100m with its own application */
    size_t n_alice = 0, n_bob = 0, n_pending = 0;
    for (int k = 0; k < T_UIDS; k++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "u%d", k);
        kq_pod_t p;
        if (kq_ledger_lookup(f->l, uid, &p) != 0)
            continue;
        if (kq_ledger_is_counted(f->l, uid))
            *(k % 2 ? &n_alice : &n_bob) += 1;
        else
            n_pending++;
        kq_pod_clear(&p);
    }
    print_message("threads left %zu known, %zu counted (alice %zu, bob %zu), %zu pending\n", known, counted,
                  n_alice, n_bob, n_pending);
    assert_int_equal(n_alice + n_bob, counted);
    assert_int_equal(alloc_cpu(f, "root"), (int64_t)counted * 100);
    assert_int_equal(alloc_cpu(f, "root.team-b"), (int64_t)counted * 100);
    assert_int_equal(running_apps(f, "root"), (int64_t)counted);
    assert_int_equal(user_cpu(f, "alice"), n_alice ? (int64_t)n_alice * 100 : -1);
    assert_int_equal(user_cpu(f, "bob"), n_bob ? (int64_t)n_bob * 100 : -1);
    assert_int_equal(pending_cpu(f, "root"), (int64_t)n_pending * 100);

    for (int k = 0; k < T_UIDS; k++) {
        char uid[16];
        snprintf(uid, sizeof(uid), "u%d", k);
        kq_ledger_remove(f->l, uid);
    }
    expect_size(f, 0, 0);
    expect_empty(f);
}

/* The filter of a pod kube-scheduler's watch showed before ours waits for ours
 * (kq_ledger_wait_observed): it returns true once another thread observes the pod during
 * the wait, woken by the observation rather than at its timeout (the wait re-checks at
 * the timeout, so only the return before it shows the wake-up), false when the wait ends
 * without it, and true at once for a pod already seen. */
typedef struct {
    fx_t *f;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool waiting_started;
    bool result;
    bool before_timeout; /* returned before its 60 s timeout */
} wobs_t;

static void *wait_observer(void *arg)
{
    wobs_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->waiting_started = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    w->result = kq_ledger_wait_observed(w->f->l, "late", 60000);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    w->before_timeout = t1.tv_sec - t0.tv_sec < 60;
    return NULL;
}

static void test_wait_observed(void **state)
{
    fx_t *f = *state;
    assert_false(kq_ledger_wait_observed(f->l, "nobody", 0));
    assert_false(kq_ledger_wait_observed(f->l, "nobody", 20));

    wobs_t w = {.f = f};
    pthread_mutex_init(&w.mu, NULL);
    pthread_cond_init(&w.cv, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, wait_observer, &w), 0);
    pthread_mutex_lock(&w.mu);
    while (!w.waiting_started)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    struct timespec pause = {.tv_sec = 0, .tv_nsec = 50 * 1000000L};
    nanosleep(&pause, NULL); /* most likely inside the wait by now (either way it must pass) */
    kq_pod_t p = mk("late", "root.team-b", "alice", 100, NULL);
    kq_ledger_observe(f->l, &p); /* the watch shows it: the waiter is woken */
    pthread_join(th, NULL);
    assert_true(w.result);
    assert_true(w.before_timeout);
    assert_true(kq_ledger_wait_observed(f->l, "late", 0));
    pthread_cond_destroy(&w.cv);
    pthread_mutex_destroy(&w.mu);
    kq_ledger_remove(f->l, "late");
    kq_pod_clear(&p);
}

/* ------------------------------------------------------------------ gating (RESERVED) */

/* A reservation is counted (filter: fits; bind: nothing more), survives a failed bind,
 * becomes an ordinary count when the watch shows the pod bound, and can be released. */
static void test_reserve(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_pod_t a = mk("a", "root.team-a", "alice", 600, NULL), b = mk("b", "root.team-a", "bob", 600, NULL);
    kq_ledger_observe(f->l, &a);
    kq_ledger_observe(f->l, &b);
    assert_int_equal(kq_ledger_reserve(f->l, &a, why, sizeof why, NULL), 0);
    assert_true(kq_ledger_is_reserved(f->l, "a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    /* the queue max is 1000m: b cannot be reserved next to a, nor pass filter */
    assert_int_equal(kq_ledger_reserve(f->l, &b, why, sizeof why, NULL), KQ_EDENIED);
    assert_int_equal(kq_ledger_check(f->l, &b, why, sizeof why, NULL), KQ_EDENIED);
    /* a passes filter and its bind counts nothing more */
    assert_int_equal(kq_ledger_check(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(kq_ledger_assume(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    /* a failed bind keeps the reservation */
    assert_int_equal(kq_ledger_forget(f->l, "a"), KQ_ENOENT);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    assert_int_equal(kq_ledger_reserved_count(f->l), 1);
    /* the watch shows it bound: counted once, no longer reserved */
    set_node(&a, "n1");
    kq_ledger_observe(f->l, &a);
    assert_false(kq_ledger_is_reserved(f->l, "a"));
    assert_int_equal(kq_ledger_reserved_count(f->l), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    /* unreserve releases */
    assert_int_equal(kq_ledger_reserve(f->l, &b, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    assert_int_equal(kq_ledger_unreserve(f->l, "b"), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    assert_int_equal(kq_ledger_unreserve(f->l, "b"), KQ_ENOENT);
    /* expiry: a reservation older than 0 s goes, and is counted nowhere */
    assert_int_equal(kq_ledger_reserve(f->l, &b, why, sizeof why, NULL), 0);
    assert_int_equal(kq_ledger_expire_reserved(f->l, 3600), 0);
    assert_int_equal(kq_ledger_expire_reserved(f->l, 0), 1);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    assert_int_equal(kq_ledger_reserved_count(f->l), 0);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

/* With gating on, the watch (a relist after a restart) reserves ungated unbound pods of
 * ours, checked: two 600m pods in a 1000m queue, only the first is reserved; gated pods,
 * other schedulers' pods and pods whose reservation ended are not. */
static void test_reserve_from_watch(void **state)
{
    fx_t *f = *state;
    kq_pod_t a = mk("a", "root.team-a", "alice", 600, NULL), b = mk("b", "root.team-a", "bob", 600, NULL),
             g = mk("g", "root.team-a", "carol", 100, NULL);
    g.gate_pos = 1; /* still gated */
    kq_ledger_observe(f->l, &a); /* gating off: nothing */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    kq_ledger_set_gating(f->l, true);
    kq_ledger_observe(f->l, &a);
    kq_ledger_observe(f->l, &b);
    kq_ledger_observe(f->l, &g);
    assert_true(kq_ledger_is_reserved(f->l, "a"));
    assert_false(kq_ledger_is_reserved(f->l, "b"));
    assert_false(kq_ledger_is_reserved(f->l, "g"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    /* b's refusal is final: it is not retried by later events, even with room */
    kq_ledger_remove(f->l, "a");
    kq_ledger_observe(f->l, &b);
    assert_false(kq_ledger_is_reserved(f->l, "b"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&g);
}

/* A relist (restart) checks reservations at its end, against every bound pod it listed:
 * an ungated pod listed before a bound one must not be reserved next to it over the max. */
static void test_reserve_after_relist(void **state)
{
    fx_t *f = *state;
    kq_pod_t a = mk("a", "root.team-a", "alice", 600, NULL), b = mk("b", "root.team-a", "bob", 600, "n1"),
             c = mk("c", "root.team-a", "carol", 300, NULL);
    kq_ledger_set_gating(f->l, true);
    kq_ledger_resync_begin(f->l);
    kq_ledger_observe(f->l, &a);
    kq_ledger_observe(f->l, &c);
    kq_ledger_observe(f->l, &b);
    assert_false(kq_ledger_is_reserved(f->l, "a")); /* not yet: the list is not complete */
    kq_ledger_resync_end(f->l);
    /* b (bound, 600m) + c (300m) fit the 1000m max; a (600m) does not */
    assert_false(kq_ledger_is_reserved(f->l, "a"));
    assert_true(kq_ledger_is_reserved(f->l, "c"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&c);
}

/* Issue 15: a pod naming more resources than a set holds inline (24): pending, assumed
 * and bound, its counted request comes back whole from the node's victims and the
 * resize check; removing it releases everything (ASan checks the spilled copies). */
/* The usage history (fairshare.h) follows every count and release: with half-life 0 its
 * current usage per (queue, user) must equal the user's allocation at each step. */
static int64_t fs_cur(kq_fairshare_t *fs, const char *queue, const char *user)
{
    kq_resource_t c = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_fairshare_get(fs, queue, user, kq_fairshare_now(), &c, NULL), 0);
    int64_t v = kq_resource_get(&c, "cpu", NULL);
    kq_resource_free(&c);
    return v;
}

static void test_fairshare_follows(void **state)
{
    fx_t *f = *state;
    char why[256] = "";
    kq_fairshare_t *fs = kq_fairshare_new(0);
    kq_ledger_set_fairshare(f->l, fs);
    kq_pod_t a = mk("a", "root.team-b", "alice", 300, NULL), b = mk("b", "root.team-b", "alice", 200, "n1");
    kq_pod_t c = mk("c", "root.team-a", "bob", 600, NULL), d = mk("d", "root.team-a", "bob", 600, NULL);
    assert_int_equal(kq_ledger_assume(f->l, &a, why, sizeof why, NULL), 0); /* bind */
    assert_int_equal(fs_cur(fs, "root.team-b", "alice"), 300);
    set_node(&a, "n1");
    kq_ledger_observe(f->l, &a); /* the watch confirms: not counted again */
    kq_ledger_observe(f->l, &b); /* bound by someone else: counted by the watch */
    assert_int_equal(fs_cur(fs, "root.team-b", "alice"), 500);
    assert_int_equal(kq_resource_set(&b.request, "cpu", 700), 0);
    kq_ledger_observe(f->l, &b); /* resized in place */
    assert_int_equal(fs_cur(fs, "root.team-b", "alice"), 1000);
    assert_int_equal(kq_ledger_reserve(f->l, &c, why, sizeof why, NULL), 0);
    assert_int_equal(fs_cur(fs, "root.team-a", "bob"), 600);
    assert_int_equal(kq_ledger_reserve(f->l, &d, why, sizeof why, NULL), KQ_EDENIED); /* a denial counts nothing */
    assert_int_equal(fs_cur(fs, "root.team-a", "bob"), 600);
    assert_int_equal(kq_ledger_unreserve(f->l, "c"), 0);
    assert_int_equal(fs_cur(fs, "root.team-a", "bob"), 0);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(fs_cur(fs, "root.team-b", "alice"), 700);
    b.phase = KQ_POD_SUCCEEDED;
    kq_ledger_observe(f->l, &b);
    assert_int_equal(fs_cur(fs, "root.team-b", "alice"), 0);
    expect_empty(f);
    kq_ledger_set_fairshare(f->l, NULL);
    kq_fairshare_free(fs);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&c);
    kq_pod_clear(&d);
}

static void test_many_resource_names(void **state)
{
    fx_t *f = *state;
    char why[256] = "", name[32];
    kq_pod_t p = mk("w", "root.team-b", "alice", 300, NULL);
    for (int i = 0; i < 23; i++) {
        snprintf(name, sizeof(name), "example.com/dev-%02d", i);
        assert_int_equal(kq_resource_set(&p.request, name, i + 1), 0);
    }
    assert_true(p.request.n > KQ_RES_INLINE);
    kq_ledger_observe(f->l, &p);
    assert_int_equal(pending_cpu(f, "root.team-b"), 300);
    assert_int_equal(kq_ledger_assume(f->l, &p, why, sizeof(why), NULL), 0);
    set_node(&p, "n1");
    kq_ledger_observe(f->l, &p);
    assert_int_equal(alloc_cpu(f, "root.team-b"), 300);
    kq_ledger_victim_t *v = NULL;
    size_t n = 0;
    assert_int_equal(kq_ledger_node_pods(f->l, "n1", &v, &n), 0);
    assert_int_equal(n, 1);
    assert_true(kq_resource_equal(&v[0].req, &p.request));
    kq_ledger_victims_free(v, n);
    assert_int_equal(kq_ledger_check_resize(f->l, &p, why, sizeof(why), NULL), 0);
    assert_int_equal(p.request.n, 24); /* the check works on its own copy */
    kq_ledger_remove(f->l, "w");
    assert_int_equal(alloc_cpu(f, "root.team-b"), 0);
    expect_size(f, 0, 0);
    kq_pod_clear(&p);
}

/* Issue 29: a pod of a user who is not the owner of the application it names is refused by
 * check and assume (KQ_DENIAL_APP_OWNER) and never charged to the owner; bound, it is
 * counted for its own user, and may then grow (a resize is no join); an id the pod did not
 * name is never refused. */
static kq_pod_t mk_app(const char *uid, const char *user, const char *app, bool named, int64_t cpu, const char *node)
{
    kq_pod_t p = mk(uid, "root.team-b", user, cpu, node);
    free(p.app_id);
    p.app_id = strdup(app);
    p.app_named = named;
    p.created = 1000;
    return p;
}

static void test_app_of_another_user(void **state)
{
    fx_t *f = *state;
    char why[512], owner[64];
    kq_denial_t kind;
    kq_pod_t a1 = mk_app("a1", "alice", "job", true, 100, NULL);
    assert_int_equal(kq_ledger_assume(f->l, &a1, why, sizeof(why), &kind), 0);
    kq_pod_t b1 = mk_app("b1", "bob", "job", true, 100, NULL);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check(f->l, &b1, why, sizeof(why), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_APP_OWNER);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_assume(f->l, &b1, why, sizeof(why), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_APP_OWNER);
    assert_non_null(strstr(why, "\"job\" belongs to another user"));
    assert_int_equal(kq_ledger_app_owner(f->l, &b1, owner, sizeof(owner), why, sizeof(why)), KQ_EDENIED);
    assert_string_equal(owner, "alice");
    assert_int_equal(user_cpu(f, "alice"), 100);
    assert_int_equal(user_cpu(f, "bob"), -1);
    /* bound by someone else: counted, for bob */
    kq_pod_t b2 = mk_app("b2", "bob", "job", true, 200, "node-1");
    kq_ledger_observe(f->l, &b2);
    assert_int_equal(user_cpu(f, "bob"), 200);
    assert_int_equal(user_cpu(f, "alice"), 100);
    assert_int_equal(kq_resource_set(&b2.request, "cpu", 300), 0);
    assert_int_equal(kq_ledger_check_resize(f->l, &b2, why, sizeof(why), &kind), 0);
    assert_int_equal(user_cpu(f, "bob"), 300); /* the growth counted from its admission */
    /* an id bob's pod did not name: his own application of that id */
    kq_pod_t b3 = mk_app("b3", "bob", "job", false, 100, NULL);
    assert_int_equal(kq_ledger_app_owner(f->l, &b3, owner, sizeof(owner), why, sizeof(why)), 0);
    assert_int_equal(kq_ledger_assume(f->l, &b3, why, sizeof(why), &kind), 0);
    assert_int_equal(user_cpu(f, "bob"), 400);
    kq_pod_clear(&a1);
    kq_pod_clear(&b1);
    kq_pod_clear(&b2);
    kq_pod_clear(&b3);
}

/* ------------------------------------------------------------------ resize (issue 37) */

/* Issue 37 route 5: the gate reserves a pod with the request it has then; the pod is
 * resized before it is bound. Bind counts the request it has now: the growth when it fits
 * (team-a max 1000m: 400m reserved, grown to 900m), a denial when it does not (the
 * reservation stays as it was), and filter says the same. */
static void test_bind_counts_the_grown_request(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_denial_t kind;
    kq_pod_t a = mk("a", "root.team-a", "alice", 400, NULL);
    kq_ledger_observe(f->l, &a);
    assert_int_equal(kq_ledger_reserve(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 400);
    /* resized to 900m (the watch shows it ungated and unbound: the reservation stays) */
    assert_int_equal(kq_resource_set(&a.request, "cpu", 900), 0);
    kq_ledger_observe(f->l, &a);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 400);
    assert_int_equal(kq_ledger_check(f->l, &a, why, sizeof why, NULL), 0); /* 400 + 500 <= 1000 */
    assert_int_equal(kq_ledger_assume(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    set_node(&a, "n1");
    kq_ledger_observe(f->l, &a);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);

    /* b (300m) bound; c reserved at 400m, then resized to 800m: 300 + 800 > 1000 */
    kq_pod_t b = mk("b", "root.team-a", "bob", 300, "n1"), c = mk("c", "root.team-a", "carol", 400, NULL);
    kq_ledger_observe(f->l, &b);
    kq_ledger_observe(f->l, &c);
    assert_int_equal(kq_ledger_reserve(f->l, &c, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700);
    assert_int_equal(kq_resource_set(&c.request, "cpu", 800), 0);
    kq_ledger_observe(f->l, &c);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check(f->l, &c, why, sizeof why, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    kind = KQ_DENIAL_COUNT;
    why[0] = '\0';
    assert_int_equal(kq_ledger_assume(f->l, &c, why, sizeof why, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_non_null(strstr(why, "root.team-a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700); /* nothing more counted */
    assert_true(kq_ledger_is_reserved(f->l, "c"));
    /* b goes: c's growth fits now, and its bind counts 800m */
    kq_ledger_remove(f->l, "b");
    assert_int_equal(kq_ledger_assume(f->l, &c, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 800);
    kq_ledger_remove(f->l, "c");
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&c);
}

/* A resize of a pod that waits (not counted) is refused only when it can never fit; the
 * gate, which may still hold the old request, then reserves the new one. */
static void test_resize_of_a_waiting_pod(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_denial_t kind;
    kq_pod_t full = mk("full", "root.team-a", "bob", 1000, "n1"), w = mk("w", "root.team-a", "alice", 100, NULL);
    kq_ledger_observe(f->l, &full);
    kq_ledger_observe(f->l, &w);
    kq_pod_t big = mk("w", "root.team-a", "alice", 2000, NULL); /* over the 1000m max */
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &big, why, sizeof why, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    assert_non_null(strstr(why, "max"));
    kq_pod_t grown = mk("w", "root.team-a", "alice", 700, NULL); /* no room now, but it may come */
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &grown, why, sizeof why, &kind), 0);
    assert_int_equal(kind, KQ_DENIAL_NONE);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 1000); /* a waiting pod counts nothing */
    kq_ledger_remove(f->l, "full");
    kq_pod_t other = mk("o", "root.team-a", "bob", 400, "n1");
    kq_ledger_observe(f->l, &other);
    /* the gate still holds the 100m request: the reservation is made for 700m, which does
     * not fit beside 400m */
    assert_int_equal(kq_ledger_reserve(f->l, &w, why, sizeof why, NULL), KQ_EDENIED);
    kq_ledger_remove(f->l, "o");
    assert_int_equal(kq_ledger_reserve(f->l, &w, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700);
    /* a watch event still showing 100m does not take it back; the resized pod ends it */
    kq_ledger_observe(f->l, &w);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700);
    set_node(&grown, "n1");
    kq_ledger_observe(f->l, &grown);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700);
    kq_ledger_remove(f->l, "w");
    expect_empty(f);
    kq_pod_clear(&full);
    kq_pod_clear(&w);
    kq_pod_clear(&big);
    kq_pod_clear(&grown);
    kq_pod_clear(&other);
}

/* Issue 37 route 9: an admitted growth is counted at once (its resize reservation), so two
 * resizes that together pass the max cannot both be admitted; the watch showing the resize
 * ends the reservation, an unseen one ends after the TTL and the pod goes back to what the
 * watch shows. */
static void test_resize_reservation(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_denial_t kind;
    kq_pod_t x = mk("x", "root.team-a", "alice", 300, "n1"), y = mk("y", "root.team-a", "bob", 300, "n1");
    kq_ledger_observe(f->l, &x);
    kq_ledger_observe(f->l, &y);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    kq_pod_t x2 = mk("x", "root.team-a", "alice", 600, "n1"), y2 = mk("y", "root.team-a", "bob", 600, "n1");
    assert_int_equal(kq_ledger_check_resize(f->l, &x2, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    assert_int_equal(user_cpu(f, "alice"), 600);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &y2, why, sizeof why, &kind), KQ_EDENIED); /* 900 + 300 */
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    /* a watch event of x from before its resize keeps the reservation */
    kq_ledger_observe(f->l, &x);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    /* the resized x: counted as it shows, reservation gone (a later old event shrinks it) */
    kq_ledger_observe(f->l, &x2);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    /* a resize the watch never shows (refused after admission) ends after the TTL */
    kq_ledger_set_resize_ttl_ms(f->l, 0);
    kq_pod_t y3 = mk("y", "root.team-a", "bob", 400, "n1");
    assert_int_equal(kq_ledger_check_resize(f->l, &y3, why, sizeof why, NULL), 0); /* 900 + 100 */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 1000);
    assert_int_equal(kq_ledger_expire_reserved(f->l, 3600), 0); /* the timer */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    assert_int_equal(user_cpu(f, "bob"), 300);
    kq_ledger_remove(f->l, "x");
    kq_ledger_remove(f->l, "y");
    expect_empty(f);
    kq_pod_clear(&x);
    kq_pod_clear(&y);
    kq_pod_clear(&x2);
    kq_pod_clear(&y2);
    kq_pod_clear(&y3);
}

/* A dry run's resize (kubectl --dry-run=server) is decided as a real one would be and holds
 * nothing: no growth counted, no resize reservation, so another pod's real resize into the
 * same room is admitted right after. x and y: 300m each, 1000m for the queue. */
static void test_resize_dry_run(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_denial_t kind;
    kq_pod_t x = mk("x", "root.team-a", "alice", 300, "n1"), y = mk("y", "root.team-a", "bob", 300, "n1");
    kq_ledger_observe(f->l, &x);
    kq_ledger_observe(f->l, &y);
    kq_pod_t x2 = mk("x", "root.team-a", "alice", 600, "n1"), y2 = mk("y", "root.team-a", "bob", 700, "n1");
    kq_pod_t x9 = mk("x", "root.team-a", "alice", 900, "n1");
    assert_int_equal(kq_ledger_check_resize_dry(f->l, &x2, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    assert_int_equal(user_cpu(f, "alice"), 300);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize_dry(f->l, &x9, why, sizeof why, &kind), KQ_EDENIED); /* 900 + 300 */
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    /* the room the dry run asked about is free: y's real resize takes it */
    assert_int_equal(kq_ledger_check_resize(f->l, &y2, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 1000);
    assert_int_equal(user_cpu(f, "bob"), 700);
    assert_int_equal(user_cpu(f, "alice"), 300);
    /* and, the queue now full, x's dry and real resizes are both refused */
    assert_int_equal(kq_ledger_check_resize_dry(f->l, &x2, why, sizeof why, NULL), KQ_EDENIED);
    assert_int_equal(kq_ledger_check_resize(f->l, &x2, why, sizeof why, NULL), KQ_EDENIED);
    kq_ledger_remove(f->l, "x");
    kq_ledger_remove(f->l, "y");
    expect_empty(f);
    kq_pod_clear(&x);
    kq_pod_clear(&y);
    kq_pod_clear(&x2);
    kq_pod_clear(&y2);
    kq_pod_clear(&x9);
}

/* Issue 37 route 9 (over-refusal): a queue's quota group whose runtime follows its request
 * (cluster 10 cpu, group ga max 4 cpu, no min). A bound 2-cpu pod is the group's whole
 * request: runtime 2 cpu. Its resize to 3500m is admitted (the growth enters the group's
 * request first: runtime 3500m), one to 4500m is over the max (never fits); with 3500m
 * counted, another pod's 1-cpu growth is over the max 4. */
static int resolve_ga(void *ud, const kq_pod_t *pod, char *group, size_t len)
{
    (void)ud;
    (void)pod;
    snprintf(group, len, "ga");
    return 0;
}

static void test_resize_within_a_quota_group(void **state)
{
    fx_t *f = *state;
    char why[512] = "", err[256] = "";
    kq_denial_t kind;
    kq_qtree_t *t = kq_qtree_new();
    assert_non_null(t);
    kq_resource_t tot = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&tot, "cpu", 10000), 0);
    kq_qtree_set_cluster_total(t, &tot);
    kq_resource_free(&tot);
    kq_qgroup_spec_t s;
    kq_qgroup_spec_init(&s, "ga");
    assert_int_equal(kq_resource_set(&s.max, "cpu", 4000), 0);
    assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
    kq_resource_free(&s.max);
    kq_ledger_set_qtree(f->l, t, resolve_ga, NULL);

    kq_pod_t p = mk("p", "root.team-b", "alice", 2000, "n1");
    kq_ledger_observe(f->l, &p);
    kq_resource_t rt = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_qtree_runtime(t, "ga", &rt), 0);
    assert_int_equal(kq_resource_get(&rt, "cpu", NULL), 2000);
    kq_resource_free(&rt);
    kq_pod_t p2 = mk("p", "root.team-b", "alice", 3500, "n1");
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &p2, why, sizeof why, &kind), 0);
    assert_int_equal(kind, KQ_DENIAL_NONE);
    kq_qgroup_info_t i;
    assert_int_equal(kq_qtree_info(t, "ga", &i), 0);
    assert_int_equal(kq_resource_get(&i.used, "cpu", NULL), 3500);
    assert_int_equal(kq_resource_get(&i.request, "cpu", NULL), 3500);
    kq_qtree_info_free(&i);
    /* 4500m alone is over ga's max */
    kq_pod_t p3 = mk("p", "root.team-b", "alice", 4500, "n1");
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &p3, why, sizeof why, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    /* q (500m) grows by 1 cpu: 3500 + 500 + 1000 > 4000 */
    kq_pod_t q = mk("q", "root.team-b", "bob", 500, "n1"), q2 = mk("q", "root.team-b", "bob", 1500, "n1");
    kq_ledger_observe(f->l, &q);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &q2, why, sizeof why, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_OVER_RUNTIME); /* runtime = min(request 5000, max 4000) */
    assert_int_equal(kq_qtree_info(t, "ga", &i), 0);
    assert_int_equal(kq_resource_get(&i.used, "cpu", NULL), 4000);
    assert_int_equal(kq_resource_get(&i.request, "cpu", NULL), 4000); /* the refused growth left */
    kq_qtree_info_free(&i);
    kq_ledger_remove(f->l, "p");
    kq_ledger_remove(f->l, "q");
    assert_int_equal(kq_qtree_info(t, "ga", &i), 0);
    assert_int_equal(kq_resource_get(&i.used, "cpu", NULL), 0);
    assert_int_equal(kq_resource_get(&i.request, "cpu", NULL), 0);
    kq_qtree_info_free(&i);
    kq_ledger_free(f->l);
    f->l = NULL;
    kq_qtree_free(t);
    kq_pod_clear(&p);
    kq_pod_clear(&p2);
    kq_pod_clear(&p3);
    kq_pod_clear(&q);
    kq_pod_clear(&q2);
}

/* A pod the gate reserved a moment ago, its gate removal still in flight, is resized to a
 * request that does not fit now (not one that never fits): the reservation made for the old
 * request goes and the resize is admitted; once the watch shows it ungated it is reserved
 * afresh, checked, with the new request, or not at all. A growth that fits moves the
 * reservation instead; one that never fits is refused. */
static void test_resize_of_a_reserved_gated_pod(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_denial_t kind;
    kq_ledger_set_gating(f->l, true);
    kq_pod_t b = mk("b", "root.team-a", "bob", 300, "n1"), a = mk("a", "root.team-a", "alice", 400, NULL);
    a.gate_pos = 1;
    a.n_gates = 1;
    kq_ledger_observe(f->l, &b);
    kq_ledger_observe(f->l, &a);
    assert_int_equal(kq_ledger_reserve(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700);
    /* 500m: 300 + 500 fits, the reservation moves */
    assert_int_equal(kq_resource_set(&a.request, "cpu", 500), 0);
    assert_int_equal(kq_ledger_check_resize(f->l, &a, why, sizeof why, NULL), 0);
    assert_true(kq_ledger_is_reserved(f->l, "a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 800);
    /* 1200m can never fit: refused, nothing moves */
    assert_int_equal(kq_resource_set(&a.request, "cpu", 1200), 0);
    kind = KQ_DENIAL_COUNT;
    assert_int_equal(kq_ledger_check_resize(f->l, &a, why, sizeof why, &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 800);
    /* 900m does not fit beside b now: admitted, the reservation dropped */
    assert_int_equal(kq_resource_set(&a.request, "cpu", 900), 0);
    assert_int_equal(kq_ledger_check_resize(f->l, &a, why, sizeof why, NULL), 0);
    assert_false(kq_ledger_is_reserved(f->l, "a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    /* the watch shows it ungated: reserved afresh, checked at 900m: refused while b runs */
    a.gate_pos = 0;
    a.n_gates = 0;
    kq_ledger_observe(f->l, &a);
    assert_false(kq_ledger_is_reserved(f->l, "a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 300);
    kq_ledger_remove(f->l, "b");
    assert_int_equal(kq_ledger_assume(f->l, &a, why, sizeof why, NULL), 0); /* bind decides it */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 900);
    kq_ledger_remove(f->l, "a");
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

/* Gate-only (--admission-gate-only): kube-scheduler calls no extender, so the gate's
 * reservation is the pod's only quota decision. The resize that the extender path answers by
 * dropping the reservation (test above) is refused here, and the reservation stays: nothing
 * would decide the pod afresh. Queue team-a's max is 1000m (fixture): 300 (b) + 900 > 1000. */
static void test_gate_only_resize_keeps_the_reservation(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_ledger_set_gating(f->l, true);
    kq_ledger_set_gate_only(f->l, true);
    kq_pod_t b = mk("b", "root.team-a", "bob", 300, "n1"), a = mk("a", "root.team-a", "alice", 400, NULL);
    a.gate_pos = 1;
    a.n_gates = 1;
    kq_ledger_observe(f->l, &b);
    kq_ledger_observe(f->l, &a);
    assert_int_equal(kq_ledger_reserve(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700);
    assert_int_equal(kq_resource_set(&a.request, "cpu", 900), 0);
    assert_int_equal(kq_ledger_check_resize(f->l, &a, why, sizeof why, NULL), KQ_EDENIED);
    assert_true(kq_ledger_is_reserved(f->l, "a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 700);
    /* within the room (300 + 700 = 1000): the reservation moves, as on the extender path */
    assert_int_equal(kq_resource_set(&a.request, "cpu", 700), 0);
    assert_int_equal(kq_ledger_check_resize(f->l, &a, why, sizeof why, NULL), 0);
    assert_true(kq_ledger_is_reserved(f->l, "a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 1000);
    kq_ledger_remove(f->l, "a");
    kq_ledger_remove(f->l, "b");
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

/* ----------------------------------------------- admission of pods created on a node -- */

/* Issue 37. A pod created with spec.nodeName is counted by the validating webhook under the
 * uid the API server gave it (kq_ledger_admit); the watch then shows the same uid bound.
 * Counted once: 600m reserved, the watch shows it, still 600m; deleted, 0. Expected numbers
 * from the queue max (1000m) by hand. As Kubernetes' ResourceQuota admission charges a
 * create once, at validation (k8s.io/apiserver pkg/admission/plugin/resourcequota,
 * controller.go checkQuotas; its test TestAdmitBelowQuotaLimit in k8s.io/kubernetes
 * plugin/pkg/admission/resourcequota/admission_test.go). */
static void test_admit_then_watch_counts_once(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_pod_t a = mk("a", "root.team-a", "alice", 600, "n1");
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    assert_true(kq_ledger_is_admitted(f->l, "a"));
    assert_int_equal(kq_ledger_admitted_count(f->l), 1);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    assert_int_equal(user_cpu(f, "alice"), 600);
    expect_size(f, 1, 1);
    /* a retried validation of the same uid counts nothing more */
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    /* the watch shows the stored pod (already bound): the same entry, counted once */
    kq_ledger_observe(f->l, &a);
    assert_false(kq_ledger_is_admitted(f->l, "a"));
    assert_int_equal(kq_ledger_admitted_count(f->l), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    assert_int_equal(user_cpu(f, "alice"), 600);
    expect_size(f, 1, 1);
    /* the TTL no longer applies to it */
    kq_ledger_set_admit_ttl_ms(f->l, 0);
    assert_int_equal(kq_ledger_expire_admitted(f->l), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    kq_ledger_remove(f->l, "a");
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    assert_int_equal(user_cpu(f, "alice"), -1); /* no tracker left */
    expect_empty(f);
    kq_pod_clear(&a);
}

/* A relist whose list was read before an admitted pod was stored (the soak found it: a
 * watch dropped while the ReplicaSet controller created pods on nodes) does not show it.
 * Its reservation stays until the watch shows the pod or the TTL ends it: released by the
 * relist, a pod filtered meanwhile passed the limit with it. */
static void test_admit_survives_a_relist(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_pod_t a = mk("a", "root.team-a", "alice", 600, "n1"), b = mk("b", "root.team-a", "bob", 600, NULL);
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    kq_ledger_resync_begin(f->l);
    kq_ledger_resync_end(f->l); /* the list predates a */
    assert_true(kq_ledger_is_admitted(f->l, "a"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    assert_int_equal(kq_ledger_check(f->l, &b, why, sizeof why, NULL), KQ_EDENIED); /* 600 + 600 > 1000 */
    kq_ledger_observe(f->l, &a); /* stored, shown: counted once */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    expect_size(f, 1, 1);
    kq_ledger_remove(f->l, "a");
    /* one never stored still ends with its TTL */
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    kq_ledger_resync_begin(f->l);
    kq_ledger_resync_end(f->l);
    kq_ledger_set_admit_ttl_ms(f->l, 0);
    assert_int_equal(kq_ledger_expire_admitted(f->l), 1);
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

/* Two reservations cannot together pass a limit: 600m + 600m > 1000m, so the second is
 * refused and leaves nothing; 600m + 400m = 1000m fits. A refusal is not counted, and its
 * pod never enters the ledger (it will not exist). */
static void test_admit_two_cannot_exceed(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_pod_t a = mk("a", "root.team-a", "alice", 600, "n1"), b = mk("b", "root.team-a", "alice", 600, "n1"),
             c = mk("c", "root.team-a", "alice", 400, "n2");
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    kq_denial_t kind = KQ_DENIAL_NONE;
    assert_int_equal(kq_ledger_admit(f->l, &b, why, sizeof why, &kind), KQ_EDENIED);
    assert_non_null(strstr(why, "team-a"));
    assert_false(kq_ledger_is_admitted(f->l, "b"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    expect_size(f, 1, 1);
    /* the what-if says the same, and changes nothing */
    assert_int_equal(kq_ledger_check_new(f->l, &b, why, sizeof why, NULL), KQ_EDENIED);
    assert_int_equal(kq_ledger_check_new(f->l, &c, why, sizeof why, NULL), 0);
    expect_size(f, 1, 1);
    assert_int_equal(kq_ledger_admit(f->l, &c, why, sizeof why, NULL), 0);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 1000);
    assert_int_equal(kq_ledger_admitted_count(f->l), 2);
    /* no uid or no node: not an admission of a pod created on a node */
    kq_pod_t n = mk("", "root.team-a", "alice", 1, "n1");
    assert_int_equal(kq_ledger_admit(f->l, &n, why, sizeof why, NULL), KQ_EINVAL);
    set_node(&n, NULL);
    free(n.uid);
    n.uid = strdup("n");
    assert_int_equal(kq_ledger_admit(f->l, &n, why, sizeof why, NULL), KQ_EINVAL);
    kq_ledger_remove(f->l, "a");
    kq_ledger_remove(f->l, "c");
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&c);
    kq_pod_clear(&n);
}

/* TTL: a reservation the watch never confirms (a later webhook refused the pod) is released
 * and forgotten; a pod the watch shows only after that is counted then, by the watch: once. */
static void test_admit_ttl(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_pod_t a = mk("a", "root.team-a", "alice", 600, "n1"), b = mk("b", "root.team-a", "alice", 600, "n1");
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(kq_ledger_expire_admitted(f->l), 0); /* 30 s by default */
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    kq_ledger_set_admit_ttl_ms(f->l, 0);
    assert_int_equal(kq_ledger_expire_admitted(f->l), 1);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 0);
    assert_int_equal(kq_ledger_admitted_count(f->l), 0);
    expect_empty(f);
    /* the slow watch shows it now: counted by the watch, once */
    kq_ledger_observe(f->l, &a);
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    expect_size(f, 1, 1);
    kq_ledger_remove(f->l, "a");
    /* expiry also happens lazily: the next admission releases the expired one first, so
     * b fits the room a's expired reservation held */
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(kq_ledger_admit(f->l, &b, why, sizeof why, NULL), 0);
    assert_false(kq_ledger_is_admitted(f->l, "a"));
    assert_true(kq_ledger_is_admitted(f->l, "b"));
    assert_int_equal(alloc_cpu(f, "root.team-a"), 600);
    /* deleted before the watch saw it bound (DELETED of a pod it never showed): released */
    kq_ledger_remove(f->l, "b");
    assert_int_equal(kq_ledger_admitted_count(f->l), 0);
    expect_empty(f);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
}

/* With a quota tree. The queue's group team-a (max 1000m) shares a 4000m cluster with
 * team-b, whose pending pods request 8000m: team-a's runtime follows its request, so with
 * nothing requested it is 0 and the plain check refuses any new pod (the over-refusal of
 * issue 37: "0 of 12 concurrent creates"). With the pod's own request added, team-a asks
 * min(600, 1000) = 600m, and the cluster's 4000m covers both asks' first shares (min 0:
 * weights by max, team-b unlimited weighs the cluster 4000m): 4000 * 1000/5000 = 800m >=
 * 600m, so team-a's runtime is its whole ask, 600m (the rest goes back to team-b). Numbers by hand from Koordinator's
 * runtime rule (quota_tree.h "Runtime"). */
static int resolve_queue_leaf(void *ud, const kq_pod_t *pod, char *group, size_t len)
{
    (void)ud;
    if (pod->queue == NULL || strncmp(pod->queue, "root.", 5) != 0)
        return KQ_ENOENT;
    snprintf(group, len, "%s", pod->queue + 5);
    return 0;
}

static void group_cpu(kq_qtree_t *t, const char *name, int64_t max_milli)
{
    kq_qgroup_spec_t s;
    char err[256];
    kq_qgroup_spec_init(&s, name);
    if (max_milli >= 0)
        assert_int_equal(kq_resource_set(&s.max, "cpu", max_milli), 0);
    assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
    kq_resource_free(&s.max);
}

static int64_t tree_cpu(kq_qtree_t *t, const char *group, const char *what)
{
    kq_qgroup_info_t info;
    assert_int_equal(kq_qtree_info(t, group, &info), 0);
    const kq_resource_t *r = strcmp(what, "request") == 0 ? &info.request
                             : strcmp(what, "used") == 0  ? &info.used
                                                          : &info.runtime;
    int64_t v = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (strcmp(KQ_RES_E(r)[i].name, "cpu") == 0)
            v = KQ_RES_E(r)[i].value;
    kq_qtree_info_free(&info);
    return v;
}

static void test_admit_with_tree_runtime(void **state)
{
    fx_t *f = *state;
    char why[512] = "";
    kq_qtree_t *t = kq_qtree_new();
    assert_non_null(t);
    group_cpu(t, "team-a", 1000);
    group_cpu(t, "team-b", -1);
    kq_resource_t total = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_resource_set(&total, "cpu", 4000), 0);
    kq_qtree_set_cluster_total(t, &total);
    kq_resource_free(&total);
    kq_ledger_set_qtree(f->l, t, resolve_queue_leaf, NULL);
    kq_pod_t hog = mk("hog", "root.team-b", "bob", 8000, NULL); /* pending: requests 8000m */
    kq_ledger_observe(f->l, &hog);
    assert_int_equal(tree_cpu(t, "team-b", "request"), 8000);
    assert_int_equal(tree_cpu(t, "team-a", "runtime"), 0);

    kq_pod_t a = mk("a", "root.team-a", "alice", 600, "n1"), b = mk("b", "root.team-a", "alice", 600, "n1"),
             c = mk("c", "root.team-a", "alice", 200, "n1"), d = mk("d", "root.team-a", "alice", 300, "n1");
    /* the plain check: held to a runtime computed without the pod */
    assert_int_equal(kq_ledger_check(f->l, &a, why, sizeof why, NULL), KQ_EDENIED);
    /* the what-if: admitted, and nothing of it stays in the tree */
    assert_int_equal(kq_ledger_check_new(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(tree_cpu(t, "team-a", "request"), 0);
    assert_int_equal(tree_cpu(t, "team-a", "runtime"), 0);
    /* reserved: request, used and runtime 600m */
    assert_int_equal(kq_ledger_admit(f->l, &a, why, sizeof why, NULL), 0);
    assert_int_equal(tree_cpu(t, "team-a", "request"), 600);
    assert_int_equal(tree_cpu(t, "team-a", "used"), 600);
    assert_int_equal(tree_cpu(t, "team-a", "runtime"), 600);
    /* b: 600 + 600 = 1200m, over max 1000m (and over runtime): refused, and its request
     * does not stay */
    assert_int_equal(kq_ledger_check_new(f->l, &b, why, sizeof why, NULL), KQ_EDENIED);
    assert_int_equal(kq_ledger_admit(f->l, &b, why, sizeof why, NULL), KQ_EDENIED);
    assert_int_equal(tree_cpu(t, "team-a", "request"), 600);
    assert_int_equal(tree_cpu(t, "team-a", "used"), 600);
    /* d: 600 + 300 = 900m is within max, but team-a would ask 900m and sharing gives it
     * at most 4000 * 1000/5000 = 800m (team-b hungry for the rest): over runtime, refused */
    assert_int_equal(kq_ledger_admit(f->l, &d, why, sizeof why, NULL), KQ_EDENIED);
    assert_non_null(strstr(why, "runtime"));
    assert_int_equal(tree_cpu(t, "team-a", "request"), 600);
    /* c: 600 + 200 = 800m: asks 800m, gets 800m, fits exactly */
    assert_int_equal(kq_ledger_admit(f->l, &c, why, sizeof why, NULL), 0);
    assert_int_equal(tree_cpu(t, "team-a", "used"), 800);
    assert_int_equal(tree_cpu(t, "team-a", "request"), 800);
    assert_int_equal(tree_cpu(t, "team-a", "runtime"), 800);
    /* the watch shows a: counted once in the tree too */
    kq_ledger_observe(f->l, &a);
    assert_int_equal(tree_cpu(t, "team-a", "used"), 800);
    assert_int_equal(tree_cpu(t, "team-a", "request"), 800);
    /* c never came: its reservation ends, its request and used leave the group */
    kq_ledger_set_admit_ttl_ms(f->l, 0);
    assert_int_equal(kq_ledger_expire_admitted(f->l), 1);
    assert_int_equal(tree_cpu(t, "team-a", "used"), 600);
    assert_int_equal(tree_cpu(t, "team-a", "request"), 600);
    kq_ledger_remove(f->l, "a");
    kq_ledger_remove(f->l, "hog");
    assert_int_equal(tree_cpu(t, "team-a", "used"), 0);
    assert_int_equal(tree_cpu(t, "team-a", "request"), 0);
    assert_int_equal(tree_cpu(t, "team-b", "request"), 0);
    expect_empty(f);
    kq_pod_clear(&hog);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&c);
    kq_pod_clear(&d);
    kq_ledger_free(f->l); /* before the tree it borrows */
    f->l = kq_ledger_new(f->ugm, OURS);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------ DRA ResourceClaims -- */

/* Issue 39: a pod is charged its containers and the devices of its ResourceClaims, a
 * shared claim once (ledger.h "DRA ResourceClaims"). */

#define DGPU "gpu.example.com.deviceclass.resource.k8s.io/devices"

static const char DRA_YAML[] =
    "partitions:\n"
    "  - name: default\n"
    "    queues:\n"
    "      - name: root\n"
    "        queues:\n"
    "          - name: default\n"
    "          - name: gpu\n"
    "            resources:\n"
    "              max:\n"
    "                " DGPU ": 2\n";

typedef struct dfx {
    kq_config_t *cfg;
    kq_ugm_t *ugm;
    kq_ledger_t *l;
    kq_claims_t *claims;
} dfx_t;

static dfx_t *dfx_new(void)
{
    dfx_t *f = calloc(1, sizeof(*f));
    assert_non_null(f->cfg = test_config(DRA_YAML));
    assert_non_null(f->ugm = kq_ugm_new("default"));
    assert_int_equal(kq_ugm_set_config(f->ugm, f->cfg), 0);
    assert_non_null(f->l = kq_ledger_new(f->ugm, OURS));
    assert_non_null(f->claims = kq_claims_new());
    kq_ledger_set_claims(f->l, f->claims);
    return f;
}

static void dfx_free(dfx_t *f)
{
    kq_ledger_free(f->l);
    kq_claims_free(f->claims);
    kq_ugm_free(f->ugm);
    kq_config_unref(f->cfg);
    free(f);
}

/* A claim ns/name of n gpus (ExactCount), allocated `alloc` devices when alloc >= 0. */
static void claim_put(dfx_t *f, const char *name, int n, int alloc)
{
    char res[1024] = "", *j = NULL;
    for (int i = 0; i < alloc; i++)
        snprintf(res + strlen(res), sizeof(res) - strlen(res), "%s{\"request\":\"r\",\"device\":\"g%d\"}",
                 i ? "," : "", i);
    assert_true(asprintf(&j, "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ns\",\"uid\":\"cu-%s\"},"
                             "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":"
                             "\"gpu.example.com\",\"count\":%d}}]}}%s%s%s}",
                         name, name, n, alloc >= 0 ? ",\"status\":{\"allocation\":{\"devices\":{\"results\":[" : "",
                         alloc >= 0 ? res : "", alloc >= 0 ? "]}}}" : "") > 0);
    kq_claim_t c;
    char err[256];
    assert_int_equal(kq_claim_parse_text(j, strlen(j), &c, err, sizeof(err)), 0);
    free(j);
    assert_int_equal(kq_claims_put(f->claims, &c, NULL), 0);
    (void)kq_ledger_claim_changed(f->l, "ns", name);
}

static void claim_del(dfx_t *f, const char *name)
{
    assert_true(kq_claims_delete(f->claims, "ns", name));
    (void)kq_ledger_claim_changed(f->l, "ns", name);
}

/* A pod of `user` in root.gpu using claim `claim` (NULL: a template's claim not made yet). */
static kq_pod_t dpod(const char *uid, const char *user, int64_t created, const char *claim, const char *node)
{
    kq_pod_t p = mk(uid, "root.gpu", user, 100, node);
    p.created = created;
    p.claims = calloc(1, sizeof(char *));
    p.claims[0] = claim ? strdup(claim) : NULL;
    p.n_claims = 1;
    return p;
}

static void observe(dfx_t *f, const char *uid, const char *user, int64_t created, const char *claim, const char *node)
{
    kq_pod_t p = dpod(uid, user, created, claim, node);
    kq_ledger_observe(f->l, &p);
    kq_pod_clear(&p);
}

static int64_t user_res(kq_ugm_t *ugm, const char *user, const char *res)
{
    json_t *v = kq_ugm_user_json(ugm, user);
    if (v == NULL)
        return 0;
    int64_t r = res_value(json_object_get(json_object_get(v, "queues"), "resourceUsage"), res);
    json_decref(v);
    return r;
}

static int64_t gpus(dfx_t *f, const char *user)
{
    return user_res(f->ugm, user, DGPU);
}

static int64_t queue_gpus(dfx_t *f, const char *field)
{
    json_t *v = kq_ugm_queues_json(f->ugm);
    const json_t *q = find_queue(v, NULL, "root.gpu");
    assert_non_null(q);
    int64_t r = res_value(json_object_get(q, field), DGPU);
    json_decref(v);
    return r;
}

/* A bound pod is charged its claim's devices; the allocation replaces what it may take;
 * deleting the pod releases them. */
static void test_dra_bound_pod_charged(void **state)
{
    (void)state;
    dfx_t *f = dfx_new();
    claim_put(f, "c", 2, -1);
    observe(f, "p1", "alice", 100, "c", "n1");
    assert_int_equal(gpus(f, "alice"), 2);
    assert_int_equal(user_res(f->ugm, "alice", "cpu"), 100);
    assert_int_equal(queue_gpus(f, "allocatedResource"), 2);
    claim_put(f, "c", 2, 1); /* allocated one device only (All-like) */
    assert_int_equal(gpus(f, "alice"), 1);
    kq_ledger_remove(f->l, "p1");
    assert_int_equal(gpus(f, "alice"), 0);
    assert_int_equal(queue_gpus(f, "allocatedResource"), 0);
    dfx_free(f);
}

/* kube-controller-manager creates a template's claim after the pod, the scheduler allocates
 * at bind: a counted pod's charge follows the claim (grows, shrinks, goes with the claim). */
static void test_dra_claim_after_pod(void **state)
{
    (void)state;
    dfx_t *f = dfx_new();
    observe(f, "p1", "alice", 100, NULL, "n1"); /* bound, template claim not made: nothing known */
    assert_int_equal(gpus(f, "alice"), 0);
    assert_int_equal(user_res(f->ugm, "alice", "cpu"), 100);
    observe(f, "p1", "alice", 100, "p1-gpu", "n1"); /* status names the claim; not listed yet */
    assert_int_equal(gpus(f, "alice"), 0);
    claim_put(f, "p1-gpu", 3, -1); /* listed: what it may take */
    assert_int_equal(gpus(f, "alice"), 3);
    claim_put(f, "p1-gpu", 3, 3); /* allocated */
    assert_int_equal(gpus(f, "alice"), 3);
    claim_put(f, "p1-gpu", 3, -1); /* deallocated: back to what it may take */
    assert_int_equal(gpus(f, "alice"), 3);
    claim_del(f, "p1-gpu"); /* deleted: released */
    assert_int_equal(gpus(f, "alice"), 0);
    assert_int_equal(user_res(f->ugm, "alice", "cpu"), 100);
    kq_ledger_remove(f->l, "p1");
    assert_int_equal(user_res(f->ugm, "alice", "cpu"), 0);
    dfx_free(f);
}

/* A claim shared by two users' pods is charged once, to the earliest-created counted pod,
 * whichever is seen first; it moves to the other when that one ends, and is released
 * with the last. */
static void test_dra_shared_claim_once(void **state)
{
    (void)state;
    for (int order = 0; order < 2; order++) {
        dfx_t *f = dfx_new();
        claim_put(f, "shared", 2, 2);
        if (order == 0) {
            observe(f, "p-alice", "alice", 100, "shared", "n1");
            observe(f, "p-bob", "bob", 200, "shared", "n2");
        } else {
            observe(f, "p-bob", "bob", 200, "shared", "n2");
            assert_int_equal(gpus(f, "bob"), 2); /* the only counted one: bob's */
            observe(f, "p-alice", "alice", 100, "shared", "n1");
        }
        assert_int_equal(gpus(f, "alice"), 2);
        assert_int_equal(gpus(f, "bob"), 0);
        assert_int_equal(queue_gpus(f, "allocatedResource"), 2);
        kq_ledger_remove(f->l, "p-alice");
        assert_int_equal(gpus(f, "alice"), 0);
        assert_int_equal(gpus(f, "bob"), 2);
        kq_ledger_remove(f->l, "p-bob");
        assert_int_equal(queue_gpus(f, "allocatedResource"), 0);
        dfx_free(f);
    }
}

/* Filter, bind and the gate check the full charge; a claim not known yet makes the pod
 * wait for it; a claim over the queue's max never fits; a shared claim already charged
 * costs its second pod nothing. */
static void test_dra_check_and_assume(void **state)
{
    (void)state;
    dfx_t *f = dfx_new();
    char reason[256];
    kq_denial_t kind;
    kq_pod_t tmpl = dpod("p0", "alice", 50, NULL, NULL);
    assert_int_equal(kq_ledger_check(f->l, &tmpl, reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_non_null(strstr(reason, "waiting for its ResourceClaim"));
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(kq_ledger_assume(f->l, &tmpl, reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_int_equal(kq_ledger_reserve(f->l, &tmpl, reason, sizeof(reason), &kind), KQ_EDENIED);
    kq_pod_clear(&tmpl);

    kq_pod_t p1 = dpod("p1", "alice", 100, "c3", NULL);
    assert_int_equal(kq_ledger_check(f->l, &p1, reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_non_null(strstr(reason, "waiting for its ResourceClaim ns/c3"));
    claim_put(f, "c3", 3, -1);
    assert_int_equal(kq_ledger_check(f->l, &p1, reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_NEVER_FITS); /* 3 devices against a max of 2 */
    kq_pod_clear(&p1);

    claim_put(f, "c2", 2, -1);
    kq_pod_t a = dpod("a", "alice", 100, "c2", NULL);
    kq_pod_t b = dpod("b", "bob", 200, "c2", NULL); /* shares c2 */
    claim_put(f, "c1", 1, -1);
    kq_pod_t c = dpod("c", "carol", 300, "c1", NULL);
    assert_int_equal(kq_ledger_check(f->l, &a, reason, sizeof(reason), &kind), 0);
    assert_int_equal(kq_ledger_assume(f->l, &a, reason, sizeof(reason), &kind), 0);
    assert_int_equal(gpus(f, "alice"), 2);
    /* the queue is full: carol's one device does not fit, bob's share of c2 does */
    assert_int_equal(kq_ledger_check(f->l, &c, reason, sizeof(reason), &kind), KQ_EDENIED);
    assert_int_equal(kind, KQ_DENIAL_OVER_LIMIT);
    assert_int_equal(kq_ledger_assume(f->l, &b, reason, sizeof(reason), &kind), 0);
    assert_int_equal(gpus(f, "bob"), 0);
    assert_int_equal(queue_gpus(f, "allocatedResource"), 2);
    /* bind looks the pod up: its own request comes back, the claim is added once */
    kq_pod_t looked;
    assert_int_equal(kq_ledger_lookup(f->l, "a", &looked), 0);
    assert_int_equal(kq_resource_get(&looked.request, DGPU, NULL), 0);
    assert_int_equal(kq_ledger_assume(f->l, &looked, reason, sizeof(reason), &kind), 0); /* counted already */
    assert_int_equal(gpus(f, "alice"), 2);
    kq_pod_clear(&looked);
    /* alice's pod's bind failed: the claim moves to bob's (counted) pod, unchecked */
    assert_int_equal(kq_ledger_forget(f->l, "a"), 0);
    assert_int_equal(gpus(f, "alice"), 0);
    assert_int_equal(gpus(f, "bob"), 2);
    /* the queue holds 2 devices (bob's); alice's pod still fits: it would take the claim
     * over (earlier), a move, not an addition, but is checked for it as if counted */
    assert_int_equal(kq_ledger_check(f->l, &a, reason, sizeof(reason), &kind), KQ_EDENIED);
    kq_ledger_remove(f->l, "b");
    assert_int_equal(queue_gpus(f, "allocatedResource"), 0);
    assert_int_equal(kq_ledger_assume(f->l, &c, reason, sizeof(reason), &kind), 0);
    assert_int_equal(gpus(f, "carol"), 1);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&c);
    dfx_free(f);
}

/* A pending pod's claim devices are in its queue's pending resources and follow the claim. */
static void test_dra_pending(void **state)
{
    (void)state;
    dfx_t *f = dfx_new();
    observe(f, "p1", "alice", 100, "c", NULL);
    assert_int_equal(queue_gpus(f, "pendingResource"), 0);
    claim_put(f, "c", 2, -1);
    assert_int_equal(queue_gpus(f, "pendingResource"), 2);
    observe(f, "p1", "alice", 100, "c", "n1");
    assert_int_equal(queue_gpus(f, "pendingResource"), 0);
    assert_int_equal(queue_gpus(f, "allocatedResource"), 2);
    kq_ledger_remove(f->l, "p1");
    assert_int_equal(queue_gpus(f, "allocatedResource"), 0);
    dfx_free(f);
}

/* Restart / event order: every order of claim and pod events (a relist lists claims and
 * pods in any order, the watch interleaves them) gives the same usage. */
typedef struct ev {
    int kind; /* 0 claim put, 1 pod observe */
    const char *name, *user;
    int64_t created;
    int n, alloc;
} ev_t;

static void apply(dfx_t *f, const ev_t *e)
{
    if (e->kind == 0)
        claim_put(f, e->name, e->n, e->alloc);
    else
        observe(f, e->name, e->user, e->created, e->n == 1 ? "shared" : "own", "n1");
}

static void test_dra_event_order(void **state)
{
    (void)state;
    const ev_t evs[] = {
        {0, "shared", NULL, 0, 2, 2},
        {0, "own", NULL, 0, 1, -1},
        {1, "pa", "alice", 100, 1, 0},
        {1, "pb", "bob", 200, 1, 0},
        {1, "pc", "bob", 300, 2, 0},
    };
    int idx[5] = {0, 1, 2, 3, 4};
    int perms = 0;
    /* every permutation of the five events (Heap's algorithm, iterative) */
    int c[5] = {0};
    for (int i = 0;;) {
        dfx_t *f = dfx_new();
        for (int k = 0; k < 5; k++)
            apply(f, &evs[idx[k]]);
        if (gpus(f, "alice") != 2 || gpus(f, "bob") != 1 || queue_gpus(f, "allocatedResource") != 3)
            fail_msg("order %d %d %d %d %d: alice %lld bob %lld", idx[0], idx[1], idx[2], idx[3], idx[4],
                     (long long)gpus(f, "alice"), (long long)gpus(f, "bob"));
        dfx_free(f);
        perms++;
        while (i < 5 && c[i] >= i) {
            c[i] = 0;
            i++;
        }
        if (i >= 5)
            break;
        int j = i % 2 == 0 ? 0 : c[i];
        int t = idx[j];
        idx[j] = idx[i];
        idx[i] = t;
        c[i]++;
        i = 0;
    }
    assert_int_equal(perms, 120);
}

/* A relist (a restart's first list) rebuilds the same usage; a claim gone from a relist of
 * claims releases its devices. */
static void test_dra_relist(void **state)
{
    (void)state;
    dfx_t *f = dfx_new();
    claim_put(f, "shared", 2, 2);
    observe(f, "pa", "alice", 100, "shared", "n1");
    observe(f, "pb", "bob", 200, "shared", "n1");
    kq_ledger_resync_begin(f->l);
    observe(f, "pb", "bob", 200, "shared", "n1"); /* pa is gone */
    kq_ledger_resync_end(f->l);
    assert_int_equal(gpus(f, "alice"), 0);
    assert_int_equal(gpus(f, "bob"), 2);
    kq_claims_resync_begin(f->claims);
    assert_int_equal(kq_claims_resync_end(f->claims, NULL, NULL), 1);
    (void)kq_ledger_claim_changed(f->l, "ns", "shared");
    assert_int_equal(gpus(f, "bob"), 0);
    kq_ledger_remove(f->l, "pb");
    dfx_free(f);
}


/* The gate's fair order costs a release by what the pod is charged (gating.c): the
 * reservation hands back the set it counted, and kq_ledger_charge says what a pod not
 * counted would be charged now. A pod sharing a claim another counted pod holds is charged
 * its containers only; a claim not known yet is charged nothing (the reservation waits). */
static void test_dra_charge_for_the_gate(void **state)
{
    (void)state;
    dfx_t *f = dfx_new();
    char reason[256];
    kq_denial_t kind;
    claim_put(f, "c2", 2, -1);
    kq_pod_t a = dpod("a", "alice", 100, "c2", NULL), b = dpod("b", "bob", 200, "c2", NULL);
    kq_pod_t w = dpod("w", "bob", 300, "later", NULL);
    kq_ledger_observe(f->l, &a);
    kq_ledger_observe(f->l, &b);
    kq_resource_t ch = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_ledger_charge(f->l, &b, &ch), 0); /* nobody counted: b would carry it */
    assert_int_equal(kq_resource_get(&ch, DGPU, NULL), 2);
    assert_int_equal(kq_resource_get(&ch, "cpu", NULL), 100);
    assert_int_equal(kq_ledger_charge(f->l, &w, &ch), 0); /* its claim is not known: nothing */
    assert_int_equal(kq_resource_get(&ch, DGPU, NULL), 0);
    assert_int_equal(kq_ledger_reserve_charged(f->l, &w, &ch, reason, sizeof(reason), &kind), KQ_EDENIED);
    kq_resource_clear(&ch);
    assert_int_equal(kq_ledger_reserve_charged(f->l, &a, &ch, reason, sizeof(reason), &kind), 0);
    assert_int_equal(kq_resource_get(&ch, DGPU, NULL), 2);
    assert_int_equal(kq_resource_get(&ch, "cpu", NULL), 100);
    assert_int_equal(kq_ledger_charge(f->l, &a, &ch), 0); /* counted: what it is counted with */
    assert_int_equal(kq_resource_get(&ch, DGPU, NULL), 2);
    assert_int_equal(kq_ledger_charge(f->l, &b, &ch), 0); /* a holds the claim now */
    assert_int_equal(kq_resource_get(&ch, DGPU, NULL), 0);
    kq_resource_clear(&ch);
    assert_int_equal(kq_ledger_reserve_charged(f->l, &b, &ch, reason, sizeof(reason), &kind), 0);
    assert_int_equal(kq_resource_get(&ch, DGPU, NULL), 0);
    assert_int_equal(kq_resource_get(&ch, "cpu", NULL), 100);
    assert_int_equal(queue_gpus(f, "allocatedResource"), 2);
    kq_resource_free(&ch);
    kq_pod_clear(&a);
    kq_pod_clear(&b);
    kq_pod_clear(&w);
    dfx_free(f);
}

/* The pod that had a shared claim first keeps it: status.reservedFor (kube-scheduler's
 * order of binding) comes before creationTimestamp, so a pod created earlier that joins the
 * claim later neither takes it over nor is checked for it. */
/* ---- metering sees the charge (issue 39) ----
 * What src/control/sync.c does: after each pod event the bound pod is metered with its
 * charge (kq_ledger_with_charge), and after each ledger call the pods recharged are handed
 * to metering as resizes (the charge hook, kq_ledger_flush_charges). Metering prices the
 * devices under DGPU as GPUs (gpu-resources), at price 1 per device-second, multipliers 1
 * (no node allocatable: utilisation 0); cpu at 1 per cpu-second, so a pod's 100m is 0.1
 * credit a second and the devices dominate whenever it has one. Every expected number is
 * worked out by hand in the comments. */

static double mclock_s;

static double mclock(void *ud)
{
    (void)ud;
    return mclock_s;
}

static void meter_hook(void *ud, const char *uid, const kq_resource_t *charge)
{
    int rc = kq_metering_pod_resized(ud, uid, charge, 0);
    assert_true(rc == 0 || rc == KQ_ENOENT);
}

typedef struct mbind {
    kq_metering_t *m;
    const kq_pod_t *pod;
    double at;
} mbind_t;

static void mbind_use(void *ud, const kq_resource_t *charge)
{
    mbind_t *b = ud;
    kq_pod_t c = *b->pod;
    c.request = *charge; /* borrowed */
    assert_int_equal(kq_metering_pod_bound(b->m, &c, NULL, b->at), 0);
}

static void flush_hook(void *ud)
{
    (void)kq_ledger_flush_charges(ud);
}

static kq_metering_t *dra_meter(dfx_t *f, const char *state_dir)
{
    kq_metering_opts_t o;
    kq_metering_opts_default(&o);
    o.clock = mclock;
    o.state_dir = state_dir;
    o.before_compute = flush_hook; /* as serve wires it */
    o.before_compute_ud = f->l;
    char err[256] = "";
    assert_int_equal(kq_metering_opts_set(&o, "gpu-resources=nvidia.com/gpu," DGPU, err, sizeof(err)), 0);
    kq_metering_t *m = kq_metering_new(&o, err, sizeof(err));
    if (m == NULL)
        fail_msg("kq_metering_new: %s", err);
    kq_ledger_set_charge_hook(f->l, meter_hook, m);
    return m;
}

/* A pod event as the informer applies it: ledger, metering by the charge, flush. */
static void mobserve(dfx_t *f, kq_metering_t *m, const char *uid, const char *user, int64_t created,
                     const char *claim, double bound_at)
{
    kq_pod_t p = dpod(uid, user, created, claim, "n1");
    kq_ledger_observe(f->l, &p);
    mbind_t b = {.m = m, .pod = &p, .at = bound_at};
    assert_int_equal(kq_ledger_with_charge(f->l, &p, mbind_use, &b), 0);
    (void)kq_ledger_flush_charges(f->l);
    kq_pod_clear(&p);
}

static void mremove(dfx_t *f, kq_metering_t *m, const char *uid)
{
    kq_ledger_remove(f->l, uid);
    assert_int_equal(kq_metering_pod_ended(m, uid, 0), 0);
    (void)kq_ledger_flush_charges(f->l);
}

static void mclaim(dfx_t *f, const char *name, int n, int alloc)
{
    claim_put(f, name, n, alloc);
    (void)kq_ledger_flush_charges(f->l);
}

static void assert_charged(kq_metering_t *m, const char *kind, const char *name, double want)
{
    double got = kq_metering_charged(m, kind, name);
    if (got < want - 1e-6 || got > want + 1e-6)
        fail_msg("%s %s charged %.6f, want %.6f", kind, name, got, want);
}

/* One pod, one claim of 2 devices (ExactCount) through its life:
 *   [T, T+10]    not allocated: what it may take, 2     -> 10 s x 2 = 20
 *   [T+10, T+30] allocated 1 device                     -> 20 s x 1 = 20
 *   [T+30, T+40] deallocated: 2 again                   -> 10 s x 2 = 20
 *   [T+40, T+50] claim deleted: cpu only, 0.1 a second  -> 10 s x 0.1 = 1
 * alice: 61. Each step is priced from the moment the claim changed, as a resize. */
static void test_dra_metered_claim_changes(void **state)
{
    (void)state;
    const double T = 1700000000.0;
    dfx_t *f = dfx_new();
    mclock_s = T;
    kq_metering_t *m = dra_meter(f, NULL);
    mclaim(f, "c", 2, -1);
    mobserve(f, m, "p1", "alice", 100, "c", T);
    mclock_s = T + 10;
    mclaim(f, "c", 2, 1);
    assert_charged(m, "user", "alice", 20); /* the interval before, at the old charge */
    mclock_s = T + 30;
    mclaim(f, "c", 2, -1);
    assert_charged(m, "user", "alice", 40);
    mclock_s = T + 40;
    claim_del(f, "c");
    (void)kq_ledger_flush_charges(f->l);
    assert_charged(m, "user", "alice", 60);
    mclock_s = T + 45;
    mobserve(f, m, "p1", "alice", 100, "c", T); /* a pod event changes nothing */
    mclock_s = T + 50;
    mremove(f, m, "p1");
    assert_charged(m, "user", "alice", 61);
    assert_charged(m, "queue", "root.gpu", 61);
    kq_ledger_set_charge_hook(f->l, NULL, NULL);
    kq_metering_free(m);
    dfx_free(f);
}

/* A claim of 2 allocated devices shared by bob's pod (created later, seen first) and
 * alice's: charged once, to the pod the ledger charges it to.
 *   bob   [T, T+10]     the only counted pod: 2 devices    -> 20
 *   alice [T+10, T+30]  earlier-created, takes the claim   -> 20 s x 2 = 40
 *   bob   [T+10, T+30]  cpu only                           -> 20 s x 0.1 = 2
 *   bob   [T+30, T+40]  alice ended: the claim moves back  -> 10 s x 2 = 20
 * alice 40, bob 42, the queue 82: 40 device-seconds x 2 devices, once, plus bob's 2. */
static void test_dra_metered_shared_claim(void **state)
{
    (void)state;
    const double T = 1700000000.0;
    dfx_t *f = dfx_new();
    mclock_s = T;
    kq_metering_t *m = dra_meter(f, NULL);
    mclaim(f, "s", 2, 2);
    mobserve(f, m, "p-bob", "bob", 200, "s", T);
    mclock_s = T + 10;
    mobserve(f, m, "p-alice", "alice", 100, "s", T + 10);
    assert_charged(m, "user", "bob", 20);
    mclock_s = T + 30;
    mremove(f, m, "p-alice");
    assert_charged(m, "user", "alice", 40);
    assert_charged(m, "user", "bob", 22);
    mclock_s = T + 40;
    mremove(f, m, "p-bob");
    assert_charged(m, "user", "alice", 40);
    assert_charged(m, "user", "bob", 42);
    assert_charged(m, "queue", "root", 82);
    kq_ledger_set_charge_hook(f->l, NULL, NULL);
    kq_metering_free(m);
    dfx_free(f);
}

/* Restart: the checkpoint keeps the charge with its devices, and the relist (claims first,
 * then pods, as the informers do) gives the same charge back, so a restart charges what an
 * uninterrupted run would: 3 devices for 30 s = 90, however the run is cut.
 *   [T, T+10] checkpointed at T+10: 30; the process dies at T+15 (those 5 s are lost from
 *   memory and charged again from the checkpoint's time); a new ledger and metering relist
 *   at T+20 and compute at T+30: 30 + 20 s x 3 = 90. */
static void test_dra_metered_restart(void **state)
{
    (void)state;
    const double T = 1700000000.0;
    char tmpl[] = "/tmp/kq-ledger-meter-XXXXXX";
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    dfx_t *f = dfx_new();
    mclock_s = T;
    kq_metering_t *m = dra_meter(f, dir);
    mclaim(f, "c", 3, 3);
    mobserve(f, m, "p1", "alice", 100, "c", T);
    mclock_s = T + 10;
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_charged(m, "user", "alice", 30);
    mclock_s = T + 15;
    kq_ledger_set_charge_hook(f->l, NULL, NULL);
    kq_metering_free(m); /* no thread: no final pass, a crash */
    dfx_free(f);

    /* the checkpoint holds the pod's charge, devices included */
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, KQ_METERING_CHECKPOINT);
    json_error_t je;
    json_t *ck = json_load_file(path, 0, &je);
    assert_non_null(ck);
    json_t *req = json_object_get(json_array_get(json_object_get(ck, "pods"), 0), "request");
    assert_int_equal(json_integer_value(json_object_get(req, DGPU)), 3);
    json_decref(ck);

    f = dfx_new();
    mclock_s = T + 20;
    m = dra_meter(f, dir);
    mclaim(f, "c", 3, 3);
    kq_metering_resync_begin(m);
    mobserve(f, m, "p1", "alice", 100, "c", T);
    kq_metering_resync_end(m);
    mclock_s = T + 30;
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_charged(m, "user", "alice", 90);
    kq_ledger_set_charge_hook(f->l, NULL, NULL);
    kq_metering_free(m);
    dfx_free(f);
    char rm[600];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
}

/* The feed lock: the claim informer (allocations flipping between 1 and 2 devices, each
 * followed by a flush), the pod informer (the pod's events, metered by its charge) and the
 * compute thread run at once; when they stop, metering holds the charge the ledger holds
 * (the last allocation), never an older one handed over late. The checkpoint shows it. */
typedef struct mrace {
    dfx_t *f;
    kq_metering_t *m;
    int rounds;
} mrace_t;

static void *mrace_claims(void *arg)
{
    mrace_t *r = arg;
    for (int i = 0; i < r->rounds; i++)
        mclaim(r->f, "c", 2, 1 + (i & 1)); /* ends on 2: rounds is even */
    return NULL;
}

static void *mrace_pod(void *arg)
{
    mrace_t *r = arg;
    for (int i = 0; i < r->rounds; i++)
        mobserve(r->f, r->m, "p1", "alice", 100, "c", 0);
    return NULL;
}

static void *mrace_compute(void *arg)
{
    mrace_t *r = arg;
    for (int i = 0; i < r->rounds / 10; i++)
        (void)kq_metering_compute_now(r->m);
    return NULL;
}

static void test_dra_metered_concurrent(void **state)
{
    (void)state;
    char tmpl[] = "/tmp/kq-ledger-meter-XXXXXX";
    char *dir = mkdtemp(tmpl);
    assert_non_null(dir);
    dfx_t *f = dfx_new();
    mclock_s = 1700000000.0;
    kq_metering_t *m = dra_meter(f, dir);
    mclaim(f, "c", 2, 1);
    mobserve(f, m, "p1", "alice", 100, "c", 0);
    mrace_t r = {.f = f, .m = m, .rounds = 400};
    pthread_t a, b, c;
    assert_int_equal(pthread_create(&a, NULL, mrace_claims, &r), 0);
    assert_int_equal(pthread_create(&b, NULL, mrace_pod, &r), 0);
    assert_int_equal(pthread_create(&c, NULL, mrace_compute, &r), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    assert_int_equal(gpus(f, "alice"), 2);
    assert_int_equal(kq_metering_compute_now(m), 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, KQ_METERING_CHECKPOINT);
    json_error_t je;
    json_t *ck = json_load_file(path, 0, &je);
    assert_non_null(ck);
    json_t *req = json_object_get(json_array_get(json_object_get(ck, "pods"), 0), "request");
    assert_int_equal(json_integer_value(json_object_get(req, DGPU)), 2);
    json_decref(ck);
    kq_ledger_set_charge_hook(f->l, NULL, NULL);
    kq_metering_free(m);
    dfx_free(f);
    char rm[600];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", dir);
    assert_int_equal(system(rm), 0);
}

/* The same, step by step: while the pod informer hands metering the charge it read (1
 * device), the claim informer allocates a second device and flushes. The flush must wait
 * for the first hand-over (the feed lock), so metering ends with 2 devices, not with the
 * older charge handed over last: 10 s after, the pod has cost 10 x 2 = 20, not 10. The
 * pause only gives the other thread its chance; nothing depends on how long it takes. */
typedef struct forder {
    dfx_t *f;
    kq_metering_t *m;
    const kq_pod_t *pod;
    pthread_t t;
} forder_t;

static void *forder_claim(void *arg)
{
    forder_t *o = arg;
    mclaim(o->f, "c", 2, 2);
    return NULL;
}

static void forder_use(void *ud, const kq_resource_t *charge)
{
    forder_t *o = ud;
    assert_int_equal(kq_resource_get(charge, DGPU, NULL), 1);
    assert_int_equal(pthread_create(&o->t, NULL, forder_claim, o), 0);
    nanosleep(&(struct timespec){.tv_nsec = 100 * 1000000L}, NULL);
    kq_pod_t c = *o->pod;
    c.request = *charge;
    assert_int_equal(kq_metering_pod_bound(o->m, &c, NULL, 0), 0);
}

static void test_dra_metered_feed_order(void **state)
{
    (void)state;
    const double T = 1700000000.0;
    dfx_t *f = dfx_new();
    mclock_s = T;
    kq_metering_t *m = dra_meter(f, NULL);
    mclaim(f, "c", 2, 1);
    mobserve(f, m, "p1", "alice", 100, "c", T);
    kq_pod_t p = dpod("p1", "alice", 100, "c", "n1");
    kq_ledger_observe(f->l, &p); /* the pod's next event, metered as sync.c does */
    forder_t o = {.f = f, .m = m, .pod = &p};
    assert_int_equal(kq_ledger_with_charge(f->l, &p, forder_use, &o), 0);
    pthread_join(o.t, NULL);
    kq_pod_clear(&p);
    mclock_s = T + 10;
    mremove(f, m, "p1");
    assert_charged(m, "user", "alice", 20);
    kq_ledger_set_charge_hook(f->l, NULL, NULL);
    kq_metering_free(m);
    dfx_free(f);
}

/* A bind moves a shared claim (1 allocated device) from bob's running pod to alice's
 * earlier-created one; no pod or claim event follows, so metering learns it at its next
 * compute, which flushes first (before_compute):
 *   bob [T, T+20]     1 device (the bind at T+10 is seen at the compute at T+20) -> 20
 *   bob [T+20, T+30]  cpu only                                                   -> 1
 * bob 21. Late by at most an interval, never lost. */
static void test_dra_metered_bind_path(void **state)
{
    (void)state;
    const double T = 1700000000.0;
    dfx_t *f = dfx_new();
    mclock_s = T;
    kq_metering_t *m = dra_meter(f, NULL);
    mclaim(f, "s", 1, 1);
    mobserve(f, m, "p-bob", "bob", 200, "s", T);
    mclock_s = T + 10;
    kq_pod_t a = dpod("p-alice", "alice", 100, "s", NULL);
    char reason[256];
    kq_denial_t kind;
    assert_int_equal(kq_ledger_assume(f->l, &a, reason, sizeof(reason), &kind), 0);
    kq_pod_clear(&a);
    assert_int_equal(gpus(f, "bob"), 0);
    assert_charged(m, "user", "bob", 0);
    mclock_s = T + 20;
    assert_int_equal(kq_metering_compute_now(m), 0);
    assert_charged(m, "user", "bob", 20);
    mclock_s = T + 30;
    mremove(f, m, "p-bob");
    assert_charged(m, "user", "bob", 21);
    kq_ledger_set_charge_hook(f->l, NULL, NULL);
    kq_metering_free(m);
    dfx_free(f);
}

static void test_dra_reserved_for_order(void **state)
{
    (void)state;
    dfx_t *f = dfx_new();
    const char *claim = "{\"metadata\":{\"name\":\"shared\",\"namespace\":\"ns\",\"uid\":\"cs\"},"
                        "\"spec\":{\"devices\":{\"requests\":[{\"name\":\"r\",\"exactly\":{\"deviceClassName\":"
                        "\"gpu.example.com\",\"count\":2}}]}},\"status\":{\"allocation\":{\"devices\":{\"results\":"
                        "[{\"request\":\"r\",\"device\":\"a\"},{\"request\":\"r\",\"device\":\"b\"}]}},"
                        "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"pb\",\"uid\":\"pb\"}%s]}}";
    char j[2048];
    kq_claim_t c;
    char err[256];
    snprintf(j, sizeof(j), claim, "");
    assert_int_equal(kq_claim_parse_text(j, strlen(j), &c, err, sizeof(err)), 0);
    assert_int_equal(kq_claims_put(f->claims, &c, NULL), 0);
    observe(f, "pb", "bob", 200, "shared", "n1"); /* bob's pod, reserved first */
    assert_int_equal(gpus(f, "bob"), 2);
    /* alice's pod, created earlier, is not reserved yet: it costs nothing at filter and bind */
    kq_pod_t pa = dpod("pa", "alice", 100, "shared", NULL);
    char reason[256];
    kq_denial_t kind;
    assert_int_equal(kq_ledger_check(f->l, &pa, reason, sizeof(reason), &kind), 0);
    assert_int_equal(kq_ledger_assume(f->l, &pa, reason, sizeof(reason), &kind), 0);
    assert_int_equal(gpus(f, "alice"), 0);
    assert_int_equal(gpus(f, "bob"), 2);
    /* the scheduler reserves it for alice's pod too, after bob's: bob keeps the claim */
    snprintf(j, sizeof(j), claim, ",{\"resource\":\"pods\",\"name\":\"pa\",\"uid\":\"pa\"}");
    assert_int_equal(kq_claim_parse_text(j, strlen(j), &c, err, sizeof(err)), 0);
    assert_int_equal(kq_claims_put(f->claims, &c, NULL), 0);
    (void)kq_ledger_claim_changed(f->l, "ns", "shared");
    observe(f, "pa", "alice", 100, "shared", "n1");
    assert_int_equal(gpus(f, "alice"), 0);
    assert_int_equal(gpus(f, "bob"), 2);
    /* bob's pod ends: the claim goes to alice's */
    kq_ledger_remove(f->l, "pb");
    assert_int_equal(gpus(f, "alice"), 2);
    assert_int_equal(gpus(f, "bob"), 0);
    kq_pod_clear(&pa);
    dfx_free(f);
}

int main(void)
{
    kq_log_set_level("error");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_assume_then_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bound_then_assume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_assume_then_forget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_resource_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_delete_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_release_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_terminal_releases, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_change_releases_original, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resync, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pending_balance, setup, teardown),
        cmocka_unit_test_setup_teardown(test_check_and_denials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bound_without_queue, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lookup_keeps_every_field, setup, teardown),
        cmocka_unit_test_setup_teardown(test_parsed_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reload_moves_pods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pod_between_reload_and_apply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_threads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wait_observed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserve_from_watch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reserve_after_relist, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fairshare_follows, setup, teardown),
        cmocka_unit_test_setup_teardown(test_app_of_another_user, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_counts_the_grown_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_of_a_waiting_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_reservation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_dry_run, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_of_a_reserved_gated_pod, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_only_resize_keeps_the_reservation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resize_within_a_quota_group, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_then_watch_counts_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_survives_a_relist, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_two_cannot_exceed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_ttl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_with_tree_runtime, setup, teardown),
        cmocka_unit_test(test_dra_bound_pod_charged),
        cmocka_unit_test(test_dra_claim_after_pod),
        cmocka_unit_test(test_dra_shared_claim_once),
        cmocka_unit_test(test_dra_check_and_assume),
        cmocka_unit_test(test_dra_pending),
        cmocka_unit_test(test_dra_event_order),
        cmocka_unit_test(test_dra_relist),
        cmocka_unit_test(test_dra_reserved_for_order),
        cmocka_unit_test(test_dra_charge_for_the_gate),
        cmocka_unit_test(test_dra_metered_claim_changes),
        cmocka_unit_test(test_dra_metered_shared_claim),
        cmocka_unit_test(test_dra_metered_restart),
        cmocka_unit_test(test_dra_metered_concurrent),
        cmocka_unit_test(test_dra_metered_feed_order),
        cmocka_unit_test(test_dra_metered_bind_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
