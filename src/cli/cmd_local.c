/* strata local up|down|status|add: a cluster of stratad processes on
 * loopback, recorded in DIR/cluster.json. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "cli_fs.h"
#include "local_pg.h"
#include "common/config.h"
#include "common/fileio.h"
#include "common/token.h"
#include "net/proto.h"
#include "net/reactor.h"
#include "proto/mgmt.h"
#include "strata/errors.h"
#include "strata/locate.h"

#define LOCAL_CONTROL_SERVICES "mgmt,meta,composer"
#define LOCAL_CONTROL_MAX 16
#define LOCAL_GPU_MODEL "H100-80GB"

struct local_opts {
	const char *dir;
	int64_t nodes;
	int64_t storage;
	int64_t replication;
	const char *extra;	/* extra flags for every daemon, space-separated */
	int64_t mem;		/* extra daemons running the mem service */
	int64_t compute;	/* extra daemons running the compute service */
	int64_t gpus;		/* GPUs each compute daemon declares */
	const char *gpu_model;
	int64_t zones;		/* 0: every compute daemon in zone "default"; N: zones a, b, ... */
	bool keyless;		/* no cluster key: every peer trusted (benchmarks) */
	int64_t control;	/* control daemons: node 1 and control - 1 meta-only ones */
	bool pg;		/* --meta-store postgresql: a local server for the namespace */
	int64_t node;		/* start, stop, restart: which daemon (0: none given) */
};

static int parse_local_args(int argc, char **argv, struct local_opts *o)
{
	o->dir = NULL;
	o->nodes = 1;
	o->storage = -1;
	o->replication = 0;
	o->extra = NULL;
	o->mem = 0;
	o->compute = 0;
	o->gpus = 4;
	o->gpu_model = LOCAL_GPU_MODEL;
	o->zones = 0;
	o->keyless = false;
	o->control = 1;
	o->pg = false;
	/* Every option takes a value: two arguments a step. */
	for (int i = 1; i < argc; i += 2) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--dir") == 0 && v) {
			o->dir = v;
		} else if ((strcmp(a, "--nodes") == 0 || strcmp(a, "--storage") == 0) && v) {
			int64_t n;

			if (parse_i64(v, &n) || n < 1 || n > 64) {
				cli_err("%s: '%s' is not a number of daemons in 1..64", a, v);
				return 2;
			}
			if (a[2] == 'n')
				o->nodes = n;
			else
				o->storage = n;
		} else if (strcmp(a, "--replication") == 0 && v) {
			if (parse_i64(v, &o->replication) || o->replication < 1 || o->replication > 8) {
				cli_err("--replication: '%s' is not in 1..8", v);
				return 2;
			}
		} else if (strcmp(a, "--mem") == 0 && v) {
			if (parse_i64(v, &o->mem) || o->mem < 0 || o->mem > 64) {
				cli_err("--mem: '%s' is not a number of mem daemons in 0..64", v);
				return 2;
			}
		} else if (strcmp(a, "--compute") == 0 && v) {
			if (parse_i64(v, &o->compute) || o->compute < 0 || o->compute > 64) {
				cli_err("--compute: '%s' is not a number of compute daemons in 0..64", v);
				return 2;
			}
		} else if (strcmp(a, "--gpus-per-node") == 0 && v) {
			if (parse_i64(v, &o->gpus) || o->gpus < 0 || o->gpus > 64) {
				cli_err("--gpus-per-node: '%s' is not a number of GPUs in 0..64", v);
				return 2;
			}
		} else if (strcmp(a, "--zones") == 0 && v) {
			if (parse_i64(v, &o->zones) || o->zones < 1 || o->zones > 26) {
				cli_err("--zones: '%s' is not a number of zones in 1..26 (the compute daemons go to zones a, b, ... in turn)",
					v);
				return 2;
			}
		} else if (strcmp(a, "--gpu-model") == 0 && v) {
			o->gpu_model = v;
		} else if (strcmp(a, "--control") == 0 && v) {
			if (parse_i64(v, &o->control) || o->control < 1 ||
			    o->control > LOCAL_CONTROL_MAX) {
				cli_err("--control: '%s' is not a number of control daemons in 1..%d",
					v, LOCAL_CONTROL_MAX);
				return 2;
			}
		} else if (strcmp(a, "--meta-store") == 0 && v) {
			if (strcmp(v, "postgresql") != 0 && strcmp(v, "sqlite") != 0) {
				cli_err("--meta-store: '%s' is not a store; give 'sqlite' (the"
					" default: meta.db in node 1's directory) or 'postgresql' (a"
					" local PostgreSQL server)", v);
				return 2;
			}
			o->pg = v[0] == 'p';
		} else if (strcmp(a, "--daemon-flags") == 0 && v) {
			o->extra = v;
		} else if (strcmp(a, "--node") == 0 && v) {
			if (parse_i64(v, &o->node) || o->node < 1 || o->node > 1000) {
				cli_err("--node: '%s' is not a node id (as 'strata local status' lists)", v);
				return 2;
			}
		} else {
			cli_err("local: unexpected argument '%s'%s", a, v ? "" : " (missing value?)");
			return 2;
		}
	}
	if (!o->dir) {
		cli_err("local: --dir DIR is required");
		return 2;
	}
	/* Several meta servers share one namespace only on PostgreSQL. */
	if (o->control > 1 && !o->pg) {
		cli_err("local: --control %lld needs --meta-store postgresql: several meta servers"
			" share one namespace in PostgreSQL, while SQLite (the default) serves one"
			" daemon", (long long)o->control);
		return 2;
	}
	/* Each chain holds R replicas on R distinct storage daemons. */
	if (o->replication > (o->storage > 0 ? o->storage : o->nodes)) {
		cli_err("local: --replication %lld needs at least %lld storage daemons (--storage %lld)",
			(long long)o->replication, (long long)o->replication,
			(long long)(o->storage > 0 ? o->storage : o->nodes));
		return 2;
	}
	return 0;
}

