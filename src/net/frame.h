/*
 * The frame every Strata service speaks (docs/protocol.md):
 *
 *   offset size field
 *   0      4    magic      "STRA" (0x41525453 little-endian)
 *   4      2    version    STRATA_PROTO_VERSION
 *   6      2    opcode     enum strata_op (src/net/proto.h)
 *   8      4    flags      FRAME_F_RESPONSE, FRAME_F_CALLER
 *   12     4    status     0 or a negative strata error (responses)
 *   16     8    req_id     chosen by the requester, echoed in the response
 *   24     4    body_len   <= FRAME_MAX_BODY
 *   28     4    reserved   must be 0
 *   32     8    bulk_len   <= FRAME_MAX_BULK
 *   40          body (body_len bytes), then bulk (bulk_len bytes)
 *
 * The body is encoded field by field (codec.h). Bulk data follows the body
 * and is received straight into the caller's buffer.
 */
#ifndef STRATA_NET_FRAME_H
#define STRATA_NET_FRAME_H

#include <stdint.h>

#define FRAME_MAGIC 0x41525453u
/* 2: the meta service's bodies name inodes by handle (number and
 * generation; src/proto/meta.h). */
#define STRATA_PROTO_VERSION 7
#define FRAME_HDR_LEN 40
#define FRAME_MAX_BODY (4u << 20)		/* 4 MiB: the largest cluster map */
#define FRAME_MAX_BULK (64ull << 20)		/* 64 MiB: the largest chunk */

#define FRAME_F_RESPONSE 0x1u
/* A request whose body starts with the caller it acts for (net_caller,
 * auth.h). */
#define FRAME_F_CALLER 0x2u
#define FRAME_F_KNOWN (FRAME_F_RESPONSE | FRAME_F_CALLER)

struct frame_hdr {
	uint32_t magic;
	uint16_t version;
	uint16_t opcode;
	uint32_t flags;
	int32_t status;
	uint64_t req_id;
	uint32_t body_len;
	uint32_t reserved;
	uint64_t bulk_len;
};

void frame_hdr_encode(const struct frame_hdr *h, uint8_t out[FRAME_HDR_LEN]);
/* Decodes and validates: magic, version, flags, reserved, and both lengths
 * against the limits. Returns 0 or STRATA_EPROTOVER / STRATA_EBADMSG, with
 * a static reason in *why. */
int frame_hdr_decode(const uint8_t in[FRAME_HDR_LEN], struct frame_hdr *h, const char **why);

#endif
