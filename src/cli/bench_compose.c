/*
 * strata bench compose: the composer's compose and release under load.
 *
 * It starts a local cluster (one storage daemon, R=1, and --nodes compute
 * daemons declaring --gpus-per-node GPUs each: 16 x 64 = 1,024 GPU
 * resource blocks by default), waits until the composer's inventory lists
 * them all, then runs --threads clients, each composing ({"Gpus":
 * {"Count": 1}} and, with --storage, a volume of that size: a directory,
 * its quota and a credential signed by mgmt) and releasing (DELETE) in a
 * loop, --requests pairs in all. Each request is one HTTP/1.1 connection
 * of its own, as 'strata compose' makes.
 *
 * The baseline, in the same run with the same client and threads: GET
 * /redfish/v1 (the service root, answered by the HTTP thread without the
 * composer's owner thread): the cost of the HTTP round trip itself, so
 * the ratio is what composing adds. No peer composer can be installed
 * from Debian to compare with.
 *
 * Then, with --qos MIB (0: not run), the QoS rows: a composition whose
 * storage is capped at MIB MiB/s writes then reads 3 s worth at the cap
 * with libstrata and its credential (4 MiB at a time), and one without a
 * cap does the same: each rate beside the cap, as a ratio
 * (docs/composer.md, "QoS"), and the uncapped run as the baseline.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "bench.h"
#include "cli.h"
#include "common/clock.h"
#include "common/config.h"
#include "strata/errors.h"
#include "strata/strata.h"

#define BC_MAX_THREADS 64
#define BC_MAX_REQUESTS 100000
#define BC_QOS_IO (4u << 20)	/* the QoS rows' I/O size */

struct bc {
	int nodes, gpus, threads, requests;
	uint64_t storage;
	int qos_mib;			/* the QoS rows' cap; 0: none */
	char dir[PATH_MAX];
	char addr[256];
	char *token;
};

struct bc_arg {
	struct bc *b;
	bool floor;		/* the baseline: GET the service root */
	int n;			/* requests (pairs) of this thread */
	double *lat_a, *lat_b;	/* compose (or GET), release; seconds */
	int done, err;
	char why[256];
};

static void *bc_thread(void *p)
{
	struct bc_arg *a = p;
	char body[160];
	json_t *out = NULL;
	int code = 0;

	if (a->b->storage)
		snprintf(body, sizeof(body),
			 "{\"Gpus\": {\"Count\": 1}, \"Storage\": {\"Size\": %llu}, \"Tenant\": \"bench\"}",
			 (unsigned long long)a->b->storage);
	else
		snprintf(body, sizeof(body), "{\"Gpus\": {\"Count\": 1}, \"Tenant\": \"bench\"}");
	for (int i = 0; i < a->n; i++) {
		char path[128];
		const char *id;
		double t0 = mono_sec();

		if (a->floor) {
			code = cli_http_call(a->b->addr, a->b->token, "GET", "/redfish/v1", NULL, &out);
			a->lat_a[i] = mono_sec() - t0;
			json_decref(out);
			if (code != 200)
				goto fail;
			a->done++;
			continue;
		}
		code = cli_http_call(a->b->addr, a->b->token, "POST", "/redfish/v1/Systems", body, &out);
		a->lat_a[i] = mono_sec() - t0;
		id = json_string_value(json_object_get(out, "Id"));
		if (code != 201 || !id) {
			snprintf(a->why, sizeof(a->why), "compose: HTTP %d: %s", code,
				 json_string_value(json_object_get(json_object_get(out, "error"),
								   "message")) ?: "no answer");
			json_decref(out);
			a->err = code < 0 ? code : -EIO;
			return NULL;
		}
		snprintf(path, sizeof(path), "/redfish/v1/Systems/%s", id);
		json_decref(out);
		t0 = mono_sec();
		code = cli_http_call(a->b->addr, a->b->token, "DELETE", path, NULL, &out);
		a->lat_b[i] = mono_sec() - t0;
		json_decref(out);
		if (code != 200)
			goto fail;
		a->done++;
	}
	return NULL;
fail:
	snprintf(a->why, sizeof(a->why), "HTTP %d", code);
	a->err = code < 0 ? code : -EIO;
	return NULL;
}

/* One phase: every thread's share of the requests. Prints its line;
 * returns pairs (or GETs) per second, or a negative error. */
