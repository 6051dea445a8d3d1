/* What the two PostgreSQL stores share (pg_conn.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

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
