/* The SQLite backend of the composer's store (comp_store.h): DATA/composer.db. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "common/log.h"
#include "composer/comp_store.h"

#define COMP "composer"

struct sq_store {
	sqlite3 *db;
};

static const char schema_sql[] =
	"PRAGMA journal_mode=WAL;"
	"PRAGMA synchronous=NORMAL;"
	"CREATE TABLE IF NOT EXISTS compositions ("
	" seq INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL, name TEXT NOT NULL,"
	" tenant TEXT NOT NULL, state INTEGER NOT NULL, reason TEXT NOT NULL,"
	" gpu_count INTEGER NOT NULL, gpu_model TEXT NOT NULL, same_node INTEGER NOT NULL,"
	" storage INTEGER NOT NULL, memory INTEGER NOT NULL, retain INTEGER NOT NULL,"
	" created INTEGER NOT NULL, changed INTEGER NOT NULL, expires INTEGER NOT NULL,"
	" mem_share INTEGER NOT NULL, mem_nodes INTEGER NOT NULL, token_id TEXT NOT NULL,"
	" gpus TEXT NOT NULL, owner_uid INTEGER NOT NULL DEFAULT 65534,"
	" owner_gid INTEGER NOT NULL DEFAULT 65534, paths TEXT NOT NULL DEFAULT '[]',"
	" qos_mbps INTEGER NOT NULL DEFAULT 0, qos_iops INTEGER NOT NULL DEFAULT 0,"
	" gpu_zone TEXT NOT NULL DEFAULT '', same_zone INTEGER NOT NULL DEFAULT 0,"
	" generation INTEGER NOT NULL DEFAULT 1);"
	/* The GPUs held now: one row per GPU, so one owner per GPU. */
	"CREATE TABLE IF NOT EXISTS comp_gpus ("
	" node INTEGER NOT NULL, gpu INTEGER NOT NULL, comp TEXT NOT NULL,"
	" PRIMARY KEY (node, gpu));"
	/* Bytes moved: one row per sample and tenant (comp_store_add_bytes). */
	"CREATE TABLE IF NOT EXISTS usage_bytes ("
	" at INTEGER NOT NULL, tenant TEXT NOT NULL, read INTEGER NOT NULL,"
	" written INTEGER NOT NULL);"
	"CREATE INDEX IF NOT EXISTS usage_bytes_at ON usage_bytes (at);";

static int db_err(struct sq_store *s, const char *what)
{
	log_error(COMP, "store: %s failed: %s", what, sqlite3_errmsg(s->db));
	return -EIO;
}

/* Columns added after the first release, with what an older row holds:
 * every earlier composition belongs to nobody, reaches only its own
 * volume, has no QoS caps and no zone constraint, as it did, and is at
 * generation 1. */
static const struct {
	const char *name, *ddl;
} added_columns[] = {
	{ "owner_uid", "ALTER TABLE compositions ADD COLUMN owner_uid INTEGER NOT NULL DEFAULT 65534" },
	{ "owner_gid", "ALTER TABLE compositions ADD COLUMN owner_gid INTEGER NOT NULL DEFAULT 65534" },
	{ "paths", "ALTER TABLE compositions ADD COLUMN paths TEXT NOT NULL DEFAULT '[]'" },
	{ "qos_mbps", "ALTER TABLE compositions ADD COLUMN qos_mbps INTEGER NOT NULL DEFAULT 0" },
	{ "qos_iops", "ALTER TABLE compositions ADD COLUMN qos_iops INTEGER NOT NULL DEFAULT 0" },
	{ "gpu_zone", "ALTER TABLE compositions ADD COLUMN gpu_zone TEXT NOT NULL DEFAULT ''" },
	{ "same_zone", "ALTER TABLE compositions ADD COLUMN same_zone INTEGER NOT NULL DEFAULT 0" },
	{ "generation", "ALTER TABLE compositions ADD COLUMN generation INTEGER NOT NULL DEFAULT 1" },
};

/* A store made by an earlier release gains the columns it lacks. 0, or
 * an error with *msg set. */
