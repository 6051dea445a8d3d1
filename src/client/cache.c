/*
 * The block cache (cache.h, docs/cache.md): a sharded SLRU in DRAM over
 * an optional directory of checksummed block files shared by the
 * processes of a node, with node-wide counters in a shared mapping of
 * DIR/stats.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "client/cache.h"
#include "common/crc32c.h"
#include "common/fileio.h"
#include "common/rand.h"
#include "net/codec.h"
#include "strata/errors.h"

#define CACHE_SHARDS CACHE_SHARDS_MIN_BLOCKS
#define PROTECTED_PCT 80	/* of a shard's bytes: blocks hit at least twice */
#define DISK_SUBDIRS 256
#define DISK_HDR 48
#define DISK_MAGIC "STRCBLK1"
#define STATS_MAGIC "STRCSTA1"
#define STATS_FILE "stats"
#define STATS_LEN 4096
#define DISK_DEFAULT (4ull << 30)
#define TRIM_PCT 90		/* a trim leaves the disk tier at this much of its bound */
#define TMP_STALE_S 600		/* a scan removes temp files older than this */

enum { C_HITS, C_MISSES, C_HIT_BYTES, C_FILL_BYTES, C_DISK_HITS, C_EVICT, C_DISK_EVICT,
       C_DISK_CORRUPT, C_PREFETCH, C_N };

struct shared_stats {
	char magic[8];
	uint64_t c[C_N];
};

_Static_assert(sizeof(struct shared_stats) <= STATS_LEN, "stats fit their file");

enum { SEG_PROBATION, SEG_PROTECTED };

struct centry {
	struct cache_key k;
	uint64_t h;
	struct centry *hnext;		/* hash chain */
	struct centry *prev, *next;	/* its segment's list, most recent first */
	uint32_t refs;			/* readers copying out of data (lock) */
	bool dead;			/* dropped while read: the last reader frees it */
	uint8_t seg;
	uint8_t *data;
};

struct cshard {
	pthread_mutex_t mu;
	struct centry **tab;
	uint32_t mask;
	struct centry lists[2];		/* sentinels */
	uint64_t bytes[2];
	uint64_t cap;
	uint64_t hits, hit_bytes;	/* DRAM hits (lock): no shared line on the hot path */
};

struct cache {
	uint64_t mem_bytes, disk_bytes;
	uint32_t block;
	char *dir;			/* NULL: no disk tier */
	struct cshard sh[CACHE_SHARDS];
	uint64_t local[C_N];
	struct shared_stats *shared;	/* DIR/stats mapped, or NULL */
	pthread_mutex_t disk_mu;	/* one trim at a time */
	uint64_t disk_used;		/* as of the last scan, plus what we wrote */
	uint64_t seq;			/* temp file names */
};

void cache_opts_init(struct cache_opts *o, size_t size)
{
	struct cache_opts d = { .opts_size = sizeof(d), .disk_bytes = DISK_DEFAULT,
				.block = 1u << 20 };

	if (size > sizeof(d))
		size = sizeof(d);
	memcpy(o, &d, size);
	o->opts_size = size;
}

static void count(struct cache *c, int i, uint64_t v)
{
	__atomic_fetch_add(&c->local[i], v, __ATOMIC_RELAXED);
	if (c->shared)
		__atomic_fetch_add(&c->shared->c[i], v, __ATOMIC_RELAXED);
}

static uint64_t key_hash(const struct cache_key *k)
{
	return splitmix64(k->ino ^ splitmix64(k->ver ^ splitmix64(k->idx ^ splitmix64(
		((uint64_t)k->blk << 32) | k->bsize))));
}

static bool key_eq(const struct cache_key *a, const struct cache_key *b)
{
	return a->ino == b->ino && a->ver == b->ver && a->idx == b->idx && a->blk == b->blk &&
	       a->bsize == b->bsize;
}

/* ---- DRAM: lists ---- */

static void list_init(struct centry *s)
{
	s->prev = s->next = s;
}

