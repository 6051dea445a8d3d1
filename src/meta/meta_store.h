/*
 * The metadata store interface of the meta service.
 *
 * Every byte of SQL lives behind this vtable, in one backend file per
 * database (store_sqlite.c, the embedded default; store_pg.c, PostgreSQL
 * through libpq), so the namespace logic in ns.c never changes when the
 * backend does.
 *
 * A handle (struct meta_store) is used by one thread at a time. Several
 * handles, one per thread, may be open on the same database; the backend
 * serializes their write transactions. Every call other than begin/commit/
 * rollback/close must run inside a transaction opened with begin().
 *
 * Return values: 0 (or a non-negative count) on success, a negative errno
 * on failure. -EBUSY means "the database was locked by another writer for
 * longer than the busy timeout" (SQLite) or "the transaction lost a
 * serialization conflict or a deadlock" (PostgreSQL): roll back and retry
 * the whole transaction. -EIO is any other failure, a lost connection to
 * the database server included (logged by the backend).
 */
#ifndef STRATA_META_STORE_H
#define STRATA_META_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/layout.h"

/* One inode. mode holds the type bits (S_IFREG, S_IFDIR, S_IFLNK) too. */
struct meta_inode {
	uint64_t ino;
	/* Generation: a number no other inode ever created in this namespace
	 * had (a counter taken at create; 1 for the root and for inodes made
	 * before generations existed). (ino, gen) names one file forever, so
	 * a handle to a removed inode can never reach a later one that got
	 * the same number. */
	uint64_t gen;
	uint32_t mode;
	uint32_t uid, gid, nlink;
	uint64_t size;
	int64_t atime_ns, mtime_ns, ctime_ns;
	/* Directory holding the entry of this inode (root: itself). Needed for
	 * "..", path walks and the rename subtree check. */
	uint64_t parent;
	struct file_layout layout;
};

/* The most bytes a file may hold inline (the wire's bound too). */
#define META_INLINE_MAX (64u * 1024u)

/* One queued chunk range to delete: chunks [from, to) of file ino, placed
 * by layout. id identifies the queue entry for gc_ack. */
struct meta_gc_item {
	uint64_t id;
	uint64_t ino;
	uint64_t from, to;
	struct file_layout layout;
};

/* A quota on directory ino (docs/namespace.md, "Quotas"): limits (0: none)
 * and the usage of the tree below it, the directory itself excluded. */
struct meta_quota {
	uint64_t ino;
	uint64_t max_bytes, max_inodes;
	uint64_t bytes, inodes;
};

/* Called by list_dentries for each entry, in ascending byte order of name.
 * name is NUL-terminated and valid only during the call; type is the
 * S_IFMT bits of the target inode. Return 0 to go on, anything else to
 * stop (that value is returned by list_dentries). */
typedef int (*meta_dentry_cb)(void *arg, const char *name, uint64_t ino, uint32_t type);

/* One named counter (counter_get/add/set), for list_counters. */
#define META_COUNTER_NAME_MAX 64
struct meta_counter {
	char name[META_COUNTER_NAME_MAX];
	int64_t value;
};

/* A request's recorded outcome (docs/namespace.md, "Request ids"):
 * request (client, seq) was applied at at_ms (wall clock) and answered
 * ret; out[len] holds its outputs, encoded by the namespace (ns.c) and
 * opaque to the store. */
#define META_REQ_OUT_MAX 256
struct meta_req {
	uint64_t client, seq;
	int64_t at_ms;
	int32_t ret;
	uint32_t len;
	uint8_t out[META_REQ_OUT_MAX];
};

struct meta_store_ops {
	/* Opens a transaction; write = true takes the write lock up front
	 * (BEGIN IMMEDIATE), so a write transaction never fails half way on a
	 * lock upgrade. Reads see one consistent snapshot. */
	int (*begin)(void *impl, bool write);
	int (*commit)(void *impl);
	/* Never fails from the caller's point of view. */
	void (*rollback)(void *impl);
	/* Savepoints inside a write transaction, for group commit (ns.h,
	 * ns_group_begin): sp_mark opens one, sp_keep releases it (its
	 * changes stay in the transaction), sp_undo rolls back to it and
	 * releases it. One at a time. NULL in a backend that does not group.
	 * A call that fails -EBUSY (PostgreSQL: a serialization failure) has
	 * doomed the whole transaction, not the savepoint (ns.h). */
	int (*sp_mark)(void *impl);
	int (*sp_keep)(void *impl);
	int (*sp_undo)(void *impl);

