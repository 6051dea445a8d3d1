/*
 * rpc.h, server.h and the part of conn.h the services use, over simulated
 * connections with a fault layer.
 *
 * A connection joins a caller (a pool's reactor) and a server (a node's
 * listener, found by its address string, e.g. "sim3:7300"); like a TCP
 * connection it belongs to the two processes that made it, delivers each
 * direction in order, and is reset when either process dies (the peer's
 * pending calls fail with -ECONNRESET, unless it is cut off from the dead
 * node: then they time out). A call to an address nobody listens on fails
 * with -ECONNREFUSED. A request and its reply each take a seeded delay.
 *
 * Faults (sim_net_set_faults, sim_net_cut): a message may be lost (the
 * caller's timer then gives -ETIMEDOUT), a request delivered twice (the
 * handler runs twice; the second reply finds no pending call and is
 * dropped, as a late reply is), a message may take a long time or
 * overtake earlier ones, and a cut link loses everything sent across it.
 * Loss, duplication and overtaking are what a datagram transport may do
 * (the planned libfabric one); TCP does none of them, and a finding that
 * needs them says so.
 *
 * The contract kept from conn.h: the callback runs exactly once, never
 * from inside the call; the body and bulk are copied when sent; a
 * response bulk larger than bulk_cap fails the call with STRATA_EBADMSG;
 * a reply to a call that already completed is dropped.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "net/rpc.h"
#include "net/server.h"
#include "proto/mgmt.h"
#include "proto/storage.h"
#include "sim.h"
#include "strata/errors.h"

struct route {
	svc_handler_fn fn;
	void *svc;
	struct reactor *owner;
};

struct rpc_server {
	struct rpc_server *next;	/* every server of the run */
	struct reactor **reactors;
	int nreactors;
	struct sim_node *node;
	uint32_t inc;
	char addr[64];
	bool listening;
	uint32_t rr;			/* accepted connections, round robin */
	struct route routes[OP_MAX];
};

struct pending {
	struct pending *next;
	struct conn *c;
	uint64_t id;
	uint16_t op;
	rpc_cb cb;
	void *arg;
	void *bulk_dst;
	uint64_t bulk_cap;
	struct reactor_timer timer;
};

/* Both ends of one connection. */
struct conn {
	struct conn *next;		/* every connection of the run */
	uint64_t id;
	struct reactor *cr;		/* the caller's (pool's) reactor */
	struct sim_node *cnode;
	uint32_t cinc;
	char caddr[48];			/* the caller as the server sees it */
	struct rpc_server *srv;		/* NULL: nobody listened */
	struct sim_node *snode;		/* the node addressed (NULL: unknown) */
	uint32_t sinc;
	struct reactor *sr;		/* the server end's reactor */
	bool open;			/* at the caller */
	bool failing;			/* a reset is on its way to the caller */
	uint64_t next_id;
	struct pending *pend, **pend_tail;
	uint64_t fifo_req_us, fifo_rep_us;
};

struct msg {
	struct conn *c;
	bool reply;
	uint16_t op;
	uint64_t req_id;
	int32_t status;
	uint8_t *body;
	uint32_t body_len;
	uint8_t *bulk;
	uint64_t bulk_len;
};

struct pool_ent {
	struct pool_ent *next;
	char addr[64];
	struct conn *c;
};

struct rpc_pool {
	struct reactor *r;
	uint32_t timeout_ms;
	struct pool_ent *ents;
};

static struct {
	struct sim_node *nodes;
	uint32_t nnodes;
	struct sim_rng rng;
	struct sim_net_faults f;
	bool cut[SIM_MAX_NODES + 1][SIM_MAX_NODES + 1];
	struct rpc_server *servers;
	struct conn *conns;
	uint64_t next_conn;
	struct sim_net_stats st;
} g_net;

/* ---- names for traces ---- */

