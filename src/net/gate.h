/*
 * The admission gate of a listening daemon: caps on how many connections
 * it holds in all and from one peer address, so that a flood of idle
 * connections from one host cannot take the file descriptors every other
 * client needs.
 *
 * Thread-safe: the listener enters on its thread, connections leave on
 * theirs. Counts are by IP address (the port is ignored; an IPv4-mapped
 * IPv6 address counts as its IPv4 one).
 */
#ifndef STRATA_NET_GATE_H
#define STRATA_NET_GATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct net_gate;

struct net_gate_opts {
	size_t size;
	/* Connections held at once (0: no cap). */
	uint32_t max_conns;
	/* Connections held at once from one address (0: no cap). */
	uint32_t max_per_peer;
};

/* Defaults: no caps. size is sizeof(*o) as the caller knows it. */
void net_gate_opts_init(struct net_gate_opts *o, size_t size);

/* Returns 0 and *out, or -ENOMEM. opts NULL: the defaults. */
int net_gate_new(const struct net_gate_opts *opts, struct net_gate **out);
/* Frees g (every admitted connection has left, or never will). NULL: no-op. */
void net_gate_free(struct net_gate *g);

/*
 * Admits one connection from peer: 0 (counted; net_gate_leave with the
 * same address when it ends), -EMFILE (the daemon holds max_conns), or
 * -EUSERS (peer's address holds max_per_peer). A peer of another family
 * than IPv4/IPv6 counts only against max_conns.
 */
int net_gate_enter(struct net_gate *g, const struct sockaddr_storage *peer);
/* Ends a connection admitted from peer. */
void net_gate_leave(struct net_gate *g, const struct sockaddr_storage *peer);

struct net_gate_stats {
	uint64_t held;			/* connections held now */
	uint64_t refused_full;		/* refused: max_conns reached */
	uint64_t refused_peer;		/* refused: max_per_peer reached */
};
void net_gate_stats_get(struct net_gate *g, struct net_gate_stats *out);

#endif
