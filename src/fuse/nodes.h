/*
 * strata-fuse's nodes: FUSE node ids -> Strata handles.
 *
 * The FUSE node id of an object is its Strata inode number (the root is 1
 * in both). After a lookup the kernel names an object by node id alone,
 * but a call on it must carry the object's generation too, so that a
 * removed object answers ESTALE instead of reaching whatever later got its
 * number. This table keeps, for every node id the kernel holds (lookup
 * count > 0, readdirplus entries included), that generation, and nothing
 * that a rename could make stale: no path. Another client may rename or
 * move anything; a node id still names the same object.
 *
 * It also tracks, per node, the writable handles open through this mount
 * and the largest end they wrote: until they publish (flush/close), the
 * namespace's length lags behind, and getattr must not shrink the
 * kernel's i_size under a writer.
 *
 * Thread-safe (one mutex); every call copies out what it returns.
 */
#ifndef STRATA_FUSE_NODES_H
#define STRATA_FUSE_NODES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/strata.h"

struct node;

/* Caller-owned; nodes_init() sets it up, nodes_release() frees it. */
struct nodes {
	pthread_mutex_t lock;
	struct node **buckets;
	size_t nbuckets;
	size_t count;
};

/* Sets up a table holding the root (pinned: never forgotten). Returns 0
 * or -ENOMEM. */
int nodes_init(struct nodes *nm);
/* Frees every node. */
void nodes_release(struct nodes *nm);

/* The handle of node id ino. Returns 0, or -ESTALE for a node id the
 * kernel should not hold (forgotten, or never looked up). */
int nodes_get(struct nodes *nm, uint64_t ino, struct strata_handle *out);
/*
 * Records one lookup of h handed to the kernel (creates the node, or
 * counts one more). A node whose object was replaced by another with the
 * same number (a new generation) takes the new one: the kernel sees the
 * generation change and drops its old inode. Returns 0 or -ENOMEM.
 */
int nodes_lookup(struct nodes *nm, struct strata_handle h);
/* Drops n lookups of ino; the node goes when none are left and no
 * writable handle is open on it. */
void nodes_forget(struct nodes *nm, uint64_t ino, uint64_t n);

/* A writable handle on ino opened (delta 1) or was released (delta -1). */
void nodes_writer(struct nodes *nm, uint64_t ino, int delta);
/* A write through this mount ended at end. */
void nodes_wrote(struct nodes *nm, uint64_t ino, uint64_t end);
/* A time was set explicitly (utimensat, futimens) while this mount has
 * writers on ino: a length they publish later (at close) stamps the time
 * of the publish, which must not replace this one. Kept until the next
 * write through the mount or the last writer's release. */
void nodes_set_mtime(struct nodes *nm, uint64_t ino, int64_t mtime_ns);
/* Whether such a time is kept for ino (*mtime_ns receives it). */
bool nodes_kept_mtime(struct nodes *nm, uint64_t ino, int64_t *mtime_ns);
/* The file was truncated to size through this mount. */
void nodes_truncated(struct nodes *nm, uint64_t ino, uint64_t size);
/* Returns the size the kernel should see: size, or the unpublished end
 * of this mount's writers if larger. */
uint64_t nodes_merge_size(struct nodes *nm, uint64_t ino, uint64_t size);

/*
 * Fresh attributes: st, read from meta by a call sent at time at
 * (mono_sec) while the mount's change count (sfuse.h) stood at changes.
 * Kept on the node (replacing older ones) until the node goes or its
 * generation changes.
 */
void nodes_note_attr(struct nodes *nm, uint64_t ino, const struct strata_stat *st,
		     uint64_t changes, double at);
/* Whether ino has attributes noted while the change count was what it is
 * now (changes) and younger than max_age at now: then *st receives them
 * and *age their age in seconds. */
bool nodes_fresh_attr(struct nodes *nm, uint64_t ino, uint64_t changes, double now,
		      double max_age, struct strata_stat *st, double *age);

#endif
