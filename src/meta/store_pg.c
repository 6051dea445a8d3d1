/*
 * PostgreSQL backend of the metadata store (meta_store.h), through libpq.
 * With store_sqlite.c, the only file of the meta service that holds SQL.
 *
 * Every statement is prepared once per connection (again after a
 * reconnect) and run with binary parameters and results: integers as
 * big-endian int8, names and link targets as bytea, so any byte but '/'
 * and NUL is a legal name and bytea's memcmp() order is the readdir order,
 * as with SQLite's BLOBs.
 *
 * Write transactions are SERIALIZABLE: a rename or a link across
 * directories by another server either sees ours whole or fails with a
 * serialization error; reads are REPEATABLE READ (one snapshot). SQLSTATE
 * 40001 (serialization failure) and 40P01 (deadlock) map to -EBUSY, which
 * ns.c answers by rolling back and running the transaction again. A write
 * that would make a duplicate key (a taken name) does not abort the
 * transaction: INSERT ... ON CONFLICT DO NOTHING and a row count say
 * -EEXIST, as the namespace goes on after it.
 *
 * Several meta servers may share a database: inode numbers and
 * generations come from sequences (never reused, even across rolled back
 * transactions), the schema is set up and migrated under an advisory
 * lock, and nothing durable is cached in the process.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include <libpq-fe.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/pg_conn.h"
#include "meta/meta_store.h"

#define COMP "meta-pg"

/* Type OIDs of the parameters (pg_type.h, stable across versions). */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25

/* pg_advisory_xact_lock key of schema set-up: "STRATAMS". */
#define SCHEMA_LOCK_KEY "6076327939519844691"
/* pg_try_advisory_lock (session) key of the GC role: "STRATAGC". */
#define GC_LOCK_KEY "6004514643731629891"
/* After a failed reconnect, requests fail at once for this long: a server
 * that is down (or a connect_timeout on a lost host) must not stall every
 * request of the meta service's thread. */
#define RECONNECT_BACKOFF_MS 500
#define MAX_PARAMS 15

enum pst {
	P_GET_INODE,
	P_PUT_INODE,
	P_DEL_INODE,
	P_PUT_LINK,
	P_GET_LINK,
	P_GET_DENTRY,
	P_PUT_DENTRY,
	P_DEL_DENTRY,
	P_LIST_FIRST,
	P_LIST_AFTER,
	P_GET_NAME,
	P_GET_QUOTA,
	P_PUT_QUOTA,
	P_DEL_QUOTA,
	P_LIST_QUOTAS,
	P_ALLOC,
	P_COUNTER_GET,
	P_COUNTER_ADD,
	P_COUNTER_SET,
	P_PART_GET,
	P_PART_ADD,
	P_PART_CLEAR,
	P_GC_PUSH,
	P_GC_POP,
	P_GC_POP_INO,
	P_GC_ACK,
	P_LIST_INODES,
	P_LIST_COUNTERS,
	P_GC_LIST,
	P_ALLOC_PEEK,
	P_ALLOC_RESERVE,
	P_GC_CLAIM,
	P_REQ_GET,
	P_REQ_PUT,
	P_REQ_PRUNE,
	P_GET_INLINE,
	P_PUT_INLINE,
	P_DEL_INLINE,
	P_COUNT,
};

/* The SQL of each statement and its parameter types, one letter each:
 * i int8, b bytea, t text. */
struct pstmt {
	const char *sql;
	const char *types;
};

#define INODE_COLS "mode, uid, gid, nlink, size, atime, mtime, ctime, parent," \
	" chunk_size, stripe, table_len, seed, gen"
#define GC_COLS "id, ino, chunk_from, chunk_to, chunk_size, stripe, table_len, seed"
/* The last number a sequence handed out (its start minus one if none). */
#define SEQ_LAST(seq) "(SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1" \
	" END FROM " seq ")"

