/*
 * strata bench chunk: sequential 1 MiB and random 4 KiB / 128 KiB reads
 * and writes against a live local cluster (R=1 and R=3), each beside the
 * same I/O pattern done by the benchmark itself on a local O_DIRECT file
 * (io_uring, same queue depth, same filesystem) in the same run.
 *
 * The file under test is laid out as Strata lays out a file: 4 MiB chunks
 * spread over the chain table, so sequential 1 MiB writes are appends to
 * chunks and random writes are overwrites inside chunks.
 *
 * The overwrite rows (chunk block updates) are also set beside fio on the
 * same local file (O_DIRECT, io_uring, same queue depth), and the
 * sequential 1 MiB overwrite beside the fresh sequential write of the same
 * run.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <liburing.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "client/storage_client.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "common/config.h"
#include "common/layout.h"
#include "common/rand.h"
#include "net/reactor.h"
#include "storage/chunk_store.h"
#include "strata/errors.h"

#define CHUNK (4u << 20)

struct pattern {
	const char *name;
	uint32_t io;
	bool write;
	bool random;
	bool over;      /* rewrites what the first write wrote */
};

static const struct pattern patterns[] = {
	{ "seq write 1 MiB", 1 << 20, true, false, false },
	{ "seq overwrite 1 MiB", 1 << 20, true, false, true },
	{ "seq read 1 MiB", 1 << 20, false, false, false },
	{ "rand read 4 KiB", 4096, false, true, false },
	{ "rand read 128 KiB", 128 << 10, false, true, false },
	{ "rand write 4 KiB", 4096, true, true, true },
	{ "rand write 128 KiB", 128 << 10, true, true, false },
};

struct gen {
	const struct pattern *p;
	uint64_t region;	/* bytes */
	uint64_t next;
	uint64_t rng;
};

static uint64_t gen_next(struct gen *g)
{
	uint64_t off;

	if (g->p->random) {
		off = rng_below(&g->rng, g->region / g->p->io) * g->p->io;
	} else {
		off = g->next;
		g->next += g->p->io;
		if (g->next + g->p->io > g->region)
			g->next = 0;
	}
	return off;
}

/* ---- local O_DIRECT baseline through io_uring ---- */

static double local_run(const char *path, const struct pattern *p, uint64_t region, int qd,
			double seconds, uint64_t *written)
{
	struct io_uring ring;
	struct gen g = { p, region, 0, 42 };
	int fd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
	void **bufs = calloc((size_t)qd, sizeof(void *));
	uint64_t done = 0, inflight = 0;
	double t0, deadline;

	if (fd < 0 || io_uring_queue_init((unsigned)qd, &ring, 0) < 0) {
		cli_err("local baseline: cannot open '%s' with O_DIRECT: %s", path, strerror(errno));
		return 0;
	}
	for (int i = 0; i < qd; i++) {
		bufs[i] = abuf_alloc(p->io);
		memset(bufs[i], 0x5a, p->io);
	}
	t0 = mono_sec();
	deadline = t0 + seconds;
	for (int i = 0; i < qd; i++) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
		uint64_t off = gen_next(&g);

		if (p->write)
			io_uring_prep_write(sqe, fd, bufs[i], p->io, off);
		else
			io_uring_prep_read(sqe, fd, bufs[i], p->io, off);
		io_uring_sqe_set_data(sqe, bufs[i]);
		inflight++;
	}
	io_uring_submit(&ring);
	while (inflight) {
		struct io_uring_cqe *cqe;
		void *b;

		if (io_uring_wait_cqe(&ring, &cqe) < 0)
			break;
		b = io_uring_cqe_get_data(cqe);
		if (cqe->res < 0) {
			cli_err("local baseline: %s", strerror(-cqe->res));
			inflight = 0;
			break;
		}
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
		done++;
		if (mono_sec() < deadline) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			uint64_t off = gen_next(&g);

			if (p->write)
				io_uring_prep_write(sqe, fd, b, p->io, off);
			else
				io_uring_prep_read(sqe, fd, b, p->io, off);
			io_uring_sqe_set_data(sqe, b);
			io_uring_submit(&ring);
			inflight++;
		}
	}
	t0 = mono_sec() - t0;
	if (written && p->write && !p->random)
		*written = g.next ? g.next : region;
	io_uring_queue_exit(&ring);
	close(fd);
	for (int i = 0; i < qd; i++)
		abuf_free(bufs[i]);
	free(bufs);
	return (double)done * p->io / t0;
}

