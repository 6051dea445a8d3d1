/*
 * RPC server: a listener over a set of reactors and a table routing each
 * opcode to a handler that runs on the thread owning the service's state.
 *
 * A connection lives on one reactor; a request for a service owned by
 * another reactor is handed over by message (struct svc_req), and the
 * reply travels back the same way. Handlers never block.
 */
#ifndef STRATA_NET_SERVER_H
#define STRATA_NET_SERVER_H

#include <stdint.h>

#include "auth.h"
#include "common/buf.h"
#include "conn.h"
#include "gate.h"
#include "proto.h"

struct rpc_server;

/* One request, owned by the handler until it calls svc_reply*. */
struct svc_req {
	struct frame_hdr hdr;
	uint8_t *body;		/* hdr.body_len bytes, owned by the request */
	void *bulk;		/* abuf of hdr.bulk_len bytes or NULL; a handler
				 * that keeps it sets it to NULL */
	struct bbuf reply;	/* the handler encodes the reply body here */
	/* private */
	struct conn *conn;
	struct reactor *conn_r;
	struct reactor *owner;
	int status;
	const void *rbulk;
	uint64_t rbulk_len;
	void (*rbulk_done)(void *);
	void *rbulk_arg;
	void *svc;
	void (*fn)(void *svc, struct svc_req *req);
	bool has_caller;
	struct net_caller caller;
	uint8_t hold;		/* SVC_UNHELD, SVC_HELD, SVC_HELD_ANSWERED */
	int fail_later;		/* svc_req_unhold before the answer: its status */
};

enum { SVC_UNHELD = 0, SVC_HELD = 1, SVC_HELD_ANSWERED = 2 };

typedef void (*svc_handler_fn)(void *svc, struct svc_req *req);

/* Who may call an operation (the last column of each table in
 * src/proto/): any authenticated peer (the service then checks what the
 * peer's token reaches), daemons only, or daemons and admin tokens. A
 * peer below the level is answered -EACCES before the handler runs. */
enum svc_access {
	SVC_ANY = 0,
	SVC_DAEMON = 1,
	SVC_ADMIN = 2,
};

int rpc_server_new(struct reactor **reactors, int nreactors, uint32_t node_id,
		   struct rpc_server **out);
/* Limits on the connections a server holds (net.* keys of stratad). */
struct rpc_server_limits {
	size_t size;
	uint32_t max_conns;		/* in all (0: no cap) */
	uint32_t max_conns_per_peer;	/* from one IP address (0: no cap) */
	uint32_t hello_timeout_ms;	/* HELLO (and AUTH) due after accept (0: none) */
};
/* Defaults: no caps, no HELLO deadline. */
void rpc_server_limits_init(struct rpc_server_limits *o, size_t size);
/* Applies lim to the connections accepted from now on. Before listening.
 * Returns 0 or -ENOMEM. */
int rpc_server_set_limits(struct rpc_server *s, const struct rpc_server_limits *lim);
/* Connections refused by the caps, and accept pauses (EMFILE and the
 * like), for metrics. */
struct rpc_server_stats {
	uint64_t conns_held, refused_full, refused_peer, accept_pauses;
};
void rpc_server_stats_get(struct rpc_server *s, struct rpc_server_stats *out);

/* Listens on addr ("host:port", port 0 = any): bound, so the port is
 * known, but accepting only from rpc_server_accept(), once the routes are
 * set (a connection meanwhile waits in the backlog instead of getting
 * "unknown operation" for a service still starting). Returns the port
 * (> 0) or a negative error. */
int rpc_server_listen(struct rpc_server *s, const char *addr);
/* Starts accepting (the reactors running; not on a reactor's thread). */
void rpc_server_accept(struct rpc_server *s);
/* Stops accepting and closes every accepted connection, on each reactor's
 * thread (reactors must be running). After it no request arrives. */
void rpc_server_shutdown(struct rpc_server *s);
/* Frees the server (after rpc_server_shutdown). */
void rpc_server_free(struct rpc_server *s);
/* Routes op to fn(svc, req), run on owner's thread, for peers allowed
 * by access. */
void rpc_server_route(struct rpc_server *s, uint16_t op, struct reactor *owner,
		      svc_handler_fn fn, void *svc, enum svc_access access);
/* The credential peers must prove (auth.h; copied). Before listening. */
void rpc_server_set_auth(struct rpc_server *s, const struct net_auth *auth);
/* Every connection accepted must speak TLS with this server context
 * (tls.h; a reference is taken). Before listening, once. */
void rpc_server_set_tls(struct rpc_server *s, struct net_tls *tls);
/* Who sent req (valid until its reply). */
const struct net_ident *svc_req_ident(const struct svc_req *req);
/* The address of req's peer, for logs (valid until its reply). */
const char *svc_req_peer(const struct svc_req *req);
/* The caller a client acts for in this request (FRAME_F_CALLER, auth.h),
 * or NULL: the server checked that the peer's token allows it and took
 * it off the body. */
const struct net_caller *svc_req_caller(const struct svc_req *req);
/* Whether bit (SVC_ONCE_*) is set on req's connection for the first time:
 * what a service does once per connection (a warning, not one per
 * request). Any thread. */
#define SVC_ONCE_CAP 1u		/* storage: a chunk capability was refused */
bool svc_req_once(const struct svc_req *req, uint32_t bit);

/* Moves req to owner's thread and runs fn(svc, req) there; its reply then
 * leaves from that thread. Call on the thread req is on (its handler). */
void svc_handoff(struct svc_req *req, struct reactor *owner, svc_handler_fn fn, void *svc);
/* The reactor whose thread handles req (and must send its reply). */
struct reactor *svc_req_owner(const struct svc_req *req);

/*
 * Holds req's reply: from now on a svc_reply* on req only records the
 * answer, and svc_req_unhold sends it (the meta service's group commit
 * answers once the transaction holding the request's changes commits).
 * The body is copied at the svc_reply*; a bulk must stay valid until its
 * done runs, as always. Owner thread only.
 */
void svc_req_hold(struct svc_req *req);
/*
 * Ends the hold of req. When its answer was recorded it is sent now, with
 * status fail instead (and no body) when fail is non-zero and the answer
 * was a success, and true is returned: req is then freed, do not touch it.
 * Otherwise false: the next svc_reply* sends at once, turned into fail the
 * same way (the handler is still at work on a request whose changes were
 * undone).
 */
bool svc_req_unhold(struct svc_req *req, int fail);
/* Whether req is held with its answer recorded. Owner thread only. */
bool svc_req_answered(const struct svc_req *req);
/*
 * Forgets the answer recorded for held req and runs its handler again, on
 * this (the owner's) thread, from the same request body: for a request
 * whose changes were rolled back with others' (group commit) and that may
 * be made again as if it had just arrived. req is no longer held; the
 * handler answers it as usual. false, and nothing done, when no answer is
 * recorded or the handler took the request's bulk (req->bulk).
 */
bool svc_req_rerun(struct svc_req *req);

/* Answers req with status and the body in req->reply; frees req. Must be
 * called on the owner thread (the one the handler ran on). */
void svc_reply(struct svc_req *req, int status);
/* Same with bulk data; done(arg) runs when the bulk is no longer needed,
 * possibly on another thread. */
void svc_reply_bulk(struct svc_req *req, int status, const void *bulk, uint64_t len,
		    void (*done)(void *), void *arg);

#endif