static double bc_phase(struct bc *b, bool floor, double *p50, double *p99)
{
	struct bc_arg a[BC_MAX_THREADS];
	pthread_t th[BC_MAX_THREADS];
	double *all_a = calloc((size_t)b->requests, sizeof(double));
	double *all_b = calloc((size_t)b->requests, sizeof(double));
	double t0, secs, rate = -ENOMEM;
	int per = b->requests / b->threads, off = 0, err = 0, started = 0;
	size_t n = 0;

	if (!all_a || !all_b)
		goto out;
	for (int t = 0; t < b->threads; t++) {
		int k = per + (t < b->requests % b->threads);

		a[t] = (struct bc_arg){ .b = b, .floor = floor, .n = k, .lat_a = all_a + off,
					.lat_b = all_b + off };
		off += k;
	}
	t0 = mono_sec();
	for (int t = 0; t < b->threads; t++) {
		if (pthread_create(&th[t], NULL, bc_thread, &a[t]))
			break;
		started++;
	}
	for (int t = 0; t < started; t++)
		pthread_join(th[t], NULL);
	secs = mono_sec() - t0;
	for (int t = 0; t < b->threads; t++) {
		if (t >= started || a[t].err) {
			fprintf(stderr, "strata: bench compose: a client failed: %s\n",
				t >= started ? "cannot start a thread" : a[t].why);
			err = -EIO;
		}
		/* Compact: each thread's done ones. */
		memmove(all_a + n, a[t].lat_a, (size_t)a[t].done * sizeof(double));
		memmove(all_b + n, a[t].lat_b, (size_t)a[t].done * sizeof(double));
		n += (size_t)a[t].done;
	}
	if (err || !n) {
		rate = err ? err : -EIO;
		goto out;
	}
	bench_sort(all_a, n);
	bench_sort(all_b, n);
	rate = (double)n / secs;
	p50[0] = bench_pct(all_a, n, 0.5) * 1e3;
	p99[0] = bench_pct(all_a, n, 0.99) * 1e3;
	p50[1] = bench_pct(all_b, n, 0.5) * 1e3;
	p99[1] = bench_pct(all_b, n, 0.99) * 1e3;
out:
	free(all_a);
	free(all_b);
	return rate;
}

/* Waits until the composer lists every GPU (the compute daemons have
 * registered and answered). */
static int bc_wait_inventory(struct bc *b, int want)
{
	double deadline = mono_sec() + 120;
	int have = -1;

	while (mono_sec() < deadline) {
		json_t *out = NULL;
		int code = cli_http_call(b->addr, b->token, "GET", "/redfish/v1/CompositionService",
					 NULL, &out);
		json_t *g = json_object_get(json_object_get(json_object_get(json_object_get(out, "Oem"),
									       "Strata"), "Inventory"), "Gpus");

		have = code == 200 ? (int)json_integer_value(json_object_get(g, "Free")) : -1;
		json_decref(out);
		if (have == want)
			return 0;
		usleep(200 * 1000);
	}
	fprintf(stderr, "strata: bench compose: the composer lists %d free GPUs, not %d, after 120 s\n",
		have, want);
	return -ETIMEDOUT;
}

/* Writes (or reads back) size bytes of f in pieces of buf's BC_QOS_IO
 * bytes, one after the other: MiB/s, or a negative error. */
static double bc_qos_io(struct strata_file *f, uint8_t *buf, uint64_t size, bool write)
{
	double t0 = mono_sec();

	for (uint64_t off = 0; off < size; off += BC_QOS_IO) {
		size_t n = size - off < BC_QOS_IO ? (size_t)(size - off) : BC_QOS_IO;
		ssize_t got = write ? strata_pwrite(f, buf, n, off) : strata_pread(f, buf, n, off);

		if (got != (ssize_t)n)
			return got < 0 ? (double)got : -EIO;
	}
	return (double)size / (1 << 20) / (mono_sec() - t0);
}

/*
 * One QoS run: composes a volume (capped at cap MiB/s, or not when 0),
 * writes size bytes into it and reads them back with libstrata and the
 * composition's credential, then releases it. *wr, *rd: MiB/s. 0 or -1
 * after printing why.
 */
