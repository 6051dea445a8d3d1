/*
 * strata bench rpc: empty-RPC round trips per second at queue depth 1 and
 * 64, and GB/s of 1 MiB bulk round trips, each beside a raw TCP socket
 * echo measured in the same run on the same machine.
 *
 * The raw baseline is an in-process echo server on loopback using plain
 * blocking sockets: the client sends a 40-byte message (or 40 + 1 MiB) and
 * the server sends the same bytes back once it has read them all, which
 * is exactly what stratad's PING does with a frame.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "bench.h"
#include "cli.h"
#include "common/token.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/fileio.h"
#include "net/frame.h"
#include "net/proto.h"
#include "net/reactor.h"
#include "net/rpc.h"
#include "net/tls.h"
#include "strata/errors.h"

/* ---- raw TCP baseline ---- */

struct raw_server {
	int lfd;
	int port;
	size_t msg;
	pthread_t thr;
};

static void *raw_server_main(void *arg)
{
	struct raw_server *s = arg;
	int fd = accept(s->lfd, NULL, NULL);
	void *buf = abuf_alloc(s->msg);
	int one = 1;

	if (fd >= 0 && buf) {
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		while (read_full(fd, buf, s->msg) == 0 && write_full(fd, buf, s->msg) == 0)
			;
	}
	if (fd >= 0)
		close(fd);
	abuf_free(buf);
	return NULL;
}

static int raw_connect(struct raw_server *s, size_t msg)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sin);
	int fd, one = 1;

	s->msg = msg;
	s->lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    listen(s->lfd, 1) < 0 || getsockname(s->lfd, (struct sockaddr *)&sin, &sl) < 0)
		return -1;
	if (pthread_create(&s->thr, NULL, raw_server_main, s))
		return -1;
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

static void raw_close(struct raw_server *s, int fd)
{
	shutdown(fd, SHUT_RDWR);
	close(fd);
	pthread_join(s->thr, NULL);
	close(s->lfd);
}

struct raw_writer {
	int fd;
	size_t msg;
	int qd;
	uint64_t n;
	void *buf;
	volatile uint64_t *acked;
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
};

static void *raw_writer_main(void *arg)
{
	struct raw_writer *w = arg;

	for (uint64_t i = 0; i < w->n; i++) {
		pthread_mutex_lock(w->lock);
		while (i >= *w->acked + (uint64_t)w->qd)
			pthread_cond_wait(w->cond, w->lock);
		pthread_mutex_unlock(w->lock);
		if (write_full(w->fd, w->buf, w->msg))
			break;
	}
	return NULL;
}

/* Round trips of msg-byte messages with qd in flight for ~seconds.
 * Returns round trips per second. */
static double raw_run(size_t msg, int qd, double seconds)
{
	struct raw_server s;
	int fd = raw_connect(&s, msg);
	void *sbuf = abuf_zalloc(msg), *rbuf = abuf_alloc(msg);
	double t0, t;
	uint64_t done = 0, n;
	volatile uint64_t acked = 0;
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	pthread_t wt;
	struct raw_writer w;

	if (fd < 0 || !sbuf || !rbuf)
		return 0;
	/* Calibrate a count that lasts about `seconds`. */
	t0 = mono_sec();
	for (n = 0; mono_sec() - t0 < 0.2; n++) {
		write_full(fd, sbuf, msg);
		read_full(fd, rbuf, msg);
	}
	n = (uint64_t)((double)n / (mono_sec() - t0) * seconds * (qd > 1 ? 2 : 1)) + 1;
	w = (struct raw_writer){ fd, msg, qd, n, sbuf, &acked, &lock, &cond };
	t0 = mono_sec();
	pthread_create(&wt, NULL, raw_writer_main, &w);
	for (done = 0; done < n; done++) {
		if (read_full(fd, rbuf, msg))
			break;
		pthread_mutex_lock(&lock);
		acked = done + 1;
		pthread_cond_signal(&cond);
		pthread_mutex_unlock(&lock);
	}
	t = mono_sec() - t0;
	pthread_join(wt, NULL);
	raw_close(&s, fd);
	abuf_free(sbuf);
	abuf_free(rbuf);
	return (double)done / t;
}

