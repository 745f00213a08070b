/* Kubernetes API client (libcurl): connection settings from a kubeconfig or the in-cluster
 * service account, plain requests, pod binding, events, and a list/watch informer.
 *
 * kube is a client: it parses the API server's JSON and hands objects to its caller; it
 * decides nothing about quota.
 *
 * Threads: kq_kube_t is shared; every request uses its own curl easy handle (never shared
 * between threads). Each informer runs its own thread. Events are posted by one background
 * thread from a bounded queue, deduplicated and rate-limited, so callers never block.
 * Credentials (tokens, keys) are never logged.
 */
#ifndef KUBEQUOTA_KUBE_H
#define KUBEQUOTA_KUBE_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "kubequota/base/error.h"
#include "kubequota/kube/jscan.h"

typedef struct kq_kube_conf {
    char *server;               /* "https://host:port" (no trailing slash) */
    char *ca_file, *ca_pem;     /* certificate authority: a file, or PEM data; or neither */
    char *cert_file, *cert_pem; /* client certificate */
    char *key_file, *key_pem;   /* client key */
    char *token;                /* bearer token */
    char *token_file;           /* re-read on each request (rotated service-account tokens) */
    bool insecure;              /* insecure-skip-tls-verify */
    char *namespace;            /* context namespace / in-cluster namespace, may be NULL */
} kq_kube_conf_t;

void kq_kube_conf_free(kq_kube_conf_t *c);

/* Standard kubeconfig (YAML): current-context -> cluster (server, certificate-authority,
 * certificate-authority-data, insecure-skip-tls-verify) and user (client-certificate(-data),
 * client-key(-data), token, tokenFile). Relative file paths are resolved against the
 * kubeconfig's folder. Errors go to diags with file/line/column; *out untouched. */
int kq_kubeconfig_load(const char *path, kq_kube_conf_t *out, kq_diags_t *diags) KQ_WUR;
int kq_kubeconfig_parse(const char *buf, size_t len, const char *name, const char *base_dir,
                        kq_kube_conf_t *out, kq_diags_t *diags) KQ_WUR;

/* In-cluster: KUBERNETES_SERVICE_HOST/PORT, token and CA under
 * /var/run/secrets/kubernetes.io/serviceaccount (root overridable for tests). */
int kq_kube_conf_in_cluster(const char *sa_dir, kq_kube_conf_t *out, kq_diags_t *diags) KQ_WUR;

typedef struct kq_kube kq_kube_t;

/* Limits and timings of a client. kq_kube_opts_default() fills the defaults shown. */
typedef struct kq_kube_opts {
    size_t max_response;       /* bytes of one response body (a LIST page): 256 MiB */
    size_t max_watch_line;     /* bytes of one watch event line: 16 MiB (longer -> relist) */
    long connect_timeout_ms;   /* 5000 */
    long request_timeout_ms;   /* whole request, except watches: 30000 */
    int watch_timeout_s;       /* timeoutSeconds of a watch: 300 */
    long watch_progress_ms;    /* a watch that receives nothing (no event, no bookmark) for this
                                * long is stalled and the informer relists: 150000 (the API
                                * server's watch cache sends a bookmark about every minute:
                                * defaultBookmarkFrequency in kubernetes
                                * staging/src/k8s.io/apiserver/pkg/storage/cacher/cacher.go);
                                * 0 = off */
    int list_page_size;        /* limit= of a LIST page: 500 */
    long backoff_min_ms;       /* first reconnect delay after an error: 200 */
    long backoff_max_ms;       /* cap of the exponential backoff: 10000 */
    double event_rate;         /* events per second (token bucket refill): 10 */
    double event_burst;        /* token bucket size: 50 */
    int event_dedup_s;         /* least time between two writes of one Event series: 60 */
    long event_update_ms;      /* the same in milliseconds when > 0 (--event-update-interval): 0 */
    size_t event_queue;        /* bounded queue of events waiting to be posted: 1024 */
    const char *token_header;  /* also send the bearer token as "<token_header>: Bearer <t>"
                                * (the kubectl plugin through the service proxy, which drops
                                * Authorization; kubectl.h), static text; NULL: not */
} kq_kube_opts_t;
void kq_kube_opts_default(kq_kube_opts_t *o);

