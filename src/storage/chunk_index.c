/*
 * Chunk engine, second half: the on-disk metadata slots, the in-memory
 * index (hash map of chunk entries), the fd cache, and opening (layout,
 * scan, quarantine, temp-file cleanup) and closing a target; also the
 * synchronous queries (stat, list, space). See docs/chunk-engine.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/fileio.h"
#include "chunk_store_int.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "strata/errors.h"

int cs_chunk_path(const struct chunk_store *cs, const struct chunk_id *id,
		  const char *suffix, char *out, size_t size)
{
	int n = snprintf(out, size, "%s/chunks/%02x/%016" PRIx64 ".%016" PRIx64 "%s",
			 cs->dir, id_fanout(id), id->ino, id->idx, suffix);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* ---- metadata slots ---- */

struct slot {
	uint64_t seq, version;
	struct chunk_id id;
	uint32_t length, crc, nblocks, tag;
	const uint8_t *bcrc;            /* nblocks little-endian u32 */
	const uint8_t *map;             /* nblocks little-endian u16, or NULL */
};

void cs_map_norm(uint16_t **map, uint32_t n)
{
	if (!*map)
		return;
	for (uint32_t i = 0; i < n; i++)
		if ((*map)[i] != i)
			return;
	free(*map);
	*map = NULL;
}

void cs_ent_unmap(struct centry *e)
{
	if (!e->map)
		return;
	if (atomic_load(&e->map->refs) > 1)
		e->lent = true;
	chunk_hold_put(e->map);
	e->map = NULL;
}

void cs_slot_encode(uint8_t *p, uint64_t seq, const struct chunk_id *id,
			uint64_t version, uint32_t length, uint32_t crc, const uint32_t *bcrc,
			const uint16_t *bmap, uint32_t tag)
{
	uint32_t nb = nblocks(length);

	memset(p, 0, SLOT_SIZE);
	put32(p + 0, SLOT_MAGIC);
	put16(p + 4, bmap ? SLOT_FORMAT_MAP : SLOT_FORMAT);
	put16(p + 6, 0);
	put64(p + 8, seq);
	put64(p + 16, id->ino);
	put64(p + 24, id->idx);
	put64(p + 32, version);
	put32(p + 40, length);
	put32(p + 44, crc);
	put32(p + 48, CHUNK_BLOCK_SIZE);
	put32(p + 52, nb);
	for (uint32_t i = 0; i < nb; i++)
		put32(p + SLOT_FIXED + 4 * i, bcrc[i]);
	for (uint32_t i = 0; bmap && i < nb; i++)
		put16(p + SLOT_MAP_OFF + 2 * i, bmap[i]);
	put32(p + SLOT_TAG_OFF, tag);
	put32(p + SLOT_CRC_OFF, crc32c(0, p, SLOT_CRC_OFF));
}

/* Returns 0 when p holds a valid slot (filling *s), -1 otherwise. */
static int slot_decode(const uint8_t *p, struct slot *s)
{
	uint16_t fmt = get16(p + 4);

	if (get32(p) != SLOT_MAGIC || (fmt != SLOT_FORMAT && fmt != SLOT_FORMAT_MAP))
		return -1;
	if (get32(p + SLOT_CRC_OFF) != crc32c(0, p, SLOT_CRC_OFF))
		return -1;
	s->seq = get64(p + 8);
	s->id.ino = get64(p + 16);
	s->id.idx = get64(p + 24);
	s->version = get64(p + 32);
	s->length = get32(p + 40);
	s->crc = get32(p + 44);
	s->nblocks = get32(p + 52);
	s->tag = get32(p + SLOT_TAG_OFF);
	s->bcrc = p + SLOT_FIXED;
	s->map = fmt == SLOT_FORMAT_MAP ? p + SLOT_MAP_OFF : NULL;
	if (get32(p + 48) != CHUNK_BLOCK_SIZE || s->length > CHUNK_MAX_SIZE ||
	    s->nblocks != nblocks(s->length))
		return -1;
	if (s->map) {
		/* Each physical block in range and used once. */
		uint64_t seen[PHYS_MAX / 64] = { 0 };

		for (uint32_t i = 0; i < s->nblocks; i++) {
			uint32_t v = get16(s->map + 2 * i);

			if (v >= PHYS_MAX || (seen[v / 64] >> (v % 64) & 1))
				return -1;
			seen[v / 64] |= 1ull << (v % 64);
		}
	}
	return 0;
}

