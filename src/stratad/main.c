/*
 * stratad: reads its config, starts the services it names, answers PING and
 * STATUS, serves /metrics, and shuts down cleanly on SIGTERM/SIGINT.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/fileio.h"
#include "common/log.h"
#include "daemon.h"
#include "metrics.h"
#include "net/addr.h"
#include "net/auth.h"
#include "net/conn.h"
#include "net/tls.h"
#include "common/errors_int.h"

#define K(sec, name, type, field, def, min, max, help) \
	CFG_KEY(struct daemon_cfg, sec, name, type, field, def, min, max, help)

/* The node's own keys; every service brings its own (service_def.schema). */
static const struct cfg_key node_keys[] = {
	K("node", "id", CFG_INT, node_id, "1", 1, 65535, "node id, unique in the cluster"),
	K("node", "data", CFG_STR, data, "./strata-data", 0, 0, "data directory"),
	K("node", "listen", CFG_STR, listen, "127.0.0.1:7300", 0, 0, "RPC address (port 0 = any)"),
	K("node", "advertise", CFG_STR, advertise, "", 0, 0,
	  "address peers use, HOST:PORT or HOST (the listen port); default: listen, which "
	  "must then not be a wildcard (0.0.0.0, [::])"),
	K("node", "threads", CFG_INT, threads, "0", 0, 256, "reactor threads (0 = one per core)"),
	K("node", "log_level", CFG_STR, log_level, "info", 0, 0, "debug, info, warn, error"),
	K("node", "log_file", CFG_STR, log_file, "", 0, 0,
	  "append the log to this file (empty = stderr); SIGHUP reopens it (rotation)"),
	K("node", "services", CFG_STR, services, "", 0, 0,
	  "comma-separated services to run (see the sections below)"),
	K("node", "metrics_listen", CFG_STR, metrics_listen, "", 0, 0,
	  "Prometheus endpoint address (empty = off)"),
	K("node", "key_file", CFG_STR, key_file, "", 0, 0,
	  "the cluster key (mode 0600; 'strata keygen' makes one): peers must prove it or a "
	  "token signed with it; empty: every peer is trusted, loopback only"),
	K("node", "insecure", CFG_BOOL, insecure, "false", 0, 0,
	  "allow listening beyond loopback without a cluster key (every peer trusted) or "
	  "without TLS (traffic in the clear)"),
	K("node", "tls", CFG_STR, tls, "auto", 0, 0,
	  "TLS for every connection to this node: on, off, or auto (on when listening "
	  "beyond loopback with a certificate; beyond loopback without TLS needs "
	  "node.insecure)"),
	K("node", "tls_cert", CFG_STR, tls_cert, "", 0, 0,
	  "this node's TLS certificate (PEM, with its chain); it must name the host or IP "
	  "peers connect to"),
	K("node", "tls_key", CFG_STR, tls_key, "", 0, 0, "the certificate's key (PEM, mode 0600)"),
	K("node", "tls_ca", CFG_STR, tls_ca, "", 0, 0,
	  "the CA (PEM) other nodes' certificates must be signed by; set: this node's own "
	  "connections use TLS"),
	K("mgmt", "address", CFG_STR, mgmt_addr, "", 0, 0, "mgmt address (default: this node)"),
	K("mgmt", "heartbeat", CFG_MS, heartbeat_ms, "1s", 10, 600000,
	  "how often this node renews its lease with mgmt"),
	K("rpc", "timeout", CFG_MS, rpc_timeout_ms, "10s", 10, 600000, "RPC timeout"),
	K("net", "max_conns", CFG_INT, max_conns, "0", 0, 10000000,
	  "connections held at once (0: seven eighths of the open-file limit, which stratad "
	  "raises to its hard limit); beyond it new ones are closed at once"),
	K("net", "max_conns_per_peer", CFG_INT, max_conns_per_peer, "1024", 0, 10000000,
	  "connections held at once from one IP address (0: no cap)"),
	K("net", "hello_timeout", CFG_MS, hello_timeout_ms, "10s", 0, 600000,
	  "a peer that has not said HELLO (and passed AUTH) this long after connecting is "
	  "closed (0: never)"),
};

/*
 * stratad parses one schema: its own keys, then every registered service's
 * (a key of a service that does not run here is still known and checked),
 * each service's fields shifted to its place in one blob.
 */
