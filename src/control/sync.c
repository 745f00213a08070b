/* Keeps kubequota's state in step with the outside world: the pod informer feeding the
 * pod ledger, and the config file reloader.
 *
 * DESIGN: both run on their own threads and own no shared state of their own beyond
 * atomics; everything they change is behind the ledger's, the ugm's or the config
 * holder's locks. A config reload parses and validates off-lock, applies the new limits
 * to the ugm and the quota tree's queue groups first and then swaps the snapshot used for
 * pod resolution, so a pod resolved during the swap (or a gate pass that saw the new
 * snapshot) is checked against limits at least as new as its queue. A failed reload
 * changes nothing.
 */
#include "kubequota/control/sync.h"
#include "kubequota/control/claims.h"
#include "kubequota/kube/claim.h"
#include "kubequota/control/elastic.h"
#include "kubequota/control/gating.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kubequota/engine/config.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"
#include "kubequota/control/metering.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/kube/pod.h"
#include "kubequota/engine/resource.h"

#include <stdio.h>
#include <uthash.h>

/* ------------------------------------------------------------------ pod informer */

typedef struct nsinfo nsinfo_t;

struct kq_sync {
    kq_app_t *app;
    kq_watch_t *watch;
    kq_watch_t *ns_watch;  /* namespace informer (YuniKorn's namespace annotations) */
    kq_watch_t *claim_watch; /* ResourceClaim informer (DRA, claims.h), when app->claims */
    atomic_ulong bad_claims;
    pthread_mutex_t ns_mu; /* guards ns (never held across a call out) */
    nsinfo_t *ns;          /* namespace name -> its YuniKorn annotations */
    nsinfo_t *ns_seen;     /* relist: entries seen since list_begin (ns thread only) */
    bool ns_relisting;
    bool ns_placement_changed; /* a parent queue annotation changed during a relist (ns thread only) */
    atomic_ulong bad_pods;
    atomic_ulong lists;
    kq_jdoc_t scratch; /* the watch thread's, for kq_pod_parse (user-info annotations) */
};

static void on_list_begin(void *ud)
{
    kq_sync_t *s = ud;
    if (atomic_fetch_add(&s->lists, 1) > 0)
        kq_info("event=relist msg=\"pod list restarting; usage will be reconciled\"");
    kq_ledger_resync_begin(s->app->ledger);
    kq_gating_resync_begin(s->app->gating);
    if (s->app->metering)
        kq_metering_resync_begin(s->app->metering);
}

static void on_list_end(void *ud)
{
    kq_sync_t *s = ud;
    kq_ledger_resync_end(s->app->ledger);
    kq_gating_resync_end(s->app->gating);
    if (s->app->metering) {
        kq_metering_resync_end(s->app->metering);
        (void)kq_ledger_flush_charges(s->app->ledger);
    }
    size_t counted = 0, known = kq_ledger_size(s->app->ledger, &counted);
    if (!atomic_exchange(&s->app->ready, true))
        kq_info("event=synced pods=%zu counted=%zu msg=\"first pod list applied; ready\"", known, counted);
    else
        kq_info("event=resynced pods=%zu counted=%zu", known, counted);
}

static const char *pod_uid(const kq_jnode_t *obj)
{
    return kq_jnode_string(kq_jnode_get(kq_jnode_get(obj, "metadata"), "uid"));
}

/* A bound pod, metered by its charge (kq_ledger_with_charge's callback). */
typedef struct meter_bound {
    kq_app_t *app;
    const kq_pod_t *pod;
    const char *group;
    double at;
    int rc;
} meter_bound_t;

static void meter_bound_charge(void *ud, const kq_resource_t *charge)
{
    meter_bound_t *b = ud;
    kq_pod_t charged = *b->pod;
    charged.request = *charge; /* borrowed for the call, never freed through charged */
    b->rc = kq_metering_pod_bound(b->app->metering, &charged, b->group, b->at);
}

/* Metering follows the same pod events as usage: charged from the PodScheduled time until
 * the pod ends, so usage and charge agree on when a pod starts; priced by what the ledger
 * charges it, its claims' devices included (ledger.h "metering: a pod's charge"). */
