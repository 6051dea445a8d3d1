/*
 * Unit tests of the composer's store (src/composer/comp_store.c): a
 * composition round-trips with its GPUs, a reopened store holds what was
 * written, one GPU is never held by two compositions (the store refuses
 * and writes nothing), a released composition frees its GPUs, and each
 * write moves the generation (the System's ETag) on; bytes moved sum per
 * tenant over a window.
 *
 * On SQLite, or, with $STRATA_TEST_PG_HOST set (tests/pg_tmp.sh run sets
 * it, as meson's test_comp_store_pg does), on PostgreSQL: a fresh
 * database per test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include <sqlite3.h>

#include "common/log.h"
#include "composer/comp_store.h"
#include "meta_fx.h"
#include "strata/errors.h"

static char dir[] = "/tmp/test_comp_store.XXXXXX";
static char path[256];
/* PostgreSQL (meta_fx.h's pg_host, pg_admin): this test's database. */
static char pg_db[64];
static unsigned pg_serial;

static int setup(void **state)
{
	char sql[96];

	(void)state;
	log_set_level(LOG_OFF);
	snprintf(dir, sizeof(dir), "/tmp/test_comp_store.XXXXXX");	/* a fresh template */
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/composer.db", dir);
	if (pg_host) {
		snprintf(pg_db, sizeof(pg_db), "cs%u_%d", pg_serial++, (int)getpid());
		snprintf(sql, sizeof(sql), "CREATE DATABASE %s", pg_db);
		pg_admin("postgres", sql);
		snprintf(path, sizeof(path), "postgresql:///%s?host=%s&port=%s&user=postgres", pg_db,
			 pg_host, pg_port);
	}
	return 0;
}

static int teardown(void **state)
{
	static const char *const sfx[] = { "", "-wal", "-shm" };
	char f[96];

	(void)state;
	if (pg_host) {
		snprintf(f, sizeof(f), "DROP DATABASE IF EXISTS %s WITH (FORCE)", pg_db);
		pg_admin("postgres", f);
		rmdir(dir);
		return 0;
	}
	for (size_t i = 0; i < 3; i++) {
		snprintf(f, sizeof(f), "%s%s", path, sfx[i]);
		unlink(f);
	}
	rmdir(dir);
	return 0;
}

static void make(struct comp *c, uint64_t seq, uint32_t node, uint32_t first, uint32_t n)
{
	memset(c, 0, sizeof(*c));
	c->seq = seq;
	snprintf(c->id, sizeof(c->id), "comp-%llu", (unsigned long long)seq);
	snprintf(c->tenant, sizeof(c->tenant), "t%llu", (unsigned long long)seq);
	c->state = COMP_COMPOSED;
	c->rq.gpus = n;
	snprintf(c->rq.model, sizeof(c->rq.model), "H100-80GB");
	c->rq.same_node = true;
	snprintf(c->rq.zone, sizeof(c->rq.zone), "rack-%u", (unsigned)seq);
	c->rq.same_zone = true;
	c->rq.storage = 1ull << 30;
	c->rq.memory = 256ull << 20;
	c->mem_share = 128ull << 20;
	c->mem_nodes = 2;
	c->created = 1000;
	c->expires = 5000;
	c->retain = true;
	snprintf(c->token_id, sizeof(c->token_id), "0123456789abcdef");
	c->owner_uid = 1000 + (uint32_t)seq;
	c->owner_gid = 2000 + (uint32_t)seq;
	c->npaths = 2;
	snprintf(c->paths[0].prefix, sizeof(c->paths[0].prefix), "/datasets/\"quoted\" x");
	snprintf(c->paths[1].prefix, sizeof(c->paths[1].prefix), "/results/%u", (unsigned)seq);
	c->paths[1].write = true;
	c->qos_mbps = 20 + (uint32_t)seq;
	c->qos_iops = 300;
	c->ngpus = n;
	for (uint32_t i = 0; i < n; i++) {
		c->gpus[i].node = node;
		c->gpus[i].index = first + i;
		snprintf(c->gpus[i].model, sizeof(c->gpus[i].model), "H100-80GB");
	}
}