static const struct pstmt pstmts[P_COUNT] = {
	[P_GET_INODE] = { "SELECT " INODE_COLS " FROM meta_inodes WHERE ino = $1", "i" },
	[P_PUT_INODE] = { "INSERT INTO meta_inodes (ino, " INODE_COLS ") VALUES ($1, $2, $3,"
		" $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) ON CONFLICT (ino) DO"
		" UPDATE SET mode = $2, uid = $3, gid = $4, nlink = $5, size = $6, atime = $7,"
		" mtime = $8, ctime = $9, parent = $10, chunk_size = $11, stripe = $12,"
		" table_len = $13, seed = $14, gen = $15", "iiiiiiiiiiiiiii" },
	[P_DEL_INODE] = { "DELETE FROM meta_inodes WHERE ino = $1", "i" },
	[P_GET_INLINE] = { "SELECT data FROM meta_inline WHERE ino = $1", "i" },
	[P_PUT_INLINE] = { "INSERT INTO meta_inline (ino, data) VALUES ($1, $2)"
		" ON CONFLICT (ino) DO UPDATE SET data = $2", "ib" },
	[P_DEL_INLINE] = { "DELETE FROM meta_inline WHERE ino = $1", "i" },
	[P_PUT_LINK] = { "UPDATE meta_inodes SET target = $2 WHERE ino = $1", "ib" },
	[P_GET_LINK] = { "SELECT target FROM meta_inodes WHERE ino = $1", "i" },
	[P_GET_DENTRY] = { "SELECT ino, type FROM meta_dentries WHERE parent = $1 AND"
		" name = $2", "ib" },
	[P_PUT_DENTRY] = { "INSERT INTO meta_dentries (parent, name, ino, type) VALUES"
		" ($1, $2, $3, $4) ON CONFLICT DO NOTHING", "ibii" },
	[P_DEL_DENTRY] = { "DELETE FROM meta_dentries WHERE parent = $1 AND name = $2", "ib" },
	[P_LIST_FIRST] = { "SELECT name, ino, type FROM meta_dentries WHERE parent = $1"
		" ORDER BY name LIMIT $2", "ii" },
	[P_LIST_AFTER] = { "SELECT name, ino, type FROM meta_dentries WHERE parent = $1"
		" AND name > $3 ORDER BY name LIMIT $2", "iib" },
	[P_GET_NAME] = { "SELECT name FROM meta_dentries WHERE parent = $1 AND ino = $2"
		" LIMIT 1", "ii" },
	[P_GET_QUOTA] = { "SELECT max_bytes, max_inodes, bytes, inodes FROM meta_quotas"
		" WHERE ino = $1", "i" },
	[P_PUT_QUOTA] = { "INSERT INTO meta_quotas (ino, max_bytes, max_inodes, bytes, inodes)"
		" VALUES ($1, $2, $3, $4, $5) ON CONFLICT (ino) DO UPDATE SET"
		" max_bytes = $2, max_inodes = $3, bytes = $4, inodes = $5", "iiiii" },
	[P_DEL_QUOTA] = { "DELETE FROM meta_quotas WHERE ino = $1", "i" },
	[P_LIST_QUOTAS] = { "SELECT ino, max_bytes, max_inodes, bytes, inodes FROM meta_quotas"
		" WHERE ino > $1 ORDER BY ino LIMIT $2", "ii" },
	[P_ALLOC] = { "SELECT nextval('meta_ino_seq'), nextval('meta_gen_seq')", "" },
	[P_COUNTER_GET] = { "SELECT value FROM meta_counters WHERE name = $1", "t" },
	[P_COUNTER_ADD] = { "INSERT INTO meta_counters (name, value) VALUES ($1, $2)"
		" ON CONFLICT (name) DO UPDATE SET value = meta_counters.value + $2", "ti" },
	[P_COUNTER_SET] = { "INSERT INTO meta_counters (name, value) VALUES ($1, $2)"
		" ON CONFLICT (name) DO UPDATE SET value = $2", "ti" },
	/* The statistics (stat_counter()): a base row plus one part per
	 * connection. */
	[P_PART_GET] = { "SELECT (COALESCE((SELECT value FROM meta_counters WHERE name = $1), 0)"
		" + COALESCE((SELECT SUM(value) FROM meta_counter_parts WHERE name = $1), 0))::bigint",
		"t" },
	[P_PART_ADD] = { "INSERT INTO meta_counter_parts (name, part, value) VALUES ($1, $3, $2)"
		" ON CONFLICT (name, part) DO UPDATE SET value = meta_counter_parts.value + $2",
		"tii" },
	[P_PART_CLEAR] = { "DELETE FROM meta_counter_parts WHERE name = $1", "t" },
	[P_GC_PUSH] = { "INSERT INTO meta_gc_queue (ino, chunk_from, chunk_to, chunk_size,"
		" stripe, table_len, seed) VALUES ($1, $2, $3, $4, $5, $6, $7)", "iiiiiii" },
	[P_GC_POP] = { "SELECT " GC_COLS " FROM meta_gc_queue ORDER BY id LIMIT $1", "i" },
	[P_GC_POP_INO] = { "SELECT " GC_COLS " FROM meta_gc_queue WHERE ino = $2"
		" ORDER BY id LIMIT $1", "ii" },
	[P_GC_ACK] = { "DELETE FROM meta_gc_queue WHERE id = $1", "i" },
	[P_LIST_INODES] = { "SELECT " INODE_COLS ", ino FROM meta_inodes WHERE ino > $1"
		" ORDER BY ino LIMIT $2", "ii" },
	/* Names are COLLATE "C": byte order, whatever the database's locale. */
	[P_LIST_COUNTERS] = { "SELECT name, SUM(value)::bigint FROM (SELECT name, value FROM"
		" meta_counters UNION ALL SELECT name, value FROM meta_counter_parts) c"
		" WHERE name > $1 GROUP BY name ORDER BY name LIMIT $2", "ti" },
	[P_GC_LIST] = { "SELECT " GC_COLS " FROM meta_gc_queue WHERE id > $1 ORDER BY id"
		" LIMIT $2", "ii" },
	[P_ALLOC_PEEK] = { "SELECT " SEQ_LAST("meta_ino_seq") ", " SEQ_LAST("meta_gen_seq"), "" },
	[P_ALLOC_RESERVE] = { "SELECT setval('meta_ino_seq', GREATEST($1, "
		SEQ_LAST("meta_ino_seq") ", 1)), setval('meta_gen_seq', GREATEST($2, "
		SEQ_LAST("meta_gen_seq") ", 1))", "ii" },
	/* Held by the session until it ends: not undone by a rollback. */
	[P_GC_CLAIM] = { "SELECT pg_try_advisory_lock(" GC_LOCK_KEY ")", "" },
	[P_REQ_GET] = { "SELECT at_ms, ret, outcome FROM meta_requests WHERE client = $1"
		" AND seq = $2", "ii" },
	/* A duplicate is a concurrent transaction's record: no row. */
	[P_REQ_PUT] = { "INSERT INTO meta_requests (client, seq, at_ms, ret, outcome) VALUES"
		" ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING", "iiiib" },
	[P_REQ_PRUNE] = { "DELETE FROM meta_requests WHERE ctid IN (SELECT ctid FROM"
		" meta_requests WHERE at_ms < $1 LIMIT $2)", "ii" },
};

