/* Pod model: turns a Kubernetes Pod (JSON) into the facts the quota engine needs: who
 * (user, groups), where (queue path), which application, and what (requested resources).
 *
 * Resolution rules:
 *  - user/groups: annotation kubequota.io/user-info = {"user":"alice","groups":["dev"]},
 *    else YuniKorn's yunikorn.apache.org/user.info (same shape); neither (or empty): the
 *    default user (opts->default_user, "nobody") with no groups. Read as YuniKorn's shim
 *    reads it (apache/yunikorn-k8shim pkg/common/utils/utils.go GetUserFromPod): one that
 *    does not decode (not JSON, not an object, a member of the wrong type; kubequota also:
 *    a name longer than 512 bytes or with control characters) is the default user without
 *    groups, one with an empty user the default user with its groups; such a pod is counted,
 *    never refused, and opts->identity_note says why.
 *  - queue named by the pod: label or annotation kubequota.io/queue, else YuniKorn's keys in
 *    YuniKorn's order (apache/yunikorn-k8shim pkg/common/utils/utils.go GetQueueNameFromPod):
 *    label yunikorn.apache.org/queue, annotation yunikorn.apache.org/queue, label queue.
 *  - queue with placement rules in the partition: YuniKorn's rules (placement.h) with the
 *    named queue as "provided" and the tags namespace (and namespace.parentqueue from the
 *    namespace's yunikorn.apache.org/parentqueue annotation, via opts->ns_lookup); a bound
 *    pod is "forced" (recovery queue). The result may be a dynamic queue.
 *  - queue without placement rules (kubequota's own resolution): the named queue, else
 *    root.<namespace> when that is a leaf queue, else root.default. A value with a dot
 *    but no "root." prefix is a path below root (YuniKorn); a plain name must name exactly
 *    one configured queue. A queue that does not exist, is ambiguous or is a parent queue
 *    leaves queue NULL and queue_error set; such a pod is denied by filter/bind.
 *  - quota group (elastic quota, see elastic.h): kq_pod_parse only records the label
 *    quota.scheduling.koordinator.sh/name in quota_name; the group itself (quota_group)
 *    is resolved against the live quota tree by the pod ledger's resolver.
 *  - application: label kubequota.io/app-id, then YuniKorn's keys in YuniKorn's order
 *    (utils.go GetApplicationIDFromPod): label yunikorn.apache.org/app-id, annotation
 *    yunikorn.apache.org/app-id, label applicationId, label spark-app-selector (an id ending
 *    in "-uniqueautogen" has that suffix replaced by "-<pod uid>"); then, by
 *    opts->app_id_fallback: the controller ownerReference UID, then the pod's own UID
 *    (KQ_APPID_OWNER, zeroed opts; serve's --app-id-fallback owner); or YuniKorn's generated id
 *    "yunikorn-<namespace>-autogen" (KQ_APPID_YUNIKORN, serve's default) or "<namespace, at most 26 bytes>-<pod uid>" (KQ_APPID_YUNIKORN_UNIQUE,
 *    YuniKorn's generateUniqueAppId), both cut at 63 bytes (utils.go GenerateApplicationID).
 *    app_named says whether the id came from a key (only such an id can name another
 *    user's application: ugm.h "Application ownership"). Every key read for identity,
 *    queue and application is in kq_pod_keys (podkeys.h), in the order given here.
 *  - scheduling gates: spec.schedulingGates is counted (n_gates) and the index of
 *    kubequota's gate "kubequota.io/admission" kept (gate_pos = index + 1, 0 absent); a gate
 *    that is not an object with a string name is a parse error.
 *  - gang (released all-or-nothing by the admission gate): Kueue's pod group (label
 *    kueue.x-k8s.io/pod-group-name G, annotation kueue.x-k8s.io/pod-group-total-count N) is
 *    gang "kueue:<namespace>/G" of N pods; else YuniKorn's task group (annotations
 *    yunikorn.apache.org/task-group-name T and yunikorn.apache.org/task-groups, a JSON array
 *    whose entry named T has minMember M) is gang "yunikorn:<application>/T" of M pods. A
 *    count outside 1..100000 or malformed JSON leaves the pod without a gang.
 *  - request: max(sum of regular containers + restartable (sidecar) init containers,
 *    the largest regular init container plus the sidecars started before it), plus
 *    spec.overhead — the way Kubernetes computes a pod's effective request. A container
 *    resource with a limit and no request requests its limit (API server defaulting);
 *    pod-level spec.resources.requests replace cpu/memory/hugepages; during an in-place
 *    resize the larger of spec and status (allocated/actuated) counts (see src/kube/pod.c).
 *    The devices of the pod's DRA ResourceClaims are not in it: the pod ledger adds them
 *    (ledger.h "DRA ResourceClaims"), since they depend on the claims and on other pods.
 *  - DRA ResourceClaims (claims): one entry per spec.resourceClaims[] entry: its
 *    resourceClaimName, or for a resourceClaimTemplateName the name kube-controller-manager
 *    gave the generated claim, read from status.resourceClaimStatuses[] (matched by name);
 *    NULL while that status entry is missing (the claim is not generated yet). A status
 *    entry without a resourceClaimName means no claim was needed: the entry is left out.
 *    At most KQ_POD_MAX_CLAIMS entries (more is a parse error).
 *
 * Ownership: kq_pod_t owns its strings; kq_pod_clear frees them. Parsing never keeps a
 * reference to the document.
 */
