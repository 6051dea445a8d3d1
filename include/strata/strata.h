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

/* The version of these headers. The library's own is strata_version(): a
 * program built against one release and run with a newer library sees
 * both. Symbols carry the version node STRATA_1.0; a release adds nodes,
 * and never changes what an existing symbol does. */
#define STRATA_VERSION_MAJOR 0
#define STRATA_VERSION_MINOR 1
#define STRATA_VERSION_PATCH 0
#define STRATA_VERSION_STRING "0.1.0"
/* One number to compare: STRATA_VERSION >= STRATA_VERSION_OF(0, 2, 0). */
#define STRATA_VERSION_OF(major, minor, patch) (((major) << 16) | ((minor) << 8) | (patch))
#define STRATA_VERSION \
	STRATA_VERSION_OF(STRATA_VERSION_MAJOR, STRATA_VERSION_MINOR, STRATA_VERSION_PATCH)

/* The running library's version, as "MAJOR.MINOR.PATCH"; a static string. */
const char *strata_version(void);

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
	/* The credential: a token's text. NULL: $STRATA_TOKEN or
	 * $STRATA_TOKEN_FILE (strata_find_token, locate.h); "": none. */
	const char *token;
	/* The CA certificate (PEM file) that servers' certificates must be
	 * signed by: connections use TLS. NULL: $STRATA_TLS_CA if set, else
	 * plain TCP; "": plain TCP. A cluster that listens beyond loopback
	 * requires TLS (docs/security.md). */
	const char *tls_ca;
	/* The compute-node read cache (strata/cache.h, docs/cache.md) of
	 * files opened read-only. 0 or NULL: the environment's
	 * ($STRATA_CACHE_MEM, $STRATA_CACHE_DIR, $STRATA_CACHE_DISK,
	 * $STRATA_CACHE_BLOCK; sizes in bytes or with K, M, G), else none.
	 * cache_mem_bytes: the DRAM tier; cache_dir: a directory on local
	 * disk shared by the node's processes (created, mode 0700; the
	 * caller's string is copied); cache_disk_bytes: its bound (4 GiB);
	 * cache_block: the block size, a power of two from 4 KiB to 16 MiB
	 * (1 MiB). */
	uint64_t cache_mem_bytes;
	const char *cache_dir;
	uint64_t cache_disk_bytes;
	uint32_t cache_block;
	/* The metadata cache (docs/namespace.md, "Client metadata cache"):
	 * the answers of strata_stat, strata_lstat, strata_lookupat and
	 * strata_statat, found and not found, kept meta_cache_ms and
	 * dropped at once by any change made through this connection;
	 * another client's change may go unseen for up to meta_cache_ms.
	 * -1 (strata_opts_init's): $STRATA_META_CACHE_MS, else off; 0: off;
	 * 1..600000: on. meta_cache_entries: its bound, 64..16777216 (0:
	 * $STRATA_META_CACHE_ENTRIES, else 65536). A value out of range
	 * fails strata_connect with -EINVAL and a logged reason. */
	int32_t meta_cache_ms;
	uint32_t meta_cache_entries;
};

/* Sets opts to the defaults; size = sizeof(*opts). */
void strata_opts_init(struct strata_opts *opts, size_t size);

/* Connects to the cluster whose mgmt service listens at mgmt_addr
 * ("host:port", or "host:port,host:port,..." for a cluster whose control
 * daemons share mgmt on PostgreSQL: the leader among them is found and
 * followed). opts may be NULL. Waits (up to retry_ms) for the cluster
 * map and the meta service. Returns 0 and *out (free with
 * strata_disconnect) or a negative error. */
int strata_connect(const char *mgmt_addr, const struct strata_opts *opts, struct strata **out);
/* Closes the connection; open files and rings must be closed first (any
 * left open are closed, unflushed sizes are lost). s may be NULL. */
void strata_disconnect(struct strata *s);

/* ---- acting for a user (a multi-user mount) ---- */

#define STRATA_CALLER_GIDS_MAX 32

