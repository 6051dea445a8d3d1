/*
 * Storage client: chunk I/O routed by the cluster map, with retries.
 *
 * An sclient lives on one reactor thread (its owner) with its own
 * connection pool and a cached cluster map, refreshed from mgmt when a
 * server reports a stale version. I/Os are submitted from any thread;
 * each completes exactly once, its callback running on the owner thread.
 *
 * Writes go to the chain head (chain replication does the rest). Reads go
 * to a serving replica, spreading load by a hash of the chunk and the
 * 1 MiB span read (the same bytes ask the same replica first, so each
 * replica's page cache holds its share); a dirty replica (STRATA_EDIRTY)
 * sends the read to the tail, a checksum mismatch to another replica. The
 * client checks the CRC32C of every byte it reads. Transient failures
 * (timeouts, lost connections, stale maps, unavailable chains) are retried
 * with bounded exponential backoff until retry_ms has passed; then the I/O
 * fails with the last error. Nothing waits forever.
 */
#ifndef STRATA_CLIENT_STORAGE_CLIENT_H
#define STRATA_CLIENT_STORAGE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "net/auth.h"
#include "net/reactor.h"
#include "proto/storage.h"
#include "shm_reads.h"

struct sclient;
struct cm_service;	/* common/cluster_map.h */

struct sclient_opts {
	size_t opts_size;
	uint32_t timeout_ms;	/* one RPC; default 10000 */
	uint32_t retry_ms;	/* total budget of an I/O's retries; default 30000 */
	const struct net_cred *cred;	/* copied; NULL: the process default */
	/* With has_tls, the TLS client context (a reference is taken; NULL:
	 * plain TCP); without, the process default (net_tls_default). */
	bool has_tls;
	struct net_tls *tls;
	/* Reads ask the serving replicas in turn (each read the next one)
	 * rather than the one their chunk and span hash to; default false.
	 * For tools that must read every replica (audits, damage tests). */
	bool read_in_turn;
	/* Reads and writes never go through shared memory with a daemon on
	 * this host (shm_reads.h); default false. */
	bool no_shm;
};

void sclient_opts_init(struct sclient_opts *o, size_t size);

/* Creates a client on reactor r (running). mgmt_addr: one mgmt address or
 * a comma-separated list (net/mgmt_addrs.h); the map is fetched from
 * the leader among them. Any thread. -EINVAL: a bad list. */
int sclient_new(struct reactor *r, const char *mgmt_addr, const struct sclient_opts *o,
		struct sclient **out);
/* Fails the I/Os still queued for retry, closes connections, frees. Any
 * thread except the owner's; no I/O may be submitted afterwards. */
void sclient_free(struct sclient *sc);
/* Blocks until a cluster map with chains is known, or timeout_ms passes.
 * Returns 0, -ETIMEDOUT or the last error. Any thread but the owner's. */
int sclient_wait_map(struct sclient *sc, uint32_t timeout_ms);
/* Chains in the chain table of the current map (0 before one is known). */
uint32_t sclient_table_len(struct sclient *sc);
/* Counts of the cached map, for statfs: nodes up, serving targets, the
 * replication factor and the targets' total capacity. */
void sclient_map_summary(struct sclient *sc, uint32_t *nodes, uint32_t *targets,
			 uint32_t *replication, uint64_t *capacity);
/*
 * The chains of the cached map's table that have a member mgmt holds full
 * (cm_target.full): bit i of bits[i / 64] for table index i, for the
 * first nwords * 64 indexes (later ones read as not full). *nfull gets how
 * many are full in the whole table. Returns the table length (0 before a
 * map is known). What meta's placement avoids. Any thread.
 */
uint32_t sclient_full_chains(struct sclient *sc, uint64_t *bits, uint32_t nwords,
			     uint32_t *nfull);
