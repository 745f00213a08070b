/* kubequota: per-user, per-group and hierarchical quotas for Kubernetes pod scheduling.
 *
 * main only parses the command line and wires the modules together:
 *   check-config FILE   validate a queues.yaml (config module)
 *   serve ...           load the config, connect to the API server, start the pod informer,
 *                       the config reloader and the HTTPS server, and wait for SIGINT/SIGTERM.
 */
#include <curl/curl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kubequota/admission.h"
#include "kubequota/app.h"
#include "kubequota/auth.h"
#include "kubequota/config.h"
#include "kubequota/elastic.h"
#include "kubequota/kube.h"
#include "kubequota/leader.h"
#include "kubequota/ledger.h"
#include "kubequota/log.h"
#include "kubequota/metering.h"
#include "kubequota/metrics.h"
#include "kubequota/server.h"
#include "kubequota/sync.h"
#include "kubequota/ugm.h"

#define KQ_VERSION "0.1.0"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage:\n"
            "  kubequota serve --config FILE [options]\n"
            "  kubequota check-config FILE\n"
            "  kubequota --version\n"
            "\n"
            "serve options:\n"
            "  --config FILE            queues.yaml (YuniKorn format); reloaded when it changes\n"
            "  --kubeconfig FILE        kubeconfig to reach the API server (default: in-cluster\n"
            "                           service account: KUBERNETES_SERVICE_HOST/PORT, token, CA)\n"
            "  --listen HOST:PORT       address to serve HTTPS on (default 0.0.0.0:8443)\n"
            "  --tls-cert FILE          serving certificate (PEM, chain allowed)\n"
            "  --tls-key FILE           serving private key (PEM)\n"
            "  --client-ca FILE         require client certificates signed by this CA\n"
            "  --insecure-plain-http    serve plain HTTP instead of TLS (local tests only)\n"
            "  --scheduler-name NAME    pods with this spec.schedulerName are managed\n"
            "                           (default kubequota-scheduler)\n"
            "  --partition NAME         partition of queues.yaml to enforce (default default)\n"
            "  --default-user NAME      user of pods without identity (default nobody)\n"
            "  --max-body BYTES         largest accepted request body (default 67108864)\n"
            "  --reload-interval MS     how often the config file is checked (default 2000)\n"
            "  --watch-progress-deadline D  a watch that receives nothing (no event, no bookmark)\n"
            "                           for this long is stalled and relisted (default 150s; 0 off)\n"
            "  --threads N              HTTP worker threads; each open keep-alive connection holds\n"
            "                           one (default 64)\n"
            "  --log-level LEVEL        error, warn, info or debug (default info)\n"
            "\n"
            "access to the usage view (/ws/v1/...):\n"
            "  --rest-auth MODE         default: a client certificate (--client-ca) or the bearer\n"
            "                           token of --rest-token-file; kubernetes: also Kubernetes\n"
            "                           tokens that TokenReview accepts and SubjectAccessReview\n"
            "                           allows for get on usage.kubequota.io; none: open\n"
            "  --rest-token-file FILE   bearer token accepted by the usage view (re-read on change)\n"
            "  --metrics-auth           /metrics follows the usage view's access rules\n"
            "  --extender-local-only    /scheduler/* answers only callers on this host (kube-scheduler\n"
            "                           running beside kubequota in the same pod)\n"
            "                           default: callers on this host and callers with a client\n"
            "                           certificate signed by --client-ca\n"
            "  --extender-open          /scheduler/* answers anyone who reaches the port (unsafe)\n"
            "\n"
            "admission webhooks (/admission/mutate, /admission/mutate-scheduler, /admission/validate):\n"
            "  --trusted-users LIST     comma-separated users whose pods and workloads keep the\n"
            "                           identity already on them ('prefix*' allowed; default\n"
            "                           system:serviceaccount:kube-system:*,system:kube-controller-manager)\n"
            "  --trusted-groups LIST    likewise for groups (default system:serviceaccounts:kube-system)\n"
            "  --config-map NS/NAME     the ConfigMap holding queues.yaml, guarded by /admission/validate\n"
            "                           (default kube-system/kubequota-config, key queues.yaml)\n"
            "\n"
            "elastic quota (include/kubequota/elastic.h):\n"
            "  --system-namespaces LIST comma-separated namespaces whose pods form the system\n"
            "                           quota group (default kube-system)\n"
            "  --default-quota-min RES  min of the default quota group, e.g. cpu=4,memory=8Gi\n"
            "  --default-quota-max RES  max of the default quota group (default unlimited)\n"
            "  --reclaim-grace MS       how long a group may use more than its runtime before\n"
            "                           its pods are evicted (default 60000)\n"
            "  --elastic-tick MS        reclaim / status / config check period (default 1000)\n"
            "  --status-interval MS     least time between status writes of one ElasticQuota\n"
            "                           (default 10000)\n"
            "\n"
            "leader election (several replicas: all serve, only the leader evicts and charges):\n"
            "  --leader-elect           elect a leader through a coordination.k8s.io/v1 Lease\n"
            "  --lease-namespace NS     namespace of the Lease (default: the in-cluster namespace,\n"
            "                           else kube-system)\n"
            "  --lease-name NAME        name of the Lease (default kubequota)\n"
            "  --lease-duration D       how long a standby waits before taking over (default 15s)\n"
            "  --renew-deadline D       the leader steps down after this long without a renewal\n"
            "                           (default 10s)\n"
            "  --retry-period D         between attempts to acquire or renew (default 2s)\n"
            "                           (durations: 15s, 1500ms, 1m30s, ...)\n"
            "\n"
            "metering and pricing (only the leader charges):\n"
            "  --metering KEY=VALUE     repeatable; keys:\n"
            "%s"
            "  -h, --help               this text\n", kq_metering_opts_help);
}

