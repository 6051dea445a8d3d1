/*
 * The opcodes the transport itself knows, and the range each service's
 * table (src/proto/) takes its opcodes from.
 */
#ifndef STRATA_NET_PROTO_H
#define STRATA_NET_PROTO_H

enum strata_op {
	OP_HELLO = 1,		/* first frame of every connection */
	OP_PING = 2,		/* empty body; echoes bulk */
	OP_STATUS = 3,		/* -> JSON text of the daemon's status */
	OP_AUTH = 4,		/* the client's proof, right after HELLO (auth.h) */

	OP_MGMT_FIRST = 16,	/* src/proto/mgmt.h */
	OP_MGMT_LAST = 31,
	OP_STORAGE_FIRST = 32,	/* src/proto/storage.h */
	OP_STORAGE_LAST = 63,
	OP_META_FIRST = 64,	/* src/proto/meta.h */
	OP_META_LAST = 95,

	OP_MEM_FIRST = 96,	/* src/proto/mem.h */
	OP_MEM_LAST = 127,

	OP_MAX = 128,
};

enum strata_role {
	ROLE_CLIENT = 0,
	ROLE_DAEMON = 1,
};

#endif
