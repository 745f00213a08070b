/* The claim table (include/kubequota/control/claims.h): ResourceClaims by namespace/name
 * with the devices each is charged now.
 *
 * DESIGN: a uthash table under one mutex, a leaf lock (the ledger calls in with its own
 * held; nothing here calls out). Relists use generations: resync_begin bumps gen, put
 * stamps the entry, resync_end drops entries with an older stamp and reports them after
 * unlocking.
 */
#include "kubequota/control/claims.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "kubequota/control/slices.h"

typedef struct centry {
    UT_hash_handle hh;
    char *uid;
    size_t ns_len;      /* key is "<ns>/<name>": ns is key[0..ns_len) */
    kq_resource_t dev;  /* what it is charged now: base + counters */
    kq_resource_t base; /* devices per class, without the counters (slices.h) */
    kq_claim_dev_t *devs; /* allocated devices (owned), to recount counters when slices change */
    size_t n_devs;
    bool allocated;
    uint64_t gen;
    char **reserved;    /* status.reservedFor pod uids, in order */
    size_t n_reserved;
    char key[];
} centry_t;

struct kq_claims {
    pthread_mutex_t mu;
    kq_slices_t *slices; /* kq_claims_set_slices (borrowed), or NULL: no counters */
    centry_t *table;
    uint64_t gen;
    bool resyncing;
    size_t n_allocated;
};

static void centry_free(centry_t *e)
{
    if (e == NULL)
        return;
    free(e->uid);
    kq_resource_free(&e->dev);
    kq_resource_free(&e->base);
    kq_claim_t tmp = {.devs = e->devs, .n_devs = e->n_devs}; /* frees the devices */
    kq_claim_clear(&tmp);
    for (size_t i = 0; i < e->n_reserved; i++)
        free(e->reserved[i]);
    free(e->reserved);
    free(e);
}

/* "<ns>/<name>" into buf; false when it does not fit. */
static bool make_key(char *buf, size_t len, const char *ns, const char *name)
{
    int n = snprintf(buf, len, "%s/%s", ns ? ns : "default", name ? name : "");
    return n > 0 && (size_t)n < len;
}

#define KEY_MAX 512 /* namespace (63) + '/' + name (253), with room */

kq_claims_t *kq_claims_new(void)
{
    kq_claims_t *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    return c;
}

