/* DRA devices as the drivers publish them: ResourceSlices (what each device consumes of its
 * pool's shared counters) and DeviceClasses (the extended resource each one stands for).
 * The claim charge (the ResourceClaim informer) asks this module two things:
 *
 *  1. Counters of partitionable devices (ResourceSlice spec.sharedCounters, a device's
 *     consumesCounters; KEP-4815, beta and on by default since Kubernetes 1.36). A device
 *     allocated to a claim through a request of class C is charged, per counter N it
 *     consumes, under the resource name
 *
 *         <C>.deviceclass.resource.k8s.io/<N>      e.g. gpu.deviceclass.resource.k8s.io/memory
 *
 *     summed over the counter sets it consumes from (a device consumes from at most 2).
 *     Why by class and counter name, not by counter set: a counter set is one physical
 *     device's budget ("gpu-0", "gpu-1", ... in every pool), so a name per set would be a
 *     limit per physical GPU; a class is what a tenant asks for and what
 *     `<C>.deviceclass.resource.k8s.io/devices` (Kubernetes' ResourceQuota key) already
 *     limits, so one prefix carries both limits of a class. A counter named "devices" would
 *     collide with the device count: it is not charged (logged once). Values are counts:
 *     a counter of "40Gi" is 42949672960 (queues.yaml accepts "40Gi" for it).
 *
 *  2. The extended-resource path (DeviceClass spec.extendedResourceName, GA in 1.37; also
 *     the implicit name deviceclass.resource.kubernetes.io/<C>): a container request of
 *     such a name is charged as devices of its class too, from admission on, before
 *     kube-scheduler creates the pod's special claim (annotation
 *     resource.kubernetes.io/extended-resource-claim: "true", controlled by the pod). That
 *     claim's devices are then the same devices: kq_slices_extended_dedup takes off the
 *     claim's charge what the pod's requests already charge, so each resource name is
 *     charged once (the subtraction Kubernetes' ResourceQuota makes the other way round:
 *     pkg/quota/v1/evaluator/core/resource_claims.go addExtendedResourceQuota).
 *
 * Order and staleness. A pool's slices carry pool.generation; only devices of the newest
 * generation seen for a pool count. A device a claim was allocated but no slice (yet)
 * publishes is charged no counter: KQ_ENOENT tells the caller, and kq_slices_generation()
 * changes on every applied slice, so a caller that charged a claim at generation g
 * recomputes it when the generation moves (the charge is then the same whatever order
 * slices and claims arrived in).
 *
 * DESIGN: one private mutex guards the tables; every public function takes it once and
 * calls nothing outside the module under it (a leaf in the lock order: it may be taken
 * under the ledger's lock, never the reverse). The informer thread (kq_slices_watch_start)
 * applies events; any thread reads. Ownership: functions copy what they keep; json_t
 * arguments are borrowed.
 */
#ifndef KUBEQUOTA_SLICES_H
#define KUBEQUOTA_SLICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <stdbool.h>
#include <string.h>

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"
#include "kubequota/kube/claim.h"

#define KQ_DRA_CLASS_SUFFIX ".deviceclass.resource.k8s.io/"
#define KQ_DRA_DEVICES "devices"
#define KQ_DRA_IMPLICIT_PREFIX "deviceclass.resource.kubernetes.io/"
#define KQ_DRA_EXTENDED_CLAIM_ANNOTATION "resource.kubernetes.io/extended-resource-claim"

/* Whether a resource name is a device class's device count, "<class>.deviceclass.resource.k8s.io/devices"
 * (with a class name before the suffix), as opposed to one of its counters or any other resource. */
static inline bool kq_dra_is_devices(const char *name)
{
    static const char sfx[] = KQ_DRA_CLASS_SUFFIX KQ_DRA_DEVICES;
    size_t n = strlen(name), k = sizeof(sfx) - 1;
    return n > k && memcmp(name + n - k, sfx, k) == 0;
}

typedef struct kq_slices kq_slices_t;
struct kq_kube;
struct kq_watch;

/* New, empty tables. NULL on ENOMEM. */
kq_slices_t *kq_slices_new(void);
/* Stops the informers (if started) and frees. NULL is a no-op. */
void kq_slices_free(kq_slices_t *s);

/* One watch event of a ResourceSlice (type KQ_WATCH_ADDED/MODIFIED/DELETED; the object is
 * borrowed). A slice without spec.driver, spec.pool.name or metadata.name is KQ_EINVAL and
 * changes nothing; entries it cannot read (a device without a name, a counter whose value
 * is not a quantity) are skipped. KQ_ENOMEM leaves the slice's previous state. */