	/* -ENOENT if absent. */
	int (*get_inode)(void *impl, uint64_t ino, struct meta_inode *out);
	/* Inserts or updates every field of the inode, its generation too
	 * (not the link target). */
	int (*put_inode)(void *impl, const struct meta_inode *inode);
	/* Deletes the inode, its link target and its inline data. -ENOENT
	 * if absent. */
	int (*del_inode)(void *impl, uint64_t ino);
	/* Sets the symlink target of an existing inode (len bytes, no NUL). */
	int (*put_link)(void *impl, uint64_t ino, const char *target, size_t len);
	/* Copies the target into buf (cap bytes, NUL-terminated, truncated if
	 * short) and returns its full length, or -ENOENT. */
	int (*get_link)(void *impl, uint64_t ino, char *buf, size_t cap);

	/* Inline data of a small regular file (docs/namespace.md, "Inline
	 * data"): the whole content of a file that has no chunks, at most
	 * META_INLINE_MAX bytes. get_inline copies up to cap bytes into buf
	 * (may be NULL with cap 0) and returns the full length, or -ENOENT
	 * when the file has none; put_inline inserts or replaces it;
	 * del_inline removes it (0 when there was none). */
	int (*get_inline)(void *impl, uint64_t ino, uint8_t *buf, size_t cap);
	int (*put_inline)(void *impl, uint64_t ino, const uint8_t *data, size_t len);
	int (*del_inline)(void *impl, uint64_t ino);

	/* Entry name in directory parent. -ENOENT if absent. */
	int (*get_dentry)(void *impl, uint64_t parent, const char *name,
			  uint64_t *ino, uint32_t *type);
	/* Inserts a new entry; -EEXIST if the name is taken. */
	int (*put_dentry)(void *impl, uint64_t parent, const char *name,
			  uint64_t ino, uint32_t type);
	/* -ENOENT if absent. */
	int (*del_dentry)(void *impl, uint64_t parent, const char *name);
	/* Calls cb for up to max entries of dir whose name sorts strictly after
	 * after_name (NULL or "": from the start). Returns the number of
	 * entries passed to cb, or cb's non-zero return value if it stopped
	 * early (positive values are the caller's business), or an error. */
	int (*list_dentries)(void *impl, uint64_t dir, const char *after_name,
			     uint32_t max, meta_dentry_cb cb, void *arg);

	/* The name of the entry of inode ino in directory parent, into buf
	 * (cap bytes, NUL-terminated). Scans parent's entries: no index
	 * goes from inode to name, so keep it to rare callers. -ENOENT. */
	int (*get_name)(void *impl, uint64_t parent, uint64_t ino, char *buf, size_t cap);

	/* The quota of directory ino. -ENOENT if it has none. */
	int (*get_quota)(void *impl, uint64_t ino, struct meta_quota *out);
	/* Inserts or updates every field. */
	int (*put_quota)(void *impl, const struct meta_quota *q);
	/* -ENOENT if absent. */
	int (*del_quota)(void *impl, uint64_t ino);
	/* Copies up to max quotas of directories numbered above after, in
	 * inode order, into out. Returns the count. */
	int (*list_quotas)(void *impl, uint64_t after, struct meta_quota *out, uint32_t max);

	/* Hands out a fresh inode number (never reused) and a fresh
	 * generation (never handed out before, to any inode). */
	int (*alloc_ino)(void *impl, uint64_t *ino, uint64_t *gen);
	/* Named 64-bit counters (statfs totals, settings). A missing counter
	 * reads as 0. */
	int (*counter_get)(void *impl, const char *name, int64_t *out);
	int (*counter_add)(void *impl, const char *name, int64_t delta);
	int (*counter_set)(void *impl, const char *name, int64_t value);

