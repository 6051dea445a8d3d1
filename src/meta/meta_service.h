/*
 * The meta service of stratad: the namespace (ns.h) over the store
 * meta.store names (an SQLite database at DATA/meta.db by default, or
 * PostgreSQL), served over RPC (proto/meta.h), and the GC worker that
 * removes the chunks of unlinked and truncated files.
 *
 * All namespace state is owned by reactor 0's thread: every request is
 * routed there, and the timers (chain table polling, GC) run there too.
 *
 * Config keys read from struct daemon_cfg:
 *   data            directory of meta.db
 *   meta.store      "" (SQLite) or a postgresql:// URI; another scheme is
 *                   refused by the config check, naming the key
 *   meta.store_passfile  PostgreSQL's password file, mode 0600 or stricter
 *   mgmt.address    where the storage client fetches the cluster map
 *   meta.chunk_size chunk size of the root directory of a new namespace
 *   meta.stripe     stripe width of the root directory of a new namespace
 *                   (16, the default, follows the chain table: min(T, 16))
 *   meta.gc_interval  pause between GC rounds when the queue is drained
 *   meta.group_commit  SQLite: the requests of one loop turn share one
 *                   transaction, answered after it commits
 *   rpc.timeout     timeout of one storage RPC issued by the GC
 *
 * Registry line for src/stratad/services.c:
 *   #include "meta/meta_service.h"   and   &meta_service,
 */
#ifndef STRATA_META_META_SERVICE_H
#define STRATA_META_META_SERVICE_H

#include "common/service.h"

extern const struct service_def meta_service;

#endif
