/*
 * strata compose inventory|create|list|show|delete: the composer's
 * Redfish API (docs/composer.md) from the command line. The CLI is one
 * more client of that API: it speaks HTTP/1.1 to the composer, which it
 * finds with --composer HOST:PORT[,HOST:PORT...], else $STRATA_COMPOSER,
 * else in the STATUS of the cluster's mgmt nodes (the composer runs
 * beside mgmt, on every control node of a cluster on PostgreSQL), the
 * cluster being found as for every command (--mgmt, --dir, $STRATA_MGMT).
 * Of several composers one serves (the mgmt leader's); the others answer
 * 503 naming it, and the CLI follows (call_at), for the time a takeover
 * takes.
 * It presents the command's token (--token, $STRATA_TOKEN,
 * $STRATA_TOKEN_FILE, DIR/admin.token) as "Authorization: Bearer".
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "common/fileio.h"
#include "common/token.h"
#include "compute/gpu_inventory.h"
#include "net/mgmt_addrs.h"
#include "net/proto.h"
#include "strata/errors.h"
#include "strata/locate.h"

#define COMPOSE_TIMEOUT_MS 30000
#define COMPOSE_REPLY_MAX (64u << 20)
/* The composer's COMP_PATHS_MAX: it refuses more, with the reason. */
#define COMPOSE_PATHS_MAX 8
/* How long a call follows composers that do not serve (or are gone):
 * the mgmt leader lease (3 s), one renewal, and retries. */
#define COMPOSE_FOLLOW_MS 15000
#define COMPOSE_FOLLOW_PAUSE_MS 250
/* The composer's COMPOSER_NOT_SERVING: its 503 when another one serves. */
#define COMPOSE_NOT_SERVING "Strata.1.0.NotServing"

struct compose_args {
	const char *cmd;		/* "compose create", ... */
	const char *composer, *mgmt, *dir, *token;
	bool json;
	/* create */
	int64_t gpus;
	const char *model, *tenant, *name, *token_out;
	const char *zone;		/* every GPU in this zone */
	const char *gpu_ids;		/* "gpu-1-0,gpu-1-1": exactly these */
	bool same_node, same_zone, retain;
	uint64_t storage, memory;
	int64_t ttl_s;
	int64_t owner_uid, owner_gid;	/* -1: not given */
	uint32_t npaths;
	struct token_path paths[COMPOSE_PATHS_MAX];
	int64_t qos_mbps, qos_iops;	/* the storage caps; 0: none */
	const char *id;			/* show, delete, recompose */
	int64_t since_ms;		/* usage: the window, back from now; -1: all */
};

/* ---- a small HTTP/1.1 client: one request per connection ---- */

static int split_hostport(const char *addr, char *host, size_t hlen, char *port, size_t plen)
{
	const char *colon = strrchr(addr, ':');

	if (!colon || colon == addr || !colon[1] || (size_t)(colon - addr) >= hlen)
		return -EINVAL;
	if (addr[0] == '[' && colon[-1] == ']')
		snprintf(host, hlen, "%.*s", (int)(colon - addr - 2), addr + 1);
	else
		snprintf(host, hlen, "%.*s", (int)(colon - addr), addr);
	snprintf(port, plen, "%s", colon + 1);
	return 0;
}

static int http_connect(const char *addr)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL, *ai;
	struct timeval tv = { COMPOSE_TIMEOUT_MS / 1000, 0 };
	char host[256], port[16];
	int fd = -1;

	if (split_hostport(addr, host, sizeof(host), port, sizeof(port)) ||
	    getaddrinfo(host, port, &hints, &res))
		return -EINVAL;
	for (ai = res; ai && fd < 0; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
			close(fd);
			fd = -1;
		}
	}
	freeaddrinfo(res);
	return fd < 0 ? -ECONNREFUSED : fd;
}

/* Sends METHOD path with body (may be NULL) and reads the answer: the
 * status code and the body, parsed as JSON (*out; NULL when it is not).
 * Returns the status code or a negative error. */
