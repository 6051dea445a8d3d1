/*
 * SQLite backend of the metadata store (meta_store.h). The only file of
 * the meta service that contains SQL.
 *
 * WAL journal, synchronous=NORMAL (a commit is durable once the WAL is
 * synced at checkpoint; a crash loses at most the last transactions, never
 * consistency), a busy timeout, every statement prepared once per handle
 * and cached, BEGIN IMMEDIATE for write transactions.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "common/log.h"
#include "meta/meta_store.h"

#define COMP "meta-sqlite"

enum stmt_id {
	ST_BEGIN_R,
	ST_BEGIN_W,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_GET_INODE,
	ST_PUT_INODE,
	ST_DEL_INODE,
	ST_PUT_LINK,
	ST_GET_LINK,
	ST_GET_DENTRY,
	ST_PUT_DENTRY,
	ST_DEL_DENTRY,
	ST_LIST_FIRST,
	ST_LIST_AFTER,
	ST_COUNTER_GET,
	ST_COUNTER_ADD,
	ST_COUNTER_SET,
	ST_GC_PUSH,
	ST_GC_POP,
	ST_GC_POP_INO,
	ST_GC_ACK,
	ST_GET_NAME,
	ST_GET_QUOTA,
	ST_PUT_QUOTA,
	ST_DEL_QUOTA,
	ST_LIST_QUOTAS,
	ST_LIST_INODES,
	ST_LIST_COUNTERS,
	ST_GC_LIST,
	ST_SP_MARK,
	ST_SP_KEEP,
	ST_SP_UNDO,
	ST_REQ_GET,
	ST_REQ_PUT,
	ST_REQ_PRUNE,
	ST_GET_INLINE,
	ST_PUT_INLINE,
	ST_DEL_INLINE,
	ST_COUNT,
};

static const char *const stmt_sql[ST_COUNT] = {
	[ST_BEGIN_R] = "BEGIN DEFERRED",
	[ST_BEGIN_W] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_SP_MARK] = "SAVEPOINT op",
	[ST_SP_KEEP] = "RELEASE op",
	[ST_SP_UNDO] = "ROLLBACK TO op",
	[ST_GET_INODE] = "SELECT mode, uid, gid, nlink, size, atime, mtime, ctime, parent,"
		" chunk_size, stripe, table_len, seed, gen FROM inodes WHERE ino = ?1",
	[ST_PUT_INODE] = "INSERT INTO inodes (ino, mode, uid, gid, nlink, size, atime, mtime,"
		" ctime, parent, chunk_size, stripe, table_len, seed, gen)"
		" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
		" ON CONFLICT (ino) DO UPDATE SET mode = ?2, uid = ?3, gid = ?4, nlink = ?5,"
		" size = ?6, atime = ?7, mtime = ?8, ctime = ?9, parent = ?10,"
		" chunk_size = ?11, stripe = ?12, table_len = ?13, seed = ?14, gen = ?15",
	[ST_DEL_INODE] = "DELETE FROM inodes WHERE ino = ?1",
	[ST_PUT_LINK] = "UPDATE inodes SET target = ?2 WHERE ino = ?1",
	[ST_GET_LINK] = "SELECT target FROM inodes WHERE ino = ?1",
	[ST_GET_DENTRY] = "SELECT ino, type FROM dentries WHERE parent = ?1 AND name = ?2",
	[ST_PUT_DENTRY] = "INSERT INTO dentries (parent, name, ino, type) VALUES (?1, ?2, ?3, ?4)",
	[ST_DEL_DENTRY] = "DELETE FROM dentries WHERE parent = ?1 AND name = ?2",
	[ST_LIST_FIRST] = "SELECT name, ino, type FROM dentries WHERE parent = ?1"
		" ORDER BY name LIMIT ?2",
	[ST_LIST_AFTER] = "SELECT name, ino, type FROM dentries WHERE parent = ?1"
		" AND name > ?3 ORDER BY name LIMIT ?2",
	[ST_COUNTER_GET] = "SELECT value FROM counters WHERE name = ?1",
	[ST_COUNTER_ADD] = "INSERT INTO counters (name, value) VALUES (?1, ?2)"
		" ON CONFLICT (name) DO UPDATE SET value = value + ?2",
	[ST_COUNTER_SET] = "INSERT INTO counters (name, value) VALUES (?1, ?2)"
		" ON CONFLICT (name) DO UPDATE SET value = ?2",
	[ST_GC_PUSH] = "INSERT INTO gc_queue (ino, chunk_from, chunk_to, chunk_size, stripe,"
		" table_len, seed) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_GC_POP] = "SELECT id, ino, chunk_from, chunk_to, chunk_size, stripe, table_len,"
		" seed FROM gc_queue ORDER BY id LIMIT ?1",
	[ST_GC_POP_INO] = "SELECT id, ino, chunk_from, chunk_to, chunk_size, stripe, table_len,"
		" seed FROM gc_queue WHERE ino = ?2 ORDER BY id LIMIT ?1",
	[ST_GC_ACK] = "DELETE FROM gc_queue WHERE id = ?1",
	[ST_GET_NAME] = "SELECT name FROM dentries WHERE parent = ?1 AND ino = ?2 LIMIT 1",
	[ST_GET_QUOTA] = "SELECT max_bytes, max_inodes, bytes, inodes FROM quotas WHERE ino = ?1",
	[ST_PUT_QUOTA] = "INSERT INTO quotas (ino, max_bytes, max_inodes, bytes, inodes)"
		" VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (ino) DO UPDATE SET"
		" max_bytes = ?2, max_inodes = ?3, bytes = ?4, inodes = ?5",
	[ST_DEL_QUOTA] = "DELETE FROM quotas WHERE ino = ?1",
	[ST_LIST_QUOTAS] = "SELECT ino, max_bytes, max_inodes, bytes, inodes FROM quotas"
		" WHERE ino > ?1 ORDER BY ino LIMIT ?2",
	[ST_LIST_INODES] = "SELECT mode, uid, gid, nlink, size, atime, mtime, ctime, parent,"
		" chunk_size, stripe, table_len, seed, gen, ino FROM inodes WHERE ino > ?1"
		" ORDER BY ino LIMIT ?2",
	/* The store's own rows are not namespace counters. */
	[ST_LIST_COUNTERS] = "SELECT name, value FROM counters WHERE CAST(name AS BLOB) >"
		" CAST(?1 AS BLOB) AND name NOT IN ('schema_version', 'next_ino', 'next_gen')"
		" ORDER BY CAST(name AS BLOB) LIMIT ?2",
	[ST_GC_LIST] = "SELECT id, ino, chunk_from, chunk_to, chunk_size, stripe, table_len,"
		" seed FROM gc_queue WHERE id > ?1 ORDER BY id LIMIT ?2",
	[ST_REQ_GET] = "SELECT at_ms, ret, outcome FROM requests WHERE client = ?1 AND seq = ?2",
	[ST_REQ_PUT] = "INSERT INTO requests (client, seq, at_ms, ret, outcome)"
		" VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_GET_INLINE] = "SELECT data FROM inline_data WHERE ino = ?1",
	[ST_PUT_INLINE] = "INSERT INTO inline_data (ino, data) VALUES (?1, ?2)"
		" ON CONFLICT (ino) DO UPDATE SET data = ?2",
	[ST_DEL_INLINE] = "DELETE FROM inline_data WHERE ino = ?1",
	[ST_REQ_PRUNE] = "DELETE FROM requests WHERE rowid IN (SELECT rowid FROM requests"
		" WHERE at_ms < ?1 LIMIT ?2)",
};

