/* Quota tree: hierarchical elastic quota groups and their runtime (what each group may use
 * now), with the admission checks filter and bind need. The rules are in quota_tree.h.
 *
 * DESIGN
 * Data. Every group (the hidden root, the system group, the default group and the
 * configured ones) is a struct group in one uthash table keyed by name. A parent's
 * children are an array kept sorted by name (binary search to insert or remove), so
 * every computation visits them in one deterministic order and an index orders them by
 * name. Per group we keep the spec (min, max, weight, allow-lent, is-parent) and the
 * derived values:
 *   smin     scaled min (== min unless the parent's runtime is smaller than the sum of
 *            its children's mins; set when the parent is redistributed);
 *   request  leaf: exact sum of pod requests; parent: saturating sum of the children's ask;
 *   ask      what the group asks of its parent: min(request (or max(request, min) when it
 *            does not lend), max);
 *   used, used_np   exact sums over the subtree (a leaf's pods; parents add children);
 *   runtime  computed at the parent, per resource the cluster total names.
 * The root's runtime and scaled min are the cluster total (allocatable minus the system
 * group's used).
 *
 * Invariants between public calls outside a batch: request/ask/smin/runtime of every
 * group are exactly what a full top-down recomputation would give; the dirty heap is
 * empty and nothing is pending. Always: used and used_np of a parent equal the sums of
 * its children's. Requests of parents saturate at INT64_MAX (a request that large only
 * means "hungry"); used never saturates: an add that would overflow fails and changes
 * nothing (two phases: compute every level, then commit).
 *
 * Incremental recomputation. A change marks the parents whose distribution inputs
 * changed (children's ask, min, weight, or their own runtime) "dirty" in a min-heap
 * keyed by depth. run_dirty() pops the shallowest parent, redistributes its runtime among
 * its children, and pushes only children that are parents and whose runtime changed, so a
 * parent is always redistributed after its ancestors and untouched subtrees are never
 * visited. The heap and the per-distribution scratch arrays are sized when groups are
 * added, so recomputation never allocates and never fails.
 *
 * Scaled mins are part of a distribution (Koordinator's GroupQuotaManager.refreshRuntime
 * scales a quota's children against the quota's runtime before sharing it): redistribute()
 * first sets its children's scaled mins from the parent's runtime and the sum of their
 * mins (kidmin, kept per parent by asks_refresh), so nothing else depends on them and asks
 * never do (a group that does not lend asks for its min, not its scaled min, as in
 * Koordinator). A parent remembers whether it scaled (kscaled), so that children get their
 * plain mins back when the total returns.
 *
 * Full recomputation. A change of the cluster total redistributes every parent in one
 * pre-order pass (redistribute_all: scaled mins follow the runtimes, and every unlimited
 * group's default weight follows the total), not through the heap. Batches
 * (kq_qtree_batch_begin/end) record "pending" instead of recomputing: settle() then
 * rebuilds every ask and request from the root and redistributes every parent once, so N
 * changes cost one O(groups) pass. Readers call
 * settle() first, so a read inside a batch is exact too (and outside one it is a no-op).
 * These passes are bound by memory latency (a group is about 3 KB, 10,000 groups exceed
 * the caches): the first loop over a parent's children prefetches the lines the next
 * loops read, the fields every pass reads first share one cache line, and a child's
 * runtime is rewritten in place.
 *
 * Sharing (apportion), Koordinator's iterationForRedistribution with its largest-remainder
 * deltas (koordinator-sh/koordinator pkg/scheduler/plugins/elasticquota/core/
 * runtime_quota_calculator.go, computeHamiltonDeltas): each round, floor(units * w_i / W)
 * each (128-bit products, 64-bit when they fit) and the leftover units one each by largest
 * remainder then name; then every child above its cap gives the excess back and drops
 * out, and what was given back is shared again among the rest. Every round either hands
 * out all units or caps someone, so it ends after at most n+1 rounds. The leftover units
 * go to the first `left` candidates in (remainder, name) order, found by quickselect
 * (O(n)), not a sort; with equal weights all remainders are equal and they go to the first
 * ones by name without any product.
 *
 * Lock: t->lock guards everything. It is the last lock in the order ledger -> user ->
 * group -> quota tree; nothing is logged, written or called back while it is held (log
 * lines are formatted into locals and written after unlock).
 */
#include "kubequota/engine/quota_tree.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubequota/base/log.h"

static _Thread_local bool hash_oom;
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (hash_oom = true)
#include <uthash.h>

typedef unsigned __int128 u128;

struct group {
    /* what recomputation reads of every child first, in one cache line */
    struct group **kid; /* children sorted by name */
    size_t nkids;
    struct group *parent;
    char *name;
    int depth;
    bool is_parent, allow_lent, system, deflt, dirty, flag;
    bool summin;              /* scheduler-plugins' rule (kq_qgroup_spec_t.sum_of_mins) */
    bool has_max, has_weight; /* max.n > 0, weight.n > 0 */
    size_t kidcap;
    int64_t pods, pods_used;
    UT_hash_handle hh;
    kq_resource_t min, smin, max, weight;
    kq_resource_t request, ask, used, used_np, runtime;
    kq_resource_t kidmin; /* sum of the children's min (the default group's left out) */
    bool kscaled;         /* some child's smin differs from its min */
};

struct cand {
    u128 rem;
    int64_t share;
    size_t i; /* index in the parent's kid[]: children are in name order */
};

enum { PEND_TOTAL = 1, PEND_ALL = 2 };

struct kq_qtree {
    pthread_mutex_t lock;
    struct group *by_name;
    struct group *root, *sys, *def;
    size_t ngroups;
    kq_resource_t alloc;
    bool have_total;
    kq_resource_t sp_min, sp_used; /* sums over the groups with summin */
    const char *spf[4];            /* interned sp_fields (NULL: not internable) */
    int pending;       /* for settle(): PEND_TOTAL or PEND_ALL, else the dirty heap */
    unsigned batch;    /* kq_qtree_batch_begin nesting: recomputation waits for the end */
    struct group **heap;
    size_t heap_n, heap_cap;
    size_t scr_cap;
    int64_t *sw, *scap, *sadd, *sbase;
    int64_t *sval;     /* scale_kids: what the parent shares of each resource scaled */
    const char **scd;  /* the resources scaled */
    size_t sval_cap, scd_cap;
    struct cand *cand, *sel;
};

/* ================================================================== helpers ==== */

/* scheduler-plugins' resource kinds, as its ElasticQuotaInfo compares them
 * (kubernetes-sigs/scheduler-plugins pkg/capacityscheduling/elasticquota.go cmp2, on
 * k8s.io/kubernetes pkg/scheduler/framework Resource): cpu, memory, ephemeral-storage and
 * pods are fields, compared even where a list does not name them (then 0); the "scalar"
 * names (extended resources with a domain, kubernetes.io/-prefixed, hugepages-,
 * attachable-volumes-; schedutil.IsScalarResourceName) are compared where the left side
 * names them; any other name is not a scheduler resource and is not compared. */
enum { SP_NONE, SP_FIELD, SP_SCALAR };

static int sp_kind(const char *d)
{
    if (strcmp(d, "cpu") == 0 || strcmp(d, "memory") == 0 || strcmp(d, "ephemeral-storage") == 0 ||
        strcmp(d, "pods") == 0)
        return SP_FIELD;
    if ((strchr(d, '/') != NULL && strncmp(d, "requests.", 9) != 0) || strncmp(d, "hugepages-", 10) == 0 ||
        strncmp(d, "attachable-volumes-", 19) == 0)
        return SP_SCALAR;
    return SP_NONE;
}

static const char *const sp_fields[] = {"cpu", "memory", "ephemeral-storage", "pods"};


static int64_t rget(const kq_resource_t *r, const char *iname, bool *present)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (KQ_RES_E(r)[i].name == iname) {
            if (present)
                *present = true;
            return KQ_RES_E(r)[i].value;
        }
    if (present)
        *present = false;
    return 0;
}

/* rget when the name is probably at index j (sets listing the same names in the same
 * sorted order, e.g. every runtime and the cluster total). */
static inline int64_t rget_at(const kq_resource_t *r, uint32_t j, const char *iname, bool *present)
{
    if (j < r->n && KQ_RES_E(r)[j].name == iname) {
        if (present)
            *present = true;
        return KQ_RES_E(r)[j].value;
    }
    return rget(r, iname, present);
}

/* *dst = *src. Sets of up to KQ_RES_INLINE names never allocate; a larger one reuses
 * dst's heap array once it has grown, so only the first copy at a new size can fail (out
 * of memory: dst keeps its old value until the next recomputation). */
static inline int rcopy(kq_resource_t *dst, const kq_resource_t *src)
{
    return kq_resource_copy(dst, src);
}

/* Sets an interned name. False when the set cannot grow (out of memory: dropped). */
static bool put(kq_resource_t *r, const char *iname, int64_t v)
{
    return kq_resource_put(r, iname, v) == 0;
}

/* Exactly the same entries (a present 0 differs from absent: absent runtime = unlimited). */
static bool same(const kq_resource_t *a, const kq_resource_t *b)
{
    if (a->n != b->n)
        return false;
    const kq_res_entry_t *ae = KQ_RES_E(a), *be = KQ_RES_E(b);
    for (uint32_t i = 0; i < a->n; i++)
        if (ae[i].name != be[i].name || ae[i].value != be[i].value)
            return false;
    return true;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_add_overflow(a, b, &r) ? INT64_MAX : r;
}

static bool name_ok(const char *s)
{
    if (s == NULL)
        return false;
    size_t n = strlen(s);
    if (n == 0 || n > KQ_QTREE_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == ':' || c == '/' || c == '-' || c == '#' || c == '@'))
            return false;
    }
    return true;
}

static bool is_root_name(const char *p) { return p == NULL || *p == '\0' || strcmp(p, KQ_QTREE_ROOT) == 0; }

static struct group *find(const kq_qtree_t *t, const char *name)
{
    if (name == NULL)
        return NULL;
    struct group *g = NULL;
    HASH_FIND_STR(t->by_name, name, g);
    return g;
}

static const char *fmtq(const char *name, int64_t v, char *buf, size_t len)
{
    kq_quantity_format(name, v, buf, len);
    return buf;
}

/* ============================================================ apportioning ==== */

/* x goes before y for a leftover unit: larger remainder first, then name (children are
 * collected in name order, so the index orders them by name). */
static inline bool cand_before(const struct cand *x, const struct cand *y)
{
    return x->rem != y->rem ? x->rem > y->rem : x->i < y->i;
}

