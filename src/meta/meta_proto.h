/*
 * Bodies of the meta service's requests and replies, encoded field by
 * field (little-endian, codec.h). Shared by the service (meta_service.c),
 * the client (client/meta_client.c) and the fuzz target.
 *
 * The reply frame's status carries 0 or the negative error of the ns_*
 * call (ns.h), or STRATA_EBADMSG for a malformed request; a reply with a
 * non-zero status has an empty body. Every decoder reads a whole body and
 * returns 0 or STRATA_EBADMSG (short body, over-long string, a NUL inside
 * a string, an out-of-range count or flag, trailing bytes). Strings are a
 * u32 length then the bytes, no NUL; every length is bounded before use
 * and nothing is allocated while decoding.
 *
 * Shared pieces
 *   str      u32 len, len bytes (name <= 255, path <= 4096, target <= 4096,
 *            cookie <= 255)
 *   layout   u32 chunk_size, u32 stripe, u32 table_len, u64 seed
 *   inode    u64 ino, u32 mode, u32 uid, u32 gid, u32 nlink, u64 size,
 *            i64 atime_ns, i64 mtime_ns, i64 ctime_ns, u64 parent, layout
 *            (the whole struct meta_inode)
 *   trunc    u8 partial, u64 chunk, u32 len, u64 gc_from, u64 gc_to, layout
 *   attr_rep u8 created, inode, trunc
 *
 * Ops (request -> reply)
 *   LOOKUP     u64 parent, str name                  -> inode
 *   GETATTR    u64 ino                               -> inode
 *   CREATE     u64 parent, str name, u32 mode, u32 uid, u32 gid,
 *              u32 flags (MP_CREATE_*)               -> attr_rep
 *   OPEN       u64 ino, u32 flags (MP_O_*)           -> attr_rep (created 0)
 *   MKDIR      u64 parent, str name, u32 mode, u32 uid, u32 gid,
 *              u32 flags (0)                         -> inode
 *   SYMLINK    u64 parent, str name, str target, u32 uid, u32 gid -> inode
 *   READLINK   u64 ino                               -> str target
 *   UNLINK     u64 parent, str name                  -> (empty)
 *   RMDIR      u64 parent, str name                  -> (empty)
 *   RENAME     u64 src_parent, str src_name, u64 dst_parent, str dst_name,
 *              u32 flags (NS_RENAME_*)               -> (empty)
 *   SETATTR    u64 ino, u32 mask (NS_ATTR_*), u32 mode, u32 uid, u32 gid,
 *              i64 atime_ns, i64 mtime_ns, u64 size  -> attr_rep (created 0)
 *   SET_SIZE   u64 ino, u64 size, i64 mtime_ns       -> inode
 *              (at close/fsync; the size only grows; mtime_ns 0 keeps it)
 *   TRUNCATE   u64 ino, u64 size                     -> attr_rep (created 0)
 *   READDIR    u64 dir, str cookie, u32 max (1..MP_READDIR_MAX)
 *              -> u32 n (<= MP_READDIR_MAX), n x {str name, u64 ino,
 *                 u32 type}, str next_cookie, u8 eof
 *   SET_LAYOUT u64 dir, layout                       -> (empty)
 *   GET_LAYOUT u64 ino                               -> layout
 *   STATFS     (empty)                -> u64 inodes, u64 bytes, u32 table_len
 *   RESOLVE    str path, u32 flags (NS_RESOLVE_*)    -> inode
 *
 * Truncation. A reply carrying a trunc (CREATE with MP_CREATE_TRUNC of an
 * existing file, OPEN with MP_O_TRUNC, SETATTR with NS_ATTR_SIZE,
 * TRUNCATE) tells the CLIENT what is left for it to do: when
 * trunc.partial is set, chunk trunc.chunk straddles the new size and the
 * client must cut it to trunc.len bytes (an SC_TRUNCATE to chain
 * layout_chain_index(&trunc.layout, trunc.chunk)) before it reports
 * success to its caller. Whole chunks beyond the new size
 * [gc_from, gc_to) are removed by the service: it replies only after every
 * queued removal of that file is done, so the file can grow again at
 * once. If a removal fails, the reply is STRATA_EUNAVAIL although the
 * new size is recorded; repeating the call (same size) is safe and
 * retries the removals. OPEN for writing and CREATE of an existing file also wait
 * for leftover removals of the file (see docs/namespace.md, "Known
 * hazard").
 */
#ifndef STRATA_META_PROTO_H
#define STRATA_META_PROTO_H

#include <stdbool.h>
#include <stdint.h>

#include "meta/meta_store.h"
#include "meta/ns.h"
#include "net/codec.h"
#include "net/proto.h"

