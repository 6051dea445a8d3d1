/*
 * The SQLite backend of mgmt's store (mgmt_store.h): one file in the
 * node's data directory, for a single mgmt. No leader lease: the one
 * daemon that opens the file is the leader.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mgmt/mgmt_store.h"
#include "strata/errors.h"

#define COMP "mgmt"
#define MGMT_SCHEMA 1

struct sq_store {
	sqlite3 *db;
};

static const char schema_sql[] =
	"CREATE TABLE IF NOT EXISTS mgmt_map ("
	" key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mgmt_nodes ("
	" id INTEGER PRIMARY KEY, addr TEXT NOT NULL, state INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mgmt_targets ("
	" id INTEGER PRIMARY KEY, node_id INTEGER NOT NULL, capacity INTEGER NOT NULL,"
	" used INTEGER NOT NULL, state INTEGER NOT NULL);"
	"CREATE TABLE IF NOT EXISTS mgmt_chains ("
	" id INTEGER PRIMARY KEY, version INTEGER NOT NULL);"
	/* out = 0: member at pos (head = 0); out = 1: out-list entry. */
	"CREATE TABLE IF NOT EXISTS mgmt_chain_members ("
	" chain_id INTEGER NOT NULL, out INTEGER NOT NULL, pos INTEGER NOT NULL,"
	" target_id INTEGER NOT NULL, state INTEGER NOT NULL,"
	" PRIMARY KEY (chain_id, out, pos));"
	"CREATE TABLE IF NOT EXISTS mgmt_incarnations ("
	" node_id INTEGER PRIMARY KEY, inc INTEGER NOT NULL);"
	/* Node ids retired by 'strata node remove' (at: seconds since the
	 * epoch); added to schema 1 as the tokens table was. */
	"CREATE TABLE IF NOT EXISTS mgmt_removed ("
	" node_id INTEGER PRIMARY KEY, at INTEGER NOT NULL);"
	/* The token registry; revoked: when (0: not revoked). Added to schema
	 * 1 as it stands: an older store simply gets the empty table. */
	"CREATE TABLE IF NOT EXISTS mgmt_tokens ("
	" id TEXT PRIMARY KEY, tenant TEXT NOT NULL, claims TEXT NOT NULL,"
	" created INTEGER NOT NULL, exp INTEGER NOT NULL, admin INTEGER NOT NULL,"
	" revoked INTEGER NOT NULL DEFAULT 0);";

static void sq_close(void *impl)
{
	struct sq_store *s = impl;

	if (!s)
		return;
	sqlite3_close(s->db);
	free(s);
}

static const struct mgmt_store_ops sq_ops;

static int db_err(struct sq_store *s, const char *what)
{
	log_error(COMP, "metadata store: %s failed: %s", what, sqlite3_errmsg(s->db));
	return -EIO;
}

static int exec(struct sq_store *s, const char *sql)
{
	char *msg = NULL;

	if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		log_error(COMP, "metadata store: \"%.60s\" failed: %s", sql,
			  msg ? msg : "unknown error");
		sqlite3_free(msg);
		return -EIO;
	}
	return 0;
}

