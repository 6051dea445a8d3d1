/*
 * strata meta migrate: moves a namespace from its SQLite database to an
 * empty PostgreSQL database (docs/namespace.md, "The PostgreSQL store").
 * strata mgmt migrate: the same for mgmt's cluster state (mgmt.db), for a
 * cluster moving to three control nodes (docs/operations.md). Offline:
 * stop the daemon that serves the SQLite database first. The copies are
 * meta_store_copy() and mgmt_store_copy(), on the store interfaces, so
 * this file holds no SQL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common/pg_conn.h"
#include "common/log.h"
#include "meta/meta_store.h"
#include "mgmt/mgmt_store.h"
#include "strata/errors.h"

static void meta_usage(FILE *f)
{
	fprintf(f, "usage: strata meta migrate --from DATA_DIR/meta.db --to postgresql://...\n"
		   "                            [--passfile FILE]\n"
		   "  copies a SQLite namespace (stop its daemon first) into an empty\n"
		   "  PostgreSQL database, then compares the counts of both; FILE is a\n"
		   "  libpq password file of mode 0600\n"
		   "       strata mgmt migrate --from DATA_DIR/mgmt.db --to postgresql://...\n"
		   "                            [--passfile FILE]\n"
		   "  the same for mgmt's cluster state: the map, incarnations, removed\n"
		   "  nodes and the token registry (stop the mgmt daemon first)\n");
}

/* --from, --to (a PostgreSQL URI) and --passfile of 'migrate'; what: the
 * command's name. 0, or 1 / 2 (reported). */
static int migrate_args(int argc, char **argv, const char *what, const char **from,
			const char **to, const char **passfile)
{
	struct stat st;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--from") && v)
			*from = v, i++;
		else if (!strcmp(argv[i], "--to") && v)
			*to = v, i++;
		else if (!strcmp(argv[i], "--passfile") && v)
			*passfile = v, i++;
		else {
			cli_err("%s migrate: unexpected argument '%s'", what, argv[i]);
			meta_usage(stderr);
			return 2;
		}
	}
	if (!*from || !*to) {
		meta_usage(stderr);
		return 2;
	}
	if (!pg_conn_is_uri(*to)) {
		cli_err("%s migrate: --to must be a postgresql:// or postgres:// URI", what);
		return 2;
	}
	/* Opening a missing SQLite file would create an empty database. */
	if (stat(*from, &st) < 0 || !S_ISREG(st.st_mode)) {
		cli_err("%s migrate: '%s' is not %s database (DATA_DIR/%s.db): %s", what, *from,
			strcmp(what, "meta") ? "mgmt's" : "a namespace", what,
			stat(*from, &st) < 0 ? strerror(errno) : "not a file");
		return 1;
	}
	return 0;
}

/* strata mgmt migrate. */
static int mgmt_migrate(int argc, char **argv)
{
	const char *from = NULL, *to = NULL, *passfile = NULL;
	struct mgmt_store *src = NULL, *dst = NULL;
	struct mgmt_copy_stats cs;
	int rc, ret = 1;

	if ((rc = migrate_args(argc, argv, "mgmt", &from, &to, &passfile)))
		return rc;
	log_set_level(LOG_ERROR);
	rc = mgmt_store_open(from, &src);
	if (rc) {
		cli_err("mgmt migrate: cannot open '%s': %s", from, strata_strerror(rc));
		goto out;
	}
	rc = mgmt_store_open_pg(to, passfile, &dst);
	if (rc) {
		cli_err("mgmt migrate: cannot open the PostgreSQL database: %s",
			strata_strerror(rc));
		goto out;
	}
	rc = mgmt_store_copy(src, dst, &cs);
	if (rc == -ENOTEMPTY) {
		cli_err("mgmt migrate: the PostgreSQL database already holds cluster state;"
			" give an empty one");
		goto out;
	}
	if (rc) {
		cli_err("mgmt migrate: the copy failed: %s; give an empty database and run it"
			" again", strata_strerror(rc));
		goto out;
	}
	printf("migrated the cluster map version %llu (%u nodes, %u targets, %u chains), %u"
	       " incarnations, %u removed nodes, %u tokens\n", (unsigned long long)cs.version,
	       cs.nodes, cs.targets, cs.chains, cs.incarnations, cs.removed, cs.tokens);
	ret = 0;
out:
	mgmt_store_close(src);
	mgmt_store_close(dst);
	return ret;
}

static int migrate(int argc, char **argv)
{
	const char *from = NULL, *to = NULL, *passfile = NULL;
	struct meta_store src = { 0 }, dst = { 0 };
	struct meta_store_pg_opts po;
	struct meta_copy_stats cs;
	int rc, ret = 1;

	if ((rc = migrate_args(argc, argv, "meta", &from, &to, &passfile)))
		return rc;
	/* The stores say why they fail in the log: let it through. */
	log_set_level(LOG_ERROR);
	rc = meta_store_sqlite_open(from, NULL, &src);
	if (rc) {
		cli_err("meta migrate: cannot open '%s': %s", from, strata_strerror(rc));
		goto out;
	}
	meta_store_pg_opts_init(&po, sizeof(po));
	po.passfile = passfile;
	rc = meta_store_pg_open(to, &po, &dst);
	if (rc) {
		cli_err("meta migrate: cannot open the PostgreSQL database: %s",
			strata_strerror(rc));
		goto out;
	}
	rc = meta_store_copy(&src, &dst, &cs);
	if (rc == -ENOTEMPTY) {
		cli_err("meta migrate: the PostgreSQL database already holds a namespace;"
			" give an empty one");
		goto out;
	}
	if (rc) {
		cli_err("meta migrate: the copy failed: %s; the target is unchanged",
			strata_strerror(rc));
		goto out;
	}
	printf("migrated %llu inodes, %llu entries, %llu symlinks, %llu inline files, %llu quotas,"
	       " %llu counters, %llu queued deletions; next inode %llu, generation %llu;"
	       " counts verified\n",
	       (unsigned long long)cs.inodes, (unsigned long long)cs.dentries,
	       (unsigned long long)cs.links, (unsigned long long)cs.inlines,
	       (unsigned long long)cs.quotas,
	       (unsigned long long)cs.counters, (unsigned long long)cs.gc_items,
	       (unsigned long long)cs.next_ino + 1, (unsigned long long)cs.next_gen + 1);
	ret = 0;
out:
	meta_store_close(&src);
	meta_store_close(&dst);
	return ret;
}

int cmd_meta(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "migrate"))
		return strcmp(argv[0], "mgmt") ? migrate(argc - 1, argv + 1) :
		       mgmt_migrate(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		meta_usage(stdout);
		return 0;
	}
	meta_usage(stderr);
	return 2;
}
