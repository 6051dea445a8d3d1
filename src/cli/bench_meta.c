/*
 * strata bench meta: the metadata rate of libstrata against a local
 * directory of the same filesystem, in the same run. N threads (default
 * 4), each in its own directory, run in turn:
 *
 *   create      open(O_CREAT|O_EXCL) of a new empty file + close
 *   stat        stat of each file created
 *   stat again  the same stats once more: what a metadata cache serves
 *               (--meta-cache MS; off by default, as libstrata's)
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

#include <jansson.h>

#include "bench.h"
#include "cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "strata/strata.h"

#define BM_MAX_THREADS 64
#define BM_MAX_FILES 1000000	/* per thread */
#define BM_READ_SIZE 1024
#define BM_MAX_SERVERS 8	/* --servers: meta servers of one configuration */
#define BM_MAX_CONFIGS 8	/* --servers: entries of the list */

enum bm_op { BM_CREATE, BM_STAT, BM_READ, BM_UNLINK, BM_FILL, BM_RENAME, BM_READDIR };

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
	int32_t meta_cache_ms;		/* --meta-cache: libstrata's option (0: off) */
	double seconds;
	uint64_t files;			/* per thread, 0: as many as fit the time */
	/* Files created by each thread: [0] strata, [1] local. */
	uint64_t created[2][BM_MAX_THREADS];
	int fails;
	/* --servers (bench_meta_pg below): the meta server counts of the
	 * PostgreSQL configurations (nconfigs 0: the default benchmark); one
	 * handle per thread (hs), the meta daemons' pids and the PostgreSQL
	 * server's (postmaster) of the configuration running now. */
	int nconfigs;
	int configs[BM_MAX_CONFIGS];
	struct strata *hs[BM_MAX_THREADS];
	bool renamed;			/* the files carry their new names */
	int nmeta;
	long meta_pids[BM_MAX_SERVERS];
	uint32_t meta_ids[BM_MAX_SERVERS];
	long pg_pid;
	char pg_log[PATH_MAX];		/* its server.log */
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

/* File i of thread t: fNNN, or rNNN once renamed (renamed: the new name). */
static void bm_path(const struct bm *b, bool cluster, int t, uint64_t i, bool renamed, char *out,
		    size_t len)
{
	snprintf(out, len, "%s/t%02d/%c%07llu", cluster ? b->sdir : b->ldir, t,
		 renamed ? 'r' : 'f', (unsigned long long)i);
}

/* Lists the directory of thread t from its start to its end, again until
 * the deadline (at least once), adding the entries read to *ops; each
 * listing must return the n files created. */
static int list_dir(struct strata *s, const struct bm *b, int t, uint64_t n, double deadline,
		    uint64_t *ops)
{
	struct strata_dirent ent;
	struct strata_dir *d;
	char path[PATH_MAX];
	uint64_t got;
	int rc;

	snprintf(path, sizeof(path), "%s/t%02d", b->sdir, t);
	do {
		rc = strata_opendir(s, path, &d);
		if (rc)
			return rc;
		got = 0;
		while ((rc = strata_readdir(d, &ent)) == 1)
			got++;
		strata_closedir(d);
		if (rc)
			return rc;
		if (got != n)
			return -EIO;
		*ops += got;
	} while (mono_sec() < deadline && !bm_stop);
	return 0;
}

