/* Pod model: turns a Kubernetes Pod object (JSON, from the watch, the extender or a GET)
 * into the facts the quota engine needs: user and groups, queue path, application and
 * the pod's effective resource request. See include/kubequota/pod.h for the rules.
 *
 * Everything here is untrusted input: every member is type-checked, every error names
 * the field ("pod team-a/web-1: spec.containers[1].resources.requests.cpu: ..."), and no
 * JSON shape can crash the parser (fuzz/fuzz_pod.c).
 *
 * Request computation follows Kubernetes' PodRequests (component-helpers/resource), with
 * in-place resize taken into account:
 *   per container, spec request = resources.requests, plus resources.limits for every
 *     resource that has a limit and no request (the API server's defaulting does this for
 *     stored pods; we do it too so hand-written or admission-time pods agree);
 *   aggregate(f) = max(sum over containers f(c) + sum over restartable (sidecar) init
 *     containers f(s), max over init containers i of f(i) + sidecars declared before i);
 *   requests = max(aggregate(spec), aggregate(actuated), aggregate(allocated)), where
 *     allocated = status allocatedResources and actuated = status resources.requests
 *     (falling back to allocated, then spec); when the resize is Infeasible (condition
 *     PodResizePending/Infeasible, or the older status.resize "Infeasible") the spec is
 *     left out: max(actuated, allocated);
 *   pod-level spec.resources.requests (cpu, memory, hugepages-*) replace the aggregate
 *     for those resources; spec.overhead is added last.
 * Not implemented (alpha in Kubernetes): pod-level status resources for in-place
 * pod-level resize, and DRA node-allocatable claim statuses.
 *
 * Queue names: full paths are found with the configuration's hash lookup; a plain leaf
 * name ("alice") is resolved by walking the configured tree, which costs O(queues) for
 * that pod (never O(users) or O(pods)); labels with full paths avoid it.
 *
 * Thread safety: no shared state; the partition configuration is only read.
 */
#include "kubequota/kube/pod.h"
#include "kubequota/kube/podkeys.h"
#include "kubequota/base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Identity, queue, application and quota group keys: kq_pod_keys (podkeys.h), the list the
 * webhook guards. The two quota keys are named here too (one read each). */
#define YK_UNIQUE_AUTOGEN "-uniqueautogen"
#define LABEL_PREEMPTIBLE "quota.scheduling.koordinator.sh/preemptible"
#define LABEL_QUOTA_NAME "quota.scheduling.koordinator.sh/name"
/* gangs (kq_pod_t.gang): YuniKorn's task groups (apache/yunikorn-k8shim pkg/common/constants
 * AnnotationTaskGroupName, AnnotationTaskGroups) and Kueue's pod groups (kubernetes-sigs/kueue
 * pkg/controller/jobs/pod: GroupNameLabel, GroupTotalCountAnnotation) */
#define ANN_YK_TASK_GROUP_NAME "yunikorn.apache.org/task-group-name"
#define ANN_YK_TASK_GROUPS "yunikorn.apache.org/task-groups"
#define LABEL_KUEUE_POD_GROUP "kueue.x-k8s.io/pod-group-name"
#define ANN_KUEUE_TOTAL_COUNT "kueue.x-k8s.io/pod-group-total-count"
#define GANG_MIN_MAX 100000

#define USER_INFO_MAX 65536 /* bytes of a user-info annotation */
#define IDENT_MAX 512       /* bytes of one user or group name */
#define GROUPS_MAX 256      /* groups in one user-info annotation */
#define CONTAINERS_MAX 4096 /* containers (or init containers) in one pod */
#define QUEUE_VALUE_MAX 1024

/* ---------------------------------------------------------------------------------- */
/* errors                                                                              */

typedef struct pctx {
    char *err;
    size_t errlen;
    const char *ns, *name; /* for the "pod ns/name: " prefix of errors; NULL: "pod: " */
    bool bare;             /* no prefix at all (kq_pod_request) */
    kq_jdoc_t *scratch; /* for the user-info annotation's JSON (opts->scratch), or NULL */
} pctx_t;

