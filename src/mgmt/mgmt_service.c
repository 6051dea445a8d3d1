/*
 * The mgmt service: membership with heartbeat leases, the versioned cluster
 * map (kept in mgmt_store.h: SQLite, or PostgreSQL shared by several
 * control daemons), chain building, failure detection. All state is owned
 * by reactor 0's thread.
 *
 * With a shared store, every control daemon runs mgmt and one leads: the
 * holder of the leader lease (mgmt_store_lease), renewed every third of
 * mgmt.leader_lease. Only the leader answers; the others answer
 * STRATA_ENOTLEADER naming it (the reply's body), and each tries to take
 * the lease as it renews. A daemon that takes it loads the state from the
 * database, fences its writes by its term and gives every node a fresh
 * lease, as mgmt does after a restart. A leader that could not renew
 * stops answering before the database's lease runs out (a margin of a
 * tenth), and one whose write is refused by the fence steps down at once.
 *
 * Followers serve reads of the map (GET_MAP, and the token registry's
 * TOKEN_LIST) from the store: the leader writes every new map version
 * there before it answers the call that made it, and a follower reads
 * the stored map again once its copy is older than mgmt.heartbeat
 * (follow()). So a follower's map is never older than the leader's last
 * write by more than mgmt.heartbeat; the targets' usage figures, which
 * change without a new version, the leader writes at most every third of
 * mgmt.leader_lease. A follower that cannot read the store answers
 * STRATA_ENOTLEADER, as it does every write and heartbeat.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "common/log.h"
#include "mgmt_service.h"
#include "membership.h"
#include "mgmt/lost.h"
#include "mgmt/rebalance.h"
#include "mgmt_store.h"
#include "proto/mgmt.h"
#include "proto/server.h"
#include "common/errors_int.h"
#include "common/token.h"
#include "net/addr.h"
#include "net/auth.h"
#include "net/server.h"

PROTO_SERVER(mgmt, MGMT_OPS)

/* How often heartbeats refresh the capacity and usage of STATUS and
 * /metrics (a change of the map refreshes them at once). */
#define SPACE_SNAPSHOT_MS 250

/* [mgmt] keys of the service (mgmt.address and mgmt.heartbeat are the
 * node's: every node needs them). */
struct mgmt_cfg {
	int64_t lease_ms;
	int64_t replication;
	int64_t expect_nodes;
	int64_t full_pct;
	uint64_t full_free;
	char store[CFG_STR_MAX];		/* "": SQLite; postgresql://... */
	char store_passfile[CFG_STR_MAX];	/* PostgreSQL's password file */
	int64_t leader_lease_ms;
	int64_t rebalance_band;		/* mgmt.rebalance_band (percent) */
	int64_t rebalance_max_moves;	/* mgmt.rebalance_max_moves */
	bool rebalance_paused;		/* mgmt.rebalance_paused */
};

struct mgmt {
	struct reactor *r;
	uint32_t node_id;		/* the node mgmt runs on: never removed */
	struct cluster_map map;
	struct mgmt_store *store;
	uint64_t lease_ms;
	uint32_t replication;
	uint32_t expect_nodes;
	uint32_t full_pct;			/* mgmt.full_pct */
	uint64_t full_free;			/* mgmt.full_free */
	struct reactor_timer expiry;
	const struct cluster_key *key;	/* env->key: signs the registry's tokens */
	/* For status/metrics from other threads. */
	volatile uint64_t version_snapshot;
	volatile uint32_t nodes_up, nodes_total, chains, chains_short, storage_nodes;
	volatile uint32_t chains_resyncing;	/* with a member SYNCING */
	volatile uint32_t targets_full;		/* held full (mgmt.full_pct) */
	volatile uint64_t capacity, used;	/* cm_capacity() */
	uint64_t space_ms;			/* when they were computed */
	bool space_stale;			/* a heartbeat changed them since */
	uint64_t reports;
	uint64_t removed_said_ms;		/* last refusal of a removed node logged */
	struct lost_set lost;			/* chunks reported lost (lost.h) */
	struct log_limit lost_ll;
	struct log_limit ident_ll;		/* refusals of a second directory */
	volatile uint32_t lost_n;		/* its count, for status/metrics */
	/* The leader lease (shared store only; otherwise always the leader). */
	bool shared;
	bool leader;
	uint64_t term;				/* the lease's term we lead in */
	uint64_t lead_until_ms;			/* reactor clock; UINT64_MAX: not shared */
	uint32_t leader_lease_ms;
	const char *addr;			/* env->addr: where we serve */
	char holder[64];			/* "node N-incarnation" */
	char leader_addr[CM_ADDR_LEN];		/* the holder now, for redirects */
	struct reactor_timer lease_timer;
	volatile uint64_t term_snapshot;	/* for status/metrics */
	volatile uint32_t leader_snapshot;
	volatile uint64_t takeovers;
	/* A follower's reads (follow()): its map is the store's, read at
	 * followed_ms (0: not read since it led or started), served for
	 * follow_ms (mgmt.heartbeat); a failed read is not tried again for
	 * as long (follow_failed_ms). */
	uint32_t follow_ms;
	uint64_t followed_ms;
	uint64_t follow_failed_ms;
	volatile uint64_t follower_reads;	/* calls a follower answered */
	bool space_dirty;		/* usage changed since the last save */
	/* The rebalancer (rebalance.h): stepped by rebalance_timer while we
	 * lead; its stats copied for status and /metrics. */
	struct rebalancer rb;
	struct reactor_timer rebalance_timer;
	volatile uint32_t rb_paused, rb_balanced, rb_in_flight, rb_pending;
	volatile uint32_t rb_fill_min, rb_fill_max, rb_fill_mean_x100;
	volatile uint64_t rb_done, rb_cancelled, rb_bytes;
};

/*
 * Records node's incarnation in the store; returns true when the process
 * restarted: it registered before with another one, or (a node of the map
 * whose incarnation was never recorded) it may have. The incarnation is
 * stored, so a restart while mgmt itself was down is seen too. -EIO: the
 * store cannot tell, and the registration is refused (retried).
 */
static int incarnation_changed(struct mgmt *m, uint32_t node, uint64_t inc, bool *changed)
{
	uint64_t was = 0;
	int rc = mgmt_store_get_incarnation(m->store, node, &was);

	*changed = false;
	if (rc && rc != -ENOENT)
		return rc;
	if (rc == -ENOENT)
		*changed = cm_find_node(&m->map, node) != NULL;
	else
		*changed = was != inc;
	return was == inc ? 0 : mgmt_store_set_incarnation(m->store, node, inc);
}

static uint32_t nodes_with_targets(const struct cluster_map *map);

/* The space figures of status and /metrics. */
static void snapshot_space(struct mgmt *m)
{
	uint64_t cap, used;

	m->space_ms = reactor_now_ms();
	m->space_stale = false;
	if (cm_capacity(&m->map, &cap, &used) == 0) {
		m->capacity = cap;
		m->used = used;
	}
}

