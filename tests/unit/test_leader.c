/* Tests of leader election against a fake API server held in memory: the elector's
 * request function is replaced by one that serves a single Lease the way kube-apiserver
 * does (GET 404 when absent, POST 201 / 409 AlreadyExists, PUT 200 / 409 Conflict on a
 * stale metadata.resourceVersion) and that can fail, hang or let a rival write first.
 *
 * Durations are short (300 ms lease, 200 ms renew deadline, 50 ms retry; the lease record
 * then says leaseDurationSeconds 1). Tests wait for states with a generous bound and never
 * assert on how long something took.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <pthread.h>
#include <regex.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "kubequota/kube/leader.h"
#include "kubequota/base/log.h"

#define NS "kube-system"
#define NAME "kubequota"
#define ITEM "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases/" NAME
#define COLL "/apis/coordination.k8s.io/v1/namespaces/" NS "/leases"
#define MICRO_RE "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$"

/* ======================================================================================
 * the fake API server
 * ====================================================================================== */

typedef struct fake {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    json_t *lease;          /* the stored object (metadata + spec), NULL when absent */
    long rv;
    /* faults */
    long fail_status;       /* answer every request with this status */
    bool fail_transport;    /* every request fails with KQ_EIO */
    bool block;             /* requests wait until block is cleared */
    int blocked;            /* requests waiting now */
    const char *rival;      /* on the next PUT, this holder writes first (then the PUT is stale) */
    const char *get_body;   /* GET answers 200 with this body */
    /* log */
    int n_get, n_post, n_put, n_put_ok, n_put_409, n_bad;
    char *last_put;         /* body of the last PUT */
} fake_t;

static void fake_init(fake_t *f)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->rv = 100;
}

static void fake_free(fake_t *f)
{
    json_decref(f->lease);
    free(f->last_put);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
}

/* Stores spec as the lease (under f->mu). */
static void store_locked(fake_t *f, json_t *spec)
{
    json_t *o = json_pack("{s:s,s:s,s:{s:s,s:s,s:s,s:s},s:o}", "apiVersion", "coordination.k8s.io/v1", "kind",
                          "Lease", "metadata", "name", NAME, "namespace", NS, "uid", "7e7e7e7e-1111",
                          "resourceVersion", "0", "spec", spec);
    assert_non_null(o);
    char rv[32];
    snprintf(rv, sizeof(rv), "%ld", ++f->rv);
    json_object_set_new(json_object_get(o, "metadata"), "resourceVersion", json_string(rv));
    json_decref(f->lease);
    f->lease = o;
}

static json_t *spec_of(const char *holder, int dur_s, const char *acquire, const char *renew, int transitions)
{
    return json_pack("{s:s,s:i,s:s,s:s,s:i}", "holderIdentity", holder, "leaseDurationSeconds", dur_s,
                     "acquireTime", acquire, "renewTime", renew, "leaseTransitions", transitions);
}

static void fake_seed(fake_t *f, const char *holder, int dur_s, const char *renew, int transitions)
{
    pthread_mutex_lock(&f->mu);
    store_locked(f, spec_of(holder, dur_s, "2020-01-01T00:00:00.000000Z", renew, transitions));
    pthread_mutex_unlock(&f->mu);
}

static void answer(kq_kube_resp_t *resp, long status, json_t *obj)
{
    resp->status = status;
    resp->body = json_dumps(obj, JSON_COMPACT);
    resp->len = resp->body ? strlen(resp->body) : 0;
    json_decref(obj);
}

static json_t *status_obj(long code, const char *reason, const char *msg)
{
    return json_pack("{s:s,s:s,s:{},s:s,s:s,s:s,s:i}", "kind", "Status", "apiVersion", "v1", "metadata", "status",
                     "Failure", "message", msg, "reason", reason, "code", (int)code);
}

static int fake_request(void *ud, const char *method, const char *path, const char *ct, const char *body,
                        kq_kube_resp_t *resp)
{
    fake_t *f = ud;
    pthread_mutex_lock(&f->mu);
    while (f->block) {
        f->blocked++;
        pthread_cond_broadcast(&f->cv);
        pthread_cond_wait(&f->cv, &f->mu);
        f->blocked--;
    }
    int rc = 0;
    bool get = strcmp(method, "GET") == 0, post = strcmp(method, "POST") == 0, put = strcmp(method, "PUT") == 0;
    f->n_get += get;
    f->n_post += post;
    f->n_put += put;
    if (put) {
        free(f->last_put);
        f->last_put = body ? strdup(body) : NULL;
    }
    if (f->fail_transport) {
        rc = KQ_EIO;
        goto out;
    }
    if (f->fail_status) {
        answer(resp, f->fail_status, status_obj(f->fail_status, "InternalError", "injected failure"));
        goto out;
    }
    if ((get || put) && strcmp(path, ITEM) != 0) {
        f->n_bad++;
        answer(resp, 404, status_obj(404, "NotFound", "no such path"));
        goto out;
    }
    if (get) {
        if (f->get_body != NULL) {
            resp->status = 200;
            resp->body = strdup(f->get_body);
            resp->len = strlen(f->get_body);
        } else if (f->lease == NULL) {
            answer(resp, 404, status_obj(404, "NotFound", "leases.coordination.k8s.io \"kubequota\" not found"));
        } else {
            answer(resp, 200, json_deep_copy(f->lease));
        }
        goto out;
    }
    json_t *in = body ? json_loads(body, 0, NULL) : NULL;
    json_t *md = json_object_get(in, "metadata"), *spec = json_object_get(in, "spec");
    if (ct == NULL || strcmp(ct, "application/json") != 0 || !json_is_object(spec) ||
        !json_is_string(json_object_get(in, "kind")) || strcmp(json_string_value(json_object_get(in, "kind")), "Lease") != 0 ||
        !json_is_string(json_object_get(md, "name")) || strcmp(json_string_value(json_object_get(md, "name")), NAME) != 0) {
        f->n_bad++;
        answer(resp, 400, status_obj(400, "BadRequest", "not a Lease"));
    } else if (post) {
        if (strcmp(path, COLL) != 0) {
            f->n_bad++;
            answer(resp, 404, status_obj(404, "NotFound", "no such path"));
        } else if (f->lease != NULL) {
            answer(resp, 409, status_obj(409, "AlreadyExists", "leases \"kubequota\" already exists"));
        } else {
            store_locked(f, json_deep_copy(spec));
            answer(resp, 201, json_deep_copy(f->lease));
        }
    } else if (put) {
        const char *want = json_string_value(json_object_get(md, "resourceVersion"));
        if (f->rival != NULL && f->lease != NULL) {
            store_locked(f, spec_of(f->rival, 3600, "2020-01-01T00:00:00.000000Z", "2020-01-01T00:00:00.000000Z", 7));
            f->rival = NULL;
        }
        if (want == NULL) {
            f->n_bad++; /* the elector must always send the version it read */
            answer(resp, 400, status_obj(400, "BadRequest", "no resourceVersion"));
        } else if (f->lease == NULL) {
            answer(resp, 404, status_obj(404, "NotFound", "not found"));
        } else if (strcmp(want, json_string_value(json_object_get(json_object_get(f->lease, "metadata"),
                                                                  "resourceVersion"))) != 0) {
            f->n_put_409++;
            answer(resp, 409, status_obj(409, "Conflict", "the object has been modified"));
        } else {
            f->n_put_ok++;
            store_locked(f, json_deep_copy(spec));
            answer(resp, 200, json_deep_copy(f->lease));
        }
    } else {
        f->n_bad++;
        answer(resp, 405, status_obj(405, "MethodNotAllowed", "no"));
    }
    json_decref(in);
out:
    pthread_mutex_unlock(&f->mu);
    return rc;
}

