/* Metering and variable pricing: the utilisation-driven price multiplier, the charge ledger
 * (per user, group and queue; totals and UTC days), budgets, and the checkpoint that carries
 * the ledger across restarts. See include/kubequota/metering.h for the rules.
 *
 * DESIGN
 *  - State lock (mu) guards everything below it in struct kq_metering: the pod table (uid ->
 *    what is charged, since when), the pending table, the running sums used for
 *    utilisation (so a compute is O(1) for prices and O(running pods) for charges), the
 *    owner ledgers and the budgets. It is held for hash work only: no I/O, no logging of
 *    more than a line, no calls out.
 *  - Checkpoint lock (io) serialises compute/checkpoint passes: a pass takes io, then mu to
 *    charge and copy the state into a JSON document, releases mu and writes the file under
 *    io only. So checkpoints are written in the order their snapshots were taken, and
 *    feeding (mu only) never waits for a disk.
 *  - Money is integers: each charge is rounded once to a micro-credit and then only added,
 *    so totals, days and the checkpoint round-trip exactly and the order in which charges
 *    happen never changes a sum.
 *  - Exactly-once across restarts: the checkpoint holds, in one atomic file, the totals and
 *    each pod's last charged time; a restart continues from both. A charge made after the
 *    last checkpoint and lost in a crash is made again from the checkpointed time: the
 *    pair stays consistent, never doubled.
 *  - Thread: one compute thread (kq_metering_start) wakes every interval, or about a second
 *    after a pod ended (so an end's charge reaches the disk soon), on a monotonic clock.
 */
#include "kubequota/control/metering.h"

#include "kubequota/base/duration.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uthash.h>

#include "kubequota/base/log.h"
#include "kubequota/control/slices.h"
#include "kubequota/engine/ugm.h"

#define DAY_SECONDS 86400.0
#define MICRO 1000000.0
#define MAX_CREDITS 1e12 /* largest budget accepted; charges saturate far above it */
#define CKPT_KIND "kubequota-metering-checkpoint"

/* ------------------------------------------------------------------ types */

enum { K_USER = 0, K_GROUP, K_QUEUE, K_COUNT };
static const char *const kind_name[K_COUNT] = {"user", "group", "queue"};
static const char *const kind_plural[K_COUNT] = {"users", "groups", "queues"};

typedef struct day_ent {
    int32_t day; /* days since 1970-01-01 (UTC) */
    int64_t micro;
    UT_hash_handle hh;
} day_ent_t;

typedef struct owner {
    char *name;
    int64_t total; /* micro-credits */
    day_ent_t *days;
    UT_hash_handle hh;
} owner_t;

typedef struct budget {
    char *name;
    int64_t micro;
    UT_hash_handle hh;
} budget_t;

typedef struct mpod {
    char *uid, *ns, *name, *user, *group, *queue; /* group, queue may be NULL */
    kq_resource_t req;
    double start;     /* charged from: max(PodScheduled, epoch) */
    double last;      /* charged up to */
    bool confirmed;   /* seen running by this process (restored pods are not, at first) */
    unsigned gen;     /* resync generation it was last seen in */
    UT_hash_handle hh;
} mpod_t;

typedef struct pend {
    char *uid;
    int64_t cpu, mem;
    unsigned gen;
    UT_hash_handle hh;
} pend_t;

/* What a checkpoint file holds, parsed. */
typedef struct ckpt {
    double epoch, written_at, mult_gen, mult_gpu;
    mpod_t *pods;
    owner_t *owners[K_COUNT];
} ckpt_t;

struct kq_metering {
    kq_metering_opts_t o;
    char *dir; /* owned copy of o.state_dir */

    pthread_mutex_t io; /* checkpoint lock: taken before mu */
    pthread_mutex_t mu; /* state lock */

    /* ---- under mu ---- */
    mpod_t *pods;
    pend_t *pending;
    int64_t run_cpu, run_mem, run_gpu; /* requests of running pods */
    int64_t pend_cpu, pend_mem;
    int64_t cap_cpu, cap_mem, cap_gpu; /* allocatable */
    owner_t *owners[K_COUNT];
    budget_t *budgets[K_COUNT];
    double epoch;
    double util_cpu, util_mem, util_gen, util_gpu;
    double mult_gen, mult_gpu;
    double computed_at;
    bool leader;
    unsigned gen;
    char restored_from[96];
    char ckpt_error[600];
    double ckpt_written_at;
    unsigned long ckpt_failures;

    /* ---- thread ---- */
    pthread_mutex_t tmu;
    pthread_cond_t tcv;
    pthread_t thread;
    bool started, stop;
    atomic_bool ckpt_wanted;
};

/* ------------------------------------------------------------------ small helpers */

static double wall_clock(void *ud)
{
    (void)ud;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_of(const kq_metering_t *m)
{
    return m->o.clock ? m->o.clock(m->o.clock_ud) : wall_clock(NULL);
}

static int64_t to_micro(double credits)
{
    if (!(credits > 0)) /* also NaN */
        return 0;
    double v = credits * MICRO;
    if (v >= 9.0e18)
        return INT64_MAX / 2;
    return llround(v);
}

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    return a + b;
}

static int32_t day_of(double t)
{
    return (int32_t)floor(t / DAY_SECONDS);
}

static void day_format(int32_t day, char *buf, size_t len)
{
    time_t t = (time_t)day * 86400;
    struct tm tm;
    gmtime_r(&t, &tm);
    if (strftime(buf, len, "%Y-%m-%d", &tm) == 0 && len > 0)
        buf[0] = '\0';
}

static bool all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

/* "YYYY-MM-DD" -> day number; false when malformed or not a real date. */
static bool day_parse(const char *s, int32_t *out)
{
    if (s == NULL || strlen(s) != 10 || s[4] != '-' || s[7] != '-' || !all_digits(s, 4) ||
        !all_digits(s + 5, 2) || !all_digits(s + 8, 2))
        return false;
    struct tm tm = {0};
    tm.tm_year = atoi(s) - 1900;
    tm.tm_mon = atoi(s + 5) - 1;
    tm.tm_mday = atoi(s + 8);
    int mon = tm.tm_mon, mday = tm.tm_mday;
    time_t t = timegm(&tm);
    if (tm.tm_mon != mon || tm.tm_mday != mday) /* 2024-02-30 was normalised */
        return false;
    *out = (int32_t)(t / 86400);
    return true;
}

static void time_format(double t, char *buf, size_t len)
{
    if (!(t > 0)) {
        snprintf(buf, len, "%s", "");
        return;
    }
    time_t s = (time_t)floor(t);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* Whether the resource is counted as GPUs: a name listed in gpu-resources (interned, so a
 * pointer compare), or any class's devices with the wildcard. */
static bool is_gpu(const kq_metering_opts_t *o, const char *name)
{
    for (size_t i = 0; i < o->n_gpu_resources; i++)
        if (o->gpu_resources[i] == name)
            return true;
    return o->gpu_all_classes && kq_dra_is_devices(name);
}

/* GPUs in r. For utilisation (util), the names of DRA device classes are left out: node
 * allocatable never holds them (a class's devices are in ResourceSlices), so counting
 * them as used would set used GPUs against a capacity that does not include them. */
static int64_t gpu_count(const kq_metering_opts_t *o, const kq_resource_t *r, bool util)
{
    int64_t n = 0;
    const kq_res_entry_t *e = KQ_RES_E(r);
    for (uint32_t i = 0; i < r->n; i++)
        if (is_gpu(o, e[i].name) && !(util && strstr(e[i].name, KQ_DRA_CLASS_SUFFIX) != NULL))
            n += e[i].value;
    return n;
}

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

/* ------------------------------------------------------------------ options */

const char kq_metering_opts_help[] =
    "  interval=DURATION          how often prices are computed and pods charged (10s)\n"
    "  tipping-point=F            general utilisation above which prices rise (0.2)\n"
    "  increment=F                general multiplier added per unit of utilisation above it (1)\n"
    "  gpu-tipping-point=F        the same for GPUs (0.2)\n"
    "  gpu-increment=F            (2)\n"
    "  price-cpu=F price-memory=F price-gpu=F  credits per unit-second at multiplier 1 (1)\n"
    "  unit-cpu=Q unit-memory=Q unit-gpu=Q     unit sizes as quantities (1, 1Gi, 1)\n"
    "  gpu-resources=a,b          resource names counted as GPUs (nvidia.com/gpu); a DRA device\n"
    "                             class's devices as <class>.deviceclass.resource.k8s.io/devices,\n"
    "                             every class's as *.deviceclass.resource.k8s.io/devices\n"
    "  min-runtime=DURATION       a pod is charged at least this long (10s)\n"
    "  state-dir=DIR              checkpoint folder (none)\n";

void kq_metering_opts_default(kq_metering_opts_t *o)
{
    *o = (kq_metering_opts_t){
        .interval_ms = 10000,
        .tipping_point = 0.2,
        .gpu_tipping_point = 0.2,
        .increment = 1,
        .gpu_increment = 2,
        .price_cpu = 1,
        .price_memory = 1,
        .price_gpu = 1,
        .unit_cpu = 1000,
        .unit_memory = 1LL << 30,
        .unit_gpu = 1,
        .min_runtime_s = 10,
    };
    o->gpu_resources[0] = kq_resource_name("nvidia.com/gpu");
    o->n_gpu_resources = o->gpu_resources[0] ? 1 : 0;
}

static bool parse_double(const char *s, double *out)
{
    if (s == NULL || *s == '\0')
        return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !isfinite(v))
        return false;
    *out = v;
    return true;
}