static const char *op_name(uint16_t op)
{
	for (size_t i = 0; i < storage_NOPS; i++)
		if (storage_ops[i].op == op)
			return storage_ops[i].name;
	for (size_t i = 0; i < mgmt_NOPS; i++)
		if (mgmt_ops[i].op == op)
			return mgmt_ops[i].name;
	return "OP?";
}

static bool quiet_op(uint16_t op)
{
	/* Heartbeats and map polls are most of the traffic and say little. */
	return op == OP_MGMT_HEARTBEAT || op == OP_MGMT_GET_MAP;
}

/* ---- set up ---- */

void sim_net_reset(uint64_t seed, struct sim_node *nodes, uint32_t nnodes)
{
	sim_net_release();
	g_net.nodes = nodes;
	g_net.nnodes = nnodes;
	sim_rng_init(&g_net.rng, seed, 2);
}

static void pending_free_all(struct conn *c)
{
	while (c->pend) {
		struct pending *p = c->pend;

		c->pend = p->next;
		/* Its timer is in the queue unless the reactor died first. */
		reactor_timer_cancel(c->cr, &p->timer);
		free(p);
	}
	c->pend_tail = &c->pend;
}

void sim_net_release(void)
{
	while (g_net.conns) {
		struct conn *c = g_net.conns;

		g_net.conns = c->next;
		pending_free_all(c);
		free(c);
	}
	while (g_net.servers) {
		struct rpc_server *s = g_net.servers;

		g_net.servers = s->next;
		free(s);
	}
	memset(&g_net, 0, sizeof(g_net));
}

void sim_net_set_faults(const struct sim_net_faults *f)
{
	g_net.f = *f;
}

void sim_net_cut(uint32_t a, uint32_t b, bool cut)
{
	if (a > SIM_MAX_NODES || b > SIM_MAX_NODES)
		return;
	g_net.cut[a][b] = cut;
	g_net.cut[b][a] = cut;
}

bool sim_net_is_cut(uint32_t a, uint32_t b)
{
	return a <= SIM_MAX_NODES && b <= SIM_MAX_NODES && g_net.cut[a][b];
}

void sim_net_stats_get(struct sim_net_stats *out)
{
	*out = g_net.st;
}

static struct sim_node *node_by_addr(const char *addr)
{
	for (uint32_t i = 0; i < g_net.nnodes; i++) {
		if (strcmp(g_net.nodes[i].addr, addr) == 0)
			return &g_net.nodes[i];
	}
	return NULL;
}

static struct rpc_server *listener_at(const char *addr)
{
	for (struct rpc_server *s = g_net.servers; s; s = s->next) {
		if (s->listening && strcmp(s->addr, addr) == 0)
			return s;
	}
	return NULL;
}

static bool proc_alive(const struct sim_node *n, uint32_t inc)
{
	return n && n->up && n->inc == inc;
}

/* One way across the network: a base delay of 50-400 us, sometimes a
 * spike. */
static uint64_t link_delay(void)
{
	if (sim_rng_ppm(&g_net.rng, g_net.f.spike_ppm)) {
		g_net.st.spikes++;
		return sim_rng_range(&g_net.rng, 20000, 600000);
	}
	return sim_rng_range(&g_net.rng, 50, 400);
}

/* ---- completing calls (at the caller) ---- */

static void pending_unlink(struct conn *c, struct pending *p)
{
	for (struct pending **pp = &c->pend; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			if (c->pend_tail == &p->next)
				c->pend_tail = pp;
			return;
		}
	}
}

static void complete(struct pending *p, int status, struct rpc_msg *resp)
{
	rpc_cb cb = p->cb;
	void *arg = p->arg;

	reactor_timer_cancel(p->c->cr, &p->timer);
	pending_unlink(p->c, p);
	if (sim_tracing() && !quiet_op(p->op) && status && !resp)
		sim_trace("net: call #%llu %s on c%llu failed: %s", (unsigned long long)p->id,
			  op_name(p->op), (unsigned long long)p->c->id, strata_strerror(status));
	free(p);
	if (cb)
		cb(arg, status, resp);
}

