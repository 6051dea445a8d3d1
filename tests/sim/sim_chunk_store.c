/*
 * chunk_store.h in memory, with the real store's contract, on simulated
 * disks that outlive the processes that open them.
 *
 * Kept from the contract: versions (a write or truncate needs a version
 * above the stored one: equal gives -EALREADY, lower -ESTALE, checked when
 * the op runs; a replace installs any version, a replace_newer only a
 * higher one), the tag (kept by writes that pass 0 and by truncates), gaps
 * and extensions read as zeros, -ENOENT for a missing chunk, the capacity
 * (a chunk costs a 16 KiB header plus its length rounded to 4 KiB), CRC32C
 * of the whole content and of the bytes a read returns, and the ordering:
 * ops on one chunk run one at a time in submission order, ops on
 * different chunks concurrently; every op takes a seeded time, and its
 * callback runs only from chunk_store_poll(), which the owner calls when
 * the store's fd becomes "readable" (sim_fd_signal), never from a submit.
 *
 * A disk (struct sim_disk, one per target directory) holds the durable
 * chunks; the open store holds the live ones. An update commits to both.
 * Faults: an update may fail before it applies (-ENOSPC or -EIO, nothing
 * changes), or apply and then fail with -EIO (a failed fdatasync: the
 * live state is new, the durable one old or new, decided at a crash). A
 * crash (sim_disk_crash) settles each such doubt and each update in
 * flight at random, whole (old or new content, never a mix), and
 * abandons the open store; the next open starts from the durable chunks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/crc32c.h"
#include "sim.h"
#include "strata/errors.h"

#define HDR_BYTES 16384u
#define PAGE_BYTES 4096u
#define BIG_CAPACITY (1ull << 40)

enum sop_type { SOP_WRITE, SOP_TRUNC, SOP_REMOVE, SOP_READ };

struct sop {
	struct sop *next;
	struct chunk_store *cs;
	struct sent *e;
	enum sop_type type;
	struct chunk_id id;
	uint32_t off, len;
	const uint8_t *src;
	uint8_t *dst;
	uint64_t version;
	uint32_t tag;
	bool replace, newer_only;
	chunk_done_fn done_cb;
	chunk_read_fn read_cb;
	chunk_read_ref_fn ref_cb;
	void *arg;
	struct reactor *r;
	bool started;
	bool timed;		/* its end is in the event queue */
	bool orphan;		/* its store closed first: the event frees it */
	int status;
	bool has_info;
	struct chunk_info info;
	uint32_t nread, rcrc;
};

/* A chunk of the open store: its live content and its FIFO of ops (the
 * head runs once started). */
struct sent {
	struct chunk_id id;
	struct sim_copy mem;
	uint64_t tomb;		/* removed: its last version, remembered in
				 * memory only, as the real store does */
	bool doubt;		/* a sync failed: the disk may hold dent.old */
	struct sop *qhead, *qtail;
};

/* A chunk on the disk. While a process has the disk open, its live copy
 * is what the disk holds (one copy, updated in place: no copy per
 * update), except for a chunk in doubt, whose older content is kept in
 * old; dur is filled when the process ends (disk_take_back). */
struct dent {
	struct chunk_id id;
	struct sim_copy dur;
	struct sim_copy old;
};

struct sim_disk {
	struct sim_disk *next;
	char dir[300];
	uint32_t target;
	uint64_t capacity;		/* 0: as the store was opened with */
	struct sim_disk_faults f;
	struct sim_rng rng;
	struct dent **ents;
	uint32_t n, cap;
	struct chunk_store *open;
};

struct chunk_store {
	struct sim_disk *disk;
	struct chunk_store_opts o;
	int fd;
	bool signalled;
	struct sent **ents;
	uint32_t n, cap;
	struct sop *done_head, *done_tail;
	uint32_t pending;
	bool closing;
};

static struct {
	struct sim_disk *disks;
	uint64_t seed;
} g_dk;

/* ---- copies ---- */

static void copy_release(struct sim_copy *c)
{
	free(c->data);
	memset(c, 0, sizeof(*c));
}