/* ---- strata RPC ---- */

struct rpc_driver {
	struct rpc_pool *pool;
	const char *addr;
	int qd;
	uint64_t bulk_len;
	void *src;
	void **dst;
	double deadline;
	uint64_t issued, done;
	int err;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool finished;
	double t_end;
};

struct drv_slot {
	struct rpc_driver *d;
	int idx;
};

static void drv_issue(struct rpc_driver *d, struct drv_slot *slot);

static void drv_finish(struct rpc_driver *d)
{
	d->t_end = mono_sec();
	pthread_mutex_lock(&d->lock);
	d->finished = true;
	pthread_cond_signal(&d->cond);
	pthread_mutex_unlock(&d->lock);
}

static void drv_done(void *arg, int status, struct rpc_msg *resp)
{
	struct drv_slot *slot = arg;
	struct rpc_driver *d = slot->d;

	(void)resp;
	d->done++;
	if (status && !d->err)
		d->err = status;
	if (!d->err && mono_sec() < d->deadline)
		drv_issue(d, slot);
	else if (d->done == d->issued)
		drv_finish(d);
}

static void drv_issue(struct rpc_driver *d, struct drv_slot *slot)
{
	struct rpc_call_args a = {
		.op = OP_PING, .bulk = d->src, .bulk_len = d->bulk_len,
		.bulk_dst = d->dst[slot->idx], .bulk_cap = d->bulk_len,
		.timeout_ms = 10000, .cb = drv_done, .arg = slot,
	};
	int rc;

	d->issued++;
	rc = rpc_pool_call(d->pool, d->addr, &a);
	if (rc) {
		d->issued--;
		if (!d->err)
			d->err = rc;
		if (d->done == d->issued)
			drv_finish(d);
	}
}

struct drv_start {
	struct rpc_driver *d;
	struct drv_slot *slots;
};

static void drv_start(void *arg)
{
	struct drv_start *s = arg;

	for (int i = 0; i < s->d->qd; i++)
		drv_issue(s->d, &s->slots[i]);
}

/* Returns round trips per second, or a negative error. */
static double rpc_run(struct rpc_client *cl, const char *addr, size_t bulk, int qd, double seconds,
		      int *err)
{
	struct rpc_driver d = { 0 };
	struct drv_slot *slots = calloc((size_t)qd, sizeof(*slots));
	struct drv_start st = { &d, slots };
	double t0, rate = 0;

	d.pool = rpc_client_pool(cl);
	d.addr = addr;
	d.qd = qd;
	d.bulk_len = bulk;
	d.src = bulk ? abuf_zalloc(bulk) : NULL;
	d.dst = calloc((size_t)qd, sizeof(void *));
	pthread_mutex_init(&d.lock, NULL);
	pthread_cond_init(&d.cond, NULL);
	for (int i = 0; i < qd; i++) {
		slots[i].d = &d;
		slots[i].idx = i;
		d.dst[i] = bulk ? abuf_alloc(bulk) : NULL;
	}
	t0 = mono_sec();
	d.deadline = t0 + seconds;
	reactor_post(rpc_client_reactor(cl), drv_start, &st);
	pthread_mutex_lock(&d.lock);
	while (!d.finished)
		pthread_cond_wait(&d.cond, &d.lock);
	pthread_mutex_unlock(&d.lock);
	*err = d.err;
	if (!d.err)
		rate = (double)d.done / (d.t_end - t0);
	for (int i = 0; i < qd; i++)
		abuf_free(d.dst[i]);
	free(d.dst);
	abuf_free(d.src);
	free(slots);
	return rate;
}

/* A stratad for the benchmark in dir (key: the cluster key file, or NULL
 * for none; tls: NULL or the four --node.tls* flags). Returns 0 and its
 * address and pid, or 1 (reported). */
