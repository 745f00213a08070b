/* Reclaim: evicts the pods of quota groups over their runtime (or a queue over its lowered
 * max) once their grace has passed, the smallest set that brings each back. Rules:
 * include/kubequota/control/reclaim.h.
 *
 * DESIGN
 * A pass (kq_reclaim_once) asks the quota tree which leaf groups are over, keeps those
 * whose source reclaims (asking the elastic module for the source of each), starts or
 * keeps each one's grace clock (over table), and for a group over for its whole grace
 * plans the evictions from the ledger's victims of that group (reclaim_group). Evictions
 * in flight (inflight table) count as done until the pod is gone, so a pod is never
 * evicted twice and a slow eviction does not make a second victim; a refused one is set
 * aside for EVICT_RETRY_MS. Threads: one caller thread (the elastic timer) owns the
 * tables, which have no lock; the counters are atomics. No lock is held across an eviction
 * or an Event (each is I/O).
 */
#include "kubequota/control/reclaim.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <uthash.h>

#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"
#include "kubequota/control/ledger.h"
#include "kubequota/kube/kube.h"

#define EVICT_RETRY_MS 60000

/* ================================================================== types ==== */

typedef struct overg { /* reclaim: since when a group is over */
    char *name;
    int64_t since_ms;
    UT_hash_handle hh;
} overg_t;

typedef struct quietg { /* reclaim: a group over but not reclaimed, and what was logged */
    char *name;
    char *line;
    uint64_t gen;
    UT_hash_handle hh;
} quietg_t;

typedef struct inflight { /* an eviction done (until the pod is gone) or refused (until until_ms) */
    char *uid;
    bool evicted;
    int64_t until_ms;
    kq_resource_t req;
    char *group;
    UT_hash_handle hh;
} inflight_t;

struct kq_reclaim {
    kq_app_t *app;
    kq_qtree_t *qt;
    kq_reclaim_opts_t o;
    kq_reclaim_source_fn source;
    void *source_ud;
    const kq_config_t *cfg; /* the config of the pass under way (borrowed for it) */

    /* the caller's thread only */
    overg_t *over;
    quietg_t *quiet;
    uint64_t quiet_gen;
    inflight_t *inflight;

    atomic_ulong evicted, evict_failed;
};

/* ================================================================== reclaim ==== */

static int default_evict(void *ud, const char *ns, const char *name, const char *uid, char *err, size_t len)
{
    kq_reclaim_t *e = ud;
    if (e->app == NULL || e->app->kube == NULL) {
        kq_errf(err, len, "no API server client");
        return KQ_ESTATE;
    }
    return kq_kube_evict(e->app->kube, ns, name, err, len);
}

static int victim_cmp(const void *a, const void *b)
{
    const kq_ledger_victim_t *x = a, *y = b;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    if (x->created != y->created)
        return x->created > y->created ? -1 : 1; /* youngest first */
    return strcmp(x->uid, y->uid);
}

static void inflight_drop(kq_reclaim_t *e, inflight_t *f)
{
    HASH_DEL(e->inflight, f);
    free(f->uid);
    free(f->group);
    kq_resource_free(&f->req);
    free(f);
}

/* Per resource of ov->over: what the planned evictions remove minus the excess (>= 0 for
 * every resource: the group is back within its runtime). */
typedef struct slack {
    uint32_t n;
    const char **name; /* ov->over's names (n of them) */
    int64_t *v;
} slack_t;

static bool slack_ok(const slack_t *sl)
{
    for (uint32_t k = 0; k < sl->n; k++)
        if (sl->v[k] < 0)
            return false;
    return true;
}

static void slack_add(slack_t *sl, const kq_resource_t *req, int sign)
{
    for (uint32_t k = 0; k < sl->n; k++) {
        int64_t r = kq_resource_get(req, sl->name[k], NULL);
        sl->v[k] = sign > 0 ? (sl->v[k] > INT64_MAX - r ? INT64_MAX : sl->v[k] + r) : sl->v[k] - r;
    }
}

