/*
 * strata bench mem: the memory plane against Redis, in the same run.
 *
 * It starts one mem daemon (stratad --node.services=mem, a 2 GiB pool) and
 * a redis-server from the system (loopback, a free port, persistence off:
 * --save '' --appendonly no), then for 4 KiB, 1 MiB and 64 MiB values runs
 * the same phases against both with the same client concurrency (N
 * threads, each its own blocking calls; Redis through Debian's libhiredis,
 * one connection per thread): PUT (SET) then GET of random keys, each
 * phase for a fixed time. Every value read is copied into the caller's
 * buffer on both sides (Strata receives it there; hiredis's reply is
 * copied). Then batched 4 KiB GETs, B keys a call: strata_mem_mget
 * against Redis at its best of B GETs pipelined on the connection and one
 * MGET of B keys (both measured; the row names the faster).
 * Figures: ops/s (keys), MB/s, p50/p99 latency per call, CPU us per key
 * of the client process (c-cpu) and of the server (s-cpu, from /proc), and
 * strata/redis ratios.
 *
 * Last, unless --no-layers, it runs the layer-streaming and model-switch
 * measurements of python/bench/bench_offload.py (run from the repository
 * root) against the same pool and a local storage cluster it starts.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "bench.h"
#include "cli.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/rand.h"
#include "common/config.h"
#include "strata/mem.h"

#define BM_MAX_THREADS 64
#define BM_LAT_MAX 200000
#define BM_BATCH_MAX 256

enum bm_sys { SYS_STRATA, SYS_REDIS };
/* OPK_MGET: strata_mem_mget, or Redis's MGET; OPK_PIPE: Redis's GETs
 * pipelined. */
enum bm_op { OPK_PUT, OPK_GET, OPK_MGET, OPK_PIPE };

struct bm {
	int threads;
	double secs;
	int batch;
	int server_threads;
	bool layers;
	char dir[PATH_MAX];
	char mem_addr[64];
	int mem_pid;
	int redis_port;
	int redis_pid;
	char redis_ver[64];
	struct strata_mem *m;
};

struct bm_res {
	double ops, mbs, p50, p99;	/* ops/s (keys), MB/s, us per call */
	double ccpu, scpu;		/* CPU us per key: client, server */
};

struct wk {
	struct bm *b;
	int idx;
	enum bm_sys sys;
	enum bm_op op;
	size_t size;
	int nkeys;
	uint8_t *buf;
	redisContext *rc;
	double deadline;
	uint64_t keys_done;
	int err;
	double *lat;
	size_t nlat;
};

static void key_name(char *out, size_t len, size_t size, int k)
{
	snprintf(out, len, "bm/%zu/%d", size, k);
}

/* ---- Redis through hiredis (Debian's libhiredis) ---- */

static redisContext *redis_open(int port)
{
	struct timeval tv = { .tv_sec = 5 };
	redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);

	if (c && c->err) {
		redisFree(c);
		c = NULL;
	}
	return c;
}

/* A bulk string reply into dst (cap bytes): its length, or an error. */
static ssize_t redis_value(const redisReply *r, void *dst, size_t cap)
{
	if (!r || r->type == REDIS_REPLY_NIL)
		return r ? -ENOENT : -EIO;
	if (r->type != REDIS_REPLY_STRING)
		return -EIO;
	if ((size_t)r->len > cap)
		return -ENOBUFS;
	memcpy(dst, r->str, (size_t)r->len);
	return (ssize_t)r->len;
}

static int redis_set(struct wk *w, const char *key, const void *val, size_t len)
{
	redisReply *r = redisCommand(w->rc, "SET %s %b", key, val, len);
	int rc = r && r->type == REDIS_REPLY_STATUS ? 0 : -EIO;

	freeReplyObject(r);
	return rc;
}

static ssize_t redis_get(struct wk *w, const char *key, void *dst, size_t cap)
{
	redisReply *r = redisCommand(w->rc, "GET %s", key);
	ssize_t rc = redis_value(r, dst, cap);

	freeReplyObject(r);
	return rc;
}

