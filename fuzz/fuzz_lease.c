/* libFuzzer target for the coordination.k8s.io/v1 Lease bodies the leader elector reads
 * from the API server: kq_leader_lease_decide() (the very function the elector calls on
 * every GET: parse, record, MicroTime, the take-or-respect decision and the body to PUT)
 * and kq_leader_parse_microtime() on the raw input.
 *
 * Checked beyond "no crash" (ASan + UBSan, so no overflow in the time arithmetic):
 *   - a refused body gives KQ_EPARSE or KQ_ETOOBIG, a "lease: ..." reason fit for a log line
 *     (printable ASCII, no '"' or '\\'), and leaves the decision untouched; readability does
 *     not depend on the clock;
 *   - an accepted one: a first sight restarts the clock (changed, seen_ns = now); the action
 *     follows from the holder and the elapsed time, for extreme clock values too; the same
 *     record seen again is unchanged and keeps its first-seen instant;
 *   - the body to PUT, read back as the API server would return it, is a lease that names
 *     us (RENEW for us, WAIT for another replica until it expires), with our duration,
 *     renewTime now, acquireTime and leaseTransitions as the protocol says, the same
 *     resourceVersion, and the fields we do not manage kept;
 *   - an accepted MicroTime agrees with timegm() and formats back (6 digits, UTC) to itself.
 *
 *   make build/fuzz/fuzz_lease && build/fuzz/fuzz_lease -max_total_time=60 fuzz/corpus/lease
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "kubequota/kube/leader.h"
#include "kubequota/base/log.h"

#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define ME "kubequota-0_9b2d4c1e-0f3a-4b5c-8d6e-7f8091a2b3c4"
#define OTHER "kubequota-1_0c1d2e3f-4a5b-4c6d-8e7f-8091a2b3c4d5"
#define NOW "2026-11-21T10:15:05.000001Z"
#define DUR_MS 15000L

static struct timespec now_ts;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    kq_log_level_current = -1;
    if (kq_leader_parse_microtime(NOW, &now_ts, NULL, 0) != 0)
        abort();
    return 0;
}

static bool ts_equal(struct timespec a, struct timespec b)
{
    return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

/* ---- MicroTime ---------------------------------------------------------------------- */

static void fuzz_microtime(const char *s)
{
    struct timespec ts = {-7, -7};
    char err[128];
    memset(err, 'x', sizeof(err));
    int rc = kq_leader_parse_microtime(s, &ts, err, sizeof(err));
    CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    if (rc != 0) {
        CHECK(rc == KQ_EPARSE || rc == KQ_ERANGE);
        CHECK(ts.tv_sec == -7 && ts.tv_nsec == -7);
        CHECK(err[0] != '\0');
        return;
    }
    CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L);
    /* an independent oracle for the calendar: glibc's timegm */
    struct tm tm = {0};
    int y, mo, d, h, mi, sec;
    CHECK(sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d", &y, &mo, &d, &h, &mi, &sec) == 6);
    CHECK(y >= 0 && y <= 9999 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h <= 23 && mi <= 59 && sec <= 59);
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    time_t local = timegm(&tm);
    CHECK(tm.tm_mday == d && tm.tm_mon == mo - 1); /* not normalized: the date exists */
    const char *z = strpbrk(s + 19, "Z+-");
    CHECK(z != NULL);
    long off = 0;
    if (*z != 'Z')
        off = (*z == '+' ? 1 : -1) * ((z[1] - '0') * 36000L + (z[2] - '0') * 3600L + (z[4] - '0') * 600L +
                                      (z[5] - '0') * 60L);
    CHECK((long long)ts.tv_sec == (long long)local - off);
    /* format and parse back (microseconds) */
    char buf[32];
    if (kq_leader_format_microtime(&ts, buf, sizeof(buf)) == 0) {
        struct timespec back;
        CHECK(kq_leader_parse_microtime(buf, &back, NULL, 0) == 0);
        CHECK(back.tv_sec == ts.tv_sec && back.tv_nsec == ts.tv_nsec / 1000 * 1000);
        if (strlen(s) == 27 && s[19] == '.' && s[26] == 'Z')
            CHECK(strcmp(buf, s) == 0);
    }
}