struct all_keys {
	struct cfg_schema schema;
	struct cfg_key *keys;
	size_t base[DAEMON_MAX_SERVICES];	/* registry index -> blob offset */
	size_t size;
};

static size_t align16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

static int all_keys_build(struct all_keys *a)
{
	size_t n = sizeof(node_keys) / sizeof(node_keys[0]), k = 0;

	a->size = align16(sizeof(struct daemon_cfg));
	for (int i = 0; service_registry[i]; i++) {
		const struct service_def *def = service_registry[i];

		if (i >= DAEMON_MAX_SERVICES)
			return -E2BIG;
		n += def->schema ? def->schema->nkeys : 0;
		a->base[i] = a->size;
		a->size += align16(def->cfg_size);
	}
	a->keys = calloc(n, sizeof(*a->keys));
	if (!a->keys)
		return -ENOMEM;
	for (size_t j = 0; j < sizeof(node_keys) / sizeof(node_keys[0]); j++)
		a->keys[k++] = node_keys[j];
	for (int i = 0; service_registry[i]; i++) {
		const struct cfg_schema *sch = service_registry[i]->schema;

		for (size_t j = 0; sch && j < sch->nkeys; j++) {
			a->keys[k] = sch->keys[j];
			a->keys[k++].offset += a->base[i];
		}
	}
	a->schema.keys = a->keys;
	a->schema.nkeys = k;
	return 0;
}

static void print_keys(FILE *f, const struct cfg_key *keys, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct cfg_key *k = &keys[i];
		char name[64];

		snprintf(name, sizeof(name), "%s.%s", k->section, k->name);
		fprintf(f, "  %-24s %s (default: %s)\n", name, k->help,
			k->def && *k->def ? k->def : "\"\"");
	}
}

static void usage(FILE *f)
{
	fprintf(f, "usage: stratad [--config FILE] [--data DIR] [--SECTION.KEY=VALUE ...]\n"
		   "       stratad --check-config [the same]: check, start nothing (exit 0 or 2)\n\n"
		   "keys (INI [section] key = value, or a flag --section.key=value):\n\n"
		   "the node:\n");
	print_keys(f, node_keys, sizeof(node_keys) / sizeof(node_keys[0]));
	for (int i = 0; service_registry[i]; i++) {
		const struct service_def *def = service_registry[i];

		if (!def->schema)
			continue;
		fprintf(f, "\nservice '%s':\n", def->name);
		print_keys(f, def->schema->keys, def->schema->nkeys);
	}
}

static bool service_running(struct daemon *d, const char *name)
{
	for (int i = 0; i < d->nservices; i++) {
		if (strcmp(d->defs[i]->name, name) == 0)
			return true;
	}
	return false;
}

/* ---- core ops ---- */

static void op_ping(void *svc, struct svc_req *req)
{
	(void)svc;
	/* Echo the bulk: the benchmark uses it for bulk round trips. */
	if (req->bulk) {
		void *b = req->bulk;

		req->bulk = NULL;
		svc_reply_bulk(req, 0, b, req->hdr.bulk_len, abuf_free, b);
		return;
	}
	svc_reply(req, 0);
}

static json_t *status_json(struct daemon *d)
{
	json_t *o = json_object(), *svcs = json_array();
	struct net_stats ns;

	json_object_set_new(o, "node_id", json_integer(d->cfg.node_id));
	json_object_set_new(o, "address", json_string(d->addr));
	json_object_set_new(o, "pid", json_integer(getpid()));
	json_object_set_new(o, "uptime_ms", json_integer((json_int_t)(reactor_now_ms() - d->start_ms)));
	json_object_set_new(o, "threads", json_integer(d->nreactors));
	net_stats_get(&ns);
	json_object_set_new(o, "frames_in", json_integer((json_int_t)ns.frames_in));
	json_object_set_new(o, "bad_frames", json_integer((json_int_t)ns.bad_frames));
	for (int i = 0; i < d->nservices; i++) {
		json_t *so = json_object();

		json_object_set_new(so, "name", json_string(d->defs[i]->name));
		if (d->defs[i]->status)
			d->defs[i]->status(d->svcs[i], so);
		json_array_append_new(svcs, so);
	}
	json_object_set_new(o, "services", svcs);
	return o;
}

static void op_status(void *svc, struct svc_req *req)
{
	json_t *o = status_json(svc);
	char *s = json_dumps(o, JSON_COMPACT);

	json_decref(o);
	if (!s) {
		svc_reply(req, -ENOMEM);
		return;
	}
	bbuf_append(&req->reply, s, strlen(s));
	free(s);
	svc_reply(req, 0);
}

