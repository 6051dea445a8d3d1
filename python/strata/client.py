"""The file API of libstrata for Python: Client, File, Ring.

A Client is one connection to a cluster. It is safe to share between
threads (libstrata is thread-safe and ctypes releases the GIL during every
call), and safe across fork: a child process (a DataLoader worker) that
uses a Client made by its parent gets a fresh connection of its own on its
first call; the parent's connection is never touched from the child.

Buffers: readinto, pread_into and the batch calls take any writable
C-contiguous buffer -- bytearray, memoryview, array.array, numpy arrays,
CPU torch tensors -- and libstrata reads straight into its memory (no
intermediate copy). write takes bytes-like objects, numpy arrays and CPU
tensors the same way.

Files follow open(): Client.open returns a BufferedReader, BufferedWriter
or BufferedRandom (a buffer of the file's chunk size by default), a
TextIOWrapper in text mode, or the raw File with buffering=0.

Paths follow os: str, bytes or os.PathLike, encoded with os.fsencode; a
directory listed with a bytes path gives bytes names, with a str path str
names decoded with os.fsdecode (undecodable bytes as surrogates), so every
name listed can be opened again.

Errors are OSError subclasses with the path in the message:
FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
PermissionError, or OSError with .errno (ENOTEMPTY, ENOSPC, ...).
"""
from __future__ import annotations

import ctypes
import errno
import io
import os
import stat as _stat
import sys
import threading
import warnings
from typing import Any, Dict, Iterable, List, Optional, Tuple, Union

from ._lib import Closable, check, declare, strerror

# A path as os takes one.
StrPath = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

c_int, c_uint, c_u32, c_u64, c_i64 = (ctypes.c_int, ctypes.c_uint, ctypes.c_uint32,
                                       ctypes.c_uint64, ctypes.c_int64)
c_ssize, c_size, c_void_p, c_char_p = (ctypes.c_ssize_t, ctypes.c_size_t, ctypes.c_void_p,
                                       ctypes.c_char_p)

O_RDONLY, O_WRONLY, O_RDWR = 0x0, 0x1, 0x2
O_CREAT, O_EXCL, O_TRUNC, O_APPEND = 0x40, 0x80, 0x200, 0x400
RENAME_NOREPLACE, RENAME_EXCHANGE = 0x1, 0x2


class _Opts(ctypes.Structure):
    # tls_ca is left as strata_opts_init sets it ($STRATA_TLS_CA or none);
    # the read cache's fields too: $STRATA_CACHE_* configure it (docs/cache.md);
    # and the metadata cache's: $STRATA_META_CACHE_* (docs/namespace.md).
    _fields_ = [("opts_size", c_size), ("timeout_ms", c_u32), ("retry_ms", c_u32),
                ("io_threads", c_u32), ("token", c_char_p), ("tls_ca", c_char_p),
                ("cache_mem_bytes", c_u64), ("cache_dir", c_char_p),
                ("cache_disk_bytes", c_u64), ("cache_block", c_u32),
                ("meta_cache_ms", ctypes.c_int32), ("meta_cache_entries", c_u32)]


class _Stat(ctypes.Structure):
    _fields_ = [("ino", c_u64), ("mode", c_u32), ("nlink", c_u32), ("uid", c_u32),
                ("gid", c_u32), ("size", c_u64), ("atime_ns", c_i64), ("mtime_ns", c_i64),
                ("ctime_ns", c_i64), ("chunk_size", c_u32), ("stripe", c_u32)]


class _Dirent(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 256), ("ino", c_u64), ("mode", c_u32)]


class _Statfs(ctypes.Structure):
    _fields_ = [("capacity", c_u64), ("used", c_u64), ("files", c_u64), ("dirs", c_u64),
                ("nodes", c_u32), ("targets", c_u32), ("chains", c_u32),
                ("replication", c_u32)]


class _Layout(ctypes.Structure):
    _fields_ = [("chunk_size", c_u32), ("stripe", c_u32)]


class _Cqe(ctypes.Structure):
    _fields_ = [("user_data", c_u64), ("res", c_ssize)]


