/* Pod ledger: the only place that turns pod events into quota engine increases and
 * decreases. Keyed by pod UID; each pod is counted at most once and released exactly
 * once, whichever path (bind, watch, relist) sees it first.
 *
 * States of a known pod:
 *   PENDING  known (from the watch or a filter/bind lookup), not counted
 *   ASSUMED  counted by kq_ledger_assume at bind time, not yet seen bound by the watch
 *   BOUND    counted, and the watch has shown it bound to a node
 * A pod that is deleted or terminal is released (if counted) and forgotten.
 * The ledger remembers exactly what it counted (queue, application, user, request) and
 * releases that, even if the pod's labels change later. A bound pod without a valid queue
 * is counted against "root" (and a warning logged). An in-place resize of a bound pod
 * releases the old request and counts the new one.
 *
 * Relist (after a 410 or at start): kq_ledger_resync_begin, kq_ledger_observe for each
 * listed pod, kq_ledger_resync_end: pods not listed are released, except pods assumed
 * after the resync began (their bind may be in flight).
 *
 * DESIGN: one mutex guards the UID table; engine calls are made under it (lock order:
 * ledger -> ugm). No I/O under the lock: bind POSTs happen in the caller, between assume
 * and forget.
 */
#ifndef KUBEQUOTA_LEDGER_H
#define KUBEQUOTA_LEDGER_H

#include <stdbool.h>
#include <stddef.h>

#include "kubequota/error.h"
#include "kubequota/pod.h"
#include "kubequota/ugm.h"

typedef struct kq_ledger kq_ledger_t;

/* The ledger borrows ugm (it must outlive the ledger). scheduler_name: pods with this
 * spec.schedulerName are "ours" (pending resources are shown for them). */
kq_ledger_t *kq_ledger_new(kq_ugm_t *ugm, const char *scheduler_name);
void kq_ledger_free(kq_ledger_t *l);

/* Filter: would the pod fit? 0 when already counted or when it fits; KQ_EDENIED with the
 * reason (also for an unresolvable queue). Changes nothing. */
int kq_ledger_check(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len) KQ_WUR;

/* Bind: check and count the pod (enforced). 0 when counted now or already counted;
 * KQ_EDENIED with the reason, nothing changed. */
int kq_ledger_assume(kq_ledger_t *l, const kq_pod_t *pod, char *reason, size_t reason_len) KQ_WUR;

/* Bind failed: release what kq_ledger_assume counted, unless the watch has confirmed the
 * pod bound meanwhile. KQ_ENOENT when the pod is not assumed. */
int kq_ledger_forget(kq_ledger_t *l, const char *uid);

/* Watch ADDED/MODIFIED (and relist items): bound and alive -> counted (unchecked: reality
 * is never refused); terminal or deleted -> released; unassigned -> pending. */
void kq_ledger_observe(kq_ledger_t *l, const kq_pod_t *pod);

/* Watch DELETED: release if counted, forget. */
void kq_ledger_remove(kq_ledger_t *l, const char *uid);

void kq_ledger_resync_begin(kq_ledger_t *l);
void kq_ledger_resync_end(kq_ledger_t *l);

/* Copy of what the ledger knows of a pod (for bind, which only gets name/namespace/uid).
 * 0 or KQ_ENOENT. */
int kq_ledger_lookup(kq_ledger_t *l, const char *uid, kq_pod_t *out) KQ_WUR;

bool kq_ledger_is_counted(kq_ledger_t *l, const char *uid);
/* Number of known pods, and of counted ones. */
size_t kq_ledger_size(kq_ledger_t *l, size_t *counted);

#endif
