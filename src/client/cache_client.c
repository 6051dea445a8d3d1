/*
 * libstrata's side of the read cache (client/cache.h, strata/cache.h,
 * docs/cache.md): the settings, the key of a file's blocks, the read path
 * (cl_submit) and the background prefetch thread.
 *
 * Coherence: only read-only opens use the cache, and their blocks are
 * keyed by a version made at open from the inode meta returned (cluster,
 * generation, ctime, mtime, size). Every published change of a file
 * (fsync or close after a write, truncate, setattr) moves its ctime on
 * meta's clock, so the next open of a changed file names other blocks:
 * close-to-open, as NFS gives. An open file keeps reading the blocks of
 * the version it opened.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "common/log.h"
#include "common/rand.h"
#include "strata/cache.h"

#define PF_QUEUE 64		/* paths waiting for the prefetch thread */
#define PF_DEPTH 16		/* blocks it reads at once */

struct cl_prefetch {
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop;
	char *q[PF_QUEUE];
	uint32_t head, n;
};

/* A size: digits with an optional K, M, G or T (powers of 1024). */
static int parse_size(const char *v, uint64_t *out)
{
	char *end;
	unsigned long long n;
	int shift = 0;

	if (!v || !*v || *v == '-')
		return -EINVAL;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || end == v)
		return -EINVAL;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	case 'T': case 't': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B')
		end += *end == 'i' && end[1] == 'B' ? 2 : 1;
	if (*end || (shift && n > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)n << shift;
	return 0;
}

/* *v from $name when it is 0 and the variable is set. */
static int env_size(const char *name, uint64_t *v)
{
	const char *e = getenv(name);

	if (*v || !e || !*e)
		return 0;
	if (parse_size(e, v)) {
		log_error("client", "$%s '%s' is not a size (bytes, or a number with K, M or G)",
			  name, e);
		return -EINVAL;
	}
	return 0;
}

int cl_cache_setup(struct strata *s, const struct strata_opts *given)
{
	struct cache_opts co;
	uint64_t mem = 0, disk = 0, block = 0;
	const char *dir = NULL;
	int rc;

	if (given && given->opts_size >= offsetof(struct strata_opts, cache_block) +
					   sizeof(given->cache_block)) {
		mem = given->cache_mem_bytes;
		dir = given->cache_dir;
		disk = given->cache_disk_bytes;
		block = given->cache_block;
	}
	if (!dir || !*dir)
		dir = getenv("STRATA_CACHE_DIR");
	rc = env_size("STRATA_CACHE_MEM", &mem);
	if (!rc)
		rc = env_size("STRATA_CACHE_DISK", &disk);
	if (!rc)
		rc = env_size("STRATA_CACHE_BLOCK", &block);
	if (rc)
		return rc;
	if (!mem && !(dir && *dir))
		return 0;	/* no cache: the default */
	cache_opts_init(&co, sizeof(co));
	co.mem_bytes = mem;
	co.dir = dir && *dir ? dir : NULL;
	if (disk)
		co.disk_bytes = disk;
	if (block) {
		if (block < CACHE_BLOCK_MIN || block > CACHE_BLOCK_MAX || (block & (block - 1))) {
			log_error("client", "cache block size %" PRIu64 " is not a power of two "
				  "from 4 KiB to 16 MiB", block);
			return -EINVAL;
		}
		co.block = (uint32_t)block;
	}
	/* Each of the DRAM tier's shards must hold a block at least. */
	if (mem && mem < (uint64_t)CACHE_SHARDS_MIN_BLOCKS * co.block) {
		log_error("client", "a DRAM cache of %" PRIu64 " bytes is too small for blocks of "
			  "%u bytes: give it %u blocks or more", mem, co.block,
			  CACHE_SHARDS_MIN_BLOCKS);
		return -EINVAL;
	}
	rc = cache_new(&co, &s->cache);
	if (rc == -EPERM)
		log_error("client", "cache directory '%s' is another user's or open to others: "
			  "use a directory of this user with mode 0700", co.dir);
	else if (rc)
		log_error("client", "cannot set up the read cache%s%s%s: %s", co.dir ? " in '" : "",
			  co.dir ? co.dir : "", co.dir ? "'" : "", strata_strerror(rc));
	return rc;
}

