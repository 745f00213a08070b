/* Unit tests for quota_tree.c: the seed's worked example, a three-level tree, allow-lent,
 * min scaling after node loss, max caps, parent requests, admission checks that deny with
 * a reason and change nothing, non-preemptible pods, every validation rule (accepted and
 * rejected), group removal, the system group, reclaim listing, the JSON view, randomized
 * invariants (plus incremental == rebuilt from scratch), a reference recomputation kept in
 * this file that the tree must equal after every random operation (in and out of
 * batches, and with hundreds of children under one parent), and a multi-threaded run.
 * Expected numbers are worked out by hand in the comments, never taken from the code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "kubequota/base/log.h"
#include "kubequota/engine/quota_tree.h"
#include "kubequota/engine/resource.h"

static kq_denial_t kind_got; /* the kind of the last denial a test asked for */

/* ------------------------------------------------------------------ helpers */

/* "cpu=100,memory=5" with canonical integers. */
static kq_resource_t R(const char *s)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        assert_non_null(eq);
        *eq = '\0';
        assert_int_equal(kq_resource_set(&r, tok, strtoll(eq + 1, NULL, 10)), 0);
    }
    return r;
}

static int64_t val(const kq_resource_t *r, const char *name, bool *present)
{
    return kq_resource_get(r, name, present);
}

/* Creates or updates a group; fails the test when rejected. */
static void grp(kq_qtree_t *t, const char *name, const char *parent, const char *min, const char *max,
                const char *weight, bool lent, bool is_parent)
{
    kq_qgroup_spec_t s;
    kq_qgroup_spec_init(&s, name);
    s.parent = parent;
    s.min = R(min);
    s.max = R(max);
    s.shared_weight = R(weight);
    s.allow_lent = lent;
    s.is_parent = is_parent;
    char err[512] = "";
    int rc = kq_qtree_set_group(t, &s, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "rejected: %s\n", err);
    assert_int_equal(rc, 0);
}

static void req(kq_qtree_t *t, const char *g, const char *r)
{
    kq_resource_t x = R(r);
    assert_int_equal(kq_qtree_request_add(t, g, &x), 0);
}

static void total(kq_qtree_t *t, const char *r)
{
    kq_resource_t x = R(r);
    kq_qtree_set_cluster_total(t, &x);
}

/* Runtime of `g` in `dim`; the runtime must name it. */
static int64_t rt(kq_qtree_t *t, const char *g, const char *dim)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_qtree_runtime(t, g, &r), 0);
    bool has;
    int64_t v = val(&r, dim, &has);
    assert_true(has);
    return v;
}

static kq_qgroup_info_t info(kq_qtree_t *t, const char *g)
{
    kq_qgroup_info_t i;
    assert_int_equal(kq_qtree_info(t, g, &i), 0);
    return i;
}

/* One resource of one field of a group's info. */
#define IV(t, g, field, dim)                               \
    __extension__({                                        \
        kq_qgroup_info_t iv_ = info((t), (g));             \
        int64_t v_ = val(&iv_.field, (dim), NULL);         \
        kq_qtree_info_free(&iv_);                          \
        v_;                                                \
    })

/* ------------------------------------------------------------------ the seed's example */

/* Cluster 100 units of cpu; A/B/C/D first-level leaves.
 *   A min 20 request 15 -> gets 15 and lends 5;  B min 15 request 20 (needs 5 more);
 *   C min 10 request 50;  D min 15 request 60.   Mins handed out: 15+15+10+15 = 55,
 *   so 45 remain for B/C/D with weights 60/50/80:
 *   first pass 45*60/190 = 14.21, 45*50/190 = 11.84, 45*80/190 = 18.95 -> floors 14/11/18,
 *   2 leftover units by largest remainder (D .95, C .84) -> 14/12/19;
 *   B needs only 5: 9 go back and are shared by C/D 50/80: 3.46/5.54 -> 3/5 + 1 to D -> 3/6.
 *   Runtime: A 15, B 20, C 10+12+3 = 25, D 15+19+6 = 40 (sum 100). */
static void test_seed_example(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    assert_non_null(t);
    total(t, "cpu=100");
    grp(t, "A", NULL, "cpu=20", "", "cpu=10", true, false);
    grp(t, "B", NULL, "cpu=15", "", "cpu=60", true, false);
    grp(t, "C", NULL, "cpu=10", "", "cpu=50", true, false);
    grp(t, "D", NULL, "cpu=15", "", "cpu=80", true, false);
    req(t, "A", "cpu=15");
    req(t, "B", "cpu=20");
    req(t, "C", "cpu=50");
    req(t, "D", "cpu=60");
    assert_int_equal(rt(t, "A", "cpu"), 15);
    assert_int_equal(rt(t, "B", "cpu"), 20);
    assert_int_equal(rt(t, "C", "cpu"), 25);
    assert_int_equal(rt(t, "D", "cpu"), 40);
    assert_int_equal(rt(t, "default", "cpu"), 0);

    /* The first pass alone, seen when B is not capped (request 100): 15+14, 10+12, 15+19. */
    req(t, "B", "cpu=80");
    assert_int_equal(rt(t, "A", "cpu"), 15);
    assert_int_equal(rt(t, "B", "cpu"), 29);
    assert_int_equal(rt(t, "C", "cpu"), 22);
    assert_int_equal(rt(t, "D", "cpu"), 34);
    kq_qtree_free(t);
}

/* The seed's example loaded inside a batch (the order an informer's LIST would give:
 * total, groups, pods): reads inside the batch and after it give the same numbers as
 * above, and a change after the batch is applied at once again. */
static void test_batch_seed_example(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    assert_non_null(t);
    kq_qtree_batch_begin(t);
    kq_qtree_batch_begin(t); /* nested: only the outer end recomputes */
    total(t, "cpu=100");
    grp(t, "A", NULL, "cpu=20", "", "cpu=10", true, false);
    grp(t, "B", NULL, "cpu=15", "", "cpu=60", true, false);
    grp(t, "C", NULL, "cpu=10", "", "cpu=50", true, false);
    grp(t, "D", NULL, "cpu=15", "", "cpu=80", true, false);
    req(t, "A", "cpu=15");
    req(t, "B", "cpu=20");
    req(t, "C", "cpu=50");
    /* a read completes what is pending: with D asking nothing yet, B and C get all they
     * ask (15 + 5 and 10 + 40) and A keeps 15 */
    assert_int_equal(rt(t, "C", "cpu"), 50);
    assert_int_equal(rt(t, "B", "cpu"), 20);
    assert_int_equal(rt(t, "D", "cpu"), 0);
    req(t, "D", "cpu=60");
    kq_qtree_batch_end(t);
    assert_int_equal(rt(t, "A", "cpu"), 15);
    assert_int_equal(rt(t, "B", "cpu"), 20);
    assert_int_equal(rt(t, "C", "cpu"), 25);
    assert_int_equal(rt(t, "D", "cpu"), 40);
    assert_int_equal(IV(t, "root", request, "cpu"), 15 + 20 + 50 + 60);
    kq_qtree_batch_end(t);
    kq_qtree_batch_end(t); /* unbalanced end: ignored */
    req(t, "B", "cpu=80");
    assert_int_equal(rt(t, "B", "cpu"), 29);
    assert_int_equal(rt(t, "C", "cpu"), 22);
    assert_int_equal(rt(t, "D", "cpu"), 34);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ three levels */

/* Cluster cpu 1000.
 *   P1 parent min 600 max 900 (weight = max 900)
 *     L1 min 300 max 900, request 200           -> asks 200
 *     L2 min 200 max 900, request 700           -> asks 700
 *     P3 parent min 100 max 200
 *       L3 min 100 max 200, request 300         -> asks 200
 *     P1 request 200+700+200 = 1100, asks min(1100, 900) = 900
 *   P2 leaf min 200 max 400, request 500       -> asks 400
 * Root: P1 600 + P2 200 first; 200 shared by weight 900/400:
 *   138.46 -> 138, 61.54 -> 61, leftover 1 to P2 (remainder 700 > 600) -> P1 738, P2 262.
 * P1 (738): L1 200, L2 200, P3 100 first; 238 shared by L2 (w 900) and P3 (w 200):
 *   194.73 -> 194, 43.27 -> 43, leftover 1 to L2 -> L2 395, P3 143, L1 200.
 * P3 (143): L3 100 first, then 43 more (cap 100) -> 143. */
static void test_three_levels(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=1000");
    grp(t, "P1", NULL, "cpu=600", "cpu=900", "", true, true);
    grp(t, "P2", "root", "cpu=200", "cpu=400", "", true, false);
    grp(t, "L1", "P1", "cpu=300", "cpu=900", "", true, false);
    grp(t, "L2", "P1", "cpu=200", "cpu=900", "", true, false);
    grp(t, "P3", "P1", "cpu=100", "cpu=200", "", true, true);
    grp(t, "L3", "P3", "cpu=100", "cpu=200", "", true, false);
    req(t, "L1", "cpu=200");
    req(t, "L2", "cpu=700");
    req(t, "L3", "cpu=300");
    req(t, "P2", "cpu=500");
    assert_int_equal(rt(t, "P1", "cpu"), 738);
    assert_int_equal(rt(t, "P2", "cpu"), 262);
    assert_int_equal(rt(t, "L1", "cpu"), 200);
    assert_int_equal(rt(t, "L2", "cpu"), 395);
    assert_int_equal(rt(t, "P3", "cpu"), 143);
    assert_int_equal(rt(t, "L3", "cpu"), 143);
    assert_int_equal(rt(t, "root", "cpu"), 1000);
    kq_qgroup_info_t i = info(t, "P1");
    assert_int_equal(val(&i.request, "cpu", NULL), 1100);
    i = info(t, "P3");
    assert_int_equal(val(&i.request, "cpu", NULL), 200);
    assert_int_equal(i.depth, 2);
    i = info(t, "root");
    assert_int_equal(val(&i.request, "cpu", NULL), 1300); /* 900 + 400 + default 0 */

    /* L2's pods finish: P1 asks 200+0+200 = 400; root: P1 400, P2 200 + 200 more (cap 200). */
    kq_resource_t r = R("cpu=700");
    assert_int_equal(kq_qtree_request_sub(t, "L2", &r), 0);
    assert_int_equal(rt(t, "P1", "cpu"), 400);
    assert_int_equal(rt(t, "P2", "cpu"), 400);
    assert_int_equal(rt(t, "L2", "cpu"), 0);
    assert_int_equal(rt(t, "L1", "cpu"), 200);
    assert_int_equal(rt(t, "L3", "cpu"), 200);
    kq_qtree_free(t);
}

/* Resources are shared independently: memory has its own numbers. */
static void test_dimensions_independent(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=100,memory=1000");
    grp(t, "A", NULL, "cpu=50", "", "cpu=1,memory=3", true, false);
    grp(t, "B", NULL, "memory=100", "", "cpu=1,memory=1", true, false);
    req(t, "A", "cpu=100,memory=1000");
    req(t, "B", "cpu=100,memory=1000");
    /* cpu: A 50 + B 0 first, 50 shared 1:1 -> A 75, B 25.
     * memory: A 0 + B 100 first, 900 shared 3:1 -> A 675, B 100 + 225 = 325. */
    assert_int_equal(rt(t, "A", "cpu"), 75);
    assert_int_equal(rt(t, "B", "cpu"), 25);
    assert_int_equal(rt(t, "A", "memory"), 675);
    assert_int_equal(rt(t, "B", "memory"), 325);
    /* A resource no node offers is not governed by runtime (max still is). */
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_qtree_runtime(t, "A", &r), 0);
    bool has = true;
    val(&r, "nvidia.com/gpu", &has);
    assert_false(has);
    kq_qtree_free(t);
}

/* A group without weight or max weighs the cluster total, and follows it when it changes,
 * even where the parent's runtime does not change. */