static void on_call_timeout(void *arg)
{
	struct pending *p = arg;

	g_net.st.timeouts++;
	complete(p, -ETIMEDOUT, NULL);
}

/* The caller learns its connection is gone: every call on it fails. */
static void conn_fail_now(struct conn *c, int err)
{
	c->open = false;
	c->failing = false;
	while (c->pend)
		complete(c->pend, err, NULL);
}

struct fail_ev {
	struct conn *c;
	int err;
};

static void on_conn_fail(void *arg)
{
	struct fail_ev *f = arg;

	if (sim_tracing())
		sim_trace("net: c%llu to %s: %s", (unsigned long long)f->c->id,
			  f->c->snode ? f->c->snode->addr : "?", strata_strerror(f->err));
	conn_fail_now(f->c, f->err);
	free(f);
}

/* The reset (or refusal) of c reaches its caller after a trip across the
 * network, unless the link is cut: then its calls time out. */
static void conn_fail_later(struct conn *c, int err)
{
	struct fail_ev *f;

	if (!c->open || c->failing || !proc_alive(c->cnode, c->cinc))
		return;
	if (c->snode && sim_net_is_cut(c->cnode->id, c->snode->id))
		return;
	f = malloc(sizeof(*f));
	if (!f)
		return;
	f->c = c;
	f->err = err;
	c->failing = true;
	if (err == -ECONNREFUSED)
		g_net.st.refused++;
	else
		g_net.st.resets++;
	sim_at(c->cr, sim_now_us() + link_delay(), on_conn_fail, free, f);
}

/* ---- messages ---- */

static void msg_free(void *arg)
{
	struct msg *m = arg;

	if (!m)
		return;
	free(m->body);
	free(m->bulk);
	free(m);
}

static struct msg *msg_new(struct conn *c, bool reply, uint16_t op, uint64_t id, int32_t status,
			   const void *body, uint32_t body_len, const void *bulk, uint64_t bulk_len)
{
	struct msg *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->c = c;
	m->reply = reply;
	m->op = op;
	m->req_id = id;
	m->status = status;
	m->body_len = body_len;
	m->bulk_len = bulk_len;
	if ((body_len && !(m->body = malloc(body_len))) ||
	    (bulk_len && !(m->bulk = malloc(bulk_len)))) {
		msg_free(m);
		return NULL;
	}
	if (body_len)
		memcpy(m->body, body, body_len);
	if (bulk_len)
		memcpy(m->bulk, bulk, bulk_len);
	return m;
}

static struct msg *msg_copy(const struct msg *m)
{
	return msg_new(m->c, m->reply, m->op, m->req_id, m->status, m->body, m->body_len, m->bulk,
		       m->bulk_len);
}

static void deliver_request(void *arg);
static void deliver_reply(void *arg);

/* Sends m across the network from one end of its connection to the
 * other, through the fault layer. */
