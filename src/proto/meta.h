/*
 * The meta service's operations (src/proto/proto.h explains the tables;
 * docs/namespace.md what each operation does to the namespace).
 *
 * Every request names inodes by handle (struct mt_handle: number and
 * generation). A handle whose generation is not the inode's, or whose
 * inode is gone, fails with -ESTALE; generation 0 takes whatever inode has
 * the number (-ENOENT when none). The reply's status is 0 or the negative
 * error of the namespace call (meta/ns.h: -ENOENT, -EEXIST, ...), or
 * STRATA_EBADMSG for a request that does not decode; a reply with a
 * non-zero status has an empty body.
 *
 * Request ids. The requests of the operations that are not idempotent
 * (MT_WITH_RID below) end with rid, a struct mt_reqid: (client, seq).
 * The service records the outcome of each with an id in the transaction
 * that applies it, and answers a request whose id it has recorded (a
 * client's retry after a lost reply or a dead server) with that outcome
 * without applying it again (docs/namespace.md, "Request ids"). Every
 * other operation reads, or may be applied twice with one effect.
 *
 *   LOOKUP     dir, name ("." and ".." too)     -> the entry's inode
 *   GETATTR    inode                            -> inode
 *   CREATE     dir, name, mode, uid, gid, MD_CREATE_* -> attr_rep: created
 *              1, or 0 when it returns an existing file
 *   OPEN       inode, MD_O_*                    -> attr_rep (created 0)
 *   MKDIR      as CREATE, flags 0 (else -EINVAL) -> inode
 *   SYMLINK    dir, name, target, uid, gid      -> inode
 *   MKNOD      as CREATE, mode's type S_IFIFO or S_IFSOCK, flags 0 (else
 *              -EINVAL; a device, S_IFCHR or S_IFBLK, -EPERM) -> inode
 *   LINK       inode, dir, name                 -> inode: a new name for
 *              a non-directory (-EPERM for a directory, -EXDEV across
 *              quota roots, -EMLINK)
 *   READLINK   inode                            -> target
 *   UNLINK, RMDIR   dir, name                   -> (empty)
 *   RENAME     src dir and name, dst dir and name, MD_RENAME_* -> (empty)
 *   SETATTR    inode, MD_ATTR_* mask, the values -> attr_rep (created 0)
 *   SET_SIZE   inode, size, mtime_ns (0 keeps it) -> inode: the length a
 *              writer publishes at close/fsync; it only grows
 *   TRUNCATE   inode, size                      -> attr_rep (created 0)
 *   READDIR    dir, cookie, max (1..MD_READDIR_MAX) -> entries after the
 *              cookie (name, ino, type), the next cookie, eof
 *   READDIRPLUS  as READDIR                     -> the entries with their
 *              inodes (so their handles), read with the listing
 *   SET_LAYOUT dir, layout                      -> (empty)
 *   GET_LAYOUT inode                            -> layout (a directory's
 *              resolved against the current chain table)
 *   STATFS     (empty)                          -> inodes, bytes, table_len
 *   RESOLVE    absolute path, MD_RESOLVE_*      -> inode
 *   QUOTA_SET  dir, byte and inode limits (0: none; both 0 removes the
 *              quota) -> the quota. Admin only. -ENOTDIR.
 *   QUOTA_GET  dir                              -> its quota (limits and
 *              usage); -ENODATA when it has none
 *   QUOTA_LIST after (an inode number, 0: from the start), max
 *              (1..MD_QUOTA_LIST_MAX) -> the quota roots numbered above
 *              it, in inode order, each with its path; eof. Admin only:
 *              the paths name every tenant's roots.
 *
 * Compound operations by path: one round trip where a client would
 * RESOLVE a directory (or the file) first. The path is resolved as
 * RESOLVE does (absolute, symlinks followed, search permission checked on
 * every directory walked), in a transaction of its own; the operation
 * then runs on the inode found, by number and generation, exactly as its
 * handle form does (an inode removed in between: -ESTALE).
 *   CREATE_PATH  dir path, name, mode, uid, gid, MD_CREATE_* -> as CREATE
 *   OPEN_PATH    path, MD_O_*                    -> as OPEN
 *   UNLINK_PATH  dir path, name                  -> as UNLINK
 *
 * Inline data (docs/namespace.md, "Inline data"): a small regular file
 * may hold its whole content in the meta store, no chunks; its size is
 * the length of those bytes. Only clients that use the *_INL operations
 * below see them; the older operations refuse an inline file where a
 * client would read or grow it (see INLINE_SET).
 *   OPEN_INL, OPEN_PATH_INL, CREATE_INL, CREATE_PATH_INL  as OPEN,
 *              OPEN_PATH, CREATE, CREATE_PATH -> open_rep: their attr_rep,
 *              the service's meta.inline_max (0: off) and, when the file
 *              is inline (after any truncation), its bytes
 *   INLINE_SET inode, MD_INL_PUBLISH, mtime_ns, len, data -> inode: data
 *              (len bytes, at most meta.inline_max) becomes the whole
 *              content, inline, in one transaction (a writer's close or
 *              fsync); only for an inline or empty file (-ENOTEMPTY for a
 *              chunked one: write chunks instead); -EDQUOT as SET_SIZE;
 *              -EFBIG above meta.inline_max (-EOPNOTSUPP when it is 0)
 *              inode, MD_INL_PUBLISH | MD_INL_GUARD, ..., crc -> as
 *              PUBLISH, only if the file's content is still the one the
 *              caller last saw: crc is CRC32C of those bytes (0: empty);
 *              -EAGAIN if it changed (another handle published: the
 *              caller merges and publishes again). An older service
 *              refuses the flag (STRATA_EBADMSG): the caller publishes unguarded
 *              inode, MD_INL_CONVERT, len, crc (CRC32C) -> inode: the
 *              caller wrote the file's inline bytes (len of them, crc) as
 *              chunk 0; the bytes are dropped if still those (-EAGAIN if
 *              they changed: open again), nothing if the file is no
 *              longer inline. The file is then a chunked file.
 * OPEN, OPEN_PATH, CREATE and CREATE_PATH of an inline file by a client
 * that did not use the *_INL form fail with -EMEDIUMTYPE (the bytes
 * would read as zeros there), unless they truncate it; so do TRUNCATE
 * and SETATTR growing an inline file above MD_INLINE_MAX: the caller
 * converts it first. SET_SIZE of an inline file fails -EMEDIUMTYPE and
 * changes nothing (a writer of chunks closing after another handle
 * published the file inline: it merges those bytes with its own as
 * chunks, INLINE_SET(CONVERT), and sends SET_SIZE again).
 *
 * Quotas (docs/namespace.md, "Quotas"): CREATE, MKDIR, SYMLINK, RENAME,
 * SET_SIZE, TRUNCATE and SETATTR with MD_ATTR_SIZE fail with -EDQUOT,
 * changing nothing, when they would take a quota root's usage above its
 * limit (a writer learns it from the SET_SIZE of its close/fsync).
 *
 * Truncation. A reply carrying a trunc (CREATE with MD_CREATE_TRUNC of an
 * existing file, OPEN with MD_O_TRUNC, SETATTR with MD_ATTR_SIZE,
 * TRUNCATE) tells the CLIENT what is left for it to do: when
 * trunc.partial is set, chunk trunc.chunk straddles the new size and the
 * client must cut it to trunc.len bytes (an SC_TRUNCATE to chain
 * layout_chain_index(layout, trunc.chunk)) before it reports success to
 * its caller. Whole chunks beyond the new size [gc_from, gc_to) are
 * removed by the service: it replies only after every queued removal of
 * that file is done, so the file can grow again at once. If a removal
 * fails, the reply is STRATA_EUNAVAIL although the new size is recorded;
 * repeating the call (same size) is safe and retries the removals. OPEN
 * for writing and CREATE of an existing file also wait for leftover
 * removals of the file (docs/namespace.md, "Known hazard").
 */