int kq_metering_opts_set(kq_metering_opts_t *o, const char *kv, char *err, size_t errlen)
{
    const char *eq = kv ? strchr(kv, '=') : NULL;
    if (eq == NULL || eq == kv) {
        kq_errf(err, errlen, "metering option \"%s\": expected KEY=VALUE", kv ? kv : "");
        return KQ_EINVAL;
    }
    char key[64];
    size_t kl = (size_t)(eq - kv);
    if (kl >= sizeof(key)) {
        kq_errf(err, errlen, "metering option: unknown key \"%.*s\"", (int)(kl > 64 ? 64 : kl), kv);
        return KQ_EINVAL;
    }
    memcpy(key, kv, kl);
    key[kl] = '\0';
    const char *val = eq + 1;
    kq_metering_opts_t n = *o;
    double d = 0;
    struct {
        const char *key;
        double *dst;
        bool positive;
    } reals[] = {
        {"tipping-point", &n.tipping_point, false}, {"gpu-tipping-point", &n.gpu_tipping_point, false},
        {"increment", &n.increment, false},         {"gpu-increment", &n.gpu_increment, false},
        {"price-cpu", &n.price_cpu, false},         {"price-memory", &n.price_memory, false},
        {"price-gpu", &n.price_gpu, false},
    };
    for (size_t i = 0; i < sizeof(reals) / sizeof(reals[0]); i++) {
        if (strcmp(key, reals[i].key) != 0)
            continue;
        if (!parse_double(val, &d) || d < 0 || d > 1e9) {
            kq_errf(err, errlen, "metering option %s: \"%s\" is not a number between 0 and 1e9", key, val);
            return KQ_EINVAL;
        }
        *reals[i].dst = d;
        *o = n;
        return 0;
    }
    if (strcmp(key, "interval") == 0 || strcmp(key, "min-runtime") == 0) {
        /* Go-style durations (15s, 1m30s); a bare number is the old syntax, in seconds */
        long ms = 0;
        char derr[160] = "";
        bool interval = key[0] == 'i';
        if (kq_duration_parse(val, 1000, &ms, derr, sizeof(derr)) != 0) {
            if (parse_double(val, &d) && d >= 0 && d <= 86400) /* old syntax: fractional seconds */
                ms = (long)llround(d * 1000);
            else {
                kq_errf(err, errlen, "metering option %s: %s", key, derr);
                return KQ_EINVAL;
            }
        }
        if (interval && (ms < 1 || ms > 86400000L)) {
            kq_errf(err, errlen, "metering option interval: \"%s\" must be between 1ms and 24h", val);
            return KQ_EINVAL;
        }
        if (interval)
            n.interval_ms = (int)ms;
        else
            n.min_runtime_s = (double)ms / 1000.0;
    } else if (strcmp(key, "unit-cpu") == 0 || strcmp(key, "unit-memory") == 0 || strcmp(key, "unit-gpu") == 0) {
        const char *res = key[5] == 'c' ? "cpu" : key[5] == 'm' ? "memory" : "nvidia.com/gpu";
        int64_t v = 0;
        char qerr[160] = "";
        if (kq_quantity_parse(res, val, &v, qerr, sizeof(qerr)) != 0) {
            kq_errf(err, errlen, "metering option %s: \"%s\": %s", key, val, qerr);
            return KQ_EINVAL;
        }
        if (v <= 0) {
            kq_errf(err, errlen, "metering option %s: \"%s\" must be positive", key, val);
            return KQ_EINVAL;
        }
        if (key[5] == 'c')
            n.unit_cpu = v;
        else if (key[5] == 'm')
            n.unit_memory = v;
        else
            n.unit_gpu = v;
    } else if (strcmp(key, "gpu-resources") == 0) {
        n.n_gpu_resources = 0;
        n.gpu_all_classes = false;
        const char *p = val;
        while (*p != '\0') {
            const char *c = strchr(p, ',');
            size_t l = c ? (size_t)(c - p) : strlen(p);
            char name[KQ_RES_NAME_MAX + 1];
            if (l == 0 || l > KQ_RES_NAME_MAX) {
                kq_errf(err, errlen, "metering option gpu-resources: empty or too long name in \"%s\"", val);
                return KQ_EINVAL;
            }
            memcpy(name, p, l);
            name[l] = '\0';
            if (strcmp(name, KQ_METERING_ALL_CLASSES) == 0) { /* the one wildcard: every class's devices */
                n.gpu_all_classes = true;
                p += l + (c ? 1 : 0);
                if (c && *p == '\0') {
                    kq_errf(err, errlen, "metering option gpu-resources: trailing comma in \"%s\"", val);
                    return KQ_EINVAL;
                }
                continue;
            }
            if (strchr(name, '*') != NULL) {
                kq_errf(err, errlen, "metering option gpu-resources: \"%s\": the only wildcard is \"%s\"", name,
                       KQ_METERING_ALL_CLASSES);
                return KQ_EINVAL;
            }
            const char *in = kq_resource_name(name);
            if (in == NULL || n.n_gpu_resources == KQ_METERING_MAX_GPU_NAMES) {
                kq_errf(err, errlen, "metering option gpu-resources: \"%s\" is not a valid resource name%s", name,
                       in ? " (too many names)" : "");
                return KQ_EINVAL;
            }
            n.gpu_resources[n.n_gpu_resources++] = in;
            p += l + (c ? 1 : 0);
            if (c && *p == '\0') {
                kq_errf(err, errlen, "metering option gpu-resources: trailing comma in \"%s\"", val);
                return KQ_EINVAL;
            }
        }
    } else if (strcmp(key, "state-dir") == 0) {
        if (*val == '\0') {
            kq_errf(err, errlen, "metering option state-dir: empty folder name");
            return KQ_EINVAL;
        }
        n.state_dir = val;
    } else {
        kq_errf(err, errlen, "metering option: unknown key \"%s\" (known: interval, tipping-point, increment, "
                            "gpu-tipping-point, gpu-increment, price-cpu, price-memory, price-gpu, unit-cpu, "
                            "unit-memory, unit-gpu, gpu-resources, min-runtime, state-dir)", key);
        return KQ_EINVAL;
    }
    *o = n;
    return 0;
}

static int opts_check(const kq_metering_opts_t *o, char *err, size_t errlen)
{
    if (o->interval_ms <= 0 || o->unit_cpu <= 0 || o->unit_memory <= 0 || o->unit_gpu <= 0) {
        kq_errf(err, errlen, "metering: interval and units must be positive");
        return KQ_EINVAL;
    }
    double v[] = {o->tipping_point, o->gpu_tipping_point, o->increment, o->gpu_increment,
                  o->price_cpu,     o->price_memory,      o->price_gpu, o->min_runtime_s};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        if (!isfinite(v[i]) || v[i] < 0) {
            kq_errf(err, errlen, "metering: tipping points, increments, prices and minimum runtime must be "
                                "finite and >= 0");
            return KQ_EINVAL;
        }
    if (o->n_gpu_resources > KQ_METERING_MAX_GPU_NAMES) {
        kq_errf(err, errlen, "metering: too many GPU resource names");
        return KQ_EINVAL;
    }
    return 0;
}

/* ------------------------------------------------------------------ ledger (mu held) */

static void owner_free(owner_t *w)
{
    day_ent_t *d, *dt;
    HASH_ITER(hh, w->days, d, dt)
    {
        HASH_DEL(w->days, d);
        free(d);
    }
    free(w->name);
    free(w);
}

static void owners_free(owner_t **tab)
{
    owner_t *w, *wt;
    HASH_ITER(hh, *tab, w, wt)
    {
        HASH_DEL(*tab, w);
        owner_free(w);
    }
}

static owner_t *owner_find(owner_t *tab, const char *name, size_t len)
{
    owner_t *w = NULL;
    HASH_FIND(hh, tab, name, len, w);
    return w;
}

static owner_t *owner_get(owner_t **tab, const char *name, size_t len)
{
    owner_t *w = owner_find(*tab, name, len);
    if (w != NULL)
        return w;
    w = calloc(1, sizeof(*w));
    if (w == NULL || (w->name = strndup(name, len)) == NULL) {
        free(w);
        return NULL;
    }
    HASH_ADD_KEYPTR(hh, *tab, w->name, len, w);
    return w;
}

static int owner_add(owner_t **tab, const char *name, size_t len, int32_t day, int64_t micro)
{
    owner_t *w = owner_get(tab, name, len);
    if (w == NULL)
        return KQ_ENOMEM;
    day_ent_t *d = NULL;
    HASH_FIND(hh, w->days, &day, sizeof(day), d);
    if (d == NULL) {
        d = calloc(1, sizeof(*d));
        if (d == NULL)
            return KQ_ENOMEM;
        d->day = day;
        HASH_ADD(hh, w->days, day, sizeof(d->day), d);
    }
    d->micro = sat_add(d->micro, micro);
    w->total = sat_add(w->total, micro);
    return 0;
}

static void book(kq_metering_t *m, const mpod_t *p, int32_t day, int64_t micro)
{
    if (micro <= 0)
        return;
    int rc = owner_add(&m->owners[K_USER], p->user, strlen(p->user), day, micro);
    if (rc == 0 && p->group != NULL)
        rc = owner_add(&m->owners[K_GROUP], p->group, strlen(p->group), day, micro);
    /* The queue and every ancestor: "root", "root.a", "root.a.b". */
    const char *q = p->queue ? p->queue : "root";
    for (const char *s = q; rc == 0; s++) {
        if (*s == '.' || *s == '\0')
            rc = owner_add(&m->owners[K_QUEUE], q, (size_t)(s - q), day, micro);
        if (*s == '\0')
            break;
    }
    if (rc != 0)
        kq_error("event=metering_book_failed pod=%s/%s user=%s micro_credits=%lld msg=\"out of memory; charge "
                 "partly lost\"",
                 p->ns, p->name, p->user, (long long)micro);
}