static bool slack_fits_back(const slack_t *sl, const kq_resource_t *req)
{
    for (uint32_t k = 0; k < sl->n; k++)
        if (sl->v[k] - kq_resource_get(req, sl->name[k], NULL) < 0)
            return false;
    return true;
}

/* May reclaim evict this pod now? (timer thread) */
static bool evictable(kq_reclaim_t *e, const kq_ledger_victim_t *v, int64_t now, int64_t wall_s)
{
    if (!v->preemptible)
        return false;
    inflight_t *f;
    HASH_FIND_STR(e->inflight, v->uid, f);
    if (f != NULL)
        return false; /* evicted already (never twice), or refused a moment ago */
    if (e->o.reclaim_min_runtime_ms > 0 && v->created > 0 && wall_s - v->created < e->o.reclaim_min_runtime_ms / 1000)
        return false; /* too young */
    (void)now;
    return true;
}

/* Evicts the smallest set of pods of one over group that brings its used back within its
 * runtime, as Koordinator's over-use revoke does (koordinator-sh/koordinator
 * pkg/scheduler/plugins/elasticquota/quota_overuse_revoke.go): take pods lowest priority
 * first (then youngest) until the excess is covered, then give back, highest priority
 * first, every taken pod the group can keep without going over again. A refused eviction
 * (a PodDisruptionBudget's 429) sets that pod aside for EVICT_RETRY_MS and the plan is made
 * again without it. Returns evictions done. */
