/* Storage client: routing by the cluster map, retries with backoff. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cluster_map.h"
#include "common/crc32c.h"
#include "common/log.h"
#include "common/rand.h"
#include "net/auth.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "proto/storage.h"
#include "net/mgmt_addrs.h"
#include "shm_reads.h"
#include "storage_client.h"
#include "common/errors_int.h"

struct map_summary {
	uint32_t nodes, targets, replication;
	uint64_t capacity;
};

struct sclient {
	struct map_summary sum;
	struct reactor *r;
	struct rpc_pool *pool;
	struct shm_peers *shm;		/* same-host reads (shm_reads.h) */
	struct mgmt_addrs mgmt;		/* the list, and the one to call */
	const char *map_called;		/* the mgmt of the fetch in flight */
	struct sclient_opts o;
	struct cluster_map map;		/* owner thread */
	bool fetching;
	bool closing;
	struct sc_io *wait_head, **wait_tail;	/* waiting for a map */
	struct sc_io *parked;			/* in a backoff timer */
	struct reactor_timer refetch;
	struct reactor_timer periodic;	/* learn of map changes proactively */
	uint32_t rr;			/* o.read_in_turn: the next read's turn */
	/* I/Os submitted from other threads, for the owner's next turn
	 * (drain_on_owner; posted once while q_posted). */
	pthread_mutex_t qlock;
	struct sc_io *q_head, **q_tail;
	bool q_posted;
	/* shared with other threads */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t map_version;
	uint32_t table_len;
	int map_err;
	struct cluster_map svcs;	/* the map's services alone */
	uint64_t *full;			/* chains with a full member (sclient_full_chains) */
	uint32_t full_words, nfull;
};

static void io_start(struct sc_io *io);
static void fetch_map(struct sclient *sc);

void sclient_opts_init(struct sclient_opts *o, size_t size)
{
	memset(o, 0, size);
	o->opts_size = size;
	o->timeout_ms = 10000;
	o->retry_ms = 30000;
}

uint32_t sclient_table_len(struct sclient *sc)
{
	uint32_t n;

	pthread_mutex_lock(&sc->lock);
	n = sc->table_len;
	pthread_mutex_unlock(&sc->lock);
	return n;
}

void sclient_map_summary(struct sclient *sc, uint32_t *nodes, uint32_t *targets,
			 uint32_t *replication, uint64_t *capacity)
{
	pthread_mutex_lock(&sc->lock);
	*nodes = sc->sum.nodes;
	*targets = sc->sum.targets;
	*replication = sc->sum.replication;
	*capacity = sc->sum.capacity;
	pthread_mutex_unlock(&sc->lock);
}

uint64_t sclient_map_version(struct sclient *sc)
{
	uint64_t v;

	pthread_mutex_lock(&sc->lock);
	v = sc->map_version;
	pthread_mutex_unlock(&sc->lock);
	return v;
}

/* ---- completion ---- */

static void io_complete(struct sc_io *io, int status)
{
	/* The chain's own answers (common/errors_int.h) stay inside: a caller
	 * that runs out of retries on them learns that the chain could not
	 * serve. */
	if (status == STRATA_ELOST)
		log_warn("client", "chunk %llx:%llx: no intact replica is left (every copy is damaged);"
			 " failing at once", (unsigned long long)io->ino, (unsigned long long)io->idx);
	switch (status) {
	case STRATA_ESTALE_MAP: case STRATA_ENOTHEAD: case STRATA_EDIRTY:
	case STRATA_ESYNCING: case STRATA_ENEEDFULL:
		status = STRATA_EUNAVAIL;
		break;
	default:
		break;
	}
	io->status = status;
	if (status && io->kind == SC_READ) {
		io->nread = 0;
	}
	io->cb(io);
}

static void unpark(struct sclient *sc, struct sc_io *io)
{
	for (struct sc_io **pp = &sc->parked; *pp; pp = &(*pp)->next) {
		if (*pp == io) {
			*pp = io->next;
			return;
		}
	}
}

static void on_retry_timer(void *arg)
{
	struct sc_io *io = arg;

	unpark(io->sc, io);
	io_start(io);
}

static bool retryable(int err)
{
	switch (err) {
	case -ETIMEDOUT: case -ECONNRESET: case -ECONNREFUSED: case -ENOTCONN:
	case -EHOSTUNREACH: case -ECONNABORTED: case -EPIPE: case -ESHUTDOWN:
	case -EAGAIN: case -EIO:
	case STRATA_ESTALE_MAP: case STRATA_ENOTHEAD: case STRATA_EUNAVAIL:
	case STRATA_EDIRTY: case STRATA_EINTEGRITY: case STRATA_ESYNCING: case STRATA_ENEEDFULL:
		return true;
	default:
		return false;
	}
}

