/*
 * The mem service's operations (src/proto/proto.h explains the tables;
 * docs/mem.md what the service does with them). A key is 1..MP_KEY_MAX
 * bytes: a longer one does not decode, an empty one is answered -EINVAL
 * (per item in a batch). A reply with a non-zero status has an empty body
 * and no bulk.
 *
 *   PUT      mp_put: flags (MP_PUT_*), key; bulk = the value
 *            -> (empty). -ENOSPC (pool full: nothing lost), -EEXIST (NX),
 *            -EDQUOT (the namespace is at its token's mem capacity)
 *   GET      mp_get: cap (the largest value the caller takes), key
 *            -> mp_len; bulk = the value. -ENOBUFS (longer than cap),
 *            -ENOENT
 *   REMOVE   mp_key -> (empty). -ENOENT
 *   EXISTS   mp_key -> mp_len, no bulk. -ENOENT
 *   PIN      mp_pin: pin (1 pin, 0 unpin), key -> (empty). -ENOENT
 *   LIST     mp_list: max (1..MP_LIST_MAX keys), prefix
 *            -> mp_list_rep: the keys with their lengths; truncated 1
 *            when more keys match than max or than one body holds
 *   MPUT     mp_mput: items (flags, len, key); bulk = the items' values
 *            back to back, in order (their lens add up to the bulk)
 *   MGET     mp_mget: cap (bytes of the reply's bulk), keys
 *   MREMOVE, MEXISTS   mp_keys: keys
 *            -> (every batch) mp_results: (status, len) per item, in
 *            order. MGET bulk = the values whose status is 0, back to
 *            back; a value that no longer fits in cap gets -ENOBUFS and
 *            its len (ask for it again)
 *   STATS    (empty) -> mp_stats: the pool's counters
 *
 * Only PUT and MPUT carry bulk in a request, only GET and MGET in a reply.
 */
#ifndef STRATA_PROTO_MEM_H
#define STRATA_PROTO_MEM_H

#include "net/frame.h"
#include "proto/proto.h"

#define MP_KEY_MAX 1024u	/* bytes of a key or a prefix */
#define MP_BATCH_MAX 4096u	/* items of one batch request */
#define MP_LIST_MAX 65536u	/* keys of one LIST reply */

/* PUT and MPUT item flags. */
#define MP_PUT_PIN 0x1u		/* never evicted until unpinned */
#define MP_PUT_NX 0x2u		/* -EEXIST when the key exists */
#define MP_PUT_KNOWN (MP_PUT_PIN | MP_PUT_NX)

/* REMOVE, EXISTS; an item of MGET, MREMOVE, MEXISTS. */
#define MP_KEY_FIELDS(X) \
	X(BYTES, key, MP_KEY_MAX)
PROTO_MSG(mp_key, MP_KEY_FIELDS)

#define MP_PUT_FIELDS(X) \
	X(FLAGS, flags, MP_PUT_KNOWN) \
	X(BYTES, key, MP_KEY_MAX)
PROTO_MSG(mp_put, MP_PUT_FIELDS)

#define MP_GET_FIELDS(X) \
	X(U64, cap) \
	X(BYTES, key, MP_KEY_MAX)
PROTO_MSG(mp_get, MP_GET_FIELDS)

/* GET, EXISTS: the value's length. */
#define MP_LEN_FIELDS(X) \
	X(U64, len)
PROTO_MSG(mp_len, MP_LEN_FIELDS)

#define MP_PIN_FIELDS(X) \
	X(U8R, pin, 1) \
	X(BYTES, key, MP_KEY_MAX)
PROTO_MSG(mp_pin, MP_PIN_FIELDS)

#define MP_LIST_FIELDS(X) \
	X(U32R, max, MP_LIST_MAX) \
	X(BYTES, prefix, MP_KEY_MAX)
PROTO_MSG_CHECKED(mp_list, MP_LIST_FIELDS)

