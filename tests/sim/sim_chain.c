/*
 * sim_chain: a deterministic simulation of chain replication.
 *
 * One run (a seed) builds a cluster of simulated stratad processes -- mgmt
 * on node 1, 3 to 5 storage nodes, maybe a spare, a client node -- running
 * the real mgmt, storage and client code on the simulated platform
 * (sim.h), drives a workload of writes, truncates, reads and removes on a
 * few chunks through one or two real storage clients, injects faults
 * (crashes and restarts, disk errors, full targets, lost, duplicated,
 * delayed and reordered messages, cut links, mgmt restarts, drains and
 * target replacements), heals everything, lets the cluster settle, reads
 * every chunk from every serving replica, and checks the history
 * (sim_check.h) and the replicas (here: same version, same bytes, at every
 * commit of a serving replica and at the end).
 *
 * Batches fork one child per seed: a run leaves crashed processes' memory
 * behind on purpose (a kill -9 frees nothing), and a child starts each
 * seed from the same state, so a seed replays alone as in a batch. A
 * failing seed is run again with its trace on, to show why.
 *
 *   sim_chain --seeds FIRST:COUNT [--steps N]     a batch; exit 1 on any violation
 *   sim_chain --seed N [--verbose] [--steps N]    one run, with its trace
 *   sim_chain --replay-check FIRST:COUNT          each seed twice: same trace digest
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/storage_client.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/cluster_map.h"
#include "mgmt/mgmt_service.h"
#include "net/codec.h"
#include "net/rpc.h"
#include "net/server.h"
#include "proto/mgmt.h"
#include "proto/storage.h"
#include "sim.h"
#include "sim_check.h"
#include "storage/storage_service.h"
#include "strata/errors.h"

#define MGMT_ID 1u
#define MGMT_ADDR "sim1:7300"
#define MGMT_DB "sim/n1/mgmt.db"
#define MAX_CHUNKS 4u
#define MAX_CLIENTS 2u
#define MAX_LANES 6u
#define MAX_FAULTS 16u
#define CHUNK_CAP (16u << 10)
#define SEC 1000000ull
#define MS 1000ull
/* The workload's length, about: faults fall within it. */
#define WORK_SPAN_US (10 * SEC)

enum fkind { F_CRASH, F_DISK, F_FULL, F_NET, F_CUT, F_MGMT, F_DRAIN, F_REPLACE, F_NKINDS };

static const char *const fkind_names[F_NKINDS] = {
	"crash", "disk", "full", "net", "cut", "mgmt", "drain", "replace",
};

/* ---- the scenario a seed draws ---- */

struct scen {
	uint64_t seed;
	uint32_t nstor;			/* storage nodes 2..nstor+1 */
	uint32_t ntgt;			/* targets per storage node */
	uint32_t r;
	uint32_t threads[SIM_MAX_NODES + 1];
	bool spare;
	uint32_t spare_id, client_id, nnodes;
	uint32_t nchunks, nchains_used;
	uint32_t chain_idx[MAX_CHUNKS];
	uint32_t nclients, lanes;
	uint32_t nops;
	uint32_t lease_ms, hb_ms, timeout_ms, retry_ms;
	uint32_t pct_write, pct_whole, pct_trunc, pct_remove;	/* rest: reads */
	uint32_t nfaults;
	struct {
		enum fkind kind;
		uint64_t at_us;
	} faults[MAX_FAULTS];
};

/* One incarnation of a stratad process. */
struct proc {
	struct service_env env;
	void *cfg;			/* the service's config (its own schema) */
	char data[64], addr[64];
	struct reactor *reactors[2];
	struct rpc_server *srv;
	void *svc;
	const struct service_def *def;
};

struct wop;

struct lane {
	struct world *w;
	uint32_t client;
	bool done;
};

struct run_result {
	uint64_t seed;
	uint32_t counts[CHK_NPROPS];
	uint32_t first;
	char msg[600];
	uint32_t ops, ops_failed, notes;
	uint32_t faults[F_NKINDS];
	uint64_t digest, events, vtime_ms;
	bool settled;
};

struct world {
	struct scen sc;
	struct sim_node nodes[SIM_MAX_NODES];
	struct proc *procs[SIM_MAX_NODES + 1];
	bool gone[SIM_MAX_NODES + 1];	/* crashed for good (replaced) until healed */
	bool drained[SIM_MAX_NODES + 1];
	uint64_t down_gen[SIM_MAX_NODES + 1];	/* bumped by each crash: stale restarts skip */
	struct reactor *client_r;
	struct sclient *scs[MAX_CLIENTS];
	struct rpc_pool *admin;
	struct lane lanes[MAX_LANES];
	struct sim_rng wl, flt;
	struct chunk_id ids[MAX_CHUNKS];
	uint32_t issued, completed, failed;
	uint64_t think_us;		/* an op's pause after the last one, at most */
	struct wop *active;
	bool healed;
	uint32_t faults[F_NKINDS];
	uint32_t notes;
	/* (chunk, version) pairs already reported as divergent */
	struct {
		uint32_t chunk;
		uint64_t version;
	} reported[32];
	uint32_t nreported;
	/* A crash armed to strike while this node's next update is in flight
	 * (0: none), and the restart that follows. */
	uint32_t armed;
	uint64_t armed_restart_us;
	/* final reads */
	uint32_t finals_open;
	uint32_t lifetime[MAX_CHUNKS];	/* removals asked for, per chunk */
};

static struct world *g_w;
/* Fault kinds a run injects (--faults): the schedule is drawn the same,
 * the others are skipped when due. */
static uint32_t g_fault_mask = (1u << F_NKINDS) - 1;
/* --unsafe-replace: let a replacement destroy a chain's last up-to-date
 * replica (a loss beyond R that no protocol survives; see KNOWN_SEEDS.md
 * for what the code then does). */
static bool g_unsafe_replace;

static struct sim_node *node(struct world *w, uint32_t id)
{
	return &w->nodes[id - 1];
}

static bool is_storage(const struct world *w, uint32_t id)
{
	return id >= 2 && (id <= w->sc.nstor + 1 || (w->sc.spare && id == w->sc.spare_id));
}

