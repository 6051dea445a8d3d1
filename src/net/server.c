/* Routing of requests to owner threads and replies back. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "addr.h"
#include "codec.h"
#include "frame.h"
#include "listener.h"
#include "server.h"
#include "strata/errors.h"

struct route {
	svc_handler_fn fn;
	void *svc;
	struct reactor *owner;
	enum svc_access access;
};

struct conn_list {
	struct conn **v;
	int n, cap;
};

struct rpc_server {
	struct reactor **reactors;
	int nreactors;
	struct conn_list *conns;	/* per reactor, touched on its thread */
	struct listener *listener;
	struct route routes[OP_MAX];
	struct conn_handler h;
	struct net_auth auth;
	struct net_tls *tls;	/* a reference, or NULL */
	struct net_gate *gate;	/* NULL: no caps */
};

static void req_free(struct svc_req *req)
{
	free(req->body);
	abuf_free(req->bulk);
	bbuf_release(&req->reply);
	free(req);
}

/* On the connection's thread: send the reply. */
static void reply_on_conn(void *arg)
{
	struct svc_req *req = arg;

	if (conn_reply(req->conn, &req->hdr, req->status, req->reply.buf, (uint32_t)req->reply.len,
		       req->rbulk, req->rbulk_len, req->rbulk_done, req->rbulk_arg) < 0 &&
	    conn_is_open(req->conn))
		log_warn("net", "cannot queue reply to '%s'", conn_peer(req->conn));
	conn_put(req->conn);
	req_free(req);
}

static void send_reply(struct svc_req *req)
{
	if (req->conn_r == req->owner || reactor_post(req->conn_r, reply_on_conn, req))
		reply_on_conn(req);	/* same thread (or post failed: ENOMEM) */
}

/* Forgets the answer recorded in req: its body, and its bulk (done runs). */
static void drop_answer(struct svc_req *req, int status)
{
	req->status = status;
	req->reply.len = 0;
	if (req->rbulk_done)
		req->rbulk_done(req->rbulk_arg);
	req->rbulk = NULL;
	req->rbulk_len = 0;
	req->rbulk_done = NULL;
}

void svc_reply_bulk(struct svc_req *req, int status, const void *bulk, uint64_t len,
		    void (*done)(void *), void *arg)
{
	req->status = status;
	req->rbulk = bulk;
	req->rbulk_len = len;
	req->rbulk_done = done;
	req->rbulk_arg = arg;
	if (req->hold == SVC_HELD) {
		req->hold = SVC_HELD_ANSWERED;
		return;
	}
	/* A failed reply carries no body and no bulk. */
	if (req->fail_later && !status)
		drop_answer(req, req->fail_later);
	send_reply(req);
}

void svc_req_hold(struct svc_req *req)
{
	req->hold = SVC_HELD;
}

bool svc_req_unhold(struct svc_req *req, int fail)
{
	bool answered = req->hold == SVC_HELD_ANSWERED;

	req->hold = SVC_UNHELD;
	if (!answered) {
		req->fail_later = fail;
		return false;
	}
	if (fail && !req->status)
		drop_answer(req, fail);
	send_reply(req);
	return true;
}

bool svc_req_answered(const struct svc_req *req)
{
	return req->hold == SVC_HELD_ANSWERED;
}

bool svc_req_rerun(struct svc_req *req)
{
	if (req->hold != SVC_HELD_ANSWERED || (req->hdr.bulk_len && !req->bulk))
		return false;
	drop_answer(req, 0);
	req->hold = SVC_UNHELD;
	req->fn(req->svc, req);
	return true;
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
	if (reactor_post(owner, run_on_owner, req)) {
		req->owner = req->conn_r;
		svc_reply(req, -ENOMEM);
	}
}

struct reactor *svc_req_owner(const struct svc_req *req)
{
	return req->owner;
}

/* The caller a FRAME_F_CALLER request acts for: decoded from the front
 * of its body (*skip: its length). Only a token with "caller" may name
 * one; a daemon or an open peer is trusted anyway and gains nothing by
 * it. 0, STRATA_EBADMSG or -EACCES (logged). */
static int take_caller(struct conn *c, const struct rpc_msg *m, struct net_caller *caller,
		       size_t *skip)
{
	const struct net_ident *id = conn_ident(c);
	struct rbuf r;
	int rc;

	rbuf_init(&r, m->body, m->hdr.body_len);
	rc = net_caller_decode(&r, caller);
	if (rc) {
		log_warn("net", "malformed caller in op %u from '%s'", m->hdr.opcode, conn_peer(c));
		return rc;
	}
	if (id->role == NET_ROLE_CLIENT && !(id->claims.flags & TOKEN_F_CALLER)) {
		log_warn("net", "refused op %u from '%s' token %s: it acts for uid %u, and the token "
			 "has no \"caller\"", m->hdr.opcode, conn_peer(c), id->claims.id,
			 caller->uid);
		return -EACCES;
	}
	*skip = r.off;
	return 0;
}

