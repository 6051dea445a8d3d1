/*
 * The file commands of the strata CLI over libstrata: ls, stat, mkdir, rm,
 * mv, cat, du, setlayout and getlayout (put, get and cp are in
 * cmd_copy.c, status in cmd_status.c). Each names the cluster with --mgmt ADDR, --dir DIR (of
 * 'strata local up') or $STRATA_MGMT. Every failure names the path and the
 * cause; a command goes on with its other arguments and exits 1 if any
 * failed, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "cli_fs.h"
#include "net/mgmt_addrs.h"
#include "common/config.h"
#include "net/addr.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "strata/locate.h"
#include "strata/strata.h"

#define FS_READ_PIECE (4u << 20)

/* ---- shared helpers ---- */

static const struct option fs_longopts[] = {
	{ "mgmt", required_argument, NULL, FS_OPT_MGMT },
	{ "dir", required_argument, NULL, FS_OPT_DIR },
	{ "token", required_argument, NULL, FS_OPT_TOKEN },
	{ "chunk-size", required_argument, NULL, FS_OPT_CHUNK },
	{ "stripe", required_argument, NULL, FS_OPT_STRIPE },
	{ "jobs", required_argument, NULL, 'j' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "recursive", no_argument, NULL, 'r' },
	{ "force", no_argument, NULL, 'f' },
	{ "parents", no_argument, NULL, 'p' },
	{ "summarize", no_argument, NULL, 's' },
	{ "long", no_argument, NULL, 'l' },
	{ "bytes", required_argument, NULL, 'b' },
	{ "inodes", required_argument, NULL, 'i' },
	{ "json", no_argument, NULL, 'J' },
	{ NULL, 0, NULL, 0 },
};

int fs_parse(int argc, char **argv, const char *letters, bool layout, struct fs_args *a)
{
	char spec[64];
	int c;

	memset(a, 0, sizeof(*a));
	a->cmd = argv[0];
	/* Leading ':' so a missing value is told apart from an unknown letter;
	 * opterr = 0: the messages below name the command. */
	snprintf(spec, sizeof(spec), ":%s", letters);
	opterr = 0;
	optind = 0;	/* glibc: full reinitialization */
	while ((c = getopt_long(argc, argv, spec, fs_longopts, NULL)) != -1) {
		switch (c) {
		case FS_OPT_MGMT:
			a->mgmt = optarg;
			break;
		case FS_OPT_DIR:
			a->dir = optarg;
			break;
		case FS_OPT_TOKEN:
			a->token = optarg;
			break;
		case FS_OPT_CHUNK:
		case FS_OPT_STRIPE:
			if (!layout)
				goto unknown;
			if (c == FS_OPT_CHUNK)
				a->chunk_size = optarg;
			else
				a->stripe = optarg;
			break;
		case ':':
			cli_err("%s: option '%s' needs a value (see 'strata --help')", a->cmd,
				argv[optind - 1]);
			return 2;
		case '?':
			goto unknown;
		default:
			/* A long form whose letter this command does not take. */
			if (c >= 128 || !strchr(letters, c))
				goto unknown;
			a->flag[c] = true;
			a->val[c] = optarg;
			break;
		}
	}
	a->pos = argv + optind;
	a->npos = argc - optind;
	return 0;
unknown:
	if (optopt > 0 && optopt < 128 && optopt != '?' && c == '?')
		cli_err("%s: unknown option '-%c' (see 'strata --help')", a->cmd, optopt);
	else
		cli_err("%s: unknown option '%s' (see 'strata --help')", a->cmd, argv[optind - 1]);
	return 2;
}

/* Whether every address of the list spec is HOST:PORT. */
static bool hostports(const char *spec)
{
	struct mgmt_addrs l;
	char host[ADDR_HOST_MAX];
	int port;

	if (mgmt_addrs_init(&l, spec))
		return false;
	for (uint32_t i = 0; i < l.n; i++)
		if (parse_hostport(l.addr[i], host, sizeof(host), &port) || port == 0)
			return false;
	return true;
}

