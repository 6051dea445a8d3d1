/*
 * strata-fuse: the FUSE low-level operations on top of libstrata.
 *
 * One struct sfuse per mount: the cluster connection, the nodes
 * (nodes.h), the write-behind (write_behind.h) and the caching knobs.
 * Every operation maps a node id to a Strata handle (inode number and
 * generation) and calls libstrata's handle API; errors come back as errno
 * values (Strata's own codes become EIO, logged).
 */
#ifndef STRATA_FUSE_SFUSE_H
#define STRATA_FUSE_SFUSE_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdbool.h>

#include "fuse/nodes.h"
#include "fuse/orphans.h"
#include "fuse/write_behind.h"
#include "strata/strata.h"

/* Largest read/write request (also the read buffer of each thread). */
#define SFUSE_MAX_IO (1u << 20)

struct sfuse {
	struct strata *s;		/* borrowed: connected by main */
	struct nodes nodes;
	double attr_timeout;		/* seconds the kernel caches attributes */
	double entry_timeout;		/* seconds it caches names */
	/* Seconds it caches a name found missing (0: not at all). */
	double negative_timeout;
	bool writeback;			/* kernel writeback caching */
	/* A multi-user mount: each request acts for the user that made it
	 * (strata_set_caller); the token must have "caller". */
	bool multiuser;
	struct fuse_session *se;	/* set once the session exists */
	pthread_mutex_t hlock;
	struct sfuse_handle *handles;	/* open files and directories */
	struct orphans orphans;		/* files unlinked while open here */
	/* Write-behind (write_behind.h): set wb.max before sfuse_start; 0
	 * makes every write wait for all replicas. */
	struct wb wb;
	/* The root's attributes as last read (root_lock): a getattr of the
	 * root while the cluster is unreachable answers them, so that
	 * fusermount, umount and df on a mount whose cluster is gone do not
	 * wait a timeout per stat and fail. */
	pthread_mutex_t root_lock;
	bool root_known;
	struct stat root_st;
	/* Moves on (atomically) when a change through this mount starts and
	 * again when it ends: attributes read while it stood still reflect
	 * every change this mount made (sfuse.c, "open attributes"). */
	uint64_t changes;
};

/* Links every open file and directory handle, so that those the kernel
 * never released (a lazy unmount) are closed at exit. */
struct sfuse_handle {
	struct sfuse_handle *prev, *next;
	bool dir;
};

/* The operation table; userdata of the session is a struct sfuse. */
extern const struct fuse_lowlevel_ops sfuse_ops;

/* Sets up sf around the connection s (borrowed). Returns 0 or -ENOMEM. */
int sfuse_init(struct sfuse *sf, struct strata *s);
/* Starts the write-behind workers (call after setting wb.max, before the
 * loop). Returns 0 or a negative errno. */
int sfuse_start(struct sfuse *sf);
/* Closes the handles still open and frees what sf holds (not the
 * connection). */
void sfuse_release(struct sfuse *sf);

/* Maps a libstrata error (negative) to a positive errno for the kernel:
 * errno values pass through, connection errors and Strata's own codes
 * become EIO. op, the node id ino and name (may be NULL) name the call in
 * the log line. */
int sfuse_errno(int rc, const char *op, uint64_t ino, const char *name);

#endif