static void note(struct world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void note(struct world *w, const char *fmt, ...)
{
	va_list ap;

	w->notes++;
	va_start(ap, fmt);
	if (sim_tracing()) {
		char buf[512];

		vsnprintf(buf, sizeof(buf), fmt, ap);
		sim_trace("NOTE: %s", buf);
	}
	va_end(ap);
}

static void scen_draw(struct scen *s, uint64_t seed, uint32_t steps)
{
	struct sim_rng r;
	uint32_t ntab;

	memset(s, 0, sizeof(*s));
	sim_rng_init(&r, seed, 10);
	s->seed = seed;
	s->nstor = (uint32_t)sim_rng_range(&r, 3, 5);
	s->ntgt = (uint32_t)sim_rng_range(&r, 1, 2);
	s->r = sim_rng_below(&r, 3) ? 3 : 2;
	s->spare = sim_rng_below(&r, 2);
	s->spare_id = s->spare ? s->nstor + 2 : 0;
	s->client_id = s->nstor + (s->spare ? 3 : 2);
	s->nnodes = s->client_id;
	for (uint32_t i = 1; i <= s->nnodes; i++)
		s->threads[i] = (uint32_t)sim_rng_range(&r, 1, 2);
	s->nchunks = (uint32_t)sim_rng_range(&r, 2, MAX_CHUNKS);
	ntab = s->nstor * s->ntgt;
	s->nchains_used = (uint32_t)sim_rng_range(&r, 1, 2);
	{
		uint32_t a = (uint32_t)sim_rng_below(&r, ntab);
		uint32_t b = (a + 1 + (uint32_t)sim_rng_below(&r, ntab - 1)) % ntab;

		for (uint32_t k = 0; k < s->nchunks; k++)
			s->chain_idx[k] = s->nchains_used == 2 && k % 2 ? b : a;
	}
	s->nclients = (uint32_t)sim_rng_range(&r, 1, MAX_CLIENTS);
	s->lanes = (uint32_t)sim_rng_range(&r, s->nclients, MAX_LANES);
	s->nops = steps ? steps : (uint32_t)sim_rng_range(&r, 120, 240);
	s->lease_ms = 2000;
	s->hb_ms = (uint32_t)sim_rng_range(&r, 250, 500);
	s->timeout_ms = 1000;
	s->retry_ms = (uint32_t)sim_rng_range(&r, 3000, 6000);
	s->pct_write = 42;
	s->pct_whole = 6;
	s->pct_trunc = 14;
	s->pct_remove = sim_rng_below(&r, 4) ? 0 : 2;
	s->nfaults = (uint32_t)sim_rng_range(&r, 0, 8);
	for (uint32_t i = 0; i < s->nfaults; i++) {
		static const uint32_t weights[F_NKINDS] = { 20, 22, 8, 12, 14, 8, 4, 4 };
		uint32_t total = 0, x;
		int k;

		for (k = 0; k < F_NKINDS; k++)
			total += weights[k];
		x = (uint32_t)sim_rng_below(&r, total);
		for (k = 0; x >= weights[k]; k++)
			x -= weights[k];
		s->faults[i].kind = (enum fkind)k;
		s->faults[i].at_us = sim_rng_range(&r, 200 * MS, WORK_SPAN_US - SEC);
	}
}

/* ---- processes ---- */

struct start_ctx {
	struct proc *p;
	int rc;
};

static void start_on_r0(void *arg)
{
	struct start_ctx *c = arg;

	c->rc = c->p->def->start(&c->p->env, &c->p->svc);
}

static void proc_start(struct world *w, uint32_t id)
{
	struct sim_node *n = node(w, id);
	struct proc *p = calloc(1, sizeof(*p));
	struct start_ctx sc;
	int nthreads = id == MGMT_ID ? 1 : (int)w->sc.threads[id];
	char err[256], v[32];

	if (!p)
		abort();
	n->inc++;
	n->up = true;
	p->def = id == MGMT_ID ? &mgmt_service : &storage_service;
	for (int i = 0; i < nthreads; i++)
		p->reactors[i] = sim_reactor_new(n, i);
	rpc_server_new(p->reactors, nthreads, id, &p->srv);
	rpc_server_listen(p->srv, n->addr);
	/* The service's own keys, set as a config file would. */
	p->cfg = calloc(1, p->def->cfg_size);
	if (!p->cfg || cfg_defaults(p->def->schema, p->cfg, err, sizeof(err)))
		abort();
#define SET(key, fmt, val) do { \
		snprintf(v, sizeof(v), fmt, val); \
		if (cfg_set(p->def->schema, p->cfg, key, v, err, sizeof(err))) { \
			fprintf(stderr, "sim: %s\n", err); \
			abort(); \
		} \
	} while (0)
	if (id == MGMT_ID) {
		SET("mgmt.lease", "%ums", w->sc.lease_ms);
		SET("mgmt.replication", "%u", w->sc.r);
		SET("mgmt.expect_nodes", "%u", w->sc.nstor);
	} else {
		SET("storage.targets", "%u", w->sc.ntgt);
		/* Same-host shared memory is a real socket and thread: the
		 * simulated clients read over the simulated network. */
		SET("storage.shm_reads", "%s", "false");
	}
#undef SET
	snprintf(p->data, sizeof(p->data), "sim/n%u", id);
	snprintf(p->addr, sizeof(p->addr), "%s", n->addr);
	p->env = (struct service_env){
		.node_id = id, .data = p->data, .addr = p->addr, .mgmt_addr = MGMT_ADDR,
		.heartbeat_ms = w->sc.hb_ms, .rpc_timeout_ms = w->sc.timeout_ms,
		.reactors = p->reactors, .nreactors = nthreads, .srv = p->srv, .cfg = p->cfg,
	};
	sc.p = p;
	sc.rc = 0;
	sim_trace("PROC: start %s (%s, incarnation %u, %d thread(s))", n->name, p->def->name, n->inc,
		  nthreads);
	reactor_call(p->reactors[0], start_on_r0, &sc);
	if (sc.rc) {
		/* The harness built a config the service refuses: a harness bug. */
		fprintf(stderr, "sim: service '%s' on node %u failed to start: %s\n", p->def->name, id,
			strata_strerror(sc.rc));
		abort();
	}
	w->procs[id] = p;
}

/* kill -9: the process's memory is abandoned as it is; each disk keeps
 * what reached it. */
static void proc_crash(struct world *w, uint32_t id)
{
	struct sim_node *n = node(w, id);
	struct proc *p = w->procs[id];

	if (!p)
		return;
	sim_trace("PROC: kill -9 %s (incarnation %u)", n->name, n->inc);
	n->up = false;
	for (uint32_t i = 0; i < w->sc.ntgt; i++) {
		struct sim_disk *d = sim_disk_of_target(storage_target_id(id, i));

		if (d)
			sim_disk_crash(d);
	}
	for (int i = 0; i < 2; i++) {
		if (p->reactors[i])
			sim_reactor_kill(p->reactors[i]);
	}
	sim_net_node_down(n);
	w->procs[id] = NULL;
	w->down_gen[id]++;
}

static void stop_on_r0(void *arg)
{
	struct proc *p = arg;

	p->def->stop(p->svc);
}

/* mgmt's stop as stratad does it: close connections, stop the service. */
static void mgmt_stop(struct world *w)
{
	struct proc *p = w->procs[MGMT_ID];
	struct sim_node *n = node(w, MGMT_ID);

	if (!p)
		return;
	sim_trace("PROC: stop %s (mgmt)", n->name);
	rpc_server_shutdown(p->srv);
	reactor_call(p->reactors[0], stop_on_r0, p);
	n->up = false;
	sim_reactor_kill(p->reactors[0]);
	sim_net_node_down(n);
	rpc_server_free(p->srv);
	free(p);
	w->procs[MGMT_ID] = NULL;
	w->down_gen[MGMT_ID]++;
}

struct restart_ev {
	struct world *w;
	uint32_t id;
	uint64_t gen;
};

static void on_restart(void *arg)
{
	struct restart_ev *e = arg;
	struct world *w = e->w;

	if (!w->procs[e->id] && w->down_gen[e->id] == e->gen && !w->gone[e->id])
		proc_start(w, e->id);
	free(e);
}

static void restart_later(struct world *w, uint32_t id, uint64_t delay_us)
{
	struct restart_ev *e = malloc(sizeof(*e));

	if (!e)
		return;
	e->w = w;
	e->id = id;
	e->gen = w->down_gen[id];
	sim_at(NULL, sim_now_us() + delay_us, on_restart, free, e);
}

/* ---- the replicas, as mgmt decided them ---- */

static const struct cluster_map *mgmt_map(void)
{
	return sim_mgmt_store_map(MGMT_DB);
}

static int chunk_of(const struct world *w, const struct chunk_id *id)
{
	for (uint32_t k = 0; k < w->sc.nchunks; k++) {
		if (w->ids[k].ino == id->ino && w->ids[k].idx == id->idx)
			return (int)k;
	}
	return -1;
}

