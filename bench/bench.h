/* kqbench: the benchmark programs behind `make bench` (one binary, one subcommand per
 * group of rows). Each prints rows of the results table (common.h) on stdout and its
 * progress on stderr. Benchmarks are never tests: nothing here asserts on time. */
#ifndef KQBENCH_BENCH_H
#define KQBENCH_BENCH_H

int bench_http_main(int argc, char **argv);   /* rows 1, 2, 3, 7 (filter) */
int bench_engine_main(int argc, char **argv); /* rows 4, 7 (engine) */
int bench_watch_main(int argc, char **argv);  /* row 5 */
int bench_qtree_main(int argc, char **argv);  /* row 6 */
int bench_wide_main(int argc, char **argv);   /* row 8 */
int bench_gating_main(int argc, char **argv); /* row 9 */

#endif
