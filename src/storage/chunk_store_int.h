/*
 * Internals shared by the two halves of the chunk engine: chunk_store.c
 * (the operation state machine, submission, polling) and chunk_index.c
 * (metadata slots, the in-memory index, the fd cache, open and close).
 * Not part of any interface: include only from src/storage/chunk_*.c.
 */
#ifndef STRATA_STORAGE_CHUNK_STORE_INT_H
#define STRATA_STORAGE_CHUNK_STORE_INT_H

#include <endian.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <liburing.h>

#include "common/rand.h"
#include "chunk_store.h"
#include "common/buf.h"

#define COMP "chunk"

#define HDR_SIZE 16384u            /* two slots, then data */
#define SLOT_SIZE 8192u
#define PAGE_SZ STRATA_ALIGN       /* O_DIRECT granularity */
#define SLOT_MAGIC 0x4b434853u     /* "SHCK" little-endian */
#define SLOT_FORMAT 1u             /* identity block map (none stored) */
#define SLOT_FORMAT_MAP 2u         /* with a block map */
#define SLOT_FIXED 56u             /* bytes before the block CRC array */
#define SLOT_CRC_OFF (SLOT_SIZE - 4u)
#define SLOT_TAG_OFF (SLOT_SIZE - 8u)   /* u32 tag, in the unused tail */
#define MAX_BLOCKS (CHUNK_MAX_SIZE / CHUNK_BLOCK_SIZE)
#define SLOT_MAP_OFF (SLOT_FIXED + 4u * MAX_BLOCKS)   /* format 2: u16 per block */
#define PHYS_MAX (2u * MAX_BLOCKS) /* physical blocks a chunk file may span */
#define FANOUT 256u
#define FD_CACHE_MAX 512u
#define QD_MAX 4096u

_Static_assert(SLOT_FIXED + 4u * MAX_BLOCKS <= SLOT_CRC_OFF, "slot too small");
_Static_assert(SLOT_MAP_OFF + 2u * MAX_BLOCKS <= SLOT_TAG_OFF, "block map does not fit");
_Static_assert(PHYS_MAX <= 65536u, "physical block numbers are u16");
_Static_assert(HDR_SIZE == 2u * SLOT_SIZE, "header holds two slots");

enum op_type { OP_WRITE, OP_READ, OP_TRUNC, OP_REMOVE };

enum op_state {
	ST_QUEUED = 0,
	ST_READ_DATA,   /* read: blocks covering the range */
	ST_READ_HEAD,   /* in place: the partial first page */
	ST_WRITE_DATA,  /* in place: data pages */
	ST_SYNC_DATA,   /* in place: fdatasync before the slot */
	ST_WRITE_SLOT,  /* in place: the next metadata slot */
	ST_SYNC_SLOT,   /* in place: fdatasync of the slot */
	ST_READ_OLD,    /* copy-on-write: old content to merge */
	ST_WRITE_TMP,   /* copy-on-write: header + content to the temp file */
	ST_SYNC_TMP,    /* copy-on-write: fdatasync before rename */
	ST_BLK_READ,    /* block update: an old block partly overwritten */
	ST_BLK_WRITE,   /* block update: the new blocks, one physical run each */
};

enum io_kind { IO_READ, IO_WRITE, IO_FSYNC };

struct op;

/* One chunk: its committed state, its FIFO of ops and its cached fd. */
struct centry {
	struct centry *hnext;           /* hash chain */
	struct chunk_id id;
	bool exists;                    /* committed content on disk */
	int slot;                       /* winning slot: 0 (A) or 1 (B) */
	uint64_t seq, version;
	uint32_t length, crc;
	uint32_t tag;                   /* caller's tag (the chain id), 0 = none */
	uint32_t *bcrc;                 /* nblocks(length) block CRCs */
	uint16_t *bmap;                 /* logical -> physical block; NULL = identity */
	bool lent;                      /* a dropped mapping still had replies: its
					 * file's free blocks may still be sent */
	int fd;                         /* -1 when closed */
	bool fd_buffered;               /* O_DIRECT turned off for reads */
	uint64_t fsize;                 /* file size, valid while fd >= 0 */
	struct op *qhead, *qtail;       /* FIFO; qhead runs when running */
	bool running, runnable;
	struct centry *rnext;           /* runnable list */
	struct centry *lprev, *lnext;   /* LRU of idle open fds */
	bool in_lru;
	struct chunk_hold *map;         /* read-only mapping of fd, or NULL */
	bool tomb;                      /* removed, version kept: in cs->tombs */
};