static const struct cm_chain *chain_of(const struct cluster_map *m, const struct world *w,
				       uint32_t k)
{
	/* The client routes by index into the chain table, ids 1..n. */
	return cm_find_chain(m, w->sc.chain_idx[k] + 1);
}

static bool already_reported(struct world *w, uint32_t k, uint64_t version)
{
	for (uint32_t i = 0; i < w->nreported; i++) {
		if (w->reported[i].chunk == k && w->reported[i].version == version)
			return true;
	}
	if (w->nreported < sizeof(w->reported) / sizeof(w->reported[0])) {
		w->reported[w->nreported].chunk = k;
		w->reported[w->nreported].version = version;
		w->nreported++;
	}
	return false;
}

/* Two serving replicas holding one version must hold the same bytes. */
static void compare_copies(struct world *w, uint32_t k, const struct cm_chain *c, uint32_t ta,
			   const struct sim_copy *a, uint32_t tb, const struct sim_copy *b,
			   const char *when)
{
	if (!a || !b || a->version != b->version || a->born != b->born)
		return;
	if (a->len == b->len && a->crc == b->crc && (!a->len || !memcmp(a->data, b->data, a->len)))
		return;
	if (already_reported(w, k, a->version))
		return;
	chk_violation(CHK_AGREEMENT,
		      "chunk %u v%llu %s: target %u holds %u bytes (crc %08x), target %u holds %u bytes (crc %08x); both serving in chain %u (version %llu)",
		      k, (unsigned long long)a->version, when, ta, a->len, a->crc, tb, b->len, b->crc,
		      c->id, (unsigned long long)c->version);
}

/* The copy a live process holds: a dead one's disk may lag (a removal
 * or an update that could not reach it), and it cannot serve; when it
 * comes back, mgmt must notice, and its copies are compared again at
 * their next commit or map change. */
static const struct sim_copy *copy_at(uint32_t target, const struct chunk_id *id)
{
	const struct sim_disk *d = sim_disk_of_target(target);

	return d && sim_disk_is_open(d) ? sim_disk_chunk(d, id) : NULL;
}

uint32_t sim_chunk_lifetime(const struct chunk_id *id)
{
	int k = g_w ? chunk_of(g_w, id) : -1;

	return k < 0 ? 0 : g_w->lifetime[k];
}

void sim_on_commit(uint32_t target, const struct chunk_id *id, const struct sim_copy *c)
{
	struct world *w = g_w;
	const struct cluster_map *m = mgmt_map();
	const struct cm_chain *ch;
	int k, pos;

	if (!w || !c || !m || (k = chunk_of(w, id)) < 0 || !(ch = chain_of(m, w, (uint32_t)k)))
		return;
	for (pos = 0; pos < ch->len && ch->targets[pos] != target; pos++)
		;
	if (pos == ch->len)
		pos = -1;
	if (pos < 0 || ch->states[pos] != TARGET_SERVING)
		return;
	for (int j = 0; j < ch->len; j++) {
		if (j != pos && ch->states[j] == TARGET_SERVING)
			compare_copies(w, (uint32_t)k, ch, target, c, ch->targets[j],
				       copy_at(ch->targets[j], id), "at a commit");
	}
}

void sim_on_map_saved(const char *path, const struct cluster_map *m)
{
	struct world *w = g_w;

	(void)path;
	if (!w)
		return;
	sim_trace("MAP: mgmt saved map version %llu", (unsigned long long)m->version);
	if (sim_tracing()) {
		for (uint32_t i = 0; i < m->nchains; i++) {
			const struct cm_chain *c = &m->chains[i];
			char buf[256];
			int n = 0;

			for (int j = 0; j < c->len && n < (int)sizeof(buf) - 32; j++)
				n += snprintf(buf + n, sizeof(buf) - (size_t)n, " %u%s", c->targets[j],
					      c->states[j] == TARGET_SERVING ? "" : "(syncing)");
			for (int j = 0; j < c->nout && n < (int)sizeof(buf) - 32; j++)
				n += snprintf(buf + n, sizeof(buf) - (size_t)n, " [out %u]", c->out[j]);
			sim_trace("MAP:   chain %u v%llu:%s", c->id, (unsigned long long)c->version, buf);
		}
	}
	/* A member made serving must agree with the others already. */
	for (uint32_t k = 0; k < w->sc.nchunks; k++) {
		const struct cm_chain *c = chain_of(m, w, k);

		for (int a = 0; c && a < c->len; a++) {
			for (int b = a + 1; b < c->len; b++) {
				if (c->states[a] != TARGET_SERVING || c->states[b] != TARGET_SERVING)
					continue;
				compare_copies(w, k, c, c->targets[a], copy_at(c->targets[a], &w->ids[k]),
					       c->targets[b], copy_at(c->targets[b], &w->ids[k]),
					       "when mgmt saved a map");
			}
		}
	}
}

/* ---- the workload ---- */

struct wop {
	struct sc_io io;
	struct wop *next;		/* in flight */
	struct lane *lane;
	uint32_t op;
	uint8_t *buf;
};

static void lane_next(void *arg);

void sim_on_request_dup(uint32_t from, void *cb_arg)
{
	struct world *w = g_w;

	if (!w || from != w->sc.client_id)
		return;
	for (struct wop *o = w->active; o; o = o->next) {
		if (&o->io == cb_arg)
			chk_mark_unsure(o->op);
	}
}

static void on_io_done(struct sc_io *io)
{
	struct wop *o = io->user;
	struct lane *l = o->lane;
	struct world *w = l->w;

	for (struct wop **pp = &w->active; *pp; pp = &(*pp)->next) {
		if (*pp == o) {
			*pp = o->next;
			break;
		}
	}
	if (io->kind == SC_READ)
		chk_served_by(o->op, io->tried.target_id);
	chk_complete(o->op, io->status, io->version, io->length, io->attempt, o->buf, io->nread);
	w->completed++;
	w->failed += io->status != 0;
	free(o->buf);
	free(o);
	/* Paced so that the workload spans the fault window. */
	sim_at(w->client_r, sim_now_us() + sim_rng_below(&w->wl, w->think_us), lane_next, NULL, l);
}

static uint32_t draw8(struct sim_rng *r, uint32_t lo, uint32_t hi)
{
	return 8 * (uint32_t)sim_rng_range(r, lo / 8, hi / 8);
}

static void lane_next(void *arg)
{
	struct lane *l = arg;
	struct world *w = l->w;
	struct scen *s = &w->sc;
	struct wop *o;
	uint32_t k, x;
	enum chk_kind kind;
	uint32_t off = 0, len = 0;

	if (w->issued >= s->nops) {
		l->done = true;
		return;
	}
	w->issued++;
	o = calloc(1, sizeof(*o));
	if (!o)
		abort();
	k = (uint32_t)sim_rng_below(&w->wl, s->nchunks);
	x = (uint32_t)sim_rng_below(&w->wl, 100);
	if (x < s->pct_write) {
		kind = CHK_WRITE;
		off = draw8(&w->wl, 0, CHUNK_CAP - 4096);
		len = draw8(&w->wl, 8, sim_rng_below(&w->wl, 4) ? 512 : 4096);
	} else if ((x -= s->pct_write) < s->pct_whole) {
		kind = CHK_WRITE;
		len = draw8(&w->wl, CHUNK_CAP / 4, CHUNK_CAP);
	} else if ((x -= s->pct_whole) < s->pct_trunc) {
		kind = CHK_TRUNCATE;
		len = draw8(&w->wl, 0, CHUNK_CAP);
	} else if ((x -= s->pct_trunc) < s->pct_remove) {
		kind = CHK_REMOVE;
	} else {
		kind = CHK_READ;
		len = CHUNK_CAP;
	}
	o->lane = l;
	if (kind == CHK_REMOVE)
		w->lifetime[k]++;
	o->op = chk_invoke(l->client, kind, k, off, len);
	if (kind == CHK_WRITE || kind == CHK_READ) {
		o->buf = malloc(len);
		if (!o->buf)
			abort();
		if (kind == CHK_WRITE)
			chk_fill(o->op, o->buf, off, len);
	}
	o->io.kind = kind == CHK_WRITE ? SC_WRITE : kind == CHK_TRUNCATE ? SC_TRUNCATE :
		     kind == CHK_REMOVE ? SC_REMOVE : SC_READ;
	o->io.chain_idx = s->chain_idx[k];
	o->io.ino = w->ids[k].ino;
	o->io.idx = w->ids[k].idx;
	o->io.offset = off;
	o->io.len = len;
	o->io.buf = o->buf;
	o->io.cb = on_io_done;
	o->io.user = o;
	o->next = w->active;
	w->active = o;
	sc_submit(w->scs[l->client], &o->io);
}

