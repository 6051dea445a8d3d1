/*
 * The storage service's life cycle: its entry in the daemon's registry
 * (storage_service), its [storage] config, start, the order of a stop
 * (quiesce, close the pools, detach), status and metrics; the targets (one
 * chunk store each, owned by one reactor thread) with their per-chunk
 * state; and the hand-over of each request to the reactor of its target.
 *
 * The rest of the service, each part over storage_int.h:
 *  - storage_map.c: this node and mgmt (the cluster map, registration,
 *    heartbeats and the lease, the checks of a request's ref, reports);
 *  - chain_update.c: updates down the chain, from the head to the tail;
 *  - chain_read.c: reads, and which replica may serve one (CRAQ);
 *  - resync.c: resync, repair and scrub, and the chunk listing they use;
 *  - recover.c: the chains a restarted member holds back until it has
 *    the newest copies of the other members.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "net/rpc.h"
#include "chunk_store.h"
#include "storage_int.h"
#include "storage_service.h"
#include "storage/target_dir.h"
#include "common/errors_int.h"

/* A directory of storage.target_dirs fits in t->dir. */
#define TARGET_DIR_CAP CFG_STR_MAX

/* ---- targets and their per-chunk state ---- */

static uint32_t chash(const struct chunk_id *id)
{
	uint64_t h = id->ino * 0x9E3779B97F4A7C15ull ^ (id->idx + 0x632BE59BD9B4E019ull);

	h ^= h >> 29;
	return (uint32_t)h & (CSTATE_BUCKETS - 1);
}

struct cstate *cstate_find(struct target *t, const struct chunk_id *id, bool create)
{
	struct cstate **b = &t->buckets[chash(id)], *c;

	for (c = *b; c; c = c->next) {
		if (c->id.ino == id->ino && c->id.idx == id->idx)
			return c;
	}
	if (!create)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->id = *id;
	c->q_tail = &c->q_head;
	c->next = *b;
	*b = c;
	return c;
}

void cstate_maybe_free(struct target *t, struct cstate *c)
{
	struct cstate **b;
	struct chunk_info ci;

	if (c->inflight || c->q_head || c->needsync || c->repairing || c->removing ||
	    c->dirty || c->draining)
		return;
	/* The head handed out a version it does not hold (its own write
	 * failed): it must not hand it out again. */
	if (c->assigned && t->cs && (chunk_stat(t->cs, &c->id, &ci), ci.version < c->assigned))
		return;
	for (b = &t->buckets[chash(&c->id)]; *b; b = &(*b)->next) {
		if (*b == c) {
			*b = c->next;
			free(c);
			return;
		}
	}
}

void cstate_set_dirty(struct target *t, struct cstate *c, bool dirty)
{
	if (dirty == c->dirty)
		return;
	c->dirty = dirty;
	if (dirty) {
		c->dnext = t->dirty;
		t->dirty = c;
		return;
	}
	for (struct cstate **pp = &t->dirty; *pp; pp = &(*pp)->dnext) {
		if (*pp == c) {
			*pp = c->dnext;
			break;
		}
	}
	c->dnext = NULL;
}

struct target *find_target(struct storage *st, uint32_t id)
{
	for (int i = 0; i < st->ntargets; i++) {
		if (st->targets[i].id == id)
			return &st->targets[i];
	}
	return NULL;
}

int cap_allow(struct target *t, struct svc_req *req, const struct sp_cap *cap, uint64_t ino,
	      uint8_t need)
{
	const struct net_ident *id = svc_req_ident(req);
	struct chunk_cap c;
	int rc;

	if (id->role != NET_ROLE_CLIENT)
		return 0;
	rc = -EACCES;
	if (cap && t->st->env.key) {
		sp_cap_get(cap, &c);
		rc = cap_cache_check(&t->caps, t->st->env.key, &c, ino, need,
				     now_ns() / 1000000000);
	}
	if (rc && svc_req_once(req, SVC_ONCE_CAP))
		log_warn("storage", "refused op %u of ino %llu from '%s' token %s: no valid "
			 "chunk capability (further refusals on this connection are not logged)",
			 req->hdr.opcode, (unsigned long long)ino, svc_req_peer(req), id->claims.id);
	return rc;
}

/* ---- routing ---- */

