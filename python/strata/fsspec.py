"""fsspec filesystem for strata:// URLs (import strata.fsspec).

    import pandas
    df = pandas.read_csv("strata:///data/x.csv", storage_options={"local_dir": D})
    fs = fsspec.filesystem("strata", mgmt="127.0.0.1:7000", token=T)
    fs.ls("/data"); fs.put("local.bin", "/data/"); fs.cat_file("/data/x", 100, 200)

The data tools of Python (pandas, Dask, Hugging Face datasets, Lightning)
reach storage through fsspec; this module makes Strata one of its
filesystems. It is registered under the protocol "strata" by the package's
entry point (group fsspec.specs) when strata is installed, and by
importing this module (so a source tree on PYTHONPATH works too).

Connection options (storage_options): mgmt= ("host:port" of the mgmt
service, or a 'strata local up' directory), local_dir= (a 'strata local
up' directory: its address and its admin token), token= (a token's text
or a file holding it). None of them: $STRATA_MGMT and $STRATA_TOKEN /
$STRATA_TOKEN_FILE, as strata.Client. A URL may name the mgmt address:
strata://host:port/path.

Reads: files opened for reading are fsspec buffered files (block size:
the file's chunk size, readahead cache by default) whose blocks, like
cat_file's ranges and cat_ranges, are read through libstrata's batch ring:
a range is split at chunk boundaries and every piece is in flight at once.
Writes go through strata.Client.open's BufferedWriter. Writing a file
creates its missing parent directories (as put does), unless the
filesystem is made with auto_mkdir=False. Inside `with fs.transaction:`
files are written aside and renamed into place at the commit.
"""
from __future__ import annotations

import datetime
import os
import stat as _stat
from glob import has_magic
from typing import Any, Dict, List, Optional, Union

import fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from .client import BufferedWriter, Client, File, Ring, _resolve_token

__all__ = ["StrataFileSystem", "StrataFile"]

_MAX_DEPTH = 64         # ring depth for one ranged read


def _ring_read(raw: File, start: int, length: int, ring: Optional[Ring] = None) -> bytes:
    """length bytes of raw at start (fewer at end of file), read through a
    batch ring: one read per chunk the range touches, all in flight."""
    if length <= 0:
        return b""
    chunk = raw.chunk_size or (4 << 20)
    buf = bytearray(length)
    mv = memoryview(buf)
    reads = []
    off = 0
    while off < length:
        n = min(length - off, chunk - (start + off) % chunk)
        reads.append((raw, start + off, mv[off:off + n]))
        off += n
    own = ring is None
    if own:
        ring = Ring(raw.client, min(len(reads), _MAX_DEPTH))
    try:
        got = ring.read_many(reads)
    finally:
        if own:
            ring.close()
    # Short reads happen only past the end of the file: count up to the first.
    total = 0
    for (_, _, piece), n in zip(reads, got):
        total += n
        if n < len(piece):
            break
    return bytes(mv[:total])


def _bounds(size: int, start: Optional[int], end: Optional[int]) -> "tuple[int, int]":
    """fsspec's (start, end) -- None for the file's ends, negative from its
    end, end clipped to size -- as absolute offsets."""
    s = 0 if start is None else (max(0, size + start) if start < 0 else start)
    e = size if end is None else (max(0, size + end) if end < 0 else min(end, size))
    return s, max(s, e)


