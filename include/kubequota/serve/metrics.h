/* Prometheus metrics: counters and latency histograms updated lock-free from any thread,
 * and the text exposition format (version 0.0.4) rendered at scrape time.
 *
 * Families:
 *   kubequota_decisions_total{verb,result}                 counter
 *   kubequota_request_duration_seconds{endpoint}           histogram, 50us .. 1s
 *   kubequota_watch_restarts_total                         counter (kq_metrics_watch_restart
 *                                                          calls plus app->sync's restarts)
 *   kubequota_config_reloads_total{result}                 counter (success|failure)
 *   kubequota_tls_connections_total{listener}              counter (main|scheduler|webhook): TLS
 *                                                          connections accepted, one handshake each
 *   kubequota_connections_total{listener}                  counter: every connection accepted, TLS
 *                                                          or plain HTTP (the scheduler's loopback port)
 *   kubequota_pods_tracked{state}                          gauge (pending|counted), from the ledger
 *   kubequota_user_resource_used{user,queue,resource}      gauge, from the ugm user view
 *   kubequota_group_resource_used{group,queue,resource}    gauge, from the ugm group view
 *   kubequota_queue_resource_used{queue,resource}          gauge, from the ugm queue view
 *   kubequota_queue_running_applications{queue}            gauge
 *   kubequota_user_running_applications{user,queue}        gauge
 * Resource values are canonical units (cpu in millicores, memory in bytes, others counts).
 * Label values are the route pattern (never a raw request path), fixed verbs and results,
 * and names from the engine; they are escaped as the format requires.
 *
 * Thread safety: every function may be called from any thread; updates are C11 atomics.
 * Rendering takes the ledger's and ugm's locks only through their own JSON/size calls.
 */
#ifndef KUBEQUOTA_METRICS_H
#define KUBEQUOTA_METRICS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct kq_metrics kq_metrics_t;
struct kq_app;

/* HTTP endpoints with a latency histogram; the label is the route pattern. */
typedef enum kq_endpoint {
    KQ_EP_FILTER = 0,     /* /scheduler/filter */
    KQ_EP_BIND,           /* /scheduler/bind */
    KQ_EP_PREEMPT,        /* /scheduler/preempt */
    KQ_EP_ADMISSION,      /* /admission/mutate */
    KQ_EP_ADMISSION_SCHED, /* /admission/mutate-scheduler */
    KQ_EP_ADMISSION_VALIDATE, /* /admission/validate */
    KQ_EP_HEALTHZ,        /* /healthz */
    KQ_EP_READYZ,         /* /readyz */
    KQ_EP_METRICS,        /* /metrics */
    KQ_EP_USAGE_USERS,    /* /ws/v1/partition/{partition}/usage/users */
    KQ_EP_USAGE_USER,     /* /ws/v1/partition/{partition}/usage/user/{user} */
    KQ_EP_USAGE_GROUPS,   /* /ws/v1/partition/{partition}/usage/groups */
    KQ_EP_USAGE_GROUP,    /* /ws/v1/partition/{partition}/usage/group/{group} */
    KQ_EP_QUEUES,         /* /ws/v1/partition/{partition}/queues */
    KQ_EP_VALIDATE_CONF,  /* /ws/v1/validate-conf */
    KQ_EP_PRICES,         /* /ws/v1/partition/{partition}/prices */
    KQ_EP_CHARGES,        /* /ws/v1/partition/{partition}/charges */
    KQ_EP_PARTITIONS,     /* /ws/v1/partitions */
    KQ_EP_QUEUE,          /* /ws/v1/partition/{partition}/queue/{queue} */
    KQ_EP_QUEUE_APPS,     /* /ws/v1/partition/{partition}/queue/{queue}/applications */
    KQ_EP_APPS,           /* /ws/v1/partition/{partition}/applications[/{state}] */
    KQ_EP_NODES,          /* /ws/v1/partition/{partition}/nodes */
    KQ_EP_CLUSTERS,       /* /ws/v1/clusters */
    KQ_EP_HEALTHCHECK,    /* /ws/v1/scheduler/healthcheck */
    KQ_EP_CONFIG,         /* /ws/v1/config */
    KQ_EP_PLACEMENT_RULES, /* /ws/v1/partition/{partition}/placementrules */
    KQ_EP_EXPLAIN,        /* /ws/v1/partition/{partition}/explain */
    KQ_EP_EXPLAIN_POD,    /* /ws/v1/partition/{partition}/explain/{namespace}/{pod} */
    KQ_EP_UI,             /* /ui, /ui/ and /ui/{file}: the dashboard */
    KQ_EP_GATING_WAITING, /* /ws/v1/partition/{partition}/gating/waiting */
    KQ_EP_HISTORY,        /* /ws/v1/partition/{partition}/history[/{kind}/{name}] */
    KQ_EP_NODE,           /* /ws/v1/partition/{partition}/node/{node} */
    KQ_EP_APPLICATION,    /* /ws/v1/partition/{partition}[/queue/{queue}]/application/{application} */
    KQ_EP_WS_METRICS,     /* /ws/v1/metrics: YuniKorn's metric families */
    KQ_EP_YK_HISTORY,     /* /ws/v1/history/apps, /ws/v1/history/containers */
    KQ_EP_NODE_UTILIZATIONS, /* /ws/v1/scheduler/node-utilizations */
    KQ_EP_COUNT
} kq_endpoint_t;