/* The mgmt address, or list of them, the command names (checked). */
static int mgmt_spec(const struct fs_args *a, char *addr, size_t len)
{
	int rc = strata_find_mgmt(a->mgmt, a->dir, addr, len);
	const char *named = a->mgmt && *a->mgmt ? a->mgmt : a->dir && *a->dir ? a->dir :
			    getenv("STRATA_MGMT");

	if (rc == 0 && !hostports(addr)) {
		cli_err("%s: '%s' is neither a cluster directory nor HOST:PORT[,HOST:PORT...] (a port"
			" in 1..65535; IPv6 as [ADDR]:PORT)", a->cmd, addr);
		return 2;
	}
	if (rc == 0)
		return 0;
	if (rc == -EDESTADDRREQ) {
		cli_err("%s: no cluster named: pass --mgmt HOST:PORT or --dir DIR (of 'strata local up'), or set STRATA_MGMT",
			a->cmd);
		return 2;
	}
	if (rc == -ENAMETOOLONG)
		cli_err("%s: the mgmt address '%s' is too long", a->cmd, named);
	else if (rc == STRATA_EBADMSG)
		cli_err("'%s/cluster.json' names no mgmt address", named);
	else
		cli_err("no local cluster recorded in '%s' (%s); start one with 'strata local up --dir %s'",
			named, strata_strerror(rc), named);
	return 1;
}

void cli_mgmt_leader(struct rpc_client *cl, char *addr, size_t len)
{
	struct mgmt_addrs l;
	uint32_t first = UINT32_MAX;

	if (!strchr(addr, ',') || mgmt_addrs_init(&l, addr))
		return;
	/* Followers answer reads too (GET_MAP): the leader is the one whose
	 * STATUS says so. While none does (an election), the first that
	 * answers serves reads; a write there reports who leads. */
	for (uint32_t i = 0; i < l.n; i++) {
		json_t *sv = NULL;
		bool leads;

		if (cli_service_status(cl, l.addr[i], "mgmt", 3000, &sv))
			continue;
		leads = json_is_true(json_object_get(sv, "leader"));
		json_decref(sv);
		if (leads) {
			snprintf(addr, len, "%s", l.addr[i]);
			return;
		}
		if (first == UINT32_MAX)
			first = i;
	}
	snprintf(addr, len, "%s", l.addr[first == UINT32_MAX ? 0 : first]);
}

int fs_mgmt_addr(const struct fs_args *a, char *addr, size_t len)
{
	struct rpc_client *cl;
	int rc = mgmt_spec(a, addr, len);

	if (rc || !strchr(addr, ','))
		return rc;
	if (cli_rpc_client("strata-cli", 3000, a->token, a->mgmt, a->dir, &cl))
		return 1;
	cli_mgmt_leader(cl, addr, len);
	rpc_client_free(cl);
	return 0;
}

int fs_mgmt_client(const struct fs_args *a, const char *name, uint32_t timeout_ms, char *addr,
		   size_t len, struct rpc_client **cl)
{
	int rc = mgmt_spec(a, addr, len);

	if (rc)
		return rc;
	if (cli_rpc_client(name, timeout_ms, a->token, a->mgmt, a->dir, cl))
		return 1;
	cli_mgmt_leader(*cl, addr, len);
	return 0;
}

int fs_connect_at(const struct fs_args *a, struct strata **out, char *addr, size_t len)
{
	struct strata_opts o;
	char *text;
	int rc;

	*out = NULL;
	/* The whole list: libstrata follows a change of mgmt leader. */
	rc = mgmt_spec(a, addr, len);
	if (rc)
		return rc;
	text = cli_find_token(a->token, a->mgmt, a->dir);
	if (!text)
		return 1;
	strata_opts_init(&o, sizeof(o));
	o.token = text;		/* "": none */
	rc = strata_connect(addr, &o, out);
	free(text);
	if (rc) {
		cli_err("cannot connect to the cluster at '%s': %s", addr, strata_strerror(rc));
		*out = NULL;
		return 1;
	}
	return 0;
}

int fs_connect(const struct fs_args *a, struct strata **out)
{
	char addr[256];

	return fs_connect_at(a, out, addr, sizeof(addr));
}

char *fs_norm(const char *path)
{
	size_t n = strlen(path);
	char *out = malloc(n + 2);
	size_t o = 0;
	const char *p = path;

	if (!out)
		return NULL;
	while (*p) {
		const char *start, *end;
		size_t len;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		start = p;
		end = strchr(p, '/');
		if (!end)
			end = p + strlen(p);
		len = (size_t)(end - start);
		p = end;
		if (len == 1 && start[0] == '.')
			continue;
		if (len == 2 && start[0] == '.' && start[1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;	/* the '/' before the dropped component */
			continue;
		}
		out[o++] = '/';
		memcpy(out + o, start, len);
		o += len;
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	return out;
}

char *fs_join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	char *out;

	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	out = malloc(dl + nl + 2);
	if (!out)
		return NULL;
	memcpy(out, dir, dl);
	if (!(dl == 1 && dir[0] == '/'))
		out[dl++] = '/';
	memcpy(out + dl, name, nl + 1);
	return out;
}

const char *fs_base(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

static int dirent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct strata_dirent *)a)->name, ((const struct strata_dirent *)b)->name);
}