class StrataFile(AbstractBufferedFile):
    """A Strata file opened for reading through fsspec: its blocks are
    fetched through the batch ring (_fetch_range)."""

    def __init__(self, fs: "StrataFileSystem", path: str, mode: str = "rb",
                 block_size: Any = "default", autocommit: bool = True,
                 cache_type: str = "readahead", cache_options: Optional[dict] = None,
                 **kwargs: Any):
        if mode != "rb":
            raise ValueError("strata: StrataFile reads only (mode 'rb'), not %r" % mode)
        self._raw = fs.client.open(path, "rb", buffering=0)
        self._ring = None
        try:
            st = self._raw.stat()
            if st.is_dir():
                raise IsADirectoryError(21, "Is a directory", path)
            if block_size in ("default", None):
                block_size = st.chunk_size or self.DEFAULT_BLOCK_SIZE
            super().__init__(fs, path, mode, block_size=block_size, autocommit=autocommit,
                             cache_type=cache_type, cache_options=cache_options,
                             size=st.st_size, **kwargs)
        except BaseException:
            self._raw.close()
            raise

    def _fetch_range(self, start: int, end: int) -> bytes:
        if self._ring is None:
            self._ring = Ring(self._raw.client, _MAX_DEPTH)
        return _ring_read(self._raw, start, min(end, self.size) - start, self._ring)

    def close(self) -> None:
        if getattr(self, "_raw", None) is None:
            return
        try:
            super().close()
        finally:
            if self._ring is not None:
                self._ring.close()
                self._ring = None
            self._raw.close()
            self._raw = None


class _DeferredWriter(BufferedWriter):
    """A file written inside an fsspec transaction (autocommit=False): the
    bytes go to a hidden sibling, NAME.tmp-strata-<id>; commit() renames it
    onto the path (atomically), discard() removes it."""

    def __init__(self, fs: "StrataFileSystem", path: str, tmp: str, buffering: int):
        raw = fs.client.open(tmp, "xb", buffering=0)
        if buffering < 0:
            buffering = raw.chunk_size or 1 << 20
        super().__init__(raw, buffering)
        self.fs, self.path, self.tmp = fs, path, tmp

    def commit(self) -> None:
        self.close()
        self.fs.client.rename(self.tmp, self.path)

    def discard(self) -> None:
        self.close()
        try:
            self.fs.client.remove(self.tmp)
        except FileNotFoundError:
            pass


def _info(path: str, st: Any) -> Dict[str, Any]:
    m = st.st_mode
    kind = ("directory" if _stat.S_ISDIR(m) else "file" if _stat.S_ISREG(m)
            else "link" if _stat.S_ISLNK(m) else "other")
    return {"name": path, "size": st.st_size if kind != "directory" else 0, "type": kind,
            "mode": m, "ino": st.st_ino, "nlink": st.st_nlink, "uid": st.st_uid,
            "gid": st.st_gid, "created": st.st_ctime, "mtime": st.st_mtime,
            "chunk_size": st.chunk_size, "stripe": st.stripe}


