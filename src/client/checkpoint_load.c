/*
 * Loading a checkpoint: the manifest parsed once, tensors read by several
 * threads straight into the caller's buffers (ck_read_data), each checked
 * against its CRC32C, combined from its pieces' as they land.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client/checkpoint_int.h"
#include "client/fsutil.h"
#include "common/crc32c.h"
#include "strata/strata.h"

uint32_t strata_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return crc32c(crc, buf, len);
}

void strata_ckpt_close(struct strata_ckpt *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->n; i++) {
		free(c->t[i].name);
		free(c->t[i].dtype);
	}
	for (uint32_t r = 0; r < c->world; r++) {
		if (c->open && c->open[r])
			strata_close(c->open[r]);
		if (c->meta)
			free(c->meta[r]);
		if (c->files)
			free(c->files[r]);
	}
	free(c->open);
	free(c->chunk);
	free(c->meta);
	free(c->files);
	free(c->t);
	free(c->path);
	free(c);
}

static int ck_parse_tensor(json_t *v, uint32_t world, struct ck_tensor *t)
{
	json_t *shape = json_object_get(v, "shape"), *d;
	const char *name = json_string_value(json_object_get(v, "name"));
	const char *dtype = json_string_value(json_object_get(v, "dtype"));
	json_int_t rank = json_integer_value(json_object_get(v, "rank"));
	json_int_t off = json_integer_value(json_object_get(v, "offset"));
	json_int_t len = json_integer_value(json_object_get(v, "length"));
	size_t i;

	if (!name || !dtype || !json_is_array(shape) ||
	    json_array_size(shape) > STRATA_CKPT_MAX_DIMS || rank < 0 || rank >= world ||
	    off < 0 || len < 0)
		return STRATA_EBADMSG;
	t->name = strdup(name);
	t->dtype = strdup(dtype);
	if (!t->name || !t->dtype)
		return -ENOMEM;
	t->rank = (uint32_t)rank;
	t->off = (uint64_t)off;
	t->len = (uint64_t)len;
	t->crc = (uint32_t)json_integer_value(json_object_get(v, "crc32c"));
	t->ndim = (uint32_t)json_array_size(shape);
	json_array_foreach(shape, i, d)
		t->shape[i] = json_integer_value(d);
	return 0;
}

static int ck_parse(struct strata_ckpt *c, json_t *man)
{
	json_t *shards = json_object_get(man, "shards"), *tensors = json_object_get(man, "tensors");
	json_int_t world = json_integer_value(json_object_get(man, "world_size"));
	const char *fmt = json_string_value(json_object_get(man, "format"));
	json_t *v;
	size_t i;
	int rc;

	if (!fmt || strcmp(fmt, CK_FORMAT) != 0 ||
	    json_integer_value(json_object_get(man, "version")) != 1 || world < 1 ||
	    world > 1000000 || !json_is_array(shards) || !json_is_array(tensors))
		return STRATA_EBADMSG;
	c->world = (uint32_t)world;
	c->meta = calloc(c->world, sizeof(*c->meta));
	c->files = calloc(c->world, sizeof(*c->files));
	c->open = calloc(c->world, sizeof(*c->open));
	c->chunk = calloc(c->world, sizeof(*c->chunk));
	c->t = calloc(json_array_size(tensors) + 1, sizeof(*c->t));
	if (!c->meta || !c->files || !c->open || !c->chunk || !c->t)
		return -ENOMEM;
	json_array_foreach(shards, i, v) {
		json_int_t r = json_integer_value(json_object_get(v, "rank"));
		const char *file = json_string_value(json_object_get(v, "file"));
		json_t *meta = json_object_get(v, "meta");

		if (r < 0 || r >= world || !file || strchr(file, '/') || c->files[r])
			return STRATA_EBADMSG;
		c->files[r] = strdup(file);
		if (!c->files[r])
			return -ENOMEM;
		if (meta && !json_is_null(meta)) {
			c->meta[r] = json_dumps(meta, JSON_COMPACT | JSON_ENCODE_ANY);
			if (!c->meta[r])
				return -ENOMEM;
		}
	}
	for (uint32_t r = 0; r < c->world; r++)
		if (!c->files[r])
			return STRATA_EBADMSG;
	json_array_foreach(tensors, i, v) {
		rc = ck_parse_tensor(v, c->world, &c->t[c->n]);
		c->n++;
		if (rc)
			return rc;
	}
	return 0;
}

int strata_ckpt_open(struct strata *s, const char *path, struct strata_ckpt **out)
{
	struct strata_ckpt *c;
	char mpath[CK_PATH_MAX];
	json_t *man;
	int rc;

	if (!s || !path || !out)
		return -EINVAL;
	rc = fsu_join(mpath, sizeof(mpath), path, "manifest.json");
	if (rc)
		return rc;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->s = s;
	c->path = strdup(path);
	if (!c->path) {
		free(c);
		return -ENOMEM;
	}
	man = fsu_read_json(s, mpath, CK_JSON_MAX, &rc);
	if (man) {
		rc = ck_parse(c, man);
		json_decref(man);
	}
	if (rc) {
		strata_ckpt_close(c);
		return rc;
	}
	*out = c;
	return 0;
}

size_t strata_ckpt_count(const struct strata_ckpt *c)
{
	return c ? c->n : 0;
}

uint32_t strata_ckpt_world_size(const struct strata_ckpt *c)
{
	return c ? c->world : 0;
}

int strata_ckpt_info(const struct strata_ckpt *c, size_t i, struct strata_ckpt_info *out)
{
	const struct ck_tensor *t;

	if (!c || !out || i >= c->n)
		return -EINVAL;
	t = &c->t[i];
	memset(out, 0, sizeof(*out));
	out->name = t->name;
	out->dtype = t->dtype;
	out->rank = t->rank;
	out->ndim = t->ndim;
	memcpy(out->shape, t->shape, sizeof(out->shape));
	out->len = t->len;
	out->crc32c = t->crc;
	return 0;
}

ssize_t strata_ckpt_find(const struct strata_ckpt *c, const char *name, int rank)
{
	if (!c || !name)
		return -EINVAL;
	for (size_t i = 0; i < c->n; i++)
		if ((rank < 0 || c->t[i].rank == (uint32_t)rank) && strcmp(c->t[i].name, name) == 0)
			return (ssize_t)i;
	return -ENOENT;
}

const char *strata_ckpt_meta(const struct strata_ckpt *c, uint32_t rank)
{
	return c && rank < c->world ? c->meta[rank] : NULL;
}

/* Opens rank's shard file on first use and learns its chunk size (the
 * reads are cut at its chunk boundaries). */
