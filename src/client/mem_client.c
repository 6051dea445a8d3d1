/*
 * libstrata's memory API (include/strata/mem.h): a consistent-hash ring
 * over the pool's mem nodes. Every call builds operations (requests of
 * the mem table, src/proto/mem.h); a value is received straight into the
 * caller's buffer (bulk_dst).
 *
 * A synchronous call runs on the caller's thread: it takes a free lane
 * (rpc_lanes, rpc.h: connections of its own, one per node, driven by
 * whichever thread holds it), writes its requests from that thread, all of
 * them back to back (a batch: one request per node; a replicated put: one
 * per replica), and waits in epoll on the lane's sockets until every one
 * is answered: no hand-off to another thread and no wakeup but the
 * socket's. When every lane is held (more calling threads than lanes), and
 * for asynchronous gets and prefetches, the operations are posted to
 * reactor threads (rpc_clients, io_threads of them) that drive their own
 * pooled connections. LIST and STATS, one node after the other, are
 * blocking calls through those threads.
 *
 * Knob for tests: STRATA_TEST_MEM_LANES=N uses N lanes (0: none, every
 * call through the reactor threads).
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client_int.h"
#include "common/buf.h"
#include "net/frame.h"
#include "net/rpc.h"
#include "proto/mem.h"
#include "strata/mem.h"

#define MAX_REPLICAS 8u
#define ADDR_LEN 64

_Static_assert(STRATA_MEM_PIN == MP_PUT_PIN && STRATA_MEM_NX == MP_PUT_NX,
	       "the API's put flags are the wire's");
_Static_assert(MP_KEY_MAX == 1024, "include/strata/mem.h promises keys of 1..1024 bytes");

struct vpoint {
	uint64_t h;
	uint32_t node;
};

struct strata_mem {
	struct strata_mem_opts o;
	uint32_t n;
	char (*addrs)[ADDR_LEN];
	struct vpoint *ring;
	uint32_t nring;
	struct rpc_client **rc;	/* io_threads of them */
	uint32_t nrc;
	struct rpc_lanes *lanes;	/* for synchronous calls */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint32_t inflight;
};

/* The request of an operation: the member its opcode names. Its keys are
 * views, of the op's own copy (key[]) for a single key, of the caller's
 * items for a batch (whose call waits for its requests). */
union mem_req {
	struct mp_put put;
	struct mp_get get;
	struct mp_key key;		/* REMOVE, EXISTS */
	struct mp_pin pin;
	struct mp_mput mput;		/* items allocated: released with the op */
	struct mp_mget mget;		/* keys too */
	struct mp_keys keys;		/* MREMOVE, MEXISTS; keys too */
};

struct strata_mem_op {
	struct strata_mem *m;
	struct rpc_client *rc;		/* the I/O thread that drives it */
	struct rpc_pool *pool;		/* rc's, or the lane's that sends it */
	bool direct;			/* sent from the caller's thread (a lane) */
	uint16_t opcode;
	union mem_req rq;
	const void *bulk;
	uint64_t bulk_len;
	void *dst;
	uint64_t cap;
	uint32_t targets[MAX_REPLICAS];
	uint32_t ntargets, ti;
	bool autofree;
	/* completion */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int status;
	uint64_t len;			/* GET, EXISTS: the value's length */
	uint64_t got;			/* bytes of bulk received */
	struct mp_results res;		/* a batch's results */
	bool local;			/* in a synchronous call's storage */
	const char *kp;			/* the single key: key[], or the caller's */
	uint32_t klen;
	char key[];			/* a single key's copy */
};

static uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	h ^= h >> 33;
	return h;
}

static uint64_t hash_bytes(const void *k, size_t n)
{
	const uint8_t *p = k;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return mix64(h);
}