int kq_slices_apply_slice(kq_slices_t *s, int type, const json_t *slice) KQ_WUR;
/* One watch event of a DeviceClass: its extendedResourceName (if any). */
int kq_slices_apply_class(kq_slices_t *s, int type, const json_t *cls) KQ_WUR;
/* A relist of slices (or classes): begin marks every entry unseen, end drops the unseen. */
void kq_slices_resync_begin(kq_slices_t *s, bool classes);
void kq_slices_resync_end(kq_slices_t *s, bool classes);

/* Changes with every slice or class event that changed something. */
uint64_t kq_slices_generation(const kq_slices_t *s);

/* Adds to *out (initialised) what the device (driver, pool, device) consumes of its pool's
 * counters, under `<device_class>.deviceclass.resource.k8s.io/<counter>`. 0; KQ_ENOENT when
 * no slice of the newest generation of that pool publishes the device (*out unchanged);
 * KQ_EINVAL for a resource name that cannot be made; KQ_ENOMEM/KQ_ERANGE (*out unchanged). */
int kq_slices_device_counters(const kq_slices_t *s, const char *device_class, const char *driver,
                              const char *pool, const char *device, kq_resource_t *out) KQ_WUR;

/* The counter charge of one ResourceClaim (borrowed JSON): every device of its
 * status.allocation.devices.results, each under the class of the request (or
 * firstAvailable subrequest, "request/sub") that it was allocated for. Nothing for an
 * unallocated claim. *missing (may be NULL) is set to the number of allocated devices no
 * slice publishes (their counters are not in *out). 0 or KQ_ENOMEM/KQ_ERANGE (*out
 * unchanged). */
int kq_slices_claim_counters(const kq_slices_t *s, const json_t *claim, kq_resource_t *out,
                             size_t *missing) KQ_WUR;

/* The same for a parsed claim's allocated devices (kube/claim.h kq_claim_dev_t: each with
 * the device-count resource of its request's class). */
int kq_slices_devs_counters(const kq_slices_t *s, const kq_claim_dev_t *devs, size_t n, kq_resource_t *out,
                            size_t *missing) KQ_WUR;

/* Calls fn(ud) on the informer thread after every slice event that changed the tables (no
 * lock held), e.g. to recount the claims' counters (claims.h kq_claims_recount). Set it
 * before kq_slices_watch_start. */
void kq_slices_set_hook(kq_slices_t *s, void (*fn)(void *ud), void *ud);

/* The device class whose extendedResourceName is `name`, or for
 * deviceclass.resource.kubernetes.io/<C> the class C whether or not it exists (as
 * kube-scheduler reads the implicit name). Copied into buf (len bytes); false when no class
 * backs the name. */
bool kq_slices_extended_class(const kq_slices_t *s, const char *name, char *buf, size_t len);

/* The extended-resource path, part 1: for each name of `requests` (a pod's container
 * requests, as the pod is charged for them) that a device class backs, adds
 * `<class>.deviceclass.resource.k8s.io/devices` of the same count to *out. 0, KQ_ENOMEM or
 * KQ_ERANGE (*out unchanged). */
int kq_slices_extended_devices(const kq_slices_t *s, const kq_resource_t *requests, kq_resource_t *out) KQ_WUR;

/* Whether a claim (borrowed JSON) is kube-scheduler's special claim of the extended-resource
 * path for the pod with this UID: annotation KQ_DRA_EXTENDED_CLAIM_ANNOTATION "true" and a
 * controller ownerReference of kind Pod (v1) with that uid (pod_uid NULL: any pod). */
bool kq_slices_is_extended_claim(const json_t *claim, const char *pod_uid);

/* The extended-resource path, part 2 (pure): *claim_charge is the charge of a pod's special
 * claim, *pod_mapped what kq_slices_extended_devices charged the same pod; every
 * `<class>.deviceclass.resource.k8s.io/devices` entry of the claim charge is lowered by the
 * pod's entry of that name (at 0 at least). Counters and other names are left as they are:
 * a container request says nothing of counters. */
void kq_slices_extended_dedup(kq_resource_t *claim_charge, const kq_resource_t *pod_mapped);

/* Starts the ResourceSlice and DeviceClass informers on `k` (borrowed; outlives s). Returns
 * 0 once both started (they list in the background: kq_slices_synced), KQ_ENOMEM. */
int kq_slices_watch_start(kq_slices_t *s, struct kq_kube *k) KQ_WUR;
/* True once both informers delivered their first list (always true when not started). */
bool kq_slices_synced(const kq_slices_t *s);
/* Counts for /metrics and logs: slices, devices with counters, classes with an extended name. */
void kq_slices_stats(const kq_slices_t *s, size_t *slices, size_t *devices, size_t *classes);

#endif
