/*
 * The composer's HTTP API, Redfish-shaped (docs/composer.md): the
 * ServiceRoot, the CompositionService with the inventory, ResourceBlocks
 * (a block per GPU, and the storage and memory pools), ResourceZones
 * (zones.c), and Systems (the compositions: POST composes, DELETE
 * decomposes, the Oem action Strata.Recompose replaces lost GPUs; each
 * has an ETag, and DELETE and the action honour If-Match). Every
 * resource but the ServiceRoot needs an admin token of the cluster in
 * "Authorization: Bearer"; errors carry Redfish's
 * error.@Message.ExtendedInfo.
 *
 * Each connection has its own MHD thread: it reads and checks the request
 * there, hands a job to the owner thread (composer_run) and writes what
 * comes back. Bodies are built on the owner thread (rf_*).
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/buf.h"
#include "common/log.h"
#include "composer/composer_int.h"
#include "composer/usage.h"
#include "net/auth.h"
#include "net/http_listen.h"
#include "strata/errors.h"

#define RF "/redfish/v1"
#define RF_SYSTEMS RF "/Systems"
#define RF_SERVICE RF "/CompositionService"
#define RF_BLOCKS RF_SERVICE "/ResourceBlocks"
#define RF_ZONES RF_SERVICE "/ResourceZones"
#define RF_RECOMPOSE "/Actions/Oem/Strata.Recompose"
#define RF_USAGE RF_SERVICE "/Oem/Strata/Usage"
#define RF_STORAGE RF "/StorageServices"
#define RF_VOLUMES RF_STORAGE "/strata/Volumes"
#define SIZE_MAX_BYTES (1ull << 60)	/* 1 EiB: more is a typo */
#define TTL_MAX_S (10ll * 366 * 86400)
/* QoS caps: MiB/s (1 TiB/s, the token's bound) and operations/s. */
#define QOS_MBPS_MAX (TOKEN_QOS_BW_MAX >> 20)
#define QOS_IOPS_MAX TOKEN_QOS_IOPS_MAX

struct http_server {
	struct MHD_Daemon *d;
	struct composer *c;
};

/* A request being read. */
struct http_req {
	struct bbuf body;
	bool too_big;
};

/* ---- bodies (owner thread) ---- */

/* {"@odata.id": "BASE/ID"} */
static json_t *odata(const char *base, const char *id)
{
	char uri[256];

	snprintf(uri, sizeof(uri), "%s/%s", base, id);
	return json_pack("{s:s}", "@odata.id", uri);
}

static const struct inv_node *find_node(struct composer *c, uint32_t id)
{
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (c->nodes[i].node == id)
			return &c->nodes[i];
	return NULL;
}

static const char *owner_of(struct composer *c, uint32_t node, uint32_t index)
{
	for (uint32_t i = 0; i < c->ncomps; i++) {
		const struct comp *p = &c->comps[i];

		if (!comp_state_holds(p->state))
			continue;
		for (uint32_t k = 0; k < p->ngpus; k++)
			if (p->gpus[k].node == node && p->gpus[k].index == index)
				return p->id;
	}
	return NULL;
}

static json_t *gpu_block(struct composer *c, const struct alloc_gpu *g)
{
	const struct inv_node *n = find_node(c, g->node);
	const char *owner = owner_of(c, g->node, g->index);
	const char *state = owner ? "composed" : gpu_state_name(g->state);
	const char *cstate = !g->node_up ? "Unavailable" : owner ? "Composed" :
			     g->state == GPU_FAILED ? "Failed" : "Unused";
	char id[64], zone[GPU_ZONE_MAX + 64];

	snprintf(id, sizeof(id), "gpu-%u-%u", g->node, g->index);
	snprintf(zone, sizeof(zone), RF_ZONES "/%s", g->zone);
	return json_pack("{s:s, s:s, s:s, s:s, s:[s], s:{s:s, s:b}, s:{s:s, s:s}, s:{s:[{s:s}]},"
			 " s:{s:{s:i, s:i, s:s, s:s, s:b, s:s?, s:s, s:s}}}",
			 "@odata.id", "", "@odata.type", "#ResourceBlock.v1_4_0.ResourceBlock",
			 "Id", id, "Name", g->model, "ResourceBlockType", "Processor",
			 "CompositionStatus", "CompositionState", cstate, "SharingCapable", 0,
			 "Status", "State", g->node_up ? "Enabled" : "UnavailableOffline", "Health",
			 g->state == GPU_FAILED || !g->node_up ? "Critical" : "OK",
			 "Links", "Zones", "@odata.id", zone,
			 "Oem", "Strata", "Node", (int)g->node, "Index", (int)g->index, "Model",
			 g->model, "State", g->node_up ? state : "unavailable", "NodeUp",
			 g->node_up, "Composition", owner, "Address", n ? n->addr : "", "Zone",
			 g->zone);
}

static void set_uri(json_t *o, const char *base, const char *id)
{
	char uri[256];

	snprintf(uri, sizeof(uri), "%s/%s", base, id);
	json_object_set_new(o, "@odata.id", json_string(uri));
}

static json_t *pool(uint64_t total, uint64_t used)
{
	return json_pack("{s:I, s:I, s:I}", "Total", (json_int_t)total, "Used", (json_int_t)used,
			 "Free", (json_int_t)(total > used ? total - used : 0));
}

static json_t *pool_block(struct composer *c, bool storage)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:[s], s:{s:s, s:b}, s:{s:s, s:s}}",
			      "@odata.type", "#ResourceBlock.v1_4_0.ResourceBlock", "Id",
			      storage ? "storage" : "memory", "Name",
			      storage ? "the storage plane" : "the memory pool", "ResourceBlockType",
			      storage ? "Storage" : "Memory", "CompositionStatus",
			      "CompositionState", "Composed", "SharingCapable", 1, "Status", "State",
			      "Enabled", "Health", "OK");
	json_t *p = storage ? pool(c->storage_total, c->storage_used) :
			      pool(c->mem_total, c->mem_used);

	if (!storage)
		json_object_set_new(p, "Nodes", json_integer(c->mem_nodes));
	json_object_set_new(o, "Oem", json_pack("{s:o}", "Strata", p));
	set_uri(o, RF_BLOCKS, storage ? "storage" : "memory");
	return o;
}

/* "gpu-NODE-INDEX", a GPU's ResourceBlock id, into node and index:
 * 0, or -EINVAL for anything else (signs, spaces, trailing bytes). */
static int gpu_block_id(const char *id, uint32_t *node, uint32_t *index)
{
	unsigned n, i;
	int used = 0;

	if (strncmp(id, "gpu-", 4) || !isdigit((unsigned char)id[4]) ||
	    sscanf(id, "gpu-%u-%u%n", &n, &i, &used) != 2 || id[used] ||
	    !isdigit((unsigned char)strrchr(id, '-')[1]))
		return -EINVAL;
	*node = n;
	*index = i;
	return 0;
}