static void meter(kq_app_t *app, const kq_jnode_t *obj, const kq_pod_t *pod)
{
    int rc = 0;
    if (kq_pod_is_terminal(pod)) {
        (void)kq_metering_pod_ended(app->metering, pod->uid, 0);
        kq_metering_pod_pending_gone(app->metering, pod->uid);
    } else if (pod->node != NULL) {
        double at = 0; /* 0 = now, when the condition is missing */
        if (kq_metering_pod_scheduled_time(obj, &at) != 0)
            at = 0;
        char group[KQ_UGM_PATH_MAX]; /* the group usage is tracked against, so charges agree */
        if (kq_ledger_pod_group(app->ledger, pod, group, sizeof(group)) != 0)
            group[0] = '\0';
        meter_bound_t b = {.app = app, .pod = pod, .group = group[0] ? group : NULL, .at = at};
        rc = kq_ledger_with_charge(app->ledger, pod, meter_bound_charge, &b);
        if (rc == 0)
            rc = b.rc;
    } else {
        rc = kq_metering_pod_pending(app->metering, pod->uid, &pod->request);
    }
    if (rc != 0)
        kq_warn("event=metering_feed_failed pod=%s/%s error=\"%s\"", pod->ns, pod->name, kq_strerror(rc));
}

/* The ledger's charge hook (ledger.h "metering: a pod's charge"): a counted pod's charge
 * moved after bind through its claims; metering charges the interval before at the old
 * charge, like a resize. A pod metering does not know yet (bound, not shown bound by the
 * watch) is priced by its charge when it is. Called under the ledger's feed lock only. */
static void meter_recharged(void *ud, const char *uid, const kq_resource_t *charge)
{
    int rc = kq_metering_pod_resized(ud, uid, charge, 0);
    if (rc != 0 && rc != KQ_ENOENT)
        kq_warn("event=metering_feed_failed uid=%s error=\"%s\"", uid, kq_strerror(rc));
}

/* A pod of kubequota's scheduler whose identity annotation could not be used as written
 * (pod.h "user/groups": it counts as the default user): one Warning Event saying why, when
 * the informer first shows the pod (a relist shows it again: the Event's count rises). */
static void identity_warning(kq_app_t *app, const kq_pod_t *pod, const char *why)
{
    if (kq_pod_is_terminal(pod) || app->scheduler_name == NULL || pod->scheduler_name == NULL ||
        strcmp(app->scheduler_name, pod->scheduler_name) != 0)
        return;
    kq_warn("event=user_info_invalid pod=%s/%s uid=%s user=%s msg=\"%s\"", pod->ns, pod->name, pod->uid, pod->user,
            why);
    if (app->kube != NULL)
        kq_kube_event_notice(app->kube, pod->ns, pod->name, pod->uid, "UserInfoInvalid", why);
}

static void on_object(void *ud, int type, const kq_jnode_t *obj)
{
    kq_sync_t *s = ud;
    kq_app_t *app = s->app;
    if (type == KQ_WATCH_DELETED) {
        const char *uid = pod_uid(obj);
        if (uid != NULL) {
            kq_pod_t gone;
            bool known = app->gating != NULL && kq_ledger_lookup(app->ledger, uid, &gone) == 0;
            kq_ledger_remove(app->ledger, uid);
            kq_gating_remove(app->gating, uid, known ? &gone : NULL);
            if (known)
                kq_pod_clear(&gone);
            if (app->metering) {
                (void)kq_metering_pod_ended(app->metering, uid, 0);
                kq_metering_pod_pending_gone(app->metering, uid);
                (void)kq_ledger_flush_charges(app->ledger); /* its shared claims moved on */
            }
        }
        return;
    }
    kq_config_t *cfg = kq_config_holder_get(app->config);
    kq_pod_opts_t opts = {
        .partition = cfg ? kq_config_partition(cfg, app->partition) : NULL,
        .default_user = app->default_user,
        .scratch = &s->scratch,
        .app_id_fallback = (kq_app_id_fallback_t)app->app_id_fallback,
        .dynamic_kind = kq_ugm_queue_kind_hook,
        .set_dynamic_limits = kq_ugm_set_dynamic_limits_hook,
        .may_submit = kq_ugm_may_submit_hook,
        .hook_arg = app->ugm,
        .ns_parent_queue = kq_sync_ns_parent_queue,
        .ns_limits = kq_sync_ns_limits,
        .ns_arg = s,
    };
    kq_pod_t pod;
    char err[512], ident_note[512];
    opts.identity_note = ident_note;
    opts.identity_note_len = sizeof(ident_note);
    if (kq_pod_parse(obj, &opts, &pod, err, sizeof(err)) != 0) {
        unsigned long n = atomic_fetch_add(&s->bad_pods, 1) + 1;
        /* Logged for the first ones and then every 100th, so a flood cannot drown the log. */
        if (n <= 10 || n % 100 == 0)
            kq_warn("event=pod_skipped uid=%s bad_pods=%lu reason=\"%s\"", pod_uid(obj) ? pod_uid(obj) : "?", n,
                    err);
    } else {
        if (ident_note[0] != '\0' && type == KQ_WATCH_ADDED)
            identity_warning(app, &pod, ident_note);
        kq_ledger_observe(app->ledger, &pod);
        /* A reload swapped the config after this pod was placed and re-placed the known pods
         * before the ledger knew this one: place it by the config in force (issue 38). */
        kq_config_t *now = kq_config_holder_get(app->config);
        if (now != cfg)
            (void)kq_ledger_place_again_pod(app->ledger, pod.uid);
        kq_config_unref(now);
        kq_gating_observe(app->gating, &pod);
        if (app->metering)
            meter(app, obj, &pod);
        kq_pod_clear(&pod);
    }
    kq_config_unref(cfg);
    if (app->metering) /* pods whose charge this event moved (a shared claim changing hands) */
        (void)kq_ledger_flush_charges(app->ledger);
}

