/*
 * strata demo: the data-ingest job end to end on one machine.
 *
 * 1. starts a local cluster (3 storage daemons, R=3, a mem daemon and a
 *    compute daemon declaring 4 GPUs) in DIR/cluster;
 * 2. composes the job's slice out of the pools through the composer's API,
 *    as a scheduler would: 2 GPUs, a 2 GB storage volume, 256 MB of pooled
 *    memory, and a credential that reaches only those;
 * 3. generates a training-like dataset in DIR/dataset: many ~100 KB
 *    samples in a few directories and a few ~100 MB shards, random bytes
 *    from a seed, sizes varying a little; the CRC32C of every file (and of
 *    every 4 MiB piece of a shard) is taken as it is written;
 * 4. copies it into the job's volume with the real 'strata put' command
 *    (this program run as a child), presenting the job's credential;
 * 5. reads everything back through the batch ring, a few epochs, each in
 *    a new shuffled order (samples whole, QD 64; shards in 4 MiB pieces,
 *    QD 16), checks every read's CRC32C against the local copy's and
 *    reports throughput and per-read latency percentiles, again as the job;
 * 6. releases the slice (the volume, the memory, the GPUs go back);
 * 7. stops the cluster and removes what it created.
 *
 * CRC32C (src/common/crc32c.h) is the check: the library and the targets
 * check their own per-chunk CRCs, this one is end to end, from the bytes
 * written to the local file to the bytes the reader got back. A shard's
 * whole-file CRC is rebuilt from its pieces' CRCs (CRC combination), so
 * the pieces can arrive in any order.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "bench.h"
#include "cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/crc32c.h"
#include "common/fileio.h"
#include "common/rand.h"
#include "strata/locate.h"
#include "strata/strata.h"

#define DEMO_PIECE (4u << 20)		/* shards are read in pieces of this size */
#define DEMO_GEN_BUF (1u << 20)		/* generation buffer; divides DEMO_PIECE */
#define DEMO_GPUS 2			/* the job's slice */
#define DEMO_STORAGE (2ull << 30)	/* bytes */
#define DEMO_MEMORY (256ull << 20)
#define DEMO_STALL_S 60.0		/* no completion for this long: fail */
#define DEMO_SHOW_BAD 10		/* mismatches printed in full */

struct demo_cfg {
	int nsamples, ndirs, nshards;
	uint64_t sample_mean, shard_mean;
	uint64_t seed;
	int qd_samples, qd_shards;
	int epochs;		/* passes over the dataset, each shuffled anew */
};

struct demo_file {
	char *local;		/* path of the local copy */
	char *remote;		/* path in the cluster */
	uint64_t size;
	uint32_t crc;		/* CRC32C of the local copy */
	bool shard;
	uint32_t npieces;	/* shards: DEMO_PIECE pieces */
	uint32_t *piece_crc;	/* shards: CRC32C of each local piece */
	uint32_t *got_crc;	/* shards: CRC32C of each piece read back (last epoch) */
	uint32_t pieces_ok;	/* shards: piece reads that matched, all epochs */
	bool bad;		/* a read of it failed or mismatched */
	struct strata_file *fh;
};

struct demo {
	struct demo_cfg cfg;
	char root[PATH_MAX];
	char cdir[PATH_MAX];	/* the cluster's directory */
	char ddir[PATH_MAX];	/* the local dataset */
	char mgmt[64];
	char vol[PATH_MAX];	/* the job's volume, in the cluster */
	char job[64];		/* its composition's id ("" until composed) */
	char job_token[PATH_MAX];	/* its credential, a 0600 file */
	bool own_root;
	bool keep;
	struct demo_file *files;
	int nfiles;
	uint64_t bytes;		/* of the whole dataset */
	uint64_t max_sample;
	int nbad;		/* mismatches reported so far */
};

/* One read the ring does: a whole sample or one piece of a shard. */
struct demo_task {
	uint32_t file;
	uint32_t piece;
};

struct demo_slot {
	uint8_t *buf;
	uint32_t task;
	double t0;
};

struct phase_result {
	uint64_t reads, bytes, bad;
	double secs;
	double *lat;		/* seconds per read, sorted */
};

static volatile sig_atomic_t demo_stop;

static void on_signal(int sig)
{
	(void)sig;
	demo_stop = 1;
}

/* ---- deterministic random bytes ---- */

