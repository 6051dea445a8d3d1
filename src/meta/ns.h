/*
 * The namespace of the meta service: inodes, directory entries, attributes,
 * file layouts and lengths, and the queue of chunks to delete.
 *
 * Every operation is one transaction on the store (meta_store.h), or one
 * savepoint of a group's transaction (ns_group_begin): it either happens
 * entirely or not at all, and every error leaves the namespace as it was. Write transactions that lose a lock race (-EBUSY) are retried with a
 * bounded backoff.
 *
 * A struct ns is used by one thread at a time; give each thread its own ns
 * and its own store handle on the same database. See docs/namespace.md.
 *
 * Inodes are named by struct ns_ref: a number and a generation. A ref
 * with gen 0 names whatever inode has that number (tests, and callers
 * inside the daemon); one with a generation names that inode only, and
 * fails with -ESTALE once it is gone, even if its number were ever reused.
 *
 * Return values: 0 (or a count) on success, a negative errno on failure.
 * Errors a caller can hit: -ENOENT, -EEXIST, -ENOTDIR, -ENOTEMPTY, -EISDIR,
 * -ENAMETOOLONG (name > 255 bytes, path > 4095), -EINVAL (bad name, rename
 * of a directory into its own subtree, bad layout), -ELOOP (more than 40
 * symlinks in a path), -ESTALE (a ref whose inode is gone or has another
 * generation), -EDQUOT (a quota's limit would be passed: see "Quotas"
 * below), -EBUSY (the database stayed locked through every retry),
 * -EIO/-ENOMEM/-ENOSPC from the store.
 */
#ifndef STRATA_META_NS_H
#define STRATA_META_NS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "meta/meta_store.h"

#define NS_ROOT_INO 1
#define NS_ROOT_GEN 1
#define NS_NAME_MAX 255
#define NS_PATH_MAX 4096
#define NS_SYMLOOP_MAX 40
#define NS_CHUNK_SIZE_DEFAULT (4u << 20)
#define NS_CHUNK_SIZE_MIN LAYOUT_MIN_CHUNK
#define NS_CHUNK_SIZE_MAX LAYOUT_MAX_CHUNK
/* Default stripe width: min(table_len, NS_STRIPE_DEFAULT_MAX). */
#define NS_STRIPE_DEFAULT_MAX 16
/* Most entries one ns_readdir call returns. */
#define NS_READDIR_MAX 1024

/* An inode as a caller names it (see the top of this file). */
struct ns_ref {
	uint64_t ino;
	uint64_t gen;		/* 0: any generation */
};

/* A ref to inode number ino, whatever its generation. */
static inline struct ns_ref ns_any(uint64_t ino)
{
	struct ns_ref r = { ino, 0 };

	return r;
}

/* A request id (docs/namespace.md, "Request ids"): a client's random id
 * and its call's sequence number; client 0: none. */
struct ns_reqid {
	uint64_t client, seq;
};

/* Caller-owned; ns_init() sets it up, ns_release() clears it. */
struct ns {
	struct meta_store *store; /* borrowed, not owned */
	uint32_t max_retries;	  /* write transactions retried on -EBUSY */
	bool group;		  /* a group is open (ns_group_begin) */
	int group_err;		  /* its first savepoint failure */
	/* Chains new files avoid (ns_set_full_chains); borrowed. */
	const uint64_t *full;
	uint32_t full_len, nfull;
	/* The disk reserve (ns_set_space). */
	bool tight;
	bool (*make_room)(void *arg);
	void *room_arg;
	struct ns_reqid req;	/* for the next deduplicated call (ns_request) */
	uint64_t replays;	/* calls answered from a recorded outcome */
};

/* ns_rename() flags (same meaning as Linux renameat2's). */
#define NS_RENAME_NOREPLACE (1u << 0)
#define NS_RENAME_EXCHANGE (1u << 1)

