/*
 * strata slurm install|gres: Strata under Slurm (docs/slurm.md).
 *
 * install  puts the burst_buffer/lua script (contrib/slurm/burst_buffer.lua,
 *          built into this program) in Slurm's configuration directory with
 *          its settings (strata_bb.conf), a credential of its own for
 *          SlurmUser (an admin token without namespace rights: composing
 *          needs admin, nothing else) and the state directory.
 * gres     prints gres.conf lines for the GPUs the composer's inventory
 *          lists, so that Slurm schedules the GPUs Strata tracks.
 *
 * Both read the composer through 'strata compose' (run as a child of this
 * program): the CLI has one client of the composer's API.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "common/fileio.h"
#include "strata/errors.h"
#include "strata/locate.h"

/* scripts/embed_text.py: contrib/slurm/burst_buffer.lua. */
extern const char slurm_burst_buffer_lua[];
extern const size_t slurm_burst_buffer_lua_len;

#define SLURM_INVENTORY_MAX (16u << 20)
#define SLURM_MAX_NAMES 1024

struct slurm_args {
	const char *cmd;
	const char *mgmt, *dir, *composer, *token;
	/* install */
	const char *conf_dir, *slurm_user, *state_dir, *strata, *pool, *tenant;
	const char *datasets, *results;
	bool retain;
	/* gres */
	const char *names, *files, *out;
};

static int usage(const char *msg)
{
	if (msg)
		cli_err("%s", msg);
	fprintf(stderr,
		"usage: strata slurm install [--conf-dir DIR] [--slurm-user USER] [--state-dir DIR]\n"
		"                            [--pool NAME] [--tenant user|job] [--retain] [--strata PATH]\n"
		"                            [--datasets PREFIX] [--results PREFIX]\n"
		"       strata slurm gres [--names N1,N2,...|n[1-3,5]] [--files PREFIX] [--out FILE]\n"
		"  the cluster: --mgmt ADDR, --dir DIR or $STRATA_MGMT; --composer HOST:PORT;\n"
		"  an admin token (--token, ...)\n"
		"  install: the burst_buffer/lua script into DIR (default /etc/slurm), its\n"
		"    settings (strata_bb.conf) and an admin token of its own for USER (default\n"
		"    slurm); then set BurstBufferType=burst_buffer/lua in slurm.conf;\n"
		"    --datasets: jobs may stage in dataset= under PREFIX; --results: jobs may\n"
		"    stage out to stage_out= under PREFIX (both as the job's user)\n"
		"  gres: gres.conf lines for the composer's GPUs; --names: Slurm's NodeName of\n"
		"    each compute node, in the inventory's order, a Slurm hostlist (default:\n"
		"    its host);\n"
		"    --files /dev/nvidia: File=/dev/nvidia[0-N] (default: Count= only)\n");
	return 2;
}

