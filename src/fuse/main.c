/*
 * strata-fuse: mounts a Strata cluster's namespace with FUSE.
 *
 *   strata-fuse MOUNTPOINT --mgmt HOST:PORT [options]
 *
 * Runs libfuse3's low-level, multithreaded loop on top of libstrata (see
 * sfuse.h and docs/fuse.md). Unless -f is given it detaches once the
 * mount is up, and its exit status says whether it got there. SIGTERM,
 * SIGINT and SIGHUP unmount cleanly.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/log.h"
#include "fuse/sfuse.h"
#include "strata/locate.h"

#define COMP "fuse"

struct options {
	const char *mountpoint;
	const char *mgmt;
	char mgmt_addr[256];	/* mgmt resolved (strata/locate.h) */
	const char *token;	/* --token TOKEN or FILE */
	char token_text[16385];	/* the credential found (strata_find_token) */
	const char *mount_opts;		/* extra -o options */
	const char *log_file;
	double timeout_s;
	double attr_timeout;
	double entry_timeout;
	double negative_timeout;
	unsigned threads;
	unsigned io_threads;
	unsigned readahead_kb;
	unsigned write_behind_mb;
	bool writeback;
	bool multiuser;
	bool foreground;
	bool debug;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: strata-fuse MOUNTPOINT --mgmt HOST:PORT [options]\n"
		"  --mgmt ADDR          the cluster's mgmt address, or the directory of\n"
		"                       'strata local up' (default: $STRATA_MGMT)\n"
		"  --token TOKEN|FILE   the credential (default: $STRATA_TOKEN,\n"
		"                       $STRATA_TOKEN_FILE, or the local cluster's admin.token)\n"
		"  --timeout SEC        give up on an unreachable cluster after SEC seconds\n"
		"                       and return EIO (default 30)\n"
		"  --attr-timeout SEC   kernel attribute cache (default 1)\n"
		"  --entry-timeout SEC  kernel name cache (default 1)\n"
		"  --negative-timeout SEC  kernel cache of names found missing (default 0: off)\n"
		"  --writeback          kernel writeback caching (faster small writes; only\n"
		"                       correct when one client writes a file at a time)\n"
		"  --multiuser          every user of the machine may use the mount, each as\n"
		"                       itself: the cluster checks permissions for the uid\n"
		"                       and groups of the process (root is nobody unless the\n"
		"                       token has 'root'); the token needs 'caller'\n"
		"  --threads N          FUSE worker threads at most (default 16)\n"
		"  --io-threads N       libstrata I/O threads (default 4)\n"
		"  --readahead-kb N     the mount's readahead window (default 1024)\n"
		"  --write-behind-mb N  writes queued per open file before write(2) waits;\n"
		"                       close/fsync wait for them and report their errors\n"
		"                       (default 8; 0: every write waits for all replicas)\n"
		"  -o OPTS              extra mount options (e.g. allow_other)\n"
		"  --log FILE           log to FILE (default: stderr, /dev/null once detached)\n"
		"  -f                   stay in the foreground\n"
		"  -d                   FUSE debug output (implies -f)\n");
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < (long)lo || v > (long)hi)
		return -EINVAL;
	*out = (unsigned)v;
	return 0;
}