typedef struct serve_opts {
    const char *config, *kubeconfig, *listen, *tls_cert, *tls_key, *client_ca;
    const char *scheduler_name, *partition, *default_user, *log_level;
    const char *rest_auth, *rest_token_file, *trusted_users, *trusted_groups, *config_map;
    bool metrics_auth, extender_local_only, extender_open;
    bool plain_http;
    long long max_body;
    long reload_ms;
    long threads;
    /* elastic flags */
    const char *system_namespaces, *default_quota_min, *default_quota_max;
    long reclaim_grace_ms, elastic_tick_ms, status_interval_ms;
    kq_metering_opts_t metering;
    /* leader election */
    bool leader_elect;
    const char *lease_namespace, *lease_name;
    long lease_duration_ms, renew_deadline_ms, retry_period_ms;
    long watch_progress_ms; /* -1 = the kube client's default */
} serve_opts_t;

/* elastic flags: a number of milliseconds >= min. */
static bool parse_ms(const char *flag, const char *arg, long min, long *out)
{
    char *end;
    *out = strtol(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || *out < min) {
        fprintf(stderr, "kubequota: %s %s: expected milliseconds >= %ld\n", flag, arg, min);
        return false;
    }
    return true;
}

static int parse_serve(int argc, char **argv, serve_opts_t *o)
{
    enum { O_CONFIG = 256, O_KUBECONFIG, O_LISTEN, O_CERT, O_KEY, O_CA, O_PLAIN, O_SCHED, O_PART, O_USER,
           O_BODY, O_RELOAD, O_LOG, O_REST_AUTH, O_REST_TOKEN, O_METRICS_AUTH, O_TRUSTED_USERS,
           O_TRUSTED_GROUPS, O_CONFIG_MAP, O_EXT_LOCAL, O_EXT_OPEN, O_WATCH_PROGRESS, O_THREADS,
           /* elastic flags */
           O_SYSNS, O_DQMIN, O_DQMAX, O_GRACE, O_ETICK, O_STATUS,
           O_METERING, O_LEADER_ELECT, O_LEASE_NS, O_LEASE_NAME, O_LEASE_DUR, O_RENEW_DEADLINE, O_RETRY_PERIOD };
    static const struct option longopts[] = {
        {"config", required_argument, NULL, O_CONFIG},
        {"kubeconfig", required_argument, NULL, O_KUBECONFIG},
        {"listen", required_argument, NULL, O_LISTEN},
        {"tls-cert", required_argument, NULL, O_CERT},
        {"tls-key", required_argument, NULL, O_KEY},
        {"client-ca", required_argument, NULL, O_CA},
        {"insecure-plain-http", no_argument, NULL, O_PLAIN},
        {"scheduler-name", required_argument, NULL, O_SCHED},
        {"partition", required_argument, NULL, O_PART},
        {"default-user", required_argument, NULL, O_USER},
        {"max-body", required_argument, NULL, O_BODY},
        {"reload-interval", required_argument, NULL, O_RELOAD},
        {"log-level", required_argument, NULL, O_LOG},
        {"rest-auth", required_argument, NULL, O_REST_AUTH},
        {"rest-token-file", required_argument, NULL, O_REST_TOKEN},
        {"metrics-auth", no_argument, NULL, O_METRICS_AUTH},
        {"trusted-users", required_argument, NULL, O_TRUSTED_USERS},
        {"trusted-groups", required_argument, NULL, O_TRUSTED_GROUPS},
        {"config-map", required_argument, NULL, O_CONFIG_MAP},
        {"extender-local-only", no_argument, NULL, O_EXT_LOCAL},
        {"extender-open", no_argument, NULL, O_EXT_OPEN},
        {"watch-progress-deadline", required_argument, NULL, O_WATCH_PROGRESS},
        {"threads", required_argument, NULL, O_THREADS},
        /* elastic flags */
        {"system-namespaces", required_argument, NULL, O_SYSNS},
        {"default-quota-min", required_argument, NULL, O_DQMIN},
        {"default-quota-max", required_argument, NULL, O_DQMAX},
        {"reclaim-grace", required_argument, NULL, O_GRACE},
        {"elastic-tick", required_argument, NULL, O_ETICK},
        {"status-interval", required_argument, NULL, O_STATUS},
        {"metering", required_argument, NULL, O_METERING},
        {"leader-elect", no_argument, NULL, O_LEADER_ELECT},
        {"lease-namespace", required_argument, NULL, O_LEASE_NS},
        {"lease-name", required_argument, NULL, O_LEASE_NAME},
        {"lease-duration", required_argument, NULL, O_LEASE_DUR},
        {"renew-deadline", required_argument, NULL, O_RENEW_DEADLINE},
        {"retry-period", required_argument, NULL, O_RETRY_PERIOD},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    *o = (serve_opts_t){
        .listen = "0.0.0.0:8443",
        .scheduler_name = "kubequota-scheduler",
        .partition = "default",
        .default_user = "nobody",
        .log_level = "info",
        .rest_auth = "default",
        .max_body = 64LL << 20,
        .reload_ms = 2000,
        .system_namespaces = "kube-system", /* elastic flags */
        .reclaim_grace_ms = 60000,
        .elastic_tick_ms = 1000,
        .status_interval_ms = 10000,
        .lease_name = "kubequota", /* leader election: kube-scheduler's 15s / 10s / 2s */
        .lease_duration_ms = 15000,
        .watch_progress_ms = -1,
        .renew_deadline_ms = 10000,
        .retry_period_ms = 2000,
    };
    kq_metering_opts_default(&o->metering);
    optind = 1;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case O_CONFIG: o->config = optarg; break;
        case O_KUBECONFIG: o->kubeconfig = optarg; break;
        case O_LISTEN: o->listen = optarg; break;
        case O_CERT: o->tls_cert = optarg; break;
        case O_KEY: o->tls_key = optarg; break;
        case O_CA: o->client_ca = optarg; break;
        case O_PLAIN: o->plain_http = true; break;
        case O_SCHED: o->scheduler_name = optarg; break;
        case O_PART: o->partition = optarg; break;
        case O_USER: o->default_user = optarg; break;
        case O_LOG: o->log_level = optarg; break;
        case O_REST_AUTH: o->rest_auth = optarg; break;
        case O_REST_TOKEN: o->rest_token_file = optarg; break;
        case O_METRICS_AUTH: o->metrics_auth = true; break;
        case O_TRUSTED_USERS: o->trusted_users = optarg; break;
        case O_TRUSTED_GROUPS: o->trusted_groups = optarg; break;
        case O_CONFIG_MAP: o->config_map = optarg; break;
        case O_EXT_LOCAL: o->extender_local_only = true; break;
        case O_EXT_OPEN: o->extender_open = true; break;
        case O_WATCH_PROGRESS:
            if (strcmp(optarg, "0") == 0)
                o->watch_progress_ms = 0;
            else if (kq_leader_parse_duration(optarg, &o->watch_progress_ms) != 0) {
                fprintf(stderr, "kubequota: --watch-progress-deadline %s: expected a duration such as 150s or 0 "
                                "(off)\n", optarg);
                return 2;
            }
            break;
        case O_THREADS:
            o->threads = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || o->threads < 1 || o->threads > 1024) {
                fprintf(stderr, "kubequota: --threads %s: expected a number from 1 to 1024\n", optarg);
                return 2;
            }
            break;
        case O_BODY:
            o->max_body = strtoll(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || o->max_body < 1024) {
                fprintf(stderr, "kubequota: --max-body %s: expected a number of bytes >= 1024\n", optarg);
                return 2;
            }
            break;
        case O_RELOAD:
            o->reload_ms = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || o->reload_ms < 10) {
                fprintf(stderr, "kubequota: --reload-interval %s: expected milliseconds >= 10\n", optarg);
                return 2;
            }
            break;
        /* elastic flags */
        case O_SYSNS: o->system_namespaces = optarg; break;
        case O_DQMIN: o->default_quota_min = optarg; break;
        case O_DQMAX: o->default_quota_max = optarg; break;
        case O_GRACE:
            if (!parse_ms("--reclaim-grace", optarg, 0, &o->reclaim_grace_ms))
                return 2;
            break;
        case O_ETICK:
            if (!parse_ms("--elastic-tick", optarg, 10, &o->elastic_tick_ms))
                return 2;
            break;
        case O_METERING: {
            char merr[512];
            if (kq_metering_opts_set(&o->metering, optarg, merr, sizeof(merr)) != 0) {
                fprintf(stderr, "kubequota: --metering %s: %s\n", optarg, merr);
                return 2;
            }
            break;
        }
        case O_LEADER_ELECT: o->leader_elect = true; break;
        case O_LEASE_NS: o->lease_namespace = optarg; break;
        case O_LEASE_NAME: o->lease_name = optarg; break;
        case O_LEASE_DUR:
        case O_RENEW_DEADLINE:
        case O_RETRY_PERIOD: {
            long *dst = c == O_LEASE_DUR ? &o->lease_duration_ms
                      : c == O_RENEW_DEADLINE ? &o->renew_deadline_ms : &o->retry_period_ms;
            if (kq_leader_parse_duration(optarg, dst) != 0) {
                fprintf(stderr, "kubequota: --%s %s: expected a duration such as 15s, 1500ms or 1m30s\n",
                        c == O_LEASE_DUR ? "lease-duration" : c == O_RENEW_DEADLINE ? "renew-deadline"
                                                                                    : "retry-period",
                        optarg);
                return 2;
            }
            break;
        }
        case O_STATUS:
            if (!parse_ms("--status-interval", optarg, 0, &o->status_interval_ms))
                return 2;
            break;
        case 'h': usage(stdout); exit(0);
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kubequota serve: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (o->config == NULL) {
        fprintf(stderr, "kubequota serve: --config FILE is required\n");
        return 2;
    }
    if (kq_log_set_level(o->log_level) != 0) {
        fprintf(stderr, "kubequota serve: --log-level %s: expected error, warn, info or debug\n", o->log_level);
        return 2;
    }
    if (!o->plain_http && (o->tls_cert == NULL || o->tls_key == NULL)) {
        fprintf(stderr, "kubequota serve: --tls-cert and --tls-key are required (or --insecure-plain-http "
                        "for local tests)\n");
        return 2;
    }
    if (o->extender_open && o->extender_local_only) {
        fprintf(stderr, "kubequota serve: --extender-open and --extender-local-only contradict each other\n");
        return 2;
    }
    if (o->plain_http && (o->tls_cert || o->tls_key || o->client_ca)) {
        fprintf(stderr, "kubequota serve: --insecure-plain-http cannot be combined with TLS options\n");
        return 2;
    }
    kq_auth_mode_t mode;
    if (kq_auth_mode_parse(o->rest_auth, &mode) != 0) {
        fprintf(stderr, "kubequota serve: --rest-auth %s: expected default, kubernetes or none\n", o->rest_auth);
        return 2;
    }
    if (o->config_map != NULL) {
        const char *slash = strchr(o->config_map, '/');
        if (slash == NULL || slash == o->config_map || slash[1] == '\0' || slash[1] == ':' ||
            strchr(slash + 1, '/') != NULL) {
            fprintf(stderr, "kubequota serve: --config-map %s: expected NAMESPACE/NAME[:KEY]\n", o->config_map);
            return 2;
        }
    }
    /* elastic flags */
    {
        kq_resource_t r;
        char why[256];
        const char *flags[] = {"--default-quota-min", "--default-quota-max"};
        const char *vals[] = {o->default_quota_min, o->default_quota_max};
        for (int i = 0; i < 2; i++)
            if (vals[i] != NULL && kq_config_parse_resource_list(vals[i], &r, why, sizeof(why)) != 0) {
                fprintf(stderr, "kubequota serve: %s %s: %s\n", flags[i], vals[i], why);
                return 2;
            }
    }
    if (*o->scheduler_name == '\0' || *o->partition == '\0' || *o->default_user == '\0') {
        fprintf(stderr, "kubequota serve: --scheduler-name, --partition and --default-user must not be empty\n");
        return 2;
    }
    return 0;
}

