/* Admission webhooks (AdmissionReview admission.k8s.io/v1): the API server asks kubequota
 * before it stores an object, so that the identity kubequota counts a pod against is the
 * identity the API server authenticated, never one the requester wrote.
 *
 * Mutating (POST /admission/mutate, and /admission/mutate-scheduler, see below):
 *  - Pod CREATE: metadata.annotations["kubequota.io/user-info"] and
 *    ["yunikorn.apache.org/user.info"] are both set to {"user":U,"groups":[G...]} from
 *    request.userInfo (groups in request order), replacing whatever the requester wrote.
 *    A missing annotations map (or metadata) is created by the patch.
 *  - Pod UPDATE: the two annotations are put back to their values in oldObject (or removed
 *    when oldObject had none), so an identity cannot be changed after creation. A change
 *    of any other label or annotation that places a pod (its queue, application id and
 *    quota group: kq_pod_keys in kube/podkeys.h, the list the pod parser reads them from)
 *    is denied (403), for every requester: the ledger counts a pod where it was admitted,
 *    and a restart must count it in the same place.
 *  - Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, ReplicationController
 *    (spec.template) and CronJob
 *    (spec.jobTemplate.spec.template) CREATE: the pod template's annotations are stamped
 *    the same way, so the pods controllers create later carry the creator's identity.
 *    Missing template metadata/annotations maps are created.
 *  - Workload UPDATE: when the pod template changed (ignoring the two identity
 *    annotations) the template is stamped with the updater's identity: the identity is
 *    the person who last changed the template. When only other fields changed (replicas,
 *    labels, a re-apply of the same manifest by someone else), the template's identity is
 *    restored from oldObject instead, so such an update never rolls the workload's pods.
 *  - Requests from trusted requesters (trusted_users / trusted_groups) are never given an
 *    identity: a trusted controller keeps whatever identity the object already carries
 *    (a pod a controller creates without one is counted against the default user).
 *    Default: every service account in kube-system (the built-in controllers;
 *    "system:serviceaccount:kube-system:*" and group "system:serviceaccounts:kube-system")
 *    and "system:kube-controller-manager" (the controller manager's own identity when it
 *    runs without --use-service-account-credentials).
 *  - With opts->set_scheduler_name, Pod CREATE also sets spec.schedulerName to
 *    opts->scheduler_name, whatever the pod asked for (a pod in an enabled namespace
 *    cannot opt out of quota). An AdmissionReview carries no namespace labels, so the
 *    chart registers this behaviour as a second webhook on POST /admission/mutate-scheduler
 *    with namespaceSelector kubequota.io/enabled=true; it repeats the identity stamping,
 *    which is idempotent.
 *  - With opts->ns_filter, a request for a namespace the filter does not process
 *    (kq_admission_ns_processed: YuniKorn's processNamespaces and bypassNamespaces) is
 *    allowed unchanged before anything else: no stamp, no scheduler name, no gate. The
 *    server sets it on /admission/mutate-scheduler only; /admission/mutate-scheduler-opt-in
 *    (namespaces labelled kubequota.io/enabled=true) is the same handler without it.
 *  - With opts->check_pod_app, Pod CREATE of a managed pod (every requester) whose
 *    application id, named by a label or annotation, belongs to another user's running
 *    application is refused (403) with the hook's message (issue 29).
 *  - With opts->check_pod: a managed pod (spec.schedulerName is opts->scheduler_name)
 *    created with spec.nodeName bypasses the scheduler, so it is checked against its
 *    limits here (after stamping), as ResourceQuota does, whoever creates it: a trusted
 *    controller creating a tenant's pod acts for that tenant (issue 37); a pods/resize
 *    UPDATE of a managed pod is checked too (every requester). Denied: 403. A dry run
 *    (request.dryRun) goes to opts->check_pod_dry instead, which holds nothing.
 *  - With opts->admission_gate, Pod CREATE of a managed pod (spec.schedulerName is
 *    opts->scheduler_name after the step above) without spec.nodeName appends the
 *    scheduling gate KQ_ADMISSION_GATE to spec.schedulingGates (creating the list), for
 *    every requester, trusted ones included; a pod that already carries it is left alone.
 *    The admission controller (control/gating.h) removes it when the pod fits its quota.
 *    A Pod UPDATE that removes KQ_ADMISSION_GATE from a pod is refused (403) unless the
 *    requester is one of opts->gate_removers (kubequota's own service account in the
 *    chart): a tenant who removes the gate by hand would skip the fair order (not the
 *    limits: filter and bind still decide). With no gate_removers, anyone may.
 *  - pods/status UPDATE: the status subresource writes metadata too (issue 37), so it is
 *    held to the pod UPDATE rules for the fixed keys: identity annotations put back,
 *    a change of another kq_pod_keys key refused (403). Nothing else of it is looked at.
 *  - Other subresources (deployments/scale, ...), other kinds and other operations
 *    (DELETE, CONNECT) are allowed without a patch.
 *
 * Validating (POST /admission/validate):
 *  - The ConfigMap opts->config_map_namespace/opts->config_map_name, CREATE or UPDATE:
 *    data[opts->config_map_key] must load with kq_config_load_buffer; otherwise the
 *    request is denied (status.code 422) with the validator's diagnostics joined by "; ".
 *    A missing or non-string key is denied too. Other ConfigMaps are allowed.
 *  - Pod CREATE of a managed pod with spec.nodeName (every requester): passed to
 *    opts->reserve_pod, which checks and counts it (control/ledger.h, kq_ledger_admit):
 *    by now the API server has given the pod its uid and name, and this webhook is called
 *    once per storage attempt. A dry run goes to opts->check_pod instead (no reservation).
 *    Denied: 403 (500 when the check could not be made).
 *  - ElasticQuota (scheduling.x-k8s.io or scheduling.sigs.k8s.io): passed to
 *    opts->validate_elasticquota when set; until the quota tree fills that hook, CREATE
 *    and UPDATE are allowed with a warning saying the tree rules were not checked.
 *
 * Failure handling: a body that is not JSON, not an object or has no "request" object is
 * not an AdmissionReview and gets HTTP 400 {"error": "..."}. A review kubequota cannot act
 * on (wrong apiVersion/kind, no request.uid, no request.kind/operation, no userInfo where
 * an identity is needed, malformed object) is answered 200 with allowed=false and a
 * status message, echoing request.uid when there is one. The webhook configurations
 * should use failurePolicy: Fail, so an unreachable kubequota does not fail open either.
 *
 * Patches are RFC 6902 JSON Patch arrays (add/replace/remove; "/" in keys escaped as
 * "~1", "~" as "~0"), base64-encoded in response.patch with patchType "JSONPatch".
 *
 * Threads: every function here is pure over its arguments (no shared state), so civetweb
 * workers may call them concurrently. opts and everything it points to are borrowed and
 * read-only during a call.
 */
