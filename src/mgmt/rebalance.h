/*
 * The rebalancer: moves chain members from the fullest storage node to the
 * emptiest until every node's fill is within a band of the mean, so that
 * storage nodes added to a running cluster take chains. Pure logic over the
 * cluster map, like membership.h: mgmt_service.c calls rebalance_step() on
 * its thread, as the leader, every REBALANCE_TICK_MS; the unit test drives
 * it directly.
 *
 * Fill: the number of chain entries (members and out-list entries) a node's
 * targets hold. Every chain carries the same share of the files (meta
 * stripes files over the whole chain table), so entries are the node's
 * share of the data; bytes in use would lag (heartbeats) and count the
 * chunks of a chain a node just left until they are collected.
 * Nodes counted: UP, with at least one SERVING or SYNCING target. The mean
 * is their entries over their number; a node is outside the band when its
 * fill is above ceil(mean * (100 + band) / 100) or below
 * floor(mean * (100 - band) / 100).
 *
 * A move (the drain's mechanism, membership.h cm_move_begin and
 * cm_member_leave): the target of the emptiest node joins a whole chain of
 * the fullest one (R members, all serving) as a SYNCING tail; the storage
 * nodes resync it from the chain; once mgmt hears it is in sync it serves,
 * and only then does the fullest node's member leave. A chain thus never
 * has fewer than R serving replicas. At most max_moves run at once; a move
 * starts only while fullest - emptiest >= 2 (one move lowers the spread),
 * and none while a node that holds chain entries is OFFLINE (its return
 * would undo moves made without it: drain or remove it first).
 *
 * A chain left with more than R serving members and no move of its own (a
 * move whose record was lost when mgmt's leadership changed, or whose new
 * member went away and came back) is trimmed: the member of the fullest
 * node leaves.
 */
#ifndef STRATA_MGMT_REBALANCE_H
#define STRATA_MGMT_REBALANCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cluster_map.h"

#define REBALANCE_MAX_MOVES 64u	/* mgmt.rebalance_max_moves' maximum */
#define REBALANCE_TICK_MS 200u		/* how often mgmt steps the rebalancer */

struct rebalance_opts {
	size_t size;		/* sizeof(struct rebalance_opts) */
	uint32_t band_pct;	/* mgmt.rebalance_band: 1..100 (default 10) */
	uint32_t max_moves;	/* mgmt.rebalance_max_moves: 1..REBALANCE_MAX_MOVES (1) */
	bool paused;		/* start paused (default false) */
};

void rebalance_opts_init(struct rebalance_opts *o, size_t size);

struct rebalance_move {
	uint32_t chain_id;
	uint32_t from;		/* the target that leaves */
	uint32_t to;		/* the target that joins (SYNCING until in sync) */
	uint64_t bytes;		/* estimated: from's bytes in use / its entries */
};

/* What status, /metrics and 'strata rebalance status' show. */
struct rebalance_stats {
	bool paused;
	bool balanced;		/* every counted node within the band */
	uint32_t band_pct, max_moves;
	uint32_t nodes;		/* nodes counted */
	uint32_t fill_min, fill_max;
	uint32_t fill_mean_x100;	/* the mean, times 100 */
	uint32_t in_flight;
	uint32_t pending;	/* estimated moves still to start */
	uint64_t moves_done, moves_cancelled;
	uint64_t bytes_moved;	/* estimated (struct rebalance_move.bytes) of done moves */
};

struct rebalancer {
	struct rebalance_opts o;
	bool paused;
	struct rebalance_move moves[REBALANCE_MAX_MOVES];
	uint32_t nmoves;
	struct rebalance_stats st;
	uint64_t idle_version;	/* the map version a step found nothing to do at */
	bool idle_paused;	/* and the pause then */
};

/* 0 or -EINVAL (opts NULL, size too small, band or max_moves out of
 * range). */
int rebalance_init(struct rebalancer *rb, const struct rebalance_opts *opts);
void rebalance_release(struct rebalancer *rb);

/* Paused: no move starts; moves in flight still finish. */
void rebalance_pause(struct rebalancer *rb, bool paused);

/* Forgets the moves in flight (mgmt lost or took the leadership: its map
 * was reloaded). Their chains are finished by the trim rule. */
void rebalance_forget(struct rebalancer *rb);

/*
 * One step over m (changed in place): finishes the moves whose new member
 * serves, drops those whose chain or new member went away, trims chains
 * over R, then starts moves up to max_moves (unless paused) and refreshes
 * the stats. Returns the number of chains changed (the caller persists the
 * map when > 0) or -ENOMEM (nothing changed).
 */
int rebalance_step(struct rebalancer *rb, struct cluster_map *m);

/* The stats as of the last step (pause state as of now). */
void rebalance_stats(const struct rebalancer *rb, struct rebalance_stats *out);

#endif