json_t *rf_block(struct composer *c, const char *id)
{
	uint32_t node, index;

	if (strcmp(id, "storage") == 0 || strcmp(id, "memory") == 0)
		return pool_block(c, id[0] == 's');
	if (gpu_block_id(id, &node, &index))
		return NULL;
	for (uint32_t i = 0; i < c->ngpus; i++) {
		if (c->gpus[i].node == node && c->gpus[i].index == index) {
			json_t *o = gpu_block(c, &c->gpus[i]);

			set_uri(o, RF_BLOCKS, id);
			return o;
		}
	}
	return NULL;
}

json_t *rf_blocks(struct composer *c)
{
	json_t *members = json_array(), *full = json_array();
	char id[64];

	for (uint32_t i = 0; i < c->ngpus; i++) {
		snprintf(id, sizeof(id), "gpu-%u-%u", c->gpus[i].node, c->gpus[i].index);
		json_array_append_new(members, odata(RF_BLOCKS, id));
		json_array_append_new(full, rf_block(c, id));
	}
	json_array_append_new(members, odata(RF_BLOCKS, "storage"));
	json_array_append_new(members, odata(RF_BLOCKS, "memory"));
	json_array_append_new(full, pool_block(c, true));
	json_array_append_new(full, pool_block(c, false));
	return json_pack("{s:s, s:s, s:s, s:I, s:o, s:{s:{s:o}}}", "@odata.id", RF_BLOCKS,
			 "@odata.type", "#ResourceBlockCollection.ResourceBlockCollection", "Name",
			 "Resource blocks", "Members@odata.count", (json_int_t)json_array_size(members),
			 "Members", members, "Oem", "Strata", "Blocks", full);
}

void rf_count_model(json_t *models, const char *model, bool is_free)
{
	json_t *m = json_object_get(models, model);

	if (!m) {
		m = json_pack("{s:i, s:i}", "Total", 0, "Free", 0);
		if (json_object_set_new(models, model, m))
			return;
	}
	json_object_set_new(m, "Total",
			    json_integer(json_integer_value(json_object_get(m, "Total")) + 1));
	json_object_set_new(m, "Free", json_integer(json_integer_value(json_object_get(m, "Free")) +
						    is_free));
}

json_t *rf_composition_service(struct composer *c)
{
	json_t *nodes = json_array(), *models = json_object();
	uint32_t nfree = 0, composed = 0, failed = 0, unavail = 0;

	for (uint32_t i = 0; i < c->ngpus; i++) {
		const struct alloc_gpu *g = &c->gpus[i];
		bool fits = alloc_gpu_fits(g, "");

		rf_count_model(models, g->model, fits);
		nfree += fits;
		unavail += !g->node_up;
		composed += g->node_up && g->owned;
		failed += g->node_up && !g->owned && g->state == GPU_FAILED;
	}
	for (uint32_t i = 0; i < c->nnodes; i++) {
		const struct inv_node *n = &c->nodes[i];

		json_t *nics = json_array(), *x;
		size_t k;

		json_array_foreach(n->nics, k, x)
			json_array_append_new(nics, json_pack(
				"{s:s, s:s, s:I}", "Name",
				json_string_value(json_object_get(x, "name")) ?: "?", "State",
				json_string_value(json_object_get(x, "state")) ?: "unknown",
				"SpeedMbps", json_integer_value(json_object_get(x, "speed_mbps"))));
		json_array_append_new(nodes, json_pack("{s:i, s:s, s:b, s:I, s:i, s:s, s:o}", "Node",
						       (int)n->node, "Address", n->addr, "Up", n->up,
						       "HostMemory", (json_int_t)n->host_memory,
						       "Gpus", (int)n->inv.n, "Zone", n->zone,
						       "Nics", nics));
	}
	json_t *mem = pool(c->mem_total, c->mem_used);

	json_object_set_new(mem, "Nodes", json_integer(c->mem_nodes));
	return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:{s:s, s:s}, s:{s:s}, s:{s:s},"
			 " s:{s:{s:{s:{s:i, s:i, s:i, s:i, s:i, s:o}, s:o, s:o, s:o, s:b}}}}",
			 "@odata.id", RF_SERVICE, "@odata.type",
			 "#CompositionService.v1_2_0.CompositionService", "Id", "CompositionService",
			 "Name", "Strata composition service", "ServiceEnabled", 1,
			 "AllowOverprovisioning", 0, "Status", "State", "Enabled", "Health",
			 c->inv_ok ? "OK" : "Warning", "ResourceBlocks", "@odata.id", RF_BLOCKS,
			 "ResourceZones", "@odata.id", RF_ZONES, "Oem", "Strata", "Inventory", "Gpus", "Total", (int)c->ngpus, "Free",
			 (int)nfree, "Composed", (int)composed, "Failed", (int)failed, "Unavailable",
			 (int)unavail, "Models", models, "ComputeNodes", nodes, "Storage",
			 pool(c->storage_total, c->storage_used), "Memory", mem, "MapRead",
			 c->inv_ok);
}

static const char *health(uint32_t state)
{
	return state == COMP_FAILED ? "Critical" : state == COMP_DEGRADED ? "Warning" : "OK";
}

static const char *rf_state(uint32_t state)
{
	switch (state) {
	case COMP_COMPOSED:
	case COMP_DEGRADED:
		return "Enabled";
	case COMP_REQUESTED:
	case COMP_ALLOCATING:
		return "Starting";
	case COMP_DECOMPOSING:
		return "Disabled";
	default:
		return "Absent";
	}
}

/* The caps as the request gave them, or null without any. */
static json_t *qos_of(const struct comp *p)
{
	if (!p->qos_mbps && !p->qos_iops)
		return json_null();
	return json_pack("{s:I, s:I}", "BandwidthMBps", (json_int_t)p->qos_mbps, "Iops",
			 (json_int_t)p->qos_iops);
}