static void test_round_trip_and_exclusive(void **state)
{
	struct comp_store *s;
	struct comp a, b, *all;
	uint32_t n;

	(void)state;
	assert_int_equal(comp_store_open(path, &s), 0);
	make(&a, 1, 7, 0, 2);
	assert_int_equal(comp_store_put(s, &a), 0);
	assert_int_equal(a.generation, 1);
	/* GPU 1 of node 7 is a's: b is refused, not written, its generation
	 * unmoved. */
	make(&b, 2, 7, 1, 2);
	assert_int_equal(comp_store_put(s, &b), -EEXIST);
	assert_int_equal(b.generation, 0);
	assert_int_equal(comp_store_load(s, &all, &n), 0);
	assert_int_equal(n, 1);
	free(all);
	/* Released, a holds nothing: b fits. */
	a.state = COMP_RELEASED;
	assert_int_equal(comp_store_put(s, &a), 0);
	assert_int_equal(a.generation, 2);
	assert_int_equal(comp_store_put(s, &b), 0);
	assert_int_equal(comp_store_put(s, &b), 0);
	assert_int_equal(b.generation, 2);
	comp_store_close(s);

	assert_int_equal(comp_store_open(path, &s), 0);
	assert_int_equal(comp_store_load(s, &all, &n), 0);
	assert_int_equal(n, 2);
	assert_string_equal(all[0].id, "comp-1");
	assert_int_equal(all[0].state, COMP_RELEASED);
	assert_int_equal(all[0].ngpus, 2);	/* kept for the record */
	assert_string_equal(all[1].id, "comp-2");
	assert_int_equal(all[1].state, COMP_COMPOSED);
	assert_string_equal(all[1].tenant, "t2");
	assert_int_equal(all[1].ngpus, 2);
	assert_int_equal(all[1].gpus[1].node, 7);
	assert_int_equal(all[1].gpus[1].index, 2);
	assert_string_equal(all[1].gpus[1].model, "H100-80GB");
	assert_int_equal(all[1].rq.storage, 1ull << 30);
	assert_int_equal(all[1].mem_share, 128ull << 20);
	assert_true(all[1].rq.same_node);
	assert_true(all[1].retain);
	assert_int_equal(all[1].expires, 5000);
	assert_string_equal(all[1].token_id, "0123456789abcdef");
	assert_int_equal(all[1].owner_uid, 1002);
	assert_int_equal(all[1].owner_gid, 2002);
	assert_int_equal(all[1].npaths, 2);
	assert_string_equal(all[1].paths[0].prefix, "/datasets/\"quoted\" x");
	assert_false(all[1].paths[0].write);
	assert_string_equal(all[1].paths[1].prefix, "/results/2");
	assert_true(all[1].paths[1].write);
	assert_int_equal(all[1].qos_mbps, 22);
	assert_int_equal(all[1].qos_iops, 300);
	assert_string_equal(all[1].rq.zone, "rack-2");
	assert_true(all[1].rq.same_zone);
	assert_int_equal(all[0].generation, 2);
	assert_int_equal(all[1].generation, 2);
	free(all);
	/* a cannot take its GPU back while b holds it. */
	a.state = COMP_COMPOSED;
	assert_int_equal(comp_store_put(s, &a), -EEXIST);
	comp_store_close(s);
	assert_string_equal(comp_state_name(COMP_DECOMPOSING), "Decomposing");
	assert_true(comp_state_holds(COMP_DEGRADED));
	assert_false(comp_state_holds(COMP_FAILED));
}

/* A store written before compositions had owners, paths, caps, zones
 * and generations opens, and its compositions are nobody's, reach only
 * their volumes, move without caps and have no zone, as they were, at
 * generation 1. */
static void test_store_without_owners(void **state)
{
	struct comp_store *s;
	struct comp *all;
	sqlite3 *db;
	uint32_t n;

	(void)state;
	if (pg_host)
		skip();	/* SQLite's columns added after the first release */
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db,
		"CREATE TABLE compositions (seq INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL,"
		" name TEXT NOT NULL, tenant TEXT NOT NULL, state INTEGER NOT NULL,"
		" reason TEXT NOT NULL, gpu_count INTEGER NOT NULL, gpu_model TEXT NOT NULL,"
		" same_node INTEGER NOT NULL, storage INTEGER NOT NULL, memory INTEGER NOT NULL,"
		" retain INTEGER NOT NULL, created INTEGER NOT NULL, changed INTEGER NOT NULL,"
		" expires INTEGER NOT NULL, mem_share INTEGER NOT NULL, mem_nodes INTEGER NOT NULL,"
		" token_id TEXT NOT NULL, gpus TEXT NOT NULL);"
		"INSERT INTO compositions VALUES (1, 'comp-1', 'old', 't', 2, '', 0, '', 0, 1048576,"
		" 0, 0, 1, 1, 0, 0, 0, '', '');", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(comp_store_open(path, &s), 0);
	assert_int_equal(comp_store_load(s, &all, &n), 0);
	assert_int_equal(n, 1);
	assert_string_equal(all[0].name, "old");
	assert_int_equal(all[0].owner_uid, 65534);
	assert_int_equal(all[0].owner_gid, 65534);
	assert_int_equal(all[0].npaths, 0);
	assert_int_equal(all[0].qos_mbps, 0);	/* no caps, as before */
	assert_int_equal(all[0].qos_iops, 0);
	assert_string_equal(all[0].rq.zone, "");	/* no zone constraint */
	assert_false(all[0].rq.same_zone);
	assert_int_equal(all[0].generation, 1);
	free(all);
	comp_store_close(s);
	/* Opened again: the columns are there already. */
	assert_int_equal(comp_store_open(path, &s), 0);
	comp_store_close(s);
}