ssize_t fs_list(struct strata *s, const char *path, struct strata_dirent **ents)
{
	struct strata_dirent *v = NULL, *nv;
	size_t n = 0, cap = 0;
	struct strata_dir *d;
	int rc;

	*ents = NULL;
	rc = strata_opendir(s, path, &d);
	if (rc)
		return rc;
	for (;;) {
		if (n == cap) {
			cap = cap ? cap * 2 : 64;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = -ENOMEM;
				goto fail;
			}
			v = nv;
		}
		rc = strata_readdir(d, &v[n]);
		if (rc < 0)
			goto fail;
		if (rc == 0)
			break;
		if (strcmp(v[n].name, ".") == 0 || strcmp(v[n].name, "..") == 0)
			continue;
		n++;
	}
	strata_closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), dirent_cmp);
	else {
		free(v);
		v = NULL;
	}
	*ents = v;
	return (ssize_t)n;
fail:
	strata_closedir(d);
	free(v);
	return rc;
}

void fs_fail(const char *verb, const char *path, int err)
{
	flockfile(stderr);
	cli_err("cannot %s '%s': %s", verb, path, strata_strerror(err));
	funlockfile(stderr);
}

const char *fs_human(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	int u = 0;

	while (v >= 1024.0 && u < 6) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

/* A stat of a child: dirent modes may carry only the type. */
static bool ent_is_dir(struct strata *s, const char *path, const struct strata_dirent *e)
{
	struct strata_stat st;

	if (e->mode & S_IFMT)
		return S_ISDIR(e->mode);
	return strata_lstat(s, path, &st) == 0 && S_ISDIR(st.mode);
}

static void mode_string(uint32_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";

	out[0] = S_ISDIR(mode) ? 'd' : S_ISLNK(mode) ? 'l' : S_ISREG(mode) ? '-' : '?';
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	out[10] = '\0';
}

static void time_string(int64_t ns, bool full, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000LL);
	struct tm tm;
	char base[64], zone[16];

	if (!localtime_r(&t, &tm)) {
		snprintf(buf, len, "?");
		return;
	}
	if (!full) {
		strftime(buf, len, "%Y-%m-%d %H:%M", &tm);
		return;
	}
	strftime(base, sizeof(base), "%Y-%m-%d %H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	snprintf(buf, len, "%s.%09lld %s", base, (long long)(ns % 1000000000LL), zone);
}

/* Connects and runs fn over every positional argument (normalized);
 * returns the exit status. */
typedef int (*fs_each_fn)(struct strata *s, const struct fs_args *a, const char *path);

static int fs_run_each(const struct fs_args *a, fs_each_fn fn)
{
	struct strata *s;
	int rc, bad = 0;

	rc = fs_connect(a, &s);
	if (rc)
		return rc;
	for (int i = 0; i < a->npos; i++) {
		char *p = fs_norm(a->pos[i]);

		if (!p) {
			fs_fail("handle", a->pos[i], -ENOMEM);
			bad = 1;
			continue;
		}
		if (fn(s, a, p))
			bad = 1;
		free(p);
	}
	strata_disconnect(s);
	return bad;
}

static int need_paths(const struct fs_args *a, int min, const char *usage)
{
	if (a->npos < min) {
		cli_err("usage: strata %s", usage);
		return 2;
	}
	return 0;
}

/* ---- ls ---- */

static void ls_long(struct strata *s, const char *path, const char *name, const struct strata_stat *st)
{
	char mode[11], when[32], target[PATH_MAX];

	mode_string(st->mode, mode);
	time_string(st->mtime_ns, false, when, sizeof(when));
	if (S_ISLNK(st->mode) && strata_readlink(s, path, target, sizeof(target)) >= 0)
		printf("%s %12llu %s %s -> %s\n", mode, (unsigned long long)st->size, when, name, target);
	else
		printf("%s %12llu %s %s\n", mode, (unsigned long long)st->size, when, name);
}

static int ls_one(struct strata *s, const struct fs_args *a, const char *path)
{
	bool lng = a->flag['l'];
	struct strata_dirent *ents = NULL;
	struct strata_stat st;
	ssize_t n;
	int rc, bad = 0;

	rc = strata_lstat(s, path, &st);
	if (rc) {
		fs_fail("access", path, rc);
		return 1;
	}
	if (!S_ISDIR(st.mode)) {
		if (lng)
			ls_long(s, path, path, &st);
		else
			printf("%s\n", path);
		return 0;
	}
	n = fs_list(s, path, &ents);
	if (n < 0) {
		fs_fail("open directory", path, (int)n);
		return 1;
	}
	if (a->npos > 1)
		printf("%s:\n", path);
	for (ssize_t i = 0; i < n; i++) {
		char *child;

		if (!lng) {
			printf("%s\n", ents[i].name);
			continue;
		}
		child = fs_join(path, ents[i].name);
		if (!child) {
			fs_fail("access", ents[i].name, -ENOMEM);
			bad = 1;
			continue;
		}
		rc = strata_lstat(s, child, &st);
		if (rc == -ENOENT) {
			/* Removed since the listing: skip it, as ls does. */
		} else if (rc) {
			fs_fail("access", child, rc);
			bad = 1;
		} else {
			ls_long(s, child, ents[i].name, &st);
		}
		free(child);
	}
	if (a->npos > 1)
		printf("\n");
	free(ents);
	return bad;
}

static int cmd_ls(int argc, char **argv)
{
	struct fs_args a;
	char *root[] = { (char *)"/" };
	int rc = fs_parse(argc, argv, "l", false, &a);

	if (rc)
		return rc;
	if (a.npos == 0) {
		a.pos = root;
		a.npos = 1;
	}
	return fs_run_each(&a, ls_one);
}

/* ---- stat ---- */

static const char *type_name(uint32_t mode)
{
	if (S_ISREG(mode))
		return "regular file";
	if (S_ISDIR(mode))
		return "directory";
	if (S_ISLNK(mode))
		return "symbolic link";
	return "other";
}

static int stat_one(struct strata *s, const struct fs_args *a, const char *path)
{
	struct strata_stat st;
	char mode[11], t[64], target[PATH_MAX];
	int rc;

	(void)a;
	rc = strata_lstat(s, path, &st);
	if (rc) {
		fs_fail("stat", path, rc);
		return 1;
	}
	mode_string(st.mode, mode);
	if (S_ISLNK(st.mode) && strata_readlink(s, path, target, sizeof(target)) >= 0)
		printf("  File: %s -> %s\n", path, target);
	else
		printf("  File: %s\n", path);
	printf("  Type: %s\n", type_name(st.mode));
	printf("  Size: %llu\n", (unsigned long long)st.size);
	printf(" Inode: %llu\n", (unsigned long long)st.ino);
	printf(" Links: %u\n", st.nlink);
	printf("  Mode: %04o (%s)\n", st.mode & 07777, mode);
	printf("   Uid: %u\n   Gid: %u\n", st.uid, st.gid);
	printf("Layout: chunk_size=%u stripe=%u\n", st.chunk_size, st.stripe);
	time_string(st.atime_ns, true, t, sizeof(t));
	printf("Access: %s\n", t);
	time_string(st.mtime_ns, true, t, sizeof(t));
	printf("Modify: %s\n", t);
	time_string(st.ctime_ns, true, t, sizeof(t));
	printf("Change: %s\n", t);
	return 0;
}

static int cmd_stat(int argc, char **argv)
{
	struct fs_args a;
	int rc = fs_parse(argc, argv, "", false, &a);

	if (rc || (rc = need_paths(&a, 1, "stat [--mgmt ADDR | --dir DIR] PATH...")))
		return rc;
	return fs_run_each(&a, stat_one);
}

/* ---- mkdir ---- */

int fs_mkdir_p(struct strata *s, const char *path)
{
	struct strata_stat st;
	char *p = strdup(path);
	int rc = 0;

	if (!p)
		return -ENOMEM;
	for (char *q = p + 1;; q++) {
		if (*q != '/' && *q != '\0')
			continue;
		char save = *q;

		*q = '\0';
		/* An existing directory is passed without a create: a token
		 * scoped below it may look it up, but not create in its
		 * parent (meta would answer EACCES before EEXIST). */
		rc = strata_stat(s, p, &st);
		if (rc) {
			rc = strata_mkdir(s, p, 0755);
			if (rc == -EEXIST)	/* made meanwhile */
				rc = strata_stat(s, p, &st);
			else if (rc == 0)
				st.mode = S_IFDIR;
		}
		if (rc == 0 && !S_ISDIR(st.mode))
			rc = save ? -ENOTDIR : -EEXIST;
		*q = save;
		if (rc || !save)
			break;
	}
	free(p);
	return rc;
}

static int mkdir_one(struct strata *s, const struct fs_args *a, const char *path)
{
	int rc;

	if (strcmp(path, "/") == 0)
		rc = a->flag['p'] ? 0 : -EEXIST;
	else if (a->flag['p'])
		rc = fs_mkdir_p(s, path);
	else
		rc = strata_mkdir(s, path, 0755);
	if (rc) {
		fs_fail("create directory", path, rc);
		return 1;
	}
	return 0;
}

static int cmd_mkdir(int argc, char **argv)
{
	struct fs_args a;
	int rc = fs_parse(argc, argv, "p", false, &a);

	if (rc || (rc = need_paths(&a, 1, "mkdir [-p] [--mgmt ADDR | --dir DIR] PATH...")))
		return rc;
	return fs_run_each(&a, mkdir_one);
}

/* ---- chmod, chown ---- */

/* The attributes chmod and chown set on every path: mask and st. */
struct set_attrs {
	unsigned mask;
	struct strata_stat st;
};

static int setattr_one(struct strata *s, const struct fs_args *a, const char *path)
{
	const struct set_attrs *sa = a->ctx;
	int rc = strata_setattr(s, path, sa->mask, &sa->st);

	if (rc) {
		fs_fail(sa->mask & STRATA_SET_MODE ? "change the mode of" : "change the owner of",
			path, rc);
		return 1;
	}
	return 0;
}

/* A uid or gid: a number, or a name this host knows. 0 or -EINVAL. */
static int parse_id(const char *s, bool group, uint32_t *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (s[0] >= '0' && s[0] <= '9' && !*end && !errno && v < UINT32_MAX) {
		*out = (uint32_t)v;
		return 0;
	}
	if (group) {
		struct group *g = getgrnam(s);

		if (g)
			*out = (uint32_t)g->gr_gid;
		return g ? 0 : -EINVAL;
	}
	struct passwd *pw = getpwnam(s);

	if (pw)
		*out = (uint32_t)pw->pw_uid;
	return pw ? 0 : -EINVAL;
}

static int cmd_chmod(int argc, char **argv)
{
	struct set_attrs sa = { .mask = STRATA_SET_MODE };
	struct fs_args a;
	unsigned long mode;
	char *end;
	int rc = fs_parse(argc, argv, "", false, &a);

	if (rc || (rc = need_paths(&a, 2, "chmod [--mgmt ADDR | --dir DIR] MODE PATH...")))
		return rc;
	errno = 0;
	mode = strtoul(a.pos[0], &end, 8);
	if (!a.pos[0][0] || *end || errno || mode > 07777 || a.pos[0][0] == '-') {
		cli_err("chmod: '%s' is not an octal mode (0..7777, e.g. 755)", a.pos[0]);
		return 2;
	}
	sa.st.mode = (uint32_t)mode;
	a.ctx = &sa;
	a.pos++;
	a.npos--;
	return fs_run_each(&a, setattr_one);
}

static int cmd_chown(int argc, char **argv)
{
	struct set_attrs sa = { 0 };
	struct fs_args a;
	char user[256];
	const char *colon;
	int rc = fs_parse(argc, argv, "", false, &a);

	if (rc || (rc = need_paths(&a, 2, "chown [--mgmt ADDR | --dir DIR] USER[:GROUP] PATH...")))
		return rc;
	colon = strchr(a.pos[0], ':');
	snprintf(user, sizeof(user), "%.*s", colon ? (int)(colon - a.pos[0]) : (int)sizeof(user) - 1,
		 a.pos[0]);
	if (user[0]) {
		if (parse_id(user, false, &sa.st.uid))
			goto bad;
		sa.mask |= STRATA_SET_UID;
	}
	if (colon && colon[1]) {
		if (parse_id(colon + 1, true, &sa.st.gid))
			goto bad;
		sa.mask |= STRATA_SET_GID;
	}
	if (!sa.mask)
		goto bad;
	a.ctx = &sa;
	a.pos++;
	a.npos--;
	return fs_run_each(&a, setattr_one);
bad:
	cli_err("chown: '%s' is not USER[:GROUP] (numbers, or names this host knows)", a.pos[0]);
	return 2;
}

/* ---- rm ---- */

/* Removes the tree under path (a directory), then path. Reports each
 * failure; returns 1 if any. */
static int rm_tree(struct strata *s, const char *path, bool force)
{
	struct strata_dirent *ents;
	ssize_t n = fs_list(s, path, &ents);
	int bad = 0, rc;

	if (n < 0) {
		if (n == -ENOENT && force)
			return 0;
		fs_fail("remove", path, (int)n);
		return 1;
	}
	for (ssize_t i = 0; i < n; i++) {
		char *child = fs_join(path, ents[i].name);

		if (!child) {
			fs_fail("remove", ents[i].name, -ENOMEM);
			bad = 1;
			continue;
		}
		if (ent_is_dir(s, child, &ents[i])) {
			bad |= rm_tree(s, child, force);
		} else {
			rc = strata_unlink(s, child);
			if (rc && !(rc == -ENOENT && force)) {
				fs_fail("remove", child, rc);
				bad = 1;
			}
		}
		free(child);
	}
	free(ents);
	rc = strata_rmdir(s, path);
	if (rc && !(rc == -ENOENT && force)) {
		/* A child that could not go already said why. */
		if (!bad)
			fs_fail("remove", path, rc);
		bad = 1;
	}
	return bad;
}

static int rm_one(struct strata *s, const struct fs_args *a, const char *path)
{
	bool force = a->flag['f'];
	struct strata_stat st;
	int rc;

	if (strcmp(path, "/") == 0) {
		cli_err("refusing to remove '/' (remove what is under it by name)");
		return 1;
	}
	rc = strata_lstat(s, path, &st);
	if (rc) {
		if (rc == -ENOENT && force)
			return 0;
		fs_fail("remove", path, rc);
		return 1;
	}
	if (S_ISDIR(st.mode) && a->flag['r'])
		return rm_tree(s, path, force);
	/* Without -r an empty directory goes (as rm -d): a full one fails
	 * with "Directory not empty". */
	rc = S_ISDIR(st.mode) ? strata_rmdir(s, path) : strata_unlink(s, path);
	if (rc && !(rc == -ENOENT && force)) {
		fs_fail("remove", path, rc);
		return 1;
	}
	return 0;
}

static int cmd_rm(int argc, char **argv)
{
	struct fs_args a;
	int rc = fs_parse(argc, argv, "rf", false, &a);

	if (rc)
		return rc;
	if (a.npos == 0 && a.flag['f'])
		return 0;
	if ((rc = need_paths(&a, 1, "rm [-r] [-f] [--mgmt ADDR | --dir DIR] PATH...")))
		return rc;
	return fs_run_each(&a, rm_one);
}

/* ---- mv ---- */

static int cmd_mv(int argc, char **argv)
{
	struct fs_args a;
	struct strata_stat st;
	struct strata *s;
	char *dst = NULL;
	bool into = false;
	int rc, bad = 0;

	rc = fs_parse(argc, argv, "", false, &a);
	if (rc || (rc = need_paths(&a, 2, "mv [--mgmt ADDR | --dir DIR] SRC... DST")))
		return rc;
	rc = fs_connect(&a, &s);
	if (rc)
		return rc;
	dst = fs_norm(a.pos[a.npos - 1]);
	if (!dst) {
		fs_fail("move to", a.pos[a.npos - 1], -ENOMEM);
		bad = 1;
		goto out;
	}
	rc = strata_stat(s, dst, &st);
	if (rc == 0 && S_ISDIR(st.mode))
		into = true;
	else if (a.npos > 2) {
		cli_err("target '%s' is not a directory", dst);
		bad = 1;
		goto out;
	}
	for (int i = 0; i < a.npos - 1; i++) {
		char *src = fs_norm(a.pos[i]), *to;

		if (!src) {
			fs_fail("move", a.pos[i], -ENOMEM);
			bad = 1;
			continue;
		}
		to = into ? fs_join(dst, fs_base(src)) : strdup(dst);
		if (strcmp(src, "/") == 0)
			rc = -EBUSY;
		else if (!to)
			rc = -ENOMEM;
		else if (strcmp(src, to) == 0)
			rc = 0;	/* mv a a: nothing to do */
		else
			rc = strata_rename(s, src, to, 0);
		if (rc) {
			flockfile(stderr);
			cli_err("cannot move '%s' to '%s': %s", src, to ? to : dst, strata_strerror(rc));
			funlockfile(stderr);
			bad = 1;
		}
		free(src);
		free(to);
	}
out:
	free(dst);
	strata_disconnect(s);
	return bad;
}

/* ---- cat ---- */

static int cat_one(struct strata *s, const struct fs_args *a, const char *path)
{
	static char *buf;
	struct strata_file *f;
	struct strata_stat st;
	uint64_t off = 0;
	int rc;

	(void)a;
	if (!buf) {
		buf = malloc(FS_READ_PIECE);
		if (!buf) {
			fs_fail("read", path, -ENOMEM);
			return 1;
		}
	}
	rc = strata_open(s, path, STRATA_O_RDONLY, 0, &f);
	if (rc) {
		fs_fail("open", path, rc);
		return 1;
	}
	if (strata_fstat(f, &st) == 0 && S_ISDIR(st.mode)) {
		rc = -EISDIR;
		goto out;
	}
	for (;;) {
		ssize_t n = strata_pread(f, buf, FS_READ_PIECE, off);

		if (n < 0) {
			rc = (int)n;
			break;
		}
		if (n == 0)
			break;
		if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n) {
			int err = errno ? -errno : -EIO;

			strata_close(f);
			fs_fail("write to standard output for", path, err);
			return 1;
		}
		off += (uint64_t)n;
	}
out:
	strata_close(f);
	if (rc) {
		fs_fail("read", path, rc);
		return 1;
	}
	return 0;
}

