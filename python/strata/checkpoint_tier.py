"""Two-tier checkpoints: memory pool first, storage plane behind
(strata.checkpoint.save(..., pool=); docs/python.md, "Two-tier saves").

A save puts the snapshot into the memory pool (each piece pinned on R
distinct mem nodes), then commits by renaming a directory PATH that holds
pool.json into place on the storage plane: the record names every piece
(key, tensor, offset, length, CRC32C) and carries the tree. A background
drain then writes the checkpoint to the storage plane with the normal
save (strata_ckpt_save replaces the pool-only PATH by a full one in one
exchange) and writes pool.json again, marked drained, into the new PATH.

    PATH/pool.json                       committed in the pool, not drained
    PATH/manifest.json, shard-*, pool.json   drained, pool copy kept
    PATH/manifest.json, shard-*          drained, pool copy released

load() reads the pool copy when every piece is there and passes its CRC,
else the storage copy when drained, else raises IncompleteCheckpointError.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional, Tuple

from . import checkpoint as _ck
from ._lib import strerror
from .client import RENAME_EXCHANGE, RENAME_NOREPLACE, buffer_info
from .mem import MAX_REPLICAS, MAX_VALUE, PIN, Pool
from .mem import _lib as _mem_lib

FORMAT = "strata-checkpoint-pool"
RECORD = "pool.json"
THREADS = 4             # puts and gets in flight (each a thread on its own lane)


def _s(path):
    return os.fsdecode(os.fspath(path))


def _err(code, msg):
    return OSError(code, "strata: " + msg)


def _nodes(addrs):
    return sorted({a.strip() for a in addrs.split(",") if a.strip()})


class TierOptions:
    """save()'s pool arguments, checked."""

    def __init__(self, pool, replicas, keep, piece, prefix, hold):
        if not isinstance(pool, Pool):
            raise TypeError("strata: checkpoint save: pool must be a strata.mem.Pool, not %s"
                            % type(pool).__name__)
        if pool._h is None:
            raise ValueError("strata: checkpoint save: the mem pool '%s' is closed" % pool.addrs)
        r = pool.replicas if replicas is None else replicas
        n = len(_nodes(pool.addrs))
        if isinstance(r, bool) or not isinstance(r, int) or r < 1:
            raise ValueError("strata: checkpoint save: pool_replicas must be an integer of at "
                             "least 1, not %r" % (r,))
        if r > n:
            raise ValueError("strata: checkpoint save: pool_replicas=%d but the mem pool '%s' "
                             "has %d node(s): each piece must be on %d distinct nodes"
                             % (r, pool.addrs, n, r))
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ValueError("strata: checkpoint save: pool_keep must be a positive integer, "
                             "not %r" % (keep,))
        if isinstance(piece, bool) or not isinstance(piece, int) or \
                not 4096 <= piece <= MAX_VALUE:
            raise ValueError("strata: checkpoint save: pool_piece must be in 4096..%d bytes, "
                             "not %r" % (MAX_VALUE, piece))
        if not isinstance(prefix, str) or not prefix or len(prefix) > 512 or \
                "\x1e" in prefix or prefix.startswith("/"):
            raise ValueError("strata: checkpoint save: pool_prefix must be a key prefix of "
                             "1..512 characters, not %r" % (prefix,))
        self.user_pool, self.replicas, self.keep = pool, r, keep
        self.piece, self.prefix, self.hold = piece, prefix.rstrip("/"), hold
        self.wait_s = 600       # rank 0 waits for the other ranks' parts (as wait_ms)

    def pool(self):
        return _with_replicas(self.user_pool, self.replicas)


_handles_lock = threading.Lock()
_handles = {}


def _with_replicas(p, r):
    """A handle on pool p's nodes whose puts write, and whose gets try, r
    copies (libstrata's replicas): p itself, or one opened beside it
    (same addresses and token), kept for later calls."""
    if p.replicas == r:
        return p
    key = (p.addrs, r, p._token)
    with _handles_lock:
        h = _handles.get(key)
        if h is None or h._h is None:
            h = Pool(p.addrs, replicas=r, timeout_ms=p.timeout_ms, token=p._token.decode())
            _handles[key] = h
    return h


def _everywhere(p):
    """A handle on p's nodes whose removes reach every node a key can be
    on, whatever the replicas it was put with."""
    return _with_replicas(p, min(len(_nodes(p.addrs)), MAX_REPLICAS))