static void test_default_weight_follows_total(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=1000");
    grp(t, "P", NULL, "", "cpu=100", "", true, true);
    grp(t, "K1", "P", "", "", "", true, false);         /* weight = total */
    grp(t, "K2", "P", "", "", "cpu=1000", true, false); /* weight 1000 */
    req(t, "K1", "cpu=100");
    req(t, "K2", "cpu=100");
    /* P asks min(200, 100) = 100 and gets it; K1:K2 = 1000:1000 -> 50/50. */
    assert_int_equal(rt(t, "P", "cpu"), 100);
    assert_int_equal(rt(t, "K1", "cpu"), 50);
    assert_int_equal(rt(t, "K2", "cpu"), 50);
    /* Total 2000: P still 100; K1:K2 = 2000:1000 -> 66.67/33.33 -> 66/33 + 1 to K1. */
    total(t, "cpu=2000");
    assert_int_equal(rt(t, "P", "cpu"), 100);
    assert_int_equal(rt(t, "K1", "cpu"), 67);
    assert_int_equal(rt(t, "K2", "cpu"), 33);
    /* a weight of 0 in every resource is no weight (Koordinator's GetSharedWeight falls
     * back to the max, here none: the total), so K1:K2 = 2000:2000 -> 50/50 */
    grp(t, "K2", "P", "", "", "cpu=0", true, false);
    assert_int_equal(rt(t, "K1", "cpu"), 50);
    assert_int_equal(rt(t, "K2", "cpu"), 50);
    /* a weight of 0 in cpu beside another resource's: gets no cpu from sharing, even with
     * nobody else hungry */
    grp(t, "K2", "P", "", "", "cpu=0,memory=1", true, false);
    assert_int_equal(rt(t, "K1", "cpu"), 100);
    assert_int_equal(rt(t, "K2", "cpu"), 0);
    kq_resource_t r = R("cpu=100");
    assert_int_equal(kq_qtree_request_sub(t, "K1", &r), 0);
    assert_int_equal(rt(t, "K2", "cpu"), 0);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ allow-lent */

static void test_allow_lent_false(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=100");
    grp(t, "X", NULL, "cpu=40", "", "", false, false);
    grp(t, "Y", NULL, "cpu=10", "", "", true, false);
    req(t, "Y", "cpu=100");
    /* X is idle but keeps its whole min: Y gets 100 - 40. */
    assert_int_equal(rt(t, "X", "cpu"), 40);
    assert_int_equal(rt(t, "Y", "cpu"), 60);
    kq_qgroup_info_t i = info(t, "root");
    assert_int_equal(val(&i.request, "cpu", NULL), 140); /* X asks its min */

    /* Lending again: X idle gets 0, Y everything. */
    grp(t, "X", NULL, "cpu=40", "", "", true, false);
    assert_int_equal(rt(t, "X", "cpu"), 0);
    assert_int_equal(rt(t, "Y", "cpu"), 100);

    /* A non-lending child under a lending parent: the parent asks for the child's min. */
    grp(t, "P", NULL, "cpu=30", "", "", true, true);
    grp(t, "K", "P", "cpu=20", "", "", false, false);
    /* root: X 0, Y 10, P min(20, 30) = 20 first; 70 left; Y hungry (cap 90) alone -> Y 80. */
    assert_int_equal(rt(t, "P", "cpu"), 20);
    assert_int_equal(rt(t, "K", "cpu"), 20);
    assert_int_equal(rt(t, "Y", "cpu"), 80);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ min scaling */

static void test_min_scaling(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=200");
    grp(t, "A", NULL, "cpu=50", "", "", true, true);
    grp(t, "A1", "A", "cpu=30", "", "", true, false);
    grp(t, "A2", "A", "cpu=20", "", "", true, false);
    grp(t, "B", NULL, "cpu=30", "", "", true, false);
    grp(t, "C", NULL, "cpu=20", "", "", true, false);
    req(t, "A1", "cpu=1000");
    req(t, "A2", "cpu=1000");
    req(t, "B", "cpu=1000");
    req(t, "C", "cpu=1000");
    kq_qgroup_info_t i = info(t, "A");
    assert_int_equal(val(&i.scaled_min, "cpu", NULL), 50);

    /* Nodes lost: total 85 < 100 of first-level mins. Koordinator truncates each
     * (ScaleMinQuotaManager.getScaledMinQuota): 85*50/100 = 42.5, 25.5, 17 -> 42/25/17 = 84.
     * Everyone is hungry: the 1 left is shared by weight (no weight, no max: each weighs
     * the total, equal), a tie on remainder that A wins by name -> runtimes 43/25/17 = 85. */
    total(t, "cpu=85");
    assert_int_equal(IV(t, "A", scaled_min, "cpu"), 42);
    assert_int_equal(IV(t, "B", scaled_min, "cpu"), 25);
    assert_int_equal(IV(t, "C", scaled_min, "cpu"), 17);
    assert_int_equal(IV(t, "default", scaled_min, "cpu"), 0);
    /* Below, against A's runtime 43 (Koordinator scales a quota's children against its
     * runtime): 43*30/50 = 25.8, 43*20/50 = 17.2 -> 25/17, and the 1 left goes to A1 (tie,
     * name) -> runtimes 26/17. */
    assert_int_equal(IV(t, "A1", scaled_min, "cpu"), 25);
    assert_int_equal(IV(t, "A2", scaled_min, "cpu"), 17);
    assert_int_equal(rt(t, "A", "cpu"), 43);
    assert_int_equal(rt(t, "B", "cpu"), 25);
    assert_int_equal(rt(t, "C", "cpu"), 17);
    assert_int_equal(rt(t, "A1", "cpu"), 26);
    assert_int_equal(rt(t, "A2", "cpu"), 17);
    /* min itself is unchanged */
    assert_int_equal(IV(t, "A", min, "cpu"), 50);

    /* Runtime denies first while runtime == scaled min ... */
    char reason[256];
    kq_resource_t r = R("cpu=18");
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "A2", &r, false, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group A2: cpu 0 used + 18m requested > 17m runtime (runtime = what the group may use now: its min plus what it can borrow); needs 1m more cpu");
    assert_int_equal(kind_got, KQ_DENIAL_OVER_RUNTIME);
    /* ... A1's pods leave: A's 43 go to A2 (17 first, 26 more), and a non-preemptible pod is
     * still held to the scaled min 17 while a preemptible one fits. */
    kq_resource_t a1 = R("cpu=1000");
    assert_int_equal(kq_qtree_request_sub(t, "A1", &a1), 0);
    assert_int_equal(rt(t, "A2", "cpu"), 43);
    assert_int_equal(kq_qtree_check(t, "A2", &r, false, reason, sizeof reason, NULL), 0);
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "A2", &r, true, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group A2: non-preemptible cpu 0 used + 18m requested > 17m min; 18m requested alone is over the min: the pod can never fit");
    assert_int_equal(kind_got, KQ_DENIAL_NEVER_FITS);
    r = R("cpu=17");
    assert_int_equal(kq_qtree_check(t, "A2", &r, true, reason, sizeof reason, NULL), 0);

    /* Nodes back: mins are mins again; the 100 left over is shared by weight (no max and no
     * weight: each weighs the total, 200): 33.3 each -> 33 + the leftover unit to A (tie, name)
     * -> A 50+34 = 84, B 30+33 = 63, C 20+33 = 53. */
    assert_int_equal(kq_qtree_request_add(t, "A1", &a1), 0);
    total(t, "cpu=200");
    assert_int_equal(IV(t, "A", scaled_min, "cpu"), 50);
    assert_int_equal(IV(t, "A1", scaled_min, "cpu"), 30);
    assert_int_equal(rt(t, "A", "cpu"), 84);
    assert_int_equal(rt(t, "B", "cpu"), 63);
    assert_int_equal(rt(t, "C", "cpu"), 53);
    assert_int_equal(rt(t, "default", "cpu"), 0);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ Koordinator's own cases */

/* Inputs and expected outputs copied from koordinator-sh/koordinator (master a7a1b76b,
 * pkg/scheduler/plugins/elasticquota/core): runtime_quota_calculator_test.go and
 * group_quota_manager_test.go. Their createResourceList(cpu, memory) is cpu in cores
 * (milli-cpu here) and memory in bytes; GigaByte is 1024 * 1048576; CreateQuota sets the
 * shared weight to the max. Each quota here is a group with the same min, max, weight and
 * allow-lent, and its request goes in as a pod request. */

#define GIB ((int64_t)1024 * 1048576)

/* Creates a group from Koordinator's CreateQuota(name, parent, maxCpu, maxMem, minCpu,
 * minMem, allowLent, isParent): cpu in cores, memory in bytes, weight = max. */
static void kq_quota(kq_qtree_t *t, const char *name, const char *parent, int64_t max_cpu, int64_t max_mem,
                     int64_t min_cpu, int64_t min_mem, bool lent, bool is_parent)
{
    char min[128], max[128];
    snprintf(max, sizeof max, "cpu=%lld,memory=%lld", (long long)max_cpu * 1000, (long long)max_mem);
    snprintf(min, sizeof min, "cpu=%lld,memory=%lld", (long long)min_cpu * 1000, (long long)min_mem);
    grp(t, name, parent, min, max, max, lent, is_parent);
}

static void kq_req(kq_qtree_t *t, const char *g, int64_t cpu, int64_t mem)
{
    char r[128];
    snprintf(r, sizeof r, "cpu=%lld,memory=%lld", (long long)cpu * 1000, (long long)mem);
    req(t, g, r);
}

static void kq_total(kq_qtree_t *t, int64_t cpu, int64_t mem)
{
    char r[128];
    snprintf(r, sizeof r, "cpu=%lld,memory=%lld", (long long)cpu * 1000, (long long)mem);
    total(t, r);
}

/* TestRuntimeQuotaCalculator_IterationAdjustQuota, case1-no-guarantee and
 * case2-node4.sharedWeight=0 (100 milli-cpu; node{1..4} weight 40/60/50/80, request
 * 5/20/40/70, min 10/15/20/15, all lending): 5/20/35/40, and with node4's weight 0
 * 5/20/40/15 (the 20 node2 and node3 cannot take stays idle). case3 needs the
 * ElasticQuotaGuaranteeUsage feature gate (off by default; kubequota has no guarantee). A
 * weight of 0 needs another resource's weight beside it here: a weight that is 0 in
 * every resource means the max (GetSharedWeight). */
static void test_koord_iteration_adjust_quota(void **state)
{
    (void)state;
    for (int c = 1; c <= 2; c++) {
        kq_qtree_t *t = kq_qtree_new();
        total(t, "cpu=100");
        grp(t, "node1", NULL, "cpu=10", "", "cpu=40", true, false);
        grp(t, "node2", NULL, "cpu=15", "", "cpu=60", true, false);
        grp(t, "node3", NULL, "cpu=20", "", "cpu=50", true, false);
        grp(t, "node4", NULL, "cpu=15", "", c == 1 ? "cpu=80" : "cpu=0,memory=1", true, false);
        req(t, "node1", "cpu=5");
        req(t, "node2", "cpu=20");
        req(t, "node3", "cpu=40");
        req(t, "node4", "cpu=70");
        assert_int_equal(rt(t, "node1", "cpu"), 5);
        assert_int_equal(rt(t, "node2", "cpu"), 20);
        assert_int_equal(rt(t, "node3", "cpu"), c == 1 ? 35 : 40);
        assert_int_equal(rt(t, "node4", "cpu"), c == 1 ? 40 : 15);
        kq_qtree_free(t);
    }
}

/* TestRuntimeQuotaCalculator_IterationAdjustQuota_IntegerDistribution: 81 GPUs; a donor
 * (min 3, request 0) and ten borrowers (min 8 x8 and 7 x2, request 100, weight 1): the 3
 * the donor lends all go out (Koordinator's old per-node rounding lost them), the donor
 * gets 0 and every borrower at least its min. Which borrowers get the 3: the first by name
 * (equal weights, equal remainders). */
static void test_koord_integer_distribution(void **state)
{
    (void)state;
    static const int64_t mins[10] = {8, 8, 8, 8, 8, 8, 8, 8, 7, 7};
    kq_qtree_t *t = kq_qtree_new();
    total(t, "nvidia.com/gpu=81");
    grp(t, "donor", NULL, "nvidia.com/gpu=3", "", "nvidia.com/gpu=1", true, false);
    char name[32], min[64];
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "borrower-%02d", i);
        snprintf(min, sizeof min, "nvidia.com/gpu=%lld", (long long)mins[i]);
        grp(t, name, NULL, min, "", "nvidia.com/gpu=1", true, false);
        req(t, name, "nvidia.com/gpu=100");
    }
    int64_t sum = rt(t, "donor", "nvidia.com/gpu");
    assert_int_equal(sum, 0);
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof name, "borrower-%02d", i);
        int64_t got = rt(t, name, "nvidia.com/gpu");
        assert_true(got >= mins[i]);
        assert_int_equal(got, mins[i] + (i < 3));
        sum += got;
    }
    assert_int_equal(sum, 81);
    kq_qtree_free(t);
}

/* A round's leftover units go by largest remainder even to a child they take past its
 * ask; it gives the excess back and the next round shares it (Koordinator's
 * iterationForRedistribution over computeHamiltonDeltas), worked by hand from that code:
 * cluster 52 milli-cpu; g0 min 7 weight 13 asks 18, g1 min 3 weight 2 asks 34, g2 min 7
 * weight 10 asks 6, g3 min 4 weight 12 asks 24. First shares 7 + 3 + 6 + 4 = 20; 32 left
 * for g0/g1/g3 (weights 13/2/12 = 27): 416/27 = 15 r11, 64/27 = 2 r10, 384/27 = 14 r6, the
 * leftover unit to g0 (r11) -> g0 23, above its 18: 5 back; g1 5, g3 18. Round 2: 5 for
 * g1/g3 (2/12): 10/14 = 0 r10, 60/14 = 4 r4, the unit to g1 -> g1 6, g3 22. (Giving the
 * unit to the next child with room instead, g1 7 and g3 21.) */
static void test_koord_leftover_past_ask(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=52");
    grp(t, "g0", NULL, "cpu=7", "", "cpu=13", true, false);
    grp(t, "g1", NULL, "cpu=3", "", "cpu=2", true, false);
    grp(t, "g2", NULL, "cpu=7", "", "cpu=10", true, false);
    grp(t, "g3", NULL, "cpu=4", "", "cpu=12", true, false);
    req(t, "g0", "cpu=18");
    req(t, "g1", "cpu=34");
    req(t, "g2", "cpu=6");
    req(t, "g3", "cpu=24");
    assert_int_equal(rt(t, "g0", "cpu"), 18);
    assert_int_equal(rt(t, "g1", "cpu"), 6);
    assert_int_equal(rt(t, "g2", "cpu"), 6);
    assert_int_equal(rt(t, "g3", "cpu"), 22);
    kq_qtree_free(t);
}

/* TestGroupQuotaManager_UpdateQuotaDeltaRequest (and UpdateQuotaRequest's last step):
 * cluster [96, 160Gi]; test1 min [50, 80Gi] and test2 min [40, 80Gi], both max
 * [96, 160Gi]. test1 alone asks [120, 200Gi]: runtime = the cluster; then test2 asks
 * [150, 210Gi]: test1 [53, 80Gi], test2 [43, 80Gi]. */
static void test_koord_update_quota_delta_request(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    kq_total(t, 96, 160 * GIB);
    kq_quota(t, "test1", "root", 96, 160 * GIB, 50, 80 * GIB, true, false);
    kq_quota(t, "test2", "root", 96, 160 * GIB, 40, 80 * GIB, true, false);
    kq_req(t, "test1", 120, 200 * GIB);
    assert_int_equal(rt(t, "test1", "cpu"), 96000);
    assert_int_equal(rt(t, "test1", "memory"), 160 * GIB);
    kq_req(t, "test2", 150, 210 * GIB);
    assert_int_equal(rt(t, "test1", "cpu"), 53000);
    assert_int_equal(rt(t, "test1", "memory"), 80 * GIB);
    assert_int_equal(rt(t, "test2", "cpu"), 43000);
    assert_int_equal(rt(t, "test2", "memory"), 80 * GIB);
    kq_qtree_free(t);
}

/* TestGroupQuotaManager_NotAllowLentResource (cluster 100 cpu: test1 lends, min 60,
 * requests 120; test2 does not lend, min 40, requests nothing: 60 / 40) and _2, _3, _4
 * (a parent test-root, min 60, and two children of min 20 under it; child1 requests 0, 40,
 * then 60). */