static size_t reclaim_group(kq_reclaim_t *e, const kq_qgroup_over_t *ov, int64_t now)
{
    if (e->app == NULL || e->app->ledger == NULL)
        return 0;
    uint32_t nr = ov->over.n;
    const char **names = malloc((nr ? nr : 1) * sizeof(*names));
    int64_t *bv = malloc((nr ? nr : 1) * sizeof(*bv)), *pv = malloc((nr ? nr : 1) * sizeof(*pv));
    if (names == NULL || bv == NULL || pv == NULL) {
        free(names);
        free(bv);
        free(pv);
        kq_error("event=reclaim_failed group=%s error=\"out of memory\"", ov->name);
        return 0;
    }
    slack_t base = {.n = nr, .name = names, .v = bv};
    for (uint32_t k = 0; k < nr; k++) {
        names[k] = KQ_RES_E(&ov->over)[k].name;
        bv[k] = -KQ_RES_E(&ov->over)[k].value;
    }
    size_t done = 0;
    kq_ledger_victim_t *v = NULL;
    size_t n = 0;
    size_t *pick = NULL;
    /* evictions still in flight for this group already cover part of it */
    inflight_t *f, *ftmp;
    HASH_ITER(hh, e->inflight, f, ftmp) {
        if (f->evicted && strcmp(f->group, ov->name) == 0)
            slack_add(&base, &f->req, +1);
    }
    if (slack_ok(&base))
        goto out;
    if (kq_ledger_group_pods(e->app->ledger, ov->name, &v, &n) != 0) {
        kq_error("event=reclaim_failed group=%s error=\"out of memory\"", ov->name);
        goto out;
    }
    qsort(v, n, sizeof(*v), victim_cmp);
    pick = n ? malloc(n * sizeof(*pick)) : NULL;
    if (n > 0 && pick == NULL)
        goto out;
    int64_t wall_s = (int64_t)time(NULL);
    char over_s[256];
    kq_resource_format(&ov->over, over_s, sizeof(over_s));
    for (int round = 0; round < 8; round++) {
        /* plan: take until covered, then give back from the highest priority */
        slack_t sl = {.n = nr, .name = names, .v = pv};
        memcpy(pv, bv, nr * sizeof(*pv));
        size_t np = 0;
        for (size_t i = 0; i < n && !slack_ok(&sl); i++) {
            if (!evictable(e, &v[i], now, wall_s))
                continue;
            bool helps = false; /* only pods that hold some of what is over */
            for (uint32_t k = 0; k < sl.n && !helps; k++)
                helps = sl.v[k] < 0 && kq_resource_get(&v[i].req, sl.name[k], NULL) > 0;
            if (!helps)
                continue;
            slack_add(&sl, &v[i].req, +1);
            pick[np++] = i;
        }
        if (np == 0 && round == 0)
            kq_debug("event=reclaim_no_victim group=%s over=\"%s\" msg=\"no pod may be evicted now: "
                     "non-preemptible, younger than --reclaim-min-runtime, evicted already or refused\"",
                     ov->name, over_s);
        if (slack_ok(&sl)) {
            size_t kept = 0;
            for (size_t j = np; j-- > 0;) {
                if (slack_fits_back(&sl, &v[pick[j]].req)) {
                    slack_add(&sl, &v[pick[j]].req, -1);
                    pick[j] = SIZE_MAX; /* given back */
                } else {
                    kept++;
                }
            }
            (void)kept;
        }
        bool refused = false;
        for (size_t j = 0; j < np; j++) {
            if (pick[j] == SIZE_MAX)
                continue;
            kq_ledger_victim_t *x = &v[pick[j]];
            char err[512] = "";
            int rc = e->o.evict(e->o.evict_ud, x->ns, x->name, x->uid, err, sizeof(err));
            inflight_t *nf = calloc(1, sizeof(*nf));
            if (nf != NULL && (nf->uid = strdup(x->uid)) != NULL && (nf->group = strdup(ov->name)) != NULL &&
                kq_resource_copy(&nf->req, &x->req) == 0) {
                nf->evicted = rc == 0 || rc == KQ_ENOENT;
                nf->until_ms = nf->evicted ? INT64_MAX : now + EVICT_RETRY_MS;
                HASH_ADD_KEYPTR(hh, e->inflight, nf->uid, strlen(nf->uid), nf);
            } else if (nf != NULL) {
                free(nf->uid);
                free(nf->group);
                free(nf);
            }
            if (rc != 0 && rc != KQ_ENOENT) {
                atomic_fetch_add(&e->evict_failed, 1);
                kq_warn("event=reclaim_evict_failed pod=%s/%s uid=%s group=%s error=\"%s\" detail=\"%s\" "
                        "msg=\"set aside; another pod is chosen\"", x->ns, x->name, x->uid, ov->name,
                        kq_strerror(rc), err);
                refused = true;
                break; /* plan again without it */
            }
            slack_add(&base, &x->req, +1);
            if (rc == KQ_ENOENT)
                continue; /* already gone: the watch will release it */
            atomic_fetch_add(&e->evicted, 1);
            done++;
            char req_s[256], msg[1024];
            kq_resource_format(&x->req, req_s, sizeof(req_s));
            kq_info("event=reclaimed pod=%s/%s uid=%s group=%s priority=%d request=\"%s\" over=\"%s\" "
                    "msg=\"evicted: the group uses more than its runtime after the grace period\"", x->ns, x->name,
                    x->uid, ov->name, x->priority, req_s, over_s);
            snprintf(msg, sizeof(msg),
                     "evicted by kubequota: quota group %s uses more than its runtime (over by %s) and lent "
                     "resources are wanted back", ov->name, over_s);
            if (e->app->kube != NULL)
                kq_kube_event(e->app->kube, x->ns, x->name, x->uid, "Warning", "Reclaimed", msg);
        }
        if (!refused)
            break;
    }
out:
    free(pick);
    kq_ledger_victims_free(v, n);
    free(names);
    free(bv);
    free(pv);
    return done;
}

/* YuniKorn's quota preemption (apache/yunikorn-core pkg/scheduler/objects/queue.go
 * setPreemptionTime; configs: partition preemption.quotapreemptionenabled, queue property
 * quota.preemption.delay, default 0 = never): a queue using more than its resources.max
 * (a lowered max) loses pods only when the partition enables quota preemption and the
 * queue has a delay, once it has been over for that delay. Returns the delay in ms for
 * queue group `name` (0: no quota preemption for it). */
