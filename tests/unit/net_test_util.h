/*
 * What the unit tests of src/net share beside sync_util.h: a server's
 * connection events, counted on latches so a test waits for them.
 */
#ifndef STRATA_TESTS_NET_TEST_UTIL_H
#define STRATA_TESTS_NET_TEST_UTIL_H

#include "net/conn.h"
#include "sync_util.h"

struct conn_events {
	struct latch accepted, closed;
};

static inline void conn_events_init(struct conn_events *e)
{
	latch_init(&e->accepted);
	latch_init(&e->closed);
}

static inline void conn_events_destroy(struct conn_events *e)
{
	latch_destroy(&e->accepted);
	latch_destroy(&e->closed);
}

/* conn_handler callbacks: ctx points at a struct that begins with a
 * struct conn_events. */
static inline void conn_events_on_accept(void *ctx, struct conn *c)
{
	(void)c;
	latch_add(&((struct conn_events *)ctx)->accepted, 1);
}

static inline void conn_events_on_close(void *ctx, struct conn *c)
{
	(void)c;
	latch_add(&((struct conn_events *)ctx)->closed, 1);
}

/* Waits until every connection accepted so far has closed. */
static inline bool conn_events_all_closed(struct conn_events *e)
{
	return latch_wait(&e->closed, latch_get(&e->accepted));
}

#endif
