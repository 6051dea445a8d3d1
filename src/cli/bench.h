/* Benchmarks of the strata command (bench_*.c). */
#ifndef STRATA_CLI_BENCH_H
#define STRATA_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>

/* Helpers of the benchmarks and the demo (bench_util.c). Time is
 * mono_sec() (common/clock.h), random numbers rng_next()
 * (common/rand.h). */

/* Sorts n doubles ascending (latencies, rounds: percentiles and medians). */
void bench_sort(double *v, size_t n);
/* The p-quantile (0 <= p <= 1) of n values sorted ascending; 0 when n is
 * 0. */
double bench_pct(const double *sorted, size_t n, double p);
/* Shuffles n elements of size bytes (at most 64) in place with rng. */
void bench_shuffle(void *base, size_t n, size_t size, uint64_t *rng);
/* Removes a directory tree (benchmark scratch space), best effort. */
void bench_rmtree(const char *path);
/* CPU seconds (user + system) process pid has used, from /proc, or -1;
 * *ppid (may be NULL): its parent. */
double bench_pid_cpu(long pid, long *ppid);
/* CPU seconds of every child of parent (whose command name is comm; NULL:
 * any) added up, from /proc, or -1 when /proc cannot be listed. */
double bench_children_cpu(long parent, const char *comm);
/* Option values of the benchmarks. cmd names the benchmark in the
 * message ("bench io"). Each returns 0 and *out, or 2 after printing
 * "CMD: OPT must be in ...". --seconds: 0 < S <= 600. */
int bench_opt_seconds(const char *cmd, const char *val, double *out);
/* An integer option opt ("--threads") in lo..hi. */
int bench_opt_int(const char *cmd, const char *opt, const char *val, int64_t lo, int64_t hi,
		  int64_t *out);
/* Runs the peer's own program argv (argv[0] looked up in PATH), its
 * stderr to ours, and returns its standard output (at most 1 MiB,
 * NUL-terminated, the caller frees) parsed as JSON, or NULL: the
 * program is missing, exits non-zero, or prints no JSON; *status is its
 * exit status (127: not found, -1: did not exit). Kills it after
 * timeout_s seconds. */
struct json_t;
struct json_t *bench_run_json(const char *const *argv, double timeout_s, int *status);

int bench_rpc(int argc, char **argv);
int bench_chunk(int argc, char **argv);
/* strata bench io (bench_io.c): libstrata file I/O and metadata vs a local dir. */
int bench_io(int argc, char **argv);
/* strata bench train (bench_train.c): MLPerf-Storage-style training I/O, AU. */
int bench_train(int argc, char **argv);
/* strata bench ckpt (bench_train.c): runs python/bench/bench_ckpt.py. */
int bench_ckpt(int argc, char **argv);
/* strata bench mem (bench_mem.c): the memory plane vs Redis, layer streaming. */
int bench_mem(int argc, char **argv);
/* strata bench compose (bench_compose.c): compose+release against the HTTP floor. */
int bench_compose(int argc, char **argv);
/* strata bench meta (bench_meta.c): libstrata metadata rates vs a local dir. */
int bench_meta(int argc, char **argv);

struct strata;

#endif