/*
 * The schema, as ordered migrations: migrations[i] takes a database from
 * version i to i + 1, in one transaction with the version bump. Version 1
 * is the SQLite schema 3 (generations, quotas) with sequences for the
 * allocation state. schema_version has a row per component, so the mgmt
 * tables may live in the same database later with their own versions.
 */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE meta_inodes ("
	" ino bigint PRIMARY KEY, mode bigint NOT NULL, uid bigint NOT NULL,"
	" gid bigint NOT NULL, nlink bigint NOT NULL, size bigint NOT NULL,"
	" atime bigint NOT NULL, mtime bigint NOT NULL, ctime bigint NOT NULL,"
	" parent bigint NOT NULL, chunk_size bigint NOT NULL, stripe bigint NOT NULL,"
	" table_len bigint NOT NULL, seed bigint NOT NULL, gen bigint NOT NULL DEFAULT 1,"
	" target bytea);"
	"CREATE TABLE meta_dentries ("
	" parent bigint NOT NULL, name bytea NOT NULL, ino bigint NOT NULL,"
	" type bigint NOT NULL, PRIMARY KEY (parent, name));"
	"CREATE INDEX meta_dentries_ino ON meta_dentries (parent, ino);"
	"CREATE TABLE meta_gc_queue ("
	" id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ino bigint NOT NULL,"
	" chunk_from bigint NOT NULL, chunk_to bigint NOT NULL,"
	" chunk_size bigint NOT NULL, stripe bigint NOT NULL,"
	" table_len bigint NOT NULL, seed bigint NOT NULL);"
	"CREATE INDEX meta_gc_queue_ino ON meta_gc_queue (ino);"
	"CREATE TABLE meta_counters ("
	" name text COLLATE \"C\" PRIMARY KEY, value bigint NOT NULL);"
	"CREATE TABLE meta_quotas ("
	" ino bigint PRIMARY KEY, max_bytes bigint NOT NULL, max_inodes bigint NOT NULL,"
	" bytes bigint NOT NULL, inodes bigint NOT NULL);"
	/* 1 is the root's number and generation, made by the namespace. */
	"CREATE SEQUENCE meta_ino_seq START 2;"
	"CREATE SEQUENCE meta_gen_seq START 2;",
	/* 1 -> 2: the statistics' parts (stat_counter()). */
	"CREATE TABLE meta_counter_parts ("
	" name text COLLATE \"C\" NOT NULL, part bigint NOT NULL, value bigint NOT NULL,"
	" PRIMARY KEY (name, part));",
	/* 2 -> 3: request ids' outcomes (meta_store.h, req_get). */
	"CREATE TABLE meta_requests ("
	" client bigint NOT NULL, seq bigint NOT NULL, at_ms bigint NOT NULL,"
	" ret bigint NOT NULL, outcome bytea NOT NULL, PRIMARY KEY (client, seq));"
	"CREATE INDEX meta_requests_at ON meta_requests (at_ms);",
	/* 3 -> 4: the bytes of small files (meta_store.h, get_inline). */
	"CREATE TABLE meta_inline ("
	" ino bigint PRIMARY KEY, data bytea NOT NULL);",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

struct pg_store {
	PGconn *conn;
	char *conninfo;
	char *passfile;
	struct meta_store_pg_opts o;
	char where[192];	/* "database 'db' on host:port", for logs */
	bool prepared;		/* the statements exist on this connection */
	bool in_txn;
	bool lost;		/* the connection broke: reconnect at begin() */
	uint64_t retry_at_ms;	/* no reconnect before (mono_ms) */
	bool gc_held;		/* this session holds GC_LOCK_KEY */
	int64_t part;		/* this store's part of the statistics (stat_counter) */
};

/* Parameters of one statement, in binary format. */
struct args {
	int n;
	const char *val[MAX_PARAMS];
	int len[MAX_PARAMS];
	int fmt[MAX_PARAMS];
	uint64_t be[MAX_PARAMS];
};

static void arg_i64(struct args *a, int64_t v)
{
	a->be[a->n] = htobe64((uint64_t)v);
	a->val[a->n] = (const char *)&a->be[a->n];
	a->len[a->n] = 8;
	a->fmt[a->n++] = 1;
}

/* bytea or text: the bytes themselves (text's binary form is its bytes). */
static void arg_bytes(struct args *a, const void *p, size_t len)
{
	a->val[a->n] = len ? p : "";
	a->len[a->n] = (int)len;
	a->fmt[a->n++] = 1;
}

static void arg_str(struct args *a, const char *s)
{
	arg_bytes(a, s, strlen(s));
}

static int64_t col_i64(const PGresult *r, int row, int col)
{
	uint64_t v = 0;

	if (PQgetisnull(r, row, col) || PQgetlength(r, row, col) != 8)
		return 0;
	memcpy(&v, PQgetvalue(r, row, col), 8);
	return (int64_t)be64toh(v);
}

/* Copies a bytea or text column into buf (cap bytes, NUL-terminated,
 * truncated if short); returns its full length. */
static size_t col_bytes(const PGresult *r, int row, int col, char *buf, size_t cap)
{
	size_t n = PQgetisnull(r, row, col) ? 0 : (size_t)PQgetlength(r, row, col);

	if (cap) {
		size_t c = n < cap - 1 ? n : cap - 1;

		if (c)
			memcpy(buf, PQgetvalue(r, row, col), c);
		buf[c] = '\0';
	}
	return n;
}


/* Marks the connection lost when libpq says so; logs it once. */
static bool check_lost(struct pg_store *s)
{
	if (s->conn && PQstatus(s->conn) == CONNECTION_OK)
		return false;
	if (!s->lost) {
		char msg[256];

		log_error(COMP, "%s: connection lost: %s; reconnecting at the next request",
			  s->where, s->conn ? pg_conn_one_line(PQerrorMessage(s->conn), msg, sizeof(msg)) :
			  "no connection");
	}
	s->lost = true;
	s->prepared = false;
	s->in_txn = false;
	s->gc_held = false;	/* the session, and its lock, are gone */
	return true;
}

/*
 * The errno of a failed result: -EBUSY for a conflict to retry, -EEXIST
 * for a duplicate key, -EIO otherwise (logged) and on a lost connection.
 */
static int map_result(struct pg_store *s, const PGresult *r, const char *what)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;

	if (check_lost(s))
		return -EIO;
	if (state) {
		if (!strcmp(state, "40001") || !strcmp(state, "40P01") ||
		    !strcmp(state, "55P03"))
			return -EBUSY;
		if (!strcmp(state, "23505"))
			return -EEXIST;
		if (!strcmp(state, "53100"))
			return -ENOSPC;
		if (!strcmp(state, "25006"))
			return -EROFS;
	}
	{
		char msg[256];

		log_error(COMP, "%s: %s failed: %s", s->where, what, pg_conn_one_line(r ?
			  PQresultErrorMessage(r) : PQerrorMessage(s->conn), msg, sizeof(msg)));
	}
	return -EIO;
}

/* Runs statement id; *out gets the result on success (PQclear it). */
static int run(struct pg_store *s, enum pst id, const struct args *a, const char *what,
	       PGresult **out)
{
	char name[16];
	PGresult *r;
	ExecStatusType st;
	int err;

	*out = NULL;
	if (s->lost || !s->prepared)
		return -EIO;
	snprintf(name, sizeof(name), "m%d", (int)id);
	r = PQexecPrepared(s->conn, name, a ? a->n : 0, a ? a->val : NULL, a ? a->len : NULL,
			   a ? a->fmt : NULL, 1);
	st = PQresultStatus(r);
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		*out = r;
		return 0;
	}
	err = map_result(s, r, what);
	PQclear(r);
	return err;
}

/* Runs a statement for its row count. */
static int run_count(struct pg_store *s, enum pst id, const struct args *a, const char *what)
{
	PGresult *r;
	int err = run(s, id, a, what, &r);

	if (!err) {
		err = (int)strtol(PQcmdTuples(r), NULL, 10);
		PQclear(r);
	}
	return err;
}