static int vp_cmp(const void *a, const void *b)
{
	const struct vpoint *x = a, *y = b;

	if (x->h != y->h)
		return x->h < y->h ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

static int addr_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

void strata_mem_opts_init(struct strata_mem_opts *opts, size_t size)
{
	memset(opts, 0, size);
	opts->opts_size = size;
	if (size >= offsetof(struct strata_mem_opts, timeout_ms) + sizeof(uint32_t))
		opts->timeout_ms = 10000;
	if (size >= offsetof(struct strata_mem_opts, replicas) + sizeof(uint32_t))
		opts->replicas = 1;
	if (size >= offsetof(struct strata_mem_opts, vnodes) + sizeof(uint32_t))
		opts->vnodes = 64;
	if (size >= offsetof(struct strata_mem_opts, io_threads) + sizeof(uint32_t))
		opts->io_threads = 2;
}

/* Fills targets with the (up to) replicas distinct nodes owning key. */
static uint32_t owners(const struct strata_mem *m, const char *key, size_t klen,
		       uint32_t *targets, uint32_t want)
{
	uint64_t h = hash_bytes(key, klen);
	uint32_t lo = 0, hi = m->nring, cnt = 0;

	if (want > m->n)
		want = m->n;
	while (lo < hi) {
		uint32_t mid = (lo + hi) / 2;

		if (m->ring[mid].h < h)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (uint32_t i = 0; i < m->nring && cnt < want; i++) {
		uint32_t node = m->ring[(lo + i) % m->nring].node;
		bool seen = false;

		for (uint32_t j = 0; j < cnt; j++)
			seen = seen || targets[j] == node;
		if (!seen)
			targets[cnt++] = node;
	}
	return cnt;
}

/* How many lanes: twice the I/O threads, at least 8 (a lane costs two
 * descriptors, and a connection per node once used), or the test knob. */
static uint32_t lanes_wanted(const struct strata_mem *m)
{
	return rpc_lanes_count("STRATA_TEST_MEM_LANES",
			       m->o.io_threads * 2 < 8 ? 8 : m->o.io_threads * 2);
}

int strata_mem_open(const char *addrs, const struct strata_mem_opts *opts,
		    struct strata_mem **out)
{
	struct strata_mem *m;
	const char *p = addrs;
	struct net_cred cred;
	bool has_cred = false;
	int rc = -ENOMEM;

	if (!addrs || !*addrs || !out)
		return -EINVAL;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	strata_mem_opts_init(&m->o, sizeof(m->o));
	if (opts)
		memcpy(&m->o, opts, opts->opts_size < sizeof(m->o) ? opts->opts_size : sizeof(m->o));
	m->o.opts_size = sizeof(m->o);
	if (!m->o.timeout_ms)
		m->o.timeout_ms = 10000;
	if (!m->o.replicas)
		m->o.replicas = 1;
	if (m->o.replicas > MAX_REPLICAS)
		m->o.replicas = MAX_REPLICAS;
	if (!m->o.vnodes || m->o.vnodes > 4096)
		m->o.vnodes = 64;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cv, NULL);
	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		char host[ADDR_LEN];
		int port;
		void *na;

		if (len == 0 || len >= ADDR_LEN) {
			rc = -EINVAL;
			goto fail;
		}
		na = realloc(m->addrs, (m->n + 1) * sizeof(*m->addrs));
		if (!na)
			goto fail;
		m->addrs = na;
		memcpy(m->addrs[m->n], p, len);
		m->addrs[m->n][len] = '\0';
		if (parse_hostport(m->addrs[m->n], host, sizeof(host), &port) || port == 0) {
			rc = -EINVAL;
			goto fail;
		}
		m->n++;
		p += len + (e ? 1 : 0);
	}
	if (m->n == 0) {
		rc = -EINVAL;
		goto fail;
	}
	/* The same ring on every client, whatever the order of the list. */
	qsort(m->addrs, m->n, sizeof(*m->addrs), addr_cmp);
	m->nring = m->n * m->o.vnodes;
	m->ring = calloc(m->nring, sizeof(*m->ring));
	if (!m->ring)
		goto fail;
	for (uint32_t i = 0; i < m->n; i++) {
		for (uint32_t v = 0; v < m->o.vnodes; v++) {
			char tag[ADDR_LEN + 16];
			int tl = snprintf(tag, sizeof(tag), "%s#%u", m->addrs[i], v);

			m->ring[i * m->o.vnodes + v].h = hash_bytes(tag, (size_t)tl);
			m->ring[i * m->o.vnodes + v].node = i;
		}
	}
	qsort(m->ring, m->nring, sizeof(*m->ring), vp_cmp);
	if (!m->o.io_threads || m->o.io_threads > 16)
		m->o.io_threads = 2;
	m->rc = calloc(m->o.io_threads, sizeof(*m->rc));
	if (!m->rc)
		goto fail;
	rc = cl_take_token(opts && opts->opts_size > offsetof(struct strata_mem_opts, token)
			   ? opts->token : NULL, &cred, &has_cred);
	m->o.token = NULL;	/* not kept: the caller's string */
	while (!rc && m->nrc < m->o.io_threads) {
		rc = rpc_client_new("strata-mem", m->o.timeout_ms, &m->rc[m->nrc]);
		if (rc)
			break;
		m->nrc++;	/* freed by the fail path from here */
		if (has_cred)
			rc = rpc_pool_set_cred(rpc_client_pool(m->rc[m->nrc - 1]), &cred);
	}
	if (!rc)	/* presenting what the I/O threads' pools do */
		rc = rpc_lanes_new("strata-mem-lane", lanes_wanted(m), rpc_client_pool(m->rc[0]),
				   &m->lanes);
	net_cred_release(&cred);
	if (rc)
		goto fail;
	*out = m;
	return 0;
fail:
	for (uint32_t i = 0; m->rc && i < m->nrc; i++)
		rpc_client_free(m->rc[i]);
	free(m->rc);
	rpc_lanes_free(m->lanes);
	free(m->ring);
	free(m->addrs);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cv);
	free(m);
	return rc;
}

