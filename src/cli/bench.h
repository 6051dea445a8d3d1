/* Benchmarks of the strata command (bench_*.c). */
#ifndef STRATA_CLI_BENCH_H
#define STRATA_CLI_BENCH_H

#include <stddef.h>

double bench_now(void);
/* Sorts n doubles ascending (latencies, rounds: percentiles and medians). */
void bench_sort(double *v, size_t n);
/* Removes a directory tree (benchmark scratch space). */
void bench_rmtree(const char *path);

int bench_rpc(int argc, char **argv);
int bench_chunk(int argc, char **argv);
/* strata bench io (bench_io.c): libstrata file I/O and metadata vs a local dir. */
int bench_io(int argc, char **argv);
/* strata bench train (bench_train.c): MLPerf-Storage-style training I/O, AU. */
int bench_train(int argc, char **argv);
/* strata bench ckpt (bench_train.c): runs python3 -m strata.bench_ckpt. */
int bench_ckpt(int argc, char **argv);
/* strata bench mem (bench_mem.c): the memory plane vs Redis, layer streaming. */
int bench_mem(int argc, char **argv);

struct strata;

#endif