/* Serving members of io's chain in the cached map. */
static uint32_t serving_count(struct sclient *sc, const struct sc_io *io)
{
	const struct cm_chain *c;
	uint32_t n = 0;

	if (io->chain_idx >= sc->map.nchains)
		return 0;
	c = &sc->map.chains[io->chain_idx];
	for (int i = 0; i < c->len; i++)
		n += c->states[i] == TARGET_SERVING;
	return n;
}

/* A failed attempt: retry after a backoff, or give up. */
static void io_failed(struct sc_io *io, int err)
{
	struct sclient *sc = io->sc;
	uint64_t now = reactor_now_ms(), delay;

	io->last_err = err;
	if (sc->closing) {
		io_complete(io, -ESHUTDOWN);
		return;
	}
	/* Integrity errors on writes mean the data was damaged in flight:
	 * resending the same buffer is the right retry. */
	if (!retryable(err) || now >= io->deadline_ms) {
		io_complete(io, err);
		return;
	}
	io->attempt++;
	if ((err == STRATA_EDIRTY || err == STRATA_ESYNCING ||
	     (err == STRATA_EINTEGRITY && io->kind == SC_READ)) &&
	    ++io->quick < serving_count(sc, io)) {
		/* Another replica right away, once each; then a backoff. */
		io->replica++;
		io_start(io);
		return;
	}
	io->quick = 0;
	if (err == STRATA_ESTALE_MAP || err == STRATA_ENOTHEAD || err == STRATA_EUNAVAIL ||
	    err == -ECONNREFUSED || err == -ETIMEDOUT || err == -ECONNRESET || err == -ENOTCONN)
		fetch_map(sc);
	io->replica++;
	delay = 20ull << (io->attempt < 6 ? io->attempt : 6);
	if (delay > 1000)
		delay = 1000;
	if (now + delay > io->deadline_ms)
		delay = io->deadline_ms - now;
	io->next = sc->parked;
	sc->parked = io;
	reactor_timer_init(&io->timer, on_retry_timer, io);
	reactor_timer_arm(sc->r, &io->timer, delay);
}

/* ---- the map ---- */

/* Under sc->lock: the bits of chains with a full member. On -ENOMEM the
 * previous bits stay (placement then avoids what it avoided before). */
static void publish_full(struct sclient *sc)
{
	uint32_t words = (sc->map.nchains + 63) / 64, n = 0;

	if (words > sc->full_words) {
		uint64_t *b = realloc(sc->full, words * sizeof(*b));

		if (!b)
			return;
		sc->full = b;
		sc->full_words = words;
	}
	if (sc->full_words)
		memset(sc->full, 0, sc->full_words * sizeof(*sc->full));
	for (uint32_t i = 0; i < sc->map.nchains; i++) {
		const struct cm_chain *c = &sc->map.chains[i];

		for (uint32_t k = 0; k < c->len; k++) {
			const struct cm_target *t = cm_find_target(&sc->map, c->targets[k]);

			if (t && t->full) {
				sc->full[i / 64] |= 1ull << (i % 64);
				n++;
				break;
			}
		}
	}
	sc->nfull = n;
}

uint32_t sclient_full_chains(struct sclient *sc, uint64_t *bits, uint32_t nwords,
			     uint32_t *nfull)
{
	uint32_t n, w;

	pthread_mutex_lock(&sc->lock);
	n = sc->table_len;
	w = nwords < sc->full_words ? nwords : sc->full_words;
	if (w)
		memcpy(bits, sc->full, w * sizeof(*bits));
	if (nwords > w)
		memset(bits + w, 0, (nwords - w) * sizeof(*bits));
	*nfull = sc->nfull;
	pthread_mutex_unlock(&sc->lock);
	return n;
}

static void publish_map(struct sclient *sc, int err)
{
	struct map_summary sum = { 0, 0, sc->map.replication, 0 };

	for (uint32_t i = 0; i < sc->map.nnodes; i++)
		sum.nodes += sc->map.nodes[i].state == NODE_UP;
	for (uint32_t i = 0; i < sc->map.ntargets; i++)
		sum.targets += sc->map.targets[i].state == TARGET_SERVING;
	/* Each filesystem once (on -ENOMEM: 0, "unknown"). */
	(void)cm_capacity(&sc->map, &sum.capacity, NULL);
	pthread_mutex_lock(&sc->lock);
	if (!cm_reserve_services(&sc->svcs, sc->map.nservices)) {
		sc->svcs.nservices = sc->map.nservices;
		if (sc->map.nservices)
			memcpy(sc->svcs.services, sc->map.services,
			       sc->map.nservices * sizeof(*sc->map.services));
	}
	sc->sum = sum;
	publish_full(sc);
	sc->map_version = sc->map.version;
	sc->table_len = sc->map.nchains;
	sc->map_err = err;
	pthread_cond_broadcast(&sc->cond);
	pthread_mutex_unlock(&sc->lock);
}

