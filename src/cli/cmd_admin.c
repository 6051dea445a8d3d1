/*
 * Admin commands that change the cluster map through mgmt:
 *   strata node drain NODE_ID       move a node's replicas elsewhere
 *   strata target replace OLD NEW   rebuild a lost target on a spare
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_fs.h"
#include "common/config.h"
#include "net/rpc.h"
#include "proto/mgmt.h"
#include "strata/errors.h"

static int admin_call(const struct fs_args *a, const char *addr, uint32_t action, uint32_t arg,
		      uint32_t arg2, uint32_t *result)
{
	struct rpc_client *cl;
	struct mg_admin rq = { action, arg, arg2, 0 };
	struct proto_sync s = { .timeout_ms = 10000 };
	struct mg_result rep = { 0 };
	int rc;

	if (cli_rpc_client("strata-admin", 10000, a->token, a->mgmt, a->dir, &cl))
		return -EINVAL;
	rc = mg_admin_call_sync(cl, addr, &rq, &s, &rep);
	*result = rep.result;
	rpc_client_free(cl);
	return rc;
}

static int parse_id(const char *cmd, const char *what, const char *s, uint32_t *out)
{
	int64_t v;

	if (parse_i64(s, &v) || v < 1 || v > UINT32_MAX) {
		cli_err("%s: '%s' is not a %s", cmd, s, what);
		return 2;
	}
	*out = (uint32_t)v;
	return 0;
}

int cmd_admin(int argc, char **argv)
{
	struct fs_args a;
	char addr[256], name[64];
	uint32_t x, y = 0, result = 0;
	int rc;

	/* "node drain ..." / "target replace ...": parse from the verb on. */
	if (argc < 2) {
		cli_err("usage: strata node drain NODE_ID | strata target replace OLD NEW");
		return 2;
	}
	snprintf(name, sizeof(name), "%s %s", argv[0], argv[1]);
	argv[1] = name;
	rc = fs_parse(argc - 1, argv + 1, "", false, &a);
	if (rc)
		return rc;
	if (strcmp(argv[0], "node") == 0 && strcmp(name, "node drain") == 0) {
		if (a.npos != 1) {
			cli_err("usage: strata node drain NODE_ID [--mgmt ADDR | --dir DIR]");
			return 2;
		}
		if ((rc = parse_id(name, "node id", a.pos[0], &x)))
			return rc;
		if ((rc = fs_mgmt_addr(&a, addr, sizeof(addr))))
			return rc;
		rc = admin_call(&a, addr, MGMT_ADMIN_DRAIN, x, 0, &result);
		if (rc) {
			cli_err("cannot drain node %u: %s", x, strata_strerror(rc));
			return 1;
		}
		printf("node %u draining: new replicas resync, then it leaves its chains%s\n", x,
		       result ? "" : "");
		if (result)
			printf("warning: %u replica(s) found no other node to go to; those chains stay on node %u\n",
			       result, x);
		return 0;
	}
	if (strcmp(argv[0], "target") == 0 && strcmp(name, "target replace") == 0) {
		if (a.npos != 2) {
			cli_err("usage: strata target replace OLD_TARGET NEW_TARGET [--mgmt ADDR | --dir DIR]");
			return 2;
		}
		if ((rc = parse_id(name, "target id", a.pos[0], &x)) ||
		    (rc = parse_id(name, "target id", a.pos[1], &y)))
			return rc;
		if ((rc = fs_mgmt_addr(&a, addr, sizeof(addr))))
			return rc;
		rc = admin_call(&a, addr, MGMT_ADMIN_REPLACE, x, y, &result);
		if (rc) {
			cli_err("cannot replace target %u by %u: %s", x, y, strata_strerror(rc));
			return 1;
		}
		printf("target %u replaced by %u in its chains: %u rebuilds from its chains\n", x, y, y);
		return 0;
	}
	cli_err("unknown command '%s' (node drain, target replace)", name);
	return 2;
}