static void on_request(void *ctx, struct conn *c, struct rpc_msg *m)
{
	struct rpc_server *s = ctx;
	struct route *rt = m->hdr.opcode < OP_MAX ? &s->routes[m->hdr.opcode] : NULL;
	struct svc_req *req;
	const struct net_ident *id = conn_ident(c);
	struct net_caller caller;
	size_t skip = 0;
	int rc;

	if (!rt || !rt->fn) {
		conn_reply(c, &m->hdr, STRATA_EBADOP, NULL, 0, NULL, 0, NULL, NULL);
		return;
	}
	/* A token can expire or be revoked while its connection is open. */
	rc = net_ident_check(id);
	if (!rc && ((rt->access == SVC_DAEMON && id->role == NET_ROLE_CLIENT) ||
		    (rt->access == SVC_ADMIN && !net_ident_admin(id))))
		rc = -EACCES;
	if (rc) {
		log_warn("net", "refused op %u from '%s'%s%s: %s", m->hdr.opcode, conn_peer(c),
			 id->role == NET_ROLE_CLIENT ? " token " : "",
			 id->role == NET_ROLE_CLIENT ? id->claims.id : "",
			 rc == -EACCES ? (rt->access == SVC_DAEMON ? "daemons only"
								   : "admin only")
				       : strata_strerror(rc));
		conn_reply(c, &m->hdr, rc, NULL, 0, NULL, 0, NULL, NULL);
		return;
	}
	if (m->hdr.flags & FRAME_F_CALLER) {
		rc = take_caller(c, m, &caller, &skip);
		if (rc) {
			conn_reply(c, &m->hdr, rc, NULL, 0, NULL, 0, NULL, NULL);
			return;
		}
	}
	req = calloc(1, sizeof(*req));
	if (!req || (m->hdr.body_len > skip && !(req->body = malloc(m->hdr.body_len - skip)))) {
		free(req);
		conn_reply(c, &m->hdr, -ENOMEM, NULL, 0, NULL, 0, NULL, NULL);
		return;
	}
	req->hdr = m->hdr;
	req->hdr.body_len -= (uint32_t)skip;
	req->hdr.flags &= ~FRAME_F_CALLER;
	if (skip) {
		req->has_caller = true;
		req->caller = caller;
	}
	if (req->hdr.body_len)
		memcpy(req->body, m->body + skip, req->hdr.body_len);
	req->bulk = m->bulk;
	m->bulk = NULL;
	bbuf_init(&req->reply);
	req->conn = c;
	conn_get(c);
	req->conn_r = conn_reactor(c);
	req->owner = rt->owner ? rt->owner : req->conn_r;
	req->svc = rt->svc;
	req->fn = rt->fn;
	if (req->owner == req->conn_r || reactor_post(req->owner, run_on_owner, req))
		run_on_owner(req);
}

static struct conn_list *list_of(struct rpc_server *s, struct conn *c)
{
	for (int i = 0; i < s->nreactors; i++) {
		if (s->reactors[i] == conn_reactor(c))
			return &s->conns[i];
	}
	return NULL;
}