/* Reads of the stored lease (copies; "" / -1 when absent). */
static void lease_str(fake_t *f, const char *key, char *buf, size_t len)
{
    pthread_mutex_lock(&f->mu);
    const char *v = json_string_value(json_object_get(json_object_get(f->lease, "spec"), key));
    snprintf(buf, len, "%s", v ? v : "");
    pthread_mutex_unlock(&f->mu);
}

static long long lease_int(fake_t *f, const char *key)
{
    pthread_mutex_lock(&f->mu);
    json_t *v = json_object_get(json_object_get(f->lease, "spec"), key);
    long long n = json_is_integer(v) ? json_integer_value(v) : -1;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static int counter(fake_t *f, const int *field)
{
    pthread_mutex_lock(&f->mu);
    int n = *field;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static void fake_set(fake_t *f, void (*fn)(fake_t *, void *), void *arg)
{
    pthread_mutex_lock(&f->mu);
    fn(f, arg);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static void set_fail_status(fake_t *f, void *arg) { f->fail_status = *(long *)arg; }
static void set_fail_transport(fake_t *f, void *arg) { f->fail_transport = *(bool *)arg; }
static void set_block(fake_t *f, void *arg) { f->block = *(bool *)arg; }
static void set_rival(fake_t *f, void *arg) { f->rival = arg; }
static void set_get_body(fake_t *f, void *arg) { f->get_body = arg; }
static void rival_writes(fake_t *f, void *arg)
{
    store_locked(f, spec_of(arg, 3600, "2020-01-01T00:00:00.000000Z", "2020-01-01T00:00:00.000000Z", 9));
}

/* ======================================================================================
 * electors under test
 * ====================================================================================== */

typedef struct cand {
    fake_t *f;
    kq_leader_t *l;
    atomic_int started, stopped;
    atomic_int puts_at_stop; /* successful PUTs the fake had seen when on_stopped_leading ran */
} cand_t;

static void on_started(void *ud)
{
    cand_t *c = ud;
    atomic_fetch_add(&c->started, 1);
}

static void on_stopped(void *ud)
{
    cand_t *c = ud;
    atomic_store(&c->puts_at_stop, counter(c->f, &c->f->n_put_ok));
    atomic_fetch_add(&c->stopped, 1);
}

static void cand_start_with(cand_t *c, fake_t *f, const char *identity, long dur, long deadline, long retry)
{
    memset(c, 0, sizeof(*c));
    c->f = f;
    atomic_init(&c->started, 0);
    atomic_init(&c->stopped, 0);
    atomic_init(&c->puts_at_stop, -1);
    kq_leader_opts_t o;
    kq_leader_opts_default(&o);
    o.namespace = NS;
    o.name = NAME;
    o.identity = identity;
    o.lease_duration_ms = dur;
    o.renew_deadline_ms = deadline;
    o.retry_period_ms = retry;
    o.on_started_leading = on_started;
    o.on_stopped_leading = on_stopped;
    o.ud = c;
    o.request = fake_request;
    o.request_ud = f;
    c->l = kq_leader_start(NULL, &o);
    assert_non_null(c->l);
}

static void cand_start(cand_t *c, fake_t *f, const char *identity)
{
    cand_start_with(c, f, identity, 300, 200, 50);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls pred every 5 ms for up to 20 s (a liveness bound, not a timing assertion). */
static bool wait_for(bool (*pred)(void *), void *arg)
{
    for (int i = 0; i < 4000; i++) {
        if (pred(arg))
            return true;
        sleep_ms(5);
    }
    return pred(arg);
}

static bool is_leader(void *arg) { return kq_leader_is_leader(((cand_t *)arg)->l); }
static bool not_leader(void *arg) { return !kq_leader_is_leader(((cand_t *)arg)->l); }
static bool has_stopped(void *arg) { return atomic_load(&((cand_t *)arg)->stopped) >= 1; }

typedef struct at_least {
    fake_t *f;
    const int *field;
    int n;
} at_least_t;

static bool reached(void *arg)
{
    at_least_t *a = arg;
    return counter(a->f, a->field) >= a->n;
}

static void wait_count(fake_t *f, const int *field, int n)
{
    at_least_t a = {f, field, n};
    assert_true(wait_for(reached, &a));
}

static void assert_matches(const char *s, const char *re)
{
    regex_t r;
    assert_int_equal(regcomp(&r, re, REG_EXTENDED | REG_NOSUB), 0);
    int m = regexec(&r, s, 0, NULL, 0);
    regfree(&r);
    if (m != 0)
        fail_msg("\"%s\" does not match %s", s, re);
}

/* ======================================================================================
 * helpers for main
 * ====================================================================================== */

static void test_format_microtime(void **state)
{
    char buf[64];
    struct timespec ts = {1795774503, 654321987};
    assert_int_equal(kq_leader_format_microtime(&ts, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "2026-11-27T10:15:03.654321Z");
    ts = (struct timespec){0, 999};
    assert_int_equal(kq_leader_format_microtime(&ts, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "1970-01-01T00:00:00.000000Z");
    /* 28 bytes needed: a shorter buffer is refused and left alone */
    ts = (struct timespec){1795774503, 1000};
    strcpy(buf, "untouched");
    assert_int_equal(kq_leader_format_microtime(&ts, buf, 27), KQ_ERANGE);
    assert_string_equal(buf, "untouched");
    assert_int_equal(kq_leader_format_microtime(&ts, buf, 28), 0);
    assert_string_equal(buf, "2026-11-27T10:15:03.000001Z");
    ts = (struct timespec){1, 1000000000L};
    assert_int_equal(kq_leader_format_microtime(&ts, buf, sizeof(buf)), KQ_ERANGE);
    ts = (struct timespec){-1, 0};
    assert_int_equal(kq_leader_format_microtime(&ts, buf, sizeof(buf)), KQ_ERANGE);
}

static void test_parse_duration(void **state)
{
    static const struct {
        const char *in;
        long ms;
    } good[] = {{"15s", 15000}, {"1500ms", 1500}, {"2m", 120000}, {"1m30s", 90000}, {"1.5s", 1500},
                {"1h", 3600000}, {"250ms", 250},   {"0.25s", 250},  {"1s500ms", 1500}, {"24h", 86400000}};
    static const char *bad[] = {"",    "15",  "s",     "-1s", "1x",   "1.5",  "0s",   "0.0001s", "25h",
                                "1s ", " 1s", "1..2s", ".s",  "99999999999999999999s", "1sm", "1S"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        long ms = -7;
        if (kq_leader_parse_duration(good[i].in, &ms) != 0 || ms != good[i].ms)
            fail_msg("\"%s\": expected %ld ms, got %ld", good[i].in, good[i].ms, ms);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        long ms = -7;
        if (kq_leader_parse_duration(bad[i], &ms) != KQ_EINVAL || ms != -7)
            fail_msg("\"%s\" should be rejected and leave the output alone", bad[i]);
    }
}

static void test_opts_check(void **state)
{
    kq_leader_opts_t o;
    kq_leader_opts_default(&o);
    assert_int_equal(o.lease_duration_ms, 15000);
    assert_int_equal(o.renew_deadline_ms, 10000);
    assert_int_equal(o.retry_period_ms, 2000);
    o.namespace = NS;
    o.name = NAME;
    o.identity = "host_1";
    char err[256];
    assert_int_equal(kq_leader_opts_check(&o, err, sizeof(err)), 0);

    static const struct {
        const char *ns, *name, *id;
        long dur, deadline, retry;
        const char *words;
    } cases[] = {
        {NULL, NAME, "a", 15000, 10000, 2000, "namespace"},
        {"Kube-System", NAME, "a", 15000, 10000, 2000, "namespace"},
        {"kube/system", NAME, "a", 15000, 10000, 2000, "namespace"},
        {NS, "", "a", 15000, 10000, 2000, "lease name"},
        {NS, "a/b", "a", 15000, 10000, 2000, "lease name"},
        {NS, NAME, "", 15000, 10000, 2000, "identity"},
        {NS, NAME, "a b", 15000, 10000, 2000, "identity"},
        {NS, NAME, "a\"b", 15000, 10000, 2000, "identity"},
        {NS, NAME, "a", 10000, 10000, 2000, "longer than the renew deadline"},
        {NS, NAME, "a", 15000, 2400, 2000, "1.2 x the retry period"},
        {NS, NAME, "a", 15000, 10000, 0, "positive"},
        {NS, NAME, "a", -1, 10000, 2000, "positive"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        o.namespace = cases[i].ns;
        o.name = cases[i].name;
        o.identity = cases[i].id;
        o.lease_duration_ms = cases[i].dur;
        o.renew_deadline_ms = cases[i].deadline;
        o.retry_period_ms = cases[i].retry;
        err[0] = '\0';
        assert_int_equal(kq_leader_opts_check(&o, err, sizeof(err)), KQ_EINVAL);
        if (strstr(err, cases[i].words) == NULL)
            fail_msg("case %zu: \"%s\" should mention \"%s\"", i, err, cases[i].words);
        /* and start refuses them */
        o.request = fake_request;
        assert_null(kq_leader_start(NULL, &o));
        o.request = NULL;
    }
}

static void test_start_needs_a_client(void **state)
{
    kq_leader_opts_t o;
    kq_leader_opts_default(&o);
    o.namespace = NS;
    o.name = NAME;
    o.identity = "a";
    assert_null(kq_leader_start(NULL, &o));
    assert_false(kq_leader_is_leader(NULL));
    assert_true(kq_leader_acts(NULL)); /* no election: the only replica acts */
    assert_null(kq_leader_identity(NULL));
    kq_leader_stop(NULL);
}

static void test_default_identity(void **state)
{
    char a[320], b[320], host[256];
    assert_int_equal(gethostname(host, sizeof(host)), 0);
    assert_int_equal(kq_leader_default_identity(a, sizeof(a)), 0);
    assert_int_equal(kq_leader_default_identity(b, sizeof(b)), 0);
    assert_string_not_equal(a, b);
    assert_true(strncmp(a, host, strlen(host)) == 0 && a[strlen(host)] == '_');
    assert_matches(a + strlen(host) + 1, "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$");
    kq_leader_opts_t o;
    kq_leader_opts_default(&o);
    o.namespace = NS;
    o.name = NAME;
    o.identity = a;
    assert_int_equal(kq_leader_opts_check(&o, NULL, 0), 0);
    char small[8] = "keep";
    assert_int_equal(kq_leader_default_identity(small, sizeof(small)), KQ_ERANGE);
    assert_string_equal(small, "keep");
}

/* ======================================================================================
 * election
 * ====================================================================================== */

static void test_acquires_by_creating_the_lease(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    assert_string_equal(kq_leader_identity(c.l), "replica-a");
    assert_true(wait_for(is_leader, &c));
    assert_int_equal(counter(&f, &f.n_post), 1);
    assert_true(counter(&f, &f.n_get) >= 1);
    char holder[64], acq[64], renew[64];
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    lease_str(&f, "acquireTime", acq, sizeof(acq));
    assert_string_equal(holder, "replica-a");
    assert_int_equal(lease_int(&f, "leaseTransitions"), 0);
    assert_int_equal(lease_int(&f, "leaseDurationSeconds"), 1); /* 300 ms, rounded up */
    assert_matches(acq, MICRO_RE);
    /* renewals may have moved renewTime on since the creation */
    lease_str(&f, "renewTime", renew, sizeof(renew));
    assert_matches(renew, MICRO_RE);
    assert_true(strcmp(renew, acq) >= 0);
    assert_int_equal(atomic_load(&c.started), 1);
    assert_int_equal(atomic_load(&c.stopped), 0);
    assert_int_equal(kq_leader_acquisitions(c.l), 1);
    assert_true(kq_leader_acts(c.l));
    char seen[64];
    kq_leader_holder(c.l, seen, sizeof(seen));
    assert_string_equal(seen, "replica-a");
    kq_leader_stop(c.l);
    assert_int_equal(counter(&f, &f.n_bad), 0);
    fake_free(&f);
}

static void test_renews_keeping_acquire_time(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    assert_true(wait_for(is_leader, &c));
    char acq0[64], renew0[64], acq[64], renew[64], holder[64];
    lease_str(&f, "acquireTime", acq0, sizeof(acq0));
    lease_str(&f, "renewTime", renew0, sizeof(renew0));
    int puts = counter(&f, &f.n_put_ok);
    wait_count(&f, &f.n_put_ok, puts + 3);
    lease_str(&f, "acquireTime", acq, sizeof(acq));
    lease_str(&f, "renewTime", renew, sizeof(renew));
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, "replica-a");
    assert_string_equal(acq, acq0);
    assert_string_not_equal(renew, renew0);
    assert_matches(renew, MICRO_RE);
    assert_true(strcmp(renew, renew0) > 0); /* same format, so later sorts later */
    assert_int_equal(lease_int(&f, "leaseTransitions"), 0);
    /* renewals reuse the version of the last write: never a conflict, never a re-create */
    assert_int_equal(counter(&f, &f.n_put_409), 0);
    assert_int_equal(counter(&f, &f.n_post), 1);
    assert_int_equal(atomic_load(&c.started), 1);
    assert_int_equal(atomic_load(&c.stopped), 0);
    kq_leader_stop(c.l);
    assert_int_equal(counter(&f, &f.n_bad), 0);
    fake_free(&f);
}

static void test_takes_over_an_expired_lease(void **state)
{
    fake_t f;
    fake_init(&f);
    /* held by a replica that stopped renewing long ago */
    fake_seed(&f, "replica-old", 1, "2020-01-01T00:00:00.000000Z", 3);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    assert_true(wait_for(is_leader, &c));
    char holder[64], acq[64];
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    lease_str(&f, "acquireTime", acq, sizeof(acq));
    assert_string_equal(holder, "replica-a");
    assert_int_equal(lease_int(&f, "leaseTransitions"), 4);
    assert_string_not_equal(acq, "2020-01-01T00:00:00.000000Z");
    assert_matches(acq, MICRO_RE);
    assert_int_equal(counter(&f, &f.n_post), 0);
    assert_int_equal(atomic_load(&c.started), 1);
    /* renewals keep the count */
    int puts = counter(&f, &f.n_put_ok);
    wait_count(&f, &f.n_put_ok, puts + 2);
    assert_int_equal(lease_int(&f, "leaseTransitions"), 4);
    kq_leader_stop(c.l);
    assert_int_equal(counter(&f, &f.n_bad), 0);
    fake_free(&f);
}

static void test_leaves_a_valid_lease_alone(void **state)
{
    fake_t f;
    fake_init(&f);
    fake_seed(&f, "replica-other", 3600, "2020-01-01T00:00:00.000000Z", 2);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    wait_count(&f, &f.n_get, 5);
    assert_false(kq_leader_is_leader(c.l));
    assert_false(kq_leader_acts(c.l));
    assert_int_equal(counter(&f, &f.n_put), 0);
    assert_int_equal(counter(&f, &f.n_post), 0);
    char holder[64];
    kq_leader_holder(c.l, holder, sizeof(holder));
    assert_string_equal(holder, "replica-other");
    kq_leader_stop(c.l); /* not ours: nothing to release */
    assert_int_equal(counter(&f, &f.n_put), 0);
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, "replica-other");
    assert_int_equal(atomic_load(&c.started), 0);
    assert_int_equal(atomic_load(&c.stopped), 0);
    fake_free(&f);
}

/* The other holder's renewTime is years in the past (its clock, or ours, is off), but it
 * keeps renewing: the record changes, so on our clock it never expires. */
typedef struct renewer {
    fake_t *f;
    atomic_bool stop;
} renewer_t;

static void *renew_loop(void *arg)
{
    renewer_t *r = arg;
    for (int i = 0; !atomic_load(&r->stop); i++) {
        char t[64];
        snprintf(t, sizeof(t), "2020-01-01T00:00:%02d.%06dZ", (i / 1000000) % 60, i % 1000000);
        pthread_mutex_lock(&r->f->mu);
        store_locked(r->f, spec_of("replica-other", 2, "2020-01-01T00:00:00.000000Z", t, 2));
        pthread_mutex_unlock(&r->f->mu);
        sleep_ms(20);
    }
    return NULL;
}

static void test_a_renewed_lease_is_not_taken_whatever_its_times(void **state)
{
    fake_t f;
    fake_init(&f);
    renewer_t r = {.f = &f};
    atomic_init(&r.stop, false);
    fake_seed(&f, "replica-other", 2, "2020-01-01T00:00:00.000000Z", 2);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, renew_loop, &r), 0);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    wait_count(&f, &f.n_get, 20);
    atomic_store(&r.stop, true);
    pthread_join(t, NULL);
    assert_int_equal(counter(&f, &f.n_put), 0);
    assert_int_equal(atomic_load(&c.started), 0);
    kq_leader_stop(c.l);
    fake_free(&f);
}

static void test_conflict_on_takeover_means_not_leader(void **state)
{
    fake_t f;
    fake_init(&f);
    fake_seed(&f, "replica-old", 1, "2020-01-01T00:00:00.000000Z", 3);
    /* when we try to take the expired lease, a rival writes first */
    fake_set(&f, set_rival, (void *)"replica-rival");
    cand_t c;
    cand_start(&c, &f, "replica-a");
    wait_count(&f, &f.n_put_409, 1);
    int gets = counter(&f, &f.n_get);
    wait_count(&f, &f.n_get, gets + 2); /* it reads the lease again */
    assert_false(kq_leader_is_leader(c.l));
    assert_int_equal(atomic_load(&c.started), 0);
    char holder[64];
    kq_leader_holder(c.l, holder, sizeof(holder));
    assert_string_equal(holder, "replica-rival");
    /* the rival's fresh lease is respected: no further write */
    assert_int_equal(counter(&f, &f.n_put), 1);
    kq_leader_stop(c.l);
    assert_int_equal(counter(&f, &f.n_put), 1);
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, "replica-rival");
    assert_int_equal(counter(&f, &f.n_bad), 0);
    fake_free(&f);
}

/* A renew deadline of a minute, longer than wait_for's bound: stepping down here is
 * because the lease names someone else, not because renewals failed for too long. */
static void test_conflict_on_renew_steps_down(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t c;
    cand_start_with(&c, &f, "replica-a", 90000, 60000, 50);
    assert_true(wait_for(is_leader, &c));
    /* a rival that believed our lease expired has taken it */
    fake_set(&f, rival_writes, (void *)"replica-rival");
    assert_true(wait_for(has_stopped, &c));
    assert_false(kq_leader_is_leader(c.l));
    assert_true(counter(&f, &f.n_put_409) >= 1);
    char holder[64];
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, "replica-rival");
    /* and it does not fight for it while the rival's lease is valid */
    int puts = counter(&f, &f.n_put), gets = counter(&f, &f.n_get);
    wait_count(&f, &f.n_get, gets + 3);
    assert_int_equal(counter(&f, &f.n_put), puts);
    assert_int_equal(atomic_load(&c.started), 1);
    assert_int_equal(atomic_load(&c.stopped), 1);
    kq_leader_stop(c.l);
    assert_int_equal(atomic_load(&c.stopped), 1);
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, "replica-rival"); /* not ours to release */
    fake_free(&f);
}