static void cluster_file(const char *dir, char *out, size_t len)
{
	snprintf(out, len, "%s/cluster.json", dir);
}

static json_t *load_cluster(const char *dir)
{
	char path[PATH_MAX];
	json_error_t jerr;
	json_t *j;

	cluster_file(dir, path, sizeof(path));
	j = json_load_file(path, 0, &jerr);
	if (!j)
		cli_err("no local cluster recorded in '%s' (%s)", dir, jerr.text);
	return j;
}

/*
 * Which services node i (1-based) of a local cluster runs: node 1 holds
 * the control plane (mgmt, meta, composer: no composer without a key);
 * then the storage daemons; then the other control daemons (mgmt and meta
 * on PostgreSQL: one mgmt leads, docs/failures.md "mgmt leader change";
 * on SQLite there is one control daemon); then mem and compute daemons.
 */
static const char *node_services(const struct local_opts *o, int nstorage, int i)
{
	if (i == 1)
		return o->keyless ? "mgmt,meta" : LOCAL_CONTROL_SERVICES;
	i -= 2;
	if (i < nstorage)
		return "storage";
	i -= nstorage;
	/* With a key, each runs a composer too: the mgmt leader's serves. */
	if (i < o->control - 1)
		return o->keyless ? "mgmt,meta" : LOCAL_CONTROL_SERVICES;
	i -= (int)o->control - 1;
	return i < o->mem ? "mem" : "compute";	/* mem's pool: --mem.capacity */
}

/* Stops the PostgreSQL server cluster.json j records, if any, and
 * removes its password file. 0 or 1 (reported). */
static int stop_postgresql(json_t *j)
{
	json_t *pg = json_object_get(j, "postgresql");
	const char *dir = json_string_value(json_object_get(pg, "dir"));
	const char *pass = json_string_value(json_object_get(pg, "passfile"));
	int bad;

	if (!pg)
		return 0;
	bad = local_pg_stop(dir);
	if (!bad && pass)
		unlink(pass);
	return bad;
}

static int local_down(const char *dir)
{
	json_t *j = load_cluster(dir), *nodes, *n;
	char path[PATH_MAX];
	size_t idx;
	int bad = 0;

	if (!j)
		return 1;
	nodes = json_object_get(j, "nodes");
	/* Storage daemons first, control plane last. */
	for (idx = json_array_size(nodes); idx-- > 0;) {
		n = json_array_get(nodes, idx);
		int pid = (int)json_integer_value(json_object_get(n, "pid"));
		int rc = pid > 0 ? cli_stop_pid(pid, 10000) : 0;	/* 0: stopped already */

		if (rc == -ETIMEDOUT) {
			cli_err("node %lld (pid %d) did not stop on SIGTERM within 10 s; killed",
				(long long)json_integer_value(json_object_get(n, "id")), pid);
			bad = 1;
		}
	}
	/* The namespace's database last: the meta servers are gone. */
	if (stop_postgresql(j)) {
		/* Kept, so that 'down' can be run again for the server. */
		cli_err("local: '%s/cluster.json' kept: it records the PostgreSQL server; run"
			" 'strata local down --dir %s' again once it can stop", dir, dir);
		json_decref(j);
		return 1;
	}
	json_decref(j);
	cluster_file(dir, path, sizeof(path));
	unlink(path);
	printf("local cluster in '%s' stopped\n", dir);
	return bad;
}

static int split_flags(const char *extra, char *buf, size_t buflen, const char **flags, int max)
{
	int n = 0;
	char *save = NULL;

	if (!extra)
		return 0;
	snprintf(buf, buflen, "%s", extra);
	for (char *t = strtok_r(buf, " ", &save); t && n < max; t = strtok_r(NULL, " ", &save))
		flags[n++] = t;
	return n;
}

/* 1 if port of loopback can be bound right now. */
static int port_bindable(int port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

	if (fd < 0)
		return 0;
	ok = bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0;
	close(fd);
	return ok;
}

/* Whether port was handed out by free_port in this process before (then
 * it is not free: its daemon may not have bound it yet); otherwise
 * remembers it. */
static bool port_given(int port)
{
	static int given[64];
	static unsigned n;

	for (unsigned i = 0; i < n && i < 64; i++) {
		if (given[i] == port)
			return true;
	}
	given[n++ % 64] = port;
	return false;
}