static int cand_cmp(const void *a, const void *b)
{
    const struct cand *x = a, *y = b;
    return cand_before(x, y) ? -1 : cand_before(y, x) ? 1 : 0;
}

static inline void cand_swap(struct cand *a, struct cand *b)
{
    struct cand x = *a;
    *a = *b;
    *b = x;
}

/* Reorders c[0..n) so that c[0..k) are the k first in cand_before order (in no particular
 * order among themselves): quickselect, median-of-three pivot, a sort if it degenerates.
 * Keys are unique (indexes are), so the chosen set does not depend on the method. */
static void select_first(struct cand *c, size_t n, size_t k)
{
    size_t lo = 0, hi = n;
    int budget = 64;
    while (lo < k && k < hi) {
        if (budget-- == 0) {
            qsort(c + lo, hi - lo, sizeof *c, cand_cmp);
            return;
        }
        size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (cand_before(&c[mid], &c[lo]))
            cand_swap(&c[mid], &c[lo]);
        if (cand_before(&c[last], &c[lo]))
            cand_swap(&c[last], &c[lo]);
        if (cand_before(&c[mid], &c[last]))
            cand_swap(&c[mid], &c[last]); /* the median of the three is the pivot, at last */
        size_t st = lo;
        for (size_t j = lo; j < last; j++)
            if (cand_before(&c[j], &c[last]))
                cand_swap(&c[j], &c[st++]);
        cand_swap(&c[st], &c[last]);
        if (st < k)
            lo = st + 1;
        else
            hi = st;
    }
}

/* Hands out up to `units` among n items, item i taking at most cap[i], in proportion to
 * w[i] (w[i] == 0 takes nothing). add[i] receives each one's amount. Returns the total,
 * which is min(units, sum of caps of items with w > 0).
 * Each round (Koordinator's): floor shares, then the leftover units one each by largest
 * remainder then name, whether or not the candidate has room for them; then shares are cut
 * to the room left and what was cut is shared again in the next round. The candidates of
 * a round are those of the previous one that still have room (add only grows), kept in
 * index (= name) order. When all their weights are equal every share is units / m and
 * every remainder the same, so the leftover units go to the first ones in name order: no
 * products, one division. */
static int64_t apportion(kq_qtree_t *t, size_t n, int64_t units, const int64_t *w, const int64_t *cap,
                         int64_t *add)
{
    struct cand *c = t->cand, *sel = t->sel;
    int64_t given = 0;
    size_t m = 0;
    memset(add, 0, n * sizeof *add);
    for (size_t i = 0; i < n; i++)
        if (w[i] > 0 && cap[i] > 0)
            c[m++].i = i;
    while (units > 0 && m > 0) {
        u128 W = 0;
        int64_t wmax = 0, wmin = INT64_MAX;
        for (size_t k = 0; k < m; k++) {
            int64_t wi = w[c[k].i];
            W += (u128)wi;
            wmax = wi > wmax ? wi : wmax;
            wmin = wi < wmin ? wi : wmin;
        }
        int64_t left;
        if (wmin == wmax) {
            int64_t share = units / (int64_t)m;
            left = units % (int64_t)m;
            for (size_t k = 0; k < m; k++)
                c[k].share = share + ((int64_t)k < left);
        } else {
            int64_t floors = 0;
            if (W <= UINT64_MAX && (uint64_t)units <= UINT64_MAX / (uint64_t)wmax) {
                uint64_t W64 = (uint64_t)W; /* products fit in 64 bits: no 128-bit division */
                for (size_t k = 0; k < m; k++) {
                    uint64_t prod = (uint64_t)units * (uint64_t)w[c[k].i];
                    c[k].share = (int64_t)(prod / W64);
                    c[k].rem = prod % W64;
                    floors += c[k].share;
                }
            } else {
                for (size_t k = 0; k < m; k++) {
                    u128 prod = (u128)units * (u128)w[c[k].i];
                    c[k].share = (int64_t)(prod / W);
                    c[k].rem = prod % W;
                    floors += c[k].share;
                }
            }
            left = units - floors; /* < m */
            if (left > 0) {
                for (size_t k = 0; k < m; k++) /* share = position */
                    sel[k] = (struct cand){.rem = c[k].rem, .share = (int64_t)k, .i = c[k].i};
                select_first(sel, m, (size_t)left);
                for (size_t k = 0; k < (size_t)left; k++)
                    c[sel[k].share].share++;
            }
        }
        int64_t round = 0;
        size_t still = 0;
        for (size_t k = 0; k < m; k++) {
            size_t i = c[k].i;
            int64_t room = cap[i] - add[i];
            int64_t g = c[k].share < room ? c[k].share : room;
            add[i] += g;
            round += g;
            if (g < room)
                c[still++].i = i;
        }
        m = still;
        units -= round;
        given += round;
        if (round == 0)
            break;
    }
    return given;
}

/* ============================================================ recomputation ==== */

static void scratch_free(kq_qtree_t *t)
{
    free(t->sw), free(t->scap), free(t->sadd), free(t->sbase), free(t->sval), free(t->cand), free(t->sel);
    free(t->scd);
}

/* Room for m scaled resources (scale_kids). Grows only when the cluster total names more
 * resources than KQ_RES_INLINE and than ever before. */
static int ensure_sval(kq_qtree_t *t, size_t m)
{
    if (m > t->scd_cap) {
        const char **v = realloc(t->scd, m * sizeof *v);
        if (v == NULL)
            return KQ_ENOMEM;
        t->scd = v;
        t->scd_cap = m;
    }
    if (m > t->sval_cap) {
        int64_t *v = realloc(t->sval, m * sizeof *v);
        if (v == NULL)
            return KQ_ENOMEM;
        t->sval = v;
        t->sval_cap = m;
    }
    return 0;
}

static int ensure_scratch(kq_qtree_t *t, size_t n)
{
    if (n <= t->scr_cap)
        return 0;
    size_t cap = t->scr_cap ? t->scr_cap : 8;
    while (cap < n)
        cap *= 2;
    int64_t *sw = malloc(cap * sizeof *sw), *scap = malloc(cap * sizeof *scap);
    int64_t *sadd = malloc(cap * sizeof *sadd), *sbase = malloc(cap * sizeof *sbase);
    struct cand *cand = malloc(cap * sizeof *cand), *sel = malloc(cap * sizeof *sel);
    const char **scd = t->scd;
    int64_t *sval = t->sval;
    if (!sw || !scap || !sadd || !sbase || !cand || !sel) {
        free(sw), free(scap), free(sadd), free(sbase), free(cand), free(sel);
        return KQ_ENOMEM;
    }
    t->scd = NULL; /* kept: their size does not depend on the children */
    t->sval = NULL;
    scratch_free(t);
    t->scd = scd;
    t->sval = sval;
    t->sw = sw, t->scap = scap, t->sadd = sadd, t->sbase = sbase, t->cand = cand, t->sel = sel;
    t->scr_cap = cap;
    return 0;
}

static int ensure_heap(kq_qtree_t *t, size_t n)
{
    if (n <= t->heap_cap)
        return 0;
    size_t cap = t->heap_cap ? t->heap_cap * 2 : 16;
    while (cap < n)
        cap *= 2;
    struct group **h = realloc(t->heap, cap * sizeof *h);
    if (h == NULL)
        return KQ_ENOMEM;
    t->heap = h;
    t->heap_cap = cap;
    return 0;
}

static void mark_dirty(kq_qtree_t *t, struct group *p)
{
    if (p == NULL || p->nkids == 0 || p->dirty)
        return;
    p->dirty = true;
    size_t i = t->heap_n++; /* capacity >= number of groups */
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (t->heap[up]->depth <= p->depth)
            break;
        t->heap[i] = t->heap[up];
        i = up;
    }
    t->heap[i] = p;
}

static struct group *pop_dirty(kq_qtree_t *t)
{
    struct group *top = t->heap[0];
    struct group *last = t->heap[--t->heap_n];
    size_t i = 0, n = t->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && t->heap[c + 1]->depth < t->heap[c]->depth)
            c++;
        if (t->heap[c]->depth >= last->depth)
            break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (n > 0)
        t->heap[i] = last;
    top->dirty = false;
    return top;
}

/* Whether g's max names the interned resource d (a group without any max names every
 * resource: it is governed by runtime in all of them). */
static inline bool governs(const struct group *g, const char *d)
{
    if (!g->has_max)
        return true;
    bool has = false;
    (void)rget(&g->max, d, &has);
    return has;
}

/* Whether g's parent governs resource d where g itself does not limit it: a configured
 * parent (not the hidden root) with no max, or one whose max names d while g's does not
 * (queues.yaml allows both; Koordinator's webhook makes a child's max keys its parent's). */
static inline bool parent_governs(const struct group *g, const char *d)
{
    const struct group *p = g->parent;
    return p != NULL && p->parent != NULL && governs(p, d);
}

/* What g asks of its parent, into *a: its request (the default group: its used, which it
 * takes first, see redistribute; a group that does not lend: at least its min, as
 * Koordinator's recursiveUpdateGroupTreeWithDeltaRequest) masked to the resources its max
 * names, capped by max. A resource g's max does not name but its parent governs is asked
 * for uncapped: the parent checks its pods against its runtime in it, so their demand
 * must reach it. */
static void ask_into(const struct group *g, kq_resource_t *a)
{
    rcopy(a, g->deflt ? &g->used : &g->request);
    if (!g->allow_lent)
        for (uint32_t i = 0; i < g->min.n; i++) {
            const char *d = KQ_RES_E(&g->min)[i].name;
            int64_t v = rget(a, d, NULL);
            if (KQ_RES_E(&g->min)[i].value > v)
                (void)put(a, d, KQ_RES_E(&g->min)[i].value);
        }
    if (g->has_max) {
        uint32_t n = 0;
        for (uint32_t i = 0; i < a->n; i++) {
            bool has;
            int64_t mx = rget(&g->max, KQ_RES_E(a)[i].name, &has);
            if (!has) {
                if (parent_governs(g, KQ_RES_E(a)[i].name))
                    KQ_RES_E(a)[n++] = KQ_RES_E(a)[i]; /* limited above g only */
                continue; /* else not limited by g or above: asks none of it */
            }
            KQ_RES_E(a)[n] = KQ_RES_E(a)[i];
            if (KQ_RES_E(a)[n].value > mx)
                KQ_RES_E(a)[n].value = mx;
            n++;
        }
        a->n = n;
    }
}