static void test_koord_not_allow_lent(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    kq_total(t, 100, 0);
    kq_quota(t, "test1", "root", 96, 0, 60, 0, true, false);
    kq_quota(t, "test2", "root", 96, 0, 40, 0, false, false);
    kq_req(t, "test1", 120, 0);
    assert_int_equal(rt(t, "test1", "cpu"), 60000);
    assert_int_equal(rt(t, "test2", "cpu"), 40000);
    kq_qtree_free(t);

    /* _2: root and children do not lend; _3: root lends, child1 does not, child2 does;
     * _4: root lends, neither child does. Expected (root, child1, child2) per step. */
    static const struct {
        bool root_lent, c1_lent, c2_lent;
        int64_t want[3][3];
    } cases[] = {
        {false, false, false, {{60, 20, 20}, {60, 40, 20}, {80, 60, 20}}},
        {true, false, true, {{20, 20, 0}, {40, 40, 0}, {60, 60, 0}}},
        {true, false, false, {{40, 20, 20}, {60, 40, 20}, {80, 60, 20}}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        t = kq_qtree_new();
        kq_total(t, 100, 0);
        kq_quota(t, "test-root", "root", 96, 0, 60, 0, cases[c].root_lent, true);
        kq_quota(t, "test-child1", "test-root", 96, 0, 20, 0, cases[c].c1_lent, false);
        kq_quota(t, "test-child2", "test-root", 96, 0, 20, 0, cases[c].c2_lent, false);
        for (int step = 0; step < 3; step++) {
            if (step == 1)
                kq_req(t, "test-child1", 40, 0);
            if (step == 2)
                kq_req(t, "test-child1", 20, 0);
            assert_int_equal(rt(t, "test-root", "cpu"), cases[c].want[step][0] * 1000);
            assert_int_equal(rt(t, "test-child1", "cpu"), cases[c].want[step][1] * 1000);
            assert_int_equal(rt(t, "test-child2", "cpu"), cases[c].want[step][2] * 1000);
        }
        kq_qtree_free(t);
    }
}

/* TestGroupQuotaManager_MultiUpdateQuotaRequest_WithScaledMinQuota1: p (min [300,
 * 300Gi], max [1000, 1000Gi]) with children a, b, c (min [100, 100Gi] each), each asking
 * [200, 200Gi]; cluster [200, 200Gi]. p's runtime and scaled min [200, 200Gi]; a, b, c
 * scaled to 200*100/300 truncated = 66666m and 200Gi/3 = 71582788266 bytes, runtimes
 * [66667m, 200Gi/3 + 1] for a and b (the 2 units left go to the first by name). The
 * cluster grows by [400, 400Gi]: p [600, 600Gi], children [200, 200Gi] with their mins
 * back. _WithScaledMinQuota2: cluster [1, 1Gi] + [199, 199Gi], b asks nothing: a and c
 * [100, 100Gi], b 0; the scaled mins as above. (_3 turns scaling off, which Koordinator
 * does not by default and kubequota never does.) */
static void test_koord_scaled_min_quota(void **state)
{
    (void)state;
    for (int c = 1; c <= 2; c++) {
        kq_qtree_t *t = kq_qtree_new();
        if (c == 2)
            kq_total(t, 1, 1 * GIB);
        kq_quota(t, "p", "root", 1000, 1000 * GIB, 300, 300 * GIB, true, true);
        kq_quota(t, "a", "p", 1000, 1000 * GIB, 100, 100 * GIB, true, false);
        kq_quota(t, "b", "p", 1000, 1000 * GIB, 100, 100 * GIB, true, false);
        kq_quota(t, "c", "p", 1000, 1000 * GIB, 100, 100 * GIB, true, false);
        kq_req(t, "a", 200, 200 * GIB);
        if (c == 1)
            kq_req(t, "b", 200, 200 * GIB);
        kq_req(t, "c", 200, 200 * GIB);
        kq_total(t, 200, 200 * GIB); /* 0 + [200, 200Gi], or [1, 1Gi] + [199, 199Gi] */
        assert_int_equal(rt(t, "p", "cpu"), 200000);
        assert_int_equal(rt(t, "p", "memory"), 200 * GIB);
        assert_int_equal(IV(t, "p", scaled_min, "cpu"), 200000);
        assert_int_equal(IV(t, "p", scaled_min, "memory"), 200 * GIB);
        const char *kids[] = {"a", "b", "c"};
        for (int i = 0; i < 3; i++) {
            assert_int_equal(IV(t, kids[i], scaled_min, "cpu"), 66666);
            assert_int_equal(IV(t, kids[i], scaled_min, "memory"), 200 * GIB / 3);
        }
        if (c == 1) {
            assert_int_equal(rt(t, "a", "cpu"), 66667);
            assert_int_equal(rt(t, "a", "memory"), 200 * GIB / 3 + 1);
            assert_int_equal(rt(t, "b", "cpu"), 66667);
            assert_int_equal(rt(t, "b", "memory"), 200 * GIB / 3 + 1);
            kq_total(t, 600, 600 * GIB);
            assert_int_equal(rt(t, "p", "cpu"), 600000);
            assert_int_equal(rt(t, "p", "memory"), 600 * GIB);
            for (int i = 0; i < 3; i++) {
                assert_int_equal(rt(t, kids[i], "cpu"), 200000);
                assert_int_equal(rt(t, kids[i], "memory"), 200 * GIB);
                assert_int_equal(IV(t, kids[i], scaled_min, "cpu"), 100000);
                assert_int_equal(IV(t, kids[i], scaled_min, "memory"), 100 * GIB);
            }
            assert_int_equal(IV(t, "p", scaled_min, "cpu"), 300000);
        } else {
            assert_int_equal(rt(t, "a", "cpu"), 100000);
            assert_int_equal(rt(t, "a", "memory"), 100 * GIB);
            assert_int_equal(rt(t, "b", "cpu"), 0);
            assert_int_equal(rt(t, "b", "memory"), 0);
            assert_int_equal(rt(t, "c", "cpu"), 100000);
            assert_int_equal(rt(t, "c", "memory"), 100 * GIB);
        }
        kq_qtree_free(t);
    }
}

/* ------------------------------------------------------------------ max */

static void test_max_caps(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=100");
    grp(t, "A", NULL, "", "cpu=30", "", true, false);
    grp(t, "B", NULL, "", "cpu=50", "", true, false);
    req(t, "A", "cpu=100");
    req(t, "B", "cpu=100");
    /* Weights default to max (30/50). First pass 37.5/62.5 but the caps are 30 and 50:
     * both capped, 20 stay idle because nobody else is hungry. */
    assert_int_equal(rt(t, "A", "cpu"), 30);
    assert_int_equal(rt(t, "B", "cpu"), 50);
    /* The default group (Koordinator's default quota) asks what it uses, not what its pods
     * request: a pending request of 500 takes nothing from A and B ... */
    req(t, "default", "cpu=500");
    assert_int_equal(rt(t, "A", "cpu"), 30);
    assert_int_equal(rt(t, "B", "cpu"), 50);
    /* ... and what it uses comes off the top: used 60 leaves 40, shared 30:50 by A and B's
     * weights (their max) = 15 / 25. It is bounded by its max only (none: unlimited). */
    kq_resource_t du = R("cpu=60");
    assert_int_equal(kq_qtree_used_add(t, "default", &du, false), 0);
    assert_int_equal(rt(t, "A", "cpu"), 15);
    assert_int_equal(rt(t, "B", "cpu"), 25);
    assert_int_equal(info(t, "default").limit.n, 0);
    char why[256];
    kq_resource_t more = R("cpu=40"); /* root: 60 used + 40 = 100, fits */
    assert_int_equal(kq_qtree_check(t, "default", &more, false, why, sizeof why, NULL), 0);
    more = R("cpu=41");
    assert_int_equal(kq_qtree_check(t, "default", &more, false, why, sizeof why, NULL), KQ_EDENIED);
    assert_string_equal(why, "quota group root: cpu 60m used + 41m requested > 100m runtime (runtime = what the group may use now: its min plus what it can borrow); needs 1m more cpu");
    /* never reclaimed: over nobody's runtime list even when it uses more than its share */
    kq_qgroup_over_t *ov = NULL;
    size_t nov = 0;
    assert_int_equal(kq_qtree_over_runtime(t, &ov, &nov), 0);
    assert_int_equal(nov, 0);
    free(ov);
    assert_int_equal(kq_qtree_used_sub(t, "default", &du, false), 0);
    assert_int_equal(rt(t, "A", "cpu"), 30);
    /* when the others' mins want the whole cluster, the default group still keeps what it
     * uses: C min 100 asks 100, default uses 30 -> C gets 100 - 30 = 70 (not 100*100/130) */
    grp(t, "C", NULL, "cpu=100", "", "", true, false);
    req(t, "C", "cpu=100");
    du = R("cpu=30");
    assert_int_equal(kq_qtree_used_add(t, "default", &du, false), 0);
    assert_int_equal(rt(t, "C", "cpu"), 70);
    assert_int_equal(rt(t, "A", "cpu"), 0);
    assert_int_equal(kq_qtree_used_sub(t, "default", &du, false), 0);
    assert_int_equal(rt(t, "C", "cpu"), 100);

    /* max also bounds resources runtime does not govern */
    grp(t, "G", NULL, "", "nvidia.com/gpu=2", "", true, false);
    char reason[256];
    kq_resource_t r = R("nvidia.com/gpu=3");
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "G", &r, false, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group G: nvidia.com/gpu 0 used + 3 requested > 2 max; 3 requested alone is over the max: the pod can never fit");
    assert_int_equal(kind_got, KQ_DENIAL_NEVER_FITS);
    r = R("nvidia.com/gpu=2");
    assert_int_equal(kq_qtree_check(t, "G", &r, false, reason, sizeof reason, NULL), 0);
    kq_qtree_free(t);
}

static void test_parent_request(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=1000,memory=1000");
    grp(t, "P", NULL, "", "", "", true, true);
    grp(t, "K1", "P", "", "cpu=10", "", true, false);
    grp(t, "K2", "P", "", "", "", true, false);
    req(t, "K1", "cpu=20,memory=40");
    req(t, "K1", "cpu=5");
    req(t, "K2", "cpu=7,memory=3");
    /* min(25, 10) + min(7, unlimited) = 17 cpu; memory: K1's max names only cpu, so K1
     * does not limit memory, but P (no max) governs every resource and checks K1's pods in
     * memory: K1 asks P for all it requests, 40, beside K2's 3 = 43. (Were K1's memory
     * masked away, P's memory runtime would be K2's 3 and K1's pods, which use no memory
     * of P's, would be refused at P: bench/kube.py row 3.) */
    kq_qgroup_info_t i = info(t, "P");
    assert_int_equal(val(&i.request, "cpu", NULL), 17);
    assert_int_equal(val(&i.request, "memory", NULL), 43);
    /* memory is not limited by K1: a request far above the cluster passes K1, and is
     * stopped only where a level governs memory (P, no max: runtime 43; the root: 1000) */
    char why[256];
    kq_resource_t big = R("memory=900");
    assert_int_equal(kq_qtree_check(t, "K1", &big, false, why, sizeof why, NULL), KQ_EDENIED);
    assert_string_equal(why, "quota group P: memory 0 used + 900 requested > 43 runtime (runtime = what the group may use now: its min plus what it can borrow); needs 857 more memory");
    kq_qgroup_info_t k1 = info(t, "K1");
    assert_int_equal(k1.limit.n, 1); /* only cpu */
    assert_int_equal(val(&k1.limit, "cpu", NULL), 10);
    assert_int_equal(info(t, "K1").pods, 2);
    assert_int_equal(rt(t, "P", "cpu"), 17);
    assert_int_equal(rt(t, "K1", "cpu"), 10);
    assert_int_equal(rt(t, "K2", "cpu"), 7);
    /* A parent group's request cannot be added to directly. */
    kq_resource_t r = R("cpu=1");
    assert_int_equal(kq_qtree_request_add(t, "P", &r), KQ_EINVAL);
    assert_int_equal(kq_qtree_request_add(t, "nope", &r), KQ_ENOENT);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ enforcement */

static void test_check_denies_and_changes_nothing(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=4000");
    grp(t, "org", NULL, "cpu=3000", "cpu=3500", "", true, true);
    grp(t, "team-a", "org", "cpu=2000", "cpu=3000", "", true, false);
    req(t, "team-a", "cpu=3000");
    req(t, "team-a", "cpu=2000"); /* two pending pods: asks min(5000, 3000) = 3000 */
    assert_int_equal(rt(t, "team-a", "cpu"), 3000);
    char reason[256] = "";
    kq_resource_t r2 = R("cpu=2000");
    assert_int_equal(kq_qtree_assume(t, "team-a", &r2, false, reason, sizeof reason, NULL), 0);
    json_t *before = kq_qtree_json(t);
    assert_non_null(before);
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_assume(t, "team-a", &r2, false, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group team-a: cpu 2 used + 2 requested > 3 runtime (runtime = what the group may use now: its min plus what it can borrow); needs 1 more cpu");
    assert_int_equal(kind_got, KQ_DENIAL_OVER_RUNTIME);
    assert_int_equal(kq_qtree_check(t, "team-a", &r2, false, reason, sizeof reason, NULL), KQ_EDENIED);
    json_t *after = kq_qtree_json(t);
    assert_true(json_equal(before, after));
    json_decref(before);
    json_decref(after);
    kq_qgroup_info_t i = info(t, "team-a");
    assert_int_equal(val(&i.used, "cpu", NULL), 2000);
    assert_int_equal(i.pods_used, 1);
    assert_int_equal(IV(t, "org", used, "cpu"), 2000);
    assert_int_equal(IV(t, "root", used, "cpu"), 2000);

    /* An ancestor's max denies, and the reason names the ancestor. */
    grp(t, "org", NULL, "cpu=3000", "cpu=3000", "", true, true);
    grp(t, "team-a", "org", "cpu=2000", "cpu=4000", "", true, false);
    kq_resource_t r1 = R("cpu=1000");
    assert_int_equal(kq_qtree_check(t, "team-a", &r1, false, reason, sizeof reason, NULL), 0);
    kq_resource_t r15 = R("cpu=1500");
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "team-a", &r15, false, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group team-a: cpu 2 used + 1500m requested > 3 runtime (runtime = what the group may use now: its min plus what it can borrow); needs 500m more cpu");
    assert_int_equal(kind_got, KQ_DENIAL_OVER_RUNTIME);
    grp(t, "team-a", "org", "cpu=2000", "", "", true, false);
    req(t, "team-a", "cpu=5000");
    /* team-a asks 10000, org asks min(10000, 3000): org runtime 3000 -> team-a 3000 */
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "team-a", &r15, false, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group team-a: cpu 2 used + 1500m requested > 3 runtime (runtime = what the group may use now: its min plus what it can borrow); needs 500m more cpu");
    assert_int_equal(kind_got, KQ_DENIAL_OVER_RUNTIME);
    /* a pod of a parent group */
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "org", &r1, false, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group org is a parent group; only leaf groups run pods");
    assert_int_equal(kind_got, KQ_DENIAL_GROUP_NOT_LEAF);
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "ghost", &r1, false, reason, sizeof reason, &kind_got), KQ_ENOENT);
    assert_string_equal(reason, "quota group ghost does not exist");
    assert_int_equal(kind_got, KQ_DENIAL_GROUP_MISSING);

    /* Preemption: evicting 1000m of team-a's own pods makes room for 2000m. */
    assert_int_equal(kq_qtree_check(t, "team-a", &r2, false, reason, sizeof reason, NULL), KQ_EDENIED);
    assert_int_equal(kq_qtree_check_preempt(t, "team-a", &r2, &r1, false, reason, sizeof reason, NULL), 0);

    /* The root is bounded by the cluster total too. */
    kq_resource_t r = R("cpu=2000");
    assert_int_equal(kq_qtree_used_sub(t, "team-a", &r, false), 0);
    assert_int_equal(IV(t, "root", used, "cpu"), 0);
    kq_qtree_free(t);
}

static void test_ancestor_denies(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=10000");
    grp(t, "org", NULL, "", "cpu=3000", "", true, true);
    grp(t, "a", "org", "", "", "", true, false);
    grp(t, "b", "org", "", "", "", true, false);
    req(t, "a", "cpu=5000");
    req(t, "b", "cpu=5000");
    /* org asks 3000; a and b share it 1:1 -> 1500 each. Used without check (watch path): */
    kq_resource_t u = R("cpu=1500");
    assert_int_equal(kq_qtree_used_add(t, "a", &u, false), 0);
    assert_int_equal(kq_qtree_used_add(t, "b", &u, false), 0);
    /* b's runtime is full; a group whose own runtime has room is denied by org: */
    grp(t, "org", NULL, "", "cpu=3000", "", true, true);
    kq_resource_t small = R("cpu=1");
    char reason[256];
    /* pretend a's runtime were larger by giving a a huge weight: a's own check passes,
     * org's max does not. */
    kq_resource_t sub = R("cpu=1500");
    assert_int_equal(kq_qtree_used_sub(t, "a", &sub, false), 0);
    assert_int_equal(kq_qtree_used_add(t, "b", &sub, false), 0); /* b over its runtime (3000 > 1500) */
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "a", &small, false, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group org: cpu 3 used + 1m requested > 3 runtime (runtime = what the group may use now: its min plus what it can borrow); needs 1m more cpu");
    assert_int_equal(kind_got, KQ_DENIAL_OVER_RUNTIME);
    /* reclaim sees b over by 1500m */
    kq_qgroup_over_t *over = NULL;
    size_t n = 0;
    assert_int_equal(kq_qtree_over_runtime(t, &over, &n), 0);
    assert_int_equal(n, 1);
    assert_string_equal(over[0].name, "b");
    assert_int_equal(val(&over[0].over, "cpu", NULL), 1500);
    free(over);
    kq_qtree_free(t);
}

static void test_nonpreemptible_within_min(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=4000");
    grp(t, "g", NULL, "cpu=1000", "cpu=4000", "", true, false);
    req(t, "g", "cpu=4000");
    char reason[256];
    kq_resource_t r = R("cpu=600");
    assert_int_equal(kq_qtree_assume(t, "g", &r, true, reason, sizeof reason, NULL), 0);
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_assume(t, "g", &r, true, reason, sizeof reason, &kind_got), KQ_EDENIED);
    assert_string_equal(reason, "quota group g: non-preemptible cpu 600m used + 600m requested > 1 min; needs 200m more cpu");
    assert_int_equal(kind_got, KQ_DENIAL_OVER_LIMIT);
    /* a preemptible pod of the same size fits in the runtime (4000) */
    assert_int_equal(kq_qtree_assume(t, "g", &r, false, reason, sizeof reason, NULL), 0);
    kq_qgroup_info_t i = info(t, "g");
    assert_int_equal(val(&i.used, "cpu", NULL), 1200);
    assert_int_equal(val(&i.used_nonpreemptible, "cpu", NULL), 600);
    kq_resource_t r4 = R("cpu=400");
    assert_int_equal(kq_qtree_assume(t, "g", &r4, true, reason, sizeof reason, NULL), 0); /* 600+400 = min */
    assert_int_equal(kq_qtree_used_sub(t, "g", &r, true), 0);
    assert_int_equal(IV(t, "g", used_nonpreemptible, "cpu"), 400);
    /* a group whose min is 0 admits no non-preemptible pod; a group that declares no min
     * for the resource is not checked for it (nor is the root before a total is known) */
    grp(t, "h", NULL, "cpu=0", "", "", true, false);
    grp(t, "k", NULL, "", "", "", true, false);
    req(t, "h", "cpu=1");
    req(t, "k", "cpu=1");
    kq_resource_t one = R("cpu=1");
    assert_int_equal(kq_qtree_check(t, "h", &one, true, reason, sizeof reason, NULL), KQ_EDENIED);
    assert_non_null(strstr(reason, "non-preemptible"));
    assert_int_equal(kq_qtree_check(t, "k", &one, true, reason, sizeof reason, NULL), 0);
    kq_qtree_free(t);
    t = kq_qtree_new(); /* no cluster total */
    grp(t, "k", NULL, "", "", "", true, false);
    assert_int_equal(kq_qtree_check(t, "k", &one, true, reason, sizeof reason, NULL), 0);
    assert_int_equal(kq_qtree_check(t, KQ_QTREE_DEFAULT, &one, true, reason, sizeof reason, NULL), 0);
    /* names with '#' and '@' (queue names allow them) are group names; lookup is O(1) */
    grp(t, "root.a#b@c", NULL, "", "", "", true, false);
    bool parent = true;
    assert_true(kq_qtree_lookup(t, "root.a#b@c", &parent));
    assert_false(parent);
    assert_true(kq_qtree_lookup(t, KQ_QTREE_ROOT, &parent));
    assert_true(parent);
    assert_false(kq_qtree_lookup(t, "nope", NULL));
    kq_qtree_free(t);
}