def check_save(path, tier, async_, overlap, rank, world_size):
    if not async_:
        raise ValueError("strata: checkpoint save of %r: a two-tier save (pool=) is "
                         "asynchronous; drop async_=False" % _s(path))
    if overlap:
        raise ValueError("strata: checkpoint save of %r: overlap=True does not apply to a "
                         "two-tier save (pool=)" % _s(path))
    if not 0 <= rank < world_size:
        raise ValueError("strata: checkpoint save of %r: rank %d is not in 0..%d (world_size "
                         "%d)" % (_s(path), rank, world_size - 1, world_size))


# ---------------------------------------------------------------------------
# Records on the storage plane.

def _write_json(client, path, obj):
    data = json.dumps(obj).encode()
    with client.open(path, "wb", buffering=0) as f:
        mv = memoryview(data)
        while mv:
            mv = mv[f.write(mv):]
        f.fsync()


def read_record(client, path):
    """PATH's pool.json, or None when PATH has none."""
    try:
        with client.open("%s/%s" % (_s(path), RECORD), "rb") as f:
            data = f.read()
    except (FileNotFoundError, NotADirectoryError):
        return None
    rec = json.loads(data)
    if not isinstance(rec, dict) or rec.get("format") != FORMAT:
        raise _err(errno.EINVAL, "checkpoint %r: %s is not a %s record"
                   % (_s(path), RECORD, FORMAT))
    return rec


def _has_manifest(client, path):
    return client.exists("%s/manifest.json" % _s(path))


def _dirkey(directory):
    return hashlib.sha1(os.fsencode(_s(directory).rstrip("/") or "/")).hexdigest()[:16]


def _parent(path):
    p = _s(path).rstrip("/")
    return p.rsplit("/", 1)[0] or "/"


def _part_keys(part):
    return ["%s/%d" % (part["keys"], i) for i in range(len(part["pieces"]))]


def _keys(rec):
    """Every piece's key, every rank's."""
    return [k for part in rec["ranks"] for k in _part_keys(part)]


def _open_pool(rec, pool, everywhere=False):
    """(handle, whether the caller closes it) to read rec's pieces through
    (gets try rec's replicas in turn), or with everywhere to remove them:
    beside pool when a Pool, else (True) opened on the addresses rec
    records."""
    if pool is not True and not isinstance(pool, Pool):
        raise TypeError("strata: pool must be a strata.mem.Pool or True, not %s"
                        % type(pool).__name__)
    if isinstance(pool, Pool):
        return (_everywhere(pool) if everywhere else _with_replicas(pool, rec["replicas"])), False
    n = len(_nodes(rec["addrs"]))
    return Pool(rec["addrs"], replicas=min(n, MAX_REPLICAS) if everywhere else
                min(int(rec["replicas"]), n)), True


def _remove(rec, pool, keys):
    """Removes keys from the pool of rec (best effort: a node that is down
    keeps its copies until it restarts empty; with no pool they are left
    to the next save's sweep)."""
    if pool is None or pool is False:
        return
    try:
        p, mine = _open_pool(rec, pool, everywhere=True)
        try:
            for i in range(0, len(keys), 4096):
                p.mremove(keys[i:i + 4096])
        finally:
            if mine:
                p.close()
    except (OSError, ValueError):
        pass


def _release(client, path, rec, pool, remove_record=True):
    """Removes rec's pieces from the pool (_remove), then PATH's pool.json."""
    _remove(rec, pool, _keys(rec))
    if remove_record:
        try:
            client.remove("%s/%s" % (_s(path), RECORD))
        except FileNotFoundError:
            pass


def _commit(client, path, tmp, tag, rec, replace, pool):
    """Writes rec as tmp/pool.json and renames tmp into place at path (the
    way strata_ckpt_save commits); on failure removes tmp. A replaced
    two-tier checkpoint's pool copy is released."""
    try:
        _write_json(client, "%s/%s" % (tmp, RECORD), rec)
        try:
            client.rename(tmp, path, RENAME_NOREPLACE)
            return
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
            if not replace:
                raise FileExistsError(errno.EEXIST, "strata: checkpoint %r exists and "
                                      "replace=False" % path) from None
        try:
            client.rename(tmp, path, RENAME_EXCHANGE)
            old = tmp
        except OSError:
            old = "%s.old-%s" % (path, tag)
            client.rename(path, old)
            try:
                client.rename(tmp, path)
            except OSError:
                client.rename(old, path)
                raise
    except BaseException:
        client.rmtree(tmp, missing_ok=True)
        raise
    prev = read_record(client, old)
    if prev is not None:
        _release(client, old, prev, pool, remove_record=False)
    client.rmtree(old, missing_ok=True)


