/*
 * Operation codes of every service, and small shared message helpers.
 * The body layout of each op is documented next to its encoder.
 */
#ifndef STRATA_NET_PROTO_H
#define STRATA_NET_PROTO_H

enum strata_op {
	OP_HELLO = 1,		/* first frame of every connection */
	OP_PING = 2,		/* empty body; echoes bulk */
	OP_STATUS = 3,		/* -> JSON text of the daemon's status */

	OP_MGMT_REGISTER = 16,	/* storage/mem service -> mgmt */
	OP_MGMT_HEARTBEAT = 17,
	OP_MGMT_GET_MAP = 18,	/* -> cluster map (if newer than the caller's) */
	OP_MGMT_REPORT = 19,	/* integrity error report */
	OP_MGMT_ADMIN = 20,	/* drain, replace, ... */

	OP_CHUNK_WRITE = 32,
	OP_CHUNK_READ = 33,
	OP_CHUNK_BATCH_READ = 34,
	OP_CHUNK_REMOVE = 35,
	OP_CHUNK_STAT = 36,
	OP_CHUNK_TRUNCATE = 37,
	OP_TARGET_SPACE = 38,
	OP_CHUNK_LIST = 39,
	OP_CHUNK_SYNC = 40,
	OP_CHUNK_VERIFY = 41,	/* a reader got bytes that fail their CRC: check the stored copy */

	OP_META_FIRST = 64,
	OP_META_LAST = 95,

	OP_MEM_FIRST = 96,
	OP_MEM_LAST = 127,

	OP_MAX = 128,
};

enum strata_role {
	ROLE_CLIENT = 0,
	ROLE_DAEMON = 1,
};

#endif
