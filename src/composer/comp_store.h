/*
 * The composer's compositions and their GPU allocations, kept in SQLite
 * (DATA/composer.db, WAL), so that every composition survives a restart
 * of the composer (docs/composer.md, "State"). One writer: the composer's
 * owner thread. Each put is one transaction; the table of held GPUs has
 * the key (node, gpu), so the store itself refuses to give one GPU to two
 * compositions, whatever the code above it does.
 */
#ifndef STRATA_COMPOSER_COMP_STORE_H
#define STRATA_COMPOSER_COMP_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/token.h"
#include "composer/alloc.h"

#define COMP_ID_MAX 31
#define COMP_NAME_MAX 63
#define COMP_REASON_MAX 255
/* Paths a credential reaches besides its volume (a token holds 16). */
#define COMP_PATHS_MAX 8
_Static_assert(COMP_PATHS_MAX + 1 <= TOKEN_PATHS_MAX, "a credential holds its volume and the paths");

enum comp_state {
	COMP_REQUESTED = 0,	/* accepted, not placed yet (never stored) */
	COMP_ALLOCATING = 1,	/* resources reserved, being attached */
	COMP_COMPOSED = 2,
	COMP_DEGRADED = 3,	/* composed, but a part failed (reason says which) */
	COMP_DECOMPOSING = 4,	/* being released */
	COMP_RELEASED = 5,
	COMP_FAILED = 6,	/* could not be composed (reason); holds nothing */
};
#define COMP_STATE_LAST COMP_FAILED

struct comp_gpu {
	uint32_t node, index;
	char model[GPU_MODEL_MAX + 1];
};

struct comp {
	uint64_t seq;				/* 1, 2, ...: the order of creation */
	char id[COMP_ID_MAX + 1];		/* "comp-<seq>" */
	char name[COMP_NAME_MAX + 1];
	char tenant[TOKEN_TENANT_MAX + 1];
	uint32_t state;				/* enum comp_state */
	char reason[COMP_REASON_MAX + 1];	/* why Failed or Degraded */
	struct alloc_request rq;		/* what was asked */
	bool retain;				/* keep the volume at release */
	int64_t created, changed, expires;	/* seconds since the epoch; expires 0: no TTL */
	uint32_t ngpus;
	struct comp_gpu gpus[ALLOC_MAX_GPUS];
	uint64_t mem_share;			/* the namespace's capacity on each mem node */
	uint32_t mem_nodes;
	char token_id[TOKEN_ID_LEN + 1];	/* the credential; "" before it exists */
	/* Who the job runs as: the volume is theirs (0700) and the
	 * credential acts as them (TOKEN_NOBODY when not given). */
	uint32_t owner_uid, owner_gid;
	/* Subtrees of the namespace the credential reaches besides the
	 * volume (a dataset to read, a place to stage out to), still as the
	 * owner: the namespace's permissions apply. */
	uint32_t npaths;
	struct token_path paths[COMP_PATHS_MAX];
	/* The storage slice's caps (docs/composer.md, "QoS"): MiB/s and
	 * chunk operations/s that each storage daemon lets the credential
	 * move; 0: no cap. */
	uint32_t qos_mbps, qos_iops;
	/* 1, 2, ...: moves on with every change written (comp_store_put
	 * bumps it), so a client's If-Match of an older one is stale. The
	 * System's ETag (docs/composer.md, "ETags"). */
	uint64_t generation;
};

/* "Requested", "Allocating", ... as Redfish-style names. */
const char *comp_state_name(uint32_t state);
/* Whether a composition in state holds resources (GPUs, volume, credential). */
bool comp_state_holds(uint32_t state);

struct comp_store;

/* Opens (creating) the store at path. 0 and *out, or a negative error. */
int comp_store_open(const char *path, struct comp_store **out);
void comp_store_close(struct comp_store *s);
/* Every composition, oldest first: *out is malloc'd (the caller frees it),
 * *n its length. 0 or a negative error. */
int comp_store_load(struct comp_store *s, struct comp **out, uint32_t *n);
/* Writes c (insert or replace) with its generation one more than c's
 * (*c's is moved on only when written), and, when its state holds
 * resources, its GPUs; otherwise frees them. -EEXIST (nothing written,
 * c unchanged) when a GPU is held by another composition. */
int comp_store_put(struct comp_store *s, struct comp *c);

/*
 * Bytes moved (docs/composer.md, "Usage"): what tenant's clients read and
 * wrote at the storage daemons between the composer's sample before and
 * the one at `at` (seconds since the epoch). add: 0 or -EIO.
 */
int comp_store_add_bytes(struct comp_store *s, int64_t at, const char *tenant, uint64_t read,
			 uint64_t written);
/* Sums the samples of [since, until] per tenant, calling fn for each, in
 * tenant order. 0 or -EIO. */
int comp_store_sum_bytes(struct comp_store *s, int64_t since, int64_t until,
			 void (*fn)(void *arg, const char *tenant, uint64_t read,
				    uint64_t written), void *arg);

#endif