# ---------------------------------------------------------------------------
# Saving.

class TieredSaveHandle(_ck.SaveHandle):
    """A two-tier save: wait() blocks until it is committed in the memory
    pool (and raises its error); wait_drained() until it is also on the
    storage plane (releasing a held drain). committed_s and drained_s:
    seconds from save() to each."""

    def __init__(self, path, hold):
        super().__init__(path)
        self._committed = threading.Event()
        self._go = threading.Event()
        if not hold:
            self._go.set()
        self.drain_error = None
        self.committed_s = self.drained_s = None

    def done(self) -> bool:
        return self._committed.is_set()

    def wait(self, timeout: Optional[float] = None) -> Any:
        return self._await(self._committed, timeout, "not yet committed in the pool")

    def release_drain(self) -> None:
        """Lets a drain held by hold_drain=True start."""
        self._go.set()

    def drained(self) -> bool:
        return self._ev.is_set()

    def wait_drained(self, timeout: Optional[float] = None) -> Any:
        self._go.set()
        self._await(self._ev, timeout, "not yet drained")
        if self.drain_error is not None:
            raise self.drain_error
        return self.path

    def _settle(self):
        self.wait_drained()


def _pieces(layout, piece):
    """[(tensor index, offset in it, length)]: each tensor cut at piece
    bytes."""
    out = []
    for i, (_, _, _, _, nb) in enumerate(layout):
        for off in range(0, nb, piece):
            out.append((i, off, min(piece, nb - off)))
    return out


def _to_pool(mp, path, rec, part, addrs_of):
    """Puts every piece of part (CRC32C first) with THREADS threads; on
    any failure removes what was put and raises."""
    L, crc = _mem_lib(), _ck._lib().strata_crc32c
    keys = [k.encode() for k in _part_keys(part)]

    def one(i):
        a, n = addrs_of(i)
        part["pieces"][i][3] = crc(0, a, n)
        return L.strata_mem_put(mp._h, keys[i], a, n, PIN)

    with ThreadPoolExecutor(THREADS) as ex:
        rcs = list(ex.map(one, range(len(keys))))
    bad = [(i, rc) for i, rc in enumerate(rcs) if rc < 0]
    if bad:
        _remove(rec, mp, _part_keys(part))
        i, rc = bad[0]
        raise _err(-rc, "two-tier save of %r: putting piece '%s' into the mem pool '%s' on %d "
                   "nodes failed: %s (%d of %d pieces failed; nothing was committed)"
                   % (path, keys[i].decode(), mp.addrs, rec["replicas"], strerror(rc),
                      len(bad), len(keys)))


def _part_name(rank):
    return "pool-%05d.json" % rank


def _gather(client, tmp, world_size, rec, pool, wait_s):
    """Rank 0 of a sharded save: waits (wait_s at most) for every rank's
    part in tmp; a rank that failed leaves pool-RRRRR.err, which ends the
    wait. Returns the parts in rank order; on failure removes the pieces
    of the parts that came and raises."""
    parts, deadline, pause = {}, time.monotonic() + wait_s, 0.005
    while True:
        for name in client.listdir(tmp):
            if name.startswith("pool-") and name.endswith(".json") and name not in parts:
                with client.open("%s/%s" % (tmp, name), "rb") as f:
                    parts[name] = json.loads(f.read())
        errs = [n for n in client.listdir(tmp) if n.startswith("pool-") and n.endswith(".err")]
        if len(parts) == world_size or errs or time.monotonic() > deadline:
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    if len(parts) == world_size:
        return [parts[_part_name(r)] for r in range(world_size)]
    _remove(rec, pool, [k for p in parts.values() for k in _part_keys(p)])
    if errs:
        with client.open("%s/%s" % (tmp, errs[0]), "rb") as f:
            why = json.loads(f.read())
        raise _err(errno.EIO, "two-tier save: rank %d failed: %s" % (int(errs[0][5:10]), why))
    missing = sorted(set(range(world_size)) - {p["rank"] for p in parts.values()})
    raise _err(errno.ETIMEDOUT, "two-tier save: rank(s) %s put no part in %s within %d s"
               % (",".join(map(str, missing)), tmp, wait_s))


def _mkdir(client, d):
    try:
        client.mkdir(d)
    except FileExistsError:
        pass        # another rank made it


