/*
 * The orphan chunk reconciler of the meta service (docs/failures.md,
 * "Orphaned chunks").
 *
 * Every chunk belongs to an inode of the namespace or to a write in
 * flight. A put that failed half way (ENOSPC, a client or the control
 * daemon killed) can leave chunks that no inode covers: of a file removed
 * before its size was published, or past the size its writer never
 * published. The reconciler pages through the chunks each chain's head
 * holds (OP_CHUNK_LIST, one page at a time, paced), asks the namespace
 * about each, and remembers the orphans it finds with the time it first
 * saw each. An orphan seen again at least `grace_ms` later, with the same
 * version, is queued for deletion in the GC queue (ns_chunk_reclaim, which
 * checks again in its transaction); the GC worker removes it through the
 * chain like any other queued chunk. At most `rate` chunks are queued per
 * second.
 *
 * What is never taken:
 *  - a chunk with an update in flight at the head, or version 0;
 *  - a chunk whose inode number this namespace never handed out (another
 *    database, or one restored from an old backup): logged, counted;
 *  - a chunk beyond its file's size while a writer may hold the file: a
 *    writer holds a chunk capability (common/cap.h, CAP_LIFETIME_S), so
 *    without a cluster key (no capabilities) such chunks are never
 *    taken, and with one only when no write capability this process
 *    handed out for the file is still valid, and this process has run
 *    longer than CAP_LIFETIME_S (caps from before a restart have run
 *    out). An open for writing drains the file's queued items first, so
 *    a chunk queued just before the open is gone before the writer
 *    starts.
 *
 * Runs on one reactor thread (its owner: meta's reactor 0), like the
 * namespace and the storage client it borrows. One reconciler runs per
 * database: before a pass and at each chain it takes or renews a term in
 * the store (ns_reconcile_claim); a meta server that finds another's term
 * running stands by.
 */
#ifndef STRATA_META_RECONCILE_H
#define STRATA_META_RECONCILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/storage_client.h"
#include "meta/ns.h"
#include "net/reactor.h"

struct reconciler;

struct reconcile_opts {
	size_t opts_size;
	uint64_t interval_ms;	/* between passes; 0: never run; default 60000 */
	uint64_t grace_ms;	/* orphaned this long before removal; default 900000 */
	uint32_t rate;		/* chunks queued per second at most; default 100 */
	bool leases;		/* writers hold write capabilities (a cluster key) */
};

void reconcile_opts_init(struct reconcile_opts *o, size_t size);

/* Counters, read from any thread. */
struct reconcile_stats {
	uint64_t passes;	/* passes completed over every chain */
	uint64_t chunks;	/* orphans queued for removal */
	uint64_t bytes;		/* their bytes (as listed) */
	uint64_t pending;	/* orphans seen, waiting out the grace period */
	uint64_t foreign;	/* chunks of inodes this namespace never had (last pass) */
	uint64_t errors;	/* listings or namespace reads that failed */
	uint64_t standby;	/* 1: another meta server of the database runs it */
};

/*
 * Creates a reconciler on reactor r over ns and sc (borrowed: they must
 * outlive it). Call on r's thread. Returns 0, -EINVAL or -ENOMEM.
 */
int reconcile_new(struct reactor *r, struct ns *ns, struct sclient *sc,
		  const struct reconcile_opts *o, struct reconciler **out);

/* Arms the first pass (interval_ms from now). Owner thread. */
void reconcile_start(struct reconciler *rc);

/* Stops: no new listing or queueing starts. A listing in flight
 * completes through the storage client (sclient_free fails it). Owner
 * thread. */
void reconcile_stop(struct reconciler *rc);

/* Frees rc; the storage client must be gone (no completion can arrive).
 * Owner thread. NULL is a no-op. */
void reconcile_free(struct reconciler *rc);

/* Records that a write capability for file ino, valid until expiry_s
 * (seconds since the epoch), was handed out. Owner thread. */
void reconcile_note_write(struct reconciler *rc, uint64_t ino, int64_t expiry_s);

/* Copies the counters. Any thread. */
void reconcile_get_stats(const struct reconciler *rc, struct reconcile_stats *out);

#endif