static void list_del(struct centry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void list_push(struct centry *s, struct centry *e)
{
	e->next = s->next;
	e->prev = s;
	s->next->prev = e;
	s->next = e;
}

static struct centry *list_tail(struct centry *s)
{
	return s->prev == s ? NULL : s->prev;
}

static void seg_move(struct cshard *sh, struct centry *e, int seg)
{
	list_del(e);
	sh->bytes[e->seg] -= e->k.bsize;
	e->seg = (uint8_t)seg;
	sh->bytes[seg] += e->k.bsize;
	list_push(&sh->lists[seg], e);
}

static struct centry **slot(struct cshard *sh, const struct cache_key *k, uint64_t h)
{
	struct centry **p = &sh->tab[(h >> 4) & sh->mask];

	while (*p && !((*p)->h == h && key_eq(&(*p)->k, k)))
		p = &(*p)->hnext;
	return p;
}

/* Drops e from the shard (lock held) and frees it, or leaves that to
 * the last reader still copying out of it. */
static void drop(struct cshard *sh, struct centry *e)
{
	struct centry **p = slot(sh, &e->k, e->h);

	*p = e->hnext;
	list_del(e);
	sh->bytes[e->seg] -= e->k.bsize;
	if (e->refs) {
		e->dead = true;
		return;
	}
	free(e->data);
	free(e);
}

/* Keeps the protected segment under its share and the shard under its
 * bound: the protected segment's oldest blocks go back to probation, the
 * probation segment's oldest leave. Returns blocks evicted. */
static uint64_t rebalance(struct cshard *sh)
{
	uint64_t n = 0;
	struct centry *e;

	while (sh->bytes[SEG_PROTECTED] > sh->cap / 100 * PROTECTED_PCT &&
	       (e = list_tail(&sh->lists[SEG_PROTECTED])))
		seg_move(sh, e, SEG_PROBATION);
	while (sh->bytes[SEG_PROBATION] + sh->bytes[SEG_PROTECTED] > sh->cap) {
		e = list_tail(&sh->lists[SEG_PROBATION]);
		if (!e)
			e = list_tail(&sh->lists[SEG_PROTECTED]);
		if (!e)
			break;
		drop(sh, e);
		n++;
	}
	return n;
}

/* Looks k up in DRAM; on a hit promotes the block and copies it out
 * (outside the lock: the entry is held by a reference meanwhile). buf
 * NULL: a probe, which neither counts nor promotes. */
static bool mem_get(struct cache *c, const struct cache_key *k, uint64_t h, uint32_t off,
		    uint32_t len, void *buf)
{
	struct cshard *sh = &c->sh[h % CACHE_SHARDS];
	struct centry *e;

	if (!sh->tab)
		return false;
	pthread_mutex_lock(&sh->mu);
	e = *slot(sh, k, h);
	if (!e || !buf) {
		pthread_mutex_unlock(&sh->mu);
		return e != NULL;
	}
	e->refs++;
	sh->hits++;
	sh->hit_bytes += len;
	seg_move(sh, e, SEG_PROTECTED);
	if (sh->bytes[SEG_PROTECTED] > sh->cap / 100 * PROTECTED_PCT)
		rebalance(sh);
	pthread_mutex_unlock(&sh->mu);
	memcpy(buf, e->data + off, len);
	pthread_mutex_lock(&sh->mu);
	if (--e->refs == 0 && e->dead) {
		free(e->data);
		free(e);
	}
	pthread_mutex_unlock(&sh->mu);
	return true;
}

/* Takes data into DRAM (frees it when there is no room or it is there). */
static void mem_put(struct cache *c, const struct cache_key *k, uint64_t h, void *data)
{
	struct cshard *sh = &c->sh[h % CACHE_SHARDS];
	struct centry **p, *e;
	uint64_t ev = 0;

	if (!sh->tab || k->bsize > sh->cap) {
		free(data);
		return;
	}
	e = malloc(sizeof(*e));
	if (!e) {
		free(data);
		return;
	}
	pthread_mutex_lock(&sh->mu);
	p = slot(sh, k, h);
	if (*p) {
		/* Filled twice by readers that missed together: same bytes. */
		pthread_mutex_unlock(&sh->mu);
		free(e);
		free(data);
		return;
	}
	e->k = *k;
	e->h = h;
	e->hnext = NULL;
	e->refs = 0;
	e->dead = false;
	e->data = data;
	e->seg = SEG_PROBATION;
	*p = e;
	list_push(&sh->lists[SEG_PROBATION], e);
	sh->bytes[SEG_PROBATION] += k->bsize;
	ev = rebalance(sh);
	pthread_mutex_unlock(&sh->mu);
	if (ev)
		count(c, C_EVICT, ev);
}

/* ---- the disk tier ---- */

static int key_path(const struct cache *c, const struct cache_key *k, uint64_t h, char *out,
		    size_t len)
{
	int n = snprintf(out, len, "%s/%02x/%016" PRIx64 "-%016" PRIx64 "-%" PRIx64 "-%x-%x",
			 c->dir, (unsigned)(h & 0xff), k->ino, k->ver, k->idx, k->blk, k->bsize);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void hdr_encode(uint8_t *p, const struct cache_key *k, uint32_t data_crc)
{
	memcpy(p, DISK_MAGIC, 8);
	put_le64(p + 8, k->ino);
	put_le64(p + 16, k->ver);
	put_le64(p + 24, k->idx);
	put_le32(p + 32, k->blk);
	put_le32(p + 36, k->bsize);
	put_le32(p + 40, data_crc);
	put_le32(p + 44, crc32c(0, p, 44));
}

/* Reads block k from its file into data (bsize bytes): true when the
 * file is there and passes every check; a file that fails one is
 * removed. */
static bool disk_get(struct cache *c, const struct cache_key *k, uint64_t h, uint8_t *data)
{
	uint8_t hdr[DISK_HDR], want[DISK_HDR];
	char path[4096];
	bool ok = false;
	int fd;

	if (key_path(c, k, h, path, sizeof(path)))
		return false;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (pread_full(fd, hdr, DISK_HDR, 0) == 0 && pread_full(fd, data, k->bsize, DISK_HDR) == 0) {
		hdr_encode(want, k, crc32c(0, data, k->bsize));
		ok = memcmp(hdr, want, DISK_HDR) == 0;
	}
	if (ok)
		futimens(fd, NULL);	/* its last use, for the trim's order */
	close(fd);
	if (!ok) {
		unlink(path);
		count(c, C_DISK_CORRUPT, 1);
	}
	return ok;
}

struct dfile {
	int64_t mtime;
	uint64_t size;
	char name[64];
	uint8_t sub;
};

static int dfile_cmp(const void *a, const void *b)
{
	const struct dfile *x = a, *y = b;

	return x->mtime < y->mtime ? -1 : x->mtime > y->mtime;
}

/*
 * Scans the disk tier (every process's files) and, when it holds more
 * than limit bytes, removes the least recently used until it holds
 * TRIM_PCT% of limit; temp files older than TMP_STALE_S go too (not when
 * limit is UINT64_MAX: a count only). *used gets what is left. Returns
 * files removed, or a negative error.
 */
static int64_t disk_scan(const char *dir, uint64_t limit, uint64_t *used)
{
	struct dfile *v = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	int64_t removed = 0;
	char path[4096];

	for (unsigned s = 0; s < DISK_SUBDIRS; s++) {
		struct dirent *de;
		DIR *d;

		snprintf(path, sizeof(path), "%s/%02x", dir, s);
		d = opendir(path);
		if (!d)
			continue;
		while ((de = readdir(d))) {
			struct stat st;

			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
			    strlen(de->d_name) >= sizeof(v->name))
				continue;
			if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
			    !S_ISREG(st.st_mode))
				continue;
			if (de->d_name[0] == '.') {
				/* A temp file a process died writing: gone after a while. */
				if (limit != UINT64_MAX && !strncmp(de->d_name, ".tmp-", 5) &&
				    st.st_mtim.tv_sec + TMP_STALE_S < time(NULL))
					unlinkat(dirfd(d), de->d_name, 0);
				continue;
			}
			if (n == cap) {
				struct dfile *nv = realloc(v, (cap ? cap * 2 : 1024) * sizeof(*v));

				if (!nv) {
					closedir(d);
					free(v);
					return -ENOMEM;
				}
				v = nv;
				cap = cap ? cap * 2 : 1024;
			}
			v[n].mtime = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
			v[n].size = (uint64_t)st.st_size;
			v[n].sub = (uint8_t)s;
			memcpy(v[n].name, de->d_name, strlen(de->d_name) + 1);
			total += v[n].size;
			n++;
		}
		closedir(d);
	}
	if (total > limit) {
		qsort(v, n, sizeof(*v), dfile_cmp);
		for (size_t i = 0; i < n && total > limit / 100 * TRIM_PCT; i++) {
			snprintf(path, sizeof(path), "%s/%02x/%s", dir, v[i].sub, v[i].name);
			if (unlink(path) == 0) {
				total -= v[i].size;
				removed++;
			}
		}
	}
	free(v);
	*used = total;
	return removed;
}