/* A size within +-spread_pct % of mean. */
static uint64_t rng_size(uint64_t *s, uint64_t mean, unsigned spread_pct)
{
	uint64_t span = mean * spread_pct / 100;

	if (span == 0)
		return mean;
	return mean - span + rng_below(s, 2 * span + 1);
}

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *dup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	return n < 0 ? NULL : s;
}

/* ---- step 2: the local dataset ---- */

/* Writes f->size random bytes to f->local, taking the CRCs. */
static int gen_file(struct demo_file *f, uint64_t *rng, uint8_t *buf)
{
	uint64_t off = 0;
	uint32_t piece = 0, pcrc = 0;
	int fd, rc = 0;

	fd = open(f->local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = -errno;
		cli_err("demo: cannot create '%s': %s", f->local, strerror(-rc));
		return rc;
	}
	f->crc = 0;
	while (off < f->size) {
		size_t n = f->size - off > DEMO_GEN_BUF ? DEMO_GEN_BUF : (size_t)(f->size - off);

		rng_fill(rng, buf, n);
		f->crc = crc32c(f->crc, buf, n);
		if (f->shard)
			pcrc = crc32c(pcrc, buf, n);
		rc = write_full(fd, buf, n);
		if (rc) {
			cli_err("demo: cannot write '%s': %s", f->local, strerror(-rc));
			goto out;
		}
		off += n;
		if (f->shard && (off % DEMO_PIECE == 0 || off == f->size)) {
			f->piece_crc[piece++] = pcrc;
			pcrc = 0;
		}
	}
out:
	if (close(fd) < 0 && !rc) {
		rc = -errno;
		cli_err("demo: cannot write '%s': %s", f->local, strerror(-rc));
	}
	return rc;
}

static int add_file(struct demo *d, const char *rel, uint64_t size, bool shard)
{
	struct demo_file *f = &d->files[d->nfiles];

	f->local = dup_printf("%s/%s", d->ddir, rel);
	f->remote = dup_printf("%s/%s", d->vol, rel);
	f->size = size;
	f->shard = shard;
	if (!f->local || !f->remote)
		return -ENOMEM;
	if (shard) {
		f->npieces = (uint32_t)((size + DEMO_PIECE - 1) / DEMO_PIECE);
		f->piece_crc = calloc(f->npieces, sizeof(uint32_t));
		f->got_crc = calloc(f->npieces, sizeof(uint32_t));
		if (!f->piece_crc || !f->got_crc)
			return -ENOMEM;
	} else if (size > d->max_sample) {
		d->max_sample = size;
	}
	d->nfiles++;
	d->bytes += size;
	return 0;
}

static int gen_dataset(struct demo *d)
{
	const struct demo_cfg *c = &d->cfg;
	uint64_t rng = c->seed;
	uint8_t *buf = malloc(DEMO_GEN_BUF);
	char rel[128], dir[PATH_MAX];
	double t0 = mono_sec();
	int rc = -ENOMEM;

	d->files = calloc((size_t)(c->nsamples + c->nshards), sizeof(*d->files));
	if (!buf || !d->files)
		goto out;
	for (int i = 0; i < c->ndirs; i++) {
		snprintf(dir, sizeof(dir), "%s/train/part-%02d", d->ddir, i);
		rc = mkdir_p(dir, 0755);
		if (rc)
			goto out_dir;
	}
	snprintf(dir, sizeof(dir), "%s/shards", d->ddir);
	rc = mkdir_p(dir, 0755);
	if (rc)
		goto out_dir;
	for (int i = 0; i < c->nsamples; i++) {
		snprintf(rel, sizeof(rel), "train/part-%02d/sample-%06d.bin", i % c->ndirs, i);
		rc = add_file(d, rel, rng_size(&rng, c->sample_mean, 10), false);
		if (rc)
			goto out;
	}
	for (int i = 0; i < c->nshards; i++) {
		snprintf(rel, sizeof(rel), "shards/shard-%03d.bin", i);
		rc = add_file(d, rel, rng_size(&rng, c->shard_mean, 5), true);
		if (rc)
			goto out;
	}
	for (int i = 0; i < d->nfiles && !demo_stop; i++) {
		rc = gen_file(&d->files[i], &rng, buf);
		if (rc)
			goto out;
	}
	if (demo_stop) {
		rc = -EINTR;
		goto out;
	}
	printf("  %d files, %.1f MB in %.2f s\n", d->nfiles, (double)d->bytes / 1e6,
	       mono_sec() - t0);
	rc = 0;
	goto out;
out_dir:
	cli_err("demo: cannot create '%s': %s", dir, strerror(-rc));
out:
	if (rc == -ENOMEM)
		cli_err("demo: out of memory for the dataset");
	free(buf);
	return rc;
}