_P = c_void_p
_PROTOS = {
    "strata_opts_init": (None, [ctypes.POINTER(_Opts), c_size]),
    "strata_connect": (c_int, [c_char_p, ctypes.POINTER(_Opts), ctypes.POINTER(_P)]),
    "strata_disconnect": (None, [_P]),
    "strata_open": (c_int, [_P, c_char_p, c_int, c_u32, ctypes.POINTER(_P)]),
    "strata_close": (c_int, [_P]),
    "strata_pread": (c_ssize, [_P, _P, c_size, c_u64]),
    "strata_pwrite": (c_ssize, [_P, _P, c_size, c_u64]),
    "strata_fsync": (c_int, [_P]),
    "strata_ftruncate": (c_int, [_P, c_u64]),
    "strata_fstat": (c_int, [_P, ctypes.POINTER(_Stat)]),
    "strata_stat": (c_int, [_P, c_char_p, ctypes.POINTER(_Stat)]),
    "strata_lstat": (c_int, [_P, c_char_p, ctypes.POINTER(_Stat)]),
    "strata_mkdir": (c_int, [_P, c_char_p, c_u32]),
    "strata_rmdir": (c_int, [_P, c_char_p]),
    "strata_unlink": (c_int, [_P, c_char_p]),
    "strata_rename": (c_int, [_P, c_char_p, c_char_p, c_uint]),
    "strata_truncate": (c_int, [_P, c_char_p, c_u64]),
    "strata_symlink": (c_int, [_P, c_char_p, c_char_p]),
    "strata_readlink": (c_ssize, [_P, c_char_p, c_char_p, c_size]),
    "strata_opendir": (c_int, [_P, c_char_p, ctypes.POINTER(_P)]),
    "strata_readdir": (c_int, [_P, ctypes.POINTER(_Dirent)]),
    "strata_closedir": (None, [_P]),
    "strata_statfs": (c_int, [_P, ctypes.POINTER(_Statfs)]),
    "strata_set_layout": (c_int, [_P, c_char_p, ctypes.POINTER(_Layout)]),
    "strata_get_layout": (c_int, [_P, c_char_p, ctypes.POINTER(_Layout)]),
    "strata_ring_new": (c_int, [_P, c_u32, ctypes.POINTER(_P)]),
    "strata_ring_free": (None, [_P]),
    "strata_ring_prep_read": (c_int, [_P, _P, _P, c_size, c_u64, c_u64]),
    "strata_ring_prep_write": (c_int, [_P, _P, _P, c_size, c_u64, c_u64]),
    "strata_ring_submit": (c_int, [_P]),
    "strata_ring_wait": (c_int, [_P, ctypes.POINTER(_Cqe), c_uint, c_uint, c_int]),
    "strata_find_mgmt": (c_int, [c_char_p, c_char_p, c_char_p, c_size]),
    "strata_find_token": (c_int, [c_char_p, c_char_p, c_char_p, c_char_p, c_size]),
}


def _lib():
    """libstrata with this module's prototypes declared."""
    return declare(_PROTOS)


def _b(path):
    """The bytes libstrata takes for a path: os.fsencode (str, bytes or
    os.PathLike; a str's surrogates turn back into the bytes they stand
    for)."""
    return os.fsencode(path)


def _raise2(rc, src, dst):
    """OSError subclass for a two-path call (rename), both paths named."""
    code = -rc
    if 0 < code < 4096:
        raise OSError(code, strerror(rc), os.fspath(src), None, os.fspath(dst))
    check(rc, "%s -> %s" % (os.fsdecode(src), os.fsdecode(dst)))


# ---------------------------------------------------------------------------
# Buffers: the address and size of caller memory, without a copy.