/* ---- fio on the same local file ---- */

/*
 * Bytes per second fio writes with pattern p over the first region bytes
 * of the existing file path (O_DIRECT, io_uring, queue depth qd), or 0
 * (said why) when fio is missing or fails. fio is scripts/deps.sh's.
 */
static double fio_run(const char *path, const struct pattern *p, uint64_t region, int qd,
		      double seconds)
{
	char a_file[PATH_MAX + 16], a_bs[32], a_size[48], a_qd[32], a_rt[32];
	const char *argv[] = { "fio", "--name=strata-bench", a_file, "--direct=1",
			       "--ioengine=io_uring", p->random ? "--rw=randwrite" : "--rw=write",
			       a_bs, a_size, a_qd, a_rt, "--time_based", "--output-format=json",
			       NULL };
	json_t *root;
	int status;
	double v = 0;

	snprintf(a_file, sizeof(a_file), "--filename=%s", path);
	snprintf(a_bs, sizeof(a_bs), "--bs=%u", p->io);
	snprintf(a_size, sizeof(a_size), "--size=%llu",
		 (unsigned long long)(region / p->io * p->io));
	snprintf(a_qd, sizeof(a_qd), "--iodepth=%d", qd);
	snprintf(a_rt, sizeof(a_rt), "--runtime=%.0f", seconds < 1 ? 1 : seconds);
	root = bench_run_json(argv, (seconds < 1 ? 1 : seconds) + 120, &status);
	if (!root) {
		cli_err("bench chunk: fio baseline failed (status %d); is fio installed "
			"(scripts/deps.sh)?", status);
		return 0;
	}
	v = json_number_value(json_object_get(json_object_get(
		json_array_get(json_object_get(root, "jobs"), 0), "write"), "bw_bytes"));
	json_decref(root);
	if (v <= 0)
		cli_err("bench chunk: no write bandwidth in fio's output");
	return v;
}

/* ---- the chunk engine alone ---- */

#define ENG_MAX (1ull << 30)	/* bytes the engine rows write at most */

struct eng_run {
	struct chunk_store *cs;
	const uint8_t *buf;
	uint32_t io, crc;
	bool random, wrap;
	uint64_t region, next, rng, done, inflight;
	uint64_t ver[ENG_MAX / CHUNK];
	double deadline;
	int err;
};

static void eng_issue(struct eng_run *er);

static void eng_done(void *arg, int status, const struct chunk_info *info)
{
	struct eng_run *er = arg;

	(void)info;
	er->inflight--;
	er->done++;
	if (status && !er->err)
		er->err = status;
	if (!er->err && mono_sec() < er->deadline)
		eng_issue(er);
}

static void eng_issue(struct eng_run *er)
{
	struct chunk_id id = { 1, 0 };
	uint64_t off;
	int rc;

	if (er->random) {
		off = rng_below(&er->rng, er->region / er->io) * er->io;
	} else {
		if (er->next + er->io > er->region) {
			if (!er->wrap)
				return;
			er->next = 0;
		}
		off = er->next;
		er->next += er->io;
	}
	id.idx = off / CHUNK;
	/* Versions rise in submission order, which is each chunk's order. */
	rc = chunk_write(er->cs, &id, (uint32_t)(off % CHUNK), er->buf, er->io, er->crc,
			 ++er->ver[id.idx], eng_done, er);
	if (rc && !er->err)
		er->err = rc;
	if (!rc)
		er->inflight++;
}

/* Bytes per second of one pattern straight on the chunk engine. */
static double eng_phase(struct eng_run *er, uint32_t io, bool random, bool wrap, int qd,
			double seconds)
{
	double t0 = mono_sec();

	er->io = io;
	er->crc = crc32c(0, er->buf, io);
	er->random = random;
	er->wrap = wrap;
	er->next = 0;
	er->done = 0;
	er->deadline = t0 + seconds;
	for (int i = 0; i < qd; i++)
		eng_issue(er);
	while (er->inflight)
		if (chunk_store_wait(er->cs, 1000) < 0 && !er->err)
			er->err = -EIO;
	return (double)er->done * io / (mono_sec() - t0);
}