/* ---- step 3: into the cluster ---- */

/* Runs argv (argv[0]: a path), inheriting stdout/stderr. Returns its exit
 * status, or -1 when it could not run or was killed. */
int cli_run_child(char *const *argv)
{
	int status;
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		cli_err("cannot fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		execv(argv[0], argv);
		fprintf(stderr, "strata: cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			cli_err("waiting for '%s': %s", argv[0], strerror(errno));
			return -1;
		}
	}
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	cli_err("'%s' was killed by signal %d", argv[0], WTERMSIG(status));
	return -1;
}

static int put_dataset(struct demo *d, struct strata *s)
{
	char self[PATH_MAX], train[PATH_MAX], shards[PATH_MAX], tok[PATH_MAX + 16];
	char *argv[] = { self, "put", "-j", "8", "--mgmt", d->mgmt, "--token", tok, train, shards,
			 d->vol, NULL };
	double t0;
	int rc;

	/* The put presents the job's credential: it reaches the volume the
	 * composer made for the job, nothing else. */
	(void)s;
	snprintf(tok, sizeof(tok), "%s", d->job_token);
	rc = cli_self_path(self, sizeof(self));
	if (rc) {
		cli_err("demo: cannot find this program (/proc/self/exe): %s", strerror(-rc));
		return rc;
	}
	snprintf(train, sizeof(train), "%s/train", d->ddir);
	snprintf(shards, sizeof(shards), "%s/shards", d->ddir);
	printf("  $");
	for (int i = 0; argv[i]; i++)
		printf(" %s", argv[i]);
	printf("\n");
	t0 = mono_sec();
	rc = cli_run_child(argv);
	if (rc != 0) {
		if (rc > 0)
			cli_err("demo: 'strata put' failed (exit %d)", rc);
		return -EIO;
	}
	t0 = mono_sec() - t0;
	printf("  wrote %d files, %.1f MB in %.1f s: %.1f MB/s (R=3: every byte on 3 targets)\n",
	       d->nfiles, (double)d->bytes / 1e6, t0, (double)d->bytes / 1e6 / t0);
	return 0;
}

/* ---- step 4: read back, verify ---- */

static int open_all(struct demo *d, struct strata *s)
{
	double t0 = mono_sec();
	int rc = 0;

	for (int i = 0; i < d->nfiles && !demo_stop; i++) {
		struct demo_file *f = &d->files[i];
		struct strata_stat st;

		rc = strata_open(s, f->remote, STRATA_O_RDONLY, 0, &f->fh);
		if (rc) {
			cli_err("demo: cannot open '%s' in the cluster: %s", f->remote,
				strata_strerror(rc));
			return rc;
		}
		rc = strata_fstat(f->fh, &st);
		if (rc) {
			cli_err("demo: cannot stat '%s' in the cluster: %s", f->remote,
				strata_strerror(rc));
			return rc;
		}
		if (st.size != f->size) {
			cli_err("demo: '%s' is %llu bytes in the cluster, %llu locally", f->remote,
				(unsigned long long)st.size, (unsigned long long)f->size);
			return -EIO;
		}
	}
	if (demo_stop)
		return -EINTR;
	t0 = mono_sec() - t0;
	printf("  opened %d files in %.2f s (%.0f opens/s); every size matches\n", d->nfiles, t0,
	       d->nfiles / t0);
	return 0;
}