/* dst (released first) becomes a deep copy of src. */
static void copy_set(struct sim_copy *dst, const struct sim_copy *src)
{
	uint8_t *data = NULL;

	if (src->exists && src->len) {
		data = malloc(src->len);
		/* Out of memory in the harness: nothing sensible to do. */
		if (!data)
			abort();
		memcpy(data, src->data, src->len);
	}
	copy_release(dst);
	*dst = *src;
	dst->data = data;
	dst->cap = data ? src->len : 0;
	if (!dst->exists) {
		dst->len = 0;
		dst->data = NULL;
	}
}

static int64_t footprint(const struct sim_copy *c)
{
	return c->exists ? (int64_t)HDR_BYTES + (int64_t)align_up(c->len, PAGE_BYTES) : 0;
}

static void fill_info(struct chunk_info *info, const struct chunk_id *id, const struct sim_copy *c)
{
	info->id = *id;
	info->version = c->version;
	info->length = c->len;
	info->crc = c->crc;
	info->tag = c->tag;
}

/* ---- disks ---- */

void sim_disks_reset(uint64_t seed)
{
	sim_disks_release();
	g_dk.seed = seed;
}

static void op_free(struct sop *op);

static void store_free(struct chunk_store *cs)
{
	for (uint32_t i = 0; i < cs->n; i++) {
		struct sent *e = cs->ents[i];

		while (e->qhead) {
			struct sop *op = e->qhead;

			e->qhead = op->next;
			op_free(op);
		}
		copy_release(&e->mem);
		free(e);
	}
	while (cs->done_head) {
		struct sop *op = cs->done_head;

		cs->done_head = op->next;
		op_free(op);
	}
	free(cs->ents);
	free(cs);
}

void sim_disks_release(void)
{
	while (g_dk.disks) {
		struct sim_disk *d = g_dk.disks;

		g_dk.disks = d->next;
		for (uint32_t i = 0; i < d->n; i++) {
			copy_release(&d->ents[i]->dur);
			copy_release(&d->ents[i]->old);
			free(d->ents[i]);
		}
		free(d->ents);
		if (d->open)
			store_free(d->open);
		free(d);
	}
}

static struct sim_disk *disk_find(const char *dir)
{
	for (struct sim_disk *d = g_dk.disks; d; d = d->next) {
		if (strcmp(d->dir, dir) == 0)
			return d;
	}
	return NULL;
}

struct sim_disk *sim_disk_add(const char *dir, uint32_t target_id, uint64_t capacity)
{
	struct sim_disk *d = disk_find(dir);

	if (d)
		return d;
	d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	snprintf(d->dir, sizeof(d->dir), "%s", dir);
	d->target = target_id;
	d->capacity = capacity;
	sim_rng_init(&d->rng, g_dk.seed, 1000 + target_id);
	d->next = g_dk.disks;
	g_dk.disks = d;
	return d;
}

struct sim_disk *sim_disk_of_target(uint32_t target_id)
{
	for (struct sim_disk *d = g_dk.disks; d; d = d->next) {
		if (d->target == target_id)
			return d;
	}
	return NULL;
}

uint32_t sim_disk_target(const struct sim_disk *d)
{
	return d->target;
}

void sim_disk_set_faults(struct sim_disk *d, const struct sim_disk_faults *f)
{
	d->f = *f;
}

void sim_disk_set_capacity(struct sim_disk *d, uint64_t capacity)
{
	d->capacity = capacity;
	if (d->open)
		d->open->o.capacity = capacity;
}

static struct dent *dent_get(struct sim_disk *d, const struct chunk_id *id, bool create)
{
	struct dent *e;

	for (uint32_t i = 0; i < d->n; i++) {
		if (d->ents[i]->id.ino == id->ino && d->ents[i]->id.idx == id->idx)
			return d->ents[i];
	}
	if (!create)
		return NULL;
	if (d->n == d->cap) {
		uint32_t cap = d->cap ? d->cap * 2 : 16;
		struct dent **v = realloc(d->ents, cap * sizeof(*v));

		if (!v)
			abort();
		d->ents = v;
		d->cap = cap;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		abort();
	e->id = *id;
	d->ents[d->n++] = e;
	return e;
}

static struct sent *sent_get(struct chunk_store *cs, const struct chunk_id *id, bool create)
{
	struct sent *e;

