/* The labels and annotations that say who a pod is, where it is counted and which
 * application it joins: the one list the pod parser (kube/pod.c) reads them from, the
 * mutating webhook (serve/admission.c) guards, and the chart's matchConditions
 * (charts/kubequota/templates/tls-and-webhooks.yaml) must name. tests/chart/test_podkeys.py
 * parses this file and fails when the chart misses a key; tests/unit/test_pod.c fails when
 * the parser reads a key of a pod that is not here.
 *
 * All of them are fixed once the pod exists: the ledger counts a pod where it was admitted
 * and releases it from there, but a restart counts it where its keys say, so a key that
 * could change would move a running pod to a queue, application or identity it was never
 * admitted to. The identity annotations are put back by the webhook (an update cannot
 * change them); every other key is refused when an update adds, removes or changes it.
 *
 * One entry per line, X(map, role, key), in the parser's order of precedence within a
 * role (the first present wins):
 *   map   LABEL or ANNOTATION
 *   role  IDENTITY (user and groups), QUEUE (placement), APP (application id),
 *         QUOTA (elastic quota group and preemptibility)
 */
#ifndef KUBEQUOTA_PODKEYS_H
#define KUBEQUOTA_PODKEYS_H

#include <stdbool.h>
#include <stddef.h>

#define KQ_POD_KEYS(X)                                                    \
    X(ANNOTATION, IDENTITY, "kubequota.io/user-info")                     \
    X(ANNOTATION, IDENTITY, "yunikorn.apache.org/user.info")              \
    X(LABEL, QUEUE, "kubequota.io/queue")                                 \
    X(ANNOTATION, QUEUE, "kubequota.io/queue")                            \
    X(LABEL, QUEUE, "yunikorn.apache.org/queue")                          \
    X(ANNOTATION, QUEUE, "yunikorn.apache.org/queue")                     \
    X(LABEL, QUEUE, "queue")                                              \
    X(LABEL, APP, "kubequota.io/app-id")                                  \
    X(LABEL, APP, "yunikorn.apache.org/app-id")                           \
    X(ANNOTATION, APP, "yunikorn.apache.org/app-id")                      \
    X(LABEL, APP, "applicationId")                                        \
    X(LABEL, APP, "spark-app-selector")                                   \
    X(LABEL, QUOTA, "quota.scheduling.koordinator.sh/name")               \
    X(LABEL, QUOTA, "quota.scheduling.koordinator.sh/preemptible")

typedef enum kq_pod_key_role {
    KQ_POD_KEY_IDENTITY,
    KQ_POD_KEY_QUEUE,
    KQ_POD_KEY_APP,
    KQ_POD_KEY_QUOTA,
} kq_pod_key_role_t;

typedef struct kq_pod_key {
    bool annotation;        /* false: a label */
    kq_pod_key_role_t role;
    const char *key;
} kq_pod_key_t;

#define KQ_POD_KEY_ENTRY_(map, role, key) {KQ_POD_KEY_IS_##map, KQ_POD_KEY_##role, key},
#define KQ_POD_KEY_IS_LABEL false
#define KQ_POD_KEY_IS_ANNOTATION true

/* The list above as a table (static: each user has its own copy of the same constants). */
static const kq_pod_key_t kq_pod_keys[] = {KQ_POD_KEYS(KQ_POD_KEY_ENTRY_)};
#define KQ_POD_N_KEYS (sizeof(kq_pod_keys) / sizeof(kq_pod_keys[0]))

/* "label" or "annotation", for messages. */
static inline const char *kq_pod_key_kind(const kq_pod_key_t *k)
{
    return k->annotation ? "annotation" : "label";
}

#endif
