/*
 * strata-fuse's unlinked-but-open files.
 *
 * POSIX keeps a file that is unlinked while open readable and writable
 * through its descriptors until the last close. The namespace drops an
 * inode with its last name, so the mount keeps one for it: an unlink (or
 * a rename over the file) of an inode this mount has open renames it to a
 * hidden name in the same directory instead, ORPHAN_PREFIX followed by its
 * inode number and generation, and the last release removes that name.
 * Listings through the mount leave hidden names out, and the file's
 * attributes show one link fewer (0 after its only name went), as after
 * an unlink.
 *
 * The bookkeeping is per mount, like the kernel's: another client that
 * opened the file gets ESTALE once its last name is gone, and a mount
 * that dies with orphans leaves their hidden names behind (docs/fuse.md).
 *
 * Thread-safe (one mutex).
 */
#ifndef STRATA_FUSE_ORPHANS_H
#define STRATA_FUSE_ORPHANS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/strata.h"

#define ORPHAN_PREFIX ".strata-unlinked."
/* Room for a hidden name: the prefix, two 64-bit numbers in hex, a dot. */
#define ORPHAN_NAME_MAX 64

struct orphan;

/* Caller-owned; orphans_init() sets it up, orphans_release() frees it. */
struct orphans {
	pthread_mutex_t lock;
	struct orphan *open;	/* inodes open through the mount, counted */
	uint32_t norphans;	/* of them orphaned (atomic: a stat with none
				 * takes no lock) */
};

void orphans_init(struct orphans *o);
void orphans_release(struct orphans *o);

/* A file handle on ino opened (delta 1) or was released (delta -1).
 * Returns 0 or -ENOMEM (an open that could not be counted). On the last
 * release of an orphaned inode, *dir and name (ORPHAN_NAME_MAX bytes)
 * receive its hidden name and 1 is returned: the caller removes it. */
int orphans_open(struct orphans *o, uint64_t ino, int delta, struct strata_handle *dir,
		 char *name);
/* Whether this mount has any file open (an unlink with none open need
 * not look the name up first). */
bool orphans_any_open(struct orphans *o);
/* Whether this mount has ino open. */
bool orphans_is_open(struct orphans *o, uint64_t ino);
/* h, open here, was just renamed to its hidden name in dir (the caller
 * did it): its last release removes it. */
void orphans_orphaned(struct orphans *o, struct strata_handle h, struct strata_handle dir);
/* Whether ino lost its name while open here. */
bool orphans_is_orphan(struct orphans *o, uint64_t ino);

/* The hidden name of h into buf (ORPHAN_NAME_MAX bytes). */
void orphans_name(struct strata_handle h, char *buf);
/* Whether name is a hidden one. */
bool orphans_hidden(const char *name);

#endif