#ifndef STRATA_PROTO_META_H
#define STRATA_PROTO_META_H

#include "common/layout.h"
#include "net/proto.h"
#include "proto/proto.h"
#include "proto/storage.h"

#define MD_ROOT_INO 1		/* the root directory's handle */
#define MD_ROOT_GEN 1
#define MD_NAME_MAX 255		/* a name or a readdir cookie */
#define MD_PATH_MAX 4096	/* a path to RESOLVE */
#define MD_TARGET_MAX 4096	/* a symlink's target */
#define MD_READDIR_MAX 1024	/* entries in one READDIR(PLUS) reply */
#define MD_QUOTA_LIST_MAX 64	/* quota roots in one QUOTA_LIST reply */
#define MD_INLINE_MAX (64u * 1024u)	/* inline bytes of a file: meta_store.h's */

/* INLINE_SET flags: PUBLISH (GUARD optional) or CONVERT. */
#define MD_INL_PUBLISH (1u << 0)	/* data becomes the content */
#define MD_INL_CONVERT (1u << 1)	/* the bytes were written as chunk 0 */
#define MD_INL_GUARD (1u << 2)	/* PUBLISH only if crc is the content's */
#define MD_INL_KNOWN (MD_INL_PUBLISH | MD_INL_CONVERT | MD_INL_GUARD)

