/*
 * Internals of the storage service shared by its modules: the state of
 * the service, its targets and their chunks, and what each module offers
 * the others. storage_service.c (life cycle, targets, per-chunk state),
 * storage_map.c (this node and mgmt), chain_update.c (updates),
 * chain_read.c (reads), resync.c (resync, repair, scrub) and recover.c
 * (a restarted member's chains, before it serves them); qos.h, the
 * buckets of the credentials' caps, which storage_service.c applies as
 * it hands a request to its target.
 *
 * Threads: a target and everything under it (its chunk store, its cstates,
 * its resync tasks) belong to the target's reactor, t->r; mgmt is spoken
 * to from reactor 0 alone; the map is shared by counted snapshots; the
 * counters are atomic (CNT).
 */
#ifndef STRATA_STORAGE_INT_H
#define STRATA_STORAGE_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "net/mgmt_addrs.h"
#include "chunk_store.h"
#include "common/cap.h"
#include "common/cluster_map.h"
#include "proto/server.h"
#include "proto/storage.h"
#include "net/rpc.h"
#include "net/server.h"
#include "common/service.h"
#include "storage/meter.h"
#include "storage/qos.h"

#define CSTATE_BUCKETS 4096u

/* The server side of the storage table: st_<op>_req/_reply, routing. */
PROTO_SERVER(storage, STORAGE_OPS)

struct storage;
struct target;
struct update_op;

/* Per-chunk state at a replica: updates in flight, and (at the head) the
 * queue of updates waiting for the one in progress. */
struct cstate {
	struct cstate *next;
	struct chunk_id id;
	uint32_t inflight;
	struct update_op *q_head, **q_tail;
	bool needsync;
	bool behind;			/* needsync, but the copy is intact: its own
					 * write of an update failed (resync.c) */
	bool damaged;			/* needsync, and the copy itself is bad (a
					 * checksum failed): it has nothing to
					 * offer a survey. Else a needsync copy
					 * is intact, only maybe old. */
	bool repairing;
	uint32_t sync_gen;		/* bumped by every new mark */
	uint32_t upd_gen;		/* bumped by every update submitted here:
					 * a repair fetched before one is stale */
	uint32_t removing;		/* resync removals queued on this chunk */
	uint32_t sync_chain;		/* chain to repair from */
	int sync_err;			/* why its last repair failed (0: none
					 * or one is running) */
	uint64_t sync_err_avail;	/* -ENOSPC: the store's free bytes then */
	/* Lost (resync.c, "lost chunks"): needsync and damaged, and every
	 * other member of the chain answered a repair that its copy is bad
	 * too. Reads answer STRATA_ELOST at once; a repair is tried again
	 * every LOST_RECHECK_MS only; a removal is taken at the head. */
	bool lost;
	uint16_t bad_srcs;		/* chain positions that said "bad" */
	uint64_t bad_ver;		/* at this chain version */
	uint64_t lost_ms;		/* when last found (or re-tried) lost */
	uint64_t assigned;		/* head: the last version handed out */
	bool dirty;			/* applied an update a member below may
					 * lack: no client read until a survey
					 * finds every member holds it */
	struct cstate *dnext;		/* t->dirty list */
	bool draining;			/* chain_update.c: drain() runs */
	uint32_t busy_chain;		/* the update last started here: its */
	uint64_t busy_ver;		/* chain and version (OP_CHUNK_LIST) */
	struct cstate *snext;
};

struct map_snap {
	int refs;
	struct cluster_map map;
};

struct resync;
struct recovery;
struct qos_wait;

