/* The claim table: the ResourceClaims the claim informer lists and watches (control/sync.c),
 * keyed by namespace/name, each with the devices it is charged per device class now
 * (kube/claim.h: what it may take until status.allocation is set, then what it was
 * given). The pod ledger reads it to charge pods for their claims (ledger.h "DRA
 * ResourceClaims"); it never decides anything itself.
 *
 * DESIGN: one private mutex guards the table; no call out is made under it, so it is a
 * leaf lock: the ledger takes it under its own (lock order: ledger -> claims). A relist is
 * resync_begin, a put per listed claim, resync_end: claims not listed are dropped and
 * reported (after the lock is released) so that the ledger recharges their pods.
 * Memory: one entry per claim, its key and uid and a few resource entries (docs/dra.md has
 * the measured cost of 10,000 claims).
 */
#ifndef KUBEQUOTA_CLAIMS_H
#define KUBEQUOTA_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>

#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"
#include "kubequota/kube/claim.h"

typedef struct kq_claims kq_claims_t;

/* A new empty table (NULL when out of memory). */
kq_claims_t *kq_claims_new(void);
/* Frees the table. NULL is a no-op. */
void kq_claims_free(kq_claims_t *c);

/* Adds or replaces the claim ns/name. Takes what *claim holds (it is cleared, also on
 * failure). *changed (may be NULL): the devices it is charged differ from before (or it is
 * new) or its reservedFor changed. 0, KQ_EINVAL (a key too long) or KQ_ENOMEM (the old
 * entry stays). */
int kq_claims_put(kq_claims_t *c, kq_claim_t *claim, bool *changed) KQ_WUR;

/* Forgets the claim ns/name; true when it was known. */
bool kq_claims_delete(kq_claims_t *c, const char *ns, const char *name);

/* Adds the devices the claim ns/name is charged now to *sum (an initialised set). 0;
 * KQ_ENOENT when the claim is not known (not created yet, or deleted); KQ_ENOMEM or
 * KQ_ERANGE (sum unchanged). O(1): one hash lookup. */
int kq_claims_devices(kq_claims_t *c, const char *ns, const char *name, kq_resource_t *sum) KQ_WUR;

/* The position of pod `uid` in the claim's status.reservedFor (the order kube-scheduler
 * reserved it for its pods), or -1 when it is not there or the claim is not known. */
long kq_claims_reserved_index(kq_claims_t *c, const char *ns, const char *name, const char *uid);

/* Whether the claim is known and allocated. */
bool kq_claims_allocated(kq_claims_t *c, const char *ns, const char *name);

/* Relist: claims put between begin and end are kept; the others are dropped at end, and
 * gone(ud, ns, name) called for each with no lock held. Returns how many were dropped. */
void kq_claims_resync_begin(kq_claims_t *c);
size_t kq_claims_resync_end(kq_claims_t *c, void (*gone)(void *ud, const char *ns, const char *name), void *ud);

/* ---- counters of partitionable devices (issue 39; slices.h) ----
 * With the device tables wired (borrowed; outlive the table; call before any put), an
 * allocated claim is charged, besides its devices per class, what they consume of their
 * pools' shared counters, under "<class>.deviceclass.resource.k8s.io/<counter>".
 * kq_claims_recount recomputes that for every allocated claim after the slices changed and
 * calls changed(ud, ns, name) (no lock held) for each claim whose charge moved; returns how
 * many. Lock order: ledger -> claims -> slices. */
struct kq_slices;
void kq_claims_set_slices(kq_claims_t *c, struct kq_slices *slices);
size_t kq_claims_recount(kq_claims_t *c, void (*changed)(void *ud, const char *ns, const char *name), void *ud);

/* Number of known claims; *allocated (may be NULL): how many of them are allocated. */
size_t kq_claims_size(kq_claims_t *c, size_t *allocated);

#endif
