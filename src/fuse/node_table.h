/*
 * The node table of strata-fuse: FUSE node ids -> Strata paths.
 *
 * libstrata is path-based, the FUSE low-level API is inode-based. The
 * FUSE node id of an entry is its Strata inode number (the root is 1 in
 * both), and this table remembers, for every node id the kernel holds
 * (lookup count > 0), the path it was last seen at. Renames through this
 * mount rewrite the paths of the moved subtree; an unlink, rmdir or a
 * replacing rename marks the victim's node stale (path ""), so calls on it
 * fail with -ESTALE instead of reaching whatever now lives at the old
 * path. Changes made by other clients are seen at the next lookup, which
 * refreshes the path.
 *
 * It also tracks, per node, the writable handles open through this mount
 * and the largest end they wrote: until they publish (flush/close), the
 * namespace's length lags behind, and getattr must not shrink the
 * kernel's i_size under a writer.
 *
 * Thread-safe (one mutex); every call copies out what it returns.
 */
#ifndef STRATA_FUSE_NODE_TABLE_H
#define STRATA_FUSE_NODE_TABLE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define NT_PATH_MAX 4096

struct nt_node;

struct node_table {
	pthread_mutex_t lock;
	struct nt_node **buckets;
	size_t nbuckets;
	size_t count;
};

/* Sets up an empty table holding the root (ino 1, path "/", pinned).
 * Returns 0 or -ENOMEM. */
int nt_init(struct node_table *nt);
/* Frees every node. */
void nt_release(struct node_table *nt);

/* Copies the path of ino into buf[len]. Returns 0, -ESTALE (unknown or
 * removed node), -ENAMETOOLONG. */
int nt_path(struct node_table *nt, uint64_t ino, char *buf, size_t len);
/* Copies parent's path joined with name into buf[len]. Returns 0,
 * -ESTALE, -ENAMETOOLONG. */
int nt_child_path(struct node_table *nt, uint64_t parent, const char *name, char *buf,
		  size_t len);

/* Records one lookup of ino at path (creates the node or refreshes its
 * path). Returns 0 or -ENOMEM. */
int nt_lookup(struct node_table *nt, uint64_t ino, const char *path);
/* Drops n lookups of ino; the node goes when none are left. */
void nt_forget(struct node_table *nt, uint64_t ino, uint64_t n);

/* A rename from -> to succeeded: nodes at or under from move under to;
 * with exchange, nodes under to move under from; otherwise a node that
 * was at to is marked stale. */
void nt_rename(struct node_table *nt, const char *from, const char *to, int exchange);
/* path was removed: its node (if any) is marked stale. */
void nt_removed(struct node_table *nt, const char *path);
/* Number of nodes held (for tests and stats). */
size_t nt_count(struct node_table *nt);

/* A writable handle on ino opened (delta 1) or was released (delta -1). */
void nt_writer(struct node_table *nt, uint64_t ino, int delta);
/* A write through this mount ended at end. */
void nt_wrote(struct node_table *nt, uint64_t ino, uint64_t end);
/* The file was truncated to size through this mount. */
void nt_truncated(struct node_table *nt, uint64_t ino, uint64_t size);
/* Returns the size the kernel should see: size, or the unpublished end
 * of this mount's writers if larger. */
uint64_t nt_merge_size(struct node_table *nt, uint64_t ino, uint64_t size);

#endif
