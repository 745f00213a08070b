/* DRA devices as published: ResourceSlices (the shared counters each device consumes) and
 * DeviceClasses (their extendedResourceName), for the claim charge (slices.h says what is
 * charged under which name, and why).
 *
 * DESIGN: three uthash tables behind one mutex (s->mu), a leaf lock: nothing outside this
 * module is called while it is held, and nothing here takes another lock.
 *   slices   slice name -> driver, pool, pool generation, the device keys it published
 *   devices  "driver\npool\ndevice" -> one record per slice publishing it (normally one;
 *            two while a driver moves a device between slices of a new pool generation),
 *            each with the counters the device consumes, summed over its counter sets
 *   pools    "driver\npool" -> the newest generation among its slices
 *   classes  class name -> extendedResourceName ("" when none)
 * A device counts when one of its records has its pool's newest generation. The informer
 * threads (one per resource) apply events; readers take the lock for one lookup.
 */
#include "kubequota/control/slices.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#include "kubequota/base/log.h"
#include "kubequota/kube/kube.h"

#define COUNTER_NAME_MAX 64 /* a counter's name is a C identifier of at most 32 (ours: 63) */
#define MAX_COUNTERS 64     /* per device: 2 counter sets x 32 counters */

/* ------------------------------------------------------------------ tables */

typedef struct counter {
    char name[COUNTER_NAME_MAX];
    int64_t value;
} counter_t;

typedef struct devrec {
    struct devrec *next;
    char *slice; /* owned copy of the publishing slice's name */
    int64_t generation;
    size_t ncounters;
    counter_t *counters; /* owned */
} devrec_t;

typedef struct device {
    char *key; /* "driver\npool\ndevice", owned */
    devrec_t *recs;
    UT_hash_handle hh;
} device_t;

typedef struct slice {
    char *name; /* owned */
    char *pool_key; /* "driver\npool", owned */
    int64_t generation;
    size_t ndev;
    char **devkeys; /* owned */
    bool seen;
    UT_hash_handle hh;
} slice_t;

typedef struct pool {
    char *key;
    int64_t generation;
    UT_hash_handle hh;
} pool_t;

typedef struct dclass {
    char *name;
    char *extended; /* "" when none */
    bool seen;
    UT_hash_handle hh;
} dclass_t;

struct kq_slices {
    pthread_mutex_t mu;
    slice_t *slices;
    device_t *devices;
    pool_t *pools;
    dclass_t *classes;
    atomic_uint_fast64_t generation;
    atomic_bool warned_devices_counter;
    void (*hook)(void *ud); /* kq_slices_set_hook: called after a slice event changed something */
    void *hook_ud;
    atomic_bool slices_listed; /* the slice informer delivered a full list */
    struct kq_watch *slice_watch, *class_watch;
};

static char *join(const char *a, const char *b, const char *c)
{
    size_t la = strlen(a), lb = strlen(b), lc = c ? strlen(c) : 0;
    char *k = malloc(la + lb + lc + 3);
    if (k == NULL)
        return NULL;
    memcpy(k, a, la);
    k[la] = '\n';
    memcpy(k + la + 1, b, lb);
    if (c) {
        k[la + 1 + lb] = '\n';
        memcpy(k + la + 2 + lb, c, lc);
        k[la + 2 + lb + lc] = '\0';
    } else {
        k[la + 1 + lb] = '\0';
    }
    return k;
}

static void devrec_free(devrec_t *r)
{
    if (r) {
        free(r->slice);
        free(r->counters);
        free(r);
    }
}

static void slice_free(slice_t *sl)
{
    if (sl == NULL)
        return;
    for (size_t i = 0; i < sl->ndev; i++)
        free(sl->devkeys[i]);
    free(sl->devkeys);
    free(sl->name);
    free(sl->pool_key);
    free(sl);
}

kq_slices_t *kq_slices_new(void)
{
    kq_slices_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    pthread_mutex_init(&s->mu, NULL);
    atomic_init(&s->generation, 1);
    return s;
}