#ifndef KUBEQUOTA_POD_H
#define KUBEQUOTA_POD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "kubequota/engine/config.h"
#include "kubequota/base/error.h"
#include "kubequota/kube/jscan.h"
#include "kubequota/engine/placement.h"
#include "kubequota/engine/resource.h"

typedef enum kq_pod_phase {
    KQ_POD_PENDING = 0,
    KQ_POD_RUNNING,
    KQ_POD_SUCCEEDED,
    KQ_POD_FAILED,
    KQ_POD_UNKNOWN,
} kq_pod_phase_t;

typedef struct kq_pod {
    char *uid;            /* metadata.uid (required) */
    char *ns, *name;      /* metadata.namespace (default "default"), metadata.name */
    char *node;           /* spec.nodeName, NULL when unassigned */
    char *scheduler_name; /* spec.schedulerName, "default-scheduler" when absent */
    kq_pod_phase_t phase;
    bool deleting;        /* metadata.deletionTimestamp set */
    char *user;
    char **groups;
    size_t n_groups;
    char *queue;          /* resolved full path, or NULL (then queue_error says why) */
    char *queue_error;
    kq_denial_t queue_denial; /* queue_error's kind: KQ_DENIAL_QUEUE_MISSING, _QUEUE_NOT_LEAF or
                               * _ACL (placement); KQ_DENIAL_NONE without queue_error */
    bool queue_named;     /* a queue label or annotation (kq_pod_keys, role QUEUE) is set */
    char *queue_value;    /* that key's value as the pod names it (NULL: none), kept so that the
                           * pod can be placed again when the config changes (kq_pod_place) */
    const char *queue_source; /* that key (a static string of kq_pod_keys; never freed), or NULL */
    char *app_id;
    bool app_named;       /* app_id came from a label or annotation (kq_pod_keys, role APP),
                           * not from a fallback: only a named id can be another user's */
    kq_resource_t request;
    int32_t priority;     /* spec.priority, 0 when absent */
    bool preemptible;     /* false when label quota.scheduling.koordinator.sh/preemptible="false" */
    int64_t created;      /* metadata.creationTimestamp, seconds since epoch (0 unknown) */
    char *quota_name;     /* label quota.scheduling.koordinator.sh/name, NULL when absent */
    char *quota_group;    /* resolved elastic quota group (set by the pod ledger's resolver,
                           * see elastic.h); NULL when not resolved / no quota tree */
    uint32_t n_gates;     /* entries of spec.schedulingGates */
    uint32_t gate_pos;    /* 1 + index of the gate KQ_POD_ADMISSION_GATE in it; 0: absent (so a
                           * zeroed pod is not gated) */
    char *gang;           /* the gang it belongs to (released all together), NULL: none */
    uint32_t gang_min;    /* how many of its pods must start together */
    char **claims;        /* DRA ResourceClaims the pod uses (names, in its namespace); an entry
                           * is NULL while a template's claim is not generated yet */
    size_t n_claims;
} kq_pod_t;

/* Bound on spec.resourceClaims (the API allows 32). */
#define KQ_POD_MAX_CLAIMS 128

/* The scheduling gate of kubequota's admission controller (control/gating.h). */
#define KQ_POD_ADMISSION_GATE "kubequota.io/admission"

/* Carries kubequota's admission gate: waits for the admission controller. */
static inline bool kq_pod_is_gated(const kq_pod_t *p)
{
    return p->gate_pos > 0;
}

typedef enum kq_app_id_fallback {
    KQ_APPID_OWNER = 0,
    KQ_APPID_YUNIKORN,
    KQ_APPID_YUNIKORN_UNIQUE,
} kq_app_id_fallback_t;