/*
 * Handlers are routed by the daemon to a fixed owner; a request for a
 * target owned by another reactor is handed over here, by the target it
 * names: the first field of a batch or space request, the ref's target id
 * (third field of a chunk ref, and of a listing's chain ref, laid out the
 * same) for the others. Only that prefix is read here; the handler
 * decodes the whole body.
 */
static struct target *req_target(struct storage *st, const struct svc_req *req)
{
	struct rbuf r;
	uint32_t target_id;

	rbuf_init(&r, req->body, req->hdr.body_len);
	if (req->hdr.opcode == OP_CHUNK_BATCH_READ || req->hdr.opcode == OP_TARGET_SPACE) {
		struct sp_target tg;

		sp_target_dec(&r, &tg);
		target_id = tg.target_id;
	} else {
		/* The prefix only (chain id, chain version, target id): a
		 * listing's chain ref is shorter than a chunk ref with its
		 * capability, and a failed decode here would run the handler
		 * on this thread instead of the target's. */
		(void)rb_u32(&r);
		(void)rb_u64(&r);
		target_id = rb_u32(&r);
	}
	return r.err ? NULL : find_target(st, target_id);
}

/* ---- QoS: the caps of a client's credential (qos.h) ---- */

/* A request held until its credential's bucket has room. */
struct qos_wait {
	struct qos_wait *next;
	struct svc_req *req;
	svc_handler_fn fn;
	uint64_t due_ns;		/* qos_now_ns(): when it may be served */
};

/* The monotonic clock the buckets run on. */
static uint64_t qos_now_ns(void)
{
	return (uint64_t)(mono_sec() * 1e9);
}

/* What req moves: the bytes of its data (a write's, a read's range, a
 * batch's ranges) and its chunk operations (a batch: one per item). A
 * body that does not decode costs one operation (its handler refuses
 * it). */
static void qos_cost(const struct svc_req *req, uint64_t *bytes, uint32_t *ops)
{
	struct sp_read rd;
	struct rbuf r;
	uint32_t n;

	*bytes = 0;
	*ops = 1;
	switch (req->hdr.opcode) {
	case OP_CHUNK_WRITE:
		*bytes = req->hdr.bulk_len;
		break;
	case OP_CHUNK_READ:
		if (!sp_read_decode(req->body, req->hdr.body_len, &rd))
			*bytes = rd.len;
		break;
	case OP_CHUNK_READ_SHM: {
		struct sp_shm_read sr;

		if (!sp_shm_read_decode(req->body, req->hdr.body_len, &sr))
			*bytes = sr.rd.len;
		break;
	}
	case OP_CHUNK_WRITE_SHM: {
		struct sp_shm_write sw;

		if (!sp_shm_write_decode(req->body, req->hdr.body_len, &sw))
			*bytes = sw.upd.len;
		break;
	}
	case OP_CHUNK_BATCH_READ:
		/* Walked, not decoded: no allocation. The layout of sp_batch:
		 * target, count, then each item (chain, chain version, ino,
		 * idx, offset, len, cap). */
		rbuf_init(&r, req->body, req->hdr.body_len);
		(void)rb_u32(&r);
		n = rb_u32(&r);
		for (uint32_t i = 0; i < n && i < SP_BATCH_MAX && !r.err; i++) {
			uint64_t len;

			(void)rb_u32(&r);
			(void)rb_u64(&r);
			(void)rb_u64(&r);
			(void)rb_u64(&r);
			(void)rb_u32(&r);
			len = rb_u32(&r);
			(void)rb_u32(&r);
			if (!r.err) {
				*bytes += len;
				*ops = i + 1;
			}
		}
		break;
	default:
		break;
	}
}

/* Serves the held requests whose time came, in order, then arms t's
 * timer for the next one. A timer that cannot be armed (no memory)
 * would leave them held for ever: they are served now, logged. */
static void qos_release(void *arg)
{
	struct target *t = arg;
	bool now_all = false;

	for (;;) {
		struct qos_wait *w = t->qos_waiting;
		uint64_t now = qos_now_ns();

		if (!w)
			return;
		if (w->due_ns > now && !now_all) {
			/* Rounded up to the timer's milliseconds: never early. */
			if (!reactor_timer_arm(t->r, &t->qos_timer,
					       (w->due_ns - now + 999999) / 1000000))
				return;
			log_error("storage", "target %u: qos: cannot arm a timer; the requests "
				  "held are served now", t->id);
			now_all = true;
		}
		t->qos_waiting = w->next;
		w->next = t->qos_free;
		t->qos_free = w;
		w->fn(t->st, w->req);
	}
}