static int add_missing_columns(struct sq_store *s, char **msg)
{
	for (size_t i = 0; i < sizeof(added_columns) / sizeof(added_columns[0]); i++) {
		sqlite3_stmt *st = NULL;
		bool have;

		if (sqlite3_prepare_v2(s->db, "SELECT 1 FROM pragma_table_info('compositions')"
				       " WHERE name = ?", -1, &st, NULL) != SQLITE_OK) {
			*msg = sqlite3_mprintf("%s", sqlite3_errmsg(s->db));
			return -EIO;
		}
		sqlite3_bind_text(st, 1, added_columns[i].name, -1, SQLITE_STATIC);
		have = sqlite3_step(st) == SQLITE_ROW;
		sqlite3_finalize(st);
		if (!have && sqlite3_exec(s->db, added_columns[i].ddl, NULL, NULL, msg) != SQLITE_OK)
			return -EIO;
	}
	return 0;
}

static const struct comp_store_ops sq_ops;

static void sq_close(void *impl)
{
	struct sq_store *s = impl;

	if (!s)
		return;
	sqlite3_close(s->db);
	free(s);
}

int comp_store_sqlite_open(const char *path, const struct comp_store_ops **ops, void **impl)
{
	struct sq_store *s = calloc(1, sizeof(*s));
	char *msg = NULL;

	if (!s)
		return -ENOMEM;
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		log_error(COMP, "cannot open '%s': %s", path, s->db ? sqlite3_errmsg(s->db) : "");
		sq_close(s);
		return -EIO;
	}
	sqlite3_busy_timeout(s->db, 5000);
	if (sqlite3_exec(s->db, schema_sql, NULL, NULL, &msg) != SQLITE_OK ||
	    add_missing_columns(s, &msg)) {
		log_error(COMP, "cannot set up '%s': %s", path, msg ? msg : "");
		sqlite3_free(msg);
		sq_close(s);
		return -EIO;
	}
	*ops = &sq_ops;
	*impl = s;
	return 0;
}

static const char load_sql[] =
	"SELECT seq, id, name, tenant, state, reason, gpu_count, gpu_model, same_node, storage,"
	" memory, retain, created, changed, expires, mem_share, mem_nodes, token_id, gpus,"
	" owner_uid, owner_gid, paths, qos_mbps, qos_iops, gpu_zone, same_zone, generation"
	" FROM compositions ORDER BY seq";

static void copy_col(sqlite3_stmt *st, int col, char *out, size_t len)
{
	const unsigned char *t = sqlite3_column_text(st, col);

	snprintf(out, len, "%s", t ? (const char *)t : "");
}

