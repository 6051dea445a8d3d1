/*
 * strata pack SRC DEST: packs the regular files of a local directory SRC
 * (sorted by name, one sample per file) into a packed dataset DEST on the
 * cluster -- shard files of appended samples, a binary offset index per
 * shard and dataset.json written last (the format of
 * python/strata/dataset.py, docs/python.md).
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

#include <jansson.h>

#include "cli.h"
#include "cli_fs.h"
#include "strata/strata.h"

#define PACK_IO (4u << 20)

struct pack {
	struct strata *s;
	const char *dest;
	uint64_t per_shard, shard_bytes;
	json_t *shards;
	struct strata_file *f;
	uint8_t *idx;			/* "STRPIDX1", count, (off, len)... */
	size_t idx_len, idx_cap;
	uint64_t off, count, total;
	uint32_t nshard;
	uint8_t *buf;
};

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static int pack_idx_add(struct pack *p, uint64_t off, uint64_t len)
{
	if (p->idx_len + 16 > p->idx_cap) {
		size_t cap = p->idx_cap ? p->idx_cap * 2 : 4096;
		uint8_t *n = realloc(p->idx, cap);

		if (!n)
			return -ENOMEM;
		p->idx = n;
		p->idx_cap = cap;
	}
	put64(p->idx + p->idx_len, off);
	put64(p->idx + p->idx_len + 8, len);
	p->idx_len += 16;
	return 0;
}

static int pack_write_file(struct strata *s, const char *path, const void *buf, size_t len)
{
	struct strata_file *f;
	ssize_t w;
	int rc = strata_open(s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC, 0644, &f);

	if (rc)
		return rc;
	w = len ? strata_pwrite(f, buf, len, 0) : 0;
	rc = strata_close(f);
	return w < 0 ? (int)w : rc;
}

static int pack_open_shard(struct pack *p)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/shard-%05u.data", p->dest, p->nshard);
	p->off = 0;
	p->count = 0;
	p->idx_len = 16;
	if (!p->idx) {
		p->idx = malloc(4096);
		p->idx_cap = 4096;
		if (!p->idx)
			return -ENOMEM;
	}
	memcpy(p->idx, "STRPIDX1", 8);
	return strata_open(p->s, path, STRATA_O_WRONLY | STRATA_O_CREAT | STRATA_O_TRUNC, 0644,
			   &p->f);
}

static int pack_close_shard(struct pack *p)
{
	char path[PATH_MAX], name[64];
	json_t *o;
	int rc;

	if (!p->f)
		return 0;
	rc = strata_close(p->f);
	p->f = NULL;
	if (rc)
		return rc;
	put64(p->idx + 8, p->count);
	snprintf(path, sizeof(path), "%s/shard-%05u.idx", p->dest, p->nshard);
	rc = pack_write_file(p->s, path, p->idx, p->idx_len);
	if (rc)
		return rc;
	o = json_object();
	if (!o)
		return -ENOMEM;
	snprintf(name, sizeof(name), "shard-%05u.data", p->nshard);
	json_object_set_new(o, "data", json_string(name));
	snprintf(name, sizeof(name), "shard-%05u.idx", p->nshard);
	json_object_set_new(o, "index", json_string(name));
	json_object_set_new(o, "samples", json_integer((json_int_t)p->count));
	json_object_set_new(o, "bytes", json_integer((json_int_t)p->off));
	json_array_append_new(p->shards, o);
	p->nshard++;
	return 0;
}

