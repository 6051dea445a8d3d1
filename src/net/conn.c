/* Framed, pipelined connections over TCP on a reactor. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "addr.h"
#include "auth.h"
#include "codec.h"
#include "common/buf.h"
#include "common/log.h"
#include "conn.h"
#include "proto.h"
#include "strata/errors.h"

#define RBUF_CAP (256u * 1024u)
#define DIRECT_BULK_MIN (16u * 1024u)
#define HDR_READ 512u
#define PENDING_BUCKETS 1024u
#define MAX_IOV 64
#define DEFAULT_TIMEOUT_MS 10000u

enum rstate { RS_HDR, RS_BODY, RS_BULK };

struct rpc_req;

struct out_frame {
	struct out_frame *next;
	uint8_t hdr[FRAME_HDR_LEN];
	struct bbuf body;
	const void *bulk;
	uint64_t bulk_len;
	uint64_t sent;
	bool cancelled;
	struct rpc_req *req;		/* outgoing request, or NULL */
	void (*bulk_done)(void *);	/* replies: release the bulk */
	void *bulk_arg;
};

struct rpc_req {
	struct rpc_req *next;		/* pending bucket / free list */
	uint64_t id;
	rpc_cb cb;
	void *arg;
	void *bulk_dst;
	uint64_t bulk_cap;
	struct reactor_timer timer;
	struct conn *conn;
	struct out_frame *frame;	/* while queued */
	bool pending;			/* in the hash, awaiting a response */
	bool timed_out;
	bool internal;			/* HELLO or AUTH: passes the gate */
	bool notconn_unsent;		/* CONN_CALL_F_NOTCONN_UNSENT */
	bool unsent;			/* teardown: no byte of it was written */
};

_Static_assert((CONN_CALL_F_NOTCONN_UNSENT & FRAME_F_KNOWN) == 0,
	       "a local call flag collides with a frame flag");

static struct {
	uint64_t frames_in, frames_out, bytes_in, bytes_out, bad_frames, conns_accepted;
	uint64_t tls_conns, ktls_tx_conns, ktls_rx_conns, hello_timeouts;
} g_stats;

struct conn {
	struct reactor *r;
	struct reactor_watch watch;
	int fd;
	int refs;
	bool open;
	bool connecting;	/* no socket yet (name lookup), or connect in progress */
	bool is_server;
	bool hello_done;
	int close_err;		/* what pending calls fail with */
	bool close_when_flushed;	/* a refusal: close once it is written */

	/* authentication (auth.h) */
	struct net_cred cred;		/* client: what we present */
	struct net_ident *ident;	/* server: who the peer proved to be */
	uint8_t nc[AUTH_NONCE_LEN];	/* client: our nonce */
	uint8_t expect[32];		/* server: the client proof we expect */
	bool await_auth;		/* server: the next frame must be AUTH */
	bool gated;			/* client: requests wait for the exchange */
	struct out_frame *held_head, **held_tail;

	/* TLS (tls.h). NULL: plain TCP, exactly as without TLS. */
	SSL *ssl;
	bool tls_hs;		/* handshake not done: frames wait */
	bool tls_hs_write;	/* the handshake waits to write, not to read */
	bool tls_peeked;	/* server: the first byte was a TLS record */
	bool plain_on_tls;	/* server: a plain client on a TLS port */
	bool ktls_tx, ktls_rx;	/* the kernel encrypts / decrypts */
	bool tls_wpend;		/* OpenSSL holds a record of queued bytes */
	char peer[64];
	struct sockaddr_storage peer_ss;	/* accepted: the peer's address */
	struct reactor_timer hello_timer;	/* accepted: HELLO due */
	struct conn_handler h;
	bool has_handler;
	void *user;
	uint32_t default_timeout_ms;
	uint32_t once;			/* conn_once's bits (atomic: handlers of
					 * its requests run on other reactors) */

	/* read side */
	uint8_t *rbuf;
	size_t rlen, roff;
	enum rstate rstate;
	struct frame_hdr cur;
	struct bbuf body;
	uint8_t *bulk;		/* destination of the current frame's bulk */
	bool bulk_owned;	/* an abuf we allocated (incoming request) */
	bool bulk_discard;	/* read into scratch and drop */
	struct rpc_req *bulk_req;	/* response: the matched request */
	int bulk_req_status;
	uint64_t bulk_got;
	int lowat;		/* SO_RCVLOWAT now set; 0 = the default (1) */
	bool big_bulk;		/* the last frame's bulk went straight to its buffer */

	/* write side */
	struct out_frame *out_head, **out_tail;
	struct out_frame *frame_free;

	/* outgoing requests */
	uint64_t next_id;
	struct rpc_req *buckets[PENDING_BUCKETS];
	struct rpc_req *req_free;
	uint32_t npending;
};

void net_stats_get(struct net_stats *out)
{
	out->frames_in = __atomic_load_n(&g_stats.frames_in, __ATOMIC_RELAXED);
	out->frames_out = __atomic_load_n(&g_stats.frames_out, __ATOMIC_RELAXED);
	out->bytes_in = __atomic_load_n(&g_stats.bytes_in, __ATOMIC_RELAXED);
	out->bytes_out = __atomic_load_n(&g_stats.bytes_out, __ATOMIC_RELAXED);
	out->bad_frames = __atomic_load_n(&g_stats.bad_frames, __ATOMIC_RELAXED);
	out->conns_accepted = __atomic_load_n(&g_stats.conns_accepted, __ATOMIC_RELAXED);
	out->tls_conns = __atomic_load_n(&g_stats.tls_conns, __ATOMIC_RELAXED);
	out->ktls_tx_conns = __atomic_load_n(&g_stats.ktls_tx_conns, __ATOMIC_RELAXED);
	out->ktls_rx_conns = __atomic_load_n(&g_stats.ktls_rx_conns, __ATOMIC_RELAXED);
	out->hello_timeouts = __atomic_load_n(&g_stats.hello_timeouts, __ATOMIC_RELAXED);
}

#define STAT_ADD(f, v) __atomic_fetch_add(&g_stats.f, (v), __ATOMIC_RELAXED)

static void conn_on_event(void *arg, uint32_t events);

void conn_get(struct conn *c) { c->refs++; }

static void conn_destroy(void *arg)
{
	struct conn *c = arg;

	while (c->frame_free) {
		struct out_frame *f = c->frame_free;

		c->frame_free = f->next;
		bbuf_release(&f->body);
		free(f);
	}
	while (c->req_free) {
		struct rpc_req *q = c->req_free;

		c->req_free = q->next;
		free(q);
	}
	bbuf_release(&c->body);
	SSL_free(c->ssl);
	net_cred_release(&c->cred);
	free(c->ident);
	free(c->rbuf);
	free(c);
}

void conn_put(struct conn *c)
{
	if (--c->refs == 0)
		reactor_defer(c->r, conn_destroy, c);
}

bool conn_is_open(const struct conn *c) { return c->open; }