static int parse_args(int argc, char **argv, struct options *o)
{
	int rc_find;

	memset(o, 0, sizeof(*o));
	o->timeout_s = 30;
	o->attr_timeout = 1;
	o->entry_timeout = 1;
	o->threads = 16;
	o->io_threads = 4;
	o->readahead_kb = 1024;
	o->write_behind_mb = 8;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int rc = 0;

		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage(stdout);
			exit(0);
		} else if (!strcmp(a, "-f")) {
			o->foreground = true;
			continue;
		} else if (!strcmp(a, "-d")) {
			o->debug = o->foreground = true;
			continue;
		} else if (!strcmp(a, "--writeback")) {
			o->writeback = true;
			continue;
		} else if (!strcmp(a, "--multiuser")) {
			o->multiuser = true;
			continue;
		} else if (a[0] != '-') {
			if (o->mountpoint) {
				fprintf(stderr, "strata-fuse: one mount point only ('%s')\n", a);
				return -EINVAL;
			}
			o->mountpoint = a;
			continue;
		}
		if (!v) {
			fprintf(stderr, "strata-fuse: '%s' needs a value\n", a);
			return -EINVAL;
		}
		i++;
		if (!strcmp(a, "--mgmt"))
			o->mgmt = v;
		else if (!strcmp(a, "--token"))
			o->token = v;
		else if (!strcmp(a, "-o"))
			o->mount_opts = v;
		else if (!strcmp(a, "--log"))
			o->log_file = v;
		else if (!strcmp(a, "--timeout"))
			rc = parse_double(v, 0.1, 86400, &o->timeout_s);
		else if (!strcmp(a, "--attr-timeout"))
			rc = parse_double(v, 0, 3600, &o->attr_timeout);
		else if (!strcmp(a, "--entry-timeout"))
			rc = parse_double(v, 0, 3600, &o->entry_timeout);
		else if (!strcmp(a, "--negative-timeout"))
			rc = parse_double(v, 0, 3600, &o->negative_timeout);
		else if (!strcmp(a, "--threads"))
			rc = parse_uint(v, 1, 256, &o->threads);
		else if (!strcmp(a, "--io-threads"))
			rc = parse_uint(v, 1, 64, &o->io_threads);
		else if (!strcmp(a, "--write-behind-mb"))
			rc = parse_uint(v, 0, 1024, &o->write_behind_mb);
		else if (!strcmp(a, "--readahead-kb"))
			rc = parse_uint(v, 0, 65536, &o->readahead_kb);
		else {
			fprintf(stderr, "strata-fuse: unknown option '%s' (see --help)\n", a);
			return -EINVAL;
		}
		if (rc) {
			fprintf(stderr, "strata-fuse: bad value '%s' for %s\n", v, a);
			return rc;
		}
	}
	if (!o->mountpoint) {
		usage(stderr);
		return -EINVAL;
	}
	/* The credential, by the rule every Strata program uses. */
	rc_find = strata_find_token(o->token, o->mgmt, NULL, o->token_text, sizeof(o->token_text));
	if (rc_find) {
		fprintf(stderr, "strata-fuse: cannot use the token: %s%s\n", strata_strerror(rc_find),
			rc_find == -EPERM ? " (a token file must be mode 0600)" : "");
		return -EINVAL;
	}
	/* --mgmt, else $STRATA_MGMT: the rule every Strata program uses. */
	rc_find = strata_find_mgmt(o->mgmt, NULL, o->mgmt_addr, sizeof(o->mgmt_addr));
	if (rc_find) {
		if (rc_find == -EDESTADDRREQ)
			fprintf(stderr, "strata-fuse: no cluster named: give --mgmt HOST:PORT or "
				"set STRATA_MGMT\n");
		else
			fprintf(stderr, "strata-fuse: cannot find the cluster '%s': %s\n",
				o->mgmt ? o->mgmt : getenv("STRATA_MGMT"), strata_strerror(rc_find));
		return -EINVAL;
	}
	o->mgmt = o->mgmt_addr;
	return 0;
}

/* Widens the mount's readahead window once the mount answers: the kernel
 * starts a FUSE mount at 128 KiB whatever max_readahead says. */
struct ra_arg {
	char mountpoint[PATH_MAX];
	unsigned kb;
};

static void *set_readahead(void *p)
{
	struct ra_arg *a = p;
	struct stat st;
	char path[128], val[32];
	int fd, n;

	if (stat(a->mountpoint, &st))
		goto out;
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", major(st.st_dev),
		 minor(st.st_dev));
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		log_info(COMP, "readahead stays at the kernel's default: cannot open '%s': %s", path,
			 strerror(errno));
		goto out;
	}
	n = snprintf(val, sizeof(val), "%u", a->kb);
	if (write(fd, val, (size_t)n) != n)
		log_info(COMP, "cannot set '%s': %s", path, strerror(errno));
	close(fd);
out:
	free(a);
	return NULL;
}

/* Detaches: the parent waits for the child's verdict on a pipe and exits
 * with it. Returns the write end in the child (-1 in the foreground). */
static int detach(void)
{
	int pfd[2];
	char c = 1;
	pid_t pid;

	if (pipe(pfd)) {
		perror("strata-fuse: pipe");
		exit(1);
	}
	pid = fork();
	if (pid < 0) {
		perror("strata-fuse: fork");
		exit(1);
	}
	if (pid > 0) {
		close(pfd[1]);
		if (read(pfd[0], &c, 1) != 1)
			c = 1;
		_exit(c);
	}
	close(pfd[0]);
	setsid();
	return pfd[1];
}

static void report(int *fd, char status)
{
	if (*fd < 0)
		return;
	if (write(*fd, &status, 1) != 1)
		log_warn(COMP, "cannot report to the parent: %s", strerror(errno));
	close(*fd);
	*fd = -1;
}

static void quiet_stdio(const struct options *o)
{
	int fd = open("/dev/null", O_RDWR);

	if (fd < 0)
		return;
	dup2(fd, 0);
	dup2(fd, 1);
	if (!o->log_file)
		dup2(fd, 2);
	if (fd > 2)
		close(fd);
}

