/* Leader election on a coordination.k8s.io/v1 Lease: one elector thread acquires, renews
 * and (on stop) releases the lease; kq_leader_is_leader() tells reclaim and metering
 * whether they may act. The protocol is described in include/kubequota/leader.h.
 *
 * DESIGN
 * Threads: the elector thread does every request; kq_leader_stop() joins it and then does
 * the release on the caller's thread, so the lease state below is never shared.
 * State:
 *   - thread-only: the last lease object read or written (its resourceVersion is what the
 *     next PUT carries), the observed record (serialized spec, holder, duration,
 *     transitions, acquireTime) and the monotonic instant it was first seen;
 *   - atomics read by any thread: `leading` and `valid_until_ns`, the monotonic instant at
 *     which leadership lapses (the send time of the last successful write + renew deadline);
 *   - under `mu`: `stopping` (with a CLOCK_MONOTONIC condition variable so stop wakes the
 *     thread at once) and a copy of the observed holder for kq_leader_holder().
 * No lock is held across a request or a callback.
 * Invariants:
 *   - is_leader is true only while leading && now < valid_until_ns, so a leader stuck in a
 *     request stops counting as leader at the renew deadline, before its lease (whose
 *     duration is longer) can have expired for anyone else;
 *   - on_stopped_leading is called exactly once after each on_started_leading;
 *   - another replica's lease is taken only when its holder is empty, or when its record has
 *     not changed for its leaseDurationSeconds on our monotonic clock.
 * A streak of errors from the API server is logged at warn once (and every 50th time), the
 * rest at debug, until an attempt succeeds.
 */
#include "kubequota/leader.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#include "kubequota/log.h"

#define LEASE_API "/apis/coordination.k8s.io/v1"
#define HOLDER_COPY 256         /* bytes of the holder copy kept for kq_leader_holder() */
#define MAX_DURATION_MS 86400000L

struct kq_leader {
    kq_kube_t *kube;
    kq_leader_request_fn request;
    void *request_ud;
    char *ns, *name, *identity, *label; /* label: "ns/name" for logs */
    char *coll_path, *item_path;
    long dur_ms, deadline_ms, retry_ms;
    int dur_s; /* leaseDurationSeconds we write: the duration rounded up to whole seconds */
    void (*started)(void *ud);
    void (*stopped)(void *ud);
    void *ud;

    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stopping;               /* under mu */
    char holder[HOLDER_COPY];    /* under mu */

    atomic_bool leading;
    atomic_llong valid_until_ns;
    atomic_ulong acquisitions;

    /* elector thread only (kq_leader_stop after the join) */
    json_t *lease;               /* last lease object seen, or NULL */
    char *obs_raw;               /* its spec, serialized with sorted keys */
    char *obs_holder;            /* its holderIdentity ("" when none) */
    char *obs_acquire;           /* its acquireTime, or NULL */
    long long obs_transitions;
    long long obs_dur_ms;        /* its leaseDurationSeconds in ms (ours when absent) */
    long long obs_ns;            /* monotonic instant the record was first seen */
    unsigned long fail_streak; /* failures since the last success (log rate limit) */
    uint64_t rng;
};

/* ======================================================================================
 * small helpers
 * ====================================================================================== */

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void now_micro(char *buf, size_t len)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (kq_leader_format_microtime(&ts, buf, len) != 0)
        snprintf(buf, len, "1970-01-01T00:00:00.000000Z");
}

/* A copy of untrusted text fit for a quoted log value: printable ASCII except '"' and '\\',
 * at most len - 1 bytes. */
static const char *log_safe(const char *s, char *buf, size_t len)
{
    size_t j = 0;
    for (size_t i = 0; s != NULL && s[i] != '\0' && j + 1 < len; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[j++] = (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '?';
    }
    buf[j] = '\0';
    return buf;
}

static uint64_t next_rand(kq_leader_t *l)
{
    /* xorshift64*: jitter only, no security purpose */
    uint64_t x = l->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    l->rng = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* asprintf that yields NULL on failure. */
static char *dup_printf(const char *fmt, ...) KQ_PRINTF(1, 2);
static char *dup_printf(const char *fmt, ...)
{
    char *out = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&out, fmt, ap) < 0)
        out = NULL;
    va_end(ap);
    return out;
}