/* Runs SQL text without parameters (transaction control, set-up). */
static int exec_sql(struct pg_store *s, const char *sql, const char *what)
{
	PGresult *r = PQexec(s->conn, sql);
	ExecStatusType st = PQresultStatus(r);
	int err = 0;

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		err = map_result(s, r, what);
	PQclear(r);
	return err;
}

static int prepare_all(struct pg_store *s)
{
	for (int i = 0; i < P_COUNT; i++) {
		Oid types[MAX_PARAMS];
		int n = (int)strlen(pstmts[i].types);
		char name[16];
		PGresult *r;

		for (int k = 0; k < n; k++)
			types[k] = pstmts[i].types[k] == 'i' ? OID_INT8 :
				   pstmts[i].types[k] == 'b' ? OID_BYTEA : OID_TEXT;
		snprintf(name, sizeof(name), "m%d", i);
		r = PQprepare(s->conn, name, pstmts[i].sql, n, types);
		if (PQresultStatus(r) != PGRES_COMMAND_OK) {
			int err = map_result(s, r, "preparing a statement");

			log_error(COMP, "%s: statement %d: %s", s->where, i, pstmts[i].sql);
			PQclear(r);
			return err == -EBUSY ? -EIO : err;
		}
		PQclear(r);
	}
	s->prepared = true;
	return 0;
}

/* ---- transactions ---- */

static int set_timeout(struct pg_store *s)
{
	char sql[64];

	snprintf(sql, sizeof(sql), "SET statement_timeout = %u", s->o.statement_timeout_ms);
	return exec_sql(s, sql, "setting the statement timeout");
}

/* (Re)connects and prepares after a loss. */
static int reconnect(struct pg_store *s)
{
	int err;

	if (mono_ms() < s->retry_at_ms)
		return -EIO;
	PQreset(s->conn);
	if (PQstatus(s->conn) != CONNECTION_OK) {
		char msg[256];

		s->retry_at_ms = mono_ms() + RECONNECT_BACKOFF_MS;
		log_warn_limited(COMP, "%s: cannot reconnect: %s", s->where,
				 pg_conn_one_line(PQerrorMessage(s->conn), msg, sizeof(msg)));
		return -EIO;
	}
	s->lost = false;
	s->gc_held = false;	/* a new session holds no lock */
	err = set_timeout(s);
	if (!err)
		err = prepare_all(s);
	if (err)
		return err;
	log_info(COMP, "%s: reconnected", s->where);
	return 0;
}

static int pg_begin(void *impl, bool write)
{
	struct pg_store *s = impl;
	const char *sql = write ? "BEGIN ISOLATION LEVEL SERIALIZABLE" :
			  "BEGIN ISOLATION LEVEL REPEATABLE READ";
	int err;

	if (s->in_txn) {
		log_error(COMP, "%s: nested transaction", s->where);
		return -EINVAL;
	}
	if (s->lost || PQstatus(s->conn) != CONNECTION_OK || !s->prepared) {
		err = reconnect(s);
		if (err)
			return err;
	}
	err = exec_sql(s, sql, "begin");
	/* An idle connection learns that the server went away (a restart,
	 * a failover) only now, before anything was done: connect again and
	 * go on, once, so the caller never sees it. */
	if (err && s->lost) {
		err = reconnect(s);
		if (!err)
			err = exec_sql(s, sql, "begin");
	}
	if (!err)
		s->in_txn = true;
	return err;
}

static int pg_commit(void *impl)
{
	struct pg_store *s = impl;
	int err = exec_sql(s, "COMMIT", "commit");

	/* A failed COMMIT ends the transaction (the server rolled it back). */
	s->in_txn = false;
	return err;
}

static void pg_rollback(void *impl)
{
	struct pg_store *s = impl;

	if (!s->lost && PQtransactionStatus(s->conn) != PQTRANS_IDLE)
		(void)exec_sql(s, "ROLLBACK", "rollback");
	s->in_txn = false;
}

/* Savepoints of a group (ns_group_begin). A failed statement leaves the
 * transaction aborted until ROLLBACK TO: the undo sends it and the release
 * in one round trip. */
static int pg_sp_mark(void *impl)
{
	return exec_sql(impl, "SAVEPOINT g", "savepoint");
}

static int pg_sp_keep(void *impl)
{
	return exec_sql(impl, "RELEASE SAVEPOINT g", "release savepoint");
}

static int pg_sp_undo(void *impl)
{
	return exec_sql(impl, "ROLLBACK TO SAVEPOINT g; RELEASE SAVEPOINT g",
			"rollback to savepoint");
}

/* ---- inodes ---- */

static void inode_row(const PGresult *r, int row, int col, struct meta_inode *out)
{
	out->mode = (uint32_t)col_i64(r, row, col + 0);
	out->uid = (uint32_t)col_i64(r, row, col + 1);
	out->gid = (uint32_t)col_i64(r, row, col + 2);
	out->nlink = (uint32_t)col_i64(r, row, col + 3);
	out->size = (uint64_t)col_i64(r, row, col + 4);
	out->atime_ns = col_i64(r, row, col + 5);
	out->mtime_ns = col_i64(r, row, col + 6);
	out->ctime_ns = col_i64(r, row, col + 7);
	out->parent = (uint64_t)col_i64(r, row, col + 8);
	out->layout.chunk_size = (uint32_t)col_i64(r, row, col + 9);
	out->layout.stripe = (uint32_t)col_i64(r, row, col + 10);
	out->layout.table_len = (uint32_t)col_i64(r, row, col + 11);
	out->layout.seed = (uint64_t)col_i64(r, row, col + 12);
	out->gen = (uint64_t)col_i64(r, row, col + 13);
}

static int pg_get_inode(void *impl, uint64_t ino, struct meta_inode *out)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, (int64_t)ino);
	err = run(impl, P_GET_INODE, &a, "get inode", &r);
	if (err)
		return err;
	if (PQntuples(r) == 1) {
		memset(out, 0, sizeof(*out));
		out->ino = ino;
		inode_row(r, 0, 0, out);
	} else {
		err = -ENOENT;
	}
	PQclear(r);
	return err;
}

