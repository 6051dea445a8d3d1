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

#include "common/cluster_map.h"

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

#endif
