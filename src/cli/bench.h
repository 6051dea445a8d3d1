/* Benchmarks of the strata command (bench_*.c). */
#ifndef STRATA_CLI_BENCH_H
#define STRATA_CLI_BENCH_H

double bench_now(void);
/* Removes a directory tree (benchmark scratch space). */
void bench_rmtree(const char *path);

int bench_rpc(int argc, char **argv);
int bench_chunk(int argc, char **argv);

#endif