struct target {
	uint32_t id;
	uint32_t idx;
	struct storage *st;
	struct reactor *r;
	struct rpc_pool *pool;
	struct chunk_store *cs;
	bool closing;			/* the service stops: no update starts */
	struct reactor_watch w;
	struct cstate *buckets[CSTATE_BUCKETS];
	char dir[CFG_STR_MAX + 32];
	/* The filesystem of dir (fs_identity()), or 0 when the target has a
	 * capacity of its own (storage.capacity): told to mgmt with every
	 * heartbeat, so that targets on one disk count it once. */
	uint64_t fs;
	/* Chunks this replica knows it lacks (missed updates, bad copies):
	 * reads of them are refused until repaired. */
	struct cstate *needsync;	/* list through cstate.snext */
	struct cstate *dirty;		/* list through cstate.dnext */
	struct resync *resyncs;		/* running resync/repair tasks */
	/* recover.c: the chains (a bit per chain id) in which this process
	 * knows what its copies lack; every chain where it is SERVING and
	 * whose bit is clear is held back. */
	uint8_t *known;
	uint32_t known_len;		/* bytes */
	struct recovery *recoveries;	/* running chain recoveries */
	struct reactor_timer sync_timer;
	struct reactor_timer scrub_timer;
	struct chunk_id *scrub_ids;
	uint32_t scrub_n, scrub_pos;
	uint8_t *scrub_buf;
	bool scrub_busy;
	uint64_t scrub_rate_mb, scrub_credit;
	/* The chunk capabilities verified last (cap_allow): a file read or
	 * written chunk by chunk costs one HMAC per cap, not per request. */
	struct cap_cache caps;
	/* QoS (qos.h): client requests held until their credential's
	 * bucket has room, in deadline order (a credential's deadlines never
	 * decrease, so its requests keep their order), with one timer for
	 * the first; and the entries to hold them, kept for reuse. */
	struct qos_wait *qos_waiting;
	struct qos_wait *qos_free;
	struct reactor_timer qos_timer;
	/* reclaim.c: the map version last scanned, whether some copies were
	 * left for a later tick, and removals in flight. */
	uint64_t reclaim_version;
	bool reclaim_more;
	uint32_t reclaim_inflight;
};

/* [storage] keys. */
struct storage_cfg {
	int64_t targets;
	uint64_t capacity;
	bool sync_writes;
	bool buffered_reads;
	bool shm_reads;
	int64_t scrub_rate_mb;
	char target_dirs[CFG_STR_MAX];	/* "" = DATA/targets/N (target_dir.h) */
};

struct storage {
	struct service_env env;
	/* env.mgmt_addr as a list, and which mgmt to call (mgmt_addrs.h):
	 * reactor 0 moves it on failures; any thread reads it. */
	struct mgmt_addrs mgmt;
	const char *map_called;		/* the mgmt the map fetch in flight went to */
	const struct storage_cfg *cfg;
	uint32_t node_id;
	int ntargets;
	struct target *targets;
	struct rpc_pool **pools;	/* per reactor */
	pthread_mutex_t map_lock;
	struct map_snap *snap;
	bool registered;
	uint64_t incarnation;		/* this process's start, told to mgmt */
	uint64_t ident;			/* the data directory's (service_data_ident) */
	uint64_t reg_version;		/* atomic: the map version of mgmt's
					 * answer to this process's registration
					 * (0: none yet) */
	uint64_t lease_until_ms;	/* atomic: serve clients until then */
	bool fetching;
	struct reactor_timer hb;
	uint64_t hb_ms;
	uint32_t timeout_ms;
	/* counters (atomic) */
	uint64_t n_writes, n_reads, bytes_written, bytes_read, n_stale, n_dirty, n_integrity,
		 n_verify, n_mapped, n_shm_reads, n_shm_writes, n_batches;
	uint64_t n_synced_chunks, bytes_synced, n_repaired, n_scrubbed;
	uint64_t n_reclaimed;		/* copies of chains left, removed (reclaim.c) */
	uint64_t n_lost;		/* gauge: chunks lost here now */
	/* The caps of client credentials (qos.h), for every target. */
	struct qos_table qos;
	struct meter meter;		/* bytes moved per tenant (meter.h) */
	struct shm_serve *shm;		/* same-host readers' regions (shm_serve.c) */
};

#define CNT(st, f, v) __atomic_fetch_add(&(st)->f, (v), __ATOMIC_RELAXED)

/* ---- storage_service.c: targets and their per-chunk state ---- */

/* Any thread: the target with this id on this node, or NULL. The targets
 * are fixed from start to stop. Every request handler looks its target up
 * here, and so does the hand-over to the target's reactor. */
struct target *find_target(struct storage *st, uint32_t id);
/* t's thread: whether req's caller may do need (CAP_READ, CAP_WRITE) to
 * the chunks of ino with cap (proto/storage.h, sp_cap; NULL: none).
 * Daemons and the peers of a node without a key pass; a client token
 * needs a cap meta signed for ino with those rights, not expired. 0 or
 * -EACCES, warned about once per connection (the peer and the token). */
int cap_allow(struct target *t, struct svc_req *req, const struct sp_cap *cap, uint64_t ino,
	      uint8_t need);
/* t's thread: the state of chunk id, created (empty) when create is set;
 * NULL when there is none, or no memory. chain_update.c, chain_read.c and
 * resync.c call it; the target frees every cstate at its detach. */