/* ---- faults ---- */

static uint32_t pick_storage(struct world *w, bool up_only)
{
	uint32_t cand[SIM_MAX_NODES], n = 0;

	for (uint32_t id = 2; id <= w->sc.nstor + 1; id++) {
		if ((!up_only || w->procs[id]) && !w->gone[id])
			cand[n++] = id;
	}
	return n ? cand[sim_rng_below(&w->flt, n)] : 0;
}

struct heal_ev {
	struct world *w;
	enum fkind kind;
	uint32_t a, b;
};

static void heal_disk(uint32_t target)
{
	struct sim_disk *d = sim_disk_of_target(target);
	struct sim_disk_faults none = { 0 };

	if (d) {
		sim_disk_set_faults(d, &none);
		sim_disk_set_capacity(d, 0);
	}
}

static void on_heal(void *arg)
{
	struct heal_ev *h = arg;
	struct world *w = h->w;

	if (!w->healed) {
		switch (h->kind) {
		case F_DISK:
		case F_FULL:
			sim_trace("FAULT: heal disk of target %u", h->a);
			heal_disk(h->a);
			break;
		case F_NET: {
			struct sim_net_faults none = { 0 };

			sim_trace("FAULT: heal network");
			sim_net_set_faults(&none);
			break;
		}
		case F_CUT:
			sim_trace("FAULT: heal link n%u-n%u", h->a, h->b);
			sim_net_cut(h->a, h->b, false);
			break;
		default:
			break;
		}
	}
	free(h);
}

static void heal_later(struct world *w, enum fkind kind, uint32_t a, uint32_t b, uint64_t delay)
{
	struct heal_ev *h = malloc(sizeof(*h));

	if (!h)
		return;
	h->w = w;
	h->kind = kind;
	h->a = a;
	h->b = b;
	sim_at(NULL, sim_now_us() + delay, on_heal, free, h);
}

static void on_admin_reply(void *arg, int status, struct rpc_msg *resp)
{
	(void)arg;
	(void)resp;
	sim_trace("ADMIN: reply %s", strata_strerror(status));
}

static void admin(struct world *w, uint32_t action, uint32_t arg, uint32_t arg2)
{
	struct mg_admin rq = { action, arg, arg2, 0 };
	struct proto_call c = { .cb = on_admin_reply, .timeout_ms = w->sc.timeout_ms };

	sim_trace("ADMIN: action %u arg %u arg2 %u", action, arg, arg2);
	if (mg_admin_call(w->admin, MGMT_ADDR, &rq, &c))
		sim_trace("ADMIN: could not send");
}

struct replace_ev {
	struct world *w;
	uint32_t id;
};

static bool others_serve(struct world *w, uint32_t id);

static void on_replace(void *arg)
{
	struct replace_ev *e = arg;
	struct world *w = e->w;

	/* The chains may have changed since the node died: still safe? */
	if (!g_unsafe_replace && !others_serve(w, e->id)) {
		sim_trace("FAULT: n%u is now some chain's last copy: not replaced", e->id);
		free(e);
		return;
	}
	for (uint32_t i = 0; i < w->sc.ntgt; i++)
		admin(w, MGMT_ADMIN_REPLACE, storage_target_id(e->id, i),
		      storage_target_id(w->sc.spare_id, i));
	free(e);
}

struct armed_ev {
	struct world *w;
	uint32_t id, inc;
};

static void on_armed_crash(void *arg)
{
	struct armed_ev *e = arg;
	struct world *w = e->w;

	if (!w->healed && w->procs[e->id] && node(w, e->id)->inc == e->inc) {
		sim_trace("FAULT: crash n%u with an update in flight, restart in %llu ms", e->id,
			  (unsigned long long)(w->armed_restart_us / MS));
		proc_crash(w, e->id);
		restart_later(w, e->id, w->armed_restart_us);
	}
	free(e);
}

void sim_on_update_start(uint32_t target)
{
	struct world *w = g_w;
	uint32_t id = target / 256;
	struct armed_ev *e;

	if (!w || !w->armed || w->armed != id || w->healed)
		return;
	w->armed = 0;
	e = malloc(sizeof(*e));
	if (!e)
		return;
	e->w = w;
	e->id = id;
	e->inc = node(w, id)->inc;
	/* Soon enough that the update's own write may still be under way,
	 * late enough that its forward may have been applied downstream. */
	sim_at(NULL, sim_now_us() + sim_rng_range(&w->flt, 30, 600), on_armed_crash, free, e);
}

/* kill -9 of a storage node, now or (arm) while its next update is in
 * flight: the windows where a process dies between its forward and its
 * own write are narrow, and a crash at a random time rarely hits them. */
static void crash_node(struct world *w, uint32_t id, bool arm, uint64_t restart_us)
{
	if (arm) {
		sim_trace("FAULT: n%u will crash with its next update in flight", id);
		w->armed = id;
		w->armed_restart_us = restart_us;
		return;
	}
	sim_trace("FAULT: crash n%u, restart in %llu ms", id, (unsigned long long)(restart_us / MS));
	proc_crash(w, id);
	restart_later(w, id, restart_us);
}

static void fault_crash(struct world *w)
{
	uint32_t id = pick_storage(w, true);
	uint64_t delay;
	bool arm;

	if (!id)
		return;
	delay = sim_rng_below(&w->flt, 10) < 6 ? sim_rng_range(&w->flt, 100 * MS, 1500 * MS) :
						 sim_rng_range(&w->flt, 2500 * MS, 7000 * MS);
	arm = sim_rng_below(&w->flt, 2);
	crash_node(w, id, arm, delay);
}

static void fault_disk(struct world *w, bool full)
{
	uint32_t id = pick_storage(w, true);
	uint32_t t;
	struct sim_disk *d;
	uint64_t dur = sim_rng_range(&w->flt, 200 * MS, 3000 * MS);

	if (!id)
		return;
	t = storage_target_id(id, (uint32_t)sim_rng_below(&w->flt, w->sc.ntgt));
	d = sim_disk_of_target(t);
	if (!d)
		return;
	if (full) {
		uint64_t cap = sim_disk_used(d) + sim_rng_below(&w->flt, 24 << 10);

		sim_trace("FAULT: target %u full (capacity %llu) for %llu ms", t,
			  (unsigned long long)cap, (unsigned long long)(dur / MS));
		sim_disk_set_capacity(d, cap ? cap : 1);
	} else {
		struct sim_disk_faults f = { 0 };
		uint32_t mode = (uint32_t)sim_rng_below(&w->flt, 10);

		if (mode < 6) {
			f.fail_ppm = (uint32_t)sim_rng_range(&w->flt, 100000, 500000);
			f.fail_err = sim_rng_below(&w->flt, 2) ? -ENOSPC : -EIO;
		} else if (mode < 9) {
			f.fail_after_ppm = (uint32_t)sim_rng_range(&w->flt, 100000, 400000);
		} else {
			f.read_fail_ppm = 300000;
			f.slow_ppm = 300000;
		}
		sim_trace("FAULT: target %u disk faults (before %u ppm %s, after %u ppm, read %u ppm) for %llu ms",
			  t, f.fail_ppm, f.fail_ppm ? strata_strerror(f.fail_err) : "-",
			  f.fail_after_ppm, f.read_fail_ppm, (unsigned long long)(dur / MS));
		sim_disk_set_faults(d, &f);
	}
	heal_later(w, full ? F_FULL : F_DISK, t, 0, dur);
}

