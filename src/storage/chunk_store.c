/*
 * Chunk engine: one file per chunk, two metadata slots per file, io_uring
 * for data. The layout on disk and the crash-consistency argument are in
 * docs/chunk-engine.md. This file holds the operation state machine,
 * submission and polling; chunk_index.c the slots, index and open/close.
 *
 * Every operation is a struct op that moves through an explicit state
 * (enum op_state). An op waits in its chunk's FIFO; the head op of a chunk
 * runs when fewer than queue_depth ops are active. Each running op has at
 * most one I/O in flight, so the ring never needs more than queue_depth
 * submission entries. A finished op goes to the done list; its callback
 * runs from chunk_store_poll().
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "chunk_store_int.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "strata/errors.h"

/* ---- op life cycle ---- */

static void kick(struct chunk_store *cs);
static void op_step(struct op *op, int res);

static void make_runnable(struct chunk_store *cs, struct centry *e)
{
	if (e->runnable || e->running || !e->qhead)
		return;
	e->runnable = true;
	e->rnext = NULL;
	if (cs->rtail)
		cs->rtail->rnext = e;
	else
		cs->rhead = e;
	cs->rtail = e;
}

/* Ends op with status: releases its resources, starts the chunk's next op
 * and queues the callback. Runs no callback itself. */
static void op_finish(struct op *op, int status)
{
	struct chunk_store *cs = op->cs;
	struct centry *e = op->e;
	char path[PATH_MAX];

	op->status = status;
	if (status) {
		cs->used -= op->reserved;
		if (op->trim_on_fail && e->fd >= 0 && e->exists &&
		    ftruncate(e->fd, (off_t)(HDR_SIZE + op->pdelta + e->length)) == 0)
			e->fsize = HDR_SIZE + op->pdelta + e->length;
	}
	if (op->tmp_fd >= 0) {
		close(op->tmp_fd);
		op->tmp_fd = -1;
		if (cs_chunk_path(cs, &e->id, ".tmp", path, sizeof(path)) == 0)
			unlink(path);
	}
	if (!op->has_info && e->exists) {
		fill_info(&op->info, e);
		op->has_info = true;
	}
	if (!op->buf_is_dst)
		abuf_free(op->buf);
	op->buf = NULL;
	op->buf_is_dst = false;
	free(op->new_bcrc);
	op->new_bcrc = NULL;
	free(op->new_map);
	op->new_map = NULL;

	e->qhead = op->next;
	if (!e->qhead)
		e->qtail = NULL;
	e->running = false;
	cs->active--;
	op->e = NULL;
	if (e->qhead || e->exists) {
		make_runnable(cs, e);
		cs_lru_push(cs, e);
	} else {
		cs_ent_idle(cs, e);
	}

	op->next = NULL;
	if (cs->done_tail)
		cs->done_tail->next = op;
	else
		cs->done_head = op;
	cs->done_tail = op;
	if (!cs->in_poll && !cs->done_signalled && cs->o.on_done &&
	    cs->o.on_done(cs->o.on_done_arg)) {
		/* The owner runs poll soon: the callback must run from it. */
		cs->done_signalled = true;
	} else if (!cs->in_poll && !cs->done_signalled) {
		uint64_t one = 1;

		/* Wake the reactor: the callback must run from poll. */
		if (write(cs->efd, &one, sizeof(one)) < 0)
			log_debug(COMP, "eventfd write: %s", strerror(errno));
	}
}

static int io_issue(struct op *op)
{
	struct chunk_store *cs = op->cs;
	struct io_uring_sqe *sqe = io_uring_get_sqe(&cs->ring);

	if (!sqe) {
		io_uring_submit(&cs->ring);
		sqe = io_uring_get_sqe(&cs->ring);
		if (!sqe)
			return -EBUSY;
	}
	switch (op->io_kind) {
	case IO_READ:
		io_uring_prep_read(sqe, op->io_fd, op->io_buf + op->io_done,
				   (unsigned)(op->io_len - op->io_done), op->io_off + op->io_done);
		break;
	case IO_WRITE:
		io_uring_prep_write(sqe, op->io_fd, op->io_buf + op->io_done,
				    (unsigned)(op->io_len - op->io_done), op->io_off + op->io_done);
		break;
	case IO_FSYNC:
		io_uring_prep_fsync(sqe, op->io_fd, IORING_FSYNC_DATASYNC);
		break;
	}
	io_uring_sqe_set_data(sqe, op);
	cs->inflight++;
	return 0;
}

/* Starts one I/O for op in state st; on failure to queue, ends op. */
static void op_io(struct op *op, enum op_state st, enum io_kind kind, int fd,
		  void *buf, size_t len, uint64_t off)
{
	int rc;

	op->state = st;
	op->io_kind = kind;
	op->io_fd = fd;
	op->io_buf = buf;
	op->io_len = len;
	op->io_off = off;
	op->io_done = 0;
	rc = io_issue(op);
	if (rc)
		op_finish(op, rc);
}

/* A CQE for op: completes short transfers, then advances op. */
static void io_complete(struct op *op, int res)
{
	int rc;

	if (res == -EINTR || res == -EAGAIN)
		goto reissue;
	if (res < 0 || op->io_kind == IO_FSYNC) {
		op_step(op, res < 0 ? res : 0);
		return;
	}
	op->io_done += (size_t)res;
	if (op->io_done < op->io_len) {
		if (op->io_kind == IO_READ) {
			/* Short read: end of file. What lies past it is a hole
			 * or a missing tail; zeros let the checksums decide. */
			memset(op->io_buf + op->io_done, 0, op->io_len - op->io_done);
			op->io_done = op->io_len;
		} else if (res == 0) {
			op_step(op, -EIO);
			return;
		} else {
			goto reissue;
		}
	}
	op_step(op, 0);
	return;
reissue:
	rc = io_issue(op);
	if (rc)
		op_step(op, rc);
}

/* Sets op up to transfer the chunk bytes [pos, end) (pos at a page, end
 * at a page) between buf, which holds the chunk from base on, and the
 * physical blocks map gives them; run_next issues it. */
static void run_setup(struct op *op, enum op_state st, enum io_kind kind, const uint16_t *map,
		      uint8_t *buf, uint32_t base, uint32_t pos, uint32_t end)
{
	op->run_state = st;
	op->run_kind = kind;
	op->run_map = map;
	op->run_buf = buf;
	op->run_base = base;
	op->run_pos = pos;
	op->run_end = end;
}

