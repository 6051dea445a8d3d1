/* The throwaway PostgreSQL server of a local cluster (local_pg.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "cli.h"
#include "common/clock.h"
#include "local_pg.h"
#include "strata/errors.h"

#define PG_DEFAULT_BIN "/usr/lib/postgresql/15/bin"
#define PG_WAIT_S "30"
#define PG_PORT "5432"		/* the socket's name only: no TCP */
#define PG_DB "strata"
#define PG_USER "postgres"
/* A program that outlives every bounded wait of its own is killed. */
#define RUN_DEADLINE_MS 60000

static const char *pgbin(void)
{
	const char *b = getenv("STRATA_PGBIN");

	return b && b[0] ? b : PG_DEFAULT_BIN;
}

/* The user the server runs as: 'postgres' when we are root, else us
 * (uid -1: no change). 0 or 1 (reported). */
static int server_user(uid_t *uid, gid_t *gid)
{
	const struct passwd *pw;

	*uid = (uid_t)-1;
	*gid = (gid_t)-1;
	if (geteuid() != 0)
		return 0;
	pw = getpwnam(PG_USER);
	if (!pw) {
		cli_err("local: cannot start PostgreSQL: running as root and there is no '%s' user"
			" to run the server as (PostgreSQL refuses root); create it or run as"
			" another user", PG_USER);
		return 1;
	}
	*uid = pw->pw_uid;
	*gid = pw->pw_gid;
	return 0;
}

/*
 * Runs argv (argv[0] a full path) as uid/gid (-1: ourselves), its output
 * appended to log, with PGPASSFILE=passfile when given; waits for it up
 * to RUN_DEADLINE_MS. Returns its exit status, or -1 (could not run it,
 * or killed at the deadline).
 */