json_t *rf_system(struct composer *c, const struct comp *p)
{
	json_t *gpus = json_array(), *blocks = json_array(), *cuda = json_object();
	json_t *strata, *o, *paths, *mem_nodes = json_array();
	char path[512];

	for (uint32_t i = 0; i < p->ngpus; i++) {
		const struct inv_node *n = find_node(c, p->gpus[i].node);
		char id[64], node[16];
		const char *was;
		char *list;

		snprintf(id, sizeof(id), "gpu-%u-%u", p->gpus[i].node, p->gpus[i].index);
		snprintf(node, sizeof(node), "%u", p->gpus[i].node);
		json_array_append_new(gpus, json_pack("{s:i, s:i, s:s, s:s, s:s}", "Node",
						      (int)p->gpus[i].node, "Index",
						      (int)p->gpus[i].index, "Model", p->gpus[i].model,
						      "Address", n ? n->addr : "", "Zone",
						      n ? n->zone : ""));
		json_array_append_new(blocks, odata(RF_BLOCKS, id));
		/* CUDA_VISIBLE_DEVICES of each node: its indices, in order. */
		was = json_string_value(json_object_get(cuda, node));
		if (asprintf(&list, "%s%s%u", was ? was : "", was ? "," : "", p->gpus[i].index) > 0) {
			json_object_set_new(cuda, node, json_string(list));
			free(list);
		}
	}
	if (p->rq.storage)
		json_array_append_new(blocks, odata(RF_BLOCKS, "storage"));
	if (p->rq.memory)
		json_array_append_new(blocks, odata(RF_BLOCKS, "memory"));
	for (uint32_t i = 0; p->rq.memory && i < c->mem_nodes; i++)
		json_array_append_new(mem_nodes, json_string(c->mem_addrs[i]));
	comp_volume_path(c, p, path, sizeof(path));
	strata = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:b, s:{s:i, s:s, s:b, s:s?, s:b}, s:o, s:o,"
			   " s:s, s:{s:s, s:s}}",
			   "State", comp_state_name(p->state), "Reason", p->reason, "Tenant",
			   p->tenant, "Created", (json_int_t)p->created, "Changed",
			   (json_int_t)p->changed, "Expires", (json_int_t)p->expires, "Retain",
			   p->retain, "GpuRequest", "Count", (int)p->rq.gpus, "Model", p->rq.model,
			   "SameNode", p->rq.same_node, "Zone", p->rq.zone[0] ? p->rq.zone : NULL,
			   "SameZone", p->rq.same_zone, "Gpus", gpus, "CudaVisibleDevices", cuda,
			   "CredentialId", p->token_id, "Addresses", "Mgmt", c->mgmt, "Meta",
			   c->meta);
	json_object_set_new(strata, "Owner", json_pack("{s:I, s:I}", "Uid",
						       (json_int_t)p->owner_uid, "Gid",
						       (json_int_t)p->owner_gid));
	json_object_set_new(strata, "Paths", paths = json_array());
	for (uint32_t i = 0; i < p->npaths; i++)
		json_array_append_new(paths, json_pack("{s:s, s:s}", "Path", p->paths[i].prefix,
						       "Access", p->paths[i].write ? "rw" : "r"));
	json_object_set_new(strata, "Qos", qos_of(p));
	json_object_set_new(strata, "Volume", p->rq.storage ?
			    json_pack("{s:s, s:I}", "Path", path, "Size", (json_int_t)p->rq.storage) :
			    json_null());
	if (p->rq.memory)
		json_object_set_new(strata, "Memory",
				    json_pack("{s:s, s:I, s:I, s:i, s:o}", "Namespace", p->id, "Size",
					      (json_int_t)p->rq.memory, "PerNodeCapacity",
					      (json_int_t)p->mem_share, "Nodes", (int)p->mem_nodes,
					      "Addresses", mem_nodes));
	else
		json_object_set_new(strata, "Memory", json_null()), json_decref(mem_nodes);
	o = json_pack("{s:s, s:s, s:s, s:s, s:{s:s, s:s}, s:{s:o}, s:{s:o}}", "@odata.type",
		      "#ComputerSystem.v1_20_0.ComputerSystem", "Id", p->id, "Name",
		      p->name[0] ? p->name : p->id, "SystemType", "Composed", "Status", "State",
		      rf_state(p->state), "Health", health(p->state), "Links", "ResourceBlocks",
		      blocks, "Oem", "Strata", strata);
	set_uri(o, RF_SYSTEMS, p->id);
	rf_etag(p, path, sizeof(path));
	json_object_set_new(o, "@odata.etag", json_string(path));
	snprintf(path, sizeof(path), RF_SYSTEMS "/%s" RF_RECOMPOSE, p->id);
	json_object_set_new(o, "Actions", json_pack("{s:{s:{s:s}}}", "Oem", "#Strata.Recompose",
						    "target", path));
	return o;
}

void rf_etag(const struct comp *p, char *out, size_t len)
{
	snprintf(out, len, "\"%llu\"", (unsigned long long)p->generation);
}

bool rf_if_match(const struct comp *p, const char *header)
{
	char etag[32];
	size_t elen;
	const char *s = header;

	rf_etag(p, etag, sizeof(etag));
	elen = strlen(etag);
	while (*s) {
		size_t n;

		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		n = strcspn(s, ", \t");
		if ((n == 1 && *s == '*') || (n == elen && strncmp(s, etag, n) == 0))
			return true;
		s += n;
	}
	return false;
}

/* ---- Swordfish: the volumes ---- */

/* Whether comp's volume exists: it holds its resources, or it was
 * released with its volume retained. */
static bool has_volume(const struct comp *p)
{
	return p->rq.storage && (comp_state_holds(p->state) ||
				 (p->state == COMP_RELEASED && p->retain));
}

static json_t *volume_of(struct composer *c, const struct comp *p, uint64_t consumed)
{
	char path[512], uri[128];
	json_t *o;

	comp_volume_path(c, p, path, sizeof(path));
	snprintf(uri, sizeof(uri), RF_VOLUMES "/%s", p->id);
	o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:{s:{s:I}}, s:{s:s, s:s},"
		      " s:{s:{s:{s:{s:s}}}}, s:{s:{s:s, s:s, s:b, s:{s:I, s:I}}}}",
		      "@odata.id", uri, "@odata.type", "#Volume.v1_9_0.Volume", "Id", p->id,
		      "Name", p->name[0] ? p->name : p->id, "CapacityBytes",
		      (json_int_t)p->rq.storage, "Capacity", "Data", "AllocatedBytes",
		      (json_int_t)p->rq.storage, "Status", "State",
		      comp_state_holds(p->state) ? "Enabled" : "StandbyOffline", "Health",
		      p->state == COMP_DEGRADED ? "Warning" : "OK", "Links", "Oem", "Strata",
		      "Composition", "@odata.id", "", "Oem", "Strata", "Path", path, "Tenant",
		      p->tenant, "Retain", p->retain, "Owner", "Uid", (json_int_t)p->owner_uid,
		      "Gid", (json_int_t)p->owner_gid);
	if (!o)
		return NULL;
	snprintf(uri, sizeof(uri), RF_SYSTEMS "/%s", p->id);
	json_object_set_new(json_object_get(json_object_get(json_object_get(json_object_get(
		o, "Links"), "Oem"), "Strata"), "Composition"), "@odata.id", json_string(uri));
	json_object_set_new(json_object_get(json_object_get(o, "Oem"), "Strata"), "Qos", qos_of(p));
	/* Consumed: what meta counts under the volume's quota now; absent
	 * when meta could not be asked. */
	if (consumed != UINT64_MAX)
		json_object_set_new(json_object_get(json_object_get(o, "Capacity"), "Data"),
				    "ConsumedBytes", json_integer((json_int_t)consumed));
	return o;
}

/* The use of the volumes of comps[k] for each k in idx[0..n). */
static void consumed_of(struct composer *c, const uint32_t *idx, uint32_t n, uint64_t *bytes)
{
	char (*paths)[512] = n ? calloc(n, sizeof(*paths)) : NULL;
	const char **pp = n ? calloc(n, sizeof(*pp)) : NULL;
	int rc;

	for (uint32_t i = 0; i < n; i++)
		bytes[i] = UINT64_MAX;
	if (!paths || !pp)
		goto out;
	for (uint32_t i = 0; i < n; i++) {
		comp_volume_path(c, &c->comps[idx[i]], paths[i], sizeof(paths[i]));
		pp[i] = paths[i];
	}
	rc = volumes_consumed(c, pp, bytes, n);
	if (rc)
		log_warn("composer", "cannot read the volumes' use from meta: %s", strata_strerror(rc));
out:
	free(paths);
	free(pp);
}