void kq_slices_free(kq_slices_t *s)
{
    if (s == NULL)
        return;
    kq_kube_watch_stop(s->slice_watch);
    kq_kube_watch_stop(s->class_watch);
    slice_t *sl, *stmp;
    HASH_ITER(hh, s->slices, sl, stmp) {
        HASH_DEL(s->slices, sl);
        slice_free(sl);
    }
    device_t *d, *dtmp;
    HASH_ITER(hh, s->devices, d, dtmp) {
        HASH_DEL(s->devices, d);
        while (d->recs) {
            devrec_t *r = d->recs;
            d->recs = r->next;
            devrec_free(r);
        }
        free(d->key);
        free(d);
    }
    pool_t *p, *ptmp;
    HASH_ITER(hh, s->pools, p, ptmp) {
        HASH_DEL(s->pools, p);
        free(p->key);
        free(p);
    }
    dclass_t *c, *ctmp;
    HASH_ITER(hh, s->classes, c, ctmp) {
        HASH_DEL(s->classes, c);
        free(c->name);
        free(c->extended);
        free(c);
    }
    pthread_mutex_destroy(&s->mu);
    free(s);
}

uint64_t kq_slices_generation(const kq_slices_t *s)
{
    return atomic_load(&((kq_slices_t *)s)->generation);
}

static void bump(kq_slices_t *s)
{
    atomic_fetch_add(&s->generation, 1);
}

/* ------------------------------------------------------------------ slices (under s->mu) */

/* The newest generation among the pool's slices (after one was added, changed or removed). */
static void pool_refresh(kq_slices_t *s, const char *pool_key)
{
    int64_t gen = -1;
    slice_t *sl, *tmp;
    HASH_ITER(hh, s->slices, sl, tmp) {
        if (strcmp(sl->pool_key, pool_key) == 0 && sl->generation > gen)
            gen = sl->generation;
    }
    pool_t *p;
    HASH_FIND_STR(s->pools, pool_key, p);
    if (gen < 0) {
        if (p) {
            HASH_DEL(s->pools, p);
            free(p->key);
            free(p);
        }
        return;
    }
    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL || (p->key = strdup(pool_key)) == NULL) {
            free(p);
            return; /* ENOMEM: the pool reads as unknown; its devices are charged no counter */
        }
        HASH_ADD_KEYPTR(hh, s->pools, p->key, strlen(p->key), p);
    }
    p->generation = gen;
}

/* Removes the slice's device records and the slice itself (the pool is refreshed by the caller). */
static void slice_remove(kq_slices_t *s, slice_t *sl)
{
    for (size_t i = 0; i < sl->ndev; i++) {
        device_t *d;
        HASH_FIND_STR(s->devices, sl->devkeys[i], d);
        if (d == NULL)
            continue;
        for (devrec_t **pp = &d->recs; *pp;) {
            if (strcmp((*pp)->slice, sl->name) == 0) {
                devrec_t *r = *pp;
                *pp = r->next;
                devrec_free(r);
            } else {
                pp = &(*pp)->next;
            }
        }
        if (d->recs == NULL) {
            HASH_DEL(s->devices, d);
            free(d->key);
            free(d);
        }
    }
    HASH_DEL(s->slices, sl);
    slice_free(sl);
}

/* What one device of a slice consumes: counters summed by name over its counter sets. */
static int parse_counters(kq_slices_t *s, const json_t *dev, counter_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    const json_t *cc = json_object_get(dev, "consumesCounters");
    if (!json_is_array(cc) || json_array_size(cc) == 0)
        return 0;
    counter_t *v = calloc(MAX_COUNTERS, sizeof(*v));
    if (v == NULL)
        return KQ_ENOMEM;
    size_t nv = 0, i;
    const json_t *set;
    json_array_foreach(cc, i, set) {
        const json_t *counters = json_object_get(set, "counters");
        const char *cname;
        const json_t *c;
        json_object_foreach((json_t *)counters, cname, c) {
            const char *q = json_string_value(json_object_get(c, "value"));
            int64_t val;
            if (q == NULL || strlen(cname) >= COUNTER_NAME_MAX ||
                kq_quantity_parse("kubequota.io/counter", q, &val, NULL, 0) != 0)
                continue;
            if (strcmp(cname, KQ_DRA_DEVICES) == 0) {
                if (!atomic_exchange(&s->warned_devices_counter, true))
                    kq_warn("event=dra_counter_skipped counter=devices msg=\"a counter named devices would be "
                            "charged as the device count of its class; it is not charged\"");
                continue;
            }
            size_t k;
            for (k = 0; k < nv && strcmp(v[k].name, cname) != 0; k++)
                ;
            if (k == nv) {
                if (nv == MAX_COUNTERS)
                    continue;
                snprintf(v[nv].name, sizeof(v[nv].name), "%s", cname);
                v[nv++].value = 0;
            }
            if (v[k].value > INT64_MAX - val)
                v[k].value = INT64_MAX;
            else
                v[k].value += val;
        }
    }
    if (nv == 0) {
        free(v);
        return 0;
    }
    *out = v;
    *n = nv;
    return 0;
}

