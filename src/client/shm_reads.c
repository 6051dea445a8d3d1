/* Same-host reads and writes through shared memory: the storage client's
 * side. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/cluster_map.h"
#include "common/log.h"
#include "net/codec.h"
#include "shm_reads.h"
#include "strata/errors.h"

#define SHM_PEERS 32u
#define SHM_SIZE ((uint64_t)SHM_SLOT * SHM_SLOTS)
#define SHM_ATTACH_MS 2000

enum peer_state { PEER_NONE, PEER_ATTACHING, PEER_CHECKING, PEER_READY, PEER_OFF };

struct shm_peer {
	struct shm_peers *owner;
	uint32_t node_id;		/* 0: a free entry */
	char addr[CM_ADDR_LEN];
	enum peer_state state;
	uint64_t retry_ms;		/* PEER_OFF: attach again after */
	/* Written by the helper thread while PEER_ATTACHING. */
	int err;
	int ufd;			/* the attach connection: the region lives while it does */
	uint8_t *base;
	struct sp_shm id;
	/* Owner thread. */
	uint64_t busy;			/* slots held by reads and writes */
	uint64_t lost;			/* slots the daemon may still use */
	bool no_writes;			/* it answered WRITE_SHM "unknown op" */
};

struct shm_peers {
	struct reactor *r;
	struct rpc_pool *pool;
	uint32_t timeout_ms;
	bool off;
	bool closing;
	uint32_t attaching;		/* attaches on the helper thread */
	struct shm_peer peer[SHM_PEERS];
};

int shm_peers_new(struct reactor *r, struct rpc_pool *pool, uint32_t timeout_ms, bool off,
		  struct shm_peers **out)
{
	struct shm_peers *p = calloc(1, sizeof(*p));
	const char *env = getenv("STRATA_SHM_READS");

	if (!p)
		return -ENOMEM;
	p->r = r;
	p->pool = pool;
	p->timeout_ms = timeout_ms;
	p->off = off || (env && !strcmp(env, "0"));
	for (uint32_t i = 0; i < SHM_PEERS; i++)
		p->peer[i].ufd = -1;
	*out = p;
	return 0;
}

static void peer_drop(struct shm_peer *pe)
{
	if (pe->ufd >= 0)
		close(pe->ufd);	/* the daemon unmaps once its copies are done */
	if (pe->base)
		munmap(pe->base, SHM_SIZE);
	pe->ufd = -1;
	pe->base = NULL;
	pe->busy = pe->lost = 0;
}

static void peers_release(struct shm_peers *p)
{
	for (uint32_t i = 0; i < SHM_PEERS; i++)
		peer_drop(&p->peer[i]);
	free(p);
}

void shm_peers_free(struct shm_peers *p)
{
	if (!p)
		return;
	p->closing = true;
	if (p->attaching == 0)
		peers_release(p);
}

static void peer_off(struct shm_peer *pe, int err, const char *why)
{
	if (why)
		log_warn("client", "storage node %u at %s: %s (%s); its reads and writes go over TCP",
			 pe->node_id, pe->addr, why, strata_strerror(err));
	peer_drop(pe);
	pe->state = PEER_OFF;
	pe->retry_ms = reactor_now_ms() + SHM_RETRY_MS;
}

/* ---- the attach, on the helper thread ---- */

static int make_region(uint8_t **base)
{
	int fd = memfd_create("strata-shm-reads", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *m;

	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)SHM_SIZE) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	m = mmap(NULL, SHM_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	/* A forked child has its own client; it must not share our slots. */
	(void)madvise(m, SHM_SIZE, MADV_DONTFORK);
	*base = m;
	return fd;
}

static int send_attach(int ufd, int mfd)
{
	struct sp_shm_attach a = { .magic = SP_SHM_MAGIC, .size = SHM_SIZE };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct bbuf b;
	struct wbuf w;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;
	ssize_t n;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	sp_shm_attach_enc(&w, &a);
	if (w.err) {
		bbuf_release(&b);
		return -ENOMEM;
	}
	iov.iov_base = b.buf;
	iov.iov_len = b.len;
	memset(&cm, 0, sizeof(cm));
	c = CMSG_FIRSTHDR(&mh);
	if (!c) {
		bbuf_release(&b);
		return -EINVAL;
	}
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &mfd, sizeof(int));
	n = sendmsg(ufd, &mh, MSG_NOSIGNAL);
	bbuf_release(&b);
	return n < 0 ? -errno : 0;
}

