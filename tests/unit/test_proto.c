/*
 * Unit tests of the table-driven wire layer (src/proto/proto.h), on the
 * storage, mgmt and mem tables: every message round-trips, and every decoder
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
#include "proto/mem.h"
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
	struct sp_update u = { { 7, 0x100000002ull, 515, 99, 3,
				 { 99, CAP_READ | CAP_WRITE, 1800000000, { 0xa5 } } },
			       SP_FWD_FULL, 4096, 8192, 0xabcd, (5ull << 32) + 9, (5ull << 32) + 8 }, d;
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
	assert_true(d.ref.cap.ino == 99 && d.ref.cap.rights == (CAP_READ | CAP_WRITE));
	assert_true(d.ref.cap.expiry == 1800000000);
	assert_memory_equal(d.ref.cap.mac, u.ref.cap.mac, CAP_MAC_LEN);
	assert_int_equal(d.forwarded, SP_FWD_FULL);
	assert_int_equal(d.offset, 4096);
	assert_int_equal(d.len, 8192);
	assert_int_equal(d.crc, 0xabcd);
	assert_true(d.version == (5ull << 32) + 9 && d.base == (5ull << 32) + 8);
	check_prefixes(op_of(storage_ops, storage_NOPS, OP_CHUNK_WRITE), true, &b);
	/* forwarded above SP_FWD_PUSH, the largest kind */
	b.buf[sp_ref_MIN] = SP_FWD_PUSH + 1;
	assert_int_equal(sp_update_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	b.buf[sp_ref_MIN] = SP_FWD_FULL;
	/* a cap's unknown right (after the ref's 32 bytes and the cap's ino) */
	b.buf[32 + 8] = CAP_RIGHTS + 1;
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
	struct sp_read rd = { { 1, 2, 3, 4, 5, { 0 } }, 0, 65536, SP_READ_REPAIR }, d;
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(sp_read_encode(&b, &rd), 0);
	assert_int_equal(sp_read_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_int_equal(d.flags, SP_READ_REPAIR);
	check_prefixes(op_of(storage_ops, storage_NOPS, OP_CHUNK_READ), true, &b);
	put_le32(b.buf + b.len - 4, SP_READ_RECOVER << 1);	/* an unknown flag */
	assert_int_equal(sp_read_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	put_le32(b.buf + b.len - 4, 0);
	put_le32(b.buf + b.len - 8, (uint32_t)FRAME_MAX_BULK + 1);	/* len past its max */
	assert_int_equal(sp_read_decode(b.buf, (uint32_t)b.len, &d), STRATA_EBADMSG);
	bbuf_release(&b);
}

static void test_arrays(void **state)
{
	struct sp_batch_item items[3] = { { 1, 2, 3, 4, 0, 100, 0 }, { 1, 2, 3, 5, 0, 200, 0 },
					  { 9, 9, 9, 9, 9, 9, 1 } };
	struct sp_cap caps[2] = { { 3, CAP_READ, 1800000000, { 1 } },
				  { 9, CAP_READ, 1800000000, { 2 } } };
	struct sp_batch bt = { 515, items, 3, NULL, 0 }, d;
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
	/* With caps, each item's index must name one of them. */
	{
		struct bbuf cb;

		bt.caps = caps;
		bt.caps_n = 2;
		bbuf_init(&cb);
		assert_int_equal(sp_batch_encode(&cb, &bt), 0);
		assert_int_equal(sp_batch_decode(cb.buf, (uint32_t)cb.len, &d), 0);
		assert_int_equal(d.caps_n, 2);
		assert_true(d.caps[1].ino == 9 && d.caps[1].mac[0] == 2 && d.items[2].cap == 1);
		sp_batch_release(&d);
		bbuf_release(&cb);
		bt.caps_n = 1;
		bbuf_init(&cb);
		assert_int_equal(sp_batch_encode(&cb, &bt), 0);
		assert_int_equal(sp_batch_decode(cb.buf, (uint32_t)cb.len, &d), STRATA_EBADMSG);
		bbuf_release(&cb);
		bt.caps = NULL;
		bt.caps_n = 0;
	}
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
	struct mg_target_info ti[1] = { { 513, 1ull << 40, 12345, 0xf5, 777 } };
	struct mg_register r = { 2, pstr_c("10.0.0.2:7300"), ti, 1, 0x77, 0x1de47 }, d;
	char longaddr[CM_ADDR_LEN + 1];
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(mg_register_encode(&b, &r), 0);
	assert_int_equal(mg_register_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_true(pstr_eq(d.addr, "10.0.0.2:7300"));
	assert_int_equal(d.targets_n, 1);
	assert_true(d.targets[0].capacity == 1ull << 40);
	assert_true(d.targets[0].fs == 0xf5 && d.targets[0].avail == 777);
	assert_true(d.incarnation == 0x77 && d.ident == 0x1de47);
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

/* A single-key request: its key is a view of the body, bounded by
 * MP_KEY_MAX; flags and the pin bit have their ranges. */
static void test_mem_keys(void **state)
{
	char key[MP_KEY_MAX + 1];
	struct mp_put put = { MP_PUT_PIN | MP_PUT_NX, { (const uint8_t *)"layer/7", 7 } }, dput;
	struct mp_get get = { 1ull << 40, { (const uint8_t *)"k", 1 } }, dget;
	struct mp_pin pin = { 1, { (const uint8_t *)"k", 1 } }, dpin;
	struct mp_list ls = { MP_LIST_MAX, { NULL, 0 } }, dls;
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(mp_put_encode(&b, &put), 0);
	assert_int_equal(b.len, 4 + 4 + 7);
	assert_int_equal(mp_put_decode(b.buf, (uint32_t)b.len, &dput), 0);
	assert_int_equal(dput.flags, MP_PUT_PIN | MP_PUT_NX);
	assert_int_equal(dput.key.len, 7);
	/* a view into the body, not a copy */
	assert_ptr_equal(dput.key.p, b.buf + 8);
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_PUT), true, &b);
	put_le32(b.buf, MP_PUT_NX << 1);	/* an unknown flag */
	assert_int_equal(mp_put_decode(b.buf, (uint32_t)b.len, &dput), STRATA_EBADMSG);
	bbuf_release(&b);

	bbuf_init(&b);
	assert_int_equal(mp_get_encode(&b, &get), 0);
	assert_int_equal(mp_get_decode(b.buf, (uint32_t)b.len, &dget), 0);
	assert_true(dget.cap == 1ull << 40 && dget.key.len == 1 && dget.key.p[0] == 'k');
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_GET), true, &b);
	bbuf_release(&b);

	bbuf_init(&b);
	assert_int_equal(mp_pin_encode(&b, &pin), 0);
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_PIN), true, &b);
	b.buf[0] = 2;	/* pin is 0 or 1 */
	assert_int_equal(mp_pin_decode(b.buf, (uint32_t)b.len, &dpin), STRATA_EBADMSG);
	bbuf_release(&b);

	/* An empty prefix lists everything; a listing asks for one key at
	 * least and at most MP_LIST_MAX. */
	bbuf_init(&b);
	assert_int_equal(mp_list_encode(&b, &ls), 0);
	assert_int_equal(mp_list_decode(b.buf, (uint32_t)b.len, &dls), 0);
	assert_int_equal(dls.prefix.len, 0);
	put_le32(b.buf, 0);
	assert_int_equal(mp_list_decode(b.buf, (uint32_t)b.len, &dls), STRATA_EBADMSG);
	put_le32(b.buf, MP_LIST_MAX + 1);
	assert_int_equal(mp_list_decode(b.buf, (uint32_t)b.len, &dls), STRATA_EBADMSG);
	bbuf_release(&b);

	/* A key of MP_KEY_MAX bytes goes; one more neither encodes nor
	 * decodes. */
	memset(key, 'k', sizeof(key));
	put.key.p = (const uint8_t *)key;
	put.key.len = MP_KEY_MAX;
	bbuf_init(&b);
	assert_int_equal(mp_put_encode(&b, &put), 0);
	assert_int_equal(mp_put_decode(b.buf, (uint32_t)b.len, &dput), 0);
	assert_int_equal(dput.key.len, MP_KEY_MAX);
	put_le32(b.buf + 4, MP_KEY_MAX + 1);
	assert_int_equal(bbuf_append(&b, "k", 1), 0);
	assert_int_equal(mp_put_decode(b.buf, (uint32_t)b.len, &dput), STRATA_EBADMSG);
	bbuf_release(&b);
	put.key.len = MP_KEY_MAX + 1;
	bbuf_init(&b);
	assert_int_equal(mp_put_encode(&b, &put), -E2BIG);
	bbuf_release(&b);
}