const struct net_ident *conn_ident(const struct conn *c)
{
	static const struct net_ident open_ident = { .role = NET_ROLE_OPEN };

	return c->ident ? c->ident : &open_ident;
}
const char *conn_peer(const struct conn *c) { return c->peer; }
const struct sockaddr_storage *conn_peer_addr(const struct conn *c) { return &c->peer_ss; }
struct reactor *conn_reactor(const struct conn *c) { return c->r; }
void conn_set_user(struct conn *c, void *user) { c->user = user; }
void *conn_user(const struct conn *c) { return c->user; }

bool conn_once(struct conn *c, uint32_t bit)
{
	return !(__atomic_fetch_or(&c->once, bit, __ATOMIC_RELAXED) & bit);
}

/* ---- request bookkeeping ---- */

static struct rpc_req **bucket_of(struct conn *c, uint64_t id)
{
	return &c->buckets[id & (PENDING_BUCKETS - 1)];
}

static void pending_remove(struct conn *c, struct rpc_req *q)
{
	struct rpc_req **pp = bucket_of(c, q->id);

	for (; *pp; pp = &(*pp)->next) {
		if (*pp == q) {
			*pp = q->next;
			q->pending = false;
			c->npending--;
			return;
		}
	}
}

static struct rpc_req *pending_find(struct conn *c, uint64_t id)
{
	for (struct rpc_req *q = *bucket_of(c, id); q; q = q->next) {
		if (q->id == id)
			return q;
	}
	return NULL;
}

static void req_recycle(struct conn *c, struct rpc_req *q)
{
	reactor_timer_cancel(c->r, &q->timer);
	q->next = c->req_free;
	c->req_free = q;
}

/* Completes q: removes it everywhere and runs the callback once. */
static void req_complete(struct conn *c, struct rpc_req *q, int status, struct rpc_msg *m)
{
	rpc_cb cb = q->cb;
	void *arg = q->arg;

	if (q->pending)
		pending_remove(c, q);
	req_recycle(c, q);
	if (cb)
		cb(arg, status, m);
}

static void req_timeout(void *arg)
{
	struct rpc_req *q = arg;
	struct conn *c = q->conn;
	struct out_frame *f = q->frame;

	/* While OpenSSL holds a record of queued bytes, a retried write must
	 * offer the same bytes again: no queued frame may vanish then. */
	if (f && (f->sent > 0 || c->tls_wpend)) {
		/* Being written: the socket still reads its bulk. Complete
		 * once the frame is out (frame_finish). */
		q->timed_out = true;
		if (q->pending)
			pending_remove(c, q);
		return;
	}
	if (f) {
		/* Queued and not started (also while the peer's name is
		 * resolved or the connect is in progress): it is never
		 * written now, so the caller gets its buffer back at once. */
		f->cancelled = true;
		f->req = NULL;
		q->frame = NULL;
	}
	req_complete(c, q, f && q->notconn_unsent ? -ENOTCONN : -ETIMEDOUT, NULL);
}

/* ---- write side ---- */

static struct out_frame *frame_get(struct conn *c)
{
	struct out_frame *f = c->frame_free;

	if (f) {
		c->frame_free = f->next;
	} else {
		f = calloc(1, sizeof(*f));
		if (!f)
			return NULL;
		bbuf_init(&f->body);
	}
	f->next = NULL;
	f->body.len = 0;
	f->bulk = NULL;
	f->bulk_len = 0;
	f->sent = 0;
	f->cancelled = false;
	f->req = NULL;
	f->bulk_done = NULL;
	f->bulk_arg = NULL;
	return f;
}

/* A frame left the queue: written (status 0) or dropped. */
static void frame_finish(struct conn *c, struct out_frame *f)
{
	struct rpc_req *q = f->req;

	if (f->bulk_done)
		f->bulk_done(f->bulk_arg);
	if (f->body.cap > 64 * 1024)
		bbuf_release(&f->body);
	f->next = c->frame_free;
	c->frame_free = f;
	if (q) {
		q->frame = NULL;
		if (q->timed_out)
			req_complete(c, q, -ETIMEDOUT, NULL);
	}
}

static void conn_fail(struct conn *c, const char *why);

static void update_interest(struct conn *c)
{
	uint32_t ev = EPOLLIN;

	if (c->fd < 0)
		return;	/* no socket yet: connect_start sets the interest */
	/* A TLS handshake writes when it says so; frames wait for it. */
	if (c->connecting || (c->tls_hs ? c->tls_hs_write : c->out_head != NULL))
		ev |= EPOLLOUT;
	if (c->open && reactor_watch_mod(c->r, &c->watch, ev) < 0)
		conn_fail(c, "epoll_ctl failed");
}

/*
 * TLS without kTLS: SSL_write_ex of each segment, small ones gathered
 * into one record. Returns what sendmsg would: bytes written, or -1 with
 * errno (EAGAIN: the socket is full).
 */
#define TLS_GATHER (16u * 1024u)

static ssize_t tls_writev(struct conn *c, const struct iovec *iov, int n)
{
	static __thread uint8_t gather[TLS_GATHER];
	size_t total = 0;

	for (int i = 0; i < n;) {
		const uint8_t *p = iov[i].iov_base;
		size_t len = iov[i].iov_len, off = 0;
		int e;

		if (len < TLS_GATHER && i + 1 < n && len + iov[i + 1].iov_len <= TLS_GATHER) {
			/* A header and a small body (or several small frames)
			 * in one record rather than one each. */
			len = 0;
			while (i < n && len + iov[i].iov_len <= TLS_GATHER) {
				memcpy(gather + len, iov[i].iov_base, iov[i].iov_len);
				len += iov[i].iov_len;
				i++;
			}
			p = gather;
		} else {
			i++;
		}
		while (off < len) {
			size_t w = 0;

			ERR_clear_error();
			if (SSL_write_ex(c->ssl, p + off, len - off, &w) == 1) {
				c->tls_wpend = false;
				off += w;
				total += w;
				continue;
			}
			e = SSL_get_error(c->ssl, 0);
			if (e == SSL_ERROR_WANT_WRITE || e == SSL_ERROR_WANT_READ) {
				/* OpenSSL may keep a record of these bytes:
				 * they are offered again on the retry. */
				c->tls_wpend = true;
				errno = EAGAIN;
			} else {
				if (e != SSL_ERROR_SYSCALL || !errno)
					errno = EPROTO;
				log_warn("net", "TLS write to '%s' failed: %s", c->peer,
					 ERR_reason_error_string(ERR_peek_error()) ?: strerror(errno));
			}
			return total ? (ssize_t)total : -1;
		}
	}
	return (ssize_t)total;
}

static ssize_t conn_writev(struct conn *c, struct iovec *iov, int n)
{
	if (c->ssl && !c->ktls_tx)
		return tls_writev(c, iov, n);
	/* Plain TCP, or kTLS: the kernel encrypts on the way out. */
	return sendmsg(c->fd, &(struct msghdr){ .msg_iov = iov, .msg_iovlen = (size_t)n },
		       MSG_NOSIGNAL);
}

