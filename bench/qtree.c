/* Row 6: elastic quota runtime recompute. A 3-level tree of 10 departments x 10 teams x
 * 100 leaf quota groups (10,000 leaves, 10,110 groups) with mins that fill the cluster,
 * maxes at twice the min, and leaf requests spread from 0 to 4x the min (so about half
 * the leaves are hungry and sharing is exercised at every level). Timed:
 *   - a leaf's request changes (kq_qtree_request_add then _sub on random leaves: one pod
 *     arriving or leaving), each call one change;
 *   - the cluster total changes (a 64-core node leaving and coming back), which
 *     redistributes the whole tree.
 */
#include "bench.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kubequota/base/log.h"
#include "kubequota/engine/quota_tree.h"

static void res2(kq_resource_t *r, int64_t cpu, int64_t mem)
{
    kq_resource_clear(r);
    if (kq_resource_set(r, "cpu", cpu) != 0 || kq_resource_set(r, "memory", mem) != 0)
        abort();
}

static void add_group(kq_qtree_t *t, const char *name, const char *parent, bool is_parent, int64_t min_cpu)
{
    kq_qgroup_spec_t s;
    kq_qgroup_spec_init(&s, name);
    s.parent = parent;
    s.is_parent = is_parent;
    res2(&s.min, min_cpu, min_cpu << 22);
    res2(&s.max, min_cpu * 2, (min_cpu * 2) << 22);
    char err[512];
    if (kq_qtree_set_group(t, &s, err, sizeof(err)) != 0) {
        fprintf(stderr, "kqbench qtree: %s: %s\n", name, err);
        exit(1);
    }
}

/* The 3-level tree of d_n x t_n x l_n leaves with mins filling the cluster, and a random
 * request on most leaves; inside one batch (as a resync loads it) or change by change.
 * Returns the tree; *secs is the time taken. */
static kq_qtree_t *build(int d_n, int t_n, int l_n, bool batch, kq_resource_t *tot, kq_resource_t *tot2,
                         double *secs)
{
    int leaves = d_n * t_n * l_n;
    /* cpu in millicores: each leaf min 100m; a team 100m x l_n; a department 10 teams */
    int64_t leaf_min = 100, team_min = leaf_min * l_n, dept_min = team_min * t_n, total = dept_min * d_n;
    kq_qtree_t *t = kq_qtree_new();
    double t0 = now_s();
    if (batch)
        kq_qtree_batch_begin(t);
    char name[64], parent[64];
    for (int d = 0; d < d_n; d++) {
        snprintf(name, sizeof(name), "dept-%d", d);
        add_group(t, name, NULL, true, dept_min);
        for (int tm = 0; tm < t_n; tm++) {
            snprintf(parent, sizeof(parent), "dept-%d", d);
            snprintf(name, sizeof(name), "team-%d-%d", d, tm);
            add_group(t, name, parent, true, team_min);
            for (int l = 0; l < l_n; l++) {
                snprintf(parent, sizeof(parent), "team-%d-%d", d, tm);
                snprintf(name, sizeof(name), "q-%d-%d-%d", d, tm, l);
                add_group(t, name, parent, false, leaf_min);
            }
        }
    }
    kq_resource_t req = KQ_RESOURCE_EMPTY;
    res2(tot, total, total << 22);
    res2(tot2, total - 64000, (total - 64000) << 22);
    kq_qtree_set_cluster_total(t, tot);
    unsigned seed = 12345;
    for (int i = 0; i < leaves; i++) {
        seed = seed * 1103515245u + 12345u;
        int64_t r = (int64_t)((seed >> 8) % (unsigned)(leaf_min * 4 + 1));
        if (r == 0)
            continue;
        snprintf(name, sizeof(name), "q-%d-%d-%d", i / (t_n * l_n), (i / l_n) % t_n, i % l_n);
        res2(&req, r, r << 22);
        if (kq_qtree_request_add(t, name, &req) != 0)
            abort();
    }
    if (batch)
        kq_qtree_batch_end(t);
    *secs = now_s() - t0;
    return t;
}

