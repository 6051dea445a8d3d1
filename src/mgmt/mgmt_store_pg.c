/*
 * The PostgreSQL backend of mgmt's store (mgmt_store.h), through libpq:
 * the state several control daemons share, and their leader lease.
 *
 * mgmt writes rarely (a map change, a registration of a restarted node, a
 * token), so statements are sent as text with text parameters; the map is
 * rewritten with one multi-row INSERT per table.
 *
 * The leader lease is one row (mgmt_lease: holder, addr, term, expires),
 * taken or renewed by one upsert that only succeeds for its holder or once
 * it expired, by the database's clock (clock_timestamp(): no two daemons'
 * clocks are compared). A takeover increments term. Fencing: once a term
 * is set (mgmt_store_fence), every write transaction first reads the lease
 * row FOR SHARE and goes on only when its term is still ours; a takeover's
 * UPDATE of that row waits for the write to commit, and a write that
 * starts after it sees the new term and fails with -ESTALE. A deposed
 * leader therefore never overwrites what its successor loaded.
 *
 * The schema is versioned as the meta store's (meta/store_pg.c): a row
 * 'mgmt' in schema_version, ordered migrations under the same advisory
 * lock, so meta and mgmt may set up one database at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/pg_conn.h"
#include "mgmt/mgmt_store.h"
#include "strata/errors.h"

#define COMP "mgmt-pg"
/* The meta store's schema lock: one set-up at a time for both. */
#define SCHEMA_LOCK_KEY "6076327939519844691"

