/* The meta service's disk reserve (reserve.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/log.h"
#include "meta/reserve.h"

#define COMP "meta"
#define RESERVE_FILE "meta.reserve"

static int disk_free(const struct meta_reserve *r, uint64_t *out)
{
	char dir[sizeof(r->path)];
	struct statvfs sv;
	char *slash;

	memcpy(dir, r->path, sizeof(dir));
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (statvfs(slash ? dir : ".", &sv) < 0)
		return -errno;
	*out = (uint64_t)sv.f_bavail * sv.f_frsize;
	return 0;
}

static int take(struct meta_reserve *r)
{
	int fd = open(r->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	int err;

	if (fd < 0)
		return -errno;
	err = posix_fallocate(fd, 0, (off_t)r->bytes);
	if (!err && fsync(fd) < 0)
		err = errno;
	close(fd);
	if (err) {
		unlink(r->path);
		return -err;
	}
	r->held = true;
	__atomic_store_n(&r->tight, false, __ATOMIC_RELAXED);
	return 0;
}

static void give_back(struct meta_reserve *r, const char *why)
{
	if (unlink(r->path) < 0 && errno != ENOENT)
		log_warn(COMP, "cannot remove '%s': %s", r->path, strerror(errno));
	r->held = false;
	__atomic_store_n(&r->tight, true, __ATOMIC_RELAXED);
	__atomic_fetch_add(&r->releases, 1, __ATOMIC_RELAXED);
	log_warn(COMP, "the metadata disk is full (%s): gave back the %llu-byte reserve; "
		 "creates are refused (ENOSPC) and deletes go on until space is back",
		 why, (unsigned long long)r->bytes);
}

int meta_reserve_init(struct meta_reserve *r, const char *dir, uint64_t bytes)
{
	uint64_t avail = 0;
	struct stat st;
	int rc;

	memset(r, 0, sizeof(*r));
	if (snprintf(r->path, sizeof(r->path), "%s/%s", dir, RESERVE_FILE) >=
	    (int)sizeof(r->path))
		return -ENAMETOOLONG;
	r->bytes = bytes;
	if (!bytes) {
		unlink(r->path);
		return 0;
	}
	/* Held from an earlier run, at the same size: keep it. */
	if (stat(r->path, &st) == 0 && (uint64_t)st.st_blocks * 512 >= bytes) {
		r->held = true;
		return 0;
	}
	rc = disk_free(r, &avail);
	if (!rc && avail >= 2 * bytes)
		rc = take(r);
	else if (!rc)
		rc = -ENOSPC;
	if (rc == -ENOSPC) {
		unlink(r->path);
		r->tight = true;
		log_warn(COMP, "the metadata disk has %llu bytes free, less than twice the "
			 "%llu-byte reserve (meta.reserve): creates are refused until space is back",
			 (unsigned long long)avail, (unsigned long long)bytes);
		return 0;
	}
	if (rc)
		log_error(COMP, "cannot make the reserve '%s': %s", r->path, strerror(-rc));
	return rc;
}

bool meta_reserve_poll(struct meta_reserve *r)
{
	uint64_t avail;

	if (!r->bytes || disk_free(r, &avail))
		return false;
	if (r->held && avail < r->bytes) {
		give_back(r, "less free than the reserve");
		return true;
	}
	if (!r->held && avail >= 2 * r->bytes && take(r) == 0) {
		log_info(COMP, "the metadata disk has room again (%llu bytes free): took the "
			 "%llu-byte reserve back; creates are served", (unsigned long long)avail,
			 (unsigned long long)r->bytes);
		return true;
	}
	return false;
}

bool meta_reserve_release(struct meta_reserve *r)
{
	if (!r->held)
		return false;
	give_back(r, "a removal failed with ENOSPC");
	return true;
}

bool meta_reserve_tight(const struct meta_reserve *r)
{
	return __atomic_load_n(&r->tight, __ATOMIC_RELAXED);
}