class StrataFileSystem(AbstractFileSystem):
    """fsspec's AbstractFileSystem over a Strata cluster (protocol
    "strata"). Paths are absolute cluster paths ("/data/x.csv"; a relative
    one is taken from the root); a URL strata://host:port/path names the
    mgmt address too."""

    protocol = "strata"
    root_marker = "/"

    def __init__(self, mgmt: Optional[str] = None, local_dir: Optional[str] = None,
                 token: Optional[str] = None, auto_mkdir: bool = True,
                 client: Optional[Client] = None, **kwargs: Any):
        super().__init__(**kwargs)
        if client is None:
            if mgmt is None:
                client = Client(local_dir, token=token)
            else:
                if token is None and local_dir is not None:
                    token = _resolve_token(None, local_dir) or None
                client = Client(mgmt, token=token)
        self.client = client
        self.auto_mkdir = auto_mkdir

    # -- paths --

    @classmethod
    def _strip_protocol(cls, path: Any) -> Union[str, List[str]]:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]
        path = fsspec.utils.stringify_path(path)
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if path.startswith("strata://"):
            path = path[len("strata://"):]
            if not path.startswith("/"):            # strata://host:port/path
                i = path.find("/")
                path = "/" if i < 0 else path[i:]
        elif path.startswith("strata:"):
            path = path[len("strata:"):]
        path = "/" + "/".join(p for p in path.split("/") if p and p != ".")
        return path

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> Dict[str, Any]:
        if isinstance(path, str) and path.startswith("strata://"):
            netloc = path[len("strata://"):].split("/", 1)[0]
            if netloc:
                return {"mgmt": netloc}
        return {}

    @classmethod
    def _parent(cls, path: str) -> str:
        path = cls._strip_protocol(path)
        return path.rsplit("/", 1)[0] or "/"

    # -- metadata --

    def info(self, path: str, **kwargs: Any) -> Dict[str, Any]:
        path = self._strip_protocol(path)
        st = self.client.lstat(path)
        out = _info(path, st)
        if _stat.S_ISLNK(st.st_mode):
            out["islink"] = True
            out["destination"] = self.client.readlink(path)
            try:
                tgt = _info(path, self.client.stat(path))
                out.update(size=tgt["size"], type=tgt["type"])
            except FileNotFoundError:
                pass        # a dangling link stays type "link"
        return out

    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> List[Any]:
        path = self._strip_protocol(path)
        st = self.client.stat(path)
        if not st.is_dir():
            return [self.info(path)] if detail else [path]
        names = [e.path for e in self.client.scandir(path)]
        names.sort()
        if not detail:
            return names
        out = []
        for p in names:
            try:
                out.append(self.info(p))
            except FileNotFoundError:
                pass        # removed while listing
        return out

    def created(self, path: str) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.info(path)["created"],
                                               tz=datetime.timezone.utc)

    def modified(self, path: str) -> datetime.datetime:
        return datetime.datetime.fromtimestamp(self.info(path)["mtime"],
                                               tz=datetime.timezone.utc)

    # -- directories --

    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        if create_parents:
            if self.exists(path):
                raise FileExistsError(17, "File exists", path)
            self.client.makedirs(path, exist_ok=True)
        else:
            self.client.mkdir(path)

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        self.client.makedirs(self._strip_protocol(path), exist_ok=exist_ok)

    def rmdir(self, path: str) -> None:
        self.client.rmdir(self._strip_protocol(path))

    # -- files --

    def _open(self, path: str, mode: str = "rb", block_size: Any = None,
              autocommit: bool = True, cache_options: Optional[dict] = None,
              **kwargs: Any) -> Any:
        path = self._strip_protocol(path)
        if mode == "rb":
            return StrataFile(self, path, mode, block_size=block_size,
                              cache_options=cache_options, **kwargs)
        if self.auto_mkdir and "r" not in mode:
            self.client.makedirs(self._parent(path), exist_ok=True)
        buffering = block_size if isinstance(block_size, int) and block_size > 0 else -1
        if not autocommit:
            if mode != "wb":
                raise ValueError("strata: a transaction writes whole files (mode 'wb'), "
                                 "not %r" % mode)
            tmp = "%s.tmp-strata-%s" % (path, os.urandom(6).hex())
            return _DeferredWriter(self, path, tmp, buffering)
        return self.client.open(path, mode, buffering=buffering)

    def cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None,
                 **kwargs: Any) -> bytes:
        path = self._strip_protocol(path)
        with self.client.open(path, "rb", buffering=0) as raw:
            start, end = _bounds(raw.size(), start, end)
            return _ring_read(raw, start, end - start)

    def cat_ranges(self, paths: List[str], starts: Any, ends: Any, max_gap: Any = None,
                   on_error: str = "return", **kwargs: Any) -> List[Any]:
        """Many ranges of many files in one batch of the ring."""
        if max_gap is not None:
            raise NotImplementedError
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        starts = starts if isinstance(starts, list) else [starts] * len(paths)
        ends = ends if isinstance(ends, list) else [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError("paths, starts and ends differ in length")
        opened: Dict[str, File] = {}
        out: List[Any] = [None] * len(paths)
        reads, slots = [], []
        try:
            for i, (p, s, e) in enumerate(zip(paths, starts, ends)):
                p = self._strip_protocol(p)
                try:
                    f = opened.get(p)
                    if f is None:
                        f = opened[p] = self.client.open(p, "rb", buffering=0)
                    size = f.size()
                except OSError as err:
                    if on_error != "return":
                        raise
                    out[i] = err
                    continue
                s, e = _bounds(size, s, e)
                buf = bytearray(e - s)
                out[i] = buf
                if buf:
                    reads.append((f, s, buf))
                    slots.append(i)
            if reads:
                got = self.client.read_batch(reads, depth=min(len(reads), _MAX_DEPTH))
                for i, n, (_, _, buf) in zip(slots, got, reads):
                    del buf[n:]
            return [bytes(x) if isinstance(x, bytearray) else x for x in out]
        finally:
            for f in opened.values():
                f.close()

    def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> None:
        with self.open(path, "wb") as f:
            f.write(value)

    def put_file(self, lpath: str, rpath: str, callback: Any = None, **kwargs: Any) -> None:
        rpath = self._strip_protocol(rpath)
        if os.path.isdir(lpath):
            self.client.makedirs(rpath, exist_ok=True)
            return
        self.client.makedirs(self._parent(rpath), exist_ok=True)
        with open(lpath, "rb") as src:
            size = os.fstat(src.fileno()).st_size
            if callback is not None:
                callback.set_size(size)
            with self.open(rpath, "wb") as dst:
                blk = max(dst.raw.chunk_size, 1 << 20)
                while True:
                    data = src.read(blk)
                    if not data:
                        break
                    dst.write(data)
                    if callback is not None:
                        callback.relative_update(len(data))

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        path1, path2 = self._strip_protocol(path1), self._strip_protocol(path2)
        if self.isdir(path1):
            self.client.makedirs(path2, exist_ok=True)
            return
        with self.client.open(path1, "rb", buffering=0) as src, self.open(path2, "wb") as dst:
            off, size = 0, src.size()
            while off < size:
                data = _ring_read(src, off, min(size - off, 64 << 20))
                if not data:
                    break
                dst.write(data)
                off += len(data)

    def mv(self, path1: Any, path2: Any, recursive: bool = False, maxdepth: Any = None,
           **kwargs: Any) -> None:
        """A rename within the cluster (atomic) for one path; into path2
        when path2 is an existing directory, as shutil.move. Globs and
        lists: copy, then remove, as fsspec does."""
        if isinstance(path1, str) and not has_magic(path1):
            p1, p2 = self._strip_protocol(path1), self._strip_protocol(path2)
            if self.isdir(p2) and not self.isdir(p1):
                p2 = p2.rstrip("/") + "/" + p1.rsplit("/", 1)[-1]
            self.client.rename(p1, p2)
            return
        super().mv(path1, path2, recursive=recursive, maxdepth=maxdepth, **kwargs)

    def rm_file(self, path: str) -> None:
        self.client.remove(self._strip_protocol(path))

    def _rm(self, path: str) -> None:
        path = self._strip_protocol(path)
        if self.isdir(path):
            self.client.rmdir(path)
        else:
            self.client.remove(path)

    def rm(self, path: Any, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        """Removes files; directories too when recursive (a directory
        without recursive is refused with IsADirectoryError)."""
        for p in reversed(self.expand_path(path, recursive=recursive, maxdepth=maxdepth)):
            if self.isdir(p):
                if not recursive:
                    raise IsADirectoryError(21, "Is a directory (use recursive=True)", p)
                self.client.rmtree(p, missing_ok=True)
            else:
                try:
                    self.client.remove(p)
                except FileNotFoundError:
                    if not recursive:
                        raise

    def touch(self, path: str, truncate: bool = True, **kwargs: Any) -> None:
        path = self._strip_protocol(path)
        if truncate or not self.exists(path):
            with self.open(path, "wb"):
                pass
        else:
            with self.client.open(path, "ab", buffering=0):
                pass        # strata_close moves the times

    def isdir(self, path: str) -> bool:
        return self.client.isdir(self._strip_protocol(path))

    def isfile(self, path: str) -> bool:
        return self.client.isfile(self._strip_protocol(path))

    def exists(self, path: str, **kwargs: Any) -> bool:
        try:
            self.client.lstat(self._strip_protocol(path))
            return True
        except (FileNotFoundError, NotADirectoryError):
            return False


fsspec.register_implementation("strata", StrataFileSystem, clobber=True)
