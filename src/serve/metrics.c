/* Metrics: lock-free counters and latency histograms, and the Prometheus text exposition
 * (format 0.0.4) built at scrape time.
 *
 * DESIGN: every update is one or two relaxed C11 atomic additions on fixed arrays indexed
 * by enums, so the hot paths (filter, bind) never take a lock or allocate. A histogram
 * keeps per-bucket (non-cumulative) counts and the sum in nanoseconds; rendering makes the
 * buckets cumulative and derives _count from the same bucket reads, so `le="+Inf"` always
 * equals _count even while requests are being recorded. The usage gauges are not stored
 * here at all: the ugm's JSON views (the same ones the REST API serves) are walked at
 * scrape time, so the metrics can never disagree with the REST view.
 */
#include "kubequota/serve/metrics.h"
#include "kubequota/control/gating.h"
#include "kubequota/control/requeue.h"
#include "kubequota/kube/leader.h"
#include "kubequota/control/metering.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kubequota/app.h"
#include "kubequota/control/elastic.h"
#include "kubequota/control/ledger.h"
#include "kubequota/control/sync.h"
#include "kubequota/engine/ugm.h"

/* ------------------------------------------------------------------ tables */

static const char *const endpoint_names[KQ_EP_COUNT] = {
    [KQ_EP_FILTER] = "/scheduler/filter",
    [KQ_EP_BIND] = "/scheduler/bind",
    [KQ_EP_PREEMPT] = "/scheduler/preempt",
    [KQ_EP_ADMISSION] = "/admission/mutate",
    [KQ_EP_ADMISSION_SCHED] = "/admission/mutate-scheduler",
    [KQ_EP_ADMISSION_VALIDATE] = "/admission/validate",
    [KQ_EP_HEALTHZ] = "/healthz",
    [KQ_EP_READYZ] = "/readyz",
    [KQ_EP_METRICS] = "/metrics",
    [KQ_EP_USAGE_USERS] = "/ws/v1/partition/{partition}/usage/users",
    [KQ_EP_USAGE_USER] = "/ws/v1/partition/{partition}/usage/user/{user}",
    [KQ_EP_USAGE_GROUPS] = "/ws/v1/partition/{partition}/usage/groups",
    [KQ_EP_USAGE_GROUP] = "/ws/v1/partition/{partition}/usage/group/{group}",
    [KQ_EP_QUEUES] = "/ws/v1/partition/{partition}/queues",
    [KQ_EP_VALIDATE_CONF] = "/ws/v1/validate-conf",
    [KQ_EP_PRICES] = "/ws/v1/partition/{partition}/prices",
    [KQ_EP_CHARGES] = "/ws/v1/partition/{partition}/charges",
    [KQ_EP_PARTITIONS] = "/ws/v1/partitions",
    [KQ_EP_QUEUE] = "/ws/v1/partition/{partition}/queue/{queue}",
    [KQ_EP_QUEUE_APPS] = "/ws/v1/partition/{partition}/queue/{queue}/applications",
    [KQ_EP_APPS] = "/ws/v1/partition/{partition}/applications",
    [KQ_EP_NODES] = "/ws/v1/partition/{partition}/nodes",
    [KQ_EP_CLUSTERS] = "/ws/v1/clusters",
    [KQ_EP_HEALTHCHECK] = "/ws/v1/scheduler/healthcheck",
    [KQ_EP_CONFIG] = "/ws/v1/config",
    [KQ_EP_PLACEMENT_RULES] = "/ws/v1/partition/{partition}/placementrules",
    [KQ_EP_EXPLAIN] = "/ws/v1/partition/{partition}/explain",
    [KQ_EP_EXPLAIN_POD] = "/ws/v1/partition/{partition}/explain/{namespace}/{pod}",
    [KQ_EP_UI] = "/ui/",
    [KQ_EP_GATING_WAITING] = "/ws/v1/partition/{partition}/gating/waiting",
    [KQ_EP_HISTORY] = "/ws/v1/partition/{partition}/history",
    [KQ_EP_NODE] = "/ws/v1/partition/{partition}/node/{node}",
    [KQ_EP_APPLICATION] = "/ws/v1/partition/{partition}/application/{application}",
    [KQ_EP_WS_METRICS] = "/ws/v1/metrics",
    [KQ_EP_YK_HISTORY] = "/ws/v1/history/{kind}",
    [KQ_EP_NODE_UTILIZATIONS] = "/ws/v1/scheduler/node-utilizations",
};

static const char *const verb_names[KQ_VERB_COUNT] = {"filter", "bind", "preempt", "admission"};
static const char *const result_names[KQ_RESULT_COUNT] = {"allowed", "denied", "error", "skipped"};

/* Upper bounds of the histogram buckets, in nanoseconds, and the same as label text: 50us
 * up to 10s, the extender timeout the chart gives kube-scheduler (its default is 5s:
 * kubernetes pkg/scheduler/extender.go DefaultExtenderTimeout), so a slow call is still
 * placed in a bucket below the timeout. */
#define N_BUCKETS 17
static const uint64_t bucket_ns[N_BUCKETS] = {
    50000ULL,     100000ULL,    250000ULL,    500000ULL,     1000000ULL,   2500000ULL,   5000000ULL,
    10000000ULL,  25000000ULL,  50000000ULL,  100000000ULL,  250000000ULL, 500000000ULL, 1000000000ULL,
    2500000000ULL, 5000000000ULL, 10000000000ULL,
};
static const char *const bucket_le[N_BUCKETS] = {
    "5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
    "0.05",  "0.1",    "0.25",    "0.5",    "1",     "2.5",    "5",     "10",
};

/* kubequota_admission_attempts_total{queue,result,reason}: an open-addressing table whose
 * keys are published once (release) and never removed; a lookup is lock-free, only the
 * first use of a key takes attempts_lock. Queues come from the configuration and results
 * and reasons from fixed sets, so the table stays small; when it is full, further keys are
 * counted under queue="_other". */