/* Reads one integer of mgmt_map; *found = 0 when the key is absent. */
static int map_get(struct sq_store *s, const char *key, int64_t *v, int *found)
{
	sqlite3_stmt *st = NULL;
	int rc;

	*found = 0;
	*v = 0;
	if (sqlite3_prepare_v2(s->db, "SELECT value FROM mgmt_map WHERE key = ?", -1, &st,
			       NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(st, 0);
		*found = 1;
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		rc = 0;
	} else {
		rc = db_err(s, "read mgmt_map");
	}
	sqlite3_finalize(st);
	return rc;
}

int mgmt_store_sqlite_open(const char *path, const struct mgmt_store_ops **ops, void **impl)
{
	struct sq_store *s;
	int64_t schema;
	int found, rc = -EIO;

	*ops = NULL;
	*impl = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (sqlite3_open_v2(path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
			    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		log_error(COMP, "cannot open metadata store \"%s\": %s; check the path "
			  "and its permissions", path,
			  s->db ? sqlite3_errmsg(s->db) : "out of memory");
		goto fail;
	}
	sqlite3_busy_timeout(s->db, 5000);
	if ((rc = exec(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;")) ||
	    (rc = exec(s, schema_sql)) ||
	    (rc = map_get(s, "schema", &schema, &found)))
		goto fail;
	if (found && schema > MGMT_SCHEMA) {
		log_error(COMP, "metadata store \"%s\" has schema %lld, newer than %d; "
			  "run a newer stratad", path, (long long)schema, MGMT_SCHEMA);
		rc = STRATA_EBADMSG;
		goto fail;
	}
	*ops = &sq_ops;
	*impl = s;
	return 0;
fail:
	sq_close(s);
	return rc;
}

static int step_done(struct sq_store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return rc == SQLITE_DONE ? 0 : db_err(s, "write");
}

static int save_map_kv(struct sq_store *s, sqlite3_stmt *st, const char *key, int64_t v)
{
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, v);
	return step_done(s, st);
}

static int save_all(struct sq_store *s, const struct cluster_map *m)
{
	sqlite3_stmt *kv = NULL, *nd = NULL, *tg = NULL, *ch = NULL, *mb = NULL;
	int rc = -EIO;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO mgmt_map VALUES (?, ?)", -1, &kv,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "INSERT INTO mgmt_nodes VALUES (?, ?, ?)", -1, &nd,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "INSERT INTO mgmt_targets VALUES (?, ?, ?, ?, ?)", -1,
			       &tg, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "INSERT INTO mgmt_chains VALUES (?, ?)", -1, &ch,
			       NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(s->db, "INSERT INTO mgmt_chain_members VALUES (?, ?, ?, ?, ?)",
			       -1, &mb, NULL) != SQLITE_OK) {
		rc = db_err(s, "prepare");
		goto out;
	}
	if ((rc = save_map_kv(s, kv, "schema", MGMT_SCHEMA)) ||
	    (rc = save_map_kv(s, kv, "version", (int64_t)m->version)) ||
	    (rc = save_map_kv(s, kv, "replication", m->replication)) ||
	    (rc = save_map_kv(s, kv, "chain_table_len", m->chain_table_len)))
		goto out;
	for (uint32_t i = 0; i < m->nnodes; i++) {
		sqlite3_bind_int64(nd, 1, m->nodes[i].id);
		sqlite3_bind_text(nd, 2, m->nodes[i].addr, -1, SQLITE_STATIC);
		sqlite3_bind_int64(nd, 3, m->nodes[i].state);
		if ((rc = step_done(s, nd)))
			goto out;
	}
	for (uint32_t i = 0; i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];

		sqlite3_bind_int64(tg, 1, t->id);
		sqlite3_bind_int64(tg, 2, t->node_id);
		sqlite3_bind_int64(tg, 3, (int64_t)t->capacity);
		sqlite3_bind_int64(tg, 4, (int64_t)t->used);
		sqlite3_bind_int64(tg, 5, t->state);
		if ((rc = step_done(s, tg)))
			goto out;
	}
	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];

		sqlite3_bind_int64(ch, 1, c->id);
		sqlite3_bind_int64(ch, 2, (int64_t)c->version);
		if ((rc = step_done(s, ch)))
			goto out;
		for (int k = 0; k < c->len + c->nout; k++) {
			int is_out = k >= c->len;

			sqlite3_bind_int64(mb, 1, c->id);
			sqlite3_bind_int64(mb, 2, is_out);
			sqlite3_bind_int64(mb, 3, is_out ? k - c->len : k);
			sqlite3_bind_int64(mb, 4, is_out ? c->out[k - c->len] : c->targets[k]);
			sqlite3_bind_int64(mb, 5, is_out ? c->out_states[k - c->len] : c->states[k]);
			if ((rc = step_done(s, mb)))
				goto out;
		}
	}
	rc = 0;