/* ------------------------------------------------------------------ ResourceClaims */

/* The claim informer (resource.k8s.io/v1 resourceclaims, all namespaces) keeps the claim
 * table; each change is handed to the ledger, which recharges the pods that use the claim
 * (ledger.h "DRA ResourceClaims"). A claim that does not parse is left out of the table:
 * its pods wait for it (logged, rate-limited). */
static void on_claim_list_begin(void *ud)
{
    kq_sync_t *s = ud;
    kq_claims_resync_begin(s->app->claims);
}

static void claim_gone(void *ud, const char *ns, const char *name)
{
    kq_sync_t *s = ud;
    kq_debug("event=claim_gone claim=%s/%s msg=\"not in the relist\"", ns, name);
    (void)kq_ledger_claim_changed(s->app->ledger, ns, name);
}

static void on_claim_list_end(void *ud)
{
    kq_sync_t *s = ud;
    size_t dropped = kq_claims_resync_end(s->app->claims, claim_gone, s);
    (void)kq_ledger_flush_charges(s->app->ledger);
    size_t allocated = 0, n = kq_claims_size(s->app->claims, &allocated);
    kq_info("event=claims_synced claims=%zu allocated=%zu dropped=%zu", n, allocated, dropped);
}

static void on_claim_object(void *ud, int type, const kq_jnode_t *obj)
{
    kq_sync_t *s = ud;
    const kq_jnode_t *meta = kq_jnode_get(obj, "metadata");
    const char *ns = kq_jnode_string(kq_jnode_get(meta, "namespace"));
    const char *name = kq_jnode_string(kq_jnode_get(meta, "name"));
    if (name == NULL || name[0] == '\0')
        return;
    if (ns == NULL || ns[0] == '\0')
        ns = "default";
    if (type == KQ_WATCH_DELETED) {
        if (kq_claims_delete(s->app->claims, ns, name) && kq_ledger_claim_changed(s->app->ledger, ns, name) > 0)
            (void)kq_ledger_flush_charges(s->app->ledger);
        return;
    }
    kq_claim_t c;
    char err[256];
    bool changed = false;
    int rc = kq_claim_parse(obj, &c, err, sizeof(err));
    if (rc == 0)
        rc = kq_claims_put(s->app->claims, &c, &changed);
    if (rc != 0) {
        unsigned long n = atomic_fetch_add(&s->bad_claims, 1) + 1;
        if (n <= 10 || n % 100 == 0)
            kq_warn("event=claim_skipped claim=%s/%s bad_claims=%lu reason=\"%s\" msg=\"its pods wait for it\"", ns,
                    name, n, rc == KQ_EPARSE ? err : kq_strerror(rc));
        if (kq_claims_delete(s->app->claims, ns, name))
            changed = true;
    }
    if (changed && kq_ledger_claim_changed(s->app->ledger, ns, name) > 0)
        (void)kq_ledger_flush_charges(s->app->ledger); /* metering: the pods it recharged */
}

