/* The mgmt service of stratad (see mgmt_service.c). */
#ifndef STRATA_MGMT_SERVICE_H
#define STRATA_MGMT_SERVICE_H

#include "common/service.h"

extern const struct service_def mgmt_service;

/*
 * Whether the mgmt of this process leads the control nodes, for the
 * services beside it that follow the leader (the composer): 1 when it
 * leads (always with mgmt's own SQLite store), 0 when it follows, with
 * leader (len bytes, not NULL) receiving the leader's address ("" while
 * unknown), -ENOENT when no mgmt runs in this process. term (may be
 * NULL) gets the lease term it leads in (1 on SQLite), 0 when it does not
 * lead: what the services beside it fence their writes with
 * (comp_store_fence). As of mgmt's last lease renewal (a third of
 * mgmt.leader_lease). Any thread.
 */
int mgmt_service_leader(char *leader, size_t len, uint64_t *term);

#endif
