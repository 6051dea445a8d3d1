/* Internals shared by libstrata's modules (strata.c, namespace.c, ring.c). */
#ifndef STRATA_CLIENT_INT_H
#define STRATA_CLIENT_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "client/cache.h"
#include "client/meta_cache.h"
#include "client/meta_client.h"
#include "client/storage_client.h"
#include "common/layout.h"
#include "net/rpc.h"
#include "strata/strata.h"

struct strata {
	struct strata_opts o;
	struct net_cred cred;		/* what every connection presents */
	bool has_cred;
	bool has_tls;			/* opts named tls_ca: tls, not the default */
	struct net_tls *tls;		/* a reference; NULL: plain TCP */
	char mgmt[512];			/* one address or a list (mgmt_addrs.h) */
	struct rpc_client *rpc;		/* meta calls */
	struct mc_ctx mc;
	int nio;
	struct reactor **io_r;
	struct sclient **sc;
	uint32_t rr;
	/* Spreads clients over the meta servers: this one's first pick, and
	 * its pick when the one it called leaves the map, is the UP server
	 * meta_seed % count (strata.c, find_meta). */
	uint64_t meta_seed;
	/* $STRATA_META_NODE: the meta server of this node id is the pick
	 * whenever one is made and it is UP (tests; 0: none). */
	uint32_t meta_pin;
	struct cache *cache;		/* the read cache, or NULL (cache_client.c) */
	struct cl_prefetch *pf;		/* its prefetch thread, started on first use */
	struct mcache *mcache;		/* the metadata cache, or NULL (namespace.c) */
	/* The older OPEN/CREATE forms only (inline.c): the meta service
	 * lacks the *_INL ones, or $STRATA_TEST_NO_INLINE=1 (tests: a client
	 * without inline support). Atomic. */
	bool inl_off;
};

/* The credential of a connection: the token the caller gave (given, "":
 * none), or the environment's (given NULL: strata_find_token). *has is
 * false when there is none (connections then present the process
 * default). 0 or a negative error. */
int cl_take_token(const char *given, struct net_cred *cred, bool *has);

struct strata_file {
	struct strata *s;
	uint64_t ino;
	uint64_t gen;		/* its generation: calls on a removed file fail */
	struct file_layout layout;
	int flags;
	pthread_mutex_t lock;
	uint64_t size;		/* known length: at open, grown by our writes */
	bool dirty;		/* written since the last flush */
	struct sp_cap cap;	/* the chunk capability meta gave (lock) */
	bool cap_stale;		/* storage refused it: renew (lock) */
	bool has_caller;	/* opened acting for caller (strata_set_caller) */
	struct net_caller caller;
	/* Read-only opens with a cache: the version its blocks are keyed
	 * by (0: not cached) and the block size, at most the chunk size. */
	uint64_t cache_ver;
	uint32_t cache_bs;
	/* The attributes the open (or create) reply carried, as they were
	 * then (strata_fstat_open). */
	struct strata_stat open_st;
	/* Inline data (inline.c): while inl_on, f->inl holds the file's
	 * f->size bytes (zeros after them, inl_cap in all) and reads are
	 * served from it; inl_w: this handle's writes go there too, up to
	 * inl_max bytes, and its close publishes them. Under lock; the
	 * buffer also under wlock, which serializes writers of it. */
	uint8_t *inl;
	uint32_t inl_cap, inl_max;
	bool inl_on, inl_w;
	/* inl_w: CRC32C of the content this handle last saw in the store
	 * (0: empty), the guard of its publish. */
	uint32_t inl_guard;
	/* Handles open for writing: one bit per byte of the first
	 * MD_INLINE_MAX that this handle wrote (CL_WMAP_BYTES; under lock).
	 * A spill writes only those bytes, and a merge writes another
	 * handle's inline bytes around them (inline.c). */
	uint8_t *wmap;
	pthread_mutex_t wlock;
};

/* ---- inline data (inline.c) ---- */

/* The size of a strata_file's wmap: a bit per byte of MD_INLINE_MAX. */
#define CL_WMAP_BYTES (MD_INLINE_MAX / 8)

/* What an open reply said of inline data: the service's inline_max, and
 * the file's bytes (data, owned) when has. */
struct cl_inl {
	uint8_t *data;
	uint32_t len, max;
	bool has;
};
void cl_inl_release(struct cl_inl *inl);

/* OPEN, OPEN_PATH, CREATE, CREATE_PATH in their *_INL forms while the
 * service has them (else the older ones, *inl zeroed): as MC_CALL, plus
 * *inl (released by the caller, or handed to cl_file_new). */