/* The rebalancer's figures of status and /metrics. */
static void snapshot_rebalance(struct mgmt *m)
{
	struct rebalance_stats st;

	rebalance_stats(&m->rb, &st);
	m->rb_paused = st.paused;
	m->rb_balanced = st.balanced;
	m->rb_in_flight = st.in_flight;
	m->rb_pending = st.pending;
	m->rb_fill_min = st.fill_min;
	m->rb_fill_max = st.fill_max;
	m->rb_fill_mean_x100 = st.fill_mean_x100;
	m->rb_done = st.moves_done;
	m->rb_cancelled = st.moves_cancelled;
	m->rb_bytes = st.bytes_moved;
}

static void snapshot(struct mgmt *m)
{
	uint32_t up = 0, short_chains = 0, resyncing = 0, full = 0;

	for (uint32_t i = 0; i < m->map.nnodes; i++)
		up += m->map.nodes[i].state == NODE_UP;
	for (uint32_t i = 0; i < m->map.ntargets; i++)
		full += m->map.targets[i].full != 0;
	m->targets_full = full;
	for (uint32_t i = 0; i < m->map.nchains; i++) {
		uint32_t serving = 0, syncing = 0;

		for (uint32_t k = 0; k < m->map.chains[i].len; k++) {
			serving += m->map.chains[i].states[k] == TARGET_SERVING;
			syncing += m->map.chains[i].states[k] == TARGET_SYNCING;
		}
		short_chains += serving < m->map.replication;
		resyncing += syncing > 0;
	}
	m->chains_resyncing = resyncing;
	m->version_snapshot = m->map.version;
	m->nodes_up = up;
	m->nodes_total = m->map.nnodes;
	m->chains = m->map.nchains;
	m->storage_nodes = nodes_with_targets(&m->map);
	m->chains_short = short_chains;
	snapshot_space(m);
	snapshot_rebalance(m);
}

static void step_down(struct mgmt *m, const char *why);

/* What mgmt_service_leader tells: process-wide, one mgmt per process. */
static pthread_mutex_t pub_mu = PTHREAD_MUTEX_INITIALIZER;
static int pub_leads = -ENOENT;
static uint64_t pub_until_ms;		/* a leader's lead_until_ms */
static char pub_leader[CM_ADDR_LEN];
static uint64_t pub_term;		/* the term it leads in */

/* Publishes m's leadership (m NULL: no mgmt runs). Reactor 0's thread. */
static void publish(const struct mgmt *m, bool leads)
{
	pthread_mutex_lock(&pub_mu);
	pub_leads = m ? leads : -ENOENT;
	pub_until_ms = m && leads ? m->lead_until_ms : 0;
	pub_term = m && leads ? m->term : 0;
	snprintf(pub_leader, sizeof(pub_leader), "%s", m ? m->leader_addr : "");
	pthread_mutex_unlock(&pub_mu);
}

int mgmt_service_leader(char *leader, size_t len, uint64_t *term)
{
	int rc;

	pthread_mutex_lock(&pub_mu);
	rc = pub_leads;
	if (term)
		*term = rc == 1 ? pub_term : 0;
	snprintf(leader, len, "%s", rc == 0 ? pub_leader : "");
	/* A leader that could not renew in time stops at once, as mgmt
	 * itself does (is_leader); who leads instead is not known yet. */
	if (rc == 1 && mono_ms() >= pub_until_ms)
		rc = 0;
	pthread_mutex_unlock(&pub_mu);
	return rc;
}

/* Saves the map; -ESTALE: a newer leader fenced us off, and we stepped
 * down (the caller answers STRATA_ENOTLEADER). */
static int persist(struct mgmt *m)
{
	int rc = mgmt_store_save(m->store, &m->map);

	if (rc == -ESTALE)
		step_down(m, "a newer leader took over (its term fenced our write)");
	else if (rc)
		log_error("mgmt", "cannot persist the cluster map (version %llu): %s",
			  (unsigned long long)m->map.version, strata_strerror(rc));
	snapshot(m);
	return rc;
}

/* ---- leadership ---- */

static bool is_leader(const struct mgmt *m)
{
	return m->leader && reactor_now_ms() < m->lead_until_ms;
}

/* Answers req STRATA_ENOTLEADER, its body the leader's address (empty when
 * none is known). */
static void redirect(struct mgmt *m, struct svc_req *req)
{
	size_t n = m->leader && m->leader_addr[0] && !strcmp(m->leader_addr, m->addr) ? 0 :
		   strlen(m->leader_addr);

	req->reply.len = 0;
	if (n && bbuf_append(&req->reply, m->leader_addr, n))
		req->reply.len = 0;
	svc_reply(req, STRATA_ENOTLEADER);
}

/* At the top of every handler: true when this mgmt leads; otherwise req
 * is answered (redirect) and must not be touched. */
static bool lead(struct mgmt *m, struct svc_req *req)
{
	if (is_leader(m))
		return true;
	redirect(m, req);
	return false;
}

static void apply_revoked(struct mgmt *m);

/*
 * A follower's map: m->map becomes the store's, read again when the copy
 * is older than follow_ms. True when m->map may be served; false when
 * this mgmt leads or led (a leader whose lease lapsed serves nothing
 * until it knows), or the store cannot be read (logged, and not tried
 * again for follow_ms: the caller redirects).
 */
static bool follow(struct mgmt *m)
{
	uint64_t now = reactor_now_ms();
	struct cluster_map map;
	int rc;

	if (!m->shared || m->leader)
		return false;
	if (m->followed_ms && now - m->followed_ms < m->follow_ms)
		return true;
	if (m->follow_failed_ms && now - m->follow_failed_ms < m->follow_ms)
		return false;
	rc = mgmt_store_load(m->store, &map);
	if (!rc && (rc = mgmt_store_revoked(m->store, (int64_t)time(NULL), &map)))
		cm_release(&map);
	if (rc) {
		log_warn_limited("mgmt", "a follower cannot read the cluster map from the store: %s;"
				 " callers are sent to the leader", strata_strerror(rc));
		m->follow_failed_ms = now ? now : 1;
		m->followed_ms = 0;
		return false;
	}
	cm_release(&m->map);
	m->map = map;
	m->followed_ms = now ? now : 1;
	m->follow_failed_ms = 0;
	apply_revoked(m);
	snapshot(m);
	return true;
}

/* At the top of a read-only handler: true when this mgmt leads, or
 * follows with the store's map at hand (follow()); otherwise req is
 * answered (redirect) and must not be touched. */
static bool lead_or_follow(struct mgmt *m, struct svc_req *req)
{
	if (is_leader(m))
		return true;
	if (follow(m)) {
		m->follower_reads++;
		return true;
	}
	redirect(m, req);
	return false;
}