static void test_steps_down_when_renewals_fail(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    assert_true(wait_for(is_leader, &c));
    long status = 500;
    fake_set(&f, set_fail_status, &status);
    assert_true(wait_for(has_stopped, &c));
    assert_false(kq_leader_is_leader(c.l));
    assert_int_equal(atomic_load(&c.started), 1);
    assert_int_equal(atomic_load(&c.stopped), 1);
    /* the API server recovers; the lease still names us, so we take it back without a
     * transition */
    status = 0;
    fake_set(&f, set_fail_status, &status);
    assert_true(wait_for(is_leader, &c));
    assert_int_equal(atomic_load(&c.started), 2);
    assert_int_equal(kq_leader_acquisitions(c.l), 2);
    assert_int_equal(lease_int(&f, "leaseTransitions"), 0);
    /* same with an unreachable API server */
    bool down = true;
    fake_set(&f, set_fail_transport, &down);
    assert_true(wait_for(not_leader, &c));
    for (int i = 0; i < 4000 && atomic_load(&c.stopped) < 2; i++)
        sleep_ms(5);
    assert_int_equal(atomic_load(&c.stopped), 2);
    down = false;
    fake_set(&f, set_fail_transport, &down);
    kq_leader_stop(c.l);
    assert_int_equal(atomic_load(&c.stopped), 2);
    fake_free(&f);
}

