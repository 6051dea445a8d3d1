/*
 * Checkpoints (include/strata/checkpoint.h): shards written through the
 * batch ring, a manifest written last, committed by renaming the
 * directory. Built only on the public API of libstrata, plus CRC32C and
 * jansson.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "common/crc32c.h"
#include "strata/checkpoint.h"
#include "strata/strata.h"

#define CK_PATH_MAX 4096
#define CK_DEF_DEPTH 32
#define CK_DEF_IO (4u << 20)
#define CK_DEF_WAIT_MS 600000
#define CK_JSON_MAX (256u << 20)

struct ck_tensor {
	char *name;
	char *dtype;
	uint32_t rank;
	uint32_t ndim;
	int64_t shape[STRATA_CKPT_MAX_DIMS];
	uint64_t off, len;
	uint32_t crc;
};

struct strata_ckpt {
	struct strata *s;
	char *path;
	uint32_t world;
	struct ck_tensor *t;
	size_t n;
	char **meta;			/* per rank: JSON text or NULL */
	char **files;			/* per rank: shard file name */
	struct strata_file **open;	/* per rank, opened on first read */
};

uint32_t strata_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return crc32c(crc, buf, len);
}

void strata_ckpt_save_opts_init(struct strata_ckpt_save_opts *opts, size_t size)
{
	struct strata_ckpt_save_opts d = {
		.opts_size = sizeof(d),
		.world_size = 1,
		.depth = CK_DEF_DEPTH,
		.io_size = CK_DEF_IO,
		.wait_ms = CK_DEF_WAIT_MS,
	};

	if (!opts)
		return;
	if (size > sizeof(d))
		size = sizeof(d);
	memset(opts, 0, size);
	memcpy(opts, &d, size);
	opts->opts_size = size;
}

static uint64_t ck_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t ck_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000ull + (uint64_t)ts.tv_nsec / 1000000ull;
}

static int ck_join(char *out, size_t len, const char *a, const char *b)
{
	int n = snprintf(out, len, "%s/%s", a, b);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Removes a file or a directory tree; missing entries are not errors. */
static int ck_rmtree(struct strata *s, const char *path)
{
	struct strata_stat st;
	struct strata_dir *d = NULL;
	struct strata_dirent ent;
	char sub[CK_PATH_MAX];
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
		rc = ck_join(sub, sizeof(sub), path, ent.name);
		if (!rc)
			rc = ck_rmtree(s, sub);
		if (rc)
			break;
	}
	strata_closedir(d);
	if (rc < 0)
		return rc;
	rc = strata_rmdir(s, path);
	return rc == -ENOENT ? 0 : rc;
}

/* Writes len bytes at 0 of a new file, fsyncs and closes it. */
static int ck_write_file(struct strata *s, const char *path, const void *buf, size_t len)
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