/* Issues the next physically contiguous run of the range set up by
 * run_setup; false when none is left. */
static bool run_next(struct op *op)
{
	const uint16_t *map = op->run_map;
	uint32_t pos = op->run_pos, b = pos / CHUNK_BLOCK_SIZE, end;
	uint64_t poff;

	if (pos >= op->run_end)
		return false;
	poff = HDR_SIZE + (uint64_t)pblk(map, b) * CHUNK_BLOCK_SIZE + pos % CHUNK_BLOCK_SIZE;
	end = min_u32(op->run_end, (b + 1) * CHUNK_BLOCK_SIZE);
	while (end < op->run_end && pblk(map, b + 1) == pblk(map, b) + 1) {
		b++;
		end = min_u32(op->run_end, (b + 1) * CHUNK_BLOCK_SIZE);
	}
	op->run_pos = end;
	op_io(op, op->run_state, op->run_kind, op->e->fd, op->run_buf + (pos - op->run_base),
	      end - pos, poff);
	return true;
}

/* ---- read ---- */

void chunk_hold_put(struct chunk_hold *h)
{
	if (h && atomic_fetch_sub(&h->refs, 1) == 1) {
		munmap(h->addr, h->len);
		free(h);
	}
}

/* The entry's mapping, covering at least the first need bytes of its
 * file (made or remade as needed), or NULL. */
static struct chunk_hold *ent_map(struct chunk_store *cs, struct centry *e, uint64_t need)
{
	struct chunk_hold *h = e->map;
	size_t len;
	void *p;

	if (h && h->len >= need)
		return h;
	if (cs_ent_open_fd(cs, e))
		return NULL;
	cs_ent_unmap(e);
	len = (size_t)footprint(true, e->length, e->bmap);
	if (len < need)
		return NULL;
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, e->fd, 0);
	if (p == MAP_FAILED)
		return NULL;
	h = malloc(sizeof(*h));
	if (!h) {
		munmap(p, len);
		return NULL;
	}
	atomic_init(&h->refs, 1);
	h->addr = p;
	h->len = len;
	e->map = h;
	return h;
}

/* Whether [p, p + len) is all in the page cache (p aligned to the
 * system's page): touching the mapping must never wait for the disk on
 * the reactor. */
static bool resident(const uint8_t *p, size_t len)
{
	static size_t pg;
	unsigned char vec[256];

	if (!pg) {
		long v = sysconf(_SC_PAGESIZE);

		pg = v > 0 ? (size_t)v : 4096;
	}
	if ((uintptr_t)p % pg)
		return false;
	while (len > 0) {
		size_t pages = (len + pg - 1) / pg, n = pages < sizeof(vec) ? pages : sizeof(vec);

		if (mincore((void *)p, n * pg, vec) < 0)
			return false;
		for (size_t i = 0; i < n; i++)
			if (!(vec[i] & 1))
				return false;
		p += n * pg;
		len = len > n * pg ? len - n * pg : 0;
	}
	return true;
}

static uint32_t range_crc(const struct centry *e, const uint8_t *dst, uint32_t off, uint32_t n);

/*
 * Answers a read of whole blocks (from a block boundary to one, or to the
 * chunk's end) by reference when they are cached; false: read them. They
 * go out unverified and untouched here: the CRC is combined from the
 * stored block CRCs, so the reader's check compares the bytes it got with
 * the bytes that were written, whatever damaged them (disk, page cache or
 * network), and a reader that finds a mismatch asks for OP_CHUNK_VERIFY.
 * Only the kernel reads the mapping (the socket copy): a page that went
 * and cannot be read back fails that send, never this process. Partial
 * blocks must be verified before they go, so they take the read path.
 */
static bool read_mapped(struct op *op)
{
	struct centry *e = op->e;
	uint32_t end = op->off + op->nread;
	struct chunk_hold *h;
	const uint8_t *base;
	uint64_t poff;

	if (op->off % CHUNK_BLOCK_SIZE || (end % CHUNK_BLOCK_SIZE && end != e->length))
		return false;
	/* One pointer answers it: the blocks must be physically in a row. */
	for (uint32_t b = op->off / CHUNK_BLOCK_SIZE; (b + 1) * CHUNK_BLOCK_SIZE < end; b++)
		if (pblk(e->bmap, b + 1) != pblk(e->bmap, b) + 1)
			return false;
	poff = HDR_SIZE + (uint64_t)pblk(e->bmap, op->off / CHUNK_BLOCK_SIZE) * CHUNK_BLOCK_SIZE;
	h = ent_map(op->cs, e, poff + op->nread);
	if (!h)
		return false;
	base = (const uint8_t *)h->addr + poff;
	if (!resident(base, op->nread))
		return false;
	op->data = base;
	op->rcrc = range_crc(e, op->data, op->off, op->nread);
	atomic_fetch_add(&h->refs, 1);
	op->hold = h;
	op_finish(op, 0);
	return true;
}

static void read_start(struct op *op)
{
	struct centry *e = op->e;
	uint32_t n, rs, re, b0, b1;
	int rc;

	if (!e->exists) {
		op_finish(op, -ENOENT);
		return;
	}
	if (op->off >= e->length || op->len == 0) {
		op_finish(op, 0);
		return;
	}
	n = min_u32(op->len, e->length - op->off);
	b0 = op->off / CHUNK_BLOCK_SIZE;
	b1 = (op->off + n - 1) / CHUNK_BLOCK_SIZE;
	rs = b0 * CHUNK_BLOCK_SIZE;
	re = min_u32((b1 + 1) * CHUNK_BLOCK_SIZE, e->length);
	op->nread = n;
	if (op->read_ref_cb && op->cs->o.buffered_reads && read_mapped(op))
		return;
	op->buf_doff = rs;
	op->buf_len = align_up(re - rs, PAGE_SZ);
	/* A block-aligned range into a page-aligned buffer that holds it
	 * needs no bounce buffer (and no copy). */
	if (rs == op->off && op->buf_len <= op->len && ((uintptr_t)op->dst % PAGE_SZ) == 0) {
		op->buf = op->dst;
		op->buf_is_dst = true;
	} else {
		op->buf = abuf_alloc(op->buf_len);
	}
	if (!op->buf) {
		op_finish(op, -ENOMEM);
		return;
	}
	rc = cs_ent_open_fd(op->cs, e);
	if (!rc)
		rc = cs_fd_mode(op->cs, e, !op->cs->o.buffered_reads);
	if (rc) {
		op_finish(op, rc);
		return;
	}
	run_setup(op, ST_READ_DATA, IO_READ, e->bmap, op->buf, rs, rs, rs + (uint32_t)op->buf_len);
	run_next(op);
}