/* A loopback port free right now, for a daemon whose address must not
 * change when it is restarted (the control daemons: their addresses are
 * every other daemon's mgmt addresses; the composer's API). Drawn below the
 * kernel's ephemeral range: a port there could be taken by any process's
 * outgoing connection while the daemon is down, and its restart would fail
 * with EADDRINUSE. Never the same port twice in one process: the ports of
 * one 'local up' are all drawn before any daemon binds its own (a
 * composer's port drawn equal to node 1's failed node 1's start). Returns
 * the port or 0. */
static int free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	int lo = 32768, hi = 60999, fd, port = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%d %d", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	if (lo > 12000) {
		for (int i = 0; i < 200; i++) {
			uint32_t r = 0;

			if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
				break;
			port = 10000 + (int)(r % (uint32_t)(lo - 10000));
			if (port_bindable(port) && !port_given(port))
				return port;
		}
	}
	/* A crowded range: the kernel's choice. */
	port = 0;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return 0;
	if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sin, &sl) == 0)
		port = ntohs(sin.sin_port);
	close(fd);
	return port;
}

/* The integer key of service svc in addr's STATUS, or -1. */
static int64_t status_value(struct rpc_client *cl, const char *addr, const char *svc,
			    const char *key)
{
	json_t *sv, *k;
	int64_t v = -1;

	if (cli_service_status(cl, addr, svc, 3000, &sv))
		return -1;
	k = json_object_get(sv, key);
	if (k)
		v = json_integer_value(k);
	json_decref(sv);
	return v;
}

/* An RPC client for the cluster in dir: presenting its own admin token,
 * whatever the environment names, or nothing for a keyless cluster (no
 * DIR/admin.token: its daemons refuse no one, and a client offering a
 * credential would refuse them). 0 or 1 (reported). */
static int dir_client(const char *dir, struct rpc_client **cl)
{
	char tok[PATH_MAX + 16];
	int rc;

	snprintf(tok, sizeof(tok), "%s/admin.token", dir);
	if (access(tok, F_OK) == 0)
		return cli_rpc_client("strata-cli", 3000, tok, NULL, NULL, cl);
	rc = rpc_client_new("strata-cli", 3000, cl);
	if (rc)
		cli_err("cannot start an RPC client: %s", strata_strerror(rc));
	return rc ? 1 : 0;
}

/* Whether mgmt's cluster map lists nmeta UP meta services (clients find
 * the namespace there; meta announces itself once it knows a chain table)
 * and ncompute UP compute services (the composer's inventory). */
static bool services_listed(struct rpc_client *cl, const char *mgmt, int nmeta, int ncompute)
{
	struct cluster_map m;
	int meta = 0, compute = 0;

	cm_init(&m);
	if (cmap_fetch_sync(cl, mgmt, 3000, &m) == 0) {
		for (uint32_t i = 0; i < m.nservices; i++) {
			meta += m.services[i].kind == CM_SVC_META && m.services[i].state == NODE_UP;
			compute += m.services[i].kind == CM_SVC_COMPUTE &&
				   m.services[i].state == NODE_UP;
		}
	}
	cm_release(&m);
	return meta >= nmeta && compute >= ncompute;
}

/* Waits until the cluster takes I/O: the meta service knows a chain table
 * (the storage daemons registered and mgmt built the chains) and is
 * listed in the map, and every storage daemon holds mgmt's current map
 * (no first write is refused for a stale one). */
static int wait_ready(const char *dir, const char *list, json_t *nodes, int nmeta,
		      int ncompute, int timeout_ms)
{
	struct rpc_client *cl;
	uint64_t deadline = reactor_now_ms() + (uint64_t)timeout_ms;
	int ready = 0;

	if (dir_client(dir, &cl))
		return -EINVAL;
	while (!ready && reactor_now_ms() < deadline) {
		char mgmt[512];
		int64_t version;

		/* Of several mgmt, the leader (it may change meanwhile). */
		snprintf(mgmt, sizeof(mgmt), "%s", list);
		cli_mgmt_leader(cl, mgmt, sizeof(mgmt));
		version = status_value(cl, mgmt, "mgmt", "map_version");

		ready = status_value(cl, mgmt, "meta", "table_len") > 0 && version > 0 &&
			services_listed(cl, mgmt, nmeta, ncompute);
		for (size_t i = 0; ready && i < json_array_size(nodes); i++) {
			json_t *n = json_array_get(nodes, i);

			if (strcmp(json_string_value(json_object_get(n, "services")) ?: "", "storage"))
				continue;
			if (status_value(cl, json_string_value(json_object_get(n, "addr")), "storage",
					 "map_version") < version)
				ready = 0;
		}
		if (!ready)
			usleep(50 * 1000);
	}
	rpc_client_free(cl);
	return ready ? 0 : -ETIMEDOUT;
}

/*
 * The cluster's credentials in DIR: the cluster key every daemon is given
 * (cluster.key) and an admin token signed with it (admin.token), both
 * mode 0600. Commands given --dir DIR present the admin token
 * (strata_find_token). A key left by an earlier cluster in DIR is kept,
 * with its token.
 */