/* Version of the cached map. */
uint64_t sclient_map_version(struct sclient *sc);
/* The address (into addr, cap bytes) and node id of an UP service of kind
 * (CM_SVC_*) in the cached map, the one after node id `after` (0: the
 * first; cm_pick_service), asking mgmt for newer maps for up to timeout_ms
 * while there is none. Returns 0, -ENOENT (none listed in time), the map's
 * last error or -ENAMETOOLONG. Any thread but the owner's. */
int sclient_find_service(struct sclient *sc, uint32_t kind, uint32_t after, uint32_t timeout_ms,
			 char *addr, size_t cap, uint32_t *node_id);
/* Copies the UP services of kind (CM_SVC_*) of the cached map, in node
 * id order, into out (up to max) and the map's version into *version
 * (may be NULL). Returns how many are UP (more than max when out was too
 * short). Waits for nothing. Any thread. */
uint32_t sclient_services(struct sclient *sc, uint32_t kind, struct cm_service *out,
			  uint32_t max, uint64_t *version);
/* Asks mgmt for a newer map now; returns at once. Any thread. */
void sclient_refresh(struct sclient *sc);

/* SC_LIST (daemons only: OP_CHUNK_LIST) pages through the chunks chain
 * chain_idx holds, as its head (its first serving member) lists them:
 * ino, idx is the cursor, list_after says whether strictly after it, len
 * the most entries (1..SP_LIST_PAGE). The page lands in io->list, which
 * the caller frees with sp_list_rep_release() (also after a failure). */
enum sc_kind { SC_READ = 1, SC_WRITE, SC_TRUNCATE, SC_REMOVE, SC_STAT, SC_LIST };

struct sc_io;
typedef void (*sc_done_fn)(struct sc_io *io);

struct sc_io {
	/* in */
	enum sc_kind kind;
	uint32_t chain_idx;	/* index into the chain table: layout_chain_index() */
	uint64_t ino, idx;	/* the chunk */
	struct sp_cap cap;	/* what lets a client token touch it (meta's,
				 * at open); zeros from a daemon */
	uint32_t offset, len;	/* range in the chunk; TRUNCATE: len = new length */
	void *buf;		/* READ: len bytes filled, zeros past the data;
				 * WRITE: len bytes, borrowed until cb */
	bool list_after;	/* LIST: strictly after (ino, idx) */
	sc_done_fn cb;
	void *user;
	/* out */
	struct sp_list_rep list;	/* LIST: the page (caller releases) */
	int status;		/* 0 or a negative error */
	uint32_t nread;		/* READ: bytes of data before the zero fill */
	uint64_t version;	/* the chunk's version (0: hole / absent) */
	uint32_t length;	/* WRITE/TRUNCATE/STAT: chunk length after */
	/* private */
	struct sclient *sc;
	struct sc_io *next;
	uint64_t deadline_ms;
	uint32_t attempt;
	uint32_t quick;		/* replicas tried at once since the last backoff */
	uint32_t replica;
	int last_err;
	uint32_t crc;
	struct sp_ref tried;	/* the chunk at the target of the attempt in flight */
	struct shm_slot slot;	/* READ, WRITE: its shared-memory slot (peer -1: TCP) */
	bool no_shm;		/* READ, WRITE: the daemon forgot our region, or
				 * knows no WRITE_SHM: TCP */
	struct reactor_timer timer;
};

/* Reads of at most SC_BATCH_SMALL bytes submitted together from other
 * threads (before the owner's next turn) to one target leave as one
 * OP_CHUNK_BATCH_READ; each still completes, and is retried, on its own. */
#define SC_BATCH_SMALL (64u << 10)

/* Submits io (any thread). io->cb runs exactly once, on the owner thread. */
void sc_submit(struct sclient *sc, struct sc_io *io);
/* Submits io and waits for it (any thread but the owner's). Returns
 * io->status; io->cb is ignored. */
int sc_sync(struct sclient *sc, struct sc_io *io);

#endif