static void report_bad(struct demo *d, const struct demo_file *f, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void report_bad(struct demo *d, const struct demo_file *f, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (d->nbad++ >= DEMO_SHOW_BAD)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_err("demo: MISMATCH '%s': %s", f->remote, msg);
}

/* Checks one completed read. Returns true when it matched. */
static bool check_read(struct demo *d, const struct demo_task *t, const uint8_t *buf,
		       ssize_t res)
{
	struct demo_file *f = &d->files[t->file];
	uint64_t off = (uint64_t)t->piece * DEMO_PIECE;
	uint64_t want = f->shard ? (f->size - off < DEMO_PIECE ? f->size - off : DEMO_PIECE) : f->size;
	uint32_t crc;

	if (res < 0) {
		report_bad(d, f, "read at %llu failed: %s", (unsigned long long)off,
			   strata_strerror((int)res));
		goto bad;
	}
	if ((uint64_t)res != want) {
		report_bad(d, f, "read at %llu returned %zd bytes, expected %llu",
			   (unsigned long long)off, res, (unsigned long long)want);
		goto bad;
	}
	crc = crc32c(0, buf, (size_t)res);
	if (!f->shard) {
		if (crc != f->crc) {
			report_bad(d, f, "CRC32C 0x%08x, local copy 0x%08x", crc, f->crc);
			goto bad;
		}
		return true;
	}
	f->got_crc[t->piece] = crc;
	if (crc != f->piece_crc[t->piece]) {
		report_bad(d, f, "piece at %llu: CRC32C 0x%08x, local copy 0x%08x",
			   (unsigned long long)off, crc, f->piece_crc[t->piece]);
		goto bad;
	}
	f->pieces_ok++;
	return true;
bad:
	f->bad = true;
	return false;
}

/* Runs tasks through one ring at depth qd, each read of up to cap bytes.
 * Adds to res (res->lat must have room for n more). Returns 0 or a negative
 * error (a ring failure or a stall; mismatches are counted, not errors). */
static int read_phase(struct demo *d, struct strata *s, const struct demo_task *tasks,
		      uint32_t n, uint32_t qd, size_t cap, struct phase_result *res)
{
	struct strata_ring *r = NULL;
	struct demo_slot *slots = calloc(qd, sizeof(*slots));
	struct strata_cqe *cqes = calloc(qd, sizeof(*cqes));
	uint32_t *freel = calloc(qd, sizeof(uint32_t));
	uint32_t nfree = 0, next = 0, inflight = 0;
	double t0, last = mono_sec();
	int rc;

	if (!slots || !cqes || !freel) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < qd; i++) {
		slots[i].buf = malloc(cap);
		if (!slots[i].buf) {
			rc = -ENOMEM;
			goto out;
		}
		freel[nfree++] = i;
	}
	rc = strata_ring_new(s, qd, &r);
	if (rc) {
		cli_err("demo: cannot create a ring of depth %u: %s", qd, strata_strerror(rc));
		goto out;
	}
	t0 = mono_sec();
	while ((next < n || inflight) && !demo_stop) {
		int got;

		while (next < n && nfree) {
			const struct demo_task *t = &tasks[next];
			struct demo_file *f = &d->files[t->file];
			uint32_t si = freel[--nfree];
			struct demo_slot *sl = &slots[si];

			sl->task = next;
			sl->t0 = mono_sec();
			rc = strata_ring_prep_read(r, f->fh, sl->buf, cap,
						   (uint64_t)t->piece * DEMO_PIECE, si);
			if (rc) {
				cli_err("demo: cannot queue a read of '%s': %s", f->remote,
					strata_strerror(rc));
				goto out;
			}
			next++;
			inflight++;
		}
		rc = strata_ring_submit(r);
		if (rc < 0) {
			cli_err("demo: cannot submit reads: %s", strata_strerror(rc));
			goto out;
		}
		got = strata_ring_wait(r, cqes, qd, 1, 1000);
		if (got < 0) {
			rc = got;
			cli_err("demo: waiting for reads: %s", strata_strerror(rc));
			goto out;
		}
		if (got == 0 && mono_sec() - last > DEMO_STALL_S) {
			rc = -ETIMEDOUT;
			cli_err("demo: no read completed for %.0f s (%u in flight); is the cluster up?",
				DEMO_STALL_S, inflight);
			goto out;
		}
		for (int i = 0; i < got; i++) {
			uint32_t si = (uint32_t)cqes[i].user_data;
			struct demo_slot *sl = &slots[si];
			double now = mono_sec();

			last = now;
			res->lat[res->reads++] = now - sl->t0;
			if (cqes[i].res > 0)
				res->bytes += (uint64_t)cqes[i].res;
			if (!check_read(d, &tasks[sl->task], sl->buf, cqes[i].res))
				res->bad++;
			freel[nfree++] = si;
			inflight--;
		}
	}
	res->secs += mono_sec() - t0;
	rc = demo_stop ? -EINTR : 0;
out:
	strata_ring_free(r);
	for (uint32_t i = 0; slots && i < qd; i++)
		free(slots[i].buf);
	free(slots);
	free(cqes);
	free(freel);
	if (rc == -ENOMEM)
		cli_err("demo: out of memory for %u read buffers of %zu bytes", qd, cap);
	return rc;
}

