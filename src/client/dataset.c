/*
 * Packed datasets (include/strata/dataset.h): the writer appends samples
 * to shard files and keeps each shard's index in memory until the shard
 * closes; dataset.json goes last. The reader loads dataset.json and every
 * index, and trusts none of it: every count and offset is bounded before
 * it is used. Built only on the public API (and client/fsutil.h).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client/fsutil.h"
#include "net/codec.h"
#include "strata/cache.h"
#include "strata/dataset.h"
#include "strata/errors.h"

#define PACK_IDX_MAGIC "STRPIDX1"
#define PACK_IDX_HDR 16u		/* magic, u64 count */
#define PACK_IDX_ENT 16u		/* u64 offset, u64 length */
#define PACK_JSON_MAX (64u << 20)
#define PACK_IDX_MAX (1ull << 32)	/* 256 Mi samples per shard */
#define PACK_NAME_MAX 64

/* dir + "/" + name, without doubling the '/' of a dir that ends in one. */
static int pack_path(char *out, size_t len, const char *dir, const char *name)
{
	size_t dl = strlen(dir);
	int n;

	while (dl > 1 && dir[dl - 1] == '/')
		dl--;
	n = snprintf(out, len, "%.*s/%s", (int)(dl == 1 && dir[0] == '/' ? 0 : dl), dir, name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- writing ---- */

struct strata_pack {
	struct strata *s;
	char *dir;
	struct strata_pack_opts o;
	json_t *shards;			/* dataset.json's "shards" so far */
	struct strata_file *f;		/* the open shard's data file, or NULL */
	uint8_t *idx;			/* the open shard's index file */
	size_t idx_len, idx_cap;
	uint64_t off;			/* bytes in the open shard */
	uint64_t start;			/* where the current sample began */
	uint64_t count;			/* samples in the open shard */
	uint64_t total;			/* samples in the dataset */
	uint32_t nshard;		/* shards closed */
	int err;			/* the first error: every later call fails with it */
};

void strata_pack_opts_init(struct strata_pack_opts *opts, size_t size)
{
	struct strata_pack_opts d = {
		.opts_size = sizeof(d),
		.samples_per_shard = 1024,
		.shard_bytes = 1ull << 30,
	};

	if (!opts)
		return;
	if (size > sizeof(d))
		size = sizeof(d);
	memcpy(opts, &d, size);
	opts->opts_size = size;
}

int strata_pack_new(struct strata *s, const char *dir, const struct strata_pack_opts *opts,
		    struct strata_pack **out)
{
	struct strata_pack *p;
	int rc;

	if (!s || !dir || !*dir || !out)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	strata_pack_opts_init(&p->o, sizeof(p->o));
	if (opts)
		memcpy(&p->o, opts, opts->opts_size < sizeof(p->o) ? opts->opts_size : sizeof(p->o));
	rc = -EINVAL;
	if (!p->o.samples_per_shard || !p->o.shard_bytes)
		goto fail;
	p->s = s;
	p->dir = strdup(dir);
	p->shards = json_array();
	rc = -ENOMEM;
	if (!p->dir || !p->shards)
		goto fail;
	rc = strata_mkdir(s, dir, 0755);
	if (rc == -EEXIST)
		rc = 0;
	if (rc)
		goto fail;
	*out = p;
	return 0;
fail:
	strata_pack_abort(p);
	return rc;
}

static int shard_name(char *out, size_t len, uint32_t k, const char *ext)
{
	int n = snprintf(out, len, "shard-%05u.%s", k, ext);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static int shard_open(struct strata_pack *p)
{
	char name[PACK_NAME_MAX], path[FSU_PATH_MAX];
	int rc = shard_name(name, sizeof(name), p->nshard, "data");

	if (!rc)
		rc = pack_path(path, sizeof(path), p->dir, name);
	if (rc)
		return rc;
	if (!p->idx) {
		p->idx = malloc(4096);
		if (!p->idx)
			return -ENOMEM;
		p->idx_cap = 4096;
	}
	memcpy(p->idx, PACK_IDX_MAGIC, 8);
	p->idx_len = PACK_IDX_HDR;
	p->off = 0;
	p->start = 0;
	p->count = 0;
	return strata_open(p->s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC, 0644,
			   &p->f);
}

/* Closes the open shard: its data file, then its index, then its entry in
 * dataset.json's list. */
static int shard_close(struct strata_pack *p)
{
	char name[PACK_NAME_MAX], iname[PACK_NAME_MAX], path[FSU_PATH_MAX];
	json_t *o;
	int rc;

	if (!p->f)
		return 0;
	rc = strata_close(p->f);
	p->f = NULL;
	if (rc)
		return rc;
	put_le64(p->idx + 8, p->count);
	rc = shard_name(iname, sizeof(iname), p->nshard, "idx");
	if (!rc)
		rc = shard_name(name, sizeof(name), p->nshard, "data");
	if (!rc)
		rc = pack_path(path, sizeof(path), p->dir, iname);
	if (!rc)
		rc = fsu_write_file(p->s, path, p->idx, p->idx_len);
	if (rc)
		return rc;
	o = json_pack("{s:s, s:s, s:I, s:I}", "data", name, "index", iname,
		      "samples", (json_int_t)p->count, "bytes", (json_int_t)p->off);
	if (!o || json_array_append_new(p->shards, o))
		return -ENOMEM;
	p->nshard++;
	return 0;
}

/* Records the first error; returns the one to report. */
static int pack_fail(struct strata_pack *p, int rc)
{
	if (rc && !p->err)
		p->err = rc;
	return p->err;
}

int strata_pack_append(struct strata_pack *p, const void *buf, size_t len)
{
	ssize_t w;

	if (!p || (len && !buf))
		return -EINVAL;
	if (p->err)
		return p->err;
	if (!p->f) {
		int rc = shard_open(p);

		if (rc)
			return pack_fail(p, rc);
	}
	while (len) {
		w = strata_pwrite(p->f, buf, len, p->off);
		if (w <= 0)
			return pack_fail(p, w < 0 ? (int)w : -EIO);
		p->off += (uint64_t)w;
		buf = (const uint8_t *)buf + w;
		len -= (size_t)w;
	}
	return 0;
}

static int idx_add(struct strata_pack *p, uint64_t off, uint64_t len)
{
	if (p->idx_len + PACK_IDX_ENT > p->idx_cap) {
		size_t cap = p->idx_cap * 2;
		uint8_t *n = realloc(p->idx, cap);

		if (!n)
			return -ENOMEM;
		p->idx = n;
		p->idx_cap = cap;
	}
	put_le64(p->idx + p->idx_len, off);
	put_le64(p->idx + p->idx_len + 8, len);
	p->idx_len += PACK_IDX_ENT;
	return 0;
}

int strata_pack_end_sample(struct strata_pack *p, uint64_t *index)
{
	int rc;

	if (!p)
		return -EINVAL;
	/* An empty sample still has a place in a shard. */
	rc = strata_pack_append(p, NULL, 0);
	if (rc)
		return rc;
	rc = idx_add(p, p->start, p->off - p->start);
	if (rc)
		return pack_fail(p, rc);
	if (index)
		*index = p->total;
	p->start = p->off;
	p->count++;
	p->total++;
	if (p->count >= p->o.samples_per_shard || p->off >= p->o.shard_bytes)
		return pack_fail(p, shard_close(p));
	return 0;
}

int strata_pack_add(struct strata_pack *p, const void *buf, size_t len, uint64_t *index)
{
	int rc = strata_pack_append(p, buf, len);

	return rc ? rc : strata_pack_end_sample(p, index);
}

int strata_pack_close(struct strata_pack *p, uint64_t *samples, uint32_t *shards)
{
	char path[FSU_PATH_MAX];
	json_t *meta = NULL;
	char *text = NULL;
	int rc;

	if (!p)
		return -EINVAL;
	rc = p->err;
	if (!rc && p->f && p->off > p->start)
		rc = -EINVAL;	/* a sample was begun and not ended */
	if (!rc)
		rc = shard_close(p);
	if (!rc) {
		meta = json_pack("{s:s, s:i, s:I, s:O}", "format", STRATA_PACK_FORMAT,
				 "version", STRATA_PACK_VERSION, "samples", (json_int_t)p->total,
				 "shards", p->shards);
		text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
		rc = text ? pack_path(path, sizeof(path), p->dir, "dataset.json") : -ENOMEM;
	}
	if (!rc)
		rc = fsu_write_file(p->s, path, text, strlen(text));
	if (samples)
		*samples = p->total;
	if (shards)
		*shards = p->nshard;
	free(text);
	json_decref(meta);
	strata_pack_abort(p);
	return rc;
}

void strata_pack_abort(struct strata_pack *p)
{
	if (!p)
		return;
	if (p->f)
		strata_close(p->f);
	json_decref(p->shards);
	free(p->idx);
	free(p->dir);
	free(p);
}

/* ---- reading ---- */

struct strata_pack_index {
	uint64_t n;
	uint32_t nshards;
	char **paths;			/* per shard: its data file */
	uint32_t *shard;		/* per sample */
	uint64_t *off, *len;
};

void strata_pack_index_free(struct strata_pack_index *x)
{
	if (!x)
		return;
	for (uint32_t k = 0; k < x->nshards; k++)
		free(x->paths[k]);
	free(x->paths);
	free(x->shard);
	free(x->off);
	free(x->len);
	free(x);
}

/* A file name of dataset.json: a plain name inside the dataset. */
static const char *entry_name(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (!s || !*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, ".."))
		return NULL;
	return s;
}

/* Optional integer field: absent is fine, present must be a number >= 0. */
static int opt_count(json_t *o, const char *key, bool *has, uint64_t *v)
{
	json_t *j = json_object_get(o, key);

	*has = j != NULL;
	if (!j)
		return 0;
	if (!json_is_integer(j) || json_integer_value(j) < 0)
		return STRATA_EBADMSG;
	*v = (uint64_t)json_integer_value(j);
	return 0;
}

static int grow(struct strata_pack_index *x, uint64_t n)
{
	uint32_t *sh;
	uint64_t *off, *len;

	if (n > SIZE_MAX / sizeof(uint64_t))
		return -ENOMEM;
	sh = realloc(x->shard, (size_t)n * sizeof(*sh) + 1);
	if (sh)
		x->shard = sh;
	off = realloc(x->off, (size_t)n * sizeof(*off) + 1);
	if (off)
		x->off = off;
	len = realloc(x->len, (size_t)n * sizeof(*len) + 1);
	if (len)
		x->len = len;
	return sh && off && len ? 0 : -ENOMEM;
}

/* Loads shard k (its entry o of dataset.json) into x. */
static int load_shard(struct strata *s, const char *dir, json_t *o, struct strata_pack_index *x)
{
	const char *data = entry_name(o, "data"), *index = entry_name(o, "index");
	char path[FSU_PATH_MAX];
	uint64_t n, want_n = 0, bytes = 0;
	bool has_n, has_bytes;
	uint8_t *idx = NULL;
	size_t idx_len = 0;
	uint32_t k = x->nshards;
	int rc;

	if (!json_is_object(o) || !data || !index || opt_count(o, "samples", &has_n, &want_n) ||
	    opt_count(o, "bytes", &has_bytes, &bytes))
		return STRATA_EBADMSG;
	rc = pack_path(path, sizeof(path), dir, index);
	if (!rc)
		rc = fsu_read_file(s, path, PACK_IDX_HDR + PACK_IDX_MAX * PACK_IDX_ENT, (char **)&idx,
				   &idx_len);
	if (rc)
		return rc;
	rc = STRATA_EBADMSG;
	if (idx_len < PACK_IDX_HDR || memcmp(idx, PACK_IDX_MAGIC, 8))
		goto out;
	n = get_le64(idx + 8);
	/* The count is bounded by what the file holds before anything is
	 * allocated for it. */
	if (n != (idx_len - PACK_IDX_HDR) / PACK_IDX_ENT ||
	    (idx_len - PACK_IDX_HDR) % PACK_IDX_ENT || (has_n && n != want_n) ||
	    x->n + n < x->n)
		goto out;
	rc = grow(x, x->n + n);
	if (rc)
		goto out;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = get_le64(idx + PACK_IDX_HDR + i * PACK_IDX_ENT);
		uint64_t len = get_le64(idx + PACK_IDX_HDR + i * PACK_IDX_ENT + 8);

		if (off + len < off || off > INT64_MAX || len > INT64_MAX ||
		    (has_bytes && off + len > bytes)) {
			rc = STRATA_EBADMSG;
			goto out;
		}
		x->shard[x->n + i] = k;
		x->off[x->n + i] = off;
		x->len[x->n + i] = len;
	}
	rc = pack_path(path, sizeof(path), dir, data);
	if (rc)
		goto out;
	x->paths[k] = strdup(path);
	if (!x->paths[k]) {
		rc = -ENOMEM;
		goto out;
	}
	x->nshards++;
	x->n += n;
out:
	free(idx);
	return rc;
}

int strata_pack_index_open(struct strata *s, const char *dir, struct strata_pack_index **out)
{
	struct strata_pack_index *x = NULL;
	char path[FSU_PATH_MAX];
	json_t *meta = NULL, *shards, *o;
	const char *fmt;
	uint64_t want = 0;
	bool has_total;
	size_t k;
	int rc;

	if (!s || !dir || !out)
		return -EINVAL;
	rc = pack_path(path, sizeof(path), dir, "dataset.json");
	if (!rc)
		meta = fsu_read_json(s, path, PACK_JSON_MAX, &rc);
	if (!meta)
		return rc;
	fmt = json_string_value(json_object_get(meta, "format"));
	shards = json_object_get(meta, "shards");
	rc = STRATA_EBADMSG;
	if (!fmt || strcmp(fmt, STRATA_PACK_FORMAT) ||
	    json_integer_value(json_object_get(meta, "version")) != STRATA_PACK_VERSION ||
	    !json_is_array(shards) || json_array_size(shards) > UINT32_MAX ||
	    opt_count(meta, "samples", &has_total, &want))
		goto out;
	rc = -ENOMEM;
	x = calloc(1, sizeof(*x));
	if (!x)
		goto out;
	x->paths = calloc(json_array_size(shards) + 1, sizeof(*x->paths));
	if (!x->paths || grow(x, 0))
		goto out;
	json_array_foreach(shards, k, o) {
		rc = load_shard(s, dir, o, x);
		if (rc)
			goto out;
	}
	rc = has_total && want != x->n ? STRATA_EBADMSG : 0;
out:
	json_decref(meta);
	if (rc) {
		strata_pack_index_free(x);
		return rc;
	}
	*out = x;
	return 0;
}

uint64_t strata_pack_index_count(const struct strata_pack_index *x)
{
	return x ? x->n : 0;
}

uint32_t strata_pack_index_shards(const struct strata_pack_index *x)
{
	return x ? x->nshards : 0;
}

const char *strata_pack_index_shard_path(const struct strata_pack_index *x, uint32_t k)
{
	return x && k < x->nshards ? x->paths[k] : NULL;
}

int strata_pack_index_sample(const struct strata_pack_index *x, uint64_t i, uint32_t *shard,
			     uint64_t *off, uint64_t *len)
{
	if (!x || i >= x->n)
		return -EINVAL;
	if (shard)
		*shard = x->shard[i];
	if (off)
		*off = x->off[i];
	if (len)
		*len = x->len[i];
	return 0;
}

void strata_pack_index_export(const struct strata_pack_index *x, int32_t *shard, int64_t *off,
			      int64_t *len)
{
	for (uint64_t i = 0; x && i < x->n; i++) {
		if (shard)
			shard[i] = (int32_t)x->shard[i];
		if (off)
			off[i] = (int64_t)x->off[i];
		if (len)
			len[i] = (int64_t)x->len[i];
	}
}

int strata_pack_prefetch(struct strata *s, const struct strata_pack_index *x, uint32_t k,
			 uint32_t ahead)
{
	if (!s || !x || k >= x->nshards)
		return -EINVAL;
	for (uint32_t j = k + 1; j <= k + ahead && j < x->nshards && j > k; j++) {
		int rc = strata_cache_prefetch(s, x->paths[j]);

		if (rc)
			return rc;
	}
	return 0;
}
