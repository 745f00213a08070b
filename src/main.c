/* kubequota: per-user, per-group and hierarchical quotas for Kubernetes pod scheduling.
 *
 * main only parses the command line and wires the modules together:
 *   check-config FILE   validate a queues.yaml (config module)
 *   serve ...           load the config, connect to the API server, start the pod informer,
 *                       the config reloader and the HTTPS server, and wait for SIGINT/SIGTERM.
 */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kubequota/serve/admission.h"
#include "kubequota/app.h"
#include "kubequota/serve/auth.h"
#include "kubequota/engine/config.h"
#include "kubequota/base/duration.h"
#include "kubequota/control/elastic.h"
#include "kubequota/serve/extender.h"
#include "kubequota/serve/kubectl.h"
#include "kubequota/kube/kube.h"
#include "kubequota/kube/leader.h"
#include "kubequota/control/claims.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/control/metering.h"
#include "kubequota/control/gating.h"
#include "kubequota/control/history.h"
#include "kubequota/control/reclaim.h"
#include "kubequota/control/requeue.h"
#include "kubequota/control/slices.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/serve/server.h"
#include "kubequota/control/sync.h"
#include "kubequota/engine/ugm.h"

#ifndef KQ_VERSION
#define KQ_VERSION "0.1.0"
#endif
#ifndef KQ_COMMIT
#define KQ_COMMIT "unknown"
#endif
#ifndef KQ_BUILD_DATE
#define KQ_BUILD_DATE "unknown"
#endif

/* ------------------------------------------------------------------ command line
 *
 * Every flag of serve is one row of serve_flags: its name, argument, help text and, for a
 * renamed flag, the old name kept as an alias. --help is generated from the table, and
 * docs/cli.md must list every name (tests/docs/test_docs.py checks). Durations take Go's
 * syntax (duration.h); flags whose old syntax was a bare number keep reading it in the old
 * unit. Names follow kube-scheduler where the meaning is the same. */

enum {
    O_CONFIG = 256, O_KUBECONFIG, O_LISTEN, O_CERT, O_KEY, O_CA, O_PLAIN, O_SCHED, O_PART, O_USER, O_BODY,
    O_RELOAD, O_LOG, O_LOG_FORMAT, O_VERBOSITY, O_REST_AUTH, O_REST_TOKEN, O_METRICS_AUTH, O_TRUSTED_USERS, O_PROCESS_NS, O_BYPASS_NS,
    O_TRUSTED_GROUPS, O_CONFIG_MAP, O_EXT_LOCAL, O_EXT_OPEN, O_WATCH_PROGRESS, O_EVENT_UPDATE, O_REQUEUE_WINDOW,
    O_SCHED_LISTEN, O_SCHED_THREADS, O_THREADS, O_METRICS_MAX_USERS, O_MAX_CLIENT_CONNS, O_MAX_VIEWS,
    O_WEBHOOK_LISTEN, O_WEBHOOK_THREADS, O_SCHED_PLAIN,
    /* elastic flags */
    O_SYSNS, O_DQMIN, O_DQMAX, O_GRACE, O_ETICK, O_STATUS, O_MINRUN, O_PREEMPT_DEF, O_RECLAIM_SOURCES,
    O_KOORD_DELAY,
    O_METERING, O_LEADER_ELECT, O_LEASE_NS, O_LEASE_NAME, O_LEASE_DUR, O_RENEW_DEADLINE, O_RETRY_PERIOD,
    O_HISTORY, O_APPID_FALLBACK, O_GATE, O_GATE_TIMEOUT, O_GATE_REMOVERS, O_GATE_USAGE_CM, O_GATE_USAGE_CKPT, O_GATE_PARALLEL, O_GATE_ONLY,
    O_HELP = 'h',
};

typedef struct flag {
    const char *name;  /* NULL: a section heading (help) */
    int has_arg;
    int id;
    const char *arg;   /* placeholder in --help */
    const char *help;  /* "\n" continues on the next line */
    const char *alias; /* an older name still accepted */
} flag_t;

