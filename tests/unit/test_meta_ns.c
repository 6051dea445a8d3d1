/*
 * Unit tests of the meta namespace (src/meta/ns.c) over a metadata store:
 * the SQLite one, or, with $STRATA_TEST_PG_HOST set (tests/pg_tmp.sh run
 * does, as meson's test_meta_ns_pg), the PostgreSQL one, so both backends
 * pass the same tests. The fixture is meta_fx.h's.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "meta/ns.h"
#include "strata/errors.h"

#include "meta_fx.h"

/* ---- tests ---- */

static void test_root_and_table_len(void **state)
{
	struct fx *f = *state;
	struct meta_inode root;
	struct ns_statfs sf;

	assert_int_equal(ns_getattr(&f->ns, ns_any(NS_ROOT_INO), &root), 0);
	assert_true(S_ISDIR(root.mode));
	assert_int_equal(root.nlink, 2);
	assert_int_equal(root.parent, NS_ROOT_INO);
	assert_int_equal(root.layout.chunk_size, 4u << 20);
	assert_int_equal(root.layout.table_len, TABLE_LEN);
	assert_int_equal(root.layout.stripe, TABLE_LEN);

	assert_int_equal(ns_set_table_len(&f->ns, 32), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(NS_ROOT_INO), &root), 0);
	assert_int_equal(root.layout.table_len, 32);
	assert_int_equal(root.layout.stripe, 16);
	assert_int_equal(ns_set_table_len(&f->ns, 0), -EINVAL);

	/* ns_init again with 0 keeps the stored table length and the root. */
	assert_int_equal(ns_init(&f->ns, &f->st, 0), 0);
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.table_len, 32);
	assert_int_equal(sf.inodes, 1);
	assert_int_equal(ns_getattr(&f->ns, ns_any(999), &root), -ENOENT);
}

/* Group commit: calls share one transaction, each in a savepoint; a
 * failing call undoes only itself; the group commits or rolls back whole. */
static void test_group(void **state)
{
	struct fx *f = *state;
	struct meta_inode a, d, in;
	int rc = ns_group_begin(&f->ns);

	if (rc == -EOPNOTSUPP)
		return;	/* PostgreSQL: no groups (meta_store.h) */
	assert_int_equal(rc, 0);
	assert_int_equal(ns_group_begin(&f->ns), -EINVAL);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "g1", 0644, 0, 0, true, &a), 1);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "g1", 0644, 0, 0, true, &in),
			 -EEXIST);
	assert_int_equal(ns_unlink(&f->ns, ns_any(NS_ROOT_INO), "missing"), -ENOENT);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(NS_ROOT_INO), "gd", 0755, 0, 0, &d), 0);
	/* A rename that fails half way (into its own subtree) leaves nothing. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "gd", ns_any(d.ino), "x", 0),
			 -EINVAL);
	/* Reads see the group's changes. */
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "g1", &in), 0);
	assert_int_equal(in.ino, a.ino);
	assert_int_equal(ns_group_end(&f->ns, true), 0);
	assert_int_equal(ns_group_end(&f->ns, true), -EINVAL);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "g1", &in), 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "gd", &in), 0);
	assert_int_equal(in.nlink, 2);
	assert_int_equal(ns_lookup(&f->ns, ns_any(d.ino), "x", &in), -ENOENT);

	/* Rolled back: none of it happened. */
	assert_int_equal(ns_group_begin(&f->ns), 0);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "g2", 0644, 0, 0, true, &in), 1);
	assert_int_equal(ns_unlink(&f->ns, ns_any(NS_ROOT_INO), "g1"), 0);
	assert_int_equal(ns_group_end(&f->ns, false), 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "g2", &in), -ENOENT);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "g1", &in), 0);
	/* And calls outside a group commit each on their own again. */
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "g3", 0644, 0, 0, true, &in), 1);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "g3", &in), 0);
}

static void test_create_lookup_open(void **state)
{
	struct fx *f = *state;
	struct meta_inode a, b, c, dir;
	struct ns_trunc tr;

	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "a", 0640, 7, 8, true, &a), 1);
	assert_int_equal(a.mode, S_IFREG | 0640);
	assert_int_equal(a.uid, 7);
	assert_int_equal(a.gid, 8);
	assert_int_equal(a.nlink, 1);
	assert_int_equal(a.size, 0);
	assert_int_equal(a.parent, NS_ROOT_INO);
	assert_int_equal(a.layout.chunk_size, 4u << 20);
	assert_int_equal(a.layout.table_len, TABLE_LEN);
	assert_int_equal(a.layout.stripe, TABLE_LEN);
	assert_int_not_equal(a.layout.seed, 0);

	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "a", &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(ns_getattr(&f->ns, ns_any(a.ino), &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), ".", &b), 0);
	assert_int_equal(b.ino, NS_ROOT_INO);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "..", &b), 0);
	assert_int_equal(b.ino, NS_ROOT_INO);

	/* Exclusive create of an existing name fails; plain create opens. */
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "a", 0600, 0, 0, true, NULL), -EEXIST);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "a", 0600, 0, 0, false, &b), 0);
	assert_int_equal(b.ino, a.ino);
	assert_int_equal(b.mode, S_IFREG | 0640);

	/* A second file gets its own seed, the same layout otherwise. */
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "b", 0600, 0, 0, true, &c), 1);
	assert_int_not_equal(c.ino, a.ino);
	assert_int_not_equal(c.layout.seed, a.layout.seed);
	assert_int_equal(c.layout.chunk_size, a.layout.chunk_size);

	/* Creating over a directory / a symlink. */
	assert_int_equal(ns_mkdir(&f->ns, ns_any(NS_ROOT_INO), "d", 0755, 0, 0, &dir), 0);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "d", 0600, 0, 0, false, NULL), -EISDIR);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "d", 0600, 0, 0, true, NULL), -EEXIST);
	assert_int_equal(ns_symlink(&f->ns, ns_any(NS_ROOT_INO), "l", "a", 0, 0, &c), 0);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "l", 0600, 0, 0, false, NULL), -EEXIST);

	/* open */
	assert_int_equal(ns_open(&f->ns, ns_any(a.ino), O_RDONLY, &b, NULL), 0);
	assert_int_equal(b.ino, a.ino);
	assert_int_equal(ns_open(&f->ns, ns_any(dir.ino), O_RDONLY, &b, NULL), 0);
	assert_int_equal(ns_open(&f->ns, ns_any(dir.ino), O_WRONLY, &b, NULL), -EISDIR);
	assert_int_equal(ns_open(&f->ns, ns_any(c.ino), O_RDONLY, &b, NULL), -ELOOP);
	assert_int_equal(ns_open(&f->ns, ns_any(12345), O_RDONLY, &b, NULL), -ENOENT);
	assert_int_equal(ns_set_size(&f->ns, ns_any(a.ino), (4u << 20) * 2 + 1, 0, NULL), 0);
	assert_int_equal(ns_open(&f->ns, ns_any(a.ino), O_RDWR | O_TRUNC, &b, &tr), 0);
	assert_int_equal(b.size, 0);
	assert_int_equal(tr.gc_from, 0);
	assert_int_equal(tr.gc_to, 3);
	assert_false(tr.partial);
}

static void test_no_chain_table(void **state)
{
	struct fx *f = *state;
	char db[256];
	struct meta_store st;
	struct ns ns;

	/* A fresh database whose table length was never given. */
	store_new(f, "empty", db, sizeof(db));
	assert_int_equal(store_open(db, &st), 0);
	assert_int_equal(ns_init(&ns, &st, 0), 0);
	assert_int_equal(ns_create(&ns, ns_any(NS_ROOT_INO), "x", 0644, 0, 0, true, NULL), STRATA_EUNAVAIL);
	assert_int_equal(ns_mkdir(&ns, ns_any(NS_ROOT_INO), "d", 0755, 0, 0, NULL), 0);
	assert_int_equal(ns_set_table_len(&ns, 3), 0);
	assert_int_equal(ns_create(&ns, ns_any(NS_ROOT_INO), "x", 0644, 0, 0, true, NULL), 1);
	ns_release(&ns);
	meta_store_close(&st);
}

static void test_mkdir_rmdir_unlink(void **state)
{
	struct fx *f = *state;
	struct meta_inode root, d, e;
	uint64_t file;

	assert_int_equal(ns_mkdir(&f->ns, ns_any(NS_ROOT_INO), "d", 0750, 1, 2, &d), 0);
	assert_int_equal(d.mode, S_IFDIR | 0750);
	assert_int_equal(d.nlink, 2);
	assert_int_equal(ns_getattr(&f->ns, ns_any(NS_ROOT_INO), &root), 0);
	assert_int_equal(root.nlink, 3);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(NS_ROOT_INO), "d", 0750, 1, 2, NULL), -EEXIST);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(d.ino), "e", 0755, 0, 0, &e), 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(e.ino), "..", &root), 0);
	assert_int_equal(root.ino, d.ino);
	file = mkfile(&f->ns, d.ino, "f", 0);

	assert_int_equal(ns_rmdir(&f->ns, ns_any(NS_ROOT_INO), "d"), -ENOTEMPTY);
	assert_int_equal(ns_rmdir(&f->ns, ns_any(d.ino), "f"), -ENOTDIR);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d.ino), "e"), -EISDIR);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d.ino), "nope"), -ENOENT);
	assert_int_equal(ns_rmdir(&f->ns, ns_any(d.ino), "nope"), -ENOENT);

	assert_int_equal(ns_unlink(&f->ns, ns_any(d.ino), "f"), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(file), NULL), -ENOENT);
	assert_int_equal(ns_rmdir(&f->ns, ns_any(d.ino), "e"), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(d.ino), &d), 0);
	assert_int_equal(d.nlink, 2);
	assert_int_equal(ns_rmdir(&f->ns, ns_any(NS_ROOT_INO), "d"), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(NS_ROOT_INO), &root), 0);
	assert_int_equal(root.nlink, 2);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "d", NULL), -ENOENT);
}

