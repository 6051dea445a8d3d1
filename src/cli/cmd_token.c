/*
 * strata keygen: a new cluster key in a 0600 file.
 * strata token create: a token signed with the cluster key (--key FILE),
 *   or, without --key, by mgmt, which records it in its registry.
 * strata token list / revoke ID: mgmt's registry (an admin token).
 *
 * docs/security.md says what a token carries and who checks what.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fs.h"
#include "common/config.h"
#include "common/fileio.h"
#include "common/token.h"
#include "strata/locate.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "strata/errors.h"

int cmd_keygen(int argc, char **argv)
{
	struct cluster_key k;
	int rc;

	if (argc != 2 || argv[1][0] == '-') {
		cli_err("usage: strata keygen FILE   (writes a new cluster key, mode 0600)");
		return 2;
	}
	rc = cluster_key_generate(&k);
	if (!rc)
		rc = cluster_key_save(argv[1], &k);
	memset(&k, 0, sizeof(k));
	if (rc) {
		cli_err("keygen: cannot write '%s': %s%s", argv[1], strata_strerror(rc),
			rc == -EEXIST ? " (a key is never overwritten)" : "");
		return 1;
	}
	return 0;
}

/* Writes text to path, mode 0600, not overwriting anything. */
int cli_write_secret(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	int rc;

	if (fd < 0)
		return -errno;
	rc = write_full(fd, text, strlen(text));
	if (!rc)
		rc = write_full(fd, "\n", 1);
	close(fd);
	if (rc)
		unlink(path);
	return rc;
}

/* "ns:1G" */
static int parse_mem_scope(const char *s, struct token_mem *m)
{
	const char *colon = strchr(s, ':');
	uint64_t cap;

	if (!colon || colon == s || (size_t)(colon - s) >= sizeof(m->ns) ||
	    parse_size(colon + 1, &cap))
		return -EINVAL;
	memcpy(m->ns, s, (size_t)(colon - s));
	m->ns[colon - s] = '\0';
	m->capacity = cap;
	return 0;
}

/* "never", or a duration such as "90s", "30m", "24h", "7d". */
static int parse_expiry(const char *s, int64_t *exp)
{
	char *end;
	long long n;
	int64_t mul = 1;

	if (!strcmp(s, "never")) {
		*exp = 0;
		return 0;
	}
	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno || end == s || n <= 0)
		return -EINVAL;
	if (!strcmp(end, "s") || !*end)
		mul = 1;
	else if (!strcmp(end, "m"))
		mul = 60;
	else if (!strcmp(end, "h"))
		mul = 3600;
	else if (!strcmp(end, "d"))
		mul = 86400;
	else
		return -EINVAL;
	if (n > INT64_MAX / mul / 2)
		return -EINVAL;
	*exp = (int64_t)time(NULL) + n * mul;
	return 0;
}

static int parse_gids(const char *s, struct token_claims *c)
{
	char buf[1024], *save = NULL;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	snprintf(buf, sizeof(buf), "%s", s);
	c->ngids = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int64_t v;

		if (c->ngids >= TOKEN_GIDS_MAX || parse_i64(t, &v) || v < 0 || v > UINT32_MAX)
			return -EINVAL;
		c->gids[c->ngids++] = (uint32_t)v;
	}
	return c->ngids ? 0 : -EINVAL;
}

enum { OPT_KEY = 256, OPT_TENANT, OPT_UID, OPT_GID, OPT_PATH, OPT_MEM, OPT_ADMIN, OPT_ROOT,
       OPT_CALLER, OPT_SQUASH, OPT_EXPIRES, OPT_OUT, OPT_MGMT, OPT_DIR, OPT_TOKEN };

static const struct option create_opts[] = {
	{ "key", required_argument, NULL, OPT_KEY },
	{ "tenant", required_argument, NULL, OPT_TENANT },
	{ "uid", required_argument, NULL, OPT_UID },
	{ "gid", required_argument, NULL, OPT_GID },
	{ "path", required_argument, NULL, OPT_PATH },
	{ "mem", required_argument, NULL, OPT_MEM },
	{ "admin", no_argument, NULL, OPT_ADMIN },
	{ "root", no_argument, NULL, OPT_ROOT },
	{ "caller", no_argument, NULL, OPT_CALLER },
	{ "squash", no_argument, NULL, OPT_SQUASH },
	{ "expires", required_argument, NULL, OPT_EXPIRES },
	{ "out", required_argument, NULL, OPT_OUT },
	{ "mgmt", required_argument, NULL, OPT_MGMT },
	{ "dir", required_argument, NULL, OPT_DIR },
	{ "token", required_argument, NULL, OPT_TOKEN },
	{ NULL, 0, NULL, 0 },
};

