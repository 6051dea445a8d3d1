/*
 * The composer's compositions and their GPU allocations, kept so that
 * every composition survives a restart of the composer (docs/composer.md,
 * "State"). One interface, two backends, as mgmt's store
 * (mgmt/mgmt_store.h):
 *   - SQLite (comp_store_sqlite.c): DATA/composer.db, WAL mode;
 *   - PostgreSQL (comp_store_pg.c): the database mgmt's state is in
 *     (composer.store, following mgmt.store), tables composer_*, so the
 *     compositions outlive the node's disk.
 * One writer: the composer's owner thread. Each put is one transaction;
 * the table of held GPUs has the key (node, gpu), so the store itself
 * refuses to give one GPU to two compositions, whatever the code above
 * it does.
 *
 * Errors besides those listed: -EIO (the database failed, or the
 * connection to it was lost: logged; the PostgreSQL backend reconnects
 * at the next call).
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

/*
 * Opens the store spec names: a postgresql:// or postgres:// URI is
 * PostgreSQL (comp_store_open_pg with libpq's default password file),
 * anything else the path of a SQLite file (created if needed). The tables
 * are created, or an older schema migrated. *out receives a handle owned
 * by the caller, closed with comp_store_close(). 0, -ENOMEM, -EIO (cannot
 * open, connect or set up: logged with the reason) or STRATA_EBADMSG (the
 * database holds a newer schema).
 */
int comp_store_open(const char *spec, struct comp_store **out);
/* The same for a PostgreSQL URI, with passfile (NULL or "": libpq's
 * default) holding its password: a regular file of mode 0600 or stricter
 * (-EACCES otherwise, logged). */
int comp_store_open_pg(const char *conninfo, const char *passfile, struct comp_store **out);
/* Closes the store; NULL is a no-op. */
void comp_store_close(struct comp_store *s);

/* Checks the keys composer.store (spec: "", "sqlite" or a postgresql://
 * URI) and composer.store_passfile (passfile: "" or a private regular
 * file) together. 0, or -EINVAL with a message naming the key in err. */
int comp_store_check_spec(const char *spec, const char *passfile, char *err, size_t errlen);
/* Every composition, oldest first: *out is malloc'd (the caller frees it),
 * *n its length. 0 or a negative error. */
int comp_store_load(struct comp_store *s, struct comp **out, uint32_t *n);
/* Writes c (insert or replace) with its generation one more than c's
 * (*c's is moved on only when written), and, when its state holds
 * resources, its GPUs; otherwise frees them. -EEXIST (nothing written,
 * c unchanged) when a GPU is held by another composition. */
int comp_store_put(struct comp_store *s, struct comp *c);

/*
 * Makes every later put conditional on term being the mgmt leader
 * lease's term still (mgmt_store_fence's rule, mgmt_lease_fence), so that
 * a composer whose mgmt was deposed (paused past its lease, then resumed)
 * never overwrites what the new leader's composer wrote: such a put fails
 * with -ESTALE and writes nothing. 0 lifts the fence. PostgreSQL only, and
 * only where composer.store is mgmt's database (the lease is there; else
 * logged once and nothing fenced); SQLite (one node): nothing.
 */
void comp_store_fence(struct comp_store *s, uint64_t term);

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

/* ---- backends ---- */

/* What a backend provides, on its impl, with the contracts above. put
 * writes c with generation (the dispatcher moves c's on). */
struct comp_store_ops {
	void (*close)(void *impl);
	int (*load)(void *impl, struct comp **out, uint32_t *n);
	int (*put)(void *impl, const struct comp *c, uint64_t generation);
	void (*fence)(void *impl, uint64_t term);	/* NULL: nothing to fence */
	int (*add_bytes)(void *impl, int64_t at, const char *tenant, uint64_t read,
			 uint64_t written);
	int (*sum_bytes)(void *impl, int64_t since, int64_t until,
			 void (*fn)(void *arg, const char *tenant, uint64_t read, uint64_t written),
			 void *arg);
};

/* Open a backend: *ops and *impl on success, errors as comp_store_open. */
int comp_store_sqlite_open(const char *path, const struct comp_store_ops **ops, void **impl);
int comp_store_pg_open(const char *conninfo, const char *passfile,
		       const struct comp_store_ops **ops, void **impl);

/* The row forms both backends store (comp_store.c). */
#define COMP_GPUS_TEXT_MAX (ALLOC_MAX_GPUS * (GPU_MODEL_MAX + 24))
/* c's GPUs as "node:index:model;..." into out (len bytes). */
void comp_gpus_text(const struct comp *c, char *out, size_t len);
/* Reads comp_gpus_text's form into c's GPUs (what does not read is left out). */
void comp_gpus_parse(const char *text, struct comp *c);
/* The paths c's credential reaches besides its volume as JSON:
 * [{"prefix": P, "access": "r"|"rw"}, ...]. NULL on ENOMEM; free() it. */
char *comp_paths_text(const struct comp *c);
/* Reads comp_paths_text's form into c; -EINVAL (c->npaths 0) when it does
 * not read. */
int comp_paths_parse(const char *text, struct comp *c);
/* How both backends clip a count into a signed 64-bit column. */
static inline int64_t comp_i64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

#endif
