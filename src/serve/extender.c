/* Scheduler extender: kube-scheduler's filter, bind and preempt calls, decoded from and
 * encoded to the extender/v1 JSON (Go field names, null for unset fields).
 *
 * filter  resolves the pod (pod module, current config snapshot) and asks the pod ledger
 *         whether it would fit; the answer is every node back, or no node back and every
 *         node in FailedAndUnresolvableNodes with the ledger's reason (preemption cannot
 *         help a quota denial, hence "unresolvable"). Error is only for real failures.
 * bind    counts the pod with kq_ledger_assume (check and commit in one step, so of two
 *         racing pods only the one that fits is counted), then POSTs the Binding with no
 *         lock held; a failed POST releases the count again only once a GET shows the
 *         pod unbound (or gone): a POST that timed out may have committed, and a 409
 *         "already assigned" means it is bound (bind_outcome).
 * preempt with elastic quota (app->elastic set, the preemptor is ours): keeps only victims
 *         counted on that node in the preemptor's own leaf quota group with a lower
 *         priority, that are preemptible (quota.scheduling.koordinator.sh/preemptible is not
 *         "false") and, unless --preempt-default-group, not of the default group; and only
 *         nodes where the group's used minus those victims plus the preemptor fits its
 *         runtime (and every ancestor's) and the preemptor fits the node's allocatable
 *         beside the other pods kubequota counts there (a node the nodes informer has
 *         not shown is dropped): preemption never crosses groups. A node whose victims
 *         were all dropped is dropped too (evicting nothing there cannot help).
 *         Otherwise the victims are echoed in the meta form. The victims answered are
 *         remembered for the preemptor (kq_ledger_preempt_note, ledger.h "in-flight
 *         preemption").
 *         A preemptor of a scheduler-plugins quota (scheduling.x-k8s.io) gets
 *         CapacityScheduling's victims instead (capacity_victims): within its min, pods
 *         of other scheduler-plugins quotas above their min, whatever their priority;
 *         beyond it, its own quota's pods of lower priority; chosen from the pods
 *         kubequota counts on each node kube-scheduler proposed, not from kube-scheduler's
 *         own victims. kq_ledger_preempt_note discounts the other quotas' victims too,
 *         in the sum of what scheduler-plugins quotas use.
 * filter  denials by the quota tree go to FailedNodes (preemption inside the group may
 *         help); denials by user/group/queue limits to FailedAndUnresolvableNodes. A quota
 *         tree denial of a preemptor whose victims are in flight gives back the nodes
 *         where it fits with that node's victims discounted (as kube-scheduler sees the
 *         nominated node), and bind on such a node counts it the same way
 *         (kq_ledger_assume_on).
 *
 * DESIGN: stateless apart from the ledger's in-flight preemption table; every request
 * owns its parsed JSON and its kq_pod_t. The hot path
 * (filter) builds no JSON tree of the body: jscan (jscan.h) validates it in one pass with
 * jansson's exact rules, reports the spans of Nodes and NodeNames and, in the same pass,
 * decodes the fields of the Pod that kq_pod_parse reads into a per-request kq_jdoc (two
 * buffers, no tree). An allowed or passed-through answer copies the
 * NodeNames (or Nodes) text as it came (validated, and exactly the nodes sent); a denial
 * walks the names once, writing each name's raw JSON text with the one reason, escaped
 * once. So the cost per node is a scan and a memcpy (no malloc, no escaping), and work
 * is independent of the number of users, groups and pods (the ledger and ugm use hash
 * lookups). bind and preempt bodies are small and still go through jansson.
 */
#include "kubequota/serve/extender.h"
#include "kubequota/control/claims.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/control/elastic.h"
#include "kubequota/base/error.h"
#include "kubequota/kube/jscan.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/control/metering.h"
#include "kubequota/control/profiles.h"
#include "kubequota/control/requeue.h"
#include "kubequota/control/resolve.h"
#include "kubequota/base/log.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/kube/pod.h"
#include "kubequota/serve/kubectl.h"
#include "kubequota/serve/rest.h"
#include "kubequota/control/sync.h"

#define REASON_MAX 1024

/* ------------------------------------------------------------------ helpers */

/* A JSON string value that may hold bytes that are not UTF-8 (names from requests or the
 * API server quoted in a message): tried as is, then with such bytes replaced by '?'. */
static json_t *text_value(const char *s)
{
    json_t *v = json_string(s);
    if (v != NULL)
        return v;
    char *copy = strdup(s);
    if (copy == NULL)
        return NULL;
    for (unsigned char *p = (unsigned char *)copy; *p; p++)
        if (*p >= 0x80)
            *p = '?';
    v = json_string(copy);
    free(copy);
    return v;
}

/* Serialises `res` (stolen) into *out; 500 with *out NULL on ENOMEM. */
static int reply(json_t *res, int status, char **out, size_t *out_len)
{
    char *s = res ? json_dumps(res, JSON_COMPACT) : NULL;
    json_decref(res);
    *out = s;
    *out_len = s ? strlen(s) : 0;
    return s ? status : 500;
}

/* 400 {"error": "..."} for a body that is not JSON (the parser's line, column and text)
 * or not a JSON object (text NULL). */
static int bad_request(kq_app_t *app, kq_verb_t verb, const char *what, int line, int column, const char *text,
                       char **out, size_t *out_len)
{
    char msg[REASON_MAX];
    if (text != NULL)
        kq_errf(msg, sizeof(msg), "%s: malformed JSON at line %d, column %d: %s", what, line, column, text);
    else
        kq_errf(msg, sizeof(msg), "%s: expected a JSON object", what);
    kq_metrics_decision(app->metrics, verb, KQ_RESULT_ERROR);
    kq_debug("event=bad_request verb=%s msg=\"%s\"", kq_verb_name(verb), msg);
    json_t *v = text_value(msg);
    return reply(v ? json_pack("{s:o}", "error", v) : NULL, 400, out, out_len);
}

/* Kubernetes object names, checked as the API server does (IsDNS1123Subdomain and
 * IsDNS1123Label in kubernetes/apimachinery pkg/util/validation/validation.go): pod and
 * node names are DNS subdomains (at most 253 bytes of [a-z0-9.-], alphanumeric at both
 * ends), namespaces DNS labels (at most 63, no dots). A name the API server could never
 * have accepted is refused before it reaches a URL, a log line or an event. */
static bool dns_name_ok(const char *s, size_t max, bool dots)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++) {
        char c = s[n];
        if (n >= max)
            return false;
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && !(dots && c == '.'))
            return false;
    }
    if (n == 0)
        return false;
    char a = s[0], z = s[n - 1];
    return ((a >= 'a' && a <= 'z') || (a >= '0' && a <= '9')) && ((z >= 'a' && z <= 'z') || (z >= '0' && z <= '9'));
}

#define UID_MAX 128

static bool uid_ok(const char *s)
{
    size_t n = 0;
    for (; s[n] != '\0'; n++)
        if (n >= UID_MAX || (unsigned char)s[n] <= 0x20 || (unsigned char)s[n] >= 0x7f)
            return false;
    return n > 0;
}

/* NULL when ns/name/uid (uid may be NULL) could name a real pod; else which one is bad. */
static const char *bad_pod_ref(const char *ns, const char *name, const char *uid)
{
    if (!dns_name_ok(ns, 63, false))
        return "namespace";
    if (!dns_name_ok(name, 253, true))
        return "name";
    if (uid != NULL && !uid_ok(uid))
        return "uid";
    return NULL;
}

