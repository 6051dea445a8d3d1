/*
 * The composer's internals, shared by its files:
 *   composer_service.c  the service entry, the owner thread and its jobs,
 *                       the inventory, compose and decompose, recovery;
 *   attach.c            what a composition makes in the cluster: the
 *                       volume, its quota, the credential;
 *   redfish.c           the HTTP API: requests in, resources out.
 *
 * Threads: every field of struct composer below "owner thread" belongs to
 * the owner thread (composer_main). The HTTP server's threads build a
 * struct job and hand it over with composer_run, which blocks until the
 * owner thread has run it: compose and decompose requests are so
 * serialized, with the SQLite transaction of each state change, and two
 * requests never see the same free GPU.
 */
#ifndef STRATA_COMPOSER_INT_H
#define STRATA_COMPOSER_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "common/cluster_map.h"
#include "common/config.h"
#include "common/service.h"
#include "composer/alloc.h"
#include "composer/comp_store.h"
#include "compute/gpu_inventory.h"

#define COMPOSER_MAX_NODES 1024	/* compute nodes in the inventory */
#define COMPOSER_MAX_MEM 64	/* mem nodes named in a composition */
#define COMPOSER_MAX_STORAGE 1024	/* storage daemons sampled for bytes moved */
#define COMPOSER_BODY_MAX (64u << 10)	/* a request body */

struct composer_cfg {
	char listen[CFG_STR_MAX];
	char volumes[CFG_STR_MAX];
	int64_t refresh_ms;
	int64_t meter_ms;		/* how often bytes moved are sampled */
	char store[CFG_STR_MAX];	/* "": follow mgmt.store; "sqlite"; a URI */
	char store_passfile[CFG_STR_MAX];	/* PostgreSQL's password file */
};

/* A compute node as last seen: listed in the map, its GPUs from STATUS. */
struct inv_node {
	uint32_t node;
	char addr[CM_ADDR_LEN];
	bool up;
	uint64_t host_memory;
	char zone[GPU_ZONE_MAX + 1];	/* its STATUS's (compute.zone) */
	struct gpu_inventory inv;
	json_t *nics;			/* its STATUS's network interfaces (owned) */
};

enum job_kind {
	JOB_SERVICE,		/* CompositionService */
	JOB_BLOCKS,		/* ResourceBlocks */
	JOB_BLOCK,		/* ResourceBlocks/{id} */
	JOB_SYSTEMS,		/* Systems */
	JOB_SYSTEM,		/* Systems/{id} */
	JOB_COMPOSE,		/* POST Systems */
	JOB_DECOMPOSE,		/* DELETE Systems/{id} */
	JOB_RECOMPOSE,		/* POST Systems/{id}/Actions/Oem/Strata.Recompose */
	JOB_ZONES,		/* ResourceZones */
	JOB_ZONE,		/* ResourceZones/{id} */
	JOB_USAGE,		/* CompositionService/Oem/Strata/Usage */
	JOB_STORAGE_SERVICES,	/* StorageServices */
	JOB_STORAGE_SERVICE,	/* StorageServices/{id} */
	JOB_VOLUMES,		/* StorageServices/strata/Volumes */
	JOB_VOLUME,		/* StorageServices/strata/Volumes/{id} */
};

/* The MessageId of the 503 of a composer that does not serve (it does
 * not follow the mgmt leader): its MessageArgs name the API address of
 * the one that does ("": not known yet), so that clients follow it
 * (strata compose) and tell it from any other 503. */
#define COMPOSER_NOT_SERVING "Strata.1.0.NotServing"

/* A request for the owner thread, and its answer. */
struct job {
	enum job_kind kind;
	char id[COMP_ID_MAX + 16];	/* JOB_BLOCK, JOB_SYSTEM, JOB_DECOMPOSE, ... */
	/* DELETE and the actions of a System: the If-Match header ("": none),
	 * checked against its ETag on the owner thread. */
	char if_match[256];
	/* JOB_COMPOSE: name, tenant, rq and retain; expires holds the TTL
	 * in seconds (0: none) until the owner thread dates it. */
	struct comp req;
	int64_t since;			/* JOB_USAGE: the window's start */
	/* The answer: an HTTP status and a body (the job owns it), or an
	 * error (msg, msg_id: a Redfish message id). */
	unsigned http;
	json_t *body;
	char msg[512];
	const char *msg_id;
	char location[96];		/* JOB_COMPOSE: the new system's URI */
	/* Refused by a composer that does not lead (503): the API address
	 * of the one that does ("": not known yet). */
	char leader[CFG_STR_MAX];
	bool done;
	struct job *next;
};

struct http_server;
struct rpc_client;
struct strata;

struct composer {
	struct service_env env;		/* borrowed strings: valid until stop */
	struct composer_cfg cfg;
	char mgmt[256];			/* mgmt.address: one address or a list */
	const struct cluster_key *key;
	struct http_server *http;
	int port;			/* the HTTP API's */

	pthread_t th;
	bool started;
	pthread_mutex_t mu;
	pthread_cond_t work, done;
	struct job *head, *tail;	/* under mu */
	bool stopping;			/* under mu */

	/* Following the mgmt leader (a store in PostgreSQL shared by the
	 * composers of every control node, with mgmt in this process): only
	 * the composer beside the mgmt leader serves; the others refuse
	 * with the leader's API address (composer_leader). */
	bool follows;
	char leader_api[CFG_STR_MAX];	/* under mu; "": this one serves or none known */
	volatile uint32_t snap_leads;

	/* For status and metrics on other threads. */
	volatile uint32_t snap_composed, snap_gpus, snap_gpus_free, snap_nodes;
	volatile uint64_t snap_composes, snap_refusals, snap_releases;
	volatile uint64_t snap_storage_total, snap_storage_used, snap_mem_total, snap_mem_used;