/* Picks the valid slot with the highest seq of a 16 KiB header.
 * Returns 0 or 1, or -1 when neither slot is valid. */
static int slot_pick(const uint8_t *hdr, struct slot *out)
{
	struct slot a, b;
	int va = slot_decode(hdr, &a) == 0, vb = slot_decode(hdr + SLOT_SIZE, &b) == 0;

	if (va && (!vb || a.seq >= b.seq)) {
		*out = a;
		return 0;
	}
	if (vb) {
		*out = b;
		return 1;
	}
	return -1;
}

/* ---- index: hash map of entries ---- */

static struct centry **ht_slot(struct chunk_store *cs, const struct chunk_id *id)
{
	struct centry **pp = &cs->ht[id_hash(id) & (cs->ht_cap - 1)];

	while (*pp && ((*pp)->id.ino != id->ino || (*pp)->id.idx != id->idx))
		pp = &(*pp)->hnext;
	return pp;
}

struct centry *cs_ent_find(struct chunk_store *cs, const struct chunk_id *id)
{
	return *ht_slot(cs, id);
}

static int ht_grow(struct chunk_store *cs)
{
	size_t ncap = cs->ht_cap * 2;
	struct centry **nt = calloc(ncap, sizeof(*nt));

	if (!nt)
		return -ENOMEM;
	for (size_t i = 0; i < cs->ht_cap; i++) {
		struct centry *e = cs->ht[i], *next;

		for (; e; e = next) {
			size_t h = id_hash(&e->id) & (ncap - 1);

			next = e->hnext;
			e->hnext = nt[h];
			nt[h] = e;
		}
	}
	free(cs->ht);
	cs->ht = nt;
	cs->ht_cap = ncap;
	return 0;
}

/* Finds or creates the entry of id (a new one does not exist yet). */
int cs_ent_get(struct chunk_store *cs, const struct chunk_id *id, struct centry **out)
{
	struct centry *e = cs_ent_find(cs, id);

	if (!e) {
		if (cs->ht_count >= cs->ht_cap && ht_grow(cs) < 0)
			return -ENOMEM;
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		e->id = *id;
		e->fd = -1;
		struct centry **pp = ht_slot(cs, id);
		*pp = e;
		cs->ht_count++;
	}
	*out = e;
	return 0;
}

void cs_lru_remove(struct chunk_store *cs, struct centry *e)
{
	if (!e->in_lru)
		return;
	if (e->lprev)
		e->lprev->lnext = e->lnext;
	else
		cs->lru_head = e->lnext;
	if (e->lnext)
		e->lnext->lprev = e->lprev;
	else
		cs->lru_tail = e->lprev;
	e->lprev = e->lnext = NULL;
	e->in_lru = false;
}

void cs_ent_close_fd(struct chunk_store *cs, struct centry *e)
{
	cs_lru_remove(cs, e);
	cs_ent_unmap(e);
	if (e->fd >= 0) {
		close(e->fd);
		e->fd = -1;
		cs->nopen--;
	}
}

/* Closes the least recently used idle fds beyond the cache size. */
static void lru_trim(struct chunk_store *cs)
{
	while (cs->nopen > FD_CACHE_MAX && cs->lru_head)
		cs_ent_close_fd(cs, cs->lru_head);
}