static int cmd_cat(int argc, char **argv)
{
	struct fs_args a;
	int rc = fs_parse(argc, argv, "", false, &a);

	if (rc || (rc = need_paths(&a, 1, "cat [--mgmt ADDR | --dir DIR] PATH...")))
		return rc;
	rc = fs_run_each(&a, cat_one);
	if (fflush(stdout) != 0)
		rc = 1;
	return rc;
}

/* ---- du ---- */

struct du_sum {
	uint64_t bytes, files;
};

/* Adds the tree at path (a directory) to sum; prints each directory's line
 * (after its children) unless summarize. Returns 1 if anything failed. */
static int du_tree(struct strata *s, const char *path, bool summarize, struct du_sum *sum)
{
	struct strata_dirent *ents;
	struct du_sum mine = { 0, 0 };
	ssize_t n = fs_list(s, path, &ents);
	int bad = 0;

	if (n < 0) {
		fs_fail("read directory", path, (int)n);
		return 1;
	}
	for (ssize_t i = 0; i < n; i++) {
		char *child = fs_join(path, ents[i].name);
		struct strata_stat st;
		int rc;

		if (!child) {
			fs_fail("access", ents[i].name, -ENOMEM);
			bad = 1;
			continue;
		}
		if (ent_is_dir(s, child, &ents[i])) {
			bad |= du_tree(s, child, summarize, &mine);
		} else {
			rc = strata_lstat(s, child, &st);
			if (rc == 0) {
				if (S_ISREG(st.mode))
					mine.bytes += st.size;
				mine.files++;
			} else if (rc != -ENOENT) {
				fs_fail("access", child, rc);
				bad = 1;
			}
		}
		free(child);
	}
	free(ents);
	if (!summarize)
		printf("%llu\t%llu\t%s\n", (unsigned long long)mine.bytes,
		       (unsigned long long)mine.files, path);
	sum->bytes += mine.bytes;
	sum->files += mine.files;
	return bad;
}

