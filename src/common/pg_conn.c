/* What the two PostgreSQL stores share (pg_conn.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/pg_conn.h"

const char *pg_conn_one_line(const char *msg, char *buf, size_t cap)
{
	size_t n = 0;

	for (; *msg && n + 1 < cap; msg++)
		if (*msg != '\n' || (msg[1] && n && buf[n - 1] != ' '))
			buf[n++] = *msg == '\n' || *msg == '\t' ? ' ' : *msg;
	buf[n] = '\0';
	return buf;
}

static void notice_quiet(void *arg, const char *msg)
{
	(void)arg;
	log_debug("pg", "server notice: %s", msg);
}

PGconn *pg_conn_open(const char *conninfo, const struct pg_conn_opts *o, char *where,
		     size_t wherelen)
{
	char timeout[16], msg[256];
	const char *keys[12], *vals[12];
	PGconn *c;
	int n = 0;

	snprintf(timeout, sizeof(timeout), "%u", o->connect_timeout_s);
	/* Ours first: what the URI says wins, but for the passfile. */
	keys[n] = "connect_timeout", vals[n++] = timeout;
	keys[n] = "application_name", vals[n++] = o->app;
	keys[n] = "keepalives", vals[n++] = "1";
	keys[n] = "keepalives_idle", vals[n++] = "10";
	keys[n] = "keepalives_interval", vals[n++] = "3";
	keys[n] = "keepalives_count", vals[n++] = "3";
	if (o->options)
		keys[n] = "options", vals[n++] = o->options;
	keys[n] = "dbname", vals[n++] = conninfo;
	if (o->passfile)
		keys[n] = "passfile", vals[n++] = o->passfile;
	keys[n] = NULL, vals[n] = NULL;
	c = PQconnectdbParams(keys, vals, 1);
	if (!c)
		return NULL;
	snprintf(where, wherelen, "database '%s' on %s:%s", PQdb(c),
		 PQhost(c) ? PQhost(c) : "?", PQport(c) ? PQport(c) : "?");
	PQsetNoticeProcessor(c, notice_quiet, NULL);
	if (PQstatus(c) != CONNECTION_OK)
		log_error(o->comp, "cannot connect to PostgreSQL %s: %s; check %s and that the"
			  " server runs", where, pg_conn_one_line(PQerrorMessage(c), msg, sizeof(msg)),
			  o->key);
	return c;
}

bool pg_conn_is_uri(const char *spec)
{
	return spec && (!strncmp(spec, "postgresql://", 13) || !strncmp(spec, "postgres://", 11));
}

int pg_conn_check_passfile(const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (stat(path, &st) < 0) {
		int e = -errno;

		snprintf(err, errlen, "password file '%s': %s", path, strerror(-e));
		return e;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "password file '%s' is not a regular file", path);
		return -EACCES;
	}
	/* libpq would only warn about a loose one and go on without it. */
	if (st.st_mode & 077) {
		snprintf(err, errlen, "password file '%s' has mode %04o; it must be 0600 or"
			 " stricter (chmod 600 '%s')", path, (unsigned)(st.st_mode & 07777), path);
		return -EACCES;
	}
	return 0;
}

int pg_conn_check_store_keys(const char *sec, const char *store, const char *passfile,
			     const char *also, const char *store_hint, const char *pass_hint,
			     char *err, size_t errlen)
{
	bool pg = pg_conn_is_uri(store);
	char msg[512];

	if (store[0] && !pg && !(also && !strcmp(store, also))) {
		/* The scheme only: the rest may hold a password. */
		snprintf(err, errlen, "key '%s.store': unknown store '%.*s'; %s", sec,
			 (int)strcspn(store, ":@/ "), store, store_hint);
		return -EINVAL;
	}
	if (passfile[0] && !pg) {
		snprintf(err, errlen, "key '%s.store_passfile' is set but '%s.store' is not a"
			 " postgresql:// URI%s", sec, sec, pass_hint);
		return -EINVAL;
	}
	if (passfile[0] && pg_conn_check_passfile(passfile, msg, sizeof(msg))) {
		snprintf(err, errlen, "key '%s.store_passfile': %s", sec, msg);
		return -EINVAL;
	}
	return 0;
}