void strata_mem_close(struct strata_mem *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	while (m->inflight)
		pthread_cond_wait(&m->cv, &m->lock);
	pthread_mutex_unlock(&m->lock);
	for (uint32_t i = 0; i < m->nrc; i++)
		rpc_client_free(m->rc[i]);
	free(m->rc);
	rpc_lanes_free(m->lanes);
	free(m->ring);
	free(m->addrs);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cv);
	free(m);
}

void strata_mem_free(void *buf)
{
	abuf_free(buf);
}

/* ---- operations ---- */

/* The I/O thread of the calling thread: each caller sticks to one, so its
 * requests stay in order on one connection per node. */
static struct rpc_client *pick_rc(struct strata_mem *m)
{
	return m->rc[rpc_thread_slot() % m->nrc];
}

/* A new operation; key[klen] (may be NULL) is copied into it, so that a
 * request sent again (failover) or after its caller returned (async get,
 * prefetch) still has it. */
static void op_setup(struct strata_mem_op *op, struct strata_mem *m, uint16_t opcode)
{
	op->m = m;
	op->rc = pick_rc(m);
	op->pool = rpc_client_pool(op->rc);
	op->opcode = opcode;
	pthread_mutex_init(&op->lock, NULL);
	pthread_cond_init(&op->cv, NULL);
}

static struct strata_mem_op *op_new(struct strata_mem *m, uint16_t opcode, const char *key,
				    size_t klen)
{
	struct strata_mem_op *op = calloc(1, sizeof(*op) + klen);

	if (!op)
		return NULL;
	op_setup(op, m, opcode);
	op->klen = (uint32_t)klen;
	if (klen)
		memcpy(op->key, key, klen);
	op->kp = op->key;
	return op;
}

/* A key as the wire carries it: a view of key[klen]. */
static struct pbytes key_view(const char *key, size_t klen)
{
	struct pbytes v = { (const uint8_t *)key, (uint32_t)klen };

	return v;
}

/* A view of op's key (its copy, or a synchronous caller's). */
static struct pbytes op_key(const struct strata_mem_op *op)
{
	return key_view(op->kp, op->klen);
}

static void op_destroy(struct strata_mem_op *op)
{
	switch (op->opcode) {
	case OP_MEM_MPUT:
		mp_mput_release(&op->rq.mput);
		break;
	case OP_MEM_MGET:
		mp_mget_release(&op->rq.mget);
		break;
	case OP_MEM_MREMOVE:
	case OP_MEM_MEXISTS:
		mp_keys_release(&op->rq.keys);
		break;
	}
	mp_results_release(&op->res);
	pthread_mutex_destroy(&op->lock);
	pthread_cond_destroy(&op->cv);
	if (!op->local)
		free(op);
}

static void op_complete(struct strata_mem_op *op, int status)
{
	struct strata_mem *m = op->m;
	bool autofree = op->autofree;

	if (op->direct) {
		/* Its caller waits on this thread (run_ops): nobody to wake. */
		op->status = status;
		op->done = true;
		return;
	}
	pthread_mutex_lock(&op->lock);
	op->status = status;
	op->done = true;
	pthread_cond_broadcast(&op->cv);
	pthread_mutex_unlock(&op->lock);
	if (autofree)
		op_destroy(op);
	pthread_mutex_lock(&m->lock);
	if (--m->inflight == 0)
		pthread_cond_broadcast(&m->cv);
	pthread_mutex_unlock(&m->lock);
}

/* Sends op's request to addr with its operation's stub. */
static int op_call(struct strata_mem_op *op, const char *addr, const struct proto_call *c)
{
	struct rpc_pool *p = op->pool;

	switch (op->opcode) {
	case OP_MEM_PUT:
		return mm_put_call(p, addr, &op->rq.put, c);
	case OP_MEM_GET:
		return mm_get_call(p, addr, &op->rq.get, c);
	case OP_MEM_REMOVE:
		return mm_remove_call(p, addr, &op->rq.key, c);
	case OP_MEM_EXISTS:
		return mm_exists_call(p, addr, &op->rq.key, c);
	case OP_MEM_PIN:
		return mm_pin_call(p, addr, &op->rq.pin, c);
	case OP_MEM_MPUT:
		return mm_mput_call(p, addr, &op->rq.mput, c);
	case OP_MEM_MGET:
		return mm_mget_call(p, addr, &op->rq.mget, c);
	case OP_MEM_MREMOVE:
		return mm_mremove_call(p, addr, &op->rq.keys, c);
	case OP_MEM_MEXISTS:
		return mm_mexists_call(p, addr, &op->rq.keys, c);
	default:
		return -EINVAL;
	}
}

/* Decodes a successful reply into op: a value's length, a batch's
 * results, or nothing (a body where none belongs is an error). */