static bool dns_name(const char *s, size_t max, bool dots)
{
    size_t n = s ? strlen(s) : 0;
    if (n == 0 || n > max || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '-' || (dots && c == '.')))
            return false;
    }
    return true;
}

/* Waits up to ms or until stop; true when stopping. */
static bool sleep_or_stop(kq_leader_t *l, long ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    long long ns = ts.tv_nsec + (ms % 1000) * 1000000LL;
    ts.tv_sec += ms / 1000 + ns / 1000000000LL;
    ts.tv_nsec = ns % 1000000000LL;
    pthread_mutex_lock(&l->mu);
    while (!l->stopping) {
        if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
            break;
    }
    bool stop = l->stopping;
    pthread_mutex_unlock(&l->mu);
    return stop;
}

static bool stopping(kq_leader_t *l)
{
    pthread_mutex_lock(&l->mu);
    bool s = l->stopping;
    pthread_mutex_unlock(&l->mu);
    return s;
}

/* Logs a failure: the first of a streak (and every 50th) at warn, the others at debug, so
 * an API server that stays down does not flood the log. */
static void note_error(kq_leader_t *l, const char *fmt, ...) KQ_PRINTF(2, 3);
static void note_error(kq_leader_t *l, const char *fmt, ...)
{
    char text[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    unsigned long n = ++l->fail_streak;
    int level = n == 1 || n % 50 == 0 ? KQ_LOG_WARN : KQ_LOG_DEBUG;
    KQ_LOG(level, "event=leader_error lease=%s identity=%s leading=%s failures=%lu error=\"%s\"", l->label,
           l->identity, atomic_load(&l->leading) ? "true" : "false", n, text);
}

/* "HTTP 403: <Status message>" for an unexpected answer (message made log-safe). */
static void note_http(kq_leader_t *l, const char *what, const kq_kube_resp_t *r)
{
    char msg[160] = "";
    json_t *st = r->body ? json_loadb(r->body, r->len, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(st, "message"));
    log_safe(m, msg, sizeof(msg));
    json_decref(st);
    note_error(l, "%s: HTTP %ld%s%s", what, r->status, msg[0] ? ": " : "", msg);
}

static int do_request(kq_leader_t *l, const char *method, const char *path, const char *body,
                      kq_kube_resp_t *resp)
{
    *resp = (kq_kube_resp_t){0};
    const char *ct = body ? "application/json" : NULL;
    if (l->request != NULL)
        return l->request(l->request_ud, method, path, ct, body, resp);
    return kq_kube_request(l->kube, method, path, ct, body, resp);
}

/* ======================================================================================
 * the lease record
 * ====================================================================================== */

/* A lease object from a response body: a JSON object with metadata.resourceVersion, whose
 * spec (when present) is an object. New reference or NULL. */
static json_t *parse_lease(const kq_kube_resp_t *r)
{
    if (r->body == NULL)
        return NULL;
    json_t *o = json_loadb(r->body, r->len, 0, NULL);
    json_t *md = json_object_get(o, "metadata"), *spec = json_object_get(o, "spec");
    if (!json_is_object(o) || !json_is_string(json_object_get(md, "resourceVersion")) ||
        (spec != NULL && !json_is_object(spec) && !json_is_null(spec))) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A lease to write: a copy of base (keeping its metadata, resourceVersion included, and any
 * spec fields we do not manage) or a new one, with our record in spec. New reference. */
static json_t *lease_with_record(kq_leader_t *l, const json_t *base, const char *holder, int dur_s,
                                 const char *acquire, const char *renew, long long transitions)
{
    json_t *o = base ? json_deep_copy(base) : json_object();
    json_t *spec = json_object();
    if (o == NULL || spec == NULL)
        goto fail;
    json_t *old = json_object_get(o, "spec");
    if (json_is_object(old) && json_object_update(spec, old) != 0)
        goto fail;
    if (json_object_set_new(spec, "holderIdentity", json_string(holder)) != 0 ||
        json_object_set_new(spec, "leaseDurationSeconds", json_integer(dur_s)) != 0 ||
        json_object_set_new(spec, "acquireTime", json_string(acquire)) != 0 ||
        json_object_set_new(spec, "renewTime", json_string(renew)) != 0 ||
        json_object_set_new(spec, "leaseTransitions", json_integer(transitions)) != 0 ||
        json_object_set_new(o, "apiVersion", json_string("coordination.k8s.io/v1")) != 0 ||
        json_object_set_new(o, "kind", json_string("Lease")) != 0)
        goto fail;
    if (base == NULL) {
        json_t *md = json_pack("{s:s,s:s}", "name", l->name, "namespace", l->ns);
        if (md == NULL || json_object_set_new(o, "metadata", md) != 0)
            goto fail;
    }
    if (json_object_set_new(o, "spec", spec) != 0) {
        spec = NULL;
        goto fail;
    }
    return o;
fail:
    json_decref(spec);
    json_decref(o);
    return NULL;
}

/* Remembers lease (takes the reference) as the latest object; when its record differs from
 * the one observed before, the observation clock restarts. */
static void observe(kq_leader_t *l, json_t *lease)
{
    json_t *spec = json_object_get(lease, "spec");
    char *raw = json_dumps(json_is_object(spec) ? spec : json_null(), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    json_decref(l->lease);
    l->lease = lease;
    if (raw != NULL && l->obs_raw != NULL && strcmp(raw, l->obs_raw) == 0) {
        free(raw);
        return;
    }
    free(l->obs_raw);
    l->obs_raw = raw; /* NULL on ENOMEM: the next read counts as a change, which only delays a takeover */
    l->obs_ns = mono_ns();

    const char *holder = json_string_value(json_object_get(spec, "holderIdentity"));
    const char *acquire = json_string_value(json_object_get(spec, "acquireTime"));
    json_t *dur = json_object_get(spec, "leaseDurationSeconds");
    json_t *tr = json_object_get(spec, "leaseTransitions");
    long long d = json_is_integer(dur) ? json_integer_value(dur) : 0;
    l->obs_dur_ms = d > 0 && d <= MAX_DURATION_MS / 1000 ? d * 1000 : l->dur_ms;
    l->obs_transitions = json_is_integer(tr) && json_integer_value(tr) >= 0 ? json_integer_value(tr) : 0;

    char *nh = strdup(holder ? holder : "");
    char *na = acquire ? strdup(acquire) : NULL;
    bool changed = nh == NULL || l->obs_holder == NULL || strcmp(nh, l->obs_holder) != 0;
    free(l->obs_holder);
    free(l->obs_acquire);
    l->obs_holder = nh;
    l->obs_acquire = na;
    pthread_mutex_lock(&l->mu);
    snprintf(l->holder, sizeof(l->holder), "%s", nh ? nh : "");
    pthread_mutex_unlock(&l->mu);
    if (changed && nh != NULL && nh[0] != '\0' && strcmp(nh, l->identity) != 0) {
        char safe[160];
        kq_info("event=leader_observed lease=%s holder=\"%s\" identity=%s", l->label,
                log_safe(nh, safe, sizeof(safe)), l->identity);
    }
}

static bool holder_is_us(const kq_leader_t *l)
{
    return l->obs_holder != NULL && strcmp(l->obs_holder, l->identity) == 0;
}

/* PUT (base != NULL: item path) or POST (create) of lease; 0 with *status, or a transport
 * error. On 200/201 the answer (or, unparseable, nothing) becomes the observed lease. */
static int write_lease(kq_leader_t *l, json_t *lease, bool create, long *status)
{
    kq_kube_resp_t r = {0};
    *status = 0;
    char *text = lease ? json_dumps(lease, JSON_COMPACT) : NULL;
    if (text == NULL)
        return KQ_ENOMEM;
    int rc = do_request(l, create ? "POST" : "PUT", create ? l->coll_path : l->item_path, text, &r);
    free(text);
    if (rc != 0)
        goto out;
    *status = r.status;
    if (r.status == 200 || r.status == 201) {
        json_t *got = parse_lease(&r);
        if (got != NULL) {
            observe(l, got);
        } else {
            /* written, but we cannot tell its new resourceVersion: keep our record so the
             * holder is known, and drop the object so the next write reads first */
            json_incref(lease);
            observe(l, lease);
            json_decref(l->lease);
            l->lease = NULL;
        }
    } else if (r.status != 409) {
        note_http(l, create ? "create lease" : "update lease", &r);
    }
out:
    kq_kube_resp_free(&r);
    return rc;
}

/* ======================================================================================
 * transitions
 * ====================================================================================== */

static void become_leader(kq_leader_t *l, long long valid_until)
{
    atomic_store(&l->valid_until_ns, valid_until);
    if (atomic_exchange(&l->leading, true))
        return;
    atomic_fetch_add(&l->acquisitions, 1);
    kq_info("event=leader_acquired lease=%s holder=%s transitions=%lld", l->label, l->identity,
            l->obs_transitions);
    if (l->started != NULL)
        l->started(l->ud);
}

static void step_down(kq_leader_t *l, const char *reason)
{
    if (!atomic_exchange(&l->leading, false))
        return;
    atomic_store(&l->valid_until_ns, 0);
    kq_warn("event=leader_lost lease=%s holder=%s reason=\"%s\"", l->label, l->identity, reason);
    if (l->stopped != NULL)
        l->stopped(l->ud);
}

/* One attempt, as client-go's tryAcquireOrRenew: true when we hold the lease afterwards. */
static bool try_acquire_or_renew(kq_leader_t *l)
{
    long long t0 = mono_ns();
    char now[32], reason[200];
    bool ok = false;
    long status = 0;
    int rc;
    json_t *want = NULL;
    kq_kube_resp_t r = {0};
    now_micro(now, sizeof(now));

    /* 1. the leader renews optimistically with the resourceVersion of its last write */
    if (atomic_load(&l->leading) && l->lease != NULL && holder_is_us(l)) {
        want = lease_with_record(l, l->lease, l->identity, l->dur_s, l->obs_acquire ? l->obs_acquire : now, now,
                                 l->obs_transitions);
        rc = write_lease(l, want, false, &status);
        json_decref(want);
        want = NULL;
        if (rc == 0 && status == 200) {
            ok = true;
            goto out;
        }
        if (rc != 0)
            note_error(l, "renew lease: %s", kq_strerror(rc));
        else if (status == 409)
            kq_debug("event=leader_renew_conflict lease=%s identity=%s msg=\"reading the lease again\"", l->label,
                     l->identity);
        if (rc != 0 && rc != KQ_ENOMEM)
            goto out; /* the API server is unreachable: reading would fail the same way */
    }

    /* 2. read it, or create it */
    rc = do_request(l, "GET", l->item_path, NULL, &r);
    if (rc != 0) {
        note_error(l, "get lease: %s", kq_strerror(rc));
        goto out;
    }
    if (r.status == 404) {
        want = lease_with_record(l, NULL, l->identity, l->dur_s, now, now, 0);
        rc = write_lease(l, want, true, &status);
        if (rc != 0)
            note_error(l, "create lease: %s", kq_strerror(rc));
        else if (status == 409)
            kq_info("event=leader_conflict lease=%s identity=%s msg=\"another replica created the lease first\"",
                    l->label, l->identity);
        ok = rc == 0 && (status == 201 || status == 200);
        goto out;
    }
    if (r.status != 200) {
        note_http(l, "get lease", &r);
        goto out;
    }
    json_t *cur = parse_lease(&r);
    if (cur == NULL) {
        note_error(l, "get lease: the answer is not a Lease object with metadata.resourceVersion");
        goto out;
    }
    observe(l, cur);

    /* 3. someone else's: wait until it has not changed for its duration */
    if (l->obs_holder != NULL && l->obs_holder[0] != '\0' && !holder_is_us(l)) {
        char safe[160];
        snprintf(reason, sizeof(reason), "the lease is held by %s",
                 log_safe(l->obs_holder, safe, sizeof(safe)));
        step_down(l, reason);
        if (mono_ns() - l->obs_ns < l->obs_dur_ms * 1000000LL)
            goto out;
        kq_info("event=leader_takeover lease=%s identity=%s previous=\"%s\" msg=\"the lease expired\"", l->label,
                l->identity, safe);
    }

    /* 4. take it (transitions + 1 when it changes hands) or renew it */
    if (holder_is_us(l))
        want = lease_with_record(l, l->lease, l->identity, l->dur_s, l->obs_acquire ? l->obs_acquire : now, now,
                                 l->obs_transitions);
    else
        want = lease_with_record(l, l->lease, l->identity, l->dur_s, now, now, l->obs_transitions + 1);
    rc = write_lease(l, want, false, &status);
    if (rc != 0)
        note_error(l, "update lease: %s", kq_strerror(rc));
    else if (status == 409)
        kq_info("event=leader_conflict lease=%s identity=%s msg=\"another replica updated the lease first\"",
                l->label, l->identity);
    ok = rc == 0 && status == 200;

out:
    json_decref(want);
    kq_kube_resp_free(&r);
    if (ok) {
        if (l->fail_streak > 0)
            kq_info("event=leader_recovered lease=%s identity=%s failures=%lu", l->label, l->identity,
                    l->fail_streak);
        l->fail_streak = 0;
        become_leader(l, t0 + l->deadline_ms * 1000000LL);
    }
    return ok;
}

static void *elector(void *arg)
{
    kq_leader_t *l = arg;
    kq_info("event=leader_election_started lease=%s identity=%s lease_duration_ms=%ld renew_deadline_ms=%ld "
            "retry_period_ms=%ld",
            l->label, l->identity, l->dur_ms, l->deadline_ms, l->retry_ms);
    while (!stopping(l)) {
        bool ok = try_acquire_or_renew(l);
        if (!ok && atomic_load(&l->leading) && mono_ns() >= atomic_load(&l->valid_until_ns)) {
            char reason[96];
            snprintf(reason, sizeof(reason), "no renewal succeeded within the renew deadline (%ld ms)",
                     l->deadline_ms);
            step_down(l, reason);
        }
        long wait = l->retry_ms;
        if (!atomic_load(&l->leading)) /* spread the candidates' attempts, like client-go's jitter 1.2 */
            wait += (long)(next_rand(l) % (uint64_t)(l->retry_ms * 6 / 5 + 1));
        if (sleep_or_stop(l, wait))
            break;
    }
    return NULL;
}

/* Gives the lease up (called after the thread has stopped). */
static void release(kq_leader_t *l)
{
    for (int attempt = 0; attempt < 2 && l->lease != NULL && holder_is_us(l); attempt++) {
        char now[32];
        now_micro(now, sizeof(now));
        json_t *want = lease_with_record(l, l->lease, "", 1, now, now, l->obs_transitions);
        long status = 0;
        int rc = write_lease(l, want, false, &status);
        json_decref(want);
        if (rc == 0 && status == 200) {
            kq_info("event=leader_released lease=%s holder=%s", l->label, l->identity);
            return;
        }
        if (rc != 0 || status != 409) {
            kq_warn("event=leader_release_failed lease=%s holder=%s error=\"%s\" msg=\"another replica takes "
                    "over when the lease expires\"",
                    l->label, l->identity, rc != 0 ? kq_strerror(rc) : "unexpected HTTP status");
            return;
        }
        /* 409: read it again; release only if it still names us */
        kq_kube_resp_t r = {0};
        json_t *cur = NULL;
        if (do_request(l, "GET", l->item_path, NULL, &r) == 0 && r.status == 200)
            cur = parse_lease(&r);
        kq_kube_resp_free(&r);
        if (cur == NULL)
            return;
        observe(l, cur);
    }
}

/* ======================================================================================
 * public API
 * ====================================================================================== */

void kq_leader_opts_default(kq_leader_opts_t *o)
{
    *o = (kq_leader_opts_t){
        .lease_duration_ms = 15000,
        .renew_deadline_ms = 10000,
        .retry_period_ms = 2000,
    };
}

int kq_leader_opts_check(const kq_leader_opts_t *o, char *err, size_t errlen)
{
    const char *why = NULL;
    char buf[160];
    if (o == NULL)
        why = "no options";
    else if (!dns_name(o->namespace, 63, false))
        why = "the lease namespace must be a lower-case DNS label (a-z, 0-9, '-', at most 63 characters)";
    else if (!dns_name(o->name, 253, true))
        why = "the lease name must be a lower-case DNS subdomain (a-z, 0-9, '-', '.', at most 253 characters)";
    else if (o->identity == NULL || o->identity[0] == '\0' || strlen(o->identity) > 253)
        why = "the identity must be 1 to 253 characters";
    else if (o->lease_duration_ms <= 0 || o->renew_deadline_ms <= 0 || o->retry_period_ms <= 0 ||
             o->lease_duration_ms > MAX_DURATION_MS)
        why = "lease duration, renew deadline and retry period must be positive (and at most a day)";
    else if (o->lease_duration_ms <= o->renew_deadline_ms) {
        snprintf(buf, sizeof(buf), "the lease duration (%ld ms) must be longer than the renew deadline (%ld ms)",
                 o->lease_duration_ms, o->renew_deadline_ms);
        why = buf;
    } else if (o->renew_deadline_ms * 5 <= o->retry_period_ms * 6) {
        snprintf(buf, sizeof(buf), "the renew deadline (%ld ms) must be longer than 1.2 x the retry period (%ld ms)",
                 o->renew_deadline_ms, o->retry_period_ms);
        why = buf;
    } else {
        for (const char *p = o->identity; *p; p++)
            if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e || *p == '"' || *p == '\\') {
                why = "the identity must be printable ASCII without spaces, quotes or backslashes";
                break;
            }
    }
    if (why == NULL)
        return 0;
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "leader election: %s", why);
    return KQ_EINVAL;
}

static void leader_free(kq_leader_t *l)
{
    json_decref(l->lease);
    free(l->obs_raw);
    free(l->obs_holder);
    free(l->obs_acquire);
    free(l->ns);
    free(l->name);
    free(l->identity);
    free(l->label);
    free(l->coll_path);
    free(l->item_path);
    free(l);
}

kq_leader_t *kq_leader_start(kq_kube_t *kube, const kq_leader_opts_t *o)
{
    char err[256];
    if (kq_leader_opts_check(o, err, sizeof(err)) != 0) {
        kq_error("event=leader_election_invalid msg=\"%s\"", err);
        return NULL;
    }
    if (kube == NULL && o->request == NULL) {
        kq_error("event=leader_election_invalid msg=\"leader election: no API client\"");
        return NULL;
    }
    kq_leader_t *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return NULL;
    l->kube = kube;
    l->request = o->request;
    l->request_ud = o->request_ud;
    l->dur_ms = o->lease_duration_ms;
    l->deadline_ms = o->renew_deadline_ms;
    l->retry_ms = o->retry_period_ms;
    l->dur_s = (int)((o->lease_duration_ms + 999) / 1000);
    l->started = o->on_started_leading;
    l->stopped = o->on_stopped_leading;
    l->ud = o->ud;
    atomic_init(&l->leading, false);
    atomic_init(&l->valid_until_ns, 0);
    atomic_init(&l->acquisitions, 0);
    l->ns = strdup(o->namespace);
    l->name = strdup(o->name);
    l->identity = strdup(o->identity);
    l->label = dup_printf("%s/%s", o->namespace, o->name);
    l->coll_path = dup_printf(LEASE_API "/namespaces/%s/leases", o->namespace);
    l->item_path = dup_printf(LEASE_API "/namespaces/%s/leases/%s", o->namespace, o->name);
    if (l->ns == NULL || l->name == NULL || l->identity == NULL || l->label == NULL || l->coll_path == NULL ||
        l->item_path == NULL) {
        leader_free(l);
        return NULL;
    }
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = (uint64_t)mono_ns() ^ (uint64_t)(uintptr_t)l;
    l->rng = seed | 1;

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int e1 = pthread_mutex_init(&l->mu, NULL);
    int e2 = pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (e1 != 0 || e2 != 0) {
        if (e1 == 0)
            pthread_mutex_destroy(&l->mu);
        if (e2 == 0)
            pthread_cond_destroy(&l->cv);
        leader_free(l);
        return NULL;
    }
    if (pthread_create(&l->thread, NULL, elector, l) != 0) {
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        leader_free(l);
        return NULL;
    }
    return l;
}

bool kq_leader_is_leader(kq_leader_t *l)
{
    if (l == NULL || !atomic_load(&l->leading))
        return false;
    return mono_ns() < atomic_load(&l->valid_until_ns);
}

bool kq_leader_acts(void *leader)
{
    return leader == NULL || kq_leader_is_leader(leader);
}

const char *kq_leader_identity(kq_leader_t *l)
{
    return l ? l->identity : NULL;
}

void kq_leader_holder(kq_leader_t *l, char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    buf[0] = '\0';
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    snprintf(buf, len, "%s", l->holder);
    pthread_mutex_unlock(&l->mu);
}

unsigned long kq_leader_acquisitions(kq_leader_t *l)
{
    return l ? atomic_load(&l->acquisitions) : 0;
}

void kq_leader_stop(kq_leader_t *l)
{
    if (l == NULL)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);

    /* Stop acting first, then let the lease go. */
    if (atomic_exchange(&l->leading, false)) {
        atomic_store(&l->valid_until_ns, 0);
        kq_info("event=leader_stopping lease=%s holder=%s", l->label, l->identity);
        if (l->stopped != NULL)
            l->stopped(l->ud);
    }
    release(l);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    leader_free(l);
}

