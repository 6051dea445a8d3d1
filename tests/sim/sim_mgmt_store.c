/*
 * mgmt_store.h in memory: one database per path, kept for the whole run,
 * so that an mgmt service stopped and started again loads the last map it
 * saved and the incarnations it recorded, as it would from SQLite. A save
 * is atomic and durable when it returns (as the real one is, in one
 * transaction); the scenario is told of every save (sim_on_map_saved), to
 * check replicas against the membership mgmt decided.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cluster_map.h"
#include "mgmt/mgmt_store.h"
#include "sim.h"
#include "strata/errors.h"

struct inc_ent {
	uint32_t node;
	uint64_t inc;
};

struct db {
	struct db *next;
	char path[256];
	bool has_map;
	struct cluster_map map;
	struct inc_ent *incs;
	uint32_t nincs;
};

struct mgmt_store {
	struct db *db;
};

static struct db *g_dbs;

void sim_mgmt_stores_reset(void)
{
	sim_mgmt_stores_release();
}

void sim_mgmt_stores_release(void)
{
	while (g_dbs) {
		struct db *d = g_dbs;

		g_dbs = d->next;
		cm_release(&d->map);
		free(d->incs);
		free(d);
	}
}

static struct db *db_find(const char *path)
{
	for (struct db *d = g_dbs; d; d = d->next) {
		if (strcmp(d->path, path) == 0)
			return d;
	}
	return NULL;
}

const struct cluster_map *sim_mgmt_store_map(const char *path)
{
	struct db *d = db_find(path);

	return d && d->has_map ? &d->map : NULL;
}

int mgmt_store_open(const char *path, struct mgmt_store **out)
{
	struct db *d = db_find(path);
	struct mgmt_store *s;

	if (strlen(path) >= sizeof(d->path))
		return -EIO;
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d)
			return -ENOMEM;
		snprintf(d->path, sizeof(d->path), "%s", path);
		cm_init(&d->map);
		d->next = g_dbs;
		g_dbs = d;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->db = d;
	*out = s;
	return 0;
}

void mgmt_store_close(struct mgmt_store *s)
{
	free(s);
}

int mgmt_store_save(struct mgmt_store *s, const struct cluster_map *m)
{
	struct cluster_map copy;

	if (cm_copy(&copy, m))
		return -EIO;
	cm_release(&s->db->map);
	s->db->map = copy;
	s->db->has_map = true;
	sim_on_map_saved(s->db->path, &s->db->map);
	return 0;
}

int mgmt_store_load(struct mgmt_store *s, struct cluster_map *out)
{
	if (!s->db->has_map) {
		cm_init(out);
		return 0;
	}
	if (cm_copy(out, &s->db->map))
		return -ENOMEM;
	if (cm_validate(out)) {
		cm_release(out);
		return STRATA_EBADMSG;
	}
	return 0;
}

int mgmt_store_get_incarnation(struct mgmt_store *s, uint32_t node, uint64_t *inc)
{
	for (uint32_t i = 0; i < s->db->nincs; i++) {
		if (s->db->incs[i].node == node) {
			*inc = s->db->incs[i].inc;
			return 0;
		}
	}
	return -ENOENT;
}

int mgmt_store_set_incarnation(struct mgmt_store *s, uint32_t node, uint64_t inc)
{
	struct inc_ent *v;

	for (uint32_t i = 0; i < s->db->nincs; i++) {
		if (s->db->incs[i].node == node) {
			s->db->incs[i].inc = inc;
			return 0;
		}
	}
	v = realloc(s->db->incs, (s->db->nincs + 1) * sizeof(*v));
	if (!v)
		return -EIO;
	v[s->db->nincs].node = node;
	v[s->db->nincs].inc = inc;
	s->db->incs = v;
	s->db->nincs++;
	return 0;
}

/* The token registry: no scenario creates tokens (credentials are not
 * simulated, sim_net.c), so it stays empty. */
int mgmt_store_token_add(struct mgmt_store *s, const struct mgmt_token *t, const char *claims)
{
	(void)s;
	(void)t;
	(void)claims;
	return -EIO;
}

int mgmt_store_token_revoke(struct mgmt_store *s, const char *id, int64_t when)
{
	(void)s;
	(void)id;
	(void)when;
	return -ENOENT;
}

int mgmt_store_token_revoke_offline(struct mgmt_store *s, const char *id, int64_t exp,
				    int64_t when)
{
	(void)s;
	(void)id;
	(void)exp;
	(void)when;
	return -EIO;
}

int mgmt_store_token_list(struct mgmt_store *s, uint32_t max, struct mgmt_token **out,
			  uint32_t *n, uint32_t *total)
{
	(void)s;
	(void)max;
	*out = NULL;
	*n = *total = 0;
	return 0;
}

int mgmt_store_revoked(struct mgmt_store *s, int64_t now, struct cluster_map *m)
{
	(void)s;
	(void)now;
	m->nrevoked = 0;
	return 0;
}

/* The scenarios never remove a node (strata node remove): no node is
 * recorded as removed, and recording one fails as a full disk would. */
int mgmt_store_set_removed(struct mgmt_store *s, uint32_t node, int64_t when)
{
	(void)s;
	(void)node;
	(void)when;
	return -EIO;
}

int mgmt_store_get_removed(struct mgmt_store *s, uint32_t node, int64_t *when)
{
	(void)s;
	(void)node;
	(void)when;
	return -ENOENT;
}

/* One mgmt per simulated cluster: it leads, and nothing is shared. */
int mgmt_store_open_pg(const char *conninfo, const char *passfile, struct mgmt_store **out)
{
	(void)conninfo;
	(void)passfile;
	*out = NULL;
	return -EIO;
}

int mgmt_store_check_spec(const char *spec, const char *passfile, char *err, size_t errlen)
{
	(void)passfile;
	if (spec[0]) {
		snprintf(err, errlen, "key 'mgmt.store': no PostgreSQL in the simulation");
		return -EINVAL;
	}
	return 0;
}

bool mgmt_store_shared(const struct mgmt_store *s)
{
	(void)s;
	return false;
}

int mgmt_store_lease(struct mgmt_store *s, const char *holder, const char *addr,
		     uint32_t ttl_ms, struct mgmt_lease *out)
{
	(void)s;
	(void)holder;
	memset(out, 0, sizeof(*out));
	out->leader = true;
	out->term = 1;
	snprintf(out->addr, sizeof(out->addr), "%s", addr);
	out->left_ms = ttl_ms;
	return 0;
}

int mgmt_store_resign(struct mgmt_store *s, const char *holder)
{
	(void)s;
	(void)holder;
	return 0;
}

void mgmt_store_fence(struct mgmt_store *s, uint64_t term)
{
	(void)s;
	(void)term;
}