/*
 * The chunk engine alone (no network, no replication) on the bench's
 * directory: fresh sequential 1 MiB writes (appends to 4 MiB chunks, at
 * most 1 GiB), then sequential 1 MiB and random 4 KiB overwrites of what
 * they wrote (block updates), each overwrite beside fio on a file of the
 * same size there. Returns 0 or 1 (said why).
 */
static int engine_rows(const char *dir, int qd, double seconds)
{
	char edir[PATH_MAX], fpath[PATH_MAX];
	struct chunk_store_opts o;
	struct eng_run *er = calloc(1, sizeof(*er));
	uint8_t *buf = abuf_alloc(1 << 20);
	double fresh, c, f;
	int rc;

	snprintf(edir, sizeof(edir), "%s/engine", dir);
	snprintf(fpath, sizeof(fpath), "%s/engine-fio.dat", dir);
	if (!er || !buf) {
		free(er);
		abuf_free(buf);
		return 1;
	}
	memset(buf, 0x5a, 1 << 20);
	chunk_store_opts_init(&o, sizeof(o));
	o.queue_depth = (uint32_t)qd;
	rc = chunk_store_open(edir, &o, &er->cs);
	if (rc) {
		cli_err("bench chunk: cannot open a chunk store in '%s': %s", edir, strata_strerror(rc));
		free(er);
		abuf_free(buf);
		return 1;
	}
	er->buf = buf;
	er->rng = 42;
	er->region = ENG_MAX;
	fresh = eng_phase(er, 1 << 20, false, false, qd, seconds);
	er->region = er->next;
	printf("%-4s %-20s %10.1f MB/s %15s %7s  (%.0f MiB in %llu chunks)\n", "eng",
	       "seq write 1 MiB", fresh / 1e6, "", "", (double)er->region / (1 << 20),
	       (unsigned long long)((er->region + CHUNK - 1) / CHUNK));
	c = er->err ? 0 : eng_phase(er, 1 << 20, false, true, qd, seconds);
	if (!er->err) {
		static const struct pattern sp = { "seq overwrite 1 MiB", 1 << 20, true, false, true };

		f = fio_run(fpath, &sp, er->region, qd, seconds);
		printf("%-4s %-20s %10.1f MB/s %10.1f MB/s %7.2f  (fio, local O_DIRECT)\n", "eng",
		       sp.name, c / 1e6, f / 1e6, f > 0 ? c / f : 0);
		printf("%-4s %-20s %10.1f MB/s %10.1f MB/s %7.2f  (fresh seq write, this run)\n",
		       "eng", sp.name, c / 1e6, fresh / 1e6, fresh > 0 ? c / fresh : 0);
	}
	c = er->err ? 0 : eng_phase(er, 4096, true, true, qd, seconds);
	if (!er->err) {
		static const struct pattern rp = { "rand overwrite 4 KiB", 4096, true, true, true };

		f = fio_run(fpath, &rp, er->region, qd, seconds);
		printf("%-4s %-20s %10.1f MB/s %10.1f MB/s %7.2f  (fio, local O_DIRECT)\n", "eng",
		       rp.name, c / 1e6, f / 1e6, f > 0 ? c / f : 0);
	}
	fflush(stdout);
	rc = er->err;
	if (rc)
		printf("%-4s %-20s failed: %s\n", "eng", "chunk engine", strata_strerror(rc));
	chunk_store_close(er->cs);
	unlink(fpath);
	bench_rmtree(edir);
	free(er);
	abuf_free(buf);
	return rc ? 1 : 0;
}

/* ---- the cluster through the storage client ---- */

struct cl_run {
	struct sclient *sc;
	struct gen g;
	struct file_layout layout;
	double deadline;
	uint64_t done, inflight;
	int err;
	pthread_mutex_t lock;
	pthread_cond_t cond;
};

