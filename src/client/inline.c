/*
 * Inline data of small files, the client's side (docs/namespace.md,
 * "Inline data"; the operations in proto/meta.h).
 *
 * Opens go through the *_INL forms of OPEN, OPEN_PATH, CREATE and
 * CREATE_PATH while the meta service has them (an older one answers
 * STRATA_EBADOP once: the connection then uses the older forms for good).
 * Their reply carries the bytes of an inline file, and the service's
 * meta.inline_max.
 *
 * A handle holds a file inline (f->inl_on) in two cases:
 * - it opened an inline file: f->inl holds its bytes, and every read of
 *   the handle (strata_pread, the ring) is served from them;
 * - it created the file, or truncated it to 0, for writing, and
 *   meta.inline_max is not 0 (f->inl_w): its writes land in f->inl while
 *   they stay within inline_max; close and fsync publish them in one
 *   INLINE_SET. A write beyond inline_max, a write through the ring, or a
 *   publish the service refuses first writes the bytes as ordinary chunk
 *   writes ("spill") and the handle goes on as any other.
 * A handle that opens an inline file for writing without truncating it
 * converts the file first: it writes the bytes as chunk 0, cuts that chunk
 * to their length, and INLINE_SET(CONVERT) drops them from the store, so
 * no handle ever holds a file that is partly inline.
 *
 * Invariant of a handle with inl_on: f->inl holds f->size bytes and the
 * rest of its inl_cap bytes are zeros (a grown file reads zeros).
 *
 * Several writers of one small file (docs/namespace.md, "Several
 * writers"): every handle open for writing keeps a bitmap of the bytes it
 * wrote within the first MD_INLINE_MAX (f->wmap, 8 KiB: exact, it cannot
 * overflow as a list of ranges could). A spill writes only those bytes,
 * never the zeros of holes another handle may have written meanwhile.
 * A writer of chunks whose SET_SIZE finds the file inline (another handle
 * published it after our chunk writes: the service answers -EMEDIUMTYPE
 * instead of dropping those bytes) merges: it reads the inline bytes,
 * writes them as chunk 0 where its bitmap is clear, converts the file
 * (INLINE_SET(CONVERT), guarded by their CRC: on -EAGAIN it reads them
 * again) and sends SET_SIZE again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "common/clock.h"
#include "common/crc32c.h"

void cl_inl_release(struct cl_inl *inl)
{
	free(inl->data);
	memset(inl, 0, sizeof(*inl));
}

/* Takes what an open_rep says into *inl (the bytes copied) and its
 * attr_rep into *rep. */
static int take_rep(const struct mt_open_rep *o, struct mt_attr_rep *rep, struct cl_inl *inl)
{
	memset(inl, 0, sizeof(*inl));
	*rep = o->attr;
	inl->max = o->inline_max;
	if (!o->inl)
		return 0;
	inl->data = malloc(o->data.len);
	if (!inl->data)
		return -ENOMEM;
	memcpy(inl->data, o->data.p, o->data.len);
	inl->len = o->data.len;
	inl->has = true;
	return 0;
}

/* Whether s may use the *_INL forms. */
static bool inl_usable(const struct strata *s)
{
	return !__atomic_load_n(&s->inl_off, __ATOMIC_RELAXED);
}

/* An older service answered STRATA_EBADOP: the older forms from now on. */
static bool inl_refused(struct strata *s, int rc)
{
	if (rc != STRATA_EBADOP)
		return false;
	__atomic_store_n(&s->inl_off, true, __ATOMIC_RELAXED);
	return true;
}

/* One *_INL call (fn_inl) with its older form (fn) as the fallback. */
#define INL_CALL(s, fn_inl, fn, rq, rep, inl) ({ \
	struct strata *is_ = (s); \
	struct mt_open_rep io_; \
	struct proto_sync iy_ = is_->mc.sync; \
	struct bbuf ib_; \
	int irc_ = STRATA_EBADOP; \
	memset((inl), 0, sizeof(*(inl))); \
	if (inl_usable(is_)) { \
		bbuf_init(&ib_); \
		iy_.body = &ib_; \
		irc_ = MC_CALL_WITH(&is_->mc, fn_inl, (rq), &iy_, &io_); \
		if (!irc_) \
			irc_ = take_rep(&io_, (rep), (inl)); \
		bbuf_release(&ib_); \
	} \
	if (inl_refused(is_, irc_)) \
		irc_ = MC_CALL(&is_->mc, fn, (rq), (rep)); \
	irc_; \
})