def _write_part(client, tmp, name, obj):
    """tmp/name, appearing whole (written aside, then renamed)."""
    _write_json(client, "%s/%s.w" % (tmp, name), obj)
    client.rename("%s/%s.w" % (tmp, name), "%s/%s" % (tmp, name))


def save_tiered(client, path, leaves, meta, tier, keep_last, replace, io, stats,
                snapshot_threads, rank=0, world_size=1, tag=None):
    given, path = path, _s(path)
    t0 = time.perf_counter()
    buf, layout = _ck._plan(leaves)
    base = buffer_info(buf, True)[0]
    try:
        _ck._snapshot(leaves, buf, layout, threads=snapshot_threads)
    except BaseException:
        _ck._give_buffer(buf)
        raise
    if stats is not None:
        stats["snapshot_s"] = time.perf_counter() - t0
    h = TieredSaveHandle(given, tier.hold)
    now = time.time_ns()
    parent = _parent(path)
    sid = "%x-%d-r%d" % (now, os.getpid(), rank)
    pieces = _pieces(layout, tier.piece)
    part = {"rank": rank, "keys": "%s/%s/%s" % (tier.prefix, _dirkey(parent), sid),
            "piece": tier.piece, "bytes": sum(n for _, _, _, _, n in layout), "meta": meta,
            "tensors": [{"name": nm, "dtype": dt, "shape": list(sh), "length": nb}
                        for nm, dt, sh, _, nb in layout],
            "pieces": [[t, off, n, 0] for t, off, n in pieces]}
    rec = {"format": FORMAT, "version": 1, "created_ns": now, "world_size": world_size,
           "addrs": tier.user_pool.addrs, "replicas": tier.replicas, "drained": False,
           "ranks": [part]}
    ptag = "pool-%s" % tag if world_size > 1 else "pool-%d-%d" % (os.getpid(), now)
    tmp = "%s.tmp-%s" % (path, ptag)

    def addrs_of(i):
        t, off, n = pieces[i]
        return base + layout[t][3] + off, n

    def run():
        st = {}
        try:
            mp = tier.pool()
            try:
                up = mp.stats()
            except OSError as e:
                raise _err(e.errno or errno.ECONNREFUSED, "two-tier save of %r: no node of "
                           "the mem pool '%s' answers (%s)" % (path, mp.addrs, e)) from None
            if up["nodes_up"] < tier.replicas:
                raise _err(errno.EHOSTUNREACH, "two-tier save of %r: %d of the %d nodes of the "
                           "mem pool '%s' answer, fewer than pool_replicas=%d"
                           % (path, up["nodes_up"], up["nodes"], mp.addrs, tier.replicas))
            t1 = time.perf_counter()
            _to_pool(mp, path, rec, part, addrs_of)
            st["pool_put_s"] = time.perf_counter() - t1
            try:
                if world_size > 1:
                    _mkdir(client, tmp)
                    _write_part(client, tmp, _part_name(rank), part)
                else:
                    client.mkdir(tmp)
                if rank == 0:
                    if world_size > 1:
                        rec["ranks"] = _gather(client, tmp, world_size, rec, mp, tier.wait_s)
                    _commit(client, path, tmp, ptag, rec, replace, tier.user_pool)
            except BaseException:
                _remove(rec, mp, _keys(rec) if rank == 0 else _part_keys(part))
                raise
            h.committed_s = st["committed_s"] = time.perf_counter() - t0
        except BaseException as e:      # handed to wait()
            h.error = e
            if world_size > 1 and rank != 0:
                try:        # ends rank 0's wait at once
                    _mkdir(client, tmp)
                    _write_part(client, tmp, "pool-%05d.err" % rank, str(e))
                except (OSError, ValueError):
                    pass
        h._committed.set()
        try:
            if h.error is None:
                h._go.wait()
                t1 = time.perf_counter()
                _ck._persist(client, path, layout, base, meta, rank, world_size,
                             tag + "-drain" if tag else None, 0, True,
                             io["depth"], io["io_size"], io["writers"], st)
                if rank == 0:
                    rec["drained"] = True
                    rec["drained_ns"] = time.time_ns()
                    _write_json(client, "%s/%s" % (path, RECORD), rec)
                h.drained_s = st["drained_s"] = time.perf_counter() - t0
                st["drain_s"] = time.perf_counter() - t1
                if rank != 0:
                    pass        # rank 0 commits, prunes and releases
                elif keep_last:
                    prune_tiered(client, parent, keep_last, tier.user_pool)
                    _ck.check(_ck._lib().strata_ckpt_prune(client.handle, os.fsencode(parent),
                                                           keep_last), parent)
                if rank == 0:
                    _keep_newest(client, parent, tier, rec)
        except BaseException as e:
            h.drain_error = e
        finally:
            _ck._give_buffer(buf)
            if stats is not None:
                stats.update(st)
            with _ck._pending_lock:
                if h in _ck._pending:
                    _ck._pending.remove(h)
            h._ev.set()

    with _ck._pending_lock:
        _ck._pending.append(h)
    h.thread = threading.Thread(target=run, name="strata-ckpt-tier", daemon=True)
    h.thread.start()
    return h