static const char *const migrations[] = {
	/* 0 -> 1: schema 1 of the SQLite store, and the lease. */
	"CREATE TABLE mgmt_map (key text PRIMARY KEY, value bigint NOT NULL);"
	"CREATE TABLE mgmt_nodes (id bigint PRIMARY KEY, addr text NOT NULL,"
	" state bigint NOT NULL);"
	"CREATE TABLE mgmt_targets (id bigint PRIMARY KEY, node_id bigint NOT NULL,"
	" capacity bigint NOT NULL, used bigint NOT NULL, state bigint NOT NULL);"
	"CREATE TABLE mgmt_chains (id bigint PRIMARY KEY, version bigint NOT NULL);"
	"CREATE TABLE mgmt_chain_members (chain_id bigint NOT NULL, out bigint NOT NULL,"
	" pos bigint NOT NULL, target_id bigint NOT NULL, state bigint NOT NULL,"
	" PRIMARY KEY (chain_id, out, pos));"
	"CREATE TABLE mgmt_incarnations (node_id bigint PRIMARY KEY, inc bigint NOT NULL);"
	"CREATE TABLE mgmt_removed (node_id bigint PRIMARY KEY, at bigint NOT NULL);"
	"CREATE TABLE mgmt_tokens (id text COLLATE \"C\" PRIMARY KEY, tenant text NOT NULL,"
	" claims text NOT NULL, created bigint NOT NULL, exp bigint NOT NULL,"
	" admin bigint NOT NULL, revoked bigint NOT NULL DEFAULT 0);"
	"CREATE TABLE mgmt_lease (id integer PRIMARY KEY CHECK (id = 1),"
	" holder text NOT NULL, addr text NOT NULL, term bigint NOT NULL,"
	" expires timestamptz NOT NULL);",
	/* 1 -> 2: what a follower serves besides (GET_MAP from the store,
	 * mgmt_service.c): the targets' filesystem, free space and full mark,
	 * and the announced services. */
	"ALTER TABLE mgmt_targets ADD COLUMN fs bigint NOT NULL DEFAULT 0,"
	" ADD COLUMN avail bigint NOT NULL DEFAULT 0,"
	" ADD COLUMN full_mark bigint NOT NULL DEFAULT 0;"
	"CREATE TABLE mgmt_services (kind bigint NOT NULL, node_id bigint NOT NULL,"
	" addr text NOT NULL, state bigint NOT NULL, incarnation bigint NOT NULL,"
	" PRIMARY KEY (kind, node_id));",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

struct pgm {
	struct pg_session db;	/* the connection (common/pg_conn.h) */
	uint64_t term;		/* the fence (0: none) */
};

/* Runs sql with text parameters a (NULL: none); *out gets the result
 * (PQclear it) when out is not NULL. */
static int q(struct pgm *s, const char *sql, const struct pg_params *a, const char *what,
	     PGresult **out)
{
	PGresult *r;

	if (out)
		*out = NULL;
	if (s->db.lost)
		return -EIO;
	/* Without parameters, PQexec: several statements in one string. */
	r = a ? PQexecParams(s->db.conn, sql, a->n, NULL, a->v, NULL, NULL, 0) :
		PQexec(s->db.conn, sql);
	return pg_session_check(&s->db, r, what, out);
}

/* Rows a statement changed. */
static int q_count(struct pgm *s, const char *sql, const struct pg_params *a, const char *what)
{
	PGresult *r;
	int rc = q(s, sql, a, what, &r);

	if (!rc) {
		rc = (int)strtol(PQcmdTuples(r), NULL, 10);
		PQclear(r);
	}
	return rc;
}

static int64_t col_i64(const PGresult *r, int row, int col, bool *bad)
{
	const char *v = PQgetvalue(r, row, col);
	char *end;
	long long x;

	if (PQgetisnull(r, row, col) || !*v) {
		*bad = true;
		return 0;
	}
	errno = 0;
	x = strtoll(v, &end, 10);
	if (errno || *end)
		*bad = true;
	return (int64_t)x;
}

/* A value in [0, max], for the row checks. */
static uint64_t col_u(const PGresult *r, int row, int col, uint64_t max, bool *bad)
{
	int64_t x = col_i64(r, row, col, bad);

	if (max != UINT64_MAX && (x < 0 || (uint64_t)x > max))
		*bad = true;
	return (uint64_t)x;
}

static int reconnect(struct pgm *s)
{
	return pg_session_reconnect(&s->db, NULL, NULL);
}

static void rollback(struct pgm *s)
{
	if (!s->db.lost && PQtransactionStatus(s->db.conn) != PQTRANS_IDLE)
		(void)q(s, "ROLLBACK", NULL, "rollback", NULL);
}

int mgmt_lease_fence(struct pg_session *db, uint64_t term, const char *who)
{
	PGresult *r;
	bool bad = false;
	int64_t now;
	int rc;

	if (db->lost)
		return -EIO;
	r = PQexec(db->conn, "SELECT term FROM mgmt_lease WHERE id = 1 FOR SHARE");
	rc = pg_session_check(db, r, "reading the lease", &r);
	if (rc)
		return rc;
	now = PQntuples(r) == 1 ? col_i64(r, 0, 0, &bad) : 0;
	PQclear(r);
	if (bad || (uint64_t)now != term) {
		log_warn(COMP, "%s: %s write refused: the leader lease is at term %lld, this"
			 " node led term %llu (deposed)", db->where, who, (long long)now,
			 (unsigned long long)term);
		return -ESTALE;
	}
	return 0;
}

/* Opens a write transaction, fenced by s->term (mgmt_store.h). */
static int wbegin(struct pgm *s)
{
	int rc;

	if ((rc = reconnect(s)) || (rc = q(s, "BEGIN", NULL, "begin", NULL)))
		return rc;
	if (!s->term)
		return 0;
	rc = mgmt_lease_fence(&s->db, s->term, "mgmt");
	if (rc) {
		rollback(s);
		return rc;
	}
	return 0;
}

/* Commits when rc is 0, else rolls back; returns the outcome. */
static int wend(struct pgm *s, int rc)
{
	if (!rc)
		return q(s, "COMMIT", NULL, "commit", NULL);
	rollback(s);
	return rc;
}

/* ---- the map ---- */

static int put_kv(struct pgm *s, const char *key, int64_t v)
{
	struct pg_params a = { 0 };

	pg_param_str(&a, key);
	pg_param_i64(&a, v);
	return q(s, "INSERT INTO mgmt_map VALUES ($1, $2)", &a, "writing mgmt_map", NULL);
}

/* Appends a printf'd piece to b. */
static int bput(struct bbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bput(struct bbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return -EINVAL;
	return bbuf_append(b, tmp, (size_t)n);
}

/* Sends b (an INSERT with at least one row, NUL added here) and empties it. */
static int flush_insert(struct pgm *s, struct bbuf *b, const char *what)
{
	int rc = bbuf_append(b, "", 1);

	if (!rc)
		rc = q(s, (const char *)b->buf, NULL, what, NULL);
	b->len = 0;
	return rc;
}

static int save_nodes(struct pgm *s, const struct cluster_map *m, struct bbuf *b)
{
	int rc = 0;

	for (uint32_t i = 0; !rc && i < m->nnodes; i++) {
		char *lit = PQescapeLiteral(s->db.conn, m->nodes[i].addr, strlen(m->nodes[i].addr));

		if (!lit)
			return -ENOMEM;
		rc = bput(b, "%s(%u, %s, %u)", i ? ", " : "INSERT INTO mgmt_nodes VALUES ",
			  m->nodes[i].id, lit, m->nodes[i].state);
		PQfreemem(lit);
	}
	return rc || !m->nnodes ? rc : flush_insert(s, b, "writing mgmt_nodes");
}

static int save_targets(struct pgm *s, const struct cluster_map *m, struct bbuf *b)
{
	int rc = 0;

	for (uint32_t i = 0; !rc && i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];

		/* Two's complement: a capacity above INT64_MAX reads back whole. */
		rc = bput(b, "%s(%u, %u, %" PRId64 ", %" PRId64 ", %u, %" PRId64 ", %" PRId64 ", %u)",
			  i ? ", " : "INSERT INTO mgmt_targets VALUES ", t->id, t->node_id,
			  (int64_t)t->capacity, (int64_t)t->used, t->state, (int64_t)t->fs,
			  (int64_t)t->avail, t->full);
	}
	return rc || !m->ntargets ? rc : flush_insert(s, b, "writing mgmt_targets");
}

static int save_services(struct pgm *s, const struct cluster_map *m, struct bbuf *b)
{
	int rc = 0;

	for (uint32_t i = 0; !rc && i < m->nservices; i++) {
		const struct cm_service *v = &m->services[i];
		char *lit = PQescapeLiteral(s->db.conn, v->addr, strlen(v->addr));

		if (!lit)
			return -ENOMEM;
		rc = bput(b, "%s(%u, %u, %s, %u, %" PRId64 ")",
			  i ? ", " : "INSERT INTO mgmt_services VALUES ", v->kind, v->node_id, lit,
			  v->state, (int64_t)v->incarnation);
		PQfreemem(lit);
	}
	return rc || !m->nservices ? rc : flush_insert(s, b, "writing mgmt_services");
}

static int save_chains(struct pgm *s, const struct cluster_map *m, struct bbuf *b)
{
	uint32_t rows = 0;
	int rc = 0;

	for (uint32_t i = 0; !rc && i < m->nchains; i++)
		rc = bput(b, "%s(%u, %" PRId64 ")", i ? ", " : "INSERT INTO mgmt_chains VALUES ",
			  m->chains[i].id, (int64_t)m->chains[i].version);
	if (rc || (m->nchains && (rc = flush_insert(s, b, "writing mgmt_chains"))))
		return rc;
	/* out = 0: member at pos (head = 0); out = 1: out-list entry. */
	for (uint32_t i = 0; !rc && i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];

		for (int k = 0; !rc && k < c->len + c->nout; k++) {
			int o = k >= c->len, pos = o ? k - c->len : k;

			rc = bput(b, "%s(%u, %d, %d, %u, %u)",
				  rows++ ? ", " : "INSERT INTO mgmt_chain_members VALUES ", c->id, o,
				  pos, o ? c->out[pos] : c->targets[pos],
				  o ? c->out_states[pos] : c->states[pos]);
		}
	}
	return rc || !rows ? rc : flush_insert(s, b, "writing mgmt_chain_members");
}