/*
 * On t's thread, for a client whose token has caps or a tenant: counts
 * the bytes its tenant moves (meter.h); with caps, charges req to its
 * credential and serves it with fn now, or holds it until its bucket
 * has room. Held requests are kept in deadline order, a new one after
 * every one due no later: one credential's deadlines never decrease
 * (qos.h), so its requests keep the order they arrived in, and one due
 * now is served at once only when no held request is due by now (else
 * it could pass one of its own credential's held just as long).
 * Forwarded updates come from daemons and are never charged: a write
 * counts once, at the head.
 */
static void qos_gate(struct storage *st, struct svc_req *req, svc_handler_fn fn)
{
	const struct net_ident *id = svc_req_ident(req);
	struct target *t = req_target(st, req);
	struct qos_wait *w, **pp;
	struct qos_caps caps;
	uint64_t bytes, wait, now;
	uint32_t ops;

	if (!t || t->closing || id->role != NET_ROLE_CLIENT) {
		fn(st, req);
		return;
	}
	qos_cost(req, &bytes, &ops);
	meter_add(&st->meter, id->claims.tenant, bytes, req->hdr.opcode == OP_CHUNK_WRITE ||
		  req->hdr.opcode == OP_CHUNK_WRITE_SHM);
	if (!qos_caps_of(&id->claims, &caps)) {
		fn(st, req);
		return;
	}
	now = qos_now_ns();
	wait = qos_charge(&st->qos, id->claims.id, &caps, bytes, ops, now);
	if (!wait && (!t->qos_waiting || t->qos_waiting->due_ns > now)) {
		fn(st, req);
		return;
	}
	w = t->qos_free;
	if (w)
		t->qos_free = w->next;
	else if (!(w = malloc(sizeof(*w)))) {
		/* Served now it could pass this credential's held ones. */
		svc_reply(req, -ENOMEM);
		return;
	}
	w->req = req;
	w->fn = fn;
	w->due_ns = now + wait;
	for (pp = &t->qos_waiting; *pp && (*pp)->due_ns <= w->due_ns; pp = &(*pp)->next)
		;
	w->next = *pp;
	*pp = w;
	if (!wait)
		qos_release(t);	/* due now, behind ones due already */
	else if (t->qos_waiting == w)
		qos_release(t);	/* the first: (re)arms the timer */
}

/* target_quiesce: the requests held are answered -ESHUTDOWN, and the
 * entries freed. */
static void qos_stop_target(struct target *t)
{
	struct qos_wait *w;

	reactor_timer_cancel(t->r, &t->qos_timer);
	while ((w = t->qos_waiting)) {
		t->qos_waiting = w->next;
		svc_reply(w->req, -ESHUTDOWN);
		free(w);
	}
	while ((w = t->qos_free)) {
		t->qos_free = w->next;
		free(w);
	}
}

/* Hands req to its target's reactor: to fn, or through gate (qos_gate)
 * to fn when its credential has caps or a tenant (whose bytes are
 * counted, meter.h) and gate is given (the chunk operations; a space
 * query or a listing is not charged). */
static void dispatch(struct storage *st, struct svc_req *req, svc_handler_fn fn,
		     svc_handler_fn gate)
{
	const struct net_ident *id = svc_req_ident(req);
	struct target *t = req_target(st, req);
	struct qos_caps caps;

	if (!t)
		fn(st, req);	/* answers "no such target" */
	else if (gate && id->role == NET_ROLE_CLIENT &&
		 (id->claims.tenant[0] || qos_caps_of(&id->claims, &caps)))
		svc_handoff(req, t->r, gate, st);
	else
		svc_handoff(req, t->r, fn, st);
}

