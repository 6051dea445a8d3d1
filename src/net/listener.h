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

struct listener;

/*
 * Listens on addr ("host:port"; port 0 picks a free one). A host name is
 * resolved here, blocking (addr_resolve): call this at start-up, not on a
 * reactor thread (there it fails with -EDEADLK unless addr is an IP
 * literal). reactors (nreactors >= 1) and h are borrowed and must outlive
 * the listener. Returns 0 and *out, or a negative errno.
 */
int listener_new(struct reactor **reactors, int nreactors, const char *addr,
		 const struct conn_handler *h, struct listener **out);
/* The bound port (useful with port 0). */
int listener_port(const struct listener *l);
/* Stops listening and frees l (connections already accepted live on).
 * Must run on reactors[0]'s thread, or after it stopped. NULL is a no-op. */
void listener_free(struct listener *l);

#endif
