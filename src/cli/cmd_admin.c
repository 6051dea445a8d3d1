/*
 * Admin commands that change the cluster map through mgmt:
 *   strata node drain NODE_ID       move a node's replicas elsewhere
 *   strata node remove NODE_ID      retire a drained or dead node for good
 *   strata target replace OLD NEW   rebuild a lost target on a spare
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_fs.h"
#include "common/cluster_map.h"
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

/* What the map now says for node remove's message: how many chain
 * entries node holds, in how many chains it is the last serving one, and
 * how many chains have a member resyncing. -1 each when the map cannot be
 * read (an error reply carries no count). */
struct remove_view {
	int held, last, resyncing;
};

static void remove_view(const struct fs_args *a, const char *addr, uint32_t node,
			struct remove_view *v)
{
	struct rpc_client *cl;
	struct cluster_map m;

	*v = (struct remove_view){ -1, -1, -1 };
	if (cli_rpc_client("strata-admin", 10000, a->token, a->mgmt, a->dir, &cl))
		return;
	cm_init(&m);
	if (!cmap_fetch_sync(cl, addr, 10000, &m)) {
		*v = (struct remove_view){ 0, 0, 0 };
		for (uint32_t k = 0; k < m.nchains; k++) {
			const struct cm_chain *c = &m.chains[k];
			bool syncing = false, mine = false, other_serving = false;

			for (uint8_t i = 0; i < c->len; i++) {
				bool on = cm_node_of(&m, c->targets[i]) == node;

				mine |= on;
				v->held += on;
				syncing |= c->states[i] == TARGET_SYNCING;
				other_serving |= !on && c->states[i] == TARGET_SERVING;
			}
			for (uint8_t i = 0; i < c->nout; i++) {
				bool on = cm_node_of(&m, c->out[i]) == node;

				mine |= on;
				v->held += on;
			}
			v->resyncing += syncing;
			v->last += mine && !other_serving;
		}
	}
	cm_release(&m);
	rpc_client_free(cl);
}

/* strata node remove: mgmt decides; each refusal says what to do. */
static int node_remove(const struct fs_args *a, const char *addr, uint32_t id)
{
	uint32_t result = 0;
	int rc = admin_call(a, addr, MGMT_ADMIN_REMOVE, id, 0, &result);
	struct remove_view v;
	char n[32] = "";

	remove_view(a, addr, id, &v);
	if (rc == -EBUSY || rc == -EINPROGRESS)
		snprintf(n, sizeof(n), "%d replica%s", v.held, v.held == 1 ? "" : "s");
	else if (rc == -ENODATA)
		snprintf(n, sizeof(n), "%d chain%s", v.last, v.last == 1 ? "" : "s");
	if (n[0] && strchr(n, '-'))
		snprintf(n, sizeof(n), rc == -ENODATA ? "some chains" : "replicas");
	switch (rc) {
	case 0:
		break;
	case -ENOENT:
		cli_err("cannot remove node %u: no node %u in the cluster map ('strata status' lists "
			"the nodes)", id, id);
		return 1;
	case -EBUSY:
		cli_err("cannot remove node %u: it is up and holds %s: drain it first "
			"('strata node drain %u')", id, n, id);
		return 1;
	case -EINPROGRESS:
		cli_err("cannot remove node %u: it is draining and still holds %s: wait until "
			"'strata status' shows it in no chain", id, n);
		return 1;
	case -ENODATA:
		cli_err("cannot remove node %u: it is down and holds the last serving replica of %s; "
			"removing it would lose their data: start it again", id, n);
		return 1;
	case -EPERM:
		cli_err("cannot remove node %u: it runs the mgmt service", id);
		return 1;
	default:
		cli_err("cannot remove node %u: %s", id, strata_strerror(rc));
		return 1;
	}
	if (v.resyncing > 0)
		printf("node %u removed: %d chain%s re-replicating from the survivors ('strata status' "
		       "shows progress)\n", id, v.resyncing, v.resyncing == 1 ? "" : "s");
	else
		printf("node %u removed from the cluster\n", id);
	if (result)
		printf("warning: %u replica(s) found no other node to go to; those chains stay short "
		       "until storage nodes are added\n", result);
	return 0;
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

/* "node VERB NODE_ID": the id, and mgmt's address into addr. */
static int node_args(struct fs_args *a, const char *name, char *addr, size_t len, uint32_t *id)
{
	int rc;

	if (a->npos != 1) {
		cli_err("usage: strata %s NODE_ID [--mgmt ADDR | --dir DIR]", name);
		return 2;
	}
	if ((rc = parse_id(name, "node id", a->pos[0], id)))
		return rc;
	return fs_mgmt_addr(a, addr, len);
}

int cmd_admin(int argc, char **argv)
{
	struct fs_args a;
	char addr[256], name[64];
	uint32_t x, y = 0, result = 0;
	int rc;

	/* "node drain ..." / "target replace ...": parse from the verb on. */
	if (argc < 2) {
		cli_err("usage: strata node drain|remove NODE_ID | strata target replace OLD NEW");
		return 2;
	}
	snprintf(name, sizeof(name), "%s %s", argv[0], argv[1]);
	argv[1] = name;
	rc = fs_parse(argc - 1, argv + 1, "", false, &a);
	if (rc)
		return rc;
	if (strcmp(argv[0], "node") == 0 && strcmp(name, "node drain") == 0) {
		if ((rc = node_args(&a, name, addr, sizeof(addr), &x)))
			return rc;
		rc = admin_call(&a, addr, MGMT_ADMIN_DRAIN, x, 0, &result);
		if (rc) {
			cli_err("cannot drain node %u: %s", x, strata_strerror(rc));
			return 1;
		}
		printf("node %u draining: new replicas resync, then it leaves its chains; once "
		       "'strata status' shows it in no chain, 'strata node remove %u' retires it\n",
		       x, x);
		if (result)
			printf("warning: %u replica(s) found no other node to go to; those chains stay on node %u\n",
			       result, x);
		return 0;
	}
	if (strcmp(argv[0], "node") == 0 && strcmp(name, "node remove") == 0) {
		if ((rc = node_args(&a, name, addr, sizeof(addr), &x)))
			return rc;
		return node_remove(&a, addr, x);
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
	cli_err("unknown command '%s' (node drain, node remove, target replace)", name);
	return 2;
}
