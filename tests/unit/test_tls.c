/*
 * Unit tests for net/tls.c: what a server context requires of its files
 * (the key's mode before anything is parsed, a key that matches the
 * certificate), client contexts from a CA file, and the process default.
 * The certificates are made here with OpenSSL, self-signed.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "net/tls.h"

static char dir[] = "/tmp/strata-test-tls-XXXXXX";
static char cert[256], key[256], key2[256];

static void write_key(const char *path, EVP_PKEY *k)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
	fclose(f);
	chmod(path, 0600);
}

/* A self-signed certificate for 127.0.0.1 (cert, key) and a second key
 * that does not match it (key2). */
static int setup(void **state)
{
	EVP_PKEY *k = EVP_EC_gen("P-256"), *k2 = EVP_EC_gen("P-256");
	X509 *x = X509_new();
	FILE *f;

	(void)state;
	if (!mkdtemp(dir) || !k || !k2 || !x)
		return -1;
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(key2, sizeof(key2), "%s/key2.pem", dir);
	ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
	X509_gmtime_adj(X509_getm_notBefore(x), 0);
	X509_gmtime_adj(X509_getm_notAfter(x), 3600);
	X509_set_pubkey(x, k);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
				   (const unsigned char *)"127.0.0.1", -1, -1, 0);
	X509_set_issuer_name(x, X509_get_subject_name(x));
	if (!X509_sign(x, k, EVP_sha256()))
		return -1;
	f = fopen(cert, "w");
	if (!f)
		return -1;
	PEM_write_X509(f, x);
	fclose(f);
	write_key(key, k);
	write_key(key2, k2);
	X509_free(x);
	EVP_PKEY_free(k);
	EVP_PKEY_free(k2);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	unlink(cert);
	unlink(key);
	unlink(key2);
	rmdir(dir);
	return 0;
}

static void test_server_context(void **state)
{
	struct net_tls *t;
	char err[512];

	(void)state;
	assert_int_equal(net_tls_server_new(cert, key, err, sizeof(err), &t), 0);
	assert_true(net_tls_is_server(t));
	assert_non_null(net_tls_ctx(t));
	net_tls_get(t);
	net_tls_put(t);
	net_tls_put(t);
}

static void test_key_mode_is_checked_first(void **state)
{
	struct net_tls *t = (void *)1;
	char err[512];

	(void)state;
	chmod(key, 0640);
	assert_int_equal(net_tls_server_new(cert, key, err, sizeof(err), &t), -EPERM);
	assert_null(t);
	assert_non_null(strstr(err, "chmod 600"));
	chmod(key, 0600);
}

static void test_missing_and_mismatched_files(void **state)
{
	struct net_tls *t;
	char err[512], nokey[300];

	(void)state;
	snprintf(nokey, sizeof(nokey), "%s/none.pem", dir);
	assert_int_equal(net_tls_server_new(cert, nokey, err, sizeof(err), &t), -ENOENT);
	assert_non_null(strstr(err, "none.pem"));
	assert_int_equal(net_tls_server_new(nokey, key, err, sizeof(err), &t), -EINVAL);
	assert_non_null(strstr(err, "certificate"));
	assert_int_equal(net_tls_server_new(cert, key2, err, sizeof(err), &t), -EINVAL);
	/* OpenSSL says the key does not fit when it loads it. */
	assert_non_null(strstr(err, "key2.pem"));
	assert_null(t);
}

static void test_client_context(void **state)
{
	struct net_tls *t;
	char err[512], nofile[300];

	(void)state;
	assert_int_equal(net_tls_client_new(cert, err, sizeof(err), &t), 0);
	assert_false(net_tls_is_server(t));
	net_tls_put(t);
	/* A key is not a CA certificate. */
	assert_int_equal(net_tls_client_new(key, err, sizeof(err), &t), -EINVAL);
	snprintf(nofile, sizeof(nofile), "%s/none.pem", dir);
	assert_int_equal(net_tls_client_new(nofile, err, sizeof(err), &t), -ENOENT);
	net_tls_put(NULL);
}

static void test_default(void **state)
{
	struct net_tls *t;
	char err[512];

	(void)state;
	/* $STRATA_TLS_CA is read once, on first use. */
	setenv("STRATA_TLS_CA", cert, 1);
	assert_non_null(net_tls_default());
	assert_false(net_tls_is_server(net_tls_default()));
	assert_int_equal(net_tls_client_new(cert, err, sizeof(err), &t), 0);
	net_tls_set_default(t);
	assert_ptr_equal(net_tls_default(), t);
	net_tls_put(t);	/* the default keeps its own reference */
	assert_ptr_equal(net_tls_default(), t);
	net_tls_set_default(NULL);
	assert_null(net_tls_default());
	unsetenv("STRATA_TLS_CA");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_server_context),
		cmocka_unit_test(test_key_mode_is_checked_first),
		cmocka_unit_test(test_missing_and_mismatched_files),
		cmocka_unit_test(test_client_context),
		cmocka_unit_test(test_default),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
