/*
 * strata quota set|get: directory quotas (docs/namespace.md, "Quotas").
 * libstrata has no quota calls: quotas are an administrator's business,
 * so the CLI speaks to the meta service itself, found in mgmt's cluster
 * map, with the caller's token. QUOTA_SET and QUOTA_LIST need an admin
 * token; QUOTA_GET needs only a token that reaches the directory. Its
 * calls go through the meta client (client/meta_client.h), so a refused
 * one moves to the next meta server of the map, as libstrata's do.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_fs.h"
#include "client/meta_client.h"
#include "common/clock.h"
#include "common/cluster_map.h"
#include "common/config.h"
#include "proto/meta.h"
#include "proto/mgmt.h"

#define QUOTA_TIMEOUT_MS 10000

/* A connection to the meta service: the RPC client, mgmt's address, and
 * the meta client that picks a meta server of its map. */
struct quota_conn {
	struct rpc_client *cl;
	char mgmt[256];
	char meta[CM_ADDR_LEN];
	struct mc_ctx mc;
};

/* The meta client's resolver: the server first found while it answers;
 * after a refusal, the next UP one of a map fetched again. */
static int quota_pick(void *arg, struct mc_pick *p)
{
	struct quota_conn *c = arg;
	const struct cm_service *s;
	struct cluster_map m;
	int rc;

	if (!p->refused)
		return 0;
	cm_init(&m);
	rc = cmap_fetch_sync(c->cl, c->mgmt, QUOTA_TIMEOUT_MS, &m);
	s = rc ? NULL : cm_pick_service(&m, CM_SVC_META, p->node);
	if (s) {
		snprintf(p->addr, sizeof(p->addr), "%s", s->addr);
		p->node = s->node_id;
	}
	cm_release(&m);
	return rc ? rc : s ? 0 : -ENOENT;
}

/* Finds meta in the map and opens a client with the caller's token. 0, or
 * the exit status after reporting why not. */
static int quota_connect(const struct fs_args *a, struct quota_conn *c)
{
	struct cluster_map m;
	char addr[256];
	uint32_t node = 0;
	int rc;

	memset(c, 0, sizeof(*c));
	rc = fs_mgmt_client(a, "strata-quota", QUOTA_TIMEOUT_MS, addr, sizeof(addr), &c->cl);
	if (rc)
		return rc;
	/* A meta service that is starting is listed within a heartbeat or
	 * two: wait for it as strata_connect does, up to the timeout. */
	for (uint64_t deadline = mono_ms() + QUOTA_TIMEOUT_MS; !c->meta[0];) {
		cm_init(&m);
		rc = cmap_fetch_sync(c->cl, addr, QUOTA_TIMEOUT_MS, &m);
		if (rc) {
			cli_err("%s: cannot read the cluster map from '%s': %s", a->cmd, addr,
				strata_strerror(rc));
			rpc_client_free(c->cl);
			return 1;
		}
		for (uint32_t i = 0; i < m.nservices && !c->meta[0]; i++)
			if (m.services[i].kind == CM_SVC_META && m.services[i].state == NODE_UP) {
				snprintf(c->meta, sizeof(c->meta), "%s", m.services[i].addr);
				node = m.services[i].node_id;
			}
		cm_release(&m);
		if (c->meta[0] || mono_ms() >= deadline)
			break;
		usleep(100 * 1000);
	}
	if (!c->meta[0]) {
		cli_err("%s: no meta service up in the cluster map of '%s'", a->cmd, addr);
		rpc_client_free(c->cl);
		return 1;
	}
	snprintf(c->mgmt, sizeof(c->mgmt), "%s", addr);
	(void)mc_ctx_init(&c->mc, c->cl, c->meta, QUOTA_TIMEOUT_MS);
	for (uint32_t i = 0; i < MC_SLOTS; i++)
		c->mc.at[i].node = node;
	c->mc.retry_ms = QUOTA_TIMEOUT_MS;
	c->mc.resolve = quota_pick;
	c->mc.resolve_arg = c;
	return 0;
}