/* ======================================================================================
 * helpers for main and tests
 * ====================================================================================== */

int kq_leader_parse_duration(const char *s, long *ms)
{
    static const struct {
        const char *unit;
        long long ms;
    } units[] = {{"ms", 1}, {"h", 3600000}, {"m", 60000}, {"s", 1000}};
    if (s == NULL || *s == '\0')
        return KQ_EINVAL;
    long long total_us = 0; /* microseconds, so "1.5ms" rounds to whole ms only at the end */
    const char *p = s;
    while (*p != '\0') {
        long long ip = 0, frac = 0, scale = 1;
        int digits = 0;
        while (isdigit((unsigned char)*p)) {
            if (ip > MAX_DURATION_MS)
                return KQ_EINVAL;
            ip = ip * 10 + (*p++ - '0');
            digits++;
        }
        if (*p == '.') {
            p++;
            while (isdigit((unsigned char)*p)) {
                if (scale < 1000000) { /* digits beyond micro precision are ignored */
                    frac = frac * 10 + (*p - '0');
                    scale *= 10;
                }
                p++;
                digits++;
            }
        }
        if (digits == 0)
            return KQ_EINVAL;
        size_t u = 0, n = sizeof(units) / sizeof(units[0]);
        for (; u < n; u++)
            if (strncmp(p, units[u].unit, strlen(units[u].unit)) == 0)
                break;
        if (u == n)
            return KQ_EINVAL;
        p += strlen(units[u].unit);
        long long unit_us = units[u].ms * 1000;
        total_us += ip * unit_us + frac * unit_us / scale;
        if (total_us > (long long)MAX_DURATION_MS * 1000)
            return KQ_EINVAL;
    }
    if (total_us < 1000)
        return KQ_EINVAL;
    *ms = (long)(total_us / 1000);
    return 0;
}