def buffer_info(obj: Any, writable: bool) -> Tuple[int, int, Any]:
    """Returns (address, nbytes, keepalive) of a C-contiguous buffer: numpy
    array, CPU torch tensor, bytearray, memoryview, bytes (read-only) or
    any object with the buffer protocol. keepalive must be held while the
    address is in use. Raises TypeError/ValueError for what cannot be used
    (a non-contiguous array, a CUDA tensor, a read-only buffer to read
    into)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        if obj.device.type != "cpu":
            raise ValueError("strata: a %s tensor cannot be read into or written from "
                             "directly; use a CPU tensor (pinned for a later copy)"
                             % obj.device.type)
        if not obj.is_contiguous():
            raise ValueError("strata: tensor is not contiguous")
        return obj.data_ptr(), obj.numel() * obj.element_size(), obj
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        if not obj.flags.c_contiguous:
            raise ValueError("strata: numpy array is not C-contiguous")
        if writable and not obj.flags.writeable:
            raise ValueError("strata: numpy array is read-only")
        return obj.ctypes.data, obj.nbytes, obj
    if isinstance(obj, bytes):
        if writable:
            raise TypeError("strata: cannot read into bytes (immutable); use a bytearray")
        # c_char_p of a bytes object points at its internal buffer.
        p = ctypes.c_char_p(obj)
        return ctypes.cast(p, c_void_p).value or 0, len(obj), (p, obj)
    mv = memoryview(obj)
    if not mv.c_contiguous:
        raise ValueError("strata: buffer is not contiguous")
    n = mv.nbytes
    if n == 0:
        return 0, 0, mv
    if mv.readonly:
        if writable:
            raise TypeError("strata: buffer is read-only")
        if np is not None:
            a = np.frombuffer(mv, dtype=np.uint8)
            return a.ctypes.data, n, (a, mv)
        b = mv.tobytes()
        return buffer_info(b, False)
    c = (ctypes.c_char * n).from_buffer(mv.cast("B") if mv.format != "B" or mv.ndim != 1
                                        else mv)
    return ctypes.addressof(c), n, (c, mv)


# ---------------------------------------------------------------------------

class StatResult:
    """Attributes of a file, os.stat_result style, plus its layout."""
    __slots__ = ("st_ino", "st_mode", "st_nlink", "st_uid", "st_gid", "st_size",
                 "st_atime_ns", "st_mtime_ns", "st_ctime_ns", "chunk_size", "stripe")

    def __init__(self, st):
        self.st_ino, self.st_mode, self.st_nlink = st.ino, st.mode, st.nlink
        self.st_uid, self.st_gid, self.st_size = st.uid, st.gid, st.size
        self.st_atime_ns, self.st_mtime_ns, self.st_ctime_ns = (st.atime_ns, st.mtime_ns,
                                                                st.ctime_ns)
        self.chunk_size, self.stripe = st.chunk_size, st.stripe

    st_atime = property(lambda self: self.st_atime_ns / 1e9)
    st_mtime = property(lambda self: self.st_mtime_ns / 1e9)
    st_ctime = property(lambda self: self.st_ctime_ns / 1e9)

    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.st_mode)

    def is_file(self) -> bool:
        return _stat.S_ISREG(self.st_mode)

    def __repr__(self):
        return "StatResult(st_mode=%o, st_size=%d, st_ino=%d)" % (self.st_mode, self.st_size,
                                                                 self.st_ino)


class DirEntry:
    """One entry of Client.scandir: name, path, inode, mode. name and path
    are bytes when the directory was named by bytes, else str (os.scandir's
    rule)."""
    __slots__ = ("name", "path", "inode", "mode")

    def __init__(self, parent, name, ino, mode):
        self.name = name
        sep = b"/" if isinstance(name, bytes) else "/"
        self.path = parent.rstrip(sep) + sep + name
        self.inode, self.mode = ino, mode

    def is_dir(self) -> bool:
        return _stat.S_ISDIR(self.mode)

    def is_file(self) -> bool:
        return _stat.S_ISREG(self.mode)

    def __repr__(self):
        return "<DirEntry %r>" % self.name


def _resolve_mgmt(mgmt):
    """mgmt: "host:port", a directory of 'strata local up' (its
    cluster.json), or None for $STRATA_MGMT -- the rule of every Strata
    program, applied by libstrata's strata_find_mgmt (strata/locate.h)."""
    spec = os.fsencode(mgmt) if mgmt is not None else None
    out = ctypes.create_string_buffer(4096)
    rc = _lib().strata_find_mgmt(spec, None, out, len(out))
    if rc == -errno.EDESTADDRREQ:
        raise ValueError("strata: no cluster named: pass Client('host:port') or a "
                         "'strata local up' directory, or set STRATA_MGMT")
    check(rc, os.path.join(os.fsdecode(spec or os.environ.get("STRATA_MGMT", "")),
                           "cluster.json"))
    return out.value.decode()


def _resolve_token(token, mgmt):
    """token: a token's text or a file holding it, or None for
    $STRATA_TOKEN, $STRATA_TOKEN_FILE, or the admin.token of the 'strata
    local up' directory mgmt names -- strata_find_token (strata/locate.h).
    Returns the text, or "" for none."""
    spec = os.fsencode(token) if token is not None else None
    where = os.fsencode(mgmt) if mgmt is not None else None
    out = ctypes.create_string_buffer(16385)
    rc = _lib().strata_find_token(spec, where, None, out, len(out))
    if rc == -errno.EPERM:
        raise PermissionError(errno.EPERM, "strata: a token file must be a regular file only "
                              "its owner can read (chmod 600)")
    check(rc, "token")
    return out.value.decode()