struct cl_slot {
	struct sc_io io;
	struct cl_run *run;
};

static void cl_issue(struct cl_run *run, struct cl_slot *s)
{
	uint64_t off = gen_next(&run->g);

	memset(&s->io, 0, offsetof(struct sc_io, buf));
	s->io.kind = run->g.p->write ? SC_WRITE : SC_READ;
	s->io.ino = 77;
	s->io.idx = off / CHUNK;
	s->io.offset = (uint32_t)(off % CHUNK);
	s->io.len = run->g.p->io;
	s->io.chain_idx = layout_chain_index(&run->layout, s->io.idx);
	run->inflight++;
	sc_submit(run->sc, &s->io);
}

static void cl_done(struct sc_io *io)
{
	struct cl_slot *s = (struct cl_slot *)io;
	struct cl_run *run = s->run;

	/* Runs on the client's reactor thread: only it touches run. */
	run->inflight--;
	run->done++;
	if (io->status && !run->err)
		run->err = io->status;
	if (!run->err && mono_sec() < run->deadline) {
		cl_issue(run, s);
		return;
	}
	if (run->inflight == 0) {
		pthread_mutex_lock(&run->lock);
		pthread_cond_signal(&run->cond);
		pthread_mutex_unlock(&run->lock);
	}
}

struct cl_start {
	struct cl_run *run;
	struct cl_slot *slots;
	int qd;
};

static void cl_start_on(void *arg)
{
	struct cl_start *st = arg;

	for (int i = 0; i < st->qd; i++)
		cl_issue(st->run, &st->slots[i]);
}

static double cluster_run(struct sclient *sc, struct reactor *r, const struct pattern *p,
			  uint64_t region, int qd, double seconds, int *err, uint64_t *written)
{
	struct cl_run run = { .sc = sc, .g = { p, region, 0, 42 } };
	struct cl_slot *slots = calloc((size_t)qd, sizeof(*slots));
	struct cl_start st = { &run, slots, qd };
	uint32_t table = sclient_table_len(sc);
	double t0;

	run.layout.chunk_size = CHUNK;
	run.layout.table_len = table;
	run.layout.stripe = table < 16 ? table : 16;
	run.layout.seed = 77;
	pthread_mutex_init(&run.lock, NULL);
	pthread_cond_init(&run.cond, NULL);
	for (int i = 0; i < qd; i++) {
		slots[i].run = &run;
		slots[i].io.buf = abuf_alloc(p->io);
		slots[i].io.cb = cl_done;
		memset(slots[i].io.buf, 0x5a, p->io);
	}
	t0 = mono_sec();
	run.deadline = t0 + seconds;
	pthread_mutex_lock(&run.lock);
	reactor_post(r, cl_start_on, &st);
	while (run.done == 0 || run.inflight)
		pthread_cond_wait(&run.cond, &run.lock);
	pthread_mutex_unlock(&run.lock);
	t0 = mono_sec() - t0;
	*err = run.err;
	if (written)
		*written = run.g.next ? run.g.next : region;
	for (int i = 0; i < qd; i++)
		abuf_free(slots[i].io.buf);
	free(slots);
	return (double)run.done * p->io / t0;
}

static void print_row(const char *cfg, const char *name, double a, double b)
{
	printf("%-4s %-20s %10.1f MB/s %10.1f MB/s %7.2f\n", cfg, name, a / 1e6, b / 1e6,
	       b > 0 ? a / b : 0);
	fflush(stdout);
}

