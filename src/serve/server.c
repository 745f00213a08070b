/* HTTP(S) server: civetweb with our own TLS setup, a routing table, request body limits,
 * JSON error responses and per-endpoint latency metrics. Handlers are thin: read the
 * body, call extender/rest/metrics, write what they return.
 *
 * THREAD MAP (the whole process; see also sync.h, kube.h, ledger.h, ugm.h)
 *
 *   main              parses flags, builds kq_app_t, starts and stops everything below,
 *                     then waits in sigwait(). Writes app's members only before the server
 *                     starts and after it has stopped (except through the modules' APIs).
 *   civetweb master   accepts connections and queues them for the workers. Touches nothing
 *                     of ours.
 *   civetweb workers  (opts.threads, --threads, default 64; the scheduler listener's and the
 *                     webhook listener's own, when configured) run on_request() -> the route handler:
 *                     filter/bind/preempt (extender.c): config snapshot (holder lock, only
 *                       for the pointer swap; then a reference), ledger check/assume/forget
 *                       (ledger lock -> ugm locks), a denial recorded in requeue's table
 *                       (its leaf lock, O(1)), kube GET pod / POST binding / queue an
 *                       event, always with no lock held;
 *                     REST views (rest.c): ugm JSON views (ugm locks), config parse of the
 *                       request body (no lock);
 *                     /metrics: atomics, ledger size (ledger lock), ugm views (ugm locks);
 *                     /readyz: s->all_listening, app->ready (atomics).
 *                     The response is written (mg_write) after the handler returned, so no
 *                     lock is ever held across network I/O.
 *                     usage/users, usage/groups and applications (HTTP/1.1) are written in
 *                     64 KB chunks while built one element at a time (kq_ugm_users_each,
 *                     kq_ugm_apps_each: the trackers are pinned, the applications copied
 *                     under the ugm lock, and no lock is held while a chunk is written).
 *                     Large views (large_view(): users, groups, applications, charges,
 *                     gating, /metrics) first take one of --max-concurrent-views slots
 *                     (views_mu, a leaf lock; waiting at most 1 s, else 503) and give it back
 *                     once their answer is sent and freed, then call malloc_trim(0) with
 *                     no lock held.
 *   pod informer      (sync.c, via kube's watch thread) LIST/WATCH pods -> one kq_jdoc per
 *                     informer, reused per event -> kq_pod_parse with a config snapshot ->
 *                     ledger observe/remove/resync (ledger -> ugm);
 *                     sets app->ready after the first full list.
 *   kube events       (kube.c) drains the bounded event queue and POSTs Events; touches only
 *                     its queue (its own lock) and its own curl handles.
 *   config reload     (sync.c) re-reads queues.yaml off-lock, applies it whole to the ugm
 *                     (kq_ugm_set_config) and metering, swaps the holder's snapshot, counts
 *                     the result in metrics (atomics). A rejected file changes nothing.
 *   elastic           (elastic.c) a nodes informer (cluster total -> quota tree, metering), one
 *                     ElasticQuota informer per served API group and one for
 *                     ElasticQuotaProfiles (profiles.c) (-> quota tree and resolver under the
 *                     apply lock), and a timer thread: config changes, CRD probes, reclaim
 *                     evictions (reclaim.c, whose state only this thread touches) and status
 *                     writes (leader only; I/O on copies, no lock held), expiry of
 *                     unconfirmed ledger entries.
 *   leader            (leader.c) renews the Lease on its own API client; kq_leader_acts() is an
 *                     atomic read the elastic timer and metering check before acting.
 *   metering          (metering.c) computes prices and charges on its own thread under its own
 *                     lock; the informer feeds it; checkpoints are written with no lock held.
 *                     A pod's charge that moved through its claims reaches it from the pod,
 *                     claim and slice informers and from its own thread before a compute,
 *                     each under the ledger's feed lock (kq_ledger_flush_charges), never
 *                     from filter or bind.
 *   conn reaper       (this file, reaper_main) every 50 ms, per TLS port with a connection
 *                     limit (main, webhooks): when its workers are scarce, shuts down the
 *                     sockets of idle connections (on the webhook port only those never
 *                     answered) under that port's conn_limit_t.mu (a leaf
 *                     lock, also taken by workers at handshake start, request start/end
 *                     and connection free). Touches nothing else.
 *   requeue           (requeue.c, unless --requeue-window 0) one thread: when the ledger has
 *                     released usage, copies the recently denied pods out of its table
 *                     (its own leaf lock; the ledger's release hook and filter take it for
 *                     O(1) steps) and queues their annotation PATCHes on kube's event
 *                     queue with no lock held.
 *   usage history     (history.c, unless --history-interval 0) one thread: every interval
 *                     builds the ugm's queue and user views (ugm locks), then pushes the
 *                     numbers under its own leaf lock; /ws/v1/.../history readers copy out
 *                     under that lock and serialise after releasing it.
 *   admission gate    (gating.c, with --admission-gate) one thread: passes over the gated pods
 *                     the informer hands it (leader only), reservations in the ledger, then gate
 *                     patches and Events with no lock held; expires old reservations.
 *
 * Shared state and its guard: config snapshots are immutable and reference-counted; the
 * ledger, the ugm, the quota tree, elastic, the resolver, the trees' placement (a leaf),
 * metering and gating each have private locks, always taken in the order elastic apply ->
 * ledger -> ugm manager -> user tracker -> group tracker -> quota tree, ledger -> resolver
 * -> quota tree (elastic apply -> resolver), and ledger -> requeue (a leaf) (gating's lock comes first of all: gating -> ledger -> ..., gating -> metering) (metering's lock nests only inside the nodes lock and the ledger's feed lock; feed -> ledger, never the reverse); metrics are atomics; app's pointers are
 * read-only while the server runs. jansson values never cross threads (each request
 * parses its own), libcurl easy handles are per call.
 *
 * DESIGN: every request goes through begin_request (one callback, one routing table) so
 * that unknown paths, wrong methods, body limits and error bodies are handled in one place.
 * The response (status line, headers, body) is written by us with an explicit
 * Content-Length; civetweb's keep-alive handling is kept, except that after a 413 (or a
 * request body we did not read) the connection is closed rather than drained.
 */
#include "kubequota/serve/server.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <civetweb.h>
#include <openssl/pem.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "kubequota/serve/admission.h"
#include "kubequota/serve/auth.h"
#include "kubequota/serve/extender.h"
#include "kubequota/base/duration.h"
#include "kubequota/base/log.h"
#include "kubequota/control/metering.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/serve/rest.h"
#include "kubequota/serve/ui.h"
#include "kubequota/control/history.h"

#define DEFAULT_LISTEN "0.0.0.0:8443"
#define DEFAULT_MAX_BODY ((size_t)64 << 20)
#define DEFAULT_THREADS 64 /* civetweb holds a worker per keep-alive connection */
#define SINGLE_WRITE_MAX ((size_t)1 << 20)
#define DRAIN_MAX ((long long)256 << 10) /* bytes of a refused body we still read, to close cleanly */
#define IGNORED_BODY_MAX ((long long)64 << 10)
#define BODY_DEADLINE_S 8.0 /* a whole request body must arrive within this (slow bodies);
                               * below civetweb's request_timeout_ms (10 s) so that ours is met first */
#define BODY_BUDGET ((size_t)128 << 20) /* request bodies held in memory at once, all requests */
/* kube-scheduler binds pods in parallel (a goroutine per pod), and each extender bind holds a
 * worker for the Binding POST to the API server (tens to hundreds of ms under load); with 8,
 * filter calls of the (serial) scheduling cycle waited for a worker behind binds: 63 pods/s
 * against 107 with 64 at 500 nodes (BENCHMARKS.md, "End-to-end scheduling"). */
#define DEFAULT_SCHED_THREADS 64
#define DEFAULT_WEBHOOK_THREADS 32
/* Idle connections (conn_t) on a limited port are closed, and answers say Connection: close,
 * when fewer than this many of its workers are free: an eighth, at least one. */
#define REAP_RESERVE(workers) ((workers) / 8 > 1 ? (workers) / 8 : 1)
#define REAP_IDLE_MAIN_S 1.0     /* only connections idle at least this long are closed: on the main */
#define REAP_IDLE_WEBHOOK_S 0.25 /* port (people, scrapers) and on the webhook port (the API server
                                  * sends its whole request at once; turnover matters more) */
#define REAP_INTERVAL_MS 50  /* how often the reaper looks */
#define READ_PIECE_MAX ((size_t)256 << 10) /* largest single body read */
#define READ_SLOW_S 0.5                    /* a read slower than this restarts at one byte */
#define MAX_PARAMS 3
#define DEFAULT_MAX_VIEWS 2     /* large views built and sent at once (--max-concurrent-views) */
#define VIEW_WAIT_S 1.0         /* a large view over the limit waits this long for a slot, then 503 */
#define CT_JSON "application/json"
#define CT_JSON_WS "application/json; charset=UTF-8" /* /ws/v1 answers, as YuniKorn's writeHeaders */
#define CT_TEXT "text/plain; charset=utf-8"

/* TLS 1.2 suites: ECDHE key exchange (forward secrecy) with AEAD ciphers only. */
#define TLS12_CIPHERS                                                                                          \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"                \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

/* Connections a TLS port (the main one, and the webhook listener with its own instance)
 * holds per client address, from the start of the TLS handshake
 * (OpenSSL's info callback, before a byte is read) until the connection's SSL object is
 * freed (its ex_data free callback). A connection over the limit is shut down at once, so
 * idle TCP connections that never start TLS, idle TLS connections and slow requests from
 * one client hold at most `max` workers. mu is a leaf lock: nothing else is taken under it
 * (shutdown(2) of a refused socket happens after it is released). */
#define CLIENT_BUCKETS 256
typedef struct client {
    struct client *next;
    struct conn_limit *lim;
    unsigned char addr[16]; /* IPv4 (also IPv4-mapped IPv6) in the first 4 bytes */
    int family;
    int n; /* connections counted now */
} client_t;

/* One counted connection (the SSL's ex_data; civetweb's user connection data). Idle means
 * no request is being answered: in the TLS handshake, waiting for or reading a request's
 * headers, reading its body, or kept alive between requests. */
typedef struct conn {
    struct conn *prev, *next; /* lim->conns, oldest first */
    client_t *c;
    struct conn_limit *lim;
    int fd;
    bool busy;                /* a request's body is in and it is being answered */
    bool shed;                /* shut down by the reaper; closes soon */
    bool answered;            /* a response was written on it (kept alive since) */
    double since;             /* monotonic seconds: idle since (or the request started) */
} conn_t;

typedef struct conn_limit {
    pthread_mutex_t mu;
    int max;                      /* per client address; 0: no cap (the webhook port) */
    client_t *bucket[CLIENT_BUCKETS];
    unsigned long refused;        /* since the last warning */
    time_t warned;                /* monotonic seconds of the last warning */
    /* Idle connections closed when workers are scarce (the reaper, reap_port) */
    int workers;                  /* the port's worker threads (set before it starts) */
    double idle_s;                /* idle this long, a connection may be closed (REAP_IDLE_*) */
    conn_t *head, *tail;          /* every counted connection, oldest first */
    int live;                     /* counted and not shed */
    unsigned long reaped;         /* shed since the last warning */
    time_t reap_warned;
    bool keep_answered;           /* never shed a connection that was answered (the webhook port) */
    unsigned long declined;       /* answered with Connection: close while scarce, since the warning */
    time_t decline_warned;
} conn_limit_t;

/* What a listener's civetweb context carries as user data. */
typedef struct port {
    struct kq_server *s;
    bool scheduler;      /* the scheduler listener: scheduler verbs and probes only */
    bool webhook;        /* the webhook listener: admission webhooks and probes only */
    conn_limit_t *limit; /* per-client connection limit, or NULL */
    bool tls;            /* serves TLS (set before its listener starts; read-only after) */
} port_t;

typedef struct tls_id {
    X509 *leaf;
    STACK_OF(X509) *chain;
    EVP_PKEY *key;
} tls_id_t;

