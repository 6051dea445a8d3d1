/* CRC32C over ISA-L's crc32_iscsi (which takes and returns the raw,
 * non-inverted register: we apply the standard pre/post inversion). */
#include <string.h>

#include <isa-l/crc.h>

#include "crc32c.h"

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	uint32_t c = ~crc;

	while (len > 0) {
		/* crc32_iscsi takes an int length. */
		int n = len > (1u << 30) ? (1 << 30) : (int)len;

		c = crc32_iscsi((unsigned char *)buf, n, c);
		buf = (const unsigned char *)buf + n;
		len -= (size_t)n;
	}
	return ~c;
}

uint32_t crc32c_zeros(uint32_t crc, size_t len)
{
	static const unsigned char zeros[4096];

	while (len > 0) {
		size_t n = len > sizeof(zeros) ? sizeof(zeros) : len;

		crc = crc32c(crc, zeros, n);
		len -= n;
	}
	return crc;
}

/*
 * crc32c_combine: the CRC of A||B from crc(A), crc(B) and len(B), by
 * applying len(B) zero bits to crc(A) as a GF(2) linear operator (squared
 * repeatedly), the method zlib's crc32_combine uses, for CRC32C's
 * reflected polynomial 0x82F63B78.
 */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;

	for (int i = 0; vec; vec >>= 1, i++) {
		if (vec & 1)
			sum ^= mat[i];
	}
	return sum;
}

static void gf2_square(uint32_t *square, const uint32_t *mat)
{
	for (int n = 0; n < 32; n++)
		square[n] = gf2_times(mat, mat[n]);
}

/* Fills op with the operator that appends len2 zero bytes to a CRC. */
void crc32c_shift_init(struct crc32c_shift *op, uint64_t len2)
{
	uint32_t even[32], odd[32], row = 1;

	for (int n = 0; n < 32; n++)
		op->m[n] = 1u << n;	/* identity */
	if (len2 == 0)
		return;
	odd[0] = 0x82F63B78u;
	for (int n = 1; n < 32; n++) {
		odd[n] = row;
		row <<= 1;
	}
	gf2_square(even, odd);
	gf2_square(odd, even);
	do {
		uint32_t t[32];

		gf2_square(even, odd);
		if (len2 & 1) {
			for (int n = 0; n < 32; n++)
				t[n] = gf2_times(even, op->m[n]);
			memcpy(op->m, t, sizeof(t));
		}
		len2 >>= 1;
		if (!len2)
			break;
		gf2_square(odd, even);
		if (len2 & 1) {
			for (int n = 0; n < 32; n++)
				t[n] = gf2_times(odd, op->m[n]);
			memcpy(op->m, t, sizeof(t));
		}
		len2 >>= 1;
	} while (len2);
}

uint32_t crc32c_shift_combine(const struct crc32c_shift *op, uint32_t crc1, uint32_t crc2)
{
	return gf2_times(op->m, crc1) ^ crc2;
}

uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
	uint32_t even[32], odd[32], row = 1;

	if (len2 == 0)
		return crc1;
	odd[0] = 0x82F63B78u;	/* the operator for one zero bit */
	for (int n = 1; n < 32; n++) {
		odd[n] = row;
		row <<= 1;
	}
	gf2_square(even, odd);	/* two zero bits */
	gf2_square(odd, even);	/* four */
	do {
		gf2_square(even, odd);
		if (len2 & 1)
			crc1 = gf2_times(even, crc1);
		len2 >>= 1;
		if (!len2)
			break;
		gf2_square(odd, even);
		if (len2 & 1)
			crc1 = gf2_times(odd, crc1);
		len2 >>= 1;
	} while (len2);
	return crc1 ^ crc2;
}
