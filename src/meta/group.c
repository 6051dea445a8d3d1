/* Group commit of the meta service (group.h). */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "meta/group.h"
#include "strata/errors.h"

#define COMP "meta"
#define STAT_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

static void flush_task(void *arg);

void meta_group_init(struct meta_group *g, struct ns *ns, struct reactor *r, bool on)
{
	const char *env = getenv("STRATA_TEST_META_GROUP_DELAY_MS");
	char *end;
	long v;

	g->ns = ns;
	g->r = r;
	g->on = on;
	g->flush_queued = false;
	g->n = 0;
	g->groups = g->reqs = g->failures = 0;
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

void meta_group_flush(struct meta_group *g)
{
	uint32_t n = g->n;
	int err;

	if (!g->ns || !g->ns->group)
		return;
	err = ns_group_end(g->ns, true);
	if (err) {
		STAT_ADD(&g->failures, 1);
		log_warn(COMP, "cannot commit a group of %u request(s): %s; each is answered"
			 " with the error", n, strata_strerror(err));
	}
	g->n = 0;
	for (uint32_t i = 0; i < n; i++)
		svc_req_unhold(g->held[i], err);
	STAT_ADD(&g->groups, 1);
	STAT_ADD(&g->reqs, n);
}

static void flush_task(void *arg)
{
	struct meta_group *g = arg;

	g->flush_queued = false;
	meta_group_flush(g);
}

void meta_group_join(struct meta_group *g, struct svc_req *req)
{
	if (!g->on)
		return;
	if (g->n == META_GROUP_MAX)
		meta_group_flush(g);
	if (!g->ns->group && ns_group_begin(g->ns))
		return;
	if (!g->flush_queued) {
		if (g->delay_ms ? reactor_timer_arm(g->r, &g->timer, g->delay_ms) :
				  reactor_defer(g->r, flush_task, g)) {
			meta_group_flush(g);
			return;
		}
		g->flush_queued = true;
	}
	svc_req_hold(req);
	g->held[g->n++] = req;
}

void meta_group_stop(struct meta_group *g)
{
	meta_group_flush(g);
	g->on = false;
	if (g->r && reactor_timer_armed(&g->timer))
		reactor_timer_cancel(g->r, &g->timer);
}