static int fail(pctx_t *c, int rc, const char *fmt, ...) KQ_PRINTF(3, 4);
static int fail(pctx_t *c, int rc, const char *fmt, ...)
{
    if (c->err == NULL || c->errlen == 0)
        return rc;
    int n = c->bare         ? 0
            : c->ns != NULL ? snprintf(c->err, c->errlen, "pod %.160s/%.160s: ", c->ns, c->name)
                            : snprintf(c->err, c->errlen, "pod: ");
    if (n < 0 || (size_t)n >= c->errlen)
        return rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---------------------------------------------------------------------------------- */
/* typed member access: JSON null counts as absent                                     */

typedef kq_jnode_t jv_t; /* a decoded JSON value (see kq_jdoc in jscan.h) */

static inline bool is(const jv_t *v, kq_jtype_t t)
{
    return v != NULL && v->type == t;
}

static const jv_t *member(const jv_t *obj, const char *key)
{
    const jv_t *v = kq_jnode_get(obj, key);
    return is(v, KQ_JNULL) ? NULL : v;
}

static int get_object(pctx_t *c, const jv_t *obj, const char *key, const char *path, const jv_t **out)
{
    const jv_t *v = member(obj, key);
    if (v != NULL && !is(v, KQ_JOBJECT))
        return fail(c, KQ_EPARSE, "%s%s%s: not an object", path, *path ? "." : "", key);
    *out = v;
    return 0;
}

static int get_array(pctx_t *c, const jv_t *obj, const char *key, const char *path, const jv_t **out)
{
    const jv_t *v = member(obj, key);
    if (v != NULL && !is(v, KQ_JARRAY))
        return fail(c, KQ_EPARSE, "%s%s%s: not an array", path, *path ? "." : "", key);
    *out = v;
    return 0;
}

/* String member; NULL when absent, null or "". */
static int get_string(pctx_t *c, const jv_t *obj, const char *key, const char *path, const char **out)
{
    const jv_t *v = member(obj, key);
    if (v != NULL && !is(v, KQ_JSTRING))
        return fail(c, KQ_EPARSE, "%s%s%s: not a string", path, *path ? "." : "", key);
    const char *s = kq_jnode_string(v);
    *out = (s != NULL && *s != '\0') ? s : NULL;
    return 0;
}

/* A label or annotation value; NULL when absent or "". kind: "label" or "annotation". */
static int get_kv(pctx_t *c, const jv_t *map, const char *key, const char *kind, const char **out)
{
    const jv_t *v = member(map, key);
    if (v != NULL && !is(v, KQ_JSTRING))
        return fail(c, KQ_EPARSE, "%s %s: not a string", kind, key);
    const char *s = kq_jnode_string(v);
    *out = (s != NULL && *s != '\0') ? s : NULL;
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* resource lists                                                                      */

/* A ResourceList ({"cpu":"500m",...}); obj NULL gives an empty set. Quantities may be
 * strings or JSON numbers (Kubernetes' Quantity accepts both). Its path in errors is
 * path + sub (two parts, so that nothing is formatted unless there is an error). When
 * several entries are bad, the one with the smallest name is reported, so the reason does
 * not depend on member order (which differs between a decoded text and a jansson object
 * when a name repeats). */
static int parse_rlist(pctx_t *c, const jv_t *obj, const char *path, const char *sub, kq_resource_t *out)
{
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    if (obj != NULL && !is(obj, KQ_JOBJECT))
        return fail(c, KQ_EPARSE, "%s%s: not an object", path, sub);
    const char *bad = NULL; /* name of the reported bad entry */
    bool full = false;
    for (const jv_t *val = kq_jnode_first(obj); val != NULL; val = kq_jnode_next(obj, val)) {
        const char *key = val->key;
        bool report = bad == NULL || strcmp(key, bad) < 0;
        char num[64];
        const char *s;
        if (val->type == KQ_JSTRING) {
            s = val->str;
        } else if (val->type == KQ_JNUMBER && !val->real) {
            snprintf(num, sizeof(num), "%lld", val->i);
            s = num;
        } else if (val->type == KQ_JNUMBER) {
            snprintf(num, sizeof(num), "%.15g", val->d);
            s = num;
        } else {
            if (report)
                fail(c, KQ_EPARSE, "%s%s.%.*s: quantity is not a string", path, sub, KQ_RES_NAME_MAX, key);
            bad = report ? key : bad;
            continue;
        }
        if (kq_resource_name(key) == NULL) {
            if (report)
                fail(c, KQ_EPARSE, "%s%s: invalid resource name \"%.*s\"", path, sub, KQ_RES_NAME_MAX, key);
            bad = report ? key : bad;
            continue;
        }
        int64_t v = 0;
        char why[160] = "";
        if (kq_quantity_parse(key, s, &v, why, sizeof(why)) != 0) {
            if (report)
                fail(c, KQ_EPARSE, "%s%s.%.*s: invalid quantity \"%.64s\": %s", path, sub, KQ_RES_NAME_MAX, key,
                     s, why);
            bad = report ? key : bad;
            continue;
        }
        if (bad == NULL && !full && kq_resource_set(&r, key, v) != 0)
            full = true;
    }
    if (bad != NULL || full) {
        kq_resource_free(&r);
        return bad != NULL ? KQ_EPARSE : fail(c, KQ_ENOMEM, "out of memory");
    }
    kq_resource_move(out, &r);
    return 0;
}

static bool is_pod_level_resource(const char *name)
{
    return strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0 ||
           strncmp(name, "hugepages-", 10) == 0;
}

/* ---------------------------------------------------------------------------------- */
/* containers                                                                          */

enum { R_SPEC, R_ALLOC, R_ACT, R_KINDS };

typedef struct cres {
    kq_resource_t r[R_KINDS];
    bool restartable;
} cres_t;

static const jv_t *find_status(const jv_t *status, const char *name)
{
    static const char *const lists[] = {"containerStatuses", "initContainerStatuses"};
    if (name == NULL)
        return NULL;
    for (size_t l = 0; l < 2; l++) {
        const jv_t *arr = member(status, lists[l]);
        for (const jv_t *cs = kq_jnode_first(arr); cs != NULL; cs = kq_jnode_next(arr, cs)) {
            const char *n = kq_jnode_string(member(cs, "name"));
            if (n != NULL && strcmp(n, name) == 0)
                return cs;
        }
    }
    return NULL;
}

/* Status lists are checked for type before use (see check_status_lists). */
static int parse_container(pctx_t *c, const jv_t *ctr, const char *path, bool init, const jv_t *status,
                           bool infeasible, cres_t *out)
{
    char p[256];
    for (int k = 0; k < R_KINDS; k++)
        kq_resource_init(&out->r[k]);
    if (!is(ctr, KQ_JOBJECT))
        return fail(c, KQ_EPARSE, "%s: not an object", path);
    const char *name = NULL;
    const jv_t *res = NULL;
    int rc = get_string(c, ctr, "name", path, &name);
    if (rc == 0)
        rc = get_object(c, ctr, "resources", path, &res);
    if (rc != 0)
        return rc;

    /* Built in place in out->r[] (R_SPEC = requests); freed on every error. */
    kq_resource_t lim = KQ_RESOURCE_EMPTY;
    kq_resource_t *req = &out->r[R_SPEC], *alloc = &out->r[R_ALLOC], *act = &out->r[R_ACT];
    rc = parse_rlist(c, member(res, "requests"), path, ".resources.requests", req);
    if (rc == 0)
        rc = parse_rlist(c, member(res, "limits"), path, ".resources.limits", &lim);
    /* Limits without requests: the request defaults to the limit. */
    if (rc == 0 && kq_resource_fill(req, &lim) != 0)
        rc = fail(c, KQ_ENOMEM, "out of memory");
    kq_resource_free(&lim);
    if (rc != 0)
        goto fail;

    out->restartable = false;
    if (init) {
        const char *policy = NULL;
        if ((rc = get_string(c, ctr, "restartPolicy", path, &policy)) != 0)
            goto fail;
        out->restartable = policy != NULL && strcmp(policy, "Always") == 0;
    }

    /* In-place resize: what the kubelet allocated and actuated. */
    const jv_t *cs = find_status(status, name);
    const jv_t *alloc_j = NULL, *act_j = NULL;
    if (cs != NULL) {
        snprintf(p, sizeof(p), "status of container \"%.64s\"", name);
        const jv_t *sres = NULL;
        if ((rc = get_object(c, cs, "allocatedResources", p, &alloc_j)) != 0 ||
            (rc = get_object(c, cs, "resources", p, &sres)) != 0)
            goto fail;
        if (sres != NULL) {
            const jv_t *v = member(sres, "requests");
            if (v != NULL && !is(v, KQ_JOBJECT)) {
                rc = fail(c, KQ_EPARSE, "%s.resources.requests: not an object", p);
                goto fail;
            }
            act_j = v;
        }
    }
    if (alloc_j != NULL) {
        if ((rc = parse_rlist(c, alloc_j, p, ".allocatedResources", alloc)) != 0)
            goto fail;
    } else if (!infeasible && kq_resource_copy(alloc, req) != 0) {
        rc = fail(c, KQ_ENOMEM, "out of memory");
        goto fail;
    }
    if (act_j != NULL) {
        if ((rc = parse_rlist(c, act_j, p, ".resources.requests", act)) != 0)
            goto fail;
    } else if (kq_resource_copy(act, alloc) != 0) {
        rc = fail(c, KQ_ENOMEM, "out of memory");
        goto fail;
    }
    return 0;
fail:
    for (int k = 0; k < R_KINDS; k++)
        kq_resource_free(&out->r[k]);
    return rc;
}

static void free_cres(cres_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < R_KINDS; k++)
            kq_resource_free(&v[i].r[k]);
}

/* *out (initialised) = the pod's aggregate of one kind. */
static int aggregate(pctx_t *c, const cres_t *ctrs, size_t n, const cres_t *inits, size_t ni,
                     int kind, kq_resource_t *out)
{
    kq_resource_t sum, sidecars, init, use;
    kq_resource_init(&sum);
    kq_resource_init(&sidecars);
    kq_resource_init(&init);
    kq_resource_init(&use);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = kq_resource_add(&sum, &ctrs[i].r[kind]);
    for (size_t i = 0; i < ni && rc == 0; i++) {
        const kq_resource_t *r = &inits[i].r[kind];
        if (inits[i].restartable) {
            if ((rc = kq_resource_add(&sum, r)) == 0 && (rc = kq_resource_add(&sidecars, r)) == 0)
                rc = kq_resource_copy(&use, &sidecars);
        } else if ((rc = kq_resource_copy(&use, r)) == 0) {
            rc = kq_resource_add(&use, &sidecars);
        }
        if (rc == 0)
            rc = kq_resource_max(&init, &use);
    }
    if (rc == 0)
        rc = kq_resource_max(&sum, &init);
    if (rc == 0)
        kq_resource_move(out, &sum);
    kq_resource_free(&sum);
    kq_resource_free(&sidecars);
    kq_resource_free(&init);
    kq_resource_free(&use);
    if (rc == KQ_ENOMEM)
        return fail(c, KQ_ENOMEM, "out of memory");
    return rc != 0 ? fail(c, KQ_EPARSE, "spec: container requests overflow") : 0;
}

/* "spec.<key>[<i>]" into buf (key is a short literal); by hand: this runs per container. */
static void index_path(char *buf, size_t n, const char *key, size_t i)
{
    char digits[24];
    size_t nd = 0;
    do {
        digits[nd++] = (char)('0' + i % 10);
        i /= 10;
    } while (i > 0);
    size_t kl = strlen(key);
    if (5 + kl + nd + 2 > n) {
        snprintf(buf, n, "spec.%s[...]", key);
        return;
    }
    char *p = buf;
    memcpy(p, "spec.", 5);
    p += 5;
    memcpy(p, key, kl);
    p += kl;
    *p++ = '[';
    while (nd > 0)
        *p++ = digits[--nd];
    *p++ = ']';
    *p = '\0';
}

/* Parses the list into *out: `small` (room for SMALL_LIST) when it fits, else a new array
 * (the caller frees *out when it is not small). */
#define SMALL_LIST 2
static int parse_container_list(pctx_t *c, const jv_t *spec, const char *key, bool init, const jv_t *status,
                                bool infeasible, cres_t *small, cres_t **out, size_t *n_out)
{
    const jv_t *arr = NULL;
    int rc = get_array(c, spec, key, "spec", &arr);
    if (rc != 0)
        return rc;
    size_t n = arr ? arr->count : 0;
    *out = NULL;
    *n_out = 0;
    if (n == 0)
        return 0;
    if (n > CONTAINERS_MAX)
        return fail(c, KQ_EPARSE, "spec.%s: more than %d containers", key, CONTAINERS_MAX);
    cres_t *v = n <= SMALL_LIST ? small : malloc(n * sizeof(*v));
    if (v == NULL)
        return fail(c, KQ_ENOMEM, "out of memory");
    size_t i = 0;
    for (const jv_t *ctr = kq_jnode_first(arr); ctr != NULL; ctr = kq_jnode_next(arr, ctr), i++) {
        char path[64];
        index_path(path, sizeof(path), key, i);
        rc = parse_container(c, ctr, path, init, status, infeasible, &v[i]);
        if (rc != 0) {
            free_cres(v, i);
            if (v != small)
                free(v);
            return rc;
        }
    }
    *out = v;
    *n_out = n;
    return 0;
}

static bool resize_infeasible(const jv_t *status)
{
    const char *legacy = kq_jnode_string(member(status, "resize"));
    if (legacy != NULL && strcmp(legacy, "Infeasible") == 0)
        return true;
    const jv_t *conds = member(status, "conditions");
    for (const jv_t *cd = kq_jnode_first(conds); cd != NULL; cd = kq_jnode_next(conds, cd)) {
        const char *type = kq_jnode_string(member(cd, "type"));
        if (type != NULL && strcmp(type, "PodResizePending") == 0) {
            const char *reason = kq_jnode_string(member(cd, "reason"));
            return reason != NULL && strcmp(reason, "Infeasible") == 0;
        }
    }
    return false;
}

/* ---- the DRA extended-resource path (issue 39; control/slices.h) ----
 * A container request of an extended resource that a DeviceClass backs
 * (extendedResourceName, or deviceclass.resource.kubernetes.io/<class>) is charged as the
 * devices of that class too. The class table lives in control/slices.c: main registers its
 * mapper here once, before any pod is parsed; without one, nothing is added. */
static kq_pod_extended_fn extended_fn;
static void *extended_ud;

void kq_pod_set_extended_mapper(kq_pod_extended_fn fn, void *ud)
{
    extended_ud = ud;
    extended_fn = fn;
}

static int map_extended(pctx_t *c, kq_resource_t *total)
{
    if (extended_fn == NULL)
        return 0;
    int rc = extended_fn(extended_ud, total);
    if (rc != 0)
        return rc == KQ_ENOMEM ? fail(c, KQ_ENOMEM, "out of memory") : fail(c, KQ_EPARSE, "extended resources: %s", kq_strerror(rc));
    return 0;
}

static int compute_request(pctx_t *c, const jv_t *spec, const jv_t *status, kq_resource_t *out)
{
    int rc;
    cres_t *ctrs = NULL, *inits = NULL;
    cres_t small_ctrs[SMALL_LIST], small_inits[SMALL_LIST]; /* most pods: no allocation */
    size_t n = 0, ni = 0;
    /* Every set below is freed at out (none allocates unless it has more than KQ_RES_INLINE names). */
    kq_resource_t total, podreq, overhead, per[R_KINDS];
    kq_resource_init(&total); /* without clearing the inline room: every pod parse runs this */
    kq_resource_init(&podreq);
    kq_resource_init(&overhead);
    for (int k = 0; k < R_KINDS; k++)
        kq_resource_init(&per[k]);
    if (spec != NULL && !is(spec, KQ_JOBJECT))
        return fail(c, KQ_EPARSE, "spec: not an object");
    if (status != NULL && !is(status, KQ_JOBJECT))
        return fail(c, KQ_EPARSE, "status: not an object");
    bool infeasible = status != NULL && resize_infeasible(status);

    if ((rc = parse_container_list(c, spec, "containers", false, status, infeasible, small_ctrs, &ctrs, &n)) != 0)
        goto out;
    if ((rc = parse_container_list(c, spec, "initContainers", true, status, infeasible, small_inits, &inits,
                                   &ni)) != 0)
        goto out;

    for (int k = 0; k < R_KINDS; k++)
        if ((rc = aggregate(c, ctrs, n, inits, ni, k, &per[k])) != 0)
            goto out;
    if (!infeasible)
        kq_resource_move(&total, &per[R_SPEC]);
    if (kq_resource_max(&total, &per[R_ACT]) != 0 || kq_resource_max(&total, &per[R_ALLOC]) != 0) {
        rc = fail(c, KQ_ENOMEM, "out of memory");
        goto out;
    }

    /* Pod-level requests (cpu, memory, hugepages-*) replace the container aggregate. */
    const jv_t *pres = NULL;
    if ((rc = get_object(c, spec, "resources", "spec", &pres)) != 0)
        goto out;
    if (pres != NULL) {
        if ((rc = parse_rlist(c, member(pres, "requests"), "spec.resources.requests", "", &podreq)) != 0)
            goto out;
        for (uint32_t i = 0; i < podreq.n; i++) {
            if (is_pod_level_resource(KQ_RES_E(&podreq)[i].name) &&
                kq_resource_set(&total, KQ_RES_E(&podreq)[i].name, KQ_RES_E(&podreq)[i].value) != 0) {
                rc = fail(c, KQ_ENOMEM, "out of memory");
                goto out;
            }
        }
    }

    if ((rc = parse_rlist(c, member(spec, "overhead"), "spec.overhead", "", &overhead)) != 0)
        goto out;
    if ((rc = kq_resource_add(&total, &overhead)) != 0) {
        rc = rc == KQ_ENOMEM ? fail(c, KQ_ENOMEM, "out of memory") : fail(c, KQ_EPARSE, "spec.overhead: sum overflows");
        goto out;
    }
    if ((rc = map_extended(c, &total)) != 0)
        goto out;
    kq_resource_move(out, &total);
    rc = 0;
out:
    kq_resource_free(&total);
    kq_resource_free(&podreq);
    kq_resource_free(&overhead);
    for (int k = 0; k < R_KINDS; k++)
        kq_resource_free(&per[k]);
    free_cres(ctrs, n);
    free_cres(inits, ni);
    if (ctrs != small_ctrs)
        free(ctrs);
    if (inits != small_inits)
        free(inits);
    return rc;
}

int kq_pod_request(const kq_jnode_t *spec, kq_resource_t *out, char *err, size_t errlen)
{
    pctx_t c = {.err = err, .errlen = errlen, .bare = true};
    return compute_request(&c, spec, NULL, out);
}

/* ---------------------------------------------------------------------------------- */
/* timestamps                                                                          */

static int digits(const char *s, int n, int *out)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/* RFC 3339: 2026-11-21T10:15:02Z, optional fraction, Z or +hh:mm / -hh:mm. */
static int parse_rfc3339(const char *s, int64_t *out)
{
    int Y, M, D, h, m, sec;
    if (strlen(s) < 20 || digits(s, 4, &Y) || s[4] != '-' || digits(s + 5, 2, &M) || s[7] != '-' ||
        digits(s + 8, 2, &D) || (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &m) || s[16] != ':' ||
        digits(s + 17, 2, &sec))
        return -1;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || sec > 60)
        return -1;
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return -1;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    int offset = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if (*p == '+' || *p == '-') {
        int oh, om;
        if (digits(p + 1, 2, &oh) || p[3] != ':' || digits(p + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        offset = (oh * 60 + om) * 60 * (*p == '-' ? -1 : 1);
        p += 6;
    } else {
        return -1;
    }
    if (*p != '\0')
        return -1;
    /* Days since 1970-01-01 in the proleptic Gregorian calendar (linear in D, so a day past
     * the month's end rolls over as timegm does; leap second 60 likewise). */
    int64_t y = M <= 2 ? Y - 1 : Y;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (M > 2 ? M - 3 : M + 9) + 2) / 5 + D - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    int64_t days = era * 146097 + doe - 719468;
    *out = days * 86400 + h * 3600 + m * 60 + sec - offset;
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* identity                                                                            */

static bool ident_ok(const char *s, size_t len)
{
    if (len == 0 || len > IDENT_MAX || strlen(s) != len)
        return false;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return false;
    return true;
}

/* One identity annotation, read as YuniKorn's shim reads yunikorn.apache.org/user.info
 * (apache/yunikorn-k8shim pkg/common/utils/utils.go GetUserFromPod: json.Unmarshal into
 * si.UserGroupInformation): member names match "user" and "groups" case-insensitively, the
 * last one wins, other members are ignored, null is absent. An annotation that does not
 * decode so (not JSON, not an object, a member of the wrong type), or whose names are not
 * printable strings of at most IDENT_MAX bytes, counts as the default user without groups;
 * an empty or absent user as the default user with the groups given. Either way the pod
 * is counted, never refused, and the reason goes to opts->identity_note. 0 or KQ_ENOMEM. */
static int parse_user_info(pctx_t *c, const char *ann, const jv_t *val, const kq_pod_opts_t *opts, kq_pod_t *p)
{
    const char *dflt = opts && opts->default_user ? opts->default_user : "nobody";
    char *nbuf = opts ? opts->identity_note : NULL;
    size_t nlen = opts ? opts->identity_note_len : 0;
    kq_jdoc_t local = {0}, *d = c->scratch != NULL ? c->scratch : &local;
    const jv_t *user = NULL, *groups = NULL;
    char why[256] = "";
    int rc = 0;
    if (val->len > USER_INFO_MAX) {
        snprintf(why, sizeof(why), "longer than %d bytes", USER_INFO_MAX);
        goto fallback;
    }
    kq_jscan_error_t je;
    rc = kq_jdoc_parse(d, val->str, val->len, NULL, &je);
    if (rc == KQ_ENOMEM)
        goto out;
    if (rc != 0) {
        rc = 0;
        snprintf(why, sizeof(why), "not valid JSON: %s (column %d)", je.text, je.column);
        goto fallback;
    }
    const jv_t *j = kq_jdoc_root(d);
    if (!is(j, KQ_JOBJECT) && !is(j, KQ_JNULL)) {
        snprintf(why, sizeof(why), "not a JSON object");
        goto fallback;
    }
    for (const jv_t *v = is(j, KQ_JOBJECT) ? kq_jnode_first(j) : NULL; v != NULL; v = kq_jnode_next(j, v)) {
        if (strcasecmp(v->key, "user") == 0) {
            if (!is(v, KQ_JSTRING) && !is(v, KQ_JNULL)) {
                snprintf(why, sizeof(why), "\"%.16s\" is not a string", v->key);
                goto fallback;
            }
            user = is(v, KQ_JSTRING) ? v : user;
        } else if (strcasecmp(v->key, "groups") == 0) {
            if (!is(v, KQ_JARRAY) && !is(v, KQ_JNULL)) {
                snprintf(why, sizeof(why), "\"%.16s\" is not an array of strings", v->key);
                goto fallback;
            }
            groups = is(v, KQ_JARRAY) ? v : NULL;
        }
    }
    size_t ng = groups != NULL ? groups->count : 0;
    if (ng > GROUPS_MAX) {
        snprintf(why, sizeof(why), "more than %d groups", GROUPS_MAX);
        goto fallback;
    }
    size_t i = 0;
    for (const jv_t *g = ng ? kq_jnode_first(groups) : NULL; g != NULL; g = kq_jnode_next(groups, g), i++) {
        if (is(g, KQ_JNULL) || (is(g, KQ_JSTRING) && g->len == 0))
            continue; /* Go decodes null as ""; an empty name is no group */
        if (!is(g, KQ_JSTRING) || !ident_ok(g->str, g->len)) {
            snprintf(why, sizeof(why), "groups[%zu] is not a string of at most %d printable bytes", i, IDENT_MAX);
            goto fallback;
        }
    }
    if (user != NULL && user->len > 0 && !ident_ok(user->str, user->len)) {
        snprintf(why, sizeof(why), "\"user\" is longer than %d bytes or has control characters", IDENT_MAX);
        goto fallback;
    }
    if (user == NULL || user->len == 0)
        kq_errf(nbuf, nlen, "annotation %s has no user: the pod is counted as user %s with the groups given "
             "(as YuniKorn's shim reads it)", ann, dflt);
    p->user = strdup(user != NULL && user->len > 0 ? user->str : dflt);
    p->groups = ng ? calloc(ng, sizeof(char *)) : NULL;
    if (p->user == NULL || (ng && p->groups == NULL)) {
        rc = KQ_ENOMEM;
        goto out;
    }
    for (const jv_t *gv = ng ? kq_jnode_first(groups) : NULL; gv != NULL; gv = kq_jnode_next(groups, gv)) {
        if (!is(gv, KQ_JSTRING) || gv->len == 0)
            continue;
        const char *g = gv->str;
        bool dup = false;
        for (size_t k = 0; k < p->n_groups && !dup; k++)
            dup = strcmp(p->groups[k], g) == 0;
        if (dup)
            continue;
        if ((p->groups[p->n_groups] = strdup(g)) == NULL) {
            rc = KQ_ENOMEM;
            goto out;
        }
        p->n_groups++;
    }
    goto out;
fallback:
    kq_errf(nbuf, nlen, "annotation %s: %s: the pod is counted as user %s without groups (as YuniKorn's shim "
         "reads it)", ann, why, dflt);
    if ((p->user = strdup(dflt)) == NULL)
        rc = KQ_ENOMEM;
out:
    if (rc == KQ_ENOMEM)
        fail(c, KQ_ENOMEM, "out of memory");
    kq_jdoc_free(&local);
    return rc;
}

/* ---------------------------------------------------------------------------------- */
/* queue                                                                               */

/* First two queues named `name` below (and including) q. */
static void find_named(const kq_queue_conf_t *q, const char *name, const kq_queue_conf_t *found[2],
                       size_t *n)
{
    if (q == NULL || *n >= 2)
        return;
    if (q->name != NULL && strcasecmp(q->name, name) == 0)
        found[(*n)++] = q;
    for (size_t i = 0; i < q->n_children && *n < 2; i++)
        find_named(q->children[i], name, found, n);
}

static int set_qerr(kq_pod_t *p, kq_denial_t kind, const char *fmt, ...) KQ_PRINTF(3, 4);
static int set_qerr(kq_pod_t *p, kq_denial_t kind, const char *fmt, ...)
{
    p->queue_denial = kind;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&p->queue_error, fmt, ap);
    va_end(ap);
    if (n < 0) {
        p->queue_error = NULL;
        return KQ_ENOMEM;
    }
    return 0;
}

static int set_queue(kq_pod_t *p, const kq_queue_conf_t *q)
{
    if (q->is_parent)
        return set_qerr(p, KQ_DENIAL_QUEUE_NOT_LEAF, "queue \"%s\" is a parent queue; pods run only in leaf queues", q->path);
    p->queue = strdup(q->path);
    return p->queue ? 0 : KQ_ENOMEM;
}

/* A queue named by the pod: "root.a.b" (full path), "a.b" (YuniKorn: relative to root)
 * or "b" (the unique queue with that name). */
static int resolve_named(const kq_partition_conf_t *part, const char *value, const char *source,
                         kq_pod_t *p)
{
    if (strlen(value) > QUEUE_VALUE_MAX)
        return set_qerr(p, KQ_DENIAL_QUEUE_MISSING, "%s: queue name longer than %d bytes", source, QUEUE_VALUE_MAX);
    if (part == NULL)
        return set_qerr(p, KQ_DENIAL_QUEUE_MISSING, "no queue configuration loaded");
    /* Queue names are case-insensitive (the configuration stores them lowercase). */
    bool full = strcasecmp(value, "root") == 0 || strncasecmp(value, "root.", 5) == 0;
    if (full || strchr(value, '.') != NULL) {
        char *path = NULL;
        if (!full && asprintf(&path, "root.%s", value) < 0)
            return KQ_ENOMEM;
        const char *name = full ? value : path;
        const kq_queue_conf_t *q = kq_config_queue(part, name);
        int rc = q ? set_queue(p, q) : set_qerr(p, KQ_DENIAL_QUEUE_MISSING, "queue \"%s\" does not exist", name);
        free(path);
        return rc;
    }
    const kq_queue_conf_t *found[2] = {NULL, NULL};
    size_t n = 0;
    find_named(part->root, value, found, &n);
    if (n == 0)
        return set_qerr(p, KQ_DENIAL_QUEUE_MISSING, "queue \"%s\" does not exist", value);
    if (n > 1)
        return set_qerr(p, KQ_DENIAL_QUEUE_MISSING, "queue name \"%s\" is ambiguous (%s, %s, ...); use the full path", value,
                        found[0]->path, found[1]->path);
    return set_queue(p, found[0]);
}

static int resolve_default(const kq_partition_conf_t *part, const char *ns, kq_pod_t *p)
{
    if (part == NULL)
        return set_qerr(p, KQ_DENIAL_QUEUE_MISSING, "no queue configuration loaded");
    char *path = NULL;
    if (asprintf(&path, "root.%s", ns) < 0)
        return KQ_ENOMEM;
    const kq_queue_conf_t *q = kq_config_queue(part, path);
    int rc;
    if (q != NULL && !q->is_parent) {
        rc = set_queue(p, q);
    } else {
        const kq_queue_conf_t *d = kq_config_queue(part, "root.default");
        if (d != NULL && !d->is_parent)
            rc = set_queue(p, d);
        else
            rc = set_qerr(p, KQ_DENIAL_QUEUE_NOT_LEAF, "no queue named for the pod, and neither %s nor root.default is a leaf "
                          "queue", path);
    }
    free(path);
    return rc;
}

/* YuniKorn's placement rules (placement.h): the named queue is "provided", the tags are
 * the namespace and the namespace's parent queue annotation; a bound pod is forced. */
static int resolve_placed(const kq_partition_conf_t *part, const kq_pod_opts_t *opts, const char *named,
                          const char *source, kq_pod_t *p)
{
    if (named != NULL && strlen(named) > QUEUE_VALUE_MAX)
        return set_qerr(p, KQ_DENIAL_QUEUE_MISSING, "%s: queue name longer than %d bytes", source, QUEUE_VALUE_MAX);
    char parent[QUEUE_VALUE_MAX + 1];
    kq_tag_t tags[2] = {{"namespace", p->ns}, {"namespace.parentqueue", NULL}};
    size_t ntags = 1;
    if (opts->ns_parent_queue != NULL && opts->ns_parent_queue(opts->ns_arg, p->ns, parent, sizeof(parent)))
        tags[ntags++].value = parent;
    kq_place_in_t in = {
        .user = p->user,
        .groups = (const char *const *)p->groups,
        .n_groups = p->n_groups,
        .provided = named,
        .tags = tags,
        .n_tags = ntags,
        .forced = p->node != NULL,
        .dynamic_kind = opts->dynamic_kind,
        .may_submit = opts->may_submit,
        .arg = opts->hook_arg,
    };
    char reason[1024];
    kq_denial_t kind = KQ_DENIAL_NONE;
    int rc = kq_placement_place(part, &in, &p->queue, reason, sizeof(reason), &kind);
    if (rc == KQ_ENOMEM)
        return rc;
    if (rc != 0)
        return set_qerr(p, kind, "%s", reason);
    /* a dynamic queue takes its limits from the namespace of the pods placed in it
     * (YuniKorn: set on an unmanaged queue when an application is added) */
    if (opts->set_dynamic_limits != NULL && opts->ns_limits != NULL && kq_config_queue(part, p->queue) == NULL &&
        strcmp(p->queue, KQ_PLACEMENT_RECOVERY_QUEUE) != 0) {
        kq_resource_t max = KQ_RESOURCE_EMPTY;
        bool has_max = false;
        uint64_t max_apps = 0;
        if (opts->ns_limits(opts->ns_arg, p->ns, &max, &has_max, &max_apps))
            opts->set_dynamic_limits(opts->hook_arg, p->queue, has_max ? &max : NULL, max_apps);
        else if (opts->dynamic_kind != NULL && opts->dynamic_kind(opts->hook_arg, p->queue) == KQ_QKIND_NONE)
            /* the queue is created anew (YuniKorn removed it when it emptied): limits a
             * namespace gave an earlier queue of that name do not carry over */
            opts->set_dynamic_limits(opts->hook_arg, p->queue, NULL, 0);
        kq_resource_free(&max);
    }
    return 0;
}

/* The pod's queue by the rules in force (opts->partition): placement rules when the
 * partition has some, else kubequota's own. Fills queue or queue_error/queue_denial. */
static int place(const kq_pod_opts_t *opts, kq_pod_t *p)
{
    const kq_partition_conf_t *part = opts ? opts->partition : NULL;
    const char *q = p->queue_value, *src = p->queue_source ? p->queue_source : "queue";
    static const kq_pod_opts_t none = {.partition = NULL};
    if (part != NULL && part->n_rules > 0)
        return resolve_placed(part, opts ? opts : &none, q, src, p);
    return q ? resolve_named(part, q, src, p) : resolve_default(part, p->ns, p);
}

int kq_pod_place(const kq_pod_opts_t *opts, kq_pod_t *p)
{
    free(p->queue);
    free(p->queue_error);
    p->queue = p->queue_error = NULL;
    p->queue_denial = KQ_DENIAL_NONE;
    if (p->ns == NULL)
        return KQ_EINVAL;
    return place(opts, p);
}

/* ---------------------------------------------------------------------------------- */
/* gangs                                                                               */

static const char *kv_string(const jv_t *map, const char *key)
{
    const jv_t *v = member(map, key);
    const char *s = is(v, KQ_JSTRING) ? kq_jnode_string(v) : NULL;
    return s != NULL && *s != '\0' ? s : NULL;
}

/* "1".."100000" (digits only), else 0. */
static uint32_t gang_count(const char *s)
{
    uint32_t v = 0;
    if (s == NULL || *s == '\0' || strlen(s) > 6)
        return 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return 0;
        v = v * 10 + (uint32_t)(*s - '0');
    }
    return v >= 1 && v <= GANG_MIN_MAX ? v : 0;
}

