/*
 * A shard's data, written by several threads at once. The shard is cut
 * into pieces that each lie within one chunk, so a piece is one write to
 * one chain and consecutive pieces go to consecutive chains of the
 * file's stripe: a tensor larger than a chunk is striped over the chains
 * like any file, and the writers together keep every chain busy. Writer
 * threads take pieces in file order from a shared counter, checksum each
 * piece (the checksums run in parallel and overlap the network) and
 * write it through their own ring; the rings share the connection's I/O
 * threads and storage connections. A tensor's CRC32C is combined from
 * its pieces' in order. Built only on the public API.
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
	const uint8_t *buf;
	uint64_t off, len;
};

/* Shared by the writers of one shard; next and err are atomics. */
struct ck_wctx {
	struct strata *s;
	struct strata_file *f;
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

/* One writer: takes pieces until none is left (or a writer failed), each
 * submitted as soon as it is checksummed; reaps as the ring fills. */
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
			struct ck_piece *p;

			if (i >= w->np) {
				more = false;
				break;
			}
			p = &w->p[i];
			rc = ck_wait_ready(w, p->tensor);
			if (rc) {
				ck_set_err(w, rc);
				break;
			}
			p->crc = crc32c(0, p->buf, p->len);
			rc = strata_ring_prep_write(r, w->f, p->buf, p->len, p->off, p->len);
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
			inflight--;
			if (cqes[i].res < 0)
				ck_set_err(w, (int)cqes[i].res);
			else if ((uint64_t)cqes[i].res != cqes[i].user_data)
				ck_set_err(w, -EIO);	/* short write */
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

/* Cuts tensor i (at file offset off) at chunk boundaries and at io_size
 * within a chunk; fills p (when not NULL) and returns the piece count. */
static size_t ck_cut(const struct strata_ckpt_tensor *t, uint32_t i, uint64_t off,
		     uint64_t chunk, uint64_t io_size, struct ck_piece *p)
{
	uint64_t pos = 0;
	size_t n = 0;

	while (pos < t->len) {
		uint64_t at = off + pos, in_chunk = at % chunk;
		uint64_t room = chunk - in_chunk, in_io = in_chunk % io_size;
		uint64_t take = t->len - pos;

		if (room < take)
			take = room;
		if (io_size - in_io < take)
			take = io_size - in_io;
		if (p)
			p[n] = (struct ck_piece){ i, 0, (const uint8_t *)t->data + pos, at, take };
		n++;
		pos += take;
	}
	return n;
}

int ck_write_data(struct strata *s, struct strata_file *f, const struct strata_ckpt_tensor *t,
		  size_t n, const uint64_t *offs, uint32_t *crcs, const struct ck_write_opts *o,
		  struct ck_write_result *res)
{
	struct strata_layout l = { 0 };
	struct ck_wctx w = { .s = s, .f = f, .ready = o->ready };
	pthread_t tid[CK_MAX_WRITERS];
	uint32_t writers = o->writers ? o->writers : CK_DEF_WRITERS, started = 0;
	uint64_t chunk = CK_DEF_IO, io_size = o->io_size ? o->io_size : CK_DEF_IO;
	size_t k = 0;

	memset(res, 0, sizeof(*res));
	w.deadline_ms = mono_ms() + (o->wait_ms ? o->wait_ms : CK_DEF_WAIT_MS);
	if (writers > CK_MAX_WRITERS)
		writers = CK_MAX_WRITERS;
	if (o->path && strata_get_layout(s, o->path, &l) == 0 && l.chunk_size)
		chunk = l.chunk_size;
	for (size_t i = 0; i < n; i++)
		w.np += ck_cut(&t[i], (uint32_t)i, offs[i], chunk, io_size, NULL);
	w.p = calloc(w.np ? w.np : 1, sizeof(*w.p));
	if (!w.p)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		k += ck_cut(&t[i], (uint32_t)i, offs[i], chunk, io_size, w.p + k);
	if (writers > w.np)
		writers = w.np ? (uint32_t)w.np : 1;
	w.depth = (o->depth ? o->depth : CK_DEF_SAVE_DEPTH) / writers;
	if (w.depth < 2)
		w.depth = 2;
	/* The calling thread is one of the writers. */
	for (uint32_t i = 1; i < writers; i++) {
		if (pthread_create(&tid[started], NULL, ck_writer_main, &w) != 0)
			break;
		started++;
	}
	ck_writer_run(&w);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	/* Nothing is committed before the caller has filled every tensor
	 * (a trailing empty one has no piece to wait on), or once it gave up. */
	if (!w.err && n) {
		int rc = ck_wait_ready(&w, (uint32_t)(n - 1));

		if (rc)
			ck_set_err(&w, rc);
	}
	res->writers = started + 1;
	res->pieces = (uint32_t)w.np;
	if (!w.err) {
		/* Pieces are in file order, so a tensor's are consecutive. */
		for (size_t i = 0; i < n; i++)
			crcs[i] = 0;
		for (size_t j = 0; j < w.np; j++) {
			struct ck_piece *p = &w.p[j];
			bool first = j == 0 || w.p[j - 1].tensor != p->tensor;

			crcs[p->tensor] = first ? p->crc
						: crc32c_combine(crcs[p->tensor], p->crc, p->len);
		}
	}
	free(w.p);
	return w.err;
}
