/*
 * The contract between stratad and the services it runs (mgmt, meta,
 * storage, mem, ...). A service never sees the daemon: it is started with
 * an environment (struct service_env) holding what it may use, reads its
 * own config section (its schema, its struct), and reports status and
 * metrics through callbacks. src/stratad/services.c lists the services,
 * one line each.
 *
 * Threads: start and stop run on the daemon's main thread while the
 * reactors run; a service's state belongs to the reactors it chose
 * (handlers are routed to an owner reactor, see net/server.h). status and
 * metrics run on other threads: they read only what is safe to read there.
 */
#ifndef STRATA_COMMON_SERVICE_H
#define STRATA_COMMON_SERVICE_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/config.h"

struct cluster_key;
struct reactor;
struct rpc_server;

/* What a service gets from the node it runs on. Every pointer is owned by
 * the daemon and valid until the service's stop returns. */
struct service_env {
	uint32_t node_id;
	const char *data;		/* the node's data directory */
	const char *addr;		/* host:port peers reach this node at */
	const char *mgmt_addr;		/* host:port of mgmt */
	uint32_t heartbeat_ms;		/* how often a lease with mgmt is renewed */
	uint32_t rpc_timeout_ms;	/* one daemon-to-daemon call */
	struct reactor *const *reactors;
	int nreactors;
	struct rpc_server *srv;		/* route the service's operations here */
	const void *cfg;		/* the service's config: its schema's struct */
	/* The cluster key (node.key_file), for a service that signs or checks
	 * tokens itself (mgmt's registry); NULL when the node has none. */
	const struct cluster_key *key;
	/* Every key of the node (the node's and every service's) and their
	 * values, for a default that follows another service's key (the
	 * composer's store follows mgmt.store): read with cfg_get_str. */
	const struct cfg_schema *all_keys;
	const void *all_cfg;
};

struct service_def {
	const char *name;		/* also its config section */
	/* Its keys (section `name`), filled into a struct of cfg_size bytes
	 * that env->cfg points to; NULL / 0 when it has none. */
	const struct cfg_schema *schema;
	size_t cfg_size;
	/* Optional: checks rules between keys once all are read. Returns 0,
	 * or STRATA_ECONFIG with a message in err naming the keys. */
	int (*check)(const void *cfg, char *err, size_t errlen);
	/* Starts the service: routes its ops. Returns 0 or a negative error
	 * (with a logged reason). */
	int (*start)(const struct service_env *env, void **svc);
	/* Stops it; reactors are still running. May be NULL. */
	void (*stop)(void *svc);
	/* Adds the service's status to obj; thread-safe. May be NULL. */
	void (*status)(void *svc, json_t *obj);
	/* Appends Prometheus text to out with metrics_put; thread-safe. May
	 * be NULL. */
	void (*metrics)(void *svc, struct bbuf *out);
};

/* A nonzero number new for every start of the process (its wall-clock
 * start and pid): what a service tells mgmt so that a restart is seen. */
uint64_t service_incarnation(void);

/*
 * The identity of the data directory data: a random nonzero number kept in
 * DATA/node.ident (0600, created on the first start, written to a temporary
 * file and renamed so a crash leaves the old state or the new one). Unlike
 * the incarnation it survives restarts, so mgmt tells a restart of a node
 * (same directory) from a second daemon configured with the same node.id
 * (another directory). Returns 0 and *out, -EIO (logged with the path:
 * unreadable, not 16 hex digits, cannot be written) or -errno.
 */
int service_data_ident(const char *data, uint64_t *out);

/* The metrics sink: appends one metric in the Prometheus text format
 * ("# HELP", "# TYPE", the value). */
void metrics_put(struct bbuf *out, const char *name, const char *type, const char *help,
		 double value);
/* A metric with one series per label value: metrics_head once, then
 * metrics_series for each (the value is escaped as Prometheus wants). */
void metrics_head(struct bbuf *out, const char *name, const char *type, const char *help);
void metrics_series(struct bbuf *out, const char *name, const char *label, const char *value,
		    double v);

#endif