/* ---- the decision ------------------------------------------------------------------- */

static int decide(const char *body, size_t len, const char *identity, long long now_ns, const char *prev,
                  long long prev_seen, kq_leader_decision_t *d)
{
    kq_leader_lease_in_t in = {
        .identity = identity,
        .duration_ms = DUR_MS,
        .now_time = NOW,
        .now_ns = now_ns,
        .prev_record = prev,
        .prev_seen_ns = prev_seen,
    };
    char err[256];
    memset(err, 'x', sizeof(err));
    kq_leader_decision_t sentinel;
    memset(&sentinel, 0xA5, sizeof(sentinel));
    memset(d, 0xA5, sizeof(*d));
    int rc = kq_leader_lease_decide(body, len, &in, d, err, sizeof(err));
    CHECK(memchr(err, '\0', sizeof(err)) != NULL);
    if (rc != 0) {
        CHECK(rc == KQ_EPARSE || rc == KQ_ETOOBIG);
        CHECK(strncmp(err, "lease: ", 7) == 0 && strlen(err) > 7);
        for (const char *p = err; *p; p++) /* fit for a quoted log value */
            CHECK(*p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\');
        CHECK(memcmp(d, &sentinel, sizeof(*d)) == 0);
        memset(d, 0, sizeof(*d));
        return rc;
    }
    CHECK(err[0] == '\0');
    CHECK(d->holder != NULL && d->record != NULL && d->lease != NULL);
    CHECK(d->resource_version != NULL && d->resource_version[0] != '\0');
    CHECK(d->duration_ms >= 1 && d->duration_ms <= (long long)INT32_MAX * 1000);
    CHECK(d->transitions >= 0 && d->transitions <= INT32_MAX);
    CHECK((d->body == NULL) == (d->action == KQ_LEADER_WAIT));
    CHECK(d->changed == (prev == NULL || strcmp(prev, d->record) != 0));
    CHECK(d->seen_ns == (d->changed ? now_ns : prev_seen));
    if (d->has_renew_time)
        CHECK(d->renew_time.tv_nsec >= 0 && d->renew_time.tv_nsec < 1000000000L);
    /* the action follows from the holder and the time elapsed since the record was seen */
    long long dur_ns = d->duration_ms * 1000000LL;
    __int128 elapsed = (__int128)now_ns - d->seen_ns;
    kq_leader_action_t want = d->holder[0] == '\0'             ? KQ_LEADER_ACQUIRE
                              : strcmp(d->holder, identity) == 0 ? KQ_LEADER_RENEW
                              : elapsed < dur_ns                 ? KQ_LEADER_WAIT
                                                                 : KQ_LEADER_TAKEOVER;
    if (d->action != want) {
        fprintf(stderr, "action %s, expected %s (holder \"%s\", now %lld, seen %lld, duration %lld ms)\n",
                kq_leader_action_name(d->action), kq_leader_action_name(want), d->holder, now_ns, d->seen_ns,
                d->duration_ms);
        abort();
    }
    __int128 exp = (__int128)d->seen_ns + dur_ns;
    CHECK(d->expires_ns == (exp > LLONG_MAX ? LLONG_MAX : (long long)exp));
    return 0;
}

/* The body identity would PUT after decision d, as the API server would answer it. */
static void check_written(const kq_leader_decision_t *d, const char *identity)
{
    const char *other = strcmp(identity, OTHER) == 0 ? ME : OTHER;
    kq_leader_decision_t w;
    CHECK(decide(d->body, strlen(d->body), identity, 5, NULL, 0, &w) == 0);
    CHECK(w.action == KQ_LEADER_RENEW);
    CHECK(strcmp(w.holder, identity) == 0);
    CHECK(strcmp(w.resource_version, d->resource_version) == 0);
    CHECK(w.duration_ms == (DUR_MS + 999) / 1000 * 1000);
    CHECK(w.has_renew_time && ts_equal(w.renew_time, now_ts));
    CHECK(w.has_acquire_time);
    if (d->action == KQ_LEADER_RENEW) {
        CHECK(w.transitions == d->transitions);
        CHECK(ts_equal(w.acquire_time, d->has_acquire_time ? d->acquire_time : now_ts));
    } else {
        CHECK(w.transitions == (d->transitions < INT32_MAX ? d->transitions + 1 : INT32_MAX));
        CHECK(ts_equal(w.acquire_time, now_ts));
    }
    /* metadata and the spec fields we do not manage are kept */
    CHECK(json_equal(json_object_get(w.lease, "metadata"), json_object_get(d->lease, "metadata")));
    json_t *old = json_object_get(d->lease, "spec"), *now = json_object_get(w.lease, "spec");
    const char *key;
    json_t *v;
    json_object_foreach(old, key, v) {
        if (strcmp(key, "holderIdentity") != 0 && strcmp(key, "leaseDurationSeconds") != 0 &&
            strcmp(key, "acquireTime") != 0 && strcmp(key, "renewTime") != 0 && strcmp(key, "leaseTransitions") != 0)
            CHECK(json_equal(v, json_object_get(now, key)));
    }
    /* another replica respects it until it has not changed for our duration */
    kq_leader_decision_t o1, o2, o3;
    CHECK(decide(d->body, strlen(d->body), other, 1000, NULL, 0, &o1) == 0);
    CHECK(o1.action == KQ_LEADER_WAIT && strcmp(o1.record, w.record) == 0);
    long long dur_ns = w.duration_ms * 1000000LL;
    CHECK(decide(d->body, strlen(d->body), other, 1000 + dur_ns - 1, o1.record, o1.seen_ns, &o2) == 0);
    CHECK(o2.action == KQ_LEADER_WAIT && !o2.changed);
    CHECK(decide(d->body, strlen(d->body), other, 1000 + dur_ns, o1.record, o1.seen_ns, &o3) == 0);
    CHECK(o3.action == KQ_LEADER_TAKEOVER && !o3.changed);
    kq_leader_decision_free(&o3);
    kq_leader_decision_free(&o2);
    kq_leader_decision_free(&o1);
    kq_leader_decision_free(&w);
}

static void fuzz_lease(const char *body, size_t len)
{
    static const long long firsts[] = {0, LLONG_MAX, LLONG_MIN};
    static const struct {
        long long seen, now;
    } again[] = {{LLONG_MIN, LLONG_MAX}, {LLONG_MAX, LLONG_MIN}, {-5, 3}, {1LL << 62, -(1LL << 62)}};
    kq_leader_decision_t d;
    int rc0 = decide(body, len, ME, firsts[0], NULL, 0, &d);
    for (size_t i = 1; i < sizeof(firsts) / sizeof(firsts[0]); i++) {
        kq_leader_decision_t e;
        int rc = decide(body, len, ME, firsts[i], NULL, 0, &e);
        CHECK(rc == rc0); /* whether a body is readable does not depend on the clock */
        if (rc == 0) {
            CHECK(e.action == d.action && strcmp(e.record, d.record) == 0);
            kq_leader_decision_free(&e);
        }
    }
    if (rc0 != 0)
        return;
    for (size_t i = 0; i < sizeof(again) / sizeof(again[0]); i++) {
        kq_leader_decision_t e;
        CHECK(decide(body, len, ME, again[i].now, d.record, again[i].seen, &e) == 0);
        CHECK(!e.changed && e.seen_ns == again[i].seen);
        kq_leader_decision_free(&e);
    }
    if (d.body != NULL)
        check_written(&d, ME);
    /* as seen by the holder itself, and by a replica the lease does not name */
    if (d.holder[0] != '\0') {
        kq_leader_decision_t e;
        CHECK(decide(body, len, d.holder, 0, NULL, 0, &e) == 0);
        CHECK(e.action == KQ_LEADER_RENEW);
        check_written(&e, d.holder);
        kq_leader_decision_free(&e);
        CHECK(decide(body, len, strcmp(d.holder, OTHER) == 0 ? ME : OTHER, 7, NULL, 0, &e) == 0);
        CHECK(e.action == KQ_LEADER_WAIT);
        kq_leader_decision_free(&e);
    }
    kq_leader_decision_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[48];
    size_t n = size < sizeof(s) - 1 ? size : sizeof(s) - 1;
    memcpy(s, data, n);
    s[n] = '\0';
    fuzz_microtime(s);
    fuzz_lease((const char *)data, size);
    return 0;
}
