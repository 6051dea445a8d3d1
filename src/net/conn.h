/*
 * A framed connection owned by one reactor thread. Both ends may send
 * requests and answer them: requests are pipelined and complete out of
 * order, matched by request id; every request has a timeout.
 *
 * Bulk data of a response is received straight into the buffer the caller
 * named in its call; bulk data of an incoming request lands in an aligned
 * buffer (abuf) that the handler may take over.
 *
 * Every function here must be called on the connection's reactor thread.
 * Addresses are in addr.h, the listener that accepts connections in
 * listener.h.
 */
#ifndef STRATA_NET_CONN_H
#define STRATA_NET_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "addr.h"
#include "auth.h"
#include "frame.h"
#include "reactor.h"
#include "tls.h"

struct conn;

/* A received frame, valid during the callback that receives it. */
struct rpc_msg {
	struct frame_hdr hdr;
	const uint8_t *body;	/* hdr.body_len bytes */
	/* Request: an abuf of hdr.bulk_len bytes owned by the connection;
	 * a handler that keeps it sets bulk to NULL and frees it with
	 * abuf_free. Response: the caller's bulk_dst (or NULL). */
	void *bulk;
};

/* status: a transport error (-ETIMEDOUT, -ECONNRESET, -ENOTCONN, ...) with
 * resp == NULL, or the response's hdr.status with resp set. Called exactly
 * once per accepted call, never from inside conn_call, and only once the
 * connection no longer reads the call's bulk. */
typedef void (*rpc_cb)(void *arg, int status, struct rpc_msg *resp);

/*
 * An rpc_call_args flag that stays on this side (never on the wire): a
 * call that fails before any byte of it was written (its connection
 * closed with it still queued or held for the HELLO exchange, or it timed
 * out there) fails with -ENOTCONN instead of -ECONNRESET or -ETIMEDOUT.
 * The peer never saw it, so the caller may make it again, elsewhere too,
 * even when it is not idempotent. A refused connection (-ECONNREFUSED)
 * and a failed exchange's own error (a refused credential, TLS) are
 * reported as they are.
 */
#define CONN_CALL_F_NOTCONN_UNSENT (1u << 16)

struct rpc_call_args {
	uint16_t op;
	const void *body;	/* copied */
	uint32_t body_len;
	const void *bulk;	/* not copied: valid until the callback */
	uint64_t bulk_len;
	void *bulk_dst;		/* where the response's bulk lands */
	uint64_t bulk_cap;	/* a larger response bulk fails the call */
	uint32_t timeout_ms;	/* 0 = the connection's default */
	uint32_t flags;		/* FRAME_F_CALLER (body starts with one), CONN_CALL_F_* */
	rpc_cb cb;
	void *arg;
};

struct conn_handler {
	/* An incoming request (after HELLO). Reply with conn_reply, now or
	 * later (hold a conn_get reference while the reply is pending). */
	void (*on_request)(void *ctx, struct conn *c, struct rpc_msg *m);
	/* Optional: the connection closed (after its calls failed). */
	void (*on_close)(void *ctx, struct conn *c);
	/* Optional: an accepted connection is set up (on its thread). */
	void (*on_accept)(void *ctx, struct conn *c);
	void *ctx;
	uint32_t node_id;	/* told to peers in HELLO */
	/* Accepting side: the credential peers must prove (auth.h); NULL
	 * or no key: every peer is trusted. Must outlive the connections. */
	const struct net_auth *auth;
	/* Accepting side: a server TLS context (tls.h); peers must open
	 * with a TLS handshake, and one that sends a plain HELLO is refused
	 * with STRATA_ETLSREQ. NULL: plain TCP. Must outlive the
	 * connections. */
	const struct net_tls *tls;
	/* Accepting side: a peer that has not said HELLO (and, with a key,
	 * passed AUTH) this many ms after the accept is closed, so idle
	 * sockets cannot hold a daemon's descriptors. 0: no limit. */
	uint32_t hello_timeout_ms;
};