static const flag_t serve_flags[] = {
    {"config", 1, O_CONFIG, "FILE", "queues.yaml (YuniKorn format); reloaded when it changes (required)", NULL},
    {"kubeconfig", 1, O_KUBECONFIG, "FILE", "kubeconfig to reach the API server (default: in-cluster\n"
                                            "service account: KUBERNETES_SERVICE_HOST/PORT, token, CA)", NULL},
    {"listen", 1, O_LISTEN, "HOST:PORT", "address to serve HTTPS on (default 0.0.0.0:8443)", NULL},
    {"tls-cert", 1, O_CERT, "FILE", "serving certificate (PEM, chain allowed)", NULL},
    {"tls-key", 1, O_KEY, "FILE", "serving private key (PEM)", NULL},
    {"client-ca", 1, O_CA, "FILE", "require client certificates signed by this CA", NULL},
    {"insecure-plain-http", 0, O_PLAIN, NULL, "serve plain HTTP instead of TLS (local tests only)", NULL},
    {"scheduler-name", 1, O_SCHED, "NAME", "pods with this spec.schedulerName are managed\n"
                                           "(default kubequota-scheduler)", NULL},
    {"partition", 1, O_PART, "NAME", "partition of queues.yaml to enforce (default default)", NULL},
    {"default-user", 1, O_USER, "NAME", "user of pods without identity (default nobody)", NULL},
    {"app-id-fallback", 1, O_APPID_FALLBACK, "MODE", "application of pods without an app id label: yunikorn\n"
                                                     "(yunikorn-<namespace>-autogen, as YuniKorn; default),\n"
                                                     "yunikorn-unique (<namespace>-<pod uid>, YuniKorn's\n"
                                                     "generateUniqueAppId) or owner (the controller's UID,\n"
                                                     "else the pod's)", NULL},
    {"max-body", 1, O_BODY, "BYTES", "largest accepted request body (default 67108864)", NULL},
    {"reload-interval", 1, O_RELOAD, "DURATION", "how often the config file is checked (default 2s;\n"
                                                 "a bare number is milliseconds)", NULL},
    {"watch-progress-deadline", 1, O_WATCH_PROGRESS, "DURATION", "a watch that receives nothing (no event, no\n"
                                                                 "bookmark) for this long is stalled and relisted\n"
                                                                 "(default 150s; 0 off)", NULL},
    {"threads", 1, O_THREADS, "N", "HTTP worker threads; each open keep-alive connection holds\n"
                                   "one (default 64)", NULL},
    {"event-update-interval", 1, O_EVENT_UPDATE, "DURATION", "least time between two updates of one Event\n"
                                                             "(its count) while a pod keeps being denied\n"
                                                             "(default 1m; docs/events.md)", NULL},
    {"requeue-window", 1, O_REQUEUE_WINDOW, "DURATION", "pods the filter denied this shortly before usage\n"
                                                        "is released get the kubequota.io/requeue\n"
                                                        "annotation, so kube-scheduler retries them\n"
                                                        "(default 10s; 0 off; docs/events.md)", NULL},
    {"history-interval", 1, O_HISTORY, "DURATION", "sample each queue's and user's usage this often for\n"
                                                   "the dashboard's charts; 60 samples and 256 series\n"
                                                   "kept in memory (default 1m; 0 off; docs/endpoints.md)", NULL},
    {NULL, 0, 0, NULL, "logging (docs/logging.md)", NULL},
    {"logging-format", 1, O_LOG_FORMAT, "FORMAT", "text (klog lines) or json (one object per line)\n"
                                                  "(default text)", NULL},
    {"v", 1, O_VERBOSITY, "N", "verbosity, 0 to 10: 0 info, 4 debug (default 0); also -v=N", NULL},
    {"log-level", 1, O_LOG, "LEVEL", "error, warn, info or debug (debug is -v=4; default info)", NULL},
    {NULL, 0, 0, NULL, "access to the usage view (/ws/v1/...) and /metrics", NULL},
    {"rest-auth", 1, O_REST_AUTH, "MODE", "default: a client certificate (--client-ca) or the bearer\n"
                                          "token of --rest-token-file; kubernetes: also Kubernetes\n"
                                          "tokens that TokenReview accepts and SubjectAccessReview\n"
                                          "allows for get on usage.kubequota.io; none: open", NULL},
    {"rest-token-file", 1, O_REST_TOKEN, "FILE", "bearer token accepted by the usage view (re-read on change)",
     NULL},
    {"metrics-auth", 0, O_METRICS_AUTH, NULL, "/metrics follows the usage view's access rules", NULL},
    {"metrics-max-users", 1, O_METRICS_MAX_USERS, "N", "at most N users get per-user series on /metrics, the\n"
                                                       "ones using most; 0: none (default 100)", NULL},
    {"extender-local-only", 0, O_EXT_LOCAL, NULL, "/scheduler/* answers only callers on this host\n"
                                                  "(kube-scheduler beside kubequota in the same pod);\n"
                                                  "default: callers on this host and callers with a client\n"
                                                  "certificate signed by --client-ca", NULL},
    {"extender-open", 0, O_EXT_OPEN, NULL, "/scheduler/* answers anyone who reaches the port (unsafe)", NULL},
    {"scheduler-listen", 1, O_SCHED_LISTEN, "HOST:PORT", "serve /scheduler/* (and the probes) here instead of on\n"
                                                         "--listen, with its own workers, so load on the main\n"
                                                         "port never delays the scheduler; TLS like --listen\n"
                                                         "(loopback only with --insecure-plain-http)", NULL},
    {"scheduler-plain-http", 0, O_SCHED_PLAIN, NULL, "--scheduler-listen speaks plain HTTP (it must be on\n"
                                                 "loopback) while the other ports keep TLS: kube-scheduler\n"
                                                 "in the same pod binds without a TLS handshake each", NULL},
    {"scheduler-threads", 1, O_SCHED_THREADS, "N", "workers of --scheduler-listen (default 64)", NULL},
    {"max-client-connections", 1, O_MAX_CLIENT_CONNS, "N", "connections one client address may hold on --listen\n"
                                                           "(TLS), more are closed at once (default: half of\n"
                                                           "--threads)", NULL},
    {"max-concurrent-views", 1, O_MAX_VIEWS, "N", "large views (usage/users, usage/groups, applications,\n"
                                                  "/metrics ...) built and sent at once; more wait 1 s,\n"
                                                  "then answer 503 with Retry-After (default 2; 0: no\n"
                                                  "limit)", NULL},
    {NULL, 0, 0, NULL, "admission webhooks (/admission/...)", NULL},
    {"webhook-listen", 1, O_WEBHOOK_LISTEN, "HOST:PORT", "serve /admission/* (and the probes) here instead of\n"
                                                        "on --listen, with its own workers, so load on the\n"
                                                        "main port never delays the API server's webhook\n"
                                                        "calls; TLS like --listen\n"
                                                        "(loopback only with --insecure-plain-http)", NULL},
    {"webhook-threads", 1, O_WEBHOOK_THREADS, "N", "workers of --webhook-listen (default 32; connections\n"
                                                   "beyond them wait; while workers are scarce, answers\n"
                                                   "close their connections and connections that never\n"
                                                   "finish a request are closed)", NULL},
    {"process-namespaces", 1, O_PROCESS_NS, "REGEXES", "comma-separated POSIX extended regular expressions:\n"
                                                        "/admission/mutate-scheduler governs only namespaces\n"
                                                        "one of them matches (YuniKorn's processNamespaces;\n"
                                                        "unanchored: write ^...$ for a whole name; default\n"
                                                        "empty: every namespace)", NULL},
    {"bypass-namespaces", 1, O_BYPASS_NS, "REGEXES", "namespaces it leaves alone, answering allowed and\n"
                                                      "unchanged (YuniKorn's bypassNamespaces; default\n"
                                                      "^kube-system$; \"\" bypasses none)", NULL},
    {"trusted-users", 1, O_TRUSTED_USERS, "LIST", "comma-separated users whose pods and workloads keep the\n"
                                                  "identity already on them ('prefix*' allowed; default\n"
                                                  "system:serviceaccount:kube-system:*,system:kube-controller-manager)",
     NULL},
    {"trusted-groups", 1, O_TRUSTED_GROUPS, "LIST", "likewise for groups (default system:serviceaccounts:kube-system)",
     NULL},
    {"config-map", 1, O_CONFIG_MAP, "NS/NAME[:KEY]", "the ConfigMap holding queues.yaml, guarded by\n"
                                                     "/admission/validate (default kube-system/kubequota-config,\n"
                                                     "key queues.yaml)", NULL},
    {"admission-gate", 0, O_GATE, NULL, "create managed pods with the scheduling gate\n"
                                        "kubequota.io/admission and release them in fair order when\n"
                                        "they fit (docs/gating.md; default off)", NULL},
    {"admission-gate-only", 0, O_GATE_ONLY, NULL, "kube-scheduler calls no extender (the chart's gate-only\n"
                                               "mode): the gate's release is the only quota decision;\n"
                                               "pods of a multi-tree quota are never released", NULL},
    {"admission-gate-removers", 1, O_GATE_REMOVERS, "LIST", "users who may remove the gate (kubequota's own\n"
                                                           "service account; 'prefix*' allowed); others are\n"
                                                           "refused. Unset: anyone who may update the pod", NULL},
    {"admission-gate-reserve-timeout", 1, O_GATE_TIMEOUT, "DURATION", "a released pod not bound within this\n"
                                                                      "loses its reservation (default 2m)", NULL},
    {"admission-gate-usage-configmap", 1, O_GATE_USAGE_CM, "[NS/]NAME", "the ConfigMap keeping the usage history of\n"
                                                                        "queues with policy \"usage\" across restarts\n"
                                                                        "(default <namespace>/kubequota-gating-usage,\n"
                                                                        "the Lease's namespace; \"\" keeps none)", NULL},
    {"admission-gate-usage-checkpoint", 1, O_GATE_USAGE_CKPT, "DURATION", "how often the leader writes that\n"
                                                                          "history (default 30s)", NULL},
    {"admission-gate-release-parallel", 1, O_GATE_PARALLEL, "N", "gate removals (PATCHes) of one pass in flight\n"
                                                                 "at once, 1 to 64 (default 16; 1: one after\n"
                                                                 "the other)", NULL},
    {NULL, 0, 0, NULL, "elastic quota (docs/elastic-quota.md)", NULL},
    {"system-namespaces", 1, O_SYSNS, "LIST", "comma-separated namespaces whose pods form the system\n"
                                              "quota group (default kube-system)", NULL},
    {"default-quota-min", 1, O_DQMIN, "RES", "min of the default quota group, e.g. cpu=4,memory=8Gi", NULL},
    {"default-quota-max", 1, O_DQMAX, "RES", "max of the default quota group (default unlimited)", NULL},
    {"reclaim-grace", 1, O_GRACE, "DURATION", "how long a group may use more than its runtime before\n"
                                              "its pods are evicted (default 1m)", NULL},
    {"reclaim-min-runtime", 1, O_MINRUN, "DURATION", "a pod running for less than this is not evicted by\n"
                                                     "reclaim (default 0)", NULL},
    {"reclaim-sources", 1, O_RECLAIM_SOURCES, "LIST", "whose groups are reclaimed when over their runtime:\n"
                                                      "queues, scheduler-plugins, koordinator, or none\n"
                                                      "(default queues: CapacityScheduling only preempts,\n"
                                                      "Koordinator's revoke controller is off unless\n"
                                                      "monitorAllQuotas)", NULL},
    {"koordinator-delay-evict-time", 1, O_KOORD_DELAY, "DURATION", "how long a Koordinator quota may use more\n"
                                                                   "than its runtime before reclaim, when on\n"
                                                                   "(default 2m, Koordinator's delayEvictTime)", NULL},
    {"preempt-default-group", 0, O_PREEMPT_DEF, NULL, "pods of the default quota group may be preemption\n"
                                                      "victims (default: never, as in Koordinator)", NULL},
    {"elastic-tick", 1, O_ETICK, "DURATION", "reclaim / status / config check period (default 1s)", NULL},
    {"status-interval", 1, O_STATUS, "DURATION", "least time between status writes of one ElasticQuota\n"
                                                 "(default 10s)", NULL},
    {NULL, 0, 0, NULL, "leader election (several replicas: all serve, only the leader evicts and charges)", NULL},
    {"leader-elect", 0, O_LEADER_ELECT, NULL, "elect a leader through a coordination.k8s.io/v1 Lease", NULL},
    {"leader-elect-resource-namespace", 1, O_LEASE_NS, "NS", "namespace of the Lease (default: the in-cluster\n"
                                                             "namespace, else kube-system)", "lease-namespace"},
    {"leader-elect-resource-name", 1, O_LEASE_NAME, "NAME", "name of the Lease (default kubequota)", "lease-name"},
    {"leader-elect-lease-duration", 1, O_LEASE_DUR, "DURATION", "how long a standby waits before taking over\n"
                                                                "(default 15s)", "lease-duration"},
    {"leader-elect-renew-deadline", 1, O_RENEW_DEADLINE, "DURATION", "the leader steps down after this long\n"
                                                                     "without a renewal (default 10s)",
     "renew-deadline"},
    {"leader-elect-retry-period", 1, O_RETRY_PERIOD, "DURATION", "between attempts to acquire or renew\n"
                                                                 "(default 2s)", "retry-period"},
    {NULL, 0, 0, NULL, "metering and pricing (only the leader charges)", NULL},
    {"metering", 1, O_METERING, "KEY=VALUE", "repeatable; keys below; off unless given at least once", NULL},
    {"help", 0, O_HELP, NULL, "this text", NULL},
};
#define N_SERVE_FLAGS (sizeof(serve_flags) / sizeof(serve_flags[0]))