#define ATTEMPT_SLOTS 4096
typedef struct attempt_slot {
    _Atomic(char *) key; /* queue \x1f result \x1f reason */
    atomic_ulong count;
} attempt_slot_t;

typedef struct histogram {
    atomic_ulong bucket[N_BUCKETS + 1]; /* the last one counts observations above 1s */
    atomic_ullong sum_ns;
} histogram_t;

struct kq_metrics {
    atomic_ulong decisions[KQ_VERB_COUNT][KQ_RESULT_COUNT];
    histogram_t latency[KQ_EP_COUNT];
    atomic_ulong reload_ok, reload_failed;
    atomic_bool last_reload_ok;
    atomic_llong last_reload_ok_ns; /* wall time of the last successful load */
    atomic_ulong watch_restarts;
    atomic_ulong tls_connections[KQ_LISTENER_COUNT];
    atomic_ulong connections[KQ_LISTENER_COUNT];
    pthread_mutex_t attempts_lock; /* leaf: only for inserting a key */
    attempt_slot_t attempts[ATTEMPT_SLOTS];
    atomic_ulong attempts_other[3]; /* admitted, denied, other result, when the table is full */
    const char *version, *commit, *build_date; /* static strings */
    long max_users;
    double start_time;
};

const char *kq_endpoint_name(kq_endpoint_t ep)
{
    return (unsigned)ep < KQ_EP_COUNT ? endpoint_names[ep] : "unknown";
}

const char *kq_verb_name(kq_verb_t v)
{
    return (unsigned)v < KQ_VERB_COUNT ? verb_names[v] : "unknown";
}

const char *kq_result_name(kq_result_t r)
{
    return (unsigned)r < KQ_RESULT_COUNT ? result_names[r] : "unknown";
}

/* ------------------------------------------------------------------ updates */