/* Cost of holding `req` for `secs` at the current multipliers, in micro-credits. */
static int64_t price_of(const kq_metering_t *m, const kq_resource_t *req, double secs)
{
    const kq_metering_opts_t *o = &m->o;
    double cpu = (double)kq_resource_get(req, "cpu", NULL) / (double)o->unit_cpu;
    double mem = (double)kq_resource_get(req, "memory", NULL) / (double)o->unit_memory;
    double gpu = (double)gpu_count(o, req, false) / (double)o->unit_gpu;
    double c = secs * cpu * m->mult_gen * o->price_cpu;
    double me = secs * mem * m->mult_gen * o->price_memory;
    double g = secs * gpu * m->mult_gpu * o->price_gpu;
    double best = c > me ? c : me;
    if (g > best)
        best = g;
    return to_micro(best);
}

/* Charges [a, b] of pod p at its current request, split at 00:00 UTC. Leader only. */
static void charge(kq_metering_t *m, const mpod_t *p, double a, double b)
{
    if (!m->leader)
        return;
    while (b > a) {
        double day_end = (floor(a / DAY_SECONDS) + 1) * DAY_SECONDS;
        double e = b < day_end ? b : day_end;
        book(m, p, day_of(a), price_of(m, &p->req, e - a));
        a = e;
    }
}

/* Charges p up to t (if later than what was charged) and moves its mark. */
static void charge_to(kq_metering_t *m, mpod_t *p, double t)
{
    if (!m->leader || !(t > p->last))
        return;
    charge(m, p, p->last, t);
    p->last = t;
}

static void run_add(kq_metering_t *m, const kq_resource_t *r, int sign)
{
    m->run_cpu += sign * kq_resource_get(r, "cpu", NULL);
    m->run_mem += sign * kq_resource_get(r, "memory", NULL);
    m->run_gpu += sign * gpu_count(&m->o, r, true);
}

static void mpod_free(mpod_t *p)
{
    if (p == NULL)
        return;
    free(p->uid);
    free(p->ns);
    free(p->name);
    free(p->user);
    free(p->group);
    free(p->queue);
    kq_resource_free(&p->req);
    free(p);
}

static void pods_free(mpod_t **tab)
{
    mpod_t *p, *pt;
    HASH_ITER(hh, *tab, p, pt)
    {
        HASH_DEL(*tab, p);
        mpod_free(p);
    }
}

/* Ends p at t (minimum runtime applied), removes and frees it. */
static void end_pod(kq_metering_t *m, mpod_t *p, double t)
{
    double end = t;
    if (end < p->start + m->o.min_runtime_s)
        end = p->start + m->o.min_runtime_s;
    charge_to(m, p, end);
    run_add(m, &p->req, -1);
    HASH_DEL(m->pods, p);
    mpod_free(p);
}

static void pend_remove(kq_metering_t *m, pend_t *e)
{
    m->pend_cpu -= e->cpu;
    m->pend_mem -= e->mem;
    HASH_DEL(m->pending, e);
    free(e->uid);
    free(e);
}

static void budgets_free(budget_t **tab)
{
    budget_t *b, *bt;
    HASH_ITER(hh, *tab, b, bt)
    {
        HASH_DEL(*tab, b);
        free(b->name);
        free(b);
    }
}

static const budget_t *budget_find(budget_t *tab, const char *name, size_t len)
{
    budget_t *b = NULL;
    HASH_FIND(hh, tab, name, len, b);
    return b;
}

/* ------------------------------------------------------------------ multipliers (mu held) */

static void compute_prices(kq_metering_t *m, double now)
{
    const kq_metering_opts_t *o = &m->o;
    m->util_cpu = m->cap_cpu > 0 ? (double)(m->run_cpu + m->pend_cpu) / (double)m->cap_cpu : 0;
    m->util_mem = m->cap_mem > 0 ? (double)(m->run_mem + m->pend_mem) / (double)m->cap_mem : 0;
    m->util_gen = m->util_cpu > m->util_mem ? m->util_cpu : m->util_mem;
    m->util_gpu = m->cap_gpu > 0 ? (double)m->run_gpu / (double)m->cap_gpu : 0;
    double over = m->util_gen - o->tipping_point;
    m->mult_gen = 1 + (over > 0 ? over : 0) * o->increment;
    double gover = m->util_gpu - o->gpu_tipping_point;
    double g = 1 + (gover > 0 ? gover : 0) * o->gpu_increment;
    m->mult_gpu = g > m->mult_gen ? g : m->mult_gen;
    m->computed_at = now;
}

/* ------------------------------------------------------------------ checkpoint format */

static json_t *owners_to_json(owner_t *tab)
{
    json_t *o = json_object();
    owner_t *w, *wt;
    HASH_ITER(hh, tab, w, wt)
    {
        json_t *days = json_object();
        day_ent_t *d, *dt;
        HASH_ITER(hh, w->days, d, dt)
        {
            char buf[16];
            day_format(d->day, buf, sizeof(buf));
            json_object_set_new(days, buf, json_integer(d->micro));
        }
        json_object_set_new(o, w->name, json_pack("{s:I,s:o}", "total", (json_int_t)w->total, "days", days));
    }
    return o;
}

/* The whole state as a checkpoint document (mu held). NULL on ENOMEM. */
static json_t *ckpt_build(kq_metering_t *m, double now)
{
    json_t *pods = json_array();
    mpod_t *p, *pt;
    HASH_ITER(hh, m->pods, p, pt)
    {
        json_t *e = json_pack("{s:s,s:s,s:s,s:s,s:o,s:o,s:o,s:f,s:f}", "uid", p->uid, "namespace", p->ns, "name",
                              p->name, "user", p->user, "group", p->group ? json_string(p->group) : json_null(),
                              "queue", p->queue ? json_string(p->queue) : json_null(), "request",
                              kq_resource_to_json(&p->req), "start", p->start, "lastCharged", p->last);
        if (e == NULL || json_array_append_new(pods, e) != 0) {
            json_decref(pods);
            return NULL;
        }
    }
    json_t *owners = json_object();
    for (int k = 0; k < K_COUNT; k++)
        json_object_set_new(owners, kind_plural[k], owners_to_json(m->owners[k]));
    return json_pack("{s:s,s:i,s:f,s:f,s:{s:f,s:f},s:o,s:o}", "kind", CKPT_KIND, "version",
                     KQ_METERING_CHECKPOINT_VERSION, "epoch", m->epoch, "writtenAt", now, "multipliers", "general",
                     m->mult_gen, "gpu", m->mult_gpu, "owners", owners, "pods", pods);
}

static void ckpt_clear(ckpt_t *c)
{
    pods_free(&c->pods);
    for (int k = 0; k < K_COUNT; k++)
        owners_free(&c->owners[k]);
}

static bool num(const json_t *v, double *out)
{
    if (!json_is_number(v))
        return false;
    double d = json_number_value(v);
    if (!isfinite(d))
        return false;
    *out = d;
    return true;
}

