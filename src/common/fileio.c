/* Whole-buffer file I/O and mkdir -p (fileio.h). */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"

/* One loop for the four: off < 0 means the file position. */
static int xfer_full(int fd, void *buf, size_t len, int64_t off, bool rd)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n;

		if (off < 0)
			n = rd ? read(fd, p, len) : write(fd, p, len);
		else
			n = rd ? pread(fd, p, len, (off_t)off) : pwrite(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		if (off >= 0)
			off += n;
	}
	return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
	return xfer_full(fd, (void *)buf, len, -1, false);
}

int read_full(int fd, void *buf, size_t len)
{
	return xfer_full(fd, buf, len, -1, true);
}

int pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
	if (off > INT64_MAX)
		return -EINVAL;
	return xfer_full(fd, (void *)buf, len, (int64_t)off, false);
}

int pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	if (off > INT64_MAX)
		return -EINVAL;
	return xfer_full(fd, buf, len, (int64_t)off, true);
}

/* mkdir that accepts an existing directory: -ENOTDIR (a component on the
 * way) or -EEXIST (the last one) when something else is there. */
static int mkdir_one(const char *path, mode_t mode, bool last)
{
	struct stat st;

	if (mkdir(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	if (stat(path, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return last ? -EEXIST : -ENOTDIR;
	return 0;
}

int mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	size_t n = strlen(path);
	int rc;

	if (n == 0)
		return -ENOENT;
	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/' || p[-1] == '/')
			continue;
		*p = '\0';
		rc = mkdir_one(tmp, mode, false);
		*p = '/';
		if (rc)
			return rc;
	}
	return mkdir_one(tmp, mode, true);
}