/*
 * Names are stored as BLOBs: any byte but '/' and NUL is legal, UTF-8 or
 * not, and BLOBs compare with memcmp(), which defines the readdir order.
 *
 * Schema versions (the schema_version counter): 1, the first; 2 adds
 * inodes.gen (generations, meta_store.h) and the next_gen counter; 3 adds
 * the quotas table (created by schema_sql on open, empty: no quota was
 * set before it existed, so migration only bumps the version); 4 adds
 * the requests table (request ids' outcomes: likewise); 5 adds the
 * inline_data table (the bytes of small files: likewise). A new
 * database is created at the current version; an older one is brought up
 * to it by migrate() when it is opened.
 */
#define SCHEMA_VERSION 5

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS inodes ("
	" ino INTEGER PRIMARY KEY, mode INTEGER NOT NULL, uid INTEGER NOT NULL,"
	" gid INTEGER NOT NULL, nlink INTEGER NOT NULL, size INTEGER NOT NULL,"
	" atime INTEGER NOT NULL, mtime INTEGER NOT NULL, ctime INTEGER NOT NULL,"
	" parent INTEGER NOT NULL, chunk_size INTEGER NOT NULL, stripe INTEGER NOT NULL,"
	" table_len INTEGER NOT NULL, seed INTEGER NOT NULL, target BLOB,"
	" gen INTEGER NOT NULL DEFAULT 1);"
	"CREATE TABLE IF NOT EXISTS dentries ("
	" parent INTEGER NOT NULL, name BLOB NOT NULL, ino INTEGER NOT NULL,"
	" type INTEGER NOT NULL, PRIMARY KEY (parent, name)) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS gc_queue ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT, ino INTEGER NOT NULL,"
	" chunk_from INTEGER NOT NULL, chunk_to INTEGER NOT NULL,"
	" chunk_size INTEGER NOT NULL, stripe INTEGER NOT NULL,"
	" table_len INTEGER NOT NULL, seed INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS gc_queue_ino ON gc_queue (ino);"
	"CREATE TABLE IF NOT EXISTS counters ("
	" name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;"
	"CREATE TABLE IF NOT EXISTS quotas ("
	" ino INTEGER PRIMARY KEY, max_bytes INTEGER NOT NULL, max_inodes INTEGER NOT NULL,"
	" bytes INTEGER NOT NULL, inodes INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS requests ("
	" client INTEGER NOT NULL, seq INTEGER NOT NULL, at_ms INTEGER NOT NULL,"
	" ret INTEGER NOT NULL, outcome BLOB NOT NULL, PRIMARY KEY (client, seq));"
	"CREATE INDEX IF NOT EXISTS requests_at ON requests (at_ms);"
	"CREATE TABLE IF NOT EXISTS inline_data ("
	" ino INTEGER PRIMARY KEY, data BLOB NOT NULL);"
	/* A database this creates is at the current version; an existing
	 * one keeps its row, and migrate() takes it from there. */
	"INSERT OR IGNORE INTO counters (name, value) VALUES ('schema_version', 5);"
	/* Inode numbers start at 2: 1 is the root, created by the namespace. */
	"INSERT OR IGNORE INTO counters (name, value) VALUES ('next_ino', 1);"
	/* Generations start at 2 too: 1 is the root's, and every inode's that
	 * a version 1 database held. */
	"INSERT OR IGNORE INTO counters (name, value) VALUES ('next_gen', 1);";

/* Version 1 -> 2: inodes that existed before generations get 1. */
static const char migrate_v2_sql[] =
	"ALTER TABLE inodes ADD COLUMN gen INTEGER NOT NULL DEFAULT 1;"
	"UPDATE counters SET value = 2 WHERE name = 'schema_version';";

struct sqlite_store {
	sqlite3 *db;
	char *path;
	sqlite3_stmt *stmt[ST_COUNT];
	bool in_txn;
};

static int map_rc(struct sqlite_store *s, int rc, const char *what)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_READONLY:
		return -EROFS;
	default:
		log_error(COMP, "database '%s': %s failed: %s (%d)", s->path, what,
			  sqlite3_errmsg(s->db), rc);
		return -EIO;
	}
}

