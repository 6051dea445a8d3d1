/*
 * The meta service's disk reserve: a file of meta.reserve bytes kept
 * allocated beside the SQLite database, given back when the disk runs
 * low so that deletes (which write too: the removal, the gc queue's row)
 * still work on a full disk, and taken again once space is back.
 *
 * While the reserve is given back the disk is "tight": meta refuses what
 * would make new inodes or names (ns_set_space) and lets removals through.
 * Owned by the meta service's reactor thread; meta_reserve_tight() and the
 * counters may be read from any thread (relaxed).
 */
#ifndef STRATA_META_RESERVE_H
#define STRATA_META_RESERVE_H

#include <stdbool.h>
#include <stdint.h>

struct meta_reserve {
	char path[4096];	/* DIR/meta.reserve */
	uint64_t bytes;		/* 0: no reserve (never tight) */
	bool held;		/* the file is allocated */
	bool tight;		/* given back: refuse new entries */
	uint64_t releases;	/* times given back */
};

/*
 * Sets r up for the database directory dir and takes the reserve when the
 * disk has room for it and as much again; otherwise starts tight (logged).
 * bytes 0 disables it. Returns 0, -ENAMETOOLONG or -errno of a failed
 * create (logged with the path).
 */
int meta_reserve_init(struct meta_reserve *r, const char *dir, uint64_t bytes);

/*
 * Looks at the disk: gives the reserve back when less than its size is
 * free, takes it again once twice its size is free. Returns true when
 * r->tight changed (the caller logs nothing: this does).
 */
bool meta_reserve_poll(struct meta_reserve *r);

/* Gives the reserve back now (a removal failed with ENOSPC); true when it
 * was held (the removal may be tried again). */
bool meta_reserve_release(struct meta_reserve *r);

/* Whether new entries are refused (the reserve given back). */
bool meta_reserve_tight(const struct meta_reserve *r);

#endif