static long quota_preemption_delay(const kq_reclaim_t *e, const char *name)
{
    const kq_partition_conf_t *part =
        e->cfg != NULL && e->app != NULL ? kq_config_partition(e->cfg, e->app->partition) : NULL;
    if (part == NULL || !part->quota_preemption_enabled)
        return 0;
    for (const kq_queue_conf_t *q = kq_config_queue(part, name); q != NULL; q = NULL) {
        for (size_t i = 0; i < q->n_properties; i++) {
            if (strcmp(q->properties[i].key, "quota.preemption.delay") != 0)
                continue;
            long ms = 0;
            char err[128];
            if (kq_duration_parse(q->properties[i].value, 0, &ms, err, sizeof(err)) != 0) {
                kq_warn("event=quota_preemption_delay_invalid queue=%s value=\"%s\" error=\"%s\"", name,
                        q->properties[i].value, err);
                return 0;
            }
            return ms;
        }
    }
    return 0;
}

static const char *source_name(unsigned src)
{
    return src == KQ_RECLAIM_QUEUES ? "queues" : src == KQ_RECLAIM_UPSTREAM ? "scheduler-plugins"
                                   : src == KQ_RECLAIM_KOORD ? "koordinator" : "none";
}

/* Splits a queue group's over into the part above its resources.max (where the max, not
 * the runtime, is what binds) and the rest (lent resources wanted back). The part above max
 * is dropped unless quota preemption applies (*delay_ms > 0), the rest unless reclaim of
 * queues is on (rest_on). True when something is left; else why (a log line's text, "" when
 * nothing was dropped) says why nothing is reclaimed. */
static bool queue_over_filter(kq_reclaim_t *e, kq_qgroup_over_t *ov, bool rest_on, long *delay_ms, bool *max_only,
                              char *why, size_t whylen)
{
    *delay_ms = 0;
    *max_only = false;
    why[0] = '\0';
    kq_qgroup_info_t info;
    if (kq_qtree_info(e->qt, ov->name, &info) != 0)
        return rest_on;
    long delay = quota_preemption_delay(e, ov->name);
    uint32_t j = 0;
    bool any_max = false, any_rest = false, dropped_max = false;
    char over_s[256];
    kq_resource_format(&ov->over, over_s, sizeof(over_s));
    for (uint32_t k = 0; k < ov->over.n; k++) {
        bool has_max = false;
        int64_t mx = kq_resource_get(&info.max, KQ_RES_E(&ov->over)[k].name, &has_max);
        int64_t rt = kq_resource_get(&info.runtime, KQ_RES_E(&ov->over)[k].name, NULL);
        bool by_max = has_max && mx <= rt;
        if (by_max ? delay <= 0 : !rest_on) {
            dropped_max |= by_max;
            continue;
        }
        any_max |= by_max;
        any_rest |= !by_max;
        KQ_RES_E(&ov->over)[j++] = KQ_RES_E(&ov->over)[k];
    }
    kq_qtree_info_free(&info);
    if (j == 0 && dropped_max)
        snprintf(why, whylen, "event=quota_group_over_max group=%s over=\"%s\" msg=\"over its resources.max: no "
                 "eviction without preemption.quotapreemptionenabled and quota.preemption.delay\"", ov->name, over_s);
    else if (j == 0)
        snprintf(why, whylen, "event=quota_group_over_not_reclaimed group=%s source=queues msg=\"over its runtime; "
                 "reclaim of queues is off (--reclaim-sources)\"", ov->name);
    ov->over.n = j;
    *delay_ms = delay;
    *max_only = any_max && !any_rest;
    return j > 0;
}

/* A group over but not reclaimed is logged once per distinct line (line: the log text, NULL
 * when it is reclaimed or no longer over; the table forgets it then). Timer thread. */
static void note_quiet(kq_reclaim_t *e, const char *name, const char *line, uint64_t gen)
{
    quietg_t *q;
    HASH_FIND_STR(e->quiet, name, q);
    if (line == NULL || *line == '\0') {
        if (q != NULL) {
            HASH_DEL(e->quiet, q);
            free(q->name);
            free(q->line);
            free(q);
        }
        return;
    }
    if (q == NULL) {
        if ((q = calloc(1, sizeof(*q))) == NULL || (q->name = strdup(name)) == NULL) {
            free(q);
            return;
        }
        HASH_ADD_KEYPTR(hh, e->quiet, q->name, strlen(q->name), q);
    }
    q->gen = gen;
    if (q->line != NULL && strcmp(q->line, line) == 0)
        return;
    kq_info("%s", line);
    free(q->line);
    q->line = strdup(line);
}

