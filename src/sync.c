/* Keeps kubequota's state in step with the outside world: the pod informer feeding the
 * pod ledger, and the config file reloader.
 *
 * DESIGN: both run on their own threads and own no shared state of their own beyond
 * atomics; everything they change is behind the ledger's, the ugm's or the config
 * holder's locks. A config reload parses and validates off-lock, applies the new limits
 * to the ugm first and then swaps the snapshot used for pod resolution, so a pod resolved
 * during the swap is checked against limits at least as new as its queue. A failed reload
 * changes nothing.
 */
#include "kubequota/sync.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "kubequota/config.h"
#include "kubequota/kube.h"
#include "kubequota/ledger.h"
#include "kubequota/log.h"
#include "kubequota/metering.h"
#include "kubequota/metrics.h"
#include "kubequota/pod.h"

/* ------------------------------------------------------------------ pod informer */

struct kq_sync {
    kq_app_t *app;
    kq_watch_t *watch;
    atomic_ulong bad_pods;
    atomic_ulong lists;
    kq_jdoc_t scratch; /* the watch thread's, for kq_pod_parse (user-info annotations) */
};

static void on_list_begin(void *ud)
{
    kq_sync_t *s = ud;
    if (atomic_fetch_add(&s->lists, 1) > 0)
        kq_info("event=relist msg=\"pod list restarting; usage will be reconciled\"");
    kq_ledger_resync_begin(s->app->ledger);
    if (s->app->metering)
        kq_metering_resync_begin(s->app->metering);
}

static void on_list_end(void *ud)
{
    kq_sync_t *s = ud;
    kq_ledger_resync_end(s->app->ledger);
    if (s->app->metering)
        kq_metering_resync_end(s->app->metering);
    size_t counted = 0, known = kq_ledger_size(s->app->ledger, &counted);
    if (!atomic_exchange(&s->app->ready, true))
        kq_info("event=synced pods=%zu counted=%zu msg=\"first pod list applied; ready\"", known, counted);
    else
        kq_info("event=resynced pods=%zu counted=%zu", known, counted);
}

static const char *pod_uid(const kq_jnode_t *obj)
{
    return kq_jnode_string(kq_jnode_get(kq_jnode_get(obj, "metadata"), "uid"));
}

/* Metering follows the same pod events as usage: charged from the PodScheduled time until
 * the pod ends, so usage and charge agree on when a pod starts. */
static void meter(kq_app_t *app, const kq_jnode_t *obj, const kq_pod_t *pod)
{
    int rc = 0;
    if (kq_pod_is_terminal(pod)) {
        (void)kq_metering_pod_ended(app->metering, pod->uid, 0);
        kq_metering_pod_pending_gone(app->metering, pod->uid);
    } else if (pod->node != NULL) {
        double at = 0; /* 0 = now, when the condition is missing */
        if (kq_metering_pod_scheduled_time(obj, &at) != 0)
            at = 0;
        char group[KQ_UGM_PATH_MAX]; /* the group usage is tracked against, so charges agree */
        if (kq_ledger_pod_group(app->ledger, pod, group, sizeof(group)) != 0)
            group[0] = '\0';
        rc = kq_metering_pod_bound(app->metering, pod, group[0] ? group : NULL, at);
    } else {
        rc = kq_metering_pod_pending(app->metering, pod->uid, &pod->request);
    }
    if (rc != 0)
        kq_warn("event=metering_feed_failed pod=%s/%s error=\"%s\"", pod->ns, pod->name, kq_strerror(rc));
}

static void on_object(void *ud, int type, const kq_jnode_t *obj)
{
    kq_sync_t *s = ud;
    kq_app_t *app = s->app;
    if (type == KQ_WATCH_DELETED) {
        const char *uid = pod_uid(obj);
        if (uid != NULL) {
            kq_ledger_remove(app->ledger, uid);
            if (app->metering) {
                (void)kq_metering_pod_ended(app->metering, uid, 0);
                kq_metering_pod_pending_gone(app->metering, uid);
            }
        }
        return;
    }
    kq_config_t *cfg = kq_config_holder_get(app->config);
    kq_pod_opts_t opts = {
        .partition = cfg ? kq_config_partition(cfg, app->partition) : NULL,
        .default_user = app->default_user,
        .scratch = &s->scratch,
        .app_id_fallback = (kq_app_id_fallback_t)app->app_id_fallback,
        .dynamic_kind = kq_ugm_queue_kind_hook,
        .hook_arg = app->ugm,
    };
    kq_pod_t pod;
    char err[512];
    if (kq_pod_parse(obj, &opts, &pod, err, sizeof(err)) != 0) {
        unsigned long n = atomic_fetch_add(&s->bad_pods, 1) + 1;
        /* Logged for the first ones and then every 100th, so a flood cannot drown the log. */
        if (n <= 10 || n % 100 == 0)
            kq_warn("event=pod_skipped uid=%s bad_pods=%lu reason=\"%s\"", pod_uid(obj) ? pod_uid(obj) : "?", n,
                    err);
    } else {
        kq_ledger_observe(app->ledger, &pod);
        if (app->metering)
            meter(app, obj, &pod);
        kq_pod_clear(&pod);
    }
    kq_config_unref(cfg);
}

