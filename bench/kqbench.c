/* kqbench: kubequota's benchmark suite (issue 8). `make bench` runs `kqbench all`, which
 * runs every row in its own process and prints one table with the exact command of each
 * row; any row can be re-run alone with that command (from the repository root).
 *
 *   kqbench all [--quick]
 *   kqbench http   --verb filter|bind --names N --conns 1,16,64 --users U --groups G ...
 *   kqbench engine --users U --groups G ...
 *   kqbench watch  --mode ingest|list|cpu --n N ...
 *   kqbench qtree  --leaves-per-team N ...
 *   kqbench wide   --iters N ...
 *
 * Progress goes to stderr; kubequota's own log lines (the in-process server logs every
 * bind at info level, as in production) go to build/bench/kubequota.log so that logging
 * costs what it costs with a file or pipe behind it.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <stdbool.h>
#include <unistd.h>

#include "bench.h"
#include "common.h"

/* Runs one row in its own process; plain_malloc: without GLIBC_TUNABLES (glibc's default
 * allocator settings, as a binary started by hand runs), to compare with the tuning the
 * image and `make run` ship (see the Dockerfile). */
static int run_child(char *const argv[], bool plain_malloc)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        if (plain_malloc)
            unsetenv("GLIBC_TUNABLES");
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int all_main(int argc, char **argv)
{
    bool quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    const char *self = bench_self();
    const char *reps = quick ? "1" : "3";
    const char *secs = quick ? "0.5" : "1.5";
    char *const rows[][24] = {
        {(char *)self, "qtree", "--reps", (char *)reps, NULL},
        {(char *)self, "gating", "--pods", "10000", "--users", "1000", "--reps", (char *)reps, NULL},
        {(char *)self, "engine", "--users", "10000", "--groups", "1000", "--reps", (char *)reps, NULL},
        {(char *)self, "engine", "--users", "100000", "--groups", "10000", "--reps", (char *)reps, "--row", "7", NULL},
        {(char *)self, "watch", "--mode", "ingest", "--n", "100000", "--reps", (char *)reps, NULL},
        {(char *)self, "watch", "--mode", "list", "--n", "100000", "--reps", quick ? "1" : "2", NULL},
        {(char *)self, "watch", "--mode", "cpu", "--n", "100000", "--reps", quick ? "2" : "5", NULL},
        {(char *)self, "http", "--verb", "filter", "--names", "500", "--seconds", (char *)secs, "--reps", (char *)reps,
         "--threads", "72", NULL},
        {(char *)self, "http", "--verb", "filter", "--names", "5000", "--seconds", (char *)secs, "--reps",
         (char *)reps, "--threads", "72", NULL},
        {(char *)self, "http", "--verb", "bind", "--seconds", (char *)secs, "--reps", (char *)reps, "--threads", "72",
         NULL},
        {(char *)self, "http", "--verb", "filter", "--names", "500", "--users", "100000", "--groups", "10000",
         "--conns", "1,16", "--seconds", (char *)secs, "--reps", (char *)reps, "--threads", "72", "--row", "7", NULL},
        {(char *)self, "wide", "--reps", (char *)reps, "--iters", quick ? "20000" : "200000", NULL},
    };
    row_print_header();
    int failed = 0;
    size_t n = sizeof(rows) / sizeof(rows[0]);
    /* every row as deployed, then the watch rows (3 and 4) again with glibc's defaults when
     * a tuning is set, since they are the ones it changes most */
    bool tuned = getenv("GLIBC_TUNABLES") != NULL && getenv("GLIBC_TUNABLES")[0] != '\0';
    for (size_t k = 0; k < n + (tuned ? 2 : 0); k++) {
        size_t i = k < n ? k : 3 + (k - n);
        if (run_child(rows[i], k >= n) != 0) {
            fprintf(stderr, "kqbench: %s %s failed\n", rows[i][0], rows[i][1]);
            failed++;
        }
    }
    return failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    bench_set_self(argv[0]);
    const char *certs = getenv("KQ_BENCH_CERTS");
    if (certs != NULL)
        bench_set_certs(certs);
    if (argc < 2) {
        fprintf(stderr, "usage: %s all|http|engine|watch|qtree|wide|gating [options]\n", argv[0]);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "all") == 0)
        return all_main(argc - 1, argv + 1);
    if (strcmp(cmd, "http") == 0) {
        /* kubequota's log lines to a file; our progress stays on stderr */
        int keep = dup(2);
        int fd = open("build/bench/kubequota.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0 && keep >= 0) {
            dup2(fd, 2);
            close(fd);
            bench_set_err(fdopen(keep, "w"));
        }
        return bench_http_main(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "engine") == 0)
        return bench_engine_main(argc - 1, argv + 1);
    if (strcmp(cmd, "gating") == 0)
        return bench_gating_main(argc - 1, argv + 1);
    if (strcmp(cmd, "watch") == 0)
        return bench_watch_main(argc - 1, argv + 1);
    if (strcmp(cmd, "qtree") == 0)
        return bench_qtree_main(argc - 1, argv + 1);
    if (strcmp(cmd, "wide") == 0)
        return bench_wide_main(argc - 1, argv + 1);
    fprintf(stderr, "kqbench: unknown command %s\n", cmd);
    return 2;
}
