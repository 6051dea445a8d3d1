/*
 * strata bench meta: the metadata rate of libstrata against a local
 * directory of the same filesystem, in the same run. N threads (default
 * 4), each in its own directory, run in turn:
 *
 *   create      open(O_CREAT|O_EXCL) of a new empty file + close
 *   stat        stat of each file created
 *   open+read   open, a read of its 1,024-byte content (written untimed
 *               after the stat phase) and close
 *   unlink      each file
 *
 * The cluster is one the benchmark starts (3 storage daemons, R=3), or the
 * one --mgmt names (with the token of the environment). Each row prints
 * ops/s of both, the ratio strata / local, and (for a cluster it started)
 * the CPU time the meta daemon spent per strata op, and the CPU time this
 * process (the client: its calling threads and libstrata's) spent per
 * strata op: figures that the load of a shared machine moves far less
 * than a rate.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "strata/strata.h"

#define BM_MAX_THREADS 64
#define BM_MAX_FILES 1000000	/* per thread */
#define BM_READ_SIZE 1024

enum bm_op { BM_CREATE, BM_STAT, BM_READ, BM_UNLINK, BM_FILL };

struct bm {
	struct strata *s;
	char root[PATH_MAX];		/* scratch space, removed at the end */
	char cdir[PATH_MAX];		/* the cluster we started ("": --mgmt) */
	char ldir[PATH_MAX];		/* the local baseline */
	char sdir[64];			/* the cluster's directory */
	const char *mgmt;		/* --mgmt, or NULL */
	char flags[512];		/* daemon flags of the cluster we start */
	long meta_pid;			/* the meta daemon we started (0: unknown) */
	int threads;
	double seconds;
	uint64_t files;			/* per thread, 0: as many as fit the time */
	/* Files created by each thread: [0] strata, [1] local. */
	uint64_t created[2][BM_MAX_THREADS];
	int fails;
};

struct bm_arg {
	struct bm *b;
	int idx;
	bool cluster;
	enum bm_op op;
	double deadline;
	uint64_t ops;
	int err;
	pthread_t thr;
};

static volatile sig_atomic_t bm_stop;

static void bm_on_signal(int sig)
{
	(void)sig;
	bm_stop = 1;
}

static void bm_path(const struct bm *b, bool cluster, int t, uint64_t i, char *out, size_t len)
{
	snprintf(out, len, "%s/t%02d/f%07llu", cluster ? b->sdir : b->ldir, t,
		 (unsigned long long)i);
}

static int one_cluster(struct bm *b, enum bm_op op, const char *path, uint8_t *buf)
{
	struct strata_file *f;
	struct strata_stat st;
	ssize_t n;
	int rc;

	switch (op) {
	case BM_CREATE:
		rc = strata_open(b->s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_EXCL, 0644,
				 &f);
		return rc ? rc : strata_close(f);
	case BM_STAT:
		rc = strata_stat(b->s, path, &st);
		return rc ? rc : st.size == 0 ? 0 : -EIO;
	case BM_FILL:
	case BM_READ:
		rc = strata_open(b->s, path, op == BM_FILL ? STRATA_O_WRONLY : STRATA_O_RDONLY, 0,
				 &f);
		if (rc)
			return rc;
		n = op == BM_FILL ? strata_pwrite(f, buf, BM_READ_SIZE, 0) :
				    strata_pread(f, buf, BM_READ_SIZE, 0);
		rc = strata_close(f);
		if (n != BM_READ_SIZE)
			return n < 0 ? (int)n : -EIO;
		return rc;
	case BM_UNLINK:
		return strata_unlink(b->s, path);
	}
	return -EINVAL;
}