struct cstate *cstate_find(struct target *t, const struct chunk_id *id, bool create);
/* t's thread: frees c when nothing holds it any more (no update in
 * flight or queued, no mark, no repair, no version handed out and not
 * held); else keeps it. Whoever drops a hold on c calls it. */
void cstate_maybe_free(struct target *t, struct cstate *c);
/* t's thread: sets or clears c's dirty mark (and its place in t's dirty
 * list); a cleared cstate may be freed when nothing else holds it.
 * chain_update.c and resync.c's surveys set and clear it. */
void cstate_set_dirty(struct target *t, struct cstate *c, bool dirty);

/* ---- storage_map.c: this node and mgmt ---- */

/* Any thread: the current map with a reference held (NULL before the
 * first map arrives); every map_get is paired with a map_put. */
struct map_snap *map_get(struct storage *st);
/* Any thread: drops a reference of map_get (s may be NULL); the last one
 * frees the snapshot. storage_stop drops the service's own. */
void map_put(struct storage *st, struct map_snap *s);
/* Any thread: the version of the current map, 0 before the first. */
uint64_t map_version(struct storage *st);
/* Any thread: whether this node's lease with mgmt still runs. A replica
 * serves clients (reads, updates at the head) only then. */
bool storage_lease_valid(struct storage *st);
/* Any thread, while snap is held: checks that ref names a chain of snap
 * at the same version and that its target is a member (else
 * STRATA_ESTALE_MAP, and a newer map is fetched on reactor 0 when the
 * sender's is newer). Fills *chain (valid while snap is held) and the
 * target's position *pos. The update, read and listing handlers call
 * it. */
int check_ref(struct storage *st, struct map_snap *snap, const struct sp_ref *ref,
	      const struct cm_chain **chain, int *pos);
/* check_ref that also takes a target of the chain's out list (*pos -1):
 * a member recovering the chain lists and reads the copies of members
 * taken out whose process still answers (recover.c). */
int check_ref_or_out(struct storage *st, struct map_snap *snap, const struct sp_ref *ref,
		     const struct cm_chain **chain, int *pos);
/* Position of target in chain c, or -1. */
int chain_pos(const struct cm_chain *c, uint32_t target);
/* Any thread: logs a damaged or lost chunk of a target and reports it to
 * mgmt from reactor 0 (nobody waits for the answer). Whoever finds a bad
 * copy calls it: reads, updates, the scrubber. */
void report_to_mgmt(struct storage *st, uint32_t target, const struct chunk_id *id, int err);
/* storage_start, before it posts hb_start: sets up the heartbeat timer. */
void hb_init(struct storage *st);
/* Reactor 0, posted by storage_start (arg: the storage): registers with
 * mgmt and starts the heartbeats, which renew the lease and fetch each
 * new map. pool_free_on (storage_stop) cancels the timer. */
void hb_start(void *arg);

/* ---- chain_read.c: the read path ---- */

/* Handlers, each on the reactor that owns the request's target (the
 * service hands it over there), or on the connection's reactor for a
 * target this node lacks, answered STRATA_ESTALE_MAP (-ENOENT for a space
 * query). Each answers req. */
/* OP_CHUNK_READ: a chunk's range, where the read rules (the flags, the
 * replica's state, the lease) let this replica serve it. OP_CHUNK_VERIFY:
 * the stored copy of the range checked whatever the state, a damaged one
 * reported and marked for repair; the status alone. */
void op_read(void *svc, struct svc_req *req);
/* OP_CHUNK_READ_SHM: a read whose bytes go into the reader's region. */
void op_read_shm(void *svc, struct svc_req *req);

/* ---- shm_serve.c: same-host readers' shared-memory regions ---- */

/* Takes the abstract socket name for env.addr and starts the thread that
 * maps readers' regions (with storage.shm_reads). A name another process
 * holds is logged and leaves readers on TCP. 0 or -ENOMEM. */
int shm_serve_start(struct storage *st);
/* After the targets stopped: unmaps every region. */
void shm_serve_stop(struct storage *st);
/* Any thread: the place in region m where len bytes at offset at go (a
 * READ_SHM) or come from (a WRITE_SHM), with a reference that keeps it
 * mapped (shm_put), or NULL and *err (-ENOENT: no such region, or the
 * secret is wrong; -ERANGE: outside). */
