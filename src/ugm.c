/* User group manager: usage per user, group and queue, and enforcement of the user and
 * group limits and queue maxima of the queue configuration (YuniKorn's "user based
 * resource usage tracking" and "user based quota enforcement").
 *
 * Trackers. A user tracker and a group tracker each hold a sparse queue tree (root holds
 * the total) whose nodes carry the used resources of the subtree and a map application ->
 * allocations in the subtree; an application is running at a node while it has an
 * allocation under it. The user tracker's root map is also the per-(user, application)
 * allocation count and remembers the application's group (or none), chosen at its first
 * allocation and kept until its last one is released. A group tracker also counts, per
 * user, that user's applications in the group. The manager's queue tree is the same
 * structure over everybody (the queue view's allocatedResource and runningApps) plus
 * pending resources. Nodes are created on first use and pruned when empty; trackers are
 * removed when empty and unused.
 *
 * Limits. kq_ugm_set_config builds, off-lock, one table entry per configured queue path:
 * named user limits, the "*" user limit, named group limits (with their order in the
 * file), the "*" group limit, and the queue's resources.max and maxapplications. The table
 * is reference counted and swapped under the manager lock; an operation uses the table
 * that was current when it started. Limits are never stored in trackers, so a removed
 * limit is gone and a new one applies from the next operation. A tracked queue path that
 * the configuration does not define has no limits. At one queue, the limit of user U is
 * the limit naming U, else the "*" user limit; the limit of group G is the limit naming
 * G, else the "*" group limit, applied to each group on its own (YuniKorn instead counts
 * every wildcard-matched application in one group called "*"; here an application
 * matched by a "*" group limit is tracked against the user's first group, as the issue
 * asks).
 *
 * DESIGN (threads and locks). Locks, in the only order they are taken:
 *   m->lock (manager) -> tracker lock of a user -> tracker lock of a group -> m->qlock.
 * m->lock guards the user and group hash tables, every tracker's refs, and the current
 * limit table pointer and its refs; it is held only for hash lookups and counters, never
 * while waiting for a tracker lock except in the cleanup step (manager -> tracker is the
 * documented order and nobody waits for m->lock while holding a tracker lock). A tracker
 * lock guards the tracker's tree and maps; m->qlock guards the queue tree. A check and
 * its commit happen while the user, group and queue locks are all held, so they are one
 * step (no thread can see or change a half-committed increase). m->qlock is the one lock
 * every increase and decrease takes (the queue tree is shared by everybody); it is held
 * for O(depth) work, and by the queue view while it renders (O(queues)).
 *
 * Lifetime. tracker->refs counts the operations and views that hold the tracker (a pin,
 * taken under m->lock) plus, for a group, the user applications whose group it is (the
 * pin of the increase that started the application is handed over to the application
 * entry, and handed back to the decrease that ends it). A tracker is removed only under
 * m->lock, when refs is 0 and its tree and user map are empty, so a tracker being removed
 * for emptiness can never receive a new usage: whoever wants to use it must first pin it
 * under m->lock, and then it is not removed. A group reached through an application entry
 * is alive because that entry holds a reference, and the entry cannot go away while the
 * user tracker's lock is held.
 *
 * A check pins only trackers that already exist and creates nothing.
 *
 * Cost. An increase, check or decrease does a constant number of hash lookups per level
 * of the queue path (limit table, tree children, application maps), one per group of the
 * user per level for group selection, and one each in the user and group tables; nothing
 * scans users, groups or applications. Only the views walk everything.
 *
 * Allocation failures: trees and maps are allocated before anything is changed, so an
 * increase that fails with KQ_ENOMEM changes nothing. uthash's own bucket growth aborts
 * on out-of-memory (uthash_fatal), as everywhere in kubequota.
 */
#include "kubequota/ugm.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Most hash tables here are tiny (an application map per tree node, a node's children):
 * start them with 4 buckets instead of uthash's 32 (uthash still doubles them when
 * chains grow). This saves about 450 bytes per table; see BENCHMARKS.md. */
#include <uthash.h>
#undef HASH_INITIAL_NUM_BUCKETS
#undef HASH_INITIAL_NUM_BUCKETS_LOG2
#define HASH_INITIAL_NUM_BUCKETS 4U
#define HASH_INITIAL_NUM_BUCKETS_LOG2 2U

#include "kubequota/log.h"

/* ------------------------------------------------------------------------------------ */
/* Types                                                                                */
/* ------------------------------------------------------------------------------------ */

struct tracker;

/* A counted key: application -> allocations, or user -> applications. */
typedef struct cnt {
    UT_hash_handle hh;
    uint64_t n;             /* in the subtree */
    uint64_t own;           /* application entries: counted at exactly this queue */
    struct tracker *group; /* user tree root entries: the application's group, or NULL */
    size_t len;
    char key[];
} cnt_t;

typedef struct node {
    UT_hash_handle hh;      /* in the parent's children */
    struct node *parent;
    struct node *children;
    cnt_t *apps;            /* application -> allocations in this subtree */
    kq_resource_t used;     /* of the subtree */
    kq_resource_t *pending; /* queue tree only, allocated on first use; NULL = none */
    const char *name;       /* points into path */
    size_t name_len;
    size_t path_len;
    char path[];            /* full path, NUL-terminated */
} node_t;

typedef struct tracker {
    UT_hash_handle hh;      /* in m->users or m->groups */
    pthread_mutex_t lock;
    int refs;               /* m->lock */
    node_t *root;           /* lock */
    cnt_t *users;           /* groups: user -> that user's applications in the group; lock */
    size_t name_len;
    char name[];
} tracker_t;

typedef struct named_limit {
    UT_hash_handle hh;
    const char *name;       /* borrowed from the configuration */
    const kq_limit_conf_t *lim;
    unsigned order;         /* position in the queue's limits, for group selection */
} named_limit_t;

typedef struct level {
    UT_hash_handle hh;
    const char *path;       /* borrowed from the configuration */
    size_t path_len;
    const kq_queue_conf_t *q;
    named_limit_t *users, *groups;
    const kq_limit_conf_t *user_any, *group_any;
} level_t;

typedef struct limits {
    int refs;               /* m->lock */
    kq_config_t *cfg;       /* strong reference: everything above borrows from it */
    const kq_partition_conf_t *part;
    level_t *levels;
    size_t n_levels, n_limits;
} limits_t;

struct kq_ugm {
    pthread_mutex_t lock;
    char *partition;
    tracker_t *users, *groups;
    limits_t *limits;
    pthread_mutex_t qlock;
    node_t *qroot;
};

typedef struct qpath {
    const char *s;          /* buf */
    size_t len;
    unsigned n;
    size_t end[KQ_UGM_MAX_DEPTH]; /* level i is s[0 .. end[i]) */
    char buf[KQ_UGM_PATH_MAX + 1];
} qpath_t;

static const kq_resource_t empty_res = {.n = 0};

/* ------------------------------------------------------------------------------------ */
/* Small helpers                                                                        */
/* ------------------------------------------------------------------------------------ */

static void mutex_lock(pthread_mutex_t *mu)
{
    int rc = pthread_mutex_lock(mu);
    assert(rc == 0);
    (void)rc;
}