enum meta_op {
	OP_META_LOOKUP = OP_META_FIRST,
	OP_META_GETATTR,
	OP_META_CREATE,
	OP_META_OPEN,
	OP_META_MKDIR,
	OP_META_SYMLINK,
	OP_META_READLINK,
	OP_META_UNLINK,
	OP_META_RMDIR,
	OP_META_RENAME,
	OP_META_SETATTR,
	OP_META_SET_SIZE,
	OP_META_TRUNCATE,
	OP_META_READDIR,
	OP_META_SET_LAYOUT,
	OP_META_GET_LAYOUT,
	OP_META_STATFS,
	OP_META_RESOLVE,
	OP_META_END,		/* one past the last meta op */
};

_Static_assert(OP_META_END - 1 <= OP_META_LAST, "meta ops overflow their range");

#define MP_NAME_MAX NS_NAME_MAX		/* 255 */
#define MP_PATH_MAX NS_PATH_MAX		/* 4096 */
#define MP_TARGET_MAX NS_PATH_MAX	/* 4096 */
#define MP_READDIR_MAX NS_READDIR_MAX	/* 1024 */

/* CREATE flags. */
#define MP_CREATE_EXCL (1u << 0)	/* -EEXIST if the name exists */
#define MP_CREATE_TRUNC (1u << 1)	/* truncate an existing file to 0 */
#define MP_CREATE_KNOWN (MP_CREATE_EXCL | MP_CREATE_TRUNC)

/* OPEN flags: wire values, independent of the platform's O_* values. */
#define MP_O_RDONLY 0u
#define MP_O_WRONLY 1u
#define MP_O_RDWR 2u
#define MP_O_ACCMODE 3u
#define MP_O_TRUNC (1u << 4)
#define MP_O_KNOWN (MP_O_ACCMODE | MP_O_TRUNC)

#define MP_RENAME_KNOWN (NS_RENAME_NOREPLACE | NS_RENAME_EXCHANGE)
#define MP_ATTR_KNOWN 0xffu		/* NS_ATTR_MODE .. NS_ATTR_MTIME_NOW */
#define MP_RESOLVE_KNOWN NS_RESOLVE_FOLLOW

/* Converts open(2) flags (O_ACCMODE, O_TRUNC; others ignored) to MP_O_*
 * and back. */
uint32_t mp_open_flags_to_wire(int flags);
int mp_open_flags_from_wire(uint32_t flags);

/* ---- requests ---- */

/* LOOKUP, UNLINK, RMDIR. */
struct mp_name_req {
	uint64_t parent;
	char name[MP_NAME_MAX + 1];
};

/* GETATTR, READLINK, GET_LAYOUT. */
struct mp_ino_req {
	uint64_t ino;
};

/* CREATE, MKDIR (flags 0). */
struct mp_create_req {
	uint64_t parent;
	char name[MP_NAME_MAX + 1];
	uint32_t mode, uid, gid;
	uint32_t flags;
};

struct mp_open_req {
	uint64_t ino;
	uint32_t flags;		/* MP_O_* */
};

struct mp_symlink_req {
	uint64_t parent;
	char name[MP_NAME_MAX + 1];
	char target[MP_TARGET_MAX + 1];
	uint32_t uid, gid;
};

struct mp_rename_req {
	uint64_t src_parent;
	char src_name[MP_NAME_MAX + 1];
	uint64_t dst_parent;
	char dst_name[MP_NAME_MAX + 1];
	uint32_t flags;		/* NS_RENAME_* */
};

/* attrs: only mode, uid, gid, atime_ns, mtime_ns and size travel. */
struct mp_setattr_req {
	uint64_t ino;
	uint32_t mask;		/* NS_ATTR_* */
	struct meta_inode attrs;
};

struct mp_set_size_req {
	uint64_t ino;
	uint64_t size;
	int64_t mtime_ns;
};

struct mp_truncate_req {
	uint64_t ino;
	uint64_t size;
};

struct mp_readdir_req {
	uint64_t dir;
	char cookie[MP_NAME_MAX + 1];
	uint32_t max;		/* 1..MP_READDIR_MAX */
};

struct mp_set_layout_req {
	uint64_t dir;
	struct file_layout layout;
};

struct mp_resolve_req {
	char path[MP_PATH_MAX + 1];
	uint32_t flags;		/* NS_RESOLVE_* */
};

/*
 * Encoders append one request body to w (errors are sticky in w->err).
 * Decoders parse a whole body of len bytes into *out and return 0 or
 * STRATA_EBADMSG; *out is unspecified on failure.
 */