/* ns_setattr() mask bits. */
#define NS_ATTR_MODE (1u << 0)	/* permission bits of attrs->mode (07777) */
#define NS_ATTR_UID (1u << 1)
#define NS_ATTR_GID (1u << 2)
#define NS_ATTR_ATIME (1u << 3) /* attrs->atime_ns */
#define NS_ATTR_MTIME (1u << 4) /* attrs->mtime_ns */
#define NS_ATTR_SIZE (1u << 5)	/* attrs->size: a truncate */
#define NS_ATTR_ATIME_NOW (1u << 6)
#define NS_ATTR_MTIME_NOW (1u << 7)

/* ns_resolve() flags. */
#define NS_RESOLVE_FOLLOW (1u << 0) /* follow a symlink in the last component */

/* What a truncate left to the caller. */
struct ns_trunc {
	/* Chunk `chunk` straddles the new size: the caller (client or storage
	 * path) must cut it to `len` bytes. Only set when the file shrank to a
	 * size that is not a multiple of the chunk size. */
	bool partial;
	uint64_t chunk;
	uint32_t len;
	/* Chunks [gc_from, gc_to) were queued for deletion (empty if equal). */
	uint64_t gc_from, gc_to;
	/* The file's layout, to place the partial chunk. */
	struct file_layout layout;
};

struct ns_statfs {
	uint64_t inodes;     /* all inodes, root included */
	uint64_t bytes;	     /* sum of the sizes of regular files */
	uint32_t table_len;  /* current chain table length */
};

/*
 * Called by ns_readdir() for each entry, in ascending byte order of name;
 * '.' and '..' are not reported. name is valid only during the call; type
 * is the S_IFMT bits. Return 0 to take the entry and go on, non-zero to
 * stop without taking it (e.g. a reply buffer is full).
 */
typedef int (*ns_readdir_cb)(void *arg, const char *name, uint64_t ino, uint32_t type);

/* As ns_readdir_cb, with the entry's inode (valid during the call only;
 * a directory's layout resolved as ns_getattr reports it). */
typedef int (*ns_readdirplus_cb)(void *arg, const char *name, const struct meta_inode *in);

/*
 * Sets up ns on store (borrowed: it must outlive ns) and creates the root
 * directory (ino 1, generation 1, mode 0755, owner 0:0) if the database
 * has none. Its
 * layout has chunk size 4 MiB and follows the chain table: stripe is
 * min(table_len, 16). table_len is the current chain table length; 0
 * keeps the value stored in the database. Returns 0 or an error.
 */
int ns_init(struct ns *ns, struct meta_store *store, uint32_t table_len);

/* Forgets the store; does not close it. Safe on a zeroed struct. */
void ns_release(struct ns *ns);

/*
 * Group commit. ns_group_begin opens one write transaction; until
 * ns_group_end, every ns_* call runs inside it, each that writes in a
 * savepoint of its own, so a call that fails undoes its own changes only
 * and reports its error as it would alone (reads see the group's changes
 * so far).
 * Nothing of the group is durable before ns_group_end(ns, true) commits
 * it: whoever answers for a call made in a group answers after that.
 * ns_group_end(ns, false), or a commit that fails, rolls every call of
 * the group back; the error is returned (0 for a rollback asked for).
 * -EBUSY from ns_group_end: the group lost a serialization race (a call
 * in it, or the commit), nothing of it happened, and each of its calls
 * may be made again; once a call gets -EBUSY, every later call of the
 * group fails with it at once.
 * -EOPNOTSUPP when the store has no savepoints, -EINVAL for a group
 * already open (begin) or none open (end), or the begin's error.
 */
int ns_group_begin(struct ns *ns);
int ns_group_end(struct ns *ns, bool commit);

