/*
 * A TCP listener: accepts on one address and hands each connection to one
 * of a set of reactors, round robin, where it becomes a conn (conn.h) that
 * must say HELLO first.
 *
 * The listening socket is watched by reactors[0]; each accepted socket is
 * posted to its reactor and wrapped there (conn_accept), so a connection
 * is set up on the thread that will own it.
 */
#ifndef STRATA_NET_LISTENER_H
#define STRATA_NET_LISTENER_H

#include "conn.h"
#include "reactor.h"

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct listener;

/* Admission of an accepted socket, on reactors[0]'s thread, before it is
 * handed over: 0 takes it, a negative errno refuses it (the socket is
 * closed at once, so a flood drains the backlog instead of filling it). */
typedef int (*listener_admit_fn)(void *ctx, const struct sockaddr_storage *peer);
/* A socket admitted that never became a connection (its setup failed):
 * undo the admission. (Once it is a connection, its on_close is where
 * the owner undoes it.) */
typedef void (*listener_unadmit_fn)(void *ctx, const struct sockaddr_storage *peer);

struct listener_opts {
	size_t size;
	listener_admit_fn admit;	/* NULL: every socket is taken */
	listener_unadmit_fn unadmit;
	void *ctx;
	/* accept() failing for lack of descriptors or memory (EMFILE,
	 * ENFILE, ENOBUFS, ENOMEM) pauses accepting for this long, doubling
	 * to 16 times it while the failures go on: the socket stays ready,
	 * and retrying at once would spin. */
	uint32_t backoff_ms;
	/* Bound and listening, but not accepting until listener_accept():
	 * connections wait in the kernel's backlog meanwhile (a daemon
	 * whose services are still starting, with routes not yet set). */
	bool paused;
};

/* Defaults: no admission hook, backoff 50 ms. */
void listener_opts_init(struct listener_opts *o, size_t size);

/*
 * Listens on addr ("host:port"; port 0 picks a free one). A host name is
 * resolved here, blocking (addr_resolve): call this at start-up, not on a
 * reactor thread (there it fails with -EDEADLK unless addr is an IP
 * literal). reactors (nreactors >= 1) and h are borrowed and must outlive
 * the listener. Returns 0 and *out, or a negative errno.
 */
int listener_new(struct reactor **reactors, int nreactors, const char *addr,
		 const struct conn_handler *h, struct listener **out);
/* Same, with opts (NULL: the defaults). */
int listener_new_opts(struct reactor **reactors, int nreactors, const char *addr,
		      const struct conn_handler *h, const struct listener_opts *opts,
		      struct listener **out);
/* Starts accepting on a listener opened paused (any thread but a
 * reactor's; the reactors running). No-op otherwise. */
void listener_accept(struct listener *l);
/* The bound port (useful with port 0). */
int listener_port(const struct listener *l);
/* accept() pauses taken so far (EMFILE and the like). */
uint64_t listener_pauses(const struct listener *l);
/* Stops listening and frees l (connections already accepted live on).
 * Must run on reactors[0]'s thread, or after it stopped. NULL is a no-op. */
void listener_free(struct listener *l);

#endif