int cl_open_h(struct strata *s, struct mt_open *rq, struct mt_attr_rep *rep, struct cl_inl *inl)
{
	return INL_CALL(s, md_open_inl, md_open, rq, rep, inl);
}

int cl_open_path(struct strata *s, struct mt_open_path *rq, struct mt_attr_rep *rep,
		 struct cl_inl *inl)
{
	return INL_CALL(s, md_open_path_inl, md_open_path, rq, rep, inl);
}

int cl_create_h(struct strata *s, struct mt_create *rq, struct mt_attr_rep *rep,
		struct cl_inl *inl)
{
	return INL_CALL(s, md_create_inl, md_create, rq, rep, inl);
}

int cl_create_path(struct strata *s, struct mt_create_path *rq, struct mt_attr_rep *rep,
		   struct cl_inl *inl)
{
	return INL_CALL(s, md_create_path_inl, md_create_path, rq, rep, inl);
}

/* ---- a handle's inline state ---- */

static struct mt_handle handle_of(const struct strata_file *f)
{
	return (struct mt_handle){ f->ino, f->gen };
}

/* Makes f's buffer inl_cap bytes (zeros past f->size); f->lock held. */
static int grow_buf(struct strata_file *f, uint32_t cap)
{
	uint8_t *p;

	if (f->inl_cap >= cap)
		return 0;
	p = realloc(f->inl, cap);
	if (!p)
		return -ENOMEM;
	memset(p + f->inl_cap, 0, cap - f->inl_cap);
	f->inl = p;
	f->inl_cap = cap;
	return 0;
}

/* Ends f's inline state; f->lock held. */
static void inline_off(struct strata_file *f)
{
	free(f->inl);
	f->inl = NULL;
	f->inl_cap = 0;
	f->inl_on = false;
	f->inl_w = false;
}

static bool wbit(const uint8_t *map, uint32_t i)
{
	return (map[i / 8] >> (i % 8)) & 1;
}

/* Sets (on) or clears the bits of [from, to) of map. */
static void wbits(uint8_t *map, uint32_t from, uint32_t to, bool on)
{
	for (uint32_t i = from; i < to; i++) {
		if (i % 8 == 0 && to - i >= 8) {
			uint32_t n = (to - i) / 8;

			memset(map + i / 8, on ? 0xff : 0, n);
			i += n * 8 - 1;
		} else if (on) {
			map[i / 8] |= (uint8_t)(1u << (i % 8));
		} else {
			map[i / 8] &= (uint8_t)~(1u << (i % 8));
		}
	}
}

void cl_inline_mark(struct strata_file *f, uint64_t off, uint64_t len)
{
	if (f->wmap && off < MD_INLINE_MAX && len)
		wbits(f->wmap, (uint32_t)off,
		      (uint32_t)(len < MD_INLINE_MAX - off ? off + len : MD_INLINE_MAX), true);
}

void cl_inline_unmark(struct strata_file *f, uint64_t size)
{
	if (f->wmap && size < MD_INLINE_MAX)
		wbits(f->wmap, (uint32_t)size, MD_INLINE_MAX, false);
}

/* Writes src's bytes of [0, len) whose bit in map is want to f's chunks,
 * a chunk write per run. 0 or an error. */
static int write_runs(struct strata_file *f, const uint8_t *map, const uint8_t *src,
		      uint32_t len, bool want)
{
	uint32_t i = 0, j;
	int rc;

	while (i < len) {
		if (wbit(map, i) != want) {
			i++;
			continue;
		}
		for (j = i + 1; j < len && wbit(map, j) == want; j++)
			;
		rc = cl_run(f, SC_WRITE, (uint8_t *)src + i, j - i, i);
		if (rc)
			return rc;
		i = j;
	}
	return 0;
}

