/*
 * stratad: one daemon binary running the services its config enables.
 * A service plugs in through struct service_def (common/service.h, listed
 * in services.c, one line each): it is started with an environment and
 * its own config section, never with the daemon. This header is stratad's
 * own; no service includes it.
 */
#ifndef STRATA_STRATAD_DAEMON_H
#define STRATA_STRATAD_DAEMON_H

#include <stdbool.h>
#include <stdint.h>

#include "common/config.h"
#include "common/service.h"
#include "common/token.h"
#include "net/reactor.h"
#include "net/server.h"

/* The node's own keys: [node], mgmt.address, mgmt.heartbeat, [rpc], [net]. Each
 * service's keys live in its own struct (service_def.schema). */
struct daemon_cfg {
	/* [node] */
	int64_t node_id;
	char data[CFG_STR_MAX];
	char listen[CFG_STR_MAX];
	char advertise[CFG_STR_MAX];
	int64_t threads;
	char log_level[CFG_STR_MAX];
	char log_file[CFG_STR_MAX];	/* "" = stderr */
	char services[CFG_STR_MAX];
	char metrics_listen[CFG_STR_MAX];
	char key_file[CFG_STR_MAX];	/* the cluster key ("" = none) */
	bool insecure;			/* no key or TLS beyond loopback, knowingly */
	char tls[CFG_STR_MAX];		/* auto, on, off */
	char tls_cert[CFG_STR_MAX];	/* PEM: this node's certificate (chain) */
	char tls_key[CFG_STR_MAX];	/* PEM, mode 0600 */
	char tls_ca[CFG_STR_MAX];	/* PEM: what peers' certificates chain to */
	/* [mgmt]: where it is, how often to renew a lease with it */
	char mgmt_addr[CFG_STR_MAX];
	int64_t heartbeat_ms;
	/* [rpc] */
	int64_t rpc_timeout_ms;
	/* [net]: what the listener admits */
	int64_t max_conns;		/* 0: from the open-file limit */
	int64_t max_conns_per_peer;	/* 0: no cap */
	int64_t hello_timeout_ms;	/* 0: none */
};

#define DAEMON_MAX_SERVICES 8

struct daemon {
	struct daemon_cfg cfg;
	bool check_only;	/* --check-config: check, then exit */
	void *cfg_blob;		/* every registered service's config, together */
	struct reactor **reactors;
	int nreactors;
	struct rpc_server *srv;
	bool has_key;
	struct cluster_key key;	/* node.key_file; services see it (env->key) */
	char addr[64];		/* host:port others reach us at */
	int port;
	uint64_t start_ms;
	struct metrics_server *metrics;
	int metrics_port;
	int nservices;
	const struct service_def *defs[DAEMON_MAX_SERVICES];
	struct service_env envs[DAEMON_MAX_SERVICES];
	void *svcs[DAEMON_MAX_SERVICES];
};

/* The registry of services (services.c). */
extern const struct service_def *const service_registry[];

#endif