	for (uint32_t i = 0; i < cs->n; i++) {
		if (cs->ents[i]->id.ino == id->ino && cs->ents[i]->id.idx == id->idx)
			return cs->ents[i];
	}
	if (!create)
		return NULL;
	if (cs->n == cs->cap) {
		uint32_t cap = cs->cap ? cs->cap * 2 : 16;
		struct sent **v = realloc(cs->ents, cap * sizeof(*v));

		if (!v)
			return NULL;
		cs->ents = v;
		cs->cap = cap;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return NULL;
	e->id = *id;
	cs->ents[cs->n++] = e;
	return e;
}

uint64_t sim_disk_used(const struct sim_disk *d)
{
	int64_t used = 0;

	if (d->open) {
		for (uint32_t i = 0; i < d->open->n; i++)
			used += footprint(&d->open->ents[i]->mem);
	} else {
		for (uint32_t i = 0; i < d->n; i++)
			used += footprint(&d->ents[i]->dur);
	}
	return (uint64_t)used;
}

const struct sim_copy *sim_disk_chunk(const struct sim_disk *d, const struct chunk_id *id)
{
	if (d->open) {
		for (uint32_t i = 0; i < d->open->n; i++) {
			const struct sent *e = d->open->ents[i];

			if (e->id.ino == id->ino && e->id.idx == id->idx)
				return e->mem.exists ? &e->mem : NULL;
		}
		return NULL;
	}
	for (uint32_t i = 0; i < d->n; i++) {
		const struct dent *e = d->ents[i];

		if (e->id.ino == id->ino && e->id.idx == id->idx)
			return e->dur.exists ? &e->dur : NULL;
	}
	return NULL;
}

bool sim_disk_is_open(const struct sim_disk *d)
{
	return d->open != NULL;
}

uint32_t sim_disk_inflight(const struct sim_disk *d)
{
	return d->open ? d->open->pending : 0;
}

/* ---- applying an update ---- */

static const char *sop_name(const struct sop *op)
{
	switch (op->type) {
	case SOP_WRITE: return op->replace ? (op->newer_only ? "REPLACE_NEWER" : "REPLACE") : "WRITE";
	case SOP_TRUNC: return "TRUNCATE";
	case SOP_REMOVE: return "REMOVE";
	default: return "READ";
	}
}

/*
 * Whether update op applies to cur (tomb: the chunk's tombstone when it is
 * absent), and the length it leaves. Returns 0, -ENOENT, -EALREADY or
 * -ESTALE, as chunk_store.h says.
 */
static int update_check(const struct sop *op, const struct sim_copy *cur, uint64_t tomb,
			uint32_t *new_len)
{
	bool versioned = !op->replace || op->newer_only;

	*new_len = 0;
	if (op->type == SOP_REMOVE) {
		if (!cur->exists)
			return -ENOENT;
		if (op->version && op->version <= cur->version)
			return op->version == cur->version ? -EALREADY : -ESTALE;
		return 0;
	}
	if (op->type == SOP_TRUNC && !cur->exists)
		return -ENOENT;
	if (cur->exists && op->version <= cur->version && versioned)
		return op->version == cur->version ? -EALREADY : -ESTALE;
	if (!cur->exists && op->version <= tomb && versioned)
		return -ESTALE;
	if (op->type == SOP_TRUNC)
		*new_len = op->off;
	else if (op->replace)
		*new_len = op->len;
	else
		*new_len = cur->exists && cur->len > op->off + op->len ? cur->len : op->off + op->len;
	return 0;
}

/* Applies update op (update_check passed, giving new_len) to c, in place:
 * one live copy per chunk, no copy per update. */
static void update_apply(const struct sop *op, struct sim_copy *c, uint32_t new_len)
{
	uint32_t keep;
	uint8_t *data;

	if (op->type == SOP_REMOVE) {
		copy_release(c);
		return;
	}
	keep = c->exists && !op->replace ? (c->len < new_len ? c->len : new_len) : 0;
	if (!c->exists || op->replace)
		c->born = sim_chunk_lifetime(&op->id);
	if (op->type == SOP_WRITE && op->tag)
		c->tag = op->tag;
	else if (!c->exists)
		c->tag = 0;
	data = c->data;
	if (new_len > c->cap) {
		/* Grown by doubling: an allocator that never resizes in place
		 * (ASan's) would otherwise copy the chunk at every update. */
		uint32_t cap = c->cap ? c->cap : 4096;

		while (cap < new_len)
			cap *= 2;
		data = realloc(c->data, cap);
		if (!data)
			abort();
		c->cap = cap;
	}
	/* Gaps and extensions read as zeros. */
	if (new_len > keep)
		memset(data + keep, 0, new_len - keep);
	if (op->type == SOP_WRITE && op->len)
		memcpy(data + (op->replace ? 0 : op->off), op->src, op->len);
	c->data = data;
	c->exists = true;
	c->version = op->version;
	c->len = new_len;
	c->crc = crc32c(0, data, new_len);
}

static uint64_t store_used(const struct chunk_store *cs)
{
	int64_t used = 0;

	for (uint32_t i = 0; i < cs->n; i++)
		used += footprint(&cs->ents[i]->mem);
	return (uint64_t)used;
}

static void exec_read(struct chunk_store *cs, struct sent *e, struct sop *op)
{
	if (!e->mem.exists) {
		op->status = -ENOENT;
		return;
	}
	op->has_info = true;
	fill_info(&op->info, &e->id, &e->mem);
	if (sim_rng_ppm(&cs->disk->rng, cs->disk->f.read_fail_ppm)) {
		op->status = -EIO;
		return;
	}
	op->nread = op->off >= e->mem.len ? 0 : e->mem.len - op->off;
	if (op->nread > op->len)
		op->nread = op->len;
	if (op->nread)
		memcpy(op->dst, e->mem.data + op->off, op->nread);
	op->rcrc = crc32c(0, op->dst, op->nread);
	op->status = 0;
}

static void exec_update(struct chunk_store *cs, struct sent *e, struct sop *op)
{
	struct sim_disk *d = cs->disk;
	uint32_t new_len;
	bool doubt = false;
	int rc = update_check(op, &e->mem, e->tomb, &new_len);

	if (!rc && op->type != SOP_REMOVE) {
		struct sim_copy next = { .exists = true, .len = new_len };
		int64_t delta = footprint(&next) - footprint(&e->mem);

		if (delta > 0 && cs->o.capacity && store_used(cs) + (uint64_t)delta > cs->o.capacity)
			rc = -ENOSPC;
	}
	if (!rc && sim_rng_ppm(&d->rng, d->f.fail_ppm)) {
		/* A removal frees space: it fails with an I/O error only. */
		rc = d->f.fail_err && op->type != SOP_REMOVE ? d->f.fail_err : -EIO;
		if (sim_tracing())
			sim_trace("disk t%u: injected %s before %s of %llx:%llx", d->target,
				  strata_strerror(rc), sop_name(op), (unsigned long long)op->id.ino,
				  (unsigned long long)op->id.idx);
	}
	if (!rc && sim_rng_ppm(&d->rng, d->f.fail_after_ppm)) {
		doubt = true;
		if (sim_tracing())
			sim_trace("disk t%u: injected -EIO after %s of %llx:%llx (sync failed)",
				  d->target, sop_name(op), (unsigned long long)op->id.ino,
				  (unsigned long long)op->id.idx);
	}
	if (rc || op->type == SOP_REMOVE) {
		if (e->mem.exists) {
			op->has_info = true;
			fill_info(&op->info, &e->id, &e->mem);
		}
		if (rc == -ENOENT && op->type == SOP_REMOVE && op->version > e->tomb)
			e->tomb = op->version;
		op->status = rc;
		if (rc)
			return;
		e->tomb = op->version > e->mem.version ? op->version : e->mem.version;
	}
	if (doubt || e->doubt) {
		struct dent *de = dent_get(d, &e->id, true);

		/* The disk may keep what it held before this update; an update
		 * that syncs settles it. */
		if (doubt && !e->doubt)
			copy_set(&de->old, &e->mem);
		else if (!doubt)
			copy_release(&de->old);
		e->doubt = doubt;
	}
	if (sim_tracing() && op->type == SOP_REMOVE && e->mem.born == sim_chunk_lifetime(&op->id))
		sim_trace("disk t%u: REMOVE of %llx:%llx v%llu that no client asked for", d->target,
			  (unsigned long long)op->id.ino, (unsigned long long)op->id.idx,
			  (unsigned long long)e->mem.version);
	if (sim_tracing() && op->replace && !op->newer_only && e->mem.exists &&
	    op->version < e->mem.version)
		sim_trace("disk t%u: REPLACE of %llx:%llx moves it back from v%llu to v%llu", d->target,
			  (unsigned long long)op->id.ino, (unsigned long long)op->id.idx,
			  (unsigned long long)e->mem.version, (unsigned long long)op->version);
	update_apply(op, &e->mem, new_len);
	sim_on_commit(d->target, &e->id, e->mem.exists ? &e->mem : NULL);
	if (op->type != SOP_REMOVE) {
		op->has_info = true;
		fill_info(&op->info, &e->id, &e->mem);
	}
	op->status = doubt ? -EIO : 0;
}

/* ---- the op machine ---- */

static void op_start(struct sop *op);

/* The op at the head of its chunk's FIFO ends: it applies (or reads),
 * its callback is queued for the next poll, and the chunk's next op
 * starts. */
static void op_end(void *arg)
{
	struct sop *op = arg;
	struct chunk_store *cs = op->cs;
	struct sent *e = op->e;

	if (op->type == SOP_READ)
		exec_read(cs, e, op);
	else
		exec_update(cs, e, op);
	if (sim_tracing())
		sim_trace("disk t%u: %s %llx:%llx v%llu off %u len %u -> %s (now v%llu len %u)",
			  cs->disk->target, sop_name(op), (unsigned long long)op->id.ino,
			  (unsigned long long)op->id.idx, (unsigned long long)op->version, op->off,
			  op->type == SOP_READ ? op->nread : op->len,
			  op->status ? strata_strerror(op->status) : "ok",
			  (unsigned long long)(e->mem.exists ? e->mem.version : 0),
			  e->mem.exists ? e->mem.len : 0);
	e->qhead = op->next;
	if (!e->qhead)
		e->qtail = NULL;
	op->next = NULL;
	if (cs->done_tail)
		cs->done_tail->next = op;
	else
		cs->done_head = op;
	cs->done_tail = op;
	/* An eventfd: readable once, until the owner polls. */
	if (!cs->signalled) {
		cs->signalled = true;
		sim_fd_signal(cs->fd);
	}
	if (e->qhead)
		op_start(e->qhead);
}

static uint64_t op_latency(struct sim_disk *d)
{
	if (sim_rng_ppm(&d->rng, d->f.slow_ppm))
		return sim_rng_range(&d->rng, 5000, 40000);
	return sim_rng_range(&d->rng, 20, 400);
}

static void op_end_ev(void *arg)
{
	struct sop *op = arg;

	if (op->orphan) {
		free(op);
		return;
	}
	op->timed = false;
	op_end(op);
}

static void op_start(struct sop *op)
{
	op->started = true;
	if (op->cs->closing)
		return;
	if (op->type != SOP_READ)
		sim_on_update_start(op->cs->disk->target);
	op->timed = true;
	/* On the submitting thread's reactor: it dies with the process. */
	sim_at(op->r, sim_now_us() + op_latency(op->cs->disk), op_end_ev, NULL, op);
}

/* Frees a finished op, unless its end is still queued (a store closed
 * early): the event frees it then. */
static void op_free(struct sop *op)
{
	if (op->timed)
		op->orphan = true;
	else
		free(op);
}

static struct sop *op_new(struct chunk_store *cs, enum sop_type type, const struct chunk_id *id)
{
	struct sent *e = sent_get(cs, id, true);
	struct sop *op = e ? calloc(1, sizeof(*op)) : NULL;

