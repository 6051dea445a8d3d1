"""strata.mem: the memory plane (pooled DRAM of Strata's mem nodes).

    import strata.mem
    pool = strata.mem.Pool("127.0.0.1:7401,127.0.0.1:7402")   # or a local dir
    pool["k"] = b"bytes"                   # dict-like: [], in, del, keys()
    pool.put_tensor("w0", torch.randn(4, 4))
    t = pool.get_tensor("w0")              # a new tensor
    pool.get_into("w0", t)                 # fills t in place, no extra copy
    op = pool.get_async("w0", t); ...; op.wait()

Keys are str (utf-8) or bytes, 1..1024 bytes; values up to 64 MiB. A
tensor or array is stored as its raw bytes under the key, with its dtype
and shape in a small companion object (key + "\\x1emeta"), so get_into
fills a caller's tensor straight from the network.
"""
from __future__ import annotations

import ctypes
import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional
from ctypes import POINTER, c_char_p, c_int, c_size_t, c_ssize_t, c_uint, c_uint32, c_uint64, c_void_p

from ._lib import Closable, check, declare
from .client import buffer_info

PIN = 0x1
NX = 0x2
META = b"\x1emeta"
MAX_VALUE = 64 << 20
MAX_REPLICAS = 8        # copies of a put at most (libstrata's limit)


class _Opts(ctypes.Structure):
    _fields_ = [("opts_size", c_size_t), ("timeout_ms", c_uint32), ("replicas", c_uint32),
                ("vnodes", c_uint32), ("io_threads", c_uint32), ("token", ctypes.c_char_p)]


class _Item(ctypes.Structure):
    _fields_ = [("key", c_char_p), ("buf", c_void_p), ("len", c_size_t), ("flags", c_uint),
                ("status", c_int)]


class _Stats(ctypes.Structure):
    _fields_ = [("capacity", c_uint64), ("used", c_uint64), ("objects", c_uint64),
                ("pinned", c_uint64), ("evictions", c_uint64), ("spilled", c_uint64),
                ("reloaded", c_uint64), ("nodes", c_uint32), ("nodes_up", c_uint32)]


_LIST_CB = ctypes.CFUNCTYPE(c_int, c_void_p, c_char_p, c_uint64)
_PROTOS = {
    "strata_mem_opts_init": (None, [POINTER(_Opts), c_size_t]),
    "strata_mem_open": (c_int, [c_char_p, POINTER(_Opts), POINTER(c_void_p)]),
    "strata_mem_close": (None, [c_void_p]),
    "strata_mem_put": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, c_uint]),
    "strata_mem_get": (c_ssize_t, [c_void_p, c_char_p, c_void_p, c_size_t]),
    "strata_mem_exists": (c_ssize_t, [c_void_p, c_char_p]),
    "strata_mem_remove": (c_int, [c_void_p, c_char_p]),
    "strata_mem_pin": (c_int, [c_void_p, c_char_p, c_int]),
    "strata_mem_list": (c_ssize_t, [c_void_p, c_char_p, _LIST_CB, c_void_p]),
    "strata_mem_mput": (c_int, [c_void_p, POINTER(_Item), c_size_t]),
    "strata_mem_mget": (c_int, [c_void_p, POINTER(_Item), c_size_t]),
    "strata_mem_mremove": (c_int, [c_void_p, POINTER(_Item), c_size_t]),
    "strata_mem_mexists": (c_int, [c_void_p, POINTER(_Item), c_size_t]),
    "strata_mem_get_async": (c_int, [c_void_p, c_char_p, c_void_p, c_size_t, POINTER(c_void_p)]),
    "strata_mem_op_poll": (c_int, [c_void_p]),
    "strata_mem_op_wait": (c_ssize_t, [c_void_p, c_int]),
    "strata_mem_op_free": (None, [c_void_p]),
    "strata_mem_prefetch": (c_int, [c_void_p, c_char_p]),
    "strata_mem_stats": (c_int, [c_void_p, POINTER(_Stats)]),
}