int cli_http_call(const char *addr, const char *token, const char *method, const char *path,
		  const char *body, json_t **out)
{
	size_t blen = body ? strlen(body) : 0, got = 0, cap = 65536;
	char *head = NULL, *buf = NULL, *sep;
	int fd, code = -EPROTO, n;
	ssize_t r;

	*out = NULL;
	fd = http_connect(addr);
	if (fd < 0)
		return fd;
	n = asprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n"
			    "Accept: application/json\r\n%s%s%s"
			    "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
		     method, path, addr, token[0] ? "Authorization: Bearer " : "", token,
		     token[0] ? "\r\n" : "", blen);
	if (n < 0) {
		head = NULL;
		code = -ENOMEM;
		goto out;
	}
	if (write_full(fd, head, (size_t)n) || (blen && write_full(fd, body, blen))) {
		code = -EPIPE;
		goto out;
	}
	buf = malloc(cap + 1);
	if (!buf) {
		code = -ENOMEM;
		goto out;
	}
	while ((r = read(fd, buf + got, cap - got)) > 0) {
		got += (size_t)r;
		if (got == cap) {
			char *nb = cap < COMPOSE_REPLY_MAX ? realloc(buf, cap * 2 + 1) : NULL;

			if (!nb) {
				code = -EFBIG;
				goto out;
			}
			buf = nb;
			cap *= 2;
		}
	}
	if (r < 0) {
		code = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto out;
	}
	buf[got] = 0;
	sep = strstr(buf, "\r\n\r\n");
	if (strncmp(buf, "HTTP/1.", 7) || !sep || sscanf(buf + 8, " %d", &code) != 1) {
		code = -EPROTO;
		goto out;
	}
	*out = json_loads(sep + 4, 0, NULL);
out:
	free(head);
	free(buf);
	close(fd);
	return code;
}

/* ---- finding the composer ---- */

/* Adds the composer beside mgmt at addr (its STATUS's listen) to out,
 * comma-separated: first when its STATUS says it serves, else last. 0,
 * -ENOENT (none runs there) or the call's error. */
static int composer_beside(struct rpc_client *cl, const char *addr, uint32_t timeout_ms,
			   char *out, size_t len)
{
	json_t *sv = NULL;
	const char *listen;
	char was[512];
	int rc = cli_service_status(cl, addr, "composer", timeout_ms, &sv), n;

	listen = rc ? NULL : json_string_value(json_object_get(sv, "listen"));
	if (!rc && (!listen || !listen[0]))
		rc = -ENOENT;
	if (!rc && strlen(out) >= sizeof(was))
		rc = -ENAMETOOLONG;
	if (!rc) {
		snprintf(was, sizeof(was), "%s", out);
		/* "serving" absent (an older composer): it serves. */
		if (json_is_false(json_object_get(sv, "serving")))
			n = snprintf(out, len, "%s%s%s", was, was[0] ? "," : "", listen);
		else
			n = snprintf(out, len, "%s%s%s", listen, was[0] ? "," : "", was);
		if (n < 0 || (size_t)n >= len) {
			snprintf(out, len, "%s", was);
			rc = -ENAMETOOLONG;
		}
	}
	json_decref(sv);
	return rc;
}

static int find_composer(const struct compose_args *a, char *out, size_t len)
{
	struct rpc_client *cl = NULL;
	struct mgmt_addrs l;
	char mgmt[512];
	const char *env = getenv("STRATA_COMPOSER");
	int rc, first = 0;

	if (a->composer || (env && env[0])) {
		snprintf(out, len, "%s", a->composer ? a->composer : env);
		return 0;
	}
	rc = strata_find_mgmt(a->mgmt, a->dir, mgmt, sizeof(mgmt));
	if (rc || mgmt_addrs_init(&l, mgmt)) {
		cli_err("%s: no composer named: give --composer HOST:PORT, --mgmt ADDR or --dir DIR (or $STRATA_COMPOSER, $STRATA_MGMT)",
			a->cmd);
		return 2;
	}
	if (cli_rpc_client("strata-compose", 5000, a->token, a->mgmt, a->dir, &cl))
		return 1;
	/* Every control node's, the one that serves first: whichever serves
	 * when the call is made is followed. */
	out[0] = 0;
	for (uint32_t i = 0; i < l.n; i++) {
		/* Bounded with several: a paused host is given up on soon. */
		rc = composer_beside(cl, l.addr[i], mgmt_addrs_timeout(&l, 5000), out, len);
		if (rc && rc != -ENOENT && !first)
			first = rc;
	}
	rpc_client_free(cl);
	if (!out[0]) {
		cli_err("%s: %s '%s'%s%s", a->cmd, first ? "cannot ask mgmt at" : "no composer runs beside mgmt at",
			mgmt, first ? ": " : "", first ? strata_strerror(first) : "");
		return 1;
	}
	return 0;
}

/*
 * cli_http_call to the composer of list (comma-separated) that serves:
 * one that answers 503 naming another (it does not lead) is left for
 * that one, one that refuses the connection (gone) for the next; a round
 * with no answer pauses and starts again, for at most COMPOSE_FOLLOW_MS.
 * A request sent is never sent again elsewhere unless it was refused
 * (503): a connection that failed after it may have been served. at
 * (len bytes) receives the address that answered. Returns the status
 * code or a negative error, as cli_http_call.
 */
