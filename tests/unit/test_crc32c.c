/*
 * Unit tests for src/common/crc32c: published vectors (RFC 3720 B.4 and the
 * common "123456789" check value), incremental use, crc32c_zeros, and a
 * bitwise reference implementation over random buffers of many lengths and
 * alignments.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/crc32c.h"
#include "common/rand.h"

/* Reflected CRC32C, polynomial 0x82F63B78, one bit at a time: slow and
 * obviously right, the oracle for the ISA-L path. */
static uint32_t ref_crc32c(uint32_t crc, const uint8_t *p, size_t len)
{
	uint32_t c = ~crc;

	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
	}
	return ~c;
}

/* Seeded: a failure reproduces. */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t rng(void)
{
	return rng_next(&rng_state);
}

static void fill_random(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(rng() >> 56);
}

static void test_check_value(void **state)
{
	(void)state;
	assert_int_equal(crc32c(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(ref_crc32c(0, (const uint8_t *)"123456789", 9), 0xE3069283u);
}

static void test_empty(void **state)
{
	(void)state;
	assert_int_equal(crc32c(0, "", 0), 0u);
	assert_int_equal(crc32c(0, NULL, 0), 0u);
	/* Extending by nothing leaves any crc unchanged. */
	assert_int_equal(crc32c(0xE3069283u, NULL, 0), 0xE3069283u);
}

/* RFC 3720, appendix B.4. */
static void test_rfc3720_vectors(void **state)
{
	uint8_t buf[32];

	(void)state;
	memset(buf, 0, sizeof(buf));
	assert_int_equal(crc32c(0, buf, sizeof(buf)), 0x8A9136AAu);
	memset(buf, 0xFF, sizeof(buf));
	assert_int_equal(crc32c(0, buf, sizeof(buf)), 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)i;
	assert_int_equal(crc32c(0, buf, sizeof(buf)), 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (uint8_t)(31 - i);
	assert_int_equal(crc32c(0, buf, sizeof(buf)), 0x113FDB5Cu);
}

/* RFC 3720, appendix B.4: an iSCSI SCSI Read (10) command PDU. The RFC
 * prints the CRC as the bytes "56 3a 96 d9" in wire (little-endian) order;
 * 0xD9963A56 is also the value LevelDB's crc32c test checks. */
static void test_rfc3720_iscsi_read_pdu(void **state)
{
	static const uint8_t pdu[48] = {
		0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
		0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
		0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
		0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	};

	(void)state;
	assert_int_equal(crc32c(0, pdu, sizeof(pdu)), 0xD9963A56u);
}

static void test_incremental_random_splits(void **state)
{
	uint8_t buf[4096 + 64];

	(void)state;
	fill_random(buf, sizeof(buf));
	for (int iter = 0; iter < 2000; iter++) {
		size_t len = (size_t)(rng() % sizeof(buf));
		size_t a = len ? (size_t)(rng() % (len + 1)) : 0;
		size_t b = a + (len > a ? (size_t)(rng() % (len - a + 1)) : 0);
		uint32_t whole = crc32c(0, buf, len);
		uint32_t c;

		/* Two splits: [0,a) [a,b) [b,len). */
		c = crc32c(0, buf, a);
		c = crc32c(c, buf + a, b - a);
		c = crc32c(c, buf + b, len - b);
		assert_int_equal(c, whole);
	}
}

static void test_byte_at_a_time(void **state)
{
	uint8_t buf[1000];
	uint32_t c = 0;

	(void)state;
	fill_random(buf, sizeof(buf));
	for (size_t i = 0; i < sizeof(buf); i++)
		c = crc32c(c, buf + i, 1);
	assert_int_equal(c, crc32c(0, buf, sizeof(buf)));
}

/* Every length 0..600 at every start offset 0..15: the vector code paths
 * (head, 8-byte body, tail; folding for long inputs) against the oracle. */
static void test_against_reference(void **state)
{
	uint8_t buf[600 + 16];

	(void)state;
	fill_random(buf, sizeof(buf));
	for (size_t off = 0; off < 16; off++) {
		for (size_t len = 0; len <= 600; len++)
			assert_int_equal(crc32c(0, buf + off, len), ref_crc32c(0, buf + off, len));
	}
	/* A nonzero starting crc too. */
	assert_int_equal(crc32c(0xDEADBEEFu, buf, 333), ref_crc32c(0xDEADBEEFu, buf, 333));
}

static void test_zeros(void **state)
{
	static const size_t lens[] = { 0, 1, 7, 32, 4095, 4096, 4097, 8192, 65536 + 3,
				       (1u << 20) + 5 };
	uint8_t *zeros = calloc(1, (1u << 20) + 5);

	(void)state;
	assert_non_null(zeros);
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		assert_int_equal(crc32c_zeros(0, lens[i]), crc32c(0, zeros, lens[i]));
		/* Extending an existing crc: "123456789" then zeros. */
		assert_int_equal(crc32c_zeros(0xE3069283u, lens[i]),
				 crc32c(0xE3069283u, zeros, lens[i]));
	}
	assert_int_equal(crc32c_zeros(0, 32), 0x8A9136AAu);
	free(zeros);
}

/* A few MiB, checked against the oracle and against a chunked computation
 * (how the chunk engine checksums a chunk piece by piece). */
static void test_large_buffer(void **state)
{
	size_t len = (5u << 20) + 123;
	uint8_t *buf = malloc(len);
	uint32_t whole, c = 0;
	size_t off = 0;

	(void)state;
	assert_non_null(buf);
	fill_random(buf, len);
	whole = crc32c(0, buf, len);
	assert_int_equal(whole, ref_crc32c(0, buf, len));
	while (off < len) {
		size_t n = 1 + (size_t)(rng() % (300u << 10));

		if (n > len - off)
			n = len - off;
		c = crc32c(c, buf + off, n);
		off += n;
	}
	assert_int_equal(c, whole);
	free(buf);
}


static void test_combine(void **state)
{
	uint8_t buf[300000];
	uint64_t x = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		buf[i] = (uint8_t)(x >> 56);
	}
	for (size_t split = 0; split <= sizeof(buf); split += split < 100 ? 1 : 4099) {
		uint32_t a = crc32c(0, buf, split), b = crc32c(0, buf + split, sizeof(buf) - split);

		assert_int_equal(crc32c_combine(a, b, sizeof(buf) - split), crc32c(0, buf, sizeof(buf)));
	}
	assert_int_equal(crc32c_combine(0xE3069283u, 0, 0), 0xE3069283u);
	for (uint64_t len2 = 0; len2 < 70000; len2 = len2 * 3 + 1) {
		struct crc32c_shift op;
		uint32_t a = crc32c(0, buf, 1000), b = crc32c(0, buf + 1000, len2);

		crc32c_shift_init(&op, len2);
		assert_int_equal(crc32c_shift_combine(&op, a, b), crc32c(0, buf, 1000 + len2));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_combine),
		cmocka_unit_test(test_check_value),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_rfc3720_vectors),
		cmocka_unit_test(test_rfc3720_iscsi_read_pdu),
		cmocka_unit_test(test_incremental_random_splits),
		cmocka_unit_test(test_byte_at_a_time),
		cmocka_unit_test(test_against_reference),
		cmocka_unit_test(test_zeros),
		cmocka_unit_test(test_large_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