static void on_accept(void *ctx, struct conn *c)
{
	struct conn_list *l = list_of(ctx, c);

	if (!l)
		return;
	if (l->n == l->cap) {
		int cap = l->cap ? l->cap * 2 : 16;
		struct conn **v = realloc(l->v, (size_t)cap * sizeof(*v));

		if (!v) {
			conn_close(c, "out of memory");
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	conn_get(c);
	l->v[l->n++] = c;
}

static void on_close(void *ctx, struct conn *c)
{
	struct rpc_server *s = ctx;
	struct conn_list *l = list_of(ctx, c);

	if (s->gate)
		net_gate_leave(s->gate, conn_peer_addr(c));
	for (int i = 0; l && i < l->n; i++) {
		if (l->v[i] == c) {
			l->v[i] = l->v[--l->n];
			conn_put(c);
			return;
		}
	}
}

struct shutdown_ctx {
	struct rpc_server *s;
	int idx;
};

static void shutdown_on_thread(void *arg)
{
	struct shutdown_ctx *sc = arg;
	struct conn_list *l = &sc->s->conns[sc->idx];

	if (sc->idx == 0 && sc->s->listener) {
		listener_free(sc->s->listener);
		sc->s->listener = NULL;
	}
	while (l->n > 0)
		conn_close(l->v[l->n - 1], "daemon shutting down");
}

void rpc_server_shutdown(struct rpc_server *s)
{
	for (int i = 0; i < s->nreactors; i++) {
		struct shutdown_ctx sc = { s, i };

		reactor_call(s->reactors[i], shutdown_on_thread, &sc);
	}
}

int rpc_server_new(struct reactor **reactors, int nreactors, uint32_t node_id,
		   struct rpc_server **out)
{
	struct rpc_server *s = calloc(1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->conns = calloc((size_t)nreactors, sizeof(*s->conns));
	if (!s->conns) {
		free(s);
		return -ENOMEM;
	}
	s->h.on_accept = on_accept;
	s->h.on_close = on_close;
	s->reactors = reactors;
	s->nreactors = nreactors;
	s->h.on_request = on_request;
	s->h.ctx = s;
	s->h.node_id = node_id;
	*out = s;
	return 0;
}

void rpc_server_limits_init(struct rpc_server_limits *o, size_t size)
{
	struct rpc_server_limits def = { .size = sizeof(def) };

	memset(o, 0, size);
	memcpy(o, &def, size < sizeof(def) ? size : sizeof(def));
	o->size = size;
}

int rpc_server_set_limits(struct rpc_server *s, const struct rpc_server_limits *lim)
{
	struct rpc_server_limits l;
	struct net_gate_opts go;

	rpc_server_limits_init(&l, sizeof(l));
	memcpy(&l, lim, lim->size < sizeof(l) ? lim->size : sizeof(l));
	s->h.hello_timeout_ms = l.hello_timeout_ms;
	net_gate_free(s->gate);
	s->gate = NULL;
	if (!l.max_conns && !l.max_conns_per_peer)
		return 0;
	net_gate_opts_init(&go, sizeof(go));
	go.max_conns = l.max_conns;
	go.max_per_peer = l.max_conns_per_peer;
	return net_gate_new(&go, &s->gate);
}

/* The listener's admission hook: the caps, with a (rate-limited) line
 * naming the key that refused. */
static int admit(void *ctx, const struct sockaddr_storage *peer)
{
	struct rpc_server *s = ctx;
	char who[64];
	int rc = net_gate_enter(s->gate, peer);

	if (!rc)
		return 0;
	addr_format(peer, who, sizeof(who));
	if (rc == -EUSERS)
		log_warn_limited("net", "refused a connection from '%s': it holds the most "
				 "connections one address may (net.max_conns_per_peer)", who);
	else
		log_warn_limited("net", "refused a connection from '%s': this daemon holds the most "
				 "connections it may (net.max_conns): %s", who, strata_strerror(rc));
	return rc;
}

static void unadmit(void *ctx, const struct sockaddr_storage *peer)
{
	struct rpc_server *s = ctx;

	net_gate_leave(s->gate, peer);
}

void rpc_server_stats_get(struct rpc_server *s, struct rpc_server_stats *out)
{
	struct net_gate_stats gs = { 0 };

	if (s->gate)
		net_gate_stats_get(s->gate, &gs);
	out->conns_held = gs.held;
	out->refused_full = gs.refused_full;
	out->refused_peer = gs.refused_peer;
	out->accept_pauses = s->listener ? listener_pauses(s->listener) : 0;
}

int rpc_server_listen(struct rpc_server *s, const char *addr)
{
	struct listener_opts lo;
	int rc;

	listener_opts_init(&lo, sizeof(lo));
	lo.paused = true;
	if (s->gate) {
		lo.admit = admit;
		lo.unadmit = unadmit;
		lo.ctx = s;
	}
	rc = listener_new_opts(s->reactors, s->nreactors, addr, &s->h, &lo, &s->listener);

	if (rc)
		return rc;
	return listener_port(s->listener);
}

void rpc_server_accept(struct rpc_server *s)
{
	listener_accept(s->listener);
}

void rpc_server_free(struct rpc_server *s)
{
	if (!s)
		return;
	listener_free(s->listener);
	for (int i = 0; i < s->nreactors; i++)
		free(s->conns[i].v);
	free(s->conns);
	net_tls_put(s->tls);
	net_gate_free(s->gate);
	free(s);
}

void rpc_server_route(struct rpc_server *s, uint16_t op, struct reactor *owner,
		      svc_handler_fn fn, void *svc, enum svc_access access)
{
	if (op >= OP_MAX)
		return;
	s->routes[op].fn = fn;
	s->routes[op].svc = svc;
	s->routes[op].owner = owner;
	s->routes[op].access = access;
}

void rpc_server_set_auth(struct rpc_server *s, const struct net_auth *auth)
{
	s->auth = *auth;
	s->h.auth = &s->auth;
}

void rpc_server_set_tls(struct rpc_server *s, struct net_tls *tls)
{
	net_tls_get(tls);
	s->tls = tls;
	s->h.tls = tls;
}

const struct net_ident *svc_req_ident(const struct svc_req *req)
{
	return conn_ident(req->conn);
}

const struct net_caller *svc_req_caller(const struct svc_req *req)
{
	return req->has_caller ? &req->caller : NULL;
}

const char *svc_req_peer(const struct svc_req *req)
{
	return conn_peer(req->conn);
}

bool svc_req_once(const struct svc_req *req, uint32_t bit)
{
	return conn_once(req->conn, bit);
}