static int one_cluster(struct strata *s, enum bm_op op, const char *path, uint8_t *buf)
{
	struct strata_file *f;
	struct strata_stat st;
	ssize_t n;
	int rc;

	switch (op) {
	case BM_CREATE:
		rc = strata_open(s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_EXCL, 0644,
				 &f);
		return rc ? rc : strata_close(f);
	case BM_STAT:
		rc = strata_stat(s, path, &st);
		return rc ? rc : st.size == 0 ? 0 : -EIO;
	case BM_FILL:
	case BM_READ:
		/* The fill writes each file's whole content, as a program
		 * writing a small file does (O_TRUNC): kept inline when the
		 * service allows (docs/namespace.md, "Inline data"). */
		rc = strata_open(s, path, op == BM_FILL ? STRATA_O_WRONLY | STRATA_O_TRUNC :
				 STRATA_O_RDONLY, 0, &f);
		if (rc)
			return rc;
		n = op == BM_FILL ? strata_pwrite(f, buf, BM_READ_SIZE, 0) :
				    strata_pread(f, buf, BM_READ_SIZE, 0);
		rc = strata_close(f);
		if (n != BM_READ_SIZE)
			return n < 0 ? (int)n : -EIO;
		return rc;
	case BM_UNLINK:
		return strata_unlink(s, path);
	case BM_RENAME:
	case BM_READDIR:
		break;	/* bm_main's */
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
		fd = open(path, (op == BM_FILL ? O_WRONLY | O_TRUNC : O_RDONLY) | O_CLOEXEC);
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
	case BM_RENAME:
	case BM_READDIR:
		break;	/* --servers only: no local baseline */
	}
	return -EINVAL;
}