static int parse(int argc, char **argv, struct slurm_args *a)
{
	enum { O_MGMT = 256, O_DIR, O_COMPOSER, O_TOKEN, O_CONF, O_USER, O_STATE, O_STRATA,
	       O_POOL, O_TENANT, O_RETAIN, O_DATASETS, O_RESULTS, O_NAMES, O_FILES, O_OUT };
	static const struct option opts[] = {
		{ "mgmt", required_argument, NULL, O_MGMT },
		{ "dir", required_argument, NULL, O_DIR },
		{ "composer", required_argument, NULL, O_COMPOSER },
		{ "token", required_argument, NULL, O_TOKEN },
		{ "conf-dir", required_argument, NULL, O_CONF },
		{ "slurm-user", required_argument, NULL, O_USER },
		{ "state-dir", required_argument, NULL, O_STATE },
		{ "strata", required_argument, NULL, O_STRATA },
		{ "pool", required_argument, NULL, O_POOL },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "retain", no_argument, NULL, O_RETAIN },
		{ "datasets", required_argument, NULL, O_DATASETS },
		{ "results", required_argument, NULL, O_RESULTS },
		{ "names", required_argument, NULL, O_NAMES },
		{ "files", required_argument, NULL, O_FILES },
		{ "out", required_argument, NULL, O_OUT },
		{ NULL, 0, NULL, 0 },
	};
	bool install = strcmp(argv[0], "install") == 0;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if ((install && c >= O_NAMES) || (!install && c >= O_CONF && c < O_NAMES)) {
			cli_err("%s: '%s' is an option of 'slurm %s'", a->cmd, argv[optind - 1],
				install ? "gres" : "install");
			return 2;
		}
		switch (c) {
		case O_MGMT: a->mgmt = optarg; break;
		case O_DIR: a->dir = optarg; break;
		case O_COMPOSER: a->composer = optarg; break;
		case O_TOKEN: a->token = optarg; break;
		case O_CONF: a->conf_dir = optarg; break;
		case O_USER: a->slurm_user = optarg; break;
		case O_STATE: a->state_dir = optarg; break;
		case O_STRATA: a->strata = optarg; break;
		case O_POOL: a->pool = optarg; break;
		case O_TENANT: a->tenant = optarg; break;
		case O_RETAIN: a->retain = true; break;
		case O_DATASETS: a->datasets = optarg; break;
		case O_RESULTS: a->results = optarg; break;
		case O_NAMES: a->names = optarg; break;
		case O_FILES: a->files = optarg; break;
		case O_OUT: a->out = optarg; break;
		default:
			cli_err("%s: unexpected option '%s'", a->cmd, argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc) {
		cli_err("%s: unexpected argument '%s'", a->cmd, argv[optind]);
		return 2;
	}
	return 0;
}

/* A word of a settings file: no spaces, quotes or control characters. */
static bool plain_word(const char *s)
{
	if (!s[0])
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == '"' || *s == '\'' || *s == '#' ||
		    *s == '\\' || (unsigned char)*s == 0x7f)
			return false;
	return true;
}

/* Writes path (mode) with len bytes of text, through a temporary file
 * renamed over it. 0 or a negative errno. */