static void mutex_unlock(pthread_mutex_t *mu)
{
    int rc = pthread_mutex_unlock(mu);
    assert(rc == 0);
    (void)rc;
}

/* r += b where the caller has already proven that it cannot fail. */
static void res_add_checked(kq_resource_t *r, const kq_resource_t *b)
{
    int rc = kq_resource_add(r, b);
    assert(rc == 0);
    (void)rc;
}

/* r -= b clamped at 0, then drops the entries that are 0 (the view shows what is used).
 * Returns true when nothing had to be clamped. */
static bool res_sub(kq_resource_t *r, const kq_resource_t *b)
{
    bool exact = kq_resource_sub(r, b);
    uint32_t j = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (r->e[i].value != 0)
            r->e[j++] = r->e[i];
    r->n = j;
    return exact;
}

static int parse_path(const char *s, qpath_t *p)
{
    if (s == NULL)
        return KQ_EINVAL;
    size_t len = strnlen(s, KQ_UGM_PATH_MAX + 1);
    if (len == 0 || len > KQ_UGM_PATH_MAX)
        return KQ_EINVAL;
    /* Queue names are case-insensitive and the configuration stores them lowercase. */
    for (size_t i = 0; i < len; i++)
        p->buf[i] = (s[i] >= 'A' && s[i] <= 'Z') ? (char)(s[i] - 'A' + 'a') : s[i];
    p->buf[len] = '\0';
    s = p->s = p->buf;
    p->len = len;
    p->n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != '.')
            continue;
        if (i == start || p->n == KQ_UGM_MAX_DEPTH)
            return KQ_EINVAL;
        p->end[p->n++] = i;
        start = i + 1;
    }
    if (p->end[0] != 4 || memcmp(s, "root", 4) != 0)
        return KQ_EINVAL;
    return 0;
}

static size_t seg_start(const qpath_t *p, unsigned i)
{
    return i == 0 ? 0 : p->end[i - 1] + 1;
}

