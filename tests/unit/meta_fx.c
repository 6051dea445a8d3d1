/*
 * The fixture of the namespace and store unit tests (test_meta_ns.c,
 * test_meta_store.c): a fresh store per test on the backend the
 * environment names (meta_fx.h), and helpers that build and dump trees.
 */
#include <errno.h>
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
#include <libpq-fe.h>

#include "meta_fx.h"

/* PostgreSQL: the server's socket directory and port (NULL: SQLite). */
const char *pg_host;
const char *pg_port = "5432";
static unsigned pg_serial;

static void pg_quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

/* Runs sql on database db of the test server (maintenance statements). */
void pg_admin(const char *db, const char *sql)
{
	char ci[256];
	PGconn *c;
	PGresult *r;

	snprintf(ci, sizeof(ci), "host=%s port=%s user=postgres dbname=%s", pg_host, pg_port,
		 db);
	c = PQconnectdb(ci);
	assert_int_equal(PQstatus(c), CONNECTION_OK);
	PQsetNoticeProcessor(c, pg_quiet, NULL);
	r = PQexec(c, sql);
	if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
		fail_msg("'%s': %s", sql, PQresultErrorMessage(r));
	PQclear(r);
	PQfinish(c);
}

/* A new empty store named name for fixture f: its address into out. */
void store_new(struct fx *f, const char *name, char *out, size_t len)
{
	char sql[128];

	if (!pg_host) {
		snprintf(out, len, "%s/%s.db", f->dir, name);
		return;
	}
	snprintf(sql, sizeof(sql), "CREATE DATABASE %s_%s", f->pgname, name);
	pg_admin("postgres", sql);
	snprintf(out, len, "host=%s port=%s user=postgres dbname=%s_%s", pg_host, pg_port,
		 f->pgname, name);
}

int store_open(const char *db, struct meta_store *st)
{
	return pg_host ? meta_store_pg_open(db, NULL, st) : meta_store_sqlite_open(db, NULL, st);
}

int fx_open(struct fx *f)
{
	int err = store_open(f->db, &f->st);

	if (!err)
		err = ns_init(&f->ns, &f->st, 0);
	return err;
}

int fx_setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/test_meta_ns.XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->pgname, sizeof(f->pgname), "t%u_%d", pg_serial++, (int)getpid());
	store_new(f, "meta", f->db, sizeof(f->db));
	assert_int_equal(store_open(f->db, &f->st), 0);
	assert_int_equal(ns_init(&f->ns, &f->st, TABLE_LEN), 0);
	*state = f;
	return 0;
}

/* Removes what store_new made (the files of SQLite's WAL mode too). */
void store_drop(struct fx *f, const char *name)
{
	char path[192];

	if (pg_host) {
		snprintf(path, sizeof(path), "DROP DATABASE IF EXISTS %s_%s WITH (FORCE)",
			 f->pgname, name);
		pg_admin("postgres", path);
		return;
	}
	for (const char *const *s = (const char *const[]){ "", "-wal", "-shm", NULL }; *s; s++) {
		snprintf(path, sizeof(path), "%s/%s.db%s", f->dir, name, *s);
		unlink(path);
	}
}

int fx_teardown(void **state)
{
	struct fx *f = *state;

	ns_release(&f->ns);
	meta_store_close(&f->st);
	for (const char *const *s = (const char *const[]){ "meta", "empty", "src", "copy", NULL };
	     *s; s++)
		store_drop(f, *s);
	rmdir(f->dir);
	free(f);
	return 0;
}

/* ---- helpers ---- */

struct dump {
	char *buf;
	size_t len, cap;
};

static void dump_add(struct dump *d, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void dump_add(struct dump *d, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(d->buf + d->len, d->cap - d->len, fmt, ap);
		va_end(ap);
		assert_true(n >= 0);
		if ((size_t)n < d->cap - d->len)
			break;
		d->cap = d->cap * 2 + n + 64;
		d->buf = realloc(d->buf, d->cap);
		assert_non_null(d->buf);
	}
	d->len += (size_t)n;
}

int collect_cb(void *arg, const char *name, uint64_t ino, uint32_t type)
{
	struct name_list *l = arg;

	(void)type;
	if (l->n == l->cap) {
		l->cap = l->cap * 2 + 16;
		l->names = realloc(l->names, l->cap * sizeof(*l->names));
		l->inos = realloc(l->inos, l->cap * sizeof(*l->inos));
		assert_non_null(l->names);
		assert_non_null(l->inos);
	}
	snprintf(l->names[l->n], sizeof(l->names[0]), "%s", name);
	l->inos[l->n++] = ino;
	return 0;
}

void list_free(struct name_list *l)
{
	free(l->names);
	free(l->inos);
	memset(l, 0, sizeof(*l));
}