static void print_flags(FILE *f, const flag_t *flags, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const flag_t *fl = &flags[i];
        if (fl->name == NULL) {
            fprintf(f, "\n%s:\n", fl->help);
            continue;
        }
        char head[96];
        snprintf(head, sizeof(head), "%s--%s%s%s", fl->id == O_HELP ? "-h, " : fl->id == O_VERBOSITY ? "-v, " : "",
                 fl->name, fl->arg ? " " : "", fl->arg ? fl->arg : "");
        bool wide = strlen(head) >= 30;
        fprintf(f, "  %-30s", head);
        if (wide)
            fprintf(f, "\n  %-30s", "");
        for (const char *p = fl->help; *p; p++) {
            fputc(*p, f);
            if (*p == '\n')
                fprintf(f, "  %-30s", "");
        }
        if (fl->alias)
            fprintf(f, "\n  %-30s(old name --%s still accepted)", "", fl->alias);
        fputc('\n', f);
    }
}

static void usage_main(FILE *f)
{
    fprintf(f, "kubequota: per-user, per-group and hierarchical quotas for Kubernetes pod scheduling\n"
               "\n"
               "Usage:\n"
               "  kubequota serve --config FILE [flags]   run the scheduler extender, webhooks and views\n"
               "  kubequota check-config [--partition NAME] FILE   refuse what serve would refuse\n"
               "  kubequota kubectl usage|waiting|why|what-if ...   the kubectl plugin (also as kubectl-kubequota)\n"
               "  kubequota --version                     version, commit and build date\n"
               "\n"
               "'kubequota COMMAND --help' shows the flags of a command. Reference: docs/.\n");
}

static void usage_serve(FILE *f)
{
    fprintf(f, "Usage: kubequota serve --config FILE [flags]\n\n"
               "Runs the scheduler extender, the admission webhooks, the usage view and /metrics.\n"
               "Durations use Go's syntax: 500ms, 15s, 2m, 1h30m. Reference: docs/cli.md.\n\n"
               "Flags:\n");
    print_flags(f, serve_flags, N_SERVE_FLAGS);
    fprintf(f, "\nmetering keys (--metering KEY=VALUE):\n%s", kq_metering_opts_help);
}