#define CREATE_USAGE \
	"usage: strata token create [--key FILE | --mgmt ADDR | --dir DIR] [--token T]\n" \
	"         [--tenant T] [--uid N] [--gid N[,N...]]\n" \
	"         [--path r:PREFIX | --path rw:PREFIX]... [--mem NS:SIZE]...\n" \
	"         [--admin] [--root] [--caller] [--squash] [--expires 24h|7d|never] [--out FILE]\n" \
	"       --key: sign offline with the cluster key; else mgmt signs and records it\n" \
	"       (the caller's token must be an admin one)"

/* Parses the claims of 'token create' into c. Returns 0 or 2 (reported). */
int cli_token_claims(int argc, char **argv, struct token_claims *c, struct cli_token_opts *o)
{
	bool expiry = false;
	char err[256];
	int opt;

	token_claims_init(c);
	memset(o, 0, sizeof(*o));
	opterr = 0;
	optind = 0;
	while ((opt = getopt_long(argc, argv, ":", create_opts, NULL)) != -1) {
		int64_t v;

		switch (opt) {
		case OPT_KEY:
			o->key = optarg;
			break;
		case OPT_OUT:
			o->out = optarg;
			break;
		case OPT_MGMT:
			o->mgmt = optarg;
			break;
		case OPT_DIR:
			o->dir = optarg;
			break;
		case OPT_TOKEN:
			o->token = optarg;
			break;
		case OPT_TENANT:
			if (strlen(optarg) >= sizeof(c->tenant)) {
				cli_err("token create: tenant '%s' is too long", optarg);
				return 2;
			}
			snprintf(c->tenant, sizeof(c->tenant), "%s", optarg);
			break;
		case OPT_UID:
			if (parse_i64(optarg, &v) || v < 0 || v > UINT32_MAX) {
				cli_err("token create: --uid '%s' is not 0..4294967295", optarg);
				return 2;
			}
			c->uid = (uint32_t)v;
			break;
		case OPT_GID:
			if (parse_gids(optarg, c)) {
				cli_err("token create: --gid '%s' is not a list of up to %d ids", optarg,
					TOKEN_GIDS_MAX);
				return 2;
			}
			break;
		case OPT_PATH:
			if (c->npaths >= TOKEN_PATHS_MAX || token_path_parse(optarg, &c->paths[c->npaths])) {
				cli_err("token create: --path '%s' is not r:PREFIX or rw:PREFIX with a normalized absolute PREFIX (at most %d)",
					optarg, TOKEN_PATHS_MAX);
				return 2;
			}
			c->npaths++;
			break;
		case OPT_MEM:
			if (c->nmems >= TOKEN_MEMS_MAX || parse_mem_scope(optarg, &c->mems[c->nmems])) {
				cli_err("token create: --mem '%s' is not NAMESPACE:SIZE (at most %d)", optarg,
					TOKEN_MEMS_MAX);
				return 2;
			}
			c->nmems++;
			break;
		case OPT_ADMIN:
			c->flags |= TOKEN_F_ADMIN;
			break;
		case OPT_ROOT:
			c->flags |= TOKEN_F_ROOT;
			break;
		case OPT_CALLER:
			c->flags |= TOKEN_F_CALLER;
			break;
		case OPT_SQUASH:
			c->flags |= TOKEN_F_SQUASH;
			break;
		case OPT_EXPIRES:
			if (parse_expiry(optarg, &c->exp)) {
				cli_err("token create: --expires '%s' is not a duration (90s, 30m, 24h, 7d) or 'never'",
					optarg);
				return 2;
			}
			expiry = true;
			break;
		case ':':
			cli_err("token create: option '%s' needs a value\n%s", argv[optind - 1], CREATE_USAGE);
			return 2;
		default:
			cli_err("token create: unknown option '%s'\n%s", argv[optind - 1], CREATE_USAGE);
			return 2;
		}
	}
	if (optind != argc) {
		cli_err("token create: unexpected argument '%s'\n%s", argv[optind], CREATE_USAGE);
		return 2;
	}
	if (!expiry) {
		cli_err("token create: say when the token expires: --expires 24h, 7d, ... or never");
		return 2;
	}
	if (token_claims_check(c, err, sizeof(err))) {
		cli_err("token create: %s", err);
		return 2;
	}
	return 0;
}

/* Signs c with the key in keyfile: *text is malloc'd. 0 or 1 (reported). */
static int sign_offline(const char *keyfile, const struct token_claims *c, char **text)
{
	struct cluster_key k;
	char err[512];
	int rc = cluster_key_load(keyfile, &k, err, sizeof(err));

	if (rc) {
		cli_err("token create: %s", err);
		return 1;
	}
	rc = token_sign(&k, c, text);
	memset(&k, 0, sizeof(k));
	if (rc) {
		cli_err("token create: %s", strata_strerror(rc));
		return 1;
	}
	return 0;
}

