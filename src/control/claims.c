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

typedef struct centry {
    UT_hash_handle hh;
    char *uid;
    size_t ns_len;      /* key is "<ns>/<name>": ns is key[0..ns_len) */
    kq_resource_t dev;  /* what it is charged now */
    bool allocated;
    uint64_t gen;
    char **reserved;    /* status.reservedFor pod uids, in order */
    size_t n_reserved;
    char key[];
} centry_t;

struct kq_claims {
    pthread_mutex_t mu;
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