/* Reads all of directory dir with pages of `page` entries. */
void list_all(struct ns *ns, uint64_t dir, uint32_t page, struct name_list *l)
{
	char cookie[NS_NAME_MAX + 1] = "";
	int n;

	do {
		size_t before = l->n;

		n = ns_readdir(ns, ns_any(dir), cookie, page, collect_cb, l);
		assert_true(n >= 0);
		assert_int_equal(l->n - before, (size_t)n);
		if (n)
			snprintf(cookie, sizeof(cookie), "%s", l->names[l->n - 1]);
	} while ((uint32_t)n == page);
}

static void dump_tree(struct ns *ns, uint64_t dir, const char *path, struct dump *d)
{
	struct name_list l = { 0 };

	list_all(ns, dir, 3, &l);
	for (size_t i = 0; i < l.n; i++) {
		struct meta_inode in;
		char sub[1024];

		assert_int_equal(ns_lookup(ns, ns_any(dir), l.names[i], &in), 0);
		assert_int_equal(in.ino, l.inos[i]);
		dump_add(d, "%s/%s ino=%llu gen=%llu mode=%o nlink=%u size=%llu uid=%u gid=%u"
			 " parent=%llu layout=%u/%u/%u/%llx mtime=%lld\n", path, l.names[i],
			 (unsigned long long)in.ino, (unsigned long long)in.gen, in.mode, in.nlink,
			 (unsigned long long)in.size, in.uid, in.gid,
			 (unsigned long long)in.parent, in.layout.chunk_size, in.layout.stripe,
			 in.layout.table_len, (unsigned long long)in.layout.seed,
			 (long long)in.mtime_ns);
		if (S_ISDIR(in.mode)) {
			snprintf(sub, sizeof(sub), "%s/%s", path, l.names[i]);
			dump_tree(ns, in.ino, sub, d);
		} else if (S_ISLNK(in.mode)) {
			char t[NS_PATH_MAX];

			assert_true(ns_readlink(ns, ns_any(in.ino), t, sizeof(t)) >= 0);
			dump_add(d, "  -> %s\n", t);
		}
	}
	list_free(&l);
}

/* The whole namespace as text: tree, attributes, totals, GC queue. */
char *dump_ns(struct ns *ns)
{
	struct dump d = { 0 };
	struct meta_inode root;
	struct ns_statfs sf;
	struct meta_gc_item gc[64];
	int n;

	d.cap = 4096;
	d.buf = malloc(d.cap);
	assert_non_null(d.buf);
	d.buf[0] = '\0';
	assert_int_equal(ns_getattr(ns, ns_any(NS_ROOT_INO), &root), 0);
	dump_add(&d, "root nlink=%u mtime=%lld\n", root.nlink, (long long)root.mtime_ns);
	dump_tree(ns, NS_ROOT_INO, "", &d);
	assert_int_equal(ns_statfs(ns, &sf), 0);
	dump_add(&d, "statfs inodes=%llu bytes=%llu\n", (unsigned long long)sf.inodes,
		 (unsigned long long)sf.bytes);
	n = ns_gc_next(ns, 0, gc, 64);
	assert_true(n >= 0);
	for (int i = 0; i < n; i++)
		dump_add(&d, "gc %llu [%llu,%llu)\n", (unsigned long long)gc[i].ino,
			 (unsigned long long)gc[i].from, (unsigned long long)gc[i].to);
	return d.buf;
}

uint64_t mkfile(struct ns *ns, uint64_t dir, const char *name, uint64_t size)
{
	struct meta_inode in;

	assert_int_equal(ns_create(ns, ns_any(dir), name, 0644, 1000, 1000, true, &in), 1);
	if (size)
		assert_int_equal(ns_set_size(ns, ns_any(in.ino), size, 0, NULL), 0);
	return in.ino;
}

uint64_t mkdir_(struct ns *ns, uint64_t dir, const char *name)
{
	struct meta_inode in;

	assert_int_equal(ns_mkdir(ns, ns_any(dir), name, 0755, 1000, 1000, &in), 0);
	return in.ino;
}

int gc_all(struct ns *ns, uint64_t ino, struct meta_gc_item *out, uint32_t n)
{
	int got = ns_gc_next(ns, ino, out, n);

	assert_true(got >= 0);
	return got;
}

void gc_drain(struct ns *ns)
{
	struct meta_gc_item it[32];
	int n;

	while ((n = gc_all(ns, 0, it, 32)) > 0)
		for (int i = 0; i < n; i++)
			assert_int_equal(ns_gc_done(ns, &it[i]), 0);
}

void fx_backend_from_env(void)
{
	pg_host = getenv("STRATA_TEST_PG_HOST");
	if (pg_host && !*pg_host)
		pg_host = NULL;
	if (getenv("STRATA_TEST_PG_PORT"))
		pg_port = getenv("STRATA_TEST_PG_PORT");
}