/* Returns the cached statement, reset and with its bindings cleared, or
 * NULL (logged) if it cannot be prepared. */
static sqlite3_stmt *stmt_get(struct sqlite_store *s, enum stmt_id id)
{
	sqlite3_stmt *st = s->stmt[id];

	if (!st) {
		int rc = sqlite3_prepare_v3(s->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
					    &st, NULL);
		if (rc != SQLITE_OK) {
			log_error(COMP, "database '%s': cannot prepare statement %d: %s",
				  s->path, (int)id, sqlite3_errmsg(s->db));
			return NULL;
		}
		s->stmt[id] = st;
	}
	return st;
}

static void stmt_done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Runs a statement that returns no rows. */
static int stmt_exec(struct sqlite_store *s, sqlite3_stmt *st, const char *what)
{
	int rc = sqlite3_step(st);
	int err = rc == SQLITE_DONE ? 0 : map_rc(s, rc, what);

	stmt_done(st);
	return err;
}

static int simple(struct sqlite_store *s, enum stmt_id id, const char *what)
{
	sqlite3_stmt *st = stmt_get(s, id);

	if (!st)
		return -EIO;
	return stmt_exec(s, st, what);
}

static int sq_begin(void *impl, bool write)
{
	struct sqlite_store *s = impl;
	int err;

	if (s->in_txn) {
		log_error(COMP, "database '%s': nested transaction", s->path);
		return -EINVAL;
	}
	err = simple(s, write ? ST_BEGIN_W : ST_BEGIN_R, "begin");
	if (!err)
		s->in_txn = true;
	return err;
}

static int sq_commit(void *impl)
{
	struct sqlite_store *s = impl;
	int err = simple(s, ST_COMMIT, "commit");

	/* A failed COMMIT may leave the transaction open (SQLITE_BUSY); the
	 * caller then rolls back. */
	if (!err || sqlite3_get_autocommit(s->db))
		s->in_txn = false;
	return err;
}

static void sq_rollback(void *impl)
{
	struct sqlite_store *s = impl;

	if (!sqlite3_get_autocommit(s->db))
		(void)simple(s, ST_ROLLBACK, "rollback");
	s->in_txn = false;
}

static int sq_sp_mark(void *impl)
{
	return simple(impl, ST_SP_MARK, "savepoint");
}

static int sq_sp_keep(void *impl)
{
	return simple(impl, ST_SP_KEEP, "release savepoint");
}

/* ROLLBACK TO leaves the savepoint open: release it too. */
static int sq_sp_undo(void *impl)
{
	int err = simple(impl, ST_SP_UNDO, "rollback to savepoint");

	return err ? err : simple(impl, ST_SP_KEEP, "release savepoint");
}

/* Columns col.. of st: mode .. gen as ST_GET_INODE selects them. */
static void inode_row(sqlite3_stmt *st, int col, struct meta_inode *out)
{
	out->mode = (uint32_t)sqlite3_column_int64(st, col + 0);
	out->uid = (uint32_t)sqlite3_column_int64(st, col + 1);
	out->gid = (uint32_t)sqlite3_column_int64(st, col + 2);
	out->nlink = (uint32_t)sqlite3_column_int64(st, col + 3);
	out->size = (uint64_t)sqlite3_column_int64(st, col + 4);
	out->atime_ns = sqlite3_column_int64(st, col + 5);
	out->mtime_ns = sqlite3_column_int64(st, col + 6);
	out->ctime_ns = sqlite3_column_int64(st, col + 7);
	out->parent = (uint64_t)sqlite3_column_int64(st, col + 8);
	out->layout.chunk_size = (uint32_t)sqlite3_column_int64(st, col + 9);
	out->layout.stripe = (uint32_t)sqlite3_column_int64(st, col + 10);
	out->layout.table_len = (uint32_t)sqlite3_column_int64(st, col + 11);
	out->layout.seed = (uint64_t)sqlite3_column_int64(st, col + 12);
	out->gen = (uint64_t)sqlite3_column_int64(st, col + 13);
}