/* Wraps an accepted socket; the peer must send HELLO first. The
 * connection owns fd. The returned conn has no reference for the caller:
 * it lives until it closes. */
int conn_accept(struct reactor *r, int fd, const struct conn_handler *h, struct conn **out);
/*
 * Connects to addr ("host:port") without blocking and sends HELLO; calls
 * made before the connection is up are queued (and time out as usual).
 * The caller holds one reference (conn_put when done). h may be NULL (no
 * incoming requests). cred (copied; NULL: none) is what the connection
 * presents: with one, calls wait until the server has proved the same
 * secret and accepted ours, and fail with the refusal's status
 * (STRATA_ENOCRED, -EKEYREJECTED, -EKEYEXPIRED, -EKEYREVOKED) if it is
 * refused.
 *
 * tls (a client context; NULL: plain TCP) wraps the connection in TLS:
 * the handshake runs on the loop, HELLO waits for it, and the server's
 * certificate must chain to the context's CA and name addr's host (or
 * IP). A failed handshake fails the calls with STRATA_ETLS; a TLS server
 * reached without tls refuses HELLO with STRATA_ETLSREQ.
 *
 * Name resolution never runs on the loop: an IP literal is parsed here
 * (addr_parse_numeric); a name ("localhost", "storage-3") is looked up
 * with getaddrinfo on r's helper thread (reactor_offload), and the
 * connect starts when the answer is back on the loop. A name that does
 * not resolve fails the queued calls with -EHOSTUNREACH. Returns 0, or
 * -EINVAL for a malformed addr, or -ENOMEM.
 */
int conn_connect(struct reactor *r, const char *addr, const struct conn_handler *h,
		 const struct net_cred *cred, const struct net_tls *tls,
		 uint32_t default_timeout_ms, struct conn **out);

void conn_get(struct conn *c);
void conn_put(struct conn *c);
/* Closes the connection; pending calls fail with -ECONNRESET. */
void conn_close(struct conn *c, const char *why);
bool conn_is_open(const struct conn *c);
/* Who the peer of an accepted connection proved to be (after HELLO and
 * AUTH; requests are only delivered after both). A connection we opened
 * answers NET_ROLE_OPEN. */
const struct net_ident *conn_ident(const struct conn *c);
const char *conn_peer(const struct conn *c);
/* The peer's socket address of an accepted connection (family AF_UNSPEC
 * when unknown); valid for the connection's life, after close too. */
const struct sockaddr_storage *conn_peer_addr(const struct conn *c);
struct reactor *conn_reactor(const struct conn *c);
void conn_set_user(struct conn *c, void *user);
void *conn_user(const struct conn *c);
/* Whether bit is set on c for the first time (then sets it): something
 * done once per connection, such as a warning. Any thread. */
bool conn_once(struct conn *c, uint32_t bit);

/* Sends a request. Returns 0 (cb will run) or a negative error (it won't). */
int conn_call(struct conn *c, const struct rpc_call_args *a);

/* Answers request req (its header) with status, a body (copied) and bulk
 * (not copied: bulk_done(bulk_arg) runs once the connection no longer
 * needs it, also when the reply is dropped). Returns 0 or -ENOTCONN when
 * the connection is closed (bulk_done has then already run). */
int conn_reply(struct conn *c, const struct frame_hdr *req, int status, const void *body,
	       uint32_t body_len, const void *bulk, uint64_t bulk_len,
	       void (*bulk_done)(void *), void *bulk_arg);

/* Counters for metrics (monotonic, per process). */
struct net_stats {
	uint64_t frames_in, frames_out, bytes_in, bytes_out, bad_frames, conns_accepted;
	/* TLS handshakes done, and how many of those connections the kernel
	 * encrypts (kTLS send) and decrypts (kTLS receive). */
	uint64_t tls_conns, ktls_tx_conns, ktls_rx_conns;
	/* Accepted connections closed for want of HELLO in time. */
	uint64_t hello_timeouts;
};
void net_stats_get(struct net_stats *out);

#endif