static int op_rep(struct strata_mem_op *op, const struct rpc_msg *resp)
{
	struct mp_len len = { 0 };
	struct proto_void none;
	int rc;

	switch (op->opcode) {
	case OP_MEM_GET:
		rc = mm_get_rep(resp, &len);
		/* the value is the bulk, whole */
		if (!rc && len.len != resp->hdr.bulk_len)
			rc = STRATA_EBADMSG;
		op->len = len.len;
		return rc;
	case OP_MEM_EXISTS:
		rc = mm_exists_rep(resp, &len);
		op->len = len.len;
		return rc;
	case OP_MEM_MPUT:
		return mm_mput_rep(resp, &op->res);
	case OP_MEM_MGET:
		return mm_mget_rep(resp, &op->res);
	case OP_MEM_MREMOVE:
		return mm_mremove_rep(resp, &op->res);
	case OP_MEM_MEXISTS:
		return mm_mexists_rep(resp, &op->res);
	case OP_MEM_PUT:
		return mm_put_rep(resp, &none);
	case OP_MEM_REMOVE:
		return mm_remove_rep(resp, &none);
	default:
		return mm_pin_rep(resp, &none);
	}
}

static void op_send(struct strata_mem_op *op);

static void on_reply(void *arg, int status, struct rpc_msg *resp)
{
	struct strata_mem_op *op = arg;

	if (resp && status == 0) {
		op->got = resp->hdr.bulk_len;
		status = op_rep(op, resp);
	}
	/* A replica that is down or lacks the key: try the next one. */
	if ((status == -ENOENT || (!resp && status)) && op->ti + 1 < op->ntargets &&
	    (op->opcode == OP_MEM_GET || op->opcode == OP_MEM_EXISTS)) {
		op->ti++;
		op_send(op);
		return;
	}
	op_complete(op, status);
}

/* On the client's reactor. */
static void op_send(struct strata_mem_op *op)
{
	struct proto_call c = {
		.bulk = op->bulk,
		.bulk_len = op->bulk_len,
		.bulk_dst = op->dst,
		.bulk_cap = op->cap,
		.cb = on_reply,
		.arg = op,
	};
	int rc = op_call(op, op->m->addrs[op->targets[op->ti]], &c);

	if (rc)
		op_complete(op, rc);
}

static void op_send_task(void *arg)
{
	op_send(arg);
}

static int op_submit(struct strata_mem_op *op)
{
	struct strata_mem *m = op->m;
	int rc;

	pthread_mutex_lock(&m->lock);
	m->inflight++;
	pthread_mutex_unlock(&m->lock);
	rc = reactor_post(rpc_client_reactor(op->rc), op_send_task, op);
	if (rc) {
		pthread_mutex_lock(&m->lock);
		m->inflight--;
		pthread_mutex_unlock(&m->lock);
	}
	return rc;
}

static int op_wait_done(struct strata_mem_op *op, int timeout_ms)
{
	struct timespec ts;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (timeout_ms >= 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&op->lock);
	while (!op->done && rc == 0)
		rc = timeout_ms < 0 ? pthread_cond_wait(&op->cv, &op->lock) :
			pthread_cond_timedwait(&op->cv, &op->lock, &ts);
	rc = op->done ? 0 : -EAGAIN;
	pthread_mutex_unlock(&op->lock);
	return rc;
}

static int check_key(const char *key, size_t *klen)
{
	if (!key)
		return -EINVAL;
	*klen = strlen(key);
	if (*klen == 0)
		return -EINVAL;
	return *klen > MP_KEY_MAX ? -ENAMETOOLONG : 0;
}

/* Builds a single-key operation for key's owners, holding a copy of key
 * (op_key()); the caller fills in its request. */
static int key_op(struct strata_mem *m, uint16_t opcode, const char *key,
		  struct strata_mem_op **out)
{
	struct strata_mem_op *op;
	size_t klen;
	int rc = check_key(key, &klen);

	if (rc)
		return rc;
	op = op_new(m, opcode, key, klen);
	if (!op)
		return -ENOMEM;
	op->ntargets = owners(m, key, klen, op->targets, m->o.replicas);
	*out = op;
	return 0;
}

/* key_op for a synchronous call: op is the caller's storage (released
 * with op_destroy) and its key a view of the caller's, which outlives the
 * call, so nothing is allocated. */
static int key_op_local(struct strata_mem *m, uint16_t opcode, const char *key,
			struct strata_mem_op *op)
{
	size_t klen;
	int rc = check_key(key, &klen);

	if (rc)
		return rc;
	memset(op, 0, sizeof(*op));
	op_setup(op, m, opcode);
	op->local = true;
	op->kp = key;
	op->klen = (uint32_t)klen;
	op->ntargets = owners(m, key, klen, op->targets, m->o.replicas);
	return 0;
}