static void test_symlink_resolve(void **state)
{
	struct fx *f = *state;
	struct meta_inode in, l;
	char buf[16];
	uint64_t a, b, file;
	char big[NS_PATH_MAX + 1];

	a = mkdir_(&f->ns, NS_ROOT_INO, "a");
	b = mkdir_(&f->ns, a, "b");
	file = mkfile(&f->ns, b, "f", 0);
	assert_int_equal(ns_symlink(&f->ns, ns_any(NS_ROOT_INO), "abs", "/a/b", 0, 0, &l), 0);
	assert_true(S_ISLNK(l.mode));
	assert_int_equal(l.size, 4);
	assert_int_equal(ns_symlink(&f->ns, ns_any(a), "rel", "b/f", 0, 0, NULL), 0);
	assert_int_equal(ns_symlink(&f->ns, ns_any(a), "up", "../a/./b", 0, 0, NULL), 0);
	assert_int_equal(ns_symlink(&f->ns, ns_any(NS_ROOT_INO), "loop", "loop", 0, 0, NULL), 0);
	assert_int_equal(ns_symlink(&f->ns, ns_any(NS_ROOT_INO), "x", "", 0, 0, NULL), -ENOENT);
	memset(big, 'x', NS_PATH_MAX);
	big[NS_PATH_MAX] = '\0';
	assert_int_equal(ns_symlink(&f->ns, ns_any(NS_ROOT_INO), "x", big, 0, 0, NULL), -ENAMETOOLONG);
	assert_int_equal(ns_symlink(&f->ns, ns_any(NS_ROOT_INO), "abs", "y", 0, 0, NULL), -EEXIST);

	assert_int_equal(ns_readlink(&f->ns, ns_any(l.ino), buf, sizeof(buf)), 4);
	assert_string_equal(buf, "/a/b");
	assert_int_equal(ns_readlink(&f->ns, ns_any(l.ino), buf, 3), 4);
	assert_string_equal(buf, "/a");
	assert_int_equal(ns_readlink(&f->ns, ns_any(file), buf, sizeof(buf)), -EINVAL);

	assert_int_equal(ns_resolve(&f->ns, "/", 0, &in), 0);
	assert_int_equal(in.ino, NS_ROOT_INO);
	assert_int_equal(ns_resolve(&f->ns, "//a/./b//f", 0, &in), 0);
	assert_int_equal(in.ino, file);
	assert_int_equal(ns_resolve(&f->ns, "/a/b/../b/f", 0, &in), 0);
	assert_int_equal(in.ino, file);
	assert_int_equal(ns_resolve(&f->ns, "/abs/f", 0, &in), 0);
	assert_int_equal(in.ino, file);
	assert_int_equal(ns_resolve(&f->ns, "/abs", 0, &in), 0);
	assert_int_equal(in.ino, l.ino);
	assert_int_equal(ns_resolve(&f->ns, "/abs", NS_RESOLVE_FOLLOW, &in), 0);
	assert_int_equal(in.ino, b);
	assert_int_equal(ns_resolve(&f->ns, "/abs/", 0, &in), 0);
	assert_int_equal(in.ino, b);
	assert_int_equal(ns_resolve(&f->ns, "/a/rel", NS_RESOLVE_FOLLOW, &in), 0);
	assert_int_equal(in.ino, file);
	assert_int_equal(ns_resolve(&f->ns, "/a/up/f", 0, &in), 0);
	assert_int_equal(in.ino, file);
	assert_int_equal(ns_resolve(&f->ns, "/loop/x", 0, &in), -ELOOP);
	assert_int_equal(ns_resolve(&f->ns, "/loop", NS_RESOLVE_FOLLOW, &in), -ELOOP);
	assert_int_equal(ns_resolve(&f->ns, "/loop", 0, &in), 0);
	assert_int_equal(ns_resolve(&f->ns, "/a/b/f/x", 0, &in), -ENOTDIR);
	assert_int_equal(ns_resolve(&f->ns, "/a/b/f/", 0, &in), -ENOTDIR);
	assert_int_equal(ns_resolve(&f->ns, "/a/nope", 0, &in), -ENOENT);
	assert_int_equal(ns_resolve(&f->ns, "a/b", 0, &in), -EINVAL);
	memset(big, 'n', NS_NAME_MAX + 1);
	big[0] = '/';
	big[NS_NAME_MAX + 2] = '\0';
	assert_int_equal(ns_resolve(&f->ns, big, 0, &in), -ENAMETOOLONG);

	/* 40 links in a chain resolve, 41 do not. */
	for (int i = 0; i < 41; i++) {
		char name[16], target[16];

		snprintf(name, sizeof(name), "c%d", i);
		snprintf(target, sizeof(target), i ? "c%d" : "a", i - 1);
		assert_int_equal(ns_symlink(&f->ns, ns_any(NS_ROOT_INO), name, target, 0, 0, NULL), 0);
	}
	assert_int_equal(ns_resolve(&f->ns, "/c39/b", 0, &in), 0);
	assert_int_equal(in.ino, b);
	assert_int_equal(ns_resolve(&f->ns, "/c40/b", 0, &in), -ELOOP);
}

/* Every bad name and error path leaves the namespace exactly as it was. */
static void test_errors_leave_namespace_unchanged(void **state)
{
	struct fx *f = *state;
	char long_name[NS_NAME_MAX + 2], max_name[NS_NAME_MAX + 1];
	const char *bad[] = { "", ".", "..", "a/b", "/", long_name };
	int bad_err[] = { -EINVAL, -EINVAL, -EINVAL, -EINVAL, -EINVAL, -ENAMETOOLONG };
	uint64_t d, e, file;
	char *before, *after;

	memset(long_name, 'x', NS_NAME_MAX + 1);
	long_name[NS_NAME_MAX + 1] = '\0';
	memset(max_name, 'y', NS_NAME_MAX);
	max_name[NS_NAME_MAX] = '\0';

	d = mkdir_(&f->ns, NS_ROOT_INO, "d");
	e = mkdir_(&f->ns, d, "e");
	file = mkfile(&f->ns, d, "f", 5u << 20);
	mkfile(&f->ns, e, "g", 1);
	assert_int_equal(ns_symlink(&f->ns, ns_any(d), "l", "f", 0, 0, NULL), 0);
	mkfile(&f->ns, NS_ROOT_INO, max_name, 0); /* 255 bytes is fine */
	before = dump_ns(&f->ns);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *n = bad[i];
		int want = bad_err[i];

		assert_int_equal(ns_create(&f->ns, ns_any(d), n, 0644, 0, 0, true, NULL), want);
		assert_int_equal(ns_create(&f->ns, ns_any(d), n, 0644, 0, 0, false, NULL), want);
		assert_int_equal(ns_mkdir(&f->ns, ns_any(d), n, 0755, 0, 0, NULL), want);
		assert_int_equal(ns_symlink(&f->ns, ns_any(d), n, "t", 0, 0, NULL), want);
		assert_int_equal(ns_unlink(&f->ns, ns_any(d), n), want);
		assert_int_equal(ns_rmdir(&f->ns, ns_any(d), n), want);
		assert_int_equal(ns_rename(&f->ns, ns_any(d), "f", ns_any(d), n, 0), want);
		assert_int_equal(ns_rename(&f->ns, ns_any(d), n, ns_any(d), "zz", 0), want);
	}
	assert_int_equal(ns_lookup(&f->ns, ns_any(d), long_name, NULL), -ENAMETOOLONG);
	assert_int_equal(ns_lookup(&f->ns, ns_any(d), "", NULL), -EINVAL);
	assert_int_equal(ns_lookup(&f->ns, ns_any(d), "a/b", NULL), -EINVAL);
	assert_int_equal(ns_name_check("a\0b", 3), -EINVAL);
	assert_int_equal(ns_name_check("ab", 2), 0);
	assert_int_equal(ns_name_check(long_name, NS_NAME_MAX + 1), -ENAMETOOLONG);

	/* ENOENT */
	assert_int_equal(ns_lookup(&f->ns, ns_any(d), "nope", NULL), -ENOENT);
	assert_int_equal(ns_create(&f->ns, ns_any(9999), "x", 0644, 0, 0, true, NULL), -ENOENT);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(9999), "x", 0755, 0, 0, NULL), -ENOENT);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "nope"), -ENOENT);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "nope", ns_any(d), "x", 0), -ENOENT);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "f", ns_any(9999), "x", 0), -ENOENT);
	assert_int_equal(ns_setattr(&f->ns, ns_any(9999), NS_ATTR_UID, &(struct meta_inode){ 0 },
				    NULL, NULL), -ENOENT);
	assert_int_equal(ns_truncate(&f->ns, ns_any(9999), 0, NULL), -ENOENT);
	assert_int_equal(ns_set_size(&f->ns, ns_any(9999), 1, 0, NULL), -ENOENT);
	assert_int_equal(ns_resolve(&f->ns, "/d/nope/x", 0, NULL), -ENOENT);
	/* EEXIST */
	assert_int_equal(ns_mkdir(&f->ns, ns_any(d), "f", 0755, 0, 0, NULL), -EEXIST);
	assert_int_equal(ns_symlink(&f->ns, ns_any(d), "e", "t", 0, 0, NULL), -EEXIST);
	assert_int_equal(ns_create(&f->ns, ns_any(d), "f", 0644, 0, 0, true, NULL), -EEXIST);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "f", ns_any(d), "l", NS_RENAME_NOREPLACE), -EEXIST);
	/* ENOTDIR */
	assert_int_equal(ns_create(&f->ns, ns_any(file), "x", 0644, 0, 0, true, NULL), -ENOTDIR);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(file), "x", 0755, 0, 0, NULL), -ENOTDIR);
	assert_int_equal(ns_lookup(&f->ns, ns_any(file), "x", NULL), -ENOTDIR);
	assert_int_equal(ns_readdir(&f->ns, ns_any(file), NULL, 10, collect_cb, NULL), -ENOTDIR);
	assert_int_equal(ns_rmdir(&f->ns, ns_any(d), "f"), -ENOTDIR);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "e", ns_any(d), "f", 0), -ENOTDIR);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(file), &(struct file_layout){ 1u << 20, 1, 1, 0 }),
			 -ENOTDIR);
	/* ENOTEMPTY */
	assert_int_equal(ns_rmdir(&f->ns, ns_any(NS_ROOT_INO), "d"), -ENOTEMPTY);
	/* EISDIR */
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "e"), -EISDIR);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "f", ns_any(d), "e", 0), -EISDIR);
	assert_int_equal(ns_truncate(&f->ns, ns_any(e), 0, NULL), -EISDIR);
	assert_int_equal(ns_set_size(&f->ns, ns_any(e), 10, 0, NULL), -EISDIR);
	/* EINVAL */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d", ns_any(e), "x", 0), -EINVAL);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d", ns_any(d), "x", 0), -EINVAL);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "f", ns_any(d), "x",
				   NS_RENAME_NOREPLACE | NS_RENAME_EXCHANGE), -EINVAL);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "f", ns_any(d), "x", 0x80), -EINVAL);

	after = dump_ns(&f->ns);
	assert_string_equal(before, after);
	free(before);
	free(after);
}