struct sums {
	char text[256];
	size_t len;
};

static void sum_cb(void *arg, const char *tenant, uint64_t read, uint64_t written)
{
	struct sums *s = arg;

	s->len += (size_t)snprintf(s->text + s->len, sizeof(s->text) - s->len, "%s:%llu:%llu;",
				   tenant, (unsigned long long)read, (unsigned long long)written);
}

/* Samples sum per tenant, in tenant order, over [since, until] only; a
 * count above INT64_MAX is clipped, not wrapped; a reopened store has
 * them. */
static void test_usage_bytes(void **state)
{
	struct comp_store *s;
	struct sums sm = { 0 };

	(void)state;
	assert_int_equal(comp_store_open(path, &s), 0);
	assert_int_equal(comp_store_add_bytes(s, 100, "beta", 10, 1), 0);
	assert_int_equal(comp_store_add_bytes(s, 100, "Alpha", 5, 7), 0);
	assert_int_equal(comp_store_add_bytes(s, 200, "beta", 20, 2), 0);
	assert_int_equal(comp_store_add_bytes(s, 300, "beta", 1000, 1000), 0);
	assert_int_equal(comp_store_add_bytes(s, 50, "gamma", UINT64_MAX, 0), 0);
	comp_store_close(s);
	assert_int_equal(comp_store_open(path, &s), 0);
	assert_int_equal(comp_store_sum_bytes(s, 100, 200, sum_cb, &sm), 0);
	assert_string_equal(sm.text, "Alpha:5:7;beta:30:3;");
	sm.len = 0;
	sm.text[0] = 0;
	assert_int_equal(comp_store_sum_bytes(s, 0, 60, sum_cb, &sm), 0);
	assert_string_equal(sm.text, "gamma:9223372036854775807:0;");
	comp_store_close(s);
}

