/*
 * Unit tests of the cluster map's persistence: empty store, save / close /
 * reopen / load round trip (including out lists and SYNCING members),
 * overwrite, corrupt content.
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
#include <sqlite3.h>
#include <cmocka.h>

#include "common/log.h"
#include "mgmt/membership.h"
#include "mgmt/mgmt_store.h"
#include "proto/mgmt.h"

static char dir[64];
static char path[128];

static int setup(void **state)
{
	(void)state;
	log_set_level(LOG_OFF);
	snprintf(dir, sizeof(dir), "/tmp/strata-mgmt-store-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/meta.db", dir);
	return 0;
}

static int teardown(void **state)
{
	char p[160];

	(void)state;
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
	rmdir(dir);
	return 0;
}

static void build(struct cluster_map *m)
{
	cm_init(m);
	for (uint32_t k = 1; k <= 4; k++) {
		struct cm_target_info ti[3];
		char addr[32];

		for (uint32_t i = 0; i < 3; i++) {
			ti[i].id = k * 100 + i + 1;
			ti[i].capacity = (1ull << 63) + k;	/* above INT64_MAX */
			ti[i].used = 12345 * i;
			ti[i].fs = 0;	/* not persisted: the next heartbeat tells it */
			ti[i].avail = 0;	/* nor this */
		}
		snprintf(addr, sizeof(addr), "node%u.example:7100", k);
		assert_true(cm_register_node(m, k, addr, ti, 3, 1000) >= 0);
	}
	assert_int_equal(cm_build_chains(m, 3, false), 12);
	{
		struct cm_target_info spare = { 501, 1, 0, 0, 0 };

		assert_true(cm_register_node(m, 5, "node5.example:7100", &spare, 1, 0) >= 0);
	}
	/* Some history: out lists, SYNCING tails, a LOST target. */
	assert_true(cm_set_node_offline(m, 2) > 0);
	assert_int_equal(cm_replace_target(m, 201, 501), 3);
	assert_int_equal(cm_validate(m), 0);
}

static void assert_same(const struct cluster_map *a, const struct cluster_map *b)
{
	struct bbuf x, y;

	/* The wire form covers every persisted field. */
	bbuf_init(&x);
	bbuf_init(&y);
	assert_int_equal(cmap_encode_since(a, 0, &x), 0);
	assert_int_equal(cmap_encode_since(b, 0, &y), 0);
	assert_int_equal(x.len, y.len);
	assert_memory_equal(x.buf, y.buf, x.len);
	bbuf_release(&x);
	bbuf_release(&y);
}

static void test_empty(void **state)
{
	struct mgmt_store *s;
	struct cluster_map m, e;

	(void)state;
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_load(s, &m), 0);
	cm_init(&e);
	assert_same(&m, &e);
	assert_int_equal(m.nnodes, 0);
	assert_int_equal(m.replication, CM_DEFAULT_R);
	cm_release(&m);
	mgmt_store_close(s);
}

static void test_roundtrip(void **state)
{
	struct mgmt_store *s;
	struct cluster_map m, l;

	(void)state;
	build(&m);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_save(s, &m), 0);
	mgmt_store_close(s);

	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_load(s, &l), 0);
	assert_same(&m, &l);
	assert_true(l.targets[0].capacity == (1ull << 63) + 1);
	assert_string_equal(cm_find_node(&l, 3)->addr, "node3.example:7100");
	cm_release(&l);

	/* Overwrite with a changed map: the new one replaces the old. */
	assert_true(cm_target_synced(&m, 501) > 0);
	{
		struct cm_target_info ti[3] = { { 201, 1, 0, 0, 0 }, { 202, 1, 0, 0, 0 }, { 203, 1, 0, 0, 0 } };

		assert_true(cm_register_node(&m, 2, "node2.example:7100", ti, 3, 0) > 0);
	}
	assert_int_equal(mgmt_store_save(s, &m), 0);
	mgmt_store_close(s);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_load(s, &l), 0);
	assert_same(&m, &l);
	cm_release(&l);
	mgmt_store_close(s);
	cm_release(&m);
}

/* Incarnations survive a reopen, apart from the map and its rewrites. */
static void test_incarnations(void **state)
{
	struct mgmt_store *s;
	struct cluster_map m;
	uint64_t inc = 0;

	(void)state;
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_get_incarnation(s, 7, &inc), -ENOENT);
	assert_int_equal(mgmt_store_set_incarnation(s, 7, 0xfedcba9876543210ull), 0);
	assert_int_equal(mgmt_store_set_incarnation(s, 8, 5), 0);
	build(&m);
	assert_int_equal(mgmt_store_save(s, &m), 0);	/* a map save keeps them */
	mgmt_store_close(s);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_get_incarnation(s, 7, &inc), 0);
	assert_true(inc == 0xfedcba9876543210ull);
	assert_int_equal(mgmt_store_set_incarnation(s, 8, 6), 0);
	assert_int_equal(mgmt_store_get_incarnation(s, 8, &inc), 0);
	assert_true(inc == 6);
	mgmt_store_close(s);
	cm_release(&m);
}

