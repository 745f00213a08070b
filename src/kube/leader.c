/* Leader election on a coordination.k8s.io/v1 Lease: one elector thread acquires, renews
 * and (on stop) releases the lease; kq_leader_is_leader() tells reclaim and metering
 * whether they may act. The protocol is described in include/kubequota/leader.h.
 *
 * DESIGN
 * Threads: the elector thread does every request; kq_leader_stop() joins it and then does
 * the release on the caller's thread, so the lease state below is never shared.
 * State:
 *   - thread-only: the last lease object read or written (its resourceVersion is what the
 *     next PUT carries), its record (record_t: serialized spec, holder, transitions,
 *     acquireTime) and the monotonic instant that record was first seen;
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
 * What a lease read from the API server means and what to PUT back is decided by
 * kq_leader_lease_decide(), a pure function (body, identity, clocks, previous record in;
 * action and body out) that the elector calls on every GET and fuzz/fuzz_lease.c calls on
 * untrusted bytes; answers to our own writes and the re-read during release go through the
 * same reader (lease_read, record_from, kq_leader_parse_microtime).
 * A streak of errors from the API server is logged at warn once (and every 50th time), the
 * rest at debug, until an attempt succeeds.
 */
#include "kubequota/kube/leader.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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

#include "kubequota/base/log.h"

#define LEASE_API "/apis/coordination.k8s.io/v1"
#define HOLDER_COPY 256         /* bytes of the holder copy kept for kq_leader_holder() */
#define MAX_DURATION_MS 86400000L

/* The record a lease's spec carries, as read and checked by record_from(). */
typedef struct record {
    char *raw;                   /* the spec serialized with sorted keys ("null" when none) */
    char *holder;                /* holderIdentity, "" when none */
    char *acquire;               /* acquireTime as written, NULL when none */
    long long transitions;       /* leaseTransitions, 0 when absent or negative */
    long long dur_ms;            /* leaseDurationSeconds in ms, 0 when absent or <= 0 */
    bool has_acquire, has_renew;
    struct timespec acquire_ts, renew_ts;
} record_t;

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
    record_t obs;                /* its record (all zero when none) */
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
 * MicroTime
 * ====================================================================================== */

/* n decimal digits at s into *v; false when one is not a digit. */
static bool read_digits(const char *s, int n, int *v)
{
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return true;
}

static bool leap_year(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 0000-01-01 to January 1st of year y (0..9999, proleptic Gregorian): 365 a
 * year plus one for each leap year in [0, y). */
static long long days_before_year(int y)
{
    return 365LL * y + (y + 3) / 4 - (y + 99) / 100 + (y + 399) / 400;
}

#define DAYS_0000_TO_1970 719528LL

/* ======================================================================================
 * the lease record
 * ====================================================================================== */

/* "lease: <what>" into err; returns rc. */
static int lease_fail(char *err, size_t errlen, int rc, const char *fmt, ...) KQ_PRINTF(4, 5);
static int lease_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return rc;
    char text[240];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "lease: %s", text);
    return rc;
}

static void record_free(record_t *r)
{
    free(r->raw);
    free(r->holder);
    free(r->acquire);
    *r = (record_t){0};
}

/* A 32-bit integer field of spec (Kubernetes declares these int32): *present false when
 * absent or null. 0 or KQ_EPARSE. */
static int int32_field(const json_t *spec, const char *key, bool *present, long long *v, char *err, size_t errlen)
{
    json_t *j = json_object_get(spec, key);
    *present = false;
    if (j == NULL || json_is_null(j))
        return 0;
    if (!json_is_integer(j))
        return lease_fail(err, errlen, KQ_EPARSE, "spec.%s is not an integer", key);
    json_int_t n = json_integer_value(j);
    if (n < INT32_MIN || n > INT32_MAX)
        return lease_fail(err, errlen, KQ_EPARSE, "spec.%s (%" JSON_INTEGER_FORMAT ") is out of the int32 range", key,
                          n);
    *present = true;
    *v = n;
    return 0;
}