/* The pod's gang: Kueue's pod group "kueue:<ns>/<group>" with the total count, or
 * YuniKorn's task group "yunikorn:<app>/<task group>" with the group's minMember. *gang
 * stays NULL for a pod without one or with a malformed description. 0 or KQ_ENOMEM. */
static int gang_of(const jv_t *labels, const jv_t *anns, const char *ns, const char *app, char **gang,
                   uint32_t *min)
{
    *gang = NULL;
    *min = 0;
    const char *kg = kv_string(labels, LABEL_KUEUE_POD_GROUP);
    uint32_t kn = gang_count(kv_string(anns, ANN_KUEUE_TOTAL_COUNT));
    if (kg != NULL && kn > 0) {
        if (asprintf(gang, "kueue:%s/%s", ns, kg) < 0) {
            *gang = NULL;
            return KQ_ENOMEM;
        }
        *min = kn;
        return 0;
    }
    const char *tg = kv_string(anns, ANN_YK_TASK_GROUP_NAME), *tgs = kv_string(anns, ANN_YK_TASK_GROUPS);
    if (tg == NULL || tgs == NULL || app == NULL)
        return 0;
    json_error_t je;
    json_t *arr = json_loads(tgs, JSON_REJECT_DUPLICATES, &je);
    size_t i;
    json_t *e;
    uint32_t m = 0;
    json_array_foreach(arr, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        json_t *mm = json_object_get(e, "minMember");
        if (n != NULL && strcmp(n, tg) == 0 && json_is_integer(mm) && json_integer_value(mm) >= 1 &&
            json_integer_value(mm) <= GANG_MIN_MAX) {
            m = (uint32_t)json_integer_value(mm);
            break;
        }
    }
    json_decref(arr);
    if (m == 0)
        return 0;
    if (asprintf(gang, "yunikorn:%s/%s", app, tg) < 0) {
        *gang = NULL;
        return KQ_ENOMEM;
    }
    *min = m;
    return 0;
}

