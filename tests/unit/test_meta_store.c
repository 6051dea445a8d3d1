/*
 * Unit tests of the metadata stores themselves (src/meta/store_*.c), on
 * the backend the environment names (meta_fx.h; meson runs this file as
 * test_meta_store and, over a throwaway PostgreSQL, test_meta_store_pg):
 * copying a namespace between backends, inline data, the readdir byte order, two
 * handles racing renames across directories, and PostgreSQL's schema
 * versions and lost connections.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <fcntl.h>

#include "common/crc32c.h"
#include "meta_fx.h"

/* A populated SQLite namespace copied into an empty store of the backend
 * under test reads back the same, and allocates after what it held. */
static void test_store_copy(void **state)
{
	struct fx *f = *state;
	char src[128], dst[256];
	struct meta_store a, b;
	struct ns na, nb;
	struct meta_copy_stats cs;
	struct meta_inode x, y;
	struct meta_quota qa, qb;
	char *before, *after;
	uint64_t d, e;

	snprintf(src, sizeof(src), "%s/src.db", f->dir);
	assert_int_equal(meta_store_sqlite_open(src, NULL, &a), 0);
	assert_int_equal(ns_init(&na, &a, TABLE_LEN), 0);
	d = mkdir_(&na, NS_ROOT_INO, "d");
	e = mkdir_(&na, d, "e");
	mkfile(&na, d, "f", 12345);
	mkfile(&na, e, "g", 5u << 20);
	mkfile(&na, NS_ROOT_INO, "\xc3\xa9t\xc3\xa9", 1);
	assert_int_equal(ns_symlink(&na, ns_any(e), "l", "../f", 0, 0, NULL), 0);
	assert_int_equal(ns_unlink(&na, ns_any(e), "g"), 0);	/* queues its chunks */
	assert_int_equal(ns_quota_set(&na, ns_any(d), 1u << 30, 100, NULL), 0);
	{
		uint64_t small = mkfile(&na, e, "small", 0);

		assert_int_equal(ns_publish_inline(&na, ns_any(small), (const uint8_t *)"inline!", 7,
						   0, NULL), 0);
	}
	before = dump_ns(&na);

	store_new(f, "copy", dst, sizeof(dst));
	assert_int_equal(store_open(dst, &b), 0);
	assert_int_equal(meta_store_copy(&a, &b, &cs), 0);
	assert_int_equal(cs.inodes, 7);		/* root, d, e, f, the accented one, l, small */
	assert_int_equal(cs.dentries, 6);
	assert_int_equal(cs.links, 1);
	assert_int_equal(cs.inlines, 1);
	assert_int_equal(cs.quotas, 1);
	assert_true(cs.gc_items >= 1);
	assert_true(cs.counters >= 3);		/* inodes, bytes, table_len at least */
	/* A second copy finds the target in use. */
	assert_int_equal(meta_store_copy(&a, &b, NULL), -ENOTEMPTY);

	assert_int_equal(ns_init(&nb, &b, 0), 0);
	after = dump_ns(&nb);
	assert_string_equal(before, after);
	assert_int_equal(ns_quota_get(&na, ns_any(d), &qa), 0);
	assert_int_equal(ns_quota_get(&nb, ns_any(d), &qb), 0);
	assert_memory_equal(&qa, &qb, sizeof(qa));
	{
		/* The inline bytes came along. */
		uint8_t buf[NS_INLINE_MAX];
		struct ns_inline il = { .buf = buf };

		assert_int_equal(ns_resolve(&nb, "/d/e/small", 0, &x), 0);
		assert_int_equal(ns_open_inline(&nb, ns_any(x.ino), O_RDONLY, &y, NULL, &il), 0);
		assert_true(il.has);
		assert_int_equal(il.len, 7);
		assert_memory_equal(buf, "inline!", 7);
	}
	/* The next inode gets the number and generation the source would. */
	assert_int_equal(ns_create(&na, ns_any(NS_ROOT_INO), "n", 0644, 0, 0, true, &x), 1);
	assert_int_equal(ns_create(&nb, ns_any(NS_ROOT_INO), "n", 0644, 0, 0, true, &y), 1);
	assert_int_equal(x.ino, y.ino);
	assert_int_equal(x.gen, y.gen);
	free(before);
	free(after);
	ns_release(&na);
	ns_release(&nb);
	meta_store_close(&a);
	meta_store_close(&b);
	for (const char *const *sfx = (const char *const[]){ "", "-wal", "-shm", NULL }; *sfx;
	     sfx++) {
		snprintf(dst, sizeof(dst), "%s%s", src, *sfx);
		unlink(dst);
	}
}

