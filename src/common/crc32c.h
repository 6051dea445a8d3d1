/*
 * CRC32C (Castagnoli), hardware-accelerated through ISA-L.
 * crc32c(0, buf, len) is the standard CRC32C of buf ("123456789" ->
 * 0xE3069283). To extend: crc32c(crc32c(0, a, la), b, lb) equals the
 * CRC32C of a||b.
 */
#ifndef STRATA_COMMON_CRC32C_H
#define STRATA_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* CRC32C of A||B given crc1 = CRC32C(A), crc2 = CRC32C(B), len2 = |B|. */
uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2);
/* The combine step for one fixed len2, precomputed: cheap to apply many
 * times (32 XORs), e.g. per fixed-size block. */
struct crc32c_shift {
	uint32_t m[32];
};

void crc32c_shift_init(struct crc32c_shift *op, uint64_t len2);
/* crc32c_combine(crc1, crc2, len2) for op's len2. */
uint32_t crc32c_shift_combine(const struct crc32c_shift *op, uint32_t crc1, uint32_t crc2);
/* CRC32C of crc's message extended by len zero bytes. */
uint32_t crc32c_zeros(uint32_t crc, size_t len);

#endif