class Client:
    """A connection to a Strata cluster.

    Client(mgmt=None, timeout_ms=None, retry_ms=None, io_threads=None,
    token=None): mgmt is "host:port" of the mgmt service, a 'strata local
    up' directory, or None for $STRATA_MGMT. token is the credential: its
    text or a file holding it; None: $STRATA_TOKEN, $STRATA_TOKEN_FILE, or
    the admin token of the local cluster directory. Connects on first use.
    Use as a context manager or call close()."""

    def __init__(self, mgmt: Optional[StrPath] = None, timeout_ms: Optional[int] = None,
                 retry_ms: Optional[int] = None, io_threads: Optional[int] = None,
                 token: Optional[StrPath] = None):
        self._token = _resolve_token(token, mgmt).encode()
        self.mgmt = _resolve_mgmt(mgmt)
        self._opts = (timeout_ms, retry_ms, io_threads)
        self._s = None
        self._pid = None
        self._lock = threading.Lock()
        self.generation = 0     # bumped on every (re)connect

    # -- connection --

    @property
    def handle(self) -> int:
        """The struct strata * of this process (connects, or reconnects in a
        forked child, as needed)."""
        pid = os.getpid()
        s = self._s
        if s is not None and self._pid == pid:
            return s
        with self._lock:
            if self._s is not None and self._pid == pid:
                return self._s
            # A parent's connection is dropped, never used or freed here:
            # its threads do not exist in this process.
            L = _lib()
            o = _Opts()
            L.strata_opts_init(ctypes.byref(o), ctypes.sizeof(o))
            t, r, n = self._opts
            if t:
                o.timeout_ms = t
            if r:
                o.retry_ms = r
            if n:
                o.io_threads = n
            o.token = self._token
            out = _P()
            check(L.strata_connect(self.mgmt.encode(), ctypes.byref(o), ctypes.byref(out)),
                  self.mgmt)
            self._s, self._pid = out.value, pid
            self.generation += 1
            return self._s

    def close(self) -> None:
        """Disconnects (only a connection made by this process)."""
        with self._lock:
            if self._s is not None and self._pid == os.getpid():
                _lib().strata_disconnect(self._s)
            self._s = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        # Pickled into spawn-started workers: the address, not the handle.
        return {"mgmt": self.mgmt, "_opts": self._opts}

    def __setstate__(self, d):
        self.__init__(d["mgmt"], *d["_opts"])

    def __repr__(self):
        return "<strata.Client %s>" % self.mgmt

    # -- files --

    def open(self, path: StrPath, mode: str = "r", buffering: int = -1,
             encoding: Optional[str] = None, errors: Optional[str] = None,
             newline: Optional[str] = None, *, perm: int = 0o644) -> Any:
        """Opens a file the way open() does. mode: 'r', 'w', 'x', 'a', with
        '+', and 'b' (binary) or 't' (text, the default). Returns:
        - binary, buffering=0: the raw File (every read and write goes
          straight to libstrata);
        - binary: a BufferedReader ('r'), BufferedWriter ('w', 'x', 'a') or
          BufferedRandom ('+'), with a buffer of buffering bytes; -1 (the
          default) uses the file's chunk size;
        - text: a TextIOWrapper over the buffered file (encoding, errors,
          newline as open(); buffering=1 is line buffering).
        The buffered files also offer pread/pread_into/pwrite/size/stat/
        fsync, flush() publishes the length written (strata_fsync), and
        close() flushes. perm: the new file's permission bits."""
        flags, append, readable, writable, text = _parse_mode(mode)
        if buffering == 0 and text:
            raise ValueError("can't have unbuffered text I/O")
        if not text and (encoding is not None or errors is not None or newline is not None):
            raise ValueError("binary mode doesn't take an encoding, errors or newline "
                             "argument")
        line = False
        if buffering == 1:
            if text:
                line = True
            else:
                warnings.warn("line buffering (buffering=1) isn't supported in binary mode, "
                              "the default buffer size will be used", RuntimeWarning, 2)
            buffering = -1
        raw = File(self, path, mode, perm)
        if buffering == 0:
            return raw
        try:
            if buffering < 0:
                buffering = raw.chunk_size or io.DEFAULT_BUFFER_SIZE
            if readable and writable:
                f = BufferedRandom(raw, buffering)
            elif writable:
                f = BufferedWriter(raw, buffering)
            else:
                f = BufferedReader(raw, buffering)
            if not text:
                return f
            t = io.TextIOWrapper(f, io.text_encoding(encoding), errors, newline,
                                 line_buffering=line)
            t.mode = mode
            return t
        except BaseException:
            raw.close()
            raise

    def read_bytes(self, path: StrPath) -> bytes:
        with self.open(path, "rb", buffering=0) as f:
            return f.readall()

    def write_bytes(self, path: StrPath, data: Any) -> int:
        with self.open(path, "wb", buffering=0) as f:
            return f.write(data)

    def read_batch(self, reads: Iterable[Tuple[Any, int, Any]], depth: int = 64) -> List[int]:
        """Reads many (path_or_File, offset, buffer) at once through the
        batch ring, straight into each buffer; up to depth in flight.
        Returns the byte counts (short at end of file). Raises the first
        error (OSError with its path)."""
        with Ring(self, depth) as r:
            return r.read_many(reads)

    # -- namespace --

    def stat(self, path: StrPath) -> StatResult:
        st = _Stat()
        check(_lib().strata_stat(self.handle, _b(path), ctypes.byref(st)), path)
        return StatResult(st)

    def lstat(self, path: StrPath) -> StatResult:
        st = _Stat()
        check(_lib().strata_lstat(self.handle, _b(path), ctypes.byref(st)), path)
        return StatResult(st)

    def exists(self, path: StrPath) -> bool:
        try:
            self.stat(path)
            return True
        except FileNotFoundError:
            return False

    def isdir(self, path: StrPath) -> bool:
        try:
            return self.stat(path).is_dir()
        except (FileNotFoundError, NotADirectoryError):
            return False

    def isfile(self, path: StrPath) -> bool:
        try:
            return self.stat(path).is_file()
        except (FileNotFoundError, NotADirectoryError):
            return False

    def scandir(self, path: StrPath = "/") -> List[DirEntry]:
        """Every entry of a directory (DirEntry: name, path, inode, mode);
        bytes names for a bytes path, else str (os.fsdecode)."""
        L = _lib()
        d = _P()
        check(L.strata_opendir(self.handle, _b(path), ctypes.byref(d)), path)
        out = []
        ent = _Dirent()
        p = os.fspath(path)
        raw = isinstance(p, bytes)
        try:
            while True:
                rc = L.strata_readdir(d, ctypes.byref(ent))
                check(rc, path)
                if rc == 0:
                    break
                name = ent.name if raw else os.fsdecode(ent.name)
                out.append(DirEntry(p, name, ent.ino, ent.mode))
        finally:
            L.strata_closedir(d)
        return out

    def listdir(self, path: StrPath = "/") -> List[Union[str, bytes]]:
        """The names in a directory (bytes for a bytes path, as os.listdir)."""
        return [e.name for e in self.scandir(path)]

    def mkdir(self, path: StrPath, mode: int = 0o755) -> None:
        check(_lib().strata_mkdir(self.handle, _b(path), mode), path)

    def makedirs(self, path: StrPath, mode: int = 0o755, exist_ok: bool = False) -> None:
        """Creates path and its missing parents."""
        p = "/" + "/".join(c for c in os.fsdecode(path).split("/") if c)
        parts = p.split("/")
        for i in range(2, len(parts) + 1):
            sub = "/".join(parts[:i])
            try:
                self.mkdir(sub, mode)
            except FileExistsError:
                if i == len(parts):
                    if not exist_ok or not self.isdir(sub):
                        raise
                elif not self.isdir(sub):
                    raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), sub)

    def remove(self, path: StrPath) -> None:
        check(_lib().strata_unlink(self.handle, _b(path)), path)

    unlink = remove

    def rmdir(self, path: StrPath) -> None:
        check(_lib().strata_rmdir(self.handle, _b(path)), path)

    def rmtree(self, path: StrPath, missing_ok: bool = False) -> None:
        """Removes a file or a directory tree."""
        try:
            st = self.lstat(path)
        except FileNotFoundError:
            if missing_ok:
                return
            raise
        if not st.is_dir():
            self.remove(path)
            return
        for e in self.scandir(path):
            if e.is_dir():
                self.rmtree(e.path, missing_ok=True)
            else:
                try:
                    self.remove(e.path)
                except FileNotFoundError:
                    pass
        try:
            self.rmdir(path)
        except FileNotFoundError:
            if not missing_ok:
                raise

    def rename(self, src: StrPath, dst: StrPath, flags: int = 0) -> None:
        """Atomically renames src to dst (replacing a file or an empty
        directory; flags: RENAME_NOREPLACE, RENAME_EXCHANGE)."""
        rc = _lib().strata_rename(self.handle, _b(src), _b(dst), flags)
        if rc < 0:
            _raise2(rc, src, dst)

    replace = rename

    def truncate(self, path: StrPath, size: int) -> None:
        check(_lib().strata_truncate(self.handle, _b(path), size), path)

    def symlink(self, target: StrPath, linkpath: StrPath) -> None:
        check(_lib().strata_symlink(self.handle, _b(target), _b(linkpath)), linkpath)

    def readlink(self, path: StrPath) -> Union[str, bytes]:
        """The target of a symlink (bytes for a bytes path, as os.readlink)."""
        buf = ctypes.create_string_buffer(4096)
        n = check(_lib().strata_readlink(self.handle, _b(path), buf, 4096), path)
        t = buf.raw[:n]
        return t if isinstance(os.fspath(path), bytes) else os.fsdecode(t)

    def statfs(self) -> Dict[str, int]:
        st = _Statfs()
        check(_lib().strata_statfs(self.handle, ctypes.byref(st)))
        return {k: getattr(st, k) for k, _ in _Statfs._fields_}

    def set_layout(self, path: StrPath, chunk_size: int = 0, stripe: int = 0) -> None:
        l = _Layout(chunk_size, stripe)
        check(_lib().strata_set_layout(self.handle, _b(path), ctypes.byref(l)), path)

    def get_layout(self, path: StrPath) -> Tuple[int, int]:
        l = _Layout()
        check(_lib().strata_get_layout(self.handle, _b(path), ctypes.byref(l)), path)
        return l.chunk_size, l.stripe


