/*
 * Bytes moved per tenant (docs/composer.md, "Usage"): what each tenant's
 * clients read from and wrote to this storage daemon, counted where a
 * request is charged for QoS (a write at the chain's head, a read at the
 * replica that serves it; replication forwards are not counted again).
 * Cumulative since the daemon started; the composer samples the counts
 * from every storage daemon's STATUS and keeps the deltas.
 *
 * A fixed table of METER_SLOTS tenants: a slot is claimed under the lock
 * once, then counted with atomic adds, so counting takes no lock. Bytes
 * of tenants past the table go to `overflow` (said in STATUS).
 * Thread-safe.
 */
#ifndef STRATA_STORAGE_METER_H
#define STRATA_STORAGE_METER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/token.h"

#define METER_SLOTS 256u

struct meter_slot {
	char tenant[TOKEN_TENANT_MAX + 1];
	uint32_t used;			/* set once, with release order */
	uint64_t read, written;		/* bytes, atomic */
};

struct meter {
	pthread_mutex_t lock;		/* claiming a slot */
	struct meter_slot slots[METER_SLOTS];
	uint64_t overflow;		/* bytes of tenants the table had no room for */
};

void meter_init(struct meter *m);
void meter_release(struct meter *m);

/* Counts bytes read (write false) or written for tenant; "" counts
 * nothing (a credential with no tenant). Never blocks but to claim a
 * tenant's slot the first time. */
void meter_add(struct meter *m, const char *tenant, uint64_t bytes, bool write);

/* Calls fn for each tenant counted so far. */
void meter_each(struct meter *m, void (*fn)(void *arg, const char *tenant, uint64_t read,
					     uint64_t written), void *arg);

#endif