/* Writes block k's file (a temp file renamed into place: a reader sees a
 * whole file or none), then trims when the tier is over its bound. */
static void disk_put(struct cache *c, const struct cache_key *k, uint64_t h, const void *data)
{
	uint8_t hdr[DISK_HDR];
	char path[4096], tmp[4096];
	struct iovec iov[2];
	uint64_t used;
	ssize_t w;
	int fd, n;

	if (key_path(c, k, h, path, sizeof(path)))
		return;
	n = snprintf(tmp, sizeof(tmp), "%s/%02x/.tmp-%d-%" PRIu64, c->dir, (unsigned)(h & 0xff),
		     (int)getpid(), __atomic_fetch_add(&c->seq, 1, __ATOMIC_RELAXED));
	if (n < 0 || (size_t)n >= sizeof(tmp))
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return;
	hdr_encode(hdr, k, crc32c(0, data, k->bsize));
	iov[0] = (struct iovec){ hdr, DISK_HDR };
	iov[1] = (struct iovec){ (void *)data, k->bsize };
	w = writev(fd, iov, 2);
	close(fd);
	if (w != (ssize_t)(DISK_HDR + k->bsize) || rename(tmp, path)) {
		unlink(tmp);
		return;
	}
	used = __atomic_add_fetch(&c->disk_used, DISK_HDR + k->bsize, __ATOMIC_RELAXED);
	if (used > c->disk_bytes && pthread_mutex_trylock(&c->disk_mu) == 0) {
		int64_t removed = disk_scan(c->dir, c->disk_bytes, &used);

		if (removed >= 0) {
			__atomic_store_n(&c->disk_used, used, __ATOMIC_RELAXED);
			count(c, C_DISK_EVICT, (uint64_t)removed);
		}
		pthread_mutex_unlock(&c->disk_mu);
	}
}