/* The ledger's placement (kq_ledger_set_placement): a known pod placed again by the config
 * in force, with the informer's hooks. Called under the ledger lock (ledger -> config
 * holder, ugm, ns_mu). */
static int place_pod(void *ud, kq_pod_t *pod)
{
    kq_sync_t *s = ud;
    kq_app_t *app = s->app;
    kq_config_t *cfg = kq_config_holder_get(app->config);
    kq_pod_opts_t opts = {
        .partition = cfg ? kq_config_partition(cfg, app->partition) : NULL,
        .default_user = app->default_user,
        .app_id_fallback = (kq_app_id_fallback_t)app->app_id_fallback,
        .dynamic_kind = kq_ugm_queue_kind_hook,
        .set_dynamic_limits = kq_ugm_set_dynamic_limits_hook,
        .may_submit = kq_ugm_may_submit_hook,
        .hook_arg = app->ugm,
        .ns_parent_queue = kq_sync_ns_parent_queue,
        .ns_limits = kq_sync_ns_limits,
        .ns_arg = s,
    };
    int rc = kq_pod_place(&opts, pod);
    kq_config_unref(cfg);
    return rc;
}

/* ------------------------------------------------------------------ namespaces */

/* YuniKorn's namespace annotations (apache/yunikorn-k8shim pkg/common/constants,
 * pkg/common/utils/utils.go GetNamespaceQuotaFromAnnotation, pkg/cache/context.go
 * updateApplicationTags): parentqueue becomes the tag namespace.parentqueue; namespace.quota
 * (a JSON map of Kubernetes quantities; else the deprecated namespace.max.cpu/.memory) and
 * namespace.maxApps become the max and maxapplications of the namespace's dynamic queue.
 * namespace.guaranteed is read and reported as not used. A bad value is logged and ignored,
 * as the shim does. */
#define ANN_NS_PARENT "yunikorn.apache.org/parentqueue"
#define ANN_NS_QUOTA "yunikorn.apache.org/namespace.quota"
#define ANN_NS_MAXCPU "yunikorn.apache.org/namespace.max.cpu"
#define ANN_NS_MAXMEM "yunikorn.apache.org/namespace.max.memory"
#define ANN_NS_MAXAPPS "yunikorn.apache.org/namespace.maxApps"
#define ANN_NS_GUARANTEED "yunikorn.apache.org/namespace.guaranteed"
#define NS_VALUE_MAX 1024

struct nsinfo {
    UT_hash_handle hh;
    char *parent;          /* NULL when not annotated */
    bool has_max;
    kq_resource_t max;
    uint64_t max_apps;
    char name[];
};

static const kq_jfilter_t ns_ann_keys[] = {
    {ANN_NS_PARENT, NULL}, {ANN_NS_QUOTA, NULL}, {ANN_NS_MAXCPU, NULL}, {ANN_NS_MAXMEM, NULL},
    {ANN_NS_MAXAPPS, NULL}, {ANN_NS_GUARANTEED, NULL}, {NULL, NULL},
};
static const kq_jfilter_t ns_meta_keys[] = {
    {"name", NULL}, {"resourceVersion", NULL}, {"annotations", ns_ann_keys}, {NULL, NULL},
};
static const kq_jfilter_t ns_fields[] = {{"metadata", ns_meta_keys}, {NULL, NULL}};

static void nsinfo_free(nsinfo_t *n)
{
    if (n != NULL) {
        free(n->parent);
        kq_resource_free(&n->max);
    }
    free(n);
}

static bool ns_quantity(const char *ns, const char *key, const char *name, const char *val, kq_resource_t *r)
{
    char why[128];
    int64_t v = 0;
    if (kq_quantity_parse(name, val, &v, why, sizeof(why)) != 0 || v < 0 || kq_resource_set(r, name, v) != 0) {
        kq_warn("event=namespace_annotation_ignored namespace=%s key=%s msg=\"%s: bad quantity '%.64s'\"", ns, key,
                name, val);
        return false;
    }
    return true;
}