json_t *rf_storage_services(struct composer *c)
{
	(void)c;
	return json_pack("{s:s, s:s, s:s, s:i, s:[{s:s}]}", "@odata.id", RF_STORAGE, "@odata.type",
			 "#StorageServiceCollection.StorageServiceCollection", "Name",
			 "Storage services", "Members@odata.count", 1, "Members", "@odata.id",
			 RF_STORAGE "/strata");
}

json_t *rf_storage_service(struct composer *c, const char *id)
{
	(void)c;
	if (strcmp(id, "strata"))
		return NULL;
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:{s:s, s:s}}", "@odata.id",
			 RF_STORAGE "/strata", "@odata.type", "#StorageService.v1_6_0.StorageService",
			 "Id", "strata", "Name", "the storage plane's volumes", "Description",
			 "every composition's volume: a directory of the namespace with a byte quota",
			 "Volumes", "@odata.id", RF_VOLUMES, "Status", "State", "Enabled", "Health",
			 c->inv_ok ? "OK" : "Warning");
}

json_t *rf_volumes(struct composer *c)
{
	uint32_t *idx = calloc(c->ncomps ? c->ncomps : 1, sizeof(*idx)), n = 0;
	uint64_t *bytes = calloc(c->ncomps ? c->ncomps : 1, sizeof(*bytes));
	json_t *members = json_array(), *o = NULL;

	if (!idx || !bytes || !members)
		goto out;
	for (uint32_t i = 0; i < c->ncomps; i++)
		if (has_volume(&c->comps[i]))
			idx[n++] = i;
	consumed_of(c, idx, n, bytes);
	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(members, volume_of(c, &c->comps[idx[i]], bytes[i]));
	o = json_pack("{s:s, s:s, s:s, s:I, s:O}", "@odata.id", RF_VOLUMES, "@odata.type",
		      "#VolumeCollection.VolumeCollection", "Name", "Volumes",
		      "Members@odata.count", (json_int_t)n, "Members", members);
out:
	json_decref(members);
	free(idx);
	free(bytes);
	return o;
}

json_t *rf_volume(struct composer *c, const char *id)
{
	for (uint32_t i = 0; i < c->ncomps; i++) {
		uint64_t bytes;

		if (strcmp(c->comps[i].id, id) || !has_volume(&c->comps[i]))
			continue;
		consumed_of(c, &i, 1, &bytes);
		return volume_of(c, &c->comps[i], bytes);
	}
	return NULL;
}

static void set_bytes(json_t *t, uint64_t read, uint64_t written)
{
	json_object_set_new(t, "BytesRead", json_integer((json_int_t)read));
	json_object_set_new(t, "BytesWritten", json_integer((json_int_t)written));
	json_object_set_new(t, "BytesMoved", json_integer((json_int_t)(read + written)));
}

/* comp_store_sum_bytes: a tenant's bytes moved onto its row, or a row of
 * its own when it held nothing in the window (a composition released
 * before it, its credential still in use). */
static void add_bytes(void *arg, const char *tenant, uint64_t read, uint64_t written)
{
	json_t *tenants = arg, *t;
	size_t i;

	json_array_foreach(tenants, i, t) {
		if (!strcmp(json_string_value(json_object_get(t, "Tenant")) ?: "", tenant)) {
			set_bytes(t, read, written);
			return;
		}
	}
	t = json_pack("{s:s, s:f, s:f, s:f, s:i}", "Tenant", tenant, "GpuHours", 0.0,
		      "StorageTBHours", 0.0, "MemoryGBHours", 0.0, "Compositions", 0);
	if (t) {
		set_bytes(t, read, written);
		json_array_append_new(tenants, t);
	}
}

json_t *rf_usage(struct composer *c, int64_t since)
{
	int64_t now = (int64_t)time(NULL);
	struct usage_row *rows;
	uint32_t n;
	json_t *o, *tenants;

	if (usage_sum(c->comps, c->ncomps, since < now ? since : now, now, &rows, &n))
		return NULL;
	tenants = json_array();
	for (uint32_t i = 0; tenants && i < n; i++)
		json_array_append_new(tenants, json_pack("{s:s, s:f, s:f, s:f, s:i}", "Tenant",
							 rows[i].tenant, "GpuHours", rows[i].gpu_hours,
							 "StorageTBHours", rows[i].storage_tb_hours,
							 "MemoryGBHours", rows[i].memory_gb_hours,
							 "Compositions", (int)rows[i].compositions));
	free(rows);
	for (size_t i = 0; i < json_array_size(tenants); i++)
		set_bytes(json_array_get(tenants, i), 0, 0);
	if (tenants && comp_store_sum_bytes(c->store, since < now ? since : now, now, add_bytes,
					    tenants)) {
		json_decref(tenants);
		return NULL;
	}
	o = json_pack("{s:s, s:s, s:I, s:I, s:o}", "@odata.id", RF_USAGE, "Name",
		      "Usage per tenant", "Since", (json_int_t)since, "Until", (json_int_t)now,
		      "Tenants", tenants);
	return o;
}

json_t *rf_systems(struct composer *c)
{
	json_t *members = json_array(), *full = json_array();

	for (uint32_t i = 0; i < c->ncomps; i++) {
		json_array_append_new(members, odata(RF_SYSTEMS, c->comps[i].id));
		json_array_append_new(full, rf_system(c, &c->comps[i]));
	}
	return json_pack("{s:s, s:s, s:s, s:I, s:o, s:{s:{s:o}}}", "@odata.id", RF_SYSTEMS,
			 "@odata.type", "#ComputerSystemCollection.ComputerSystemCollection",
			 "Name", "Composed systems", "Members@odata.count",
			 (json_int_t)json_array_size(members), "Members", members, "Oem", "Strata",
			 "Systems", full);
}

static json_t *service_root(void)
{
	return json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s}, s:{s:s}, s:{s:s}}", "@odata.id", RF,
			 "@odata.type", "#ServiceRoot.v1_15_0.ServiceRoot", "Id", "RootService",
			 "Name", "Strata", "RedfishVersion", "1.15.0", "CompositionService",
			 "@odata.id", RF_SERVICE, "Systems", "@odata.id", RF_SYSTEMS,
			 "StorageServices", "@odata.id", RF_STORAGE);
}

/* ---- the request (HTTP threads) ---- */

static void bad(struct job *j, const char *msg_id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void bad(struct job *j, const char *msg_id, const char *fmt, ...)
{
	va_list ap;

	j->http = 400;
	j->msg_id = msg_id;
	va_start(ap, fmt);
	vsnprintf(j->msg, sizeof(j->msg), fmt, ap);
	va_end(ap);
}

static bool name_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (!n || n > max)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return false;
	return true;
}

