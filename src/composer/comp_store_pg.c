/*
 * The PostgreSQL backend of the composer's store (comp_store.h), through
 * libpq: the compositions in the database mgmt's state is in, so they
 * outlive node 1's disk.
 *
 * Tables composer_compositions, composer_gpus (one row per GPU held, key
 * (node, gpu): one owner per GPU, as comp_gpus in SQLite) and
 * composer_usage_bytes, with the SQLite store's columns. Every statement
 * is prepared once per connection (again after a reconnect); parameters
 * are text. Counts above INT64_MAX are stored as two's complement in
 * bigint columns and read back whole.
 *
 * The schema is versioned as mgmt's (mgmt/mgmt_store_pg.c): a row
 * 'composer' in schema_version, ordered migrations under the advisory
 * lock meta and mgmt take, so the three may set up one database at once.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/pg_conn.h"
#include "composer/comp_store.h"
#include "mgmt/mgmt_store.h"
#include "strata/errors.h"

#define COMP "composer-pg"
/* The meta and mgmt stores' schema lock: one set-up at a time for all. */
#define SCHEMA_LOCK_KEY "6076327939519844691"

static const char *const migrations[] = {
	/* 0 -> 1: the SQLite store's tables as of generation and zones. */
	"CREATE TABLE composer_compositions (seq bigint PRIMARY KEY,"
	" id text COLLATE \"C\" UNIQUE NOT NULL, name text NOT NULL,"
	" tenant text COLLATE \"C\" NOT NULL, state bigint NOT NULL, reason text NOT NULL,"
	" gpu_count bigint NOT NULL, gpu_model text NOT NULL, same_node bigint NOT NULL,"
	" storage bigint NOT NULL, memory bigint NOT NULL, retain bigint NOT NULL,"
	" created bigint NOT NULL, changed bigint NOT NULL, expires bigint NOT NULL,"
	" mem_share bigint NOT NULL, mem_nodes bigint NOT NULL, token_id text NOT NULL,"
	" gpus text NOT NULL, owner_uid bigint NOT NULL, owner_gid bigint NOT NULL,"
	" paths text NOT NULL, qos_mbps bigint NOT NULL, qos_iops bigint NOT NULL,"
	" gpu_zone text NOT NULL, same_zone bigint NOT NULL, generation bigint NOT NULL);"
	/* The GPUs held now: one row per GPU, so one owner per GPU. */
	"CREATE TABLE composer_gpus (node bigint NOT NULL, gpu bigint NOT NULL,"
	" comp text NOT NULL, PRIMARY KEY (node, gpu));"
	"CREATE INDEX composer_gpus_comp ON composer_gpus (comp);"
	"CREATE TABLE composer_usage_bytes (at bigint NOT NULL,"
	" tenant text COLLATE \"C\" NOT NULL, read bigint NOT NULL, written bigint NOT NULL);"
	"CREATE INDEX composer_usage_bytes_at ON composer_usage_bytes (at);",
};
#define SCHEMA_VERSION ((int)(sizeof(migrations) / sizeof(migrations[0])))

#define COLS "seq, id, name, tenant, state, reason, gpu_count, gpu_model, same_node, storage," \
	" memory, retain, created, changed, expires, mem_share, mem_nodes, token_id, gpus," \
	" owner_uid, owner_gid, paths, qos_mbps, qos_iops, gpu_zone, same_zone, generation"

enum pst { P_LOAD, P_PUT, P_FREE_GPUS, P_HOLD_GPU, P_ADD_BYTES, P_SUM_BYTES, P_COUNT };