static void expect_name(struct ns *ns, uint64_t dir, const char *name, uint64_t ino)
{
	struct meta_inode in;

	assert_int_equal(ns_lookup(ns, ns_any(dir), name, &in), 0);
	assert_int_equal(in.ino, ino);
}

static void test_rename(void **state)
{
	struct fx *f = *state;
	struct meta_inode in, root;
	struct meta_gc_item gc[4];
	uint64_t a, b, d1, d2, d3, sub, x;
	char *before, *after;

	a = mkfile(&f->ns, NS_ROOT_INO, "a", 1);
	b = mkfile(&f->ns, NS_ROOT_INO, "b", (4u << 20) + 1);
	d1 = mkdir_(&f->ns, NS_ROOT_INO, "d1");
	d2 = mkdir_(&f->ns, NS_ROOT_INO, "d2");
	sub = mkdir_(&f->ns, d2, "sub");
	x = mkfile(&f->ns, sub, "x", 0);

	/* Same directory, new name. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "a", ns_any(NS_ROOT_INO), "a2", 0), 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "a", NULL), -ENOENT);
	expect_name(&f->ns, NS_ROOT_INO, "a2", a);

	/* Rename to itself: a no-op, whatever the flags. */
	before = dump_ns(&f->ns);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "a2", ns_any(NS_ROOT_INO), "a2", 0), 0);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "a2", ns_any(NS_ROOT_INO), "a2",
				   NS_RENAME_NOREPLACE), 0);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d1", ns_any(NS_ROOT_INO), "d1",
				   NS_RENAME_EXCHANGE), 0);
	after = dump_ns(&f->ns);
	assert_string_equal(before, after);
	free(before);
	free(after);

	/* File over file: the target's inode goes and its chunks are queued. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "a2", ns_any(NS_ROOT_INO), "b", 0), 0);
	expect_name(&f->ns, NS_ROOT_INO, "b", a);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "a2", NULL), -ENOENT);
	assert_int_equal(ns_getattr(&f->ns, ns_any(b), NULL), -ENOENT);
	assert_int_equal(gc_all(&f->ns, b, gc, 4), 1);
	assert_int_equal(gc[0].from, 0);
	assert_int_equal(gc[0].to, 2);

	/* NOREPLACE onto a free name works; EXCHANGE needs both. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "b", ns_any(d1), "b", NS_RENAME_NOREPLACE), 0);
	expect_name(&f->ns, d1, "b", a);
	assert_int_equal(ns_getattr(&f->ns, ns_any(a), &in), 0);
	assert_int_equal(in.parent, d1);
	assert_int_equal(ns_rename(&f->ns, ns_any(d1), "b", ns_any(d2), "nope", NS_RENAME_EXCHANGE), -ENOENT);

	/* EXCHANGE a file and a directory across directories. */
	assert_int_equal(ns_rename(&f->ns, ns_any(d1), "b", ns_any(d2), "sub", NS_RENAME_EXCHANGE), 0);
	expect_name(&f->ns, d1, "b", sub);
	expect_name(&f->ns, d2, "sub", a);
	assert_int_equal(ns_getattr(&f->ns, ns_any(d1), &in), 0);
	assert_int_equal(in.nlink, 3);
	assert_int_equal(ns_getattr(&f->ns, ns_any(d2), &in), 0);
	assert_int_equal(in.nlink, 2);
	assert_int_equal(ns_lookup(&f->ns, ns_any(sub), "..", &in), 0);
	assert_int_equal(in.ino, d1);
	/* ... and back. */
	assert_int_equal(ns_rename(&f->ns, ns_any(d2), "sub", ns_any(d1), "b", NS_RENAME_EXCHANGE), 0);
	expect_name(&f->ns, d2, "sub", sub);
	expect_name(&f->ns, d1, "b", a);
	/* EXCHANGE a directory with an entry inside it. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d2", ns_any(sub), "x", NS_RENAME_EXCHANGE),
			 -EINVAL);
	assert_int_equal(ns_rename(&f->ns, ns_any(sub), "x", ns_any(NS_ROOT_INO), "d2", NS_RENAME_EXCHANGE),
			 -EINVAL);

	/* File over directory, directory over file, over non-empty dir. */
	assert_int_equal(ns_rename(&f->ns, ns_any(d1), "b", ns_any(NS_ROOT_INO), "d2", 0), -EISDIR);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d2", ns_any(d1), "b", 0), -ENOTDIR);
	d3 = mkdir_(&f->ns, NS_ROOT_INO, "d3");
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d3", ns_any(NS_ROOT_INO), "d2", 0), -ENOTEMPTY);
	/* Into its own subtree. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d2", ns_any(sub), "d2", 0), -EINVAL);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d2", ns_any(d2), "again", 0), -EINVAL);
	/* An ancestor onto a descendant's name is fine as long as it is not
	 * its own subtree: d2/sub over d3 (empty) replaces d3. */
	assert_int_equal(ns_rename(&f->ns, ns_any(d2), "sub", ns_any(NS_ROOT_INO), "d3", 0), 0);
	expect_name(&f->ns, NS_ROOT_INO, "d3", sub);
	expect_name(&f->ns, sub, "x", x);
	assert_int_equal(ns_getattr(&f->ns, ns_any(d3), NULL), -ENOENT);
	assert_int_equal(ns_getattr(&f->ns, ns_any(NS_ROOT_INO), &root), 0);
	assert_int_equal(root.nlink, 2 + 3); /* d1, d2, d3(=sub) */
	assert_int_equal(ns_getattr(&f->ns, ns_any(d2), &in), 0);
	assert_int_equal(in.nlink, 2);
	/* Directory over an empty directory across parents. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "d2", ns_any(d1), "dd", 0), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(d1), &in), 0);
	assert_int_equal(in.nlink, 3);
	assert_int_equal(ns_getattr(&f->ns, ns_any(NS_ROOT_INO), &root), 0);
	assert_int_equal(root.nlink, 4);
	assert_int_equal(ns_resolve(&f->ns, "/d1/dd/../b", 0, &in), 0);
	assert_int_equal(in.ino, a);
}

static int stop_after_three(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct name_list *l = arg;

	if (l->n == 3)
		return 1;
	return collect_cb(arg, name, ino, type);
}

static void test_readdir_paging(void **state)
{
	struct fx *f = *state;
	struct name_list l = { 0 };
	char cookie[NS_NAME_MAX + 1] = "";
	char name[32];
	bool stable[200] = { false };
	int n, page = 0;
	uint64_t d = mkdir_(&f->ns, NS_ROOT_INO, "d");

	for (int i = 0; i < 200; i += 2) {
		snprintf(name, sizeof(name), "e%03d", i);
		mkfile(&f->ns, d, name, 0);
		stable[i] = true;
	}
	/* Odd names come and go between pages; even ones exist throughout,
	 * except those deleted below (they are then no longer "stable"). */
	do {
		size_t before = l.n;

		n = ns_readdir(&f->ns, ns_any(d), cookie, 7, collect_cb, &l);
		assert_true(n >= 0);
		assert_int_equal(l.n - before, (size_t)n);
		if (n)
			snprintf(cookie, sizeof(cookie), "%s", l.names[l.n - 1]);
		page++;
		for (int k = 0; k < 3; k++) {
			int i = (page * 37 + k * 61) % 200;

			snprintf(name, sizeof(name), "e%03d", i);
			if (i % 2) {
				int err = ns_create(&f->ns, ns_any(d), name, 0644, 0, 0, true, NULL);

				if (err == -EEXIST)
					assert_int_equal(ns_unlink(&f->ns, ns_any(d), name), 0);
				else
					assert_int_equal(err, 1);
			} else if (k == 2 && stable[i]) {
				assert_int_equal(ns_unlink(&f->ns, ns_any(d), name), 0);
				stable[i] = false;
			}
		}
	} while (n == 7);
	assert_true(page > 10);
	for (size_t i = 1; i < l.n; i++)
		assert_true(strcmp(l.names[i - 1], l.names[i]) < 0); /* no dups, ordered */
	for (int i = 0; i < 200; i++) {
		bool found = false;

		if (!stable[i])
			continue;
		snprintf(name, sizeof(name), "e%03d", i);
		for (size_t j = 0; j < l.n && !found; j++)
			found = !strcmp(l.names[j], name);
		assert_true(found);
	}
	list_free(&l);

	/* max 0, past the end, and a callback that stops early. */
	assert_int_equal(ns_readdir(&f->ns, ns_any(d), NULL, 0, collect_cb, &l), 0);
	assert_int_equal(ns_readdir(&f->ns, ns_any(d), "zzz", 10, collect_cb, &l), 0);
	assert_int_equal(ns_readdir(&f->ns, ns_any(d), NULL, 10, stop_after_three, &l), 3);
	assert_int_equal(l.n, 3);
	list_free(&l);
	/* A cookie of the longest name is accepted. */
	memset(cookie, 'z', NS_NAME_MAX);
	cookie[NS_NAME_MAX] = '\0';
	assert_int_equal(ns_readdir(&f->ns, ns_any(d), cookie, 10, collect_cb, &l), 0);
}

struct worker {
	const char *db;
	uint64_t dir;
	int id;
	int errors;
};

#define WORKERS 4
#define PER_WORKER 200

static void *create_worker(void *arg)
{
	struct worker *w = arg;
	struct meta_store st;
	struct ns ns;

	if (store_open(w->db, &st) || ns_init(&ns, &st, 0)) {
		w->errors++;
		return NULL;
	}
	for (int i = 0; i < PER_WORKER; i++) {
		char name[32];

		snprintf(name, sizeof(name), "w%d-f%03d", w->id, i);
		if (ns_create(&ns, ns_any(w->dir), name, 0644, 0, 0, true, NULL) != 1)
			w->errors++;
	}
	ns_release(&ns);
	meta_store_close(&st);
	return NULL;
}