static bool user_valid(const kq_user_t *user)
{
    if (user == NULL || user->name == NULL || user->name[0] == '\0')
        return false;
    return user->n_groups == 0 || user->groups != NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Counted keys and tree nodes                                                          */
/* ------------------------------------------------------------------------------------ */

static cnt_t *cnt_new(const char *key, size_t len)
{
    cnt_t *c = calloc(1, sizeof(*c) + len + 1);
    if (c == NULL)
        return NULL;
    memcpy(c->key, key, len);
    c->len = len;
    return c;
}

static cnt_t *cnt_find(cnt_t *head, const char *key, size_t len)
{
    cnt_t *c = NULL;
    HASH_FIND(hh, head, key, len, c);
    return c;
}

static void cnt_free_all(cnt_t **head)
{
    cnt_t *c, *tmp;
    HASH_ITER(hh, *head, c, tmp) {
        HASH_DEL(*head, c);
        free(c);
    }
}

static node_t *node_new(node_t *parent, const qpath_t *p, unsigned i)
{
    size_t plen = p->end[i];
    node_t *n = calloc(1, sizeof(*n) + plen + 1);
    if (n == NULL)
        return NULL;
    memcpy(n->path, p->s, plen);
    n->path[plen] = '\0';
    n->path_len = plen;
    n->name = n->path + seg_start(p, i);
    n->name_len = plen - seg_start(p, i);
    n->parent = parent;
    return n;
}

static void node_free_tree(node_t *n)
{
    if (n == NULL)
        return;
    node_t *c, *tmp;
    HASH_ITER(hh, n->children, c, tmp) {
        HASH_DEL(n->children, c);
        node_free_tree(c);
    }
    cnt_free_all(&n->apps);
    free(n->pending);
    free(n);
}

static bool node_empty(const node_t *n)
{
    return n->apps == NULL && n->children == NULL && (n->pending == NULL || kq_resource_is_zero(n->pending));
}

/* Fills out[0 .. p->n) with the nodes on the path; NULL from the first missing one. */
static void tree_walk(node_t *root, const qpath_t *p, node_t **out)
{
    node_t *n = root;
    for (unsigned i = 0; i < p->n; i++) {
        if (n != NULL && i > 0) {
            node_t *c = NULL;
            size_t st = seg_start(p, i);
            HASH_FIND(hh, n->children, p->s + st, p->end[i] - st, c);
            n = c;
        }
        out[i] = n;
    }
}

/* Removes empty nodes from n up towards the root. */
static void tree_prune(node_t **rootp, node_t *n)
{
    while (n != NULL && node_empty(n)) {
        node_t *parent = n->parent;
        if (!kq_resource_is_zero(&n->used))
            kq_warn("ugm: usage left without allocations, dropped queue=%s", n->path);
        if (parent != NULL)
            HASH_DEL(parent->children, n);
        else
            *rootp = NULL;
        free(n->pending);
        free(n);
        n = parent;
    }
}

/* Makes sure every node on the path exists. On KQ_ENOMEM the nodes it created are
 * removed again and the tree is as before. */
static int tree_ensure(node_t **rootp, const qpath_t *p, node_t **out)
{
    node_t *n = *rootp;
    if (n == NULL) {
        n = node_new(NULL, p, 0);
        if (n == NULL)
            return KQ_ENOMEM;
        *rootp = n;
    }
    out[0] = n;
    for (unsigned i = 1; i < p->n; i++) {
        node_t *c = NULL;
        size_t st = seg_start(p, i);
        HASH_FIND(hh, n->children, p->s + st, p->end[i] - st, c);
        if (c == NULL) {
            c = node_new(n, p, i);
            if (c == NULL) {
                tree_prune(rootp, n);
                return KQ_ENOMEM;
            }
            HASH_ADD_KEYPTR(hh, n->children, c->name, c->name_len, c);
        }
        out[i] = n = c;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Trackers (callers hold m->lock)                                                      */
/* ------------------------------------------------------------------------------------ */

static tracker_t *tracker_find(tracker_t *head, const char *name)
{
    tracker_t *t = NULL;
    HASH_FIND(hh, head, name, strlen(name), t);
    return t;
}

static void tracker_destroy(tracker_t *t)
{
    node_free_tree(t->root);
    cnt_free_all(&t->users);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static tracker_t *tracker_get(tracker_t **head, const char *name, const char *kind)
{
    tracker_t *t = tracker_find(*head, name);
    if (t != NULL)
        return t;
    size_t len = strlen(name);
    t = calloc(1, sizeof(*t) + len + 1);
    if (t == NULL)
        return NULL;
    if (pthread_mutex_init(&t->lock, NULL) != 0) {
        free(t);
        return NULL;
    }
    memcpy(t->name, name, len + 1);
    t->name_len = len;
    HASH_ADD_KEYPTR(hh, *head, t->name, t->name_len, t);
    kq_debug("ugm: tracker created %s=%s", kind, name);
    return t;
}

/* Drops one reference and removes the tracker if nobody uses it and it tracks nothing. */
static void tracker_release(tracker_t **head, tracker_t *t, const char *kind)
{
    assert(t->refs > 0);
    if (--t->refs > 0)
        return;
    mutex_lock(&t->lock);
    bool empty = t->root == NULL && t->users == NULL;
    mutex_unlock(&t->lock);
    if (!empty)
        return;
    HASH_DEL(*head, t);
    kq_debug("ugm: tracker removed %s=%s", kind, t->name);
    tracker_destroy(t);
}

/* ------------------------------------------------------------------------------------ */
/* Limit tables                                                                         */
/* ------------------------------------------------------------------------------------ */

static void named_free_all(named_limit_t **head)
{
    named_limit_t *e, *tmp;
    HASH_ITER(hh, *head, e, tmp) {
        HASH_DEL(*head, e);
        free(e);
    }
}

static void limits_free(limits_t *L)
{
    if (L == NULL)
        return;
    level_t *lv, *tmp;
    HASH_ITER(hh, L->levels, lv, tmp) {
        HASH_DEL(L->levels, lv);
        named_free_all(&lv->users);
        named_free_all(&lv->groups);
        free(lv);
    }
    kq_config_unref(L->cfg);
    free(L);
}

/* Adds name -> lim unless the name already has a limit at this queue (first one wins). */
static int named_add(named_limit_t **head, const char *name, const kq_limit_conf_t *lim,
                     unsigned order)
{
    named_limit_t *e = NULL;
    HASH_FIND(hh, *head, name, strlen(name), e);
    if (e != NULL)
        return 0;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return KQ_ENOMEM;
    e->name = name;
    e->lim = lim;
    e->order = order;
    HASH_ADD_KEYPTR(hh, *head, e->name, strlen(e->name), e);
    return 0;
}

static int limits_add_queue(limits_t *L, const kq_queue_conf_t *q, unsigned depth)
{
    if (depth >= KQ_UGM_MAX_DEPTH)
        return 0; /* deeper queues cannot be tracked (their paths are rejected) */
    level_t *lv = calloc(1, sizeof(*lv));
    if (lv == NULL)
        return KQ_ENOMEM;
    lv->path = q->path;
    lv->path_len = strlen(q->path);
    lv->q = q;
    HASH_ADD_KEYPTR(hh, L->levels, lv->path, lv->path_len, lv);
    L->n_levels++;
    unsigned order = 0;
    for (size_t i = 0; i < q->n_limits; i++) {
        const kq_limit_conf_t *lim = &q->limits[i];
        L->n_limits++;
        for (size_t j = 0; j < lim->n_users; j++) {
            const char *u = lim->users[j];
            if (u == NULL || u[0] == '\0')
                continue;
            if (strcmp(u, "*") == 0) {
                if (lv->user_any == NULL)
                    lv->user_any = lim;
            } else if (named_add(&lv->users, u, lim, 0) != 0) {
                return KQ_ENOMEM;
            }
        }
        for (size_t j = 0; j < lim->n_groups; j++) {
            const char *g = lim->groups[j];
            if (g == NULL || g[0] == '\0')
                continue;
            if (strcmp(g, "*") == 0) {
                if (lv->group_any == NULL)
                    lv->group_any = lim;
            } else if (named_add(&lv->groups, g, lim, order++) != 0) {
                return KQ_ENOMEM;
            }
        }
    }
    for (size_t i = 0; i < q->n_children; i++) {
        int rc = limits_add_queue(L, q->children[i], depth + 1);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static const level_t *level_find(const limits_t *L, const char *path, size_t len)
{
    if (L == NULL)
        return NULL;
    level_t *lv = NULL;
    HASH_FIND(hh, L->levels, path, len, lv);
    return lv;
}

static const kq_limit_conf_t *limit_for(const level_t *lv, bool group, const char *who,
                                        bool *wildcard)
{
    *wildcard = false;
    if (lv == NULL || who == NULL)
        return NULL;
    named_limit_t *e = NULL;
    HASH_FIND(hh, group ? lv->groups : lv->users, who, strlen(who), e);
    if (e != NULL)
        return e->lim;
    const kq_limit_conf_t *any = group ? lv->group_any : lv->user_any;
    *wildcard = any != NULL;
    return any;
}

/* The group an application of `user` starting in path is tracked against: walking from
 * the leaf up, the first queue with a group limit the user matches decides; among the
 * named groups there, the one listed first in the configuration wins; a "*" group limit
 * matches the user's first group. NULL: no group. */
static const char *choose_group(const limits_t *L, const qpath_t *p, const kq_user_t *user)
{
    if (L == NULL || user->n_groups == 0)
        return NULL;
    const char *first = NULL;
    for (size_t j = 0; j < user->n_groups && first == NULL; j++)
        if (user->groups[j] != NULL && user->groups[j][0] != '\0')
            first = user->groups[j];
    if (first == NULL)
        return NULL;
    for (unsigned i = p->n; i-- > 0;) {
        const level_t *lv = level_find(L, p->s, p->end[i]);
        if (lv == NULL)
            continue;
        const named_limit_t *best = NULL;
        const char *best_name = NULL;
        if (lv->groups != NULL) {
            for (size_t j = 0; j < user->n_groups; j++) {
                const char *g = user->groups[j];
                if (g == NULL || g[0] == '\0')
                    continue;
                named_limit_t *e = NULL;
                HASH_FIND(hh, lv->groups, g, strlen(g), e);
                if (e != NULL && (best == NULL || e->order < best->order)) {
                    best = e;
                    best_name = g;
                }
            }
        }
        if (best != NULL)
            return best_name;
        if (lv->group_any != NULL)
            return first;
    }
    return NULL;
}

/* Takes a reference to the current table (m->lock held). */
static limits_t *limits_get(kq_ugm_t *m)
{
    limits_t *L = m->limits;
    if (L != NULL)
        L->refs++;
    return L;
}

/* Drops a reference (m->lock held); returns the table to free after unlocking, if any. */
static limits_t *limits_put(limits_t *L)
{
    if (L != NULL && --L->refs == 0)
        return L;
    return NULL;
}

/* ------------------------------------------------------------------------------------ */
/* Check and commit                                                                     */
/* ------------------------------------------------------------------------------------ */

enum mode { MODE_CHECK, MODE_ENFORCE, MODE_UNCHECKED };

enum { T_USER, T_GROUP, T_QUEUE, T_COUNT };

typedef struct op {
    kq_ugm_t *m;
    qpath_t path;
    const char *app;
    size_t app_len;
    const kq_user_t *user;
    const kq_resource_t *req;
    limits_t *lim;
    tracker_t *u;          /* pinned; NULL in a check for an unknown user */
    tracker_t *gc;         /* pinned candidate group tracker for a new application */
    tracker_t *g;          /* the application's group tracker (gc, or the existing one) */
    const char *gname;     /* the application's group name, or NULL */
    bool new_app;          /* the application has no allocation for this user yet */
    node_t *nodes[T_COUNT][KQ_UGM_MAX_DEPTH];
} op_t;

static void limit_label(const kq_limit_conf_t *lim, bool group, bool wildcard, char *buf,
                        size_t len)
{
    const char *star = wildcard ? (group ? " (group *)" : " (user *)") : "";
    if (lim->description != NULL && lim->description[0] != '\0')
        snprintf(buf, len, "limit \"%s\"%s", lim->description, star);
    else
        snprintf(buf, len, "limit at line %d%s", lim->line, star);
}

/* "cpu 1500m used + 1 requested > 2 max" for the first resource that does not fit. */
static void overrun_text(const char *name, const kq_resource_t *used, const kq_resource_t *req,
                         const kq_resource_t *max, char *buf, size_t len)
{
    char u[64], r[64], x[64];
    kq_quantity_format(name, kq_resource_get(used, name, NULL), u, sizeof(u));
    kq_quantity_format(name, kq_resource_get(req, name, NULL), r, sizeof(r));
    kq_quantity_format(name, kq_resource_get(max, name, NULL), x, sizeof(x));
    snprintf(buf, len, "%s %s used + %s requested > %s max", name, u, r, x);
}

static void set_reason(char *reason, size_t rlen, const char *fmt, ...) KQ_PRINTF(3, 4);
static void set_reason(char *reason, size_t rlen, const char *fmt, ...)
{
    if (reason == NULL || rlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, rlen, fmt, ap);
    va_end(ap);
}

/* Checks one user or group limit at level i. */
static int check_limit(const op_t *op, unsigned i, bool group, const char *who,
                       const node_t *n, char *reason, size_t rlen)
{
    const level_t *lv = level_find(op->lim, op->path.s, op->path.end[i]);
    bool wildcard;
    const kq_limit_conf_t *lim = limit_for(lv, group, who, &wildcard);
    if (lim == NULL)
        return 0;
    const kq_resource_t *used = n != NULL ? &n->used : &empty_res;
    size_t running = n != NULL ? HASH_COUNT(n->apps) : 0;
    bool new_here = n == NULL || cnt_find(n->apps, op->app, op->app_len) == NULL;
    char label[256], what[256];
    const char *failed = NULL;
    if (lim->max_applications != 0 && new_here && running + 1 > lim->max_applications) {
        limit_label(lim, group, wildcard, label, sizeof(label));
        set_reason(reason, rlen, "%s %s in queue %.*s: %s exceeded: applications %zu running + 1 new > %" PRIu64 " max",
             group ? "group" : "user", who, (int)op->path.end[i], op->path.s, label, running,
             lim->max_applications);
        return KQ_EDENIED;
    }
    if (lim->has_max_resources && !kq_resource_fits(used, op->req, &lim->max_resources, &failed)) {
        limit_label(lim, group, wildcard, label, sizeof(label));
        overrun_text(failed, used, op->req, &lim->max_resources, what, sizeof(what));
        set_reason(reason, rlen, "%s %s in queue %.*s: %s exceeded: %s", group ? "group" : "user", who,
             (int)op->path.end[i], op->path.s, label, what);
        return KQ_EDENIED;
    }
    return 0;
}

static int check_queue(const op_t *op, unsigned i, const node_t *n, char *reason, size_t rlen)
{
    const level_t *lv = level_find(op->lim, op->path.s, op->path.end[i]);
    if (lv == NULL)
        return 0;
    const kq_queue_conf_t *q = lv->q;
    const kq_resource_t *used = n != NULL ? &n->used : &empty_res;
    size_t running = n != NULL ? HASH_COUNT(n->apps) : 0;
    bool new_here = n == NULL || cnt_find(n->apps, op->app, op->app_len) == NULL;
    const char *failed = NULL;
    char what[256];
    if (q->max_applications != 0 && new_here && running + 1 > q->max_applications) {
        set_reason(reason, rlen, "queue %s: maxapplications exceeded: applications %zu running + 1 new > %" PRIu64 " max",
             q->path, running, q->max_applications);
        return KQ_EDENIED;
    }
    if (q->has_max && !kq_resource_fits(used, op->req, &q->max, &failed)) {
        overrun_text(failed, used, op->req, &q->max, what, sizeof(what));
        set_reason(reason, rlen, "queue %s: resources.max exceeded: %s", q->path, what);
        return KQ_EDENIED;
    }
    return 0;
}

/* Overflow and (unless unchecked) limits, leaf to root; changes nothing. */
static int check_all(const op_t *op, bool enforce, char *reason, size_t rlen)
{
    for (unsigned i = op->path.n; i-- > 0;) {
        for (int t = 0; t < T_COUNT; t++) {
            if (t == T_GROUP && op->gname == NULL)
                continue;
            const node_t *n = op->nodes[t][i];
            kq_resource_t sum = n != NULL ? n->used : empty_res;
            int rc = kq_resource_add(&sum, op->req);
            if (rc != 0) {
                set_reason(reason, rlen, "usage in queue %.*s would overflow", (int)op->path.end[i], op->path.s);
                return rc;
            }
        }
        if (!enforce)
            continue;
        int rc = check_limit(op, i, false, op->user->name, op->nodes[T_USER][i], reason, rlen);
        if (rc == 0 && op->gname != NULL)
            rc = check_limit(op, i, true, op->gname, op->nodes[T_GROUP][i], reason, rlen);
        if (rc == 0)
            rc = check_queue(op, i, op->nodes[T_QUEUE][i], reason, rlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Commits the increase: allocates first (KQ_ENOMEM leaves everything as it was), then
 * adds. Every lock of the operation is held. */
static int commit(op_t *op)
{
    node_t **roots[T_COUNT] = {&op->u->root, op->g != NULL ? &op->g->root : NULL, &op->m->qroot};
    cnt_t *fresh[T_COUNT][KQ_UGM_MAX_DEPTH];
    cnt_t *user_entry = NULL;
    int ensured = 0, rc = 0;
    memset(fresh, 0, sizeof(fresh));

    for (; ensured < T_COUNT; ensured++) {
        if (roots[ensured] == NULL)
            continue;
        rc = tree_ensure(roots[ensured], &op->path, op->nodes[ensured]);
        if (rc != 0)
            goto out;
    }
    for (int t = 0; t < T_COUNT; t++) {
        if (roots[t] == NULL)
            continue;
        for (unsigned i = 0; i < op->path.n; i++) {
            if (cnt_find(op->nodes[t][i]->apps, op->app, op->app_len) != NULL)
                continue;
            fresh[t][i] = cnt_new(op->app, op->app_len);
            if (fresh[t][i] == NULL) {
                rc = KQ_ENOMEM;
                goto out;
            }
        }
    }
    const char *uname = op->user->name;
    size_t ulen = strlen(uname);
    if (op->new_app && op->g != NULL && cnt_find(op->g->users, uname, ulen) == NULL) {
        user_entry = cnt_new(uname, ulen);
        if (user_entry == NULL) {
            rc = KQ_ENOMEM;
            goto out;
        }
    }

    /* Nothing below can fail. */
    for (int t = 0; t < T_COUNT; t++) {
        if (roots[t] == NULL)
            continue;
        for (unsigned i = 0; i < op->path.n; i++) {
            node_t *n = op->nodes[t][i];
            res_add_checked(&n->used, op->req);
            cnt_t *c = fresh[t][i];
            if (c != NULL) {
                HASH_ADD_KEYPTR(hh, n->apps, c->key, c->len, c);
                fresh[t][i] = NULL;
            } else {
                c = cnt_find(n->apps, op->app, op->app_len);
            }
            c->n++;
            if (i == op->path.n - 1)
                c->own++;
            if (t == T_USER && i == 0 && c->n == 1)
                c->group = op->g; /* the pin on g becomes the application's reference */
        }
    }
    if (op->new_app && op->g != NULL) {
        cnt_t *c = cnt_find(op->g->users, uname, ulen);
        if (c == NULL) {
            c = user_entry;
            user_entry = NULL;
            HASH_ADD_KEYPTR(hh, op->g->users, c->key, c->len, c);
        }
        c->n++;
    }
    return 0;

out:
    free(user_entry);
    for (int t = 0; t < T_COUNT; t++)
        for (unsigned i = 0; i < KQ_UGM_MAX_DEPTH; i++)
            free(fresh[t][i]);
    for (int t = 0; t < ensured; t++)
        if (roots[t] != NULL)
            tree_prune(roots[t], op->nodes[t][op->path.n - 1]);
    return rc;
}

int kq_ugm_group_of(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user, char *out,
                    size_t outlen)
{
    if (out == NULL || outlen == 0)
        return KQ_EINVAL;
    out[0] = '\0';
    if (m == NULL || app_id == NULL || app_id[0] == '\0' || !user_valid(user))
        return KQ_EINVAL;
    qpath_t path;
    int rc = parse_path(queue_path, &path);
    if (rc != 0)
        return rc;
    /* Lock order: manager -> user (the user's lock only to read its application map). */
    mutex_lock(&m->lock);
    const char *g = NULL;
    bool fixed = false;
    tracker_t *u = tracker_find(m->users, user->name);
    if (u != NULL) {
        mutex_lock(&u->lock);
        cnt_t *entry = u->root != NULL ? cnt_find(u->root->apps, app_id, strlen(app_id)) : NULL;
        if (entry != NULL) {
            fixed = true;
            g = entry->group != NULL ? entry->group->name : NULL;
            if (g != NULL)
                snprintf(out, outlen, "%s", g);
        }
        pthread_mutex_unlock(&u->lock);
    }
    if (!fixed) {
        g = choose_group(m->limits, &path, user);
        if (g != NULL)
            snprintf(out, outlen, "%s", g);
    }
    pthread_mutex_unlock(&m->lock);
    return 0;
}

static int do_increase(kq_ugm_t *m, const char *queue_path, const char *app_id,
                       const kq_user_t *user, const kq_resource_t *req, enum mode mode,
                       char *reason, size_t rlen)
{
    if (reason != NULL && rlen > 0)
        reason[0] = '\0';
    if (m == NULL || app_id == NULL || app_id[0] == '\0' || !user_valid(user) || req == NULL)
        return KQ_EINVAL;
    op_t op;
    memset(&op, 0, sizeof(op));
    int rc = parse_path(queue_path, &op.path);
    if (rc != 0) {
        set_reason(reason, rlen, "invalid queue path");
        return rc;
    }
    op.m = m;
    op.app = app_id;
    op.app_len = strlen(app_id);
    op.user = user;
    op.req = req;

    /* Manager section: pin the user and the candidate group, take the limit table. */
    const char *cand;
    mutex_lock(&m->lock);
    op.lim = limits_get(m);
    cand = choose_group(op.lim, &op.path, user);
    if (mode == MODE_CHECK) {
        op.u = tracker_find(m->users, user->name);
        op.gc = cand != NULL ? tracker_find(m->groups, cand) : NULL;
    } else {
        op.u = tracker_get(&m->users, user->name, "user");
        op.gc = op.u != NULL && cand != NULL ? tracker_get(&m->groups, cand, "group") : NULL;
        if (op.u == NULL || (cand != NULL && op.gc == NULL)) {
            if (op.u != NULL) {
                op.u->refs++;
                tracker_release(&m->users, op.u, "user");
            }
            limits_t *dead = limits_put(op.lim);
            mutex_unlock(&m->lock);
            limits_free(dead);
            set_reason(reason, rlen, "out of memory");
            return KQ_ENOMEM;
        }
    }
    if (op.u != NULL)
        op.u->refs++;
    if (op.gc != NULL)
        op.gc->refs++;
    mutex_unlock(&m->lock);

    /* Tracker section: user -> group -> queue tree. */
    if (op.u != NULL)
        mutex_lock(&op.u->lock);
    cnt_t *entry = op.u != NULL && op.u->root != NULL ? cnt_find(op.u->root->apps, op.app, op.app_len) : NULL;
    if (entry != NULL) {
        op.g = entry->group;
        op.gname = op.g != NULL ? op.g->name : NULL;
    } else {
        op.new_app = true;
        op.g = op.gc;
        op.gname = cand;
    }
    if (op.g != NULL)
        mutex_lock(&op.g->lock);
    mutex_lock(&m->qlock);
    tree_walk(op.u != NULL ? op.u->root : NULL, &op.path, op.nodes[T_USER]);
    tree_walk(op.g != NULL ? op.g->root : NULL, &op.path, op.nodes[T_GROUP]);
    tree_walk(m->qroot, &op.path, op.nodes[T_QUEUE]);
    rc = check_all(&op, mode != MODE_UNCHECKED, reason, rlen);
    if (rc == 0 && mode != MODE_CHECK)
        rc = commit(&op);
    mutex_unlock(&m->qlock);
    if (op.g != NULL)
        mutex_unlock(&op.g->lock);
    if (op.u != NULL)
        mutex_unlock(&op.u->lock);

    bool handed_over = rc == 0 && mode != MODE_CHECK && op.new_app && op.g != NULL;
    if (rc == KQ_EDENIED)
        kq_debug("ugm: denied user=%s queue=%s app=%s reason=\"%s\"", user->name, queue_path, app_id,
                 reason != NULL ? reason : "");
    else if (rc == KQ_ENOMEM)
        set_reason(reason, rlen, "out of memory");

    /* Manager section: unpin, remove what became empty. */
    mutex_lock(&m->lock);
    if (op.gc != NULL && !handed_over)
        tracker_release(&m->groups, op.gc, "group");
    if (op.u != NULL)
        tracker_release(&m->users, op.u, "user");
    limits_t *dead = limits_put(op.lim);
    mutex_unlock(&m->lock);
    limits_free(dead);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Public API: lifecycle, configuration, tracking                                       */
/* ------------------------------------------------------------------------------------ */

kq_ugm_t *kq_ugm_new(const char *partition)
{
    if (partition == NULL)
        return NULL;
    kq_ugm_t *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return NULL;
    m->partition = strdup(partition);
    if (m->partition == NULL)
        goto fail_name;
    if (pthread_mutex_init(&m->lock, NULL) != 0)
        goto fail_lock;
    if (pthread_mutex_init(&m->qlock, NULL) != 0)
        goto fail_qlock;
    return m;

fail_qlock:
    pthread_mutex_destroy(&m->lock);
fail_lock:
    free(m->partition);
fail_name:
    free(m);
    return NULL;
}

void kq_ugm_free(kq_ugm_t *m)
{
    if (m == NULL)
        return;
    tracker_t *t, *tmp;
    HASH_ITER(hh, m->users, t, tmp) {
        HASH_DEL(m->users, t);
        tracker_destroy(t);
    }
    HASH_ITER(hh, m->groups, t, tmp) {
        HASH_DEL(m->groups, t);
        tracker_destroy(t);
    }
    node_free_tree(m->qroot);
    limits_free(m->limits);
    pthread_mutex_destroy(&m->qlock);
    pthread_mutex_destroy(&m->lock);
    free(m->partition);
    free(m);
}

int kq_ugm_set_config(kq_ugm_t *m, kq_config_t *cfg)
{
    if (m == NULL || cfg == NULL)
        return KQ_EINVAL;
    const kq_partition_conf_t *part = kq_config_partition(cfg, m->partition);
    if (part == NULL || part->root == NULL) {
        kq_warn("ugm: configuration has no partition=%s, limits unchanged", m->partition);
        return KQ_ENOENT;
    }
    limits_t *L = calloc(1, sizeof(*L));
    if (L == NULL)
        return KQ_ENOMEM;
    L->cfg = kq_config_ref(cfg);
    L->part = part;
    L->refs = 1;
    int rc = limits_add_queue(L, part->root, 0);
    if (rc != 0) {
        limits_free(L);
        return rc;
    }
    mutex_lock(&m->lock);
    limits_t *old = m->limits;
    m->limits = L;
    limits_t *dead = limits_put(old);
    mutex_unlock(&m->lock);
    limits_free(dead);
    kq_info("ugm: limits applied partition=%s queues=%zu limits=%zu", m->partition, L->n_levels,
            L->n_limits);
    return 0;
}

int kq_ugm_check(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                 const kq_resource_t *req, char *reason, size_t reason_len)
{
    return do_increase(m, queue_path, app_id, user, req, MODE_CHECK, reason, reason_len);
}

int kq_ugm_increase(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                    const kq_resource_t *req, char *reason, size_t reason_len)
{
    return do_increase(m, queue_path, app_id, user, req, MODE_ENFORCE, reason, reason_len);
}

int kq_ugm_add_unchecked(kq_ugm_t *m, const char *queue_path, const char *app_id,
                         const kq_user_t *user, const kq_resource_t *req)
{
    char reason[256];
    int rc = do_increase(m, queue_path, app_id, user, req, MODE_UNCHECKED, reason, sizeof(reason));
    if (rc != 0)
        kq_warn("ugm: unchecked add failed user=%s queue=%s app=%s error=\"%s\" reason=\"%s\"",
                user != NULL && user->name != NULL ? user->name : "", queue_path != NULL ? queue_path : "",
                app_id != NULL ? app_id : "", kq_strerror(rc), reason);
    return rc;
}

/* Takes one allocation of app out of every node on the path (all must exist). */
static bool tree_sub(node_t **nodes, unsigned depth, const char *app, size_t app_len,
                     const kq_resource_t *usage)
{
    bool exact = true;
    for (unsigned i = 0; i < depth; i++) {
        node_t *n = nodes[i];
        if (!res_sub(&n->used, usage))
            exact = false;
        cnt_t *c = cnt_find(n->apps, app, app_len);
        if (c != NULL && i == depth - 1 && c->own > 0)
            c->own--;
        if (c != NULL && --c->n == 0) {
            HASH_DEL(n->apps, c);
            free(c);
        }
    }
    return exact;
}

int kq_ugm_decrease(kq_ugm_t *m, const char *queue_path, const char *app_id, const char *user,
                    const kq_resource_t *usage)
{
    if (m == NULL || app_id == NULL || app_id[0] == '\0' || user == NULL || user[0] == '\0' ||
        usage == NULL)
        return KQ_EINVAL;
    qpath_t p;
    int rc = parse_path(queue_path, &p);
    if (rc != 0)
        return rc;
    size_t app_len = strlen(app_id);

    mutex_lock(&m->lock);
    tracker_t *u = tracker_find(m->users, user);
    if (u != NULL)
        u->refs++;
    mutex_unlock(&m->lock);
    if (u == NULL)
        return KQ_ENOENT;

    tracker_t *released_group = NULL;
    bool exact = true;
    node_t *un[KQ_UGM_MAX_DEPTH], *gn[KQ_UGM_MAX_DEPTH], *qn[KQ_UGM_MAX_DEPTH];
    mutex_lock(&u->lock);
    tree_walk(u->root, &p, un);
    cnt_t *here = un[p.n - 1] != NULL ? cnt_find(un[p.n - 1]->apps, app_id, app_len) : NULL;
    if (here == NULL || here->own == 0) { /* nothing counted at exactly this queue */
        mutex_unlock(&u->lock);
        rc = KQ_ENOENT;
        goto release;
    }
    cnt_t *entry = cnt_find(u->root->apps, app_id, app_len);
    assert(entry != NULL);
    tracker_t *g = entry->group;
    bool app_ends = entry->n == 1;
    if (g != NULL)
        mutex_lock(&g->lock);
    mutex_lock(&m->qlock);

    exact = tree_sub(un, p.n, app_id, app_len, usage);
    if (g != NULL) {
        tree_walk(g->root, &p, gn);
        if (gn[p.n - 1] != NULL) {
            tree_sub(gn, p.n, app_id, app_len, usage);
            tree_prune(&g->root, gn[p.n - 1]);
        } else {
            kq_error("ugm: group tracker out of step group=%s queue=%s app=%s", g->name, queue_path, app_id);
        }
        if (app_ends) {
            cnt_t *c = cnt_find(g->users, user, strlen(user));
            if (c != NULL && --c->n == 0) {
                HASH_DEL(g->users, c);
                free(c);
            }
            released_group = g; /* the application's reference comes back to us */
        }
    }
    tree_walk(m->qroot, &p, qn);
    if (qn[p.n - 1] != NULL) {
        tree_sub(qn, p.n, app_id, app_len, usage);
        tree_prune(&m->qroot, qn[p.n - 1]);
    } else {
        kq_error("ugm: queue tracker out of step queue=%s app=%s", queue_path, app_id);
    }
    tree_prune(&u->root, un[p.n - 1]);

    mutex_unlock(&m->qlock);
    if (g != NULL)
        mutex_unlock(&g->lock);
    mutex_unlock(&u->lock);
    if (!exact)
        kq_warn("ugm: decrease larger than the tracked usage, clamped at 0 user=%s queue=%s app=%s",
                user, queue_path, app_id);

release:
    mutex_lock(&m->lock);
    if (released_group != NULL)
        tracker_release(&m->groups, released_group, "group");
    tracker_release(&m->users, u, "user");
    mutex_unlock(&m->lock);
    return rc;
}

void kq_ugm_pending_add(kq_ugm_t *m, const char *queue_path, const kq_resource_t *req)
{
    qpath_t p;
    if (m == NULL || req == NULL || parse_path(queue_path, &p) != 0)
        return;
    node_t *qn[KQ_UGM_MAX_DEPTH];
    mutex_lock(&m->qlock);
    int rc = tree_ensure(&m->qroot, &p, qn); /* on failure it has undone itself */
    for (unsigned i = 0; rc == 0 && i < p.n; i++) {
        if (qn[i]->pending == NULL && (qn[i]->pending = calloc(1, sizeof(kq_resource_t))) == NULL) {
            rc = KQ_ENOMEM; /* the zero vectors already allocated are harmless */
            tree_prune(&m->qroot, qn[p.n - 1]);
        }
    }
    for (unsigned i = 0; rc == 0 && i < p.n; i++) {
        kq_resource_t sum = *qn[i]->pending;
        rc = kq_resource_add(&sum, req);
        if (rc != 0)
            tree_prune(&m->qroot, qn[p.n - 1]);
    }
    if (rc == 0) {
        for (unsigned i = 0; i < p.n; i++)
            res_add_checked(qn[i]->pending, req);
        tree_prune(&m->qroot, qn[p.n - 1]); /* an empty request leaves no node behind */
    }
    mutex_unlock(&m->qlock);
    if (rc != 0)
        kq_warn("ugm: pending not counted queue=%s error=\"%s\"", queue_path, kq_strerror(rc));
}

void kq_ugm_pending_sub(kq_ugm_t *m, const char *queue_path, const kq_resource_t *req)
{
    qpath_t p;
    if (m == NULL || req == NULL || parse_path(queue_path, &p) != 0)
        return;
    node_t *qn[KQ_UGM_MAX_DEPTH];
    mutex_lock(&m->qlock);
    tree_walk(m->qroot, &p, qn);
    if (qn[p.n - 1] != NULL) {
        for (unsigned i = 0; i < p.n; i++)
            if (qn[i]->pending != NULL)
                res_sub(qn[i]->pending, req);
        tree_prune(&m->qroot, qn[p.n - 1]);
    }
    mutex_unlock(&m->qlock);
}

size_t kq_ugm_user_count(kq_ugm_t *m)
{
    if (m == NULL)
        return 0;
    mutex_lock(&m->lock);
    size_t n = HASH_COUNT(m->users);
    mutex_unlock(&m->lock);
    return n;
}

size_t kq_ugm_group_count(kq_ugm_t *m)
{
    if (m == NULL)
        return 0;
    mutex_lock(&m->lock);
    size_t n = HASH_COUNT(m->groups);
    mutex_unlock(&m->lock);
    return n;
}

/* ------------------------------------------------------------------------------------ */
/* Views                                                                                */
/* ------------------------------------------------------------------------------------ */

/* Adds value to obj under key (value stolen). false when value is NULL or on ENOMEM. */
static bool jset(json_t *obj, const char *key, json_t *value)
{
    return value != NULL && json_object_set_new(obj, key, value) == 0;
}

static bool jappend(json_t *arr, json_t *value)
{
    return value != NULL && json_array_append_new(arr, value) == 0;
}

static int cmp_cnt(const void *a, const void *b)
{
    return strcmp((*(cnt_t *const *)a)->key, (*(cnt_t *const *)b)->key);
}

static int cmp_node(const void *a, const void *b)
{
    return strcmp((*(node_t *const *)a)->name, (*(node_t *const *)b)->name);
}

static int cmp_tracker(const void *a, const void *b)
{
    return strcmp((*(tracker_t *const *)a)->name, (*(tracker_t *const *)b)->name);
}

/* Sorted array of the entries of a counted map; NULL on ENOMEM (or when empty). */
static cnt_t **cnt_sorted(cnt_t *head, size_t *n)
{
    *n = HASH_COUNT(head);
    if (*n == 0)
        return NULL;
    cnt_t **v = malloc(*n * sizeof(*v));
    if (v == NULL)
        return NULL;
    size_t i = 0;
    for (cnt_t *c = head; c != NULL; c = c->hh.next)
        v[i++] = c;
    qsort(v, *n, sizeof(*v), cmp_cnt);
    return v;
}

static node_t **children_sorted(const node_t *n, size_t *count)
{
    *count = n != NULL ? HASH_COUNT(n->children) : 0;
    if (*count == 0)
        return NULL;
    node_t **v = malloc(*count * sizeof(*v));
    if (v == NULL)
        return NULL;
    size_t i = 0;
    for (node_t *c = n->children; c != NULL; c = c->hh.next)
        v[i++] = c;
    qsort(v, *count, sizeof(*v), cmp_node);
    return v;
}

/* ["a","b"] of the keys of a counted map; NULL on ENOMEM. */
static json_t *keys_json(cnt_t *head)
{
    json_t *arr = json_array();
    size_t n;
    cnt_t **v = cnt_sorted(head, &n);
    if (arr == NULL || (n > 0 && v == NULL)) {
        free(v);
        json_decref(arr);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!jappend(arr, json_stringn(v[i]->key, v[i]->len))) {
            free(v);
            json_decref(arr);
            return NULL;
        }
    }
    free(v);
    return arr;
}

static json_t *usage_json(const node_t *n, const limits_t *L, bool group, const char *who)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = jset(o, "queuename", json_stringn(n->path, n->path_len)) &&
              jset(o, "resourceUsage", kq_resource_to_json(&n->used)) &&
              jset(o, "runningApplications", keys_json(n->apps));
    bool wildcard;
    const kq_limit_conf_t *lim = limit_for(level_find(L, n->path, n->path_len), group, who, &wildcard);
    if (ok && lim != NULL && lim->max_applications != 0)
        ok = jset(o, "maxApplications", json_integer((json_int_t)lim->max_applications));
    if (ok && lim != NULL && lim->has_max_resources)
        ok = jset(o, "maxResources", kq_resource_to_json(&lim->max_resources));
    json_t *children = ok ? json_array() : NULL;
    ok = ok && jset(o, "children", children);
    size_t nc = 0;
    node_t **v = ok ? children_sorted(n, &nc) : NULL;
    if (nc > 0 && v == NULL)
        ok = false;
    for (size_t i = 0; ok && i < nc; i++)
        ok = jappend(children, usage_json(v[i], L, group, who));
    free(v);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *empty_usage_json(void)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    if (!jset(o, "queuename", json_string("root")) || !jset(o, "resourceUsage", json_object()) ||
        !jset(o, "runningApplications", json_array()) || !jset(o, "children", json_array())) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* One user or group; the tracker's lock is held. */
static json_t *tracker_json(const tracker_t *t, const limits_t *L, bool group)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = jset(o, group ? "groupName" : "userName", json_stringn(t->name, t->name_len));
    if (ok && group) {
        ok = jset(o, "users", keys_json(t->users)) &&
             jset(o, "applications", t->root != NULL ? keys_json(t->root->apps) : json_array());
    } else if (ok) {
        json_t *groups = json_object();
        ok = jset(o, "groups", groups);
        for (cnt_t *c = t->root != NULL ? t->root->apps : NULL; ok && c != NULL; c = c->hh.next)
            if (c->group != NULL)
                ok = jset(groups, c->key, json_stringn(c->group->name, c->group->name_len));
    }
    if (ok)
        ok = jset(o, "queues", t->root != NULL ? usage_json(t->root, L, group, t->name) : empty_usage_json());
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* Pins the trackers to show (all, sorted, or the one named) and the limit table. */
static tracker_t **view_pin(kq_ugm_t *m, bool group, const char *name, size_t *n, limits_t **L)
{
    tracker_t **v = NULL;
    *n = 0;
    mutex_lock(&m->lock);
    tracker_t *head = group ? m->groups : m->users;
    if (name != NULL) {
        tracker_t *t = tracker_find(head, name);
        if (t != NULL && (v = malloc(sizeof(*v))) != NULL) {
            v[0] = t;
            *n = 1;
        }
    } else {
        size_t count = HASH_COUNT(head);
        if (count > 0 && (v = malloc(count * sizeof(*v))) != NULL) {
            for (tracker_t *t = head; t != NULL; t = t->hh.next)
                v[(*n)++] = t;
        }
    }
    for (size_t i = 0; i < *n; i++)
        v[i]->refs++;
    *L = limits_get(m);
    mutex_unlock(&m->lock);
    if (*n > 1)
        qsort(v, *n, sizeof(*v), cmp_tracker);
    return v;
}

static void view_unpin(kq_ugm_t *m, bool group, tracker_t **v, size_t n, limits_t *L)
{
    mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++)
        tracker_release(group ? &m->groups : &m->users, v[i], group ? "group" : "user");
    limits_t *dead = limits_put(L);
    mutex_unlock(&m->lock);
    limits_free(dead);
    free(v);
}

static json_t *trackers_json(kq_ugm_t *m, bool group, const char *name)
{
    if (m == NULL)
        return NULL;
    size_t n;
    limits_t *L;
    tracker_t **v = view_pin(m, group, name, &n, &L);
    json_t *out = name != NULL ? NULL : json_array();
    bool ok = name != NULL || out != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        mutex_lock(&v[i]->lock);
        json_t *one = tracker_json(v[i], L, group);
        mutex_unlock(&v[i]->lock);
        if (name != NULL)
            out = one;
        else
            ok = jappend(out, one);
    }
    view_unpin(m, group, v, n, L);
    if (!ok) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *kq_ugm_users_json(kq_ugm_t *m)
{
    return trackers_json(m, false, NULL);
}

json_t *kq_ugm_user_json(kq_ugm_t *m, const char *user)
{
    return user != NULL ? trackers_json(m, false, user) : NULL;
}

json_t *kq_ugm_groups_json(kq_ugm_t *m)
{
    return trackers_json(m, true, NULL);
}

json_t *kq_ugm_group_json(kq_ugm_t *m, const char *group)
{
    return group != NULL ? trackers_json(m, true, group) : NULL;
}

static node_t *child_find(const node_t *n, const char *name)
{
    node_t *c = NULL;
    if (n != NULL)
        HASH_FIND(hh, n->children, name, strlen(name), c);
    return c;
}

/* Fields every queue object has; conf may be NULL (a tracked queue the configuration
 * does not define). m->qlock is held. */
static bool queue_common(json_t *o, const char *partition, const node_t *n, const char *path,
                         const char *parent_path)
{
    bool ok = jset(o, "queuename", json_string(path)) && jset(o, "partition", json_string(partition));
    if (ok && parent_path != NULL)
        ok = jset(o, "parent", json_string(parent_path));
    if (ok)
        ok = jset(o, "allocatedResource", kq_resource_to_json(n != NULL ? &n->used : &empty_res)) &&
             jset(o, "pendingResource", kq_resource_to_json(n != NULL && n->pending != NULL ? n->pending : &empty_res)) &&
             jset(o, "runningApps", json_integer(n != NULL ? (json_int_t)HASH_COUNT(n->apps) : 0));
    return ok;
}

static json_t *unmanaged_queue_json(const node_t *n, const char *partition, const char *parent_path)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = queue_common(o, partition, n, n->path, parent_path) &&
              jset(o, "isLeaf", json_boolean(n->children == NULL)) &&
              jset(o, "isManaged", json_false());
    json_t *children = ok ? json_array() : NULL;
    ok = ok && jset(o, "children", children);
    size_t nc = 0;
    node_t **v = ok ? children_sorted(n, &nc) : NULL;
    if (nc > 0 && v == NULL)
        ok = false;
    for (size_t i = 0; ok && i < nc; i++)
        ok = jappend(children, unmanaged_queue_json(v[i], partition, n->path));
    free(v);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *managed_queue_json(const kq_partition_conf_t *part, const kq_queue_conf_t *q,
                                  const node_t *n, const char *partition)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = queue_common(o, partition, n, q->path, q->parent != NULL ? q->parent->path : NULL) &&
              jset(o, "isLeaf", json_boolean(!q->is_parent)) && jset(o, "isManaged", json_true());
    if (ok && q->has_max)
        ok = jset(o, "maxResource", kq_resource_to_json(&q->max));
    if (ok && q->has_guaranteed)
        ok = jset(o, "guaranteedResource", kq_resource_to_json(&q->guaranteed));
    if (ok && q->max_applications != 0)
        ok = jset(o, "maxRunningApps", json_integer((json_int_t)q->max_applications));
    if (ok && q->n_properties > 0) {
        json_t *props = json_object();
        ok = jset(o, "properties", props);
        for (size_t i = 0; ok && i < q->n_properties; i++)
            ok = jset(props, q->properties[i].key, json_string(q->properties[i].value));
    }
    json_t *children = ok ? json_array() : NULL;
    ok = ok && jset(o, "children", children);
    for (size_t i = 0; ok && i < q->n_children; i++) {
        const kq_queue_conf_t *c = q->children[i];
        ok = jappend(children, managed_queue_json(part, c, child_find(n, c->name), partition));
    }
    /* Tracked children the configuration does not define. */
    size_t nc = 0;
    node_t **v = ok ? children_sorted(n, &nc) : NULL;
    if (nc > 0 && v == NULL)
        ok = false;
    for (size_t i = 0; ok && i < nc; i++)
        if (kq_config_queue(part, v[i]->path) == NULL)
            ok = jappend(children, unmanaged_queue_json(v[i], partition, q->path));
    free(v);
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *kq_ugm_queues_json(kq_ugm_t *m)
{
    if (m == NULL)
        return NULL;
    mutex_lock(&m->lock);
    limits_t *L = limits_get(m);
    mutex_unlock(&m->lock);

    json_t *out;
    mutex_lock(&m->qlock);
    if (L != NULL) {
        out = managed_queue_json(L->part, L->part->root, m->qroot, m->partition);
    } else if (m->qroot != NULL) {
        out = unmanaged_queue_json(m->qroot, m->partition, NULL);
    } else {
        out = json_object();
        if (out != NULL && !queue_common(out, m->partition, NULL, "root", NULL)) {
            json_decref(out);
            out = NULL;
        }
        if (out != NULL && (!jset(out, "isLeaf", json_false()) || !jset(out, "isManaged", json_false()) ||
                            !jset(out, "children", json_array()))) {
            json_decref(out);
            out = NULL;
        }
    }
    mutex_unlock(&m->qlock);

    mutex_lock(&m->lock);
    limits_t *dead = limits_put(L);
    mutex_unlock(&m->lock);
    limits_free(dead);
    return out;
}
