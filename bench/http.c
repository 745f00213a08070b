/* Rows 1-3 and 7 (filter part): scheduler extender requests over TLS with keep-alive
 * against kubequota's real server (kq_server_start with an app wired like main: config
 * holder, ugm, ledger, metrics, kube client) and, in the same run, against a null endpoint
 * (same civetweb, same TLS settings, reads the same body and answers the same bytes with
 * no quota work).
 *
 * The load generator is closed-loop: `conns` threads, each with one TLS connection, send
 * a request, read the whole response, record its latency, and send the next one. Every
 * response is checked (status 200, no Error in the result); errors are counted and shown.
 *
 * Bind rows: the API server's binding POST goes to a minimal in-process TLS responder
 * (201 + the Status body) on the kube client's pooled keep-alive connections. Every bind
 * request names a different pod; the pods are in the ledger as pending (observed like the
 * informer would), and are reset to pending between runs (removed and observed again,
 * which releases their count), so each run binds fresh pods against a steady ugm.
 *
 * DESIGN: all servers and the load generator share this process and its 2 cores, so
 * absolute numbers include the client's own cost; the kubequota/null ratio taken in the
 * same run is the figure that compares.
 */
#include "bench.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common.h"
#include "tlsserv.h"
#include "kubequota/app.h"
#include "kubequota/serve/extender.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/serve/metrics.h"
#include "kubequota/kube/pod.h"
#include "kubequota/serve/server.h"
#include "kubequota/engine/ugm.h"

enum { VERB_FILTER, VERB_BIND };

static const char BIND_201[] = "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"code\":201}";
static const char BIND_OK[] = "{\"Error\":\"\"}";

typedef struct workload {
    int verb;
    const char *path;
    /* filter */
    char **pods;
    size_t *pod_len, npods;
    char *names_json;
    size_t names_len;
    /* bind */
    char **bind_bodies;
    size_t nbind;
    atomic_ulong seq;
    /* null endpoint's answer */
    char *null_body;
    size_t null_len;
} workload_t;

/* ------------------------------------------------------------------ null endpoint, binding responder */

static int null_handler(struct mg_connection *conn, void *ud)
{
    workload_t *w = ud;
    size_t len;
    char *body = tls_read_body(conn, &len);
    tls_reply(conn, 200, "application/json", w->null_body, w->null_len);
    free(body);
    return 200;
}

static atomic_ulong binds_posted;

static int binding_handler(struct mg_connection *conn, void *ud)
{
    (void)ud;
    size_t len;
    char *body = tls_read_body(conn, &len);
    atomic_fetch_add(&binds_posted, 1);
    tls_reply(conn, 201, "application/json", BIND_201, sizeof(BIND_201) - 1);
    free(body);
    return 201;
}

/* ------------------------------------------------------------------ load generator */

typedef struct client {
    pthread_t th;
    workload_t *w;
    int port;
    SSL_CTX *ctx;
    pthread_barrier_t *ready;
    volatile double *t_warm, *t_end;
    lat_t lat;
    unsigned long errors;
    char first_error[256];
    bool failed;
} client_t;

static int connect_tls(int port, SSL_CTX *ctx, SSL **out)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) != 1) {
        SSL_free(ssl);
        close(fd);
        return -1;
    }
    *out = ssl;
    return fd;
}

