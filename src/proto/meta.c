/* The meta service's messages (meta.h): their definitions, the rules that
 * span fields, and the conversions the client and the service share. */
#include <fcntl.h>

#include "net/frame.h"
#include "proto/meta.h"

/* A full page of the longest names, each with its inode, fits one body. */
_Static_assert(4 + (uint64_t)MD_READDIR_MAX * (4 + MD_NAME_MAX + mt_inode_MIN) + 4 +
	       MD_NAME_MAX + 1 <= FRAME_MAX_BODY, "a READDIRPLUS page overflows a frame body");

PROTO_MSG_DEFINE(mt_handle, MT_HANDLE_FIELDS)
PROTO_MSG_DEFINE(mt_layout, MT_LAYOUT_FIELDS)
PROTO_MSG_DEFINE(mt_inode, MT_INODE_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_trunc, MT_TRUNC_FIELDS)
PROTO_MSG_DEFINE(mt_reqid, MT_REQID_FIELDS)
PROTO_MSG_DEFINE(mt_name, MT_NAME_FIELDS)
PROTO_MSG_DEFINE(mt_unlink, MT_UNLINK_FIELDS)
PROTO_MSG_DEFINE(mt_ino, MT_INO_FIELDS)
PROTO_MSG_DEFINE(mt_create, MT_CREATE_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_open, MT_OPEN_FIELDS)
PROTO_MSG_DEFINE(mt_symlink, MT_SYMLINK_FIELDS)
PROTO_MSG_DEFINE(mt_link, MT_LINK_FIELDS)
PROTO_MSG_DEFINE(mt_rename, MT_RENAME_FIELDS)
PROTO_MSG_DEFINE(mt_setattr, MT_SETATTR_FIELDS)
PROTO_MSG_DEFINE(mt_set_size, MT_SET_SIZE_FIELDS)
PROTO_MSG_DEFINE(mt_truncate, MT_TRUNCATE_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_readdir, MT_READDIR_FIELDS)
PROTO_MSG_DEFINE(mt_set_layout, MT_SET_LAYOUT_FIELDS)
PROTO_MSG_DEFINE(mt_resolve, MT_RESOLVE_FIELDS)
PROTO_MSG_DEFINE(mt_create_path, MT_CREATE_PATH_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_open_path, MT_OPEN_PATH_FIELDS)
PROTO_MSG_DEFINE(mt_path_name, MT_PATH_NAME_FIELDS)
PROTO_MSG_DEFINE(mt_attr_rep, MT_ATTR_REP_FIELDS)
PROTO_MSG_DEFINE(mt_target, MT_TARGET_FIELDS)
PROTO_MSG_DEFINE(mt_statfs, MT_STATFS_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_dirent, MT_DIRENT_FIELDS)
PROTO_MSG_DEFINE(mt_readdir_rep, MT_READDIR_REP_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_direntplus, MT_DIRENTPLUS_FIELDS)
PROTO_MSG_DEFINE(mt_readdirplus_rep, MT_READDIRPLUS_REP_FIELDS)
PROTO_MSG_DEFINE(mt_quota_set, MT_QUOTA_SET_FIELDS)
PROTO_MSG_DEFINE(mt_quota_list, MT_QUOTA_LIST_FIELDS)
PROTO_MSG_DEFINE(mt_quota, MT_QUOTA_FIELDS)
PROTO_MSG_DEFINE(mt_quota_ent, MT_QUOTA_ENT_FIELDS)
PROTO_MSG_DEFINE(mt_quota_list_rep, MT_QUOTA_LIST_REP_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_open_rep, MT_OPEN_REP_FIELDS)
PROTO_MSG_DEFINE_CHECKED(mt_inline_set, MT_INLINE_SET_FIELDS)
PROTO_OPS_DEFINE(meta, META_OPS)

/* The chunks left to remove come before the end of the range. */
int mt_trunc_check(const struct mt_trunc *m)
{
	return m->gc_from > m->gc_to ? STRATA_EBADMSG : 0;
}

/* Access mode 3 means nothing. */
int mt_open_check(const struct mt_open *m)
{
	return (m->flags & MD_O_ACCMODE) == MD_O_ACCMODE ? STRATA_EBADMSG : 0;
}

int mt_open_path_check(const struct mt_open_path *m)
{
	return (m->flags & MD_O_ACCMODE) == MD_O_ACCMODE ? STRATA_EBADMSG : 0;
}

/* Bytes only with an inline file, and then exactly its size. */
int mt_open_rep_check(const struct mt_open_rep *m)
{
	if (!m->inl)
		return m->data.len ? STRATA_EBADMSG : 0;
	return m->data.len == 0 || m->data.len != m->attr.inode.size ? STRATA_EBADMSG : 0;
}

/* One of PUBLISH (with its len bytes; crc only with GUARD) or CONVERT
 * (no bytes). */
int mt_inline_set_check(const struct mt_inline_set *m)
{
	if (m->flags == (MD_INL_PUBLISH | MD_INL_GUARD))
		return m->data.len == m->len ? 0 : STRATA_EBADMSG;
	if (m->flags == MD_INL_PUBLISH)
		return m->data.len == m->len && m->crc == 0 ? 0 : STRATA_EBADMSG;
	if (m->flags == MD_INL_CONVERT)
		return m->data.len == 0 && m->len ? 0 : STRATA_EBADMSG;
	return STRATA_EBADMSG;
}

/* A listing asks for at least one entry. */
int mt_readdir_check(const struct mt_readdir *m)
{
	return m->max == 0 ? STRATA_EBADMSG : 0;
}

/* "" is no name (the cookie of an empty listing is, not an entry's). */
int mt_dirent_check(const struct mt_dirent *m)
{
	return m->name.len == 0 ? STRATA_EBADMSG : 0;
}

int mt_direntplus_check(const struct mt_direntplus *m)
{
	return m->name.len == 0 ? STRATA_EBADMSG : 0;
}

uint32_t md_open_flags_to_wire(int flags)
{
	uint32_t w;

	switch (flags & O_ACCMODE) {
	case O_WRONLY:
		w = MD_O_WRONLY;
		break;
	case O_RDWR:
		w = MD_O_RDWR;
		break;
	default:
		w = MD_O_RDONLY;
		break;
	}
	if (flags & O_TRUNC)
		w |= MD_O_TRUNC;
	return w;
}

int md_open_flags_from_wire(uint32_t flags)
{
	int f;

	switch (flags & MD_O_ACCMODE) {
	case MD_O_WRONLY:
		f = O_WRONLY;
		break;
	case MD_O_RDWR:
		f = O_RDWR;
		break;
	default:
		f = O_RDONLY;
		break;
	}
	if (flags & MD_O_TRUNC)
		f |= O_TRUNC;
	return f;
}

void mt_layout_set(struct mt_layout *w, const struct file_layout *l)
{
	w->chunk_size = l->chunk_size;
	w->stripe = l->stripe;
	w->table_len = l->table_len;
	w->seed = l->seed;
}

void mt_layout_get(const struct mt_layout *w, struct file_layout *l)
{
	l->chunk_size = w->chunk_size;
	l->stripe = w->stripe;
	l->table_len = w->table_len;
	l->seed = w->seed;
}