void cl_cache_file(struct strata_file *f, const struct mt_inode *in)
{
	struct strata *s = f->s;
	uint64_t v, cluster = 0;

	f->cache_ver = 0;
	if (!s->cache || (f->flags & 3) != STRATA_O_RDONLY || !f->layout.chunk_size)
		return;
	for (const char *p = s->mgmt; *p; p++)
		cluster = splitmix64(cluster ^ (uint8_t)*p);
	v = splitmix64(cluster ^ in->gen);
	v = splitmix64(v ^ (uint64_t)in->ctime_ns);
	v = splitmix64(v ^ (uint64_t)in->mtime_ns);
	v = splitmix64(v ^ in->size);
	f->cache_ver = v ? v : 1;
	f->cache_bs = cache_block(s->cache);
	if (f->cache_bs > f->layout.chunk_size)
		f->cache_bs = f->layout.chunk_size;
}

/* A piece that missed: its block is in p->fill; keep it, give the caller
 * its bytes, and hand the piece back as it was submitted. */
static void fill_done(struct sc_io *io)
{
	struct io_piece *p = (struct io_piece *)io;

	if (!io->status) {
		memcpy(p->dst, (uint8_t *)p->fill + p->dst_off, p->dst_len);
		cache_put(p->cache, &p->key, p->fill);
	} else {
		cache_buf_free(p->fill);
	}
	p->fill = NULL;
	io->buf = p->dst;
	io->offset += p->dst_off;
	io->len = p->dst_len;
	io->cb = p->done;
	p->done(io);
}

void cl_submit(struct strata_file *f, struct io_piece *p)
{
	cl_submit_via(f, p, NULL);
}

void cl_submit_via(struct strata_file *f, struct io_piece *p, struct sclient *sc)
{
	struct sc_io *io = &p->io;

	p->fill = NULL;
	if (io->kind == SC_READ && f->cache_ver) {
		struct cache_key k = { .ino = io->ino, .ver = f->cache_ver, .idx = io->idx,
				       .blk = io->offset / f->cache_bs, .bsize = f->cache_bs };
		uint32_t in = io->offset % f->cache_bs;

		if (cache_get(f->s->cache, &k, in, io->len, io->buf)) {
			io->status = 0;
			io->nread = io->len;
			io->cb(io);
			return;
		}
		p->fill = cache_buf_new(&k);
		if (p->fill) {
			p->key = k;
			p->cache = f->s->cache;
			p->dst = io->buf;
			p->dst_off = in;
			p->dst_len = io->len;
			p->done = io->cb;
			io->buf = p->fill;
			io->offset -= in;
			io->len = f->cache_bs;
			io->cb = fill_done;
		}
	}
	sc_submit(sc ? sc : cl_pick_sc(f->s), io);
}

/* ---- prefetch ---- */

/* Reads the blocks of path the cache lacks, PF_DEPTH at a time, until
 * done or the connection stops. */
static void pf_file(struct strata *s, const char *path, struct strata_ring *ring, uint8_t *buf)
{
	struct strata_cqe cqes[PF_DEPTH];
	struct strata_file *f;
	uint64_t off = 0, got = 0;
	uint32_t inflight = 0, slot = 0;

	if (strata_open(s, path, STRATA_O_RDONLY, 0, &f))
		return;
	if (!f->cache_ver)
		goto out;
	for (off = 0; off < f->size && !__atomic_load_n(&s->pf->stop, __ATOMIC_RELAXED);
	     off += f->cache_bs) {
		struct cache_key k = { .ino = f->ino, .ver = f->cache_ver,
				       .idx = off / f->layout.chunk_size,
				       .blk = (uint32_t)(off % f->layout.chunk_size / f->cache_bs),
				       .bsize = f->cache_bs };

		if (cache_has(s->cache, &k))
			continue;
		if (inflight == PF_DEPTH) {
			int n = strata_ring_wait(ring, cqes, PF_DEPTH, 1, -1);

			inflight -= n > 0 ? (uint32_t)n : 0;
			for (int i = 0; i < n; i++)
				got += cqes[i].res > 0;
		}
		/* Slots are reused round robin: the read into one is reaped
		 * before PF_DEPTH more are issued, and its bytes are not used. */
		if (strata_ring_prep_read(ring, f, buf + (size_t)(slot++ % PF_DEPTH) * f->cache_bs,
					  f->cache_bs, off, 0) == 0) {
			inflight++;
			strata_ring_submit(ring);
		}
	}
	while (inflight) {
		int n = strata_ring_wait(ring, cqes, PF_DEPTH, inflight, -1);

		if (n <= 0)
			break;
		inflight -= (uint32_t)n;
		for (int i = 0; i < n; i++)
			got += cqes[i].res > 0;
	}
	cache_note_prefetch(s->cache, got);
out:
	strata_close(f);
}

