/*
 * Same-host readers' shared-memory regions (proto/storage.h, "Same-host
 * reads"): the daemon's side. One thread takes attaches on the abstract
 * Unix socket sp_shm_sockname(env.addr) names, maps each reader's sealed
 * memfd, and watches the reader's connection: when it closes, the region
 * is unmapped once no copy into or out of it is in progress. Target
 * threads look a region up for each READ_SHM and WRITE_SHM (shm_get /
 * shm_put).
 *
 * What a region is checked for before it is mapped, since a reader could
 * otherwise make the daemon fault: a memfd (it has seals) sealed against
 * shrinking, at least as large as the size asked for, which is whole pages
 * between SP_SHM_MIN and SP_SHM_MAX. One attach per connection; an attach
 * must arrive within SHM_ATTACH_MS of the connect (this thread waits for
 * it: attaches are rare, one per reader and daemon).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/buf.h"
#include "net/codec.h"
#include "common/log.h"
#include "storage_int.h"
#include "strata/errors.h"

#define SHM_REGIONS_MAX 256u
#define SHM_ATTACH_MS 1000

struct shm_region {
	uint64_t secret;	/* 0: a free entry */
	uint8_t *base;
	uint64_t size;
	pid_t pid;		/* the registrant, SO_PEERCRED */
	uint32_t refs;		/* copies in progress */
	bool dead;		/* its connection closed: unmapped at refs 0 */
	int fd;			/* the reader's connection; -1 once closed */
};

struct shm_serve {
	pthread_t thread;
	int lfd, stop_fd;
	pthread_mutex_t lock;
	struct shm_region reg[SHM_REGIONS_MAX];
	uint32_t live;		/* gauge: regions mapped */
	uint64_t attached, refused;	/* counters */
};

static void region_unmap(struct shm_region *g)
{
	munmap(g->base, g->size);
	memset(g, 0, sizeof(*g));
	g->fd = -1;
}

/* Under lock: the reader's connection closed (or misbehaved). */
static void region_close(struct shm_serve *s, struct shm_region *g)
{
	close(g->fd);
	g->fd = -1;
	g->dead = true;
	s->live--;
	if (g->refs == 0)
		region_unmap(g);
}

/* Checks the memfd a reader sent and maps size bytes of it. */
static int map_region(int mfd, uint64_t size, uint8_t **base)
{
	struct stat sb;
	int seals = fcntl(mfd, F_GET_SEALS);
	void *p;

	if (seals < 0)
		return -EBADF;		/* not a memfd */
	if (!(seals & F_SEAL_SHRINK))
		return -EPERM;		/* it could shrink under our copies */
	if (fstat(mfd, &sb) < 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < size)
		return -EINVAL;
	p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (p == MAP_FAILED)
		return -errno;
	*base = p;
	return 0;
}

/* Receives one attach on connection cfd: its message and one descriptor.
 * Returns 0 with *mfd set, or a negative error (nothing kept). */
static int recv_attach(int cfd, struct sp_shm_attach *a, int *mfd)
{
	uint8_t body[64];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct iovec iov = { body, sizeof(body) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cm.b, .msg_controllen = sizeof(cm.b) };
	struct timeval tv = { SHM_ATTACH_MS / 1000, (SHM_ATTACH_MS % 1000) * 1000 };
	struct cmsghdr *c;
	ssize_t n;
	int nfds = 0, rc = 0;

	*mfd = -1;
	setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	n = recvmsg(cfd, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(fd));
			if (nfds++ == 0)
				*mfd = fd;
			else
				close(fd);
		}
	}
	if (nfds != 1 || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC)))
		rc = -EINVAL;
	else if (sp_shm_attach_decode(body, (uint32_t)n, a))
		rc = STRATA_EBADMSG;
	else if (a->magic != SP_SHM_MAGIC || a->size < SP_SHM_MIN || a->size > SP_SHM_MAX ||
		 a->size % (uint64_t)sysconf(_SC_PAGESIZE))
		rc = -EINVAL;
	if (rc && *mfd >= 0) {
		close(*mfd);
		*mfd = -1;
	}
	return rc;
}

