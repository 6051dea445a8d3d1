/*
 * mgmt's persistent state: the cluster map, incarnations, removed nodes
 * and the token registry, so that they survive a restart of mgmt (or a
 * change of leader). One interface, two backends, as the meta store
 * (meta/meta_store.h):
 *   - SQLite (mgmt_store_sqlite.c, the default): the file mgmt.db in the
 *     node's data directory, WAL mode; one mgmt;
 *   - PostgreSQL (mgmt_store_pg.c, mgmt.store = postgresql://...): a
 *     database several control daemons share; one of them leads, elected
 *     by a lease row with a fencing term (mgmt_store_lease), and every
 *     write is conditional on the leader's term (mgmt_store_fence).
 * The whole map is rewritten in one transaction on each save: it is small
 * and changes rarely (call it after every call that bumped map->version).
 * Tables are prefixed mgmt_ so the database can be shared with other
 * users (the meta store).
 *
 * Node leases are not stored: after mgmt_store_load(), give every node a
 * fresh lease with cm_reset_leases().
 *
 * A handle is used by one thread at a time. Errors besides those listed:
 * -EIO (the database failed or the connection to it was lost: logged; the
 * PostgreSQL backend reconnects at the next call) and -ESTALE (fenced: the
 * term set with mgmt_store_fence is no longer the lease's, so this process
 * was deposed and nothing was written).
 */
#ifndef STRATA_MGMT_MGMT_STORE_H
#define STRATA_MGMT_MGMT_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cluster_map.h"
#include "common/token.h"

struct mgmt_store;
struct mgmt_token;
struct mgmt_lease;

/*
 * Opens the store spec names: a postgresql:// or postgres:// URI is
 * PostgreSQL (mgmt_store_open_pg with libpq's default password file),
 * anything else the path of a SQLite file (created if needed). The
 * tables are created, or an older schema migrated. *out receives a handle
 * owned by the caller, to be closed with mgmt_store_close(). Returns 0,
 * -ENOMEM, -EIO (cannot open, connect or set up the database; logged with
 * the reason) or STRATA_EBADMSG (the database holds a newer schema).
 */
int mgmt_store_open(const char *spec, struct mgmt_store **out);
/* The same for a PostgreSQL URI, with passfile (NULL or "": libpq's
 * default) holding its password: a regular file of mode 0600 or stricter
 * (-EACCES otherwise, logged). */
int mgmt_store_open_pg(const char *conninfo, const char *passfile, struct mgmt_store **out);

/* Checks the keys mgmt.store (spec: "" or a postgresql:// URI) and
 * mgmt.store_passfile (passfile: "" or a private regular file) together.
 * 0, or -EINVAL with a message naming the key in err. */
int mgmt_store_check_spec(const char *spec, const char *passfile, char *err, size_t errlen);

/* Closes the store; NULL is a no-op. */
void mgmt_store_close(struct mgmt_store *s);

/*
 * Replaces the stored map by m (borrowed), atomically: after a crash the
 * store holds the old or the new map. Returns 0 or -EIO. Both backends
 * keep the version, nodes, targets (capacity, usage, state) and chains;
 * PostgreSQL also the targets' fs, avail and full mark and the services
 * (kind, node, address, state, incarnation), which its followers serve
 * (mgmt_service.c); SQLite, with one mgmt and no follower, leaves those
 * to the next heartbeats and announcements (they load as 0 and none).
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

/* ---- the leader lease (PostgreSQL) ---- */

/* Whether several daemons may share this store, so that one must be
 * elected (PostgreSQL); false: the one process that opened it leads
 * (SQLite), and the lease calls below say so without a database. */
bool mgmt_store_shared(const struct mgmt_store *s);

/* What the lease row says after mgmt_store_lease. */
struct mgmt_lease {
	bool leader;			/* holder holds the lease now */
	uint64_t term;			/* the lease's term: the fencing token */
	char addr[CM_ADDR_LEN];		/* the holder's address; "": none yet */
	uint32_t left_ms;		/* how long it runs still (database clock) */
};

/*
 * Takes or renews the leader lease for holder (a name unique to this
 * process: node id and a random part), at addr (where it serves), for
 * ttl_ms counted by the database's clock, in one transaction: a holder
 * renews its own lease (same term); anyone takes a lease that expired,
 * with the term incremented, so every leader has a term no other had.
 * A holder named "PREFIX-PART" whose lease is held at addr by
 * "PREFIX-OTHER" takes it at once (a new term): the same node restarted
 * at the same address, whose predecessor is gone.
 * out tells who holds it now. SQLite: always the leader, term 1.
 * Returns 0 (whoever leads), -EINVAL (holder or addr empty or too long)
 * or -EIO.
 */