/* An error of the store for req: -ESTALE (deposed) becomes a redirect. */
static void reply_store_err(struct mgmt *m, struct svc_req *req, int rc)
{
	if (rc == -ESTALE) {
		step_down(m, "a newer leader took over (its term fenced our write)");
		redirect(m, req);
		return;
	}
	svc_reply(req, rc);
}

static void step_down(struct mgmt *m, const char *why)
{
	if (!m->leader)
		return;
	m->leader = false;
	rebalance_forget(&m->rb);
	m->leader_snapshot = 0;
	m->followed_ms = 0;	/* its map is no longer the store's */
	if (!strcmp(m->leader_addr, m->addr))
		m->leader_addr[0] = '\0';
	publish(m, false);
	log_warn("mgmt", "no longer the leader (term %llu): %s", (unsigned long long)m->term, why);
}

static uint32_t nodes_with_targets(const struct cluster_map *map)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < map->nnodes; i++) {
		for (uint32_t t = 0; t < map->ntargets; t++) {
			if (map->targets[t].node_id == map->nodes[i].id) {
				n++;
				break;
			}
		}
	}
	return n;
}

static void maybe_build_chains(struct mgmt *m)
{
	int rc;

	if (m->map.nchains > 0 || nodes_with_targets(&m->map) < m->expect_nodes)
		return;
	rc = cm_build_chains(&m->map, m->replication, false);
	if (rc < 0) {
		log_error("mgmt", "cannot build chains (R=%u): %s", m->replication, strata_strerror(rc));
		return;
	}
	log_info("mgmt", "built %u chains of %u replicas over %u nodes (map version %llu)",
		 m->map.nchains, m->map.replication, m->map.nnodes,
		 (unsigned long long)m->map.version);
}

static void reply_lease(struct mgmt *m, struct svc_req *req)
{
	struct mg_lease rep = { m->map.version, (uint32_t)m->lease_ms };

	mg_register_reply(req, 0, &rep);
}

/* The targets of a REGISTER or HEARTBEAT (at most
 * MGMT_MAX_TARGETS_PER_NODE, the decoder's bound) into tis. */
static void target_infos(const struct mg_target_info *w, uint32_t n, struct cm_target_info *tis)
{
	for (uint32_t i = 0; i < n; i++)
		tis[i] = (struct cm_target_info){ w[i].id, w[i].capacity, w[i].used, w[i].fs,
						  w[i].avail };
}

/* A node that registers a loopback address from another host (a wildcard
 * listen advertised as 127.0.0.1, a copied config) is unreachable for
 * every other host: said, rate-limited, since the node retries. */
static void check_registered_addr(struct svc_req *req, uint32_t node_id, const char *addr)
{
	const char *peer = svc_req_peer(req);
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (!addr_is_loopback(addr) || !peer || addr_parse_numeric(peer, &ss, &sl) ||
	    addr_is_loopback(peer))
		return;
	log_warn_limited("mgmt", "node %u registers the loopback address '%s' from '%s': other "
			 "hosts cannot reach it there; set its node.advertise to an address they "
			 "reach", node_id, addr, peer);
}

/* Was node retired by 'strata node remove'? 0 (no), -EPERM (yes: said on
 * mgmt's log at most once a minute, since the node retries every
 * heartbeat) or -EIO (the store cannot tell: refused too, and retried). */
static int removed_node(struct mgmt *m, uint32_t node)
{
	int64_t when = 0;
	int rc = mgmt_store_get_removed(m->store, node, &when);
	uint64_t now = reactor_now_ms();

	if (rc)
		return rc == -ENOENT ? 0 : rc;
	if (m->removed_said_ms && now - m->removed_said_ms < 60000)
		return -EPERM;
	m->removed_said_ms = now ? now : 1;
	log_warn("mgmt", "registration of node %u refused: it was removed from the cluster "
			 "('strata node remove') at %lld; to add the host again, give it a new "
			 "node.id and an empty data directory", node, (long long)when);
	return -EPERM;
}

/* MGMT_ADMIN_REMOVE: the map forgets the node (membership.h), and the
 * store keeps it out. */
static int admin_remove(struct mgmt *m, uint32_t node, uint32_t *result)
{
	int rc, err;

	*result = 0;
	if (node == m->node_id)
		return -EPERM;
	rc = cm_remove_node(&m->map, node, result);
	if (rc < 0)
		return rc;
	if ((err = mgmt_store_set_removed(m->store, node, (int64_t)time(NULL)))) {
		if (err == -ESTALE)
			return err;	/* deposed: the new leader never saw the removal */
		log_error("mgmt", "node %u left the cluster map, but its removal is not recorded: it "
			  "would be admitted again if it registered", node);
		persist(m);
		return -EIO;
	}
	return rc;
}

static void op_register(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_register rq;
	struct cm_target_info tis[MGMT_MAX_TARGETS_PER_NODE];
	char addr[CM_ADDR_LEN];
	bool restarted;
	int rc;

	if (!lead(m, req))
		return;
	if (mg_register_req(req, &rq))
		return;
	rc = rq.node_id && rq.incarnation && rq.ident ? pstr_copy(rq.addr, addr, sizeof(addr))
						      : STRATA_EBADMSG;
	target_infos(rq.targets, rq.targets_n, tis);
	if (rc) {
		mg_register_release(&rq);
		svc_reply(req, STRATA_EBADMSG);
		return;
	}
	/* A removed node stays out: its data was rebuilt elsewhere, and
	 * admitting it again would take an operator's decision back. */
	if ((rc = removed_node(m, rq.node_id))) {
		mg_register_release(&rq);
		reply_store_err(m, req, rc);
		return;
	}
	/* Another data directory claiming a live node's id: a second daemon
	 * configured with the same node.id. Admitting it would hand the
	 * node's chains to a directory that does not hold them. */
	if ((rc = cm_check_ident(&m->map, rq.node_id, rq.ident, reactor_now_ms()))) {
		log_limited(&m->ident_ll, LOG_WARN, "mgmt", "registration of node %u from '%s' "
			    "refused: node %u is alive at '%s' with another data directory "
			    "(two daemons configured with one node.id?)", rq.node_id, addr,
			    rq.node_id, cm_find_node(&m->map, rq.node_id)->addr);
		mg_register_release(&rq);
		svc_reply(req, rc);
		return;
	}
	/* A process that restarted within its lease lost what it held in
	 * memory (updates it was forwarding, the marks of copies it lacks):
	 * it resyncs like a node that was away. */
	rc = incarnation_changed(m, rq.node_id, rq.incarnation, &restarted);
	if (rc) {
		mg_register_release(&rq);
		reply_store_err(m, req, rc);
		return;
	}
	if (restarted) {
		const struct cm_node *nd = cm_find_node(&m->map, rq.node_id);

		if (nd && nd->state != NODE_OFFLINE) {
			int changed = cm_set_node_offline(&m->map, rq.node_id);

			log_warn("mgmt", "node %u restarted within its lease: %d chain(s) reconfigured; its targets resync before serving",
				 rq.node_id, changed);
		}
	}
	rc = cm_register_node(&m->map, rq.node_id, addr, tis, rq.targets_n,
			      reactor_now_ms() + m->lease_ms);
	if (rc < 0) {
		log_warn("mgmt", "registration of node %u ('%s') refused: %s", rq.node_id, addr,
			 strata_strerror(rc));
		mg_register_release(&rq);
		svc_reply(req, rc);
		return;
	}
	(void)cm_set_ident(&m->map, rq.node_id, rq.ident);
	log_info("mgmt", "node %u registered at '%s' with %u target(s)", rq.node_id, addr,
		 rq.targets_n);
	check_registered_addr(req, rq.node_id, addr);
	mg_register_release(&rq);
	maybe_build_chains(m);
	if (persist(m) == -ESTALE) {
		redirect(m, req);
		return;
	}
	reply_lease(m, req);
}

