/* What the service contract (service.h) gives every service: the metrics
 * sink, the process's incarnation and the data directory's identity. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/fileio.h"
#include "common/log.h"
#include "common/service.h"

#define IDENT_FILE "node.ident"
#define IDENT_HEX 16

uint64_t service_incarnation(void)
{
	/* The pid tells apart two starts within one clock tick. */
	uint64_t inc = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 48);

	return inc ? inc : 1;
}

static int ident_read(const char *path, uint64_t *out)
{
	char text[IDENT_HEX + 2], *end;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n < IDENT_HEX || (n == IDENT_HEX + 1 && text[IDENT_HEX] != '\n') ||
	    n > IDENT_HEX + 1) {
		log_error("service", "'%s' does not hold a data directory identity (16 hex "
			  "digits); restore it, or remove it only if this directory holds no data "
			  "of another node", path);
		return -EIO;
	}
	text[IDENT_HEX] = '\0';
	errno = 0;
	*out = strtoull(text, &end, 16);
	if (errno || *end || !*out) {
		log_error("service", "'%s' does not hold a data directory identity (16 hex "
			  "digits, not all zero)", path);
		return -EIO;
	}
	return 0;
}

static int ident_create(const char *data, const char *path, uint64_t *out)
{
	char tmp[PATH_MAX], text[IDENT_HEX + 2];
	uint64_t v = 0;
	int fd, rc;

	while (!v)
		if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v))
			return -errno;
	if (snprintf(tmp, sizeof(tmp), "%s/%s.tmp", data, IDENT_FILE) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	snprintf(text, sizeof(text), "%016" PRIx64 "\n", v);
	rc = write_full(fd, text, IDENT_HEX + 1);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	close(fd);
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc) {
		log_error("service", "cannot write '%s': %s", path, strerror(-rc));
		unlink(tmp);
		return rc;
	}
	*out = v;
	return 0;
}

int service_data_ident(const char *data, uint64_t *out)
{
	char path[PATH_MAX];
	int rc;

	if (snprintf(path, sizeof(path), "%s/%s", data, IDENT_FILE) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	rc = ident_read(path, out);
	if (rc == -ENOENT)
		rc = ident_create(data, path, out);
	else if (rc && rc != -EIO)
		log_error("service", "cannot read '%s': %s", path, strerror(-rc));
	return rc;
}

void metrics_head(struct bbuf *out, const char *name, const char *type, const char *help)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);

	if (n > 0)
		bbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void metrics_put(struct bbuf *out, const char *name, const char *type, const char *help,
		 double value)
{
	char line[160];
	int n;

	metrics_head(out, name, type, help);
	n = snprintf(line, sizeof(line), "%s %.17g\n", name, value);
	if (n > 0)
		bbuf_append(out, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}

void metrics_series(struct bbuf *out, const char *name, const char *label, const char *value,
		    double v)
{
	char line[64];
	int n;

	bbuf_append(out, name, strlen(name));
	bbuf_append(out, "{", 1);
	bbuf_append(out, label, strlen(label));
	bbuf_append(out, "=\"", 2);
	for (const char *s = value; *s; s++) {
		if (*s == '\\' || *s == '"')
			bbuf_append(out, "\\", 1);
		if (*s == '\n')
			bbuf_append(out, "\\n", 2);
		else
			bbuf_append(out, s, 1);
	}
	n = snprintf(line, sizeof(line), "\"} %.17g\n", v);
	bbuf_append(out, line, (size_t)n);
}