static void send_answer(int cfd, const struct sp_shm_attach_rep *rep)
{
	struct bbuf b;
	struct wbuf w;

	bbuf_init(&b);
	wbuf_init(&w, &b);
	sp_shm_attach_rep_enc(&w, rep);
	if (!w.err)
		(void)send(cfd, b.buf, b.len, MSG_NOSIGNAL);
	bbuf_release(&b);
}

static void take_attach(struct shm_serve *s, int cfd)
{
	struct sp_shm_attach a;
	struct sp_shm_attach_rep rep = { 0 };
	struct ucred uc;
	socklen_t ul = sizeof(uc);
	uint8_t *base = NULL;
	uint32_t i;
	int mfd, rc = recv_attach(cfd, &a, &mfd);

	if (!rc && getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &uc, &ul) < 0)
		rc = -errno;
	if (!rc)
		rc = map_region(mfd, a.size, &base);
	if (mfd >= 0)
		close(mfd);	/* the mapping keeps the memory */
	if (!rc && getrandom(&rep.secret, sizeof(rep.secret), 0) != (ssize_t)sizeof(rep.secret))
		rc = -EIO;
	rep.secret |= 1;	/* 0 marks a free entry */
	pthread_mutex_lock(&s->lock);
	for (i = 0; !rc && i < SHM_REGIONS_MAX && s->reg[i].base; i++)
		;
	if (!rc && i == SHM_REGIONS_MAX)
		rc = -EMFILE;
	if (!rc) {
		s->reg[i] = (struct shm_region){ .secret = rep.secret, .base = base,
						 .size = a.size, .pid = uc.pid, .fd = cfd };
		s->live++;
		s->attached++;
		rep.region = i;
	} else {
		s->refused++;
	}
	pthread_mutex_unlock(&s->lock);
	if (rc) {
		if (base)
			munmap(base, a.size);
		log_warn("storage", "shared-memory attach refused: %s", strata_strerror(rc));
		rep = (struct sp_shm_attach_rep){ .status = rc };
	}
	send_answer(cfd, &rep);
	if (rc)
		close(cfd);
}

static void *serve_thread(void *arg)
{
	struct shm_serve *s = arg;
	struct pollfd pf[SHM_REGIONS_MAX + 2];
	uint32_t idx[SHM_REGIONS_MAX];

	for (;;) {
		nfds_t n = 2;

		pf[0] = (struct pollfd){ .fd = s->stop_fd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = s->lfd, .events = POLLIN };
		pthread_mutex_lock(&s->lock);
		for (uint32_t i = 0; i < SHM_REGIONS_MAX; i++) {
			if (s->reg[i].fd >= 0 && s->reg[i].base && !s->reg[i].dead) {
				idx[n - 2] = i;
				pf[n++] = (struct pollfd){ .fd = s->reg[i].fd, .events = POLLIN };
			}
		}
		pthread_mutex_unlock(&s->lock);
		if (poll(pf, n, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_error("storage", "shared-memory attaches: poll: %s", strerror(errno));
			return NULL;
		}
		if (pf[0].revents)
			return NULL;
		/* Anything from a reader after its attach, data or a close,
		 * ends its region: the protocol has nothing more to say. */
		pthread_mutex_lock(&s->lock);
		for (nfds_t k = 2; k < n; k++) {
			if (pf[k].revents)
				region_close(s, &s->reg[idx[k - 2]]);
		}
		pthread_mutex_unlock(&s->lock);
		if (pf[1].revents & POLLIN) {
			int cfd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);

			if (cfd >= 0)
				take_attach(s, cfd);
		}
	}
}

