/*
 * ResourceZones (docs/composer.md, "ResourceZones"): a zone per
 * `compute.zone` of the compute nodes in the inventory, each with its
 * nodes' GPU blocks and the shared pools (storage, memory), which every
 * zone can compose with. Bodies built on the owner thread, from the
 * inventory the last refresh read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "composer/composer_int.h"

#define RF_ZONES "/redfish/v1/CompositionService/ResourceZones"
#define RF_BLOCKS "/redfish/v1/CompositionService/ResourceBlocks"

static json_t *block_ref(const char *id)
{
	char uri[128];

	snprintf(uri, sizeof(uri), RF_BLOCKS "/%s", id);
	return json_pack("{s:s}", "@odata.id", uri);
}

/* The zone called name; NULL on ENOMEM. */
static json_t *zone_body(struct composer *c, const char *name)
{
	json_t *blocks = json_array(), *nodes = json_array(), *models = json_object(), *o;
	uint32_t total = 0, nfree = 0, up = 0;
	char uri[128], id[64];

	for (uint32_t i = 0; i < c->nnodes; i++) {
		if (strcmp(c->nodes[i].zone, name) == 0) {
			json_array_append_new(nodes, json_integer(c->nodes[i].node));
			up += c->nodes[i].up;
		}
	}
	for (uint32_t i = 0; i < c->ngpus; i++) {
		const struct alloc_gpu *g = &c->gpus[i];
		bool fits = alloc_gpu_fits(g, "");

		if (strcmp(g->zone, name))
			continue;
		snprintf(id, sizeof(id), "gpu-%u-%u", g->node, g->index);
		json_array_append_new(blocks, block_ref(id));
		rf_count_model(models, g->model, fits);
		total++;
		nfree += fits;
	}
	json_array_append_new(blocks, block_ref("storage"));
	json_array_append_new(blocks, block_ref("memory"));
	snprintf(uri, sizeof(uri), RF_ZONES "/%s", name);
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:o}, s:{s:s, s:s},"
		      " s:{s:{s:o, s:i, s:{s:i, s:i, s:o}}}}",
		      "@odata.id", uri, "@odata.type", "#Zone.v1_6_0.Zone", "Id", name, "Name", name,
		      "ZoneType", "ZoneOfResourceBlocks", "Links", "ResourceBlocks", blocks, "Status",
		      "State", up ? "Enabled" : "UnavailableOffline", "Health", up ? "OK" : "Critical",
		      "Oem", "Strata", "Nodes", nodes, "NodesUp", (int)up, "Gpus", "Total", (int)total,
		      "Free", (int)nfree, "Models", models);
	return o;
}

json_t *rf_zone(struct composer *c, const char *id)
{
	for (uint32_t i = 0; i < c->nnodes; i++)
		if (strcmp(c->nodes[i].zone, id) == 0)
			return zone_body(c, id);
	return NULL;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *rf_zones(struct composer *c)
{
	const char **names = calloc(c->nnodes ? c->nnodes : 1, sizeof(*names));
	json_t *members = json_array(), *full = json_array(), *o = NULL;
	uint32_t n = 0;
	char uri[128];

	if (!names || !members || !full)
		goto out;
	for (uint32_t i = 0; i < c->nnodes; i++) {
		uint32_t k;

		for (k = 0; k < n && strcmp(names[k], c->nodes[i].zone); k++)
			;
		if (k == n)
			names[n++] = c->nodes[i].zone;
	}
	qsort(names, n, sizeof(*names), cmp_str);
	for (uint32_t k = 0; k < n; k++) {
		snprintf(uri, sizeof(uri), RF_ZONES "/%s", names[k]);
		json_array_append_new(members, json_pack("{s:s}", "@odata.id", uri));
		json_array_append_new(full, zone_body(c, names[k]));
	}
	o = json_pack("{s:s, s:s, s:s, s:I, s:O, s:{s:{s:O}}}", "@odata.id", RF_ZONES,
		      "@odata.type", "#ZoneCollection.ZoneCollection", "Name", "Resource zones",
		      "Members@odata.count", (json_int_t)n, "Members", members, "Oem", "Strata",
		      "Zones", full);
out:
	json_decref(members);
	json_decref(full);
	free(names);
	return o;
}