static int pg_put_inode(void *impl, const struct meta_inode *in)
{
	struct args a = { 0 };
	int n;

	arg_i64(&a, (int64_t)in->ino);
	arg_i64(&a, in->mode);
	arg_i64(&a, in->uid);
	arg_i64(&a, in->gid);
	arg_i64(&a, in->nlink);
	arg_i64(&a, (int64_t)in->size);
	arg_i64(&a, in->atime_ns);
	arg_i64(&a, in->mtime_ns);
	arg_i64(&a, in->ctime_ns);
	arg_i64(&a, (int64_t)in->parent);
	arg_i64(&a, in->layout.chunk_size);
	arg_i64(&a, in->layout.stripe);
	arg_i64(&a, in->layout.table_len);
	arg_i64(&a, (int64_t)in->layout.seed);
	arg_i64(&a, (int64_t)in->gen);
	n = run_count(impl, P_PUT_INODE, &a, "put inode");
	return n < 0 ? n : 0;
}

/* A write keyed by one number: -ENOENT when it touched no row. */
static int write_by_id(struct pg_store *s, enum pst id, uint64_t key, const char *what)
{
	struct args a = { 0 };
	int n;

	arg_i64(&a, (int64_t)key);
	n = run_count(s, id, &a, what);
	return n < 0 ? n : n == 0 ? -ENOENT : 0;
}

static int pg_del_inline(void *impl, uint64_t ino)
{
	int err = write_by_id(impl, P_DEL_INLINE, ino, "delete inline data");

	return err == -ENOENT ? 0 : err;
}

static int pg_del_inode(void *impl, uint64_t ino)
{
	int err = pg_del_inline(impl, ino);

	return err ? err : write_by_id(impl, P_DEL_INODE, ino, "delete inode");
}

static int pg_put_inline(void *impl, uint64_t ino, const uint8_t *data, size_t len)
{
	struct args a = { 0 };
	int n;

	if (len > META_INLINE_MAX)
		return -EFBIG;
	arg_i64(&a, (int64_t)ino);
	arg_bytes(&a, data, len);
	n = run_count(impl, P_PUT_INLINE, &a, "put inline data");
	return n < 0 ? n : 0;
}

static int pg_get_inline(void *impl, uint64_t ino, uint8_t *buf, size_t cap)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, (int64_t)ino);
	err = run(impl, P_GET_INLINE, &a, "get inline data", &r);
	if (err)
		return err;
	if (PQntuples(r) == 1) {
		size_t n = PQgetisnull(r, 0, 0) ? 0 : (size_t)PQgetlength(r, 0, 0);
		size_t c = n < cap ? n : cap;

		if (c)
			memcpy(buf, PQgetvalue(r, 0, 0), c);
		err = (int)n;
	} else {
		err = -ENOENT;
	}
	PQclear(r);
	return err;
}

static int pg_put_link(void *impl, uint64_t ino, const char *target, size_t len)
{
	struct args a = { 0 };
	int n;

	arg_i64(&a, (int64_t)ino);
	arg_bytes(&a, target, len);
	n = run_count(impl, P_PUT_LINK, &a, "put link");
	return n < 0 ? n : n == 0 ? -ENOENT : 0;
}

static int pg_get_link(void *impl, uint64_t ino, char *buf, size_t cap)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, (int64_t)ino);
	err = run(impl, P_GET_LINK, &a, "get link", &r);
	if (err)
		return err;
	err = PQntuples(r) == 1 ? (int)col_bytes(r, 0, 0, buf, cap) : -ENOENT;
	PQclear(r);
	return err;
}

/* ---- directory entries ---- */

static int pg_get_dentry(void *impl, uint64_t parent, const char *name, uint64_t *ino,
			 uint32_t *type)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, (int64_t)parent);
	arg_str(&a, name);
	err = run(impl, P_GET_DENTRY, &a, "get dentry", &r);
	if (err)
		return err;
	if (PQntuples(r) == 1) {
		if (ino)
			*ino = (uint64_t)col_i64(r, 0, 0);
		if (type)
			*type = (uint32_t)col_i64(r, 0, 1);
	} else {
		err = -ENOENT;
	}
	PQclear(r);
	return err;
}

static int pg_put_dentry(void *impl, uint64_t parent, const char *name, uint64_t ino,
			 uint32_t type)
{
	struct args a = { 0 };
	int n;

	arg_i64(&a, (int64_t)parent);
	arg_str(&a, name);
	arg_i64(&a, (int64_t)ino);
	arg_i64(&a, type);
	n = run_count(impl, P_PUT_DENTRY, &a, "put dentry");
	return n < 0 ? n : n == 0 ? -EEXIST : 0;
}

static int pg_del_dentry(void *impl, uint64_t parent, const char *name)
{
	struct args a = { 0 };
	int n;

	arg_i64(&a, (int64_t)parent);
	arg_str(&a, name);
	n = run_count(impl, P_DEL_DENTRY, &a, "delete dentry");
	return n < 0 ? n : n == 0 ? -ENOENT : 0;
}

static int pg_list_dentries(void *impl, uint64_t dir, const char *after, uint32_t max,
			    meta_dentry_cb cb, void *arg)
{
	struct pg_store *s = impl;
	bool from_start = !after || !after[0];
	struct args a = { 0 };
	char name[256];
	PGresult *r;
	int rows, ret;

	arg_i64(&a, (int64_t)dir);
	arg_i64(&a, max);
	if (!from_start)
		arg_str(&a, after);
	ret = run(s, from_start ? P_LIST_FIRST : P_LIST_AFTER, &a, "list dentries", &r);
	if (ret)
		return ret;
	rows = PQntuples(r);
	for (int i = 0; i < rows; i++) {
		size_t len = col_bytes(r, i, 0, name, sizeof(name));

		if (len == 0 || len >= sizeof(name)) {
			log_error(COMP, "%s: bad entry name in directory %llu", s->where,
				  (unsigned long long)dir);
			ret = -EIO;
			goto out;
		}
		ret = cb(arg, name, (uint64_t)col_i64(r, i, 1), (uint32_t)col_i64(r, i, 2));
		if (ret)
			goto out;
	}
	ret = rows;
out:
	PQclear(r);
	return ret;
}

static int pg_get_name(void *impl, uint64_t parent, uint64_t ino, char *buf, size_t cap)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, (int64_t)parent);
	arg_i64(&a, (int64_t)ino);
	err = run(impl, P_GET_NAME, &a, "get name", &r);
	if (err)
		return err;
	if (PQntuples(r) == 1)
		(void)col_bytes(r, 0, 0, buf, cap);
	else
		err = -ENOENT;
	PQclear(r);
	return err;
}

/* ---- quotas ---- */