static void fault_net(struct world *w)
{
	struct sim_net_faults f = { 0 };
	uint64_t dur = sim_rng_range(&w->flt, 500 * MS, 4000 * MS);

	f.drop_ppm = (uint32_t)sim_rng_range(&w->flt, 5000, 50000);
	f.dup_ppm = (uint32_t)sim_rng_range(&w->flt, 5000, 50000);
	f.reorder_ppm = (uint32_t)sim_rng_range(&w->flt, 20000, 200000);
	f.spike_ppm = (uint32_t)sim_rng_range(&w->flt, 5000, 30000);
	sim_trace("FAULT: network: drop %u dup %u reorder %u spike %u ppm for %llu ms", f.drop_ppm,
		  f.dup_ppm, f.reorder_ppm, f.spike_ppm, (unsigned long long)(dur / MS));
	sim_net_set_faults(&f);
	heal_later(w, F_NET, 0, 0, dur);
}

static void fault_cut(struct world *w)
{
	uint32_t id = pick_storage(w, false), mode = (uint32_t)sim_rng_below(&w->flt, 3);
	uint64_t dur = sim_rng_range(&w->flt, 300 * MS, 5000 * MS);

	if (!id)
		return;
	if (mode == 0) {
		sim_trace("FAULT: cut n%u from mgmt for %llu ms", id, (unsigned long long)(dur / MS));
		sim_net_cut(id, MGMT_ID, true);
		heal_later(w, F_CUT, id, MGMT_ID, dur);
	} else if (mode == 1) {
		uint32_t peer = pick_storage(w, false);

		if (peer == id)
			peer = peer == 2 ? 3 : 2;
		sim_trace("FAULT: cut n%u from n%u for %llu ms", id, peer, (unsigned long long)(dur / MS));
		sim_net_cut(id, peer, true);
		heal_later(w, F_CUT, id, peer, dur);
	} else {
		sim_trace("FAULT: cut n%u from everyone for %llu ms", id, (unsigned long long)(dur / MS));
		for (uint32_t o = 1; o <= w->sc.nnodes; o++) {
			if (o != id) {
				sim_net_cut(id, o, true);
				heal_later(w, F_CUT, id, o, dur);
			}
		}
	}
}

/* Does another target of chain c, on a live node, hold chunk k at least
 * as new as target t does (same lifetime)? A serving member can be behind
 * on one chunk (its write failed after it forwarded, R2), so the chain's
 * state alone does not say who holds a chunk: the copies do. */
static bool copy_elsewhere(const struct world *w, const struct cluster_map *m,
			   const struct cm_chain *c, uint32_t k, uint32_t t)
{
	const struct sim_disk *d = sim_disk_of_target(t);
	const struct sim_copy *mine = d ? sim_disk_chunk(d, &w->ids[k]) : NULL;

	if (!mine || !mine->exists || mine->born != w->lifetime[k])
		return true;
	for (int j = 0; j < c->len + c->nout; j++) {
		uint32_t o = j < c->len ? c->targets[j] : c->out[j - c->len];
		const struct cm_target *ot = cm_find_target(m, o);
		const struct sim_copy *cp;

		if (o == t || !ot || !w->procs[ot->node_id])
			continue;
		cp = copy_at(o, &w->ids[k]);
		if (cp && cp->exists && cp->born == mine->born && cp->version >= mine->version)
			return true;
	}
	return false;
}

/* Does every chain where a target of node id holds committed data (a
 * serving member, or taken out while serving) keep another serving member
 * on a live node, and does every chunk copy node id holds of the current
 * lifetime exist at least as new on another live target of its chain?
 * Destroying id then loses no write a client may have seen (white-box:
 * the injector looks at the copies, as no real operator could; a node
 * destroyed holding a chunk's only copy is a loss beyond R). */
static bool others_serve(struct world *w, uint32_t id)
{
	const struct cluster_map *m = mgmt_map();

	if (!m)
		return false;
	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];
		bool mine = false, other = false;

		for (int j = 0; j < c->len; j++) {
			const struct cm_target *t = cm_find_target(m, c->targets[j]);

			if (!t || c->states[j] != TARGET_SERVING)
				continue;
			if (t->node_id == id)
				mine = true;
			else if (w->procs[t->node_id])
				other = true;
		}
		for (int j = 0; j < c->nout; j++) {
			const struct cm_target *t = cm_find_target(m, c->out[j]);

			if (t && t->node_id == id && c->out_states[j] == TARGET_SERVING)
				mine = true;
		}
		if (mine && !other)
			return false;
	}
	for (uint32_t k = 0; k < w->sc.nchunks; k++) {
		const struct cm_chain *c = chain_of(m, w, k);

		for (int j = 0; c && j < c->len + c->nout; j++) {
			uint32_t t = j < c->len ? c->targets[j] : c->out[j - c->len];
			const struct cm_target *ct = cm_find_target(m, t);

			if (ct && ct->node_id == id && !copy_elsewhere(w, m, c, k, t))
				return false;
		}
	}
	return true;
}

static void on_fault(void *arg)
{
	struct world *w = g_w;
	enum fkind kind = (enum fkind)(intptr_t)arg;

	if (w->healed || !(g_fault_mask & (1u << kind)))
		return;
	w->faults[kind]++;
	switch (kind) {
	case F_CRASH:
		fault_crash(w);
		break;
	case F_DISK:
		fault_disk(w, false);
		break;
	case F_FULL:
		fault_disk(w, true);
		break;
	case F_NET:
		fault_net(w);
		break;
	case F_CUT:
		fault_cut(w);
		break;
	case F_MGMT: {
		uint64_t delay = sim_rng_range(&w->flt, 0, 2500 * MS);
		uint32_t id = pick_storage(w, true);

		sim_trace("FAULT: restart mgmt in %llu ms", (unsigned long long)(delay / MS));
		mgmt_stop(w);
		restart_later(w, MGMT_ID, delay);
		/* Sometimes a storage node dies and comes back while mgmt is
		 * away: mgmt must still see that it restarted. */
		if (id && delay > 200 * MS && sim_rng_below(&w->flt, 10) < 4)
			crash_node(w, id, true, sim_rng_range(&w->flt, 20 * MS, delay / 2));
		break;
	}
	case F_DRAIN: {
		uint32_t id = pick_storage(w, true);

		if (!id || w->faults[F_DRAIN] > 1)
			break;
		sim_trace("FAULT: drain n%u", id);
		w->drained[id] = true;
		admin(w, MGMT_ADMIN_DRAIN, id, 0);
		break;
	}
	case F_REPLACE: {
		uint32_t id = pick_storage(w, true);
		struct replace_ev *e;

		if (!w->sc.spare || !id || w->faults[F_REPLACE] > 1 || w->drained[id])
			break;
		if (!g_unsafe_replace && !others_serve(w, id)) {
			sim_trace("FAULT: n%u is some chain's last live serving replica: not destroyed", id);
			break;
		}
		sim_trace("FAULT: n%u dies for good; its targets get replaced by the spare's", id);
		proc_crash(w, id);
		w->gone[id] = true;
		e = malloc(sizeof(*e));
		if (!e)
			break;
		e->w = w;
		e->id = id;
		sim_at(NULL, sim_now_us() + sim_rng_range(&w->flt, 200 * MS, 2500 * MS), on_replace,
		       free, e);
		break;
	}
	default:
		break;
	}
}