/* Raises the open-file limit to its hard limit (a daemon holds a socket
 * per client and files besides) and gives the server its caps. */
static int set_limits(struct daemon *d)
{
	struct rpc_server_limits lim;
	struct rlimit rl;
	int64_t max = d->cfg.max_conns;
	int rc;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl))
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (!max && getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
		/* An eighth (at least 64) stays for files, pipes and the
		 * connections this daemon opens itself. */
		uint64_t reserve = rl.rlim_cur / 8 < 64 ? 64 : rl.rlim_cur / 8;

		max = rl.rlim_cur > reserve + 16 ? (int64_t)(rl.rlim_cur - reserve) : 16;
	}
	rpc_server_limits_init(&lim, sizeof(lim));
	lim.max_conns = (uint32_t)(max > UINT32_MAX ? UINT32_MAX : max);
	lim.max_conns_per_peer = (uint32_t)d->cfg.max_conns_per_peer;
	lim.hello_timeout_ms = (uint32_t)d->cfg.hello_timeout_ms;
	rc = rpc_server_set_limits(d->srv, &lim);
	if (rc)
		log_error("stratad", "cannot set connection limits: %s", strata_strerror(rc));
	else
		log_info("stratad", "accepting at most %u connections, %u per address", lim.max_conns,
			 lim.max_conns_per_peer);
	return rc;
}

static void collect_metrics(void *ctx, struct bbuf *out)
{
	struct daemon *d = ctx;
	struct rpc_server_stats ss;
	struct net_stats ns;

	net_stats_get(&ns);
	rpc_server_stats_get(d->srv, &ss);
	metrics_put(out, "strata_up", "gauge", "1 while the daemon runs", 1);
	metrics_put(out, "strata_uptime_seconds", "gauge", "seconds since start",
		    (double)(reactor_now_ms() - d->start_ms) / 1000.0);
	metrics_put(out, "strata_net_frames_in_total", "counter", "frames received", (double)ns.frames_in);
	metrics_put(out, "strata_net_frames_out_total", "counter", "frames sent", (double)ns.frames_out);
	metrics_put(out, "strata_net_bytes_in_total", "counter", "bytes received", (double)ns.bytes_in);
	metrics_put(out, "strata_net_bytes_out_total", "counter", "bytes sent", (double)ns.bytes_out);
	metrics_put(out, "strata_net_bad_frames_total", "counter",
		    "malformed frames (connection closed)", (double)ns.bad_frames);
	metrics_put(out, "strata_net_connections_accepted_total", "counter",
		    "connections accepted", (double)ns.conns_accepted);
	metrics_put(out, "strata_net_connections", "gauge", "connections held now",
		    (double)ss.conns_held);
	metrics_put(out, "strata_net_connections_refused_total", "counter",
		    "connections closed at accept: net.max_conns reached",
		    (double)ss.refused_full);
	metrics_put(out, "strata_net_connections_refused_peer_total", "counter",
		    "connections closed at accept: net.max_conns_per_peer reached",
		    (double)ss.refused_peer);
	metrics_put(out, "strata_net_hello_timeouts_total", "counter",
		    "connections closed for want of HELLO within net.hello_timeout",
		    (double)ns.hello_timeouts);
	metrics_put(out, "strata_net_accept_pauses_total", "counter",
		    "pauses of accept() for lack of descriptors or memory",
		    (double)ss.accept_pauses);
	for (int i = 0; i < d->nservices; i++) {
		if (d->defs[i]->metrics)
			d->defs[i]->metrics(d->svcs[i], out);
	}
}

/* ---- start and stop ---- */

/* Every name in node.services is a registered service, listed once.
 * Returns 0 or STRATA_ECONFIG after logging the key, the name and the
 * names it may take. */
