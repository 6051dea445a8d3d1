/*
 * Saving a checkpoint: every rank writes its shard through the batch ring
 * and its part of the manifest; rank 0 merges the parts into
 * manifest.json and commits the directory with a rename.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "client/checkpoint_int.h"
#include "client/fsutil.h"
#include "common/clock.h"
#include "strata/strata.h"

/* Below this a copy stays in the cache (a small tensor): plain memcpy. */
#define CK_STREAM_MIN (256u << 10)

/* Copies len bytes from s to d, streaming when large. */
static void ck_stream_copy(uint8_t *d, const uint8_t *s, size_t len)
{
#if defined(__SSE2__)
	if (len >= CK_STREAM_MIN) {
		/* Streaming stores write whole lines without first reading
		 * them (a third less memory traffic than memcpy) and leave the
		 * cache to the training step: only the save's writers read
		 * the snapshot back, later. */
		size_t head = (16 - ((uintptr_t)d & 15)) & 15;

		memcpy(d, s, head);
		d += head;
		s += head;
		len -= head;
		for (; len >= 64; d += 64, s += 64, len -= 64) {
			__m128i a = _mm_loadu_si128((const __m128i *)s);
			__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
			__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
			__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));

			_mm_stream_si128((__m128i *)d, a);
			_mm_stream_si128((__m128i *)(d + 16), b);
			_mm_stream_si128((__m128i *)(d + 32), c);
			_mm_stream_si128((__m128i *)(d + 48), e);
		}
		/* Streaming stores are weakly ordered: the fence makes them
		 * visible before anything this thread publishes next. */
		_mm_sfence();
	}
#endif
	memcpy(d, s, len);
}

/* The pieces of one snapshot, taken by its threads from next. */
struct ck_copyctx {
	struct strata_ckpt_copy *p;
	size_t np;
	size_t next;
};

static void *ck_copy_main(void *arg)
{
	struct ck_copyctx *x = arg;
	size_t i;

	while ((i = __atomic_fetch_add(&x->next, 1, __ATOMIC_RELAXED)) < x->np)
		ck_stream_copy(x->p[i].dst, x->p[i].src, x->p[i].len);
	return NULL;
}

int strata_ckpt_snapshot(const struct strata_ckpt_copy *c, size_t n, uint32_t threads)
{
	pthread_t tid[CK_MAX_COPIERS];
	struct ck_copyctx x = { 0 };
	uint32_t started = 0;

	if (n && !c)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (c[i].len && (!c[i].dst || !c[i].src))
			return -EINVAL;
		x.np += (c[i].len + CK_COPY_PIECE - 1) / CK_COPY_PIECE;
	}
	if (!threads) {
		/* More threads than CPUs only queue for them. */
		long cpus = sysconf(_SC_NPROCESSORS_ONLN);

		threads = cpus > 0 && cpus < CK_DEF_COPIERS ? (uint32_t)cpus : CK_DEF_COPIERS;
	}
	if (threads > CK_MAX_COPIERS)
		threads = CK_MAX_COPIERS;
	if (threads > x.np)
		threads = x.np ? (uint32_t)x.np : 1;
	if (threads == 1) {
		for (size_t i = 0; i < n; i++)
			ck_stream_copy(c[i].dst, c[i].src, c[i].len);
		return 0;
	}
	x.p = malloc(x.np * sizeof(*x.p));
	if (!x.p)
		return -ENOMEM;
	x.np = 0;
	for (size_t i = 0; i < n; i++)
		for (size_t o = 0; o < c[i].len; o += CK_COPY_PIECE)
			x.p[x.np++] = (struct strata_ckpt_copy){
				(uint8_t *)c[i].dst + o, (const uint8_t *)c[i].src + o,
				c[i].len - o < CK_COPY_PIECE ? c[i].len - o : CK_COPY_PIECE };
	/* The calling thread is one of them; fewer run when a thread
	 * cannot be started. */
	for (uint32_t i = 1; i < threads; i++) {
		if (pthread_create(&tid[started], NULL, ck_copy_main, &x) != 0)
			break;
		started++;
	}
	ck_copy_main(&x);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(tid[i], NULL);
	free(x.p);
	return 0;
}

void strata_ckpt_save_opts_init(struct strata_ckpt_save_opts *opts, size_t size)
{
	struct strata_ckpt_save_opts d = {
		.opts_size = sizeof(d),
		.world_size = 1,
		.depth = CK_DEF_SAVE_DEPTH,
		.io_size = CK_DEF_IO,
		.wait_ms = CK_DEF_WAIT_MS,
		.writers = CK_DEF_WRITERS,
	};

	if (!opts)
		return;
	if (size > sizeof(d))
		size = sizeof(d);
	memset(opts, 0, size);
	memcpy(opts, &d, size);
	opts->opts_size = size;
}

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

