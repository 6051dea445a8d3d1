#include "codec.h"
#include "frame.h"
#include "strata/errors.h"

_Static_assert(FRAME_HDR_LEN == 4 + 2 + 2 + 4 + 4 + 8 + 4 + 4 + 8, "frame header layout");

void frame_hdr_encode(const struct frame_hdr *h, uint8_t out[FRAME_HDR_LEN])
{
	put_le32(out + 0, h->magic);
	put_le16(out + 4, h->version);
	put_le16(out + 6, h->opcode);
	put_le32(out + 8, h->flags);
	put_le32(out + 12, (uint32_t)h->status);
	put_le64(out + 16, h->req_id);
	put_le32(out + 24, h->body_len);
	put_le32(out + 28, h->reserved);
	put_le64(out + 32, h->bulk_len);
}

int frame_hdr_decode(const uint8_t in[FRAME_HDR_LEN], struct frame_hdr *h, const char **why)
{
	h->magic = get_le32(in + 0);
	h->version = get_le16(in + 4);
	h->opcode = get_le16(in + 6);
	h->flags = get_le32(in + 8);
	h->status = (int32_t)get_le32(in + 12);
	h->req_id = get_le64(in + 16);
	h->body_len = get_le32(in + 24);
	h->reserved = get_le32(in + 28);
	h->bulk_len = get_le64(in + 32);

	if (h->magic != FRAME_MAGIC) {
		*why = "bad magic";
		return STRATA_EPROTOVER;
	}
	if (h->version != STRATA_PROTO_VERSION) {
		*why = "unsupported protocol version";
		return STRATA_EPROTOVER;
	}
	if (h->flags & ~FRAME_F_KNOWN) {
		*why = "unknown flags";
		return STRATA_EBADMSG;
	}
	if (h->reserved != 0) {
		*why = "reserved field not zero";
		return STRATA_EBADMSG;
	}
	if (h->body_len > FRAME_MAX_BODY) {
		*why = "body length over limit";
		return STRATA_EBADMSG;
	}
	if (h->bulk_len > FRAME_MAX_BULK) {
		*why = "bulk length over limit";
		return STRATA_EBADMSG;
	}
	return 0;
}
