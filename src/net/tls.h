/*
 * TLS for connections (docs/security.md, "Transport").
 *
 * A struct net_tls is a configured OpenSSL context, shared by every
 * connection that uses it on any thread (refcounted). A server context
 * holds the node's certificate and key; a client context holds the CA
 * that a server's certificate must chain to, and conn.c checks that the
 * certificate also names the host or IP of the address connected to.
 *
 * Only TLS 1.3. conn.c asks for kTLS: once the handshake is done, the
 * kernel encrypts (and, where it can, decrypts), so bulk data still goes
 * from the caller's buffer to the socket with one sendmsg and from the
 * socket into its destination with one read. Servers send no session
 * tickets: a ticket after the handshake would be a record the kernel
 * cannot hand to a plain read().
 */
#ifndef STRATA_NET_TLS_H
#define STRATA_NET_TLS_H

#include <stdbool.h>
#include <stddef.h>

struct net_tls;

/* A server context from PEM files. The key file must be a regular file
 * only its owner can read (mode 0600), like the cluster key. 0, or
 * -EPERM / -errno / -EINVAL with err saying why. */
int net_tls_server_new(const char *cert, const char *key, char *err, size_t errlen,
		       struct net_tls **out);
/* A client context that trusts the CA certificates in ca (PEM). 0 or
 * -errno / -EINVAL with err. */
int net_tls_client_new(const char *ca, char *err, size_t errlen, struct net_tls **out);
void net_tls_get(struct net_tls *t);
void net_tls_put(struct net_tls *t);	/* NULL: nothing */
bool net_tls_is_server(const struct net_tls *t);
/* The SSL_CTX (conn.c). */
void *net_tls_ctx(const struct net_tls *t);

/*
 * The client context connections use when their pool was given none
 * (rpc_pool_set_tls): stratad sets the one of node.tls_ca before any
 * thread starts; otherwise the first call loads $STRATA_TLS_CA, if set
 * (a process that sets neither connects without TLS). NULL: none; a
 * $STRATA_TLS_CA that does not load is logged once and also gives NULL,
 * so that connections fail with STRATA_ETLSREQ rather than go plain
 * unnoticed to a server that wants TLS. Any thread.
 */
void net_tls_set_default(struct net_tls *t);
struct net_tls *net_tls_default(void);

#endif
