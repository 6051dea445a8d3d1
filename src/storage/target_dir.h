/*
 * Where a storage node's targets live: DATA/targets/N by default, or one
 * directory per disk named by storage.target_dirs (docs/operations.md,
 * "One target per disk").
 *
 * A target directory is bound to the node and the slot that first used
 * it by DIR/target.owner ("<data directory identity> <index>", 0600,
 * written through a temporary file and a rename): a disk moved to another
 * slot or another node, or two nodes configured with one directory, is
 * refused at start with both owners named, instead of serving one
 * target's chunks as another's.
 */
#ifndef STRATA_STORAGE_TARGET_DIR_H
#define STRATA_STORAGE_TARGET_DIR_H

#include <stddef.h>
#include <stdint.h>

#define TARGET_DIRS_MAX 64

/*
 * Splits list (storage.target_dirs: directories separated by commas,
 * blanks around each ignored) into dirs[0..n), each NUL-terminated within
 * cap bytes. Returns n (0 for an empty list), or -EINVAL with err filled:
 * an empty item, a relative path, one too long, a directory named twice,
 * more than max.
 */
int target_dirs_parse(const char *list, char *dirs, size_t cap, int max, char *err,
		      size_t errlen);

/*
 * Checks that dir is an existing directory (it is never created: a disk
 * that is not mounted must not become a target on the root file system)
 * and binds it to (ident, idx), or checks the binding it has. Returns 0,
 * or a negative errno, logged with the directory and what to do.
 */
int target_dir_claim(const char *dir, uint64_t ident, uint32_t idx);

#endif