static bool someone_blocked(void *arg)
{
    fake_t *f = arg;
    pthread_mutex_lock(&f->mu);
    bool b = f->blocked > 0;
    pthread_mutex_unlock(&f->mu);
    return b;
}

/* A renewal that hangs: the elector thread cannot run any callback, yet is_leader turns
 * false by itself at the renew deadline. */
static void test_hung_renewal_stops_leadership_by_the_clock(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    bool checked = false;
    for (int attempt = 0; attempt < 5 && !checked; attempt++) {
        bool block = false;
        fake_set(&f, set_block, &block);
        assert_true(wait_for(is_leader, &c));
        block = true;
        fake_set(&f, set_block, &block);
        assert_true(wait_for(someone_blocked, &f));
        int started = atomic_load(&c.started), stopped = atomic_load(&c.stopped);
        if (started != stopped + 1)
            continue; /* the thread stepped down before blocking (a stalled machine): again */
        assert_true(wait_for(not_leader, &c));
        /* still stuck in the request: no callback could have run */
        assert_true(someone_blocked(&f));
        assert_int_equal(atomic_load(&c.stopped), stopped);
        checked = true;
        /* the hung request finally fails: the callback follows */
        long status = 503;
        fake_set(&f, set_fail_status, &status);
        block = false;
        fake_set(&f, set_block, &block);
        for (int i = 0; i < 4000 && atomic_load(&c.stopped) == stopped; i++)
            sleep_ms(5);
        assert_int_equal(atomic_load(&c.stopped), stopped + 1);
        assert_false(kq_leader_is_leader(c.l));
        status = 0;
        fake_set(&f, set_fail_status, &status);
    }
    assert_true(checked);
    kq_leader_stop(c.l);
    fake_free(&f);
}

static void test_stop_releases_the_lease(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    assert_true(wait_for(is_leader, &c));
    kq_leader_stop(c.l);
    assert_int_equal(atomic_load(&c.started), 1);
    assert_int_equal(atomic_load(&c.stopped), 1);
    /* on_stopped_leading ran before the release: exactly one successful PUT after it */
    assert_int_equal(atomic_load(&c.puts_at_stop) + 1, counter(&f, &f.n_put_ok));
    char holder[64], renew[64], acq[64];
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    lease_str(&f, "renewTime", renew, sizeof(renew));
    lease_str(&f, "acquireTime", acq, sizeof(acq));
    assert_string_equal(holder, "");
    assert_int_equal(lease_int(&f, "leaseDurationSeconds"), 1);
    assert_int_equal(lease_int(&f, "leaseTransitions"), 0);
    assert_matches(renew, MICRO_RE);
    assert_matches(acq, MICRO_RE);
    assert_int_equal(counter(&f, &f.n_bad), 0);
    fake_free(&f);
}

