/* The rule that finds a cluster's mgmt address (include/strata/locate.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "strata/errors.h"
#include "strata/locate.h"

static int copy_out(const char *s, char *out, size_t len)
{
	size_t n = strlen(s);

	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(out, s, n + 1);
	return 0;
}

/* The "mgmt" of DIR/cluster.json, written by 'strata local up'. */
static int from_cluster_json(const char *dir, char *out, size_t len)
{
	char path[PATH_MAX];
	const char *m;
	json_t *j;
	FILE *f;
	int rc;

	if (snprintf(path, sizeof(path), "%s/cluster.json", dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	/* Opened here so a missing file is told apart from a bad one. */
	f = fopen(path, "re");
	if (!f)
		return -errno;
	j = json_loadf(f, 0, NULL);
	fclose(f);
	m = json_string_value(json_object_get(j, "mgmt"));
	rc = m && *m ? copy_out(m, out, len) : STRATA_EBADMSG;
	json_decref(j);
	return rc;
}

static int is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* NULL and "" both mean "not given". */
static bool given(const char *s)
{
	return s && s[0] != '\0';
}

int strata_find_mgmt(const char *mgmt, const char *dir, char *out, size_t len)
{
	const char *env = getenv("STRATA_MGMT");
	const char *spec;

	if (!out || !len)
		return -EINVAL;
	out[0] = '\0';
	if (given(mgmt))
		spec = mgmt;
	else if (given(dir))
		return from_cluster_json(dir, out, len);
	else if (given(env))
		spec = env;
	else
		return -EDESTADDRREQ;
	if (is_dir(spec))
		return from_cluster_json(spec, out, len);
	return copy_out(spec, out, len);
}

#define TOKEN_PREFIX "st1."

/* A token file: only its owner may read it (a token is a password). */
static int read_token_file(const char *path, char *out, size_t len)
{
	struct stat st;
	size_t n;
	FILE *f = fopen(path, "re");

	if (!f)
		return -errno;
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || (st.st_mode & 077)) {
		fclose(f);
		return -EPERM;
	}
	n = fread(out, 1, len - 1, f);
	fclose(f);
	if (n == len - 1)
		return -ENAMETOOLONG;
	out[n] = '\0';
	while (n && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
		out[--n] = '\0';
	return 0;
}

/* Token text as given, or the file it names. */
static int token_spec(const char *spec, char *out, size_t len)
{
	if (!strncmp(spec, TOKEN_PREFIX, strlen(TOKEN_PREFIX)))
		return copy_out(spec, out, len);
	return read_token_file(spec, out, len);
}

int strata_find_token(const char *token, const char *mgmt, const char *dir, char *out,
		      size_t len)
{
	const char *env = getenv("STRATA_TOKEN"), *env_file = getenv("STRATA_TOKEN_FILE");
	const char *cluster_dir = NULL;
	char path[PATH_MAX];
	int rc;

	if (!out || !len)
		return -EINVAL;
	out[0] = '\0';
	if (given(token))
		return token_spec(token, out, len);
	if (given(env))
		return token_spec(env, out, len);
	if (given(env_file))
		return read_token_file(env_file, out, len);
	if (given(mgmt))
		cluster_dir = is_dir(mgmt) ? mgmt : NULL;
	else if (given(dir))
		cluster_dir = dir;
	else if (given(getenv("STRATA_MGMT")) && is_dir(getenv("STRATA_MGMT")))
		cluster_dir = getenv("STRATA_MGMT");
	if (!cluster_dir)
		return 0;
	if (snprintf(path, sizeof(path), "%s/admin.token", cluster_dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	rc = read_token_file(path, out, len);
	return rc == -ENOENT ? 0 : rc;
}