static void usage_check_config(FILE *f)
{
    fprintf(f, "Usage: kubequota check-config [--partition NAME] FILE\n\n"
               "Validates a queues.yaml as serve would load it: one error per line (file:line:column).\n"
               "Exit status: 0 valid, 1 invalid, 2 unreadable or bad usage.\n\n"
               "Flags:\n"
               "  --partition NAME              the partition serve enforces must be defined (default default)\n"
               "  -h, --help                    this text\n");
}

/* One line for a bad command line, pointing at the help (not the whole usage). */
static int bad_usage(const char *cmd, const char *fmt, ...) KQ_PRINTF(2, 3);
static int bad_usage(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "kubequota %s: %s; see 'kubequota %s --help'\n", cmd, msg, cmd);
    return 2;
}

typedef struct serve_opts {
    const char *config, *kubeconfig, *listen, *tls_cert, *tls_key, *client_ca;
    const char *scheduler_name, *partition, *default_user, *log_level, *log_format;
    int app_id_fallback;
    const char *rest_auth, *rest_token_file, *trusted_users, *trusted_groups, *config_map;
    const char *process_ns, *bypass_ns; /* --process-namespaces, --bypass-namespaces */
    bool metrics_auth, extender_local_only, extender_open;
    const char *scheduler_listen;
    bool scheduler_plain_http;
    long scheduler_threads;
    long max_client_conns;
    long max_views; /* 0: not given */
    const char *webhook_listen;
    long webhook_threads;
    bool plain_http;
    long long max_body;
    long reload_ms;
    long threads;
    long verbosity; /* -1: not given */
    long metrics_max_users;
    /* elastic flags */
    const char *system_namespaces, *default_quota_min, *default_quota_max;
    long reclaim_grace_ms, elastic_tick_ms, status_interval_ms, reclaim_min_runtime_ms, koord_delay_ms;
    unsigned reclaim_sources;
    bool preempt_default;
    kq_metering_opts_t metering;
    bool metering_on; /* any --metering flag: metering (prices, charges, budgets) runs */
    /* leader election */
    bool leader_elect;
    const char *lease_namespace, *lease_name;
    long lease_duration_ms, renew_deadline_ms, retry_period_ms;
    long watch_progress_ms; /* -1 = the kube client's default */
    long event_update_ms;   /* -1 = the kube client's default */
    long requeue_window_ms; /* --requeue-window; 0 = no requeue pokes */
    long history_ms;        /* --history-interval; 0 = no usage history */
    bool admission_gate;
    bool gate_only; /* --admission-gate-only */
    long gate_timeout_ms;
    const char *gate_removers;
    const char *gate_usage_cm; /* NULL: the default name; "": none */
    long gate_usage_ckpt_ms;
    int gate_parallel;
} serve_opts_t;

static const flag_t *flag_by_id(int id)
{
    for (size_t i = 0; i < N_SERVE_FLAGS; i++)
        if (serve_flags[i].name != NULL && serve_flags[i].id == id)
            return &serve_flags[i];
    return NULL;
}

/* A duration flag: Go syntax; legacy_unit_ms > 0 also reads a bare number in that unit. */
static bool parse_duration_flag(int id, const char *arg, long legacy_unit_ms, long min_ms, long *out)
{
    char err[256];
    long ms = 0;
    const flag_t *fl = flag_by_id(id);
    if (kq_duration_parse(arg, legacy_unit_ms, &ms, err, sizeof(err)) != 0) {
        bad_usage("serve", "--%s: %s", fl->name, err);
        return false;
    }
    if (ms < min_ms) {
        char a[32];
        bad_usage("serve", "--%s %s: must be at least %s", fl->name, arg, kq_duration_format(min_ms, a, sizeof(a)));
        return false;
    }
    *out = ms;
    return true;
}

static bool parse_long_flag(const char *name, const char *arg, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(arg, &end, 10);
    if (*arg == '\0' || *end != '\0' || errno != 0 || v < min || v > max) {
        bad_usage("serve", "--%s %s: expected a whole number from %lld to %lld", name, arg, min, max);
        return false;
    }
    *out = v;
    return true;
}

/* Files named on the command line are read once here, before any thread starts, so a
 * typo fails at once with the cause instead of after the informers have started. */
static int check_files(const serve_opts_t *o)
{
    const struct {
        const char *flag, *path;
    } files[] = {
        {"--config", o->config},         {"--kubeconfig", o->kubeconfig},          {"--tls-cert", o->tls_cert},
        {"--tls-key", o->tls_key},       {"--client-ca", o->client_ca},            {"--rest-token-file", o->rest_token_file},
    };
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        if (files[i].path == NULL)
            continue;
        FILE *f = fopen(files[i].path, "r");
        if (f == NULL) {
            fprintf(stderr, "kubequota serve: %s %s: %s\n", files[i].flag, files[i].path, strerror(errno));
            return 2;
        }
        fclose(f);
    }
    return 0;
}