static void quota_disconnect(struct quota_conn *c)
{
	rpc_client_free(c->cl);
}

/* The handle of the directory at path (symlinks followed). */
static int quota_resolve(struct quota_conn *c, const char *path, struct mt_handle *h)
{
	struct proto_sync s = { .timeout_ms = QUOTA_TIMEOUT_MS, .notconn_unsent = true };
	char *norm = fs_norm(path);
	struct mt_inode in;
	int rc;

	if (!norm)
		return -ENOMEM;
	rc = MC_CALL_WITH(&c->mc, md_resolve,
			  (&(struct mt_resolve){ pstr_c(norm), MD_RESOLVE_FOLLOW }), &s, &in);
	free(norm);
	if (!rc) {
		h->ino = in.ino;
		h->gen = in.gen;
	}
	return rc;
}

/* "1.5 GiB of 2.0 GiB (75.0%)", or "1.5 GiB (no limit)". */
static const char *usage_str(uint64_t used, uint64_t max, bool bytes, char *buf, size_t len)
{
	char u[32], l[32];

	if (bytes) {
		fs_human(used, u, sizeof(u));
		fs_human(max, l, sizeof(l));
	} else {
		snprintf(u, sizeof(u), "%llu", (unsigned long long)used);
		snprintf(l, sizeof(l), "%llu", (unsigned long long)max);
	}
	if (max)
		snprintf(buf, len, "%s of %s (%.1f%%)", u, l, 100.0 * (double)used / (double)max);
	else
		snprintf(buf, len, "%s (no limit)", u);
	return buf;
}

static void quota_print(const char *path, const struct mt_quota *q)
{
	char b[96], i[96];

	printf("%s: bytes %s, inodes %s\n", path, usage_str(q->bytes, q->max_bytes, true, b,
							       sizeof(b)),
	       usage_str(q->inodes, q->max_inodes, false, i, sizeof(i)));
	printf("  limits: bytes=%llu inodes=%llu used: bytes=%llu inodes=%llu\n",
	       (unsigned long long)q->max_bytes, (unsigned long long)q->max_inodes,
	       (unsigned long long)q->bytes, (unsigned long long)q->inodes);
}

static int quota_set(struct fs_args *a)
{
	struct proto_sync s = { .timeout_ms = QUOTA_TIMEOUT_MS, .notconn_unsent = true };
	struct mt_quota_set rq = { 0 };
	struct quota_conn c;
	struct mt_quota rep;
	uint64_t inodes;
	int rc;

	if (a->npos != 1 || (!a->flag['b'] && !a->flag['i'])) {
		cli_err("usage: strata quota set PATH [--bytes SIZE] [--inodes N] (0 removes a limit)");
		return 2;
	}
	if (a->flag['b'] && parse_size(a->val['b'], &rq.max_bytes)) {
		cli_err("quota set: bad size '%s' (bytes, or with K, M, G, T)", a->val['b']);
		return 2;
	}
	if (a->flag['i'] && (parse_size(a->val['i'], &inodes) || strpbrk(a->val['i'], "kKmMgGtT"))) {
		cli_err("quota set: bad inode count '%s'", a->val['i']);
		return 2;
	}
	if (a->flag['i'])
		rq.max_inodes = inodes;
	rc = quota_connect(a, &c);
	if (rc)
		return rc;
	rc = quota_resolve(&c, a->pos[0], &rq.dir);
	/* A limit not named keeps its value. */
	if (!rc && (!a->flag['b'] || !a->flag['i'])) {
		int g = MC_CALL_WITH(&c.mc, md_quota_get, (&(struct mt_ino){ rq.dir }), &s, &rep);

		if (!g && !a->flag['b'])
			rq.max_bytes = rep.max_bytes;
		if (!g && !a->flag['i'])
			rq.max_inodes = rep.max_inodes;
		if (g && g != -ENODATA)
			rc = g;
	}
	if (!rc)
		rc = MC_CALL_WITH(&c.mc, md_quota_set, &rq, &s, &rep);
	quota_disconnect(&c);
	if (rc == -EACCES) {
		cli_err("cannot set the quota of '%s': %s (quota set needs an admin token)",
			a->pos[0], strata_strerror(rc));
		return 1;
	}
	if (rc) {
		fs_fail("set the quota of", a->pos[0], rc);
		return 1;
	}
	if (!rep.max_bytes && !rep.max_inodes)
		printf("%s: no quota\n", a->pos[0]);
	else
		quota_print(a->pos[0], &rep);
	return 0;
}