/* Reads file ino's inline bytes into buf: their length, -1 when none. */
static int inline_of(struct ns *ns, uint64_t ino, uint8_t *buf)
{
	struct ns_inline il = { .buf = buf };
	struct meta_inode in;

	assert_int_equal(ns_open_inline(ns, ns_any(ino), O_RDONLY, &in, NULL, &il), 0);
	if (il.has)
		assert_int_equal(in.size, il.len);	/* an inline file's size is its bytes */
	return il.has ? (int)il.len : -1;
}

/* Inline data (ns.h): publish, the truncations, SET_SIZE of a writer of
 * chunks, the conversion, links and removal, on the backend under test. */
static void test_inline(void **state)
{
	static uint8_t data[NS_INLINE_MAX + 1], buf[NS_INLINE_MAX];
	struct fx *f = *state;
	struct meta_inode in;
	struct ns_statfs sf;
	struct meta_gc_item gc[4];
	struct ns_trunc tr;
	uint64_t a, big, bytes0;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	a = mkfile(&f->ns, NS_ROOT_INO, "a", 0);
	big = mkfile(&f->ns, NS_ROOT_INO, "big", 5000);	/* chunked content */
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	bytes0 = sf.bytes;

	assert_int_equal(inline_of(&f->ns, a, buf), -1);
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(a), data, 1000, 77, &in), 0);
	assert_int_equal(in.size, 1000);
	assert_int_equal(in.mtime_ns, 77);
	assert_int_equal(inline_of(&f->ns, a, buf), 1000);
	assert_memory_equal(buf, data, 1000);
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.bytes, bytes0 + 1000);
	/* Again with other bytes: the whole content is replaced. */
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(a), data + 1, 600, 0, &in), 0);
	assert_int_equal(inline_of(&f->ns, a, buf), 600);
	assert_memory_equal(buf, data + 1, 600);
	/* Never over chunked content, never more than the bound. */
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(big), data, 10, 0, NULL), -ENOTEMPTY);
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(a), data, NS_INLINE_MAX + 1, 0, NULL),
			 -EINVAL);
	assert_int_equal(inline_of(&f->ns, big, buf), -1);

	/* Truncations: cut, zero-extended, past the bound refused. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), 100, &tr), 0);
	assert_false(tr.partial);
	assert_int_equal(tr.gc_to, 0);
	assert_int_equal(inline_of(&f->ns, a, buf), 100);
	assert_memory_equal(buf, data + 1, 100);
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), 300, &tr), 0);
	assert_int_equal(inline_of(&f->ns, a, buf), 300);
	assert_memory_equal(buf, data + 1, 100);
	for (int i = 100; i < 300; i++)
		assert_int_equal(buf[i], 0);
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), NS_INLINE_MAX + 1, &tr), -EMEDIUMTYPE);
	assert_int_equal(inline_of(&f->ns, a, buf), 300);

	/* A hard link shares the bytes; the last name removed drops them. */
	assert_int_equal(ns_link(&f->ns, ns_any(a), ns_any(NS_ROOT_INO), "a2", NULL), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(NS_ROOT_INO), "a"), 0);
	assert_int_equal(inline_of(&f->ns, a, buf), 300);
	assert_int_equal(ns_unlink(&f->ns, ns_any(NS_ROOT_INO), "a2"), 0);
	assert_int_equal(f->st.ops->begin(f->st.impl, false), 0);
	assert_int_equal(f->st.ops->get_inline(f->st.impl, a, NULL, 0), -ENOENT);
	f->st.ops->rollback(f->st.impl);
	assert_int_equal(gc_all(&f->ns, a, gc, 4), 0);	/* no chunk to remove */

	/* An open with O_TRUNC drops them (and queues chunk 0). */
	a = mkfile(&f->ns, NS_ROOT_INO, "t", 0);
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(a), data, 50, 0, NULL), 0);
	assert_int_equal(ns_open(&f->ns, ns_any(a), O_WRONLY | O_TRUNC, &in, &tr), 0);
	assert_int_equal(in.size, 0);
	assert_int_equal(tr.gc_to, 1);
	assert_int_equal(inline_of(&f->ns, a, buf), -1);

	/* A writer of chunks closing an inline file is refused (it merges
	 * first): the bytes and the size stay. */
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(a), data, 50, 0, NULL), 0);
	assert_int_equal(ns_set_size(&f->ns, ns_any(a), 20, 0, &in), -EMEDIUMTYPE);
	assert_int_equal(inline_of(&f->ns, a, buf), 50);
	assert_int_equal(ns_uninline(&f->ns, ns_any(a), 50, crc32c(0, data, 50), NULL), 0);
	assert_int_equal(ns_set_size(&f->ns, ns_any(a), 80, 0, &in), 0);
	assert_int_equal(in.size, 80);
	assert_int_equal(inline_of(&f->ns, a, buf), -1);

	/* A guarded publish replaces only the content its writer last saw
	 * (CRC32C; 0: empty), else -EAGAIN and nothing changes. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), 0, NULL), 0);
	{
		uint32_t empty = 0, old = crc32c(0, data, 30), wrong = old + 1;

		assert_int_equal(ns_publish_inline_if(&f->ns, ns_any(a), data, 30, &empty, 0,
						      NULL), 0);
		assert_int_equal(ns_publish_inline_if(&f->ns, ns_any(a), data + 1, 40, &empty, 0,
						      NULL), -EAGAIN);
		assert_int_equal(ns_publish_inline_if(&f->ns, ns_any(a), data + 1, 40, &wrong, 0,
						      NULL), -EAGAIN);
		assert_int_equal(inline_of(&f->ns, a, buf), 30);
		assert_memory_equal(buf, data, 30);
		assert_int_equal(ns_publish_inline_if(&f->ns, ns_any(a), data + 1, 40, &old, 0,
						      &in), 0);
		assert_int_equal(in.size, 40);
		assert_int_equal(inline_of(&f->ns, a, buf), 40);
		assert_memory_equal(buf, data + 1, 40);
	}

	/* Conversion: only the bytes read are dropped; the size stays. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), 0, NULL), 0);
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(a), data, 70, 0, NULL), 0);
	assert_int_equal(ns_uninline(&f->ns, ns_any(a), 70, crc32c(0, data + 1, 70), NULL),
			 -EAGAIN);
	assert_int_equal(ns_uninline(&f->ns, ns_any(a), 69, crc32c(0, data, 69), NULL), -EAGAIN);
	assert_int_equal(inline_of(&f->ns, a, buf), 70);
	assert_int_equal(ns_uninline(&f->ns, ns_any(a), 70, crc32c(0, data, 70), &in), 0);
	assert_int_equal(in.size, 70);
	assert_int_equal(inline_of(&f->ns, a, buf), -1);
	/* Converted already: nothing to do. */
	assert_int_equal(ns_uninline(&f->ns, ns_any(a), 70, crc32c(0, data, 70), NULL), 0);
	/* Now chunked: a publish is refused, a truncation is a chunk one. */
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(a), data, 5, 0, NULL), -ENOTEMPTY);
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), NS_INLINE_MAX + 1, NULL), 0);
	/* Directories and symlinks take no bytes. */
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(NS_ROOT_INO), data, 5, 0, NULL),
			 -EISDIR);
}