static void net_send(struct msg *m)
{
	struct conn *c = m->c;
	struct sim_node *from = m->reply ? c->snode : c->cnode;
	struct sim_node *to = m->reply ? c->cnode : c->snode;
	struct reactor *dst = m->reply ? c->cr : c->sr;
	uint64_t *fifo = m->reply ? &c->fifo_rep_us : &c->fifo_req_us;
	uint64_t now = sim_now_us(), due = now + link_delay();
	bool trace = sim_tracing() && !quiet_op(m->op);
	const char *what = m->reply ? "reply" : "call";

	g_net.st.sent++;
	if (!m->reply && (!c->srv || !proc_alive(c->snode, c->sinc) || !c->srv->listening)) {
		/* The process at the other end is gone (its reset was lost
		 * while the link was cut): its host answers with a reset. */
		conn_fail_later(c, -ECONNRESET);
		msg_free(m);
		return;
	}
	if (sim_net_is_cut(from->id, to->id) || sim_rng_ppm(&g_net.rng, g_net.f.drop_ppm)) {
		g_net.st.dropped++;
		if (trace)
			sim_trace("net: %s #%llu %s %s->%s on c%llu LOST%s", what,
				  (unsigned long long)m->req_id, op_name(m->op), from->name, to->name,
				  (unsigned long long)c->id,
				  sim_net_is_cut(from->id, to->id) ? " (link cut)" : "");
		msg_free(m);
		return;
	}
	if (sim_rng_ppm(&g_net.rng, g_net.f.reorder_ppm)) {
		/* May overtake what was sent before it on this connection. */
		g_net.st.reordered++;
	} else {
		if (due <= *fifo)
			due = *fifo + 1;
		*fifo = due;
	}
	if (!m->reply && sim_rng_ppm(&g_net.rng, g_net.f.dup_ppm)) {
		struct msg *d = msg_copy(m);

		if (d) {
			g_net.st.dups++;
			if (trace)
				sim_trace("net: call #%llu %s %s->%s on c%llu DUPLICATED",
					  (unsigned long long)m->req_id, op_name(m->op), from->name,
					  to->name, (unsigned long long)c->id);
			for (struct pending *p = c->pend; p; p = p->next) {
				if (p->id == m->req_id)
					sim_on_request_dup(c->cnode->id, p->arg);
			}
			sim_at(dst, due + link_delay() + sim_rng_below(&g_net.rng, 50000),
			       deliver_request, msg_free, d);
		}
	}
	if (trace)
		sim_trace("net: %s #%llu %s %s->%s on c%llu status %d body %u bulk %llu, +%lluus",
			  what, (unsigned long long)m->req_id, op_name(m->op), from->name, to->name,
			  (unsigned long long)c->id, m->status, m->body_len,
			  (unsigned long long)m->bulk_len, (unsigned long long)(due - now));
	sim_at(dst, due, m->reply ? deliver_reply : deliver_request, msg_free, m);
}

/* ---- the server end ---- */

static void req_free(struct svc_req *req)
{
	free(req->body);
	abuf_free(req->bulk);
	bbuf_release(&req->reply);
	free(req);
}

static void reply_on_conn(void *arg)
{
	struct svc_req *req = arg;
	struct conn *c = req->conn;
	struct msg *m = NULL;

	/* A reply from a dead process, or to a connection it lost, goes
	 * nowhere. */
	if (c->srv && proc_alive(c->snode, c->sinc) && c->srv->listening &&
	    proc_alive(c->cnode, c->cinc))
		m = msg_new(c, true, req->hdr.opcode, req->hdr.req_id, req->status, req->reply.buf,
			    (uint32_t)req->reply.len, req->rbulk, req->rbulk_len);
	/* The bulk was copied: its owner may have it back. */
	if (req->rbulk_done)
		req->rbulk_done(req->rbulk_arg);
	req_free(req);
	if (m)
		net_send(m);
}

void svc_reply_bulk(struct svc_req *req, int status, const void *bulk, uint64_t len,
		    void (*done)(void *), void *arg)
{
	req->status = status;
	req->rbulk = bulk;
	req->rbulk_len = len;
	req->rbulk_done = done;
	req->rbulk_arg = arg;
	if (req->conn_r == req->owner)
		reply_on_conn(req);
	else
		reactor_post(req->conn_r, reply_on_conn, req);
}

void svc_reply(struct svc_req *req, int status)
{
	svc_reply_bulk(req, status, NULL, 0, NULL, NULL);
}

static void run_on_owner(void *arg)
{
	struct svc_req *req = arg;

	req->fn(req->svc, req);
}

void svc_handoff(struct svc_req *req, struct reactor *owner, svc_handler_fn fn, void *svc)
{
	req->fn = fn;
	req->svc = svc;
	if (owner == req->owner) {
		fn(svc, req);
		return;
	}
	req->owner = owner;
	reactor_post(owner, run_on_owner, req);
}