/* n GETs pipelined: all sent, then all answers read. */
static int redis_pipe_get(struct wk *w, char (*keys)[64], int n)
{
	int rc = 0;

	for (int j = 0; j < n; j++) {
		if (redisAppendCommand(w->rc, "GET %s", keys[j]) != REDIS_OK)
			return -EIO;
	}
	for (int j = 0; j < n; j++) {
		redisReply *r = NULL;
		ssize_t got;

		if (redisGetReply(w->rc, (void **)&r) != REDIS_OK)
			return -EIO;
		got = redis_value(r, w->buf + (size_t)j * w->size, w->size);
		freeReplyObject(r);
		if (got < 0 && !rc)
			rc = (int)got;
	}
	return rc;
}

/* One MGET of n keys. */
static int redis_mget(struct wk *w, char (*keys)[64], int n)
{
	const char *argv[BM_BATCH_MAX + 1] = { "MGET" };
	size_t argl[BM_BATCH_MAX + 1] = { 4 };
	redisReply *r;
	int rc = 0;

	for (int j = 0; j < n; j++) {
		argv[j + 1] = keys[j];
		argl[j + 1] = strlen(keys[j]);
	}
	r = redisCommandArgv(w->rc, n + 1, argv, argl);
	if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != (size_t)n)
		rc = -EIO;
	for (int j = 0; !rc && j < n; j++) {
		ssize_t got = redis_value(r->element[j], w->buf + (size_t)j * w->size, w->size);

		if (got < 0)
			rc = (int)got;
	}
	freeReplyObject(r);
	return rc;
}

/* ---- workers ---- */

static void *worker(void *arg)
{
	struct wk *w = arg;
	uint64_t rng = (uint64_t)w->idx + 1;	/* each worker its own sequence */
	char key[64];
	int i = 0;

	while (mono_sec() < w->deadline && !w->err) {
		double t0 = mono_sec();
		int k = w->op == OPK_PUT ? (w->idx + i * w->b->threads) % w->nkeys :
					   (int)rng_below(&rng, (uint64_t)w->nkeys);
		uint64_t nk = 1;
		ssize_t rc;

		key_name(key, sizeof(key), w->size, k);
		if (w->op == OPK_MGET || w->op == OPK_PIPE) {
			struct strata_mem_item items[BM_BATCH_MAX];
			char keys[BM_BATCH_MAX][64];

			nk = (uint64_t)w->b->batch;
			for (int j = 0; j < w->b->batch; j++) {
				key_name(keys[j], sizeof(keys[j]), w->size,
					 (int)rng_below(&rng, (uint64_t)w->nkeys));
				items[j] = (struct strata_mem_item){ .key = keys[j],
					.buf = w->buf + (size_t)j * w->size, .len = w->size };
			}
			if (w->sys == SYS_STRATA)
				rc = strata_mem_mget(w->b->m, items, (size_t)w->b->batch);
			else if (w->op == OPK_PIPE)
				rc = redis_pipe_get(w, keys, w->b->batch);
			else
				rc = redis_mget(w, keys, w->b->batch);
		} else if (w->sys == SYS_STRATA) {
			rc = w->op == OPK_PUT ? strata_mem_put(w->b->m, key, w->buf, w->size, 0) :
				strata_mem_get(w->b->m, key, w->buf, w->size);
		} else {
			rc = w->op == OPK_PUT ? redis_set(w, key, w->buf, w->size) :
				redis_get(w, key, w->buf, w->size);
		}
		if (rc < 0) {
			w->err = (int)rc;
			break;
		}
		if (w->nlat < BM_LAT_MAX)
			w->lat[w->nlat++] = (mono_sec() - t0) * 1e6;
		w->keys_done += nk;
		i++;
	}
	return NULL;
}

/* CPU seconds (user and system) this process has used. */
static double self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* CPU seconds process pid has used (/proc/PID/stat utime + stime), 0
 * when unknown. */
