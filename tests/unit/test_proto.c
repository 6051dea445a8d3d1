/*
 * Unit tests of the table-driven wire layer (src/proto/proto.h), on the
 * storage and mgmt tables: every message round-trips, and every decoder
 * refuses a short body, a trailing byte, a scalar out of its range, an
 * unknown flag, an over-long string, a string with a NUL inside, an array
 * count above its maximum or above what the bytes left can hold, and a
 * message that breaks a cross-field rule.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/log.h"
#include "proto/mgmt.h"
#include "proto/storage.h"

/* Every proper prefix of a valid body fails, and so does one more byte. */
static void check_prefixes(const struct proto_op *op, bool req, const struct bbuf *b)
{
	uint8_t m[512];
	uint8_t *copy = malloc(b->len + 1);
	int (*dec)(const void *, uint32_t, void *) = req ? op->req_decode : op->rep_decode;
	void (*rel)(void *) = req ? op->req_release : op->rep_release;

	assert_non_null(copy);
	memcpy(copy, b->buf, b->len);
	for (size_t n = 0; n < b->len; n++)
		assert_int_equal(dec(copy, (uint32_t)n, m), STRATA_EBADMSG);
	copy[b->len] = 0;
	assert_int_equal(dec(copy, (uint32_t)b->len + 1, m), STRATA_EBADMSG);
	assert_int_equal(dec(copy, (uint32_t)b->len, m), 0);
	rel(m);
	free(copy);
}

static const struct proto_op *op_of(const struct proto_op *ops, size_t n, uint16_t code)
{
	for (size_t i = 0; i < n; i++)
		if (ops[i].op == code)
			return &ops[i];
	fail();
	return NULL;
}