struct reactor *svc_req_owner(const struct svc_req *req)
{
	return req->owner;
}

static void deliver_request(void *arg)
{
	struct msg *m = arg;
	struct conn *c = m->c;
	struct rpc_server *s = c->srv;
	uint16_t op = m->op;
	uint64_t bulk_len = m->bulk_len;
	struct route *rt;
	struct svc_req *req;

	if (!proc_alive(c->cnode, c->cinc)) {
		msg_free(m);
		return;
	}
	if (!s || !proc_alive(c->snode, c->sinc) || !s->listening) {
		/* The process it was for is gone: its peer answers with a reset. */
		conn_fail_later(c, -ECONNRESET);
		msg_free(m);
		return;
	}
	if (sim_net_is_cut(c->cnode->id, c->snode->id)) {
		g_net.st.dropped++;
		msg_free(m);
		return;
	}
	g_net.st.delivered++;
	rt = &s->routes[op < OP_MAX ? op : 0];
	req = calloc(1, sizeof(*req));
	if (!req) {
		msg_free(m);
		return;
	}
	req->hdr.opcode = op;
	req->hdr.req_id = m->req_id;
	req->hdr.body_len = m->body_len;
	req->hdr.bulk_len = bulk_len;
	req->body = m->body;
	m->body = NULL;
	if (bulk_len) {
		/* A request's bulk lands in an aligned buffer the handler may keep. */
		req->bulk = abuf_alloc(bulk_len);
		if (req->bulk)
			memcpy(req->bulk, m->bulk, bulk_len);
	}
	msg_free(m);
	bbuf_init(&req->reply);
	req->conn = c;
	req->conn_r = c->sr;
	if (op >= OP_MAX || !rt->fn || (bulk_len && !req->bulk)) {
		req->owner = c->sr;
		svc_reply(req, rt->fn ? -ENOMEM : STRATA_EBADOP);
		return;
	}
	req->owner = rt->owner ? rt->owner : c->sr;
	req->svc = rt->svc;
	req->fn = rt->fn;
	if (req->owner == req->conn_r)
		run_on_owner(req);
	else
		reactor_post(req->owner, run_on_owner, req);
}

int rpc_server_new(struct reactor **reactors, int nreactors, uint32_t node_id,
		   struct rpc_server **out)
{
	struct rpc_server *s = calloc(1, sizeof(*s));

	(void)node_id;
	if (!s)
		return -ENOMEM;
	s->reactors = reactors;
	s->nreactors = nreactors;
	s->node = reactors[0]->node;
	s->inc = s->node ? s->node->inc : 0;
	s->next = g_net.servers;
	g_net.servers = s;
	*out = s;
	return 0;
}

int rpc_server_listen(struct rpc_server *s, const char *addr)
{
	if (listener_at(addr))
		return -EADDRINUSE;
	snprintf(s->addr, sizeof(s->addr), "%s", addr);
	s->listening = true;
	return 7300;
}

/* Every connection accepted by s is closed: their callers see a reset. */
static void server_close_conns(struct rpc_server *s)
{
	for (struct conn *c = g_net.conns; c; c = c->next) {
		if (c->srv == s)
			conn_fail_later(c, -ECONNRESET);
	}
}

void rpc_server_shutdown(struct rpc_server *s)
{
	s->listening = false;
	server_close_conns(s);
}

