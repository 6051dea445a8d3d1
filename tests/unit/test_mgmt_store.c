/*
 * Unit tests of the cluster map's persistence: empty store, save / close /
 * reopen / load round trip (including out lists and SYNCING members),
 * overwrite, corrupt content; the leader lease and its fencing.
 *
 * On SQLite, or, with $STRATA_TEST_PG_HOST set (tests/pg_tmp.sh run sets
 * it, as meson's test_mgmt_store_pg does), on PostgreSQL: a fresh
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
#include <time.h>
#include <sqlite3.h>
#include <cmocka.h>

#include "common/log.h"
#include "meta_fx.h"
#include "mgmt/membership.h"
#include "mgmt/mgmt_store.h"
#include "proto/mgmt.h"

static char dir[64];
static char path[256];
/* PostgreSQL (meta_fx.h's pg_host, pg_admin): this test's database. */
static char pg_db[64];
static unsigned pg_serial;

/* Changes the stored content behind the store's back: sql on SQLite's file
 * or the test's database. */
static void tamper(const char *sql)
{
	sqlite3 *db;

	if (pg_host) {
		pg_admin(pg_db, sql);
		return;
	}
	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static int setup(void **state)
{
	char sql[96];

	(void)state;
	log_set_level(LOG_OFF);
	snprintf(dir, sizeof(dir), "/tmp/strata-mgmt-store-XXXXXX");
	if (!mkdtemp(dir))
		return -1;
	snprintf(path, sizeof(path), "%s/meta.db", dir);
	if (pg_host) {
		snprintf(pg_db, sizeof(pg_db), "mg%u_%d", pg_serial++, (int)getpid());
		snprintf(sql, sizeof(sql), "CREATE DATABASE %s", pg_db);
		pg_admin("postgres", sql);
		snprintf(path, sizeof(path), "postgresql:///%s?host=%s&port=%s&user=postgres", pg_db,
			 pg_host, pg_port);
	}
	return 0;
}

static int teardown(void **state)
{
	char p[160];

	(void)state;
	if (pg_host) {
		snprintf(p, sizeof(p), "DROP DATABASE IF EXISTS %s WITH (FORCE)", pg_db);
		pg_admin("postgres", p);
		rmdir(dir);
		return 0;
	}
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

/* PostgreSQL also stores what a follower serves besides (GET_MAP from the
 * store): the targets' filesystem, free space and full mark, and the
 * announced services with their incarnations. SQLite (one mgmt, no
 * follower) leaves them to the heartbeats and announcements. */
static void test_follower_fields(void **state)
{
	struct mgmt_store *s;
	struct cluster_map m, l;
	struct cm_target_info ti = { 101, 1000, 10, (1ull << 63) + 7, 990 };

	(void)state;
	build(&m);
	assert_true(cm_update_space(&m, 1, &ti, 1, &(struct cm_full_mark){ 50, 995 }) > 0);
	assert_int_equal(cm_find_target(&m, 101)->full, 1);
	assert_true(cm_announce_service(&m, CM_SVC_META, 1, "node1.example:7000", 0x1234, 99) > 0);
	assert_true(cm_announce_service(&m, CM_SVC_MEM, 3, "node3.example:7300", 5, 99) > 0);
	assert_true(cm_announce_service(&m, CM_SVC_META, 3, "node3.example:7000", 6, 99) > 0);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_save(s, &m), 0);
	assert_int_equal(mgmt_store_load(s, &l), 0);
	if (!pg_host) {
		assert_int_equal(l.nservices, 0);
		assert_true(cm_find_target(&l, 101)->fs == 0);
	} else {
		assert_same(&m, &l);
		assert_true(cm_find_target(&l, 101)->fs == (1ull << 63) + 7);
		assert_true(cm_find_target(&l, 101)->avail == 990);
		assert_int_equal(l.nservices, 3);
		assert_int_equal(l.services[0].kind, CM_SVC_META);
		assert_int_equal(l.services[1].node_id, 3);
		assert_true(l.services[0].incarnation == 0x1234);
		assert_string_equal(l.services[2].addr, "node3.example:7300");
		/* A service gone offline is stored so. */
		l.services[2].state = NODE_OFFLINE;
		l.version++;
		assert_int_equal(mgmt_store_save(s, &l), 0);
		cm_release(&l);
		assert_int_equal(mgmt_store_load(s, &l), 0);
		assert_int_equal(l.services[2].state, NODE_OFFLINE);
	}
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

	(void)state;
	build(&m);
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_save(s, &m), 0);
	mgmt_store_close(s);

	/* A chain member on an unknown target. */
	tamper("UPDATE mgmt_chain_members SET target_id = 999 WHERE chain_id = 1 AND out = 0"
	       " AND pos = 0");
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_load(s, &l), STRATA_EBADMSG);
	assert_null(l.chains);
	/* Saving a good map repairs it. */
	assert_int_equal(mgmt_store_save(s, &m), 0);
	assert_int_equal(mgmt_store_load(s, &l), 0);
	cm_release(&l);
	mgmt_store_close(s);

	/* A gap in positions. */
	tamper("DELETE FROM mgmt_chain_members WHERE chain_id = 2 AND out = 0 AND pos = 0");
	assert_int_equal(mgmt_store_open(path, &s), 0);
	assert_int_equal(mgmt_store_load(s, &l), STRATA_EBADMSG);
	mgmt_store_close(s);

	/* A newer schema is refused. */
	tamper(pg_host ? "UPDATE schema_version SET version = 99 WHERE component = 'mgmt'" :
	       "UPDATE mgmt_map SET value = 99 WHERE key = 'schema'");
	assert_int_equal(mgmt_store_open(path, &s), STRATA_EBADMSG);
	assert_null(s);

	if (pg_host)
		assert_int_equal(mgmt_store_open("postgresql:///nonexistent?host=/nonexistent", &s),
				 -EIO);
	else
		assert_int_equal(mgmt_store_open("/nonexistent-dir/x/meta.db", &s), -EIO);
	cm_release(&m);
}