int mgmt_store_lease(struct mgmt_store *s, const char *holder, const char *addr,
		     uint32_t ttl_ms, struct mgmt_lease *out);
/* Gives the lease up at once when holder holds it (a clean stop: another
 * daemon takes over without waiting for the expiry). 0 or -EIO. */
int mgmt_store_resign(struct mgmt_store *s, const char *holder);
/* Makes every later write conditional on term being the lease's term
 * still (0: unconditional): a write after a newer leader took over fails
 * with -ESTALE and changes nothing. No-op on SQLite. */
void mgmt_store_fence(struct mgmt_store *s, uint64_t term);

/*
 * The fence itself, for every store that shares mgmt's PostgreSQL
 * database (mgmt's own, the composer's): inside db's open transaction,
 * reads the leader lease's row FOR SHARE, so a takeover waits for this
 * transaction, and returns 0 when its term is still term, -ESTALE (logged,
 * who naming the writer) when a newer leader took over, or the query's
 * error (-EIO). The caller rolls back on any error.
 */
struct pg_session;
int mgmt_lease_fence(struct pg_session *db, uint64_t term, const char *who);

/* ---- copying a store (strata mgmt migrate) ---- */

struct mgmt_copy_stats {
	uint64_t version;		/* of the map copied */
	uint32_t nodes, targets, chains, incarnations, removed, tokens;
};

/*
 * Copies everything from holds (the map, incarnations, removed nodes, the
 * token registry with revocations) into to, which must hold nothing yet
 * (-ENOTEMPTY otherwise, nothing written). Offline: stop the daemon whose
 * store from is. The map is written last, so a copy that failed half way
 * is seen as unfinished (-ENOTEMPTY when run again: empty the target, a
 * new database, and run it again). st (not NULL) receives the counts.
 * Returns 0 or the first error of either store.
 */
int mgmt_store_copy(struct mgmt_store *from, struct mgmt_store *to, struct mgmt_copy_stats *st);

/* ---- backends ---- */

/* What a backend provides: the functions above on its impl, with the same
 * contracts. lease and resign are NULL for a backend that is not shared. */
struct mgmt_store_ops {
	void (*close)(void *impl);
	int (*save)(void *impl, const struct cluster_map *m);
	int (*load)(void *impl, struct cluster_map *out);
	int (*get_incarnation)(void *impl, uint32_t node, uint64_t *inc);
	int (*set_incarnation)(void *impl, uint32_t node, uint64_t inc);
	int (*set_removed)(void *impl, uint32_t node, int64_t when);
	int (*get_removed)(void *impl, uint32_t node, int64_t *when);
	int (*token_add)(void *impl, const struct mgmt_token *t, const char *claims);
	int (*token_revoke)(void *impl, const char *id, int64_t when);
	int (*token_revoke_offline)(void *impl, const char *id, int64_t exp, int64_t when);
	int (*token_list)(void *impl, uint32_t max, struct mgmt_token **out, uint32_t *n,
			  uint32_t *total);
	int (*revoked)(void *impl, int64_t now, struct cluster_map *m);
	/* For mgmt_store_copy: cb for each row, in key order, until it
	 * returns nonzero (returned). */
	int (*each_incarnation)(void *impl, int (*cb)(void *arg, uint32_t node, uint64_t inc),
				void *arg);
	int (*each_removed)(void *impl, int (*cb)(void *arg, uint32_t node, int64_t at),
			    void *arg);
	int (*each_token)(void *impl, int (*cb)(void *arg, const struct mgmt_token *t,
						const char *claims), void *arg);
	int (*lease)(void *impl, const char *holder, const char *addr, uint32_t ttl_ms,
		     struct mgmt_lease *out);
	int (*resign)(void *impl, const char *holder);
	void (*fence)(void *impl, uint64_t term);
};

/* A backend's each_* callback and its argument, as its row readers pass
 * them on (one of the three set). */
struct mgmt_row_cb {
	int (*inc)(void *arg, uint32_t node, uint64_t inc);
	int (*at)(void *arg, uint32_t node, int64_t at);
	int (*tok)(void *arg, const struct mgmt_token *t, const char *claims);
	void *arg;
};

/* Open a backend: *ops and *impl on success (impl closed with
 * ops->close), errors as mgmt_store_open. */
int mgmt_store_sqlite_open(const char *path, const struct mgmt_store_ops **ops, void **impl);
int mgmt_store_pg_open(const char *conninfo, const char *passfile,
		       const struct mgmt_store_ops **ops, void **impl);

#endif