static int du_one(struct strata *s, const struct fs_args *a, const char *path)
{
	struct du_sum sum = { 0, 0 };
	struct strata_stat st;
	bool summarize = a->flag['s'];
	int rc, bad;

	rc = strata_lstat(s, path, &st);
	if (rc) {
		fs_fail("access", path, rc);
		return 1;
	}
	if (!S_ISDIR(st.mode)) {
		printf("%llu\t1\t%s\n", (unsigned long long)(S_ISREG(st.mode) ? st.size : 0), path);
		return 0;
	}
	bad = du_tree(s, path, summarize, &sum);
	if (summarize)
		printf("%llu\t%llu\t%s\n", (unsigned long long)sum.bytes,
		       (unsigned long long)sum.files, path);
	return bad;
}

static int cmd_du(int argc, char **argv)
{
	struct fs_args a;
	char *root[] = { (char *)"/" };
	int rc = fs_parse(argc, argv, "s", false, &a);

	if (rc)
		return rc;
	if (a.npos == 0) {
		a.pos = root;
		a.npos = 1;
	}
	return fs_run_each(&a, du_one);
}

/* ---- setlayout, getlayout ---- */

static int cmd_setlayout(int argc, char **argv)
{
	const char *usage = "setlayout [--mgmt ADDR | --dir DIR] DIR [--chunk-size SIZE] [--stripe N]";
	struct strata_layout l;
	struct fs_args a;
	struct strata *s;
	uint64_t chunk = 0;
	int64_t stripe = -1;
	char *path;
	int rc;

	rc = fs_parse(argc, argv, "", true, &a);
	if (rc)
		return rc;
	if (a.npos != 1 || (!a.chunk_size && !a.stripe)) {
		cli_err("usage: strata %s", usage);
		return 2;
	}
	if (a.chunk_size && (parse_size(a.chunk_size, &chunk) || chunk < (64u << 10) ||
			     chunk > (64u << 20) || (chunk & (chunk - 1)))) {
		cli_err("setlayout: --chunk-size: '%s' is not a power of two from 64K to 64M",
			a.chunk_size);
		return 2;
	}
	if (a.stripe && (parse_i64(a.stripe, &stripe) || stripe < 0 || stripe > 256)) {
		cli_err("setlayout: --stripe: '%s' is not in 0..256 (0: as many chains as there are, up to 16)",
			a.stripe);
		return 2;
	}
	rc = fs_connect(&a, &s);
	if (rc)
		return rc;
	path = fs_norm(a.pos[0]);
	if (!path) {
		rc = -ENOMEM;
		goto out;
	}
	rc = strata_get_layout(s, path, &l);
	if (rc)
		goto out;
	if (a.chunk_size)
		l.chunk_size = (uint32_t)chunk;
	if (a.stripe)
		l.stripe = (uint32_t)stripe;
	rc = strata_set_layout(s, path, &l);
	if (rc == 0)
		printf("%s: chunk_size=%u stripe=%u\n", path, l.chunk_size, l.stripe);
out:
	if (rc)
		fs_fail("set the layout of", path ? path : a.pos[0], rc);
	free(path);
	strata_disconnect(s);
	return rc ? 1 : 0;
}

