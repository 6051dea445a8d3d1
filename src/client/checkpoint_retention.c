/*
 * Checkpoint retention: listing the committed checkpoints of a directory
 * (newest first), keeping the last N, finding the latest, and removing
 * what interrupted saves left behind without ever removing the only copy
 * of a checkpoint.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "client/checkpoint_int.h"
#include "client/fsutil.h"
#include "common/clock.h"
#include "strata/strata.h"

struct ck_entry {
	char *name;
	int64_t created;
};

static int ck_entry_cmp(const void *a, const void *b)
{
	const struct ck_entry *x = a, *y = b;

	if (x->created != y->created)
		return x->created > y->created ? -1 : 1;	/* newest first */
	return strcmp(y->name, x->name);
}

/* The committed checkpoints of dir, newest first. */
static ssize_t ck_list(struct strata *s, const char *dir, struct ck_entry **out)
{
	struct strata_dir *d;
	struct strata_dirent ent;
	struct ck_entry *v = NULL;
	size_t n = 0, cap = 0;
	char mpath[CK_PATH_MAX];
	int rc;

	rc = strata_opendir(s, dir, &d);
	if (rc)
		return rc;
	while ((rc = strata_readdir(d, &ent)) == 1) {
		json_t *man;
		const char *fmt;
		int err;

		if (!S_ISDIR(ent.mode) || strstr(ent.name, ".tmp-") || strstr(ent.name, ".old-"))
			continue;
		if (snprintf(mpath, sizeof(mpath), "%s/%s/manifest.json", strcmp(dir, "/") ? dir : "",
			     ent.name) >= (int)sizeof(mpath))
			continue;
		man = fsu_read_json(s, mpath, CK_JSON_MAX, &err);
		if (!man)
			continue;
		fmt = json_string_value(json_object_get(man, "format"));
		if (fmt && strcmp(fmt, CK_FORMAT) == 0) {
			if (n == cap) {
				struct ck_entry *nv;

				cap = cap ? cap * 2 : 16;
				nv = realloc(v, cap * sizeof(*v));
				if (!nv) {
					json_decref(man);
					rc = -ENOMEM;
					break;
				}
				v = nv;
			}
			v[n].name = strdup(ent.name);
			v[n].created = json_integer_value(json_object_get(man, "created_ns"));
			if (v[n].name)
				n++;
		}
		json_decref(man);
	}
	strata_closedir(d);
	if (rc < 0) {
		for (size_t i = 0; i < n; i++)
			free(v[i].name);
		free(v);
		return rc;
	}
	if (n)
		qsort(v, n, sizeof(*v), ck_entry_cmp);
	*out = v;
	return (ssize_t)n;
}

