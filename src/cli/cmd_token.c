/*
 * strata keygen: a new cluster key in a 0600 file.
 * strata token create: a token signed with the cluster key (--key FILE).
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
#include "common/config.h"
#include "common/fileio.h"
#include "common/token.h"
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

/* "rw:/data" or "r:/models". */
static int parse_path_scope(const char *s, struct token_path *p)
{
	const char *colon = strchr(s, ':');

	if (!colon)
		return -EINVAL;
	if (colon - s == 1 && s[0] == 'r')
		p->write = false;
	else if (colon - s == 2 && s[0] == 'r' && s[1] == 'w')
		p->write = true;
	else
		return -EINVAL;
	if (strlen(colon + 1) >= sizeof(p->prefix))
		return -EINVAL;
	snprintf(p->prefix, sizeof(p->prefix), "%s", colon + 1);
	return 0;
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
       OPT_CALLER, OPT_SQUASH, OPT_EXPIRES, OPT_OUT };

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
	{ NULL, 0, NULL, 0 },
};

#define CREATE_USAGE \
	"usage: strata token create --key FILE [--tenant T] [--uid N] [--gid N[,N...]]\n" \
	"         [--path r:PREFIX | --path rw:PREFIX]... [--mem NS:SIZE]...\n" \
	"         [--admin] [--root] [--caller] [--squash] [--expires 24h|7d|never] [--out FILE]"

/* Parses the claims of 'token create' into c. Returns 0 or 2 (reported). */
int cli_token_claims(int argc, char **argv, struct token_claims *c, const char **key,
		     const char **out)
{
	bool expiry = false;
	char err[256];
	int opt;

	token_claims_init(c);
	*key = *out = NULL;
	opterr = 0;
	optind = 0;
	while ((opt = getopt_long(argc, argv, ":", create_opts, NULL)) != -1) {
		int64_t v;

		switch (opt) {
		case OPT_KEY:
			*key = optarg;
			break;
		case OPT_OUT:
			*out = optarg;
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
			if (c->npaths >= TOKEN_PATHS_MAX || parse_path_scope(optarg, &c->paths[c->npaths])) {
				cli_err("token create: --path '%s' is not r:PREFIX or rw:PREFIX (at most %d)",
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

static int token_create(int argc, char **argv)
{
	struct token_claims c;
	struct cluster_key k;
	const char *keyfile, *out;
	char err[512], *text = NULL;
	int rc = cli_token_claims(argc, argv, &c, &keyfile, &out);

	if (rc)
		return rc;
	if (!keyfile) {
		cli_err("token create: --key FILE (the cluster key) is required\n%s", CREATE_USAGE);
		return 2;
	}
	rc = cluster_key_load(keyfile, &k, err, sizeof(err));
	if (rc) {
		cli_err("token create: %s", err);
		return 1;
	}
	rc = token_sign(&k, &c, &text);
	memset(&k, 0, sizeof(k));
	if (rc) {
		cli_err("token create: %s", strata_strerror(rc));
		return 1;
	}
	if (out) {
		rc = cli_write_secret(out, text);
		if (rc)
			cli_err("token create: cannot write '%s': %s", out, strata_strerror(rc));
		else
			printf("token %s for tenant '%s' written to %s\n", c.id, c.tenant, out);
	} else {
		printf("%s\n", text);
	}
	free(text);
	return rc ? 1 : 0;
}

int cmd_token(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "create"))
		return token_create(argc - 1, argv + 1);
	cli_err("usage: strata token create ...   (see 'strata token create --help')");
	return 2;
}
