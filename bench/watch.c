/* Row 5: the pod informer. A forked child plays the API server (civetweb over TLS, all
 * responses rendered before the clock starts) so that its memory and CPU are not the
 * client's; the parent runs kubequota's real client (kq_kube_watch_start) and, for the
 * ledger rows, the real informer (kq_sync_start: kq_pod_parse + ledger observe/remove).
 *
 *   --mode ingest  LIST answers an empty list at resourceVersion 1; the WATCH from 1
 *                  streams a recorded sequence of 100,000 pod events (chunked, as the API
 *                  server does) and then one marker pod; a resumed watch just waits.
 *                  The sequence: blocks of 500 pods, each pod ADDED (pending), MODIFIED
 *                  (bound to a node), MODIFIED (running, container statuses), then
 *                  MODIFIED (Succeeded) or DELETED: 4 events per pod, about 2.5 KB each.
 *                  Measured: events/s from the end of the LIST to the marker, with a null
 *                  handler (the client's own cost: curl, line splitting, decoding the
 *                  pod's kq_pod_fields into a document, as the pod informer does) and
 *                  with the ledger.
 *   --mode cpu     the same sequence through the informer's steps without the network (see
 *                  cpu_stages): where a watch event's CPU goes.
 *   --mode list    LIST of 100,000 pods (60% bound and running, 40% pending) in pages of
 *                  the client's default size (500); time from start to the end of the list
 *                  (app->ready) and the client process's peak RSS (VmHWM, reset first).
 */
#include "bench.h"

#include <curl/curl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "tlsserv.h"
#include "kubequota/app.h"
#include "kubequota/kube/kube.h"
#include "kubequota/control/ledger.h"
#include "kubequota/base/log.h"
#include "kubequota/kube/pod.h"
#include "kubequota/serve/server.h"
#include "kubequota/control/sync.h"
#include "kubequota/engine/ugm.h"

#define MARKER_UID "ffffffff-ffff-4fff-8fff-ffffffffffff"

typedef struct feed {
    int mode; /* 0 ingest, 1 list */
    int n;    /* events or pods */
    char **item;
    size_t *len;
    int page;
} feed_t;

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* ------------------------------------------------------------------ the child: API server */

static int child_handler(struct mg_connection *conn, void *ud)
{
    feed_t *f = ud;
    const struct mg_request_info *ri = mg_get_request_info(conn);
    const char *q = ri->query_string ? ri->query_string : "";
    if (strstr(q, "watch=1") != NULL || strstr(q, "watch=true") != NULL) {
        bool first = f->mode == 0 && strstr(q, "resourceVersion=1&") != NULL;
        mg_printf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
        if (first) {
            /* about 64 KB per chunk */
            char *buf = malloc(1 << 20);
            size_t o = 0;
            for (int i = 0; i < f->n; i++) {
                if (o + f->len[i] > (64u << 10) && o > 0) {
                    if (mg_send_chunk(conn, buf, (unsigned)o) < 0)
                        break;
                    o = 0;
                }
                memcpy(buf + o, f->item[i], f->len[i]);
                o += f->len[i];
            }
            if (o > 0)
                mg_send_chunk(conn, buf, (unsigned)o);
            free(buf);
        }
        /* Keep the watch open with a bookmark a second (the API server sends them too)
         * until the client goes away or the parent kills this process. */
        static const char bm[] = "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"apiVersion\":\"v1\","
                                 "\"metadata\":{\"resourceVersion\":\"1\"}}}\n";
        for (int i = 0; i < 600; i++) {
            sleep_ms(1000);
            if (mg_send_chunk(conn, bm, sizeof(bm) - 1) < 0)
                break;
        }
        return 200;
    }
    /* LIST. Only pods: the other informers (namespaces) get an empty list, as in a
     * cluster where they are few (answering them with the pods made the namespace
     * informer list 150,000 objects too, tens of MB that no real cluster costs). */
    const char *path = ri->local_uri ? ri->local_uri : "";
    if (strcmp(path, "/api/v1/pods") != 0) {
        static const char empty[] = "{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"},"
                                    "\"items\":[]}";
        mg_printf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                  sizeof(empty) - 1, empty);
        return 200;
    }
    int from = 0;
    const char *c = strstr(q, "continue=");
    if (c != NULL)
        from = atoi(c + 9);
    char meta[256];
    int n = f->mode == 1 ? f->n : 0;
    int to = from + f->page < n ? from + f->page : n;
    if (to < n)
        snprintf(meta, sizeof(meta),
                 "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\",\"continue\":\"%d\","
                 "\"remainingItemCount\":%d},\"items\":[",
                 to, n - to);
    else
        snprintf(meta, sizeof(meta),
                 "{\"kind\":\"PodList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"1\"},\"items\":[");
    size_t total = strlen(meta) + 2;
    for (int i = from; i < to; i++)
        total += f->len[i] + (i > from);
    mg_printf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n", total);
    mg_write(conn, meta, strlen(meta));
    for (int i = from; i < to; i++) {
        if (i > from)
            mg_write(conn, ",", 1);
        mg_write(conn, f->item[i], f->len[i]);
    }
    mg_write(conn, "]}", 2);
    return 200;
}

