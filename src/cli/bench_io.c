/*
 * strata bench io: the file API of libstrata against a local cluster the
 * benchmark starts (3 storage daemons, R=3), each figure beside the same
 * workload on a local directory of the same filesystem, in the same run:
 *
 *   seq write/read 1 MiB  N threads, each its own file, strata_pwrite /
 *                         strata_pread; local: POSIX pwrite/pread on
 *                         buffered files (the local write phase ends with
 *                         fdatasync, inside its time). Each file is read
 *                         once, then over and over for S seconds (the
 *                         data then in the page cache, at the targets
 *                         and locally).
 *   rand read 4/128 KiB   QD 1, 32 and 256 through one strata ring over the
 *                         N files; local: io_uring at the same QD, O_DIRECT
 *                         (the storage targets use O_DIRECT too).
 *
 * Metadata rates (create, stat, open+read, unlink) are 'strata bench meta'
 * (bench_meta.c).
 *
 * Then the cached libstrata sequential read against raw loopback TCP:
 * 1 MiB reads as request/response (a connection per reader, one request
 * in flight, served from memory: the libstrata read's pattern without the
 * storage), in alternating rounds with N and with 2N readers, the median
 * ratio of each; and one-way streaming of 1 MiB writes (1 and N
 * connections: what the socket layer carries at most).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bench.h"
#include "cli.h"
#include "cli_fs.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/fileio.h"
#include "common/rand.h"
#include "strata/locate.h"
#include "strata/strata.h"

#define BIO_SEQ_IO (1u << 20)
#define BIO_MAX_THREADS 64
#define BIO_WAIT_MS 10000
#define BIO_ROUNDS 3			/* libstrata read / raw loopback, alternated */

struct bio {
	struct strata *s;
	char root[PATH_MAX];		/* scratch space, removed at the end */
	char cdir[PATH_MAX];		/* the cluster */
	char ldir[PATH_MAX];		/* the local baseline */
	int threads;
	double seconds;
	uint64_t cap;			/* bytes per sequential file, at most */
	/* Written by the sequential phase: [0] strata, [1] local. */
	uint64_t region[2][BIO_MAX_THREADS];
	double seq_read2;		/* strata cached read, N threads, median, bytes/s */
	int fails;
	/* --mgmt: a deployed cluster, its files under cprefix (removed at
	 * the end), the baseline iperf3 against iperf_host:iperf_port. */
	const char *remote, *token;
	char cprefix[128];
	char iperf_host[256];
	int iperf_port;
};

static volatile sig_atomic_t bio_stop;

static void bio_on_signal(int sig)
{
	(void)sig;
	bio_stop = 1;
}

static void seq_path(const struct bio *b, bool cluster, int i, char *out, size_t len)
{
	if (cluster)
		snprintf(out, len, "%s/seq/f%02d", b->cprefix, i);
	else
		snprintf(out, len, "%s/seq-%02d", b->ldir, i);
}

/* ---- sequential 1 MiB, one thread per file ---- */

struct seq_arg {
	struct bio *b;
	int idx;			/* the file: one per thread of b->threads */
	uint64_t start;			/* read: where in it this reader begins */
	bool cluster, write;
	bool loop;			/* read: wrap around until the deadline */
	double deadline;
	uint64_t bytes;
	int err;
	pthread_t thr;
};

/* One transfer of n bytes at off: the bytes moved, or a negative errno. */
typedef ssize_t (*seq_io_fn)(void *h, bool write, uint8_t *buf, size_t n, uint64_t off);

static ssize_t seq_io_strata(void *h, bool write, uint8_t *buf, size_t n, uint64_t off)
{
	return write ? strata_pwrite(h, buf, n, off) : strata_pread(h, buf, n, off);
}

static ssize_t seq_io_local(void *h, bool write, uint8_t *buf, size_t n, uint64_t off)
{
	int fd = *(int *)h;
	ssize_t got = write ? pwrite(fd, buf, n, (off_t)off) : pread(fd, buf, n, (off_t)off);

	return got < 0 ? -errno : got;
}

/* The thread's file, 1 MiB at a time: writes until the deadline (wrapping
 * at the cap), reads the region written once, or over and over until
 * the deadline (loop). */
static int seq_loop(struct seq_arg *a, uint8_t *buf, seq_io_fn io, void *h)
{
	struct bio *b = a->b;
	uint64_t *region = &b->region[a->cluster ? 0 : 1][a->idx];
	uint64_t off = a->write || a->start >= *region ? 0 : a->start;

	while (!bio_stop) {
		size_t n = BIO_SEQ_IO;
		ssize_t got;

		if ((a->write || a->loop) && mono_sec() >= a->deadline)
			break;
		if (!a->write) {
			if (off >= *region && a->loop && *region)
				off = 0;
			if (off >= *region)
				break;
			if (n > *region - off)
				n = (size_t)(*region - off);
		}
		got = io(h, a->write, buf, n, off);
		if (got != (ssize_t)n)
			return got < 0 ? (int)got : -EIO;
		a->bytes += n;
		off += n;
		if (a->write && off > *region)
			*region = off;
		if (a->write && off + BIO_SEQ_IO > b->cap)
			off = 0;
	}
	return 0;
}

