/* The application context: everything the HTTP handlers (extender, REST, metrics) need,
 * wired together by main. Handlers borrow it; main owns every member and frees them after
 * the server has stopped.
 */
#ifndef KUBEQUOTA_APP_H
#define KUBEQUOTA_APP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "kubequota/engine/config.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/engine/ugm.h"

typedef struct kq_metrics kq_metrics_t;

typedef struct kq_app {
    const char *partition;        /* "default" */
    const char *scheduler_name;   /* "kubequota-scheduler": pods with another schedulerName pass filter untouched */
    const char *default_user;     /* user for pods without identity ("nobody") */
    int app_id_fallback;          /* kq_app_id_fallback_t (pod.h): id of pods without one */
    kq_config_holder_t *config;   /* current queues.yaml snapshot */
    kq_ugm_t *ugm;
    kq_ledger_t *ledger;
    kq_kube_t *kube;              /* may be NULL (unit tests): bind then fails with an error */
    kq_metrics_t *metrics;        /* may be NULL */
    atomic_bool ready;            /* true once the first full pod list is in (/readyz) */
    struct kq_sync *sync;         /* may be NULL: the pod informer (watch restarts for /metrics) */
    struct kq_elastic *elastic;   /* may be NULL: elastic quota (quota tree, reclaim; elastic.h) */
    struct kq_metering *metering; /* may be NULL: no charging, no budgets (metering.h) */
    struct kq_leader *leader;     /* may be NULL: no leader election (this replica acts alone) */
    struct kq_gating *gating;     /* may be NULL: no admission gate (gating.h) */
    struct kq_requeue *requeue;   /* may be NULL: no requeue pokes (--requeue-window 0; requeue.h) */
    struct kq_history *history;   /* may be NULL: no usage over time (--history-interval 0; history.h) */
    struct kq_slices *slices;     /* may be NULL: DRA devices and classes (counters, extended resources; slices.h) */
    struct kq_claims *claims;     /* may be NULL: DRA ResourceClaims not watched (claims.h) */
} kq_app_t;

#endif