static size_t build_request(workload_t *w, char **buf, size_t *cap)
{
    unsigned long seq = atomic_fetch_add(&w->seq, 1);
    const char *parts[4];
    size_t lens[4], np = 0, blen = 0;
    if (w->verb == VERB_FILTER) {
        size_t i = seq % w->npods;
        parts[np] = "{\"Pod\":";
        lens[np++] = 7;
        parts[np] = w->pods[i];
        lens[np++] = w->pod_len[i];
        parts[np] = ",\"Nodes\":null,\"NodeNames\":";
        lens[np] = strlen(parts[np]);
        np++;
        parts[np] = w->names_json;
        lens[np++] = w->names_len;
        blen = 1;
    } else {
        parts[np] = w->bind_bodies[seq % w->nbind];
        lens[np] = strlen(parts[np]);
        np++;
    }
    for (size_t i = 0; i < np; i++)
        blen += lens[i];
    char head[256];
    int hn = snprintf(head, sizeof(head),
                      "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: kqbench\r\n"
                      "Content-Type: application/json\r\nAccept: application/json\r\nContent-Length: %zu\r\n\r\n",
                      w->path, blen);
    size_t need = (size_t)hn + blen;
    if (need > *cap) {
        *cap = need * 2;
        *buf = realloc(*buf, *cap);
        if (*buf == NULL)
            abort();
    }
    char *p = *buf;
    memcpy(p, head, (size_t)hn);
    p += hn;
    for (size_t i = 0; i < np; i++) {
        memcpy(p, parts[i], lens[i]);
        p += lens[i];
    }
    if (w->verb == VERB_FILTER)
        *p++ = '}';
    return (size_t)(p - *buf);
}

static bool write_all(SSL *ssl, const char *p, size_t n)
{
    while (n > 0) {
        int r = SSL_write(ssl, p, (int)(n > (1u << 30) ? (1u << 30) : n));
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* Reads one response; *status, body in rb[*body_off .. *body_off + *body_len). */
static bool read_response(SSL *ssl, char **rb, size_t *rcap, int *status, size_t *body_off, size_t *body_len)
{
    size_t have = 0;
    char *end = NULL;
    for (;;) {
        if (have + 4096 > *rcap) {
            *rcap *= 2;
            *rb = realloc(*rb, *rcap);
            if (*rb == NULL)
                abort();
        }
        int r = SSL_read(ssl, *rb + have, (int)(*rcap - have - 1));
        if (r <= 0)
            return false;
        have += (size_t)r;
        (*rb)[have] = '\0';
        end = strstr(*rb, "\r\n\r\n");
        if (end != NULL)
            break;
    }
    *status = atoi(*rb + 9);
    size_t hlen = (size_t)(end - *rb) + 4;
    size_t cl = 0;
    for (char *h = strstr(*rb, "\r\n"); h != NULL && h < end; h = strstr(h + 2, "\r\n")) {
        if (strncasecmp(h + 2, "Content-Length:", 15) == 0) {
            cl = strtoul(h + 17, NULL, 10);
            break;
        }
    }
    size_t total = hlen + cl;
    if (total + 1 > *rcap) {
        *rcap = total + 1;
        *rb = realloc(*rb, *rcap);
        if (*rb == NULL)
            abort();
    }
    while (have < total) {
        int r = SSL_read(ssl, *rb + have, (int)(total - have));
        if (r <= 0)
            return false;
        have += (size_t)r;
    }
    (*rb)[total] = '\0';
    *body_off = hlen;
    *body_len = cl;
    return true;
}

static void *client_main(void *arg)
{
    client_t *c = arg;
    SSL *ssl = NULL;
    int fd = connect_tls(c->port, c->ctx, &ssl);
    if (fd < 0)
        c->failed = true;
    pthread_barrier_wait(c->ready);
    if (fd < 0)
        return NULL;
    size_t cap = 0, rcap = 65536;
    char *buf = NULL, *rb = malloc(rcap);
    for (;;) {
        size_t n = build_request(c->w, &buf, &cap);
        double t0 = now_s();
        if (t0 >= *c->t_end)
            break;
        int status = 0;
        size_t off = 0, blen = 0;
        if (!write_all(ssl, buf, n) || !read_response(ssl, &rb, &rcap, &status, &off, &blen)) {
            c->errors++;
            if (c->first_error[0] == '\0')
                snprintf(c->first_error, sizeof(c->first_error), "connection lost");
            break;
        }
        double t1 = now_s();
        const char *body = rb + off;
        bool ok = status == 200 && (c->w->verb == VERB_BIND ? strcmp(body, BIND_OK) == 0
                                                              : blen > 12 && strstr(body + blen - 12, "\"Error\":\"\"}"));
        if (!ok) {
            c->errors++;
            if (c->first_error[0] == '\0')
                snprintf(c->first_error, sizeof(c->first_error), "status %d: %.200s", status, body);
        }
        if (t0 >= *c->t_warm)
            lat_add(&c->lat, t1 - t0);
    }
    SSL_shutdown(ssl);
    SSL_free(ssl);
    close(fd);
    free(buf);
    free(rb);
    return NULL;
}

typedef struct run_result {
    double rps, p50, p99, p999;
    unsigned long n, errors;
    char first_error[256];
} run_result_t;

static run_result_t run_load(workload_t *w, int port, int conns, double seconds)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    client_t *cs = calloc((size_t)conns, sizeof(*cs));
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, (unsigned)conns + 1);
    volatile double t_warm = 1e300, t_end = 1e300;
    for (int i = 0; i < conns; i++) {
        cs[i] = (client_t){.w = w, .port = port, .ctx = ctx, .ready = &ready, .t_warm = &t_warm, .t_end = &t_end};
        pthread_create(&cs[i].th, NULL, client_main, &cs[i]);
    }
    /* Deadlines are set before the barrier releases the clients. */
    double t0 = now_s();
    double warm = seconds * 0.15 < 0.3 ? seconds * 0.15 : 0.3;
    t_warm = t0 + warm;
    t_end = t0 + warm + seconds;
    pthread_barrier_wait(&ready);
    /* the handshakes took time: move the window so every run gets the same measured span */
    double t1 = now_s();
    t_warm = t1 + warm;
    t_end = t1 + warm + seconds;
    run_result_t r = {0};
    lat_t all = {0};
    for (int i = 0; i < conns; i++) {
        pthread_join(cs[i].th, NULL);
        lat_merge(&all, &cs[i].lat);
        r.errors += cs[i].errors + (cs[i].failed ? 1 : 0);
        if (r.first_error[0] == '\0' && cs[i].first_error[0] != '\0')
            snprintf(r.first_error, sizeof(r.first_error), "%s", cs[i].first_error);
        if (r.first_error[0] == '\0' && cs[i].failed)
            snprintf(r.first_error, sizeof(r.first_error), "TLS connection failed");
        lat_free(&cs[i].lat);
    }
    lat_sort(&all);
    r.n = all.n;
    r.rps = (double)all.n / seconds;
    r.p50 = lat_pct(&all, 50) * 1e3;
    r.p99 = lat_pct(&all, 99) * 1e3;
    r.p999 = lat_pct(&all, 99.9) * 1e3;
    lat_free(&all);
    pthread_barrier_destroy(&ready);
    free(cs);
    SSL_CTX_free(ctx);
    return r;
}