static int pgm_save(void *impl, const struct cluster_map *m)
{
	struct pgm *s = impl;
	struct bbuf b;
	int rc;

	bbuf_init(&b);
	rc = wbegin(s);
	if (rc)
		return rc;
	rc = q(s, "DELETE FROM mgmt_map; DELETE FROM mgmt_nodes; DELETE FROM mgmt_targets;"
	       " DELETE FROM mgmt_chains; DELETE FROM mgmt_chain_members;"
	       " DELETE FROM mgmt_services", NULL,
	       "clearing the map", NULL);
	if (!rc && !(rc = put_kv(s, "version", (int64_t)m->version)) &&
	    !(rc = put_kv(s, "replication", m->replication)) &&
	    !(rc = put_kv(s, "chain_table_len", m->chain_table_len)) &&
	    !(rc = save_nodes(s, m, &b)) && !(rc = save_targets(s, m, &b)) &&
	    !(rc = save_services(s, m, &b)))
		rc = save_chains(s, m, &b);
	bbuf_release(&b);
	return wend(s, rc);
}

static int load_kv(struct pgm *s, struct cluster_map *m)
{
	PGresult *r;
	bool bad = false;
	int rc = q(s, "SELECT key, value FROM mgmt_map", NULL, "reading mgmt_map", &r);

	if (rc)
		return rc;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *k = PQgetvalue(r, i, 0);
		int64_t v = col_i64(r, i, 1, &bad);

		if (!strcmp(k, "version"))
			m->version = (uint64_t)v;
		else if (!strcmp(k, "replication"))
			m->replication = v < 0 || v > CM_MAX_R ? CM_MAX_R + 1 : (uint32_t)v;
		else if (!strcmp(k, "chain_table_len"))
			m->chain_table_len = v < 0 || v > CM_MAX_CHAINS ? UINT32_MAX : (uint32_t)v;
	}
	PQclear(r);
	return bad ? STRATA_EBADMSG : 0;
}

/* The rows of mgmt_services into m (reserved for them). */
static bool load_services(struct cluster_map *m, const PGresult *r)
{
	bool bad = false;

	for (int i = 0; !bad && i < PQntuples(r); i++) {
		struct cm_service *v = &m->services[m->nservices++];
		int alen = PQgetlength(r, i, 2);

		memset(v, 0, sizeof(*v));
		v->kind = (uint32_t)col_u(r, i, 0, CM_SVC_LAST, &bad);
		v->node_id = (uint32_t)col_u(r, i, 1, UINT32_MAX, &bad);
		v->state = (uint32_t)col_u(r, i, 3, NODE_OFFLINE, &bad);
		v->incarnation = col_u(r, i, 4, UINT64_MAX, &bad);
		if (v->kind < CM_SVC_META || !v->node_id || alen <= 0 || alen >= CM_ADDR_LEN ||
		    memchr(PQgetvalue(r, i, 2), 0, (size_t)alen))
			bad = true;
		else
			memcpy(v->addr, PQgetvalue(r, i, 2), (size_t)alen);
	}
	return bad;
}