static int run_as(const char *const *argv, uid_t uid, gid_t gid, const char *log,
		  const char *passfile)
{
	uint64_t deadline;
	pid_t pid;
	int status;

	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		int fd;

		if (uid != (uid_t)-1 &&
		    (setgroups(0, NULL) || setgid(gid) || setuid(uid))) {
			fprintf(stderr, "cannot become the server's user: %s\n", strerror(errno));
			_exit(126);
		}
		/* Opened as that user: the server's files are its own. */
		fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		if (passfile)
			setenv("PGPASSFILE", passfile, 1);
		execv(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	deadline = mono_ms() + RUN_DEADLINE_MS;
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
		if (w < 0 && errno != EINTR)
			return -1;
		if (mono_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(20 * 1000);
	}
}

/* A program of PostgreSQL's, as a path, into out. */
static void prog(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", pgbin(), name);
}

/* A new random password: 32 hex digits. 0 or a negative errno. */
static int new_password(char out[33])
{
	unsigned char b[16];
	size_t got = 0;

	while (got < sizeof(b)) {
		ssize_t n = getrandom(b + got, sizeof(b) - got, 0);

		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(b); i++)
		snprintf(out + 2 * i, 3, "%02x", b[i]);
	memset(b, 0, sizeof(b));
	return 0;
}

/* Writes text to path, mode 0600, owned by uid/gid (-1: us). */
static int write_private(const char *path, const char *text, uid_t uid, gid_t gid)
{
	int rc;

	unlink(path);
	rc = cli_write_secret(path, text);
	if (!rc && uid != (uid_t)-1 && chown(path, uid, gid) < 0)
		rc = -errno;
	return rc;
}

static int pg_ctl(const char *dir, const char *action, uid_t uid, gid_t gid)
{
	char bin[PATH_MAX], data[128], log[128], out[128], opts[256];
	const char *start[] = { bin, "-D", data, "-l", log, "-w", "-t", PG_WAIT_S, "-o", opts,
				"start", NULL };
	const char *stop[] = { bin, "-D", data, "-w", "-t", PG_WAIT_S, "stop", "-m", "fast",
			       NULL };

	prog(bin, sizeof(bin), "pg_ctl");
	snprintf(data, sizeof(data), "%s/data", dir);
	snprintf(log, sizeof(log), "%s/server.log", dir);
	/* Only the socket: no TCP port to collide with anything. */
	snprintf(opts, sizeof(opts), "-k %s -p " PG_PORT " -c listen_addresses=''", dir);
	snprintf(out, sizeof(out), "%s/pg_ctl.log", dir);
	return run_as(strcmp(action, "start") == 0 ? start : stop, uid, gid, out, NULL);
}

int local_pg_start(const char *cluster_dir, struct local_pg *pg)
{
	char bin[PATH_MAX], data[128], log[128], pwfile[128], pw[33], line[96];
	const char *initdb[] = { bin, "-D", data, "-U", PG_USER, "--pwfile", pwfile,
				 "--auth-local=scram-sha-256", "--auth-host=scram-sha-256",
				 "-E", "UTF8", "--locale=C", NULL };
	const char *createdb[] = { bin, "-h", pg->dir, "-p", PG_PORT, "-U", PG_USER, "-w",
				   PG_DB, NULL };
	bool started = false;
	uid_t uid;
	gid_t gid;
	int rc;

	memset(pg, 0, sizeof(*pg));
	prog(bin, sizeof(bin), "initdb");
	if (access(bin, X_OK) != 0) {
		cli_err("local: cannot start PostgreSQL: no '%s' (Debian: apt-get install"
			" postgresql; or set STRATA_PGBIN to the directory of initdb and pg_ctl)",
			bin);
		return 1;
	}
	if (server_user(&uid, &gid))
		return 1;
	snprintf(pg->dir, sizeof(pg->dir), "/tmp/strata-pg.XXXXXX");
	if (!mkdtemp(pg->dir)) {
		cli_err("local: cannot create a directory for PostgreSQL in '/tmp': %s",
			strerror(errno));
		return 1;
	}
	if (uid != (uid_t)-1 && chown(pg->dir, uid, gid) < 0) {
		cli_err("local: cannot give '%s' to the '%s' user: %s", pg->dir, PG_USER,
			strerror(errno));
		goto fail;
	}
	snprintf(data, sizeof(data), "%s/data", pg->dir);
	snprintf(log, sizeof(log), "%s/initdb.log", pg->dir);
	snprintf(pwfile, sizeof(pwfile), "%s/pwfile", pg->dir);
	snprintf(pg->passfile, sizeof(pg->passfile), "%s/pgpass", cluster_dir);
	rc = new_password(pw);
	if (!rc)
		rc = write_private(pwfile, pw, uid, gid);
	/* libpq's password file: host:port:database:user:password. */
	snprintf(line, sizeof(line), "*:*:*:" PG_USER ":%s", pw);
	if (!rc)
		rc = write_private(pg->passfile, line, (uid_t)-1, (gid_t)-1);
	memset(pw, 0, sizeof(pw));
	memset(line, 0, sizeof(line));
	if (rc) {
		cli_err("local: cannot write the PostgreSQL password file '%s': %s", pg->passfile,
			strata_strerror(rc));
		goto fail;
	}
	rc = run_as(initdb, uid, gid, log, NULL);
	unlink(pwfile);
	if (rc != 0) {
		cli_err("local: initdb failed; see '%s'", log);
		goto fail;
	}
	if (pg_ctl(pg->dir, "start", uid, gid) != 0) {
		cli_err("local: PostgreSQL did not start within " PG_WAIT_S " s; see '%s/server.log'",
			pg->dir);
		goto fail;
	}
	started = true;
	prog(bin, sizeof(bin), "createdb");
	snprintf(log, sizeof(log), "%s/createdb.log", pg->dir);
	if (run_as(createdb, (uid_t)-1, (gid_t)-1, log, pg->passfile) != 0) {
		cli_err("local: cannot create the database '" PG_DB "'; see '%s'", log);
		goto fail;
	}
	snprintf(pg->uri, sizeof(pg->uri), "postgresql:///" PG_DB "?host=%s&port=" PG_PORT
		 "&user=" PG_USER, pg->dir);
	return 0;
fail:
	if (started)
		(void)pg_ctl(pg->dir, "stop", uid, gid);
	if (pg->passfile[0])
		unlink(pg->passfile);
	cli_err("local: PostgreSQL's files are left in '%s' for a look; remove it afterwards",
		pg->dir);
	return 1;
}

int local_pg_stop(const char *dir)
{
	char pid[128];
	uid_t uid;
	gid_t gid;

	if (!dir || strncmp(dir, "/tmp/strata-pg.", 15) != 0 || strstr(dir, "..")) {
		cli_err("local: '%s' is not a directory 'local up' made for PostgreSQL; not"
			" touching it", dir ? dir : "");
		return 1;
	}
	if (server_user(&uid, &gid))
		return 1;
	snprintf(pid, sizeof(pid), "%s/data/postmaster.pid", dir);
	if (access(pid, F_OK) == 0 && pg_ctl(dir, "stop", uid, gid) != 0) {
		cli_err("local: PostgreSQL in '%s' did not stop within " PG_WAIT_S " s; see"
			" '%s/pg_ctl.log' (kill the 'postgres' process whose -D is '%s/data')",
			dir, dir, dir);
		return 1;
	}
	bench_rmtree(dir);
	return 0;
}