def _parse_mode(mode):
    """open()'s mode -> (flags, append, readable, writable, text)."""
    if not isinstance(mode, str):
        raise TypeError("open() argument 'mode' must be str, not %s" % type(mode).__name__)
    if len(set(mode)) != len(mode) or set(mode) - set("rwxabt+"):
        raise ValueError("invalid mode: %r" % mode)
    if "b" in mode and "t" in mode:
        raise ValueError("can't have text and binary mode at once")
    m = "".join(c for c in mode if c in "rwxa")
    plus = "+" in mode
    if len(m) != 1:
        raise ValueError("must have exactly one of create/read/write/append mode")
    acc = O_RDWR if plus else (O_RDONLY if m == "r" else O_WRONLY)
    flags = {"r": 0, "w": O_CREAT | O_TRUNC, "x": O_CREAT | O_EXCL, "a": O_CREAT}[m]
    return acc | flags, m == "a", m == "r" or plus, m != "r" or plus, "b" not in mode


class File(io.RawIOBase):
    """An open file of a Client (io.RawIOBase: read, readinto, readall,
    write, seek, tell, plus positional pread/pwrite). Reads and writes go
    straight between libstrata and the caller's buffer."""

    def __init__(self, client: "Client", path: StrPath, mode: str = "rb", perm: int = 0o644):
        super().__init__()
        self.client = client
        self.name = os.fspath(path)
        self.mode = mode
        flags, self._append, self._readable, self._writable, _ = _parse_mode(mode)
        out = _P()
        check(_lib().strata_open(client.handle, _b(path), flags, perm, ctypes.byref(out)),
              self.name)
        self._f = out.value
        self._pid = os.getpid()
        self._pos = 0
        self._chunk = None
        if self._append:
            self._pos = self.size()

    @property
    def chunk_size(self) -> int:
        """The file's chunk size (its layout), the default buffer size."""
        if self._chunk is None:
            self._chunk = self.stat().chunk_size
        return self._chunk

    @property
    def handle(self) -> int:
        if self._f is None:
            raise ValueError("strata: I/O on closed file %r" % self.name)
        if self._pid != os.getpid():
            raise ValueError("strata: file %r was opened by another process (before a "
                             "fork); open it again in this one" % self.name)
        return self._f

    def readable(self) -> bool:
        return self._readable

    def writable(self) -> bool:
        return self._writable

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        raise io.UnsupportedOperation("strata files have no file descriptor")

    def close(self) -> None:
        if self._f is not None and not self.closed:
            f, self._f = self._f, None
            if self._pid == os.getpid():
                try:
                    check(_lib().strata_close(f), self.name)
                finally:
                    super().close()
                return
        super().close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def size(self) -> int:
        st = _Stat()
        check(_lib().strata_fstat(self.handle, ctypes.byref(st)), self.name)
        return st.size

    def stat(self) -> StatResult:
        st = _Stat()
        check(_lib().strata_fstat(self.handle, ctypes.byref(st)), self.name)
        self._chunk = st.chunk_size
        return StatResult(st)

    def seek(self, off: int, whence: int = 0) -> int:
        if whence == 0:
            pos = off
        elif whence == 1:
            pos = self._pos + off
        elif whence == 2:
            pos = self.size() + off
        else:
            raise ValueError("invalid whence %r" % whence)
        if pos < 0:
            raise OSError(errno.EINVAL, "negative seek position", self.name)
        self._pos = pos
        return pos

    def tell(self) -> int:
        return self._pos

    # -- positional I/O --

    def _pread_addr(self, addr, n, off):
        """Reads n bytes at off into addr, looping over short reads; returns
        the count (less than n only at end of file)."""
        L = _lib()
        h = self.handle
        done = 0
        while done < n:
            r = L.strata_pread(h, addr + done, n - done, off + done)
            check(r, self.name)
            if r == 0:
                break
            done += r
        return done

    def pread_into(self, buf: Any, off: int) -> int:
        """Reads into buf (bytearray, memoryview, numpy array, CPU tensor)
        at file offset off, filling it unless the file ends. Returns the
        number of bytes read."""
        addr, n, keep = buffer_info(buf, True)
        if n == 0:
            return 0
        r = self._pread_addr(addr, n, off)
        del keep
        return r

    def pread(self, n: int, off: int) -> bytes:
        """Returns up to n bytes at off."""
        b = bytearray(n)
        r = self.pread_into(b, off)
        del b[r:]
        return bytes(b)

    def pwrite(self, data: Any, off: int) -> int:
        """Writes data (bytes-like, numpy array, CPU tensor) at off. Returns
        the byte count."""
        addr, n, keep = buffer_info(data, False)
        if n == 0:
            return 0
        r = check(_lib().strata_pwrite(self.handle, addr, n, off), self.name)
        del keep
        return r

    # -- stream I/O --

    def readinto(self, buf: Any) -> int:
        if not self._readable:
            raise io.UnsupportedOperation("file %r not open for reading" % self.name)
        r = self.pread_into(buf, self._pos)
        self._pos += r
        return r

    def readall(self) -> bytes:
        n = max(0, self.size() - self._pos)
        b = bytearray(n)
        r = self.readinto(b) if n else 0
        del b[r:]
        rest = bytearray(1 << 16)
        while True:         # the file may have grown
            k = self.readinto(rest)
            if not k:
                break
            b += rest[:k]
        return bytes(b)

    def read(self, n: Optional[int] = -1) -> bytes:
        if n is None or n < 0:
            return self.readall()
        return super().read(n)

    def write(self, data: Any) -> int:
        if not self._writable:
            raise io.UnsupportedOperation("file %r not open for writing" % self.name)
        if self._append:
            self._pos = self.size()
        r = self.pwrite(data, self._pos)
        self._pos += r
        return r

    def flush(self) -> None:
        """Publishes the length written so far (strata_fsync)."""
        if self._f is not None and self._writable and self._pid == os.getpid():
            self.fsync()

    def fsync(self) -> None:
        check(_lib().strata_fsync(self.handle), self.name)

    def truncate(self, size: Optional[int] = None) -> int:
        if size is None:
            size = self._pos
        check(_lib().strata_ftruncate(self.handle, size), self.name)
        return size


