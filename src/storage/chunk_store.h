/*
 * Chunk engine of the storage service: one target (a directory, one per
 * NVMe drive in production) holding chunks identified by (inode, index).
 *
 * Data moves through io_uring, with O_DIRECT on aligned buffers where the
 * filesystem allows it (buffered I/O otherwise, logged once). Every update
 * is crash-consistent: after a crash a chunk reads as its old or its new
 * content, never a mix. Every chunk carries a CRC32C of its whole content
 * and one per 64 KiB block; reads verify them. See docs/chunk-engine.md for
 * the layout on disk and the costs of each operation.
 *
 * Threading: a store is owned by one thread. That thread submits
 * operations and calls chunk_store_poll() when chunk_store_fd() is
 * readable (or chunk_store_wait() in tools and tests). Callbacks run only
 * from chunk_store_poll()/chunk_store_wait()/chunk_store_close(), never
 * from inside a submit call. Operations on the same chunk run in
 * submission order; operations on different chunks run concurrently, up to
 * queue_depth at once.
 */
#ifndef STRATA_STORAGE_CHUNK_STORE_H
#define STRATA_STORAGE_CHUNK_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Largest chunk a store can hold, and the default max_chunk_size. */
#define CHUNK_MAX_SIZE (64u << 20)
/* Granularity of the per-block checksums kept for every chunk. */
#define CHUNK_BLOCK_SIZE (64u << 10)

struct chunk_store;

struct chunk_id {
	uint64_t ino;
	uint64_t idx;
};

struct chunk_info {
	struct chunk_id id;
	uint64_t version;
	uint32_t length;
	uint32_t crc; /* CRC32C of the whole content */
	uint32_t tag; /* set by chunk_write_tagged (the storage service: the chain id) */
};

struct chunk_store_opts {
	size_t opts_size;       /* sizeof(struct chunk_store_opts) */
	uint32_t queue_depth;   /* operations in flight at once; default 128 */
	uint64_t capacity;      /* bytes; 0 = the filesystem decides */
	bool sync_writes;       /* fdatasync before commit; default false */
	uint32_t max_chunk_size; /* default and max CHUNK_MAX_SIZE */
	bool buffered_reads;    /* reads through the page cache (writes stay
				 * O_DIRECT, which invalidates cached pages);
				 * default false */
	/* Optional: called (on the owner thread, at most once until the next
	 * chunk_store_poll) when an operation finished outside the poll, e.g.
	 * a read answered from the page cache at submission. Returning true,
	 * the owner promises to call chunk_store_poll soon; otherwise (or
	 * without it) the store's fd is made readable instead (a syscall, and
	 * a trip through epoll). */
	bool (*on_done)(void *arg);
	void *on_done_arg;
	/* Removed chunks whose last version is remembered (tombstones, in
	 * memory only), oldest forgotten first; 0: the default, 65536. */
	uint32_t tombstones;
};

/* Sets o to the defaults. size: sizeof(*o) as the caller knows it. */
void chunk_store_opts_init(struct chunk_store_opts *o, size_t size);

/*
 * Opens the target in dir, creating the layout if absent, and builds the
 * in-memory index from the chunk headers. Temporary files left by a crash
 * are removed; a chunk file with no valid metadata slot is logged and
 * moved to dir/quarantine/. o may be NULL (defaults).
 * Environment knob for tests: STRATA_TEST_NO_DIRECT=1 behaves as if the
 * filesystem refused O_DIRECT.
 * Returns 0 and *out (free with chunk_store_close), or a negative error:
 * -EINVAL on bad options, an errno from the filesystem or io_uring.
 */
int chunk_store_open(const char *dir, const struct chunk_store_opts *o,
		     struct chunk_store **out);

/* Completes every operation in flight (their callbacks run), then frees
 * the store. cs may be NULL. Must not be called from a callback. */
void chunk_store_close(struct chunk_store *cs);

/* An eventfd, readable when completions are pending: put it in the
 * reactor and call chunk_store_poll() when it fires. Owned by the store. */
int chunk_store_fd(struct chunk_store *cs);

/* Non-blocking: reaps completions, advances operations, runs callbacks. */
void chunk_store_poll(struct chunk_store *cs);