/* ------------------------------------------------------------------ setup */

typedef struct world {
    kq_config_t *cfg;
    kq_app_t app;
    kq_server_t *server;
    int kq_port, null_port, api_port;
    struct mg_context *null_ctx, *api_ctx;
    kq_kube_conf_t kconf;
    /* bind pool */
    kq_pod_t *pool;
    size_t npool;
} world_t;

static void ugm_prefill(kq_ugm_t *ugm, int users, int groups)
{
    kq_resource_t req = {0};
    if (kq_resource_set(&req, "cpu", 100) != 0 || kq_resource_set(&req, "memory", 1 << 20) != 0)
        abort();
    char user[64], group[64], queue[64], app[80], reason[512];
    for (int i = 0; i < users; i++) {
        bench_user(i, groups, user, group, queue, sizeof(user));
        const char *gs[2] = {group, "all"};
        kq_user_t u = {.name = user, .groups = gs, .n_groups = 2};
        snprintf(app, sizeof(app), "pre-%d", i);
        if (kq_ugm_increase(ugm, queue, app, &u, &req, reason, sizeof(reason), NULL) != 0) {
            fprintf(bench_err(), "kqbench: prefill of %s failed: %s\n", user, reason);
            exit(1);
        }
    }
}

static void pool_observe(world_t *W, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        kq_ledger_observe(W->app.ledger, &W->pool[i % W->npool]);
}

