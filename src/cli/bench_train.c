/*
 * strata bench train: training I/O in the manner of MLPerf Storage's
 * training workloads. Per workload: sample sizes (normal around a mean),
 * samples per file, batch size, emulated compute time per batch (the
 * accelerator is a thread that sleeps), reader threads. Readers read the
 * batches of a seeded shuffled order into a bounded queue; each emulated
 * accelerator takes a batch and "computes". AU = compute time / (wall
 * time x accelerators). For each workload it searches the largest number
 * of accelerators whose AU stays >= the target (90%), on a local cluster
 * (3 storage daemons, R=3) and on a local directory as the baseline.
 *
 * Strata is measured twice: cold, every read from the storage plane (a
 * connection without a cache, as epoch 1 reads), and warm, epochs 2 and
 * later through the compute-node read cache (docs/cache.md) after one
 * untimed pass (epoch 1 through the cache) filled it. Each search also
 * reports the client's CPU seconds (this process: user + system, every
 * thread) per GB read, beside the local directory's, and for strata the
 * storage daemons' (this process's stratad children, from /proc) per GB
 * the client read: the other half of what a read from the storage plane
 * costs the machine.
 *
 * Scaling: --scale F multiplies sample sizes and compute time together,
 * so the bandwidth one accelerator needs (batch bytes / compute time) is
 * the workload's own while the dataset fits this machine.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "common/clock.h"
#include "common/rand.h"
#include "strata/cache.h"
#include "strata/strata.h"

#define BT_MAX_THREADS 64
#define BT_MAX_ACCEL 256

struct bt_workload {
	const char *name;
	double sample_mb;	/* mean sample size at scale 1 (MB, 1e6) */
	double stddev;		/* relative */
	uint32_t per_file;
	uint32_t batch;
	double compute_s;	/* per batch at scale 1 */
	double def_scale;	/* default scale on this kind of machine */
	uint32_t def_files;
};

static const struct bt_workload bt_workloads[] = {
	{ "unet3d", 140.0, 0.25, 1, 7, 0.323, 1.0 / 16, 32 },
	{ "resnet50", 0.114, 0.10, 1251, 400, 0.224, 1.0 / 4, 4 },
	{ "cosmoflow", 2.8, 0.02, 1, 1, 0.0035, 1.0, 256 },
};

struct bt_sample {
	uint32_t file;
	uint64_t off, len;
};

struct bt_run {
	const struct bt_workload *w;
	double scale, seconds;
	uint32_t nfiles, nsamples, threads, depth;
	struct bt_sample *samples;
	uint64_t max_batch_bytes;
	/* the backend: strata files or local fds */
	struct strata *s;
	struct strata_file **sf;
	int *fds;
	/* one trial */
	uint32_t *order;
	uint32_t accel;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t next_batch;		/* readers: next batch to read */
	uint32_t ready, qcap;		/* batches read and not yet taken */
	bool stop;
	uint64_t bytes, batches_done;
	double compute_total;
	int err;
};