int kq_leader_default_identity(char *buf, size_t len)
{
    char host[256];
    unsigned char r[16];
    if (gethostname(host, sizeof(host)) != 0 || host[0] == '\0')
        snprintf(host, sizeof(host), "kubequota");
    host[sizeof(host) - 1] = '\0';
    size_t got = 0;
    while (got < sizeof(r)) {
        ssize_t n = getrandom(r + got, sizeof(r) - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return KQ_EIO;
        }
        got += (size_t)n;
    }
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40); /* version 4 */
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80); /* variant 10 */
    char id[320];
    int n = snprintf(id, sizeof(id),
                     "%s_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", host, r[0], r[1],
                     r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14], r[15]);
    if (n < 0 || (size_t)n >= len)
        return KQ_ERANGE;
    memcpy(buf, id, (size_t)n + 1);
    return 0;
}

int kq_leader_format_microtime(const struct timespec *ts, char *buf, size_t len)
{
    struct tm tm;
    char date[32];
    if (ts == NULL || buf == NULL || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000L || ts->tv_sec < 0 ||
        gmtime_r(&ts->tv_sec, &tm) == NULL || tm.tm_year + 1900 > 9999 ||
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm) == 0)
        return KQ_ERANGE;
    char out[48];
    int n = snprintf(out, sizeof(out), "%s.%06ldZ", date, ts->tv_nsec / 1000);
    if (n < 0 || (size_t)n >= len)
        return KQ_ERANGE;
    memcpy(buf, out, (size_t)n + 1);
    return 0;
}