int cl_open_h(struct strata *s, struct mt_open *rq, struct mt_attr_rep *rep, struct cl_inl *inl);
int cl_open_path(struct strata *s, struct mt_open_path *rq, struct mt_attr_rep *rep,
		 struct cl_inl *inl);
int cl_create_h(struct strata *s, struct mt_create *rq, struct mt_attr_rep *rep,
		struct cl_inl *inl);
int cl_create_path(struct strata *s, struct mt_create_path *rq, struct mt_attr_rep *rep,
		   struct cl_inl *inl);
/* Sets the inline state of new handle f from its open's *inl (taken,
 * released): reads of an inline file come from its bytes; fresh (created
 * or truncated by this open) for writing keeps writes inline; an inline
 * file opened for writing is converted to chunks first. 0 or an error. */
int cl_inline_attach(struct strata_file *f, struct cl_inl *inl, bool fresh);
/* Serves a read of [off, off+len) (within the size) from f's bytes:
 * false when f holds none (read chunks). */
bool cl_inline_read(struct strata_file *f, void *buf, uint64_t len, uint64_t off);
/* A write of f: 0 when it was kept inline (*at: where it went, the end
 * for append), 1 when it is to go to chunks (f holds nothing inline any
 * more), or an error. */
int cl_inline_write(struct strata_file *f, const void *buf, uint64_t len, uint64_t off,
		    bool append, uint64_t *at);
/* Writes f's inline bytes as chunks and ends its inline state (before a
 * write through the ring, or one past inline_max). 0 or an error. */
int cl_inline_spill(struct strata_file *f);
/* fsync/close of f: publishes its inline bytes (*done) or spills them
 * when the service refuses (then the caller publishes the length). */
int cl_inline_publish(struct strata_file *f, bool *done);
/* ftruncate of f: 0 when done inline (publish follows), 1 when the
 * chunk path is to do it, or an error. */
int cl_inline_truncate(struct strata_file *f, uint64_t size);
/* Records that f wrote [off, off+len) (its part in the first
 * MD_INLINE_MAX bytes); f->lock held. */
void cl_inline_mark(struct strata_file *f, uint64_t off, uint64_t len);
/* f cut the file to size: its bytes from there are no longer its writes
 * (f->lock held). */
void cl_inline_unmark(struct strata_file *f, uint64_t size);
/* The answer to -EMEDIUMTYPE from f's SET_SIZE: another handle published
 * the file inline after f wrote chunks. Writes those inline bytes as
 * chunk 0 around the bytes f wrote, and converts the file (guarded by
 * their CRC; bounded retries): SET_SIZE may then be sent again. 0, or an
 * error (-EMEDIUMTYPE without the *_INL operations: nothing merged). */
int cl_inline_merge(struct strata_file *f);
/* Converts inline file h to chunks (answer to -EMEDIUMTYPE from a
 * truncation growing it past the inline bound): an open for writing. */
int cl_inline_convert(struct strata *s, struct mt_handle h);
void cl_inline_free(struct strata_file *f);

/* Opens file h itself (namespace.c): flags STRATA_O_*, no CREAT. */
int cl_open_handle(struct strata *s, struct mt_handle h, int flags, struct strata_file **out);
/* Runs an I/O of f over its chunks and waits (renewing a refused cap
 * once). 0 or an error. */
int cl_run(struct strata_file *f, enum sc_kind kind, uint8_t *buf, uint64_t len, uint64_t off);

/* Picks an I/O thread's storage client (round robin). */
struct sclient *cl_pick_sc(struct strata *s);

/* One chunk-sized piece of a file I/O. A read that misses the cache
 * reads its whole block into fill instead (cl_submit). */
struct io_piece {
	struct sc_io io;
	void *owner;
	/* private to cl_submit */
	void *fill;
	uint8_t *dst;
	uint32_t dst_off, dst_len;
	sc_done_fn done;
	struct cache *cache;
	struct cache_key key;
};

/* Submits piece p of an I/O of f: a read the cache holds completes at
 * once, on this thread (its callback runs before this returns); any
 * other goes to an I/O thread's storage client. */
void cl_submit(struct strata_file *f, struct io_piece *p);
/* cl_submit through storage client sc (NULL: the next I/O thread's): the
 * small reads of one ring submit share one, so they batch per target. */
void cl_submit_via(struct strata_file *f, struct io_piece *p, struct sclient *sc);

/* The cache of a connection (cache_client.c): made from opts and the
 * environment at connect (0, or -EINVAL with a logged reason for a bad
 * setting), stopped and freed at disconnect. */