static int bc_qos_run(struct bc *b, int cap, uint8_t *buf, uint64_t size, double *wr, double *rd)
{
	char body[256], path[128], file[512];
	struct strata_file *f = NULL;
	struct strata *s = NULL;
	struct strata_opts o;
	json_t *out = NULL, *st;
	const char *id, *cred, *vol, *mgmt;
	int code, rc = -1;

	snprintf(body, sizeof(body),
		 "{\"Storage\": {\"Size\": %llu}, \"Tenant\": \"bench\", \"Oem\": {\"Strata\": "
		 "{\"Qos\": {\"BandwidthMBps\": %d}}}}", (unsigned long long)(size * 2), cap);
	code = cli_http_call(b->addr, b->token, "POST", "/redfish/v1/Systems", body, &out);
	st = json_object_get(json_object_get(out, "Oem"), "Strata");
	id = json_string_value(json_object_get(out, "Id"));
	cred = json_string_value(json_object_get(st, "Credential"));
	vol = json_string_value(json_object_get(json_object_get(st, "Volume"), "Path"));
	mgmt = json_string_value(json_object_get(json_object_get(st, "Addresses"), "Mgmt"));
	if (code != 201 || !id || !cred || !vol || !mgmt) {
		fprintf(stderr, "strata: bench compose: qos: compose: HTTP %d\n", code);
		json_decref(out);
		return -1;
	}
	snprintf(path, sizeof(path), "/redfish/v1/Systems/%s", id);
	snprintf(file, sizeof(file), "%s/data", vol);
	strata_opts_init(&o, sizeof(o));
	o.token = cred;
	code = strata_connect(mgmt, &o, &s);
	if (!code)
		code = strata_open(s, file, STRATA_O_CREAT | STRATA_O_WRONLY, 0600, &f);
	if (!code && (*wr = bc_qos_io(f, buf, size, true)) < 0)
		code = (int)*wr;
	if (f && (rc = strata_close(f)) && !code)
		code = rc;
	f = NULL;
	if (!code)
		code = strata_open(s, file, STRATA_O_RDONLY, 0, &f);
	if (!code && (*rd = bc_qos_io(f, buf, size, false)) < 0)
		code = (int)*rd;
	if (f)
		strata_close(f);
	strata_disconnect(s);
	rc = code ? -1 : 0;
	if (code)
		fprintf(stderr, "strata: bench compose: qos: I/O to '%s': %s\n", file,
			strata_strerror(code));
	json_decref(out);
	out = NULL;
	code = cli_http_call(b->addr, b->token, "DELETE", path, NULL, &out);
	json_decref(out);
	if (code != 200 && !rc) {
		fprintf(stderr, "strata: bench compose: qos: release: HTTP %d\n", code);
		rc = -1;
	}
	return rc;
}

/* The QoS rows: capped and uncapped runs of the same 3 s (at the cap)
 * of data. 0 or -1. */
static int bc_qos(struct bc *b)
{
	uint64_t size = (uint64_t)b->qos_mib * 3 << 20;
	double cw = 0, cr = 0, fw = 0, fr = 0;
	uint8_t *buf = malloc(BC_QOS_IO);
	uint64_t x = 0x9E3779B97F4A7C15ull;
	int rc = -1;

	if (!buf)
		return -1;
	for (size_t i = 0; i < BC_QOS_IO; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
	if (bc_qos_run(b, b->qos_mib, buf, size, &cw, &cr) || bc_qos_run(b, 0, buf, size, &fw, &fr))
		goto out;
	printf("\n%-34s %10s %10s %12s\n", "qos (3 s at the cap, 4 MiB I/O)", "MiB/s", "cap",
	       "rate / cap");
	printf("%-34s %10.1f %10d %11.3fx\n", "write, capped", cw, b->qos_mib, cw / b->qos_mib);
	printf("%-34s %10.1f %10d %11.3fx\n", "read, capped", cr, b->qos_mib, cr / b->qos_mib);
	printf("%-34s %10.1f %10s %11.3fx\n", "write, no cap (baseline)", fw, "-", fw / b->qos_mib);
	printf("%-34s %10.1f %10s %11.3fx\n", "read, no cap (baseline)", fr, "-", fr / b->qos_mib);
	rc = 0;
out:
	free(buf);
	return rc;
}

static int bc_usage(const char *msg)
{
	if (msg)
		cli_err("bench compose: %s", msg);
	fprintf(stderr,
		"usage: strata bench compose [--nodes N] [--gpus-per-node G] [--threads T]\n"
		"                            [--requests N] [--storage SIZE|0] [--qos MIB_PER_S|0]\n"
		"  defaults: 16 compute nodes x 64 GPUs (1,024 resource blocks), 4 threads,\n"
		"  400 compose+release pairs, a 1 MiB volume with each composition, and a\n"
		"  volume capped at 50 MiB/s written and read for 3 s (0: not run)\n");
	return 2;
}

static int bc_args(struct bc *b, int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t x;

		if (!strcmp(k, "--help") || !strcmp(k, "-h"))
			return bc_usage(NULL);
		if (!v)
			return bc_usage("every option takes a value");
		i++;
		if (!strcmp(k, "--storage")) {
			if (!strcmp(v, "0"))
				b->storage = 0;
			else if (parse_size(v, &b->storage) || !b->storage)
				return bc_usage("--storage: a size such as 1M, or 0 for none");
			continue;
		}
		if (parse_i64(v, &x))
			return bc_usage("--nodes, --gpus-per-node, --threads and --requests take numbers");
		if (!strcmp(k, "--nodes") && x >= 1 && x <= 64)
			b->nodes = (int)x;
		else if (!strcmp(k, "--gpus-per-node") && x >= 1 && x <= 64)
			b->gpus = (int)x;
		else if (!strcmp(k, "--threads") && x >= 1 && x <= BC_MAX_THREADS)
			b->threads = (int)x;
		else if (!strcmp(k, "--requests") && x >= 1 && x <= BC_MAX_REQUESTS)
			b->requests = (int)x;
		else if (!strcmp(k, "--qos") && x >= 0 && x <= 1024)
			b->qos_mib = (int)x;
		else
			return bc_usage("an unknown option or a value out of range (nodes, gpus-per-node "
					"1..64, threads 1..64, requests 1..100000, qos 0..1024)");
	}
	if (b->requests < b->threads)
		return bc_usage("--requests must be at least --threads");
	return 0;
}

