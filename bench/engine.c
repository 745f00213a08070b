/* Rows 4 and 7 (engine part): the user group manager alone. Increase/decrease pairs per
 * second on 1 and 2 threads (random users, each pair one more pod of the user's running
 * application in its 3-level leaf queue, checked against the queue, user and group limits
 * at every level), and the heap used per tracked (user, queue).
 *
 * Memory: the heap in use (mallinfo2) before and after tracking every user in a first
 * leaf queue (this creates the user trackers), then in a second leaf of the same team and
 * a third leaf in another department. The per-(user, queue) figure includes everything
 * the ugm keeps for it: user tracker tree nodes, application entries, the group tracker's
 * share and the queue tree.
 */
#include "bench.h"

#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "kubequota/base/log.h"
#include "kubequota/engine/ugm.h"

typedef struct eng {
    kq_ugm_t *ugm;
    int users, groups;
    kq_resource_t req;
    volatile int go, stop;
} eng_t;

typedef struct worker {
    pthread_t th;
    eng_t *e;
    unsigned seed;
    unsigned long pairs, errors;
} worker_t;

static unsigned xs(unsigned *s)
{
    unsigned x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    eng_t *e = w->e;
    char user[64], group[64], queue[64], app[64], reason[512];
    while (!e->go)
        ;
    while (!e->stop) {
        for (int k = 0; k < 64; k++) {
            int i = (int)(xs(&w->seed) % (unsigned)e->users);
            bench_user(i, e->groups, user, group, queue, sizeof(user));
            snprintf(app, sizeof(app), "pre-%d", i);
            const char *gs[2] = {group, "all"};
            kq_user_t u = {.name = user, .groups = gs, .n_groups = 2};
            if (kq_ugm_increase(e->ugm, queue, app, &u, &e->req, reason, sizeof(reason), NULL) != 0 ||
                kq_ugm_decrease(e->ugm, queue, app, user, &e->req) != 0)
                w->errors++;
            w->pairs++;
        }
    }
    return NULL;
}

static double run_pairs(eng_t *e, int threads, double seconds, unsigned long *errors)
{
    worker_t *ws = calloc((size_t)threads, sizeof(*ws));
    e->go = 0;
    e->stop = 0;
    for (int t = 0; t < threads; t++) {
        ws[t] = (worker_t){.e = e, .seed = 0x9e3779b9u * (unsigned)(t + 1)};
        pthread_create(&ws[t].th, NULL, worker_main, &ws[t]);
    }
    double t0 = now_s();
    __atomic_store_n(&e->go, 1, __ATOMIC_SEQ_CST);
    struct timespec ts = {.tv_sec = (time_t)seconds, .tv_nsec = (long)((seconds - (double)(time_t)seconds) * 1e9)};
    nanosleep(&ts, NULL);
    __atomic_store_n(&e->stop, 1, __ATOMIC_SEQ_CST);
    unsigned long pairs = 0;
    for (int t = 0; t < threads; t++) {
        pthread_join(ws[t].th, NULL);
        pairs += ws[t].pairs;
        *errors += ws[t].errors;
    }
    double el = now_s() - t0;
    free(ws);
    return (double)pairs / el;
}

static void track_all(eng_t *e, int which)
{
    char user[64], group[64], queue[64], app[64], reason[512];
    for (int i = 0; i < e->users; i++) {
        bench_user(i, e->groups, user, group, queue, sizeof(user));
        /* queue: root.dD.tT.qQ; which 1 = next leaf of the same team, 2 = another department */
        int d, t, q;
        if (sscanf(queue, "root.d%d.t%d.q%d", &d, &t, &q) != 3)
            abort();
        if (which == 1)
            q = (q + 1) % 10;
        else if (which == 2)
            d = (d + 5) % 10;
        snprintf(queue, sizeof(queue), "root.d%d.t%d.q%d", d, t, q);
        snprintf(app, sizeof(app), "%s-%d", which == 0 ? "pre" : which == 1 ? "second" : "third", i);
        const char *gs[2] = {group, "all"};
        kq_user_t u = {.name = user, .groups = gs, .n_groups = 2};
        if (kq_ugm_increase(e->ugm, queue, app, &u, &e->req, reason, sizeof(reason), NULL) != 0) {
            fprintf(stderr, "kqbench engine: %s\n", reason);
            exit(1);
        }
    }
}