static void restart_waiters(struct sclient *sc)
{
	struct sc_io *io = sc->wait_head;

	sc->wait_head = NULL;
	sc->wait_tail = &sc->wait_head;
	while (io) {
		struct sc_io *next = io->next;

		if (sc->map.nchains > io->chain_idx || reactor_now_ms() >= io->deadline_ms ||
		    sc->closing) {
			io_start(io);
		} else {
			/* Still no chain for it: keep waiting. */
			io->next = NULL;
			*sc->wait_tail = io;
			sc->wait_tail = &io->next;
		}
		io = next;
	}
	if (sc->wait_head && !sc->closing)
		reactor_timer_arm(sc->r, &sc->refetch, 200);
}

static void on_map(void *arg, int status, struct rpc_msg *resp)
{
	struct sclient *sc = arg;
	struct cluster_map m;
	bool changed = false;

	sc->fetching = false;
	if (sc->closing)
		return;
	if (!status) {
		cm_init(&m);
		status = cmap_decode_since(resp->body, resp->hdr.body_len, &m, &changed);
		if (!status && changed) {
			/* A process that serves requests (meta) refuses revoked
			 * tokens from the map it holds. */
			if (net_revoked_update(m.version, (const char (*)[TOKEN_ID_LEN + 1])m.revoked,
					       m.nrevoked))
				log_warn("client", "cannot apply the revoked tokens of map version %llu",
					 (unsigned long long)m.version);
			cm_release(&sc->map);
			sc->map = m;
		} else if (status) {
			cm_release(&m);
		}
	}
	if (status) {
		log_debug("client", "cannot fetch the cluster map from '%s': %s", sc->map_called,
			  strata_strerror(status));
		/* The next fetch (a waiter's retry, with its backoff) goes to
		 * the next mgmt, or the leader a follower that cannot read
		 * the database named. */
		mgmt_addrs_read_failed(&sc->mgmt, sc->map_called, status, resp);
	}
	publish_map(sc, status);
	restart_waiters(sc);
}

static void fetch_map(struct sclient *sc)
{
	struct mg_since rq = { sc->map.version };
	struct proto_call c = { .cb = on_map, .arg = sc,
				.timeout_ms = mgmt_addrs_timeout(&sc->mgmt, sc->o.timeout_ms) };

	if (sc->fetching || sc->closing)
		return;
	sc->fetching = true;
	/* Any mgmt serves the map (followers from the database): each
	 * client reads at its own, drawn, address. */
	sc->map_called = mgmt_addrs_read(&sc->mgmt);
	if (mg_get_map_call(sc->pool, sc->map_called, &rq, &c)) {
		sc->fetching = false;
		reactor_timer_arm(sc->r, &sc->refetch, 200);
	}
}

static void on_refetch(void *arg)
{
	struct sclient *sc = arg;

	if (sc->closing)
		return;
	fetch_map(sc);
	if (!sc->fetching)
		restart_waiters(sc);
}

/* ---- one attempt ---- */

/* The bytes of a read fail the CRC they came with: the target may hold a
 * damaged copy it did not check (cached whole blocks go out unverified,
 * the reader's check being end to end), so ask it to. */
static void ask_verify(struct sc_io *io)
{
	struct sclient *sc = io->sc;
	const struct cm_target *t = cm_find_target(&sc->map, io->tried.target_id);
	const struct cm_node *nd = t ? cm_find_node(&sc->map, t->node_id) : NULL;
	struct sp_read rd = { .ref = io->tried };

	if (!nd)
		return;
	rd.offset = io->offset;
	rd.len = io->len;
	sp_ask_verify(sc->pool, nd->addr, &rd, sc->o.timeout_ms);
}

/*
 * The nread bytes of a read of io came back, at data (a shared-memory
 * slot, a batch's answer) or already in io->buf (data NULL), with the CRC
 * and version the target sent: copied in, checked, the rest of the buffer
 * zeroed, and io completed; or this attempt fails (a mismatch asks the
 * target to check its copy). Every read path ends here.
 */
static void read_landed(struct sc_io *io, const uint8_t *data, uint32_t nread, uint32_t crc,
			uint64_t version)
{
	if (nread > io->len) {
		io_failed(io, STRATA_EBADMSG);
		return;
	}
	if (data)
		memcpy(io->buf, data, nread);
	if (crc32c(0, io->buf, nread) != crc) {
		log_warn("client", "chunk %llx:%llx: checksum mismatch in a reply from target %u; retrying another replica",
			 (unsigned long long)io->ino, (unsigned long long)io->idx,
			 io->tried.target_id);
		ask_verify(io);
		io_failed(io, STRATA_EINTEGRITY);
		return;
	}
	memset((uint8_t *)io->buf + nread, 0, io->len - nread);
	io->version = version;
	io->nread = nread;
	io_complete(io, 0);
}

/*
 * Gives back the slots an attempt of io held (slot->peer >= 0), once its
 * answer came (resp) or never will (lost: the daemon may still use them).
 * A daemon that does not know our region (it restarted), or a WRITE_SHM
 * (an older daemon), has io go over TCP: returns -EAGAIN then, else
 * status. io is not touched when status is 0 (it may be the caller's
 * already): shm is its client's.
 */