static void test_release_after_a_conflict_rereads(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    assert_true(wait_for(is_leader, &c));
    /* stop; the release PUT meets a rival's write, so the lease is no longer ours */
    fake_set(&f, set_rival, (void *)"replica-rival");
    kq_leader_stop(c.l);
    char holder[64];
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    /* the rival may also have been met by a last renewal; either way it keeps the lease */
    assert_string_equal(holder, "replica-rival");
    assert_int_equal(atomic_load(&c.stopped), 1);
    assert_int_equal(counter(&f, &f.n_bad), 0);
    fake_free(&f);
}

static void test_two_replicas_one_leader_and_handover(void **state)
{
    fake_t f;
    fake_init(&f);
    cand_t a, b;
    cand_start(&a, &f, "replica-a");
    cand_start(&b, &f, "replica-b");
    wait_count(&f, &f.n_put_ok, 5);
    int la = atomic_load(&a.started) - atomic_load(&a.stopped);
    int lb = atomic_load(&b.started) - atomic_load(&b.stopped);
    assert_int_equal(la + lb, 1);
    cand_t *leader = la ? &a : &b, *standby = la ? &b : &a;
    const char *standby_id = la ? "replica-b" : "replica-a";
    char holder[64];
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, kq_leader_identity(leader->l));
    assert_int_equal(atomic_load(&standby->started), 0);
    /* the leader stops and releases; the standby takes over (transitions + 1) */
    long long tr = lease_int(&f, "leaseTransitions");
    kq_leader_stop(leader->l);
    assert_true(wait_for(is_leader, standby));
    lease_str(&f, "holderIdentity", holder, sizeof(holder));
    assert_string_equal(holder, standby_id);
    assert_int_equal(lease_int(&f, "leaseTransitions"), tr + 1);
    kq_leader_stop(standby->l);
    assert_int_equal(counter(&f, &f.n_bad), 0);
    fake_free(&f);
}

static void test_malformed_leases_are_not_taken(void **state)
{
    static const char *bodies[] = {
        "not json",
        "[]",
        "{\"metadata\":{},\"spec\":{\"holderIdentity\":\"\"}}",                         /* no resourceVersion */
        "{\"metadata\":{\"resourceVersion\":7},\"spec\":{}}",                           /* not a string */
        "{\"metadata\":{\"resourceVersion\":\"7\"},\"spec\":[1,2]}",                    /* spec not an object */
        "{\"metadata\":{\"resourceVersion\":\"7\"",                                     /* truncated */
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        fake_t f;
        fake_init(&f);
        fake_seed(&f, "", 1, "2020-01-01T00:00:00.000000Z", 0);
        fake_set(&f, set_get_body, (void *)bodies[i]);
        cand_t c;
        cand_start(&c, &f, "replica-a");
        wait_count(&f, &f.n_get, 3);
        assert_false(kq_leader_is_leader(c.l));
        if (counter(&f, &f.n_put) != 0 || counter(&f, &f.n_post) != 0)
            fail_msg("body %zu: the elector wrote after reading a malformed lease", i);
        kq_leader_stop(c.l);
        fake_free(&f);
    }
    /* a lease with an empty spec (no holder) is free to take */
    fake_t f;
    fake_init(&f);
    pthread_mutex_lock(&f.mu);
    store_locked(&f, json_object());
    pthread_mutex_unlock(&f.mu);
    cand_t c;
    cand_start(&c, &f, "replica-a");
    assert_true(wait_for(is_leader, &c));
    assert_int_equal(lease_int(&f, "leaseTransitions"), 1);
    kq_leader_stop(c.l);
    fake_free(&f);
}

/* ======================================================================================
 * the lease decision (kq_leader_lease_decide) and MicroTime
 * ====================================================================================== */

#define ME "replica-a"
#define NOW_TIME "2026-11-27T10:15:05.000001Z"
#define NOW_SEC 1795774505 /* NOW_TIME, from test_format_microtime's 1795774503 = 10:15:03 */
#define SEC_NS 1000000000LL

