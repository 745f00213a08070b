/* Row 8: a node and a pod with 24 resource names (issue 15: GPU nodes with hugepages,
 * MIG profiles, RDMA, ephemeral storage...), against the same work with 16 (the most a
 * set holds inline) and 2 (cpu, memory). More than KQ_RES_INLINE names spill a set to
 * the heap; the per-name ratio 24:16 shows what that costs on the per-pod engine paths,
 * in one process:
 *   - node fit: kq_resource_fits(node used, pod request, node allocatable), the check a
 *     filter makes per candidate node;
 *   - quota admit + release: kq_qtree_assume then kq_qtree_used_sub on a leaf of a
 *     2-level tree of 100 leaves (each with pending pods asking 1000 of every resource)
 *     whose cluster total is 100 such nodes (the bind path).
 * The process-wide name limit (resource.h, Limit) is lifted here: only the resource
 * module and the quota tree run, and both own their sets explicitly.
 */
#include "bench.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kubequota/base/log.h"
#include "kubequota/engine/quota_tree.h"

/* 24 names a GPU node reports (the first 2 alone are the baseline). */
static const char *const NAMES[24] = {
    "cpu", "memory", "ephemeral-storage", "pods", "hugepages-1Gi", "hugepages-2Mi",
    "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-1g.20gb", "nvidia.com/mig-2g.20gb",
    "nvidia.com/mig-3g.40gb", "nvidia.com/mig-4g.40gb", "nvidia.com/mig-7g.80gb", "rdma/hca_shared_devices_a",
    "rdma/hca_shared_devices_b", "rdma/ib", "smarter-devices/fuse", "smarter-devices/kvm",
    "example.com/nic-sriov-a", "example.com/nic-sriov-b", "example.com/fpga", "example.com/dongle",
    "example.com/license", "example.com/qat",
};

static void fill(kq_resource_t *r, int n, int64_t v)
{
    for (int i = 0; i < n; i++)
        if (kq_resource_set(r, NAMES[i], v) != 0)
            abort();
}

struct res {
    double fit_ns, admit_us;
};

static struct res run(int n, int iters)
{
    kq_resource_t alloc = KQ_RESOURCE_EMPTY, used = KQ_RESOURCE_EMPTY, req = KQ_RESOURCE_EMPTY,
                  tot = KQ_RESOURCE_EMPTY;
    fill(&alloc, n, 1000000);
    fill(&used, n, 1000);
    fill(&req, n, 1);
    fill(&tot, n, 100 * 1000000);
    struct res out;
    volatile bool sink = false;
    double t0 = now_s();
    for (int i = 0; i < iters * 20; i++)
        sink ^= kq_resource_fits(&used, &req, &alloc, NULL);
    out.fit_ns = (now_s() - t0) / (iters * 20.0) * 1e9;
    (void)sink;

    kq_qtree_t *t = kq_qtree_new();
    kq_qtree_set_cluster_total(t, &tot);
    char name[32], err[256], reason[512];
    kq_qgroup_spec_t s;
    kq_qgroup_spec_init(&s, "dept");
    s.is_parent = true;
    if (kq_qtree_set_group(t, &s, err, sizeof err) != 0)
        abort();
    for (int g = 0; g < 100; g++) {
        snprintf(name, sizeof name, "q-%d", g);
        kq_qgroup_spec_init(&s, name);
        s.parent = "dept";
        s.max = alloc; /* borrowed for the call (quota_tree.h) */
        if (kq_qtree_set_group(t, &s, err, sizeof err) != 0 || kq_qtree_request_add(t, name, &used) != 0)
            abort(); /* each leaf has pending pods asking 1000 of every resource: its runtime */
    }
    t0 = now_s();
    for (int i = 0; i < iters; i++) {
        snprintf(name, sizeof name, "q-%d", i % 100);
        if (kq_qtree_assume(t, name, &req, false, reason, sizeof reason, NULL) != 0 ||
            kq_qtree_used_sub(t, name, &req, false) != 0)
            abort();
    }
    out.admit_us = (now_s() - t0) / iters * 1e6;
    kq_qtree_free(t);
    kq_resource_free(&alloc);
    kq_resource_free(&used);
    kq_resource_free(&req);
    kq_resource_free(&tot);
    return out;
}

int bench_wide_main(int argc, char **argv)
{
    int reps = 3, iters = 200000;
    static const struct option lo[] = {
        {"reps", required_argument, NULL, 'r'}, {"iters", required_argument, NULL, 'i'}, {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'r': reps = atoi(optarg); break;
        case 'i': iters = atoi(optarg); break;
        default: return 2;
        }
    }
    if (reps < 1 || reps > 16 || iters < 100)
        return 2;
    kq_log_set_level("warn");
    kq_resource_set_max_names(UINT32_MAX);
    double f2[16], f16[16], f24[16], a2[16], a16[16], a24[16];
    for (int k = 0; k < reps; k++) { /* interleaved, so load on the machine hits all alike */
        struct res x = run(2, iters), m = run(KQ_RES_INLINE, iters), y = run(24, iters);
        f2[k] = x.fit_ns, a2[k] = x.admit_us, f24[k] = y.fit_ns, a24[k] = y.admit_us;
        f16[k] = m.fit_ns, a16[k] = m.admit_us;
        fprintf(stderr, "  wide rep=%d: fit %.1f / %.1f / %.1f ns, admit+release %.3f / %.3f / %.3f us "
                "(2 / 16 / 24 names)\n", k, x.fit_ns, m.fit_ns, y.fit_ns, x.admit_us, m.admit_us, y.admit_us);
    }
    double mf2 = median(f2, (size_t)reps), mf24 = median(f24, (size_t)reps), mf16 = median(f16, (size_t)reps);
    double ma2 = median(a2, (size_t)reps), ma24 = median(a24, (size_t)reps), ma16 = median(a16, (size_t)reps);
    char cmd[256], val[200];
    snprintf(cmd, sizeof(cmd), "%s wide --iters %d --reps %d", bench_self(), iters, reps);
    snprintf(val, sizeof(val), "24 names %.1f ns; 16 %.1f ns; 2 %.1f ns; per name 24:16 %.2fx", mf24, mf16, mf2,
             (mf24 / 24) / (mf16 / 16));
    row_print("8", "node fit check, node and pod with 24 resource names", val, "-", cmd);
    snprintf(val, sizeof(val), "24 names %.3f us; 16 %.3f us; 2 %.3f us; per name 24:16 %.2fx", ma24, ma16, ma2,
             (ma24 / 24) / (ma16 / 16));
    row_print("8", "quota admit + release, 24 resource names, 100 leaves", val, "-", cmd);
    return 0;
}