/* Directory order is the byte order of names, whatever the database's
 * collation: uppercase before lowercase, UTF-8 after ASCII. */
static void test_name_byte_order(void **state)
{
	static const char *const sorted[] = {
		"A", "Z", "_", "a", "ab", "b", "\x7f", "\xc3\xa9", "\xff\x01",
	};
	struct fx *f = *state;
	struct name_list l = { 0 };
	uint64_t d = mkdir_(&f->ns, NS_ROOT_INO, "order");
	size_t n = sizeof(sorted) / sizeof(sorted[0]);

	for (size_t i = n; i-- > 0;)
		mkfile(&f->ns, d, sorted[i], 0);
	list_all(&f->ns, d, 2, &l);
	assert_int_equal(l.n, n);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(l.names[i], sorted[i]);
	list_free(&l);
}

/* PostgreSQL: a schema newer than the build's is refused; an open of a
 * current one does not migrate again. */
static void test_pg_schema(void **state)
{
	struct fx *f = *state;
	struct meta_inode in;

	if (!pg_host)
		skip();
	mkfile(&f->ns, NS_ROOT_INO, "kept", 7);
	ns_release(&f->ns);
	meta_store_close(&f->st);
	assert_int_equal(fx_open(f), 0);
	assert_int_equal(ns_resolve(&f->ns, "/kept", 0, &in), 0);
	assert_int_equal(in.size, 7);
	ns_release(&f->ns);
	meta_store_close(&f->st);
	{
		char db[64];

		snprintf(db, sizeof(db), "%s_meta", f->pgname);
		pg_admin(db, "UPDATE schema_version SET version = 99 WHERE component = 'meta'");
	}
	assert_int_equal(store_open(f->db, &f->st), -EIO);
	assert_int_equal(fx_open(f), -EIO);
	memset(&f->st, 0, sizeof(f->st));
	memset(&f->ns, 0, sizeof(f->ns));
}