static double pct(const struct phase_result *r, double p)
{
	return bench_pct(r->lat, r->reads, p);
}

static void print_latency(const char *what, const struct phase_result *r)
{
	printf("    latency per %s: p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  p99.9 %.2f ms  max %.2f ms\n",
	       what, pct(r, 0.50) * 1e3, pct(r, 0.90) * 1e3, pct(r, 0.99) * 1e3,
	       pct(r, 0.999) * 1e3, r->reads ? r->lat[r->reads - 1] * 1e3 : 0);
}

/* One phase over all epochs: a fresh shuffle each epoch. */
static int read_epochs(struct demo *d, struct strata *s, struct demo_task *tasks, uint32_t n,
		       uint32_t qd, size_t cap, uint64_t *rng, struct phase_result *res)
{
	int rc = 0;

	memset(res, 0, sizeof(*res));
	res->lat = calloc((size_t)n * (size_t)d->cfg.epochs + 1, sizeof(double));
	if (!res->lat) {
		cli_err("demo: out of memory");
		return -ENOMEM;
	}
	for (int e = 0; e < d->cfg.epochs && !rc; e++) {
		bench_shuffle(tasks, n, sizeof(*tasks), rng);
		rc = read_phase(d, s, tasks, n, qd, cap, res);
	}
	bench_sort(res->lat, res->reads);
	return rc;
}

static int read_back(struct demo *d, struct strata *s, struct phase_result *sam,
		     struct phase_result *sha)
{
	struct demo_task *tasks;
	uint64_t rng = d->cfg.seed ^ 0x5eed5eedull;
	uint32_t ns = 0, np = 0;
	int rc;

	for (int i = 0; i < d->nfiles; i++)
		np += d->files[i].shard ? d->files[i].npieces : 0;
	tasks = calloc((size_t)(uint32_t)d->nfiles + np, sizeof(*tasks));
	if (!tasks) {
		cli_err("demo: out of memory");
		return -ENOMEM;
	}
	for (int i = 0; i < d->nfiles; i++)
		if (!d->files[i].shard)
			tasks[ns++] = (struct demo_task){ (uint32_t)i, 0 };
	rc = read_epochs(d, s, tasks, ns, (uint32_t)d->cfg.qd_samples, d->max_sample + 4096, &rng,
			 sam);
	if (rc)
		goto out;
	printf("  samples: %llu reads (%d epoch(s)), %.1f MB in %.2f s: %.1f MB/s, %.0f samples/s (QD %d)\n",
	       (unsigned long long)sam->reads, d->cfg.epochs, (double)sam->bytes / 1e6, sam->secs,
	       (double)sam->bytes / 1e6 / sam->secs, (double)sam->reads / sam->secs,
	       d->cfg.qd_samples);
	print_latency("sample", sam);
	np = 0;
	for (int i = 0; i < d->nfiles; i++)
		for (uint32_t p = 0; d->files[i].shard && p < d->files[i].npieces; p++)
			tasks[np++] = (struct demo_task){ (uint32_t)i, p };
	rc = read_epochs(d, s, tasks, np, (uint32_t)d->cfg.qd_shards, DEMO_PIECE, &rng, sha);
	if (rc)
		goto out;
	printf("  shards: %llu reads of 4 MiB pieces (%d epoch(s)), %.1f MB in %.2f s: %.1f MB/s (QD %d)\n",
	       (unsigned long long)sha->reads, d->cfg.epochs, (double)sha->bytes / 1e6, sha->secs,
	       (double)sha->bytes / 1e6 / sha->secs, d->cfg.qd_shards);
	print_latency("4 MiB piece", sha);
out:
	free(tasks);
	return rc;
}