static void flush_out(struct conn *c)
{
	while (c->out_head && c->open && !c->connecting && !c->tls_hs) {
		struct iovec iov[MAX_IOV];
		int n = 0;
		ssize_t w;

		/* Drop cancelled frames that have not started. */
		while (c->out_head && c->out_head->cancelled && c->out_head->sent == 0 &&
		       !c->tls_wpend) {
			struct out_frame *f = c->out_head;

			c->out_head = f->next;
			if (!c->out_head)
				c->out_tail = &c->out_head;
			frame_finish(c, f);
		}
		for (struct out_frame *f = c->out_head; f && n < MAX_IOV - 3; f = f->next) {
			uint64_t skip = f->sent;
			const struct { const void *p; uint64_t len; } seg[3] = {
				{ f->hdr, FRAME_HDR_LEN }, { f->body.buf, f->body.len },
				{ f->bulk, f->bulk_len },
			};

			if (f->cancelled && f->sent == 0)
				break;
			for (int s = 0; s < 3; s++) {
				if (skip >= seg[s].len) {
					skip -= seg[s].len;
					continue;
				}
				iov[n].iov_base = (uint8_t *)seg[s].p + skip;
				iov[n].iov_len = seg[s].len - skip;
				skip = 0;
				n++;
			}
		}
		if (n == 0)
			break;
		/* Never SIGPIPE: libstrata lives in other people's processes. */
		w = conn_writev(c, iov, n);
		if (w < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			conn_fail(c, strerror(errno));
			return;
		}
		STAT_ADD(bytes_out, (uint64_t)w);
		while (w > 0 && c->out_head) {
			struct out_frame *f = c->out_head;
			uint64_t total = FRAME_HDR_LEN + f->body.len + f->bulk_len;
			uint64_t take = total - f->sent;

			if ((uint64_t)w < take) {
				f->sent += (uint64_t)w;
				w = 0;
				break;
			}
			w -= (ssize_t)take;
			c->out_head = f->next;
			if (!c->out_head)
				c->out_tail = &c->out_head;
			STAT_ADD(frames_out, 1);
			frame_finish(c, f);
		}
	}
	if (c->open && c->close_when_flushed && !c->out_head) {
		conn_close(c, "credential refused");
		return;
	}
	if (c->open)
		update_interest(c);
}

static void enqueue(struct conn *c, struct out_frame *f)
{
	bool was_empty = c->out_head == NULL;

	if (c->gated && !(f->req && f->req->internal)) {
		/* Held until the server proved itself and saw our proof. */
		*c->held_tail = f;
		c->held_tail = &f->next;
		return;
	}

	*c->out_tail = f;
	c->out_tail = &f->next;
	/* Write at once when nothing is ahead of us: lowest latency. */
	if (was_empty && !c->connecting)
		flush_out(c);
	else if (was_empty)
		update_interest(c);
}

static void fill_hdr(struct out_frame *f, uint16_t op, uint32_t flags, int status, uint64_t id)
{
	struct frame_hdr h = {
		.magic = FRAME_MAGIC, .version = STRATA_PROTO_VERSION, .opcode = op,
		.flags = flags, .status = status, .req_id = id,
		.body_len = (uint32_t)f->body.len, .reserved = 0, .bulk_len = f->bulk_len,
	};

	frame_hdr_encode(&h, f->hdr);
}

static int queue_call(struct conn *c, const struct rpc_call_args *a, bool internal)
{
	struct out_frame *f;
	struct rpc_req *q;

	if (!c->open)
		return -ENOTCONN;
	if (a->body_len > FRAME_MAX_BODY || a->bulk_len > FRAME_MAX_BULK)
		return -EMSGSIZE;
	f = frame_get(c);
	if (!f)
		return -ENOMEM;
	q = c->req_free;
	if (q) {
		c->req_free = q->next;
	} else {
		q = calloc(1, sizeof(*q));
		if (!q) {
			f->next = c->frame_free;
			c->frame_free = f;
			return -ENOMEM;
		}
	}
	if (bbuf_append(&f->body, a->body, a->body_len)) {
		free(q);
		f->next = c->frame_free;
		c->frame_free = f;
		return -ENOMEM;
	}
	q->id = ++c->next_id;
	q->cb = a->cb;
	q->arg = a->arg;
	q->bulk_dst = a->bulk_dst;
	q->bulk_cap = a->bulk_dst ? a->bulk_cap : 0;
	q->conn = c;
	q->frame = f;
	q->timed_out = false;
	q->internal = internal;
	q->notconn_unsent = (a->flags & CONN_CALL_F_NOTCONN_UNSENT) != 0;
	q->unsent = false;
	reactor_timer_init(&q->timer, req_timeout, q);
	q->next = *bucket_of(c, q->id);
	*bucket_of(c, q->id) = q;
	q->pending = true;
	c->npending++;
	reactor_timer_arm(c->r, &q->timer, a->timeout_ms ? a->timeout_ms : c->default_timeout_ms);

	f->bulk = a->bulk;
	f->bulk_len = a->bulk_len;
	f->req = q;
	fill_hdr(f, a->op, a->flags & FRAME_F_CALLER, 0, q->id);
	enqueue(c, f);
	return 0;
}

int conn_call(struct conn *c, const struct rpc_call_args *a)
{
	return queue_call(c, a, false);
}

int conn_reply(struct conn *c, const struct frame_hdr *req, int status, const void *body,
	       uint32_t body_len, const void *bulk, uint64_t bulk_len,
	       void (*bulk_done)(void *), void *bulk_arg)
{
	struct out_frame *f;

	if (!c->open || body_len > FRAME_MAX_BODY || bulk_len > FRAME_MAX_BULK) {
		if (bulk_done)
			bulk_done(bulk_arg);
		return c->open ? -EMSGSIZE : -ENOTCONN;
	}
	f = frame_get(c);
	if (!f || bbuf_append(&f->body, body, body_len)) {
		if (f) {
			f->next = c->frame_free;
			c->frame_free = f;
		}
		if (bulk_done)
			bulk_done(bulk_arg);
		return -ENOMEM;
	}
	f->bulk = bulk;
	f->bulk_len = bulk_len;
	f->bulk_done = bulk_done;
	f->bulk_arg = bulk_arg;
	fill_hdr(f, req->opcode, FRAME_F_RESPONSE, status, req->req_id);
	enqueue(c, f);
	return 0;
}

/* ---- close ---- */