void rpc_server_free(struct rpc_server *s)
{
	if (!s)
		return;
	for (struct rpc_server **pp = &g_net.servers; *pp; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	/* Connections keep their pointer to it for the run: they no
	 * longer reach it (listening false, then freed). */
	for (struct conn *c = g_net.conns; c; c = c->next) {
		if (c->srv == s)
			c->srv = NULL;
	}
	free(s);
}

void rpc_server_route(struct rpc_server *s, uint16_t op, struct reactor *owner,
		      svc_handler_fn fn, void *svc, enum svc_access access)
{
	(void)access;	/* every simulated peer is a daemon */
	if (op >= OP_MAX)
		return;
	s->routes[op].fn = fn;
	s->routes[op].svc = svc;
	s->routes[op].owner = owner;
}

void sim_net_node_down(struct sim_node *n)
{
	for (struct rpc_server *s = g_net.servers; s; s = s->next) {
		if (s->node == n && s->listening) {
			s->listening = false;
			server_close_conns(s);
		}
	}
	for (struct conn *c = g_net.conns; c; c = c->next) {
		if (c->cnode == n && c->open) {
			/* The caller is gone: its calls go with it, silently. */
			c->open = false;
			pending_free_all(c);
		}
	}
}

/* ---- the caller end: pools ---- */

static struct conn *conn_new(struct rpc_pool *p, const char *addr)
{
	struct conn *c = calloc(1, sizeof(*c));
	struct reactor *r = p->r;

	if (!c)
		return NULL;
	c->id = ++g_net.next_conn;
	c->cr = r;
	c->cnode = r->node;
	c->cinc = r->node ? r->node->inc : 0;
	c->pend_tail = &c->pend;
	snprintf(c->caddr, sizeof(c->caddr), "%s:%llu", c->cnode ? c->cnode->name : "sim",
		 (unsigned long long)(40000 + c->id));
	c->snode = node_by_addr(addr);
	c->srv = listener_at(addr);
	if (c->srv && c->snode) {
		c->sinc = c->srv->inc;
		c->sr = c->srv->reactors[c->srv->rr++ % (uint32_t)c->srv->nreactors];
	} else {
		c->srv = NULL;
	}
	c->open = true;
	c->next = g_net.conns;
	g_net.conns = c;
	if (sim_tracing() && c->cnode)
		sim_trace("net: c%llu %s -> %s%s", (unsigned long long)c->id, c->cnode->name, addr,
			  c->srv ? "" : " (nobody listens)");
	return c;
}

/* Every simulated peer is a daemon of one cluster: credentials are not
 * simulated (the handshake has its own tests). */
int rpc_pool_set_cred(struct rpc_pool *p, const struct net_cred *cred)
{
	(void)p;
	(void)cred;
	return 0;
}

void rpc_pool_set_tls(struct rpc_pool *p, struct net_tls *tls)
{
	(void)p;
	(void)tls;
}

const struct net_ident *svc_req_ident(const struct svc_req *req)
{
	static const struct net_ident daemon = { .role = NET_ROLE_DAEMON };

	(void)req;
	return &daemon;
}

const char *svc_req_peer(const struct svc_req *req)
{
	(void)req;
	return "sim";
}

bool svc_req_once(const struct svc_req *req, uint32_t bit)
{
	(void)req;
	(void)bit;
	return true;
}

/* No peer presents a token, so nothing can be revoked. */
int net_revoked_update(uint64_t map_version, const char (*ids)[TOKEN_ID_LEN + 1], uint32_t n)
{
	(void)map_version;
	(void)ids;
	(void)n;
	return 0;
}

int rpc_pool_new(struct reactor *r, uint32_t timeout_ms, struct rpc_pool **out)
{
	struct rpc_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	p->r = r;
	p->timeout_ms = timeout_ms;
	*out = p;
	return 0;
}

void rpc_pool_free(struct rpc_pool *p)
{
	if (!p)
		return;
	while (p->ents) {
		struct pool_ent *e = p->ents;

		p->ents = e->next;
		/* As conn_close does: the calls fail before it returns. */
		if (e->c && e->c->open)
			conn_fail_now(e->c, -ECONNRESET);
		free(e);
	}
	free(p);
}

void rpc_pool_reset(struct rpc_pool *p, const char *addr)
{
	for (struct pool_ent *e = p->ents; e; e = e->next) {
		if (strcmp(e->addr, addr) == 0 && e->c) {
			if (e->c->open)
				conn_fail_now(e->c, -ECONNRESET);
			e->c = NULL;
		}
	}
}

int rpc_pool_call(struct rpc_pool *p, const char *addr, const struct rpc_call_args *a)
{
	struct pool_ent *e;
	struct pending *pd;
	struct conn *c;
	struct msg *m;

	if (strlen(addr) >= sizeof(e->addr))
		return -EINVAL;
	if (a->body_len > FRAME_MAX_BODY || a->bulk_len > FRAME_MAX_BULK)
		return -EMSGSIZE;
	for (e = p->ents; e && strcmp(e->addr, addr); e = e->next)
		;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (!e)
			return -ENOMEM;
		snprintf(e->addr, sizeof(e->addr), "%s", addr);
		e->next = p->ents;
		p->ents = e;
	}
	/* A connection that never reached anyone is dropped once someone
	 * listens there (its calls keep their timers): a connect retried. */
	if (e->c && (!e->c->open || (!e->c->srv && listener_at(addr))))
		e->c = NULL;
	if (!e->c) {
		e->c = conn_new(p, addr);
		if (!e->c)
			return -ENOMEM;
	}
	c = e->c;
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return -ENOMEM;
	pd->c = c;
	pd->id = ++c->next_id;
	pd->op = a->op;
	pd->cb = a->cb;
	pd->arg = a->arg;
	pd->bulk_dst = a->bulk_dst;
	pd->bulk_cap = a->bulk_dst ? a->bulk_cap : 0;
	*c->pend_tail = pd;
	c->pend_tail = &pd->next;
	reactor_timer_init(&pd->timer, on_call_timeout, pd);
	reactor_timer_arm(p->r, &pd->timer, a->timeout_ms ? a->timeout_ms : p->timeout_ms);
	if (!c->srv) {
		/* Refused once the SYN's answer comes back (or never, when
		 * cut off: the call times out). */
		if (sim_tracing() && !quiet_op(a->op))
			sim_trace("net: call #%llu %s to %s on c%llu: nobody listens",
				  (unsigned long long)pd->id, op_name(a->op), addr,
				  (unsigned long long)c->id);
		conn_fail_later(c, -ECONNREFUSED);
		return 0;
	}
	m = msg_new(c, false, a->op, pd->id, 0, a->body, a->body_len, a->bulk, a->bulk_len);
	if (!m) {
		reactor_timer_cancel(p->r, &pd->timer);
		pending_unlink(c, pd);
		free(pd);
		return -ENOMEM;
	}
	net_send(m);
	return 0;
}

