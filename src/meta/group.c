/* Group commit of the meta service (group.h). */
#include "common/log.h"
#include "meta/group.h"
#include "strata/errors.h"

#define COMP "meta"
#define STAT_ADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)

void meta_group_init(struct meta_group *g, struct ns *ns, struct reactor *r, bool on)
{
	g->ns = ns;
	g->r = r;
	g->on = on;
	g->flush_queued = false;
	g->n = 0;
	g->groups = g->reqs = g->failures = 0;
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
		if (reactor_defer(g->r, flush_task, g)) {
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
}