static int call_at(const char *list, const char *token, const char *method, const char *path,
		   const char *body, json_t **out, char *at, size_t len)
{
	struct timespec pause = { 0, COMPOSE_FOLLOW_PAUSE_MS * 1000000L };
	struct mgmt_addrs l;
	char next[CFG_STR_MAX] = "";
	uint64_t deadline;
	uint32_t i = 0, tried = 0;
	int code;

	/* list is copied (mgmt_addrs is the tree's parser of address lists):
	 * at may be the same buffer. */
	if (mgmt_addrs_init(&l, list))
		return -EINVAL;
	deadline = mono_ms() + COMPOSE_FOLLOW_MS;
	for (;;) {
		const char *to = next[0] ? next : l.addr[i], *named = NULL;
		json_t *info;
		bool refused;

		snprintf(at, len, "%s", to);
		code = cli_http_call(at, token, method, path, body, out);
		info = json_array_get(json_object_get(json_object_get(*out, "error"),
						      "@Message.ExtendedInfo"), 0);
		refused = code == 503 && !strcmp(json_string_value(json_object_get(info,
						 "MessageId")) ?: "", COMPOSE_NOT_SERVING);
		/* Only a refusal is sent again: any other answer was served. */
		if (refused)
			named = json_string_value(json_array_get(json_object_get(info,
								 "MessageArgs"), 0));
		if (!refused && code != -ECONNREFUSED)
			return code;
		if (mono_ms() >= deadline)
			return code;
		/* The one named, once; else the next of the list. */
		if (named && named[0] && strcmp(named, at) && !next[0]) {
			snprintf(next, sizeof(next), "%s", named);
		} else {
			next[0] = 0;
			i = (i + 1) % l.n;
			if (++tried % l.n == 0)
				nanosleep(&pause, NULL);
		}
		json_decref(*out);
		*out = NULL;
	}
}

/* Calls the composer; prints the error of a refusal. Returns 0 with *out
 * (the caller json_decref's it), or the exit status. */
static int call(const struct compose_args *a, const char *method, const char *path,
		const char *body, json_t **out)
{
	char addr[256], *token;
	const char *msg;
	int code, rc = find_composer(a, addr, sizeof(addr));

	if (rc)
		return rc;
	token = cli_find_token(a->token, a->mgmt, a->dir);
	if (!token)
		return 1;
	code = call_at(addr, token, method, path, body, out, addr, sizeof(addr));
	memset(token, 0, strlen(token));
	free(token);
	if (code < 0) {
		cli_err("%s: cannot reach the composer at '%s': %s", a->cmd, addr,
			strata_strerror(code));
		return 1;
	}
	if (code >= 200 && code < 300 && *out)
		return 0;
	msg = json_string_value(json_object_get(json_object_get(*out, "error"), "message"));
	cli_err("%s: %s (HTTP %d)", a->cmd, msg ? msg : "the composer's answer is not JSON", code);
	json_decref(*out);
	*out = NULL;
	return 1;
}

int cli_compose_addr(const char *dir, char *out, size_t len)
{
	struct compose_args a = { .cmd = "compose", .dir = dir, .owner_uid = -1, .owner_gid = -1 };
	json_t *body = NULL;
	char *token;
	int rc = find_composer(&a, out, len), code;

	if (rc || !strchr(out, ','))
		return rc;
	/* Of several, the one that serves. */
	token = cli_find_token(NULL, NULL, dir);
	if (!token)
		return 1;
	code = call_at(out, token, "GET", "/redfish/v1/CompositionService", NULL, &body, out, len);
	memset(token, 0, strlen(token));
	free(token);
	json_decref(body);
	if (code == 200)
		return 0;
	cli_err("compose: no composer of the cluster serves (the last, '%s', answered %d)", out, code);
	return 1;
}

int cli_compose_call(const char *dir, const char *method, const char *path, const char *body,
		     json_t **out)
{
	struct compose_args a = { .cmd = "compose", .dir = dir, .owner_uid = -1, .owner_gid = -1 };

	return call(&a, method, path, body, out);
}

/* ---- printing ---- */

static json_t *oem(json_t *o)
{
	return json_object_get(json_object_get(o, "Oem"), "Strata");
}

