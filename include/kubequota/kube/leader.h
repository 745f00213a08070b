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
 *     kq_leader_lease_decide() below is that decision, a lease it cannot read is left alone;
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

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/kube/kube.h"

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

/* ---- the lease decision: pure, for the elector, tests and the fuzzer ---- */

/* Largest Lease body kq_leader_lease_decide reads (etcd keeps objects under 1.5 MiB). */
#define KQ_LEADER_LEASE_MAX_BODY (2u << 20)

typedef enum kq_leader_action {
    KQ_LEADER_RENEW,    /* the lease names us: renew it (acquireTime, leaseTransitions kept) */
    KQ_LEADER_ACQUIRE,  /* nobody holds it (holderIdentity empty or absent): take it */
    KQ_LEADER_TAKEOVER, /* another holder's record has not changed for its duration: take it */
    KQ_LEADER_WAIT,     /* another holder's lease is still valid: leave it alone */
} kq_leader_action_t;

/* What the decision needs besides the body. Borrowed, read only during the call. */
typedef struct kq_leader_lease_in {
    const char *identity;    /* this replica's holderIdentity, required */
    long duration_ms;        /* our lease duration, 1 ms .. 1 day: written as leaseDurationSeconds
                              * rounded up to whole seconds, and assumed for a lease whose
                              * leaseDurationSeconds is absent, null or <= 0 */
    const char *now_time;    /* wall-clock now as MicroTime: the renewTime we write, and the
                              * acquireTime when we take the lease (see format_microtime) */
    long long now_ns;        /* monotonic now (any origin, any value) */
    const char *prev_record; /* out->record of the previous decision on this lease, or NULL */
    long long prev_seen_ns;  /* out->seen_ns of that decision */
} kq_leader_lease_in_t;

/* The answer; every pointer is owned by it (kq_leader_decision_free). */
typedef struct kq_leader_decision {
    kq_leader_action_t action;
    char *holder;            /* holderIdentity read, "" when none */
    char *resource_version;  /* metadata.resourceVersion read (never empty) */
    char *record;            /* the spec in canonical form: the next call's prev_record */
    bool changed;            /* record differs from in->prev_record (true when that is NULL) */
    long long seen_ns;       /* monotonic instant the record was first seen: in->prev_seen_ns
                              * when unchanged, else in->now_ns */
    long long duration_ms;   /* leaseDurationSeconds (1 .. 2^31-1 s) in ms, or in->duration_ms */
    long long expires_ns;    /* seen_ns + duration_ms, saturated at LLONG_MAX: another holder's
                              * lease is respected while now_ns - seen_ns (saturated) is less
                              * than duration_ms, i.e. until expires_ns unless it saturated */
    long long transitions;   /* leaseTransitions read (0 when absent or negative) */
    bool has_acquire_time, has_renew_time;
    struct timespec acquire_time, renew_time; /* as read (the holder's wall clock: informative,
                                               * never compared with ours) */
    char *body;              /* the Lease to PUT (compact JSON) for RENEW, ACQUIRE and TAKEOVER;
                              * NULL for WAIT. A copy of the object read (metadata with its
                              * resourceVersion, unknown fields kept) whose spec names us, with
                              * leaseDurationSeconds ours, renewTime now_time; RENEW keeps
                              * acquireTime (now_time when it had none) and leaseTransitions;
                              * ACQUIRE and TAKEOVER set acquireTime now_time and
                              * leaseTransitions + 1 (saturated at 2^31-1) */
    json_t *lease;           /* the object read (json_incref to keep it beyond the decision) */
} kq_leader_decision_t;

/* Reads a Lease body as the API server returns it (untrusted) and decides what this replica
 * may do, without network, clock or thread: the elector calls it on every GET.
 * The body must be a JSON object (kind "Lease" and apiVersion "coordination.k8s.io/v1" when
 * present) with a non-empty string metadata.resourceVersion and a spec that is absent, null
 * or an object whose holderIdentity is a string or null, leaseDurationSeconds and
 * leaseTransitions int32 or null, acquireTime and renewTime MicroTime (as
 * kq_leader_parse_microtime) or null; what client-go would refuse to decode is refused.
 * A lease of another holder expires when its record (spec) has not changed for its duration
 * on OUR monotonic clock: pass back out->record and out->seen_ns as prev_record and
 * prev_seen_ns on the next read. Time arithmetic saturates (no overflow for any now_ns).
 * 0 with *out filled; KQ_EINVAL (bad in), KQ_EPARSE (not a readable Lease), KQ_ETOOBIG
 * (over KQ_LEADER_LEASE_MAX_BODY) or KQ_ENOMEM, with "lease: <why>" in err and *out
 * untouched. */
int kq_leader_lease_decide(const char *body, size_t len, const kq_leader_lease_in_t *in, kq_leader_decision_t *out,
                           char *err, size_t errlen) KQ_WUR;

/* Frees what a decision owns and zeroes it; NULL and a zeroed decision are no-ops. */
void kq_leader_decision_free(kq_leader_decision_t *d);

/* "renew", "acquire", "takeover", "wait" (static). */
const char *kq_leader_action_name(kq_leader_action_t a);

/* Parses a MicroTime (RFC 3339: "YYYY-MM-DDTHH:MM:SS", then optionally "." and 1 to 9
 * digits, then "Z" or "+HH:MM"/"-HH:MM"; years 0000..9999, no leap second 60). 0 with *ts
 * (UTC, may be before 1970; ts may be NULL to validate only); KQ_EPARSE with the reason in
 * err, KQ_ERANGE when time_t cannot hold it; *ts untouched on failure. */
int kq_leader_parse_microtime(const char *s, struct timespec *ts, char *err, size_t errlen) KQ_WUR;

#endif
