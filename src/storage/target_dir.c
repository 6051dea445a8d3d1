#include "storage/target_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fileio.h"
#include "common/log.h"

#define OWNER_FILE "target.owner"

int target_dirs_parse(const char *list, char *dirs, size_t cap, int max, char *err,
		      size_t errlen)
{
	const char *p = list;
	int n = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return 0;
	for (;;) {
		const char *end = strchr(p, ','), *e;
		size_t len;
		char *d;

		if (!end)
			end = p + strlen(p);
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		e = end;
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		len = (size_t)(e - p);
		if (!len) {
			snprintf(err, errlen, "an empty directory in the list");
			return -EINVAL;
		}
		if (*p != '/') {
			snprintf(err, errlen, "'%.*s' is not an absolute path", (int)len, p);
			return -EINVAL;
		}
		if (len >= cap) {
			snprintf(err, errlen, "'%.*s' is too long", (int)len, p);
			return -EINVAL;
		}
		if (n == max) {
			snprintf(err, errlen, "more than %d directories", max);
			return -EINVAL;
		}
		d = dirs + (size_t)n * cap;
		memcpy(d, p, len);
		d[len] = '\0';
		while (len > 1 && d[len - 1] == '/')
			d[--len] = '\0';
		for (int i = 0; i < n; i++)
			if (!strcmp(dirs + (size_t)i * cap, d)) {
				snprintf(err, errlen, "'%s' is named twice", d);
				return -EINVAL;
			}
		n++;
		if (!*end)
			return n;
		p = end + 1;
	}
}

/* Reads dir's owner file: 0 and *ident, *idx; -ENOENT; -EIO (logged). */
static int owner_read(const char *path, uint64_t *ident, uint32_t *idx)
{
	char text[64];
	int fd = open(path, O_RDONLY | O_CLOEXEC), n;
	unsigned long long a;
	unsigned b;
	char nl;
	ssize_t len;

	if (fd < 0)
		return -errno;
	len = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (len < 0)
		return -EIO;
	text[len] = '\0';
	n = sscanf(text, "%16llx %u%c", &a, &b, &nl);
	if (n != 3 || nl != '\n' || !a || b >= TARGET_DIRS_MAX) {
		log_error("storage", "'%s' does not hold a target's owner (a data directory "
			  "identity and a target index); restore it, or remove it only if this "
			  "directory holds no other node's chunks", path);
		return -EIO;
	}
	*ident = a;
	*idx = b;
	return 0;
}

static int owner_write(const char *dir, const char *path, uint64_t ident, uint32_t idx)
{
	char tmp[PATH_MAX], text[64];
	int fd, rc, len;

	if (snprintf(tmp, sizeof(tmp), "%s/%s.tmp", dir, OWNER_FILE) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	len = snprintf(text, sizeof(text), "%016" PRIx64 " %" PRIu32 "\n", ident, idx);
	rc = write_full(fd, text, (size_t)len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int target_dir_claim(const char *dir, uint64_t ident, uint32_t idx)
{
	char path[PATH_MAX];
	uint64_t had_ident = 0;
	uint32_t had_idx = 0;
	struct stat sb;
	int rc;

	if (stat(dir, &sb) < 0) {
		rc = -errno;
		log_error("storage", "target %u: cannot use '%s': %s (a target directory is not "
			  "created: mount its disk, or create it)", idx, dir, strerror(errno));
		return rc;
	}
	if (!S_ISDIR(sb.st_mode)) {
		log_error("storage", "target %u: '%s' is not a directory", idx, dir);
		return -ENOTDIR;
	}
	if (snprintf(path, sizeof(path), "%s/%s", dir, OWNER_FILE) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	rc = owner_read(path, &had_ident, &had_idx);
	if (rc == -ENOENT) {
		rc = owner_write(dir, path, ident, idx);
		if (rc)
			log_error("storage", "target %u: cannot write '%s': %s", idx, path,
				  strerror(-rc));
		return rc;
	}
	if (rc)
		return rc;
	if (had_ident != ident || had_idx != idx) {
		log_error("storage", "target %u: '%s' belongs to target %u of the data directory "
			  "with identity %016" PRIx64 ", not to target %u of this one (%016" PRIx64
			  "): a disk moved to another slot or node, or a directory named twice; "
			  "put it back where it was", idx, dir,
			  had_idx, had_ident, idx, ident);
		return -EEXIST;
	}
	return 0;
}