static double pid_cpu(int pid)
{
	char path[64], line[1024], *p;
	unsigned long long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
	fclose(f);
	/* After the name: state, then fields 4..13, then utime and stime. */
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int run_phase(struct bm *b, enum bm_sys sys, enum bm_op op, size_t size, int nkeys,
		     struct bm_res *res)
{
	int spid = sys == SYS_STRATA ? b->mem_pid : b->redis_pid;
	double c0, s0;
	pthread_t th[BM_MAX_THREADS];
	struct wk *w = calloc((size_t)b->threads, sizeof(*w));
	double *all = NULL, t0, el;
	size_t nall = 0, per = op >= OPK_MGET ? size * (size_t)b->batch : size;
	uint64_t keys = 0;
	int rc = 0;

	if (!w)
		return -ENOMEM;
	t0 = mono_sec();
	for (int i = 0; i < b->threads; i++) {
		w[i] = (struct wk){ .b = b, .idx = i, .sys = sys, .op = op, .size = size,
				    .nkeys = nkeys, .deadline = t0 + b->secs };
		w[i].buf = abuf_alloc(per);
		w[i].lat = malloc(BM_LAT_MAX * sizeof(double));
		if (!w[i].buf || !w[i].lat) {
			rc = -ENOMEM;
			goto out;
		}
		memset(w[i].buf, 0x5a + i, per);
		if (sys == SYS_REDIS && !(w[i].rc = redis_open(b->redis_port))) {
			rc = -ECONNREFUSED;
			goto out;
		}
	}
	c0 = self_cpu();
	s0 = pid_cpu(spid);
	t0 = mono_sec();
	for (int i = 0; i < b->threads; i++) {
		w[i].deadline = t0 + b->secs;
		pthread_create(&th[i], NULL, worker, &w[i]);
	}
	for (int i = 0; i < b->threads; i++)
		pthread_join(th[i], NULL);
	el = mono_sec() - t0;
	res->ccpu = self_cpu() - c0;
	res->scpu = pid_cpu(spid) - s0;
	all = malloc((size_t)b->threads * BM_LAT_MAX * sizeof(double));
	for (int i = 0; i < b->threads && all; i++) {
		if (w[i].err && !rc)
			rc = w[i].err;
		keys += w[i].keys_done;
		memcpy(all + nall, w[i].lat, w[i].nlat * sizeof(double));
		nall += w[i].nlat;
	}
	if (!all)
		rc = -ENOMEM;
	if (!rc && nall) {
		bench_sort(all, nall);
		res->ops = (double)keys / el;
		res->mbs = (double)keys * (double)size / el / 1e6;
		res->p50 = all[nall / 2];
		res->p99 = all[nall * 99 / 100];
		res->ccpu = keys ? res->ccpu * 1e6 / (double)keys : 0;
		res->scpu = keys ? res->scpu * 1e6 / (double)keys : 0;
	}
out:
	free(all);
	for (int i = 0; i < b->threads; i++) {
		abuf_free(w[i].buf);
		free(w[i].lat);
		if (w[i].rc)
			redisFree(w[i].rc);
	}
	free(w);
	return rc;
}

/* ---- setup ---- */

static int free_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

static int start_redis(struct bm *b)
{
	char port[16], log[PATH_MAX + 16];
	FILE *f;
	pid_t pid;

	b->redis_port = free_port();
	if (b->redis_port < 0)
		return -EADDRNOTAVAIL;
	snprintf(port, sizeof(port), "%d", b->redis_port);
	snprintf(log, sizeof(log), "%s/redis.log", b->dir);
	f = popen("redis-server --version 2>/dev/null", "r");
	if (f) {
		if (!fgets(b->redis_ver, sizeof(b->redis_ver), f))
			b->redis_ver[0] = '\0';
		b->redis_ver[strcspn(b->redis_ver, "\n")] = '\0';
		pclose(f);
	}
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1",
		       "--save", "", "--appendonly", "no", "--daemonize", "no", "--logfile", log,
		       "--dir", b->dir, "--protected-mode", "no", (char *)NULL);
		_exit(127);
	}
	b->redis_pid = pid;
	for (int i = 0; i < 100; i++) {
		redisContext *c = redis_open(b->redis_port);

		if (c) {
			redisFree(c);
			return 0;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			b->redis_pid = 0;
			return -ENOENT;
		}
		usleep(50000);
	}
	return -ETIMEDOUT;
}

static int start_mem(struct bm *b)
{
	char data[PATH_MAX], thr[48];
	const char *flags[] = { "--node.services=mem", "--node.listen=127.0.0.1:0",
				"--node.metrics_listen=", "--mem.capacity=2G", thr, NULL };

	snprintf(thr, sizeof(thr), "--node.threads=%d", b->server_threads);

	snprintf(data, sizeof(data), "%s/mem1", b->dir);
	if (mkdir(data, 0755) < 0 && errno != EEXIST)
		return -errno;
	return cli_spawn_daemon(data, flags, 15000, b->mem_addr, sizeof(b->mem_addr), &b->mem_pid);
}