static int one_local(enum bm_op op, const char *path, uint8_t *buf)
{
	struct stat st;
	ssize_t n;
	int fd, rc = 0;

	switch (op) {
	case BM_CREATE:
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		return close(fd) < 0 ? -errno : 0;
	case BM_STAT:
		if (stat(path, &st) < 0)
			return -errno;
		return st.st_size == 0 ? 0 : -EIO;
	case BM_FILL:
	case BM_READ:
		fd = open(path, (op == BM_FILL ? O_WRONLY : O_RDONLY) | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		n = op == BM_FILL ? pwrite(fd, buf, BM_READ_SIZE, 0) : pread(fd, buf, BM_READ_SIZE, 0);
		if (n != BM_READ_SIZE)
			rc = n < 0 ? -errno : -EIO;
		if (close(fd) < 0 && !rc)
			rc = -errno;
		return rc;
	case BM_UNLINK:
		return unlink(path) < 0 ? -errno : 0;
	}
	return -EINVAL;
}

static void *bm_main(void *arg)
{
	struct bm_arg *a = arg;
	struct bm *b = a->b;
	uint64_t *created = &b->created[a->cluster ? 0 : 1][a->idx];
	uint64_t n = a->op == BM_CREATE ? (b->files ? b->files : BM_MAX_FILES) : *created;
	uint8_t buf[BM_READ_SIZE];
	char path[PATH_MAX];

	memset(buf, 0x5a, sizeof(buf));
	for (uint64_t i = 0; i < n && !bm_stop; i++) {
		if (a->op == BM_CREATE && !b->files && mono_sec() >= a->deadline)
			break;
		bm_path(b, a->cluster, a->idx, i, path, sizeof(path));
		a->err = a->cluster ? one_cluster(b, a->op, path, buf) : one_local(a->op, path, buf);
		if (a->err)
			break;
		a->ops++;
		if (a->op == BM_CREATE)
			*created = a->ops;
	}
	return NULL;
}

/* Runs op on every thread; returns operations per second, or 0 with *err. */
static double bm_run(struct bm *b, bool cluster, enum bm_op op, int *err)
{
	struct bm_arg a[BM_MAX_THREADS];
	uint64_t ops = 0;
	double t0 = mono_sec();
	int started = 0;

	*err = 0;
	for (int i = 0; i < b->threads; i++) {
		a[i] = (struct bm_arg){ .b = b, .idx = i, .cluster = cluster, .op = op,
					.deadline = t0 + b->seconds };
		if (pthread_create(&a[i].thr, NULL, bm_main, &a[i])) {
			*err = -EAGAIN;
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(a[i].thr, NULL);
		ops += a[i].ops;
		if (a[i].err && !*err)
			*err = a[i].err;
	}
	t0 = mono_sec() - t0;
	return *err ? 0 : (double)ops / t0;
}

/* CPU seconds (user + system) the meta daemon has used, or -1. Its pid is
 * the third line of DATA/stratad.addr of node 1 (the control node). */
static double meta_cpu(const struct bm *b)
{
	char path[PATH_MAX + 32], buf[1024];
	unsigned long long ut, st;
	const char *p;
	FILE *fp;
	size_t n;

	if (!b->meta_pid)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", b->meta_pid);
	fp = fopen(path, "r");
	if (!fp)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, fp);
	fclose(fp);
	buf[n] = '\0';
	/* After "(comm)": state is field 3; utime and stime are 14 and 15. */
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return -1;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds (user + system) this process has used. */
static double self_cpu(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return -1;
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static long find_meta_pid(const struct bm *b)
{
	char path[PATH_MAX + 32], l1[128], l2[64], l3[64];
	long pid = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/node1/stratad.addr", b->cdir);
	fp = fopen(path, "r");
	if (!fp)
		return 0;
	if (fgets(l1, sizeof(l1), fp) && fgets(l2, sizeof(l2), fp) && fgets(l3, sizeof(l3), fp)) {
		char *end;

		pid = strtol(l3, &end, 10);
		if (end == l3 || (*end && *end != '\n') || pid <= 0)
			pid = 0;
	}
	fclose(fp);
	return pid;
}

/* cpu_us: meta daemon CPU microseconds per strata op, ccpu_us: this
 * process's (< 0: unknown). */
static void bm_row(struct bm *b, const char *name, double c, int cerr, double l, int lerr,
		   double cpu_us, double ccpu_us)
{
	char cpu[32] = "-", ccpu[32] = "-";

	if (cpu_us >= 0)
		snprintf(cpu, sizeof(cpu), "%.1f", cpu_us);
	if (ccpu_us >= 0)
		snprintf(ccpu, sizeof(ccpu), "%.1f", ccpu_us);
	if (cerr || lerr) {
		printf("%-34s failed: %s%s\n", name, cerr ? "strata: " : "local: ",
		       cerr ? strata_strerror(cerr) : strerror(-lerr));
		b->fails++;
	} else {
		printf("%-34s %12.0f %12.0f %8.3f %12s %14s\n", name, c, l, l > 0 ? c / l : 0, cpu,
		       ccpu);
	}
	fflush(stdout);
}

static int make_dirs(struct bm *b)
{
	char path[PATH_MAX];
	int rc;

	rc = strata_mkdir(b->s, b->sdir, 0755);
	for (int i = 0; i < b->threads && !rc; i++) {
		snprintf(path, sizeof(path), "%s/t%02d", b->sdir, i);
		rc = strata_mkdir(b->s, path, 0755);
		if (rc) {
			cli_err("bench meta: cannot create '%s' in the cluster: %s", path,
				strata_strerror(rc));
			return rc;
		}
		snprintf(path, sizeof(path), "%s/t%02d", b->ldir, i);
		if (mkdir(path, 0755) < 0) {
			rc = -errno;
			cli_err("bench meta: cannot create '%s': %s", path, strerror(errno));
		}
	}
	if (rc)
		cli_err("bench meta: cannot create '%s' in the cluster: %s", b->sdir,
			strata_strerror(rc));
	return rc;
}

static void run_rows(struct bm *b)
{
	static const struct {
		enum bm_op op;
		const char *name;
	} rows[] = {
		{ BM_CREATE, "create (open O_CREAT + close)" },
		{ BM_STAT, "stat" },
		{ BM_FILL, NULL },
		{ BM_READ, "open + read 1 KiB + close" },
		{ BM_UNLINK, "unlink" },
	};

	for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]) && !bm_stop; r++) {
		char name[64];
		double c, l;
		int ce, le;

		double cpu0 = meta_cpu(b), ccpu0 = self_cpu(), t0 = mono_sec(), cpu1, ccpu1;
		double cpu_us = -1, ccpu_us = -1, ops;

		c = bm_run(b, true, rows[r].op, &ce);
		cpu1 = meta_cpu(b);
		ccpu1 = self_cpu();
		ops = c * (mono_sec() - t0);
		if (cpu0 >= 0 && cpu1 >= 0 && c > 0)
			cpu_us = (cpu1 - cpu0) * 1e6 / ops;
		if (ccpu0 >= 0 && ccpu1 >= 0 && c > 0)
			ccpu_us = (ccpu1 - ccpu0) * 1e6 / ops;
		l = bm_run(b, false, rows[r].op, &le);
		if (!rows[r].name) {	/* untimed: content for the read row */
			if (ce || le)
				bm_row(b, "write 1 KiB into each file", c, ce, l, le, -1, -1);
			if (ce || le)
				return;
			continue;
		}
		snprintf(name, sizeof(name), "%s, %d thr", rows[r].name, b->threads);
		bm_row(b, name, c, ce, l, le, cpu_us, ccpu_us);
		if (ce || le)
			return;
	}
}

