/*
 * This node and mgmt: the node's view of the cluster map, registration and
 * heartbeats with their lease, the checks a request's ref must pass
 * against the map, and reports of damaged chunks. mgmt is spoken to from
 * reactor 0 alone; the map is read from any thread through a counted
 * snapshot (map_get/map_put), and a new one is installed whole.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/log.h"
#include "net/auth.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "storage_int.h"
#include "common/errors_int.h"
#include "strata/errors.h"

/* ---- the node's cluster map ---- */

struct map_snap *map_get(struct storage *st)
{
	struct map_snap *s;

	pthread_mutex_lock(&st->map_lock);
	s = st->snap;
	if (s)
		s->refs++;
	pthread_mutex_unlock(&st->map_lock);
	return s;
}

void map_put(struct storage *st, struct map_snap *s)
{
	int last;

	if (!s)
		return;
	pthread_mutex_lock(&st->map_lock);
	last = --s->refs == 0;
	pthread_mutex_unlock(&st->map_lock);
	if (last) {
		cm_release(&s->map);
		free(s);
	}
}

static void map_install(struct storage *st, struct map_snap *s)
{
	struct map_snap *old;

	s->refs = 1;
	pthread_mutex_lock(&st->map_lock);
	old = st->snap;
	st->snap = s;
	pthread_mutex_unlock(&st->map_lock);
	map_put(st, old);
}

uint64_t map_version(struct storage *st)
{
	struct map_snap *s = map_get(st);
	uint64_t v = s ? s->map.version : 0;

	map_put(st, s);
	return v;
}

static void fetch_map(struct storage *st);