int strata_ckpt_prune(struct strata *s, const char *dir, uint32_t keep_last)
{
	struct ck_entry *v = NULL;
	char path[CK_PATH_MAX];
	ssize_t n;
	int rc = 0, removed = 0;

	if (!s || !dir || !keep_last)
		return -EINVAL;
	n = ck_list(s, dir, &v);
	if (n < 0)
		return (int)n;
	for (ssize_t i = keep_last; i < n && !rc; i++) {
		rc = fsu_join(path, sizeof(path), strcmp(dir, "/") ? dir : "", v[i].name);
		if (!rc)
			rc = fsu_rmtree(s, path);
		if (!rc)
			removed++;
	}
	for (ssize_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	return rc ? rc : removed;
}

/* The newest change time (ns) of directory path and its entries. */
static int ck_newest_mtime(struct strata *s, const char *path, int64_t *out)
{
	struct strata_stat st;
	struct strata_dir *d;
	struct strata_dirent ent;
	char sub[CK_PATH_MAX];
	int rc = strata_lstat(s, path, &st);

	if (rc)
		return rc;
	*out = st.mtime_ns;
	rc = strata_opendir(s, path, &d);
	if (rc)
		return rc;
	while ((rc = strata_readdir(d, &ent)) == 1) {
		if (fsu_join(sub, sizeof(sub), path, ent.name) == 0 &&
		    strata_lstat(s, sub, &st) == 0 && st.mtime_ns > *out)
			*out = st.mtime_ns;
	}
	strata_closedir(d);
	return rc < 0 ? rc : 0;
}

/* Whether partial entry name of dir may be the only copy of something:
 * a commit that died between its two renames (NAME -> NAME.old-TAG, then
 * NAME.tmp-TAG -> NAME) leaves no NAME, the previous checkpoint in
 * NAME.old-TAG and the new, complete one in NAME.tmp-TAG. Also true when
 * that cannot be told. */
static bool ck_may_be_only_copy(struct strata *s, const char *dir, const char *name)
{
	const char *t = strstr(name, ".tmp-"), *o = strstr(name, ".old-");
	bool is_tmp = t && (!o || t < o);
	const char *cut = is_tmp ? t : o;
	struct strata_stat st;
	char path[CK_PATH_MAX];
	int n, rc;

	if (!cut)
		return true;
	n = snprintf(path, sizeof(path), "%s/%.*s", strcmp(dir, "/") ? dir : "",
		     (int)(cut - name), name);
	if (n < 0 || n >= (int)sizeof(path))
		return true;
	rc = strata_lstat(s, path, &st);
	if (rc != -ENOENT)
		return rc != 0;		/* NAME is there: nothing depends on this */
	if (!is_tmp)
		return true;		/* NAME.old-TAG without NAME */
	/* NAME.tmp-TAG without NAME: the first save of NAME that died,
	 * unless its commit had moved the old one to NAME.old-TAG. */
	n = snprintf(path, sizeof(path), "%s/%.*s.old-%s", strcmp(dir, "/") ? dir : "",
		     (int)(cut - name), name, cut + 5);
	if (n < 0 || n >= (int)sizeof(path))
		return true;
	rc = strata_lstat(s, path, &st);
	return rc != -ENOENT;
}

int strata_ckpt_clean_partial(struct strata *s, const char *dir, uint32_t older_than_s)
{
	struct strata_dir *d;
	struct strata_dirent ent;
	int64_t now;
	char **names = NULL, path[CK_PATH_MAX], dead[CK_PATH_MAX + 64];
	size_t n = 0, cap = 0;
	int rc, removed = 0;

	if (!s || !dir)
		return -EINVAL;
	rc = strata_opendir(s, dir, &d);
	if (rc)
		return rc;
	/* Names first: removing while listing would disturb the listing. */
	while ((rc = strata_readdir(d, &ent)) == 1) {
		if (!S_ISDIR(ent.mode) || (!strstr(ent.name, ".tmp-") && !strstr(ent.name, ".old-")))
			continue;
		if (n == cap) {
			char **nv = realloc(names, (cap ? cap * 2 : 8) * sizeof(*nv));

			if (!nv) {
				rc = -ENOMEM;
				break;
			}
			names = nv;
			cap = cap ? cap * 2 : 8;
		}
		if (!(names[n] = strdup(ent.name))) {
			rc = -ENOMEM;
			break;
		}
		n++;
	}
	strata_closedir(d);
	now = now_ns();
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		int64_t newest = 0;
		int err = fsu_join(path, sizeof(path), strcmp(dir, "/") ? dir : "", names[i]);

		if (!err)
			err = ck_newest_mtime(s, path, &newest);
		/* Gone (committed meanwhile), or not known to be quiet: kept. */
		if (err)
			continue;
		if (now - newest < (int64_t)older_than_s * 1000000000LL)
			continue;
		if (ck_may_be_only_copy(s, dir, names[i]))
			continue;
		/* Out of the way first: a commit racing us fails on the missing
		 * directory instead of committing a half-removed one. */
		if (snprintf(dead, sizeof(dead), "%s.tmp-removing-%ld-%lld", path, (long)getpid(),
			     (long long)(now % 1000000000)) >= (int)sizeof(dead) ||
		    strata_rename(s, path, dead, STRATA_RENAME_NOREPLACE))
			continue;
		rc = fsu_rmtree(s, dead);
		if (!rc)
			removed++;
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return rc < 0 ? rc : removed;
}

ssize_t strata_ckpt_latest(struct strata *s, const char *dir, char *buf, size_t len)
{
	struct ck_entry *v = NULL;
	ssize_t n, rc;

	if (!s || !dir || !buf || !len)
		return -EINVAL;
	n = ck_list(s, dir, &v);
	if (n < 0)
		return n;
	if (n == 0)
		return -ENOENT;
	rc = snprintf(buf, len, "%s/%s", strcmp(dir, "/") ? dir : "", v[0].name);
	if (rc >= (ssize_t)len)
		rc = -ENAMETOOLONG;
	for (ssize_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
	return rc;
}