static void run_layers(struct bm *b)
{
	char exe[PATH_MAX], cmd[PATH_MAX * 2 + 512], clus[PATH_MAX + 16], mgmt[64] = "";
	char np[PATH_MAX + 16];
	const char *pp = getenv("PYTHONPATH");
	char *p;
	int rc;

	if (cli_self_path(exe, sizeof(exe)) == 0) {
		/* BUILD/src/cli/strata -> BUILD, where libstrata.so is. */
		p = strstr(exe, "/src/cli/strata");
		if (p) {
			*p = '\0';
			setenv("STRATA_BUILD", exe, 0);
		}
	}
	if (access("python/bench/bench_offload.py", R_OK) != 0) {
		printf("layer streaming: skipped (python/bench/bench_offload.py not found: run "
		       "from the repository root)\n");
		return;
	}
	snprintf(np, sizeof(np), "python%s%s", pp ? ":" : "", pp ? pp : "");
	setenv("PYTHONPATH", np, 1);
	snprintf(clus, sizeof(clus), "%s/cluster", b->dir);
	if (local_cluster_up(clus, 1, 1, NULL, mgmt, sizeof(mgmt)) != 0)
		mgmt[0] = '\0';
	snprintf(cmd, sizeof(cmd), "%s python/bench/bench_offload.py",
		 access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3");
	/* The cluster's directory, not its address: the client finds the
	 * cluster's admin token there (an address alone carries none). */
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " --pool %s%s%s",
		 b->mem_addr, mgmt[0] ? " --mgmt " : "", mgmt[0] ? clus : "");
	fflush(stdout);
	rc = system(cmd);
	if (rc != 0)
		printf("layer streaming: python/bench/bench_offload.py failed (status %d; it needs"
		       " /usr/bin/python3 with torch, and strata on PYTHONPATH): see its output"
		       " above\n", rc);
	if (mgmt[0])
		local_cluster_down(clus);
}

static void row(const char *size, const char *op, const struct bm_res *s, const struct bm_res *r)
{
	printf("%-6s %-9s %9.0f %8.1f %7.1f %7.1f %5.1f %5.1f | %9.0f %8.1f %7.1f %7.1f %5.1f "
	       "%5.1f | %5.2fx\n", size, op, s->ops, s->mbs, s->p50, s->p99, s->ccpu, s->scpu,
	       r->ops, r->mbs, r->p50, r->p99, r->ccpu, r->scpu, r->ops > 0 ? s->ops / r->ops : 0.0);
}