/* What a registry call's failure means to the person who made it. */
static void registry_err(const char *cmd, int rc)
{
	if (rc == -EACCES)
		cli_err("%s: %s: managing tokens needs an admin token (--token, $STRATA_TOKEN, or the admin.token of --dir)",
			cmd, strata_strerror(rc));
	else if (rc == -ENOKEY)
		cli_err("%s: mgmt has no cluster key (node.key_file), so it cannot sign tokens", cmd);
	else
		cli_err("%s: %s", cmd, strata_strerror(rc));
}

/* The mgmt address and an RPC client presenting the caller's token. 0, or
 * the exit status after reporting why not. */
static int registry_client(const char *cmd, const struct cli_token_opts *o, char *addr,
			   size_t len, struct rpc_client **cl)
{
	struct fs_args a = { .cmd = cmd, .mgmt = o->mgmt, .dir = o->dir, .token = o->token };

	return fs_mgmt_client(&a, "strata-token", 10000, addr, len, cl);
}

/* mgmt signs c and records it: *text is malloc'd. 0 or the exit status
 * (reported). */
static int sign_by_mgmt(const struct cli_token_opts *o, const struct token_claims *c,
			char **text)
{
	struct rpc_client *cl;
	struct bbuf body;
	struct proto_sync s = { .timeout_ms = 10000, .body = &body };
	struct mg_token rep;
	char addr[256], *json = NULL;
	int rc = registry_client("token create", o, addr, sizeof(addr), &cl);

	if (rc)
		return rc;
	rc = token_claims_to_json(c, &json);
	if (rc) {
		rpc_client_free(cl);
		cli_err("token create: %s", strata_strerror(rc));
		return 1;
	}
	bbuf_init(&body);
	rc = mg_token_create_call_sync(cl, addr, &(struct mg_token_create){ pstr_c(json) }, &s,
				       &rep);
	free(json);
	rpc_client_free(cl);
	if (!rc && !(*text = strndup(rep.token.p, rep.token.len)))
		rc = -ENOMEM;
	if (!rc)
		mg_token_release(&rep);
	if (body.buf)
		memset(body.buf, 0, body.len);
	bbuf_release(&body);
	if (rc) {
		registry_err("token create", rc);
		return 1;
	}
	return 0;
}

static int token_create(int argc, char **argv)
{
	struct token_claims c;
	struct cli_token_opts o;
	char *text = NULL;
	int rc = cli_token_claims(argc, argv, &c, &o);

	if (rc)
		return rc;
	if (o.key && (o.mgmt || o.dir || o.token)) {
		cli_err("token create: --key signs offline; --mgmt, --dir and --token ask mgmt to sign: give one or the other\n%s",
			CREATE_USAGE);
		return 2;
	}
	rc = o.key ? sign_offline(o.key, &c, &text) : sign_by_mgmt(&o, &c, &text);
	if (rc)
		return rc;
	if (o.out) {
		rc = cli_write_secret(o.out, text);
		if (rc)
			cli_err("token create: cannot write '%s': %s", o.out, strata_strerror(rc));
		else
			printf("token %s for tenant '%s' written to %s\n", c.id, c.tenant, o.out);
	} else {
		printf("%s\n", text);
	}
	memset(text, 0, strlen(text));
	free(text);
	return rc ? 1 : 0;
}

/* --mgmt, --dir and --token of 'token list' and 'token revoke'; the
 * positional arguments are left in pos. 0 or 2 (reported). */
static int registry_args(int argc, char **argv, struct cli_token_opts *o, char ***pos, int *npos)
{
	struct fs_args a;
	int rc = fs_parse(argc, argv, "", false, &a);

	memset(o, 0, sizeof(*o));
	if (rc)
		return rc;
	o->mgmt = a.mgmt;
	o->dir = a.dir;
	o->token = a.token;
	*pos = a.pos;
	*npos = a.npos;
	return 0;
}