static int slot_back(struct shm_peers *shm, struct sc_io *io, struct shm_slot *slot, int status,
		     const struct rpc_msg *resp)
{
	bool lost = status && !resp, forget = false;

	if (slot->peer < 0)
		return status;
	if (!status) {
		shm_slot_put(shm, slot, false, false);
		return 0;
	}
	if (resp && io->kind == SC_WRITE && status == STRATA_EBADOP) {
		shm_writes_unknown(shm, slot);
		io->no_shm = true;
		status = -EAGAIN;	/* retried over TCP */
	} else if (resp && (status == -ENOENT || status == -ERANGE)) {
		forget = true;
		io->no_shm = true;
		status = -EAGAIN;
	}
	shm_slot_put(shm, slot, lost, forget);
	return status;
}

/* The answer to a READ or a READ_SHM. A READ_SHM's bytes are in its slot,
 * which goes back once they are copied out (slot_back). */
static void on_read_reply(struct sc_io *io, int status, struct rpc_msg *resp)
{
	struct shm_peers *shm = io->sc->shm;
	struct shm_slot slot = io->slot;	/* io is the caller's once complete */
	bool via_shm = slot.peer >= 0;
	struct sp_read_rep rep;

	io->slot.peer = -1;
	if (!status && (st_read_rep(resp, &rep) ||
			resp->hdr.bulk_len != (via_shm ? 0 : rep.nread)))
		status = STRATA_EBADMSG;
	if (!status)
		read_landed(io, via_shm ? shm_slot_data(shm, &slot) : NULL, rep.nread, rep.crc,
			    rep.version);
	status = slot_back(shm, io, &slot, status, resp);
	if (status)
		io_failed(io, status);
}

static void on_reply(void *arg, int status, struct rpc_msg *resp)
{
	struct sc_io *io = arg;

	if (io->kind == SC_READ) {
		on_read_reply(io, status, resp);
		return;
	}
	if (io->kind == SC_WRITE) {
		struct shm_slot slot = io->slot;

		io->slot.peer = -1;
		status = slot_back(io->sc->shm, io, &slot, status, resp);
	}
	if (status) {
		io_failed(io, status);
		return;
	}
	switch (io->kind) {
	case SC_LIST:
		sp_list_rep_release(&io->list);
		if (st_list_rep(resp, &io->list)) {
			io_failed(io, STRATA_EBADMSG);
			return;
		}
		break;
	case SC_STAT: {
		struct sp_stat_rep rep;

		if (st_stat_rep(resp, &rep)) {
			io_failed(io, STRATA_EBADMSG);
			return;
		}
		io->version = rep.version;
		io->length = rep.length;
		break;
	}
	default: {
		struct sp_update_rep rep;

		if (st_write_rep(resp, &rep)) {
			io_failed(io, STRATA_EBADMSG);
			return;
		}
		io->version = rep.version;
		io->length = rep.length;
		break;
	}
	}
	io_complete(io, 0);
}

static uint16_t op_of(enum sc_kind k)
{
	switch (k) {
	case SC_WRITE: return OP_CHUNK_WRITE;
	case SC_TRUNCATE: return OP_CHUNK_TRUNCATE;
	default: return OP_CHUNK_REMOVE;
	}
}

/*
 * The replica a read of io's bytes asks first, as a rank among the
 * chain's serving members: a hash of the chunk and of the READ_SPAN its
 * offset falls in. Every read of the same bytes, from any client, asks
 * the same replica first, so with R replicas each one's page cache holds
 * 1/R of a dataset and reads it from its disk once; reads spread by turn
 * made every replica read every byte from its disk (R times the disk
 * reads of a cold epoch, and R times the page cache). A hot chunk is
 * still spread by span over the replicas. io->replica moves a retry on.
 */
#define READ_SPAN_SHIFT 20	/* 1 MiB: the client's read piece */

static uint32_t read_rank(const struct sc_io *io)
{
	return (uint32_t)(splitmix64(io->ino ^ splitmix64(io->idx ^
			  splitmix64((uint64_t)io->offset >> READ_SPAN_SHIFT))) >> 32);
}

/* Picks the target for io in chain c; returns its index in c or -1. */
static int pick_member(struct sclient *sc, const struct sc_io *io, const struct cm_chain *c)
{
	int serving[CM_CHAIN_SLOTS], n = 0;

	for (int i = 0; i < c->len; i++) {
		if (c->states[i] == TARGET_SERVING)
			serving[n++] = i;
	}
	if (n == 0)
		return -1;
	if (io->kind == SC_LIST)
		return serving[0];	/* the head saw every update first */
	if (io->kind != SC_READ && io->kind != SC_STAT)
		return 0;	/* updates enter at the head */
	if (io->last_err == STRATA_EDIRTY || io->kind == SC_STAT)
		return serving[n - 1];	/* the tail is always committed */
	if (sc->o.read_in_turn)
		return serving[(io->replica + sc->rr) % (uint32_t)n];
	return serving[(read_rank(io) % (uint32_t)n + io->replica) % (uint32_t)n];
}

