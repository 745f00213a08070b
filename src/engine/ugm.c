/* User group manager: usage per user, group and queue, and enforcement of the user and
 * group limits and queue maxima of the queue configuration (YuniKorn's "user based
 * resource usage tracking" and "user based quota enforcement").
 *
 * Trackers. A user tracker and a group tracker each hold a sparse queue tree (root holds
 * the total) whose nodes carry the used resources of the subtree and the number of
 * applications running in the subtree, plus one application map for the whole tree:
 * application -> the nodes ("places") where it has allocations, with a count per place.
 * An application is running at a node while it has a place in the node's subtree. The
 * user tracker's application map is also the per-(user, application) allocation count and
 * remembers the application's group (or none), chosen at its first allocation and kept
 * until its last one is released. A group tracker also counts, per user, that user's
 * applications in the group. The manager's queue tree is the same structure over
 * everybody (the queue view's allocatedResource and runningApps) plus pending resources.
 * Nodes are created on first use and pruned when empty; trackers are removed when empty
 * and unused.
 *
 * Memory layout (BENCHMARKS.md finding 5). A node stores its usage as a vector of only
 * the resources present (16 bytes each), first in room allocated with the node, sized to
 * the request that created it, and in its own allocation once a new resource name needs
 * more; checks and commits work on kq_resource_t copies on the stack. Every tree has one
 * node index keyed by full path (no hash table per node), and one application map (not
 * one per node), both compact open-addressing sets (ptab_t: a pointer slot per entry
 * instead of a 56-byte uthash handle and a 160-byte table); a node finds its children
 * only in the views, which sort the index. Applications almost always have a single
 * place, stored in the application entry.
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
 * m->lock guards the user and group hash tables, every tracker's refs, the application
 * owners (the hash of chain heads and each chain, see owner_t), and the current limit
 * table pointer and its refs; it is held only for hash lookups and counters (and a walk of
 * the users sharing one application id, normally one), never
 * while waiting for a tracker lock except in the cleanup step (manager -> tracker is the
 * documented order and nobody waits for m->lock while holding a tracker lock). A tracker
 * lock guards the tracker's tree, node index and maps; m->qlock guards the queue tree. A
 * check and its commit happen while the user, group and queue locks are all held, so they
 * are one step (no thread can see or change a half-committed increase). m->qlock is the
 * one lock every increase and decrease takes (the queue tree is shared by everybody); it
 * is held for O(depth) work, and by the queue view while it renders (O(queues)).
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
 * Cost. An increase, check or decrease does a constant number of hash lookups per tree
 * (application map; node index, one lookup when the path's node exists, at most one per
 * level otherwise), plus per level one limit table lookup and, for a new application, one
 * per group of the user for group selection, and one each in the user and group tables;
 * the application's places are walked (one, except for an application in several queues).
 * Nothing scans users, groups, applications or children. Only the views walk everything.
 *
 * Allocation failures: nodes, usage vectors and map entries are allocated before anything
 * is changed, so an increase that fails with KQ_ENOMEM changes nothing visible (a usage
 * vector may keep extra room). uthash's own bucket growth aborts on out-of-memory
 * (uthash_fatal), as everywhere in kubequota.
 */
#include "kubequota/engine/ugm.h"

#include <assert.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The uthash tables here (users, groups, a group's users, limit tables) start with 4
 * buckets instead of uthash's 32 (uthash still doubles them when chains grow). */
#include <uthash.h>
#undef HASH_INITIAL_NUM_BUCKETS
#undef HASH_INITIAL_NUM_BUCKETS_LOG2
#define HASH_INITIAL_NUM_BUCKETS 4U
#define HASH_INITIAL_NUM_BUCKETS_LOG2 2U

#include "kubequota/base/log.h"

/* ------------------------------------------------------------------------------------ */
/* Types                                                                                */
/* ------------------------------------------------------------------------------------ */

struct tracker;

/* A counted key: user -> that user's applications in a group. */
typedef struct cnt {
    UT_hash_handle hh;      /* in tracker->users */
    uint64_t n;             /* applications */
    size_t len;             /* strlen(key) */
    char key[];
} cnt_t;

/* A queue in one tree: 46 bytes, then the path and the inline usage room. */
typedef struct node {
    uint32_t hash;          /* key_hash(path): first member, as ptab_t requires */
    uint16_t path_len;      /* strlen(path) (<= KQ_UGM_PATH_MAX) */
    uint16_t name_off;      /* the last segment starts at path + name_off */
    struct node *parent;    /* NULL at the root */
    kq_res_entry_t *used;   /* usage of the subtree: n_used entries as a kq_resource_t keeps
                             * them (sorted, interned names); the inline room after path, or
                             * its own allocation once it needed more (used_inline false) */
    kq_resource_t *pending; /* queue tree only, allocated on first use; NULL = none */
    uint32_t running;       /* applications with a place in the subtree */
    uint32_t n_children;    /* nodes whose parent this is */
    uint16_t n_used;        /* entries in used (<= KQ_RES_NAMES_MAX) */
    uint16_t cap_used;      /* room in used */
    uint8_t depth;          /* 0 at the root: the node's index in a qpath */
    bool used_inline;       /* used points at the room allocated with the node */
    char path[];            /* full path, NUL-terminated; the inline usage room follows,
                             * aligned for kq_res_entry_t */
} node_t;

/* Allocations of an application counted at exactly one node. */
typedef struct place {
    node_t *node;
    uint32_t n;             /* > 0 while the place exists */
} place_t;

/* An application with allocations in a tree: 40 bytes and the id. */
typedef struct app {
    uint32_t hash;          /* key_hash(key): first member, as ptab_t requires */
    uint16_t n_places;      /* >= 1 while the entry exists */
    uint16_t cap_more;      /* room in more */
    struct tracker *group;  /* user trees: the application's group (holds a reference), or NULL */
    place_t *more;          /* places[1 ..]; NULL until a second place */
    place_t first;          /* places[0] */
    char key[];             /* application id, NUL-terminated */
} app_t;

/* A set of entries (node_t or app_t) by key: open addressing with linear probing, at most
 * three quarters full up to 16 slots and half full above, backward-shift deletion. Each
 * entry starts with the 32-bit hash of its key, which rehashing and probing use; the key
 * stays in the entry. The slots are freed when the set becomes empty. */
typedef struct ptab {
    void **slot;            /* cap pointers, NULL = free; NULL while cap is 0 */
    uint32_t cap;           /* 0 or a power of two */
    uint32_t n;             /* entries */
} ptab_t;

/* A sparse queue tree and its indexes (guarded by the owner's lock). */
typedef struct tree {
    node_t *root;           /* NULL when empty */
    ptab_t nodes;           /* every node, by full path */
    ptab_t apps;            /* every application with a place, by id */
} tree_t;

typedef struct tracker {
    UT_hash_handle hh;      /* in m->users or m->groups */
    pthread_mutex_t lock;
    int refs;               /* m->lock */
    tree_t tree;            /* lock */
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

/* A name in an access control list. */
typedef struct acl_name {
    UT_hash_handle hh;
    char name[];
} acl_name_t;

/* One submitacl or adminacl as YuniKorn reads it ("users groups", split at the first
 * space; "*" for everybody; an empty list allows nobody). */
typedef struct acl {
    bool all;
    acl_name_t *users, *groups;
} acl_t;

typedef struct level {
    UT_hash_handle hh;
    const char *path;       /* borrowed from the configuration */
    size_t path_len;
    const kq_queue_conf_t *q;
    named_limit_t *users, *groups;
    const kq_limit_conf_t *user_any, *group_any;
    acl_t submit, admin;    /* an unset ACL allows nobody (it is empty) */
} level_t;

typedef struct limits {
    int refs;               /* m->lock */
    kq_config_t *cfg;       /* strong reference: everything above borrows from it */
    const kq_partition_conf_t *part;
    level_t *levels;
    size_t n_levels, n_limits;
    bool acls;              /* some queue of the partition sets submitacl or adminacl: ACLs
                             * are enforced; without any, everybody may submit */
} limits_t;

/* The user an application is charged to: the user of its first allocation (YuniKorn
 * charges an application to the user that submitted it), with that user's groups. Lives
 * while the application has allocations or an operation holds it (n counts both).
 *
 * Ownership (issue 29). An application id belongs to one user: a checked allocation (check,
 * increase) of another user is refused (KQ_DENIAL_APP_OWNER), never charged to the owner.
 * Pods counted without a check (bound by someone else, or before the rule existed) are
 * charged to their own user: each user gets an entry of their own, chained under the
 * application id in the order of their earliest counted pod (creation time, then UID;
 * unknown last). The chain's head is the owner. Counting the same bound pods in any order
 * (a restart's relist) builds the same chain, so the same owner. */
typedef struct owner {
    UT_hash_handle hh;      /* in m->owners, keyed by application id (the chain's head only) */
    struct owner *next;     /* the next user's entry for the same application id (m->lock) */
    int64_t since;          /* the earliest creation time of a pod counted in this entry
                             * (INT64_MAX: unknown), then since_uid: the chain's order */
    char since_uid[64];
    uint64_t n;             /* m->lock */
    uint64_t pods;          /* allocations (m->lock) */
    kq_res_entry_t *used;   /* the application's usage, n_used entries kept as a kq_resource_t
                             * keeps them (m->lock; for the applications view); own allocation,
                             * NULL while empty: an application costs no fixed resource set */
    uint32_t n_used;
    kq_user_t user;         /* strings and group array in the same allocation */
    const char *app;
    const char *queue;      /* the queue of its first allocation */
} owner_t;

struct kq_ugm {
    pthread_mutex_t lock;
    char *partition;
    tracker_t *users, *groups;
    owner_t *owners;        /* application -> the user it is charged to */
    limits_t *limits;
    pthread_mutex_t qlock;
    tree_t qtree;           /* qlock */
    struct dynlim *dynlims; /* qlock: namespace limits of dynamic queues (see the end) */
};

typedef struct qpath {
    const char *s;          /* buf */
    size_t len;
    unsigned n;
    size_t end[KQ_UGM_MAX_DEPTH]; /* level i is s[0 .. end[i]) */
    char buf[KQ_UGM_PATH_MAX + 1];
} qpath_t;

static const kq_resource_t empty_res = {.n = 0};

_Static_assert(offsetof(node_t, hash) == 0 && offsetof(app_t, hash) == 0, "ptab_t entries start with their hash");
_Static_assert(KQ_UGM_PATH_MAX <= UINT16_MAX && KQ_UGM_MAX_DEPTH <= UINT8_MAX && KQ_RES_NAMES_MAX <= UINT16_MAX,
               "node_t field widths");

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

/* r -= b clamped at 0, then drops the entries that are 0 (the view shows what is used).
 * Returns true when nothing had to be clamped. */
static bool res_sub(kq_resource_t *r, const kq_resource_t *b)
{
    bool exact = kq_resource_sub(r, b);
    uint32_t j = 0;
    for (uint32_t i = 0; i < r->n; i++)
        if (KQ_RES_E(r)[i].value != 0)
            KQ_RES_E(r)[j++] = KQ_RES_E(r)[i];
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
/* Compact hash sets (ptab_t)                                                           */
/* ------------------------------------------------------------------------------------ */

/* FNV-1a with a final avalanche, so that the low bits (the slot) depend on every byte. */
static uint32_t key_hash(const char *key, size_t len)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)key[i];
        h *= 16777619u;
    }
    h ^= h >> 16;
    h *= 0x85ebca6bu;
    h ^= h >> 13;
    h *= 0xc2b2ae35u;
    h ^= h >> 16;
    return h;
}

static uint32_t entry_hash(const void *e)
{
    return *(const uint32_t *)e;
}

typedef bool (*ptab_eq_fn)(const void *entry, const char *key, size_t len);

static void *ptab_find(const ptab_t *t, const char *key, size_t len, ptab_eq_fn eq)
{
    if (t->n == 0)
        return NULL;
    uint32_t h = key_hash(key, len), mask = t->cap - 1;
    for (uint32_t i = h & mask;; i = (i + 1) & mask) {
        void *e = t->slot[i];
        if (e == NULL)
            return NULL;
        if (entry_hash(e) == h && eq(e, key, len))
            return e;
    }
}

static void slot_put(void **slot, uint32_t cap, void *e)
{
    uint32_t mask = cap - 1, i = entry_hash(e) & mask;
    while (slot[i] != NULL)
        i = (i + 1) & mask;
    slot[i] = e;
}

/* Room for one more entry (so that ptab_insert cannot fail). */
static int ptab_reserve(ptab_t *t)
{
    uint64_t limit = t->cap <= 16 ? (uint64_t)t->cap * 3 / 4 : (uint64_t)t->cap / 2;
    if ((uint64_t)t->n + 1 <= limit)
        return 0;
    if (t->cap > UINT32_MAX / 4)
        return KQ_ERANGE;
    uint32_t cap = t->cap == 0 ? 4 : 2 * t->cap;
    void **slot = calloc(cap, sizeof(*slot));
    if (slot == NULL)
        return KQ_ENOMEM;
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->slot[i] != NULL)
            slot_put(slot, cap, t->slot[i]);
    free(t->slot);
    t->slot = slot;
    t->cap = cap;
    return 0;
}