struct op_set {
	struct strata_mem_op **ops;
	uint32_t n;
};

static bool ops_done(void *arg)
{
	const struct op_set *set = arg;

	for (uint32_t i = 0; i < set->n; i++) {
		if (!set->ops[i]->done)
			return false;
	}
	return true;
}

/* Runs ops[0..n) to completion, at once (each op's status says how it
 * went; the ops stay the caller's): from this thread over a lane when one
 * is free, else through the reactor threads. */
static void run_ops(struct strata_mem *m, struct strata_mem_op **ops, uint32_t n)
{
	struct rpc_direct *d = rpc_lanes_hold(m->lanes);
	struct op_set set = { ops, n };

	if (d) {
		for (uint32_t i = 0; i < n; i++) {
			ops[i]->direct = true;
			ops[i]->pool = rpc_direct_pool(d);
			op_send(ops[i]);
		}
		rpc_direct_wait(d, ops_done, &set);
		rpc_direct_release(d);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		int rc = op_submit(ops[i]);

		if (rc) {
			ops[i]->status = rc;
			ops[i]->done = true;
		}
	}
	for (uint32_t i = 0; i < n; i++)
		op_wait_done(ops[i], -1);
}

/* Runs op to completion; returns its status (op is still the caller's). */
static int run(struct strata_mem_op *op)
{
	run_ops(op->m, &op, 1);
	return op->status;
}

/* The status of a replicated request so far (rc), given one more copy's
 * (st; first: the first copy's): a put succeeds only when every copy is
 * stored; a remove or pin counts where any copy had the key. */
static int copies_status(uint16_t opcode, bool first, int rc, int st)
{
	if (first)
		return st;
	if (opcode == OP_MEM_PUT || opcode == OP_MEM_MPUT)
		return rc ? rc : st;
	return rc == -ENOENT && st != -ENOENT ? st : rc;
}

/* Sends a copy of op to each of its replicas at once; returns the first
 * error. Used by updates (put, remove, pin). */
static int run_all(struct strata_mem_op *op)
{
	struct strata_mem_op *ops[MAX_REPLICAS];
	uint32_t n = op->ntargets;
	int rc = 0;

	ops[0] = op;
	for (uint32_t i = 1; i < n; i++) {
		ops[i] = op_new(op->m, op->opcode, NULL, 0);
		if (!ops[i]) {
			n = i;
			rc = -ENOMEM;
			break;
		}
		/* Its key is op's copy: op outlives the copies. */
		ops[i]->rq = op->rq;
		ops[i]->bulk = op->bulk;
		ops[i]->bulk_len = op->bulk_len;
		ops[i]->targets[0] = op->targets[i];
		ops[i]->ntargets = 1;
	}
	op->ntargets = 1;
	run_ops(op->m, ops, n);
	for (uint32_t i = 0; i < n; i++) {
		rc = copies_status(op->opcode, i == 0, rc, ops[i]->status);
		if (i > 0)
			op_destroy(ops[i]);
	}
	op_destroy(op);
	return rc;
}

int strata_mem_put(struct strata_mem *m, const char *key, const void *buf, size_t len,
		   unsigned flags)
{
	struct strata_mem_op local, *op = &local;
	int rc;

	if (len > FRAME_MAX_BULK)
		return -E2BIG;
	rc = key_op_local(m, OP_MEM_PUT, key, op);
	if (rc)
		return rc;
	op->rq.put.flags = flags & MP_PUT_KNOWN;
	op->rq.put.key = op_key(op);
	op->bulk = buf;
	op->bulk_len = len;
	return run_all(op);
}

int strata_mem_get_async(struct strata_mem *m, const char *key, void *buf, size_t cap,
			 struct strata_mem_op **out)
{
	struct strata_mem_op *op;
	int rc = key_op(m, OP_MEM_GET, key, &op);

	if (rc)
		return rc;
	op->rq.get.cap = cap;
	op->rq.get.key = op_key(op);
	op->dst = buf;
	op->cap = cap;
	rc = op_submit(op);
	if (rc) {
		op_destroy(op);
		return rc;
	}
	*out = op;
	return 0;
}

int strata_mem_op_poll(struct strata_mem_op *op)
{
	int done;

	pthread_mutex_lock(&op->lock);
	done = op->done;
	pthread_mutex_unlock(&op->lock);
	return done;
}

ssize_t strata_mem_op_wait(struct strata_mem_op *op, int timeout_ms)
{
	int rc = op_wait_done(op, timeout_ms);

	if (rc)
		return rc;
	return op->status ? op->status : (ssize_t)op->len;
}

void strata_mem_op_free(struct strata_mem_op *op)
{
	if (!op)
		return;
	op_wait_done(op, -1);
	op_destroy(op);
}