static int parse_args(int argc, char **argv, struct bm *b)
{
	int64_t v;

	for (int i = 1; i < argc; i += 2) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: strata bench meta [--seconds S] [--threads N] [--files F] [--mgmt ADDR]\n"
			       "                         [--daemon-flags FLAGS]\n\n"
			       "Metadata rates of libstrata beside the same workload on a local directory:\n"
			       "create (open O_CREAT|O_EXCL + close of an empty file), stat, open + read\n"
			       "1 KiB + close, unlink; N threads (default 4) each in its own directory.\n"
			       "Creates run for S seconds (default 3) or F files per thread; the later\n"
			       "rows go over the files created. The cluster is a local one the benchmark\n"
			       "starts (3 storage daemons, R=3; FLAGS: more daemon flags, e.g.\n"
			       "'--meta.group_commit=false'), or the one at --mgmt ADDR.\n");
			return 1;
		}
		if (strcmp(argv[i], "--seconds") == 0 && val) {
			if (bench_opt_seconds("bench meta", val, &b->seconds))
				return 2;
		} else if (strcmp(argv[i], "--threads") == 0 && val) {
			if (bench_opt_int("bench meta", "--threads", val, 1, BM_MAX_THREADS, &v))
				return 2;
			b->threads = (int)v;
		} else if (strcmp(argv[i], "--files") == 0 && val) {
			if (bench_opt_int("bench meta", "--files", val, 1, BM_MAX_FILES, &v))
				return 2;
			b->files = (uint64_t)v;
		} else if (strcmp(argv[i], "--mgmt") == 0 && val) {
			b->mgmt = val;
		} else if (strcmp(argv[i], "--daemon-flags") == 0 && val) {
			int n = snprintf(b->flags, sizeof(b->flags), "--node.log_level=warn %s", val);

			if (n < 0 || (size_t)n >= sizeof(b->flags)) {
				cli_err("bench meta: --daemon-flags is too long");
				return 2;
			}
		} else {
			cli_err("bench meta: unexpected argument '%s' (see strata bench meta --help)",
				argv[i]);
			return 2;
		}
	}
	return 0;
}