static void pool_reset(world_t *W, size_t used)
{
    if (used > W->npool)
        used = W->npool;
    for (size_t i = 0; i < used; i++)
        kq_ledger_remove(W->app.ledger, W->pool[i].uid);
    pool_observe(W, 0, used);
}

static void world_start(world_t *W, workload_t *w, int users, int groups, int threads)
{
    char cert[512], key[512], acert[512], akey[512], ca[512];
    snprintf(cert, sizeof(cert), "%s/server.crt", bench_certs());
    snprintf(key, sizeof(key), "%s/server.key", bench_certs());
    snprintf(acert, sizeof(acert), "%s/apiserver.crt", bench_certs());
    snprintf(akey, sizeof(akey), "%s/apiserver.key", bench_certs());
    snprintf(ca, sizeof(ca), "%s/ca.crt", bench_certs());

    W->cfg = bench_config(users, groups);
    W->app = (kq_app_t){.partition = "default", .scheduler_name = BENCH_SCHED, .default_user = "nobody"};
    atomic_init(&W->app.ready, true);
    W->app.config = kq_config_holder_new(W->cfg);
    W->app.ugm = kq_ugm_new("default");
    W->app.metrics = kq_metrics_new();
    if (W->app.config == NULL || W->app.ugm == NULL || W->app.metrics == NULL ||
        kq_ugm_set_config(W->app.ugm, W->cfg) != 0)
        abort();
    W->app.ledger = kq_ledger_new(W->app.ugm, BENCH_SCHED);
    ugm_prefill(W->app.ugm, users, groups);

    W->api_ctx = tls_server_start(acert, akey, 80, binding_handler, NULL, &W->api_port);
    if (W->api_ctx == NULL)
        exit(1);
    char server[64];
    snprintf(server, sizeof(server), "https://127.0.0.1:%d", W->api_port);
    W->kconf.server = strdup(server);
    W->kconf.ca_file = strdup(ca);
    W->app.kube = kq_kube_new(&W->kconf);
    if (W->app.kube == NULL)
        abort();

    /* one load generator opens up to 64 connections from one address: the per-client limit
     * (half the workers by default) would refuse some, which the null endpoint does not */
    kq_server_opts_t so = {.listen = "127.0.0.1:0", .tls_cert = cert, .tls_key = key, .threads = threads,
                           .max_client_conns = 1024};
    char err[512];
    W->server = kq_server_start(&so, &W->app, err, sizeof(err));
    if (W->server == NULL) {
        fprintf(bench_err(), "kqbench: kubequota server: %s\n", err);
        exit(1);
    }
    W->kq_port = kq_server_port(W->server);
    W->null_ctx = tls_server_start(cert, key, threads > 0 ? threads : 32, null_handler, w, &W->null_port);
    if (W->null_ctx == NULL)
        exit(1);
}

static void world_stop(world_t *W)
{
    kq_server_stop(W->server);
    mg_stop(W->null_ctx);
    mg_stop(W->api_ctx);
    kq_ledger_free(W->app.ledger);
    kq_kube_free(W->app.kube);
    kq_metrics_free(W->app.metrics);
    kq_ugm_free(W->app.ugm);
    kq_config_holder_free(W->app.config);
    kq_config_unref(W->cfg);
    kq_kube_conf_free(&W->kconf);
    for (size_t i = 0; i < W->npool; i++)
        kq_pod_clear(&W->pool[i]);
    free(W->pool);
}

/* ---- the floor of a bind: the API server's binding POST alone ----
 * conns threads call kq_kube_bind (the same client and pool kubequota's binds use) in a
 * closed loop against the same responder, with no extender request in front: what every
 * bind must spend whatever kubequota does besides. */
typedef struct post_arg {
    world_t *W;
    pthread_barrier_t *ready;
    double seconds;
    int id;
    lat_t lat;
    unsigned long errors;
} post_arg_t;

