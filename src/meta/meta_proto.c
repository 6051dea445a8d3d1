/*
 * Encoders and decoders of the meta service's message bodies; the layout
 * of each is documented in meta_proto.h.
 */
#include <fcntl.h>
#include <string.h>

#include "meta/meta_proto.h"
#include "strata/errors.h"

uint32_t mp_open_flags_to_wire(int flags)
{
	uint32_t w;

	switch (flags & O_ACCMODE) {
	case O_WRONLY:
		w = MP_O_WRONLY;
		break;
	case O_RDWR:
		w = MP_O_RDWR;
		break;
	default:
		w = MP_O_RDONLY;
		break;
	}
	if (flags & O_TRUNC)
		w |= MP_O_TRUNC;
	return w;
}

int mp_open_flags_from_wire(uint32_t flags)
{
	int f;

	switch (flags & MP_O_ACCMODE) {
	case MP_O_WRONLY:
		f = O_WRONLY;
		break;
	case MP_O_RDWR:
		f = O_RDWR;
		break;
	default:
		f = O_RDONLY;
		break;
	}
	if (flags & MP_O_TRUNC)
		f |= O_TRUNC;
	return f;
}

/* Finishes a decode: every byte consumed and no earlier error. */
static int finish(struct rbuf *r, bool ok)
{
	if (!ok && !r->err)
		r->err = STRATA_EBADMSG;
	return rb_finish(r) ? STRATA_EBADMSG : 0;
}

/* ---- pieces ---- */

void mp_layout_encode(struct wbuf *w, const struct file_layout *l)
{
	wb_u32(w, l->chunk_size);
	wb_u32(w, l->stripe);
	wb_u32(w, l->table_len);
	wb_u64(w, l->seed);
}

void mp_layout_decode(struct rbuf *r, struct file_layout *out)
{
	out->chunk_size = rb_u32(r);
	out->stripe = rb_u32(r);
	out->table_len = rb_u32(r);
	out->seed = rb_u64(r);
}

void mp_inode_encode(struct wbuf *w, const struct meta_inode *in)
{
	wb_u64(w, in->ino);
	wb_u32(w, in->mode);
	wb_u32(w, in->uid);
	wb_u32(w, in->gid);
	wb_u32(w, in->nlink);
	wb_u64(w, in->size);
	wb_i64(w, in->atime_ns);
	wb_i64(w, in->mtime_ns);
	wb_i64(w, in->ctime_ns);
	wb_u64(w, in->parent);
	mp_layout_encode(w, &in->layout);
}

void mp_inode_decode(struct rbuf *r, struct meta_inode *out)
{
	out->ino = rb_u64(r);
	out->mode = rb_u32(r);
	out->uid = rb_u32(r);
	out->gid = rb_u32(r);
	out->nlink = rb_u32(r);
	out->size = rb_u64(r);
	out->atime_ns = rb_i64(r);
	out->mtime_ns = rb_i64(r);
	out->ctime_ns = rb_i64(r);
	out->parent = rb_u64(r);
	mp_layout_decode(r, &out->layout);
}

void mp_trunc_encode(struct wbuf *w, const struct ns_trunc *tr)
{
	wb_u8(w, tr->partial ? 1 : 0);
	wb_u64(w, tr->chunk);
	wb_u32(w, tr->len);
	wb_u64(w, tr->gc_from);
	wb_u64(w, tr->gc_to);
	mp_layout_encode(w, &tr->layout);
}

void mp_trunc_decode(struct rbuf *r, struct ns_trunc *out)
{
	uint8_t partial = rb_u8(r);

	out->partial = partial == 1;
	out->chunk = rb_u64(r);
	out->len = rb_u32(r);
	out->gc_from = rb_u64(r);
	out->gc_to = rb_u64(r);
	mp_layout_decode(r, &out->layout);
	if (!r->err && (partial > 1 || out->gc_from > out->gc_to))
		r->err = STRATA_EBADMSG;
}