/* A composition with every count at its top reads back whole. */
static void test_extremes(void **state)
{
	struct comp_store *s;
	struct comp a, *all;
	uint32_t n;

	(void)state;
	assert_int_equal(comp_store_open(path, &s), 0);
	make(&a, 9, UINT32_MAX, UINT32_MAX - ALLOC_MAX_GPUS, ALLOC_MAX_GPUS);
	a.rq.storage = UINT64_MAX;
	a.mem_share = UINT64_MAX - 1;
	a.owner_uid = UINT32_MAX;
	a.qos_iops = UINT32_MAX;
	a.expires = INT64_MIN;
	snprintf(a.reason, sizeof(a.reason), "it's \\ 'quoted' ; \"x\"");
	assert_int_equal(comp_store_put(s, &a), 0);
	assert_int_equal(comp_store_load(s, &all, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(all[0].rq.storage, UINT64_MAX);
	assert_int_equal(all[0].mem_share, UINT64_MAX - 1);
	assert_int_equal(all[0].owner_uid, UINT32_MAX);
	assert_int_equal(all[0].qos_iops, UINT32_MAX);
	assert_int_equal(all[0].expires, INT64_MIN);
	assert_int_equal(all[0].ngpus, ALLOC_MAX_GPUS);
	assert_int_equal(all[0].gpus[ALLOC_MAX_GPUS - 1].node, UINT32_MAX);
	assert_int_equal(all[0].gpus[ALLOC_MAX_GPUS - 1].index, UINT32_MAX - 1);
	assert_string_equal(all[0].reason, a.reason);
	free(all);
	comp_store_close(s);
}

/* PostgreSQL: a database whose composer schema is newer than this build's
 * is refused, and nothing of it changed. */
static void test_newer_schema_refused(void **state)
{
	struct comp_store *s;

	(void)state;
	if (!pg_host)
		skip();
	assert_int_equal(comp_store_open(path, &s), 0);
	comp_store_close(s);
	pg_admin(pg_db, "UPDATE schema_version SET version = 99 WHERE component = 'composer'");
	assert_int_equal(comp_store_open(path, &s), STRATA_EBADMSG);
}

/* PostgreSQL: the server drops the connection (a restart, a failover):
 * the call that finds it gone fails (-EIO), the next reconnects, prepares its
 * statements again and writes; nothing was lost. */
static void test_reconnect(void **state)
{
	struct comp_store *s;
	struct comp a, b, *all;
	uint32_t n;
	char sql[256];

	(void)state;
	if (!pg_host)
		skip();
	assert_int_equal(comp_store_open(path, &s), 0);
	make(&a, 1, 3, 0, 1);
	assert_int_equal(comp_store_put(s, &a), 0);
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE"
		 " application_name = 'stratad-composer' AND datname = '%s'", pg_db);
	pg_admin("postgres", sql);
	make(&b, 2, 3, 1, 1);
	assert_int_equal(comp_store_put(s, &b), -EIO);	/* waited for: it is gone */
	assert_int_equal(b.generation, 0);
	assert_int_equal(comp_store_put(s, &b), 0);
	assert_int_equal(b.generation, 1);
	assert_int_equal(comp_store_load(s, &all, &n), 0);
	assert_int_equal(n, 2);
	free(all);
	/* The GPU key holds on the new connection too. */
	make(&b, 3, 3, 0, 1);
	assert_int_equal(comp_store_put(s, &b), -EEXIST);
	comp_store_close(s);
}

/* PostgreSQL: with a fence set, a put goes through only while the mgmt
 * leader lease (mgmt_lease, here made by hand) is at that term; after a
 * takeover it is refused with -ESTALE and nothing of it is written. A
 * database without the lease (composer.store not mgmt's) is not fenced. */
static void test_fenced_by_the_leader_term(void **state)
{
	struct comp_store *s;
	struct comp a, *all;
	uint32_t n;

	(void)state;
	if (!pg_host)
		skip();
	assert_int_equal(comp_store_open(path, &s), 0);
	comp_store_fence(s, 3);
	make(&a, 1, 3, 0, 1);
	assert_int_equal(comp_store_put(s, &a), 0);	/* no lease table: not fenced */
	comp_store_close(s);

	pg_admin(pg_db, "CREATE TABLE mgmt_lease (id int PRIMARY KEY, term bigint NOT NULL)");
	pg_admin(pg_db, "INSERT INTO mgmt_lease VALUES (1, 7)");
	assert_int_equal(comp_store_open(path, &s), 0);
	comp_store_fence(s, 7);
	a.state = COMP_DEGRADED;
	assert_int_equal(comp_store_put(s, &a), 0);
	assert_int_equal(a.generation, 2);
	/* Another control node took the lease over. */
	pg_admin(pg_db, "UPDATE mgmt_lease SET term = 8 WHERE id = 1");
	a.state = COMP_RELEASED;
	assert_int_equal(comp_store_put(s, &a), -ESTALE);
	assert_int_equal(a.generation, 2);
	assert_int_equal(comp_store_load(s, &all, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(all[0].state, COMP_DEGRADED);
	assert_int_equal(all[0].generation, 2);
	free(all);
	/* Leading again in the new term, or unfenced: written. */
	comp_store_fence(s, 8);
	assert_int_equal(comp_store_put(s, &a), 0);
	comp_store_fence(s, 0);
	pg_admin(pg_db, "UPDATE mgmt_lease SET term = 9 WHERE id = 1");
	assert_int_equal(comp_store_put(s, &a), 0);
	assert_int_equal(a.generation, 4);
	comp_store_close(s);
}

/* The keys' checks name the key. */
static void test_check_spec(void **state)
{
	char err[512], pf[96];
	FILE *f;

	(void)state;
	assert_int_equal(comp_store_check_spec("", "", err, sizeof(err)), 0);
	assert_int_equal(comp_store_check_spec("sqlite", "", err, sizeof(err)), 0);
	assert_int_equal(comp_store_check_spec("postgresql://u@h/db", "", err, sizeof(err)), 0);
	assert_int_equal(comp_store_check_spec("mysql://u:secret@h/db", "", err, sizeof(err)),
			 -EINVAL);
	assert_non_null(strstr(err, "key 'composer.store': unknown store 'mysql'"));
	assert_null(strstr(err, "secret"));
	assert_int_equal(comp_store_check_spec("", "/x", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "key 'composer.store_passfile' is set"));
	snprintf(pf, sizeof(pf), "%s/pass", dir);
	f = fopen(pf, "w");
	assert_non_null(f);
	fclose(f);
	chmod(pf, 0644);
	assert_int_equal(comp_store_check_spec("postgres://h/db", pf, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "key 'composer.store_passfile': password file"));
	chmod(pf, 0600);
	assert_int_equal(comp_store_check_spec("postgres://h/db", pf, err, sizeof(err)), 0);
	unlink(pf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_round_trip_and_exclusive, setup, teardown),
		cmocka_unit_test_setup_teardown(test_store_without_owners, setup, teardown),
		cmocka_unit_test_setup_teardown(test_usage_bytes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_extremes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reconnect, setup, teardown),
		cmocka_unit_test_setup_teardown(test_fenced_by_the_leader_term, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_spec, setup, teardown),
	};

	fx_backend_from_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