static void fmt_time(int64_t t, char *buf, size_t len)
{
	time_t tt = (time_t)t;
	struct tm tm;

	if (!t || !gmtime_r(&tt, &tm))
		snprintf(buf, len, "never");
	else
		strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int token_list(int argc, char **argv)
{
	struct cli_token_opts o;
	struct rpc_client *cl;
	struct bbuf body;
	struct proto_sync s = { .timeout_ms = 10000, .body = &body };
	struct mg_token_list rep;
	char addr[256], **pos;
	int64_t now = (int64_t)time(NULL);
	int npos, rc = registry_args(argc, argv, &o, &pos, &npos);

	if (rc)
		return rc;
	if (npos) {
		cli_err("usage: strata token list [--mgmt ADDR | --dir DIR] [--token T]");
		return 2;
	}
	if ((rc = registry_client("token list", &o, addr, sizeof(addr), &cl)))
		return rc;
	bbuf_init(&body);
	rc = mg_token_list_call_sync(cl, addr, &(struct proto_void){ 0 }, &s, &rep);
	rpc_client_free(cl);
	if (rc) {
		bbuf_release(&body);
		registry_err("token list", rc);
		return 1;
	}
	printf("%-16s  %-20s  %-5s  %-20s  %-20s  %s\n", "ID", "TENANT", "ADMIN", "CREATED",
	       "EXPIRES", "STATE");
	for (uint32_t i = 0; i < rep.tokens_n; i++) {
		const struct mg_token_info *t = &rep.tokens[i];
		char created[32], exp[32];

		fmt_time(t->created, created, sizeof(created));
		fmt_time(t->exp, exp, sizeof(exp));
		printf("%-16.*s  %-20.*s  %-5s  %-20s  %-20s  %s\n", (int)t->id.len, t->id.p,
		       (int)t->tenant.len, t->tenant.p, t->admin ? "yes" : "no", created, exp,
		       t->revoked ? "revoked" : t->exp && t->exp <= now ? "expired" : "active");
	}
	if (rep.total > rep.tokens_n)
		printf("(%u more not shown)\n", rep.total - rep.tokens_n);
	mg_token_list_release(&rep);
	bbuf_release(&body);
	return 0;
}

/* The id and expiry of a token given as its text or a file holding it
 * (one signed offline, which mgmt's registry does not know): read, not
 * verified, since only its id is revoked. 0 or 2 (reported). */
static int offline_token(const char *arg, struct token_claims *c)
{
	char *text = malloc(TOKEN_TEXT_MAX + 2), err[256];
	uint8_t secret[TOKEN_SECRET_LEN];
	const char *sp;
	size_t sl;
	int rc = text ? strata_find_token(arg, NULL, NULL, text, TOKEN_TEXT_MAX + 2) : -ENOMEM;

	if (rc) {
		cli_err("token revoke: '%s' is neither a token id (%d lowercase hex digits; 'strata token list' shows them) nor a token or a token file: %s",
			arg, TOKEN_ID_LEN, strata_strerror(rc));
	} else if (token_split(text, &sp, &sl, secret, err, sizeof(err)) ||
		   token_parse_claims(sp, sl, c, err, sizeof(err))) {
		cli_err("token revoke: '%s' is not a token id nor a token: %s", arg, err);
		rc = -EINVAL;
	}
	memset(secret, 0, sizeof(secret));
	free(text);
	return rc ? 2 : 0;
}

static int token_revoke(int argc, char **argv)
{
	struct cli_token_opts o;
	struct rpc_client *cl;
	struct proto_sync s = { .timeout_ms = 10000 };
	struct token_claims c;
	struct mg_token_id rq = { 0 };
	char addr[256], **pos;
	int npos, rc = registry_args(argc, argv, &o, &pos, &npos);

	if (rc)
		return rc;
	if (npos != 1) {
		cli_err("usage: strata token revoke ID|TOKEN|FILE [--mgmt ADDR | --dir DIR] [--token T]");
		return 2;
	}
	/* An id: a token of the registry. A token (text or file): also one
	 * signed offline, revoked until it expires. */
	if (token_id_ok(pos[0])) {
		rq.id = pstr_c(pos[0]);
	} else {
		if ((rc = offline_token(pos[0], &c)))
			return rc;
		rq.id = pstr_c(c.id);
		rq.until = c.exp ? c.exp : INT64_MAX;
	}
	if ((rc = registry_client("token revoke", &o, addr, sizeof(addr), &cl)))
		return rc;
	rc = mg_token_revoke_call_sync(cl, addr, &rq, &s, &(struct proto_void){ 0 });
	rpc_client_free(cl);
	if (rc == -ENOENT) {
		cli_err("token revoke: no token %s in mgmt's registry; to revoke a token signed offline, give the token or its file instead of its id",
			pos[0]);
		return 1;
	}
	if (rc) {
		registry_err("token revoke", rc);
		return 1;
	}
	printf("token %.*s revoked: every daemon refuses it from its next cluster map\n",
	       (int)rq.id.len, rq.id.p);
	return 0;
}

int cmd_token(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "create"))
		return token_create(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "list"))
		return token_list(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "revoke"))
		return token_revoke(argc - 1, argv + 1);
	cli_err("usage: strata token create ... | token list | token revoke ID   (see 'strata token create --help')");
	return 2;
}