static void test_concurrent_creates(void **state)
{
	struct fx *f = *state;
	struct worker w[WORKERS];
	pthread_t t[WORKERS];
	struct name_list l = { 0 };
	struct ns_statfs sf;
	struct meta_inode in;
	uint64_t d = mkdir_(&f->ns, NS_ROOT_INO, "shared");

	for (int i = 0; i < WORKERS; i++) {
		w[i] = (struct worker){ f->db, d, i, 0 };
		assert_int_equal(pthread_create(&t[i], NULL, create_worker, &w[i]), 0);
	}
	for (int i = 0; i < WORKERS; i++) {
		assert_int_equal(pthread_join(t[i], NULL), 0);
		assert_int_equal(w[i].errors, 0);
	}
	list_all(&f->ns, d, 100, &l);
	assert_int_equal(l.n, WORKERS * PER_WORKER);
	for (size_t i = 1; i < l.n; i++) {
		assert_true(strcmp(l.names[i - 1], l.names[i]) < 0);
		for (size_t j = 0; j < i; j++)
			assert_int_not_equal(l.inos[i], l.inos[j]);
	}
	for (int i = 0; i < WORKERS; i++)
		for (int k = 0; k < PER_WORKER; k++) {
			char name[32];

			snprintf(name, sizeof(name), "w%d-f%03d", i, k);
			assert_int_equal(ns_lookup(&f->ns, ns_any(d), name, &in), 0);
		}
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.inodes, 2 + WORKERS * PER_WORKER);
	list_free(&l);
}

#define CS (64u * 1024)

/* What the orphan reconciler asks (ns_chunk_span/state/reclaim). */
static void test_orphan_chunks(void **state)
{
	struct fx *f = *state;
	struct meta_gc_item gc[8];
	struct file_layout l;
	uint64_t d, ino, gone, n = 99;

	d = mkdir_(&f->ns, NS_ROOT_INO, "o");
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), &(struct file_layout){ CS, 2, 0, 0 }), 0);
	ino = mkfile(&f->ns, d, "f", 2 * CS + 1);	/* chunks 0..2 */
	gone = mkfile(&f->ns, d, "g", 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "g"), 0);

	assert_int_equal(ns_chunk_span(&f->ns, ino, &n), NS_CHUNK_OWNED);
	assert_int_equal(n, 3);
	assert_int_equal(ns_chunk_span(&f->ns, gone, &n), NS_CHUNK_NO_INODE);
	assert_int_equal(n, 0);
	assert_int_equal(ns_chunk_span(&f->ns, gone + 1000, &n), NS_CHUNK_FOREIGN);
	assert_int_equal(ns_chunk_state(&f->ns, ino, 2), NS_CHUNK_OWNED);
	assert_int_equal(ns_chunk_state(&f->ns, ino, 3), NS_CHUNK_BEYOND);
	assert_int_equal(ns_chunk_state(&f->ns, gone, 5), NS_CHUNK_NO_INODE);

	/* Beyond the size: queued with the file's layout, then owned (queued). */
	assert_int_equal(ns_chunk_reclaim(&f->ns, ino, 2, NS_CHUNK_BEYOND, NULL), 0);
	assert_int_equal(ns_chunk_reclaim(&f->ns, ino, 4, NS_CHUNK_BEYOND, NULL), 1);
	assert_int_equal(ns_chunk_state(&f->ns, ino, 4), NS_CHUNK_OWNED);
	assert_int_equal(ns_chunk_reclaim(&f->ns, ino, 4, NS_CHUNK_BEYOND, NULL), 0);
	assert_int_equal(gc_all(&f->ns, ino, gc, 8), 1);
	assert_int_equal(gc[0].from, 4);
	assert_int_equal(gc[0].to, 5);
	assert_int_equal(gc[0].layout.chunk_size, CS);

	/* No inode: placed by the layout given, which must be valid. */
	assert_int_equal(layout_for_chain(TABLE_LEN, TABLE_LEN - 1, CS, &l), 0);
	assert_int_equal(ns_chunk_reclaim(&f->ns, gone, 7, NS_CHUNK_NO_INODE, NULL), -EINVAL);
	assert_int_equal(ns_chunk_reclaim(&f->ns, gone, 7, NS_CHUNK_BEYOND, NULL), 0);
	assert_int_equal(ns_chunk_reclaim(&f->ns, gone, 7, NS_CHUNK_NO_INODE, &l), 1);
	assert_int_equal(gc_all(&f->ns, gone, gc, 8), 1);
	assert_int_equal(layout_chain_index(&gc[0].layout, 7), TABLE_LEN - 1);
	assert_int_equal(ns_chunk_state(&f->ns, gone, 7), NS_CHUNK_OWNED);
	assert_int_equal(ns_chunk_reclaim(&f->ns, gone + 1000, 0, NS_CHUNK_NO_INODE, &l), 0);
}

static void test_truncate_unlink_gc(void **state)
{
	struct fx *f = *state;
	struct meta_gc_item gc[8];
	struct meta_inode in, attrs = { 0 };
	struct ns_trunc tr;
	struct ns_statfs sf;
	uint64_t d, ino, other;

	d = mkdir_(&f->ns, NS_ROOT_INO, "d");
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), &(struct file_layout){ CS, 2, 0, 0 }), 0);
	ino = mkfile(&f->ns, d, "f", 0);
	other = mkfile(&f->ns, d, "g", 3 * CS);
	assert_int_equal(ns_getattr(&f->ns, ns_any(ino), &in), 0);
	assert_int_equal(in.layout.chunk_size, CS);
	assert_int_equal(in.layout.stripe, 2);
	assert_int_equal(in.layout.table_len, TABLE_LEN);

	/* Close/fsync lengths only grow. */
	assert_int_equal(ns_set_size(&f->ns, ns_any(ino), 10 * CS + 100, 1234, &in), 0);
	assert_int_equal(in.size, 10 * CS + 100);
	assert_int_equal(in.mtime_ns, 1234);
	assert_int_equal(ns_set_size(&f->ns, ns_any(ino), 5, 0, &in), 0);
	assert_int_equal(in.size, 10 * CS + 100);
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.bytes, 13 * CS + 100);
	assert_int_equal(gc_all(&f->ns, 0, gc, 8), 0);

	/* Shrink to the middle of chunk 3: chunks 4..10 go, 3 is cut. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(ino), 3 * CS + 5, &tr), 0);
	assert_true(tr.partial);
	assert_int_equal(tr.chunk, 3);
	assert_int_equal(tr.len, 5);
	assert_int_equal(tr.gc_from, 4);
	assert_int_equal(tr.gc_to, 11);
	assert_int_equal(tr.layout.chunk_size, CS);
	assert_int_equal(gc_all(&f->ns, 0, gc, 8), 1);
	assert_int_equal(gc[0].ino, ino);
	assert_int_equal(gc[0].from, 4);
	assert_int_equal(gc[0].to, 11);
	assert_int_equal(gc[0].layout.chunk_size, CS);
	assert_int_equal(gc[0].layout.seed, tr.layout.seed);
	assert_int_equal(ns_gc_done(&f->ns, &gc[0]), 0);
	assert_int_equal(gc_all(&f->ns, 0, gc, 8), 0);

	/* Shrink to a chunk boundary: nothing partial. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(ino), 2 * CS, &tr), 0);
	assert_false(tr.partial);
	assert_int_equal(tr.gc_from, 2);
	assert_int_equal(tr.gc_to, 4);
	/* Grow: nothing queued. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(ino), 7 * CS, &tr), 0);
	assert_false(tr.partial);
	assert_int_equal(tr.gc_from, tr.gc_to);
	assert_int_equal(ns_getattr(&f->ns, ns_any(ino), &in), 0);
	assert_int_equal(in.size, 7 * CS);
	/* Truncate within the last chunk of the same count: cut, no GC. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(ino), 7 * CS - 1, &tr), 0);
	assert_true(tr.partial);
	assert_int_equal(tr.chunk, 6);
	assert_int_equal(tr.len, CS - 1);
	assert_int_equal(tr.gc_from, tr.gc_to);
	/* setattr size is a truncate too. */
	attrs.size = CS + 1;
	assert_int_equal(ns_setattr(&f->ns, ns_any(ino), NS_ATTR_SIZE, &attrs, &in, &tr), 0);
	assert_int_equal(in.size, CS + 1);
	assert_int_equal(tr.gc_from, 2);
	assert_int_equal(tr.gc_to, 7);

	assert_int_equal(gc_all(&f->ns, ino, gc, 8), 2);
	assert_int_equal(gc[0].from, 2);
	assert_int_equal(gc[0].to, 4);
	assert_int_equal(gc[1].from, 2);
	assert_int_equal(gc[1].to, 7);
	gc_drain(&f->ns);

	/* Unlink queues [0, ceil(size / chunk)). */
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "f"), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "g"), 0);
	assert_int_equal(gc_all(&f->ns, 0, gc, 8), 2);
	assert_int_equal(gc[0].ino, ino);
	assert_int_equal(gc[0].from, 0);
	assert_int_equal(gc[0].to, 2);
	assert_int_equal(gc[1].ino, other);
	assert_int_equal(gc[1].from, 0);
	assert_int_equal(gc[1].to, 3);
	assert_int_equal(gc_all(&f->ns, other, gc, 8), 1);
	assert_int_equal(gc[0].ino, other);
	/* An empty file has no chunks to queue. */
	mkfile(&f->ns, d, "empty", 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "empty"), 0);
	assert_int_equal(gc_all(&f->ns, 0, gc, 8), 2);
	gc_drain(&f->ns);
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.bytes, 0);
	assert_int_equal(sf.inodes, 2);
	/* Acking twice is harmless. */
	assert_int_equal(ns_gc_done(&f->ns, &gc[0]), 0);
}

