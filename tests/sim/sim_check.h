/*
 * The checker of the simulation (sim_check.c): the history of the
 * clients' operations on each chunk, checked as a register with versions,
 * and the violations a run found.
 *
 * Data is self-describing: every 8-byte word a client writes holds the
 * operation's id (low 32 bits) and the word's index in the chunk plus one
 * (high 32 bits), so a read tells which write produced each word, and a
 * zero word is a gap or an extension.
 *
 * What is known is kept per chunk and word as a "fact": at version v the
 * word held value x (an operation's id, zero, or absent past the end).
 * An acknowledged write gives facts for its words (and absent words past
 * the length it reported); an acknowledged truncate for the words past
 * its length; a read for every word. A read is checked against the facts
 * established before it was invoked:
 *  1. durability: its version is not below an acknowledged update's;
 *  2. monotonic reads: nor below an earlier read's;
 *  3. each word is the fact's value, or one that an operation possibly
 *     applied at a version in (fact's version, read's version] can have
 *     produced. An operation acknowledged once, without retries or a
 *     duplicated request, was applied exactly at its version; any other
 *     (failed, retried, duplicated, pending) may have been applied at any
 *     version, any time after it was invoked. So a failed write may stay
 *     invisible, but once read it stays (or something newer replaces it);
 *  4. a read and a fact of the same version agree (same version, same
 *     bytes: what replicas must keep, seen by a client).
 * A removal starts a new lifetime of the chunk (versions start again at
 * 1): facts are dropped when one is invoked, operations that overlap one
 * are not checked, and a removal that may still apply later (it failed
 * or was retried) ends the checks of that chunk for the run.
 *  5. no operation takes longer than its retry budget plus one RPC
 *     timeout and a margin.
 * Replica agreement between stores is checked by sim_chain.c, which sees
 * them (chk_violation()).
 */
#ifndef STRATA_TESTS_SIM_CHECK_H
#define STRATA_TESTS_SIM_CHECK_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum chk_kind { CHK_WRITE = 1, CHK_TRUNCATE, CHK_REMOVE, CHK_READ };

enum chk_prop {
	CHK_DURABILITY = 0,	/* 1: an acknowledged update went missing */
	CHK_MONOTONIC,		/* 2: a read went back */
	CHK_CONTENT,		/* 3: bytes no allowed operation can explain */
	CHK_AGREEMENT,		/* 4: same version, different bytes */
	CHK_FINAL,		/* 4: serving replicas differ after settling */
	CHK_HANG,		/* 5: an operation outlived its budget */
	CHK_CORRUPT,		/* a word in the wrong place */
	CHK_NPROPS,
};

struct chk_cfg {
	uint32_t nchunks;
	uint32_t chunk_cap;		/* bytes a chunk can hold in this workload */
	uint64_t budget_us;		/* an operation's longest allowed life */
};

void chk_reset(const struct chk_cfg *cfg);
void chk_release(void);

/* An operation starts. wid: a write's id (its words carry it). Returns
 * the operation's handle. */
uint32_t chk_invoke(uint32_t client, enum chk_kind kind, uint32_t chunk, uint32_t off,
		    uint32_t len);
/* The network delivered op's request twice: it may apply twice. */
void chk_mark_unsure(uint32_t op);
/* op completed. attempts: tries beyond the first; data/nread: a read's
 * bytes. */
void chk_complete(uint32_t op, int status, uint64_t version, uint32_t length, uint32_t attempts,
		  const uint8_t *data, uint32_t nread);
/* The replica that answered read op (for messages). */
void chk_served_by(uint32_t op, uint32_t target);
/* The id a write's words carry. */
uint32_t chk_wid(uint32_t op);
/* Fills buf (len bytes at chunk offset off) with op's self-describing
 * words. */
void chk_fill(uint32_t op, uint8_t *buf, uint32_t off, uint32_t len);
/* Operations invoked and not completed. */
uint32_t chk_open_ops(void);
/* Fails every operation older than its budget at now_us (end of run). */
void chk_hangs(uint64_t now_us);

/* Records a violation of prop (message formatted). */
void chk_violation(enum chk_prop prop, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
uint32_t chk_count(enum chk_prop prop);
uint32_t chk_total(void);
const char *chk_prop_name(enum chk_prop prop);
/* Prints the first recorded messages to out. */
void chk_print(FILE *out, uint32_t max);
/* The first message, or "". */
const char *chk_first_msg(void);
/* The first violation's property, or CHK_NPROPS. */
enum chk_prop chk_first(void);

#endif