def _as_buffer(obj, writable):
    """obj itself when it has the buffer protocol, else (a CPU tensor) a
    memoryview of its memory, for io's buffered read/write paths."""
    try:
        memoryview(obj).release()
        return obj
    except TypeError:
        pass
    addr, n, keep = buffer_info(obj, writable)
    if n == 0:
        return bytearray()
    # The view refers to the array, which refers to keep (the tensor).
    arr = (ctypes.c_char * n).from_address(addr)
    arr._keep = keep
    return memoryview(arr).cast("B")


class _Positional:
    """What a buffered Strata file adds to io's: the raw File's positional
    I/O and metadata, kept coherent with the buffer (pending writes are
    flushed first; a pwrite drops what was read ahead)."""

    @property
    def handle(self) -> int:
        return self.raw.handle

    def readinto(self, buf: Any) -> int:
        return super().readinto(_as_buffer(buf, True))

    def write(self, data: Any) -> int:
        return super().write(_as_buffer(data, False))

    @property
    def client(self) -> "Client":
        return self.raw.client

    def size(self) -> int:
        self.flush()
        return self.raw.size()

    def stat(self) -> StatResult:
        self.flush()
        return self.raw.stat()

    def pread_into(self, buf: Any, off: int) -> int:
        self.flush()
        return self.raw.pread_into(buf, off)

    def pread(self, n: int, off: int) -> bytes:
        self.flush()
        return self.raw.pread(n, off)

    def pwrite(self, data: Any, off: int) -> int:
        self.flush()
        r = self.raw.pwrite(data, off)
        if self.readable():
            pos = self.tell()
            self.seek(0, 2)         # whence 2 always drops the read buffer
            self.seek(pos)
        return r

    def flush(self) -> None:
        """Writes the buffer out and publishes the length (strata_fsync)."""
        super().flush()
        if not self.closed:
            self.raw.flush()

    def fsync(self) -> None:
        self.flush()