static void ptab_insert(ptab_t *t, void *e)
{
    assert(t->cap > 0 && t->n < t->cap - 1);
    slot_put(t->slot, t->cap, e);
    t->n++;
}

/* Removes entry e (which is in the set). */
static void ptab_remove(ptab_t *t, const void *e)
{
    uint32_t mask = t->cap - 1, i = entry_hash(e) & mask;
    while (t->slot[i] != e)
        i = (i + 1) & mask;
    t->slot[i] = NULL;
    /* Move back every later entry of the run whose home slot is not in (i, j]. */
    for (uint32_t j = (i + 1) & mask; t->slot[j] != NULL; j = (j + 1) & mask) {
        uint32_t home = entry_hash(t->slot[j]) & mask;
        bool stays = i <= j ? (i < home && home <= j) : (i < home || home <= j);
        if (!stays) {
            t->slot[i] = t->slot[j];
            t->slot[j] = NULL;
            i = j;
        }
    }
    if (--t->n == 0) {
        free(t->slot);
        t->slot = NULL;
        t->cap = 0;
    }
}

static bool node_eq(const void *e, const char *key, size_t len)
{
    const node_t *n = e;
    return n->path_len == len && memcmp(n->path, key, len) == 0;
}

static bool app_eq(const void *e, const char *key, size_t len)
{
    const app_t *a = e;
    return strncmp(a->key, key, len) == 0 && a->key[len] == '\0';
}

/* ------------------------------------------------------------------------------------ */
/* Counted keys, usage vectors, tree nodes and application places                      */
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

/* Offset of the inline usage room in a node with a path of plen bytes. */
static size_t node_room_off(size_t plen)
{
    size_t a = _Alignof(kq_res_entry_t);
    return (offsetof(node_t, path) + plen + 1 + a - 1) / a * a;
}

/* The node's usage (the empty set for NULL) as a set in *r, which need not be initialised:
 * up to KQ_RES_INLINE entries are copied inline; more are borrowed (r's heap is the node's
 * array: never free r, and it is valid while the node's usage is unchanged). Writing into
 * r's entries in place (res_sub) writes into the node's; r must never grow. */
static kq_resource_t *node_view(const node_t *n, kq_resource_t *r)
{
    uint32_t k = n != NULL ? n->n_used : 0;
    r->n = k;
    if (k > KQ_RES_INLINE) {
        r->cap = k;
        r->heap = n->used;
        return r;
    }
    r->cap = 0;
    r->heap = NULL;
    if (k > 0) /* a libc call: an inline copy of a bounded size (rep movs) is slower here */
        memcpy(r->inl, n->used, k * sizeof(r->inl[0]));
    return r;
}

/* *r (initialised; freed by the caller) = a copy of the node's usage. KQ_ENOMEM only when it
 * has more than r's room. */
static int node_copy(const node_t *n, kq_resource_t *r)
{
    uint32_t k = n != NULL ? n->n_used : 0;
    if (k > (r->cap ? r->cap : KQ_RES_INLINE) && kq_resource_reserve(r, k) != 0)
        return KQ_ENOMEM;
    r->n = k;
    if (k > 0)
        memcpy(KQ_RES_E(r), n->used, k * sizeof(kq_res_entry_t));
    return 0;
}

/* Stores r as the node's usage; the room was reserved (node_reserve). */
static void node_store(node_t *n, const kq_resource_t *r)
{
    assert(r->n <= n->cap_used);
    if (r->n > 0 && KQ_RES_E(r) != n->used) /* a borrowed view (node_view) is already there */
        memmove(n->used, KQ_RES_E(r), r->n * sizeof(KQ_RES_E(r)[0]));
    n->n_used = (uint16_t)r->n;
}

/* Makes room for `need` usage entries. The usage itself does not change. */
static int node_reserve(node_t *n, uint32_t need)
{
    if (need <= n->cap_used)
        return 0;
    kq_res_entry_t *v = malloc(need * sizeof(*v));
    if (v == NULL)
        return KQ_ENOMEM;
    if (n->n_used > 0)
        memcpy(v, n->used, n->n_used * sizeof(*v));
    if (!n->used_inline)
        free(n->used);
    n->used = v;
    n->used_inline = false;
    n->cap_used = (uint16_t)need;
    return 0;
}

static bool node_used_zero(const node_t *n)
{
    for (unsigned i = 0; i < n->n_used; i++)
        if (n->used[i].value != 0)
            return false;
    return true;
}

/* A node for level i of p with inline room for `room` usage entries. */
static node_t *node_new(node_t *parent, const qpath_t *p, unsigned i, uint32_t room)
{
    size_t plen = p->end[i];
    size_t off = node_room_off(plen);
    node_t *n = calloc(1, off + room * sizeof(kq_res_entry_t));
    if (n == NULL)
        return NULL;
    memcpy(n->path, p->s, plen);
    n->path[plen] = '\0';
    n->hash = key_hash(n->path, plen);
    n->path_len = (uint16_t)plen;
    n->name_off = (uint16_t)seg_start(p, i);
    n->depth = (uint8_t)i;
    n->parent = parent;
    n->used = (kq_res_entry_t *)(void *)((char *)n + off);
    n->cap_used = (uint16_t)room;
    n->used_inline = true;
    return n;
}

static void node_free(node_t *n)
{
    if (!n->used_inline)
        free(n->used);
    kq_resource_free(n->pending);
    free(n->pending);
    free(n);
}

static place_t *place_at(app_t *a, unsigned i)
{
    return i == 0 ? &a->first : &a->more[i - 1];
}

static place_t *app_place(app_t *a, const node_t *n)
{
    for (unsigned i = 0; a != NULL && n != NULL && i < a->n_places; i++) {
        place_t *pl = place_at(a, i);
        if (pl->node == n)
            return pl;
    }
    return NULL;
}

/* Allocations of the application in the whole tree. */
static uint64_t app_total(app_t *a)
{
    uint64_t t = 0;
    for (unsigned i = 0; i < a->n_places; i++)
        t += place_at(a, i)->n;
    return t;
}

static app_t *app_find(const tree_t *t, const char *id, size_t len)
{
    return ptab_find(&t->apps, id, len, app_eq);
}

static app_t *app_new(const char *id, size_t len)
{
    app_t *a = calloc(1, sizeof(*a) + len + 1);
    if (a == NULL)
        return NULL;
    memcpy(a->key, id, len);
    a->hash = key_hash(id, len);
    return a;
}

static void app_free(app_t *a)
{
    free(a->more);
    free(a);
}

/* Makes room for one more place (a new entry has room for its first). */
static int app_reserve_place(app_t *a)
{
    if (a->n_places == 0 || (unsigned)a->n_places <= a->cap_more)
        return 0;
    if (a->n_places == UINT16_MAX)
        return KQ_ERANGE;
    unsigned cap = a->cap_more == 0 ? 2 : 2u * a->cap_more;
    if (cap > UINT16_MAX - 1u)
        cap = UINT16_MAX - 1u;
    place_t *v = realloc(a->more, cap * sizeof(*v));
    if (v == NULL)
        return KQ_ENOMEM;
    a->more = v;
    a->cap_more = (uint16_t)cap;
    return 0;
}

/* Adds a place with no allocations yet; the room was reserved. */
static place_t *app_add_place(app_t *a, node_t *n)
{
    assert(a->n_places == 0 || a->n_places <= a->cap_more);
    place_t *pl = place_at(a, a->n_places++);
    pl->node = n;
    pl->n = 0;
    return pl;
}

static void app_drop_place(app_t *a, place_t *pl)
{
    place_t *last = place_at(a, a->n_places - 1u);
    *pl = *last;
    a->n_places--;
}

/* The number of levels of the path (nodes[0 .. depth), NULL where missing) at which the
 * application already runs: one more than the depth of the deepest node on the path that
 * is one of its places or an ancestor of one. The levels from there down are new to it. */
static unsigned app_shared(app_t *a, node_t *const *nodes, unsigned depth)
{
    unsigned shared = 0;
    for (unsigned i = 0; a != NULL && i < a->n_places && shared < depth; i++) {
        for (const node_t *x = place_at(a, i)->node; x != NULL; x = x->parent) {
            if (x->depth < depth && nodes[x->depth] == x) {
                if (x->depth + 1u > shared)
                    shared = x->depth + 1u;
                break;
            }
        }
    }
    return shared;
}

static node_t *node_find(const tree_t *t, const char *path, size_t len)
{
    return ptab_find(&t->nodes, path, len, node_eq);
}

static void tree_free(tree_t *t)
{
    for (uint32_t i = 0; i < t->nodes.cap; i++)
        if (t->nodes.slot[i] != NULL)
            node_free(t->nodes.slot[i]);
    for (uint32_t i = 0; i < t->apps.cap; i++)
        if (t->apps.slot[i] != NULL)
            app_free(t->apps.slot[i]);
    free(t->nodes.slot);
    free(t->apps.slot);
    memset(t, 0, sizeof(*t));
}

static bool node_empty(const node_t *n)
{
    return n->running == 0 && n->n_children == 0 && (n->pending == NULL || kq_resource_is_zero(n->pending));
}

/* Fills out[0 .. p->n) with the nodes on the path; NULL from the first missing one.
 * `a` (may be NULL) is the application the caller works for: a place of it on the path
 * saves the lookups. Otherwise the deepest existing node is found with one lookup per
 * missing level, and its ancestors fill the rest. */
static void tree_walk(const tree_t *t, const qpath_t *p, app_t *a, node_t **out)
{
    node_t *n = NULL;
    unsigned k = p->n;
    for (unsigned i = 0; a != NULL && i < a->n_places && n == NULL; i++) {
        node_t *x = place_at(a, i)->node;
        if (x->path_len == p->len && memcmp(x->path, p->s, p->len) == 0)
            n = x;
    }
    while (n == NULL && k > 0 && t->root != NULL) {
        n = node_find(t, p->s, p->end[k - 1]);
        if (n == NULL)
            k--;
    }
    for (unsigned i = p->n; i-- > 0;) {
        if (n != NULL && n->depth == i) {
            out[i] = n;
            n = n->parent;
        } else {
            out[i] = NULL;
        }
    }
}

/* Removes empty nodes from n up towards the root. */
static void tree_prune(tree_t *t, node_t *n)
{
    while (n != NULL && node_empty(n)) {
        node_t *parent = n->parent;
        if (!node_used_zero(n))
            kq_warn("ugm: usage left without allocations, dropped queue=%s", n->path);
        ptab_remove(&t->nodes, n);
        if (parent != NULL)
            parent->n_children--;
        else
            t->root = NULL;
        node_free(n);
        n = parent;
    }
}

/* Makes sure every node on the path exists (new nodes get inline room for `room` usage
 * entries); out[] as tree_walk fills it. On failure (KQ_ENOMEM, or KQ_ERANGE for an index
 * that cannot grow) the nodes it created are removed again and the tree is as before. */
static int tree_ensure(tree_t *t, const qpath_t *p, app_t *a, uint32_t room, node_t **out)
{
    tree_walk(t, p, a, out);
    for (unsigned i = 0; i < p->n; i++) {
        if (out[i] != NULL)
            continue;
        node_t *parent = i > 0 ? out[i - 1] : NULL;
        int rc = ptab_reserve(&t->nodes);
        node_t *c = rc == 0 ? node_new(parent, p, i, room) : NULL;
        if (c == NULL) {
            tree_prune(t, parent);
            return rc != 0 ? rc : KQ_ENOMEM;
        }
        ptab_insert(&t->nodes, c);
        if (parent != NULL)
            parent->n_children++;
        else
            t->root = c;
        out[i] = c;
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
    tree_free(&t->tree);
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
    bool empty = t->tree.root == NULL && t->users == NULL;
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

static void acl_names_free(acl_name_t **head)
{
    acl_name_t *e, *tmp;
    HASH_ITER(hh, *head, e, tmp) {
        HASH_DEL(*head, e);
        free(e);
    }
}

static void acl_free(acl_t *a)
{
    acl_names_free(&a->users);
    acl_names_free(&a->groups);
}

/* Adds the comma-separated names of s[0 .. len) to *head ("" entries are skipped). A
 * list that is exactly "*" sets *all instead. */
static int acl_list(const char *s, size_t len, acl_name_t **head, bool *all)
{
    if (len == 1 && s[0] == '*') {
        *all = true;
        return 0;
    }
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && s[i] != ',')
            continue;
        size_t n = i - start;
        const char *name = s + start;
        start = i + 1;
        acl_name_t *e = NULL;
        if (n == 0)
            continue;
        HASH_FIND(hh, *head, name, n, e);
        if (e != NULL)
            continue;
        e = malloc(sizeof(*e) + n + 1);
        if (e == NULL)
            return KQ_ENOMEM;
        memcpy(e->name, name, n);
        e->name[n] = '\0';
        HASH_ADD(hh, *head, name[0], n, e);
    }
    return 0;
}

/* Parses an ACL like YuniKorn's security.NewACL: NULL or "" allows nobody; "*" (the
 * whole text, spaces trimmed) everybody; else "users" or "users groups" split at the
 * first space, each a comma-separated list or "*". */