/* The rows of the five tables into m (reserved for them). */
static int load_rows(struct pgm *s, struct cluster_map *m, PGresult *const rs[5])
{
	const PGresult *r;
	bool bad = false;

	r = rs[0];
	for (int i = 0; !bad && i < PQntuples(r); i++) {
		struct cm_node *n = &m->nodes[m->nnodes];
		int alen = PQgetlength(r, i, 1);

		memset(n, 0, sizeof(*n));
		n->id = (uint32_t)col_u(r, i, 0, UINT32_MAX, &bad);
		n->state = (uint32_t)col_u(r, i, 2, UINT32_MAX, &bad);
		if (alen <= 0 || alen >= CM_ADDR_LEN || memchr(PQgetvalue(r, i, 1), 0, (size_t)alen))
			bad = true;
		else
			memcpy(n->addr, PQgetvalue(r, i, 1), (size_t)alen);
		m->nnodes++;
	}
	r = rs[1];
	for (int i = 0; !bad && i < PQntuples(r); i++) {
		struct cm_target *t = &m->targets[m->ntargets++];

		memset(t, 0, sizeof(*t));
		t->id = (uint32_t)col_u(r, i, 0, UINT32_MAX, &bad);
		t->node_id = (uint32_t)col_u(r, i, 1, UINT32_MAX, &bad);
		t->capacity = col_u(r, i, 2, UINT64_MAX, &bad);
		t->used = col_u(r, i, 3, UINT64_MAX, &bad);
		t->state = (uint32_t)col_u(r, i, 4, UINT32_MAX, &bad);
		t->fs = col_u(r, i, 5, UINT64_MAX, &bad);
		t->avail = col_u(r, i, 6, UINT64_MAX, &bad);
		t->full = (uint32_t)col_u(r, i, 7, 1, &bad);
	}
	r = rs[2];
	for (int i = 0; !bad && i < PQntuples(r); i++) {
		struct cm_chain *c = &m->chains[m->nchains++];

		memset(c, 0, sizeof(*c));
		c->id = (uint32_t)col_u(r, i, 0, UINT32_MAX, &bad);
		c->version = col_u(r, i, 1, UINT64_MAX, &bad);
	}
	/* Members, in order: positions must be 0, 1, ... in each list. */
	r = rs[3];
	for (int i = 0; !bad && i < PQntuples(r); i++) {
		uint64_t id = col_u(r, i, 0, UINT32_MAX, &bad), o = col_u(r, i, 1, 1, &bad);
		uint64_t pos = col_u(r, i, 2, CM_CHAIN_SLOTS, &bad);
		uint64_t tid = col_u(r, i, 3, UINT32_MAX, &bad), st = col_u(r, i, 4, 255, &bad);
		const struct cm_chain *found = bad ? NULL : cm_find_chain(m, (uint32_t)id);
		struct cm_chain *c = found ? &m->chains[found - m->chains] : NULL;

		if (!c || c->len + c->nout >= CM_CHAIN_SLOTS || pos != (o ? c->nout : c->len) ||
		    (!o && c->nout)) {
			bad = true;
		} else if (!o) {
			c->targets[c->len] = (uint32_t)tid;
			c->states[c->len++] = (uint8_t)st;
		} else {
			c->out[c->nout] = (uint32_t)tid;
			c->out_states[c->nout++] = (uint8_t)st;
		}
	}
	if (!bad)
		bad = load_services(m, rs[4]);
	if (!bad)
		return 0;
	log_error(COMP, "%s: corrupt cluster map row; restore the database from a backup",
		  s->db.where);
	return STRATA_EBADMSG;
}

static int pgm_load(void *impl, struct cluster_map *out)
{
	static const char *const sql[5] = {
		"SELECT id, addr, state FROM mgmt_nodes ORDER BY id",
		"SELECT id, node_id, capacity, used, state, fs, avail, full_mark FROM mgmt_targets"
		" ORDER BY id",
		"SELECT id, version FROM mgmt_chains ORDER BY id",
		"SELECT chain_id, out, pos, target_id, state FROM mgmt_chain_members"
		" ORDER BY chain_id, out, pos",
		"SELECT kind, node_id, addr, state, incarnation FROM mgmt_services"
		" ORDER BY kind, node_id",
	};
	static const uint32_t max[5] = { CM_MAX_NODES, CM_MAX_TARGETS, CM_MAX_CHAINS,
					 CM_MAX_CHAINS * CM_CHAIN_SLOTS,
					 CM_MAX_SERVICES };
	struct pgm *s = impl;
	PGresult *rs[5] = { NULL };
	struct cluster_map m;
	int rc;

	cm_init(&m);
	cm_init(out);
	if ((rc = reconnect(s)) ||
	    (rc = q(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL, "begin", NULL)))
		return rc;
	for (int i = 0; !rc && i < 5; i++)
		rc = q(s, sql[i], NULL, "reading the cluster map", &rs[i]);
	if (rc)
		goto out;
	for (int i = 0; i < 5; i++) {
		if ((uint32_t)PQntuples(rs[i]) > max[i]) {
			rc = STRATA_EBADMSG;
			goto out;
		}
	}
	rc = -ENOMEM;
	if (cm_reserve(&m, (uint32_t)PQntuples(rs[0]), (uint32_t)PQntuples(rs[1]),
		       (uint32_t)PQntuples(rs[2])) ||
	    cm_reserve_services(&m, (uint32_t)PQntuples(rs[4])))
		goto out;
	if ((rc = load_kv(s, &m)) || (rc = load_rows(s, &m, rs)))
		goto out;
	rc = cm_validate(&m);
	if (rc)
		log_error(COMP, "%s: the stored cluster map is inconsistent; restore the database"
			  " from a backup", s->db.where);
out:
	for (int i = 0; i < 5; i++)
		PQclear(rs[i]);
	rollback(s);
	if (rc) {
		cm_release(&m);
		return rc;
	}
	*out = m;
	return 0;
}