/* Reads a whole (small) file into a NUL-terminated malloc'd string. */
static int ck_read_file(struct strata *s, const char *path, char **out, size_t *outlen)
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
	if (st.size > CK_JSON_MAX) {
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

static json_t *ck_read_json(struct strata *s, const char *path, int *err)
{
	char *text = NULL;
	size_t len = 0;
	json_t *j;

	*err = ck_read_file(s, path, &text, &len);
	if (*err)
		return NULL;
	j = json_loadb(text, len, 0, NULL);
	free(text);
	if (!j)
		*err = STRATA_EBADMSG;
	return j;
}

/* ---- the ring: pieces of many buffers in flight ---- */

struct ck_io {
	struct strata_file *f;
	uint8_t *buf;
	uint64_t off, len;
};

/* Runs n I/Os (reads or writes), each split into io_size pieces, with up
 * to depth in flight on one ring. */
static int ck_ring_run(struct strata *s, const struct ck_io *io, size_t n, bool write,
		       uint32_t depth, uint32_t io_size)
{
	struct strata_ring *r = NULL;
	struct strata_cqe *cqes = NULL;
	size_t cur = 0;
	uint64_t pos = 0;
	uint32_t inflight = 0;
	int rc, err = 0;

	if (!depth)
		depth = CK_DEF_DEPTH;
	if (!io_size)
		io_size = CK_DEF_IO;
	rc = strata_ring_new(s, depth, &r);
	if (rc)
		return rc;
	cqes = calloc(depth, sizeof(*cqes));
	if (!cqes) {
		strata_ring_free(r);
		return -ENOMEM;
	}
	for (;;) {
		while (!err && cur < n && inflight < depth) {
			uint64_t len = io[cur].len - pos;

			if (len > io_size)
				len = io_size;
			if (len == 0) {
				cur++;
				pos = 0;
				continue;
			}
			if (write)
				rc = strata_ring_prep_write(r, io[cur].f, io[cur].buf + pos, len,
							    io[cur].off + pos, len);
			else
				rc = strata_ring_prep_read(r, io[cur].f, io[cur].buf + pos, len,
							   io[cur].off + pos, len);
			if (rc) {
				err = rc;
				break;
			}
			inflight++;
			pos += len;
			if (pos >= io[cur].len) {
				cur++;
				pos = 0;
			}
		}
		if (inflight == 0)
			break;
		strata_ring_submit(r);
		rc = strata_ring_wait(r, cqes, depth, 1, -1);
		if (rc < 0) {
			err = err ? err : rc;
			break;
		}
		for (int i = 0; i < rc; i++) {
			inflight--;
			if (cqes[i].res < 0 && !err)
				err = (int)cqes[i].res;
			else if ((uint64_t)cqes[i].res != cqes[i].user_data && !err)
				err = write ? -EIO : -ENODATA;	/* short: the file is truncated */
		}
	}
	strata_ring_free(r);
	free(cqes);
	return err;
}

/* ---- save ---- */

static json_t *ck_tensor_json(const struct strata_ckpt_tensor *t, uint32_t rank, uint64_t off,
			      uint32_t crc)
{
	json_t *o = json_object(), *shape = json_array();

	if (!o || !shape) {
		json_decref(o);
		json_decref(shape);
		return NULL;
	}
	for (uint32_t d = 0; d < t->ndim; d++)
		json_array_append_new(shape, json_integer(t->shape[d]));
	json_object_set_new(o, "name", json_string(t->name));
	json_object_set_new(o, "rank", json_integer(rank));
	json_object_set_new(o, "dtype", json_string(t->dtype));
	json_object_set_new(o, "shape", shape);
	json_object_set_new(o, "offset", json_integer((json_int_t)off));
	json_object_set_new(o, "length", json_integer((json_int_t)t->len));
	json_object_set_new(o, "crc32c", json_integer(crc));
	return o;
}

static int ck_check_tensors(const struct strata_ckpt_tensor *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!t[i].name || !*t[i].name || !t[i].dtype || t[i].ndim > STRATA_CKPT_MAX_DIMS ||
		    (t[i].ndim && !t[i].shape) || (t[i].len && !t[i].data))
			return -EINVAL;
		for (size_t j = 0; j < i; j++)
			if (strcmp(t[i].name, t[j].name) == 0)
				return -EINVAL;
	}
	return 0;
}