/* Checks blocks [first, last] of e held in buf (which starts at chunk
 * offset doff) against the stored CRCs. Returns 0 or STRATA_EINTEGRITY. */
static int verify_blocks(struct chunk_store *cs, const struct centry *e, const uint8_t *buf,
			 uint32_t doff, uint32_t first, uint32_t last)
{
	for (uint32_t b = first; b <= last; b++) {
		uint32_t bs = b * CHUNK_BLOCK_SIZE;
		uint32_t be = min_u32(bs + CHUNK_BLOCK_SIZE, e->length);

		if (crc32c(0, buf + (bs - doff), be - bs) != e->bcrc[b]) {
			log_error(COMP, "target '%s': chunk %016" PRIx64 ".%016" PRIx64
				  " block %u fails its checksum; the replica must be resynced",
				  cs->dir, e->id.ino, e->id.idx, b);
			return STRATA_EINTEGRITY;
		}
	}
	return 0;
}

/* CRC32C of the n bytes at off just verified into dst: combined from the
 * block CRCs when the range is whole blocks (no second pass over the
 * data), computed otherwise. */
static struct crc32c_shift block_shift;
static pthread_once_t block_shift_once = PTHREAD_ONCE_INIT;

static void block_shift_init(void)
{
	crc32c_shift_init(&block_shift, CHUNK_BLOCK_SIZE);
}

/* CRC32C of the whole blocks from off (at a block) to end (at a block or
 * the content's end), combined from their CRCs bcrc. */
static uint32_t blocks_crc(const uint32_t *bcrc, uint32_t off, uint32_t end)
{
	uint32_t crc = 0;

	pthread_once(&block_shift_once, block_shift_init);
	for (uint32_t b = off / CHUNK_BLOCK_SIZE; b * CHUNK_BLOCK_SIZE < end; b++) {
		uint32_t bl = min_u32(CHUNK_BLOCK_SIZE, end - b * CHUNK_BLOCK_SIZE);

		if (b * CHUNK_BLOCK_SIZE == off)
			crc = bcrc[b];
		else if (bl == CHUNK_BLOCK_SIZE)
			crc = crc32c_shift_combine(&block_shift, crc, bcrc[b]);
		else
			crc = crc32c_combine(crc, bcrc[b], bl);
	}
	return crc;
}

static uint32_t range_crc(const struct centry *e, const uint8_t *dst, uint32_t off, uint32_t n)
{
	uint32_t end = off + n;

	if (n == 0 || off % CHUNK_BLOCK_SIZE || (end % CHUNK_BLOCK_SIZE && end != e->length))
		return crc32c(0, dst, n);
	return blocks_crc(e->bcrc, off, end);
}

static void read_done(struct op *op, int res)
{
	struct centry *e = op->e;
	int rc;

	if (res < 0) {
		op->nread = 0;
		op_finish(op, res);
		return;
	}
	rc = verify_blocks(op->cs, e, op->buf, op->buf_doff, op->buf_doff / CHUNK_BLOCK_SIZE,
			   (op->off + op->nread - 1) / CHUNK_BLOCK_SIZE);
	if (rc) {
		op->nread = 0;
		op_finish(op, rc);
		return;
	}
	if (!op->buf_is_dst)
		memcpy(op->dst, op->buf + (op->off - op->buf_doff), op->nread);
	op->rcrc = range_crc(e, op->dst, op->off, op->nread);
	op_finish(op, 0);
}

/* ---- update in place (append, extension, version bump) ---- */

/* Block and whole-content CRCs after writing [off, off+len) (data at
 * buf + off - buf_doff) past the current length, zeros in any gap. */
static void crc_inplace(struct op *op)
{
	const struct centry *e = op->e;
	uint32_t cur = e->length, nl = op->new_len;
	uint32_t dend = op->off + op->len;
	uint32_t c;

	if (e->length)
		memcpy(op->new_bcrc, e->bcrc, nblocks(cur) * sizeof(uint32_t));
	for (uint32_t b = cur / CHUNK_BLOCK_SIZE; b < nblocks(nl); b++) {
		uint32_t bs = b * CHUNK_BLOCK_SIZE, be = min_u32(bs + CHUNK_BLOCK_SIZE, nl);
		uint32_t p = bs, z;

		c = 0;
		if (cur > bs) {
			c = e->bcrc[b];
			p = cur;
		}
		if (op->len) {
			z = min_u32(max_u32(op->off, p), be);
			c = crc32c_zeros(c, z - p);
			p = z;
			if (dend > p) {
				uint32_t n = min_u32(dend, be) - p;

				c = crc32c(c, op->buf + (p - op->buf_doff), n);
				p += n;
			}
		}
		op->new_bcrc[b] = crc32c_zeros(c, be - p);
	}
	c = e->crc;
	if (op->len) {
		c = crc32c_zeros(c, op->off - cur);
		c = crc32c(c, op->buf + (op->off - op->buf_doff), op->len);
	} else if (nl > cur) {
		c = crc32c_zeros(c, nl - cur);
	}
	op->new_crc = c;
}

/* The tag an update leaves on its chunk: its own, else the chunk's. */
static uint32_t op_tag(const struct op *op)
{
	if (op->tag)
		return op->tag;
	return op->e->exists ? op->e->tag : 0;
}

static void inplace_write_slot(struct op *op)
{
	struct centry *e = op->e;

	op->trim_on_fail = false;
	abuf_free(op->buf);
	op->buf = abuf_alloc(SLOT_SIZE);
	if (!op->buf) {
		op_finish(op, -ENOMEM);
		return;
	}
	op->buf_len = SLOT_SIZE;
	cs_slot_encode(op->buf, e->seq + 1, &e->id, op->version, op->new_len, op->new_crc, op->new_bcrc,
		       op->new_map, op_tag(op));
	op_io(op, ST_WRITE_SLOT, IO_WRITE, e->fd, op->buf, SLOT_SIZE,
	      (uint64_t)(1 - e->slot) * SLOT_SIZE);
}