out:
	sqlite3_finalize(kv);
	sqlite3_finalize(nd);
	sqlite3_finalize(tg);
	sqlite3_finalize(ch);
	sqlite3_finalize(mb);
	return rc;
}

static int sq_save(void *impl, const struct cluster_map *m)
{
	struct sq_store *s = impl;
	int rc;

	if ((rc = exec(s, "BEGIN IMMEDIATE")))
		return rc;
	rc = exec(s, "DELETE FROM mgmt_map; DELETE FROM mgmt_nodes; DELETE FROM mgmt_targets;"
		  " DELETE FROM mgmt_chains; DELETE FROM mgmt_chain_members;");
	if (!rc)
		rc = save_all(s, m);
	if (!rc)
		rc = exec(s, "COMMIT");
	if (rc)
		(void)exec(s, "ROLLBACK");
	return rc;
}

/* Row count of a table, rejected above max. */
static int count_rows(struct sq_store *s, const char *sql, uint32_t max, uint32_t *n)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	if (sqlite3_step(st) != SQLITE_ROW) {
		rc = db_err(s, "count");
	} else {
		int64_t v = sqlite3_column_int64(st, 0);

		rc = v < 0 || v > max ? STRATA_EBADMSG : 0;
		*n = (uint32_t)v;
	}
	sqlite3_finalize(st);
	return rc;
}

/* Integer column i of st, required to fit in [0, max]. */
static int col_u(sqlite3_stmt *st, int i, uint64_t max, uint64_t *v)
{
	int64_t x = sqlite3_column_int64(st, i);

	if (sqlite3_column_type(st, i) != SQLITE_INTEGER || (max != UINT64_MAX && (x < 0 ||
	    (uint64_t)x > max)))
		return STRATA_EBADMSG;
	*v = (uint64_t)x;
	return 0;
}