static int getlayout_one(struct strata *s, const struct fs_args *a, const char *path)
{
	struct strata_layout l;
	int rc = strata_get_layout(s, path, &l);

	(void)a;
	if (rc) {
		fs_fail("get the layout of", path, rc);
		return 1;
	}
	printf("%s: chunk_size=%u stripe=%u\n", path, l.chunk_size, l.stripe);
	return 0;
}

static int cmd_getlayout(int argc, char **argv)
{
	struct fs_args a;
	int rc = fs_parse(argc, argv, "", false, &a);

	if (rc || (rc = need_paths(&a, 1, "getlayout [--mgmt ADDR | --dir DIR] PATH...")))
		return rc;
	return fs_run_each(&a, getlayout_one);
}

/* ---- dispatch ---- */

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
} fs_cmds[] = {
	{ "ls", cmd_ls },
	{ "stat", cmd_stat },
	{ "mkdir", cmd_mkdir },
	{ "rm", cmd_rm },
	{ "chmod", cmd_chmod },
	{ "chown", cmd_chown },
	{ "mv", cmd_mv },
	{ "cat", cmd_cat },
	{ "put", fs_cmd_put },
	{ "get", fs_cmd_get },
	{ "cp", fs_cmd_cp },
	{ "du", cmd_du },
	{ "setlayout", cmd_setlayout },
	{ "getlayout", cmd_getlayout },
	{ "status", fs_cmd_status },
	{ "quota", fs_cmd_quota },
};

int cmd_fs_is(const char *name)
{
	for (size_t i = 0; i < sizeof(fs_cmds) / sizeof(fs_cmds[0]); i++)
		if (strcmp(fs_cmds[i].name, name) == 0)
			return 1;
	return 0;
}

int cmd_fs(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(fs_cmds) / sizeof(fs_cmds[0]); i++)
		if (strcmp(fs_cmds[i].name, argv[0]) == 0)
			return fs_cmds[i].fn(argc, argv);
	cli_err("unknown command '%s' (see 'strata --help')", argv[0]);
	return 2;
}
