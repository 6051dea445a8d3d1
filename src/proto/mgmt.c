/* The mgmt service's messages (mgmt.h), and the cluster map on the wire. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/mgmt.h"

PROTO_MSG_DEFINE(mg_target_info, MG_TARGET_INFO_FIELDS)
PROTO_MSG_DEFINE(mg_register, MG_REGISTER_FIELDS)
PROTO_MSG_DEFINE(mg_heartbeat, MG_HEARTBEAT_FIELDS)
PROTO_MSG_DEFINE(mg_lease, MG_LEASE_FIELDS)
PROTO_MSG_DEFINE(mg_announce, MG_ANNOUNCE_FIELDS)
PROTO_MSG_DEFINE(mg_since, MG_SINCE_FIELDS)
PROTO_MSG_DEFINE(cm_node_w, CM_NODE_W_FIELDS)
PROTO_MSG_DEFINE(cm_target_w, CM_TARGET_W_FIELDS)
PROTO_MSG_DEFINE(cm_member_w, CM_MEMBER_W_FIELDS)
PROTO_MSG_DEFINE(cm_chain_w, CM_CHAIN_W_FIELDS)
PROTO_MSG_DEFINE(cm_service_w, CM_SERVICE_W_FIELDS)
PROTO_MSG_DEFINE(cm_revoked_w, CM_REVOKED_W_FIELDS)
PROTO_MSG_DEFINE(cm_map_w, CM_MAP_W_FIELDS)
PROTO_MSG_DEFINE(mg_map, MG_MAP_FIELDS)
PROTO_MSG_DEFINE(mg_report, MG_REPORT_FIELDS)
PROTO_MSG_DEFINE(mg_admin, MG_ADMIN_FIELDS)
PROTO_MSG_DEFINE(mg_result, MG_RESULT_FIELDS)
PROTO_MSG_DEFINE(mg_token_create, MG_TOKEN_CREATE_FIELDS)
PROTO_MSG_DEFINE(mg_token, MG_TOKEN_FIELDS)
PROTO_MSG_DEFINE(mg_token_info, MG_TOKEN_INFO_FIELDS)
PROTO_MSG_DEFINE(mg_token_list, MG_TOKEN_LIST_FIELDS)
PROTO_MSG_DEFINE(mg_token_id, MG_TOKEN_ID_FIELDS)
PROTO_MSG_DEFINE(mg_rebalance, MG_REBALANCE_FIELDS)
PROTO_MSG_DEFINE(mg_move, MG_MOVE_FIELDS)
PROTO_MSG_DEFINE(mg_rebalance_state, MG_REBALANCE_STATE_FIELDS)
PROTO_OPS_DEFINE(mgmt, MGMT_OPS)

int cmap_to_wire(const struct cluster_map *m, struct cm_map_w *w)
{
	memset(w, 0, sizeof(*w));
	w->version = m->version;
	w->replication = m->replication;
	w->chain_table_len = m->chain_table_len;
	w->nodes = calloc(m->nnodes ? m->nnodes : 1, sizeof(*w->nodes));
	w->targets = calloc(m->ntargets ? m->ntargets : 1, sizeof(*w->targets));
	w->chains = calloc(m->nchains ? m->nchains : 1, sizeof(*w->chains));
	w->services = calloc(m->nservices ? m->nservices : 1, sizeof(*w->services));
	w->revoked = calloc(m->nrevoked ? m->nrevoked : 1, sizeof(*w->revoked));
	if (!w->nodes || !w->targets || !w->chains || !w->services || !w->revoked) {
		cm_map_w_release(w);
		return -ENOMEM;
	}
	w->nodes_n = m->nnodes;
	w->targets_n = m->ntargets;
	w->chains_n = m->nchains;
	w->services_n = m->nservices;
	w->revoked_n = m->nrevoked;
	for (uint32_t i = 0; i < m->nrevoked; i++)
		w->revoked[i].id = pstr_c(m->revoked[i]);
	for (uint32_t i = 0; i < m->nservices; i++) {
		const struct cm_service *s = &m->services[i];

		w->services[i] = (struct cm_service_w){ s->kind, s->node_id, pstr_c(s->addr),
							s->state };
	}
	for (uint32_t i = 0; i < m->nnodes; i++) {
		w->nodes[i].id = m->nodes[i].id;
		w->nodes[i].addr = pstr_c(m->nodes[i].addr);
		w->nodes[i].state = m->nodes[i].state;
	}
	for (uint32_t i = 0; i < m->ntargets; i++) {
		const struct cm_target *t = &m->targets[i];

		w->targets[i] = (struct cm_target_w){ t->id, t->node_id, t->capacity, t->used,
						      t->state, t->fs, t->avail, t->full };
	}
	for (uint32_t i = 0; i < m->nchains; i++) {
		const struct cm_chain *c = &m->chains[i];
		struct cm_chain_w *cw = &w->chains[i];

		cw->id = c->id;
		cw->version = c->version;
		cw->members = calloc(CM_CHAIN_SLOTS, sizeof(*cw->members));
		cw->out = calloc(CM_CHAIN_SLOTS, sizeof(*cw->out));
		if (!cw->members || !cw->out) {
			cm_map_w_release(w);
			return -ENOMEM;
		}
		cw->members_n = c->len;
		cw->out_n = c->nout;
		for (int k = 0; k < c->len; k++)
			cw->members[k] = (struct cm_member_w){ c->targets[k], c->states[k] };
		for (int k = 0; k < c->nout; k++)
			cw->out[k] = (struct cm_member_w){ c->out[k], c->out_states[k] };
	}
	return 0;
}

int cmap_from_wire(const struct cm_map_w *w, struct cluster_map *out)
{
	struct cluster_map m;
	int rc = -ENOMEM;

	cm_init(&m);
	if (cm_reserve(&m, w->nodes_n, w->targets_n, w->chains_n) ||
	    cm_reserve_services(&m, w->services_n) || cm_reserve_revoked(&m, w->revoked_n))
		goto fail;
	m.version = w->version;
	m.replication = w->replication;
	m.chain_table_len = w->chain_table_len;
	rc = STRATA_EBADMSG;
	for (uint32_t i = 0; i < w->nodes_n; i++) {
		struct cm_node *n = &m.nodes[m.nnodes++];

		memset(n, 0, sizeof(*n));
		n->id = w->nodes[i].id;
		n->state = w->nodes[i].state;
		if (pstr_copy(w->nodes[i].addr, n->addr, sizeof(n->addr)))
			goto fail;
	}
	for (uint32_t i = 0; i < w->targets_n; i++) {
		const struct cm_target_w *t = &w->targets[i];

		m.targets[m.ntargets++] = (struct cm_target){ t->id, t->node_id, t->capacity, t->used,
							      t->state, t->fs, t->avail, t->full };
	}
	for (uint32_t i = 0; i < w->chains_n; i++) {
		const struct cm_chain_w *cw = &w->chains[i];
		struct cm_chain *c = &m.chains[m.nchains++];

		memset(c, 0, sizeof(*c));
		c->id = cw->id;
		c->version = cw->version;
		if (cw->members_n + cw->out_n > CM_CHAIN_SLOTS)
			goto fail;
		c->len = (uint8_t)cw->members_n;
		c->nout = (uint8_t)cw->out_n;
		for (uint32_t k = 0; k < cw->members_n; k++) {
			c->targets[k] = cw->members[k].target;
			c->states[k] = cw->members[k].state;
		}
		for (uint32_t k = 0; k < cw->out_n; k++) {
			c->out[k] = cw->out[k].target;
			c->out_states[k] = cw->out[k].state;
		}
	}
	for (uint32_t i = 0; i < w->services_n; i++) {
		const struct cm_service_w *sw = &w->services[i];
		struct cm_service *s = &m.services[m.nservices++];

		memset(s, 0, sizeof(*s));
		s->kind = sw->kind;
		s->node_id = sw->node_id;
		s->state = sw->state;
		if (pstr_copy(sw->addr, s->addr, sizeof(s->addr)))
			goto fail;
	}
	for (uint32_t i = 0; i < w->revoked_n; i++) {
		if (pstr_copy(w->revoked[i].id, m.revoked[m.nrevoked++], sizeof(*m.revoked)))
			goto fail;
	}
	rc = cm_validate(&m);
	if (rc)
		goto fail;
	*out = m;
	return 0;
fail:
	cm_release(&m);
	cm_init(out);
	return rc;
}

int cmap_encode_since(const struct cluster_map *m, uint64_t since_version, struct bbuf *b)
{
	struct mg_map rep = { .version = m->version };
	struct cm_map_w w;
	int rc;

	if (since_version == m->version)
		return mg_map_encode(b, &rep);
	rc = cmap_to_wire(m, &w);
	if (rc)
		return rc;
	rep.maps = &w;
	rep.maps_n = 1;
	rc = mg_map_encode(b, &rep);
	cm_map_w_release(&w);
	return rc;
}

int cmap_decode_since(const void *body, uint32_t len, struct cluster_map *out, bool *changed)
{
	struct mg_map rep;
	int rc = mg_map_decode(body, len, &rep);

	*changed = false;
	if (rc)
		return rc;
	if (rep.maps_n) {
		rc = cmap_from_wire(&rep.maps[0], out);
		*changed = rc == 0;
	}
	mg_map_release(&rep);
	return rc;
}