static int load_rows(struct sq_store *s, struct cluster_map *m)
{
	sqlite3_stmt *st = NULL;
	uint64_t a, b, c, d, e;
	int rc;

	/* Nodes. */
	if (sqlite3_prepare_v2(s->db, "SELECT id, addr, state FROM mgmt_nodes ORDER BY id",
			       -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct cm_node *n;
		const unsigned char *addr = sqlite3_column_text(st, 1);
		int alen = sqlite3_column_bytes(st, 1);

		if (m->nnodes >= m->nodes_cap || col_u(st, 0, UINT32_MAX, &a) ||
		    col_u(st, 2, UINT32_MAX, &b) || !addr || alen <= 0 || alen >= CM_ADDR_LEN)
			goto bad;
		n = &m->nodes[m->nnodes];
		memset(n, 0, sizeof(*n));
		n->id = (uint32_t)a;
		n->state = (uint32_t)b;
		memcpy(n->addr, addr, (size_t)alen);
		m->nnodes++;
	}
	if (rc != SQLITE_DONE)
		goto dberr;
	sqlite3_finalize(st);

	/* Targets. */
	if (sqlite3_prepare_v2(s->db, "SELECT id, node_id, capacity, used, state "
			       "FROM mgmt_targets ORDER BY id", -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct cm_target *t;

		if (m->ntargets >= m->targets_cap || col_u(st, 0, UINT32_MAX, &a) ||
		    col_u(st, 1, UINT32_MAX, &b) || col_u(st, 2, UINT64_MAX, &c) ||
		    col_u(st, 3, UINT64_MAX, &d) || col_u(st, 4, UINT32_MAX, &e))
			goto bad;
		t = &m->targets[m->ntargets];
		memset(t, 0, sizeof(*t));
		t->id = (uint32_t)a;
		t->node_id = (uint32_t)b;
		t->capacity = c;
		t->used = d;
		t->state = (uint32_t)e;
		m->ntargets++;
	}
	if (rc != SQLITE_DONE)
		goto dberr;
	sqlite3_finalize(st);

	/* Chains. */
	if (sqlite3_prepare_v2(s->db, "SELECT id, version FROM mgmt_chains ORDER BY id", -1,
			       &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct cm_chain *ch;

		if (m->nchains >= m->chains_cap || col_u(st, 0, UINT32_MAX, &a) ||
		    col_u(st, 1, UINT64_MAX, &b))
			goto bad;
		ch = &m->chains[m->nchains];
		memset(ch, 0, sizeof(*ch));
		ch->id = (uint32_t)a;
		ch->version = b;
		m->nchains++;
	}
	if (rc != SQLITE_DONE)
		goto dberr;
	sqlite3_finalize(st);

	/* Members, in order: positions must be 0, 1, ... in each list. */
	if (sqlite3_prepare_v2(s->db, "SELECT chain_id, out, pos, target_id, state "
			       "FROM mgmt_chain_members ORDER BY chain_id, out, pos", -1, &st,
			       NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		const struct cm_chain *found;
		struct cm_chain *ch;

		if (col_u(st, 0, UINT32_MAX, &a) || col_u(st, 1, 1, &b) ||
		    col_u(st, 2, CM_CHAIN_SLOTS, &c) || col_u(st, 3, UINT32_MAX, &d) ||
		    col_u(st, 4, 255, &e))
			goto bad;
		found = cm_find_chain(m, (uint32_t)a);
		if (!found)
			goto bad;
		ch = &m->chains[found - m->chains];
		if (ch->len + ch->nout >= CM_CHAIN_SLOTS)
			goto bad;
		if (!b) {
			if (ch->nout || c != ch->len)
				goto bad;
			ch->targets[ch->len] = (uint32_t)d;
			ch->states[ch->len++] = (uint8_t)e;
		} else {
			if (c != ch->nout)
				goto bad;
			ch->out[ch->nout] = (uint32_t)d;
			ch->out_states[ch->nout++] = (uint8_t)e;
		}
	}
	if (rc != SQLITE_DONE)
		goto dberr;
	sqlite3_finalize(st);
	return 0;
bad:
	sqlite3_finalize(st);
	log_error(COMP, "metadata store: corrupt cluster map row; restore the store "
		  "from a backup");
	return STRATA_EBADMSG;
dberr:
	rc = db_err(s, "read");
	sqlite3_finalize(st);
	return rc;
}

static int sq_load(void *impl, struct cluster_map *out)
{
	struct sq_store *s = impl;
	struct cluster_map m;
	uint32_t nn, nt, nc;
	int64_t v;
	int found, rc;

	cm_init(&m);
	cm_init(out);
	if ((rc = exec(s, "BEGIN")))
		return rc;
	if ((rc = count_rows(s, "SELECT COUNT(*) FROM mgmt_nodes", CM_MAX_NODES, &nn)) ||
	    (rc = count_rows(s, "SELECT COUNT(*) FROM mgmt_targets", CM_MAX_TARGETS, &nt)) ||
	    (rc = count_rows(s, "SELECT COUNT(*) FROM mgmt_chains", CM_MAX_CHAINS, &nc)))
		goto out;
	rc = -ENOMEM;
	if (cm_reserve(&m, nn, nt, nc))
		goto out;
	if ((rc = map_get(s, "version", &v, &found)))
		goto out;
	m.version = (uint64_t)v;
	if ((rc = map_get(s, "replication", &v, &found)))
		goto out;
	if (found)
		m.replication = v < 0 || v > CM_MAX_R ? CM_MAX_R + 1 : (uint32_t)v;
	if ((rc = map_get(s, "chain_table_len", &v, &found)))
		goto out;
	m.chain_table_len = v < 0 || v > CM_MAX_CHAINS ? UINT32_MAX : (uint32_t)v;
	if ((rc = load_rows(s, &m)))
		goto out;
	rc = cm_validate(&m);
	if (rc)
		log_error(COMP, "metadata store: the stored cluster map is inconsistent; "
			  "restore the store from a backup");
out:
	(void)exec(s, "COMMIT");
	if (rc) {
		cm_release(&m);
		return rc;
	}
	*out = m;
	return 0;
}

/* One value per node in a table of (node_id, value): sql selects it by
 * node, or writes the pair; what names the table for the log. */
static int node_value_get(struct sq_store *s, const char *sql, const char *what,
			  uint32_t node, int64_t *v)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_int64(st, 1, node);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*v = sqlite3_column_int64(st, 0);
		rc = 0;
	} else {
		rc = rc == SQLITE_DONE ? -ENOENT : db_err(s, what);
	}
	sqlite3_finalize(st);
	return rc;
}

static int node_value_set(struct sq_store *s, const char *sql, const char *what,
			  uint32_t node, int64_t v)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_int64(st, 1, node);
	sqlite3_bind_int64(st, 2, v);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(s, what);
	sqlite3_finalize(st);
	return rc;
}

static int sq_get_incarnation(void *impl, uint32_t node, uint64_t *inc)
{
	struct sq_store *s = impl;
	int64_t v = 0;
	int rc = node_value_get(s, "SELECT inc FROM mgmt_incarnations WHERE node_id = ?",
				"read mgmt_incarnations", node, &v);

	if (!rc)
		*inc = (uint64_t)v;
	return rc;
}

static int sq_set_incarnation(void *impl, uint32_t node, uint64_t inc)
{
	struct sq_store *s = impl;

	return node_value_set(s, "INSERT OR REPLACE INTO mgmt_incarnations VALUES (?, ?)",
			      "write mgmt_incarnations", node, (int64_t)inc);
}

static int sq_set_removed(void *impl, uint32_t node, int64_t when)
{
	struct sq_store *s = impl;

	return node_value_set(s, "INSERT OR IGNORE INTO mgmt_removed VALUES (?, ?)",
			      "write mgmt_removed", node, when);
}

static int sq_get_removed(void *impl, uint32_t node, int64_t *when)
{
	struct sq_store *s = impl;

	return node_value_get(s, "SELECT at FROM mgmt_removed WHERE node_id = ?",
			      "read mgmt_removed", node, when);
}

/* ---- the token registry ---- */

static int sq_token_add(void *impl, const struct mgmt_token *t, const char *claims)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO mgmt_tokens (id, tenant, claims, created, exp,"
			       " admin, revoked) VALUES (?, ?, ?, ?, ?, ?, 0)", -1, &st,
			       NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_text(st, 1, t->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, t->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, claims, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, t->created);
	sqlite3_bind_int64(st, 5, t->exp);
	sqlite3_bind_int64(st, 6, t->admin);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		rc = 0;
	else if (sqlite3_extended_errcode(s->db) == SQLITE_CONSTRAINT_PRIMARYKEY)
		rc = -EEXIST;
	else
		rc = db_err(s, "write mgmt_tokens");
	sqlite3_finalize(st);
	return rc;
}

static int sq_token_revoke(void *impl, const char *id, int64_t when)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st = NULL;
	int rc;

	/* The first revocation's time stays; a second one only finds the row. */
	if (sqlite3_prepare_v2(s->db, "UPDATE mgmt_tokens SET revoked = CASE WHEN revoked = 0"
			       " THEN ? ELSE revoked END WHERE id = ?", -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_int64(st, 1, when > 0 ? when : 1);
	sqlite3_bind_text(st, 2, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		rc = sqlite3_changes(s->db) ? 0 : -ENOENT;
	else
		rc = db_err(s, "write mgmt_tokens");
	sqlite3_finalize(st);
	return rc;
}

static int sq_token_revoke_offline(void *impl, const char *id, int64_t exp, int64_t when)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db, "INSERT INTO mgmt_tokens (id, tenant, claims, created, exp,"
			       " admin, revoked) VALUES (?, '(offline)', '{}', ?, ?, 0, ?)"
			       " ON CONFLICT(id) DO UPDATE SET revoked = CASE WHEN revoked = 0"
			       " THEN excluded.revoked ELSE revoked END", -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	when = when > 0 ? when : 1;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, when);
	sqlite3_bind_int64(st, 3, exp > 0 ? exp : 0);
	sqlite3_bind_int64(st, 4, when);
	rc = sqlite3_step(st) == SQLITE_DONE ? 0 : db_err(s, "write mgmt_tokens");
	sqlite3_finalize(st);
	return rc;
}

/* Text column i of st into dst[cap]: a valid length, no NUL inside. */
static int col_str(sqlite3_stmt *st, int i, char *dst, size_t cap)
{
	const unsigned char *v = sqlite3_column_text(st, i);
	int len = sqlite3_column_bytes(st, i);

	if (!v || len <= 0 || (size_t)len >= cap || memchr(v, 0, (size_t)len))
		return STRATA_EBADMSG;
	memcpy(dst, v, (size_t)len);
	dst[len] = '\0';
	return 0;
}

static int sq_token_list(void *impl, uint32_t max, struct mgmt_token **out, uint32_t *n,
			 uint32_t *total)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st = NULL;
	struct mgmt_token *ts = NULL;
	uint32_t cnt = 0, count;
	uint64_t a, b, c, d;
	int rc;

	*out = NULL;
	*n = *total = 0;
	if ((rc = count_rows(s, "SELECT COUNT(*) FROM mgmt_tokens", UINT32_MAX, &count)))
		return rc;
	if (count > max)
		count = max;
	if (count && !(ts = calloc(count, sizeof(*ts))))
		return -ENOMEM;
	if (sqlite3_prepare_v2(s->db, "SELECT id, tenant, created, exp, admin, revoked"
			       " FROM mgmt_tokens ORDER BY created, id LIMIT ?", -1, &st,
			       NULL) != SQLITE_OK) {
		free(ts);
		return db_err(s, "prepare");
	}
	sqlite3_bind_int64(st, 1, count);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct mgmt_token *t = &ts[cnt];

		if (cnt >= count || col_str(st, 0, t->id, sizeof(t->id)) ||
		    col_str(st, 1, t->tenant, sizeof(t->tenant)) ||
		    col_u(st, 2, INT64_MAX, &a) || col_u(st, 3, INT64_MAX, &b) ||
		    col_u(st, 4, 1, &c) || col_u(st, 5, INT64_MAX, &d)) {
			rc = STRATA_EBADMSG;
			log_error(COMP, "metadata store: corrupt token registry row");
			goto out;
		}
		t->created = (int64_t)a;
		t->exp = (int64_t)b;
		t->admin = c != 0;
		t->revoked = (int64_t)d;
		cnt++;
	}
	rc = rc == SQLITE_DONE ? 0 : db_err(s, "read mgmt_tokens");