static const char *str_field(const json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static bool is_null_or_absent(const json_t *v)
{
    return v == NULL || json_is_null(v);
}

/* Resolves a Pod against the current config snapshot: a decoded node (obj), else a jansson
 * value (jobj). 0, or an error with the reason in err (*pod left zeroed). */
static int parse_pod(kq_app_t *app, const kq_jnode_t *obj, const json_t *jobj, kq_pod_t *pod, char *err,
                     size_t errlen)
{
    kq_config_t *cfg = app->config ? kq_config_holder_get(app->config) : NULL;
    const kq_partition_conf_t *part = cfg ? kq_config_partition(cfg, app->partition) : NULL;
    int rc;
    if (part == NULL) {
        kq_errf(err, errlen, "no queue configuration loaded for partition \"%s\"", app->partition);
        rc = KQ_ESTATE;
        goto out;
    }
    kq_pod_opts_t opts = {
        .partition = part,
        .default_user = app->default_user,
        .app_id_fallback = (kq_app_id_fallback_t)app->app_id_fallback,
        .dynamic_kind = kq_ugm_queue_kind_hook,
        .set_dynamic_limits = kq_ugm_set_dynamic_limits_hook,
        .may_submit = kq_ugm_may_submit_hook,
        .hook_arg = app->ugm,
        .ns_parent_queue = app->sync ? kq_sync_ns_parent_queue : NULL,
        .ns_limits = app->sync ? kq_sync_ns_limits : NULL,
        .ns_arg = app->sync,
    };
    char perr[REASON_MAX] = "";
    rc = obj != NULL ? kq_pod_parse(obj, &opts, pod, perr, sizeof(perr))
                     : kq_pod_parse_json(jobj, &opts, pod, perr, sizeof(perr));
    if (rc != 0)
        kq_errf(err, errlen, "cannot read the pod: %s", perr[0] ? perr : kq_strerror(rc));
out:
    kq_config_unref(cfg); /* the pod owns copies of everything it needs */
    return rc;
}

/* Denials are logged at info, at most once per pod and reason a minute and 20 a second
 * overall (burst 50), so kube-scheduler retrying a waiting pod every second, or a flood of
 * new pods, cannot flood the log; lines held back are counted in suppressed=. */
static kq_log_limiter_t *denial_limiter;
static pthread_once_t denial_once = PTHREAD_ONCE_INIT;

static void denial_limiter_init(void)
{
    denial_limiter = kq_log_limiter_new(60, 20, 50);
}

static void log_denial(const char *verb, const kq_pod_t *pod, const char *reason)
{
    if (kq_log_level_current < KQ_LOG_INFO)
        return;
    pthread_once(&denial_once, denial_limiter_init);
    char key[512];
    snprintf(key, sizeof(key), "%s|%s", pod->uid ? pod->uid : "", reason);
    unsigned long suppressed = 0;
    if (denial_limiter != NULL && !kq_log_limiter_allow(denial_limiter, key, NULL, &suppressed))
        return;
    kq_info("event=%s result=denied pod=%s/%s uid=%s user=%s queue=%s reason=\"%s\" suppressed=%lu "
            "msg=\"pod denied by quota\"",
            verb, pod->ns, pod->name, pod->uid, pod->user, pod->queue ? pod->queue : "-", reason, suppressed);
}

/* What each kind of denial (error.h; the engines report it next to the text) shows as:
 * the Event reason (kubectl describe pod) and the reason label of
 * kubequota_admission_attempts_total (docs/events.md, docs/metrics.md). A denial of no
 * particular kind is an ordinary QuotaExceeded. */
typedef struct denial_kind {
    const char *event_reason; /* Event .reason */
    const char *label;        /* metric label */
} denial_kind_t;

static const denial_kind_t denial_kinds[KQ_DENIAL_COUNT] = {
    [KQ_DENIAL_NONE] = {"QuotaExceeded", "over_limit"},
    [KQ_DENIAL_OVER_LIMIT] = {"QuotaExceeded", "over_limit"},
    [KQ_DENIAL_OVER_RUNTIME] = {"QuotaRuntimeExceeded", "over_runtime"},
    [KQ_DENIAL_NEVER_FITS] = {"QuotaNeverFits", "never_fits"},
    [KQ_DENIAL_QUEUE_MISSING] = {"QueueNotFound", "queue_missing"},
    [KQ_DENIAL_QUEUE_NOT_LEAF] = {"QueueNotLeaf", "queue_not_leaf"},
    [KQ_DENIAL_GROUP_MISSING] = {"QuotaGroupNotFound", "queue_missing"},
    [KQ_DENIAL_GROUP_NOT_LEAF] = {"QuotaGroupNotLeaf", "queue_not_leaf"},
    [KQ_DENIAL_ACL] = {"QueueACLDenied", "acl"},
    [KQ_DENIAL_BUDGET] = {"BudgetExhausted", "budget"},
    [KQ_DENIAL_APP_OWNER] = {"ApplicationOfAnotherUser", "app_owner"},
    [KQ_DENIAL_QUOTA_NOT_FOUND] = {"QuotaNotFound", "quota_not_found"},
    [KQ_DENIAL_QUOTA_OTHER_NS] = {"QuotaOfAnotherNamespace", "quota_other_namespace"},
};

static const denial_kind_t *classify(kq_denial_t kind)
{
    return &denial_kinds[(unsigned)kind < KQ_DENIAL_COUNT ? kind : KQ_DENIAL_NONE];
}

const char *kq_extender_denial_reason(kq_denial_t kind)
{
    return classify(kind)->event_reason;
}

const char *kq_extender_denial_label(kq_denial_t kind)
{
    return classify(kind)->label;
}

static void post_denial_event(kq_app_t *app, const kq_pod_t *pod, const char *reason, kq_denial_t kind)
{
    if (app->kube != NULL)
        kq_kube_event(app->kube, pod->ns, pod->name, pod->uid, "Warning", classify(kind)->event_reason, reason);
}

/* ------------------------------------------------------------------ filter */

/* How long the filter of a pod our watch has not shown waits for it before asking the
 * API server (kq_extender_filter). */
#define UNSEEN_WAIT_MS 100

/* The quota label of a pod not counted yet: only a quota that exists and governs the pod's
 * namespace (kq_resolve_check_quota_name; issue 37), for a pod that skipped the webhook. */
static int check_quota_name(kq_app_t *app, const kq_pod_t *pod, char *reason, size_t rlen, kq_denial_t *kind)
{
    if (app->elastic == NULL || pod->quota_name == NULL || app->ledger == NULL ||
        kq_ledger_is_counted(app->ledger, pod->uid))
        return 0;
    return kq_resolve_check_quota_name(kq_elastic_resolver(app->elastic), pod, reason, rlen, kind);
}

/* The filter's verdict on a resolved pod, changing nothing: its quota label, the ledger's
 * check (limits, ACLs, quota tree), then the owner's credit budget for a pod not counted
 * yet. 0 fits, KQ_EDENIED with the reason, or an error. Shared by filter and explain. */
static int decide_on(kq_app_t *app, const kq_pod_t *pod, const char *node, char *reason, size_t rlen, bool *by_tree,
                     kq_denial_t *kind)
{
    *kind = KQ_DENIAL_NONE;
    int rc = check_quota_name(app, pod, reason, rlen, kind);
    if (rc != 0)
        return rc;
    rc = app->ledger ? kq_ledger_check_on(app->ledger, pod, node, reason, rlen, by_tree, kind) : KQ_ESTATE;
    if (rc == 0 && app->metering != NULL && !kq_ledger_is_counted(app->ledger, pod->uid)) {
        /* An exhausted credit budget stops new pods of its owner; running pods keep running. */
        char group[KQ_UGM_PATH_MAX];
        if (kq_ledger_pod_group(app->ledger, pod, group, sizeof(group)) != 0)
            group[0] = '\0';
        rc = kq_metering_check_budget(app->metering, pod->user, group[0] ? group : NULL, pod->queue, reason, rlen,
                                      kind);
    }
    return rc;
}

static int decide(kq_app_t *app, const kq_pod_t *pod, char *reason, size_t rlen, bool *by_tree, kq_denial_t *kind)
{
    return decide_on(app, pod, NULL, reason, rlen, by_tree, kind);
}

/* True when the API server has the pod, with the same uid (one GET). */
static bool pod_exists(kq_app_t *app, const kq_pod_t *pod)
{
    json_t *obj = NULL;
    if (kq_kube_get_pod(app->kube, pod->ns, pod->name, &obj) != 0)
        return false;
    const char *uid = str_field(json_object_get(obj, "metadata"), "uid");
    bool same = uid != NULL && strcmp(uid, pod->uid) == 0;
    json_decref(obj);
    return same;
}

/* ExtenderFilterResult for a failure: no node, only Error (the shape of kube-scheduler's
 * own error results). */
static int filter_error(kq_app_t *app, const char *msg, char **out, size_t *out_len)
{
    kq_metrics_decision(app->metrics, KQ_VERB_FILTER, KQ_RESULT_ERROR);
    kq_warn("event=filter_error msg=\"%s\"", msg);
    json_t *err = text_value(msg);
    json_t *res = err ? json_pack("{s:n,s:n,s:n,s:n,s:o}", "Nodes", "NodeNames", "FailedNodes",
                                  "FailedAndUnresolvableNodes", "Error", err)
                      : NULL;
    return reply(res, 200, out, out_len);
}

/* ---- the filter request and result as text ----
 * kube-scheduler may send thousands of node names (about 200 KB at 5,000). The request is
 * not turned into a jansson tree: jscan validates the whole body once (exactly what
 * json_loadb accepts, see jscan.h) and reports where Pod, Nodes and NodeNames are; only
 * the Pod is decoded (a kq_jdoc, no jansson tree), and of it only what kq_pod_parse reads
 * (kq_pod_fields). An allowed answer copies the NodeNames (or Nodes) text
 * unchanged: it is validated JSON and exactly what was sent. A denial walks the names
 * once and writes each name's raw JSON text with the one reason, escaped once. */

typedef struct sb {
    char *p;
    size_t len, cap;
    bool oom;
} sb_t;

static void sb_reserve(sb_t *b, size_t n)
{
    if (b->oom || b->len + n + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n + 1)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (p == NULL) {
        b->oom = true;
        return;
    }
    b->p = p;
    b->cap = cap;
}

static void sb_put(sb_t *b, const char *s, size_t n)
{
    sb_reserve(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_lit(sb_t *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

/* A JSON value's text as it came (validated by jscan), or null when absent. */
static void sb_raw(sb_t *b, const kq_jvalue_t *v)
{
    if (v->type == KQ_JNONE)
        sb_lit(b, "null");
    else
        sb_put(b, v->ptr, v->len);
}

static int sb_reply(sb_t *b, char **out, size_t *out_len)
{
    if (b->oom || b->p == NULL) {
        free(b->p);
        *out = NULL;
        *out_len = 0;
        return 500;
    }
    *out = b->p;
    *out_len = b->len;
    return 200;
}

/* The members of ExtenderArgs the filter reads, matched exactly (case-sensitive, after
 * decoding escapes; the last one when repeated), as jansson's json_object_get did. */
static const char *const ARGS_KEYS[] = {"Pod", "Nodes", "NodeNames"};
enum { ARG_POD, ARG_NODES, ARG_NAMES, ARG_COUNT };

static bool is_null_or_absent_v(const kq_jvalue_t *v)
{
    return v->type == KQ_JNONE || v->type == KQ_JNULL;
}

/* One member of an object's text (validated), KQ_JNONE when absent or on error. */
static kq_jvalue_t member(const kq_jvalue_t *obj, const char *key)
{
    kq_jvalue_t v = {0};
    if (obj->type != KQ_JOBJECT || kq_jscan_object_find(obj->ptr, obj->len, 0, &key, 1, &v, NULL) != 0)
        v = (kq_jvalue_t){0};
    return v;
}

/* metadata.name of a Node object's text: true with its raw string contents. */
static bool node_name(const kq_jvalue_t *node, kq_jstr_t *name)
{
    kq_jvalue_t meta = member(node, "metadata");
    kq_jvalue_t n = member(&meta, "name");
    if (n.type != KQ_JSTRING)
        return false;
    *name = (kq_jstr_t){.ptr = n.ptr + 1, .len = n.len - 2, .escaped = n.escaped};
    return true;
}

/* The nodes sent back unchanged, in the form they came: NodeNames exactly the names
 * sent, or the same Nodes object. */
static int filter_pass(const kq_jvalue_t *nodes, const kq_jvalue_t *names, char **out, size_t *out_len)
{
    static const char tail[] = ",\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{},\"Error\":\"\"}";
    sb_t b = {0};
    sb_reserve(&b, 64 + sizeof(tail) + (nodes->type != KQ_JNONE ? nodes->len : 0) +
                       (names->type != KQ_JNONE ? names->len : 0));
    sb_lit(&b, "{\"Nodes\":");
    sb_raw(&b, nodes);
    sb_lit(&b, ",\"NodeNames\":");
    sb_raw(&b, names);
    sb_put(&b, tail, sizeof(tail) - 1);
    return sb_reply(&b, out, out_len);
}

/* Validates the node list: NodeNames an array of strings, or Nodes an object whose items
 * is an array of objects with metadata.name. false with the reason in err. */
static bool nodes_valid(const kq_jvalue_t *nodes, const kq_jvalue_t *names, char *err, size_t errlen)
{
    if (!is_null_or_absent_v(names)) {
        if (names->type != KQ_JARRAY) {
            kq_errf(err, errlen, "ExtenderArgs.NodeNames must be an array of node names");
            return false;
        }
        if ((names->elem_types & ~(unsigned)KQ_JSTRING) != 0) {
            kq_jscan_iter_t it;
            kq_jstr_t s;
            if (kq_jscan_iter_begin(&it, names->ptr, names->len, 0, NULL) == 0)
                while (kq_jscan_iter_next_string(&it, &s, NULL) == 1)
                    ;
            kq_errf(err, errlen, "ExtenderArgs.NodeNames[%zu] is not a string", it.index);
            return false;
        }
    }
    if (!is_null_or_absent_v(nodes)) {
        kq_jvalue_t items = member(nodes, "items");
        if (nodes->type != KQ_JOBJECT || !(is_null_or_absent_v(&items) || items.type == KQ_JARRAY)) {
            kq_errf(err, errlen, "ExtenderArgs.Nodes must be a NodeList object with an items array");
            return false;
        }
        if (items.type == KQ_JARRAY) {
            kq_jscan_iter_t it;
            kq_jvalue_t v;
            kq_jstr_t name;
            int rc = kq_jscan_iter_begin(&it, items.ptr, items.len, 0, NULL);
            while (rc == 0 && (rc = kq_jscan_iter_next(&it, &v, NULL)) == 1) {
                if (!node_name(&v, &name)) {
                    kq_errf(err, errlen, "ExtenderArgs.Nodes.items[%zu] has no metadata.name", it.index - 1);
                    return false;
                }
                rc = 0;
            }
            if (rc != 0) { /* cannot happen: the body was validated */
                kq_errf(err, errlen, "ExtenderArgs.Nodes.items is malformed");
                return false;
            }
        }
    }
    return true;
}

/* One "name":reason pair of a failed-nodes map. */
static void put_failed(sb_t *b, bool *first, const kq_jstr_t *name, const char *why, size_t why_len)
{
    sb_reserve(b, name->len + why_len + 4);
    if (!*first)
        sb_put(b, ",", 1);
    *first = false;
    sb_put(b, "\"", 1);
    sb_put(b, name->ptr, name->len);
    sb_put(b, "\":", 2);
    sb_put(b, why, why_len);
}

/* The denial reason as a JSON string (quoted, escaped), or NULL on ENOMEM. */
static char *reason_json(const char *reason)
{
    json_t *why = text_value(reason);
    char *why_text = why ? json_dumps(why, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    json_decref(why);
    return why_text;
}

/* No node back: each node named in FailedAndUnresolvableNodes (or FailedNodes when
 * preemption may help) with the one reason. */
static int filter_deny(const kq_jvalue_t *nodes, const kq_jvalue_t *names, const char *reason, bool resolvable,
                       char **out, size_t *out_len)
{
    char *why_text = reason_json(reason);
    if (why_text == NULL) {
        *out = NULL;
        *out_len = 0;
        return 500;
    }
    size_t why_len = strlen(why_text);
    sb_t b = {0};
    sb_lit(&b, "{\"Nodes\":");
    sb_lit(&b, nodes->type == KQ_JOBJECT ? "{\"metadata\":{},\"items\":[]}" : "null");
    sb_lit(&b, ",\"NodeNames\":");
    sb_lit(&b, names->type == KQ_JARRAY ? "[]" : "null");
    sb_lit(&b, resolvable ? ",\"FailedAndUnresolvableNodes\":{},\"FailedNodes\":{" : ",\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{");
    bool first = true;
    kq_jscan_iter_t it;
    if (names->type == KQ_JARRAY && kq_jscan_iter_begin(&it, names->ptr, names->len, 0, NULL) == 0) {
        kq_jstr_t s;
        while (kq_jscan_iter_next_string(&it, &s, NULL) == 1)
            put_failed(&b, &first, &s, why_text, why_len);
    }
    kq_jvalue_t items = member(nodes, "items");
    if (items.type == KQ_JARRAY && kq_jscan_iter_begin(&it, items.ptr, items.len, 0, NULL) == 0) {
        kq_jvalue_t v;
        kq_jstr_t s;
        while (kq_jscan_iter_next(&it, &v, NULL) == 1)
            if (node_name(&v, &s))
                put_failed(&b, &first, &s, why_text, why_len);
    }
    sb_lit(&b, "},\"Error\":\"\"}");
    free(why_text);
    return sb_reply(&b, out, out_len);
}

static bool name_in(const kq_jstr_t *name, char *const *set, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (kq_jscan_str_equal(name, set[i]))
            return true;
    return false;
}

typedef bool (*keep_fn)(void *ud, const kq_jstr_t *name);

typedef struct name_set {
    char *const *v;
    size_t n;
} name_set_t;

static bool keep_listed(void *ud, const kq_jstr_t *name)
{
    const name_set_t *set = ud;
    return name_in(name, set->v, set->n);
}

/* The nodes keep() accepts back (in the form they came), every other node in FailedNodes
 * with the reason. */
static int filter_keep(const kq_jvalue_t *nodes, const kq_jvalue_t *names, keep_fn keep, void *ud,
                       const char *reason, size_t *n_back, char **out, size_t *out_len)
{
    *n_back = 0;
    char *why_text = reason_json(reason);
    if (why_text == NULL) {
        *out = NULL;
        *out_len = 0;
        return 500;
    }
    size_t why_len = strlen(why_text);
    sb_t b = {0}, failed = {0};
    bool first = true, first_ok = true;
    kq_jscan_iter_t it;
    kq_jstr_t s;
    sb_lit(&b, "{\"Nodes\":");
    kq_jvalue_t items = member(nodes, "items");
    if (nodes->type == KQ_JOBJECT) {
        sb_lit(&b, "{\"metadata\":{},\"items\":[");
        kq_jvalue_t v;
        if (items.type == KQ_JARRAY && kq_jscan_iter_begin(&it, items.ptr, items.len, 0, NULL) == 0)
            while (kq_jscan_iter_next(&it, &v, NULL) == 1) {
                if (!node_name(&v, &s))
                    continue;
                if (keep(ud, &s)) {
                    if (!first_ok)
                        sb_put(&b, ",", 1);
                    first_ok = false;
                    (*n_back)++;
                    sb_put(&b, v.ptr, v.len);
                } else {
                    put_failed(&failed, &first, &s, why_text, why_len);
                }
            }
        sb_lit(&b, "]}");
    } else {
        sb_lit(&b, "null");
    }
    sb_lit(&b, ",\"NodeNames\":");
    if (names->type == KQ_JARRAY) {
        sb_lit(&b, "[");
        first_ok = true;
        if (kq_jscan_iter_begin(&it, names->ptr, names->len, 0, NULL) == 0)
            while (kq_jscan_iter_next_string(&it, &s, NULL) == 1) {
                if (keep(ud, &s)) {
                    if (!first_ok)
                        sb_put(&b, ",", 1);
                    first_ok = false;
                    (*n_back)++;
                    sb_put(&b, "\"", 1);
                    sb_put(&b, s.ptr, s.len);
                    sb_put(&b, "\"", 1);
                } else {
                    put_failed(&failed, &first, &s, why_text, why_len);
                }
            }
        sb_lit(&b, "]");
    } else {
        sb_lit(&b, "null");
    }
    sb_lit(&b, ",\"FailedAndUnresolvableNodes\":{},\"FailedNodes\":{");
    if (failed.oom)
        b.oom = true;
    else if (failed.len > 0)
        sb_put(&b, failed.p, failed.len);
    sb_lit(&b, "},\"Error\":\"\"}");
    free(failed.p);
    free(why_text);
    return sb_reply(&b, out, out_len);
}

/* The nodes in ok[] back, every other node in FailedNodes with the reason (preemption may
 * help there). */
static int filter_split(const kq_jvalue_t *nodes, const kq_jvalue_t *names, char *const *ok, size_t n_ok,
                        const char *reason, size_t *n_back, char **out, size_t *out_len)
{
    name_set_t set = {ok, n_ok};
    return filter_keep(nodes, names, keep_listed, &set, reason, n_back, out, out_len);
}

typedef struct tree_keep {
    kq_profiles_t *ps;
    const char *tree;
} tree_keep_t;

static bool keep_in_tree(void *ud, const kq_jstr_t *name)
{
    const tree_keep_t *t = ud;
    return !name->escaped && kq_profiles_node_in_tree(t->ps, t->tree, name->ptr, name->len);
}

/* An admitted pod of a quota in one of Koordinator's multi-tree quotas (elastic.h) may use
 * only its tree's nodes: koordinator's pod webhook (pkg/webhook/pod/mutating/
 * multi_quota_tree_affinity.go) gives it a required node affinity for its profile's
 * nodeSelector. 1 with the answer in *out when the pod is in a tree, 0 when not (no
 * allocation then), -1 on ENOMEM. */
static int filter_tree(kq_app_t *app, const kq_pod_t *pod, const kq_jvalue_t *nodes, const kq_jvalue_t *names,
                       char **out, size_t *out_len)
{
    char group[KQ_QTREE_NAME_MAX + 1], tree[64];
    if (app->elastic == NULL || !kq_profiles_has_trees(kq_elastic_profiles(app->elastic)) ||
        kq_resolve_pod(kq_elastic_resolver(app->elastic), pod, group, sizeof(group)) != 0 ||
        !kq_profiles_group_tree(kq_elastic_profiles(app->elastic), group, tree, sizeof(tree)))
        return 0;
    char reason[REASON_MAX];
    snprintf(reason, sizeof(reason), "node is not in quota tree %s of quota group %s (its ElasticQuotaProfile's "
             "nodeSelector)", tree, group);
    tree_keep_t t = {kq_elastic_profiles(app->elastic), tree};
    size_t n_back = 0;
    if (filter_keep(nodes, names, keep_in_tree, &t, reason, &n_back, out, out_len) != 200)
        return -1;
    kq_debug("event=filter result=allowed_in_tree pod=%s/%s uid=%s group=%s tree=%s nodes=%zu", pod->ns, pod->name,
             pod->uid, group, tree, n_back);
    return 1;
}

/* A quota denial of the preemptor of an in-flight preemption: the nodes of its record where
 * it fits once that node's victims are discounted (ledger.h), as new strings in *ok.
 * *n_ok 0 when none (or on any error: the denial stands). */
static void inflight_nodes_ok(kq_app_t *app, const kq_pod_t *pod, char ***ok, size_t *n_ok)
{
    *ok = NULL;
    *n_ok = 0;
    char **cand = NULL;
    size_t n = 0, k = 0;
    if (app->ledger == NULL || kq_ledger_preempt_nodes(app->ledger, pod->uid, &cand, &n) != 0 || n == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        char why[REASON_MAX];
        bool by_tree;
        kq_denial_t kind;
        if (decide_on(app, pod, cand[i], why, sizeof(why), &by_tree, &kind) == 0)
            cand[k++] = cand[i];
        else
            free(cand[i]);
    }
    if (k == 0) {
        free(cand);
        return;
    }
    *ok = cand;
    *n_ok = k;
}

int kq_extender_filter(kq_app_t *app, const char *body, size_t len, char **out, size_t *out_len)
{
    kq_jvalue_t arg[ARG_COUNT];
    kq_jscan_error_t jerr;
    /* One pass validates the body, finds the node lists and decodes the Pod: only the
     * fields kq_pod_parse reads (kq_pod_fields), into a document (two buffers, no
     * jansson tree). */
    kq_jdoc_t doc = {0};
    int scan = kq_jscan_object_find_doc(body, body ? len : 0, ARGS_KEYS, ARG_COUNT, arg, ARGS_KEYS[ARG_POD],
                                        kq_pod_fields, &doc, &jerr);
    if (scan == KQ_ENOMEM) {
        kq_jdoc_free(&doc);
        *out = NULL;
        *out_len = 0;
        return 500;
    }
    if (scan != 0) {
        kq_jdoc_free(&doc);
        return bad_request(app, KQ_VERB_FILTER, "ExtenderArgs", jerr.line, jerr.column,
                           scan == KQ_EINVAL ? NULL : jerr.text, out, out_len);
    }

    int status;
    char msg[REASON_MAX];
    kq_pod_t pod = {0};
    char **ok_nodes = NULL; /* nodes where an in-flight preemption makes room */
    size_t n_ok = 0;
    const kq_jvalue_t *nodes = &arg[ARG_NODES], *names = &arg[ARG_NAMES];

    if (!nodes_valid(nodes, names, msg, sizeof(msg))) {
        status = filter_error(app, msg, out, out_len);
        goto out;
    }
    if (arg[ARG_POD].type != KQ_JOBJECT) {
        status = filter_error(app, "ExtenderArgs.Pod is missing or not an object", out, out_len);
        goto out;
    }
    /* Another scheduler's pod (extenders are shared by all profiles): not ours to judge. */
    const char *sched = kq_jnode_string(kq_jnode_get(kq_jnode_get(kq_jdoc_root(&doc), "spec"), "schedulerName"));
    if (sched == NULL)
        sched = "default-scheduler";
    if (app->scheduler_name == NULL || strcmp(sched, app->scheduler_name) != 0) {
        kq_metrics_decision(app->metrics, KQ_VERB_FILTER, KQ_RESULT_SKIPPED);
        status = filter_pass(nodes, names, out, out_len);
        goto out;
    }

    if (parse_pod(app, kq_jdoc_root(&doc), NULL, &pod, msg, sizeof(msg)) != 0) {
        status = filter_error(app, msg, out, out_len);
        goto out;
    }
    const char *bad = bad_pod_ref(pod.ns, pod.name, pod.uid);
    if (bad != NULL) {
        kq_errf(msg, sizeof(msg), "ExtenderArgs.Pod has a %s that is not a valid Kubernetes %s", bad,
               strcmp(bad, "uid") == 0 ? "uid (at most 128 printable bytes)" : "name");
        status = filter_error(app, msg, out, out_len);
        goto out;
    }
    char reason[REASON_MAX] = "";
    bool by_tree = false;
    kq_denial_t kind;
    uint64_t mark = kq_requeue_mark(app->requeue); /* before deciding: see kq_requeue_denied */
    /* before deciding: a pod the watch shows between the decision and a later look
     * was still decided without its request */
    bool unseen = app->ledger != NULL && app->kube != NULL && kq_ledger_has_qtree(app->ledger) &&
                  !kq_ledger_is_observed(app->ledger, pod.uid);
    int rc = decide(app, &pod, reason, sizeof(reason), &by_tree, &kind);
    /* With a quota tree a group's runtime depends on its request: a pod the watch has not
     * shown yet (our watch lags the scheduler's) is missing from its group's request, and
     * may be denied for that alone. Such a pod enters its group's request, but only once
     * the API server confirms it exists with this uid, so that a forged filter leaves
     * nothing behind (issue 20), and then it is decided again. Only a denial by the tree
     * can change: adding a pod's request to its group (and its ancestors) never lowers
     * their runtime, so an allowed pod stays allowed, and the GET (a round trip to the
     * API server inside kube-scheduler's serial cycle, tens of ms on a busy control
     * plane) is not made for it. */
    if (rc == KQ_EDENIED && by_tree && unseen) {
        /* Our watch usually shows the pod a few ms after kube-scheduler's: waiting for it
         * costs less than the GET, which is made only when it does not come (the wait
         * returns at once if the watch showed it since). */
        bool seen = kq_ledger_wait_observed(app->ledger, pod.uid, UNSEEN_WAIT_MS);
        if (seen || pod_exists(app, &pod)) {
            if (!seen)
                kq_ledger_note_pending(app->ledger, &pod);
            reason[0] = '\0';
            by_tree = false;
            rc = decide(app, &pod, reason, sizeof(reason), &by_tree, &kind);
        }
    }
    size_t n_back = 0;
    char *split = NULL;
    size_t split_len = 0;
    if (rc == KQ_EDENIED && by_tree) {
        /* The preemptor of an in-flight preemption: the nodes whose victims are being
         * deleted are feasible, as in kube-scheduler's own view of the nominated node; the
         * other nodes keep the denial (FailedNodes). */
        inflight_nodes_ok(app, &pod, &ok_nodes, &n_ok);
        if (n_ok > 0 && filter_split(nodes, names, ok_nodes, n_ok, reason, &n_back, &split, &split_len) != 200) {
            status = 500;
            *out = NULL;
            *out_len = 0;
            goto out;
        }
        if (n_back == 0) {
            free(split);
            split = NULL;
        }
    }
    if (split != NULL) {
        kq_metrics_decision(app->metrics, KQ_VERB_FILTER, KQ_RESULT_ALLOWED);
        kq_metrics_attempt(app->metrics, pod.queue, "admitted", "");
        kq_info("event=filter result=allowed_inflight_preemption pod=%s/%s uid=%s user=%s queue=%s nodes=%zu "
                "msg=\"fits on the nodes where its in-flight preemption's victims are being deleted\"", pod.ns,
                pod.name, pod.uid, pod.user, pod.queue ? pod.queue : "-", n_back);
        *out = split;
        *out_len = split_len;
        status = 200;
    } else if (rc == 0) {
        kq_metrics_decision(app->metrics, KQ_VERB_FILTER, KQ_RESULT_ALLOWED);
        kq_metrics_attempt(app->metrics, pod.queue, "admitted", "");
        kq_debug("event=filter result=allowed pod=%s/%s uid=%s user=%s queue=%s", pod.ns, pod.name, pod.uid,
                 pod.user, pod.queue ? pod.queue : "-");
        int in_tree = filter_tree(app, &pod, nodes, names, out, out_len);
        status = in_tree == 0 ? filter_pass(nodes, names, out, out_len) : in_tree > 0 ? 200 : 500;
    } else if (rc == KQ_EDENIED) {
        if (reason[0] == '\0')
            kq_errf(reason, sizeof(reason), "quota exceeded for user %s in queue %s", pod.user,
                   pod.queue ? pod.queue : "-");
        kq_metrics_decision(app->metrics, KQ_VERB_FILTER, KQ_RESULT_DENIED);
        log_denial("filter", &pod, reason);
        /* A pod the watch has not shown yet may be a forged filter request's: its event
         * is posted only once the API server confirms the pod (on the events thread). */
        if (app->ledger != NULL && kq_ledger_is_observed(app->ledger, pod.uid))
            post_denial_event(app, &pod, reason, kind);
        else if (app->kube != NULL)
            kq_kube_event_confirmed(app->kube, pod.ns, pod.name, pod.uid, "Warning", classify(kind)->event_reason,
                                    reason);
        kq_metrics_attempt(app->metrics, pod.queue, "denied", classify(kind)->label);
        /* kube-scheduler may have retried it on a pod's deletion our watch has not applied
         * yet: the release pokes it (requeue.h). Only pods the API server has shown. */
        if (app->requeue != NULL && kq_requeue_kind_liftable(kind) && app->ledger != NULL &&
            kq_ledger_is_observed(app->ledger, pod.uid))
            kq_requeue_denied(app->requeue, pod.ns, pod.name, pod.uid, mark);
        status = filter_deny(nodes, names, reason, by_tree, out, out_len);
    } else {
        kq_errf(msg, sizeof(msg), "quota check for pod %s/%s failed: %s", pod.ns, pod.name,
               app->ledger ? kq_strerror(rc) : "no pod ledger configured");
        status = filter_error(app, msg, out, out_len);
    }
out:
    for (size_t i = 0; i < n_ok; i++)
        free(ok_nodes[i]);
    free(ok_nodes);
    kq_pod_clear(&pod);
    kq_jdoc_free(&doc);
    return status;
}

/* ------------------------------------------------------------------ bind */

static int bind_result(const char *error, char **out, size_t *out_len)
{
    json_t *e = text_value(error);
    return reply(e ? json_pack("{s:o}", "Error", e) : NULL, 200, out, out_len);
}

static int bind_error(kq_app_t *app, kq_result_t result, const char *msg, char **out, size_t *out_len)
{
    kq_metrics_decision(app->metrics, KQ_VERB_BIND, result);
    return bind_result(msg, out, out_len);
}

/* The pod to bind: the ledger's copy, else a GET from the API server (UID checked). */
static int bind_find_pod(kq_app_t *app, const char *ns, const char *name, const char *uid, kq_pod_t *pod,
                         char *err, size_t errlen)
{
    if (app->ledger != NULL && kq_ledger_lookup(app->ledger, uid, pod) == 0)
        return 0;
    if (app->kube == NULL) {
        kq_errf(err, errlen, "pod %s/%s (uid %s) is not known and no API server client is configured", ns, name,
               uid);
        return KQ_ENOENT;
    }
    json_t *obj = NULL;
    int rc = kq_kube_get_pod(app->kube, ns, name, &obj);
    if (rc != 0) {
        kq_errf(err, errlen, "cannot get pod %s/%s from the API server: %s", ns, name, kq_strerror(rc));
        return rc;
    }
    rc = parse_pod(app, NULL, obj, pod, err, errlen);
    json_decref(obj);
    if (rc != 0)
        return rc;
    if (pod->uid == NULL || strcmp(pod->uid, uid) != 0) {
        kq_errf(err, errlen, "pod %s/%s now has uid %s, not %s: it was replaced; not binding", ns, name,
               pod->uid ? pod->uid : "-", uid);
        kq_pod_clear(pod);
        return KQ_ECONFLICT;
    }
    return 0;
}

typedef enum { OUTCOME_NOT_BOUND, OUTCOME_BOUND, OUTCOME_UNKNOWN } bind_outcome_t;

/* After a failed binding POST: is the pod bound after all? One GET. BOUND (node in
 * bound_to) when the API server shows this uid with a node; NOT_BOUND when the pod is
 * gone, replaced, or unbound after a definite answer (an HTTP status); UNKNOWN when the
 * GET fails, or when the POST got no answer (timeout, dropped connection) and the pod is
 * still unbound: the POST may yet commit (bind_outcome looks again). Only NOT_BOUND
 * releases the count. */
static bind_outcome_t bind_outcome_once(kq_app_t *app, const char *ns, const char *name, const char *uid,
                                        int post_rc, char *bound_to, size_t len);

/* An unanswered POST whose pod is still unbound is looked at again after UNANSWERED_WAIT_MS
 * (twice): the POST has ended on our side, and an API server that got it commits within
 * moments. Still unbound then, it is released: a count kept for a pod that never binds
 * (and that kube-scheduler may never retry, if it no longer fits anywhere) would stay
 * forever; a bind that commits even later is counted by the watch when it shows the pod
 * bound. Only a failed GET keeps the pod counted (the watch or a retried bind settles it). */
#define UNANSWERED_WAIT_MS 1000
#define UNANSWERED_LOOKS 2

static bind_outcome_t bind_outcome(kq_app_t *app, const char *ns, const char *name, const char *uid, int post_rc,
                                   char *bound_to, size_t len)
{
    bind_outcome_t oc = bind_outcome_once(app, ns, name, uid, post_rc, bound_to, len);
    for (int i = 0; i < UNANSWERED_LOOKS && oc == OUTCOME_UNKNOWN; i++) {
        struct timespec ts = {.tv_sec = UNANSWERED_WAIT_MS / 1000, .tv_nsec = (UNANSWERED_WAIT_MS % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        oc = bind_outcome_once(app, ns, name, uid, KQ_EHTTP, bound_to, len); /* unbound now: released */
    }
    return oc;
}

static bind_outcome_t bind_outcome_once(kq_app_t *app, const char *ns, const char *name, const char *uid,
                                        int post_rc, char *bound_to, size_t len)
{
    json_t *obj = NULL;
    int rc = kq_kube_get_pod(app->kube, ns, name, &obj);
    if (rc == KQ_ENOENT)
        return OUTCOME_NOT_BOUND;
    if (rc != 0)
        return OUTCOME_UNKNOWN;
    bind_outcome_t oc;
    const char *got = str_field(json_object_get(obj, "metadata"), "uid");
    const char *node = str_field(json_object_get(obj, "spec"), "nodeName");
    if (got == NULL || strcmp(got, uid) != 0) {
        oc = OUTCOME_NOT_BOUND;
    } else if (node != NULL && node[0] != '\0') {
        snprintf(bound_to, len, "%s", node);
        oc = OUTCOME_BOUND;
    } else {
        bool answered = post_rc == KQ_ECONFLICT || post_rc == KQ_EHTTP || post_rc == KQ_ENOENT;
        oc = answered ? OUTCOME_NOT_BOUND : OUTCOME_UNKNOWN;
    }
    json_decref(obj);
    return oc;
}

/* DRA (issue 39): kube-scheduler's DynamicResources plugin writes the pod's claims'
 * status.allocation in PreBind, before it calls this verb; kubequota's claim informer sees
 * it within milliseconds. Counted before that, a claim is charged what it may take (its
 * device count, and none of the shared counters its devices will consume: slices.h), so a
 * limit on the counters of partitionable devices would pass unseen. Wait for the
 * allocations, at most BIND_CLAIM_WAIT_MS, then decide on what is known. No lock is held. */
#define BIND_CLAIM_WAIT_MS 2000
static void wait_claims_allocated(kq_app_t *app, const kq_pod_t *pod)
{
    if (app->claims == NULL || pod->n_claims == 0)
        return;
    for (int waited = 0; waited < BIND_CLAIM_WAIT_MS; waited += 10) {
        bool all = true;
        for (size_t i = 0; i < pod->n_claims && all; i++)
            all = pod->claims[i] != NULL && kq_claims_allocated(app->claims, pod->ns, pod->claims[i]);
        if (all) {
            if (waited > 0)
                kq_debug("event=bind_claims_allocated pod=%s/%s waited_ms=%d", pod->ns, pod->name, waited);
            return;
        }
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    kq_info("event=bind_claims_unallocated pod=%s/%s msg=\"its claims' allocation not seen after %dms; charged "
            "what they may take\"", pod->ns, pod->name, BIND_CLAIM_WAIT_MS);
}

int kq_extender_bind(kq_app_t *app, const char *body, size_t len, char **out, size_t *out_len)
{
    json_error_t jerr;
    json_t *args = json_loadb(body ? body : "", body ? len : 0, 0, &jerr);
    if (args == NULL)
        return bad_request(app, KQ_VERB_BIND, "ExtenderBindingArgs", jerr.line, jerr.column, jerr.text, out, out_len);
    if (!json_is_object(args)) {
        json_decref(args);
        return bad_request(app, KQ_VERB_BIND, "ExtenderBindingArgs", 0, 0, NULL, out, out_len);
    }

    int status;
    char msg[REASON_MAX];
    kq_pod_t pod = {0};
    const char *name = str_field(args, "PodName");
    const char *ns = str_field(args, "PodNamespace");
    const char *uid = str_field(args, "PodUID");
    const char *node = str_field(args, "Node");
    const char *missing = !name || !*name ? "PodName"
                          : !ns || !*ns   ? "PodNamespace"
                          : !uid || !*uid ? "PodUID"
                          : !node || !*node ? "Node"
                                            : NULL;
    if (missing != NULL) {
        kq_errf(msg, sizeof(msg), "ExtenderBindingArgs.%s is missing or empty", missing);
        status = bind_error(app, KQ_RESULT_ERROR, msg, out, out_len);
        goto out;
    }
    const char *bad = bad_pod_ref(ns, name, uid);
    if (bad == NULL && !dns_name_ok(node, 253, true))
        bad = "node";
    if (bad != NULL) {
        kq_errf(msg, sizeof(msg),
               "ExtenderBindingArgs.%s is not a valid Kubernetes %s", strcmp(bad, "namespace") == 0 ? "PodNamespace"
                                                                       : strcmp(bad, "name") == 0   ? "PodName"
                                                                       : strcmp(bad, "uid") == 0    ? "PodUID"
                                                                                                    : "Node",
               strcmp(bad, "uid") == 0 ? "uid (at most 128 printable bytes)"
               : strcmp(bad, "namespace") == 0 ? "namespace (a DNS label of at most 63 characters)"
                                               : "name (a DNS subdomain of at most 253 characters)");
        status = bind_error(app, KQ_RESULT_ERROR, msg, out, out_len);
        goto out;
    }
    if (bind_find_pod(app, ns, name, uid, &pod, msg, sizeof(msg)) != 0) {
        kq_warn("event=bind result=error pod=%s/%s uid=%s node=%s msg=\"%s\"", ns, name, uid, node, msg);
        status = bind_error(app, KQ_RESULT_ERROR, msg, out, out_len);
        goto out;
    }

    /* Pods of another scheduler profile are bound but not counted (they are not watched). */
    bool ours = pod.scheduler_name != NULL && app->scheduler_name != NULL &&
                strcmp(pod.scheduler_name, app->scheduler_name) == 0;
    if (ours) {
        char reason[REASON_MAX] = "";
        kq_denial_t kind = KQ_DENIAL_NONE;
        /* on `node`: the victims of the pod's own in-flight preemption there are discounted */
        wait_claims_allocated(app, &pod);
        int rc = check_quota_name(app, &pod, reason, sizeof(reason), &kind);
        if (rc == 0)
            rc = app->ledger ? kq_ledger_assume_on(app->ledger, &pod, node, reason, sizeof(reason), &kind)
                             : KQ_ESTATE;
        if (rc == KQ_EDENIED) {
            if (reason[0] == '\0')
                kq_errf(reason, sizeof(reason), "quota exceeded for user %s in queue %s", pod.user,
                       pod.queue ? pod.queue : "-");
            log_denial("bind", &pod, reason);
            post_denial_event(app, &pod, reason, kind);
            kq_metrics_attempt(app->metrics, pod.queue, "denied", classify(kind)->label);
            status = bind_error(app, KQ_RESULT_DENIED, reason, out, out_len);
            goto out;
        }
        if (rc != 0) {
            kq_errf(msg, sizeof(msg), "counting pod %s/%s failed: %s", ns, name,
                   app->ledger ? kq_strerror(rc) : "no pod ledger configured");
            kq_warn("event=bind result=error pod=%s/%s uid=%s node=%s msg=\"%s\"", ns, name, uid, node, msg);
            status = bind_error(app, KQ_RESULT_ERROR, msg, out, out_len);
            goto out;
        }
    }

    /* Counted: now the API call, with no lock held. */
    char berr[REASON_MAX] = "";
    int rc = KQ_ESTATE;
    if (app->kube != NULL)
        rc = kq_kube_bind(app->kube, ns, name, uid, node, berr, sizeof(berr));
    if (rc != 0) {
        /* Before releasing anything, ask the API server what happened: a POST that timed
         * out may have committed, and a 409 "already assigned" means the pod is bound. */
        char bound_to[256] = "";
        bind_outcome_t oc = ours && app->kube != NULL ? bind_outcome(app, ns, name, uid, rc, bound_to,
                                                                     sizeof(bound_to))
                                                      : OUTCOME_NOT_BOUND;
        if (ours && oc == OUTCOME_NOT_BOUND)
            (void)kq_ledger_forget(app->ledger, uid);
        if (oc == OUTCOME_BOUND && strcmp(bound_to, node) == 0) {
            kq_metrics_decision(app->metrics, KQ_VERB_BIND, KQ_RESULT_ALLOWED);
            kq_info("event=bind result=bound pod=%s/%s uid=%s node=%s user=%s queue=%s counted=yes "
                    "msg=\"the binding POST failed (%s) but the API server shows the pod bound there\"",
                    ns, name, uid, node, pod.user ? pod.user : "-", pod.queue ? pod.queue : "-",
                    berr[0] ? berr : kq_strerror(rc));
            status = bind_result("", out, out_len);
            goto out;
        }
        if (app->kube == NULL)
            kq_errf(msg, sizeof(msg), "no API server client configured");
        else if (oc == OUTCOME_BOUND)
            kq_errf(msg, sizeof(msg), "binding pod %s/%s to node %s failed: %s; the pod is bound to node %s and "
                   "stays counted", ns, name, node, berr[0] ? berr : kq_strerror(rc), bound_to);
        else if (oc == OUTCOME_UNKNOWN)
            kq_errf(msg, sizeof(msg), "binding pod %s/%s to node %s failed: %s; the outcome is unknown, so the "
                   "pod stays counted until the API server shows it bound, unbound or deleted", ns, name, node,
                   berr[0] ? berr : kq_strerror(rc));
        else
            kq_errf(msg, sizeof(msg), "binding pod %s/%s to node %s failed: %s", ns, name, node,
                   berr[0] ? berr : kq_strerror(rc));
        kq_warn("event=bind result=error pod=%s/%s uid=%s node=%s released=%s msg=\"%s\"", ns, name, uid, node,
                !ours ? "n/a" : oc == OUTCOME_NOT_BOUND ? "yes" : "no", msg);
        status = bind_error(app, KQ_RESULT_ERROR, msg, out, out_len);
        goto out;
    }
    kq_metrics_decision(app->metrics, KQ_VERB_BIND, ours ? KQ_RESULT_ALLOWED : KQ_RESULT_SKIPPED);
    if (ours && app->kube != NULL) /* a pod that waited (it got a denial event) hears that it is in */
        kq_kube_event_admitted(app->kube, ns, name, uid, "QuotaAdmitted",
                               "admitted: the pod now fits its quotas and is bound; it waited for quota before");
    kq_info("event=bind result=bound pod=%s/%s uid=%s node=%s user=%s queue=%s counted=%s", ns, name, uid, node,
            pod.user ? pod.user : "-", pod.queue ? pod.queue : "-", ours ? "yes" : "no");
    status = bind_result("", out, out_len);
out:
    kq_pod_clear(&pod);
    json_decref(args);
    return status;
}

/* ------------------------------------------------------------------ preempt */

/* {"Pods":[{"UID":..}...],"NumPDBViolations":n} from a Victims or MetaVictims value.
 * full: Pods are whole Pod objects (uid in metadata.uid). NULL with err set when malformed. */
static json_t *meta_victims(const char *node, const json_t *v, bool full, char *err, size_t errlen)
{
    if (!json_is_object(v)) {
        kq_errf(err, errlen, "victims of node %s: expected an object", node);
        return NULL;
    }
    const json_t *pods = json_object_get(v, "Pods");
    const json_t *pdb = json_object_get(v, "NumPDBViolations");
    if (!(is_null_or_absent(pods) || json_is_array(pods)) || !(is_null_or_absent(pdb) || json_is_integer(pdb))) {
        kq_errf(err, errlen, "victims of node %s: Pods must be an array and NumPDBViolations an integer", node);
        return NULL;
    }
    json_t *list = json_array();
    json_t *res = list ? json_pack("{s:o,s:I}", "Pods", list, "NumPDBViolations",
                                   (json_int_t)(pdb ? json_integer_value(pdb) : 0))
                       : NULL;
    if (res == NULL) {
        kq_errf(err, errlen, "out of memory");
        return NULL;
    }
    size_t i;
    const json_t *p;
    json_array_foreach(pods, i, p) {
        const json_t *uid = full ? json_object_get(json_object_get(p, "metadata"), "uid") : json_object_get(p, "UID");
        if (!json_is_string(uid)) {
            kq_errf(err, errlen, "victims of node %s: Pods[%zu] has no %s", node, i, full ? "metadata.uid" : "UID");
            json_decref(res);
            return NULL;
        }
        if (json_array_append_new(list, json_pack("{s:O}", "UID", uid)) != 0) {
            kq_errf(err, errlen, "out of memory");
            json_decref(res);
            return NULL;
        }
    }
    return res;
}

/* The victims answered for the preemptor, per node, for its filter and bind while they
 * are being deleted (kq_ledger_preempt_note). 0 or KQ_ENOMEM. */
static int remember_victims(kq_app_t *app, const char *uid, const json_t *map)
{
    size_t n_nodes = json_object_size(map), total = 0, i = 0;
    const char *node;
    json_t *v;
    json_object_foreach((json_t *)map, node, v) total += json_array_size(json_object_get(v, "Pods"));
    kq_ledger_preempt_node_t *nodes = calloc(n_nodes ? n_nodes : 1, sizeof(*nodes));
    const char **uids = calloc(total ? total : 1, sizeof(*uids));
    int rc = KQ_ENOMEM;
    if (nodes == NULL || uids == NULL)
        goto out;
    size_t at = 0;
    json_object_foreach((json_t *)map, node, v) {
        json_t *pods = json_object_get(v, "Pods"), *p;
        size_t k;
        nodes[i] = (kq_ledger_preempt_node_t){.node = node, .victims = &uids[at], .n = 0};
        json_array_foreach(pods, k, p) {
            const char *u = str_field(p, "UID");
            if (u != NULL && at < total) {
                uids[at++] = u;
                nodes[i].n++;
            }
        }
        i++;
    }
    rc = kq_ledger_preempt_note(app->ledger, uid, nodes, i);
out:
    free(nodes);
    free(uids);
    return rc;
}

/* Would `req` fit on the node of allocatable `alloc` beside the counted pods there (their
 * requests summed in on_sum, n_on of them) once the pods in `freed` (n_freed) are gone?
 * The node's pods count bounds the number of pods. */
static bool node_fits(const kq_resource_t *alloc, const kq_resource_t *on_sum, size_t n_on, const kq_resource_t *freed,
                      size_t n_freed, const kq_resource_t *req)
{
    for (uint32_t k = 0; k < req->n; k++) {
        const char *d = KQ_RES_E(req)[k].name;
        int64_t r = KQ_RES_E(req)[k].value, busy = kq_resource_get(on_sum, d, NULL), f = kq_resource_get(freed, d, NULL);
        bool has;
        int64_t av = kq_resource_get(alloc, d, &has);
        busy = f >= busy ? 0 : busy - f;
        if (r > 0 && (!has || busy > av - r))
            return false;
    }
    bool hasp;
    int64_t maxpods = kq_resource_get(alloc, "pods", &hasp);
    return !(hasp && (int64_t)(n_on - n_freed) + 1 > maxpods);
}

/* scheduler-plugins' MoreImportantPod order, most important first: higher priority, then
 * the earlier start (creation here), then the uid (a stable answer). */
static int more_important_first(const void *a, const void *b)
{
    const kq_ledger_victim_t *x = *(const kq_ledger_victim_t *const *)a, *y = *(const kq_ledger_victim_t *const *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->created != y->created)
        return x->created < y->created ? -1 : 1;
    return strcmp(x->uid, y->uid);
}

/* CapacityScheduling's SelectVictimsOnNode (kubernetes-sigs/scheduler-plugins
 * pkg/capacityscheduling/capacity_scheduling.go) for a preemptor of scheduler-plugins
 * group `group`, on one node kube-scheduler proposed: the victims, as a new "Pods" array
 * of {"UID"}, or NULL with *why set when the node cannot help (or *rc = KQ_ENOMEM).
 *   - within its min (used + request <= min, usedOverMinWith false): potential victims are
 *     the node's pods of OTHER scheduler-plugins groups that use more than their min,
 *     whatever their priority; otherwise, the node's pods of its own group of lower
 *     priority. Pods of no scheduler-plugins group are never victims.
 *   - with every potential victim gone, the preemptor must fit the node and the quota
 *     rules (its max, the sum of mins): else the node cannot help;
 *   - then, most important first, each potential victim is reprieved when the preemptor
 *     still fits the node and the rules with it back; the others are the victims.
 * kube-scheduler's own victims for the node are not consulted: it proposes only pods of
 * lower priority, CapacityScheduling takes borrowers of any priority (kube-scheduler
 * accepts any pod of the node in the answer: extender.go convertToVictims). PDBs are not
 * known here: every victim counts as not violating one (NumPDBViolations 0). */
static json_t *capacity_victims(kq_app_t *app, const kq_pod_t *pod, const char *group, bool more_than_min,
                                const kq_ledger_victim_t *on, size_t n_on, const kq_resource_t *alloc, char *why,
                                size_t whylen, int *rc)
{
    kq_qtree_t *qt = kq_elastic_qtree(app->elastic);
    const kq_ledger_victim_t **pot = calloc(n_on ? n_on : 1, sizeof(*pot));
    kq_resource_t on_sum = KQ_RESOURCE_EMPTY, own = KQ_RESOURCE_EMPTY, others = KQ_RESOURCE_EMPTY,
                  freed = KQ_RESOURCE_EMPTY;
    json_t *out = NULL;
    size_t n_pot = 0, n_gone = 0;
    if (pot == NULL)
        goto nomem;
    for (size_t k = 0; k < n_on; k++) {
        const kq_ledger_victim_t *x = &on[k];
        if (kq_resource_add(&on_sum, &x->req) != 0)
            goto nomem;
        bool sp = false, same = x->group != NULL && strcmp(x->group, group) == 0;
        bool over = x->group != NULL && kq_qtree_sp_over_min(qt, x->group, NULL, &sp);
        if (!sp)
            continue; /* a pod of no scheduler-plugins quota */
        if (more_than_min ? (same && x->priority < pod->priority) : (!same && over))
            pot[n_pot++] = x;
    }
    if (n_pot == 0) {
        kq_errf(why, whylen, "no victims: %s", more_than_min ? "no pod of its own quota with a lower priority"
                                                              : "no pod of another quota above its min");
        goto done;
    }
    /* everything potential gone */
    for (size_t k = 0; k < n_pot; k++)
        if (kq_resource_add(&freed, &pot[k]->req) != 0 ||
            kq_resource_add(strcmp(pot[k]->group, group) == 0 ? &own : &others, &pot[k]->req) != 0)
            goto nomem;
    if (!node_fits(alloc, &on_sum, n_on, &freed, n_pot, &pod->request)) {
        kq_errf(why, whylen, "does not fit the node even with every potential victim gone");
        goto done;
    }
    if (kq_qtree_check_across(qt, group, &pod->request, &own, &others, false, why, whylen, NULL) != 0)
        goto done;
    qsort(pot, n_pot, sizeof(*pot), more_important_first);
    if ((out = json_array()) == NULL)
        goto nomem;
    n_gone = n_pot;
    for (size_t k = 0; k < n_pot; k++) {
        kq_resource_t *side = strcmp(pot[k]->group, group) == 0 ? &own : &others;
        (void)kq_resource_sub(&freed, &pot[k]->req);
        (void)kq_resource_sub(side, &pot[k]->req);
        char tmp[8];
        bool fits = node_fits(alloc, &on_sum, n_on, &freed, n_gone - 1, &pod->request) &&
                    kq_qtree_check_across(qt, group, &pod->request, &own, &others, false, tmp, sizeof(tmp), NULL) == 0;
        if (fits) {
            n_gone--;
            continue;
        }
        if (kq_resource_add(&freed, &pot[k]->req) != 0 || kq_resource_add(side, &pot[k]->req) != 0 ||
            json_array_append_new(out, json_pack("{s:s}", "UID", pot[k]->uid)) != 0)
            goto nomem;
    }
    goto done;
nomem:
    *rc = KQ_ENOMEM;
    json_decref(out);
    out = NULL;
done:
    free(pot);
    kq_resource_free(&on_sum);
    kq_resource_free(&own);
    kq_resource_free(&others);
    kq_resource_free(&freed);
    return out;
}

/* Elastic quota: narrows the meta victims map in place (see the header comment). 0, or
 * KQ_ENOMEM. Pods that are not ours, or without elastic quota, leave the map unchanged. */
static int preempt_in_group(kq_app_t *app, const json_t *pod_obj, json_t *map)
{
    if (app->elastic == NULL || app->ledger == NULL || !json_is_object(pod_obj))
        return 0;
    const char *sched = str_field(json_object_get(pod_obj, "spec"), "schedulerName");
    if (sched == NULL || app->scheduler_name == NULL || strcmp(sched, app->scheduler_name) != 0)
        return 0;
    kq_pod_t pod = {0};
    char msg[REASON_MAX];
    if (parse_pod(app, NULL, pod_obj, &pod, msg, sizeof(msg)) != 0) {
        kq_warn("event=preempt msg=\"cannot read the preemptor; victims unchanged: %s\"", msg);
        return 0;
    }
    char group[KQ_QTREE_NAME_MAX + 1];
    (void)kq_resolve_pod(kq_elastic_resolver(app->elastic), &pod, group, sizeof(group));
    kq_qtree_t *qt = kq_elastic_qtree(app->elastic);
    int rc = 0;
    size_t kept_nodes = 0, dropped_nodes = 0, dropped_victims = 0;
    const char *node;
    json_t *v, *tmp;
    bool def_ok = kq_elastic_preempt_default(app->elastic);
    /* a scheduler-plugins group: CapacityScheduling's victims (capacity_victims) */
    bool sp = false;
    bool more_than_min = kq_qtree_sp_over_min(qt, group, &pod.request, &sp);
    json_object_foreach_safe(map, tmp, node, v) {
        if (sp) {
            kq_ledger_victim_t *on = NULL;
            size_t n_on = 0;
            kq_resource_t alloc = KQ_RESOURCE_EMPTY;
            char why[REASON_MAX] = "";
            json_t *vs = NULL;
            if (kq_ledger_node_pods(app->ledger, node, &on, &n_on) != 0) {
                rc = KQ_ENOMEM;
                break;
            }
            if (kq_elastic_node_allocatable(app->elastic, node, &alloc) != 0)
                kq_errf(why, sizeof(why), "node not known");
            else
                vs = capacity_victims(app, &pod, group, more_than_min, on, n_on, &alloc, why, sizeof(why), &rc);
            dropped_victims += json_array_size(json_object_get(v, "Pods"));
            if (vs != NULL && (json_object_set_new(v, "Pods", vs) != 0 ||
                               json_object_set_new(v, "NumPDBViolations", json_integer(0)) != 0))
                rc = KQ_ENOMEM;
            if (vs != NULL && rc == 0) {
                kept_nodes++;
            } else {
                kq_debug("event=preempt_node_dropped pod=%s/%s node=%s reason=\"%s\"", pod.ns, pod.name, node,
                         why);
                json_object_del(map, node);
                dropped_nodes++;
            }
            kq_resource_free(&alloc);
            kq_ledger_victims_free(on, n_on);
            if (rc != 0)
                break;
            continue;
        }
        json_t *pods = json_object_get(v, "Pods");
        json_t *keep = json_array();
        kq_ledger_victim_t *on = NULL; /* the counted pods on this node */
        size_t n_on = 0;
        if (keep == NULL || kq_ledger_node_pods(app->ledger, node, &on, &n_on) != 0) {
            json_decref(keep);
            rc = KQ_ENOMEM;
            break;
        }
        kq_resource_t freed = KQ_RESOURCE_EMPTY;
        size_t i, had = json_array_size(pods), kept = 0;
        json_t *p;
        json_array_foreach(pods, i, p) {
            const char *uid = str_field(p, "UID");
            const kq_ledger_victim_t *x = NULL;
            for (size_t k = 0; uid != NULL && k < n_on && x == NULL; k++)
                if (strcmp(on[k].uid, uid) == 0)
                    x = &on[k];
            /* a victim: counted on this node in the preemptor's own group, lower priority,
             * preemptible, and not of the default group unless configured */
            if (x != NULL && x->group != NULL && strcmp(x->group, group) == 0 && x->priority < pod.priority &&
                x->preemptible && (def_ok || strcmp(group, KQ_QTREE_DEFAULT) != 0) &&
                kq_resource_add(&freed, &x->req) == 0) {
                if (json_array_append(keep, p) != 0) {
                    rc = KQ_ENOMEM;
                    break;
                }
                kept++;
            } else {
                dropped_victims++;
            }
        }
        char why[REASON_MAX] = "";
        bool ok = rc == 0 && !(had > 0 && kept == 0) &&
                  kq_qtree_check_preempt(qt, group, &pod.request, &freed, !pod.preemptible, why, sizeof(why),
                                         NULL) == 0;
        /* the preemptor must fit on the node once its victims are gone: the node's
         * allocatable against the pods kubequota counts there */
        if (ok) {
            kq_resource_t alloc = KQ_RESOURCE_EMPTY, on_node = KQ_RESOURCE_EMPTY;
            ok = kq_elastic_node_allocatable(app->elastic, node, &alloc) == 0;
            for (size_t k = 0; ok && k < n_on; k++)
                ok = kq_resource_add(&on_node, &on[k].req) == 0;
            (void)kq_resource_sub(&on_node, &freed);
            for (uint32_t k = 0; ok && k < pod.request.n; k++) {
                const char *d = KQ_RES_E(&pod.request)[k].name;
                int64_t r = KQ_RES_E(&pod.request)[k].value;
                bool has;
                int64_t av = kq_resource_get(&alloc, d, &has);
                if (r > 0 && (!has || kq_resource_get(&on_node, d, NULL) > av - r))
                    ok = false;
            }
            bool hasp;
            int64_t maxpods = kq_resource_get(&alloc, "pods", &hasp);
            if (ok && hasp && (int64_t)(n_on - kept) + 1 > maxpods)
                ok = false;
            kq_resource_free(&alloc);
            kq_resource_free(&on_node);
        }
        kq_resource_free(&freed);
        kq_ledger_victims_free(on, n_on);
        if (!ok)
            kq_debug("event=preempt_node_dropped pod=%s/%s node=%s reason=\"%s\"", pod.ns, pod.name, node,
                     why[0] ? why : "no victim of its own group, or it does not fit the node");
        if (ok && json_object_set_new(v, "Pods", keep) == 0) {
            kept_nodes++;
        } else {
            if (ok)
                rc = KQ_ENOMEM;
            else
                json_decref(keep);
            json_object_del(map, node);
            dropped_nodes++;
        }
        if (rc != 0)
            break;
    }
    kq_info("event=preempt pod=%s/%s uid=%s group=%s nodes_kept=%zu nodes_dropped=%zu victims_dropped=%zu", pod.ns,
            pod.name, pod.uid, group, kept_nodes, dropped_nodes, dropped_victims);
    if (rc == 0)
        rc = remember_victims(app, pod.uid, map);
    kq_pod_clear(&pod);
    return rc;
}

int kq_extender_preempt(kq_app_t *app, const char *body, size_t len, char **out, size_t *out_len)
{
    json_error_t jerr;
    json_t *args = json_loadb(body ? body : "", body ? len : 0, 0, &jerr);
    if (args == NULL)
        return bad_request(app, KQ_VERB_PREEMPT, "ExtenderPreemptionArgs", jerr.line, jerr.column, jerr.text, out, out_len);
    if (!json_is_object(args)) {
        json_decref(args);
        return bad_request(app, KQ_VERB_PREEMPT, "ExtenderPreemptionArgs", 0, 0, NULL, out, out_len);
    }

    /* The result has no Error field, so malformed victims are a 400. */
    int status;
    char msg[REASON_MAX] = "";
    const json_t *meta = json_object_get(args, "NodeNameToMetaVictims");
    const json_t *full = json_object_get(args, "NodeNameToVictims");
    bool use_full = is_null_or_absent(meta);
    const json_t *src = use_full ? full : meta;
    json_t *map = json_object();
    if (map == NULL) {
        status = reply(NULL, 500, out, out_len);
        goto out;
    }
    if (!is_null_or_absent(src) && !json_is_object(src)) {
        kq_errf(msg, sizeof(msg), "%s must be an object", use_full ? "NodeNameToVictims" : "NodeNameToMetaVictims");
        goto bad;
    }
    const char *node;
    const json_t *v;
    json_object_foreach((json_t *)src, node, v) {
        json_t *mv = meta_victims(node, v, use_full, msg, sizeof(msg));
        if (mv == NULL || json_object_set_new(map, node, mv) != 0)
            goto bad;
    }
    if (preempt_in_group(app, json_object_get(args, "Pod"), map) != 0) {
        status = reply(NULL, 500, out, out_len);
        goto out;
    }
    kq_metrics_decision(app->metrics, KQ_VERB_PREEMPT, KQ_RESULT_ALLOWED);
    status = reply(json_pack("{s:o}", "NodeNameToMetaVictims", map), 200, out, out_len);
    map = NULL;
    goto out;
bad:
    kq_metrics_decision(app->metrics, KQ_VERB_PREEMPT, KQ_RESULT_ERROR);
    {
        json_t *e = text_value(msg[0] ? msg : "out of memory");
        status = reply(e ? json_pack("{s:o}", "error", e) : NULL, 400, out, out_len);
    }
out:
    json_decref(map);
    json_decref(args);
    return status;
}

/* ------------------------------------------------------------------ admission */

/* Whether admission can check a pod now: 0, or KQ_ESTATE with the reason in msg (no
 * ledger, or the pod list not loaded yet: the API server retries or applies the webhook's
 * failurePolicy). */
static int admission_ready(const kq_app_t *app, char *msg, size_t len)
{
    if (app == NULL || app->ledger == NULL) {
        kq_errf(msg, len, "kubequota has no pod ledger to check the pod against");
        return KQ_ESTATE;
    }
    if (!atomic_load(&app->ready)) {
        kq_errf(msg, len, "kubequota is starting: the pod list is not loaded yet, so the pod's limits cannot be "
               "checked; retry");
        return KQ_ESTATE;
    }
    return 0;
}

/* kq_extender_admission_check (dry false) and kq_extender_admission_check_dry. */
static int admission_check(kq_app_t *app, const json_t *pod_obj, const json_t *old, bool dry, char *msg, size_t len)
{
    kq_pod_t pod = {0};
    char err[REASON_MAX] = "";
    int st = admission_ready(app, msg, len);
    if (st != 0)
        return st;
    /* At CREATE the API server has not assigned a uid yet (nor a name, with
     * generateName): a copy gets stand-ins, used only for this check. */
    json_t *copy = json_deep_copy(pod_obj);
    json_t *meta = json_object_get(copy, "metadata");
    if (copy == NULL || !json_is_object(meta)) {
        json_decref(copy);
        kq_errf(msg, len, "the pod has no metadata");
        return KQ_EINVAL;
    }
    if (str_field(meta, "uid") == NULL)
        json_object_set_new(meta, "uid", json_string("admission-check"));
    if (str_field(meta, "name") == NULL || str_field(meta, "name")[0] == '\0')
        json_object_set_new(meta, "name", json_string("new-pod"));
    int rc = parse_pod(app, NULL, copy, &pod, err, sizeof(err));
    json_decref(copy);
    if (rc != 0) {
        kq_errf(msg, len, "%s", err);
        return rc;
    }
    char reason[REASON_MAX] = "";
    if (old == NULL) {
        /* not known to the ledger: checked with its request in its group's request */
        rc = kq_ledger_check_new(app->ledger, &pod, reason, sizeof(reason), NULL);
        if (rc == KQ_EDENIED)
            kq_errf(msg, len, "pod %s/%s names node %s and so skips the scheduler, but does not fit its limits: %s",
                   pod.ns ? pod.ns : "-", pod.name ? pod.name : "-", pod.node ? pod.node : "-",
                   reason[0] ? reason : "quota exceeded");
    } else {
        kq_denial_t kind = KQ_DENIAL_NONE;
        rc = dry ? kq_ledger_check_resize_dry(app->ledger, &pod, reason, sizeof(reason), &kind)
                 : kq_ledger_check_resize(app->ledger, &pod, reason, sizeof(reason), &kind);
        if (rc == KQ_EDENIED && kind == KQ_DENIAL_NEVER_FITS)
            kq_errf(msg, len, "resizing pod %s/%s refused: with the new request it can never fit: %s",
                   pod.ns ? pod.ns : "-", pod.name ? pod.name : "-", reason[0] ? reason : "over a max");
        else if (rc == KQ_EDENIED)
            kq_errf(msg, len, "resizing pod %s/%s would exceed its limits: %s", pod.ns ? pod.ns : "-",
                   pod.name ? pod.name : "-", reason[0] ? reason : "quota exceeded");
    }
    if (rc != 0 && rc != KQ_EDENIED)
        kq_errf(msg, len, "checking pod %s/%s against its limits failed: %s", pod.ns ? pod.ns : "-",
               pod.name ? pod.name : "-", kq_strerror(rc));
    kq_info("event=admission_pod_check pod=%s/%s kind=%s%s user=%s queue=%s result=%s", pod.ns ? pod.ns : "-",
            pod.name ? pod.name : "-", old == NULL ? "create-on-node" : "resize", dry ? " dry_run=true" : "",
            pod.user ? pod.user : "-", pod.queue ? pod.queue : "-",
            rc == 0 ? "allowed" : rc == KQ_EDENIED ? "denied" : "error");
    kq_pod_clear(&pod);
    return rc;
}

int kq_extender_admission_check(void *ud, const json_t *pod_obj, const json_t *old, char *msg, size_t len)
{
    return admission_check(ud, pod_obj, old, false, msg, len);
}

int kq_extender_admission_check_dry(void *ud, const json_t *pod_obj, const json_t *old, char *msg, size_t len)
{
    return admission_check(ud, pod_obj, old, true, msg, len);
}

int kq_extender_admission_reserve(void *ud, const json_t *pod_obj, const json_t *old, char *msg, size_t len)
{
    kq_app_t *app = ud;
    kq_pod_t pod = {0};
    char err[REASON_MAX] = "", reason[REASON_MAX] = "";
    (void)old;
    int st = admission_ready(app, msg, len);
    if (st != 0)
        return st;
    /* validating admission: the API server has filled in the uid and the name */
    int rc = parse_pod(app, NULL, pod_obj, &pod, err, sizeof(err));
    if (rc != 0) {
        kq_errf(msg, len, "%s", err);
        return rc;
    }
    if (pod.uid == NULL || pod.uid[0] == '\0' || pod.node == NULL) {
        kq_errf(msg, len, "pod %s/%s has no uid or no spec.nodeName at validating admission", pod.ns ? pod.ns : "-",
               pod.name ? pod.name : "-");
        kq_pod_clear(&pod);
        return KQ_EINVAL;
    }
    rc = kq_ledger_admit(app->ledger, &pod, reason, sizeof(reason), NULL);
    if (rc == KQ_EDENIED)
        kq_errf(msg, len, "pod %s/%s names node %s and so skips the scheduler, but does not fit its limits: %s",
               pod.ns ? pod.ns : "-", pod.name ? pod.name : "-", pod.node, reason[0] ? reason : "quota exceeded");
    else if (rc != 0)
        kq_errf(msg, len, "checking pod %s/%s against its limits failed: %s", pod.ns ? pod.ns : "-",
               pod.name ? pod.name : "-", kq_strerror(rc));
    kq_pod_clear(&pod);
    return rc;
}

int kq_extender_admission_app_check(void *ud, const json_t *pod_obj, const json_t *old, char *msg, size_t len)
{
    kq_app_t *app = ud;
    (void)old;
    if (app == NULL || app->ledger == NULL || !atomic_load(&app->ready))
        return 0;
    json_t *copy = json_deep_copy(pod_obj);
    json_t *meta = json_object_get(copy, "metadata");
    if (copy == NULL || !json_is_object(meta)) {
        json_decref(copy);
        return 0; /* the parse at filter says what is wrong with it */
    }
    /* at CREATE there is no uid yet (nor, with generateName, a name): stand-ins; a pod
     * without a named application id is not checked (app_named) */
    if (str_field(meta, "uid") == NULL)
        json_object_set_new(meta, "uid", json_string("admission-check"));
    if (str_field(meta, "name") == NULL || str_field(meta, "name")[0] == '\0')
        json_object_set_new(meta, "name", json_string(str_field(meta, "generateName") ? str_field(meta, "generateName")
                                                                                      : "new-pod"));
    kq_pod_t pod = {0};
    char err[REASON_MAX] = "", owner[256] = "", reason[REASON_MAX] = "";
    int rc = parse_pod(app, NULL, copy, &pod, err, sizeof(err));
    json_decref(copy);
    if (rc != 0)
        return 0;
    rc = kq_ledger_app_owner(app->ledger, &pod, owner, sizeof(owner), reason, sizeof(reason));
    if (rc == KQ_EDENIED) {
        kq_errf(msg, len, "pod %s/%s: %s", pod.ns ? pod.ns : "-", pod.name ? pod.name : "-", reason);
        kq_info("event=admission_app_denied pod=%s/%s user=%s app=%s owner=%s", pod.ns ? pod.ns : "-",
                pod.name ? pod.name : "-", pod.user ? pod.user : "-", pod.app_id ? pod.app_id : "-", owner);
    }
    kq_pod_clear(&pod);
    return rc == KQ_EDENIED ? rc : 0;
}

/* ------------------------------------------------------------------ explain (what-if) */

#define EXPLAIN_MAX_PODS 1000

static int explain_error(int status, const char *msg, char **out, size_t *out_len)
{
    *out = kq_rest_error_body(status, msg, NULL, out_len);
    return *out != NULL ? status : 500;
}

/* Copies the text between s and e (exclusive) into a new JSON string; NULL when empty. */
static json_t *span_string(const char *s, const char *e)
{
    if (s == NULL || e == NULL || e <= s)
        return NULL;
    return json_stringn(s, (size_t)(e - s));
}

/* One blocker object from a denial reason (docs/events.md "Wording": "<scope>: <limit>
 * exceeded: <resource> <used> used + <req> requested > <max> <kind>; ..."; or the
 * applications form "applications <n> running + 1 new > <max> max"). The message is the
 * reason itself, exactly as the denial event words it. */
static json_t *blocker_from_reason(const kq_pod_t *pod, const char *reason, kq_denial_t dk)
{
    const denial_kind_t *k = classify(dk);
    const char *kind = "queue";
    json_t *name = NULL;
    const char *colon = strchr(reason, ':');
    if (strcmp(k->event_reason, "BudgetExhausted") == 0) {
        kind = "budget";
        const char *q1 = strchr(reason, '"'), *q2 = q1 ? strchr(q1 + 1, '"') : NULL;
        name = span_string(q1 ? q1 + 1 : NULL, q2);
    } else if (dk == KQ_DENIAL_APP_OWNER) {
        kind = "application";
        name = pod->app_id ? json_string(pod->app_id) : NULL;
    } else if (dk == KQ_DENIAL_QUOTA_NOT_FOUND || dk == KQ_DENIAL_QUOTA_OTHER_NS) {
        kind = "quota-name";
        name = pod->quota_name ? json_string(pod->quota_name) : NULL;
    } else if (strcmp(k->event_reason, "QueueACLDenied") == 0) {
        kind = "acl";
        name = pod->queue ? json_string(pod->queue) : NULL;
    } else if (strcmp(k->event_reason, "QueueNotFound") == 0 || strcmp(k->event_reason, "QuotaGroupNotFound") == 0) {
        kind = "queue-missing";
        name = json_string(pod->queue ? pod->queue : pod->quota_name ? pod->quota_name : "");
    } else if (strncmp(reason, "quota group ", 12) == 0) {
        kind = "quota-group";
        name = span_string(reason + 12, colon);
    } else if (strncmp(reason, "user ", 5) == 0 || strncmp(reason, "group ", 6) == 0) {
        bool user = reason[0] == 'u';
        kind = user ? "user" : "group";
        const char *s = reason + (user ? 5 : 6), *e = strstr(s, " in queue ");
        name = span_string(s, e != NULL && (colon == NULL || e < colon) ? e : colon);
    } else if (strncmp(reason, "queue ", 6) == 0) {
        const char *e = colon, *sp = strchr(reason + 6, ' ');
        if (sp != NULL && (e == NULL || sp < e))
            e = sp;
        name = span_string(reason + 6, e);
    } else {
        name = pod->queue ? json_string(pod->queue) : NULL;
    }
    json_t *b = json_pack("{s:s,s:o,s:s,s:s}", "kind", kind, "name", name ? name : json_null(), "reason",
                          k->event_reason, "message", reason);
    if (b == NULL)
        return NULL;
    /* The numbers: "<resource> <used> used + <req> requested > <max> " or
     * "applications <n> running + 1 new > <max> ". */
    const char *mark = strstr(reason, " used + ");
    const char *after = mark ? mark + 8 : NULL;
    bool apps = false;
    if (mark == NULL && (mark = strstr(reason, " running + ")) != NULL) {
        after = mark + 11;
        apps = true;
    }
    if (mark != NULL) {
        const char *u = mark;
        while (u > reason && u[-1] != ' ')
            u--;
        const char *r = u - 1;
        while (r > reason && r[-1] != ' ')
            r--;
        char req[64] = "", max[64] = "";
        if (r > reason && u > r &&
            sscanf(after, apps ? "%63s new > %63s" : "%63s requested > %63s", req, max) == 2) {
            json_object_set_new(b, "resource", span_string(r, u - 1));
            json_object_set_new(b, "used", span_string(u, mark));
            json_object_set_new(b, "request", json_string(req));
            json_object_set_new(b, "max", json_string(max));
        }
    }
    return b;
}

/* A pod of an explain request as filter would resolve it. A pod without a uid (one not
 * created yet) gets a placeholder uid that no real pod has, and one without a name a
 * placeholder name; the JSON is copied, never changed. */
/* The application id of what-if pods without a uid or an id of their own (explain_parse). */
#define EXPLAIN_JOB_APP "kubequota-explain-job"

static int explain_parse(kq_app_t *app, const json_t *obj, size_t index, kq_pod_t *pod, char *err, size_t errlen)
{
    if (!json_is_object(obj)) {
        kq_errf(err, errlen, "pod %zu of the request is not a JSON object", index);
        return KQ_EINVAL;
    }
    json_t *copy = json_deep_copy(obj);
    if (copy == NULL)
        return KQ_ENOMEM;
    json_t *md = json_object_get(copy, "metadata");
    if (md == NULL) {
        md = json_object();
        json_object_set_new(copy, "metadata", md);
    }
    char buf[96];
    int rc = KQ_ENOMEM;
    if (!json_is_object(md)) {
        kq_errf(err, errlen, "pod %zu: metadata is not an object", index);
        rc = KQ_EINVAL;
        goto out;
    }
    bool standin = !json_is_string(json_object_get(md, "uid"));
    if (standin) {
        snprintf(buf, sizeof(buf), "kubequota-explain-%zu", index);
        json_object_set_new(md, "uid", json_string(buf));
    }
    if (!json_is_string(json_object_get(md, "name"))) {
        snprintf(buf, sizeof(buf), "explain-%zu", index);
        json_object_set_new(md, "name", json_string(buf));
    }
    rc = parse_pod(app, NULL, copy, pod, err, errlen);
    /* A pod not yet created names no uid, and one without an application id would be an
     * application of its own made from the stand-in uid (each pod of a list a different
     * one): such pods are one what-if job, as the pods a controller makes from one template
     * share its UID (issue 29). */
    if (rc == 0 && standin && !pod->app_named && pod->app_id != NULL && strstr(pod->app_id, buf) != NULL) {
        char *job = strdup(EXPLAIN_JOB_APP);
        if (job == NULL) {
            kq_pod_clear(pod);
            rc = KQ_ENOMEM;
            goto out;
        }
        free(pod->app_id);
        pod->app_id = job;
    }
out:
    json_decref(copy);
    return rc;
}

static bool same_str(const char *a, const char *b)
{
    return (a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* Pods of one what-if job: the same owner, queue, application and quota group, so that
 * "pod k assumes pods 1..k-1 admitted" is the check of their summed request. NULL when b
 * is of a's job, else what differs (for the error). */
static const char *job_differs(const kq_pod_t *a, const kq_pod_t *b)
{
    if (!same_str(a->ns, b->ns))
        return "namespace";
    if (!same_str(a->user, b->user))
        return "user";
    if (a->n_groups != b->n_groups)
        return "groups";
    for (size_t i = 0; i < a->n_groups; i++)
        if (!same_str(a->groups[i], b->groups[i]))
            return "groups";
    if (!same_str(a->queue, b->queue))
        return "queue";
    if (!same_str(a->app_id, b->app_id))
        return "application id";
    if (!same_str(a->quota_name, b->quota_name))
        return "quota group";
    if (a->preemptible != b->preemptible)
        return "preemptible label";
    return NULL;
}

/* The answer for pods[0..n): each checked with the filter's decision, pod k with the
 * requests of the earlier pods that fit (not counted yet) added to its own. */
/* Adds what an earlier pod of a what-if list would be charged to the list's running sum: its
 * request and, for a pod with claims, the devices of its claims (kq_ledger_charge), so that a
 * later pod is checked with the earlier pods' devices admitted too. A claim several pods of
 * the list share is added once per pod (the ledger would charge it once: an over-estimate of
 * the list, never an under-estimate). */
static int sum_add_charge(kq_app_t *app, kq_resource_t *sum, const kq_pod_t *pod)
{
    if (pod->n_claims == 0 || app->ledger == NULL)
        return kq_resource_add(sum, &pod->request);
    kq_resource_t ch = KQ_RESOURCE_EMPTY;
    int rc = kq_ledger_charge(app->ledger, pod, &ch);
    if (rc == 0)
        rc = kq_resource_add(sum, &ch);
    kq_resource_free(&ch);
    return rc;
}

static int explain_pods(kq_app_t *app, kq_pod_t *pods, size_t n, bool list, char **out, size_t *out_len)
{
    json_t *items = json_array(), *first_blockers = NULL;
    kq_resource_t sum = KQ_RESOURCE_EMPTY;
    size_t fit = 0;
    bool all_fit = true, any_never = false;
    char reason[REASON_MAX], msg[REASON_MAX];
    if (items == NULL)
        return 500;
    for (size_t i = 0; i < n; i++) {
        kq_pod_t *pod = &pods[i];
        json_t *blockers = json_array(), *item = NULL;
        bool managed = app->scheduler_name != NULL && pod->scheduler_name != NULL &&
                       strcmp(pod->scheduler_name, app->scheduler_name) == 0;
        bool fits = true, never = false, cumulative = false;
        if (managed) {
            reason[0] = '\0';
            bool by_tree = false;
            kq_denial_t kind;
            int rc = decide(app, pod, reason, sizeof(reason), &by_tree, &kind);
            if (rc == 0 && !kq_resource_is_zero(&sum) && !kq_ledger_is_counted(app->ledger, pod->uid)) {
                kq_pod_t job = *pod; /* shallow: borrowed strings, own request */
                kq_resource_init(&job.request);
                if (kq_resource_copy(&job.request, &sum) != 0 || kq_resource_add(&job.request, &pod->request) != 0) {
                    kq_resource_free(&job.request);
                    kq_resource_free(&sum);
                    json_decref(blockers);
                    json_decref(items);
                    return 500;
                }
                rc = decide(app, &job, reason, sizeof(reason), &by_tree, &kind);
                kq_resource_free(&job.request);
                cumulative = rc == KQ_EDENIED;
            }
            if (rc == KQ_EDENIED) {
                if (reason[0] == '\0')
                    kq_errf(reason, sizeof(reason), "quota exceeded for user %s in queue %s", pod->user,
                           pod->queue ? pod->queue : "-");
                fits = false;
                if (cumulative) {
                    /* Over only with the earlier pods: "...; <sum> requested alone is over
                     * the max: the pod can never fit" (the engines end a never-fits denial
                     * so) is about the sum, not this pod; say what was assumed instead. */
                    if (kind == KQ_DENIAL_NEVER_FITS) {
                        char *cut = NULL;
                        for (char *at = strstr(reason, " requested alone is over the "); at != NULL;
                             at = strstr(at + 1, " requested alone is over the "))
                            cut = at; /* the last: a name before it may hold the words too */
                        while (cut != NULL && cut > reason && cut[-1] != ';')
                            cut--;
                        if (cut != NULL && cut > reason)
                            cut[-1] = '\0';
                        kind = KQ_DENIAL_OVER_LIMIT; /* the sum is over, not this pod alone */
                    }
                    size_t rl = strlen(reason);
                    snprintf(reason + rl, sizeof(reason) - rl, "; with the earlier pods of the list admitted");
                }
                never = !cumulative && (kind == KQ_DENIAL_NEVER_FITS || kind == KQ_DENIAL_QUEUE_MISSING ||
                                        kind == KQ_DENIAL_QUEUE_NOT_LEAF || kind == KQ_DENIAL_GROUP_MISSING ||
                                        kind == KQ_DENIAL_GROUP_NOT_LEAF);
                json_array_append_new(blockers, blocker_from_reason(pod, reason, kind));
            } else if (rc != 0) {
                kq_errf(msg, sizeof(msg), "quota check for pod %s/%s failed: %s", pod->ns, pod->name,
                       app->ledger ? kq_strerror(rc) : "no pod ledger configured");
                kq_resource_free(&sum);
                json_decref(blockers);
                json_decref(items);
                return explain_error(rc == KQ_ESTATE ? 503 : 500, msg, out, out_len);
            } else if (!kq_ledger_is_counted(app->ledger, pod->uid) && sum_add_charge(app, &sum, pod) != 0) {
                kq_resource_free(&sum);
                json_decref(blockers);
                json_decref(items);
                return 500;
            }
        }
        fit += fits;
        all_fit = all_fit && fits;
        any_never = any_never || never;
        if (!fits && first_blockers == NULL)
            first_blockers = json_incref(blockers);
        item = json_pack("{s:s,s:s,s:b,s:b,s:b,s:o}", "namespace", pod->ns, "name", pod->name, "fits", fits,
                         "neverFits", never, "managed", managed, "blockers", blockers);
        if (item != NULL && pod->queue != NULL)
            json_object_set_new(item, "queue", json_string(pod->queue));
        if (item != NULL && pod->user != NULL)
            json_object_set_new(item, "user", json_string(pod->user));
        json_array_append_new(items, item);
    }
    kq_resource_free(&sum);
    json_t *res;
    if (!list) {
        res = json_incref(json_array_get(items, 0));
        json_decref(first_blockers);
    } else {
        res = json_pack("{s:b,s:b,s:I,s:I,s:o,s:o}", "fits", all_fit, "neverFits", any_never, "fitCount",
                        (json_int_t)fit, "podCount", (json_int_t)n, "blockers",
                        first_blockers ? first_blockers : json_array(), "pods", json_incref(items));
    }
    json_decref(items);
    return reply(res, 200, out, out_len);
}

static int explain_partition(kq_app_t *app, const char *partition, char **out, size_t *out_len)
{
    if (partition != NULL && app->partition != NULL && strcmp(partition, app->partition) == 0)
        return 0;
    char msg[300];
    kq_errf(msg, sizeof(msg), "partition \"%.100s\" not found (this scheduler serves partition \"%.100s\")",
           partition ? partition : "", app->partition ? app->partition : "");
    return explain_error(404, msg, out, out_len);
}

/* Self-service: may this caller see this pod's numbers? Its user must be the caller; the
 * groups too when the caller wrote the pod (a what-if body), so that no one learns the usage
 * of a group they are not in. */
static bool self_owns(const kq_explain_self_t *self, const kq_pod_t *pod, bool check_groups)
{
    if (self == NULL)
        return true;
    if (pod->user == NULL || self->user == NULL || strcmp(pod->user, self->user) != 0)
        return false;
    for (size_t i = 0; check_groups && i < pod->n_groups; i++)
        if (self->in_group == NULL || !self->in_group(self->ctx, pod->groups[i]))
            return false;
    return true;
}

static int self_refused(const kq_explain_self_t *self, bool posted, char **out, size_t *out_len)
{
    char msg[600];
    kq_errf(msg, sizeof(msg),
           "user %.200s may explain only pods of their own identity%s without the usage permission (get "
           "usage.kubequota.io)",
           self->user ? self->user : "", posted ? " (their user and their own groups)" : "");
    return explain_error(403, msg, out, out_len);
}

int kq_extender_explain(kq_app_t *app, const char *partition, const char *body, size_t len, char **out,
                        size_t *out_len)
{
    return kq_extender_explain_as(app, partition, body, len, NULL, out, out_len);
}

/* The posted body as JSON: JSON as it is; anything that does not start like JSON ('{' or
 * '[') is YAML, as kubectl users write manifests, decoded the way the plugin decodes what-if
 * files (kq_kubectl_yaml_docs: Kubernetes' typing of plain scalars, a bound on nodes, so
 * aliases cannot expand without limit). Several YAML documents are a list. NULL with msg on
 * a body that is neither; the body's size was bounded by the server (--max-body). */
static json_t *explain_body(const char *body, size_t len, char *msg, size_t msglen)
{
    size_t i = 0;
    while (body != NULL && i < len && (body[i] == ' ' || body[i] == '\t' || body[i] == '\n' || body[i] == '\r'))
        i++;
    if (body == NULL || i == len || body[i] == '{' || body[i] == '[') {
        json_error_t jerr;
        json_t *root = json_loadb(body ? body : "", body ? len : 0, JSON_REJECT_DUPLICATES, &jerr);
        if (root == NULL)
            kq_errf(msg, msglen, "the body is not JSON: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        return root;
    }
    char yerr[300];
    json_t *docs = kq_kubectl_yaml_docs(body, len, 0, yerr, sizeof(yerr));
    if (docs == NULL) {
        kq_errf(msg, msglen, "the body is neither JSON nor YAML: %s", yerr);
        return NULL;
    }
    json_t *pods = json_array(), *d;
    size_t k;
    json_array_foreach(docs, k, d)
    {
        if (!json_is_null(d) && pods != NULL && json_array_append(pods, d) != 0) { /* null: an empty document */
            json_decref(pods);
            pods = NULL;
        }
    }
    json_decref(docs);
    if (pods == NULL) {
        kq_errf(msg, msglen, "out of memory");
        return NULL;
    }
    if (json_array_size(pods) == 0) {
        json_decref(pods);
        kq_errf(msg, msglen, "the YAML body has no document: post a Pod, a List or several Pods");
        return NULL;
    }
    if (json_array_size(pods) == 1) {
        json_t *one = json_incref(json_array_get(pods, 0));
        json_decref(pods);
        return one;
    }
    return pods;
}

int kq_extender_explain_as(kq_app_t *app, const char *partition, const char *body, size_t len,
                           const kq_explain_self_t *self, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    int st = explain_partition(app, partition, out, out_len);
    if (st != 0)
        return st;
    if (!atomic_load(&app->ready))
        return explain_error(503, "kubequota is starting: the pod list is not loaded yet", out, out_len);
    char msg[REASON_MAX];
    json_t *root = explain_body(body, len, msg, sizeof(msg));
    if (root == NULL)
        return explain_error(400, msg, out, out_len);
    /* A Pod, a JSON array of pods, or a {"kind":"List","items":[...]}. */
    const json_t *arr = NULL;
    bool list = false;
    if (json_is_array(root)) {
        arr = root;
        list = true;
    } else if (json_is_object(root) && json_is_array(json_object_get(root, "items"))) {
        arr = json_object_get(root, "items");
        list = true;
    } else if (!json_is_object(root)) {
        json_decref(root);
        return explain_error(400, "the body must be a Pod, a JSON array of pods or a List with items", out,
                             out_len);
    }
    size_t n = list ? json_array_size(arr) : 1;
    if (n == 0 || n > EXPLAIN_MAX_PODS) {
        json_decref(root);
        kq_errf(msg, sizeof(msg), "the list has %zu pods: between 1 and %d may be explained at once", n,
               EXPLAIN_MAX_PODS);
        return explain_error(400, msg, out, out_len);
    }
    kq_pod_t *pods = calloc(n, sizeof(*pods));
    if (pods == NULL) {
        json_decref(root);
        return 500;
    }
    size_t parsed = 0;
    st = 0;
    for (; parsed < n; parsed++) {
        int rc = explain_parse(app, list ? json_array_get(arr, parsed) : root, parsed, &pods[parsed], msg,
                               sizeof(msg));
        const char *diff = rc == 0 && parsed > 0 ? job_differs(&pods[0], &pods[parsed]) : NULL;
        if (diff != NULL) {
            kq_pod_clear(&pods[parsed]);
            kq_errf(msg, sizeof(msg),
                   "pod %zu is not of the same job as pod 0: its %s differs; a list must share namespace, user, "
                   "groups, queue, application and quota group (explain them one by one instead)",
                   parsed, diff);
            rc = KQ_EINVAL;
        }
        if (rc != 0) {
            st = explain_error(rc == KQ_ENOMEM ? 500 : rc == KQ_ESTATE ? 503 : 400, msg, out, out_len);
            break;
        }
        if (!self_owns(self, &pods[parsed], true)) {
            parsed++; /* cleared below */
            st = self_refused(self, true, out, out_len);
            break;
        }
    }
    if (st == 0)
        st = explain_pods(app, pods, n, list, out, out_len);
    for (size_t i = 0; i < parsed; i++)
        kq_pod_clear(&pods[i]);
    free(pods);
    json_decref(root);
    return st;
}

int kq_extender_explain_pod(kq_app_t *app, const char *partition, const char *ns, const char *name, char **out,
                            size_t *out_len)
{
    return kq_extender_explain_pod_as(app, partition, ns, name, NULL, out, out_len);
}

int kq_extender_explain_pod_as(kq_app_t *app, const char *partition, const char *ns, const char *name,
                               const kq_explain_self_t *self, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    int st = explain_partition(app, partition, out, out_len);
    if (st != 0)
        return st;
    if (!atomic_load(&app->ready))
        return explain_error(503, "kubequota is starting: the pod list is not loaded yet", out, out_len);
    if (!dns_name_ok(ns, 63, false) || !dns_name_ok(name, 253, true))
        return explain_error(400, "the namespace or pod name is not a valid Kubernetes name", out, out_len);
    if (app->kube == NULL)
        return explain_error(503, "no API server client is configured", out, out_len);
    char msg[REASON_MAX];
    json_t *obj = NULL;
    int rc = kq_kube_get_pod(app->kube, ns, name, &obj); /* a read: explain writes nothing */
    if (rc != 0) {
        kq_errf(msg, sizeof(msg), "cannot get pod %s/%s from the API server: %s", ns, name, kq_strerror(rc));
        return explain_error(rc == KQ_ENOENT ? 404 : 502, msg, out, out_len);
    }
    kq_pod_t pod = {0};
    rc = parse_pod(app, NULL, obj, &pod, msg, sizeof(msg));
    json_decref(obj);
    if (rc != 0)
        return explain_error(rc == KQ_ENOMEM ? 500 : 400, msg, out, out_len);
    /* the pod exists and its identity was stamped at creation: its user is enough */
    if (!self_owns(self, &pod, false)) {
        kq_pod_clear(&pod);
        return self_refused(self, false, out, out_len);
    }
    st = explain_pods(app, &pod, 1, false, out, out_len);
    kq_pod_clear(&pod);
    return st;
}