/* Batches: arrays of items up to MP_BATCH_MAX, their values within one
 * bulk; the results and a listing round-trip. */
static void test_mem_batches(void **state)
{
	struct mp_put_item items[2] = { { 0, 10, { (const uint8_t *)"a", 1 } },
					{ MP_PUT_PIN, 0, { (const uint8_t *)"bb", 2 } } };
	struct mp_mput mput = { items, 2 }, dmput;
	struct mp_key keys[2] = { { { (const uint8_t *)"a", 1 } }, { { (const uint8_t *)"bb", 2 } } };
	struct mp_mget mget = { 8192, keys, 2 }, dmget;
	struct mp_result res[2] = { { 0, 10 }, { -ENOBUFS, 7 } };
	struct mp_results rr = { res, 2 }, drr;
	struct mp_list_ent ents[2] = { { { (const uint8_t *)"x/1", 3 }, 5 },
				       { { (const uint8_t *)"x/2", 3 }, 0 } };
	struct mp_list_rep lr = { ents, 2, 1 }, dlr;
	struct bbuf b;

	(void)state;
	bbuf_init(&b);
	assert_int_equal(mp_mput_encode(&b, &mput), 0);
	assert_int_equal(mp_mput_decode(b.buf, (uint32_t)b.len, &dmput), 0);
	assert_int_equal(dmput.items_n, 2);
	assert_true(dmput.items[0].len == 10 && dmput.items[0].key.len == 1);
	assert_int_equal(dmput.items[1].flags, MP_PUT_PIN);
	assert_true(memcmp(dmput.items[1].key.p, "bb", 2) == 0);
	mp_mput_release(&dmput);
	assert_null(dmput.items);
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_MPUT), true, &b);
	/* A count above what the bytes left can hold, and one above the
	 * maximum: refused before any allocation. */
	put_le32(b.buf, 3);
	assert_int_equal(mp_mput_decode(b.buf, (uint32_t)b.len, &dmput), STRATA_EBADMSG);
	put_le32(b.buf, MP_BATCH_MAX + 1);
	assert_int_equal(mp_mput_decode(b.buf, (uint32_t)b.len, &dmput), STRATA_EBADMSG);
	bbuf_release(&b);
	/* Values that do not fit one bulk (the cross-field rule), each or
	 * together. */
	items[0].len = FRAME_MAX_BULK + 1;
	bbuf_init(&b);
	assert_int_equal(mp_mput_encode(&b, &mput), 0);
	assert_int_equal(mp_mput_decode(b.buf, (uint32_t)b.len, &dmput), STRATA_EBADMSG);
	bbuf_release(&b);
	items[0].len = FRAME_MAX_BULK;
	items[1].len = 1;
	bbuf_init(&b);
	assert_int_equal(mp_mput_encode(&b, &mput), 0);
	assert_int_equal(mp_mput_decode(b.buf, (uint32_t)b.len, &dmput), STRATA_EBADMSG);
	bbuf_release(&b);
	/* More than the maximum does not encode. */
	mput.items_n = MP_BATCH_MAX + 1;
	bbuf_init(&b);
	assert_int_equal(mp_mput_encode(&b, &mput), -E2BIG);
	bbuf_release(&b);

	bbuf_init(&b);
	assert_int_equal(mp_mget_encode(&b, &mget), 0);
	assert_int_equal(mp_mget_decode(b.buf, (uint32_t)b.len, &dmget), 0);
	assert_true(dmget.cap == 8192 && dmget.keys_n == 2 && dmget.keys[1].key.len == 2);
	mp_mget_release(&dmget);
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_MGET), true, &b);
	put_le32(b.buf + 8, MP_BATCH_MAX + 1);
	assert_int_equal(mp_mget_decode(b.buf, (uint32_t)b.len, &dmget), STRATA_EBADMSG);
	bbuf_release(&b);

	bbuf_init(&b);
	assert_int_equal(mp_results_encode(&b, &rr), 0);
	assert_int_equal(b.len, 4 + 2 * mp_result_MIN);
	assert_int_equal(mp_results_decode(b.buf, (uint32_t)b.len, &drr), 0);
	assert_int_equal(drr.results_n, 2);
	assert_int_equal(drr.results[1].status, -ENOBUFS);
	assert_true(drr.results[1].len == 7);
	mp_results_release(&drr);
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_MGET), false, &b);
	bbuf_release(&b);

	bbuf_init(&b);
	assert_int_equal(mp_list_rep_encode(&b, &lr), 0);
	assert_int_equal(mp_list_rep_decode(b.buf, (uint32_t)b.len, &dlr), 0);
	assert_true(dlr.ents_n == 2 && dlr.truncated == 1 && dlr.ents[0].len == 5);
	assert_true(memcmp(dlr.ents[1].key.p, "x/2", 3) == 0);
	mp_list_rep_release(&dlr);
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_LIST), false, &b);
	b.buf[b.len - 1] = 2;	/* truncated is 0 or 1 */
	assert_int_equal(mp_list_rep_decode(b.buf, (uint32_t)b.len, &dlr), STRATA_EBADMSG);
	bbuf_release(&b);
}