static void quota_row(const PGresult *r, int row, int col, struct meta_quota *q)
{
	q->max_bytes = (uint64_t)col_i64(r, row, col);
	q->max_inodes = (uint64_t)col_i64(r, row, col + 1);
	q->bytes = (uint64_t)col_i64(r, row, col + 2);
	q->inodes = (uint64_t)col_i64(r, row, col + 3);
}

static int pg_get_quota(void *impl, uint64_t ino, struct meta_quota *out)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, (int64_t)ino);
	err = run(impl, P_GET_QUOTA, &a, "get quota", &r);
	if (err)
		return err;
	if (PQntuples(r) == 1) {
		out->ino = ino;
		quota_row(r, 0, 0, out);
	} else {
		err = -ENOENT;
	}
	PQclear(r);
	return err;
}

static int pg_put_quota(void *impl, const struct meta_quota *q)
{
	struct args a = { 0 };
	int n;

	arg_i64(&a, (int64_t)q->ino);
	arg_i64(&a, (int64_t)q->max_bytes);
	arg_i64(&a, (int64_t)q->max_inodes);
	arg_i64(&a, (int64_t)q->bytes);
	arg_i64(&a, (int64_t)q->inodes);
	n = run_count(impl, P_PUT_QUOTA, &a, "put quota");
	return n < 0 ? n : 0;
}

static int pg_del_quota(void *impl, uint64_t ino)
{
	return write_by_id(impl, P_DEL_QUOTA, ino, "delete quota");
}

/* Runs a listing statement keyed by (after, max): a PGresult of at most
 * max rows, or an error. */
static int list_rows(struct pg_store *s, enum pst id, uint64_t after, uint32_t max,
		     const char *what, PGresult **r)
{
	struct args a = { 0 };

	arg_i64(&a, (int64_t)after);
	arg_i64(&a, max);
	return run(s, id, &a, what, r);
}

static int pg_list_quotas(void *impl, uint64_t after, struct meta_quota *out, uint32_t max)
{
	PGresult *r;
	int n, err = list_rows(impl, P_LIST_QUOTAS, after, max, "list quotas", &r);

	if (err)
		return err;
	n = PQntuples(r);
	for (int i = 0; i < n; i++) {
		out[i].ino = (uint64_t)col_i64(r, i, 0);
		quota_row(r, i, 1, &out[i]);
	}
	PQclear(r);
	return n;
}

/* ---- allocation and counters ---- */

/* A statement returning one row of two int8 columns. */
static int two_values(struct pg_store *s, enum pst id, const struct args *a, const char *what,
		      uint64_t *x, uint64_t *y)
{
	PGresult *r;
	int err = run(s, id, a, what, &r);

	if (err)
		return err;
	if (PQntuples(r) == 1 && PQnfields(r) == 2) {
		*x = (uint64_t)col_i64(r, 0, 0);
		*y = (uint64_t)col_i64(r, 0, 1);
	} else {
		log_error(COMP, "%s: %s returned no row", s->where, what);
		err = -EIO;
	}
	PQclear(r);
	return err;
}

static int pg_alloc_ino(void *impl, uint64_t *ino, uint64_t *gen)
{
	return two_values(impl, P_ALLOC, NULL, "allocate an inode", ino, gen);
}

static int pg_alloc_peek(void *impl, uint64_t *ino, uint64_t *gen)
{
	return two_values(impl, P_ALLOC_PEEK, NULL, "read the allocation state", ino, gen);
}

static int pg_alloc_reserve(void *impl, uint64_t ino, uint64_t gen)
{
	struct args a = { 0 };
	uint64_t x, y;

	arg_i64(&a, (int64_t)ino);
	arg_i64(&a, (int64_t)gen);
	return two_values(impl, P_ALLOC_RESERVE, &a, "set the allocation state", &x, &y);
}

/*
 * The statistics: "inodes" and "bytes" change with every create, unlink
 * and size change, and are read only by statfs (a read-only transaction).
 * One row each would make every two such writes of different meta servers
 * a serialization failure (SERIALIZABLE: the first updater wins), retried
 * until the retries run out under load. So each store adds to its own
 * part (meta_counter_parts, `part` chosen at random when it opens, one of
 * STAT_PARTS) and a read sums the base row and the parts. Counters read
 * by write transactions (table_len, quotas) keep one row: a read of the
 * parts there would conflict with every part written.
 */
#define STAT_PARTS 4096
static bool stat_counter(const char *name)
{
	return !strcmp(name, "inodes") || !strcmp(name, "bytes");
}

static int pg_counter_get(void *impl, const char *name, int64_t *out)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_str(&a, name);
	err = run(impl, stat_counter(name) ? P_PART_GET : P_COUNTER_GET, &a, "get counter", &r);
	if (err)
		return err;
	*out = PQntuples(r) == 1 ? col_i64(r, 0, 0) : 0;
	PQclear(r);
	return 0;
}

static int counter_write(struct pg_store *s, enum pst id, const char *name, int64_t v)
{
	struct args a = { 0 };
	int n;

	arg_str(&a, name);
	arg_i64(&a, v);
	n = run_count(s, id, &a, "update counter");
	return n < 0 ? n : 0;
}

static int pg_counter_add(void *impl, const char *name, int64_t delta)
{
	struct pg_store *s = impl;
	struct args a = { 0 };
	int n;

	if (!stat_counter(name))
		return counter_write(s, P_COUNTER_ADD, name, delta);
	arg_str(&a, name);
	arg_i64(&a, delta);
	arg_i64(&a, s->part);
	n = run_count(s, P_PART_ADD, &a, "update counter");
	return n < 0 ? n : 0;
}

static int pg_counter_set(void *impl, const char *name, int64_t value)
{
	struct args a = { 0 };
	int n;

	if (stat_counter(name)) {
		arg_str(&a, name);
		n = run_count(impl, P_PART_CLEAR, &a, "update counter");
		if (n < 0)
			return n;
	}
	return counter_write(impl, P_COUNTER_SET, name, value);
}

static int pg_list_counters(void *impl, const char *after, struct meta_counter *out,
			    uint32_t max)
{
	struct pg_store *s = impl;
	struct args a = { 0 };
	PGresult *r;
	int n, err;

	arg_str(&a, after ? after : "");
	arg_i64(&a, max);
	err = run(s, P_LIST_COUNTERS, &a, "list counters", &r);
	if (err)
		return err;
	n = PQntuples(r);
	for (int i = 0; i < n; i++) {
		if (col_bytes(r, i, 0, out[i].name, sizeof(out[i].name)) >=
		    sizeof(out[i].name)) {
			log_error(COMP, "%s: counter name too long", s->where);
			n = -EIO;
			break;
		}
		out[i].value = col_i64(r, i, 1);
	}
	PQclear(r);
	return n;
}