/* Maps DIR/stats, creating it; a file that is not ours is an error. */
static int stats_map(const char *dir, bool create, struct shared_stats **out)
{
	char path[4096];
	struct stat st;
	void *m;
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s/" STATS_FILE, dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, (create ? O_RDWR | O_CREAT : O_RDONLY) | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		rc = -errno;
	} else if (st.st_size != STATS_LEN) {
		if (!create || st.st_size != 0)
			rc = STRATA_EBADMSG;
		else if (ftruncate(fd, STATS_LEN))
			rc = -errno;
	}
	if (rc) {
		close(fd);
		return rc;
	}
	m = mmap(NULL, STATS_LEN, create ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	*out = m;
	if (create) {
		static const char zero[8];

		/* Two processes creating it at once both write the same magic
		 * over zeros; counters start at zero either way. */
		if (!memcmp((*out)->magic, zero, 8))
			memcpy((*out)->magic, STATS_MAGIC, 8);
	}
	if (memcmp((*out)->magic, STATS_MAGIC, 8)) {
		munmap(m, STATS_LEN);
		*out = NULL;
		return STRATA_EBADMSG;
	}
	return 0;
}

static int disk_init(struct cache *c, const char *dir)
{
	char path[4096];
	int rc;

	c->dir = strdup(dir);
	if (!c->dir)
		return -ENOMEM;
	rc = mkdir_p(dir, 0700);
	if (!rc) {
		struct stat st;

		/* Its blocks are file data meta let this user read: a directory
		 * of another user is not one to write them into, nor to trust. */
		if (stat(dir, &st))
			rc = -errno;
		else if (st.st_uid != geteuid() || (st.st_mode & 0077))
			rc = -EPERM;
	}
	for (unsigned s = 0; !rc && s < DISK_SUBDIRS; s++) {
		if (snprintf(path, sizeof(path), "%s/%02x", dir, s) >= (int)sizeof(path))
			return -ENAMETOOLONG;
		if (mkdir(path, 0700) && errno != EEXIST)
			rc = -errno;
	}
	if (!rc)
		rc = stats_map(dir, true, &c->shared);
	if (!rc) {
		int64_t removed = disk_scan(dir, c->disk_bytes, &c->disk_used);

		if (removed > 0)
			count(c, C_DISK_EVICT, (uint64_t)removed);
	}
	return rc;
}