/* Everything back to health: processes up, links whole, disks sound. */
static void heal_all(struct world *w)
{
	struct sim_net_faults none = { 0 };

	sim_trace("FAULT: heal everything");
	w->healed = true;
	sim_net_set_faults(&none);
	for (uint32_t a = 1; a <= w->sc.nnodes; a++) {
		for (uint32_t b = a + 1; b <= w->sc.nnodes; b++)
			sim_net_cut(a, b, false);
	}
	for (uint32_t id = 2; id <= w->sc.nnodes; id++) {
		if (!is_storage(w, id))
			continue;
		for (uint32_t i = 0; i < w->sc.ntgt; i++)
			heal_disk(storage_target_id(id, i));
	}
	if (!w->procs[MGMT_ID])
		proc_start(w, MGMT_ID);
	for (uint32_t id = 2; id <= w->sc.nnodes; id++) {
		w->gone[id] = false;
		if (is_storage(w, id) && !w->procs[id])
			proc_start(w, id);
	}
}

/* ---- settling and the final reads ---- */

static bool settled(struct world *w)
{
	const struct cluster_map *m = mgmt_map();

	if (!m || !w->procs[MGMT_ID])
		return false;
	for (uint32_t i = 0; i < m->nchains; i++) {
		for (int j = 0; j < m->chains[i].len; j++) {
			if (m->chains[i].states[j] != TARGET_SERVING)
				return false;
		}
	}
	for (uint32_t id = 2; id <= w->sc.nnodes; id++) {
		const struct cm_node *nd;

		if (!is_storage(w, id))
			continue;
		nd = cm_find_node(m, id);
		if (nd && nd->state == NODE_OFFLINE)
			return false;
		for (uint32_t i = 0; i < w->sc.ntgt; i++) {
			const struct sim_disk *d = sim_disk_of_target(storage_target_id(id, i));

			if (d && sim_disk_inflight(d))
				return false;
		}
	}
	return true;
}

struct fread {
	struct world *w;
	uint32_t chunk, target, tries, op;
	struct cm_chain chain;
	char addr[CM_ADDR_LEN];
	uint8_t *buf;
	bool ok;
	int err;
	uint64_t version;
	uint32_t nread;
};

static void final_send(void *arg);

static void on_final(void *arg, int status, struct rpc_msg *resp)
{
	struct fread *f = arg;
	struct world *w = f->w;

	if (!status) {
		struct sp_read_rep rep;

		if (st_read_rep(resp, &rep) || rep.nread != resp->hdr.bulk_len ||
		    crc32c(0, f->buf, rep.nread) != rep.crc)
			status = STRATA_EBADMSG;
		f->version = rep.version;
		f->nread = rep.nread;
	}
	if (status && ++f->tries < 25) {
		f->err = status;
		sim_at(w->client_r, sim_now_us() + 200 * MS, final_send, NULL, f);
		return;
	}
	f->ok = status == 0;
	f->err = status;
	chk_served_by(f->op, f->target);
	chk_complete(f->op, status, f->version, f->nread, f->tries, f->buf, f->nread);
	w->finals_open--;
}

static void final_send(void *arg)
{
	struct fread *f = arg;
	struct world *w = f->w;
	struct sp_read rd = { 0 };
	struct proto_call c = { .bulk_dst = f->buf, .bulk_cap = CHUNK_CAP, .cb = on_final,
				.arg = f, .timeout_ms = w->sc.timeout_ms };

	rd.ref.chain_id = f->chain.id;
	rd.ref.chain_ver = f->chain.version;
	rd.ref.target_id = f->target;
	rd.ref.ino = w->ids[f->chunk].ino;
	rd.ref.idx = w->ids[f->chunk].idx;
	rd.len = CHUNK_CAP;
	if (st_read_call(w->admin, f->addr, &rd, &c))
		on_final(f, -ENOMEM, NULL);
}

/* Reads every chunk from every serving replica (through the real read
 * path), checks each read against the history and all against each
 * other. */