void cs_lru_push(struct chunk_store *cs, struct centry *e)
{
	if (e->in_lru || e->fd < 0)
		return;
	e->lprev = cs->lru_tail;
	e->lnext = NULL;
	if (cs->lru_tail)
		cs->lru_tail->lnext = e;
	else
		cs->lru_head = e;
	cs->lru_tail = e;
	e->in_lru = true;
	lru_trim(cs);
}

/* Unlinks an idle, non-existing entry from the index and frees it. */
void cs_ent_drop(struct chunk_store *cs, struct centry *e)
{
	struct centry **pp = ht_slot(cs, &e->id);

	*pp = e->hnext;
	cs->ht_count--;
	cs_ent_close_fd(cs, e);
	free(e->bcrc);
	free(e->bmap);
	free(e);
}

/* ---- files ---- */

static void direct_off(struct chunk_store *cs, const char *why)
{
	if (!cs->direct)
		return;
	cs->direct = false;
	log_warn(COMP, "target '%s': %s; falling back to buffered I/O", cs->dir, why);
}

/* open(2) with O_DIRECT while the store has it, falling back once when
 * the filesystem refuses it. Returns an fd or a negative errno. */
int cs_open_file(struct chunk_store *cs, const char *path, int flags)
{
	int fd;

	flags |= O_CLOEXEC;
	if (cs->direct) {
		fd = open(path, flags | O_DIRECT, 0644);
		if (fd >= 0)
			return fd;
		if (errno != EINVAL)
			return -errno;
		direct_off(cs, "the filesystem refuses O_DIRECT (EINVAL)");
	}
	fd = open(path, flags, 0644);
	return fd < 0 ? -errno : fd;
}

int cs_fd_mode(struct chunk_store *cs, struct centry *e, bool direct)
{
	int fl;

	if (!cs->direct || e->fd < 0 || e->fd_buffered == !direct)
		return 0;
	fl = fcntl(e->fd, F_GETFL);
	if (fl < 0 || fcntl(e->fd, F_SETFL, direct ? (fl | O_DIRECT) : (fl & ~O_DIRECT)) < 0)
		return -errno;
	e->fd_buffered = !direct;
	return 0;
}