static void conn_teardown(struct conn *c)
{
	conn_get(c);
	reactor_timer_cancel(c->r, &c->hello_timer);
	reactor_watch_del(c->r, &c->watch);
	if (c->ssl) {
		/* close_notify, if it fits now; the peer takes a bare close
		 * as the end too. */
		if (!c->tls_hs && !c->tls_wpend && c->fd >= 0) {
			ERR_clear_error();
			SSL_shutdown(c->ssl);
			ERR_clear_error();
		}
		SSL_free(c->ssl);
		c->ssl = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->bulk_owned)
		abuf_free(c->bulk);
	c->bulk = NULL;
	c->bulk_owned = false;
	/* Which calls never had a byte written (CONN_CALL_F_NOTCONN_UNSENT):
	 * those held for the exchange, and queued ones not started (none
	 * while OpenSSL holds a record: it may hold any of them). */
	for (struct out_frame *f = c->out_head; f; f = f->next)
		if (f->req && f->sent == 0 && !c->tls_wpend)
			f->req->unsent = true;
	for (struct out_frame *f = c->held_head; f; f = f->next)
		if (f->req)
			f->req->unsent = true;
	/* Drop queued frames first: a timed-out request completes there. */
	while (c->out_head) {
		struct out_frame *f = c->out_head;

		c->out_head = f->next;
		frame_finish(c, f);
	}
	c->out_tail = &c->out_head;
	while (c->held_head) {
		struct out_frame *f = c->held_head;

		c->held_head = f->next;
		frame_finish(c, f);
	}
	c->held_tail = &c->held_head;
	for (uint32_t b = 0; b < PENDING_BUCKETS; b++) {
		while (c->buckets[b]) {
			struct rpc_req *q = c->buckets[b];
			int st = c->close_err ? c->close_err : -ECONNRESET;

			if (q->notconn_unsent && q->unsent && (st == -ECONNRESET || st == -EPIPE))
				st = -ENOTCONN;
			req_complete(c, q, st, NULL);
		}
	}
	if (c->has_handler && c->h.on_close)
		c->h.on_close(c->h.ctx, c);
	conn_put(c);	/* the reference of being open */
	conn_put(c);
}

void conn_close(struct conn *c, const char *why)
{
	if (!c->open)
		return;
	log_debug("net", "closing connection to '%s': %s", c->peer, why);
	c->open = false;
	conn_teardown(c);
}

static void conn_fail(struct conn *c, const char *why)
{
	if (!c->open)
		return;
	/* A refused connect is the caller's to report (its calls fail with
	 * the error); a dead peer would otherwise flood the log. */
	if (c->connecting)
		log_debug("net", "cannot connect to '%s': %s", c->peer, why);
	else
		log_warn("net", "connection '%s' closed: %s", c->peer, why);
	c->open = false;
	conn_teardown(c);
}

static void conn_bad_frame(struct conn *c, const char *why)
{
	STAT_ADD(bad_frames, 1);
	if (!c->open)
		return;
	log_warn_limited("net", "malformed frame from '%s': %s; closing the connection", c->peer, why);
	c->open = false;
	conn_teardown(c);
}

/* ---- read side ---- */

/* A refusal: answer status, log why, close once the answer is out. */
static void refuse(struct conn *c, const struct frame_hdr *req, int status, const char *why)
{
	log_warn("net", "refused '%s': %s", c->peer, why);
	c->close_when_flushed = true;
	c->await_auth = false;
	conn_reply(c, req, status, NULL, 0, NULL, 0, NULL, NULL);
}

/*
 * HELLO request: magic u32, version u16, role u16, node id u32, the
 * client's nonce (16 bytes), credential kind u8, the token's signed part
 * (bytes; empty unless kind is a token). Reply: magic, version, role, node
 * id, the server's nonce, its proof (32 bytes), flags u8 (HELLO_F_AUTH:
 * send AUTH next). docs/protocol.md has the table.
 */
#define HELLO_F_AUTH 1u

static void handle_hello_request(struct conn *c, struct rpc_msg *m)
{
	const struct net_auth *auth = c->has_handler ? c->h.auth : NULL;
	uint8_t nc[AUTH_NONCE_LEN], ns[AUTH_NONCE_LEN] = { 0 }, proof[32] = { 0 };
	uint8_t secret[TOKEN_SECRET_LEN];
	const uint8_t *sp = NULL;
	struct net_ident id;
	struct rbuf rb;
	struct bbuf out;
	struct wbuf w;
	uint32_t magic, sl;
	uint16_t version;
	uint8_t kind;
	char err[256] = "";
	int rc;

	rbuf_init(&rb, m->body, m->hdr.body_len);
	magic = rb_u32(&rb);
	version = rb_u16(&rb);
	(void)rb_u16(&rb);	/* role: what the credential proves counts */
	(void)rb_u32(&rb);	/* node id */
	rb_raw(&rb, nc, sizeof(nc));
	kind = rb_u8(&rb);
	sl = rb_bytes(&rb, &sp, TOKEN_TEXT_MAX);
	if (rb_finish(&rb) || magic != FRAME_MAGIC || version != STRATA_PROTO_VERSION ||
	    kind > NET_CRED_TOKEN || (kind != NET_CRED_TOKEN && sl)) {
		conn_bad_frame(c, "bad HELLO (magic, protocol version or credential)");
		return;
	}
	c->hello_done = true;
	rc = auth_accept(auth, (enum net_cred_kind)kind, (const char *)sp, sl, &id, secret, err,
			 sizeof(err));
	if (rc) {
		refuse(c, &m->hdr, rc, err);
		return;
	}
	c->ident = malloc(sizeof(*c->ident));
	if (!c->ident) {
		refuse(c, &m->hdr, -ENOMEM, "out of memory");
		return;
	}
	*c->ident = id;
	if (id.role != NET_ROLE_OPEN) {
		auth_nonce(ns);
		auth_proof(secret, "strata-server", nc, ns, proof);
		auth_proof(secret, "strata-client", nc, ns, c->expect);
		c->await_auth = true;
	}
	bbuf_init(&out);
	wbuf_init(&w, &out);
	wb_u32(&w, FRAME_MAGIC);
	wb_u16(&w, STRATA_PROTO_VERSION);
	wb_u16(&w, ROLE_DAEMON);
	wb_u32(&w, c->h.node_id);
	wb_raw(&w, ns, sizeof(ns));
	wb_raw(&w, proof, sizeof(proof));
	wb_u8(&w, c->await_auth ? HELLO_F_AUTH : 0);
	if (w.err)
		refuse(c, &m->hdr, -ENOMEM, "out of memory");
	else
		conn_reply(c, &m->hdr, 0, out.buf, (uint32_t)out.len, NULL, 0, NULL, NULL);
	bbuf_release(&out);
}

/* AUTH request: the client's proof (32 bytes). */
static void handle_auth_request(struct conn *c, struct rpc_msg *m)
{
	c->await_auth = false;
	if (m->hdr.body_len != 32 || !mac_equal(m->body, c->expect, 32)) {
		refuse(c, &m->hdr, -EKEYREJECTED,
		       c->ident->role == NET_ROLE_DAEMON ? "wrong cluster key"
							 : "token not signed with this cluster's key");
		return;
	}
	if (c->ident->role == NET_ROLE_CLIENT)
		log_debug("net", "'%s' authenticated: token %s of tenant '%s'", c->peer,
			  c->ident->claims.id, c->ident->claims.tenant);
	conn_reply(c, &m->hdr, 0, NULL, 0, NULL, 0, NULL, NULL);
}

