#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests, the one way both the unit tests
# (meson) and the integration tests (tests/integration/pgtmp.py) make one.
#
#   pg_tmp.sh start DIR   initdb in DIR/data (DIR is created) unless a cluster
#                         is there already (a restart), start it listening
#                         only on a unix socket in DIR, print its URI
#                         (postgresql:///postgres?host=DIR&port=...)
#   pg_tmp.sh stop DIR    stop it at once (pg_ctl stop -m immediate)
#   pg_tmp.sh run CMD...  start one in a fresh temporary directory, run CMD
#                         with STRATA_TEST_PG_HOST/_PORT/_URI set, stop it
#                         and remove the directory whatever CMD did; exits
#                         with CMD's status
#
# Exit status 77 (a skipped test for meson) when PostgreSQL's binaries are
# absent ($STRATA_PGBIN, default /usr/lib/postgresql/15/bin), or when run as
# root without a 'postgres' user to run the server as (it refuses root).
# Authentication is 'trust' on the socket: nobody else can reach DIR (0700).
# Every wait is bounded: pg_ctl -t.
set -euo pipefail

PGBIN=${STRATA_PGBIN:-/usr/lib/postgresql/15/bin}
PORT=${STRATA_PG_PORT:-5432}
WAIT_S=${STRATA_PG_WAIT_S:-30}

die() { echo "pg_tmp.sh: $*" >&2; exit 1; }

have_pg() {
	[ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pg_ctl" ] || {
		echo "pg_tmp.sh: no PostgreSQL in '$PGBIN' (Debian: apt-get install postgresql);" \
		     "skipping" >&2
		exit 77
	}
	if [ "$(id -u)" -eq 0 ] && ! id postgres >/dev/null 2>&1; then
		echo "pg_tmp.sh: running as root and no 'postgres' user to run the server as;" \
		     "skipping" >&2
		exit 77
	fi
}

# Runs a PostgreSQL program as the user that owns the cluster.
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

start() {
	local dir=$1
	have_pg
	mkdir -p "$dir"
	if [ ! -e "$dir/data/PG_VERSION" ]; then
		chmod 0700 "$dir"
		if [ "$(id -u)" -eq 0 ]; then chown postgres: "$dir"; fi
		as_owner "$PGBIN/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C \
			--no-sync >"$dir/initdb.log" 2>&1 || die "initdb failed; see '$dir/initdb.log'"
	fi
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t "$WAIT_S" \
		-o "-k $dir -p $PORT -c listen_addresses='' -c fsync=off" start >/dev/null ||
		die "the server did not start within ${WAIT_S}s; see '$dir/server.log'"
	echo "postgresql:///postgres?host=$dir&port=$PORT&user=postgres"
}

stop() {
	local dir=$1
	[ -e "$dir/data/postmaster.pid" ] || return 0
	as_owner "$PGBIN/pg_ctl" -D "$dir/data" -w -t "$WAIT_S" stop -m immediate >/dev/null
}

RUN_DIR=
cleanup() {
	[ -n "$RUN_DIR" ] || return 0
	stop "$RUN_DIR" || true
	rm -rf "$RUN_DIR"
}

run() {
	local rc=0 uri
	have_pg
	RUN_DIR=$(mktemp -d /tmp/strata-pg.XXXXXX)
	trap cleanup EXIT
	# A timeout's SIGTERM (meson's) must stop the server too: exit, so
	# that the EXIT trap runs.
	trap 'exit 143' TERM INT HUP
	uri=$(start "$RUN_DIR")
	STRATA_TEST_PG_HOST=$RUN_DIR STRATA_TEST_PG_PORT=$PORT STRATA_TEST_PG_URI=$uri "$@" ||
		rc=$?
	return $rc
}

case "${1:-}" in
start) [ $# -eq 2 ] || die "usage: pg_tmp.sh start DIR"; start "$2" ;;
stop) [ $# -eq 2 ] || die "usage: pg_tmp.sh stop DIR"; stop "$2" ;;
run) shift; [ $# -ge 1 ] || die "usage: pg_tmp.sh run CMD..."; run "$@" ;;
*) die "usage: pg_tmp.sh start DIR | stop DIR | run CMD..." ;;
esac