static void *post_main(void *p)
{
    post_arg_t *a = p;
    char name[64], err[256];
    pthread_barrier_wait(a->ready);
    double end = now_s() + a->seconds;
    for (unsigned long i = 0; now_s() < end; i++) {
        snprintf(name, sizeof(name), "floor-%d-%lu", a->id, i);
        double t0 = now_s();
        if (kq_kube_bind(a->W->app.kube, "team-a", name, "00000000-0000-4000-8000-000000000000", "node-1", err,
                         sizeof(err)) != 0)
            a->errors++;
        lat_add(&a->lat, now_s() - t0);
    }
    return NULL;
}

/* Requests/s and the merged latencies of one closed-loop run of the binding POST alone. */
static double post_floor(world_t *W, int conns, double seconds, lat_t *all, unsigned long *errors)
{
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, (unsigned)conns + 1);
    post_arg_t *a = calloc((size_t)conns, sizeof(*a));
    pthread_t *th = calloc((size_t)conns, sizeof(*th));
    for (int i = 0; i < conns; i++) {
        a[i] = (post_arg_t){.W = W, .ready = &ready, .seconds = seconds, .id = i};
        pthread_create(&th[i], NULL, post_main, &a[i]);
    }
    pthread_barrier_wait(&ready);
    double t0 = now_s();
    for (int i = 0; i < conns; i++)
        pthread_join(th[i], NULL);
    double t = now_s() - t0;
    size_t n = 0;
    for (int i = 0; i < conns; i++) {
        n += a[i].lat.n;
        *errors += a[i].errors;
        lat_merge(all, &a[i].lat);
        lat_free(&a[i].lat);
    }
    pthread_barrier_destroy(&ready);
    free(a);
    free(th);
    return (double)n / t;
}

/* Node names like a cloud provider's: ip-10-0-<a>-<b>.ec2.internal. */
static char *names_json(int n, size_t *len)
{
    size_t cap = (size_t)n * 40 + 16, o = 0;
    char *s = malloc(cap);
    s[o++] = '[';
    for (int i = 0; i < n; i++)
        o += (size_t)snprintf(s + o, cap - o, "%s\"ip-10-0-%d-%d.ec2.internal\"", i ? "," : "", i / 250, i % 250 + 1);
    s[o++] = ']';
    s[o] = '\0';
    *len = o;
    return s;
}

/* ------------------------------------------------------------------ the rows */

typedef struct opts {
    int verb, names, users, groups, reps, threads;
    double seconds;
    int conns[8], nconns;
    const char *row;
} opts_t;

static void cmdline(const opts_t *o, int conns, char *buf, size_t len)
{
    char names[32] = "";
    if (o->verb == VERB_FILTER)
        snprintf(names, sizeof(names), " --names %d", o->names);
    snprintf(buf, len, "%s http --verb %s%s --users %d --groups %d --conns %d --seconds %g --reps %d%s",
             bench_self(), o->verb == VERB_FILTER ? "filter" : "bind", names, o->users, o->groups, conns,
             o->seconds, o->reps, o->threads ? " --threads N" : "");
    if (o->threads) {
        char *p = strstr(buf, " --threads N");
        snprintf(p, len - (size_t)(p - buf), " --threads %d", o->threads);
    }
}