static int services_check(const char *services)
{
	char list[CFG_STR_MAX], known[256];
	const char *seen[DAEMON_MAX_SERVICES];
	char *save = NULL;
	int nseen = 0, n = 0;

	known[0] = '\0';
	for (int i = 0; service_registry[i] && n < (int)sizeof(known); i++)
		n += snprintf(known + n, sizeof(known) - (size_t)n, "%s%s", i ? ", " : "",
			      service_registry[i]->name);
	snprintf(list, sizeof(list), "%s", services);
	for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		bool found = false;

		while (*name == ' ')
			name++;
		if (!*name)
			continue;
		for (int i = 0; service_registry[i]; i++)
			found |= strcmp(service_registry[i]->name, name) == 0;
		if (!found) {
			log_error("stratad", "key 'node.services': unknown service '%s' (known: %s)",
				  name, known);
			return STRATA_ECONFIG;
		}
		for (int i = 0; i < nseen; i++) {
			if (strcmp(seen[i], name) == 0) {
				log_error("stratad", "key 'node.services': service '%s' listed twice",
					  name);
				return STRATA_ECONFIG;
			}
		}
		if (nseen == DAEMON_MAX_SERVICES) {
			log_error("stratad", "key 'node.services': more than %d services",
				  DAEMON_MAX_SERVICES);
			return STRATA_ECONFIG;
		}
		seen[nseen++] = name;
	}
	return 0;
}

static int start_services(struct daemon *d, const struct all_keys *a)
{
	char list[CFG_STR_MAX];
	char *save = NULL;

	snprintf(list, sizeof(list), "%s", d->cfg.services);
	for (char *name = strtok_r(list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
		const struct service_def *def = NULL;
		struct service_env *env;
		int rc, reg = -1;

		while (*name == ' ')
			name++;
		if (!*name)
			continue;
		for (int i = 0; service_registry[i]; i++) {
			if (strcmp(service_registry[i]->name, name) == 0) {
				def = service_registry[i];
				reg = i;
			}
		}
		if (!def || service_running(d, name) || d->nservices == DAEMON_MAX_SERVICES)
			return STRATA_ECONFIG;	/* services_check() said why */
		d->defs[d->nservices] = def;
		env = &d->envs[d->nservices];
		*env = (struct service_env){
			.node_id = (uint32_t)d->cfg.node_id, .data = d->cfg.data, .addr = d->addr,
			.mgmt_addr = d->cfg.mgmt_addr, .heartbeat_ms = (uint32_t)d->cfg.heartbeat_ms,
			.rpc_timeout_ms = (uint32_t)d->cfg.rpc_timeout_ms,
			.reactors = d->reactors, .nreactors = d->nreactors, .srv = d->srv,
			.cfg = (char *)d->cfg_blob + a->base[reg],
			.key = d->has_key ? &d->key : NULL,
			.all_keys = &a->schema, .all_cfg = d->cfg_blob,
		};
		rc = def->start(env, &d->svcs[d->nservices]);
		if (rc) {
			log_error("stratad", "service '%s' failed to start: %s", name, strata_strerror(rc));
			return rc;
		}
		d->nservices++;
		log_info("stratad", "service '%s' started", name);
	}
	return 0;
}

static int write_addr_file(struct daemon *d)
{
	char path[CFG_STR_MAX + 32], tmp[CFG_STR_MAX + 40];
	FILE *f;

	snprintf(path, sizeof(path), "%s/stratad.addr", d->cfg.data);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "%s\n%d\n%d\n", d->addr, d->metrics_port, (int)getpid());
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		return -errno;
	return 0;
}

/* Value of "--name VALUE" or "--name=VALUE" at argv[*i] (advancing *i
 * past a separate value), NULL when argv[*i] is not that flag. */
static const char *flag_value(int argc, char **argv, int *i, const char *name, int *missing)
{
	size_t n = strlen(name);
	const char *a = argv[*i];

	if (strncmp(a, name, n) != 0)
		return NULL;
	if (a[n] == '=')
		return a + n + 1;
	if (a[n] != '\0')
		return NULL;
	if (*i + 1 >= argc) {
		*missing = 1;
		return NULL;
	}
	return argv[++*i];
}

