/*
 * Admin commands that change the cluster map through mgmt:
 *   strata node drain NODE_ID       move a node's replicas elsewhere
 *   strata node remove NODE_ID      retire a drained or dead node for good
 *   strata target replace OLD NEW   rebuild a lost target on a spare
 *   strata rebalance status|pause|resume   the rebalancer (mgmt/rebalance.h)
 */
#include <errno.h>
#include <inttypes.h>
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

#include <jansson.h>

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

/* strata rebalance ...: prints the state mgmt answered, as text or JSON. */
static int rebalance_print(const struct mg_rebalance_state *st, bool json)
{
	const char *state = st->moves_n ? "moving" : st->balanced ? "balanced" :
			    st->paused ? "paused" : "pending";

	if (json) {
		json_t *o = json_object(), *mv = json_array();
		int rc;

		json_object_set_new(o, "state", json_string(state));
		json_object_set_new(o, "paused", json_boolean(st->paused));
		json_object_set_new(o, "balanced", json_boolean(st->balanced));
		json_object_set_new(o, "band_pct", json_integer(st->band_pct));
		json_object_set_new(o, "max_moves", json_integer(st->max_moves));
		json_object_set_new(o, "nodes", json_integer(st->nodes));
		json_object_set_new(o, "fill_min", json_integer(st->fill_min));
		json_object_set_new(o, "fill_max", json_integer(st->fill_max));
		json_object_set_new(o, "fill_mean", json_real(st->fill_mean_x100 / 100.0));
		json_object_set_new(o, "moves_done", json_integer((json_int_t)st->moves_done));
		json_object_set_new(o, "moves_in_flight", json_integer(st->moves_n));
		json_object_set_new(o, "moves_pending", json_integer(st->pending));
		json_object_set_new(o, "moves_cancelled", json_integer((json_int_t)st->moves_cancelled));
		json_object_set_new(o, "bytes_moved", json_integer((json_int_t)st->bytes_moved));
		for (uint32_t i = 0; i < st->moves_n; i++) {
			json_t *e = json_object();

			json_object_set_new(e, "chain", json_integer(st->moves[i].chain));
			json_object_set_new(e, "from_target", json_integer(st->moves[i].from));
			json_object_set_new(e, "to_target", json_integer(st->moves[i].to));
			json_array_append_new(mv, e);
		}
		json_object_set_new(o, "moves", mv);
		rc = json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		json_decref(o);
		if (rc) {
			cli_err("rebalance: cannot write the JSON: out of memory");
			return 1;
		}
		putchar('\n');
		return 0;
	}
	printf("rebalance  %s%s\n", state, st->paused && st->moves_n ? " (paused: no new move)" : "");
	printf("fill       %u..%u chain entries per node, mean %.2f over %u nodes (band %u%%)\n",
	       st->fill_min, st->fill_max, st->fill_mean_x100 / 100.0, st->nodes, st->band_pct);
	printf("moves      %" PRIu64 " done, %u in flight (at most %u), %u pending, %" PRIu64
	       " cancelled\n", st->moves_done, st->moves_n, st->max_moves, st->pending,
	       st->moves_cancelled);
	printf("moved      %" PRIu64 " bytes (estimated)\n", st->bytes_moved);
	for (uint32_t i = 0; i < st->moves_n; i++)
		printf("chain %u: target %u resyncing, then target %u leaves\n", st->moves[i].chain,
		       st->moves[i].to, st->moves[i].from);
	return 0;
}

int cmd_rebalance(int argc, char **argv)
{
	static const char usage[] = "usage: strata rebalance status [--json] | pause | resume "
				    "[--mgmt ADDR | --dir DIR]";
	struct mg_rebalance rq = { MGMT_REBALANCE_STATUS };
	struct mg_rebalance_state rep;
	struct proto_sync s = { .timeout_ms = 10000 };
	struct rpc_client *cl;
	struct fs_args a;
	char addr[256], name[64];
	int rc;

	if (argc < 2 || argv[1][0] == '-') {
		cli_err("%s", usage);
		return 2;
	}
	if (strcmp(argv[1], "pause") == 0)
		rq.action = MGMT_REBALANCE_PAUSE;
	else if (strcmp(argv[1], "resume") == 0)
		rq.action = MGMT_REBALANCE_RESUME;
	else if (strcmp(argv[1], "status") != 0) {
		cli_err("rebalance: unknown action '%s' (status, pause, resume)", argv[1]);
		return 2;
	}
	snprintf(name, sizeof(name), "rebalance %s", argv[1]);
	argv[1] = name;
	rc = fs_parse(argc - 1, argv + 1, rq.action == MGMT_REBALANCE_STATUS ? "J" : "", false, &a);
	if (rc)
		return rc;
	if (a.npos) {
		cli_err("%s: unexpected argument '%s'; %s", name, a.pos[0], usage);
		return 2;
	}
	if ((rc = fs_mgmt_client(&a, "strata-admin", 10000, addr, sizeof(addr), &cl)))
		return rc;
	memset(&rep, 0, sizeof(rep));
	rc = mg_rebalance_call_sync(cl, addr, &rq, &s, &rep);
	rpc_client_free(cl);
	if (rc) {
		cli_err("%s: mgmt '%s' answered: %s", name, addr, strata_strerror(rc));
		mg_rebalance_state_release(&rep);
		return 1;
	}
	if (rq.action == MGMT_REBALANCE_PAUSE)
		printf("rebalance paused: no new move starts; %u in flight finish%s\n", rep.moves_n,
		       rep.moves_n == 1 ? "es" : "");
	else if (rq.action == MGMT_REBALANCE_RESUME)
		printf("rebalance resumed\n");
	else
		rc = rebalance_print(&rep, a.flag['J']);
	mg_rebalance_state_release(&rep);
	return rc;
}