/* Builds the entry of one namespace object; NULL when it has none of the annotations. */
static nsinfo_t *nsinfo_parse(const kq_jnode_t *obj, const char *name)
{
    const kq_jnode_t *anns = kq_jnode_get(kq_jnode_get(obj, "metadata"), "annotations");
    const char *parent = kq_jnode_string(kq_jnode_get(anns, ANN_NS_PARENT));
    const char *quota = kq_jnode_string(kq_jnode_get(anns, ANN_NS_QUOTA));
    const char *mcpu = kq_jnode_string(kq_jnode_get(anns, ANN_NS_MAXCPU));
    const char *mmem = kq_jnode_string(kq_jnode_get(anns, ANN_NS_MAXMEM));
    const char *mapps = kq_jnode_string(kq_jnode_get(anns, ANN_NS_MAXAPPS));
    if (kq_jnode_string(kq_jnode_get(anns, ANN_NS_GUARANTEED)) != NULL)
        kq_warn("event=namespace_annotation_unsupported namespace=%s key=%s msg=\"guaranteed resources are not "
                "used by kubequota\"", name, ANN_NS_GUARANTEED);
    size_t nl = strlen(name);
    nsinfo_t *n = calloc(1, sizeof(*n) + nl + 1);
    if (n == NULL)
        return NULL;
    memcpy(n->name, name, nl + 1);
    if (parent != NULL && parent[0] != '\0' && strlen(parent) < NS_VALUE_MAX && (n->parent = strdup(parent)) == NULL) {
        free(n);
        return NULL;
    }
    kq_resource_t r = KQ_RESOURCE_EMPTY;
    bool ok = true;
    if (quota != NULL && quota[0] != '\0') {
        kq_jdoc_t doc = {0};
        kq_jscan_error_t je;
        const kq_jnode_t *root = NULL;
        if (strlen(quota) > NS_VALUE_MAX || kq_jdoc_parse(&doc, quota, strlen(quota), NULL, &je) != 0 ||
            (root = kq_jdoc_root(&doc))->type != KQ_JOBJECT) {
            kq_warn("event=namespace_annotation_ignored namespace=%s key=%s msg=\"not a JSON object of "
                    "quantities\"", name, ANN_NS_QUOTA);
            ok = false;
        } else {
            for (const kq_jnode_t *v = kq_jnode_first(root); v != NULL && ok; v = kq_jnode_next(root, v)) {
                const char *q = kq_jnode_string(v);
                ok = q != NULL && ns_quantity(name, ANN_NS_QUOTA, v->key, q, &r);
                if (q == NULL)
                    kq_warn("event=namespace_annotation_ignored namespace=%s key=%s msg=\"%s: not a string\"",
                            name, ANN_NS_QUOTA, v->key);
            }
        }
        kq_jdoc_free(&doc);
    } else if ((mcpu != NULL && mcpu[0] != '\0') || (mmem != NULL && mmem[0] != '\0')) {
        if (mcpu != NULL && mcpu[0] != '\0')
            ok = ns_quantity(name, ANN_NS_MAXCPU, "cpu", mcpu, &r);
        if (ok && mmem != NULL && mmem[0] != '\0')
            ok = ns_quantity(name, ANN_NS_MAXMEM, "memory", mmem, &r);
    }
    if (ok && r.n > 0) {
        n->has_max = true;
        kq_resource_move(&n->max, &r);
    }
    kq_resource_free(&r);
    if (mapps != NULL && mapps[0] != '\0') {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(mapps, &end, 10);
        if (errno != 0 || end == mapps || *end != '\0' || mapps[0] == '-')
            kq_warn("event=namespace_annotation_ignored namespace=%s key=%s msg=\"not a whole number: '%.32s'\"",
                    name, ANN_NS_MAXAPPS, mapps);
        else
            n->max_apps = v;
    }
    if (n->parent == NULL && !n->has_max && n->max_apps == 0) {
        nsinfo_free(n);
        return NULL;
    }
    return n;
}

/* Replaces (or removes, n NULL) the entry of namespace `name`. true when its parent queue
 * annotation (a placement input: the tag namespace.parentqueue) changed. */
static bool ns_put(kq_sync_t *s, const char *name, nsinfo_t *n)
{
    nsinfo_t *old = NULL;
    pthread_mutex_lock(&s->ns_mu);
    HASH_FIND_STR(s->ns, name, old);
    if (old != NULL)
        HASH_DEL(s->ns, old);
    if (n != NULL)
        HASH_ADD_STR(s->ns, name, n);
    pthread_mutex_unlock(&s->ns_mu);
    const char *was = old ? old->parent : NULL, *is_now = n ? n->parent : NULL;
    bool changed = was == NULL ? is_now != NULL : is_now == NULL || strcmp(was, is_now) != 0;
    nsinfo_free(old);
    return changed;
}