/* A size: a JSON integer of bytes, or a string with a K/M/G/T suffix. */
static int get_size(struct job *j, json_t *obj, const char *what, uint64_t *out)
{
	json_t *v = json_object_get(obj, "Size");
	const char *k;
	json_t *x;

	if (!json_is_object(obj)) {
		bad(j, "Base.1.8.PropertyValueTypeError", "'%s' must be an object such as {\"Size\": \"1G\"}",
		    what);
		return -1;
	}
	json_object_foreach(obj, k, x) {
		if (strcmp(k, "Size")) {
			bad(j, "Base.1.8.PropertyUnknown", "'%s.%s' is not a property (only Size)", what, k);
			return -1;
		}
	}
	if (json_is_integer(v) && json_integer_value(v) > 0) {
		*out = (uint64_t)json_integer_value(v);
	} else if (!json_is_string(v) || parse_size(json_string_value(v), out) || !*out) {
		bad(j, "Base.1.8.PropertyValueTypeError",
		    "'%s.Size' must be a positive number of bytes or a size such as \"256M\" or \"1G\"",
		    what);
		return -1;
	}
	if (*out > SIZE_MAX_BYTES) {
		bad(j, "Base.1.8.PropertyValueOutOfRange", "'%s.Size' is more than 1 EiB", what);
		return -1;
	}
	return 0;
}

/* "Ids": ["gpu-NODE-INDEX", ...]: exactly these GPUs (their
 * ResourceBlocks), each once. */
static int get_gpu_ids(struct job *j, json_t *v)
{
	struct alloc_request *rq = &j->req.rq;
	json_t *e;
	size_t i;

	if (!json_is_array(v) || !json_array_size(v) || json_array_size(v) > ALLOC_MAX_GPUS) {
		bad(j, "Base.1.8.PropertyValueTypeError",
		    "'Gpus.Ids' must be an array of 1..%d ResourceBlock ids such as \"gpu-1-0\"",
		    ALLOC_MAX_GPUS);
		return -1;
	}
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);
		uint32_t node, index;

		if (!s || gpu_block_id(s, &node, &index)) {
			bad(j, "Base.1.8.PropertyValueFormatError",
			    "'Gpus.Ids[%zu]' must be a GPU's ResourceBlock id such as \"gpu-1-0\"", i);
			return -1;
		}
		for (size_t k = 0; k < i; k++)
			if (rq->ids[k].node == node && rq->ids[k].index == index) {
				bad(j, "Base.1.8.PropertyValueConflict",
				    "'Gpus.Ids' names %s twice", s);
				return -1;
			}
		rq->ids[i] = (struct alloc_gpu_id){ node, index };
	}
	rq->nids = (uint32_t)json_array_size(v);
	return 0;
}

static int get_gpus(struct job *j, json_t *o)
{
	struct alloc_request *rq = &j->req.rq;
	const char *k;
	json_t *v;

	if (!json_is_object(o)) {
		bad(j, "Base.1.8.PropertyValueTypeError",
		    "'Gpus' must be an object such as {\"Count\": 2, \"Model\": \"H100-80GB\"}");
		return -1;
	}
	json_object_foreach(o, k, v) {
		if (strcmp(k, "Count") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > ALLOC_MAX_GPUS) {
				bad(j, "Base.1.8.PropertyValueOutOfRange",
				    "'Gpus.Count' must be an integer in 0..%d", ALLOC_MAX_GPUS);
				return -1;
			}
			rq->gpus = (uint32_t)json_integer_value(v);
		} else if (strcmp(k, "Model") == 0) {
			if (!json_is_string(v) || (json_string_length(v) &&
						   !name_ok(json_string_value(v), GPU_MODEL_MAX))) {
				bad(j, "Base.1.8.PropertyValueFormatError",
				    "'Gpus.Model' must be a model name such as \"H100-80GB\" (letters, digits, '.', '_', '-')");
				return -1;
			}
			snprintf(rq->model, sizeof(rq->model), "%s", json_string_value(v));
		} else if (strcmp(k, "SameNode") == 0) {
			if (!json_is_boolean(v)) {
				bad(j, "Base.1.8.PropertyValueTypeError", "'Gpus.SameNode' must be true or false");
				return -1;
			}
			rq->same_node = json_is_true(v);
		} else if (strcmp(k, "Zone") == 0) {
			if (!json_is_string(v) || !gpu_zone_ok(json_string_value(v))) {
				bad(j, "Base.1.8.PropertyValueFormatError",
				    "'Gpus.Zone' must be a zone name (1..%d letters, digits, '.', '_' or '-')",
				    GPU_ZONE_MAX);
				return -1;
			}
			snprintf(rq->zone, sizeof(rq->zone), "%s", json_string_value(v));
		} else if (strcmp(k, "SameZone") == 0) {
			if (!json_is_boolean(v)) {
				bad(j, "Base.1.8.PropertyValueTypeError", "'Gpus.SameZone' must be true or false");
				return -1;
			}
			rq->same_zone = json_is_true(v);
		} else if (strcmp(k, "Ids") == 0) {
			if (get_gpu_ids(j, v))
				return -1;
		} else {
			bad(j, "Base.1.8.PropertyUnknown",
			    "'Gpus.%s' is not a property (Count, Model, SameNode, Zone, SameZone, Ids)", k);
			return -1;
		}
	}
	return 0;
}

/* "Owner": {"Uid": N, "Gid": N}: who the job runs as (its volume and
 * credential are theirs). Root is refused: a composition's credential
 * never acts as root. Gid defaults to Uid. */
static int get_owner(struct job *j, json_t *v)
{
	json_t *uid = json_object_get(v, "Uid"), *gid = json_object_get(v, "Gid"), *x;
	const char *k;

	if (!json_is_object(v)) {
		bad(j, "Base.1.8.PropertyValueTypeError", "'Owner' must be an object {Uid, Gid}");
		return -1;
	}
	json_object_foreach(v, k, x) {
		if (strcmp(k, "Uid") && strcmp(k, "Gid")) {
			bad(j, "Base.1.8.PropertyUnknown", "'Owner.%s' is not a property (Uid, Gid)", k);
			return -1;
		}
	}
	if (!json_is_integer(uid) || json_integer_value(uid) < 1 ||
	    json_integer_value(uid) >= TOKEN_NOBODY + 1 ||
	    (gid && (!json_is_integer(gid) || json_integer_value(gid) < 0 ||
		     json_integer_value(gid) >= TOKEN_NOBODY + 1))) {
		bad(j, "Base.1.8.PropertyValueOutOfRange",
		    "'Owner.Uid' must be a uid in 1..%u (not root) and 'Owner.Gid' a gid in 0..%u",
		    TOKEN_NOBODY, TOKEN_NOBODY);
		return -1;
	}
	j->req.owner_uid = (uint32_t)json_integer_value(uid);
	j->req.owner_gid = gid ? (uint32_t)json_integer_value(gid) : j->req.owner_uid;
	return 0;
}

/* "Paths": [{"Path": "/abs", "Access": "r" | "rw"}, ...]: subtrees the
 * credential reaches besides the volume (a dataset to read, a directory
 * to stage out to), at most COMP_PATHS_MAX. The credential still acts
 * as the owner there: the namespace's permissions decide. */