static void on_map(void *arg, int status, struct rpc_msg *resp)
{
	struct storage *st = arg;
	struct map_snap *s;
	bool changed = false;
	int rc;

	st->fetching = false;
	if (status) {
		log_warn("storage", "cannot fetch the cluster map from mgmt '%s': %s", st->map_called,
			 strata_strerror(status));
		mgmt_addrs_failed(&st->mgmt, st->map_called, status, resp);
		return;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return;
	cm_init(&s->map);
	rc = cmap_decode_since(resp->body, resp->hdr.body_len, &s->map, &changed);
	if (rc || !changed) {
		if (rc)
			log_warn("storage", "bad cluster map from mgmt: %s", strata_strerror(rc));
		cm_release(&s->map);
		free(s);
		return;
	}
	log_info("storage", "cluster map version %llu: %u chains",
		 (unsigned long long)s->map.version, s->map.nchains);
	/* Revocations take effect with the map that carries them: the next
	 * request of a revoked token's open connection is refused. */
	if (net_revoked_update(s->map.version, (const char (*)[TOKEN_ID_LEN + 1])s->map.revoked,
			       s->map.nrevoked))
		log_error("storage", "cannot apply the revoked tokens of map version %llu",
			  (unsigned long long)s->map.version);
	map_install(st, s);
}

/* On reactor 0. */
static void fetch_map(struct storage *st)
{
	struct mg_since rq = { map_version(st) };
	struct proto_call c = { .cb = on_map, .arg = st,
				.timeout_ms = mgmt_addrs_timeout(&st->mgmt, st->timeout_ms) };

	if (st->fetching)
		return;
	st->map_called = mgmt_addrs_cur(&st->mgmt);
	st->fetching = mg_get_map_call(st->pools[0], st->map_called, &rq, &c) == 0;
}

static void fetch_map_task(void *arg)
{
	fetch_map(arg);
}

/* Any thread: a request told us our map is older than the sender's. */
static void map_hint(struct storage *st)
{
	reactor_post(st->env.reactors[0], fetch_map_task, st);
}

/* ---- registration and heartbeats (reactor 0) ----
 *
 * Every reply of mgmt to a registration or a heartbeat renews this node's
 * lease: mgmt takes the node out of its chains only once it has heard
 * nothing for a lease, counted from when the heartbeat arrived; the node
 * counts from when it sent it, minus a margin, so it stops serving clients
 * before mgmt can reconfigure without it. A node cut off from mgmt but not
 * from clients holding the old map therefore never answers them with data
 * a new chain has moved past.
 */

struct hb_call {
	struct storage *st;
	uint64_t sent_ms;
	const char *called;	/* the mgmt it went to (st->mgmt's) */
};

bool storage_lease_valid(struct storage *st)
{
	return reactor_now_ms() < __atomic_load_n(&st->lease_until_ms, __ATOMIC_ACQUIRE);
}

/* A reply of mgmt renews the lease; returns the map version it names. */
static uint64_t renew_lease(struct hb_call *hc, struct rpc_msg *resp)
{
	struct storage *st = hc->st;
	struct mg_lease l;
	uint64_t margin, until;

	if (mg_register_rep(resp, &l) || !l.lease_ms)
		return 0;
	margin = l.lease_ms / 10 > 50 ? l.lease_ms / 10 : 50;
	until = hc->sent_ms + (l.lease_ms > margin ? l.lease_ms - margin : 0);
	if (until > __atomic_load_n(&st->lease_until_ms, __ATOMIC_RELAXED))
		__atomic_store_n(&st->lease_until_ms, until, __ATOMIC_RELEASE);
	return l.map_version;
}

static struct hb_call *hb_call_new(struct storage *st)
{
	struct hb_call *hc = malloc(sizeof(*hc));

	if (hc) {
		hc->st = st;
		hc->sent_ms = reactor_now_ms();
		hc->called = mgmt_addrs_cur(&st->mgmt);
	}
	return hc;
}

/* The targets and their space, as a registration or heartbeat tells. */
static void fill_targets(struct storage *st, struct mg_target_info *ti)
{
	for (int i = 0; i < st->ntargets; i++) {
		ti[i].id = st->targets[i].id;
		ti[i].capacity = 0;
		ti[i].used = 0;
		ti[i].fs = st->targets[i].fs;
		ti[i].avail = 0;
		chunk_space(st->targets[i].cs, &ti[i].capacity, &ti[i].used);
		chunk_space_avail(st->targets[i].cs, &ti[i].avail);
	}
}

/* A refusal that mgmt's record decides, not us: retried like any, and
 * said once a minute. Whether status was one. */
static bool said_refusal(const struct storage *st, int status, const char *mgmt)
{
	static uint64_t said_ms;
	uint64_t now = reactor_now_ms(), was = __atomic_load_n(&said_ms, __ATOMIC_RELAXED);
	const char *why;

	if (status == -EPERM)
		why = "it was removed from the cluster ('strata node remove'); to add this host "
		      "again, give it a new node.id and an empty data directory";
	else if (status == -EADDRINUSE)
		why = "a daemon with another data directory is registered under this id and "
		      "alive; give each daemon its own node.id (retrying: this one is admitted "
		      "only once the other's lease has expired)";
	else
		return false;
	if (!was || now - was >= 60000) {
		__atomic_store_n(&said_ms, now ? now : 1, __ATOMIC_RELAXED);
		log_error("storage", "mgmt '%s' refuses node %u: %s", mgmt, st->node_id, why);
	}
	return true;
}

static void on_register(void *arg, int status, struct rpc_msg *resp)
{
	struct hb_call *hc = arg;
	struct storage *st = hc->st;
	uint64_t v;

	if (said_refusal(st, status, hc->called)) {
		free(hc);
		return;
	}
	if (status) {
		/* A follower names the leader: the next try goes there. */
		if (mgmt_addrs_failed(&st->mgmt, hc->called, status, resp))
			log_info("storage", "mgmt '%s' cannot register us (%s): trying '%s'",
				 hc->called, strata_strerror(status), mgmt_addrs_cur(&st->mgmt));
		else
			log_warn("storage", "registration with mgmt '%s' failed: %s (will retry)",
				 hc->called, strata_strerror(status));
		free(hc);
		return;
	}
	/* Maps from this version on show what mgmt made of this process's
	 * registration (a restart taken out, brought back): recover.c decides
	 * on no older one. */
	v = renew_lease(hc, resp);
	if (v)
		__atomic_store_n(&st->reg_version, v, __ATOMIC_RELEASE);
	if (!st->registered)
		log_info("storage", "registered with mgmt '%s' as node %u", hc->called,
			 st->node_id);
	free(hc);
	st->registered = true;
	fetch_map(st);
}

static void send_register(struct storage *st)
{
	struct mg_target_info ti[MGMT_MAX_TARGETS_PER_NODE];
	struct mg_register rq = { st->node_id, pstr_c(st->env.addr), ti, (uint32_t)st->ntargets,
				  st->incarnation, st->ident };
	struct hb_call *hc = hb_call_new(st);
	struct proto_call c = { .cb = on_register, .arg = hc,
				.timeout_ms = mgmt_addrs_timeout(&st->mgmt, st->timeout_ms) };

	fill_targets(st, ti);
	if (hc && mg_register_call(st->pools[0], hc->called, &rq, &c))
		free(hc);
}

static void on_heartbeat(void *arg, int status, struct rpc_msg *resp)
{
	struct hb_call *hc = arg;
	struct storage *st = hc->st;
	uint64_t v;

	if (status == -ENOTCONN || status == -ENOENT) {
		/* mgmt took us offline or forgot us: register again. */
		log_warn("storage", "mgmt says node %u is not registered (%s): registering again",
			 st->node_id, strata_strerror(status));
		free(hc);
		st->registered = false;
		send_register(st);
		return;
	}
	if (status && mgmt_addrs_failed(&st->mgmt, hc->called, status, resp)) {
		/* Another mgmt leads now (or this one died): it knows us from the
		 * database, but registering again is what a new leader expects
		 * of a node it has not heard (and costs nothing if it has). */
		log_info("storage", "mgmt '%s' does not answer heartbeats (%s): trying '%s'",
			 hc->called, strata_strerror(status), mgmt_addrs_cur(&st->mgmt));
		free(hc);
		st->registered = false;
		send_register(st);
		return;
	}
	v = status ? 0 : renew_lease(hc, resp);
	free(hc);
	if (v > map_version(st))
		fetch_map(st);
}

static void on_hb_timer(void *arg)
{
	struct storage *st = arg;

	if (!st->registered) {
		send_register(st);
	} else {
		struct mg_target_info ti[MGMT_MAX_TARGETS_PER_NODE];
		struct mg_heartbeat rq = { st->node_id, ti, (uint32_t)st->ntargets, st->ident };
		struct hb_call *hc = hb_call_new(st);
		struct proto_call c = { .cb = on_heartbeat, .arg = hc,
					.timeout_ms = mgmt_addrs_timeout(&st->mgmt, st->timeout_ms) };

		fill_targets(st, ti);
		if (hc && mg_heartbeat_call(st->pools[0], hc->called, &rq, &c))
			free(hc);
	}
	reactor_timer_arm(st->env.reactors[0], &st->hb, st->hb_ms);
}

void hb_init(struct storage *st)
{
	reactor_timer_init(&st->hb, on_hb_timer, st);
}

void hb_start(void *arg)
{
	struct storage *st = arg;

	send_register(st);
	reactor_timer_arm(st->env.reactors[0], &st->hb, st->hb_ms);
}

/* ---- routing checks ---- */

/* Position of target in chain, or -1. */
int chain_pos(const struct cm_chain *c, uint32_t target)
{
	for (int i = 0; i < c->len; i++) {
		if (c->targets[i] == target)
			return i;
	}
	return -1;
}

static int check_ref_in(struct storage *st, struct map_snap *snap, const struct sp_ref *ref,
			const struct cm_chain **chain, int *pos, bool out_ok)
{
	const struct cm_chain *c = snap ? cm_find_chain(&snap->map, ref->chain_id) : NULL;
	bool out = false;

	if (!c || c->version != ref->chain_ver) {
		CNT(st, n_stale, 1);
		if (!c || c->version < ref->chain_ver)
			map_hint(st);
		return STRATA_ESTALE_MAP;
	}
	*pos = chain_pos(c, ref->target_id);
	for (int i = 0; out_ok && *pos < 0 && !out && i < c->nout; i++)
		out = c->out[i] == ref->target_id;
	if (*pos < 0 && !out) {
		CNT(st, n_stale, 1);
		return STRATA_ESTALE_MAP;
	}
	*chain = c;
	return 0;
}

int check_ref(struct storage *st, struct map_snap *snap, const struct sp_ref *ref,
	      const struct cm_chain **chain, int *pos)
{
	return check_ref_in(st, snap, ref, chain, pos, false);
}

int check_ref_or_out(struct storage *st, struct map_snap *snap, const struct sp_ref *ref,
		     const struct cm_chain **chain, int *pos)
{
	return check_ref_in(st, snap, ref, chain, pos, true);
}

/* ---- integrity reports ---- */

static void on_report_done(void *arg, int status, struct rpc_msg *resp)
{
	(void)resp;
	(void)status;
	free(arg);
}

struct report_ctx {
	struct storage *st;
	struct mg_report rq;
};

static void report_on_r0(void *arg)
{
	struct report_ctx *c = arg;
	struct proto_call call = { .cb = on_report_done, .arg = c, .timeout_ms = c->st->timeout_ms };

	if (mg_report_call(c->st->pools[0], mgmt_addrs_cur(&c->st->mgmt), &c->rq, &call))
		free(c);
}

void report_to_mgmt(struct storage *st, uint32_t target, const struct chunk_id *id, int err)
{
	struct report_ctx *c = malloc(sizeof(*c));

	/* A loss (or its end) is logged by resync.c, once. */
	if (err && err != STRATA_ELOST)
		log_warn_limited("storage", "target %u: chunk %llx:%llx: %s", target,
				 (unsigned long long)id->ino, (unsigned long long)id->idx,
				 strata_strerror(err));
	if (!c)
		return;
	c->st = st;
	c->rq = (struct mg_report){ target, id->ino, id->idx, err };
	if (reactor_post(st->env.reactors[0], report_on_r0, c))
		free(c);
}