/* ---- per-node values ---- */

static int node_get(struct pgm *s, const char *sql, uint32_t node, int64_t *v)
{
	struct pg_params a = { 0 };
	PGresult *r;
	bool bad = false;
	int rc;

	if ((rc = reconnect(s)))
		return rc;
	pg_param_i64(&a, node);
	if ((rc = q(s, sql, &a, "reading a node's record", &r)))
		return rc;
	if (PQntuples(r) == 1)
		*v = col_i64(r, 0, 0, &bad);
	else
		rc = -ENOENT;
	PQclear(r);
	return bad ? STRATA_EBADMSG : rc;
}

static int node_set(struct pgm *s, const char *sql, uint32_t node, int64_t v)
{
	struct pg_params a = { 0 };
	int rc = wbegin(s);

	if (rc)
		return rc;
	pg_param_i64(&a, node);
	pg_param_i64(&a, v);
	return wend(s, q(s, sql, &a, "writing a node's record", NULL));
}

static int pgm_get_incarnation(void *impl, uint32_t node, uint64_t *inc)
{
	int64_t v = 0;
	int rc = node_get(impl, "SELECT inc FROM mgmt_incarnations WHERE node_id = $1", node, &v);

	if (!rc)
		*inc = (uint64_t)v;
	return rc;
}

static int pgm_set_incarnation(void *impl, uint32_t node, uint64_t inc)
{
	return node_set(impl, "INSERT INTO mgmt_incarnations VALUES ($1, $2) ON CONFLICT"
			" (node_id) DO UPDATE SET inc = excluded.inc", node, (int64_t)inc);
}

static int pgm_set_removed(void *impl, uint32_t node, int64_t when)
{
	return node_set(impl, "INSERT INTO mgmt_removed VALUES ($1, $2) ON CONFLICT DO NOTHING",
			node, when);
}

static int pgm_get_removed(void *impl, uint32_t node, int64_t *when)
{
	return node_get(impl, "SELECT at FROM mgmt_removed WHERE node_id = $1", node, when);
}

/* ---- the token registry ---- */

static int pgm_token_add(void *impl, const struct mgmt_token *t, const char *claims)
{
	struct pgm *s = impl;
	struct pg_params a = { 0 };
	int rc = wbegin(s);

	if (rc)
		return rc;
	pg_param_str(&a, t->id);
	pg_param_str(&a, t->tenant);
	pg_param_str(&a, claims);
	pg_param_i64(&a, t->created);
	pg_param_i64(&a, t->exp);
	pg_param_i64(&a, t->admin);
	rc = q_count(s, "INSERT INTO mgmt_tokens (id, tenant, claims, created, exp, admin, revoked)"
		     " VALUES ($1, $2, $3, $4, $5, $6, 0) ON CONFLICT DO NOTHING", &a,
		     "writing mgmt_tokens");
	return wend(s, rc < 0 ? rc : rc == 1 ? 0 : -EEXIST);
}

static int pgm_token_revoke(void *impl, const char *id, int64_t when)
{
	struct pgm *s = impl;
	struct pg_params a = { 0 };
	int rc = wbegin(s);

	if (rc)
		return rc;
	/* The first revocation's time stays; a second one only finds the row. */
	pg_param_i64(&a, when > 0 ? when : 1);
	pg_param_str(&a, id);
	rc = q_count(s, "UPDATE mgmt_tokens SET revoked = CASE WHEN revoked = 0 THEN $1 ELSE"
		     " revoked END WHERE id = $2", &a, "writing mgmt_tokens");
	return wend(s, rc < 0 ? rc : rc ? 0 : -ENOENT);
}