#define ROUTE(name, fn) \
	static void gate_##name(void *svc, struct svc_req *req) { qos_gate(svc, req, fn); } \
	static void route_##name(void *svc, struct svc_req *req) \
	{ dispatch(svc, req, fn, gate_##name); }
ROUTE(update, op_update)
ROUTE(read, op_read)
ROUTE(read_shm, op_read_shm)
ROUTE(write_shm, op_write_shm)
ROUTE(batch, op_batch_read)
ROUTE(stat, op_stat)
static void route_space(void *svc, struct svc_req *req) { dispatch(svc, req, op_space, NULL); }
static void route_list(void *svc, struct svc_req *req) { dispatch(svc, req, op_chunk_list, NULL); }
#undef ROUTE

/* ---- start and stop ---- */

static void on_cs_event(void *arg, uint32_t events)
{
	struct target *t = arg;

	(void)events;
	chunk_store_poll(t->cs);
}

static void poll_task(void *arg)
{
	struct target *t = arg;

	if (t->cs)	/* not detached since */
		chunk_store_poll(t->cs);
}

/* An op finished outside the poll (a read answered from the page cache):
 * its callback runs after this batch of events, without the eventfd. */
static bool poll_soon(void *arg)
{
	struct target *t = arg;

	return reactor_defer(t->r, poll_task, t) == 0;
}

static void target_attach(void *arg)
{
	struct target *t = arg;

	reactor_timer_init(&t->qos_timer, qos_release, t);
	if (reactor_watch_add(t->r, &t->w, chunk_store_fd(t->cs), EPOLLIN, on_cs_event, t))
		log_error("storage", "target %u: cannot watch its ring", t->id);
	resync_start_target(t);
	scrub_start(t, (uint64_t)t->st->cfg->scrub_rate_mb);
}

/* First step of a stop, on the target's thread: no new update starts, no
 * resync or repair goes on. */
static void target_quiesce(void *arg)
{
	struct target *t = arg;

	t->closing = true;
	qos_stop_target(t);
	resync_stop_target(t);
	recover_stop_target(t);
}

/* Last step, once the pools are gone (every forward answered): the
 * store's operations complete, then the per-chunk state goes. */
static void target_detach(void *arg)
{
	struct target *t = arg;

	reactor_watch_del(t->r, &t->w);
	/* Completes in-flight operations; their replies go to closed
	 * connections and are dropped. */
	chunk_store_close(t->cs);
	t->cs = NULL;
	for (uint32_t b = 0; b < CSTATE_BUCKETS; b++) {
		while (t->buckets[b]) {
			struct cstate *c = t->buckets[b];

			t->buckets[b] = c->next;
			update_queue_drop(c, -ESHUTDOWN);
			if (c->lost)
				CNT(t->st, n_lost, (uint64_t)-1);
			free(c);
		}
	}
}

struct pool_ctx {
	struct storage *st;
	int i;
};

static void pool_free_on(void *arg)
{
	struct pool_ctx *p = arg;

	if (p->i == 0)
		reactor_timer_cancel(p->st->env.reactors[0], &p->st->hb);
	rpc_pool_free(p->st->pools[p->i]);
	p->st->pools[p->i] = NULL;
}

static void storage_stop(void *svc)
{
	struct storage *st = svc;

	/* Updates in flight hold their cstate and their forward: nothing new
	 * starts, the pools close (every forward completes with an error),
	 * then each store completes what it has, and only then does the
	 * per-chunk state go. */
	for (int i = 0; i < st->ntargets; i++) {
		if (st->targets[i].cs)
			reactor_call(st->targets[i].r, target_quiesce, &st->targets[i]);
	}
	for (int i = 0; i < st->env.nreactors; i++) {
		struct pool_ctx p = { st, i };

		if (st->pools[i])
			reactor_call(st->env.reactors[i], pool_free_on, &p);
	}
	for (int i = 0; i < st->ntargets; i++) {
		st->targets[i].pool = NULL;
		if (st->targets[i].cs)
			reactor_call(st->targets[i].r, target_detach, &st->targets[i]);
	}
	shm_serve_stop(st);
	map_put(st, st->snap);
	qos_table_release(&st->qos);
	meter_release(&st->meter);
	pthread_mutex_destroy(&st->map_lock);
	free(st->pools);
	free(st->targets);
	free(st);
}

static int storage_start(const struct service_env *env, void **out)
{
	struct storage *st = calloc(1, sizeof(*st));
	struct chunk_store_opts o;
	char dir[CFG_STR_MAX + 16], err[CFG_STR_MAX + 64], *dirs = NULL;
	int rc = 0, ndirs = 0;

	if (!st)
		return -ENOMEM;
	st->env = *env;
	hb_init(st);	/* first: storage_stop cancels its timer, whatever failed */
	if (mgmt_addrs_init(&st->mgmt, env->mgmt_addr)) {
		log_error("storage", "key 'mgmt.address': '%s' is not a list of 1 to %d mgmt"
			  " addresses (host:port[,host:port...])", env->mgmt_addr, MGMT_ADDRS_MAX);
		free(st);
		return STRATA_ECONFIG;
	}
	st->cfg = env->cfg;
	st->node_id = env->node_id;
	/* Unique across restarts of this node (service.h). */
	st->incarnation = service_incarnation();
	st->hb_ms = env->heartbeat_ms;
	st->timeout_ms = env->rpc_timeout_ms;
	pthread_mutex_init(&st->map_lock, NULL);
	qos_table_init(&st->qos, 0);
	meter_init(&st->meter);
	st->ntargets = (int)st->cfg->targets;
	dirs = calloc(TARGET_DIRS_MAX, TARGET_DIR_CAP);
	if (!dirs) {
		rc = -ENOMEM;
		goto fail;
	}
	ndirs = target_dirs_parse(st->cfg->target_dirs, dirs, TARGET_DIR_CAP, TARGET_DIRS_MAX,
				  err, sizeof(err));
	if (ndirs < 0) {	/* storage_check passed it: only an odd change */
		log_error("storage", "key 'storage.target_dirs': %s", err);
		rc = STRATA_ECONFIG;
		goto fail;
	}
	if (ndirs)
		st->ntargets = ndirs;
	st->targets = calloc((size_t)st->ntargets, sizeof(*st->targets));
	st->pools = calloc((size_t)env->nreactors, sizeof(*st->pools));
	if (!st->targets || !st->pools) {
		rc = -ENOMEM;
		goto fail;
	}
	for (int i = 0; i < env->nreactors; i++) {
		rc = rpc_pool_new(env->reactors[i], st->timeout_ms, &st->pools[i]);
		if (rc)
			goto fail;
	}
	rc = service_data_ident(env->data, &st->ident);
	if (rc)
		goto fail;
	snprintf(dir, sizeof(dir), "%s/targets", env->data);
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		rc = -errno;
		log_error("storage", "cannot create '%s': %s", dir, strerror(errno));
		goto fail;
	}
	chunk_store_opts_init(&o, sizeof(o));
	o.capacity = st->cfg->capacity;
	o.sync_writes = st->cfg->sync_writes;
	o.buffered_reads = st->cfg->buffered_reads;
	for (int i = 0; i < st->ntargets; i++) {
		struct target *t = &st->targets[i];

		t->idx = (uint32_t)i;
		t->id = storage_target_id(st->node_id, (uint32_t)i);
		t->st = st;
		t->r = env->reactors[i % env->nreactors];
		t->pool = st->pools[i % env->nreactors];
		if (ndirs) {
			snprintf(t->dir, sizeof(t->dir), "%s", dirs + (size_t)i * TARGET_DIR_CAP);
		} else {
			snprintf(t->dir, sizeof(t->dir), "%s/targets/%d", env->data, i);
			if (mkdir(t->dir, 0755) < 0 && errno != EEXIST) {
				rc = -errno;
				log_error("storage", "cannot create '%s': %s", t->dir, strerror(errno));
				goto fail;
			}
		}
		rc = target_dir_claim(t->dir, st->ident, t->idx);
		if (rc)
			goto fail;
		o.on_done = poll_soon;
		o.on_done_arg = t;
		rc = chunk_store_open(t->dir, &o, &t->cs);
		if (!rc)
			rc = chunk_fs(t->cs, &t->fs);
		if (rc) {
			log_error("storage", "cannot open target %u in '%s': %s", t->id, t->dir,
				  strata_strerror(rc));
			goto fail;
		}
		reactor_call(t->r, target_attach, t);
		log_info("storage", "target %u in '%s' (%s I/O)", t->id, t->dir,
			 chunk_store_is_direct(t->cs) ? "O_DIRECT" : "buffered");
	}
	storage_route(env->srv, NULL, &(const struct storage_handlers){
		.st_write = route_update, .st_truncate = route_update, .st_remove = route_update,
		.st_read = route_read, .st_verify = route_read, .st_batch = route_batch,
		.st_stat = route_stat, .st_space = route_space, .st_list = route_list,
		.st_read_shm = route_read_shm, .st_shm_check = op_shm_check,
		.st_write_shm = route_write_shm,
	}, st);
	if (st->cfg->shm_reads) {
		rc = shm_serve_start(st);
		if (rc)
			goto fail;
	}
	reactor_post(env->reactors[0], hb_start, st);
	free(dirs);
	*out = st;
	return 0;
fail:
	free(dirs);
	storage_stop(st);
	return rc;
}

static void tenant_json(void *arg, const char *tenant, uint64_t read, uint64_t written)
{
	json_array_append_new(arg, json_pack("{s:s, s:I, s:I}", "tenant", tenant, "read_bytes",
					     (json_int_t)read, "write_bytes", (json_int_t)written));
}

/* Bytes moved per tenant (meter.h), for the composer's usage. */
static void status_tenants(struct storage *st, json_t *o)
{
	json_t *a = json_array();

	meter_each(&st->meter, tenant_json, a);
	json_object_set_new(o, "tenants", a);
	json_object_set_new(o, "tenants_overflow_bytes",
			    json_integer((json_int_t)__atomic_load_n(&st->meter.overflow,
								     __ATOMIC_RELAXED)));
}

static void storage_status(void *svc, json_t *o)
{
	struct storage *st = svc;
	json_t *ts = json_array();

	json_object_set_new(o, "map_version", json_integer((json_int_t)map_version(st)));
	json_object_set_new(o, "registered", json_boolean(st->registered));
	for (int i = 0; i < st->ntargets; i++) {
		json_t *t = json_object();
		uint64_t total = 0, used = 0;

		if (st->targets[i].cs)
			chunk_space(st->targets[i].cs, &total, &used);
		json_object_set_new(t, "id", json_integer(st->targets[i].id));
		json_object_set_new(t, "dir", json_string(st->targets[i].dir));
		json_object_set_new(t, "capacity", json_integer((json_int_t)total));
		json_object_set_new(t, "used", json_integer((json_int_t)used));
		json_array_append_new(ts, t);
	}
	json_object_set_new(o, "targets", ts);
	status_tenants(st, o);
}

/* Each target's capacity, usage and free space (what a new chunk may
 * still take), one series per target. */
static void target_space_metrics(struct storage *st, struct bbuf *out)
{
	static const struct { const char *name, *help; } m[3] = {
		{ "strata_storage_target_capacity_bytes", "a target's capacity" },
		{ "strata_storage_target_used_bytes", "bytes a target's chunks take" },
		{ "strata_storage_target_free_bytes",
		  "what a new chunk may still take on a target (mgmt holds it full below "
		  "mgmt.full_free or past mgmt.full_pct)" },
	};
	char id[16];

	for (int k = 0; k < 3; k++) {
		metrics_head(out, m[k].name, "gauge", m[k].help);
		for (int i = 0; i < st->ntargets; i++) {
			uint64_t v[3] = { 0, 0, 0 };

			if (!st->targets[i].cs)
				continue;
			chunk_space(st->targets[i].cs, &v[0], &v[1]);
			chunk_space_avail(st->targets[i].cs, &v[2]);
			snprintf(id, sizeof(id), "%u", st->targets[i].id);
			metrics_series(out, m[k].name, "target", id, (double)v[k]);
		}
	}
}

static void storage_metrics(void *svc, struct bbuf *out)
{
	struct storage *st = svc;
	struct qos_stats qs;

#define M(name, help, f) metrics_put(out, name, "counter", help, \
	(double)__atomic_load_n(&st->f, __ATOMIC_RELAXED))
	M("strata_storage_writes_total", "chunk writes applied", n_writes);
	M("strata_storage_write_bytes_total", "bytes written", bytes_written);
	M("strata_storage_reads_total", "chunk reads served", n_reads);
	M("strata_storage_read_bytes_total", "bytes read", bytes_read);
	M("strata_storage_stale_total", "requests refused for a stale map", n_stale);
	M("strata_storage_dirty_total", "reads refused on a dirty replica", n_dirty);
	M("strata_storage_integrity_errors_total", "checksum mismatches", n_integrity);
	M("strata_storage_mapped_reads_total", "reads answered from a mapping of the page cache (no read into a buffer)", n_mapped);
	M("strata_storage_batch_reads_total", "batch read requests (their items count as reads)",
	  n_batches);
	M("strata_storage_shm_reads_total", "reads answered into a same-host reader's shared memory",
	  n_shm_reads);
	M("strata_storage_shm_writes_total",
	  "chunk writes applied whose bytes came through a same-host writer's shared memory",
	  n_shm_writes);
	M("strata_storage_verify_total", "checks asked for by readers that got bad bytes", n_verify);
	M("strata_storage_synced_chunks_total", "chunks copied by resync and repair", n_synced_chunks);
	M("strata_storage_synced_bytes_total", "bytes copied by resync and repair", bytes_synced);
	M("strata_storage_repaired_total", "needsync chunks repaired", n_repaired);
	M("strata_storage_reclaimed_chunks_total", "copies of chains this node left, removed",
	  n_reclaimed);
	M("strata_storage_scrubbed_total", "chunks verified by the scrubber", n_scrubbed);
#undef M
	qos_stats_get(&st->qos, qos_now_ns(), &qs);
	metrics_put(out, "strata_storage_qos_charged_total", "counter",
		    "client requests charged to a credential's QoS caps", (double)qs.charged);
	metrics_put(out, "strata_storage_qos_delayed_total", "counter",
		    "of them, held until the credential's bucket had room", (double)qs.delayed);
	metrics_put(out, "strata_storage_qos_delay_ms_total", "counter",
		    "milliseconds requests were held for QoS caps, summed", (double)qs.delay_ms);
	metrics_put(out, "strata_storage_qos_overflow_total", "counter",
		    "requests paced in the shared bucket: the credential table was full",
		    (double)qs.overflow);
	metrics_put(out, "strata_storage_qos_credentials", "gauge",
		    "credentials with caps that owe time here now", (double)qs.active);
	metrics_put(out, "strata_storage_chunks_lost", "gauge",
		    "chunks held here with no intact replica left in their chain",
		    (double)__atomic_load_n(&st->n_lost, __ATOMIC_RELAXED));
	{
		uint64_t live, attached, refused;

		shm_stats(st, &live, &attached, &refused);
		metrics_put(out, "strata_storage_shm_regions", "gauge",
			    "same-host readers' shared-memory regions mapped now", (double)live);
		metrics_put(out, "strata_storage_shm_attached_total", "counter",
			    "shared-memory regions same-host readers attached", (double)attached);
		metrics_put(out, "strata_storage_shm_refused_total", "counter",
			    "shared-memory attaches refused (bad message, memfd or seals)",
			    (double)refused);
	}
	target_space_metrics(st, out);
}