static void inplace_after_data(struct op *op)
{
	if (op->cs->o.sync_writes)
		op_io(op, ST_SYNC_DATA, IO_FSYNC, op->e->fd, NULL, 0, 0);
	else
		inplace_write_slot(op);
}

static void inplace_write_data(struct op *op)
{
	memcpy(op->buf + (op->off - op->buf_doff), op->src, op->len);
	crc_inplace(op);
	op->trim_on_fail = true;
	op_io(op, ST_WRITE_DATA, IO_WRITE, op->e->fd, op->buf, op->buf_len,
	      HDR_SIZE + op->pdelta + op->buf_doff);
}

static void inplace_commit(struct op *op)
{
	struct centry *e = op->e;
	uint32_t *t = e->bcrc;

	free(e->bmap);
	e->bmap = op->new_map;
	op->new_map = NULL;
	e->slot = 1 - e->slot;
	e->seq++;
	e->tag = op_tag(op);
	e->version = op->version;
	e->length = op->new_len;
	e->crc = op->new_crc;
	e->bcrc = op->new_bcrc;
	op->new_bcrc = t;
	op_finish(op, 0);
}

static void inplace_start(struct op *op)
{
	struct centry *e = op->e;
	uint64_t cur_end = HDR_SIZE + op->pdelta + e->length;
	uint32_t a0, a1;
	bool stale;
	int rc;

	rc = cs_ent_open_fd(op->cs, e);
	if (!rc)
		rc = cs_fd_mode(op->cs, e, true);
	if (rc)
		goto fail;
	if (op->len == 0 && op->new_len == e->length) {
		/* The slot alone (a version bump): the data area is left as
		 * it is, trailing leftovers too (the next append trims). */
		crc_inplace(op);
		inplace_after_data(op);
		return;
	}
	/* Bytes past the current length may be left over from a shrink or an
	 * append cut short by a crash. Gaps must read as zeros, so cut them
	 * off unless this write overwrites every one of them. */
	a0 = (uint32_t)align_down(op->off, PAGE_SZ);
	a1 = (uint32_t)align_up((uint64_t)op->off + op->len, PAGE_SZ);
	stale = e->fsize > cur_end &&
		!(op->len && op->off == e->length && e->fsize <= HDR_SIZE + op->pdelta + a1);
	if (stale) {
		if (ftruncate(e->fd, (off_t)cur_end) < 0) {
			rc = -errno;
			goto fail;
		}
		e->fsize = cur_end;
	}
	if (op->len == 0) {
		if (op->new_len > e->length) {
			if (ftruncate(e->fd, (off_t)(HDR_SIZE + op->pdelta + op->new_len)) < 0) {
				rc = -errno;
				goto fail;
			}
			e->fsize = HDR_SIZE + op->pdelta + op->new_len;
		}
		crc_inplace(op);
		inplace_after_data(op);
		return;
	}
	op->buf_doff = a0;
	op->buf_len = a1 - a0;
	op->buf = abuf_zalloc(op->buf_len);
	if (!op->buf) {
		rc = -ENOMEM;
		goto fail;
	}
	if (a0 < e->length) {
		op_io(op, ST_READ_HEAD, IO_READ, e->fd, op->buf, PAGE_SZ, HDR_SIZE + op->pdelta + a0);
		return;
	}
	inplace_write_data(op);
	return;
fail:
	op_finish(op, rc);
}

/* ---- copy-on-write (new chunk, overwrite, shrink) ---- */

static void cow_write_tmp(struct op *op)
{
	struct chunk_store *cs = op->cs;
	struct centry *e = op->e;
	const uint8_t *data = op->buf + HDR_SIZE;
	char path[PATH_MAX];
	uint32_t c = 0;
	int rc;

	if (op->type == OP_WRITE && op->len)
		memcpy(op->buf + HDR_SIZE + op->off, op->src, op->len);
	for (uint32_t b = 0; b < nblocks(op->new_len); b++) {
		uint32_t bs = b * CHUNK_BLOCK_SIZE, be = min_u32(bs + CHUNK_BLOCK_SIZE, op->new_len);

		op->new_bcrc[b] = crc32c(0, data + bs, be - bs);
		c = crc32c(c, data + bs, be - bs);
	}
	op->new_crc = c;
	/* Slot A of the new file; slot B stays zero (invalid). */
	cs_slot_encode(op->buf, e->exists ? e->seq + 1 : 1, &e->id, op->version, op->new_len,
		    op->new_crc, op->new_bcrc, NULL, op_tag(op));
	memset(op->buf + SLOT_SIZE, 0, SLOT_SIZE);
	rc = cs_chunk_path(cs, &e->id, ".tmp", path, sizeof(path));
	if (rc)
		goto fail;
	rc = cs_open_file(cs, path, O_RDWR | O_CREAT | O_TRUNC);
	if (rc < 0)
		goto fail;
	op->tmp_fd = rc;
	op_io(op, ST_WRITE_TMP, IO_WRITE, op->tmp_fd, op->buf, op->buf_len, 0);
	return;
fail:
	op_finish(op, rc);
}

static void cow_after_old(struct op *op)
{
	struct centry *e = op->e;
	uint32_t keep = min_u32(e->length, op->new_len);
	uint32_t rl = min_u32(e->length, (uint32_t)align_up(keep, CHUNK_BLOCK_SIZE));
	int rc;

	rc = verify_blocks(op->cs, e, op->buf + HDR_SIZE, 0, 0, nblocks(rl) - 1);
	if (rc) {
		op_finish(op, rc);
		return;
	}
	/* Past the kept length: zeros (a shrink drops the rest). */
	memset(op->buf + HDR_SIZE + keep, 0, align_up(rl, PAGE_SZ) - keep);
	cow_write_tmp(op);
}