static int pgm_token_revoke_offline(void *impl, const char *id, int64_t exp, int64_t when)
{
	struct pgm *s = impl;
	struct pg_params a = { 0 };
	int rc = wbegin(s);

	if (rc)
		return rc;
	when = when > 0 ? when : 1;
	pg_param_str(&a, id);
	pg_param_i64(&a, when);
	pg_param_i64(&a, exp > 0 ? exp : 0);
	rc = q(s, "INSERT INTO mgmt_tokens (id, tenant, claims, created, exp, admin, revoked)"
	       " VALUES ($1, '(offline)', '{}', $2, $3, 0, $2) ON CONFLICT (id) DO UPDATE SET"
	       " revoked = CASE WHEN mgmt_tokens.revoked = 0 THEN excluded.revoked ELSE"
	       " mgmt_tokens.revoked END", &a, "writing mgmt_tokens", NULL);
	return wend(s, rc);
}

/* Text column into dst[cap]: a valid length, no NUL inside. */
static bool col_str(const PGresult *r, int row, int col, char *dst, size_t cap)
{
	int len = PQgetlength(r, row, col);

	if (PQgetisnull(r, row, col) || len <= 0 || (size_t)len >= cap)
		return false;
	memcpy(dst, PQgetvalue(r, row, col), (size_t)len);
	dst[len] = '\0';
	return strlen(dst) == (size_t)len;
}

static int pgm_token_list(void *impl, uint32_t max, struct mgmt_token **out, uint32_t *n,
			  uint32_t *total)
{
	struct pgm *s = impl;
	struct mgmt_token *ts = NULL;
	struct pg_params a = { 0 };
	PGresult *r = NULL, *c = NULL;
	bool bad = false;
	int rc, rows;

	*out = NULL;
	*n = *total = 0;
	if ((rc = reconnect(s)) ||
	    (rc = q(s, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL, "begin", NULL)))
		return rc;
	pg_param_i64(&a, max);
	if ((rc = q(s, "SELECT COUNT(*) FROM mgmt_tokens", NULL, "reading mgmt_tokens", &c)) ||
	    (rc = q(s, "SELECT id, tenant, created, exp, admin, revoked FROM mgmt_tokens"
		    " ORDER BY created, id LIMIT $1", &a, "reading mgmt_tokens", &r)))
		goto out;
	rows = PQntuples(r);
	if (rows && !(ts = calloc((size_t)rows, sizeof(*ts)))) {
		rc = -ENOMEM;
		goto out;
	}
	for (int i = 0; !bad && i < rows; i++) {
		struct mgmt_token *t = &ts[i];

		bad = !col_str(r, i, 0, t->id, sizeof(t->id)) ||
		      !col_str(r, i, 1, t->tenant, sizeof(t->tenant));
		t->created = (int64_t)col_u(r, i, 2, INT64_MAX, &bad);
		t->exp = (int64_t)col_u(r, i, 3, INT64_MAX, &bad);
		t->admin = col_u(r, i, 4, 1, &bad) != 0;
		t->revoked = (int64_t)col_u(r, i, 5, INT64_MAX, &bad);
	}
	*total = (uint32_t)col_u(c, 0, 0, UINT32_MAX, &bad);
	if (bad) {
		log_error(COMP, "%s: corrupt token registry row", s->db.where);
		rc = STRATA_EBADMSG;
		goto out;
	}
	*out = ts;
	*n = (uint32_t)rows;
	ts = NULL;
out:
	free(ts);
	PQclear(r);
	PQclear(c);
	rollback(s);
	if (rc)
		*total = 0;
	return rc;
}

static int pgm_revoked(void *impl, int64_t now, struct cluster_map *m)
{
	struct pgm *s = impl;
	struct pg_params a = { 0 };
	PGresult *r;
	uint32_t cnt = 0;
	int rc;

	m->nrevoked = 0;
	if ((rc = reconnect(s)))
		return rc;
	pg_param_i64(&a, now);
	if ((rc = q(s, "SELECT id FROM mgmt_tokens WHERE revoked != 0 AND (exp = 0 OR exp > $1)"
		    " ORDER BY id", &a, "reading mgmt_tokens", &r)))
		return rc;
	if ((uint32_t)PQntuples(r) > CM_MAX_REVOKED)
		rc = -ENOSPC;
	else if (PQntuples(r) && cm_reserve_revoked(m, (uint32_t)PQntuples(r)))
		rc = -ENOMEM;
	for (int i = 0; !rc && i < PQntuples(r); i++) {
		char id[TOKEN_ID_LEN + 1];

		if (!col_str(r, i, 0, id, sizeof(id)) || !token_id_ok(id) ||
		    (cnt && strcmp(id, m->revoked[cnt - 1]) <= 0)) {
			log_error(COMP, "%s: corrupt token registry row", s->db.where);
			rc = STRATA_EBADMSG;
			break;
		}
		memcpy(m->revoked[cnt++], id, sizeof(id));
	}
	PQclear(r);
	m->nrevoked = rc ? 0 : cnt;
	return rc;
}

/* ---- copying ---- */

/* Runs sql (no parameters) in a read-only snapshot, calling row(r, i, arg)
 * for each row until it returns nonzero. */
static int each_row(struct pgm *s, const char *sql,
		    int (*row)(const PGresult *r, int i, void *arg), void *arg)
{
	PGresult *r;
	int rc;

	if ((rc = reconnect(s)) || (rc = q(s, sql, NULL, "reading a table", &r)))
		return rc;
	for (int i = 0; !rc && i < PQntuples(r); i++)
		rc = row(r, i, arg);
	PQclear(r);
	return rc;
}

