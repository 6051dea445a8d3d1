/* TLS contexts (tls.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/log.h"
#include "tls.h"

struct net_tls {
	SSL_CTX *ctx;
	bool server;
	int refs;	/* atomic */
};

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;
	size_t n;
	unsigned long e = ERR_get_error();

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	n = strlen(err);
	if (e && n + 3 < errlen) {
		snprintf(err + n, errlen - n, ": ");
		ERR_error_string_n(e, err + n + 2, errlen - n - 2);
	}
	ERR_clear_error();
	return rc;
}

static int tls_new(bool server, struct net_tls **out)
{
	struct net_tls *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->ctx = SSL_CTX_new(server ? TLS_server_method() : TLS_client_method());
	if (!t->ctx) {
		free(t);
		return -ENOMEM;
	}
	t->server = server;
	t->refs = 1;
	SSL_CTX_set_min_proto_version(t->ctx, TLS1_3_VERSION);
	/* AES-128-GCM first: the fastest with AES-NI, and one every kTLS
	 * kernel takes. */
	SSL_CTX_set_ciphersuites(t->ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
					 "TLS_CHACHA20_POLY1305_SHA256");
	/* kTLS where the kernel has it (conn.c checks per connection);
	 * a peer that closes without close_notify is a closed connection,
	 * as in plain TCP, not an error. */
	SSL_CTX_set_options(t->ctx, SSL_OP_ENABLE_KTLS | SSL_OP_IGNORE_UNEXPECTED_EOF |
				    SSL_OP_NO_RENEGOTIATION);
	/* conn.c writes from its frame queue: a retried write may start at
	 * another address (the same bytes), and may be written in part. */
	SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
				 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	/* Without kTLS: read many records per read() rather than a header
	 * and a body each (conn.c reads until OpenSSL has nothing left). */
	SSL_CTX_set_read_ahead(t->ctx, 1);
	SSL_CTX_set_default_read_buffer_len(t->ctx, 256 * 1024);
	*out = t;
	return 0;
}

int net_tls_server_new(const char *cert, const char *key, char *err, size_t errlen,
		       struct net_tls **out)
{
	struct net_tls *t;
	struct stat st;
	int rc, fd;

	*out = NULL;
	fd = open(key, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return fail(err, errlen, -errno, "cannot open the TLS key '%s': %s", key,
			    strerror(errno));
	rc = fstat(fd, &st) ? -errno : 0;
	close(fd);
	if (rc)
		return fail(err, errlen, rc, "cannot stat '%s': %s", key, strerror(-rc));
	if (!S_ISREG(st.st_mode) || (st.st_mode & 077))
		return fail(err, errlen, -EPERM,
			    "the TLS key '%s' has mode %04o: it must be a regular file only its "
			    "owner can read (chmod 600)", key, (unsigned)(st.st_mode & 07777));
	rc = tls_new(true, &t);
	if (rc)
		return fail(err, errlen, rc, "cannot create a TLS context");
	/* Tickets would arrive after the handshake, where a kTLS reader
	 * takes only application data; connections are long-lived anyway. */
	SSL_CTX_set_num_tickets(t->ctx, 0);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	if (SSL_CTX_use_certificate_chain_file(t->ctx, cert) != 1) {
		net_tls_put(t);
		return fail(err, errlen, -EINVAL, "cannot load the TLS certificate '%s'", cert);
	}
	if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1) {
		net_tls_put(t);
		return fail(err, errlen, -EINVAL, "cannot load the TLS key '%s'", key);
	}
	if (SSL_CTX_check_private_key(t->ctx) != 1) {
		net_tls_put(t);
		return fail(err, errlen, -EINVAL, "the TLS key '%s' does not match the certificate '%s'",
			    key, cert);
	}
	*out = t;
	return 0;
}

int net_tls_client_new(const char *ca, char *err, size_t errlen, struct net_tls **out)
{
	struct net_tls *t;
	int rc;

	*out = NULL;
	if (access(ca, R_OK))
		return fail(err, errlen, -errno, "cannot read the TLS CA '%s': %s", ca,
			    strerror(errno));
	rc = tls_new(false, &t);
	if (rc)
		return fail(err, errlen, rc, "cannot create a TLS context");
	if (SSL_CTX_load_verify_locations(t->ctx, ca, NULL) != 1) {
		net_tls_put(t);
		return fail(err, errlen, -EINVAL, "cannot load the TLS CA '%s'", ca);
	}
	SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
	SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_OFF);
	*out = t;
	return 0;
}

void net_tls_get(struct net_tls *t)
{
	__atomic_fetch_add(&t->refs, 1, __ATOMIC_RELAXED);
}

void net_tls_put(struct net_tls *t)
{
	if (!t || __atomic_sub_fetch(&t->refs, 1, __ATOMIC_ACQ_REL))
		return;
	SSL_CTX_free(t->ctx);
	free(t);
}

bool net_tls_is_server(const struct net_tls *t) { return t->server; }
void *net_tls_ctx(const struct net_tls *t) { return t->ctx; }

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static struct net_tls *default_tls;
static bool default_tried;

void net_tls_set_default(struct net_tls *t)
{
	pthread_mutex_lock(&default_lock);
	if (t)
		net_tls_get(t);
	net_tls_put(default_tls);
	default_tls = t;
	default_tried = true;
	pthread_mutex_unlock(&default_lock);
}

struct net_tls *net_tls_default(void)
{
	struct net_tls *t;

	pthread_mutex_lock(&default_lock);
	if (!default_tried) {
		const char *ca = getenv("STRATA_TLS_CA");
		char err[512];

		default_tried = true;
		if (ca && ca[0] && net_tls_client_new(ca, err, sizeof(err), &default_tls))
			log_error("net", "STRATA_TLS_CA: %s", err);
	}
	t = default_tls;
	pthread_mutex_unlock(&default_lock);
	return t;
}
