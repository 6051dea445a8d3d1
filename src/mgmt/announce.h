/*
 * How a meta or mem service makes itself known: it announces its kind,
 * node id and address to mgmt (MGMT_ANNOUNCE), then again every heartbeat
 * interval, which renews its lease. mgmt lists it in the cluster map
 * (common/cluster_map.h, cm_service) while the lease holds; clients find
 * the service there. An announcement that fails is retried at the next
 * interval; mgmt being away only delays the entry.
 *
 * The lease mgmt answers with names its map version; when it differs from
 * the last map fetched, the announcer fetches the map and applies its
 * revoked tokens (net_revoked_update), so a service that holds no map of
 * its own (mem) refuses a revoked token within one heartbeat of the
 * revocation.
 *
 * The announcer runs on env->reactors[0] with a connection of its own.
 */
#ifndef STRATA_MGMT_ANNOUNCE_H
#define STRATA_MGMT_ANNOUNCE_H

#include <stdint.h>

#include "common/cluster_map.h"
#include "common/service.h"

struct announcer;

/* Starts announcing service kind (CM_SVC_*) at env->addr as node
 * env->node_id to env->mgmt_addr. Returns 0 and *out, or a negative
 * error. */
int announce_start(const struct service_env *env, uint32_t kind, struct announcer **out);
/* Stops announcing (mgmt then lets the lease run out) and frees a. Not on
 * env->reactors[0]. a may be NULL. */
void announce_stop(struct announcer *a);

#endif
