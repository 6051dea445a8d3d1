/*
 * Synchronous meta service calls (meta_client.h): encode the request,
 * rpc_call_sync(), decode the reply.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/meta_client.h"
#include "net/codec.h"
#include "strata/errors.h"

int mc_ctx_init(struct mc_ctx *ctx, struct rpc_client *cl, const char *addr,
		uint32_t timeout_ms)
{
	int n;

	memset(ctx, 0, sizeof(*ctx));
	ctx->cl = cl;
	ctx->timeout_ms = timeout_ms;
	n = snprintf(ctx->addr, sizeof(ctx->addr), "%s", addr ? addr : "");
	return n < 0 || (size_t)n >= sizeof(ctx->addr) ? -ENAMETOOLONG : 0;
}

/* -EINVAL for NULL, -ENAMETOOLONG beyond max bytes. */
static int str_check(const char *s, size_t max)
{
	if (!s)
		return -EINVAL;
	return strnlen(s, max + 1) > max ? -ENAMETOOLONG : 0;
}

/*
 * Sends the request encoded in w and waits. On 0, res->body holds the
 * reply body; res is always to be released by the caller.
 */
static int call(const struct mc_ctx *ctx, uint16_t op, struct wbuf *w, struct rpc_result *res)
{
	struct rpc_sync_args a = { 0 };

	memset(res, 0, sizeof(*res));
	bbuf_init(&res->body);
	if (w->err)
		return w->err;
	a.op = op;
	a.body = w->b->buf;
	a.body_len = (uint32_t)w->b->len;
	a.timeout_ms = ctx->timeout_ms;
	return rpc_call_sync(ctx->cl, ctx->addr, &a, res);
}

/* Calls op with the request in b and releases b. The reply body is left in
 * res for the caller to decode and release. */
static int call_release(const struct mc_ctx *ctx, uint16_t op, struct wbuf *w,
			struct rpc_result *res)
{
	int rc = call(ctx, op, w, res);

	bbuf_release(w->b);
	return rc;
}

/* A call whose reply is an inode. */
static int call_inode(const struct mc_ctx *ctx, uint16_t op, struct wbuf *w,
		      struct meta_inode *out)
{
	struct rpc_result res;
	struct meta_inode in;
	int rc = call_release(ctx, op, w, &res);

	if (!rc)
		rc = mp_inode_rep_decode(res.body.buf, (uint32_t)res.body.len, &in);
	if (!rc && out)
		*out = in;
	rpc_result_release(&res);
	return rc;
}

/* A call whose reply is empty. */
static int call_empty(const struct mc_ctx *ctx, uint16_t op, struct wbuf *w)
{
	struct rpc_result res;
	int rc = call_release(ctx, op, w, &res);

	if (!rc)
		rc = mp_empty_decode(res.body.buf, (uint32_t)res.body.len);
	rpc_result_release(&res);
	return rc;
}

/* A call whose reply is an attr_rep. Returns created (0/1) or an error. */
static int call_attr(const struct mc_ctx *ctx, uint16_t op, struct wbuf *w,
		     struct meta_inode *out, struct ns_trunc *tr)
{
	struct rpc_result res;
	struct mp_attr_rep rep;
	int rc = call_release(ctx, op, w, &res);

	if (!rc)
		rc = mp_attr_rep_decode(res.body.buf, (uint32_t)res.body.len, &rep);
	if (!rc) {
		if (out)
			*out = rep.inode;
		if (tr)
			*tr = rep.trunc;
		rc = rep.created;
	}
	rpc_result_release(&res);
	return rc;
}

int mc_lookup(const struct mc_ctx *ctx, uint64_t parent, const char *name,
	      struct meta_inode *out)
{
	struct bbuf b;
	struct wbuf w;
	int rc = str_check(name, MP_NAME_MAX);

	if (rc)
		return rc;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_name_req_encode(&w, parent, name);
	return call_inode(ctx, OP_META_LOOKUP, &w, out);
}

int mc_getattr(const struct mc_ctx *ctx, uint64_t ino, struct meta_inode *out)
{
	struct bbuf b;
	struct wbuf w;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_ino_req_encode(&w, ino);
	return call_inode(ctx, OP_META_GETATTR, &w, out);
}

/* CREATE and MKDIR share a body. */
static void encode_create(struct wbuf *w, uint64_t parent, const char *name, uint32_t mode,
			  uint32_t uid, uint32_t gid, uint32_t flags)
{
	struct mp_create_req rq;

	memset(&rq, 0, sizeof(rq));
	rq.parent = parent;
	memcpy(rq.name, name, strlen(name) + 1);
	rq.mode = mode;
	rq.uid = uid;
	rq.gid = gid;
	rq.flags = flags;
	mp_create_req_encode(w, &rq);
}

int mc_create(const struct mc_ctx *ctx, uint64_t parent, const char *name, uint32_t mode,
	      uint32_t uid, uint32_t gid, uint32_t flags, struct meta_inode *out,
	      struct ns_trunc *tr)
{
	struct bbuf b;
	struct wbuf w;
	int rc = str_check(name, MP_NAME_MAX);

