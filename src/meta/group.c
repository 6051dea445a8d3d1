/* Group commit of the meta service (group.h). */
#include <errno.h>
#include <stdlib.h>

#include "common/clock.h"
#include "common/log.h"
#include "meta/group.h"
#include "strata/errors.h"

#define COMP "meta"
/* Grouping pauses after a lost race: first this long, doubling while races
 * go on being lost, up to the most. */
#define PAUSE_MIN_MS 100u
#define PAUSE_MAX_MS 5000u
#define STAT_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

static void flush_task(void *arg);
static void again_task(void *arg);

void meta_group_init(struct meta_group *g, struct ns *ns, struct reactor *r, bool on)
{
	const char *env = getenv("STRATA_TEST_META_GROUP_DELAY_MS");
	char *end;
	long v;

	g->ns = ns;
	g->r = r;
	g->on = on;
	g->flush_queued = false;
	g->run_queued = false;
	g->nq = 0;
	g->svc = NULL;
	g->alone = false;
	g->again_queued = false;
	g->n = 0;
	g->nagain = 0;
	g->groups = g->reqs = g->failures = g->reruns = g->pauses = 0;
	g->pause_ms = 0;
	g->paused_until_ms = 0;
	g->delay_ms = 0;
	reactor_timer_init(&g->timer, flush_task, g);
	if (env && *env) {
		errno = 0;
		v = strtol(env, &end, 10);
		if (errno || *end || v < 0 || v > 10000)
			log_warn(COMP, "STRATA_TEST_META_GROUP_DELAY_MS='%s' is not a delay in"
				 " 0..10000 ms; ignored", env);
		else
			g->delay_ms = (uint32_t)v;
	}
}

/* Queues the answered requests of a group that lost a race to be made
 * again; the others (still at work, or no room) fail with err. Returns
 * how many were queued. */
static uint32_t queue_again(struct meta_group *g, uint32_t n, int err)
{
	uint32_t queued = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct svc_req *req = g->held[i];

		if (g->on && g->nagain < META_GROUP_MAX && svc_req_answered(req)) {
			g->again[g->nagain++] = req;
			queued++;
		} else {
			svc_req_unhold(req, err);
		}
	}
	if (queued && !g->again_queued) {
		if (reactor_defer(g->r, again_task, g)) {
			/* No task: answer them with the error after all. */
			for (uint32_t i = 0; i < g->nagain; i++)
				svc_req_unhold(g->again[i], err);
			g->nagain = 0;
			return 0;
		}
		g->again_queued = true;
	}
	return queued;
}

void meta_group_flush(struct meta_group *g)
{
	uint32_t n = g->n, queued = 0;
	int err;

	if (!g->ns || !g->ns->group)
		return;
	err = ns_group_end(g->ns, true);
	g->n = 0;
	if (err == -EBUSY) {
		queued = queue_again(g, n, err);
		/* Other meta servers write what this group touched: requests
		 * run alone for a while (each its own short transaction, each
		 * race retried alone), then grouping is tried again. */
		g->pause_ms = g->pause_ms ? g->pause_ms * 2 : PAUSE_MIN_MS;
		if (g->pause_ms > PAUSE_MAX_MS)
			g->pause_ms = PAUSE_MAX_MS;
		g->paused_until_ms = mono_ms() + g->pause_ms;
		STAT_ADD(&g->pauses, 1);
	} else if (!err && g->pause_ms && mono_ms() >= g->paused_until_ms + g->pause_ms) {
		g->pause_ms = 0;	/* a calm spell as long as the pause */
	}
	if (err && queued < n) {
		STAT_ADD(&g->failures, 1);
		log_warn(COMP, "cannot commit a group of %u request(s): %s; %u answered with the"
			 " error", n, strata_strerror(err), n - queued);
	}
	if (err != -EBUSY) {
		for (uint32_t i = 0; i < n; i++)
			svc_req_unhold(g->held[i], err);
	}
	STAT_ADD(&g->groups, 1);
	STAT_ADD(&g->reqs, n - queued);
	STAT_ADD(&g->reruns, queued);
}

/* Makes the requests of groups that lost a race again, each alone. */
static void again_task(void *arg)
{
	struct meta_group *g = arg;
	struct svc_req *again[META_GROUP_MAX];
	uint32_t n = g->nagain;

	g->again_queued = false;
	g->nagain = 0;
	for (uint32_t i = 0; i < n; i++)
		again[i] = g->again[i];
	g->alone = true;
	for (uint32_t i = 0; i < n; i++) {
		if (!svc_req_rerun(again[i]))
			svc_req_unhold(again[i], -EBUSY);
	}
	g->alone = false;
}

bool meta_group_rerunning(const struct meta_group *g)
{
	return g->alone;
}

static void flush_task(void *arg)
{
	struct meta_group *g = arg;

	g->flush_queued = false;
	meta_group_flush(g);
}

/* Runs the queued requests, in the order they came, in one group (or in
 * more, when one fills or a handler flushes it), then commits it. */
static void run_queue(struct meta_group *g)
{
	struct svc_req *reqs[META_GROUP_MAX];
	svc_handler_fn fns[META_GROUP_MAX];
	uint32_t n = g->nq;

	for (uint32_t i = 0; i < n; i++) {
		reqs[i] = g->queued[i];
		fns[i] = g->qfn[i];
	}
	g->nq = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (g->n == META_GROUP_MAX)
			meta_group_flush(g);
		if (!g->on || (!g->ns->group && ns_group_begin(g->ns))) {
			fns[i](g->svc, reqs[i]);	/* alone */
			continue;
		}
		svc_req_hold(reqs[i]);
		g->held[g->n++] = reqs[i];
		fns[i](g->svc, reqs[i]);
	}
	if (!g->ns->group)
		return;
	if (!g->delay_ms)
		meta_group_flush(g);
	else if (!g->flush_queued) {
		if (reactor_timer_arm(g->r, &g->timer, g->delay_ms))
			meta_group_flush(g);
		else
			g->flush_queued = true;
	}
}

static void run_task(void *arg)
{
	struct meta_group *g = arg;

	g->run_queued = false;
	run_queue(g);
}

void meta_group_submit(struct meta_group *g, struct svc_req *req, svc_handler_fn fn, void *svc)
{
	if (!g->on || g->alone || (g->pause_ms && mono_ms() < g->paused_until_ms)) {
		fn(svc, req);
		return;
	}
	if (g->nq == META_GROUP_MAX)
		run_queue(g);
	if (!g->run_queued) {
		if (reactor_defer(g->r, run_task, g)) {
			fn(svc, req);
			return;
		}
		g->run_queued = true;
	}
	g->svc = svc;
	g->queued[g->nq] = req;
	g->qfn[g->nq++] = fn;
}

void meta_group_stop(struct meta_group *g)
{
	meta_group_flush(g);
	g->on = false;
	run_queue(g);	/* alone now */
	for (uint32_t i = 0; i < g->nagain; i++)
		svc_req_unhold(g->again[i], -ESHUTDOWN);
	g->nagain = 0;
	if (g->r && reactor_timer_armed(&g->timer))
		reactor_timer_cancel(g->r, &g->timer);
}