/* CREATE flags. */
#define MD_CREATE_EXCL (1u << 0)	/* -EEXIST if the name exists */
#define MD_CREATE_TRUNC (1u << 1)	/* truncate an existing file to 0 */
#define MD_CREATE_KNOWN (MD_CREATE_EXCL | MD_CREATE_TRUNC)

/* OPEN flags: wire values, independent of the platform's O_* values.
 * Access mode 3 is refused. */
#define MD_O_RDONLY 0u
#define MD_O_WRONLY 1u
#define MD_O_RDWR 2u
#define MD_O_ACCMODE 3u
#define MD_O_TRUNC (1u << 4)
#define MD_O_KNOWN (MD_O_ACCMODE | MD_O_TRUNC)

/* RENAME flags (Linux renameat2's meaning; not both). */
#define MD_RENAME_NOREPLACE (1u << 0)
#define MD_RENAME_EXCHANGE (1u << 1)
#define MD_RENAME_KNOWN (MD_RENAME_NOREPLACE | MD_RENAME_EXCHANGE)

/* SETATTR mask: which values of the request apply. */
#define MD_ATTR_MODE (1u << 0)		/* permission bits (07777) */
#define MD_ATTR_UID (1u << 1)
#define MD_ATTR_GID (1u << 2)
#define MD_ATTR_ATIME (1u << 3)
#define MD_ATTR_MTIME (1u << 4)
#define MD_ATTR_SIZE (1u << 5)		/* a truncate */
#define MD_ATTR_ATIME_NOW (1u << 6)
#define MD_ATTR_MTIME_NOW (1u << 7)
#define MD_ATTR_KNOWN 0xffu

/* RESOLVE flags. */
#define MD_RESOLVE_FOLLOW (1u << 0)	/* follow a symlink in the last component */
#define MD_RESOLVE_KNOWN MD_RESOLVE_FOLLOW

/* Converts open(2) flags (O_ACCMODE, O_TRUNC; others ignored) to MD_O_*
 * and back. */
uint32_t md_open_flags_to_wire(int flags);
int md_open_flags_from_wire(uint32_t flags);

/* ---- pieces ---- */

/* An inode by identity; gen 0: any generation. */
#define MT_HANDLE_FIELDS(X) \
	X(U64, ino) \
	X(U64, gen)
PROTO_MSG(mt_handle, MT_HANDLE_FIELDS)

#define MT_LAYOUT_FIELDS(X) \
	X(U32, chunk_size) \
	X(U32, stripe) \
	X(U32, table_len) \
	X(U64, seed)
PROTO_MSG(mt_layout, MT_LAYOUT_FIELDS)

/* A request id (docs/namespace.md, "Request ids"): the caller's client
 * id, random per libstrata handle, and the sequence number of the call,
 * the same on every retry of it. client 0: no id (the call is applied
 * every time it arrives). Carried, as the last field, by the requests
 * that are not idempotent: CREATE, MKDIR, MKNOD, SYMLINK, LINK, UNLINK,
 * RMDIR, RENAME, SETATTR, TRUNCATE, CREATE_PATH, UNLINK_PATH. */