static void on_ns_list_begin(void *ud)
{
    kq_sync_t *s = ud;
    s->ns_relisting = true;
}

/* After a relist: namespaces not listed are forgotten. */
static void on_ns_list_end(void *ud)
{
    kq_sync_t *s = ud;
    nsinfo_t *n, *tmp;
    pthread_mutex_lock(&s->ns_mu);
    HASH_ITER(hh, s->ns, n, tmp) {
        nsinfo_t *seen = NULL;
        HASH_FIND_STR(s->ns_seen, n->name, seen);
        if (seen == NULL) {
            HASH_DEL(s->ns, n);
            nsinfo_free(n);
        }
    }
    pthread_mutex_unlock(&s->ns_mu);
    HASH_ITER(hh, s->ns_seen, n, tmp) {
        HASH_DEL(s->ns_seen, n);
        free(n);
    }
    s->ns_relisting = false;
    /* a namespace's parent queue is a placement input: pods follow it (issue 38), once per list */
    if (s->ns_placement_changed) {
        s->ns_placement_changed = false;
        (void)kq_ledger_place_again(s->app->ledger);
    }
}

static void on_ns_object(void *ud, int type, const kq_jnode_t *obj)
{
    kq_sync_t *s = ud;
    const char *name = kq_jnode_string(kq_jnode_get(kq_jnode_get(obj, "metadata"), "name"));
    if (name == NULL || name[0] == '\0' || strlen(name) > 253)
        return;
    if (s->ns_relisting) {
        nsinfo_t *seen = NULL;
        HASH_FIND_STR(s->ns_seen, name, seen);
        size_t nl = strlen(name);
        if (seen == NULL && (seen = calloc(1, sizeof(*seen) + nl + 1)) != NULL) {
            memcpy(seen->name, name, nl + 1);
            HASH_ADD_STR(s->ns_seen, name, seen);
        }
    }
    if (ns_put(s, name, type == KQ_WATCH_DELETED ? NULL : nsinfo_parse(obj, name))) {
        if (s->ns_relisting)
            s->ns_placement_changed = true;
        else
            (void)kq_ledger_place_again(s->app->ledger);
    }
}

bool kq_sync_ns_parent_queue(void *sync, const char *ns, char *buf, size_t len)
{
    kq_sync_t *s = sync;
    bool found = false;
    if (s == NULL || ns == NULL)
        return false;
    pthread_mutex_lock(&s->ns_mu);
    nsinfo_t *n = NULL;
    HASH_FIND_STR(s->ns, ns, n);
    if (n != NULL && n->parent != NULL && strlen(n->parent) < len) {
        memcpy(buf, n->parent, strlen(n->parent) + 1);
        found = true;
    }
    pthread_mutex_unlock(&s->ns_mu);
    return found;
}

bool kq_sync_ns_limits(void *sync, const char *ns, kq_resource_t *max, bool *has_max, uint64_t *max_apps)
{
    kq_sync_t *s = sync;
    bool found = false;
    *has_max = false;
    *max_apps = 0;
    if (s == NULL || ns == NULL)
        return false;
    pthread_mutex_lock(&s->ns_mu);
    nsinfo_t *n = NULL;
    HASH_FIND_STR(s->ns, ns, n);
    if (n != NULL && (n->has_max || n->max_apps != 0)) {
        *has_max = n->has_max;
        if (n->has_max && kq_resource_copy(max, &n->max) != 0) {
            kq_error("event=namespace_annotation_ignored namespace=%s key=%s msg=\"out of memory\"", ns, ANN_NS_QUOTA);
            *has_max = false;
        }
        *max_apps = n->max_apps;
        found = true;
    }
    pthread_mutex_unlock(&s->ns_mu);
    return found;
}

/* Waits up to 5 s for the first list of an informer the pod informer should follow: pods
 * listed after it are placed (namespaces) and charged (claims) at once; a list that does not
 * complete soon (no RBAC, a slow API server) does not hold pods up, since the result does
 * not depend on the order, only the number of re-placements and recharges. (The informer is
 * started by the caller, with its path written there: tests/chart/test_rbac.py derives
 * kubequota's RBAC from the paths given to kq_kube_watch_start.) */