static int slice_add(kq_slices_t *s, const char *name, const char *driver, const char *pool, int64_t gen,
                     const json_t *devices)
{
    size_t ndev = json_is_array(devices) ? json_array_size(devices) : 0;
    slice_t *sl = calloc(1, sizeof(*sl));
    if (sl == NULL)
        return KQ_ENOMEM;
    sl->name = strdup(name);
    sl->pool_key = join(driver, pool, NULL);
    sl->devkeys = calloc(ndev ? ndev : 1, sizeof(char *));
    sl->generation = gen;
    sl->seen = true;
    if (sl->name == NULL || sl->pool_key == NULL || sl->devkeys == NULL) {
        slice_free(sl);
        return KQ_ENOMEM;
    }
    HASH_ADD_KEYPTR(hh, s->slices, sl->name, strlen(sl->name), sl);
    for (size_t i = 0; i < ndev; i++) {
        const json_t *dev = json_array_get(devices, i);
        const char *dname = json_string_value(json_object_get(dev, "name"));
        if (dname == NULL || *dname == '\0')
            continue;
        char *key = join(driver, pool, dname);
        devrec_t *r = calloc(1, sizeof(*r));
        if (key == NULL || r == NULL || (r->slice = strdup(name)) == NULL ||
            parse_counters(s, dev, &r->counters, &r->ncounters) != 0) {
            free(key);
            devrec_free(r);
            return KQ_ENOMEM; /* the caller removes the half-added slice */
        }
        r->generation = gen;
        device_t *d;
        HASH_FIND_STR(s->devices, key, d);
        if (d == NULL) {
            d = calloc(1, sizeof(*d));
            if (d == NULL) {
                free(key);
                devrec_free(r);
                return KQ_ENOMEM;
            }
            d->key = strdup(key);
            if (d->key == NULL) {
                free(d);
                free(key);
                devrec_free(r);
                return KQ_ENOMEM;
            }
            HASH_ADD_KEYPTR(hh, s->devices, d->key, strlen(d->key), d);
        }
        r->next = d->recs;
        d->recs = r;
        sl->devkeys[sl->ndev++] = key;
    }
    return 0;
}

int kq_slices_apply_slice(kq_slices_t *s, int type, const json_t *obj)
{
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    const json_t *spec = json_object_get(obj, "spec");
    const char *driver = json_string_value(json_object_get(spec, "driver"));
    const json_t *pool = json_object_get(spec, "pool");
    const char *pool_name = json_string_value(json_object_get(pool, "name"));
    if (name == NULL || driver == NULL || pool_name == NULL)
        return KQ_EINVAL;
    int64_t gen = json_integer_value(json_object_get(pool, "generation"));
    char *pool_key = join(driver, pool_name, NULL);
    if (pool_key == NULL)
        return KQ_ENOMEM;
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    slice_t *old;
    HASH_FIND_STR(s->slices, name, old);
    char *old_pool = NULL;
    if (old) {
        old_pool = old->pool_key;
        old->pool_key = NULL; /* kept for the refresh below */
        slice_remove(s, old);
    }
    if (type != KQ_WATCH_DELETED) {
        rc = slice_add(s, name, driver, pool_name, gen, json_object_get(spec, "devices"));
        if (rc != 0) {
            slice_t *half;
            HASH_FIND_STR(s->slices, name, half);
            if (half)
                slice_remove(s, half);
        }
    }
    pool_refresh(s, pool_key);
    if (old_pool && strcmp(old_pool, pool_key) != 0)
        pool_refresh(s, old_pool);
    pthread_mutex_unlock(&s->mu);
    free(old_pool);
    free(pool_key);
    bump(s);
    return rc;
}