static int seq_cluster(struct seq_arg *a, uint8_t *buf)
{
	struct strata_file *f = NULL;
	char path[64];
	int rc, crc;

	seq_path(a->b, true, a->idx, path, sizeof(path));
	rc = strata_open(a->b->s, path, a->write ? STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC :
			 STRATA_O_RDONLY, 0644, &f);
	if (rc)
		return rc;
	rc = seq_loop(a, buf, seq_io_strata, f);
	crc = strata_close(f);
	return rc ? rc : crc;
}

static int seq_local(struct seq_arg *a, uint8_t *buf)
{
	char path[PATH_MAX];
	int fd, rc;

	seq_path(a->b, false, a->idx, path, sizeof(path));
	fd = open(path, a->write ? O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC : O_RDONLY | O_CLOEXEC,
		  0644);
	if (fd < 0)
		return -errno;
	rc = seq_loop(a, buf, seq_io_local, &fd);
	if (!rc && a->write && fdatasync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

static void *seq_main(void *arg)
{
	struct seq_arg *a = arg;
	uint8_t *buf = abuf_alloc(BIO_SEQ_IO);

	if (!buf) {
		a->err = -ENOMEM;
		return NULL;
	}
	memset(buf, 0x5a + a->idx, BIO_SEQ_IO);
	a->err = a->cluster ? seq_cluster(a, buf) : seq_local(a, buf);
	abuf_free(buf);
	return NULL;
}

/* Runs n sequential workers (n = b->threads to write: one per file; to
 * read, more share the files, each beginning at its own offset). Returns
 * bytes/s, or 0 with *err. */
static double seq_run_n(struct bio *b, int n, bool cluster, bool write, bool loop, int *err)
{
	struct seq_arg a[BIO_MAX_THREADS];
	uint64_t bytes = 0;
	double t0 = mono_sec();
	int started = 0;

	*err = 0;
	for (int i = 0; i < n && i < BIO_MAX_THREADS; i++) {
		int f = i % b->threads, k = i / b->threads, per = (n + b->threads - 1) / b->threads;
		uint64_t region = b->region[cluster ? 0 : 1][f];

		a[i] = (struct seq_arg){ .b = b, .idx = f, .cluster = cluster, .write = write,
					 .loop = loop, .deadline = t0 + b->seconds };
		a[i].start = region / (uint64_t)per * (uint64_t)k / BIO_SEQ_IO * BIO_SEQ_IO;
		if (write)
			b->region[cluster ? 0 : 1][i] = 0;
		if (pthread_create(&a[i].thr, NULL, seq_main, &a[i])) {
			*err = -EAGAIN;
			break;
		}
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(a[i].thr, NULL);
		bytes += a[i].bytes;
		if (a[i].err && !*err)
			*err = a[i].err;
	}
	t0 = mono_sec() - t0;
	return *err ? 0 : (double)bytes / t0;
}

static double seq_run(struct bio *b, bool cluster, bool write, bool loop, int *err)
{
	return seq_run_n(b, b->threads, cluster, write, loop, err);
}

/* ---- random reads at a queue depth ---- */

/* Through one strata ring over the sequential files. Returns reads/s. */
static double rand_cluster(struct bio *b, size_t io, uint32_t qd, int *err)
{
	struct strata_file *fh[BIO_MAX_THREADS] = { 0 };
	struct strata_ring *r = NULL;
	struct strata_cqe *cqes = calloc(qd, sizeof(*cqes));
	uint8_t **bufs = calloc(qd, sizeof(*bufs));
	uint64_t rng = 42, done = 0, inflight = 0;
	double t0 = 0, deadline;
	int rc = 0;

	if (!cqes || !bufs) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < b->threads && !rc; i++) {
		char path[64];

		if (b->region[0][i] < io) {
			rc = -ENODATA;
			break;
		}
		seq_path(b, true, i, path, sizeof(path));
		rc = strata_open(b->s, path, STRATA_O_RDONLY, 0, &fh[i]);
	}
	for (uint32_t i = 0; i < qd && !rc; i++)
		if (!(bufs[i] = abuf_alloc(io)))
			rc = -ENOMEM;
	if (!rc)
		rc = strata_ring_new(b->s, qd, &r);
	if (rc)
		goto out;
	t0 = mono_sec();
	deadline = t0 + b->seconds;
	for (uint32_t i = 0; i < qd || inflight; i = qd) {
		int got;

		/* The first pass fills the ring; later ones refill each slot
		 * as its read completes. */
		for (; i < qd; i++) {
			int k = (int)(rng_next(&rng) % (uint64_t)b->threads);
			uint64_t off = rng_next(&rng) % (b->region[0][k] / io) * io;

			rc = strata_ring_prep_read(r, fh[k], bufs[i], io, off, i);
			if (rc)
				goto out;
			inflight++;
		}
		rc = strata_ring_submit(r);
		if (rc < 0)
			goto out;
		rc = 0;
		got = strata_ring_wait(r, cqes, qd, 1, BIO_WAIT_MS);
		if (got <= 0) {
			rc = got < 0 ? got : -ETIMEDOUT;
			goto out;
		}
		for (int c = 0; c < got; c++) {
			uint32_t si = (uint32_t)cqes[c].user_data;

			inflight--;
			if (cqes[c].res != (ssize_t)io) {
				rc = cqes[c].res < 0 ? (int)cqes[c].res : -EIO;
				goto out;
			}
			done++;
			if (mono_sec() < deadline && !bio_stop) {
				int k = (int)(rng_next(&rng) % (uint64_t)b->threads);
				uint64_t off = rng_next(&rng) % (b->region[0][k] / io) * io;

				rc = strata_ring_prep_read(r, fh[k], bufs[si], io, off, si);
				if (rc)
					goto out;
				inflight++;
			}
		}
	}
	t0 = mono_sec() - t0;
out:
	strata_ring_free(r);
	for (int i = 0; i < b->threads; i++)
		if (fh[i])
			strata_close(fh[i]);
	for (uint32_t i = 0; bufs && i < qd; i++)
		abuf_free(bufs[i]);
	free(bufs);
	free(cqes);
	*err = rc;
	return rc ? 0 : (double)done / t0;
}

/* Queues a random read of io bytes into buf on one of the local files.
 * Returns 0 or -EBUSY (no free submission entry). */
static int local_prep(struct io_uring *ring, const struct bio *b, const int *fds, uint64_t *rng,
		      void *buf, size_t io, uint64_t si)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
	int k = (int)(rng_next(rng) % (uint64_t)b->threads);
	uint64_t off = rng_next(rng) % (b->region[1][k] / io) * io;

	if (!sqe)
		return -EBUSY;
	io_uring_prep_read(sqe, fds[k], buf, (unsigned)io, off);
	io_uring_sqe_set_data64(sqe, si);
	return 0;
}