static void resum_request(struct group *p)
{
    kq_resource_t r;
    kq_resource_init(&r);
    for (size_t j = 0; j < p->nkids; j++) {
        const struct group *k = p->kid[j];
        for (uint32_t i = 0; i < k->ask.n; i++) {
            const char *d = KQ_RES_E(&k->ask)[i].name;
            (void)put(&r, d, sat_add(rget(&r, d, NULL), KQ_RES_E(&k->ask)[i].value));
        }
    }
    kq_resource_move(&p->request, &r);
}

/* g's request, scaled min, max or allow-lent changed: refresh asks and requests upward,
 * marking each parent on the way dirty, until an ask does not change. */
static void fix_up(kq_qtree_t *t, struct group *g)
{
    kq_resource_t a;
    kq_resource_init(&a);
    while (g->parent != NULL) {
        ask_into(g, &a);
        bool changed = !same(&a, &g->ask);
        kq_resource_move(&g->ask, &a);
        mark_dirty(t, g->parent);
        if (!changed)
            break;
        resum_request(g->parent);
        g = g->parent;
    }
    kq_resource_free(&a);
}

/* The entry of iname in r (which must name it). */
static kq_res_entry_t *slot(kq_resource_t *r, const char *iname)
{
    for (uint32_t i = 0; i < r->n; i++)
        if (KQ_RES_E(r)[i].name == iname)
            return &KQ_RES_E(r)[i];
    return NULL;
}

/* Recomputation is bound by memory latency: a group is a few KB and a parent's children
 * are scattered, so the first pass over them prefetches what later passes read. */
#define PF_AHEAD 4

static inline void prefetch_kid(const struct group *k, bool for_runtime)
{
    __builtin_prefetch(k);
    __builtin_prefetch(&k->smin);
    if (for_runtime) {
        __builtin_prefetch(&k->ask);
        __builtin_prefetch(&k->max);
        __builtin_prefetch(&k->weight);
        __builtin_prefetch(&k->runtime);
    } else {
        __builtin_prefetch(&k->min);
    }
}

/* p's children or their specs changed: recomputes p's kidmin, every child's ask and p's
 * request; `deep` does the same below p first (the end of a batch). Marks p dirty. */
static void asks_refresh(kq_qtree_t *t, struct group *p, bool deep)
{
    size_t n = p->nkids;
    struct group **kid = p->kid;
    kq_resource_t sum;
    kq_resource_init(&sum);
    for (size_t i = 0; i < n; i++) {
        struct group *k = kid[i];
        if (i + PF_AHEAD < n)
            prefetch_kid(kid[i + PF_AHEAD], false);
        if (deep && k->is_parent)
            asks_refresh(t, k, true);
        for (uint32_t j = 0; !k->deflt && j < k->min.n; j++) {
            const char *d = KQ_RES_E(&k->min)[j].name;
            (void)put(&sum, d, sat_add(rget(&sum, d, NULL), KQ_RES_E(&k->min)[j].value));
        }
        ask_into(k, &k->ask);
    }
    kq_resource_move(&p->kidmin, &sum);
    kq_resource_free(&sum);
    if (n == 0)
        kq_resource_clear(&p->request);
    else
        resum_request(p);
    mark_dirty(t, p);
}

/* Koordinator's scaled min of a child whose min of a resource is m, when its parent's
 * runtime E (less what the default group takes, at the root) is below S, the sum of the
 * children's mins (ScaleMinQuotaManager.getScaledMinQuota): E * m / S in float64,
 * truncated, 0 when nothing is left. Same operations in the same order as Go's, so the
 * same results (IEEE 754 doubles, no fused multiply-add). */
static int64_t scaled_min(int64_t E, int64_t m, int64_t S)
{
    if (E <= 0 || S <= 0)
        return 0;
    double v = (double)E * (double)m / (double)S;
    return v >= (double)E ? E : (int64_t)v; /* never above E (nor past INT64_MAX) */
}

/* What p shares of resource d (the j-th of the cluster total): its runtime, less at the
 * root what the default group takes first (Koordinator's totalResourceExceptSystemAndDefaultUsed). */
static int64_t shared_part(const kq_qtree_t *t, const struct group *p, const char *d, uint32_t j)
{
    int64_t R = rget_at(&p->runtime, j, d, NULL);
    if (p != t->root)
        return R;
    int64_t db = rget_at(&t->def->ask, j, d, NULL);
    return db >= R ? 0 : R - db;
}

/* Sets the scaled mins of p's children (see Scaled min in quota_tree.h) from what p shares
 * of each resource of the cluster total. Children whose mins are not scaled keep
 * smin == min; the default group is never scaled (it takes what it uses). */
static void scale_kids(kq_qtree_t *t, struct group *p)
{
    const kq_resource_t *dims = &t->root->runtime;
    if (ensure_sval(t, dims->n) != 0)
        return; /* out of memory (a total naming more resources than ever): left as they were */
    const char **scd = t->scd;
    uint32_t nsc = 0;
    for (uint32_t j = 0; j < dims->n; j++) {
        const char *d = KQ_RES_E(dims)[j].name;
        int64_t E = shared_part(t, p, d, j);
        if (rget(&p->kidmin, d, NULL) > E)
            scd[nsc] = d, t->sval[nsc++] = E;
    }
    if (nsc == 0 && !p->kscaled)
        return;
    for (size_t i = 0; i < p->nkids; i++) {
        struct group *k = p->kid[i];
        if (k->deflt)
            continue;
        rcopy(&k->smin, &k->min);
        for (uint32_t c = 0; c < nsc; c++) {
            kq_res_entry_t *e = slot(&k->smin, scd[c]); /* a min naming the resource */
            if (e != NULL)
                e->value = scaled_min(t->sval[c], e->value, rget(&p->kidmin, scd[c], NULL));
        }
    }
    p->kscaled = nsc > 0;
}

/* k's sharing weight of resource d, the j-th resource of the cluster total. */
static int64_t weight_of(const kq_qtree_t *t, const struct group *k, const char *d, uint32_t j)
{
    bool has = false;
    int64_t w = k->has_weight ? rget_at(&k->weight, j, d, &has) : 0;
    if (has)
        return w;
    w = k->has_max ? rget_at(&k->max, j, d, &has) : 0;
    if (has)
        return w;
    return rget_at(&t->root->runtime, j, d, NULL);
}

/* Shares p's runtime among its children, per resource the cluster total names, after
 * scaling their mins to it (Koordinator's RuntimeQuotaCalculator.redistribution: each
 * child first gets min(ask, scaled min), the rest goes by shared weight, see apportion). */
