/* Leader election with a coordination.k8s.io/v1 Lease, for running several replicas.
 *
 * Every replica watches and serves filter, bind, admission and REST from the same state;
 * only the leader evicts (reclaim) and charges (metering). Those call kq_leader_is_leader()
 * just before acting.
 *
 * Protocol (the one client-go's leaderelection package follows, so kubequota can share a
 * lease with nothing else but behaves like every Kubernetes component):
 *   - the lease is GET; absent -> POST it with us as holder; present -> it may be taken when
 *     its holderIdentity is empty or ours, or when its record has not changed for its
 *     leaseDurationSeconds as measured on OUR monotonic clock since we first saw that record
 *     (never by comparing its renewTime with our wall clock: clocks of two nodes differ);
 *   - taking it is a PUT carrying the metadata.resourceVersion we read; a 409 means another
 *     replica wrote first: we are not leader and read the lease again at the next attempt;
 *   - taking over from another holder increments leaseTransitions and sets acquireTime;
 *   - the leader renews (PUT renewTime) every retry period; when no renewal succeeded for
 *     renew-deadline it steps down; kq_leader_is_leader() also turns false on its own at
 *     that deadline (monotonic clock), even while a request hangs, so nothing acts after
 *     its lease could have expired (renew-deadline < lease-duration);
 *   - a replica that sees another holder in the lease steps down at once;
 *   - kq_leader_stop() releases a lease we hold (holderIdentity "", leaseDurationSeconds 1,
 *     renewTime now), so another replica takes over at its next attempt.
 * A replica that lost the lease keeps trying to acquire it again.
 * Times are MicroTime: RFC 3339, UTC, six fractional digits ("2026-11-21T10:15:03.654321Z").
 *
 * Threads: one elector thread does all HTTP; it holds no lock across a request. The
 * callbacks run on that thread, except the on_stopped_leading of kq_leader_stop(), which
 * runs on the stopping thread; they must return quickly (a slow callback delays renewals)
 * and must not call kq_leader_stop. Callers should not rely on the callbacks to stop
 * acting: kq_leader_is_leader() is the authority. kq_leader_is_leader(), _acts(),
 * _identity() and _holder() may be called from any thread; is_leader is two atomic loads
 * and a clock read. A caller that acts after is_leader returned true has at most
 * lease-duration - renew-deadline (5 s by default) before another replica may lead.
 *
 * Logs: event=leader_election_started, leader_acquired, leader_lost, leader_released,
 * leader_observed (another holder seen), each with lease=NS/NAME and holder=IDENTITY.
 */
#ifndef KUBEQUOTA_LEADER_H
#define KUBEQUOTA_LEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "kubequota/error.h"
#include "kubequota/kube.h"

typedef struct kq_leader kq_leader_t;

/* One API request, like kq_kube_request (tests replace it with a fake API server). */
typedef int (*kq_leader_request_fn)(void *ud, const char *method, const char *path,
                                    const char *content_type, const char *body, kq_kube_resp_t *resp);

typedef struct kq_leader_opts {
    const char *namespace;       /* lease namespace (DNS label), required */
    const char *name;            /* lease name (DNS subdomain), required */
    const char *identity;        /* this replica's holderIdentity, required, unique per process */
    long lease_duration_ms;      /* 15000: how long others wait before taking over */
    long renew_deadline_ms;      /* 10000: the leader steps down after this long without renewal */
    long retry_period_ms;        /* 2000: between attempts (acquire attempts get up to +120% jitter) */
    void (*on_started_leading)(void *ud);   /* may be NULL */
    void (*on_stopped_leading)(void *ud);   /* may be NULL; always after on_started_leading */
    void *ud;
    kq_leader_request_fn request; /* NULL: kq_kube_request on the kube given to start */
    void *request_ud;
} kq_leader_opts_t;

/* Defaults: 15 s / 10 s / 2 s (kube-scheduler's); strings and callbacks NULL. */
void kq_leader_opts_default(kq_leader_opts_t *o);

/* Checks options the way client-go does: namespace, name and identity set (namespace and
 * name lower-case DNS names), every duration > 0, lease_duration > renew_deadline >
 * 1.2 * retry_period. 0, or KQ_EINVAL with the reason in err. */
int kq_leader_opts_check(const kq_leader_opts_t *o, char *err, size_t errlen) KQ_WUR;

/* Starts the elector thread (copies the options' strings). kube is borrowed and must
 * outlive the elector; it may be NULL when o->request is set. Each request is bounded by
 * kube's request timeout: give the elector a client whose request_timeout_ms is at most
 * renew_deadline_ms (kube-scheduler does the same). NULL when the options are invalid
 * (logged) or on ENOMEM. */
kq_leader_t *kq_leader_start(kq_kube_t *kube, const kq_leader_opts_t *o);

/* True while this replica holds the lease and its last renewal is younger than the renew
 * deadline (monotonic clock). Cheap; any thread. NULL -> false. */
bool kq_leader_is_leader(kq_leader_t *l);

/* For option structs that take `bool (*is_leader)(void *ud)` (metering): true when leader
 * is NULL (election off: the only replica acts) or when kq_leader_is_leader(leader). */
bool kq_leader_acts(void *leader);

/* This replica's identity (owned by l). */
const char *kq_leader_identity(kq_leader_t *l);

/* Copies the holder of the lease as last observed ("" when none or not yet read) into buf.
 * Any thread. */
void kq_leader_holder(kq_leader_t *l, char *buf, size_t len);

/* How many times this replica became leader (for metrics and tests). Any thread. */
unsigned long kq_leader_acquisitions(kq_leader_t *l);

/* Stops the thread (waits for a request in flight, bounded by the request timeout); if we
 * lead, calls on_stopped_leading first; then, if the lease last seen names us, releases it
 * (a PUT with its resourceVersion; on a 409 the lease is read again and released only if
 * it still names us). Frees. NULL is a no-op. */
void kq_leader_stop(kq_leader_t *l);

/* ---- helpers for main and tests ---- */

/* Go-style duration: one or more <number><unit> with unit h, m, s, ms (number may have a
 * fraction: "1.5s"), e.g. "15s", "1500ms", "1m30s". 0 with *ms set (> 0, <= 1 day),
 * KQ_EINVAL otherwise (*ms untouched). */
int kq_leader_parse_duration(const char *s, long *ms) KQ_WUR;

/* "<hostname>_<random UUID v4>" into buf (like kube-scheduler's identity). 0, KQ_ERANGE
 * when buf is too small, KQ_EIO when no randomness is available. */
int kq_leader_default_identity(char *buf, size_t len) KQ_WUR;

/* A CLOCK_REALTIME instant as MicroTime ("2026-11-21T10:15:03.654321Z"); needs 28 bytes.
 * 0 or KQ_ERANGE. */
int kq_leader_format_microtime(const struct timespec *ts, char *buf, size_t len) KQ_WUR;

#endif