static void test_layout(void **state)
{
	struct fx *f = *state;
	struct meta_inode in, old;
	uint64_t d, sub;

	d = mkdir_(&f->ns, NS_ROOT_INO, "d");
	mkfile(&f->ns, d, "old", 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(d), "old", &old), 0);

	/* Validation. */
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), &(struct file_layout){ 3 * CS, 1, 1, 0 }),
			 -EINVAL);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), &(struct file_layout){ 4096, 1, 1, 0 }),
			 -EINVAL);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), &(struct file_layout){ 128u << 20, 1, 1, 0 }),
			 -EINVAL);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), &(struct file_layout){ CS, 5, 4, 0 }),
			 -EINVAL);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d),
				       &(struct file_layout){ CS, 1, TABLE_LEN + 1, 0 }), -EINVAL);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d),
				       &(struct file_layout){ CS, TABLE_LEN + 1, 0, 0 }), -EINVAL);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(9999), &(struct file_layout){ CS, 1, 1, 0 }),
			 -ENOENT);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), NULL), -EINVAL);

	/* Pinned values; files and subdirectories created later inherit. */
	assert_int_equal(ns_set_layout(&f->ns, ns_any(d), &(struct file_layout){ 2 * CS, 3, 4, 77 }), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(d), &in), 0);
	assert_int_equal(in.layout.chunk_size, 2 * CS);
	assert_int_equal(in.layout.stripe, 3);
	assert_int_equal(in.layout.table_len, 4);
	assert_int_equal(in.layout.seed, 0);
	sub = mkdir_(&f->ns, d, "sub");
	mkfile(&f->ns, sub, "new", 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(sub), "new", &in), 0);
	assert_int_equal(in.layout.chunk_size, 2 * CS);
	assert_int_equal(in.layout.stripe, 3);
	assert_int_equal(in.layout.table_len, 4);
	assert_int_not_equal(in.layout.seed, 0);
	/* The existing file keeps its layout. */
	assert_int_equal(ns_lookup(&f->ns, ns_any(d), "old", &in), 0);
	assert_memory_equal(&in.layout, &old.layout, sizeof(in.layout));

	/* Following the table: a later, larger table applies to new files,
	 * with the default stripe capped at 16. */
	assert_int_equal(ns_set_layout(&f->ns, ns_any(sub), &(struct file_layout){ CS, 0, 0, 0 }), 0);
	assert_int_equal(ns_set_table_len(&f->ns, 40), 0);
	mkfile(&f->ns, sub, "newer", 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(sub), "newer", &in), 0);
	assert_int_equal(in.layout.table_len, 40);
	assert_int_equal(in.layout.stripe, 16);
	assert_int_equal(in.layout.chunk_size, CS);
	assert_int_equal(ns_getattr(&f->ns, ns_any(sub), &in), 0);
	assert_int_equal(in.layout.table_len, 40);
	assert_int_equal(in.layout.stripe, 16);
}

/* Capacity-aware placement: new files avoid chains with a full member,
 * narrowing their stripe if need be; existing files keep their layout;
 * every chain full, or a table of another length: the usual layout. */
static void test_full_chains(void **state)
{
	struct fx *f = *state;
	struct meta_inode in, old;
	uint64_t bits[1] = { 0 };
	char name[32];

	assert_int_equal(ns_set_table_len(&f->ns, 40), 0);
	mkfile(&f->ns, NS_ROOT_INO, "old", 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "old", &old), 0);
	/* Chains 0..29 full: 10 have room, fewer than the default 16. */
	bits[0] = (1ull << 30) - 1;
	ns_set_full_chains(&f->ns, bits, 40, 30);
	for (int n = 0; n < 50; n++) {
		snprintf(name, sizeof(name), "f%d", n);
		mkfile(&f->ns, NS_ROOT_INO, name, 0);
		assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), name, &in), 0);
		assert_int_equal(layout_check(&in.layout), 0);
		assert_int_equal(in.layout.table_len, 40);
		assert_true(in.layout.stripe >= 1 && in.layout.stripe <= 10);
		for (uint32_t i = 0; i < in.layout.stripe; i++)
			assert_true(layout_chain_index(&in.layout, i) >= 30);
	}
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "old", &in), 0);
	assert_memory_equal(&in.layout, &old.layout, sizeof(in.layout));
	/* One chain with room: every new file lands on it alone. */
	bits[0] = ((1ull << 40) - 1) & ~(1ull << 17);
	ns_set_full_chains(&f->ns, bits, 40, 39);
	mkfile(&f->ns, NS_ROOT_INO, "one", 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "one", &in), 0);
	assert_int_equal(in.layout.stripe, 1);
	assert_int_equal(layout_chain_index(&in.layout, 0), 17);
	/* Every chain full: the usual layout (its writes get ENOSPC). */
	bits[0] = (1ull << 40) - 1;
	ns_set_full_chains(&f->ns, bits, 40, 40);
	mkfile(&f->ns, NS_ROOT_INO, "all", 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "all", &in), 0);
	assert_int_equal(in.layout.stripe, 16);
	/* Bits of another table length (a table change under way): ignored. */
	bits[0] = (1ull << 30) - 1;
	ns_set_full_chains(&f->ns, bits, 32, 30);
	mkfile(&f->ns, NS_ROOT_INO, "other", 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "other", &in), 0);
	assert_int_equal(in.layout.stripe, 16);
	ns_set_full_chains(&f->ns, NULL, 0, 0);
}

static int rooms;

static bool give_room(void *arg)
{
	(void)arg;
	rooms++;
	return false;
}

/* A tight disk (meta/reserve.h): new inodes and names are refused with
 * ENOSPC before anything is written; an existing file still opens, and
 * removals, renames and setattr go on. */
static void test_tight_disk(void **state)
{
	struct fx *f = *state;
	struct meta_inode in;
	struct ns_trunc tr;
	uint64_t d, a;

	d = mkdir_(&f->ns, NS_ROOT_INO, "d");
	a = mkfile(&f->ns, d, "a", 10);
	mkfile(&f->ns, d, "b", 10);
	ns_set_space(&f->ns, true, give_room, NULL);
	assert_int_equal(ns_create(&f->ns, ns_any(d), "new", 0644, 0, 0, true, &in), -ENOSPC);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(d), "sub", 0755, 0, 0, &in), -ENOSPC);
	assert_int_equal(ns_symlink(&f->ns, ns_any(d), "l", "a", 0, 0, &in), -ENOSPC);
	assert_int_equal(ns_mknod(&f->ns, ns_any(d), "p", S_IFIFO | 0644, 0, 0, &in), -ENOSPC);
	assert_int_equal(ns_link(&f->ns, ns_any(a), ns_any(d), "a2", &in), -ENOSPC);
	assert_int_equal(ns_lookup(&f->ns, ns_any(d), "new", &in), -ENOENT);
	/* An existing name opens (create without O_EXCL finds it). */
	assert_int_equal(ns_create(&f->ns, ns_any(d), "a", 0644, 0, 0, false, &in), 0);
	assert_int_equal(ns_open(&f->ns, ns_any(a), O_WRONLY | O_TRUNC, &in, &tr), 0);
	assert_int_equal(ns_rename(&f->ns, ns_any(d), "b", ns_any(d), "c", 0), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "a"), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "c"), 0);
	assert_int_equal(ns_rmdir(&f->ns, ns_any(NS_ROOT_INO), "d"), 0);
	assert_int_equal(rooms, 0);	/* no removal failed for space */
	ns_set_space(&f->ns, false, NULL, NULL);
	mkfile(&f->ns, NS_ROOT_INO, "after", 0);
}

static void test_setattr_statfs(void **state)
{
	struct fx *f = *state;
	struct meta_inode in, at = { 0 };
	struct ns_statfs sf;
	uint64_t ino, d;

	ino = mkfile(&f->ns, NS_ROOT_INO, "f", 100);
	d = mkdir_(&f->ns, NS_ROOT_INO, "d");
	at.mode = S_IFDIR | 04711; /* type bits are ignored */
	at.uid = 42;
	at.gid = 43;
	at.atime_ns = 111;
	at.mtime_ns = 222;
	assert_int_equal(ns_setattr(&f->ns, ns_any(ino), NS_ATTR_MODE | NS_ATTR_UID | NS_ATTR_GID |
				    NS_ATTR_ATIME | NS_ATTR_MTIME, &at, &in, NULL), 0);
	assert_int_equal(in.mode, S_IFREG | 04711);
	assert_int_equal(in.uid, 42);
	assert_int_equal(in.gid, 43);
	assert_int_equal(in.atime_ns, 111);
	assert_int_equal(in.mtime_ns, 222);
	assert_true(in.ctime_ns > 222);
	assert_int_equal(in.size, 100);
	assert_int_equal(ns_getattr(&f->ns, ns_any(ino), &in), 0);
	assert_int_equal(in.uid, 42);
	assert_int_equal(ns_setattr(&f->ns, ns_any(ino), NS_ATTR_ATIME_NOW | NS_ATTR_MTIME_NOW, &at,
				    &in, NULL), 0);
	assert_true(in.atime_ns > 111);
	assert_true(in.mtime_ns > 222);
	assert_int_equal(ns_setattr(&f->ns, ns_any(d), NS_ATTR_UID, &at, &in, NULL), 0);
	assert_int_equal(in.uid, 42);
	assert_true(S_ISDIR(in.mode));
	at.size = 0;
	assert_int_equal(ns_setattr(&f->ns, ns_any(d), NS_ATTR_SIZE | NS_ATTR_UID, &at, NULL, NULL),
			 -EISDIR);
	assert_int_equal(ns_setattr(&f->ns, ns_any(d), 1u << 20, &at, NULL, NULL), -EINVAL);

	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.inodes, 3);
	assert_int_equal(sf.bytes, 100);
	assert_int_equal(sf.table_len, TABLE_LEN);
	assert_int_equal(ns_symlink(&f->ns, ns_any(d), "l", "/f", 0, 0, NULL), 0);
	assert_int_equal(ns_statfs(&f->ns, &sf), 0);
	assert_int_equal(sf.inodes, 4);
	assert_int_equal(sf.bytes, 100);
	assert_int_equal(ns_resolve(&f->ns, "/d/l", NS_RESOLVE_FOLLOW, &in), 0);
	assert_int_equal(ns_set_size(&f->ns, ns_any(in.ino), 1, 0, NULL), 0);
	assert_int_equal(ns_resolve(&f->ns, "/d/l", 0, &in), 0);
	assert_int_equal(ns_truncate(&f->ns, ns_any(in.ino), 0, NULL), -EINVAL);
	assert_int_equal(ns_set_size(&f->ns, ns_any(in.ino), 1, 0, NULL), -EINVAL);
}