	/* Queues chunks [from, to) of ino for deletion. */
	int (*gc_push)(void *impl, uint64_t ino, uint64_t from, uint64_t to,
		       const struct file_layout *layout);
	/* Copies up to max queued items, oldest first, into out, without
	 * removing them; ino != 0 restricts to that inode. Returns the count. */
	int (*gc_pop)(void *impl, uint64_t ino, struct meta_gc_item *out, uint32_t max);
	/* Removes queue entry id (0 if already gone). */
	int (*gc_ack)(void *impl, uint64_t id);
	/* Whether this handle is the one of its database that runs the
	 * background GC, taking the role if no handle holds it: *held true
	 * or false. Several meta servers share a PostgreSQL database; one of
	 * them walks the queue (a session advisory lock, released when its
	 * connection ends, a crashed server's included). A SQLite database
	 * has one server: always true. */
	int (*gc_claim)(void *impl, bool *held);

	/* Request ids. req_get: the outcome recorded for (client, seq), or
	 * -ENOENT. req_put: records one, in the transaction of the operation
	 * it answers; -EEXIST when the id is recorded already (SQLite), and
	 * -EBUSY when a concurrent transaction recorded it (PostgreSQL: the
	 * retry then finds it). req_prune: deletes up to max records made
	 * before before_ms and returns the count. Records are not copied by
	 * meta_store_copy: they outlive no retry. */
	int (*req_get)(void *impl, uint64_t client, uint64_t seq, struct meta_req *out);
	int (*req_put)(void *impl, const struct meta_req *r);
	int (*req_prune)(void *impl, int64_t before_ms, uint32_t max);

	/* Whole-store iteration, for copying a namespace between backends
	 * (meta_store_copy). Each copies up to max records into out, in key
	 * order, after the given key, and returns the count. */
	/* Inodes numbered above after, in inode order. */
	int (*list_inodes)(void *impl, uint64_t after, struct meta_inode *out, uint32_t max);
	/* The counters whose name sorts (bytes) after after ("": all); only
	 * those written through counter_add/set, not the backend's own
	 * bookkeeping (schema version, allocation state). */
	int (*list_counters)(void *impl, const char *after, struct meta_counter *out,
			     uint32_t max);
	/* Queue entries with an id above after, oldest first. */
	int (*gc_list)(void *impl, uint64_t after, struct meta_gc_item *out, uint32_t max);
	/* The highest inode number and generation alloc_ino has handed out
	 * (1 and 1 on a fresh store: the root's). */
	int (*alloc_peek)(void *impl, uint64_t *ino, uint64_t *gen);
	/* Makes alloc_ino hand out numbers above ino and generations above
	 * gen from now on; never lowers what it would hand out. */
	int (*alloc_reserve)(void *impl, uint64_t ino, uint64_t gen);

	/* Frees the handle and everything it holds. impl may be NULL. */
	void (*close)(void *impl);
};

struct meta_store {
	const struct meta_store_ops *ops;
	void *impl;
};

/* Options for meta_store_sqlite_open(); set up with
 * meta_store_sqlite_opts_init(). */
struct meta_store_sqlite_opts {
	size_t size;
	/* Milliseconds a statement waits for another writer's lock. */
	uint32_t busy_timeout_ms;
};

/*
 * Sets opts to the defaults (busy timeout 5000 ms). size is sizeof(*opts)
 * as the caller knows it.
 */
void meta_store_sqlite_opts_init(struct meta_store_sqlite_opts *opts, size_t size);

/*
 * Opens (creating if needed) the SQLite database at path in WAL mode with
 * synchronous=NORMAL, creates the schema if absent, brings a database of
 * an older schema up to this build's (inodes get generation 1) and fills
 * *out. A database of a newer schema is refused (-EIO, logged).
 * opts may be NULL (defaults). Returns 0, -EIO (cannot open; logged) or
 * -ENOMEM. On success the caller owns the handle and frees it with
 * meta_store_close().
 */