static int parse_args(struct daemon *d, const struct all_keys *a, int argc, char **argv)
{
	char err[512];
	const char *config = NULL, *data = NULL;
	int rc, missing = 0;

	rc = cfg_defaults(&a->schema, d->cfg_blob, err, sizeof(err));
	if (rc)
		goto bad;
	/* --config and --data first: the file, then flags, override. */
	for (int i = 1; i < argc; i++) {
		const char *v;

		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strcmp(argv[i], "--version") == 0) {
			printf("stratad 0.1.0 (protocol %d)\n", STRATA_PROTO_VERSION);
			exit(0);
		}
		if (strcmp(argv[i], "--check-config") == 0) {
			d->check_only = true;
			continue;
		}
		if ((v = flag_value(argc, argv, &i, "--config", &missing)))
			config = v;
		else if ((v = flag_value(argc, argv, &i, "--data", &missing)))
			data = v;
		if (missing) {
			fprintf(stderr, "stratad: %s needs a value\n", argv[i]);
			return STRATA_ECONFIG;
		}
	}
	if (config) {
		rc = cfg_load_file(&a->schema, d->cfg_blob, config, err, sizeof(err));
		if (rc)
			goto bad;
	}
	for (int i = 1; i < argc; i++) {
		if (flag_value(argc, argv, &i, "--config", &missing) ||
		    flag_value(argc, argv, &i, "--data", &missing) ||
		    strcmp(argv[i], "--check-config") == 0)
			continue;
		rc = cfg_apply_args(&a->schema, d->cfg_blob, 1, &argv[i], NULL, err, sizeof(err));
		if (rc)
			goto bad;
	}
	if (data) {
		rc = cfg_set(&a->schema, d->cfg_blob, "node.data", data, err, sizeof(err));
		if (rc)
			goto bad;
	}
	/* Rules between keys, every service's (used here or not). */
	for (int i = 0; service_registry[i]; i++) {
		const struct service_def *def = service_registry[i];

		if (def->check && (rc = def->check((char *)d->cfg_blob + a->base[i], err,
						   sizeof(err))))
			goto bad;
	}
	memcpy(&d->cfg, d->cfg_blob, sizeof(d->cfg));
	return 0;
bad:
	fprintf(stderr, "stratad: %s\n", err);
	return rc;
}

/* The cluster key: what this daemon presents to its peers (the process
 * default credential) and requires of every connection (auth, for the
 * server). Without one, only loopback. Runs before anything is started. */
static int setup_auth(struct daemon *d, struct net_auth *auth_out)
{
	struct net_auth auth = { 0 };
	struct net_cred cred;
	char err[512], host[ADDR_HOST_MAX];
	int rc, port;

	memset(auth_out, 0, sizeof(*auth_out));
	if (parse_hostport(d->cfg.listen, host, sizeof(host), &port)) {
		log_error("stratad", "key 'node.listen': '%s' is not HOST:PORT (a port in 0..65535, 0: "
			  "any free one; IPv6 as [ADDR]:PORT)", d->cfg.listen);
		return -EINVAL;
	}
	if (!d->cfg.key_file[0]) {
		if (!addr_is_loopback(d->cfg.listen) && !d->cfg.insecure) {
			log_error("stratad", "refusing to listen on '%s' without a cluster key: set "
				  "node.key_file ('strata keygen' makes one), or node.insecure=true "
				  "to trust every peer that reaches the port", d->cfg.listen);
			return -EPERM;
		}
		log_warn("stratad", "no cluster key (node.key_file): every peer that reaches '%s' "
			 "is trusted", d->cfg.listen);
		return 0;
	}
	rc = cluster_key_load(d->cfg.key_file, &auth.key, err, sizeof(err));
	if (rc) {
		log_error("stratad", "%s", err);
		return rc;
	}
	auth.has_key = true;
	*auth_out = auth;
	d->has_key = true;
	d->key = auth.key;
	net_cred_from_key(&cred, &auth.key);
	net_cred_set_default(&cred);
	net_cred_release(&cred);
	memset(&auth, 0, sizeof(auth));
	log_info("stratad", "cluster key '%s': peers must prove it or a token signed with it",
		 d->cfg.key_file);
	return 0;
}

static bool is_wildcard(const char *host)
{
	return strcmp(host, "0.0.0.0") == 0 || strcmp(host, "::") == 0;
}

/*
 * The address peers are told (node.advertise, else node.listen): a
 * wildcard listen address names no host, and advertising it (or a
 * loopback stand-in) sends every remote peer to itself, so it needs
 * node.advertise. node.advertise is HOST:PORT, or HOST alone for the port
 * this node listens on (node.listen's, or the one the kernel picks for
 * port 0). Sets *host_only. Returns 0, or -EINVAL after logging which key
 * to set.
 */
