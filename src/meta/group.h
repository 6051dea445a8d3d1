/*
 * Group commit of the meta service (docs/namespace.md, "Group commit").
 *
 * Every request for the owner reactor's thread is first queued
 * (meta_group_submit). At the end of the loop turn (a deferred task) the
 * queue runs: a group opens (ns_group_begin), each request's handler runs
 * in turn, its namespace calls in the group's transaction, and its answer
 * is held (svc_req_hold); then the group commits and every held answer
 * leaves. A failed commit turns each success into that error, as none of
 * the group's changes happened. Reads join too: a read may have seen a
 * change of the group.
 *
 * The group's transaction begins only after every request in it arrived,
 * so it sees every change committed before any of them was sent: with
 * several meta servers on one PostgreSQL database, a client that saw its
 * create answered by one server and then asks another finds the file,
 * which a group opened before the request came (its snapshot older than
 * the create) would not. A group commits early when META_GROUP_MAX answers
 * are held, or when the service calls meta_group_flush before acting
 * outside the database on what the group changed (the GC's chunk
 * removals); the requests left in the queue open the next one.
 *
 * A group that lost a serialization race (-EBUSY: PostgreSQL, with other
 * meta servers on the database) is made again instead: each request whose
 * answer was held runs its handler once more (svc_req_rerun), alone, in
 * transactions of its own that retry their races as ungrouped calls do,
 * from a deferred task of the owner so that no handler runs inside
 * another. A request of the group still at work when it failed (one that
 * waits for its file's chunk removals) is answered -EBUSY. Grouping then
 * pauses (requests run alone, at once) for 100 ms, doubling up to 5 s
 * while groups go on losing races, and is back to normal after a calm
 * spell as long as the pause: under PostgreSQL's serializable isolation a
 * long transaction conflicts with every server's writes to the index
 * pages it read, so under contention short transactions of one request
 * each get through where groups would be made again and again.
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
	bool flush_queued;	/* the delayed flush is armed (delay_ms) */
	bool run_queued;	/* the task that runs the queue is deferred */
	bool alone;		/* requests made again run alone (no group) */
	bool again_queued;	/* the task that makes them again is deferred */
	/* $STRATA_TEST_META_GROUP_DELAY_MS (tests only): a group commits
	 * this long after it opened, by a timer, instead of at the end of
	 * the turn, so that a kill -9 lands while answers are held (requests
	 * of later turns join it meanwhile). */
	uint32_t delay_ms;
	struct reactor_timer timer;
	/* The requests of this turn, in order, and their handlers. */
	uint32_t nq;
	struct svc_req *queued[META_GROUP_MAX];
	svc_handler_fn qfn[META_GROUP_MAX];
	void *svc;		/* the handlers' service */
	uint32_t n;
	struct svc_req *held[META_GROUP_MAX];
	/* Requests of groups that lost a race, to make again, in order. */
	uint32_t nagain;
	struct svc_req *again[META_GROUP_MAX];
	/* Grouping is paused until paused_until_ms (mono_ms) after a lost
	 * race; pause_ms: the last pause (0: none lately). */
	uint32_t pause_ms;
	uint64_t paused_until_ms;
	/* Relaxed atomics: groups committed (or failed), the requests they
	 * answered, the failed commits, the requests made again, and the
	 * pauses. */
	uint64_t groups, reqs, failures, reruns, pauses;
};

/* Sets up g over ns on owner r; on false never groups (a store without
 * savepoints, or meta.group_commit off). */
void meta_group_init(struct meta_group *g, struct ns *ns, struct reactor *r, bool on);

/* Runs fn(svc, req) for req, a request that just came: at the end of the
 * turn in a group (above), or at once, alone, when grouping is off, while
 * requests are made again, or when no task can be deferred. */
void meta_group_submit(struct meta_group *g, struct svc_req *req, svc_handler_fn fn, void *svc);

/* Commits the open group, if any, and sends every held answer (or queues
 * the requests to make again: above). */
void meta_group_flush(struct meta_group *g);

/* Whether the request being handled is one made again (its operation was
 * counted the first time). */
bool meta_group_rerunning(const struct meta_group *g);

/* Flushes and stops grouping (the service stops): queued and later
 * requests run alone; requests waiting to be made again are answered
 * -ESHUTDOWN. */
void meta_group_stop(struct meta_group *g);

#endif