static void make_pod(int i, int state, char *rv, bench_pod_t *p, char *uid, char *name, char *user, char *group,
                     char *queue, char *node)
{
    bench_user(i % 10000, 1000, user, group, queue, 64);
    snprintf(uid, 64, "0000%04x-0000-4000-8000-%012d", i % 0xffff, i);
    snprintf(name, 64, "job-%d", i);
    snprintf(node, 64, "ip-10-0-%d-%d.ec2.internal", (i / 250) % 20, i % 250 + 1);
    static const char *phases[] = {"Pending", "Pending", "Running", "Succeeded", "Running"};
    *p = (bench_pod_t){.uid = uid, .name = name, .ns = "team-a", .user = user, .group = group, .queue = queue,
                       .node = state >= 1 ? node : NULL, .phase = phases[state], .rv = rv, .deleting = state == 4};
}

static char *watch_event(const char *type, const bench_pod_t *p, size_t *len)
{
    char *obj = bench_pod_json(p);
    char *ev = NULL;
    int n = asprintf(&ev, "{\"type\":\"%s\",\"object\":%s}\n", type, obj);
    free(obj);
    if (n < 0)
        abort();
    *len = (size_t)n;
    return ev;
}

/* The recorded sequence (see the top): n/4 pods in blocks of 500, four events each, with
 * room for one more event (the marker) at the end. */
static void ingest_events(int n, feed_t *f)
{
    char uid[64], name[64], user[64], group[64], queue[64], node[64], rv[32];
    bench_pod_t p;
    int pods = n / 4;
    f->item = calloc((size_t)pods * 4 + 1, sizeof(char *));
    f->len = calloc((size_t)pods * 4 + 1, sizeof(size_t));
    int e = 0;
    for (int b = 0; b < pods; b += 500) {
        int bn = pods - b < 500 ? pods - b : 500;
        for (int step = 0; step < 4; step++)
            for (int k = 0; k < bn; k++) {
                int i = b + k;
                snprintf(rv, sizeof(rv), "%d", 2 + e);
                int state = step == 3 ? (i % 2 ? 3 : 4) : step;
                make_pod(i, state, rv, &p, uid, name, user, group, queue, node);
                const char *type = step == 0 ? "ADDED" : (step == 3 && state == 4) ? "DELETED" : "MODIFIED";
                f->item[e] = watch_event(type, &p, &f->len[e]);
                e++;
            }
    }
    f->n = e;
}