typedef struct kq_pod_opts {
    const kq_partition_conf_t *partition; /* for queue resolution; borrowed */
    const char *default_user;             /* NULL = "nobody" */
    kq_jdoc_t *scratch; /* a document to reuse for the user-info annotation's JSON (one
                         * thread's, e.g. the informer's); NULL: a temporary one */
    kq_app_id_fallback_t app_id_fallback;
    /* when not NULL: set to why the pod's identity annotation was not used as written (the
     * pod then counts as default_user, see "user/groups" above), else to "" */
    char *identity_note;
    size_t identity_note_len;
    /* placement hooks, each may be NULL (see kq_place_in_t): dynamic queues in use and the
     * submit ACL, both called with hook_arg */
    kq_qkind_t (*dynamic_kind)(void *arg, const char *path);
    bool (*may_submit)(void *arg, const kq_queue_conf_t *q, const char *user, const char *const *groups,
                       size_t n_groups);
    /* a pod placed in a dynamic queue hands it its namespace's limits (ns_limits below);
     * max NULL and max_apps 0 clear them (kq_ugm_set_dynamic_limits) */
    void (*set_dynamic_limits)(void *arg, const char *path, const kq_resource_t *max, uint64_t max_apps);
    void *hook_arg;
    /* copies the namespace's parent queue annotation into buf (NUL-terminated); false when
     * there is none or the namespace is unknown */
    bool (*ns_parent_queue)(void *arg, const char *ns, char *buf, size_t len);
    /* the namespace's queue limits (namespace.quota / namespace.maxApps) copied into *max (initialised;
     * the caller frees it); false: none */
    bool (*ns_limits)(void *arg, const char *ns, kq_resource_t *max, bool *has_max, uint64_t *max_apps);
    void *ns_arg;
} kq_pod_opts_t;

/* The members of a Pod that kubequota reads: kq_pod_parse, the metering's PodScheduled
 * condition and the informer's metadata.resourceVersion. A pod decoded with
 * kq_jdoc_parse(doc, text, len, kq_pod_fields, ...) parses exactly like the whole object
 * (tests/unit/test_pod.c and fuzz/fuzz_pod.c hold that), without decoding managedFields,
 * env, volumes, images, probes... */
extern const kq_jfilter_t kq_pod_fields[];

/* Parses and resolves a Pod object (a decoded document's node, see kq_jdoc in jscan.h).
 * On success *out owns new strings (clear it with kq_pod_clear). On failure (not an
 * object, no uid, bad quantity, bad user-info JSON...) returns KQ_EPARSE with a reason
 * naming the field; *out is left zeroed. */
int kq_pod_parse(const kq_jnode_t *obj, const kq_pod_opts_t *opts, kq_pod_t *out, char *err,
                 size_t errlen) KQ_WUR;

/* The same from JSON text: decodes kq_pod_fields of it into a temporary document. Text
 * that is not JSON is KQ_EPARSE with the position in err. */
int kq_pod_parse_text(const char *text, size_t len, const kq_pod_opts_t *opts, kq_pod_t *out, char *err,
                      size_t errlen) KQ_WUR;

/* The same from a jansson value (for callers that hold one: a GET, preemption arguments;
 * it is written out and decoded again, so it is not for hot paths). */
int kq_pod_parse_json(const json_t *obj, const kq_pod_opts_t *opts, kq_pod_t *out, char *err,
                      size_t errlen) KQ_WUR;

/* The DRA extended-resource path (issue 39): fn(ud, request) adds to a pod's computed
 * request, e.g. "<class>.deviceclass.resource.k8s.io/devices" for an extended resource a
 * DeviceClass backs (control/slices.h kq_slices_extended_devices). Set once by main before
 * any pod is parsed (not thread-safe against parsing); NULL: nothing is added. */
typedef int (*kq_pod_extended_fn)(void *ud, kq_resource_t *request);
void kq_pod_set_extended_mapper(kq_pod_extended_fn fn, void *ud);

/* Places an already parsed pod again (its queue, queue_error and queue_denial) by the
 * queue rules above, against opts->partition and its hooks: for a config reload or a
 * namespace change, so that a pod's queue is a function of the pod and the config in force
 * now, whatever config it was first placed by. Reads only the pod's own facts (namespace,
 * user, groups, node, queue_value, queue_source). 0, or KQ_ENOMEM (the pod then has no
 * queue and queue_error NULL). */
int kq_pod_place(const kq_pod_opts_t *opts, kq_pod_t *p) KQ_WUR;

/* Effective request of a PodSpec object (see rules above). */
/* *out is an initialised set (left unchanged on error; release it with kq_resource_free). */
int kq_pod_request(const kq_jnode_t *spec, kq_resource_t *out, char *err, size_t errlen) KQ_WUR;

/* Deep copy; KQ_ENOMEM leaves dst zeroed. */
int kq_pod_copy(kq_pod_t *dst, const kq_pod_t *src) KQ_WUR;
/* Frees the strings and zeroes the struct. NULL is a no-op. */
void kq_pod_clear(kq_pod_t *p);

/* Succeeded or Failed: holds nothing any more. */
static inline bool kq_pod_is_terminal(const kq_pod_t *p)
{
    return p->phase == KQ_POD_SUCCEEDED || p->phase == KQ_POD_FAILED;
}

#endif