static int check_advertise(const struct daemon *d, bool *host_only)
{
	char host[ADDR_HOST_MAX];
	int port;

	*host_only = false;
	if (parse_hostport(d->cfg.listen, host, sizeof(host), &port))
		return -EINVAL;	/* setup_auth said why */
	if (!d->cfg.advertise[0]) {
		if (!is_wildcard(host))
			return 0;
		log_error("stratad", "key 'node.listen' is the wildcard address '%s' and "
			  "'node.advertise' is not set: peers would be told no address of this "
			  "host; set node.advertise to the address other hosts reach it at "
			  "(HOST or HOST:PORT)", d->cfg.listen);
		return -EINVAL;
	}
	if (parse_hostport(d->cfg.advertise, host, sizeof(host), &port)) {
		/* HOST alone: a name or IPv4 literal, or [IPv6]. */
		const char *a = d->cfg.advertise;
		size_t n = strlen(a);

		if (n + 8 > sizeof(d->addr) ||
		    (a[0] == '[' ? n < 3 || a[n - 1] != ']' : strchr(a, ':') != NULL) ||
		    strchr(a, ' ')) {
			log_error("stratad", "key 'node.advertise': '%s' is not HOST or HOST:PORT "
				  "(IPv6 as [ADDR] or [ADDR]:PORT)", a);
			return -EINVAL;
		}
		snprintf(host, sizeof(host), "%.*s", a[0] == '[' ? (int)n - 2 : (int)n,
			 a + (a[0] == '['));
		*host_only = true;
	}
	if (is_wildcard(host) || (!*host_only && port == 0)) {
		log_error("stratad", "key 'node.advertise': '%s' is not an address peers can "
			  "reach (a wildcard host or port 0); name this host and its port, or "
			  "the host alone", d->cfg.advertise);
		return -EINVAL;
	}
	return 0;
}

/*
 * TLS: what this node serves (server_out, NULL: plain TCP) and, with
 * node.tls_ca, how its own connections check their peers (the process
 * default, net_tls_set_default). Beyond loopback, plain TCP is refused
 * unless node.insecure, like a missing cluster key. Runs before anything
 * is started.
 */
static int setup_tls(struct daemon *d, struct net_tls **server_out)
{
	bool loop = addr_is_loopback(d->cfg.listen), on;
	struct net_tls *t;
	char err[512];
	int rc;

	*server_out = NULL;
	if (!strcmp(d->cfg.tls, "on")) {
		on = true;
	} else if (!strcmp(d->cfg.tls, "off")) {
		on = false;
	} else if (!strcmp(d->cfg.tls, "auto")) {
		/* Beyond loopback without a certificate: as "off", which
		 * is refused below unless node.insecure. */
		on = !loop && d->cfg.tls_cert[0];
	} else {
		log_error("stratad", "key 'node.tls': '%s' is not one of auto, on, off", d->cfg.tls);
		return -EINVAL;
	}
	if (d->cfg.tls_ca[0]) {
		rc = net_tls_client_new(d->cfg.tls_ca, err, sizeof(err), &t);
		if (rc) {
			log_error("stratad", "node.tls_ca: %s", err);
			return rc;
		}
		net_tls_set_default(t);
		net_tls_put(t);
	}
	if (!on) {
		if (!loop && !d->cfg.insecure) {
			log_error("stratad", "refusing to listen on '%s' without TLS: set node.tls_cert, "
				  "node.tls_key and node.tls_ca (scripts/tls-cert.sh makes them), or "
				  "node.insecure=true to send everything in the clear", d->cfg.listen);
			return -EPERM;
		}
		if (!loop)
			log_warn("stratad", "no TLS on '%s': traffic to this node is in the clear",
				 d->cfg.listen);
		return 0;
	}
	if (!d->cfg.tls_cert[0] || !d->cfg.tls_key[0] || !d->cfg.tls_ca[0]) {
		log_error("stratad", "TLS is on for '%s' (node.tls=%s): set node.tls_cert, "
			  "node.tls_key and node.tls_ca (scripts/tls-cert.sh makes them)%s",
			  d->cfg.listen, d->cfg.tls,
			  loop ? "" : ", or node.insecure=true to send everything in the clear");
		return -EINVAL;
	}
	rc = net_tls_server_new(d->cfg.tls_cert, d->cfg.tls_key, err, sizeof(err), server_out);
	if (rc) {
		log_error("stratad", "%s", err);
		return rc;
	}
	log_info("stratad", "TLS on '%s' with certificate '%s'; peers checked against '%s'",
		 d->cfg.listen, d->cfg.tls_cert, d->cfg.tls_ca);
	return 0;
}

/*
 * Takes DATA/stratad.lock (flock, exclusive) for the life of the process,
 * and writes our pid into it: a second daemon on the same directory would
 * serve the same targets and stores under another address. The kernel
 * drops the lock when the process dies, however it dies. 0, or 1 with
 * the reason logged.
 */
