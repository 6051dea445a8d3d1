/* A service's announcements to mgmt (announce.h). */
#include <errno.h>
#include <stdlib.h>

#include "net/mgmt_addrs.h"
#include "common/cluster_map.h"
#include "common/log.h"
#include "mgmt/announce.h"
#include "net/auth.h"
#include "net/reactor.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "strata/errors.h"

struct announcer {
	struct service_env env;		/* borrowed strings: valid until stop */
	struct mgmt_addrs mgmt;		/* env.mgmt_addr as a list (owner thread) */
	const char *map_called;		/* the mgmt of the fetch in flight */
	const char *called;		/* the mgmt of the last announcement */
	int in_flight;			/* announcements not answered yet */
	uint32_t kind;
	uint64_t incarnation;
	struct reactor *r;
	struct rpc_pool *pool;
	struct reactor_timer timer;
	int state;			/* 1: the last announcement was answered,
					 * -1: it failed (logged once), 0: none yet */
	uint64_t map_version;		/* of the last map fetched; 0: none */
	bool fetching;
	bool closing;
};

static void failed(struct announcer *a, const char *called, int status,
		   const struct rpc_msg *resp)
{
	/* A follower names the leader; a dead mgmt, the next one. */
	if (mgmt_addrs_failed(&a->mgmt, called, status, resp)) {
		log_info(cm_service_kind_name(a->kind), "mgmt '%s' cannot list us (%s): trying '%s'",
			 called, strata_strerror(status), mgmt_addrs_cur(&a->mgmt));
		return;
	}
	if (a->state != -1)
		log_warn(cm_service_kind_name(a->kind), "cannot announce to mgmt '%s': %s (retrying every %u ms)",
			 called, strata_strerror(status), a->env.heartbeat_ms);
	a->state = -1;
}

static void on_map(void *arg, int status, struct rpc_msg *resp)
{
	struct announcer *a = arg;
	struct cluster_map m;
	bool changed = false;

	a->fetching = false;
	if (a->closing)
		return;
	cm_init(&m);
	if (!status)
		status = cmap_decode_since(resp->body, resp->hdr.body_len, &m, &changed);
	if (status) {
		log_warn(cm_service_kind_name(a->kind), "cannot fetch the cluster map from '%s': %s",
			 a->map_called, strata_strerror(status));
		mgmt_addrs_failed(&a->mgmt, a->map_called, status, resp);
	} else if (changed) {
		if (net_revoked_update(m.version, (const char (*)[TOKEN_ID_LEN + 1])m.revoked,
				       m.nrevoked))
			log_warn(cm_service_kind_name(a->kind), "cannot apply the revoked tokens of map version %llu",
				 (unsigned long long)m.version);
		else
			a->map_version = m.version;
	}
	cm_release(&m);
}

/* The lease names mgmt's map version: a newer one may carry revoked
 * tokens, which this service must refuse like every other daemon. */
static void fetch_map(struct announcer *a, uint64_t version)
{
	struct mg_since rq = { a->map_version };
	struct proto_call c = { .cb = on_map, .arg = a,
				.timeout_ms = mgmt_addrs_timeout(&a->mgmt, a->env.rpc_timeout_ms) };

	if (a->fetching || version == a->map_version)
		return;
	a->map_called = mgmt_addrs_cur(&a->mgmt);
	a->fetching = mg_get_map_call(a->pool, a->map_called, &rq, &c) == 0;
}

static void on_reply(void *arg, int status, struct rpc_msg *resp)
{
	struct announcer *a = arg;
	struct mg_lease rep;

	a->in_flight--;
	if (a->closing)
		return;
	if (!status)
		status = mg_announce_rep(resp, &rep);
	if (status) {
		failed(a, a->called, status, resp);
		return;
	}
	if (a->state != 1)
		log_info(cm_service_kind_name(a->kind), "listed in the cluster map by mgmt '%s' as node %u at '%s'",
			 a->called, a->env.node_id, a->env.addr);
	a->state = 1;
	fetch_map(a, rep.map_version);
}

static void on_timer(void *arg)
{
	struct announcer *a = arg;
	struct mg_announce rq = { a->kind, a->env.node_id, pstr_c(a->env.addr), a->incarnation };
	struct proto_call c = { .cb = on_reply, .arg = a,
				.timeout_ms = mgmt_addrs_timeout(&a->mgmt, a->env.rpc_timeout_ms) };
	int rc;

	/* With several mgmt, one at a time: its failure names the mgmt it
	 * went to (a->called) when the next one is chosen. */
	if (a->mgmt.n > 1 && a->in_flight) {
		reactor_timer_arm(a->r, &a->timer, a->env.heartbeat_ms);
		return;
	}
	a->called = mgmt_addrs_cur(&a->mgmt);
	rc = mg_announce_call(a->pool, a->called, &rq, &c);
	if (rc)
		failed(a, a->called, rc, NULL);
	else
		a->in_flight++;
	reactor_timer_arm(a->r, &a->timer, a->env.heartbeat_ms);
}

static void start_on_owner(void *arg)
{
	on_timer(arg);
}

static void stop_on_owner(void *arg)
{
	struct announcer *a = arg;

	a->closing = true;
	reactor_timer_cancel(a->r, &a->timer);
	rpc_pool_free(a->pool);
	a->pool = NULL;
}

int announce_start(const struct service_env *env, uint32_t kind, struct announcer **out)
{
	struct announcer *a;
	int rc;

	if (kind < CM_SVC_META || kind > CM_SVC_LAST || !env->node_id || !env->addr ||
	    !env->addr[0] || !env->mgmt_addr || !env->mgmt_addr[0] || !env->nreactors)
		return -EINVAL;
	a = calloc(1, sizeof(*a));
	if (!a)
		return -ENOMEM;
	a->env = *env;
	if (mgmt_addrs_init(&a->mgmt, env->mgmt_addr)) {
		free(a);
		return -EINVAL;
	}
	a->kind = kind;
	a->incarnation = service_incarnation();
	a->r = env->reactors[0];
	rc = rpc_pool_new(a->r, env->rpc_timeout_ms, &a->pool);
	if (rc) {
		free(a);
		return rc;
	}
	reactor_timer_init(&a->timer, on_timer, a);
	rc = reactor_post(a->r, start_on_owner, a);
	if (rc) {
		reactor_call(a->r, stop_on_owner, a);
		free(a);
		return rc;
	}
	*out = a;
	return 0;
}

void announce_stop(struct announcer *a)
{
	if (!a)
		return;
	reactor_call(a->r, stop_on_owner, a);
	free(a);
}