static void op_heartbeat(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct cm_target_info tis[MGMT_MAX_TARGETS_PER_NODE];
	struct mg_heartbeat rq;
	const struct cm_node *nd;
	int rc;

	if (!lead(m, req))
		return;
	if (mg_heartbeat_req(req, &rq))
		return;
	/* A heartbeat from another directory than the one that registered
	 * (or, after mgmt's restart, the first one seen) renews nothing. */
	nd = cm_find_node(&m->map, rq.node_id);
	if (nd && nd->ident && nd->ident != rq.ident)
		rc = -ENOTCONN;
	else
		rc = cm_heartbeat(&m->map, rq.node_id, reactor_now_ms() + m->lease_ms);
	if (!rc && nd && !nd->ident && rq.ident)
		(void)cm_set_ident(&m->map, rq.node_id, rq.ident);
	/* Usage is as fresh as the last heartbeat: kept in the map (no new
	 * version), seen by whoever fetches the whole map (strata status),
	 * STATUS and /metrics. */
	if (!rc) {
		uint64_t v = m->map.version;

		target_infos(rq.targets, rq.targets_n, tis);
		/* cm_capacity sorts every target: at most a few times a
		 * second, however many nodes heartbeat; a change waits for
		 * the next heartbeat past that. */
		if (cm_update_space(&m->map, rq.node_id, tis, rq.targets_n,
				    &(struct cm_full_mark){ m->full_pct, m->full_free }))
			m->space_stale = true;
		if (m->space_stale && reactor_now_ms() - m->space_ms >= SPACE_SNAPSHOT_MS)
			snapshot_space(m);
		if (m->map.version != v)
			persist(m);
		else
			m->space_dirty = true;	/* saved by the lease timer */
	}
	mg_heartbeat_release(&rq);
	if (rc) {
		svc_reply(req, rc);
		return;
	}
	reply_lease(m, req);
}

static void op_announce(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_announce rq;
	char addr[CM_ADDR_LEN];
	int rc;

	if (!lead(m, req))
		return;
	if (mg_announce_req(req, &rq))
		return;
	rc = pstr_copy(rq.addr, addr, sizeof(addr)) ? STRATA_EBADMSG :
	     cm_announce_service(&m->map, rq.kind, rq.node_id, addr, rq.incarnation,
				 reactor_now_ms() + m->lease_ms);
	if (rc < 0) {
		log_warn("mgmt", "announcement of service kind %u of node %u refused: %s", rq.kind,
			 rq.node_id, strata_strerror(rc));
		svc_reply(req, rc == -EINVAL ? STRATA_EBADMSG : rc);
		return;
	}
	if (rc > 0) {
		log_info("mgmt", "%s service of node %u at '%s' (map version %llu)",
			 cm_service_kind_name(rq.kind), rq.node_id, addr,
			 (unsigned long long)m->map.version);
		/* The version only: services are not stored. */
		if (persist(m) == -ESTALE) {
			redirect(m, req);
			return;
		}
	}
	mg_announce_reply(req, 0, &(struct mg_lease){ m->map.version, (uint32_t)m->lease_ms });
}

static void op_get_map(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_since rq;

	if (!lead_or_follow(m, req))
		return;
	if (mg_get_map_req(req, &rq))
		return;
	svc_reply(req, cmap_encode_since(&m->map, rq.since_version, &req->reply));
}

static void op_report(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_report rq;

	if (!lead(m, req))
		return;
	if (mg_report_req(req, &rq))
		return;
	m->reports++;
	if (rq.error == 0 || rq.error == STRATA_ELOST) {
		/* A storage node repeats these every 30 s while they hold. */
		if (lost_report(&m->lost, rq.ino, rq.idx, rq.error, reactor_now_ms()))
			log_warn_limited("mgmt", "cannot record lost chunk %llx:%llx: out of memory",
					 (unsigned long long)rq.ino, (unsigned long long)rq.idx);
		m->lost_n = lost_count(&m->lost, reactor_now_ms());
		log_limited(&m->lost_ll, LOG_WARN, "mgmt", "target %u reports chunk %llx:%llx %s;"
			    " %u chunk(s) lost now", rq.target_id, (unsigned long long)rq.ino,
			    (unsigned long long)rq.idx, rq.error ? "lost (no intact replica left)"
			    : "no longer lost", m->lost_n);
	} else {
		log_warn_limited("mgmt", "target %u reports chunk %llx:%llx: %s", rq.target_id,
				 (unsigned long long)rq.ino, (unsigned long long)rq.idx,
				 strata_strerror(rq.error));
	}
	svc_reply(req, 0);
}

static void op_admin(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_admin rq;
	struct mg_result rep = { 0 };
	const struct cm_chain *c;
	int rc;

	if (!lead(m, req))
		return;
	if (mg_admin_req(req, &rq))
		return;
	switch (rq.action) {
	case MGMT_ADMIN_DRAIN:
		rc = cm_drain_node(&m->map, rq.arg, &rep.result);
		break;
	case MGMT_ADMIN_SYNCED:
		/* The resync ran against the chain at chain_ver: if the chain
		 * changed since, the target may lack what it missed. */
		c = cm_find_chain(&m->map, rq.arg2);
		if (c && c->version != rq.chain_ver) {
			log_info("mgmt", "target %u reports chain %u in sync at version %llu, now %llu: ignored, it resyncs again",
				 rq.arg, rq.arg2, (unsigned long long)rq.chain_ver,
				 (unsigned long long)c->version);
			rc = STRATA_ESTALE_MAP;
			break;
		}
		rc = cm_member_synced(&m->map, rq.arg2, rq.arg);
		if (rc >= 0)
			log_info("mgmt", "target %u is in sync with chain %u: serving (map version %llu)",
				 rq.arg, rq.arg2, (unsigned long long)m->map.version);
		break;
	case MGMT_ADMIN_REMOVE:
		rc = admin_remove(m, rq.arg, &rep.result);
		break;
	case MGMT_ADMIN_REPLACE:
		rc = cm_replace_target(&m->map, rq.arg, rq.arg2);
		break;
	case MGMT_ADMIN_BUILD_CHAINS:
		rc = cm_build_chains(&m->map, rq.arg ? rq.arg : m->replication, false);
		break;
	default:
		rc = -EINVAL;
		break;
	}
	if (rc >= 0)
		rc = persist(m) == -ESTALE ? -ESTALE : rc;
	if (rc == -ESTALE) {
		reply_store_err(m, req, rc);
		return;
	}
	mg_admin_reply(req, rc < 0 ? rc : 0, &rep);
}