static int lock_data_dir(const char *data)
{
	char path[PATH_MAX], pid[32];
	int rc;

	if (snprintf(path, sizeof(path), "%s/stratad.lock", data) >= (int)sizeof(path)) {
		log_error("stratad", "data directory '%s': path too long", data);
		return 1;
	}
	rc = lock_pidfile(path, pid, sizeof(pid));
	if (rc == -EWOULDBLOCK)
		log_error("stratad", "data directory '%s' is in use by another stratad%s%s%s: "
			  "one directory serves one daemon", data, pid[0] ? " (pid " : "", pid,
			  pid[0] ? ")" : "");
	else if (rc)
		log_error("stratad", "cannot lock '%s': %s", path, strerror(-rc));
	return rc ? 1 : 0;
}

/* Runs the node once its config is read; returns main's exit status. */
/* --check-config: what a start would refuse, without starting, binding or
 * locking anything: the keys and the rules between them (parse_args), the
 * services, the addresses, the cluster key and the TLS files. 0 when the
 * start would get past them, 2 (with the reason logged) when not. */
static int check_config(struct daemon *d)
{
	struct net_auth auth;
	struct net_tls *tls = NULL;
	bool host_only;

	if (setup_auth(d, &auth) || check_advertise(d, &host_only) || setup_tls(d, &tls))
		return 2;
	net_tls_put(tls);
	memset(&auth, 0, sizeof(auth));
	printf("stratad: configuration ok (node %lld, services '%s', listen '%s', data '%s')\n",
	       (long long)d->cfg.node_id, d->cfg.services, d->cfg.listen, d->cfg.data);
	return 0;
}

