/*
 * strata pack SRC DEST: packs the regular files of a local directory SRC
 * (sorted by name, one sample per file) into a packed dataset DEST on the
 * cluster, through libstrata's packed-dataset writer (strata/dataset.h:
 * the one implementation of the format, shared with python/strata).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fs.h"
#include "common/config.h"
#include "strata/dataset.h"
#include "strata/strata.h"

#define PACK_IO (4u << 20)

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Appends one local file as a sample, PACK_IO bytes at a time. */
static int pack_add(struct strata_pack *p, const char *local, uint8_t *buf)
{
	int fd = open(local, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0) {
		rc = -errno;
		cli_err("pack: cannot open '%s': %s", local, strerror(-rc));
		return rc;
	}
	while (!rc) {
		ssize_t n = read(fd, buf, PACK_IO);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			cli_err("pack: cannot read '%s': %s", local, strerror(-rc));
			break;
		}
		if (n == 0)
			break;
		rc = strata_pack_append(p, buf, (size_t)n);
	}
	close(fd);
	return rc ? rc : strata_pack_end_sample(p, NULL);
}

static int pack_usage(void)
{
	printf("usage: strata pack [--mgmt ADDR | --dir DIR] [--samples-per-shard N] [--shard-mib M]\n"
	       "                   SRC DEST\n\n"
	       "Packs the regular files of the local directory SRC (sorted by name, one sample\n"
	       "each) into the packed dataset DEST on the cluster: shard-NNNNN.data (samples back\n"
	       "to back), shard-NNNNN.idx (offsets) and dataset.json, written last. A shard closes\n"
	       "at N samples (default 1024) or M MiB (default 1024). Read it with\n"
	       "strata.pytorch.StrataDataset / StrataIterableDataset.\n");
	return 0;
}

static int pack_list(const char *src, char ***names, size_t *n)
{
	DIR *d = opendir(src);
	struct dirent *e;
	size_t cap = 0;

	*names = NULL;
	*n = 0;
	if (!d) {
		cli_err("pack: cannot open directory '%s': %s", src, strerror(errno));
		return -errno;
	}
	while ((e = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", src, e->d_name);
		if (stat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		if (*n == cap) {
			char **nv;

			cap = cap ? cap * 2 : 256;
			nv = realloc(*names, cap * sizeof(**names));
			if (!nv)
				break;
			*names = nv;
		}
		(*names)[*n] = strdup(e->d_name);
		if ((*names)[*n])
			(*n)++;
	}
	closedir(d);
	if (*n)
		qsort(*names, *n, sizeof(**names), name_cmp);
	return 0;
}

int cmd_pack(int argc, char **argv)
{
	struct strata_pack_opts po;
	struct strata_pack *p = NULL;
	struct strata *s = NULL;
	struct fs_args a;
	const char *pos[2];
	char **names = NULL, path[PATH_MAX];
	uint8_t *buf = NULL;
	uint64_t total = 0;
	uint32_t nshards = 0;
	size_t n = 0;
	int npos = 0, rc, exit_code = 1;

	memset(&a, 0, sizeof(a));
	a.cmd = "pack";
	strata_pack_opts_init(&po, sizeof(po));
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t x;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return pack_usage();
		if (!strcmp(argv[i], "--mgmt") && v) {
			a.mgmt = v;
		} else if (!strcmp(argv[i], "--dir") && v) {
			a.dir = v;
		} else if (!strcmp(argv[i], "--samples-per-shard") && v) {
			if (parse_i64(v, &x) || x <= 0)
				goto usage;
			po.samples_per_shard = (uint64_t)x;
		} else if (!strcmp(argv[i], "--shard-mib") && v) {
			if (parse_i64(v, &x) || x <= 0 || x > (INT64_MAX >> 20))
				goto usage;
			po.shard_bytes = (uint64_t)x << 20;
		} else if (argv[i][0] != '-' && npos < 2) {
			pos[npos++] = argv[i];
			continue;
		} else {
			goto usage;
		}
		i++;
	}
	if (npos != 2)
		goto usage;
	rc = pack_list(pos[0], &names, &n);
	if (rc)
		return 1;
	rc = fs_connect(&a, &s);
	if (rc)
		goto out;
	buf = malloc(PACK_IO);
	if (!buf) {
		cli_err("pack: out of memory");
		goto out;
	}
	rc = strata_pack_new(s, pos[1], &po, &p);
	if (rc) {
		fs_fail("create", pos[1], rc);
		goto out;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", pos[0], names[i]);
		rc = pack_add(p, path, buf);
	}
	if (rc) {
		strata_pack_abort(p);
		fs_fail("pack into", pos[1], rc);
		goto out;
	}
	rc = strata_pack_close(p, &total, &nshards);
	if (rc) {
		fs_fail("pack into", pos[1], rc);
		goto out;
	}
	printf("packed %llu sample(s) into %u shard(s) in '%s'\n", (unsigned long long)total,
	       nshards, pos[1]);
	exit_code = 0;
out:
	free(buf);
	strata_disconnect(s);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return exit_code;
usage:
	cli_err("usage: strata pack [--mgmt ADDR | --dir DIR] [--samples-per-shard N] [--shard-mib M] SRC DEST");
	return 2;
}