static const char *const pstmts[P_COUNT] = {
	[P_LOAD] = "SELECT " COLS " FROM composer_compositions ORDER BY seq",
	[P_PUT] = "INSERT INTO composer_compositions (" COLS ") VALUES ($1, $2, $3, $4, $5, $6,"
		  " $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22,"
		  " $23, $24, $25, $26, $27) ON CONFLICT (seq) DO UPDATE SET id = excluded.id,"
		  " name = excluded.name, tenant = excluded.tenant, state = excluded.state,"
		  " reason = excluded.reason, gpu_count = excluded.gpu_count,"
		  " gpu_model = excluded.gpu_model, same_node = excluded.same_node,"
		  " storage = excluded.storage, memory = excluded.memory, retain = excluded.retain,"
		  " created = excluded.created, changed = excluded.changed,"
		  " expires = excluded.expires, mem_share = excluded.mem_share,"
		  " mem_nodes = excluded.mem_nodes, token_id = excluded.token_id,"
		  " gpus = excluded.gpus, owner_uid = excluded.owner_uid,"
		  " owner_gid = excluded.owner_gid, paths = excluded.paths,"
		  " qos_mbps = excluded.qos_mbps, qos_iops = excluded.qos_iops,"
		  " gpu_zone = excluded.gpu_zone, same_zone = excluded.same_zone,"
		  " generation = excluded.generation",
	[P_FREE_GPUS] = "DELETE FROM composer_gpus WHERE comp = $1",
	[P_HOLD_GPU] = "INSERT INTO composer_gpus (node, gpu, comp) VALUES ($1, $2, $3)",
	[P_ADD_BYTES] = "INSERT INTO composer_usage_bytes (at, tenant, read, written)"
			" VALUES ($1, $2, $3, $4)",
	[P_SUM_BYTES] = "SELECT tenant, SUM(read), SUM(written) FROM composer_usage_bytes"
			" WHERE at >= $1 AND at <= $2 GROUP BY tenant ORDER BY tenant",
};

struct pgc {
	struct pg_session db;	/* the connection (common/pg_conn.h) */
	uint64_t term;		/* puts are fenced by this lease term (0: not) */
	int has_lease;		/* the database holds mgmt's lease: 1, 0, -1 not known */
};

static int check(struct pgc *s, PGresult *r, const char *what, PGresult **out)
{
	return pg_session_check(&s->db, r, what, out);
}

/* Runs SQL text without parameters (transactions, set-up). */
static int exec_sql(struct pgc *s, const char *sql, const char *what, PGresult **out)
{
	if (s->db.lost)
		return -EIO;
	return check(s, PQexec(s->db.conn, sql), what, out);
}

/* Runs prepared statement id with a; *out gets the result (PQclear it)
 * when out is not NULL. */
static int run(struct pgc *s, enum pst id, const struct pg_params *a, const char *what,
	       PGresult **out)
{
	char name[16];

	if (s->db.lost)
		return -EIO;
	snprintf(name, sizeof(name), "c%d", (int)id);
	return check(s, PQexecPrepared(s->db.conn, name, a ? a->n : 0, a ? a->v : NULL, NULL, NULL, 0),
		     what, out);
}

static int prepare_all(struct pgc *s)
{
	for (int i = 0; i < P_COUNT; i++) {
		char name[16];
		int rc;

		snprintf(name, sizeof(name), "c%d", i);
		rc = check(s, PQprepare(s->db.conn, name, pstmts[i], 0, NULL), "preparing a statement",
			   NULL);
		if (rc) {
			log_error(COMP, "%s: statement %d: %s", s->db.where, i, pstmts[i]);
			return rc == -EEXIST ? -EIO : rc;
		}
	}
	return 0;
}

static int prepare_again(void *arg)
{
	return prepare_all(arg);
}

/* Prepared statements belong to the session: made again after a reset. */
static int reconnect(struct pgc *s)
{
	return pg_session_reconnect(&s->db, prepare_again, s);
}

static void rollback(struct pgc *s)
{
	if (!s->db.lost && PQtransactionStatus(s->db.conn) != PQTRANS_IDLE)
		(void)exec_sql(s, "ROLLBACK", "rollback", NULL);
}

static int64_t col_i64(const PGresult *r, int row, int col)
{
	const char *v = PQgetvalue(r, row, col);

	return PQgetisnull(r, row, col) ? 0 : (int64_t)strtoll(v, NULL, 10);
}

static void col_str(const PGresult *r, int row, int col, char *out, size_t len)
{
	snprintf(out, len, "%s", PQgetisnull(r, row, col) ? "" : PQgetvalue(r, row, col));
}