uint8_t *shm_get(struct storage *st, const struct sp_shm *m, uint64_t at, uint32_t len, int *err);
void shm_put(struct storage *st, const struct sp_shm *m);
/* OP_SHM_CHECK, on any thread. */
void op_shm_check(void *svc, struct svc_req *req);
void shm_stats(struct storage *st, uint64_t *live, uint64_t *attached, uint64_t *refused);
/* OP_CHUNK_BATCH_READ: ranges of many chunks of one target, each under the
 * rules of a client's read, each with its own status. */
void op_batch_read(void *svc, struct svc_req *req);
/* OP_CHUNK_STAT: the stored version, length and CRC, whatever the state. */
void op_stat(void *svc, struct svc_req *req);
/* OP_TARGET_SPACE: the target's capacity and use. */
void op_space(void *svc, struct svc_req *req);

/* ---- chain_update.c: the update path ---- */

/* Handler of OP_CHUNK_WRITE/TRUNCATE/REMOVE, from a client or a
 * predecessor, on the target's thread (as the read handlers). */
void op_update(void *svc, struct svc_req *req);
/* OP_CHUNK_WRITE_SHM: a client's WRITE whose bytes are in its region; they
 * are copied out first, then handled as a WRITE's. */
void op_write_shm(void *svc, struct svc_req *req);
/* t's thread: answers the updates queued on c with status; the target's
 * detach calls it before it frees c (the target is closing). */
void update_queue_drop(struct cstate *c, int status);

/* ---- resync.c: resync, repair, scrub; each on the target's thread ---- */

/* Marks a chunk of t as damaged (refuses reads, a survey included) and
 * schedules its repair from chain chain_id. Whoever finds a bad copy
 * calls it. */
void resync_mark(struct target *t, const struct chunk_id *id, uint32_t chain_id);
/* Marks a chunk of t whose own write of an update failed, while other
 * members may hold the update: its copy is intact but maybe behind. It
 * serves no client read and takes no update at the head until a survey of
 * the chain settles which copy is the newest. chain_update.c calls it. */
void resync_mark_behind(struct target *t, const struct chunk_id *id, uint32_t chain_id);
/* Drops c's needsync mark (it was just made whole): chain_update.c, when
 * a predecessor sent the chunk whole, and resync.c's own repairs. */
void resync_clear(struct target *t, struct cstate *c);
/* Applies the map to t: starts a resync of every chain where t is
 * SYNCING, ends those where it no longer is, runs the repairs. Every
 * tick of t's sync timer calls it. */
void resync_check(struct target *t);
/* target_attach: starts t's sync timer. */
void resync_start_target(struct target *t);
/* target_quiesce: stops t's timers and its tasks (those with an RPC in
 * flight end when the pools close). */
void resync_stop_target(struct target *t);
/* target_attach: the scrubber, at rate_mb MB/s (0: off). */
void scrub_start(struct target *t, uint64_t rate_mb);
/* Handler of OP_CHUNK_LIST (a resyncing member lists a chain's chunks
 * here), on the target's thread. */
void op_chunk_list(void *svc, struct svc_req *req);

/* ---- recover.c: a restarted member's chains, each on the target's thread ---- */

/* Whether t holds back every chunk of chain c of map m, where it is
 * member pos: it is SERVING there, but its process does not know yet
 * which of its copies lack updates the other members hold (it restarted,
 * and came back as the chain's only serving member). Held back: client
 * reads and updates at the head, listings and repair reads for resyncing
 * members; a survey or a recovery still reads its stored copies. May mark
 * the chain known (a new chain: another member serves too). */
bool chain_held(struct target *t, const struct cluster_map *m, const struct cm_chain *c, int pos);
/* Applies the map to t's holds: marks the chains this process knows,
 * and recovers each held one from the other members (recover.c tells
 * how). Every tick of t's sync timer calls it. */
void recover_check(struct target *t);
/* target_quiesce: ends t's recoveries (those with an RPC or an install
 * in flight end when it completes). */
void recover_stop_target(struct target *t);

/* ---- reclaim.c: the copies of chains a target left ---- */

/* Removes t's copies of the chains it left for good (reclaim.c tells
 * which), a batch at a time, once per new map and again while some are
 * left. Every tick of t's sync timer calls it. */
void reclaim_check(struct target *t);
/* t's thread: queues the removal of chunk id unless its state here is
 * busy (an update in flight or queued, a repair; for a reclaim also a
 * removal already queued). Returns whether it was queued; the removal
 * holds the cstate until it completes. reclaim: counted as
 * reclaim_check's, and the chunk's needsync and dirty marks are dropped
 * with it. resync.c drops a pass's extras with it. */
bool target_remove_idle(struct target *t, const struct chunk_id *id, bool reclaim);

#endif