static void final_reads(struct world *w)
{
	const struct cluster_map *m = mgmt_map();
	struct fread *fr[MAX_CHUNKS * CM_CHAIN_SLOTS];
	uint32_t n = 0;

	if (!m)
		return;
	for (uint32_t k = 0; k < w->sc.nchunks; k++) {
		const struct cm_chain *c = chain_of(m, w, k);

		for (int j = 0; c && j < c->len; j++) {
			const struct cm_target *t = cm_find_target(m, c->targets[j]);
			const struct cm_node *nd = t ? cm_find_node(m, t->node_id) : NULL;
			struct fread *f;

			if (c->states[j] != TARGET_SERVING || !nd)
				continue;
			f = calloc(1, sizeof(*f));
			if (!f || !(f->buf = malloc(CHUNK_CAP)))
				abort();
			f->w = w;
			f->chunk = k;
			f->target = c->targets[j];
			f->chain = *c;
			snprintf(f->addr, sizeof(f->addr), "%s", nd->addr);
			f->op = chk_invoke(99, CHK_READ, k, 0, CHUNK_CAP);
			fr[n++] = f;
			w->finals_open++;
			sim_at(w->client_r, sim_now_us(), final_send, NULL, f);
		}
	}
	while (w->finals_open && sim_step(sim_now_us() + 60 * SEC))
		;
	for (uint32_t i = 0; i < n; i++) {
		struct fread *f = fr[i];

		if (!f->ok)
			note(w, "final read of chunk %u at target %u failed: %s", f->chunk, f->target,
			     strata_strerror(f->err));
		for (uint32_t j = 0; j < i; j++) {
			const struct fread *g = fr[j];

			if (g->chunk != f->chunk || !g->ok || !f->ok)
				continue;
			if (g->version != f->version || g->nread != f->nread ||
			    memcmp(g->buf, f->buf, f->nread))
				chk_violation(CHK_FINAL,
					      "after settling, chunk %u: target %u serves v%llu (%u bytes), target %u serves v%llu (%u bytes)%s",
					      f->chunk, g->target, (unsigned long long)g->version, g->nread,
					      f->target, (unsigned long long)f->version, f->nread,
					      g->version == f->version ? ": same version, other bytes" : "");
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		free(fr[i]->buf);
		free(fr[i]);
	}
}

/* ---- one run ---- */

static bool lanes_done(const struct world *w)
{
	for (uint32_t i = 0; i < w->sc.lanes; i++) {
		if (!w->lanes[i].done)
			return false;
	}
	return w->completed == w->issued;
}

static void run_one(uint64_t seed, uint32_t steps, struct run_result *res)
{
	struct world *w = calloc(1, sizeof(*w));
	struct scen *s;
	struct chk_cfg cc;
	uint64_t t_work, deadline, calm = 0;
	bool ok_settle = false;

	if (!w)
		abort();
	g_w = w;
	scen_draw(&w->sc, seed, steps);
	s = &w->sc;
	sim_rng_init(&w->wl, seed, 20);
	sim_rng_init(&w->flt, seed, 30);
	sim_reset(seed, 200);
	sim_disks_reset(seed);
	sim_mgmt_stores_reset();
	for (uint32_t i = 0; i < s->nnodes; i++) {
		struct sim_node *n = &w->nodes[i];

		n->id = i + 1;
		snprintf(n->addr, sizeof(n->addr), "sim%u:7300", n->id);
		snprintf(n->name, sizeof(n->name), "n%u", n->id);
	}
	sim_net_reset(seed, w->nodes, s->nnodes);
	cc.nchunks = s->nchunks;
	cc.chunk_cap = CHUNK_CAP;
	cc.budget_us = ((uint64_t)s->retry_ms + s->timeout_ms + 500) * MS;
	chk_reset(&cc);
	for (uint32_t k = 0; k < s->nchunks; k++) {
		w->ids[k].ino = 0x100 + k / 2;
		w->ids[k].idx = k;
	}
	sim_trace("SCENARIO: seed %llu: %u storage nodes x %u targets, R=%u, spare %s, %u chunks on chain index(es) %u/%u, %u client(s) %u lanes, %u ops, lease %u hb %u timeout %u retry %u, removes %u%%, %u faults",
		  (unsigned long long)seed, s->nstor, s->ntgt, s->r, s->spare ? "yes" : "no", s->nchunks,
		  s->chain_idx[0], s->chain_idx[s->nchunks - 1], s->nclients, s->lanes, s->nops,
		  s->lease_ms, s->hb_ms, s->timeout_ms, s->retry_ms, s->pct_remove, s->nfaults);
	for (uint32_t id = 2; id <= s->nnodes; id++) {
		if (!is_storage(w, id))
			continue;
		for (uint32_t i = 0; i < s->ntgt; i++) {
			char dir[64];

			snprintf(dir, sizeof(dir), "sim/n%u/targets/%u", id, i);
			sim_disk_add(dir, storage_target_id(id, i), 0);
		}
	}

	/* Boot: mgmt, then the storage nodes; chains once all registered. */
	proc_start(w, MGMT_ID);
	for (uint32_t id = 2; id <= s->nstor + 1; id++) {
		sim_run_until(sim_now_us() + sim_rng_range(&w->flt, 1 * MS, 30 * MS));
		proc_start(w, id);
	}
	while (sim_now_us() < 5 * SEC && !(mgmt_map() && mgmt_map()->nchains))
		sim_run_until(sim_now_us() + 50 * MS);
	if (s->spare)
		proc_start(w, s->spare_id);
	sim_run_until(sim_now_us() + 300 * MS);

	/* The clients and the workload. */
	node(w, s->client_id)->inc = 1;
	node(w, s->client_id)->up = true;
	w->client_r = sim_reactor_new(node(w, s->client_id), 0);
	rpc_pool_new(w->client_r, s->timeout_ms, &w->admin);
	for (uint32_t c = 0; c < s->nclients; c++) {
		struct sclient_opts o;

		sclient_opts_init(&o, sizeof(o));
		o.no_shm = true;	/* the simulated network only */
		o.timeout_ms = s->timeout_ms;
		o.retry_ms = s->retry_ms;
		if (sclient_new(w->client_r, MGMT_ADDR, &o, &w->scs[c]))
			abort();
	}
	t_work = sim_now_us();
	w->think_us = 2 * WORK_SPAN_US * s->lanes / s->nops;
	for (uint32_t i = 0; i < s->lanes; i++) {
		w->lanes[i].w = w;
		w->lanes[i].client = i % s->nclients;
		sim_at(w->client_r, t_work + sim_rng_below(&w->wl, 50 * MS), lane_next, NULL,
		       &w->lanes[i]);
	}
	for (uint32_t i = 0; i < s->nfaults; i++)
		sim_at(NULL, t_work + s->faults[i].at_us, on_fault, NULL,
		       (void *)(intptr_t)s->faults[i].kind);

	/* Until every operation is done (or far past any budget). */
	deadline = t_work + 90 * SEC;
	while (!lanes_done(w) && sim_now_us() < deadline)
		sim_run_until(sim_now_us() + 100 * MS);
	chk_hangs(sim_now_us());

	/* Heal, settle (bounded), read everything back. */
	heal_all(w);
	deadline = sim_now_us() + 30 * SEC;
	while (sim_now_us() < deadline) {
		sim_run_until(sim_now_us() + 100 * MS);
		if (!settled(w)) {
			calm = 0;
		} else if (++calm >= 20) {
			ok_settle = true;
			break;
		}
	}
	if (!ok_settle)
		note(w, "the cluster did not settle within 30 s of healing");
	final_reads(w);
	chk_hangs(sim_now_us());

	memset(res, 0, sizeof(*res));
	res->seed = seed;
	for (int p = 0; p < CHK_NPROPS; p++)
		res->counts[p] = chk_count((enum chk_prop)p);
	res->first = chk_first();
	res->ops = w->issued;
	res->ops_failed = w->failed;
	res->notes = w->notes;
	memcpy(res->faults, w->faults, sizeof(res->faults));
	res->digest = sim_trace_digest();
	res->events = sim_events_run();
	res->vtime_ms = sim_now_us() / MS;
	res->settled = ok_settle;
	sim_trace("RESULT: seed %llu: %u violation(s), %u ops (%u failed), %llu events, %llu ms virtual, settled %s",
		  (unsigned long long)seed, chk_total(), w->issued, w->failed,
		  (unsigned long long)res->events, (unsigned long long)res->vtime_ms,
		  ok_settle ? "yes" : "no");
}

/* ---- batches ---- */

struct opts {
	uint64_t first, count;
	bool one, verbose, replay;
	uint32_t steps;
	uint32_t show;		/* failing seeds explained with their trace tail */
};

static void usage(void)
{
	fprintf(stderr,
		"usage: sim_chain --seeds FIRST:COUNT [--steps N] [--show N] [--faults LIST]\n"
		"       sim_chain --seed N [--verbose] [--steps N] [--faults LIST]\n"
		"       sim_chain --replay-check FIRST:COUNT [--steps N]\n"
		"  --unsafe-replace: a replacement may destroy a chain's last live serving replica\n"
		"  LIST: fault kinds to inject, comma-separated, of\n"
		"        crash,disk,full,net,cut,mgmt,drain,replace (default: all)\n");
}

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

/* "crash,disk,..." (names as in fkind_names) into a mask. */
static int parse_faults(const char *s, uint32_t *mask)
{
	char buf[256];
	char *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	*mask = 0;
	for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		int k;

		for (k = 0; k < F_NKINDS && strcmp(t, fkind_names[k]); k++)
			;
		if (k == F_NKINDS)
			return -EINVAL;
		*mask |= 1u << k;
	}
	return 0;
}

static int parse_range(const char *s, uint64_t *first, uint64_t *count)
{
	const char *colon = strchr(s, ':');
	char a[32];

	if (!colon || (size_t)(colon - s) >= sizeof(a))
		return -EINVAL;
	memcpy(a, s, (size_t)(colon - s));
	a[colon - s] = '\0';
	return parse_u64(a, first) || parse_u64(colon + 1, count) ? -EINVAL : 0;
}

/* Runs seed in a child, with its trace on when trace; explain: print the
 * violations and the trace's tail. Fills res. Returns 0, 1 (violations)
 * or 2 (the child died: a crash of the real code or the harness). */
static int run_forked(uint64_t seed, uint32_t steps, bool trace, bool explain,
		      struct run_result *res)
{
	int fds[2], status;
	pid_t pid;
	ssize_t got = 0;