#define MP_LIST_ENT_FIELDS(X) \
	X(BYTES, key, MP_KEY_MAX) \
	X(U64, len)
PROTO_MSG(mp_list_ent, MP_LIST_ENT_FIELDS)

#define MP_LIST_REP_FIELDS(X) \
	X(ARR, ents, mp_list_ent, MP_LIST_MAX) \
	X(U8R, truncated, 1)
PROTO_MSG(mp_list_rep, MP_LIST_REP_FIELDS)

#define MP_PUT_ITEM_FIELDS(X) \
	X(FLAGS, flags, MP_PUT_KNOWN) \
	X(U64, len) \
	X(BYTES, key, MP_KEY_MAX)
PROTO_MSG(mp_put_item, MP_PUT_ITEM_FIELDS)

#define MP_MPUT_FIELDS(X) \
	X(ARR, items, mp_put_item, MP_BATCH_MAX)
PROTO_MSG_CHECKED(mp_mput, MP_MPUT_FIELDS)

#define MP_MGET_FIELDS(X) \
	X(U64, cap) \
	X(ARR, keys, mp_key, MP_BATCH_MAX)
PROTO_MSG(mp_mget, MP_MGET_FIELDS)

#define MP_KEYS_FIELDS(X) \
	X(ARR, keys, mp_key, MP_BATCH_MAX)
PROTO_MSG(mp_keys, MP_KEYS_FIELDS)

#define MP_RESULT_FIELDS(X) \
	X(I32, status) \
	X(U64, len)
PROTO_MSG(mp_result, MP_RESULT_FIELDS)

#define MP_RESULTS_FIELDS(X) \
	X(ARR, results, mp_result, MP_BATCH_MAX)
PROTO_MSG(mp_results, MP_RESULTS_FIELDS)

/* One node's pool (mem_pool_stats) and its spill counters. */
#define MP_STATS_FIELDS(X) \
	X(U64, capacity) \
	X(U64, used) \
	X(U64, objects) \
	X(U64, pinned) \
	X(U64, leased) \
	X(U64, puts) \
	X(U64, gets) \
	X(U64, hits) \
	X(U64, misses) \
	X(U64, evictions) \
	X(U64, evicted_bytes) \
	X(U64, refused) \
	X(U64, spilled) \
	X(U64, reloaded)
PROTO_MSG(mp_stats, MP_STATS_FIELDS)

/* Stubs are named mm_<op>: mm_get_call(), mm_get_req(), ... */
#define MEM_OPS(OP) \
	OP(MEM_PUT,      96, mm_put,     mp_put,     proto_void, ANY) \
	OP(MEM_GET,      97, mm_get,     mp_get,     mp_len, ANY) \
	OP(MEM_REMOVE,   98, mm_remove,  mp_key,     proto_void, ANY) \
	OP(MEM_EXISTS,   99, mm_exists,  mp_key,     mp_len, ANY) \
	OP(MEM_PIN,     100, mm_pin,     mp_pin,     proto_void, ANY) \
	OP(MEM_LIST,    101, mm_list,    mp_list,    mp_list_rep, ANY) \
	OP(MEM_MPUT,    102, mm_mput,    mp_mput,    mp_results, ANY) \
	OP(MEM_MGET,    103, mm_mget,    mp_mget,    mp_results, ANY) \
	OP(MEM_MREMOVE, 104, mm_mremove, mp_keys,    mp_results, ANY) \
	OP(MEM_MEXISTS, 105, mm_mexists, mp_keys,    mp_results, ANY) \
	OP(MEM_STATS,   106, mm_stats,   proto_void, mp_stats, ANY)
PROTO_OPS(mem, MEM_OPS)

/* Every op's number lies in the range net/proto.h gives mem. */
#define MP_IN_RANGE(NAME, num, fn, req, rep, access) \
	_Static_assert((num) >= OP_MEM_FIRST && (num) <= OP_MEM_LAST, \
		       #NAME " is outside the mem op range");
MEM_OPS(MP_IN_RANGE)

#endif
