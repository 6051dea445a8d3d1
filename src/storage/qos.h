/*
 * Storage QoS: the bandwidth and IOPS caps a credential carries (the
 * token's "qos" claim, common/token.h), enforced by each storage daemon
 * (docs/composer.md, "QoS").
 *
 * A cap is a token bucket per credential (keyed by the token's id) and
 * per storage daemon: the daemon lets a credential move at most bw bytes
 * and iops chunk operations per second, with a burst of QOS_BURST_MS
 * worth. A request over the budget is delayed until the bucket has room
 * for it, never refused: the caller holds it on a timer and serves it
 * then (storage_service.c).
 *
 * The bucket is kept in its "virtual finishing time" form (GCRA): one
 * time per resource, tat, which every request pushes forward by its cost
 * at the cap's rate (cost / rate seconds). A request may start once
 * tat - QOS_BURST_MS is not in the future; the delay it is told is that
 * distance. Every request reserves its place when it is charged, so the
 * delays of one credential's requests never decrease: requests delayed
 * and served in deadline order are served in the order they arrived, and
 * whatever the arrivals, a credential is admitted at most
 * rate x (interval + QOS_BURST_MS) over any interval.
 *
 * The table holds QOS_SLOTS buckets. A credential that finds no room (its
 * window of QOS_WINDOW slots is held by credentials that still owe time)
 * is paced in one shared overflow bucket, at its own caps: each such
 * credential still stays under its caps (they share one timeline, each
 * request taking cost / its own rate of it), they only slow each other.
 * That is logged (at most every 10 s) and counted. A bucket whose times
 * are all in the past holds nothing (it is a fresh one): its slot is
 * taken by the next credential that needs it.
 *
 * Thread-safe: any thread charges (a mutex around the table, taken only
 * for requests of credentials that have caps).
 */
#ifndef STRATA_STORAGE_QOS_H
#define STRATA_STORAGE_QOS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/token.h"

#define QOS_BURST_MS 100
#define QOS_SLOTS 1024u
#define QOS_WINDOW 16u		/* slots a credential may land in */

/* A credential's caps: 0 is none. */
struct qos_caps {
	uint64_t bw;			/* bytes per second */
	uint32_t iops;			/* operations per second */
};

/* One credential's bucket. */
struct qos_bucket {
	uint64_t tat_bytes_ns;		/* monotonic ns: the bytes' timeline */
	uint64_t tat_ops_ns;		/* the operations' timeline */
};

/*
 * Charges b for bytes and ops at caps c, at now_ns (a monotonic clock),
 * with a burst of burst_ns: returns how long the request must wait, in
 * ns (0: at once). A cap of 0 charges nothing on its resource.
 */
uint64_t qos_bucket_charge(struct qos_bucket *b, const struct qos_caps *c, uint64_t bytes,
			   uint32_t ops, uint64_t now_ns, uint64_t burst_ns);
/* Whether b holds nothing at now_ns (every timeline in the past). */
bool qos_bucket_idle(const struct qos_bucket *b, uint64_t now_ns);

struct qos_slot {
	char id[TOKEN_ID_LEN + 1];	/* "" : never used */
	struct qos_bucket b;
};

struct qos_stats {
	uint64_t charged;		/* requests charged */
	uint64_t delayed;		/* of them, held for a while */
	uint64_t delay_ms;		/* the sum of their delays */
	uint64_t overflow;		/* paced in the shared bucket: table full */
	uint32_t active;		/* slots holding a credential that owes time */
};

struct qos_table {
	pthread_mutex_t mu;
	struct qos_slot slot[QOS_SLOTS];
	struct qos_bucket overflow;
	uint64_t burst_ns;
	uint64_t warned_ns;		/* the last "table full" warning */
	struct qos_stats st;
};

/* Sets up an empty table. burst_ms 0: QOS_BURST_MS. */
void qos_table_init(struct qos_table *q, uint32_t burst_ms);
void qos_table_release(struct qos_table *q);

/* The caps of a request made with claims (none for a token without a
 * "qos" claim). */
static inline bool qos_caps_of(const struct token_claims *c, struct qos_caps *out)
{
	out->bw = c->qos_bw;
	out->iops = c->qos_iops;
	return c->qos_bw || c->qos_iops;
}

/*
 * Charges the credential id (a token id) bytes and ops at caps c, at
 * now_ns: returns the delay in ns before the request may be served.
 * Counted in the stats.
 */
uint64_t qos_charge(struct qos_table *q, const char *id, const struct qos_caps *c,
		    uint64_t bytes, uint32_t ops, uint64_t now_ns);
/* A copy of the counters (active counted now). */
void qos_stats_get(struct qos_table *q, uint64_t now_ns, struct qos_stats *out);

#endif