static int ck_open_rank(struct strata_ckpt *c, uint32_t rank)
{
	char path[CK_PATH_MAX];
	struct strata_stat st;
	int rc;

	if (c->open[rank])
		return 0;
	rc = fsu_join(path, sizeof(path), c->path, c->files[rank]);
	if (!rc)
		rc = strata_open(c->s, path, STRATA_O_RDONLY, 0, &c->open[rank]);
	if (!rc && strata_fstat(c->open[rank], &st) == 0)
		c->chunk[rank] = st.chunk_size;
	return rc;
}

int strata_ckpt_read(struct strata_ckpt *c, const struct strata_ckpt_dst *d, size_t n,
		     uint32_t depth)
{
	struct ck_write_opts o = { .writers = CK_DEF_READERS, .depth = depth };
	struct ck_write_result res;
	struct ck_read *rd;
	uint32_t *crcs;
	int rc = 0;

	if (!c || (n && !d))
		return -EINVAL;
	rd = calloc(n ? n : 1, sizeof(*rd));
	crcs = calloc(n ? n : 1, sizeof(*crcs));
	if (!rd || !crcs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct ck_tensor *t;

		if (d[i].index >= c->n || d[i].len != c->t[d[i].index].len ||
		    (d[i].len && !d[i].data)) {
			rc = -EINVAL;
			goto out;
		}
		t = &c->t[d[i].index];
		rc = ck_open_rank(c, t->rank);
		if (rc)
			goto out;
		rd[i] = (struct ck_read){ c->open[t->rank], d[i].data, t->off, t->len,
					  c->chunk[t->rank] };
	}
	rc = ck_read_data(c->s, rd, n, crcs, &o, &res);
	for (size_t i = 0; !rc && i < n; i++)
		if (crcs[i] != c->t[d[i].index].crc)
			rc = STRATA_EINTEGRITY;
out:
	free(rd);
	free(crcs);
	return rc;
}
