/*
 * Which metadata store a meta.store setting names (meta_store.h):
 * the embedded SQLite database by default, PostgreSQL for a
 * postgresql:// URI. Kept apart from both backends so neither knows of
 * the other, and from the service so the CLI can share the rule.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/pg_conn.h"
#include "common/log.h"
#include "meta/meta_store.h"

#define COMP "meta"

int meta_store_open_spec(const char *spec, const char *passfile, const char *data_dir,
			 struct meta_store *out, char *desc, size_t desclen)
{
	struct meta_store_pg_opts po;
	char path[4096];

	out->ops = NULL;
	out->impl = NULL;
	if (!spec || !*spec) {
		if (passfile && *passfile) {
			log_error(COMP, "meta.store_passfile is set but meta.store is not a"
				  " postgresql:// URI; remove it or set meta.store");
			return -EINVAL;
		}
		snprintf(path, sizeof(path), "%s/meta.db", data_dir);
		snprintf(desc, desclen, "%s", path);
		return meta_store_sqlite_open(path, NULL, out);
	}
	if (!pg_conn_is_uri(spec)) {
		/* Print the scheme only: the rest may hold a password. */
		log_error(COMP, "meta.store: unknown store '%.*s'; leave it empty for the"
			  " embedded SQLite database, or give a postgresql:// URI",
			  (int)strcspn(spec, ":@/ "), spec);
		return -EINVAL;
	}
	meta_store_pg_opts_init(&po, sizeof(po));
	po.passfile = passfile && *passfile ? passfile : NULL;
	snprintf(desc, desclen, "PostgreSQL");
	return meta_store_pg_open(spec, &po, out);
}