static void test_reopen(void **state)
{
	struct fx *f = *state;
	uint64_t d, e;
	char *before, *after;

	d = mkdir_(&f->ns, NS_ROOT_INO, "d");
	e = mkdir_(&f->ns, d, "e");
	mkfile(&f->ns, d, "f", 12345);
	mkfile(&f->ns, e, "g", 5u << 20);
	assert_int_equal(ns_symlink(&f->ns, ns_any(e), "l", "../f", 0, 0, NULL), 0);
	assert_int_equal(ns_set_layout(&f->ns, ns_any(e), &(struct file_layout){ CS, 2, 0, 0 }), 0);
	mkfile(&f->ns, e, "h", 1);
	assert_int_equal(ns_unlink(&f->ns, ns_any(e), "g"), 0);
	before = dump_ns(&f->ns);

	ns_release(&f->ns);
	meta_store_close(&f->st);
	assert_int_equal(fx_open(f), 0);
	after = dump_ns(&f->ns);
	assert_string_equal(before, after);
	/* Inode numbers keep growing after a reopen. */
	assert_true(mkfile(&f->ns, NS_ROOT_INO, "new", 0) > e + 4);
	free(before);
	free(after);
}

/* Every inode gets a generation no other had; it stays with the inode
 * through renames and attribute changes, and a ref that names a
 * generation reaches that inode only. */
static void test_generations(void **state)
{
	struct fx *f = *state;
	struct meta_inode root, d, a, b, in;
	struct ns_ref rd, ra, stale;

	assert_int_equal(ns_getattr(&f->ns, ns_any(NS_ROOT_INO), &root), 0);
	assert_int_equal(root.gen, NS_ROOT_GEN);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(NS_ROOT_INO), "d", 0755, 0, 0, &d), 0);
	assert_int_equal(ns_create(&f->ns, ns_any(d.ino), "a", 0644, 0, 0, true, &a), 1);
	assert_int_equal(ns_create(&f->ns, ns_any(d.ino), "b", 0644, 0, 0, true, &b), 1);
	assert_true(d.gen > NS_ROOT_GEN && a.gen > d.gen && b.gen > a.gen);
	rd = (struct ns_ref){ d.ino, d.gen };
	ra = (struct ns_ref){ a.ino, a.gen };

	/* The right generation reaches the inode, through every kind of call. */
	assert_int_equal(ns_lookup(&f->ns, rd, "a", &in), 0);
	assert_int_equal(in.ino, a.ino);
	assert_int_equal(in.gen, a.gen);
	assert_int_equal(ns_set_size(&f->ns, ra, 10, 0, NULL), 0);
	assert_int_equal(ns_rename(&f->ns, rd, "a", rd, "a2", 0), 0);
	assert_int_equal(ns_setattr(&f->ns, ra, NS_ATTR_MODE, &(struct meta_inode){ .mode = 0600 },
				    &in, NULL), 0);
	assert_int_equal(in.gen, a.gen);
	assert_int_equal(ns_resolve(&f->ns, "/d/a2", 0, &in), 0);
	assert_int_equal(in.gen, a.gen);

	/* Another generation of the same number is stale, whatever the call;
	 * nothing changes. */
	stale = (struct ns_ref){ a.ino, a.gen + 1 };
	assert_int_equal(ns_getattr(&f->ns, stale, &in), -ESTALE);
	assert_int_equal(ns_open(&f->ns, stale, O_RDWR | O_TRUNC, &in, NULL), -ESTALE);
	assert_int_equal(ns_set_size(&f->ns, stale, 99, 0, NULL), -ESTALE);
	assert_int_equal(ns_truncate(&f->ns, stale, 0, NULL), -ESTALE);
	stale = (struct ns_ref){ d.ino, d.gen + 1 };
	assert_int_equal(ns_lookup(&f->ns, stale, "a2", &in), -ESTALE);
	assert_int_equal(ns_create(&f->ns, stale, "c", 0644, 0, 0, true, &in), -ESTALE);
	assert_int_equal(ns_mkdir(&f->ns, stale, "e", 0755, 0, 0, &in), -ESTALE);
	assert_int_equal(ns_symlink(&f->ns, stale, "l", "a2", 0, 0, &in), -ESTALE);
	assert_int_equal(ns_unlink(&f->ns, stale, "a2"), -ESTALE);
	assert_int_equal(ns_rename(&f->ns, rd, "a2", stale, "x", 0), -ESTALE);
	assert_int_equal(ns_rename(&f->ns, stale, "a2", rd, "x", 0), -ESTALE);
	assert_int_equal(ns_readdir(&f->ns, stale, NULL, 10, collect_cb, NULL), -ESTALE);
	assert_int_equal(ns_set_layout(&f->ns, stale, &(struct file_layout){ CS, 0, 0, 0 }),
			 -ESTALE);
	assert_int_equal(ns_getattr(&f->ns, ra, &in), 0);
	assert_int_equal(in.size, 10);
	assert_int_equal(in.mode & 07777, 0600);

	/* A removed inode: stale by its generation, missing by number alone. */
	assert_int_equal(ns_unlink(&f->ns, rd, "a2"), 0);
	assert_int_equal(ns_getattr(&f->ns, ra, &in), -ESTALE);
	assert_int_equal(ns_readlink(&f->ns, ra, (char[8]){ 0 }, 8), -ESTALE);
	assert_int_equal(ns_getattr(&f->ns, ns_any(a.ino), &in), -ENOENT);
	/* A new file never gets an old generation back. */
	assert_int_equal(ns_create(&f->ns, rd, "a2", 0644, 0, 0, true, &in), 1);
	assert_true(in.ino != a.ino && in.gen > b.gen);
}

struct plus_list {
	uint32_t n, stop_at;
	char names[8][NS_NAME_MAX + 1];
	struct meta_inode in[8];
};

static int plus_cb(void *arg, const char *name, const struct meta_inode *in)
{
	struct plus_list *l = arg;

	if (l->n == l->stop_at)
		return 1;
	assert_true(l->n < 8);
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
	l->in[l->n++] = *in;
	return 0;
}

/* ns_readdirplus gives each entry with its inode, as a lookup would. */
static void test_readdirplus(void **state)
{
	struct fx *f = *state;
	struct plus_list l = { .stop_at = UINT32_MAX };
	struct meta_inode in;
	uint64_t d = mkdir_(&f->ns, NS_ROOT_INO, "d");

	mkfile(&f->ns, d, "f", 777);
	mkdir_(&f->ns, d, "sub");
	assert_int_equal(ns_symlink(&f->ns, ns_any(d), "l", "f", 0, 0, NULL), 0);
	assert_int_equal(ns_readdirplus(&f->ns, ns_any(d), NULL, 10, plus_cb, &l), 3);
	assert_int_equal(l.n, 3);
	assert_string_equal(l.names[0], "f");
	assert_string_equal(l.names[1], "l");
	assert_string_equal(l.names[2], "sub");
	for (uint32_t i = 0; i < 3; i++) {
		assert_int_equal(ns_lookup(&f->ns, ns_any(d), l.names[i], &in), 0);
		assert_int_equal(l.in[i].ino, in.ino);
		assert_int_equal(l.in[i].gen, in.gen);
		assert_int_equal(l.in[i].mode, in.mode);
		assert_int_equal(l.in[i].size, in.size);
		/* A directory's layout is resolved, as lookup reports it. */
		assert_int_equal(l.in[i].layout.table_len, in.layout.table_len);
		assert_int_equal(l.in[i].layout.stripe, in.layout.stripe);
	}
	assert_int_equal(l.in[0].size, 777);
	assert_true(S_ISLNK(l.in[1].mode));
	assert_true(S_ISDIR(l.in[2].mode));

	/* Paged by cookie; a callback that stops takes nothing more. */
	memset(&l, 0, sizeof(l));
	l.stop_at = 1;
	assert_int_equal(ns_readdirplus(&f->ns, ns_any(d), "f", 10, plus_cb, &l), 1);
	assert_string_equal(l.names[0], "l");
	assert_int_equal(ns_readdirplus(&f->ns, ns_any(d), "sub", 10, plus_cb, &l), 0);
	assert_int_equal(ns_readdirplus(&f->ns, ns_any(d), NULL, 10, NULL, NULL), -EINVAL);
}

/* A database made before generations (schema 1) opens: its inodes get
 * generation 1 and keep everything else; new ones get fresh generations. */