/* scheduler-plugins' rule (kubernetes-sigs/scheduler-plugins kep/9-capacity-scheduling,
 * "Known Limitations"/cross-namespace example; pkg/capacityscheduling elasticquota.go
 * aggregatedUsedOverMinWith): quota1 (min 0, max 2), quota2 (min 0, max 2), quota3 (min
 * 1, max 2), cpu. quota1's 1-cpu pod borrows quota3's free min (0 + 1 <= 0 + 0 + 1); a pod
 * of quota2 then exceeds the sum of mins (1 + 1 > 1), whatever the cluster. */
static void test_sum_of_mins(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=100");
    const char *names[3] = {"q1", "q2", "q3"};
    const char *mins[3] = {"cpu=0", "cpu=0", "cpu=1"};
    for (int i = 0; i < 3; i++) {
        kq_qgroup_spec_t s;
        kq_qgroup_spec_init(&s, names[i]);
        s.min = R(mins[i]);
        s.max = R("cpu=2");
        s.sum_of_mins = true;
        char err[256];
        assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
    }
    char why[256];
    kq_resource_t one = R("cpu=1");
    req(t, "q1", "cpu=1");
    assert_int_equal(kq_qtree_assume(t, "q1", &one, false, why, sizeof why, NULL), 0);
    req(t, "q2", "cpu=1");
    kind_got = KQ_DENIAL_COUNT;
    assert_int_equal(kq_qtree_check(t, "q2", &one, false, why, sizeof why, &kind_got), KQ_EDENIED);
    assert_string_equal(why, "quota group q2: cpu 1m used by all scheduler-plugins quotas + 1m requested > 1m "
                             "sum of their mins; needs 1m more cpu");
    assert_int_equal(kind_got, KQ_DENIAL_OVER_LIMIT);
    /* the same group without the rule is held to its runtime instead: it fits */
    kq_qgroup_spec_t s;
    kq_qgroup_spec_init(&s, "k");
    s.max = R("cpu=2");
    char err[256];
    assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
    req(t, "k", "cpu=1");
    assert_int_equal(kq_qtree_check(t, "k", &one, false, why, sizeof why, NULL), 0);
    /* q1's pod leaves: q2 fits; a min raised by an update raises the sum */
    assert_int_equal(kq_qtree_used_sub(t, "q1", &one, false), 0);
    assert_int_equal(kq_qtree_check(t, "q2", &one, false, why, sizeof why, NULL), 0);
    assert_int_equal(kq_qtree_assume(t, "q2", &one, false, why, sizeof why, NULL), 0);
    kq_resource_t two = R("cpu=2");
    assert_int_equal(kq_qtree_check(t, "q3", &one, false, why, sizeof why, NULL), KQ_EDENIED); /* 1 + 1 > 1 */
    kq_qgroup_spec_init(&s, "q3");
    s.min = R("cpu=2");
    s.max = R("cpu=2");
    s.sum_of_mins = true;
    assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
    assert_int_equal(kq_qtree_check(t, "q3", &one, false, why, sizeof why, NULL), 0);   /* 1 + 1 <= 2 */
    assert_int_equal(kq_qtree_check(t, "q3", &two, false, why, sizeof why, NULL), KQ_EDENIED);
    /* removing q2 takes its min and used out of the sums (its pod moves to default) */
    assert_int_equal(kq_qtree_remove_group(t, "q2", err, sizeof err), 0);
    assert_int_equal(kq_qtree_check(t, "q3", &two, false, why, sizeof why, NULL), 0);    /* 0 + 2 <= 2 */
    kq_qtree_free(t);
}

/* A tree with one scheduler-plugins group "q" (min, max as given; "" = none) using `used`,
 * beside "big", a scheduler-plugins group whose min covers every sum, on a huge cluster:
 * only q's own min and max can decide. */
static kq_qtree_t *sp_tree(const char *min, const char *max, const char *used)
{
    kq_qtree_t *t = kq_qtree_new();
    const char *huge = "cpu=1000000000,memory=1000000000000,ephemeral-storage=1000000000000,nvidia.com/gpu=1000000";
    total(t, huge);
    const char *names[2] = {"big", "q"}, *mins[2] = {huge, min}, *maxs[2] = {huge, max};
    for (int i = 0; i < 2; i++) {
        kq_qgroup_spec_t s;
        kq_qgroup_spec_init(&s, names[i]);
        s.min = R(mins[i]);
        s.max = R(maxs[i]);
        s.sum_of_mins = true;
        char err[256];
        assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
    }
    kq_resource_t u = R(used);
    assert_int_equal(kq_qtree_used_add(t, "q", &u, false), 0);
    return t;
}

/* kubernetes-sigs/scheduler-plugins pkg/capacityscheduling/elasticquota_test.go
 * TestUsedOverMin and TestUsedOverMaxWith, case by case (cpu in millicores, as
 * MilliCPU; GPU is their ResourceGPU, nvidia.com/gpu). The max cases go through the
 * admission check (PreFilter's usedOverMaxWith). */
static void test_sp_used_over_min_and_max(void **state)
{
    (void)state;
    static const struct {
        const char *name, *min, *used;
        bool over;
    } mins[] = {
        {"OverMin Used Is Bigger Than Min", "cpu=3000,memory=300,nvidia.com/gpu=5", "cpu=4000,memory=200,nvidia.com/gpu=5", true},
        {"OverMin Used Is Not Bigger Than Min", "cpu=4000,memory=200,nvidia.com/gpu=5", "cpu=300,memory=100,nvidia.com/gpu=5", false},
        {"OverMin ElasticQuotaInfo Doesn't Have Min", "", "cpu=3900,memory=100,nvidia.com/gpu=5", true},
        {"OverMin Used Has GPU But Min Doesn't Have GPU", "cpu=4000,memory=200", "cpu=300,memory=100,nvidia.com/gpu=5", true},
        {"OverMin EphemeralStorage", "cpu=4000,memory=200,ephemeral-storage=10", "cpu=300,memory=100,ephemeral-storage=100", true},
    };
    for (size_t i = 0; i < sizeof mins / sizeof mins[0]; i++) {
        kq_qtree_t *t = sp_tree(mins[i].min, "", mins[i].used);
        bool sp = false;
        bool over = kq_qtree_sp_over_min(t, "q", NULL, &sp);
        if (!sp || over != mins[i].over)
            fail_msg("%s: want %d, got %d (sum_of_mins %d)", mins[i].name, mins[i].over, over, sp);
        kq_qtree_free(t);
    }
    static const struct {
        const char *name, *max, *used, *req;
        bool over;
    } maxs[] = {
        {"OverMaxWith Sum Of PodRequest And Used Is Bigger Than Max", "cpu=4000,memory=200,nvidia.com/gpu=5",
         "cpu=4000,memory=200,nvidia.com/gpu=5", "cpu=100,memory=100", true},
        {"OverMaxWith Sum Of PodRequest And Used Is Not Bigger Than Max", "cpu=4000,memory=200,nvidia.com/gpu=5",
         "cpu=3900,memory=100,nvidia.com/gpu=5", "cpu=100,memory=100", false},
        {"OverMaxWith ElasticQuotaInfo Doesn't Have Max", "", "cpu=3900,memory=100,nvidia.com/gpu=5",
         "cpu=100,memory=100", false},
        {"OverMaxWith Used And Max Don't Have GPU Value", "cpu=3000,memory=100", "cpu=10,memory=10",
         "cpu=10,memory=10,nvidia.com/gpu=5", false},
        {"OverMaxWith EphemeralStorage", "cpu=3000,memory=100,ephemeral-storage=100",
         "cpu=10,memory=10,ephemeral-storage=10", "cpu=10,memory=10,ephemeral-storage=100", true},
        /* cmp2's missing field: a max without memory is a max of 0 memory */
        {"max without a field", "cpu=3000", "cpu=10", "cpu=10,memory=1", true},
    };
    for (size_t i = 0; i < sizeof maxs / sizeof maxs[0]; i++) {
        kq_qtree_t *t = sp_tree("", maxs[i].max, maxs[i].used);
        kq_resource_t r = R(maxs[i].req);
        char why[256] = "";
        int rc = kq_qtree_check(t, "q", &r, false, why, sizeof why, NULL);
        if ((rc == KQ_EDENIED) != maxs[i].over || (rc != 0 && strstr(why, " max") == NULL))
            fail_msg("%s: want over=%d, got rc %d: %s", maxs[i].name, maxs[i].over, rc, why);
        kq_qtree_free(t);
    }
}