ssize_t strata_mem_get(struct strata_mem *m, const char *key, void *buf, size_t cap)
{
	struct strata_mem_op local, *op = &local;
	ssize_t rc = key_op_local(m, OP_MEM_GET, key, op);

	if (rc)
		return rc;
	op->rq.get.cap = cap;
	op->rq.get.key = op_key(op);
	op->dst = buf;
	op->cap = cap;
	rc = run(op);	/* fails over to the next replica (on_reply) */
	if (rc == 0)
		rc = (ssize_t)op->len;
	op_destroy(op);
	return rc;
}

int strata_mem_get_alloc(struct strata_mem *m, const char *key, void **buf, size_t *len)
{
	for (int tries = 0; tries < 8; tries++) {
		ssize_t n = strata_mem_exists(m, key), got;
		void *b;

		if (n < 0)
			return (int)n;
		b = abuf_alloc((size_t)n);
		if (!b)
			return -ENOMEM;
		got = strata_mem_get(m, key, b, (size_t)n);
		if (got >= 0) {
			*buf = b;
			*len = (size_t)got;
			return 0;
		}
		abuf_free(b);
		if (got != -ENOBUFS)	/* grew in between: try again */
			return (int)got;
	}
	return -EAGAIN;
}

ssize_t strata_mem_exists(struct strata_mem *m, const char *key)
{
	struct strata_mem_op local, *op = &local;
	ssize_t rc = key_op_local(m, OP_MEM_EXISTS, key, op);

	if (rc)
		return rc;
	op->rq.key.key = op_key(op);
	rc = run(op);	/* fails over to the next replica (on_reply) */
	if (rc == 0)
		rc = (ssize_t)op->len;
	op_destroy(op);
	return rc;
}

int strata_mem_remove(struct strata_mem *m, const char *key)
{
	struct strata_mem_op local, *op = &local;
	int rc = key_op_local(m, OP_MEM_REMOVE, key, op);

	if (rc)
		return rc;
	op->rq.key.key = op_key(op);
	return run_all(op);
}

int strata_mem_pin(struct strata_mem *m, const char *key, int pin)
{
	struct strata_mem_op local, *op = &local;
	int rc = key_op_local(m, OP_MEM_PIN, key, op);

	if (rc)
		return rc;
	op->rq.pin.pin = pin ? 1 : 0;
	op->rq.pin.key = op_key(op);
	return run_all(op);
}

int strata_mem_prefetch(struct strata_mem *m, const char *key)
{
	struct strata_mem_op *op;
	int rc = key_op(m, OP_MEM_GET, key, &op);

	if (rc)
		return rc;
	/* cap 0: the node brings the value in and answers -ENOBUFS */
	op->rq.get.key = op_key(op);
	op->autofree = true;
	rc = op_submit(op);
	if (rc)
		op_destroy(op);
	return rc;
}

ssize_t strata_mem_list(struct strata_mem *m, const char *prefix,
			int (*fn)(void *arg, const char *key, uint64_t len), void *arg)
{
	size_t plen = prefix ? strlen(prefix) : 0;
	struct mp_list rq = { .max = MP_LIST_MAX, .prefix = key_view(prefix, plen) };
	ssize_t total = 0;

	if (plen > MP_KEY_MAX)
		return -ENAMETOOLONG;
	for (uint32_t i = 0; i < m->n; i++) {
		struct bbuf body;
		struct proto_sync s = { .body = &body };
		struct mp_list_rep rep;
		bool stop = false;
		int rc;

		bbuf_init(&body);
		rc = mm_list_call_sync(pick_rc(m), m->addrs[i], &rq, &s, &rep);
		for (uint32_t k = 0; !rc && !stop && k < rep.ents_n; k++) {
			const struct mp_list_ent *e = &rep.ents[k];
			char key[MP_KEY_MAX + 1];

			memcpy(key, e->key.p, e->key.len);
			key[e->key.len] = '\0';
			total++;
			stop = fn && fn(arg, key, e->len);
		}
		if (!rc)
			mp_list_rep_release(&rep);
		bbuf_release(&body);
		if (rc)
			return rc;
		if (stop)
			break;
	}
	return total;
}

/* ---- batches ---- */

struct group {
	struct strata_mem_op *op;
	uint32_t *idx;		/* items of the request */
	uint32_t n;
	uint8_t *tmp;		/* MGET: where the values land */
};

/* The keys of g's items as a batch request carries them: views of the
 * caller's keys (the batch waits for its requests). NULL: no memory. */
static struct mp_key *group_keys(const struct strata_mem_item *items, const struct group *g)
{
	struct mp_key *v = calloc(g->n, sizeof(*v));

	for (uint32_t i = 0; v && i < g->n; i++) {
		const char *key = items[g->idx[i]].key;

		v[i].key = key_view(key, strlen(key));
	}
	return v;
}