/* ------------------------------------------------------------------ classes */

int kq_slices_apply_class(kq_slices_t *s, int type, const json_t *obj)
{
    const char *name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    if (name == NULL)
        return KQ_EINVAL;
    const char *ext = json_string_value(json_object_get(json_object_get(obj, "spec"), "extendedResourceName"));
    char *ext_copy = NULL;
    if (type != KQ_WATCH_DELETED && (ext_copy = strdup(ext ? ext : "")) == NULL)
        return KQ_ENOMEM;
    pthread_mutex_lock(&s->mu);
    dclass_t *c;
    HASH_FIND_STR(s->classes, name, c);
    bool changed = true;
    if (type == KQ_WATCH_DELETED) {
        if (c) {
            HASH_DEL(s->classes, c);
            free(c->name);
            free(c->extended);
            free(c);
        } else {
            changed = false;
        }
    } else if (c) {
        changed = strcmp(c->extended, ext_copy) != 0;
        free(c->extended);
        c->extended = ext_copy;
        c->seen = true;
        ext_copy = NULL;
    } else {
        c = calloc(1, sizeof(*c));
        if (c == NULL || (c->name = strdup(name)) == NULL) {
            free(c);
            pthread_mutex_unlock(&s->mu);
            free(ext_copy);
            return KQ_ENOMEM;
        }
        c->extended = ext_copy;
        c->seen = true;
        ext_copy = NULL;
        HASH_ADD_KEYPTR(hh, s->classes, c->name, strlen(c->name), c);
    }
    pthread_mutex_unlock(&s->mu);
    free(ext_copy);
    if (changed)
        bump(s);
    return 0;
}

void kq_slices_resync_begin(kq_slices_t *s, bool classes)
{
    pthread_mutex_lock(&s->mu);
    if (classes) {
        dclass_t *c, *tmp;
        HASH_ITER(hh, s->classes, c, tmp) c->seen = false;
    } else {
        slice_t *sl, *tmp;
        HASH_ITER(hh, s->slices, sl, tmp) sl->seen = false;
    }
    pthread_mutex_unlock(&s->mu);
}

