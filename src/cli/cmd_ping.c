/* strata ping ADDR [--count N]: HELLO + PING round trips to a daemon. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "common/config.h"
#include "net/proto.h"
#include "net/reactor.h"
#include "strata/errors.h"

int cmd_ping(int argc, char **argv)
{
	const char *addr = NULL;
	int64_t count = 3;
	struct rpc_client *cl;
	int fails = 0, rc;
	char host[256];
	int port;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--count") == 0 && i + 1 < argc) {
			if (parse_i64(argv[++i], &count) || count < 1 || count > 1000000) {
				cli_err("ping: --count: '%s' is not in 1..1000000", argv[i]);
				return 2;
			}
		} else if (!addr && argv[i][0] != '-') {
			addr = argv[i];
		} else {
			cli_err("ping: unexpected argument '%s'", argv[i]);
			return 2;
		}
	}
	if (!addr) {
		cli_err("usage: strata ping HOST:PORT [--count N]");
		return 2;
	}
	if (parse_hostport(addr, host, sizeof(host), &port) || port == 0) {
		cli_err("ping: '%s' is not HOST:PORT", addr);
		return 2;
	}
	/* The credential of $STRATA_TOKEN or $STRATA_TOKEN_FILE, if any. */
	if (cli_rpc_client("strata-ping", 3000, NULL, NULL, NULL, &cl))
		return 1;
	for (int64_t i = 0; i < count; i++) {
		struct rpc_sync_args a = { .op = OP_PING, .timeout_ms = 3000 };
		struct rpc_result res;
		uint64_t t0 = reactor_now_ms();

		rc = rpc_call_sync(cl, addr, &a, &res);
		rpc_result_release(&res);
		if (rc) {
			printf("ping %s: %s\n", addr, strata_strerror(rc));
			fails++;
		} else {
			printf("ping %s: ok, %llu ms\n", addr, (unsigned long long)(reactor_now_ms() - t0));
		}
	}
	rpc_client_free(cl);
	return fails ? 1 : 0;
}