/* Writes rank's shard-R.bin (ck_write_data's writers) and then
 * shard-R.json into tmp; times its phases into st. */
static int ck_write_shard(struct strata *s, const char *tmp, const struct strata_ckpt_tensor *t,
			  size_t n, const struct strata_ckpt_save_opts *o,
			  struct strata_ckpt_save_stats *st)
{
	char name[64], path[CK_PATH_MAX], jpath[CK_PATH_MAX], jtmp[CK_PATH_MAX];
	struct strata_file *f = NULL;
	struct ck_write_result wr;
	struct ck_write_opts wo = { .writers = o->writers, .depth = o->depth,
				    .io_size = o->io_size, .ready = o->ready,
				    .wait_ms = o->wait_ms };
	uint64_t *offs = NULL;
	uint32_t *crcs = NULL;
	json_t *part = NULL, *arr, *meta = NULL;
	char *text = NULL;
	uint64_t off = 0;
	double t0;
	int rc;

	snprintf(name, sizeof(name), "shard-%05u.bin", o->rank);
	rc = fsu_join(path, sizeof(path), tmp, name);
	if (rc)
		return rc;
	if (o->meta_json) {
		meta = json_loads(o->meta_json, JSON_DECODE_ANY, NULL);
		if (!meta)
			return -EINVAL;
	}
	offs = calloc(n ? n : 1, sizeof(*offs));
	crcs = calloc(n ? n : 1, sizeof(*crcs));
	part = json_object();
	arr = json_array();
	if (!offs || !crcs || !part || !arr) {
		json_decref(arr);
		rc = -ENOMEM;
		goto out;
	}
	json_object_set_new(part, "tensors", arr);
	for (size_t i = 0; i < n; i++) {
		offs[i] = off;
		off += (t[i].len + STRATA_CKPT_ALIGN - 1) / STRATA_CKPT_ALIGN * STRATA_CKPT_ALIGN;
	}
	rc = strata_open(s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC, 0644, &f);
	if (rc)
		goto out;
	t0 = mono_sec();
	wo.path = path;
	rc = ck_write_data(s, f, t, n, offs, crcs, &wo, &wr);
	st->write_s = mono_sec() - t0;
	st->writers = wr.writers;
	st->pieces = wr.pieces;
	st->bytes = off;
	if (rc)
		goto out;
	t0 = mono_sec();
	rc = strata_fsync(f);
	st->sync_s = mono_sec() - t0;
	if (rc)
		goto out;
	t0 = mono_sec();
	for (size_t i = 0; i < n; i++) {
		json_t *tj = ck_tensor_json(&t[i], o->rank, offs[i], crcs[i]);

		if (!tj || json_array_append_new(arr, tj)) {
			rc = -ENOMEM;
			goto out;
		}
	}
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
	rc = fsu_join(jpath, sizeof(jpath), tmp, name);
	if (!rc) {
		snprintf(name, sizeof(name), "shard-%05u.json.part", o->rank);
		rc = fsu_join(jtmp, sizeof(jtmp), tmp, name);
	}
	if (!rc)
		rc = fsu_write_file(s, jtmp, text, strlen(text));
	if (!rc)
		rc = strata_rename(s, jtmp, jpath, 0);
	st->part_s = mono_sec() - t0;
out:
	if (f) {
		int crc = strata_close(f);

		rc = rc ? rc : crc;
	}
	json_decref(meta);
	json_decref(part);
	free(text);
	free(offs);
	free(crcs);
	return rc;
}

/* Rank 0: waits for every part, merges them into manifest.json. */
static int ck_write_manifest(struct strata *s, const char *tmp,
			     const struct strata_ckpt_save_opts *o,
			     struct strata_ckpt_save_stats *st)
{
	char name[64], path[CK_PATH_MAX];
	json_t *man = json_object(), *shards = json_array(), *tensors = json_array();
	uint64_t deadline = mono_ms() + o->wait_ms;
	double t0 = mono_sec();
	char *text = NULL;
	int rc = 0;