/* New client (copies conf). NULL on ENOMEM or when conf has no server.
 * curl_global_init(CURL_GLOBAL_DEFAULT) must have been called once (main does it, before
 * any thread starts; tests do it themselves). */
kq_kube_t *kq_kube_new(const kq_kube_conf_t *conf);
/* Same with explicit limits (opts NULL = defaults). */
kq_kube_t *kq_kube_new_opts(const kq_kube_conf_t *conf, const kq_kube_opts_t *opts);
/* Stops the event thread and frees. Informers must be stopped first. NULL is a no-op. */
void kq_kube_free(kq_kube_t *k);

typedef struct kq_kube_resp {
    long status;  /* HTTP status, 0 when no response */
    char *body;   /* NUL-terminated, owned */
    size_t len;
} kq_kube_resp_t;
void kq_kube_resp_free(kq_kube_resp_t *r);

/* One request; path starts with "/" (query included). body may be NULL. Returns 0 when a
 * response arrived (any status; see resp->status), KQ_EIO / KQ_ETIMEDOUT otherwise, and
 * KQ_ETOOBIG when the response exceeds the client's limit. */
int kq_kube_request(kq_kube_t *k, const char *method, const char *path, const char *content_type,
                    const char *body, kq_kube_resp_t *resp) KQ_WUR;

/* POST the v1 Binding. 0 on 201; otherwise an error with the API server's message in err
 * (KQ_ECONFLICT on 409, KQ_ENOENT on 404, KQ_EHTTP others, KQ_EIO transport). */
int kq_kube_bind(kq_kube_t *k, const char *ns, const char *name, const char *uid, const char *node,
                 char *err, size_t errlen) KQ_WUR;

/* GET a pod; *out is a new reference. KQ_ENOENT on 404. */
int kq_kube_get_pod(kq_kube_t *k, const char *ns, const char *name, json_t **out) KQ_WUR;

/* POST a policy/v1 Eviction. 0 on 200/201; KQ_ECONFLICT on 429 (PDB), KQ_ENOENT on 404. */
int kq_kube_evict(kq_kube_t *k, const char *ns, const char *name, char *err, size_t errlen) KQ_WUR;

/* Queue an Event about a pod (type "Warning"/"Normal"). Aggregated like client-go's
 * recorder: one Event object per (pod uid, reason, message) whose count rises with each
 * repeat (written as a PATCH at most every event_dedup_s); rate-limited; never blocks,
 * never fails the caller. */
void kq_kube_event(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                   const char *type, const char *reason, const char *message);
/* kq_kube_event for a pod named by an untrusted request: the event thread first GETs the
 * pod and posts only if the API server has it with pod_uid (no event about pods that do
 * not exist, in namespaces a caller picked). */
void kq_kube_event_confirmed(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                             const char *type, const char *reason, const char *message);
/* kq_kube_event of a Warning that is not a denial (the pod is not held back for it): its
 * admission later posts no QuotaAdmitted. */
void kq_kube_event_notice(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid, const char *reason,
                          const char *message);
/* A pod that got a Warning event from this client (a denial) is admitted now: queues one
 * Normal event (reason, message). Nothing for a pod that never got a Warning. O(1). */
void kq_kube_event_admitted(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid,
                            const char *reason, const char *message);
/* Queues a merge PATCH of one annotation (key: value) on the pod, carrying metadata.uid so
 * that a pod of that name with another uid is left alone (the API server answers 409).
 * Shares the events' token bucket, bounded queue and thread: true when queued, false when
 * the bucket is empty, the queue is full or memory ran out (the caller may try again
 * later). Never blocks on I/O. */