	memset(res, 0, sizeof(*res));
	res->seed = seed;
	if (pipe(fds))
		return 2;
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 2;
	if (pid == 0) {
		struct run_result r;

		close(fds[0]);
		sim_trace_reset(trace, false);
		run_one(seed, steps, &r);
		if (chk_total()) {
			snprintf(r.msg, sizeof(r.msg), "%s", chk_first_msg());
			if (trace && explain) {
				printf("---- seed %llu: violations ----\n", (unsigned long long)seed);
				chk_print(stdout, 8);
				printf("---- seed %llu: trace tail (replay: sim_chain --seed %llu --verbose) ----\n",
				       (unsigned long long)seed, (unsigned long long)seed);
				sim_trace_print_tail(80);
			}
		}
		if (write(fds[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
			_exit(3);
		fflush(stdout);
		/* No exit handlers: the run left dead processes' memory behind. */
		_exit(chk_total() ? 1 : 0);
	}
	close(fds[1]);
	while (got < (ssize_t)sizeof(*res)) {
		ssize_t n = read(fds[0], (char *)res + got, sizeof(*res) - (size_t)got);

		if (n <= 0)
			break;
		got += n;
	}
	close(fds[0]);
	if (waitpid(pid, &status, 0) < 0)
		return 2;
	if (got != (ssize_t)sizeof(*res) || !WIFEXITED(status) || WEXITSTATUS(status) > 1) {
		memset(res, 0, sizeof(*res));
		res->seed = seed;
		snprintf(res->msg, sizeof(res->msg), "the run died (%s %d)",
			 WIFSIGNALED(status) ? "signal" : "exit status",
			 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
		return 2;
	}
	return WEXITSTATUS(status);
}

static double wall_s(void)
{
	struct timespec ts;

	/* Real time, for the summary only: never part of a run. */
	__real_clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int batch(const struct opts *o)
{
	uint64_t failed = 0, died = 0, ops = 0, ops_failed = 0, notes = 0, unsettled = 0;
	uint64_t counts[CHK_NPROPS] = { 0 }, faults[F_NKINDS] = { 0 };
	uint32_t shown = 0;
	double t0 = wall_s();

	for (uint64_t s = o->first; s < o->first + o->count; s++) {
		struct run_result r;
		int rc = run_forked(s, o->steps, false, false, &r);

		ops += r.ops;
		ops_failed += r.ops_failed;
		notes += r.notes;
		unsettled += rc != 2 && !r.settled;
		for (int k = 0; k < F_NKINDS; k++)
			faults[k] += r.faults[k];
		/* Not a violation, but worth a look: a chain stuck syncing. */
		if (rc != 2 && !r.settled)
			printf("seed %llu: note: the cluster did not settle within 30 s of healing\n",
			       (unsigned long long)s);
		if (rc == 0)
			continue;
		failed++;
		if (rc == 2) {
			died++;
		} else {
			for (int p = 0; p < CHK_NPROPS; p++)
				counts[p] += r.counts[p] ? 1 : 0;
		}
		printf("seed %llu: FAIL %s: %s\n", (unsigned long long)s,
		       rc == 2 ? "run died" : chk_prop_name((enum chk_prop)r.first), r.msg);
		if (shown < o->show) {
			struct run_result again;

			shown++;
			run_forked(s, o->steps, true, true, &again);
		}
	}
	printf("sim: seeds %llu..%llu: %llu runs, %llu failed (",
	       (unsigned long long)o->first, (unsigned long long)(o->first + o->count - 1),
	       (unsigned long long)o->count, (unsigned long long)failed);
	for (int p = 0; p < CHK_NPROPS; p++)
		printf("%s%s %llu", p ? ", " : "", chk_prop_name((enum chk_prop)p),
		       (unsigned long long)counts[p]);
	printf(", died %llu); ops %llu (%llu failed); faults:", (unsigned long long)died,
	       (unsigned long long)ops, (unsigned long long)ops_failed);
	for (int k = 0; k < F_NKINDS; k++)
		printf(" %s %llu", fkind_names[k], (unsigned long long)faults[k]);
	printf("; unsettled %llu, notes %llu; %.1f s\n", (unsigned long long)unsettled,
	       (unsigned long long)notes, wall_s() - t0);
	return failed ? 1 : 0;
}

static int replay_check(const struct opts *o)
{
	int bad = 0;

	for (uint64_t s = o->first; s < o->first + o->count; s++) {
		struct run_result a, b, c;

		run_forked(s, o->steps, true, false, &a);
		run_forked(s, o->steps, true, false, &b);
		/* Tracing only watches: a batch run (no trace) must do the same. */
		run_forked(s, o->steps, false, false, &c);
		if (a.digest != b.digest || !a.digest) {
			printf("seed %llu: trace digests differ: %016llx vs %016llx\n",
			       (unsigned long long)s, (unsigned long long)a.digest,
			       (unsigned long long)b.digest);
			bad = 1;
		}
		if (a.events != c.events || a.ops != c.ops || a.vtime_ms != c.vtime_ms ||
		    memcmp(a.counts, c.counts, sizeof(a.counts))) {
			printf("seed %llu: the run without a trace differs (%llu vs %llu events)\n",
			       (unsigned long long)s, (unsigned long long)a.events,
			       (unsigned long long)c.events);
			bad = 1;
		}
	}
	printf("sim: replay check of seeds %llu..%llu: %s\n", (unsigned long long)o->first,
	       (unsigned long long)(o->first + o->count - 1),
	       bad ? "DIFFERENT" : "identical traces, and the same runs untraced");
	return bad;
}

static int one(const struct opts *o)
{
	struct run_result r;

	sim_trace_reset(true, o->verbose);
	run_one(o->first, o->steps, &r);
	printf("seed %llu: %s; trace %llu lines, digest %016llx\n", (unsigned long long)o->first,
	       chk_total() ? "VIOLATIONS" : "ok", (unsigned long long)sim_trace_lines(),
	       (unsigned long long)r.digest);
	if (chk_total()) {
		chk_print(stdout, 8);
		if (!o->verbose) {
			printf("---- trace tail ----\n");
			sim_trace_print_tail(120);
		}
	}
	fflush(stdout);
	_exit(chk_total() ? 1 : 0);
}

int main(int argc, char **argv)
{
	struct opts o = { .show = 2 };
	int mode = 0;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;

		if (!strcmp(a, "--verbose")) {
			o.verbose = true;
		} else if (!strcmp(a, "--seeds") && v && !parse_range(v, &o.first, &o.count)) {
			mode = 1;
			i++;
		} else if (!strcmp(a, "--replay-check") && v && !parse_range(v, &o.first, &o.count)) {
			mode = 3;
			i++;
		} else if (!strcmp(a, "--seed") && v && !parse_u64(v, &o.first)) {
			mode = 2;
			o.count = 1;
			i++;
		} else if (!strcmp(a, "--steps") && v && !parse_u64(v, &x) && x && x < 100000) {
			o.steps = (uint32_t)x;
			i++;
		} else if (!strcmp(a, "--unsafe-replace")) {
			g_unsafe_replace = true;
		} else if (!strcmp(a, "--faults") && v && !parse_faults(v, &g_fault_mask)) {
			i++;
		} else if (!strcmp(a, "--show") && v && !parse_u64(v, &x) && x < 1000) {
			o.show = (uint32_t)x;
			i++;
		} else {
			usage();
			return 2;
		}
	}
	sim_log_attach();
	signal(SIGPIPE, SIG_IGN);
	switch (mode) {
	case 1:
		return batch(&o);
	case 2:
		return one(&o);
	case 3:
		return replay_check(&o);
	default:
		usage();
		return 2;
	}
}