int bench_http_main(int argc, char **argv)
{
    opts_t o = {.verb = VERB_FILTER, .names = 500, .users = 10000, .groups = 1000, .reps = 3, .seconds = 1.5,
                .row = NULL};
    static const struct option lo[] = {
        {"verb", required_argument, NULL, 'v'},   {"names", required_argument, NULL, 'n'},
        {"users", required_argument, NULL, 'u'},  {"groups", required_argument, NULL, 'g'},
        {"conns", required_argument, NULL, 'c'},  {"seconds", required_argument, NULL, 's'},
        {"reps", required_argument, NULL, 'r'},   {"threads", required_argument, NULL, 't'},
        {"row", required_argument, NULL, 'R'},    {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'v': o.verb = strcmp(optarg, "bind") == 0 ? VERB_BIND : VERB_FILTER; break;
        case 'n': o.names = atoi(optarg); break;
        case 'u': o.users = atoi(optarg); break;
        case 'g': o.groups = atoi(optarg); break;
        case 's': o.seconds = atof(optarg); break;
        case 'r': o.reps = atoi(optarg); break;
        case 't': o.threads = atoi(optarg); break;
        case 'R': o.row = optarg; break;
        case 'c': {
            o.nconns = 0;
            for (char *tok = strtok(optarg, ","); tok && o.nconns < 8; tok = strtok(NULL, ","))
                o.conns[o.nconns++] = atoi(tok);
            break;
        }
        default: return 2;
        }
    }
    if (o.nconns == 0) {
        o.conns[0] = 1, o.conns[1] = 16, o.conns[2] = 64;
        o.nconns = 3;
    }
    if (o.groups < 100 || o.groups % 100 != 0 || o.users < o.groups) {
        fprintf(bench_err(), "kqbench http: --groups must be a multiple of 100 and --users >= --groups\n");
        return 2;
    }

    workload_t w = {.verb = o.verb, .path = o.verb == VERB_FILTER ? "/scheduler/filter" : "/scheduler/bind"};
    world_t W = {0};
    double t_setup = now_s();
    world_start(&W, &w, o.users, o.groups, o.threads);

    char user[64], group[64], queue[64], uid[64], name[64];
    if (o.verb == VERB_FILTER) {
        w.npods = 256;
        w.pods = calloc(w.npods, sizeof(char *));
        w.pod_len = calloc(w.npods, sizeof(size_t));
        for (size_t i = 0; i < w.npods; i++) {
            int u = (int)((i * 7919) % (size_t)o.users);
            bench_user(u, o.groups, user, group, queue, sizeof(user));
            snprintf(uid, sizeof(uid), "f0000000-0000-4000-8000-%012zu", i);
            snprintf(name, sizeof(name), "train-%zu", i);
            bench_pod_t p = {.uid = uid, .name = name, .ns = "team-a", .user = user, .group = group, .queue = queue};
            w.pods[i] = bench_pod_json(&p);
            w.pod_len[i] = strlen(w.pods[i]);
        }
        w.names_json = names_json(o.names, &w.names_len);
        /* The null endpoint answers exactly what kubequota answers for these bodies. */
        char *buf = NULL;
        size_t cap = 0;
        size_t n = build_request(&w, &buf, &cap);
        char *body = strstr(buf, "\r\n\r\n") + 4;
        int st = kq_extender_filter(&W.app, body, n - (size_t)(body - buf), &w.null_body, &w.null_len);
        free(buf);
        if (st != 200 || strstr(w.null_body, "\"Error\":\"\"}") == NULL) {
            fprintf(bench_err(), "kqbench: filter setup failed (%d): %.300s\n", st, w.null_body ? w.null_body : "");
            return 1;
        }
    } else {
        W.npool = 60000;
        W.pool = calloc(W.npool, sizeof(kq_pod_t));
        w.nbind = W.npool;
        w.bind_bodies = calloc(W.npool, sizeof(char *));
        kq_config_t *cfg = kq_config_holder_get(W.app.config);
        kq_pod_opts_t po = {.partition = kq_config_partition(cfg, "default"), .default_user = "nobody"};
        for (size_t i = 0; i < W.npool; i++) {
            int u = (int)((i * 7919) % (size_t)o.users);
            bench_user(u, o.groups, user, group, queue, sizeof(user));
            snprintf(uid, sizeof(uid), "b0000000-0000-4000-8000-%012zu", i);
            snprintf(name, sizeof(name), "job-%zu", i);
            bench_pod_t p = {.uid = uid, .name = name, .ns = "team-a", .user = user, .group = group, .queue = queue};
            char *js = bench_pod_json(&p);
            char err[256];
            if (kq_pod_parse_text(js, strlen(js), &po, &W.pool[i], err, sizeof(err)) != 0) {
                fprintf(bench_err(), "kqbench: pod setup failed: %s\n", err);
                return 1;
            }
            free(js);
            if (asprintf(&w.bind_bodies[i], "{\"PodName\":\"%s\",\"PodNamespace\":\"team-a\",\"PodUID\":\"%s\",\"Node\":"
                                             "\"ip-10-0-%zu-%zu.ec2.internal\"}",
                         name, uid, i % 20, i % 250 + 1) < 0)
                abort();
        }
        kq_config_unref(cfg);
        pool_observe(&W, 0, W.npool);
        w.null_body = strdup(BIND_OK);
        w.null_len = strlen(BIND_OK);
    }
    if (o.verb == VERB_FILTER) {
        /* The handler alone, no HTTP: what kubequota's own work costs per request (the
         * requests are built before the clock starts). */
        enum { NREQ = 64 };
        char *bufs[NREQ] = {0};
        size_t caps[NREQ] = {0}, lens[NREQ];
        for (int i = 0; i < NREQ; i++)
            lens[i] = build_request(&w, &bufs[i], &caps[i]);
        int calls = 0;
        double d0 = now_s();
        while (now_s() - d0 < (o.seconds < 1 ? o.seconds : 1.0)) {
            const char *buf = bufs[calls % NREQ];
            const char *body = strstr(buf, "\r\n\r\n") + 4;
            char *out = NULL;
            size_t olen = 0;
            (void)kq_extender_filter(&W.app, body, lens[calls % NREQ] - (size_t)(body - buf), &out, &olen);
            free(out);
            calls++;
        }
        double us = (now_s() - d0) / calls * 1e6;
        for (int i = 0; i < NREQ; i++)
            free(bufs[i]);
        char what[160], val[120], cmd[512];
        snprintf(what, sizeof(what), "  filter handler alone (kq_extender_filter, no HTTP)");
        snprintf(val, sizeof(val), "%.1f us/request", us);
        cmdline(&o, 1, cmd, sizeof(cmd));
        row_print(o.row ? o.row : "1", what, val, NULL, "(same run, 1 thread)");
    }
    t_setup = now_s() - t_setup;
    fprintf(bench_err(), "kqbench http: setup %.1fs (users %d, groups %d, kubequota port %d, null port %d)\n", t_setup,
            o.users, o.groups, W.kq_port, W.null_port);

    for (int ci = 0; ci < o.nconns; ci++) {
        int conns = o.conns[ci];
        double kr[16], kp50[16], kp99[16], kp999[16], nr[16], np50[16], np99[16], np999[16];
        unsigned long errs = 0;
        char first_error[256] = "";
        int reps = o.reps > 16 ? 16 : o.reps;
        for (int rep = 0; rep < reps; rep++) {
            for (int side = 0; side < 2; side++) {
                bool kq = (side + rep) % 2 == 0;
                if (o.verb == VERB_BIND && kq)
                    atomic_store(&w.seq, 0);
                run_result_t r = run_load(&w, kq ? W.kq_port : W.null_port, conns, o.seconds);
                if (o.verb == VERB_BIND && kq) {
                    unsigned long used = atomic_load(&w.seq);
                    if (used > W.npool)
                        fprintf(bench_err(), "kqbench: bind pool of %zu pods wrapped (%lu binds)\n", W.npool, used);
                    pool_reset(&W, used);
                }
                if (kq) {
                    kr[rep] = r.rps, kp50[rep] = r.p50, kp99[rep] = r.p99, kp999[rep] = r.p999;
                    errs += r.errors;
                    if (first_error[0] == '\0')
                        memcpy(first_error, r.first_error, sizeof(first_error));
                } else {
                    nr[rep] = r.rps, np50[rep] = r.p50, np99[rep] = r.p99, np999[rep] = r.p999;
                    errs += r.errors;
                }
                fprintf(bench_err(), "  %s %s names=%d conns=%d rep=%d: %.0f req/s p50 %.3f p99 %.3f p999 %.3f ms (n=%lu errors=%lu)\n",
                        kq ? "kubequota" : "null     ", o.verb == VERB_FILTER ? "filter" : "bind", o.names, conns, rep,
                        r.rps, r.p50, r.p99, r.p999, r.n, r.errors);
            }
        }
        double mk = median(kr, (size_t)reps), mn = median(nr, (size_t)reps);
        double k50 = median(kp50, (size_t)reps), k99 = median(kp99, (size_t)reps), k999 = median(kp999, (size_t)reps);
        double n50 = median(np50, (size_t)reps), n99 = median(np99, (size_t)reps), n999 = median(np999, (size_t)reps);
        char what[160], val[400], cmd[512], rowl[16];
        snprintf(rowl, sizeof(rowl), "%s", o.row ? o.row : (o.verb == VERB_FILTER ? "1" : "2"));
        snprintf(what, sizeof(what), "%s %s%d names, %d conns, %dk users/%dk groups",
                 o.verb == VERB_FILTER ? "filter" : "bind", "", o.names, conns, o.users / 1000, o.groups / 1000);
        if (o.verb == VERB_BIND)
            snprintf(what, sizeof(what), "bind (unique pods, local API responder), %d conns, %dk users", conns,
                     o.users / 1000);
        cmdline(&o, conns, cmd, sizeof(cmd));
        snprintf(val, sizeof(val), "%.0f/s p50 %.2f p99 %.2f p999 %.2f ms", mk, k50, k99, k999);
        const char *target = o.verb == VERB_FILTER ? (o.names >= 5000 ? ">=2000/s" : ">=10000/s") : "-";
        if (o.verb == VERB_FILTER && conns == 16)
            target = o.names >= 5000 ? ">=2000/s, p99<=1ms" : ">=10000/s, p99<=1ms";
        row_print(rowl, what, val, target, cmd);
        char what3[160];
        snprintf(what3, sizeof(what3), "  null endpoint, same load");
        snprintf(val, sizeof(val), "%.0f/s p50 %.2f p99 %.2f p999 %.2f ms", mn, n50, n99, n999);
        row_print("3", what3, val, NULL, "(same run)");
        snprintf(what3, sizeof(what3), "  kubequota/null ratio (time per request; p50; p99)");
        snprintf(val, sizeof(val), "%.2fx; %.2fx; %.2fx", mk > 0 ? mn / mk : 0, n50 > 0 ? k50 / n50 : 0,
                 n99 > 0 ? k99 / n99 : 0);
        row_print("3", what3, val, "<=1.5x", "(same run)");
        if (o.verb == VERB_BIND) {
            double fr[16];
            unsigned long ferr = 0;
            lat_t fl = {0};
            for (int rep = 0; rep < reps; rep++)
                fr[rep] = post_floor(&W, conns, o.seconds, &fl, &ferr);
            lat_sort(&fl);
            double mf = median(fr, (size_t)reps);
            snprintf(what3, sizeof(what3), "  binding POST alone (kq_kube_bind, same client and responder)");
            snprintf(val, sizeof(val), "%.0f/s p50 %.2f p99 %.2f ms%s", mf, lat_pct(&fl, 50) * 1e3,
                     lat_pct(&fl, 99) * 1e3, ferr ? " (ERRORS)" : "");
            row_print("2", what3, val, NULL, "(same run)");
            snprintf(what3, sizeof(what3), "  kubequota bind / binding POST alone (time per request)");
            snprintf(val, sizeof(val), "%.2fx", mk > 0 ? mf / mk : 0);
            row_print("2", what3, val, NULL, "(same run)");
            lat_free(&fl);
            errs += ferr;
        }
        if (errs > 0) {
            snprintf(val, sizeof(val), "%lu errors: %.200s", errs, first_error);
            row_print("!", "  ERRORS in this row", val, NULL, "");
        }
    }
    if (o.verb == VERB_BIND)
        fprintf(bench_err(), "kqbench http: binding POSTs answered: %lu\n", atomic_load(&binds_posted));
    world_stop(&W);
    return 0;
}