/* The replies without a body refuse one; STATS is 14 counters. */
static void test_mem_void_and_stats(void **state)
{
	struct mp_stats s = { .capacity = 1ull << 30, .used = 4096, .reloaded = 3 }, d;
	/* (in opcode order: test_tables) */
	const struct proto_op *put = &mem_ops[OP_MEM_PUT - OP_MEM_FIRST];
	const struct proto_op *stats = &mem_ops[OP_MEM_STATS - OP_MEM_FIRST];
	uint8_t m[512], one = 0;
	struct bbuf b;

	(void)state;
	assert_int_equal(put->rep_decode(NULL, 0, m), 0);
	assert_int_equal(put->rep_decode(&one, 1, m), STRATA_EBADMSG);
	assert_int_equal(stats->req_decode(&one, 1, m), STRATA_EBADMSG);
	bbuf_init(&b);
	assert_int_equal(mp_stats_encode(&b, &s), 0);
	assert_int_equal(b.len, 14 * 8);
	assert_int_equal(mp_stats_decode(b.buf, (uint32_t)b.len, &d), 0);
	assert_true(d.capacity == 1ull << 30 && d.used == 4096 && d.reloaded == 3);
	check_prefixes(op_of(mem_ops, mem_NOPS, OP_MEM_STATS), false, &b);
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
	/* mem keeps the numbers it had before its table, in order */
	assert_int_equal(mem_NOPS, 11);
	for (size_t i = 0; i < mem_NOPS; i++) {
		assert_int_equal(mem_ops[i].op, OP_MEM_FIRST + i);
		assert_true(strncmp(mem_ops[i].name, "MEM_", 4) == 0);
	}
	assert_string_equal(mem_ops[OP_MEM_STATS - OP_MEM_FIRST].name, "MEM_STATS");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_update_roundtrip),
		cmocka_unit_test(test_read_flags_and_bounds),
		cmocka_unit_test(test_arrays),
		cmocka_unit_test(test_strings),
		cmocka_unit_test(test_void_and_admin),
		cmocka_unit_test(test_mem_keys),
		cmocka_unit_test(test_mem_batches),
		cmocka_unit_test(test_mem_void_and_stats),
		cmocka_unit_test(test_tables),
	};

	log_set_level(LOG_OFF);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