int meta_store_sqlite_open(const char *path, const struct meta_store_sqlite_opts *opts,
			   struct meta_store *out);

/* Options for meta_store_pg_open(); set up with meta_store_pg_opts_init(). */
struct meta_store_pg_opts {
	size_t size;
	/* A libpq password file (hostname:port:database:username:password
	 * lines), or NULL: libpq's default (~/.pgpass, $PGPASSFILE). One
	 * given here must be a regular file of mode 0600 or stricter, else
	 * the open is refused (-EACCES, logged). Copied by the open. */
	const char *passfile;
	/* Seconds a connection attempt may take (libpq connect_timeout). */
	uint32_t connect_timeout_s;
	/* Milliseconds a statement may run before the server cancels it
	 * (0: no limit). */
	uint32_t statement_timeout_ms;
};

/*
 * Sets opts to the defaults (libpq's passfile, connect timeout 5 s,
 * statement timeout 30 s). size is sizeof(*opts) as the caller knows it.
 */
void meta_store_pg_opts_init(struct meta_store_pg_opts *opts, size_t size);

/*
 * Connects to the PostgreSQL database named by conninfo (a libpq URI,
 * "postgresql://[user@]host[:port]/db?...", or "key=value" pairs; a
 * password belongs in the passfile, not here), creates the schema if
 * absent, brings an older one up to this build's (ordered migrations,
 * under an advisory lock so several servers may open it at once) and
 * fills *out. A schema newer than this build's is refused (-EIO,
 * logged). Transactions are SERIALIZABLE (writes) or REPEATABLE READ
 * (reads); a serialization failure or deadlock is -EBUSY. A connection
 * found lost at begin() is made again at once; one lost inside a
 * transaction fails that call with -EIO, and the next begin() reconnects
 * (at most every 500 ms while the server stays away).
 * Inode numbers and generations come from database sequences: nothing
 * durable is cached in the process. Logs never show conninfo (it may hold
 * a password); they name the host, port and database.
 * opts may be NULL (defaults). Returns 0, -EIO (cannot connect or set up;
 * logged), -EACCES (passfile refused; logged) or -ENOMEM. The caller owns
 * the handle and frees it with meta_store_close().
 */
int meta_store_pg_open(const char *conninfo, const struct meta_store_pg_opts *opts,
		       struct meta_store *out);

/* Whether spec names PostgreSQL, and the check of its password file:
 * pg_conn_is_uri() and pg_conn_check_passfile() (common/pg_conn.h). */

/*
 * Opens the store a meta.store setting names: "" (the default) is the
 * SQLite database meta.db in data_dir; a postgresql:// or postgres:// URI
 * is PostgreSQL, with passfile ("" or NULL: libpq's default) for its
 * password. Anything else is refused (-EINVAL), with a message naming
 * the key 'meta.store'. desc receives a description fit for logs (the
 * SQLite path, or the PostgreSQL host and database: never a password).
 * Returns 0 or a negative errno (logged).
 */
int meta_store_open_spec(const char *spec, const char *passfile, const char *data_dir,
			 struct meta_store *out, char *desc, size_t desclen);

/* Counts of what meta_store_copy moved. */
struct meta_copy_stats {
	uint64_t inodes, dentries, links, inlines, quotas, counters, gc_items;
	uint64_t next_ino, next_gen;	/* the allocation state carried over */
};

/*
 * Copies the whole namespace of store from into store to, which must be
 * empty (no inode, counter, quota or queued gc item: else -ENOTEMPTY):
 * inodes, directory entries, symlink targets, quotas, counters, the gc
 * queue and the inode/generation allocation state, in one read
 * transaction on from and one write transaction on to. Then counts both
 * again and compares (-EIO, logged, on a mismatch). stats may be NULL.
 * Returns 0 or a negative errno; on failure to holds nothing new.
 */
int meta_store_copy(struct meta_store *from, struct meta_store *to,
		    struct meta_copy_stats *stats);

/* Closes a handle filled by an open function; safe on a zeroed struct and
 * on an already closed one. */
void meta_store_close(struct meta_store *store);

#endif