/* Converts the inline file f opened for writing into a chunked one (see
 * the top); inl holds the bytes its open read. */
static int convert(struct strata_file *f, struct cl_inl *inl)
{
	struct mt_inline_set rq = { .h = handle_of(f), .flags = MD_INL_CONVERT };
	struct mt_inode in;
	int rc = 0;

	for (int attempt = 0; attempt < 5 && inl->has; attempt++) {
		struct mt_trunc tr = { .partial = 1, .chunk = 0, .len = inl->len };
		struct mt_open orq = { .h = handle_of(f), .flags = MD_O_RDONLY };
		struct mt_attr_rep rep;
		struct sp_cap cap;

		mt_layout_set(&tr.layout, &f->layout);
		/* The bytes as chunk 0, then the chunk cut to them: a chunk 0
		 * left by a conversion a crash cut short keeps no stale tail. */
		rc = cl_run(f, SC_WRITE, inl->data, inl->len, 0);
		if (!rc)
			rc = cl_file_cap(f, false, &cap);
		if (!rc)
			rc = cl_cut(f->s, f->ino, &tr, &cap);
		if (rc)
			return rc;
		rq.len = inl->len;
		rq.crc = crc32c(0, inl->data, inl->len);
		rc = MC_CALL(&f->s->mc, md_inline_set, &rq, &in);
		cl_meta_changed(f->s);
		if (rc != -EAGAIN)
			break;
		/* Rewritten meanwhile: read the bytes again. */
		cl_inl_release(inl);
		rc = cl_open_h(f->s, &orq, &rep, inl);
		if (rc)
			return rc;
		pthread_mutex_lock(&f->lock);
		f->size = rep.inode.size;
		pthread_mutex_unlock(&f->lock);
	}
	return rc;
}

int cl_inline_attach(struct strata_file *f, struct cl_inl *inl, bool fresh)
{
	int acc = f->flags & 3;
	int rc = 0;

	if (acc != STRATA_O_RDONLY) {
		f->wmap = calloc(1, CL_WMAP_BYTES);
		if (!f->wmap) {
			cl_inl_release(inl);
			return -ENOMEM;
		}
	}
	if (acc != STRATA_O_RDONLY && inl->has) {
		rc = convert(f, inl);
	} else if (inl->has) {
		/* Reads are served from the bytes the open carried. */
		f->inl = inl->data;
		f->inl_cap = inl->len;
		f->size = inl->len;
		f->inl_on = true;
		inl->data = NULL;
	} else if (acc != STRATA_O_RDONLY && fresh && f->size == 0 && inl->max) {
		f->inl_on = true;
		f->inl_w = true;
		f->inl_max = inl->max;
	}
	cl_inl_release(inl);
	return rc;
}

bool cl_inline_read(struct strata_file *f, void *buf, uint64_t len, uint64_t off)
{
	bool on;

	pthread_mutex_lock(&f->lock);
	on = f->inl_on;
	if (on && len) {
		/* Past the bytes (a racing truncation): zeros, as a hole. */
		uint64_t have = off < f->inl_cap ? f->inl_cap - off : 0;
		uint64_t n = have < len ? have : len;

		if (n)
			memcpy(buf, f->inl + off, n);
		memset((uint8_t *)buf + n, 0, len - n);
	}
	pthread_mutex_unlock(&f->lock);
	return on;
}

int cl_inline_spill(struct strata_file *f)
{
	uint64_t size;
	int rc = 0;

	pthread_mutex_lock(&f->wlock);
	pthread_mutex_lock(&f->lock);
	size = f->inl_w ? f->size : 0;
	if (!f->inl_w) {
		pthread_mutex_unlock(&f->lock);
		pthread_mutex_unlock(&f->wlock);
		return 0;
	}
	pthread_mutex_unlock(&f->lock);
	/* Reads go on from the buffer until the chunks hold it all; writers
	 * wait on wlock. Only the bytes this handle wrote: its holes may
	 * hold another handle's writes (wmap only changes under wlock
	 * while inl_w). */
	if (size)
		rc = write_runs(f, f->wmap, f->inl, (uint32_t)size, true);
	if (!rc) {
		pthread_mutex_lock(&f->lock);
		inline_off(f);
		if (size)
			f->dirty = true;	/* the length is published as a writer's */
		pthread_mutex_unlock(&f->lock);
	}
	pthread_mutex_unlock(&f->wlock);
	return rc;
}