static void test_schema_v1_migration(void **state)
{
	static const char v1[] =
		"CREATE TABLE inodes (ino INTEGER PRIMARY KEY, mode INTEGER NOT NULL,"
		" uid INTEGER NOT NULL, gid INTEGER NOT NULL, nlink INTEGER NOT NULL,"
		" size INTEGER NOT NULL, atime INTEGER NOT NULL, mtime INTEGER NOT NULL,"
		" ctime INTEGER NOT NULL, parent INTEGER NOT NULL, chunk_size INTEGER NOT NULL,"
		" stripe INTEGER NOT NULL, table_len INTEGER NOT NULL, seed INTEGER NOT NULL,"
		" target BLOB);"
		"CREATE TABLE dentries (parent INTEGER NOT NULL, name BLOB NOT NULL,"
		" ino INTEGER NOT NULL, type INTEGER NOT NULL, PRIMARY KEY (parent, name))"
		" WITHOUT ROWID;"
		"CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)"
		" WITHOUT ROWID;"
		"INSERT INTO counters VALUES ('schema_version', 1), ('next_ino', 2),"
		" ('inodes', 2), ('bytes', 5), ('table_len', 8);"
		"INSERT INTO inodes VALUES (1, 16877, 0, 0, 2, 0, 1, 1, 1, 1, 4194304, 0, 0, 0,"
		" NULL), (2, 33188, 7, 8, 1, 5, 1, 1, 1, 1, 4194304, 8, 8, 42, NULL);"
		"INSERT INTO dentries VALUES (1, CAST('old' AS BLOB), 2, 32768);";
	struct fx *f = *state;
	struct meta_inode in, fresh;
	sqlite3 *db;
	int64_t v;

	if (pg_host)
		skip();		/* SQLite's own history; test_pg_schema is PostgreSQL's */
	ns_release(&f->ns);
	meta_store_close(&f->st);
	unlink(f->db);
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, v1, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);

	assert_int_equal(fx_open(f), 0);
	assert_int_equal(ns_resolve(&f->ns, "/old", 0, &in), 0);
	assert_int_equal(in.ino, 2);
	assert_int_equal(in.gen, 1);
	assert_int_equal(in.size, 5);
	assert_int_equal(in.uid, 7);
	assert_int_equal(in.layout.seed, 42);
	assert_int_equal(ns_getattr(&f->ns, (struct ns_ref){ 2, 1 }, &in), 0);
	assert_int_equal(ns_getattr(&f->ns, (struct ns_ref){ NS_ROOT_INO, NS_ROOT_GEN }, &in), 0);
	assert_int_equal(ns_create(&f->ns, ns_any(NS_ROOT_INO), "new", 0644, 0, 0, true, &fresh),
			 1);
	assert_int_equal(fresh.ino, 3);
	assert_true(fresh.gen > 1);
	assert_int_equal(f->st.ops->begin(f->st.impl, false), 0);
	assert_int_equal(f->st.ops->counter_get(f->st.impl, "schema_version", &v), 0);
	f->st.ops->rollback(f->st.impl);
	assert_int_equal(v, 5);
	/* Version 5's inline data works on the migrated database. */
	assert_int_equal(ns_publish_inline(&f->ns, ns_any(fresh.ino), (const uint8_t *)"abc", 3, 0,
					   &in), 0);
	assert_int_equal(in.size, 3);

	/* Opening it again does not migrate twice. */
	ns_release(&f->ns);
	meta_store_close(&f->st);
	assert_int_equal(fx_open(f), 0);
	assert_int_equal(ns_getattr(&f->ns, (struct ns_ref){ fresh.ino, fresh.gen }, &in), 0);

	/* A database from a newer build is refused. */
	ns_release(&f->ns);
	meta_store_close(&f->st);
	assert_int_equal(sqlite3_open(f->db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "UPDATE counters SET value = 99 WHERE name ="
				      " 'schema_version'", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(meta_store_sqlite_open(f->db, NULL, &f->st), -EIO);
	assert_int_equal(fx_open(f), -EIO);
	/* teardown closes what it finds: nothing is open now. */
	memset(&f->st, 0, sizeof(f->st));
}

/* ---- quotas ---- */

/* Creates file name in dir with size bytes; returns its inode number. */
static uint64_t q_file(struct fx *f, uint64_t dir, const char *name, uint64_t size)
{
	struct meta_inode in;

	assert_int_equal(ns_create(&f->ns, ns_any(dir), name, 0644, 0, 0, true, &in), 1);
	if (size)
		assert_int_equal(ns_set_size(&f->ns, ns_any(in.ino), size, 0, NULL), 0);
	return in.ino;
}

static uint64_t q_dir(struct fx *f, uint64_t dir, const char *name)
{
	struct meta_inode in;

	assert_int_equal(ns_mkdir(&f->ns, ns_any(dir), name, 0755, 0, 0, &in), 0);
	return in.ino;
}

static void q_usage(struct fx *f, uint64_t dir, uint64_t bytes, uint64_t inodes)
{
	struct meta_quota q;

	assert_int_equal(ns_quota_get(&f->ns, ns_any(dir), &q), 0);
	assert_int_equal(q.ino, dir);
	assert_int_equal(q.bytes, bytes);
	assert_int_equal(q.inodes, inodes);
}

/* Hard links: one inode, several names; unlink drops names until the
 * last, which drops the inode and queues its chunks; rename onto another
 * name of the same file does nothing. */
static void test_link(void **state)
{
	struct fx *f = *state;
	struct meta_inode in, l, d;
	struct ns_statfs st;
	uint64_t a = mkdir_(&f->ns, NS_ROOT_INO, "a"), b = mkdir_(&f->ns, NS_ROOT_INO, "b");
	uint64_t file = mkfile(&f->ns, a, "f", 5000);

	assert_int_equal(ns_link(&f->ns, ns_any(file), ns_any(b), "g", &l), 0);
	assert_int_equal(l.ino, file);
	assert_int_equal(l.nlink, 2);
	assert_int_equal(ns_lookup(&f->ns, ns_any(b), "g", &in), 0);
	assert_int_equal(in.ino, file);
	assert_int_equal(ns_statfs(&f->ns, &st), 0);
	assert_int_equal(st.inodes, 4);		/* root, a, b, f: a link is no inode */
	assert_int_equal(st.bytes, 5000);
	/* Refusals. */
	assert_int_equal(ns_link(&f->ns, ns_any(file), ns_any(b), "g", NULL), -EEXIST);
	assert_int_equal(ns_link(&f->ns, ns_any(a), ns_any(b), "dir", NULL), -EPERM);
	assert_int_equal(ns_link(&f->ns, ns_any(file), ns_any(file), "x", NULL), -ENOTDIR);
	assert_int_equal(ns_link(&f->ns, ns_any(file), ns_any(b), "", NULL), -EINVAL);
	/* Rename onto the other name: nothing happens. */
	assert_int_equal(ns_rename(&f->ns, ns_any(a), "f", ns_any(b), "g", 0), 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(a), "f", &in), 0);
	assert_int_equal(in.nlink, 2);
	/* The first name goes: the file stays, with one link, reachable by
	 * the other name and by its handle. */
	assert_int_equal(ns_unlink(&f->ns, ns_any(a), "f"), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(file), &in), 0);
	assert_int_equal(in.nlink, 1);
	assert_int_equal(in.size, 5000);
	assert_int_equal(ns_lookup(&f->ns, ns_any(b), "g", &in), 0);
	assert_int_equal(ns_statfs(&f->ns, &st), 0);
	assert_int_equal(st.bytes, 5000);
	/* a can go now: nothing in it. */
	assert_int_equal(ns_rmdir(&f->ns, ns_any(NS_ROOT_INO), "a"), 0);
	assert_int_equal(ns_set_size(&f->ns, ns_any(file), 6000, 0, NULL), 0);
	/* The last name: the inode goes. */
	assert_int_equal(ns_unlink(&f->ns, ns_any(b), "g"), 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(file), &in), -ENOENT);
	assert_int_equal(ns_statfs(&f->ns, &st), 0);
	assert_int_equal(st.bytes, 0);
	assert_int_equal(st.inodes, 2);
	assert_int_equal(ns_getattr(&f->ns, ns_any(b), &d), 0);
	assert_int_equal(d.nlink, 2);
}

/* A rename over one name of a file with two keeps the file. */
static void test_link_rename_over(void **state)
{
	struct fx *f = *state;
	struct meta_inode in;
	uint64_t file = mkfile(&f->ns, NS_ROOT_INO, "f", 10);
	uint64_t other = mkfile(&f->ns, NS_ROOT_INO, "o", 20);

	assert_int_equal(ns_link(&f->ns, ns_any(file), ns_any(NS_ROOT_INO), "f2", NULL), 0);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "o", ns_any(NS_ROOT_INO), "f", 0),
			 0);
	assert_int_equal(ns_getattr(&f->ns, ns_any(file), &in), 0);
	assert_int_equal(in.nlink, 1);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "f", &in), 0);
	assert_int_equal(in.ino, other);
}

/* Names of one file stay in one quota domain; usage is counted once. */
static void test_link_quota(void **state)
{
	struct fx *f = *state;
	uint64_t q = q_dir(f, NS_ROOT_INO, "q"), x = mkdir_(&f->ns, q, "x"),
		 y = mkdir_(&f->ns, q, "y"), file;
	struct meta_inode in;

	assert_int_equal(ns_quota_set(&f->ns, ns_any(q), 100000, 0, NULL), 0);
	file = q_file(f, x, "f", 700);
	q_usage(f, q, 700, 3);
	assert_int_equal(ns_link(&f->ns, ns_any(file), ns_any(y), "g", NULL), 0);
	q_usage(f, q, 700, 3);
	/* Out of the quota root: refused, both by link and by rename. */
	assert_int_equal(ns_link(&f->ns, ns_any(file), ns_any(NS_ROOT_INO), "h", NULL), -EXDEV);
	assert_int_equal(ns_rename(&f->ns, ns_any(y), "g", ns_any(NS_ROOT_INO), "h", 0), -EXDEV);
	/* Within it, a rename moves a name. */
	assert_int_equal(ns_rename(&f->ns, ns_any(y), "g", ns_any(q), "g", 0), 0);
	/* The first name goes: the file is charged to q still. */
	assert_int_equal(ns_unlink(&f->ns, ns_any(x), "f"), 0);
	q_usage(f, q, 700, 3);
	assert_int_equal(ns_set_size(&f->ns, ns_any(file), 900, 0, NULL), 0);
	q_usage(f, q, 900, 3);
	assert_int_equal(ns_getattr(&f->ns, ns_any(file), &in), 0);
	assert_int_equal(in.nlink, 1);
	assert_int_equal(ns_unlink(&f->ns, ns_any(q), "g"), 0);
	q_usage(f, q, 0, 2);
}

/* Fifos and sockets are names with attributes; devices are refused. */
static void test_mknod(void **state)
{
	struct fx *f = *state;
	struct meta_inode in;

	assert_int_equal(ns_mknod(&f->ns, ns_any(NS_ROOT_INO), "p", S_IFIFO | 0640, 7, 8, &in), 0);
	assert_true(S_ISFIFO(in.mode));
	assert_int_equal(in.mode & 07777, 0640);
	assert_int_equal(in.uid, 7);
	assert_int_equal(in.nlink, 1);
	assert_int_equal(ns_mknod(&f->ns, ns_any(NS_ROOT_INO), "s", S_IFSOCK | 0755, 0, 0, &in), 0);
	assert_true(S_ISSOCK(in.mode));
	assert_int_equal(ns_mknod(&f->ns, ns_any(NS_ROOT_INO), "c", S_IFCHR | 0644, 0, 0, NULL),
			 -EPERM);
	assert_int_equal(ns_mknod(&f->ns, ns_any(NS_ROOT_INO), "b", S_IFBLK | 0644, 0, 0, NULL),
			 -EPERM);
	assert_int_equal(ns_mknod(&f->ns, ns_any(NS_ROOT_INO), "r", S_IFREG | 0644, 0, 0, NULL),
			 -EINVAL);
	assert_int_equal(ns_mknod(&f->ns, ns_any(NS_ROOT_INO), "p", S_IFIFO | 0644, 0, 0, NULL),
			 -EEXIST);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "p", &in), 0);
	assert_true(S_ISFIFO(in.mode));
	assert_int_equal(ns_link(&f->ns, ns_any(in.ino), ns_any(NS_ROOT_INO), "p2", NULL), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(NS_ROOT_INO), "p"), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(NS_ROOT_INO), "p2"), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(NS_ROOT_INO), "s"), 0);
}