static int get_paths(struct job *j, json_t *v)
{
	struct comp *r = &j->req;
	json_t *e, *x;
	size_t i;
	const char *k;

	if (!json_is_array(v) || json_array_size(v) > COMP_PATHS_MAX) {
		bad(j, "Base.1.8.PropertyValueTypeError",
		    "'Paths' must be an array of at most %u {Path, Access} objects", COMP_PATHS_MAX);
		return -1;
	}
	json_array_foreach(v, i, e) {
		const char *path = json_string_value(json_object_get(e, "Path"));
		const char *acc = json_string_value(json_object_get(e, "Access"));
		struct token_path *tp = &r->paths[i];

		if (!json_is_object(e)) {
			bad(j, "Base.1.8.PropertyValueTypeError", "'Paths[%zu]' must be an object {Path, Access}", i);
			return -1;
		}
		json_object_foreach(e, k, x) {
			if (strcmp(k, "Path") && strcmp(k, "Access")) {
				bad(j, "Base.1.8.PropertyUnknown",
				    "'Paths[%zu].%s' is not a property (Path, Access)", i, k);
				return -1;
			}
		}
		if (!path || !token_path_normal(path) || strlen(path) >= sizeof(tp->prefix) ||
		    !acc || (strcmp(acc, "r") && strcmp(acc, "rw"))) {
			bad(j, "Base.1.8.PropertyValueFormatError",
			    "'Paths[%zu]' needs 'Path' (an absolute, normalized path of at most %zu bytes) and 'Access' (\"r\" or \"rw\")",
			    i, sizeof(tp->prefix) - 1);
			return -1;
		}
		snprintf(tp->prefix, sizeof(tp->prefix), "%s", path);
		tp->write = !strcmp(acc, "rw");
		r->npaths = (uint32_t)i + 1;
	}
	return 0;
}

/* An integer property of Oem.Strata.Qos in 0..max. */
static int get_cap(struct job *j, json_t *v, const char *name, const char *unit, uint64_t max,
		   uint32_t *out)
{
	if (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    (uint64_t)json_integer_value(v) > max) {
		bad(j, json_is_integer(v) ? "Base.1.8.PropertyValueOutOfRange"
					  : "Base.1.8.PropertyValueTypeError",
		    "'Oem.Strata.Qos.%s' must be an integer of %s in 0..%llu (0: no cap)", name, unit,
		    (unsigned long long)max);
		return -1;
	}
	*out = (uint32_t)json_integer_value(v);
	return 0;
}

/* "Oem": {"Strata": {"Qos": {"BandwidthMBps": N, "Iops": N}}}: the
 * storage slice's caps (docs/composer.md, "QoS"). */
static int get_oem(struct job *j, json_t *oem)
{
	json_t *strata = json_object_get(oem, "Strata"), *qos, *v;
	const char *k;

	if (!json_is_object(oem) || json_object_size(oem) != 1 || !json_is_object(strata)) {
		bad(j, "Base.1.8.PropertyValueTypeError",
		    "'Oem' must be an object {\"Strata\": {\"Qos\": {...}}}");
		return -1;
	}
	json_object_foreach(strata, k, v) {
		if (strcmp(k, "Qos")) {
			bad(j, "Base.1.8.PropertyUnknown", "'Oem.Strata.%s' is not a property (Qos)", k);
			return -1;
		}
	}
	qos = json_object_get(strata, "Qos");
	if (!qos)
		return 0;
	if (!json_is_object(qos)) {
		bad(j, "Base.1.8.PropertyValueTypeError",
		    "'Oem.Strata.Qos' must be an object such as {\"BandwidthMBps\": 20, \"Iops\": 500}");
		return -1;
	}
	json_object_foreach(qos, k, v) {
		if (strcmp(k, "BandwidthMBps") == 0) {
			if (get_cap(j, v, k, "MiB/s", QOS_MBPS_MAX, &j->req.qos_mbps))
				return -1;
		} else if (strcmp(k, "Iops") == 0) {
			if (get_cap(j, v, k, "chunk operations/s", QOS_IOPS_MAX, &j->req.qos_iops))
				return -1;
		} else {
			bad(j, "Base.1.8.PropertyUnknown",
			    "'Oem.Strata.Qos.%s' is not a property (BandwidthMBps, Iops)", k);
			return -1;
		}
	}
	return 0;
}

/* Reads a compose request into j->req; on a fault j->http is 400. */
static void parse_compose(struct job *j, const char *text, size_t len)
{
	json_error_t jerr;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr), *v;
	struct comp *r = &j->req;
	const char *k;

	memset(r, 0, sizeof(*r));
	snprintf(r->tenant, sizeof(r->tenant), "default");
	r->owner_uid = r->owner_gid = TOKEN_NOBODY;
	if (!json_is_object(o)) {
		if (o)
			bad(j, "Base.1.8.MalformedJSON", "the body must be a JSON object");
		else
			bad(j, "Base.1.8.MalformedJSON", "the body is not JSON: %s (line %d)",
			    jerr.text, jerr.line);
		goto out;
	}
	json_object_foreach(o, k, v) {
		if (strcmp(k, "Name") == 0) {
			if (!json_is_string(v) || !name_ok(json_string_value(v), COMP_NAME_MAX)) {
				bad(j, "Base.1.8.PropertyValueFormatError",
				    "'Name' must be 1..%d letters, digits, '.', '_' or '-'", COMP_NAME_MAX);
				goto out;
			}
			snprintf(r->name, sizeof(r->name), "%s", json_string_value(v));
		} else if (strcmp(k, "Tenant") == 0) {
			if (!json_is_string(v) || !name_ok(json_string_value(v), TOKEN_TENANT_MAX)) {
				bad(j, "Base.1.8.PropertyValueFormatError",
				    "'Tenant' must be 1..%d letters, digits, '.', '_' or '-'",
				    TOKEN_TENANT_MAX);
				goto out;
			}
			snprintf(r->tenant, sizeof(r->tenant), "%s", json_string_value(v));
		} else if (strcmp(k, "Gpus") == 0) {
			if (get_gpus(j, v))
				goto out;
		} else if (strcmp(k, "Storage") == 0) {
			if (get_size(j, v, "Storage", &r->rq.storage))
				goto out;
		} else if (strcmp(k, "Memory") == 0) {
			if (get_size(j, v, "Memory", &r->rq.memory))
				goto out;
		} else if (strcmp(k, "TtlSeconds") == 0) {
			if (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > TTL_MAX_S) {
				bad(j, "Base.1.8.PropertyValueOutOfRange",
				    "'TtlSeconds' must be an integer of seconds in 0..%lld (0: none)",
				    (long long)TTL_MAX_S);
				goto out;
			}
			r->expires = json_integer_value(v);
		} else if (strcmp(k, "Owner") == 0) {
			if (get_owner(j, v))
				goto out;
		} else if (strcmp(k, "Paths") == 0) {
			if (get_paths(j, v))
				goto out;
		} else if (strcmp(k, "Retain") == 0) {
			if (!json_is_boolean(v)) {
				bad(j, "Base.1.8.PropertyValueTypeError", "'Retain' must be true or false");
				goto out;
			}
			r->retain = json_is_true(v);
		} else if (strcmp(k, "Oem") == 0) {
			if (get_oem(j, v))
				goto out;
		} else {
			bad(j, "Base.1.8.PropertyUnknown",
			    "'%s' is not a property of a composition request (Name, Tenant, Owner, Gpus, Storage, Memory, Paths, TtlSeconds, Retain, Oem)",
			    k);
			goto out;
		}
	}
	if (r->rq.nids && ((r->rq.gpus && r->rq.gpus != r->rq.nids) || r->rq.model[0] ||
			   r->rq.same_node || r->rq.zone[0] || r->rq.same_zone))
		bad(j, "Base.1.8.PropertyValueConflict",
		    "'Gpus.Ids' names the GPUs: give no 'Count' (or the same number), 'Model', 'SameNode', 'Zone' or 'SameZone'");
	else if (r->rq.nids)
		r->rq.gpus = r->rq.nids;
	else if ((r->rq.model[0] || r->rq.zone[0] || r->rq.same_zone) && !r->rq.gpus)
		bad(j, "Base.1.8.PropertyValueConflict",
		    "'Gpus.%s' is given without 'Gpus.Count'",
		    r->rq.model[0] ? "Model" : r->rq.zone[0] ? "Zone" : "SameZone");
	else if (!r->rq.gpus && !r->rq.storage && !r->rq.memory)
		bad(j, "Base.1.8.PropertyMissing",
		    "a composition asks for at least one of Gpus.Count, Storage.Size, Memory.Size");
	else if ((r->qos_mbps || r->qos_iops) && !r->rq.storage && !r->npaths)
		bad(j, "Base.1.8.PropertyValueConflict",
		    "'Oem.Strata.Qos' caps the credential's storage traffic: ask for 'Storage' or 'Paths' too");