/*
 * Request ids. ns_request(ns, id) gives id to the next call of ns among
 * those that are not idempotent: ns_create, ns_mkdir, ns_symlink,
 * ns_mknod, ns_link, ns_unlink, ns_rmdir, ns_rename, ns_setattr and
 * ns_truncate. That call takes it whatever becomes of it (so it never
 * reaches a later call). In its transaction the call looks id up: when
 * an earlier call recorded it, its recorded return value and outputs
 * (*out, *tr) are returned and nothing is applied (ns->replays counts
 * these); else the call is applied and, when it succeeds, its outcome
 * is recorded in the same transaction (a failed call changed nothing
 * and records nothing: its retry runs afresh). Another server applying
 * the same id at once loses a serialization conflict and finds the
 * record on its retry. Outcomes with a NULL output are recorded zeroed.
 */
void ns_request(struct ns *ns, struct ns_reqid id);

/* Removes up to max request records made before before_ms (wall clock,
 * ms) in one transaction; returns the count removed. A request retried
 * after its record went is applied again. */
int ns_request_prune(struct ns *ns, int64_t before_ms, uint32_t max);

/*
 * Records a new chain table length (persisted). Files created afterwards
 * in directories whose layout follows the table (the default) use it;
 * existing files keep the layout they were created with.
 */
int ns_set_table_len(struct ns *ns, uint32_t table_len);

/*
 * The store's disk (meta/reserve.h). While tight, what would make a new
 * inode or name (create of a new file, mkdir, mknod, symlink, link) fails
 * with -ENOSPC before writing; opening an existing file, removals, renames
 * and setattr go on. make_room (may be NULL) is called when an unlink or
 * rmdir fails with -ENOSPC: true when it freed space, and the removal is
 * tried once more.
 */
void ns_set_space(struct ns *ns, bool tight, bool (*make_room)(void *arg), void *arg);

/*
 * Capacity-aware placement: bits (bit i of bits[i / 64], borrowed until
 * the next call or ns_release) names the indexes of a chain table of
 * table_len chains that have a full member, nfull of them. A new regular
 * file then gets a seed whose chains avoid them, its stripe narrowed to
 * the chains with room if need be (down to one chain); an existing file
 * keeps its layout (its writes to a full chain fail with ENOSPC). The
 * layout stays a function of seed, stripe and table_len: readers need
 * nothing new. Ignored while table_len differs from the layout's (a table
 * change under way), when nfull is 0, or when every chain is full (the
 * write then fails with ENOSPC, as it must). bits NULL: none.
 */
void ns_set_full_chains(struct ns *ns, const uint64_t *bits, uint32_t table_len,
			uint32_t nfull);

/*
 * Checks a name of len bytes for create/rename: -ENAMETOOLONG if
 * len > 255, -EINVAL if empty, "." or "..", or if it contains '/' or NUL.
 * For the RPC layer, which receives names with explicit lengths.
 */
int ns_name_check(const char *name, size_t len);

/*
 * Looks up name in directory parent and fills *out (may be NULL) with the
 * inode. "." and ".." are resolved here (they are not stored). Directory
 * layouts are reported resolved against the current chain table.
 * -ENOENT, -ENOTDIR (parent is not a directory), -ENAMETOOLONG.
 */
int ns_lookup(struct ns *ns, struct ns_ref parent, const char *name, struct meta_inode *out);

/* Fills *out with inode ino. -ENOENT. */
int ns_getattr(struct ns *ns, struct ns_ref ino, struct meta_inode *out);

/*
 * Creates regular file name in parent with permission bits mode & 07777.
 * The file takes its parent's layout, resolved against the chain table,
 * with a fresh per-file seed. If the name exists: -EEXIST when exclusive,
 * else the existing file is returned (-EISDIR if it is a directory,
 * -EEXIST if a symlink: resolve it first). Returns 1 if created, 0 if an
 * existing file was returned; fills *out (may be NULL). STRATA_EUNAVAIL if
 * no chain table length is known yet.
 */
int ns_create(struct ns *ns, struct ns_ref parent, const char *name, uint32_t mode,
	      uint32_t uid, uint32_t gid, bool exclusive, struct meta_inode *out);