out:
	sqlite3_finalize(st);
	if (rc) {
		free(ts);
		return rc;
	}
	if (!cnt) {
		free(ts);
		ts = NULL;
	}
	*out = ts;
	*n = cnt;
	return count_rows(s, "SELECT COUNT(*) FROM mgmt_tokens", UINT32_MAX, total);
}

static int sq_revoked(void *impl, int64_t now, struct cluster_map *m)
{
	struct sq_store *s = impl;
	sqlite3_stmt *st = NULL;
	uint32_t cnt = 0;
	int rc;

	if (sqlite3_prepare_v2(s->db, "SELECT id FROM mgmt_tokens WHERE revoked != 0 AND"
			       " (exp = 0 OR exp > ?) ORDER BY id", -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	sqlite3_bind_int64(st, 1, now);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		char id[TOKEN_ID_LEN + 1];

		if (col_str(st, 0, id, sizeof(id)) || !token_id_ok(id) ||
		    (cnt && strcmp(id, m->revoked[cnt - 1]) <= 0)) {
			rc = STRATA_EBADMSG;
			log_error(COMP, "metadata store: corrupt token registry row");
			goto out;
		}
		if (cnt >= CM_MAX_REVOKED) {
			rc = -ENOSPC;
			goto out;
		}
		if (cm_reserve_revoked(m, cnt + 1)) {
			rc = -ENOMEM;
			goto out;
		}
		memcpy(m->revoked[cnt++], id, sizeof(id));
	}
	rc = rc == SQLITE_DONE ? 0 : db_err(s, "read mgmt_tokens");
out:
	sqlite3_finalize(st);
	m->nrevoked = rc ? 0 : cnt;
	return rc;
}

/* ---- copying ---- */

/* Runs sql (no parameters) and calls row(st) for each row until it
 * returns nonzero. */
static int each_row(struct sq_store *s, const char *sql, int (*row)(sqlite3_stmt *st, void *arg),
		    void *arg)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
		return db_err(s, "prepare");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		int r = row(st, arg);

		if (r) {
			sqlite3_finalize(st);
			return r;
		}
	}
	rc = rc == SQLITE_DONE ? 0 : db_err(s, "read");
	sqlite3_finalize(st);
	return rc;
}