/* ---- requests ---- */

void mp_name_req_encode(struct wbuf *w, uint64_t parent, const char *name)
{
	wb_u64(w, parent);
	wb_str(w, name);
}

int mp_name_req_decode(const void *body, uint32_t len, struct mp_name_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->parent = rb_u64(&r);
	rb_str(&r, out->name, sizeof(out->name));
	return finish(&r, true);
}

void mp_ino_req_encode(struct wbuf *w, uint64_t ino)
{
	wb_u64(w, ino);
}

int mp_ino_req_decode(const void *body, uint32_t len, struct mp_ino_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->ino = rb_u64(&r);
	return finish(&r, true);
}

void mp_create_req_encode(struct wbuf *w, const struct mp_create_req *rq)
{
	wb_u64(w, rq->parent);
	wb_str(w, rq->name);
	wb_u32(w, rq->mode);
	wb_u32(w, rq->uid);
	wb_u32(w, rq->gid);
	wb_u32(w, rq->flags);
}

int mp_create_req_decode(const void *body, uint32_t len, struct mp_create_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->parent = rb_u64(&r);
	rb_str(&r, out->name, sizeof(out->name));
	out->mode = rb_u32(&r);
	out->uid = rb_u32(&r);
	out->gid = rb_u32(&r);
	out->flags = rb_u32(&r);
	return finish(&r, !(out->flags & ~MP_CREATE_KNOWN));
}

void mp_open_req_encode(struct wbuf *w, const struct mp_open_req *rq)
{
	wb_u64(w, rq->ino);
	wb_u32(w, rq->flags);
}

int mp_open_req_decode(const void *body, uint32_t len, struct mp_open_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->ino = rb_u64(&r);
	out->flags = rb_u32(&r);
	return finish(&r, !(out->flags & ~MP_O_KNOWN) &&
			      (out->flags & MP_O_ACCMODE) != MP_O_ACCMODE);
}

void mp_symlink_req_encode(struct wbuf *w, const struct mp_symlink_req *rq)
{
	wb_u64(w, rq->parent);
	wb_str(w, rq->name);
	wb_str(w, rq->target);
	wb_u32(w, rq->uid);
	wb_u32(w, rq->gid);
}

int mp_symlink_req_decode(const void *body, uint32_t len, struct mp_symlink_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->parent = rb_u64(&r);
	rb_str(&r, out->name, sizeof(out->name));
	rb_str(&r, out->target, sizeof(out->target));
	out->uid = rb_u32(&r);
	out->gid = rb_u32(&r);
	return finish(&r, true);
}

void mp_rename_req_encode(struct wbuf *w, const struct mp_rename_req *rq)
{
	wb_u64(w, rq->src_parent);
	wb_str(w, rq->src_name);
	wb_u64(w, rq->dst_parent);
	wb_str(w, rq->dst_name);
	wb_u32(w, rq->flags);
}

int mp_rename_req_decode(const void *body, uint32_t len, struct mp_rename_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->src_parent = rb_u64(&r);
	rb_str(&r, out->src_name, sizeof(out->src_name));
	out->dst_parent = rb_u64(&r);
	rb_str(&r, out->dst_name, sizeof(out->dst_name));
	out->flags = rb_u32(&r);
	return finish(&r, !(out->flags & ~MP_RENAME_KNOWN));
}

void mp_setattr_req_encode(struct wbuf *w, const struct mp_setattr_req *rq)
{
	wb_u64(w, rq->ino);
	wb_u32(w, rq->mask);
	wb_u32(w, rq->attrs.mode);
	wb_u32(w, rq->attrs.uid);
	wb_u32(w, rq->attrs.gid);
	wb_i64(w, rq->attrs.atime_ns);
	wb_i64(w, rq->attrs.mtime_ns);
	wb_u64(w, rq->attrs.size);
}