static int make_credentials(const char *dir, char *keyfile, size_t len)
{
	struct token_claims c;
	struct cluster_key k;
	char tokfile[PATH_MAX + 32], err[512], *text = NULL;
	int rc;

	snprintf(keyfile, len, "%s/cluster.key", dir);
	snprintf(tokfile, sizeof(tokfile), "%s/admin.token", dir);
	if (access(keyfile, F_OK) == 0 && access(tokfile, F_OK) == 0)
		return cluster_key_load(keyfile, &k, err, sizeof(err)) ? (cli_err("%s", err), 1) : 0;
	unlink(keyfile);
	unlink(tokfile);
	rc = cluster_key_generate(&k);
	if (!rc)
		rc = cluster_key_save(keyfile, &k);
	if (rc) {
		cli_err("cannot write the cluster key '%s': %s", keyfile, strata_strerror(rc));
		return 1;
	}
	token_claims_init(&c);
	snprintf(c.tenant, sizeof(c.tenant), "admin");
	c.uid = 0;
	c.ngids = 1;
	c.gids[0] = 0;
	c.flags = TOKEN_F_ADMIN | TOKEN_F_ROOT;
	c.npaths = 1;
	snprintf(c.paths[0].prefix, sizeof(c.paths[0].prefix), "/");
	c.paths[0].write = true;
	c.exp = 0;
	rc = token_sign(&k, &c, &text);
	memset(&k, 0, sizeof(k));
	if (!rc)
		rc = cli_write_secret(tokfile, text);
	free(text);
	if (rc) {
		cli_err("cannot write the admin token '%s': %s", tokfile, strata_strerror(rc));
		return 1;
	}
	return 0;
}