static pid_t start_child(int mode, int n, int *port)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid > 0) {
        close(pfd[1]);
        if (read(pfd[0], port, sizeof(*port)) != (ssize_t)sizeof(*port))
            *port = -1;
        close(pfd[0]);
        return pid;
    }
    close(pfd[0]);
    feed_t *f = calloc(1, sizeof(*f));
    f->mode = mode;
    f->page = 500;
    char uid[64], name[64], user[64], group[64], queue[64], node[64], rv[32];
    bench_pod_t p;
    if (mode == 0) {
        ingest_events(n, f);
        snprintf(rv, sizeof(rv), "%d", 2 + f->n);
        make_pod(99999999, 2, rv, &p, uid, name, user, group, queue, node);
        p.uid = MARKER_UID;
        f->item[f->n] = watch_event("ADDED", &p, &f->len[f->n]);
        f->n++;
    } else {
        f->n = n;
        f->item = calloc((size_t)n, sizeof(char *));
        f->len = calloc((size_t)n, sizeof(size_t));
        for (int i = 0; i < n; i++) {
            snprintf(rv, sizeof(rv), "%d", 1000 + i);
            make_pod(i, i % 5 < 3 ? 2 : 0, rv, &p, uid, name, user, group, queue, node);
            f->item[i] = bench_pod_json(&p);
            f->len[i] = strlen(f->item[i]);
        }
    }
    mg_init_library(MG_FEATURES_TLS);
    char cert[512], key[512];
    snprintf(cert, sizeof(cert), "%s/apiserver.crt", bench_certs());
    snprintf(key, sizeof(key), "%s/apiserver.key", bench_certs());
    int myport = -1;
    struct mg_context *ctx = tls_server_start(cert, key, 64, child_handler, f, &myport);
    if (write(pfd[1], &myport, sizeof(myport)) < 0)
        _exit(1);
    close(pfd[1]);
    if (ctx == NULL)
        _exit(1);
    for (;;)
        pause();
}

/* ------------------------------------------------------------------ the parent: client */

typedef struct counter {
    atomic_long objects;
    atomic_bool listed;
    long target;
    double t_listed, t_done;
} counter_t;

static void null_list_begin(void *ud) { (void)ud; }
static void null_list_end(void *ud)
{
    counter_t *c = ud;
    c->t_listed = now_s();
    atomic_store(&c->listed, true);
}
static void null_object(void *ud, int type, const kq_jnode_t *obj)
{
    (void)type;
    (void)obj;
    counter_t *c = ud;
    if (atomic_fetch_add(&c->objects, 1) + 1 == c->target)
        c->t_done = now_s();
}

static kq_kube_t *client(int port, kq_kube_conf_t *kc)
{
    char server[64], ca[512];
    snprintf(server, sizeof(server), "https://127.0.0.1:%d", port);
    snprintf(ca, sizeof(ca), "%s/ca.crt", bench_certs());
    kc->server = strdup(server);
    kc->ca_file = strdup(ca);
    return kq_kube_new(kc);
}

typedef struct app_world {
    kq_config_t *cfg;
    kq_app_t app;
    kq_kube_conf_t kc;
} app_world_t;

static void app_start(app_world_t *A, int port)
{
    A->cfg = bench_config(10000, 1000);
    A->app = (kq_app_t){.partition = "default", .scheduler_name = BENCH_SCHED, .default_user = "nobody"};
    atomic_init(&A->app.ready, false);
    A->app.config = kq_config_holder_new(A->cfg);
    A->app.ugm = kq_ugm_new("default");
    if (kq_ugm_set_config(A->app.ugm, A->cfg) != 0)
        abort();
    A->app.ledger = kq_ledger_new(A->app.ugm, BENCH_SCHED);
    A->kc = (kq_kube_conf_t){0};
    A->app.kube = port > 0 ? client(port, &A->kc) : NULL; /* none for --mode cpu */
}

static void app_stop(app_world_t *A)
{
    kq_ledger_free(A->app.ledger);
    kq_kube_free(A->app.kube);
    kq_ugm_free(A->app.ugm);
    kq_config_holder_free(A->app.config);
    kq_config_unref(A->cfg);
    kq_kube_conf_free(&A->kc);
}