/* Takes the lease for holder until it is granted, a bounded number of
 * times (the previous holder's lease runs out meanwhile). */
static void lease_until_leader(struct mgmt_store *s, const char *holder, const char *addr,
			       struct mgmt_lease *l)
{
	for (int i = 0; i < 500; i++) {
		assert_int_equal(mgmt_store_lease(s, holder, addr, 300, l), 0);
		if (l->leader)
			return;
		nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
	}
	fail_msg("'%s' never got the lease", holder);
}

/* The leader lease: one holder at a time, renewed in its term, taken with
 * a new term once it runs out; a deposed holder's writes are refused
 * (fencing) and change nothing; resigning hands it over at once. SQLite:
 * the one process leads. */
static void test_lease(void **state)
{
	struct mgmt_store *a, *b;
	struct mgmt_lease l;
	struct cluster_map m, got;
	uint64_t inc = 0;

	(void)state;
	assert_int_equal(mgmt_store_open(path, &a), 0);
	assert_int_equal(mgmt_store_lease(a, "", "x:1", 300, &l), -EINVAL);
	if (!pg_host) {
		assert_false(mgmt_store_shared(a));
		assert_int_equal(mgmt_store_lease(a, "node1", "h1:7000", 300, &l), 0);
		assert_true(l.leader && l.term == 1);
		mgmt_store_close(a);
		return;
	}
	assert_true(mgmt_store_shared(a));
	assert_int_equal(mgmt_store_open(path, &b), 0);
	assert_int_equal(mgmt_store_lease(a, "node1-aa", "h1:7000", 60000, &l), 0);
	assert_true(l.leader);
	assert_int_equal(l.term, 1);
	assert_true(l.left_ms > 50000 && l.left_ms <= 60000);
	/* Renewed: the same term. */
	assert_int_equal(mgmt_store_lease(a, "node1-aa", "h1:7000", 300, &l), 0);
	assert_true(l.leader && l.term == 1);
	assert_int_equal(mgmt_store_lease(b, "node2-bb", "h2:7000", 300, &l), 0);
	assert_false(l.leader);
	assert_int_equal(l.term, 1);
	assert_string_equal(l.addr, "h1:7000");

	build(&m);
	mgmt_store_fence(a, 1);
	assert_int_equal(mgmt_store_save(a, &m), 0);
	assert_int_equal(mgmt_store_set_incarnation(a, 3, 33), 0);

	/* a stops renewing: b takes over with term 2 once the lease ran out. */
	lease_until_leader(b, "node2-bb", "h2:7000", &l);
	assert_int_equal(l.term, 2);
	mgmt_store_fence(b, 2);
	assert_int_equal(mgmt_store_load(b, &got), 0);
	cm_release(&got);
	/* a, deposed, can no longer write anything. */
	m.version++;
	assert_int_equal(mgmt_store_save(a, &m), -ESTALE);
	assert_int_equal(mgmt_store_set_incarnation(a, 3, 34), -ESTALE);
	assert_int_equal(mgmt_store_set_removed(a, 4, 1), -ESTALE);
	{
		struct mgmt_token t;

		memset(&t, 0, sizeof(t));
		snprintf(t.id, sizeof(t.id), "00000000000000dd");
		snprintf(t.tenant, sizeof(t.tenant), "t");
		assert_int_equal(mgmt_store_token_add(a, &t, "{}"), -ESTALE);
	}
	assert_int_equal(mgmt_store_get_incarnation(b, 3, &inc), 0);
	assert_true(inc == 33);
	assert_int_equal(mgmt_store_load(b, &got), 0);
	assert_int_equal(got.version, m.version - 1);
	cm_release(&got);
	/* a learns who leads now. */
	assert_int_equal(mgmt_store_lease(a, "node1-aa", "h1:7000", 300, &l), 0);
	assert_false(l.leader);
	assert_int_equal(l.term, 2);
	assert_string_equal(l.addr, "h2:7000");
	assert_int_equal(mgmt_store_save(b, &m), 0);

	/* b resigns: a takes over at once, in term 3. */
	assert_int_equal(mgmt_store_lease(b, "node2-bb", "h2:7000", 60000, &l), 0);
	assert_int_equal(mgmt_store_resign(b, "node2-bb"), 0);
	assert_int_equal(mgmt_store_lease(a, "node1-aa", "h1:7000", 60000, &l), 0);
	assert_true(l.leader && l.term == 3);
	/* Node 1 restarted at its address (a new incarnation): it takes its
	 * lease back at once, in a new term; another node, or node 1 at
	 * another address, waits for the expiry. */
	assert_int_equal(mgmt_store_lease(b, "node2-bb", "h1:7000", 300, &l), 0);
	assert_false(l.leader);
	assert_int_equal(mgmt_store_lease(b, "node1-cc", "h9:7000", 300, &l), 0);
	assert_false(l.leader);
	assert_int_equal(mgmt_store_lease(b, "node1-cc", "h1:7000", 300, &l), 0);
	assert_true(l.leader && l.term == 4);
	mgmt_store_fence(a, 3);
	assert_int_equal(mgmt_store_save(a, &m), -ESTALE);
	mgmt_store_close(a);
	mgmt_store_close(b);
	cm_release(&m);
}