static void wait_first_list(kq_watch_t *w)
{
    for (int i = 0; i < 100 && w != NULL && !kq_watch_synced(w); i++)
        nanosleep(&(struct timespec){.tv_nsec = 50 * 1000000L}, NULL);
}

kq_sync_t *kq_sync_start(kq_app_t *app)
{
    kq_sync_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->app = app;
    if (pthread_mutex_init(&s->ns_mu, NULL) != 0) {
        free(s);
        return NULL;
    }
    /* Namespaces first, so that the first pod list is placed with their annotations; a
     * namespace list that does not complete soon (e.g. no RBAC) does not hold pods up. */
    kq_watch_handler_t nh = {
        .list_begin = on_ns_list_begin,
        .doc = on_ns_object,
        .list_end = on_ns_list_end,
        .ud = s,
        .keep = ns_fields,
    };
    s->ns_watch = kq_kube_watch_start(app->kube, "/api/v1/namespaces", NULL, &nh);
    wait_first_list(s->ns_watch);
    /* ResourceClaims next, so that the first pod list is charged with its claims (the order
     * does not change the result, only how many recharges the start costs). */
    if (app->claims != NULL) {
        kq_watch_handler_t ch = {
            .list_begin = on_claim_list_begin,
            .doc = on_claim_object,
            .list_end = on_claim_list_end,
            .ud = s,
            .keep = kq_claim_fields,
        };
        s->claim_watch = kq_kube_watch_start(app->kube, "/apis/resource.k8s.io/v1/resourceclaims", NULL, &ch);
        wait_first_list(s->claim_watch);
    }
    char query[512];
    char *esc = NULL;
    /* Only our scheduler's pods: spec.schedulerName=<name>, URL-escaped. */
    size_t n = strlen(app->scheduler_name);
    esc = malloc(n * 3 + 1);
    if (esc == NULL) {
        kq_sync_stop(s);
        return NULL;
    }
    char *p = esc;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)app->scheduler_name[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~')
            *p++ = (char)c;
        else
            p += sprintf(p, "%%%02X", c);
    }
    *p = '\0';
    snprintf(query, sizeof(query), "fieldSelector=spec.schedulerName%%3D%s", esc);
    free(esc);
    kq_ledger_set_placement(app->ledger, place_pod, s);
    if (app->metering != NULL) /* before the first pod: a claim's change after bind is a resize */
        kq_ledger_set_charge_hook(app->ledger, meter_recharged, app->metering);
    kq_watch_handler_t h = {
        .list_begin = on_list_begin,
        .doc = on_object,
        .list_end = on_list_end,
        .ud = s,
        .keep = kq_pod_fields, /* only what kq_pod_parse and metering read is built */
    };
    s->watch = kq_kube_watch_start(app->kube, "/api/v1/pods", query, &h);
    if (s->watch == NULL) {
        kq_sync_stop(s);
        return NULL;
    }
    return s;
}

void kq_sync_stop(kq_sync_t *s)
{
    if (s == NULL)
        return;
    kq_kube_watch_stop(s->watch);
    kq_kube_watch_stop(s->claim_watch);
    kq_kube_watch_stop(s->ns_watch);
    if (s->app != NULL && s->app->ledger != NULL) {
        kq_ledger_set_placement(s->app->ledger, NULL, NULL);
        /* the slice informer may still flush (main.c): metering is freed after this */
        kq_ledger_set_charge_hook(s->app->ledger, NULL, NULL);
    }
    nsinfo_t *n, *tmp;
    HASH_ITER(hh, s->ns, n, tmp) {
        HASH_DEL(s->ns, n);
        nsinfo_free(n);
    }
    HASH_ITER(hh, s->ns_seen, n, tmp) {
        HASH_DEL(s->ns_seen, n);
        free(n);
    }
    pthread_mutex_destroy(&s->ns_mu);
    kq_jdoc_free(&s->scratch);
    free(s);
}

unsigned long kq_sync_bad_pods(kq_sync_t *s)
{
    return atomic_load(&s->bad_pods);
}

unsigned long kq_sync_watch_restarts(kq_sync_t *s)
{
    return s && s->watch ? kq_watch_restarts(s->watch) : 0;
}

/* ------------------------------------------------------------------ config reloader */

