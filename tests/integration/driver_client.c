#include <stdio.h>
#include <stdlib.h>

#include "driver_client.h"
#include "net/auth.h"
#include "net/reactor.h"
#include "strata/errors.h"
#include "strata/locate.h"

int driver_use_env_token(void)
{
	static char text[TOKEN_TEXT_MAX + 2];
	const char *kp = getenv("STRATA_TEST_KEY_FILE");
	struct net_cred cred;
	char err[256];
	int rc;

	/* The drivers address chunks of no file: as a daemon, when the test
	 * gives the cluster's key. */
	if (kp && *kp) {
		struct cluster_key key;

		rc = cluster_key_load(kp, &key, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "unusable key file '%s': %s\n", kp, err);
			return rc;
		}
		net_cred_from_key(&cred, &key);
		net_cred_set_default(&cred);
		net_cred_release(&cred);
		return 0;
	}
	rc = strata_find_token(NULL, NULL, NULL, text, sizeof(text));
	if (rc || !text[0])
		return rc;
	rc = net_cred_from_token(&cred, text, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "unusable token: %s\n", err);
		return rc;
	}
	net_cred_set_default(&cred);
	net_cred_release(&cred);
	return 0;
}

struct sclient *driver_connect(const char *name, const char *mgmt)
{
	struct sclient_opts o;
	struct reactor *r;
	struct sclient *sc;
	const char *retry = getenv("STRATA_TORTURE_RETRY_MS");
	const char *timeout = getenv("STRATA_TORTURE_TIMEOUT_MS");
	int rc;

	if (driver_use_env_token())
		return NULL;
	sclient_opts_init(&o, sizeof(o));
	/* TIMES reads of a chunk visit every replica (damage tests, audits). */
	o.read_in_turn = true;
	if (retry && *retry)
		o.retry_ms = (uint32_t)strtoul(retry, NULL, 0);
	if (timeout && *timeout)
		o.timeout_ms = (uint32_t)strtoul(timeout, NULL, 0);
	if (reactor_new(name, &r) || reactor_start(r))
		return NULL;
	rc = sclient_new(r, mgmt, &o, &sc);
	if (rc || (rc = sclient_wait_map(sc, 20000))) {
		fprintf(stderr, "cannot reach cluster at '%s': %s\n", mgmt, strata_strerror(rc));
		return NULL;
	}
	return sc;
}