static void test_quota_bytes_exact(void **state)
{
	struct fx *f = *state;
	struct meta_inode at, in;
	struct meta_quota q;
	struct ns_statfs st;
	uint64_t d = q_dir(f, NS_ROOT_INO, "d"), a, b;

	assert_int_equal(ns_quota_get(&f->ns, ns_any(d), &q), -ENODATA);
	assert_int_equal(ns_quota_set(&f->ns, ns_any(d), 1000, 0, &q), 0);
	assert_int_equal(q.max_bytes, 1000);
	q_usage(f, d, 0, 0);
	a = q_file(f, d, "a", 600);
	b = q_file(f, d, "b", 0);
	/* One byte over fails and changes nothing; the exact rest fits. */
	assert_int_equal(ns_set_size(&f->ns, ns_any(b), 401, 0, NULL), -EDQUOT);
	assert_int_equal(ns_getattr(&f->ns, ns_any(b), &in), 0);
	assert_int_equal(in.size, 0);
	q_usage(f, d, 600, 2);
	assert_int_equal(ns_statfs(&f->ns, &st), 0);
	assert_int_equal(st.bytes, 600);
	assert_int_equal(ns_set_size(&f->ns, ns_any(b), 400, 0, NULL), 0);
	q_usage(f, d, 1000, 2);
	/* Growth by truncate and setattr is charged too; shrinking frees. */
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), 601, NULL), -EDQUOT);
	memset(&at, 0, sizeof(at));
	at.size = 700;
	assert_int_equal(ns_setattr(&f->ns, ns_any(a), NS_ATTR_SIZE, &at, NULL, NULL), -EDQUOT);
	assert_int_equal(ns_truncate(&f->ns, ns_any(a), 100, NULL), 0);
	q_usage(f, d, 500, 2);
	assert_int_equal(ns_open(&f->ns, ns_any(b), O_WRONLY | O_TRUNC, NULL, NULL), 0);
	q_usage(f, d, 100, 2);
	assert_int_equal(ns_unlink(&f->ns, ns_any(d), "a"), 0);
	q_usage(f, d, 0, 1);
	/* Files outside are not charged. */
	q_file(f, NS_ROOT_INO, "out", 5000);
	q_usage(f, d, 0, 1);
	/* Removing the quota (both limits 0). */
	assert_int_equal(ns_quota_set(&f->ns, ns_any(d), 0, 0, NULL), 0);
	assert_int_equal(ns_quota_get(&f->ns, ns_any(d), &q), -ENODATA);
	assert_int_equal(ns_set_size(&f->ns, ns_any(b), 5000, 0, NULL), 0);
	assert_int_equal(ns_quota_set(&f->ns, ns_any(b), 1, 0, NULL), -ENOTDIR);
}

static void test_quota_inodes_nested(void **state)
{
	struct fx *f = *state;
	uint64_t d = q_dir(f, NS_ROOT_INO, "d"), e, sub;
	struct meta_quota q;
	struct meta_inode in;

	assert_int_equal(ns_quota_set(&f->ns, ns_any(d), 0, 3, NULL), 0);
	e = q_dir(f, d, "e");
	assert_int_equal(ns_quota_set(&f->ns, ns_any(e), 100, 0, NULL), 0);
	q_file(f, e, "x", 100);
	assert_int_equal(ns_symlink(&f->ns, ns_any(d), "l", "x", 0, 0, NULL), 0);
	/* d holds e, e/x, l: the 3rd inode fitted, a 4th does not, whatever
	 * its kind. */
	q_usage(f, d, 100, 3);
	q_usage(f, e, 100, 1);
	assert_int_equal(ns_create(&f->ns, ns_any(d), "y", 0644, 0, 0, true, NULL), -EDQUOT);
	assert_int_equal(ns_mkdir(&f->ns, ns_any(e), "y", 0755, 0, 0, NULL), -EDQUOT);
	assert_int_equal(ns_symlink(&f->ns, ns_any(e), "y", "x", 0, 0, NULL), -EDQUOT);
	assert_int_equal(ns_lookup(&f->ns, ns_any(e), "y", &in), -ENOENT);
	/* The inner byte limit applies under the outer inode one. */
	assert_int_equal(ns_create(&f->ns, ns_any(e), "x", 0644, 0, 0, false, &in), 0);
	assert_int_equal(ns_set_size(&f->ns, ns_any(in.ino), 101, 0, NULL), -EDQUOT);
	/* Raising the outer limit keeps the usage. */
	assert_int_equal(ns_quota_set(&f->ns, ns_any(d), 0, 10, &q), 0);
	assert_int_equal(q.inodes, 3);
	sub = q_dir(f, e, "sub");
	q_usage(f, d, 100, 4);
	q_usage(f, e, 100, 2);
	/* rmdir of a quota root drops its quota; its parent's usage falls. */
	assert_int_equal(ns_rmdir(&f->ns, ns_any(e), "sub"), 0);
	assert_int_equal(ns_unlink(&f->ns, ns_any(e), "x"), 0);
	assert_int_equal(ns_rmdir(&f->ns, ns_any(d), "e"), 0);
	q_usage(f, d, 0, 1);
	assert_int_equal(ns_quota_list(&f->ns, 0, &q, 1), 1);
	assert_int_equal(q.ino, d);
	(void)sub;
}

static void test_quota_set_counts_tree(void **state)
{
	struct fx *f = *state;
	uint64_t d = q_dir(f, NS_ROOT_INO, "d"), e = q_dir(f, d, "e");
	struct meta_quota q[4];
	char name[32], path[64];

	/* More entries than a page of the walk. */
	for (int i = 0; i < 300; i++) {
		snprintf(name, sizeof(name), "f%03d", i);
		q_file(f, i % 2 ? e : d, name, (uint64_t)i);
	}
	assert_int_equal(ns_symlink(&f->ns, ns_any(e), "l", "f001", 0, 0, NULL), 0);
	assert_int_equal(ns_quota_set(&f->ns, ns_any(d), 1u << 20, 1000, q), 0);
	assert_int_equal(q[0].bytes, 299 * 300 / 2);
	assert_int_equal(q[0].inodes, 302);
	assert_int_equal(ns_quota_set(&f->ns, ns_any(e), 0, 151, q), 0);
	assert_int_equal(q[0].inodes, 151);
	assert_int_equal(ns_quota_list(&f->ns, 0, q, 4), 2);
	assert_int_equal(q[0].ino, d);
	assert_int_equal(q[1].ino, e);
	assert_int_equal(ns_quota_list(&f->ns, d, q, 4), 1);
	assert_int_equal(ns_path(&f->ns, ns_any(e), path, sizeof(path)), 4);
	assert_string_equal(path, "/d/e");
	assert_int_equal(ns_path(&f->ns, ns_any(NS_ROOT_INO), path, sizeof(path)), 1);
	assert_string_equal(path, "/");
	assert_int_equal(ns_path(&f->ns, ns_any(e), path, 4), -ENAMETOOLONG);
}

static void test_quota_rename(void **state)
{
	struct fx *f = *state;
	uint64_t a = q_dir(f, NS_ROOT_INO, "a"), b = q_dir(f, NS_ROOT_INO, "b");
	uint64_t a1 = q_dir(f, a, "a1"), t;
	struct meta_quota q;

	q_file(f, a1, "x", 300);
	q_file(f, a, "y", 200);
	q_file(f, NS_ROOT_INO, "big", 600);
	assert_int_equal(ns_quota_set(&f->ns, ns_any(a), 1000, 0, NULL), 0);
	assert_int_equal(ns_quota_set(&f->ns, ns_any(b), 500, 4, NULL), 0);
	q_usage(f, a, 500, 3);
	/* Into a full quota: refused, nothing moves. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "big", ns_any(b), "big", 0),
			 -EDQUOT);
	q_usage(f, b, 0, 0);
	assert_int_equal(ns_lookup(&f->ns, ns_any(NS_ROOT_INO), "big", NULL), 0);
	/* A directory moves its whole tree: a1 (1 + x) from a to b. */
	assert_int_equal(ns_rename(&f->ns, ns_any(a), "a1", ns_any(b), "a1", 0), 0);
	q_usage(f, a, 200, 1);
	q_usage(f, b, 300, 2);
	/* Within one root nothing changes, even when it is full. */
	assert_int_equal(ns_quota_set(&f->ns, ns_any(b), 300, 2, NULL), 0);
	t = q_dir(f, NS_ROOT_INO, "t");
	(void)t;
	assert_int_equal(ns_rename(&f->ns, ns_any(b), "a1", ns_any(b), "a2", 0), 0);
	assert_int_equal(ns_rename(&f->ns, ns_any(a1), "x", ns_any(b), "x", 0), 0);
	q_usage(f, b, 300, 2);
	/* Replacing a file frees its usage first: one of the same size fits. */
	q_file(f, NS_ROOT_INO, "x2", 300);
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "x2", ns_any(b), "x", 0), 0);
	q_usage(f, b, 300, 2);
	/* An exchange charges both ways: y (200) for x (300) fits a's 1000. */
	assert_int_equal(ns_rename(&f->ns, ns_any(a), "y", ns_any(b), "x",
				   NS_RENAME_EXCHANGE), 0);
	q_usage(f, a, 300, 1);
	q_usage(f, b, 200, 2);
	/* Moving a quota root keeps its own quota and charges its tree. */
	assert_int_equal(ns_rename(&f->ns, ns_any(NS_ROOT_INO), "b", ns_any(a), "b", 0), 0);
	q_usage(f, a, 500, 4);
	q_usage(f, b, 200, 2);
	assert_int_equal(ns_quota_get(&f->ns, ns_any(b), &q), 0);
	assert_int_equal(q.max_bytes, 300);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_root_and_table_len, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_orphan_chunks, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_create_lookup_open, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_no_chain_table, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_mkdir_rmdir_unlink, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_symlink_resolve, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_errors_leave_namespace_unchanged, fx_setup,
						fx_teardown),
		cmocka_unit_test_setup_teardown(test_rename, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_readdir_paging, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_concurrent_creates, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_truncate_unlink_gc, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_layout, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_full_chains, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_tight_disk, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_setattr_statfs, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_reopen, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_group, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_generations, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_readdirplus, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_schema_v1_migration, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_link, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_link_rename_over, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_link_quota, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_mknod, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_quota_bytes_exact, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_quota_inodes_nested, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_quota_set_counts_tree, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(test_quota_rename, fx_setup, fx_teardown),
	};

	fx_backend_from_env();

	return cmocka_run_group_tests(tests, NULL, NULL);
}