/* MGMT_REBALANCE: pause, resume, and the rebalancer's state. */
static void op_rebalance(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_rebalance rq;
	struct mg_move mv[REBALANCE_MAX_MOVES];
	struct rebalance_stats st;

	if (!lead(m, req))
		return;
	if (mg_rebalance_req(req, &rq))
		return;
	if (rq.action == MGMT_REBALANCE_PAUSE || rq.action == MGMT_REBALANCE_RESUME)
		rebalance_pause(&m->rb, rq.action == MGMT_REBALANCE_PAUSE);
	snapshot_rebalance(m);
	rebalance_stats(&m->rb, &st);
	for (uint32_t i = 0; i < m->rb.nmoves; i++)
		mv[i] = (struct mg_move){ m->rb.moves[i].chain_id, m->rb.moves[i].from,
					  m->rb.moves[i].to };
	mg_rebalance_reply(req, 0, &(struct mg_rebalance_state){
		.paused = st.paused, .balanced = st.balanced, .band_pct = st.band_pct,
		.max_moves = st.max_moves, .nodes = st.nodes, .fill_min = st.fill_min,
		.fill_max = st.fill_max, .fill_mean_x100 = st.fill_mean_x100,
		.pending = st.pending, .moves_done = st.moves_done,
		.moves_cancelled = st.moves_cancelled, .bytes_moved = st.bytes_moved,
		.moves = mv, .moves_n = m->rb.nmoves });
}

/* Steps the rebalancer while we lead (rebalance.h). */
static void on_rebalance(void *arg)
{
	struct mgmt *m = arg;

	if (is_leader(m) && m->map.nchains) {
		int rc = rebalance_step(&m->rb, &m->map);

		if (rc > 0)
			persist(m);
		else if (rc < 0)
			log_warn_limited("mgmt", "rebalance: %s", strata_strerror(rc));
		snapshot_rebalance(m);
	}
	reactor_timer_arm(m->r, &m->rebalance_timer, REBALANCE_TICK_MS);
}

/* ---- the token registry ---- */

/* This process enforces the revocations of its own map, like every
 * holder of a map. */
static void apply_revoked(struct mgmt *m)
{
	if (net_revoked_update(m->map.version, (const char (*)[TOKEN_ID_LEN + 1])m->map.revoked,
			       m->map.nrevoked))
		log_error("mgmt", "cannot apply the revoked tokens of map version %llu: out of memory",
			  (unsigned long long)m->map.version);
}

/* Rebuilds the map's revoked list from the registry (which also drops the
 * tokens that expired since); a new list is a new map version, so every
 * holder refetches it. */
static int refresh_revoked(struct mgmt *m)
{
	struct cluster_map tmp;
	bool same;
	int rc;

	cm_init(&tmp);
	rc = mgmt_store_revoked(m->store, (int64_t)time(NULL), &tmp);
	if (rc) {
		cm_release(&tmp);
		return rc;
	}
	same = tmp.nrevoked == m->map.nrevoked &&
	       (!tmp.nrevoked || !memcmp(tmp.revoked, m->map.revoked,
					 tmp.nrevoked * sizeof(*tmp.revoked)));
	if (!same) {
		free(m->map.revoked);
		m->map.revoked = tmp.revoked;
		m->map.nrevoked = tmp.nrevoked;
		m->map.revoked_cap = tmp.revoked_cap;
		tmp.revoked = NULL;
		m->map.version++;
		persist(m);
		apply_revoked(m);
	}
	cm_release(&tmp);
	return 0;
}

static void op_token_create(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_token_create rq;
	struct token_claims c;
	struct mgmt_token t;
	char err[256], *json = NULL, *text = NULL;
	int rc;

	if (!lead(m, req))
		return;
	if (mg_token_create_req(req, &rq))
		return;
	if (!m->key) {
		log_warn("mgmt", "token create refused: this node has no cluster key (node.key_file)");
		mg_token_create_release(&rq);
		svc_reply(req, -ENOKEY);
		return;
	}
	rc = token_claims_from_json(rq.claims.p, rq.claims.len, &c, err, sizeof(err));
	mg_token_create_release(&rq);
	if (rc) {
		log_warn("mgmt", "token create refused: %s", err);
		svc_reply(req, STRATA_EBADMSG);
		return;
	}
	/* The registry keeps the claims in the form the token carries. */
	rc = token_claims_to_json(&c, &json);
	if (!rc)
		rc = token_sign(m->key, &c, &text);
	if (!rc) {
		memset(&t, 0, sizeof(t));
		memcpy(t.id, c.id, sizeof(t.id));
		memcpy(t.tenant, c.tenant, sizeof(t.tenant));
		t.created = (int64_t)time(NULL);
		t.exp = c.exp;
		t.admin = c.flags & TOKEN_F_ADMIN;
		rc = mgmt_store_token_add(m->store, &t, json);
	}
	if (rc) {
		if (rc != -EEXIST)
			log_error("mgmt", "cannot create token %s: %s", c.id, strata_strerror(rc));
		reply_store_err(m, req, rc);
	} else {
		log_info("mgmt", "token %s created for tenant '%s'%s", c.id, c.tenant,
			 t.admin ? " (admin)" : "");
		mg_token_create_reply(req, 0, &(struct mg_token){ pstr_c(c.id), pstr_c(text) });
	}
	free(json);
	if (text) {
		memset(text, 0, strlen(text));
		free(text);
	}
}