bool kq_kube_pod_annotate(kq_kube_t *k, const char *ns, const char *pod_name, const char *pod_uid, const char *key,
                          const char *value);
/* kq_kube_pod_annotate writes the API server accepted / that failed. */
void kq_kube_annotate_stats(kq_kube_t *k, unsigned long *done, unsigned long *failed);
/* Events actually posted / dropped by dedup or rate limit (for tests and metrics). */
void kq_kube_event_stats(kq_kube_t *k, unsigned long *posted, unsigned long *suppressed);

/* ---- informer (list + watch) ---- */
enum kq_watch_type { KQ_WATCH_ADDED = 1, KQ_WATCH_MODIFIED, KQ_WATCH_DELETED };

typedef struct kq_watch_handler {
    void (*list_begin)(void *ud);                       /* a full (re)list starts */
    void (*object)(void *ud, int type, json_t *obj);    /* borrowed; list items come as ADDED */
    void (*list_end)(void *ud);                         /* the list is complete: reconcile */
    /* Instead of `object`, when set: the object as a decoded document's node (kq_jdoc,
     * see jscan.h), valid only during the call. No jansson tree is built: the informer
     * decodes each line and list item into one document it reuses. */
    void (*doc)(void *ud, int type, const kq_jnode_t *obj);
    void *ud;
    /* What `object` receives of each listed or watched object (NULL: all of it), e.g.
     * kq_pod_fields: the members not named are validated but never built. Must keep
     * metadata.resourceVersion (the watch resumes from it; kq_kube_watch_start refuses a
     * filter without it). */
    const kq_jfilter_t *keep;
} kq_watch_handler_t;

typedef struct kq_watch kq_watch_t;

/* Starts a thread that LISTs `path` (e.g. "/api/v1/pods") with the extra query (may be
 * NULL; e.g. "fieldSelector=...") in pages (limit/continue), then WATCHes from the list's
 * resourceVersion with allowWatchBookmarks=true. Events are split on newlines, not chunk
 * boundaries. A watch that ends cleanly resumes from the last resourceVersion seen; errors
 * reconnect with capped exponential backoff; a 410 (HTTP or in-band ERROR event) relists
 * (list_begin ... list_end). NULL on failure to start. */
kq_watch_t *kq_kube_watch_start(kq_kube_t *k, const char *path, const char *query,
                                const kq_watch_handler_t *h);
/* Callback order: list_begin, object(ADDED)*, list_end, then watch events. A list that
 * fails part-way (after list_begin) is retried from scratch and starts again with
 * list_begin; only list_end ends a list. Callbacks run on the informer's thread and must
 * not call kq_kube_watch_stop on their own informer. */

/* Stops the thread (aborts an open watch) and frees. NULL is a no-op. */
void kq_kube_watch_stop(kq_watch_t *w);

/* Feeds raw watch-stream bytes through the informer's own line framing and event
 * decoding, without a connection or a thread: data[0..len) arrives in chunks ending at
 * the offsets in cuts[] (increasing; out-of-order or out-of-range ones are ignored), as
 * curl would deliver them; each ADDED/MODIFIED/DELETED event reaches h->doc or h->object
 * (with h->keep applied) and list callbacks are never called. Returns 0 when the stream is still
 * good (a line left unfinished at the end is kept back, as in a live stream); KQ_EGONE
 * when it asks for a relist (an ERROR event with 410/Expired/Gone, or a line longer than
 * max_line); KQ_EPARSE on an event that is not JSON or has no type or object, or another
 * ERROR event; KQ_ENOMEM. For tests and the watch-stream fuzzer. */
int kq_kube_watch_feed(const kq_watch_handler_t *h, const char *data, size_t len, const size_t *cuts,
                       size_t ncuts, size_t max_line) KQ_WUR;
/* True once the first full list has been delivered. */
bool kq_watch_synced(kq_watch_t *w);
/* Number of watch restarts (reconnects and relists) so far. */
unsigned long kq_watch_restarts(kq_watch_t *w);

#endif