static int sq_get_inode(void *impl, uint64_t ino, struct meta_inode *out)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_GET_INODE);
	int rc, err = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		memset(out, 0, sizeof(*out));
		out->ino = ino;
		inode_row(st, 0, out);
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = map_rc(s, rc, "get inode");
	}
	stmt_done(st);
	return err;
}

static int sq_put_inode(void *impl, const struct meta_inode *in)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_PUT_INODE);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)in->ino);
	sqlite3_bind_int64(st, 2, in->mode);
	sqlite3_bind_int64(st, 3, in->uid);
	sqlite3_bind_int64(st, 4, in->gid);
	sqlite3_bind_int64(st, 5, in->nlink);
	sqlite3_bind_int64(st, 6, (int64_t)in->size);
	sqlite3_bind_int64(st, 7, in->atime_ns);
	sqlite3_bind_int64(st, 8, in->mtime_ns);
	sqlite3_bind_int64(st, 9, in->ctime_ns);
	sqlite3_bind_int64(st, 10, (int64_t)in->parent);
	sqlite3_bind_int64(st, 11, in->layout.chunk_size);
	sqlite3_bind_int64(st, 12, in->layout.stripe);
	sqlite3_bind_int64(st, 13, in->layout.table_len);
	sqlite3_bind_int64(st, 14, (int64_t)in->layout.seed);
	sqlite3_bind_int64(st, 15, (int64_t)in->gen);
	return stmt_exec(s, st, "put inode");
}

/* Deletes the row keyed by ino with statement which: -ENOENT when none. */
static int del_by_ino(struct sqlite_store *s, enum stmt_id which, uint64_t ino, const char *what)
{
	sqlite3_stmt *st = stmt_get(s, which);
	int err;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	err = stmt_exec(s, st, what);
	if (!err && sqlite3_changes(s->db) == 0)
		err = -ENOENT;
	return err;
}

static int sq_del_inline(void *impl, uint64_t ino)
{
	int err = del_by_ino(impl, ST_DEL_INLINE, ino, "delete inline data");

	return err == -ENOENT ? 0 : err;
}

static int sq_del_inode(void *impl, uint64_t ino)
{
	int err = sq_del_inline(impl, ino);

	return err ? err : del_by_ino(impl, ST_DEL_INODE, ino, "delete inode");
}

static int sq_put_inline(void *impl, uint64_t ino, const uint8_t *data, size_t len)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_PUT_INLINE);

	if (!st)
		return -EIO;
	if (len > META_INLINE_MAX)
		return -EFBIG;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	/* A zero-length blob, not NULL: the column is NOT NULL. */
	sqlite3_bind_blob(st, 2, len ? (const void *)data : "", (int)len, SQLITE_TRANSIENT);
	return stmt_exec(s, st, "put inline data");
}

/* Runs st, bound to an inode number, for one blob column: copies it into
 * buf (cap bytes; with nul, NUL-terminated and cut to cap - 1) and
 * returns its full length, or -ENOENT without a row. */
static int get_blob(struct sqlite_store *s, enum stmt_id which, uint64_t ino, void *buf,
		    size_t cap, bool nul, const char *what)
{
	sqlite3_stmt *st = stmt_get(s, which);
	int rc, err;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const void *p = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		size_t room = nul ? (cap ? cap - 1 : 0) : cap;
		size_t c = (size_t)n < room ? (size_t)n : room;

		if (c)
			memcpy(buf, p, c);
		if (nul && cap)
			((char *)buf)[c] = '\0';
		err = n;
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = map_rc(s, rc, what);
	}
	stmt_done(st);
	return err;
}

static int sq_get_inline(void *impl, uint64_t ino, uint8_t *buf, size_t cap)
{
	return get_blob(impl, ST_GET_INLINE, ino, buf, cap, false, "get inline data");
}

static int sq_put_link(void *impl, uint64_t ino, const char *target, size_t len)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_PUT_LINK);
	int err;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	sqlite3_bind_blob(st, 2, target, (int)len, SQLITE_TRANSIENT);
	err = stmt_exec(s, st, "put link");
	if (!err && sqlite3_changes(s->db) == 0)
		err = -ENOENT;
	return err;
}

static int sq_get_link(void *impl, uint64_t ino, char *buf, size_t cap)
{
	return get_blob(impl, ST_GET_LINK, ino, buf, cap, true, "get link");
}

static int sq_get_dentry(void *impl, uint64_t parent, const char *name, uint64_t *ino,
			 uint32_t *type)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_GET_DENTRY);
	int rc, err = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)parent);
	sqlite3_bind_blob(st, 2, name, (int)strlen(name), SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (ino)
			*ino = (uint64_t)sqlite3_column_int64(st, 0);
		if (type)
			*type = (uint32_t)sqlite3_column_int64(st, 1);
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = map_rc(s, rc, "get dentry");
	}
	stmt_done(st);
	return err;
}