static int local_up(const struct local_opts *o)
{
	char path[PATH_MAX];
	json_t *j = json_object(), *nodes = json_array();
	int nstorage = (int)(o->storage > 0 ? o->storage : o->nodes);
	int total = nstorage + (int)o->control + (int)o->mem + (int)o->compute;
	int64_t repl = o->replication ? o->replication : (nstorage < 3 ? nstorage : 3);
	char mgmt[512] = "", keyfile[PATH_MAX + 32], f_key[PATH_MAX + 48];
	char composer[LOCAL_CONTROL_MAX * 24] = "";
	int cports[LOCAL_CONTROL_MAX] = { 0 };
	char f_store[192], f_pass[PATH_MAX + 32], f_mstore[192], f_mpass[PATH_MAX + 32];
	int ports[LOCAL_CONTROL_MAX] = { 0 };
	struct local_pg pg;
	int rc = 0;

	cluster_file(o->dir, path, sizeof(path));
	if (access(path, F_OK) == 0) {
		cli_err("a local cluster is already recorded in '%s'; run 'strata local down --dir %s' first",
			o->dir, o->dir);
		json_decref(j);
		json_decref(nodes);
		return 1;
	}
	if (mkdir(o->dir, 0755) < 0 && errno != EEXIST) {
		cli_err("cannot create '%s': %s", o->dir, strerror(errno));
		return 1;
	}
	json_object_set_new(j, "nodes", nodes);
	/* The composers' APIs keep their ports across restarts: one per
	 * control daemon (node 1, then those after the storage daemons). */
	for (int k = 0, at = 0; k < (int)o->control && k < LOCAL_CONTROL_MAX; k++) {
		cports[k] = free_port();
		at += snprintf(composer + at, sizeof(composer) - (size_t)at, "%s127.0.0.1:%d",
			       k ? "," : "", cports[k]);
	}
	if (!o->keyless)
		json_object_set_new(j, "composer", json_string(composer));
	rc = o->keyless ? 0 : make_credentials(o->dir, keyfile, sizeof(keyfile));
	if (rc) {
		json_decref(j);
		return 1;
	}
	if (o->pg) {
		json_t *p = json_object();

		if (local_pg_start(o->dir, &pg)) {
			json_decref(j);
			json_decref(p);
			return 1;
		}
		/* Recorded before any daemon starts: 'down' stops it. */
		json_object_set_new(p, "dir", json_string(pg.dir));
		json_object_set_new(p, "passfile", json_string(pg.passfile));
		json_object_set_new(p, "uri", json_string(pg.uri));
		json_object_set_new(j, "postgresql", p);
		if (json_dump_file(j, path, JSON_INDENT(2)) != 0) {
			cli_err("cannot write '%s'", path);
			(void)stop_postgresql(j);
			json_decref(j);
			return 1;
		}
		snprintf(f_store, sizeof(f_store), "--meta.store=%s", pg.uri);
		snprintf(f_pass, sizeof(f_pass), "--meta.store_passfile=%s", pg.passfile);
		snprintf(f_mstore, sizeof(f_mstore), "--mgmt.store=%s", pg.uri);
		snprintf(f_mpass, sizeof(f_mpass), "--mgmt.store_passfile=%s", pg.passfile);
		/* Every control daemon runs mgmt: each daemon is given all their
		 * addresses, so their ports are fixed before any starts. */
		for (int k = 0; k < o->control; k++) {
			size_t used = strlen(mgmt);

			ports[k] = free_port();
			snprintf(mgmt + used, sizeof(mgmt) - used, "%s127.0.0.1:%d", k ? "," : "",
				 ports[k]);
		}
	}
	for (int i = 1; i <= total; i++) {
		char data[PATH_MAX], svc[128], f_id[32], f_svc[160], f_mgmt[560], f_repl[48];
		char extra[1024], addr[64], f_expect[48], f_listen[64], f_composer[96], f_gpus[160];
		char f_zone[48];
		const char *flags[48];
		int nf = 0, pid;
		json_t *n;

		snprintf(data, sizeof(data), "%s/node%d", o->dir, i);
		snprintf(svc, sizeof(svc), "%s", node_services(o, nstorage, i));
		if (strcmp(svc, "compute") == 0)
			snprintf(f_gpus, sizeof(f_gpus), "--compute.gpus=%lldx%s", (long long)o->gpus,
				 o->gpu_model);
		snprintf(f_id, sizeof(f_id), "--node.id=%d", i);
		snprintf(f_svc, sizeof(f_svc), "--node.services=%s", svc);
		flags[nf++] = f_id;
		flags[nf++] = f_svc;
		/* Control daemons keep their ports: they are the mgmt addresses. */
		if (o->pg && strstr(svc, "mgmt"))
			snprintf(f_listen, sizeof(f_listen), "--node.listen=127.0.0.1:%d",
				 ports[i == 1 ? 0 : i - 1 - nstorage]);
		else
			snprintf(f_listen, sizeof(f_listen), "--node.listen=127.0.0.1:%d",
				 i == 1 ? free_port() : 0);
		flags[nf++] = f_listen;
		flags[nf++] = "--node.metrics_listen=127.0.0.1:0";
		if (mgmt[0]) {
			snprintf(f_mgmt, sizeof(f_mgmt), "--mgmt.address=%s", mgmt);
			flags[nf++] = f_mgmt;
		}
		if (!o->keyless) {
			snprintf(f_key, sizeof(f_key), "--node.key_file=%s", keyfile);
			flags[nf++] = f_key;
		}
		if (strstr(svc, "mgmt")) {
			snprintf(f_repl, sizeof(f_repl), "--mgmt.replication=%lld", (long long)repl);
			snprintf(f_expect, sizeof(f_expect), "--mgmt.expect_nodes=%d", nstorage);
			flags[nf++] = f_repl;
			flags[nf++] = f_expect;
			snprintf(f_composer, sizeof(f_composer), "--composer.listen=127.0.0.1:%d",
				 cports[i == 1 ? 0 : i - 1 - nstorage]);
			if (!o->keyless)
				flags[nf++] = f_composer;
		}
		if (o->pg && strstr(svc, "mgmt")) {
			flags[nf++] = f_mstore;
			flags[nf++] = f_mpass;
		}
		if (strcmp(svc, "compute") == 0 && o->gpus)
			flags[nf++] = f_gpus;
		if (strcmp(svc, "compute") == 0 && o->zones) {
			/* The k-th compute daemon (from 0) goes to zone 'a' + k % zones. */
			int k = i - 2 - nstorage - ((int)o->control - 1) - (int)o->mem;

			snprintf(f_zone, sizeof(f_zone), "--compute.zone=%c",
				 'a' + (int)(k % o->zones));
			flags[nf++] = f_zone;
		}
		if (o->pg && strstr(svc, "meta")) {
			flags[nf++] = f_store;
			flags[nf++] = f_pass;
		}
		nf += split_flags(o->extra, extra, sizeof(extra), flags + nf, 32);
		flags[nf] = NULL;
		rc = cli_spawn_daemon(data, flags, 15000, addr, sizeof(addr), &pid);
		if (rc) {
			cli_err("cannot start node %d: %s", i, strata_strerror(rc));
			break;
		}
		if (i == 1 && !o->pg)
			snprintf(mgmt, sizeof(mgmt), "%s", addr);
		n = json_object();
		json_object_set_new(n, "id", json_integer(i));
		json_object_set_new(n, "data", json_string(data));
		json_object_set_new(n, "addr", json_string(addr));
		json_object_set_new(n, "pid", json_integer(pid));
		json_object_set_new(n, "services", json_string(svc));
		/* Its command line, so that 'local start' runs it again. */
		{
			json_t *args = json_array();

			for (int k = 0; k < nf; k++)
				json_array_append_new(args, json_string(flags[k]));
			json_object_set_new(n, "args", args);
		}
		json_array_append_new(nodes, n);
		/* Record after every start so 'down' can stop a partial cluster. */
		json_object_set_new(j, "mgmt", json_string(mgmt));
		if (json_dump_file(j, path, JSON_INDENT(2)) != 0) {
			cli_err("cannot write '%s'", path);
			rc = -EIO;
			break;
		}
	}
	if (!rc) {
		rc = wait_ready(o->dir, mgmt, nodes, (int)o->control, (int)o->compute, 30000);
		if (rc)
			cli_err("the cluster did not form within 30 s (storage daemons registered? see '%s/node*/stratad.log')",
				o->dir);
	}
	json_decref(j);
	if (rc) {
		local_down(o->dir);
		return 1;
	}
	printf("local cluster up in '%s': %d storage daemon(s), R=%lld, mgmt at %s\n", o->dir,
	       nstorage, (long long)repl, mgmt);
	if (o->pg)
		printf("%lld meta server(s) on PostgreSQL in '%s' (password in '%s')\n",
		       (long long)o->control, pg.dir, pg.passfile);
	if (o->mem || o->compute)
		printf("%lld mem daemon(s), %lld compute daemon(s) with %lldx%s each%s\n",
		       (long long)o->mem, (long long)o->compute, (long long)o->gpus, o->gpu_model,
		       o->zones > 1 ? ", spread over zones" : "");
	if (!o->keyless)
		printf(o->control > 1 ? "composer APIs at %s (http://HOST:PORT/redfish/v1 of each"
					" control node; the mgmt leader's serves)\n" :
					"composer API at http://%s/redfish/v1\n", composer);
	return 0;
}