int bench_meta(int argc, char **argv)
{
	struct bm *b = calloc(1, sizeof(*b));
	struct sigaction sa = { .sa_handler = bm_on_signal };
	char mgmt[64];
	int rc, exit_code = 1;
	bool up = false;

	if (!b) {
		cli_err("bench meta: out of memory");
		return 1;
	}
	b->seconds = 3;
	b->threads = 4;
	snprintf(b->flags, sizeof(b->flags), "--node.log_level=warn");
	rc = parse_args(argc, argv, b);
	if (rc) {
		free(b);
		return rc == 1 ? 0 : rc;	/* 1: --help was printed */
	}
	snprintf(b->root, sizeof(b->root), "/tmp/strata-bench-meta-XXXXXX");
	if (!mkdtemp(b->root)) {
		cli_err("bench meta: cannot create a temp dir: %s", strerror(errno));
		free(b);
		return 1;
	}
	snprintf(b->ldir, sizeof(b->ldir), "%s/local", b->root);
	/* Unique per run: --mgmt may name a cluster used before. */
	snprintf(b->sdir, sizeof(b->sdir), "/bench-meta-%ld-%lld", (long)getpid(),
		 (long long)(mono_sec() * 1000));
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (mkdir(b->ldir, 0755) < 0) {
		cli_err("bench meta: cannot create '%s': %s", b->ldir, strerror(errno));
		goto out;
	}
	if (b->mgmt) {
		snprintf(mgmt, sizeof(mgmt), "%s", b->mgmt);
		rc = cli_connect(mgmt, NULL, &b->s);
	} else {
		snprintf(b->cdir, sizeof(b->cdir), "%s/cluster", b->root);
		if (local_cluster_up(b->cdir, 3, 0, b->flags, mgmt, sizeof(mgmt)))
			goto out;
		up = true;
		b->meta_pid = find_meta_pid(b);
		rc = cli_connect(mgmt, b->cdir, &b->s);
	}
	if (rc) {
		cli_err("bench meta: cannot connect to the cluster at '%s': %s", mgmt,
			strata_strerror(rc));
		goto out;
	}
	if (make_dirs(b))
		goto out;
	printf("strata bench meta: libstrata against %s %s, %d thread(s), %s\n",
	       b->mgmt ? "the cluster at" : "a local cluster (3 storage daemons, R=3) at", mgmt,
	       b->threads, b->files ? "a fixed file count" : "creates timed");
	printf("baseline: the same calls on '%s' (same filesystem)\n", b->ldir);
	printf("meta us/op: CPU time of the meta daemon (user + system) per strata op, from /proc (a cluster it started)\n");
	printf("client us/op: CPU time of this process (user + system) per strata op, from getrusage\n");
	printf("%-34s %12s %12s %8s %12s %14s\n", "test (ops/s)", "strata", "local", "ratio",
	       "meta us/op", "client us/op");
	run_rows(b);
	exit_code = b->fails || bm_stop ? 1 : 0;
out:
	strata_disconnect(b->s);
	if (up && local_cluster_down(b->cdir))
		exit_code = 1;
	bench_rmtree(b->root);
	free(b);
	return exit_code;
}