size_t kq_reclaim_once(kq_reclaim_t *e, int64_t now, const kq_config_t *cfg)
{
    e->cfg = cfg; /* for this pass (quota_preemption_delay) */
    /* forget evictions that finished (pod released) or timed out */
    inflight_t *f, *ftmp;
    HASH_ITER(hh, e->inflight, f, ftmp) {
        if ((!f->evicted && now >= f->until_ms) ||
            (e->app && e->app->ledger && !kq_ledger_is_counted(e->app->ledger, f->uid)))
            inflight_drop(e, f);
    }
    kq_qgroup_over_t *ov = NULL;
    size_t n = 0;
    if (kq_qtree_over_runtime(e->qt, &ov, &n) != 0) {
        kq_error("event=reclaim_failed error=\"out of memory\"");
        return 0;
    }
    long *grace = n > 0 ? malloc(n * sizeof(*grace)) : NULL;
    bool *restart = n > 0 ? malloc(n * sizeof(*restart)) : NULL;
    if (n > 0 && (grace == NULL || restart == NULL)) {
        free(grace);
        free(restart);
        kq_qtree_over_free(ov, n);
        return 0;
    }
    uint64_t gen = ++e->quiet_gen;
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned src = e->source(e->source_ud, ov[i].name);
        bool on = (e->o.reclaim_sources & src) != 0;
        char why[768] = "";
        long delay = 0;
        bool max_only = false, keep;
        if (src == KQ_RECLAIM_QUEUES) {
            keep = queue_over_filter(e, &ov[i], on, &delay, &max_only, why, sizeof(why));
        } else {
            keep = on;
            if (!on) {
                snprintf(why, sizeof(why), "event=quota_group_over_not_reclaimed group=%s source=%s msg=\"over its "
                         "runtime; reclaim of %s quotas is off (--reclaim-sources%s)\"", ov[i].name,
                         source_name(src), source_name(src),
                         src == KQ_RECLAIM_KOORD ? ", as Koordinator's monitorAllQuotas defaults to false" : "");
            }
        }
        note_quiet(e, ov[i].name, keep ? NULL : why, gen);
        if (!keep) {
            kq_resource_free(&ov[i].over);
            continue;
        }
        grace[kept] = max_only ? delay : src == KQ_RECLAIM_KOORD ? e->o.koord_delay_ms : e->o.reclaim_grace_ms;
        restart[kept] = src == KQ_RECLAIM_KOORD && !max_only;
        if (kept != i)
            memcpy(&ov[kept], &ov[i], sizeof(ov[i])); /* a move: ov[i] is not used again */
        kept++;
    }
    n = kept;
    /* groups no longer over (or reclaimed) are forgotten by the quiet log */
    quietg_t *q, *qtmp;
    HASH_ITER(hh, e->quiet, q, qtmp) {
        if (q->gen != gen)
            note_quiet(e, q->name, NULL, gen);
    }
    /* groups no longer over start their grace period again */
    overg_t *g, *gtmp;
    HASH_ITER(hh, e->over, g, gtmp) {
        bool still = false;
        for (size_t i = 0; i < n && !still; i++)
            still = strcmp(ov[i].name, g->name) == 0;
        if (!still) {
            HASH_DEL(e->over, g);
            free(g->name);
            free(g);
        }
    }
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        HASH_FIND_STR(e->over, ov[i].name, g);
        if (g == NULL) {
            if ((g = calloc(1, sizeof(*g))) == NULL || (g->name = strdup(ov[i].name)) == NULL) {
                free(g);
                continue;
            }
            g->since_ms = now;
            HASH_ADD_KEYPTR(hh, e->over, g->name, strlen(g->name), g);
            char buf[256];
            kq_resource_format(&ov[i].over, buf, sizeof(buf));
            kq_info("event=quota_group_over group=%s over=\"%s\" grace_ms=%ld", ov[i].name, buf, grace[i]);
        }
        if (now - g->since_ms < grace[i])
            continue;
        done += reclaim_group(e, &ov[i], now);
        /* Koordinator's monitor: after a revoke it waits a whole delay again before the next */
        if (restart[i])
            g->since_ms = now;
    }
    free(grace);
    free(restart);
    kq_qtree_over_free(ov, n);
    return done;
}