void kq_claims_free(kq_claims_t *c)
{
    if (c == NULL)
        return;
    centry_t *e, *tmp;
    HASH_ITER(hh, c->table, e, tmp) {
        HASH_DEL(c->table, e);
        centry_free(e);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

/* ---- counters of partitionable devices (issue 39; slices.h) ----
 * An allocated claim's charge is its devices per class (base) plus what its devices consume
 * of their pools' shared counters, as the ResourceSlices say now. The counters are looked up
 * at put (before the table lock) and again on kq_claims_recount when slices change (under
 * the table lock, then the slices' own: claims -> slices, both leaves otherwise). */

void kq_claims_set_slices(kq_claims_t *c, kq_slices_t *slices)
{
    c->slices = slices;
}

/* e->dev = e->base + the counters of e->devs. 0, KQ_ENOMEM/KQ_ERANGE (e->dev unchanged). */
static int add_counters(kq_claims_t *c, centry_t *e)
{
    if (c->slices == NULL || e->n_devs == 0)
        return 0;
    kq_resource_t sum = KQ_RESOURCE_EMPTY;
    int rc = kq_resource_copy(&sum, &e->base);
    if (rc == 0)
        rc = kq_slices_devs_counters(c->slices, e->devs, e->n_devs, &sum, NULL);
    if (rc == 0)
        kq_resource_move(&e->dev, &sum);
    kq_resource_free(&sum);
    return rc;
}

size_t kq_claims_recount(kq_claims_t *c, void (*changed)(void *ud, const char *ns, const char *name), void *ud)
{
    char **keys = NULL;
    size_t n = 0, cap = 0;
    pthread_mutex_lock(&c->mu);
    centry_t *e, *tmp;
    HASH_ITER(hh, c->table, e, tmp) {
        if (e->n_devs == 0)
            continue;
        kq_resource_t before = KQ_RESOURCE_EMPTY;
        if (kq_resource_copy(&before, &e->dev) != 0 || add_counters(c, e) != 0) {
            kq_resource_free(&before);
            continue; /* ENOMEM: it keeps its charge; the next slice change tries again */
        }
        if (!kq_resource_equal(&before, &e->dev)) {
            if (n == cap) {
                size_t nc = cap ? cap * 2 : 16;
                char **k2 = realloc(keys, nc * sizeof(*keys));
                if (k2 != NULL) {
                    keys = k2;
                    cap = nc;
                }
            }
            if (n < cap && (keys[n] = strdup(e->key)) != NULL)
                n++;
        }
        kq_resource_free(&before);
    }
    pthread_mutex_unlock(&c->mu);
    for (size_t i = 0; i < n; i++) {
        char *slash = strchr(keys[i], '/');
        if (slash != NULL && changed != NULL) {
            *slash = '\0';
            changed(ud, keys[i], slash + 1);
        }
        free(keys[i]);
    }
    free(keys);
    return n;
}

int kq_claims_put(kq_claims_t *c, kq_claim_t *claim, bool *changed)
{
    char key[KEY_MAX];
    int rc = KQ_ENOMEM;
    if (changed != NULL)
        *changed = false;
    if (!make_key(key, sizeof(key), claim->ns, claim->name)) {
        kq_claim_clear(claim);
        return KQ_EINVAL;
    }
    size_t kl = strlen(key);
    centry_t *n = calloc(1, sizeof(*n) + kl + 1);
    if (n == NULL)
        goto out;
    memcpy(n->key, key, kl + 1);
    n->ns_len = strlen(claim->ns);
    n->uid = claim->uid;
    claim->uid = NULL;
    n->allocated = claim->allocated;
    n->reserved = claim->reserved;
    n->n_reserved = claim->n_reserved;
    claim->reserved = NULL;
    claim->n_reserved = 0;
    kq_resource_move(&n->dev, claim->allocated ? &claim->alloc : &claim->may);
    if (claim->extended) {
        /* kube-scheduler's special claim of the extended-resource path: it was made from the
         * pod's container requests (one request per extended resource, with its count),
         * which the pod is already charged as devices of the class (pod.h
         * kq_pod_set_extended_mapper): its device counts go, its counters stay (slices.h) */
        kq_resource_t mapped = KQ_RESOURCE_EMPTY;
        if (kq_resource_copy(&mapped, &n->dev) != 0) {
            centry_free(n);
            goto out;
        }
        kq_slices_extended_dedup(&n->dev, &mapped);
        kq_resource_free(&mapped);
    }
    if (claim->allocated && claim->n_devs > 0) {
        n->devs = claim->devs;
        n->n_devs = claim->n_devs;
        claim->devs = NULL;
        claim->n_devs = 0;
        if (kq_resource_copy(&n->base, &n->dev) != 0 || add_counters(c, n) != 0) {
            centry_free(n);
            goto out;
        }
    }
    centry_t *old = NULL;
    pthread_mutex_lock(&c->mu);
    n->gen = c->gen;
    HASH_FIND_STR(c->table, key, old);
    if (old != NULL) {
        HASH_DEL(c->table, old);
        if (old->allocated)
            c->n_allocated--;
    }
    HASH_ADD_STR(c->table, key, n);
    if (n->allocated)
        c->n_allocated++;
    pthread_mutex_unlock(&c->mu);
    if (changed != NULL) {
        bool same = old != NULL && kq_resource_equal(&old->dev, &n->dev) && old->n_reserved == n->n_reserved;
        for (size_t i = 0; same && i < n->n_reserved; i++)
            same = strcmp(old->reserved[i], n->reserved[i]) == 0;
        *changed = !same;
    }
    centry_free(old);
    rc = 0;
out:
    kq_claim_clear(claim);
    return rc;
}

bool kq_claims_delete(kq_claims_t *c, const char *ns, const char *name)
{
    char key[KEY_MAX];
    if (!make_key(key, sizeof(key), ns, name))
        return false;
    centry_t *e = NULL;
    pthread_mutex_lock(&c->mu);
    HASH_FIND_STR(c->table, key, e);
    if (e != NULL) {
        HASH_DEL(c->table, e);
        if (e->allocated)
            c->n_allocated--;
    }
    pthread_mutex_unlock(&c->mu);
    centry_free(e);
    return e != NULL;
}

int kq_claims_devices(kq_claims_t *c, const char *ns, const char *name, kq_resource_t *sum)
{
    char key[KEY_MAX];
    if (c == NULL || !make_key(key, sizeof(key), ns, name))
        return KQ_ENOENT;
    centry_t *e = NULL;
    int rc;
    pthread_mutex_lock(&c->mu);
    HASH_FIND_STR(c->table, key, e);
    rc = e == NULL ? KQ_ENOENT : kq_resource_add(sum, &e->dev);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

long kq_claims_reserved_index(kq_claims_t *c, const char *ns, const char *name, const char *uid)
{
    char key[KEY_MAX];
    if (c == NULL || uid == NULL || !make_key(key, sizeof(key), ns, name))
        return -1;
    centry_t *e = NULL;
    long at = -1;
    pthread_mutex_lock(&c->mu);
    HASH_FIND_STR(c->table, key, e);
    for (size_t i = 0; e != NULL && i < e->n_reserved && at < 0; i++)
        if (strcmp(e->reserved[i], uid) == 0)
            at = (long)i;
    pthread_mutex_unlock(&c->mu);
    return at;
}

bool kq_claims_allocated(kq_claims_t *c, const char *ns, const char *name)
{
    char key[KEY_MAX];
    if (c == NULL || !make_key(key, sizeof(key), ns, name))
        return false;
    centry_t *e = NULL;
    pthread_mutex_lock(&c->mu);
    HASH_FIND_STR(c->table, key, e);
    bool a = e != NULL && e->allocated;
    pthread_mutex_unlock(&c->mu);
    return a;
}

void kq_claims_resync_begin(kq_claims_t *c)
{
    pthread_mutex_lock(&c->mu);
    c->gen++;
    c->resyncing = true;
    pthread_mutex_unlock(&c->mu);
}

size_t kq_claims_resync_end(kq_claims_t *c, void (*gone)(void *ud, const char *ns, const char *name), void *ud)
{
    centry_t *e, *tmp, *dropped = NULL;
    size_t n = 0;
    pthread_mutex_lock(&c->mu);
    if (c->resyncing) {
        HASH_ITER(hh, c->table, e, tmp) {
            if (e->gen == c->gen)
                continue;
            HASH_DEL(c->table, e);
            if (e->allocated)
                c->n_allocated--;
            e->hh.next = dropped; /* the handle as a free list */
            dropped = e;
            n++;
        }
        c->resyncing = false;
    }
    pthread_mutex_unlock(&c->mu);
    while (dropped != NULL) {
        e = dropped;
        dropped = e->hh.next;
        if (gone != NULL) {
            e->key[e->ns_len] = '\0';
            gone(ud, e->key, e->key + e->ns_len + 1);
        }
        centry_free(e);
    }
    return n;
}

size_t kq_claims_size(kq_claims_t *c, size_t *allocated)
{
    pthread_mutex_lock(&c->mu);
    size_t n = HASH_COUNT(c->table);
    if (allocated != NULL)
        *allocated = c->n_allocated;
    pthread_mutex_unlock(&c->mu);
    return n;
}