int bench_mem(int argc, char **argv)
{
	static const struct { size_t size; int nkeys; const char *name; } sizes[] = {
		{ 4096, 8192, "4KiB" }, { 1u << 20, 128, "1MiB" }, { 64u << 20, 6, "64MiB" },
	};
	struct bm b = { .threads = 4, .secs = 3.0, .batch = 64, .server_threads = 2,
		      .layers = true };
	struct strata_mem_opts mo;
	struct bm_res rs[3][2] = { { { 0 } } }, rr[3][2] = { { { 0 } } }, mg = { 0 };
	struct bm_res rpipe = { 0 }, rmget = { 0 };
	int rc = 0, nsizes = 3;

	for (int i = 1; i < argc; i++) {
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		int64_t x;

		if (strcmp(argv[i], "--no-layers") == 0) {
			b.layers = false;
			continue;
		}
		if (strcmp(argv[i], "--small") == 0) {
			nsizes = 1;
			continue;
		}
		if (!v || parse_i64(v, &x) || x < 1) {
			cli_err("usage: strata bench mem [--threads N] [--seconds S] [--batch B] [--server-threads N] [--small] [--no-layers]");
			return 2;
		}
		if (strcmp(argv[i], "--threads") == 0 && x <= BM_MAX_THREADS)
			b.threads = (int)x;
		else if (strcmp(argv[i], "--seconds") == 0 && x <= 600)
			b.secs = (double)x;
		else if (strcmp(argv[i], "--batch") == 0 && x <= BM_BATCH_MAX)
			b.batch = (int)x;
		else if (strcmp(argv[i], "--server-threads") == 0 && x <= 64)
			b.server_threads = (int)x;
		else {
			cli_err("bench mem: bad option '%s %s'", argv[i], v);
			return 2;
		}
		i++;
	}
	snprintf(b.dir, sizeof(b.dir), "%s/strata-bench-mem-%d",
		 getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
	if (mkdir(b.dir, 0755) < 0) {
		cli_err("cannot create '%s': %s", b.dir, strerror(errno));
		return 1;
	}
	rc = start_mem(&b);
	if (rc) {
		cli_err("cannot start the mem daemon: %s", strata_strerror(rc));
		goto out;
	}
	rc = start_redis(&b);
	if (rc) {
		cli_err("cannot start redis-server (apt-get install redis-server): %s",
			strata_strerror(rc));
		goto out;
	}
	strata_mem_opts_init(&mo, sizeof(mo));
	/* One connection per client thread on both sides. */
	mo.io_threads = (uint32_t)b.threads;
	rc = strata_mem_open(b.mem_addr, &mo, &b.m);
	if (rc)
		goto out;
	printf("strata bench mem: %d client threads, %.0f s per phase; strata: 1 mem daemon "
	       "(%d reactor threads) at %s; %s at 127.0.0.1:%d (--save '' --appendonly no)\n",
	       b.threads, b.secs, b.server_threads, b.mem_addr, b.redis_ver[0] ? b.redis_ver : "redis-server",
	       b.redis_port);
	printf("%-6s %-9s %9s %8s %7s %7s %5s %5s | %9s %8s %7s %7s %5s %5s | %6s\n", "size",
	       "op", "strata/s", "MB/s", "p50us", "p99us", "c-cpu", "s-cpu", "redis/s", "MB/s",
	       "p50us", "p99us", "c-cpu", "s-cpu", "ratio");
	for (int s = 0; s < nsizes && !rc; s++) {
		for (int o = 0; o < 2 && !rc; o++) {
			enum bm_op op = o ? OPK_GET : OPK_PUT;

			rc = run_phase(&b, SYS_STRATA, op, sizes[s].size, sizes[s].nkeys, &rs[s][o]);
			if (!rc)
				rc = run_phase(&b, SYS_REDIS, op, sizes[s].size, sizes[s].nkeys, &rr[s][o]);
			if (!rc)
				row(sizes[s].name, o ? "get" : "put", &rs[s][o], &rr[s][o]);
		}
		if (!rc && s == 0) {
			char name[32];

			rc = run_phase(&b, SYS_STRATA, OPK_MGET, 4096, sizes[0].nkeys, &mg);
			if (!rc)
				rc = run_phase(&b, SYS_REDIS, OPK_PIPE, 4096, sizes[0].nkeys, &rpipe);
			if (!rc)
				rc = run_phase(&b, SYS_REDIS, OPK_MGET, 4096, sizes[0].nkeys, &rmget);
			/* Redis at its best: pipelined GETs or one MGET. */
			snprintf(name, sizeof(name), "get*%d%s", b.batch,
				 rpipe.ops >= rmget.ops ? "/P" : "/M");
			if (!rc)
				row("4KiB", name, &mg, rpipe.ops >= rmget.ops ? &rpipe : &rmget);
		}
	}
	if (rc) {
		cli_err("bench mem: %s", strata_strerror(rc));
		goto out;
	}
	printf("get*%d: strata_mem_mget of %d keys; redis %d GETs pipelined %.0f/s, MGET of %d "
	       "keys %.0f/s (/P or /M: the faster, compared)\n", b.batch, b.batch, b.batch,
	       rpipe.ops, b.batch, rmget.ops);
	printf("done-when: 4 KiB get %.2fx redis (>= 1.0), batched 4 KiB get %.2fx redis "
	       "pipelined (>= 1.0)", rs[0][1].ops / rr[0][1].ops,
	       mg.ops / (rpipe.ops >= rmget.ops ? rpipe.ops : rmget.ops));
	if (nsizes > 1)
		printf(", 1 MiB get %.2fx redis (>= 2.0)", rs[1][1].ops / rr[1][1].ops);
	printf("\n");
	strata_mem_close(b.m);
	b.m = NULL;
	if (b.layers)
		run_layers(&b);
out:
	strata_mem_close(b.m);
	if (b.redis_pid > 0) {
		kill(b.redis_pid, SIGTERM);
		waitpid(b.redis_pid, NULL, 0);
	}
	if (b.mem_pid > 0)
		cli_stop_pid(b.mem_pid, 5000);
	bench_rmtree(b.dir);
	return rc ? 1 : 0;
}