/* The same over the local files with io_uring and O_DIRECT. Returns
 * reads/s. */
static double rand_local(struct bio *b, size_t io, uint32_t qd, int *err)
{
	int fds[BIO_MAX_THREADS];
	struct io_uring ring;
	bool ring_ok = false;
	uint8_t **bufs = calloc(qd, sizeof(*bufs));
	uint64_t rng = 42, done = 0, inflight = 0;
	double t0 = 0, deadline;
	int rc = 0;

	for (int i = 0; i < b->threads; i++)
		fds[i] = -1;
	if (!bufs) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; i < b->threads && !rc; i++) {
		char path[PATH_MAX];

		seq_path(b, false, i, path, sizeof(path));
		fds[i] = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fds[i] < 0)
			rc = -errno;
		else if (b->region[1][i] < io)
			rc = -ENODATA;
	}
	for (uint32_t i = 0; i < qd && !rc; i++)
		if (!(bufs[i] = abuf_alloc(io)))
			rc = -ENOMEM;
	if (!rc) {
		rc = io_uring_queue_init(qd, &ring, 0);
		ring_ok = rc == 0;
	}
	if (rc)
		goto out;
	t0 = mono_sec();
	deadline = t0 + b->seconds;
	for (uint32_t i = 0; i < qd && !rc; i++) {
		rc = local_prep(&ring, b, fds, &rng, bufs[i], io, i);
		inflight += !rc;
	}
	io_uring_submit(&ring);
	while (inflight) {
		struct io_uring_cqe *cqe;
		uint64_t si;
		int res, w;

		w = io_uring_wait_cqe(&ring, &cqe);
		if (w < 0) {
			rc = w;
			goto out;
		}
		si = io_uring_cqe_get_data64(cqe);
		res = cqe->res;
		io_uring_cqe_seen(&ring, cqe);
		inflight--;
		if (rc || res != (int)io) {
			if (!rc)
				rc = res < 0 ? res : -EIO;
			/* Reap the rest before the buffers go. */
			while (inflight && io_uring_wait_cqe(&ring, &cqe) == 0) {
				io_uring_cqe_seen(&ring, cqe);
				inflight--;
			}
			goto out;
		}
		done++;
		if (mono_sec() < deadline && !bio_stop) {
			rc = local_prep(&ring, b, fds, &rng, bufs[si], io, si);
			if (rc)
				continue;	/* reaps the rest, then fails */
			io_uring_submit(&ring);
			inflight++;
		}
	}
	t0 = mono_sec() - t0;
out:
	if (ring_ok)
		io_uring_queue_exit(&ring);
	for (int i = 0; i < b->threads; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (uint32_t i = 0; bufs && i < qd; i++)
		abuf_free(bufs[i]);
	free(bufs);
	*err = rc;
	return rc ? 0 : (double)done / t0;
}

/* ---- raw loopback TCP ---- */

/* Two patterns over nconn loopback connections, two threads each:
 *  - streaming: the connecting thread writes 1 MiB at a time, the other
 *    reads (what the socket layer carries at most);
 *  - request/response: the connecting thread sends an 8-byte request and
 *    reads 1 MiB, the other answers from memory: the libstrata read's
 *    pattern (a connection per reader, one request in flight) without
 *    any storage. */
struct raw_arg {
	int fd;
	bool rr;			/* request/response, else streaming */
	bool active;			/* the connecting side: it stops at the deadline */
	double deadline;
	uint64_t bytes;			/* counted by the side that receives data */
	double t_end;
	pthread_t thr;
};

