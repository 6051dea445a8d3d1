/*
 * Whole-buffer file I/O and directory creation on local files, for the
 * daemon, the CLI and the tools. Each retries on EINTR and on short
 * transfers; none allocates.
 */
#ifndef STRATA_COMMON_FILEIO_H
#define STRATA_COMMON_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Writes all len bytes of buf to fd. Returns 0, or -errno (-EIO when
 * write(2) made no progress). */
int write_full(int fd, const void *buf, size_t len);
/* Reads exactly len bytes into buf. Returns 0, or -errno, or -EIO at end
 * of file before len bytes (the peer closed, the file shrank). */
int read_full(int fd, void *buf, size_t len);
/* The same at offset off, with pwrite(2)/pread(2). */
int pwrite_full(int fd, const void *buf, size_t len, uint64_t off);
int pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Creates directory path and every missing parent, with mode (less the
 * umask). An existing directory is not an error. Returns 0 or -errno:
 * -ENOTDIR when a parent is not a directory, -EEXIST when path is
 * something else than a directory, -ENAMETOOLONG past PATH_MAX. */
int mkdir_p(const char *path, mode_t mode);

/*
 * An id of the filesystem that holds path, the same for every path on that
 * filesystem of this machine and (with overwhelming likelihood) different
 * for any other filesystem, of this machine or another: a hash of the
 * machine's identity (/etc/machine-id, else the boot id) and the device
 * number (st_dev). Never 0. Targets that report the same id share one
 * capacity (cm_capacity() in common/cluster_map.h).
 * Returns 0 and *id, or -errno from stat(2).
 */
int fs_identity(const char *path, uint64_t *id);

/*
 * One process at a time: takes an exclusive flock(2) on path (created
 * 0600, close-on-exec) for the life of the process and writes our pid
 * into it; on success the descriptor stays open, and the kernel drops the
 * lock when the process dies, however it dies. Returns 0; -EWOULDBLOCK
 * when another process holds it, with the pid it wrote in holder
 * (holderlen bytes; "" when unknown); or -errno of open(2) or flock(2).
 */
int lock_pidfile(const char *path, char *holder, size_t holderlen);

#endif