static int sq_put_dentry(void *impl, uint64_t parent, const char *name, uint64_t ino,
			 uint32_t type)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_PUT_DENTRY);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)parent);
	sqlite3_bind_blob(st, 2, name, (int)strlen(name), SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (int64_t)ino);
	sqlite3_bind_int64(st, 4, type);
	return stmt_exec(s, st, "put dentry");
}

static int sq_del_dentry(void *impl, uint64_t parent, const char *name)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_DEL_DENTRY);
	int err;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)parent);
	sqlite3_bind_blob(st, 2, name, (int)strlen(name), SQLITE_STATIC);
	err = stmt_exec(s, st, "delete dentry");
	if (!err && sqlite3_changes(s->db) == 0)
		err = -ENOENT;
	return err;
}

static int sq_list_dentries(void *impl, uint64_t dir, const char *after, uint32_t max,
			    meta_dentry_cb cb, void *arg)
{
	struct sqlite_store *s = impl;
	bool from_start = !after || !after[0];
	sqlite3_stmt *st = stmt_get(s, from_start ? ST_LIST_FIRST : ST_LIST_AFTER);
	char name[256];
	int rc, n = 0, ret = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)dir);
	sqlite3_bind_int64(st, 2, max);
	if (!from_start)
		sqlite3_bind_blob(st, 3, after, (int)strlen(after), SQLITE_STATIC);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const void *p = sqlite3_column_blob(st, 0);
		int len = sqlite3_column_bytes(st, 0);

		if (len <= 0 || len >= (int)sizeof(name)) {
			log_error(COMP, "database '%s': bad entry name in directory %llu",
				  s->path, (unsigned long long)dir);
			ret = -EIO;
			goto out;
		}
		memcpy(name, p, (size_t)len);
		name[len] = '\0';
		ret = cb(arg, name, (uint64_t)sqlite3_column_int64(st, 1),
			 (uint32_t)sqlite3_column_int64(st, 2));
		if (ret)
			goto out;
		n++;
	}
	ret = rc == SQLITE_DONE ? n : map_rc(s, rc, "list dentries");
out:
	stmt_done(st);
	return ret;
}

static int sq_counter_get(void *impl, const char *name, int64_t *out)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_COUNTER_GET);
	int rc, err = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE)
		*out = 0;
	else
		err = map_rc(s, rc, "get counter");
	stmt_done(st);
	return err;
}

static int counter_write(struct sqlite_store *s, enum stmt_id id, const char *name,
			 int64_t v)
{
	sqlite3_stmt *st = stmt_get(s, id);

	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, v);
	return stmt_exec(s, st, "update counter");
}

static int sq_counter_add(void *impl, const char *name, int64_t delta)
{
	return counter_write(impl, ST_COUNTER_ADD, name, delta);
}

static int sq_counter_set(void *impl, const char *name, int64_t value)
{
	return counter_write(impl, ST_COUNTER_SET, name, value);
}

/* Takes the next value of counter name. */
static int counter_next(void *impl, const char *name, uint64_t *out)
{
	int64_t v;
	int err = sq_counter_add(impl, name, 1);

	if (!err)
		err = sq_counter_get(impl, name, &v);
	if (!err)
		*out = (uint64_t)v;
	return err;
}

static int sq_alloc_ino(void *impl, uint64_t *ino, uint64_t *gen)
{
	int err = counter_next(impl, "next_ino", ino);

	return err ? err : counter_next(impl, "next_gen", gen);
}

static int sq_alloc_peek(void *impl, uint64_t *ino, uint64_t *gen)
{
	int64_t i, g;
	int err = sq_counter_get(impl, "next_ino", &i);

	if (!err)
		err = sq_counter_get(impl, "next_gen", &g);
	if (!err) {
		*ino = (uint64_t)i;
		*gen = (uint64_t)g;
	}
	return err;
}

static int sq_alloc_reserve(void *impl, uint64_t ino, uint64_t gen)
{
	uint64_t i, g;
	int err = sq_alloc_peek(impl, &i, &g);

	if (!err && ino > i)
		err = sq_counter_set(impl, "next_ino", (int64_t)ino);
	if (!err && gen > g)
		err = sq_counter_set(impl, "next_gen", (int64_t)gen);
	return err;
}

static int sq_gc_push(void *impl, uint64_t ino, uint64_t from, uint64_t to,
		      const struct file_layout *l)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_GC_PUSH);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	sqlite3_bind_int64(st, 2, (int64_t)from);
	sqlite3_bind_int64(st, 3, (int64_t)to);
	sqlite3_bind_int64(st, 4, l->chunk_size);
	sqlite3_bind_int64(st, 5, l->stripe);
	sqlite3_bind_int64(st, 6, l->table_len);
	sqlite3_bind_int64(st, 7, (int64_t)l->seed);
	return stmt_exec(s, st, "push gc item");
}