static int inc_row(const PGresult *r, int i, void *arg)
{
	struct mgmt_row_cb *c = arg;
	bool bad = false;
	uint32_t node = (uint32_t)col_u(r, i, 0, UINT32_MAX, &bad);
	int64_t v = col_i64(r, i, 1, &bad);

	return bad ? STRATA_EBADMSG : c->inc(c->arg, node, (uint64_t)v);
}

static int removed_row(const PGresult *r, int i, void *arg)
{
	struct mgmt_row_cb *c = arg;
	bool bad = false;
	uint32_t node = (uint32_t)col_u(r, i, 0, UINT32_MAX, &bad);
	int64_t v = col_i64(r, i, 1, &bad);

	return bad ? STRATA_EBADMSG : c->at(c->arg, node, v);
}

static int token_row(const PGresult *r, int i, void *arg)
{
	struct mgmt_row_cb *c = arg;
	struct mgmt_token t;
	bool bad;

	memset(&t, 0, sizeof(t));
	bad = !col_str(r, i, 0, t.id, sizeof(t.id)) || !col_str(r, i, 1, t.tenant, sizeof(t.tenant))
	      || PQgetisnull(r, i, 2);
	t.created = (int64_t)col_u(r, i, 3, INT64_MAX, &bad);
	t.exp = (int64_t)col_u(r, i, 4, INT64_MAX, &bad);
	t.admin = col_u(r, i, 5, 1, &bad) != 0;
	t.revoked = (int64_t)col_u(r, i, 6, INT64_MAX, &bad);
	return bad ? STRATA_EBADMSG : c->tok(c->arg, &t, PQgetvalue(r, i, 2));
}

static int pgm_each_incarnation(void *impl, int (*cb)(void *arg, uint32_t node, uint64_t inc),
				void *arg)
{
	struct mgmt_row_cb c = { .inc = cb, .arg = arg };

	return each_row(impl, "SELECT node_id, inc FROM mgmt_incarnations ORDER BY node_id",
			inc_row, &c);
}

static int pgm_each_removed(void *impl, int (*cb)(void *arg, uint32_t node, int64_t at),
			    void *arg)
{
	struct mgmt_row_cb c = { .at = cb, .arg = arg };

	return each_row(impl, "SELECT node_id, at FROM mgmt_removed ORDER BY node_id",
			removed_row, &c);
}

static int pgm_each_token(void *impl, int (*cb)(void *arg, const struct mgmt_token *t,
						const char *claims), void *arg)
{
	struct mgmt_row_cb c = { .tok = cb, .arg = arg };

	return each_row(impl, "SELECT id, tenant, claims, created, exp, admin, revoked FROM"
			" mgmt_tokens ORDER BY id", token_row, &c);
}

/* ---- the leader lease ---- */

static int pgm_lease(void *impl, const char *holder, const char *addr, uint32_t ttl_ms,
		     struct mgmt_lease *out)
{
	struct pgm *s = impl;
	struct pg_params a = { 0 };
	PGresult *r = NULL;
	bool bad = false;
	int rc;

	if ((rc = reconnect(s)) || (rc = q(s, "BEGIN", NULL, "begin", NULL)))
		return rc;
	pg_param_str(&a, holder);
	pg_param_str(&a, addr);
	pg_param_i64(&a, ttl_ms);
	/* Renewed by its holder (same term), or taken once expired (a new
	 * term); the database's clock decides, never ours. Also taken at
	 * once (a new term) by a later process of the holder's node at the
	 * holder's address ("node N-<incarnation>", mgmt_service.c): the
	 * holder is gone, since its successor serves at that address. */
	rc = q(s, "INSERT INTO mgmt_lease AS l (id, holder, addr, term, expires) VALUES (1, $1,"
	       " $2, 1, clock_timestamp() + $3 * interval '1 millisecond') ON CONFLICT (id) DO"
	       " UPDATE SET holder = excluded.holder, addr = excluded.addr, term = CASE WHEN"
	       " l.holder = excluded.holder THEN l.term ELSE l.term + 1 END, expires ="
	       " excluded.expires WHERE l.holder = excluded.holder OR l.expires <="
	       " clock_timestamp() OR (l.addr = excluded.addr AND split_part(l.holder, '-', 1) ="
	       " split_part(excluded.holder, '-', 1))", &a, "taking the leader lease", NULL);
	a.n = 1;
	if (!rc)
		rc = q(s, "SELECT holder = $1, term, addr, GREATEST(0, CEIL(EXTRACT(EPOCH FROM"
		       " expires - clock_timestamp()) * 1000))::bigint FROM mgmt_lease WHERE id = 1",
		       &a, "reading the leader lease", &r);
	if (!rc && PQntuples(r) == 1) {
		int alen = PQgetlength(r, 0, 2);

		out->leader = !strcmp(PQgetvalue(r, 0, 0), "t");
		out->term = col_u(r, 0, 1, INT64_MAX, &bad);
		out->left_ms = (uint32_t)col_u(r, 0, 3, UINT32_MAX, &bad);
		if (alen >= 0 && alen < CM_ADDR_LEN)
			memcpy(out->addr, PQgetvalue(r, 0, 2), (size_t)alen + 1);
	} else if (!rc) {
		bad = true;
	}
	PQclear(r);
	if (!rc && bad) {
		log_error(COMP, "%s: corrupt leader lease row", s->db.where);
		rc = STRATA_EBADMSG;
	}
	return wend(s, rc);
}

