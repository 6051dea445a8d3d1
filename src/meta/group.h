/*
 * Group commit of the meta service (docs/namespace.md, "Group commit").
 *
 * Every request handled on the owner reactor's thread joins the open
 * group, opening one if none is (ns_group_begin): its namespace calls run
 * in the group's transaction and its answer is held (svc_req_hold). At the
 * end of the loop turn (a deferred task), when META_GROUP_MAX answers are
 * held, or when the service calls meta_group_flush before acting outside
 * the database on what the group changed (the GC's chunk removals), the
 * group commits and every held answer leaves; a failed commit turns each
 * success into that error, as none of the group's changes happened. Reads
 * join too: a read may have seen a change of the group.
 *
 * Everything runs on the owner's thread; the counters are read anywhere
 * with relaxed atomics.
 */
#ifndef STRATA_META_GROUP_H
#define STRATA_META_GROUP_H

#include <stdbool.h>
#include <stdint.h>

#include "meta/ns.h"
#include "net/reactor.h"
#include "net/server.h"

#define META_GROUP_MAX 256u	/* answers held by one group at most */

/* Caller-owned; meta_group_init sets it up. */
struct meta_group {
	struct ns *ns;		/* borrowed: the owner's namespace */
	struct reactor *r;	/* borrowed: the owner, where the flush is deferred */
	bool on;		/* grouping; off: each request alone, as before */
	bool flush_queued;	/* the end-of-turn flush is deferred */
	/* $STRATA_TEST_META_GROUP_DELAY_MS (tests only): a group commits
	 * this long after it opened, by a timer, instead of at the end of
	 * the turn, so that a kill -9 lands while answers are held. */
	uint32_t delay_ms;
	struct reactor_timer timer;
	uint32_t n;
	struct svc_req *held[META_GROUP_MAX];
	/* Relaxed atomics: groups committed (or failed), the requests they
	 * answered, and the failed commits. */
	uint64_t groups, reqs, failures;
};

/* Sets up g over ns on owner r; on false never groups (a store without
 * savepoints, or meta.group_commit off). */
void meta_group_init(struct meta_group *g, struct ns *ns, struct reactor *r, bool on);

/* req, a request about to be handled, joins the open group or a new one.
 * When no group can be opened it runs alone (answered at once, each of its
 * transactions committed on its own). */
void meta_group_join(struct meta_group *g, struct svc_req *req);

/* Commits the open group, if any, and sends every held answer. */
void meta_group_flush(struct meta_group *g);

/* Flushes and stops grouping (the service stops): later requests run
 * alone. */
void meta_group_stop(struct meta_group *g);

#endif