static int sq_load(void *impl, struct comp **out, uint32_t *n)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st = NULL;
	struct comp *v = NULL;
	uint32_t cnt = 0, cap = 0;
	int rc = 0, step;

	*out = NULL;
	*n = 0;
	if (sqlite3_prepare_v2(s->db, load_sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "load");
	while ((step = sqlite3_step(st)) == SQLITE_ROW) {
		struct comp *c;
		char gpus[COMP_GPUS_TEXT_MAX];

		if (cnt == cap) {
			struct comp *nv = realloc(v, (cap ? cap * 2 : 64) * sizeof(*v));

			if (!nv) {
				rc = -ENOMEM;
				goto out;
			}
			v = nv;
			cap = cap ? cap * 2 : 64;
		}
		c = &v[cnt++];
		memset(c, 0, sizeof(*c));
		c->seq = (uint64_t)sqlite3_column_int64(st, 0);
		copy_col(st, 1, c->id, sizeof(c->id));
		copy_col(st, 2, c->name, sizeof(c->name));
		copy_col(st, 3, c->tenant, sizeof(c->tenant));
		c->state = (uint32_t)sqlite3_column_int(st, 4);
		copy_col(st, 5, c->reason, sizeof(c->reason));
		c->rq.gpus = (uint32_t)sqlite3_column_int(st, 6);
		copy_col(st, 7, c->rq.model, sizeof(c->rq.model));
		c->rq.same_node = sqlite3_column_int(st, 8) != 0;
		c->rq.storage = (uint64_t)sqlite3_column_int64(st, 9);
		c->rq.memory = (uint64_t)sqlite3_column_int64(st, 10);
		c->retain = sqlite3_column_int(st, 11) != 0;
		c->created = sqlite3_column_int64(st, 12);
		c->changed = sqlite3_column_int64(st, 13);
		c->expires = sqlite3_column_int64(st, 14);
		c->mem_share = (uint64_t)sqlite3_column_int64(st, 15);
		c->mem_nodes = (uint32_t)sqlite3_column_int(st, 16);
		copy_col(st, 17, c->token_id, sizeof(c->token_id));
		copy_col(st, 18, gpus, sizeof(gpus));
		comp_gpus_parse(gpus, c);
		c->owner_uid = (uint32_t)sqlite3_column_int64(st, 19);
		c->owner_gid = (uint32_t)sqlite3_column_int64(st, 20);
		if (comp_paths_parse((const char *)sqlite3_column_text(st, 21), c))
			log_warn(COMP, "store: %s: its paths '%s' do not read; it reaches only its volume",
				 c->id, (const char *)sqlite3_column_text(st, 21));
		c->qos_mbps = (uint32_t)sqlite3_column_int64(st, 22);
		c->qos_iops = (uint32_t)sqlite3_column_int64(st, 23);
		copy_col(st, 24, c->rq.zone, sizeof(c->rq.zone));
		c->rq.same_zone = sqlite3_column_int(st, 25) != 0;
		c->generation = (uint64_t)sqlite3_column_int64(st, 26);
		if (c->state > COMP_STATE_LAST)
			c->state = COMP_FAILED;
	}
	if (step != SQLITE_DONE)
		rc = db_err(s, "load");
out:
	sqlite3_finalize(st);
	if (rc) {
		free(v);
		return rc;
	}
	*out = v;
	*n = cnt;
	return 0;
}

static const char put_sql[] =
	"INSERT OR REPLACE INTO compositions (seq, id, name, tenant, state, reason, gpu_count,"
	" gpu_model, same_node, storage, memory, retain, created, changed, expires, mem_share,"
	" mem_nodes, token_id, gpus, owner_uid, owner_gid, paths, qos_mbps, qos_iops, gpu_zone,"
	" same_zone, generation) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

static int put_row(struct sq_store *s, const struct comp *c, uint64_t generation)
{
	char gpus[COMP_GPUS_TEXT_MAX];
	sqlite3_stmt *st = NULL;
	char *paths = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db, put_sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "put");
	comp_gpus_text(c, gpus, sizeof(gpus));
	sqlite3_bind_int64(st, 1, (sqlite3_int64)c->seq);
	sqlite3_bind_text(st, 2, c->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, c->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, c->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, (int)c->state);
	sqlite3_bind_text(st, 6, c->reason, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 7, (int)c->rq.gpus);
	sqlite3_bind_text(st, 8, c->rq.model, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 9, c->rq.same_node);
	sqlite3_bind_int64(st, 10, (sqlite3_int64)c->rq.storage);
	sqlite3_bind_int64(st, 11, (sqlite3_int64)c->rq.memory);
	sqlite3_bind_int(st, 12, c->retain);
	sqlite3_bind_int64(st, 13, c->created);
	sqlite3_bind_int64(st, 14, c->changed);
	sqlite3_bind_int64(st, 15, c->expires);
	sqlite3_bind_int64(st, 16, (sqlite3_int64)c->mem_share);
	sqlite3_bind_int(st, 17, (int)c->mem_nodes);
	sqlite3_bind_text(st, 18, c->token_id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 19, gpus, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 20, (sqlite3_int64)c->owner_uid);
	sqlite3_bind_int64(st, 21, (sqlite3_int64)c->owner_gid);
	sqlite3_bind_int64(st, 23, (sqlite3_int64)c->qos_mbps);
	sqlite3_bind_int64(st, 24, (sqlite3_int64)c->qos_iops);
	sqlite3_bind_text(st, 25, c->rq.zone, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 26, c->rq.same_zone);
	sqlite3_bind_int64(st, 27, (sqlite3_int64)generation);
	if (!(paths = comp_paths_text(c)))
		rc = -ENOMEM;
	else {
		sqlite3_bind_text(st, 22, paths, -1, SQLITE_STATIC);
		rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(s, "put");
	}
	sqlite3_finalize(st);
	free(paths);
	return rc;
}