/* Fills op's request with g's items; cap: MGET's room for the values. */
static int group_request(struct strata_mem_op *op, const struct strata_mem_item *items,
			 const struct group *g, uint64_t cap)
{
	struct mp_put_item *v;

	switch (op->opcode) {
	case OP_MEM_MPUT:
		v = calloc(g->n, sizeof(*v));
		for (uint32_t i = 0; v && i < g->n; i++) {
			const struct strata_mem_item *it = &items[g->idx[i]];

			v[i].flags = it->flags & MP_PUT_KNOWN;
			v[i].len = it->len;
			v[i].key = key_view(it->key, strlen(it->key));
		}
		op->rq.mput.items = v;
		op->rq.mput.items_n = g->n;
		return v ? 0 : -ENOMEM;
	case OP_MEM_MGET:
		op->rq.mget.cap = cap;
		op->rq.mget.keys = group_keys(items, g);
		op->rq.mget.keys_n = g->n;
		return op->rq.mget.keys ? 0 : -ENOMEM;
	default:
		op->rq.keys.keys = group_keys(items, g);
		op->rq.keys.keys_n = g->n;
		return op->rq.keys.keys ? 0 : -ENOMEM;
	}
}

/* Builds g's request of its items to node, as one operation (g->op, NULL
 * when it could not be made). */
static int group_build(struct strata_mem *m, uint16_t opcode, struct strata_mem_item *items,
		       struct group *g, uint32_t node)
{
	uint64_t cap = 0;
	int rc;

	g->op = op_new(m, opcode, NULL, 0);
	if (!g->op)
		return -ENOMEM;
	for (uint32_t i = 0; i < g->n; i++)
		cap += items[g->idx[i]].len;
	rc = group_request(g->op, items, g, cap);
	if (rc)
		return rc;
	if (opcode == OP_MEM_MPUT || opcode == OP_MEM_MGET) {
		g->tmp = abuf_alloc(cap);
		if (!g->tmp)
			return -ENOMEM;
	}
	if (opcode == OP_MEM_MPUT) {
		uint64_t off = 0;

		for (uint32_t i = 0; i < g->n; i++) {
			memcpy(g->tmp + off, items[g->idx[i]].buf, items[g->idx[i]].len);
			off += items[g->idx[i]].len;
		}
		g->op->bulk = g->tmp;
		g->op->bulk_len = cap;
	} else if (opcode == OP_MEM_MGET) {
		g->op->dst = g->tmp;
		g->op->cap = cap;
	}
	g->op->targets[0] = node;
	g->op->ntargets = 1;
	return 0;
}

/* The values an MGET answered (status 0) are its bulk, back to back:
 * their lengths come from the server, so they are checked against the
 * bytes received before any is copied. */
static int mget_check(const struct mp_result *res, uint32_t n, uint64_t got)
{
	for (uint32_t i = 0; i < n; i++) {
		if (res[i].status)
			continue;
		if (res[i].len > got)
			return STRATA_EBADMSG;
		got -= res[i].len;
	}
	return got ? STRATA_EBADMSG : 0;
}

/* Sets the statuses of g's items from its answer; answered[i]: item i
 * has a copy's status already (a replicated MPUT or MREMOVE goes to
 * several nodes), merged as the single calls merge them. */
static void group_finish(uint16_t opcode, struct strata_mem_item *items, struct group *g,
			 uint8_t *answered)
{
	const struct mp_results *res = &g->op->res;
	uint64_t off = 0;
	int rc;

	rc = g->op->status;
	/* One result per item sent, in order. */
	if (!rc && res->results_n != g->n)
		rc = STRATA_EBADMSG;
	if (!rc && opcode == OP_MEM_MGET)
		rc = mget_check(res->results, g->n, g->op->got);
	for (uint32_t i = 0; i < g->n; i++) {
		struct strata_mem_item *it = &items[g->idx[i]];
		const struct mp_result *r = rc ? NULL : &res->results[i];
		int st = rc ? rc : r->status;

		/* The request's cap is the sum of the buffers: a value may fit
		 * in it and not in its own buffer. */
		if (!rc && opcode == OP_MEM_MGET && r->status == 0) {
			if (r->len <= it->len)
				memcpy(it->buf, g->tmp + off, r->len);
			else
				st = -ENOBUFS;
			off += r->len;
		}
		if (!rc && opcode != OP_MEM_MPUT && (r->status == 0 || opcode == OP_MEM_MGET))
			it->len = r->len;
		it->status = copies_status(opcode, !answered[g->idx[i]], it->status, st);
		answered[g->idx[i]] = 1;
	}
}