typedef enum kq_verb { KQ_VERB_FILTER = 0, KQ_VERB_BIND, KQ_VERB_PREEMPT, KQ_VERB_ADMISSION, KQ_VERB_COUNT } kq_verb_t;

/* skipped: a pod of another scheduler passed through filter (or was bound without quota). */
typedef enum kq_result {
    KQ_RESULT_ALLOWED = 0,
    KQ_RESULT_DENIED,
    KQ_RESULT_ERROR,
    KQ_RESULT_SKIPPED,
    KQ_RESULT_COUNT
} kq_result_t;

/* Label texts (static strings); "unknown" for an out-of-range value. */
const char *kq_endpoint_name(kq_endpoint_t ep);
const char *kq_verb_name(kq_verb_t v);
const char *kq_result_name(kq_result_t r);

/* New registry with every counter at 0. NULL on ENOMEM. */
kq_metrics_t *kq_metrics_new(void);
/* NULL is a no-op. */
void kq_metrics_free(kq_metrics_t *m);

/* Updates. m may be NULL (no-op); out-of-range enums are ignored. */
void kq_metrics_decision(kq_metrics_t *m, kq_verb_t verb, kq_result_t result);
void kq_metrics_latency(kq_metrics_t *m, kq_endpoint_t ep, double seconds);
void kq_metrics_config_reload(kq_metrics_t *m, bool ok);
void kq_metrics_watch_restart(kq_metrics_t *m);

/* Listeners with a TLS connection counter. */
typedef enum kq_listener {
    KQ_LISTENER_MAIN = 0,
    KQ_LISTENER_SCHEDULER,
    KQ_LISTENER_WEBHOOK,
    KQ_LISTENER_COUNT
} kq_listener_t;

/* One connection accepted on listener l; tls: its handshake done (counted in both). */
void kq_metrics_connection(kq_metrics_t *m, kq_listener_t l, bool tls);
unsigned long kq_metrics_tls_connection_count(kq_metrics_t *m, kq_listener_t l);
unsigned long kq_metrics_connection_count(kq_metrics_t *m, kq_listener_t l);

/* One quota decision on a pod of ours: kubequota_admission_attempts_total{queue,result,
 * reason}; result "admitted" or "denied", reason a fixed word for denials ("" when
 * admitted). Lock-free after a key's first use. */
void kq_metrics_attempt(kq_metrics_t *m, const char *queue, const char *result, const char *reason);
/* kubequota_build_info's labels (static strings, kept by pointer). */
void kq_metrics_set_build_info(kq_metrics_t *m, const char *version, const char *commit, const char *build_date);
/* --metrics-max-users: at most n users get per-user series (default 100; 0: none). */
void kq_metrics_set_max_users(kq_metrics_t *m, long n);

/* Reads for tests. */
unsigned long kq_metrics_attempt_count(kq_metrics_t *m, const char *queue, const char *result, const char *reason);
unsigned long kq_metrics_decision_count(kq_metrics_t *m, kq_verb_t verb, kq_result_t result);
unsigned long kq_metrics_latency_count(kq_metrics_t *m, kq_endpoint_t ep);

/* The whole exposition as a new NUL-terminated malloc'ed string (caller frees); *len (if
 * non-NULL) is its length. app may be NULL (then only the counters and histograms); its
 * ledger and ugm, when set, give the gauges. NULL on ENOMEM. */
char *kq_metrics_render(kq_metrics_t *m, struct kq_app *app, size_t *len);
/* The same; identities false leaves out the per-user and per-group series (who uses
 * what), for callers the usage view would not let in. */
char *kq_metrics_render_ex(kq_metrics_t *m, struct kq_app *app, bool identities, size_t *len);

/* Content-Type of the exposition. */
#define KQ_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