int bench_engine_main(int argc, char **argv)
{
    int users = 10000, groups = 1000, reps = 3;
    double seconds = 1.0;
    const char *row = "4";
    static const struct option lo[] = {
        {"users", required_argument, NULL, 'u'}, {"groups", required_argument, NULL, 'g'},
        {"seconds", required_argument, NULL, 's'}, {"reps", required_argument, NULL, 'r'},
        {"row", required_argument, NULL, 'R'}, {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'u': users = atoi(optarg); break;
        case 'g': groups = atoi(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'R': row = optarg; break;
        default: return 2;
        }
    }
    if (groups < 100 || groups % 100 != 0 || users < groups || reps < 1 || reps > 16) {
        fprintf(stderr, "kqbench engine: --groups a multiple of 100, --users >= --groups, 1 <= --reps <= 16\n");
        return 2;
    }
    eng_t e = {.users = users, .groups = groups};
    if (kq_resource_set(&e.req, "cpu", 2000) != 0 || kq_resource_set(&e.req, "memory", 8LL << 30) != 0)
        abort();
    kq_config_t *cfg = bench_config(users, groups);
    e.ugm = kq_ugm_new("default");
    if (e.ugm == NULL || kq_ugm_set_config(e.ugm, cfg) != 0)
        abort();

    size_t h0 = heap_in_use();
    long r0 = proc_kb("VmRSS");
    track_all(&e, 0);
    size_t h1 = heap_in_use();
    long r1 = proc_kb("VmRSS");
    track_all(&e, 1);
    size_t h2 = heap_in_use();
    track_all(&e, 2);
    size_t h3 = heap_in_use();
    long r3 = proc_kb("VmRSS");
    double first = (double)(h1 - h0) / users, second = (double)(h2 - h1) / users, third = (double)(h3 - h2) / users;
    double avg = (double)(h3 - h0) / (3.0 * users);
    fprintf(stderr, "kqbench engine: heap per (user, queue): first %.0f B, same team %.0f B, other department %.0f B; "
                    "RSS %ld -> %ld -> %ld kB\n",
            first, second, third, r0, r1, r3);

    char cmd[256], what[160], val[200];
    snprintf(cmd, sizeof(cmd), "%s engine --users %d --groups %d --seconds %g --reps %d", bench_self(), users, groups,
             seconds, reps);
    int tcount[2] = {1, 2};
    for (int ti = 0; ti < 2; ti++) {
        double r[16];
        unsigned long errors = 0;
        for (int k = 0; k < reps; k++) {
            r[k] = run_pairs(&e, tcount[ti], seconds, &errors);
            fprintf(stderr, "  engine users=%d threads=%d rep=%d: %.0f pairs/s\n", users, tcount[ti], k, r[k]);
        }
        double m = median(r, (size_t)reps);
        snprintf(what, sizeof(what), "engine increase+decrease pairs, %d thread%s, %dk users/%dk groups", tcount[ti],
                 tcount[ti] > 1 ? "s" : "", users / 1000, groups / 1000);
        snprintf(val, sizeof(val), "%.0f pairs/s (%.0f/s per thread, %.2f us/pair)%s", m, m / tcount[ti],
                 1e6 * tcount[ti] / m, errors ? " ERRORS" : "");
        row_print(row, what, val, NULL, cmd);
    }
    snprintf(what, sizeof(what), "heap per tracked (user, queue), %dk users x 3 queues", users / 1000);
    snprintf(val, sizeof(val), "%.0f B (1st %.0f, 2nd %.0f, 3rd %.0f)", avg, first, second, third);
    row_print(row, what, val, "<=1024 B", cmd);
    kq_ugm_free(e.ugm);
    kq_config_unref(cfg);
    return 0;
}