#define MT_REQID_FIELDS(X) \
	X(U64, client) \
	X(U64, seq)
PROTO_MSG(mt_reqid, MT_REQID_FIELDS)

/* The layout to and from its wire form. */
void mt_layout_set(struct mt_layout *w, const struct file_layout *l);
void mt_layout_get(const struct mt_layout *w, struct file_layout *l);

/* An inode: mode holds the type bits; parent is the directory holding
 * its entry (the root's is itself). */
#define MT_INODE_FIELDS(X) \
	X(U64, ino) \
	X(U64, gen) \
	X(U32, mode) \
	X(U32, uid) \
	X(U32, gid) \
	X(U32, nlink) \
	X(U64, size) \
	X(I64, atime_ns) \
	X(I64, mtime_ns) \
	X(I64, ctime_ns) \
	X(U64, parent) \
	X(OBJ, layout, mt_layout)
PROTO_MSG(mt_inode, MT_INODE_FIELDS)

/* What a truncation left to the client (see the top of this file): all
 * zeros but the file's layout when nothing was cut. */
#define MT_TRUNC_FIELDS(X) \
	X(U8R, partial, 1) \
	X(U64, chunk) \
	X(U32, len) \
	X(U64, gc_from) \
	X(U64, gc_to) \
	X(OBJ, layout, mt_layout)
PROTO_MSG_CHECKED(mt_trunc, MT_TRUNC_FIELDS)

/* ---- requests ---- */

/* LOOKUP. */
#define MT_NAME_FIELDS(X) \
	X(OBJ, dir, mt_handle) \
	X(STR, name, MD_NAME_MAX)
PROTO_MSG(mt_name, MT_NAME_FIELDS)

/* UNLINK, RMDIR. */
#define MT_UNLINK_FIELDS(X) \
	X(OBJ, dir, mt_handle) \
	X(STR, name, MD_NAME_MAX) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_unlink, MT_UNLINK_FIELDS)

/* GETATTR, READLINK, GET_LAYOUT. */
#define MT_INO_FIELDS(X) \
	X(OBJ, h, mt_handle)
PROTO_MSG(mt_ino, MT_INO_FIELDS)

/* CREATE, MKDIR. */
#define MT_CREATE_FIELDS(X) \
	X(OBJ, dir, mt_handle) \
	X(STR, name, MD_NAME_MAX) \
	X(U32, mode) \
	X(U32, uid) \
	X(U32, gid) \
	X(FLAGS, flags, MD_CREATE_KNOWN) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_create, MT_CREATE_FIELDS)

#define MT_OPEN_FIELDS(X) \
	X(OBJ, h, mt_handle) \
	X(FLAGS, flags, MD_O_KNOWN)
PROTO_MSG_CHECKED(mt_open, MT_OPEN_FIELDS)

#define MT_SYMLINK_FIELDS(X) \
	X(OBJ, dir, mt_handle) \
	X(STR, name, MD_NAME_MAX) \
	X(STR, target, MD_TARGET_MAX) \
	X(U32, uid) \
	X(U32, gid) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_symlink, MT_SYMLINK_FIELDS)

#define MT_LINK_FIELDS(X) \
	X(OBJ, h, mt_handle) \
	X(OBJ, dir, mt_handle) \
	X(STR, name, MD_NAME_MAX) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_link, MT_LINK_FIELDS)

#define MT_RENAME_FIELDS(X) \
	X(OBJ, src_dir, mt_handle) \
	X(STR, src_name, MD_NAME_MAX) \
	X(OBJ, dst_dir, mt_handle) \
	X(STR, dst_name, MD_NAME_MAX) \
	X(FLAGS, flags, MD_RENAME_KNOWN) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_rename, MT_RENAME_FIELDS)

/* Only the values mask names are applied. */
#define MT_SETATTR_FIELDS(X) \
	X(OBJ, h, mt_handle) \
	X(FLAGS, mask, MD_ATTR_KNOWN) \
	X(U32, mode) \
	X(U32, uid) \
	X(U32, gid) \
	X(I64, atime_ns) \
	X(I64, mtime_ns) \
	X(U64, size) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_setattr, MT_SETATTR_FIELDS)