/* A comma-separated list, split in place into a copy; empty items are skipped. */
typedef struct strlist {
    char *buf;
    const char **v;
    size_t n;
} strlist_t;

static int split_list(const char *s, strlist_t *out)
{
    *out = (strlist_t){0};
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    out->buf = strdup(s);
    out->v = calloc(cap, sizeof(*out->v));
    if (out->buf == NULL || out->v == NULL)
        return KQ_ENOMEM;
    char *save = NULL;
    for (char *t = strtok_r(out->buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        size_t n = strlen(t);
        while (n > 0 && t[n - 1] == ' ')
            t[--n] = '\0';
        if (n > 0)
            out->v[out->n++] = t;
    }
    return 0;
}

static void strlist_free(strlist_t *l)
{
    free(l->buf);
    free(l->v);
}

/* Bounds shutdown: if stopping takes longer than this, something is stuck (a peer that
 * never answers); exit rather than hang past the kubelet's grace period. */
#define SHUTDOWN_TIMEOUT_S 20

static void *shutdown_watchdog(void *arg)
{
    (void)arg;
    sleep(SHUTDOWN_TIMEOUT_S);
    kq_error("event=shutdown_timeout seconds=%d msg=\"stopping took too long; exiting\"", SHUTDOWN_TIMEOUT_S);
    _exit(1);
    return NULL;
}

static void print_diags(const kq_diags_t *d)
{
    char line[2048];
    for (size_t i = 0; i < d->n; i++) {
        kq_diag_format(&d->v[i], line, sizeof(line));
        fprintf(stderr, "kubequota: %s\n", line);
    }
}

static int serve(int argc, char **argv)
{
    serve_opts_t o;
    int rc = parse_serve(argc, argv, &o);
    if (rc != 0)
        return rc;

    /* Signals are taken by sigwait() below; every thread started from here inherits the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    int exit_code = 1;
    kq_diags_t diags;
    kq_diags_init(&diags);
    kq_config_t *cfg = NULL;
    kq_kube_conf_t kconf = {0};
    kq_app_t app = {
        .partition = o.partition,
        .scheduler_name = o.scheduler_name,
        .default_user = o.default_user,
    };
    atomic_init(&app.ready, false);
    kq_sync_t *sync = NULL;
    kq_reloader_t *reloader = NULL;
    kq_server_t *server = NULL;
    kq_leader_t *leader = NULL;   /* leader election: NULL when off */
    kq_kube_t *lease_kube = NULL; /* its own client: requests bounded by the renew deadline */
    kq_auth_t *auth = NULL;
    strlist_t tusers = {0}, tgroups = {0};
    strlist_t sysns = {0}; /* elastic quota: --system-namespaces */
    char *cm_buf = NULL;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fprintf(stderr, "kubequota: libcurl initialisation failed\n");
        return 1;
    }
    kq_server_global_init();

    rc = kq_config_load_file(o.config, &cfg, &diags);
    if (rc != 0) {
        print_diags(&diags);
        fprintf(stderr, "kubequota: %s: configuration rejected (%s)\n", o.config, kq_strerror(rc));
        exit_code = 2;
        goto out;
    }
    if (kq_config_partition(cfg, o.partition) == NULL) {
        fprintf(stderr, "kubequota: %s: partition \"%s\" is not defined\n", o.config, o.partition);
        exit_code = 2;
        goto out;
    }
    rc = o.kubeconfig ? kq_kubeconfig_load(o.kubeconfig, &kconf, &diags)
                      : kq_kube_conf_in_cluster(NULL, &kconf, &diags);
    if (rc != 0) {
        print_diags(&diags);
        fprintf(stderr, "kubequota: cannot configure the API server client from %s (%s)\n",
                o.kubeconfig ? o.kubeconfig : "the in-cluster service account", kq_strerror(rc));
        exit_code = 2;
        goto out;
    }

    app.config = kq_config_holder_new(cfg);
    app.ugm = kq_ugm_new(o.partition);
    app.metrics = kq_metrics_new();
    {
        kq_kube_opts_t ko;
        kq_kube_opts_default(&ko);
        if (o.watch_progress_ms >= 0)
            ko.watch_progress_ms = o.watch_progress_ms;
        app.kube = kq_kube_new_opts(&kconf, &ko);
    }
    if (app.config == NULL || app.ugm == NULL || app.metrics == NULL || app.kube == NULL) {
        fprintf(stderr, "kubequota: out of memory\n");
        goto out;
    }
    if (kq_ugm_set_config(app.ugm, cfg) != 0) {
        fprintf(stderr, "kubequota: cannot apply the limits of partition \"%s\"\n", o.partition);
        goto out;
    }
    app.ledger = kq_ledger_new(app.ugm, o.scheduler_name);
    if (app.ledger == NULL) {
        fprintf(stderr, "kubequota: out of memory\n");
        goto out;
    }

    /* ---- elastic quota ---- (the quota tree is wired into the ledger before any pod
     * arrives; the node and ElasticQuota informers and the reclaim/status timer start) */
    {
        kq_elastic_opts_t eo;
        kq_elastic_opts_default(&eo);
        if (split_list(o.system_namespaces, &sysns) != 0) {
            fprintf(stderr, "kubequota: out of memory\n");
            goto out;
        }
        eo.system_namespaces = sysns.v;
        eo.n_system_namespaces = sysns.n;
        /* validated by parse_serve */
        if ((o.default_quota_min != NULL &&
             kq_config_parse_resource_list(o.default_quota_min, &eo.default_min, NULL, 0) != 0) ||
            (o.default_quota_max != NULL &&
             kq_config_parse_resource_list(o.default_quota_max, &eo.default_max, NULL, 0) != 0))
            goto out;
        eo.reclaim_grace_ms = o.reclaim_grace_ms;
        eo.tick_ms = o.elastic_tick_ms;
        eo.status_interval_ms = o.status_interval_ms;
        if ((app.elastic = kq_elastic_new(&app, &eo)) == NULL || kq_elastic_start(app.elastic) != 0) {
            fprintf(stderr, "kubequota: cannot start the elastic quota module\n");
            goto out;
        }
    }
    /* ---- end elastic quota ---- */

    /* The informer and the reloader start before the server, so every member of app that a
     * handler reads is set before the first request can arrive (/readyz stays 503 until the
     * first pod list is in). */
    if (o.leader_elect) {
        char identity[320], lerr[256];
        if (kq_leader_default_identity(identity, sizeof(identity)) != 0) {
            fprintf(stderr, "kubequota: cannot make a leader election identity\n");
            goto out;
        }
        kq_leader_opts_t lo;
        kq_leader_opts_default(&lo);
        lo.namespace = o.lease_namespace ? o.lease_namespace
                       : (o.kubeconfig == NULL && kconf.namespace != NULL && kconf.namespace[0] != '\0')
                           ? kconf.namespace
                           : "kube-system";
        lo.name = o.lease_name;
        lo.identity = identity;
        lo.lease_duration_ms = o.lease_duration_ms;
        lo.renew_deadline_ms = o.renew_deadline_ms;
        lo.retry_period_ms = o.retry_period_ms;
        if (kq_leader_opts_check(&lo, lerr, sizeof(lerr)) != 0) {
            fprintf(stderr, "kubequota: %s\n", lerr);
            exit_code = 2;
            goto out;
        }
        kq_kube_opts_t ko;
        kq_kube_opts_default(&ko);
        ko.request_timeout_ms = o.renew_deadline_ms;
        if (ko.connect_timeout_ms > o.renew_deadline_ms)
            ko.connect_timeout_ms = o.renew_deadline_ms;
        lease_kube = kq_kube_new_opts(&kconf, &ko);
        leader = lease_kube ? kq_leader_start(lease_kube, &lo) : NULL;
        if (leader == NULL) {
            fprintf(stderr, "kubequota: cannot start leader election\n");
            goto out;
        }
        app.leader = leader;
    }
    { /* metering: after leader election (it charges only while leading), before the informer */
        char merr[1024];
        o.metering.is_leader = kq_leader_acts;
        o.metering.leader_ud = leader;
        app.metering = kq_metering_new(&o.metering, merr, sizeof(merr));
        kq_diags_t md;
        kq_diags_init(&md);
        if (app.metering == NULL ||
            kq_metering_set_config(app.metering, kq_config_partition(cfg, o.partition), &md) != 0 ||
            kq_metering_start(app.metering) != 0) {
            char *all = kq_diags_join(&md, "; ");
            fprintf(stderr, "kubequota: metering: %s\n",
                    app.metering ? (all && *all ? all : "cannot start") : merr);
            free(all);
            kq_diags_free(&md);
            exit_code = 2;
            goto out;
        }
        kq_diags_free(&md);
    }
    sync = kq_sync_start(&app);
    reloader = kq_reloader_start(&app, o.config, (int)o.reload_ms);
    if (sync == NULL || reloader == NULL) {
        fprintf(stderr, "kubequota: cannot start background threads\n");
        goto out;
    }
    app.sync = sync;
    char err[512] = "";
    kq_admission_opts_t adm = kq_admission_opts_default();
    adm.scheduler_name = o.scheduler_name;
    adm.validate_elasticquota = kq_elastic_validate_admission; /* the quota tree's rules */
    adm.elasticquota_ud = app.elastic;
    if ((o.trusted_users && split_list(o.trusted_users, &tusers) != 0) ||
        (o.trusted_groups && split_list(o.trusted_groups, &tgroups) != 0) ||
        (o.config_map && (cm_buf = strdup(o.config_map)) == NULL)) {
        fprintf(stderr, "kubequota: out of memory\n");
        goto out;
    }
    if (o.trusted_users) {
        adm.trusted_users = tusers.v;
        adm.n_trusted_users = tusers.n;
    }
    if (o.trusted_groups) {
        adm.trusted_groups = tgroups.v;
        adm.n_trusted_groups = tgroups.n;
    }
    if (cm_buf != NULL) { /* NAMESPACE/NAME[:KEY], checked by parse_serve */
        char *slash = strchr(cm_buf, '/'), *colon = strchr(slash, ':');
        *slash = '\0';
        if (colon != NULL) {
            *colon = '\0';
            adm.config_map_key = colon + 1;
        }
        adm.config_map_namespace = cm_buf;
        adm.config_map_name = slash + 1;
    }
    kq_auth_mode_t mode = KQ_AUTH_DEFAULT;
    if (kq_auth_mode_parse(o.rest_auth, &mode) != 0) /* validated by parse_serve */
        mode = KQ_AUTH_DEFAULT;
    kq_auth_opts_t ao = {
        .mode = mode,
        .client_certs = o.client_ca != NULL,
        .token_file = o.rest_token_file,
        .kube = app.kube,
    };
    auth = kq_auth_new(&ao, err, sizeof(err));
    if (auth == NULL) {
        fprintf(stderr, "kubequota: %s\n", err);
        exit_code = 2;
        goto out;
    }
    if (kq_auth_closed(auth))
        kq_warn("event=rest_closed msg=\"the usage view refuses every caller: configure --client-ca, "
                "--rest-token-file or --rest-auth=kubernetes\"");
    kq_server_opts_t so = {
        .admission = &adm,
        .auth = auth,
        .metrics_auth = o.metrics_auth,
        .extender_local_only = o.extender_local_only,
        .extender_open = o.extender_open,
        .threads = (int)o.threads,
        .listen = o.listen,
        .tls_cert = o.tls_cert,
        .tls_key = o.tls_key,
        .client_ca = o.client_ca,
        .plain_http = o.plain_http,
        .max_body = (size_t)o.max_body,
    };
    server = kq_server_start(&so, &app, err, sizeof(err));
    if (server == NULL) {
        fprintf(stderr, "kubequota: cannot serve on %s: %s\n", o.listen, err);
        exit_code = 2;
        goto out;
    }
    char summary[256];
    kq_config_summary(cfg, summary, sizeof(summary));
    kq_info("event=started version=%s listen=%s tls=%s client_ca=%s scheduler=%s partition=%s api=%s config=%s "
            "summary=\"%s\"",
            KQ_VERSION, o.listen, o.plain_http ? "off" : "on", o.client_ca ? "required" : "off", o.scheduler_name,
            o.partition, kconf.server ? kconf.server : "?", o.config, summary);

    int sig = 0;
    sigwait(&sigs, &sig);
    kq_info("event=stopping signal=%d msg=\"no new connections; finishing requests in flight\"", sig);
    pthread_t watchdog;
    if (pthread_create(&watchdog, NULL, shutdown_watchdog, NULL) == 0)
        pthread_detach(watchdog);
    exit_code = 0;

out:
    /* Stop producers before consumers: HTTP first, then the informer and the reloader. */
    kq_server_stop(server);
    kq_auth_free(auth);
    strlist_free(&tusers);
    strlist_free(&tgroups);
    free(cm_buf);
    kq_sync_stop(sync);
    kq_reloader_stop(reloader);
    kq_elastic_stop(app.elastic); /* ---- elastic quota: threads stop before the ledger goes */
    kq_metering_free(app.metering); /* last checkpoint, written while this replica still leads */
    app.metering = NULL;
    /* leader election: after every module that acts as leader has stopped (and written its
     * last checkpoint), release the lease so a standby takes over at once */
    app.leader = NULL;
    kq_leader_stop(leader);
    kq_kube_free(lease_kube);
    kq_ledger_free(app.ledger);
    kq_elastic_free(app.elastic); /* ---- elastic quota: the tree, after the ledger borrowing it */
    strlist_free(&sysns);
    kq_kube_free(app.kube);
    kq_metrics_free(app.metrics);
    kq_ugm_free(app.ugm);
    kq_config_holder_free(app.config);
    kq_config_unref(cfg);
    kq_kube_conf_free(&kconf);
    kq_diags_free(&diags);
    curl_global_cleanup();
    return exit_code;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "serve") == 0)
        return serve(argc - 1, argv + 1);
    if (strcmp(cmd, "check-config") == 0)
        return kq_config_check_main(argc - 1, argv + 1);
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("kubequota %s\n", KQ_VERSION);
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "kubequota: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