void kq_slices_resync_end(kq_slices_t *s, bool classes)
{
    bool changed = false;
    pthread_mutex_lock(&s->mu);
    if (classes) {
        dclass_t *c, *tmp;
        HASH_ITER(hh, s->classes, c, tmp) {
            if (!c->seen) {
                HASH_DEL(s->classes, c);
                free(c->name);
                free(c->extended);
                free(c);
                changed = true;
            }
        }
    } else {
        slice_t *sl, *tmp;
        HASH_ITER(hh, s->slices, sl, tmp) {
            if (!sl->seen) {
                char *pk = sl->pool_key;
                sl->pool_key = NULL;
                slice_remove(s, sl);
                pool_refresh(s, pk);
                free(pk);
                changed = true;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (changed)
        bump(s);
}

/* ------------------------------------------------------------------ charges */

static const char *class_resource(const char *cls, const char *what)
{
    char buf[KQ_RES_NAME_MAX + 2];
    int n = snprintf(buf, sizeof(buf), "%s" KQ_DRA_CLASS_SUFFIX "%s", cls, what);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return NULL;
    return kq_resource_name(buf);
}

/* Adds v to name in r (a set local to the caller). */
static int add_to(kq_resource_t *r, const char *iname, int64_t v)
{
    bool present;
    int64_t cur = kq_resource_get(r, iname, &present);
    if (cur > INT64_MAX - v)
        return KQ_ERANGE;
    return kq_resource_put(r, iname, cur + v);
}

/* Under s->mu: the device's record of its pool's newest generation, or NULL. */
static const devrec_t *device_find(const kq_slices_t *s, const char *driver, const char *pool, const char *device)
{
    char *key = join(driver, pool, device), *pk = join(driver, pool, NULL);
    const devrec_t *found = NULL;
    if (key && pk) {
        device_t *d;
        pool_t *p;
        HASH_FIND_STR(s->devices, key, d);
        HASH_FIND_STR(s->pools, pk, p);
        if (d && p) {
            for (const devrec_t *r = d->recs; r; r = r->next)
                if (r->generation == p->generation)
                    found = r;
        }
    }
    free(key);
    free(pk);
    return found;
}

static int counters_into(const devrec_t *r, const char *cls, kq_resource_t *tmp)
{
    for (size_t i = 0; i < r->ncounters; i++) {
        const char *iname = class_resource(cls, r->counters[i].name);
        if (iname == NULL)
            return KQ_EINVAL;
        int rc = add_to(tmp, iname, r->counters[i].value);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int kq_slices_device_counters(const kq_slices_t *s, const char *device_class, const char *driver,
                              const char *pool, const char *device, kq_resource_t *out)
{
    kq_resource_t tmp;
    kq_resource_init(&tmp);
    int rc = kq_resource_copy(&tmp, out);
    if (rc != 0)
        return rc;
    kq_slices_t *m = (kq_slices_t *)s;
    pthread_mutex_lock(&m->mu);
    const devrec_t *r = device_find(s, driver, pool, device);
    rc = r ? counters_into(r, device_class, &tmp) : KQ_ENOENT;
    pthread_mutex_unlock(&m->mu);
    if (rc == 0)
        kq_resource_move(out, &tmp);
    kq_resource_free(&tmp);
    return rc;
}

/* The device class of a claim's request "name" or subrequest "name/sub"; NULL when unknown. */
static const char *request_class(const json_t *requests, const char *req)
{
    const char *slash = strchr(req, '/');
    size_t nlen = slash ? (size_t)(slash - req) : strlen(req);
    size_t i;
    const json_t *r;
    json_array_foreach(requests, i, r) {
        const char *name = json_string_value(json_object_get(r, "name"));
        if (name == NULL || strlen(name) != nlen || strncmp(name, req, nlen) != 0)
            continue;
        if (slash == NULL)
            return json_string_value(json_object_get(json_object_get(r, "exactly"), "deviceClassName"));
        size_t j;
        const json_t *sub;
        json_array_foreach(json_object_get(r, "firstAvailable"), j, sub) {
            const char *sn = json_string_value(json_object_get(sub, "name"));
            if (sn && strcmp(sn, slash + 1) == 0)
                return json_string_value(json_object_get(sub, "deviceClassName"));
        }
        return NULL;
    }
    return NULL;
}

/* Adds the counters of one allocated device (driver/pool/device, of class cls) to tmp;
 * a device no slice publishes is counted in *miss. m->mu held. */
static int device_counters_locked(const kq_slices_t *s, const char *cls, const char *driver, const char *pool,
                                  const char *device, kq_resource_t *tmp, size_t *miss)
{
    const devrec_t *r = device_find(s, driver, pool, device);
    if (r == NULL) {
        (*miss)++;
        return 0;
    }
    int rc = counters_into(r, cls, tmp);
    return rc == KQ_EINVAL ? 0 : rc; /* a class name too long for a resource name: nothing to charge it under */
}

int kq_slices_claim_counters(const kq_slices_t *s, const json_t *claim, kq_resource_t *out, size_t *missing)
{
    size_t miss = 0;
    const json_t *requests = json_object_get(json_object_get(json_object_get(claim, "spec"), "devices"), "requests");
    const json_t *results = json_object_get(
        json_object_get(json_object_get(json_object_get(claim, "status"), "allocation"), "devices"), "results");
    kq_resource_t tmp;
    kq_resource_init(&tmp);
    int rc = kq_resource_copy(&tmp, out);
    if (rc != 0)
        return rc;
    kq_slices_t *m = (kq_slices_t *)s;
    pthread_mutex_lock(&m->mu);
    size_t i;
    const json_t *res;
    json_array_foreach(results, i, res) {
        const char *req = json_string_value(json_object_get(res, "request"));
        const char *driver = json_string_value(json_object_get(res, "driver"));
        const char *pool = json_string_value(json_object_get(res, "pool"));
        const char *device = json_string_value(json_object_get(res, "device"));
        const char *cls = req ? request_class(requests, req) : NULL;
        if (cls == NULL || driver == NULL || pool == NULL || device == NULL)
            continue;
        if ((rc = device_counters_locked(s, cls, driver, pool, device, &tmp, &miss)) != 0)
            break;
    }
    pthread_mutex_unlock(&m->mu);
    if (rc == 0) {
        kq_resource_move(out, &tmp);
        if (missing)
            *missing = miss;
    }
    kq_resource_free(&tmp);
    return rc;
}

int kq_slices_devs_counters(const kq_slices_t *s, const kq_claim_dev_t *devs, size_t n, kq_resource_t *out,
                            size_t *missing)
{
    size_t miss = 0;
    kq_resource_t tmp;
    kq_resource_init(&tmp);
    int rc = kq_resource_copy(&tmp, out);
    if (rc != 0)
        return rc;
    kq_slices_t *m = (kq_slices_t *)s;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char cls[256];
        if (kq_claim_class_of(devs[i].res, cls, sizeof(cls)))
            rc = device_counters_locked(s, cls, devs[i].driver, devs[i].pool, devs[i].device, &tmp, &miss);
    }
    pthread_mutex_unlock(&m->mu);
    if (rc == 0) {
        kq_resource_move(out, &tmp);
        if (missing)
            *missing = miss;
    }
    kq_resource_free(&tmp);
    return rc;
}

void kq_slices_set_hook(kq_slices_t *s, void (*fn)(void *ud), void *ud)
{
    s->hook = fn;
    s->hook_ud = ud;
}

/* ------------------------------------------------------------------ the extended-resource path */

bool kq_slices_extended_class(const kq_slices_t *s, const char *name, char *buf, size_t len)
{
    size_t pl = strlen(KQ_DRA_IMPLICIT_PREFIX);
    if (strncmp(name, KQ_DRA_IMPLICIT_PREFIX, pl) == 0 && name[pl] != '\0') {
        snprintf(buf, len, "%s", name + pl);
        return true;
    }
    bool found = false;
    kq_slices_t *m = (kq_slices_t *)s;
    pthread_mutex_lock(&m->mu);
    dclass_t *c, *tmp;
    /* the oldest-named class wins when two name the same resource (kube-scheduler's cache
     * keeps one; a cluster should not have two) */
    HASH_ITER(hh, m->classes, c, tmp) {
        if (c->extended[0] && strcmp(c->extended, name) == 0 && (!found || strcmp(c->name, buf) < 0)) {
            snprintf(buf, len, "%s", c->name);
            found = true;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return found;
}

int kq_slices_extended_devices(const kq_slices_t *s, const kq_resource_t *requests, kq_resource_t *out)
{
    kq_resource_t tmp;
    kq_resource_init(&tmp);
    int rc = kq_resource_copy(&tmp, out);
    if (rc != 0)
        return rc;
    const kq_res_entry_t *e = KQ_RES_E(requests);
    for (uint32_t i = 0; i < requests->n && rc == 0; i++) {
        char cls[256];
        if (e[i].value == 0 || strchr(e[i].name, '/') == NULL)
            continue; /* native resources (cpu, memory, ...) are never backed by a class */
        if (strstr(e[i].name, KQ_DRA_CLASS_SUFFIX) != NULL)
            continue; /* a device charge itself */
        if (!kq_slices_extended_class(s, e[i].name, cls, sizeof(cls)))
            continue;
        const char *iname = class_resource(cls, KQ_DRA_DEVICES);
        if (iname != NULL)
            rc = add_to(&tmp, iname, e[i].value);
    }
    if (rc == 0)
        kq_resource_move(out, &tmp);
    kq_resource_free(&tmp);
    return rc;
}

bool kq_slices_is_extended_claim(const json_t *claim, const char *pod_uid)
{
    const json_t *md = json_object_get(claim, "metadata");
    const char *a = json_string_value(json_object_get(json_object_get(md, "annotations"), KQ_DRA_EXTENDED_CLAIM_ANNOTATION));
    if (a == NULL || strcmp(a, "true") != 0)
        return false;
    size_t i;
    const json_t *o;
    json_array_foreach(json_object_get(md, "ownerReferences"), i, o) {
        const char *kind = json_string_value(json_object_get(o, "kind"));
        const char *api = json_string_value(json_object_get(o, "apiVersion"));
        const char *uid = json_string_value(json_object_get(o, "uid"));
        if (!json_is_true(json_object_get(o, "controller")) || kind == NULL || strcmp(kind, "Pod") != 0 ||
            api == NULL || strcmp(api, "v1") != 0)
            continue;
        return pod_uid == NULL || (uid && strcmp(uid, pod_uid) == 0);
    }
    return false;
}

void kq_slices_extended_dedup(kq_resource_t *claim_charge, const kq_resource_t *pod_mapped)
{
    kq_res_entry_t *e = KQ_RES_E(claim_charge);
    for (uint32_t i = 0; i < claim_charge->n; i++) {
        if (!kq_dra_is_devices(e[i].name))
            continue;
        int64_t already = kq_resource_get(pod_mapped, e[i].name, NULL);
        e[i].value = e[i].value > already ? e[i].value - already : 0;
    }
}

/* ------------------------------------------------------------------ informers */

static void on_slice_begin(void *ud) { kq_slices_resync_begin(ud, false); }
static void on_class_begin(void *ud) { kq_slices_resync_begin(ud, true); }
static void on_class_end(void *ud) { kq_slices_resync_end(ud, true); }

static void changed(kq_slices_t *s)
{
    if (s->hook != NULL)
        s->hook(s->hook_ud);
}

static void on_slice_end(void *ud)
{
    kq_slices_t *s = ud;
    kq_slices_resync_end(s, false);
    atomic_store(&s->slices_listed, true);
    changed(s);
}

static void on_slice(void *ud, int type, json_t *obj)
{
    kq_slices_t *s = ud;
    int rc = kq_slices_apply_slice(s, type, obj);
    if (rc != 0)
        kq_warn("event=resourceslice_skipped error=\"%s\"", kq_strerror(rc));
    else if (atomic_load(&s->slices_listed)) /* the list's own items: once, at its end */
        changed(s);
}

static void on_class(void *ud, int type, json_t *obj)
{
    int rc = kq_slices_apply_class(ud, type, obj);
    if (rc != 0)
        kq_warn("event=deviceclass_skipped error=\"%s\"", kq_strerror(rc));
}

int kq_slices_watch_start(kq_slices_t *s, struct kq_kube *k)
{
    kq_watch_handler_t sh = {.list_begin = on_slice_begin, .object = on_slice, .list_end = on_slice_end, .ud = s};
    kq_watch_handler_t ch = {.list_begin = on_class_begin, .object = on_class, .list_end = on_class_end, .ud = s};
    s->slice_watch = kq_kube_watch_start(k, "/apis/resource.k8s.io/v1/resourceslices", NULL, &sh);
    s->class_watch = kq_kube_watch_start(k, "/apis/resource.k8s.io/v1/deviceclasses", NULL, &ch);
    if (s->slice_watch == NULL || s->class_watch == NULL) {
        kq_kube_watch_stop(s->slice_watch);
        kq_kube_watch_stop(s->class_watch);
        s->slice_watch = s->class_watch = NULL;
        return KQ_ENOMEM;
    }
    return 0;
}

bool kq_slices_synced(const kq_slices_t *s)
{
    return (s->slice_watch == NULL || kq_watch_synced(s->slice_watch)) &&
           (s->class_watch == NULL || kq_watch_synced(s->class_watch));
}

void kq_slices_stats(const kq_slices_t *s, size_t *slices, size_t *devices, size_t *classes)
{
    kq_slices_t *m = (kq_slices_t *)s;
    pthread_mutex_lock(&m->mu);
    size_t nd = 0;
    device_t *d, *tmp;
    HASH_ITER(hh, m->devices, d, tmp) {
        for (devrec_t *r = d->recs; r; r = r->next)
            if (r->ncounters) {
                nd++;
                break;
            }
    }
    size_t nc = 0;
    dclass_t *c, *ctmp;
    HASH_ITER(hh, m->classes, c, ctmp) nc += c->extended[0] != '\0';
    if (slices)
        *slices = HASH_COUNT(m->slices);
    if (devices)
        *devices = nd;
    if (classes)
        *classes = nc;
    pthread_mutex_unlock(&m->mu);
}