/*
 * Opens inode ino with open(2) flags (O_ACCMODE, O_TRUNC honored): fills
 * *out (may be NULL). -EISDIR for a directory opened for writing, -ELOOP
 * for a symlink. O_TRUNC on a file opened for writing truncates it to 0;
 * tr (may be NULL) then says what was queued for GC.
 */
int ns_open(struct ns *ns, struct ns_ref ino, int flags, struct meta_inode *out,
	    struct ns_trunc *tr);

/*
 * Inline data (docs/namespace.md, "Inline data"). A regular file may hold
 * its whole content in the store instead of chunks, at most
 * NS_INLINE_MAX bytes; it then has no chunks and its size is the length
 * of its bytes. Every call below and ns_open, ns_truncate, ns_setattr
 * (size), ns_set_size and the removals keep that true:
 * - a truncation of an inline file to 0 drops its bytes (and queues chunk
 *   0, which a conversion cut short by a crash may have left); to at most
 *   NS_INLINE_MAX cuts or zero-extends them (it stays inline); beyond it
 *   fails -EMEDIUMTYPE: the caller converts the file first (ns_uninline);
 * - ns_set_size of an inline file (a writer of chunks closing after
 *   another handle published it) fails -EMEDIUMTYPE, changing nothing:
 *   the writer merges those bytes into its chunks, converts the file
 *   (ns_uninline) and calls again; the bytes are never dropped.
 */
#define NS_INLINE_MAX META_INLINE_MAX

/* What ns_open_inline read: has says whether the file is inline, len its
 * length; buf (the caller's, NS_INLINE_MAX bytes) receives the bytes. */
struct ns_inline {
	uint8_t *buf;
	uint32_t len;
	bool has;
};

/* ns_open that also reads the inline bytes of the file (after any
 * truncation), in the same transaction, into *inl. */
int ns_open_inline(struct ns *ns, struct ns_ref ino, int flags, struct meta_inode *out,
		   struct ns_trunc *tr, struct ns_inline *inl);

/*
 * Makes data[len] (len <= NS_INLINE_MAX) the whole content of file ino,
 * inline: size becomes len, mtime mtime_ns (> 0; else now). Only a file
 * that is inline already or empty (size 0) takes it: one holding chunked
 * content fails -ENOTEMPTY, and the caller writes chunks instead. -EDQUOT
 * as ns_set_size. Applying it twice has one effect. Fills *out.
 */
int ns_publish_inline(struct ns *ns, struct ns_ref ino, const uint8_t *data, uint32_t len,
		      int64_t mtime_ns, struct meta_inode *out);
/* As ns_publish_inline, and when guard is not NULL, only if the file's
 * content is the one its writer last saw: *guard is the CRC32C of those
 * bytes (0: empty); -EAGAIN, changing nothing, when it differs. */
int ns_publish_inline_if(struct ns *ns, struct ns_ref ino, const uint8_t *data, uint32_t len,
			 const uint32_t *guard, int64_t mtime_ns, struct meta_inode *out);

/*
 * Turns inline file ino into a chunked one of the same size, once the
 * caller has written its bytes (len bytes of CRC32C crc) as chunk 0:
 * drops the bytes if they still are those. A file no longer inline is
 * left alone (0: converted already, or truncated); one whose bytes
 * changed fails -EAGAIN (read them again). Fills *out.
 */
int ns_uninline(struct ns *ns, struct ns_ref ino, uint32_t len, uint32_t crc,
		struct meta_inode *out);

/* Creates directory name in parent; it inherits the parent's layout. */
int ns_mkdir(struct ns *ns, struct ns_ref parent, const char *name, uint32_t mode,
	     uint32_t uid, uint32_t gid, struct meta_inode *out);

/* Creates symlink name -> target (1..4095 bytes; -ENOENT if empty,
 * -ENAMETOOLONG if longer). */
int ns_symlink(struct ns *ns, struct ns_ref parent, const char *name, const char *target,
	       uint32_t uid, uint32_t gid, struct meta_inode *out);

