/*
 * The composer's store (comp_store.h): the backend a spec names, the calls
 * that go to it, and the row forms both backends share.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/pg_conn.h"
#include "composer/comp_store.h"

struct comp_store {
	const struct comp_store_ops *ops;
	void *impl;
};

const char *comp_state_name(uint32_t state)
{
	static const char *const names[] = { "Requested", "Allocating", "Composed", "Degraded",
					     "Decomposing", "Released", "Failed" };

	return state <= COMP_STATE_LAST ? names[state] : "?";
}

bool comp_state_holds(uint32_t state)
{
	return state == COMP_ALLOCATING || state == COMP_COMPOSED || state == COMP_DEGRADED ||
	       state == COMP_DECOMPOSING;
}

static int wrap(int rc, const struct comp_store_ops *ops, void *impl, struct comp_store **out)
{
	struct comp_store *s;

	if (rc)
		return rc;
	s = malloc(sizeof(*s));
	if (!s) {
		ops->close(impl);
		return -ENOMEM;
	}
	s->ops = ops;
	s->impl = impl;
	*out = s;
	return 0;
}

int comp_store_open_pg(const char *conninfo, const char *passfile, struct comp_store **out)
{
	const struct comp_store_ops *ops = NULL;
	void *impl = NULL;
	int rc = comp_store_pg_open(conninfo, passfile, &ops, &impl);

	*out = NULL;
	return wrap(rc, ops, impl, out);
}

int comp_store_open(const char *spec, struct comp_store **out)
{
	const struct comp_store_ops *ops = NULL;
	void *impl = NULL;
	int rc;

	*out = NULL;
	if (pg_conn_is_uri(spec))
		return comp_store_open_pg(spec, NULL, out);
	rc = comp_store_sqlite_open(spec, &ops, &impl);
	return wrap(rc, ops, impl, out);
}

int comp_store_check_spec(const char *spec, const char *passfile, char *err, size_t errlen)
{
	return pg_conn_check_store_keys("composer", spec, passfile, "sqlite",
					"leave it empty to follow mgmt.store, or give 'sqlite'"
					" (DATA/composer.db) or a postgresql:// URI",
					" (when it follows mgmt.store, mgmt.store_passfile is used)",
					err, errlen);
}

void comp_store_close(struct comp_store *s)
{
	if (!s)
		return;
	s->ops->close(s->impl);
	free(s);
}

int comp_store_load(struct comp_store *s, struct comp **out, uint32_t *n)
{
	return s->ops->load(s->impl, out, n);
}

int comp_store_put(struct comp_store *s, struct comp *c)
{
	int rc = s->ops->put(s->impl, c, c->generation + 1);

	if (!rc)
		c->generation++;
	return rc;
}

void comp_store_fence(struct comp_store *s, uint64_t term)
{
	if (s->ops->fence)
		s->ops->fence(s->impl, term);
}

int comp_store_add_bytes(struct comp_store *s, int64_t at, const char *tenant, uint64_t read,
			 uint64_t written)
{
	return s->ops->add_bytes(s->impl, at, tenant, read, written);
}

int comp_store_sum_bytes(struct comp_store *s, int64_t since, int64_t until,
			 void (*fn)(void *arg, const char *tenant, uint64_t read,
				    uint64_t written), void *arg)
{
	return s->ops->sum_bytes(s->impl, since, until, fn, arg);
}

/* ---- the row forms ---- */

void comp_gpus_text(const struct comp *c, char *out, size_t len)
{
	size_t o = 0;

	out[0] = 0;
	for (uint32_t i = 0; i < c->ngpus && o < len; i++)
		o += (size_t)snprintf(out + o, len - o, "%s%u:%u:%s", i ? ";" : "", c->gpus[i].node,
				      c->gpus[i].index, c->gpus[i].model);
}

void comp_gpus_parse(const char *text, struct comp *c)
{
	const char *p = text;

	c->ngpus = 0;
	while (p && *p && c->ngpus < ALLOC_MAX_GPUS) {
		struct comp_gpu *g = &c->gpus[c->ngpus];
		const char *semi = strchr(p, ';');
		int used = 0;

		if (sscanf(p, "%u:%u:%n", &g->node, &g->index, &used) == 2 && used > 0) {
			size_t len = semi ? (size_t)(semi - p - used) : strlen(p + used);

			snprintf(g->model, sizeof(g->model), "%.*s", (int)len, p + used);
			c->ngpus++;
		}
		p = semi ? semi + 1 : NULL;
	}
}

/* The token's own JSON form of the paths. */
char *comp_paths_text(const struct comp *c)
{
	json_t *a = json_array();
	char *text;

	for (uint32_t i = 0; a && i < c->npaths; i++)
		json_array_append_new(a, json_pack("{s:s, s:s}", "prefix", c->paths[i].prefix,
						   "access", c->paths[i].write ? "rw" : "r"));
	text = a ? json_dumps(a, JSON_COMPACT) : NULL;
	json_decref(a);
	return text;
}

int comp_paths_parse(const char *text, struct comp *c)
{
	json_t *a = text ? json_loads(text, 0, NULL) : NULL, *v;
	size_t i;
	int rc = 0;

	c->npaths = 0;
	if (!json_is_array(a) || json_array_size(a) > COMP_PATHS_MAX) {
		rc = -EINVAL;
		goto out;
	}
	json_array_foreach(a, i, v) {
		const char *p = json_string_value(json_object_get(v, "prefix"));
		const char *acc = json_string_value(json_object_get(v, "access"));

		if (!p || !acc || strlen(p) >= sizeof(c->paths[0].prefix) ||
		    (strcmp(acc, "r") && strcmp(acc, "rw"))) {
			c->npaths = 0;
			rc = -EINVAL;
			goto out;
		}
		snprintf(c->paths[c->npaths].prefix, sizeof(c->paths[0].prefix), "%s", p);
		c->paths[c->npaths++].write = !strcmp(acc, "rw");
	}
out:
	json_decref(a);
	return rc;
}