static int put_gpus(struct sq_store *s, const struct comp *c)
{
	sqlite3_stmt *del = NULL, *ins = NULL;
	int rc = 0;

	if (sqlite3_prepare_v2(s->db, "DELETE FROM comp_gpus WHERE comp = ?", -1, &del, NULL) !=
		    SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "INSERT INTO comp_gpus (node, gpu, comp) VALUES (?,?,?)", -1,
			       &ins, NULL) != SQLITE_OK) {
		rc = db_err(s, "put gpus");
		goto out;
	}
	sqlite3_bind_text(del, 1, c->id, -1, SQLITE_STATIC);
	if (sqlite3_step(del) != SQLITE_DONE) {
		rc = db_err(s, "free gpus");
		goto out;
	}
	for (uint32_t i = 0; comp_state_holds(c->state) && i < c->ngpus; i++) {
		sqlite3_reset(ins);
		sqlite3_bind_int(ins, 1, (int)c->gpus[i].node);
		sqlite3_bind_int(ins, 2, (int)c->gpus[i].index);
		sqlite3_bind_text(ins, 3, c->id, -1, SQLITE_STATIC);
		rc = sqlite3_step(ins);
		if (rc == SQLITE_CONSTRAINT) {
			log_error(COMP, "GPU %u of node %u is held by another composition: '%s' refused",
				  c->gpus[i].index, c->gpus[i].node, c->id);
			rc = -EEXIST;
			goto out;
		}
		if (rc != SQLITE_DONE) {
			rc = db_err(s, "hold gpus");
			goto out;
		}
		rc = 0;
	}
out:
	sqlite3_finalize(del);
	sqlite3_finalize(ins);
	return rc;
}

static int sq_put(void *impl, const struct comp *c, uint64_t generation)
{
	struct sq_store *s = impl;
	int rc;

	if (sqlite3_exec(s->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return db_err(s, "begin");
	rc = put_row(s, c, generation);
	if (!rc)
		rc = put_gpus(s, c);
	if (!rc && sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
		rc = db_err(s, "commit");
	if (rc)
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static int sq_add_bytes(void *impl, int64_t at, const char *tenant, uint64_t read,
			uint64_t written)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO usage_bytes (at, tenant, read, written)"
			       " VALUES (?, ?, ?, ?)", -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_int64(st, 1, at);
	sqlite3_bind_text(st, 2, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, comp_i64(read));
	sqlite3_bind_int64(st, 4, comp_i64(written));
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(s, "insert usage_bytes");
	sqlite3_finalize(st);
	return rc;
}

static int sq_sum_bytes(void *impl, int64_t since, int64_t until,
			void (*fn)(void *arg, const char *tenant, uint64_t read, uint64_t written),
			void *arg)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT tenant, SUM(read), SUM(written) FROM usage_bytes"
			       " WHERE at >= ? AND at <= ? GROUP BY tenant ORDER BY tenant", -1, &st,
			       NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_int64(st, 1, since);
	sqlite3_bind_int64(st, 2, until);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int64_t r = sqlite3_column_int64(st, 1), w = sqlite3_column_int64(st, 2);

		fn(arg, (const char *)sqlite3_column_text(st, 0), r > 0 ? (uint64_t)r : 0,
		   w > 0 ? (uint64_t)w : 0);
	}
	rc = rc == SQLITE_DONE ? 0 : db_err(s, "select usage_bytes");
	sqlite3_finalize(st);
	return rc;
}

static const struct comp_store_ops sq_ops = {
	.close = sq_close,
	.load = sq_load,
	.put = sq_put,
	.add_bytes = sq_add_bytes,
	.sum_bytes = sq_sum_bytes,
};
