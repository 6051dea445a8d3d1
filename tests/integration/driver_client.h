/* What the C test drivers (chunk_torture, fault_driver) share. */
#ifndef STRATA_TESTS_DRIVER_CLIENT_H
#define STRATA_TESTS_DRIVER_CLIENT_H

#include "client/storage_client.h"

/* A storage client on a new reactor thread called name, once it holds the
 * cluster map of mgmt (20 s at most); NULL, with the reason on stderr.
 * STRATA_TORTURE_RETRY_MS, when set, bounds each I/O's retries (the
 * client's retry_ms), so a test of a failure that never heals is short;
 * STRATA_TORTURE_TIMEOUT_MS bounds one RPC (the client's timeout_ms). */
/* The cluster key in $STRATA_TEST_KEY_FILE (a daemon's credential: the
 * drivers write chunks of no file, which storage allows only daemons),
 * else the token of $STRATA_TOKEN / $STRATA_TOKEN_FILE, if any, becomes
 * what every connection of the process presents. 0 or a negative
 * error. */
int driver_use_env_token(void);
struct sclient *driver_connect(const char *name, const char *mgmt);

#endif