/* Removed nodes survive a reopen and map saves; the first time stays. */
static void test_removed(void **state)
{
	struct mgmt_store *s;
	struct cluster_map m;
	int64_t when = 0;

	(void)state;
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_get_removed(s, 3, &when), -ENOENT);
	assert_int_equal(mgmt_store_set_removed(s, 3, 1000), 0);
	assert_int_equal(mgmt_store_set_removed(s, 3, 2000), 0);
	build(&m);
	assert_int_equal(mgmt_store_save(s, &m), 0);
	mgmt_store_close(s);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_get_removed(s, 3, &when), 0);
	assert_true(when == 1000);
	assert_int_equal(mgmt_store_get_removed(s, 4, &when), -ENOENT);
	mgmt_store_close(s);
	cm_release(&m);
}

static struct mgmt_token tok(const char *id, const char *tenant, int64_t created, int64_t exp)
{
	struct mgmt_token t;

	memset(&t, 0, sizeof(t));
	snprintf(t.id, sizeof(t.id), "%s", id);
	snprintf(t.tenant, sizeof(t.tenant), "%s", tenant);
	t.created = created;
	t.exp = exp;
	return t;
}

/* The token registry: add, list (oldest first, bounded), revoke (durable,
 * -ENOENT for an unknown id), and the revoked ids that have not expired,
 * sorted; a map save leaves it alone. */
static void test_tokens(void **state)
{
	struct mgmt_store *s;
	struct cluster_map m;
	struct mgmt_token t, *ts;
	uint32_t n, total;

	(void)state;
	assert_int_equal(mgmt_store_open(path, &s), 0);
	t = tok("00000000000000cc", "t1", 100, 0);
	t.admin = true;
	assert_int_equal(mgmt_store_token_add(s, &t, "{\"v\":1}"), 0);
	assert_int_equal(mgmt_store_token_add(s, &t, "{}"), -EEXIST);
	t = tok("00000000000000bb", "t2", 200, 1000);
	assert_int_equal(mgmt_store_token_add(s, &t, "{}"), 0);
	t = tok("00000000000000aa", "t3", 300, 5000);
	assert_int_equal(mgmt_store_token_add(s, &t, "{}"), 0);

	assert_int_equal(mgmt_store_token_list(s, 2, &ts, &n, &total), 0);
	assert_int_equal(n, 2);
	assert_int_equal(total, 3);
	assert_string_equal(ts[0].id, "00000000000000cc");
	assert_true(ts[0].admin && !ts[0].revoked && ts[0].created == 100 && ts[0].exp == 0);
	assert_string_equal(ts[1].tenant, "t2");
	free(ts);

	assert_int_equal(mgmt_store_token_revoke(s, "0000000000000000", 400), -ENOENT);
	assert_int_equal(mgmt_store_token_revoke(s, "00000000000000cc", 400), 0);
	assert_int_equal(mgmt_store_token_revoke(s, "00000000000000bb", 400), 0);
	assert_int_equal(mgmt_store_token_revoke(s, "00000000000000aa", 500), 0);
	assert_int_equal(mgmt_store_token_revoke(s, "00000000000000aa", 600), 0);
	build(&m);
	assert_int_equal(mgmt_store_save(s, &m), 0);
	mgmt_store_close(s);

	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_token_list(s, 10, &ts, &n, &total), 0);
	assert_int_equal(n, 3);
	assert_true(ts[0].revoked == 400 && ts[2].revoked == 500);
	free(ts);
	/* At 2000 token bb has expired: it no longer needs to be refused. */
	assert_int_equal(mgmt_store_revoked(s, 2000, &m), 0);
	assert_int_equal(m.nrevoked, 2);
	assert_string_equal(m.revoked[0], "00000000000000aa");
	assert_string_equal(m.revoked[1], "00000000000000cc");
	assert_int_equal(cm_validate(&m), 0);
	assert_int_equal(mgmt_store_revoked(s, 999, &m), 0);
	assert_int_equal(m.nrevoked, 3);
	mgmt_store_close(s);
	cm_release(&m);
}

static void test_corrupt(void **state)
{
	struct mgmt_store *s;
	struct cluster_map m, l;
	sqlite3 *db;

	(void)state;
	build(&m);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_save(s, &m), 0);
	mgmt_store_close(s);

	/* A chain member on an unknown target. */
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE mgmt_chain_members SET target_id = 999 "
				      "WHERE chain_id = 1 AND out = 0 AND pos = 0", NULL, NULL,
				      NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_load(s, &l), STRATA_EBADMSG);
	assert_null(l.chains);
	/* Saving a good map repairs it. */
	assert_int_equal(mgmt_store_save(s, &m), 0);
	assert_int_equal(mgmt_store_load(s, &l), 0);
	cm_release(&l);
	mgmt_store_close(s);

	/* A gap in positions. */
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DELETE FROM mgmt_chain_members "
				      "WHERE chain_id = 2 AND out = 0 AND pos = 0", NULL, NULL,
				      NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_load(s, &l), STRATA_EBADMSG);
	mgmt_store_close(s);

	/* A newer schema is refused. */
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE mgmt_map SET value = 99 WHERE key = 'schema'",
				      NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(mgmt_store_open(path, &s), STRATA_EBADMSG);
	assert_null(s);

	assert_int_equal(mgmt_store_open("/nonexistent-dir/x/meta.db", &s), -EIO);
	cm_release(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_incarnations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tokens, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