/* A MicroTime field of spec: *present false when absent or null. 0 or KQ_EPARSE. */
static int time_field(const json_t *spec, const char *key, bool *present, struct timespec *ts, char *err,
                      size_t errlen)
{
    json_t *j = json_object_get(spec, key);
    *present = false;
    if (j == NULL || json_is_null(j))
        return 0;
    if (!json_is_string(j))
        return lease_fail(err, errlen, KQ_EPARSE, "spec.%s is not a string", key);
    char why[96], safe[48];
    if (kq_leader_parse_microtime(json_string_value(j), ts, why, sizeof(why)) != 0)
        return lease_fail(err, errlen, KQ_EPARSE, "spec.%s '%s': %s", key,
                          log_safe(json_string_value(j), safe, sizeof(safe)), why);
    *present = true;
    return 0;
}

/* The record in lease's spec (absent or null: an empty record). 0, KQ_EPARSE with the
 * reason in err, or KQ_ENOMEM; *rec is written only on success. */
static int record_from(const json_t *lease, record_t *rec, char *err, size_t errlen)
{
    record_t r = {0};
    int rc;
    bool has_dur = false, has_tr = false;
    long long dur = 0, tr = 0;
    json_t *spec = json_object_get(lease, "spec");
    if (spec != NULL && !json_is_null(spec) && !json_is_object(spec)) {
        rc = lease_fail(err, errlen, KQ_EPARSE, "spec is not an object");
        goto out;
    }
    json_t *holder = json_object_get(spec, "holderIdentity");
    if (holder != NULL && !json_is_null(holder) && !json_is_string(holder)) {
        rc = lease_fail(err, errlen, KQ_EPARSE, "spec.holderIdentity is not a string");
        goto out;
    }
    if ((rc = int32_field(spec, "leaseDurationSeconds", &has_dur, &dur, err, errlen)) != 0 ||
        (rc = int32_field(spec, "leaseTransitions", &has_tr, &tr, err, errlen)) != 0 ||
        (rc = time_field(spec, "acquireTime", &r.has_acquire, &r.acquire_ts, err, errlen)) != 0 ||
        (rc = time_field(spec, "renewTime", &r.has_renew, &r.renew_ts, err, errlen)) != 0)
        goto out;
    r.dur_ms = has_dur && dur > 0 ? dur * 1000 : 0;
    r.transitions = has_tr && tr > 0 ? tr : 0;
    r.raw = json_dumps(json_is_object(spec) ? spec : json_null(), JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    r.holder = strdup(json_is_string(holder) ? json_string_value(holder) : "");
    if (r.has_acquire)
        r.acquire = strdup(json_string_value(json_object_get(spec, "acquireTime")));
    if (r.raw == NULL || r.holder == NULL || (r.has_acquire && r.acquire == NULL)) {
        rc = lease_fail(err, errlen, KQ_ENOMEM, "out of memory");
        goto out;
    }
    *rec = r;
    r = (record_t){0};
out:
    record_free(&r);
    return rc;
}

/* A Lease from an API answer: a JSON object (kind Lease and apiVersion
 * coordination.k8s.io/v1 when given) with a non-empty metadata.resourceVersion and a
 * readable record. 0 with *lease (new reference) and *rec, or KQ_EPARSE / KQ_ETOOBIG /
 * KQ_ENOMEM with the reason in err (outputs untouched). */
static int lease_read(const char *body, size_t len, json_t **lease, record_t *rec, char *err, size_t errlen)
{
    int rc;
    json_t *o = NULL;
    char safe[96];
    if (body == NULL || len == 0) {
        rc = lease_fail(err, errlen, KQ_EPARSE, "empty body");
        goto out;
    }
    if (len > KQ_LEADER_LEASE_MAX_BODY) {
        rc = lease_fail(err, errlen, KQ_ETOOBIG, "the body has %zu bytes, more than %u", len,
                        (unsigned)KQ_LEADER_LEASE_MAX_BODY);
        goto out;
    }
    json_error_t je;
    o = json_loadb(body, len, 0, &je);
    if (o == NULL) {
        rc = lease_fail(err, errlen, KQ_EPARSE, "not JSON: %s (line %d, column %d)",
                        log_safe(je.text, safe, sizeof(safe)), je.line, je.column);
        goto out;
    }
    json_t *kind = json_object_get(o, "kind"), *api = json_object_get(o, "apiVersion");
    json_t *md = json_object_get(o, "metadata");
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    if (!json_is_object(o)) {
        rc = lease_fail(err, errlen, KQ_EPARSE, "not a JSON object");
    } else if (kind != NULL && (!json_is_string(kind) || strcmp(json_string_value(kind), "Lease") != 0)) {
        rc = lease_fail(err, errlen, KQ_EPARSE, "kind is '%s', not Lease",
                        log_safe(json_string_value(kind), safe, sizeof(safe)));
    } else if (api != NULL && (!json_is_string(api) || strcmp(json_string_value(api), "coordination.k8s.io/v1") != 0)) {
        rc = lease_fail(err, errlen, KQ_EPARSE, "apiVersion is '%s', not coordination.k8s.io/v1",
                        log_safe(json_string_value(api), safe, sizeof(safe)));
    } else if (rv == NULL || rv[0] == '\0') {
        /* a PUT without it would overwrite whatever another replica wrote */
        rc = lease_fail(err, errlen, KQ_EPARSE, "metadata.resourceVersion is missing, empty or not a string");
    } else {
        rc = record_from(o, rec, err, errlen);
    }
    if (rc == 0) {
        *lease = o;
        o = NULL;
    }
out:
    json_decref(o);
    return rc;
}

/* A lease to write: a copy of base (keeping its metadata, resourceVersion included, and any
 * spec fields we do not manage) or, without base, a new one named ns/name, with our record
 * in spec. New reference, NULL on ENOMEM. */
static json_t *lease_with_record(const json_t *base, const char *ns, const char *name, const char *holder,
                                 int dur_s, const char *acquire, const char *renew, long long transitions)
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
        json_t *md = json_pack("{s:s,s:s}", "name", name, "namespace", ns);
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

/* leaseDurationSeconds we write for a duration in ms: rounded up to whole seconds. */
static int whole_seconds(long long ms)
{
    return (int)((ms + 999) / 1000);
}

/* The monotonic instant a record was first seen: the previous one's when the record is
 * the same as before (same serialized spec), now otherwise. */
static long long first_seen(const char *prev_raw, long long prev_seen_ns, const char *raw, long long now_ns,
                            bool *changed)
{
    *changed = prev_raw == NULL || raw == NULL || strcmp(prev_raw, raw) != 0;
    return *changed ? now_ns : prev_seen_ns;
}

static long long add_saturated(long long a, long long b)
{
    long long r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? LLONG_MAX : LLONG_MIN;
    return r;
}

/* now - since, saturated (a since in the future gives a negative elapsed time). */
static long long elapsed_saturated(long long now, long long since)
{
    long long r;
    if (__builtin_sub_overflow(now, since, &r))
        return since < 0 ? LLONG_MAX : LLONG_MIN;
    return r;
}

/* Remembers lease (takes the reference; NULL forgets it) as the latest object and rec
 * (takes its strings) as its record; when the record differs from the one observed
 * before, the observation clock restarts at now_ns. */
static void adopt(kq_leader_t *l, json_t *lease, record_t *rec, long long now_ns)
{
    bool changed;
    l->obs_ns = first_seen(l->obs.raw, l->obs_ns, rec->raw, now_ns, &changed);
    bool new_holder = l->obs.holder == NULL || rec->holder == NULL || strcmp(l->obs.holder, rec->holder) != 0;
    json_decref(l->lease);
    l->lease = lease;
    record_free(&l->obs);
    l->obs = *rec;
    *rec = (record_t){0};
    const char *h = l->obs.holder ? l->obs.holder : "";
    pthread_mutex_lock(&l->mu);
    snprintf(l->holder, sizeof(l->holder), "%s", h);
    pthread_mutex_unlock(&l->mu);
    if (new_holder && h[0] != '\0' && strcmp(h, l->identity) != 0) {
        char safe[160];
        kq_info("event=leader_observed lease=%s holder=\"%s\" identity=%s", l->label, log_safe(h, safe, sizeof(safe)),
                l->identity);
    }
}

/* Reads an answer (a GET after a conflict, or what a write returned) and adopts it. 0, or
 * an error with the reason in err (nothing adopted). */
static int adopt_answer(kq_leader_t *l, const kq_kube_resp_t *r, char *err, size_t errlen)
{
    json_t *lease = NULL;
    record_t rec = {0};
    int rc = lease_read(r->body, r->len, &lease, &rec, err, errlen);
    if (rc == 0)
        adopt(l, lease, &rec, mono_ns());
    return rc;
}

static bool holder_is_us(const kq_leader_t *l)
{
    return l->obs.holder != NULL && strcmp(l->obs.holder, l->identity) == 0;
}

/* PUT (item path) or POST (create, collection path) of the lease text; 0 with *status, or
 * a transport error. On 200/201 the answer becomes the observed lease; when it cannot be
 * read, what we sent becomes the observed record (so the holder is known) and the object
 * is forgotten, so the next attempt reads the lease first. */
static int write_lease(kq_leader_t *l, const char *text, bool create, long *status)
{
    kq_kube_resp_t r = {0};
    char why[256];
    *status = 0;
    int rc = do_request(l, create ? "POST" : "PUT", create ? l->coll_path : l->item_path, text, &r);
    if (rc != 0)
        goto out;
    *status = r.status;
    if (r.status == 200 || r.status == 201) {
        if (adopt_answer(l, &r, why, sizeof(why)) != 0) {
            kq_debug("event=leader_write_answer lease=%s identity=%s error=\"%s\"", l->label, l->identity, why);
            json_t *sent = json_loads(text, 0, NULL);
            record_t rec = {0};
            if (sent == NULL || record_from(sent, &rec, NULL, 0) != 0)
                record_free(&rec); /* ENOMEM: an empty record, which only delays a takeover */
            json_decref(sent);
            adopt(l, NULL, &rec, mono_ns());
        }
    } else if (r.status != 409) {
        note_http(l, create ? "create lease" : "update lease", &r);
    }
out:
    kq_kube_resp_free(&r);
    return rc;
}

/* write_lease of a lease object (not consumed); KQ_ENOMEM when it cannot be serialized. */
static int write_object(kq_leader_t *l, const json_t *lease, bool create, long *status)
{
    char *text = lease ? json_dumps(lease, JSON_COMPACT) : NULL;
    *status = 0;
    if (text == NULL)
        return KQ_ENOMEM;
    int rc = write_lease(l, text, create, status);
    free(text);
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
            l->obs.transitions);
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

/* One attempt, as client-go's tryAcquireOrRenew: true when we hold the lease afterwards.
 * What a lease read from the API server means (ours, free, another's still valid or
 * expired) and what to write back is kq_leader_lease_decide's answer. */
static bool try_acquire_or_renew(kq_leader_t *l)
{
    long long t0 = mono_ns();
    char now[32], reason[200], why[256];
    bool ok = false;
    long status = 0;
    int rc;
    json_t *want = NULL;
    kq_kube_resp_t r = {0};
    kq_leader_decision_t d = {0};
    now_micro(now, sizeof(now));

    /* 1. the leader renews optimistically with the resourceVersion of its last write */
    if (atomic_load(&l->leading) && l->lease != NULL && holder_is_us(l)) {
        want = lease_with_record(l->lease, NULL, NULL, l->identity, l->dur_s, l->obs.acquire ? l->obs.acquire : now,
                                 now, l->obs.transitions);
        rc = write_object(l, want, false, &status);
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
        want = lease_with_record(NULL, l->ns, l->name, l->identity, l->dur_s, now, now, 0);
        rc = write_object(l, want, true, &status);
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
    kq_leader_lease_in_t in = {
        .identity = l->identity,
        .duration_ms = l->dur_ms,
        .now_time = now,
        .now_ns = mono_ns(),
        .prev_record = l->obs.raw,
        .prev_seen_ns = l->obs_ns,
    };
    rc = kq_leader_lease_decide(r.body, r.len, &in, &d, why, sizeof(why));
    if (rc != 0) {
        note_error(l, "get lease: %s", why);
        goto out;
    }
    record_t rec = {0};
    if (record_from(d.lease, &rec, why, sizeof(why)) != 0) { /* ENOMEM: the lease was read once already */
        note_error(l, "get lease: %s", why);
        goto out;
    }
    adopt(l, json_incref(d.lease), &rec, in.now_ns);

    /* 3. someone else's: wait until it has not changed for its duration */
    if (d.action == KQ_LEADER_WAIT || d.action == KQ_LEADER_TAKEOVER) {
        char safe[160];
        snprintf(reason, sizeof(reason), "the lease is held by %s", log_safe(d.holder, safe, sizeof(safe)));
        step_down(l, reason);
        if (d.action == KQ_LEADER_WAIT)
            goto out;
        kq_info("event=leader_takeover lease=%s identity=%s previous=\"%s\" msg=\"the lease expired\"", l->label,
                l->identity, safe);
    }

    /* 4. take it (transitions + 1 when it changes hands) or renew it */
    rc = write_lease(l, d.body, false, &status);
    if (rc != 0)
        note_error(l, "update lease: %s", kq_strerror(rc));
    else if (status == 409)
        kq_info("event=leader_conflict lease=%s identity=%s msg=\"another replica updated the lease first\"",
                l->label, l->identity);
    ok = rc == 0 && status == 200;

out:
    json_decref(want);
    kq_leader_decision_free(&d);
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
        char now[32], why[256];
        now_micro(now, sizeof(now));
        json_t *want = lease_with_record(l->lease, NULL, NULL, "", 1, now, now, l->obs.transitions);
        long status = 0;
        int rc = write_object(l, want, false, &status);
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
        rc = do_request(l, "GET", l->item_path, NULL, &r);
        if (rc == 0 && r.status == 200)
            rc = adopt_answer(l, &r, why, sizeof(why));
        else if (rc == 0)
            rc = KQ_EHTTP;
        kq_kube_resp_free(&r);
        if (rc != 0)
            return;
    }
}

/* ======================================================================================
 * the lease decision (no network, no clock: what the elector and the fuzzer call)
 * ====================================================================================== */

int kq_leader_lease_decide(const char *body, size_t len, const kq_leader_lease_in_t *in, kq_leader_decision_t *out,
                           char *err, size_t errlen)
{
    json_t *lease = NULL, *want = NULL;
    record_t rec = {0};
    kq_leader_decision_t d = {0};
    struct timespec now_ts;
    int rc;
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    if (in == NULL || out == NULL || in->identity == NULL || in->identity[0] == '\0' || in->duration_ms <= 0 ||
        in->duration_ms > MAX_DURATION_MS || in->now_time == NULL ||
        kq_leader_parse_microtime(in->now_time, &now_ts, NULL, 0) != 0) {
        rc = lease_fail(err, errlen, KQ_EINVAL,
                        "no identity, a duration outside 1 ms .. 1 day, or now_time not a MicroTime");
        goto out;
    }
    rc = lease_read(body, len, &lease, &rec, err, errlen);
    if (rc != 0)
        goto out;

    d.seen_ns = first_seen(in->prev_record, in->prev_seen_ns, rec.raw, in->now_ns, &d.changed);
    d.duration_ms = rec.dur_ms > 0 ? rec.dur_ms : in->duration_ms;
    long long dur_ns = d.duration_ms * 1000000LL; /* < 2^31 s = 2.2e18 ns: no overflow */
    d.expires_ns = add_saturated(d.seen_ns, dur_ns);
    if (rec.holder[0] == '\0')
        d.action = KQ_LEADER_ACQUIRE;
    else if (strcmp(rec.holder, in->identity) == 0)
        d.action = KQ_LEADER_RENEW;
    else if (elapsed_saturated(in->now_ns, d.seen_ns) < dur_ns)
        d.action = KQ_LEADER_WAIT;
    else
        d.action = KQ_LEADER_TAKEOVER;
    d.transitions = rec.transitions;
    d.has_acquire_time = rec.has_acquire;
    d.acquire_time = rec.acquire_ts;
    d.has_renew_time = rec.has_renew;
    d.renew_time = rec.renew_ts;

    if (d.action != KQ_LEADER_WAIT) {
        bool ours = d.action == KQ_LEADER_RENEW;
        long long tr = ours ? rec.transitions : rec.transitions < INT32_MAX ? rec.transitions + 1 : INT32_MAX;
        const char *acquire = ours && rec.acquire != NULL ? rec.acquire : in->now_time;
        want = lease_with_record(lease, NULL, NULL, in->identity, whole_seconds(in->duration_ms), acquire,
                                 in->now_time, tr);
        d.body = want ? json_dumps(want, JSON_COMPACT) : NULL;
    }
    d.resource_version = strdup(json_string_value(json_object_get(json_object_get(lease, "metadata"),
                                                                  "resourceVersion")));
    d.holder = rec.holder;
    d.record = rec.raw;
    rec.holder = rec.raw = NULL;
    d.lease = lease;
    lease = NULL;
    if (d.resource_version == NULL || (d.action != KQ_LEADER_WAIT && d.body == NULL)) {
        kq_leader_decision_free(&d);
        rc = lease_fail(err, errlen, KQ_ENOMEM, "out of memory");
        goto out;
    }
    *out = d;
out:
    json_decref(want);
    json_decref(lease);
    record_free(&rec);
    return rc;
}

void kq_leader_decision_free(kq_leader_decision_t *d)
{
    if (d == NULL)
        return;
    free(d->holder);
    free(d->resource_version);
    free(d->record);
    free(d->body);
    json_decref(d->lease);
    *d = (kq_leader_decision_t){0};
}

const char *kq_leader_action_name(kq_leader_action_t a)
{
    switch (a) {
    case KQ_LEADER_RENEW:
        return "renew";
    case KQ_LEADER_ACQUIRE:
        return "acquire";
    case KQ_LEADER_TAKEOVER:
        return "takeover";
    case KQ_LEADER_WAIT:
        return "wait";
    }
    return "unknown";
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
    record_free(&l->obs);
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

int kq_leader_parse_microtime(const char *s, struct timespec *ts, char *err, size_t errlen)
{
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    static const int before[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};
    const char *why = NULL;
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, oh = 0, om = 0, sign = 0;
    long nsec = 0;
    if (s == NULL || strnlen(s, 20) < 20 || !read_digits(s, 4, &y) || s[4] != '-' || !read_digits(s + 5, 2, &mo) ||
        s[7] != '-' || !read_digits(s + 8, 2, &d) || s[10] != 'T' || !read_digits(s + 11, 2, &h) || s[13] != ':' ||
        !read_digits(s + 14, 2, &mi) || s[16] != ':' || !read_digits(s + 17, 2, &sec)) {
        why = "not an RFC 3339 time like 2026-11-21T10:15:03.654321Z";
        goto out;
    }
    const char *p = s + 19;
    if (*p == '.') {
        int n = 0;
        long scale = 100000000L;
        for (p++; *p >= '0' && *p <= '9'; p++, n++)
            if (n < 9) {
                nsec += (*p - '0') * scale;
                scale /= 10;
            }
        if (n == 0 || n > 9) {
            why = n == 0 ? "no digit after the decimal point" : "more than 9 fractional digits";
            goto out;
        }
    }
    if ((p[0] == '+' || p[0] == '-') && strnlen(p, 7) == 6 && read_digits(p + 1, 2, &oh) && p[3] == ':' &&
        read_digits(p + 4, 2, &om))
        sign = p[0] == '+' ? 1 : -1;
    else if (strcmp(p, "Z") != 0) {
        why = "the time zone must be Z, +HH:MM or -HH:MM, and nothing may follow it";
        goto out;
    }
    if (mo < 1 || mo > 12)
        why = "month out of range";
    else if (d < 1 || d > mdays[mo - 1] + (mo == 2 && leap_year(y)))
        why = "day out of range";
    else if (h > 23)
        why = "hour out of range";
    else if (mi > 59)
        why = "minute out of range";
    else if (sec == 60)
        why = "second 60 (a leap second) is not accepted";
    else if (sec > 59)
        why = "second out of range";
    else if (oh > 23 || om > 59)
        why = "time zone offset out of range";
    if (why != NULL)
        goto out;
    /* years 0000..9999 and offsets under a day: |secs| < 2^38, no overflow */
    long long days = days_before_year(y) - DAYS_0000_TO_1970 + before[mo - 1] + (mo > 2 && leap_year(y)) + d - 1;
    long long secs = days * 86400 + h * 3600 + mi * 60 + sec - sign * (oh * 3600 + om * 60);
    if ((long long)(time_t)secs != secs) {
        if (err != NULL && errlen > 0)
            snprintf(err, errlen, "outside the range of time_t");
        return KQ_ERANGE;
    }
    if (ts != NULL) {
        ts->tv_sec = (time_t)secs;
        ts->tv_nsec = nsec;
    }
    if (err != NULL && errlen > 0)
        err[0] = '\0';
    return 0;
out:
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s", why);
    return KQ_EPARSE;
}