static const char *human(json_int_t v, char *buf, size_t len)
{
	const char *u[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double d = (double)v;
	int i = 0;

	while (d >= 1024 && i < 5) {
		d /= 1024;
		i++;
	}
	snprintf(buf, len, i ? "%.1f %s" : "%.0f %s", d, u[i]);
	return buf;
}

static void print_json(json_t *o)
{
	char *t = json_dumps(o, JSON_INDENT(2));

	if (t)
		printf("%s\n", t);
	free(t);
}

static void print_pool(const char *what, json_t *p)
{
	char t[32], u[32], f[32];

	printf("%-8s total %s, used %s, free %s\n", what,
	       human(json_integer_value(json_object_get(p, "Total")), t, sizeof(t)),
	       human(json_integer_value(json_object_get(p, "Used")), u, sizeof(u)),
	       human(json_integer_value(json_object_get(p, "Free")), f, sizeof(f)));
}

static void print_inventory(json_t *svc)
{
	json_t *inv = json_object_get(oem(svc), "Inventory"), *g = json_object_get(inv, "Gpus");
	json_t *models = json_object_get(g, "Models"), *v;
	const char *k;

	printf("GPUs     %lld total, %lld free, %lld composed, %lld failed, %lld unavailable\n",
	       (long long)json_integer_value(json_object_get(g, "Total")),
	       (long long)json_integer_value(json_object_get(g, "Free")),
	       (long long)json_integer_value(json_object_get(g, "Composed")),
	       (long long)json_integer_value(json_object_get(g, "Failed")),
	       (long long)json_integer_value(json_object_get(g, "Unavailable")));
	json_object_foreach(models, k, v)
		printf("  %-20s %lld free of %lld\n", k,
		       (long long)json_integer_value(json_object_get(v, "Free")),
		       (long long)json_integer_value(json_object_get(v, "Total")));
	print_pool("storage", json_object_get(inv, "Storage"));
	print_pool("memory", json_object_get(inv, "Memory"));
	printf("\n%-6s %-22s %-5s %-5s %s\n", "NODE", "ADDRESS", "UP", "GPUS", "ZONE");
	for (size_t i = 0; i < json_array_size(json_object_get(inv, "ComputeNodes")); i++) {
		json_t *n = json_array_get(json_object_get(inv, "ComputeNodes"), i);

		printf("%-6lld %-22s %-5s %-5lld %s\n",
		       (long long)json_integer_value(json_object_get(n, "Node")),
		       json_string_value(json_object_get(n, "Address")) ?: "",
		       json_is_true(json_object_get(n, "Up")) ? "yes" : "no",
		       (long long)json_integer_value(json_object_get(n, "Gpus")),
		       json_string_value(json_object_get(n, "Zone")) ?: "");
	}
}

static void print_system(json_t *s)
{
	json_t *o = oem(s), *vol = json_object_get(o, "Volume"), *mem = json_object_get(o, "Memory");
	json_t *cuda = json_object_get(o, "CudaVisibleDevices"), *v, *g;
	const char *reason = json_string_value(json_object_get(o, "Reason")), *k;
	char b[32];
	size_t i;

	printf("%s: %s%s%s\n", json_string_value(json_object_get(s, "Id")) ?: "?",
	       json_string_value(json_object_get(o, "State")) ?: "?", reason && reason[0] ? ": " : "",
	       reason ? reason : "");
	printf("  tenant   %s\n", json_string_value(json_object_get(o, "Tenant")) ?: "");
	printf("  etag     %s\n", json_string_value(json_object_get(s, "@odata.etag")) ?: "");
	if (json_is_object(json_object_get(o, "Owner")))
		printf("  owner    uid %lld gid %lld\n",
		       (long long)json_integer_value(json_object_get(json_object_get(o, "Owner"), "Uid")),
		       (long long)json_integer_value(json_object_get(json_object_get(o, "Owner"), "Gid")));
	json_array_foreach(json_object_get(o, "Paths"), i, v)
		printf("  path     %s (%s)\n", json_string_value(json_object_get(v, "Path")) ?: "",
		       json_string_value(json_object_get(v, "Access")) ?: "");
	json_object_foreach(cuda, k, v) {
		const char *zone = "";

		json_array_foreach(json_object_get(o, "Gpus"), i, g)
			if (json_integer_value(json_object_get(g, "Node")) == strtoll(k, NULL, 10))
				zone = json_string_value(json_object_get(g, "Zone")) ?: "";
		printf("  gpus     node %s (zone %s): CUDA_VISIBLE_DEVICES=%s\n", k, zone,
		       json_string_value(v));
	}
	if (json_is_object(vol))
		printf("  volume   %s (%s)\n", json_string_value(json_object_get(vol, "Path")),
		       human(json_integer_value(json_object_get(vol, "Size")), b, sizeof(b)));
	if (json_is_object(mem))
		printf("  memory   namespace %s (%s)\n",
		       json_string_value(json_object_get(mem, "Namespace")),
		       human(json_integer_value(json_object_get(mem, "Size")), b, sizeof(b)));
	if (json_is_object(json_object_get(o, "Qos"))) {
		long long mbps = json_integer_value(json_object_get(json_object_get(o, "Qos"),
								    "BandwidthMBps"));
		long long iops = json_integer_value(json_object_get(json_object_get(o, "Qos"), "Iops"));
		char bw[32] = "no cap", ops[32] = "no cap";

		if (mbps)
			snprintf(bw, sizeof(bw), "%lld MiB/s", mbps);
		if (iops)
			snprintf(ops, sizeof(ops), "%lld", iops);
		printf("  qos      bandwidth %s, IOPS %s (per storage daemon)\n", bw, ops);
	}
	printf("  mgmt     %s\n",
	       json_string_value(json_object_get(json_object_get(o, "Addresses"), "Mgmt")) ?: "");
	printf("  token id %s\n", json_string_value(json_object_get(o, "CredentialId")) ?: "");
}

static void print_usage(json_t *u)
{
	json_t *t, *all = json_object_get(u, "Tenants");
	size_t i;

	char rd[32], wr[32];

	printf("%-20s %12s %16s %16s %6s %12s %12s\n", "TENANT", "GPU-HOURS", "STORAGE TB-HOURS",
	       "MEMORY GB-HOURS", "COMPS", "READ", "WRITTEN");
	json_array_foreach(all, i, t)
		printf("%-20s %12.4f %16.6f %16.4f %6lld %12s %12s\n",
		       json_string_value(json_object_get(t, "Tenant")) ?: "?",
		       json_number_value(json_object_get(t, "GpuHours")),
		       json_number_value(json_object_get(t, "StorageTBHours")),
		       json_number_value(json_object_get(t, "MemoryGBHours")),
		       (long long)json_integer_value(json_object_get(t, "Compositions")),
		       human(json_integer_value(json_object_get(t, "BytesRead")), rd, sizeof(rd)),
		       human(json_integer_value(json_object_get(t, "BytesWritten")), wr,
			     sizeof(wr)));
	if (!json_array_size(all))
		printf("(no composition held anything in the window)\n");
}

static void print_list(json_t *coll)
{
	json_t *all = json_object_get(oem(coll), "Systems");
	char s[32], m[32];

	printf("%-12s %-12s %-16s %-5s %-10s %s\n", "ID", "STATE", "TENANT", "GPUS", "STORAGE",
	       "MEMORY");
	for (size_t i = 0; i < json_array_size(all); i++) {
		json_t *sys = json_array_get(all, i), *o = oem(sys);

		printf("%-12s %-12s %-16s %-5zu %-10s %s\n",
		       json_string_value(json_object_get(sys, "Id")) ?: "",
		       json_string_value(json_object_get(o, "State")) ?: "",
		       json_string_value(json_object_get(o, "Tenant")) ?: "",
		       json_array_size(json_object_get(o, "Gpus")),
		       human(json_integer_value(json_object_get(json_object_get(o, "Volume"), "Size")),
			     s, sizeof(s)),
		       human(json_integer_value(json_object_get(json_object_get(o, "Memory"), "Size")),
			     m, sizeof(m)));
	}
}

/* ---- the commands ---- */

static int create(const struct compose_args *a)
{
	json_t *rq = json_object(), *out = NULL;
	const char *cred;
	char *body;
	int rc;

	if (a->gpus || a->model || a->gpu_ids || a->zone || a->same_zone) {
		json_t *g = json_pack("{s:I, s:s, s:b}", "Count", (json_int_t)a->gpus, "Model",
				      a->model ? a->model : "", "SameNode", a->same_node);

		if (a->zone)
			json_object_set_new(g, "Zone", json_string(a->zone));
		if (a->same_zone)
			json_object_set_new(g, "SameZone", json_true());
		json_t *ids = json_array();

		for (const char *p = a->gpu_ids; p && *p;) {
			size_t n = strcspn(p, ",");

			json_array_append_new(ids, json_stringn(p, n));
			p += n + (p[n] == ',');
		}
		if (a->gpu_ids)
			json_object_set_new(g, "Ids", ids);
		else
			json_decref(ids);
		json_object_set_new(rq, "Gpus", g);
	}
	if (a->storage)
		json_object_set_new(rq, "Storage", json_pack("{s:I}", "Size", (json_int_t)a->storage));
	if (a->memory)
		json_object_set_new(rq, "Memory", json_pack("{s:I}", "Size", (json_int_t)a->memory));
	if (a->tenant)
		json_object_set_new(rq, "Tenant", json_string(a->tenant));
	if (a->name)
		json_object_set_new(rq, "Name", json_string(a->name));
	if (a->ttl_s)
		json_object_set_new(rq, "TtlSeconds", json_integer(a->ttl_s));
	if (a->retain)
		json_object_set_new(rq, "Retain", json_true());
	if (a->owner_uid >= 0)
		json_object_set_new(rq, "Owner", json_pack("{s:I, s:I}", "Uid",
							   (json_int_t)a->owner_uid, "Gid",
							   (json_int_t)(a->owner_gid >= 0 ? a->owner_gid
											  : a->owner_uid)));
	if (a->npaths) {
		json_t *paths = json_array();

		for (uint32_t i = 0; i < a->npaths; i++)
			json_array_append_new(paths, json_pack("{s:s, s:s}", "Path", a->paths[i].prefix,
							       "Access", a->paths[i].write ? "rw" : "r"));
		json_object_set_new(rq, "Paths", paths);
	}
	if (a->qos_mbps || a->qos_iops)
		json_object_set_new(rq, "Oem", json_pack("{s:{s:{s:I, s:I}}}", "Strata", "Qos",
							 "BandwidthMBps", (json_int_t)a->qos_mbps,
							 "Iops", (json_int_t)a->qos_iops));
	body = json_dumps(rq, JSON_COMPACT);
	json_decref(rq);
	if (!body)
		return 1;
	rc = call(a, "POST", "/redfish/v1/Systems", body, &out);
	free(body);
	if (rc)
		return rc;
	cred = json_string_value(json_object_get(oem(out), "Credential"));
	if (a->token_out && cred) {
		rc = cli_write_secret(a->token_out, cred);
		if (rc) {
			cli_err("%s: cannot write the credential to '%s': %s (the composition stands; delete it or read its token id)",
				a->cmd, a->token_out, strata_strerror(rc));
			rc = 1;
		}
		json_object_del(oem(out), "Credential");
	}
	if (a->json) {
		print_json(out);
	} else {
		print_system(out);
		if (cred && !a->token_out)
			printf("  token    %s\n", cred);
		else if (a->token_out)
			printf("  token    in %s\n", a->token_out);
	}
	json_decref(out);
	return rc;
}

static int usage(const char *msg)
{
	if (msg)
		cli_err("%s", msg);
	fprintf(stderr,
		"usage: strata compose inventory [--json]\n"
		"       strata compose create [--gpus N] [--model M] [--same-node] [--gpu-ids ID,...]\n"
		"                             [--zone Z] [--same-zone]\n"
		"                             [--storage SIZE]\n"
		"                             [--memory SIZE] [--tenant T] [--name NAME] [--ttl TIME]\n"
		"                             [--retain] [--owner UID[:GID]] [--path r:PATH|rw:PATH]...\n"
		"                             [--bandwidth MIB_PER_S] [--iops N]\n"
		"                             [--token-out FILE] [--json]\n"
		"       strata compose list [--json]\n"
		"       strata compose show ID [--json]\n"
		"       strata compose delete ID [--json]\n"
		"       strata compose recompose ID [--json]\n"
		"       strata compose usage [--since TIME] [--json]\n"
		"  the composer: --composer HOST:PORT[,HOST:PORT...] (the one that serves is\n"
		"  followed), $STRATA_COMPOSER, or the cluster's (--mgmt ADDR, --dir DIR,\n"
		"  $STRATA_MGMT); an admin token (--token, ...)\n");
	return 2;
}

static int parse(int argc, char **argv, struct compose_args *a)
{
	enum { O_COMPOSER = 256, O_MGMT, O_DIR, O_TOKEN, O_JSON, O_SINCE, O_GPUS, O_MODEL, O_SAME,
	       O_STORAGE, O_MEMORY, O_TENANT, O_NAME, O_TTL, O_RETAIN, O_OUT, O_OWNER, O_PATH, O_GPU_IDS,
	       O_BANDWIDTH, O_IOPS, O_ZONE, O_SAME_ZONE };
	static const struct option opts[] = {
		{ "composer", required_argument, NULL, O_COMPOSER },
		{ "mgmt", required_argument, NULL, O_MGMT },
		{ "dir", required_argument, NULL, O_DIR },
		{ "token", required_argument, NULL, O_TOKEN },
		{ "json", no_argument, NULL, O_JSON },
		{ "since", required_argument, NULL, O_SINCE },
		{ "gpus", required_argument, NULL, O_GPUS },
		{ "model", required_argument, NULL, O_MODEL },
		{ "same-node", no_argument, NULL, O_SAME },
		{ "storage", required_argument, NULL, O_STORAGE },
		{ "memory", required_argument, NULL, O_MEMORY },
		{ "tenant", required_argument, NULL, O_TENANT },
		{ "name", required_argument, NULL, O_NAME },
		{ "ttl", required_argument, NULL, O_TTL },
		{ "retain", no_argument, NULL, O_RETAIN },
		{ "token-out", required_argument, NULL, O_OUT },
		{ "owner", required_argument, NULL, O_OWNER },
		{ "path", required_argument, NULL, O_PATH },
		{ "gpu-ids", required_argument, NULL, O_GPU_IDS },
		{ "bandwidth", required_argument, NULL, O_BANDWIDTH },
		{ "iops", required_argument, NULL, O_IOPS },
		{ "zone", required_argument, NULL, O_ZONE },
		{ "same-zone", no_argument, NULL, O_SAME_ZONE },
		{ NULL, 0, NULL, 0 },
	};
	bool create = strcmp(argv[0], "create") == 0;
	int64_t ms;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (!create && c >= O_GPUS) {
			cli_err("%s: '%s' is an option of 'compose create'", a->cmd, argv[optind - 1]);
			return 2;
		}
		switch (c) {
		case O_COMPOSER: a->composer = optarg; break;
		case O_MGMT: a->mgmt = optarg; break;
		case O_DIR: a->dir = optarg; break;
		case O_TOKEN: a->token = optarg; break;
		case O_JSON: a->json = true; break;
		case O_SINCE:
			if (strcmp(argv[0], "usage")) {
				cli_err("%s: '--since' is an option of 'compose usage'", a->cmd);
				return 2;
			}
			if (parse_ms(optarg, &a->since_ms) || a->since_ms < 1000) {
				cli_err("%s: --since: '%s' is not a time of 1 s or more back from now (e.g. 24h, 30m)",
					a->cmd, optarg);
				return 2;
			}
			break;
		case O_MODEL: a->model = optarg; break;
		case O_SAME: a->same_node = true; break;
		case O_SAME_ZONE: a->same_zone = true; break;
		case O_ZONE:
			if (!gpu_zone_ok(optarg)) {
				cli_err("%s: --zone: '%s' is not a zone name (1..%d letters, digits, '.', '_' or '-')",
					a->cmd, optarg, GPU_ZONE_MAX);
				return 2;
			}
			a->zone = optarg;
			break;
		case O_TENANT: a->tenant = optarg; break;
		case O_NAME: a->name = optarg; break;
		case O_RETAIN: a->retain = true; break;
		case O_OUT: a->token_out = optarg; break;
		case O_GPU_IDS: a->gpu_ids = optarg; break;
		case O_GPUS:
			if (parse_i64(optarg, &a->gpus) || a->gpus < 0 || a->gpus > 64) {
				cli_err("%s: --gpus: '%s' is not a number of GPUs in 0..64", a->cmd, optarg);
				return 2;
			}
			break;
		case O_STORAGE:
		case O_MEMORY:
			if (parse_size(optarg, c == O_STORAGE ? &a->storage : &a->memory)) {
				cli_err("%s: --%s: '%s' is not a size (e.g. 1G, 256M)", a->cmd,
					c == O_STORAGE ? "storage" : "memory", optarg);
				return 2;
			}
			break;
		case O_OWNER: {
			char *colon = strchr(optarg, ':');
			char uid[32];

			snprintf(uid, sizeof(uid), "%.*s", colon ? (int)(colon - optarg) : 31, optarg);
			if (parse_i64(uid, &a->owner_uid) || a->owner_uid < 1 ||
			    a->owner_uid > 65534 ||
			    (colon && (parse_i64(colon + 1, &a->owner_gid) || a->owner_gid < 0 ||
				       a->owner_gid > 65534))) {
				cli_err("%s: --owner: '%s' is not UID[:GID] (a uid in 1..65534, not root; "
					"a gid in 0..65534)", a->cmd, optarg);
				return 2;
			}
			break;
		}
		case O_PATH:
			if (a->npaths >= COMPOSE_PATHS_MAX ||
			    token_path_parse(optarg, &a->paths[a->npaths])) {
				cli_err("%s: --path: '%s' is not r:PATH or rw:PATH with a normalized absolute PATH (at most %d)",
					a->cmd, optarg, COMPOSE_PATHS_MAX);
				return 2;
			}
			a->npaths++;
			break;
		case O_BANDWIDTH:
			if (parse_i64(optarg, &a->qos_mbps) || a->qos_mbps < 0 ||
			    (uint64_t)a->qos_mbps > TOKEN_QOS_BW_MAX >> 20) {
				cli_err("%s: --bandwidth: '%s' is not a whole number of MiB/s in 0..%llu (0: no cap)",
					a->cmd, optarg, (unsigned long long)(TOKEN_QOS_BW_MAX >> 20));
				return 2;
			}
			break;
		case O_IOPS:
			if (parse_i64(optarg, &a->qos_iops) || a->qos_iops < 0 ||
			    a->qos_iops > TOKEN_QOS_IOPS_MAX) {
				cli_err("%s: --iops: '%s' is not a whole number of operations/s in 0..%u (0: no cap)",
					a->cmd, optarg, TOKEN_QOS_IOPS_MAX);
				return 2;
			}
			break;
		case O_TTL:
			if (parse_ms(optarg, &ms) || ms < 1000) {
				cli_err("%s: --ttl: '%s' is not a time of 1 s or more (e.g. 90s, 30m)",
					a->cmd, optarg);
				return 2;
			}
			a->ttl_s = ms / 1000;
			break;
		default:
			cli_err("%s: unexpected option '%s'", a->cmd, argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc)
		a->id = argv[optind++];
	if (optind < argc) {
		cli_err("%s: unexpected argument '%s'", a->cmd, argv[optind]);
		return 2;
	}
	return 0;
}

int cmd_compose(int argc, char **argv)
{
	static const char *const actions[] = { "inventory", "create", "list", "show", "delete",
					       "recompose", "usage" };
	struct compose_args a = { .owner_uid = -1, .owner_gid = -1, .since_ms = -1 };
	char cmd[32], path[160];
	json_t *out = NULL;
	bool takes_id;
	int rc;

	if (argc < 2)
		return usage(NULL);
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (strcmp(argv[1], actions[i]) == 0)
			a.cmd = actions[i];
	if (!a.cmd)
		return usage("compose: unknown action (inventory, create, list, show, delete, recompose, usage)");
	snprintf(cmd, sizeof(cmd), "compose %s", a.cmd);
	a.cmd = cmd;
	rc = parse(argc - 1, argv + 1, &a);
	if (rc)
		return rc;
	takes_id = strcmp(argv[1], "show") == 0 || strcmp(argv[1], "delete") == 0 ||
		   strcmp(argv[1], "recompose") == 0;
	if (takes_id != (a.id != NULL))
		return usage(takes_id ? "compose: give the composition's ID" :
				 "compose: this action takes no ID");
	if (strcmp(argv[1], "create") == 0)
		return create(&a);
	if (a.id && (strlen(a.id) > 63 || strspn(a.id, "abcdefghijklmnopqrstuvwxyz"
					   "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != strlen(a.id))) {
		cli_err("%s: '%s' is not a composition ID (such as comp-12)", cmd, a.id);
		return 2;
	}
	if (a.id)
		snprintf(path, sizeof(path), "/redfish/v1/Systems/%s", a.id);
	if (strcmp(argv[1], "inventory") == 0)
		rc = call(&a, "GET", "/redfish/v1/CompositionService", NULL, &out);
	else if (strcmp(argv[1], "list") == 0)
		rc = call(&a, "GET", "/redfish/v1/Systems", NULL, &out);
	else if (strcmp(argv[1], "usage") == 0) {
		int64_t since = a.since_ms < 0 ? 0 : (int64_t)time(NULL) - a.since_ms / 1000;

		snprintf(path, sizeof(path), "/redfish/v1/CompositionService/Oem/Strata/Usage?Since=%lld",
			 (long long)(since > 0 ? since : 0));
		rc = call(&a, "GET", path, NULL, &out);
	} else if (strcmp(argv[1], "recompose") == 0) {
		snprintf(path, sizeof(path), "/redfish/v1/Systems/%s/Actions/Oem/Strata.Recompose",
			 a.id);
		rc = call(&a, "POST", path, "{}", &out);
	} else
		rc = call(&a, strcmp(argv[1], "show") == 0 ? "GET" : "DELETE", path, NULL, &out);
	if (rc)
		return rc;
	if (a.json)
		print_json(out);
	else if (strcmp(argv[1], "inventory") == 0)
		print_inventory(out);
	else if (strcmp(argv[1], "list") == 0)
		print_list(out);
	else if (strcmp(argv[1], "usage") == 0)
		print_usage(out);
	else
		print_system(out);
	json_decref(out);
	return 0;
}