/* ------------------------------------------------------------------ validation */

static int try_set(kq_qtree_t *t, const char *name, const char *parent, const char *min, const char *max,
                   bool is_parent, char *err, size_t len)
{
    kq_qgroup_spec_t s;
    kq_qgroup_spec_init(&s, name);
    s.parent = parent;
    s.min = R(min);
    s.max = R(max);
    s.is_parent = is_parent;
    err[0] = '\0';
    int v = kq_qtree_validate_group(t, &s, err, len);
    int rc = kq_qtree_set_group(t, &s, err, len);
    assert_int_equal(v, rc); /* the dry run agrees */
    return rc;
}

static void test_validation(void **state)
{
    (void)state;
    char err[512];
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=100");

    /* min <= max */
    assert_int_equal(try_set(t, "a", NULL, "cpu=20", "cpu=10", false, err, sizeof err), KQ_EINVAL);
    assert_string_equal(err, "quota group a: min cpu 20m exceeds max 10m");
    assert_int_equal(kq_qtree_info(t, "a", &(kq_qgroup_info_t){0}), KQ_ENOENT);
    assert_int_equal(try_set(t, "a", NULL, "cpu=10", "cpu=10", false, err, sizeof err), 0);

    /* names */
    assert_int_equal(try_set(t, "bad name", NULL, "", "", false, err, sizeof err), KQ_EINVAL);
    assert_int_equal(try_set(t, "", NULL, "", "", false, err, sizeof err), KQ_EINVAL);
    assert_int_equal(try_set(t, "system", NULL, "", "", false, err, sizeof err), KQ_EINVAL);
    assert_int_equal(try_set(t, "root", NULL, "", "", false, err, sizeof err), KQ_EINVAL);

    /* parent must exist and be a parent group */
    assert_int_equal(try_set(t, "c", "nope", "", "", false, err, sizeof err), KQ_ENOENT);
    assert_string_equal(err, "quota group c: parent quota group nope does not exist");
    assert_int_equal(try_set(t, "c", "a", "", "", false, err, sizeof err), KQ_EINVAL);
    assert_string_equal(err, "quota group c: parent a is not a parent group");
    assert_int_equal(try_set(t, "c", "system", "", "", false, err, sizeof err), KQ_EINVAL);
    assert_int_equal(try_set(t, "p", NULL, "cpu=50", "", true, err, sizeof err), 0);
    assert_int_equal(try_set(t, "c", "p", "cpu=30", "", false, err, sizeof err), 0);

    /* children's min sum <= parent's min (below the first level) */
    assert_int_equal(try_set(t, "d", "p", "cpu=21", "", false, err, sizeof err), KQ_EINVAL);
    assert_string_equal(err, "quota group d: the children of p would have min cpu 51m, more than its min 50m "
                             "(this group 21m)");
    assert_int_equal(try_set(t, "d", "p", "cpu=20", "", false, err, sizeof err), 0);
    /* ... also when the parent's min shrinks */
    assert_int_equal(try_set(t, "p", NULL, "cpu=49", "", true, err, sizeof err), KQ_EINVAL);
    assert_string_equal(err, "quota group p: its children's min cpu 50m sum to more than its min 49m");
    /* the first level is exempt (cluster total may shrink): 50 + 10 + 60 > 100 is fine */
    assert_int_equal(try_set(t, "e", NULL, "cpu=60", "", false, err, sizeof err), 0);

    /* a group with children cannot become a leaf */
    assert_int_equal(try_set(t, "p", NULL, "cpu=50", "", false, err, sizeof err), KQ_ESTATE);
    assert_string_equal(err, "quota group p has children and cannot become a leaf group");
    /* a leaf with pods cannot become a parent; without pods it can */
    req(t, "a", "cpu=1");
    assert_int_equal(try_set(t, "a", NULL, "cpu=10", "cpu=10", true, err, sizeof err), KQ_ESTATE);
    assert_string_equal(err, "quota group a has pods and cannot become a parent group");
    kq_resource_t one = R("cpu=1");
    assert_int_equal(kq_qtree_request_sub(t, "a", &one), 0);
    assert_int_equal(try_set(t, "a", NULL, "cpu=10", "cpu=10", true, err, sizeof err), 0);
    assert_true(info(t, "a").is_parent);

    /* moving: allowed when the rules hold, with usage following the group */
    kq_resource_t u = R("cpu=7");
    assert_int_equal(kq_qtree_used_add(t, "c", &u, false), 0);
    assert_int_equal(IV(t, "p", used, "cpu"), 7);
    assert_int_equal(try_set(t, "c", "a", "cpu=30", "", false, err, sizeof err), KQ_EINVAL); /* 30 > a's 10 */
    assert_int_equal(try_set(t, "c", "a", "cpu=10", "", false, err, sizeof err), 0);
    kq_qgroup_info_t i = info(t, "c");
    assert_string_equal(i.parent, "a");
    assert_int_equal(val(&i.used, "cpu", NULL), 7);
    assert_int_equal(IV(t, "a", used, "cpu"), 7);
    assert_int_equal(IV(t, "p", used, "cpu"), 0);
    assert_int_equal(IV(t, "root", used, "cpu"), 7);
    /* no cycles: p cannot go under its child d... (d is a leaf) make d a parent first */
    assert_int_equal(try_set(t, "d", "p", "cpu=20", "", true, err, sizeof err), 0);
    assert_int_equal(try_set(t, "p", "d", "cpu=10", "", true, err, sizeof err), KQ_EINVAL);
    assert_string_equal(err, "quota group p cannot move under its own descendant d");
    assert_int_equal(try_set(t, "p", "p", "cpu=50", "", true, err, sizeof err), KQ_EINVAL);
    /* moving a whole subtree: d (with nothing below) under a */
    assert_int_equal(try_set(t, "a", NULL, "cpu=40", "cpu=40", true, err, sizeof err), 0);
    assert_int_equal(try_set(t, "d", "a", "cpu=20", "", true, err, sizeof err), 0);
    assert_int_equal(info(t, "d").depth, 2);
    assert_int_equal(info(t, "p").n_children, 0);

    /* default: updatable, but stays a first-level leaf */
    assert_int_equal(try_set(t, "default", NULL, "cpu=5", "cpu=50", false, err, sizeof err), 0);
    assert_int_equal(try_set(t, "default", "p", "", "", false, err, sizeof err), KQ_EINVAL);
    assert_int_equal(try_set(t, "default", NULL, "", "", true, err, sizeof err), KQ_EINVAL);

    /* depth limit */
    char prev[32] = "deep0", name[32];
    assert_int_equal(try_set(t, prev, NULL, "", "", true, err, sizeof err), 0);
    int rc = 0, level = 1;
    for (; level < 40 && rc == 0; level++) {
        snprintf(name, sizeof name, "deep%d", level);
        rc = try_set(t, name, prev, "", "", true, err, sizeof err);
        snprintf(prev, sizeof prev, "%s", name);
    }
    assert_int_equal(rc, KQ_EINVAL);
    assert_int_equal(level - 1, KQ_QTREE_MAX_DEPTH); /* deep0 is depth 1; deep31 depth 32 ok, deep32 not */

    /* removal */
    assert_int_equal(kq_qtree_remove_group(t, "a", err, sizeof err), KQ_ESTATE);
    assert_int_equal(kq_qtree_remove_group(t, "default", err, sizeof err), KQ_EINVAL);
    assert_int_equal(kq_qtree_remove_group(t, "system", err, sizeof err), KQ_EINVAL);
    assert_int_equal(kq_qtree_remove_group(t, "zzz", err, sizeof err), KQ_ENOENT);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ removal, system */

static void test_remove_moves_usage_to_default(void **state)
{
    (void)state;
    char err[256];
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=100");
    grp(t, "p", NULL, "cpu=50", "", "", true, true);
    grp(t, "x", "p", "cpu=50", "", "", true, false);
    req(t, "x", "cpu=30");
    kq_resource_t u = R("cpu=20");
    assert_int_equal(kq_qtree_used_add(t, "x", &u, true), 0);
    assert_int_equal(rt(t, "x", "cpu"), 30);
    assert_int_equal(kq_qtree_remove_group(t, "x", err, sizeof err), 0);
    assert_int_equal(kq_qtree_info(t, "x", &(kq_qgroup_info_t){0}), KQ_ENOENT);
    kq_qgroup_info_t d = info(t, "default");
    assert_int_equal(val(&d.request, "cpu", NULL), 30);
    assert_int_equal(val(&d.used, "cpu", NULL), 20);
    assert_int_equal(val(&d.used_nonpreemptible, "cpu", NULL), 20);
    assert_int_equal(d.pods, 1);
    assert_int_equal(d.pods_used, 1);
    assert_int_equal(IV(t, "p", used, "cpu"), 0);
    assert_int_equal(IV(t, "root", used, "cpu"), 20);
    /* the default group takes what it uses (20), bounded by its max only */
    assert_int_equal(rt(t, "default", "cpu"), 20);
    assert_int_equal(info(t, "default").limit.n, 0);
    assert_int_equal(rt(t, "p", "cpu"), 0);
    /* releases now go to default */
    assert_int_equal(kq_qtree_used_sub(t, "default", &u, true), 0);
    assert_int_equal(IV(t, "root", used, "cpu"), 0);
    /* p is now an empty parent and can go too */
    assert_int_equal(kq_qtree_remove_group(t, "p", err, sizeof err), 0);
    kq_qtree_free(t);
}

static void test_system_group(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=1000");
    grp(t, "a", NULL, "", "", "", true, false);
    req(t, "a", "cpu=5000");
    assert_int_equal(rt(t, "a", "cpu"), 1000);
    /* system pods are always admitted, even beyond the cluster, and shrink the total */
    char reason[128];
    kq_resource_t s = R("cpu=300");
    assert_int_equal(kq_qtree_assume(t, "system", &s, true, reason, sizeof reason, NULL), 0);
    assert_int_equal(rt(t, "root", "cpu"), 700);
    assert_int_equal(rt(t, "a", "cpu"), 700);
    kq_resource_t big = R("cpu=5000");
    assert_int_equal(kq_qtree_check(t, "system", &big, true, reason, sizeof reason, NULL), 0);
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    assert_int_equal(kq_qtree_runtime(t, "system", &r), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(kq_qtree_used_sub(t, "system", &s, true), 0);
    assert_int_equal(rt(t, "a", "cpu"), 1000);
    kq_qgroup_spec_t sp;
    kq_qgroup_spec_init(&sp, "system");
    assert_int_equal(kq_qtree_set_group(t, &sp, reason, sizeof reason), KQ_EINVAL);
    kq_qtree_free(t);
}

static void test_overflow_changes_nothing(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    grp(t, "a", NULL, "", "", "", true, false);
    kq_resource_t huge = R("memory=9000000000000000000");
    assert_int_equal(kq_qtree_request_add(t, "a", &huge), 0);
    assert_int_equal(kq_qtree_request_add(t, "a", &huge), KQ_ERANGE);
    assert_int_equal(info(t, "a").pods, 1);
    assert_int_equal(kq_qtree_used_add(t, "a", &huge, false), 0);
    assert_int_equal(kq_qtree_used_add(t, "a", &huge, false), KQ_ERANGE);
    assert_int_equal(IV(t, "root", used, "memory"), INT64_C(9000000000000000000));
    char reason[256];
    assert_int_equal(kq_qtree_check(t, "a", &huge, false, reason, sizeof reason, NULL), 0); /* no bound at all */
    kq_qtree_free(t);
}

static void test_json_view(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=100");
    grp(t, "p", NULL, "cpu=10", "cpu=80", "", true, true);
    grp(t, "k", "p", "cpu=10", "", "cpu=3", false, false);
    json_t *j = kq_qtree_json(t);
    assert_non_null(j);
    json_t *groups = json_object_get(j, "groups");
    assert_int_equal(json_array_size(groups), 5); /* root, default, p, k, system */
    const char *order[] = {"root", "default", "p", "k", "system"};
    for (size_t i = 0; i < 5; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(groups, i), "name")), order[i]);
    json_t *p = json_array_get(groups, 2), *k = json_array_get(groups, 3);
    assert_true(json_is_null(json_object_get(json_array_get(groups, 0), "parent")));
    assert_string_equal(json_string_value(json_object_get(k, "parent")), "p");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "maxResource"), "cpu")), 80);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "sharedWeight"), "cpu")), 80);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(k, "sharedWeight"), "cpu")), 3);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(k, "runtimeResource"), "cpu")), 10);
    assert_true(json_is_false(json_object_get(k, "allowLent")));
    assert_string_equal(json_string_value(json_array_get(json_object_get(p, "children"), 0)), "k");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "clusterTotal"), "cpu")), 100);
    json_decref(j);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ randomized */

static uint64_t rng_state;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

#define NG 40
static const char *DIMS[2] = {"cpu", "memory"};

struct mgroup {
    char name[16];
    int parent; /* -1: first level */
    bool is_parent, lent;
    int64_t min[2], max[2], weight[2], req[2];
    bool has_max[2], has_weight[2]; /* no weight: max, else the cluster total */
};