/*
 * Blocking poll for tools and tests: waits up to timeout_ms (-1: no limit)
 * for at least one completion, then polls. Returns the number of callbacks
 * run (0 on timeout or when nothing is in flight), or a negative error.
 */
int chunk_store_wait(struct chunk_store *cs, int timeout_ms);

/* True when the store does O_DIRECT I/O, false after the buffered
 * fallback. */
bool chunk_store_is_direct(const struct chunk_store *cs);

/* Number of operations submitted whose callbacks have not run yet. */
uint32_t chunk_store_pending(const struct chunk_store *cs);

/*
 * status: 0 or a negative error. info: the chunk's state after the
 * operation (or its current state for -ESTALE/-EALREADY), NULL when the
 * chunk does not exist; valid only during the callback.
 */
typedef void (*chunk_done_fn)(void *arg, int status, const struct chunk_info *info);
/* As chunk_done_fn; nread: bytes placed in dst; crc_of_data: their CRC32C. */
typedef void (*chunk_read_fn)(void *arg, int status, const struct chunk_info *info,
			      uint32_t nread, uint32_t crc_of_data);

/*
 * Writes len bytes of data at offset of chunk id (creating it if absent;
 * a gap past the current end reads as zeros) and sets its version.
 * data: any alignment, borrowed: it must stay valid and unchanged until
 * cb runs. data_crc: CRC32C of data, checked before anything touches disk.
 * version must be > the stored version (else -ESTALE); equal to it gives
 * -EALREADY (an idempotent retry); a new chunk takes any version >= 1
 * above its tombstone (chunk_remove).
 * Returns 0 (cb will run) or, with cb not run: -EINVAL (bad arguments,
 * offset + len > max_chunk_size), STRATA_EINTEGRITY (data_crc mismatch),
 * -ENOMEM. cb statuses: 0, -ESTALE, -EALREADY, -ENOSPC (nothing stored is
 * lost), STRATA_EINTEGRITY (the old content to merge with is corrupt),
 * -EIO and other errors from the filesystem.
 */
int chunk_write(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
		chunk_done_fn cb, void *arg);

/* chunk_write that also records tag in the chunk's metadata (0 keeps the
 * chunk's current tag). The tag survives later writes and truncates. */
int chunk_write_tagged(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		       const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
		       uint32_t tag, chunk_done_fn cb, void *arg);

/* Replaces the whole content of chunk id by data (len bytes) with version
 * and tag, crash-consistently (copy-on-write), whatever its stored version:
 * used to install a replica's copy from its chain. Statuses as
 * chunk_write (no -ESTALE/-EALREADY). */
int chunk_replace(struct chunk_store *cs, const struct chunk_id *id, const void *data,
		  uint32_t len, uint32_t data_crc, uint64_t version, uint32_t tag,
		  chunk_done_fn cb, void *arg);

/* chunk_replace that installs only over an older version (or no chunk):
 * a stored version equal to version gives -EALREADY, a newer one -ESTALE,
 * checked when the operation runs (after the chunk's earlier operations).
 * Used for a whole chunk sent down a chain, which must never move a
 * replica back. */
int chunk_replace_newer(struct chunk_store *cs, const struct chunk_id *id, const void *data,
			uint32_t len, uint32_t data_crc, uint64_t version, uint32_t tag,
			chunk_done_fn cb, void *arg);

/*
 * Reads up to len bytes at offset into dst (any alignment; borrowed until
 * cb runs). nread is clipped at the chunk length (0 at or past the end).
 * cb statuses: 0, -ENOENT (no such chunk), STRATA_EINTEGRITY (a stored
 * checksum does not match), -EIO. Returns 0 or -EINVAL/-ENOMEM (cb not run).
 */
int chunk_read(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
	       uint32_t len, void *dst, chunk_read_fn cb, void *arg);

/*
 * A reference to chunk bytes that a read answered from a read-only
 * mapping of the chunk file (the page cache) instead of copying them.
 * The bytes stay valid and unchanged until the last reference goes: a
 * later full overwrite, shrink or removal replaces the file rather than
 * the mapped bytes, and a block update writes only blocks no reference
 * can point into. Drop it with chunk_hold_put(), from any thread.
 */