static int inc_row(sqlite3_stmt *st, void *arg)
{
	struct mgmt_row_cb *c = arg;
	uint64_t node;

	if (col_u(st, 0, UINT32_MAX, &node))
		return STRATA_EBADMSG;
	return c->inc(c->arg, (uint32_t)node, (uint64_t)sqlite3_column_int64(st, 1));
}

static int removed_row(sqlite3_stmt *st, void *arg)
{
	struct mgmt_row_cb *c = arg;
	uint64_t node;

	if (col_u(st, 0, UINT32_MAX, &node))
		return STRATA_EBADMSG;
	return c->at(c->arg, (uint32_t)node, sqlite3_column_int64(st, 1));
}

static int token_row(sqlite3_stmt *st, void *arg)
{
	struct mgmt_row_cb *c = arg;
	const unsigned char *claims = sqlite3_column_text(st, 2);
	struct mgmt_token t;
	uint64_t a, b, d, e;

	memset(&t, 0, sizeof(t));
	if (col_str(st, 0, t.id, sizeof(t.id)) || col_str(st, 1, t.tenant, sizeof(t.tenant)) ||
	    !claims || col_u(st, 3, INT64_MAX, &a) || col_u(st, 4, INT64_MAX, &b) ||
	    col_u(st, 5, 1, &d) || col_u(st, 6, INT64_MAX, &e))
		return STRATA_EBADMSG;
	t.created = (int64_t)a;
	t.exp = (int64_t)b;
	t.admin = d != 0;
	t.revoked = (int64_t)e;
	return c->tok(c->arg, &t, (const char *)claims);
}