/* Whole-file verdicts. Returns the number of files that match. */
static int verify_files(struct demo *d)
{
	int ok = 0;

	for (int i = 0; i < d->nfiles; i++) {
		struct demo_file *f = &d->files[i];
		uint32_t crc = 0;

		if (f->bad)
			continue;
		if (!f->shard) {
			ok++;
			continue;
		}
		if (f->pieces_ok != f->npieces * (uint32_t)d->cfg.epochs) {
			report_bad(d, f, "%u of %u piece reads done", f->pieces_ok,
				   f->npieces * (uint32_t)d->cfg.epochs);
			f->bad = true;
			continue;
		}
		for (uint32_t p = 0; p < f->npieces; p++) {
			uint64_t off = (uint64_t)p * DEMO_PIECE;
			uint64_t len = f->size - off < DEMO_PIECE ? f->size - off : DEMO_PIECE;

			crc = p ? crc32c_combine(crc, f->got_crc[p], len) : f->got_crc[p];
		}
		if (crc != f->crc) {
			report_bad(d, f, "whole-file CRC32C 0x%08x, local copy 0x%08x", crc, f->crc);
			f->bad = true;
			continue;
		}
		ok++;
	}
	return ok;
}

/* ---- the command ---- */

static void demo_release(struct demo *d)
{
	for (int i = 0; d->files && i < d->nfiles; i++) {
		struct demo_file *f = &d->files[i];

		if (f->fh)
			strata_close(f->fh);
		free(f->local);
		free(f->remote);
		free(f->piece_crc);
		free(f->got_crc);
	}
	free(d->files);
	d->files = NULL;
}

/* ---- steps 1, 2 and 6: the cluster, the job's slice ---- */

/* 'strata local up' with the pools a job is carved from: storage, a mem
 * daemon, a compute daemon declaring 4 GPUs. */
static int cluster_up(struct demo *d)
{
	char self[PATH_MAX];
	char *argv[] = { self, "local", "up", "--dir", d->cdir, "--storage", "3", "--replication",
			 "3", "--mem", "1", "--compute", "1", "--gpus-per-node", "4",
			 "--daemon-flags", "--node.log_level=warn", NULL };
	int rc = cli_self_path(self, sizeof(self));

	if (rc) {
		cli_err("demo: cannot find this program (/proc/self/exe): %s", strerror(-rc));
		return rc;
	}
	rc = cli_run_child(argv);
	if (rc) {
		if (rc > 0)
			cli_err("demo: 'strata local up' failed (exit %d)", rc);
		return -EIO;
	}
	rc = strata_find_mgmt(NULL, d->cdir, d->mgmt, sizeof(d->mgmt));
	if (rc)
		cli_err("demo: no mgmt address in '%s': %s", d->cdir, strata_strerror(rc));
	return rc;
}

/* POSTs the job's slice to the composer and keeps what it hands over:
 * the volume's path, the GPUs, the credential (written 0600). */
static int compose(struct demo *d)
{
	json_t *out = NULL, *o, *cuda, *v;
	const char *id, *vol, *cred, *k;
	char body[256];
	int rc;

	snprintf(body, sizeof(body),
		 "{\"Name\": \"demo-job\", \"Gpus\": {\"Count\": %d}, \"Storage\": {\"Size\": %llu}, "
		 "\"Memory\": {\"Size\": %llu}}", DEMO_GPUS, (unsigned long long)DEMO_STORAGE,
		 (unsigned long long)DEMO_MEMORY);
	printf("  POST /redfish/v1/Systems %s\n", body);
	rc = cli_compose_call(d->cdir, "POST", "/redfish/v1/Systems", body, &out);
	if (rc)
		return -EIO;
	o = json_object_get(json_object_get(out, "Oem"), "Strata");
	id = json_string_value(json_object_get(out, "Id"));
	vol = json_string_value(json_object_get(json_object_get(o, "Volume"), "Path"));
	cred = json_string_value(json_object_get(o, "Credential"));
	if (!id || !vol || !cred) {
		cli_err("demo: the composer's answer lacks the id, the volume or the credential");
		json_decref(out);
		return -EPROTO;
	}
	snprintf(d->job, sizeof(d->job), "%s", id);
	snprintf(d->vol, sizeof(d->vol), "%s", vol);
	snprintf(d->job_token, sizeof(d->job_token), "%s/job.token", d->root);
	rc = cli_write_secret(d->job_token, cred);
	printf("  composition %s: volume %s (%llu GiB), pooled memory %llu MiB, credential in %s\n",
	       id, vol, DEMO_STORAGE >> 30, DEMO_MEMORY >> 20, d->job_token);
	cuda = json_object_get(o, "CudaVisibleDevices");
	json_object_foreach(cuda, k, v)
		printf("  GPUs on compute node %s: CUDA_VISIBLE_DEVICES=%s\n", k, json_string_value(v));
	json_decref(out);
	if (rc)
		cli_err("demo: cannot write the job's credential to '%s': %s", d->job_token,
			strata_strerror(rc));
	return rc;
}