/* Picks the target of io's attempt and records it in io->tried; returns
 * its node, or NULL when io was parked for a map or failed (handled). */
static const struct cm_node *io_route(struct sc_io *io)
{
	struct sclient *sc = io->sc;
	const struct cm_chain *c;
	const struct cm_target *t;
	const struct cm_node *nd;
	int m;

	if (sc->closing) {
		io_complete(io, -ESHUTDOWN);
		return NULL;
	}
	if (io->chain_idx >= sc->map.nchains) {
		if (reactor_now_ms() >= io->deadline_ms) {
			io_complete(io, io->last_err ? io->last_err : STRATA_EUNAVAIL);
			return NULL;
		}
		io->next = NULL;
		*sc->wait_tail = io;
		sc->wait_tail = &io->next;
		fetch_map(sc);
		return NULL;
	}
	c = &sc->map.chains[io->chain_idx];
	m = pick_member(sc, io, c);
	t = m >= 0 ? cm_find_target(&sc->map, c->targets[m]) : NULL;
	nd = t ? cm_find_node(&sc->map, t->node_id) : NULL;
	if (!nd) {
		io_failed(io, STRATA_EUNAVAIL);
		return NULL;
	}
	io->tried = (struct sp_ref){ .chain_id = c->id, .chain_ver = c->version,
				     .target_id = t->id, .ino = io->ino, .idx = io->idx,
				     .cap = io->cap };
	return nd;
}

/* Sends io's attempt to nd, the node of the target io_route picked. */
static void io_send(struct sc_io *io, const struct cm_node *nd)
{
	struct sclient *sc = io->sc;
	struct sp_update u = { 0 };
	struct sp_read rd = { 0 };
	struct sp_ref ref = io->tried;
	struct proto_call call = { .timeout_ms = sc->o.timeout_ms, .cb = on_reply, .arg = io };
	int rc;

	if (io->kind == SC_READ) {
		struct sp_shm_read sr;

		rd.ref = ref;
		rd.offset = io->offset;
		rd.len = io->len;
		if (!io->no_shm &&
		    shm_slot_get(sc->shm, nd->id, nd->addr, io->len, false, &io->slot, &sr.shm,
				 &sr.at)) {
			sr.rd = rd;
			rc = st_read_shm_call(sc->pool, nd->addr, &sr, &call);
			if (rc)
				shm_slot_put(sc->shm, &io->slot, false, false);
		} else {
			call.bulk_dst = io->buf;
			call.bulk_cap = io->len;
			rc = st_read_call(sc->pool, nd->addr, &rd, &call);
		}
	} else if (io->kind == SC_STAT) {
		rc = st_stat_call(sc->pool, nd->addr, &ref, &call);
	} else if (io->kind == SC_LIST) {
		struct sp_list ls = { .chain_id = ref.chain_id, .chain_ver = ref.chain_ver,
				      .target_id = ref.target_id, .after_ino = io->ino,
				      .after_idx = io->idx, .max = io->len, .after = io->list_after };

		rc = st_list_call(sc->pool, nd->addr, &ls, &call);
	} else {
		struct sp_shm_write sw;

		u.ref = ref;
		u.offset = io->offset;
		u.len = io->kind == SC_REMOVE ? 0 : io->len;
		if (io->kind == SC_WRITE)
			u.crc = io->crc;
		if (io->kind == SC_WRITE && !io->no_shm &&
		    shm_slot_get(sc->shm, nd->id, nd->addr, io->len, true, &io->slot, &sw.shm,
				 &sw.at)) {
			/* The bytes through our slots: the head copies them
			 * out before it answers (WRITE_SHM). */
			memcpy(shm_slot_data(sc->shm, &io->slot), io->buf, io->len);
			sw.upd = u;
			rc = st_write_shm_call(sc->pool, nd->addr, &sw, &call);
			if (rc)
				shm_slot_put(sc->shm, &io->slot, false, false);
		} else {
			if (io->kind == SC_WRITE) {
				call.bulk = io->buf;
				call.bulk_len = io->len;
			}
			rc = proto_call(sc->pool, nd->addr, op_of(io->kind), sp_update_enc_any, &u,
					&call);
		}
	}
	if (rc)
		io_failed(io, rc);
}

static void io_start(struct sc_io *io)
{
	const struct cm_node *nd = io_route(io);

	if (nd)
		io_send(io, nd);
}

/* ---- batched small reads ---- */

/*
 * Reads of at most SC_BATCH_SMALL bytes submitted together, from other
 * threads between two turns of the owner's loop (a ring's submit, a
 * dataset reader's samples), that go to the same target leave as one
 * OP_CHUNK_BATCH_READ: one request and one answer for many samples,
 * served with io_uring on the target. Each read is still checked against
 * its own CRC and completes on its own; one that fails (or a batch that
 * does) is retried alone, as any read.
 */
#define BATCH_ITEMS 256u
#define BATCH_TARGETS 16u