int bench_chunk(int argc, char **argv)
{
	char dir[] = "/tmp/strata-bench-chunk-XXXXXX", cdir[64], path[96], mgmt[64];
	double seconds = 3;
	int64_t qd = 16;
	int fails = 0;
	static const int rs[] = { 1, 3 };

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			seconds = strtod(argv[++i], NULL);
		} else if (strcmp(argv[i], "--qd") == 0 && i + 1 < argc) {
			if (parse_i64(argv[++i], &qd) || qd < 1 || qd > 256) {
				cli_err("bench chunk: --qd must be in 1..256");
				return 2;
			}
		} else {
			cli_err("bench chunk: unexpected argument '%s'", argv[i]);
			return 2;
		}
	}
	if (seconds <= 0 || seconds > 600 || !mkdtemp(dir)) {
		cli_err("bench chunk: bad --seconds or cannot create a temp dir");
		return 2;
	}
	printf("strata bench chunk: QD %lld, %.0f s per test, 4 MiB chunks; baseline: the same pattern on a local O_DIRECT file (io_uring) in '%s'\n",
	       (long long)qd, seconds, dir);
	printf("%-4s %-20s %15s %15s %7s\n", "R", "test", "strata", "local O_DIRECT", "ratio");
	fails += engine_rows(dir, (int)qd, seconds);
	for (size_t ri = 0; ri < 2; ri++) {
		struct reactor *r = NULL;
		struct sclient *sc = NULL;
		uint64_t region = 0, cregion = 0;
		double fresh = 0;
		char cfg[8];
		int rc;

		snprintf(cdir, sizeof(cdir), "%s/r%d", dir, rs[ri]);
		snprintf(path, sizeof(path), "%s/local-r%d.dat", dir, rs[ri]);
		snprintf(cfg, sizeof(cfg), "R=%d", rs[ri]);
		if (local_cluster_up(cdir, rs[ri], rs[ri], "--node.log_level=warn", mgmt, sizeof(mgmt)))
			return 1;
		rc = reactor_new("bench-chunk", &r);
		if (!rc)
			rc = reactor_start(r);
		if (!rc) {
			struct sclient_opts so;
			struct net_cred cred;
			struct cluster_key key;
			char kp[PATH_MAX + 16], err[256];

			/* The cluster's key, as a daemon: the bench writes
			 * chunks of no file, which only daemons may (a token
			 * needs a chunk capability of a file, from meta). */
			snprintf(kp, sizeof(kp), "%s/cluster.key", cdir);
			net_cred_init(&cred);
			rc = cluster_key_load(kp, &key, err, sizeof(err));
			if (!rc)
				net_cred_from_key(&cred, &key);
			sclient_opts_init(&so, sizeof(so));
			so.cred = &cred;
			if (!rc)
				rc = sclient_new(r, mgmt, &so, &sc);
			net_cred_release(&cred);
		}
		if (!rc)
			rc = sclient_wait_map(sc, 20000);
		if (rc) {
			cli_err("bench chunk: cannot reach the cluster: %s", strata_strerror(rc));
			fails++;
		}
		for (size_t t = 0; !rc && t < sizeof(patterns) / sizeof(patterns[0]); t++) {
			const struct pattern *p = &patterns[t];
			uint64_t wrote = 0;
			double l, c;
			int err = 0;

			/* The first write decides the region later tests use,
			 * on each side what that side wrote. */
			l = local_run(path, p, region ? region : (64ull << 30), (int)qd, seconds,
				      !region ? &wrote : NULL);
			if (!region)
				region = wrote;
			c = cluster_run(sc, r, p, cregion ? cregion : (64ull << 30), (int)qd, seconds,
					&err, !cregion ? &wrote : NULL);
			if (!cregion)
				cregion = wrote;
			if (err) {
				printf("%-4s %-20s failed: %s\n", cfg, p->name, strata_strerror(err));
				fails++;
				continue;
			}
			print_row(cfg, p->name, c, l);
			if (t == 0)
				fresh = c;
			if (p->over) {
				double f = fio_run(path, p, region, (int)qd, seconds);

				printf("%-4s %-20s %10.1f MB/s %10.1f MB/s %7.2f  (fio, local O_DIRECT)\n",
				       cfg, p->name, c / 1e6, f / 1e6, f > 0 ? c / f : 0);
				if (!p->random)
					printf("%-4s %-20s %10.1f MB/s %10.1f MB/s %7.2f  (fresh seq write, this run)\n",
					       cfg, p->name, c / 1e6, fresh / 1e6, fresh > 0 ? c / fresh : 0);
				fflush(stdout);
			}
		}
		sclient_free(sc);
		if (r) {
			reactor_stop(r);
			reactor_join(r);
			reactor_free(r);
		}
		local_cluster_down(cdir);
	}
	bench_rmtree(dir);
	return fails ? 1 : 0;
}