struct kq_server {
    struct mg_context *ctx;
    struct mg_context *sched_ctx; /* --scheduler-listen, or NULL */
    bool sched_separate;          /* scheduler_listen set: the main port does not serve the verbs
                                   * (set before any listener starts; read-only after) */
    port_t main_port, sched_port; /* user data of the two contexts */
    conn_limit_t main_limit;      /* the main port's per-client connection limit */
    bool main_limit_init;
    struct mg_context *wh_ctx;    /* --webhook-listen, or NULL */
    bool wh_separate;             /* webhook_listen set: the main port does not serve the webhooks
                                   * (set before any listener starts; read-only after) */
    port_t wh_port;               /* user data of the webhook context */
    conn_limit_t wh_limit;        /* the webhook port's own per-client connection limit */
    bool wh_limit_init;
    /* Set once every listener of kq_server_start is up: /readyz answers 503 before, since
     * the pod list may be in (app->ready) while the scheduler's or the webhooks' own
     * listener is still starting, and a caller told "ready" would be refused there. */
    atomic_bool all_listening;
    /* The reaper thread (reaper_main): closes idle connections of the limited ports when
     * their workers are scarce. reap_mu guards reap_stop; the ports' lists are guarded by
     * their own conn_limit_t.mu (never both at once). */
    pthread_t reaper;
    bool reaper_started;
    pthread_mutex_t reap_mu;
    pthread_cond_t reap_cv;
    bool reap_stop;
    atomic_size_t body_bytes;     /* request body bytes held now (BODY_BUDGET) */
    /* Large views (large_view()) in flight: at most views_max at once, from building the
     * answer until it is sent and freed. views_mu is a leaf lock (nothing else is taken
     * under it; no I/O under it); it guards views_busy and the refusal counters. */
    pthread_mutex_t views_mu;
    pthread_cond_t views_cv;
    bool views_init;
    int views_max;                /* 0 = no limit */
    int views_busy;
    unsigned long views_refused;  /* since the last warning */
    time_t views_warned;
    kq_app_t *app;
    size_t max_body;
    bool admission;                    /* webhook routes enabled */
    kq_auth_t *auth;                   /* borrowed; NULL = everything open */
    bool metrics_auth;                 /* /metrics follows the usage view's rules */
    bool extender_local_only;          /* scheduler verbs only from loopback (sidecar) */
    bool extender_open;                /* scheduler verbs from anyone (explicitly opened) */
    /* copies; adm_sched sets spec.schedulerName in the namespaces its filter processes,
     * adm_optin everywhere it is called (namespaces labelled kubequota.io/enabled=true) */
    kq_admission_opts_t adm, adm_sched, adm_optin;
    char *cert, *key, *ca;
    char tls_err[512]; /* written by init_ssl during kq_server_start (caller's thread) */

    /* Serving certificate, reloaded when its files change (cert-manager rotation). Every
     * handshake takes the current one in the SSL_CTX's certificate callback. */
    pthread_mutex_t tls_mu;  /* guards the four fields below */
    bool tls_mu_init;
    tls_id_t tls;            /* current leaf, chain and key (owned) */
    struct stat cert_st, key_st; /* identity of the files tls was loaded from */
    time_t tls_checked;      /* last time the files were looked at (monotonic seconds) */
};

/* ------------------------------------------------------------------ requests and responses */

typedef struct req {
    kq_server_t *s;
    char *param[MAX_PARAMS]; /* percent-decoded path parameters */
    char *body;              /* NUL-terminated; NULL for routes without a body */
    size_t body_len;
    const char *query;       /* the query string (after '?'), or NULL */
    bool identities;         /* /metrics: the caller may see per-user and per-group series */
    bool self_only;          /* self-service: authenticated as who.user without the usage
                              * permission; the handler serves only that user's own data */
    kq_auth_who_t who;
    size_t budget;           /* body budget bytes taken for this request */
    bool chunked_ok;         /* an HTTP/1.1 GET: the answer may be sent in chunks */
} req_t;

typedef struct resp {
    int status;
    const char *ctype;
    char *body; /* malloc'ed, or NULL with static_body */
    const char *static_body;
    size_t len;
    const char *cors_methods; /* /ws/v1 answers: the CORS headers, with these methods */
    bool yapi;                /* /ws/v1 answers: errors as YuniKorn's {"status_code",
                               * "message","description"}; elsewhere {"error": "..."} */
    const char *headers;      /* more header lines (static text, each ending in CRLF), or NULL */
    int stream;               /* STREAM_*: the body is written in chunks at send time (send_stream);
                               * status 200 and no body until then */
} resp_t;

enum { STREAM_NONE = 0, STREAM_USERS = 1, STREAM_GROUPS = 2, STREAM_APPS = 3 };

static void resp_static(resp_t *r, int status, const char *ctype, const char *text)
{
    r->status = status;
    r->ctype = ctype;
    r->body = NULL;
    r->static_body = text;
    r->len = strlen(text);
}

/* A JSON error body; a fixed text when even that cannot be built. */
static void resp_error(resp_t *r, int status, const char *message)
{
    size_t len = 0;
    char *b = NULL;
    if (r->yapi) {
        b = kq_rest_error_body(status, message, NULL, &len);
    } else {
        json_t *o = json_pack("{s:s}", "error", message != NULL ? message : "");
        b = o != NULL ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        len = b != NULL ? strlen(b) : 0;
    }
    if (b == NULL) {
        resp_static(r, status, CT_JSON,
                    r->yapi ? "{\"status_code\":500,\"message\":\"request failed\"}" : "{\"error\":\"request failed\"}");
        return;
    }
    r->status = status;
    r->ctype = CT_JSON;
    r->body = b;
    r->static_body = NULL;
    r->len = len;
}

/* A handler's (status, body) pair; body NULL means it ran out of memory. */
static void resp_take(resp_t *r, int status, const char *ctype, char *body, size_t len)
{
    if (body == NULL) {
        resp_static(r, 500, CT_JSON,
                    r->yapi ? "{\"status_code\":500,\"message\":\"out of memory\"}" : "{\"error\":\"out of memory\"}");
        return;
    }
    r->status = status;
    r->ctype = ctype;
    r->body = body;
    r->static_body = NULL;
    r->len = len;
}

/* Request text quoted in a message: printable ASCII only, cut at `max` bytes. */
static const char *printable(const char *in, char *out, size_t outlen)
{
    size_t i = 0;
    for (; in != NULL && in[i] != '\0' && i + 1 < outlen; i++) {
        unsigned char c = (unsigned char)in[i];
        out[i] = (c < 0x20 || c >= 0x7f || c == '"' || c == '\\') ? '?' : (char)c;
    }
    out[i] = '\0';
    return out;
}

/* The status line and headers into head (size 1536); the body's length, or chunked. Its
 * length, or 0 when it does not fit. */
static int response_head(struct mg_connection *conn, const resp_t *r, const char *allow, bool close, bool chunked,
                         char *head, size_t size)
{
    char cors[256] = "", length[64];
    /* CORS as YuniKorn's webservice sends it (apache/yunikorn-core pkg/webservice/handlers.go
     * writeHeaders), plus Authorization: the view needs a token. Any origin may read what a
     * token-bearing request returns; cookies and client certificates are not credentials a
     * "*" origin may use, so nothing is exposed to pages that hold no token. */
    if (r->cors_methods != NULL)
        snprintf(cors, sizeof(cors),
                 "Access-Control-Allow-Origin: *\r\n"
                 "Access-Control-Allow-Methods: %s\r\n"
                 "Access-Control-Allow-Headers: X-Requested-With,Content-Type,Accept,Origin,Authorization\r\n",
                 r->cors_methods);
    if (chunked)
        snprintf(length, sizeof(length), "Transfer-Encoding: chunked\r\n");
    else
        snprintf(length, sizeof(length), "Content-Length: %zu\r\n", r->len);
    int n = snprintf(head, size,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "%s"
                     "Cache-Control: no-store\r\n"
                     "X-Content-Type-Options: nosniff\r\n"
                     "%s%s%s%s%s%s\r\n",
                     r->status, mg_get_response_code_text(conn, r->status), r->ctype, length,
                     allow ? "Allow: " : "", allow ? allow : "", allow ? "\r\n" : "",
                     close ? "Connection: close\r\n" : "", cors, r->headers ? r->headers : "");
    return n > 0 && (size_t)n < size ? n : 0;
}

static void send_response(struct mg_connection *conn, const resp_t *r, const char *allow, bool close,
                          bool head_only)
{
    char head[1536];
    int n = response_head(conn, r, allow, close, false, head, sizeof(head));
    if (n == 0)
        return;
    const char *body = r->body ? r->body : r->static_body;
    size_t blen = head_only ? 0 : r->len; /* a HEAD answer (always 404/405 here) has no body */
    /* Headers and body in one write: two small writes on a connection without TCP_NODELAY
     * make the second wait for the peer's delayed ACK (about 40 ms per answer). */
    if (blen > 0 && blen <= SINGLE_WRITE_MAX) {
        char *all = malloc((size_t)n + blen);
        if (all != NULL) {
            memcpy(all, head, (size_t)n);
            memcpy(all + n, body, blen);
            mg_write(conn, all, (size_t)n + blen);
            free(all);
            return;
        }
    }
    if (mg_write(conn, head, (size_t)n) < 0)
        return;
    if (blen > 0)
        mg_write(conn, body, blen);
}

/* A streamed answer (resp_t.stream): chunks of up to STREAM_CHUNK bytes, each written with
 * its chunk-size line and CRLF in one mg_write. */
#define STREAM_CHUNK ((size_t)64 << 10)
#define STREAM_PAD 16 /* room for the chunk-size line before the data */
typedef struct chunker {
    struct mg_connection *conn;
    const resp_t *r;
    const char *allow;
    bool close;
    bool started;  /* the head is written */
    bool failed;   /* a write failed: nothing more is written */
    size_t used;   /* data bytes in buf */
    size_t total;  /* data bytes written */
    char buf[STREAM_PAD + STREAM_CHUNK + 2];
} chunker_t;

static int chunk_flush(chunker_t *c)
{
    if (c->used == 0)
        return 0;
    char line[STREAM_PAD];
    int h = snprintf(line, sizeof(line), "%zx\r\n", c->used);
    memcpy(c->buf + STREAM_PAD - h, line, (size_t)h);
    memcpy(c->buf + STREAM_PAD + c->used, "\r\n", 2);
    size_t n = (size_t)h + c->used + 2;
    if (mg_write(c->conn, c->buf + STREAM_PAD - h, n) != (int)n) {
        c->failed = true;
        return -1;
    }
    c->total += c->used;
    c->used = 0;
    return 0;
}

/* kq_rest_write_fn: the head on the first piece, then the data in chunks. */
static int chunk_write(void *ctx, const char *p, size_t n)
{
    chunker_t *c = ctx;
    if (c->failed)
        return -1;
    if (!c->started) {
        char head[1536];
        int hn = response_head(c->conn, c->r, c->allow, c->close, true, head, sizeof(head));
        if (hn == 0 || mg_write(c->conn, head, (size_t)hn) != hn) {
            c->failed = true;
            return -1;
        }
        c->started = true;
    }
    while (n > 0) {
        size_t k = STREAM_CHUNK - c->used < n ? STREAM_CHUNK - c->used : n;
        memcpy(c->buf + STREAM_PAD + c->used, p, k);
        c->used += k;
        p += k;
        n -= k;
        if (c->used == STREAM_CHUNK && chunk_flush(c) != 0)
            return -1;
    }
    return 0;
}

/* Sends a streamed answer (r->stream). An answer that is not streamed after all (an
 * unknown partition, an empty list) is sent as usual; a failure after the first byte cuts
 * the answer short (no last chunk) and closes the connection, so the client sees an
 * incomplete body, never a wrong one. r->len becomes the bytes of body written. */
static void send_stream(struct mg_connection *conn, const req_t *q, resp_t *r, const char *allow, bool close)
{
    static const kq_rest_view_t views[] = {[STREAM_USERS] = KQ_REST_VIEW_USERS, [STREAM_GROUPS] = KQ_REST_VIEW_GROUPS,
                                           [STREAM_APPS] = KQ_REST_VIEW_APPS};
    static const char *const names[] = {[STREAM_USERS] = "usage/users", [STREAM_GROUPS] = "usage/groups",
                                        [STREAM_APPS] = "applications"};
    int kind = r->stream;
    r->stream = STREAM_NONE;
    chunker_t *c = malloc(sizeof(*c));
    if (c == NULL) {
        resp_error(r, 500, "out of memory");
        send_response(conn, r, allow, close, false);
        return;
    }
    *c = (chunker_t){.conn = conn, .r = r, .allow = allow, .close = close};
    char *body = NULL;
    size_t len = 0;
    int st = kq_rest_stream(q->s->app, views[kind], q->param[0], kind == STREAM_APPS ? q->param[1] : NULL, chunk_write,
                            c, &body, &len);
    if (body != NULL || (st != 200 && st != -1 && !c->started)) { /* not streamed: an ordinary answer */
        resp_take(r, st, CT_JSON, body, len);
        send_response(conn, r, allow, close, false);
    } else if (st == 200 && chunk_flush(c) == 0 && mg_write(conn, "0\r\n\r\n", 5) == 5) {
        r->len = c->total;
    } else {
        r->len = c->total;
        mg_disable_keep_alive(conn);
        kq_warn("event=stream_cut path=%s bytes=%zu msg=\"a streamed answer was cut short (the client went "
                "away, or out of memory)\"", names[kind], c->total);
    }
    free(c);
}

/* ------------------------------------------------------------------ handlers */

/* Until the first full pod list is applied kubequota does not know what is already
 * running, so a decision could admit pods over a limit (right after a restart). The
 * scheduler verbs answer 503 then: kube-scheduler treats it as an error and retries. */