	/* ---- owner thread ---- */
	struct comp_store *store;
	struct comp *comps;
	uint32_t ncomps, comps_cap;
	uint64_t next_seq;
	struct inv_node *nodes;		/* sorted by node id */
	uint32_t nnodes;
	struct alloc_gpu *gpus;		/* the nodes' GPUs, sorted by (node, index) */
	uint32_t ngpus;
	uint64_t storage_total, storage_used, mem_total, mem_used;
	uint32_t mem_nodes;
	char mem_addrs[COMPOSER_MAX_MEM][CM_ADDR_LEN];
	/* Bytes moved (meter_sample): the storage daemons up at the last
	 * refresh, and what each told per tenant at the last sample
	 * ({addr: {tenant: [read, written]}}; NULL before the first). */
	char (*storage_addrs)[CM_ADDR_LEN];
	uint32_t nstorage;
	json_t *meter_last;
	uint64_t meter_at_ms;
	char meta[CM_ADDR_LEN];
	uint32_t meta_node;		/* the node of meta */
	uint32_t meta_refused;		/* a node whose meta refused us: picked last */
	bool inv_ok;			/* the last refresh read the map */
	uint64_t inv_at_ms;
	struct rpc_client *cl;		/* to mgmt, meta, the nodes: presents the key */
	struct strata *fs;		/* libstrata, for removing volumes; lazy */
	bool leads;			/* served as leader since the last load */
	char leader_mgmt[CM_ADDR_LEN];	/* the mgmt leader leader_api was read from */
	uint64_t leader_at_ms;		/* when */
};

/* Hands j to the owner thread and waits for its answer. */
void composer_run(struct composer *c, struct job *j);
/* Whether this composer serves now: true, or false with api (len bytes)
 * the API address of the one that does ("": not known yet). Any thread;
 * as of the owner thread's last look. */
bool composer_leader(struct composer *c, char *api, size_t len);
/* The composition called id, or NULL (owner thread). */
struct comp *composer_find(struct composer *c, const char *id);

/* ---- attach.c (owner thread) ---- */

/* Makes the volume of comp: VOLUMES/<id>, owned by nobody (the
 * credential's identity), mode 0700, with a byte quota of its size. 0 or
 * a negative error with a sentence in err. */
int attach_volume(struct composer *c, const struct comp *comp, char *err, size_t errlen);
/* Removes it (and everything under it); a volume already gone is fine. */
int detach_volume(struct composer *c, const struct comp *comp, char *err, size_t errlen);
/* Signs the credential through mgmt's token registry: claims id
 * comp->token_id (set by the caller), tenant, rw on the volume, the mem
 * namespace <id> with comp->mem_share, the storage caps (qos), expiring
 * with the composition.
 * *text is malloc'd (the caller frees it). */
int attach_credential(struct composer *c, const struct comp *comp, char **text, char *err,
		      size_t errlen);
/* Revokes it; a token mgmt does not know is fine. */
int detach_credential(struct composer *c, const struct comp *comp, char *err, size_t errlen);
/* What each volume paths[i] holds now (its quota root's bytes, from
 * meta's QUOTA_LIST) into bytes[i]; UINT64_MAX for one meta does not
 * list. 0 or a negative error (bytes then all UINT64_MAX or partly
 * filled). */
int volumes_consumed(struct composer *c, const char **paths, uint64_t *bytes, uint32_t n);
/* The volume's path: VOLUMES/<id>. */
void comp_volume_path(const struct composer *c, const struct comp *comp, char *out, size_t len);

/* ---- redfish.c ---- */

int http_start(struct composer *c, const char *listen, struct http_server **out);
void http_stop(struct http_server *h);

/* Bodies, built on the owner thread. */
json_t *rf_composition_service(struct composer *c);
json_t *rf_blocks(struct composer *c);
json_t *rf_block(struct composer *c, const char *id);	/* NULL: none */
json_t *rf_systems(struct composer *c);
json_t *rf_system(struct composer *c, const struct comp *comp);
/* Counts a GPU of model in models ({"MODEL": {"Total", "Free"}}), as
 * free or not. */
void rf_count_model(json_t *models, const char *model, bool is_free);
/* ResourceZones: every zone of the compute nodes, with its blocks; one
 * zone (NULL: none called id). */
json_t *rf_zones(struct composer *c);
json_t *rf_zone(struct composer *c, const char *id);
/* The System's ETag: "\"<generation>\"" into out. */
void rf_etag(const struct comp *comp, char *out, size_t len);
/* Whether the If-Match header value matches comp's ETag ("*", or one of
 * a comma-separated list of entity tags; weak ones never match). */
bool rf_if_match(const struct comp *comp, const char *header);
/* ---- portal.c (HTTP threads) ---- */

struct MHD_Connection;
/* Whether url is the portal's (/ui, /ui/...). */
bool portal_is(const char *url);
/* Answers a request for the portal's url: its page, script or style, 404
 * for any other /ui path, 405 for a method other than GET and HEAD.
 * Returns MHD_YES (1) or MHD_NO (0). */
int portal_serve(struct MHD_Connection *conn, const char *url, const char *method);

/* Swordfish's view of the volumes: the service, its Volumes collection
 * (every composition's volume that exists now) and one volume (NULL:
 * none called id). Reads the volumes' use from meta. */
json_t *rf_storage_services(struct composer *c);
json_t *rf_storage_service(struct composer *c, const char *id);
json_t *rf_volumes(struct composer *c);
json_t *rf_volume(struct composer *c, const char *id);
/* Usage per tenant from since until now (usage.h); NULL on ENOMEM. */
json_t *rf_usage(struct composer *c, int64_t since);

#endif