/* The value of the first key of `role` in kq_pod_keys the pod carries (NULL: none), and
 * the key in *src (NULL: none). A value that is not a string is a parse error. */
static int first_key(pctx_t *c, const jv_t *labels, const jv_t *anns, kq_pod_key_role_t role, const char **out,
                     const char **src)
{
    *out = NULL;
    *src = NULL;
    for (size_t i = 0; i < KQ_POD_N_KEYS && *out == NULL; i++) {
        const kq_pod_key_t *k = &kq_pod_keys[i];
        if (k->role != role)
            continue;
        int rc = get_kv(c, k->annotation ? anns : labels, k->key, kq_pod_key_kind(k), out);
        if (rc != 0)
            return rc;
        *src = k->key;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------- */
/* public API                                                                          */

static char *dup_or(const char *s, const char *dflt)
{
    return strdup(s != NULL ? s : dflt);
}

/* Keep in step with the reads below (member(), get_*() on the pod's objects): a field read
 * here but missing from this list would parse as absent from the informer's pods. */
static const kq_jfilter_t f_labels[] = {
#define F_LABEL_LABEL(k) {k, NULL},
#define F_LABEL_ANNOTATION(k)
#define F_LABEL(map, role, key) F_LABEL_##map(key)
    KQ_POD_KEYS(F_LABEL)
    {LABEL_KUEUE_POD_GROUP, NULL},
    {NULL, NULL},
};
static const kq_jfilter_t f_annotations[] = {
#define F_ANN_LABEL(k)
#define F_ANN_ANNOTATION(k) {k, NULL},
#define F_ANN(map, role, key) F_ANN_##map(key)
    KQ_POD_KEYS(F_ANN)
    {ANN_YK_TASK_GROUP_NAME, NULL}, {ANN_YK_TASK_GROUPS, NULL}, {ANN_KUEUE_TOTAL_COUNT, NULL},
    {NULL, NULL},
};
static const kq_jfilter_t f_owner[] = {{"uid", NULL}, {"controller", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_meta[] = {
    {"uid", NULL},         {"name", NULL},           {"namespace", NULL},
    {"resourceVersion", NULL}, {"labels", f_labels}, {"annotations", f_annotations},
    {"creationTimestamp", NULL}, {"deletionTimestamp", NULL}, {"ownerReferences", f_owner},
    {NULL, NULL},
};
static const kq_jfilter_t f_container[] = {
    {"name", NULL}, {"resources", NULL}, {"restartPolicy", NULL}, {NULL, NULL},
};
static const kq_jfilter_t f_gate[] = {{"name", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_rclaim[] = {
    {"name", NULL}, {"resourceClaimName", NULL}, {"resourceClaimTemplateName", NULL}, {NULL, NULL},
};
static const kq_jfilter_t f_spec[] = {
    {"nodeName", NULL},          {"schedulerName", NULL}, {"priority", NULL},
    {"resources", NULL},         {"overhead", NULL},      {"containers", f_container},
    {"initContainers", f_container}, {"schedulingGates", f_gate}, {"resourceClaims", f_rclaim},
    {NULL, NULL},
};
static const kq_jfilter_t f_rcstatus[] = {{"name", NULL}, {"resourceClaimName", NULL}, {NULL, NULL}};
static const kq_jfilter_t f_cstatus[] = {
    {"name", NULL}, {"allocatedResources", NULL}, {"resources", NULL}, {NULL, NULL},
};
/* type and reason: resize conditions here; type, status, lastTransitionTime: metering */
static const kq_jfilter_t f_condition[] = {
    {"type", NULL}, {"status", NULL}, {"reason", NULL}, {"lastTransitionTime", NULL}, {NULL, NULL},
};
static const kq_jfilter_t f_status[] = {
    {"phase", NULL}, {"resize", NULL}, {"conditions", f_condition}, {"containerStatuses", f_cstatus},
    {"initContainerStatuses", f_cstatus}, {"resourceClaimStatuses", f_rcstatus}, {NULL, NULL},
};
const kq_jfilter_t kq_pod_fields[] = {
    {"metadata", f_meta}, {"spec", f_spec}, {"status", f_status}, {NULL, NULL},
};

/* DRA ResourceClaims (pod.h "DRA ResourceClaims"): spec.resourceClaims[] resolved to claim
 * names, a template's through status.resourceClaimStatuses[]. */
static int parse_claims(pctx_t *c, const jv_t *spec, const jv_t *status, kq_pod_t *p)
{
    const jv_t *rcs = NULL, *sts = NULL;
    int rc;
    if ((rc = get_array(c, spec, "resourceClaims", "spec", &rcs)) != 0 ||
        (rc = get_array(c, status, "resourceClaimStatuses", "status", &sts)) != 0)
        return rc;
    if (rcs == NULL || rcs->count == 0)
        return 0;
    if (rcs->count > KQ_POD_MAX_CLAIMS)
        return fail(c, KQ_EPARSE, "spec.resourceClaims: more than %d entries", KQ_POD_MAX_CLAIMS);
    if ((p->claims = calloc(rcs->count, sizeof(char *))) == NULL)
        return fail(c, KQ_ENOMEM, "out of memory");
    size_t i = 0;
    for (const jv_t *r = kq_jnode_first(rcs); r != NULL; r = kq_jnode_next(rcs, r), i++) {
        const char *name = NULL, *claim = NULL, *tmpl = NULL;
        if (!is(r, KQ_JOBJECT))
            return fail(c, KQ_EPARSE, "spec.resourceClaims[%zu]: not an object", i);
        if ((rc = get_string(c, r, "name", "spec.resourceClaims[]", &name)) != 0 ||
            (rc = get_string(c, r, "resourceClaimName", "spec.resourceClaims[]", &claim)) != 0 ||
            (rc = get_string(c, r, "resourceClaimTemplateName", "spec.resourceClaims[]", &tmpl)) != 0)
            return rc;
        if (claim == NULL && tmpl != NULL && name != NULL) {
            bool listed = false;
            for (const jv_t *s = sts ? kq_jnode_first(sts) : NULL; s != NULL && !listed; s = kq_jnode_next(sts, s)) {
                const char *sn = kq_jnode_string(kq_jnode_get(s, "name"));
                if (sn == NULL || strcmp(sn, name) != 0)
                    continue;
                listed = true;
                claim = kq_jnode_string(kq_jnode_get(s, "resourceClaimName"));
            }
            if (listed && claim == NULL)
                continue; /* kube-controller-manager found no claim necessary */
        } else if (claim == NULL) {
            continue; /* neither: nothing to charge (the API server refuses such a pod) */
        }
        if (claim != NULL && claim[0] != '\0' && (p->claims[p->n_claims] = strdup(claim)) == NULL)
            return fail(c, KQ_ENOMEM, "out of memory");
        p->n_claims++; /* NULL: the template's claim is not generated yet */
    }
    if (p->n_claims == 0) {
        free(p->claims);
        p->claims = NULL;
    }
    return 0;
}

int kq_pod_parse(const kq_jnode_t *obj, const kq_pod_opts_t *opts, kq_pod_t *out, char *err, size_t errlen)
{
    pctx_t c = {.err = err, .errlen = errlen, .scratch = opts ? opts->scratch : NULL};
    if (opts != NULL && opts->identity_note != NULL && opts->identity_note_len > 0)
        opts->identity_note[0] = '\0';
    kq_pod_t p;
    memset(&p, 0, sizeof(p));
    int rc;
    const jv_t *meta = NULL, *labels = NULL, *anns = NULL, *spec = NULL, *status = NULL;
    const char *uid = NULL, *ns = NULL, *name = NULL, *s = NULL;

    if (!is(obj, KQ_JOBJECT)) {
        rc = fail(&c, KQ_EPARSE, "not a JSON object");
        goto out;
    }
    if ((rc = get_object(&c, obj, "metadata", "", &meta)) != 0)
        goto out;
    if (meta == NULL) {
        rc = fail(&c, KQ_EPARSE, "metadata: missing");
        goto out;
    }
    if ((rc = get_string(&c, meta, "uid", "metadata", &uid)) != 0 ||
        (rc = get_string(&c, meta, "namespace", "metadata", &ns)) != 0 ||
        (rc = get_string(&c, meta, "name", "metadata", &name)) != 0)
        goto out;
    if (ns == NULL)
        ns = "default";
    c.ns = ns;
    c.name = name ? name : uid ? uid : "";
    if (uid == NULL) {
        rc = fail(&c, KQ_EPARSE, "metadata.uid: missing");
        goto out;
    }
    p.uid = strdup(uid);
    p.ns = strdup(ns);
    p.name = dup_or(name, "");
    if (!p.uid || !p.ns || !p.name)
        goto nomem;

    if ((rc = get_object(&c, meta, "labels", "metadata", &labels)) != 0 ||
        (rc = get_object(&c, meta, "annotations", "metadata", &anns)) != 0 ||
        (rc = get_object(&c, obj, "spec", "", &spec)) != 0 ||
        (rc = get_object(&c, obj, "status", "", &status)) != 0)
        goto out;

    /* timestamps */
    if ((rc = get_string(&c, meta, "creationTimestamp", "metadata", &s)) != 0)
        goto out;
    if (s != NULL && parse_rfc3339(s, &p.created) != 0) {
        rc = fail(&c, KQ_EPARSE, "metadata.creationTimestamp: not an RFC 3339 time: \"%.64s\"", s);
        goto out;
    }
    p.deleting = member(meta, "deletionTimestamp") != NULL;

    /* spec scalars */
    if ((rc = get_string(&c, spec, "nodeName", "spec", &s)) != 0)
        goto out;
    if (s != NULL && (p.node = strdup(s)) == NULL)
        goto nomem;
    if ((rc = get_string(&c, spec, "schedulerName", "spec", &s)) != 0)
        goto out;
    if ((p.scheduler_name = dup_or(s, "default-scheduler")) == NULL)
        goto nomem;
    const jv_t *prio = member(spec, "priority");
    if (prio != NULL) {
        if (!is(prio, KQ_JNUMBER) || prio->real || prio->i < INT32_MIN || prio->i > INT32_MAX) {
            rc = fail(&c, KQ_EPARSE, "spec.priority: not a 32-bit integer");
            goto out;
        }
        p.priority = (int32_t)prio->i;
    }

    /* scheduling gates */
    {
        const jv_t *gates = NULL;
        if ((rc = get_array(&c, spec, "schedulingGates", "spec", &gates)) != 0)
            goto out;
        uint32_t i = 0;
        for (const jv_t *g = gates ? kq_jnode_first(gates) : NULL; g != NULL; g = kq_jnode_next(gates, g), i++) {
            const char *gn = NULL;
            if (!is(g, KQ_JOBJECT)) {
                rc = fail(&c, KQ_EPARSE, "spec.schedulingGates[%u]: not an object", i);
                goto out;
            }
            if ((rc = get_string(&c, g, "name", "spec.schedulingGates[]", &gn)) != 0)
                goto out;
            if (gn != NULL && p.gate_pos == 0 && strcmp(gn, KQ_POD_ADMISSION_GATE) == 0)
                p.gate_pos = i + 1;
        }
        p.n_gates = i;
    }

    /* status */
    if ((rc = get_string(&c, status, "phase", "status", &s)) != 0)
        goto out;
    if (s == NULL || strcmp(s, "Pending") == 0)
        p.phase = KQ_POD_PENDING;
    else if (strcmp(s, "Running") == 0)
        p.phase = KQ_POD_RUNNING;
    else if (strcmp(s, "Succeeded") == 0)
        p.phase = KQ_POD_SUCCEEDED;
    else if (strcmp(s, "Failed") == 0)
        p.phase = KQ_POD_FAILED;
    else
        p.phase = KQ_POD_UNKNOWN;
    {
        const jv_t *tmp = NULL;
        if ((rc = get_array(&c, status, "containerStatuses", "status", &tmp)) != 0 ||
            (rc = get_array(&c, status, "initContainerStatuses", "status", &tmp)) != 0 ||
            (rc = get_array(&c, status, "conditions", "status", &tmp)) != 0)
            goto out;
    }

    if ((rc = compute_request(&c, spec, status, &p.request)) != 0)
        goto out;
    if ((rc = parse_claims(&c, spec, status, &p)) != 0)
        goto out;

    /* identity */
    {
        bool have = false;
        for (size_t i = 0; i < KQ_POD_N_KEYS && !have; i++) {
            const kq_pod_key_t *k = &kq_pod_keys[i];
            if (k->role != KQ_POD_KEY_IDENTITY)
                continue;
            const jv_t *v = member(k->annotation ? anns : labels, k->key);
            if (v == NULL)
                continue;
            if (!is(v, KQ_JSTRING)) {
                rc = fail(&c, KQ_EPARSE, "%s %s: not a string", kq_pod_key_kind(k), k->key);
                goto out;
            }
            if (v->len == 0)
                continue; /* YuniKorn's shim: an empty annotation is none */
            if ((rc = parse_user_info(&c, k->key, v, opts, &p)) != 0)
                goto out;
            have = true;
        }
        if (!have) {
            const char *du = opts && opts->default_user ? opts->default_user : "nobody";
            if ((p.user = strdup(du)) == NULL)
                goto nomem;
        }
    }

    /* queue */
    {
        const char *q = NULL, *src = NULL;
        if ((rc = first_key(&c, labels, anns, KQ_POD_KEY_QUEUE, &q, &src)) != 0)
            goto out;
        p.queue_named = q != NULL;
        p.queue_source = src;
        if (q != NULL && (p.queue_value = strdup(q)) == NULL)
            goto nomem;
        if ((rc = place(opts, &p)) != 0)
            goto nomem;
    }

    /* application */
    {
        const char *app = NULL, *app_src = NULL;
        if ((rc = first_key(&c, labels, anns, KQ_POD_KEY_APP, &app, &app_src)) != 0)
            goto out;
        kq_app_id_fallback_t fb = opts ? opts->app_id_fallback : KQ_APPID_OWNER;
        size_t al = app ? strlen(app) : 0, sl = strlen(YK_UNIQUE_AUTOGEN);
        p.app_named = app != NULL;
        if (app != NULL && al > sl && strcmp(app + al - sl, YK_UNIQUE_AUTOGEN) == 0) {
            /* YuniKorn's admission controller writes "<ns>-uniqueautogen" before the pod has a
             * UID; the shim reads it as "<ns>-<uid>" (utils.go GetApplicationIDFromPod) */
            if (asprintf(&p.app_id, "%.*s-%s", (int)(al - sl), app, p.uid) < 0) {
                p.app_id = NULL;
                goto nomem;
            }
        } else if (app == NULL && fb != KQ_APPID_OWNER) {
            /* utils.go GenerateApplicationID: cut at 63 bytes (a label value's maximum) */
            char gen[128];
            if (fb == KQ_APPID_YUNIKORN)
                snprintf(gen, sizeof(gen), "yunikorn-%s-autogen", ns);
            else
                snprintf(gen, sizeof(gen), "%.26s-%s", ns, p.uid);
            gen[63] = '\0';
            if ((p.app_id = strdup(gen)) == NULL)
                goto nomem;
        }
        if (p.app_id == NULL && app == NULL) {
            const jv_t *owners = NULL;
            if ((rc = get_array(&c, meta, "ownerReferences", "metadata", &owners)) != 0)
                goto out;
            for (const jv_t *o = kq_jnode_first(owners); o != NULL; o = kq_jnode_next(owners, o)) {
                const jv_t *ouid = member(o, "uid");
                if (is(member(o, "controller"), KQ_JTRUE) && is(ouid, KQ_JSTRING) && ouid->len > 0) {
                    app = ouid->str;
                    break;
                }
            }
        }
        if (p.app_id == NULL && (p.app_id = dup_or(app, p.uid)) == NULL)
            goto nomem;
    }

    /* gang: a malformed gang description is ignored (the pod is then released alone), never
     * a parse error, so a bound pod is always counted */
    if (gang_of(labels, anns, ns, p.app_id, &p.gang, &p.gang_min) != 0)
        goto nomem;

    /* preemption */
    if ((rc = get_kv(&c, labels, LABEL_PREEMPTIBLE, "label", &s)) != 0)
        goto out;
    p.preemptible = !(s != NULL && strcmp(s, "false") == 0);

    /* elastic quota group named by the pod (resolved later, against the live tree) */
    if ((rc = get_kv(&c, labels, LABEL_QUOTA_NAME, "label", &s)) != 0)
        goto out;
    if (s != NULL) {
        if (strlen(s) > 253) {
            rc = fail(&c, KQ_EPARSE, "label %s: longer than 253 bytes", LABEL_QUOTA_NAME);
            goto out;
        }
        if ((p.quota_name = strdup(s)) == NULL)
            goto nomem;
    }

    *out = p;
    return 0;
nomem:
    rc = fail(&c, KQ_ENOMEM, "out of memory");
out:
    kq_pod_clear(&p);
    memset(out, 0, sizeof(*out));
    return rc;
}

int kq_pod_parse_text(const char *text, size_t len, const kq_pod_opts_t *opts, kq_pod_t *out, char *err,
                      size_t errlen)
{
    kq_jdoc_t doc = {0};
    kq_jscan_error_t je;
    int rc = kq_jdoc_parse(&doc, text, len, kq_pod_fields, &je);
    if (rc == 0) {
        rc = kq_pod_parse(kq_jdoc_root(&doc), opts, out, err, errlen);
    } else {
        memset(out, 0, sizeof(*out));
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "pod: not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    }
    kq_jdoc_free(&doc);
    return rc;
}

int kq_pod_parse_json(const json_t *obj, const kq_pod_opts_t *opts, kq_pod_t *out, char *err, size_t errlen)
{
    char *text = obj != NULL ? json_dumps(obj, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (text == NULL) {
        memset(out, 0, sizeof(*out));
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "pod: %s", obj == NULL ? "not a JSON object" : "out of memory");
        return obj == NULL ? KQ_EPARSE : KQ_ENOMEM;
    }
    int rc = kq_pod_parse_text(text, strlen(text), opts, out, err, errlen);
    free(text);
    return rc;
}

void kq_pod_clear(kq_pod_t *p)
{
    if (p == NULL)
        return;
    free(p->uid);
    free(p->ns);
    free(p->name);
    free(p->node);
    free(p->scheduler_name);
    free(p->user);
    for (size_t i = 0; i < p->n_groups; i++)
        free(p->groups[i]);
    free(p->groups);
    free(p->queue);
    free(p->queue_error);
    free(p->queue_value);
    free(p->app_id);
    free(p->quota_name);
    free(p->quota_group);
    free(p->gang);
    for (size_t i = 0; i < p->n_claims; i++)
        free(p->claims[i]);
    free(p->claims);
    kq_resource_free(&p->request);
    memset(p, 0, sizeof(*p));
}

static int copy_str(char **dst, const char *src)
{
    if (src == NULL) {
        *dst = NULL;
        return 0;
    }
    *dst = strdup(src);
    return *dst ? 0 : -1;
}

int kq_pod_copy(kq_pod_t *dst, const kq_pod_t *src)
{
    kq_pod_t p = *src;
    p.uid = p.ns = p.name = p.node = p.scheduler_name = p.user = NULL;
    p.queue = p.queue_error = p.app_id = p.queue_value = NULL;
    p.quota_name = p.quota_group = p.gang = NULL;
    p.groups = NULL;
    p.n_groups = 0;
    p.claims = NULL;
    p.n_claims = 0;
    kq_resource_init(&p.request);
    if (kq_resource_copy(&p.request, &src->request) != 0)
        goto nomem;
    if (copy_str(&p.uid, src->uid) || copy_str(&p.ns, src->ns) || copy_str(&p.name, src->name) ||
        copy_str(&p.node, src->node) || copy_str(&p.scheduler_name, src->scheduler_name) ||
        copy_str(&p.user, src->user) || copy_str(&p.queue, src->queue) ||
        copy_str(&p.queue_error, src->queue_error) || copy_str(&p.app_id, src->app_id) ||
        copy_str(&p.queue_value, src->queue_value) ||
        copy_str(&p.quota_name, src->quota_name) || copy_str(&p.quota_group, src->quota_group) ||
        copy_str(&p.gang, src->gang))
        goto nomem;
    if (src->n_groups > 0) {
        if ((p.groups = calloc(src->n_groups, sizeof(char *))) == NULL)
            goto nomem;
        for (; p.n_groups < src->n_groups; p.n_groups++)
            if (copy_str(&p.groups[p.n_groups], src->groups[p.n_groups]))
                goto nomem;
    }
    if (src->n_claims > 0) {
        if ((p.claims = calloc(src->n_claims, sizeof(char *))) == NULL)
            goto nomem;
        for (; p.n_claims < src->n_claims; p.n_claims++)
            if (copy_str(&p.claims[p.n_claims], src->claims[p.n_claims]))
                goto nomem;
    }
    *dst = p;
    return 0;
nomem:
    kq_pod_clear(&p);
    memset(dst, 0, sizeof(*dst));
    return KQ_ENOMEM;
}