static void cow_commit(struct op *op)
{
	struct chunk_store *cs = op->cs;
	struct centry *e = op->e;
	char tmp[PATH_MAX], path[PATH_MAX];
	uint32_t *t;
	int rc;

	rc = cs_chunk_path(cs, &e->id, ".tmp", tmp, sizeof(tmp));
	if (!rc)
		rc = cs_chunk_path(cs, &e->id, "", path, sizeof(path));
	if (rc)
		goto fail;
	if (rename(tmp, path) < 0) {
		rc = -errno;
		goto fail;
	}
	/* From here the new content is the chunk: no failure path below may
	 * roll the index back. */
	if (cs->o.sync_writes && (rc = cs_fsync_dir_of(cs, &e->id)) < 0)
		log_warn(COMP, "target '%s': fsync of a chunk directory failed: %s",
			 cs->dir, strerror(-rc));
	cs_ent_close_fd(cs, e);
	/* A new file: its blocks were never lent to a reply. */
	e->lent = false;
	free(e->bmap);
	e->bmap = NULL;
	e->fd = op->tmp_fd;
	e->fd_buffered = false;
	op->tmp_fd = -1;
	cs->nopen++;
	e->fsize = op->buf_len;
	e->slot = 0;
	e->seq = e->exists ? e->seq + 1 : 1;
	if (!e->exists)
		cs->nchunks++;
	e->exists = true;
	e->tag = op_tag(op);
	e->version = op->version;
	e->length = op->new_len;
	e->crc = op->new_crc;
	t = e->bcrc;
	e->bcrc = op->new_bcrc;
	op->new_bcrc = t;
	op_finish(op, 0);
	return;
fail:
	op_finish(op, rc);
}

static void cow_start(struct op *op)
{
	struct centry *e = op->e;
	uint32_t cur = e->exists ? e->length : 0;
	uint32_t keep = min_u32(cur, op->new_len), rl = 0;
	bool need_old;
	int rc;

	/* Old bytes survive unless the new data covers all of them. */
	need_old = keep > 0 && !(op->type == OP_WRITE && op->off == 0 && op->len >= keep);
	if (need_old)
		rl = min_u32(cur, (uint32_t)align_up(keep, CHUNK_BLOCK_SIZE));
	op->buf_len = HDR_SIZE + align_up(op->new_len, PAGE_SZ);
	op->buf = abuf_zalloc(HDR_SIZE + align_up(max_u32(op->new_len, rl), PAGE_SZ));
	if (!op->buf) {
		op_finish(op, -ENOMEM);
		return;
	}
	if (!need_old) {
		cow_write_tmp(op);
		return;
	}
	rc = cs_ent_open_fd(op->cs, e);
	if (rc) {
		op_finish(op, rc);
		return;
	}
	run_setup(op, ST_READ_OLD, IO_READ, e->bmap, op->buf + HDR_SIZE, 0, 0,
		  (uint32_t)align_up(rl, PAGE_SZ));
	run_next(op);
}

/* ---- block update (overwrite inside the chunk) ---- */

/*
 * Plans an update past the end in place. The blocks it adds must follow
 * the last physical block (the tail block, when partial, must be it), so
 * the trims and gaps of the in-place path work on physical offsets
 * shifted by pdelta. Returns 0, 1 when the layout does not allow it, or
 * -ENOMEM.
 */
static int inplace_plan(struct op *op)
{
	const struct centry *e = op->e;
	uint32_t cur = e->length, nbo = nblocks(cur), nbn = nblocks(op->new_len);
	uint32_t span, d;

	op->pdelta = 0;
	if (!e->bmap)
		return 0;
	span = map_span(e->bmap, cur);
	if (op->len == 0 && op->new_len == cur)
		d = 0;          /* the slot alone: nothing moves */
	else if (cur % CHUNK_BLOCK_SIZE && e->bmap[cur / CHUNK_BLOCK_SIZE] != span - 1)
		return 1;
	else
		d = span - nbo;
	if (nbn > nbo && d + nbn > PHYS_MAX)
		return 1;
	op->new_map = malloc(max_u32(1, nbn) * sizeof(uint16_t));
	if (!op->new_map)
		return -ENOMEM;
	memcpy(op->new_map, e->bmap, nbo * sizeof(uint16_t));
	for (uint32_t j = nbo; j < nbn; j++)
		op->new_map[j] = (uint16_t)(j + d);
	op->pdelta = (uint64_t)d * CHUNK_BLOCK_SIZE;
	cs_map_norm(&op->new_map, nbn);
	return 0;
}

/*
 * Plans a block update: the blocks [t0, t1] the update touches go to
 * physical blocks the committed map does not use: free ones first (unless
 * replies may still be sending from them), then past the end. Returns 0,
 * 1 when the file would span more than twice its blocks (copy-on-write
 * instead, which compacts), or -ENOMEM.
 */
static int blk_plan(struct op *op)
{
	const struct centry *e = op->e;
	uint32_t cur = e->length, nl = op->new_len;
	uint32_t ws = op->len ? op->off : nl, we = op->len ? op->off + op->len : nl;
	uint32_t nbo = nblocks(cur), nbn = nblocks(nl), span = map_span(e->bmap, cur);
	uint32_t t0 = min_u32(ws, cur) / CHUNK_BLOCK_SIZE, t1 = (we - 1) / CHUNK_BLOCK_SIZE;
	uint64_t used[PHYS_MAX / 64] = { 0 };
	bool reuse = !e->lent && (!e->map || atomic_load(&e->map->refs) == 1);
	uint32_t p = 0, top = span;
	uint16_t *map;

	map = malloc(nbn * sizeof(uint16_t));
	if (!map)
		return -ENOMEM;
	for (uint32_t i = 0; i < nbo; i++) {
		map[i] = (uint16_t)pblk(e->bmap, i);
		used[map[i] / 64] |= 1ull << (map[i] % 64);
	}
	for (uint32_t b = t0; b <= t1; b++) {
		while (reuse && p < span && (used[p / 64] >> (p % 64) & 1))
			p++;
		if (reuse && p < span)
			map[b] = (uint16_t)p++;
		else
			map[b] = (uint16_t)top++;
		if (top > PHYS_MAX || top > 2 * nbn) {
			free(map);
			return 1;
		}
	}
	op->blk_t0 = t0;
	op->blk_t1 = t1;
	/* Old bytes of t0 before the write, and of t1 after it, survive. */
	op->blk_rd = 0;
	if (t0 * CHUNK_BLOCK_SIZE < min_u32(ws, cur))
		op->blk_rd |= 1;
	if (we < min_u32(cur, (t1 + 1) * CHUNK_BLOCK_SIZE) && !(t1 == t0 && (op->blk_rd & 1)))
		op->blk_rd |= 2;
	op->blk_ver = op->blk_rd;
	op->new_map = map;
	cs_map_norm(&op->new_map, nbn);
	return 0;
}