/* The end of a change of f's bytes that answered rc: 2, it would take
 * the file past inline_max, which makes it a chunked one (1 then). */
static int past_bound(struct strata_file *f, int rc)
{
	if (rc != 2)
		return rc;
	rc = cl_inline_spill(f);
	return rc ? rc : 1;
}

int cl_inline_write(struct strata_file *f, const void *buf, uint64_t len, uint64_t off,
		    bool append, uint64_t *at)
{
	int rc = 0;

	pthread_mutex_lock(&f->wlock);
	pthread_mutex_lock(&f->lock);
	if (!f->inl_w) {
		rc = 1;
	} else {
		if (append)
			off = f->size;
		if (off + len > f->inl_max) {
			rc = 2;
		} else {
			rc = grow_buf(f, f->inl_max);
			if (!rc && len) {
				memcpy(f->inl + off, buf, len);
				cl_inline_mark(f, off, len);
				if (off + len > f->size)
					f->size = off + len;
				f->dirty = true;
			}
		}
	}
	*at = off;
	pthread_mutex_unlock(&f->lock);
	pthread_mutex_unlock(&f->wlock);
	return past_bound(f, rc);
}

/* Another handle published f's file since f last saw it (a guarded
 * publish answered -EAGAIN): takes the content now there under the bytes
 * f wrote (f->wmap). 0: f->inl holds the merge (publish it again); 1:
 * the merge is to go to chunks (the file is chunked now, or the merge is
 * past inline_max); or an error. */
static int rebase(struct strata_file *f)
{
	struct mt_open orq = { .h = handle_of(f), .flags = MD_O_RDONLY };
	struct mt_attr_rep rep;
	struct cl_inl inl;
	uint64_t size;
	int rc = cl_open_h(f->s, &orq, &rep, &inl);

	if (rc)
		return rc;
	if (!inl.has && rep.inode.size) {
		cl_inl_release(&inl);
		return 1;
	}
	pthread_mutex_lock(&f->wlock);
	pthread_mutex_lock(&f->lock);
	size = f->size > inl.len ? f->size : inl.len;
	if (!f->inl_w) {
		rc = 0;		/* spilled meanwhile: nothing to publish */
	} else if (size > f->inl_max) {
		rc = 1;
	} else {
		rc = grow_buf(f, f->inl_max);
		for (uint32_t i = 0; !rc && i < size; i++) {
			if (!wbit(f->wmap, i))
				f->inl[i] = i < inl.len ? inl.data[i] : 0;
		}
		if (!rc) {
			f->size = size;
			f->inl_guard = inl.len ? crc32c(0, inl.data, inl.len) : 0;
		}
	}
	pthread_mutex_unlock(&f->lock);
	pthread_mutex_unlock(&f->wlock);
	cl_inl_release(&inl);
	return rc;
}

