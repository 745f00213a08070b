/* kqbench shared helpers (see common.h). */
#include "common.h"

#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kubequota/base/error.h"

double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ latencies */

void lat_add(lat_t *l, double secs)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        double *v = realloc(l->v, cap * sizeof(*v));
        if (v == NULL) {
            fprintf(stderr, "kqbench: out of memory\n");
            exit(1);
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = secs;
}

void lat_merge(lat_t *into, const lat_t *from)
{
    for (size_t i = 0; i < from->n; i++)
        lat_add(into, from->v[i]);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void lat_sort(lat_t *l)
{
    if (l->n > 1)
        qsort(l->v, l->n, sizeof(double), cmp_double);
}

double lat_pct(const lat_t *l, double p)
{
    if (l->n == 0)
        return 0;
    size_t i = (size_t)(p / 100.0 * (double)l->n);
    if (i >= l->n)
        i = l->n - 1;
    return l->v[i];
}

void lat_free(lat_t *l)
{
    free(l->v);
    *l = (lat_t){0};
}

double median(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ------------------------------------------------------------------ memory */

long proc_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
            v = strtol(line + fl + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

void reset_peak_rss(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f != NULL) {
        fputs("5", f);
        fclose(f);
    }
}

size_t heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* ------------------------------------------------------------------ synthetic cluster */

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (n < 0)
            abort();
        if (b->p != NULL && b->n + (size_t)n < b->cap) {
            b->n += (size_t)n;
            return;
        }
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < b->n + (size_t)n + 1)
            cap *= 2;
        b->p = realloc(b->p, cap);
        if (b->p == NULL)
            abort();
        b->cap = cap;
    }
}

#define BIG_RES "        maxresources: {vcore: 100000000, memory: 1000000Ti}\n"

char *bench_queues_yaml(int users, int groups)
{
    (void)users;
    int per_team = groups / 100;
    sbuf_t b = {0};
    sb_printf(&b, "partitions:\n  - name: default\n    queues:\n      - name: root\n        submitacl: \"*\"\n"
                  "        limits:\n          - limit: everyone\n            users: [\"*\"]\n"
                  "            maxapplications: 100000000\n"
                  "            maxresources: {vcore: 100000000, memory: 1000000Ti}\n"
                  "        queues:\n");
    for (int d = 0; d < 10; d++) {
        sb_printf(&b, "          - name: d%d\n            parent: true\n            limits:\n"
                      "              - limit: users of d%d\n                users: [\"*\"]\n"
                      "                maxapplications: 100000000\n"
                      "                maxresources: {vcore: 100000000, memory: 1000000Ti}\n"
                      "            queues:\n",
                  d, d);
        for (int t = 0; t < 10; t++) {
            int team = d * 10 + t;
            sb_printf(&b, "              - name: t%d\n                parent: true\n                limits:\n"
                          "                  - limit: groups of team %d\n                    groups: [",
                      t, team);
            for (int g = 0; g < per_team; g++)
                sb_printf(&b, "%sg%d", g ? ", " : "", team * per_team + g);
            sb_printf(&b, "]\n                    maxapplications: 100000000\n"
                          "                    maxresources: {vcore: 100000000, memory: 1000000Ti}\n"
                          "                queues:\n");
            for (int q = 0; q < 10; q++)
                sb_printf(&b, "                  - name: q%d\n", q);
        }
    }
    return b.p;
}

kq_config_t *bench_config(int users, int groups)
{
    char *yaml = bench_queues_yaml(users, groups);
    kq_diags_t d;
    kq_diags_init(&d);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_buffer(yaml, strlen(yaml), "bench-queues.yaml", &cfg, &d);
    if (rc != 0) {
        char line[1024];
        for (size_t i = 0; i < d.n; i++) {
            kq_diag_format(&d.v[i], line, sizeof(line));
            fprintf(stderr, "kqbench: %s\n", line);
        }
        fprintf(stderr, "kqbench: generated configuration rejected: %s\n", kq_strerror(rc));
        exit(1);
    }
    kq_diags_free(&d);
    free(yaml);
    return cfg;
}

void bench_user(int i, int groups, char *user, char *group, char *queue, size_t len)
{
    int g = i % groups;
    int team = g / (groups / 100);
    snprintf(user, len, "u%d", i);
    snprintf(group, len, "g%d", g);
    snprintf(queue, len, "root.d%d.t%d.q%d", team / 10, team % 10, i % 10);
}