static void *raw_main(void *arg)
{
	struct raw_arg *a = arg;
	uint8_t *buf = abuf_zalloc(BIO_SEQ_IO);
	uint64_t req = 0;

	while (buf) {
		if (a->active && (mono_sec() >= a->deadline || bio_stop))
			break;
		if (a->rr && a->active) {
			req += BIO_SEQ_IO;
			if (write_full(a->fd, &req, sizeof(req)) ||
			    read_full(a->fd, buf, BIO_SEQ_IO))
				break;
			a->bytes += BIO_SEQ_IO;
		} else if (a->rr) {
			if (read_full(a->fd, &req, sizeof(req)) ||
			    write_full(a->fd, buf, BIO_SEQ_IO))
				break;
		} else {
			ssize_t n = a->active ? write(a->fd, buf, BIO_SEQ_IO) :
						read(a->fd, buf, BIO_SEQ_IO);

			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			if (!a->active)
				a->bytes += (uint64_t)n;
		}
	}
	if (a->active)
		shutdown(a->fd, SHUT_WR);
	a->t_end = mono_sec();
	abuf_free(buf);
	return NULL;
}

/* Returns the bytes/s received, 0 on a socket error. */
static double raw_run(int nconn, double seconds, bool rr)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct raw_arg a[2 * BIO_MAX_THREADS];
	socklen_t sl = sizeof(sin);
	int lfd, n = 0, started = 0;
	uint64_t bytes = 0;
	double t0, t_end = 0;

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(lfd, nconn) < 0 || getsockname(lfd, (struct sockaddr *)&sin, &sl) < 0)
		goto out;
	for (; n < nconn; n++) {
		int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int sfd;

		if (cfd < 0)
			break;
		if (connect(cfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
		    (sfd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0) {
			close(cfd);
			break;
		}
		a[2 * n] = (struct raw_arg){ .fd = cfd, .rr = rr, .active = true };
		a[2 * n + 1] = (struct raw_arg){ .fd = sfd, .rr = rr, .active = false };
	}
	if (n < nconn)
		goto out;
	t0 = mono_sec();
	for (int i = 0; i < 2 * n; i++) {
		a[i].deadline = t0 + seconds;
		if (pthread_create(&a[i].thr, NULL, raw_main, &a[i]))
			break;
		started++;
	}
	for (int i = 0; i < started; i++) {
		pthread_join(a[i].thr, NULL);
		/* The receiving side: the reader of a stream, the client of
		 * request/response. */
		if (a[i].active == rr) {
			bytes += a[i].bytes;
			if (a[i].t_end > t_end)
				t_end = a[i].t_end;
		}
	}
	if (started < 2 * n)
		bytes = 0;
	t0 = t_end > t0 ? t_end - t0 : 0;
out:
	for (int i = 0; i < 2 * n; i++)
		close(a[i].fd);
	if (lfd >= 0)
		close(lfd);
	return bytes && t0 > 0 ? (double)bytes / t0 : 0;
}

/* ---- readiness ---- */

/* ---- the table ---- */

static void fmt_rate(char *out, size_t len, double v, bool ops)
{
	if (ops)
		snprintf(out, len, "%.0f op/s", v);
	else
		snprintf(out, len, "%.1f MB/s", v / 1e6);
}

static void row(struct bio *b, const char *name, double c, int cerr, double l, int lerr, bool ops)
{
	char cs[32], ls[32];

	if (cerr || lerr) {
		printf("%-40s failed: %s%s\n", name, cerr ? "strata: " : "local: ",
		       cerr ? strata_strerror(cerr) : strerror(-lerr));
		b->fails++;
		fflush(stdout);
		return;
	}
	fmt_rate(cs, sizeof(cs), c, ops);
	fmt_rate(ls, sizeof(ls), l, ops);
	printf("%-40s %16s %16s %7.2f\n", name, cs, ls, l > 0 ? c / l : 0);
	fflush(stdout);
}

static void run_seq_rows(struct bio *b)
{
	char name[64];
	double c, l;
	int ce, le;

	snprintf(name, sizeof(name), "seq write 1 MiB, %d thr", b->threads);
	c = seq_run(b, true, true, false, &ce);
	l = seq_run(b, false, true, false, &le);
	row(b, name, c, ce, l, le, false);
	/* Pass 1 reads what was written once (the targets read it from
	 * disk: their writes bypass the page cache); pass 2 reads it over
	 * and over for the test's seconds, from the page cache. */
	for (int pass = 1; pass <= 2; pass++) {
		snprintf(name, sizeof(name), "seq read 1 MiB, %d thr, %s", b->threads,
			 pass == 1 ? "first pass" : "cached");
		c = seq_run(b, true, false, pass == 2, &ce);
		l = seq_run(b, false, false, pass == 2, &le);
		row(b, name, c, ce, l, le, false);
	}
}

/*
 * Authentication on vs off: the 1 MiB sequential rows against this
 * cluster (a cluster key, the client proving a token, chunk capabilities
 * checked) and against a keyless twin started now, its files written and
 * read once first (unmeasured), in alternating rounds (on, off, on, off,
 * on, off); each side's median. Each cluster keeps its written regions.
 */
#define AUTH_ROUNDS 3

static void run_auth_twin(struct bio *b)
{
	struct strata *on = b->s, *off = NULL;
	uint64_t reg_on[BIO_MAX_THREADS], reg_off[BIO_MAX_THREADS] = { 0 };
	char dir[PATH_MAX + 16], mgmt[64], name[64];
	struct strata_opts o;
	int rc;

	snprintf(dir, sizeof(dir), "%s/keyless", b->root);
	if (local_cluster_up_keyless(dir, 3, 0,
				     "--node.log_level=warn --storage.buffered_reads=true", mgmt,
				     sizeof(mgmt))) {
		b->fails++;
		return;
	}
	strata_opts_init(&o, sizeof(o));
	o.token = "";		/* a keyless cluster: no credential to prove */
	rc = strata_connect(mgmt, &o, &off);
	if (!rc)
		rc = strata_mkdir(off, "/bench", 0755);
	if (!rc)
		rc = strata_mkdir(off, "/bench/seq", 0755);
	if (rc) {
		printf("auth twin: cannot set up the keyless cluster at %s: %s\n", mgmt,
		       strata_strerror(rc));
		b->fails++;
		goto out;
	}
	printf("%-40s %16s %16s %7s\n", "authentication (median of 3 rounds)", "auth on", "auth off",
	       "on/off");
	memcpy(reg_on, b->region[0], sizeof(reg_on));
	/* Unmeasured: the twin's files written and read once, as this
	 * cluster's were by the rows above. */
	b->s = off;
	if (!seq_run(b, true, true, false, &rc) || !seq_run(b, true, false, false, &rc)) {
		row(b, "auth twin warm-up", 1, 0, 0, rc ? rc : -EIO, false);
		goto out;
	}
	memcpy(reg_off, b->region[0], sizeof(reg_off));
	for (int kind = 0; kind < 2 && !bio_stop; kind++) {
		bool write = kind == 0;
		double v[2][AUTH_ROUNDS], med[2];
		int err[2] = { 0, 0 };

		for (int r = 0; r < AUTH_ROUNDS && !bio_stop; r++) {
			for (int side = 0; side < 2; side++) {
				int e;

				b->s = side ? off : on;
				memcpy(b->region[0], side ? reg_off : reg_on, sizeof(reg_on));
				v[side][r] = seq_run(b, true, write, !write, &e);
				memcpy(side ? reg_off : reg_on, b->region[0], sizeof(reg_on));
				if (e && !err[side])
					err[side] = e;
			}
		}
		bench_sort(v[0], AUTH_ROUNDS);
		bench_sort(v[1], AUTH_ROUNDS);
		med[0] = v[0][AUTH_ROUNDS / 2];
		med[1] = v[1][AUTH_ROUNDS / 2];
		snprintf(name, sizeof(name), "seq %s 1 MiB, %d thr%s", write ? "write" : "read",
			 b->threads, write ? "" : ", cached");
		row(b, name, med[0], err[0], med[1], err[1] ? -EIO : 0, false);
	}
out:
	b->s = on;
	memcpy(b->region[0], reg_on, sizeof(reg_on));
	strata_disconnect(off);
	if (local_cluster_down(dir))
		b->fails++;
}

static void run_rand_rows(struct bio *b)
{
	static const size_t ios[] = { 4096, 128 << 10 };
	static const uint32_t qds[] = { 1, 32, 256 };
	char name[64];

	for (size_t i = 0; i < sizeof(ios) / sizeof(ios[0]); i++) {
		for (size_t q = 0; q < sizeof(qds) / sizeof(qds[0]) && !bio_stop; q++) {
			double c, l;
			int ce, le;

			snprintf(name, sizeof(name), "rand read %zu KiB, QD %u", ios[i] >> 10, qds[q]);
			c = rand_cluster(b, ios[i], qds[q], &ce);
			l = rand_local(b, ios[i], qds[q], &le);
			if (ios[i] == 4096) {
				row(b, name, c, ce, l, le, true);
			} else {
				row(b, name, c * (double)ios[i], ce, l * (double)ios[i], le, false);
			}
		}
	}
}

/*
 * The cached libstrata read against raw request/response over as many
 * streams, in alternating rounds: throughput on this kind of shared VM
 * drifts by tens of percent within a minute, so each ratio is of two
 * figures taken seconds apart, and the median of the rounds is printed.
 * With N and 2N readers: one in flight each, so 2N keeps the cores busy
 * while a reply is on its way.
 */
static void run_read_vs_raw(struct bio *b)
{
	int err;

	/* One untimed pass first: pages idle through the tests before may
	 * have been reclaimed (see RESULTS.md on DAMON). */
	seq_run(b, true, false, false, &err);
	if (err) {
		printf("libstrata seq read 1 MiB: warm-up pass failed (%s)\n", strata_strerror(err));
		b->fails++;
		return;
	}
	for (int k = 1; k <= 2 && !bio_stop; k++) {
		int n = k * b->threads, got = 0;
		double ratio[BIO_ROUNDS], gbs[BIO_ROUNDS];

		if (n > BIO_MAX_THREADS)
			break;
		for (int r = 0; r < BIO_ROUNDS && !bio_stop; r++) {
			double c = seq_run_n(b, n, true, false, true, &err);
			double raw = err ? 0 : raw_run(n, b->seconds, true);

			if (c <= 0 || raw <= 0) {
				printf("libstrata seq read 1 MiB (%d thr, cached) / raw request/response: failed (%s)\n",
				       n, err ? strata_strerror(err) : "raw loopback TCP");
				b->fails++;
				return;
			}
			gbs[got] = c;
			ratio[got++] = c / raw;
			printf("libstrata seq read 1 MiB (%d thr, cached) / raw request/response (%d conn), round %d: %.2f GB/s / %.2f GB/s = %.2f\n",
			       n, n, r + 1, c / 1e9, raw / 1e9, c / raw);
			fflush(stdout);
		}
		if (!got)
			return;
		bench_sort(ratio, (size_t)got);
		bench_sort(gbs, (size_t)got);
		if (k == 1)
			b->seq_read2 = gbs[got / 2];
		printf("libstrata seq read 1 MiB (%d thr, cached) / raw request/response, median of %d rounds: %.2f GB/s, ratio = %.2f\n",
		       n, got, gbs[got / 2] / 1e9, ratio[got / 2]);
		fflush(stdout);
	}
}

static void run_loopback(struct bio *b)
{
	double one = raw_run(1, b->seconds, false), many = 0, best;

	if (b->threads > 1)
		many = raw_run(b->threads, b->seconds, false);
	best = one > many ? one : many;
	printf("raw loopback TCP, one-way streaming of 1 MiB writes: %.2f GB/s (1 connection)",
	       one / 1e9);
	if (b->threads > 1)
		printf(", %.2f GB/s (%d connections)", many / 1e9, b->threads);
	printf("\n");
	if (best <= 0) {
		printf("raw loopback TCP: failed\n");
		b->fails++;
		return;
	}
	if (b->seq_read2 > 0)
		printf("libstrata seq read 1 MiB (%d thr, cached, median) / raw streaming (best): %.2f GB/s / %.2f GB/s = %.2f\n",
		       b->threads, b->seq_read2 / 1e9, best / 1e9, b->seq_read2 / best);
	fflush(stdout);
}

static int parse_iperf(const char *val, struct bio *b)
{
	const char *colon = strrchr(val, ':');
	size_t hl = colon ? (size_t)(colon - val) : strlen(val);
	int64_t port = 5201;

	if (!hl || hl >= sizeof(b->iperf_host) || memchr(val, ' ', hl)) {
		cli_err("bench io: --iperf3 '%s' is not HOST[:PORT]", val);
		return 2;
	}
	if (colon && bench_opt_int("bench io", "--iperf3 port", colon + 1, 1, 65535, &port))
		return 2;
	memcpy(b->iperf_host, val, hl);
	b->iperf_host[hl] = '\0';
	b->iperf_port = (int)port;
	return 0;
}

/*
 * The raw network between this client and the iperf3 server at
 * b->iperf_host: bytes/s received over b->threads streams in b->seconds
 * (at least 1), this client sending (reverse false) or receiving; 0 with
 * why in why[] when iperf3 is missing or fails.
 */
static double iperf_run(struct bio *b, bool reverse, char *why, size_t whylen)
{
	char port[16], streams[16], secs[32];
	const char *argv[] = { "iperf3", "-c", b->iperf_host, "-p", port, "-P", streams, "-t", secs,
			       "-J", "--connect-timeout", "3000", reverse ? "-R" : NULL, NULL };
	json_t *root, *end;
	double v;
	int status;

	snprintf(port, sizeof(port), "%d", b->iperf_port);
	snprintf(streams, sizeof(streams), "%d", b->threads);
	snprintf(secs, sizeof(secs), "%.0f", b->seconds < 1 ? 1 : b->seconds);
	root = bench_run_json(argv, (b->seconds < 1 ? 1 : b->seconds) + 30, &status);
	if (!root) {
		snprintf(why, whylen, status == 127 ? "iperf3 is not installed" :
			 "iperf3 against %s:%d failed (is 'iperf3 -s' running there?)",
			 b->iperf_host, b->iperf_port);
		return 0;
	}
	if (json_is_string(json_object_get(root, "error"))) {
		snprintf(why, whylen, "iperf3 against %s:%d: %s (is 'iperf3 -s' running there?)",
			 b->iperf_host, b->iperf_port,
			 json_string_value(json_object_get(root, "error")));
		json_decref(root);
		return 0;
	}
	end = json_object_get(root, "end");
	v = json_number_value(json_object_get(json_object_get(end, "sum_received"),
					      "bits_per_second")) / 8;
	json_decref(root);
	if (v <= 0)
		snprintf(why, whylen, "no throughput in iperf3's output");
	return v;
}

/* The sequential rows against a deployed cluster, beside the network. */
static void run_seq_rows_remote(struct bio *b)
{
	char name[64], why[160] = "", cs[32], ns[32];
	double c, net[2];
	int ce;

	net[0] = iperf_run(b, false, why, sizeof(why));
	if (net[0] > 0)
		net[1] = iperf_run(b, true, why, sizeof(why));
	else
		net[1] = 0;
	if (net[1] <= 0)
		printf("raw network baseline: none: %s\n", why);
	else
		printf("raw network (iperf3 -P %d to %s:%d): send %.1f MB/s, receive %.1f MB/s\n",
		       b->threads, b->iperf_host, b->iperf_port, net[0] / 1e6, net[1] / 1e6);
	printf("%-40s %16s %16s %7s\n", "test", "strata", "network", "ratio");
	for (int pass = 0; pass <= 2 && !bio_stop; pass++) {
		if (pass == 0)
			snprintf(name, sizeof(name), "seq write 1 MiB, %d thr", b->threads);
		else
			snprintf(name, sizeof(name), "seq read 1 MiB, %d thr, %s", b->threads,
				 pass == 1 ? "first pass" : "cached");
		c = seq_run(b, true, pass == 0, pass == 2, &ce);
		if (ce) {
			printf("%-40s failed: strata: %s\n", name, strata_strerror(ce));
			b->fails++;
			continue;
		}
		fmt_rate(cs, sizeof(cs), c, false);
		if (net[1] <= 0) {
			printf("%-40s %16s %16s %7s\n", name, cs, "-", "-");
			continue;
		}
		fmt_rate(ns, sizeof(ns), net[pass ? 1 : 0], false);
		printf("%-40s %16s %16s %7.2f\n", name, cs, ns, c / net[pass ? 1 : 0]);
	}
	fflush(stdout);
}

/* Removes what the run wrote under b->cprefix, best effort. */
static void remote_cleanup(struct bio *b)
{
	char path[PATH_MAX];

	for (int i = 0; i < b->threads; i++) {
		seq_path(b, true, i, path, sizeof(path));
		(void)strata_unlink(b->s, path);
	}
	snprintf(path, sizeof(path), "%s/seq", b->cprefix);
	(void)strata_rmdir(b->s, path);
	(void)strata_rmdir(b->s, b->cprefix);
}

/* bench io --mgmt: a deployed cluster. 0 or 1. */
static int run_remote(struct bio *b)
{
	char mgmt[256], host[64] = "", path[PATH_MAX];
	int rc;

	struct fs_args a = { .cmd = "bench io", .mgmt = b->remote, .token = b->token };

	if (fs_connect_at(&a, &b->s, mgmt, sizeof(mgmt)))
		return 1;
	if (!b->iperf_host[0]) {
		const char *colon = strrchr(mgmt, ':'), *comma = strchr(mgmt, ',');
		size_t hl = colon && (!comma || colon < comma) ? (size_t)(colon - mgmt) :
			    strcspn(mgmt, ",");

		if (hl >= sizeof(b->iperf_host))
			hl = sizeof(b->iperf_host) - 1;
		memcpy(b->iperf_host, mgmt, hl);
		b->iperf_host[hl] = '\0';
		b->iperf_port = 5201;
	}
	gethostname(host, sizeof(host) - 1);
	snprintf(b->cprefix, sizeof(b->cprefix), "/bench-io.%.40s.%d", host[0] ? host : "client",
		 (int)getpid());
	rc = strata_mkdir(b->s, b->cprefix, 0755);
	snprintf(path, sizeof(path), "%s/seq", b->cprefix);
	if (!rc)
		rc = strata_mkdir(b->s, path, 0755);
	if (rc) {
		cli_err("bench io: cannot create '%s' in the cluster at %s: %s", path, mgmt,
			strata_strerror(rc));
		remote_cleanup(b);
		return 1;
	}
	printf("strata bench io: libstrata against the cluster at %s, %d thread(s), %g s per test, files up to %llu MiB\n",
	       mgmt, b->threads, b->seconds, (unsigned long long)(b->cap >> 20));
	printf("baseline: the raw network between this client and %s, measured by iperf3\n",
	       b->iperf_host);
	run_seq_rows_remote(b);
	remote_cleanup(b);
	return b->fails || bio_stop ? 1 : 0;
}

static int parse_args(int argc, char **argv, struct bio *b)
{
	int64_t v;

	/* Every option takes a value: two arguments a step. */
	for (int i = 1; i < argc; i += 2) {
		const char *val = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			printf("usage: strata bench io [--seconds S] [--threads N] [--file-mib M]\n"
			       "                       [--mgmt ADDR [--token T] [--iperf3 HOST[:PORT]]]\n\n"
			       "libstrata against a local cluster it starts (3 storage daemons, R=3), each\n"
			       "figure beside the same workload on a local directory: sequential 1 MiB\n"
			       "writes and reads (N threads, default 4, files up to M MiB, default 256),\n"
			       "random 4 KiB and 128 KiB reads at QD 1, 32, 256 through the batch ring;\n"
			       "then the cached sequential read against raw\n"
			       "loopback TCP request/response with N and 2N readers (3 alternating rounds\n"
			       "each, median ratio) and raw streaming; last, the sequential 1 MiB\n"
			       "rows against a twin cluster without a cluster key (authentication\n"
			       "off), 3 alternating rounds each. S seconds per test (default 3).\n"
			       "With --mgmt, a deployed cluster instead (its credential found as\n"
			       "every command finds it, files under /bench-io.HOST.PID, removed at\n"
			       "the end): the sequential rows only, each beside the raw network\n"
			       "between this client and a storage host measured by iperf3 with N\n"
			       "streams (-R for reads) against the iperf3 server ('iperf3 -s') at\n"
			       "--iperf3 HOST[:PORT] (default: the mgmt host, port 5201).\n"
			       "Metadata rates: strata bench meta.\n");
			return 1;
		}
		if (strcmp(argv[i], "--seconds") == 0 && val) {
			if (bench_opt_seconds("bench io", val, &b->seconds))
				return 2;
		} else if (strcmp(argv[i], "--threads") == 0 && val) {
			if (bench_opt_int("bench io", "--threads", val, 1, BIO_MAX_THREADS, &v))
				return 2;
			b->threads = (int)v;
		} else if (strcmp(argv[i], "--mgmt") == 0 && val) {
			b->remote = val;
		} else if (strcmp(argv[i], "--token") == 0 && val) {
			b->token = val;
		} else if (strcmp(argv[i], "--iperf3") == 0 && val) {
			if (parse_iperf(val, b))
				return 2;
		} else if (strcmp(argv[i], "--file-mib") == 0 && val) {
			if (bench_opt_int("bench io", "--file-mib", val, 1, 1 << 20, &v))
				return 2;
			b->cap = (uint64_t)v << 20;
		} else {
			cli_err("bench io: unexpected argument '%s' (usage: strata bench io [--seconds S] [--threads N] [--file-mib M] [--mgmt ADDR [--token T] [--iperf3 HOST[:PORT]]])",
				argv[i]);
			return 2;
		}
	}
	return 0;
}