	if (rc)
		return rc;
	if (flags & ~MP_CREATE_KNOWN)
		return -EINVAL;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	encode_create(&w, parent, name, mode, uid, gid, flags);
	return call_attr(ctx, OP_META_CREATE, &w, out, tr);
}

int mc_open(const struct mc_ctx *ctx, uint64_t ino, int flags, struct meta_inode *out,
	    struct ns_trunc *tr)
{
	struct mp_open_req rq = { .ino = ino, .flags = mp_open_flags_to_wire(flags) };
	struct bbuf b;
	struct wbuf w;
	int rc;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_open_req_encode(&w, &rq);
	rc = call_attr(ctx, OP_META_OPEN, &w, out, tr);
	return rc < 0 ? rc : 0;
}

int mc_mkdir(const struct mc_ctx *ctx, uint64_t parent, const char *name, uint32_t mode,
	     uint32_t uid, uint32_t gid, struct meta_inode *out)
{
	struct bbuf b;
	struct wbuf w;
	int rc = str_check(name, MP_NAME_MAX);

	if (rc)
		return rc;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	encode_create(&w, parent, name, mode, uid, gid, 0);
	return call_inode(ctx, OP_META_MKDIR, &w, out);
}

int mc_symlink(const struct mc_ctx *ctx, uint64_t parent, const char *name,
	       const char *target, uint32_t uid, uint32_t gid, struct meta_inode *out)
{
	struct bbuf b;
	struct wbuf w;
	int rc = str_check(name, MP_NAME_MAX);

	if (!rc)
		rc = str_check(target, MP_TARGET_MAX);
	if (rc)
		return rc;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	/* Encoded by hand: struct mp_symlink_req is 4 KiB of copies. */
	wb_u64(&w, parent);
	wb_str(&w, name);
	wb_str(&w, target);
	wb_u32(&w, uid);
	wb_u32(&w, gid);
	return call_inode(ctx, OP_META_SYMLINK, &w, out);
}

int mc_readlink(const struct mc_ctx *ctx, uint64_t ino, char *buf, size_t cap)
{
	char target[MP_TARGET_MAX + 1];
	struct rpc_result res;
	struct bbuf b;
	struct wbuf w;
	size_t len;
	int rc;

	if (!buf || !cap)
		return -EINVAL;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_ino_req_encode(&w, ino);
	rc = call_release(ctx, OP_META_READLINK, &w, &res);
	if (!rc)
		rc = mp_readlink_rep_decode(res.body.buf, (uint32_t)res.body.len, target,
					    sizeof(target));
	rpc_result_release(&res);
	if (rc)
		return rc;
	len = strlen(target);
	snprintf(buf, cap, "%s", target);
	return (int)len;
}

static int name_call(const struct mc_ctx *ctx, uint16_t op, uint64_t parent, const char *name)
{
	struct bbuf b;
	struct wbuf w;
	int rc = str_check(name, MP_NAME_MAX);

	if (rc)
		return rc;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_name_req_encode(&w, parent, name);
	return call_empty(ctx, op, &w);
}

int mc_unlink(const struct mc_ctx *ctx, uint64_t parent, const char *name)
{
	return name_call(ctx, OP_META_UNLINK, parent, name);
}

int mc_rmdir(const struct mc_ctx *ctx, uint64_t parent, const char *name)
{
	return name_call(ctx, OP_META_RMDIR, parent, name);
}

int mc_rename(const struct mc_ctx *ctx, uint64_t src_parent, const char *src_name,
	      uint64_t dst_parent, const char *dst_name, uint32_t flags)
{
	struct bbuf b;
	struct wbuf w;
	int rc = str_check(src_name, MP_NAME_MAX);

	if (!rc)
		rc = str_check(dst_name, MP_NAME_MAX);
	if (rc)
		return rc;
	if (flags & ~MP_RENAME_KNOWN)
		return -EINVAL;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	wb_u64(&w, src_parent);
	wb_str(&w, src_name);
	wb_u64(&w, dst_parent);
	wb_str(&w, dst_name);
	wb_u32(&w, flags);
	return call_empty(ctx, OP_META_RENAME, &w);
}

int mc_setattr(const struct mc_ctx *ctx, uint64_t ino, uint32_t mask,
	       const struct meta_inode *attrs, struct meta_inode *out, struct ns_trunc *tr)
{
	struct mp_setattr_req rq;
	struct bbuf b;
	struct wbuf w;
	int rc;

	if (!attrs || (mask & ~MP_ATTR_KNOWN))
		return -EINVAL;
	rq.ino = ino;
	rq.mask = mask;
	rq.attrs = *attrs;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_setattr_req_encode(&w, &rq);
	rc = call_attr(ctx, OP_META_SETATTR, &w, out, tr);
	return rc < 0 ? rc : 0;
}

int mc_set_size(const struct mc_ctx *ctx, uint64_t ino, uint64_t size, int64_t mtime_ns,
		struct meta_inode *out)
{
	struct mp_set_size_req rq = { .ino = ino, .size = size, .mtime_ns = mtime_ns };
	struct bbuf b;
	struct wbuf w;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_set_size_req_encode(&w, &rq);
	return call_inode(ctx, OP_META_SET_SIZE, &w, out);
}