kq_sync_t *kq_sync_start(kq_app_t *app)
{
    kq_sync_t *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->app = app;
    char query[512];
    char *esc = NULL;
    /* Only our scheduler's pods: spec.schedulerName=<name>, URL-escaped. */
    size_t n = strlen(app->scheduler_name);
    esc = malloc(n * 3 + 1);
    if (esc == NULL) {
        free(s);
        return NULL;
    }
    char *p = esc;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)app->scheduler_name[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
            c == '_' || c == '~')
            *p++ = (char)c;
        else
            p += sprintf(p, "%%%02X", c);
    }
    *p = '\0';
    snprintf(query, sizeof(query), "fieldSelector=spec.schedulerName%%3D%s", esc);
    free(esc);
    kq_watch_handler_t h = {
        .list_begin = on_list_begin,
        .doc = on_object,
        .list_end = on_list_end,
        .ud = s,
        .keep = kq_pod_fields, /* only what kq_pod_parse and metering read is built */
    };
    s->watch = kq_kube_watch_start(app->kube, "/api/v1/pods", query, &h);
    if (s->watch == NULL) {
        free(s);
        return NULL;
    }
    return s;
}

void kq_sync_stop(kq_sync_t *s)
{
    if (s == NULL)
        return;
    kq_kube_watch_stop(s->watch);
    kq_jdoc_free(&s->scratch);
    free(s);
}

unsigned long kq_sync_bad_pods(kq_sync_t *s)
{
    return atomic_load(&s->bad_pods);
}

unsigned long kq_sync_watch_restarts(kq_sync_t *s)
{
    return s && s->watch ? kq_watch_restarts(s->watch) : 0;
}

/* ------------------------------------------------------------------ config reloader */

struct kq_reloader {
    kq_app_t *app;
    char *path;
    int interval_ms;
    pthread_t thread;
    pthread_mutex_t mu; /* guards stop */
    pthread_cond_t cv;
    bool stop;
    bool have_last;
    struct stat last; /* identity of the file last tried (reloader thread only) */
};

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

int kq_app_check_config(void *appv, const kq_config_t *cfg, const char *file, kq_diags_t *diags)
{
    const kq_app_t *app = appv;
    int rc = kq_config_check_partition(cfg, app->partition, file, diags);
    if (rc == 0 && app->metering)
        rc = kq_metering_check_config(kq_config_partition(cfg, app->partition), diags);
    return rc;
}

int kq_reloader_reload_now(kq_reloader_t *r)
{
    kq_app_t *app = r->app;
    kq_diags_t diags;
    kq_diags_init(&diags);
    kq_config_t *cfg = NULL;
    int rc = kq_config_load_file(r->path, &cfg, &diags);
    if (rc == 0)
        rc = kq_app_check_config(app, cfg, r->path, &diags);
    if (rc == 0)
        rc = kq_ugm_set_config(app->ugm, cfg);
    if (rc == 0 && app->metering)
        rc = kq_metering_set_config(app->metering, kq_config_partition(cfg, app->partition), &diags);
    if (rc == 0) {
        kq_config_holder_swap(app->config, cfg);
        char summary[256];
        kq_config_summary(cfg, summary, sizeof(summary));
        kq_info("event=config_reloaded file=%s summary=\"%s\"", r->path, summary);
        for (size_t i = 0; i < kq_config_warning_count(cfg); i++)
            kq_warn("event=config_unsupported_key msg=\"%s\"", kq_config_warning_at(cfg, i));
    } else {
        char *all = kq_diags_join(&diags, "; ");
        kq_error("event=config_rejected file=%s msg=\"config rejected, keeping the old one\" errors=\"%s\"",
                 r->path, all ? all : kq_strerror(rc));
        free(all);
    }
    if (app->metrics)
        kq_metrics_config_reload(app->metrics, rc == 0);
    kq_config_unref(cfg);
    kq_diags_free(&diags);
    return rc;
}

static void *reloader_main(void *arg)
{
    kq_reloader_t *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->stop) {
        struct timespec deadline;
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += r->interval_ms / 1000;
        deadline.tv_nsec += (long)(r->interval_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&r->cv, &r->mu, &deadline);
        if (r->stop)
            break;
        pthread_mutex_unlock(&r->mu);
        struct stat st;
        if (stat(r->path, &st) == 0) {
            if (!r->have_last || !same_file(&st, &r->last)) {
                r->last = st;
                r->have_last = true;
                (void)kq_reloader_reload_now(r);
            }
        } else if (r->have_last) {
            /* A ConfigMap update briefly removes the link; keep the old config and retry. */
            kq_debug("event=config_stat_failed file=%s errno=%d", r->path, errno);
        }
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

kq_reloader_t *kq_reloader_start(kq_app_t *app, const char *path, int interval_ms)
{
    kq_reloader_t *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->app = app;
    r->interval_ms = interval_ms > 0 ? interval_ms : 2000;
    r->path = strdup(path);
    if (r->path == NULL)
        goto fail;
    /* The file loaded at start-up is the baseline: only a change triggers a reload. */
    if (stat(path, &r->last) == 0)
        r->have_last = true;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    if (pthread_create(&r->thread, NULL, reloader_main, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv);
        goto fail;
    }
    return r;
fail:
    free(r->path);
    free(r);
    return NULL;
}

void kq_reloader_stop(kq_reloader_t *r)
{
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
    free(r->path);
    free(r);
}