struct sc_batch {
	uint32_t target_id;
	char addr[CM_ADDR_LEN];
	uint32_t n;
	uint64_t bytes;
	uint8_t *buf;			/* the answer's slots, back to back */
	struct sc_io *ios[BATCH_ITEMS];
};

static void on_batch_reply(void *arg, int status, struct rpc_msg *resp)
{
	struct sc_batch *b = arg;
	struct sp_batch_rep rep = { 0 };
	uint64_t off = 0;

	if (!status && (st_batch_rep(resp, &rep) || rep.results_n != b->n ||
			resp->hdr.bulk_len != b->bytes))
		status = STRATA_EBADMSG;
	for (uint32_t i = 0; i < b->n; i++) {
		struct sc_io *io = b->ios[i];
		const struct sp_read_result *r = status ? NULL : &rep.results[i];
		int st = status ? status : r->status;
		uint32_t len = io->len;		/* io is the caller's once complete */

		if (st)
			io_failed(io, st);
		else
			read_landed(io, b->buf + off, r->nread, r->crc, r->version);
		off += len;
	}
	sp_batch_rep_release(&rep);
	free(b->buf);
	free(b);
}

static void batch_send(struct sclient *sc, struct sc_batch *b)
{
	struct sp_batch_item items[BATCH_ITEMS];
	struct sp_cap caps[BATCH_ITEMS];
	struct sp_batch rq = { .target_id = b->target_id, .items = items, .items_n = b->n,
			       .caps = caps };
	struct proto_call call = { .timeout_ms = sc->o.timeout_ms, .cb = on_batch_reply,
				   .arg = b, .bulk_cap = b->bytes };
	int rc;

	for (uint32_t i = 0; i < b->n; i++) {
		const struct sc_io *io = b->ios[i];

		/* Items of one file share a cap. */
		if (!rq.caps_n || caps[rq.caps_n - 1].ino != io->cap.ino ||
		    memcmp(&caps[rq.caps_n - 1], &io->cap, sizeof(io->cap)))
			caps[rq.caps_n++] = io->cap;
		items[i] = (struct sp_batch_item){ .chain_id = io->tried.chain_id,
						   .chain_ver = io->tried.chain_ver,
						   .ino = io->ino, .idx = io->idx,
						   .offset = io->offset, .len = io->len,
						   .cap = rq.caps_n - 1 };
	}
	b->buf = malloc(b->bytes);
	call.bulk_dst = b->buf;
	rc = b->buf ? st_batch_call(sc->pool, b->addr, &rq, &call) : -ENOMEM;
	if (rc) {
		for (uint32_t i = 0; i < b->n; i++)
			io_failed(b->ios[i], rc);
		free(b->buf);
		free(b);
	}
}

/* A first attempt of a small read whose chain the map knows. */
static bool batchable(const struct sclient *sc, const struct sc_io *io)
{
	return io->kind == SC_READ && io->len && io->len <= SC_BATCH_SMALL && io->attempt == 0 &&
	       !sc->closing && io->chain_idx < sc->map.nchains;
}

/* Adds io (routed to nd) to the batch of its target, or sends it alone. */
static void batch_add(struct sc_batch **bs, uint32_t *nb, struct sc_io *io,
		      const struct cm_node *nd)
{
	struct sc_batch *b = NULL;

	for (uint32_t i = 0; i < *nb && !b; i++) {
		if (bs[i]->target_id == io->tried.target_id && bs[i]->n < BATCH_ITEMS)
			b = bs[i];
	}
	if (!b && *nb < BATCH_TARGETS) {
		b = malloc(sizeof(*b));
		if (b) {
			b->target_id = io->tried.target_id;
			snprintf(b->addr, sizeof(b->addr), "%s", nd->addr);
			b->n = 0;
			b->bytes = 0;
			bs[(*nb)++] = b;
		}
	}
	if (!b) {
		io_send(io, nd);
		return;
	}
	b->ios[b->n++] = io;
	b->bytes += io->len;
}

/* ---- submission ---- */

/* Empties the queue of I/Os other threads submitted (any thread). */
static struct sc_io *queue_take(struct sclient *sc)
{
	struct sc_io *io;

	pthread_mutex_lock(&sc->qlock);
	io = sc->q_head;
	sc->q_head = NULL;
	sc->q_tail = &sc->q_head;
	sc->q_posted = false;
	pthread_mutex_unlock(&sc->qlock);
	return io;
}

/* The I/Os other threads queued since the last turn: small reads batched
 * per target, the others started one by one. */
static void drain_on_owner(void *arg)
{
	struct sclient *sc = arg;
	struct sc_batch *bs[BATCH_TARGETS];
	uint32_t nb = 0;
	struct sc_io *io, *next;

	for (io = queue_take(sc); io; io = next) {
		const struct cm_node *nd;

		next = io->next;
		if (!batchable(sc, io)) {
			io_start(io);
			continue;
		}
		nd = io_route(io);
		if (nd)
			batch_add(bs, &nb, io, nd);
	}
	for (uint32_t i = 0; i < nb; i++) {
		if (bs[i]->n == 1) {
			io = bs[i]->ios[0];
			free(bs[i]);
			io_start(io);
		} else {
			batch_send(sc, bs[i]);
		}
	}
}