int mc_truncate(const struct mc_ctx *ctx, uint64_t ino, uint64_t size, struct meta_inode *out,
		struct ns_trunc *tr)
{
	struct mp_truncate_req rq = { .ino = ino, .size = size };
	struct bbuf b;
	struct wbuf w;
	int rc;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_truncate_req_encode(&w, &rq);
	rc = call_attr(ctx, OP_META_TRUNCATE, &w, out, tr);
	return rc < 0 ? rc : 0;
}

struct readdir_wrap {
	mp_dirent_fn cb;
	void *arg;
	char last[MP_NAME_MAX + 1];
};

static int readdir_wrap_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct readdir_wrap *rw = arg;
	int rc = rw->cb(rw->arg, name, ino, type);

	if (rc)
		return 1;	/* stop: never mistaken for a decode error */
	snprintf(rw->last, sizeof(rw->last), "%s", name);
	return 0;
}

int mc_readdir(const struct mc_ctx *ctx, uint64_t dir, const char *cookie, uint32_t max,
	       mp_dirent_fn cb, void *arg, char *next_cookie, size_t cap, bool *eof)
{
	struct mp_readdir_req rq;
	struct readdir_wrap rw;
	struct rpc_result res;
	char next[MP_NAME_MAX + 1];
	struct bbuf b;
	struct wbuf w;
	uint32_t taken = 0;
	bool end = false;
	int rc;

	if (!cookie)
		cookie = "";
	rc = str_check(cookie, MP_NAME_MAX);
	if (rc)
		return rc;
	if (!cb || max < 1 || max > MP_READDIR_MAX || (next_cookie && cap <= MP_NAME_MAX))
		return -EINVAL;
	rq.dir = dir;
	memcpy(rq.cookie, cookie, strlen(cookie) + 1);
	rq.max = max;
	rw.cb = cb;
	rw.arg = arg;
	memcpy(rw.last, cookie, strlen(cookie) + 1);
	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_readdir_req_encode(&w, &rq);
	rc = call_release(ctx, OP_META_READDIR, &w, &res);
	if (!rc) {
		rc = mp_readdir_rep_decode(res.body.buf, (uint32_t)res.body.len, readdir_wrap_cb,
					   &rw, next, sizeof(next), &end, &taken);
		if (rc > 0) {
			/* The callback stopped the listing: resume after the
			 * last entry it took. */
			memcpy(next, rw.last, strlen(rw.last) + 1);
			end = false;
			rc = 0;
		}
	}
	rpc_result_release(&res);
	if (rc)
		return rc;
	if (next_cookie)
		memcpy(next_cookie, next, strlen(next) + 1);
	if (eof)
		*eof = end;
	return (int)taken;
}

int mc_set_layout(const struct mc_ctx *ctx, uint64_t dir, const struct file_layout *layout)
{
	struct mp_set_layout_req rq;
	struct bbuf b;
	struct wbuf w;

	if (!layout)
		return -EINVAL;
	rq.dir = dir;
	rq.layout = *layout;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_set_layout_req_encode(&w, &rq);
	return call_empty(ctx, OP_META_SET_LAYOUT, &w);
}

int mc_get_layout(const struct mc_ctx *ctx, uint64_t ino, struct file_layout *out)
{
	struct rpc_result res;
	struct file_layout l;
	struct bbuf b;
	struct wbuf w;
	int rc;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	mp_ino_req_encode(&w, ino);
	rc = call_release(ctx, OP_META_GET_LAYOUT, &w, &res);
	if (!rc)
		rc = mp_layout_rep_decode(res.body.buf, (uint32_t)res.body.len, &l);
	if (!rc && out)
		*out = l;
	rpc_result_release(&res);
	return rc;
}

int mc_statfs(const struct mc_ctx *ctx, struct ns_statfs *out)
{
	struct mp_statfs_rep rep;
	struct rpc_result res;
	struct bbuf b;
	struct wbuf w;
	int rc;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	rc = call_release(ctx, OP_META_STATFS, &w, &res);
	if (!rc)
		rc = mp_statfs_rep_decode(res.body.buf, (uint32_t)res.body.len, &rep);
	if (!rc && out) {
		out->inodes = rep.inodes;
		out->bytes = rep.bytes;
		out->table_len = rep.table_len;
	}
	rpc_result_release(&res);
	return rc;
}

int mc_resolve(const struct mc_ctx *ctx, const char *path, uint32_t flags,
	       struct meta_inode *out)
{
	struct bbuf b;
	struct wbuf w;
	int rc = str_check(path, MP_PATH_MAX);

	if (rc)
		return rc;
	if (flags & ~MP_RESOLVE_KNOWN)
		return -EINVAL;
	bbuf_init(&b);
	wbuf_init(&w, &b);
	wb_str(&w, path);
	wb_u32(&w, flags);
	return call_inode(ctx, OP_META_RESOLVE, &w, out);
}