/* Writes rank's shard-R.bin and then shard-R.json into tmp. */
static int ck_write_shard(struct strata *s, const char *tmp, const struct strata_ckpt_tensor *t,
			  size_t n, const struct strata_ckpt_save_opts *o)
{
	char name[64], path[CK_PATH_MAX], jpath[CK_PATH_MAX], jtmp[CK_PATH_MAX];
	struct strata_file *f = NULL;
	struct ck_io *io = NULL;
	json_t *part = NULL, *arr, *meta = NULL;
	char *text = NULL;
	uint64_t off = 0;
	int rc;

	snprintf(name, sizeof(name), "shard-%05u.bin", o->rank);
	rc = ck_join(path, sizeof(path), tmp, name);
	if (rc)
		return rc;
	if (o->meta_json) {
		meta = json_loads(o->meta_json, JSON_DECODE_ANY, NULL);
		if (!meta)
			return -EINVAL;
	}
	io = calloc(n ? n : 1, sizeof(*io));
	part = json_object();
	arr = json_array();
	if (!io || !part || !arr) {
		json_decref(arr);
		rc = -ENOMEM;
		goto out;
	}
	json_object_set_new(part, "tensors", arr);
	rc = strata_open(s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC, 0644, &f);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++) {
		uint32_t crc = crc32c(0, t[i].data, t[i].len);
		json_t *tj = ck_tensor_json(&t[i], o->rank, off, crc);

		if (!tj || json_array_append_new(arr, tj)) {
			rc = -ENOMEM;
			goto out;
		}
		io[i] = (struct ck_io){ f, (uint8_t *)t[i].data, off, t[i].len };
		off += (t[i].len + STRATA_CKPT_ALIGN - 1) / STRATA_CKPT_ALIGN * STRATA_CKPT_ALIGN;
	}
	rc = ck_ring_run(s, io, n, true, o->depth, o->io_size);
	if (!rc)
		rc = strata_fsync(f);
	if (rc)
		goto out;
	json_object_set_new(part, "rank", json_integer(o->rank));
	json_object_set_new(part, "world_size", json_integer(o->world_size));
	json_object_set_new(part, "file", json_string(name));
	json_object_set_new(part, "size", json_integer((json_int_t)off));
	json_object_set_new(part, "meta", meta ? meta : json_null());
	meta = NULL;
	text = json_dumps(part, JSON_COMPACT);
	if (!text) {
		rc = -ENOMEM;
		goto out;
	}
	/* Written under a temporary name, so rank 0 never reads half of it. */
	snprintf(name, sizeof(name), "shard-%05u.json", o->rank);
	rc = ck_join(jpath, sizeof(jpath), tmp, name);
	if (!rc) {
		snprintf(name, sizeof(name), "shard-%05u.json.part", o->rank);
		rc = ck_join(jtmp, sizeof(jtmp), tmp, name);
	}
	if (!rc)
		rc = ck_write_file(s, jtmp, text, strlen(text));
	if (!rc)
		rc = strata_rename(s, jtmp, jpath, 0);
out:
	if (f) {
		int crc = strata_close(f);

		rc = rc ? rc : crc;
	}
	json_decref(meta);
	json_decref(part);
	free(text);
	free(io);
	return rc;
}

/* Rank 0: waits for every part, merges them into manifest.json. */
static int ck_write_manifest(struct strata *s, const char *tmp,
			     const struct strata_ckpt_save_opts *o)
{
	char name[64], path[CK_PATH_MAX];
	json_t *man = json_object(), *shards = json_array(), *tensors = json_array();
	uint64_t deadline = ck_mono_ms() + o->wait_ms;
	char *text = NULL;
	int rc = 0;

	if (!man || !shards || !tensors) {
		json_decref(shards);
		json_decref(tensors);
		rc = -ENOMEM;
		goto out;
	}
	json_object_set_new(man, "format", json_string("strata-checkpoint"));
	json_object_set_new(man, "version", json_integer(1));
	json_object_set_new(man, "created_ns", json_integer((json_int_t)ck_now_ns()));
	json_object_set_new(man, "world_size", json_integer(o->world_size));
	json_object_set_new(man, "shards", shards);
	json_object_set_new(man, "tensors", tensors);
	for (uint32_t r = 0; r < o->world_size; r++) {
		json_t *part, *sh, *ts, *v;
		size_t i;

		snprintf(name, sizeof(name), "shard-%05u.json", r);
		rc = ck_join(path, sizeof(path), tmp, name);
		if (rc)
			goto out;
		for (;;) {
			part = ck_read_json(s, path, &rc);
			if (part || rc != -ENOENT)
				break;
			if (ck_mono_ms() >= deadline) {
				rc = -ETIMEDOUT;
				goto out;
			}
			usleep(20000);
		}
		if (!part)
			goto out;
		sh = json_object();
		json_object_set(sh, "rank", json_object_get(part, "rank"));
		json_object_set(sh, "file", json_object_get(part, "file"));
		json_object_set(sh, "size", json_object_get(part, "size"));
		json_object_set(sh, "meta", json_object_get(part, "meta"));
		json_array_append_new(shards, sh);
		ts = json_object_get(part, "tensors");
		json_array_foreach(ts, i, v)
			json_array_append(tensors, v);
		json_decref(part);
	}
	text = json_dumps(man, JSON_COMPACT);
	if (!text) {
		rc = -ENOMEM;
		goto out;
	}
	rc = ck_join(path, sizeof(path), tmp, "manifest.json");
	if (!rc)
		rc = ck_write_file(s, path, text, strlen(text));
out:
	free(text);
	json_decref(man);
	return rc;
}