static void test_parse_microtime(void **state)
{
    static const struct {
        const char *in;
        long long sec;
        long nsec;
    } good[] = {
        {"2026-11-27T10:15:03.654321Z", 1795774503, 654321000},
        {"2026-11-27T11:15:03.654321+01:00", 1795774503, 654321000},
        {"2026-11-27T04:45:03.654321-05:30", 1795774503, 654321000},
        {"2026-11-27T10:15:03Z", 1795774503, 0},
        {"2026-11-27T10:15:03.5Z", 1795774503, 500000000},
        {"2026-11-27T10:15:03.123456789Z", 1795774503, 123456789},
        {"1970-01-01T00:00:00.000000Z", 0, 0},
        {"1969-12-31T23:59:59.999999Z", -1, 999999000},
        {"2024-02-29T00:00:00Z", 1709164800, 0},
        {"2000-02-29T00:00:00Z", 951782400, 0},
        {"0000-01-01T00:00:00.000000Z", -62167219200LL, 0},
        {"9999-12-31T23:59:59.999999Z", 253402300799LL, 999999000},
        {"9999-12-31T23:59:59Z", 253402300799LL, 0},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct timespec ts = {-7, -7};
        char err[128] = "x";
        if (kq_leader_parse_microtime(good[i].in, &ts, err, sizeof(err)) != 0 || ts.tv_sec != good[i].sec ||
            ts.tv_nsec != good[i].nsec)
            fail_msg("\"%s\": expected %lld.%09ld, got %lld.%09ld (%s)", good[i].in, good[i].sec, good[i].nsec,
                     (long long)ts.tv_sec, ts.tv_nsec, err);
        assert_string_equal(err, "");
    }
    static const struct {
        const char *in, *words;
    } bad[] = {
        {"2016-12-31T23:59:60.000000Z", "leap second"},
        {"2026-11-27T10:15:03.1234567890Z", "more than 9 fractional digits"},
        {"2026-11-27T10:15:03.Z", "no digit after the decimal point"},
        {"2026-13-27T10:15:03.654321Z", "month"},
        {"2026-00-27T10:15:03.654321Z", "month"},
        {"2025-02-29T10:15:03.654321Z", "day"},
        {"1900-02-29T10:15:03.654321Z", "day"},
        {"2026-04-31T10:15:03.654321Z", "day"},
        {"2026-11-00T10:15:03.654321Z", "day"},
        {"2026-11-27T24:00:00.000000Z", "hour"},
        {"2026-11-27T10:60:03.654321Z", "minute"},
        {"2026-11-27T10:15:61.654321Z", "second"},
        {"2026-11-27T10:15:03.654321+24:00", "offset"},
        {"2026-11-27T10:15:03.654321+01:60", "offset"},
        {"2026-11-27T10:15:03.654321", "time zone"},
        {"2026-11-27T10:15:03.654321Zjunk", "time zone"},
        {"2026-11-27T10:15:03.654321+0100", "time zone"},
        {"2026-11-27t10:15:03.654321z", "RFC 3339"},
        {"2026-11-27 10:15:03.654321Z", "RFC 3339"},
        {"+2026-11-27T10:15:03Z", "RFC 3339"},
        {"-001-11-27T10:15:03Z", "RFC 3339"},
        {"10000-11-27T10:15:03Z", "RFC 3339"},
        {"2026-11-27T10:15Z", "RFC 3339"},
        {"", "RFC 3339"},
        {NULL, "RFC 3339"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct timespec ts = {-7, -7};
        char err[128] = "";
        int rc = kq_leader_parse_microtime(bad[i].in, &ts, err, sizeof(err));
        if (rc != KQ_EPARSE || ts.tv_sec != -7 || ts.tv_nsec != -7 || strstr(err, bad[i].words) == NULL)
            fail_msg("\"%s\": rc %d, error \"%s\" (expected KQ_EPARSE mentioning \"%s\", output untouched)",
                     bad[i].in ? bad[i].in : "(null)", rc, err, bad[i].words);
    }
}

/* A Lease body as the API server returns it; NULL strings are left out of spec. */
static char *lease_body(const char *holder, const char *dur, const char *acquire, const char *renew,
                        const char *transitions)
{
    char spec[1024] = "", *p = spec;
    size_t left = sizeof(spec);
    const char *keys[] = {"holderIdentity", "leaseDurationSeconds", "acquireTime", "renewTime", "leaseTransitions"};
    const char *vals[] = {holder, dur, acquire, renew, transitions};
    for (size_t i = 0; i < 5; i++) {
        if (vals[i] == NULL)
            continue;
        int n = snprintf(p, left, "%s\"%s\":%s", p == spec ? "" : ",", keys[i], vals[i]);
        assert_true(n > 0 && (size_t)n < left);
        p += n;
        left -= (size_t)n;
    }
    char *out = NULL;
    assert_true(asprintf(&out,
                         "{\"apiVersion\":\"coordination.k8s.io/v1\",\"kind\":\"Lease\",\"metadata\":{\"name\":\"" NAME
                         "\",\"namespace\":\"" NS "\",\"resourceVersion\":\"4242\",\"uid\":\"7e7e7e7e-1111\","
                         "\"creationTimestamp\":\"2026-11-20T08:00:00Z\"},\"spec\":{%s}}",
                         spec) > 0);
    return out;
}

static int decide_at(const char *body, long long now_ns, const char *prev, long long prev_seen,
                     kq_leader_decision_t *d, char *err, size_t errlen)
{
    kq_leader_lease_in_t in = {
        .identity = ME,
        .duration_ms = 1500, /* written as 2 s */
        .now_time = NOW_TIME,
        .now_ns = now_ns,
        .prev_record = prev,
        .prev_seen_ns = prev_seen,
    };
    return kq_leader_lease_decide(body, body ? strlen(body) : 0, &in, d, err, errlen);
}

/* The spec of the body a decision would PUT (new reference). */
static json_t *put_spec(const kq_leader_decision_t *d)
{
    assert_non_null(d->body);
    json_t *o = json_loads(d->body, 0, NULL);
    assert_non_null(o);
    assert_string_equal(json_string_value(json_object_get(o, "kind")), "Lease");
    assert_string_equal(json_string_value(json_object_get(o, "apiVersion")), "coordination.k8s.io/v1");
    /* the precondition and the rest of the metadata are what we read */
    json_t *md = json_object_get(o, "metadata");
    assert_string_equal(json_string_value(json_object_get(md, "resourceVersion")), "4242");
    assert_string_equal(json_string_value(json_object_get(md, "name")), NAME);
    assert_string_equal(json_string_value(json_object_get(md, "uid")), "7e7e7e7e-1111");
    json_t *spec = json_incref(json_object_get(o, "spec"));
    json_decref(o);
    return spec;
}

static void assert_spec(json_t *spec, const char *holder, long long dur_s, const char *acquire, const char *renew,
                        long long transitions)
{
    assert_string_equal(json_string_value(json_object_get(spec, "holderIdentity")), holder);
    assert_int_equal(json_integer_value(json_object_get(spec, "leaseDurationSeconds")), dur_s);
    assert_string_equal(json_string_value(json_object_get(spec, "acquireTime")), acquire);
    assert_string_equal(json_string_value(json_object_get(spec, "renewTime")), renew);
    assert_true(json_is_integer(json_object_get(spec, "leaseTransitions")));
    assert_int_equal(json_integer_value(json_object_get(spec, "leaseTransitions")), transitions);
}

static void test_decide_held_by_another_and_valid(void **state)
{
    char *body = lease_body("\"replica-b\"", "15", "\"2026-11-27T09:00:00.123456Z\"", "\"2026-11-27T10:15:03.654321Z\"",
                            "3");
    kq_leader_decision_t d;
    char err[256];
    assert_int_equal(decide_at(body, 1000, NULL, 0, &d, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_int_equal(d.action, KQ_LEADER_WAIT);
    assert_string_equal(kq_leader_action_name(d.action), "wait");
    assert_null(d.body);
    assert_string_equal(d.holder, "replica-b");
    assert_string_equal(d.resource_version, "4242");
    assert_true(d.changed);
    assert_int_equal(d.seen_ns, 1000);
    assert_int_equal(d.duration_ms, 15000); /* the lease's, not ours */
    assert_int_equal(d.expires_ns, 1000 + 15 * SEC_NS);
    assert_int_equal(d.transitions, 3);
    assert_true(d.has_renew_time && d.has_acquire_time);
    assert_int_equal(d.renew_time.tv_sec, 1795774503);
    assert_int_equal(d.renew_time.tv_nsec, 654321000);
    assert_non_null(d.lease);
    /* a renewTime far in the past does not matter: only our clock does */
    kq_leader_decision_t e;
    assert_int_equal(decide_at(body, 1000 + 15 * SEC_NS - 1, d.record, d.seen_ns, &e, err, sizeof(err)), 0);
    assert_int_equal(e.action, KQ_LEADER_WAIT);
    assert_false(e.changed);
    assert_int_equal(e.seen_ns, 1000);
    kq_leader_decision_free(&e);
    /* the holder renews (the record changes): the clock restarts */
    char *renewed = lease_body("\"replica-b\"", "15", "\"2026-11-27T09:00:00.123456Z\"",
                               "\"2026-11-27T10:15:05.654321Z\"", "3");
    assert_int_equal(decide_at(renewed, 1000 + 20 * SEC_NS, d.record, d.seen_ns, &e, err, sizeof(err)), 0);
    assert_int_equal(e.action, KQ_LEADER_WAIT);
    assert_true(e.changed);
    assert_int_equal(e.seen_ns, 1000 + 20 * SEC_NS);
    kq_leader_decision_free(&e);
    free(renewed);
    kq_leader_decision_free(&d);
    assert_null(d.holder);
    kq_leader_decision_free(&d); /* a freed decision is zero: freeing again is a no-op */
    kq_leader_decision_free(NULL);
    free(body);
}

static void test_decide_expired_is_taken_over(void **state)
{
    char *body = lease_body("\"replica-b\"", "15", "\"2026-11-27T09:00:00.123456Z\"", "\"2026-11-27T10:15:03.654321Z\"",
                            "3");
    kq_leader_decision_t d, e;
    char err[256];
    assert_int_equal(decide_at(body, -5 * SEC_NS, NULL, 0, &d, err, sizeof(err)), 0);
    assert_int_equal(d.action, KQ_LEADER_WAIT);
    /* unchanged for exactly its duration (15 s, not our 1.5 s): expired */
    assert_int_equal(decide_at(body, 10 * SEC_NS, d.record, d.seen_ns, &e, err, sizeof(err)), 0);
    assert_int_equal(e.action, KQ_LEADER_TAKEOVER);
    assert_string_equal(kq_leader_action_name(e.action), "takeover");
    assert_string_equal(e.holder, "replica-b");
    json_t *spec = put_spec(&e);
    assert_spec(spec, ME, 2, NOW_TIME, NOW_TIME, 4);
    json_decref(spec);
    kq_leader_decision_free(&e);
    kq_leader_decision_free(&d);
    free(body);
}

static void test_decide_our_own_lease_is_renewed(void **state)
{
    char *body = lease_body("\"" ME "\"", "2", "\"2026-11-27T09:00:00.123456Z\"", "\"2026-11-27T10:15:03.654321Z\"",
                            "7");
    kq_leader_decision_t d;
    char err[256];
    assert_int_equal(decide_at(body, 0, NULL, 0, &d, err, sizeof(err)), 0);
    assert_int_equal(d.action, KQ_LEADER_RENEW);
    assert_string_equal(kq_leader_action_name(d.action), "renew");
    json_t *spec = put_spec(&d);
    assert_spec(spec, ME, 2, "2026-11-27T09:00:00.123456Z", NOW_TIME, 7); /* acquireTime and count kept */
    json_decref(spec);
    kq_leader_decision_free(&d);
    free(body);
    /* ours without an acquireTime: now */
    body = lease_body("\"" ME "\"", "2", NULL, "\"2026-11-27T10:15:03.654321Z\"", NULL);
    assert_int_equal(decide_at(body, 0, NULL, 0, &d, err, sizeof(err)), 0);
    assert_int_equal(d.action, KQ_LEADER_RENEW);
    assert_false(d.has_acquire_time);
    spec = put_spec(&d);
    assert_spec(spec, ME, 2, NOW_TIME, NOW_TIME, 0);
    json_decref(spec);
    kq_leader_decision_free(&d);
    free(body);
}

static void test_decide_empty_holder_is_acquired(void **state)
{
    /* released (holderIdentity ""), holder null, and no record at all: free to take at once,
     * whatever the clock */
    char *bodies[] = {
        lease_body("\"\"", "1", "\"2026-11-27T09:00:00.123456Z\"", "\"2026-11-27T10:15:03.654321Z\"", "5"),
        lease_body("null", "null", "null", "null", "null"),
        lease_body(NULL, NULL, NULL, NULL, NULL),
        strdup("{\"metadata\":{\"resourceVersion\":\"4242\",\"name\":\"" NAME "\",\"uid\":\"7e7e7e7e-1111\"}}"),
    };
    const long long transitions[] = {6, 1, 1, 1};
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        kq_leader_decision_t d;
        char err[256];
        assert_int_equal(decide_at(bodies[i], LLONG_MIN, NULL, 0, &d, err, sizeof(err)), 0);
        assert_int_equal(d.action, KQ_LEADER_ACQUIRE);
        assert_string_equal(d.holder, "");
        json_t *spec = put_spec(&d);
        assert_spec(spec, ME, 2, NOW_TIME, NOW_TIME, transitions[i]);
        json_decref(spec);
        kq_leader_decision_free(&d);
        free(bodies[i]);
    }
}

static void test_decide_keeps_unknown_spec_fields(void **state)
{
    char *body = lease_body("\"\"", "1", NULL, NULL, "\"2\",\"preferredHolder\":\"replica-c\"");
    kq_leader_decision_t d;
    char err[256];
    /* leaseTransitions "2" is a string: refused, like client-go */
    assert_int_equal(decide_at(body, 0, NULL, 0, &d, err, sizeof(err)), KQ_EPARSE);
    free(body);
    body = lease_body("\"\"", "1", NULL, NULL, "2,\"preferredHolder\":\"replica-c\"");
    assert_int_equal(decide_at(body, 0, NULL, 0, &d, err, sizeof(err)), 0);
    json_t *spec = put_spec(&d);
    assert_string_equal(json_string_value(json_object_get(spec, "preferredHolder")), "replica-c");
    assert_int_equal(json_integer_value(json_object_get(spec, "leaseTransitions")), 3);
    json_decref(spec);
    kq_leader_decision_free(&d);
    free(body);
}

static void test_decide_malformed_microtime(void **state)
{
    static const struct {
        const char *acquire, *renew, *words;
    } cases[] = {
        {"\"2026-11-27T09:00:00.123456Z\"", "\"2016-12-31T23:59:60.000000Z\"", "spec.renewTime"},
        {"\"2026-11-27T09:00:00.1234567890Z\"", "\"2026-11-27T10:15:03.654321Z\"", "spec.acquireTime"},
        {"\"2026-11-27T09:00:00.123456Z\"", "\"2025-02-29T10:15:03.654321Z\"", "day out of range"},
        {"\"2026-11-27T09:00:00.123456Z\"", "\"2026-11-27T10:15:03.654321\"", "time zone"},
        {"\"2026-11-27T09:00:00.123456Z\"", "\"\"", "spec.renewTime"},
        {"1795774503", "\"2026-11-27T10:15:03.654321Z\"", "spec.acquireTime is not a string"},
        {"\"2026-11-27T09:00:00.123456Z\"", "\"a\\\"quote\"", "spec.renewTime 'a?quote'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *body = lease_body("\"\"", "15", cases[i].acquire, cases[i].renew, "1");
        kq_leader_decision_t d;
        memset(&d, 0x5a, sizeof(d));
        kq_leader_decision_t untouched = d;
        char err[256] = "";
        int rc = decide_at(body, 0, NULL, 0, &d, err, sizeof(err));
        if (rc != KQ_EPARSE || strncmp(err, "lease: ", 7) != 0 || strstr(err, cases[i].words) == NULL)
            fail_msg("case %zu: rc %d, error \"%s\" (expected KQ_EPARSE mentioning \"%s\")", i, rc, err,
                     cases[i].words);
        assert_memory_equal(&d, &untouched, sizeof(d));
        free(body);
    }
}

static void test_decide_huge_and_odd_durations(void **state)
{
    kq_leader_decision_t d, e;
    char err[256];
    /* the int32 maximum is respected (68 years) and the arithmetic saturates */
    char *body = lease_body("\"replica-b\"", "2147483647", NULL, NULL, "2147483647");
    assert_int_equal(decide_at(body, LLONG_MAX - 5, NULL, 0, &d, err, sizeof(err)), 0);
    assert_int_equal(d.duration_ms, 2147483647000LL);
    assert_int_equal(d.expires_ns, LLONG_MAX);
    assert_int_equal(d.action, KQ_LEADER_WAIT); /* just seen: not expired, even at the clock's end */
    assert_int_equal(decide_at(body, LLONG_MIN, d.record, d.seen_ns, &e, err, sizeof(err)), 0);
    assert_int_equal(e.action, KQ_LEADER_WAIT); /* seen "in the future": elapsed < 0 */
    kq_leader_decision_free(&e);
    assert_int_equal(decide_at(body, LLONG_MAX, d.record, LLONG_MIN, &e, err, sizeof(err)), 0);
    assert_int_equal(e.action, KQ_LEADER_TAKEOVER); /* elapsed saturates at LLONG_MAX */
    json_t *spec = put_spec(&e);
    assert_int_equal(json_integer_value(json_object_get(spec, "leaseTransitions")), 2147483647); /* saturated */
    json_decref(spec);
    kq_leader_decision_free(&e);
    kq_leader_decision_free(&d);
    free(body);
    /* absent, null, zero or negative: our duration (1.5 s) */
    const char *ours[] = {NULL, "null", "0", "-15", "-2147483648"};
    for (size_t i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
        body = lease_body("\"replica-b\"", ours[i], NULL, NULL, "-3");
        assert_int_equal(decide_at(body, 0, NULL, 0, &d, err, sizeof(err)), 0);
        assert_int_equal(d.duration_ms, 1500);
        assert_int_equal(d.transitions, 0); /* negative counts as 0 */
        kq_leader_decision_free(&d);
        free(body);
    }
    /* not an int32: refused */
    static const struct {
        const char *dur, *words;
    } bad[] = {
        {"2147483648", "out of the int32 range"},
        {"-2147483649", "out of the int32 range"},
        {"9223372036854775807", "out of the int32 range"},
        {"15.0", "not an integer"},
        {"\"15\"", "not an integer"},
        {"true", "not an integer"},
        {"99999999999999999999", "not JSON"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        body = lease_body("\"replica-b\"", bad[i].dur, NULL, NULL, NULL);
        err[0] = '\0';
        int rc = decide_at(body, 0, NULL, 0, &d, err, sizeof(err));
        if (rc != KQ_EPARSE || strstr(err, bad[i].words) == NULL)
            fail_msg("leaseDurationSeconds %s: rc %d, error \"%s\"", bad[i].dur, rc, err);
        free(body);
    }
}

static void test_decide_refuses_what_is_not_a_lease(void **state)
{
    static const struct {
        const char *body, *words;
    } cases[] = {
        {"", "empty body"},
        {"not json", "not JSON"},
        {"[]", "not a JSON object"},
        {"{\"metadata\":{\"resourceVersion\":\"7\"", "not JSON"},
        {"{\"metadata\":{},\"spec\":{\"holderIdentity\":\"\"}}", "resourceVersion"},
        {"{\"metadata\":{\"resourceVersion\":\"\"},\"spec\":{}}", "resourceVersion"},
        {"{\"metadata\":{\"resourceVersion\":7},\"spec\":{}}", "resourceVersion"},
        {"{\"metadata\":[],\"spec\":{}}", "resourceVersion"},
        {"{\"metadata\":{\"resourceVersion\":\"7\"},\"spec\":[1,2]}", "spec is not an object"},
        {"{\"metadata\":{\"resourceVersion\":\"7\"},\"spec\":{\"holderIdentity\":42}}", "holderIdentity"},
        {"{\"metadata\":{\"resourceVersion\":\"7\"},\"spec\":{\"holderIdentity\":\"a\\u0000b\"}}", "not JSON"},
        {"{\"kind\":\"Status\",\"metadata\":{\"resourceVersion\":\"7\"},\"code\":403}", "kind is 'Status'"},
        {"{\"kind\":\"Lease\",\"apiVersion\":\"coordination.k8s.io/v1beta1\",\"metadata\":{\"resourceVersion\":\"7\"}}",
         "apiVersion"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        kq_leader_decision_t d;
        memset(&d, 0x5a, sizeof(d));
        kq_leader_decision_t untouched = d;
        char err[256] = "";
        int rc = decide_at(cases[i].body, 0, NULL, 0, &d, err, sizeof(err));
        if (rc != KQ_EPARSE || strncmp(err, "lease: ", 7) != 0 || strstr(err, cases[i].words) == NULL)
            fail_msg("case %zu: rc %d, error \"%s\" (expected KQ_EPARSE mentioning \"%s\")", i, rc, err,
                     cases[i].words);
        assert_memory_equal(&d, &untouched, sizeof(d));
    }
    /* too large, before parsing */
    size_t n = KQ_LEADER_LEASE_MAX_BODY + 1;
    char *big = malloc(n);
    assert_non_null(big);
    memset(big, ' ', n);
    kq_leader_lease_in_t in = {.identity = ME, .duration_ms = 1500, .now_time = NOW_TIME};
    kq_leader_decision_t d;
    char err[256] = "";
    assert_int_equal(kq_leader_lease_decide(big, n, &in, &d, err, sizeof(err)), KQ_ETOOBIG);
    assert_non_null(strstr(err, "more than"));
    free(big);
    /* bad arguments */
    char *body = lease_body("\"\"", "1", NULL, NULL, NULL);
    kq_leader_lease_in_t bad_in[] = {
        {.identity = NULL, .duration_ms = 1500, .now_time = NOW_TIME},
        {.identity = "", .duration_ms = 1500, .now_time = NOW_TIME},
        {.identity = ME, .duration_ms = 0, .now_time = NOW_TIME},
        {.identity = ME, .duration_ms = 86400001, .now_time = NOW_TIME},
        {.identity = ME, .duration_ms = 1500, .now_time = NULL},
        {.identity = ME, .duration_ms = 1500, .now_time = "yesterday"},
    };
    for (size_t i = 0; i < sizeof(bad_in) / sizeof(bad_in[0]); i++)
        assert_int_equal(kq_leader_lease_decide(body, strlen(body), &bad_in[i], &d, err, sizeof(err)), KQ_EINVAL);
    assert_int_equal(kq_leader_lease_decide(body, strlen(body), NULL, &d, err, sizeof(err)), KQ_EINVAL);
    assert_int_equal(kq_leader_lease_decide(body, strlen(body), &in, NULL, NULL, 0), KQ_EINVAL);
    free(body);
}

/* The body to PUT, read back as the API server would echo it: ours, renewed by us and
 * respected by another replica. */
static void test_decide_round_trip(void **state)
{
    char *body = lease_body("\"replica-b\"", "15", "\"2026-11-27T09:00:00.123456Z\"", "\"2026-11-27T10:15:03.654321Z\"",
                            "3");
    kq_leader_decision_t d, w, o;
    char err[256];
    assert_int_equal(decide_at(body, 0, NULL, 0, &d, err, sizeof(err)), 0);
    assert_int_equal(decide_at(body, 15 * SEC_NS, d.record, d.seen_ns, &w, err, sizeof(err)), 0);
    assert_int_equal(w.action, KQ_LEADER_TAKEOVER);
    kq_leader_decision_t r;
    assert_int_equal(decide_at(w.body, 0, NULL, 0, &r, err, sizeof(err)), 0);
    assert_int_equal(r.action, KQ_LEADER_RENEW);
    assert_int_equal(r.transitions, 4);
    assert_int_equal(r.duration_ms, 2000);
    assert_int_equal(r.renew_time.tv_sec, NOW_SEC);
    assert_int_equal(r.renew_time.tv_nsec, 1000);
    kq_leader_lease_in_t in = {.identity = "replica-b", .duration_ms = 15000, .now_time = NOW_TIME, .now_ns = 9};
    assert_int_equal(kq_leader_lease_decide(w.body, strlen(w.body), &in, &o, err, sizeof(err)), 0);
    assert_int_equal(o.action, KQ_LEADER_WAIT);
    assert_string_equal(o.holder, ME);
    assert_int_equal(o.duration_ms, 2000); /* the duration the lease says, not replica-b's */
    kq_leader_decision_free(&o);
    kq_leader_decision_free(&r);
    kq_leader_decision_free(&w);
    kq_leader_decision_free(&d);
    free(body);
}

int main(void)
{
    if (getenv("KQ_TEST_VERBOSE") == NULL)
        kq_log_level_current = -1; /* the tests provoke errors on purpose */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format_microtime),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_opts_check),
        cmocka_unit_test(test_start_needs_a_client),
        cmocka_unit_test(test_default_identity),
        cmocka_unit_test(test_acquires_by_creating_the_lease),
        cmocka_unit_test(test_renews_keeping_acquire_time),
        cmocka_unit_test(test_takes_over_an_expired_lease),
        cmocka_unit_test(test_leaves_a_valid_lease_alone),
        cmocka_unit_test(test_a_renewed_lease_is_not_taken_whatever_its_times),
        cmocka_unit_test(test_conflict_on_takeover_means_not_leader),
        cmocka_unit_test(test_conflict_on_renew_steps_down),
        cmocka_unit_test(test_steps_down_when_renewals_fail),
        cmocka_unit_test(test_hung_renewal_stops_leadership_by_the_clock),
        cmocka_unit_test(test_stop_releases_the_lease),
        cmocka_unit_test(test_release_after_a_conflict_rereads),
        cmocka_unit_test(test_two_replicas_one_leader_and_handover),
        cmocka_unit_test(test_malformed_leases_are_not_taken),
        cmocka_unit_test(test_parse_microtime),
        cmocka_unit_test(test_decide_held_by_another_and_valid),
        cmocka_unit_test(test_decide_expired_is_taken_over),
        cmocka_unit_test(test_decide_our_own_lease_is_renewed),
        cmocka_unit_test(test_decide_empty_holder_is_acquired),
        cmocka_unit_test(test_decide_keeps_unknown_spec_fields),
        cmocka_unit_test(test_decide_malformed_microtime),
        cmocka_unit_test(test_decide_huge_and_odd_durations),
        cmocka_unit_test(test_decide_refuses_what_is_not_a_lease),
        cmocka_unit_test(test_decide_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