/* ---- compositions ---- */

static void read_row(const PGresult *r, int i, struct comp *c)
{
	memset(c, 0, sizeof(*c));
	c->seq = (uint64_t)col_i64(r, i, 0);
	col_str(r, i, 1, c->id, sizeof(c->id));
	col_str(r, i, 2, c->name, sizeof(c->name));
	col_str(r, i, 3, c->tenant, sizeof(c->tenant));
	c->state = (uint32_t)col_i64(r, i, 4);
	col_str(r, i, 5, c->reason, sizeof(c->reason));
	c->rq.gpus = (uint32_t)col_i64(r, i, 6);
	col_str(r, i, 7, c->rq.model, sizeof(c->rq.model));
	c->rq.same_node = col_i64(r, i, 8) != 0;
	c->rq.storage = (uint64_t)col_i64(r, i, 9);
	c->rq.memory = (uint64_t)col_i64(r, i, 10);
	c->retain = col_i64(r, i, 11) != 0;
	c->created = col_i64(r, i, 12);
	c->changed = col_i64(r, i, 13);
	c->expires = col_i64(r, i, 14);
	c->mem_share = (uint64_t)col_i64(r, i, 15);
	c->mem_nodes = (uint32_t)col_i64(r, i, 16);
	col_str(r, i, 17, c->token_id, sizeof(c->token_id));
	comp_gpus_parse(PQgetvalue(r, i, 18), c);
	c->owner_uid = (uint32_t)col_i64(r, i, 19);
	c->owner_gid = (uint32_t)col_i64(r, i, 20);
	if (comp_paths_parse(PQgetvalue(r, i, 21), c))
		log_warn(COMP, "store: %s: its paths '%s' do not read; it reaches only its volume",
			 c->id, PQgetvalue(r, i, 21));
	c->qos_mbps = (uint32_t)col_i64(r, i, 22);
	c->qos_iops = (uint32_t)col_i64(r, i, 23);
	col_str(r, i, 24, c->rq.zone, sizeof(c->rq.zone));
	c->rq.same_zone = col_i64(r, i, 25) != 0;
	c->generation = (uint64_t)col_i64(r, i, 26);
	if (c->state > COMP_STATE_LAST)
		c->state = COMP_FAILED;
}

static int pgc_load(void *impl, struct comp **out, uint32_t *n)
{
	struct pgc *s = impl;
	struct comp *v = NULL;
	PGresult *r;
	int rc, rows;

	*out = NULL;
	*n = 0;
	if ((rc = reconnect(s)) || (rc = run(s, P_LOAD, NULL, "loading the compositions", &r)))
		return rc;
	rows = PQntuples(r);
	if (rows && !(v = calloc((size_t)rows, sizeof(*v)))) {
		PQclear(r);
		return -ENOMEM;
	}
	for (int i = 0; i < rows; i++)
		read_row(r, i, &v[i]);
	PQclear(r);
	*out = v;
	*n = (uint32_t)rows;
	return 0;
}

static int put_row(struct pgc *s, const struct comp *c, uint64_t generation, const char *gpus,
		   const char *paths)
{
	struct pg_params a = { 0 };

	pg_param_i64(&a, (int64_t)c->seq);
	pg_param_str(&a, c->id);
	pg_param_str(&a, c->name);
	pg_param_str(&a, c->tenant);
	pg_param_i64(&a, c->state);
	pg_param_str(&a, c->reason);
	pg_param_i64(&a, c->rq.gpus);
	pg_param_str(&a, c->rq.model);
	pg_param_i64(&a, c->rq.same_node);
	pg_param_i64(&a, (int64_t)c->rq.storage);
	pg_param_i64(&a, (int64_t)c->rq.memory);
	pg_param_i64(&a, c->retain);
	pg_param_i64(&a, c->created);
	pg_param_i64(&a, c->changed);
	pg_param_i64(&a, c->expires);
	pg_param_i64(&a, (int64_t)c->mem_share);
	pg_param_i64(&a, c->mem_nodes);
	pg_param_str(&a, c->token_id);
	pg_param_str(&a, gpus);
	pg_param_i64(&a, c->owner_uid);
	pg_param_i64(&a, c->owner_gid);
	pg_param_str(&a, paths);
	pg_param_i64(&a, c->qos_mbps);
	pg_param_i64(&a, c->qos_iops);
	pg_param_str(&a, c->rq.zone);
	pg_param_i64(&a, c->rq.same_zone);
	pg_param_i64(&a, (int64_t)generation);
	return run(s, P_PUT, &a, "writing a composition", NULL);
}