/* Renames tmp to path; an existing path is replaced when allowed. */
static int ck_commit(struct strata *s, const char *tmp, const char *path, const char *tag,
		     bool replace)
{
	char old[CK_PATH_MAX];
	int rc;

	rc = strata_rename(s, tmp, path, STRATA_RENAME_NOREPLACE);
	if (rc != -EEXIST && rc != -ENOTEMPTY)
		return rc;
	if (!replace)
		return -EEXIST;
	rc = strata_rename(s, tmp, path, STRATA_RENAME_EXCHANGE);
	if (rc == 0)
		return ck_rmtree(s, tmp);	/* tmp now holds the old one */
	/* No exchange: move the old one aside first (a short window in which
	 * path does not exist; it is never half-written). */
	if (snprintf(old, sizeof(old), "%s.old-%s", path, tag) >= (int)sizeof(old))
		return -ENAMETOOLONG;
	rc = strata_rename(s, path, old, 0);
	if (rc)
		return rc;
	rc = strata_rename(s, tmp, path, 0);
	if (rc) {
		strata_rename(s, old, path, 0);
		return rc;
	}
	return ck_rmtree(s, old);
}

static int ck_parent(const char *path, char *out, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t n;

	if (!slash)
		return -EINVAL;
	n = slash == path ? 1 : (size_t)(slash - path);
	if (n >= len)
		return -ENAMETOOLONG;
	memcpy(out, path, n);
	out[n] = '\0';
	return 0;
}

int strata_ckpt_save(struct strata *s, const char *path, const struct strata_ckpt_tensor *t,
		     size_t n, const struct strata_ckpt_save_opts *opts)
{
	struct strata_ckpt_save_opts o;
	char tmp[CK_PATH_MAX], tagbuf[64], parent[CK_PATH_MAX];
	struct strata_stat st;
	int rc;

	strata_ckpt_save_opts_init(&o, sizeof(o));
	if (opts)
		memcpy(&o, opts, opts->opts_size < sizeof(o) ? opts->opts_size : sizeof(o));
	if (!s || !path || path[0] != '/' || (n && !t) || !o.world_size ||
	    o.rank >= o.world_size || (!o.tag && o.world_size > 1))
		return -EINVAL;
	if (o.tag && (!*o.tag || strchr(o.tag, '/')))
		return -EINVAL;
	rc = ck_check_tensors(t, n);
	if (rc)
		return rc;
	if (!o.tag) {
		snprintf(tagbuf, sizeof(tagbuf), "p%d-%" PRIu64, (int)getpid(), ck_now_ns());
		o.tag = tagbuf;
	}
	if (!o.replace && strata_stat(s, path, &st) == 0)
		return -EEXIST;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-%s", path, o.tag) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	rc = strata_mkdir(s, tmp, 0755);
	if (rc == -EEXIST && o.world_size == 1) {
		/* A stale attempt with the same tag: start over. */
		rc = ck_rmtree(s, tmp);
		if (!rc)
			rc = strata_mkdir(s, tmp, 0755);
	} else if (rc == -EEXIST) {
		rc = 0;		/* another rank made it */
	}
	if (rc)
		return rc;
	rc = ck_write_shard(s, tmp, t, n, &o);
	if (rc || o.rank != 0)
		return rc;
	rc = ck_write_manifest(s, tmp, &o);
	if (!rc)
		rc = ck_commit(s, tmp, path, o.tag, o.replace);
	if (!rc && o.keep_last && ck_parent(path, parent, sizeof(parent)) == 0) {
		int pr = strata_ckpt_prune(s, parent, o.keep_last);

		if (pr < 0)
			rc = pr;
	}
	return rc;
}