def _lib():
    return declare(_PROTOS)


def _name(k):
    s = k.decode(errors="replace") if isinstance(k, (bytes, bytearray)) else str(k)
    return s if len(s) <= 80 else s[:60] + "...(%d bytes)" % len(k)


def _key(k):
    if isinstance(k, str):
        k = k.encode()
    if not isinstance(k, (bytes, bytearray)):
        raise TypeError("strata.mem: keys are str or bytes, not %s" % type(k).__name__)
    return bytes(k)


def local_addrs(local_dir: Optional[str] = None) -> str:
    """The mem nodes of a 'strata local up --mem N' cluster (its
    cluster.json), as "host:port,..."."""
    d = local_dir or os.environ.get("STRATA_LOCAL_DIR", "./strata-local")
    with open(os.path.join(d, "cluster.json")) as f:
        rec = json.load(f)
    addrs = [n["addr"] for n in rec.get("nodes", []) if "mem" in n.get("services", "").split(",")]
    if not addrs:
        raise OSError(2, "no mem nodes in the local cluster (start it with --mem N)", d)
    return ",".join(addrs)


class GetOp:
    """An asynchronous get in flight: done() polls, wait() returns the
    value's length (raising on error). The target buffer is kept alive
    until the op is waited for or dropped."""

    def __init__(self, pool, handle, keep, key):
        self._pool, self._h, self._keep, self._key = pool, handle, keep, key
        self._result = None

    def done(self):
        return self._h is None or bool(_lib().strata_mem_op_poll(self._h))

    def wait(self, timeout=None):
        if self._h is None:
            return self._result
        ms = -1 if timeout is None else int(timeout * 1000)
        n = _lib().strata_mem_op_wait(self._h, ms)
        if n == -11:  # EAGAIN: still in flight
            raise TimeoutError("strata.mem: get of %r still in flight" % self._key)
        _lib().strata_mem_op_free(self._h)
        self._h = None
        self._keep = None
        self._result = check(n, _name(self._key))
        return self._result

    def __del__(self):
        if getattr(self, "_h", None) is not None:
            _lib().strata_mem_op_free(self._h)
            self._h = None


