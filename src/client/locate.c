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