/* Reads the rows of a gc_queue select (bound) into out. */
static int gc_rows(struct sqlite_store *s, sqlite3_stmt *st, struct meta_gc_item *out)
{
	int rc, n = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct meta_gc_item *it = &out[n++];

		memset(it, 0, sizeof(*it));
		it->id = (uint64_t)sqlite3_column_int64(st, 0);
		it->ino = (uint64_t)sqlite3_column_int64(st, 1);
		it->from = (uint64_t)sqlite3_column_int64(st, 2);
		it->to = (uint64_t)sqlite3_column_int64(st, 3);
		it->layout.chunk_size = (uint32_t)sqlite3_column_int64(st, 4);
		it->layout.stripe = (uint32_t)sqlite3_column_int64(st, 5);
		it->layout.table_len = (uint32_t)sqlite3_column_int64(st, 6);
		it->layout.seed = (uint64_t)sqlite3_column_int64(st, 7);
	}
	if (rc != SQLITE_DONE)
		n = map_rc(s, rc, "read gc items");
	stmt_done(st);
	return n;
}

static int sq_gc_pop(void *impl, uint64_t ino, struct meta_gc_item *out, uint32_t max)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ino ? ST_GC_POP_INO : ST_GC_POP);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, max);
	if (ino)
		sqlite3_bind_int64(st, 2, (int64_t)ino);
	return gc_rows(s, st, out);
}

/* Listing statement id, bound to the key to start after (?1) and the
 * number of rows (?2); NULL (logged) if it cannot be prepared. */
static sqlite3_stmt *list_stmt(struct sqlite_store *s, enum stmt_id id, uint64_t after,
			       uint32_t max)
{
	sqlite3_stmt *st = stmt_get(s, id);

	if (st) {
		sqlite3_bind_int64(st, 1, (int64_t)after);
		sqlite3_bind_int64(st, 2, max);
	}
	return st;
}

/* One process serves a SQLite namespace: it runs the GC. */
static int sq_gc_claim(void *impl, bool *held)
{
	(void)impl;
	*held = true;
	return 0;
}

static int sq_gc_list(void *impl, uint64_t after, struct meta_gc_item *out, uint32_t max)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = list_stmt(s, ST_GC_LIST, after, max);

	return st ? gc_rows(s, st, out) : -EIO;
}

static int sq_list_inodes(void *impl, uint64_t after, struct meta_inode *out, uint32_t max)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = list_stmt(s, ST_LIST_INODES, after, max);
	int rc, n = 0;

	if (!st)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct meta_inode *in = &out[n++];

		memset(in, 0, sizeof(*in));
		inode_row(st, 0, in);
		in->ino = (uint64_t)sqlite3_column_int64(st, 14);
	}
	if (rc != SQLITE_DONE)
		n = map_rc(s, rc, "list inodes");
	stmt_done(st);
	return n;
}

static int sq_list_counters(void *impl, const char *after, struct meta_counter *out,
			    uint32_t max)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_LIST_COUNTERS);
	int rc, n = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_text(st, 1, after ? after : "", -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, max);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *name = (const char *)sqlite3_column_text(st, 0);

		if (!name || strlen(name) >= META_COUNTER_NAME_MAX) {
			log_error(COMP, "database '%s': counter name too long", s->path);
			n = -EIO;
			break;
		}
		snprintf(out[n].name, sizeof(out[n].name), "%s", name);
		out[n++].value = sqlite3_column_int64(st, 1);
	}
	if (n >= 0 && rc != SQLITE_DONE)
		n = map_rc(s, rc, "list counters");
	stmt_done(st);
	return n;
}

static int sq_gc_ack(void *impl, uint64_t id)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_GC_ACK);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)id);
	return stmt_exec(s, st, "ack gc item");
}

static int sq_get_name(void *impl, uint64_t parent, uint64_t ino, char *buf, size_t cap)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_GET_NAME);
	int rc, err = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)parent);
	sqlite3_bind_int64(st, 2, (int64_t)ino);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		const void *p = sqlite3_column_blob(st, 0);
		size_t n = (size_t)sqlite3_column_bytes(st, 0);

		if (cap) {
			if (n > cap - 1)
				n = cap - 1;
			if (n)
				memcpy(buf, p, n);
			buf[n] = '\0';
		}
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = map_rc(s, rc, "get name");
	}
	stmt_done(st);
	return err;
}

static void quota_row(sqlite3_stmt *st, int col, struct meta_quota *q)
{
	q->max_bytes = (uint64_t)sqlite3_column_int64(st, col);
	q->max_inodes = (uint64_t)sqlite3_column_int64(st, col + 1);
	q->bytes = (uint64_t)sqlite3_column_int64(st, col + 2);
	q->inodes = (uint64_t)sqlite3_column_int64(st, col + 3);
}

static int sq_get_quota(void *impl, uint64_t ino, struct meta_quota *out)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_GET_QUOTA);
	int rc, err = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)ino);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		out->ino = ino;
		quota_row(st, 0, out);
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = map_rc(s, rc, "get quota");
	}
	stmt_done(st);
	return err;
}

static int sq_put_quota(void *impl, const struct meta_quota *q)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_PUT_QUOTA);

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)q->ino);
	sqlite3_bind_int64(st, 2, (int64_t)q->max_bytes);
	sqlite3_bind_int64(st, 3, (int64_t)q->max_inodes);
	sqlite3_bind_int64(st, 4, (int64_t)q->bytes);
	sqlite3_bind_int64(st, 5, (int64_t)q->inodes);
	return stmt_exec(s, st, "put quota");
}

