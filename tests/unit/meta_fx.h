/*
 * The fixture of the namespace and store unit tests: each test gets a
 * fresh store, SQLite (a file in its own temporary directory) or, with
 * $STRATA_TEST_PG_HOST set (tests/pg_tmp.sh run sets it, as meson's *_pg
 * tests do), PostgreSQL (a database of its own on that server), with a
 * namespace of TABLE_LEN chains on it. The helpers assert (cmocka) rather
 * than return errors.
 */
#ifndef STRATA_TESTS_META_FX_H
#define STRATA_TESTS_META_FX_H

#include <stddef.h>
#include <stdint.h>

#include "meta/ns.h"

#define TABLE_LEN 8

struct fx {
	char dir[64];
	char db[256];		/* the store: a file path, or a libpq conninfo */
	char pgname[32];	/* PostgreSQL: the test's database */
	struct meta_store st;
	struct ns ns;
};

struct name_list {
	char (*names)[NS_NAME_MAX + 1];
	uint64_t *inos;
	size_t n, cap;
};

/* PostgreSQL: the server's socket directory and port (NULL: SQLite). */
extern const char *pg_host;
extern const char *pg_port;

/* Reads the backend from the environment; main() calls it first. */
void fx_backend_from_env(void);
/* cmocka setup/teardown: *state becomes a struct fx with f->ns open. */
int fx_setup(void **state);
int fx_teardown(void **state);
/* Opens f->db into f->st and f->ns (its table length kept). */
int fx_open(struct fx *f);
/* A new empty store named name (meta, empty, src, copy: teardown removes
 * those) for f; its address (a path or a conninfo) into out. */
void store_new(struct fx *f, const char *name, char *out, size_t len);
int store_open(const char *db, struct meta_store *st);
void store_drop(struct fx *f, const char *name);
/* Runs sql on database db of the test server. */
void pg_admin(const char *db, const char *sql);

int collect_cb(void *arg, const char *name, uint64_t ino, uint32_t type);
void list_free(struct name_list *l);
/* Reads all of directory dir with pages of `page` entries. */
void list_all(struct ns *ns, uint64_t dir, uint32_t page, struct name_list *l);
/* The whole namespace as text: tree, attributes, totals, GC queue
 * (malloc'd). */
char *dump_ns(struct ns *ns);
/* A file of size bytes / a directory in dir; returns its inode number. */
uint64_t mkfile(struct ns *ns, uint64_t dir, const char *name, uint64_t size);
uint64_t mkdir_(struct ns *ns, uint64_t dir, const char *name);
int gc_all(struct ns *ns, uint64_t ino, struct meta_gc_item *out, uint32_t n);
/* Acknowledges every queued gc item. */
void gc_drain(struct ns *ns);

#endif