#define MT_SET_SIZE_FIELDS(X) \
	X(OBJ, h, mt_handle) \
	X(U64, size) \
	X(I64, mtime_ns)
PROTO_MSG(mt_set_size, MT_SET_SIZE_FIELDS)

#define MT_TRUNCATE_FIELDS(X) \
	X(OBJ, h, mt_handle) \
	X(U64, size) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_truncate, MT_TRUNCATE_FIELDS)

/* READDIR, READDIRPLUS: entries whose names sort after cookie ("": from
 * the start), at most max (1..MD_READDIR_MAX). */
#define MT_READDIR_FIELDS(X) \
	X(OBJ, dir, mt_handle) \
	X(STR, cookie, MD_NAME_MAX) \
	X(U32R, max, MD_READDIR_MAX)
PROTO_MSG_CHECKED(mt_readdir, MT_READDIR_FIELDS)

#define MT_SET_LAYOUT_FIELDS(X) \
	X(OBJ, dir, mt_handle) \
	X(OBJ, layout, mt_layout)
PROTO_MSG(mt_set_layout, MT_SET_LAYOUT_FIELDS)

#define MT_RESOLVE_FIELDS(X) \
	X(STR, path, MD_PATH_MAX) \
	X(FLAGS, flags, MD_RESOLVE_KNOWN)
PROTO_MSG(mt_resolve, MT_RESOLVE_FIELDS)

/* QUOTA_SET. */
#define MT_QUOTA_SET_FIELDS(X) \
	X(OBJ, dir, mt_handle) \
	X(U64, max_bytes) \
	X(U64, max_inodes)
PROTO_MSG(mt_quota_set, MT_QUOTA_SET_FIELDS)

#define MT_QUOTA_LIST_FIELDS(X) \
	X(U64, after) \
	X(U32R, max, MD_QUOTA_LIST_MAX)
PROTO_MSG(mt_quota_list, MT_QUOTA_LIST_FIELDS)

/* CREATE_PATH: CREATE with the directory named by path. */
#define MT_CREATE_PATH_FIELDS(X) \
	X(STR, dir, MD_PATH_MAX) \
	X(STR, name, MD_NAME_MAX) \
	X(U32, mode) \
	X(U32, uid) \
	X(U32, gid) \
	X(FLAGS, flags, MD_CREATE_KNOWN) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_create_path, MT_CREATE_PATH_FIELDS)

/* OPEN_PATH. */
#define MT_OPEN_PATH_FIELDS(X) \
	X(STR, path, MD_PATH_MAX) \
	X(FLAGS, flags, MD_O_KNOWN)
PROTO_MSG_CHECKED(mt_open_path, MT_OPEN_PATH_FIELDS)

/* UNLINK_PATH. */
#define MT_PATH_NAME_FIELDS(X) \
	X(STR, dir, MD_PATH_MAX) \
	X(STR, name, MD_NAME_MAX) \
	X(OBJ, rid, mt_reqid)
PROTO_MSG(mt_path_name, MT_PATH_NAME_FIELDS)

/* ---- replies ---- */

/* CREATE, OPEN, SETATTR, TRUNCATE. cap: the chunk capability of the file
 * (proto/storage.h), zeros when meta has no cluster key or nothing was
 * opened (a SETATTR without a size): OPEN grants the access mode's
 * rights, CREATE write (and read when the caller may read the file), a
 * truncation write, so the client can cut the partial chunk. */
#define MT_ATTR_REP_FIELDS(X) \
	X(U8R, created, 1) \
	X(OBJ, inode, mt_inode) \
	X(OBJ, trunc, mt_trunc) \
	X(OBJ, cap, sp_cap)
PROTO_MSG(mt_attr_rep, MT_ATTR_REP_FIELDS)

/* OPEN_INL, OPEN_PATH_INL, CREATE_INL, CREATE_PATH_INL. inline_max: the
 * most bytes INLINE_SET takes now (0: off); inl: the file is inline and
 * data holds its size bytes (else data is empty). */
#define MT_OPEN_REP_FIELDS(X) \
	X(OBJ, attr, mt_attr_rep) \
	X(U32R, inline_max, MD_INLINE_MAX) \
	X(U8R, inl, 1) \
	X(BYTES, data, MD_INLINE_MAX)
