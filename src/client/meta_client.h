/*
 * Synchronous calls to the meta service, one function per operation, for
 * the client library, the CLI and tests. Bodies are meta_proto.h's.
 *
 * Every call blocks the calling thread (any thread but the rpc_client's
 * own reactor thread) until the reply arrives or ctx->timeout_ms passes,
 * and returns 0 (or a documented count) or a negative error: the ns_*
 * error the service answered (ns.h: -ENOENT, -EEXIST, ...), a transport
 * error (-ETIMEDOUT, -ECONNREFUSED, ...), STRATA_EBADMSG for a reply that
 * does not decode. Output structs are filled only on success. Nothing is
 * retried here: the namespace operations are not all idempotent, so the
 * caller decides.
 *
 * Truncating calls (mc_create with MC_CREATE_TRUNC, mc_open with O_TRUNC,
 * mc_setattr with NS_ATTR_SIZE, mc_truncate) return a struct ns_trunc:
 * when tr->partial is set the caller must cut chunk tr->chunk to tr->len
 * bytes itself (see meta_proto.h); the service removes the whole chunks.
 */
#ifndef STRATA_CLIENT_META_CLIENT_H
#define STRATA_CLIENT_META_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta/meta_proto.h"
#include "meta/meta_store.h"
#include "meta/ns.h"
#include "net/rpc.h"

/*
 * Where and how to call: a caller-owned struct, set up with mc_ctx_init()
 * and never released (it owns nothing). cl is borrowed and must outlive
 * every call; one ctx may be used by several threads at once.
 */
struct mc_ctx {
	struct rpc_client *cl;
	char addr[64];		/* "host:port" of a meta service */
	uint32_t timeout_ms;	/* per call; 0: the rpc_client's default */
};

/* Fills ctx. Returns 0, or -ENAMETOOLONG if addr does not fit. */
int mc_ctx_init(struct mc_ctx *ctx, struct rpc_client *cl, const char *addr,
		uint32_t timeout_ms);

/* CREATE flags. */
#define MC_CREATE_EXCL MP_CREATE_EXCL
#define MC_CREATE_TRUNC MP_CREATE_TRUNC

/* Looks up name (NUL-terminated, "." and ".." allowed) in parent; fills
 * *out. */
int mc_lookup(const struct mc_ctx *ctx, uint64_t parent, const char *name,
	      struct meta_inode *out);

/* Fills *out with inode ino. */
int mc_getattr(const struct mc_ctx *ctx, uint64_t ino, struct meta_inode *out);

/*
 * Creates regular file name in parent, or returns the existing one unless
 * flags has MC_CREATE_EXCL (then -EEXIST); MC_CREATE_TRUNC truncates an
 * existing file to 0. Returns 1 if the file was created, 0 if it existed.
 * out and tr may be NULL; tr is all zeros unless a truncation happened.
 */
int mc_create(const struct mc_ctx *ctx, uint64_t parent, const char *name, uint32_t mode,
	      uint32_t uid, uint32_t gid, uint32_t flags, struct meta_inode *out,
	      struct ns_trunc *tr);

/* Opens ino with open(2) flags (O_ACCMODE and O_TRUNC count). out and tr
 * may be NULL. */
int mc_open(const struct mc_ctx *ctx, uint64_t ino, int flags, struct meta_inode *out,
	    struct ns_trunc *tr);

/* Creates directory name in parent; out may be NULL. */
int mc_mkdir(const struct mc_ctx *ctx, uint64_t parent, const char *name, uint32_t mode,
	     uint32_t uid, uint32_t gid, struct meta_inode *out);

/* Creates symlink name -> target in parent; out may be NULL. */
int mc_symlink(const struct mc_ctx *ctx, uint64_t parent, const char *name,
	       const char *target, uint32_t uid, uint32_t gid, struct meta_inode *out);

/* Copies the target of symlink ino into buf[cap] with a NUL, cut short if
 * it does not fit; returns the target's full length. */
int mc_readlink(const struct mc_ctx *ctx, uint64_t ino, char *buf, size_t cap);

int mc_unlink(const struct mc_ctx *ctx, uint64_t parent, const char *name);
int mc_rmdir(const struct mc_ctx *ctx, uint64_t parent, const char *name);

/* flags: NS_RENAME_NOREPLACE, NS_RENAME_EXCHANGE. */
int mc_rename(const struct mc_ctx *ctx, uint64_t src_parent, const char *src_name,
	      uint64_t dst_parent, const char *dst_name, uint32_t flags);

/* Changes the attributes named by mask (NS_ATTR_*) to attrs' (mode, uid,
 * gid, atime_ns, mtime_ns, size). out and tr may be NULL. */
int mc_setattr(const struct mc_ctx *ctx, uint64_t ino, uint32_t mask,
	       const struct meta_inode *attrs, struct meta_inode *out, struct ns_trunc *tr);

/* Reports the length of ino at close/fsync (it only grows); mtime_ns 0
 * keeps mtime. out may be NULL. */
int mc_set_size(const struct mc_ctx *ctx, uint64_t ino, uint64_t size, int64_t mtime_ns,
		struct meta_inode *out);

/* Sets the size of ino exactly. out and tr may be NULL. */
int mc_truncate(const struct mc_ctx *ctx, uint64_t ino, uint64_t size, struct meta_inode *out,
		struct ns_trunc *tr);

/*
 * Lists up to max (1..MP_READDIR_MAX) entries of dir whose names sort
 * after cookie (NULL or "" for the start), calling cb for each in name
 * order (name valid during the call only). If cb returns non-zero the
 * listing stops before that entry. next_cookie (cap > MP_NAME_MAX; may be
 * NULL) receives the position after the last entry cb took, and *eof
 * (may be NULL) whether the directory has no more entries after it.
 * Returns the number of entries cb took.
 */
int mc_readdir(const struct mc_ctx *ctx, uint64_t dir, const char *cookie, uint32_t max,
	       mp_dirent_fn cb, void *arg, char *next_cookie, size_t cap, bool *eof);

/* Sets the layout of directory dir for files created in it afterwards. */
int mc_set_layout(const struct mc_ctx *ctx, uint64_t dir, const struct file_layout *layout);

/* Fills *out with the layout of ino (a directory's resolved against the
 * current chain table). */
int mc_get_layout(const struct mc_ctx *ctx, uint64_t ino, struct file_layout *out);

int mc_statfs(const struct mc_ctx *ctx, struct ns_statfs *out);

/* Resolves an absolute path; flags: NS_RESOLVE_FOLLOW. */
int mc_resolve(const struct mc_ctx *ctx, const char *path, uint32_t flags,
	       struct meta_inode *out);

#endif