int cs_ent_open_fd(struct chunk_store *cs, struct centry *e)
{
	char path[PATH_MAX];
	struct stat st;
	int rc, fd;

	if (e->fd >= 0)
		return 0;
	rc = cs_chunk_path(cs, &e->id, "", path, sizeof(path));
	if (rc)
		return rc;
	fd = cs_open_file(cs, path, O_RDWR);
	if (fd < 0) {
		log_error(COMP, "cannot open chunk file '%s': %s", path, strerror(-fd));
		return fd;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	e->fd = fd;
	e->fd_buffered = false;
	e->fsize = (uint64_t)st.st_size;
	cs->nopen++;
	lru_trim(cs);
	return 0;
}

/* fsync of the fan-out directory holding id, after a rename or unlink. */
int cs_fsync_dir_of(struct chunk_store *cs, const struct chunk_id *id)
{
	char path[PATH_MAX];
	int fd, rc = 0;

	if (snprintf(path, sizeof(path), "%s/chunks/%02x", cs->dir, id_fanout(id)) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

int chunk_stat(struct chunk_store *cs, const struct chunk_id *id, struct chunk_info *out)
{
	struct centry *e = cs_ent_find(cs, id);

	if (!e || !e->exists) {
		memset(out, 0, sizeof(*out));
		out->id = *id;
		out->version = e ? e->version : 0;
		return -ENOENT;
	}
	fill_info(out, e);
	return 0;
}

/* The oldest tombstone goes: its entry is dropped unless it holds a chunk
 * or operations again. */
static void tomb_evict(struct chunk_store *cs)
{
	struct chunk_id id = cs->tombs[cs->tomb_head];
	struct centry *e = cs_ent_find(cs, &id);

	cs->tomb_head = (cs->tomb_head + 1) % cs->o.tombstones;
	cs->tomb_n--;
	if (!e || !e->tomb)
		return;
	e->tomb = false;
	if (!e->exists && !e->qhead && !e->running)
		cs_ent_drop(cs, e);
}

void cs_ent_idle(struct chunk_store *cs, struct centry *e)
{
	if (!e->version || !cs->tombs) {
		cs_ent_drop(cs, e);
		return;
	}
	if (e->tomb)
		return;
	if (cs->tomb_n == cs->o.tombstones)
		tomb_evict(cs);
	cs->tombs[(cs->tomb_head + cs->tomb_n) % cs->o.tombstones] = e->id;
	cs->tomb_n++;
	e->tomb = true;
}

int chunk_list(struct chunk_store *cs, int (*fn)(void *arg, const struct chunk_info *info),
	       void *arg)
{
	struct chunk_info info;

	for (size_t i = 0; i < cs->ht_cap; i++) {
		for (struct centry *e = cs->ht[i]; e; e = e->hnext) {
			int rc;

			if (!e->exists)
				continue;
			fill_info(&info, e);
			rc = fn(arg, &info);
			if (rc)
				return rc;
		}
	}
	return 0;
}

int chunk_space(struct chunk_store *cs, uint64_t *total, uint64_t *used)
{
	struct statvfs sv;

	if (cs->o.capacity) {
		*total = cs->o.capacity;
	} else {
		if (statvfs(cs->dir, &sv) < 0)
			return -errno;
		*total = (uint64_t)sv.f_blocks * sv.f_frsize;
	}
	*used = cs->used > 0 ? (uint64_t)cs->used : 0;
	return 0;
}

int chunk_space_avail(struct chunk_store *cs, uint64_t *avail)
{
	struct statvfs sv;
	uint64_t used = cs->used > 0 ? (uint64_t)cs->used : 0;

	if (cs->o.capacity) {
		*avail = cs->o.capacity > used ? cs->o.capacity - used : 0;
		return 0;
	}
	if (statvfs(cs->dir, &sv) < 0)
		return -errno;
	*avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

int chunk_fs(struct chunk_store *cs, uint64_t *fs)
{
	*fs = 0;
	return cs->o.capacity ? 0 : fs_identity(cs->dir, fs);
}

/* ---- open / close ---- */

void chunk_store_opts_init(struct chunk_store_opts *o, size_t size)
{
	struct chunk_store_opts d = {
		.opts_size = size,
		.queue_depth = 128,
		.capacity = 0,
		.sync_writes = false,
		.max_chunk_size = CHUNK_MAX_SIZE,
		.tombstones = 65536,
	};

	/* A caller built against an older, shorter struct gets its prefix. */
	memcpy(o, &d, size < sizeof(d) ? size : sizeof(d));
}

static void quarantine(struct chunk_store *cs, int dfd, unsigned xx, const char *name,
		       const char *why)
{
	char qpath[PATH_MAX];

	snprintf(qpath, sizeof(qpath), "%s/quarantine/%02x.%s.%lld", cs->dir, xx, name,
		 (long long)time(NULL));
	if (renameat(dfd, name, AT_FDCWD, qpath) < 0)
		log_error(COMP, "target '%s': chunk file 'chunks/%02x/%s' %s and cannot be "
			  "moved aside (%s); remove it by hand", cs->dir, xx, name, why,
			  strerror(errno));
	else
		log_warn(COMP, "target '%s': chunk file 'chunks/%02x/%s' %s; moved to '%s'",
			 cs->dir, xx, name, why, qpath);
}

static bool parse_hex64(const char *s, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		unsigned d;

		if (ch >= '0' && ch <= '9')
			d = (unsigned)(ch - '0');
		else if (ch >= 'a' && ch <= 'f')
			d = (unsigned)(ch - 'a' + 10);
		else
			return false;
		v = v << 4 | d;
	}
	*out = v;
	return true;
}

/* Loads one chunk file of fan-out directory xx into the index. */
static int load_one(struct chunk_store *cs, int dfd, unsigned xx, const char *name, uint8_t *hdr)
{
	struct chunk_id id;
	struct centry *e;
	struct slot s;
	ssize_t n;
	int fd, w, rc;

	if (strlen(name) != 33 || name[16] != '.' || !parse_hex64(name, 16, &id.ino) ||
	    !parse_hex64(name + 17, 16, &id.idx)) {
		log_warn(COMP, "target '%s': ignoring unknown file 'chunks/%02x/%s'", cs->dir, xx, name);
		return 0;
	}
	if (id_fanout(&id) != xx) {
		quarantine(cs, dfd, xx, name, "is in the wrong directory");
		return 0;
	}
	fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, hdr, HDR_SIZE, 0);
	rc = n < 0 ? -errno : 0;
	close(fd);
	if (rc)
		return rc;
	if (n < (ssize_t)HDR_SIZE)
		memset(hdr + n, 0, HDR_SIZE - (size_t)n);
	w = slot_pick(hdr, &s);
	if (w < 0 || s.id.ino != id.ino || s.id.idx != id.idx) {
		quarantine(cs, dfd, xx, name, w < 0 ? "has no valid metadata slot" :
			   "names another chunk in its metadata");
		return 0;
	}
	rc = cs_ent_get(cs, &id, &e);
	if (rc)
		return rc;
	e->bcrc = malloc(max_u32(1, s.nblocks) * sizeof(uint32_t));
	if (!e->bcrc) {
		cs_ent_drop(cs, e);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < s.nblocks; i++)
		e->bcrc[i] = get32(s.bcrc + 4 * i);
	if (s.map) {
		e->bmap = malloc(max_u32(1, s.nblocks) * sizeof(uint16_t));
		if (!e->bmap) {
			cs_ent_drop(cs, e);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < s.nblocks; i++)
			e->bmap[i] = get16(s.map + 2 * i);
		cs_map_norm(&e->bmap, s.nblocks);
	}
	e->exists = true;
	e->slot = w;
	e->seq = s.seq;
	e->version = s.version;
	e->length = s.length;
	e->crc = s.crc;
	e->tag = s.tag;
	cs->nchunks++;
	cs->used += footprint(true, s.length, e->bmap);
	return 0;
}

static int scan_dir(struct chunk_store *cs, unsigned xx, uint8_t *hdr)
{
	char path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int rc = 0;

	if (snprintf(path, sizeof(path), "%s/chunks/%02x", cs->dir, xx) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	rc = mkdir_p(path, 0755);
	if (rc)
		return rc;
	d = opendir(path);
	if (!d)
		return -errno;
	while (rc == 0 && (de = readdir(d))) {
		size_t len = strlen(de->d_name);

		if (de->d_name[0] == '.')
			continue;
		if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0) {
			/* An update cut short by a crash: the chunk file
			 * still holds the old content. */
			if (unlinkat(dirfd(d), de->d_name, 0) < 0)
				rc = -errno;
			continue;
		}
		rc = load_one(cs, dirfd(d), xx, de->d_name, hdr);
	}
	closedir(d);
	return rc;
}

static int probe_direct(struct chunk_store *cs)
{
	char path[PATH_MAX];
	const char *env = getenv("STRATA_TEST_NO_DIRECT");
	int fd;

	if (env && strcmp(env, "1") == 0) {
		direct_off(cs, "STRATA_TEST_NO_DIRECT=1");
		return 0;
	}
	if (snprintf(path, sizeof(path), "%s/.direct-probe", cs->dir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	fd = cs_open_file(cs, path, O_RDWR | O_CREAT | O_TRUNC);
	if (fd < 0)
		return fd;
	close(fd);
	unlink(path);
	return 0;
}

int chunk_store_open(const char *dir, const struct chunk_store_opts *o,
		     struct chunk_store **out)
{
	struct chunk_store *cs = NULL;
	char path[PATH_MAX];
	uint8_t *hdr = NULL;
	int rc;

	*out = NULL;
	if (!dir)
		return -EINVAL;
	cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	cs->efd = -1;
	cs->direct = true;
	chunk_store_opts_init(&cs->o, sizeof(cs->o));
	if (o) {
		size_t n = o->opts_size < sizeof(cs->o) ? o->opts_size : sizeof(cs->o);

		memcpy(&cs->o, o, n);
		cs->o.opts_size = sizeof(cs->o);
	}
	if (cs->o.queue_depth == 0)
		cs->o.queue_depth = 128;
	if (cs->o.max_chunk_size == 0)
		cs->o.max_chunk_size = CHUNK_MAX_SIZE;
	if (cs->o.tombstones == 0)
		cs->o.tombstones = 65536;
	if (cs->o.queue_depth > QD_MAX || cs->o.max_chunk_size > CHUNK_MAX_SIZE) {
		rc = -EINVAL;
		goto fail;
	}
	cs->dir = strdup(dir);
	cs->ht_cap = 1024;
	cs->ht = calloc(cs->ht_cap, sizeof(*cs->ht));
	cs->tombs = malloc((size_t)cs->o.tombstones * sizeof(*cs->tombs));
	hdr = malloc(HDR_SIZE);
	if (!cs->dir || !cs->ht || !cs->tombs || !hdr) {
		rc = -ENOMEM;
		goto fail;
	}
	rc = mkdir_p(dir, 0755);
	if (!rc && snprintf(path, sizeof(path), "%s/chunks", dir) >= (int)sizeof(path))
		rc = -ENAMETOOLONG;
	if (!rc)
		rc = mkdir_p(path, 0755);
	if (!rc && snprintf(path, sizeof(path), "%s/quarantine", dir) >= (int)sizeof(path))
		rc = -ENAMETOOLONG;
	if (!rc)
		rc = mkdir_p(path, 0755);
	if (!rc)
		rc = probe_direct(cs);
	for (unsigned xx = 0; !rc && xx < FANOUT; xx++)
		rc = scan_dir(cs, xx, hdr);
	if (rc) {
		log_error(COMP, "cannot open target '%s': %s", dir, strerror(-rc));
		goto fail;
	}
	rc = io_uring_queue_init(cs->o.queue_depth, &cs->ring, 0);
	if (rc < 0) {
		log_error(COMP, "target '%s': io_uring setup failed: %s", dir, strerror(-rc));
		goto fail;
	}
	cs->ring_ok = true;
	cs->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cs->efd < 0) {
		rc = -errno;
		goto fail;
	}
	rc = io_uring_register_eventfd(&cs->ring, cs->efd);
	if (rc < 0)
		goto fail;
	log_info(COMP, "target '%s': %" PRIu64 " chunks, %s I/O", dir, cs->nchunks,
		 cs->direct ? "direct" : "buffered");
	free(hdr);
	*out = cs;
	return 0;
fail:
	free(hdr);
	chunk_store_close(cs);
	return rc;
}

void chunk_store_close(struct chunk_store *cs)
{
	struct op *op;

	if (!cs)
		return;
	while (cs->ring_ok && cs->pending) {
		if (chunk_store_wait(cs, -1) < 0) {
			log_error(COMP, "target '%s': %u operations still pending at close",
				  cs->dir, cs->pending);
			break;
		}
	}
	for (size_t i = 0; cs->ht && i < cs->ht_cap; i++) {
		struct centry *e = cs->ht[i], *next;

		for (; e; e = next) {
			next = e->hnext;
			if (e->fd >= 0)
				close(e->fd);
			chunk_hold_put(e->map);	/* replies still sending keep theirs */
			free(e->bcrc);
			free(e->bmap);
			free(e);
		}
	}
	while ((op = cs->free_ops)) {
		cs->free_ops = op->next;
		free(op);
	}
	if (cs->ring_ok)
		io_uring_queue_exit(&cs->ring);
	if (cs->efd >= 0)
		close(cs->efd);
	free(cs->ht);
	free(cs->tombs);
	free(cs->dir);
	free(cs);
}