int mp_setattr_req_decode(const void *body, uint32_t len, struct mp_setattr_req *out)
{
	struct rbuf r;

	memset(&out->attrs, 0, sizeof(out->attrs));
	rbuf_init(&r, body, len);
	out->ino = rb_u64(&r);
	out->mask = rb_u32(&r);
	out->attrs.mode = rb_u32(&r);
	out->attrs.uid = rb_u32(&r);
	out->attrs.gid = rb_u32(&r);
	out->attrs.atime_ns = rb_i64(&r);
	out->attrs.mtime_ns = rb_i64(&r);
	out->attrs.size = rb_u64(&r);
	out->attrs.ino = out->ino;
	return finish(&r, !(out->mask & ~MP_ATTR_KNOWN));
}

void mp_set_size_req_encode(struct wbuf *w, const struct mp_set_size_req *rq)
{
	wb_u64(w, rq->ino);
	wb_u64(w, rq->size);
	wb_i64(w, rq->mtime_ns);
}

int mp_set_size_req_decode(const void *body, uint32_t len, struct mp_set_size_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->ino = rb_u64(&r);
	out->size = rb_u64(&r);
	out->mtime_ns = rb_i64(&r);
	return finish(&r, true);
}

void mp_truncate_req_encode(struct wbuf *w, const struct mp_truncate_req *rq)
{
	wb_u64(w, rq->ino);
	wb_u64(w, rq->size);
}

int mp_truncate_req_decode(const void *body, uint32_t len, struct mp_truncate_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->ino = rb_u64(&r);
	out->size = rb_u64(&r);
	return finish(&r, true);
}

void mp_readdir_req_encode(struct wbuf *w, const struct mp_readdir_req *rq)
{
	wb_u64(w, rq->dir);
	wb_str(w, rq->cookie);
	wb_u32(w, rq->max);
}

int mp_readdir_req_decode(const void *body, uint32_t len, struct mp_readdir_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->dir = rb_u64(&r);
	rb_str(&r, out->cookie, sizeof(out->cookie));
	out->max = rb_u32(&r);
	return finish(&r, out->max >= 1 && out->max <= MP_READDIR_MAX);
}

void mp_set_layout_req_encode(struct wbuf *w, const struct mp_set_layout_req *rq)
{
	wb_u64(w, rq->dir);
	mp_layout_encode(w, &rq->layout);
}

int mp_set_layout_req_decode(const void *body, uint32_t len, struct mp_set_layout_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->dir = rb_u64(&r);
	mp_layout_decode(&r, &out->layout);
	return finish(&r, true);
}

void mp_resolve_req_encode(struct wbuf *w, const struct mp_resolve_req *rq)
{
	wb_str(w, rq->path);
	wb_u32(w, rq->flags);
}

int mp_resolve_req_decode(const void *body, uint32_t len, struct mp_resolve_req *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	rb_str(&r, out->path, sizeof(out->path));
	out->flags = rb_u32(&r);
	return finish(&r, !(out->flags & ~MP_RESOLVE_KNOWN));
}

int mp_empty_decode(const void *body, uint32_t len)
{
	(void)body;
	return len ? STRATA_EBADMSG : 0;
}

/* ---- replies ---- */

int mp_inode_rep_decode(const void *body, uint32_t len, struct meta_inode *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	mp_inode_decode(&r, out);
	return finish(&r, true);
}

void mp_attr_rep_encode(struct wbuf *w, const struct mp_attr_rep *rep)
{
	wb_u8(w, rep->created ? 1 : 0);
	mp_inode_encode(w, &rep->inode);
	mp_trunc_encode(w, &rep->trunc);
}

int mp_attr_rep_decode(const void *body, uint32_t len, struct mp_attr_rep *out)
{
	struct rbuf r;
	uint8_t created;

	rbuf_init(&r, body, len);
	created = rb_u8(&r);
	out->created = created == 1;
	mp_inode_decode(&r, &out->inode);
	mp_trunc_decode(&r, &out->trunc);
	return finish(&r, created <= 1);
}

