/*
 * What the two PostgreSQL stores share (meta/store_pg.c, the namespace;
 * mgmt/mgmt_store_pg.c, the cluster state): connecting with the same
 * timeouts and keepalives, libpq's messages fit for one log line, and the
 * checks of a store setting and its password file.
 */
#ifndef STRATA_COMMON_PG_CONN_H
#define STRATA_COMMON_PG_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <libpq-fe.h>

/* How pg_conn_open connects. */
struct pg_conn_opts {
	const char *app;		/* application_name, e.g. "stratad-meta" */
	const char *comp;		/* the log component of a failure */
	const char *key;		/* the setting naming the database, for the log */
	const char *passfile;		/* NULL: libpq's default */
	const char *options;		/* libpq's "options" ("-c ..."); NULL: none */
	uint32_t connect_timeout_s;
};

/*
 * Connects to conninfo (a libpq URI or key=value pairs) with o's settings,
 * TCP keepalives (a dead server is noticed within about 20 s) and server
 * notices sent to the debug log. where (wherelen bytes) receives
 * "database 'DB' on HOST:PORT" for logs (never a password). Returns the
 * connection, which the caller PQfinish()es also when its status is not
 * CONNECTION_OK (that failure is logged here, naming o->key), or NULL (out
 * of memory).
 */
PGconn *pg_conn_open(const char *conninfo, const struct pg_conn_opts *o, char *where,
		     size_t wherelen);

/* Whether a store setting (meta.store, mgmt.store) names PostgreSQL: it
 * starts with "postgresql://" or "postgres://". */
bool pg_conn_is_uri(const char *spec);

/* A password file libpq may use: it exists, is a regular file, and has no
 * permission for group or others (libpq would only warn and go on without
 * it). 0, or a negative errno with err filled (naming the path). */
int pg_conn_check_passfile(const char *path, char *err, size_t errlen);

/* libpq's message msg (which spans lines) on one line, into buf (cap
 * bytes); returns buf. */
const char *pg_conn_one_line(const char *msg, char *buf, size_t cap);

#endif