static int local_status(const char *dir)
{
	json_t *j = load_cluster(dir), *nodes;
	struct rpc_client *cl;
	int down = 0;

	if (!j)
		return 1;
	if (dir_client(dir, &cl)) {
		json_decref(j);
		return 1;
	}
	nodes = json_object_get(j, "nodes");
	printf("%-4s %-22s %-8s %-10s %s\n", "NODE", "ADDRESS", "PID", "UPTIME", "SERVICES");
	for (size_t i = 0; i < json_array_size(nodes); i++) {
		json_t *n = json_array_get(nodes, i), *st;
		const char *addr = json_string_value(json_object_get(n, "addr"));
		struct rpc_sync_args a = { .op = OP_STATUS, .timeout_ms = 3000 };
		struct rpc_result res;
		json_error_t jerr;
		int rc = rpc_call_sync(cl, addr, &a, &res);

		if (rc) {
			printf("%-4lld %-22s %-8lld %-10s (down: %s)\n",
			       (long long)json_integer_value(json_object_get(n, "id")), addr,
			       (long long)json_integer_value(json_object_get(n, "pid")), "-",
			       strata_strerror(rc));
			down++;
			rpc_result_release(&res);
			continue;
		}
		st = json_loadb((const char *)res.body.buf, res.body.len, 0, &jerr);
		printf("%-4lld %-22s %-8lld %-10.1f %s\n",
		       (long long)json_integer_value(json_object_get(n, "id")), addr,
		       (long long)json_integer_value(json_object_get(st, "pid")),
		       (double)json_integer_value(json_object_get(st, "uptime_ms")) / 1000.0,
		       json_string_value(json_object_get(n, "services")));
		json_decref(st);
		rpc_result_release(&res);
	}
	rpc_client_free(cl);
	json_decref(j);
	if (down)
		printf("%d daemon(s) down\n", down);
	return down ? 1 : 0;
}

static int cluster_up(const char *dir, int nstorage, int replication, const char *extra,
		      bool keyless, int control, char *mgmt, size_t mgmtlen)
{
	struct local_opts o = { .dir = dir, .nodes = nstorage, .storage = nstorage,
				.replication = replication, .extra = extra, .keyless = keyless,
				.control = control ? control : 1, .pg = control > 0 };
	int rc = local_up(&o);

	if (rc)
		return rc;
	/* Read back by the rule every client uses to find this cluster. */
	rc = strata_find_mgmt(NULL, dir, mgmt, mgmtlen);
	if (rc)
		cli_err("no local cluster recorded in '%s' (%s)", dir, strata_strerror(rc));
	return rc ? 1 : 0;
}

int local_cluster_up(const char *dir, int nstorage, int replication, const char *extra,
		     char *mgmt, size_t mgmtlen)
{
	return cluster_up(dir, nstorage, replication, extra, false, 0, mgmt, mgmtlen);
}

int local_cluster_up_pg(const char *dir, int nstorage, int replication, int control,
			const char *extra, char *mgmt, size_t mgmtlen)
{
	if (control < 1 || control > LOCAL_CONTROL_MAX) {
		cli_err("local: %d is not a number of control daemons in 1..%d", control,
			LOCAL_CONTROL_MAX);
		return 1;
	}
	return cluster_up(dir, nstorage, replication, extra, false, control, mgmt, mgmtlen);
}

int local_cluster_up_keyless(const char *dir, int nstorage, int replication, const char *extra,
			     char *mgmt, size_t mgmtlen)
{
	return cluster_up(dir, nstorage, replication, extra, true, 0, mgmt, mgmtlen);
}

int local_cluster_down(const char *dir)
{
	return local_down(dir);
}

/* The entry of node id in the cluster's nodes, or NULL (reported). */
static json_t *find_node(json_t *j, const char *dir, int64_t id)
{
	json_t *nodes = json_object_get(j, "nodes"), *n;
	size_t i;

	json_array_foreach(nodes, i, n) {
		if (json_integer_value(json_object_get(n, "id")) == id)
			return n;
	}
	cli_err("local: no node %lld in the cluster of '%s' ('strata local status --dir %s' lists"
		" them)", (long long)id, dir, dir);
	return NULL;
}

/*
 * local stop|start|restart --dir DIR --node N: one daemon of the cluster,
 * by the command line 'local up' recorded for it. A stopped daemon has pid
 * 0 in cluster.json ('status' shows it down; 'down' passes over it); a
 * started one gets its new pid and address (node 1, mgmt, keeps its port).
 */