static int put_gpus(struct pgc *s, const struct comp *c)
{
	struct pg_params a = { 0 };
	int rc;

	pg_param_str(&a, c->id);
	if ((rc = run(s, P_FREE_GPUS, &a, "freeing GPUs", NULL)))
		return rc;
	for (uint32_t i = 0; comp_state_holds(c->state) && i < c->ngpus; i++) {
		struct pg_params g = { 0 };

		pg_param_i64(&g, c->gpus[i].node);
		pg_param_i64(&g, c->gpus[i].index);
		pg_param_str(&g, c->id);
		rc = run(s, P_HOLD_GPU, &g, "holding a GPU", NULL);
		if (rc == -EEXIST)
			log_error(COMP, "GPU %u of node %u is held by another composition: '%s' refused",
				  c->gpus[i].index, c->gpus[i].node, c->id);
		if (rc)
			return rc;
	}
	return 0;
}

/* Whether the database holds mgmt's leader lease (looked up once): 1 or
 * 0, or -1 when the lookup failed (not fenced this time). */
static int has_lease(struct pgc *s)
{
	PGresult *r;

	if (s->has_lease >= 0)
		return s->has_lease;
	if (exec_sql(s, "SELECT to_regclass('mgmt_lease') IS NOT NULL", "looking for the lease",
		     &r))
		return -1;
	s->has_lease = !strcmp(PQgetvalue(r, 0, 0), "t");
	PQclear(r);
	if (!s->has_lease)
		log_warn(COMP, "%s: composer.store is not mgmt's database (no leader lease"
			 " there): the composer's writes are not fenced by mgmt's term", s->db.where);
	return s->has_lease;
}

static void pgc_fence(void *impl, uint64_t term)
{
	struct pgc *s = impl;

	s->term = term;
}

static int pgc_put(void *impl, const struct comp *c, uint64_t generation)
{
	struct pgc *s = impl;
	char gpus[COMP_GPUS_TEXT_MAX];
	char *paths = comp_paths_text(c);
	int rc;

	if (!paths)
		return -ENOMEM;
	comp_gpus_text(c, gpus, sizeof(gpus));
	rc = reconnect(s);
	if (!rc)
		rc = exec_sql(s, "BEGIN", "begin", NULL);
	if (!rc && s->term && has_lease(s) == 1 &&
	    (rc = mgmt_lease_fence(&s->db, s->term, "composer")))
		rollback(s);
	else if (!rc) {
		rc = put_row(s, c, generation, gpus, paths);
		if (!rc)
			rc = put_gpus(s, c);
		if (!rc)
			rc = exec_sql(s, "COMMIT", "commit", NULL);
		if (rc)
			rollback(s);
	}
	free(paths);
	return rc;
}

/* ---- usage ---- */

static int pgc_add_bytes(void *impl, int64_t at, const char *tenant, uint64_t read,
			 uint64_t written)
{
	struct pgc *s = impl;
	struct pg_params a = { 0 };
	int rc;

	pg_param_i64(&a, at);
	pg_param_str(&a, tenant);
	pg_param_i64(&a, comp_i64(read));
	pg_param_i64(&a, comp_i64(written));
	if ((rc = reconnect(s)))
		return rc;
	rc = run(s, P_ADD_BYTES, &a, "writing composer_usage_bytes", NULL);
	return rc == -EEXIST ? -EIO : rc;
}