/* ================================================================== lifecycle ==== */

int kq_reclaim_parse_sources(const char *s, unsigned *out, char *err, size_t errlen)
{
    unsigned v = 0;
    const char *p = s != NULL ? s : "";
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        static const struct {
            const char *name;
            unsigned bit;
        } words[] = {{"queues", KQ_RECLAIM_QUEUES},
                     {"scheduler-plugins", KQ_RECLAIM_UPSTREAM},
                     {"koordinator", KQ_RECLAIM_KOORD},
                     {"none", 0}};
        size_t w = 0;
        while (w < sizeof(words) / sizeof(words[0]) && (strlen(words[w].name) != n || strncmp(p, words[w].name, n) != 0))
            w++;
        if (n > 0 && w == sizeof(words) / sizeof(words[0])) {
            kq_errf(err, errlen, "unknown source \"%.*s\" (queues, scheduler-plugins, koordinator or none)", (int)(n > 64 ? 64 : n), p);
            return KQ_EINVAL;
        }
        if (n > 0)
            v |= words[w].bit;
        p += n;
        if (*p == ',')
            p++;
    }
    *out = v;
    return 0;
}

kq_reclaim_t *kq_reclaim_new(kq_app_t *app, kq_qtree_t *qt, const kq_reclaim_opts_t *opts, kq_reclaim_source_fn source,
                             void *source_ud)
{
    kq_reclaim_t *e = calloc(1, sizeof(*e));
    if (e == NULL)
        return NULL;
    e->app = app;
    e->qt = qt;
    e->o = *opts;
    e->source = source;
    e->source_ud = source_ud;
    if (e->o.evict == NULL) {
        e->o.evict = default_evict;
        e->o.evict_ud = e;
    }
    return e;
}

void kq_reclaim_free(kq_reclaim_t *e)
{
    if (e == NULL)
        return;
    overg_t *g, *gtmp;
    HASH_ITER(hh, e->over, g, gtmp) {
        HASH_DEL(e->over, g);
        free(g->name);
        free(g);
    }
    quietg_t *q, *qtmp;
    HASH_ITER(hh, e->quiet, q, qtmp) note_quiet(e, q->name, NULL, 0);
    inflight_t *x, *xtmp;
    HASH_ITER(hh, e->inflight, x, xtmp) inflight_drop(e, x);
    free(e);
}

void kq_reclaim_log_config(const kq_reclaim_t *e)
{
    char srcs[64] = "";
    for (unsigned b = KQ_RECLAIM_QUEUES; b <= KQ_RECLAIM_KOORD; b <<= 1)
        if (e->o.reclaim_sources & b)
            snprintf(srcs + strlen(srcs), sizeof(srcs) - strlen(srcs), "%s%s", srcs[0] ? "," : "", source_name(b));
    kq_info("event=reclaim_config sources=%s grace_ms=%ld koordinator_delay_ms=%ld msg=\"groups of these sources "
            "lose pods when they use more than their runtime (--reclaim-sources)%s\"", srcs[0] ? srcs : "none",
            e->o.reclaim_grace_ms, e->o.koord_delay_ms,
            (e->o.reclaim_sources & KQ_RECLAIM_KOORD) ? "" : "; Koordinator quotas are not reclaimed, as in "
            "Koordinator without monitorAllQuotas");
}

unsigned long kq_reclaim_evictions(kq_reclaim_t *e, unsigned long *failed)
{
    if (failed != NULL)
        *failed = e ? atomic_load(&e->evict_failed) : 0;
    return e ? atomic_load(&e->evicted) : 0;
}