int cl_inline_publish(struct strata_file *f, bool *done)
{
	struct mt_inline_set rq = { .h = handle_of(f) };
	bool guard = true;
	struct mt_inode in;
	int rc = -EAGAIN;

	*done = false;
	for (int attempt = 0; attempt < 8; attempt++) {
		pthread_mutex_lock(&f->wlock);
		pthread_mutex_lock(&f->lock);
		if (!f->inl_w) {
			pthread_mutex_unlock(&f->lock);
			pthread_mutex_unlock(&f->wlock);
			return 0;
		}
		rq.flags = MD_INL_PUBLISH | (guard ? MD_INL_GUARD : 0);
		rq.crc = guard ? f->inl_guard : 0;
		rq.len = (uint32_t)f->size;
		pthread_mutex_unlock(&f->lock);
		/* wlock held: no write changes the buffer while it is sent. */
		rq.data.p = f->inl;
		rq.data.len = rq.len;
		rq.mtime_ns = now_ns();
		rc = MC_CALL(&f->s->mc, md_inline_set, &rq, &in);
		if (!rc) {
			pthread_mutex_lock(&f->lock);
			f->inl_guard = rq.len ? crc32c(0, f->inl, rq.len) : 0;
			pthread_mutex_unlock(&f->lock);
		}
		pthread_mutex_unlock(&f->wlock);
		cl_meta_changed(f->s);
		if (!rc) {
			*done = true;
			return 0;
		}
		if (rc == STRATA_EBADMSG && guard) {
			/* An older service refuses the flag: unguarded. */
			guard = false;
			continue;
		}
		if (rc != -EAGAIN)
			break;
		/* Another handle published meanwhile: merge, publish again. */
		rc = rebase(f);
		if (rc == 1)
			return cl_inline_spill(f);
		if (rc)
			return rc;
		rc = -EAGAIN;
	}
	/* Chunked content there, inline_max lowered or off, an older
	 * service: the bytes go to chunks, the length as any writer's. */
	if (rc == -ENOTEMPTY || rc == -EFBIG || rc == -EOPNOTSUPP || rc == STRATA_EBADOP)
		return cl_inline_spill(f);
	return rc;
}

int cl_inline_truncate(struct strata_file *f, uint64_t size)
{
	int rc = 0;

	pthread_mutex_lock(&f->wlock);
	pthread_mutex_lock(&f->lock);
	if (!f->inl_w) {
		rc = 1;
	} else if (size > f->inl_max) {
		rc = 2;
	} else {
		rc = grow_buf(f, f->inl_max);
		if (!rc) {
			/* Bytes cut are no longer this handle's writes. */
			if (size < f->size)
				memset(f->inl + size, 0, f->size - size);
			cl_inline_unmark(f, size);
			f->size = size;
			f->dirty = true;
		}
	}
	pthread_mutex_unlock(&f->lock);
	pthread_mutex_unlock(&f->wlock);
	return past_bound(f, rc);
}

int cl_inline_merge(struct strata_file *f)
{
	struct mt_inline_set rq = { .h = handle_of(f), .flags = MD_INL_CONVERT };
	uint8_t *map = calloc(1, CL_WMAP_BYTES);
	int rc = -EAGAIN;

	if (!map)
		return -ENOMEM;
	pthread_mutex_lock(&f->lock);
	if (f->wmap)
		memcpy(map, f->wmap, CL_WMAP_BYTES);
	pthread_mutex_unlock(&f->lock);
	for (int attempt = 0; attempt < 5 && rc == -EAGAIN; attempt++) {
		struct mt_open orq = { .h = handle_of(f), .flags = MD_O_RDONLY };
		struct mt_attr_rep rep;
		struct mt_inode in;
		struct cl_inl inl;

		/* Without the *_INL forms the older OPEN refuses an inline
		 * file (-EMEDIUMTYPE): the close fails, nothing is dropped. */
		rc = cl_open_h(f->s, &orq, &rep, &inl);
		if (rc)
			break;
		if (inl.has) {
			/* The other handle's bytes where we wrote nothing
			 * (its holes included: zeros), then the conversion,
			 * refused (-EAGAIN) if they changed meanwhile. */
			rc = write_runs(f, map, inl.data, inl.len, false);
			if (!rc) {
				rq.len = inl.len;
				rq.crc = crc32c(0, inl.data, inl.len);
				rc = MC_CALL(&f->s->mc, md_inline_set, &rq, &in);
				cl_meta_changed(f->s);
			}
		}
		cl_inl_release(&inl);
	}
	free(map);
	return rc;
}

int cl_inline_convert(struct strata *s, struct mt_handle h)
{
	struct strata_file *f;
	int rc = cl_open_handle(s, h, STRATA_O_WRONLY, &f);

	if (!rc)
		rc = strata_close(f);
	return rc;
}

void cl_inline_free(struct strata_file *f)
{
	inline_off(f);
	free(f->wmap);
	f->wmap = NULL;
}