static int pgc_sum_bytes(void *impl, int64_t since, int64_t until,
			 void (*fn)(void *arg, const char *tenant, uint64_t read, uint64_t written),
			 void *arg)
{
	struct pgc *s = impl;
	struct pg_params a = { 0 };
	PGresult *r;
	int rc;

	pg_param_i64(&a, since);
	pg_param_i64(&a, until);
	if ((rc = reconnect(s)) ||
	    (rc = run(s, P_SUM_BYTES, &a, "reading composer_usage_bytes", &r)))
		return rc;
	for (int i = 0; i < PQntuples(r); i++) {
		int64_t rd = col_i64(r, i, 1), wr = col_i64(r, i, 2);

		fn(arg, PQgetvalue(r, i, 0), rd > 0 ? (uint64_t)rd : 0, wr > 0 ? (uint64_t)wr : 0);
	}
	PQclear(r);
	return 0;
}

static void pgc_close(void *impl)
{
	struct pgc *s = impl;

	if (!s)
		return;
	pg_session_release(&s->db);
	free(s);
}

static const struct comp_store_ops pgc_ops = {
	.close = pgc_close,
	.load = pgc_load,
	.put = pgc_put,
	.fence = pgc_fence,
	.add_bytes = pgc_add_bytes,
	.sum_bytes = pgc_sum_bytes,
};

/* ---- opening ---- */

/* Creates or migrates the schema in one transaction, under the lock. */
static int setup_schema(struct pgc *s)
{
	char sql[160];
	PGresult *r;
	int v = 0, rc;

	if ((rc = exec_sql(s, "BEGIN", "begin", NULL)))
		return rc;
	rc = exec_sql(s, "SELECT pg_advisory_xact_lock(" SCHEMA_LOCK_KEY ")",
		      "taking the schema lock", NULL);
	if (!rc)
		rc = exec_sql(s, "CREATE TABLE IF NOT EXISTS schema_version (component text PRIMARY"
			      " KEY, version integer NOT NULL)", "creating schema_version", NULL);
	if (!rc)
		rc = exec_sql(s, "SELECT version FROM schema_version WHERE component = 'composer'",
			      "reading the schema version", &r);
	if (rc)
		goto fail;
	v = PQntuples(r) == 1 ? (int)strtol(PQgetvalue(r, 0, 0), NULL, 10) : 0;
	PQclear(r);
	if (v > SCHEMA_VERSION) {
		log_error(COMP, "%s has composer schema version %d, newer than this build's (%d);"
			  " run a newer stratad", s->db.where, v, SCHEMA_VERSION);
		rc = STRATA_EBADMSG;
		goto fail;
	}
	for (int i = v; !rc && i < SCHEMA_VERSION; i++) {
		rc = exec_sql(s, migrations[i], "migrating the schema", NULL);
		if (!rc)
			log_info(COMP, "%s: composer schema %d -> %d", s->db.where, i, i + 1);
	}
	snprintf(sql, sizeof(sql), "INSERT INTO schema_version VALUES ('composer', %d) ON CONFLICT"
		 " (component) DO UPDATE SET version = excluded.version", SCHEMA_VERSION);
	if (!rc)
		rc = exec_sql(s, sql, "recording the schema version", NULL);
	if (!rc)
		return exec_sql(s, "COMMIT", "committing the schema", NULL);
fail:
	rollback(s);
	return rc;
}

int comp_store_pg_open(const char *conninfo, const char *passfile,
		       const struct comp_store_ops **ops, void **impl)
{
	struct pg_conn_opts o = { .app = "stratad-composer", .comp = COMP, .key = "composer.store",
				  .options = "-c statement_timeout=10000",
				  .connect_timeout_s = 5 };
	struct pgc *s;
	int rc;

	*ops = NULL;
	*impl = NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->has_lease = -1;
	rc = pg_session_open(&s->db, COMP, conninfo, passfile, &o);
	if (!rc)
		rc = setup_schema(s);
	if (!rc)
		rc = prepare_all(s);
	if (rc) {
		pgc_close(s);
		return rc;
	}
	log_info(COMP, "%s: composer schema version %d", s->db.where, SCHEMA_VERSION);
	*ops = &pgc_ops;
	*impl = s;
	return 0;
}