/* Gives the slice back: the composer removes the volume, frees the memory
 * and the GPUs. */
static int release(struct demo *d)
{
	char path[128];
	json_t *out = NULL;
	int rc;

	snprintf(path, sizeof(path), "/redfish/v1/Systems/%s", d->job);
	printf("  DELETE %s\n", path);
	rc = cli_compose_call(d->cdir, "DELETE", path, NULL, &out);
	json_decref(out);
	if (!rc)
		d->job[0] = '\0';
	return rc ? -EIO : 0;
}

static int parse_args(int argc, char **argv, struct demo *d, const char **dir)
{
	bool small = false;
	int64_t v;

	*dir = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: strata demo [--dir DIR] [--small] [--seed N] [--keep]\n\n"
			       "Starts a local cluster (3 storage daemons, R=3, a mem daemon, a compute\n"
			       "daemon with 4 GPUs) in DIR/cluster (DIR: a temp dir by default), composes\n"
			       "a job's slice (2 GPUs, a 2 GB volume, 256 MB of pooled memory), generates\n"
			       "a dataset in DIR/dataset (2000 ~100 KB samples, 3 ~100 MB shards; --small:\n"
			       "500 samples, one 20 MB shard), copies it into the job's volume with\n"
			       "'strata put' as the job, reads it back through the batch ring (3 epochs,\n"
			       "2 with --small, each in a new shuffled order), checks every read's CRC32C,\n"
			       "prints throughput and latency, releases the slice, stops the cluster and\n"
			       "removes what it created (--keep: leave DIR's files). Exits 1 on any\n"
			       "mismatch.\n");
			return 1;
		}
		if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
			*dir = argv[++i];
		} else if (strcmp(argv[i], "--small") == 0) {
			small = true;
		} else if (strcmp(argv[i], "--keep") == 0) {
			d->keep = true;
		} else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
			if (parse_i64(argv[++i], &v) || v < 0) {
				cli_err("demo: --seed must be a number >= 0");
				return 2;
			}
			d->cfg.seed = (uint64_t)v;
		} else {
			cli_err("demo: unexpected argument '%s' (usage: strata demo [--dir DIR] [--small] [--seed N] [--keep])",
				argv[i]);
			return 2;
		}
	}
	if (small) {
		d->cfg.nsamples = 500;
		d->cfg.ndirs = 4;
		d->cfg.nshards = 1;
		d->cfg.shard_mean = 20000000;
		d->cfg.epochs = 2;
	}
	return 0;
}