/* Client: a refused or failed exchange fails every call with its status. */
static void exchange_failed(struct conn *c, int status, const char *what)
{
	if (!c->open)
		return;
	/* A refused credential reaches the caller as its calls' status; the
	 * server logs it. */
	if (status == STRATA_ENOCRED || status == -EKEYEXPIRED || status == -EKEYREVOKED ||
	    status == -ECONNRESET || status == STRATA_ETLSREQ)
		log_debug("net", "%s to '%s' failed: %s", what, c->peer, strata_strerror(status));
	else
		log_warn("net", "%s to '%s' failed: %s", what, c->peer, strata_strerror(status));
	c->close_err = status;
	conn_close(c, what);
}

/* Client: the exchange is done; release the held requests. */
static void ungate(struct conn *c)
{
	struct out_frame *held = c->held_head;

	c->gated = false;
	c->held_head = NULL;
	c->held_tail = &c->held_head;
	if (!held)
		return;
	*c->out_tail = held;
	while (held->next)
		held = held->next;
	c->out_tail = &held->next;
	flush_out(c);
}

static void auth_done_cb(void *arg, int status, struct rpc_msg *resp)
{
	struct conn *c = arg;

	(void)resp;
	if (status)
		exchange_failed(c, status, "AUTH");
}

static void hello_done_cb(void *arg, int status, struct rpc_msg *resp)
{
	struct conn *c = arg;
	uint8_t ns[AUTH_NONCE_LEN], proof[32], want[32];
	struct rbuf rb;
	uint32_t magic;
	uint16_t version;
	uint8_t flags;

	if (status || !resp) {
		exchange_failed(c, status ? status : STRATA_EBADMSG, "HELLO");
		return;
	}
	rbuf_init(&rb, resp->body, resp->hdr.body_len);
	magic = rb_u32(&rb);
	version = rb_u16(&rb);
	(void)rb_u16(&rb);
	(void)rb_u32(&rb);
	rb_raw(&rb, ns, sizeof(ns));
	rb_raw(&rb, proof, sizeof(proof));
	flags = rb_u8(&rb);
	if (rb_finish(&rb) || magic != FRAME_MAGIC || version != STRATA_PROTO_VERSION ||
	    (flags & ~HELLO_F_AUTH)) {
		exchange_failed(c, STRATA_EBADMSG, "HELLO");
		return;
	}
	c->hello_done = true;
	if (c->cred.kind != NET_CRED_NONE) {
		struct rpc_call_args a = { .op = OP_AUTH, .body = want, .body_len = sizeof(want),
					   .cb = auth_done_cb, .arg = c };

		/* We hold a credential: the server must prove it holds the
		 * same secret, or it is not our cluster. */
		auth_proof(c->cred.secret, "strata-server", c->nc, ns, want);
		if (!(flags & HELLO_F_AUTH) || !mac_equal(proof, want, sizeof(want))) {
			log_warn("net", "'%s' did not prove the cluster key: not our cluster, "
				 "or it runs without one", c->peer);
			exchange_failed(c, -EKEYREJECTED, "HELLO");
			return;
		}
		auth_proof(c->cred.secret, "strata-client", c->nc, ns, want);
		if (queue_call(c, &a, true)) {
			exchange_failed(c, -ENOMEM, "AUTH");
			return;
		}
	}
	ungate(c);
}

static void dispatch(struct conn *c)
{
	struct rpc_msg m = { .hdr = c->cur, .body = c->body.buf, .bulk = c->bulk };

	STAT_ADD(frames_in, 1);
	if (c->cur.flags & FRAME_F_RESPONSE) {
		struct rpc_req *q = c->bulk_req;

		c->bulk_req = NULL;
		c->bulk = NULL;
		if (!q)
			return;	/* late response of a timed-out call */
		if (c->bulk_req_status) {
			req_complete(c, q, c->bulk_req_status, NULL);
			return;
		}
		m.bulk = q->bulk_dst;
		req_complete(c, q, m.hdr.status, &m);
		return;
	}
	c->bulk = NULL;
	c->bulk_owned = false;
	if (!c->hello_done) {
		if (c->plain_on_tls && c->cur.opcode == OP_HELLO) {
			/* Said in its own language, so that its caller learns
			 * why rather than see a reset. */
			abuf_free(m.bulk);
			c->hello_done = true;
			refuse(c, &m.hdr, STRATA_ETLSREQ, "plain TCP on a TLS port (its client "
			       "needs the cluster's CA: tls_ca, STRATA_TLS_CA)");
			return;
		}
		if (c->cur.opcode != OP_HELLO) {
			abuf_free(m.bulk);
			conn_bad_frame(c, "first frame is not HELLO");
			return;
		}
		handle_hello_request(c, &m);
		abuf_free(m.bulk);
		return;
	}
	if (c->cur.opcode == OP_HELLO) {
		abuf_free(m.bulk);
		conn_bad_frame(c, "HELLO sent twice");
		return;
	}
	if (c->await_auth || c->cur.opcode == OP_AUTH) {
		abuf_free(m.bulk);
		if (!c->await_auth || c->cur.opcode != OP_AUTH)
			conn_bad_frame(c, c->await_auth ? "request before AUTH" : "AUTH out of place");
		else
			handle_auth_request(c, &m);
		return;
	}
	if (c->close_when_flushed) {
		abuf_free(m.bulk);
		return;	/* refused: nothing more is served */
	}
	conn_get(c);
	if (c->has_handler && c->h.on_request)
		c->h.on_request(c->h.ctx, c, &m);
	else
		conn_reply(c, &m.hdr, STRATA_EBADOP, NULL, 0, NULL, 0, NULL, NULL);
	abuf_free(m.bulk);
	conn_put(c);
}

/* After the body: decides where the bulk goes. */
static int begin_bulk(struct conn *c)
{
	uint64_t len = c->cur.bulk_len;

	c->bulk_got = 0;
	c->bulk = NULL;
	c->bulk_owned = false;
	c->bulk_discard = false;
	c->bulk_req = NULL;
	c->bulk_req_status = 0;
	if (c->cur.flags & FRAME_F_RESPONSE) {
		struct rpc_req *q = pending_find(c, c->cur.req_id);

		if (!q) {
			c->bulk_discard = true;
			return 0;
		}
		pending_remove(c, q);
		c->bulk_req = q;
		if (len > q->bulk_cap) {
			c->bulk_discard = true;
			c->bulk_req_status = STRATA_EBADMSG;
			log_warn("net", "response from '%s' carries %llu bulk bytes, caller expected at most %llu",
				 c->peer, (unsigned long long)len, (unsigned long long)q->bulk_cap);
			return 0;
		}
		c->bulk = q->bulk_dst;
		return 0;
	}
	if (len == 0)
		return 0;
	if (!c->hello_done) {
		conn_bad_frame(c, "bulk data before HELLO");
		return -EPROTO;
	}
	c->bulk = abuf_alloc(len);
	if (!c->bulk) {
		conn_fail(c, "out of memory for bulk data");
		return -ENOMEM;
	}
	c->bulk_owned = true;
	return 0;
}

static void bulk_take(struct conn *c, const uint8_t *p, size_t n)
{
	if (!c->bulk_discard)
		memcpy(c->bulk + c->bulk_got, p, n);
	c->bulk_got += n;
}

