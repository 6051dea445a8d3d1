/*
 * strata meta migrate: moves a namespace from its SQLite database to an
 * empty PostgreSQL database (docs/namespace.md, "The PostgreSQL store").
 * Offline: stop the daemon that serves the SQLite database first. The copy
 * is meta_store_copy(), on the store interface, so it holds no SQL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "common/log.h"
#include "meta/meta_store.h"
#include "strata/errors.h"

static void meta_usage(FILE *f)
{
	fprintf(f, "usage: strata meta migrate --from DATA_DIR/meta.db --to postgresql://...\n"
		   "                            [--passfile FILE]\n"
		   "  copies a SQLite namespace (stop its daemon first) into an empty\n"
		   "  PostgreSQL database, then compares the counts of both; FILE is a\n"
		   "  libpq password file of mode 0600\n");
}

static int migrate(int argc, char **argv)
{
	const char *from = NULL, *to = NULL, *passfile = NULL;
	struct meta_store src = { 0 }, dst = { 0 };
	struct meta_store_pg_opts po;
	struct meta_copy_stats cs;
	struct stat st;
	int rc, ret = 1;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (!strcmp(argv[i], "--from") && v)
			from = v, i++;
		else if (!strcmp(argv[i], "--to") && v)
			to = v, i++;
		else if (!strcmp(argv[i], "--passfile") && v)
			passfile = v, i++;
		else {
			cli_err("meta migrate: unexpected argument '%s'", argv[i]);
			meta_usage(stderr);
			return 2;
		}
	}
	if (!from || !to) {
		meta_usage(stderr);
		return 2;
	}
	if (!meta_store_is_pg(to)) {
		cli_err("meta migrate: --to must be a postgresql:// or postgres:// URI");
		return 2;
	}
	/* Opening a missing SQLite file would create an empty namespace. */
	if (stat(from, &st) < 0 || !S_ISREG(st.st_mode)) {
		cli_err("meta migrate: '%s' is not a namespace database (DATA_DIR/meta.db): %s",
			from, stat(from, &st) < 0 ? strerror(errno) : "not a file");
		return 1;
	}
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
	printf("migrated %llu inodes, %llu entries, %llu symlinks, %llu quotas, %llu counters,"
	       " %llu queued deletions; next inode %llu, generation %llu; counts verified\n",
	       (unsigned long long)cs.inodes, (unsigned long long)cs.dentries,
	       (unsigned long long)cs.links, (unsigned long long)cs.quotas,
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
		return migrate(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		meta_usage(stdout);
		return 0;
	}
	meta_usage(stderr);
	return 2;
}
