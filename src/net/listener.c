/* The TCP listener (listener.h). */
#include <errno.h>
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
	struct conn_handler h;
};

/* An accepted socket on its way to its reactor. It carries a copy of the
 * handler: the listener may be freed before the message is run. */
struct accept_msg {
	struct conn_handler h;
	struct reactor *r;
	int fd;
};

static void accept_on_thread(void *arg)
{
	struct accept_msg *m = arg;
	struct conn *c;
	int rc = conn_accept(m->r, m->fd, &m->h, &c);

	if (rc)
		log_warn("net", "cannot set up accepted connection: %s", strata_strerror(rc));
	free(m);
}

static void listener_on_event(void *arg, uint32_t events)
{
	struct listener *l = arg;

	(void)events;
	for (int i = 0; i < 64; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct reactor *r;
		struct accept_msg *m;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
				log_warn_limited("net", "accept: %s", strerror(errno));
			return;
		}
		r = l->reactors[l->next++ % l->nreactors];
		m = malloc(sizeof(*m));
		if (!m) {
			close(fd);
			continue;
		}
		m->h = l->h;
		m->r = r;
		m->fd = fd;
		if (reactor_post(r, accept_on_thread, m)) {
			close(fd);
			free(m);
		}
	}
}

int listener_new(struct reactor **reactors, int nreactors, const char *addr,
		 const struct conn_handler *h, struct listener **out)
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
	rc = reactor_watch_add(reactors[0], &l->watch, l->fd, EPOLLIN, listener_on_event, l);
	if (rc)
		goto fail;
	*out = l;
	return 0;
fail:
	if (l->fd >= 0)
		close(l->fd);
	free(l);
	return rc;
}

int listener_port(const struct listener *l) { return l->port; }

void listener_free(struct listener *l)
{
	if (!l)
		return;
	reactor_watch_del(l->reactors[0], &l->watch);
	close(l->fd);
	free(l);
}