static int pgm_resign(void *impl, const char *holder)
{
	struct pgm *s = impl;
	struct pg_params a = { 0 };
	int rc;

	if ((rc = reconnect(s)))
		return rc;
	pg_param_str(&a, holder);
	rc = q_count(s, "UPDATE mgmt_lease SET expires = clock_timestamp() WHERE id = 1 AND"
		     " holder = $1", &a, "giving the leader lease up");
	return rc < 0 ? rc : 0;
}

static void pgm_fence(void *impl, uint64_t term)
{
	struct pgm *s = impl;

	s->term = term;
}

static void pgm_close(void *impl)
{
	struct pgm *s = impl;

	if (!s)
		return;
	pg_session_release(&s->db);
	free(s);
}

static const struct mgmt_store_ops pgm_ops = {
	.close = pgm_close,
	.save = pgm_save,
	.load = pgm_load,
	.get_incarnation = pgm_get_incarnation,
	.set_incarnation = pgm_set_incarnation,
	.set_removed = pgm_set_removed,
	.get_removed = pgm_get_removed,
	.token_add = pgm_token_add,
	.token_revoke = pgm_token_revoke,
	.token_revoke_offline = pgm_token_revoke_offline,
	.token_list = pgm_token_list,
	.revoked = pgm_revoked,
	.each_incarnation = pgm_each_incarnation,
	.each_removed = pgm_each_removed,
	.each_token = pgm_each_token,
	.lease = pgm_lease,
	.resign = pgm_resign,
	.fence = pgm_fence,
};

/* ---- opening ---- */

/* Creates or migrates the schema in one transaction, under the lock. */
static int setup_schema(struct pgm *s)
{
	struct pg_params a = { 0 };
	PGresult *r;
	int v = 0, rc;

	if ((rc = q(s, "BEGIN", NULL, "begin", NULL)))
		return rc;
	rc = q(s, "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK_KEY ")", NULL,
	       "taking the schema lock", NULL);
	if (!rc)
		rc = q(s, "CREATE TABLE IF NOT EXISTS schema_version (component text PRIMARY KEY,"
		       " version integer NOT NULL)", NULL, "creating schema_version", NULL);
	if (!rc)
		rc = q(s, "SELECT version FROM schema_version WHERE component = 'mgmt'", NULL,
		       "reading the schema version", &r);
	if (rc)
		goto fail;
	v = PQntuples(r) == 1 ? (int)strtol(PQgetvalue(r, 0, 0), NULL, 10) : 0;
	PQclear(r);
	if (v > SCHEMA_VERSION) {
		log_error(COMP, "%s has cluster state schema version %d, newer than this build's"
			  " (%d); run a newer stratad", s->db.where, v, SCHEMA_VERSION);
		rc = STRATA_EBADMSG;
		goto fail;
	}
	for (int i = v; !rc && i < SCHEMA_VERSION; i++) {
		rc = q(s, migrations[i], NULL, "migrating the schema", NULL);
		if (!rc)
			log_info(COMP, "%s: cluster state schema %d -> %d", s->db.where, i, i + 1);
	}
	pg_param_i64(&a, SCHEMA_VERSION);
	if (!rc)
		rc = q(s, "INSERT INTO schema_version VALUES ('mgmt', $1) ON CONFLICT (component)"
		       " DO UPDATE SET version = excluded.version", &a,
		       "recording the schema version", NULL);
	if (!rc)
		return q(s, "COMMIT", NULL, "committing the schema", NULL);
fail:
	rollback(s);
	return rc;
}

int mgmt_store_pg_open(const char *conninfo, const char *passfile,
		       const struct mgmt_store_ops **ops, void **impl)
{
	/* A statement stuck longer than a lease is of no use to a leader. */
	struct pg_conn_opts o = { .app = "stratad-mgmt", .comp = COMP, .key = "mgmt.store",
				  .options = "-c statement_timeout=10000",
				  .connect_timeout_s = 5 };
	struct pgm *s;
	int rc;

	*ops = NULL;
	*impl = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	rc = pg_session_open(&s->db, COMP, conninfo, passfile, &o);
	if (!rc)
		rc = setup_schema(s);
	if (rc) {
		pgm_close(s);
		return rc;
	}
	log_info(COMP, "%s: cluster state schema version %d", s->db.where, SCHEMA_VERSION);
	*ops = &pgm_ops;
	*impl = s;
	return 0;
}