static int local_node(const char *dir, const char *action, int64_t id)
{
	json_t *j = load_cluster(dir), *n, *args, *v;
	const char *flags[64];
	char path[PATH_MAX], addr[64];
	bool stop = strcmp(action, "start") != 0, start = strcmp(action, "stop") != 0;
	int pid, rc = 0, nf = 0;
	size_t i;

	if (!j)
		return 1;
	n = find_node(j, dir, id);
	if (!n) {
		json_decref(j);
		return 2;
	}
	pid = (int)json_integer_value(json_object_get(n, "pid"));
	if (pid > 0 && !cli_pid_alive(pid))
		pid = 0;	/* died on its own (kill -9, a crash) */
	if (stop && pid > 0) {
		rc = cli_stop_pid(pid, 10000);
		if (rc == -ETIMEDOUT)
			cli_err("local: node %lld (pid %d) did not stop on SIGTERM within 10 s; killed",
				(long long)id, pid);
		printf("node %lld (pid %d) stopped\n", (long long)id, pid);
		pid = 0;
	} else if (stop && !start) {
		printf("node %lld was not running\n", (long long)id);
	}
	if (start && pid > 0) {
		cli_err("local: node %lld is running (pid %d): 'strata local restart' stops it first",
			(long long)id, pid);
		json_decref(j);
		return 1;
	}
	json_object_set_new(n, "pid", json_integer(pid));
	if (start) {
		args = json_object_get(n, "args");
		if (!json_is_array(args) || json_array_size(args) >= 64) {
			cli_err("local: node %lld has no recorded command line in '%s/cluster.json'"
				" (made by an older 'strata local up')", (long long)id, dir);
			json_decref(j);
			return 1;
		}
		json_array_foreach(args, i, v)
			flags[nf++] = json_string_value(v);
		flags[nf] = NULL;
		rc = cli_spawn_daemon(json_string_value(json_object_get(n, "data")), flags, 15000,
				      addr, sizeof(addr), &pid);
		if (rc) {
			cli_err("local: cannot start node %lld: %s (see '%s/stratad.log')", (long long)id,
				strata_strerror(rc), json_string_value(json_object_get(n, "data")));
		} else {
			json_object_set_new(n, "pid", json_integer(pid));
			json_object_set_new(n, "addr", json_string(addr));
			/* A list of control daemons' addresses stays: their ports are fixed. */
			if (id == 1 && !strchr(json_string_value(json_object_get(j, "mgmt")) ?: "", ','))
				json_object_set_new(j, "mgmt", json_string(addr));
			printf("node %lld started (pid %d) at %s\n", (long long)id, pid, addr);
		}
	}
	cluster_file(dir, path, sizeof(path));
	if (json_dump_file(j, path, JSON_INDENT(2)) != 0) {
		cli_err("local: cannot write '%s'", path);
		rc = -EIO;
	}
	json_decref(j);
	return rc ? 1 : 0;
}

/* Whether mgmt's map lists nodes first..last UP. */
static bool nodes_up(struct rpc_client *cl, const char *mgmt, int64_t first, int64_t last)
{
	struct cluster_map m;
	bool up = cmap_fetch_sync(cl, mgmt, 3000, &m) == 0;

	if (!up)
		cm_init(&m);
	for (int64_t id = first; up && id <= last; id++) {
		const struct cm_node *n = cm_find_node(&m, (uint32_t)id);

		up = n && n->state == NODE_UP;
	}
	cm_release(&m);
	return up;
}

/*
 * local add --dir DIR --storage N: N more storage daemons, each started by
 * the command line of the cluster's first storage daemon with the next
 * free node id (and its own data directory), recorded in cluster.json
 * like the others (stop, start, down know them). Returns once mgmt lists
 * them up; the rebalancer then moves chains onto them.
 */
static int local_add(const char *dir, int64_t count)
{
	json_t *j = load_cluster(dir), *nodes, *n, *tmpl = NULL, *v;
	char path[PATH_MAX], mgmt[512];
	int64_t first = 0, id;
	struct rpc_client *cl;
	uint64_t deadline;
	bool up = false;
	size_t i;
	int rc = 0;

	if (!j)
		return 1;
	nodes = json_object_get(j, "nodes");
	json_array_foreach(nodes, i, n) {
		const char *svc = json_string_value(json_object_get(n, "services"));

		if (json_integer_value(json_object_get(n, "id")) > first)
			first = json_integer_value(json_object_get(n, "id"));
		if (!tmpl && svc && strcmp(svc, "storage") == 0 &&
		    json_is_array(json_object_get(n, "args")))
			tmpl = n;
	}
	if (!tmpl || json_array_size(json_object_get(tmpl, "args")) >= 63) {
		cli_err("local add: the cluster in '%s' has no storage daemon whose command line to "
			"copy (made by an older 'strata local up'?)", dir);
		json_decref(j);
		return 1;
	}
	first++;
	cluster_file(dir, path, sizeof(path));
	for (id = first; id < first + count; id++) {
		char data[PATH_MAX], f_id[32], addr[64];
		const char *flags[64];
		json_t *args = json_array(), *e;
		int nf = 0, pid;

		snprintf(data, sizeof(data), "%s/node%lld", dir, (long long)id);
		snprintf(f_id, sizeof(f_id), "--node.id=%lld", (long long)id);
		json_array_foreach(json_object_get(tmpl, "args"), i, v) {
			const char *f = json_string_value(v);

			flags[nf++] = f && strncmp(f, "--node.id=", 10) == 0 ? f_id : f;
		}
		flags[nf] = NULL;
		rc = cli_spawn_daemon(data, flags, 15000, addr, sizeof(addr), &pid);
		if (rc) {
			cli_err("local add: cannot start node %lld: %s (see '%s/stratad.log')",
				(long long)id, strata_strerror(rc), data);
			json_decref(args);
			break;
		}
		for (int k = 0; k < nf; k++)
			json_array_append_new(args, json_string(flags[k]));
		e = json_object();
		json_object_set_new(e, "id", json_integer(id));
		json_object_set_new(e, "data", json_string(data));
		json_object_set_new(e, "addr", json_string(addr));
		json_object_set_new(e, "pid", json_integer(pid));
		json_object_set_new(e, "services", json_string("storage"));
		json_object_set_new(e, "args", args);
		json_array_append_new(nodes, e);
		/* Recorded at once: 'down' stops it even if the next fails. */
		if (json_dump_file(j, path, JSON_INDENT(2)) != 0) {
			cli_err("local add: cannot write '%s'", path);
			rc = -EIO;
			break;
		}
		printf("node %lld started (pid %d) at %s\n", (long long)id, pid, addr);
	}
	snprintf(mgmt, sizeof(mgmt), "%s", json_string_value(json_object_get(j, "mgmt")) ?: "");
	json_decref(j);
	if (rc)
		return 1;
	if (dir_client(dir, &cl))
		return 1;
	cli_mgmt_leader(cl, mgmt, sizeof(mgmt));
	deadline = reactor_now_ms() + 30000;
	while (!(up = nodes_up(cl, mgmt, first, first + count - 1)) && reactor_now_ms() < deadline)
		usleep(50 * 1000);
	rpc_client_free(cl);
	if (!up) {
		cli_err("local add: mgmt at '%s' does not list nodes %lld..%lld up after 30 s (see "
			"'%s/node*/stratad.log')", mgmt, (long long)first,
			(long long)(first + count - 1), dir);
		return 1;
	}
	printf("%lld storage node(s) added to the cluster in '%s' (nodes %lld..%lld): the "
	       "rebalancer moves chains onto them ('strata rebalance status --dir %s')\n",
	       (long long)count, dir, (long long)first, (long long)(first + count - 1), dir);
	return 0;
}