static void blk_after_read(struct op *op);

/* Reads the next old block the update keeps part of, or goes on. */
static void blk_read_next(struct op *op)
{
	struct centry *e = op->e;
	uint32_t b, bs;

	if (!op->blk_rd) {
		blk_after_read(op);
		return;
	}
	b = (op->blk_rd & 1) ? op->blk_t0 : op->blk_t1;
	op->blk_rd &= (op->blk_rd & 1) ? ~1u : ~2u;
	bs = b * CHUNK_BLOCK_SIZE;
	op_io(op, ST_BLK_READ, IO_READ, e->fd, op->buf + (bs - op->buf_doff),
	      align_up(min_u32(e->length, bs + CHUNK_BLOCK_SIZE), PAGE_SZ) - bs,
	      HDR_SIZE + (uint64_t)pblk(e->bmap, b) * CHUNK_BLOCK_SIZE);
}

static void blk_after_read(struct op *op)
{
	struct centry *e = op->e;
	uint32_t cur = e->length, nl = op->new_len, doff = op->buf_doff;
	uint32_t bend = doff + (uint32_t)op->buf_len;
	int rc = 0;

	/* A corrupt block refuses a partial overwrite: its surviving bytes
	 * would be wrong (a write covering it replaces it untouched). */
	if (op->blk_ver & 1)
		rc = verify_blocks(op->cs, e, op->buf, doff, op->blk_t0, op->blk_t0);
	if (!rc && (op->blk_ver & 2))
		rc = verify_blocks(op->cs, e, op->buf, doff, op->blk_t1, op->blk_t1);
	if (rc) {
		op_finish(op, rc);
		return;
	}
	/* Past the old length the page read holds leftovers: gaps are zeros. */
	if (cur > doff && cur < bend)
		memset(op->buf + (cur - doff), 0, min_u32((uint32_t)align_up(cur, PAGE_SZ), bend) - cur);
	if (op->len)
		memcpy(op->buf + (op->off - doff), op->src, op->len);
	if (cur)
		memcpy(op->new_bcrc, e->bcrc, min_u32(nblocks(cur), nblocks(nl)) * sizeof(uint32_t));
	for (uint32_t b = op->blk_t0; b <= op->blk_t1; b++) {
		uint32_t bs = b * CHUNK_BLOCK_SIZE, be = min_u32(bs + CHUNK_BLOCK_SIZE, nl);

		op->new_bcrc[b] = crc32c(0, op->buf + (bs - doff), be - bs);
	}
	op->new_crc = nl ? blocks_crc(op->new_bcrc, 0, nl) : 0;
	run_setup(op, ST_BLK_WRITE, IO_WRITE, op->new_map, op->buf, doff, doff, bend);
	run_next(op);
}

static void blk_after_write(struct op *op)
{
	struct centry *e = op->e;
	uint64_t end = HDR_SIZE + (uint64_t)map_span(op->new_map, op->new_len) * CHUNK_BLOCK_SIZE;

	/* An upper bound is enough: it only decides whether to trim. */
	if (end > e->fsize)
		e->fsize = end;
	inplace_after_data(op);
}

static void blk_start(struct op *op)
{
	struct centry *e = op->e;
	uint32_t t0 = op->blk_t0, t1 = op->blk_t1;
	int rc;

	rc = cs_ent_open_fd(op->cs, e);
	if (!rc)
		rc = cs_fd_mode(op->cs, e, true);
	if (rc) {
		op_finish(op, rc);
		return;
	}
	op->buf_doff = t0 * CHUNK_BLOCK_SIZE;
	op->buf_len = min_u32((t1 + 1) * CHUNK_BLOCK_SIZE, (uint32_t)align_up(op->new_len, PAGE_SZ)) -
		      op->buf_doff;
	op->buf = abuf_zalloc(op->buf_len);
	if (!op->buf) {
		op_finish(op, -ENOMEM);
		return;
	}
	blk_read_next(op);
}

/* ---- write / truncate / remove entry points of the state machine ---- */

static void update_start(struct op *op)
{
	struct chunk_store *cs = op->cs;
	struct centry *e = op->e;
	uint32_t cur = e->exists ? e->length : 0;
	enum { P_COW, P_INPLACE, P_BLOCKS } path = P_COW;
	bool overwrite;
	int64_t delta;
	int rc = 1;

	if (op->type == OP_TRUNC) {
		if (!e->exists) {
			op_finish(op, -ENOENT);
			return;
		}
		op->new_len = op->off;
	} else if (op->replace) {
		op->new_len = op->len;
	} else {
		op->new_len = max_u32(cur, op->off + op->len);
	}
	if (e->exists && op->version <= e->version && (!op->replace || op->newer_only)) {
		op_finish(op, op->version == e->version ? -EALREADY : -ESTALE);
		return;
	}
	/* A removed chunk's tombstone: an update of its earlier life. */
	if (!e->exists && op->version <= e->version && (!op->replace || op->newer_only)) {
		op_finish(op, -ESTALE);
		return;
	}
	/* A new chunk, a replace, a shrink and a write covering the whole old
	 * content are copy-on-write (which also compacts the file); appends
	 * go in place when the layout allows, other updates by blocks. */
	overwrite = op->type == OP_WRITE && op->len && op->off < cur;
	if (e->exists && !op->replace && op->new_len >= cur &&
	    !(overwrite && op->off == 0 && op->len >= cur)) {
		if (!overwrite && (rc = inplace_plan(op)) == 0)
			path = P_INPLACE;
		else if (rc >= 0 && (rc = blk_plan(op)) == 0)
			path = P_BLOCKS;
		if (rc < 0) {
			op_finish(op, rc);
			return;
		}
	}
	delta = footprint(true, op->new_len, path == P_COW ? NULL : op->new_map) -
		footprint(e->exists, cur, e->bmap);
	if (path != P_COW && delta > 0 && cs->o.capacity && cs->used + delta > (int64_t)cs->o.capacity) {
		/* Copy-on-write compacts the file: it may fit where new
		 * blocks do not. */
		free(op->new_map);
		op->new_map = NULL;
		op->pdelta = 0;
		path = P_COW;
		delta = footprint(true, op->new_len, NULL) - footprint(e->exists, cur, e->bmap);
	}
	if (delta > 0 && cs->o.capacity && cs->used + delta > (int64_t)cs->o.capacity) {
		op_finish(op, -ENOSPC);
		return;
	}
	cs->used += delta;
	op->reserved = delta;
	op->new_bcrc = malloc(max_u32(1, nblocks(op->new_len)) * sizeof(uint32_t));
	if (!op->new_bcrc) {
		op_finish(op, -ENOMEM);
		return;
	}
	if (path == P_INPLACE)
		inplace_start(op);
	else if (path == P_BLOCKS)
		blk_start(op);
	else
		cow_start(op);
}