void mp_name_req_encode(struct wbuf *w, uint64_t parent, const char *name);
int mp_name_req_decode(const void *body, uint32_t len, struct mp_name_req *out);
void mp_ino_req_encode(struct wbuf *w, uint64_t ino);
int mp_ino_req_decode(const void *body, uint32_t len, struct mp_ino_req *out);
void mp_create_req_encode(struct wbuf *w, const struct mp_create_req *rq);
int mp_create_req_decode(const void *body, uint32_t len, struct mp_create_req *out);
void mp_open_req_encode(struct wbuf *w, const struct mp_open_req *rq);
int mp_open_req_decode(const void *body, uint32_t len, struct mp_open_req *out);
void mp_symlink_req_encode(struct wbuf *w, const struct mp_symlink_req *rq);
int mp_symlink_req_decode(const void *body, uint32_t len, struct mp_symlink_req *out);
void mp_rename_req_encode(struct wbuf *w, const struct mp_rename_req *rq);
int mp_rename_req_decode(const void *body, uint32_t len, struct mp_rename_req *out);
void mp_setattr_req_encode(struct wbuf *w, const struct mp_setattr_req *rq);
int mp_setattr_req_decode(const void *body, uint32_t len, struct mp_setattr_req *out);
void mp_set_size_req_encode(struct wbuf *w, const struct mp_set_size_req *rq);
int mp_set_size_req_decode(const void *body, uint32_t len, struct mp_set_size_req *out);
void mp_truncate_req_encode(struct wbuf *w, const struct mp_truncate_req *rq);
int mp_truncate_req_decode(const void *body, uint32_t len, struct mp_truncate_req *out);
void mp_readdir_req_encode(struct wbuf *w, const struct mp_readdir_req *rq);
int mp_readdir_req_decode(const void *body, uint32_t len, struct mp_readdir_req *out);
void mp_set_layout_req_encode(struct wbuf *w, const struct mp_set_layout_req *rq);
int mp_set_layout_req_decode(const void *body, uint32_t len, struct mp_set_layout_req *out);
void mp_resolve_req_encode(struct wbuf *w, const struct mp_resolve_req *rq);
int mp_resolve_req_decode(const void *body, uint32_t len, struct mp_resolve_req *out);
/* STATFS: the body must be empty. */
int mp_empty_decode(const void *body, uint32_t len);

/* ---- replies ---- */

/* CREATE, OPEN, SETATTR, TRUNCATE. trunc is all zeros (but its layout)
 * when nothing was truncated. */
struct mp_attr_rep {
	bool created;
	struct meta_inode inode;
	struct ns_trunc trunc;
};

struct mp_statfs_rep {
	uint64_t inodes;
	uint64_t bytes;
	uint32_t table_len;
};

/* Pieces, for composite messages. */
void mp_layout_encode(struct wbuf *w, const struct file_layout *l);
void mp_layout_decode(struct rbuf *r, struct file_layout *out);
void mp_inode_encode(struct wbuf *w, const struct meta_inode *in);
void mp_inode_decode(struct rbuf *r, struct meta_inode *out);
void mp_trunc_encode(struct wbuf *w, const struct ns_trunc *tr);
/* Sets r->err on a partial flag other than 0/1. */
void mp_trunc_decode(struct rbuf *r, struct ns_trunc *out);

/* Whole reply bodies: LOOKUP, GETATTR, MKDIR, SYMLINK, SET_SIZE, RESOLVE. */
int mp_inode_rep_decode(const void *body, uint32_t len, struct meta_inode *out);
void mp_attr_rep_encode(struct wbuf *w, const struct mp_attr_rep *rep);
int mp_attr_rep_decode(const void *body, uint32_t len, struct mp_attr_rep *out);
/* READLINK: target copied into buf[cap] (cap > MP_TARGET_MAX always fits)
 * with a NUL. */
void mp_readlink_rep_encode(struct wbuf *w, const char *target, uint32_t len);
int mp_readlink_rep_decode(const void *body, uint32_t len, char *buf, size_t cap);
/* GET_LAYOUT. */
int mp_layout_rep_decode(const void *body, uint32_t len, struct file_layout *out);
void mp_statfs_rep_encode(struct wbuf *w, const struct mp_statfs_rep *rep);
int mp_statfs_rep_decode(const void *body, uint32_t len, struct mp_statfs_rep *out);

/*
 * READDIR reply. The service encodes the entries one by one into a
 * separate buffer with mp_dirent_encode() (names of 1..255 bytes), then
 * the whole reply with mp_readdir_rep_encode(w, n, that buffer, ...).
 */
void mp_dirent_encode(struct wbuf *w, const char *name, uint64_t ino, uint32_t type);
void mp_readdir_rep_encode(struct wbuf *w, uint32_t n, const void *entries, size_t entries_len,
			   const char *next_cookie, bool eof);

/* Called for each entry of a decoded READDIR reply, in order; name is
 * NUL-terminated and valid during the call only. Non-zero stops. */
typedef int (*mp_dirent_fn)(void *arg, const char *name, uint64_t ino, uint32_t type);

/*
 * Validates a whole READDIR reply, fills next_cookie (cap > MP_NAME_MAX)
 * and *eof from its trailer (either may be NULL), then calls cb for each
 * entry (cb may be NULL: validation only). Returns STRATA_EBADMSG before
 * any callback ran, or 0, or the callback's non-zero value if it stopped;
 * *taken (may be NULL) counts the entries the callback took.
 */
int mp_readdir_rep_decode(const void *body, uint32_t len, mp_dirent_fn cb, void *arg,
			  char *next_cookie, size_t cap, bool *eof, uint32_t *taken);

#endif
