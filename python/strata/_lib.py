"""Loads libstrata for the ctypes binding (no build step, no foreign package).

Every module of the binding declares the prototypes it uses on the CDLL
returned by lib(); errors come back as negative codes, turned into Python
exceptions by check().
"""
import ctypes
import errno
import os
import threading

_LIB = None
# Loading the library and declaring prototypes happen once, under this
# lock: threads that make their first calls at the same moment would
# otherwise race in ctypes' attribute cache (one thread's getattr can
# replace a function object another thread already declared, and a call
# through the undeclared one passes the handle as a 32-bit int).
_LOCK = threading.Lock()


def _candidates():
    env = os.environ.get("STRATA_LIB")
    if env:
        yield env
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    for build in (os.environ.get("STRATA_BUILD"), os.path.join(root, "build"),
                  os.path.join(root, "build-asan")):
        if build:
            yield os.path.join(build, "libstrata.so")
    yield "libstrata.so.0"


def lib():
    """The loaded libstrata (ctypes.CDLL), found through $STRATA_LIB,
    $STRATA_BUILD/libstrata.so, the repository's build trees, then the
    system's library path."""
    if _LIB is not None:
        return _LIB
    with _LOCK:
        return _load()


def _load():
    global _LIB
    if _LIB is not None:
        return _LIB
    errors = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            continue
        try:
            _LIB = ctypes.CDLL(path)
            break
        except OSError as e:
            errors.append(f"{path}: {e}")
    if _LIB is None:
        raise OSError(errno.ENOENT, "cannot load libstrata (set STRATA_LIB or STRATA_BUILD): "
                      + "; ".join(errors))
    _LIB.strata_strerror.restype = ctypes.c_char_p
    _LIB.strata_strerror.argtypes = [ctypes.c_int]
    return _LIB


_declared = set()


def declare(protos):
    """lib() with the prototypes in protos ({name: (restype, argtypes)})
    declared. Each module of the binding keeps its own table and calls this
    before every use; the table is applied once."""
    L = lib()
    if id(protos) in _declared:
        return L
    with _LOCK:
        if id(protos) not in _declared:
            for name, (res, args) in protos.items():
                fn = getattr(L, name)
                fn.restype = res
                fn.argtypes = args
            _declared.add(id(protos))
    return L


def strerror(code):
    return lib().strata_strerror(code).decode()


def check(rc, path=None):
    """Returns rc when >= 0; raises the OSError subclass matching -rc
    (FileNotFoundError for -ENOENT, ...) with the path in the message."""
    if rc >= 0:
        return rc
    code = -rc
    msg = strerror(rc)
    if 0 < code < 4096:
        if path is not None:
            raise OSError(code, msg, path)
        raise OSError(code, msg)
    # Strata's own codes: an OSError with EIO and the real code attached.
    e = OSError(errno.EIO, msg, path) if path is not None else OSError(errno.EIO, msg)
    e.strata_code = rc
    raise e


class Closable:
    """Calls close() when a with block ends and when the object is
    collected (errors at collection are dropped)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