/*
 * Creates a fifo or a socket (mode's S_IFMT: S_IFIFO, S_IFSOCK): a name
 * with attributes and no data. Device nodes (S_IFCHR, S_IFBLK) are refused
 * with -EPERM (Strata mounts are nodev); another type is -EINVAL.
 */
int ns_mknod(struct ns *ns, struct ns_ref parent, const char *name, uint32_t mode,
	     uint32_t uid, uint32_t gid, struct meta_inode *out);

/* Most names one inode may have (-EMLINK beyond). */
#define NS_LINK_MAX 65000u

/*
 * Gives non-directory ino another name, parent/name (a hard link): nlink
 * grows, the data stays one. -EPERM for a directory, -EEXIST, -EMLINK,
 * and -EXDEV when a quota root lies between parent and the file's other
 * names (its usage is charged to one set of quota roots, as XFS project
 * quotas do). The inode's parent stays the directory of its first name;
 * when that name goes while others stay, parent becomes the nearest quota
 * root above it (or the root), so quota charges still find their roots.
 */
int ns_link(struct ns *ns, struct ns_ref ino, struct ns_ref parent, const char *name,
	    struct meta_inode *out);

/*
 * Copies the target of symlink ino into buf (cap bytes, NUL-terminated,
 * cut short if it does not fit) and returns its full length. -EINVAL if
 * ino is not a symlink.
 */
int ns_readlink(struct ns *ns, struct ns_ref ino, char *buf, size_t cap);

/*
 * Removes the entry of a file, symlink, fifo or socket. With its last name
 * the inode goes too, and a file's chunks [0, ceil(size / chunk_size))
 * are queued for GC; with other names left it loses a link. -EISDIR for a
 * directory.
 */
int ns_unlink(struct ns *ns, struct ns_ref parent, const char *name);

/* Removes an empty directory. -ENOTDIR, -ENOTEMPTY. */
int ns_rmdir(struct ns *ns, struct ns_ref parent, const char *name);

/*
 * Atomically renames src_parent/src_name to dst_parent/dst_name, replacing
 * an existing file, symlink or empty directory (its inode is dropped as by
 * unlink/rmdir). -ENOTEMPTY (non-empty target directory), -EISDIR (file
 * over directory), -ENOTDIR (directory over file), -EINVAL (directory into
 * its own subtree, both flags). NS_RENAME_NOREPLACE: -EEXIST if the target
 * exists. NS_RENAME_EXCHANGE: swaps two existing entries. Renaming an entry
 * to itself does nothing and returns 0.
 */
int ns_rename(struct ns *ns, struct ns_ref src_parent, const char *src_name,
	      struct ns_ref dst_parent, const char *dst_name, unsigned flags);

/*
 * Changes the attributes named by mask (NS_ATTR_*) to those in attrs.
 * NS_ATTR_SIZE is a truncate (see ns_truncate; tr may be NULL). ctime is
 * set to now. Fills *out (may be NULL) with the result.
 */
int ns_setattr(struct ns *ns, struct ns_ref ino, uint32_t mask, const struct meta_inode *attrs,
	       struct meta_inode *out, struct ns_trunc *tr);

/*
 * Records the length of file ino at close/fsync: size becomes
 * max(old, size), so racing writers never shrink a file. mtime_ns > 0 sets
 * mtime. -EISDIR, -EINVAL (symlink), -EMEDIUMTYPE (an inline file).
 */
int ns_set_size(struct ns *ns, struct ns_ref ino, uint64_t size, int64_t mtime_ns,
		struct meta_inode *out);

/*
 * Sets the size of file ino to exactly size. Chunks wholly beyond the new
 * size are queued for GC; the chunk that straddles it is reported in *tr
 * (may be NULL) for the caller to cut. -EISDIR, -EINVAL (symlink).
 */
int ns_truncate(struct ns *ns, struct ns_ref ino, uint64_t size, struct ns_trunc *tr);