static void test_update_roundtrip(void **state)
{
	struct sp_update u = { { 7, 0x100000002ull, 515, 99, 3 }, SP_FWD_FULL, 4096, 8192, 0xabcd,
			       (5ull << 32) + 9, (5ull << 32) + 8 }, d;
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(sp_update_encode(&b, &u), 0);
	assert_int_equal(b.len, sp_update_MIN);
	assert_int_equal(sp_update_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_int_equal(d.ref.chain_id, 7);
	assert_true(d.ref.chain_ver == 0x100000002ull);
	assert_int_equal(d.ref.target_id, 515);
	assert_true(d.ref.ino == 99 && d.ref.idx == 3);
	assert_int_equal(d.forwarded, SP_FWD_FULL);
	assert_int_equal(d.offset, 4096);
	assert_int_equal(d.len, 8192);
	assert_int_equal(d.crc, 0xabcd);
	assert_true(d.version == (5ull << 32) + 9 && d.base == (5ull << 32) + 8);
	check_prefixes(op_of(storage_ops, storage_NOPS, OP_CHUNK_WRITE), true, &b);
	/* forwarded above SP_FWD_PUSH, the largest kind */
	b.buf[sp_ref_MIN] = SP_FWD_PUSH + 1;
	assert_int_equal(sp_update_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
	/* a range past the largest chunk (the cross-field rule) */
	u.offset = (uint32_t)FRAME_MAX_BULK;
	u.len = 1;
	bbuf_init(&b);
	assert_int_equal(sp_update_encode(&b, &u), 0);
	assert_int_equal(sp_update_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
}

static void test_read_flags_and_bounds(void **state)
{
	struct sp_read rd = { { 1, 2, 3, 4, 5 }, 0, 65536, SP_READ_REPAIR }, d;
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(sp_read_encode(&b, &rd), 0);
	assert_int_equal(sp_read_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_int_equal(d.flags, SP_READ_REPAIR);
	check_prefixes(op_of(storage_ops, storage_NOPS, OP_CHUNK_READ), true, &b);
	put_le32(b.buf + b.len - 4, SP_READ_SURVEY << 1);	/* an unknown flag */
	assert_int_equal(sp_read_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	put_le32(b.buf + b.len - 4, 0);
	put_le32(b.buf + b.len - 8, (uint32_t)FRAME_MAX_BULK + 1);	/* len past its max */
	assert_int_equal(sp_read_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
}

static void test_arrays(void **state)
{
	struct sp_batch_item items[3] = { { 1, 2, 3, 4, 0, 100 }, { 1, 2, 3, 5, 0, 200 },
					  { 9, 9, 9, 9, 9, 9 } };
	struct sp_batch bt = { 515, items, 3 }, d;
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(sp_batch_encode(&b, &bt), 0);
	assert_int_equal(sp_batch_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_int_equal(d.items_n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(d.items[i].chain_id, items[i].chain_id);
		assert_true(d.items[i].chain_ver == items[i].chain_ver);
		assert_true(d.items[i].ino == items[i].ino && d.items[i].idx == items[i].idx);
		assert_int_equal(d.items[i].offset, items[i].offset);
		assert_int_equal(d.items[i].len, items[i].len);
	}
	sp_batch_release(&d);
	assert_null(d.items);
	check_prefixes(op_of(storage_ops, storage_NOPS, OP_CHUNK_BATCH_READ), true, &b);
	/* A count above what the bytes left can hold: refused before any
	 * allocation; and one above the maximum. */
	put_le32(b.buf + 4, 4);
	assert_int_equal(sp_batch_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	put_le32(b.buf + 4, SP_BATCH_MAX + 1);
	assert_int_equal(sp_batch_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
	/* Slots that do not fit one bulk (the cross-field rule). */
	items[0].len = (uint32_t)FRAME_MAX_BULK;
	bbuf_init(&b);
	assert_int_equal(sp_batch_encode(&b, &bt), 0);
	assert_int_equal(sp_batch_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
	/* More than the maximum does not encode. */
	bt.items_n = SP_BATCH_MAX + 1;
	bbuf_init(&b);
	assert_int_equal(sp_batch_encode(&b, &bt), -E2BIG);
	bbuf_release(&b);
}

static void test_strings(void **state)
{
	struct mg_target_info ti[1] = { { 513, 1ull << 40, 12345 } };
	struct mg_register r = { 2, pstr_c("10.0.0.2:7300"), ti, 1, 0x77 }, d;
	char longaddr[CM_ADDR_LEN + 1];
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(mg_register_encode(&b, &r), 0);
	assert_int_equal(mg_register_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_true(pstr_eq(d.addr, "10.0.0.2:7300"));
	assert_int_equal(d.targets_n, 1);
	assert_true(d.targets[0].capacity == 1ull << 40);
	mg_register_release(&d);
	check_prefixes(op_of(mgmt_ops, mgmt_NOPS, OP_MGMT_REGISTER), true, &b);
	b.buf[4 + 4 + 2] = 0;	/* a NUL inside the address */
	assert_int_equal(mg_register_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
	memset(longaddr, 'a', sizeof(longaddr) - 1);
	longaddr[sizeof(longaddr) - 1] = '\0';
	r.addr = pstr_c(longaddr);
	bbuf_init(&b);
	assert_int_equal(mg_register_encode(&b, &r), -ENAMETOOLONG);
	bbuf_release(&b);
}

static void test_void_and_admin(void **state)
{
	struct proto_void v;
	struct mg_admin a = { MGMT_ADMIN_SYNCED, 513, 7, 42 }, d;
	struct bbuf b;
	uint8_t one = 0;

	(void)state;
	assert_int_equal(proto_void_decode(NULL, 0, &v), 0);
	assert_int_equal(proto_void_decode(&one, 1, &v), STRATA_EBADMSG);
	bbuf_init(&b);
	assert_int_equal(mg_admin_encode(&b, &a), 0);
	assert_int_equal(mg_admin_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_true(d.chain_ver == 42);
	put_le32(b.buf, MGMT_ADMIN_LAST + 1);
	assert_int_equal(mg_admin_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
}

/* Every operation has a distinct opcode in its service's range and a name. */
static void test_tables(void **state)
{
	(void)state;
	for (size_t i = 0; i < storage_NOPS; i++) {
		assert_true(storage_ops[i].op >= OP_STORAGE_FIRST &&
			    storage_ops[i].op <= OP_STORAGE_LAST);
		assert_non_null(storage_ops[i].name);
		for (size_t k = 0; k < i; k++)
			assert_int_not_equal(storage_ops[i].op, storage_ops[k].op);
	}
	for (size_t i = 0; i < mgmt_NOPS; i++) {
		assert_true(mgmt_ops[i].op >= OP_MGMT_FIRST && mgmt_ops[i].op <= OP_MGMT_LAST);
		for (size_t k = 0; k < i; k++)
			assert_int_not_equal(mgmt_ops[i].op, mgmt_ops[k].op);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_update_roundtrip),
		cmocka_unit_test(test_read_flags_and_bounds),
		cmocka_unit_test(test_arrays),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_void_and_admin),
		cmocka_unit_test(test_tables),
	};

	log_set_level(LOG_OFF);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