kq_metrics_t *kq_metrics_new(void)
{
    kq_metrics_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    /* calloc's zero bytes are a valid initial state for lock-free atomics; make it explicit. */
    for (int v = 0; v < KQ_VERB_COUNT; v++)
        for (int r = 0; r < KQ_RESULT_COUNT; r++)
            atomic_init(&m->decisions[v][r], 0);
    for (int e = 0; e < KQ_EP_COUNT; e++) {
        for (int b = 0; b <= N_BUCKETS; b++)
            atomic_init(&m->latency[e].bucket[b], 0);
        atomic_init(&m->latency[e].sum_ns, 0);
    }
    atomic_init(&m->reload_ok, 0);
    atomic_init(&m->reload_failed, 0);
    atomic_init(&m->watch_restarts, 0);
    for (int l = 0; l < KQ_LISTENER_COUNT; l++) {
        atomic_init(&m->tls_connections[l], 0);
        atomic_init(&m->connections[l], 0);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    atomic_init(&m->last_reload_ok, true); /* the configuration serve started with */
    atomic_init(&m->last_reload_ok_ns, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
    m->start_time = (double)ts.tv_sec + ts.tv_nsec / 1e9;
    pthread_mutex_init(&m->attempts_lock, NULL);
    for (int i = 0; i < ATTEMPT_SLOTS; i++) {
        atomic_init(&m->attempts[i].key, NULL);
        atomic_init(&m->attempts[i].count, 0);
    }
    for (int i = 0; i < 3; i++)
        atomic_init(&m->attempts_other[i], 0);
    m->version = m->commit = m->build_date = "unknown";
    m->max_users = 100;
    return m;
}

void kq_metrics_free(kq_metrics_t *m)
{
    if (m == NULL)
        return;
    for (int i = 0; i < ATTEMPT_SLOTS; i++)
        free(atomic_load(&m->attempts[i].key));
    pthread_mutex_destroy(&m->attempts_lock);
    free(m);
}

void kq_metrics_set_build_info(kq_metrics_t *m, const char *version, const char *commit, const char *build_date)
{
    if (m == NULL)
        return;
    m->version = version ? version : "unknown";
    m->commit = commit ? commit : "unknown";
    m->build_date = build_date ? build_date : "unknown";
}

void kq_metrics_set_max_users(kq_metrics_t *m, long n)
{
    if (m != NULL)
        m->max_users = n < 0 ? 0 : n;
}

static uint64_t fnv(const char *a, const char *b, const char *c)
{
    uint64_t h = 1469598103934665603ULL;
    const char *parts[] = {a, b, c};
    for (int i = 0; i < 3; i++) {
        for (const char *p = parts[i]; *p; p++) {
            h ^= (unsigned char)*p;
            h *= 1099511628211ULL;
        }
        h ^= 0x1f;
        h *= 1099511628211ULL;
    }
    return h;
}

static bool key_is(const char *key, const char *q, const char *r, const char *why)
{
    size_t lq = strlen(q), lr = strlen(r);
    return strncmp(key, q, lq) == 0 && key[lq] == '\x1f' && strncmp(key + lq + 1, r, lr) == 0 &&
           key[lq + 1 + lr] == '\x1f' && strcmp(key + lq + lr + 2, why) == 0;
}

void kq_metrics_attempt(kq_metrics_t *m, const char *queue, const char *result, const char *reason)
{
    if (m == NULL || result == NULL)
        return;
    if (queue == NULL || *queue == '\0')
        queue = "-";
    if (reason == NULL)
        reason = "";
    uint64_t h = fnv(queue, result, reason);
    for (int probe = 0; probe < 64; probe++) {
        attempt_slot_t *sl = &m->attempts[(h + (uint64_t)probe) % ATTEMPT_SLOTS];
        char *key = atomic_load_explicit(&sl->key, memory_order_acquire);
        if (key == NULL) {
            pthread_mutex_lock(&m->attempts_lock);
            key = atomic_load_explicit(&sl->key, memory_order_relaxed);
            if (key == NULL) {
                size_t n = strlen(queue) + strlen(result) + strlen(reason) + 3;
                char *k = malloc(n);
                if (k != NULL) {
                    snprintf(k, n, "%s\x1f%s\x1f%s", queue, result, reason);
                    atomic_store_explicit(&sl->key, k, memory_order_release);
                }
                key = k;
            }
            pthread_mutex_unlock(&m->attempts_lock);
            if (key == NULL)
                break;
        }
        if (key_is(key, queue, result, reason)) {
            atomic_fetch_add_explicit(&sl->count, 1, memory_order_relaxed);
            return;
        }
    }
    int i = strcmp(result, "admitted") == 0 ? 0 : strcmp(result, "denied") == 0 ? 1 : 2;
    atomic_fetch_add_explicit(&m->attempts_other[i], 1, memory_order_relaxed);
}

unsigned long kq_metrics_attempt_count(kq_metrics_t *m, const char *queue, const char *result, const char *reason)
{
    if (m == NULL)
        return 0;
    for (int i = 0; i < ATTEMPT_SLOTS; i++) {
        const char *key = atomic_load_explicit(&m->attempts[i].key, memory_order_acquire);
        if (key != NULL && key_is(key, queue ? queue : "-", result, reason ? reason : ""))
            return atomic_load_explicit(&m->attempts[i].count, memory_order_relaxed);
    }
    return 0;
}

void kq_metrics_decision(kq_metrics_t *m, kq_verb_t verb, kq_result_t result)
{
    if (m == NULL || (unsigned)verb >= KQ_VERB_COUNT || (unsigned)result >= KQ_RESULT_COUNT)
        return;
    atomic_fetch_add_explicit(&m->decisions[verb][result], 1, memory_order_relaxed);
}

void kq_metrics_latency(kq_metrics_t *m, kq_endpoint_t ep, double seconds)
{
    if (m == NULL || (unsigned)ep >= KQ_EP_COUNT)
        return;
    uint64_t ns;
    if (!(seconds > 0)) /* also NaN */
        ns = 0;
    else if (seconds >= 1e9)
        ns = UINT64_MAX / 2;
    else
        ns = (uint64_t)llround(seconds * 1e9);
    int b = 0;
    while (b < N_BUCKETS && ns > bucket_ns[b])
        b++;
    histogram_t *h = &m->latency[ep];
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
}

void kq_metrics_config_reload(kq_metrics_t *m, bool ok)
{
    if (m == NULL)
        return;
    atomic_fetch_add_explicit(ok ? &m->reload_ok : &m->reload_failed, 1, memory_order_relaxed);
    atomic_store_explicit(&m->last_reload_ok, ok, memory_order_relaxed);
    if (ok) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        atomic_store_explicit(&m->last_reload_ok_ns, (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
                              memory_order_relaxed);
    }
}

void kq_metrics_watch_restart(kq_metrics_t *m)
{
    if (m != NULL)
        atomic_fetch_add_explicit(&m->watch_restarts, 1, memory_order_relaxed);
}

void kq_metrics_connection(kq_metrics_t *m, kq_listener_t l, bool tls)
{
    if (m == NULL || (unsigned)l >= KQ_LISTENER_COUNT)
        return;
    atomic_fetch_add_explicit(&m->connections[l], 1, memory_order_relaxed);
    if (tls)
        atomic_fetch_add_explicit(&m->tls_connections[l], 1, memory_order_relaxed);
}

unsigned long kq_metrics_connection_count(kq_metrics_t *m, kq_listener_t l)
{
    return m != NULL && (unsigned)l < KQ_LISTENER_COUNT
               ? atomic_load_explicit(&m->connections[l], memory_order_relaxed)
               : 0;
}

unsigned long kq_metrics_tls_connection_count(kq_metrics_t *m, kq_listener_t l)
{
    return m != NULL && (unsigned)l < KQ_LISTENER_COUNT
               ? atomic_load_explicit(&m->tls_connections[l], memory_order_relaxed)
               : 0;
}

unsigned long kq_metrics_decision_count(kq_metrics_t *m, kq_verb_t verb, kq_result_t result)
{
    if (m == NULL || (unsigned)verb >= KQ_VERB_COUNT || (unsigned)result >= KQ_RESULT_COUNT)
        return 0;
    return atomic_load_explicit(&m->decisions[verb][result], memory_order_relaxed);
}

unsigned long kq_metrics_latency_count(kq_metrics_t *m, kq_endpoint_t ep)
{
    if (m == NULL || (unsigned)ep >= KQ_EP_COUNT)
        return 0;
    unsigned long n = 0;
    for (int b = 0; b <= N_BUCKETS; b++)
        n += atomic_load_explicit(&m->latency[ep].bucket[b], memory_order_relaxed);
    return n;
}

/* ------------------------------------------------------------------ text buffer */

typedef struct buf {
    char *p;
    size_t len, cap;
    bool oom;
} buf_t;

static bool buf_reserve(buf_t *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

static void buf_put(buf_t *b, const char *s, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_puts(buf_t *b, const char *s)
{
    buf_put(b, s, strlen(s));
}

static void buf_printf(buf_t *b, const char *fmt, ...) KQ_PRINTF(2, 3);
static void buf_printf(buf_t *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof(small), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof(small)) {
        buf_put(b, small, (size_t)n);
        return;
    }
    if (!buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* A label value: backslash, double quote and newline are escaped (exposition format). */
static void buf_label_value(buf_t *b, const char *s)
{
    for (const char *run = s;; s++) {
        const char *esc = NULL;
        if (*s == '\\')
            esc = "\\\\";
        else if (*s == '"')
            esc = "\\\"";
        else if (*s == '\n')
            esc = "\\n";
        else if (*s != '\0')
            continue;
        buf_put(b, run, (size_t)(s - run));
        if (esc == NULL)
            return;
        buf_puts(b, esc);
        run = s + 1;
    }
}

/* name{k1="v1",k2="v2"} value\n ; labels is a NULL-terminated key/value list. */
static void sample(buf_t *b, const char *name, const char *const *labels, const char *value)
{
    buf_puts(b, name);
    if (labels != NULL && labels[0] != NULL) {
        buf_put(b, "{", 1);
        for (size_t i = 0; labels[i] != NULL; i += 2) {
            if (i > 0)
                buf_put(b, ",", 1);
            buf_puts(b, labels[i]);
            buf_put(b, "=\"", 2);
            buf_label_value(b, labels[i + 1]);
            buf_put(b, "\"", 1);
        }
        buf_put(b, "}", 1);
    }
    buf_put(b, " ", 1);
    buf_puts(b, value);
    buf_put(b, "\n", 1);
}

static void sample_u(buf_t *b, const char *name, const char *const *labels, unsigned long long v)
{
    char num[32];
    snprintf(num, sizeof(num), "%llu", v);
    sample(b, name, labels, num);
}

static void family(buf_t *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family of one unlabelled sample: its HELP and TYPE lines, then the value. */
static void family_u(buf_t *b, const char *name, const char *type, const char *help, unsigned long long v)
{
    family(b, name, type, help);
    sample_u(b, name, NULL, v);
}

static void gating_user_sample(void *ud, const char *user, unsigned long releases)
{
    const char *lbl[] = {"user", user, NULL};
    sample_u(ud, "kubequota_gating_releases_total", lbl, releases);
}

/* A resource quantity in its base unit, as Prometheus wants: cpu in cores (the engine
 * keeps millicores), everything else as kept (memory and storage in bytes, counts). */
static void res_value(const char *res, long long v, char *num, size_t len)
{
    if (strcmp(res, "cpu") == 0) {
        long long a = v < 0 ? -v : v;
        int n = snprintf(num, len, "%s%lld.%03lld", v < 0 ? "-" : "", a / 1000, a % 1000);
        /* trim "1.500" to "1.5" and "2.000" to "2" */
        while (n > 0 && num[n - 1] == '0')
            num[--n] = '\0';
        if (n > 0 && num[n - 1] == '.')
            num[--n] = '\0';
        return;
    }
    snprintf(num, len, "%lld", v);
}

/* ------------------------------------------------------------------ elastic quota */

/* One family of per-group resource gauges from kq_qtree_json's groups. */
static void group_family(buf_t *b, const json_t *groups, const char *field, const char *name, const char *help)
{
    family(b, name, "gauge", help);
    size_t i;
    const json_t *g;
    json_array_foreach(groups, i, g) {
        const char *gname = json_string_value(json_object_get(g, "name"));
        const char *res;
        const json_t *v;
        if (gname == NULL)
            continue;
        json_object_foreach(json_object_get(g, field), res, v) {
            const char *labels[] = {"quota_group", gname, "resource", res, NULL};
            char num[32];
            res_value(res, (long long)json_integer_value(v), num, sizeof(num));
            sample(b, name, labels, num);
        }
    }
}

static void render_elastic(buf_t *b, struct kq_elastic *e)
{
    json_t *tree = kq_qtree_json(kq_elastic_qtree(e));
    const json_t *groups = json_object_get(tree, "groups");
    group_family(b, groups, "runtimeResource", "kubequota_quota_runtime",
                 "Elastic quota runtime per quota group and resource: what the group may use now, its min plus what it can borrow (cpu in cores, memory in bytes; absent = unlimited).");
    group_family(b, groups, "requestResource", "kubequota_quota_request",
                 "Elastic quota request per quota group and resource: pending and running pods (cpu in cores, memory in bytes).");
    group_family(b, groups, "allocatedResource", "kubequota_quota_used",
                 "Elastic quota used per quota group and resource: counted pods (cpu in cores, memory in bytes).");
    group_family(b, groups, "minResource", "kubequota_quota_min", "Elastic quota min per quota group and resource (cpu in cores, memory in bytes).");
    group_family(b, groups, "maxResource", "kubequota_quota_max",
                 "Elastic quota max per quota group and resource (cpu in cores, memory in bytes; absent = unlimited).");
    json_decref(tree);
    unsigned long failed = 0, ok = kq_elastic_evictions(e, &failed);
    family(b, "kubequota_reclaim_evictions_total", "counter",
           "Pods evicted to reclaim lent resources, and evictions refused or failed.");
    const char *ev[] = {"result", "evicted", NULL};
    const char *fl[] = {"result", "failed", NULL};
    sample_u(b, "kubequota_reclaim_evictions_total", ev, ok);
    sample_u(b, "kubequota_reclaim_evictions_total", fl, failed);
    ok = kq_elastic_status_writes(e, &failed);
    family(b, "kubequota_elasticquota_status_writes_total", "counter", "ElasticQuota status writes by result.");
    const char *sok[] = {"result", "success", NULL};
    const char *sbad[] = {"result", "failure", NULL};
    sample_u(b, "kubequota_elasticquota_status_writes_total", sok, ok);
    sample_u(b, "kubequota_elasticquota_status_writes_total", sbad, failed);
}

/* ------------------------------------------------------------------ usage gauges */

/* The number of running applications in a view node: an array of ids or a number. */
static unsigned long long running_apps(const json_t *v)
{
    if (json_is_array(v))
        return json_array_size(v);
    if (json_is_integer(v) && json_integer_value(v) > 0)
        return (unsigned long long)json_integer_value(v);
    return 0;
}

/* A view node's queue path: "queuePath" when present, else "queuename" (joined to the
 * parent's path when it is a bare name). Writes into out; false when there is none. */
static bool node_path(const json_t *node, const char *parent, char *out, size_t outlen)
{
    const char *p = json_string_value(json_object_get(node, "queuePath"));
    if (p == NULL)
        p = json_string_value(json_object_get(node, "queuename"));
    if (p == NULL)
        return false;
    int n;
    if (parent != NULL && parent[0] != '\0' && strchr(p, '.') == NULL)
        n = snprintf(out, outlen, "%s.%s", parent, p);
    else
        n = snprintf(out, outlen, "%s", p);
    return n > 0 && (size_t)n < outlen;
}

typedef struct usage_walk {
    buf_t *b;
    const char *who_key;  /* "user" / "group" / NULL (queue view) */
    const char *who;
    const char *res_family, *res_field; /* resource gauge and the node field it reads */
    const char *apps_family;            /* running-applications gauge, or NULL */
} usage_walk_t;

static void walk_queue(const usage_walk_t *w, const json_t *node, const char *parent, unsigned depth)
{
    char path[1024];
    if (!json_is_object(node) || depth > 64 || !node_path(node, parent, path, sizeof(path)))
        return;
    const char *labels[8];
    size_t nl = 0;
    if (w->who_key != NULL) {
        labels[nl++] = w->who_key;
        labels[nl++] = w->who;
    }
    labels[nl++] = "queue";
    labels[nl++] = path;
    const json_t *res = w->res_family ? json_object_get(node, w->res_field) : NULL;
    const char *rname;
    const json_t *val;
    json_object_foreach((json_t *)res, rname, val) {
        if (!json_is_integer(val))
            continue;
        labels[nl] = "resource";
        labels[nl + 1] = strcmp(rname, "vcore") == 0 ? "cpu" : rname; /* the views use YuniKorn's name */
        labels[nl + 2] = NULL;
        char num[32];
        res_value(labels[nl + 1], (long long)json_integer_value(val), num, sizeof(num));
        sample(w->b, w->res_family, labels, num);
    }
    if (w->apps_family != NULL) {
        labels[nl] = NULL;
        const json_t *apps = json_object_get(node, "runningApplications"); /* user/group view */
        if (apps == NULL)
            apps = json_object_get(node, "runningApps"); /* queue view */
        sample_u(w->b, w->apps_family, labels, running_apps(apps));
    }
    const json_t *children = json_object_get(node, "children");
    size_t i;
    const json_t *child;
    json_array_foreach(children, i, child)
        walk_queue(w, child, path, depth + 1);
}

/* The users or groups view: an array of trackers, or an object holding one. */
static const json_t *tracker_list(const json_t *view)
{
    if (json_is_array(view))
        return view;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)view, k, v) {
        if (json_is_array(v))
            return v;
    }
    return NULL;
}

/* One family per call (the format wants a family's samples together): res_family (with the
 * node field res_field it reads) or apps_family, the other NULL. list holds the trackers. */
static void render_trackers(buf_t *b, const json_t *list, const char *name_field, const char *who_key,
                            const char *res_family, const char *res_field, const char *apps_family)
{
    size_t i;
    const json_t *t;
    json_array_foreach(list, i, t) {
        const char *who = json_string_value(json_object_get(t, name_field));
        if (who == NULL)
            continue;
        usage_walk_t w = {
            .b = b,
            .who_key = who_key,
            .who = who,
            .res_family = res_family,
            .res_field = res_field,
            .apps_family = apps_family,
        };
        walk_queue(&w, json_object_get(t, "queues"), NULL, 0);
    }
}

/* The user trackers that get per-user series: at most max, those using the most cpu, then
 * memory, at the root queue (ties: by name). Bounds the series count however many users
 * there are. */
typedef struct ranked {
    const json_t *t;
    long long cpu, mem;
    const char *name;
} ranked_t;

static int ranked_cmp(const void *a, const void *b)
{
    const ranked_t *x = a, *y = b;
    if (x->cpu != y->cpu)
        return x->cpu > y->cpu ? -1 : 1;
    if (x->mem != y->mem)
        return x->mem > y->mem ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Built while the users view streams past one user at a time (kq_ugm_users_each), so that
 * only the kept users' trees are held, never the whole view's. */
typedef struct top {
    long max;
    size_t seen;     /* users streamed */
    size_t named;    /* ... with a userName (the ranked ones) */
    json_t *first;   /* the first max users in view order: the answer while seen <= max */
    ranked_t *best;  /* the best `max` named users so far (their trees held), unordered */
    size_t n_best, cap_best;
} top_t;

static int top_emit(void *ctx, json_t *t)
{
    top_t *k = ctx;
    k->seen++;
    if ((long)k->seen <= k->max && json_array_append(k->first, t) != 0)
        return KQ_ENOMEM;
    const char *name = json_string_value(json_object_get(t, "userName"));
    if (name == NULL)
        return 0;
    k->named++;
    if (k->max <= 0)
        return 0;
    const json_t *use = json_object_get(json_object_get(t, "queues"), "resourceUsage");
    /* the view names cpu "vcore" (YuniKorn's name) */
    const json_t *cpu = json_object_get(use, "vcore");
    ranked_t r = {t, json_integer_value(cpu != NULL ? cpu : json_object_get(use, "cpu")),
                  json_integer_value(json_object_get(use, "memory")), name};
    if ((long)k->n_best < k->max) {
        if (k->n_best == k->cap_best) {
            size_t cap = k->cap_best ? k->cap_best * 2 : 64;
            ranked_t *nb = realloc(k->best, cap * sizeof(*nb));
            if (nb == NULL)
                return KQ_ENOMEM;
            k->best = nb;
            k->cap_best = cap;
        }
        json_incref(t);
        k->best[k->n_best++] = r;
        return 0;
    }
    size_t worst = 0;
    for (size_t i = 1; i < k->n_best; i++)
        if (ranked_cmp(&k->best[i], &k->best[worst]) > 0)
            worst = i;
    if (ranked_cmp(&r, &k->best[worst]) < 0) {
        json_decref((json_t *)k->best[worst].t);
        json_incref(t);
        k->best[worst] = r;
    }
    return 0;
}

/* The user trackers that get per-user series (see ranked_t), streamed from the ugm: every
 * user in view order when there are at most max, else the best max in rank order. A new
 * array; NULL on ENOMEM. *omitted is how many were left out. */
static json_t *top_users(kq_ugm_t *ugm, long max, size_t *omitted)
{
    top_t k = {.max = max, .first = json_array()};
    *omitted = 0;
    json_t *out = NULL;
    if (k.first != NULL && kq_ugm_users_each(ugm, top_emit, &k) == 0) {
        if ((long)k.seen <= max) {
            out = json_incref(k.first);
        } else if ((out = json_array()) != NULL) {
            if (k.n_best > 0) /* qsort of a NULL array is undefined even with 0 elements */
                qsort(k.best, k.n_best, sizeof(*k.best), ranked_cmp);
            for (size_t i = 0; i < k.n_best; i++)
                json_array_append(out, (json_t *)k.best[i].t);
            *omitted = k.named > (size_t)max ? k.named - (size_t)max : 0;
        }
    }
    for (size_t i = 0; i < k.n_best; i++)
        json_decref((json_t *)k.best[i].t);
    free(k.best);
    json_decref(k.first);
    return out;
}

/* process_* as Prometheus client libraries export them (prometheus/client_golang
 * prometheus/process_collector.go): CPU time, memory, file descriptors, start time. */
static void render_process(buf_t *b, const kq_metrics_t *m)
{
    char num[64];
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        family(b, "process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.");
        snprintf(num, sizeof(num), "%.6f", (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                                               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6);
        sample(b, "process_cpu_seconds_total", NULL, num);
    }
    FILE *f = fopen("/proc/self/statm", "r");
    if (f != NULL) {
        unsigned long long size = 0, resident = 0;
        if (fscanf(f, "%llu %llu", &size, &resident) == 2) {
            long page = sysconf(_SC_PAGESIZE);
            family(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
            sample_u(b, "process_virtual_memory_bytes", NULL, size * (unsigned long long)page);
            family(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
            sample_u(b, "process_resident_memory_bytes", NULL, resident * (unsigned long long)page);
        }
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d != NULL) {
        unsigned long long n = 0;
        for (struct dirent *e; (e = readdir(d)) != NULL;)
            n += e->d_name[0] != '.';
        closedir(d);
        family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
        sample_u(b, "process_open_fds", NULL, n > 0 ? n - 1 : 0); /* not counting the one opendir holds */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        family(b, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        sample_u(b, "process_max_fds", NULL, (unsigned long long)rl.rlim_cur);
    }
    family(b, "process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.");
    snprintf(num, sizeof(num), "%.3f", m != NULL ? m->start_time : 0.0);
    sample(b, "process_start_time_seconds", NULL, num);
}

static void render_attempts(buf_t *b, kq_metrics_t *m)
{
    family(b, "kubequota_admission_attempts_total", "counter",
           "Quota decisions on pods of this scheduler by queue, result (admitted, denied) and reason of a "
           "denial (over_limit, over_runtime, never_fits, queue_missing, queue_not_leaf, acl, budget; empty "
           "when admitted).");
    if (m == NULL)
        return;
    for (int i = 0; i < ATTEMPT_SLOTS; i++) {
        const char *key = atomic_load_explicit(&m->attempts[i].key, memory_order_acquire);
        if (key == NULL)
            continue;
        char q[512], r[32], why[64];
        const char *s1 = strchr(key, '\x1f'), *s2 = s1 ? strchr(s1 + 1, '\x1f') : NULL;
        if (s2 == NULL)
            continue;
        snprintf(q, sizeof(q), "%.*s", (int)(s1 - key), key);
        snprintf(r, sizeof(r), "%.*s", (int)(s2 - s1 - 1), s1 + 1);
        snprintf(why, sizeof(why), "%s", s2 + 1);
        const char *labels[] = {"queue", q, "result", r, "reason", why, NULL};
        sample_u(b, "kubequota_admission_attempts_total", labels,
                 atomic_load_explicit(&m->attempts[i].count, memory_order_relaxed));
    }
    static const char *const res[3] = {"admitted", "denied", "other"};
    for (int i = 0; i < 3; i++) {
        unsigned long n = atomic_load_explicit(&m->attempts_other[i], memory_order_relaxed);
        if (n == 0)
            continue;
        const char *labels[] = {"queue", "_other", "result", res[i], "reason", "", NULL};
        sample_u(b, "kubequota_admission_attempts_total", labels, n);
    }
}

/* ------------------------------------------------------------------ render */

char *kq_metrics_render(kq_metrics_t *m, kq_app_t *app, size_t *len)
{
    return kq_metrics_render_ex(m, app, true, len);
}

char *kq_metrics_render_ex(kq_metrics_t *m, kq_app_t *app, bool identities, size_t *len)
{
    buf_t b = {0};
    char num[64];

    family(&b, "kubequota_build_info", "gauge",
           "Always 1; the labels name the version, the git commit and the build (commit) date.");
    {
        const char *labels[] = {"version", m ? m->version : "unknown", "commit", m ? m->commit : "unknown",
                                "build_date", m ? m->build_date : "unknown", NULL};
        sample(&b, "kubequota_build_info", labels, "1");
    }
    render_process(&b, m);
    render_attempts(&b, m);

    family(&b, "kubequota_decisions_total", "counter",
           "Scheduling and admission decisions by verb and result.");
    for (int v = 0; v < KQ_VERB_COUNT; v++) {
        for (int r = 0; r < KQ_RESULT_COUNT; r++) {
            const char *labels[] = {"verb", verb_names[v], "result", result_names[r], NULL};
            sample_u(&b, "kubequota_decisions_total", labels,
                     m ? atomic_load_explicit(&m->decisions[v][r], memory_order_relaxed) : 0);
        }
    }

    family(&b, "kubequota_request_duration_seconds", "histogram",
           "HTTP request latency by endpoint (route pattern), from the parsed request headers to the last byte written.");
    for (int e = 0; e < KQ_EP_COUNT; e++) {
        unsigned long long cum = 0;
        for (int i = 0; i <= N_BUCKETS; i++) {
            cum += m ? atomic_load_explicit(&m->latency[e].bucket[i], memory_order_relaxed) : 0;
            const char *labels[] = {"endpoint", endpoint_names[e], "le", i < N_BUCKETS ? bucket_le[i] : "+Inf",
                                    NULL};
            sample_u(&b, "kubequota_request_duration_seconds_bucket", labels, cum);
        }
        const char *labels[] = {"endpoint", endpoint_names[e], NULL};
        unsigned long long sum_ns = m ? atomic_load_explicit(&m->latency[e].sum_ns, memory_order_relaxed) : 0;
        snprintf(num, sizeof(num), "%llu.%09llu", sum_ns / 1000000000ULL, sum_ns % 1000000000ULL);
        sample(&b, "kubequota_request_duration_seconds_sum", labels, num);
        sample_u(&b, "kubequota_request_duration_seconds_count", labels, cum);
    }

    /* kube-scheduler's extender client keeps Go's 2 idle connections per host while its
     * binds run in parallel, so it opens connections (and pays a handshake on both sides)
     * under load: this shows how many (BENCHMARKS.md, "End-to-end scheduling"). */
    family(&b, "kubequota_tls_connections_total", "counter",
           "TLS connections accepted (one handshake each), by listener (main, scheduler, webhook).");
    {
        static const char *const names[KQ_LISTENER_COUNT] = {"main", "scheduler", "webhook"};
        for (int l = 0; l < KQ_LISTENER_COUNT; l++) {
            const char *labels[] = {"listener", names[l], NULL};
            sample_u(&b, "kubequota_tls_connections_total", labels, kq_metrics_tls_connection_count(m, l));
        }
    }
    /* the same with plain HTTP: the chart's default scheduler port (loopback, no TLS) */
    family(&b, "kubequota_connections_total", "counter",
           "Connections accepted, TLS or plain HTTP, by listener (main, scheduler, webhook).");
    {
        static const char *const names[KQ_LISTENER_COUNT] = {"main", "scheduler", "webhook"};
        for (int l = 0; l < KQ_LISTENER_COUNT; l++) {
            const char *labels[] = {"listener", names[l], NULL};
            sample_u(&b, "kubequota_connections_total", labels, kq_metrics_connection_count(m, l));
        }
    }

    family(&b, "kubequota_watch_restarts_total", "counter", "Restarts (reconnects and relists) of the pod watch.");
    {
        unsigned long long restarts = m ? atomic_load_explicit(&m->watch_restarts, memory_order_relaxed) : 0;
        if (app != NULL && app->sync != NULL)
            restarts += kq_sync_watch_restarts(app->sync);
        sample_u(&b, "kubequota_watch_restarts_total", NULL, restarts);
    }

    family(&b, "kubequota_config_reloads_total", "counter", "Configuration reloads by result.");
    {
        const char *ok[] = {"result", "success", NULL};
        const char *bad[] = {"result", "failure", NULL};
        sample_u(&b, "kubequota_config_reloads_total", ok,
                 m ? atomic_load_explicit(&m->reload_ok, memory_order_relaxed) : 0);
        sample_u(&b, "kubequota_config_reloads_total", bad,
                 m ? atomic_load_explicit(&m->reload_failed, memory_order_relaxed) : 0);
    }

    family_u(&b, "kubequota_config_last_reload_successful", "gauge",
             "1 when the last load of the configuration file succeeded, 0 when it was rejected (the previous one "
             "stays in force).",
             m == NULL || atomic_load_explicit(&m->last_reload_ok, memory_order_relaxed) ? 1 : 0);
    family(&b, "kubequota_config_last_reload_success_timestamp_seconds", "gauge",
           "Time of the last successful load of the configuration, in seconds since the epoch.");
    {
        long long ns = m ? atomic_load_explicit(&m->last_reload_ok_ns, memory_order_relaxed) : 0;
        snprintf(num, sizeof(num), "%lld.%03lld", ns / 1000000000LL, ns / 1000000LL % 1000);
        sample(&b, "kubequota_config_last_reload_success_timestamp_seconds", NULL, num);
    }

    if (app != NULL) {
        family_u(&b, "kubequota_leader", "gauge",
                 "1 when this replica may evict and charge: it holds the leader lease, or leader election is off.",
                 kq_leader_acts(app->leader) ? 1 : 0);
    }

    if (app != NULL) { /* the admission gate (gating.h): served with gating off too, as zeros */
        kq_gating_stats_t gs;
        kq_gating_stats(app->gating, &gs);
        family_u(&b, "kubequota_gating_waiting_pods", "gauge",
                 "Pods waiting behind the admission gate kubequota.io/admission (this replica's view).",
                 gs.waiting);
        family_u(&b, "kubequota_gating_reserved_pods", "gauge",
                 "Pods released from the admission gate and counted as reserved, not bound yet.",
                 gs.reserved);
        family(&b, "kubequota_gating_wait_seconds", "histogram",
               "How long released pods waited behind the admission gate, in seconds.");
        for (size_t i = 0; i < KQ_GATING_WAIT_BUCKETS; i++) {
            char le[32];
            snprintf(le, sizeof(le), "%g", kq_gating_wait_bounds[i]);
            const char *lbl[] = {"le", le, NULL};
            sample_u(&b, "kubequota_gating_wait_seconds_bucket", lbl, gs.wait_bucket[i]);
        }
        const char *inf[] = {"le", "+Inf", NULL};
        sample_u(&b, "kubequota_gating_wait_seconds_bucket", inf, gs.wait_count);
        snprintf(num, sizeof(num), "%.3f", gs.wait_sum);
        sample(&b, "kubequota_gating_wait_seconds_sum", NULL, num);
        sample_u(&b, "kubequota_gating_wait_seconds_count", NULL, gs.wait_count);
        family(&b, "kubequota_gating_releases_total", "counter",
               "Gates removed by this replica's admission controller, per user of the released pod.");
        kq_gating_foreach_user(app->gating, gating_user_sample, &b);
        family_u(&b, "kubequota_gating_patch_errors_total", "counter",
                 "Gate removals the API server refused or did not answer (the pod waits again or is retried).",
                 gs.patch_errors);
        family_u(&b, "kubequota_gating_reservations_expired_total", "counter",
                 "Reservations released because the pod was not bound within --admission-gate-reserve-timeout.",
                 gs.expired);
        family_u(&b, "kubequota_gating_parked_users", "gauge",
                 "Waiting users parked until a pod that holds them back ends (not tried by each pass).", gs.parked);
        family(&b, "kubequota_gating_usage_checkpoints_total", "counter",
               "Usage history checkpoints (policy usage) written to --admission-gate-usage-configmap, by result.");
        const char *ok_l[] = {"result", "ok", NULL}, *err_l[] = {"result", "error", NULL};
        sample_u(&b, "kubequota_gating_usage_checkpoints_total", ok_l, gs.usage_saves);
        sample_u(&b, "kubequota_gating_usage_checkpoints_total", err_l, gs.usage_save_errors);
        snprintf(num, sizeof(num), "%.3f", gs.usage_saved_at);
        family(&b, "kubequota_gating_usage_last_checkpoint_timestamp_seconds", "gauge",
               "When the usage history was last written (Unix seconds); 0 before the first checkpoint.");
        sample(&b, "kubequota_gating_usage_last_checkpoint_timestamp_seconds", NULL, num);
    }

    if (app != NULL) { /* requeue pokes (requeue.h): zero with --requeue-window 0 */
        unsigned long poked = 0;
        kq_requeue_stats(app->requeue, &poked, NULL);
        family_u(&b, "kubequota_requeue_pokes_total", "counter",
                 "Pods denied shortly before usage was released that were annotated so kube-scheduler retries "
                 "them.",
                 poked);
    }

    if (app != NULL && app->metering != NULL) {
        /* multipliers, utilisation and charged credits (per queue, user and group) */
        char *more = kq_metering_metrics(app->metering, identities);
        if (more != NULL)
            buf_puts(&b, more);
        else
            b.oom = true;
        free(more);
    }

    if (app != NULL && app->ledger != NULL) {
        size_t counted = 0, known = kq_ledger_size(app->ledger, &counted);
        family(&b, "kubequota_pods_tracked", "gauge",
               "Pods known to the pod ledger: pending (not counted) and counted against quotas.");
        const char *pending[] = {"state", "pending", NULL};
        const char *cnt[] = {"state", "counted", NULL};
        sample_u(&b, "kubequota_pods_tracked", pending, known >= counted ? known - counted : 0);
        sample_u(&b, "kubequota_pods_tracked", cnt, counted);
    }

    if (app != NULL && app->ugm != NULL) {
        if (identities) { /* who uses what: only for callers the usage view would let in */
            size_t omitted = 0;
            json_t *top = top_users(app->ugm, m != NULL ? m->max_users : 100, &omitted);
            if (top == NULL)
                b.oom = true;
            family(&b, "kubequota_user_resource_used", "gauge",
                   "Resources used per user and queue (cpu in cores, memory in bytes, others counts); at most "
                   "--metrics-max-users users, those using the most cpu.");
            render_trackers(&b, top, "userName", "user", "kubequota_user_resource_used", "resourceUsage", NULL);
            family(&b, "kubequota_user_resource_limit", "gauge",
                   "The user limit (maxresources) that applies per user and queue, next to kubequota_user_resource_used "
                   "(cpu in cores, memory in bytes); absent where no limit applies.");
            render_trackers(&b, top, "userName", "user", "kubequota_user_resource_limit", "maxResources", NULL);
            family(&b, "kubequota_user_running_applications", "gauge", "Running applications per user and queue.");
            render_trackers(&b, top, "userName", "user", NULL, NULL, "kubequota_user_running_applications");
            family_u(&b, "kubequota_users_omitted", "gauge",
                     "Users with usage but no per-user series because of --metrics-max-users.",
                     omitted);
            json_decref(top);

            json_t *groups = kq_ugm_groups_json(app->ugm);
            const json_t *glist = tracker_list(groups);
            family(&b, "kubequota_user_group_resource_used", "gauge",
                   "Resources used per user group (the groups of the requesting users, not a quota group) and queue "
                   "(cpu in cores, memory in bytes, others counts).");
            render_trackers(&b, glist, "groupName", "user_group", "kubequota_user_group_resource_used", "resourceUsage",
                            NULL);
            family(&b, "kubequota_user_group_resource_limit", "gauge",
                   "The group limit (maxresources) that applies per user group and queue (cpu in cores, memory in "
                   "bytes); absent where no limit applies.");
            render_trackers(&b, glist, "groupName", "user_group", "kubequota_user_group_resource_limit", "maxResources",
                            NULL);
            json_decref(groups);
        }

        json_t *queues = kq_ugm_queues_json(app->ugm);
        usage_walk_t qw = {
            .b = &b,
            .res_family = "kubequota_queue_resource_used",
            .res_field = "allocatedResource",
        };
        family(&b, "kubequota_queue_resource_used", "gauge",
               "Resources used per queue (cpu in cores, memory in bytes, others counts).");
        walk_queue(&qw, queues, NULL, 0);
        qw.res_family = "kubequota_queue_resource_pending";
        qw.res_field = "pendingResource";
        family(&b, "kubequota_queue_resource_pending", "gauge",
               "Resources requested by pods that wait in a queue (cpu in cores, memory in bytes).");
        walk_queue(&qw, queues, NULL, 0);
        qw.res_family = "kubequota_queue_resource_max";
        qw.res_field = "maxResource";
        family(&b, "kubequota_queue_resource_max", "gauge",
               "A queue's resources.max (cpu in cores, memory in bytes); absent where the queue sets none.");
        walk_queue(&qw, queues, NULL, 0);
        family(&b, "kubequota_queue_running_applications", "gauge", "Running applications per queue.");
        qw.res_family = NULL;
        qw.apps_family = "kubequota_queue_running_applications";
        walk_queue(&qw, queues, NULL, 0);
        json_decref(queues);
    }

    if (app != NULL && app->elastic != NULL)
        render_elastic(&b, app->elastic);

    if (b.oom || b.p == NULL) {
        free(b.p);
        return NULL;
    }
    if (len != NULL)
        *len = b.len;
    return b.p;
}