static void *pf_main(void *arg)
{
	struct strata *s = arg;
	struct cl_prefetch *pf = s->pf;
	struct strata_ring *ring = NULL;
	uint8_t *buf = malloc((size_t)PF_DEPTH * cache_block(s->cache));

	if (buf && strata_ring_new(s, PF_DEPTH, &ring))
		ring = NULL;
	for (;;) {
		char *path;

		pthread_mutex_lock(&pf->mu);
		while (!pf->stop && !pf->n)
			pthread_cond_wait(&pf->cv, &pf->mu);
		if (pf->stop) {
			pthread_mutex_unlock(&pf->mu);
			break;
		}
		path = pf->q[pf->head];
		pf->head = (pf->head + 1) % PF_QUEUE;
		pf->n--;
		pthread_mutex_unlock(&pf->mu);
		if (ring)
			pf_file(s, path, ring, buf);
		free(path);
	}
	strata_ring_free(ring);
	free(buf);
	return NULL;
}

void cl_cache_stop(struct strata *s)
{
	struct cl_prefetch *pf = s->pf;

	if (!pf)
		return;
	pthread_mutex_lock(&pf->mu);
	__atomic_store_n(&pf->stop, true, __ATOMIC_RELAXED);
	pthread_cond_signal(&pf->cv);
	pthread_mutex_unlock(&pf->mu);
	pthread_join(pf->thread, NULL);
	for (; pf->n; pf->n--, pf->head = (pf->head + 1) % PF_QUEUE)
		free(pf->q[pf->head]);
	pthread_mutex_destroy(&pf->mu);
	pthread_cond_destroy(&pf->cv);
	free(pf);
	s->pf = NULL;
}

void cl_cache_free(struct strata *s)
{
	cache_free(s->cache);
	s->cache = NULL;
}

static pthread_mutex_t pf_start_mu = PTHREAD_MUTEX_INITIALIZER;

/* Starts s's prefetch thread once. */
static int pf_start(struct strata *s)
{
	struct cl_prefetch *pf;
	int rc = 0;

	pthread_mutex_lock(&pf_start_mu);
	if (s->pf)
		goto out;
	pf = calloc(1, sizeof(*pf));
	if (!pf) {
		rc = -ENOMEM;
		goto out;
	}
	pthread_mutex_init(&pf->mu, NULL);
	pthread_cond_init(&pf->cv, NULL);
	s->pf = pf;
	rc = -pthread_create(&pf->thread, NULL, pf_main, s);
	if (rc) {
		pthread_mutex_destroy(&pf->mu);
		pthread_cond_destroy(&pf->cv);
		free(pf);
		s->pf = NULL;
	}
out:
	pthread_mutex_unlock(&pf_start_mu);
	return rc;
}

int strata_cache_prefetch(struct strata *s, const char *path)
{
	struct cl_prefetch *pf;
	char *copy;
	int rc;

	if (!s || !path || path[0] != '/')
		return -EINVAL;
	if (!s->cache)
		return -ENOENT;
	rc = pf_start(s);
	if (rc)
		return rc;
	pf = s->pf;
	copy = strdup(path);
	if (!copy)
		return -ENOMEM;
	pthread_mutex_lock(&pf->mu);
	if (pf->n == PF_QUEUE) {
		pthread_mutex_unlock(&pf->mu);
		free(copy);
		return -EAGAIN;
	}
	pf->q[(pf->head + pf->n) % PF_QUEUE] = copy;
	pf->n++;
	pthread_cond_signal(&pf->cv);
	pthread_mutex_unlock(&pf->mu);
	return 0;
}

int strata_cache_stats(struct strata *s, struct strata_cache_stats *st)
{
	if (!s || !st || st->stats_size < sizeof(size_t))
		return -EINVAL;
	if (!s->cache)
		return -ENOENT;
	cache_stats(s->cache, st);
	return 0;
}

int strata_cache_dir_stats(const char *dir, struct strata_cache_stats *st)
{
	return cache_dir_stats(dir, st);
}