static int write_file_atomic(const char *path, const char *text, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	int fd, rc = 0;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return -errno;
	if (write_full(fd, text, len) || fchmod(fd, mode) < 0 || fsync(fd) < 0)
		rc = errno ? -errno : -EIO;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

/* The common options of the cluster, for a child 'strata' command. */
static int cluster_argv(const struct slurm_args *a, const char **v, int n)
{
	if (a->mgmt)
		v[n++] = "--mgmt", v[n++] = a->mgmt;
	if (a->dir)
		v[n++] = "--dir", v[n++] = a->dir;
	if (a->token)
		v[n++] = "--token", v[n++] = a->token;
	return n;
}

/* --datasets, --results: absent, or an absolute path other than '/'
 * without a trailing '/' that the script can quote. */
static bool prefix_ok(const char *p)
{
	size_t n = p ? strlen(p) : 0;

	return !p || (p[0] == '/' && plain_word(p) && n >= 2 && p[n - 1] != '/');
}

/* ---- install ---- */

/* SlurmUser's credential in path: an admin token that mgmt signs and
 * records (so it can be revoked), with no path scope: the composer needs
 * admin, and nothing under the namespace is reachable with it (stage-in
 * and stage-out run with the job's own credential). A file already there
 * is kept. */
static int make_token(const struct slurm_args *a, const char *path, const struct passwd *pw)
{
	const char *v[24] = { "token", "create", "--admin", "--tenant", "slurm", "--expires",
			      "never", "--out", path };
	int n = cluster_argv(a, v, 9), rc;

	if (access(path, F_OK) == 0) {
		printf("kept the token in %s (remove it for one with this install's scopes)\n", path);
	} else {
		v[n] = NULL;
		rc = cmd_token(n, (char **)v);
		if (rc)
			return rc;
	}
	if (chown(path, pw->pw_uid, pw->pw_gid) < 0 || chmod(path, 0600) < 0) {
		cli_err("%s: cannot give '%s' to user '%s': %s", a->cmd, path, pw->pw_name,
			strerror(errno));
		return 1;
	}
	return 0;
}

static int install(struct slurm_args *a)
{
	char lua[PATH_MAX], conf[PATH_MAX], bbconf[PATH_MAX], token[PATH_MAX], self[PATH_MAX];
	char mgmt[256], *text = NULL;
	struct passwd *pw;
	struct stat st;
	int rc, n;

	if (!a->conf_dir)
		a->conf_dir = "/etc/slurm";
	if (!a->slurm_user)
		a->slurm_user = "slurm";
	if (!a->state_dir)
		a->state_dir = "/var/spool/slurm/strata";
	if (!a->pool)
		a->pool = "strata";
	if (!a->tenant)
		a->tenant = "user";
	if (strcmp(a->tenant, "user") && strcmp(a->tenant, "job"))
		return usage("slurm install: --tenant is 'user' (the job's user name) or 'job' (job-ID)");
	if (!a->strata) {
		if (cli_self_path(self, sizeof(self))) {
			cli_err("%s: cannot find this program's path; give --strata PATH", a->cmd);
			return 1;
		}
		a->strata = self;
	}
	if (a->pool[strspn(a->pool, "abcdefghijklmnopqrstuvwxyz0123456789_-")] || !a->pool[0])
		return usage("slurm install: --pool: a name of a-z, 0-9, '_' and '-'");
	if (!prefix_ok(a->datasets) || !prefix_ok(a->results))
		return usage("slurm install: --datasets and --results are absolute paths, not '/', without a trailing '/'");
	if (a->state_dir[0] != '/' || !plain_word(a->state_dir) || !plain_word(a->strata) ||
	    (a->composer && !plain_word(a->composer)))
		return usage("slurm install: --state-dir and --strata are absolute paths without spaces or quotes");
	pw = getpwnam(a->slurm_user);
	if (!pw) {
		cli_err("%s: no user '%s': give --slurm-user, the SlurmUser of slurm.conf (burst_buffer/lua refuses root)",
			a->cmd, a->slurm_user);
		return 1;
	}
	if (stat(a->conf_dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		cli_err("%s: '%s' is not a directory: give --conf-dir, the directory of slurm.conf",
			a->cmd, a->conf_dir);
		return 1;
	}
	rc = strata_find_mgmt(a->mgmt, a->dir, mgmt, sizeof(mgmt));
	if (rc || !plain_word(mgmt)) {
		cli_err("%s: no cluster named: give --mgmt ADDR or --dir DIR (or $STRATA_MGMT)", a->cmd);
		return 2;
	}
	snprintf(lua, sizeof(lua), "%s/burst_buffer.lua", a->conf_dir);
	snprintf(conf, sizeof(conf), "%s/strata_bb.conf", a->conf_dir);
	snprintf(bbconf, sizeof(bbconf), "%s/burst_buffer.conf", a->conf_dir);
	snprintf(token, sizeof(token), "%s/strata-slurm.token", a->conf_dir);

	if ((mkdir(a->state_dir, 0700) < 0 && errno != EEXIST) ||
	    chown(a->state_dir, pw->pw_uid, pw->pw_gid) < 0 || chmod(a->state_dir, 0700) < 0) {
		cli_err("%s: cannot make the state directory '%s' for user '%s': %s", a->cmd,
			a->state_dir, pw->pw_name, strerror(errno));
		return 1;
	}
	rc = make_token(a, token, pw);
	if (rc)
		return rc;
	n = asprintf(&text,
		     "# Strata's burst_buffer.lua settings, written by 'strata slurm install'.\n"
		     "strata = %s\nmgmt = %s\ncomposer = %s\ntoken_file = %s\nstate_dir = %s\n"
		     "pool = %s\ngranularity = 1048576\ntenant = %s\nretain = %s\n"
		     "# seconds a setup waits for room (below StageInTimeout)\nsetup_wait = 240\n"
		     "# dataset= reads under this prefix (empty: dataset= is refused)\ndatasets = %s\n"
		     "# stage_out= writes under this prefix (empty: stage_out= is refused)\nresults = %s\n",
		     a->strata, mgmt, a->composer ? a->composer : "", token, a->state_dir, a->pool,
		     a->tenant, a->retain ? "yes" : "no", a->datasets ? a->datasets : "",
		     a->results ? a->results : "");
	if (n < 0) {
		cli_err("%s: out of memory", a->cmd);
		return 1;
	}
	rc = write_file_atomic(conf, text, (size_t)n, 0644);
	free(text);
	if (!rc)
		rc = write_file_atomic(lua, slurm_burst_buffer_lua, slurm_burst_buffer_lua_len, 0644);
	if (!rc && access(bbconf, F_OK) < 0) {
		static const char bb[] =
			"# Written by 'strata slurm install' (burst_buffer/lua, Strata).\n"
			"Directive=BB_LUA\n"
			"OtherTimeout=300\n"
			"StageInTimeout=300\n"
			"StageOutTimeout=300\n";

		rc = write_file_atomic(bbconf, bb, sizeof(bb) - 1, 0644);
	}
	if (rc) {
		cli_err("%s: cannot write in '%s': %s", a->cmd, a->conf_dir, strata_strerror(rc));
		return 1;
	}
	printf("installed %s (settings in %s, state in %s, token of user '%s' in %s)\n"
	       "set in slurm.conf: BurstBufferType=burst_buffer/lua\n"
	       "a job asks with:   #BB_LUA strata pool=%s capacity=50G mem=16G\n",
	       lua, conf, a->state_dir, pw->pw_name, token, a->pool);
	return 0;
}

/* ---- gres ---- */

/* Runs this program with argv (v[0] its name) and reads its stdout (its
 * stderr is ours). 0 with *out malloc'd, or the exit status. */
static int run_self(const char *const *v, char **out)
{
	char self[PATH_MAX], *buf = NULL;
	size_t got = 0, cap = 65536;
	int fds[2], status = 0, rc = 1;
	ssize_t r;
	pid_t pid;

	*out = NULL;
	if (cli_self_path(self, sizeof(self)) || pipe2(fds, O_CLOEXEC) < 0)
		return 1;
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return 1;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execv(self, (char *const *)v);
		_exit(127);
	}
	close(fds[1]);
	buf = malloc(cap + 1);
	while (buf && (r = read(fds[0], buf + got, cap - got)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		got += (size_t)r;
		if (got == cap) {
			char *nb = cap < SLURM_INVENTORY_MAX ? realloc(buf, cap * 2 + 1) : NULL;

			if (!nb)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (buf && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		buf[got] = 0;
		*out = buf;
		return 0;
	}
	free(buf);
	if (WIFEXITED(status) && WEXITSTATUS(status))
		rc = WEXITSTATUS(status);
	return rc;
}

/* Slurm's Type= of a model: lower case, [a-z0-9_]. */
static void gres_type(const char *model, char *out, size_t len)
{
	size_t i = 0;

	for (; *model && i + 1 < len; model++) {
		char ch = *model;

		if (ch >= 'A' && ch <= 'Z')
			ch = (char)(ch - 'A' + 'a');
		out[i++] = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ? ch : '_';
	}
	out[i] = 0;
}

struct hostlist_out {
	char *buf;		/* the names, each NUL-ended */
	size_t buflen, used;
	const char **names;	/* into buf */
	size_t max, n;
};

/* Appends PREFIX, NUM (width digits, 0: as is; num < 0: none), SUFFIX. */
static int hostlist_add(struct hostlist_out *o, const char *pre, int plen, int width, long num,
			const char *suf, int slen)
{
	int len;

	if (o->n == o->max)
		return -E2BIG;
	if (num < 0)
		len = snprintf(o->buf + o->used, o->buflen - o->used, "%.*s", plen, pre);
	else
		len = snprintf(o->buf + o->used, o->buflen - o->used, "%.*s%0*ld%.*s", plen, pre,
			       width, num, slen, suf);
	if (len < 0 || (size_t)len >= o->buflen - o->used)
		return -E2BIG;
	o->names[o->n++] = o->buf + o->used;
	o->used += (size_t)len + 1;
	return 0;
}

/* RANGES of PREFIX[RANGES]SUFFIX (r..close): N or N-M, comma-separated. */
static int hostlist_ranges(struct hostlist_out *o, const char *item, int plen, const char *r,
			   const char *close, const char *suf, int slen)
{
	while (r < close) {
		const char *d = r;
		char *e;
		long a, b;
		int width, rc;

		if (*r < '0' || *r > '9')
			return -EINVAL;
		errno = 0;
		a = strtol(r, &e, 10);
		width = *d == '0' && e - d > 1 ? (int)(e - d) : 0;
		b = a;
		if (*e == '-') {
			if (e[1] < '0' || e[1] > '9')
				return -EINVAL;
			b = strtol(e + 1, &e, 10);
		}
		if (errno || (e != close && *e != ',') || b < a || b > 999999999 ||
		    (e != close && e + 1 == close))
			return -EINVAL;
		for (long i = a; i <= b; i++)
			if ((rc = hostlist_add(o, item, plen, width, i, suf, slen)))
				return rc;
		r = e == close ? close : e + 1;
	}
	return 0;
}

/*
 * Slurm's hostlist of --names, expanded: comma-separated items, each a
 * NAME or PREFIX[RANGES]SUFFIX, RANGES a comma list of N or N-M (zero
 * padding kept: n[01-10]), one bracket per item: "n[1-3,5],gpu7" is n1,
 * n2, n3, n5, gpu7. The names go into o. 0, or -EINVAL with why[] set
 * (what is wrong with which item).
 */
static int expand_hostlist(const char *spec, struct hostlist_out *o, char *why, size_t whylen)
{
	const char *p = spec;

	o->n = o->used = 0;
	if (!*p) {
		snprintf(why, whylen, "an empty hostlist (give NAME,... or PREFIX[RANGES])");
		return -EINVAL;
	}
	while (*p) {
		const char *item = p, *open, *close = NULL;
		int rc;

		while (*p && *p != ',' && *p != '[' && *p != ']')
			p++;
		open = *p == '[' ? p : NULL;
		if (open) {
			close = strchr(open, ']');
			if (!close || memchr(open + 1, '[', (size_t)(close - open - 1))) {
				snprintf(why, whylen, "'%s' has a '[' without its ']'", item);
				return -EINVAL;
			}
			p = close + 1;
			while (*p && *p != ',' && *p != '[' && *p != ']')
				p++;
		}
		if (*p == '[' || *p == ']') {
			snprintf(why, whylen, "'%s' is not NAME or PREFIX[RANGES]SUFFIX (one bracket "
				 "per name)", item);
			return -EINVAL;
		}
		if (p == item || (open && close == open + 1)) {
			snprintf(why, whylen, "'%s' has an empty name or range", spec);
			return -EINVAL;
		}
		if (!open)
			rc = hostlist_add(o, item, (int)(p - item), 0, -1, NULL, 0);
		else
			rc = hostlist_ranges(o, item, (int)(open - item), open + 1, close, close + 1,
					     (int)(p - close - 1));
		if (rc == -E2BIG) {
			snprintf(why, whylen, "'%s' names more than %zu nodes", spec, o->max);
			return -EINVAL;
		}
		if (rc) {
			snprintf(why, whylen, "'%.*s': '%.*s' is not N or N-M with N <= M, "
				 "comma-separated (such as n[1-3,5])", (int)(p - item), item,
				 (int)(close - open - 1), open + 1);
			return -EINVAL;
		}
		if (*p == ',' && !p[1]) {
			snprintf(why, whylen, "'%s' ends with ','", spec);
			return -EINVAL;
		}
		p += *p == ',';
	}
	return 0;
}

static int gres(struct slurm_args *a)
{
	const char *v[16] = { "strata", "compose", "inventory", "--json" }, *names[SLURM_MAX_NAMES];
	char *text = NULL, *list = NULL, type[64] = "";
	json_t *svc = NULL, *inv, *nodes, *models;
	size_t nnames = 0;
	FILE *f = stdout;
	int n = 4, rc;

	if (a->composer)
		v[n++] = "--composer", v[n++] = a->composer;
	n = cluster_argv(a, v, n);
	v[n] = NULL;
	if (a->files && (a->files[0] != '/' || !plain_word(a->files)))
		return usage("slurm gres: --files: an absolute path prefix, such as /dev/nvidia");
	if (a->names) {
		char why[256];
		struct hostlist_out ho = { .buflen = SLURM_MAX_NAMES * 64, .names = names,
					   .max = SLURM_MAX_NAMES };

		list = ho.buf = malloc(ho.buflen);
		if (!list || expand_hostlist(a->names, &ho, why, sizeof(why))) {
			cli_err("%s: --names: %s", a->cmd, list ? why : strerror(ENOMEM));
			free(list);
			return 2;
		}
		nnames = ho.n;
	}
	rc = run_self(v, &text);
	if (rc) {
		free(list);
		return rc;
	}
	svc = json_loads(text, 0, NULL);
	free(text);
	inv = json_object_get(json_object_get(json_object_get(svc, "Oem"), "Strata"), "Inventory");
	nodes = json_object_get(inv, "ComputeNodes");
	models = json_object_get(json_object_get(inv, "Gpus"), "Models");
	if (!json_is_array(nodes) || !json_is_object(models)) {
		cli_err("%s: the composer's inventory lists no compute nodes and GPU models", a->cmd);
		rc = 1;
		goto out;
	}
	/* Type= only when every GPU is of one model: the inventory does not
	 * say which node holds which model. */
	if (json_object_size(models) == 1)
		gres_type(json_object_iter_key(json_object_iter(models)), type, sizeof(type));
	if (nnames && nnames != json_array_size(nodes)) {
		cli_err("%s: --names gives %zu name(s), the inventory lists %zu compute node(s)",
			a->cmd, nnames, json_array_size(nodes));
		rc = 2;
		goto out;
	}
	if (a->out && !(f = fopen(a->out, "w"))) {
		cli_err("%s: cannot write '%s': %s", a->cmd, a->out, strerror(errno));
		rc = 1;
		goto out;
	}
	fprintf(f, "# gres.conf: the GPUs of Strata's compute nodes (strata slurm gres)\n");
	for (size_t i = 0; i < json_array_size(nodes); i++) {
		json_t *nd = json_array_get(nodes, i);
		json_int_t count = json_integer_value(json_object_get(nd, "Gpus"));
		const char *addr = json_string_value(json_object_get(nd, "Address")) ?: "";
		char host[256];
		const char *colon = strrchr(addr, ':');

		if (nnames)
			snprintf(host, sizeof(host), "%s", names[i]);
		else
			snprintf(host, sizeof(host), "%.*s", (int)(colon ? colon - addr : (long)strlen(addr)),
				 addr);
		if (!plain_word(host)) {
			cli_err("%s: compute node %lld has no usable name: give --names", a->cmd,
				(long long)json_integer_value(json_object_get(nd, "Node")));
			rc = 2;
			goto out;
		}
		if (count <= 0)
			continue;
		fprintf(f, "# strata node %lld at %s; slurm.conf: NodeName=%s Gres=gpu%s%s:%lld\n",
			(long long)json_integer_value(json_object_get(nd, "Node")), addr, host,
			type[0] ? ":" : "", type, (long long)count);
		fprintf(f, "NodeName=%s Name=gpu%s%s", host, type[0] ? " Type=" : "", type);
		if (a->files && count > 1)
			fprintf(f, " File=%s[0-%lld]", a->files, (long long)count - 1);
		else if (a->files)
			fprintf(f, " File=%s0", a->files);
		else
			fprintf(f, " Count=%lld", (long long)count);
		fprintf(f, "\n");
	}
	rc = 0;
out:
	if (f && f != stdout && fclose(f) && !rc) {
		cli_err("%s: cannot write '%s': %s", a->cmd, a->out, strerror(errno));
		rc = 1;
	}
	free(list);
	json_decref(svc);
	return rc;
}

int cmd_slurm(int argc, char **argv)
{
	struct slurm_args a = { 0 };
	char cmd[32];
	int rc;

	if (argc < 2 || (strcmp(argv[1], "install") && strcmp(argv[1], "gres")))
		return usage(argc < 2 ? NULL : "slurm: unknown action (install, gres)");
	snprintf(cmd, sizeof(cmd), "slurm %s", argv[1]);
	a.cmd = cmd;
	rc = parse(argc - 1, argv + 1, &a);
	if (rc)
		return rc;
	return strcmp(argv[1], "install") == 0 ? install(&a) : gres(&a);
}