/* ---- gc queue ---- */

static int pg_gc_push(void *impl, uint64_t ino, uint64_t from, uint64_t to,
		      const struct file_layout *l)
{
	struct args a = { 0 };
	int n;

	arg_i64(&a, (int64_t)ino);
	arg_i64(&a, (int64_t)from);
	arg_i64(&a, (int64_t)to);
	arg_i64(&a, l->chunk_size);
	arg_i64(&a, l->stripe);
	arg_i64(&a, l->table_len);
	arg_i64(&a, (int64_t)l->seed);
	n = run_count(impl, P_GC_PUSH, &a, "push gc item");
	return n < 0 ? n : 0;
}

static int gc_rows(PGresult *r, struct meta_gc_item *out)
{
	int n = PQntuples(r);

	for (int i = 0; i < n; i++) {
		struct meta_gc_item *it = &out[i];

		memset(it, 0, sizeof(*it));
		it->id = (uint64_t)col_i64(r, i, 0);
		it->ino = (uint64_t)col_i64(r, i, 1);
		it->from = (uint64_t)col_i64(r, i, 2);
		it->to = (uint64_t)col_i64(r, i, 3);
		it->layout.chunk_size = (uint32_t)col_i64(r, i, 4);
		it->layout.stripe = (uint32_t)col_i64(r, i, 5);
		it->layout.table_len = (uint32_t)col_i64(r, i, 6);
		it->layout.seed = (uint64_t)col_i64(r, i, 7);
	}
	PQclear(r);
	return n;
}

static int pg_gc_pop(void *impl, uint64_t ino, struct meta_gc_item *out, uint32_t max)
{
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, max);
	if (ino)
		arg_i64(&a, (int64_t)ino);
	err = run(impl, ino ? P_GC_POP_INO : P_GC_POP, &a, "pop gc items", &r);
	return err ? err : gc_rows(r, out);
}

static int pg_gc_list(void *impl, uint64_t after, struct meta_gc_item *out, uint32_t max)
{
	PGresult *r;
	int err = list_rows(impl, P_GC_LIST, after, max, "list gc items", &r);

	return err ? err : gc_rows(r, out);
}

static int pg_gc_ack(void *impl, uint64_t id)
{
	int err = write_by_id(impl, P_GC_ACK, id, "ack gc item");

	return err == -ENOENT ? 0 : err;
}

static int pg_gc_claim(void *impl, bool *held)
{
	struct pg_store *s = impl;
	PGresult *r;
	int err;

	if (!s->gc_held) {
		err = run(s, P_GC_CLAIM, NULL, "claim the gc role", &r);
		if (err)
			return err;
		/* A bool in binary: one byte. */
		s->gc_held = PQntuples(r) == 1 && PQgetlength(r, 0, 0) == 1 &&
			     PQgetvalue(r, 0, 0)[0] != 0;
		PQclear(r);
	}
	*held = s->gc_held;
	return 0;
}

/* ---- request ids ---- */

static int pg_req_get(void *impl, uint64_t client, uint64_t seq, struct meta_req *out)
{
	struct pg_store *s = impl;
	struct args a = { 0 };
	PGresult *r;
	int err;

	arg_i64(&a, (int64_t)client);
	arg_i64(&a, (int64_t)seq);
	err = run(s, P_REQ_GET, &a, "get request", &r);
	if (err)
		return err;
	if (PQntuples(r) != 1) {
		err = -ENOENT;
	} else if (PQgetlength(r, 0, 2) > META_REQ_OUT_MAX) {
		log_error(COMP, "%s: request %llx:%llu has an outcome of %d bytes, more than %d",
			  s->where, (unsigned long long)client, (unsigned long long)seq,
			  PQgetlength(r, 0, 2), META_REQ_OUT_MAX);
		err = -EIO;
	} else {
		out->client = client;
		out->seq = seq;
		out->at_ms = col_i64(r, 0, 0);
		out->ret = (int32_t)col_i64(r, 0, 1);
		out->len = (uint32_t)PQgetlength(r, 0, 2);
		if (out->len)
			memcpy(out->out, PQgetvalue(r, 0, 2), out->len);
	}
	PQclear(r);
	return err;
}

static int pg_req_put(void *impl, const struct meta_req *rq)
{
	struct args a = { 0 };
	int n;

	if (rq->len > META_REQ_OUT_MAX)
		return -EINVAL;
	arg_i64(&a, (int64_t)rq->client);
	arg_i64(&a, (int64_t)rq->seq);
	arg_i64(&a, rq->at_ms);
	arg_i64(&a, rq->ret);
	arg_bytes(&a, rq->out, rq->len);
	n = run_count(impl, P_REQ_PUT, &a, "put request");
	return n < 0 ? n : n == 0 ? -EBUSY : 0;
}

static int pg_req_prune(void *impl, int64_t before_ms, uint32_t max)
{
	struct args a = { 0 };

	arg_i64(&a, before_ms);
	arg_i64(&a, max);
	return run_count(impl, P_REQ_PRUNE, &a, "prune requests");
}

static int pg_list_inodes(void *impl, uint64_t after, struct meta_inode *out, uint32_t max)
{
	PGresult *r;
	int n, err = list_rows(impl, P_LIST_INODES, after, max, "list inodes", &r);

	if (err)
		return err;
	n = PQntuples(r);
	for (int i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		inode_row(r, i, 0, &out[i]);
		out[i].ino = (uint64_t)col_i64(r, i, 14);
	}
	PQclear(r);
	return n;
}

static void pg_close(void *impl)
{
	struct pg_store *s = impl;

	if (!s)
		return;
	if (s->conn)
		PQfinish(s->conn);
	free(s->conninfo);
	free(s->passfile);
	free(s);
}