int bench_qtree_main(int argc, char **argv)
{
    int d_n = 10, t_n = 10, l_n = 100, reps = 3, changes = 2000;
    static const struct option lo[] = {
        {"leaves-per-team", required_argument, NULL, 'l'}, {"reps", required_argument, NULL, 'r'},
        {"changes", required_argument, NULL, 'c'}, {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'l': l_n = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'c': changes = atoi(optarg); break;
        default: return 2;
        }
    }
    if (reps < 1 || reps > 16 || l_n < 1 || changes < 2)
        return 2;
    kq_log_set_level("warn"); /* the tree logs every group it creates */
    int leaves = d_n * t_n * l_n;
    kq_resource_t tot = KQ_RESOURCE_EMPTY, tot2 = KQ_RESOURCE_EMPTY, req = KQ_RESOURCE_EMPTY;
    double one_by_one, batched;
    kq_qtree_free(build(d_n, t_n, l_n, false, &tot, &tot2, &one_by_one));
    kq_qtree_t *t = build(d_n, t_n, l_n, true, &tot, &tot2, &batched);
    fprintf(stderr, "kqbench qtree: %d leaves built and loaded in %.2fs (change by change), %.2fs (one batch)\n",
            leaves, one_by_one, batched);

    unsigned seed = 12345; /* the changes continue the loading sequence, as before */
    for (int i = 0; i < leaves; i++)
        seed = seed * 1103515245u + 12345u;
    char (*names)[64] = malloc((size_t)changes * 64);
    for (int i = 0; i < changes; i++) {
        seed = seed * 1103515245u + 12345u;
        int k = (int)((seed >> 8) % (unsigned)leaves);
        snprintf(names[i], 64, "q-%d-%d-%d", k / (t_n * l_n), (k / l_n) % t_n, k % l_n);
    }
    res2(&req, 250, 250LL << 22);
    double leaf[16], clus[16], leaf_max[16], clus_max[16];
    for (int k = 0; k < reps; k++) {
        double worst = 0;
        double s0 = now_s();
        for (int i = 0; i < changes; i++) {
            double a = now_s();
            if (kq_qtree_request_add(t, names[i], &req) != 0 || kq_qtree_request_sub(t, names[i], &req) != 0)
                abort();
            double b = now_s() - a;
            if (b > worst)
                worst = b;
        }
        leaf[k] = (now_s() - s0) / (2.0 * changes) * 1e3;
        leaf_max[k] = worst / 2 * 1e3;
        int n = changes / 20 > 10 ? changes / 20 : 10;
        worst = 0;
        s0 = now_s();
        for (int i = 0; i < n; i++) {
            double a = now_s();
            kq_qtree_set_cluster_total(t, i % 2 ? &tot : &tot2);
            double b = now_s() - a;
            if (b > worst)
                worst = b;
        }
        kq_qtree_set_cluster_total(t, &tot);
        clus[k] = (now_s() - s0) / n * 1e3;
        clus_max[k] = worst * 1e3;
        fprintf(stderr, "  qtree rep=%d: leaf request change %.4f ms (max %.3f), cluster total change %.3f ms (max %.3f)\n",
                k, leaf[k], leaf_max[k], clus[k], clus_max[k]);
    }
    char cmd[256], what[160], val[200];
    snprintf(cmd, sizeof(cmd), "%s qtree --leaves-per-team %d --changes %d --reps %d", bench_self(), l_n, changes, reps);
    snprintf(what, sizeof(what), "elastic runtime: leaf request change, %d leaf groups", leaves);
    snprintf(val, sizeof(val), "%.4f ms/change (worst %.3f ms)", median(leaf, (size_t)reps),
             median(leaf_max, (size_t)reps));
    row_print("6", what, val, "<=10 ms", cmd);
    snprintf(what, sizeof(what), "elastic runtime: cluster total change, %d leaf groups", leaves);
    snprintf(val, sizeof(val), "%.3f ms/change (worst %.3f ms)", median(clus, (size_t)reps),
             median(clus_max, (size_t)reps));
    row_print("6", what, val, "<=10 ms", cmd);
    snprintf(what, sizeof(what), "elastic tree: build %d leaf groups + load their requests", leaves);
    snprintf(val, sizeof(val), "%.2f s change by change, %.3f s in one batch", one_by_one, batched);
    row_print("6", what, val, "-", cmd);
    free(names);
    kq_qtree_free(t);
    return 0;
}