static void op_token_list(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct proto_void rq;
	struct mg_token_list rep = { 0 };
	struct mgmt_token *ts = NULL;
	uint32_t n = 0;
	bool follower;
	int rc;

	/* The registry is the store's: a follower reads it there. */
	if (!lead_or_follow(m, req))
		return;
	follower = !is_leader(m);
	if (mg_token_list_req(req, &rq))
		return;
	rc = mgmt_store_token_list(m->store, MGMT_MAX_TOKENS, &ts, &n, &rep.total);
	if (rc == -EIO && follower) {
		free(ts);
		redirect(m, req);
		return;
	}
	if (!rc && n && !(rep.tokens = calloc(n, sizeof(*rep.tokens))))
		rc = -ENOMEM;
	if (rc) {
		free(ts);
		svc_reply(req, rc);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		rep.tokens[i] = (struct mg_token_info){ pstr_c(ts[i].id), pstr_c(ts[i].tenant),
							ts[i].created, ts[i].exp, ts[i].admin,
							ts[i].revoked != 0 };
	rep.tokens_n = n;
	mg_token_list_reply(req, 0, &rep);
	free(rep.tokens);
	free(ts);
}

static void op_token_revoke(void *svc, struct svc_req *req)
{
	struct mgmt *m = svc;
	struct mg_token_id rq;
	char id[TOKEN_ID_LEN + 1];
	int64_t now = (int64_t)time(NULL);
	int rc;

	if (!lead(m, req))
		return;
	if (mg_token_revoke_req(req, &rq))
		return;
	rc = pstr_copy(rq.id, id, sizeof(id)) || !token_id_ok(id) || rq.until < 0 ?
	     STRATA_EBADMSG : 0;
	mg_token_id_release(&rq);
	/* Refused before it is recorded: a revocation the map cannot carry
	 * would not be enforced. */
	if (!rc && !cm_revoked(&m->map, id) && m->map.nrevoked >= CM_MAX_REVOKED)
		rc = -ENOSPC;
	if (!rc)
		rc = mgmt_store_token_revoke(m->store, id, now);
	/* A token signed offline: kept revoked until it expires anyway. */
	if (rc == -ENOENT && rq.until > 0)
		rc = mgmt_store_token_revoke_offline(m->store, id,
						     rq.until == INT64_MAX ? 0 : rq.until, now);
	if (!rc) {
		rc = refresh_revoked(m);
		if (rc)
			log_error("mgmt", "token %s revoked in the registry, but the map does not carry it yet: %s",
				  id, strata_strerror(rc));
		else
			log_info("mgmt", "token %s revoked (map version %llu)", id,
				 (unsigned long long)m->map.version);
	}
	reply_store_err(m, req, rc);
}

static void on_expiry(void *arg)
{
	struct mgmt *m = arg;
	uint64_t before = m->map.version;
	int changed = 0;

	/* A follower's map is not the cluster's: only the leader expires. */
	if (is_leader(m)) {
		changed = cm_expire_leases(&m->map, reactor_now_ms());
		m->lost_n = lost_count(&m->lost, reactor_now_ms());
	}
	if (m->map.version != before) {
		log_warn("mgmt", "lease expiry: %d chain(s) reconfigured, map version %llu", changed,
			 (unsigned long long)m->map.version);
		persist(m);
	}
	reactor_timer_arm(m->r, &m->expiry, m->lease_ms / 4 ? m->lease_ms / 4 : 1);
}

/*
 * Loads the cluster's state from the store into m->map (replacing it):
 * nodes get a fresh lease (they keep serving and renew it, or expire
 * normally), the revoked tokens are read again. A new version is made
 * and saved when bump (a new leader: every holder refetches) or when
 * tokens are revoked (a revocation recorded just before a crash may not
 * have reached the stored version). 0 or the store's error (logged).
 */
static int load_state(struct mgmt *m, bool bump)
{
	struct cluster_map map;
	int rc = mgmt_store_load(m->store, &map);

	if (rc) {
		log_error("mgmt", "cannot load the cluster map: %s", strata_strerror(rc));
		return rc;
	}
	cm_reset_leases(&map, reactor_now_ms() + m->lease_ms);
	/* Services stored by a previous leader (PostgreSQL) renew theirs too. */
	for (uint32_t i = 0; i < map.nservices; i++)
		map.services[i].lease_expires_ms = reactor_now_ms() + m->lease_ms;
	rc = mgmt_store_revoked(m->store, (int64_t)time(NULL), &map);
	if (rc)
		log_error("mgmt", "cannot load the revoked tokens: %s", strata_strerror(rc));
	if (!rc && (bump || map.nrevoked)) {
		map.version++;
		if ((rc = mgmt_store_save(m->store, &map)))
			log_error("mgmt", "cannot persist the cluster map: %s", strata_strerror(rc));
	}
	if (rc) {
		cm_release(&map);
		return rc;
	}
	cm_release(&m->map);
	m->map = map;
	rebalance_forget(&m->rb);
	/* Reports of lost chunks are repeated every 30 s: they come back. */
	lost_release(&m->lost);
	lost_init(&m->lost);
	m->lost_n = 0;
	apply_revoked(m);
	snapshot(m);
	log_info("mgmt", "cluster map version %llu loaded: %u nodes, %u targets, %u chains",
		 (unsigned long long)m->map.version, m->map.nnodes, m->map.ntargets, m->map.nchains);
	return 0;
}

/* Takes or renews the leader lease (shared store): see the top. */
static void lease_tick(struct mgmt *m)
{
	struct mgmt_lease l;
	uint64_t sent = reactor_now_ms(), margin, run;
	int rc = mgmt_store_lease(m->store, m->holder, m->addr, m->leader_lease_ms, &l);

	if (rc) {
		log_warn_limited("mgmt", "cannot take or renew the leader lease: %s",
				 strata_strerror(rc));
		if (m->leader && reactor_now_ms() >= m->lead_until_ms)
			step_down(m, "the leader lease could not be renewed in time");
		return;
	}
	if (!l.leader) {
		if (strcmp(m->leader_addr, l.addr))
			log_info("mgmt", "the leader is '%s' (term %llu)", l.addr,
				 (unsigned long long)l.term);
		snprintf(m->leader_addr, sizeof(m->leader_addr), "%s", l.addr);
		step_down(m, "another mgmt holds the leader lease");
		return;
	}
	if (!m->leader || l.term != m->term) {
		mgmt_store_fence(m->store, l.term);
		rc = load_state(m, true);
		if (rc) {
			/* Another daemon may manage where we cannot. */
			(void)mgmt_store_resign(m->store, m->holder);
			m->leader = false;
			return;
		}
		m->term = l.term;
		m->leader = true;
		m->followed_ms = 0;
		m->space_dirty = false;
		m->takeovers++;
		log_info("mgmt", "leading the control nodes (term %llu) at '%s'",
			 (unsigned long long)m->term, m->addr);
	}
	snprintf(m->leader_addr, sizeof(m->leader_addr), "%s", m->addr);
	/* We stop a margin before the database's lease runs out. */
	margin = m->leader_lease_ms / 10 > 50 ? m->leader_lease_ms / 10 : 50;
	run = l.left_ms < m->leader_lease_ms ? l.left_ms : m->leader_lease_ms;
	m->lead_until_ms = sent + (run > margin ? run - margin : 0);
	m->term_snapshot = m->term;
	m->leader_snapshot = 1;
}

static void on_lease_timer(void *arg)
{
	struct mgmt *m = arg;

	lease_tick(m);
	publish(m, is_leader(m));
	/* Usage figures change without a new version: followers see them
	 * from the store this often. */
	if (m->space_dirty && is_leader(m)) {
		m->space_dirty = false;
		persist(m);
	}
	reactor_timer_arm(m->r, &m->lease_timer, m->leader_lease_ms / 3);
}

static void arm_on_owner(void *arg)
{
	struct mgmt *m = arg;

	reactor_timer_arm(m->r, &m->expiry, m->lease_ms / 4 ? m->lease_ms / 4 : 1);
	reactor_timer_arm(m->r, &m->rebalance_timer, REBALANCE_TICK_MS);
	if (m->shared)
		reactor_timer_arm(m->r, &m->lease_timer, m->leader_lease_ms / 3);
}

static void stop_on_owner(void *arg)
{
	struct mgmt *m = arg;

	reactor_timer_cancel(m->r, &m->expiry);
	reactor_timer_cancel(m->r, &m->rebalance_timer);
	if (m->shared) {
		reactor_timer_cancel(m->r, &m->lease_timer);
		/* A clean stop hands over at once, without waiting for the expiry. */
		if (m->leader)
			(void)mgmt_store_resign(m->store, m->holder);
	}
	mgmt_store_close(m->store);
	m->store = NULL;
}

static int mgmt_start(const struct service_env *env, void **out)
{
	const struct mgmt_cfg *cfg = env->cfg;
	struct mgmt *m = calloc(1, sizeof(*m));
	struct rebalance_opts ro;
	char path[CFG_STR_MAX + 16];
	int rc;

	if (!m)
		return -ENOMEM;
	rebalance_opts_init(&ro, sizeof(ro));
	ro.band_pct = (uint32_t)cfg->rebalance_band;
	ro.max_moves = (uint32_t)cfg->rebalance_max_moves;
	ro.paused = cfg->rebalance_paused;
	if ((rc = rebalance_init(&m->rb, &ro))) {
		free(m);
		return rc;	/* the schema bounds the keys: not reached */
	}
	m->r = env->reactors[0];
	m->node_id = env->node_id;
	m->addr = env->addr;
	lost_init(&m->lost);
	m->lease_ms = (uint64_t)cfg->lease_ms;
	m->replication = (uint32_t)cfg->replication;
	m->expect_nodes = (uint32_t)cfg->expect_nodes;
	m->full_pct = (uint32_t)cfg->full_pct;
	m->full_free = cfg->full_free;
	m->leader_lease_ms = (uint32_t)cfg->leader_lease_ms;
	m->follow_ms = env->heartbeat_ms ? env->heartbeat_ms : 1;
	m->key = env->key;
	cm_init(&m->map);
	reactor_timer_init(&m->expiry, on_expiry, m);
	reactor_timer_init(&m->lease_timer, on_lease_timer, m);
	reactor_timer_init(&m->rebalance_timer, on_rebalance, m);
	snprintf(path, sizeof(path), "%s/mgmt.db", env->data);
	if (cfg->store[0])
		rc = mgmt_store_open_pg(cfg->store, cfg->store_passfile, &m->store);
	else
		rc = mgmt_store_open(path, &m->store);
	if (rc) {
		/* Not the URI: it may hold a password. */
		log_error("mgmt", "cannot open %s%s%s: %s", cfg->store[0] ? "" : "'",
			  cfg->store[0] ? "the database of mgmt.store" : path,
			  cfg->store[0] ? "" : "'", strata_strerror(rc));
		goto fail;
	}
	m->shared = mgmt_store_shared(m->store);
	if (!m->shared) {
		/* The one mgmt: it leads for good. */
		if ((rc = load_state(m, false)))
			goto fail;
		m->leader = true;
		m->lead_until_ms = UINT64_MAX;
		m->leader_snapshot = 1;
		snprintf(m->leader_addr, sizeof(m->leader_addr), "%s", m->addr);
	} else {
		snprintf(m->holder, sizeof(m->holder), "node %u-%016llx", m->node_id,
			 (unsigned long long)service_incarnation());
		/* Leads at once when the lease is free; else follows. */
		lease_tick(m);
	}
	publish(m, is_leader(m));
	reactor_post(m->r, arm_on_owner, m);
	mgmt_route(env->srv, m->r, &(const struct mgmt_handlers){
		.mg_register = op_register, .mg_heartbeat = op_heartbeat, .mg_get_map = op_get_map,
		.mg_report = op_report, .mg_admin = op_admin, .mg_announce = op_announce,
		.mg_token_create = op_token_create, .mg_token_list = op_token_list,
		.mg_token_revoke = op_token_revoke, .mg_rebalance = op_rebalance,
	}, m);
	*out = m;
	return 0;
fail:
	if (m->store)
		mgmt_store_close(m->store);
	cm_release(&m->map);
	lost_release(&m->lost);
	free(m);
	return rc;
}

static void mgmt_stop(void *svc)
{
	struct mgmt *m = svc;

	/* Requests no longer arrive: the daemon closed its connections. */
	reactor_call(m->r, stop_on_owner, m);
	publish(NULL, false);
	cm_release(&m->map);
	lost_release(&m->lost);
	rebalance_release(&m->rb);
	free(m);
}

static void mgmt_status(void *svc, json_t *o)
{
	struct mgmt *m = svc;

	json_object_set_new(o, "map_version", json_integer((json_int_t)m->version_snapshot));
	json_object_set_new(o, "nodes", json_integer(m->nodes_total));
	json_object_set_new(o, "nodes_up", json_integer(m->nodes_up));
	json_object_set_new(o, "chains", json_integer(m->chains));
	json_object_set_new(o, "chains_short", json_integer(m->chains_short));
	json_object_set_new(o, "chains_resyncing", json_integer(m->chains_resyncing));
	/* What the cluster waits for before it builds chains (strata status
	 * says "forming: N of M storage nodes registered"). */
	json_object_set_new(o, "storage_nodes", json_integer(m->storage_nodes));
	json_object_set_new(o, "expect_nodes", json_integer(m->expect_nodes));
	json_object_set_new(o, "capacity", json_integer((json_int_t)m->capacity));
	json_object_set_new(o, "used", json_integer((json_int_t)m->used));
	json_object_set_new(o, "lost_chunks", json_integer(m->lost_n));
	json_object_set_new(o, "targets_full", json_integer(m->targets_full));
	/* With a shared store: whether this mgmt leads, in which term. */
	json_object_set_new(o, "leader", json_boolean(m->leader_snapshot));
	json_object_set_new(o, "term", json_integer((json_int_t)m->term_snapshot));
	json_object_set_new(o, "takeovers", json_integer((json_int_t)m->takeovers));
	json_object_set_new(o, "follower_reads", json_integer((json_int_t)m->follower_reads));
	{
		json_t *rb = json_object();

		/* moving: moves in flight; pending: out of the band, none in
		 * flight (paused, or no chain can move now); balanced. */
		json_object_set_new(rb, "state", json_string(
			m->rb_in_flight ? "moving" : m->rb_balanced ? "balanced" :
			m->rb_paused ? "paused" : "pending"));
		json_object_set_new(rb, "paused", json_boolean(m->rb_paused));
		json_object_set_new(rb, "moves_done", json_integer((json_int_t)m->rb_done));
		json_object_set_new(rb, "moves_in_flight", json_integer(m->rb_in_flight));
		json_object_set_new(rb, "moves_pending", json_integer(m->rb_pending));
		json_object_set_new(rb, "moves_cancelled", json_integer((json_int_t)m->rb_cancelled));
		json_object_set_new(rb, "bytes_moved", json_integer((json_int_t)m->rb_bytes));
		json_object_set_new(rb, "fill_min", json_integer(m->rb_fill_min));
		json_object_set_new(rb, "fill_max", json_integer(m->rb_fill_max));
		json_object_set_new(rb, "fill_mean", json_real(m->rb_fill_mean_x100 / 100.0));
		json_object_set_new(o, "rebalance", rb);
	}
}

static void mgmt_metrics(void *svc, struct bbuf *out)
{
	struct mgmt *m = svc;

	metrics_put(out, "strata_mgmt_map_version", "gauge", "cluster map version",
		    (double)m->version_snapshot);
	metrics_put(out, "strata_mgmt_nodes_up", "gauge", "storage nodes up", m->nodes_up);
	metrics_put(out, "strata_mgmt_chains_short", "gauge",
		    "chains with fewer serving replicas than R", m->chains_short);
	metrics_put(out, "strata_mgmt_chains_resyncing", "gauge",
		    "chains with a member resyncing (a node back, a drain's or a removed node's "
		    "replacement)", m->chains_resyncing);
	metrics_put(out, "strata_mgmt_capacity_bytes", "gauge",
		    "raw capacity of the storage targets, each filesystem counted once",
		    (double)m->capacity);
	metrics_put(out, "strata_mgmt_used_bytes", "gauge",
		    "bytes the storage targets hold (as of their last heartbeat)", (double)m->used);
	metrics_put(out, "strata_mgmt_targets_full", "gauge",
		    "storage targets held full (mgmt.full_pct): no new file is placed on their "
		    "chains", (double)m->targets_full);
	metrics_put(out, "strata_mgmt_chunks_lost", "gauge",
		    "chunks reported with no intact replica left (status says degraded)",
		    (double)m->lost_n);
	metrics_put(out, "strata_mgmt_rebalance_moves_total", "counter",
		    "chain members the rebalancer moved to an emptier node", (double)m->rb_done);
	metrics_put(out, "strata_mgmt_rebalance_moves_in_flight", "gauge",
		    "rebalance moves whose new member is resyncing", m->rb_in_flight);
	metrics_put(out, "strata_mgmt_rebalance_moves_pending", "gauge",
		    "rebalance moves still to start before every node is within "
		    "mgmt.rebalance_band of the mean", m->rb_pending);
	metrics_put(out, "strata_mgmt_rebalance_bytes_total", "counter",
		    "bytes the rebalancer moved (estimated: the old member's bytes in use over "
		    "its chains)", (double)m->rb_bytes);
	metrics_put(out, "strata_mgmt_rebalance_paused", "gauge",
		    "1: 'strata rebalance pause' holds new moves", m->rb_paused);
	metrics_put(out, "strata_mgmt_leader", "gauge",
		    "1: this mgmt leads the control nodes (always, with SQLite)",
		    m->leader_snapshot);
	metrics_put(out, "strata_mgmt_leader_term", "gauge",
		    "the leader lease's term this mgmt led in last (0: never led; SQLite: 0)",
		    (double)m->term_snapshot);
	metrics_put(out, "strata_mgmt_follower_reads_total", "counter",
		    "map and token-list reads this mgmt answered as a follower, from the store",
		    (double)m->follower_reads);
}

#define K(name, type, field, def, min, max, help) \
	CFG_KEY(struct mgmt_cfg, "mgmt", name, type, field, def, min, max, help)
static const struct cfg_key mgmt_keys[] = {
	K("lease", CFG_MS, lease_ms, "5s", 100, 3600000,
	  "a node not heard from for this long leaves its chains"),
	K("replication", CFG_INT, replication, "3", 1, 8, "replication factor R"),
	K("expect_nodes", CFG_INT, expect_nodes, "1", 1, 4096,
	  "storage nodes to wait for before building chains"),
	K("full_pct", CFG_INT, full_pct, "95", 50, 100,
	  "a target with this percent of its capacity in use is full: no new file is placed "
	  "on its chains (100: never)"),
	K("full_free", CFG_SIZE, full_free, "256M", 0, 0,
	  "a target with less free space than this is full too (0: only full_pct counts)"),
	K("store", CFG_STR, store, "", 0, 0,
	  "cluster state database: empty: SQLite (mgmt.db in the data directory), one mgmt;"
	  " postgresql://...: PostgreSQL, shared by the mgmt of every control node"),
	K("store_passfile", CFG_STR, store_passfile, "", 0, 0,
	  "PostgreSQL password file (mode 0600); empty: libpq's default"),
	K("leader_lease", CFG_MS, leader_lease_ms, "3s", 300, 60000,
	  "PostgreSQL: the leader lease of the control nodes' mgmt; a follower takes over"
	  " within it once the leader stops renewing"),
	K("rebalance_band", CFG_INT, rebalance_band, "10", 1, 100,
	  "percent: the rebalancer moves chain members until every storage node holds"
	  " within this much of the mean number of chain entries"),
	K("rebalance_max_moves", CFG_INT, rebalance_max_moves, "1", 1, 64,
	  "rebalance moves (a member resyncing on its new node) at once"),
	K("rebalance_paused", CFG_BOOL, rebalance_paused, "false", 0, 0,
	  "start with the rebalancer paused ('strata rebalance resume' starts it)"),
};
#undef K
static const struct cfg_schema mgmt_schema = CFG_SCHEMA(mgmt_keys);

static int mgmt_check(const void *cfg, char *err, size_t errlen)
{
	const struct mgmt_cfg *c = cfg;

	return mgmt_store_check_spec(c->store, c->store_passfile, err, errlen) ? STRATA_ECONFIG : 0;
}

const struct service_def mgmt_service = {
	.name = "mgmt",
	.schema = &mgmt_schema,
	.cfg_size = sizeof(struct mgmt_cfg),
	.check = mgmt_check,
	.start = mgmt_start,
	.stop = mgmt_stop,
	.status = mgmt_status,
	.metrics = mgmt_metrics,
};