int shm_serve_start(struct storage *st)
{
	struct shm_serve *s;
	struct sockaddr_un sun;
	socklen_t len = sp_shm_sockname(st->env.addr, &sun);
	int rc;

	if (!len) {
		log_warn("storage", "address '%s' is too long for a shared-memory socket name;"
			 " same-host readers use TCP", st->env.addr);
		return 0;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	for (uint32_t i = 0; i < SHM_REGIONS_MAX; i++)
		s->reg[i].fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	s->stop_fd = eventfd(0, EFD_CLOEXEC);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s->stop_fd < 0 || s->lfd < 0) {
		rc = -errno;
		goto fail;
	}
	if (bind(s->lfd, (struct sockaddr *)&sun, len) < 0 || listen(s->lfd, 64) < 0) {
		/* Another process holds the name: readers that reach it find
		 * its registrations unknown here (SHM_CHECK) and use TCP. */
		log_warn("storage", "cannot take the shared-memory socket name for '%s': %s;"
			 " same-host readers use TCP", st->env.addr, strerror(errno));
		rc = 0;
		goto fail;
	}
	rc = -pthread_create(&s->thread, NULL, serve_thread, s);
	if (rc)
		goto fail;
	st->shm = s;
	return 0;
fail:
	if (s->lfd >= 0)
		close(s->lfd);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
	return rc;
}

void shm_serve_stop(struct storage *st)
{
	struct shm_serve *s = st->shm;
	uint64_t one = 1;

	if (!s)
		return;
	if (write(s->stop_fd, &one, sizeof(one)) < 0)
		log_warn("storage", "shared-memory attaches: stop: %s", strerror(errno));
	pthread_join(s->thread, NULL);
	/* The targets are stopped: no copy is in progress. */
	for (uint32_t i = 0; i < SHM_REGIONS_MAX; i++) {
		if (s->reg[i].fd >= 0)
			close(s->reg[i].fd);
		if (s->reg[i].base)
			munmap(s->reg[i].base, s->reg[i].size);
	}
	close(s->lfd);
	close(s->stop_fd);
	pthread_mutex_destroy(&s->lock);
	free(s);
	st->shm = NULL;
}

uint8_t *shm_get(struct storage *st, const struct sp_shm *m, uint64_t at, uint32_t len, int *err)
{
	struct shm_serve *s = st->shm;
	struct shm_region *g;
	uint8_t *p = NULL;

	*err = -ENOENT;
	if (!s || m->region >= SHM_REGIONS_MAX)
		return NULL;
	pthread_mutex_lock(&s->lock);
	g = &s->reg[m->region];
	if (g->base && !g->dead && g->secret == m->secret) {
		*err = -ERANGE;
		if (at <= g->size && len <= g->size - at) {
			g->refs++;
			p = g->base + at;
			*err = 0;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return p;
}

void shm_put(struct storage *st, const struct sp_shm *m)
{
	struct shm_serve *s = st->shm;
	struct shm_region *g = &s->reg[m->region];

	pthread_mutex_lock(&s->lock);
	if (--g->refs == 0 && g->dead)
		region_unmap(g);
	pthread_mutex_unlock(&s->lock);
}

void op_shm_check(void *svc, struct svc_req *req)
{
	struct storage *st = svc;
	struct shm_serve *s = st->shm;
	struct sp_shm m;
	struct sp_shm_rep rep = { 0 };
	int rc = -ENOENT;

	if (st_shm_check_req(req, &m))
		return;
	if (s && m.region < SHM_REGIONS_MAX) {
		pthread_mutex_lock(&s->lock);
		if (s->reg[m.region].base && !s->reg[m.region].dead &&
		    s->reg[m.region].secret == m.secret) {
			rep.pid = (uint32_t)s->reg[m.region].pid;
			rep.size = s->reg[m.region].size;
			rc = 0;
		}
		pthread_mutex_unlock(&s->lock);
	}
	st_shm_check_reply(req, rc, &rep);
}

void shm_stats(struct storage *st, uint64_t *live, uint64_t *attached, uint64_t *refused)
{
	struct shm_serve *s = st->shm;

	*live = *attached = *refused = 0;
	if (!s)
		return;
	pthread_mutex_lock(&s->lock);
	*live = s->live;
	*attached = s->attached;
	*refused = s->refused;
	pthread_mutex_unlock(&s->lock);
}