/* A mapping of one chunk file; the entry holds one reference while its
 * fd is open, each reply sent from it one more. */
struct chunk_hold {
	_Atomic int refs;
	void *addr;
	size_t len;
};

struct op {
	struct op *next;                /* chunk FIFO, then done/free list */
	struct chunk_store *cs;
	struct centry *e;
	enum op_type type;
	enum op_state state;
	uint32_t off, len;
	const uint8_t *src;
	uint8_t *dst;
	uint64_t version;
	uint32_t tag;                   /* to set; 0 keeps the chunk's */
	bool replace;                   /* write: the data is the whole new content */
	bool newer_only;                /* replace: only over an older version */
	bool buf_is_dst;                /* read: straight into the caller's buffer */
	chunk_done_fn done_cb;
	chunk_read_fn read_cb;
	chunk_read_ref_fn read_ref_cb;  /* chunk_read_ref: may answer by mapping */
	struct chunk_hold *hold;        /* the mapping the answer points into */
	const uint8_t *data;
	void *arg;
	int status;
	bool has_info;
	struct chunk_info info;
	uint32_t nread, rcrc;
	/* update plan */
	uint32_t new_len, new_crc;
	uint32_t *new_bcrc;
	uint16_t *new_map;              /* the block map after it; NULL = identity */
	uint64_t pdelta;                /* in place: physical minus logical offset */
	uint32_t blk_t0, blk_t1;        /* block update: blocks [t0, t1] rewritten */
	unsigned blk_rd, blk_ver;       /* old blocks to read / read (1: t0, 2: t1) */
	int64_t reserved;               /* bytes added to cs->used */
	bool trim_on_fail;
	uint8_t *buf;                   /* aligned */
	size_t buf_len;
	uint32_t buf_doff;              /* chunk offset buf starts at */
	int tmp_fd;
	/* a logical range done as one I/O per physically contiguous run */
	enum op_state run_state;
	enum io_kind run_kind;
	const uint16_t *run_map;
	uint8_t *run_buf;               /* holds the chunk bytes from run_base on */
	uint32_t run_base, run_pos, run_end;
	/* current I/O */
	enum io_kind io_kind;
	int io_fd;
	uint8_t *io_buf;
	uint64_t io_off;
	size_t io_len, io_done;
};

struct chunk_store {
	char *dir;
	struct chunk_store_opts o;
	struct io_uring ring;
	bool ring_ok;
	int efd;
	bool direct;
	struct centry **ht;
	size_t ht_cap, ht_count;
	uint64_t nchunks;
	int64_t used;
	uint32_t active;                /* ops started, not finished */
	uint32_t pending;               /* ops submitted, callback not run */
	uint32_t inflight;              /* SQEs submitted, CQE not reaped */
	uint64_t ncallbacks;
	struct centry *rhead, *rtail;
	struct op *done_head, *done_tail;
	struct op *free_ops;
	struct centry *lru_head, *lru_tail;
	uint32_t nopen;
	bool in_poll, kicking;
	bool done_signalled;            /* on_done called, poll not run yet */
	struct chunk_id *tombs;         /* ring of removed chunks remembered */
	uint32_t tomb_head, tomb_n;
};

/* ---- small helpers ---- */

/* SplitMix64's finalizer alone (splitmix64 adds its gamma first). */
static inline uint64_t mix64(uint64_t x)
{
	return splitmix64(x - SPLITMIX64_GAMMA);
}

/* Stable forever: it places chunk files in their fan-out directory. */
static inline uint64_t id_hash(const struct chunk_id *id)
{
	return mix64(id->ino ^ splitmix64(id->idx));
}

static inline unsigned id_fanout(const struct chunk_id *id)
{
	return (unsigned)(id_hash(id) & (FANOUT - 1));
}

static inline uint32_t nblocks(uint32_t len)
{
	return (uint32_t)((len + (uint64_t)CHUNK_BLOCK_SIZE - 1) / CHUNK_BLOCK_SIZE);
}