PROTO_MSG_CHECKED(mt_open_rep, MT_OPEN_REP_FIELDS)

/* INLINE_SET. PUBLISH: data holds len bytes, crc 0 (with GUARD: the
 * CRC32C of the content the caller last saw); CONVERT: data is empty,
 * len and crc describe the bytes written. */
#define MT_INLINE_SET_FIELDS(X) \
	X(OBJ, h, mt_handle) \
	X(FLAGS, flags, MD_INL_KNOWN) \
	X(I64, mtime_ns) \
	X(U32R, len, MD_INLINE_MAX) \
	X(U32, crc) \
	X(BYTES, data, MD_INLINE_MAX)
PROTO_MSG_CHECKED(mt_inline_set, MT_INLINE_SET_FIELDS)

/* READLINK. */
#define MT_TARGET_FIELDS(X) \
	X(STR, target, MD_TARGET_MAX)
PROTO_MSG(mt_target, MT_TARGET_FIELDS)

#define MT_STATFS_FIELDS(X) \
	X(U64, inodes) \
	X(U64, bytes) \
	X(U32, table_len)
PROTO_MSG(mt_statfs, MT_STATFS_FIELDS)

/* type: the S_IFMT bits of the entry's inode. Names are never empty. */
#define MT_DIRENT_FIELDS(X) \
	X(STR, name, MD_NAME_MAX) \
	X(U64, ino) \
	X(U32, type)
PROTO_MSG_CHECKED(mt_dirent, MT_DIRENT_FIELDS)

/* next_cookie: the name of the last entry (the request's cookie when
 * there is none); eof: the directory has nothing after it. */
#define MT_READDIR_REP_FIELDS(X) \
	X(ARR, ents, mt_dirent, MD_READDIR_MAX) \
	X(STR, next_cookie, MD_NAME_MAX) \
	X(U8R, eof, 1)
PROTO_MSG(mt_readdir_rep, MT_READDIR_REP_FIELDS)

/* An entry with its inode: a page of 1024 with the longest names is
 * about 360 KiB. */
#define MT_DIRENTPLUS_FIELDS(X) \
	X(STR, name, MD_NAME_MAX) \
	X(OBJ, inode, mt_inode)
PROTO_MSG_CHECKED(mt_direntplus, MT_DIRENTPLUS_FIELDS)

#define MT_READDIRPLUS_REP_FIELDS(X) \
	X(ARR, ents, mt_direntplus, MD_READDIR_MAX) \
	X(STR, next_cookie, MD_NAME_MAX) \
	X(U8R, eof, 1)
PROTO_MSG(mt_readdirplus_rep, MT_READDIRPLUS_REP_FIELDS)

/* A quota on directory ino: limits (0: none) and the usage of the tree
 * below it (bytes of regular files; inodes, the directory not counted). */
#define MT_QUOTA_FIELDS(X) \
	X(U64, ino) \
	X(U64, max_bytes) \
	X(U64, max_inodes) \
	X(U64, bytes) \
	X(U64, inodes)
PROTO_MSG(mt_quota, MT_QUOTA_FIELDS)

/* A page of QUOTA_LIST: about 260 KiB at most (64 paths of 4 KiB). */
#define MT_QUOTA_ENT_FIELDS(X) \
	X(OBJ, quota, mt_quota) \
	X(STR, path, MD_PATH_MAX)
PROTO_MSG(mt_quota_ent, MT_QUOTA_ENT_FIELDS)

#define MT_QUOTA_LIST_REP_FIELDS(X) \
	X(ARR, ents, mt_quota_ent, MD_QUOTA_LIST_MAX) \
	X(U8R, eof, 1)
PROTO_MSG(mt_quota_list_rep, MT_QUOTA_LIST_REP_FIELDS)

/* The request messages that carry a request id (rid), for callers that
 * stamp one on every call of them (client/meta_client.h). */
#define MT_WITH_RID(X) \
	X(mt_create) \
	X(mt_symlink) \
	X(mt_link) \
	X(mt_unlink) \
	X(mt_rename) \
	X(mt_setattr) \
	X(mt_truncate) \
	X(mt_create_path) \
	X(mt_path_name)