static int spawn_bench_daemon(const char *dir, const char *key, char (*tls)[4200], char *addr,
			      size_t len, int *pid)
{
	char f_key[4200];
	const char *flags[9] = { "--node.listen=127.0.0.1:0", "--node.threads=1",
				 "--node.log_level=warn" };
	int n = 3;

	if (key) {
		snprintf(f_key, sizeof(f_key), "--node.key_file=%s", key);
		flags[n++] = f_key;
	}
	for (int i = 0; tls && i < 4; i++)
		flags[n++] = tls[i];
	flags[n] = NULL;
	return cli_spawn_daemon(dir, flags, 10000, addr, len, pid) ? 1 : 0;
}

int bench_rpc(int argc, char **argv)
{
	const char *addr = NULL, *tls_dir = NULL;
	char own_addr[64], auth_addr[64], dir[] = "/tmp/strata-bench-rpc-XXXXXX";
	char adir[64], keyfile[96], tls_flags[4][4200];
	struct net_tls *tls = NULL;
	struct net_stats ns;
	double seconds = 2.0;
	int pid = 0, apid = 0, rc, err = 0, fails = 0;
	struct rpc_client *cl, *acl = NULL;
	struct cluster_key key;
	struct net_cred cred;
	static const struct { const char *name; size_t bulk; int qd; } tests[] = {
		{ "empty RPC, QD 1", 0, 1 },
		{ "empty RPC, QD 64", 0, 64 },
		{ "1 MiB bulk, QD 1", 1 << 20, 1 },
		{ "1 MiB bulk, QD 4", 1 << 20, 4 },
	};

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--addr") == 0 && i + 1 < argc) {
			addr = argv[++i];
		} else if (strcmp(argv[i], "--tls") == 0 && i + 1 < argc) {
			tls_dir = argv[++i];
		} else if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			seconds = strtod(argv[++i], NULL);
			if (seconds <= 0 || seconds > 600) {
				cli_err("bench rpc: --seconds must be in (0, 600]");
				return 2;
			}
		} else {
			cli_err("bench rpc: unexpected argument '%s'", argv[i]);
			return 2;
		}
	}
	if (tls_dir) {
		/* DIR as scripts/tls-cert.sh leaves it: ca.pem, server.pem,
		 * server.key (naming 127.0.0.1 for the daemons started here). */
		char ca[4200], why[512];

		snprintf(ca, sizeof(ca), "%s/ca.pem", tls_dir);
		rc = net_tls_client_new(ca, why, sizeof(why), &tls);
		if (rc) {
			cli_err("bench rpc: --tls: %s", why);
			return 1;
		}
		snprintf(tls_flags[0], sizeof(tls_flags[0]), "--node.tls=on");
		snprintf(tls_flags[1], sizeof(tls_flags[1]), "--node.tls_cert=%s/server.pem", tls_dir);
		snprintf(tls_flags[2], sizeof(tls_flags[2]), "--node.tls_key=%s/server.key", tls_dir);
		snprintf(tls_flags[3], sizeof(tls_flags[3]), "--node.tls_ca=%s", ca);
	}
	if (!addr) {
		/* Two daemons: one without a key, one with (every connection
		 * then proves the key: the cost of authentication). */
		if (!mkdtemp(dir)) {
			cli_err("cannot create a temp dir: %s", strerror(errno));
			return 1;
		}
		snprintf(adir, sizeof(adir), "%s/auth", dir);
		snprintf(keyfile, sizeof(keyfile), "%s/cluster.key", dir);
		if (cluster_key_generate(&key) || cluster_key_save(keyfile, &key) ||
		    mkdir(adir, 0755)) {
			cli_err("bench rpc: cannot make a cluster key in '%s'", dir);
			return 1;
		}
		if (spawn_bench_daemon(dir, NULL, tls_dir ? tls_flags : NULL, own_addr,
				       sizeof(own_addr), &pid) ||
		    spawn_bench_daemon(adir, keyfile, tls_dir ? tls_flags : NULL, auth_addr,
				       sizeof(auth_addr), &apid))
			return 1;
		addr = own_addr;
		net_cred_from_key(&cred, &key);
		rc = rpc_client_new("bench-rpc-auth", 10000, &acl);
		if (!rc)
			rc = rpc_pool_set_cred(rpc_client_pool(acl), &cred);
		net_cred_release(&cred);
		memset(&key, 0, sizeof(key));
		if (rc) {
			cli_err("cannot start client: %s", strata_strerror(rc));
			return 1;
		}
	}
	rc = rpc_client_new("bench-rpc", 10000, &cl);
	if (rc) {
		cli_err("cannot start client: %s", strata_strerror(rc));
		return 1;
	}
	if (tls_dir) {
		rpc_pool_set_tls(rpc_client_pool(cl), tls);
		if (acl)
			rpc_pool_set_tls(rpc_client_pool(acl), tls);
		net_tls_put(tls);
	}
	printf("strata bench rpc: stratad at %s (%s%s), baseline: raw TCP echo over loopback in the same process\n",
	       addr, pid ? "started by the benchmark, 1 reactor thread" : "given",
	       tls_dir ? ", TLS" : "");
	if (acl)
		printf("authenticated: a second stratad at %s holding a cluster key; the client proves it\n",
		       auth_addr);
	printf("%-20s %16s %16s %16s %8s %8s\n", "test", "strata", "strata+auth", "raw TCP", "ratio",
	       "auth/no");
	for (size_t t = 0; t < sizeof(tests) / sizeof(tests[0]); t++) {
		double r_rpc = rpc_run(cl, addr, tests[t].bulk, tests[t].qd, seconds, &err);
		double r_auth = acl && !err ? rpc_run(acl, auth_addr, tests[t].bulk, tests[t].qd,
						      seconds, &err) : 0;
		double r_raw = raw_run(FRAME_HDR_LEN + tests[t].bulk, tests[t].qd, seconds);
		char a[32], b[32], c[32] = "-";

		if (err) {
			printf("%-20s failed: %s\n", tests[t].name, strata_strerror(err));
			fails++;
			continue;
		}
		if (tests[t].bulk) {
			snprintf(a, sizeof(a), "%.2f GB/s", r_rpc * (double)tests[t].bulk / 1e9);
			if (acl)
				snprintf(c, sizeof(c), "%.2f GB/s", r_auth * (double)tests[t].bulk / 1e9);
			snprintf(b, sizeof(b), "%.2f GB/s", r_raw * (double)tests[t].bulk / 1e9);
		} else {
			snprintf(a, sizeof(a), "%.0f op/s", r_rpc);
			if (acl)
				snprintf(c, sizeof(c), "%.0f op/s", r_auth);
			snprintf(b, sizeof(b), "%.0f op/s", r_raw);
		}
		printf("%-20s %16s %16s %16s %8.2f %8.2f\n", tests[t].name, a, c, b,
		       r_raw > 0 ? r_rpc / r_raw : 0, acl && r_rpc > 0 ? r_auth / r_rpc : 0);
		fflush(stdout);
	}
	net_stats_get(&ns);
	if (tls_dir)
		printf("TLS: %llu connection(s) of this client, kTLS send on %llu, receive on %llu\n",
		       (unsigned long long)ns.tls_conns, (unsigned long long)ns.ktls_tx_conns,
		       (unsigned long long)ns.ktls_rx_conns);
	rpc_client_free(cl);
	if (acl)
		rpc_client_free(acl);
	if (apid)
		cli_stop_pid(apid, 5000);
	if (pid) {
		char cmd[128];

		cli_stop_pid(pid, 5000);
		snprintf(cmd, sizeof(cmd), "%s", dir);
		bench_rmtree(cmd);
	}
	return fails ? 1 : 0;
}