static int acl_parse(acl_t *a, const char *text)
{
    memset(a, 0, sizeof(*a));
    if (text == NULL || text[0] == '\0')
        return 0;
    const char *b = text, *e = text + strlen(text);
    while (b < e && (*b == ' ' || *b == '\t'))
        b++;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    if (e - b == 1 && *b == '*') {
        a->all = true;
        return 0;
    }
    const char *sp = strchr(text, ' ');
    size_t ulen = sp != NULL ? (size_t)(sp - text) : strlen(text);
    int rc = acl_list(text, ulen, &a->users, &a->all);
    if (rc == 0 && sp != NULL && !a->all)
        rc = acl_list(sp + 1, strlen(sp + 1), &a->groups, &a->all);
    if (a->all) {
        acl_free(a);
        a->all = true;
    }
    return rc;
}

static bool acl_allows(const acl_t *a, const kq_user_t *user)
{
    if (a->all)
        return true;
    acl_name_t *e = NULL;
    HASH_FIND(hh, a->users, user->name, strlen(user->name), e);
    for (size_t j = 0; e == NULL && j < user->n_groups; j++)
        if (user->groups[j] != NULL)
            HASH_FIND(hh, a->groups, user->groups[j], strlen(user->groups[j]), e);
    return e != NULL;
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
        acl_free(&lv->submit);
        acl_free(&lv->admin);
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
    if (q->submit_acl != NULL || q->admin_acl != NULL)
        L->acls = true;
    if (acl_parse(&lv->submit, q->submit_acl) != 0 || acl_parse(&lv->admin, q->admin_acl) != 0)
        return KQ_ENOMEM;
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
 * matches every user with at least one group that no named group limit at that queue
 * matches, and the application is tracked against the group "*" itself, whose limit is
 * thereby cumulative for all those users (YuniKorn: apache/yunikorn-core
 * pkg/scheduler/ugm/manager.go ensureGroupInternal returns common.Wildcard). NULL: no
 * group. */
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
            return KQ_UGM_WILDCARD;
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
/* Application owners (callers hold m->lock)                                            */
/* ------------------------------------------------------------------------------------ */

/* The application's owner: the head of its chain, or NULL. */
static owner_t *owner_find(kq_ugm_t *m, const char *app, size_t len)
{
    owner_t *o = NULL;
    HASH_FIND(hh, m->owners, app, len, o);
    return o;
}

/* user's entry in the chain that starts at head, or NULL. */
static owner_t *owner_of(owner_t *head, const char *user)
{
    for (owner_t *o = head; o != NULL; o = o->next)
        if (strcmp(o->user.name, user) == 0)
            return o;
    return NULL;
}

/* Does a come before b in a chain? */
static bool owner_before(const owner_t *a, const owner_t *b)
{
    if (a->since != b->since)
        return a->since < b->since;
    return strcmp(a->since_uid, b->since_uid) < 0;
}

static void owner_unlink(kq_ugm_t *m, owner_t *o)
{
    owner_t *head = owner_find(m, o->app, strlen(o->app));
    if (head == o) {
        HASH_DEL(m->owners, o);
        if (o->next != NULL)
            HASH_ADD_KEYPTR(hh, m->owners, o->next->app, strlen(o->next->app), o->next);
    } else {
        owner_t *prev = head;
        while (prev != NULL && prev->next != o)
            prev = prev->next;
        if (prev != NULL)
            prev->next = o->next;
    }
    o->next = NULL;
}

/* Puts o (not linked) in its application's chain, in order. */
static void owner_link(kq_ugm_t *m, owner_t *o)
{
    size_t len = strlen(o->app);
    owner_t *head = owner_find(m, o->app, len);
    if (head == NULL || owner_before(o, head)) {
        if (head != NULL)
            HASH_DEL(m->owners, head);
        o->next = head;
        HASH_ADD_KEYPTR(hh, m->owners, o->app, len, o);
        return;
    }
    owner_t *prev = head;
    while (prev->next != NULL && !owner_before(o, prev->next))
        prev = prev->next;
    o->next = prev->next;
    prev->next = o;
}

/* A pod created at since (NULL: unknown) is counted in o: o moves up its chain when that
 * pod is its earliest. */
static void owner_note_since(kq_ugm_t *m, owner_t *o, const kq_ugm_pod_t *since)
{
    if (since == NULL)
        return;
    const char *uid = since->uid != NULL ? since->uid : "";
    if (since->created > o->since || (since->created == o->since && strcmp(uid, o->since_uid) >= 0))
        return;
    owner_unlink(m, o);
    o->since = since->created;
    snprintf(o->since_uid, sizeof(o->since_uid), "%s", uid);
    owner_link(m, o);
}

/* A new owner entry (n = 0) for app: a copy of user's name and groups. */
static owner_t *owner_new(const char *app, size_t app_len, const kq_user_t *user, const qpath_t *queue)
{
    size_t ng = 0, bytes = app_len + 1 + strlen(user->name) + 1 + queue->len + 1;
    for (size_t j = 0; j < user->n_groups; j++) {
        if (user->groups[j] != NULL) {
            ng++;
            bytes += strlen(user->groups[j]) + 1;
        }
    }
    owner_t *o = malloc(sizeof(*o) + ng * sizeof(char *) + bytes);
    if (o == NULL)
        return NULL;
    memset(o, 0, sizeof(*o));
    o->since = INT64_MAX;
    const char **groups = (const char **)(void *)(o + 1);
    char *p = (char *)(groups + ng);
    memcpy(p, app, app_len);
    p[app_len] = '\0';
    o->app = p;
    p += app_len + 1;
    memcpy(p, queue->s, queue->len + 1);
    o->queue = p;
    p += queue->len + 1;
    size_t len = strlen(user->name);
    memcpy(p, user->name, len + 1);
    o->user.name = p;
    p += len + 1;
    size_t k = 0;
    for (size_t j = 0; j < user->n_groups; j++) {
        if (user->groups[j] == NULL)
            continue;
        len = strlen(user->groups[j]);
        memcpy(p, user->groups[j], len + 1);
        groups[k++] = p;
        p += len + 1;
    }
    o->user.groups = groups;
    o->user.n_groups = ng;
    return o;
}

/* The owner's usage as a set (view into r's inline room or heap: r is initialised and
 * reused). 0 or KQ_ENOMEM. */
static int owner_used(const owner_t *o, kq_resource_t *r)
{
    kq_resource_clear(r);
    for (uint32_t i = 0; i < o->n_used; i++)
        if (kq_resource_put(r, o->used[i].name, o->used[i].value) != 0)
            return KQ_ENOMEM;
    return 0;
}

/* Stores r as the owner's usage (an exact-size array; same size: in place). */
static int owner_store(owner_t *o, const kq_resource_t *r)
{
    if (r->n != o->n_used) {
        kq_res_entry_t *v = r->n ? malloc(r->n * sizeof(*v)) : NULL;
        if (r->n && v == NULL)
            return KQ_ENOMEM;
        free(o->used);
        o->used = v;
        o->n_used = r->n;
    }
    if (r->n)
        memcpy(o->used, KQ_RES_E(r), r->n * sizeof(*o->used));
    return 0;
}

/* Adds (sign > 0) or takes away req from the owner's usage (clamped at 0). */
static int owner_change(owner_t *o, const kq_resource_t *req, int sign)
{
    kq_resource_t r;
    kq_resource_init(&r);
    int rc = owner_used(o, &r);
    if (rc == 0 && sign > 0)
        rc = kq_resource_add(&r, req);
    else if (rc == 0)
        (void)res_sub(&r, req);
    if (rc == 0)
        rc = owner_store(o, &r);
    kq_resource_free(&r);
    return rc;
}

/* Drops `k` counts of the owner; frees it at 0. */
static void owner_put(kq_ugm_t *m, owner_t *o, uint64_t k)
{
    assert(o->n >= k);
    o->n -= k;
    if (o->n == 0) {
        owner_unlink(m, o);
        free(o->used);
        free(o);
    }
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
    const kq_resource_t *req;   /* &req_pod */
    kq_resource_t req_pod;      /* the request with pods: 1 */
    owner_t *own;               /* the application's owner entry (pinned), or NULL in a check
                                 * of an application nobody owns yet */
    limits_t *lim;
    tracker_t *u;          /* pinned; NULL in a check for an unknown user */
    tracker_t *gc;         /* pinned candidate group tracker for a new application */
    tracker_t *g;          /* the application's group tracker (gc, or the existing one) */
    const char *gname;     /* the application's group name, or NULL */
    kq_denial_t *kind;     /* the caller's: the kind of a denial, or NULL */
    bool new_app;          /* the application has no allocation for this user yet */
    bool acl;              /* ask the queue's ACLs (every pod but a counted one's resize) */
    const kq_user_t *pod_user; /* the caller's user and groups: the ACLs are asked of them */
    tree_t *trees[T_COUNT];  /* NULL: not tracked (no group, or an unknown user in a check) */
    app_t *apps[T_COUNT];    /* the application's entry in each tree, or NULL */
    unsigned shared[T_COUNT]; /* levels where the application already runs (app_shared) */
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

/* "cpu 1500m used + 1 requested > 2 max; needs 500m more cpu" for the first resource that
 * does not fit, or "...; 3 requested alone is over the max: the pod can never fit" (the one
 * wording of every denial: docs/events.md). */
static kq_denial_t overrun_text(const char *name, const kq_resource_t *used, const kq_resource_t *req,
                                const kq_resource_t *max, char *buf, size_t len)
{
    char u[64], r[64], x[64], d[64];
    int64_t uv = kq_resource_get(used, name, NULL), rv = kq_resource_get(req, name, NULL);
    int64_t xv = kq_resource_get(max, name, NULL);
    kq_quantity_format(name, uv, u, sizeof(u));
    kq_quantity_format(name, rv, r, sizeof(r));
    kq_quantity_format(name, xv, x, sizeof(x));
    if (rv > xv) {
        if (snprintf(buf, len, "%s %s used + %s requested > %s max; %s requested alone is over the max: the pod "
                     "can never fit", name, u, r, x, r) < 0)
            buf[0] = '\0';
        return KQ_DENIAL_NEVER_FITS;
    }
    /* uv + rv > xv >= rv, so the difference neither overflows nor is negative */
    kq_quantity_format(name, uv - (xv - rv), d, sizeof(d));
    if (snprintf(buf, len, "%s %s used + %s requested > %s max; needs %s more %s", name, u, r, x, d, name) < 0)
        buf[0] = '\0';
    return KQ_DENIAL_OVER_LIMIT;
}

/* *out = req with pods: 1. Every increase and decrease is one pod, and YuniKorn's shim
 * puts "pods": 1 into every pod's resource (apache/yunikorn-k8shim pkg/common/resource.go
 * GetPodResource), so a "pods" entry in a limit or a queue's max counts pods. */
static int with_pod(const kq_resource_t *req, kq_resource_t *out)
{
    kq_resource_init(out); /* the caller frees it */
    int rc = kq_resource_copy(out, req);
    return rc != 0 ? rc : kq_resource_set(out, "pods", 1);
}

/* Checks one user or group limit at level i; t is T_USER or T_GROUP. */
static int check_limit(const op_t *op, unsigned i, int t, const char *who, char *reason, size_t rlen)
{
    bool group = t == T_GROUP;
    const level_t *lv = level_find(op->lim, op->path.s, op->path.end[i]);
    bool wildcard;
    const kq_limit_conf_t *lim = limit_for(lv, group, who, &wildcard);
    if (lim == NULL)
        return 0;
    const node_t *n = op->nodes[t][i];
    kq_resource_t used;
    node_view(n, &used);
    size_t running = n != NULL ? n->running : 0;
    bool new_here = i >= op->shared[t];
    char label[256], what[512];
    const char *failed = NULL;
    if (lim->max_applications != 0 && new_here && running + 1 > lim->max_applications) {
        limit_label(lim, group, wildcard, label, sizeof(label));
        kq_errf(reason, rlen, "%s %s in queue %.*s: %s exceeded: applications %zu running + 1 new > %" PRIu64 " max",
             group ? "group" : "user", who, (int)op->path.end[i], op->path.s, label, running,
             lim->max_applications);
        kq_denial_set(op->kind, KQ_DENIAL_OVER_LIMIT);
        return KQ_EDENIED;
    }
    if (lim->has_max_resources && !kq_resource_fits(&used, op->req, &lim->max_resources, &failed)) {
        limit_label(lim, group, wildcard, label, sizeof(label));
        kq_denial_set(op->kind, overrun_text(failed, &used, op->req, &lim->max_resources, what, sizeof(what)));
        kq_errf(reason, rlen, "%s %s in queue %.*s: %s exceeded: %s", group ? "group" : "user", who,
             (int)op->path.end[i], op->path.s, label, what);
        return KQ_EDENIED;
    }
    return 0;
}

static int check_dynamic_queue(const op_t *op, unsigned i, char *reason, size_t rlen);
static void dynlims_free(kq_ugm_t *m);
static bool dynamic_view_limits(kq_ugm_t *m, const kq_partition_conf_t *part, json_t *q);

static int check_queue(const op_t *op, unsigned i, char *reason, size_t rlen)
{
    const level_t *lv = level_find(op->lim, op->path.s, op->path.end[i]);
    if (lv == NULL)
        return check_dynamic_queue(op, i, reason, rlen);
    const kq_queue_conf_t *q = lv->q;
    const node_t *n = op->nodes[T_QUEUE][i];
    kq_resource_t used;
    node_view(n, &used);
    size_t running = n != NULL ? n->running : 0;
    bool new_here = i >= op->shared[T_QUEUE];
    const char *failed = NULL;
    char what[512];
    if (q->max_applications != 0 && new_here && running + 1 > q->max_applications) {
        kq_errf(reason, rlen, "queue %s: maxapplications exceeded: applications %zu running + 1 new > %" PRIu64 " max",
             q->path, running, q->max_applications);
        kq_denial_set(op->kind, KQ_DENIAL_OVER_LIMIT);
        return KQ_EDENIED;
    }
    if (q->has_max && !kq_resource_fits(&used, op->req, &q->max, &failed)) {
        kq_denial_set(op->kind, overrun_text(failed, &used, op->req, &q->max, what, sizeof(what)));
        kq_errf(reason, rlen, "queue %s: resources.max exceeded: %s", q->path, what);
        return KQ_EDENIED;
    }
    return 0;
}

/* A pod may run in the queue when the submitacl or adminacl of the queue or of one of its
 * parents allows its user or one of the user's groups (YuniKorn: apache/yunikorn-core
 * pkg/scheduler/objects/queue.go CheckSubmitAccess). Every pod is asked, not only the
 * first of an application (issue 37): YuniKorn asks once, in partition.go addApplication,
 * because there an application lives in one queue; here each pod names its queue, and a
 * pod of an application already running elsewhere must not land in a queue its user may
 * not submit to (README, "Coming from YuniKorn / Koordinator"). Only the resize of a pod
 * already counted is not asked again. Queues the configuration does not define have no
 * ACL of their own. Without any ACL in the partition everybody may submit. */
static int check_acl(const op_t *op, char *reason, size_t rlen)
{
    if (op->lim == NULL || !op->lim->acls || !op->acl)
        return 0;
    const kq_user_t *u = op->pod_user != NULL ? op->pod_user : op->user;
    for (unsigned i = op->path.n; i-- > 0;) {
        const level_t *lv = level_find(op->lim, op->path.s, op->path.end[i]);
        if (lv != NULL && (acl_allows(&lv->submit, u) || acl_allows(&lv->admin, u)))
            return 0;
    }
    char groups[256] = "";
    size_t used = 0;
    for (size_t j = 0; j < u->n_groups && used + 1 < sizeof(groups); j++) {
        int w = snprintf(groups + used, sizeof(groups) - used, "%s%s", j > 0 ? "," : "",
                         u->groups[j] != NULL ? u->groups[j] : "");
        if (w < 0)
            break;
        used += (size_t)w < sizeof(groups) - used ? (size_t)w : sizeof(groups) - used - 1;
    }
    kq_errf(reason, rlen,
               "user %s (groups: %s) may not submit to queue %s: neither the submitacl nor the adminacl of the "
               "queue or of a parent queue allows the user or one of its groups",
               u->name, used > 0 ? groups : "none", op->path.s);
    kq_denial_set(op->kind, KQ_DENIAL_ACL);
    return KQ_EDENIED;
}

/* Overflow and (unless unchecked) limits, leaf to root; changes nothing. */
static int check_all(const op_t *op, bool enforce, char *reason, size_t rlen)
{
    for (int t = 0; t < T_COUNT; t++) {
        place_t *pl = app_place(op->apps[t], op->nodes[t][op->path.n - 1]);
        if (pl != NULL && pl->n == UINT32_MAX) {
            kq_errf(reason, rlen, "allocation count in queue %s would overflow", op->path.s);
            return KQ_ERANGE;
        }
    }
    if (enforce) {
        int rc = check_acl(op, reason, rlen);
        if (rc != 0)
            return rc;
    }
    for (unsigned i = op->path.n; i-- > 0;) {
        for (int t = 0; t < T_COUNT; t++) {
            if (t == T_GROUP && op->gname == NULL)
                continue;
            kq_resource_t sum;
            kq_resource_init(&sum); /* no clearing of the inline room: a hot path */
            int rc = node_copy(op->nodes[t][i], &sum);
            if (rc == 0)
                rc = kq_resource_add(&sum, op->req);
            kq_resource_free(&sum);
            if (rc == KQ_ENOMEM) {
                kq_errf(reason, rlen, "out of memory");
                return rc;
            }
            if (rc != 0) {
                kq_errf(reason, rlen, "usage in queue %.*s would overflow", (int)op->path.end[i], op->path.s);
                return rc;
            }
        }
        if (!enforce)
            continue;
        int rc = check_limit(op, i, T_USER, op->user->name, reason, rlen);
        if (rc == 0 && op->gname != NULL)
            rc = check_limit(op, i, T_GROUP, op->gname, reason, rlen);
        if (rc == 0)
            rc = check_queue(op, i, reason, rlen);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* Commits the increase: allocates first (KQ_ENOMEM leaves everything as it was, apart
 * from usage vectors and place arrays with more room), then adds. Every lock of the
 * operation is held. */
static int commit(op_t *op)
{
    app_t *fresh[T_COUNT] = {NULL, NULL, NULL};
    cnt_t *user_entry = NULL;
    int ensured = 0, rc = 0;
    unsigned depth = op->path.n;
    kq_resource_t scratch; /* node usage + the request; freed on every return */
    kq_resource_init(&scratch);

    for (; ensured < T_COUNT; ensured++) {
        tree_t *t = op->trees[ensured];
        if (t == NULL)
            continue;
        rc = tree_ensure(t, &op->path, op->apps[ensured], op->req->n, op->nodes[ensured]);
        if (rc != 0)
            goto out;
    }
    for (int t = 0; t < T_COUNT; t++) {
        if (op->trees[t] == NULL)
            continue;
        for (unsigned i = 0; i < depth; i++) {
            /* The sum in the op's scratch set, which so grows to the room the section
             * below needs. */
            rc = node_copy(op->nodes[t][i], &scratch);
            if (rc == 0)
                rc = kq_resource_add(&scratch, op->req); /* no overflow: check_all proved it */
            if (rc == 0)
                rc = node_reserve(op->nodes[t][i], scratch.n);
            if (rc != 0)
                goto out;
        }
        if (op->apps[t] == NULL) {
            rc = ptab_reserve(&op->trees[t]->apps);
            if (rc != 0)
                goto out;
            fresh[t] = app_new(op->app, op->app_len);
            if (fresh[t] == NULL) {
                rc = KQ_ENOMEM;
                goto out;
            }
        } else if (app_place(op->apps[t], op->nodes[t][depth - 1]) == NULL) {
            rc = app_reserve_place(op->apps[t]);
            if (rc != 0)
                goto out;
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
        tree_t *tr = op->trees[t];
        if (tr == NULL)
            continue;
        node_t **nodes = op->nodes[t];
        for (unsigned i = 0; i < depth; i++) {
            rc = node_copy(nodes[i], &scratch); /* within the room reserved above */
            if (rc == 0)
                rc = kq_resource_add(&scratch, op->req);
            assert(rc == 0);
            node_store(nodes[i], &scratch);
        }
        app_t *a = op->apps[t];
        if (a == NULL) {
            a = fresh[t];
            fresh[t] = NULL;
            ptab_insert(&tr->apps, a);
            if (t == T_USER)
                a->group = op->g; /* the pin on g becomes the application's reference */
        }
        place_t *pl = app_place(a, nodes[depth - 1]);
        if (pl == NULL) {
            for (unsigned i = op->shared[t]; i < depth; i++)
                nodes[i]->running++;
            pl = app_add_place(a, nodes[depth - 1]);
        }
        pl->n++;
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
    kq_resource_free(&scratch);
    return 0;

out:
    kq_resource_free(&scratch);
    free(user_entry);
    for (int t = 0; t < T_COUNT; t++)
        free(fresh[t]);
    for (int t = 0; t < ensured; t++)
        if (op->trees[t] != NULL)
            tree_prune(op->trees[t], op->nodes[t][depth - 1]);
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
    owner_t *own = owner_of(owner_find(m, app_id, strlen(app_id)), user->name);
    if (own != NULL)
        user = &own->user;
    tracker_t *u = tracker_find(m->users, user->name);
    if (u != NULL) {
        mutex_lock(&u->lock);
        app_t *entry = app_find(&u->tree, app_id, strlen(app_id));
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

/* Finds the application's entry and the path's nodes in tree t of the operation. */
static void op_walk(op_t *op, int t)
{
    tree_t *tr = op->trees[t];
    if (tr == NULL) {
        op->apps[t] = NULL;
        for (unsigned i = 0; i < op->path.n; i++)
            op->nodes[t][i] = NULL;
        op->shared[t] = 0;
        return;
    }
    op->apps[t] = app_find(tr, op->app, op->app_len);
    tree_walk(tr, &op->path, op->apps[t], op->nodes[t]);
    op->shared[t] = app_shared(op->apps[t], op->nodes[t], op->path.n);
}

/* The reason of a KQ_DENIAL_APP_OWNER denial. It does not name the owner: explain answers
 * callers who may not see other users' usage. */
static void app_owner_reason(char *reason, size_t rlen, const char *app_id, const char *user)
{
    kq_errf(reason, rlen,
            "application \"%.256s\" belongs to another user: a pod of user %.256s cannot join it (an application "
            "is charged to the user who started it; give the pod an application id of its own)",
            app_id, user);
}

static int do_increase(kq_ugm_t *m, const char *queue_path, const char *app_id,
                       const kq_user_t *user, const kq_resource_t *req, const kq_ugm_pod_t *since,
                       enum mode mode, char *reason, size_t rlen, kq_denial_t *kind)
{
    if (reason != NULL && rlen > 0)
        reason[0] = '\0';
    kq_denial_set(kind, KQ_DENIAL_NONE);
    if (m == NULL || app_id == NULL || app_id[0] == '\0' || !user_valid(user) || req == NULL)
        return KQ_EINVAL;
    op_t op;
    memset(&op, 0, offsetof(op_t, nodes));
    int rc = parse_path(queue_path, &op.path);
    if (rc != 0) {
        kq_errf(reason, rlen, "invalid queue path");
        return rc;
    }
    op.m = m;
    op.kind = kind;
    op.acl = since == NULL || !since->counted;
    op.pod_user = user;
    op.app = app_id;
    op.app_len = strlen(app_id);
    rc = with_pod(req, &op.req_pod);
    if (rc != 0) {
        kq_resource_free(&op.req_pod);
        kq_errf(reason, rlen, "out of memory");
        return rc;
    }
    op.req = &op.req_pod;

    /* Manager section: find (or make) the application's owner, pin the owner's user
     * tracker and the candidate group, take the limit table. */
    const char *cand;
    mutex_lock(&m->lock);
    owner_t *head = owner_find(m, app_id, op.app_len);
    bool generated = since != NULL && since->generated_app;
    if (mode != MODE_UNCHECKED && !generated && head != NULL && strcmp(head->user.name, user->name) != 0) {
        /* another user's application: never joined, never charged to its owner */
        kq_debug("ugm: denied, application of another user app=%s user=%s owner=%s", app_id, user->name,
                 head->user.name);
        mutex_unlock(&m->lock);
        app_owner_reason(reason, rlen, app_id, user->name);
        kq_denial_set(kind, KQ_DENIAL_APP_OWNER);
        kq_resource_free(&op.req_pod);
        return KQ_EDENIED;
    }
    op.lim = limits_get(m);
    op.own = owner_of(head, user->name);
    bool oom = false;
    if (op.own == NULL && mode != MODE_CHECK) {
        op.own = owner_new(app_id, op.app_len, user, &op.path);
        if (op.own != NULL) {
            if (since != NULL) {
                op.own->since = since->created;
                snprintf(op.own->since_uid, sizeof(op.own->since_uid), "%s", since->uid ? since->uid : "");
            }
            owner_link(m, op.own);
            if (head != NULL && !generated)
                kq_info("ugm: a pod counted without a check shares an application id with another user's; "
                        "each is charged to its own user app=%s user=%s owner=%s", app_id, user->name,
                        owner_find(m, app_id, op.app_len)->user.name);
        } else {
            oom = true;
        }
    } else if (op.own != NULL && mode != MODE_CHECK) {
        owner_note_since(m, op.own, since);
    }
    if (op.own != NULL) {
        op.own->n++;
        user = &op.own->user; /* the same user, with the groups of its first pod */
    }
    op.user = user;
    cand = choose_group(op.lim, &op.path, user);
    if (mode == MODE_CHECK) {
        op.u = tracker_find(m->users, user->name);
        op.gc = cand != NULL ? tracker_find(m->groups, cand) : NULL;
    } else {
        op.u = oom ? NULL : tracker_get(&m->users, user->name, "user");
        op.gc = op.u != NULL && cand != NULL ? tracker_get(&m->groups, cand, "group") : NULL;
        if (op.u == NULL || (cand != NULL && op.gc == NULL)) {
            if (op.u != NULL) {
                op.u->refs++;
                tracker_release(&m->users, op.u, "user");
            }
            if (op.own != NULL)
                owner_put(m, op.own, 1);
            limits_t *dead = limits_put(op.lim);
            mutex_unlock(&m->lock);
            limits_free(dead);
            kq_errf(reason, rlen, "out of memory");
            kq_resource_free(&op.req_pod);
            return KQ_ENOMEM;
        }
    }
    if (op.u != NULL)
        op.u->refs++;
    if (op.gc != NULL)
        op.gc->refs++;
    mutex_unlock(&m->lock);

    /* Tracker section: user -> group -> queue tree. */
    if (op.u != NULL) {
        mutex_lock(&op.u->lock);
        op.trees[T_USER] = &op.u->tree;
    }
    op_walk(&op, T_USER);
    if (op.apps[T_USER] != NULL) {
        op.g = op.apps[T_USER]->group;
        op.gname = op.g != NULL ? op.g->name : NULL;
    } else {
        op.new_app = true;
        op.g = op.gc;
        op.gname = cand;
    }
    if (op.g != NULL) {
        mutex_lock(&op.g->lock);
        op.trees[T_GROUP] = &op.g->tree;
    }
    mutex_lock(&m->qlock);
    op.trees[T_QUEUE] = &m->qtree;
    op_walk(&op, T_GROUP);
    op_walk(&op, T_QUEUE);
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
        kq_errf(reason, rlen, "out of memory");

    /* Manager section: unpin, remove what became empty. */
    mutex_lock(&m->lock);
    if (op.gc != NULL && !handed_over)
        tracker_release(&m->groups, op.gc, "group");
    if (op.u != NULL)
        tracker_release(&m->users, op.u, "user");
    if (op.own != NULL && !(rc == 0 && mode != MODE_CHECK)) {
        owner_put(m, op.own, 1);
    } else if (op.own != NULL) { /* the pin is the new allocation's count */
        op.own->pods++;
        if (owner_change(op.own, op.req, +1) != 0)
            kq_debug("ugm: application usage not shown in full app=%s", app_id);
    }
    limits_t *dead = limits_put(op.lim);
    mutex_unlock(&m->lock);
    limits_free(dead);
    kq_resource_free(&op.req_pod);
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
    owner_t *o, *otmp;
    HASH_ITER(hh, m->owners, o, otmp) {
        HASH_DEL(m->owners, o);
        while (o != NULL) {
            owner_t *next = o->next;
            free(o->used);
            free(o);
            o = next;
        }
    }
    tree_free(&m->qtree);
    dynlims_free(m);
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
        kq_warn("ugm: configuration has no such partition, limits unchanged partition=%s", m->partition);
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
    if (!L->acls)
        kq_warn("ugm: no submitacl or adminacl in the partition: every user may submit to every queue "
                "(YuniKorn would deny all; its default configuration sets submitacl '*' on root) partition=%s",
                m->partition);
    return 0;
}

int kq_ugm_check(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                 const kq_resource_t *req, char *reason, size_t reason_len, kq_denial_t *kind)
{
    return do_increase(m, queue_path, app_id, user, req, NULL, MODE_CHECK, reason, reason_len, kind);
}

int kq_ugm_increase(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                    const kq_resource_t *req, char *reason, size_t reason_len, kq_denial_t *kind)
{
    return do_increase(m, queue_path, app_id, user, req, NULL, MODE_ENFORCE, reason, reason_len, kind);
}

int kq_ugm_check_pod(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                     const kq_resource_t *req, const kq_ugm_pod_t *pod, char *reason, size_t reason_len,
                     kq_denial_t *kind)
{
    return do_increase(m, queue_path, app_id, user, req, pod, MODE_CHECK, reason, reason_len, kind);
}

int kq_ugm_increase_pod(kq_ugm_t *m, const char *queue_path, const char *app_id, const kq_user_t *user,
                        const kq_resource_t *req, const kq_ugm_pod_t *since, char *reason, size_t reason_len,
                        kq_denial_t *kind)
{
    return do_increase(m, queue_path, app_id, user, req, since, MODE_ENFORCE, reason, reason_len, kind);
}

int kq_ugm_app_owner(kq_ugm_t *m, const char *app_id, const char *user, char *owner, size_t owner_len,
                     char *reason, size_t reason_len)
{
    if (owner != NULL && owner_len > 0)
        owner[0] = '\0';
    if (m == NULL || app_id == NULL || app_id[0] == '\0' || user == NULL)
        return KQ_EINVAL;
    int rc = 0;
    mutex_lock(&m->lock);
    owner_t *head = owner_find(m, app_id, strlen(app_id));
    if (head != NULL && strcmp(head->user.name, user) != 0) {
        rc = KQ_EDENIED;
        if (owner != NULL && owner_len > 0)
            snprintf(owner, owner_len, "%s", head->user.name);
    }
    mutex_unlock(&m->lock);
    if (rc == KQ_EDENIED)
        app_owner_reason(reason, reason_len, app_id, user);
    return rc;
}

int kq_ugm_add_unchecked(kq_ugm_t *m, const char *queue_path, const char *app_id,
                         const kq_user_t *user, const kq_resource_t *req)
{
    return kq_ugm_add_unchecked_pod(m, queue_path, app_id, user, req, NULL);
}

int kq_ugm_add_unchecked_pod(kq_ugm_t *m, const char *queue_path, const char *app_id,
                             const kq_user_t *user, const kq_resource_t *req, const kq_ugm_pod_t *since)
{
    char reason[256];
    int rc = do_increase(m, queue_path, app_id, user, req, since, MODE_UNCHECKED, reason, sizeof(reason), NULL);
    if (rc != 0)
        kq_warn("ugm: unchecked add failed user=%s queue=%s app=%s error=\"%s\" reason=\"%s\"",
                user != NULL && user->name != NULL ? user->name : "", queue_path != NULL ? queue_path : "",
                app_id != NULL ? app_id : "", kq_strerror(rc), reason);
    return rc;
}

/* Takes one allocation of app at its place pl out of every node on the path (nodes[0 ..
 * depth), all existing, pl at nodes[depth - 1]); frees the entry after its last place. */
static bool tree_sub(tree_t *t, node_t **nodes, unsigned depth, app_t *a, place_t *pl,
                     const kq_resource_t *usage)
{
    bool exact = true;
    for (unsigned i = 0; i < depth; i++) {
        kq_resource_t r;
        node_view(nodes[i], &r); /* borrowed when spilled: res_sub writes in place */
        if (!res_sub(&r, usage))
            exact = false;
        node_store(nodes[i], &r); /* never more entries than before */
    }
    if (--pl->n == 0) {
        app_drop_place(a, pl);
        for (unsigned i = app_shared(a, nodes, depth); i < depth; i++)
            nodes[i]->running--;
        if (a->n_places == 0) {
            ptab_remove(&t->apps, a);
            app_free(a);
        }
    }
    return exact;
}

/* The decrease in a group or the queue tree, which must be in step with the user tree. */
static void tree_sub_other(tree_t *t, const qpath_t *p, const char *app, size_t app_len,
                           const kq_resource_t *usage, const char *group)
{
    node_t *nodes[KQ_UGM_MAX_DEPTH];
    app_t *a = app_find(t, app, app_len);
    tree_walk(t, p, a, nodes);
    place_t *pl = app_place(a, nodes[p->n - 1]);
    if (pl == NULL) {
        if (group != NULL)
            kq_error("ugm: group tracker out of step group=%s queue=%s app=%s", group, p->s, app);
        else
            kq_error("ugm: queue tracker out of step queue=%s app=%s", p->s, app);
        return;
    }
    tree_sub(t, nodes, p->n, a, pl, usage);
    tree_prune(t, nodes[p->n - 1]);
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
    kq_resource_t usage_pod;
    if (with_pod(usage, &usage_pod) != 0) {
        kq_resource_free(&usage_pod);
        return KQ_ENOMEM;
    }
    usage = &usage_pod;

    /* The application's allocations are counted for its owner (the user of its first). */
    mutex_lock(&m->lock);
    owner_t *own = owner_of(owner_find(m, app_id, app_len), user);
    if (own != NULL) {
        own->n++;
        user = own->user.name;
    }
    tracker_t *u = tracker_find(m->users, user);
    if (u != NULL)
        u->refs++;
    else if (own != NULL)
        owner_put(m, own, 1);
    mutex_unlock(&m->lock);
    if (u == NULL) {
        kq_resource_free(&usage_pod);
        return KQ_ENOENT;
    }

    tracker_t *released_group = NULL;
    bool exact = true;
    node_t *un[KQ_UGM_MAX_DEPTH];
    mutex_lock(&u->lock);
    app_t *entry = app_find(&u->tree, app_id, app_len);
    place_t *here = NULL;
    if (entry != NULL) {
        tree_walk(&u->tree, &p, entry, un);
        here = app_place(entry, un[p.n - 1]);
    }
    if (here == NULL) { /* nothing counted at exactly this queue */
        mutex_unlock(&u->lock);
        rc = KQ_ENOENT;
        goto release;
    }
    tracker_t *g = entry->group;
    bool app_ends = app_total(entry) == 1;
    if (g != NULL)
        mutex_lock(&g->lock);
    mutex_lock(&m->qlock);

    exact = tree_sub(&u->tree, un, p.n, entry, here, usage); /* may free entry */
    if (g != NULL) {
        tree_sub_other(&g->tree, &p, app_id, app_len, usage, g->name);
        if (app_ends) {
            cnt_t *c = cnt_find(g->users, user, strlen(user));
            if (c != NULL && --c->n == 0) {
                HASH_DEL(g->users, c);
                free(c);
            }
            released_group = g; /* the application's reference comes back to us */
        }
    }
    tree_sub_other(&m->qtree, &p, app_id, app_len, usage, NULL);
    tree_prune(&u->tree, un[p.n - 1]);

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
    if (own != NULL && rc == 0) {
        own->pods--;
        if (owner_change(own, usage, -1) != 0)
            kq_debug("ugm: application usage not shown in full app=%s", own->app);
    }
    if (own != NULL)
        owner_put(m, own, rc == 0 ? 2 : 1); /* our pin, and the released allocation */
    mutex_unlock(&m->lock);
    kq_resource_free(&usage_pod);
    return rc;
}

/* What kq_ugm_pending_add and _sub share: the queue path parsed and the request with the
 * pod count added (as usage counts it). False when either is unusable: nothing to do. */
static bool pending_prep(const kq_ugm_t *m, const char *queue_path, const kq_resource_t *req, qpath_t *p,
                         kq_resource_t *req_pod)
{
    kq_resource_init(req_pod);
    if (m == NULL || req == NULL || parse_path(queue_path, p) != 0)
        return false;
    if (with_pod(req, req_pod) == 0)
        return true;
    kq_resource_free(req_pod);
    return false;
}

void kq_ugm_pending_add(kq_ugm_t *m, const char *queue_path, const kq_resource_t *req)
{
    qpath_t p;
    kq_resource_t req_pod;
    if (!pending_prep(m, queue_path, req, &p, &req_pod))
        return;
    req = &req_pod;
    node_t *qn[KQ_UGM_MAX_DEPTH];
    mutex_lock(&m->qlock);
    int rc = tree_ensure(&m->qtree, &p, NULL, 0, qn); /* on failure it has undone itself */
    for (unsigned i = 0; rc == 0 && i < p.n; i++) {
        if (qn[i]->pending == NULL && (qn[i]->pending = calloc(1, sizeof(kq_resource_t))) == NULL) {
            rc = KQ_ENOMEM; /* the zero vectors already allocated are harmless */
            tree_prune(&m->qtree, qn[p.n - 1]);
        }
    }
    for (unsigned i = 0; rc == 0 && i < p.n; i++) {
        rc = kq_resource_add_check(qn[i]->pending, req); /* makes room: the add below cannot fail */
        if (rc != 0)
            tree_prune(&m->qtree, qn[p.n - 1]);
    }
    if (rc == 0) {
        for (unsigned i = 0; i < p.n; i++) {
            int arc = kq_resource_add(qn[i]->pending, req);
            assert(arc == 0); /* proven just above */
            (void)arc;
        }
        tree_prune(&m->qtree, qn[p.n - 1]); /* an empty request leaves no node behind */
    }
    mutex_unlock(&m->qlock);
    kq_resource_free(&req_pod);
    if (rc != 0)
        kq_warn("ugm: pending not counted queue=%s error=\"%s\"", queue_path, kq_strerror(rc));
}

void kq_ugm_pending_sub(kq_ugm_t *m, const char *queue_path, const kq_resource_t *req)
{
    qpath_t p;
    kq_resource_t req_pod;
    if (!pending_prep(m, queue_path, req, &p, &req_pod))
        return;
    req = &req_pod;
    node_t *qn[KQ_UGM_MAX_DEPTH];
    mutex_lock(&m->qlock);
    tree_walk(&m->qtree, &p, NULL, qn);
    if (qn[p.n - 1] != NULL) {
        for (unsigned i = 0; i < p.n; i++)
            if (qn[i]->pending != NULL)
                res_sub(qn[i]->pending, req);
        tree_prune(&m->qtree, qn[p.n - 1]);
    }
    mutex_unlock(&m->qlock);
    kq_resource_free(&req_pod);
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

/* A resource map as YuniKorn's REST DAOs show it: the shim's names ("vcore" in
 * millicores for cpu, "memory" in bytes, "pods", other resources by their Kubernetes
 * name; apache/yunikorn-k8shim pkg/common/resource.go). New reference; NULL on ENOMEM. */
static json_t *dao_res(const kq_resource_t *r)
{
    json_t *o = json_object();
    for (uint32_t i = 0; o != NULL && i < r->n; i++) {
        const char *name = strcmp(KQ_RES_E(r)[i].name, "cpu") == 0 ? "vcore" : KQ_RES_E(r)[i].name;
        if (!jset(o, name, json_integer((json_int_t)KQ_RES_E(r)[i].value))) {
            json_decref(o);
            o = NULL;
        }
    }
    return o;
}

/* dao_res without the zero entries: a tracker's resourceUsage as yunikorn-core keeps it,
 * pruned after every change (pkg/scheduler/ugm/queue_tracker.go,
 * qt.resourceUsage.Prune()), so a name whose usage went back to 0, or that a pod asked 0
 * of, is not shown. NULL (no key: the DAOs' omitempty) when nothing is left. */
static json_t *dao_res_pruned(const kq_resource_t *r)
{
    json_t *o = NULL;
    for (uint32_t i = 0; i < r->n; i++) {
        if (KQ_RES_E(r)[i].value == 0)
            continue;
        const char *name = strcmp(KQ_RES_E(r)[i].name, "cpu") == 0 ? "vcore" : KQ_RES_E(r)[i].name;
        if ((o == NULL && (o = json_object()) == NULL) ||
            !jset(o, name, json_integer((json_int_t)KQ_RES_E(r)[i].value))) {
            json_decref(o);
            return json_null(); /* (jset fails on it: out of memory) */
        }
    }
    return o;
}

/* Sets key to dao_res(r) unless r is empty (the DAOs' omitempty). */
static bool jset_res(json_t *o, const char *key, const kq_resource_t *r)
{
    return r->n == 0 || jset(o, key, dao_res(r));
}

static int cmp_cnt(const void *a, const void *b)
{
    return strcmp((*(cnt_t *const *)a)->key, (*(cnt_t *const *)b)->key);
}

static int cmp_app(const void *a, const void *b)
{
    return strcmp((*(app_t *const *)a)->key, (*(app_t *const *)b)->key);
}

/* By parent, then by name: the children of a node are one run. */
static int cmp_node(const void *a, const void *b)
{
    const node_t *x = *(node_t *const *)a, *y = *(node_t *const *)b;
    uintptr_t px = (uintptr_t)x->parent, py = (uintptr_t)y->parent;
    if (px != py)
        return px < py ? -1 : 1;
    return strcmp(x->path + x->name_off, y->path + y->name_off);
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

/* Sorted array of the applications of a tree; NULL on ENOMEM (or when empty). */
static app_t **apps_sorted(const tree_t *t, size_t *n)
{
    *n = t->apps.n;
    if (*n == 0)
        return NULL;
    app_t **v = malloc(*n * sizeof(*v));
    if (v == NULL)
        return NULL;
    size_t i = 0;
    for (uint32_t k = 0; k < t->apps.cap; k++)
        if (t->apps.slot[k] != NULL)
            v[i++] = t->apps.slot[k];
    qsort(v, *n, sizeof(*v), cmp_app);
    return v;
}

/* What the views need that a tree keeps only implicitly: the children of each node (the
 * node index sorted by parent, then name) and, for user and group trees, the running
 * applications of each node. Built under the tree owner's lock in O(nodes log nodes +
 * applications x places x depth). */
typedef struct vapps {
    UT_hash_handle hh;      /* in view->apps, keyed by the node pointer */
    const node_t *node;
    const app_t *last;      /* the application appended last (one with several places
                             * under the node is listed once) */
    json_t *ids;            /* running application ids, sorted */
} vapps_t;

typedef struct view {
    node_t **v;             /* every node of the tree, sorted by cmp_node */
    size_t n;
    vapps_t *apps;          /* only the nodes with running applications */
} view_t;

static void view_free(view_t *vw)
{
    vapps_t *x, *tmp;
    HASH_ITER(hh, vw->apps, x, tmp) {
        HASH_DEL(vw->apps, x);
        json_decref(x->ids);
        free(x);
    }
    free(vw->v);
    memset(vw, 0, sizeof(*vw));
}

/* Fills vw for tree t (with the running applications when `apps`). false on ENOMEM
 * (vw is then empty). */
static bool view_build(view_t *vw, const tree_t *t, bool apps)
{
    memset(vw, 0, sizeof(*vw));
    size_t count = t->nodes.n;
    if (count > 0) {
        vw->v = malloc(count * sizeof(*vw->v));
        if (vw->v == NULL)
            return false;
        for (uint32_t k = 0; k < t->nodes.cap; k++)
            if (t->nodes.slot[k] != NULL)
                vw->v[vw->n++] = t->nodes.slot[k];
        qsort(vw->v, vw->n, sizeof(*vw->v), cmp_node);
    }
    if (!apps)
        return true;
    size_t na;
    app_t **av = apps_sorted(t, &na);
    bool ok = na == 0 || av != NULL;
    for (size_t i = 0; ok && i < na; i++) {
        for (unsigned k = 0; ok && k < av[i]->n_places; k++) {
            for (const node_t *x = place_at(av[i], k)->node; ok && x != NULL; x = x->parent) {
                vapps_t *e = NULL;
                HASH_FIND(hh, vw->apps, &x, sizeof(x), e);
                if (e == NULL) {
                    e = calloc(1, sizeof(*e));
                    if (e == NULL || (e->ids = json_array()) == NULL) {
                        free(e);
                        ok = false;
                        break;
                    }
                    e->node = x;
                    HASH_ADD(hh, vw->apps, node, sizeof(e->node), e);
                }
                if (e->last != av[i]) {
                    e->last = av[i];
                    ok = jappend(e->ids, json_string(av[i]->key));
                }
            }
        }
    }
    free(av);
    if (!ok)
        view_free(vw);
    return ok;
}

/* The children of n in the view, sorted by name (a run of vw->v). */
static node_t *const *view_children(const view_t *vw, const node_t *n, size_t *count)
{
    size_t lo = 0, hi = vw->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if ((uintptr_t)vw->v[mid]->parent < (uintptr_t)n)
            lo = mid + 1;
        else
            hi = mid;
    }
    size_t end = lo;
    while (end < vw->n && vw->v[end]->parent == n)
        end++;
    *count = end - lo;
    return vw->v + lo;
}

/* New reference to the running applications of n (an empty array when none). */
static json_t *view_apps(const view_t *vw, const node_t *n)
{
    vapps_t *e = NULL;
    HASH_FIND(hh, vw->apps, &n, sizeof(n), e);
    return e != NULL ? json_incref(e->ids) : json_array();
}

/* ["a","b"] of the application ids of a tree; NULL on ENOMEM. */
static json_t *app_ids_json(const tree_t *t)
{
    json_t *arr = json_array();
    size_t n;
    app_t **v = apps_sorted(t, &n);
    bool ok = arr != NULL && (n == 0 || v != NULL);
    for (size_t i = 0; ok && i < n; i++)
        ok = jappend(arr, json_string(v[i]->key));
    free(v);
    if (!ok) {
        json_decref(arr);
        return NULL;
    }
    return arr;
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

/* maxApplications and maxResources of the limit in force for who at the queue (omitted
 * when none). */
static bool usage_limits(json_t *o, const limits_t *L, const char *path, size_t len, bool group, const char *who)
{
    bool wildcard;
    const kq_limit_conf_t *lim = limit_for(level_find(L, path, len), group, who, &wildcard);
    bool ok = true;
    if (lim != NULL && lim->max_applications != 0 && json_object_get(o, "maxApplications") == NULL)
        ok = jset(o, "maxApplications", json_integer((json_int_t)lim->max_applications));
    if (ok && lim != NULL && lim->has_max_resources && json_object_get(o, "maxResources") == NULL)
        ok = jset(o, "maxResources", dao_res(&lim->max_resources));
    return ok;
}

static json_t *usage_json(const node_t *n, const view_t *vw, const limits_t *L, bool group, const char *who)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    kq_resource_t used;
    node_view(n, &used);
    json_t *apps = view_apps(vw, n);
    json_t *usage = dao_res_pruned(&used);
    bool ok = jset(o, "queuePath", json_stringn(n->path, n->path_len)) && apps != NULL;
    if (usage != NULL && ok && json_is_object(usage))
        ok = jset(o, "resourceUsage", usage);
    else if (usage != NULL)
        ok = (json_decref(usage), false);
    if (ok && json_array_size(apps) > 0)
        ok = jset(o, "runningApplications", json_incref(apps));
    json_decref(apps);
    ok = ok && usage_limits(o, L, n->path, n->path_len, group, who);
    size_t nc = 0;
    node_t *const *v = view_children(vw, n, &nc);
    json_t *children = ok && nc > 0 ? json_array() : NULL;
    if (nc > 0)
        ok = ok && jset(o, "children", children);
    for (size_t i = 0; ok && i < nc; i++)
        ok = jappend(children, usage_json(v[i], vw, L, group, who));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *usage_node_json(const char *path, size_t len, const limits_t *L, bool group, const char *who)
{
    json_t *o = json_object();
    if (o != NULL && (!jset(o, "queuePath", json_stringn(path, len)) || !usage_limits(o, L, path, len, group, who))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* The limit naming `who` itself at a level (for groups also the "*" limit of the group
 * "*"); wildcard limits of users are not theirs until they use the queue. */
static const kq_limit_conf_t *named_limit(const level_t *lv, bool group, const char *who)
{
    named_limit_t *e = NULL;
    HASH_FIND(hh, group ? lv->groups : lv->users, who, strlen(who), e);
    if (e != NULL)
        return e->lim;
    if (group && strcmp(who, KQ_UGM_WILDCARD) == 0)
        return lv->group_any;
    return NULL;
}

/* The node for path in the usage tree under root (created, with its limits, when
 * missing; children kept sorted). NULL on ENOMEM. */
static json_t *usage_ensure(json_t *root, const char *path, size_t len, const limits_t *L, bool group,
                            const char *who)
{
    json_t *n = root;
    size_t at = 4; /* "root" */
    while (n != NULL && at < len) {
        size_t end = at + 1;
        while (end < len && path[end] != '.')
            end++;
        json_t *children = json_object_get(n, "children");
        if (children == NULL) {
            children = json_array();
            if (!jset(n, "children", children))
                return NULL;
        }
        json_t *found = NULL;
        size_t i, pos = json_array_size(children);
        json_t *c;
        json_array_foreach(children, i, c) {
            const char *cp = json_string_value(json_object_get(c, "queuePath"));
            int cmp = cp != NULL ? strncmp(cp, path, end) : 1;
            if (cmp == 0 && cp[end] == '\0') {
                found = c;
                break;
            }
            if ((cmp > 0 || (cmp == 0 && cp[end] != '\0')) && pos == json_array_size(children))
                pos = i;
        }
        if (found == NULL) {
            found = usage_node_json(path, end, L, group, who);
            if (found == NULL || json_array_insert_new(children, pos, found) != 0)
                return NULL;
        }
        n = found;
        at = end;
    }
    return n;
}

/* Adds every queue where a configured limit names `who` to its usage tree, so that the
 * limits show before any use (YuniKorn creates the trackers of the users and groups
 * named in limits at configuration load: apache/yunikorn-core
 * pkg/scheduler/ugm/manager.go setUserLimits/setGroupLimits). */
static bool usage_add_configured(json_t *root, const limits_t *L, bool group, const char *who)
{
    if (L == NULL)
        return true;
    for (const level_t *lv = L->levels; lv != NULL; lv = lv->hh.next) {
        if (named_limit(lv, group, who) == NULL)
            continue;
        if (usage_ensure(root, lv->path, lv->path_len, L, group, who) == NULL)
            return false;
    }
    return true;
}

/* Whether a configured limit names `who` (see named_limit). */
static bool configured(const limits_t *L, bool group, const char *who)
{
    for (const level_t *lv = L != NULL ? L->levels : NULL; lv != NULL; lv = lv->hh.next)
        if (named_limit(lv, group, who) != NULL)
            return true;
    return false;
}

/* One user or group: its tracker (may be NULL: only configured), the limits. Takes and
 * releases the tracker's lock. */
static json_t *tracker_json(const char *name, tracker_t *t, const limits_t *L, bool group)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = jset(o, group ? "groupName" : "userName", json_string(name));
    json_t *queues = NULL;
    if (t != NULL)
        mutex_lock(&t->lock);
    if (ok && t != NULL && group) {
        json_t *apps = app_ids_json(&t->tree);
        ok = apps != NULL && jset(o, "users", keys_json(t->users)); /* kubequota's addition */
        if (ok && json_array_size(apps) > 0)
            ok = jset(o, "applications", json_incref(apps));
        json_decref(apps);
    } else if (ok && t != NULL) {
        json_t *groups = json_object();
        size_t na;
        app_t **av = apps_sorted(&t->tree, &na); /* keys in id order, not set order */
        ok = groups != NULL && (na == 0 || av != NULL);
        for (size_t k = 0; ok && k < na; k++)
            if (av[k]->group != NULL)
                ok = jset(groups, av[k]->key, json_stringn(av[k]->group->name, av[k]->group->name_len));
        free(av);
        if (ok && json_object_size(groups) > 0)
            ok = jset(o, "groups", json_incref(groups));
        json_decref(groups);
    }
    if (ok && t != NULL && t->tree.root != NULL) {
        view_t vw;
        ok = view_build(&vw, &t->tree, true);
        if (ok) {
            queues = usage_json(t->tree.root, &vw, L, group, name);
            ok = queues != NULL;
        }
        view_free(&vw);
    }
    if (t != NULL)
        mutex_unlock(&t->lock);
    if (ok && queues == NULL)
        ok = (queues = usage_node_json("root", 4, L, group, name)) != NULL;
    ok = ok && usage_add_configured(queues, L, group, name) && jset(o, "queues", json_incref(queues));
    json_decref(queues);
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

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every tracked name and every name a configured limit names (users: not "*"), sorted,
 * with its tracker or NULL: emit(ctx, element) for each, built one at a time (freed after
 * emit returns). 0, KQ_ENOMEM or emit's non-zero result. */
static int trackers_each(tracker_t **v, size_t n, const limits_t *L, bool group, kq_ugm_emit_fn emit, void *ctx)
{
    json_t *set = json_object();
    bool ok = set != NULL;
    for (size_t i = 0; ok && i < n; i++)
        ok = jset(set, v[i]->name, json_integer((json_int_t)i));
    for (const level_t *lv = L != NULL ? L->levels : NULL; ok && lv != NULL; lv = lv->hh.next) {
        for (const named_limit_t *e = group ? lv->groups : lv->users; ok && e != NULL; e = e->hh.next)
            if (json_object_get(set, e->name) == NULL)
                ok = jset(set, e->name, json_integer(-1));
        if (ok && group && lv->group_any != NULL && json_object_get(set, KQ_UGM_WILDCARD) == NULL)
            ok = jset(set, KQ_UGM_WILDCARD, json_integer(-1));
    }
    size_t count = ok ? json_object_size(set) : 0, k = 0;
    const char **names = count > 0 ? malloc(count * sizeof(*names)) : NULL;
    ok = ok && (count == 0 || names != NULL);
    const char *key;
    json_t *val;
    if (ok)
        json_object_foreach(set, key, val) names[k++] = key;
    if (ok && count > 1)
        qsort(names, count, sizeof(*names), cmp_str);
    int rc = ok ? 0 : KQ_ENOMEM;
    for (size_t i = 0; rc == 0 && i < count; i++) {
        json_int_t idx = json_integer_value(json_object_get(set, names[i]));
        json_t *e = tracker_json(names[i], idx >= 0 ? v[idx] : NULL, L, group);
        rc = e != NULL ? emit(ctx, e) : KQ_ENOMEM;
        json_decref(e);
    }
    free(names);
    json_decref(set);
    return rc;
}

static int append_emit(void *ctx, json_t *e)
{
    return json_array_append(ctx, e) == 0 ? 0 : KQ_ENOMEM;
}

/* The same, as one array (new reference; NULL on ENOMEM). */
static json_t *trackers_all_json(tracker_t **v, size_t n, const limits_t *L, bool group)
{
    json_t *out = json_array();
    if (out != NULL && trackers_each(v, n, L, group, append_emit, out) != 0) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

static int trackers_stream(kq_ugm_t *m, bool group, kq_ugm_emit_fn emit, void *ctx)
{
    if (m == NULL)
        return KQ_EINVAL;
    size_t n;
    limits_t *L;
    tracker_t **v = view_pin(m, group, NULL, &n, &L);
    int rc = trackers_each(v, n, L, group, emit, ctx);
    view_unpin(m, group, v, n, L);
    return rc;
}

int kq_ugm_users_each(kq_ugm_t *m, kq_ugm_emit_fn emit, void *ctx)
{
    return trackers_stream(m, false, emit, ctx);
}

int kq_ugm_groups_each(kq_ugm_t *m, kq_ugm_emit_fn emit, void *ctx)
{
    return trackers_stream(m, true, emit, ctx);
}

static json_t *trackers_json(kq_ugm_t *m, bool group, const char *name)
{
    if (m == NULL)
        return NULL;
    size_t n;
    limits_t *L;
    tracker_t **v = view_pin(m, group, name, &n, &L);
    json_t *out = NULL;
    bool ok = true;
    if (name == NULL)
        ok = (out = trackers_all_json(v, n, L, group)) != NULL;
    else if (n == 1 || configured(L, group, name))
        out = tracker_json(name, n == 1 ? v[0] : NULL, L, group);
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

/* The tracked node of configured queue c below n (NULL when n is). */
static node_t *child_find(const tree_t *t, const node_t *n, const kq_queue_conf_t *c)
{
    return n != NULL ? node_find(t, c->path, strlen(c->path)) : NULL;
}

/* Fields every queue object has; conf may be NULL (a tracked queue the configuration
 * does not define). m->qlock is held. */
static bool queue_common(json_t *o, const char *partition, const node_t *n, const char *path,
                         const char *parent_path)
{
    bool ok = jset(o, "queuename", json_string(path)) && jset(o, "status", json_string("Active")) &&
              jset(o, "partition", json_string(partition));
    if (ok && parent_path != NULL)
        ok = jset(o, "parent", json_string(parent_path));
    kq_resource_t used;
    const kq_resource_t *pending = n != NULL && n->pending != NULL ? n->pending : &empty_res;
    node_view(n, &used);
    ok = ok && jset_res(o, "allocatedResource", &used) && jset_res(o, "pendingResource", pending);
    if (ok && n != NULL && n->running > 0)
        ok = jset(o, "runningApps", json_integer((json_int_t)n->running));
    /* Fields YuniKorn always sends (no omitempty); kubequota has no priorities and no
     * preemption between queues. */
    ok = ok && jset(o, "currentPriority", json_integer(0)) && jset(o, "prioritySorting", json_false()) &&
         jset(o, "preemptionEnabled", json_false()) && jset(o, "isPreemptionFence", json_false()) &&
         jset(o, "isPriorityFence", json_false());
    return ok;
}

static json_t *unmanaged_queue_json(const view_t *vw, const node_t *n, const char *partition,
                                    const char *parent_path)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = queue_common(o, partition, n, n->path, parent_path) &&
              jset(o, "isLeaf", json_boolean(n->n_children == 0)) &&
              jset(o, "isManaged", json_false());
    size_t nc = 0;
    node_t *const *v = view_children(vw, n, &nc);
    json_t *children = ok && nc > 0 ? json_array() : NULL, *names = ok && nc > 0 ? json_array() : NULL;
    if (nc > 0)
        ok = ok && jset(o, "children", children) && jset(o, "childNames", names);
    for (size_t i = 0; ok && i < nc; i++)
        ok = jappend(children, unmanaged_queue_json(vw, v[i], partition, n->path)) &&
             jappend(names, json_string(v[i]->path));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A parent queue's "template" (YuniKorn's dao.TemplateInfo, yunikorn-core
 * pkg/scheduler/objects/template/template.go GetTemplateInfo): the child template in force
 * there (its own, else the nearest ancestor's, as YuniKorn's parents inherit it); none when
 * it sets nothing (template.FromConf's isChildTemplateEmpty). Resources only when every
 * value is above zero (resources.StrictlyGreaterThanZero), properties without empty keys
 * or values. false on ENOMEM. */
static bool template_json(json_t *o, const kq_child_template_t *t)
{
    bool max_pos = t->has_max && t->max.n > 0, gua_pos = t->has_guaranteed && t->guaranteed.n > 0;
    for (uint32_t i = 0; i < t->max.n && max_pos; i++)
        max_pos = KQ_RES_E(&t->max)[i].value > 0;
    for (uint32_t i = 0; i < t->guaranteed.n && gua_pos; i++)
        gua_pos = KQ_RES_E(&t->guaranteed)[i].value > 0;
    size_t props = 0;
    for (size_t i = 0; i < t->n_properties; i++)
        props += t->properties[i].key[0] != '\0' && t->properties[i].value[0] != '\0';
    bool conf_empty = t->max_applications == 0 && props == 0 && !(t->has_max && t->max.n > 0) &&
                      !(t->has_guaranteed && t->guaranteed.n > 0);
    if (conf_empty)
        return true;
    json_t *tmpl = json_object();
    bool ok = jset(o, "template", tmpl);
    if (ok && t->max_applications != 0)
        ok = jset(tmpl, "maxApplications", json_integer((json_int_t)t->max_applications));
    if (ok && max_pos)
        ok = jset_res(tmpl, "maxResource", &t->max);
    if (ok && gua_pos)
        ok = jset_res(tmpl, "guaranteedResource", &t->guaranteed);
    if (ok && props > 0) {
        json_t *p = json_object();
        ok = jset(tmpl, "properties", p);
        for (size_t i = 0; ok && i < t->n_properties; i++)
            if (t->properties[i].key[0] != '\0' && t->properties[i].value[0] != '\0')
                ok = jset(p, t->properties[i].key, json_string(t->properties[i].value));
    }
    return ok;
}

static json_t *managed_queue_json(const tree_t *t, const view_t *vw, const kq_partition_conf_t *part,
                                  const kq_queue_conf_t *q, const node_t *n, const char *partition)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    bool ok = queue_common(o, partition, n, q->path, q->parent != NULL ? q->parent->path : NULL) &&
              jset(o, "isLeaf", json_boolean(!q->is_parent)) && jset(o, "isManaged", json_true());
    if (ok && q->has_max)
        ok = jset_res(o, "maxResource", &q->max);
    if (ok && q->has_guaranteed)
        ok = jset_res(o, "guaranteedResource", &q->guaranteed);
    if (ok && q->max_applications != 0)
        ok = jset(o, "maxRunningApps", json_integer((json_int_t)q->max_applications));
    if (ok && q->is_parent && q->child_template != NULL)
        ok = template_json(o, q->child_template);
    if (ok && q->n_properties > 0) {
        json_t *props = json_object();
        ok = jset(o, "properties", props);
        for (size_t i = 0; ok && i < q->n_properties; i++)
            ok = jset(props, q->properties[i].key, json_string(q->properties[i].value));
    }
    json_t *children = ok ? json_array() : NULL, *names = ok ? json_array() : NULL;
    ok = ok && children != NULL && names != NULL;
    for (size_t i = 0; ok && i < q->n_children; i++) {
        const kq_queue_conf_t *c = q->children[i];
        ok = jappend(children, managed_queue_json(t, vw, part, c, child_find(t, n, c), partition)) &&
             jappend(names, json_string(c->path));
    }
    /* Tracked children the configuration does not define. */
    size_t nc = 0;
    node_t *const *v = n != NULL ? view_children(vw, n, &nc) : NULL;
    for (size_t i = 0; ok && i < nc; i++)
        if (kq_config_queue(part, v[i]->path) == NULL)
            ok = jappend(children, unmanaged_queue_json(vw, v[i], partition, q->path)) &&
                 jappend(names, json_string(v[i]->path));
    if (ok && json_array_size(children) > 0)
        ok = jset(o, "children", json_incref(children)) && jset(o, "childNames", json_incref(names));
    json_decref(children);
    json_decref(names);
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
    view_t vw;
    mutex_lock(&m->qlock);
    if (!view_build(&vw, &m->qtree, false)) {
        out = NULL;
    } else if (L != NULL) {
        out = managed_queue_json(&m->qtree, &vw, L->part, L->part->root, m->qtree.root, m->partition);
        if (out != NULL && !dynamic_view_limits(m, L->part, out)) {
            json_decref(out);
            out = NULL;
        }
    } else if (m->qtree.root != NULL) {
        out = unmanaged_queue_json(&vw, m->qtree.root, m->partition, NULL);
    } else {
        out = json_object();
        if (out != NULL && !queue_common(out, m->partition, NULL, "root", NULL)) {
            json_decref(out);
            out = NULL;
        }
        if (out != NULL && (!jset(out, "isLeaf", json_false()) || !jset(out, "isManaged", json_false()))) {
            json_decref(out);
            out = NULL;
        }
    }
    mutex_unlock(&m->qlock);
    view_free(&vw);

    mutex_lock(&m->lock);
    limits_t *dead = limits_put(L);
    mutex_unlock(&m->lock);
    limits_free(dead);
    return out;
}

/* ------------------------------------------------------------------------------------ */
/* Dynamic queues (placement rules with create: true)                                   */
/* ------------------------------------------------------------------------------------ */

/* A dynamic queue exists while the queue tree has a node for it (something counted or
 * pending there) and is removed with that node when it empties (tree_prune); nothing else
 * is kept. Its limits come from the child template in force at its nearest configured
 * ancestor (YuniKorn: a parent without a template inherits its parent's; only leaves get
 * the template's values, apache/yunikorn-site docs/user_guide/queue_config.md "Child
 * Template"). */
static const kq_child_template_t *dynamic_template(const op_t *op, unsigned i)
{
    if (i + 1 != op->path.n || op->lim == NULL)
        return NULL; /* only the pod's own (leaf) queue takes the template */
    for (unsigned k = i; k-- > 0;) {
        const level_t *lv = level_find(op->lim, op->path.s, op->path.end[k]);
        if (lv != NULL)
            return lv->q->is_parent ? lv->q->child_template : NULL;
    }
    return NULL;
}

/* Limits a namespace's annotations set on a dynamic queue (YuniKorn: the shim's
 * namespace.quota / namespace.maxApps tags, applied by the core to an unmanaged queue when
 * an application is added to it; apache/yunikorn-core pkg/scheduler/partition.go
 * addApplication). They replace the child template's values. qlock guards the table. */
typedef struct dynlim {
    UT_hash_handle hh;
    kq_child_template_t lim; /* has_max, max, max_applications */
    char path[];
} dynlim_t;

static void dynlims_free(kq_ugm_t *m)
{
    dynlim_t *d, *tmp;
    HASH_ITER(hh, m->dynlims, d, tmp) {
        HASH_DEL(m->dynlims, d);
        kq_resource_free(&d->lim.max);
        free(d);
    }
}

int kq_ugm_set_dynamic_limits(kq_ugm_t *m, const char *queue_path, const kq_resource_t *max, uint64_t max_apps)
{
    if (m == NULL || queue_path == NULL)
        return KQ_EINVAL;
    size_t len = strlen(queue_path);
    if (len > KQ_UGM_PATH_MAX)
        return KQ_EINVAL;
    dynlim_t *fresh = NULL;
    if (max != NULL || max_apps != 0) {
        fresh = calloc(1, sizeof(*fresh) + len + 1);
        if (fresh == NULL)
            return KQ_ENOMEM;
        memcpy(fresh->path, queue_path, len + 1);
        fresh->lim.has_max = max != NULL;
        if (max != NULL && kq_resource_copy(&fresh->lim.max, max) != 0) {
            free(fresh);
            return KQ_ENOMEM;
        }
        fresh->lim.max_applications = max_apps;
    }
    dynlim_t *old = NULL;
    mutex_lock(&m->qlock);
    HASH_FIND(hh, m->dynlims, queue_path, len, old);
    if (old != NULL)
        HASH_DEL(m->dynlims, old);
    if (fresh != NULL)
        HASH_ADD(hh, m->dynlims, path[0], len, fresh);
    mutex_unlock(&m->qlock);
    if (old != NULL)
        kq_resource_free(&old->lim.max);
    free(old);
    return 0;
}

static int check_dynamic_queue(const op_t *op, unsigned i, char *reason, size_t rlen)
{
    const kq_child_template_t *t = dynamic_template(op, i);
    const char *from = "child template";
    if (i + 1 == op->path.n && op->m->dynlims != NULL) {
        dynlim_t *d = NULL;
        HASH_FIND(hh, op->m->dynlims, op->path.s, op->path.end[i], d);
        if (d != NULL) {
            t = &d->lim;
            from = "namespace annotation";
        }
    }
    if (t == NULL)
        return 0;
    const node_t *n = op->nodes[T_QUEUE][i];
    kq_resource_t used;
    node_view(n, &used);
    size_t running = n != NULL ? n->running : 0;
    bool new_here = i >= op->shared[T_QUEUE];
    const char *failed = NULL;
    char what[512];
    if (t->max_applications != 0 && new_here && running + 1 > t->max_applications) {
        kq_errf(reason, rlen, "queue %.*s: maxapplications (%s) exceeded: applications %zu "
                   "running + 1 new > %" PRIu64 " max", (int)op->path.end[i], op->path.s, from, running,
                   t->max_applications);
        kq_denial_set(op->kind, KQ_DENIAL_OVER_LIMIT);
        return KQ_EDENIED;
    }
    if (t->has_max && !kq_resource_fits(&used, op->req, &t->max, &failed)) {
        kq_denial_set(op->kind, overrun_text(failed, &used, op->req, &t->max, what, sizeof(what)));
        kq_errf(reason, rlen, "queue %.*s: resources.max (%s) exceeded: %s",
                   (int)op->path.end[i], op->path.s, from, what);
        return KQ_EDENIED;
    }
    return 0;
}

/* The queue view: a dynamic leaf shows the limits it is held to (namespace limits, else the
 * child template in force) as maxResource / maxRunningApps, like YuniKorn's queue DAO of a
 * queue built from a template. m->qlock is held. false on ENOMEM. */
static bool dynamic_view_limits(kq_ugm_t *m, const kq_partition_conf_t *part, json_t *q)
{
    json_t *children = json_object_get(q, "children");
    size_t i;
    json_t *c;
    json_array_foreach(children, i, c) {
        if (!dynamic_view_limits(m, part, c))
            return false;
    }
    if (json_is_true(json_object_get(q, "isManaged")) || !json_is_true(json_object_get(q, "isLeaf")))
        return true;
    const char *path = json_string_value(json_object_get(q, "queuename"));
    if (path == NULL)
        return true;
    const kq_child_template_t *t = NULL;
    dynlim_t *d = NULL;
    HASH_FIND(hh, m->dynlims, path, strlen(path), d);
    if (d != NULL) {
        t = &d->lim;
    } else {
        char buf[KQ_UGM_PATH_MAX + 1];
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *dot = strrchr(buf, '.'); dot != NULL && t == NULL; dot = strrchr(buf, '.')) {
            *dot = '\0';
            const kq_queue_conf_t *a = kq_config_queue(part, buf);
            if (a != NULL) {
                t = a->is_parent ? a->child_template : NULL;
                break;
            }
        }
    }
    if (t == NULL)
        return true;
    if (t->has_max && !jset_res(q, "maxResource", &t->max))
        return false;
    if (t->max_applications != 0 && !jset(q, "maxRunningApps", json_integer((json_int_t)t->max_applications)))
        return false;
    return true;
}

kq_qkind_t kq_ugm_queue_kind(kq_ugm_t *m, const char *queue_path)
{
    if (m == NULL || queue_path == NULL)
        return KQ_QKIND_NONE;
    size_t len = strlen(queue_path);
    if (len > KQ_UGM_PATH_MAX)
        return KQ_QKIND_NONE;
    char key[KQ_UGM_PATH_MAX + 1];
    for (size_t i = 0; i <= len; i++)
        key[i] = queue_path[i] >= 'A' && queue_path[i] <= 'Z' ? (char)(queue_path[i] - 'A' + 'a') : queue_path[i];
    mutex_lock(&m->qlock);
    const node_t *n = m->qtree.root != NULL ? node_find(&m->qtree, key, len) : NULL;
    kq_qkind_t k = n == NULL ? KQ_QKIND_NONE : n->n_children > 0 ? KQ_QKIND_PARENT : KQ_QKIND_LEAF;
    mutex_unlock(&m->qlock);
    return k;
}

void kq_ugm_set_dynamic_limits_hook(void *ugm, const char *queue_path, const kq_resource_t *max, uint64_t max_apps)
{
    int rc = kq_ugm_set_dynamic_limits(ugm, queue_path, max, max_apps);
    if (rc != 0)
        kq_warn("ugm: dynamic queue limits not set queue=%s error=\"%s\"", queue_path, kq_strerror(rc));
}

/* Placement's submit check (kq_place_in_t.may_submit): the same ACL rule as an increase
 * (check_acl: the queue's or a parent's submitacl or adminacl allows the user or one of its
 * groups; no ACL anywhere in the partition: everybody), for the configured queue q. Takes
 * the manager lock only to pin the limit tables. */
bool kq_ugm_may_submit_hook(void *ugm, const kq_queue_conf_t *q, const char *user, const char *const *groups,
                            size_t n_groups)
{
    kq_ugm_t *m = ugm;
    if (m == NULL || q == NULL || user == NULL)
        return true;
    mutex_lock(&m->lock);
    limits_t *L = limits_get(m);
    mutex_unlock(&m->lock);
    bool ok = L == NULL || !L->acls;
    kq_user_t u = {.name = user, .groups = groups, .n_groups = n_groups};
    for (const kq_queue_conf_t *x = q; !ok && x != NULL; x = x->parent) {
        const level_t *lv = level_find(L, x->path, strlen(x->path));
        ok = lv != NULL && (acl_allows(&lv->submit, &u) || acl_allows(&lv->admin, &u));
    }
    mutex_lock(&m->lock);
    limits_t *dead = limits_put(L);
    mutex_unlock(&m->lock);
    limits_free(dead);
    return ok;
}

kq_qkind_t kq_ugm_queue_kind_hook(void *ugm, const char *queue_path)
{
    return kq_ugm_queue_kind(ugm, queue_path);
}

/* Applications: a copy of each owner entry taken under m->lock, rendered after it. */
typedef struct app_row {
    char *id, *user, *queue;
    char **groups;
    size_t n_groups;
    uint64_t pods;
    kq_resource_t used;
} app_row_t;

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const app_row_t *)a)->id, ((const app_row_t *)b)->id);
}

static void rows_free(app_row_t *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        free(v[i].id);
        free(v[i].user);
        free(v[i].queue);
        for (size_t j = 0; j < v[i].n_groups; j++)
            free(v[i].groups[j]);
        free(v[i].groups);
        kq_resource_free(&v[i].used);
    }
    free(v);
}

int kq_ugm_apps_each(kq_ugm_t *m, const char *queue_path, kq_ugm_emit_fn emit, void *ctx)
{
    if (m == NULL)
        return KQ_EINVAL;
    qpath_t q;
    if (queue_path != NULL && parse_path(queue_path, &q) != 0)
        return 0; /* no such queue: no applications */
    bool ok = true;
    size_t n = 0;
    mutex_lock(&m->lock);
    size_t cap = 0;
    for (owner_t *h = m->owners; h != NULL; h = h->hh.next)
        for (owner_t *o = h; o != NULL; o = o->next)
            cap++;
    app_row_t *v = cap > 0 ? calloc(cap, sizeof(*v)) : NULL;
    ok = cap == 0 || v != NULL;
    for (owner_t *h = m->owners, *o = h; ok && o != NULL; o = o->next != NULL ? o->next : (h = h->hh.next)) {
        if (o->pods == 0 || (queue_path != NULL && strcmp(o->queue, q.s) != 0))
            continue;
        app_row_t *r = &v[n++];
        r->id = strdup(o->app);
        r->user = strdup(o->user.name);
        r->queue = strdup(o->queue);
        r->groups = o->user.n_groups > 0 ? calloc(o->user.n_groups, sizeof(char *)) : NULL;
        ok = r->id != NULL && r->user != NULL && r->queue != NULL && (o->user.n_groups == 0 || r->groups != NULL);
        for (size_t j = 0; ok && j < o->user.n_groups; j++) {
            r->groups[j] = strdup(o->user.groups[j]);
            ok = r->groups[j] != NULL;
            r->n_groups = j + 1;
        }
        r->pods = o->pods;
        ok = ok && owner_used(o, &r->used) == 0;
    }
    mutex_unlock(&m->lock);
    if (ok && n > 1)
        qsort(v, n, sizeof(*v), cmp_row);
    int rc = ok ? 0 : KQ_ENOMEM;
    /* one application's object at a time, from the rows copied under the lock */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        json_t *a = json_object(), *groups = json_array();
        ok = a != NULL && groups != NULL && jset(a, "applicationID", json_string(v[i].id)) &&
             jset_res(a, "usedResource", &v[i].used) && jset(a, "partition", json_string(m->partition)) &&
             jset(a, "queueName", json_string(v[i].queue)) && jset(a, "applicationState", json_string("Running")) &&
             jset(a, "user", json_string(v[i].user));
        for (size_t j = 0; ok && j < v[i].n_groups; j++)
            ok = jappend(groups, json_string(v[i].groups[j]));
        if (ok && v[i].n_groups > 0)
            ok = jset(a, "groups", json_incref(groups));
        json_decref(groups);
        rc = ok ? emit(ctx, a) : KQ_ENOMEM;
        json_decref(a);
    }
    rows_free(v, n);
    return rc;
}

json_t *kq_ugm_apps_json(kq_ugm_t *m, const char *queue_path)
{
    json_t *out = m != NULL ? json_array() : NULL;
    if (out != NULL && kq_ugm_apps_each(m, queue_path, append_emit, out) != 0) {
        json_decref(out);
        out = NULL;
    }
    return out;
}

int kq_ugm_totals(kq_ugm_t *m, kq_resource_t *used, size_t *apps, size_t *pods)
{
    if (m == NULL || used == NULL)
        return KQ_EINVAL;
    size_t na = 0, np = 0;
    mutex_lock(&m->lock);
    for (owner_t *h = m->owners, *o = h; o != NULL; o = o->next != NULL ? o->next : (h = h->hh.next)) {
        if (o->pods > 0) {
            na++;
            np += o->pods;
        }
    }
    mutex_unlock(&m->lock);
    mutex_lock(&m->qlock);
    int rc = node_copy(m->qtree.root, used);
    mutex_unlock(&m->qlock);
    if (rc != 0)
        return rc;
    if (apps != NULL)
        *apps = na;
    if (pods != NULL)
        *pods = np;
    return 0;
}