static double bt_normal(uint64_t *x)
{
	/* Box-Muller; u1 in (0, 1] so the log is finite. */
	double u1 = 1.0 - rng_unit(x);
	double u2 = rng_unit(x);

	return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* Sleeps until the monotonic time t (mono_sec's clock). */
static void bt_sleep_until(double t)
{
	struct timespec ts;

	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* Lays the samples out over the files (sizes from a seeded normal). */
static int bt_layout(struct bt_run *r)
{
	uint64_t seed = 42, mean = (uint64_t)(r->w->sample_mb * 1e6 * r->scale);

	r->nsamples = r->nfiles * r->w->per_file;
	r->samples = calloc(r->nsamples, sizeof(*r->samples));
	r->order = calloc(r->nsamples, sizeof(*r->order));
	if (!r->samples || !r->order)
		return -ENOMEM;
	for (uint32_t f = 0, i = 0; f < r->nfiles; f++) {
		uint64_t off = 0;

		for (uint32_t k = 0; k < r->w->per_file; k++, i++) {
			double v = (double)mean * (1.0 + r->w->stddev * bt_normal(&seed));
			uint64_t len = v < 4096 ? 4096 : (uint64_t)v;

			r->samples[i] = (struct bt_sample){ f, off, len };
			off += len;
		}
	}
	/* Any batch of the shuffled order is at most batch x the largest. */
	r->max_batch_bytes = 0;
	for (uint32_t i = 0; i < r->nsamples; i++)
		if (r->samples[i].len > r->max_batch_bytes)
			r->max_batch_bytes = r->samples[i].len;
	r->max_batch_bytes *= r->w->batch;
	return 0;
}

/* Writes the dataset: each file its samples back to back. */
static int bt_generate(struct bt_run *r, const char *root, bool cluster)
{
	uint64_t fill = 7;
	uint8_t *buf;
	size_t cap = 8u << 20;
	int rc = 0;

	buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	rng_fill(&fill, buf, cap);
	for (uint32_t f = 0; f < r->nfiles && !rc; f++) {
		const struct bt_sample *last = &r->samples[(f + 1) * r->w->per_file - 1];
		uint64_t size = last->off + last->len, off = 0;
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/f%06u", root, f);
		if (cluster) {
			rc = strata_open(r->s, path, STRATA_O_RDWR | STRATA_O_CREAT | STRATA_O_TRUNC,
					 0644, &r->sf[f]);
		} else {
			r->fds[f] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
			rc = r->fds[f] < 0 ? -errno : 0;
		}
		while (!rc && off < size) {
			size_t n = size - off < cap ? (size_t)(size - off) : cap;
			ssize_t w = cluster ? strata_pwrite(r->sf[f], buf, n, off)
					    : pwrite(r->fds[f], buf, n, (off_t)off);

			if (w < 0)
				rc = cluster ? (int)w : -errno;
			else
				off += (uint64_t)w;
		}
		if (!rc)
			rc = cluster ? strata_fsync(r->sf[f]) : (fdatasync(r->fds[f]) ? -errno : 0);
	}
	free(buf);
	return rc;
}

/* Reads batch b of the order into buf. */
static int bt_read_batch(struct bt_run *r, struct strata_ring *ring, struct strata_cqe *cqes,
			 uint64_t b, uint8_t *buf, uint64_t *bytes)
{
	uint32_t first = (uint32_t)(b * r->w->batch), inflight = 0;
	uint64_t pos = 0;
	int rc = 0;

	for (uint32_t k = 0; k < r->w->batch; k++) {
		const struct bt_sample *s = &r->samples[r->order[first + k]];

		if (ring) {
			/* As a data loader does: the batch's samples prepared,
			 * then submitted together (the client sends the small
			 * ones to each target as one request), depth at most
			 * in flight. */
			while (inflight >= r->depth) {
				int n;

				strata_ring_submit(ring);
				n = strata_ring_wait(ring, cqes, r->depth,
						     r->depth > 4 ? r->depth / 4 : 1, -1);
				for (int i = 0; i < n; i++)
					if (cqes[i].res < 0 && !rc)
						rc = (int)cqes[i].res;
				inflight -= n > 0 ? (uint32_t)n : 0;
			}
			rc = rc ? rc : strata_ring_prep_read(ring, r->sf[s->file], buf + pos, s->len,
							     s->off, k);
			if (!rc)
				inflight++;
		} else {
			ssize_t n = pread(r->fds[s->file], buf + pos, s->len, (off_t)s->off);

			if (n < 0 && !rc)
				rc = -errno;
		}
		pos += s->len;
	}
	if (ring)
		strata_ring_submit(ring);
	while (inflight) {
		int n = strata_ring_wait(ring, cqes, r->depth, inflight, -1);

		for (int i = 0; i < n; i++)
			if (cqes[i].res < 0 && !rc)
				rc = (int)cqes[i].res;
		inflight -= n > 0 ? (uint32_t)n : 0;
	}
	*bytes = pos;
	return rc;
}

static void *bt_reader(void *arg)
{
	struct bt_run *r = arg;
	uint64_t nb = r->nsamples / r->w->batch, bytes;
	struct strata_ring *ring = NULL;
	struct strata_cqe *cqes = NULL;
	uint8_t *buf = malloc(r->max_batch_bytes);
	int rc = buf ? 0 : -ENOMEM;

	if (!rc && r->s) {
		cqes = calloc(r->depth, sizeof(*cqes));
		rc = cqes ? strata_ring_new(r->s, r->depth, &ring) : -ENOMEM;
	}
	while (!rc) {
		uint64_t b;

		pthread_mutex_lock(&r->mu);
		while (!r->stop && r->ready >= r->qcap)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->stop) {
			pthread_mutex_unlock(&r->mu);
			break;
		}
		b = r->next_batch++ % nb;	/* epochs repeat the order */
		pthread_mutex_unlock(&r->mu);
		rc = bt_read_batch(r, ring, cqes, b, buf, &bytes);
		pthread_mutex_lock(&r->mu);
		r->ready++;
		r->bytes += bytes;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
	}
	pthread_mutex_lock(&r->mu);
	if (rc && !r->err)
		r->err = rc;
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	strata_ring_free(ring);
	free(cqes);
	free(buf);
	return NULL;
}

static void *bt_accel(void *arg)
{
	struct bt_run *r = arg;
	double c = r->w->compute_s * r->scale, end = mono_sec() + r->seconds, busy = 0;

	for (;;) {
		pthread_mutex_lock(&r->mu);
		while (!r->stop && r->ready == 0)
			pthread_cond_wait(&r->cv, &r->mu);
		if (r->stop || mono_sec() >= end) {
			pthread_mutex_unlock(&r->mu);
			break;
		}
		r->ready--;
		r->batches_done++;
		r->compute_total += c;
		pthread_cond_broadcast(&r->cv);
		pthread_mutex_unlock(&r->mu);
		/* Compute ends c after it began: at the batch's arrival, or when
		 * the previous batch's compute ended if it was already there (so
		 * timer overshoot is not charged as I/O stall). */
		busy = fmax(mono_sec(), busy) + c;
		bt_sleep_until(busy);
	}
	return NULL;
}

/* CPU seconds of this process so far (user + system, all threads). */
static double bt_cpu_sec(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		return 0;
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* CPU seconds (user + system) of this process's stratad children so far:
 * the local cluster's storage daemons (bench_children_cpu). 0 where /proc
 * cannot be read: the figure is then left out. */
static double bt_daemons_cpu_sec(void)
{
	double c = bench_children_cpu((long)getpid(), "stratad");

	return c > 0 ? c : 0;
}

/* One trial with accel accelerators: returns AU; fills samples/s, MB/s,
 * the client's CPU seconds per GB read and, reading from the cluster,
 * the storage daemons' (*dcpu_gb, 0 otherwise). */
static double bt_trial(struct bt_run *r, uint32_t accel, double *sps, double *mbs, double *cpu_gb,
		       double *dcpu_gb, int *err)
{
	pthread_t rd[BT_MAX_THREADS], ac[BT_MAX_ACCEL];
	uint32_t nr = 0, na = 0;
	double t0, wall, c0, d0 = r->s ? bt_daemons_cpu_sec() : 0;
	uint64_t x = 1234 + accel;

	for (uint32_t i = 0; i < r->nsamples; i++)
		r->order[i] = i;
	bench_shuffle(r->order, r->nsamples, sizeof(r->order[0]), &x);
	r->accel = accel;
	r->next_batch = 0;
	r->ready = 0;
	r->qcap = 2;
	r->stop = false;
	r->bytes = r->batches_done = 0;
	r->compute_total = 0;
	r->err = 0;
	c0 = bt_cpu_sec();
	t0 = mono_sec();
	for (; nr < r->threads; nr++)
		if (pthread_create(&rd[nr], NULL, bt_reader, r))
			break;
	for (; na < accel; na++)
		if (pthread_create(&ac[na], NULL, bt_accel, r))
			break;
	for (uint32_t i = 0; i < na; i++)
		pthread_join(ac[i], NULL);
	wall = mono_sec() - t0;
	pthread_mutex_lock(&r->mu);
	r->stop = true;
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	for (uint32_t i = 0; i < nr; i++)
		pthread_join(rd[i], NULL);
	*cpu_gb = r->bytes ? (bt_cpu_sec() - c0) / ((double)r->bytes / 1e9) : 0;
	*dcpu_gb = r->bytes && r->s ? (bt_daemons_cpu_sec() - d0) / ((double)r->bytes / 1e9) : 0;
	*err = r->err ? r->err : (na < accel || nr < r->threads ? -EAGAIN : 0);
	*sps = (double)r->batches_done * r->w->batch / wall;
	*mbs = (double)r->bytes / wall / 1e6;	/* read by the readers */
	return r->compute_total / (wall * accel);
}

/* What a search found: the most accelerators at AU >= target, and the
 * client CPU per GB of that trial (of the last one when none made it). */
struct bt_result {
	uint32_t accel;
	double cpu_gb, dcpu_gb;		/* client; storage daemons (strata) */
	bool ran;
};

/* Largest accelerator count with AU >= target: doubling, then bisection. */
static struct bt_result bt_search(struct bt_run *r, const char *backend, double target,
				  uint32_t max_accel, int *fails)
{
	uint32_t good = 0, bad = 0, a = 1;
	double sps, mbs, au, cpu_gb, dcpu_gb, best_sps = 0, best_mbs = 0, best_au = 0;
	struct bt_result res = { 0 };
	int err;

	for (;;) {
		au = bt_trial(r, a, &sps, &mbs, &cpu_gb, &dcpu_gb, &err);
		if (err) {
			printf("  %-11s accel %3u: failed: %s\n", backend, a, strata_strerror(err));
			(*fails)++;
			return res;
		}
		printf("  %-11s accel %3u: AU %5.1f%%  %9.1f samples/s  %8.1f MB/s  %.3f CPU s/GB",
		       backend, a, au * 100, sps, mbs, cpu_gb);
		if (r->s)
			printf(" (+ daemons %.3f)", dcpu_gb);
		printf("\n");
		fflush(stdout);
		res.ran = true;
		if (!good) {
			res.cpu_gb = cpu_gb;
			res.dcpu_gb = dcpu_gb;
		}
		if (au >= target) {
			good = a;
			best_sps = sps;
			best_mbs = mbs;
			best_au = au;
			res.cpu_gb = cpu_gb;
			res.dcpu_gb = dcpu_gb;
		} else {
			bad = a;
		}
		if (!bad && a * 2 <= max_accel)
			a *= 2;
		else if (bad && bad - good > 1)
			a = (good + bad) / 2;
		else
			break;
		if (a == good || a == bad)
			break;
	}
	if (good)
		printf("  %-11s => %u accelerator(s) at AU >= %.0f%%: AU %.1f%%, %.1f samples/s, %.1f MB/s, %.3f CPU s/GB\n",
		       backend, good, target * 100, best_au * 100, best_sps, best_mbs, res.cpu_gb);
	else
		printf("  %-11s => not even 1 accelerator at AU >= %.0f%%\n", backend, target * 100);
	fflush(stdout);
	res.accel = good;
	return res;
}

static int bt_usage(void)
{
	printf("usage: strata bench train [--workload unet3d|resnet50|cosmoflow|all] [--scale F]\n"
	       "                          [--files N] [--threads N] [--seconds S] [--max-accel N]\n"
	       "                          [--au PCT] [--local-only] [--cache-mem MB] [--cache-dir DIR]\n\n"
	       "MLPerf-Storage-style training I/O: emulated accelerators (sleeping compute per batch)\n"
	       "fed by N reader threads (default 4) from a local cluster (3 storage daemons, R=3)\n"
	       "and from a local directory (the baseline). Finds the most accelerators that keep\n"
	       "AU >= PCT (default 90). --scale multiplies sample sizes and compute time (default:\n"
	       "per workload); --files: files in the dataset; S seconds per trial (default 3).\n"
	       "Strata runs cold (no cache: every read from the storage plane, as epoch 1) and warm\n"
	       "(epochs 2+, from a read cache of --cache-mem MB of DRAM, default 2048, and the\n"
	       "optional --cache-dir on local disk; 0 MB and no dir: no warm run), each with the\n"
	       "client's CPU seconds per GB read. $STRATA_CACHE_* are ignored.\n");
	return 0;
}

struct bt_opts {
	const char *workload;
	double scale, seconds, au;
	long files, threads, max_accel, cache_mb;
	const char *cache_dir;
	bool local_only;
};

static int bt_parse(int argc, char **argv, struct bt_opts *o)
{
	const char *a = "";

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;

		a = argv[i];

		if (!strcmp(a, "--help") || !strcmp(a, "-h"))
			return 1;
		if (!strcmp(a, "--local-only")) {
			o->local_only = true;
			continue;
		}
		if (!v)
			goto bad;
		i++;
		if (!strcmp(a, "--workload")) {
			o->workload = v;
			continue;
		}
		if (!strcmp(a, "--cache-dir")) {
			o->cache_dir = v;
			continue;
		}
		errno = 0;
		if (!strcmp(a, "--scale"))
			o->scale = strtod(v, &end);
		else if (!strcmp(a, "--seconds"))
			o->seconds = strtod(v, &end);
		else if (!strcmp(a, "--au"))
			o->au = strtod(v, &end) / 100.0;
		else if (!strcmp(a, "--files"))
			o->files = strtol(v, &end, 10);
		else if (!strcmp(a, "--threads"))
			o->threads = strtol(v, &end, 10);
		else if (!strcmp(a, "--max-accel"))
			o->max_accel = strtol(v, &end, 10);
		else if (!strcmp(a, "--cache-mem"))
			o->cache_mb = strtol(v, &end, 10);
		else
			goto bad;
		if (errno || !end || *end)
			goto bad;
	}
	if (o->scale < 0 || o->scale > 1 || o->seconds <= 0 || o->seconds > 600 || o->au <= 0 ||
	    o->au > 1 || o->files < 0 || o->files > 1000000 || o->threads < 1 ||
	    o->threads > BT_MAX_THREADS || o->max_accel < 1 || o->max_accel > BT_MAX_ACCEL ||
	    o->cache_mb < 0 || o->cache_mb > (1L << 30)) {
		cli_err("bench train: an option is out of range (see --help)");
		return 2;
	}
	return 0;
bad:
	cli_err("bench train: bad or unknown argument '%s' (see --help)", a);
	return 2;
}

static void bt_free_files(struct bt_run *r)
{
	for (uint32_t f = 0; f < r->nfiles; f++) {
		if (r->sf && r->sf[f])
			strata_close(r->sf[f]);
		if (r->fds && r->fds[f] >= 0)
			close(r->fds[f]);
	}
	free(r->sf);
	free(r->fds);
	free(r->samples);
	free(r->order);
}

/* Epoch 1 through the cache: every file read once, in order, on the
 * cached connection sw (files opened read-only into sf). */
static int bt_fill(struct bt_run *r, struct strata *sw, const char *root, struct strata_file **sf)
{
	size_t cap = 8u << 20;
	uint8_t *buf = malloc(cap);
	double t0 = mono_sec(), c0 = bt_cpu_sec(), wall;
	uint64_t total = 0;
	int rc = buf ? 0 : -ENOMEM;

	for (uint32_t f = 0; f < r->nfiles && !rc; f++) {
		const struct bt_sample *last = &r->samples[(f + 1) * r->w->per_file - 1];
		uint64_t size = last->off + last->len;
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/f%06u", root, f);
		rc = strata_open(sw, path, STRATA_O_RDONLY, 0, &sf[f]);
		for (uint64_t off = 0; !rc && off < size;) {
			ssize_t n = strata_pread(sf[f], buf, cap, off);

			if (n <= 0)
				rc = n < 0 ? (int)n : -EIO;
			else
				off += (uint64_t)n;
		}
		total += size;
	}
	wall = mono_sec() - t0;
	if (!rc)
		printf("  strata-warm epoch 1 through the cache (untimed fill): %.1f MB/s, %.3f CPU s/GB\n",
		       (double)total / wall / 1e6, (bt_cpu_sec() - c0) / ((double)total / 1e9));
	free(buf);
	return rc;
}

/* The warm search: epochs after the first, from sw's cache. */
static struct bt_result bt_warm(struct bt_run *r, struct strata *sw, const char *root,
				const struct bt_opts *o, int *fails)
{
	struct strata_cache_stats st = { .stats_size = sizeof(st) };
	struct strata_file **sf = calloc(r->nfiles, sizeof(*sf)), **cold = r->sf;
	struct strata *s = r->s;
	struct bt_result res = { 0 };
	int rc = sf ? bt_fill(r, sw, root, sf) : -ENOMEM;

	if (!rc) {
		r->sf = sf;
		r->s = sw;
		res = bt_search(r, "strata-warm", o->au, (uint32_t)o->max_accel, fails);
		r->sf = cold;
		r->s = s;
		if (!strata_cache_stats(sw, &st))
			printf("  strata-warm cache: %llu hits, %llu misses, %.1f MB in DRAM of %.1f MB, %llu evictions\n",
			       (unsigned long long)st.hits, (unsigned long long)st.misses,
			       (double)st.mem_bytes / 1e6, (double)st.mem_limit / 1e6,
			       (unsigned long long)st.evictions);
	} else {
		cli_err("bench train: %s: filling the cache: %s", r->w->name, strata_strerror(rc));
		(*fails)++;
	}
	for (uint32_t f = 0; sf && f < r->nfiles; f++)
		if (sf[f])
			strata_close(sf[f]);
	free(sf);
	return res;
}

static int bt_workload_run(const struct bt_workload *w, const struct bt_opts *o,
			   struct strata *s, struct strata *sw, const char *root, int *fails)
{
	struct bt_run r = { .w = w, .seconds = o->seconds, .threads = (uint32_t)o->threads,
			    .depth = 32 };
	struct bt_result cold = { 0 }, warm = { 0 }, local = { 0 };
	char cdir[PATH_MAX], ldir[PATH_MAX];
	int rc;

	r.scale = o->scale > 0 ? o->scale : w->def_scale;
	r.nfiles = o->files > 0 ? (uint32_t)o->files : w->def_files;
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	rc = bt_layout(&r);
	if (!rc && r.nsamples < w->batch)
		rc = -EINVAL;
	r.sf = calloc(r.nfiles, sizeof(*r.sf));
	r.fds = malloc(r.nfiles * sizeof(*r.fds));
	if (!r.sf || !r.fds)
		rc = -ENOMEM;
	for (uint32_t f = 0; r.fds && f < r.nfiles; f++)
		r.fds[f] = -1;
	printf("%s: %u files x %u sample(s) of ~%.3f MB (scale %.4g of %.3f MB), batch %u, compute %.4f s/batch (%.3f s x %.4g), %u reader threads, %.1f s per trial\n",
	       w->name, r.nfiles, w->per_file, w->sample_mb * r.scale, r.scale, w->sample_mb,
	       w->batch, w->compute_s * r.scale, w->compute_s, r.scale, r.threads, r.seconds);
	printf("  one accelerator needs %.1f MB/s\n",
	       w->sample_mb * r.scale * w->batch / (w->compute_s * r.scale));
	fflush(stdout);
	snprintf(cdir, sizeof(cdir), "/train-%s", w->name);
	snprintf(ldir, sizeof(ldir), "%s/local-%s", root, w->name);
	if (!rc && s && !o->local_only) {
		r.s = s;
		rc = strata_mkdir(s, cdir, 0755);
		rc = rc == -EEXIST ? 0 : rc;
		if (!rc)
			rc = bt_generate(&r, cdir, true);
		if (!rc)
			cold = bt_search(&r, "strata-cold", o->au, (uint32_t)o->max_accel, fails);
		if (!rc && sw)
			warm = bt_warm(&r, sw, cdir, o, fails);
		r.s = NULL;
	}
	if (!rc) {
		rc = mkdir(ldir, 0755) < 0 && errno != EEXIST ? -errno : 0;
		if (!rc)
			rc = bt_generate(&r, ldir, false);
		if (!rc)
			local = bt_search(&r, "local", o->au, (uint32_t)o->max_accel, fails);
	}
	if (rc) {
		cli_err("bench train: %s: %s", w->name, strata_strerror(rc));
		(*fails)++;
	} else if (s && !o->local_only) {
		printf("%s client CPU per GB read: strata cold %.3f s (%.2fx local), strata warm %.3f s (%.2fx local), local %.3f s\n",
		       w->name, cold.cpu_gb, local.cpu_gb > 0 ? cold.cpu_gb / local.cpu_gb : 0,
		       warm.cpu_gb, local.cpu_gb > 0 ? warm.cpu_gb / local.cpu_gb : 0, local.cpu_gb);
		printf("%s storage daemons' CPU per GB read: strata cold %.3f s, strata warm %.3f s\n",
		       w->name, cold.dcpu_gb, warm.dcpu_gb);
		printf("%s warm: strata %u accelerator(s), local %u accelerator(s)\n", w->name,
		       warm.accel, local.accel);
		printf("%s cold: strata %u accelerator(s), local %u accelerator(s)\n", w->name,
		       cold.accel, local.accel);
	}
	fflush(stdout);
	bt_free_files(&r);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	return rc;
}

int bench_train(int argc, char **argv)
{
	struct bt_opts o = { .workload = "all", .seconds = 3, .au = 0.9, .threads = 4,
			     .max_accel = 64, .cache_mb = 2048 };
	char root[PATH_MAX], cdir[PATH_MAX], mgmt[64];
	struct strata *s = NULL, *sw = NULL;
	int rc, fails = 0, ran = 0;
	bool up = false;

	rc = bt_parse(argc, argv, &o);
	if (rc)
		return rc == 1 ? bt_usage() : rc;
	snprintf(root, sizeof(root), "/tmp/strata-bench-train-XXXXXX");
	if (!mkdtemp(root)) {
		cli_err("bench train: cannot create a temp dir: %s", strerror(errno));
		return 1;
	}
	snprintf(cdir, sizeof(cdir), "%s/cluster", root);
	if (!o.local_only) {
		/* The local baseline reads from the page cache after its first
		 * pass; the storage daemons read through it too. */
		if (local_cluster_up(cdir, 3, 0, "--node.log_level=warn --storage.buffered_reads=true",
				     mgmt, sizeof(mgmt))) {
			fails++;
			goto out;
		}
		up = true;
		/* Cold reads must not meet a cache the environment names. */
		unsetenv("STRATA_CACHE_MEM");
		unsetenv("STRATA_CACHE_DIR");
		unsetenv("STRATA_CACHE_DISK");
		unsetenv("STRATA_CACHE_BLOCK");
		rc = cli_connect(mgmt, cdir, &s);
		if (!rc && (o.cache_mb || (o.cache_dir && *o.cache_dir))) {
			struct strata_opts so;

			strata_opts_init(&so, sizeof(so));
			so.cache_mem_bytes = (uint64_t)o.cache_mb << 20;
			so.cache_dir = o.cache_dir;
			rc = cli_connect_opts(mgmt, cdir, &so, &sw);
		}
		if (rc) {
			cli_err("bench train: cannot use the cluster at %s: %s", mgmt,
				strata_strerror(rc));
			fails++;
			goto out;
		}
	}
	printf("strata bench train: emulated accelerators, AU target %.0f%%, %s vs a local directory "
	       "(%s; the dataset fits in the page cache, so the local figures are memory reads after "
	       "the first pass)\n", o.au * 100,
	       o.local_only ? "no cluster" : "local cluster of 3 storage daemons, R=3", root);
	for (size_t i = 0; i < sizeof(bt_workloads) / sizeof(bt_workloads[0]); i++) {
		if (strcmp(o.workload, "all") && strcmp(o.workload, bt_workloads[i].name))
			continue;
		ran++;
		bt_workload_run(&bt_workloads[i], &o, s, sw, root, &fails);
	}
	if (!ran) {
		cli_err("bench train: unknown workload '%s' (unet3d, resnet50, cosmoflow, all)",
			o.workload);
		fails++;
	}
out:
	strata_disconnect(sw);
	strata_disconnect(s);
	if (up && local_cluster_down(cdir))
		fails++;
	bench_rmtree(root);
	return fails ? 1 : 0;
}

/* The source tree's python/ dir: $STRATA_PYTHON, else found from where
 * this file was compiled (__FILE__ is relative to the build dir, which is
 * two levels above this program in the build tree). */
static int bt_python_dir(const char *build, char *out, size_t len)
{
	const char *env = getenv("STRATA_PYTHON");
	char src[PATH_MAX], *p;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		return 0;
	}
	if (__FILE__[0] == '/')
		snprintf(src, sizeof(src), "%s", __FILE__);
	else
		snprintf(src, sizeof(src), "%s/%s", build, __FILE__);
	for (int i = 0; i < 3; i++) {		/* strip bench_train.c, cli, src */
		p = strrchr(src, '/');
		if (!p)
			return -ENOENT;
		*p = '\0';
	}
	snprintf(out, len, "%s/python", src);
	return access(out, R_OK) == 0 ? 0 : -ENOENT;
}

int bench_ckpt(int argc, char **argv)
{
	char self[PATH_MAX], build[PATH_MAX], py[PATH_MAX], lib[PATH_MAX], script[PATH_MAX];
	const char *args[64];
	int k = 0, rc = cli_self_path(self, sizeof(self));

	if (rc) {
		cli_err("bench ckpt: cannot find this program: %s", strerror(-rc));
		return 1;
	}
	snprintf(build, sizeof(build), "%s", self);
	for (int i = 0; i < 3; i++) {		/* strata, cli, src */
		char *p = strrchr(build, '/');

		if (p)
			*p = '\0';
	}
	if (bt_python_dir(build, py, sizeof(py))) {
		cli_err("bench ckpt: cannot find python/strata (set STRATA_PYTHON to the repository's python dir)");
		return 1;
	}
	/* The benchmark lives beside the package, not in it. */
	if (snprintf(script, sizeof(script), "%s/bench/bench_ckpt.py", py) >= (int)sizeof(script) ||
	    access(script, R_OK) != 0) {
		cli_err("bench ckpt: cannot find '%s/bench/bench_ckpt.py' (set STRATA_PYTHON "
			"to the repository's python dir)", py);
		return 1;
	}
	snprintf(lib, sizeof(lib), "%s/libstrata.so", build);
	setenv("PYTHONPATH", py, 1);
	if (!getenv("STRATA_LIB") && access(lib, R_OK) == 0)
		setenv("STRATA_LIB", lib, 1);
	setenv("STRATA_CLI", self, 1);
	args[k++] = "/usr/bin/python3";
	args[k++] = script;
	for (int i = 1; i < argc && k < 63; i++)
		args[k++] = argv[i];
	args[k] = NULL;
	fflush(stdout);
	execv(args[0], (char *const *)args);
	cli_err("bench ckpt: cannot run /usr/bin/python3: %s", strerror(errno));
	return 1;
}