/* Parses what rbuf holds. Returns false when the connection closed. */
static bool parse_input(struct conn *c)
{
	while (c->open) {
		size_t avail = c->rlen - c->roff;
		const char *why = NULL;
		int rc;

		switch (c->rstate) {
		case RS_HDR:
			if (avail < FRAME_HDR_LEN)
				return true;
			if ((rc = frame_hdr_decode(c->rbuf + c->roff, &c->cur, &why))) {
				/* Pending calls fail with it: STRATA_EPROTOVER for a
				 * peer that is not Strata (bad magic) or another
				 * version, which no retry will change. */
				c->close_err = rc;
				conn_bad_frame(c, why);
				return false;
			}
			c->roff += FRAME_HDR_LEN;
			c->body.len = 0;
			if (bbuf_reserve(&c->body, c->cur.body_len)) {
				conn_fail(c, "out of memory for frame body");
				return false;
			}
			c->rstate = RS_BODY;
			break;
		case RS_BODY: {
			size_t need = c->cur.body_len - c->body.len;
			size_t n = avail < need ? avail : need;

			bbuf_append(&c->body, c->rbuf + c->roff, n);
			c->roff += n;
			if (c->body.len < c->cur.body_len)
				return true;
			if (begin_bulk(c))
				return false;
			c->rstate = RS_BULK;
			break;
		}
		case RS_BULK: {
			uint64_t need = c->cur.bulk_len - c->bulk_got;
			size_t n = avail < need ? avail : (size_t)need;

			if (n)
				bulk_take(c, c->rbuf + c->roff, n);
			c->roff += n;
			if (c->bulk_got < c->cur.bulk_len)
				return true;
			c->rstate = RS_HDR;
			c->big_bulk = false;
			dispatch(c);
			break;
		}
		}
	}
	return false;
}

/*
 * Before the reactor waits for more input: in the middle of a large bulk
 * the socket need not wake us for each segment, only once the rest of
 * the frame (which the peer has committed to send) is there. One wakeup
 * per response instead of one per 64 KiB is most of the difference to a
 * blocking read() on a fast link. The kernel still wakes a reader whose
 * receive window is nearly closed, and closing wakes it too.
 */
#define LOWAT_MIN (128u * 1024u)
#define LOWAT_MAX (2u * 1024u * 1024u)

static void set_lowat(struct conn *c)
{
	uint64_t left = c->rstate == RS_BULK ? c->cur.bulk_len - c->bulk_got : 0;
	int want = 0;

	/* Not under TLS: OpenSSL may hold part of a record already, and the
	 * socket carries more bytes than the frame (record overhead). */
	if (left >= LOWAT_MIN && c->roff == c->rlen && !c->ssl)
		want = (int)(left < LOWAT_MAX ? left : LOWAT_MAX);
	if (want == c->lowat)
		return;
	if (setsockopt(c->fd, SOL_SOCKET, SO_RCVLOWAT, &(int){ want ? want : 1 }, sizeof(int)) == 0)
		c->lowat = want;
}

/* One read, as read() answers it. With TLS and no kTLS, SSL_read_ex. */
static ssize_t conn_read(struct conn *c, void *buf, size_t len)
{
	size_t got = 0;
	int e;

	if (!c->ssl || c->ktls_rx) {
		ssize_t n = read(c->fd, buf, len);

		/* kTLS: a record that is not data (the peer's close_notify)
		 * is EIO to a plain read: the end of the stream. */
		if (n < 0 && c->ssl && errno == EIO)
			return 0;
		return n;
	}
	ERR_clear_error();
	if (SSL_read_ex(c->ssl, buf, len, &got) == 1)
		return (ssize_t)got;
	e = SSL_get_error(c->ssl, 0);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		errno = EAGAIN;
		return -1;
	}
	if (e == SSL_ERROR_ZERO_RETURN)
		return 0;
	if (e != SSL_ERROR_SYSCALL || !errno) {
		log_warn("net", "TLS read from '%s' failed: %s", c->peer,
			 ERR_reason_error_string(ERR_peek_error()) ?: "protocol error");
		errno = EPROTO;
	}
	return -1;
}

/* A plain socket that answered a read with fewer bytes than asked had no
 * more: the next read would say EAGAIN. Level-triggered epoll reports what
 * arrives later, so the loop saves that read (one syscall per request). */
static bool drained(const struct conn *c, ssize_t n, size_t want)
{
	return !c->ssl && (size_t)n < want;
}

static void conn_on_read(struct conn *c)
{
	/* Past the 64th read, go on while OpenSSL holds bytes it read from
	 * the socket (records read ahead, or the rest of one): the socket
	 * would not wake us for those. */
	for (int iter = 0; c->open && (iter < 64 || (c->ssl && SSL_has_pending(c->ssl)));
	     iter++) {
		size_t want;
		ssize_t n;

		if (c->rstate == RS_BULK && c->roff == c->rlen &&
		    c->cur.bulk_len - c->bulk_got >= DIRECT_BULK_MIN && !c->bulk_discard) {
			/* Straight into the destination buffer. */
			want = c->cur.bulk_len - c->bulk_got;
			n = conn_read(c, c->bulk + c->bulk_got, want);
			if (n > 0) {
				STAT_ADD(bytes_in, (uint64_t)n);
				c->bulk_got += (uint64_t)n;
				if (c->bulk_got == c->cur.bulk_len) {
					c->rstate = RS_HDR;
					c->big_bulk = true;
					dispatch(c);
				}
				if (drained(c, n, want))
					break;
				continue;
			}
		} else {
			if (c->roff == c->rlen) {
				c->roff = 0;
				c->rlen = 0;
			} else if (c->rlen == RBUF_CAP) {
				memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
				c->rlen -= c->roff;
				c->roff = 0;
			}
			/* After a frame whose bulk went straight to its buffer
			 * the next one likely has one too: read its header
			 * alone, so that its bulk is not copied through rbuf. */
			want = RBUF_CAP - c->rlen;
			if (c->big_bulk && c->rstate == RS_HDR && c->rlen == 0)
				want = HDR_READ;
			n = conn_read(c, c->rbuf + c->rlen, want);
			if (n > 0) {
				STAT_ADD(bytes_in, (uint64_t)n);
				c->rlen += (size_t)n;
				if (!parse_input(c))
					return;
				if (drained(c, n, want))
					break;
				continue;
			}
		}
		if (n == 0) {
			if (c->rstate != RS_HDR || c->roff != c->rlen)
				conn_bad_frame(c, "connection closed in the middle of a frame");
			else
				conn_close(c, "peer closed");
			return;
		}
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			break;
		if (errno == EINTR)
			continue;
		conn_fail(c, strerror(errno));
		return;
	}
	if (c->open)
		set_lowat(c);
}

/* ---- TLS handshake ---- */