# ---------------------------------------------------------------------------
# Listing, retention.

def _entries(client, directory):
    """[(created_ns, name, path, has manifest, pool record or None)] of
    directory's committed checkpoints, newest first (ties: name, as
    strata_ckpt_prune orders them)."""
    d = _s(directory).rstrip("/") or "/"
    out = []
    for e in client.scandir(d):
        name = os.fsdecode(e.name)
        if ".tmp-" in name or ".old-" in name or not e.is_dir():
            continue
        p = "%s/%s" % ("" if d == "/" else d, name)
        try:
            rec = read_record(client, p)
        except (OSError, ValueError):
            rec = None
        created, man = None, False
        try:
            with client.open(p + "/manifest.json", "rb") as f:
                m = json.loads(f.read())
            if isinstance(m, dict) and m.get("format") == "strata-checkpoint":
                created, man = int(m.get("created_ns", 0)), True
        except (OSError, ValueError):
            pass
        if created is None and rec is not None:
            created = int(rec.get("created_ns", 0))
        if created is not None:
            out.append((created, name, p, man, rec))
    out.sort(key=lambda x: (x[0], x[1]), reverse=True)
    return out


def _complete(rec, pool):
    """Whether every piece of rec is in the pool (on some replica)."""
    try:
        p, mine = _open_pool(rec, pool)
    except OSError:
        return False
    try:
        return all(p.exists(k) is not None for k in _keys(rec))
    except OSError:
        return False
    finally:
        if mine:
            p.close()


def latest_tiered(client, directory, pool, found):
    """The newest of found (the newest on the storage plane) and the
    pool-only checkpoints of directory whose pool copy is complete."""
    try:
        entries = _entries(client, directory)
    except FileNotFoundError:
        return found            # as strata_ckpt_latest: no directory, no checkpoint
    for created, name, p, man, rec in entries:
        if man:
            return os.fsencode(p)
        if rec is not None and _complete(rec, pool):
            return os.fsencode(p)
    return found


def prune_tiered(client, directory, keep_last, pool):
    """Releases the pool copies of directory's checkpoints past the
    keep_last newest and removes those of them not drained (the drained
    ones are left to strata_ckpt_prune). Returns how many were removed."""
    removed = 0
    for created, name, p, man, rec in _entries(client, directory)[keep_last:]:
        if rec is None:
            continue
        _release(client, p, rec, pool)
        if not man:
            client.rmtree(p, missing_ok=True)
            removed += 1
    return removed


def _keep_newest(client, directory, tier, rec):
    """After a drain: releases the pool copies of the drained two-tier
    checkpoints of directory past the tier.keep newest, and removes keys
    under this directory's prefix that no record names and that are
    older than rec (left by a process killed between its puts and its
    commit, or by a checkpoint removed without strata.checkpoint.prune)."""
    live, n = set(), 0
    for created, name, p, man, r in _entries(client, directory):
        if r is None:
            continue
        n += 1
        if n > tier.keep and r.get("drained") and man:
            _release(client, p, r, tier.user_pool)
        else:
            live.update(part["keys"] for part in r["ranks"])
    head = "%s/%s/" % (tier.prefix, _dirkey(directory))
    try:
        keys = tier.user_pool.keys(head)
    except OSError:
        return
    stale = set()
    for k in keys:
        base = k.rsplit("/", 1)[0]
        sid = base[len(head):]
        try:
            older = int(sid.split("-", 1)[0], 16) < rec["created_ns"]
        except ValueError:
            continue
        if base not in live and older:
            stale.add(k)
    stale = sorted(stale)
    for i in range(0, len(stale), 4096):
        try:
            _everywhere(tier.user_pool).mremove(stale[i:i + 4096])
        except OSError:
            pass


