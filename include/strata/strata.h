/*
 * libstrata: the client library of Strata.
 *
 * A struct strata is a connection to one cluster (its mgmt address); it is
 * thread-safe and owns background I/O threads. Paths are absolute, '/'
 * separated, inside the cluster's namespace. Every function returns 0 (or
 * a non-negative count) on success and a negative error code on failure:
 * a negated errno (-ENOENT, -EEXIST, -ENOTDIR, -ENOTEMPTY, -EISDIR,
 * -ENAMETOOLONG, -ENOSPC, -EIO, -ETIMEDOUT, ...) or one of Strata's own
 * (strata/errors.h); strata_strerror() names them. The library never
 * aborts or exits the host process.
 *
 * Ownership: pointers passed in are borrowed for the duration of the call
 * unless a comment says otherwise; objects returned through an out
 * parameter belong to the caller and are released with the matching
 * function (strata_close, strata_closedir, strata_ring_free, ...).
 */
#ifndef STRATA_STRATA_H
#define STRATA_STRATA_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "strata/errors.h"

#ifdef __cplusplus
extern "C" {
#endif

struct strata;
struct strata_file;
struct strata_dir;
struct strata_ring;

/* ---- connection ---- */

struct strata_opts {
	size_t opts_size;	/* sizeof(struct strata_opts) as the caller knows it */
	uint32_t timeout_ms;	/* one RPC; default 10000 */
	uint32_t retry_ms;	/* an I/O's total retry budget; default 30000 */
	uint32_t io_threads;	/* background I/O threads; default 2 */
};

/* Sets opts to the defaults; size = sizeof(*opts). */
void strata_opts_init(struct strata_opts *opts, size_t size);

/* Connects to the cluster whose mgmt service listens at mgmt_addr
 * ("host:port"). opts may be NULL. Waits (up to retry_ms) for the cluster
 * map and the meta service. Returns 0 and *out (free with
 * strata_disconnect) or a negative error. */
int strata_connect(const char *mgmt_addr, const struct strata_opts *opts, struct strata **out);
/* Closes the connection; open files and rings must be closed first (any
 * left open are closed, unflushed sizes are lost). s may be NULL. */
void strata_disconnect(struct strata *s);

/* ---- files ---- */

#define STRATA_O_RDONLY 0x0
#define STRATA_O_WRONLY 0x1
#define STRATA_O_RDWR 0x2
#define STRATA_O_CREAT 0x40
#define STRATA_O_EXCL 0x80
#define STRATA_O_TRUNC 0x200
#define STRATA_O_APPEND 0x400

/* Opens path with flags (STRATA_O_*, the Linux values) and, when creating,
 * mode (permission bits). Returns 0 and *out, or -ENOENT, -EEXIST,
 * -EISDIR (a directory opened for writing), -ENOTDIR, ... */
int strata_open(struct strata *s, const char *path, int flags, uint32_t mode,
		struct strata_file **out);
/* Flushes the file's length to the namespace (like strata_fsync) and frees
 * f. Returns 0 or the flush's error (f is freed either way). */
int strata_close(struct strata_file *f);
/* Reads up to len bytes at off. Returns bytes read (0 at end of file);
 * holes read as zeros. */
ssize_t strata_pread(struct strata_file *f, void *buf, size_t len, uint64_t off);
/* Writes len bytes at off (the file grows as needed). Returns len or a
 * negative error; on error some of the range may have been written. Data
 * is on every replica when this returns. */
ssize_t strata_pwrite(struct strata_file *f, const void *buf, size_t len, uint64_t off);
/* Publishes the file's length and mtime to the namespace: after it, an
 * open from any client sees the data written so far. */
int strata_fsync(struct strata_file *f);
/* Sets the file's length (shrinking frees chunks in the background). */
int strata_ftruncate(struct strata_file *f, uint64_t size);

struct strata_stat {
	uint64_t ino;
	uint32_t mode;		/* S_IFREG/S_IFDIR/S_IFLNK | permissions */
	uint32_t nlink;
	uint32_t uid, gid;
	uint64_t size;
	int64_t atime_ns, mtime_ns, ctime_ns;
	uint32_t chunk_size;	/* layout: bytes per chunk */
	uint32_t stripe;	/* layout: chains the file spreads over */
};

int strata_fstat(struct strata_file *f, struct strata_stat *st);
/* stat follows a final symlink; lstat does not. */
int strata_stat(struct strata *s, const char *path, struct strata_stat *st);
int strata_lstat(struct strata *s, const char *path, struct strata_stat *st);

/* ---- namespace ---- */

int strata_mkdir(struct strata *s, const char *path, uint32_t mode);
int strata_rmdir(struct strata *s, const char *path);
int strata_unlink(struct strata *s, const char *path);
#define STRATA_RENAME_NOREPLACE 0x1
#define STRATA_RENAME_EXCHANGE 0x2
/* Atomically renames (replacing an existing file or empty directory
 * unless NOREPLACE). */
int strata_rename(struct strata *s, const char *from, const char *to, unsigned flags);
int strata_truncate(struct strata *s, const char *path, uint64_t size);
int strata_symlink(struct strata *s, const char *target, const char *linkpath);
/* Copies the link's target into buf (NUL-terminated, truncated to len-1);
 * returns the target's length. */
ssize_t strata_readlink(struct strata *s, const char *path, char *buf, size_t len);
/* mask: STRATA_SET_* of the fields of st to apply. */
#define STRATA_SET_MODE 0x1
#define STRATA_SET_UID 0x2
#define STRATA_SET_GID 0x4
#define STRATA_SET_ATIME 0x8
#define STRATA_SET_MTIME 0x10
int strata_setattr(struct strata *s, const char *path, unsigned mask, const struct strata_stat *st);

struct strata_dirent {
	char name[256];
	uint64_t ino;
	uint32_t mode;
};

/* Lists a directory in pages fetched as needed; stable under concurrent
 * changes (no entry twice; entries present throughout are returned). */
int strata_opendir(struct strata *s, const char *path, struct strata_dir **out);
/* Returns 1 with *ent filled, 0 at the end, or a negative error. */
int strata_readdir(struct strata_dir *d, struct strata_dirent *ent);
void strata_closedir(struct strata_dir *d);

struct strata_statfs {
	uint64_t capacity, used;	/* bytes over all targets */
	uint64_t files, dirs;
	uint32_t nodes, targets, chains, replication;
};
int strata_statfs(struct strata *s, struct strata_statfs *st);

/* Layout of new files under a directory (chunk size: power of two, 64 KiB
 * to 64 MiB; stripe: 1..256, 0 = as many chains as the table has up to
 * 16). Existing files keep theirs. */
struct strata_layout {
	uint32_t chunk_size;
	uint32_t stripe;
};
int strata_set_layout(struct strata *s, const char *dir, const struct strata_layout *l);
int strata_get_layout(struct strata *s, const char *path, struct strata_layout *l);

/* ---- asynchronous batch I/O ----
 *
 * A ring holds up to depth I/Os in flight. A thread prepares reads and
 * writes across any files (strata_ring_prep_*), submits them at once
 * (strata_ring_submit) and reaps completions (strata_ring_wait) in any
 * order. Each I/O is split across chunks and chains and sent in parallel.
 * A ring is used by one thread at a time; several rings may share one
 * connection. Buffers must stay valid until their completion is reaped.
 */
struct strata_cqe {
	uint64_t user_data;
	ssize_t res;		/* bytes, or a negative error */
};

int strata_ring_new(struct strata *s, uint32_t depth, struct strata_ring **out);
/* Waits for I/Os in flight, then frees the ring. */
void strata_ring_free(struct strata_ring *r);
/* Returns 0 or -EBUSY (depth I/Os prepared or in flight). */
int strata_ring_prep_read(struct strata_ring *r, struct strata_file *f, void *buf, size_t len,
			  uint64_t off, uint64_t user_data);
int strata_ring_prep_write(struct strata_ring *r, struct strata_file *f, const void *buf,
			   size_t len, uint64_t off, uint64_t user_data);
/* Sends every prepared I/O. Returns how many were submitted. */
int strata_ring_submit(struct strata_ring *r);
/* Waits until at least min_complete completions are ready (or timeout_ms
 * passes; -1 waits without limit, 0 polls), then moves up to max of them
 * into cqes. Returns the number moved. */
int strata_ring_wait(struct strata_ring *r, struct strata_cqe *cqes, unsigned max,
		     unsigned min_complete, int timeout_ms);
/* Registers a buffer for reuse: later I/Os into or out of it skip per-I/O
 * setup. Returns 0; buffers need not be registered. */
int strata_ring_register_buffer(struct strata_ring *r, void *buf, size_t len);

const char *strata_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