static void deliver_reply(void *arg)
{
	struct msg *m = arg;
	struct conn *c = m->c;
	struct pending *p;
	struct rpc_msg rm = { 0 };

	if (!c->open || sim_net_is_cut(c->cnode->id, c->snode->id)) {
		msg_free(m);
		return;
	}
	for (p = c->pend; p && p->id != m->req_id; p = p->next)
		;
	if (!p) {
		/* A late reply to a call that timed out, or a duplicate's. */
		msg_free(m);
		return;
	}
	g_net.st.delivered++;
	if (m->bulk_len > p->bulk_cap) {
		complete(p, STRATA_EBADMSG, NULL);
		msg_free(m);
		return;
	}
	if (m->bulk_len)
		memcpy(p->bulk_dst, m->bulk, m->bulk_len);
	rm.hdr.opcode = m->op;
	rm.hdr.flags = FRAME_F_RESPONSE;
	rm.hdr.status = m->status;
	rm.hdr.req_id = m->req_id;
	rm.hdr.body_len = m->body_len;
	rm.hdr.bulk_len = m->bulk_len;
	rm.body = m->body;
	rm.bulk = m->bulk_len ? p->bulk_dst : NULL;
	complete(p, m->status, &rm);
	msg_free(m);
}

/* ---- the rest of conn.h the linked code uses ---- */

const char *conn_peer(const struct conn *c)
{
	return c->caddr;
}

void net_stats_get(struct net_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->frames_out = g_net.st.sent;
	out->frames_in = g_net.st.delivered;
}