int cmd_demo(int argc, char **argv)
{
	struct demo d = {
		.cfg = { .nsamples = 2000, .ndirs = 8, .nshards = 3, .sample_mean = 100000,
			 .shard_mean = 100000000, .seed = 42, .qd_samples = 64, .qd_shards = 16, .epochs = 3 },
	};
	struct phase_result sam = { 0 }, sha = { 0 };
	struct sigaction sa = { .sa_handler = on_signal };
	struct strata *s = NULL;
	const char *dir;
	int rc, ok = 0, exit_code = 1;
	bool read_done = false;
	double t_all = mono_sec();

	/* Progress lines show up as they happen, also through a pipe. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	rc = parse_args(argc, argv, &d, &dir);
	if (rc)
		return rc == 1 ? 0 : rc;	/* 1: --help was printed */
	if (dir) {
		snprintf(d.root, sizeof(d.root), "%s", dir);
		rc = mkdir_p(d.root, 0755);
		if (rc) {
			cli_err("demo: cannot create '%s': %s", d.root, strerror(-rc));
			return 1;
		}
	} else {
		snprintf(d.root, sizeof(d.root), "/tmp/strata-demo-XXXXXX");
		if (!mkdtemp(d.root)) {
			cli_err("demo: cannot create a temp dir: %s", strerror(errno));
			return 1;
		}
		d.own_root = true;
	}
	snprintf(d.cdir, sizeof(d.cdir), "%s/cluster", d.root);
	snprintf(d.ddir, sizeof(d.ddir), "%s/dataset", d.root);
	/* Ctrl-C / SIGTERM: stop at the next step and still clean up. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	printf("strata demo: %d samples (~%.0f KB) in %d directories and %d shard(s) (~%.0f MB), seed %llu, in '%s'\n",
	       d.cfg.nsamples, (double)d.cfg.sample_mean / 1e3, d.cfg.ndirs, d.cfg.nshards,
	       (double)d.cfg.shard_mean / 1e6, (unsigned long long)d.cfg.seed, d.root);
	printf("[1/7] starting a local cluster in '%s': 3 storage daemons (R=3), a mem daemon, "
	       "a compute daemon with 4 GPUs\n", d.cdir);
	fflush(stdout);
	if (cluster_up(&d))
		goto out;
	printf("[2/7] composing the job's slice: %d GPUs + %llu GiB of storage + %llu MiB of pooled "
	       "memory\n", DEMO_GPUS, DEMO_STORAGE >> 30, DEMO_MEMORY >> 20);
	fflush(stdout);
	if (compose(&d))
		goto out;
	/* From here on the demo is the job: it presents the slice's
	 * credential, which reaches its volume and nothing else. */
	rc = setenv("STRATA_TOKEN_FILE", d.job_token, 1);
	if (!rc)
		rc = cli_connect(d.mgmt, d.cdir, &s);
	if (rc) {
		cli_err("demo: cannot connect to the cluster at %s as the job: %s", d.mgmt,
			strata_strerror(rc));
		goto out;
	}
	printf("[3/7] generating the dataset in '%s'\n", d.ddir);
	fflush(stdout);
	if (gen_dataset(&d))
		goto out;
	printf("[4/7] writing it into the job's volume '%s'\n", d.vol);
	fflush(stdout);
	if (put_dataset(&d, s))
		goto out;
	printf("[5/7] reading it back through the batch ring, %d epoch(s) in shuffled order, checking CRC32C\n", d.cfg.epochs);
	fflush(stdout);
	if (open_all(&d, s) || read_back(&d, s, &sam, &sha))
		goto out;
	ok = verify_files(&d);
	read_done = true;
	exit_code = ok == d.nfiles ? 0 : 1;
out:
	if (demo_stop)
		cli_err("demo: interrupted; cleaning up");
	demo_release(&d);
	strata_disconnect(s);
	unsetenv("STRATA_TOKEN_FILE");	/* composing takes the admin token again */
	if (d.job[0]) {
		printf("[6/7] releasing the job's slice %s (volume, memory and GPUs go back to the pools)\n",
		       d.job);
		fflush(stdout);
		if (release(&d))
			exit_code = 1;
	}
	printf("[7/7] stopping the cluster\n");
	fflush(stdout);
	if (access(d.cdir, F_OK) == 0) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/cluster.json", d.cdir);
		if (access(path, F_OK) == 0 && local_cluster_down(d.cdir))
			exit_code = 1;
	}
	if (d.job_token[0])
		unlink(d.job_token);
	if (!d.keep) {
		bench_rmtree(d.own_root ? d.root : d.cdir);
		if (!d.own_root)
			bench_rmtree(d.ddir);
	}
	if (read_done && !d.job[0])
		printf("summary: the job's slice (%d GPUs, %llu GiB volume, %llu MiB pooled memory) was "
		       "composed, used with its own credential and released\n", DEMO_GPUS,
		       DEMO_STORAGE >> 30, DEMO_MEMORY >> 20);
	if (read_done) {
		printf("summary: verified %d/%d files (CRC32C of every byte against the local copy)\n",
		       ok, d.nfiles);
		printf("summary: samples %.0f samples/s, %.1f MB/s, p50 %.2f ms, p99 %.2f ms, p99.9 %.2f ms; shards %.1f MB/s\n",
		       (double)sam.reads / sam.secs, (double)sam.bytes / 1e6 / sam.secs,
		       pct(&sam, 0.50) * 1e3, pct(&sam, 0.99) * 1e3, pct(&sam, 0.999) * 1e3,
		       sha.secs > 0 ? (double)sha.bytes / 1e6 / sha.secs : 0);
	}
	free(sam.lat);
	free(sha.lat);
	printf("demo: %s (%.1f s)\n", exit_code ? "FAILED" : "ok", mono_sec() - t_all);
	return exit_code;
}