/* PostgreSQL: a connection the server dropped while the handle was idle
 * is found at the next begin and made again, unseen by the caller; so is
 * one dropped twice in a row. */
static void test_pg_reconnect(void **state)
{
	struct fx *f = *state;
	char db[64], sql[192];
	struct meta_inode in;
	int err;

	if (!pg_host)
		skip();
	mkfile(&f->ns, NS_ROOT_INO, "before", 0);
	snprintf(db, sizeof(db), "%s_meta", f->pgname);
	snprintf(sql, sizeof(sql), "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity"
		 " WHERE datname = '%s' AND pid <> pg_backend_pid()", db);
	pg_admin("postgres", sql);
	err = ns_create(&f->ns, ns_any(NS_ROOT_INO), "during", 0644, 0, 0, true, NULL);
	assert_int_equal(err, 1);
	pg_admin("postgres", sql);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "after", 0644, 0, 0, true, NULL),
			 1);
	assert_int_equal(ns_resolve(&f->ns, "/before", 0, &in), 0);
	assert_int_equal(ns_resolve(&f->ns, "/after", 0, &in), 0);
}

/* The GC role: one handle of a database holds it; SQLite's one server
 * always does. On PostgreSQL a second handle (another meta server) is
 * refused while the first lives and takes the role once it is closed. */
static void test_gc_claim(void **state)
{
	struct fx *f = *state;
	struct meta_store st2;
	struct ns ns2;
	int rc = 0;

	assert_int_equal(ns_gc_claim(&f->ns), 1);
	assert_int_equal(ns_gc_claim(&f->ns), 1);	/* kept */
	if (!pg_host)
		return;
	assert_int_equal(store_open(f->db, &st2), 0);
	assert_int_equal(ns_init(&ns2, &st2, 0), 0);
	assert_int_equal(ns_gc_claim(&ns2), 0);
	ns_release(&f->ns);
	meta_store_close(&f->st);
	/* The server lets the lock go when the closed session's backend
	 * exits, a moment after the close: wait for it, with a deadline. */
	for (int i = 0; i < 1000 && (rc = ns_gc_claim(&ns2)) == 0; i++)
		usleep(10 * 1000);
	assert_int_equal(rc, 1);
	/* The first comes back: the role stays where it went. */
	assert_int_equal(fx_open(f), 0);
	assert_int_equal(ns_gc_claim(&f->ns), 0);
	ns_release(&ns2);
	meta_store_close(&st2);
}

