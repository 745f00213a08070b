/* Scheduler extender (kube-scheduler's extender/v1 protocol): filter, bind and preempt as
 * pure functions over request bodies, so they can be tested without HTTP.
 *
 * The JSON is exactly what kube-scheduler sends and reads: Go field names without json
 * tags (Pod, Nodes, NodeNames, FailedNodes, FailedAndUnresolvableNodes, Error; PodName,
 * PodNamespace, PodUID, Node; NodeNameToVictims, NodeNameToMetaVictims), unset fields
 * null.
 *
 * Each function returns the HTTP status and sets *out to a new malloc'ed, NUL-terminated
 * body (caller frees with free()) and *out_len to its length:
 *   200  a result object (quota denials and per-request failures are inside it: denied
 *        nodes in FailedAndUnresolvableNodes, failures in Error);
 *   400  the body is not JSON or not a JSON object: {"error":"..."}; nothing changed;
 *   500  out of memory: *out NULL.
 * Decisions are counted in app->metrics (when set) and quota denials are also posted as
 * Warning events (reason QuotaExceeded) through app->kube (when set).
 *
 * Threads: any; no lock of its own. The ledger's check/assume/forget take the ledger's
 * lock; the API server calls (get pod, bind) are made with no lock held.
 */
#ifndef KUBEQUOTA_EXTENDER_H
#define KUBEQUOTA_EXTENDER_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kubequota/app.h"

/* ExtenderArgs -> ExtenderFilterResult. Pods whose spec.schedulerName is not
 * app->scheduler_name pass through: every node back. Allowed: the nodes back in the form
 * they came (NodeNames or Nodes). Denied: no node back, every node in
 * FailedAndUnresolvableNodes with the ledger's reason — or, when the quota tree denied it
 * (preemption inside the pod's quota group may help), in FailedNodes. Changes no usage. */
int kq_extender_filter(kq_app_t *app, const char *body, size_t len, char **out, size_t *out_len);

/* ExtenderBindingArgs -> ExtenderBindingResult. Finds the pod (ledger, else GET from the
 * API server), counts it (kq_ledger_assume), POSTs the Binding with no lock held, and
 * releases the count again when the POST fails. Error is "" on success. */
int kq_extender_bind(kq_app_t *app, const char *body, size_t len, char **out, size_t *out_len);

/* ExtenderPreemptionArgs -> ExtenderPreemptionResult. With elastic quota (app->elastic)
 * and a preemptor of ours: only victims counted in the preemptor's own leaf quota group
 * with a lower priority are kept, and only nodes where used - victims + preemptor fits
 * the group's (and every ancestor's) runtime and max; a node whose victims were all
 * dropped is dropped. Otherwise the victims unchanged. Always in the meta form ({"NodeNameToMetaVictims":{node:{"Pods":[{"UID":..}],"NumPDBViolations":n}}}),
 * built from either NodeNameToVictims (full pods) or NodeNameToMetaVictims. */
int kq_extender_preempt(kq_app_t *app, const char *body, size_t len, char **out, size_t *out_len);

/* kq_admission_pod_hook_t (admission.h) with ud = the kq_app_t: a pod created with
 * spec.nodeName is checked with kq_ledger_check_new (its request in its group's request);
 * a resize (old set) with kq_ledger_check_resize. Refuses (KQ_ESTATE) until the first pod
 * list is loaded. */
int kq_extender_admission_check(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len);
/* The same check for a dry run (check_pod_dry, admission.h): a resize is decided with
 * kq_ledger_check_resize_dry, so nothing is counted or reserved. */
int kq_extender_admission_check_dry(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len);

/* The validating webhook's reserve_pod hook (admission.h; ud is the kq_app_t): a pod being
 * created with spec.nodeName, with the uid the API server gave it, is checked and counted
 * (kq_ledger_admit). KQ_EDENIED with a message naming the pod, its node and the limit;
 * KQ_ESTATE until the first pod list is loaded. */
int kq_extender_admission_reserve(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len);

/* The admission webhook's check_pod_app hook (admission.h; ud is the kq_app_t): a pod being
 * created whose application id (named by a label or annotation) belongs to another user's
 * application is KQ_EDENIED with a message naming the pod, its user and the application
 * (not the owner). 0 otherwise, also while the pod list is not loaded (filter and bind
 * refuse such a pod again). */
int kq_extender_admission_app_check(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len);

/* The Event reason of a kind of denial (error.h): QuotaExceeded (over a limit now: fits
 * later; also KQ_DENIAL_NONE), QuotaRuntimeExceeded (over what an elastic group may use now),
 * QuotaNeverFits (the request alone is over a max), QueueNotFound / QuotaGroupNotFound,
 * QueueNotLeaf / QuotaGroupNotLeaf, QueueACLDenied, BudgetExhausted. Static string.
 * docs/events.md. */
const char *kq_extender_denial_reason(kq_denial_t kind);
/* Its reason label of kubequota_admission_attempts_total (docs/metrics.md): over_limit,
 * over_runtime, never_fits, queue_missing, queue_not_leaf, acl, budget. Static string. */
const char *kq_extender_denial_label(kq_denial_t kind);

/* Explain / what-if (GET|POST /ws/v1/partition/{p}/explain...): the filter's own decision
 * (the same function: ledger check, then credit budget), changing nothing: no usage, no
 * pending entry, no event, no metric, no API server write. Body: a Pod, a JSON array of
 * pods or {"kind":"List","items":[...]}, in JSON or in YAML (a body that does not start with
 * '{' or '['; several YAML documents are an array; decoded by kq_kubectl_yaml_docs) (one job: at most 1000 pods sharing namespace,
 * user, groups, queue, application and quota group; pod k is checked with the requests of
 * the earlier pods that fit added, i.e. as if they had been admitted). A pod without a uid
 * or name gets a placeholder. A single pod answers {"namespace","name","fits","neverFits",
 * "managed","blockers":[{"kind","name","reason","message","resource","used","request",
 * "max"}],"queue","user"}; a list {"fits","neverFits","fitCount","podCount","blockers"
 * (the first denied pod's),"pods":[...]}. "managed" false: the pod is another scheduler's
 * (filter passes it). Only the first blocker (the one filter reports) is listed. Errors:
 * 404 other partition, 400 bad body, 503 not ready; bodies in YuniKorn's error shape. */
int kq_extender_explain(kq_app_t *app, const char *partition, const char *body, size_t len, char **out,
                        size_t *out_len);
/* The same for an existing pod, read from the API server (GET only). 404 when absent. */
int kq_extender_explain_pod(kq_app_t *app, const char *partition, const char *ns, const char *name, char **out,
                            size_t *out_len);

/* Self-service (a caller without the usage permission): only pods of this identity may be
 * explained. user: the caller's name; groups: its groups (n_groups). */
typedef struct kq_explain_self {
    const char *user;
    bool (*in_group)(const void *ctx, const char *group); /* is group one of the caller's? */
    const void *ctx;
} kq_explain_self_t;

/* kq_extender_explain / kq_extender_explain_pod for a self-service caller (self NULL: no
 * restriction). 403, explaining nothing, when a pod's user is not self->user, or (posted
 * pods, whose identity the caller wrote) one of its groups is not the caller's. */
int kq_extender_explain_as(kq_app_t *app, const char *partition, const char *body, size_t len,
                           const kq_explain_self_t *self, char **out, size_t *out_len);
int kq_extender_explain_pod_as(kq_app_t *app, const char *partition, const char *ns, const char *name,
                               const kq_explain_self_t *self, char **out, size_t *out_len);

#endif