/* Makes the calling thread's later namespace calls, on any connection,
 * act for user uid with groups gids[ngids]: meta checks permissions as
 * that user and new files and directories are the user's. The token must
 * allow it ("caller": strata token create --caller), else those calls
 * fail with -EACCES; uid 0 is squashed to nobody unless the token has
 * "root". A file opened while acting for a user goes on acting for that
 * user in later calls on it (fsync, close, fstat), from any thread.
 * Returns 0 or -EINVAL (more than STRATA_CALLER_GIDS_MAX groups). */
int strata_set_caller(uint32_t uid, uint32_t ngids, const uint32_t *gids);
/* The calling thread acts for no one: the token's own identity. */
void strata_clear_caller(void);

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
/* The attributes the open (or create) of f received from meta, with no
 * call: as they were at the open, except that the size includes f's own
 * writes since. For a caller that needs them right after the open (the
 * FUSE daemon's create reply, a getattr just after an open); anything
 * later should use strata_fstat. Returns 0, or -EINVAL for NULL. */
int strata_fstat_open(struct strata_file *f, struct strata_stat *st);
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
/* Creates a fifo or a socket: mode's type is S_IFIFO or S_IFSOCK (else
 * -EINVAL; a device, S_IFCHR or S_IFBLK, -EPERM), its low bits the
 * permissions. The name holds no data. */
int strata_mknod(struct strata *s, const char *path, uint32_t mode);
/* Gives the file at oldpath (not followed if a symlink) the new name
 * newpath: a hard link. -EPERM for a directory (or a file whose owner is
 * another user and that the caller may not read and write), -EEXIST,
 * -EXDEV when a quota root lies between the two names, -EMLINK. */
int strata_link(struct strata *s, const char *oldpath, const char *newpath);
/* Copies the link's target into buf (NUL-terminated, truncated to len-1);
 * returns the target's length. */
ssize_t strata_readlink(struct strata *s, const char *path, char *buf, size_t len);
/* mask: STRATA_SET_* of the fields of st to apply (SIZE: a truncate to
 * st->size). */
#define STRATA_SET_MODE 0x1
#define STRATA_SET_UID 0x2
#define STRATA_SET_GID 0x4
#define STRATA_SET_ATIME 0x8
#define STRATA_SET_MTIME 0x10
#define STRATA_SET_SIZE 0x20
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
	/* capacity: raw bytes of the storage targets, each filesystem
	 * counted once (targets on one disk share it); used: bytes of the
	 * files in the namespace (before replication). */
	uint64_t capacity, used;
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

/* ---- handles ----
 *
 * A handle names a file, directory or symlink by identity rather than by
 * path: its inode number and its generation. It keeps naming the same
 * object when that object or any directory above it is renamed, by this
 * client or another, and it fails with -ESTALE once the object is
 * removed, even if its inode number were ever given to a new one (the
 * generation tells them apart). Handles are plain values: copy, keep and
 * compare them freely (two handles name the same object when both fields
 * are equal); they hold nothing and are never released. Only handles the
 * library hands out (strata_root, and the *at calls' out parameters) are
 * meaningful; gen is never 0, and a handle with gen 0 is refused
 * (-EINVAL).
 *
 * The *at calls take a directory handle and one name: no '/', at most 255
 * bytes (-ENAMETOOLONG), "." and ".." only where a lookup is. They do not
 * follow symlinks. Errors besides those of the path calls: -ESTALE (a
 * handle whose object is gone), -EINVAL (a NULL argument, a bad handle,
 * an empty name or one with '/').
 */
struct strata_handle {
	uint64_t ino;		/* the inode number (strata_stat.ino) */
	uint64_t gen;		/* generation: one per object ever created; never 0 */
};

/* The root directory's handle (the same on every cluster). */
struct strata_handle strata_root(void);

/* Looks up name in directory dir. *out and *st (either may be NULL)
 * receive the entry's handle and attributes. -ENOENT, -ENOTDIR (dir is
 * not a directory). */
int strata_lookupat(struct strata *s, struct strata_handle dir, const char *name,
		    struct strata_handle *out, struct strata_stat *st);
