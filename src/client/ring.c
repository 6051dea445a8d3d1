/*
 * The asynchronous batch interface: a thread prepares many reads and
 * writes, submits them at once and reaps completions. Each I/O is split
 * into chunk pieces sent in parallel through the I/O threads' storage
 * clients; the I/O completes when its last piece does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_int.h"

struct ring_io {
	struct ring_io *next;
	struct strata_ring *r;
	struct strata_file *f;
	uint8_t *buf;
	uint64_t len, off;
	uint64_t user_data;
	bool write;
	uint32_t left;
	int err;
	struct io_piece *pieces;
	uint32_t npieces, cap;
};

struct strata_ring {
	struct strata *s;
	uint32_t depth;
	uint32_t busy;			/* prepared + in flight + done unreaped */
	struct ring_io *prep_head, **prep_tail;
	struct ring_io *free_list;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct strata_cqe *done;	/* ring buffer of completions */
	uint32_t done_head, done_n;
	/* How many completions the waiter needs before it is woken: one
	 * wake-up per wait, not one per completion. */
	uint32_t want;
};

int strata_ring_new(struct strata *s, uint32_t depth, struct strata_ring **out)
{
	struct strata_ring *r;

	if (!s || !out || depth == 0 || depth > 65536)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->done = calloc(depth, sizeof(*r->done));
	if (!r->done) {
		free(r);
		return -ENOMEM;
	}
	r->s = s;
	r->depth = depth;
	r->want = 1;
	r->prep_tail = &r->prep_head;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->cond, NULL);
	*out = r;
	return 0;
}

void strata_ring_free(struct strata_ring *r)
{
	if (!r)
		return;
	/* Drop prepared I/Os, wait for those in flight. */
	pthread_mutex_lock(&r->lock);
	while (r->prep_head) {
		struct ring_io *io = r->prep_head;

		r->prep_head = io->next;
		io->next = r->free_list;
		r->free_list = io;
		r->busy--;
	}
	while (r->busy > r->done_n)
		pthread_cond_wait(&r->cond, &r->lock);
	pthread_mutex_unlock(&r->lock);
	while (r->free_list) {
		struct ring_io *io = r->free_list;

		r->free_list = io->next;
		free(io->pieces);
		free(io);
	}
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r->done);
	free(r);
}

static int prep(struct strata_ring *r, struct strata_file *f, void *buf, size_t len, uint64_t off,
		uint64_t user_data, bool write)
{
	struct ring_io *io;

	if (!r || !f || (!buf && len))
		return -EINVAL;
	if (write ? (f->flags & 3) == STRATA_O_RDONLY : (f->flags & 3) == STRATA_O_WRONLY)
		return -EBADF;
	pthread_mutex_lock(&r->lock);
	if (r->busy >= r->depth) {
		pthread_mutex_unlock(&r->lock);
		return -EBUSY;
	}
	io = r->free_list;
	if (io)
		r->free_list = io->next;
	r->busy++;
	pthread_mutex_unlock(&r->lock);
	if (!io) {
		io = calloc(1, sizeof(*io));
		if (!io) {
			pthread_mutex_lock(&r->lock);
			r->busy--;
			pthread_mutex_unlock(&r->lock);
			return -ENOMEM;
		}
	}
	io->r = r;
	io->f = f;
	io->buf = buf;
	io->len = len;
	io->off = off;
	io->user_data = user_data;
	io->write = write;
	io->err = 0;
	io->next = NULL;
	pthread_mutex_lock(&r->lock);
	*r->prep_tail = io;
	r->prep_tail = &io->next;
	pthread_mutex_unlock(&r->lock);
	return 0;
}

int strata_ring_prep_read(struct strata_ring *r, struct strata_file *f, void *buf, size_t len,
			  uint64_t off, uint64_t user_data)
{
	return prep(r, f, buf, len, off, user_data, false);
}

int strata_ring_prep_write(struct strata_ring *r, struct strata_file *f, const void *buf,
			   size_t len, uint64_t off, uint64_t user_data)
{
	return prep(r, f, (void *)buf, len, off, user_data, true);
}

static void finish(struct ring_io *io, ssize_t res)
{
	struct strata_ring *r = io->r;

	if (io->write && res > 0)
		cl_note_write(io->f, io->off, io->len);
	pthread_mutex_lock(&r->lock);
	r->done[(r->done_head + r->done_n) % r->depth] =
		(struct strata_cqe){ .user_data = io->user_data, .res = res };
	r->done_n++;
	io->next = r->free_list;
	r->free_list = io;
	if (r->done_n >= r->want || r->done_n == r->busy)
		pthread_cond_broadcast(&r->cond);
	pthread_mutex_unlock(&r->lock);
}