static int sq_each_incarnation(void *impl, int (*cb)(void *arg, uint32_t node, uint64_t inc),
			       void *arg)
{
	struct mgmt_row_cb c = { .inc = cb, .arg = arg };

	return each_row(impl, "SELECT node_id, inc FROM mgmt_incarnations ORDER BY node_id",
			inc_row, &c);
}

static int sq_each_removed(void *impl, int (*cb)(void *arg, uint32_t node, int64_t at), void *arg)
{
	struct mgmt_row_cb c = { .at = cb, .arg = arg };

	return each_row(impl, "SELECT node_id, at FROM mgmt_removed ORDER BY node_id", removed_row,
			&c);
}

static int sq_each_token(void *impl, int (*cb)(void *arg, const struct mgmt_token *t,
					       const char *claims), void *arg)
{
	struct mgmt_row_cb c = { .tok = cb, .arg = arg };

	return each_row(impl, "SELECT id, tenant, claims, created, exp, admin, revoked FROM"
			" mgmt_tokens ORDER BY id", token_row, &c);
}

static const struct mgmt_store_ops sq_ops = {
	.close = sq_close,
	.save = sq_save,
	.load = sq_load,
	.get_incarnation = sq_get_incarnation,
	.set_incarnation = sq_set_incarnation,
	.set_removed = sq_set_removed,
	.get_removed = sq_get_removed,
	.token_add = sq_token_add,
	.token_revoke = sq_token_revoke,
	.token_revoke_offline = sq_token_revoke_offline,
	.token_list = sq_token_list,
	.revoked = sq_revoked,
	.each_incarnation = sq_each_incarnation,
	.each_removed = sq_each_removed,
	.each_token = sq_each_token,
};