static int quota_get(struct fs_args *a)
{
	struct proto_sync s = { .timeout_ms = QUOTA_TIMEOUT_MS, .notconn_unsent = true };
	struct quota_conn c;
	struct mt_handle h;
	struct mt_quota rep;
	int rc, ret = 0;

	if (a->npos < 1) {
		cli_err("usage: strata quota get PATH...");
		return 2;
	}
	rc = quota_connect(a, &c);
	if (rc)
		return rc;
	for (int i = 0; i < a->npos; i++) {
		rc = quota_resolve(&c, a->pos[i], &h);
		if (!rc)
			rc = MC_CALL_WITH(&c.mc, md_quota_get, (&(struct mt_ino){ h }), &s, &rep);
		if (rc == -ENODATA) {
			printf("%s: no quota\n", a->pos[i]);
		} else if (rc) {
			fs_fail("get the quota of", a->pos[i], rc);
			ret = 1;
		} else {
			quota_print(a->pos[i], &rep);
		}
	}
	quota_disconnect(&c);
	return ret;
}

int fs_quota_roots(const struct fs_args *a)
{
	struct bbuf body;
	struct proto_sync s = { .timeout_ms = QUOTA_TIMEOUT_MS, .body = &body,
				.notconn_unsent = true };
	struct mt_quota_list_rep rep;
	struct quota_conn c;
	uint64_t after = 0;
	bool head = false, eof;
	int rc = quota_connect(a, &c);

	if (rc)
		return -EIO;
	bbuf_init(&body);
	for (;;) {
		rc = MC_CALL_WITH(&c.mc, md_quota_list,
				  (&(struct mt_quota_list){ after, MD_QUOTA_LIST_MAX }), &s, &rep);
		if (rc)
			break;
		for (uint32_t i = 0; i < rep.ents_n; i++) {
			const struct mt_quota *q = &rep.ents[i].quota;
			char b[96], n[96];

			if (!head)
				printf("\n%-30s %-36s %s\n", "QUOTA", "BYTES", "INODES");
			head = true;
			printf("%-30.*s %-36s %s\n", (int)rep.ents[i].path.len, rep.ents[i].path.p,
			       usage_str(q->bytes, q->max_bytes, true, b, sizeof(b)),
			       usage_str(q->inodes, q->max_inodes, false, n, sizeof(n)));
			after = q->ino;
		}
		eof = rep.eof || !rep.ents_n;
		mt_quota_list_rep_release(&rep);
		if (eof)
			break;
	}
	bbuf_release(&body);
	quota_disconnect(&c);
	return rc;
}

int fs_cmd_quota(int argc, char **argv)
{
	struct fs_args a;
	int rc;

	if (argc < 2 || (strcmp(argv[1], "set") && strcmp(argv[1], "get"))) {
		cli_err("usage: strata quota set PATH [--bytes SIZE] [--inodes N] | quota get PATH...");
		return 2;
	}
	rc = fs_parse(argc - 1, argv + 1, strcmp(argv[1], "set") ? "" : "b:i:", false, &a);
	if (rc)
		return rc;
	return strcmp(argv[1], "set") ? quota_get(&a) : quota_set(&a);
}