static void *bm_main(void *arg)
{
	struct bm_arg *a = arg;
	struct bm *b = a->b;
	uint64_t *created = &b->created[a->cluster ? 0 : 1][a->idx];
	uint64_t n = a->op == BM_CREATE ? (b->files ? b->files : BM_MAX_FILES) : *created;
	struct strata *s = b->hs[a->idx] ? b->hs[a->idx] : b->s;
	uint8_t buf[BM_READ_SIZE];
	char path[PATH_MAX], to[PATH_MAX];

	memset(buf, 0x5a, sizeof(buf));
	if (a->op == BM_READDIR) {
		a->err = list_dir(s, b, a->idx, n, a->deadline, &a->ops);
		return NULL;
	}
	for (uint64_t i = 0; i < n && !bm_stop; i++) {
		if (a->op == BM_CREATE && !b->files && mono_sec() >= a->deadline)
			break;
		bm_path(b, a->cluster, a->idx, i, b->renamed, path, sizeof(path));
		if (a->op == BM_RENAME) {
			bm_path(b, a->cluster, a->idx, i, true, to, sizeof(to));
			a->err = strata_rename(s, path, to, STRATA_RENAME_NOREPLACE);
		} else {
			a->err = a->cluster ? one_cluster(s, a->op, path, buf) :
					      one_local(a->op, path, buf);
		}
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

/* CPU seconds the meta daemon has used, or -1. Its pid is the third line
 * of DATA/stratad.addr of node 1 (the control node). */
static double meta_cpu(const struct bm *b)
{
	return b->meta_pid ? bench_pid_cpu(b->meta_pid, NULL) : -1;
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

	struct strata *s = b->hs[0] ? b->hs[0] : b->s;

	rc = strata_mkdir(s, b->sdir, 0755);
	for (int i = 0; i < b->threads && !rc; i++) {
		snprintf(path, sizeof(path), "%s/t%02d", b->sdir, i);
		rc = strata_mkdir(s, path, 0755);
		if (rc) {
			cli_err("bench meta: cannot create '%s' in the cluster: %s", path,
				strata_strerror(rc));
			return rc;
		}
		if (b->nconfigs)
			continue;	/* no local baseline */
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
		{ BM_STAT, "stat again" },
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

/* ---- --servers: SQLite beside 1, 2, 3 ... meta servers on PostgreSQL ---- */

#define BP_FILES 500	/* --servers: files per thread unless --files */
#define BP_THREADS 6	/* --servers: threads unless --threads */

enum { BP_CREATE, BP_STAT, BP_RENAME, BP_READDIR, BP_UNLINK, BP_ROWS };

static const struct {
	enum bm_op op;
	const char *name;
} bp_rows[BP_ROWS] = {
	{ BM_CREATE, "create" },
	{ BM_STAT, "stat" },
	{ BM_RENAME, "rename (same dir)" },
	{ BM_READDIR, "readdir (entries)" },
	{ BM_UNLINK, "unlink" },
};

/* One configuration's figures: ops/s (0 with err), CPU us per op of the
 * meta daemons, of PostgreSQL's processes and of this process (< 0:
 * unknown), and each meta daemon's share of the meta CPU of the run. */
struct bp_res {
	double ops[BP_ROWS], meta_us[BP_ROWS], db_us[BP_ROWS], cli_us[BP_ROWS];
	long conflicts[BP_ROWS];	/* transactions PostgreSQL failed (retried) */
	int err[BP_ROWS];
	double share[BM_MAX_SERVERS];
	bool ran;
};

/* CPU seconds of the PostgreSQL server: the postmaster and its children
 * (backends, writers), from /proc; -1 when there is none. */
static double db_cpu(const struct bm *b)
{
	double sum, kids;

	if (!b->pg_pid)
		return -1;
	sum = bench_pid_cpu(b->pg_pid, NULL);
	kids = bench_children_cpu(b->pg_pid, NULL);
	return sum < 0 || kids < 0 ? -1 : sum + kids;
}

/* Transactions PostgreSQL has failed with a serialization failure or a
 * deadlock (the meta server retries them: -EBUSY), counted in its log;
 * -1 when there is none. */
static long db_conflicts(const struct bm *b)
{
	char line[1024];
	long n = 0;
	FILE *fp;

	if (!b->pg_log[0] || !(fp = fopen(b->pg_log, "r")))
		return -1;
	while (fgets(line, sizeof(line), fp))
		n += strstr(line, "ERROR:  could not serialize access") ||
		     strstr(line, "ERROR:  deadlock detected");
	fclose(fp);
	return n;
}

/* The sum of the meta daemons' CPU seconds, each one's into each[]. */
static double metas_cpu(const struct bm *b, double *each)
{
	double sum = 0;

	for (int i = 0; i < b->nmeta; i++) {
		each[i] = bench_pid_cpu(b->meta_pids[i], NULL);
		if (each[i] < 0)
			return -1;
		sum += each[i];
	}
	return sum;
}

/* The meta daemons (id, pid) and the PostgreSQL server's pid of the
 * cluster in b->cdir, from its cluster.json and postmaster.pid. 0 or 1
 * (reported). */
static int find_servers(struct bm *b)
{
	char path[PATH_MAX + 32];
	json_error_t jerr;
	json_t *j, *nodes, *n;
	const char *pgdir;
	size_t i;

	snprintf(path, sizeof(path), "%s/cluster.json", b->cdir);
	j = json_load_file(path, 0, &jerr);
	if (!j) {
		cli_err("bench meta: cannot read '%s': %s", path, jerr.text);
		return 1;
	}
	b->nmeta = 0;
	b->pg_pid = 0;
	nodes = json_object_get(j, "nodes");
	json_array_foreach(nodes, i, n) {
		const char *svc = json_string_value(json_object_get(n, "services"));

		if (!svc || !strstr(svc, "meta") || b->nmeta >= BM_MAX_SERVERS)
			continue;
		b->meta_ids[b->nmeta] = (uint32_t)json_integer_value(json_object_get(n, "id"));
		b->meta_pids[b->nmeta++] = (long)json_integer_value(json_object_get(n, "pid"));
	}
	pgdir = json_string_value(json_object_get(json_object_get(j, "postgresql"), "dir"));
	if (pgdir) {
		char line[32] = "";
		FILE *fp;

		snprintf(b->pg_log, sizeof(b->pg_log), "%s/server.log", pgdir);
		snprintf(path, sizeof(path), "%s/data/postmaster.pid", pgdir);
		fp = fopen(path, "r");
		if (fp && fgets(line, sizeof(line), fp))
			b->pg_pid = strtol(line, NULL, 10);
		if (fp)
			fclose(fp);
	}
	json_decref(j);
	if (!b->nmeta) {
		cli_err("bench meta: '%s/cluster.json' lists no meta server", b->cdir);
		return 1;
	}
	return 0;
}

/* One handle per thread, thread t's calling meta server t mod N (by
 * STRATA_META_NODE, read by strata_connect: set here before any of our
 * threads runs). A libstrata handle keeps to the one server it picked;
 * threads sharing one handle would all call it. 0 or 1 (reported). */
static int connect_spread(struct bm *b, const char *mgmt)
{
	const char *was = getenv("STRATA_META_NODE");
	char keep[32] = "", id[16];
	int rc = 0;

	if (was)
		snprintf(keep, sizeof(keep), "%s", was);
	for (int t = 0; t < b->threads && !rc; t++) {
		snprintf(id, sizeof(id), "%u", b->meta_ids[t % b->nmeta]);
		setenv("STRATA_META_NODE", id, 1);
		rc = cli_connect(mgmt, b->cdir, &b->hs[t]);
		if (rc)
			cli_err("bench meta: cannot connect to the cluster at '%s': %s", mgmt,
				strata_strerror(rc));
	}
	if (was)
		setenv("STRATA_META_NODE", keep, 1);
	else
		unsetenv("STRATA_META_NODE");
	return rc ? 1 : 0;
}

static void disconnect_all(struct bm *b)
{
	for (int t = 0; t < BM_MAX_THREADS; t++) {
		strata_disconnect(b->hs[t]);
		b->hs[t] = NULL;
	}
}

/* The rows on the configuration up now; figures into r. */
static void bp_rows_run(struct bm *b, struct bp_res *r)
{
	double each0[BM_MAX_SERVERS], each1[BM_MAX_SERVERS], all0, all1;

	memset(b->created[0], 0, sizeof(b->created[0]));
	b->renamed = false;
	all0 = metas_cpu(b, each0);
	for (int k = 0; k < BP_ROWS && !bm_stop; k++) {
		double m0 = metas_cpu(b, each1), d0 = db_cpu(b), c0 = self_cpu(), t0 = mono_sec();
		long x0 = db_conflicts(b), x1;
		double m1, d1, c1, ops;

		r->ops[k] = bm_run(b, true, bp_rows[k].op, &r->err[k]);
		m1 = metas_cpu(b, each1);
		d1 = db_cpu(b);
		c1 = self_cpu();
		x1 = db_conflicts(b);
		r->conflicts[k] = x0 >= 0 && x1 >= 0 ? x1 - x0 : -1;
		ops = r->ops[k] * (mono_sec() - t0);
		r->meta_us[k] = m0 >= 0 && m1 >= 0 && ops > 0 ? (m1 - m0) * 1e6 / ops : -1;
		r->db_us[k] = d0 >= 0 && d1 >= 0 && ops > 0 ? (d1 - d0) * 1e6 / ops : -1;
		r->cli_us[k] = c0 >= 0 && c1 >= 0 && ops > 0 ? (c1 - c0) * 1e6 / ops : -1;
		if (bp_rows[k].op == BM_RENAME && !r->err[k])
			b->renamed = true;
		if (r->err[k]) {
			printf("  %s failed: %s%s\n", bp_rows[k].name, strata_strerror(r->err[k]),
			       r->err[k] == -EBUSY ? " (the meta server ran out of retries of a"
			       " transaction the database kept failing; see the retried table)" : "");
			b->fails++;
			return;
		}
		printf("  %-20s %10.0f ops/s   meta %.1f us/op%s", bp_rows[k].name, r->ops[k],
		       r->meta_us[k], b->pg_pid ? "" : "\n");
		if (b->pg_pid)
			printf("   postgresql %.1f us/op   %ld transactions retried\n", r->db_us[k],
			       r->conflicts[k]);
		fflush(stdout);
	}
	all1 = metas_cpu(b, each1);
	for (int i = 0; i < b->nmeta && all0 >= 0 && all1 > all0; i++)
		r->share[i] = (each1[i] - each0[i]) / (all1 - all0);
	r->ran = true;
}

/* Configuration c: 0 SQLite, then PostgreSQL with configs[c - 1] meta
 * servers. Starts its cluster, runs the rows, stops it. */
static void bp_config(struct bm *b, int c, struct bp_res *r)
{
	int nserv = c ? b->configs[c - 1] : 1, rc;
	char mgmt[512];

	snprintf(b->cdir, sizeof(b->cdir), "%s/cluster%d", b->root, c);
	printf("%s: %d meta server(s) on %s%s\n", c ? "postgresql" : "sqlite", nserv,
	       c ? "one local PostgreSQL" : "SQLite (the baseline)",
	       b->threads % nserv ? " (threads not a multiple of the servers: uneven load)" : "");
	fflush(stdout);
	/* One storage daemon (R=1): the rows write no data; the cores go to
	 * the meta servers and the database. */
	rc = c ? local_cluster_up_pg(b->cdir, 1, 1, nserv, b->flags, mgmt, sizeof(mgmt)) :
		 local_cluster_up(b->cdir, 1, 1, b->flags, mgmt, sizeof(mgmt));
	if (rc) {
		b->fails++;
		return;
	}
	if (!find_servers(b) && !connect_spread(b, mgmt) && !make_dirs(b))
		bp_rows_run(b, r);
	else
		b->fails++;
	disconnect_all(b);
	if (local_cluster_down(b->cdir))
		b->fails++;
	b->nmeta = 0;
	b->pg_pid = 0;
	b->pg_log[0] = '\0';
}

static void bp_label(const struct bm *b, int c, char *out, size_t len)
{
	if (c)
		snprintf(out, len, "pg x%d", b->configs[c - 1]);
	else
		snprintf(out, len, "sqlite");
}

/* A precision and a value for "%.*f": tenths below 10 us (readdir's). */
#define US_PREC(v) ((v) < 10 ? 1 : 0), (v)

/* A table's head: title, then the configurations from `from` on, each
 * width wide, then note. */
static void bp_head(const struct bm *b, const char *title, int from, int width,
		    const char *note)
{
	char lab[32];

	printf("\n%-20s", title);
	for (int c = from; c <= b->nconfigs; c++) {
		bp_label(b, c, lab, sizeof(lab));
		printf(" %*s", width, lab);
	}
	printf("%s\n", note);
}

/* The tables: ops/s and the ratio to SQLite, then CPU per op. */
static void bp_report(const struct bm *b, const struct bp_res *res)
{
	int n = b->nconfigs + 1;
	char lab[32];

	printf("\n%-20s %10s", "ops/s", "sqlite");
	for (int c = 1; c < n; c++) {
		bp_label(b, c, lab, sizeof(lab));
		printf(" %10s %7s", lab, "ratio");
	}
	printf("\n");
	for (int k = 0; k < BP_ROWS; k++) {
		printf("%-20s", bp_rows[k].name);
		for (int c = 0; c < n; c++) {
			const struct bp_res *r = &res[c];
			bool ok = r->ops[k] > 0 && !r->err[k];

			if (r->err[k])
				printf(" %10s%s", "failed", c ? "        " : "");
			else if (!ok)
				printf(" %10s%s", "-", c ? "        " : "");
			else if (!c)
				printf(" %10.0f", r->ops[k]);
			else if (res[0].ops[k] > 0)
				printf(" %10.0f %7.3f", r->ops[k], r->ops[k] / res[0].ops[k]);
			else
				printf(" %10.0f %7s", r->ops[k], "-");
		}
		printf("\n");
	}
	bp_head(b, "server us/op", 0, 14, "   (CPU per op: meta daemons + PostgreSQL; client)");
	for (int k = 0; k < BP_ROWS; k++) {
		printf("%-20s", bp_rows[k].name);
		for (int c = 0; c < n; c++) {
			const struct bp_res *r = &res[c];
			char cell[48];

			if (!r->ran)
				snprintf(cell, sizeof(cell), "-");
			else if (c)
				snprintf(cell, sizeof(cell), "%.*f+%.*f; %.*f", US_PREC(r->meta_us[k]),
					 US_PREC(r->db_us[k]), US_PREC(r->cli_us[k]));
			else
				snprintf(cell, sizeof(cell), "%.*f; %.*f", US_PREC(r->meta_us[k]),
					 US_PREC(r->cli_us[k]));
			printf(" %14s", cell);
		}
		printf("\n");
	}
	bp_head(b, "retried per 1000 ops", 1, 10,
		"   (PostgreSQL: serialization failures and deadlocks, from its log)");
	for (int k = 0; k < BP_ROWS; k++) {
		printf("%-20s", bp_rows[k].name);
		for (int c = 1; c < n; c++) {
			const struct bp_res *r = &res[c];
			double ops = r->ops[k] > 0 ? (double)b->files * b->threads : 0;

			/* Readdir's reads (REPEATABLE READ, read-only) never fail so. */
			if (!r->ran || r->conflicts[k] < 0 || !ops || bp_rows[k].op == BM_READDIR)
				printf(" %10s", "-");
			else
				printf(" %10.1f", (double)r->conflicts[k] * 1000 / ops);
		}
		printf("\n");
	}
	for (int c = 1; c < n; c++) {
		if (!res[c].ran || b->configs[c - 1] < 2)
			continue;
		bp_label(b, c, lab, sizeof(lab));
		printf("%s: meta CPU per server", lab);
		for (int i = 0; i < b->configs[c - 1] && i < BM_MAX_SERVERS; i++)
			printf(" %.0f%%", res[c].share[i] * 100);
		printf("\n");
	}
}

static int bench_meta_pg(struct bm *b)
{
	struct bp_res res[BM_MAX_CONFIGS + 1];

	memset(res, 0, sizeof(res));
	printf("strata bench meta --servers: %d thread(s), each its own libstrata handle calling"
	       " meta server (thread mod N); 1 storage daemon; %llu files per thread\n",
	       b->threads, (unsigned long long)b->files);
	printf("rows: create (open O_CREAT + close), stat, rename to a new name in the same"
	       " directory, readdir (whole directory, entries/s), unlink; ratio: / sqlite\n");
	fflush(stdout);
	for (int c = 0; c <= b->nconfigs && !bm_stop; c++)
		bp_config(b, c, &res[c]);
	bp_report(b, res);
	return b->fails || bm_stop ? 1 : 0;
}

/* --servers LIST: meta server counts, comma-separated, each 1..8,
 * distinct. 0 or 2 (reported). */
static int parse_servers(struct bm *b, const char *val)
{
	const char *p = val;

	b->nconfigs = 0;
	while (*p) {
		char num[8];
		size_t len = strcspn(p, ",");
		int64_t v;

		if (!len || len >= sizeof(num) || b->nconfigs >= BM_MAX_CONFIGS)
			goto bad;
		memcpy(num, p, len);
		num[len] = '\0';
		if (parse_i64(num, &v) || v < 1 || v > BM_MAX_SERVERS)
			goto bad;
		for (int i = 0; i < b->nconfigs; i++)
			if (b->configs[i] == v) {
				cli_err("bench meta: --servers '%s' names %lld twice", val,
					(long long)v);
				return 2;
			}
		b->configs[b->nconfigs++] = (int)v;
		p += len;
		if (*p == ',' && !*++p)
			goto bad;
	}
	if (b->nconfigs)
		return 0;
bad:
	cli_err("bench meta: --servers '%s' is not a list of meta server counts (1..%d, at most"
		" %d, comma-separated, e.g. 1,2,3)", val, BM_MAX_SERVERS, BM_MAX_CONFIGS);
	return 2;
}

static int parse_args(int argc, char **argv, struct bm *b)
{
	bool threads_given = false;
	int64_t v;

	for (int i = 1; i < argc; i += 2) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: strata bench meta [--seconds S] [--threads N] [--files F] [--mgmt ADDR]\n"
			       "                         [--daemon-flags FLAGS] [--servers LIST]\n"
			       "                         [--meta-cache MS]\n\n"
			       "Metadata rates of libstrata beside the same workload on a local directory:\n"
			       "create (open O_CREAT|O_EXCL + close of an empty file), stat, the same\n"
			       "stats again, open + read 1 KiB + close, unlink; N threads (default 4)\n"
			       "each in its own directory. --meta-cache MS: libstrata's metadata cache\n"
			       "with that timeout (default 0: off, whatever $STRATA_META_CACHE_MS says).\n"
			       "Creates run for S seconds (default 3) or F files per thread; the later\n"
			       "rows go over the files created. The cluster is a local one the benchmark\n"
			       "starts (3 storage daemons, R=3; FLAGS: more daemon flags, e.g.\n"
			       "'--meta.group_commit=false'), or the one at --mgmt ADDR.\n\n"
			       "--servers LIST (e.g. 1,2,3): instead, in one run, a local cluster with\n"
			       "its namespace on SQLite (one meta server: the baseline), then one per\n"
			       "count in LIST with that many meta servers on a local PostgreSQL; rows\n"
			       "create, stat, rename, readdir (entries/s), unlink; each thread its own\n"
			       "libstrata handle, calling meta server (thread mod N); ops/s beside\n"
			       "SQLite's as a ratio, and the CPU per op of the meta daemons, PostgreSQL\n"
			       "and this process. F defaults to %d there (every configuration works\n"
			       "on as many files), N to %d; S is the readdir row's time.\n", BP_FILES,
			       BP_THREADS);
			return 1;
		}
		if (strcmp(argv[i], "--seconds") == 0 && val) {
			if (bench_opt_seconds("bench meta", val, &b->seconds))
				return 2;
		} else if (strcmp(argv[i], "--threads") == 0 && val) {
			if (bench_opt_int("bench meta", "--threads", val, 1, BM_MAX_THREADS, &v))
				return 2;
			b->threads = (int)v;
			threads_given = true;
		} else if (strcmp(argv[i], "--files") == 0 && val) {
			if (bench_opt_int("bench meta", "--files", val, 1, BM_MAX_FILES, &v))
				return 2;
			b->files = (uint64_t)v;
		} else if (strcmp(argv[i], "--mgmt") == 0 && val) {
			b->mgmt = val;
		} else if (strcmp(argv[i], "--meta-cache") == 0 && val) {
			if (bench_opt_int("bench meta", "--meta-cache", val, 0, 600000, &v))
				return 2;
			b->meta_cache_ms = (int32_t)v;
		} else if (strcmp(argv[i], "--servers") == 0 && val) {
			if (parse_servers(b, val))
				return 2;
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
	if (b->nconfigs && b->mgmt) {
		cli_err("bench meta: --servers starts its own clusters; it does not take --mgmt");
		return 2;
	}
	if (b->nconfigs && b->meta_cache_ms) {
		cli_err("bench meta: --meta-cache is for the default benchmark, not --servers");
		return 2;
	}
	/* Every configuration works on as many files: directories of one size. */
	if (b->nconfigs && !b->files)
		b->files = BP_FILES;
	/* Threads a multiple of 1, 2 and 3: each server gets as many. */
	if (b->nconfigs && !threads_given)
		b->threads = BP_THREADS;
	return 0;
}

int bench_meta(int argc, char **argv)
{
	struct bm *b = calloc(1, sizeof(*b));
	struct sigaction sa = { .sa_handler = bm_on_signal };
	struct strata_opts o;
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
	if (b->nconfigs) {
		exit_code = bench_meta_pg(b);
		goto out;
	}
	strata_opts_init(&o, sizeof(o));
	o.meta_cache_ms = b->meta_cache_ms;
	if (b->mgmt) {
		snprintf(mgmt, sizeof(mgmt), "%s", b->mgmt);
		rc = cli_connect_opts(mgmt, NULL, &o, &b->s);
	} else {
		snprintf(b->cdir, sizeof(b->cdir), "%s/cluster", b->root);
		if (local_cluster_up(b->cdir, 3, 0, b->flags, mgmt, sizeof(mgmt)))
			goto out;
		up = true;
		b->meta_pid = find_meta_pid(b);
		rc = cli_connect_opts(mgmt, b->cdir, &o, &b->s);
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
	if (b->meta_cache_ms)
		printf("metadata cache: on, entries kept %d ms (--meta-cache)\n", b->meta_cache_ms);
	else
		printf("metadata cache: off (--meta-cache MS turns it on)\n");
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