class BufferedReader(_Positional, io.BufferedReader):
    """A Strata file opened 'rb' (io.BufferedReader)."""


class BufferedWriter(_Positional, io.BufferedWriter):
    """A Strata file opened 'wb', 'xb' or 'ab' (io.BufferedWriter)."""


class BufferedRandom(_Positional, io.BufferedRandom):
    """A Strata file opened with '+' (io.BufferedRandom)."""


def _raw_file(f):
    """The raw File of a File or a buffered one, else None."""
    if isinstance(f, File):
        return f
    if isinstance(f, _Positional):
        return f.raw
    return None


class Ring(Closable):
    """A batch of asynchronous reads and writes (a libstrata ring), used
    by one thread at a time. prep_read/prep_write queue I/Os (the buffer
    is kept alive until its completion is reaped), submit sends them, wait
    reaps (user_data, result) pairs."""

    def __init__(self, client: Client, depth: int = 64):
        self.client = client
        self.depth = depth
        out = _P()
        check(_lib().strata_ring_new(client.handle, depth, ctypes.byref(out)))
        self._r = out.value
        self._pid = os.getpid()
        self._keep = {}
        self._cqes = (_Cqe * depth)()
        self.inflight = 0

    def close(self) -> None:
        if self._r is not None:
            if self._pid == os.getpid():
                _lib().strata_ring_free(self._r)
            self._r = None
            self._keep.clear()
            self.inflight = 0

    def _prep(self, fn, f, buf, off, user_data, writable, length=None):
        f = _raw_file(f) or f
        addr, n, keep = buffer_info(buf, writable)
        if length is not None:
            n = min(n, length)
        rc = fn(self._r, f.handle, addr, n, off, user_data)
        if rc == -errno.EBUSY:
            raise BlockingIOError(errno.EBUSY, "strata ring full (%d in flight)" % self.depth)
        check(rc, f.name)
        self._keep[user_data] = (keep, f)
        self.inflight += 1

    def prep_read(self, f: Any, buf: Any, off: int, user_data: int) -> None:
        """Queues a read of len(buf) bytes at off of File f into buf."""
        self._prep(_lib().strata_ring_prep_read, f, buf, off, user_data, True)

    def prep_write(self, f: Any, buf: Any, off: int, user_data: int) -> None:
        self._prep(_lib().strata_ring_prep_write, f, buf, off, user_data, False)

    def submit(self) -> int:
        return check(_lib().strata_ring_submit(self._r))

    def wait(self, min_complete: int = 1, timeout_ms: int = -1) -> List[Tuple[int, int]]:
        """Returns [(user_data, res)], at least min_complete of them unless
        the timeout passed; res is bytes or a negative error code."""
        n = check(_lib().strata_ring_wait(self._r, self._cqes, self.depth,
                                          min(min_complete, self.inflight), timeout_ms))
        out = []
        for i in range(n):
            c = self._cqes[i]
            self._keep.pop(c.user_data, None)
            out.append((c.user_data, c.res))
        self.inflight -= n
        return out

    def read_many(self, reads: Iterable[Tuple[Any, int, Any]]) -> List[int]:
        """reads: iterable of (path_or_File, offset, buffer). Keeps up to
        depth in flight; returns the byte counts in order."""
        reads = list(reads)
        opened = {}
        files = []
        try:
            for src, _, _ in reads:
                raw = _raw_file(src)
                if raw is not None:
                    files.append(raw)
                else:
                    key = os.fspath(src)
                    if key not in opened:
                        opened[key] = self.client.open(key, "rb", buffering=0)
                    files.append(opened[key])
            res = [None] * len(reads)
            nxt = 0
            err = None
            while nxt < len(reads) or self.inflight:
                while nxt < len(reads) and self.inflight < self.depth:
                    _, off, buf = reads[nxt]
                    self.prep_read(files[nxt], buf, off, nxt)
                    nxt += 1
                self.submit()
                for ud, r in self.wait(1):
                    res[ud] = r
                    if r < 0 and err is None:
                        err = (r, files[ud].name)
            if err:
                check(*err)
            return res
        finally:
            for f in opened.values():
                f.close()