static int sq_del_quota(void *impl, uint64_t ino)
{
	return del_by_ino(impl, ST_DEL_QUOTA, ino, "delete quota");
}

static int sq_list_quotas(void *impl, uint64_t after, struct meta_quota *out, uint32_t max)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = list_stmt(s, ST_LIST_QUOTAS, after, max);
	int rc, n = 0;

	if (!st)
		return -EIO;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct meta_quota *q = &out[n++];

		q->ino = (uint64_t)sqlite3_column_int64(st, 0);
		quota_row(st, 1, q);
	}
	if (rc != SQLITE_DONE)
		n = map_rc(s, rc, "list quotas");
	stmt_done(st);
	return n;
}

static int sq_req_get(void *impl, uint64_t client, uint64_t seq, struct meta_req *out)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_REQ_GET);
	int rc, err = 0;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, (int64_t)client);
	sqlite3_bind_int64(st, 2, (int64_t)seq);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		int n = sqlite3_column_bytes(st, 2);

		if (n < 0 || n > META_REQ_OUT_MAX) {
			log_error(COMP, "database '%s': request %llx:%llu has an outcome of %d"
				  " bytes, more than %d", s->path, (unsigned long long)client,
				  (unsigned long long)seq, n, META_REQ_OUT_MAX);
			err = -EIO;
		} else {
			out->client = client;
			out->seq = seq;
			out->at_ms = sqlite3_column_int64(st, 0);
			out->ret = (int32_t)sqlite3_column_int64(st, 1);
			out->len = (uint32_t)n;
			if (n)
				memcpy(out->out, sqlite3_column_blob(st, 2), (size_t)n);
		}
	} else if (rc == SQLITE_DONE) {
		err = -ENOENT;
	} else {
		err = map_rc(s, rc, "get request");
	}
	stmt_done(st);
	return err;
}

static int sq_req_put(void *impl, const struct meta_req *r)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_REQ_PUT);

	if (!st)
		return -EIO;
	if (r->len > META_REQ_OUT_MAX) {
		stmt_done(st);
		return -EINVAL;
	}
	sqlite3_bind_int64(st, 1, (int64_t)r->client);
	sqlite3_bind_int64(st, 2, (int64_t)r->seq);
	sqlite3_bind_int64(st, 3, r->at_ms);
	sqlite3_bind_int64(st, 4, r->ret);
	sqlite3_bind_blob(st, 5, r->out, (int)r->len, SQLITE_STATIC);
	return stmt_exec(s, st, "put request");
}

static int sq_req_prune(void *impl, int64_t before_ms, uint32_t max)
{
	struct sqlite_store *s = impl;
	sqlite3_stmt *st = stmt_get(s, ST_REQ_PRUNE);
	int err;

	if (!st)
		return -EIO;
	sqlite3_bind_int64(st, 1, before_ms);
	sqlite3_bind_int64(st, 2, max);
	err = stmt_exec(s, st, "prune requests");
	return err ? err : sqlite3_changes(s->db);
}

static void sq_close(void *impl)
{
	struct sqlite_store *s = impl;

	if (!s)
		return;
	if (s->in_txn)
		sq_rollback(s);
	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->stmt[i]);
	if (s->db)
		sqlite3_close(s->db);
	free(s->path);
	free(s);
}

static const struct meta_store_ops sqlite_ops = {
	.begin = sq_begin,
	.commit = sq_commit,
	.rollback = sq_rollback,
	.sp_mark = sq_sp_mark,
	.sp_keep = sq_sp_keep,
	.sp_undo = sq_sp_undo,
	.get_inode = sq_get_inode,
	.put_inode = sq_put_inode,
	.del_inode = sq_del_inode,
	.get_inline = sq_get_inline,
	.put_inline = sq_put_inline,
	.del_inline = sq_del_inline,
	.put_link = sq_put_link,
	.get_link = sq_get_link,
	.get_dentry = sq_get_dentry,
	.put_dentry = sq_put_dentry,
	.del_dentry = sq_del_dentry,
	.list_dentries = sq_list_dentries,
	.get_name = sq_get_name,
	.get_quota = sq_get_quota,
	.put_quota = sq_put_quota,
	.del_quota = sq_del_quota,
	.list_quotas = sq_list_quotas,
	.alloc_ino = sq_alloc_ino,
	.counter_get = sq_counter_get,
	.counter_add = sq_counter_add,
	.counter_set = sq_counter_set,
	.gc_push = sq_gc_push,
	.gc_pop = sq_gc_pop,
	.gc_ack = sq_gc_ack,
	.gc_claim = sq_gc_claim,
	.list_inodes = sq_list_inodes,
	.list_counters = sq_list_counters,
	.gc_list = sq_gc_list,
	.alloc_peek = sq_alloc_peek,
	.alloc_reserve = sq_alloc_reserve,
	.req_get = sq_req_get,
	.req_put = sq_req_put,
	.req_prune = sq_req_prune,
	.close = sq_close,
};

void meta_store_sqlite_opts_init(struct meta_store_sqlite_opts *opts, size_t size)
{
	struct meta_store_sqlite_opts def = {
		.size = sizeof(def),
		.busy_timeout_ms = 5000,
	};

	if (size > sizeof(def))
		size = sizeof(def);
	memcpy(opts, &def, size);
	opts->size = size;
}

