/* The TCP listener (listener.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "addr.h"
#include "common/log.h"
#include "listener.h"
#include "strata/errors.h"

struct listener {
	struct reactor **reactors;
	int nreactors;
	int next;
	int fd;
	int port;
	struct reactor_watch watch;
	bool watching;
	struct conn_handler h;
	struct listener_opts o;
	struct reactor_timer resume;
	uint32_t backoff_ms;	/* the next pause; 0: none running */
	uint64_t pauses;	/* atomic */
};

/* An accepted socket on its way to its reactor. It carries a copy of the
 * handler: the listener may be freed before the message is run. */
struct accept_msg {
	struct conn_handler h;
	struct reactor *r;
	int fd;
	struct sockaddr_storage peer;
	listener_unadmit_fn unadmit;
	void *ctx;
};

void listener_opts_init(struct listener_opts *o, size_t size)
{
	struct listener_opts def = { .size = sizeof(def), .backoff_ms = 50 };

	memset(o, 0, size);
	memcpy(o, &def, size < sizeof(def) ? size : sizeof(def));
	o->size = size;
}

static void accept_on_thread(void *arg)
{
	struct accept_msg *m = arg;
	struct conn *c;
	int rc = conn_accept(m->r, m->fd, &m->h, &c);

	if (rc) {
		log_warn_limited("net", "cannot set up accepted connection: %s", strata_strerror(rc));
		if (m->unadmit)
			m->unadmit(m->ctx, &m->peer);
	}
	free(m);
}

static void listener_on_event(void *arg, uint32_t events);

static void on_resume(void *arg)
{
	struct listener *l = arg;

	if (!l->watching &&
	    reactor_watch_add(l->reactors[0], &l->watch, l->fd, EPOLLIN, listener_on_event, l) == 0)
		l->watching = true;
	else if (!l->watching)
		reactor_timer_arm(l->reactors[0], &l->resume, l->backoff_ms);
}

/* accept() ran out of descriptors or memory: stop watching the socket
 * (it stays readable) and look again after a pause. */
static void pause_accepting(struct listener *l, int err)
{
	uint32_t cap = l->o.backoff_ms * 16;

	l->backoff_ms = !l->backoff_ms ? l->o.backoff_ms
			: l->backoff_ms * 2 > cap ? cap : l->backoff_ms * 2;
	__atomic_fetch_add(&l->pauses, 1, __ATOMIC_RELAXED);
	log_warn_limited("net", "accept on port %d: %s; pausing new connections for %u ms "
			 "(raise the open-file limit, or lower net.max_conns)",
			 l->port, strerror(err), l->backoff_ms);
	if (l->watching) {
		reactor_watch_del(l->reactors[0], &l->watch);
		l->watching = false;
	}
	reactor_timer_arm(l->reactors[0], &l->resume, l->backoff_ms);
}

static void listener_on_event(void *arg, uint32_t events)
{
	struct listener *l = arg;

	(void)events;
	for (int i = 0; i < 64; i++) {
		struct sockaddr_storage peer;
		socklen_t sl = sizeof(peer);
		int fd = accept4(l->fd, (struct sockaddr *)&peer, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct reactor *r;
		struct accept_msg *m;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
				pause_accepting(l, errno);
			else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn_limited("net", "accept: %s", strerror(errno));
			return;
		}
		l->backoff_ms = 0;
		if (l->o.admit && l->o.admit(l->o.ctx, &peer)) {
			close(fd);
			continue;
		}
		r = l->reactors[l->next++ % l->nreactors];
		m = malloc(sizeof(*m));
		if (!m) {
			close(fd);
			if (l->o.unadmit)
				l->o.unadmit(l->o.ctx, &peer);
			continue;
		}
		m->h = l->h;
		m->r = r;
		m->fd = fd;
		m->peer = peer;
		m->unadmit = l->o.unadmit;
		m->ctx = l->o.ctx;
		if (reactor_post(r, accept_on_thread, m)) {
			close(fd);
			if (l->o.unadmit)
				l->o.unadmit(l->o.ctx, &peer);
			free(m);
		}
	}
}

int listener_new(struct reactor **reactors, int nreactors, const char *addr,
		 const struct conn_handler *h, struct listener **out)
{
	return listener_new_opts(reactors, nreactors, addr, h, NULL, out);
}

int listener_new_opts(struct reactor **reactors, int nreactors, const char *addr,
		      const struct conn_handler *h, const struct listener_opts *opts,
		      struct listener **out)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct listener *l;
	int one = 1, rc;

	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->fd = -1;
	l->reactors = reactors;
	l->nreactors = nreactors;
	l->h = *h;
	listener_opts_init(&l->o, sizeof(l->o));
	if (opts)
		memcpy(&l->o, opts, opts->size < sizeof(l->o) ? opts->size : sizeof(l->o));
	l->o.size = sizeof(l->o);
	if (!l->o.backoff_ms)
		l->o.backoff_ms = 50;
	reactor_timer_init(&l->resume, on_resume, l);
	rc = addr_parse_numeric(addr, &ss, &sl);
	if (rc == -EAGAIN) {
		/* A name: resolving blocks, which no loop thread may do. */
		for (int i = 0; i < nreactors; i++)
			if (reactor_on_thread(reactors[i]))
				rc = -EDEADLK;
		if (rc == -EAGAIN)
			rc = addr_resolve(addr, &ss, &sl);
	}
	if (rc)
		goto fail;
	l->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (l->fd < 0) {
		rc = -errno;
		goto fail;
	}
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(l->fd, (struct sockaddr *)&ss, sl) < 0 || listen(l->fd, 1024) < 0) {
		rc = -errno;
		goto fail;
	}
	sl = sizeof(ss);
	if (getsockname(l->fd, (struct sockaddr *)&ss, &sl) < 0) {
		rc = -errno;
		goto fail;
	}
	l->port = addr_port(&ss);
	if (!l->o.paused) {
		rc = reactor_watch_add(reactors[0], &l->watch, l->fd, EPOLLIN, listener_on_event, l);
		if (rc)
			goto fail;
		l->watching = true;
	}
	*out = l;
	return 0;
fail:
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	return rc;
}

void listener_accept(struct listener *l)
{
	if (l && l->o.paused) {
		l->o.paused = false;
		/* on_resume on reactors[0]'s thread: it owns the watch. */
		reactor_call(l->reactors[0], on_resume, l);
	}
}

int listener_port(const struct listener *l) { return l->port; }

uint64_t listener_pauses(const struct listener *l)
{
	return __atomic_load_n(&l->pauses, __ATOMIC_RELAXED);
}

void listener_free(struct listener *l)
{
	if (!l)
		return;
	reactor_timer_cancel(l->reactors[0], &l->resume);
	if (l->watching)
		reactor_watch_del(l->reactors[0], &l->watch);
	close(l->fd);
	free(l);
}