	if (!man || !shards || !tensors) {
		json_decref(shards);
		json_decref(tensors);
		rc = -ENOMEM;
		goto out;
	}
	json_object_set_new(man, "format", json_string(CK_FORMAT));
	json_object_set_new(man, "version", json_integer(1));
	json_object_set_new(man, "created_ns", json_integer((json_int_t)now_ns()));
	json_object_set_new(man, "world_size", json_integer(o->world_size));
	json_object_set_new(man, "shards", shards);
	json_object_set_new(man, "tensors", tensors);
	for (uint32_t r = 0; r < o->world_size; r++) {
		json_t *part, *sh, *ts, *v;
		size_t i;

		snprintf(name, sizeof(name), "shard-%05u.json", r);
		rc = fsu_join(path, sizeof(path), tmp, name);
		if (rc)
			goto out;
		for (;;) {
			part = fsu_read_json(s, path, CK_JSON_MAX, &rc);
			if (part || rc != -ENOENT)
				break;
			if (mono_ms() >= deadline) {
				rc = -ETIMEDOUT;
				goto out;
			}
			usleep(20000);
		}
		if (!part)
			goto out;
		if (r + 1 == o->world_size) {
			st->wait_s = mono_sec() - t0;
			t0 = mono_sec();
		}
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
	rc = fsu_join(path, sizeof(path), tmp, "manifest.json");
	if (!rc)
		rc = fsu_write_file(s, path, text, strlen(text));
	st->manifest_s = mono_sec() - t0;
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
		return fsu_rmtree(s, tmp);	/* tmp now holds the old one */
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
	return fsu_rmtree(s, old);
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

/* Copies what this save measured into the caller's stats, as far as the
 * caller's struct reaches. */
static void ck_give_stats(const struct strata_ckpt_save_stats *st,
			  struct strata_ckpt_save_stats *out)
{
	size_t n;

	if (!out || out->stats_size < sizeof(out->stats_size))
		return;
	n = out->stats_size < sizeof(*st) ? out->stats_size : sizeof(*st);
	memcpy((char *)out + sizeof(out->stats_size), (const char *)st + sizeof(st->stats_size),
	       n - sizeof(st->stats_size));
}

static int ck_save(struct strata *s, const char *path, const struct strata_ckpt_tensor *t,
		   size_t n, struct strata_ckpt_save_opts *o, struct strata_ckpt_save_stats *st)
{
	char tmp[CK_PATH_MAX], tagbuf[64], parent[CK_PATH_MAX];
	struct strata_stat sst;
	double t0;
	int rc;

	if (!s || !path || path[0] != '/' || (n && !t) || !o->world_size ||
	    o->rank >= o->world_size || (!o->tag && o->world_size > 1))
		return -EINVAL;
	if (o->tag && (!*o->tag || strchr(o->tag, '/')))
		return -EINVAL;
	rc = ck_check_tensors(t, n);
	if (rc)
		return rc;
	if (!o->tag) {
		snprintf(tagbuf, sizeof(tagbuf), "p%d-%" PRIu64, (int)getpid(), now_ns());
		o->tag = tagbuf;
	}
	if (!o->replace && strata_stat(s, path, &sst) == 0)
		return -EEXIST;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp-%s", path, o->tag) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	rc = strata_mkdir(s, tmp, 0755);
	if (rc == -EEXIST && o->world_size == 1) {
		/* A stale attempt with the same tag: start over. */
		rc = fsu_rmtree(s, tmp);
		if (!rc)
			rc = strata_mkdir(s, tmp, 0755);
	} else if (rc == -EEXIST) {
		rc = 0;		/* another rank made it */
	}
	if (rc)
		return rc;
	rc = ck_write_shard(s, tmp, t, n, o, st);
	if (rc || o->rank != 0)
		return rc;
	rc = ck_write_manifest(s, tmp, o, st);
	t0 = mono_sec();
	if (!rc)
		rc = ck_commit(s, tmp, path, o->tag, o->replace);
	st->commit_s = mono_sec() - t0;
	t0 = mono_sec();
	if (!rc && o->keep_last && ck_parent(path, parent, sizeof(parent)) == 0) {
		int pr = strata_ckpt_prune(s, parent, o->keep_last);

		if (pr < 0)
			rc = pr;
	}
	st->prune_s = mono_sec() - t0;
	return rc;
}

int strata_ckpt_save(struct strata *s, const char *path, const struct strata_ckpt_tensor *t,
		     size_t n, const struct strata_ckpt_save_opts *opts)
{
	struct strata_ckpt_save_opts o;
	struct strata_ckpt_save_stats st = { .stats_size = sizeof(st) };
	int rc;

	strata_ckpt_save_opts_init(&o, sizeof(o));
	if (opts)
		memcpy(&o, opts, opts->opts_size < sizeof(o) ? opts->opts_size : sizeof(o));
	o.opts_size = sizeof(o);
	rc = ck_save(s, path, t, n, &o, &st);
	ck_give_stats(&st, o.stats);
	return rc;
}
