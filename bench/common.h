/* kqbench shared helpers: timing, latency percentiles, memory readings, the synthetic
 * cluster (users, groups, queues.yaml, pod JSON) every benchmark row uses, and the table
 * printer.
 *
 * The synthetic cluster, for U users and G groups (G a multiple of 100):
 *   queues   root.d<0..9>.t<0..9>.q<0..9>: 10 departments x 10 teams x 10 leaf queues
 *            (3-level paths below root, 1,000 leaves);
 *   groups   g<0..G-1>; group g belongs to team g / (G/100); every team queue has one
 *            named group limit listing its G/100 groups;
 *   users    u<i> is in group g<i % G> (and "all"), runs in leaf q<i % 10> of its group's
 *            team; a "*" user limit sits on root and on every department.
 * Limits are large: the benchmarks measure the cost of checking, not denials.
 */
#ifndef KQBENCH_COMMON_H
#define KQBENCH_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kubequota/engine/config.h"

#define BENCH_SCHED "kubequota-scheduler"

double now_s(void);

typedef struct lat {
    double *v;
    size_t n, cap;
} lat_t;
void lat_add(lat_t *l, double secs);
void lat_merge(lat_t *into, const lat_t *from);
void lat_sort(lat_t *l);
double lat_pct(const lat_t *l, double p); /* sorted; seconds */
void lat_free(lat_t *l);

double median(double *v, size_t n); /* sorts v */

long proc_kb(const char *field);    /* "VmRSS", "VmHWM" from /proc/self/status, or -1 */
void reset_peak_rss(void);          /* /proc/self/clear_refs 5 */
size_t heap_in_use(void);           /* mallinfo2().uordblks + hblkhd */

/* The synthetic cluster. */
char *bench_queues_yaml(int users, int groups);
kq_config_t *bench_config(int users, int groups); /* aborts on error */
void bench_user(int i, int groups, char *user, char *group, char *queue, size_t len);

/* A realistic Pod object (about 2.5 KB of JSON, modelled on the extender-filter fixture):
 * owner ReplicaSet, identity annotation, queue label, one container and one init
 * container with requests and limits, status. node NULL = unassigned (Pending). */
typedef struct bench_pod {
    const char *uid, *name, *ns, *user, *group, *queue, *node, *phase, *rv;
    bool deleting;
} bench_pod_t;
char *bench_pod_json(const bench_pod_t *p); /* malloc'ed */

/* Results table. */
void row_print_header(void);
void row_print(const char *row, const char *what, const char *value, const char *target, const char *cmd);

#include <stdio.h>
FILE *bench_err(void);          /* progress output (stderr unless redirected) */
void bench_set_err(FILE *f);

const char *bench_self(void); /* argv[0] as given, for the commands in the table */
void bench_set_self(const char *argv0);
const char *bench_certs(void); /* folder with ca.crt server.crt server.key apiserver.crt apiserver.key */
void bench_set_certs(const char *dir);

#endif
