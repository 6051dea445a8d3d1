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

/* ---- a store's session: one connection, text parameters ---- */

/* Text parameters of one statement. */
#define PG_PARAMS_MAX 32
struct pg_params {
	int n;
	const char *v[PG_PARAMS_MAX];
	char num[PG_PARAMS_MAX][24];
};
void pg_param_i64(struct pg_params *a, int64_t v);
/* s is borrowed until the statement has run. */
void pg_param_str(struct pg_params *a, const char *s);

/* A store's connection: where it is for the logs, and whether it broke. */
struct pg_session {
	PGconn *conn;
	const char *comp;	/* the log component */
	char where[192];	/* "database 'db' on host:port" (pg_conn_open) */
	bool lost;		/* broken: reconnect at the next call */
	uint64_t retry_at_ms;	/* no reconnect before (mono_ms) */
};

/* The errno of a failed result r (NULL: the connection's error): -EEXIST
 * for a duplicate key (not logged: the caller's to judge), -EIO
 * otherwise (logged naming what); a broken connection is marked lost. */
int pg_session_fail(struct pg_session *s, const PGresult *r, const char *what);
/* Takes r: 0 and *out = r (the caller PQclears it) when it succeeded and
 * out is not NULL; else it is cleared, and the error is pg_session_fail's. */
int pg_session_check(struct pg_session *s, PGresult *r, const char *what, PGresult **out);
/* Sets up s for component comp and connects it to conninfo with o, its
 * passfile (NULL or "": libpq's default) checked first (a regular file,
 * mode 0600; refused with the reason logged). 0, -ENOMEM, -EIO (the
 * connection failed, logged by pg_conn_open) or the check's error. s holds
 * no copy of either string: PQreset reconnects with the connection's own.
 * pg_session_release closes it, whatever this returned. */
int pg_session_open(struct pg_session *s, const char *comp, const char *conninfo,
		    const char *passfile, struct pg_conn_opts *o);
/* Closes s's connection, if any. */
void pg_session_release(struct pg_session *s);
/* When s is lost or its connection broken: PQreset, at most every 500 ms,
 * then after(arg) (NULL: none; e.g. preparing statements again, which the
 * old session took with it). 0, or -EIO (logged, rate-limited). */
int pg_session_reconnect(struct pg_session *s, int (*after)(void *arg), void *arg);

/*
 * The check of a service's keys SEC.store and SEC.store_passfile: store
 * is "" (its default), `also` (another name it takes, e.g. "sqlite"; NULL:
 * none) or a postgresql:// URI; a password file goes only with a URI, and
 * must pass pg_conn_check_passfile. store_hint ends the message of an
 * unknown store ("leave it empty for ..."), pass_hint (may be "") that of
 * a password file without a URI. 0, or -EINVAL with err naming the key
 * (never the URI past its scheme: it may hold a password).
 */
int pg_conn_check_store_keys(const char *sec, const char *store, const char *passfile,
			     const char *also, const char *store_hint, const char *pass_hint,
			     char *err, size_t errlen);

/* libpq's message msg (which spans lines) on one line, into buf (cap
 * bytes); returns buf. */
const char *pg_conn_one_line(const char *msg, char *buf, size_t cap);

#endif