char *bench_pod_json(const bench_pod_t *p)
{
    char nodefield[128] = "";
    if (p->node != NULL)
        snprintf(nodefield, sizeof(nodefield), "\"nodeName\":\"%s\",", p->node);
    char del[96] = "";
    if (p->deleting)
        snprintf(del, sizeof(del), "\"deletionTimestamp\":\"2026-11-21T10:20:00Z\",\"deletionGracePeriodSeconds\":30,");
    bool running = p->phase && strcmp(p->phase, "Running") == 0;
    char *out = NULL;
    int n = asprintf(
        &out,
        "{\"kind\":\"Pod\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"%s\",\"generateName\":\"train-7c9d8-\","
        "\"namespace\":\"%s\",\"uid\":\"%s\",\"resourceVersion\":\"%s\","
        "\"creationTimestamp\":\"2026-11-21T10:15:02Z\",%s"
        "\"labels\":{\"app\":\"train\",\"pod-template-hash\":\"7c9d8\",\"kubequota.io/queue\":\"%s\"},"
        "\"annotations\":{\"kubequota.io/user-info\":\"{\\\"user\\\":\\\"%s\\\",\\\"groups\\\":[\\\"%s\\\",\\\"all\\\"]}\","
        "\"example.com/priority-class\":\"batch\"},"
        "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"train-%s\","
        "\"uid\":\"rs-%s\",\"controller\":true,\"blockOwnerDeletion\":true}]},"
        "\"spec\":{\"volumes\":[{\"name\":\"kube-api-access-abcde\",\"projected\":{\"sources\":[{\"serviceAccountToken\":"
        "{\"expirationSeconds\":3607,\"path\":\"token\"}}],\"defaultMode\":420}}],"
        "\"initContainers\":[{\"name\":\"fetch-data\",\"image\":\"busybox:1.36\",\"command\":[\"sh\",\"-c\",\"true\"],"
        "\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"256Mi\"}},"
        "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
        "\"imagePullPolicy\":\"IfNotPresent\"}],"
        "\"containers\":[{\"name\":\"trainer\",\"image\":\"registry.example.com/ml/trainer:1.4.2\","
        "\"command\":[\"python\",\"train.py\"],\"env\":[{\"name\":\"EPOCHS\",\"value\":\"10\"}],"
        "\"resources\":{\"limits\":{\"cpu\":\"4\",\"memory\":\"16Gi\"},\"requests\":{\"cpu\":\"2\",\"memory\":\"8Gi\"}},"
        "\"volumeMounts\":[{\"name\":\"kube-api-access-abcde\",\"readOnly\":true,"
        "\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\"}],"
        "\"terminationMessagePath\":\"/dev/termination-log\",\"terminationMessagePolicy\":\"File\","
        "\"imagePullPolicy\":\"IfNotPresent\"}],"
        "\"restartPolicy\":\"Always\",\"terminationGracePeriodSeconds\":30,\"dnsPolicy\":\"ClusterFirst\","
        "\"serviceAccountName\":\"default\",\"serviceAccount\":\"default\",%s\"securityContext\":{},"
        "\"schedulerName\":\"" BENCH_SCHED "\",\"priority\":0,\"enableServiceLinks\":true,"
        "\"preemptionPolicy\":\"PreemptLowerPriority\","
        "\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\","
        "\"tolerationSeconds\":300},{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\","
        "\"effect\":\"NoExecute\",\"tolerationSeconds\":300}]},"
        "\"status\":{\"phase\":\"%s\",\"conditions\":[{\"type\":\"PodScheduled\",\"status\":\"%s\","
        "\"lastProbeTime\":null,\"lastTransitionTime\":\"2026-11-21T10:15:03Z\"}],"
        "\"qosClass\":\"Burstable\"%s}}",
        p->name, p->ns, p->uid, p->rv ? p->rv : "1000", del, p->queue, p->user, p->group, p->name, p->name,
        nodefield, p->phase ? p->phase : "Pending", p->node ? "True" : "False",
        running ? ",\"hostIP\":\"10.0.3.17\",\"podIP\":\"10.244.3.21\",\"startTime\":\"2026-11-21T10:15:03Z\","
                  "\"containerStatuses\":[{\"name\":\"trainer\",\"state\":{\"running\":{\"startedAt\":"
                  "\"2026-11-21T10:15:09Z\"}},\"ready\":true,\"restartCount\":0,\"image\":"
                  "\"registry.example.com/ml/trainer:1.4.2\",\"imageID\":\"registry.example.com/ml/trainer@sha256:"
                  "4f1c2e3d4b5a69788796a5b4c3d2e1f04f1c2e3d4b5a69788796a5b4c3d2e1f0\",\"containerID\":"
                  "\"containerd://9c1b2a3d4e5f60718293a4b5c6d7e8f9\",\"started\":true}]"
                : "");
    if (n < 0) {
        fprintf(stderr, "kqbench: out of memory\n");
        exit(1);
    }
    return out;
}

/* ------------------------------------------------------------------ table */

void row_print_header(void)
{
    printf("%-4s | %-58s | %-34s | %-22s | %s\n", "row", "what", "result (median of runs)", "target", "command");
    printf("-----|-%.58s-|-%.34s-|-%.22s-|---------\n",
           "------------------------------------------------------------------------------",
           "------------------------------------------------------------------------------",
           "------------------------------------------------------------------------------");
}

void row_print(const char *row, const char *what, const char *value, const char *target, const char *cmd)
{
    /* a row's command says how to repeat it, allocator tuning included */
    const char *tun = getenv("GLIBC_TUNABLES");
    bool env = tun != NULL && tun[0] != '\0' && cmd[0] != '(' && cmd[0] != '\0';
    printf("%-4s | %-58s | %-34s | %-22s | %s%s%s%s\n", row, what, value, target ? target : "-",
           env ? "GLIBC_TUNABLES=" : "", env ? tun : "", env ? " " : "", cmd);
    fflush(stdout);
}

static const char *self_path = "bench/kqbench";
static const char *certs_dir = "build/bench/certs";

const char *bench_self(void) { return self_path; }
void bench_set_self(const char *argv0) { self_path = argv0; }
const char *bench_certs(void) { return certs_dir; }
void bench_set_certs(const char *dir) { certs_dir = dir; }

static FILE *err_out;
FILE *bench_err(void) { return err_out ? err_out : stderr; }
void bench_set_err(FILE *f) { err_out = f; }