static void tls_failed(struct conn *c, int e)
{
	unsigned long err = ERR_peek_error();
	long vr = c->is_server ? X509_V_OK : SSL_get_verify_result(c->ssl);
	char why[320];

	if (vr != X509_V_OK)
		snprintf(why, sizeof(why), "TLS: the server's certificate is not accepted: %s "
			 "(is tls_ca / STRATA_TLS_CA the cluster's CA, and does the certificate "
			 "name the host connected to?)", X509_verify_cert_error_string(vr));
	else if (err)
		snprintf(why, sizeof(why), "TLS handshake failed: %s%s",
			 ERR_reason_error_string(err) ?: "unknown error",
			 c->is_server ? "" : " (does the server speak TLS?)");
	else if (e == SSL_ERROR_SYSCALL && errno)
		snprintf(why, sizeof(why), "TLS handshake failed: %s", strerror(errno));
	else
		snprintf(why, sizeof(why), "TLS handshake failed: the peer closed the connection%s",
			 c->is_server ? "" : " (does the server speak TLS?)");
	ERR_clear_error();
	/* A peer that went away mid-handshake (a restart) is retried like
	 * any closed connection; a certificate or protocol error is not. */
	if (vr != X509_V_OK || err) {
		c->close_err = STRATA_ETLS;
		log_warn("net", "'%s': %s", c->peer, why);
	} else {
		c->close_err = -ECONNRESET;
		log_debug("net", "'%s': %s", c->peer, why);
	}
	c->open = false;
	conn_teardown(c);
}

/* Drives the handshake; once done, frames flow (HELLO first). */
static void tls_handshake(struct conn *c)
{
	int rc, e;

	if (c->is_server && !c->tls_peeked) {
		uint8_t b;
		ssize_t n = recv(c->fd, &b, 1, MSG_PEEK);

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n <= 0) {
			conn_close(c, "peer closed before the TLS handshake");
			return;
		}
		c->tls_peeked = true;
		if (b != 0x16) {
			/* Not a TLS handshake record: a plain client. Read its
			 * HELLO as plain TCP to refuse it (dispatch). */
			SSL_free(c->ssl);
			c->ssl = NULL;
			c->tls_hs = false;
			c->plain_on_tls = true;
			return;
		}
	}
	ERR_clear_error();
	rc = SSL_do_handshake(c->ssl);
	if (rc == 1) {
		c->tls_hs = false;
		c->ktls_tx = BIO_get_ktls_send(SSL_get_wbio(c->ssl));
		c->ktls_rx = BIO_get_ktls_recv(SSL_get_rbio(c->ssl));
		/* Bytes OpenSSL has read already are its to decrypt. */
		if (c->ktls_rx && SSL_has_pending(c->ssl))
			c->ktls_rx = false;
		STAT_ADD(tls_conns, 1);
		STAT_ADD(ktls_tx_conns, c->ktls_tx ? 1 : 0);
		STAT_ADD(ktls_rx_conns, c->ktls_rx ? 1 : 0);
		log_msg(c->is_server ? LOG_INFO : LOG_DEBUG, "net",
			"TLS with '%s': %s, %s, kTLS %s", c->peer, SSL_get_version(c->ssl),
			SSL_get_cipher_name(c->ssl),
			c->ktls_tx && c->ktls_rx ? "send and receive" :
			c->ktls_tx ? "send only" : c->ktls_rx ? "receive only" : "off");
		return;
	}
	e = SSL_get_error(c->ssl, rc);
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		c->tls_hs_write = e == SSL_ERROR_WANT_WRITE;
		update_interest(c);
		return;
	}
	tls_failed(c, e);
}

static void conn_on_event(void *arg, uint32_t events)
{
	struct conn *c = arg;

	conn_get(c);
	if (c->connecting && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			c->close_err = -err;
			conn_fail(c, strerror(err));
			goto out;
		}
		c->connecting = false;
	}
	if (c->open && c->tls_hs && !c->connecting) {
		tls_handshake(c);
		if (!c->open || c->tls_hs)
			goto out;
		/* Done: HELLO may be queued, and a frame may have come right
		 * behind the peer's last handshake message. */
		events |= EPOLLIN | EPOLLOUT;
	}
	if (c->open && (events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		conn_on_read(c);
	if (c->open && (events & EPOLLOUT))
		flush_out(c);
out:
	conn_put(c);
}

/* ---- creation ---- */

static int set_sock_opts(int fd)
{
	int one = 1;
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return -errno;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* Wraps c in TLS from its first byte; the fd is set once there is one. */
static int tls_attach(struct conn *c, const struct net_tls *tls, const char *addr)
{
	sigset_t pipe;

	/* OpenSSL writes with write(), not send(MSG_NOSIGNAL): a peer gone
	 * must not kill the process with SIGPIPE (libstrata lives in other
	 * people's processes). This is the reactor's own thread. */
	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, NULL);
	c->ssl = SSL_new(net_tls_ctx(tls));
	if (!c->ssl)
		return -ENOMEM;
	c->tls_hs = true;
	if (c->is_server) {
		SSL_set_accept_state(c->ssl);
		return 0;
	}
	SSL_set_connect_state(c->ssl);
	c->tls_hs_write = true;	/* the ClientHello goes first */
	{
		char host[ADDR_HOST_MAX];
		int port;
		X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);

		if (parse_hostport(addr, host, sizeof(host), &port))
			return -EINVAL;
		/* The certificate must name what we connected to: an IP
		 * literal as an IP address, a name as a DNS name. */
		if (X509_VERIFY_PARAM_set1_ip_asc(vp, host) != 1) {
			X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
			if (SSL_set1_host(c->ssl, host) != 1 ||
			    SSL_set_tlsext_host_name(c->ssl, host) != 1)
				return -ENOMEM;
		}
	}
	return 0;
}

static int conn_alloc(struct reactor *r, int fd, const struct conn_handler *h, struct conn **out)
{
	struct conn *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->rbuf = malloc(RBUF_CAP);
	if (!c->rbuf) {
		free(c);
		return -ENOMEM;
	}
	c->r = r;
	c->fd = fd;
	c->refs = 1;	/* being open */
	c->open = true;
	c->out_tail = &c->out_head;
	c->held_tail = &c->held_head;
	c->default_timeout_ms = DEFAULT_TIMEOUT_MS;
	reactor_timer_init(&c->hello_timer, NULL, NULL);
	bbuf_init(&c->body);
	if (h) {
		c->h = *h;
		c->has_handler = true;
	}
	*out = c;
	return 0;
}

/* An accepted peer that has not said HELLO (or passed AUTH) in time. */
static void hello_due(void *arg)
{
	struct conn *c = arg;

	if (!c->open || (c->hello_done && !c->await_auth))
		return;
	STAT_ADD(hello_timeouts, 1);
	log_warn_limited("net", "closing connection from '%s': no HELLO within %u ms", c->peer,
			 c->h.hello_timeout_ms);
	conn_close(c, "no HELLO in time");
}