void sc_submit(struct sclient *sc, struct sc_io *io)
{
	bool post;

	io->sc = sc;
	io->status = 0;
	io->nread = 0;
	io->version = 0;
	io->length = 0;
	io->attempt = 0;
	io->quick = 0;
	io->replica = 0;
	io->last_err = 0;
	io->slot.peer = -1;
	io->no_shm = false;
	io->next = NULL;
	io->deadline_ms = reactor_now_ms() + sc->o.retry_ms;
	sc->rr++;
	if (io->kind == SC_WRITE)
		io->crc = crc32c(0, io->buf, io->len);
	memset(&io->list, 0, sizeof(io->list));
	if ((io->kind == SC_LIST && (!io->len || io->len > SP_LIST_PAGE)) ||
	    ((io->kind == SC_READ || io->kind == SC_WRITE) && io->len && !io->buf)) {
		io->status = -EINVAL;
		io->cb(io);
		return;
	}
	if (reactor_on_thread(sc->r)) {
		io_start(io);
		return;
	}
	/* One wake-up of the owner for what arrives before it runs. */
	pthread_mutex_lock(&sc->qlock);
	*sc->q_tail = io;
	sc->q_tail = &io->next;
	post = !sc->q_posted;
	sc->q_posted = true;
	pthread_mutex_unlock(&sc->qlock);
	if (post && reactor_post(sc->r, drain_on_owner, sc)) {
		for (struct sc_io *next, *q = queue_take(sc); q; q = next) {
			next = q->next;
			io_complete(q, -ENOMEM);
		}
	}
}

struct sync_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done;
};

static void sync_done(struct sc_io *io)
{
	struct sync_wait *s = io->user;

	pthread_mutex_lock(&s->lock);
	s->done = 1;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

int sc_sync(struct sclient *sc, struct sc_io *io)
{
	struct sync_wait s = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };

	io->cb = sync_done;
	io->user = &s;
	sc_submit(sc, io);
	pthread_mutex_lock(&s.lock);
	while (!s.done)
		pthread_cond_wait(&s.cond, &s.lock);
	pthread_mutex_unlock(&s.lock);
	return io->status;
}

/* ---- life cycle ---- */

#define MAP_REFRESH_MS 1000

static void on_periodic(void *arg)
{
	struct sclient *sc = arg;

	if (sc->closing)
		return;
	fetch_map(sc);
	reactor_timer_arm(sc->r, &sc->periodic, MAP_REFRESH_MS);
}

static void start_on_owner(void *arg)
{
	struct sclient *sc = arg;

	if (sc->closing)
		return;
	fetch_map(sc);
	if (!reactor_timer_armed(&sc->periodic))
		reactor_timer_arm(sc->r, &sc->periodic, MAP_REFRESH_MS);
}

void sclient_refresh(struct sclient *sc)
{
	reactor_post(sc->r, start_on_owner, sc);
}

int sclient_new(struct reactor *r, const char *mgmt_addr, const struct sclient_opts *o,
		struct sclient **out)
{
	struct sclient *sc;
	int rc;

	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return -ENOMEM;
	if (mgmt_addrs_init(&sc->mgmt, mgmt_addr)) {
		free(sc);
		return -EINVAL;
	}
	sc->r = r;
	sclient_opts_init(&sc->o, sizeof(sc->o));
	if (o) {
		if (o->timeout_ms)
			sc->o.timeout_ms = o->timeout_ms;
		if (o->retry_ms)
			sc->o.retry_ms = o->retry_ms;
		sc->o.read_in_turn = o->read_in_turn;
		sc->o.no_shm = o->no_shm;
	}
	cm_init(&sc->map);
	cm_init(&sc->svcs);
	sc->wait_tail = &sc->wait_head;
	sc->q_tail = &sc->q_head;
	pthread_mutex_init(&sc->qlock, NULL);
	pthread_mutex_init(&sc->lock, NULL);
	pthread_cond_init(&sc->cond, NULL);
	reactor_timer_init(&sc->refetch, on_refetch, sc);
	reactor_timer_init(&sc->periodic, on_periodic, sc);
	rc = rpc_pool_new(r, sc->o.timeout_ms, &sc->pool);
	if (!rc && o && o->cred)
		rc = rpc_pool_set_cred(sc->pool, o->cred);
	if (!rc && o && o->has_tls)
		rpc_pool_set_tls(sc->pool, o->tls);
	if (!rc)
		rc = shm_peers_new(r, sc->pool, sc->o.timeout_ms, sc->o.no_shm, &sc->shm);
	if (rc) {
		rpc_pool_free(sc->pool);
		free(sc);
		return rc;
	}
	sc->o.cred = NULL;	/* the pool keeps its copy */
	reactor_call(r, start_on_owner, sc);
	*out = sc;
	return 0;
}