#ifndef KUBEQUOTA_ADMISSION_H
#define KUBEQUOTA_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/error.h"

#define KQ_ADMISSION_ANN_USER_INFO    "kubequota.io/user-info"
#define KQ_ADMISSION_ANN_YK_USER_INFO "yunikorn.apache.org/user.info"
/* The namespace label the chart's namespaceSelector uses for /admission/mutate-scheduler. */
#define KQ_ADMISSION_ENABLE_LABEL     "kubequota.io/enabled"
/* The scheduling gate managed pods are created with when gating is on (docs/gating.md). */
#define KQ_ADMISSION_GATE             "kubequota.io/admission"
/* Largest body accepted (an AdmissionReview carries object and oldObject, each up to the
 * API server's ~3 MiB object limit). Larger bodies get HTTP 413. */
#define KQ_ADMISSION_MAX_BODY         (16u * 1024u * 1024u)
/* Longest status.message / warning kubequota writes (bytes; longer text is cut, "..."). */
#define KQ_ADMISSION_MAX_MESSAGE      4096u

/* Hook for ElasticQuota validation. `request` is the AdmissionReview's "request" object
 * (borrowed, read-only). Return 0 to allow (a non-empty msg is then sent as a warning) or
 * a negative KQ_E* code to deny with msg as status.message (status.code 403 for
 * KQ_EDENIED, 422 otherwise). msg is NUL-terminated text of at most len-1 bytes. */
typedef int (*kq_admission_eq_hook_t)(void *ud, const json_t *request, char *msg, size_t len);

/* Hook that checks a managed pod against its limits at admission (issue 20): a pod
 * created with spec.nodeName, by any requester (it skips the scheduler: old NULL), or a pods/resize of a pod (old: the pod before). pod is the object as it
 * will be stored (identity stamped). 0 allows; KQ_EDENIED denies (403) with msg; other
 * negative codes deny with 500 and msg (the check could not be made: fail closed, as the
 * scheduler would). */
typedef int (*kq_admission_pod_hook_t)(void *ud, const json_t *pod, const json_t *old, char *msg, size_t len);

/* Which namespaces /admission/mutate-scheduler governs, as YuniKorn's admission controller
 * decides it (pkg/admission/admission_controller.go shouldProcessNamespace, with the
 * regular expressions of pkg/admission/conf/am_conf.go parseRegexes): a namespace is
 * processed when `process` is empty or one of its expressions matches, and none of
 * `bypass` matches. Each is a comma-separated list of POSIX extended regular expressions,
 * blanks around them ignored, empty entries skipped. Unanchored, as Go's MatchString:
 * "^team-" is a prefix, "kube" matches anywhere; anchor with ^ and $ for a whole name.
 * An empty namespace is "default" (YuniKorn's mutate). Immutable once made: concurrent
 * kq_admission_ns_processed calls are safe. */
