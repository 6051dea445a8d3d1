/*
 * struct_layout: the size of every struct of libstrata's public headers
 * that the Python binding mirrors with ctypes, and the offset and size of
 * each field, as JSON on stdout. tests/integration/test_python_layout.py
 * compares them with python/strata's ctypes.Structure classes, so a field
 * added to or moved in a header cannot go unnoticed by the binding.
 *
 *   {"strata_stat": {"size": 72, "fields": {"ino": [0, 8], ...}}, ...}
 *
 * Takes no arguments; exits 0.
 */
#include <stddef.h>
#include <stdio.h>

#include "strata/checkpoint.h"
#include "strata/dataset.h"
#include "strata/mem.h"
#include "strata/strata.h"

static int first_struct = 1, first_field;

static void begin(const char *name, size_t size)
{
	printf("%s\n \"%s\": {\"size\": %zu, \"fields\": {", first_struct ? "{" : ",", name, size);
	first_struct = 0;
	first_field = 1;
}

static void field(const char *name, size_t off, size_t size)
{
	printf("%s\"%s\": [%zu, %zu]", first_field ? "" : ", ", name, off, size);
	first_field = 0;
}

static void end(void)
{
	printf("}}");
}

#define BEGIN(s) begin(#s, sizeof(struct s))
#define FIELD(s, f) field(#f, offsetof(struct s, f), sizeof(((struct s *)0)->f))

int main(void)
{
	BEGIN(strata_opts);
	FIELD(strata_opts, opts_size); FIELD(strata_opts, timeout_ms);
	FIELD(strata_opts, retry_ms); FIELD(strata_opts, io_threads);
	FIELD(strata_opts, token); FIELD(strata_opts, tls_ca);
	FIELD(strata_opts, cache_mem_bytes); FIELD(strata_opts, cache_dir);
	FIELD(strata_opts, cache_disk_bytes); FIELD(strata_opts, cache_block);
	FIELD(strata_opts, meta_cache_ms); FIELD(strata_opts, meta_cache_entries);
	end();

	BEGIN(strata_stat);
	FIELD(strata_stat, ino); FIELD(strata_stat, mode); FIELD(strata_stat, nlink);
	FIELD(strata_stat, uid); FIELD(strata_stat, gid); FIELD(strata_stat, size);
	FIELD(strata_stat, atime_ns); FIELD(strata_stat, mtime_ns); FIELD(strata_stat, ctime_ns);
	FIELD(strata_stat, chunk_size); FIELD(strata_stat, stripe);
	end();

	BEGIN(strata_dirent);
	FIELD(strata_dirent, name); FIELD(strata_dirent, ino); FIELD(strata_dirent, mode);
	end();

	BEGIN(strata_statfs);
	FIELD(strata_statfs, capacity); FIELD(strata_statfs, used); FIELD(strata_statfs, files);
	FIELD(strata_statfs, dirs); FIELD(strata_statfs, nodes); FIELD(strata_statfs, targets);
	FIELD(strata_statfs, chains); FIELD(strata_statfs, replication);
	end();

	BEGIN(strata_layout);
	FIELD(strata_layout, chunk_size); FIELD(strata_layout, stripe);
	end();

	BEGIN(strata_cqe);
	FIELD(strata_cqe, user_data); FIELD(strata_cqe, res);
	end();

	BEGIN(strata_pack_opts);
	FIELD(strata_pack_opts, opts_size); FIELD(strata_pack_opts, samples_per_shard);
	FIELD(strata_pack_opts, shard_bytes);
	end();

	BEGIN(strata_ckpt_tensor);
	FIELD(strata_ckpt_tensor, name); FIELD(strata_ckpt_tensor, dtype);
	FIELD(strata_ckpt_tensor, ndim); FIELD(strata_ckpt_tensor, shape);
	FIELD(strata_ckpt_tensor, data); FIELD(strata_ckpt_tensor, len);
	end();

	BEGIN(strata_ckpt_save_opts);
	FIELD(strata_ckpt_save_opts, opts_size); FIELD(strata_ckpt_save_opts, rank);
	FIELD(strata_ckpt_save_opts, world_size); FIELD(strata_ckpt_save_opts, tag);
	FIELD(strata_ckpt_save_opts, meta_json); FIELD(strata_ckpt_save_opts, depth);
	FIELD(strata_ckpt_save_opts, io_size); FIELD(strata_ckpt_save_opts, wait_ms);
	FIELD(strata_ckpt_save_opts, keep_last); FIELD(strata_ckpt_save_opts, replace);
	FIELD(strata_ckpt_save_opts, writers); FIELD(strata_ckpt_save_opts, stats);
	FIELD(strata_ckpt_save_opts, ready);
	end();

	BEGIN(strata_ckpt_save_stats);
	FIELD(strata_ckpt_save_stats, stats_size); FIELD(strata_ckpt_save_stats, write_s);
	FIELD(strata_ckpt_save_stats, sync_s); FIELD(strata_ckpt_save_stats, part_s);
	FIELD(strata_ckpt_save_stats, wait_s); FIELD(strata_ckpt_save_stats, manifest_s);
	FIELD(strata_ckpt_save_stats, commit_s); FIELD(strata_ckpt_save_stats, prune_s);
	FIELD(strata_ckpt_save_stats, bytes); FIELD(strata_ckpt_save_stats, writers);
	FIELD(strata_ckpt_save_stats, pieces);
	end();

	BEGIN(strata_ckpt_info);
	FIELD(strata_ckpt_info, name); FIELD(strata_ckpt_info, dtype);
	FIELD(strata_ckpt_info, rank); FIELD(strata_ckpt_info, ndim);
	FIELD(strata_ckpt_info, shape); FIELD(strata_ckpt_info, len);
	FIELD(strata_ckpt_info, crc32c);
	end();

	BEGIN(strata_ckpt_dst);
	FIELD(strata_ckpt_dst, index); FIELD(strata_ckpt_dst, data); FIELD(strata_ckpt_dst, len);
	end();

	BEGIN(strata_ckpt_copy);
	FIELD(strata_ckpt_copy, dst); FIELD(strata_ckpt_copy, src); FIELD(strata_ckpt_copy, len);
	end();

	BEGIN(strata_mem_opts);
	FIELD(strata_mem_opts, opts_size); FIELD(strata_mem_opts, timeout_ms);
	FIELD(strata_mem_opts, replicas); FIELD(strata_mem_opts, vnodes);
	FIELD(strata_mem_opts, io_threads); FIELD(strata_mem_opts, token);
	end();

	BEGIN(strata_mem_item);
	FIELD(strata_mem_item, key); FIELD(strata_mem_item, buf); FIELD(strata_mem_item, len);
	FIELD(strata_mem_item, flags); FIELD(strata_mem_item, status);
	end();

	BEGIN(strata_mem_stats);
	FIELD(strata_mem_stats, capacity); FIELD(strata_mem_stats, used);
	FIELD(strata_mem_stats, objects); FIELD(strata_mem_stats, pinned);
	FIELD(strata_mem_stats, evictions); FIELD(strata_mem_stats, spilled);
	FIELD(strata_mem_stats, reloaded); FIELD(strata_mem_stats, nodes);
	FIELD(strata_mem_stats, nodes_up);
	end();

	printf("\n}\n");
	return 0;
}