static int serve(struct daemon *d_, const struct all_keys *keys)
{
	struct daemon d = *d_;
	struct net_auth auth;
	struct net_tls *tls;
	sigset_t sigs;
	enum log_level lvl;
	bool advertise_host_only;
	int rc, sig = 0;

	if (log_level_parse(d.cfg.log_level, &lvl)) {
		fprintf(stderr, "stratad: key 'node.log_level': '%s' is not one of debug, info, warn, error\n",
			d.cfg.log_level);
		return 2;
	}
	log_set_level(lvl);
	if (services_check(d.cfg.services))
		return 2;
	if (d.check_only)
		return check_config(&d);
	if (d.cfg.log_file[0] && (rc = log_open_file(d.cfg.log_file))) {
		fprintf(stderr, "stratad: key 'node.log_file': cannot open '%s': %s\n",
			d.cfg.log_file, strata_strerror(rc));
		return 1;
	}
	rc = mkdir_p(d.cfg.data, 0755);
	if (rc) {
		log_error("stratad", "cannot create data directory '%s': %s", d.cfg.data, strata_strerror(rc));
		return 1;
	}
	if (lock_data_dir(d.cfg.data))
		return 1;

	/* Signals are taken by sigwait in the main thread only. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGHUP);	/* reopens node.log_file */
	sigaddset(&sigs, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);

	if (setup_auth(&d, &auth))
		return 1;
	if (check_advertise(&d, &advertise_host_only))
		return 2;
	if (setup_tls(&d, &tls))
		return 1;
	d.start_ms = reactor_now_ms();
	d.nreactors = d.cfg.threads ? (int)d.cfg.threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (d.nreactors < 1)
		d.nreactors = 1;
	d.reactors = calloc((size_t)d.nreactors, sizeof(*d.reactors));
	if (!d.reactors)
		return 1;
	for (int i = 0; i < d.nreactors; i++) {
		char name[16];

		snprintf(name, sizeof(name), "reactor-%d", i);
		rc = reactor_new(name, &d.reactors[i]);
		if (rc) {
			log_error("stratad", "cannot create reactor: %s", strata_strerror(rc));
			return 1;
		}
	}
	rc = rpc_server_new(d.reactors, d.nreactors, (uint32_t)d.cfg.node_id, &d.srv);
	if (rc)
		return 1;
	if (auth.has_key)
		rpc_server_set_auth(d.srv, &auth);
	if (tls) {
		rpc_server_set_tls(d.srv, tls);
		net_tls_put(tls);
	}
	memset(&auth, 0, sizeof(auth));
	if (set_limits(&d))
		return 1;
	rc = rpc_server_listen(d.srv, d.cfg.listen);
	if (rc < 0) {
		log_error("stratad", "cannot listen on '%s': %s", d.cfg.listen, strata_strerror(rc));
		/* Nothing runs yet: free what was made, so that a refused
		 * start (a port still taken) leaves no leak report. */
		rpc_server_free(d.srv);
		for (int i = 0; i < d.nreactors; i++)
			reactor_free(d.reactors[i]);
		free(d.reactors);
		return 1;
	}
	d.port = rc;
	if (advertise_host_only) {
		snprintf(d.addr, sizeof(d.addr), "%s:%d", d.cfg.advertise, d.port);
	} else if (d.cfg.advertise[0]) {
		snprintf(d.addr, sizeof(d.addr), "%s", d.cfg.advertise);
	} else {
		char host[ADDR_HOST_MAX];
		int port;

		/* Not a wildcard (check_advertise); IPv6 keeps its brackets. */
		parse_hostport(d.cfg.listen, host, sizeof(host), &port);
		snprintf(d.addr, sizeof(d.addr), strchr(host, ':') ? "[%s]:%d" : "%s:%d", host,
			 d.port);
	}
	if (!d.cfg.mgmt_addr[0])
		snprintf(d.cfg.mgmt_addr, sizeof(d.cfg.mgmt_addr), "%s", d.addr);
	rpc_server_route(d.srv, OP_PING, NULL, op_ping, &d, SVC_ANY);
	rpc_server_route(d.srv, OP_STATUS, NULL, op_status, &d, SVC_ANY);
	for (int i = 0; i < d.nreactors; i++) {
		rc = reactor_start(d.reactors[i]);
		if (rc)
			return 1;
	}
	rc = start_services(&d, keys);
	if (rc)
		goto stop;
	/* Every route is set: connections waiting in the backlog are
	 * taken now (none got "unknown operation" from a service starting). */
	rpc_server_accept(d.srv);
	if (d.cfg.metrics_listen[0]) {
		rc = metrics_start(d.cfg.metrics_listen, collect_metrics, &d, &d.metrics);
		if (rc < 0) {
			log_error("stratad", "cannot serve metrics on '%s': %s", d.cfg.metrics_listen,
				  strata_strerror(rc));
			goto stop;
		}
		d.metrics_port = rc;
	}
	rc = write_addr_file(&d);
	if (rc)
		log_warn("stratad", "cannot write '%s/stratad.addr': %s", d.cfg.data, strata_strerror(rc));
	log_info("stratad", "node %lld serving on %s (%d threads, services '%s', metrics port %d)",
		 (long long)d.cfg.node_id, d.addr, d.nreactors, d.cfg.services, d.metrics_port);

	while (sig != SIGTERM && sig != SIGINT) {
		if (sigwait(&sigs, &sig) != 0)
			break;
		if (sig == SIGHUP && d.cfg.log_file[0]) {
			rc = log_open_file(d.cfg.log_file);
			if (rc)
				log_error("stratad", "cannot reopen the log file '%s': %s (still "
					  "writing to the old one)", d.cfg.log_file,
					  strata_strerror(rc));
			else
				log_info("stratad", "log file '%s' reopened", d.cfg.log_file);
		}
	}
	log_info("stratad", "signal %d: shutting down", sig);
	rc = 0;
stop:
	metrics_stop(d.metrics);
	rpc_server_shutdown(d.srv);
	for (int i = d.nservices - 1; i >= 0; i--) {
		if (d.defs[i]->stop)
			d.defs[i]->stop(d.svcs[i]);
	}
	for (int i = 0; i < d.nreactors; i++)
		reactor_stop(d.reactors[i]);
	for (int i = 0; i < d.nreactors; i++)
		reactor_join(d.reactors[i]);
	rpc_server_free(d.srv);
	for (int i = 0; i < d.nreactors; i++)
		reactor_free(d.reactors[i]);
	free(d.reactors);
	log_info("stratad", "stopped");
	return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct daemon d;
	struct all_keys keys;
	int rc;

	memset(&d, 0, sizeof(d));
	memset(&keys, 0, sizeof(keys));
	if (all_keys_build(&keys) || !(d.cfg_blob = calloc(1, keys.size))) {
		fprintf(stderr, "stratad: out of memory\n");
		rc = 1;
	} else if (parse_args(&d, &keys, argc, argv)) {
		rc = 2;
	} else {
		rc = serve(&d, &keys);
	}
	free(d.cfg_blob);
	free(keys.keys);
	return rc;
}