out:
	json_decref(o);
}

/* "?Since=SECONDS" (since the epoch, 0..now) of a usage request; absent:
 * 0, every composition kept. */
static void parse_since(struct job *j, const char *v)
{
	char *end;
	long long s;

	if (!v)
		return;
	errno = 0;
	s = strtoll(v, &end, 10);
	if (!*v || *end || errno || s < 0 || s > (long long)time(NULL)) {
		bad(j, "Base.1.8.QueryParameterValueFormatError",
		    "'Since' must be seconds since the epoch, not in the future (got '%.40s')", v);
		return;
	}
	j->since = s;
}

/* The If-Match header of a DELETE or an action, kept for the owner
 * thread (rf_if_match); one longer than we keep is refused. */
static void read_if_match(struct job *j, const char *v)
{
	if (!v)
		return;
	if (!*v || strlen(v) >= sizeof(j->if_match)) {
		bad(j, "Base.1.8.HeaderInvalid",
		    "'If-Match' must be \"*\" or 1..%zu bytes of entity tags such as \"3\"",
		    sizeof(j->if_match) - 1);
		return;
	}
	snprintf(j->if_match, sizeof(j->if_match), "%s", v);
}

/* Checks "Authorization: Bearer TOKEN": an admin token of this cluster,
 * not expired, not revoked. 0, or j holds the refusal. */
static int authorize(struct composer *c, struct MHD_Connection *conn, struct job *j)
{
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	struct token_claims cl;
	char err[256] = "";
	int rc;

	j->http = 401;
	j->msg_id = "Base.1.8.NoValidSession";
	if (!h || strncasecmp(h, "Bearer ", 7) != 0) {
		snprintf(j->msg, sizeof(j->msg),
			 "no credential: send 'Authorization: Bearer TOKEN' with an admin token of the cluster");
		return -1;
	}
	rc = token_verify(c->key, h + 7, &cl, err, sizeof(err));
	if (rc) {
		snprintf(j->msg, sizeof(j->msg), "the token is refused: %s",
			 rc == -EKEYREJECTED ? "not signed by this cluster's key" : err);
		return -1;
	}
	if (cl.exp && cl.exp <= (int64_t)time(NULL)) {
		snprintf(j->msg, sizeof(j->msg), "the token %s has expired", cl.id);
		return -1;
	}
	if (net_revoked(cl.id)) {
		snprintf(j->msg, sizeof(j->msg), "the token %s has been revoked", cl.id);
		return -1;
	}
	if (!(cl.flags & TOKEN_F_ADMIN)) {
		j->http = 403;
		j->msg_id = "Base.1.8.InsufficientPrivilege";
		snprintf(j->msg, sizeof(j->msg),
			 "token %s (tenant '%s') is not an admin token: composing needs one", cl.id,
			 cl.tenant);
		return -1;
	}
	j->http = 0;
	return 0;
}

/* The route of url and method, into j; false: j holds 404 or 405. */
static bool route(const char *url, const char *method, struct job *j)
{
	static const struct {
		const char *prefix;
		enum job_kind get, post, del;
		bool has_id;
	} routes[] = {
		{ RF_SERVICE, JOB_SERVICE, 0, 0, false },
		{ RF_BLOCKS, JOB_BLOCKS, 0, 0, false },
		{ RF_BLOCKS "/", JOB_BLOCK, 0, 0, true },
		{ RF_ZONES, JOB_ZONES, 0, 0, false },
		{ RF_ZONES "/", JOB_ZONE, 0, 0, true },
		{ RF_SYSTEMS, JOB_SYSTEMS, JOB_COMPOSE, 0, false },
		{ RF_SYSTEMS "/", JOB_SYSTEM, 0, JOB_DECOMPOSE, true },
		{ RF_USAGE, JOB_USAGE, 0, 0, false },
		{ RF_STORAGE, JOB_STORAGE_SERVICES, 0, 0, false },
		{ RF_STORAGE "/", JOB_STORAGE_SERVICE, 0, 0, true },
		{ RF_VOLUMES, JOB_VOLUMES, 0, 0, false },
		{ RF_VOLUMES "/", JOB_VOLUME, 0, 0, true },
	};
	char path[256];
	size_t len = strlen(url), rl = strlen(RF_RECOMPOSE), sl = strlen(RF_SYSTEMS "/");

	if (len >= sizeof(path)) {
		bad(j, "Base.1.8.ResourceMissingAtURI", "no resource at this URI");
		j->http = 404;
		return false;
	}
	memcpy(path, url, len + 1);
	while (len > 1 && path[len - 1] == '/')
		path[--len] = 0;
	/* Systems/{id}/Actions/Oem/Strata.Recompose: POST only. */
	if (len > sl + rl && strcmp(path + len - rl, RF_RECOMPOSE) == 0 &&
	    strncmp(path, RF_SYSTEMS "/", sl) == 0) {
		const char *id = path + sl;

		path[len - rl] = 0;
		if (strchr(id, '/') || strlen(id) >= sizeof(j->id)) {
			path[len - rl] = RF_RECOMPOSE[0];
			goto missing;
		}
		snprintf(j->id, sizeof(j->id), "%s", id);
		if (strcmp(method, "POST")) {
			j->http = 405;
			j->msg_id = "Base.1.8.OperationNotAllowed";
			snprintf(j->msg, sizeof(j->msg), "%s is not allowed on an action (POST it)", method);
			return false;
		}
		j->kind = JOB_RECOMPOSE;
		return true;
	}
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		size_t pl = strlen(routes[i].prefix);
		const char *id = path + pl;

		if (routes[i].has_id ? strncmp(path, routes[i].prefix, pl) || !*id || strchr(id, '/') ||
					       strlen(id) >= sizeof(j->id)
				     : strcmp(path, routes[i].prefix))
			continue;
		if (routes[i].has_id)
			snprintf(j->id, sizeof(j->id), "%s", id);
		if (strcmp(method, "GET") == 0) {
			j->kind = routes[i].get;
		} else if (strcmp(method, "POST") == 0 && routes[i].post) {
			j->kind = routes[i].post;
		} else if (strcmp(method, "DELETE") == 0 && routes[i].del) {
			j->kind = routes[i].del;
		} else {
			j->http = 405;
			j->msg_id = "Base.1.8.OperationNotAllowed";
			snprintf(j->msg, sizeof(j->msg), "%s is not allowed on '%s'", method, path);
			return false;
		}
		return true;
	}