int bench_io(int argc, char **argv)
{
	struct bio *b = calloc(1, sizeof(*b));
	struct sigaction sa = { .sa_handler = bio_on_signal };
	char mgmt[64];
	int rc, exit_code = 1;
	bool up = false;

	if (!b) {
		cli_err("bench io: out of memory");
		return 1;
	}
	b->seconds = 3;
	b->threads = 4;
	b->cap = 256ull << 20;
	rc = parse_args(argc, argv, b);
	if (rc) {
		free(b);
		return rc == 1 ? 0 : rc;	/* 1: --help was printed */
	}
	if (b->iperf_host[0] && !b->remote) {
		cli_err("bench io: --iperf3 goes with --mgmt (a local run compares with a local directory)");
		free(b);
		return 2;
	}
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	if (b->remote) {
		exit_code = run_remote(b);
		strata_disconnect(b->s);
		free(b);
		return exit_code;
	}
	snprintf(b->cprefix, sizeof(b->cprefix), "/bench");
	snprintf(b->root, sizeof(b->root), "/tmp/strata-bench-io-XXXXXX");
	if (!mkdtemp(b->root)) {
		cli_err("bench io: cannot create a temp dir: %s", strerror(errno));
		free(b);
		return 1;
	}
	snprintf(b->cdir, sizeof(b->cdir), "%s/cluster", b->root);
	snprintf(b->ldir, sizeof(b->ldir), "%s/local", b->root);
	if (mkdir(b->ldir, 0755) < 0) {
		cli_err("bench io: cannot create '%s': %s", b->ldir, strerror(errno));
		goto out;
	}
	/* "data in the page cache": the storage daemons read through it. */
	if (local_cluster_up(b->cdir, 3, 0, "--node.log_level=warn --storage.buffered_reads=true", mgmt,
			     sizeof(mgmt)))
		goto out;
	up = true;
	rc = cli_connect(mgmt, b->cdir, &b->s);
	if (!rc)
		rc = strata_mkdir(b->s, "/bench", 0755);
	if (!rc)
		rc = strata_mkdir(b->s, "/bench/seq", 0755);
	if (rc) {
		cli_err("bench io: cannot set up the cluster at %s: %s", mgmt, strata_strerror(rc));
		goto out;
	}
	printf("strata bench io: libstrata against a local cluster (3 storage daemons, R=3), %d thread(s), %g s per test, files up to %llu MiB\n",
	       b->threads, b->seconds, (unsigned long long)(b->cap >> 20));
	printf("baseline: the same workload on '%s' (same filesystem): POSIX pread/pwrite (buffered, writes end with fdatasync) for seq, io_uring O_DIRECT at the same QD for random (metadata rates: strata bench meta)\n",
	       b->ldir);
	printf("%-40s %16s %16s %7s\n", "test", "strata", "local", "ratio");
	run_seq_rows(b);
	if (!bio_stop)
		run_rand_rows(b);
	if (!bio_stop)
		run_read_vs_raw(b);
	if (!bio_stop)
		run_loopback(b);
	if (!bio_stop)
		run_auth_twin(b);
	exit_code = b->fails || bio_stop ? 1 : 0;
out:
	strata_disconnect(b->s);
	if (up && local_cluster_down(b->cdir))
		exit_code = 1;
	bench_rmtree(b->root);
	free(b);
	return exit_code;
}