static kq_qgroup_spec_t mspec(const struct mgroup *m, const struct mgroup *all)
{
    kq_qgroup_spec_t s;
    kq_qgroup_spec_init(&s, m->name);
    s.parent = m->parent >= 0 ? all[m->parent].name : NULL;
    for (int d = 0; d < 2; d++) {
        assert_int_equal(kq_resource_set(&s.min, DIMS[d], m->min[d]), 0);
        if (m->has_max[d])
            assert_int_equal(kq_resource_set(&s.max, DIMS[d], m->max[d]), 0);
        if (m->has_weight[d])
            assert_int_equal(kq_resource_set(&s.shared_weight, DIMS[d], m->weight[d]), 0);
    }
    s.allow_lent = m->lent;
    s.is_parent = m->is_parent;
    return s;
}

/* Whether a configured parent (pi; NULL for the hidden root) governs d: no max, or a max
 * naming it. */
static bool governs_ref(const kq_qgroup_info_t *pi, const char *d)
{
    bool named = false;
    if (pi == NULL)
        return false;
    (void)val(&pi->max, d, &named);
    return pi->max.n == 0 || named;
}

/* i's ask of d from its parent pi (NULL: the hidden root). */
static int64_t ask_of(const kq_qgroup_info_t *i, const kq_qgroup_info_t *pi, const char *d)
{
    bool named;
    (void)val(&i->max, d, &named);
    if (i->max.n > 0 && !named && !governs_ref(pi, d))
        return 0; /* a resource neither its max nor its parent limits: asks none */
    bool deflt = strcmp(i->name, "default") == 0;
    int64_t a = val(deflt ? &i->used : &i->request, d, NULL), m = val(&i->min, d, NULL);
    if (!i->allow_lent && m > a)
        a = m; /* one that does not lend asks for its min (not its scaled min) */
    bool has;
    int64_t mx = val(&i->max, d, &has);
    return has && mx < a ? mx : a;
}

/* Checks the invariants at parent `p` (a name) over its children. */
static void check_parent(kq_qtree_t *t, const char *p, const struct mgroup *all, int n, bool mins_fit)
{
    kq_qgroup_info_t pi = info(t, p);
    for (int d = 0; d < 2; d++) {
        int64_t R_ = val(&pi.runtime, DIMS[d], NULL);
        int64_t sum = 0, want = 0, reqsum = 0;
        bool hungry_left = false;
        for (int k = 0; k < n; k++) {
            const char *par = all[k].parent >= 0 ? all[all[k].parent].name : "root";
            if (strcmp(par, p) != 0)
                continue;
            kq_qgroup_info_t ki = info(t, all[k].name);
            int64_t r = val(&ki.runtime, DIMS[d], NULL),
                    a = ask_of(&ki, strcmp(p, "root") != 0 ? &pi : NULL, DIMS[d]);
            int64_t sm = val(&ki.scaled_min, DIMS[d], NULL);
            sum += r;
            want += a;
            reqsum += a;
            bool has;
            int64_t mx = val(&ki.max, DIMS[d], &has);
            if (has)
                assert_true(r <= mx);       /* runtime <= max */
            assert_true(r <= a); /* never more than it asks */
            if (mins_fit)
                assert_true(r >= (a < sm ? a : sm)); /* at least min(request, min) */
            if (r < a)
                hungry_left = true;
        }
        if (strcmp(p, "root") != 0 || true)
            assert_int_equal(val(&pi.request, DIMS[d], NULL), reqsum > 0 ? reqsum : 0);
        assert_true(sum <= R_);                        /* children never get more than the parent */
        assert_int_equal(sum, want < R_ ? want : R_); /* handed out exactly what was there or wanted */
        if (sum < R_)
            assert_false(hungry_left); /* work conserving */
    }
}

static void check_all(kq_qtree_t *t, const struct mgroup *all, int n, bool mins_fit)
{
    check_parent(t, "root", all, n, mins_fit);
    for (int k = 0; k < n; k++)
        if (all[k].is_parent)
            check_parent(t, all[k].name, all, n, mins_fit);
}

/* Builds a fresh tree from the model and compares every runtime with `t`. */
static void compare_rebuilt(kq_qtree_t *t, const struct mgroup *all, int n, const kq_resource_t *tot)
{
    kq_qtree_t *f = kq_qtree_new();
    kq_qtree_set_cluster_total(f, tot);
    char err[256];
    for (int k = 0; k < n; k++) {
        kq_qgroup_spec_t s = mspec(&all[k], all);
        assert_int_equal(kq_qtree_set_group(f, &s, err, sizeof err), 0);
    }
    for (int k = 0; k < n; k++) {
        if (all[k].is_parent)
            continue;
        kq_resource_t r = KQ_RESOURCE_EMPTY;
        for (int d = 0; d < 2; d++)
            assert_int_equal(kq_resource_set(&r, DIMS[d], all[k].req[d]), 0);
        assert_int_equal(kq_qtree_request_add(f, all[k].name, &r), 0);
    }
    for (int k = 0; k < n; k++) {
        kq_resource_t a = KQ_RESOURCE_EMPTY, b = KQ_RESOURCE_EMPTY;
        assert_int_equal(kq_qtree_runtime(t, all[k].name, &a), 0);
        assert_int_equal(kq_qtree_runtime(f, all[k].name, &b), 0);
        for (int d = 0; d < 2; d++)
            assert_int_equal(val(&a, DIMS[d], NULL), val(&b, DIMS[d], NULL));
    }
    kq_qtree_free(f);
}

static void test_random_invariants(void **state)
{
    (void)state;
    rng_state = 0x9e3779b97f4a7c15ULL;
    char err[256];
    for (int round = 0; round < 150; round++) {
        struct mgroup all[NG];
        int n = (int)rnd_in(1, NG);
        kq_qtree_t *t = kq_qtree_new();
        kq_resource_t tot = KQ_RESOURCE_EMPTY;
        assert_int_equal(kq_resource_set(&tot, "cpu", rnd_in(0, 5000)), 0);
        assert_int_equal(kq_resource_set(&tot, "memory", rnd_in(0, 100000)), 0);
        kq_qtree_set_cluster_total(t, &tot);
        int64_t fl_min[2] = {0, 0};
        for (int k = 0; k < n; k++) {
            struct mgroup *m = &all[k];
            memset(m, 0, sizeof *m);
            snprintf(m->name, sizeof m->name, "g%02d", k);
            /* parent: a random earlier parent group, or the first level */
            m->parent = -1;
            if (k > 0 && rnd() % 3 != 0) {
                int c = (int)rnd_in(0, k - 1);
                if (all[c].is_parent && (all[c].parent < 0 || rnd() % 2 == 0))
                    m->parent = c;
            }
            m->is_parent = rnd() % 3 == 0;
            m->lent = rnd() % 5 != 0;
            for (int d = 0; d < 2; d++) {
                int64_t cap = m->parent >= 0 ? all[m->parent].min[d] : (d == 0 ? 2000 : 40000);
                if (m->parent >= 0) /* what the siblings left */
                    for (int s = 0; s < k; s++)
                        if (all[s].parent == m->parent)
                            cap -= all[s].min[d];
                m->min[d] = cap > 0 ? rnd_in(0, cap) : 0;
                m->has_max[d] = rnd() % 3 != 0;
                m->max[d] = m->min[d] + rnd_in(0, d == 0 ? 3000 : 60000);
                m->weight[d] = rnd_in(1, 100);
                m->has_weight[d] = rnd() % 3 != 0;
                if (m->parent < 0)
                    fl_min[d] += m->min[d];
            }
            kq_qgroup_spec_t s = mspec(m, all);
            assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
        }
        bool mins_fit = fl_min[0] <= val(&tot, "cpu", NULL) && fl_min[1] <= val(&tot, "memory", NULL);
        /* pods come and go */
        for (int op = 0; op < 60; op++) {
            int k = (int)rnd_in(0, n - 1);
            if (all[k].is_parent)
                continue;
            kq_resource_t r = KQ_RESOURCE_EMPTY;
            int64_t v[2] = {rnd_in(0, 800), rnd_in(0, 20000)};
            for (int d = 0; d < 2; d++)
                assert_int_equal(kq_resource_set(&r, DIMS[d], v[d]), 0);
            if (rnd() % 4 == 0 && all[k].req[0] >= v[0] && all[k].req[1] >= v[1]) {
                assert_int_equal(kq_qtree_request_sub(t, all[k].name, &r), 0);
                all[k].req[0] -= v[0], all[k].req[1] -= v[1];
            } else {
                assert_int_equal(kq_qtree_request_add(t, all[k].name, &r), 0);
                all[k].req[0] += v[0], all[k].req[1] += v[1];
            }
            if (op % 10 == 0)
                check_all(t, all, n, mins_fit);
        }
        check_all(t, all, n, mins_fit);
        /* spec changes: weights, max, allow-lent */
        for (int op = 0; op < 10; op++) {
            struct mgroup *m = &all[rnd_in(0, n - 1)];
            int d = (int)rnd_in(0, 1);
            m->weight[d] = rnd_in(0, 100); /* weight 0 allowed now: no work conservation claim */
            m->has_weight[d] = rnd() % 3 != 0;
            m->has_max[d] = rnd() % 2 == 0;
            m->lent = rnd() % 4 != 0;
            kq_qgroup_spec_t s = mspec(m, all);
            assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
        }
        compare_rebuilt(t, all, n, &tot);
        /* nodes lost or added */
        assert_int_equal(kq_resource_set(&tot, "cpu", rnd_in(0, 3000)), 0);
        kq_qtree_set_cluster_total(t, &tot);
        compare_rebuilt(t, all, n, &tot);
        for (int k = 0; k < n; k++)
            for (int d = 0; d < 2; d++)
                all[k].weight[d] = all[k].weight[d] ? all[k].weight[d] : 1;
        for (int k = 0; k < n; k++) {
            kq_qgroup_spec_t s = mspec(&all[k], all);
            assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
        }
        fl_min[0] = 0;
        for (int k = 0; k < n; k++)
            if (all[k].parent < 0)
                fl_min[0] += all[k].min[0];
        check_all(t, all, n, mins_fit && fl_min[0] <= val(&tot, "cpu", NULL));
        /* scaled first-level mins never sum to more than the total; truncated, each loses
         * less than a unit */
        int64_t ssum = 0, nfl = 0;
        for (int k = 0; k < n; k++)
            if (all[k].parent < 0)
                ssum += IV(t, all[k].name, scaled_min, "cpu"), nfl++;
        assert_true(ssum <= val(&tot, "cpu", NULL));
        if (fl_min[0] > val(&tot, "cpu", NULL))
            assert_true(ssum > val(&tot, "cpu", NULL) - nfl);
        kq_qtree_free(t);
    }
}

/* ------------------------------------------------------------------ reference recompute */

/* A from-scratch recomputation of the rules in quota_tree.h, written for clarity and kept
 * independent of quota_tree.c: it reads only the tree's inputs (group specs, leaf
 * requests, the system group's used) through the public API, recomputes requests, scaled
 * mins and runtimes top-down, sharing each parent's runtime the way Koordinator's
 * RuntimeQuotaCalculator does (koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/core/runtime_quota_calculator.go, redistribution and
 * iterationForRedistribution with computeHamiltonDeltas, transcribed below with a plain
 * sort), and the test demands the tree's own values equal it after every operation. */

#define RG_MAX 400
static const char *RDIMS[3] = {"cpu", "memory", "nvidia.com/gpu"};

struct rgroup {
    kq_qgroup_info_t in;
    int parent; /* index; -1 for the root */
    int kids[RG_MAX], nk;
    kq_resource_t smin, ask, request, runtime;
};

struct rnode { /* Koordinator's quotaNode, one resource */
    const char *name;
    int64_t weight, request, min, runtime;
    bool lent;
};

struct rrem {
    unsigned __int128 rem;
    int k;
    const char *name;
};