/*
 * One 'strata local' command that changes a cluster at a time per
 * directory: DIR/local.lock (flock, exclusive, with our pid) for the
 * life of this process; a second one, started at the same time, would
 * start or stop daemons the first does not know of. The kernel drops the
 * lock when we exit; our daemons do not inherit it (close-on-exec).
 * 0, 1 (the reason said), or 0 for a directory that does not exist
 * (nothing to race on; the command says what is missing).
 */
static int lock_local_dir(const char *dir, bool create)
{
	char path[PATH_MAX], pid[32];
	int rc;

	if (create && mkdir(dir, 0755) < 0 && errno != EEXIST) {
		cli_err("cannot create '%s': %s", dir, strerror(errno));
		return 1;
	}
	if (snprintf(path, sizeof(path), "%s/local.lock", dir) >= (int)sizeof(path)) {
		cli_err("directory '%s': path too long", dir);
		return 1;
	}
	rc = lock_pidfile(path, pid, sizeof(pid));
	if (rc == -ENOENT && !create)
		return 0;
	if (rc == -EWOULDBLOCK)
		cli_err("another 'strata local' command is working on '%s'%s%s%s; wait for it "
			"to finish", dir, pid[0] ? " (pid " : "", pid, pid[0] ? ")" : "");
	else if (rc)
		cli_err("cannot lock '%s': %s", path, strerror(-rc));
	return rc ? 1 : 0;
}

int cmd_local(int argc, char **argv)
{
	struct local_opts o;
	int rc;

	if (argc < 2) {
		cli_err("usage: strata local up|down|status --dir DIR, add --dir DIR --storage N, or"
			" start|stop|restart --dir DIR --node N");
		return 2;
	}
	rc = parse_local_args(argc - 1, argv + 1, &o);
	if (rc)
		return rc;
	if (o.node && strcmp(argv[1], "start") && strcmp(argv[1], "stop") &&
	    strcmp(argv[1], "restart")) {
		cli_err("local: --node is an option of start, stop and restart");
		return 2;
	}
	if ((!strcmp(argv[1], "up") || !strcmp(argv[1], "down") || !strcmp(argv[1], "start") ||
	     !strcmp(argv[1], "add") ||
	     !strcmp(argv[1], "stop") || !strcmp(argv[1], "restart")) &&
	    lock_local_dir(o.dir, strcmp(argv[1], "up") == 0))
		return 1;
	if (strcmp(argv[1], "up") == 0)
		return local_up(&o);
	if (strcmp(argv[1], "down") == 0)
		return local_down(o.dir);
	if (strcmp(argv[1], "status") == 0)
		return local_status(o.dir);
	if (strcmp(argv[1], "add") == 0) {
		if (o.storage < 1) {
			cli_err("local add: --storage N is required (the storage daemons to add, 1..64)");
			return 2;
		}
		return local_add(o.dir, o.storage);
	}
	if (!strcmp(argv[1], "start") || !strcmp(argv[1], "stop") || !strcmp(argv[1], "restart")) {
		if (!o.node) {
			cli_err("local: %s needs --node N (as 'strata local status' lists)", argv[1]);
			return 2;
		}
		return local_node(o.dir, argv[1], o.node);
	}
	cli_err("local: unknown action '%s' (up, down, status, add, start, stop, restart)", argv[1]);
	return 2;
}