/* Parses and validates a checkpoint document. KQ_EPARSE with the JSON path in err. */
static int ckpt_parse(const json_t *root, ckpt_t *out, char *err, size_t errlen)
{
    ckpt_t c = {0};
    int rc = KQ_EPARSE;
    const json_t *v;
    if (!json_is_object(root)) {
        kq_errf(err, errlen, "not a JSON object");
        goto out;
    }
    v = json_object_get(root, "kind");
    if (!json_is_string(v) || strcmp(json_string_value(v), CKPT_KIND) != 0) {
        kq_errf(err, errlen, "kind: expected \"%s\"", CKPT_KIND);
        goto out;
    }
    v = json_object_get(root, "version");
    if (!json_is_integer(v) || json_integer_value(v) != KQ_METERING_CHECKPOINT_VERSION) {
        kq_errf(err, errlen, "version: expected %d", KQ_METERING_CHECKPOINT_VERSION);
        goto out;
    }
    if (!num(json_object_get(root, "epoch"), &c.epoch) || !num(json_object_get(root, "writtenAt"), &c.written_at)) {
        kq_errf(err, errlen, "epoch/writtenAt: expected numbers");
        goto out;
    }
    const json_t *mu = json_object_get(root, "multipliers");
    if (!num(json_object_get(mu, "general"), &c.mult_gen) || !num(json_object_get(mu, "gpu"), &c.mult_gpu) ||
        c.mult_gen < 1 || c.mult_gpu < 1) {
        kq_errf(err, errlen, "multipliers: expected {\"general\": >= 1, \"gpu\": >= 1}");
        goto out;
    }
    const json_t *owners = json_object_get(root, "owners");
    if (!json_is_object(owners)) {
        kq_errf(err, errlen, "owners: expected an object");
        goto out;
    }
    for (int k = 0; k < K_COUNT; k++) {
        const json_t *tab = json_object_get(owners, kind_plural[k]);
        if (!json_is_object(tab)) {
            kq_errf(err, errlen, "owners.%s: expected an object", kind_plural[k]);
            goto out;
        }
        const char *name;
        const json_t *w;
        json_object_foreach((json_t *)tab, name, w)
        {
            const json_t *tot = json_object_get(w, "total");
            const json_t *days = json_object_get(w, "days");
            if (!json_is_integer(tot) || json_integer_value(tot) < 0 || !json_is_object(days) || name[0] == '\0') {
                kq_errf(err, errlen, "owners.%s[\"%.100s\"]: expected {\"total\": integer >= 0, \"days\": {...}}",
                       kind_plural[k], name);
                goto out;
            }
            owner_t *o = owner_get(&c.owners[k], name, strlen(name));
            if (o == NULL) {
                rc = KQ_ENOMEM;
                goto out;
            }
            const char *dname;
            const json_t *dv;
            int64_t sum = 0;
            json_object_foreach((json_t *)days, dname, dv)
            {
                int32_t day;
                if (!day_parse(dname, &day) || !json_is_integer(dv) || json_integer_value(dv) < 0) {
                    kq_errf(err, errlen, "owners.%s[\"%.100s\"].days[\"%.20s\"]: expected a YYYY-MM-DD key and an "
                                        "integer >= 0",
                           kind_plural[k], name, dname);
                    goto out;
                }
                if (owner_add(&c.owners[k], name, strlen(name), day, json_integer_value(dv)) != 0) {
                    rc = KQ_ENOMEM;
                    goto out;
                }
                sum = sat_add(sum, json_integer_value(dv));
            }
            if (sum != json_integer_value(tot)) {
                kq_errf(err, errlen, "owners.%s[\"%.100s\"]: total %lld is not the sum of its days (%lld)",
                       kind_plural[k], name, (long long)json_integer_value(tot), (long long)sum);
                goto out;
            }
        }
    }
    const json_t *pods = json_object_get(root, "pods");
    if (!json_is_array(pods)) {
        kq_errf(err, errlen, "pods: expected an array");
        goto out;
    }
    size_t i;
    const json_t *pj;
    json_array_foreach(pods, i, pj)
    {
        const char *uid = json_string_value(json_object_get(pj, "uid"));
        const char *ns = json_string_value(json_object_get(pj, "namespace"));
        const char *name = json_string_value(json_object_get(pj, "name"));
        const char *user = json_string_value(json_object_get(pj, "user"));
        const json_t *g = json_object_get(pj, "group"), *q = json_object_get(pj, "queue");
        double start, last;
        char rerr[160] = "";
        kq_resource_t req = KQ_RESOURCE_EMPTY; /* initialised: kq_resource_from_json writes into it */
        if (uid == NULL || uid[0] == '\0' || ns == NULL || name == NULL || user == NULL ||
            !(json_is_null(g) || json_is_string(g)) || !(json_is_null(q) || json_is_string(q)) ||
            !num(json_object_get(pj, "start"), &start) || !num(json_object_get(pj, "lastCharged"), &last) ||
            kq_resource_from_json(json_object_get(pj, "request"), &req, rerr, sizeof(rerr)) != 0) {
            kq_errf(err, errlen, "pods[%zu]: expected uid, namespace, name, user, group, queue, request, start, "
                                "lastCharged%s%s", i, rerr[0] ? ": " : "", rerr);
            kq_resource_free(&req);
            goto out;
        }
        mpod_t *dup = NULL;
        HASH_FIND_STR(c.pods, uid, dup);
        if (dup != NULL) {
            kq_errf(err, errlen, "pods[%zu]: duplicate uid %.100s", i, uid);
            kq_resource_free(&req);
            goto out;
        }
        mpod_t *p = calloc(1, sizeof(*p));
        if (p == NULL) {
            kq_resource_free(&req);
            rc = KQ_ENOMEM;
            goto out;
        }
        p->uid = strdup(uid);
        p->ns = strdup(ns);
        p->name = strdup(name);
        p->user = strdup(user);
        p->group = xstrdup(json_string_value(g));
        p->queue = xstrdup(json_string_value(q));
        kq_resource_move(&p->req, &req); /* p owns it from here (mpod_free) */
        kq_resource_free(&req);
        p->start = start;
        p->last = last;
        if (!p->uid || !p->ns || !p->name || !p->user || (json_is_string(g) && !p->group) ||
            (json_is_string(q) && !p->queue)) {
            mpod_free(p);
            rc = KQ_ENOMEM;
            goto out;
        }
        HASH_ADD_KEYPTR(hh, c.pods, p->uid, strlen(p->uid), p);
    }
    *out = c;
    return 0;
out:
    ckpt_clear(&c);
    return rc;
}

static void path_join(char *buf, size_t len, const char *dir, const char *file)
{
    snprintf(buf, len, "%s/%s", dir, file);
}

/* Reads and parses one checkpoint file. KQ_ENOENT when absent; KQ_EIO unreadable; KQ_EPARSE. */
static int ckpt_load(const char *path, ckpt_t *out, char *err, size_t errlen)
{
    json_error_t je;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        if (errno == ENOENT)
            return KQ_ENOENT;
        kq_errf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return KQ_EIO;
    }
    json_t *root = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
    bool ioerr = ferror(f) != 0;
    fclose(f);
    if (root == NULL) {
        kq_errf(err, errlen, "%s:%d:%d: %s", path, je.line, je.column, ioerr ? "read error" : je.text);
        return ioerr ? KQ_EIO : KQ_EPARSE;
    }
    char why[400];
    int rc = ckpt_parse(root, out, why, sizeof(why));
    json_decref(root);
    if (rc == KQ_EPARSE)
        kq_errf(err, errlen, "%s: %s", path, why);
    else if (rc != 0)
        kq_errf(err, errlen, "%s: %s", path, kq_strerror(rc));
    return rc;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    close(fd);
    return r;
}

/* Writes text atomically as the new checkpoint, keeping the current one as .prev. */
static int ckpt_write(const char *dir, const char *text, char *err, size_t errlen)
{
    char tmp[4200], cur[4200], prev[4200];
    path_join(tmp, sizeof(tmp), dir, KQ_METERING_CHECKPOINT ".tmp");
    path_join(cur, sizeof(cur), dir, KQ_METERING_CHECKPOINT);
    path_join(prev, sizeof(prev), dir, KQ_METERING_CHECKPOINT_PREV);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        kq_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
        return KQ_EIO;
    }
    size_t len = strlen(text), off = 0;
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            kq_errf(err, errlen, "%s: write failed: %s", tmp, w < 0 ? strerror(errno) : "no progress");
            close(fd);
            unlink(tmp);
            return KQ_EIO;
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0) {
        kq_errf(err, errlen, "%s: fsync failed: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        return KQ_EIO;
    }
    close(fd);
    if (rename(cur, prev) != 0 && errno != ENOENT) {
        kq_errf(err, errlen, "%s: cannot keep it as %s: %s", cur, prev, strerror(errno));
        unlink(tmp);
        return KQ_EIO;
    }
    if (rename(tmp, cur) != 0) {
        kq_errf(err, errlen, "%s: cannot rename to %s: %s", tmp, cur, strerror(errno));
        unlink(tmp);
        return KQ_EIO;
    }
    if (fsync_dir(dir) != 0) {
        kq_errf(err, errlen, "%s: fsync of the folder failed: %s", dir, strerror(errno));
        return KQ_EIO;
    }
    return 0;
}

/* Installs a parsed checkpoint into m (mu held): owners and multipliers are replaced;
 * pods known in memory take the checkpoint's charge mark, others are added unconfirmed;
 * pods in memory that the checkpoint does not know are charged from max(start, epoch).
 * Empties c. */
static void ckpt_install(kq_metering_t *m, ckpt_t *c)
{
    for (int k = 0; k < K_COUNT; k++) {
        owners_free(&m->owners[k]);
        m->owners[k] = c->owners[k];
        c->owners[k] = NULL;
    }
    m->epoch = c->epoch;
    m->mult_gen = c->mult_gen;
    m->mult_gpu = c->mult_gpu;
    mpod_t *p, *pt;
    HASH_ITER(hh, m->pods, p, pt)
    {
        mpod_t *cp = NULL;
        HASH_FIND_STR(c->pods, p->uid, cp);
        if (cp != NULL) {
            p->last = cp->last;
            p->start = cp->start;
            HASH_DEL(c->pods, cp);
            mpod_free(cp);
        } else {
            if (p->start < m->epoch)
                p->start = m->epoch;
            p->last = p->start;
        }
    }
    HASH_ITER(hh, c->pods, p, pt)
    {
        HASH_DEL(c->pods, p);
        p->confirmed = false;
        p->gen = m->gen;
        run_add(m, &p->req, +1);
        HASH_ADD_KEYPTR(hh, m->pods, p->uid, strlen(p->uid), p);
    }
}

/* Finds the checkpoint to resume from (see the header). 0 with *c filled and `from` naming
 * the file; KQ_ENOENT: nothing to resume (fresh start); other: refuse, reason in err. */
static int ckpt_find(const char *dir, ckpt_t *c, char *from, size_t fromlen, char *err, size_t errlen)
{
    char cur[4200], prev[4200];
    path_join(cur, sizeof(cur), dir, KQ_METERING_CHECKPOINT);
    path_join(prev, sizeof(prev), dir, KQ_METERING_CHECKPOINT_PREV);
    char e1[600] = "", e2[600] = "";
    int rc = ckpt_load(cur, c, e1, sizeof(e1));
    if (rc == 0) {
        snprintf(from, fromlen, "%s", KQ_METERING_CHECKPOINT);
        return 0;
    }
    if (rc == KQ_ENOMEM) {
        kq_errf(err, errlen, "%s", e1);
        return rc;
    }
    int rc2 = ckpt_load(prev, c, e2, sizeof(e2));
    if (rc == KQ_ENOENT) {
        if (rc2 == KQ_ENOENT)
            return KQ_ENOENT;
        if (rc2 != 0) {
            kq_errf(err, errlen, "no usable metering checkpoint: %s is missing and %s; refusing to start with an "
                                "empty ledger (fix or move the file away to start from zero)", cur, e2);
            return rc2;
        }
        kq_warn("event=metering_checkpoint_fallback file=%s msg=\"the checkpoint is missing (interrupted write?); "
                "resuming from the previous one, charges since it are made again once\"", cur);
        snprintf(from, fromlen, "%s", KQ_METERING_CHECKPOINT_PREV);
        return 0;
    }
    kq_error("event=metering_checkpoint_corrupt error=\"%s\"", e1);
    if (rc2 != 0) {
        kq_errf(err, errlen, "metering checkpoint unusable: %s; previous checkpoint: %s; refusing to start with an "
                            "empty ledger (fix or move the files away to start from zero)", e1,
               rc2 == KQ_ENOENT ? "none" : e2);
        return rc;
    }
    /* Keep the bad file for inspection, out of the rotation: never overwritten, never deleted. */
    char aside[4300];
    snprintf(aside, sizeof(aside), "%s/metering-checkpoint.corrupt-%lld.json", dir, (long long)time(NULL));
    if (rename(cur, aside) != 0) {
        kq_errf(err, errlen, "metering checkpoint unusable (%s) and it cannot be moved aside to %s: %s; refusing to "
                            "start", e1, aside, strerror(errno));
        ckpt_clear(c);
        return KQ_EIO;
    }
    kq_error("event=metering_checkpoint_fallback kept=%s msg=\"checkpoint corrupt, kept aside; resuming from the "
             "previous checkpoint, charges since it are made again once\"", aside);
    snprintf(from, fromlen, "%s (after %s was corrupt)", KQ_METERING_CHECKPOINT_PREV, KQ_METERING_CHECKPOINT);
    return 0;
}

