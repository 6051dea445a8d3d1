/*
 * A shard's data, written or read by several threads at once. The
 * tensors are cut into pieces that each lie within one chunk, so a piece
 * is one I/O to one chain and consecutive pieces go to consecutive
 * chains of the file's stripe: a tensor larger than a chunk is striped
 * over the chains like any file, and the threads together keep every
 * chain busy. Threads take pieces in file order from a shared counter
 * and move each through their own ring; the rings share the connection's
 * I/O threads and storage connections. A writer checksums a piece before
 * it submits it, a reader as soon as the piece has landed in the
 * destination (still in the CPU's cache, while the later pieces are in
 * flight): the checksums run in parallel and overlap the network, and no
 * pass over the data comes after the last I/O. A tensor's CRC32C is
 * combined from its pieces' in order. Built only on the public API.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/checkpoint_int.h"
#include "common/clock.h"
#include "common/crc32c.h"
#include "strata/strata.h"

struct ck_piece {
	uint32_t tensor;
	uint32_t crc;
	uint8_t *buf;
	struct strata_file *f;
	uint64_t off, len;
};

/* Shared by the threads of one run; next and err are atomics. */
struct ck_wctx {
	struct strata *s;
	bool read;		/* read the pieces (else write them) */
	struct ck_piece *p;
	size_t np;
	size_t next;		/* the next piece to take */
	int err;		/* the first error, 0 while none */
	uint32_t depth;		/* writes in flight per writer */
	const uint64_t *ready;	/* tensors in place (NULL: all) */
	uint64_t deadline_ms;	/* for *ready to cover a tensor */
};

