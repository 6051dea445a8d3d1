/* strata bench WHAT: dispatch to the benchmark drivers. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"

int cmd_bench(int argc, char **argv)
{
	if (argc < 2) {
		cli_err("usage: strata bench rpc [options]");
		return 2;
	}
	if (strcmp(argv[1], "rpc") == 0)
		return bench_rpc(argc - 1, argv + 1);
	if (strcmp(argv[1], "chunk") == 0)
		return bench_chunk(argc - 1, argv + 1);
	if (strcmp(argv[1], "io") == 0)
		return bench_io(argc - 1, argv + 1);
	if (strcmp(argv[1], "train") == 0)
		return bench_train(argc - 1, argv + 1);
	if (strcmp(argv[1], "ckpt") == 0)
		return bench_ckpt(argc - 1, argv + 1);
	if (strcmp(argv[1], "mem") == 0)
		return bench_mem(argc - 1, argv + 1);
	if (strcmp(argv[1], "compose") == 0)
		return bench_compose(argc - 1, argv + 1);
	if (strcmp(argv[1], "meta") == 0)
		return bench_meta(argc - 1, argv + 1);
	cli_err("bench: unknown benchmark '%s' (rpc, chunk, io, train, ckpt, mem, meta, compose)",
		argv[1]);
	return 2;
}