static bool extender_ready(const req_t *q, resp_t *r)
{
    if (atomic_load(&q->s->app->ready))
        return true;
    resp_error(r, 503, "kubequota is starting: the pod list is not loaded yet, so no quota decision can be made");
    return false;
}

static void h_filter(const req_t *q, resp_t *r)
{
    if (!extender_ready(q, r))
        return;
    char *out = NULL;
    size_t len = 0;
    int st = kq_extender_filter(q->s->app, q->body, q->body_len, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_bind(const req_t *q, resp_t *r)
{
    if (!extender_ready(q, r))
        return;
    char *out = NULL;
    size_t len = 0;
    int st = kq_extender_bind(q->s->app, q->body, q->body_len, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_preempt(const req_t *q, resp_t *r)
{
    if (!extender_ready(q, r))
        return;
    char *out = NULL;
    size_t len = 0;
    int st = kq_extender_preempt(q->s->app, q->body, q->body_len, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_healthz(const req_t *q, resp_t *r)
{
    (void)q;
    resp_static(r, 200, CT_TEXT, "ok");
}

static void h_readyz(const req_t *q, resp_t *r)
{
    if (!atomic_load(&q->s->all_listening))
        resp_static(r, 503, CT_TEXT, "not ready: the listeners are still starting");
    else if (atomic_load(&q->s->app->ready))
        resp_static(r, 200, CT_TEXT, "ok");
    else
        resp_static(r, 503, CT_TEXT, "not ready: the first pod list has not been loaded yet");
}

static void h_metrics(const req_t *q, resp_t *r)
{
    size_t len = 0;
    char *out = kq_metrics_render_ex(q->s->app->metrics, q->s->app, q->identities, &len);
    resp_take(r, 200, KQ_METRICS_CONTENT_TYPE, out, len);
}

/* YuniKorn's metric families (rest.h kq_rest_metrics), beside kubequota's own /metrics. */
static void h_ws_metrics(const req_t *q, resp_t *r)
{
    size_t len = 0;
    char *out = kq_rest_metrics(q->s->app, &len);
    resp_take(r, 200, KQ_METRICS_CONTENT_TYPE, out, len);
}

static void h_users(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    if (q->chunked_ok) { /* streamed at send time (send_stream) */
        r->status = 200;
        r->ctype = CT_JSON;
        r->stream = STREAM_USERS;
        return;
    }
    int st = kq_rest_users(q->s->app, q->param[0], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_user(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    if (q->self_only && strcmp(q->param[1], q->who.user) != 0) {
        char msg[600];
        snprintf(msg, sizeof(msg), "user %.200s may read only their own usage (usage/user/%.200s) without the usage "
                 "permission (get usage.kubequota.io)", q->who.user, q->who.user);
        resp_error(r, 403, msg);
        return;
    }
    int st = kq_rest_user(q->s->app, q->param[0], q->param[1], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_groups(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    if (q->chunked_ok) {
        r->status = 200;
        r->ctype = CT_JSON;
        r->stream = STREAM_GROUPS;
        return;
    }
    int st = kq_rest_groups(q->s->app, q->param[0], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_group(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_group(q->s->app, q->param[0], q->param[1], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_queues(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_queues(q->s->app, q->param[0], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static bool who_in_group(const void *ctx, const char *group)
{
    return kq_auth_who_in_group(ctx, group);
}

/* Explain / what-if: the filter's decision, changing nothing (extender.h); a self-service
 * caller only for pods of their own identity. */
static void h_explain(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    kq_explain_self_t self = {.user = q->who.user, .in_group = who_in_group, .ctx = &q->who};
    int st = kq_extender_explain_as(q->s->app, q->param[0], q->body, q->body_len, q->self_only ? &self : NULL, &out,
                                    &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_explain_pod(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    kq_explain_self_t self = {.user = q->who.user, .in_group = who_in_group, .ctx = &q->who};
    int st = kq_extender_explain_pod_as(q->s->app, q->param[0], q->param[1], q->param[2], q->self_only ? &self : NULL,
                                        &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

/* Metering views: 404 when metering is off or the partition is not ours. */
static bool metering_route(const req_t *q, resp_t *r)
{
    kq_app_t *app = q->s->app;
    if (app->metering != NULL && strcmp(q->param[0], app->partition) == 0)
        return true;
    resp_error(r, 404, app->metering == NULL ? "metering is not enabled" : "no such partition");
    return false;
}

static void resp_json(resp_t *r, json_t *v)
{
    char *s = v ? json_dumps(v, JSON_COMPACT) : NULL;
    json_decref(v);
    if (s == NULL)
        resp_error(r, 500, "out of memory");
    else
        resp_take(r, 200, CT_JSON, s, strlen(s));
}

static void h_prices(const req_t *q, resp_t *r)
{
    if (metering_route(q, r))
        resp_json(r, kq_metering_prices_json(q->s->app->metering));
}

/* ?user=&group=&queue=&from=YYYY-MM-DD&to=YYYY-MM-DD, all optional. */
static void h_charges(const req_t *q, resp_t *r)
{
    if (!metering_route(q, r))
        return;
    static const char *const names[5] = {"user", "group", "queue", "from", "to"};
    char v[5][256];
    const char *qs = q->query ? q->query : "";
    for (int i = 0; i < 5; i++) {
        int n = mg_get_var(qs, strlen(qs), names[i], v[i], sizeof(v[i]));
        if (n == -2) {
            resp_error(r, 400, "a query parameter is too long");
            return;
        }
        if (n < 0)
            v[i][0] = '\0';
    }
    json_t *out = NULL;
    char err[256] = "";
    int rc = kq_metering_charges_json(q->s->app->metering, v[0], v[1], v[2], v[3], v[4], &out, err, sizeof(err));
    if (rc != 0)
        resp_error(r, rc == KQ_EINVAL ? 400 : 500, err[0] ? err : kq_strerror(rc));
    else
        resp_json(r, out);
}

static void h_queue(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    const char *qs = q->query ? q->query : "";
    char v[8];
    bool subtree = mg_get_var(qs, strlen(qs), "subtree", v, sizeof(v)) >= 0 || strcmp(qs, "subtree") == 0 ||
                   strncmp(qs, "subtree&", 8) == 0 || strstr(qs, "&subtree") != NULL;
    int st = kq_rest_queue(q->s->app, q->param[0], q->param[1], subtree, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_queue_apps(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_queue_apps(q->s->app, q->param[0], q->param[1], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

/* The ?status= of an applications-by-state request ("" when absent); false (400 answered)
 * when it is too long. */
static bool status_param(const req_t *q, resp_t *r, char *v, size_t n)
{
    const char *qs = q->query ? q->query : "";
    int got = mg_get_var(qs, strlen(qs), "status", v, n);
    if (got == -2) {
        resp_error(r, 400, "a query parameter is too long");
        return false;
    }
    if (got < 0)
        v[0] = '\0';
    return true;
}

static void h_apps(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    char status[64];
    if (q->param[1] != NULL) { /* applications/{state}[?status=] */
        if (!status_param(q, r, status, sizeof(status)))
            return;
        int st = kq_rest_apps_select(q->s->app, q->param[0], NULL, q->param[1], status, &out, &len);
        if (st != 0) {
            resp_take(r, st, CT_JSON, out, len);
            return;
        }
    }
    if (q->chunked_ok) {
        r->status = 200;
        r->ctype = CT_JSON;
        r->stream = STREAM_APPS;
        return;
    }
    int st = kq_rest_apps(q->s->app, q->param[0], q->param[1], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_queue_apps_state(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    char status[64];
    if (!status_param(q, r, status, sizeof(status)))
        return;
    int st = kq_rest_apps_select(q->s->app, q->param[0], q->param[1], q->param[2], status, &out, &len);
    if (st == 0)
        st = kq_rest_queue_apps(q->s->app, q->param[0], q->param[1], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_application(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_application(q->s->app, q->param[0], NULL, q->param[1], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_queue_application(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_application(q->s->app, q->param[0], q->param[1], q->param[2], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_node(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_node(q->s->app, q->param[0], q->param[1], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_node_utilizations(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_node_utilizations(q->s->app, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_yk_history(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_history(q->s->app, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_nodes(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_nodes(q->s->app, q->param[0], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_placement_rules(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_placement_rules(q->s->app, q->param[0], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_gating_waiting(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_gating_waiting(q->s->app, q->param[0], &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

/* Usage over time (history.h): the summary and one queue's or user's series. 404 when
 * the partition is not ours, --history-interval is 0 or no such series is kept; a
 * self-service caller reads their own user's series only, as usage/user/{user}. */
static bool history_route(const req_t *q, resp_t *r)
{
    kq_app_t *app = q->s->app;
    if (app->partition == NULL || strcmp(q->param[0], app->partition) != 0) {
        resp_error(r, 404, "Partition not found");
        return false;
    }
    if (app->history == NULL) {
        resp_error(r, 404, "usage history is off (--history-interval 0)");
        return false;
    }
    return true;
}

static void h_history(const req_t *q, resp_t *r)
{
    if (history_route(q, r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        resp_json(r, kq_history_summary_json(q->s->app->history, (double)ts.tv_sec + (double)ts.tv_nsec / 1e9));
    }
}

static void history_series(const req_t *q, resp_t *r, const char *kind)
{
    if (!history_route(q, r))
        return;
    bool found = false;
    json_t *o = kq_history_series_json(q->s->app->history, kind, q->param[1], &found);
    if (!found) {
        char msg[400];
        snprintf(msg, sizeof(msg), "no usage history of %s %.200s (none used yet, or beyond the %d series kept)",
                 kind, q->param[1], KQ_HISTORY_SERIES);
        resp_error(r, 404, msg);
        return;
    }
    resp_json(r, o);
}

static void h_history_queue(const req_t *q, resp_t *r)
{
    history_series(q, r, "queue");
}

static void h_history_user(const req_t *q, resp_t *r)
{
    if (q->self_only && strcmp(q->param[1], q->who.user) != 0) {
        char msg[600];
        snprintf(msg, sizeof(msg), "user %.200s may read only their own usage history (history/user/%.200s) without "
                 "the usage permission (get usage.kubequota.io)", q->who.user, q->who.user);
        resp_error(r, 403, msg);
        return;
    }
    history_series(q, r, "user");
}

static void h_partitions(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_partitions(q->s->app, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_clusters(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_clusters(q->s->app, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_healthcheck(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_healthcheck(q->s->app, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_config(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_config(q->s->app, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void h_validate_conf(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_rest_validate_conf(q->s->app, q->body, q->body_len, &out, &len);
    resp_take(r, st, CT_JSON, out, len);
}

static void admission_reply(int st, char *out, size_t len, resp_t *r)
{
    if (st < 0) /* KQ_EINVAL / KQ_ENOMEM: nothing was produced */
        resp_static(r, 500, CT_JSON, "{\"error\":\"admission review failed\"}");
    else
        resp_take(r, st, CT_JSON, out, len);
}

static void h_mutate(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_admission_mutate(&q->s->adm, q->body, q->body_len, &out, &len);
    admission_reply(st, out, len, r);
}

static void h_mutate_sched(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_admission_mutate(&q->s->adm_sched, q->body, q->body_len, &out, &len);
    admission_reply(st, out, len, r);
}

static void h_mutate_optin(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_admission_mutate(&q->s->adm_optin, q->body, q->body_len, &out, &len);
    admission_reply(st, out, len, r);
}

static void h_validate(const req_t *q, resp_t *r)
{
    char *out = NULL;
    size_t len = 0;
    int st = kq_admission_validate(&q->s->adm, q->body, q->body_len, &out, &len);
    admission_reply(st, out, len, r);
}

/* The dashboard (ui.h): /ui answers a redirect to /ui/ (relative, so that it also works
 * behind the API server's service proxy), /ui/ the page, /ui/{file} its files, and
 * /ui/features.json what the page may ask for. Open to anyone: the page holds no data, it
 * reads the usage view with the caller's own credentials. */
static void h_ui_redirect(const req_t *q, resp_t *r)
{
    (void)q;
    resp_static(r, 301, "text/plain;charset=utf-8", "moved to ui/\n");
    r->headers = "Location: ui/\r\n";
}

static void ui_features(const req_t *q, resp_t *r);

static void h_ui(const req_t *q, resp_t *r)
{
    const char *name = q->param[0] != NULL ? q->param[0] : "";
    if (strcmp(name, "features.json") == 0) {
        ui_features(q, r);
    } else {
        const kq_ui_file_t *f = kq_ui_file(name);
        if (f == NULL) {
            resp_error(r, 404, "no such file in the dashboard");
        } else {
            resp_static(r, 200, f->ctype, (const char *)f->data);
            r->len = f->len;
        }
    }
    r->headers = KQ_UI_HEADERS;
}

/* ------------------------------------------------------------------ routing */

typedef struct route {
    const char *method;
    const char *pattern; /* '*' matches one non-empty path segment (a parameter) */
    kq_endpoint_t ep;
    bool has_body;
    void (*fn)(const req_t *, resp_t *);
    bool admission;      /* only when the admission webhook is configured */
    int guard;           /* GUARD_REST: the usage view's access rules; GUARD_METRICS: the same
                          * when --metrics-auth is set; 0: open (the scheduler and the API
                          * server reach these through TLS, with client certificates when
                          * --client-ca is set) */} route_t;

/* GUARD_REST_SELF: GUARD_REST, except that a Kubernetes caller without the usage
 * permission may still ask about their own user (self-service; the handler checks who). */
enum { GUARD_OPEN = 0, GUARD_REST = 1, GUARD_METRICS = 2, GUARD_EXTENDER = 3, GUARD_REST_SELF = 4 };
#define REST_GUARDED(g) ((g) == GUARD_REST || (g) == GUARD_REST_SELF)

static const route_t routes[] = {
    {"POST", "/scheduler/filter", KQ_EP_FILTER, true, h_filter, false, GUARD_EXTENDER},
    {"POST", "/scheduler/bind", KQ_EP_BIND, true, h_bind, false, GUARD_EXTENDER},
    {"POST", "/scheduler/preempt", KQ_EP_PREEMPT, true, h_preempt, false, GUARD_EXTENDER},
    {"GET", "/healthz", KQ_EP_HEALTHZ, false, h_healthz, false, GUARD_OPEN},
    {"GET", "/readyz", KQ_EP_READYZ, false, h_readyz, false, GUARD_OPEN},
    {"GET", "/metrics", KQ_EP_METRICS, false, h_metrics, false, GUARD_METRICS},
    {"GET", "/ws/v1/metrics", KQ_EP_WS_METRICS, false, h_ws_metrics, false, GUARD_METRICS},
    {"GET", "/ws/v1/partition/*/usage/users", KQ_EP_USAGE_USERS, false, h_users, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/usage/user/*", KQ_EP_USAGE_USER, false, h_user, false, GUARD_REST_SELF},
    {"GET", "/ws/v1/partition/*/usage/groups", KQ_EP_USAGE_GROUPS, false, h_groups, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/usage/group/*", KQ_EP_USAGE_GROUP, false, h_group, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/queues", KQ_EP_QUEUES, false, h_queues, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/prices", KQ_EP_PRICES, false, h_prices, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/charges", KQ_EP_CHARGES, false, h_charges, false, GUARD_REST},
    {"POST", "/ws/v1/validate-conf", KQ_EP_VALIDATE_CONF, true, h_validate_conf, false, GUARD_REST},
    {"GET", "/ws/v1/partitions", KQ_EP_PARTITIONS, false, h_partitions, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/queue/*", KQ_EP_QUEUE, false, h_queue, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/queue/*/applications", KQ_EP_QUEUE_APPS, false, h_queue_apps, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/applications", KQ_EP_APPS, false, h_apps, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/applications/*", KQ_EP_APPS, false, h_apps, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/nodes", KQ_EP_NODES, false, h_nodes, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/node/*", KQ_EP_NODE, false, h_node, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/application/*", KQ_EP_APPLICATION, false, h_application, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/queue/*/application/*", KQ_EP_APPLICATION, false, h_queue_application, false,
     GUARD_REST},
    {"GET", "/ws/v1/partition/*/queue/*/applications/*", KQ_EP_QUEUE_APPS, false, h_queue_apps_state, false,
     GUARD_REST},
    {"GET", "/ws/v1/clusters", KQ_EP_CLUSTERS, false, h_clusters, false, GUARD_REST},
    {"GET", "/ws/v1/scheduler/healthcheck", KQ_EP_HEALTHCHECK, false, h_healthcheck, false, GUARD_REST},
    {"GET", "/ws/v1/scheduler/node-utilizations", KQ_EP_NODE_UTILIZATIONS, false, h_node_utilizations, false,
     GUARD_REST},
    {"GET", "/ws/v1/history/apps", KQ_EP_YK_HISTORY, false, h_yk_history, false, GUARD_REST},
    {"GET", "/ws/v1/history/containers", KQ_EP_YK_HISTORY, false, h_yk_history, false, GUARD_REST},
    {"GET", "/ws/v1/config", KQ_EP_CONFIG, false, h_config, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/placementrules", KQ_EP_PLACEMENT_RULES, false, h_placement_rules, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/gating/waiting", KQ_EP_GATING_WAITING, false, h_gating_waiting, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/history", KQ_EP_HISTORY, false, h_history, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/history/queue/*", KQ_EP_HISTORY, false, h_history_queue, false, GUARD_REST},
    {"GET", "/ws/v1/partition/*/history/user/*", KQ_EP_HISTORY, false, h_history_user, false, GUARD_REST_SELF},
    {"POST", "/ws/v1/partition/*/explain", KQ_EP_EXPLAIN, true, h_explain, false, GUARD_REST_SELF},
    {"GET", "/ws/v1/partition/*/explain/*/*", KQ_EP_EXPLAIN_POD, false, h_explain_pod, false, GUARD_REST_SELF},
    {"GET", "/ui", KQ_EP_UI, false, h_ui_redirect, false, GUARD_OPEN},
    {"GET", "/ui/", KQ_EP_UI, false, h_ui, false, GUARD_OPEN},
    {"GET", "/ui/*", KQ_EP_UI, false, h_ui, false, GUARD_OPEN},
    {"POST", "/admission/mutate", KQ_EP_ADMISSION, true, h_mutate, true, GUARD_OPEN},
    {"POST", "/admission/mutate-scheduler", KQ_EP_ADMISSION_SCHED, true, h_mutate_sched, true, GUARD_OPEN},
    /* The same without the namespace filters: the chart sends namespaces labelled
     * kubequota.io/enabled=true here, which opts them in whatever the filters say. */
    {"POST", "/admission/mutate-scheduler-opt-in", KQ_EP_ADMISSION_SCHED, true, h_mutate_optin, true, GUARD_OPEN},
    {"POST", "/admission/validate", KQ_EP_ADMISSION_VALIDATE, true, h_validate, true, GUARD_OPEN},
    /* The same validator; a separate path lets the chart register ElasticQuota objects
     * with their own failure policy and timeout. */
    {"POST", "/admission/validate-elasticquota", KQ_EP_ADMISSION_VALIDATE, true, h_validate, true, GUARD_OPEN},
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

/* The usage view's GET routes, for the dashboard's features document. */
static void ui_features(const req_t *q, resp_t *r)
{
    const char *pats[N_ROUTES];
    size_t n = 0, len = 0;
    for (size_t i = 0; i < N_ROUTES; i++)
        if (REST_GUARDED(routes[i].guard) && strcmp(routes[i].method, "GET") == 0)
            pats[n++] = routes[i].pattern;
    char *out = kq_ui_features(q->s->app, pats, n, &len);
    resp_take(r, 200, CT_JSON, out, len);
}

typedef struct span {
    const char *p;
    size_t n;
} span_t;

static bool match(const char *pat, const char *path, span_t *params, int *np)
{
    *np = 0;
    while (*pat != '\0' && *path != '\0') {
        if (*pat == '*') {
            size_t n = strcspn(path, "/");
            if (n == 0 || *np == MAX_PARAMS)
                return false;
            params[(*np)++] = (span_t){path, n};
            path += n;
            pat++;
        } else if (*pat == *path) {
            pat++;
            path++;
        } else {
            return false;
        }
    }
    return *pat == '\0' && *path == '\0';
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* Percent-decodes a path segment into a new string (civetweb's decoder). NULL for a bad
 * escape or an encoded NUL (*bad set), which civetweb would copy or decode as they are, or on
 * ENOMEM (*bad clear). '+' is a literal '+' in a path. */
static char *percent_decode(span_t in, bool *bad)
{
    *bad = false;
    for (size_t i = 0; i < in.n; i++)
        if (in.p[i] == '%' && (i + 2 >= in.n || !is_hex(in.p[i + 1]) || !is_hex(in.p[i + 2]) ||
                               (in.p[i + 1] == '0' && in.p[i + 2] == '0'))) {
            *bad = true;
            return NULL;
        }
    if (in.n >= INT_MAX) {
        *bad = true;
        return NULL;
    }
    char *out = malloc(in.n + 1);
    if (out != NULL)
        mg_url_decode(in.p, (int)in.n, out, (int)in.n + 1, 0);
    return out;
}

/* ------------------------------------------------------------------ request bodies */

/* Reads the whole body (Content-Length or chunked) up to max bytes into q->body.
 * 0, or an HTTP status: 413 too large, 400 read error, 500 ENOMEM, 417 bad Expect. */
/* Takes n bytes of the shared body budget; false when that would exceed it. */
static bool budget_take(kq_server_t *s, size_t n)
{
    size_t cur = atomic_load(&s->body_bytes);
    do {
        if (n > BODY_BUDGET || cur > BODY_BUDGET - n)
            return false;
    } while (!atomic_compare_exchange_weak(&s->body_bytes, &cur, cur + n));
    return true;
}

static void budget_give(kq_server_t *s, size_t n)
{
    atomic_fetch_sub(&s->body_bytes, n);
}

static double elapsed(const struct timespec *t0);

/* Reads the whole body (Content-Length or chunked) up to max bytes into q->body, within
 * BODY_DEADLINE_S of t0 and within the shared budget (the bytes taken are in
 * q->budget; the caller gives them back). 0, or an HTTP status: 413 too large, 400 read
 * error, 408 too slow, 503 budget exhausted, 500 ENOMEM, 417 bad Expect. */
static int read_body(struct mg_connection *conn, size_t max, req_t *q, bool *close, const struct timespec *t0)
{
    const struct mg_request_info *ri = mg_get_request_info(conn);
    long long cl = ri->content_length;
    const char *expect = mg_get_header(conn, "Expect");
    if (cl > 0 && (unsigned long long)cl > max) {
        *close = true;
        return 413;
    }
    if (expect != NULL) {
        if (strcasecmp(expect, "100-continue") != 0) {
            *close = true;
            return 417;
        }
        /* The client waits for this before sending the body (civetweb only sends it for PUT). */
        mg_printf(conn, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    /* Known length: exactly that (plus the NUL). Chunked: grow up to max + 1 bytes, one
     * more than allowed, which is how an oversized chunked body is recognised. */
    size_t cap = cl >= 0 ? (size_t)cl + 1 : (max + 2 < 16384 ? max + 2 : 16384);
    size_t len = 0, piece = 1;
    if (!budget_take(q->s, cap)) {
        *close = true;
        return 503;
    }
    q->budget = cap;
    char *buf = malloc(cap);
    if (buf == NULL)
        return 500;
    for (;;) {
        if (len + 1 >= cap) {
            if (cl >= 0)
                break; /* read exactly Content-Length */
            if (len > max)
                break;
            size_t ncap = cap > (max + 2) / 2 ? max + 2 : cap * 2;
            if (!budget_take(q->s, ncap - cap)) {
                free(buf);
                *close = true;
                return 503;
            }
            q->budget += ncap - cap;
            char *nb = realloc(buf, ncap);
            if (nb == NULL) {
                free(buf);
                return 500;
            }
            buf = nb;
            cap = ncap;
        }
        if (elapsed(t0) > BODY_DEADLINE_S) {
            free(buf);
            *close = true;
            return 408;
        }
        /* civetweb's mg_read returns only when it has all it was asked for (or a single
         * wait times out), so a body trickled in byte by byte would never reach the
         * deadline check. Ask for a piece that doubles while reads are quick and drops
         * back to one byte when one was slow: a slow client is read a byte at a time,
         * with the deadline checked between bytes. (A client that first sends fast and
         * then trickles can overrun the deadline by one piece; see README.) */
        size_t want = cap - 1 - len < piece ? cap - 1 - len : piece;
        double before = elapsed(t0);
        int n = mg_read(conn, buf + len, want);
        if (n <= 0 && elapsed(t0) > BODY_DEADLINE_S) { /* civetweb gave up on a slow client */
            free(buf);
            *close = true;
            return 408;
        }
        if (n == 0)
            break;
        if (n < 0) {
            free(buf);
            *close = true;
            return 400;
        }
        len += (size_t)n;
        if (elapsed(t0) - before > READ_SLOW_S)
            piece = 1;
        else if (piece < READ_PIECE_MAX)
            piece *= 2;
    }
    if (len > max || (cl >= 0 && len != (size_t)cl)) {
        free(buf);
        *close = true;
        return len > max ? 413 : 400;
    }
    buf[len] = '\0';
    q->body = buf;
    q->body_len = len;
    return 0;
}

/* After refusing a body: read (and drop) a bounded amount, so that closing the socket with
 * unread data does not reset the connection before the client has read our answer. Not
 * when the client waits for "100 Continue" (it sends nothing more) or announced more than
 * the bound. */
static void drain_refused(struct mg_connection *conn)
{
    const struct mg_request_info *ri = mg_get_request_info(conn);
    if (ri->content_length > DRAIN_MAX || mg_get_header(conn, "Expect") != NULL)
        return;
    char buf[8192];
    long long left = DRAIN_MAX;
    while (left > 0) {
        int n = mg_read(conn, buf, sizeof(buf));
        if (n <= 0)
            break;
        left -= n;
    }
}

/* ------------------------------------------------------------------ civetweb callbacks */

/* 127.0.0.0/8, ::1 and their IPv4-mapped form, as civetweb prints the peer address. */
static bool is_loopback(const char *addr)
{
    if (strncmp(addr, "::ffff:", 7) == 0)
        addr += 7;
    return strncmp(addr, "127.", 4) == 0 || strcmp(addr, "::1") == 0;
}

/* Who may call the scheduler verbs (they count pods, bind them anywhere and post
 * events): loopback peers (kube-scheduler beside us), and callers that presented a
 * client certificate the TLS layer verified against --client-ca; everyone only when
 * explicitly opened; loopback only with --extender-local-only. */
static bool extender_allowed(const kq_server_t *s, const struct mg_request_info *ri)
{
    if (is_loopback(ri->remote_addr))
        return true;
    if (s->extender_local_only)
        return false;
    return s->extender_open || (s->ca != NULL && ri->client_cert != NULL);
}

/* The caller's credentials: the Authorization header, else X-Kubequota-Authorization (the
 * kubectl plugin sends its token there too, because the API server's service proxy removes
 * Authorization after authenticating the caller; kubectl.h). Either is checked the same way. */
static const char *caller_authorization(struct mg_connection *conn)
{
    const char *a = mg_get_header(conn, "Authorization");
    return a != NULL ? a : mg_get_header(conn, "X-Kubequota-Authorization");
}

static double elapsed(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

static void conn_mark(conn_t *cn, bool busy, bool answered);
static bool conn_close_when_scarce(conn_t *cn, const char *role);

/* ------------------------------------------------------------------ large views */

/* The views whose answer grows with users, groups, pods or applications: the streamed ones
 * still copy their list (or pin its trackers) and are written at the client's pace, the
 * others are built whole in memory (a JSON tree, then its text), so their number in flight
 * bounds what the answers cost at once. */
static bool large_view(kq_endpoint_t ep)
{
    switch (ep) {
    case KQ_EP_USAGE_USERS:
    case KQ_EP_USAGE_GROUPS:
    case KQ_EP_APPS:
    case KQ_EP_QUEUE_APPS:
    case KQ_EP_APPLICATION: /* one application, found in a copy of every application */
    case KQ_EP_CHARGES:
    case KQ_EP_GATING_WAITING:
    case KQ_EP_METRICS:
    case KQ_EP_WS_METRICS:
        return true;
    default:
        return false;
    }
}

static double mono_now(void);

/* Counted events (refusals, sheds) are logged at most once per WARN_EVERY_S: called with the
 * counter's lock held after counting one; true when a warning is due, with the count since
 * the last one moved to *n. */
#define WARN_EVERY_S 10

static bool warn_due(unsigned long *pending, time_t *warned, unsigned long *n)
{
    time_t now = (time_t)mono_now();
    if (*pending == 0 || (*warned != 0 && now - *warned < WARN_EVERY_S))
        return false;
    *n = *pending;
    *pending = 0;
    *warned = now;
    return true;
}

/* Takes a large-view slot, waiting up to VIEW_WAIT_S for one; false when none came free
 * (the caller answers 503). */
static bool views_acquire(kq_server_t *s)
{
    if (s->views_max <= 0)
        return true;
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    kq_timespec_add_ms(&dl, (long)(VIEW_WAIT_S * 1000));
    bool ok = true, warn = false;
    unsigned long refused = 0;
    pthread_mutex_lock(&s->views_mu);
    while (s->views_busy >= s->views_max) {
        if (pthread_cond_timedwait(&s->views_cv, &s->views_mu, &dl) != 0 && s->views_busy >= s->views_max) {
            ok = false;
            break;
        }
    }
    if (ok) {
        s->views_busy++;
    } else {
        s->views_refused++;
        warn = warn_due(&s->views_refused, &s->views_warned, &refused);
    }
    pthread_mutex_unlock(&s->views_mu);
    if (warn)
        kq_warn("event=large_views_refused limit=%d refused=%lu msg=\"more large views (users, groups, "
                "applications, metrics) were asked for at once than --max-concurrent-views allows; answered 503\"",
                s->views_max, refused);
    return ok;
}

/* Gives the slot back after the answer was sent and freed, and gives the heap its building
 * freed back to the system (malloc_trim: each view is built on its worker's malloc arena,
 * whose free pages glibc otherwise keeps, so a burst of views on many workers would leave
 * every arena it touched at its peak; even a small answer such as /metrics builds large
 * lists on the way). Outside views_mu, so no lock of ours is held while it walks the
 * arenas; once per large view. */
static void views_release(kq_server_t *s)
{
    if (s->views_max > 0) {
        pthread_mutex_lock(&s->views_mu);
        s->views_busy--;
        pthread_cond_signal(&s->views_cv);
        pthread_mutex_unlock(&s->views_mu);
    }
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int gave = malloc_trim(0);
    kq_debug("event=malloc_trim released=%s ms=%.1f", gave ? "yes" : "no", elapsed(&t0) * 1e3);
}

static int on_request(struct mg_connection *conn)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    conn_t *counted = mg_get_user_connection_data(conn); /* NULL on ports without a limit */
    conn_mark(counted, false, false); /* the request started: idle (sheddable) only after idle_s */
    const port_t *port = mg_get_user_data(mg_get_context(conn));
    kq_server_t *s = port->s;
    const struct mg_request_info *ri = mg_get_request_info(conn);
    const char *method = ri->request_method ? ri->request_method : "";
    const char *path = ri->local_uri ? ri->local_uri : "";

    req_t q = {.s = s, .query = ri->query_string};
    /* HTTP/1.1 GETs may be answered in chunks (HTTP/1.0 has no chunked encoding) */
    q.chunked_ok = ri->http_version != NULL && strcmp(ri->http_version, "1.1") == 0 && strcmp(method, "GET") == 0;
    resp_t r = {0};
    bool ws = strncmp(path, "/ws/v1/", 7) == 0; /* YuniKorn's view: CORS headers, its error body */
    r.yapi = ws;
    bool close = false;
    const char *allow = NULL;
    char allow_buf[64] = "";
    char msg[512], qpath[256];
    const route_t *rt = NULL;
    span_t params[MAX_PARAMS];
    int np = 0;
    bool elsewhere = false;    /* a scheduler verb, served on the scheduler listener */
    bool large = false;        /* a large view: holds a slot (views_acquire) until freed */
    bool wh_elsewhere = false; /* a webhook, served on the webhook listener */
    double t_read = 0, t_handled = 0; /* since t0: headers and body read, handler done */

    for (size_t i = 0; i < N_ROUTES; i++) {
        int n;
        span_t p[MAX_PARAMS];
        if ((routes[i].admission && !s->admission) || !match(routes[i].pattern, path, p, &n))
            continue;
        /* the scheduler's own listener serves its verbs and the probes, nothing else; when
         * it exists, the main port does not serve the verbs */
        if (port->scheduler && routes[i].guard != GUARD_EXTENDER && routes[i].ep != KQ_EP_HEALTHZ &&
            routes[i].ep != KQ_EP_READYZ)
            continue;
        if (!port->scheduler && s->sched_separate && routes[i].guard == GUARD_EXTENDER) {
            elsewhere = true;
            continue;
        }
        /* the webhook listener likewise: the webhooks and the probes; when it exists, the
         * main port does not serve the webhooks */
        if (port->webhook && !routes[i].admission && routes[i].ep != KQ_EP_HEALTHZ && routes[i].ep != KQ_EP_READYZ)
            continue;
        if (!port->webhook && s->wh_separate && routes[i].admission) {
            wh_elsewhere = true;
            continue;
        }
        if (strcmp(routes[i].method, method) == 0) {
            rt = &routes[i];
            memcpy(params, p, sizeof(p));
            np = n;
            break;
        }
        if (strstr(allow_buf, routes[i].method) == NULL) {
            size_t used = strlen(allow_buf);
            snprintf(allow_buf + used, sizeof(allow_buf) - used, "%s%s", used ? ", " : "", routes[i].method);
        }
    }

    if (rt == NULL && ws && strcmp(method, "OPTIONS") == 0 && allow_buf[0] != '\0') {
        /* A browser's CORS preflight: answered without authentication, with no data. */
        r.cors_methods = strstr(allow_buf, "POST") != NULL ? "OPTIONS, POST" : "GET, OPTIONS";
        snprintf(allow_buf + strlen(allow_buf), sizeof(allow_buf) - strlen(allow_buf), ", OPTIONS");
        allow = allow_buf;
        resp_static(&r, 200, CT_JSON, "");
        goto send;
    }
    if (rt == NULL && wh_elsewhere && allow_buf[0] == '\0') {
        resp_error(&r, 404, "the admission webhooks are served on their own listener (--webhook-listen), "
                            "not on this port");
        goto send;
    }
    if (rt == NULL && elsewhere && allow_buf[0] == '\0') {
        resp_error(&r, 404, "the scheduler verbs are served on the scheduler's own listener (--scheduler-listen), "
                            "not on this port");
        goto send;
    }
    if (rt == NULL) {
        if (allow_buf[0] != '\0') {
            allow = allow_buf;
            snprintf(msg, sizeof(msg), "method %s is not allowed on %s (allowed: %s)",
                     printable(method, qpath, 32), printable(path, qpath + 64, 192), allow_buf);
            resp_error(&r, 405, msg);
        } else {
            snprintf(msg, sizeof(msg), "no such endpoint: %s", printable(path, qpath, sizeof(qpath)));
            resp_error(&r, 404, msg);
        }
        goto send;
    }

    for (int i = 0; i < np; i++) {
        bool bad;
        q.param[i] = percent_decode(params[i], &bad);
        if (q.param[i] == NULL) {
            if (bad)
                resp_error(&r, 400, "bad percent-encoding in the request path");
            else
                resp_error(&r, 500, "out of memory");
            goto send;
        }
    }

    if (rt->guard == GUARD_EXTENDER && !extender_allowed(s, ri)) {
        resp_error(&r, 403, s->extender_local_only
                                ? "the scheduler extender only answers the scheduler on this host (--extender-local-only)"
                                : "the scheduler extender answers only callers on this host or with a client "
                                  "certificate signed by --client-ca (--extender-open opens it to everyone)");
        kq_warn("event=extender_refused remote=%s path=\"%s\"", ri->remote_addr, printable(path, qpath, 192));
        goto send;
    }
    /* Open /metrics (no --metrics-auth) keeps its counters for anyone, but who uses what
     * (per-user and per-group series) only for callers the usage view lets in. */
    q.identities = true;
    if (s->auth != NULL && rt->guard == GUARD_METRICS && !s->metrics_auth) {
        char why[512];
        kq_auth_who_t who;
        q.identities = kq_auth_check_from(s->auth, ri->remote_addr, ri->client_cert != NULL,
                                          caller_authorization(conn), &who, why, sizeof(why)) == 200;
    }
    if (s->auth != NULL && (REST_GUARDED(rt->guard) || (rt->guard == GUARD_METRICS && s->metrics_auth))) {
        char why[512];
        int st = kq_auth_check_from(s->auth, ri->remote_addr, ri->client_cert != NULL, caller_authorization(conn),
                                    &q.who, why, sizeof(why));
        if (st == 403 && rt->guard == GUARD_REST_SELF && q.who.user[0] != '\0') {
            /* self-service: the handler serves only the caller's own user */
            q.self_only = true;
            st = 200;
            kq_debug("event=rest_self_service user=\"%s\" path=\"%s\"", printable(q.who.user, qpath, 128),
                     printable(path, qpath + 128, 128));
        }
        if (st != 200) {
            resp_error(&r, st, why);
            kq_info("event=rest_refused path=\"%s\" status=%d reason=\"%s\"", printable(path, qpath, 192), st, why);
            goto send;
        }
    }

    if (rt->has_body) {
        /* Webhook reviews are capped lower than max_body: refused by Content-Length before
         * a byte of the body is read. */
        size_t limit = rt->admission && s->max_body > KQ_ADMISSION_MAX_BODY ? KQ_ADMISSION_MAX_BODY : s->max_body;
        int st = read_body(conn, limit, &q, &close, &t0);
        if (st != 0) {
            if (st == 413)
                snprintf(msg, sizeof(msg), "request body larger than the limit of %zu bytes", limit);
            else if (st == 408)
                snprintf(msg, sizeof(msg), "the request body did not arrive within %.0f s", BODY_DEADLINE_S);
            else if (st == 503)
                snprintf(msg, sizeof(msg), "too many large request bodies in flight; retry");
            else if (st == 417)
                snprintf(msg, sizeof(msg), "unsupported Expect header");
            else if (st == 400)
                snprintf(msg, sizeof(msg), "incomplete request body");
            else
                snprintf(msg, sizeof(msg), "out of memory");
            resp_error(&r, st, msg);
            goto send;
        }
    }
    conn_mark(counted, true, false);
    t_read = elapsed(&t0);
    if (large_view(rt->ep)) {
        if (!views_acquire(s)) {
            snprintf(msg, sizeof(msg), "too many large views are being answered at once (--max-concurrent-views=%d); "
                     "retry in a second", s->views_max);
            resp_error(&r, 503, msg);
            r.headers = "Retry-After: 1\r\n";
            goto send;
        }
        large = true;
    }
    rt->fn(&q, &r);
    t_handled = elapsed(&t0);

send:
    if (ws && r.ctype != NULL && strcmp(r.ctype, CT_JSON) == 0)
        r.ctype = CT_JSON_WS;
    if (ws && r.cors_methods == NULL)
        r.cors_methods = strcmp(method, "POST") == 0 ? "OPTIONS, POST" : "GET, OPTIONS";
    if (!close && (!rt || !rt->has_body)) {
        /* A body we did not read: civetweb would read it all to keep the connection. */
        long long cl = ri->content_length;
        if (cl > IGNORED_BODY_MAX || (cl < 0 && mg_get_header(conn, "Transfer-Encoding") != NULL))
            close = true;
    }
    if (!close && conn_close_when_scarce(counted, port->webhook ? "webhooks" : "main"))
        close = true;
    if (close)
        mg_disable_keep_alive(conn);
    if (r.stream != STREAM_NONE)
        send_stream(conn, &q, &r, allow, close);
    else
        send_response(conn, &r, allow, close, strcmp(method, "HEAD") == 0);
    if (close && r.status == 413)
        drain_refused(conn);
    conn_mark(counted, false, true);
    double secs = elapsed(&t0);
    if (rt != NULL)
        kq_metrics_latency(s->app->metrics, rt->ep, secs);
    kq_debug("event=http_request method=%s path=\"%s\" status=%d bytes=%zu close=%s ms=%.3f read_ms=%.3f "
             "handle_ms=%.3f",
             printable(method, qpath, 32), printable(path, qpath + 64, 192), r.status, r.len, close ? "yes" : "no",
             secs * 1e3, t_read * 1e3, t_handled > 0 ? (t_handled - t_read) * 1e3 : 0.0);
    int status = r.status;
    free(r.body);
    if (large)
        views_release(s);
    free(q.body);
    if (q.budget > 0)
        budget_give(s, q.budget);
    for (int i = 0; i < MAX_PARAMS; i++)
        free(q.param[i]);
    return status;
}

/* civetweb's own messages. Failed TLS handshakes (scanners, clients without a
 * certificate) are the client's problem and only logged at debug level. */
static int on_log_message(const struct mg_connection *conn, const char *message)
{
    (void)conn;
    if (strncmp(message, "sslize", 6) == 0 || strstr(message, "SSL") != NULL)
        kq_debug("event=tls_handshake_failed msg=\"%s\"", message);
    else
        kq_warn("event=http_server msg=\"%s\"", message);
    return 1;
}

static void tls_fail(kq_server_t *s, const char *what, const char *file)
{
    char ossl[256] = "";
    unsigned long e = ERR_peek_last_error();
    if (e != 0)
        ERR_error_string_n(e, ossl, sizeof(ossl));
    ERR_clear_error();
    snprintf(s->tls_err, sizeof(s->tls_err), "%s%s%s%s%s", what, file ? " " : "", file ? file : "",
             ossl[0] ? ": " : "", ossl);
}

/* ------------------------------------------------------------------ certificate reload */

static void tls_id_free(tls_id_t *t)
{
    X509_free(t->leaf);
    sk_X509_pop_free(t->chain, X509_free);
    EVP_PKEY_free(t->key);
    *t = (tls_id_t){0};
}

/* Loads a PEM chain (leaf first) and its key; checks that they match. */
static int tls_id_load(const char *cert, const char *key, tls_id_t *out, char *why, size_t whylen)
{
    tls_id_t t = {0};
    BIO *b = BIO_new_file(cert, "r");
    if (b != NULL) {
        t.leaf = PEM_read_bio_X509_AUX(b, NULL, NULL, NULL);
        t.chain = sk_X509_new_null();
        X509 *x;
        while (t.chain != NULL && (x = PEM_read_bio_X509(b, NULL, NULL, NULL)) != NULL) {
            if (sk_X509_push(t.chain, x) == 0) {
                X509_free(x);
                break;
            }
        }
        BIO_free(b);
    }
    ERR_clear_error(); /* the chain loop ends on "no start line" */
    b = BIO_new_file(key, "r");
    if (b != NULL) {
        t.key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
        BIO_free(b);
    }
    const char *fail = t.leaf == NULL ? "cannot read the certificate"
                       : t.key == NULL ? "cannot read the private key"
                       : X509_check_private_key(t.leaf, t.key) != 1 ? "the private key does not match the certificate"
                                                                      : NULL;
    ERR_clear_error();
    if (fail != NULL) {
        snprintf(why, whylen, "%s", fail);
        tls_id_free(&t);
        return KQ_EINVAL;
    }
    *out = t;
    return 0;
}

static bool same_stat(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* Under tls_mu: at most once a second, reload the files if either changed. A broken new
 * pair (half-written rotation, mismatched key) keeps the old one and is retried when the
 * files change again. */
static void tls_maybe_reload(kq_server_t *s)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec == s->tls_checked)
        return;
    s->tls_checked = now.tv_sec;
    struct stat cs, ks;
    if (stat(s->cert, &cs) != 0 || stat(s->key, &ks) != 0)
        return;
    if (same_stat(&cs, &s->cert_st) && same_stat(&ks, &s->key_st))
        return;
    s->cert_st = cs;
    s->key_st = ks;
    tls_id_t fresh;
    char why[128];
    if (tls_id_load(s->cert, s->key, &fresh, why, sizeof(why)) != 0) {
        kq_warn("event=tls_reload_failed cert=%s key=%s reason=\"%s\" msg=\"keeping the current certificate\"",
                s->cert, s->key, why);
        return;
    }
    tls_id_free(&s->tls);
    s->tls = fresh;
    char subject[256] = "";
    X509_NAME_oneline(X509_get_subject_name(fresh.leaf), subject, sizeof(subject));
    kq_info("event=tls_reloaded cert=%s subject=\"%s\"", s->cert, subject);
}

/* SSL_CTX certificate callback: runs in the worker doing the handshake. */
static int on_tls_cert(SSL *ssl, void *arg)
{
    kq_server_t *s = arg;
    pthread_mutex_lock(&s->tls_mu);
    tls_maybe_reload(s);
    int ok = SSL_use_cert_and_key(ssl, s->tls.leaf, s->tls.key, s->tls.chain, 1);
    pthread_mutex_unlock(&s->tls_mu);
    return ok == 1 ? 1 : 0;
}

/* ------------------------------------------------------------------ per-client connection limit */

static int conn_ex_idx = -1; /* SSL ex_data slot: the client_t a connection is counted in */

static unsigned client_hash(const unsigned char *a, int family)
{
    unsigned h = 2166136261u ^ (unsigned)family;
    for (int i = 0; i < 16; i++)
        h = (h ^ a[i]) * 16777619u;
    return h % CLIENT_BUCKETS;
}

/* The peer of fd as a key; IPv4-mapped IPv6 peers count as their IPv4 address. */
static bool peer_key(int fd, unsigned char addr[16], int *family, char *text, size_t textlen)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    memset(addr, 0, 16);
    if (fd < 0 || getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
        return false;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        memcpy(addr, &in->sin_addr, 4);
        *family = AF_INET;
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
            memcpy(addr, in6->sin6_addr.s6_addr + 12, 4);
            *family = AF_INET;
        } else {
            memcpy(addr, &in6->sin6_addr, 16);
            *family = AF_INET6;
        }
    } else {
        return false;
    }
    if (inet_ntop(*family, addr, text, (socklen_t)textlen) == NULL)
        snprintf(text, textlen, "?");
    return true;
}

static double mono_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* The connection this worker thread counted at its last handshake start, handed to
 * civetweb's init_connection callback (which runs right after the handshake, in the same
 * thread) as the connection's user data. Cleared when that connection is freed. */
static _Thread_local conn_t *tl_conn;

/* ex_data free callback: the connection's SSL is freed (before its socket is closed), in
 * the worker that served it. */
static void conn_ex_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)parent, (void)ad, (void)idx, (void)argl, (void)argp;
    conn_t *cn = ptr;
    if (cn == NULL)
        return;
    if (tl_conn == cn)
        tl_conn = NULL;
    conn_limit_t *lim = cn->lim;
    client_t *c = cn->c;
    pthread_mutex_lock(&lim->mu);
    if (cn->prev != NULL)
        cn->prev->next = cn->next;
    else
        lim->head = cn->next;
    if (cn->next != NULL)
        cn->next->prev = cn->prev;
    else
        lim->tail = cn->prev;
    if (!cn->shed)
        lim->live--;
    if (--c->n == 0) {
        client_t **pp = &lim->bucket[client_hash(c->addr, c->family)];
        while (*pp != c)
            pp = &(*pp)->next;
        *pp = c->next;
        free(c);
    }
    pthread_mutex_unlock(&lim->mu);
    free(cn);
}

/* SSL info callback, in the worker about to read the ClientHello: count the connection
 * against its client, or shut it down when the client already holds lim->max. */
static void on_ssl_info(const SSL *ssl, int where, int ret)
{
    (void)ret;
    if ((where & SSL_CB_HANDSHAKE_START) == 0 || conn_ex_idx < 0 || SSL_get_ex_data(ssl, conn_ex_idx) != NULL)
        return;
    tl_conn = NULL;
    const struct mg_connection *conn = SSL_get_app_data(ssl);
    const port_t *port = conn != NULL ? mg_get_user_data(mg_get_context(conn)) : NULL;
    conn_limit_t *lim = port != NULL ? port->limit : NULL;
    if (lim == NULL)
        return;
    int fd = SSL_get_fd(ssl);
    unsigned char addr[16];
    int family = 0;
    char text[64];
    if (!peer_key(fd, addr, &family, text, sizeof(text)))
        return;
    bool refuse = false, warn = false;
    unsigned long refused = 0;
    conn_t *cn = calloc(1, sizeof(*cn));
    if (cn == NULL)
        return;
    pthread_mutex_lock(&lim->mu);
    client_t **head = &lim->bucket[client_hash(addr, family)];
    client_t *c = *head;
    while (c != NULL && (c->family != family || memcmp(c->addr, addr, 16) != 0))
        c = c->next;
    if (c != NULL && lim->max > 0 && c->n >= lim->max) {
        refuse = true;
        lim->refused++;
        warn = warn_due(&lim->refused, &lim->warned, &refused);
    } else {
        if (c == NULL && (c = calloc(1, sizeof(*c))) != NULL) {
            c->lim = lim;
            memcpy(c->addr, addr, 16);
            c->family = family;
            c->next = *head;
            *head = c;
        }
        if (c != NULL) {
            c->n++;
            cn->c = c;
            cn->lim = lim;
            cn->fd = fd;
            cn->since = mono_now();
            cn->prev = lim->tail;
            if (lim->tail != NULL)
                lim->tail->next = cn;
            else
                lim->head = cn;
            lim->tail = cn;
            lim->live++;
            SSL_set_ex_data((SSL *)ssl, conn_ex_idx, cn);
            tl_conn = cn;
        }
    }
    pthread_mutex_unlock(&lim->mu);
    if (tl_conn != cn)
        free(cn);
    if (refuse)
        shutdown(fd, SHUT_RDWR); /* the handshake fails at once; civetweb closes the socket */
    if (warn)
        kq_warn("event=client_connection_limit remote=%s limit=%d refused=%lu msg=\"connections over the "
                "per-client limit (--max-client-connections) are closed at once\"",
                text, lim->max, refused);
}

/* civetweb's init_connection, in the worker, right after the TLS handshake: the counted
 * connection becomes the connection's user data (NULL on ports without a limit). */
static int on_init_connection(const struct mg_connection *conn, void **conn_data)
{
    const port_t *port = mg_get_user_data(mg_get_context(conn));
    if (port != NULL)
        kq_metrics_connection(port->s->app->metrics,
                              port->scheduler ? KQ_LISTENER_SCHEDULER : port->webhook ? KQ_LISTENER_WEBHOOK
                                                                                      : KQ_LISTENER_MAIN,
                              port->tls);
    *conn_data = tl_conn;
    tl_conn = NULL;
    return 0;
}

/* A request's body is in (busy) or its answer is written (idle again: answered). */
static void conn_mark(conn_t *cn, bool busy, bool answered)
{
    if (cn == NULL)
        return;
    pthread_mutex_lock(&cn->lim->mu);
    cn->busy = busy;
    cn->answered = cn->answered || answered;
    cn->since = mono_now();
    pthread_mutex_unlock(&cn->lim->mu);
}

/* Before an answer on a limited port: are its workers scarce (fewer than REAP_RESERVE free)?
 * Then the answer says Connection: close, and the client opens a new connection for its next
 * request, which waits in civetweb's queue for a free worker. Closing at an answer is the one
 * close HTTP/1.1 makes safe: a client reuses an idle connection at any moment, so shutting one
 * down races with a request already on its way, which a client does not resend when it is a
 * POST (Go's net/http: "write: broken pipe"; the API server then fails the webhook call and,
 * with failurePolicy Fail, the pod's create; tests/cluster/test_kube_connections.py). */
static bool conn_close_when_scarce(conn_t *cn, const char *role)
{
    if (cn == NULL)
        return false;
    conn_limit_t *lim = cn->lim;
    bool scarce, warn = false;
    unsigned long n = 0;
    pthread_mutex_lock(&lim->mu);
    scarce = lim->workers > 0 && lim->live > lim->workers - REAP_RESERVE(lim->workers);
    if (scarce) {
        lim->declined++;
        warn = warn_due(&lim->declined, &lim->decline_warned, &n);
    }
    pthread_mutex_unlock(&lim->mu);
    if (warn)
        kq_warn("event=keep_alive_declined port=%s answers=%lu workers=%d msg=\"workers were scarce: answers "
                "said Connection: close, so their connections free their workers\"", role, n, lim->workers);
    return scarce;
}

/* The reaper's pass over one port: when fewer than REAP_RESERVE(workers) workers are
 * free, shut down the connections idle for at least lim->idle_s, oldest first, until that
 * many are free again (once the shut-down ones are closed). shutdown(2) happens under mu:
 * a connection is unlinked (conn_ex_free) before its socket is closed, so the fd is still
 * its own. Worker threads notice at once (their read fails) and close it. */
static void reap_port(conn_limit_t *lim, const char *role)
{
    int reserve = REAP_RESERVE(lim->workers);
    unsigned long reaped = 0;
    bool warn = false;
    double now = mono_now();
    pthread_mutex_lock(&lim->mu);
    for (conn_t *cn = lim->head; cn != NULL && lim->live > lim->workers - reserve; cn = cn->next) {
        if (cn->busy || cn->shed || (cn->answered && lim->keep_answered) || now - cn->since < lim->idle_s)
            continue;
        cn->shed = true;
        lim->live--;
        lim->reaped++;
        shutdown(cn->fd, SHUT_RDWR);
    }
    warn = warn_due(&lim->reaped, &lim->reap_warned, &reaped);
    pthread_mutex_unlock(&lim->mu);
    if (warn)
        kq_warn("event=idle_connections_closed port=%s closed=%lu workers=%d msg=\"workers were scarce: "
                "connections idle for %.1f s or more (%sa request or its body not yet in) were closed\"", role, reaped,
                lim->workers, lim->idle_s, lim->keep_answered ? "" : "kept alive, or ");
}

static void *reaper_main(void *arg)
{
    kq_server_t *s = arg;
    pthread_mutex_lock(&s->reap_mu);
    while (!s->reap_stop) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        kq_timespec_add_ms(&until, REAP_INTERVAL_MS);
        pthread_cond_timedwait(&s->reap_cv, &s->reap_mu, &until);
        if (s->reap_stop)
            break;
        pthread_mutex_unlock(&s->reap_mu);
        if (s->main_port.limit != NULL)
            reap_port(s->main_port.limit, "main");
        if (s->wh_port.limit != NULL)
            reap_port(s->wh_port.limit, "webhooks");
        pthread_mutex_lock(&s->reap_mu);
    }
    pthread_mutex_unlock(&s->reap_mu);
    return NULL;
}

/* civetweb's init_ssl: we configure the whole SSL_CTX (return 1 = done). */
static int on_init_ssl(void *ssl_ctx, void *user_data)
{
    kq_server_t *s = ((port_t *)user_data)->s;
    SSL_CTX *ctx = ssl_ctx;
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, s->cert) != 1) {
        tls_fail(s, "cannot load the certificate chain", s->cert);
        return -1;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, s->key, SSL_FILETYPE_PEM) != 1) {
        unsigned long e = ERR_peek_last_error();
        if (ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH)
            tls_fail(s, "the private key does not match the certificate:", s->key);
        else
            tls_fail(s, "cannot load the private key", s->key);
        return -1;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        tls_fail(s, "the private key does not match the certificate:", s->key);
        return -1;
    }
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1) {
        tls_fail(s, "cannot set the minimum TLS version", NULL);
        return -1;
    }
    if (SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS) != 1) {
        tls_fail(s, "cannot set the TLS 1.2 cipher list", NULL);
        return -1;
    }
    SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_RENEGOTIATION);
    /* The reloadable identity is shared by both listeners: loaded by the first one set up
     * (the scheduler listener's setup runs while the main port already serves). */
    char why[128];
    pthread_mutex_lock(&s->tls_mu);
    bool loaded = s->tls.leaf != NULL ||
                  (stat(s->cert, &s->cert_st) == 0 && stat(s->key, &s->key_st) == 0 &&
                   tls_id_load(s->cert, s->key, &s->tls, why, sizeof(why)) == 0);
    pthread_mutex_unlock(&s->tls_mu);
    if (!loaded) {
        tls_fail(s, "cannot load the certificate and key for reloading:", s->cert);
        return -1;
    }
    SSL_CTX_set_cert_cb(ctx, on_tls_cert, s);
    SSL_CTX_set_info_callback(ctx, on_ssl_info); /* per-client connection limit (replaces civetweb's no-op) */
    static const unsigned char sid[] = "kubequota";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    if (s->ca != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, s->ca, NULL) != 1) {
            tls_fail(s, "cannot load the client CA", s->ca);
            return -1;
        }
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(s->ca);
        if (names == NULL) {
            tls_fail(s, "no CA certificate found in", s->ca);
            return -1;
        }
        SSL_CTX_set_client_CA_list(ctx, names);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    return 1;
}

/* ------------------------------------------------------------------ public API */

static int start_scheduler_listener(kq_server_t *s, const kq_server_opts_t *o, char *err, size_t errlen);
static int start_webhook_listener(kq_server_t *s, const kq_server_opts_t *o, char *err, size_t errlen);

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init_once(void)
{
    if ((mg_init_library(MG_FEATURES_TLS) & MG_FEATURES_TLS) == 0)
        kq_error("event=tls_init_failed msg=\"civetweb could not initialise OpenSSL\"");
    conn_ex_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, conn_ex_free);
}

void kq_server_global_init(void)
{
    kq_rest_init(); /* the start time of /ws/v1/clusters and /partitions */
    pthread_once(&global_once, global_init_once);
}

static void conn_limit_init(conn_limit_t *lim, int max)
{
    memset(lim, 0, sizeof(*lim));
    pthread_mutex_init(&lim->mu, NULL);
    lim->max = max;
}

/* Every connection's SSL is freed once the contexts have stopped: what is left is freed. */
static void conn_limit_destroy(conn_limit_t *lim)
{
    for (int i = 0; i < CLIENT_BUCKETS; i++) {
        while (lim->bucket[i] != NULL) {
            client_t *c = lim->bucket[i];
            lim->bucket[i] = c->next;
            free(c);
        }
    }
    pthread_mutex_destroy(&lim->mu);
}

static void server_free(kq_server_t *s)
{
    if (s == NULL)
        return;
    free(s->cert);
    free(s->key);
    free(s->ca);
    tls_id_free(&s->tls);
    if (s->tls_mu_init) {
        pthread_mutex_destroy(&s->tls_mu);
        pthread_mutex_destroy(&s->reap_mu);
        pthread_cond_destroy(&s->reap_cv);
    }
    if (s->views_init) {
        pthread_mutex_destroy(&s->views_mu);
        pthread_cond_destroy(&s->views_cv);
    }
    if (s->main_limit_init)
        conn_limit_destroy(&s->main_limit);
    if (s->wh_limit_init)
        conn_limit_destroy(&s->wh_limit);
    free(s);
}

static char *dup_opt(const char *s, bool *oom)
{
    if (s == NULL)
        return NULL;
    char *d = strdup(s);
    if (d == NULL)
        *oom = true;
    return d;
}

/* The main port's workers run at nice +MAIN_PORT_NICE once the scheduler verbs and the
 * webhooks have listeners of their own (the chart's layout): the main port is the one any
 * client in the cluster reaches (views, dashboard, metrics, probes), and its TLS handshakes
 * and views must not take the CPU from kube-scheduler's filter and bind or the API
 * server's webhook calls (BENCHMARKS.md, "Webhook latency under load"). A probe still
 * answers in milliseconds: the weight of nice 10 is a tenth of nice 0's, not nothing.
 * Linux applies setpriority to the one thread whose id it is given. */
#define MAIN_PORT_NICE 10

/* The scheduler listener's and the webhook listener's workers ask the kernel for a short
 * time slice (sched_setattr's sched_runtime for SCHED_OTHER: Linux 6.12 and later, no
 * privilege needed; older kernels ignore it). Under EEVDF a thread that wakes while every
 * core runs another thread may wait for that thread's slice to end (0.7 ms times 1 + log2
 * of the CPUs: 1.4 ms on two); a thread with a shorter slice gets an earlier deadline and
 * preempts sooner. A filter or webhook call wakes a worker, does well under a slice of
 * work and sleeps again, and kube-scheduler's serial cycle or the API server's pod
 * creation waits for it. On a saturated two-core host the extender rows of the end-to-end
 * benchmark ran 8% faster with it (BENCHMARKS.md, "End-to-end scheduling", run H). Nothing
 * changes a thread's share of the CPU: its nice is kept. */
#define LATENCY_SLICE_NS 100000ull

struct kq_sched_attr { /* struct sched_attr of <linux/sched/types.h>, which glibc 2.36 lacks */
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
};

static void latency_slice(void)
{
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    if (errno != 0)
        return;
    struct kq_sched_attr a = {.size = sizeof(a), .sched_policy = 0 /* SCHED_OTHER */, .sched_nice = nice,
                              .sched_runtime = LATENCY_SLICE_NS};
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0)
        kq_debug("event=slice_failed errno=%d msg=\"a latency-bound worker keeps the default time slice\"", errno);
}

static void *on_init_thread(const struct mg_context *ctx, int thread_type)
{
    const port_t *p = mg_get_user_data(ctx);
    if (thread_type != 1 || p == NULL)
        return NULL;
    if ((p->scheduler && p->s->sched_separate) || p->webhook)
        latency_slice();
    else if (!p->scheduler && p->s->wh_separate && p->s->sched_separate &&
             setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), MAIN_PORT_NICE) != 0)
        kq_warn("event=nice_failed msg=\"a main-port worker keeps its priority\"");
    return NULL;
}

/* One civetweb context: the main port and the scheduler listener differ only in address,
 * workers, TLS and the port_t their requests see. */
static struct mg_context *listener_start(kq_server_t *s, port_t *port, const char *listen, const char *threads,
                                         bool tls, char *err, size_t errlen)
{
    char ports[256];
    snprintf(ports, sizeof(ports), "%s%s", listen, tls ? "s" : "");
    port->tls = tls;
    const char *options[] = {
        "listening_ports", ports,
        "num_threads", threads,
        "enable_keep_alive", "yes",
        "tcp_nodelay", "1",
        "keep_alive_timeout_ms", "30000",
        /* a client that stalls mid-request (slow loris), or before or during the TLS
         * handshake (civetweb's SSL_accept loop uses the same limit), is cut off */
        "request_timeout_ms", "10000",
        "decode_url", "no",
        tls ? "ssl_protocol_version" : NULL, "4", /* plain HTTP: the list ends here */
        NULL,
    };
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof(cb));
    cb.begin_request = on_request;
    cb.log_message = on_log_message;
    cb.init_connection = on_init_connection;
    cb.init_thread = on_init_thread;
    if (tls)
        cb.init_ssl = on_init_ssl;
    struct mg_init_data init = {.callbacks = &cb, .user_data = port, .configuration_options = options};
    char mgerr[256] = "";
    unsigned code = 0;
    struct mg_error_data ed = {.code = &code, .text = mgerr, .text_buffer_size = sizeof(mgerr)};
    s->tls_err[0] = '\0';
    struct mg_context *ctx = mg_start2(&init, &ed);
    if (ctx == NULL) {
        if (s->tls_err[0] != '\0')
            kq_errf(err, errlen, "TLS setup failed: %s", s->tls_err);
        else
            kq_errf(err, errlen, "%s", mgerr[0] ? mgerr : "the HTTP server could not start");
    }
    return ctx;
}

kq_server_t *kq_server_start(const kq_server_opts_t *o, kq_app_t *app, char *err, size_t errlen)
{
    kq_server_t *s = NULL;
    if (o == NULL || app == NULL) {
        kq_errf(err, errlen, "no options or no application context");
        goto fail;
    }
    const char *listen = o->listen && o->listen[0] ? o->listen : DEFAULT_LISTEN;
    size_t ll = strlen(listen);
    if (ll > 200 || strchr(listen, ',') != NULL || listen[ll - 1] < '0' || listen[ll - 1] > '9') {
        kq_errf(err, errlen, "listen address \"%s\" must be HOST:PORT, [IPV6]:PORT or PORT", listen);
        goto fail;
    }
    if (!o->plain_http && (o->tls_cert == NULL || o->tls_key == NULL)) {
        kq_errf(err, errlen, "a TLS certificate and key are required unless plain HTTP is requested");
        goto fail;
    }
    if (o->plain_http && o->client_ca != NULL) {
        kq_errf(err, errlen, "client certificates need TLS; they cannot be combined with plain HTTP");
        goto fail;
    }
    if (o->threads < 0 || o->threads > 1024) {
        kq_errf(err, errlen, "threads must be between 1 and 1024");
        goto fail;
    }
    if (o->max_views > 1024) {
        kq_errf(err, errlen, "max concurrent views must be at most 1024");
        goto fail;
    }
    if (o->max_client_conns < 0 || o->max_client_conns > 1024) {
        kq_errf(err, errlen, "max client connections must be between 1 and 1024");
        goto fail;
    }

    kq_server_global_init();
    s = calloc(1, sizeof(*s));
    if (s == NULL) {
        kq_errf(err, errlen, "out of memory");
        goto fail;
    }
    atomic_init(&s->all_listening, false);
    bool oom = false;
    pthread_mutex_init(&s->tls_mu, NULL);
    s->tls_mu_init = true;
    pthread_mutex_init(&s->reap_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->reap_cv, &ca);
    pthread_mutex_init(&s->views_mu, NULL);
    pthread_cond_init(&s->views_cv, &ca);
    s->views_init = true;
    pthread_condattr_destroy(&ca);
    s->views_max = o->max_views < 0 ? 0 : o->max_views > 0 ? o->max_views : DEFAULT_MAX_VIEWS;
    s->app = app;
    s->max_body = o->max_body ? o->max_body : DEFAULT_MAX_BODY;
    s->auth = o->auth;
    s->metrics_auth = o->metrics_auth;
    s->extender_local_only = o->extender_local_only;
    s->extender_open = o->extender_open && !o->extender_local_only;
    if (o->admission != NULL) {
        /* Shallow copies: the strings and arrays they point to are borrowed, like app. */
        s->admission = true;
        s->adm = *o->admission;
        s->adm.ns_filter = NULL; /* identity and workloads naming the scheduler: every namespace sent */
        s->adm_sched = *o->admission;
        s->adm_sched.set_scheduler_name = true;
        s->adm_optin = s->adm_sched;
        s->adm_optin.ns_filter = NULL;
    }
    if (!o->plain_http) {
        s->cert = dup_opt(o->tls_cert, &oom);
        s->key = dup_opt(o->tls_key, &oom);
        s->ca = dup_opt(o->client_ca, &oom);
    }
    if (oom) {
        kq_errf(err, errlen, "out of memory");
        goto fail;
    }

    s->sched_separate = o->scheduler_listen != NULL;
    int nthreads = o->threads > 0 ? o->threads : DEFAULT_THREADS;
    char threads[16];
    snprintf(threads, sizeof(threads), "%d", nthreads);
    conn_limit_init(&s->main_limit, o->max_client_conns > 0 ? o->max_client_conns : (nthreads + 1) / 2);
    s->main_limit.workers = nthreads;
    s->main_limit.idle_s = REAP_IDLE_MAIN_S;
    s->main_limit_init = true;
    s->wh_separate = o->webhook_listen != NULL;
    s->main_port = (port_t){.s = s, .scheduler = false, .limit = o->plain_http ? NULL : &s->main_limit};
    s->sched_port = (port_t){.s = s, .scheduler = true};
    s->ctx = listener_start(s, &s->main_port, listen, threads, !o->plain_http, err, errlen);
    if (s->ctx == NULL)
        goto fail;
    kq_info("event=http_listening listen=%s port=%d tls=%s client_certs=%s max_body=%zu threads=%s "
            "max_client_connections=%d", listen, kq_server_port(s), o->plain_http ? "off" : "on",
            s->ca ? "required" : "off", s->max_body, threads, o->plain_http ? 0 : s->main_limit.max);
    if (o->scheduler_listen != NULL && start_scheduler_listener(s, o, err, errlen) != 0) {
        mg_stop(s->ctx);
        s->ctx = NULL;
        goto fail;
    }
    if (o->webhook_listen != NULL && start_webhook_listener(s, o, err, errlen) != 0) {
        if (s->sched_ctx != NULL)
            mg_stop(s->sched_ctx);
        s->sched_ctx = NULL;
        mg_stop(s->ctx);
        s->ctx = NULL;
        goto fail;
    }
    if (s->main_port.limit != NULL || s->wh_port.limit != NULL) {
        if (pthread_create(&s->reaper, NULL, reaper_main, s) == 0)
            s->reaper_started = true;
        else
            kq_warn("event=reaper_not_started msg=\"idle connections will not be closed early when workers "
                    "are scarce\"");
    }
    atomic_store(&s->all_listening, true);
    return s;
fail:
    server_free(s);
    return NULL;
}

/* True for "127.x.y.z:PORT" and "[::1]:PORT". */
static bool loopback_listen(const char *l)
{
    return strncmp(l, "127.", 4) == 0 || strncmp(l, "[::1]:", 6) == 0;
}

/* The scheduler's own listener: its own workers, serving only the scheduler verbs and the
 * probes, so that no load on the webhook and REST port (slow bodies, idle TLS connections,
 * handshake floods) can make a filter wait for a worker. TLS with the main port's
 * certificate (and its client-certificate rule) unless the main port is plain HTTP or
 * scheduler_plain_http asks for plain HTTP here alone; a plain-HTTP scheduler listener must
 * be on loopback. Why plain HTTP there at all: kube-scheduler keeps 2 idle connections per
 * extender and binds in parallel, so over TLS most binds cost a handshake on both sides
 * (BENCHMARKS.md, "What bounds the extender path"); on loopback inside one pod only that
 * pod's processes can connect (the chart's README, "The scheduler's port"). */
static int start_scheduler_listener(kq_server_t *s, const kq_server_opts_t *o, char *err, size_t errlen)
{
    const char *l = o->scheduler_listen;
    bool tls = !o->plain_http && !o->scheduler_plain_http;
    size_t ll = strlen(l);
    if (ll > 200 || strchr(l, ',') != NULL || l[ll - 1] < '0' || l[ll - 1] > '9') {
        kq_errf(err, errlen, "scheduler listen address \"%s\" must be HOST:PORT, [IPV6]:PORT", l);
        return KQ_EINVAL;
    }
    if (!tls && !loopback_listen(l)) {
        kq_errf(err, errlen, "scheduler listen address \"%s\" must be a loopback HOST:PORT (127.0.0.1:PORT or "
               "[::1]:PORT) with plain HTTP (--insecure-plain-http or --scheduler-plain-http): it would serve "
               "plain HTTP beyond this host", l);
        return KQ_EINVAL;
    }
    if (o->scheduler_threads < 0 || o->scheduler_threads > 256) {
        kq_errf(err, errlen, "scheduler threads must be between 1 and 256");
        return KQ_EINVAL;
    }
    char threads[16];
    snprintf(threads, sizeof(threads), "%d", o->scheduler_threads > 0 ? o->scheduler_threads : DEFAULT_SCHED_THREADS);
    char why[320] = "";
    s->sched_ctx = listener_start(s, &s->sched_port, l, threads, tls, why, sizeof(why));
    if (s->sched_ctx == NULL) {
        kq_errf(err, errlen, "scheduler listener %s: %s", l, why);
        return KQ_EIO;
    }
    kq_info("event=http_listening listen=%s port=%d tls=%s client_certs=%s role=scheduler threads=%s", l,
            kq_server_scheduler_port(s), tls ? "on" : "off", tls && s->ca ? "required" : "off", threads);
    return 0;
}

/* The webhooks' own listener: its own workers and its own per-client connection limit,
 * serving only the admission webhooks and the probes, so that connections held on the main
 * port (idle keep-alive, slow bodies, handshake floods from any number of addresses) never
 * make the API server's webhook call wait for a worker. TLS like the main port (same
 * certificate, same client-certificate rule); plain HTTP only on loopback. */
static int start_webhook_listener(kq_server_t *s, const kq_server_opts_t *o, char *err, size_t errlen)
{
    const char *l = o->webhook_listen;
    bool tls = !o->plain_http;
    size_t ll = strlen(l);
    if (o->admission == NULL) {
        kq_errf(err, errlen, "a webhook listener (--webhook-listen) needs the admission webhooks");
        return KQ_EINVAL;
    }
    if (ll == 0 || ll > 200 || strchr(l, ',') != NULL || l[ll - 1] < '0' || l[ll - 1] > '9') {
        kq_errf(err, errlen, "webhook listen address \"%s\" must be HOST:PORT, [IPV6]:PORT or PORT", l);
        return KQ_EINVAL;
    }
    if (!tls && !loopback_listen(l)) {
        kq_errf(err, errlen, "webhook listen address \"%s\" must be a loopback HOST:PORT (127.0.0.1:PORT or "
               "[::1]:PORT) with plain HTTP (--insecure-plain-http or --scheduler-plain-http): it would serve "
               "plain HTTP beyond this host", l);
        return KQ_EINVAL;
    }
    if (o->webhook_threads < 0 || o->webhook_threads > 1024) {
        kq_errf(err, errlen, "webhook threads must be between 1 and 1024");
        return KQ_EINVAL;
    }
    int n = o->webhook_threads > 0 ? o->webhook_threads : DEFAULT_WEBHOOK_THREADS;
    char threads[16];
    snprintf(threads, sizeof(threads), "%d", n);
    /* No per-address cap here: the port's one legitimate client, the API server, calls from
     * one address per instance over as many connections as it has creates in flight (a
     * ReplicaSet's slow-start batch is up to 500), and a connection shut down over a cap
     * fails its create ("failed calling webhook ... EOF"; with half the workers, 13 of 200
     * creates 64 at a time failed on the real API server: tests/cluster/
     * test_kube_connections.py). Connections beyond the workers wait in civetweb's queue
     * instead, and the reaper frees workers held by idle or slow connections, from any
     * address, when they are scarce; keeping other clients off the port is the
     * NetworkPolicy's part (charts/kubequota/README.md, TLS). The limit still tracks every
     * connection for the reaper. */
    conn_limit_init(&s->wh_limit, 0);
    s->wh_limit.workers = n;
    /* An answered connection is the API server's, kept alive: shutting it down would race
     * with its next call (conn_close_when_scarce). While workers are scarce, answers close
     * their connections instead; connections that never finish a request are shed. */
    s->wh_limit.keep_answered = true;
    s->wh_limit.idle_s = REAP_IDLE_WEBHOOK_S;
    s->wh_limit_init = true;
    s->wh_port = (port_t){.s = s, .webhook = true, .limit = tls ? &s->wh_limit : NULL};
    char why[320] = "";
    s->wh_ctx = listener_start(s, &s->wh_port, l, threads, tls, why, sizeof(why));
    if (s->wh_ctx == NULL) {
        kq_errf(err, errlen, "webhook listener %s: %s", l, why);
        return KQ_EIO;
    }
    kq_info("event=http_listening listen=%s port=%d tls=%s client_certs=%s role=webhooks threads=%s "
            "max_client_connections=none", l, kq_server_webhook_port(s), tls ? "on" : "off",
            s->ca ? "required" : "off", threads);
    return 0;
}

void kq_server_stop(kq_server_t *s)
{
    if (s == NULL)
        return;
    if (s->reaper_started) {
        pthread_mutex_lock(&s->reap_mu);
        s->reap_stop = true;
        pthread_cond_signal(&s->reap_cv);
        pthread_mutex_unlock(&s->reap_mu);
        pthread_join(s->reaper, NULL);
    }
    if (s->wh_ctx != NULL)
        mg_stop(s->wh_ctx);
    if (s->sched_ctx != NULL)
        mg_stop(s->sched_ctx);
    if (s->ctx != NULL)
        mg_stop(s->ctx);
    server_free(s);
}

int kq_server_port(const kq_server_t *s)
{
    if (s == NULL || s->ctx == NULL)
        return -1;
    struct mg_server_port ports[4];
    int n = mg_get_server_ports(s->ctx, 4, ports);
    return n > 0 ? ports[0].port : -1;
}

int kq_server_scheduler_port(const kq_server_t *s)
{
    if (s == NULL || s->sched_ctx == NULL)
        return -1;
    struct mg_server_port ports[2];
    int n = mg_get_server_ports(s->sched_ctx, 2, ports);
    return n > 0 ? ports[0].port : -1;
}

int kq_server_webhook_port(const kq_server_t *s)
{
    if (s == NULL || s->wh_ctx == NULL)
        return -1;
    struct mg_server_port ports[2];
    int n = mg_get_server_ports(s->wh_ctx, 2, ports);
    return n > 0 ? ports[0].port : -1;
}