static void remove_start(struct op *op)
{
	struct chunk_store *cs = op->cs;
	struct centry *e = op->e;
	char path[PATH_MAX];
	int rc;

	if (!e->exists) {
		if (op->version > e->version)
			e->version = op->version;
		op_finish(op, -ENOENT);
		return;
	}
	if (op->version && op->version <= e->version) {
		op_finish(op, op->version == e->version ? -EALREADY : -ESTALE);
		return;
	}
	rc = cs_chunk_path(cs, &e->id, "", path, sizeof(path));
	if (rc)
		goto out;
	if (unlink(path) < 0 && errno != ENOENT) {
		rc = -errno;
		goto out;
	}
	if (cs->o.sync_writes)
		cs_fsync_dir_of(cs, &e->id);
	fill_info(&op->info, e);
	op->has_info = true;
	cs_ent_close_fd(cs, e);
	cs->used -= footprint(true, e->length, e->bmap);
	cs->nchunks--;
	e->exists = false;
	if (op->version > e->version)
		e->version = op->version;
	free(e->bcrc);
	e->bcrc = NULL;
	free(e->bmap);
	e->bmap = NULL;
	e->lent = false;
out:
	op_finish(op, rc);
}

static void op_start(struct op *op)
{
	switch (op->type) {
	case OP_READ:
		read_start(op);
		break;
	case OP_WRITE:
	case OP_TRUNC:
		update_start(op);
		break;
	case OP_REMOVE:
		remove_start(op);
		break;
	}
}

static void op_step(struct op *op, int res)
{
	if (res < 0 && op->state != ST_READ_DATA) {
		op_finish(op, res);
		return;
	}
	if (res >= 0 && (op->state == ST_READ_DATA || op->state == ST_READ_OLD ||
			 op->state == ST_BLK_WRITE) && run_next(op))
		return;
	switch (op->state) {
	case ST_READ_DATA:
		read_done(op, res);
		break;
	case ST_READ_HEAD:
		/* Only bytes below the current length are content; the rest
		 * of the page may be stale. */
		memset(op->buf + (op->e->length - op->buf_doff), 0,
		       PAGE_SZ - (op->e->length - op->buf_doff));
		inplace_write_data(op);
		break;
	case ST_WRITE_DATA:
	{
		uint64_t end = HDR_SIZE + op->pdelta + op->buf_doff + op->buf_len;

		if (end > op->e->fsize)
			op->e->fsize = end;
		inplace_after_data(op);
		break;
	}
	case ST_SYNC_DATA:
		inplace_write_slot(op);
		break;
	case ST_WRITE_SLOT:
		if (op->cs->o.sync_writes)
			op_io(op, ST_SYNC_SLOT, IO_FSYNC, op->e->fd, NULL, 0, 0);
		else
			inplace_commit(op);
		break;
	case ST_SYNC_SLOT:
		inplace_commit(op);
		break;
	case ST_READ_OLD:
		cow_after_old(op);
		break;
	case ST_WRITE_TMP:
		if (op->cs->o.sync_writes)
			op_io(op, ST_SYNC_TMP, IO_FSYNC, op->tmp_fd, NULL, 0, 0);
		else
			cow_commit(op);
		break;
	case ST_SYNC_TMP:
		cow_commit(op);
		break;
	case ST_BLK_READ:
		blk_read_next(op);
		break;
	case ST_BLK_WRITE:
		blk_after_write(op);
		break;
	case ST_QUEUED:
		op_finish(op, -EINVAL);
		break;
	}
}

/* Starts the head ops of runnable chunks while there is room. */
static void kick(struct chunk_store *cs)
{
	if (cs->kicking)
		return;
	cs->kicking = true;
	while (cs->rhead && cs->active < cs->o.queue_depth) {
		struct centry *e = cs->rhead;

		cs->rhead = e->rnext;
		if (!cs->rhead)
			cs->rtail = NULL;
		e->runnable = false;
		e->running = true;
		cs_lru_remove(cs, e);
		cs->active++;
		op_start(e->qhead);
	}
	cs->kicking = false;
	if (io_uring_sq_ready(&cs->ring))
		io_uring_submit(&cs->ring);
}

/* ---- submission ---- */

static struct op *op_new(struct chunk_store *cs, enum op_type type, const struct chunk_id *id,
			 struct centry **e_out)
{
	struct centry *e;
	struct op *op;

	if (cs_ent_get(cs, id, &e))
		return NULL;
	op = cs->free_ops;
	if (op)
		cs->free_ops = op->next;
	else
		op = malloc(sizeof(*op));
	if (!op) {
		if (!e->qhead && !e->exists && !e->running)
			cs_ent_idle(cs, e);
		return NULL;
	}
	memset(op, 0, sizeof(*op));
	op->cs = cs;
	op->e = e;
	op->type = type;
	op->tmp_fd = -1;
	*e_out = e;
	return op;
}

static void op_enqueue(struct chunk_store *cs, struct centry *e, struct op *op)
{
	if (e->qtail)
		e->qtail->next = op;
	else
		e->qhead = op;
	e->qtail = op;
	cs->pending++;
	make_runnable(cs, e);
	kick(cs);
}

int chunk_write(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
		chunk_done_fn cb, void *arg)
{
	return chunk_write_tagged(cs, id, offset, data, len, data_crc, version, 0, cb, arg);
}

/* A write (or, with replace, the whole new content) queued on its chunk. */
static int submit_write(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
			const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
			uint32_t tag, bool replace, bool newer_only, chunk_done_fn cb, void *arg)
{
	struct centry *e;
	struct op *op;

	if (!cs || !id || (len && !data) || version == 0 ||
	    (uint64_t)offset + len > cs->o.max_chunk_size)
		return -EINVAL;
	if (crc32c(0, data, len) != data_crc)
		return STRATA_EINTEGRITY;
	op = op_new(cs, OP_WRITE, id, &e);
	if (!op)
		return -ENOMEM;
	op->off = offset;
	op->len = len;
	op->src = data;
	op->version = version;
	op->tag = tag;
	op->replace = replace;
	op->newer_only = newer_only;
	op->done_cb = cb;
	op->arg = arg;
	op_enqueue(cs, e, op);
	return 0;
}

