/* CRC32C over ISA-L's crc32_iscsi (which takes and returns the raw,
 * non-inverted register: we apply the standard pre/post inversion). */
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
