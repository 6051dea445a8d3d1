/*
 * File helpers built only on libstrata's public API (fsutil.h), shared by
 * the checkpoint and packed-dataset modules.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "client/fsutil.h"
#include "strata/errors.h"

int fsu_join(char *out, size_t len, const char *a, const char *b)
{
	int n = snprintf(out, len, "%s/%s", a, b);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int fsu_rmtree(struct strata *s, const char *path)
{
	struct strata_stat st;
	struct strata_dir *d = NULL;
	struct strata_dirent ent;
	char sub[FSU_PATH_MAX];
	int rc;

	rc = strata_lstat(s, path, &st);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	if (!S_ISDIR(st.mode)) {
		rc = strata_unlink(s, path);
		return rc == -ENOENT ? 0 : rc;
	}
	rc = strata_opendir(s, path, &d);
	if (rc)
		return rc == -ENOENT ? 0 : rc;
	while ((rc = strata_readdir(d, &ent)) == 1) {
		rc = fsu_join(sub, sizeof(sub), path, ent.name);
		if (!rc)
			rc = fsu_rmtree(s, sub);
		if (rc)
			break;
	}
	strata_closedir(d);
	if (rc < 0)
		return rc;
	rc = strata_rmdir(s, path);
	return rc == -ENOENT ? 0 : rc;
}

int fsu_write_file(struct strata *s, const char *path, const void *buf, size_t len)
{
	struct strata_file *f;
	ssize_t w;
	int rc;

	rc = strata_open(s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC, 0644, &f);
	if (rc)
		return rc;
	w = len ? strata_pwrite(f, buf, len, 0) : 0;
	rc = strata_close(f);
	if (w < 0)
		return (int)w;
	return rc;
}

int fsu_read_file(struct strata *s, const char *path, uint64_t max, char **out, size_t *outlen)
{
	struct strata_file *f;
	struct strata_stat st;
	char *buf = NULL;
	size_t done = 0;
	int rc;

	rc = strata_open(s, path, STRATA_O_RDONLY, 0, &f);
	if (rc)
		return rc;
	rc = strata_fstat(f, &st);
	if (rc)
		goto out;
	if (st.size > max) {
		rc = -EFBIG;
		goto out;
	}
	buf = malloc(st.size + 1);
	if (!buf) {
		rc = -ENOMEM;
		goto out;
	}
	while (done < st.size) {
		ssize_t r = strata_pread(f, buf + done, st.size - done, done);

		if (r < 0) {
			rc = (int)r;
			goto out;
		}
		if (r == 0)
			break;
		done += (size_t)r;
	}
	buf[done] = '\0';
	*out = buf;
	if (outlen)
		*outlen = done;
	buf = NULL;
out:
	free(buf);
	strata_close(f);
	return rc;
}

json_t *fsu_read_json(struct strata *s, const char *path, uint64_t max, int *err)
{
	char *text = NULL;
	size_t len = 0;
	json_t *j;

	*err = fsu_read_file(s, path, max, &text, &len);
	if (*err)
		return NULL;
	j = json_loadb(text, len, 0, NULL);
	free(text);
	if (!j)
		*err = STRATA_EBADMSG;
	return j;
}