/* A refused credential, or a server whose certificate we do not trust
 * (or that wants TLS we do not speak), does not get better by waiting. */
/* Answers no retry changes: a refused credential, TLS, or a peer that is
 * not Strata (or speaks another version). */
static bool cred_refused(int err)
{
	return err == STRATA_ENOCRED || err == -EKEYREJECTED || err == -EKEYEXPIRED ||
	       err == -EKEYREVOKED || err == -EACCES || err == STRATA_ETLSREQ ||
	       err == STRATA_ETLS || err == STRATA_EPROTOVER;
}

/* Called with sc->lock held: post a map request to the owner and wait up
 * to 200 ms for an answer (or any other change to the map). After a
 * failed one, first wait those 200 ms: a peer that refuses or drops
 * connections at once must not be asked in a tight loop. */
static void ask_again_and_wait(struct sclient *sc)
{
	bool failed = sc->map_err != 0;
	struct timespec ts;

	pthread_mutex_unlock(&sc->lock);
	if (failed)
		usleep(200 * 1000);
	reactor_post(sc->r, start_on_owner, sc);
	pthread_mutex_lock(&sc->lock);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 200 * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&sc->cond, &sc->lock, &ts);
}

int sclient_wait_map(struct sclient *sc, uint32_t timeout_ms)
{
	uint64_t deadline = reactor_now_ms() + timeout_ms;
	int rc = 0;

	pthread_mutex_lock(&sc->lock);
	while (sc->table_len == 0) {
		uint64_t now = reactor_now_ms();

		if (now >= deadline || cred_refused(sc->map_err)) {
			rc = sc->map_err ? sc->map_err : -ETIMEDOUT;
			break;
		}
		/* Ask again: the cluster may still be forming. */
		ask_again_and_wait(sc);
	}
	pthread_mutex_unlock(&sc->lock);
	return rc;
}

int sclient_find_service(struct sclient *sc, uint32_t kind, uint32_t after, uint32_t timeout_ms,
			 char *addr, size_t cap, uint32_t *node_id)
{
	uint64_t deadline = reactor_now_ms() + timeout_ms;
	int rc = 0;

	pthread_mutex_lock(&sc->lock);
	for (;;) {
		const struct cm_service *s = cm_pick_service(&sc->svcs, kind, after);

		if (s) {
			if (strlen(s->addr) >= cap) {
				rc = -ENAMETOOLONG;
			} else {
				memcpy(addr, s->addr, strlen(s->addr) + 1);
				if (node_id)
					*node_id = s->node_id;
			}
			break;
		}
		if (reactor_now_ms() >= deadline || cred_refused(sc->map_err)) {
			rc = sc->map_err ? sc->map_err : -ENOENT;
			break;
		}
		/* Ask again: the service may not have announced itself yet. */
		ask_again_and_wait(sc);
	}
	pthread_mutex_unlock(&sc->lock);
	return rc;
}

uint32_t sclient_services(struct sclient *sc, uint32_t kind, struct cm_service *out,
			  uint32_t max, uint64_t *version)
{
	uint32_t n = 0;

	pthread_mutex_lock(&sc->lock);
	for (uint32_t i = 0; i < sc->svcs.nservices; i++) {
		const struct cm_service *s = &sc->svcs.services[i];

		if (s->kind != kind || s->state != NODE_UP)
			continue;
		if (n < max)
			out[n] = *s;
		n++;
	}
	if (version)
		*version = sc->map_version;
	pthread_mutex_unlock(&sc->lock);
	return n;
}

static void free_on_owner(void *arg)
{
	struct sclient *sc = arg;

	sc->closing = true;
	reactor_timer_cancel(sc->r, &sc->refetch);
	reactor_timer_cancel(sc->r, &sc->periodic);
	while (sc->parked) {
		struct sc_io *io = sc->parked;

		sc->parked = io->next;
		reactor_timer_cancel(sc->r, &io->timer);
		io_complete(io, -ESHUTDOWN);
	}
	while (sc->wait_head) {
		struct sc_io *io = sc->wait_head;

		sc->wait_head = io->next;
		io_complete(io, -ESHUTDOWN);
	}
	sc->wait_tail = &sc->wait_head;
	/* In-flight calls fail with -ECONNRESET and complete as shut down. */
	rpc_pool_free(sc->pool);
	sc->pool = NULL;
	shm_peers_free(sc->shm);	/* after the reads that held its slots */
	sc->shm = NULL;
}

void sclient_free(struct sclient *sc)
{
	if (!sc)
		return;
	reactor_call(sc->r, free_on_owner, sc);
	cm_release(&sc->map);
	cm_release(&sc->svcs);
	free(sc->full);
	pthread_mutex_destroy(&sc->lock);
	pthread_mutex_destroy(&sc->qlock);
	pthread_cond_destroy(&sc->cond);
	free(sc);
}