/* Appends one local file as a sample. */
static int pack_add(struct pack *p, const char *local)
{
	int fd = open(local, O_RDONLY), rc = 0;
	uint64_t start;

	if (fd < 0) {
		cli_err("pack: cannot open '%s': %s", local, strerror(errno));
		return -errno;
	}
	if (!p->f)
		rc = pack_open_shard(p);
	start = p->off;
	while (!rc) {
		ssize_t n = read(fd, p->buf, PACK_IO), w;

		if (n < 0) {
			rc = -errno;
			cli_err("pack: cannot read '%s': %s", local, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		w = strata_pwrite(p->f, p->buf, (size_t)n, p->off);
		if (w < 0)
			rc = (int)w;
		else
			p->off += (uint64_t)n;
	}
	close(fd);
	if (!rc)
		rc = pack_idx_add(p, start, p->off - start);
	if (rc)
		return rc;
	p->count++;
	p->total++;
	if (p->count >= p->per_shard || p->off >= p->shard_bytes)
		rc = pack_close_shard(p);
	return rc;
}

static int pack_usage(void)
{
	printf("usage: strata pack [--mgmt ADDR | --dir DIR] [--samples-per-shard N] [--shard-mib M]\n"
	       "                   SRC DEST\n\n"
	       "Packs the regular files of the local directory SRC (sorted by name, one sample\n"
	       "each) into the packed dataset DEST on the cluster: shard-NNNNN.data (samples back\n"
	       "to back), shard-NNNNN.idx (offsets) and dataset.json, written last. A shard closes\n"
	       "at N samples (default 1024) or M MiB (default 1024). Read it with\n"
	       "strata.torch.StrataDataset / StrataIterableDataset.\n");
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
	struct fs_args a;
	struct pack p = { .per_shard = 1024, .shard_bytes = 1ull << 30 };
	const char *pos[2];
	char **names = NULL, path[PATH_MAX];
	size_t n = 0;
	int npos = 0, rc, exit_code = 1;
	char *text = NULL;
	json_t *meta = NULL;

	memset(&a, 0, sizeof(a));
	a.cmd = "pack";
	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		char *end = NULL;

		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
			return pack_usage();
		if (!strcmp(argv[i], "--mgmt") && v) {
			a.mgmt = v;
		} else if (!strcmp(argv[i], "--dir") && v) {
			a.dir = v;
		} else if (!strcmp(argv[i], "--samples-per-shard") && v) {
			p.per_shard = strtoull(v, &end, 10);
			if (*end || !p.per_shard)
				goto usage;
		} else if (!strcmp(argv[i], "--shard-mib") && v) {
			p.shard_bytes = strtoull(v, &end, 10) << 20;
			if (*end || !p.shard_bytes)
				goto usage;
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
	p.dest = pos[1];
	rc = pack_list(pos[0], &names, &n);
	if (rc)
		return 1;
	rc = fs_connect(&a, &p.s);
	if (rc)
		goto out_names;
	p.buf = malloc(PACK_IO);
	p.shards = json_array();
	if (!p.buf || !p.shards) {
		rc = -ENOMEM;
		goto out;
	}
	rc = strata_mkdir(p.s, p.dest, 0755);
	if (rc && rc != -EEXIST) {
		fs_fail("create", p.dest, rc);
		goto out;
	}
	rc = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		snprintf(path, sizeof(path), "%s/%s", pos[0], names[i]);
		rc = pack_add(&p, path);
	}
	if (!rc)
		rc = pack_close_shard(&p);
	if (!rc) {
		meta = json_pack("{s:s, s:i, s:I, s:O}", "format", "strata-packed", "version", 1,
				 "samples", (json_int_t)p.total, "shards", p.shards);
		text = meta ? json_dumps(meta, JSON_COMPACT) : NULL;
		snprintf(path, sizeof(path), "%s/dataset.json", p.dest);
		rc = text ? pack_write_file(p.s, path, text, strlen(text)) : -ENOMEM;
	}
	if (rc) {
		fs_fail("pack into", p.dest, rc);
		goto out;
	}
	printf("packed %llu sample(s) into %u shard(s) in '%s'\n", (unsigned long long)p.total,
	       p.nshard, p.dest);
	exit_code = 0;
out:
	if (p.f)
		strata_close(p.f);
	free(text);
	json_decref(meta);
	json_decref(p.shards);
	free(p.buf);
	free(p.idx);
	strata_disconnect(p.s);
out_names:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return exit_code;
usage:
	cli_err("usage: strata pack [--mgmt ADDR | --dir DIR] [--samples-per-shard N] [--shard-mib M] SRC DEST");
	return 2;
}