void mp_readlink_rep_encode(struct wbuf *w, const char *target, uint32_t len)
{
	wb_bytes(w, target, len);
}

int mp_readlink_rep_decode(const void *body, uint32_t len, char *buf, size_t cap)
{
	struct rbuf r;

	if (!cap)
		return STRATA_EBADMSG;
	rbuf_init(&r, body, len);
	rb_str(&r, buf, cap < MP_TARGET_MAX + 1 ? cap : MP_TARGET_MAX + 1);
	return finish(&r, true);
}

int mp_layout_rep_decode(const void *body, uint32_t len, struct file_layout *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	mp_layout_decode(&r, out);
	return finish(&r, true);
}

void mp_statfs_rep_encode(struct wbuf *w, const struct mp_statfs_rep *rep)
{
	wb_u64(w, rep->inodes);
	wb_u64(w, rep->bytes);
	wb_u32(w, rep->table_len);
}

int mp_statfs_rep_decode(const void *body, uint32_t len, struct mp_statfs_rep *out)
{
	struct rbuf r;

	rbuf_init(&r, body, len);
	out->inodes = rb_u64(&r);
	out->bytes = rb_u64(&r);
	out->table_len = rb_u32(&r);
	return finish(&r, true);
}

void mp_dirent_encode(struct wbuf *w, const char *name, uint64_t ino, uint32_t type)
{
	wb_str(w, name);
	wb_u64(w, ino);
	wb_u32(w, type);
}

void mp_readdir_rep_encode(struct wbuf *w, uint32_t n, const void *entries, size_t entries_len,
			   const char *next_cookie, bool eof)
{
	wb_u32(w, n);
	wb_raw(w, entries, entries_len);
	wb_str(w, next_cookie ? next_cookie : "");
	wb_u8(w, eof ? 1 : 0);
}

/* One pass over a READDIR reply; cb NULL only validates. */
static int readdir_pass(const void *body, uint32_t len, mp_dirent_fn cb, void *arg,
			char *next_cookie, size_t cap, bool *eof, uint32_t *taken)
{
	char name[MP_NAME_MAX + 1];
	char cookie[MP_NAME_MAX + 1];
	struct rbuf r;
	uint32_t n;
	uint8_t e;

	rbuf_init(&r, body, len);
	n = rb_u32(&r);
	if (n > MP_READDIR_MAX)
		return STRATA_EBADMSG;
	for (uint32_t i = 0; i < n; i++) {
		uint64_t ino;
		uint32_t type;
		int rc;

		rb_str(&r, name, sizeof(name));
		ino = rb_u64(&r);
		type = rb_u32(&r);
		if (r.err || !name[0])
			return STRATA_EBADMSG;
		if (!cb)
			continue;
		rc = cb(arg, name, ino, type);
		if (rc)
			return rc;
		if (taken)
			(*taken)++;
	}
	rb_str(&r, cookie, sizeof(cookie));
	e = rb_u8(&r);
	if (finish(&r, e <= 1))
		return STRATA_EBADMSG;
	if (next_cookie && cap) {
		if (strlen(cookie) >= cap)
			return STRATA_EBADMSG;
		memcpy(next_cookie, cookie, strlen(cookie) + 1);
	}
	if (eof)
		*eof = e == 1;
	return 0;
}

int mp_readdir_rep_decode(const void *body, uint32_t len, mp_dirent_fn cb, void *arg,
			  char *next_cookie, size_t cap, bool *eof, uint32_t *taken)
{
	int rc;

	if (taken)
		*taken = 0;
	rc = readdir_pass(body, len, NULL, NULL, next_cookie, cap, eof, NULL);
	if (rc || !cb)
		return rc;
	return readdir_pass(body, len, cb, arg, NULL, 0, NULL, taken);
}