static void redistribute(kq_qtree_t *t, struct group *p)
{
    size_t n = p->nkids;
    struct group **kid = p->kid;
    if (n == 0)
        return;
    scale_kids(t, p);
    const kq_resource_t *dims = &t->root->runtime;
    int64_t *base = t->sbase, *ask = t->scap;
    /* Children's runtimes are rewritten in place (nothing here reads them); flag = changed. */
    for (size_t i = 0; i < n; i++) {
        struct group *k = kid[i];
        if (i + PF_AHEAD < n)
            prefetch_kid(kid[i + PF_AHEAD], true);
        k->flag = k->runtime.n != dims->n;
        /* room for every resource of the total (allocates only when the total names more
         * than KQ_RES_INLINE resources, once per size); out of memory leaves the child's
         * runtime empty (unlimited) until the next redistribution */
        uint32_t cap = k->runtime.cap ? k->runtime.cap : KQ_RES_INLINE;
        k->runtime.n = dims->n <= cap || kq_resource_reserve(&k->runtime, dims->n) == 0 ? dims->n : 0;
    }
    for (uint32_t j = 0; j < dims->n; j++) {
        const char *d = KQ_RES_E(dims)[j].name;
        int64_t R = rget_at(&p->runtime, j, d, NULL);
        u128 sum = 0;
        for (size_t i = 0; i < n; i++) {
            const struct group *k = kid[i];
            int64_t a = rget_at(&k->ask, j, d, NULL), m = rget_at(&k->smin, j, d, NULL);
            ask[i] = a;
            base[i] = a < m || k->deflt ? a : m; /* the default group first takes what it uses */
            sum += (u128)base[i];
        }
        if (sum > (u128)R) {
            /* scaled mins fit in what is shared, so only when the default group uses more
             * than R (or scaling ran out of memory): the default group keeps what it uses
             * (up to R), the rest of R is shared by first shares */
            size_t dp = n;
            for (size_t i = 0; i < n && p == t->root; i++)
                if (kid[i]->deflt)
                    dp = i;
            int64_t db = 0;
            if (dp < n) {
                db = base[dp] < R ? base[dp] : R;
                base[dp] = 0;
            }
            apportion(t, n, R - db, base, base, t->sadd);
            memcpy(base, t->sadd, n * sizeof *base);
            if (dp < n)
                base[dp] = db;
        } else {
            int64_t rem = R - (int64_t)sum;
            if (rem > 0) {
                for (size_t i = 0; i < n; i++) {
                    ask[i] -= base[i]; /* the cap: what it asks beyond its first share */
                    t->sw[i] = weight_of(t, kid[i], d, j);
                }
                apportion(t, n, rem, t->sw, ask, t->sadd);
                for (size_t i = 0; i < n; i++)
                    base[i] += t->sadd[i];
            }
        }
        for (size_t i = 0; i < n; i++) {
            if (kid[i]->runtime.n == 0)
                continue; /* out of memory above */
            kq_res_entry_t *e = &KQ_RES_E(&kid[i]->runtime)[j];
            if (e->name != d || e->value != base[i]) {
                e->name = d;
                e->value = base[i];
                kid[i]->flag = true;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct group *k = kid[i];
        if (k->flag)
            mark_dirty(t, k);
        k->flag = false;
    }
}

static void run_dirty(kq_qtree_t *t)
{
    while (t->heap_n > 0)
        redistribute(t, pop_dirty(t));
}

/* Redistributes p and every parent below it, each parent before its children. */
static void redistribute_all(kq_qtree_t *t, struct group *p)
{
    redistribute(t, p);
    for (size_t i = 0; i < p->nkids; i++)
        if (p->kid[i]->nkids > 0)
            redistribute_all(t, p->kid[i]);
}

/* Forgets the dirty marks (every parent was just redistributed). */
static void clear_dirty(kq_qtree_t *t)
{
    for (size_t i = 0; i < t->heap_n; i++)
        t->heap[i]->dirty = false;
    t->heap_n = 0;
}

/* Completes the pending recomputation. After changes in a batch, every ask and request
 * first. Then (after a change of the cluster total too) every parent's distribution
 * (scaled mins and default weights of unlimited groups follow the total), in one pass
 * from the root instead of through the dirty heap. Otherwise only the dirty parents.
 * Readers call it first (a no-op outside batches). */
static void settle(kq_qtree_t *t)
{
    if (t->pending != 0) {
        if (t->pending == PEND_ALL)
            asks_refresh(t, t->root, true);
        t->pending = 0;
        clear_dirty(t);
        redistribute_all(t, t->root);
        clear_dirty(t);
    } else {
        run_dirty(t);
    }
}

/* After a change: recompute now, unless a batch defers it. */
static void changed(kq_qtree_t *t)
{
    if (t->batch == 0)
        settle(t);
}

/* Inside a batch a change only records that everything must be recomputed at its end. */
static bool deferred(kq_qtree_t *t)
{
    if (t->batch == 0)
        return false;
    t->pending = PEND_ALL;
    return true;
}

/* The cluster total is the allocatable minus the system group's used. */
static void total_refresh(kq_qtree_t *t)
{
    if (!t->have_total)
        return;
    kq_resource_t tot = KQ_RESOURCE_EMPTY;
    if (kq_resource_copy(&tot, &t->alloc) != 0)
        return; /* out of memory: the old total stays */
    kq_res_entry_t *te = KQ_RES_E(&tot);
    for (uint32_t i = 0; i < tot.n; i++) {
        int64_t u = rget(&t->sys->used, te[i].name, NULL);
        te[i].value = u >= te[i].value ? 0 : te[i].value - u;
    }
    bool same_total = same(&tot, &t->root->runtime);
    if (!same_total) {
        rcopy(&t->root->smin, &tot); /* the root's min (for the non-preemptible check) */
        kq_resource_move(&t->root->runtime, &tot);
    }
    kq_resource_free(&tot);
    if (same_total)
        return;
    if (t->pending < PEND_TOTAL)
        t->pending = PEND_TOTAL;
    changed(t);
}

/* p's children or their specs changed. */
static void refresh_parent(kq_qtree_t *t, struct group *p)
{
    if (deferred(t))
        return;
    asks_refresh(t, p, false);
    fix_up(t, p);
}

/* ==================================================================== usage ==== */

/* Adds res (and to used_np when np) at g and every ancestor, or nothing on overflow
 * (KQ_ERANGE) or out of memory. Checks every level first (which also makes room), then
 * adds in place: no copies on the bind path. */
static int path_add(struct group *g, const kq_resource_t *res, const kq_resource_t *np)
{
    for (struct group *x = g; x; x = x->parent) {
        int rc = kq_resource_add_check(&x->used, res);
        if (rc == 0 && np != NULL)
            rc = kq_resource_add_check(&x->used_np, np);
        if (rc != 0)
            return rc;
    }
    for (struct group *x = g; x; x = x->parent)
        if (kq_resource_add(&x->used, res) != 0 || (np != NULL && kq_resource_add(&x->used_np, np) != 0))
            abort(); /* checked above */
    return 0;
}

/* Subtracts at g and every ancestor, clamped at 0. True when nothing was clamped. */
static bool path_sub(struct group *g, const kq_resource_t *res, const kq_resource_t *np)
{
    bool exact = true;
    for (struct group *x = g; x; x = x->parent) {
        exact &= kq_resource_sub(&x->used, res);
        if (np != NULL)
            exact &= kq_resource_sub(&x->used_np, np);
    }
    return exact;
}

static bool has_pods(const struct group *g)
{
    return g->pods > 0 || g->pods_used > 0 || !kq_resource_is_zero(&g->request) ||
           !kq_resource_is_zero(&g->used);
}

/* ============================================================== tree shape ==== */

/* Position of name among p's children (where it is or would be inserted). */
static size_t kid_pos(const struct group *p, const char *name)
{
    size_t lo = 0, hi = p->nkids;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(p->kid[mid]->name, name) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Room for one more child of p, so that link_kid cannot fail. */
static int reserve_kid(struct group *p)
{
    if (p->nkids < p->kidcap)
        return 0;
    size_t cap = p->kidcap ? p->kidcap * 2 : 4;
    struct group **v = realloc(p->kid, cap * sizeof *v);
    if (v == NULL)
        return KQ_ENOMEM;
    p->kid = v;
    p->kidcap = cap;
    return 0;
}

static void link_kid(struct group *p, struct group *g)
{
    size_t i = kid_pos(p, g->name); /* capacity reserved by reserve_kid */
    memmove(&p->kid[i + 1], &p->kid[i], (p->nkids - i) * sizeof p->kid[0]);
    p->kid[i] = g;
    p->nkids++;
    g->parent = p;
}

static void unlink_kid(struct group *g)
{
    struct group *p = g->parent;
    size_t i = kid_pos(p, g->name);
    memmove(&p->kid[i], &p->kid[i + 1], (p->nkids - i - 1) * sizeof p->kid[0]);
    p->nkids--;
    g->parent = NULL;
}

static void set_depth(struct group *g, int depth)
{
    g->depth = depth;
    for (size_t i = 0; i < g->nkids; i++)
        set_depth(g->kid[i], depth + 1);
}

static int height(const struct group *g)
{
    int h = 0;
    for (size_t i = 0; i < g->nkids; i++) {
        int kh = height(g->kid[i]) + 1;
        if (kh > h)
            h = kh;
    }
    return h;
}

static struct group *group_new(const char *name)
{
    struct group *g = calloc(1, sizeof *g);
    if (g == NULL)
        return NULL;
    g->name = strdup(name);
    if (g->name == NULL) {
        free(g);
        return NULL;
    }
    g->allow_lent = true;
    return g;
}

static void group_free(struct group *g)
{
    if (g == NULL)
        return;
    kq_resource_t *sets[] = {&g->min, &g->smin, &g->max, &g->weight, &g->request,
                             &g->ask, &g->used, &g->used_np, &g->runtime, &g->kidmin};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        kq_resource_free(sets[i]);
    free(g->name);
    free(g->kid);
    free(g);
}

static int hash_add(kq_qtree_t *t, struct group *g)
{
    hash_oom = false;
    HASH_ADD_KEYPTR(hh, t->by_name, g->name, strlen(g->name), g);
    return hash_oom ? KQ_ENOMEM : 0;
}

/* ============================================================== validation ==== */

/* All rules of kq_qtree_set_group. On success *parent_out is the new parent. */
static int validate(kq_qtree_t *t, const kq_qgroup_spec_t *s, struct group **parent_out, char *err,
                    size_t errlen)
{
    char b1[64], b2[64], b3[64];
    if (s == NULL || s->name == NULL) {
        kq_errf(err, errlen, "quota group spec without a name");
        return KQ_EINVAL;
    }
    if (!name_ok(s->name)) {
        kq_errf(err, errlen, "invalid quota group name (1..%d characters of A-Z a-z 0-9 . _ : / -)",
               KQ_QTREE_NAME_MAX);
        return KQ_EINVAL;
    }
    if (strcmp(s->name, KQ_QTREE_ROOT) == 0 || strcmp(s->name, KQ_QTREE_SYSTEM) == 0) {
        kq_errf(err, errlen, "quota group %s is built in and cannot be configured", s->name);
        return KQ_EINVAL;
    }
    struct group *g = find(t, s->name);
    struct group *p;
    if (is_root_name(s->parent)) {
        p = t->root;
    } else {
        if (!name_ok(s->parent)) {
            kq_errf(err, errlen, "quota group %s: invalid parent name", s->name);
            return KQ_EINVAL;
        }
        p = find(t, s->parent);
        if (p == NULL) {
            kq_errf(err, errlen, "quota group %s: parent quota group %s does not exist", s->name, s->parent);
            return KQ_ENOENT;
        }
        if (p == g) {
            kq_errf(err, errlen, "quota group %s cannot be its own parent", s->name);
            return KQ_EINVAL;
        }
        if (!p->is_parent || p->system) {
            kq_errf(err, errlen, "quota group %s: parent %s is not a parent group", s->name, p->name);
            return KQ_EINVAL;
        }
    }
    if (g == t->def && (p != t->root || s->is_parent)) {
        kq_errf(err, errlen, "quota group %s must stay a first-level leaf group", s->name);
        return KQ_EINVAL;
    }
    bool moving = g != NULL && g->parent != p;
    if (moving) {
        for (struct group *x = p; x; x = x->parent)
            if (x == g) {
                kq_errf(err, errlen, "quota group %s cannot move under its own descendant %s", s->name, p->name);
                return KQ_EINVAL;
            }
    }
    int deepest = p->depth + 1 + (moving ? height(g) : 0); /* an unmoved group keeps its depth */
    if (deepest > KQ_QTREE_MAX_DEPTH) {
        kq_errf(err, errlen, "quota group %s: the tree would be deeper than %d levels", s->name,
               KQ_QTREE_MAX_DEPTH);
        return KQ_EINVAL;
    }
    for (uint32_t i = 0; i < s->min.n; i++) {
        bool has;
        const char *d = KQ_RES_E(&s->min)[i].name;
        int64_t mx = rget(&s->max, d, &has);
        if (has && KQ_RES_E(&s->min)[i].value > mx) {
            kq_errf(err, errlen, "quota group %s: min %s %s exceeds max %s", s->name, d,
                   fmtq(d, KQ_RES_E(&s->min)[i].value, b1, sizeof b1), fmtq(d, mx, b2, sizeof b2));
            return KQ_EINVAL;
        }
    }
    if (g != NULL && g->nkids > 0 && !s->is_parent) {
        kq_errf(err, errlen, "quota group %s has children and cannot become a leaf group", s->name);
        return KQ_ESTATE;
    }
    if (g != NULL && !g->is_parent && s->is_parent && has_pods(g)) {
        kq_errf(err, errlen, "quota group %s has pods and cannot become a parent group", s->name);
        return KQ_ESTATE;
    }
    /* Its own children's mins must fit in its new min. */
    if (g != NULL && g->nkids > 0 && !s->allow_force_update) {
        kq_resource_t sum = KQ_RESOURCE_EMPTY;
        for (size_t j = 0; j < g->nkids; j++)
            for (uint32_t i = 0; i < g->kid[j]->min.n; i++) {
                const struct group *k = g->kid[j];
                const char *d = KQ_RES_E(&k->min)[i].name;
                (void)put(&sum, d, sat_add(rget(&sum, d, NULL), KQ_RES_E(&k->min)[i].value));
            }
        for (uint32_t i = 0; i < sum.n; i++) {
            const char *d = KQ_RES_E(&sum)[i].name;
            int64_t m = rget(&s->min, d, NULL);
            if (KQ_RES_E(&sum)[i].value > m) {
                kq_errf(err, errlen, "quota group %s: its children's min %s %s sum to more than its min %s",
                       s->name, d, fmtq(d, KQ_RES_E(&sum)[i].value, b1, sizeof b1), fmtq(d, m, b2, sizeof b2));
                kq_resource_free(&sum);
                return KQ_EINVAL;
            }
        }
        kq_resource_free(&sum);
    }
    /* Below the first level its min and its new siblings' must fit in the parent's min. */
    if (p != t->root && !s->allow_force_update) {
        kq_resource_t sum = KQ_RESOURCE_EMPTY;
        if (kq_resource_copy(&sum, &s->min) != 0) {
            kq_errf(err, errlen, "quota group %s: out of memory", s->name);
            return KQ_ENOMEM;
        }
        for (size_t j = 0; j < p->nkids; j++) {
            const struct group *k = p->kid[j];
            if (k == g)
                continue;
            for (uint32_t i = 0; i < k->min.n; i++) {
                const char *d = KQ_RES_E(&k->min)[i].name;
                (void)put(&sum, d, sat_add(rget(&sum, d, NULL), KQ_RES_E(&k->min)[i].value));
            }
        }
        for (uint32_t i = 0; i < sum.n; i++) {
            const char *d = KQ_RES_E(&sum)[i].name;
            int64_t m = rget(&p->min, d, NULL);
            if (KQ_RES_E(&sum)[i].value > m) {
                kq_errf(err, errlen,
                       "quota group %s: the children of %s would have min %s %s, more than its min %s "
                       "(this group %s)",
                       s->name, p->name, d, fmtq(d, KQ_RES_E(&sum)[i].value, b1, sizeof b1), fmtq(d, m, b2, sizeof b2),
                       fmtq(d, rget(&s->min, d, NULL), b3, sizeof b3));
                kq_resource_free(&sum);
                return KQ_EINVAL;
            }
        }
        kq_resource_free(&sum);
    }
    /* Moving usage into the new ancestors must not overflow (common ancestors keep it). */
    if (moving && !kq_resource_is_zero(&g->used)) {
        for (struct group *x = g->parent; x; x = x->parent)
            x->flag = true;
        int rc = 0;
        for (struct group *x = p; x && rc == 0; x = x->parent) {
            if (x->flag)
                continue;
            kq_resource_t u = KQ_RESOURCE_EMPTY, v = KQ_RESOURCE_EMPTY;
            if (kq_resource_copy(&u, &x->used) != 0 || kq_resource_copy(&v, &x->used_np) != 0) {
                kq_errf(err, errlen, "quota group %s: out of memory", s->name);
                rc = KQ_ENOMEM;
            } else if (kq_resource_add(&u, &g->used) != 0 || kq_resource_add(&v, &g->used_np) != 0) {
                kq_errf(err, errlen, "quota group %s: moving its usage would overflow the used of %s", s->name,
                       x->name);
                rc = KQ_ERANGE;
            }
            kq_resource_free(&u);
            kq_resource_free(&v);
        }
        for (struct group *x = g->parent; x; x = x->parent)
            x->flag = false;
        if (rc != 0)
            return rc;
    }
    *parent_out = p;
    return 0;
}

/* ============================================================== public API ==== */

void kq_qgroup_spec_init(kq_qgroup_spec_t *spec, const char *name)
{
    memset(spec, 0, sizeof *spec);
    spec->name = name;
    spec->allow_lent = true;
}

kq_qtree_t *kq_qtree_new(void)
{
    kq_qtree_t *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    t->root = group_new(KQ_QTREE_ROOT);
    t->sys = group_new(KQ_QTREE_SYSTEM);
    t->def = group_new(KQ_QTREE_DEFAULT);
    if (t->root == NULL || t->sys == NULL || t->def == NULL || hash_add(t, t->root) != 0 ||
        hash_add(t, t->sys) != 0 || hash_add(t, t->def) != 0 || ensure_heap(t, 16) != 0 ||
        ensure_scratch(t, 8) != 0 || reserve_kid(t->root) != 0) {
        HASH_CLEAR(hh, t->by_name); /* forgets the table; the groups are freed below */
        group_free(t->root);
        group_free(t->sys);
        group_free(t->def);
        pthread_mutex_destroy(&t->lock);
        free(t->heap);
        scratch_free(t);
        free(t);
        return NULL;
    }
    t->ngroups = 3;
    for (size_t k = 0; k < sizeof(t->spf) / sizeof(t->spf[0]); k++)
        t->spf[k] = kq_resource_name(sp_fields[k]);
    t->root->is_parent = true;
    t->sys->system = true;
    t->sys->depth = 1;
    t->def->deflt = true;
    link_kid(t->root, t->def);
    t->def->depth = 1;
    refresh_parent(t, t->root);
    changed(t);
    return t;
}

void kq_qtree_free(kq_qtree_t *t)
{
    if (t == NULL)
        return;
    struct group *g, *tmp;
    HASH_ITER(hh, t->by_name, g, tmp) {
        HASH_DEL(t->by_name, g);
        group_free(g);
    }
    kq_resource_free(&t->alloc);
    kq_resource_free(&t->sp_min);
    kq_resource_free(&t->sp_used);
    pthread_mutex_destroy(&t->lock);
    free(t->heap);
    scratch_free(t);
    free(t);
}

int kq_qtree_validate_group(kq_qtree_t *t, const kq_qgroup_spec_t *spec, char *err, size_t errlen)
{
    struct group *p;
    pthread_mutex_lock(&t->lock);
    int rc = validate(t, spec, &p, err, errlen);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

/* g's min and used enter (sign > 0) or leave the scheduler-plugins sums. Sums saturate
 * rather than fail (a sum that large bounds nothing). */
static void sp_account(kq_qtree_t *t, const struct group *g, int sign)
{
    if (!g->summin)
        return;
    const kq_resource_t *src[2] = {&g->min, &g->used};
    kq_resource_t *dst[2] = {&t->sp_min, &t->sp_used};
    for (int k = 0; k < 2; k++)
        for (uint32_t i = 0; i < src[k]->n; i++) {
            const char *d = KQ_RES_E(src[k])[i].name;
            int64_t cur = rget(dst[k], d, NULL), v = KQ_RES_E(src[k])[i].value;
            (void)put(dst[k], d, sign > 0 ? sat_add(cur, v) : (cur > v ? cur - v : 0));
        }
}

/* The spec's sets, copied before anything changes (the only step that can fail). */
struct spec_sets {
    kq_resource_t min, max, weight;
};

static int spec_copy(struct spec_sets *c, const kq_qgroup_spec_t *s)
{
    c->min = c->max = c->weight = KQ_RESOURCE_EMPTY;
    if (kq_resource_copy(&c->min, &s->min) == 0 && kq_resource_copy(&c->max, &s->max) == 0 &&
        kq_resource_copy(&c->weight, &s->shared_weight) == 0)
        return 0;
    kq_resource_free(&c->min);
    kq_resource_free(&c->max);
    kq_resource_free(&c->weight);
    return KQ_ENOMEM;
}

/* Applies the spec; c's sets move into g. */
static void apply_spec(struct group *g, const kq_qgroup_spec_t *s, struct spec_sets *c)
{
    g->summin = s->sum_of_mins;
    kq_resource_move(&g->min, &c->min);
    kq_resource_move(&g->max, &c->max);
    kq_resource_move(&g->weight, &c->weight);
    (void)rcopy(&g->smin, &g->min); /* until its parent scales it (redistribute) */
    g->has_max = g->max.n > 0;
    /* Koordinator's GetSharedWeight: a weight that is zero in every resource is no weight
     * (the max weighs instead) */
    g->has_weight = !kq_resource_is_zero(&g->weight);
    g->allow_lent = s->allow_lent;
    g->is_parent = s->is_parent;
}

int kq_qtree_set_group(kq_qtree_t *t, const kq_qgroup_spec_t *spec, char *err, size_t errlen)
{
    struct group *p = NULL, *g = NULL, *fresh = NULL;
    char name[KQ_QTREE_NAME_MAX + 1] = "", parent[KQ_QTREE_NAME_MAX + 1] = "";
    bool created = false, moved = false;
    struct spec_sets sets;
    if (spec_copy(&sets, spec) != 0) {
        kq_errf(err, errlen, "quota group %s: out of memory", spec->name ? spec->name : "");
        return KQ_ENOMEM;
    }
    pthread_mutex_lock(&t->lock);
    int rc = validate(t, spec, &p, err, errlen);
    if (rc != 0)
        goto out;
    g = find(t, spec->name);
    rc = ensure_scratch(t, p->nkids + 1);
    if (rc == 0 && g == NULL)
        rc = ensure_heap(t, t->ngroups + 1);
    if (rc == 0 && (g == NULL || g->parent != p))
        rc = reserve_kid(p);
    if (rc != 0) {
        kq_errf(err, errlen, "quota group %s: out of memory", spec->name);
        goto out;
    }
    if (g == NULL) {
        fresh = group_new(spec->name);
        if (fresh == NULL || hash_add(t, fresh) != 0) {
            group_free(fresh);
            rc = KQ_ENOMEM;
            kq_errf(err, errlen, "quota group %s: out of memory", spec->name);
            goto out;
        }
        t->ngroups++;
        g = fresh;
        apply_spec(g, spec, &sets);
        sp_account(t, g, +1);
        link_kid(p, g);
        set_depth(g, p->depth + 1);
        created = true;
        refresh_parent(t, p);
    } else {
        struct group *op = g->parent;
        sp_account(t, g, -1);
        apply_spec(g, spec, &sets);
        sp_account(t, g, +1);
        if (op != p) {
            moved = true;
            path_sub(op, &g->used, &g->used_np);
            unlink_kid(g);
            link_kid(p, g);
            set_depth(g, p->depth + 1);
            if (path_add(p, &g->used, &g->used_np) != 0) /* checked by validate() */
                abort();
            refresh_parent(t, op);
        }
        if (g->nkids > 0)
            refresh_parent(t, g); /* its children's asks depend on what its max names */
        refresh_parent(t, p);
    }
    changed(t);
    snprintf(name, sizeof name, "%s", g->name);
    snprintf(parent, sizeof parent, "%s", p->name);
out:
    pthread_mutex_unlock(&t->lock);
    kq_resource_free(&sets.min); /* moved into the group on success */
    kq_resource_free(&sets.max);
    kq_resource_free(&sets.weight);
    if (rc == 0)
        kq_info("quota tree: group %s group=%s parent=%s", created ? "created" : moved ? "moved" : "updated",
                name, parent);
    return rc;
}

int kq_qtree_remove_group(kq_qtree_t *t, const char *name, char *err, size_t errlen)
{
    int rc = 0;
    char copy[KQ_QTREE_NAME_MAX + 1] = "";
    pthread_mutex_lock(&t->lock);
    struct group *g = find(t, name);
    if (g == NULL) {
        kq_errf(err, errlen, "quota group %s does not exist", name != NULL && name_ok(name) ? name : "(invalid)");
        rc = KQ_ENOENT;
        goto out;
    }
    if (g == t->root || g == t->sys || g == t->def) {
        kq_errf(err, errlen, "quota group %s is built in and cannot be removed", g->name);
        rc = KQ_EINVAL;
        goto out;
    }
    if (g->nkids > 0) {
        kq_errf(err, errlen, "quota group %s has children; remove or move them first", g->name);
        rc = KQ_ESTATE;
        goto out;
    }
    /* Its pods fall to the default group: check that the counters fit first. */
    kq_resource_t used = KQ_RESOURCE_EMPTY, used_np = KQ_RESOURCE_EMPTY; /* path_sub starts at g itself */
    if ((rc = kq_resource_add_check(&t->def->used, &g->used)) != 0 ||
        (rc = kq_resource_add_check(&t->def->used_np, &g->used_np)) != 0 ||
        (rc = kq_resource_add_check(&t->def->request, &g->request)) != 0 ||
        (rc = kq_resource_copy(&used, &g->used)) != 0 || (rc = kq_resource_copy(&used_np, &g->used_np)) != 0) {
        if (rc == KQ_ERANGE)
            kq_errf(err, errlen, "quota group %s: moving its usage to %s would overflow", g->name, KQ_QTREE_DEFAULT);
        else
            kq_errf(err, errlen, "quota group %s: out of memory", g->name);
        kq_resource_free(&used);
        kq_resource_free(&used_np);
        goto out;
    }
    struct group *p = g->parent;
    sp_account(t, g, -1);
    path_sub(g, &used, &used_np);
    /* checked above; the root got back what it lost, in names it already has */
    if (path_add(t->def, &used, &used_np) != 0 || kq_resource_add(&t->def->request, &g->request) != 0)
        abort();
    kq_resource_free(&used);
    kq_resource_free(&used_np);
    t->def->pods += g->pods;
    t->def->pods_used += g->pods_used;
    unlink_kid(g);
    HASH_DEL(t->by_name, g);
    t->ngroups--;
    snprintf(copy, sizeof copy, "%s", g->name);
    group_free(g);
    if (!deferred(t)) {
        refresh_parent(t, p);
        fix_up(t, t->def);
        changed(t);
    }
out:
    pthread_mutex_unlock(&t->lock);
    if (rc == 0)
        kq_info("quota tree: group removed, its pods now count in %s group=%s", KQ_QTREE_DEFAULT, copy);
    return rc;
}

void kq_qtree_batch_begin(kq_qtree_t *t)
{
    pthread_mutex_lock(&t->lock);
    t->batch++;
    pthread_mutex_unlock(&t->lock);
}

void kq_qtree_batch_end(kq_qtree_t *t)
{
    pthread_mutex_lock(&t->lock);
    if (t->batch > 0 && --t->batch == 0)
        settle(t);
    pthread_mutex_unlock(&t->lock);
}

void kq_qtree_set_cluster_total(kq_qtree_t *t, const kq_resource_t *allocatable)
{
    pthread_mutex_lock(&t->lock);
    if (kq_resource_copy(&t->alloc, allocatable) != 0) { /* out of memory: the old total stays */
        pthread_mutex_unlock(&t->lock);
        kq_error("quota tree: out of memory setting the cluster total, keeping the old one");
        return;
    }
    t->have_total = true;
    total_refresh(t);
    pthread_mutex_unlock(&t->lock);
}

/* A group pods may be counted in: known, and not a parent. */
static int pod_group(kq_qtree_t *t, const char *name, struct group **out)
{
    struct group *g = find(t, name);
    if (g == NULL)
        return KQ_ENOENT;
    if (g->is_parent)
        return KQ_EINVAL;
    *out = g;
    return 0;
}

int kq_qtree_request_add(kq_qtree_t *t, const char *group, const kq_resource_t *req)
{
    struct group *g;
    pthread_mutex_lock(&t->lock);
    int rc = pod_group(t, group, &g);
    if (rc == 0) {
        rc = kq_resource_add(&g->request, req); /* changes nothing on error */
        if (rc == 0) {
            g->pods++;
            if (!g->system && !deferred(t)) {
                fix_up(t, g);
                changed(t);
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kq_qtree_request_sub(kq_qtree_t *t, const char *group, const kq_resource_t *req)
{
    struct group *g;
    bool exact = true;
    pthread_mutex_lock(&t->lock);
    int rc = pod_group(t, group, &g);
    if (rc == 0) {
        exact = kq_resource_sub(&g->request, req);
        if (g->pods > 0)
            g->pods--;
        if (!g->system && !deferred(t)) {
            fix_up(t, g);
            changed(t);
        }
    }
    pthread_mutex_unlock(&t->lock);
    if (!exact)
        kq_warn("quota tree: request release larger than the request, clamped at 0 group=%s", group);
    return rc;
}

/* A pod's resources enter or leave the scheduler-plugins used sum. */
static void sp_used_add(kq_qtree_t *t, const kq_resource_t *res, int sign)
{
    for (uint32_t i = 0; i < res->n; i++) {
        const char *d = KQ_RES_E(res)[i].name;
        int64_t cur = rget(&t->sp_used, d, NULL), v = KQ_RES_E(res)[i].value;
        (void)put(&t->sp_used, d, sign > 0 ? sat_add(cur, v) : (cur > v ? cur - v : 0));
    }
}

/* The default group asks its used: a change of it redistributes from its parent. */
static void def_used_changed(kq_qtree_t *t)
{
    if (deferred(t))
        return;
    fix_up(t, t->def);
    changed(t);
}

static int used_add_locked(kq_qtree_t *t, struct group *g, const kq_resource_t *res, bool np)
{
    int rc = path_add(g, res, np ? res : NULL);
    if (rc != 0)
        return rc;
    g->pods_used++;
    if (g->summin)
        sp_used_add(t, res, +1);
    if (g->system)
        total_refresh(t);
    else if (g->deflt)
        def_used_changed(t);
    return 0;
}

int kq_qtree_used_add(kq_qtree_t *t, const char *group, const kq_resource_t *res, bool nonpreemptible)
{
    struct group *g;
    pthread_mutex_lock(&t->lock);
    int rc = pod_group(t, group, &g);
    if (rc == 0)
        rc = used_add_locked(t, g, res, nonpreemptible);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kq_qtree_used_sub(kq_qtree_t *t, const char *group, const kq_resource_t *res, bool nonpreemptible)
{
    struct group *g;
    bool exact = true;
    pthread_mutex_lock(&t->lock);
    int rc = pod_group(t, group, &g);
    if (rc == 0) {
        exact = path_sub(g, res, nonpreemptible ? res : NULL);
        if (g->pods_used > 0)
            g->pods_used--;
        if (g->summin)
            sp_used_add(t, res, -1);
        if (g->system)
            total_refresh(t);
        else if (g->deflt)
            def_used_changed(t);
    }
    pthread_mutex_unlock(&t->lock);
    if (!exact)
        kq_warn("quota tree: release larger than the used, clamped at 0 group=%s", group);
    return rc;
}

/* The one wording of every denial (as the ugm's; docs/events.md): "quota group G: cpu 2
 * used + 1 requested > 2 runtime (...); needs 1 more cpu", or, when the request alone is
 * over a max or min, that the pod can never fit. "runtime" is explained in plain words. */
static kq_denial_t overrun(char *reason, size_t len, const char *group, const char *kind, const char *d,
                           int64_t used, const char *used_by, int64_t r, int64_t limit, const char *what)
{
    char b1[64], b2[64], b3[64], b4[64];
    const char *why = strcmp(what, "runtime") == 0
                          ? " (runtime = what the group may use now: its min plus what it can borrow)"
                          : "";
    if (r > limit && strcmp(what, "runtime") != 0) {
        kq_errf(reason, len, "quota group %s: %s%s %s used%s + %s requested > %s %s; %s requested alone is over the "
               "%s: the pod can never fit", group, kind, d, fmtq(d, used, b1, sizeof b1), used_by,
               fmtq(d, r, b2, sizeof b2), fmtq(d, limit, b3, sizeof b3), what, b2, what);
        return KQ_DENIAL_NEVER_FITS;
    }
    /* used + r > limit here; computed without overflow */
    int64_t need = r > limit ? used + (r - limit) : used - (limit - r);
    kq_errf(reason, len, "quota group %s: %s%s %s used%s + %s requested > %s %s%s; needs %s more %s", group, kind, d,
           fmtq(d, used, b1, sizeof b1), used_by, fmtq(d, r, b2, sizeof b2), fmtq(d, limit, b3, sizeof b3), what,
           why, fmtq(d, need, b4, sizeof b4), d);
    return *why != '\0' ? KQ_DENIAL_OVER_RUNTIME : KQ_DENIAL_OVER_LIMIT;
}

/* less: `used` minus what `a` and `b` (may be NULL) hold of d, at least 0. */
static int64_t sp_less(int64_t used, const kq_resource_t *a, const kq_resource_t *b, const char *d)
{
    const kq_resource_t *v[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        int64_t x = v[k] != NULL ? rget(v[k], d, NULL) : 0;
        used = x >= used ? 0 : used - x;
    }
    return used;
}

/* One resource d of cmp2: used + r > limit? Denies with the one wording. */
static int sp_cmp(const struct group *g, const char *d, int64_t used, const char *used_by, int64_t r, int64_t lim,
                  const char *what, char *reason, size_t len, kq_denial_t *dk)
{
    if ((u128)used + (u128)r <= (u128)lim)
        return 0;
    kq_denial_set(dk, overrun(reason, len, g->name, "", d, used, used_by, r, lim, what));
    return KQ_EDENIED;
}

/* CapacityScheduling's PreFilter for a sum_of_mins group g (pkg/capacityscheduling
 * capacity_scheduling.go PreFilter; elasticquota.go usedOverMaxWith,
 * aggregatedUsedOverMinWith): first its max, then the sum rule, with cmp2's handling of
 * names a list does not name:
 *   max: a group without a max is unlimited; with one, a field it does not name is 0 (a
 *        max of memory only admits no cpu), a scalar it does not name is unlimited. The
 *        fields are compared even when the pod requests none of them (a group already
 *        over its max admits nothing); scalars where the pod's request names them.
 *   sum: what all sum_of_mins groups use plus req, within the sum of their mins, for the
 *        fields and for every scalar that the sum of used or req names; a name no min
 *        names has a sum of mins of 0 (a group without a min adds 0).
 * victims (own group) lower g's used and the sum; others (other sum_of_mins groups) only
 * the sum. */
static int sp_prefilter_locked(const kq_qtree_t *t, const struct group *g, const kq_resource_t *req,
                               const kq_resource_t *victims, const kq_resource_t *others, char *reason, size_t len,
                               kq_denial_t *dk)
{
    int rc;
    for (size_t k = 0; k < sizeof(t->spf) / sizeof(t->spf[0]); k++) {
        const char *d = t->spf[k];
        if (d == NULL || !g->has_max)
            continue;
        int64_t lim = rget(&g->max, d, NULL);
        if ((rc = sp_cmp(g, d, sp_less(rget(&g->used, d, NULL), victims, NULL, d), "", rget(req, d, NULL), lim,
                         "max", reason, len, dk)) != 0)
            return rc;
    }
    for (uint32_t i = 0; i < req->n; i++) {
        const char *d = KQ_RES_E(req)[i].name;
        bool has;
        int64_t lim = rget(&g->max, d, &has);
        if (sp_kind(d) != SP_SCALAR || !g->has_max || !has)
            continue;
        if ((rc = sp_cmp(g, d, sp_less(rget(&g->used, d, NULL), victims, NULL, d), "", KQ_RES_E(req)[i].value, lim,
                         "max", reason, len, dk)) != 0)
            return rc;
    }
    const char *by = " by all scheduler-plugins quotas";
    for (size_t k = 0; k < sizeof(t->spf) / sizeof(t->spf[0]); k++) {
        const char *d = t->spf[k];
        if (d != NULL && (rc = sp_cmp(g, d, sp_less(rget(&t->sp_used, d, NULL), victims, others, d), by,
                                      rget(req, d, NULL), rget(&t->sp_min, d, NULL), "sum of their mins", reason,
                                      len, dk)) != 0)
            return rc;
    }
    const kq_resource_t *sides[2] = {req, &t->sp_used};
    for (int s = 0; s < 2; s++)
        for (uint32_t i = 0; i < sides[s]->n; i++) {
            const char *d = KQ_RES_E(sides[s])[i].name;
            bool in_req;
            int64_t r = rget(req, d, &in_req);
            if (sp_kind(d) != SP_SCALAR || (s == 1 && in_req))
                continue;
            if ((rc = sp_cmp(g, d, sp_less(rget(&t->sp_used, d, NULL), victims, others, d), by, r,
                             rget(&t->sp_min, d, NULL), "sum of their mins", reason, len, dk)) != 0)
                return rc;
        }
    return 0;
}

/* The admission rule, at g and every ancestor. */
static int check_locked(kq_qtree_t *t, const char *name, const kq_resource_t *req, const kq_resource_t *victims,
                        const kq_resource_t *others, bool np, char *reason, size_t len, kq_denial_t *dk)
{
    kq_denial_set(dk, KQ_DENIAL_NONE);
    struct group *g = find(t, name);
    if (g == NULL) {
        kq_errf(reason, len, "quota group %s does not exist", name != NULL && name_ok(name) ? name : "(invalid)");
        kq_denial_set(dk, KQ_DENIAL_GROUP_MISSING);
        return KQ_ENOENT;
    }
    if (g->system)
        return 0;
    if (g->is_parent) {
        kq_errf(reason, len, "quota group %s is a parent group; only leaf groups run pods", g->name);
        kq_denial_set(dk, KQ_DENIAL_GROUP_NOT_LEAF);
        return KQ_EDENIED;
    }
    for (struct group *x = g; x; x = x->parent) {
        for (uint32_t i = 0; i < req->n; i++) {
            const char *d = KQ_RES_E(req)[i].name;
            int64_t r = KQ_RES_E(req)[i].value;
            if (r == 0 || !governs(x, d))
                continue; /* a resource x's max does not name is not limited by x */
            /* victims of g lower every level; those of other scheduler-plugins groups
             * (first-level groups: their only common ancestor is the root) the ancestors */
            int64_t used = sp_less(rget(&x->used, d, NULL), victims, x != g ? others : NULL, d);
            u128 sum = (u128)used + (u128)r;
            bool has;
            int64_t rt = rget(&x->runtime, d, &has);
            /* the default group: only its max; a scheduler-plugins group: its max and the
             * sum of mins (below) */
            if (has && !x->deflt && !x->summin && sum > (u128)rt) {
                kq_denial_set(dk, overrun(reason, len, x->name, "", d, used, "", r, rt, "runtime"));
                return KQ_EDENIED;
            }
            int64_t mx = rget(&x->max, d, &has);
            if (has && !x->summin && sum > (u128)mx) {
                kq_denial_set(dk, overrun(reason, len, x->name, "", d, used, "", r, mx, "max"));
                return KQ_EDENIED;
            }
            if (np) {
                /* only where a min names the resource: a group without a min for it (the
                 * root before any node is known, a group with no guarantee) declares none */
                bool has_min;
                int64_t nu = rget(&x->used_np, d, NULL), m = rget(&x->smin, d, &has_min);
                if (has_min && (u128)nu + (u128)r > (u128)m) {
                    kq_denial_set(dk, overrun(reason, len, x->name, "non-preemptible ", d, nu, "", r, m, "min"));
                    return KQ_EDENIED;
                }
            }
        }
        /* scheduler-plugins: its max, then the sum of mins, then the ancestors */
        int rc;
        if (x == g && g->summin && (rc = sp_prefilter_locked(t, g, req, victims, others, reason, len, dk)) != 0)
            return rc;
    }
    return 0;
}

int kq_qtree_check(kq_qtree_t *t, const char *group, const kq_resource_t *req, bool nonpreemptible, char *reason,
                   size_t reasonlen, kq_denial_t *kind)
{
    pthread_mutex_lock(&t->lock);
    settle(t);
    int rc = check_locked(t, group, req, NULL, NULL, nonpreemptible, reason, reasonlen, kind);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kq_qtree_check_new(kq_qtree_t *t, const char *group, const kq_resource_t *req, bool nonpreemptible,
                       char *reason, size_t reasonlen, kq_denial_t *kind)
{
    struct group *g = NULL;
    pthread_mutex_lock(&t->lock);
    settle(t);
    /* errors (unknown, parent) and the system group: as kq_qtree_check */
    bool what_if = pod_group(t, group, &g) == 0 && !g->system && !kq_resource_is_zero(req);
    if (what_if && kq_resource_add(&g->request, req) != 0) {
        pthread_mutex_unlock(&t->lock);
        kq_errf(reason, reasonlen, "quota group %s: out of memory", group);
        return KQ_ENOMEM;
    }
    if (what_if) {
        fix_up(t, g);
        settle(t); /* the runtimes as they would be with the pod's request in */
    }
    int rc = check_locked(t, group, req, NULL, NULL, nonpreemptible, reason, reasonlen, kind);
    if (what_if) {
        (void)kq_resource_sub(&g->request, req); /* exact: added above */
        fix_up(t, g);
        settle(t); /* back to the runtimes every other reader sees */
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kq_qtree_check_preempt(kq_qtree_t *t, const char *group, const kq_resource_t *req,
                           const kq_resource_t *victims, bool nonpreemptible, char *reason, size_t reasonlen,
                           kq_denial_t *kind)
{
    return kq_qtree_check_across(t, group, req, victims, NULL, nonpreemptible, reason, reasonlen, kind);
}

int kq_qtree_check_across(kq_qtree_t *t, const char *group, const kq_resource_t *req, const kq_resource_t *victims,
                          const kq_resource_t *others, bool nonpreemptible, char *reason, size_t reasonlen,
                          kq_denial_t *kind)
{
    pthread_mutex_lock(&t->lock);
    settle(t);
    int rc = check_locked(t, group, req, victims, others, nonpreemptible, reason, reasonlen, kind);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kq_qtree_assume(kq_qtree_t *t, const char *group, const kq_resource_t *req, bool nonpreemptible, char *reason,
                    size_t reasonlen, kq_denial_t *kind)
{
    return kq_qtree_assume_preempt(t, group, req, NULL, nonpreemptible, reason, reasonlen, kind);
}

int kq_qtree_assume_preempt(kq_qtree_t *t, const char *group, const kq_resource_t *req,
                            const kq_resource_t *victims, bool nonpreemptible, char *reason, size_t reasonlen,
                            kq_denial_t *kind)
{
    return kq_qtree_assume_across(t, group, req, victims, NULL, nonpreemptible, reason, reasonlen, kind);
}

int kq_qtree_assume_across(kq_qtree_t *t, const char *group, const kq_resource_t *req, const kq_resource_t *victims,
                           const kq_resource_t *others, bool nonpreemptible, char *reason, size_t reasonlen,
                           kq_denial_t *kind)
{
    pthread_mutex_lock(&t->lock);
    settle(t);
    int rc = check_locked(t, group, req, victims, others, nonpreemptible, reason, reasonlen, kind);
    if (rc == 0) {
        rc = used_add_locked(t, find(t, group), req, nonpreemptible);
        if (rc != 0)
            kq_errf(reason, reasonlen, "quota group %s: used would overflow", group);
    }
    pthread_mutex_unlock(&t->lock);
    return rc;
}

bool kq_qtree_sp_over_min(kq_qtree_t *t, const char *group, const kq_resource_t *with, bool *sum_of_mins)
{
    pthread_mutex_lock(&t->lock);
    const struct group *g = find(t, group);
    bool sp = g != NULL && g->summin, over = false;
    /* elasticquota.go usedOverMin / usedOverMinWith: cmp2(with, used, min, 0) */
    for (size_t k = 0; sp && !over && k < sizeof(t->spf) / sizeof(t->spf[0]); k++) {
        const char *d = t->spf[k];
        if (d != NULL)
            over = (u128)rget(&g->used, d, NULL) + (u128)(with ? rget(with, d, NULL) : 0) >
                   (u128)rget(&g->min, d, NULL);
    }
    /* the scalars the left side (with, else used) names */
    const kq_resource_t *left = with != NULL ? with : (g != NULL ? &g->used : NULL);
    for (uint32_t i = 0; sp && !over && i < left->n; i++) {
        const char *d = KQ_RES_E(left)[i].name;
        if (sp_kind(d) == SP_SCALAR)
            over = (u128)rget(&g->used, d, NULL) + (u128)(with ? KQ_RES_E(with)[i].value : 0) >
                   (u128)rget(&g->min, d, NULL);
    }
    pthread_mutex_unlock(&t->lock);
    if (sum_of_mins != NULL)
        *sum_of_mins = sp;
    return over;
}

bool kq_qtree_lookup(kq_qtree_t *t, const char *group, bool *is_parent)
{
    if (group == NULL)
        return false;
    pthread_mutex_lock(&t->lock);
    struct group *g = find(t, group);
    bool parent = g != NULL && g->is_parent;
    pthread_mutex_unlock(&t->lock);
    if (is_parent != NULL)
        *is_parent = parent;
    return g != NULL;
}

/* The runtime a reader sees: the resources g's max names (all when it has none); for
 * the default group its max (it is bounded by its max alone). */
static int shown_runtime(const struct group *g, kq_resource_t *out)
{
    if (g->deflt)
        return rcopy(out, &g->max);
    if (rcopy(out, &g->runtime) != 0)
        return KQ_ENOMEM;
    if (!g->has_max)
        return 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < out->n; i++)
        if (governs(g, KQ_RES_E(out)[i].name))
            KQ_RES_E(out)[n++] = KQ_RES_E(out)[i];
    out->n = n;
    return 0;
}

int kq_qtree_runtime(kq_qtree_t *t, const char *group, kq_resource_t *out)
{
    pthread_mutex_lock(&t->lock);
    settle(t);
    struct group *g = find(t, group);
    int rc = g == NULL ? KQ_ENOENT : kq_resource_copy(out, &g->runtime);
    pthread_mutex_unlock(&t->lock);
    return rc;
}

int kq_qtree_info(kq_qtree_t *t, const char *group, kq_qgroup_info_t *out)
{
    pthread_mutex_lock(&t->lock);
    settle(t);
    struct group *g = find(t, group);
    int rc = g != NULL ? 0 : KQ_ENOENT;
    if (g != NULL) {
        memset(out, 0, sizeof *out);
        snprintf(out->name, sizeof out->name, "%s", g->name);
        snprintf(out->parent, sizeof out->parent, "%s", g->parent ? g->parent->name : "");
        out->is_parent = g->is_parent;
        out->allow_lent = g->allow_lent;
        out->system = g->system;
        out->depth = g->depth;
        out->n_children = g->nkids;
        out->pods = g->pods;
        out->pods_used = g->pods_used;
        const kq_resource_t *from[] = {&g->min, &g->smin, &g->max, &g->weight, &g->request,
                                       &g->used, &g->used_np, &g->runtime, &g->ask};
        kq_resource_t *to[] = {&out->min, &out->scaled_min, &out->max, &out->shared_weight, &out->request,
                               &out->used, &out->used_nonpreemptible, &out->runtime, &out->ask};
        for (size_t i = 0; i < sizeof from / sizeof from[0] && rc == 0; i++)
            rc = kq_resource_copy(to[i], from[i]);
        if (rc == 0)
            rc = shown_runtime(g, &out->limit);
    }
    pthread_mutex_unlock(&t->lock);
    if (rc != 0 && g != NULL)
        kq_qtree_info_free(out);
    return rc;
}

void kq_qtree_info_free(kq_qgroup_info_t *info)
{
    if (info == NULL)
        return;
    kq_resource_t *sets[] = {&info->min, &info->scaled_min, &info->max, &info->shared_weight, &info->request,
                             &info->ask, &info->used, &info->used_nonpreemptible, &info->runtime, &info->limit};
    for (size_t i = 0; i < sizeof sets / sizeof sets[0]; i++)
        kq_resource_free(sets[i]);
}

void kq_qtree_over_free(kq_qgroup_over_t *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++)
        kq_resource_free(&v[i].over);
    free(v);
}

static int over_cmp(const void *a, const void *b)
{
    return strcmp(((const kq_qgroup_over_t *)a)->name, ((const kq_qgroup_over_t *)b)->name);
}

int kq_qtree_over_runtime(kq_qtree_t *t, kq_qgroup_over_t **out, size_t *n)
{
    int rc = 0;
    kq_qgroup_over_t *v = NULL;
    size_t cnt = 0, cap = 0;
    pthread_mutex_lock(&t->lock);
    settle(t);
    struct group *g, *tmp;
    HASH_ITER(hh, t->by_name, g, tmp) {
        if (g->is_parent || g->system || g->deflt)
            continue; /* the default group is never reclaimed */
        kq_resource_t over = KQ_RESOURCE_EMPTY;
        for (uint32_t i = 0; i < g->used.n; i++) {
            const char *d = KQ_RES_E(&g->used)[i].name;
            if (!governs(g, d))
                continue;
            bool hr, hm;
            int64_t rt = rget(&g->runtime, d, &hr), mx = rget(&g->max, d, &hm);
            int64_t lim = INT64_MAX;
            if (hr)
                lim = rt;
            if (hm && mx < lim)
                lim = mx;
            if (KQ_RES_E(&g->used)[i].value > lim)
                (void)put(&over, d, KQ_RES_E(&g->used)[i].value - lim);
        }
        if (over.n == 0)
            continue;
        if (cnt == cap) {
            size_t nc = cap ? cap * 2 : 8;
            kq_qgroup_over_t *nv = realloc(v, nc * sizeof *nv);
            if (nv == NULL) {
                kq_resource_free(&over);
                rc = KQ_ENOMEM;
                break;
            }
            v = nv;
            cap = nc;
        }
        snprintf(v[cnt].name, sizeof v[cnt].name, "%s", g->name);
        v[cnt].over = over; /* moves: over is not used again */
        cnt++;
    }
    pthread_mutex_unlock(&t->lock);
    if (rc != 0) {
        kq_qtree_over_free(v, cnt);
        return rc;
    }
    if (cnt > 1)
        qsort(v, cnt, sizeof *v, over_cmp);
    *out = cnt > 0 ? v : NULL;
    if (cnt == 0)
        free(v);
    *n = cnt;
    return 0;
}

/* ===================================================================== JSON ==== */

static int jset(json_t *o, const char *k, json_t *v)
{
    return v != NULL && json_object_set_new(o, k, v) == 0 ? 0 : KQ_ENOMEM;
}

/* A sum over pods (request, used) without its zero entries: a name whose pods all went, or
 * moved to another group, leaves a 0 behind in the vector, which a daemon started afresh on
 * the same pods never had; shown pruned, both show the same (issue 38; the usage views prune
 * the same way). NULL on ENOMEM. */
static json_t *sum_json(const kq_resource_t *r)
{
    json_t *o = json_object();
    for (uint32_t i = 0; o != NULL && i < r->n; i++) {
        if (KQ_RES_E(r)[i].value == 0)
            continue;
        if (json_object_set_new(o, KQ_RES_E(r)[i].name, json_integer((json_int_t)KQ_RES_E(r)[i].value)) != 0) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

static json_t *group_json(const kq_qtree_t *t, const struct group *g)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    kq_resource_t w = KQ_RESOURCE_EMPTY, rt = KQ_RESOURCE_EMPTY;
    int rc = kq_resource_copy(&w, &g->weight);
    if (!g->system && g != t->root)
        for (uint32_t i = 0; i < t->root->runtime.n; i++) {
            const char *d = KQ_RES_E(&t->root->runtime)[i].name;
            (void)put(&w, d, weight_of(t, g, d, i));
        }
    json_t *kids = json_array();
    rc |= jset(o, "name", json_string(g->name));
    rc |= jset(o, "parent", g->parent ? json_string(g->parent->name) : json_null());
    rc |= jset(o, "isParent", json_boolean(g->is_parent));
    rc |= jset(o, "minResource", kq_resource_to_json(&g->min));
    rc |= jset(o, "scaledMinResource", kq_resource_to_json(&g->smin));
    rc |= jset(o, "maxResource", kq_resource_to_json(&g->max));
    rc |= jset(o, "sharedWeight", kq_resource_to_json(&w));
    rc |= jset(o, "allowLent", json_boolean(g->allow_lent));
    rc |= jset(o, "requestResource", sum_json(&g->request));
    rc |= jset(o, "allocatedResource", sum_json(&g->used));
    rc |= jset(o, "nonPreemptibleAllocated", sum_json(&g->used_np));
    rc |= shown_runtime(g, &rt);
    rc |= jset(o, "runtimeResource", kq_resource_to_json(&rt));
    kq_resource_free(&w);
    kq_resource_free(&rt);
    rc |= jset(o, "pods", json_integer(g->pods));
    if (kids != NULL)
        for (size_t i = 0; i < g->nkids; i++)
            if (json_array_append_new(kids, json_string(g->kid[i]->name)) != 0)
                rc = KQ_ENOMEM;
    rc |= jset(o, "children", kids);
    if (rc != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static int tree_json(const kq_qtree_t *t, const struct group *g, json_t *arr)
{
    if (json_array_append_new(arr, group_json(t, g)) != 0)
        return KQ_ENOMEM;
    for (size_t i = 0; i < g->nkids; i++)
        if (tree_json(t, g->kid[i], arr) != 0)
            return KQ_ENOMEM;
    return 0;
}

json_t *kq_qtree_json(kq_qtree_t *t)
{
    json_t *o = json_object(), *arr = json_array();
    pthread_mutex_lock(&t->lock);
    settle(t);
    int rc = (o && arr) ? 0 : KQ_ENOMEM;
    if (rc == 0)
        rc = tree_json(t, t->root, arr);
    if (rc == 0 && json_array_append_new(arr, group_json(t, t->sys)) != 0)
        rc = KQ_ENOMEM;
    if (rc == 0) {
        rc = jset(o, "clusterAllocatable", kq_resource_to_json(&t->alloc));
        rc |= jset(o, "clusterTotal", kq_resource_to_json(&t->root->runtime));
    }
    pthread_mutex_unlock(&t->lock);
    if (rc == 0 && jset(o, "groups", arr) == 0)
        return o;
    if (rc == 0) /* jset consumed arr */
        arr = NULL;
    json_decref(arr);
    json_decref(o);
    return NULL;
}