/* Stubs are named md_<op>: md_lookup_call_sync(), md_create_req(), ... */
#define META_OPS(OP) \
	OP(META_LOOKUP,      64, md_lookup,      mt_name,       mt_inode, ANY) \
	OP(META_GETATTR,     65, md_getattr,     mt_ino,        mt_inode, ANY) \
	OP(META_CREATE,      66, md_create,      mt_create,     mt_attr_rep, ANY) \
	OP(META_OPEN,        67, md_open,        mt_open,       mt_attr_rep, ANY) \
	OP(META_MKDIR,       68, md_mkdir,       mt_create,     mt_inode, ANY) \
	OP(META_SYMLINK,     69, md_symlink,     mt_symlink,    mt_inode, ANY) \
	OP(META_READLINK,    70, md_readlink,    mt_ino,        mt_target, ANY) \
	OP(META_UNLINK,      71, md_unlink,      mt_unlink,     proto_void, ANY) \
	OP(META_RMDIR,       72, md_rmdir,       mt_unlink,     proto_void, ANY) \
	OP(META_RENAME,      73, md_rename,      mt_rename,     proto_void, ANY) \
	OP(META_SETATTR,     74, md_setattr,     mt_setattr,    mt_attr_rep, ANY) \
	OP(META_SET_SIZE,    75, md_set_size,    mt_set_size,   mt_inode, ANY) \
	OP(META_TRUNCATE,    76, md_truncate,    mt_truncate,   mt_attr_rep, ANY) \
	OP(META_READDIR,     77, md_readdir,     mt_readdir,    mt_readdir_rep, ANY) \
	OP(META_SET_LAYOUT,  78, md_set_layout,  mt_set_layout, proto_void, ANY) \
	OP(META_GET_LAYOUT,  79, md_get_layout,  mt_ino,        mt_layout, ANY) \
	OP(META_STATFS,      80, md_statfs,      proto_void,    mt_statfs, ANY) \
	OP(META_RESOLVE,     81, md_resolve,     mt_resolve,    mt_inode, ANY) \
	OP(META_READDIRPLUS, 82, md_readdirplus, mt_readdir,    mt_readdirplus_rep, ANY) \
	OP(META_QUOTA_SET,   83, md_quota_set,   mt_quota_set,  mt_quota, ADMIN) \
	OP(META_QUOTA_GET,   84, md_quota_get,   mt_ino,        mt_quota, ANY) \
	OP(META_QUOTA_LIST,  85, md_quota_list,  mt_quota_list, mt_quota_list_rep, ADMIN) \
	OP(META_MKNOD,       86, md_mknod,       mt_create,     mt_inode, ANY) \
	OP(META_LINK,        87, md_link,        mt_link,       mt_inode, ANY) \
	OP(META_CREATE_PATH, 88, md_create_path, mt_create_path, mt_attr_rep, ANY) \
	OP(META_OPEN_PATH,   89, md_open_path,   mt_open_path,  mt_attr_rep, ANY) \
	OP(META_UNLINK_PATH, 90, md_unlink_path, mt_path_name,  proto_void, ANY) \
	OP(META_OPEN_INL,    91, md_open_inl,    mt_open,       mt_open_rep, ANY) \
	OP(META_OPEN_PATH_INL, 92, md_open_path_inl, mt_open_path, mt_open_rep, ANY) \
	OP(META_CREATE_INL,  93, md_create_inl,  mt_create,     mt_open_rep, ANY) \
	OP(META_CREATE_PATH_INL, 94, md_create_path_inl, mt_create_path, mt_open_rep, ANY) \
	OP(META_INLINE_SET,  95, md_inline_set,  mt_inline_set, mt_inode, ANY)
PROTO_OPS(meta, META_OPS)

/* Every op's number lies in the range net/proto.h gives meta. */
#define MD_IN_RANGE(NAME, num, fn, req, rep, access) \
	_Static_assert((num) >= OP_META_FIRST && (num) <= OP_META_LAST, \
		       #NAME " is outside the meta op range");
META_OPS(MD_IN_RANGE)

#endif