missing:
	j->http = 404;
	j->msg_id = "Base.1.8.ResourceMissingAtURI";
	snprintf(j->msg, sizeof(j->msg), "no resource at '%s' (the API is under %s)", path, RF);
	return false;
}

static json_t *error_body(const struct job *j)
{
	const char *id = j->msg_id ? j->msg_id : "Base.1.8.GeneralError";
	json_t *b;

	/* Refused by a composer that does not lead: the leader's API
	 * address, for clients that follow (strata compose). */
	if (j->msg_id && !strcmp(j->msg_id, COMPOSER_NOT_SERVING)) {
		b = json_pack("{s:{s:s, s:s, s:[{s:s, s:s, s:s, s:[s], s:s, s:s}]}}", "error", "code",
			      id, "message", j->msg, "@Message.ExtendedInfo", "@odata.type",
			      "#Message.v1_1_1.Message", "MessageId", id, "Message", j->msg,
			      "MessageArgs", j->leader, "Severity", "Critical", "Resolution",
			      "Send the request to the composer named in MessageArgs.");
		return b;
	}
	return json_pack("{s:{s:s, s:s, s:[{s:s, s:s, s:s, s:s, s:s}]}}", "error", "code", id,
			 "message", j->msg, "@Message.ExtendedInfo", "@odata.type",
			 "#Message.v1_1_1.Message", "MessageId", id, "Message", j->msg, "Severity",
			 j->http >= 500 ? "Critical" : "Warning", "Resolution",
			 j->http == 409 ? "Release compositions or add resources, then retry."
			 : j->http == 412 ? "GET the resource for its current ETag, then retry."
			 : j->http >= 500 ? "Retry the request; see the daemon's log."
					  : "Correct the request and resubmit it (docs/composer.md).");
}

static enum MHD_Result respond(struct MHD_Connection *conn, struct job *j)
{
	json_t *body = j->msg[0] || !j->body ? error_body(j) : json_incref(j->body);
	char *text = json_dumps(body, JSON_COMPACT);
	struct MHD_Response *resp;
	enum MHD_Result ret;

	json_decref(body);
	if (!text)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "OData-Version", "4.0");
	if (j->location[0])
		MHD_add_response_header(resp, "Location", j->location);
	if (j->leader[0])
		MHD_add_response_header(resp, "X-Strata-Composer-Leader", j->leader);
	if (!j->msg[0] && json_is_string(json_object_get(j->body, "@odata.etag")))
		MHD_add_response_header(resp, "ETag",
					json_string_value(json_object_get(j->body, "@odata.etag")));
	ret = MHD_queue_response(conn, j->http ? j->http : 500, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* The portal is served by the composer that leads; another one sends the
 * browser there (307) when it knows where, else serves it (its API calls
 * are then answered 503 until a composer leads). */
static int portal_at_leader(struct composer *c, struct MHD_Connection *conn, const char *url,
			    const char *method)
{
	char api[CFG_STR_MAX], to[CFG_STR_MAX + 64];
	struct MHD_Response *resp;
	int ret;

	if (composer_leader(c, api, sizeof(api)) || !api[0])
		return portal_serve(conn, url, method);
	snprintf(to, sizeof(to), "http://%s%s", api, url);
	resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, "Location", to);
	MHD_add_response_header(resp, "X-Strata-Composer-Leader", api);
	ret = MHD_queue_response(conn, 307, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result on_http(void *cls, struct MHD_Connection *conn, const char *url,
			       const char *method, const char *version, const char *upload,
			       size_t *upload_size, void **req_cls)
{
	struct http_server *h = cls;
	struct http_req *r = *req_cls;
	struct job *j;
	enum MHD_Result ret;

	(void)version;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		bbuf_init(&r->body);
		*req_cls = r;
		return MHD_YES;
	}
	if (*upload_size) {
		if (r->body.len + *upload_size > COMPOSER_BODY_MAX)
			r->too_big = true;
		else if (bbuf_append(&r->body, upload, *upload_size))
			r->too_big = true;
		*upload_size = 0;
		return MHD_YES;
	}
	if (portal_is(url))
		return (enum MHD_Result)portal_at_leader(h->c, conn, url, method);
	j = calloc(1, sizeof(*j));
	if (!j)
		return MHD_NO;
	if (strcmp(url, RF) == 0 || strcmp(url, RF "/") == 0) {
		if (strcmp(method, "GET") == 0) {
			j->http = 200;
			j->body = service_root();
		} else {
			j->http = 405;
			j->msg_id = "Base.1.8.OperationNotAllowed";
			snprintf(j->msg, sizeof(j->msg), "%s is not allowed on '%s'", method, RF);
		}
	} else if (route(url, method, j) && !authorize(h->c, conn, j)) {
		if (r->too_big)
			bad(j, "Base.1.8.MalformedJSON", "the body is larger than %u bytes",
			    COMPOSER_BODY_MAX);
		else if (j->kind == JOB_COMPOSE)
			parse_compose(j, (const char *)r->body.buf, r->body.len);
		else if (j->kind == JOB_DECOMPOSE || j->kind == JOB_RECOMPOSE)
			read_if_match(j, MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
								     "If-Match"));
		else if (j->kind == JOB_USAGE)
			parse_since(j, MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
								   "Since"));
		if (!j->msg[0])
			composer_run(h->c, j);
	}
	ret = respond(conn, j);
	json_decref(j->body);
	free(j);
	return ret;
}

static void on_done(void *cls, struct MHD_Connection *conn, void **req_cls,
		    enum MHD_RequestTerminationCode toe)
{
	struct http_req *r = *req_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (r) {
		bbuf_release(&r->body);
		free(r);
		*req_cls = NULL;
	}
}

int http_start(struct composer *c, const char *listen, struct http_server **out)
{
	struct http_server *h = calloc(1, sizeof(*h));
	int port;

	if (!h)
		return -ENOMEM;
	h->c = c;
	/* A thread per connection: each may wait for the owner thread. */
	port = http_listen(listen, MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
				   MHD_USE_ERROR_LOG, 30, on_http, on_done, h, &h->d);
	if (port < 0) {
		free(h);
		return port;
	}
	*out = h;
	return port;
}

void http_stop(struct http_server *h)
{
	if (!h)
		return;
	MHD_stop_daemon(h->d);
	free(h);
}
