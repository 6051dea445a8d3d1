/*
 * strata cache: the compute-node read cache (docs/cache.md).
 *
 *   strata cache stats [--dir DIR] [--json]
 *
 * prints the node's counters of the cache directory DIR ($STRATA_CACHE_DIR
 * by default): every process that reads through that directory adds to
 * them. A DRAM-only cache is a process's own (strata_cache_stats()).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"
#include "strata/cache.h"

static int cache_usage(void)
{
	printf("usage: strata cache stats [--dir DIR] [--json]\n\n"
	       "The counters of the compute-node read cache in DIR (default $STRATA_CACHE_DIR),\n"
	       "summed over every process of this node that uses it: hits, misses, bytes,\n"
	       "evictions, and the disk tier's size now.\n");
	return 0;
}

static void print_stats(const char *dir, const struct strata_cache_stats *st, bool json)
{
	uint64_t n = st->hits + st->misses;

	if (json) {
		json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
				      "dir", dir, "hits", (json_int_t)st->hits,
				      "misses", (json_int_t)st->misses,
				      "hit_bytes", (json_int_t)st->hit_bytes,
				      "fill_bytes", (json_int_t)st->fill_bytes,
				      "disk_hits", (json_int_t)st->disk_hits,
				      "evictions", (json_int_t)st->evictions,
				      "disk_evictions", (json_int_t)st->disk_evictions,
				      "disk_corrupt", (json_int_t)st->disk_corrupt,
				      "prefetched", (json_int_t)st->prefetched,
				      "disk_bytes", (json_int_t)st->disk_bytes);

		if (o)
			json_dumpf(o, stdout, JSON_COMPACT);
		printf("\n");
		json_decref(o);
		return;
	}
	printf("cache %s\n", dir);
	printf("  hits          %llu (%.1f%%), %llu from disk\n", (unsigned long long)st->hits,
	       n ? 100.0 * (double)st->hits / (double)n : 0.0, (unsigned long long)st->disk_hits);
	printf("  misses        %llu\n", (unsigned long long)st->misses);
	printf("  bytes         %llu served from the cache, %llu read from storage into it\n",
	       (unsigned long long)st->hit_bytes, (unsigned long long)st->fill_bytes);
	printf("  evictions     %llu from DRAM, %llu from disk\n", (unsigned long long)st->evictions,
	       (unsigned long long)st->disk_evictions);
	printf("  corrupt       %llu disk blocks failed their checks (dropped)\n",
	       (unsigned long long)st->disk_corrupt);
	printf("  prefetched    %llu blocks\n", (unsigned long long)st->prefetched);
	printf("  disk          %llu bytes now\n", (unsigned long long)st->disk_bytes);
}

int cmd_cache(int argc, char **argv)
{
	struct strata_cache_stats st = { .stats_size = sizeof(st) };
	const char *dir = getenv("STRATA_CACHE_DIR");
	bool json = false;
	int rc;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
		return argc < 2 ? (cache_usage(), 2) : cache_usage();
	if (strcmp(argv[1], "stats")) {
		cli_err("cache: unknown subcommand '%s' (see 'strata cache --help')", argv[1]);
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--dir") && i + 1 < argc) {
			dir = argv[++i];
		} else {
			cli_err("cache stats: bad or unknown argument '%s' (see 'strata cache --help')",
				argv[i]);
			return 2;
		}
	}
	if (!dir || !*dir) {
		cli_err("cache stats: no cache directory: pass --dir DIR or set $STRATA_CACHE_DIR "
			"(a DRAM-only cache is its process's own)");
		return 2;
	}
	rc = strata_cache_dir_stats(dir, &st);
	if (rc == -ENOENT) {
		cli_err("cache stats: '%s' holds no cache (no stats file): nothing has used it yet",
			dir);
		return 1;
	}
	if (rc) {
		cli_err("cache stats: cannot read the cache in '%s': %s", dir, strata_strerror(rc));
		return 1;
	}
	print_stats(dir, &st, json);
	return 0;
}