	if (!op)
		return NULL;
	op->cs = cs;
	op->e = e;
	op->type = type;
	op->id = *id;
	op->r = sim_current();
	return op;
}

static void op_enqueue(struct sop *op)
{
	struct sent *e = op->e;

	op->cs->pending++;
	if (e->qtail) {
		e->qtail->next = op;
		e->qtail = op;
		return;
	}
	e->qhead = e->qtail = op;
	op_start(op);
}

/* ---- processes come and go ---- */

/*
 * The process that had d open ends: what the disk holds becomes its
 * durable state. After a crash, a chunk in doubt holds its old or its new
 * content, and an update in flight reached the disk whole or not at all,
 * at random; after a clean close, the live content. The store itself is
 * the caller's to free (a close) or to abandon (a crash).
 */
static void disk_take_back(struct sim_disk *d, bool crash)
{
	struct chunk_store *cs = d->open;

	for (uint32_t i = 0; i < cs->n; i++) {
		struct sent *e = cs->ents[i];
		struct dent *de = dent_get(d, &e->id, true);
		struct sop *op = e->qhead;
		bool reverted = false;
		uint32_t len;

		copy_release(&de->dur);
		if (e->doubt && crash && sim_rng_below(&d->rng, 2)) {
			de->dur = de->old;
			memset(&de->old, 0, sizeof(de->old));
			reverted = true;
			if (sim_tracing())
				sim_trace("disk t%u: crash: %llx:%llx back to v%llu (its sync had failed)",
					  d->target, (unsigned long long)e->id.ino,
					  (unsigned long long)e->id.idx,
					  (unsigned long long)(de->dur.exists ? de->dur.version : 0));
		}
		copy_release(&de->old);
		e->doubt = false;
		if (reverted)
			continue;
		de->dur = e->mem;
		memset(&e->mem, 0, sizeof(e->mem));
		if (!crash || !op || !op->started || op->type == SOP_READ ||
		    !sim_rng_below(&d->rng, 2) || update_check(op, &de->dur, 0, &len))
			continue;
		update_apply(op, &de->dur, len);
		if (sim_tracing())
			sim_trace("disk t%u: crash: %s of %llx:%llx v%llu in flight reached the disk",
				  d->target, sop_name(op), (unsigned long long)e->id.ino,
				  (unsigned long long)e->id.idx, (unsigned long long)op->version);
	}
	d->open = NULL;
}

/* ---- open, close, poll ---- */

void chunk_store_opts_init(struct chunk_store_opts *o, size_t size)
{
	memset(o, 0, size);
	o->opts_size = size;
	o->queue_depth = 128;
	o->max_chunk_size = CHUNK_MAX_SIZE;
}

int chunk_store_open(const char *dir, const struct chunk_store_opts *o, struct chunk_store **out)
{
	struct sim_disk *d = disk_find(dir);
	struct chunk_store *cs;

	if (!d)
		d = sim_disk_add(dir, 0, 0);
	if (!d)
		return -ENOMEM;
	if (d->open)
		return -EBUSY;
	cs = calloc(1, sizeof(*cs));
	if (!cs)
		return -ENOMEM;
	if (o)
		cs->o = *o;
	else
		chunk_store_opts_init(&cs->o, sizeof(cs->o));
	if (!cs->o.max_chunk_size || cs->o.max_chunk_size > CHUNK_MAX_SIZE)
		cs->o.max_chunk_size = CHUNK_MAX_SIZE;
	if (d->capacity)
		cs->o.capacity = d->capacity;
	cs->disk = d;
	cs->fd = sim_fd_new();
	for (uint32_t i = 0; i < d->n; i++) {
		struct sent *e;

		if (!d->ents[i]->dur.exists)
			continue;
		e = sent_get(cs, &d->ents[i]->id, true);
		if (!e) {
			store_free(cs);
			return -ENOMEM;
		}
		/* The live copy is the disk's now (see struct dent). */
		e->mem = d->ents[i]->dur;
		memset(&d->ents[i]->dur, 0, sizeof(d->ents[i]->dur));
	}
	d->open = cs;
	*out = cs;
	return 0;
}

void chunk_store_poll(struct chunk_store *cs)
{
	struct sop *op;

	cs->signalled = false;
	while ((op = cs->done_head)) {
		const struct chunk_info *info = op->has_info ? &op->info : NULL;

		cs->done_head = op->next;
		if (!cs->done_head)
			cs->done_tail = NULL;
		cs->pending--;
		if (op->type == SOP_READ && op->ref_cb)
			op->ref_cb(op->arg, op->status, info, op->dst, op->nread, op->rcrc, NULL);
		else if (op->type == SOP_READ && op->read_cb)
			op->read_cb(op->arg, op->status, info, op->nread, op->rcrc);
		else if (op->type != SOP_READ && op->done_cb)
			op->done_cb(op->arg, op->status, info);
		op_free(op);
	}
}

void chunk_store_close(struct chunk_store *cs)
{
	bool more = true;

	if (!cs)
		return;
	cs->closing = true;
	/* Every op in flight completes now, in each chunk's order. */
	while (more) {
		more = false;
		for (uint32_t i = 0; i < cs->n; i++) {
			if (cs->ents[i]->qhead) {
				op_end(cs->ents[i]->qhead);
				more = true;
			}
		}
		chunk_store_poll(cs);
	}
	disk_take_back(cs->disk, false);
	store_free(cs);
}

int chunk_store_wait(struct chunk_store *cs, int timeout_ms)
{
	uint32_t before = cs->pending;

	(void)timeout_ms;
	chunk_store_poll(cs);
	return (int)(before - cs->pending);
}

int chunk_store_fd(struct chunk_store *cs)
{
	return cs->fd;
}

bool chunk_store_is_direct(const struct chunk_store *cs)
{
	(void)cs;
	return true;
}

uint32_t chunk_store_pending(const struct chunk_store *cs)
{
	return cs->pending;
}

void chunk_hold_put(struct chunk_hold *h)
{
	/* Reads are always answered into the caller's buffer: no holds. */
	(void)h;
}

/* ---- submission ---- */

static int submit_write(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
			const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
			uint32_t tag, bool replace, bool newer_only, chunk_done_fn cb, void *arg)
{
	struct sop *op;

	if (!cs || !id || (len && !data) || version == 0 ||
	    (uint64_t)offset + len > cs->o.max_chunk_size)
		return -EINVAL;
	if (crc32c(0, data, len) != data_crc)
		return STRATA_EINTEGRITY;
	op = op_new(cs, SOP_WRITE, id);
	if (!op)
		return -ENOMEM;
	op->off = offset;
	op->len = len;
	/* Borrowed until the callback, as the contract says. */
	op->src = data;
	op->version = version;
	op->tag = tag;
	op->replace = replace;
	op->newer_only = newer_only;
	op->done_cb = cb;
	op->arg = arg;
	op_enqueue(op);
	return 0;
}

int chunk_write(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
		chunk_done_fn cb, void *arg)
{
	return submit_write(cs, id, offset, data, len, data_crc, version, 0, false, false, cb, arg);
}

int chunk_write_tagged(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		       const void *data, uint32_t len, uint32_t data_crc, uint64_t version,
		       uint32_t tag, chunk_done_fn cb, void *arg)
{
	return submit_write(cs, id, offset, data, len, data_crc, version, tag, false, false, cb,
			    arg);
}

int chunk_replace(struct chunk_store *cs, const struct chunk_id *id, const void *data,
		  uint32_t len, uint32_t data_crc, uint64_t version, uint32_t tag,
		  chunk_done_fn cb, void *arg)
{
	return submit_write(cs, id, 0, data, len, data_crc, version, tag, true, false, cb, arg);
}

int chunk_replace_newer(struct chunk_store *cs, const struct chunk_id *id, const void *data,
			uint32_t len, uint32_t data_crc, uint64_t version, uint32_t tag,
			chunk_done_fn cb, void *arg)
{
	return submit_write(cs, id, 0, data, len, data_crc, version, tag, true, true, cb, arg);
}

static int submit_read(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		       uint32_t len, void *dst, chunk_read_fn cb, chunk_read_ref_fn ref_cb,
		       void *arg)
{
	struct sop *op;

	if (!cs || !id || (len && !dst))
		return -EINVAL;
	op = op_new(cs, SOP_READ, id);
	if (!op)
		return -ENOMEM;
	op->off = offset;
	op->len = len;
	op->dst = dst;
	op->read_cb = cb;
	op->ref_cb = ref_cb;
	op->arg = arg;
	op_enqueue(op);
	return 0;
}

int chunk_read(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
	       uint32_t len, void *dst, chunk_read_fn cb, void *arg)
{
	return submit_read(cs, id, offset, len, dst, cb, NULL, arg);
}

int chunk_read_ref(struct chunk_store *cs, const struct chunk_id *id, uint32_t offset,
		   uint32_t len, void *dst, chunk_read_ref_fn cb, void *arg)
{
	return submit_read(cs, id, offset, len, dst, NULL, cb, arg);
}

int chunk_truncate(struct chunk_store *cs, const struct chunk_id *id, uint32_t length,
		   uint64_t version, chunk_done_fn cb, void *arg)
{
	struct sop *op;

	if (!cs || !id || version == 0 || length > cs->o.max_chunk_size)
		return -EINVAL;
	op = op_new(cs, SOP_TRUNC, id);
	if (!op)
		return -ENOMEM;
	op->off = length;
	op->version = version;
	op->done_cb = cb;
	op->arg = arg;
	op_enqueue(op);
	return 0;
}

int chunk_remove(struct chunk_store *cs, const struct chunk_id *id, uint64_t version,
		 chunk_done_fn cb, void *arg)
{
	struct sop *op;

	if (!cs || !id)
		return -EINVAL;
	op = op_new(cs, SOP_REMOVE, id);
	if (!op)
		return -ENOMEM;
	op->version = version;
	op->done_cb = cb;
	op->arg = arg;
	op_enqueue(op);
	return 0;
}

/* ---- the index ---- */

int chunk_stat(struct chunk_store *cs, const struct chunk_id *id, struct chunk_info *out)
{
	struct sent *e = sent_get(cs, id, false);

	if (!e || !e->mem.exists) {
		memset(out, 0, sizeof(*out));
		out->id = *id;
		out->version = e ? e->tomb : 0;
		return -ENOENT;
	}
	fill_info(out, id, &e->mem);
	return 0;
}

int chunk_list(struct chunk_store *cs, int (*fn)(void *arg, const struct chunk_info *info),
	       void *arg)
{
	/* "In no particular order": start at a seeded place, so that no
	 * caller comes to rely on one. */
	uint32_t start = cs->n ? (uint32_t)sim_rng_below(&cs->disk->rng, cs->n) : 0;

	for (uint32_t k = 0; k < cs->n; k++) {
		struct sent *e = cs->ents[(start + k) % cs->n];
		struct chunk_info info;
		int rc;

		if (!e->mem.exists)
			continue;
		fill_info(&info, &e->id, &e->mem);
		rc = fn(arg, &info);
		if (rc)
			return rc;
	}
	return 0;
}

int chunk_space(struct chunk_store *cs, uint64_t *total, uint64_t *used)
{
	*total = cs->o.capacity ? cs->o.capacity : BIG_CAPACITY;
	*used = store_used(cs);
	return 0;
}

int chunk_space_avail(struct chunk_store *cs, uint64_t *avail)
{
	uint64_t total = cs->o.capacity ? cs->o.capacity : BIG_CAPACITY, used = store_used(cs);

	*avail = total > used ? total - used : 0;
	return 0;
}

/* Every simulated disk is one filesystem: no file system is touched. */
int chunk_fs(struct chunk_store *cs, uint64_t *fs)
{
	*fs = cs->o.capacity ? 0 : 1;
	return 0;
}

/* ---- crashes ---- */

void sim_disk_crash(struct sim_disk *d)
{
	if (d->open)
		disk_take_back(d, true);
}