typedef struct kq_admission_ns_filter kq_admission_ns_filter_t;

/* YuniKorn's default bypassNamespaces. */
#define KQ_ADMISSION_DEFAULT_BYPASS "^kube-system$"

/* A new filter in *out, or a negative code: KQ_EINVAL with the bad expression and
 * regcomp's reason in err (a typo fails at start, where YuniKorn would log it and fall
 * back to its default), KQ_ENOMEM. NULL lists are empty. */
int kq_admission_ns_filter_new(const char *process, const char *bypass, kq_admission_ns_filter_t **out, char *err,
                               size_t errlen) KQ_WUR;
void kq_admission_ns_filter_free(kq_admission_ns_filter_t *f); /* NULL: no-op */
/* Is ns processed? A NULL filter processes every namespace. */
bool kq_admission_ns_processed(const kq_admission_ns_filter_t *f, const char *ns);

typedef struct kq_admission_opts {
    /* Namespaces this handler governs (borrowed); NULL: all. See above. */
    const kq_admission_ns_filter_t *ns_filter;
    const char *scheduler_name;          /* "kubequota-scheduler" */
    bool set_scheduler_name;             /* stamp spec.schedulerName on Pod CREATE */
    bool admission_gate;                 /* gate managed pods at creation (KQ_ADMISSION_GATE) */
    /* Trusted requesters. A user entry ending in '*' matches every username starting with
     * what precedes the '*'; other entries match exactly. Group entries match exactly. */
    const char *const *trusted_users;
    size_t n_trusted_users;
    const char *const *trusted_groups;
    size_t n_trusted_groups;
    /* Users who may remove KQ_ADMISSION_GATE (same matching as trusted_users); none: anyone. */
    const char *const *gate_removers;
    size_t n_gate_removers;
    const char *config_map_namespace;    /* "kube-system" */
    const char *config_map_name;         /* "kubequota-config" */
    const char *config_map_key;          /* "queues.yaml" */
    kq_admission_eq_hook_t validate_elasticquota; /* NULL: allow with a warning */
    void *elasticquota_ud;
    kq_admission_pod_hook_t check_pod;   /* NULL: such pods are not checked */
    void *check_pod_ud;
    /* The same check for a dry run (request.dryRun: kubectl --dry-run=server), committing
     * nothing: check_pod may count what it admits (a resize's growth is reserved until the
     * watch shows it), and a dry run stores nothing to show. NULL: dry runs not checked. */
    kq_admission_pod_hook_t check_pod_dry;
    void *check_pod_dry_ud;
    /* Validating: Pod CREATE of a managed pod with spec.nodeName, not a dry run (old is
     * NULL): check and count it. NULL: not reserved. */
    kq_admission_pod_hook_t reserve_pod;
    void *reserve_pod_ud;
    /* Every Pod CREATE/UPDATE (trusted requesters too): the elastic quota's pod rules
     * (kq_elastic_check_pod); old is NULL on CREATE. NULL: not checked. */
    kq_admission_pod_hook_t check_pod_quota;
    void *pod_quota_ud;
    /* Pod CREATE of a managed pod, every requester, after the identity is stamped (old is
     * NULL): may the pod join the application its keys name (issue 29: an application
     * belongs to the user who started it)? KQ_EDENIED denies (403) with msg; any other
     * result allows (filter and bind refuse again). NULL: not checked. */
    kq_admission_pod_hook_t check_pod_app;
    void *pod_app_ud;
    /* The queues ConfigMap, after it loads: what the running serve requires beyond the
     * loader (kq_app_check_config: its partition, metering budgets), so the webhook refuses
     * exactly what a reload would. NULL: only kq_config_check_partition(cfg, "default"). */
    int (*check_config)(void *ud, const kq_config_t *cfg, const char *file, kq_diags_t *diags);
    void *check_config_ud;
} kq_admission_opts_t;

/* The defaults listed above; the arrays are static and never freed. */
kq_admission_opts_t kq_admission_opts_default(void);

/* The mutating webhook. `body` (len bytes, need not be NUL-terminated) is the request
 * body. Returns the HTTP status to answer, 200 (AdmissionReview response), 400 (not an
 * AdmissionReview) or 413 (body larger than KQ_ADMISSION_MAX_BODY), with *out a new
 * malloc'ed JSON body of *out_len bytes (NUL-terminated; the caller frees it). Returns
 * KQ_EINVAL (NULL arguments) or KQ_ENOMEM with *out and *out_len untouched. */
int kq_admission_mutate(const kq_admission_opts_t *o, const char *body, size_t len, char **out,
                        size_t *out_len) KQ_WUR;

/* The validating webhook; same contract as kq_admission_mutate. */
int kq_admission_validate(const kq_admission_opts_t *o, const char *body, size_t len, char **out,
                          size_t *out_len) KQ_WUR;

#endif