int chunk_write_tagged(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		       const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
		       uint32_t tag, chunk_done_fn cb, void *arg)
{
	return submit_write(cs, id, offset, data, len, data_crc, version, tag, false, false, cb,
			    arg);
}

int chunk_replace(struct chunk_store *cs, const struct chunk_id *id, const void *data,
		  uint32_t len, uint32_t data_crc, uint64_t version, uint32_t tag,
		  chunk_done_fn cb, void *arg)
{
	return submit_write(cs, id, 0, data, len, data_crc, version, tag, true, false, cb, arg);
}

int chunk_replace_newer(struct chunk_store *cs, const struct chunk_id *id, const void *data,
			uint32_t len, uint32_t data_crc, uint64_t version, uint32_t tag,
			chunk_done_fn cb, void *arg)
{
	return submit_write(cs, id, 0, data, len, data_crc, version, tag, true, true, cb, arg);
}

static int submit_read(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		       uint32_t len, void *dst, chunk_read_fn cb, chunk_read_ref_fn ref_cb,
		       void *arg)
{
	struct centry *e;
	struct op *op;

	if (!cs || !id || (len && !dst))
		return -EINVAL;
	op = op_new(cs, OP_READ, id, &e);
	if (!op)
		return -ENOMEM;
	op->off = offset;
	op->len = len;
	op->dst = dst;
	op->read_cb = cb;
	op->read_ref_cb = ref_cb;
	op->arg = arg;
	op_enqueue(cs, e, op);
	return 0;
}

int chunk_read(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
	       uint32_t len, void *dst, chunk_read_fn cb, void *arg)
{
	return submit_read(cs, id, offset, len, dst, cb, NULL, arg);
}

int chunk_read_ref(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		   uint32_t len, void *dst, chunk_read_ref_fn cb, void *arg)
{
	return submit_read(cs, id, offset, len, dst, NULL, cb, arg);
}

int chunk_truncate(struct chunk_store *cs, const struct chunk_id *id, uint32_t length,
		   uint64_t version, chunk_done_fn cb, void *arg)
{
	struct centry *e;
	struct op *op;

	if (!cs || !id || version == 0 || length > cs->o.max_chunk_size)
		return -EINVAL;
	op = op_new(cs, OP_TRUNC, id, &e);
	if (!op)
		return -ENOMEM;
	op->off = length;
	op->version = version;
	op->done_cb = cb;
	op->arg = arg;
	op_enqueue(cs, e, op);
	return 0;
}

int chunk_remove(struct chunk_store *cs, const struct chunk_id *id, uint64_t version,
		 chunk_done_fn cb, void *arg)
{
	struct centry *e;
	struct op *op;

	if (!cs || !id)
		return -EINVAL;
	op = op_new(cs, OP_REMOVE, id, &e);
	if (!op)
		return -ENOMEM;
	op->version = version;
	op->done_cb = cb;
	op->arg = arg;
	op_enqueue(cs, e, op);
	return 0;
}

/* ---- polling ---- */

static void run_done(struct chunk_store *cs)
{
	struct op *op;

	while ((op = cs->done_head)) {
		const struct chunk_info *info = op->has_info ? &op->info : NULL;

		cs->done_head = op->next;
		if (!cs->done_head)
			cs->done_tail = NULL;
		if (op->type == OP_READ && op->read_ref_cb) {
			op->read_ref_cb(op->arg, op->status, info, op->hold ? op->data : op->dst,
					op->nread, op->rcrc, op->hold);
			op->hold = NULL;
		} else if (op->type == OP_READ) {
			if (op->read_cb)
				op->read_cb(op->arg, op->status, info, op->nread, op->rcrc);
		} else if (op->done_cb) {
			op->done_cb(op->arg, op->status, info);
		}
		cs->pending--;
		cs->ncallbacks++;
		op->next = cs->free_ops;
		cs->free_ops = op;
	}
}

void chunk_store_poll(struct chunk_store *cs)
{
	struct io_uring_cqe *cqe;
	uint64_t v;

	/* Called for on_done, the fd need not be readable: spare the read
	 * when io_uring has posted nothing either. */
	if ((!cs->done_signalled || io_uring_cq_ready(&cs->ring)) &&
	    read(cs->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		log_debug(COMP, "eventfd read: %s", strerror(errno));
	cs->done_signalled = false;
	cs->in_poll = true;
	while (io_uring_peek_cqe(&cs->ring, &cqe) == 0) {
		struct op *op = io_uring_cqe_get_data(cqe);
		int res = cqe->res;

		io_uring_cqe_seen(&cs->ring, cqe);
		cs->inflight--;
		io_complete(op, res);
	}
	kick(cs);
	run_done(cs);
	if (io_uring_sq_ready(&cs->ring))
		io_uring_submit(&cs->ring);
	cs->in_poll = false;
}

int chunk_store_wait(struct chunk_store *cs, int timeout_ms)
{
	uint64_t before = cs->ncallbacks;
	struct io_uring_cqe *cqe;
	int rc = 0;

	if (!cs->done_head && cs->inflight) {
		if (io_uring_sq_ready(&cs->ring))
			io_uring_submit(&cs->ring);
		if (timeout_ms < 0) {
			rc = io_uring_wait_cqe(&cs->ring, &cqe);
		} else {
			struct __kernel_timespec ts = {
				.tv_sec = timeout_ms / 1000,
				.tv_nsec = (long long)(timeout_ms % 1000) * 1000000,
			};

			rc = io_uring_wait_cqe_timeout(&cs->ring, &cqe, &ts);
		}
		if (rc == -ETIME || rc == -EINTR)
			rc = 0;
	}
	chunk_store_poll(cs);
	if (rc < 0)
		return rc;
	return (int)(cs->ncallbacks - before);
}

int chunk_store_fd(struct chunk_store *cs)
{
	return cs->efd;
}

bool chunk_store_is_direct(const struct chunk_store *cs)
{
	return cs->direct;
}

uint32_t chunk_store_pending(const struct chunk_store *cs)
{
	return cs->pending;
}
