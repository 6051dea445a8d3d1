/*
 * libstrata's memory API (include/strata/mem.h): a consistent-hash ring
 * over the pool's mem nodes, and requests driven by one reactor thread
 * (an rpc_client) with a pooled connection per node. Every call builds an
 * operation, posts it to that thread and, unless asynchronous, waits for
 * it; a value is received straight into the caller's buffer (bulk_dst).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "mem/mem_proto.h"
#include "net/frame.h"
#include "net/rpc.h"
#include "strata/mem.h"

#define MAX_REPLICAS 8u
#define ADDR_LEN 64

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
	pthread_mutex_t lock;
	pthread_cond_t cv;
	uint32_t inflight;
};

struct strata_mem_op {
	struct strata_mem *m;
	struct rpc_client *rc;		/* the I/O thread that drives it */
	struct bbuf body;
	uint16_t opcode;
	const void *bulk;
	uint64_t bulk_len;
	void *dst;
	uint64_t cap;
	uint32_t targets[MAX_REPLICAS];
	uint32_t ntargets, ti;
	bool keep_body;
	bool autofree;
	/* completion */
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool done;
	int status;
	uint64_t len;
	uint64_t got;			/* bytes of bulk received */
	struct bbuf rbody;
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

int strata_mem_open(const char *addrs, const struct strata_mem_opts *opts,
		    struct strata_mem **out)
{
	struct strata_mem *m;
	const char *p = addrs;
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
	for (; m->nrc < m->o.io_threads; m->nrc++) {
		rc = rpc_client_new("strata-mem", m->o.timeout_ms, &m->rc[m->nrc]);
		if (rc)
			goto fail;
	}
	*out = m;
	return 0;
fail:
	for (uint32_t i = 0; m->rc && i < m->nrc; i++)
		rpc_client_free(m->rc[i]);
	free(m->rc);
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
	static unsigned next;
	static __thread unsigned mine = UINT32_MAX;

	if (mine == UINT32_MAX)
		mine = __atomic_fetch_add(&next, 1, __ATOMIC_RELAXED);
	return m->rc[mine % m->nrc];
}

static struct strata_mem_op *op_new(struct strata_mem *m, uint16_t opcode)
{
	struct strata_mem_op *op = calloc(1, sizeof(*op));

	if (!op)
		return NULL;
	op->m = m;
	op->rc = pick_rc(m);
	op->opcode = opcode;
	bbuf_init(&op->body);
	bbuf_init(&op->rbody);
	pthread_mutex_init(&op->lock, NULL);
	pthread_cond_init(&op->cv, NULL);
	return op;
}

static void op_destroy(struct strata_mem_op *op)
{
	bbuf_release(&op->body);
	bbuf_release(&op->rbody);
	pthread_mutex_destroy(&op->lock);
	pthread_cond_destroy(&op->cv);
	free(op);
}

