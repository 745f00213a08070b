/* DRA ResourceClaims (resource.k8s.io/v1) as plain structs: what a claim may take and what
 * it was given, per device class, under the resource name Kubernetes' ResourceQuota uses,
 * "<deviceclass>.deviceclass.resource.k8s.io/devices" (a plain count).
 *
 * What a claim may take (`may`), as ResourceQuota's claim evaluator counts it
 * (k8s.io/kubernetes pkg/quota/v1/evaluator/core/resource_claims.go, Usage): for each
 * request of spec.devices.requests[],
 *  - `exactly` with allocationMode ExactCount (the default): its count (default 1);
 *  - `exactly` with allocationMode All: KQ_CLAIM_ALL_MAX devices (resourceapi
 *    AllocationResultsMaxSize: an allocation never holds more, so this is the most the
 *    request can get; Kueue refuses such claims, kubequota charges the worst case until the
 *    allocation says how many);
 *  - `firstAvailable` subrequests: per device class, the largest of its alternatives of
 *    that class (each counted as above), as the evaluator takes the worst case per class;
 *  - an unknown allocation mode (a newer API): nothing, as the evaluator (a parse never
 *    fails for it).
 * The sums per class go into `may`.
 *
 * What a claim was given (`alloc`, when `allocated`: status.allocation is set): one device
 * per entry of status.allocation.devices.results[], charged to the device class of the
 * request it names (`request`, or `parent/sub` for a firstAvailable subrequest: the
 * subrequest's class). A result naming no request of the spec is charged to the class
 * KQ_CLAIM_UNKNOWN_CLASS (never lost).
 *
 * Ownership: kq_claim_t owns its strings and sets; kq_claim_clear frees them.
 */
#ifndef KUBEQUOTA_CLAIM_H
#define KUBEQUOTA_CLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"
#include "kubequota/kube/jscan.h"

/* resourceapi.AllocationResultsMaxSize (k8s.io/api resource/v1 types.go) */
#define KQ_CLAIM_ALL_MAX 32
/* The suffix of a device class's resource name (corev1.ResourceClaimsPerClass's form for
 * devices: V1ResourceByDeviceClass). */
#define KQ_CLAIM_RES_SUFFIX ".deviceclass.resource.k8s.io/devices"
/* Class charged for an allocated device whose request the spec does not name. */
#define KQ_CLAIM_UNKNOWN_CLASS "unknown"
/* Bounds on what one claim may hold (the API's own maxima are lower: 32 requests, 8
 * subrequests, 32 results, 256 reservedFor). */
#define KQ_CLAIM_MAX_REQUESTS 128
#define KQ_CLAIM_MAX_RESERVED 1024
#define KQ_CLAIM_COUNT_MAX 1000000

/* One allocated device (status.allocation.devices.results[]): where it is, and the
 * resource name of the class of the request it was allocated for (interned; the counters
 * of partitionable devices are charged under that class: control/slices.h). */
typedef struct kq_claim_dev {
    char *driver, *pool, *device; /* owned */
    const char *res;              /* "<class>.deviceclass.resource.k8s.io/devices", interned */
} kq_claim_dev_t;

/* The class name in a device-count resource name ("gpu" of "gpu.deviceclass.resource.k8s.io/devices")
 * into buf; false when res is not one or the name does not fit. */
bool kq_claim_class_of(const char *res, char *buf, size_t len);

typedef struct kq_claim {
    char *uid;           /* metadata.uid (required) */
    char *ns, *name;     /* metadata.namespace (default "default"), metadata.name (required) */
    char *owner_pod;     /* uid of the controlling ownerReference of kind Pod (a template's claim) */
    kq_resource_t may;   /* devices the claim may take, per class (above) */
    bool allocated;      /* status.allocation is set */
    kq_resource_t alloc; /* devices allocated, per class (when allocated) */
    char **reserved;     /* uids of status.reservedFor[] entries of resource "pods" */
    size_t n_reserved;
    kq_claim_dev_t *devs; /* the allocated devices (when allocated), for counters (slices.h) */
    size_t n_devs;
    bool extended;        /* kube-scheduler's special claim of the extended-resource path
                           * (annotation resource.kubernetes.io/extended-resource-claim "true") */
} kq_claim_t;

/* The members of a ResourceClaim that kq_claim_parse reads (and metadata.resourceVersion
 * for the informer). */
extern const kq_jfilter_t kq_claim_fields[];

/* The resource name of a device class: "<class>.deviceclass.resource.k8s.io/devices",
 * interned (kq_resource_name), or NULL when the class makes no valid name. */
const char *kq_claim_resource_name(const char *device_class);

/* Parses a ResourceClaim object. On success *out owns new strings (kq_claim_clear). On
 * failure (not an object, no uid or name, a field of the wrong type, an ExactCount count outside
 * 1..KQ_CLAIM_COUNT_MAX, too many requests) KQ_EPARSE with a reason naming the
 * field, or KQ_ENOMEM; *out is left zeroed. */
int kq_claim_parse(const kq_jnode_t *obj, kq_claim_t *out, char *err, size_t errlen) KQ_WUR;

/* The same from JSON text. */
int kq_claim_parse_text(const char *text, size_t len, kq_claim_t *out, char *err, size_t errlen) KQ_WUR;

/* What the claim is charged now: alloc when allocated, else may (borrowed). */
static inline const kq_resource_t *kq_claim_devices(const kq_claim_t *c)
{
    return c->allocated ? &c->alloc : &c->may;
}

/* Frees and zeroes. NULL is a no-op. */
void kq_claim_clear(kq_claim_t *c);

#endif