static int parse_serve(int argc, char **argv, serve_opts_t *o)
{
    /* getopt's table from serve_flags, aliases included */
    struct option longopts[2 * N_SERVE_FLAGS + 1];
    size_t nl = 0;
    for (size_t i = 0; i < N_SERVE_FLAGS; i++) {
        const flag_t *fl = &serve_flags[i];
        if (fl->name == NULL)
            continue;
        longopts[nl++] = (struct option){fl->name, fl->has_arg ? required_argument : no_argument, NULL, fl->id};
        if (fl->alias != NULL)
            longopts[nl++] = (struct option){fl->alias, fl->has_arg ? required_argument : no_argument, NULL, fl->id};
    }
    longopts[nl] = (struct option){NULL, 0, NULL, 0};
    *o = (serve_opts_t){
        .listen = "0.0.0.0:8443",
        .scheduler_name = "kubequota-scheduler",
        .partition = "default",
        .default_user = "nobody",
        .app_id_fallback = KQ_APPID_YUNIKORN, /* as YuniKorn's shim (README "Who, where, what") */
        .log_level = NULL,
        .log_format = "text",
        .verbosity = -1,
        .metrics_max_users = 100,
        .rest_auth = "default",
        .bypass_ns = KQ_ADMISSION_DEFAULT_BYPASS,
        .max_body = 64LL << 20,
        .reload_ms = 2000,
        .gate_timeout_ms = 120000,
        .gate_usage_ckpt_ms = 30000,
        .gate_parallel = KQ_GATING_RELEASE_PARALLEL_DEFAULT,
        .system_namespaces = "kube-system", /* elastic flags */
        .reclaim_grace_ms = 60000,
        .reclaim_sources = KQ_RECLAIM_DEFAULT,
        .koord_delay_ms = 120000,
        .elastic_tick_ms = 1000,
        .status_interval_ms = 10000,
        .lease_name = "kubequota", /* leader election: kube-scheduler's 15s / 10s / 2s */
        .lease_duration_ms = 15000,
        .watch_progress_ms = -1,
        .event_update_ms = -1,
        .requeue_window_ms = 10000,
        .history_ms = 60000,
        .renew_deadline_ms = 10000,
        .retry_period_ms = 2000,
    };
    kq_metering_opts_default(&o->metering);
    optind = 1;
    opterr = 0; /* errors are reported below, in one line */
    int c;
    long long n;
    while ((c = getopt_long(argc, argv, ":hv:", longopts, NULL)) != -1) {
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
        case O_APPID_FALLBACK:
            if (strcmp(optarg, "owner") == 0)
                o->app_id_fallback = KQ_APPID_OWNER;
            else if (strcmp(optarg, "yunikorn") == 0)
                o->app_id_fallback = KQ_APPID_YUNIKORN;
            else if (strcmp(optarg, "yunikorn-unique") == 0)
                o->app_id_fallback = KQ_APPID_YUNIKORN_UNIQUE;
            else
                return bad_usage("serve", "--app-id-fallback %s: use owner, yunikorn or yunikorn-unique", optarg);
            break;
        case O_LOG: o->log_level = optarg; break;
        case O_LOG_FORMAT: o->log_format = optarg; break;
        case 'v':
        case O_VERBOSITY:
            if (!parse_long_flag("v", optarg[0] == '=' ? optarg + 1 : optarg, 0, 10, &n))
                return 2;
            o->verbosity = (long)n;
            break;
        case O_REST_AUTH: o->rest_auth = optarg; break;
        case O_REST_TOKEN: o->rest_token_file = optarg; break;
        case O_METRICS_AUTH: o->metrics_auth = true; break;
        case O_METRICS_MAX_USERS:
            if (!parse_long_flag("metrics-max-users", optarg, 0, 100000, &n))
                return 2;
            o->metrics_max_users = (long)n;
            break;
        case O_TRUSTED_USERS: o->trusted_users = optarg; break;
        case O_PROCESS_NS: o->process_ns = optarg; break;
        case O_BYPASS_NS: o->bypass_ns = optarg; break;
        case O_TRUSTED_GROUPS: o->trusted_groups = optarg; break;
        case O_CONFIG_MAP: o->config_map = optarg; break;
        case O_EXT_LOCAL: o->extender_local_only = true; break;
        case O_EXT_OPEN: o->extender_open = true; break;
        case O_SCHED_LISTEN: o->scheduler_listen = optarg; break;
        case O_SCHED_PLAIN: o->scheduler_plain_http = true; break;
        case O_SCHED_THREADS:
            if (!parse_long_flag("scheduler-threads", optarg, 1, 256, &n))
                return 2;
            o->scheduler_threads = (long)n;
            break;
        case O_WEBHOOK_LISTEN: o->webhook_listen = optarg; break;
        case O_WEBHOOK_THREADS:
            if (!parse_long_flag("webhook-threads", optarg, 1, 1024, &n))
                return 2;
            o->webhook_threads = (long)n;
            break;
        case O_MAX_VIEWS:
            if (!parse_long_flag("max-concurrent-views", optarg, 0, 1024, &n))
                return 2;
            o->max_views = n == 0 ? -1 : (long)n;
            break;
        case O_MAX_CLIENT_CONNS:
            if (!parse_long_flag("max-client-connections", optarg, 1, 1024, &n))
                return 2;
            o->max_client_conns = (long)n;
            break;
        case O_EVENT_UPDATE:
            if (!parse_duration_flag(c, optarg, 0, 1, &o->event_update_ms))
                return 2;
            break;
        case O_HISTORY: /* 0 (off) or at least 100ms: each sample builds the queue and user views */
            if (!parse_duration_flag(c, optarg, 0, 0, &o->history_ms))
                return 2;
            if (o->history_ms > 0 && o->history_ms < 100)
                return bad_usage("serve", "--history-interval %s: must be 0 (off) or at least 100ms", optarg);
            break;
        case O_REQUEUE_WINDOW:
            if (!parse_duration_flag(c, optarg, 0, 0, &o->requeue_window_ms))
                return 2;
            break;
        case O_WATCH_PROGRESS:
            if (!parse_duration_flag(c, optarg, 0, 0, &o->watch_progress_ms))
                return 2;
            break;
        case O_THREADS:
            if (!parse_long_flag("threads", optarg, 1, 1024, &n))
                return 2;
            o->threads = (long)n;
            break;
        case O_BODY:
            if (!parse_long_flag("max-body", optarg, 1024, 1LL << 40, &n))
                return 2;
            o->max_body = n;
            break;
        case O_RELOAD:
            if (!parse_duration_flag(c, optarg, 1, 10, &o->reload_ms))
                return 2;
            break;
        /* elastic flags */
        case O_SYSNS: o->system_namespaces = optarg; break;
        case O_DQMIN: o->default_quota_min = optarg; break;
        case O_DQMAX: o->default_quota_max = optarg; break;
        case O_GRACE:
            if (!parse_duration_flag(c, optarg, 1, 0, &o->reclaim_grace_ms))
                return 2;
            break;
        case O_MINRUN:
            if (!parse_duration_flag(c, optarg, 1, 0, &o->reclaim_min_runtime_ms))
                return 2;
            break;
        case O_PREEMPT_DEF: o->preempt_default = true; break;
        case O_RECLAIM_SOURCES: {
            char rerr[256];
            if (kq_reclaim_parse_sources(optarg, &o->reclaim_sources, rerr, sizeof(rerr)) != 0)
                return bad_usage("serve", "--reclaim-sources %s: %s", optarg, rerr);
            break;
        }
        case O_KOORD_DELAY:
            if (!parse_duration_flag(c, optarg, 0, 0, &o->koord_delay_ms))
                return 2;
            break;
        case O_ETICK:
            if (!parse_duration_flag(c, optarg, 1, 10, &o->elastic_tick_ms))
                return 2;
            break;
        case O_STATUS:
            if (!parse_duration_flag(c, optarg, 1, 0, &o->status_interval_ms))
                return 2;
            break;
        case O_METERING: {
            char merr[512];
            if (kq_metering_opts_set(&o->metering, optarg, merr, sizeof(merr)) != 0)
                return bad_usage("serve", "--metering %s: %s", optarg, merr);
            o->metering_on = true;
            break;
        }
        case O_LEADER_ELECT: o->leader_elect = true; break;
        case O_GATE: o->admission_gate = true; break;
        case O_GATE_ONLY: o->gate_only = true; break;
        case O_GATE_REMOVERS: o->gate_removers = optarg; break;
        case O_GATE_USAGE_CM: {
            const char *sl = strchr(optarg, '/');
            if (*optarg != '\0' && (sl == optarg || (sl != NULL && (sl[1] == '\0' || strchr(sl + 1, '/') != NULL)) ||
                                     strlen(optarg) > 317))
                return bad_usage("serve", "--admission-gate-usage-configmap %s: expected NAME or NAMESPACE/NAME",
                                 optarg);
            o->gate_usage_cm = optarg;
            break;
        }
        case O_GATE_USAGE_CKPT:
            if (!parse_duration_flag(c, optarg, 0, 1000, &o->gate_usage_ckpt_ms))
                return 2;
            break;
        case O_GATE_PARALLEL:
            if (!parse_long_flag("admission-gate-release-parallel", optarg, 1, KQ_GATING_RELEASE_PARALLEL_MAX, &n))
                return 2;
            o->gate_parallel = (int)n;
            break;
        case O_GATE_TIMEOUT:
            if (!parse_duration_flag(c, optarg, 0, 1000, &o->gate_timeout_ms))
                return 2;
            break;
        case O_LEASE_NS: o->lease_namespace = optarg; break;
        case O_LEASE_NAME: o->lease_name = optarg; break;
        case O_LEASE_DUR:
            if (!parse_duration_flag(c, optarg, 0, 1, &o->lease_duration_ms))
                return 2;
            break;
        case O_RENEW_DEADLINE:
            if (!parse_duration_flag(c, optarg, 0, 1, &o->renew_deadline_ms))
                return 2;
            break;
        case O_RETRY_PERIOD:
            if (!parse_duration_flag(c, optarg, 0, 1, &o->retry_period_ms))
                return 2;
            break;
        case 'h': usage_serve(stdout); exit(0);
        case ':':
            return bad_usage("serve", "%s needs a value", argv[optind - 1]);
        default: {
            const char *bad = argv[optind - 1];
            if (optopt != 0 && optopt < 256)
                return bad_usage("serve", "unknown flag -%c", optopt);
            /* "--name=value": name the flag only */
            char name[128];
            snprintf(name, sizeof(name), "%s", bad);
            char *eq = strchr(name, '=');
            if (eq != NULL)
                *eq = '\0';
            return bad_usage("serve", "unknown flag %s", name);
        }
        }
    }
    if (optind < argc)
        return bad_usage("serve", "unexpected argument '%s'", argv[optind]);
    if (o->config == NULL)
        return bad_usage("serve", "--config FILE is required");
    if (kq_log_set_format(o->log_format) != 0)
        return bad_usage("serve", "--logging-format %s: expected text or json", o->log_format);
    if (o->log_level != NULL && kq_log_set_level(o->log_level) != 0)
        return bad_usage("serve", "--log-level %s: expected error, warn, info or debug", o->log_level);
    if (o->verbosity >= 0 && kq_log_set_verbosity((int)o->verbosity) != 0)
        return bad_usage("serve", "-v %ld: expected 0 to 10", o->verbosity);
    if (!o->plain_http && (o->tls_cert == NULL || o->tls_key == NULL))
        return bad_usage("serve", "--tls-cert and --tls-key are required (or --insecure-plain-http for local tests)");
    if (o->gate_only && !o->admission_gate)
        return bad_usage("serve", "--admission-gate-only needs --admission-gate: without the gate nothing checks quota");
    if (o->scheduler_plain_http && o->scheduler_listen == NULL)
        return bad_usage("serve", "--scheduler-plain-http needs --scheduler-listen (a loopback HOST:PORT)");
    if (o->extender_open && o->extender_local_only)
        return bad_usage("serve", "--extender-open and --extender-local-only contradict each other");
    if (o->plain_http && (o->tls_cert || o->tls_key || o->client_ca))
        return bad_usage("serve", "--insecure-plain-http cannot be combined with TLS options");
    kq_auth_mode_t mode;
    if (kq_auth_mode_parse(o->rest_auth, &mode) != 0)
        return bad_usage("serve", "--rest-auth %s: expected default, kubernetes or none", o->rest_auth);
    if (o->config_map != NULL) {
        const char *slash = strchr(o->config_map, '/');
        if (slash == NULL || slash == o->config_map || slash[1] == '\0' || slash[1] == ':' ||
            strchr(slash + 1, '/') != NULL)
            return bad_usage("serve", "--config-map %s: expected NAMESPACE/NAME[:KEY]", o->config_map);
    }
    /* elastic flags */
    {
        char why[256];
        const char *flags[] = {"--default-quota-min", "--default-quota-max"};
        const char *vals[] = {o->default_quota_min, o->default_quota_max};
        for (int i = 0; i < 2; i++) {
            kq_resource_t r = KQ_RESOURCE_EMPTY;
            int rc = vals[i] != NULL ? kq_config_parse_resource_list(vals[i], &r, why, sizeof(why)) : 0;
            kq_resource_free(&r);
            if (rc != 0)
                return bad_usage("serve", "%s %s: %s", flags[i], vals[i], why);
        }
    }
    if (*o->scheduler_name == '\0' || *o->partition == '\0' || *o->default_user == '\0')
        return bad_usage("serve", "--scheduler-name, --partition and --default-user must not be empty");
    return check_files(o);
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