static void op_complete(struct strata_mem_op *op, int status)
{
	struct strata_mem *m = op->m;
	bool autofree = op->autofree;

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

static void op_send(struct strata_mem_op *op);

static void on_reply(void *arg, int status, struct rpc_msg *resp)
{
	struct strata_mem_op *op = arg;

	if (resp && resp->hdr.body_len >= 8 && (status == 0 || status == -ENOBUFS) &&
	    op->opcode != OP_MEM_LIST && op->opcode < OP_MEM_MPUT)
		op->len = get_le64(resp->body);
	if (resp && status == 0)
		op->got = resp->hdr.bulk_len;
	if (resp && op->keep_body && status == 0 &&
	    bbuf_append(&op->rbody, resp->body, resp->hdr.body_len))
		status = -ENOMEM;
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
	struct strata_mem *m = op->m;
	struct rpc_call_args a = {
		.op = op->opcode,
		.body = op->body.buf,
		.body_len = (uint32_t)op->body.len,
		.bulk = op->bulk,
		.bulk_len = op->bulk_len,
		.bulk_dst = op->dst,
		.bulk_cap = op->cap,
		.cb = on_reply,
		.arg = op,
	};
	int rc = rpc_pool_call(rpc_client_pool(op->rc), m->addrs[op->targets[op->ti]], &a);

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
	return *klen > 1024 ? -ENAMETOOLONG : 0;
}

/* Builds a single-key operation for key's owners. */
static int key_op(struct strata_mem *m, uint16_t opcode, const char *key, uint32_t flags,
		  uint64_t arg, struct strata_mem_op **out)
{
	struct strata_mem_op *op;
	struct mp_item it;
	struct wbuf w;
	size_t klen;
	int rc = check_key(key, &klen);

	if (rc)
		return rc;
	op = op_new(m, opcode);
	if (!op)
		return -ENOMEM;
	it.flags = flags;
	it.arg = arg;
	it.key = (const uint8_t *)key;
	it.klen = (uint32_t)klen;
	wbuf_init(&w, &op->body);
	mp_item_encode(&w, &it);
	op->ntargets = owners(m, key, klen, op->targets, m->o.replicas);
	if (w.err) {
		op_destroy(op);
		return w.err;
	}
	*out = op;
	return 0;
}

/* Runs op to completion; returns its status and frees it unless keep. */
static int run(struct strata_mem_op *op)
{
	int rc = op_submit(op);

	if (rc == 0) {
		op_wait_done(op, -1);
		rc = op->status;
	}
	return rc;
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
		ops[i] = op_new(op->m, op->opcode);
		if (!ops[i] || bbuf_append(&ops[i]->body, op->body.buf, op->body.len)) {
			if (ops[i])
				op_destroy(ops[i]);
			n = i;
			rc = -ENOMEM;
			break;
		}
		ops[i]->bulk = op->bulk;
		ops[i]->bulk_len = op->bulk_len;
		ops[i]->targets[0] = op->targets[i];
		ops[i]->ntargets = 1;
	}
	op->ntargets = 1;
	for (uint32_t i = 0; i < n; i++) {
		int r = op_submit(ops[i]);

		if (r) {
			ops[i]->status = r;
			ops[i]->done = true;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		int st;

		op_wait_done(ops[i], -1);
		st = ops[i]->status;
		if (i > 0)
			op_destroy(ops[i]);
		if (op->opcode == OP_MEM_PUT) {
			/* A put succeeds only when every copy is stored. */
			if (st && !rc)
				rc = st;
		} else if (i == 0 || rc == -ENOENT) {
			/* A remove or pin counts where any copy had the key. */
			if (i == 0 || st == 0 || (st != -ENOENT && rc == -ENOENT))
				rc = st;
		}
	}
	op_destroy(op);
	return rc;
}

int strata_mem_put(struct strata_mem *m, const char *key, const void *buf, size_t len,
		   unsigned flags)
{
	struct strata_mem_op *op;
	int rc;

	if (len > FRAME_MAX_BULK)
		return -E2BIG;
	rc = key_op(m, OP_MEM_PUT, key, flags & (STRATA_MEM_PIN | STRATA_MEM_NX), 0, &op);
	if (rc)
		return rc;
	op->bulk = buf;
	op->bulk_len = len;
	return run_all(op);
}

int strata_mem_get_async(struct strata_mem *m, const char *key, void *buf, size_t cap,
			 struct strata_mem_op **out)
{
	struct strata_mem_op *op;
	int rc = key_op(m, OP_MEM_GET, key, 0, cap, &op);

	if (rc)
		return rc;
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
	struct strata_mem_op *op;
	ssize_t rc = strata_mem_get_async(m, key, buf, cap, &op);

	if (rc)
		return rc;
	rc = strata_mem_op_wait(op, -1);
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
	struct strata_mem_op *op;
	ssize_t rc = key_op(m, OP_MEM_EXISTS, key, 0, 0, &op);

	if (rc)
		return rc;
	rc = run(op);	/* fails over to the next replica (on_reply) */
	if (rc == 0)
		rc = (ssize_t)op->len;
	op_destroy(op);
	return rc;
}

int strata_mem_remove(struct strata_mem *m, const char *key)
{
	struct strata_mem_op *op;
	int rc = key_op(m, OP_MEM_REMOVE, key, 0, 0, &op);

	return rc ? rc : run_all(op);
}

int strata_mem_pin(struct strata_mem *m, const char *key, int pin)
{
	struct strata_mem_op *op;
	int rc = key_op(m, OP_MEM_PIN, key, pin ? 1 : 0, 0, &op);

	return rc ? rc : run_all(op);
}

int strata_mem_prefetch(struct strata_mem *m, const char *key)
{
	struct strata_mem_op *op;
	int rc = key_op(m, OP_MEM_GET, key, 0, 0, &op);

	if (rc)
		return rc;
	op->autofree = true;
	rc = op_submit(op);
	if (rc)
		op_destroy(op);
	return rc;
}

ssize_t strata_mem_list(struct strata_mem *m, const char *prefix,
			int (*fn)(void *arg, const char *key, uint64_t len), void *arg)
{
	ssize_t total = 0;
	size_t plen = prefix ? strlen(prefix) : 0;

	if (plen > 1024)
		return -ENAMETOOLONG;
	for (uint32_t i = 0; i < m->n; i++) {
		struct strata_mem_op *op = op_new(m, OP_MEM_LIST);
		struct mp_item it = { .flags = MP_LIST_MAX, .key = (const uint8_t *)prefix,
				      .klen = (uint32_t)plen };
		struct wbuf w;
		struct rbuf r;
		uint32_t n;
		int rc;

		if (!op)
			return -ENOMEM;
		wbuf_init(&w, &op->body);
		mp_item_encode(&w, &it);
		op->targets[0] = i;
		op->ntargets = 1;
		op->keep_body = true;
		rc = w.err ? w.err : run(op);
		if (rc) {
			op_destroy(op);
			return rc;
		}
		rbuf_init(&r, op->rbody.buf, op->rbody.len);
		n = rb_u32(&r);
		for (uint32_t k = 0; k < n && !r.err; k++) {
			const uint8_t *kp;
			uint32_t kl = rb_bytes(&r, &kp, 1024);
			uint64_t len = rb_u64(&r);
			char key[1025];

			if (r.err)
				break;
			memcpy(key, kp, kl);
			key[kl] = '\0';
			total++;
			if (fn && fn(arg, key, len)) {
				op_destroy(op);
				return total;
			}
		}
		op_destroy(op);
		if (r.err)
			return STRATA_EBADMSG;
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

/* Sends items [from, to) of one node's list as one request. */
static int group_start(struct strata_mem *m, uint16_t opcode, struct strata_mem_item *items,
		       struct group *g, uint32_t node)
{
	struct wbuf w;
	uint64_t cap = 0;

	g->op = op_new(m, opcode);
	if (!g->op)
		return -ENOMEM;
	for (uint32_t i = 0; i < g->n; i++)
		cap += items[g->idx[i]].len;
	wbuf_init(&w, &g->op->body);
	mp_batch_encode_hdr(&w, g->n, opcode == OP_MEM_MGET ? cap : 0);
	for (uint32_t i = 0; i < g->n; i++) {
		struct strata_mem_item *it = &items[g->idx[i]];
		struct mp_item mi = { .flags = it->flags & (STRATA_MEM_PIN | STRATA_MEM_NX),
				      .arg = opcode == OP_MEM_MPUT ? it->len : 0,
				      .key = (const uint8_t *)it->key,
				      .klen = (uint32_t)strlen(it->key) };

		mp_item_encode(&w, &mi);
	}
	if (w.err)
		return w.err;
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
	g->op->keep_body = true;
	return op_submit(g->op);
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

static int group_finish(uint16_t opcode, struct strata_mem_item *items, struct group *g)
{
	struct mp_result *res = NULL;
	uint64_t off = 0;
	int rc;

	op_wait_done(g->op, -1);
	rc = g->op->status;
	if (!rc) {
		res = calloc(g->n, sizeof(*res));
		rc = res ? mp_results_decode(g->op->rbody.buf, (uint32_t)g->op->rbody.len, res, g->n)
			 : -ENOMEM;
	}
	if (!rc && opcode == OP_MEM_MGET)
		rc = mget_check(res, g->n, g->op->got);
	for (uint32_t i = 0; i < g->n; i++) {
		struct strata_mem_item *it = &items[g->idx[i]];

		if (rc) {
			it->status = rc;
			continue;
		}
		it->status = res[i].status;
		/* The request's cap is the sum of the buffers: a value may fit
		 * in it and not in its own buffer. */
		if (opcode == OP_MEM_MGET && res[i].status == 0) {
			if (res[i].len <= it->len)
				memcpy(it->buf, g->tmp + off, res[i].len);
			else
				it->status = -ENOBUFS;
			off += res[i].len;
		}
		if (opcode != OP_MEM_MPUT && (res[i].status == 0 || opcode == OP_MEM_MGET))
			it->len = res[i].len;
	}
	free(res);
	return rc;
}

static int batch(struct strata_mem *m, uint16_t opcode, struct strata_mem_item *items, size_t n)
{
	uint32_t reps = opcode == OP_MEM_MPUT || opcode == OP_MEM_MREMOVE ? m->o.replicas : 1;
	uint32_t *idx, *cnt, ngroups = 0;
	struct group *gs;
	int rc = 0, first = 0;

	if (n == 0)
		return 0;
	if (n > UINT32_MAX / MAX_REPLICAS)
		return -E2BIG;
	idx = calloc(n * reps, sizeof(*idx));
	cnt = calloc(m->n, sizeof(*cnt));
	gs = calloc(n * reps + m->n, sizeof(*gs));	/* upper bound */
	if (!idx || !cnt || !gs) {
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
		r = group_start(m, opcode, items, &gs[i], node);
		if (r && gs[i].op) {
			gs[i].op->status = r;
			gs[i].op->done = true;
		} else if (r) {
			for (uint32_t k = 0; k < gs[i].n; k++)
				items[gs[i].idx[k]].status = r;
		}
	}
	for (uint32_t i = 0; i < ngroups; i++) {
		if (gs[i].op) {
			group_finish(opcode, items, &gs[i]);
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
	memset(st, 0, sizeof(*st));
	st->nodes = m->n;
	for (uint32_t i = 0; i < m->n; i++) {
		struct strata_mem_op *op = op_new(m, OP_MEM_STATS);
		struct mp_stats s;
		int rc;

		if (!op)
			return -ENOMEM;
		op->targets[0] = i;
		op->ntargets = 1;
		op->keep_body = true;
		rc = run(op);
		if (!rc && !mp_stats_decode(op->rbody.buf, (uint32_t)op->rbody.len, &s)) {
			st->nodes_up++;
			st->capacity += s.capacity;
			st->used += s.used;
			st->objects += s.objects;
			st->pinned += s.pinned;
			st->evictions += s.evictions;
			st->spilled += s.spilled;
			st->reloaded += s.reloaded;
		}
		op_destroy(op);
	}
	return st->nodes_up ? 0 : -ECONNREFUSED;
}