int cl_cache_setup(struct strata *s, const struct strata_opts *given);
void cl_cache_stop(struct strata *s);
void cl_cache_free(struct strata *s);
/* Sets f's cache version from its inode at open (read-only opens). */
void cl_cache_file(struct strata_file *f, const struct mt_inode *in);

/* Splits [off, off+len) of f into pieces (at most max); fills kind,
 * chain_idx, ino, idx, cap, offset, len and buf. Returns the count. */
uint32_t cl_split(struct strata_file *f, enum sc_kind kind, const struct sp_cap *cap,
		  uint8_t *buf, uint64_t len, uint64_t off, struct io_piece *pieces,
		  uint32_t max);
/* The chunk capability for an I/O of f starting now: the one meta gave,
 * or a new one (another OPEN, with f's access mode) when it expires
 * within CAP_REFRESH_S, or when force says storage refused it (-EACCES:
 * expired, or f was opened without one). Blocks on that OPEN: call it
 * from the caller's thread, never from a completion. 0 or the OPEN's
 * error (-EACCES when the caller may no longer open f). */
int cl_file_cap(struct strata_file *f, bool force, struct sp_cap *out);
/* Marks f's cap refused by storage: the next cl_file_cap renews it. Any
 * thread (a completion). */
void cl_file_cap_stale(struct strata_file *f);
/* Pieces an I/O of len bytes at off needs. */
uint32_t cl_npieces(const struct strata_file *f, enum sc_kind kind, uint64_t len,
			uint64_t off);
/* Records a completed write of [off, off+len) in f: its end, and the
 * bytes it wrote (cl_inline_mark). */
void cl_note_write(struct strata_file *f, uint64_t off, uint64_t len);

/* Cuts the chunk that straddles a new size of file ino, as a truncating
 * reply (tr, with its cap) asks; nothing when tr has no partial chunk. */
int cl_cut(struct strata *s, uint64_t ino, const struct mt_trunc *tr, const struct sp_cap *cap);
/* Makes the handle of an open of file in (flags: STRATA_O_*), after
 * cutting what tr asks; cap: the reply's chunk capability (zeros: none,
 * the first I/O asks for one); inl (taken; may be NULL) and fresh as
 * cl_inline_attach. Returns 0 and *out, or an error. */
int cl_file_new(struct strata *s, const struct mt_inode *in, int flags,
		const struct mt_trunc *tr, const struct sp_cap *cap, struct cl_inl *inl,
		bool fresh, struct strata_file **out);

/* The metadata cache of a connection (namespace.c; meta_cache.h): made
 * from opts and the environment at connect (0, or -EINVAL with a logged
 * reason for a bad setting; s->mcache stays NULL when it is off), freed
 * at disconnect. */
int cl_meta_cache_setup(struct strata *s, const struct strata_opts *given);
/* Drops what the cache holds: after every change made through s, whether
 * it succeeded or not. Nothing when the cache is off. */
void cl_meta_changed(struct strata *s);
/* Whether calls now may use the cache: it is on and the thread acts for
 * no caller (strata_set_caller: what one user may see is not another's). */
bool cl_meta_cached(const struct strata *s);

/*
 * The namespace by handle (namespace.c), which the public *at calls and
 * the path calls of strata.c share. Each is one meta call (at_setattr
 * also cuts a partial chunk) and returns 0 or its error; out receives the
 * inode the reply carries. mode and flags are as the public calls take
 * them.
 */
void at_fill_stat(const struct mt_inode *in, struct strata_stat *st);
int at_lookup(struct strata *s, struct mt_handle dir, const char *name, struct mt_inode *out);
int at_mkdir(struct strata *s, struct mt_handle dir, const char *name, uint32_t mode,
	     struct mt_inode *out);
int at_symlink(struct strata *s, struct mt_handle dir, const char *name, const char *target,
	       struct mt_inode *out);
/* A fifo or socket (mode carries S_IFIFO or S_IFSOCK). */
int at_mknod(struct strata *s, struct mt_handle dir, const char *name, uint32_t mode,
	     struct mt_inode *out);
/* Another name for non-directory h. */
int at_link(struct strata *s, struct mt_handle h, struct mt_handle dir, const char *name,
	    struct mt_inode *out);
int at_remove(struct strata *s, struct mt_handle dir, const char *name, bool rmdir);
int at_rename(struct strata *s, struct mt_handle from_dir, const char *from,
	      struct mt_handle to_dir, const char *to, unsigned flags);
/* mask: STRATA_SET_*; out may be NULL. */
int at_setattr(struct strata *s, struct mt_handle h, unsigned mask, const struct strata_stat *st,
	       struct mt_inode *out);

#endif
