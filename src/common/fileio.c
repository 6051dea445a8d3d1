/* Whole-buffer file I/O and mkdir -p (fileio.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
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

/* FNV-1a over len bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t len)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < len; i++) {
		h ^= b[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

/* The first line of the first of the files that can be read, into buf
 * (NUL-terminated); "" when none can. */
static void machine_identity(char *buf, size_t len)
{
	static const char *const files[] = { "/etc/machine-id",
					     "/proc/sys/kernel/random/boot_id" };

	buf[0] = 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]) && !buf[0]; i++) {
		int fd = open(files[i], O_RDONLY | O_CLOEXEC);
		ssize_t n;

		if (fd < 0)
			continue;
		n = read(fd, buf, len - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		buf[strcspn(buf, "\n")] = 0;
	}
}

int fs_identity(const char *path, uint64_t *id)
{
	char machine[128];
	uint64_t dev, h = 0xcbf29ce484222325ULL;
	struct stat sb;

	if (stat(path, &sb) < 0)
		return -errno;
	machine_identity(machine, sizeof(machine));
	dev = (uint64_t)sb.st_dev;
	h = fnv1a(h, machine, strlen(machine));
	h = fnv1a(h, &dev, sizeof(dev));
	*id = h ? h : 1;
	return 0;
}

int lock_pidfile(const char *path, char *holder, size_t holderlen)
{
	char pid[32];
	int fd, n, err;

	if (holderlen)
		holder[0] = '\0';
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		err = errno;
		n = (int)pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		if (holderlen)
			snprintf(holder, holderlen, "%s", pid);
		close(fd);
		return err == EWOULDBLOCK ? -EWOULDBLOCK : -err;
	}
	n = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	/* The pid is for the message of the next one refused: a failure to
	 * write it leaves the lock whole. */
	if (ftruncate(fd, 0) == 0)
		(void)!pwrite(fd, pid, (size_t)n, 0);
	return 0;	/* fd stays open: the lock lives as long as we do */
}