/* DRA (slices.h): a slice changed, so allocated claims' counters may have: recount them and
 * recharge the pods of each claim whose charge moved (slices' informer thread, no lock held). */
static void claim_recharged(void *ud, const char *ns, const char *name)
{
    kq_app_t *app = ud;
    (void)kq_ledger_claim_changed(app->ledger, ns, name);
}

static void recount_claims(void *ud)
{
    kq_app_t *app = ud;
    size_t n = kq_claims_recount(app->claims, claim_recharged, app);
    (void)kq_ledger_flush_charges(app->ledger); /* metering: the pods recharged (ledger.h) */
    if (n > 0)
        kq_info("event=claims_recounted claims=%zu msg=\"ResourceSlices changed what allocated devices consume\"", n);
}

/* Metering (ledger.h "metering: a pod's charge"): before each compute, the charges a bind
 * or the gate moved (the informers flush after their own ledger calls). */
static void flush_charges(void *ud)
{
    (void)kq_ledger_flush_charges(ud);
}

/* The extended-resource path (pod.h): a pod's request of an extended resource a DeviceClass
 * backs is charged as that class's devices too. */
static int map_extended(void *ud, kq_resource_t *request)
{
    return kq_slices_extended_devices(ud, request, request);
}

/* The usage history's denial count (history.h): the filter's and bind's denied decisions. */
static unsigned long denials_so_far(void *ud)
{
    return kq_metrics_decision_count(ud, KQ_VERB_FILTER, KQ_RESULT_DENIED) +
           kq_metrics_decision_count(ud, KQ_VERB_BIND, KQ_RESULT_DENIED);
}

