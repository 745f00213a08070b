/* ResourceClaim parsing: what a DRA claim may take and what it was given, per device class
 * (see include/kubequota/kube/claim.h for the rules and the Kubernetes code they follow).
 * Reads a decoded document (kq_jdoc): no jansson tree, no reference kept to it.
 */
#include "kubequota/kube/claim.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------- */
/* helpers                                                                             */

static const kq_jfilter_t f_owner[] = {{"kind", NULL}, {"uid", NULL}, {"controller", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_annotations[] = {{"resource.kubernetes.io/extended-resource-claim", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_meta[] = {
    {"uid", NULL}, {"name", NULL}, {"namespace", NULL}, {"resourceVersion", NULL}, {"ownerReferences", f_owner},
    {"annotations", f_annotations}, {NULL, NULL},
};
static const kq_jfilter_t f_sub[] = {
    {"name", NULL}, {"deviceClassName", NULL}, {"allocationMode", NULL}, {"count", NULL}, {NULL, NULL},
};
static const kq_jfilter_t f_request[] = {
    {"name", NULL}, {"exactly", f_sub}, {"firstAvailable", f_sub}, {NULL, NULL},
};
static const kq_jfilter_t f_devices[] = {{"requests", f_request}, {NULL, NULL}};
static const kq_jfilter_t f_spec[] = {{"devices", f_devices}, {NULL, NULL}};
static const kq_jfilter_t f_result[] = {{"request", NULL}, {"driver", NULL}, {"pool", NULL}, {"device", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_adevices[] = {{"results", f_result}, {NULL, NULL}};
static const kq_jfilter_t f_alloc[] = {{"devices", f_adevices}, {NULL, NULL}};
static const kq_jfilter_t f_reserved[] = {{"resource", NULL}, {"uid", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_status[] = {{"allocation", f_alloc}, {"reservedFor", f_reserved}, {NULL, NULL}};
const kq_jfilter_t kq_claim_fields[] = {
    {"metadata", f_meta}, {"spec", f_spec}, {"status", f_status}, {NULL, NULL},
};

typedef struct pctx {
    char *err;
    size_t errlen;
} pctx_t;

__attribute__((format(printf, 3, 4))) static int fail(pctx_t *c, int rc, const char *fmt, ...)
{
    if (c->err != NULL && c->errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* member key of obj when it has type `types` (or is absent / null: *out NULL); else an error. */
static int get(pctx_t *c, const kq_jnode_t *obj, const char *key, unsigned types, const char *where,
               const kq_jnode_t **out)
{
    const kq_jnode_t *v = kq_jnode_get(obj, key);
    *out = NULL;
    if (v == NULL || v->type == KQ_JNULL)
        return 0;
    if ((v->type & types) == 0)
        return fail(c, KQ_EPARSE, "%s%s%s: wrong type", where, where[0] ? "." : "", key);
    *out = v;
    return 0;
}

const char *kq_claim_resource_name(const char *device_class)
{
    char buf[KQ_RES_NAME_MAX + 2];
    if (device_class == NULL || device_class[0] == '\0')
        return NULL;
    int n = snprintf(buf, sizeof(buf), "%s%s", device_class, KQ_CLAIM_RES_SUFFIX);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return NULL;
    return kq_resource_name(buf);
}

/* Devices a request (or subrequest) `r` may take, and its class's resource name. */
static int sub_count(pctx_t *c, const kq_jnode_t *r, const char *where, const char **res, int64_t *n)
{
    const kq_jnode_t *cls, *mode, *count;
    int rc;
    if ((rc = get(c, r, "deviceClassName", KQ_JSTRING, where, &cls)) != 0 ||
        (rc = get(c, r, "allocationMode", KQ_JSTRING, where, &mode)) != 0 ||
        (rc = get(c, r, "count", KQ_JNUMBER, where, &count)) != 0)
        return rc;
    if (cls == NULL || cls->len == 0)
        return fail(c, KQ_EPARSE, "%s.deviceClassName: missing", where);
    if ((*res = kq_claim_resource_name(cls->str)) == NULL)
        return fail(c, KQ_EPARSE, "%s.deviceClassName: \"%.64s\" makes no valid resource name", where, cls->str);
    if (mode == NULL || strcmp(mode->str, "ExactCount") == 0) {
        if (count == NULL) {
            *n = 1; /* the API server's default */
        } else if (count->real || count->i < 1 || count->i > KQ_CLAIM_COUNT_MAX) {
            return fail(c, KQ_EPARSE, "%s.count: not a whole number in 1..%d", where, KQ_CLAIM_COUNT_MAX);
        } else {
            *n = count->i;
        }
    } else if (strcmp(mode->str, "All") == 0) {
        *n = KQ_CLAIM_ALL_MAX;
    } else {
        *n = 0; /* unknown mode: not counted, as the quota evaluator */
    }
    return 0;
}

static int add_to(pctx_t *c, kq_resource_t *r, const char *res, int64_t n)
{
    if (n <= 0)
        return 0;
    bool present = false;
    int64_t have = kq_resource_get(r, res, &present);
    if (kq_resource_set(r, res, have + n) != 0)
        return fail(c, KQ_ENOMEM, "out of memory");
    return 0;
}

/* A request name (and a subrequest's "parent/sub") with its class's resource name. */
typedef struct rname {
    const char *parent, *sub; /* sub NULL: an `exactly` request */
    const char *res;
} rname_t;

static const char *class_of(const rname_t *names, size_t n, const char *request)
{
    const char *slash = strchr(request, '/');
    size_t pl = slash ? (size_t)(slash - request) : strlen(request);
    for (size_t i = 0; i < n; i++) {
        const rname_t *e = &names[i];
        if (strlen(e->parent) != pl || strncmp(e->parent, request, pl) != 0)
            continue;
        if (slash == NULL ? e->sub == NULL : (e->sub != NULL && strcmp(e->sub, slash + 1) == 0))
            return e->res;
    }
    return NULL;
}

/* ---------------------------------------------------------------------------------- */
/* public API                                                                          */

/* ---------------------------------------------------------------------------------- */
/* allocated devices, for the counters of partitionable devices (control/slices.h)      */

bool kq_claim_class_of(const char *res, char *buf, size_t len)
{
    size_t n = res ? strlen(res) : 0, sl = strlen(KQ_CLAIM_RES_SUFFIX);
    if (n <= sl || strcmp(res + n - sl, KQ_CLAIM_RES_SUFFIX) != 0 || n - sl >= len)
        return false;
    memcpy(buf, res, n - sl);
    buf[n - sl] = '\0';
    return true;
}

/* Keeps result r (of `total`) in k->devs: a result without driver, pool or device is left
 * out (it has no counters to look up; it is still charged as a device). */
static int keep_dev(pctx_t *c, kq_claim_t *k, size_t total, const kq_jnode_t *r, const char *res)
{
    const char *driver = kq_jnode_string(kq_jnode_get(r, "driver"));
    const char *pool = kq_jnode_string(kq_jnode_get(r, "pool"));
    const char *device = kq_jnode_string(kq_jnode_get(r, "device"));
    if (driver == NULL || pool == NULL || device == NULL)
        return 0;
    if (k->devs == NULL && (k->devs = calloc(total, sizeof(*k->devs))) == NULL)
        return fail(c, KQ_ENOMEM, "out of memory");
    kq_claim_dev_t *d = &k->devs[k->n_devs];
    d->res = res;
    if ((d->driver = strdup(driver)) == NULL || (d->pool = strdup(pool)) == NULL ||
        (d->device = strdup(device)) == NULL) {
        free(d->driver);
        free(d->pool);
        memset(d, 0, sizeof(*d));
        return fail(c, KQ_ENOMEM, "out of memory");
    }
    k->n_devs++;
    return 0;
}

int kq_claim_parse(const kq_jnode_t *obj, kq_claim_t *out, char *err, size_t errlen)
{
    pctx_t c = {.err = err, .errlen = errlen};
    kq_claim_t k;
    memset(&k, 0, sizeof(k));
    rname_t *names = NULL;
    size_t n_names = 0;
    int rc = 0;
    const kq_jnode_t *meta, *uid, *name, *ns, *owners, *spec, *devs, *reqs, *status, *alloc, *adevs, *results,
        *reserved;
    memset(out, 0, sizeof(*out));
    if (obj == NULL || obj->type != KQ_JOBJECT)
        return fail(&c, KQ_EPARSE, "not a JSON object");
    if ((rc = get(&c, obj, "metadata", KQ_JOBJECT, "", &meta)) != 0 ||
        (rc = get(&c, meta, "uid", KQ_JSTRING, "metadata", &uid)) != 0 ||
        (rc = get(&c, meta, "name", KQ_JSTRING, "metadata", &name)) != 0 ||
        (rc = get(&c, meta, "namespace", KQ_JSTRING, "metadata", &ns)) != 0 ||
        (rc = get(&c, meta, "ownerReferences", KQ_JARRAY, "metadata", &owners)) != 0)
        goto out;
    if (uid == NULL || uid->len == 0 || name == NULL || name->len == 0) {
        rc = fail(&c, KQ_EPARSE, "metadata.%s: missing", uid == NULL || uid->len == 0 ? "uid" : "name");
        goto out;
    }
    if ((k.uid = strdup(uid->str)) == NULL || (k.name = strdup(name->str)) == NULL ||
        (k.ns = strdup(ns != NULL && ns->len > 0 ? ns->str : "default")) == NULL)
        goto nomem;
    for (const kq_jnode_t *o = owners ? kq_jnode_first(owners) : NULL; o != NULL; o = kq_jnode_next(owners, o)) {
        const kq_jnode_t *ctl = kq_jnode_get(o, "controller");
        const char *kind = kq_jnode_string(kq_jnode_get(o, "kind"));
        const char *ouid = kq_jnode_string(kq_jnode_get(o, "uid"));
        if (ctl != NULL && ctl->type == KQ_JTRUE && kind != NULL && strcmp(kind, "Pod") == 0 && ouid != NULL &&
            ouid[0] != '\0') {
            if ((k.owner_pod = strdup(ouid)) == NULL)
                goto nomem;
            break;
        }
    }

    /* what the claim may take */
    if ((rc = get(&c, obj, "spec", KQ_JOBJECT, "", &spec)) != 0 ||
        (rc = get(&c, spec, "devices", KQ_JOBJECT, "spec", &devs)) != 0 ||
        (rc = get(&c, devs, "requests", KQ_JARRAY, "spec.devices", &reqs)) != 0)
        goto out;
    if (reqs != NULL && reqs->count > KQ_CLAIM_MAX_REQUESTS) {
        rc = fail(&c, KQ_EPARSE, "spec.devices.requests: more than %d", KQ_CLAIM_MAX_REQUESTS);
        goto out;
    }
    if (reqs != NULL && reqs->count > 0 &&
        (names = calloc((size_t)reqs->count * 9, sizeof(*names))) == NULL) /* each: itself or 8 subrequests */
        goto nomem;
    size_t i = 0;
    for (const kq_jnode_t *r = reqs ? kq_jnode_first(reqs) : NULL; r != NULL; r = kq_jnode_next(reqs, r), i++) {
        char where[64];
        snprintf(where, sizeof(where), "spec.devices.requests[%zu]", i);
        const kq_jnode_t *rn, *exactly, *first;
        if (r->type != KQ_JOBJECT) {
            rc = fail(&c, KQ_EPARSE, "%s: not an object", where);
            goto out;
        }
        if ((rc = get(&c, r, "name", KQ_JSTRING, where, &rn)) != 0 ||
            (rc = get(&c, r, "exactly", KQ_JOBJECT, where, &exactly)) != 0 ||
            (rc = get(&c, r, "firstAvailable", KQ_JARRAY, where, &first)) != 0)
            goto out;
        const char *parent = rn ? rn->str : "";
        if (first != NULL && first->count > 0) {
            if (first->count > 8) {
                rc = fail(&c, KQ_EPARSE, "%s.firstAvailable: more than 8 subrequests", where);
                goto out;
            }
            /* per class, the largest alternative of that class */
            kq_resource_t worst = KQ_RESOURCE_EMPTY;
            size_t j = 0;
            for (const kq_jnode_t *s = kq_jnode_first(first); s != NULL; s = kq_jnode_next(first, s), j++) {
                char swhere[96];
                snprintf(swhere, sizeof(swhere), "%s.firstAvailable[%zu]", where, j);
                const char *res = NULL;
                int64_t n = 0;
                const kq_jnode_t *sn;
                if (s->type != KQ_JOBJECT) {
                    rc = fail(&c, KQ_EPARSE, "%s: not an object", swhere);
                } else if ((rc = get(&c, s, "name", KQ_JSTRING, swhere, &sn)) == 0 &&
                           (rc = sub_count(&c, s, swhere, &res, &n)) == 0) {
                    names[n_names++] = (rname_t){.parent = parent, .sub = sn ? sn->str : "", .res = res};
                    if (n > kq_resource_get(&worst, res, NULL) && kq_resource_set(&worst, res, n) != 0)
                        rc = fail(&c, KQ_ENOMEM, "out of memory");
                }
                if (rc != 0) {
                    kq_resource_free(&worst);
                    goto out;
                }
            }
            rc = kq_resource_add(&k.may, &worst) == 0 ? 0 : fail(&c, KQ_ENOMEM, "out of memory");
            kq_resource_free(&worst);
            if (rc != 0)
                goto out;
        } else if (exactly != NULL) {
            char ewhere[80];
            snprintf(ewhere, sizeof(ewhere), "%s.exactly", where);
            const char *res = NULL;
            int64_t n = 0;
            if ((rc = sub_count(&c, exactly, ewhere, &res, &n)) != 0 || (rc = add_to(&c, &k.may, res, n)) != 0)
                goto out;
            names[n_names++] = (rname_t){.parent = parent, .sub = NULL, .res = res};
        } else {
            rc = fail(&c, KQ_EPARSE, "%s: neither exactly nor firstAvailable", where);
            goto out;
        }
    }

    /* what it was given */
    if ((rc = get(&c, obj, "status", KQ_JOBJECT, "", &status)) != 0 ||
        (rc = get(&c, status, "allocation", KQ_JOBJECT, "status", &alloc)) != 0 ||
        (rc = get(&c, alloc, "devices", KQ_JOBJECT, "status.allocation", &adevs)) != 0 ||
        (rc = get(&c, adevs, "results", KQ_JARRAY, "status.allocation.devices", &results)) != 0 ||
        (rc = get(&c, status, "reservedFor", KQ_JARRAY, "status", &reserved)) != 0)
        goto out;
    k.allocated = alloc != NULL;
    i = 0;
    for (const kq_jnode_t *r = results ? kq_jnode_first(results) : NULL; r != NULL;
         r = kq_jnode_next(results, r), i++) {
        const char *req = kq_jnode_string(kq_jnode_get(r, "request"));
        const char *res = req != NULL ? class_of(names, n_names, req) : NULL;
        if (res == NULL)
            res = kq_claim_resource_name(KQ_CLAIM_UNKNOWN_CLASS);
        if (res == NULL) {
            rc = fail(&c, KQ_ENOMEM, "out of memory");
            goto out;
        }
        if ((rc = add_to(&c, &k.alloc, res, 1)) != 0)
            goto out;
        if ((rc = keep_dev(&c, &k, results->count, r, res)) != 0)
            goto out;
    }
    {
        const char *ext = kq_jnode_string(
            kq_jnode_get(kq_jnode_get(meta, "annotations"), "resource.kubernetes.io/extended-resource-claim"));
        k.extended = ext != NULL && strcmp(ext, "true") == 0;
    }
    if (reserved != NULL && reserved->count > KQ_CLAIM_MAX_RESERVED) {
        rc = fail(&c, KQ_EPARSE, "status.reservedFor: more than %d", KQ_CLAIM_MAX_RESERVED);
        goto out;
    }
    if (reserved != NULL && reserved->count > 0 && (k.reserved = calloc(reserved->count, sizeof(char *))) == NULL)
        goto nomem;
    for (const kq_jnode_t *r = reserved ? kq_jnode_first(reserved) : NULL; r != NULL;
         r = kq_jnode_next(reserved, r)) {
        const char *res = kq_jnode_string(kq_jnode_get(r, "resource"));
        const char *ruid = kq_jnode_string(kq_jnode_get(r, "uid"));
        if (res == NULL || strcmp(res, "pods") != 0 || ruid == NULL || ruid[0] == '\0')
            continue;
        if ((k.reserved[k.n_reserved] = strdup(ruid)) == NULL)
            goto nomem;
        k.n_reserved++;
    }
    free(names);
    *out = k;
    return 0;
nomem:
    rc = fail(&c, KQ_ENOMEM, "out of memory");
out:
    free(names);
    kq_claim_clear(&k);
    return rc;
}

int kq_claim_parse_text(const char *text, size_t len, kq_claim_t *out, char *err, size_t errlen)
{
    kq_jdoc_t doc = {0};
    kq_jscan_error_t je;
    memset(out, 0, sizeof(*out));
    int rc = kq_jdoc_parse(&doc, text, len, kq_claim_fields, &je);
    if (rc != 0) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "resourceclaim: line %d column %d: %s", je.line, je.column, je.text);
        kq_jdoc_free(&doc);
        return rc == KQ_ENOMEM ? KQ_ENOMEM : KQ_EPARSE;
    }
    rc = kq_claim_parse(kq_jdoc_root(&doc), out, err, errlen);
    kq_jdoc_free(&doc);
    return rc;
}

void kq_claim_clear(kq_claim_t *c)
{
    if (c == NULL)
        return;
    free(c->uid);
    free(c->ns);
    free(c->name);
    free(c->owner_pod);
    kq_resource_free(&c->may);
    kq_resource_free(&c->alloc);
    for (size_t i = 0; i < c->n_reserved; i++)
        free(c->reserved[i]);
    free(c->reserved);
    for (size_t i = 0; i < c->n_devs; i++) {
        free(c->devs[i].driver);
        free(c->devs[i].pool);
        free(c->devs[i].device);
    }
    free(c->devs);
    memset(c, 0, sizeof(*c));
}
