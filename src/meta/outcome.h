/*
 * The outcome of a namespace call made under a request id (ns.h,
 * ns_request), as its record in the store holds it (struct meta_req's
 * out, opaque to the store): a version byte, then the inode the call
 * answered and the truncation it reported, little-endian field by
 * field, so that every meta server sharing a database reads what
 * another wrote, whatever its build's struct layout.
 */
#ifndef STRATA_META_OUTCOME_H
#define STRATA_META_OUTCOME_H

#include "meta/meta_store.h"
#include "meta/ns.h"

/* Writes in and tr into r->out and sets r->len. */
void ns_outcome_encode(struct meta_req *r, const struct meta_inode *in,
		       const struct ns_trunc *tr);

/* Reads r's outcome into *in and *tr: 0, or -EIO (logged) for one this
 * build cannot read (another length or version). */
int ns_outcome_decode(const struct meta_req *r, struct meta_inode *in, struct ns_trunc *tr);

#endif