struct chunk_hold;
void chunk_hold_put(struct chunk_hold *h);

/* As chunk_read_fn; data: the nread bytes, in dst or (hold != NULL) in a
 * mapping that hold keeps; the callee owns hold. */
typedef void (*chunk_read_ref_fn)(void *arg, int status, const struct chunk_info *info,
				  const uint8_t *data, uint32_t nread, uint32_t crc_of_data,
				  struct chunk_hold *hold);

/*
 * chunk_read that, with buffered_reads, answers a range of whole blocks
 * (from a block boundary to one, or to the chunk's end) already in the
 * page cache by reference: data points into the mapping, so serving it
 * costs no copy. Those blocks are not verified here: crc_of_data is
 * combined from the stored block CRCs, so the reader that checks it
 * checks the bytes against what was written, end to end, and must say so
 * on a mismatch (OP_CHUNK_VERIFY runs chunk_read, which verifies). Any
 * other range is read into dst and verified, as by chunk_read.
 */
int chunk_read_ref(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		   uint32_t len, void *dst, chunk_read_ref_fn cb, void *arg);

/*
 * Sets the length of chunk id (shrinking, or extending with zeros) and its
 * version (same rules as chunk_write). cb statuses: as chunk_write, plus
 * -ENOENT. Returns 0 or -EINVAL/-ENOMEM (cb not run).
 */
int chunk_truncate(struct chunk_store *cs, const struct chunk_id *id, uint32_t length,
		   uint64_t version, chunk_done_fn cb, void *arg);

/*
 * Removes chunk id. version: 0 removes whatever is stored; otherwise the
 * version of the removal, which must be newer than the stored version
 * (equal: -EALREADY, older: -ESTALE, chunk kept).
 * The store then remembers the chunk's last version (the removal's, or the
 * removed chunk's) as a tombstone, in memory, for the last `tombstones`
 * removals: writes and truncates with a version not above it fail with
 * -ESTALE, and chunk_stat reports it. So a delayed update of the chunk's
 * earlier life cannot bring it back, and versions keep growing across a
 * remove and a re-create. cb statuses: 0, -ENOENT (no chunk; its
 * tombstone is raised to version), -EALREADY, -ESTALE, filesystem errors;
 * info is the removed chunk's last state. Returns 0 or -ENOMEM (cb not
 * run).
 */
int chunk_remove(struct chunk_store *cs, const struct chunk_id *id, uint64_t version,
		 chunk_done_fn cb, void *arg);

/* Synchronous, from the index: the committed state of chunk id (queued
 * operations not included). Returns 0 and *out, or -ENOENT; with -ENOENT,
 * out->version is the chunk's tombstone (0 when none is remembered) and
 * the rest of *out is zero. */
int chunk_stat(struct chunk_store *cs, const struct chunk_id *id, struct chunk_info *out);

/* Calls fn for every committed chunk, in no particular order, until fn
 * returns nonzero. fn must not submit operations. Returns 0 or fn's
 * nonzero value. */
int chunk_list(struct chunk_store *cs, int (*fn)(void *arg, const struct chunk_info *info),
	       void *arg);

/*
 * total: the configured capacity, or the size of the filesystem when
 * capacity is 0. used: bytes held by chunk files (header included, length
 * rounded up to 4 KiB), plus space reserved by writes in flight.
 * Returns 0 or a negative errno from statvfs.
 */
int chunk_space(struct chunk_store *cs, uint64_t *total, uint64_t *used);
/*
 * The filesystem that holds the store (fs_identity(), common/fileio.h),
 * or 0 when the store has a capacity of its own (opts.capacity): stores
 * with the same nonzero id share one capacity. Returns 0 or a negative
 * errno from stat(2).
 */
int chunk_fs(struct chunk_store *cs, uint64_t *fs);

/*
 * Bytes the store can still take now: the configured capacity less used,
 * or the space the filesystem has free for unprivileged writers when
 * capacity is 0 (other files on it count). Into *avail; returns 0 or a
 * negative errno from statvfs.
 */
int chunk_space_avail(struct chunk_store *cs, uint64_t *avail);

#endif