/* Runs setup SQL, retrying while another handle holds a lock (two threads
 * opening the same new database at once race on the WAL switch). */
static int exec_retry(struct sqlite_store *s, const char *sql, const char *what)
{
	for (int attempt = 0;; attempt++) {
		char *msg = NULL;
		int rc = sqlite3_exec(s->db, sql, NULL, NULL, &msg);

		if (rc == SQLITE_OK)
			return 0;
		if (((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) && attempt < 50) {
			struct timespec ts = { 0, 20 * 1000 * 1000 };

			sqlite3_free(msg);
			if (!sqlite3_get_autocommit(s->db))
				sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
			nanosleep(&ts, NULL);
			continue;
		}
		log_error(COMP, "database '%s': %s failed: %s", s->path, what,
			  msg ? msg : sqlite3_errstr(rc));
		sqlite3_free(msg);
		if (!sqlite3_get_autocommit(s->db))
			sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
		return -EIO;
	}
}

/*
 * Brings the schema of an open database (inside the transaction that
 * created what was missing) to SCHEMA_VERSION. A database of a later
 * version is refused: this build would not know what it holds.
 */
static int migrate(struct sqlite_store *s)
{
	sqlite3_stmt *st = NULL;
	int64_t v = 0;
	int rc = sqlite3_prepare_v2(s->db, "SELECT value FROM counters WHERE name ="
				    " 'schema_version'", -1, &st, NULL);

	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW) {
		log_error(COMP, "database '%s': cannot read the schema version: %s", s->path,
			  sqlite3_errmsg(s->db));
		return -EIO;
	}
	if (v > SCHEMA_VERSION) {
		log_error(COMP, "database '%s' has schema version %lld, newer than this build's"
			  " (%d); run a newer stratad", s->path, (long long)v, SCHEMA_VERSION);
		return -EIO;
	}
	if (v < 2) {
		rc = sqlite3_exec(s->db, migrate_v2_sql, NULL, NULL, NULL);
		if (rc != SQLITE_OK) {
			log_error(COMP, "database '%s': migrating schema 1 to 2 failed: %s",
				  s->path, sqlite3_errmsg(s->db));
			return -EIO;
		}
		log_info(COMP, "database '%s': schema 1 -> 2 (inode generations)", s->path);
		v = 2;
	}
	/* Versions 3 to 5 only add tables, which schema_sql made. */
	for (; v < SCHEMA_VERSION; v++) {
		static const char *const added[] = { "", "", "", "quotas", "request ids",
						     "inline data" };
		char sql[96];

		_Static_assert(sizeof(added) / sizeof(added[0]) == SCHEMA_VERSION + 1,
			       "name what each schema version adds");

		snprintf(sql, sizeof(sql), "UPDATE counters SET value = %lld WHERE name ="
			 " 'schema_version';", (long long)v + 1);
		if (sqlite3_exec(s->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
			log_error(COMP, "database '%s': migrating schema to %lld failed: %s",
				  s->path, (long long)v + 1, sqlite3_errmsg(s->db));
			return -EIO;
		}
		log_info(COMP, "database '%s': schema %lld -> %lld (%s)", s->path, (long long)v,
			 (long long)v + 1, added[v + 1]);
	}
	return 0;
}

int meta_store_sqlite_open(const char *path, const struct meta_store_sqlite_opts *opts,
			   struct meta_store *out)
{
	struct meta_store_sqlite_opts o;
	struct sqlite_store *s;
	int rc, err;

	meta_store_sqlite_opts_init(&o, sizeof(o));
	if (opts)
		memcpy(&o, opts, opts->size < sizeof(o) ? opts->size : sizeof(o));
	out->ops = NULL;
	out->impl = NULL;

	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->path = strdup(path);
	if (!s->path) {
		err = -ENOMEM;
		goto fail;
	}
	/* One handle per thread: no SQLite-internal mutex needed. */
	rc = sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			     SQLITE_OPEN_NOMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_error(COMP, "cannot open database '%s': %s; check the path and its permissions",
			  path, s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc));
		err = -EIO;
		goto fail;
	}
	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, (int)o.busy_timeout_ms);
	err = exec_retry(s, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;",
			 "setting WAL mode");
	if (err)
		goto fail;
	err = exec_retry(s, "BEGIN IMMEDIATE", "creating the schema");
	if (err)
		goto fail;
	rc = sqlite3_exec(s->db, schema_sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		log_error(COMP, "database '%s': creating the schema failed: %s", path,
			  sqlite3_errmsg(s->db));
		err = -EIO;
		goto fail_txn;
	}
	err = migrate(s);
	if (err)
		goto fail_txn;
	rc = sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		log_error(COMP, "database '%s': committing the schema failed: %s", path,
			  sqlite3_errmsg(s->db));
		err = -EIO;
		goto fail_txn;
	}
	out->ops = &sqlite_ops;
	out->impl = s;
	return 0;
fail_txn:
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
fail:
	sq_close(s);
	return err;
}

void meta_store_close(struct meta_store *store)
{
	if (store->ops && store->ops->close)
		store->ops->close(store->impl);
	store->ops = NULL;
	store->impl = NULL;
}
