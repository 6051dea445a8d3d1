/*
 * stratad: one daemon binary running the services its config enables.
 * A service plugs in through struct service_def (services.c): start reads
 * its keys from struct daemon_cfg and routes its opcodes; stop releases it.
 */
#ifndef STRATA_STRATAD_DAEMON_H
#define STRATA_STRATAD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/buf.h"
#include "common/config.h"
#include "net/reactor.h"
#include "net/server.h"

struct daemon_cfg {
	/* [node] */
	int64_t node_id;
	char data[CFG_STR_MAX];
	char listen[CFG_STR_MAX];
	char advertise[CFG_STR_MAX];
	int64_t threads;
	char log_level[CFG_STR_MAX];
	char services[CFG_STR_MAX];
	char metrics_listen[CFG_STR_MAX];
	/* [mgmt] */
	char mgmt_addr[CFG_STR_MAX];
	int64_t lease_ms;
	int64_t heartbeat_ms;
	int64_t replication;
	int64_t expect_nodes;
	/* [storage] */
	int64_t targets;
	uint64_t capacity;
	bool sync_writes;
	bool buffered_reads;
	int64_t scrub_rate_mb;
	/* [meta] */
	uint64_t chunk_size;
	int64_t stripe;
	int64_t gc_interval_ms;
	/* [mem] */
	uint64_t mem_capacity;
	int64_t mem_high_pct, mem_low_pct;
	bool mem_evict, mem_spill;
	/* [rpc] */
	int64_t rpc_timeout_ms;
};

extern const struct cfg_schema daemon_schema;

struct daemon;

struct service_def {
	const char *name;
	/* Starts the service: reads d's config, routes its ops. Returns 0 or a
	 * negative error (with a logged reason). */
	int (*start)(struct daemon *d, void **svc);
	/* Stops it; reactors are still running. May be NULL. */
	void (*stop)(void *svc);
	/* Adds the service's status to obj; thread-safe. May be NULL. */
	void (*status)(void *svc, json_t *obj);
	/* Appends Prometheus text; thread-safe. May be NULL. */
	void (*metrics)(void *svc, struct bbuf *out);
};

struct daemon {
	struct daemon_cfg cfg;
	struct reactor **reactors;
	int nreactors;
	struct rpc_server *srv;
	char addr[64];		/* host:port others reach us at */
	int port;
	uint64_t start_ms;
	struct metrics_server *metrics;
	int metrics_port;
	int nservices;
	const struct service_def *defs[8];
	void *svcs[8];
};

/* The registry of services (services.c). */
extern const struct service_def *const service_registry[];

/* Finds a running service by name; NULL if not enabled here. */
void *daemon_service(struct daemon *d, const char *name);

#endif