/*
 * Lists directory dir: up to max (<= NS_READDIR_MAX) entries whose names
 * sort after cookie (NULL or "" for the start). The next cookie is the
 * name of the last entry the callback took. Returns the number taken
 * (fewer than max and no early stop: end of directory). The cookie is a
 * position in name order, so a listing never returns an entry twice and
 * returns every entry that exists throughout, whatever is inserted or
 * deleted between pages. -ENOTDIR, -ENAMETOOLONG (cookie).
 */
int ns_readdir(struct ns *ns, struct ns_ref dir, const char *cookie, uint32_t max,
	       ns_readdir_cb cb, void *arg);

/*
 * As ns_readdir, with each entry's inode, read in the same transaction as
 * the listing (an entry whose inode is missing fails it with -EIO, as a
 * lookup of it would).
 */
int ns_readdirplus(struct ns *ns, struct ns_ref dir, const char *cookie, uint32_t max,
		   ns_readdirplus_cb cb, void *arg);

/*
 * Sets the layout of directory dir, used by files and directories created
 * in it afterwards (existing files keep theirs). chunk_size: a power of
 * two in [NS_CHUNK_SIZE_MIN, NS_CHUNK_SIZE_MAX]; table_len: 0 (follow the
 * chain table) or 1..current table length; stripe: 0 (default) or
 * 1..min(table_len, LAYOUT_MAX_STRIPE); seed is ignored (every file gets
 * its own). -ENOTDIR, -EINVAL.
 */
int ns_set_layout(struct ns *ns, struct ns_ref dir, const struct file_layout *layout);

/* Fills *out with the namespace totals. */
int ns_statfs(struct ns *ns, struct ns_statfs *out);

/*
 * Resolves an absolute path component by component ("." and ".." and
 * repeated '/' allowed) and fills *out. Symlinks in the middle are
 * followed (relative targets from the link's directory), the last one only
 * with NS_RESOLVE_FOLLOW; more than 40 -> -ELOOP. -EINVAL if path is not
 * absolute, -ENOENT, -ENOTDIR, -ENAMETOOLONG.
 */
int ns_resolve(struct ns *ns, const char *path, unsigned flags, struct meta_inode *out);

/*
 * Called by ns_resolve_walk() with each directory before a component is
 * looked up in it ("." and ".." too), inside the walk's transaction: it
 * must not call ns.h. dir is valid during the call only. Non-zero (a
 * negative errno) ends the walk with that value.
 */
typedef int (*ns_walk_cb)(void *arg, const struct meta_inode *dir);

/* As ns_resolve, calling walk (may be NULL) on every directory searched:
 * the meta service checks search permission there. */
int ns_resolve_walk(struct ns *ns, const char *path, unsigned flags, ns_walk_cb walk,
		    void *arg, struct meta_inode *out);

/*
 * Fills out with the inode numbers from ino up to the root, ino first and
 * the root last, read in one transaction (so one consistent path), and
 * returns the count. -ENAMETOOLONG when there are more than cap, -ENOENT,
 * -ESTALE, -EIO (a parent that is gone).
 */
int ns_ancestors(struct ns *ns, struct ns_ref ino, uint64_t *out, uint32_t cap);

/*
 * Copies up to n queued GC items (oldest first; only inode ino's if
 * ino != 0) into out. Items stay queued until ns_gc_done(), so a crash
 * between the two only repeats deletions. Returns the count.
 */
int ns_gc_next(struct ns *ns, uint64_t ino, struct meta_gc_item *out, uint32_t n);

/* Removes item from the queue once its chunks are deleted. */
int ns_gc_done(struct ns *ns, const struct meta_gc_item *item);

/*
 * Orphaned chunks (the reconciler, meta/reconcile.h). What the namespace
 * says of chunk idx of inode ino, found on a storage chain:
 */
enum ns_chunk_state {
	NS_CHUNK_OWNED = 0,	/* within its file's size, or queued for GC */
	NS_CHUNK_NO_INODE,	/* its inode does not exist (any more) */
	NS_CHUNK_BEYOND,	/* its file exists; idx >= ceil(size / chunk size) */
	NS_CHUNK_FOREIGN,	/* ino was never handed out by this namespace:
				 * the chunk belongs to another database */
};

