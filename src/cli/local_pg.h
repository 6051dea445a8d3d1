/*
 * A throwaway PostgreSQL server for 'strata local up --meta-store
 * postgresql' (local_pg.c): the namespace database of a local cluster's
 * meta servers. The same recipe as tests/pg_tmp.sh, in C: initdb and
 * pg_ctl run as the 'postgres' user when strata runs as root (the server
 * refuses root), in a private directory, listening on a unix socket only.
 */
#ifndef STRATA_CLI_LOCAL_PG_H
#define STRATA_CLI_LOCAL_PG_H

#include <limits.h>
#include <stddef.h>

/* What local_pg_start made; every path absolute. */
struct local_pg {
	/* The server's directory (data/, its socket, server.log): a fresh
	 * /tmp/strata-pg.XXXXXX, since the server's user must reach it and a
	 * socket path has at most 107 bytes. */
	char dir[64];
	char uri[160];			/* meta.store: database 'strata' on it */
	char passfile[PATH_MAX];	/* meta.store_passfile: CLUSTER_DIR/pgpass, 0600 */
};

/*
 * Makes and starts a server for the cluster in cluster_dir and creates
 * its database 'strata'. Only the socket accepts connections, and only
 * with the password, which a new random one written to cluster_dir/pgpass
 * (mode 0600) holds. Every wait is bounded (30 s). Fills *pg. Returns 0,
 * or 1 with the reason reported (cli_err) and nothing left running or on
 * disk but the server's logs, kept in pg->dir when it got that far.
 * PostgreSQL's programs are looked for in $STRATA_PGBIN (default
 * /usr/lib/postgresql/15/bin).
 */
int local_pg_start(const char *cluster_dir, struct local_pg *pg);

/*
 * Stops the server of directory dir (pg_ctl stop -m fast, bounded) and
 * removes dir. Returns 0, or 1 with the reason reported (dir then kept,
 * for its server.log).
 */
int local_pg_stop(const char *dir);

#endif