/* --mode cpu: the informer's three steps per event, called directly on the recorded
 * sequence in one thread, without curl, TLS or the network: decoding the line
 * (kq_jdoc_parse with the pod filter), reading the pod (kq_pod_parse), and the ledger
 * (kq_ledger_observe, or kq_ledger_remove for DELETED), as src/control/sync.c does them. Each
 * stage is timed as a whole pass over the sequence (best of reps, a fresh ledger each
 * pass; the passes of the three stages alternate); the cost of a step is the difference
 * between the best passes. The lines are read from memory (100,000 distinct lines, not
 * in cache), where the informer reads each one just after it arrived. */
static int cpu_stages(int n, int reps)
{
    feed_t f = {0};
    ingest_events(n, &f);
    static const kq_jfilter_t env[] = {{"type", NULL}, {"object", kq_pod_fields}, {NULL, NULL}};
    double best[3] = {1e9, 1e9, 1e9};
    for (int r = 0; r < reps; r++) {     /* (stages interleaved: a slow moment of the machine */
        for (int stage = 0; stage < 3; stage++) { /* hits all three, not one) */
            app_world_t A;
            app_start(&A, -1);
            kq_jdoc_t doc = {0}, scratch = {0};
            kq_pod_opts_t po = {.partition = kq_config_partition(A.cfg, "default"), .default_user = "nobody",
                                .scratch = &scratch};
            double t0 = now_s();
            for (int i = 0; i < f.n; i++) {
                if (kq_jdoc_parse(&doc, f.item[i], f.len[i], env, NULL) != 0)
                    abort();
                if (stage == 0)
                    continue;
                const kq_jnode_t *root = kq_jdoc_root(&doc), *obj = kq_jnode_get(root, "object");
                if (strcmp(kq_jnode_string(kq_jnode_get(root, "type")), "DELETED") == 0) {
                    if (stage == 2)
                        kq_ledger_remove(A.app.ledger,
                                         kq_jnode_string(kq_jnode_get(kq_jnode_get(obj, "metadata"), "uid")));
                    continue;
                }
                kq_pod_t pod;
                char err[256];
                if (kq_pod_parse(obj, &po, &pod, err, sizeof(err)) != 0) {
                    fprintf(stderr, "kqbench watch: %s\n", err);
                    abort();
                }
                if (stage == 2)
                    kq_ledger_observe(A.app.ledger, &pod);
                kq_pod_clear(&pod);
            }
            double us = (now_s() - t0) / f.n * 1e6;
            if (us < best[stage])
                best[stage] = us;
            kq_jdoc_free(&doc);
            kq_jdoc_free(&scratch);
            app_stop(&A);
        }
    }
    char what[160], val[200], cmd[256];
    snprintf(what, sizeof(what), "  CPU per event, no network: decode; +pod parse; +ledger");
    snprintf(val, sizeof(val), "%.2f; +%.2f; +%.2f us (%.2f us)", best[0], best[1] - best[0], best[2] - best[1],
             best[2]);
    snprintf(cmd, sizeof(cmd), "%s watch --mode cpu --n %d --reps %d", bench_self(), n, reps);
    row_print("5", what, val, NULL, cmd);
    for (int i = 0; i < f.n; i++)
        free(f.item[i]);
    free(f.item);
    free(f.len);
    return 0;
}