/* Returns the state (enum ns_chunk_state) of chunk idx of ino, read in one
 * transaction, or a negative errno. A chunk that a queued GC item covers
 * counts as owned (the GC worker removes it). */
int ns_chunk_state(struct ns *ns, uint64_t ino, uint64_t idx);

/*
 * For a scan over many chunks of one file: fills *nchunks with
 * ceil(size / chunk size) of ino (chunks at or beyond it are
 * NS_CHUNK_BEYOND candidates) and returns NS_CHUNK_OWNED when the inode
 * exists, else NS_CHUNK_NO_INODE or NS_CHUNK_FOREIGN (*nchunks 0); or a
 * negative errno. GC items are not looked at: ns_chunk_reclaim does.
 */
int ns_chunk_span(struct ns *ns, uint64_t ino, uint64_t *nchunks);

/*
 * In one write transaction, checks that chunk idx of ino is still in
 * state (NS_CHUNK_NO_INODE or NS_CHUNK_BEYOND) and queues it for GC
 * (docs/namespace.md, "GC queue"): placed by *layout for NO_INODE, by
 * the file's own layout for BEYOND. Returns 1 when queued, 0 when the
 * state changed (nothing queued), or a negative errno.
 */
int ns_chunk_reclaim(struct ns *ns, uint64_t ino, uint64_t idx, int state,
		     const struct file_layout *layout);

/*
 * Whether this handle's server runs the background GC of its database
 * (the store's gc_claim: one of several meta servers sharing PostgreSQL,
 * always the one on SQLite), taking the role when nobody holds it.
 * Returns 1 (it does), 0 (another server does) or an error. Drains of
 * one file (ns_gc_next with an ino) need no role. The orphan reconciler
 * runs on the same server: one role for the background work of a
 * database.
 */
int ns_gc_claim(struct ns *ns);

/*
 * Quotas (docs/namespace.md, "Quotas"). A directory may carry limits on
 * the bytes (sizes of regular files) and inodes (files, directories and
 * symlinks; the directory itself not counted) of the tree below it; 0 is
 * no limit. Usage is kept in the operations that change it, in their own
 * transaction, for every quota root above the change (nested quotas all
 * apply): create, mkdir, symlink, unlink, rmdir, rename (only the roots
 * the entry leaves or enters), set_size, truncate, setattr's size and
 * open's O_TRUNC. One that would take a root's usage above a limit fails
 * with -EDQUOT and changes nothing; usage equal to the limit is allowed.
 * Decreases always succeed, even above a limit.
 */

/*
 * Sets the limits of directory dir (0: none; both 0 removes its quota).
 * A new quota counts the tree's usage once, walking it in this
 * transaction; limits below the usage are taken (only growth is refused
 * then). Fills *out (may be NULL) with the quota. -ENOTDIR, -EINVAL
 * (a limit above INT64_MAX).
 */
int ns_quota_set(struct ns *ns, struct ns_ref dir, uint64_t max_bytes, uint64_t max_inodes,
		 struct meta_quota *out);

/* Fills *out with the quota of directory dir. -ENODATA if it has none,
 * -ENOTDIR. */
int ns_quota_get(struct ns *ns, struct ns_ref dir, struct meta_quota *out);

/* Copies up to max quotas of directories numbered above after, in inode
 * order, into out; returns the count (fewer than max: the last page). */
int ns_quota_list(struct ns *ns, uint64_t after, struct meta_quota *out, uint32_t max);

/*
 * Writes the absolute path of inode ino into buf (cap >= 2 bytes) and
 * returns its length. Each component is found by scanning its parent's
 * entries (no index maps inode to name): for rare callers, such as the
 * few quota roots a status reports. -ENAMETOOLONG when it does not fit.
 */
int ns_path(struct ns *ns, struct ns_ref ino, char *buf, size_t cap);

#endif