#define K(name, type, field, def, min, max, help) \
	CFG_KEY(struct storage_cfg, "storage", name, type, field, def, min, max, help)
static const struct cfg_key storage_keys[] = {
	K("targets", CFG_INT, targets, "1", 1, 64, "targets (directories) on this node"),
	K("capacity", CFG_SIZE, capacity, "0", 0, 0, "bytes per target (0 = disk)"),
	K("sync_writes", CFG_BOOL, sync_writes, "false", 0, 0, "fdatasync each chunk update"),
	K("buffered_reads", CFG_BOOL, buffered_reads, "false", 0, 0,
	  "serve reads through the page cache (writes stay O_DIRECT)"),
	K("shm_reads", CFG_BOOL, shm_reads, "true", 0, 0,
	  "answer readers and take writers' bytes on this host through shared memory they hand over"),
	K("scrub_rate_mb", CFG_INT, scrub_rate_mb, "0", 0, 100000,
	  "background scrub MB/s (0 = off)"),
	K("target_dirs", CFG_STR, target_dirs, "", 0, 0,
	  "directories, one target each (one per disk), comma-separated; empty: DATA/targets/N"),
};
#undef K
static const struct cfg_schema storage_schema = CFG_SCHEMA(storage_keys);

static int storage_check(const void *cfg, char *err, size_t errlen)
{
	const struct storage_cfg *c = cfg;
	char *dirs = calloc(TARGET_DIRS_MAX, TARGET_DIR_CAP), why[CFG_STR_MAX + 64];
	int n;

	if (!dirs) {
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	n = target_dirs_parse(c->target_dirs, dirs, TARGET_DIR_CAP, TARGET_DIRS_MAX, why,
			      sizeof(why));
	free(dirs);
	if (n < 0) {
		snprintf(err, errlen, "key 'storage.target_dirs': %s", why);
		return STRATA_ECONFIG;
	}
	if (n && c->targets != 1 && c->targets != n) {
		snprintf(err, errlen, "keys 'storage.targets' (%lld) and 'storage.target_dirs' "
			 "(%d directories) disagree: set one of them", (long long)c->targets, n);
		return STRATA_ECONFIG;
	}
	return 0;
}

const struct service_def storage_service = {
	.name = "storage",
	.schema = &storage_schema,
	.cfg_size = sizeof(struct storage_cfg),
	.check = storage_check,
	.start = storage_start,
	.stop = storage_stop,
	.status = storage_status,
	.metrics = storage_metrics,
};