static void attach_work(void *arg)
{
	struct shm_peer *pe = arg;
	struct sockaddr_un sun;
	socklen_t len = sp_shm_sockname(pe->addr, &sun);
	struct timeval tv = { SHM_ATTACH_MS / 1000, 0 };
	struct sp_shm_attach_rep rep;
	uint8_t body[64];
	ssize_t n;
	int mfd;

	pe->err = -ENAMETOOLONG;
	if (!len)
		return;
	pe->ufd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (pe->ufd < 0) {
		pe->err = -errno;
		return;
	}
	/* No daemon of that address in our network namespace: on another
	 * host, or without shm_reads. */
	if (connect(pe->ufd, (struct sockaddr *)&sun, len) < 0) {
		pe->err = -errno;
		return;
	}
	mfd = make_region(&pe->base);
	if (mfd < 0) {
		pe->err = mfd;
		return;
	}
	pe->err = send_attach(pe->ufd, mfd);
	close(mfd);
	if (pe->err)
		return;
	setsockopt(pe->ufd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recv(pe->ufd, body, sizeof(body), 0);
	if (n <= 0)
		pe->err = n < 0 ? -errno : -ECONNRESET;
	else if (sp_shm_attach_rep_decode(body, (uint32_t)n, &rep))
		pe->err = STRATA_EBADMSG;
	else if (rep.status)
		pe->err = rep.status;
	else
		pe->id = (struct sp_shm){ .region = rep.region, .secret = rep.secret };
}

static void on_checked(void *arg, int status, struct rpc_msg *resp)
{
	struct shm_peer *pe = arg;
	struct sp_shm_rep rep;

	if (pe->state != PEER_CHECKING)
		return;		/* closing: the pool failed its calls */
	if (!status && st_shm_check_rep(resp, &rep))
		status = STRATA_EBADMSG;
	if (status) {
		/* An older daemon does not know the op: quietly TCP. */
		peer_off(pe, status, status == -ENOENT ? "the daemon does not know our region" :
				     NULL);
		return;
	}
	if (rep.pid != (uint32_t)getpid() || rep.size != SHM_SIZE) {
		/* Another process took the socket name and passed our
		 * memory on as its own (or the daemon sees us through a pid
		 * namespace): never read through it. */
		peer_off(pe, -EPERM, "the shared-memory region was registered by another process");
		return;
	}
	pe->state = PEER_READY;
	log_debug("client", "storage node %u at %s: reads through shared memory", pe->node_id,
		  pe->addr);
}

static void attach_done(void *arg)
{
	struct shm_peer *pe = arg;
	struct shm_peers *p = pe->owner;
	struct proto_call call = { .timeout_ms = p->timeout_ms, .cb = on_checked, .arg = pe };

	p->attaching--;
	if (p->closing) {
		if (p->attaching == 0)
			peers_release(p);
		return;
	}
	if (pe->err) {
		/* -ECONNREFUSED / -ENOENT: no daemon here; not worth a word. */
		bool quiet = pe->err == -ECONNREFUSED || pe->err == -ENOENT;

		peer_off(pe, pe->err, quiet ? NULL : "shared-memory attach failed");
		return;
	}
	pe->state = PEER_CHECKING;
	if (st_shm_check_call(p->pool, pe->addr, &pe->id, &call))
		peer_off(pe, -ENOMEM, NULL);
}

static void peer_attach(struct shm_peers *p, struct shm_peer *pe)
{
	pe->owner = p;
	pe->err = 0;
	pe->no_writes = false;	/* the daemon may have been upgraded */
	pe->state = PEER_ATTACHING;
	if (reactor_offload(p->r, attach_work, attach_done, pe)) {
		peer_off(pe, -EAGAIN, NULL);
		return;
	}
	p->attaching++;
}

/* ---- slots ---- */

/* The bits of the n slots s holds (n <= SHM_WRITE_SLOTS < 64). */
static uint64_t slot_bits(const struct shm_slot *s)
{
	return ((1ull << s->n) - 1) << s->slot;
}

static struct shm_peer *peer_find(struct shm_peers *p, uint32_t node_id, const char *addr)
{
	struct shm_peer *fresh = NULL;

	for (uint32_t i = 0; i < SHM_PEERS; i++) {
		struct shm_peer *pe = &p->peer[i];

		if (pe->node_id == node_id && !strcmp(pe->addr, addr))
			return pe;
		if (pe->node_id == node_id) {
			/* The node moved: its region is the old daemon's. */
			if (pe->state == PEER_ATTACHING || pe->state == PEER_CHECKING || pe->busy)
				return NULL;
			peer_drop(pe);
			pe->state = PEER_NONE;
			snprintf(pe->addr, sizeof(pe->addr), "%s", addr);
			return pe;
		}
		if (!fresh && !pe->node_id)
			fresh = pe;
	}
	if (fresh) {
		fresh->node_id = node_id;
		snprintf(fresh->addr, sizeof(fresh->addr), "%s", addr);
		fresh->state = PEER_NONE;
	}
	return fresh;
}

bool shm_slot_get(struct shm_peers *p, uint32_t node_id, const char *addr, uint32_t len,
		  bool write, struct shm_slot *s, struct sp_shm *m, uint64_t *at)
{
	struct shm_peer *pe;
	uint32_t n = len <= SHM_SLOT ? 1 : (len + SHM_SLOT - 1) / SHM_SLOT;
	uint64_t free_bits;
	int i;

	s->peer = -1;
	if (p->off || p->closing || n > (write ? SHM_WRITE_SLOTS : 1) ||
	    strlen(addr) >= CM_ADDR_LEN)
		return false;
	pe = peer_find(p, node_id, addr);
	if (!pe)
		return false;
	/* Off: attach again once the old region's reads are back. */
	if (pe->state == PEER_OFF && !pe->base && reactor_now_ms() >= pe->retry_ms)
		pe->state = PEER_NONE;
	if (pe->state == PEER_NONE)
		peer_attach(p, pe);
	if (pe->state != PEER_READY || (write && pe->no_writes))
		return false;
	free_bits = ~(pe->busy | pe->lost);
	/* Bit i stays set where slots i .. i + n - 1 are all free. */
	for (uint64_t f = free_bits, k = 1; k < n; k++)
		free_bits &= f >> k;
	if (!free_bits)
		return false;
	i = __builtin_ctzll(free_bits);
	s->peer = (int32_t)(pe - p->peer);
	s->slot = i;
	s->n = n;
	pe->busy |= slot_bits(s);
	*m = pe->id;
	*at = (uint64_t)i * SHM_SLOT;
	return true;
}

uint8_t *shm_slot_data(struct shm_peers *p, const struct shm_slot *s)
{
	return p->peer[s->peer].base + (size_t)s->slot * SHM_SLOT;
}

void shm_writes_unknown(struct shm_peers *p, const struct shm_slot *s)
{
	struct shm_peer *pe = &p->peer[s->peer];

	if (!pe->no_writes)
		log_info("client", "storage node %u at %s does not know shared-memory writes"
			 " (an older daemon); its writes go over TCP", pe->node_id, pe->addr);
	pe->no_writes = true;
}

void shm_slot_put(struct shm_peers *p, struct shm_slot *s, bool lost, bool forget)
{
	struct shm_peer *pe;

	if (s->peer < 0)
		return;
	pe = &p->peer[s->peer];
	s->peer = -1;
	pe->busy &= ~slot_bits(s);
	if (lost)
		pe->lost |= slot_bits(s);
	if (forget && pe->state == PEER_READY) {
		/* Reads and writes still using the old region complete
		 * first: they hold slots of a mapping we keep until they are
		 * back. */
		log_info("client", "storage node %u at %s: the daemon no longer knows our"
			 " shared-memory region (restarted?); attaching again", pe->node_id, pe->addr);
		pe->state = PEER_OFF;
		pe->retry_ms = 0;
	}
	if (pe->state == PEER_OFF && pe->base && !pe->busy)
		peer_drop(pe);
}