static int rrem_cmp(const void *a, const void *b)
{
    const struct rrem *x = a, *y = b;
    if (x->rem != y->rem)
        return x->rem > y->rem ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* computeHamiltonDeltas: total split in proportion to the weights, floors, then one unit
 * each to the largest remainders (ties by name) until nothing is left. */
static void ref_hamilton(int64_t total, int64_t W, struct rnode *const *v, int m, int64_t *delta)
{
    struct rrem r[RG_MAX];
    int nr = 0;
    int64_t given = 0;
    for (int i = 0; i < m; i++) {
        delta[i] = 0;
        if (v[i]->weight <= 0)
            continue;
        unsigned __int128 prod = (unsigned __int128)v[i]->weight * (unsigned __int128)total;
        delta[i] = (int64_t)(prod / (unsigned __int128)W);
        given += delta[i];
        r[nr++] = (struct rrem){.rem = prod % (unsigned __int128)W, .k = i, .name = v[i]->name};
    }
    qsort(r, (size_t)nr, sizeof r[0], rrem_cmp);
    for (int i = 0; i < nr && given < total; i++, given++)
        delta[r[i].k]++;
}

/* quotaTree.redistribution: every node first gets its request when within its min (its min
 * when it does not lend), else its min and it is hungry; what is left goes to the hungry
 * by weight, round after round, each round's excess over a request shared again. */
static void ref_redistribution(struct rnode *v, int n, int64_t total)
{
    struct rnode *hungry[RG_MAX];
    int64_t delta[RG_MAX];
    int m = 0;
    int64_t W = 0, left = total;
    for (int i = 0; i < n; i++) {
        if (v[i].request > v[i].min) {
            hungry[m++] = &v[i];
            W += v[i].weight;
            v[i].runtime = v[i].min;
        } else {
            v[i].runtime = v[i].lent ? v[i].request : v[i].min;
        }
        left -= v[i].runtime;
    }
    while (left > 0 && W > 0 && m > 0) {
        ref_hamilton(left, W, hungry, m, delta);
        int still = 0;
        W = 0;
        left = 0;
        for (int i = 0; i < m; i++) {
            hungry[i]->runtime += delta[i];
            if (hungry[i]->runtime < hungry[i]->request) {
                W += hungry[i]->weight;
                hungry[still++] = hungry[i];
            } else {
                left += hungry[i]->runtime - hungry[i]->request;
                hungry[i]->runtime = hungry[i]->request;
            }
        }
        m = still;
    }
}

static int rkid_cmp(const void *a, const void *b, void *arg)
{
    const struct rgroup *g = arg;
    return strcmp(g[*(const int *)a].in.name, g[*(const int *)b].in.name);
}

/* Same names and values, presence included. */
static void assert_same_res(const char *what, const char *group, const kq_resource_t *want, const kq_resource_t *got)
{
    bool ok = want->n == got->n;
    for (uint32_t i = 0; ok && i < want->n; i++) {
        bool has;
        int64_t v = val(got, KQ_RES_E(want)[i].name, &has);
        ok = has && v == KQ_RES_E(want)[i].value;
    }
    if (!ok) {
        char a[512], b[512];
        kq_resource_format(want, a, sizeof a);
        kq_resource_format(got, b, sizeof b);
        fprintf(stderr, "group %s %s: reference {%s} (%u names), tree {%s} (%u names)\n", group, what, a, want->n,
                b, got->n);
    }
    assert_true(ok);
}

/* Same values, absent counting as 0. */
static void assert_same_values(const char *what, const char *group, const kq_resource_t *want,
                               const kq_resource_t *got)
{
    const kq_resource_t *sets[2] = {want, got};
    for (int s = 0; s < 2; s++)
        for (uint32_t i = 0; i < sets[s]->n; i++) {
            const char *d = KQ_RES_E(sets[s])[i].name;
            int64_t a = val(want, d, NULL), b = val(got, d, NULL);
            if (a != b)
                fprintf(stderr, "group %s %s %s: reference %lld, tree %lld\n", group, what, d, (long long)a,
                        (long long)b);
            assert_int_equal(a, b);
        }
}

static void ref_request(struct rgroup *g, int x)
{
    struct rgroup *X = &g[x];
    if (X->in.is_parent || x == 0) {
        X->request = KQ_RESOURCE_EMPTY;
        for (int i = 0; i < X->nk; i++) {
            struct rgroup *K = &g[X->kids[i]];
            ref_request(g, X->kids[i]);
            for (uint32_t j = 0; j < K->ask.n; j++) {
                const char *d = KQ_RES_E(&K->ask)[j].name;
                int64_t s;
                if (__builtin_add_overflow(val(&X->request, d, NULL), KQ_RES_E(&K->ask)[j].value, &s))
                    s = INT64_MAX;
                assert_int_equal(kq_resource_set(&X->request, d, s), 0);
            }
        }
    } else {
        X->request = X->in.request;
    }
    /* ask: min(request, max), or min(max(request, min), max) when it does not lend;
     * the default group asks what it uses; only the resources max names (if it names any) */
    X->ask = strcmp(X->in.name, "default") == 0 ? X->in.used : X->request;
    if (!X->in.allow_lent)
        for (uint32_t j = 0; j < X->in.min.n; j++)
            if (KQ_RES_E(&X->in.min)[j].value > val(&X->ask, KQ_RES_E(&X->in.min)[j].name, NULL))
                assert_int_equal(kq_resource_set(&X->ask, KQ_RES_E(&X->in.min)[j].name, KQ_RES_E(&X->in.min)[j].value), 0);
    kq_resource_t masked = KQ_RESOURCE_EMPTY;
    for (uint32_t j = 0; j < X->ask.n; j++) {
        bool has;
        int64_t mx = val(&X->in.max, KQ_RES_E(&X->ask)[j].name, &has);
        if (X->in.max.n > 0 && !has &&
            !(X->parent > 0 && governs_ref(&g[X->parent].in, KQ_RES_E(&X->ask)[j].name)))
            continue; /* named by neither its max nor a configured parent that governs it */
        assert_int_equal(kq_resource_set(&masked, KQ_RES_E(&X->ask)[j].name,
                                         has && KQ_RES_E(&X->ask)[j].value > mx ? mx : KQ_RES_E(&X->ask)[j].value), 0);
    }
    X->ask = masked;
}

/* A child's weight of d: its shared weight unless that is 0 in every resource
 * (Koordinator's GetSharedWeight), else its max, else (kubequota's unlimited group) the
 * total. */
static int64_t ref_weight(const struct rgroup *K, const char *d, const kq_resource_t *tot)
{
    bool has = false, any = false;
    for (uint32_t j = 0; j < K->in.shared_weight.n; j++)
        any |= KQ_RES_E(&K->in.shared_weight)[j].value != 0;
    int64_t w = any ? val(&K->in.shared_weight, d, &has) : 0;
    if (!has)
        w = val(&K->in.max, d, &has);
    if (!has)
        w = val(tot, d, NULL);
    return w;
}

/* Scaled mins of P's children, then their runtimes, per resource of the total: at the root
 * the default group takes what it uses first (at most the root's runtime) and the others
 * share the rest; mins are scaled against what is shared when they sum to more
 * (Koordinator's getScaledMinQuota: E * min / sum in float64, truncated). */
static void ref_runtime(struct rgroup *g, int p, const kq_resource_t *tot)
{
    struct rgroup *P = &g[p];
    int n = P->nk;
    if (n == 0)
        return;
    static struct rnode v[RG_MAX];
    for (int i = 0; i < n; i++) {
        g[P->kids[i]].runtime = KQ_RESOURCE_EMPTY;
        g[P->kids[i]].smin = g[P->kids[i]].in.min;
    }
    for (uint32_t j = 0; j < tot->n; j++) {
        const char *d = KQ_RES_E(tot)[j].name;
        int64_t R_ = val(&P->runtime, d, NULL), E = R_, S = 0, db = 0;
        int dk = -1;
        for (int i = 0; i < n; i++) {
            struct rgroup *K = &g[P->kids[i]];
            if (strcmp(K->in.name, "default") == 0) {
                dk = i;
                db = val(&K->ask, d, NULL);
                db = db < R_ ? db : R_;
                E = R_ - db;
            } else {
                S += val(&K->in.min, d, NULL);
            }
        }
        int m = 0;
        for (int i = 0; i < n; i++) {
            struct rgroup *K = &g[P->kids[i]];
            if (i == dk)
                continue;
            bool named;
            int64_t mn = val(&K->in.min, d, &named);
            if (S > E && named) {
                int64_t sm = E <= 0 ? 0 : (int64_t)((double)E * (double)mn / (double)S);
                assert_int_equal(kq_resource_set(&K->smin, d, sm), 0);
                mn = sm;
            }
            /* a resource its max does not name is not its to ask for (masking): it asks
             * none of it, whether or not it lends */
            bool governed = K->in.max.n == 0;
            (void)val(&K->in.max, d, governed ? NULL : &governed);
            v[m++] = (struct rnode){.name = K->in.name, .weight = ref_weight(K, d, tot),
                                    .request = val(&K->ask, d, NULL), .min = S > E ? mn : val(&K->in.min, d, NULL),
                                    .lent = K->in.allow_lent || !governed};
        }
        ref_redistribution(v, m, E);
        m = 0;
        for (int i = 0; i < n; i++)
            assert_int_equal(kq_resource_set(&g[P->kids[i]].runtime, d, i == dk ? db : v[m++].runtime), 0);
    }
    for (int i = 0; i < n; i++)
        ref_runtime(g, P->kids[i], tot);
}

/* Recomputes everything from the tree's inputs and compares with the tree's own values.
 * `alloc` is the last kq_qtree_set_cluster_total argument (NULL: never set). */
static void compare_reference(kq_qtree_t *t, const kq_resource_t *alloc)
{
    static struct rgroup g[RG_MAX];
    int n = 0;
    json_t *j = kq_qtree_json(t);
    assert_non_null(j);
    json_t *arr = json_object_get(j, "groups"), *it;
    size_t ai;
    json_array_foreach(arr, ai, it) {
        const char *name = json_string_value(json_object_get(it, "name"));
        if (strcmp(name, "system") == 0)
            continue;
        assert_true(n < RG_MAX);
        memset(&g[n], 0, sizeof g[n]);
        assert_int_equal(kq_qtree_info(t, name, &g[n].in), 0);
        n++;
    }
    json_decref(j);
    assert_string_equal(g[0].in.name, "root");
    g[0].parent = -1;
    for (int x = 1; x < n; x++) {
        g[x].parent = -1;
        for (int y = 0; y < n; y++)
            if (strcmp(g[y].in.name, g[x].in.parent) == 0)
                g[x].parent = y;
        assert_true(g[x].parent >= 0);
        struct rgroup *P = &g[g[x].parent];
        P->kids[P->nk++] = x;
    }
    for (int x = 0; x < n; x++)
        qsort_r(g[x].kids, (size_t)g[x].nk, sizeof(int), rkid_cmp, g);
    /* the cluster total: allocatable minus the system group's used */
    kq_resource_t tot = KQ_RESOURCE_EMPTY;
    if (alloc != NULL) {
        kq_qgroup_info_t sys = info(t, "system");
        tot = *alloc;
        for (uint32_t k = 0; k < tot.n; k++) {
            int64_t u = val(&sys.used, KQ_RES_E(&tot)[k].name, NULL);
            KQ_RES_E(&tot)[k].value = u >= KQ_RES_E(&tot)[k].value ? 0 : KQ_RES_E(&tot)[k].value - u;
        }
    }
    g[0].smin = tot;
    g[0].runtime = tot;
    ref_request(g, 0);
    ref_runtime(g, 0, &tot);
    for (int x = 0; x < n; x++) {
        assert_same_res("scaled min", g[x].in.name, &g[x].smin, &g[x].in.scaled_min);
        assert_same_values("request", g[x].in.name, &g[x].request, &g[x].in.request);
        assert_same_res("runtime", g[x].in.name, &g[x].runtime, &g[x].in.runtime);
    }
}

/* For operations the random test expects to fail sometimes (the reference reads the result). */
static void quiet(int rc) { (void)rc; }

/* A random quantity: mostly small, sometimes large enough to need 128-bit products. */
static int64_t rqty(int64_t small)
{
    switch (rnd() % 8) {
    case 0:
        return 0;
    case 1:
        return rnd_in(0, (int64_t)1 << 50);
    default:
        return rnd_in(0, small);
    }
}

/* Random operations on random trees (moves, removals, spec changes, 0 and missing weights,
 * unlimited groups, resources entering and leaving the total, the system group's used,
 * scaled mins); after every operation the tree must equal the reference recompute, and
 * after runs of operations inside a batch (and at reads within one). */
static void test_reference_random(void **state)
{
    (void)state;
    rng_state = 0x243f6a8885a308d3ULL;
    char err[256];
    for (int round = 0; round < 60; round++) {
        kq_qtree_t *t = kq_qtree_new();
        kq_resource_t alloc = KQ_RESOURCE_EMPTY;
        bool have_alloc = false;
        int pool = (int)rnd_in(4, 40);
        int64_t scale = rnd() % 2 ? 1000 : 50;
        if (round > 0) { /* round 0 runs without a cluster total for a while */
            for (int d = 0; d < 3; d++)
                if (rnd() % 4 != 0)
                    assert_int_equal(kq_resource_set(&alloc, RDIMS[d], rnd_in(0, scale * 20)), 0);
            kq_qtree_set_cluster_total(t, &alloc);
            have_alloc = true;
        }
        compare_reference(t, have_alloc ? &alloc : NULL);
        int batch = 0, batch_left = 0; /* runs of operations inside kq_qtree_batch_begin/end */
        for (int op = 0; op < 250; op++) {
            if (batch == 0 && rnd() % 25 == 0) {
                batch = rnd() % 4 == 0 ? 2 : 1; /* sometimes nested */
                for (int b = 0; b < batch; b++)
                    kq_qtree_batch_begin(t);
                batch_left = (int)rnd_in(1, 40);
            }
            char name[16], parent[16];
            snprintf(name, sizeof name, "g%02d", (int)rnd_in(0, pool - 1));
            snprintf(parent, sizeof parent, "g%02d", (int)rnd_in(0, pool - 1));
            const char *dn = RDIMS[rnd() % 3];
            kq_resource_t r = KQ_RESOURCE_EMPTY;
            for (int d = 0; d < 3; d++)
                if (rnd() % 3 != 0)
                    assert_int_equal(kq_resource_set(&r, RDIMS[d], rnd_in(0, scale * 3)), 0);
            int kind = (int)(rnd() % 100);
            if (kind < 30) { /* create, update or move a group */
                kq_qgroup_spec_t s;
                kq_qgroup_spec_init(&s, rnd() % 20 == 0 ? "default" : name);
                kq_qgroup_info_t pi;
                bool first = rnd() % 3 == 0 || kq_qtree_info(t, parent, &pi) != 0 || !pi.is_parent;
                s.parent = first ? NULL : parent;
                bool exists;
                bool was_parent = false;
                exists = kq_qtree_lookup(t, s.name, &was_parent);
                s.is_parent = exists && rnd() % 8 != 0 ? was_parent : rnd() % 3 == 0;
                s.allow_lent = rnd() % 4 != 0;
                for (int d = 0; d < 3; d++) {
                    int64_t room = first ? scale * 8 : val(&pi.min, RDIMS[d], NULL) / 3;
                    if (rnd() % 4 != 0)
                        assert_int_equal(kq_resource_set(&s.min, RDIMS[d], room > 0 ? rnd_in(0, room) : 0), 0);
                    int64_t mn = val(&s.min, RDIMS[d], NULL);
                    if (rnd() % 3 == 0)
                        assert_int_equal(kq_resource_set(&s.max, RDIMS[d], mn + rnd_in(0, scale * 6)), 0);
                    if (rnd() % 3 == 0)
                        assert_int_equal(kq_resource_set(&s.shared_weight, RDIMS[d], rnd() % 5 ? rqty(100) : 0),
                                         0);
                }
                quiet(kq_qtree_set_group(t, &s, err, sizeof err)); /* rejections change nothing */
            } else if (kind < 36) {
                quiet(kq_qtree_remove_group(t, name, err, sizeof err));
            } else if (kind < 66) {
                quiet(kq_qtree_request_add(t, rnd() % 10 ? name : "default", &r));
            } else if (kind < 80) {
                quiet(kq_qtree_request_sub(t, name, &r));
            } else if (kind < 86) {
                quiet(kq_qtree_used_add(t, name, &r, rnd() % 2));
            } else if (kind < 92) {
                if (rnd() % 2)
                    quiet(kq_qtree_used_add(t, "system", &r, false));
                else
                    quiet(kq_qtree_used_sub(t, "system", &r, false));
            } else { /* nodes come and go; sometimes a resource appears or disappears */
                if (rnd() % 5 == 0) {
                    kq_resource_t a = KQ_RESOURCE_EMPTY;
                    for (uint32_t k = 0; k < alloc.n; k++)
                        if (KQ_RES_E(&alloc)[k].name != kq_resource_name(dn))
                            KQ_RES_E(&a)[a.n++] = KQ_RES_E(&alloc)[k];
                    if (a.n == alloc.n)
                        assert_int_equal(kq_resource_set(&a, dn, rnd_in(0, scale * 20)), 0);
                    alloc = a;
                } else {
                    assert_int_equal(kq_resource_set(&alloc, dn, rnd() % 7 ? rnd_in(0, scale * 20) : rqty(1)), 0);
                }
                kq_qtree_set_cluster_total(t, &alloc);
                have_alloc = true;
            }
            if (batch > 0 && --batch_left > 0) {
                if (rnd() % 8 == 0) /* a read inside the batch sees exact values too */
                    compare_reference(t, have_alloc ? &alloc : NULL);
                continue;
            }
            while (batch > 0) {
                kq_qtree_batch_end(t);
                batch--;
            }
            compare_reference(t, have_alloc ? &alloc : NULL);
        }
        while (batch-- > 0)
            kq_qtree_batch_end(t);
        compare_reference(t, have_alloc ? &alloc : NULL);
        kq_qtree_free(t);
    }
}

/* One parent with hundreds of children: large candidate sets for the leftover units
 * (mixed weights, so remainders differ), 64- and 128-bit products, caps hit in several
 * rounds, scaled mins, resources only some children name; against the reference after
 * every change of the total and of requests. */
static void test_reference_wide(void **state)
{
    (void)state;
    rng_state = 0x13198a2e03707344ULL;
    char err[256];
    for (int round = 0; round < 4; round++) {
        kq_qtree_t *t = kq_qtree_new();
        int n = round == 0 ? 40 : (int)rnd_in(150, 300);
        int64_t big = round % 2 ? (int64_t)1 << 45 : 5000;
        kq_qgroup_spec_t s;
        kq_qgroup_spec_init(&s, "wide");
        s.is_parent = true;
        assert_int_equal(kq_resource_set(&s.min, "cpu", big * n / 2), 0);
        assert_int_equal(kq_resource_set(&s.min, "memory", big * n), 0);
        assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
        kq_qtree_batch_begin(t); /* built in one batch */
        for (int k = 0; k < n; k++) {
            char name[16];
            snprintf(name, sizeof name, "w%03d", (int)((k * 37) % n)); /* not in name order */
            kq_qgroup_spec_init(&s, name);
            s.parent = "wide";
            assert_int_equal(kq_resource_set(&s.min, "cpu", rnd_in(0, big / 2)), 0);
            if (rnd() % 4)
                assert_int_equal(kq_resource_set(&s.min, "memory", rnd_in(0, big)), 0);
            if (rnd() % 2)
                assert_int_equal(kq_resource_set(&s.max, "cpu", big / 2 + rnd_in(0, big * 2)), 0);
            if (rnd() % 2)
                assert_int_equal(kq_resource_set(&s.shared_weight, "cpu", rnd() % 3 ? rnd_in(1, 7) : rqty(1000)),
                                 0);
            if (rnd() % 3 == 0)
                assert_int_equal(kq_resource_set(&s.shared_weight, "memory", rnd_in(0, 3)), 0);
            s.allow_lent = rnd() % 6 != 0;
            assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
            kq_resource_t r = KQ_RESOURCE_EMPTY;
            assert_int_equal(kq_resource_set(&r, "cpu", rnd_in(0, big * 2)), 0);
            assert_int_equal(kq_resource_set(&r, "memory", rnd_in(0, big * 2)), 0);
            assert_int_equal(kq_qtree_request_add(t, name, &r), 0);
        }
        kq_resource_t alloc = KQ_RESOURCE_EMPTY;
        assert_int_equal(kq_resource_set(&alloc, "cpu", big * n / 3), 0);
        assert_int_equal(kq_resource_set(&alloc, "memory", big * n * 2), 0);
        kq_qtree_set_cluster_total(t, &alloc);
        kq_qtree_batch_end(t);
        compare_reference(t, &alloc);
        for (int op = 0; op < 30; op++) {
            if (op % 3 == 0) {
                assert_int_equal(kq_resource_set(&alloc, op % 2 ? "cpu" : "memory", rnd_in(0, big * n)), 0);
                kq_qtree_set_cluster_total(t, &alloc);
            } else {
                char name[16];
                snprintf(name, sizeof name, "w%03d", (int)rnd_in(0, n - 1));
                kq_resource_t r = KQ_RESOURCE_EMPTY;
                assert_int_equal(kq_resource_set(&r, "cpu", rnd_in(0, big)), 0);
                assert_int_equal(kq_qtree_request_add(t, name, &r), 0);
            }
            compare_reference(t, &alloc);
        }
        kq_qtree_free(t);
    }
}

/* ------------------------------------------------------------------ threads */

struct worker {
    kq_qtree_t *t;
    const char *group;
    int admitted;
};

static void *work(void *arg)
{
    struct worker *w = arg;
    kq_resource_t r = R("cpu=10");
    char reason[256];
    for (int i = 0; i < 2000; i++) {
        if (kq_qtree_assume(w->t, w->group, &r, false, reason, sizeof reason, NULL) == 0) {
            w->admitted++;
            if (i % 3 == 0) {
                assert_int_equal(kq_qtree_used_sub(w->t, w->group, &r, false), 0);
                w->admitted--;
            }
        }
        if (i % 50 == 0) {
            json_t *j = kq_qtree_json(w->t);
            json_decref(j);
        }
    }
    return NULL;
}

static void test_threads(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    total(t, "cpu=1000");
    grp(t, "a", NULL, "cpu=500", "", "", true, false);
    grp(t, "b", NULL, "cpu=500", "", "", true, false);
    req(t, "a", "cpu=100000");
    req(t, "b", "cpu=100000");
    struct worker w[4] = {{t, "a", 0}, {t, "a", 0}, {t, "b", 0}, {t, "b", 0}};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
    for (int i = 0; i < 10; i++)
        total(t, i % 2 ? "cpu=1000" : "cpu=900");
    total(t, "cpu=1000");
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    int64_t ua = IV(t, "a", used, "cpu"), ub = IV(t, "b", used, "cpu");
    assert_int_equal(ua, 10 * (w[0].admitted + w[1].admitted));
    assert_int_equal(ub, 10 * (w[2].admitted + w[3].admitted));
    assert_true(ua <= 500 && ub <= 500); /* each one's runtime is 500 at the end, used never passed it */
    assert_int_equal(IV(t, "root", used, "cpu"), ua + ub);
    kq_qtree_free(t);
}

/* ------------------------------------------------------------------ many resource names */

/* "example.com/r00=v,...,example.com/rNN=v": names [from, to) all with value v. */
static kq_resource_t RN(int from, int to, int64_t v)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    for (int i = from; i < to; i++) {
        char k[32];
        snprintf(k, sizeof k, "example.com/r%02d", i);
        assert_int_equal(kq_resource_set(&r, k, v), 0);
    }
    return r;
}