/* Two handles race, RACES times, to move sibling directories a and b
 * each into the other: on any backend exactly one wins, the other finds
 * its target inside what it moves (-EINVAL), and no cycle is left. */
#define RACES 24

struct racer {
	const char *db;
	pthread_barrier_t *go;
	const uint64_t (*dirs)[3];	/* per race: parent, a, b */
	int which;			/* 0: a into b; 1: b into a */
	int rc[RACES];
};

static void *race_worker(void *arg)
{
	struct racer *r = arg;
	struct meta_store st;
	struct ns ns;
	int err = store_open(r->db, &st);

	if (!err)
		err = ns_init(&ns, &st, 0);
	for (int i = 0; i < RACES; i++) {
		const uint64_t *d = r->dirs[i];

		pthread_barrier_wait(r->go);
		if (err)
			r->rc[i] = err;
		else if (r->which == 0)
			r->rc[i] = ns_rename(&ns, ns_any(d[0]), "a", ns_any(d[2]), "a", 0);
		else
			r->rc[i] = ns_rename(&ns, ns_any(d[0]), "b", ns_any(d[1]), "b", 0);
	}
	if (!err)
		ns_release(&ns);
	meta_store_close(&st);
	return NULL;
}

static void test_rename_cycle_race(void **state)
{
	struct fx *f = *state;
	uint64_t dirs[RACES][3];
	struct racer r[2];
	pthread_t t[2];
	pthread_barrier_t go;

	for (int i = 0; i < RACES; i++) {
		char name[16];

		snprintf(name, sizeof(name), "r%d", i);
		dirs[i][0] = mkdir_(&f->ns, NS_ROOT_INO, name);
		dirs[i][1] = mkdir_(&f->ns, dirs[i][0], "a");
		dirs[i][2] = mkdir_(&f->ns, dirs[i][0], "b");
	}
	assert_int_equal(pthread_barrier_init(&go, NULL, 2), 0);
	for (int k = 0; k < 2; k++) {
		r[k] = (struct racer){ .db = f->db, .go = &go, .dirs = (const uint64_t (*)[3])dirs,
				       .which = k };
		assert_int_equal(pthread_create(&t[k], NULL, race_worker, &r[k]), 0);
	}
	for (int k = 0; k < 2; k++)
		assert_int_equal(pthread_join(t[k], NULL), 0);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < RACES; i++) {
		struct meta_inode in, p;
		char path[64];
		int won = r[0].rc[i] == 0 ? 0 : 1;

		assert_int_equal(r[won].rc[i], 0);
		assert_int_equal(r[!won].rc[i], -EINVAL);
		/* The winner's directory is inside the other, which stayed put. */
		snprintf(path, sizeof(path), won == 0 ? "/r%d/b/a" : "/r%d/a/b", i);
		assert_int_equal(ns_resolve(&f->ns, path, 0, &in), 0);
		assert_int_equal(in.ino, dirs[i][won == 0 ? 1 : 2]);
		assert_int_equal(ns_getattr(&f->ns, ns_any(in.parent), &p), 0);
		assert_int_equal(p.parent, dirs[i][0]);
		assert_int_equal(ns_getattr(&f->ns, ns_any(dirs[i][0]), &p), 0);
		assert_int_equal(p.nlink, 3);	/* ".", its entry, the one left */
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_store_copy, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_name_byte_order, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_inline, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_pg_schema, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_pg_reconnect, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename_cycle_race, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_gc_claim, fx_setup, fx_teardown),
	};

	fx_backend_from_env();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