/* ------------------------------------------------------------------ life cycle */

kq_metering_t *kq_metering_new(const kq_metering_opts_t *o, char *err, size_t errlen)
{
    kq_metering_opts_t def;
    if (o == NULL) {
        kq_metering_opts_default(&def);
        o = &def;
    }
    if (opts_check(o, err, errlen) != 0)
        return NULL;
    kq_metering_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        kq_errf(err, errlen, "metering: out of memory");
        return NULL;
    }
    m->o = *o;
    m->leader = o->is_leader ? o->is_leader(o->leader_ud) : true;
    m->mult_gen = m->mult_gpu = 1;
    atomic_init(&m->ckpt_wanted, false);
    pthread_mutex_init(&m->io, NULL);
    pthread_mutex_init(&m->mu, NULL);
    pthread_mutex_init(&m->tmu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->tcv, &ca);
    pthread_condattr_destroy(&ca);
    m->epoch = now_of(m);
    if (o->state_dir != NULL) {
        m->dir = strdup(o->state_dir);
        m->o.state_dir = m->dir;
        if (m->dir == NULL) {
            kq_errf(err, errlen, "metering: out of memory");
            goto fail;
        }
        if (strlen(m->dir) > 4000) {
            kq_errf(err, errlen, "metering: state dir name too long");
            goto fail;
        }
        if (mkdir(m->dir, 0700) != 0 && errno != EEXIST) {
            kq_errf(err, errlen, "metering: cannot create state dir %s: %s", m->dir, strerror(errno));
            goto fail;
        }
        struct stat st;
        if (stat(m->dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
            kq_errf(err, errlen, "metering: state dir %s is not a folder", m->dir);
            goto fail;
        }
        ckpt_t c = {0};
        int rc = ckpt_find(m->dir, &c, m->restored_from, sizeof(m->restored_from), err, errlen);
        if (rc == 0) {
            ckpt_install(m, &c);
            ckpt_clear(&c);
            kq_info("event=metering_resumed dir=%s from=\"%s\" epoch=%.0f pods=%u", m->dir, m->restored_from,
                    m->epoch, HASH_COUNT(m->pods));
        } else if (rc == KQ_ENOENT) {
            kq_info("event=metering_fresh dir=%s msg=\"no checkpoint; starting an empty ledger from now\"", m->dir);
        } else {
            goto fail;
        }
    }
    return m;
fail:
    kq_metering_free(m);
    return NULL;
}

static void *thread_main(void *arg);

int kq_metering_start(kq_metering_t *m)
{
    pthread_mutex_lock(&m->tmu);
    if (m->started) {
        pthread_mutex_unlock(&m->tmu);
        return KQ_ESTATE;
    }
    m->stop = false;
    int rc = pthread_create(&m->thread, NULL, thread_main, m) == 0 ? 0 : KQ_ENOMEM;
    m->started = rc == 0;
    pthread_mutex_unlock(&m->tmu);
    return rc;
}

void kq_metering_free(kq_metering_t *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&m->tmu);
    bool started = m->started;
    m->stop = true;
    pthread_cond_broadcast(&m->tcv);
    pthread_mutex_unlock(&m->tmu);
    if (started) {
        pthread_join(m->thread, NULL);
        /* Final pass: charge up to now and leave a checkpoint to resume from. */
        (void)kq_metering_compute_now(m);
    }
    pods_free(&m->pods);
    pend_t *e, *et;
    HASH_ITER(hh, m->pending, e, et)
    {
        HASH_DEL(m->pending, e);
        free(e->uid);
        free(e);
    }
    for (int k = 0; k < K_COUNT; k++) {
        owners_free(&m->owners[k]);
        budgets_free(&m->budgets[k]);
    }
    pthread_cond_destroy(&m->tcv);
    pthread_mutex_destroy(&m->tmu);
    pthread_mutex_destroy(&m->mu);
    pthread_mutex_destroy(&m->io);
    free(m->dir);
    free(m);
}

/* ------------------------------------------------------------------ compute and checkpoint */

/* Checkpoint of the current state (io held, mu not held). */
static int write_snapshot(kq_metering_t *m, json_t *doc)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(doc);
    char err[600] = "";
    int rc = KQ_ENOMEM;
    if (text == NULL)
        snprintf(err, sizeof(err), "out of memory building the checkpoint");
    else
        rc = ckpt_write(m->dir, text, err, sizeof(err));
    free(text);
    pthread_mutex_lock(&m->mu);
    if (rc == 0) {
        m->ckpt_error[0] = '\0';
    } else {
        m->ckpt_failures++;
        snprintf(m->ckpt_error, sizeof(m->ckpt_error), "%s", err);
    }
    unsigned long fails = m->ckpt_failures;
    pthread_mutex_unlock(&m->mu);
    if (rc != 0 && (fails <= 10 || fails % 100 == 0))
        kq_error("event=metering_checkpoint_failed failures=%lu error=\"%s\" msg=\"charging continues in memory\"",
                 fails, err);
    return rc == 0 ? 0 : KQ_EIO;
}

/* Leader check, outside the locks; on becoming leader, resume from the checkpoint. */
static bool leadership(kq_metering_t *m)
{
    bool leader = m->o.is_leader ? m->o.is_leader(m->o.leader_ud) : true;
    pthread_mutex_lock(&m->mu);
    bool was = m->leader;
    pthread_mutex_unlock(&m->mu);
    if (leader == was)
        return leader;
    if (!leader) {
        pthread_mutex_lock(&m->mu);
        m->leader = false;
        pthread_mutex_unlock(&m->mu);
        kq_info("event=metering_follower msg=\"not the leader: prices only, no charges\"");
        return false;
    }
    ckpt_t c = {0};
    char from[96] = "", err[1400] = "";
    int rc = m->dir ? ckpt_find(m->dir, &c, from, sizeof(from), err, sizeof(err)) : KQ_ENOENT;
    if (rc != 0 && rc != KQ_ENOENT) {
        kq_error("event=metering_leader_resume_failed error=\"%s\" msg=\"not charging until a checkpoint can be "
                 "read\"", err);
        return false;
    }
    pthread_mutex_lock(&m->mu);
    if (rc == 0) {
        ckpt_install(m, &c);
        snprintf(m->restored_from, sizeof(m->restored_from), "%s", from);
    }
    m->leader = true;
    pthread_mutex_unlock(&m->mu);
    ckpt_clear(&c);
    kq_info("event=metering_leader from=\"%s\" msg=\"leader: charging resumes from the checkpoint\"",
            rc == 0 ? from : "none");
    return true;
}

int kq_metering_compute_now(kq_metering_t *m)
{
    if (m->o.before_compute != NULL)
        m->o.before_compute(m->o.before_compute_ud); /* no lock held: it may feed us */
    pthread_mutex_lock(&m->io);
    bool leader = leadership(m);
    pthread_mutex_lock(&m->mu);
    double now = now_of(m);
    compute_prices(m, now);
    json_t *doc = NULL;
    if (leader) {
        mpod_t *p, *pt;
        HASH_ITER(hh, m->pods, p, pt)
        {
            if (p->confirmed)
                charge_to(m, p, now);
        }
        if (m->dir != NULL)
            doc = ckpt_build(m, now);
        if (doc != NULL)
            m->ckpt_written_at = now;
    }
    atomic_store(&m->ckpt_wanted, false);
    pthread_mutex_unlock(&m->mu);
    int rc = 0;
    if (leader && m->dir != NULL)
        rc = write_snapshot(m, doc);
    pthread_mutex_unlock(&m->io);
    return rc;
}

/* Writes a checkpoint without charging (after a pod ended). */
static void checkpoint_now(kq_metering_t *m)
{
    pthread_mutex_lock(&m->io);
    pthread_mutex_lock(&m->mu);
    json_t *doc = NULL;
    bool write = m->leader && m->dir != NULL;
    atomic_store(&m->ckpt_wanted, false);
    if (write) {
        double now = now_of(m);
        doc = ckpt_build(m, now);
        m->ckpt_written_at = now;
    }
    pthread_mutex_unlock(&m->mu);
    if (write)
        (void)write_snapshot(m, doc);
    pthread_mutex_unlock(&m->io);
}