/* strata mgmt migrate: a SQLite store whole into an empty one (the test's
 * database: PostgreSQL, or another SQLite file), and never into one that
 * holds something. */
static void test_copy(void **state)
{
	char src_path[192], p[208];
	struct mgmt_store *src, *dst;
	struct mgmt_copy_stats cs;
	struct cluster_map m, l;
	struct mgmt_token t, *ts;
	uint32_t n, total;
	uint64_t inc = 0;
	int64_t when = 0;

	(void)state;
	snprintf(src_path, sizeof(src_path), "%s/src.db", dir);
	assert_int_equal(mgmt_store_open(src_path, &src), 0);
	build(&m);
	assert_int_equal(mgmt_store_save(src, &m), 0);
	assert_int_equal(mgmt_store_set_incarnation(src, 1, 0xfedcba9876543210ull), 0);
	assert_int_equal(mgmt_store_set_incarnation(src, 4, 44), 0);
	assert_int_equal(mgmt_store_set_removed(src, 9, 900), 0);
	t = tok("00000000000000aa", "t1", 100, 0);
	t.admin = true;
	assert_int_equal(mgmt_store_token_add(src, &t, "{\"tenant\":\"t1\"}"), 0);
	t = tok("00000000000000bb", "t2", 200, 5000);
	assert_int_equal(mgmt_store_token_add(src, &t, "{}"), 0);
	assert_int_equal(mgmt_store_token_revoke(src, "00000000000000bb", 300), 0);
	assert_int_equal(mgmt_store_token_revoke_offline(src, "00000000000000cc", 7000, 400), 0);

	assert_int_equal(mgmt_store_open(path, &dst), 0);
	assert_int_equal(mgmt_store_copy(src, dst, &cs), 0);
	assert_true(cs.version == m.version);
	assert_int_equal(cs.nodes, 5);
	assert_int_equal(cs.chains, 12);
	assert_int_equal(cs.incarnations, 2);
	assert_int_equal(cs.removed, 1);
	assert_int_equal(cs.tokens, 3);
	/* Into a store that holds something: refused. */
	assert_int_equal(mgmt_store_copy(src, dst, &cs), -ENOTEMPTY);
	mgmt_store_close(dst);

	assert_int_equal(mgmt_store_open(path, &dst), 0);
	assert_int_equal(mgmt_store_load(dst, &l), 0);
	assert_same(&m, &l);
	cm_release(&l);
	assert_int_equal(mgmt_store_get_incarnation(dst, 1, &inc), 0);
	assert_true(inc == 0xfedcba9876543210ull);
	assert_int_equal(mgmt_store_get_removed(dst, 9, &when), 0);
	assert_true(when == 900);
	assert_int_equal(mgmt_store_token_list(dst, 10, &ts, &n, &total), 0);
	assert_int_equal(n, 3);
	assert_string_equal(ts[0].id, "00000000000000aa");
	assert_true(ts[0].admin && !ts[0].revoked);
	assert_true(ts[1].revoked == 300 && ts[1].exp == 5000);
	assert_string_equal(ts[2].tenant, "(offline)");
	assert_true(ts[2].revoked == 400 && ts[2].exp == 7000);
	free(ts);
	assert_int_equal(mgmt_store_revoked(dst, 1000, &l), 0);
	assert_int_equal(l.nrevoked, 2);
	cm_release(&l);
	mgmt_store_close(dst);
	mgmt_store_close(src);
	cm_release(&m);
	for (const char *const *x = (const char *const[]){ "", "-wal", "-shm", NULL }; *x; x++) {
		snprintf(p, sizeof(p), "%s%s", src_path, *x);
		unlink(p);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty, setup, teardown),
		cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_follower_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_incarnations, setup, teardown),
		cmocka_unit_test_setup_teardown(test_removed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tokens, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease, setup, teardown),
		cmocka_unit_test_setup_teardown(test_copy, setup, teardown),
	};

	fx_backend_from_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