/* Fills *st with the attributes of the object h names (a symlink's own). */
int strata_statat(struct strata *s, struct strata_handle h, struct strata_stat *st);
/*
 * Opens a regular file: name in directory dir, or, when name is NULL, the
 * file dir itself. flags and mode as strata_open; STRATA_O_CREAT needs a
 * name. -ELOOP when name is a symlink, -EISDIR for a directory. Returns 0
 * and *out (close with strata_close), or an error. A file opened for
 * writing waits here for chunk removals its earlier truncation left.
 */
int strata_openat(struct strata *s, struct strata_handle dir, const char *name, int flags,
		  uint32_t mode, struct strata_file **out);
/* The handle of the file f is open on. */
int strata_fhandle(struct strata_file *f, struct strata_handle *out);
/* Creates directory name in dir; *out and *st (may be NULL) receive it. */
int strata_mkdirat(struct strata *s, struct strata_handle dir, const char *name, uint32_t mode,
		   struct strata_handle *out, struct strata_stat *st);
/* Creates symlink name -> target in dir; *out and *st (may be NULL)
 * receive it. */
int strata_symlinkat(struct strata *s, const char *target, struct strata_handle dir,
		     const char *name, struct strata_handle *out, struct strata_stat *st);
/* strata_mknod in dir; *out and *st (may be NULL) receive it. */
int strata_mknodat(struct strata *s, struct strata_handle dir, const char *name, uint32_t mode,
		   struct strata_handle *out, struct strata_stat *st);
/* strata_link of the object h names as name in dir; *out and *st (may be
 * NULL) receive it (its nlink counts the new name). */
int strata_linkat(struct strata *s, struct strata_handle h, struct strata_handle dir,
		  const char *name, struct strata_handle *out, struct strata_stat *st);
/* Copies the target of symlink h into buf (NUL-terminated, truncated to
 * len-1); returns the target's length. -EINVAL if h is not a symlink. */
ssize_t strata_readlinkat(struct strata *s, struct strata_handle h, char *buf, size_t len);
/* Removes name from dir: a file or symlink, or with STRATA_AT_REMOVEDIR
 * an empty directory. */
#define STRATA_AT_REMOVEDIR 0x200
int strata_unlinkat(struct strata *s, struct strata_handle dir, const char *name, int flags);
/* Renames from_dir/from to to_dir/to, as strata_rename (flags
 * STRATA_RENAME_*). Handles of the moved object stay valid. */
int strata_renameat(struct strata *s, struct strata_handle from_dir, const char *from,
		    struct strata_handle to_dir, const char *to, unsigned flags);
/* Applies the fields of attrs mask names (STRATA_SET_*; SIZE truncates a
 * file, its shrunk chunks freed in the background) to h; *out (may be
 * NULL) receives the attributes after. */
int strata_setattrat(struct strata *s, struct strata_handle h, unsigned mask,
		     const struct strata_stat *attrs, struct strata_stat *out);

/* A position in a directory listing: zero it to start at the beginning;
 * strata_readdirplus moves it on. Its contents are the library's (a name
 * the next page starts after), and it stays valid for the directory
 * whatever is created or removed in it meanwhile. */
struct strata_cookie {
	char pos[256];
};

/* One entry: name (NUL-terminated), its handle and attributes; valid
 * during the callback only. */
struct strata_direntplus {
	const char *name;
	struct strata_handle h;
	struct strata_stat st;
};

/* Called for each entry in name order; return 0 to take it and go on,
 * non-zero to stop before it (the next call starts with it). */
typedef int (*strata_direntplus_fn)(void *arg, const struct strata_direntplus *e);

/*
 * Lists directory dir from *cookie, entries with their handles and
 * attributes, read together in one call to the meta service: up to max
 * of them (0: 256; at most 1024), each passed to cb, then *cookie is
 * moved past those cb took. Returns 1 when the directory may hold more
 * (call again with the same cookie), 0 when the listing reached its end,
 * or a negative error (-ESTALE, -ENOTDIR, ...; the cookie unchanged).
 * As strata_readdir: no entry twice, and every entry that exists for the
 * whole listing; "." and ".." are not listed.
 */
int strata_readdirplus(struct strata *s, struct strata_handle dir, struct strata_cookie *cookie,
		       uint32_t max, strata_direntplus_fn cb, void *arg);

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
const char *strata_strerror(int err);

#ifdef __cplusplus
}
#endif
#endif
