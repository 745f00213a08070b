/* HTTP(S) server (civetweb): TLS, routing, body limits and error responses for the
 * scheduler extender, the REST usage view, health checks and metrics. Handlers are thin:
 * read the body, call the extender/rest/metrics module, write the answer.
 *
 * Routes (anything else 404; a known path with the wrong method 405 + Allow):
 *   POST /scheduler/filter | /scheduler/bind | /scheduler/preempt      (extender.h)
 *   GET  /healthz  200 "ok";  GET /readyz  200 once app->ready, else 503;  GET /metrics
 *   GET  /ws/v1/partition/{partition}/usage/users | usage/user/{user} | usage/groups |
 *        usage/group/{group} | queues                                   (rest.h)
 *   POST /ws/v1/validate-conf                                            (rest.h)
 *   GET  /ui (redirect to ui/), /ui/, /ui/{file}: the dashboard, open (ui.h)
 *   POST /admission/mutate | /admission/mutate-scheduler | /admission/mutate-scheduler-opt-in |
 *        /admission/validate (admission.h; only when opts.admission is set, else 404).
 *        mutate-scheduler is mutate with set_scheduler_name forced on, in the namespaces
 *        opts.admission->ns_filter processes; mutate-scheduler-opt-in the same without the
 *        filter; mutate never applies the filter.
 * The scheduler verbs answer loopback peers and callers with a client certificate verified
 * against client_ca; others get 403 unless extender_open (loopback only with
 * extender_local_only).
 * Path parameters are percent-decoded. Error bodies are JSON {"error":"..."}.
 * Bodies: a Content-Length above max_body (KQ_ADMISSION_MAX_BODY for the webhooks) is
 * answered 413 without reading the body; a chunked body is read up to the limit and then
 * answered 413. The connection is closed after a 413. A body must arrive within 8 s of
 * the request's headers (else 408), and all bodies held at once share a 128 MiB budget
 * (else 503: a few huge bodies cannot exhaust memory).
 * With scheduler_listen a second listener with its own workers serves the scheduler verbs
 * and the probes only (TLS with the same certificate and client_ca rule unless plain_http
 * or scheduler_plain_http, when it must be on loopback); the main port then answers the
 * verbs 404.
 * With webhook_listen a third listener with its own workers (webhook_threads) and its own
 * per-client connection limit (half its workers) serves the admission webhooks and the
 * probes only, under the same TLS rules; the main port then answers the webhooks 404. The
 * API server is pointed at it (the chart's webhook configurations and Service do), so no
 * load on the main port (any number of client addresses holding its workers) delays a
 * webhook call.
 *
 * Per-client connections: one client address holds at most max_client_conns connections
 * of the main TLS port (counted from the start of the TLS handshake, before a byte is read,
 * to the close); more are shut down at once. A TLS handshake, like a request, must finish
 * within 10 s (civetweb's request_timeout_ms, which its SSL_accept loop also uses).
 * Idle connections: on the main TLS port and the webhook port, a connection is idle unless
 * a request's body is in and it is being answered (in the handshake, waiting for or reading
 * a request, kept alive). When fewer than an eighth of a port's workers are free, a reaper
 * thread (every 50 ms) shuts down connections idle for 1 s or more on the main port, 0.25 s
 * on the webhook port (the API server sends a whole request at once), oldest first, until
 * that many are free again (logged as event=idle_connections_closed, at most every 10 s).
 *
 * TLS: TLS 1.2 minimum, forward-secret AEAD cipher suites only for TLS 1.2 (TLS 1.3 suites
 * are all strong); certificate chain and key from separate PEM files; with client_ca, a
 * client certificate signed by that CA is required.
 */
#ifndef KUBEQUOTA_SERVER_H
#define KUBEQUOTA_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "kubequota/serve/admission.h"
#include "kubequota/app.h"
#include "kubequota/base/error.h"

typedef struct kq_server_opts {
    const char *listen;     /* "HOST:PORT" or "[V6]:PORT" or "PORT"; NULL = "0.0.0.0:8443"; port 0 = any free port */
    const char *tls_cert;   /* PEM certificate chain (leaf first) */
    const char *tls_key;    /* PEM private key */
    const char *client_ca;  /* PEM CA bundle; NULL = no client certificates */
    bool plain_http;        /* serve plain HTTP (--insecure-plain-http, local tests only) */
    size_t max_body;        /* largest request body; 0 = 64 MiB */
    int threads;            /* worker threads; 0 = 32 */
    const kq_admission_opts_t *admission; /* admission webhook settings (copied); NULL = no webhook routes */
    struct kq_auth *auth;   /* access rules of the usage view (borrowed); NULL = open */
    bool metrics_auth;      /* /metrics follows the usage view's access rules */
    bool extender_local_only; /* the /scheduler/ verbs answer only loopback peers (sidecar) */
    bool extender_open;     /* the /scheduler/ verbs answer anyone; default (false): loopback
                             * peers and callers with a verified client certificate only */
    const char *scheduler_listen; /* HOST:PORT of the scheduler's own listener (its own
                                   * workers; scheduler verbs and probes only; TLS unless
                                   * plain_http, then loopback only), or NULL */
    bool scheduler_plain_http; /* the scheduler listener speaks plain HTTP while the other
                                * ports keep TLS (--scheduler-plain-http): loopback only,
                                * for kube-scheduler in the same pod (no handshake per bind) */
    int scheduler_threads;  /* its workers; 0 = 8 */
    const char *webhook_listen; /* HOST:PORT of the admission webhooks' own listener (its own
                                 * workers and per-client limit; webhooks and probes only;
                                 * TLS unless plain_http, then loopback only), or NULL. Needs
                                 * admission. */
    int webhook_threads;    /* its workers; 0 = 32; one client address holds at most half */
    int max_client_conns;   /* connections one client address may hold on the main (TLS)
                             * port, from the TLS handshake on; more are closed at once.
                             * 0 = half of threads */
    int max_views;          /* large views (usage/users, usage/groups, applications, a queue's
                             * applications, charges, gating/waiting, /metrics) built and sent
                             * at once; one more waits up to 1 s for a slot, then answers 503
                             * with Retry-After. 0 = 2; negative = no limit */
} kq_server_opts_t;

typedef struct kq_server kq_server_t;

/* Initialises civetweb (and through it OpenSSL) once per process. kq_server_start calls it
 * too; calling it first from main, before any thread starts, is cleaner. Idempotent. */
void kq_server_global_init(void);

/* Starts listening and serving on worker threads. app is borrowed and must outlive the
 * server. NULL on failure with the reason in err (bad options, unreadable certificate or
 * key, key not matching, address in use...). */
kq_server_t *kq_server_start(const kq_server_opts_t *o, kq_app_t *app, char *err, size_t errlen);

/* Stops accepting, waits for the requests in flight, frees. NULL is a no-op. */
void kq_server_stop(kq_server_t *s);

/* The bound port (useful with port 0), or -1. */
int kq_server_port(const kq_server_t *s);
/* The scheduler listener's bound port, or -1 when there is none. */
int kq_server_scheduler_port(const kq_server_t *s);
/* The webhook listener's bound port, or -1 when there is none. */
int kq_server_webhook_port(const kq_server_t *s);

#endif