static int lift_limit(void **state)
{
    (void)state;
    kq_resource_set_max_names(UINT32_MAX);
    return 0;
}

static int restore_limit(void **state)
{
    (void)state;
    kq_resource_set_max_names(KQ_RES_NAMES_MAX); /* the default */
    return 0;
}

/* Issue 15: more resource names than a set holds inline (GPU nodes with MIG profiles,
 * hugepages, RDMA...). Cluster total: 24 names of 100 each. Parent p: min 10, max 100 in
 * r00..r19; its children a and b: min 8 each (forced: 16 > 10). a requests 12 in
 * r00..r19: p's runtime is 12, less than its children's mins, so both scale to
 * 12 * 8/16 = 6 (Koordinator scales a quota's children against its runtime); a gets 6 and
 * the 6 b does not ask. Then a requests 30: the root gives p its min 10 plus 20 of the 90
 * left (its ask is 30; the default group asks nothing), p gives a all 30 (b asks nothing)
 * and the mins are mins again (16 <= 30). Only the 20 names of p's max limit p. */
static void test_many_names(void **state)
{
    (void)state;
    kq_qtree_t *t = kq_qtree_new();
    kq_resource_t tot = RN(0, 24, 100);
    kq_qtree_set_cluster_total(t, &tot);
    kq_qgroup_spec_t s;
    char err[512] = "";
    kq_qgroup_spec_init(&s, "p");
    s.min = RN(0, 20, 10);
    s.max = RN(0, 20, 100);
    s.is_parent = true;
    assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
    kq_resource_free(&s.min);
    kq_resource_free(&s.max);
    for (int k = 0; k < 2; k++) {
        kq_qgroup_spec_init(&s, k == 0 ? "p.a" : "p.b");
        s.parent = "p";
        s.min = RN(0, 20, 8);
        s.allow_force_update = true;
        assert_int_equal(kq_qtree_set_group(t, &s, err, sizeof err), 0);
        kq_resource_free(&s.min);
    }
    kq_resource_t r30 = RN(0, 20, 30), r1 = RN(0, 20, 1), r12 = RN(0, 20, 12), r18 = RN(0, 20, 18);
    assert_int_equal(kq_qtree_request_add(t, "p.a", &r12), 0);
    kq_qgroup_info_t i12 = info(t, "p.a");
    assert_int_equal(i12.scaled_min.n, 20);
    for (int i = 0; i < 20; i++)
        assert_int_equal(KQ_RES_E(&i12.scaled_min)[i].value, 6);
    assert_int_equal(val(&i12.runtime, "example.com/r07", NULL), 12);
    kq_qtree_info_free(&i12);
    assert_int_equal(kq_qtree_request_add(t, "p.a", &r18), 0);

    json_t *j = kq_qtree_json(t);
    json_t *ct = json_object_get(j, "clusterTotal");
    assert_int_equal(json_object_size(ct), 24);
    assert_int_equal(json_integer_value(json_object_get(ct, "example.com/r23")), 100);
    json_decref(j);

    kq_qgroup_info_t ia = info(t, "p.a"), ip = info(t, "p");
    assert_int_equal(ia.scaled_min.n, 20);
    for (int i = 0; i < 20; i++)
        assert_int_equal(KQ_RES_E(&ia.scaled_min)[i].value, 8);
    assert_int_equal(ip.limit.n, 20);
    for (int i = 0; i < 20; i++)
        assert_int_equal(KQ_RES_E(&ip.limit)[i].value, 30);
    assert_int_equal(ia.runtime.n, 24);
    assert_int_equal(val(&ia.runtime, "example.com/r19", NULL), 30);
    kq_qtree_info_free(&ia);
    kq_qtree_info_free(&ip);

    char reason[512];
    assert_int_equal(kq_qtree_assume(t, "p.a", &r30, false, reason, sizeof reason, NULL), 0);
    assert_int_equal(kq_qtree_assume(t, "p.a", &r1, false, reason, sizeof reason, NULL), KQ_EDENIED);
    assert_non_null(strstr(reason, "example.com/r00"));
    assert_int_equal(IV(t, "root", used, "example.com/r19"), 30);

    /* removing a moves its usage (20 names) to the default group */
    assert_int_equal(kq_qtree_remove_group(t, "p.a", err, sizeof err), 0);
    assert_int_equal(IV(t, "default", used, "example.com/r19"), 30);
    assert_int_equal(IV(t, "default", request, "example.com/r00"), 30);
    assert_int_equal(IV(t, "p", used, "example.com/r00"), 0);
    assert_int_equal(IV(t, "root", used, "example.com/r00"), 30);
    kq_qgroup_over_t *ov = NULL;
    size_t nov = 0;
    assert_int_equal(kq_qtree_over_runtime(t, &ov, &nov), 0);
    kq_qtree_over_free(ov, nov);

    kq_resource_free(&tot);
    kq_resource_free(&r30);
    kq_resource_free(&r1);
    kq_resource_free(&r12);
    kq_resource_free(&r18);
    kq_qtree_free(t);
}

int main(void)
{
    (void)kq_log_set_level("warn");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_seed_example),
        cmocka_unit_test(test_batch_seed_example),
        cmocka_unit_test(test_three_levels),
        cmocka_unit_test(test_dimensions_independent),
        cmocka_unit_test(test_default_weight_follows_total),
        cmocka_unit_test(test_allow_lent_false),
        cmocka_unit_test(test_min_scaling),
        cmocka_unit_test(test_koord_iteration_adjust_quota),
        cmocka_unit_test(test_koord_integer_distribution),
        cmocka_unit_test(test_koord_leftover_past_ask),
        cmocka_unit_test(test_koord_update_quota_delta_request),
        cmocka_unit_test(test_koord_not_allow_lent),
        cmocka_unit_test(test_koord_scaled_min_quota),
        cmocka_unit_test(test_max_caps),
        cmocka_unit_test(test_parent_request),
        cmocka_unit_test(test_check_denies_and_changes_nothing),
        cmocka_unit_test(test_ancestor_denies),
        cmocka_unit_test(test_nonpreemptible_within_min),
        cmocka_unit_test(test_sum_of_mins),
        cmocka_unit_test(test_sp_used_over_min_and_max),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_remove_moves_usage_to_default),
        cmocka_unit_test(test_system_group),
        cmocka_unit_test(test_overflow_changes_nothing),
        cmocka_unit_test(test_json_view),
        cmocka_unit_test(test_random_invariants),
        cmocka_unit_test(test_reference_random),
        cmocka_unit_test(test_reference_wide),
        cmocka_unit_test(test_threads),
        cmocka_unit_test_setup_teardown(test_many_names, lift_limit, restore_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