/* ---- a store's session ---- */

#define RECONNECT_BACKOFF_MS 500

void pg_param_i64(struct pg_params *a, int64_t v)
{
	if (a->n >= PG_PARAMS_MAX)
		return;
	snprintf(a->num[a->n], sizeof(a->num[a->n]), "%" PRId64, v);
	a->v[a->n] = a->num[a->n];
	a->n++;
}

void pg_param_str(struct pg_params *a, const char *s)
{
	if (a->n < PG_PARAMS_MAX)
		a->v[a->n++] = s;
}

int pg_session_fail(struct pg_session *s, const PGresult *r, const char *what)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	char msg[256];

	if (PQstatus(s->conn) != CONNECTION_OK) {
		if (!s->lost)
			log_error(s->comp, "%s: connection lost during %s: %s; reconnecting at the"
				  " next call", s->where, what,
				  pg_conn_one_line(PQerrorMessage(s->conn), msg, sizeof(msg)));
		s->lost = true;
		return -EIO;
	}
	if (state && !strcmp(state, "23505"))
		return -EEXIST;
	log_error(s->comp, "%s: %s failed: %s", s->where, what,
		  pg_conn_one_line(r ? PQresultErrorMessage(r) : PQerrorMessage(s->conn), msg,
				   sizeof(msg)));
	return -EIO;
}

int pg_session_check(struct pg_session *s, PGresult *r, const char *what, PGresult **out)
{
	ExecStatusType st = PQresultStatus(r);
	int rc = 0;

	if (out)
		*out = NULL;
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		rc = pg_session_fail(s, r, what);
	if (!rc && out)
		*out = r;
	else
		PQclear(r);
	return rc;
}

int pg_session_reconnect(struct pg_session *s, int (*after)(void *arg), void *arg)
{
	char msg[256];

	if (!s->lost && PQstatus(s->conn) == CONNECTION_OK)
		return 0;
	if (mono_ms() < s->retry_at_ms)
		return -EIO;
	PQreset(s->conn);
	if (PQstatus(s->conn) != CONNECTION_OK) {
		s->retry_at_ms = mono_ms() + RECONNECT_BACKOFF_MS;
		log_warn_limited(s->comp, "%s: cannot reconnect: %s", s->where,
				 pg_conn_one_line(PQerrorMessage(s->conn), msg, sizeof(msg)));
		s->lost = true;
		return -EIO;
	}
	s->lost = false;
	if (after && after(arg)) {
		s->lost = true;
		s->retry_at_ms = mono_ms() + RECONNECT_BACKOFF_MS;
		return -EIO;
	}
	log_info(s->comp, "%s: reconnected", s->where);
	return 0;
}

int pg_session_open(struct pg_session *s, const char *comp, const char *conninfo,
		    const char *passfile, struct pg_conn_opts *o)
{
	char msg[512];
	int rc;

	s->comp = comp;
	snprintf(s->where, sizeof(s->where), "PostgreSQL");
	if (passfile && *passfile) {
		rc = pg_conn_check_passfile(passfile, msg, sizeof(msg));
		if (rc) {
			log_error(comp, "%s", msg);
			return rc;
		}
		o->passfile = passfile;
	}
	s->conn = pg_conn_open(conninfo, o, s->where, sizeof(s->where));
	if (!s->conn)
		return -ENOMEM;
	return PQstatus(s->conn) == CONNECTION_OK ? 0 : -EIO;
}

void pg_session_release(struct pg_session *s)
{
	if (s->conn)
		PQfinish(s->conn);
	s->conn = NULL;
}