int bench_compose(int argc, char **argv)
{
	struct bc b = { .nodes = 16, .gpus = 64, .threads = 4, .requests = 400,
			.storage = 1u << 20, .qos_mib = 50 };
	char self[PATH_MAX], nodes[16], gpus[16];
	double rate, frate, p50[2], p99[2], f50[2], f99[2];
	int rc = bc_args(&b, argc, argv);

	if (rc)
		return rc;
	if (cli_self_path(self, sizeof(self)))
		return 1;
	snprintf(b.dir, sizeof(b.dir), "/tmp/strata-bench-compose-XXXXXX");
	if (!mkdtemp(b.dir)) {
		cli_err("bench compose: cannot make a scratch directory: %s", strerror(errno));
		return 1;
	}
	snprintf(nodes, sizeof(nodes), "%d", b.nodes);
	snprintf(gpus, sizeof(gpus), "%d", b.gpus);
	{
		char cdir[PATH_MAX + 16];
		char *up[] = { self, "local", "up", "--dir", cdir, "--storage", "1", "--replication",
			       "1", "--compute", nodes, "--gpus-per-node", gpus, "--daemon-flags",
			       "--node.log_level=warn", NULL };

		snprintf(cdir, sizeof(cdir), "%s/cluster", b.dir);
		snprintf(b.dir, sizeof(b.dir), "%s", cdir);
		printf("strata bench compose: %d compute daemons x %d GPUs = %d resource blocks, "
		       "%d client threads, %d compose+release pairs, volume %llu bytes; cluster in %s\n",
		       b.nodes, b.gpus, b.nodes * b.gpus, b.threads, b.requests,
		       (unsigned long long)b.storage, cdir);
		fflush(stdout);
		if (cli_run_child(up)) {
			cli_err("bench compose: 'strata local up' failed");
			rc = 1;
			goto out;
		}
	}
	rc = cli_compose_addr(b.dir, b.addr, sizeof(b.addr));
	b.token = rc ? NULL : cli_find_token(NULL, NULL, b.dir);
	if (rc || !b.token || bc_wait_inventory(&b, b.nodes * b.gpus)) {
		rc = 1;
		goto down;
	}
	frate = bc_phase(&b, true, f50, f99);
	rate = frate > 0 ? bc_phase(&b, false, p50, p99) : frate;
	if (frate <= 0 || rate <= 0) {
		rc = 1;
		goto down;
	}
	printf("%-34s %10s %10s %10s %12s\n", "", "p50 ms", "p99 ms", "per s", "vs floor");
	printf("%-34s %10.2f %10.2f %10.0f %12s\n", "floor: GET /redfish/v1", f50[0], f99[0], frate,
	       "1.00x");
	printf("%-34s %10.2f %10.2f %10s %11.2fx\n", "compose (POST /Systems)", p50[0], p99[0], "",
	       p50[0] / f50[0]);
	printf("%-34s %10.2f %10.2f %10s %11.2fx\n", "release (DELETE /Systems/ID)", p50[1], p99[1], "",
	       p50[1] / f50[0]);
	printf("%-34s %10s %10s %10.1f %11.3fx\n", "compose+release pairs", "", "", rate,
	       rate / frate);
	fflush(stdout);
	rc = b.qos_mib && bc_qos(&b) ? 1 : 0;
down:
	local_cluster_down(b.dir);
out:
	if (b.token) {
		memset(b.token, 0, strlen(b.token));
		free(b.token);
	}
	*strrchr(b.dir, '/') = 0;
	bench_rmtree(b.dir);
	return rc;
}