/* ---- load ---- */

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

	if (!fmt || strcmp(fmt, "strata-checkpoint") != 0 ||
	    json_integer_value(json_object_get(man, "version")) != 1 || world < 1 ||
	    world > 1000000 || !json_is_array(shards) || !json_is_array(tensors))
		return STRATA_EBADMSG;
	c->world = (uint32_t)world;
	c->meta = calloc(c->world, sizeof(*c->meta));
	c->files = calloc(c->world, sizeof(*c->files));
	c->open = calloc(c->world, sizeof(*c->open));
	c->t = calloc(json_array_size(tensors) + 1, sizeof(*c->t));
	if (!c->meta || !c->files || !c->open || !c->t)
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
	rc = ck_join(mpath, sizeof(mpath), path, "manifest.json");
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
	man = ck_read_json(s, mpath, &rc);
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

int strata_ckpt_read(struct strata_ckpt *c, const struct strata_ckpt_dst *d, size_t n,
		     uint32_t depth)
{
	char path[CK_PATH_MAX];
	struct ck_io *io;
	int rc = 0;

	if (!c || (n && !d))
		return -EINVAL;
	io = calloc(n ? n : 1, sizeof(*io));
	if (!io)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct ck_tensor *t;

		if (d[i].index >= c->n || d[i].len != c->t[d[i].index].len ||
		    (d[i].len && !d[i].data)) {
			rc = -EINVAL;
			goto out;
		}
		t = &c->t[d[i].index];
		if (!c->open[t->rank]) {
			rc = ck_join(path, sizeof(path), c->path, c->files[t->rank]);
			if (!rc)
				rc = strata_open(c->s, path, STRATA_O_RDONLY, 0, &c->open[t->rank]);
			if (rc)
				goto out;
		}
		io[i] = (struct ck_io){ c->open[t->rank], d[i].data, t->off, t->len };
	}
	rc = ck_ring_run(c->s, io, n, false, depth, CK_DEF_IO);
	for (size_t i = 0; !rc && i < n; i++)
		if (crc32c(0, d[i].data, d[i].len) != c->t[d[i].index].crc)
			rc = STRATA_EINTEGRITY;
out:
	free(io);
	return rc;
}

/* ---- listing: prune and latest ---- */

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
		man = ck_read_json(s, mpath, &err);
		if (!man)
			continue;
		fmt = json_string_value(json_object_get(man, "format"));
		if (fmt && strcmp(fmt, "strata-checkpoint") == 0) {
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
		rc = ck_join(path, sizeof(path), strcmp(dir, "/") ? dir : "", v[i].name);
		if (!rc)
			rc = ck_rmtree(s, path);
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
		if (ck_join(sub, sizeof(sub), path, ent.name) == 0 &&
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
	struct timespec now;
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
	clock_gettime(CLOCK_REALTIME, &now);
	for (size_t i = 0; rc >= 0 && i < n; i++) {
		int64_t newest = 0;
		int err = ck_join(path, sizeof(path), strcmp(dir, "/") ? dir : "", names[i]);

		if (!err)
			err = ck_newest_mtime(s, path, &newest);
		/* Gone (committed meanwhile), or not known to be quiet: kept. */
		if (err)
			continue;
		if ((int64_t)now.tv_sec * 1000000000LL + now.tv_nsec - newest <
		    (int64_t)older_than_s * 1000000000LL)
			continue;
		if (ck_may_be_only_copy(s, dir, names[i]))
			continue;
		/* Out of the way first: a commit racing us fails on the missing
		 * directory instead of committing a half-removed one. */
		if (snprintf(dead, sizeof(dead), "%s.tmp-removing-%ld-%lld", path, (long)getpid(),
			     (long long)now.tv_nsec) >= (int)sizeof(dead) ||
		    strata_rename(s, path, dead, STRATA_RENAME_NOREPLACE))
			continue;
		rc = ck_rmtree(s, dead);
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