int conn_accept(struct reactor *r, int fd, const struct conn_handler *h, struct conn **out)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct conn *c;
	int rc = set_sock_opts(fd);

	if (rc || (rc = conn_alloc(r, fd, h, &c))) {
		close(fd);
		return rc;
	}
	c->is_server = true;
	if (h && h->tls && ((rc = tls_attach(c, h->tls, NULL)) ||
			    (SSL_set_fd(c->ssl, fd) != 1 && (rc = -ENOMEM)))) {
		close(fd);
		conn_destroy(c);
		return rc;
	}
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 &&
	    (ss.ss_family == AF_INET || ss.ss_family == AF_INET6)) {
		addr_format(&ss, c->peer, sizeof(c->peer));
		c->peer_ss = ss;
	} else {
		snprintf(c->peer, sizeof(c->peer), "fd %d", fd);
	}
	rc = reactor_watch_add(r, &c->watch, fd, EPOLLIN, conn_on_event, c);
	if (rc) {
		close(fd);
		conn_destroy(c);
		return rc;
	}
	if (h && h->hello_timeout_ms) {
		reactor_timer_init(&c->hello_timer, hello_due, c);
		reactor_timer_arm(r, &c->hello_timer, h->hello_timeout_ms);
	}
	STAT_ADD(conns_accepted, 1);
	if (c->has_handler && c->h.on_accept)
		c->h.on_accept(c->h.ctx, c);
	*out = c;
	return 0;
}

/* Opens the socket and starts a non-blocking connect to ss. */
static int connect_start(struct conn *c, const struct sockaddr_storage *ss, socklen_t sl)
{
	int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool in_progress = false;
	int rc;

	if (fd < 0)
		return -errno;
	rc = set_sock_opts(fd);
	if (rc)
		goto fail;
	if (connect(fd, (const struct sockaddr *)ss, sl) < 0) {
		if (errno != EINPROGRESS) {
			rc = -errno;
			goto fail;
		}
		in_progress = true;
	}
	if (c->ssl && SSL_set_fd(c->ssl, fd) != 1) {
		rc = -ENOMEM;
		goto fail;
	}
	c->fd = fd;
	/* TLS: the ClientHello waits for a writable socket. */
	rc = reactor_watch_add(c->r, &c->watch, fd,
			       EPOLLIN | (in_progress || c->ssl ? EPOLLOUT : 0), conn_on_event, c);
	if (rc) {
		c->fd = -1;
		goto fail;
	}
	c->connecting = in_progress;
	return 0;
fail:
	close(fd);
	return rc;
}

/* ---- resolving a peer's name off the loop ---- */

struct resolve_job {
	struct conn *c;		/* holds a reference until resolve_done */
	char addr[ADDR_HOST_MAX + 8];
	struct sockaddr_storage ss;
	socklen_t sl;
	int rc;			/* -ECANCELED until the lookup ran */
};

/* The lookup; a test replaces it to see that it runs off the loop. */
static int (*conn_resolve_fn)(const char *addr, struct sockaddr_storage *ss,
			      socklen_t *sl) = addr_resolve;

/* On the reactor's helper thread: touches nothing but the job. */
static void resolve_work(void *arg)
{
	struct resolve_job *j = arg;

	j->rc = conn_resolve_fn(j->addr, &j->ss, &j->sl);
}

/* Back on the loop: connect, or fail the calls queued meanwhile. */
static void resolve_done(void *arg)
{
	struct resolve_job *j = arg;
	struct conn *c = j->c;
	int rc = j->rc;

	if (c->open) {
		if (rc == 0)
			rc = connect_start(c, &j->ss, j->sl);
		if (rc) {
			c->close_err = rc;
			conn_fail(c, rc == -EHOSTUNREACH ? "the name does not resolve" :
				  strata_strerror(rc));
		} else if (!c->connecting) {
			flush_out(c);
		}
	}
	free(j);
	conn_put(c);
}

static int resolve_start(struct conn *c, const char *addr)
{
	struct resolve_job *j = calloc(1, sizeof(*j));
	int rc;

	if (!j)
		return -ENOMEM;
	if (strlen(addr) >= sizeof(j->addr)) {
		free(j);
		return -EINVAL;
	}
	memcpy(j->addr, addr, strlen(addr) + 1);
	j->c = c;
	j->rc = -ECANCELED;
	c->connecting = true;
	conn_get(c);
	rc = reactor_offload(c->r, resolve_work, resolve_done, j);
	if (rc) {
		c->refs--;	/* the job's reference, never used */
		free(j);
	}
	return rc;
}

/* The client side of a new connection: the caller's reference, and HELLO
 * queued ahead of every call; with a credential, calls wait for the
 * exchange (auth.h). */
static int conn_start_client(struct conn *c, const struct conn_handler *h,
			     const struct net_cred *cred, uint32_t default_timeout_ms,
			     struct conn **out)
{
	struct rpc_call_args a = { 0 };
	struct bbuf hello;
	struct wbuf w;
	int rc = 0;

	if (default_timeout_ms)
		c->default_timeout_ms = default_timeout_ms;
	conn_get(c);	/* the caller's reference */
	if (cred)
		rc = net_cred_copy(&c->cred, cred);
	auth_nonce(c->nc);
	bbuf_init(&hello);
	wbuf_init(&w, &hello);
	wb_u32(&w, FRAME_MAGIC);
	wb_u16(&w, STRATA_PROTO_VERSION);
	wb_u16(&w, c->cred.kind == NET_CRED_KEY ? ROLE_DAEMON : ROLE_CLIENT);
	wb_u32(&w, h ? h->node_id : 0);
	wb_raw(&w, c->nc, sizeof(c->nc));
	wb_u8(&w, (uint8_t)c->cred.kind);
	wb_bytes(&w, c->cred.signed_part, (uint32_t)c->cred.signed_len);
	a.op = OP_HELLO;
	a.body = hello.buf;
	a.body_len = (uint32_t)hello.len;
	a.cb = hello_done_cb;
	a.arg = c;
	/* Peers answer a HELLO for either side, so the server also accepts
	 * requests from us. */
	c->hello_done = true;
	c->gated = true;
	if (!rc)
		rc = w.err ? -ENOMEM : queue_call(c, &a, true);
	bbuf_release(&hello);
	if (rc) {
		conn_close(c, "cannot queue HELLO");
		conn_put(c);
		return rc;
	}
	*out = c;
	return 0;
}

int conn_connect(struct reactor *r, const char *addr, const struct conn_handler *h,
		 const struct net_cred *cred, const struct net_tls *tls,
		 uint32_t default_timeout_ms, struct conn **out)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	struct conn *c;
	int rc, numeric;

	numeric = addr_parse_numeric(addr, &ss, &sl);
	if (numeric && numeric != -EAGAIN)
		return numeric;
	rc = conn_alloc(r, -1, h, &c);
	if (rc)
		return rc;
	snprintf(c->peer, sizeof(c->peer), "%s", addr);
	if (tls && (rc = tls_attach(c, tls, addr))) {
		conn_destroy(c);
		return rc;
	}
	/* An IP literal connects now; a name is looked up off the loop and
	 * calls queue meanwhile. */
	rc = numeric == -EAGAIN ? resolve_start(c, addr) : connect_start(c, &ss, sl);
	if (rc) {
		conn_destroy(c);
		return rc;
	}
	return conn_start_client(c, h, cred, default_timeout_ms, out);
}