/* ---- the cache ---- */

int cache_new(const struct cache_opts *opts, struct cache **out)
{
	struct cache_opts o;
	struct cache *c;
	int rc = 0;

	cache_opts_init(&o, sizeof(o));
	if (opts)
		memcpy(&o, opts, opts->opts_size < sizeof(o) ? opts->opts_size : sizeof(o));
	if (o.block < CACHE_BLOCK_MIN || o.block > CACHE_BLOCK_MAX || (o.block & (o.block - 1)) ||
	    (!o.mem_bytes && !(o.dir && o.dir[0])) || !out)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->mem_bytes = o.mem_bytes;
	c->disk_bytes = o.disk_bytes ? o.disk_bytes : DISK_DEFAULT;
	c->block = o.block;
	pthread_mutex_init(&c->disk_mu, NULL);
	for (int i = 0; i < CACHE_SHARDS; i++) {
		struct cshard *sh = &c->sh[i];
		uint64_t blocks = o.mem_bytes / CACHE_SHARDS / o.block + 1;
		uint32_t nb = 16;

		pthread_mutex_init(&sh->mu, NULL);
		list_init(&sh->lists[0]);
		list_init(&sh->lists[1]);
		sh->cap = o.mem_bytes / CACHE_SHARDS;
		if (!o.mem_bytes)
			continue;
		while (nb < blocks * 2 && nb < (1u << 24))
			nb *= 2;
		sh->tab = calloc(nb, sizeof(*sh->tab));
		sh->mask = nb - 1;
		if (!sh->tab)
			rc = -ENOMEM;
	}
	if (!rc && o.dir && o.dir[0])
		rc = disk_init(c, o.dir);
	if (rc) {
		cache_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

void cache_free(struct cache *c)
{
	if (!c)
		return;
	for (int i = 0; i < CACHE_SHARDS; i++) {
		struct cshard *sh = &c->sh[i];

		for (int s = 0; sh->tab && s < 2; s++) {
			struct centry *e;

			while ((e = list_tail(&sh->lists[s]))) {
				list_del(e);
				free(e->data);
				free(e);
			}
		}
		free(sh->tab);
		pthread_mutex_destroy(&sh->mu);
	}
	if (c->shared)
		munmap(c->shared, STATS_LEN);
	pthread_mutex_destroy(&c->disk_mu);
	free(c->dir);
	free(c);
}

uint32_t cache_block(const struct cache *c)
{
	return c->block;
}

void *cache_buf_new(const struct cache_key *k)
{
	return malloc(k->bsize);
}

void cache_buf_free(void *data)
{
	free(data);
}

bool cache_get(struct cache *c, const struct cache_key *k, uint32_t off, uint32_t len, void *buf)
{
	uint64_t h = key_hash(k);
	uint8_t *data;

	if (off > k->bsize || len > k->bsize - off)
		return false;
	if (mem_get(c, k, h, off, len, buf)) {
		if (c->shared) {
			__atomic_fetch_add(&c->shared->c[C_HITS], 1, __ATOMIC_RELAXED);
			__atomic_fetch_add(&c->shared->c[C_HIT_BYTES], len, __ATOMIC_RELAXED);
		}
		return true;
	}
	data = c->dir ? malloc(k->bsize) : NULL;
	if (data && disk_get(c, k, h, data)) {
		memcpy(buf, data + off, len);
		mem_put(c, k, h, data);
		count(c, C_HITS, 1);
		count(c, C_DISK_HITS, 1);
		count(c, C_HIT_BYTES, len);
		return true;
	}
	free(data);
	count(c, C_MISSES, 1);
	return false;
}

bool cache_has(struct cache *c, const struct cache_key *k)
{
	uint64_t h = key_hash(k);
	char path[4096];

	if (mem_get(c, k, h, 0, 0, NULL))
		return true;
	return c->dir && !key_path(c, k, h, path, sizeof(path)) && access(path, F_OK) == 0;
}

void cache_put(struct cache *c, const struct cache_key *k, void *data)
{
	uint64_t h = key_hash(k);

	count(c, C_FILL_BYTES, k->bsize);
	if (c->dir)
		disk_put(c, k, h, data);
	mem_put(c, k, h, data);
}

void cache_note_prefetch(struct cache *c, uint64_t n)
{
	count(c, C_PREFETCH, n);
}

/* Copies the counters cnt and the tiers' sizes into as much of *st as
 * the caller knows. */
static void fill_stats(struct strata_cache_stats *st, const uint64_t *cnt, const uint64_t tier[4])
{
	struct strata_cache_stats v = { .stats_size = sizeof(v) };
	size_t n = st->stats_size < sizeof(v) ? st->stats_size : sizeof(v);

	v.hits = __atomic_load_n(&cnt[C_HITS], __ATOMIC_RELAXED);
	v.misses = __atomic_load_n(&cnt[C_MISSES], __ATOMIC_RELAXED);
	v.hit_bytes = __atomic_load_n(&cnt[C_HIT_BYTES], __ATOMIC_RELAXED);
	v.fill_bytes = __atomic_load_n(&cnt[C_FILL_BYTES], __ATOMIC_RELAXED);
	v.disk_hits = __atomic_load_n(&cnt[C_DISK_HITS], __ATOMIC_RELAXED);
	v.evictions = __atomic_load_n(&cnt[C_EVICT], __ATOMIC_RELAXED);
	v.disk_evictions = __atomic_load_n(&cnt[C_DISK_EVICT], __ATOMIC_RELAXED);
	v.disk_corrupt = __atomic_load_n(&cnt[C_DISK_CORRUPT], __ATOMIC_RELAXED);
	v.prefetched = __atomic_load_n(&cnt[C_PREFETCH], __ATOMIC_RELAXED);
	v.mem_bytes = tier[0];
	v.mem_limit = tier[1];
	v.disk_bytes = tier[2];
	v.disk_limit = tier[3];
	if (n > sizeof(size_t))
		memcpy((char *)st + sizeof(size_t), (char *)&v + sizeof(size_t), n - sizeof(size_t));
}

void cache_stats(struct cache *c, struct strata_cache_stats *st)
{
	uint64_t mem = 0, local[C_N];

	if (!st || st->stats_size < sizeof(size_t))
		return;
	for (int i = 0; i < C_N; i++)
		local[i] = __atomic_load_n(&c->local[i], __ATOMIC_RELAXED);
	for (int i = 0; i < CACHE_SHARDS; i++) {
		pthread_mutex_lock(&c->sh[i].mu);
		mem += c->sh[i].bytes[0] + c->sh[i].bytes[1];
		local[C_HITS] += c->sh[i].hits;
		local[C_HIT_BYTES] += c->sh[i].hit_bytes;
		pthread_mutex_unlock(&c->sh[i].mu);
	}
	uint64_t tier[4] = { mem, c->mem_bytes,
			     c->dir ? __atomic_load_n(&c->disk_used, __ATOMIC_RELAXED) : 0,
			     c->dir ? c->disk_bytes : 0 };

	fill_stats(st, c->shared ? c->shared->c : local, tier);
}

int cache_dir_stats(const char *dir, struct strata_cache_stats *st)
{
	struct shared_stats *sh;
	uint64_t used = 0;
	int rc;

	if (!dir || !st || st->stats_size < sizeof(size_t))
		return -EINVAL;
	rc = stats_map(dir, false, &sh);
	if (rc)
		return rc;
	rc = (int)disk_scan(dir, UINT64_MAX, &used);
	fill_stats(st, sh->c, (uint64_t[4]){ 0, 0, used, 0 });
	munmap(sh, STATS_LEN);
	return rc < 0 ? rc : 0;
}
