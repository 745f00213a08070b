/* Keeps the pod ledger in step with the API server: a pod informer (list + watch) whose
 * events are parsed into kq_pod_t and applied to the ledger. A relist is a ledger resync,
 * so pods that vanished while the watch was down are released and new ones counted.
 *
 * Only pods whose spec.schedulerName is app->scheduler_name are watched and counted
 * (server-side field selector): quotas apply to what this scheduler places; pods of other
 * schedulers are not charged to anyone's quota.
 *
 * Threads: the informer thread calls into the ledger (which has its own lock) and reads
 * the config holder; it holds no lock of its own.
 */
#ifndef KUBEQUOTA_SYNC_H
#define KUBEQUOTA_SYNC_H

#include "kubequota/app.h"
#include "kubequota/base/error.h"
#include "kubequota/engine/resource.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct kq_sync kq_sync_t;

/* Starts the pod informer; app->ready becomes true after the first full list. */
kq_sync_t *kq_sync_start(kq_app_t *app);
/* Stops the informer and frees. NULL is a no-op. */
void kq_sync_stop(kq_sync_t *s);
/* Pods that could not be parsed (skipped, logged). */
unsigned long kq_sync_bad_pods(kq_sync_t *s);
/* Watch restarts (reconnects and relists) of the pod informer. */
unsigned long kq_sync_watch_restarts(kq_sync_t *s);

/* Namespaces: the informer also watches namespaces (started first, waited for up to 5 s)
 * and keeps YuniKorn's annotations of each (parentqueue, namespace.quota or the
 * deprecated namespace.max.cpu/.memory, namespace.maxApps; namespace.guaranteed is logged
 * as not used). Pod placement reads them through these hooks (kq_pod_opts_t ns_*; `sync`
 * is the kq_sync_t). Thread-safe (a private mutex, held only to copy). */
bool kq_sync_ns_parent_queue(void *sync, const char *ns, char *buf, size_t len);
bool kq_sync_ns_limits(void *sync, const char *ns, kq_resource_t *max, bool *has_max, uint64_t *max_apps);

/* Config reload: a thread that checks `path` every interval_ms (a mounted ConfigMap is
 * replaced by a symlink swap, so the file's identity and mtime are compared, not just its
 * name). A new valid file is applied atomically (ugm limits + holder swap); an invalid one
 * is rejected whole with a log line and a metric, and the old one stays. */
typedef struct kq_reloader kq_reloader_t;
kq_reloader_t *kq_reloader_start(kq_app_t *app, const char *path, int interval_ms);
void kq_reloader_stop(kq_reloader_t *r);
/* Loads `path` now and applies it if valid; 0, or the load error (diagnostics logged). */
int kq_reloader_reload_now(kq_reloader_t *r);

/* Everything a running serve requires of a loaded configuration before it applies it:
 * the partition it enforces exists (kq_config_check_partition), and with metering on, the
 * partition's budget properties parse. `app` is the kq_app_t (void * so that this can be
 * the admission webhook's check_config hook). The reload, the ConfigMap webhook and
 * /ws/v1/validate-conf all call it, so they refuse the same files with the same first
 * message. 0, or KQ_EPARSE / KQ_ENOMEM with diagnostics for `file` added to diags. */
int kq_app_check_config(void *app, const kq_config_t *cfg, const char *file, kq_diags_t *diags);

#endif