int bench_watch_main(int argc, char **argv)
{
    int mode = 0, n = 100000, reps = 3;
    static const struct option lo[] = {
        {"mode", required_argument, NULL, 'm'}, {"n", required_argument, NULL, 'n'},
        {"reps", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'm': mode = strcmp(optarg, "list") == 0 ? 1 : strcmp(optarg, "cpu") == 0 ? 2 : 0; break;
        case 'n': n = atoi(optarg); break;
        case 'r': reps = atoi(optarg); break;
        default: return 2;
        }
    }
    if (reps < 1 || reps > 16 || n < 4)
        return 2;
    if (mode == 2)
        return cpu_stages(n, reps);
    int port = -1;
    double t_gen = now_s();
    pid_t child = start_child(mode, n, &port); /* before any thread of ours starts */
    if (child < 0 || port <= 0) {
        fprintf(stderr, "kqbench watch: the API responder did not start\n");
        return 1;
    }
    fprintf(stderr, "kqbench watch: responder ready in %.1fs (port %d)\n", now_s() - t_gen, port);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    char cmd[256], what[160], val[200];
    snprintf(cmd, sizeof(cmd), "%s watch --mode %s --n %d --reps %d", bench_self(), mode ? "list" : "ingest", n, reps);

    if (mode == 0) {
        long events = (long)(n / 4) * 4 + 1;
        double rn[16], rl[16];
        for (int k = 0; k < reps; k++) {
            /* null handler: the client's own cost (decoding as the pod informer does) */
            counter_t cnt = {.target = events};
            kq_kube_conf_t kc = {0};
            kq_kube_t *kube = client(port, &kc);
            kq_watch_handler_t h = {.list_begin = null_list_begin, .doc = null_object, .list_end = null_list_end,
                                    .ud = &cnt, .keep = kq_pod_fields};
            kq_watch_t *w = kq_kube_watch_start(kube, "/api/v1/pods", NULL, &h);
            while (atomic_load(&cnt.objects) < events)
                sleep_ms(1);
            rn[k] = (double)events / (cnt.t_done - cnt.t_listed);
            kq_kube_watch_stop(w);
            kq_kube_free(kube);
            kq_kube_conf_free(&kc);

            /* the real informer into the ledger */
            app_world_t A = {0};
            app_start(&A, port);
            kq_sync_t *s = kq_sync_start(&A.app);
            while (!atomic_load(&A.app.ready))
                sleep_ms(0);
            double t0 = now_s();
            while (!kq_ledger_is_counted(A.app.ledger, MARKER_UID))
                usleep(200);
            double t1 = now_s();
            rl[k] = (double)events / (t1 - t0);
            size_t counted = 0, known = kq_ledger_size(A.app.ledger, &counted);
            fprintf(stderr, "  watch ingest rep=%d: null %.0f events/s, ledger %.0f events/s (ledger: %zu known, %zu "
                            "counted, bad pods %lu)\n",
                    k, rn[k], rl[k], known, counted, kq_sync_bad_pods(s));
            kq_sync_stop(s);
            app_stop(&A);
        }
        snprintf(what, sizeof(what), "watch ingest, %ld pod events, null handler (client cost)", events);
        snprintf(val, sizeof(val), "%.0f events/s", median(rn, (size_t)reps));
        row_print("5", what, val, NULL, cmd);
        snprintf(what, sizeof(what), "watch ingest, %ld pod events, into the ledger (kq_sync)", events);
        snprintf(val, sizeof(val), "%.0f events/s", median(rl, (size_t)reps));
        row_print("5", what, val, ">=50000/s", cmd);
    } else {
        double rt[16], rr[16], rg[16];
        for (int k = 0; k < reps; k++) {
            app_world_t A = {0};
            app_start(&A, port);
            long base = proc_kb("VmRSS");
            reset_peak_rss();
            double t0 = now_s();
            kq_sync_t *s = kq_sync_start(&A.app);
            while (!atomic_load(&A.app.ready))
                usleep(500);
            rt[k] = now_s() - t0;
            long peak = proc_kb("VmHWM");
            rr[k] = (double)peak / 1024.0;
            rg[k] = (double)(peak - base) / 1024.0;
            size_t counted = 0, known = kq_ledger_size(A.app.ledger, &counted);
            fprintf(stderr, "  list rep=%d: %.2fs, peak RSS %.0f MB (+%.0f MB over %ld kB before), %zu known, %zu "
                            "counted\n",
                    k, rt[k], rr[k], rg[k], base, known, counted);
            kq_sync_stop(s);
            app_stop(&A);
        }
        snprintf(what, sizeof(what), "LIST of %d pods in pages of 500 into the ledger", n);
        snprintf(val, sizeof(val), "%.2f s, peak RSS %.0f MB (+%.0f MB)", median(rt, (size_t)reps),
                 median(rr, (size_t)reps), median(rg, (size_t)reps));
        row_print("5", what, val, "<=5 s, <=500 MB", cmd);
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    curl_global_cleanup();
    return 0;
}