static bool mono_before(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static void *thread_main(void *arg)
{
    kq_metering_t *m = arg;
    struct timespec next, last_ckpt = {0, 0}, now;
    clock_gettime(CLOCK_MONOTONIC, &next);
    kq_timespec_add_ms(&next, m->o.interval_ms);
    pthread_mutex_lock(&m->tmu);
    while (!m->stop) {
        struct timespec wake = next;
        if (atomic_load(&m->ckpt_wanted)) {
            struct timespec soon = last_ckpt;
            kq_timespec_add_ms(&soon, 1000);
            if (mono_before(&soon, &wake))
                wake = soon;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (mono_before(&now, &wake)) {
            /* Woken early by kq_metering_pod_ended (ckpt_wanted) or stop: loop re-plans. */
            pthread_cond_timedwait(&m->tcv, &m->tmu, &wake);
            continue;
        }
        pthread_mutex_unlock(&m->tmu);
        if (!mono_before(&now, &next)) {
            (void)kq_metering_compute_now(m);
            clock_gettime(CLOCK_MONOTONIC, &next);
            last_ckpt = next;
            kq_timespec_add_ms(&next, m->o.interval_ms);
        } else {
            checkpoint_now(m);
            clock_gettime(CLOCK_MONOTONIC, &last_ckpt);
        }
        pthread_mutex_lock(&m->tmu);
    }
    pthread_mutex_unlock(&m->tmu);
    return NULL;
}

static void want_checkpoint(kq_metering_t *m)
{
    if (m->dir == NULL || atomic_exchange(&m->ckpt_wanted, true))
        return;
    pthread_mutex_lock(&m->tmu);
    pthread_cond_signal(&m->tcv);
    pthread_mutex_unlock(&m->tmu);
}

/* ------------------------------------------------------------------ feeding */

static double at_or_now(const kq_metering_t *m, double at)
{
    return at > 0 ? at : now_of(m);
}

/* Resize of p to req at t (mu held). KQ_ENOMEM keeps the old request (charged up to t). */
static int resize(kq_metering_t *m, mpod_t *p, const kq_resource_t *req, double t)
{
    charge_to(m, p, t);
    run_add(m, &p->req, -1);
    int rc = kq_resource_copy(&p->req, req);
    run_add(m, &p->req, +1);
    return rc;
}

int kq_metering_pod_bound(kq_metering_t *m, const kq_pod_t *pod, const char *group, double bound_at)
{
    if (pod == NULL || pod->uid == NULL || pod->uid[0] == '\0' || pod->user == NULL)
        return KQ_EINVAL;
    mpod_t *n = calloc(1, sizeof(*n));
    if (n == NULL)
        return KQ_ENOMEM;
    n->uid = strdup(pod->uid);
    n->ns = strdup(pod->ns ? pod->ns : "default");
    n->name = strdup(pod->name ? pod->name : "");
    n->user = strdup(pod->user);
    n->group = xstrdup(group);
    n->queue = xstrdup(pod->queue);
    if (!n->uid || !n->ns || !n->name || !n->user || (group && !n->group) || (pod->queue && !n->queue) ||
        kq_resource_copy(&n->req, &pod->request) != 0) {
        mpod_free(n);
        return KQ_ENOMEM;
    }
    n->confirmed = true;
    pthread_mutex_lock(&m->mu);
    double now = now_of(m);
    mpod_t *p = NULL;
    HASH_FIND_STR(m->pods, pod->uid, p);
    if (p != NULL) {
        /* Known: what was charged so far stays with the owners it was booked to. */
        p->gen = m->gen;
        if (!p->confirmed) {
            p->confirmed = true;
            kq_debug("event=metering_confirmed pod=%s/%s last_charged=%.0f", p->ns, p->name, p->last);
        }
        int rc = kq_resource_equal(&p->req, &pod->request) ? 0 : resize(m, p, &pod->request, now);
        pthread_mutex_unlock(&m->mu);
        mpod_free(n);
        return rc;
    }
    double start = bound_at > 0 ? bound_at : now;
    if (start < m->epoch)
        start = m->epoch;
    n->start = n->last = start;
    n->gen = m->gen;
    run_add(m, &n->req, +1);
    HASH_ADD_KEYPTR(hh, m->pods, n->uid, strlen(n->uid), n);
    pend_t *e = NULL;
    HASH_FIND_STR(m->pending, pod->uid, e);
    if (e != NULL)
        pend_remove(m, e);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

int kq_metering_pod_resized(kq_metering_t *m, const char *uid, const kq_resource_t *new_request, double at)
{
    if (uid == NULL || new_request == NULL)
        return KQ_EINVAL;
    pthread_mutex_lock(&m->mu);
    mpod_t *p = NULL;
    HASH_FIND_STR(m->pods, uid, p);
    int rc = p == NULL                               ? KQ_ENOENT
             : kq_resource_equal(&p->req, new_request) ? 0 /* nothing moved: the interval is not cut */
                                                       : resize(m, p, new_request, at_or_now(m, at));
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int kq_metering_pod_ended(kq_metering_t *m, const char *uid, double at)
{
    if (uid == NULL)
        return KQ_EINVAL;
    pthread_mutex_lock(&m->mu);
    mpod_t *p = NULL;
    HASH_FIND_STR(m->pods, uid, p);
    if (p != NULL)
        end_pod(m, p, at_or_now(m, at));
    pend_t *e = NULL;
    HASH_FIND_STR(m->pending, uid, e);
    if (e != NULL)
        pend_remove(m, e);
    pthread_mutex_unlock(&m->mu);
    if (p != NULL)
        want_checkpoint(m);
    return p ? 0 : KQ_ENOENT;
}

int kq_metering_pod_pending(kq_metering_t *m, const char *uid, const kq_resource_t *req)
{
    if (uid == NULL || req == NULL)
        return KQ_EINVAL;
    pend_t *n = calloc(1, sizeof(*n));
    if (n == NULL || (n->uid = strdup(uid)) == NULL) {
        free(n);
        return KQ_ENOMEM;
    }
    n->cpu = kq_resource_get(req, "cpu", NULL);
    n->mem = kq_resource_get(req, "memory", NULL);
    pthread_mutex_lock(&m->mu);
    n->gen = m->gen;
    pend_t *e = NULL;
    HASH_FIND_STR(m->pending, uid, e);
    if (e != NULL)
        pend_remove(m, e);
    m->pend_cpu += n->cpu;
    m->pend_mem += n->mem;
    HASH_ADD_KEYPTR(hh, m->pending, n->uid, strlen(n->uid), n);
    pthread_mutex_unlock(&m->mu);
    return 0;
}

void kq_metering_pod_pending_gone(kq_metering_t *m, const char *uid)
{
    if (uid == NULL)
        return;
    pthread_mutex_lock(&m->mu);
    pend_t *e = NULL;
    HASH_FIND_STR(m->pending, uid, e);
    if (e != NULL)
        pend_remove(m, e);
    pthread_mutex_unlock(&m->mu);
}

void kq_metering_resync_begin(kq_metering_t *m)
{
    pthread_mutex_lock(&m->mu);
    m->gen++;
    pthread_mutex_unlock(&m->mu);
}

void kq_metering_resync_end(kq_metering_t *m)
{
    unsigned ended = 0, vanished = 0;
    pthread_mutex_lock(&m->mu);
    double now = now_of(m);
    mpod_t *p, *pt;
    HASH_ITER(hh, m->pods, p, pt)
    {
        if (p->gen == m->gen)
            continue;
        if (p->confirmed) {
            ended++;
            end_pod(m, p, now);
        } else {
            /* Restored, gone while kubequota was down: bill only what is known. */
            vanished++;
            kq_info("event=metering_pod_vanished pod=%s/%s user=%s charged_until=%.0f msg=\"ended while kubequota "
                    "was down; charged until its last known time\"",
                    p->ns, p->name, p->user, p->last);
            end_pod(m, p, p->last);
        }
    }
    pend_t *e, *et;
    HASH_ITER(hh, m->pending, e, et)
    {
        if (e->gen != m->gen)
            pend_remove(m, e);
    }
    pthread_mutex_unlock(&m->mu);
    if (ended + vanished > 0) {
        kq_info("event=metering_resync ended=%u vanished=%u", ended, vanished);
        want_checkpoint(m);
    }
}

void kq_metering_set_nodes_allocatable(kq_metering_t *m, const kq_resource_t *total)
{
    pthread_mutex_lock(&m->mu);
    m->cap_cpu = total ? kq_resource_get(total, "cpu", NULL) : 0;
    m->cap_mem = total ? kq_resource_get(total, "memory", NULL) : 0;
    m->cap_gpu = total ? gpu_count(&m->o, total, true) : 0;
    pthread_mutex_unlock(&m->mu);
}

/* RFC 3339: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM). */
static bool rfc3339_parse(const char *s, double *out)
{
    size_t n = strlen(s);
    if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':' || !all_digits(s, 4) || !all_digits(s + 5, 2) || !all_digits(s + 8, 2) ||
        !all_digits(s + 11, 2) || !all_digits(s + 14, 2) || !all_digits(s + 17, 2))
        return false;
    char date[11];
    memcpy(date, s, 10);
    date[10] = '\0';
    int32_t day;
    if (!day_parse(date, &day))
        return false;
    int hh = atoi(s + 11), mm = atoi(s + 14), ss = atoi(s + 17);
    if (hh > 23 || mm > 59 || ss > 60)
        return false;
    const char *p = s + 19;
    double frac = 0;
    if (*p == '.') {
        p++;
        double scale = 0.1;
        if (*p < '0' || *p > '9')
            return false;
        while (*p >= '0' && *p <= '9') {
            frac += (*p - '0') * scale;
            scale /= 10;
            p++;
        }
    }
    int off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && all_digits(p + 1, 2) && p[3] == ':' &&
               all_digits(p + 4, 2)) {
        int oh = atoi(p + 1), om = atoi(p + 4);
        if (oh > 23 || om > 59)
            return false;
        off = (oh * 3600 + om * 60) * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return false;
    }
    if (*p != '\0')
        return false;
    *out = (double)day * DAY_SECONDS + hh * 3600 + mm * 60 + ss + frac - off;
    return true;
}

int kq_metering_pod_scheduled_time(const kq_jnode_t *pod, double *out)
{
    const kq_jnode_t *conds = kq_jnode_get(kq_jnode_get(pod, "status"), "conditions");
    if (conds == NULL || conds->type != KQ_JARRAY)
        return KQ_ENOENT;
    for (const kq_jnode_t *c = kq_jnode_first(conds); c != NULL; c = kq_jnode_next(conds, c)) {
        const char *type = kq_jnode_string(kq_jnode_get(c, "type"));
        const char *status = kq_jnode_string(kq_jnode_get(c, "status"));
        if (type == NULL || strcmp(type, "PodScheduled") != 0 || status == NULL || strcmp(status, "True") != 0)
            continue;
        const char *ts = kq_jnode_string(kq_jnode_get(c, "lastTransitionTime"));
        double t;
        if (ts == NULL || !rfc3339_parse(ts, &t))
            return KQ_EPARSE;
        *out = t;
        return 0;
    }
    return KQ_ENOENT;
}

/* ------------------------------------------------------------------ budgets */

static bool credits_parse(const char *s, int64_t *out)
{
    double v;
    if (!parse_double(s, &v) || v < 0 || v > MAX_CREDITS)
        return false;
    *out = llround(v * MICRO);
    return true;
}

static int budget_put(budget_t **tab, const char *name, int64_t micro)
{
    budget_t *b = calloc(1, sizeof(*b));
    if (b == NULL || (b->name = strdup(name)) == NULL) {
        free(b);
        return KQ_ENOMEM;
    }
    b->micro = micro;
    budget_t *old = NULL;
    HASH_FIND_STR(*tab, name, old);
    if (old != NULL) {
        HASH_DEL(*tab, old);
        free(old->name);
        free(old);
    }
    HASH_ADD_KEYPTR(hh, *tab, b->name, strlen(b->name), b);
    return 0;
}

static int budgets_walk(const kq_queue_conf_t *q, budget_t **tabs, kq_diags_t *diags, int *rc)
{
    for (size_t i = 0; i < q->n_properties; i++) {
        const char *key = q->properties[i].key, *val = q->properties[i].value;
        if (strncmp(key, KQ_METERING_PROP_BUDGET, strlen(KQ_METERING_PROP_BUDGET)) != 0)
            continue;
        int kind = -1;
        const char *name = NULL;
        size_t ul = strlen(KQ_METERING_PROP_USER_BUDGET), gl = strlen(KQ_METERING_PROP_GROUP_BUDGET);
        if (strcmp(key, KQ_METERING_PROP_BUDGET) == 0) {
            kind = K_QUEUE;
            name = q->path;
        } else if (strncmp(key, KQ_METERING_PROP_USER_BUDGET, ul) == 0 && key[ul] != '\0') {
            kind = K_USER;
            name = key + ul;
        } else if (strncmp(key, KQ_METERING_PROP_GROUP_BUDGET, gl) == 0 && key[gl] != '\0') {
            kind = K_GROUP;
            name = key + gl;
        }
        int64_t micro = 0;
        if (kind < 0) {
            (void)kq_diags_add(diags, NULL, q->line, q->column, q->path,
                               "property %s: unknown budget property (use %s, %s<user> or %s<group>)", key,
                               KQ_METERING_PROP_BUDGET, KQ_METERING_PROP_USER_BUDGET, KQ_METERING_PROP_GROUP_BUDGET);
            *rc = KQ_EPARSE;
        } else if (kind != K_QUEUE && q->parent != NULL) {
            (void)kq_diags_add(diags, NULL, q->line, q->column, q->path,
                               "property %s: user and group budgets belong on the root queue", key);
            *rc = KQ_EPARSE;
        } else if (!credits_parse(val, &micro)) {
            (void)kq_diags_add(diags, NULL, q->line, q->column, q->path,
                               "property %s: \"%s\" is not a number of credits between 0 and 1e12", key, val);
            *rc = KQ_EPARSE;
        } else if (tabs != NULL && *rc == 0) {
            if (budget_put(&tabs[kind], name, micro) != 0)
                *rc = KQ_ENOMEM;
        }
    }
    for (size_t i = 0; i < q->n_children; i++)
        budgets_walk(q->children[i], tabs, diags, rc);
    return *rc;
}

int kq_metering_check_config(const kq_partition_conf_t *p, kq_diags_t *diags)
{
    int rc = 0;
    if (p != NULL && p->root != NULL)
        budgets_walk(p->root, NULL, diags, &rc);
    return rc;
}

int kq_metering_set_config(kq_metering_t *m, const kq_partition_conf_t *p, kq_diags_t *diags)
{
    budget_t *tabs[K_COUNT] = {NULL, NULL, NULL};
    int rc = 0;
    if (p != NULL && p->root != NULL)
        budgets_walk(p->root, tabs, diags, &rc);
    if (rc != 0) {
        for (int k = 0; k < K_COUNT; k++)
            budgets_free(&tabs[k]);
        return rc;
    }
    pthread_mutex_lock(&m->mu);
    for (int k = 0; k < K_COUNT; k++) {
        budget_t *old = m->budgets[k];
        m->budgets[k] = tabs[k];
        tabs[k] = old;
    }
    unsigned n = HASH_COUNT(m->budgets[K_USER]) + HASH_COUNT(m->budgets[K_GROUP]) + HASH_COUNT(m->budgets[K_QUEUE]);
    pthread_mutex_unlock(&m->mu);
    for (int k = 0; k < K_COUNT; k++)
        budgets_free(&tabs[k]);
    kq_debug("event=metering_budgets budgets=%u", n);
    return 0;
}

/* 0 when owner (kind, name[0..len)) is within its budget (or has none); else the reason. */
static int budget_ok(kq_metering_t *m, int kind, const char *name, size_t len, char *reason, size_t rlen)
{
    const budget_t *b = budget_find(m->budgets[kind], name, len);
    if (b == NULL)
        return 0;
    const owner_t *w = owner_find(m->owners[kind], name, len);
    int64_t used = w ? w->total : 0;
    if (used < b->micro)
        return 0;
    kq_errf(reason, rlen, "credit budget exhausted: %s \"%.*s\" has been charged %.2f credits of its %.2f credit "
                         "budget; running pods keep running, new pods wait until the budget is raised",
           kind_name[kind], (int)len, name, (double)used / MICRO, (double)b->micro / MICRO);
    return KQ_EDENIED;
}

int kq_metering_check_budget(kq_metering_t *m, const char *user, const char *group, const char *queue,
                             char *reason, size_t reason_len, kq_denial_t *kind)
{
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    if (m->budgets[K_USER] == NULL && m->budgets[K_GROUP] == NULL && m->budgets[K_QUEUE] == NULL)
        goto out;
    if (user != NULL && (rc = budget_ok(m, K_USER, user, strlen(user), reason, reason_len)) != 0)
        goto out;
    if (group != NULL && (rc = budget_ok(m, K_GROUP, group, strlen(group), reason, reason_len)) != 0)
        goto out;
    /* The leaf first, then every ancestor up to root. */
    const char *q = queue ? queue : "root";
    for (size_t l = strlen(q);; l--) {
        if (l == 0)
            break;
        if (q[l] == '.' || q[l] == '\0') {
            if ((rc = budget_ok(m, K_QUEUE, q, l, reason, reason_len)) != 0)
                goto out;
        }
    }
out:
    pthread_mutex_unlock(&m->mu);
    kq_denial_set(kind, rc == KQ_EDENIED ? KQ_DENIAL_BUDGET : KQ_DENIAL_NONE);
    return rc;
}

/* ------------------------------------------------------------------ views */

void kq_metering_multipliers(kq_metering_t *m, double *general, double *gpu)
{
    pthread_mutex_lock(&m->mu);
    if (general)
        *general = m->mult_gen;
    if (gpu)
        *gpu = m->mult_gpu;
    pthread_mutex_unlock(&m->mu);
}

static int kind_index(const char *kind)
{
    for (int k = 0; kind && k < K_COUNT; k++)
        if (strcmp(kind, kind_name[k]) == 0)
            return k;
    return -1;
}

double kq_metering_charged(kq_metering_t *m, const char *kind, const char *name)
{
    int k = kind_index(kind);
    if (k < 0 || name == NULL)
        return 0;
    pthread_mutex_lock(&m->mu);
    const owner_t *w = owner_find(m->owners[k], name, strlen(name));
    int64_t v = w ? w->total : 0;
    pthread_mutex_unlock(&m->mu);
    return (double)v / MICRO;
}

static json_t *quantity_json(const char *res, int64_t v)
{
    char buf[64];
    kq_quantity_format(res, v, buf, sizeof(buf));
    return json_string(buf);
}

json_t *kq_metering_prices_json(kq_metering_t *m)
{
    const kq_metering_opts_t *o = &m->o;
    json_t *gpus = json_array();
    for (size_t i = 0; i < o->n_gpu_resources; i++)
        json_array_append_new(gpus, json_string(o->gpu_resources[i]));
    if (o->gpu_all_classes)
        json_array_append_new(gpus, json_string(KQ_METERING_ALL_CLASSES));
    pthread_mutex_lock(&m->mu);
    char at[40], wat[40];
    time_format(m->computed_at, at, sizeof(at));
    time_format(m->ckpt_written_at, wat, sizeof(wat));
    json_t *ck = json_pack("{s:o,s:o,s:o,s:o}", "dir", m->dir ? json_string(m->dir) : json_null(), "lastWrittenAt",
                           wat[0] ? json_string(wat) : json_null(), "error",
                           m->ckpt_error[0] ? json_string(m->ckpt_error) : json_null(), "restoredFrom",
                           m->restored_from[0] ? json_string(m->restored_from) : json_null());
    json_t *v = json_pack(
        "{s:o,s:f,s:b,s:{s:f,s:f,s:f,s:f},s:{s:f,s:f},s:{s:f,s:f},s:{s:f,s:f},s:{s:f,s:f,s:f},s:{s:o,s:o,s:o},"
        "s:o,s:f,s:f,s:i,s:o}",
        "computedAt", at[0] ? json_string(at) : json_null(), "computedAtUnix", m->computed_at, "leader", m->leader,
        "utilisation", "cpu", m->util_cpu, "memory", m->util_mem, "general", m->util_gen, "gpu", m->util_gpu,
        "multipliers", "general", m->mult_gen, "gpu", m->mult_gpu, "tippingPoints", "general", o->tipping_point,
        "gpu", o->gpu_tipping_point, "increments", "general", o->increment, "gpu", o->gpu_increment, "basePrices",
        "cpu", o->price_cpu, "memory", o->price_memory, "gpu", o->price_gpu, "units", "cpu",
        quantity_json("cpu", o->unit_cpu), "memory", quantity_json("memory", o->unit_memory), "gpu",
        quantity_json("nvidia.com/gpu", o->unit_gpu), "gpuResources", gpus, "intervalSeconds",
        (double)o->interval_ms / 1000.0, "minimumRuntimeSeconds", o->min_runtime_s, "runningPods",
        (int)HASH_COUNT(m->pods), "checkpoint", ck);
    pthread_mutex_unlock(&m->mu);
    return v;
}

static int day_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* One Charge object (mu held). */
static json_t *charge_json(kq_metering_t *m, int k, const char *name, int32_t from, int32_t to)
{
    const owner_t *w = owner_find(m->owners[k], name, strlen(name));
    json_t *days = json_array();
    int64_t range = 0;
    if (w != NULL) {
        unsigned n = HASH_COUNT(w->days), i = 0;
        int32_t *v = malloc((n ? n : 1) * sizeof(*v));
        if (v == NULL) {
            json_decref(days);
            return NULL;
        }
        const day_ent_t *d, *dt;
        HASH_ITER(hh, w->days, d, dt)
        {
            if (d->day >= from && d->day <= to)
                v[i++] = d->day;
        }
        qsort(v, i, sizeof(*v), day_cmp);
        for (unsigned j = 0; j < i; j++) {
            const day_ent_t *e = NULL;
            HASH_FIND(hh, w->days, &v[j], sizeof(v[j]), e);
            char buf[16];
            day_format(v[j], buf, sizeof(buf));
            json_array_append_new(days, json_pack("{s:s,s:f}", "day", buf, "credits", (double)e->micro / MICRO));
            range = sat_add(range, e->micro);
        }
        free(v);
    }
    int64_t total = w ? w->total : 0;
    json_t *c = json_pack("{s:s,s:f,s:f,s:o}", "name", name, "totalCredits", (double)total / MICRO, "rangeCredits",
                          (double)range / MICRO, "days", days);
    const budget_t *b = budget_find(m->budgets[k], name, strlen(name));
    if (c != NULL && b != NULL) {
        json_object_set_new(c, "budget", json_real((double)b->micro / MICRO));
        json_object_set_new(c, "remaining", json_real((double)(b->micro - total) / MICRO));
    }
    return c;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int owner_cmp(const void *a, const void *b)
{
    return strcmp((*(owner_t *const *)a)->name, (*(owner_t *const *)b)->name);
}

int kq_metering_charges_json(kq_metering_t *m, const char *user, const char *group, const char *queue,
                             const char *day_from, const char *day_to, json_t **out, char *err, size_t errlen)
{
    int32_t from = INT32_MIN, to = INT32_MAX;
    if (day_from && day_from[0] && !day_parse(day_from, &from)) {
        kq_errf(err, errlen, "from: \"%.40s\" is not a day (YYYY-MM-DD)", day_from);
        return KQ_EINVAL;
    }
    if (day_to && day_to[0] && !day_parse(day_to, &to)) {
        kq_errf(err, errlen, "to: \"%.40s\" is not a day (YYYY-MM-DD)", day_to);
        return KQ_EINVAL;
    }
    if (from > to) {
        kq_errf(err, errlen, "from %s is after to %s", day_from, day_to);
        return KQ_EINVAL;
    }
    const char *filter[K_COUNT] = {user && user[0] ? user : NULL, group && group[0] ? group : NULL,
                                   queue && queue[0] ? queue : NULL};
    bool any = filter[0] || filter[1] || filter[2];
    json_t *o = json_pack("{s:o,s:o}", "from", day_from && day_from[0] ? json_string(day_from) : json_null(), "to",
                          day_to && day_to[0] ? json_string(day_to) : json_null());
    if (o == NULL)
        return KQ_ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&m->mu);
    for (int k = 0; k < K_COUNT && rc == 0; k++) {
        json_t *arr = json_array();
        if (arr == NULL || json_object_set_new(o, kind_plural[k], arr) != 0) {
            rc = KQ_ENOMEM;
            break;
        }
        if (any) {
            if (filter[k] != NULL) {
                json_t *c = charge_json(m, k, filter[k], from, to);
                if (c == NULL || json_array_append_new(arr, c) != 0)
                    rc = KQ_ENOMEM;
            }
            continue;
        }
        /* Every owner charged or with a budget, sorted by name. */
        unsigned n = HASH_COUNT(m->owners[k]) + HASH_COUNT(m->budgets[k]), i = 0;
        const char **names = malloc((n ? n : 1) * sizeof(*names));
        if (names == NULL) {
            rc = KQ_ENOMEM;
            break;
        }
        const owner_t *w, *wt;
        HASH_ITER(hh, m->owners[k], w, wt) names[i++] = w->name;
        const budget_t *b, *bt;
        HASH_ITER(hh, m->budgets[k], b, bt)
        {
            if (owner_find(m->owners[k], b->name, strlen(b->name)) == NULL)
                names[i++] = b->name;
        }
        qsort(names, i, sizeof(*names), name_cmp);
        for (unsigned j = 0; j < i && rc == 0; j++) {
            json_t *c = charge_json(m, k, names[j], from, to);
            if (c == NULL || json_array_append_new(arr, c) != 0)
                rc = KQ_ENOMEM;
        }
        free(names);
    }
    pthread_mutex_unlock(&m->mu);
    if (rc != 0) {
        json_decref(o);
        kq_errf(err, errlen, "out of memory");
        return rc;
    }
    *out = o;
    return 0;
}

/* ---- Prometheus text ---- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
    bool oom;
} sbuf_t;

static void sb_printf(sbuf_t *b, const char *fmt, ...) KQ_PRINTF(2, 3);
static void sb_printf(sbuf_t *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0) {
            b->oom = true;
            return;
        }
        if (b->s != NULL && b->n + (size_t)w < b->cap) {
            b->n += (size_t)w;
            return;
        }
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + (size_t)w + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (s == NULL) {
            b->oom = true;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
}

/* A label value escaped as the exposition format requires (\\, \", \n). */
static void sb_label(sbuf_t *b, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\')
            sb_printf(b, "\\\\");
        else if (*p == '"')
            sb_printf(b, "\\\"");
        else if (*p == '\n')
            sb_printf(b, "\\n");
        else
            sb_printf(b, "%c", *p);
    }
}

static void sb_owners(sbuf_t *b, owner_t *tab, const char *family, const char *label, const char *help)
{
    sb_printf(b, "# HELP %s %s\n# TYPE %s counter\n", family, help, family);
    unsigned n = HASH_COUNT(tab), i = 0;
    owner_t **v = malloc((n ? n : 1) * sizeof(*v));
    if (v == NULL) {
        b->oom = true;
        return;
    }
    owner_t *w, *wt;
    HASH_ITER(hh, tab, w, wt) v[i++] = w;
    qsort(v, i, sizeof(*v), owner_cmp);
    for (unsigned j = 0; j < i; j++) {
        sb_printf(b, "%s{%s=\"", family, label);
        sb_label(b, v[j]->name);
        sb_printf(b, "\"} %.6f\n", (double)v[j]->total / MICRO);
    }
    free(v);
}

char *kq_metering_metrics(kq_metering_t *m, bool per_owner)
{
    sbuf_t b = {0};
    pthread_mutex_lock(&m->mu);
    sb_printf(&b, "# HELP kubequota_price_multiplier Current price multiplier.\n"
                  "# TYPE kubequota_price_multiplier gauge\n"
                  "kubequota_price_multiplier{type=\"general\"} %.9g\n"
                  "kubequota_price_multiplier{type=\"gpu\"} %.9g\n",
              m->mult_gen, m->mult_gpu);
    sb_printf(&b, "# HELP kubequota_cluster_utilisation_ratio Utilisation the multipliers were computed from (pending "
                  "counts as used for cpu and memory).\n"
                  "# TYPE kubequota_cluster_utilisation_ratio gauge\n"
                  "kubequota_cluster_utilisation_ratio{resource=\"cpu\"} %.9g\n"
                  "kubequota_cluster_utilisation_ratio{resource=\"memory\"} %.9g\n"
                  "kubequota_cluster_utilisation_ratio{resource=\"general\"} %.9g\n"
                  "kubequota_cluster_utilisation_ratio{resource=\"gpu\"} %.9g\n",
              m->util_cpu, m->util_mem, m->util_gen, m->util_gpu);
    sb_owners(&b, m->owners[K_QUEUE], "kubequota_queue_charged_credits_total", "queue",
              "Credits charged to a queue and its children.");
    if (per_owner) {
        sb_owners(&b, m->owners[K_USER], "kubequota_user_charged_credits_total", "user", "Credits charged to a user.");
        sb_owners(&b, m->owners[K_GROUP], "kubequota_user_group_charged_credits_total", "user_group",
                  "Credits charged to a user group (not a quota group).");
    }
    sb_printf(&b, "# HELP kubequota_metering_running_pods Pods being charged.\n"
                  "# TYPE kubequota_metering_running_pods gauge\n"
                  "kubequota_metering_running_pods %u\n"
                  "# HELP kubequota_metering_checkpoint_failures_total Checkpoint writes that failed.\n"
                  "# TYPE kubequota_metering_checkpoint_failures_total counter\n"
                  "kubequota_metering_checkpoint_failures_total %lu\n",
              HASH_COUNT(m->pods), m->ckpt_failures);
    pthread_mutex_unlock(&m->mu);
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}