static void ck_set_err(struct ck_wctx *w, int rc)
{
	int none = 0;

	__atomic_compare_exchange_n(&w->err, &none, rc, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

static bool ck_failed(struct ck_wctx *w)
{
	return __atomic_load_n(&w->err, __ATOMIC_ACQUIRE) != 0;
}

/* Waits until tensor is in place (the caller's snapshot may still be
 * filling the later ones). Returns 0, -ECANCELED (the caller gave up,
 * or another writer failed) or -ETIMEDOUT. */
static int ck_wait_ready(struct ck_wctx *w, uint32_t tensor)
{
	while (w->ready) {
		uint64_t r = __atomic_load_n(w->ready, __ATOMIC_ACQUIRE);

		if (r == UINT64_MAX || ck_failed(w))
			return -ECANCELED;	/* ck_set_err keeps the first error */
		if (tensor < r)
			return 0;
		if (mono_ms() >= w->deadline_ms)
			return -ETIMEDOUT;
		usleep(50);
	}
	return 0;
}

/* Submits piece i: a write once it is in place and checksummed. */
static int ck_submit(struct ck_wctx *w, struct strata_ring *r, size_t i)
{
	struct ck_piece *p = &w->p[i];
	int rc;

	if (w->read)
		return strata_ring_prep_read(r, p->f, p->buf, p->len, p->off, i);
	rc = ck_wait_ready(w, p->tensor);
	if (rc)
		return rc;
	p->crc = crc32c(0, p->buf, p->len);
	return strata_ring_prep_write(r, p->f, p->buf, p->len, p->off, i);
}

/* Reaps one completion: piece user_data moved whole, and a read piece is
 * checksummed where it landed. */
static int ck_reaped(struct ck_wctx *w, const struct strata_cqe *cqe)
{
	struct ck_piece *p;

	if (cqe->res < 0)
		return (int)cqe->res;
	if (cqe->user_data >= w->np)
		return -EIO;
	p = &w->p[cqe->user_data];
	if ((uint64_t)cqe->res != p->len)
		return w->read ? -ENODATA : -EIO;	/* short: the file is truncated */
	if (w->read)
		p->crc = crc32c(0, p->buf, p->len);
	return 0;
}

/* One thread: takes pieces until none is left (or a thread failed), each
 * submitted at once; reaps as the ring fills. */
static void ck_writer_run(struct ck_wctx *w)
{
	struct strata_ring *r = NULL;
	struct strata_cqe *cqes = NULL;
	uint32_t inflight = 0;
	bool more = true;
	int rc;

	rc = strata_ring_new(w->s, w->depth, &r);
	if (!rc) {
		cqes = calloc(w->depth, sizeof(*cqes));
		rc = cqes ? 0 : -ENOMEM;
	}
	if (rc) {
		ck_set_err(w, rc);
		goto out;
	}
	for (;;) {
		while (more && inflight < w->depth && !ck_failed(w)) {
			size_t i = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);

			if (i >= w->np) {
				more = false;
				break;
			}
			rc = ck_submit(w, r, i);
			if (rc) {
				ck_set_err(w, rc);
				break;
			}
			strata_ring_submit(r);
			inflight++;
		}
		if (inflight == 0)
			break;
		rc = strata_ring_wait(r, cqes, w->depth, 1, -1);
		if (rc < 0) {
			ck_set_err(w, rc);
			break;
		}
		for (int i = 0; i < rc; i++) {
			int err = ck_reaped(w, &cqes[i]);

			inflight--;
			if (err)
				ck_set_err(w, err);
		}
	}
out:
	strata_ring_free(r);	/* waits for anything still in flight */
	free(cqes);
}

static void *ck_writer_main(void *arg)
{
	ck_writer_run(arg);
	return NULL;
}

/* Cuts len bytes of buf, tensor i at offset off of f, at chunk
 * boundaries and at io_size within a chunk; fills p (when not NULL) and
 * returns the piece count. */
static size_t ck_cut(struct strata_file *f, uint8_t *buf, uint64_t len, uint32_t i, uint64_t off,
		     uint64_t chunk, uint64_t io_size, struct ck_piece *p)
{
	uint64_t pos = 0;
	size_t n = 0;

	while (pos < len) {
		uint64_t at = off + pos, in_chunk = at % chunk;
		uint64_t room = chunk - in_chunk, in_io = in_chunk % io_size;
		uint64_t take = len - pos;

		if (room < take)
			take = room;
		if (io_size - in_io < take)
			take = io_size - in_io;
		if (p)
			p[n] = (struct ck_piece){ i, 0, buf + pos, f, at, take };
		n++;
		pos += take;
	}
	return n;
}

/* Runs w's pieces (w->p, w->np) with up to o->writers threads (the
 * caller's among them) and, when none failed, sets crcs[i] for each of
 * the n tensors from its pieces' (consecutive, in order). Frees w->p. */
static int ck_run(struct ck_wctx *w, size_t n, uint32_t *crcs, const struct ck_write_opts *o,
		  struct ck_write_result *res)
{
	pthread_t tid[CK_MAX_WRITERS];
	uint32_t threads = o->writers ? o->writers : CK_DEF_WRITERS, started = 0;
	uint32_t depth = o->depth ? o->depth : (w->read ? CK_DEF_DEPTH : CK_DEF_SAVE_DEPTH);

	if (threads > CK_MAX_WRITERS)
		threads = CK_MAX_WRITERS;
	if (threads > w->np)
		threads = w->np ? (uint32_t)w->np : 1;
	w->depth = depth / threads;
	if (w->depth < 2)
		w->depth = 2;
	/* The calling thread is one of them. */
	for (uint32_t i = 1; i < threads; i++) {
		if (pthread_create(&tid[started], NULL, ck_writer_main, w) != 0)
			break;
		started++;
	}
	ck_writer_run(w);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	/* Nothing is committed before the caller has filled every tensor
	 * (a trailing empty one has no piece to wait on), or once it gave up. */
	if (!w->err && n && !w->read) {
		int rc = ck_wait_ready(w, (uint32_t)(n - 1));

		if (rc)
			ck_set_err(w, rc);
	}
	res->writers = started + 1;
	res->pieces = (uint32_t)w->np;
	if (!w->err) {
		for (size_t i = 0; i < n; i++)
			crcs[i] = 0;
		for (size_t j = 0; j < w->np; j++) {
			struct ck_piece *p = &w->p[j];
			bool first = j == 0 || w->p[j - 1].tensor != p->tensor;

			crcs[p->tensor] = first ? p->crc
						: crc32c_combine(crcs[p->tensor], p->crc, p->len);
		}
	}
	free(w->p);
	w->p = NULL;
	return w->err;
}

int ck_write_data(struct strata *s, struct strata_file *f, const struct strata_ckpt_tensor *t,
		  size_t n, const uint64_t *offs, uint32_t *crcs, const struct ck_write_opts *o,
		  struct ck_write_result *res)
{
	struct strata_layout l = { 0 };
	struct ck_wctx w = { .s = s, .ready = o->ready };
	uint64_t chunk = CK_DEF_IO, io_size = o->io_size ? o->io_size : CK_DEF_IO;
	size_t k = 0;

	memset(res, 0, sizeof(*res));
	w.deadline_ms = mono_ms() + (o->wait_ms ? o->wait_ms : CK_DEF_WAIT_MS);
	if (o->path && strata_get_layout(s, o->path, &l) == 0 && l.chunk_size)
		chunk = l.chunk_size;
	for (size_t i = 0; i < n; i++)
		w.np += ck_cut(f, NULL, t[i].len, (uint32_t)i, offs[i], chunk, io_size, NULL);
	w.p = calloc(w.np ? w.np : 1, sizeof(*w.p));
	if (!w.p)
		return -ENOMEM;
	/* The pieces only read from the caller's tensors. */
	for (size_t i = 0; i < n; i++)
		k += ck_cut(f, (uint8_t *)(uintptr_t)t[i].data, t[i].len, (uint32_t)i, offs[i],
			    chunk, io_size, w.p + k);
	return ck_run(&w, n, crcs, o, res);
}

int ck_read_data(struct strata *s, const struct ck_read *rd, size_t n, uint32_t *crcs,
		 const struct ck_write_opts *o, struct ck_write_result *res)
{
	struct ck_wctx w = { .s = s, .read = true };
	uint64_t io_size = o->io_size ? o->io_size : CK_DEF_READ_IO;
	size_t k = 0;

	memset(res, 0, sizeof(*res));
	for (size_t i = 0; i < n; i++)
		w.np += ck_cut(rd[i].f, NULL, rd[i].len, (uint32_t)i, rd[i].off,
			       rd[i].chunk ? rd[i].chunk : io_size, io_size, NULL);
	w.p = calloc(w.np ? w.np : 1, sizeof(*w.p));
	if (!w.p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		k += ck_cut(rd[i].f, rd[i].buf, rd[i].len, (uint32_t)i, rd[i].off,
			    rd[i].chunk ? rd[i].chunk : io_size, io_size, w.p + k);
	return ck_run(&w, n, crcs, o, res);
}