static int batch(struct strata_mem *m, uint16_t opcode, struct strata_mem_item *items, size_t n)
{
	uint32_t reps = opcode == OP_MEM_MPUT || opcode == OP_MEM_MREMOVE ? m->o.replicas : 1;
	uint32_t *idx, *cnt, ngroups = 0, nops = 0;
	struct strata_mem_op **ops = NULL;
	uint8_t *answered;
	struct group *gs;
	int rc = 0, first = 0;

	if (n == 0)
		return 0;
	if (n > UINT32_MAX / MAX_REPLICAS)
		return -E2BIG;
	idx = calloc(n * reps, sizeof(*idx));
	cnt = calloc(m->n, sizeof(*cnt));
	gs = calloc(n * reps + m->n, sizeof(*gs));	/* upper bound */
	ops = calloc(n * reps + m->n, sizeof(*ops));
	answered = calloc(n, 1);
	if (!idx || !cnt || !gs || !ops || !answered) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		size_t klen;

		items[i].status = check_key(items[i].key, &klen);
		if (!items[i].status && opcode == OP_MEM_MPUT && items[i].len > FRAME_MAX_BULK)
			items[i].status = -E2BIG;
	}
	/* Per node, split into requests of at most MP_BATCH_MAX items and
	 * FRAME_MAX_BULK bytes; items bigger than that go alone. */
	for (uint32_t node = 0; node < m->n; node++) {
		struct group *g = NULL;
		uint64_t bytes = 0;

		for (size_t i = 0; i < n; i++) {
			uint32_t t[MAX_REPLICAS], nt;
			bool mine = false;

			if (items[i].status)
				continue;
			nt = owners(m, items[i].key, strlen(items[i].key), t, reps);
			for (uint32_t k = 0; k < nt; k++)
				mine = mine || t[k] == node;
			if (!mine)
				continue;
			if (opcode == OP_MEM_MPUT || opcode == OP_MEM_MGET) {
				if (g && (g->n == MP_BATCH_MAX || bytes + items[i].len > FRAME_MAX_BULK))
					g = NULL;
			} else if (g && g->n == MP_BATCH_MAX) {
				g = NULL;
			}
			if (!g) {
				g = &gs[ngroups++];
				g->idx = idx + first;
				g->n = 0;
				g->tmp = NULL;
				/* the node rides in op until group_start */
				g->op = (struct strata_mem_op *)(uintptr_t)(node + 1);
				cnt[node]++;
				bytes = 0;
			}
			g->idx[g->n++] = (uint32_t)i;
			first++;
			bytes += items[i].len;
		}
	}
	for (uint32_t i = 0; i < ngroups; i++) {
		uint32_t node = (uint32_t)(uintptr_t)gs[i].op - 1;
		int r;

		gs[i].op = NULL;
		r = group_build(m, opcode, items, &gs[i], node);
		if (r && gs[i].op) {
			gs[i].op->status = r;
			gs[i].op->done = true;
		} else if (r) {
			for (uint32_t k = 0; k < gs[i].n; k++) {
				uint32_t j = gs[i].idx[k];

				items[j].status = copies_status(opcode, !answered[j], items[j].status, r);
				answered[j] = 1;
			}
		} else {
			ops[nops++] = gs[i].op;
		}
	}
	/* Every node's requests at once, each node's back to back. */
	run_ops(m, ops, nops);
	for (uint32_t i = 0; i < ngroups; i++) {
		if (gs[i].op) {
			group_finish(opcode, items, &gs[i], answered);
			op_destroy(gs[i].op);
		}
		abuf_free(gs[i].tmp);
	}
	for (size_t i = 0; i < n && !rc; i++)
		rc = items[i].status;
out:
	free(idx);
	free(cnt);
	free(gs);
	free(ops);
	free(answered);
	return rc;
}

int strata_mem_mput(struct strata_mem *m, struct strata_mem_item *items, size_t n)
{
	return batch(m, OP_MEM_MPUT, items, n);
}

int strata_mem_mget(struct strata_mem *m, struct strata_mem_item *items, size_t n)
{
	return batch(m, OP_MEM_MGET, items, n);
}

int strata_mem_mremove(struct strata_mem *m, struct strata_mem_item *items, size_t n)
{
	return batch(m, OP_MEM_MREMOVE, items, n);
}

int strata_mem_mexists(struct strata_mem *m, struct strata_mem_item *items, size_t n)
{
	return batch(m, OP_MEM_MEXISTS, items, n);
}

int strata_mem_stats(struct strata_mem *m, struct strata_mem_stats *st)
{
	const struct proto_void none = { 0 };

	memset(st, 0, sizeof(*st));
	st->nodes = m->n;
	for (uint32_t i = 0; i < m->n; i++) {
		struct proto_sync sync = { 0 };
		struct mp_stats s;

		if (mm_stats_call_sync(pick_rc(m), m->addrs[i], &none, &sync, &s))
			continue;
		st->nodes_up++;
		st->capacity += s.capacity;
		st->used += s.used;
		st->objects += s.objects;
		st->pinned += s.pinned;
		st->evictions += s.evictions;
		st->spilled += s.spilled;
		st->reloaded += s.reloaded;
	}
	return st->nodes_up ? 0 : -ECONNREFUSED;
}