class Pool(Closable):
    """A pool of mem nodes, dict-like. addrs: "host:port,..." or a list;
    None reads $STRATA_MEM, else the local cluster in local_dir
    ($STRATA_LOCAL_DIR). replicas: copies of each put (hot objects).
    token: the credential (its text or a file), None: $STRATA_TOKEN,
    $STRATA_TOKEN_FILE, or local_dir's admin token; a token reaches the
    keys of its mem scopes ("NS/..."). .addrs, .replicas and .timeout_ms
    keep what it was opened with."""

    def __init__(self, addrs: Optional[str] = None, replicas: int = 1, timeout_ms: int = 10000,
                 local_dir: Optional[str] = None, token: Optional[str] = None):
        if addrs is None:
            addrs = os.environ.get("STRATA_MEM") or local_addrs(local_dir)
        if not isinstance(addrs, str):
            addrs = ",".join(addrs)
        if isinstance(replicas, bool) or not isinstance(replicas, int) or \
                not 1 <= replicas <= MAX_REPLICAS:
            raise ValueError("strata.mem: replicas must be an integer in 1..%d, not %r"
                             % (MAX_REPLICAS, replicas))
        L = _lib()
        o = _Opts()
        L.strata_mem_opts_init(ctypes.byref(o), ctypes.sizeof(o))
        o.replicas = replicas
        o.timeout_ms = timeout_ms
        from strata.client import _resolve_token
        self._token = _resolve_token(token, local_dir).encode()
        o.token = self._token
        h = c_void_p()
        check(L.strata_mem_open(addrs.encode(), ctypes.byref(o), ctypes.byref(h)), addrs)
        self._h = h
        self.addrs = addrs
        self.replicas = replicas
        self.timeout_ms = timeout_ms

    def close(self):
        if self._h:
            _lib().strata_mem_close(self._h)
            self._h = None

    # ---- bytes ----
    def put(self, key: Any, value: Any, pin: bool = False, nx: bool = False) -> None:
        """Stores value (bytes-like, numpy array or CPU tensor: its raw
        bytes) under key."""
        k = _key(key)
        addr, n, keep = buffer_info(value, False)
        flags = (PIN if pin else 0) | (NX if nx else 0)
        check(_lib().strata_mem_put(self._h, k, addr, n, flags), _name(k))
        del keep

    def get_into(self, key: Any, buf: Any) -> int:
        """Fills buf (writable bytes-like, array or CPU tensor) with key's
        value, received straight into it. Returns the value's length."""
        k = _key(key)
        addr, n, keep = buffer_info(buf, True)
        r = _lib().strata_mem_get(self._h, k, addr, n)
        del keep
        return check(r, _name(k))

    def get(self, key: Any, default: Any = None) -> Any:
        k = _key(key)
        n = _lib().strata_mem_exists(self._h, k)
        if n == -2:
            return default
        while True:
            check(n, _name(k))
            b = bytearray(n)
            r = _lib().strata_mem_get(self._h, k, (ctypes.c_char * max(n, 1)).from_buffer(b)
                                      if n else None, n)
            if r == -105:  # ENOBUFS: it grew in between
                n = _lib().strata_mem_exists(self._h, k)
                continue
            if r == -2:
                return default
            check(r, _name(k))
            return bytes(b[:r])

    def get_async(self, key, buf):
        """Starts filling buf with key's value; returns a GetOp."""
        k = _key(key)
        addr, n, keep = buffer_info(buf, True)
        h = c_void_p()
        check(_lib().strata_mem_get_async(self._h, k, addr, n, ctypes.byref(h)),
              _name(k))
        return GetOp(self, h, (keep, buf), k)

    def prefetch(self, key):
        """Asks key's node to bring it into DRAM (from spill) ahead of need."""
        k = _key(key)
        check(_lib().strata_mem_prefetch(self._h, k), _name(k))

    def exists(self, key: Any) -> bool:
        """The value's length, or None."""
        n = _lib().strata_mem_exists(self._h, _key(key))
        return None if n == -2 else check(n, _name(key))

    def remove(self, key: Any) -> None:
        k = _key(key)
        check(_lib().strata_mem_remove(self._h, k), _name(k))

    def pin(self, key, pin=True):
        k = _key(key)
        check(_lib().strata_mem_pin(self._h, k, 1 if pin else 0), _name(k))

    def unpin(self, key):
        self.pin(key, False)

    def keys(self, prefix: str = "") -> List[str]:
        out = []

        def cb(_arg, key, _len):
            out.append(key.decode(errors="surrogateescape"))
            return 0
        check(_lib().strata_mem_list(self._h, _key(prefix) if prefix else None, _LIST_CB(cb),
                                     None))
        return [k for k in out if "\x1e" not in k]

    # ---- dict protocol ----
    def __getitem__(self, key):
        v = self.get(key, None)
        if v is None and self.exists(key) is None:
            raise KeyError(key)
        return v

    def __setitem__(self, key, value):
        self.put(key, value)

    def __delitem__(self, key):
        try:
            self.remove(key)
        except FileNotFoundError:
            raise KeyError(key) from None

    def __contains__(self, key):
        return self.exists(key) is not None

    def __iter__(self):
        return iter(self.keys())

    def __len__(self):
        return len(self.keys())

    # ---- batches ----
    def _items(self, n):
        return (_Item * max(n, 1))()

    def mput(self, mapping: Mapping[Any, Any], pin: bool = False) -> None:
        """Stores every key: value of mapping in one request per node."""
        pairs = list(mapping.items())
        items = self._items(len(pairs))
        keep = []
        for i, (k, v) in enumerate(pairs):
            addr, n, kp = buffer_info(v, False)
            kb = _key(k)
            keep.append((kp, kb))
            items[i].key, items[i].buf, items[i].len = kb, addr, n
            items[i].flags = PIN if pin else 0
        check(_lib().strata_mem_mput(self._h, items, len(pairs)))

    def mget_into(self, mapping):
        """Fills each buffer of mapping {key: buffer}; returns {key: length
        or None when absent}."""
        pairs = list(mapping.items())
        items = self._items(len(pairs))
        keep = []
        for i, (k, b) in enumerate(pairs):
            addr, n, kp = buffer_info(b, True)
            kb = _key(k)
            keep.append((kp, kb))
            items[i].key, items[i].buf, items[i].len = kb, addr, n
        _lib().strata_mem_mget(self._h, items, len(pairs))
        out = {}
        for i, (k, _) in enumerate(pairs):
            st = items[i].status
            if st == -2:
                out[k] = None
            else:
                check(st, str(k))
                out[k] = items[i].len
        return out

    def mget(self, keys: Iterable[Any]) -> Dict[Any, Any]:
        """{key: bytes or None} of keys, sized with one batched exists."""
        keys = list(keys)
        sizes = self.mexists(keys)
        bufs = {k: bytearray(n) for k, n in sizes.items() if n is not None}
        got = self.mget_into(bufs) if bufs else {}
        return {k: (bytes(bufs[k][:got[k]]) if got.get(k) is not None else None) for k in keys}

    def mexists(self, keys):
        keys = list(keys)
        items = self._items(len(keys))
        kbs = [_key(k) for k in keys]
        for i, kb in enumerate(kbs):
            items[i].key = kb
        _lib().strata_mem_mexists(self._h, items, len(keys))
        return {k: (items[i].len if items[i].status == 0 else None) for i, k in enumerate(keys)}

    def mremove(self, keys):
        keys = list(keys)
        items = self._items(len(keys))
        kbs = [_key(k) for k in keys]
        for i, kb in enumerate(kbs):
            items[i].key = kb
        _lib().strata_mem_mremove(self._h, items, len(keys))
        return [items[i].status == 0 for i in range(len(keys))]

    # ---- tensors and arrays ----
    def put_tensor(self, key: Any, t: Any, pin: bool = False) -> None:
        """Stores a CPU tensor or numpy array (made contiguous) and its
        dtype and shape."""
        import numpy as np
        kind = "numpy" if isinstance(t, np.ndarray) else "torch"
        if kind == "torch":
            t = t.detach().contiguous()
            if t.device.type != "cpu":
                t = t.cpu()
        else:
            t = np.ascontiguousarray(t)
        meta = json.dumps({"kind": kind, "dtype": str(t.dtype), "shape": list(t.shape)})
        self.put(_key(key) + META, meta.encode())
        self.put(key, t, pin=pin)

    put_array = put_tensor

    def meta(self, key):
        m = self.get(_key(key) + META)
        if m is None:
            raise KeyError(key)
        return json.loads(m)

    def get_tensor(self, key: Any, out: Any = None) -> Any:
        """Returns key's tensor (or array, as it was put): into out when
        given (filled in place), else a new one."""
        if out is not None:
            self.get_into(key, out)
            return out
        import numpy as np
        m = self.meta(key)
        if m["kind"] == "torch":
            import torch
            dt = getattr(torch, m["dtype"].split(".")[-1])
            out = torch.empty(m["shape"], dtype=dt)
        else:
            out = np.empty(m["shape"], dtype=np.dtype(m["dtype"]))
        self.get_into(key, out)
        return out

    get_array = get_tensor

    def remove_tensor(self, key):
        self.remove(key)
        try:
            self.remove(_key(key) + META)
        except FileNotFoundError:
            pass

    def stats(self) -> Dict[str, int]:
        s = _Stats()
        check(_lib().strata_mem_stats(self._h, ctypes.byref(s)))
        return {f: getattr(s, f) for f, _ in _Stats._fields_}