static int run(const struct options *o, int *status_fd)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_loop_config *cfg = NULL;
	struct strata_opts so;
	struct strata *s = NULL;
	struct sfuse sf;
	bool sf_ok = false, mounted = false, handlers = false;
	char mp[PATH_MAX], opts[1024];
	int rc;

	if (!realpath(o->mountpoint, mp)) {
		fprintf(stderr, "strata-fuse: mount point '%s': %s\n", o->mountpoint,
			strerror(errno));
		return 1;
	}
	strata_opts_init(&so, sizeof(so));
	so.retry_ms = (uint32_t)(o->timeout_s * 1000);
	so.timeout_ms = so.retry_ms < 10000 ? so.retry_ms : 10000;
	so.io_threads = o->io_threads;
	so.token = o->token_text;
	rc = strata_connect(o->mgmt, &so, &s);
	if (rc) {
		fprintf(stderr, "strata-fuse: cannot reach the cluster at '%s': %s\n", o->mgmt,
			strata_strerror(rc));
		return 1;
	}
	rc = sfuse_init(&sf, s);
	if (rc)
		goto out;
	sf_ok = true;
	sf.attr_timeout = o->attr_timeout;
	sf.entry_timeout = o->entry_timeout;
	sf.negative_timeout = o->negative_timeout;
	sf.writeback = o->writeback;
	sf.multiuser = o->multiuser;
	sf.wb.max = (size_t)o->write_behind_mb << 20;
	rc = sfuse_start(&sf);
	if (rc)
		goto out;
	/* A multi-user mount is open to every user (allow_other); the kernel
	 * checks the bits it caches (default_permissions) and meta checks
	 * them again for each user's requests. */
	snprintf(opts, sizeof(opts), "fsname=strata:%s,subtype=strata,default_permissions%s%s%s",
		 o->mgmt, o->multiuser ? ",allow_other" : "", o->mount_opts ? "," : "",
		 o->mount_opts ? o->mount_opts : "");
	if (fuse_opt_add_arg(&args, "strata-fuse") || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) || (o->debug && fuse_opt_add_arg(&args, "-d"))) {
		rc = -ENOMEM;
		goto out;
	}
	sf.se = fuse_session_new(&args, &sfuse_ops, sizeof(sfuse_ops), &sf);
	if (!sf.se) {
		fprintf(stderr, "strata-fuse: bad mount options '%s'\n", opts);
		rc = -EINVAL;
		goto out;
	}
	if (fuse_set_signal_handlers(sf.se)) {
		rc = -EIO;
		goto out;
	}
	handlers = true;
	if (fuse_session_mount(sf.se, mp)) {
		fprintf(stderr, "strata-fuse: cannot mount on '%s' (is /dev/fuse there, are we "
			"allowed to mount, is it already a mount point?)\n", mp);
		rc = -EIO;
		goto out;
	}
	mounted = true;
	log_info(COMP, "'%s' mounted from cluster '%s' (timeout %.1f s)", mp, o->mgmt,
		 o->timeout_s);
	if (o->readahead_kb) {
		struct ra_arg *ra = calloc(1, sizeof(*ra));
		pthread_t t;

		if (ra) {
			snprintf(ra->mountpoint, sizeof(ra->mountpoint), "%s", mp);
			ra->kb = o->readahead_kb;
			if (pthread_create(&t, NULL, set_readahead, ra))
				free(ra);
			else
				pthread_detach(t);
		}
	}
	report(status_fd, 0);
	if (!o->foreground)
		quiet_stdio(o);
	cfg = fuse_loop_cfg_create();
	if (!cfg) {
		rc = -ENOMEM;
		goto out;
	}
	fuse_loop_cfg_set_max_threads(cfg, o->threads);
	fuse_loop_cfg_set_idle_threads(cfg, o->threads);
	rc = fuse_session_loop_mt(sf.se, cfg);
	/* A positive rc is the signal that ended the loop. */
	if (rc > 0)
		log_info(COMP, "'%s': signal %d, unmounting", mp, rc);
	else if (rc < 0)
		log_warn(COMP, "'%s': the FUSE loop failed: %s", mp, strerror(-rc));
	else
		log_info(COMP, "'%s': unmounted", mp);
	rc = rc < 0 ? rc : 0;
out:
	if (cfg)
		fuse_loop_cfg_destroy(cfg);
	if (mounted)
		fuse_session_unmount(sf.se);
	if (handlers)
		fuse_remove_signal_handlers(sf.se);
	if (sf.se)
		fuse_session_destroy(sf.se);
	fuse_opt_free_args(&args);
	if (sf_ok)
		sfuse_release(&sf);
	strata_disconnect(s);
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct options o;
	int status_fd = -1, rc;

	if (parse_args(argc, argv, &o))
		return 2;
	if (o.log_file) {
		int fd = open(o.log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		if (fd < 0) {
			fprintf(stderr, "strata-fuse: log file '%s': %s\n", o.log_file,
				strerror(errno));
			return 2;
		}
		dup2(fd, 2);
		close(fd);
	}
	/* Detach before any thread exists (libstrata starts some). */
	if (!o.foreground)
		status_fd = detach();
	rc = run(&o, &status_fd);
	report(&status_fd, (char)(rc ? 1 : 0));
	return rc;
}