# ---------------------------------------------------------------------------
# Loading.

def _read_pool(rec, parts, pool, pairs):
    """Fills each destination of pairs [(tensor record, buffer)] from the
    pieces of parts (ranks of rec), each checked against its CRC32C.
    Returns None, or why the pool copy cannot be used."""
    try:
        p, mine = _open_pool(rec, pool)
    except OSError as e:
        return "the mem pool '%s' cannot be opened: %s" % (rec["addrs"], e)
    L, crc = _mem_lib(), _ck._lib().strata_crc32c
    dst, keep = {}, []
    for t, x in pairs:
        a, n, k = buffer_info(x, True) if t["length"] else (0, 0, None)
        keep.append(k)
        dst[(t["rank"], t["i"])] = a
    jobs = [(part["rank"], piece, key) for part in parts
            for piece, key in zip(part["pieces"], _part_keys(part))]
    keys = [key for _, _, key in jobs]

    def one(i):
        rk, (ti, off, n, want), _ = jobs[i]
        a = dst[(rk, ti)] + off
        r = L.strata_mem_get(p._h, keys[i].encode(), a, n)
        if r < 0:
            return "piece '%s': %s" % (keys[i], strerror(r))
        if r != n:
            return "piece '%s': %d bytes, not %d" % (keys[i], r, n)
        if crc(0, a, n) != want:
            return "piece '%s': CRC32C mismatch" % keys[i]
        return None

    try:
        with ThreadPoolExecutor(THREADS) as ex:
            bad = [r for r in ex.map(one, range(len(keys))) if r]
    finally:
        if mine:
            p.close()
    del keep
    if bad:
        return "%s (%d of %d pieces unusable)" % (bad[0], len(bad), len(keys))
    return None


def explain_missing(client, path):
    """Raises a FileNotFoundError naming the pool when path, not found as a
    checkpoint on the storage plane, is one committed in the pool only."""
    try:
        rec = read_record(client, path)
    except (OSError, ValueError):
        return
    if rec is not None:
        raise FileNotFoundError(errno.ENOENT, "strata: checkpoint %r is in the memory pool "
                                "only (not drained to the storage plane yet): load it with "
                                "pool= (a strata.mem.Pool on %s)" % (_s(path), rec["addrs"]))


def load_tiered(client, path, into, pool, allow_pickle, stats,
                rank=None) -> Optional[Tuple[Any]]:
    """(tree,) when path is a two-tier checkpoint read from its pool copy;
    None when path is to be read from the storage plane (no pool.json, or
    the pool copy unusable and the checkpoint drained); raises
    IncompleteCheckpointError when neither copy is complete."""
    try:
        rec = read_record(client, path)
    except (OSError, ValueError) as e:      # an unreadable record: as a lost pool copy
        rec, bad = None, e
    else:
        bad = None
    if bad is not None:
        if stats is not None:
            stats["pool_error"] = "%s: %s" % (RECORD, bad)
        if _has_manifest(client, path):
            return None
        raise _ck.IncompleteCheckpointError(
            errno.ENODATA, "strata: checkpoint %r is lost: its %s cannot be read (%s) and it "
            "was not drained to the storage plane" % (_s(path), RECORD, bad))
    if rec is None:
        return None
    parts = [p for p in rec["ranks"] if rank is None or p["rank"] == rank]
    if not parts:
        raise ValueError("strata: checkpoint %r has no rank %r (world size %d)"
                         % (_s(path), rank, rec["world_size"]))
    by_name = {(p["rank"], t["name"]): dict(t, i=i, rank=p["rank"])
               for p in parts for i, t in enumerate(p["tensors"])}
    trees, pairs, fixups = _ck._restore_plan([(p["rank"], p["meta"]) for p in parts], by_name,
                                             into, allow_pickle)
    why = _read_pool(rec, parts, pool, pairs)
    if why is None:
        if stats is not None:
            stats["source"] = "pool"
        return (_ck._restore_finish(path, trees, fixups),)
    if stats is not None:
        stats["pool_error"] = why
    if _has_manifest(client, path):
        return None
    raise _ck.IncompleteCheckpointError(
        errno.ENODATA, "strata: checkpoint %r is lost: its memory-pool copy is incomplete (%s) "
        "and it was not drained to the storage plane; load the previous checkpoint "
        "(strata.checkpoint.latest(dir, pool=...) skips it)" % (_s(path), why))