static void piece_done(struct sc_io *sio)
{
	struct io_piece *p = (struct io_piece *)sio;
	struct ring_io *io = p->owner;
	bool last;

	if (sio->status == -EACCES)
		cl_file_cap_stale(io->f);
	pthread_mutex_lock(&io->r->lock);
	if (sio->status && !io->err)
		io->err = sio->status;
	last = --io->left == 0;
	pthread_mutex_unlock(&io->r->lock);
	if (last)
		finish(io, io->err ? io->err : (ssize_t)io->len);
}

/* sc: the storage client of this submit's small reads. */
static void start(struct ring_io *io, struct sclient *sc)
{
	struct strata_file *f = io->f;
	struct sp_cap cap;
	uint32_t n;
	int rc;

	if (io->write) {
		/* Bytes this handle kept inline go to chunks first: the ring
		 * writes chunks only. */
		rc = cl_inline_spill(f);
		if (rc) {
			finish(io, rc);
			return;
		}
	}
	if (!io->write) {
		/* Reads stop at the end of the file known to this client. */
		uint64_t size;

		pthread_mutex_lock(&f->lock);
		size = f->size;
		pthread_mutex_unlock(&f->lock);
		if (io->off >= size)
			io->len = 0;
		else if (io->len > size - io->off)
			io->len = size - io->off;
	}
	/* An inline file's bytes came with its open. */
	if (!io->write && io->len && cl_inline_read(f, io->buf, io->len, io->off)) {
		finish(io, (ssize_t)io->len);
		return;
	}
	n = cl_npieces(f, io->write ? SC_WRITE : SC_READ, io->len, io->off);
	if (n == 0) {
		finish(io, 0);
		return;
	}
	if (n > io->cap) {
		struct io_piece *p = realloc(io->pieces, n * sizeof(*p));

		if (!p) {
			finish(io, -ENOMEM);
			return;
		}
		io->pieces = p;
		io->cap = n;
	}
	/* A cap about to expire is renewed here, on the submitting thread;
	 * one storage refuses anyway fails the I/O with -EACCES (a
	 * completion cannot wait for meta) and the next submission of the
	 * file asks for a new one. */
	rc = cl_file_cap(f, false, &cap);
	if (rc) {
		finish(io, rc);
		return;
	}
	n = cl_split(f, io->write ? SC_WRITE : SC_READ, &cap, io->buf, io->len, io->off,
		     io->pieces, n);
	io->left = n;
	for (uint32_t i = 0; i < n; i++) {
		io->pieces[i].owner = io;
		io->pieces[i].io.cb = piece_done;
		cl_submit_via(f, &io->pieces[i],
			      !io->write && io->pieces[i].io.len <= SC_BATCH_SMALL ? sc : NULL);
	}
}

int strata_ring_submit(struct strata_ring *r)
{
	struct ring_io *io;
	struct sclient *sc;
	int n = 0;

	if (!r)
		return -EINVAL;
	sc = cl_pick_sc(r->s);
	pthread_mutex_lock(&r->lock);
	io = r->prep_head;
	r->prep_head = NULL;
	r->prep_tail = &r->prep_head;
	pthread_mutex_unlock(&r->lock);
	while (io) {
		struct ring_io *next = io->next;

		start(io, sc);
		n++;
		io = next;
	}
	return n;
}

int strata_ring_wait(struct strata_ring *r, struct strata_cqe *cqes, unsigned max,
		     unsigned min_complete, int timeout_ms)
{
	struct timespec ts;
	unsigned n = 0;

	if (!r || (!cqes && max))
		return -EINVAL;
	if (timeout_ms > 0) {
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&r->lock);
	if (min_complete > max)
		min_complete = max;
	r->want = min_complete ? min_complete : 1;
	while (r->done_n < min_complete && timeout_ms != 0) {
		/* Nothing left that could complete: do not wait forever. */
		if (r->busy == r->done_n)
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&r->cond, &r->lock);
		else if (pthread_cond_timedwait(&r->cond, &r->lock, &ts) != 0)
			break;
	}
	r->want = 1;
	while (n < max && r->done_n > 0) {
		cqes[n++] = r->done[r->done_head];
		r->done_head = (r->done_head + 1) % r->depth;
		r->done_n--;
		r->busy--;
	}
	pthread_mutex_unlock(&r->lock);
	return (int)n;
}