static const struct meta_store_ops pg_ops = {
	.begin = pg_begin,
	.commit = pg_commit,
	.rollback = pg_rollback,
	.sp_mark = pg_sp_mark,
	.sp_keep = pg_sp_keep,
	.sp_undo = pg_sp_undo,
	.get_inode = pg_get_inode,
	.put_inode = pg_put_inode,
	.del_inode = pg_del_inode,
	.get_inline = pg_get_inline,
	.put_inline = pg_put_inline,
	.del_inline = pg_del_inline,
	.put_link = pg_put_link,
	.get_link = pg_get_link,
	.get_dentry = pg_get_dentry,
	.put_dentry = pg_put_dentry,
	.del_dentry = pg_del_dentry,
	.list_dentries = pg_list_dentries,
	.get_name = pg_get_name,
	.get_quota = pg_get_quota,
	.put_quota = pg_put_quota,
	.del_quota = pg_del_quota,
	.list_quotas = pg_list_quotas,
	.alloc_ino = pg_alloc_ino,
	.counter_get = pg_counter_get,
	.counter_add = pg_counter_add,
	.counter_set = pg_counter_set,
	.gc_push = pg_gc_push,
	.gc_pop = pg_gc_pop,
	.gc_ack = pg_gc_ack,
	.gc_claim = pg_gc_claim,
	.list_inodes = pg_list_inodes,
	.list_counters = pg_list_counters,
	.gc_list = pg_gc_list,
	.alloc_peek = pg_alloc_peek,
	.alloc_reserve = pg_alloc_reserve,
	.req_get = pg_req_get,
	.req_put = pg_req_put,
	.req_prune = pg_req_prune,
	.close = pg_close,
};

/* ---- opening ---- */

void meta_store_pg_opts_init(struct meta_store_pg_opts *opts, size_t size)
{
	struct meta_store_pg_opts def = {
		.size = sizeof(def),
		.passfile = NULL,
		.connect_timeout_s = 5,
		.statement_timeout_ms = 30000,
	};

	if (size > sizeof(def))
		size = sizeof(def);
	memcpy(opts, &def, size);
	opts->size = size;
}

static int check_passfile(const char *path)
{
	char msg[512];
	int err = pg_conn_check_passfile(path, msg, sizeof(msg));

	if (err)
		log_error(COMP, "%s", msg);
	return err;
}

/* The schema's version for component 'meta' (0: none yet). */
static int schema_version(struct pg_store *s, int *out)
{
	PGresult *r = PQexec(s->conn, "SELECT version FROM schema_version WHERE"
			     " component = 'meta'");
	int err = 0;

	if (PQresultStatus(r) != PGRES_TUPLES_OK) {
		err = map_result(s, r, "reading the schema version");
	} else if (PQntuples(r) == 1) {
		long v = strtol(PQgetvalue(r, 0, 0), NULL, 10);

		*out = (int)v;
	} else {
		*out = 0;
	}
	PQclear(r);
	return err;
}

/* Creates or migrates the schema in one transaction, under an advisory
 * lock: two servers opening a new database do it once. */
static int setup_schema(struct pg_store *s)
{
	char sql[128];
	int v = 0, err;

	err = exec_sql(s, "BEGIN", "begin");
	if (!err)
		err = exec_sql(s, "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK_KEY ")",
			       "taking the schema lock");
	if (!err)
		err = exec_sql(s, "CREATE TABLE IF NOT EXISTS schema_version ("
			       " component text PRIMARY KEY, version integer NOT NULL)",
			       "creating schema_version");
	if (!err)
		err = schema_version(s, &v);
	if (err)
		goto fail;
	if (v > SCHEMA_VERSION) {
		log_error(COMP, "%s has namespace schema version %d, newer than this build's"
			  " (%d); run a newer stratad", s->where, v, SCHEMA_VERSION);
		err = -EIO;
		goto fail;
	}
	for (int i = v; i < SCHEMA_VERSION; i++) {
		err = exec_sql(s, migrations[i], "migrating the schema");
		if (err)
			goto fail;
		log_info(COMP, "%s: namespace schema %d -> %d", s->where, i, i + 1);
	}
	snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES ('meta', %d) ON CONFLICT"
		 " (component) DO UPDATE SET version = %d", SCHEMA_VERSION, SCHEMA_VERSION);
	err = exec_sql(s, sql, "recording the schema version");
	if (!err)
		err = exec_sql(s, "COMMIT", "committing the schema");
	if (err)
		goto fail;
	return 0;
fail:
	if (!s->lost)
		(void)exec_sql(s, "ROLLBACK", "rollback");
	return err ? err : -EIO;
}

static int pg_connect(struct pg_store *s)
{
	struct pg_conn_opts o = { .app = "stratad-meta", .comp = COMP, .key = "meta.store",
				  .passfile = s->passfile,
				  .connect_timeout_s = s->o.connect_timeout_s };

	s->conn = pg_conn_open(s->conninfo, &o, s->where, sizeof(s->where));
	if (!s->conn)
		return -ENOMEM;
	return PQstatus(s->conn) == CONNECTION_OK ? 0 : -EIO;
}

int meta_store_pg_open(const char *conninfo, const struct meta_store_pg_opts *opts,
		       struct meta_store *out)
{
	struct pg_store *s;
	bool want_pf;
	int err;

	out->ops = NULL;
	out->impl = NULL;
	s = calloc(1, sizeof(*s));
	if (s && getrandom(&s->part, sizeof(s->part), 0) == (ssize_t)sizeof(s->part))
		s->part = (int64_t)((uint64_t)s->part % STAT_PARTS);
	else if (s)
		s->part = (int64_t)(mono_ms() % STAT_PARTS);
	if (!s)
		return -ENOMEM;
	meta_store_pg_opts_init(&s->o, sizeof(s->o));
	if (opts)
		memcpy(&s->o, opts, opts->size < sizeof(s->o) ? opts->size : sizeof(s->o));
	s->o.size = sizeof(s->o);
	snprintf(s->where, sizeof(s->where), "PostgreSQL");
	want_pf = s->o.passfile && *s->o.passfile;
	s->conninfo = strdup(conninfo);
	s->passfile = want_pf ? strdup(s->o.passfile) : NULL;
	s->o.passfile = NULL;		/* the caller's; ours is s->passfile */
	if (!s->conninfo || (want_pf && !s->passfile)) {
		err = -ENOMEM;
		goto fail;
	}
	if (s->passfile) {
		err = check_passfile(s->passfile);
		if (err)
			goto fail;
	}
	err = pg_connect(s);
	if (!err)
		err = set_timeout(s);
	if (!err)
		err = setup_schema(s);
	if (!err)
		err = prepare_all(s);
	if (err)
		goto fail;
	log_info(COMP, "%s: namespace schema version %d", s->where, SCHEMA_VERSION);
	out->ops = &pg_ops;
	out->impl = s;
	return 0;
fail:
	pg_close(s);
	return err;
}
