/*
 * Persistence of the cluster map in SQLite (WAL mode), so the map survives
 * a restart of mgmt. The whole map is rewritten in one transaction on each
 * save: it is small and changes rarely (call it after every call that
 * bumped map->version). Tables are prefixed mgmt_ so the file can be
 * shared with other users of the metadata store.
 *
 * Leases are not stored: after mgmt_store_load(), give every node a fresh
 * lease with cm_reset_leases().
 */
#ifndef STRATA_MGMT_MGMT_STORE_H
#define STRATA_MGMT_MGMT_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cluster_map.h"
#include "common/token.h"

struct mgmt_store;

/*
 * Opens (creating if needed) the SQLite database at path, sets WAL mode and
 * creates the tables. *out receives a handle owned by the caller, to be
 * closed with mgmt_store_close(). Returns 0, -ENOMEM, -EIO (cannot open or
 * set up the database; logged with SQLite's reason) or STRATA_EBADMSG (the
 * file holds a newer schema).
 */
int mgmt_store_open(const char *path, struct mgmt_store **out);

/* Closes the store; NULL is a no-op. */
void mgmt_store_close(struct mgmt_store *s);

/*
 * Replaces the stored map by m (borrowed), atomically: after a crash the
 * store holds the old or the new map. Returns 0 or -EIO.
 */
int mgmt_store_save(struct mgmt_store *s, const struct cluster_map *m);

/*
 * Loads the stored map into out (overwritten, not released first). An
 * empty database yields an empty map (as cm_init()). The loaded map must
 * pass cm_validate(). Returns 0 (the caller releases out), -EIO, -ENOMEM or
 * STRATA_EBADMSG (corrupt content); on error out is left empty.
 */
int mgmt_store_load(struct mgmt_store *s, struct cluster_map *out);

/*
 * The incarnation (a nonzero id new for every start of a storage process)
 * that node last registered with. Kept apart from the map because it
 * decides safety across restarts of mgmt: a node that restarted while mgmt
 * was down is still recognised as restarted, and resyncs before serving.
 * get: 0 and *inc, or -ENOENT (never recorded), -EIO.
 * set: 0 or -EIO; durable when it returns.
 */
int mgmt_store_get_incarnation(struct mgmt_store *s, uint32_t node, uint64_t *inc);
int mgmt_store_set_incarnation(struct mgmt_store *s, uint32_t node, uint64_t inc);

/*
 * Node ids retired by 'strata node remove': such a node is never admitted
 * again (its registration is refused). Kept apart from the map, which
 * forgets the node.
 * set: records node as removed at when (seconds since the epoch; a node
 * recorded already keeps its first time). 0 or -EIO; durable when it
 * returns.
 * get: 0 and *when, -ENOENT (not removed) or -EIO.
 */
int mgmt_store_set_removed(struct mgmt_store *s, uint32_t node, int64_t when);
int mgmt_store_get_removed(struct mgmt_store *s, uint32_t node, int64_t *when);

/*
 * The token registry: every token mgmt signed (TOKEN_CREATE), with its
 * claims as JSON, and whether it was revoked. Never the token text: a
 * token is rebuilt from its claims and the key, so the store holds no
 * secret. Kept apart from the map (mgmt_store_save does not touch it).
 * Each call is durable when it returns.
 */
struct mgmt_token {
	char id[TOKEN_ID_LEN + 1];
	char tenant[TOKEN_TENANT_MAX + 1];
	int64_t created;		/* seconds since the epoch */
	int64_t exp;			/* seconds since the epoch, 0: never */
	bool admin;
	int64_t revoked;		/* when it was revoked; 0: it is not */
};

/* Records t (revoked ignored: a new token is not) with its claims JSON.
 * 0, -EEXIST (the id is taken) or -EIO. */
int mgmt_store_token_add(struct mgmt_store *s, const struct mgmt_token *t, const char *claims);
/* Marks token id revoked at time when (seconds since the epoch); revoking
 * twice keeps the first time. 0, -ENOENT (not in the registry) or -EIO. */
int mgmt_store_token_revoke(struct mgmt_store *s, const char *id, int64_t when);
/* Records token id, which mgmt did not make (signed offline), as revoked
 * at when until exp (0: never), under tenant "(offline)"; an id in the
 * registry is revoked as mgmt_store_token_revoke does. 0 or -EIO. */
int mgmt_store_token_revoke_offline(struct mgmt_store *s, const char *id, int64_t exp,
				    int64_t when);
/* The registry, oldest first: at most max tokens into *out (malloc'd, the
 * caller frees it; NULL when none), their count in *n, all of them in
 * *total. 0, -ENOMEM, -EIO or STRATA_EBADMSG (a corrupt row). */
int mgmt_store_token_list(struct mgmt_store *s, uint32_t max, struct mgmt_token **out,
			  uint32_t *n, uint32_t *total);
/* Fills m's revoked list (replacing it) with the ids of the revoked tokens
 * that have not expired at now (seconds since the epoch), sorted. 0,
 * -ENOMEM, -EIO, -ENOSPC (more than CM_MAX_REVOKED) or STRATA_EBADMSG, with
 * the list left empty. */
int mgmt_store_revoked(struct mgmt_store *s, int64_t now, struct cluster_map *m);

#endif