static int serve(int argc, char **argv)
{
    serve_opts_t o;
    int rc = parse_serve(argc, argv, &o);
    if (rc != 0)
        return rc;
    kq_admission_ns_filter_t *ns_filter = NULL; /* --process-namespaces, --bypass-namespaces */
    {
        char ferr[512] = "";
        if ((rc = kq_admission_ns_filter_new(o.process_ns, o.bypass_ns, &ns_filter, ferr, sizeof ferr)) != 0)
            return rc == KQ_ENOMEM ? (fprintf(stderr, "kubequota: out of memory\n"), 1)
                                   : bad_usage("serve", "%s", ferr);
    }

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
        .app_id_fallback = o.app_id_fallback,
    };
    atomic_init(&app.ready, false);
    kq_sync_t *sync = NULL;
    kq_reloader_t *reloader = NULL;
    kq_server_t *server = NULL;
    kq_leader_t *leader = NULL;   /* leader election: NULL when off */
    kq_kube_t *lease_kube = NULL; /* its own client: requests bounded by the renew deadline */
    kq_auth_t *auth = NULL;
    strlist_t tusers = {0}, tgroups = {0}, gremovers = {0};
    strlist_t sysns = {0}; /* elastic quota: --system-namespaces */
    char *cm_buf = NULL;
    char usage_ns[320] = ""; /* --admission-gate-usage-configmap's namespace */

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
    for (size_t i = 0; i < kq_config_warning_count(cfg); i++)
        kq_warn("event=config_unsupported_key msg=\"%s\"", kq_config_warning_at(cfg, i));
    rc = kq_config_check_partition(cfg, o.partition, o.config, &diags);
    if (rc != 0) {
        print_diags(&diags);
        fprintf(stderr, "kubequota: %s: configuration rejected (%s)\n", o.config, kq_strerror(rc));
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
        if (o.event_update_ms > 0)
            ko.event_update_ms = o.event_update_ms;
        app.kube = kq_kube_new_opts(&kconf, &ko);
    }
    kq_metrics_set_build_info(app.metrics, KQ_VERSION, KQ_COMMIT, KQ_BUILD_DATE);
    kq_metrics_set_max_users(app.metrics, o.metrics_max_users);
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
    /* DRA ResourceClaims (claims.h): the table the claim informer fills, before any pod */
    if ((app.claims = kq_claims_new()) == NULL) {
        fprintf(stderr, "kubequota: out of memory\n");
        goto out;
    }
    kq_ledger_set_claims(app.ledger, app.claims);
    /* usage over time for the dashboard (history.h): its own sampler thread */
    if (o.history_ms > 0) {
        kq_history_opts_t ho = {.interval_ms = o.history_ms, .denials = denials_so_far, .denials_ud = app.metrics};
        if ((app.history = kq_history_new(app.ugm, &ho)) == NULL || kq_history_start(app.history) != 0) {
            fprintf(stderr, "kubequota: cannot start the usage history\n");
            goto out;
        }
    }
    /* requeue pokes: denials shortly before a release get an annotation (requeue.h) */
    if (o.requeue_window_ms > 0) {
        kq_requeue_opts_t ro;
        kq_requeue_opts_default(&ro);
        ro.window_s = (double)o.requeue_window_ms / 1000.0;
        if ((app.requeue = kq_requeue_new(&ro, kq_requeue_poke_kube, app.kube)) == NULL ||
            kq_requeue_start(app.requeue) != 0) {
            fprintf(stderr, "kubequota: cannot start the requeue thread\n");
            goto out;
        }
        kq_ledger_set_release_hook(app.ledger, kq_requeue_released, app.requeue);
    }
    /* DRA devices (slices.h): ResourceSlices (counters of partitionable devices) and
     * DeviceClasses (extendedResourceName), read by the claim charge. Not waited for: a
     * slice listed after the claims recounts them (kq_claims_recount), and a DeviceClass
     * listed after a pod only maps that pod's extended requests from its next event */
    if ((app.slices = kq_slices_new()) != NULL) {
        kq_claims_set_slices(app.claims, app.slices);
        kq_slices_set_hook(app.slices, recount_claims, &app);
        kq_pod_set_extended_mapper(map_extended, app.slices);
    }
    if (app.slices == NULL || kq_slices_watch_start(app.slices, app.kube) != 0) {
        fprintf(stderr, "kubequota: cannot start the ResourceSlice and DeviceClass informers\n");
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
        eo.reclaim_min_runtime_ms = o.reclaim_min_runtime_ms;
        eo.reclaim_sources = o.reclaim_sources;
        eo.koord_delay_ms = o.koord_delay_ms;
        eo.preempt_default = o.preempt_default;
        eo.tick_ms = o.elastic_tick_ms;
        eo.status_interval_ms = o.status_interval_ms;
        app.elastic = kq_elastic_new(&app, &eo); /* copies the sets */
        kq_resource_free(&eo.default_min);
        kq_resource_free(&eo.default_max);
        if (app.elastic == NULL || kq_elastic_start(app.elastic) != 0) {
            fprintf(stderr, "kubequota: cannot start the elastic quota module\n");
            goto out;
        }
    }
    /* ---- end elastic quota ---- */

    /* The informer and the reloader start before the server, so every member of app that a
     * handler reads is set before the first request can arrive (/readyz stays 503 until the
     * first pod list is in). */
    /* kubequota's own namespace: the Lease's and the usage history's (in-cluster: the pod's) */
    const char *own_ns = o.lease_namespace ? o.lease_namespace
                         : (o.kubeconfig == NULL && kconf.namespace != NULL && kconf.namespace[0] != '\0')
                             ? kconf.namespace
                             : "kube-system";
    if (o.leader_elect) {
        char identity[320], lerr[256];
        if (kq_leader_default_identity(identity, sizeof(identity)) != 0) {
            fprintf(stderr, "kubequota: cannot make a leader election identity\n");
            goto out;
        }
        kq_leader_opts_t lo;
        kq_leader_opts_default(&lo);
        lo.namespace = own_ns;
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
    if (!o.metering_on) {
        /* off unless asked: nobody is charged, budgets are not enforced */
        kq_info("event=metering_off msg=\"no --metering flag: no prices, charges or budgets\"");
    } else { /* metering: after leader election (it charges only while leading), before the informer */
        char merr[1024];
        o.metering.is_leader = kq_leader_acts;
        o.metering.leader_ud = leader;
        o.metering.before_compute = flush_charges; /* the ledger outlives metering */
        o.metering.before_compute_ud = app.ledger;
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
    if (o.admission_gate) { /* before the informer: it feeds the gated pods from the first list */
        kq_gating_opts_t go;
        kq_gating_opts_default(&go);
        go.reserve_timeout_ms = o.gate_timeout_ms;
        go.usage_checkpoint_ms = o.gate_usage_ckpt_ms;
        go.ungate_parallel = o.gate_parallel;
        go.gate_only = o.gate_only;
        go.usage_ns = own_ns;
        go.usage_name = "kubequota-gating-usage";
        if (o.gate_usage_cm != NULL) { /* [NS/]NAME, checked by parse_serve; "" keeps none */
            const char *sl = strchr(o.gate_usage_cm, '/');
            if (sl == NULL) {
                go.usage_name = o.gate_usage_cm;
            } else {
                snprintf(usage_ns, sizeof(usage_ns), "%.*s", (int)(sl - o.gate_usage_cm), o.gate_usage_cm);
                go.usage_ns = usage_ns;
                go.usage_name = sl + 1;
            }
        }
        go.is_leader = kq_leader_acts;
        go.leader_ud = leader;
        if ((app.gating = kq_gating_new(&app, &go)) == NULL || kq_gating_start(app.gating) != 0) {
            fprintf(stderr, "kubequota: cannot start the admission gate controller\n");
            goto out;
        }
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
    adm.admission_gate = o.admission_gate;
    adm.ns_filter = ns_filter; /* the server applies it to /admission/mutate-scheduler only */
    adm.validate_elasticquota = kq_elastic_validate_admission; /* the quota tree's rules */
    adm.elasticquota_ud = app.elastic;
    adm.check_pod_quota = kq_elastic_check_pod; /* Koordinator's pod rules */
    adm.pod_quota_ud = app.elastic;
    adm.check_pod = kq_extender_admission_check; /* nodeName at creation, pods/resize */
    adm.check_pod_ud = &app;
    adm.check_pod_dry = kq_extender_admission_check_dry; /* the same, for a dry run: holds nothing */
    adm.check_pod_dry_ud = &app;
    adm.reserve_pod = kq_extender_admission_reserve; /* nodeName at creation, validating: counted */
    adm.reserve_pod_ud = &app;
    adm.check_pod_app = kq_extender_admission_app_check; /* another user's application */
    adm.pod_app_ud = &app;
    adm.check_config = kq_app_check_config; /* the ConfigMap webhook refuses what a reload would */
    adm.check_config_ud = &app;
    if ((o.trusted_users && split_list(o.trusted_users, &tusers) != 0) ||
        (o.trusted_groups && split_list(o.trusted_groups, &tgroups) != 0) ||
        (o.gate_removers && split_list(o.gate_removers, &gremovers) != 0) ||
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
    adm.gate_removers = gremovers.v;
    adm.n_gate_removers = gremovers.n;
    if (o.app_id_fallback == KQ_APPID_OWNER)
        kq_warn("event=yunikorn_difference key=app-id-fallback msg=\"--app-id-fallback owner: a pod without an "
                "application id is an application of its controller (else of its own), not YuniKorn's "
                "yunikorn-<namespace>-autogen: maxapplications counts workloads, not namespaces\"");
    if (o.admission_gate && gremovers.n == 0)
        kq_warn("event=gate_unguarded msg=\"--admission-gate without --admission-gate-removers: whoever may "
                "update a pod may remove the gate kubequota.io/admission and skip the fair order (not the "
                "limits)\"");
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
        .scheduler_listen = o.scheduler_listen,
        .scheduler_plain_http = o.scheduler_plain_http,
        .scheduler_threads = (int)o.scheduler_threads,
        .max_client_conns = (int)o.max_client_conns,
        .max_views = (int)o.max_views,
        .webhook_listen = o.webhook_listen,
        .webhook_threads = (int)o.webhook_threads,
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
    kq_info("event=started version=%s commit=%s listen=%s tls=%s client_ca=%s scheduler=%s partition=%s api=%s config=%s "
            "summary=\"%s\"",
            KQ_VERSION, KQ_COMMIT, o.listen, o.plain_http ? "off" : "on", o.client_ca ? "required" : "off", o.scheduler_name,
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
    strlist_free(&gremovers);
    free(cm_buf);
    kq_admission_ns_filter_free(ns_filter);
    kq_sync_stop(sync);
    kq_reloader_stop(reloader);
    kq_history_free(app.history); /* the server reading it has stopped; before the ugm */
    app.history = NULL;
    kq_gating_free(app.gating); /* after the informer that feeds it, before the ledger */
    app.gating = NULL;
    kq_elastic_stop(app.elastic); /* ---- elastic quota: threads stop before the ledger goes */
    kq_metering_free(app.metering); /* last checkpoint, written while this replica still leads */
    app.metering = NULL;
    /* leader election: after every module that acts as leader has stopped (and written its
     * last checkpoint), release the lease so a standby takes over at once */
    app.leader = NULL;
    kq_leader_stop(leader);
    kq_kube_free(lease_kube);
    if (app.ledger != NULL) /* every thread that releases usage has stopped */
        kq_ledger_set_release_hook(app.ledger, NULL, NULL);
    kq_requeue_free(app.requeue); /* before the API client it pokes through */
    kq_slices_free(app.slices);   /* its informers, before the API client */
    app.slices = NULL;
    app.requeue = NULL;
    kq_ledger_free(app.ledger);
    kq_claims_free(app.claims); /* after the ledger borrowing it */
    app.claims = NULL;
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

static void print_version(void)
{
    printf("kubequota %s (commit %s, built %s)\n", KQ_VERSION, KQ_COMMIT, KQ_BUILD_DATE);
}

int main(int argc, char **argv)
{
    /* kubectl finds plugins by name: installed as kubectl-kubequota (a symlink), the binary
     * is `kubectl kubequota` (kubectl.h); `kubequota kubectl ...` is the same. */
    const char *self = argc > 0 && argv[0] != NULL ? strrchr(argv[0], '/') : NULL;
    self = self != NULL ? self + 1 : argc > 0 && argv[0] != NULL ? argv[0] : "";
    if (strcmp(self, "kubectl-kubequota") == 0)
        return kq_kubectl_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "kubectl") == 0)
        return kq_kubectl_main(argc - 1, argv + 1);
    if (argc < 2) {
        usage_main(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "serve") == 0)
        return serve(argc - 1, argv + 1);
    if (strcmp(cmd, "check-config") == 0) {
        int files = 0;
        for (int i = 2; i < argc; i++) {
            if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
                usage_check_config(stdout);
                return 0;
            }
            if (strcmp(argv[i], "--partition") == 0) { /* its value is not a FILE */
                if (++i >= argc)
                    return bad_usage("check-config", "--partition needs a NAME");
                continue;
            }
            if (strncmp(argv[i], "--partition=", 12) == 0)
                continue;
            if (argv[i][0] == '-' && argv[i][1] != '\0')
                return bad_usage("check-config", "unknown flag %s", argv[i]);
            files++;
        }
        if (files != 1)
            return bad_usage("check-config", "expected exactly one FILE");
        return kq_config_check_main(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        print_version();
        return 0;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage_main(stdout);
        return 0;
    }
    fprintf(stderr, "kubequota: unknown command '%s'; see 'kubequota --help'\n", cmd);
    return 2;
}