/* Physical block of logical block b under map (NULL: identity). */
static inline uint32_t pblk(const uint16_t *map, uint32_t b)
{
	return map ? map[b] : b;
}

/* Physical blocks the data area of a chunk of len bytes spans under map:
 * one past the highest used (free blocks below it included). */
static inline uint32_t map_span(const uint16_t *map, uint32_t len)
{
	uint32_t nb = nblocks(len), m = 0;

	if (!map)
		return nb;
	for (uint32_t i = 0; i < nb; i++)
		if (map[i] + 1u > m)
			m = map[i] + 1u;
	return m;
}

/* Bytes a chunk of len bytes laid out by map holds on disk (0 for none):
 * the header and each block up to its last page, free blocks among them
 * included. */
static inline int64_t footprint(bool exists, uint32_t len, const uint16_t *map)
{
	uint64_t end = 0;

	if (!exists)
		return 0;
	if (!map)
		return (int64_t)HDR_SIZE + (int64_t)align_up(len, PAGE_SZ);
	for (uint32_t b = 0; b < nblocks(len); b++) {
		uint64_t bl = len - b * CHUNK_BLOCK_SIZE;
		uint64_t e = (uint64_t)map[b] * CHUNK_BLOCK_SIZE +
			     align_up(bl < CHUNK_BLOCK_SIZE ? bl : CHUNK_BLOCK_SIZE, PAGE_SZ);

		if (e > end)
			end = e;
	}
	return (int64_t)(HDR_SIZE + end);
}

static inline uint32_t min_u32(uint32_t a, uint32_t b) { return a < b ? a : b; }
static inline uint32_t max_u32(uint32_t a, uint32_t b) { return a > b ? a : b; }

static inline void put32(uint8_t *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static inline void put16(uint8_t *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static inline void put64(uint8_t *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }
static inline uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static inline uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static inline uint64_t get64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }


static inline void fill_info(struct chunk_info *info, const struct centry *e)
{
	info->id = e->id;
	info->version = e->version;
	info->length = e->length;
	info->crc = e->crc;
	info->tag = e->tag;
}

/* chunk_index.c */
/* Turns O_DIRECT on or off on the chunk's cached fd (ops of one chunk are
 * serialized, so no I/O of another op is in flight on it). */
int cs_fd_mode(struct chunk_store *cs, struct centry *e, bool direct);
/* Encodes a slot: format 1 when bmap is NULL (identity), else format 2
 * with bmap's nblocks(length) entries. */
void cs_slot_encode(uint8_t *p, uint64_t seq, const struct chunk_id *id,
		    uint64_t version, uint32_t length, uint32_t crc, const uint32_t *bcrc,
		    const uint16_t *bmap, uint32_t tag);
/* Frees *map and sets it NULL when its n entries are the identity. */
void cs_map_norm(uint16_t **map, uint32_t n);
/* Drops the entry's reference to its mapping, noting (lent) when replies
 * still hold it. */
void cs_ent_unmap(struct centry *e);
/* Entry of id, or NULL. */
struct centry *cs_ent_find(struct chunk_store *cs, const struct chunk_id *id);
/* Finds or creates (not existing yet) the entry of id. 0 or -ENOMEM. */
int cs_ent_get(struct chunk_store *cs, const struct chunk_id *id, struct centry **out);
/* Unlinks an idle entry from the index and frees it. */
void cs_ent_drop(struct chunk_store *cs, struct centry *e);
/* e holds no chunk and no operation: dropped, or kept as a tombstone when
 * it remembers a version. */
void cs_ent_idle(struct chunk_store *cs, struct centry *e);
void cs_ent_close_fd(struct chunk_store *cs, struct centry *e);
/* Opens e's chunk file if it is not open (fd cache). 0 or -errno. */
int cs_ent_open_fd(struct chunk_store *cs, struct centry *e);
void cs_lru_push(struct chunk_store *cs, struct centry *e);
void cs_lru_remove(struct chunk_store *cs, struct centry *e);
/* open(2) with O_DIRECT while the store has it (fallback once). */
int cs_open_file(struct chunk_store *cs, const char *path, int flags);
int cs_fsync_dir_of(struct chunk_store *cs, const struct chunk_id *id);
int cs_chunk_path(const struct chunk_store *cs, const struct chunk_id *id,
		  const char *suffix, char *out, size_t size);

#endif