struct kq_reloader {
    kq_app_t *app;
    char *path;
    int interval_ms;
    pthread_t thread;
    pthread_mutex_t mu; /* guards stop */
    pthread_cond_t cv;
    bool stop;
    bool have_last;
    struct stat last; /* identity of the file last tried (reloader thread only) */
};

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

int kq_app_check_config(void *appv, const kq_config_t *cfg, const char *file, kq_diags_t *diags)
{
    const kq_app_t *app = appv;
    int rc = kq_config_check_partition(cfg, app->partition, file, diags);
    if (rc == 0 && app->metering)
        rc = kq_metering_check_config(kq_config_partition(cfg, app->partition), diags);
    return rc;
}

int kq_reloader_reload_now(kq_reloader_t *r)
{
    kq_app_t *app = r->app;
    kq_diags_t diags;
    kq_diags_init(&diags);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_file(r->path, &cfg, &diags);
    if (rc == 0)
        rc = kq_app_check_config(app, cfg, r->path, &diags);
    if (rc == 0)
        rc = kq_ugm_set_config(app->ugm, cfg);
    if (rc == 0 && app->metering)
        rc = kq_metering_set_config(app->metering, kq_config_partition(cfg, app->partition), &diags);
    /* The queue groups of the quota tree too, before the swap (issue 38, item 4): the gate
     * re-checks its waiting pods when it sees the new snapshot, and a check against the
     * tree's old max (the elastic timer applies a snapshot up to a tick later) set a pod
     * aside until a later timed pass. The timer's own apply then finds nothing to do. */
    if (rc == 0 && app->elastic)
        kq_elastic_apply_config(app->elastic, kq_config_partition(cfg, app->partition));
    if (rc == 0) {
        kq_config_holder_swap(app->config, cfg);
        /* Every known pod is placed again by the new config and moves with its usage,
         * applications and pending request when its queue changed, so a restart (which
         * places every pod by the config in force) changes no view (issue 38). */
        (void)kq_ledger_place_again(app->ledger);
        char summary[256];
        kq_config_summary(cfg, summary, sizeof(summary));
        kq_info("event=config_reloaded file=%s summary=\"%s\"", r->path, summary);
        for (size_t i = 0; i < kq_config_warning_count(cfg); i++)
            kq_warn("event=config_unsupported_key msg=\"%s\"", kq_config_warning_at(cfg, i));
    } else {
        char *all = kq_diags_join(&diags, "; ");
        const char *text = all ? all : kq_strerror(rc);
        /* diagnostics quote keys and values ("shared-weight \"cpu=x\""): the log writer
         * escapes them inside the quoted value */
        kq_error("event=config_rejected file=%s msg=\"config rejected, keeping the old one\" errors=\"%s\"",
                 r->path, text);
        free(all);
    }
    if (app->metrics)
        kq_metrics_config_reload(app->metrics, rc == 0);
    kq_config_unref(cfg);
    kq_diags_free(&diags);
    return rc;
}

static void *reloader_main(void *arg)
{
    kq_reloader_t *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        kq_timespec_add_ms(&deadline, (long)r->interval_ms);
        pthread_cond_timedwait(&r->cv, &r->mu, &deadline);
        if (r->stop)
            break;
        pthread_mutex_unlock(&r->mu);
        struct stat st;
        if (stat(r->path, &st) == 0) {
            if (!r->have_last || !same_file(&st, &r->last)) {
                r->last = st;
                r->have_last = true;
                (void)kq_reloader_reload_now(r);
            }
        } else if (r->have_last) {
            /* A ConfigMap update briefly removes the link; keep the old config and retry. */
            kq_debug("event=config_stat_failed file=%s errno=%d", r->path, errno);
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

kq_reloader_t *kq_reloader_start(kq_app_t *app, const char *path, int interval_ms)
{
    kq_reloader_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->app = app;
    r->interval_ms = interval_ms > 0 ? interval_ms : 2000;
    r->path = strdup(path);
    if (r->path == NULL)
        goto fail;
    /* The file loaded at start-up is the baseline: only a change triggers a reload. */
    if (stat(path, &r->last) == 0)
        r->have_last = true;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->thread, NULL, reloader_main, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        goto fail;
    }
    return r;
fail:
    free(r->path);
    free(r);
    return NULL;
}

void kq_reloader_stop(kq_reloader_t *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->path);
    free(r);
}
