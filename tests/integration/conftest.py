"""Harness for the integration tests: real stratad processes on free ports.

- STRATA_BUILD (default ./build-asan, relative to the repository root) names
  the build tree holding src/stratad/stratad and src/cli/strata.
- Every process the harness starts runs in its own process group and is
  recorded in a session-wide registry; fixtures stop what they started, and
  whatever is left is killed with SIGKILL at session end, at interpreter exit
  and on SIGTERM/SIGHUP (Ctrl-C runs the finalizers through pytest).
- Every wait has a deadline; each test phase (setup, call, teardown) runs
  under an alarm (STRATA_TEST_TIMEOUT seconds, default 120; override per
  test with @pytest.mark.timeout(SECONDS)), so no test can hang.

Fixtures for tests:
  daemon_factory  make(node_id=1, extra_flags=(), start=True) -> Daemon
  daemon          one started Daemon
  strata          strata(*args, timeout=30) -> CompletedProcess (the CLI)
  run_stratad     run_stratad(*args, timeout=15) -> CompletedProcess (a
                  stratad expected to exit by itself, e.g. on bad config)
  cluster         cluster(n, daemon_flags=None) -> Cluster ('strata local up')
"""

import atexit
import ctypes
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import strata_wire  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _build_dir():
    b = Path(os.environ.get("STRATA_BUILD", "./build-asan"))
    if not b.is_absolute():
        b = REPO / b
    return b.resolve()


BUILD = _build_dir()
STRATAD = BUILD / "src" / "stratad" / "stratad"
STRATA = BUILD / "src" / "cli" / "strata"

DEFAULT_TEST_TIMEOUT = float(os.environ.get("STRATA_TEST_TIMEOUT", "120"))
TEARDOWN_TIMEOUT = 60

SANITIZER_RE = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:|"
                          r"UndefinedBehaviorSanitizer|ThreadSanitizer")


def proc_env(extra=None):
    """The environment of every process the harness starts."""
    env = dict(os.environ)
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    env["STRATA_STRATAD"] = str(STRATAD)
    env.update(extra or {})
    return env


# ---------------------------------------------------------------------------
# The registry of every process started, and the last-resort killer.

class _Registry:
    def __init__(self):
        self.pids = {}          # pid -> what it is
        self.orphans = set()    # daemons of 'strata local': reaped by us

    def add(self, pid, what, orphan=False):
        self.pids[pid] = what
        if orphan:
            self.orphans.add(pid)

    def discard(self, pid):
        self.pids.pop(pid, None)
        self.orphans.discard(pid)

    def kill_all(self):
        """SIGKILL to every recorded process (and its group) still alive.
        Returns what was killed."""
        killed = []
        for pid, what in list(self.pids.items()):
            if _alive(pid) and _looks_like_ours(pid):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append("%d (%s)" % (pid, what))
                except OSError:
                    pass
            _reap(pid)
            self.pids.pop(pid, None)
        return killed


REGISTRY = _Registry()


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def _alive(pid):
    _reap(pid)
    try:
        with open("/proc/%d/stat" % pid) as f:
            # A zombie is not alive (state Z after the comm field).
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _looks_like_ours(pid):
    """Guards against pid reuse for processes that are not our children."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            cmd = f.read()
    except OSError:
        return False
    return b"strata" in cmd


def _on_fatal_signal(signum, frame):
    REGISTRY.kill_all()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


atexit.register(REGISTRY.kill_all)
for _sig in (signal.SIGTERM, signal.SIGHUP):
    signal.signal(_sig, _on_fatal_signal)


def _become_subreaper():
    """Daemons started by 'strata local up' outlive the CLI that forked
    them. As a child subreaper we inherit them and reap them as soon as they
    exit (as a real init does), so 'strata local down' does not wait on an
    unreaped zombie when PID 1 is slow to reap."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(36, 1, 0, 0, 0) != 0:      # PR_SET_CHILD_SUBREAPER
            return
    except (OSError, AttributeError):
        return

    def reap(pid):
        try:
            return os.waitpid(pid, os.WNOHANG)[0] == pid
        except OSError:
            return False

    def unknown_zombie_children():
        """Zombie children that no Popen of ours owns (orphans not yet
        recorded, e.g. of a failed 'local up')."""
        me = os.getpid()
        out = set()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % name) as f:
                    rest = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if rest[0] == "Z" and int(rest[1]) == me:
                out.add(int(name))
        return {p for p in out if p not in REGISTRY.pids or p in REGISTRY.orphans}

    def reap_orphans():
        seen = set()
        n = 0
        while True:
            for pid in list(REGISTRY.orphans):
                if reap(pid):
                    REGISTRY.orphans.discard(pid)
            n += 1
            if n % 20 == 0:
                # A zombie seen twice, 200 ms apart, and still not recorded
                # as a Popen child of ours, is an orphan: reap it.
                now = unknown_zombie_children()
                for pid in now & seen:
                    reap(pid)
                seen = now
            time.sleep(0.01)

    threading.Thread(target=reap_orphans, name="orphan-reaper", daemon=True).start()


_become_subreaper()


def spawn(argv, log_path=None, what=None, env=None, cwd=None):
    """Starts argv in its own process group, output to log_path (or pipes),
    and records it. env: extra variables. Returns the Popen."""
    kw = dict(env=proc_env(env), start_new_session=True, stdin=subprocess.DEVNULL,
              cwd=str(cwd) if cwd else None)
    if log_path is not None:
        logf = open(log_path, "ab")
        kw.update(stdout=logf, stderr=subprocess.STDOUT)
    else:
        logf = None
        kw.update(stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        p = subprocess.Popen([str(a) for a in argv], **kw)
    finally:
        if logf:
            logf.close()
    REGISTRY.add(p.pid, what or Path(str(argv[0])).name)
    return p


def run(argv, timeout=30, env=None, cwd=None):
    """Runs a command to its end (SIGKILL to its group past timeout, then
    raises subprocess.TimeoutExpired). env: extra variables. Returns a
    CompletedProcess with text."""
    p = spawn(argv, env=env, cwd=cwd)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.communicate(timeout=10)
        REGISTRY.discard(p.pid)
        raise
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait(timeout=10)
        REGISTRY.discard(p.pid)
        raise
    REGISTRY.discard(p.pid)
    return subprocess.CompletedProcess(p.args, p.returncode,
                                       out.decode(errors="replace"),
                                       err.decode(errors="replace"))


def run_strata(*args, timeout=30, env=None):
    """CompletedProcess of 'strata ARGS' (env: extra variables)."""
    return run([STRATA, *[str(a) for a in args]], timeout=timeout, env=env)


# The environment a client gets no credential from (run() adds env to
# the test's own, where the cluster fixtures name a token).
NO_CRED = {"STRATA_TOKEN": "", "STRATA_TOKEN_FILE": "", "STRATA_MGMT": ""}


def strata_nocred(*args, env=None, timeout=60):
    """'strata ARGS' with no credential from the environment."""
    return run_strata(*args, timeout=timeout, env=dict(NO_CRED, **(env or {})))


def signed_token(cluster_dir, path, *args):
    """'strata token create --key DIR/cluster.key --out PATH ARGS' (a 0600
    file, signed offline); returns path."""
    r = strata_nocred("token", "create", "--key", Path(cluster_dir) / "cluster.key",
                      "--out", path, *args)
    assert r.returncode == 0, r.stderr
    return path


def wait_until(pred, timeout, interval=0.02, what="condition"):
    """Polls pred() until it returns a true value, which it returns; raises
    AssertionError past timeout."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s" % (timeout, what))
        time.sleep(interval)


_handed_ports = set()


def _ephemeral_range():
    try:
        lo, hi = open("/proc/sys/net/ipv4/ip_local_port_range").read().split()
        return int(lo), int(hi)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host="127.0.0.1"):
    """A TCP port of host that was free a moment ago (bound, then closed):
    for a daemon to listen on, or a closed port to fail against.

    Drawn below the kernel's ephemeral range, so that no outgoing connection
    of another process can take it before the daemon binds it (a port the
    kernel handed out with bind(0) could be, and once was: slurmctld failed
    with "Address already in use" in CI), checked free on the wildcard
    address as well as host, and never the same twice in one run."""
    lo = _ephemeral_range()[0]
    base, top = (10000, lo) if lo > 12000 else (lo // 2, lo)
    rnd = random.SystemRandom()
    for _ in range(200):
        port = rnd.randrange(base, top)
        if port in _handed_ports:
            continue
        try:
            for addr in {host, "0.0.0.0"}:
                with socket.socket() as s:
                    s.bind((addr, port))
        except OSError:
            continue
        _handed_ports.add(port)
        return port
    with socket.socket() as s:  # a crowded machine: the kernel's choice
        s.bind((host, 0))
        return s.getsockname()[1]


def pid_alive(pid):
    return _alive(pid)


def parse_metrics(text):
    """Prometheus text -> {name or name{labels}: float}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, value = line.rpartition(" ")
        out[name.strip()] = float(value)
    return out


def fetch_metrics_text(port, timeout=5):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=timeout) as r:
        return r.status, r.headers.get("Content-Type", ""), r.read().decode()


def sanitizer_reports(text):
    return [l for l in text.splitlines() if SANITIZER_RE.search(l)]


# ---------------------------------------------------------------------------
# One daemon.

class DaemonError(Exception):
    pass


class LogFile:
    """The log of a process the harness started, at self.log_path."""

    @property
    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def log_tail(self, n=40):
        return "\n".join(self.log.splitlines()[-n:])


class Daemon(LogFile):
    """A stratad on loopback, ports picked by the kernel (port 0)."""

    def __init__(self, data_dir, node_id=1):
        self.data = Path(data_dir)
        self.node_id = node_id
        self.log_path = self.data / "stratad.log"
        self.proc = None
        self.addr = None
        self.metrics_port = None
        self.pid = None
        self.returncode = None
        # Set by a test that checks sanitizer output itself.
        self.ignore_sanitizer = False

    # -- life cycle --

    def start(self, extra_flags=(), timeout=20, env=None):
        """Starts the daemon and waits for DATA/stratad.addr. Flags in
        extra_flags come after the defaults, so they override them; env:
        extra environment variables."""
        if self.running:
            raise DaemonError("daemon %s already running" % self.node_id)
        self.data.mkdir(parents=True, exist_ok=True)
        addr_file = self.data / "stratad.addr"
        if addr_file.exists():
            addr_file.unlink()
        argv = [STRATAD, "--data", self.data,
                "--node.listen=127.0.0.1:0", "--node.metrics_listen=127.0.0.1:0"]
        if self.node_id is not None:
            argv.append("--node.id=%d" % self.node_id)
        argv += list(extra_flags)
        self.returncode = None
        self.proc = spawn(argv, self.log_path, "stratad node %s" % self.node_id,
                          env=env, cwd=self.data.parent)
        self.pid = self.proc.pid
        deadline = time.monotonic() + timeout
        while True:
            lines = self._read_addr_file(addr_file)
            if lines and int(lines[2]) == self.pid:
                self.addr = lines[0]
                self.metrics_port = int(lines[1])
                return self
            rc = self.proc.poll()
            if rc is not None:
                self._exited(rc)
                raise DaemonError("stratad exited with %d during start-up; log:\n%s"
                                  % (rc, self.log_tail()))
            if time.monotonic() >= deadline:
                self.kill9()
                raise DaemonError("stratad did not write %s within %d s; log:\n%s"
                                  % (addr_file, timeout, self.log_tail()))
            time.sleep(0.02)

    @staticmethod
    def _read_addr_file(path):
        try:
            lines = path.read_text().split("\n")
        except OSError:
            return None
        if len(lines) < 3 or not lines[2].strip().isdigit():
            return None
        return lines

    def _exited(self, rc):
        self.returncode = rc
        REGISTRY.discard(self.pid)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_exit(self, timeout=10):
        """Waits for the process to end; returns its exit code (negative:
        killed by that signal). Raises AssertionError past timeout."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("stratad pid %d still running after %s s" % (self.pid, timeout))
        self._exited(rc)
        return rc

    def stop(self, sig=signal.SIGTERM, timeout=10):
        """Sends sig and waits for the exit; SIGKILL and AssertionError if it
        does not exit in time. Returns the exit code."""
        if self.proc is None:
            return None
        if not self.running:
            self._exited(self.proc.returncode)
            return self.returncode
        self.proc.send_signal(sig)
        try:
            return self.wait_exit(timeout)
        except AssertionError:
            self.kill9()
            raise AssertionError("stratad pid %d did not stop within %s s of signal %d; log:\n%s"
                                 % (self.pid, timeout, sig, self.log_tail()))

    def kill9(self):
        if self.proc is None:
            return None
        if self.running:
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        rc = self.proc.wait(timeout=10)
        self._exited(rc)
        return rc

    # -- the log --

    def log_size(self):
        """A mark for wait_log(since=...)."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def wait_log(self, pattern, timeout=10, since=0):
        """Waits for a log line matching the regex; returns the match."""
        rx = re.compile(pattern)

        def find():
            return rx.search(self.log[since:])
        try:
            return wait_until(find, timeout, 0.05, "log pattern %r" % pattern)
        except AssertionError as e:
            raise AssertionError("%s in %s; log:\n%s" % (e, self.log_path, self.log_tail()))

    def sanitizer_reports(self):
        return sanitizer_reports(self.log)

    # -- talking to it --

    @property
    def host(self):
        return strata_wire.parse_addr(self.addr)[0]

    @property
    def port(self):
        return strata_wire.parse_addr(self.addr)[1]

    def client(self, hello=True, timeout=10):
        return strata_wire.Client(self.addr, timeout=timeout, hello=hello)

    def metrics_text(self):
        return fetch_metrics_text(self.metrics_port)[2]

    def metrics(self):
        return parse_metrics(self.metrics_text())

    def metric(self, name):
        return self.metrics()[name]

    def __repr__(self):
        return "<Daemon node %s pid %s addr %s>" % (self.node_id, self.pid, self.addr)


# ---------------------------------------------------------------------------
# A cluster from 'strata local up'.

class ClusterNode(LogFile):
    def __init__(self, rec):
        self.id = rec["id"]
        self.addr = rec["addr"]
        self.pid = rec["pid"]
        self.data = Path(rec["data"])
        self.services = rec.get("services", "")
        lines = Daemon._read_addr_file(self.data / "stratad.addr")
        self.metrics_port = int(lines[1]) if lines else None
        self.log_path = self.data / "stratad.log"

    @property
    def alive(self):
        return pid_alive(self.pid)

    key = None      # the cluster key: a wire client proves it

    def client(self, hello=True, timeout=10, key=True, token=None):
        """A wire client; by default it presents the cluster key."""
        return strata_wire.Client(self.addr, timeout=timeout, hello=hello, token=token,
                                  key=self.key if key is True else key)

    def kill9(self):
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except OSError:
            os.kill(self.pid, signal.SIGKILL)
        wait_until(lambda: not pid_alive(self.pid), 10, what="pid %d to die" % self.pid)

    def __repr__(self):
        return "<ClusterNode %d pid %d %s>" % (self.id, self.pid, self.addr)


# Clusters from 'strata local up' that are up, oldest first: the newest
# one's admin token is in $STRATA_TOKEN_FILE for every client a test
# starts, and its cluster key in $STRATA_TEST_KEY_FILE for the C drivers
# that write chunks of no file (chunk_torture, fault_driver: storage
# serves those to daemons only, a token needs a file's chunk capability);
# with none up the variables are unset.
_TOKEN_CLUSTERS = []


def _name_token():
    if _TOKEN_CLUSTERS:
        os.environ["STRATA_TOKEN_FILE"] = str(_TOKEN_CLUSTERS[-1].token_file)
        os.environ["STRATA_TEST_KEY_FILE"] = str(_TOKEN_CLUSTERS[-1].dir / "cluster.key")
    else:
        os.environ.pop("STRATA_TOKEN_FILE", None)
        os.environ.pop("STRATA_TEST_KEY_FILE", None)


def present_token_of(c):
    """From now on clients present c's admin token (c.token_file, c.dir's
    cluster.key): c is the newest cluster up."""
    if c not in _TOKEN_CLUSTERS:
        _TOKEN_CLUSTERS.append(c)
    _name_token()


def forget_token_of(c):
    """c stopped: clients present the newest remaining cluster's token."""
    if c in _TOKEN_CLUSTERS:
        _TOKEN_CLUSTERS.remove(c)
    _name_token()


def restart_control_node(c, sig, extra_flags=(), between=None):
    """Signals node 1 (mgmt, meta, composer) and starts it again with its
    command line (extra_flags appended: they override), records it in
    cluster.json; returns its Popen once it serves. between(node), if
    given, runs once the old process is gone and before the new starts."""
    import json
    node = c.mgmt_node
    with open("/proc/%d/cmdline" % node.pid, "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    argv += list(extra_flags)
    os.kill(node.pid, sig)
    wait_until(lambda: not pid_alive(node.pid), 30, what="node 1 to exit")
    REGISTRY.discard(node.pid)
    addr_file = node.data / "stratad.addr"
    if addr_file.exists():
        addr_file.unlink()
    if between:
        between(node)
    # Its fixed port can be taken for a moment by a peer's reconnection
    # (a loopback connect may pick the freed port as its own): the start
    # is then refused, and tried again.
    for attempt in range(20):
        p = spawn(argv, node.log_path, "stratad node 1 (restarted)", cwd=c.dir)

        def started():
            if p.poll() is not None:
                return "exited"
            return addr_file.exists() and addr_file.read_text().split("\n")[2:3] == [str(p.pid)]
        if wait_until(started, 30, what="node 1 to restart") is True:
            break
        REGISTRY.discard(p.pid)
        # Or the previous attempt, refused its port, had not yet let go
        # of the data directory's lock (stratad.lock).
        last = node.log.splitlines()[-1]
        assert "Address already in use" in last or "is in use by another stratad" in last, \
            node.log_tail()
        time.sleep(0.2)
    else:
        raise AssertionError("node 1 could not take its port again")
    j = json.loads((c.dir / "cluster.json").read_text())
    j["nodes"][0]["pid"] = p.pid
    (c.dir / "cluster.json").write_text(json.dumps(j, indent=2))
    c.reload()
    return p


class Cluster:
    def __init__(self, directory, strata_fn):
        self.dir = Path(directory)
        self.strata = strata_fn
        self.nodes = []

    def up(self, nodes=1, daemon_flags=None, timeout=60, local_args=()):
        """local_args: more 'local up' options (--mem N, --compute N, ...)."""
        args = ["local", "up", "--dir", self.dir, "--nodes", str(nodes)] + list(local_args)
        if daemon_flags:
            args += ["--daemon-flags", daemon_flags]
        r = self.strata(*args, timeout=timeout)
        self.reload()
        if r.returncode != 0:
            raise AssertionError("strata local up failed (%d):\n%s%s"
                                 % (r.returncode, r.stdout, r.stderr))
        # Every client the test starts presents the admin token of the
        # newest cluster still up.
        present_token_of(self)
        return r

    def _restore_token(self):
        forget_token_of(self)

    def reload(self):
        """Reads DIR/cluster.json (if any) and records its pids."""
        import json
        path = self.dir / "cluster.json"
        try:
            j = json.loads(path.read_text())
        except (OSError, ValueError):
            self.nodes = []
            return self.nodes
        self.nodes = [ClusterNode(n) for n in j.get("nodes", [])]
        for n in self.nodes:
            n.key = self.key
            REGISTRY.add(n.pid, "cluster node %d" % n.id, orphan=True)
        return self.nodes

    @property
    def key(self):
        """The cluster key 'local up' made (bytes), or None."""
        try:
            return bytes.fromhex((self.dir / "cluster.key").read_text().strip())
        except (OSError, ValueError):
            return None

    @property
    def token_file(self):
        """The admin token 'local up' wrote (mode 0600)."""
        return self.dir / "admin.token"

    def node(self, node_id):
        return next(n for n in self.nodes if n.id == node_id)

    @property
    def storage_nodes(self):
        return [n for n in self.nodes if "storage" in n.services.split(",")]

    @property
    def mgmt_node(self):
        return next((n for n in self.nodes if "mgmt" in n.services.split(",")), None)

    def status(self, timeout=30):
        return self.strata("local", "status", "--dir", self.dir, timeout=timeout)

    def down(self, timeout=60):
        r = self.strata("local", "down", "--dir", self.dir, timeout=timeout)
        return r

    def stop_all(self):
        """'strata local down' (when the cluster is up), then SIGKILL to any
        of its processes that survived it. Returns the problems seen."""
        self._restore_token()
        problems = []
        pids = self.pids()
        if (self.dir / "cluster.json").exists():
            try:
                self.down()
            except subprocess.TimeoutExpired:
                problems.append("strata local down timed out in %s" % self.dir)
        for pid in pids:
            if pid_alive(pid):
                problems.append("cluster pid %d survived 'local down'" % pid)
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            REGISTRY.discard(pid)
        return problems

    def pids(self):
        return [n.pid for n in self.nodes]

    def sanitizer_reports(self):
        out = []
        for n in self.nodes:
            out += ["node %d: %s" % (n.id, l) for l in sanitizer_reports(n.log)]
        return out


# ---------------------------------------------------------------------------
# Per-phase alarm: no test hangs.

class PhaseTimeout(BaseException):
    """Raised from SIGALRM; BaseException so 'except Exception' in a test
    does not swallow it."""


def _on_alarm(signum, frame):
    raise PhaseTimeout("test phase exceeded its time limit (SIGALRM)")


def _item_timeout(item):
    m = item.get_closest_marker("timeout")
    if m and m.args:
        return float(m.args[0])
    return DEFAULT_TEST_TIMEOUT


def _alarm_wrapper(seconds):
    old = signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    return old


def _alarm_clear(old):
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)


_USE_OWN_ALARM = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    if not _USE_OWN_ALARM:
        yield
        return
    old = _alarm_wrapper(_item_timeout(item))
    try:
        yield
    finally:
        _alarm_clear(old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if not _USE_OWN_ALARM:
        yield
        return
    old = _alarm_wrapper(_item_timeout(item))
    try:
        yield
    finally:
        _alarm_clear(old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    if not _USE_OWN_ALARM:
        yield
        return
    old = _alarm_wrapper(TEARDOWN_TIMEOUT)
    try:
        yield
    finally:
        _alarm_clear(old)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def pytest_configure(config):
    global _USE_OWN_ALARM
    if config.pluginmanager.hasplugin("timeout"):
        # pytest-timeout is installed: let it enforce the limit (it also
        # reads @pytest.mark.timeout), with our default if none was given.
        _USE_OWN_ALARM = False
        if not getattr(config.option, "timeout", None):
            config.option.timeout = DEFAULT_TEST_TIMEOUT
    else:
        config.addinivalue_line("markers",
                                "timeout(seconds): time limit of each phase of this test")
    for p in (STRATAD, STRATA):
        if not os.access(p, os.X_OK):
            raise pytest.UsageError(
                "%s not found: build it first (make asan-build) or set STRATA_BUILD "
                "to a build tree (now %s)" % (p, BUILD))


def pytest_sessionfinish(session, exitstatus):
    killed = REGISTRY.kill_all()
    if killed:
        sys.stderr.write("\nintegration harness: killed leftover processes: %s\n"
                         % ", ".join(killed))


def _failed(request):
    for when in ("setup", "call"):
        rep = getattr(request.node, "rep_" + when, None)
        if rep is not None and rep.failed:
            return True
    return False


# ---------------------------------------------------------------------------
# Fixtures.

@pytest.fixture
def strata():
    """strata(*args, timeout=30) -> CompletedProcess of the CLI."""
    return run_strata


@pytest.fixture
def run_stratad(tmp_path):
    """run_stratad(*args, timeout=15, env=None, cwd=tmp_path) ->
    CompletedProcess of a stratad expected to exit on its own (bad config,
    --help). Runs in the test's tmp dir so a default ./strata-data lands
    there, never in the checkout."""
    def fn(*args, timeout=15, env=None, cwd=None):
        return run([STRATAD, *[str(a) for a in args]], timeout=timeout, env=env,
                   cwd=cwd or tmp_path)
    return fn


def _make_daemon_factory(base_dir, request):
    made = []
    counter = [0]

    def make(node_id=1, extra_flags=(), start=True, name=None, env=None):
        counter[0] += 1
        d = Daemon(Path(base_dir) / (name or "d%d" % counter[0]), node_id)
        made.append(d)
        if start:
            d.start(extra_flags, env=env)
        return d

    def finish():
        problems = []
        if any(d.running for d in made):
            time.sleep(0.1)     # let closes by the test reach the daemons
        for d in made:
            try:
                if d.running:
                    d.stop(signal.SIGTERM, timeout=10)
            except AssertionError as e:
                problems.append(str(e))
            finally:
                if d.running:
                    d.kill9()
        failed = _failed(request)
        for d in made:
            reports = d.sanitizer_reports()
            if reports and not d.ignore_sanitizer:
                problems.append("sanitizer report in %s:\n%s" % (d.log_path, d.log_tail(60)))
            elif failed and d.proc is not None:
                print("---- log of %r (%s) ----\n%s" % (d, d.log_path, d.log_tail()))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)

    return make, finish


@pytest.fixture
def daemon_factory(tmp_path, request):
    """make(node_id=1, extra_flags=(), start=True, name=None, env=None) -> Daemon.
    All are stopped (SIGTERM, then SIGKILL) at teardown, and their logs
    checked for sanitizer reports."""
    make, finish = _make_daemon_factory(tmp_path, request)
    request.addfinalizer(finish)
    return make


@pytest.fixture
def daemon(daemon_factory):
    """A started stratad with no services."""
    return daemon_factory()


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory, request):
    """One stratad for a whole module (tests that do not stop it)."""
    make, finish = _make_daemon_factory(tmp_path_factory.mktemp("shared"), request)
    request.addfinalizer(finish)
    return make()


def _make_cluster_factory(base_dir, request):
    made = []

    def make(n=3, daemon_flags=None, name=None, timeout=60, local_args=()):
        c = Cluster(Path(base_dir) / (name or "cluster%d" % (len(made) + 1)), run_strata)
        made.append(c)
        c.up(n, daemon_flags, timeout=timeout, local_args=local_args)
        return c

    def finish():
        problems = []
        for c in made:
            if (c.dir / "cluster.json").exists():
                c.reload()
            problems += c.stop_all()
            problems += c.sanitizer_reports()
            if _failed(request):
                for n in c.nodes:
                    print("---- log of %r ----\n%s" % (n, "\n".join(n.log.splitlines()[-30:])))
        if problems:
            pytest.fail("\n".join(problems), pytrace=False)

    return make, finish


@pytest.fixture
def cluster(tmp_path, request):
    """cluster(n, daemon_flags=None) -> Cluster started by 'strata local up'.
    Teardown runs 'strata local down' and SIGKILLs whatever survives."""
    make, finish = _make_cluster_factory(tmp_path, request)
    request.addfinalizer(finish)
    return make


@pytest.fixture(scope="module")
def module_cluster(tmp_path_factory, request):
    """cluster(n, ...) for a whole module: the clusters it makes are
    stopped, and their logs checked for sanitizer reports, after the
    module's last test."""
    make, finish = _make_cluster_factory(tmp_path_factory.mktemp("module-cluster"), request)
    request.addfinalizer(finish)
    return make


@pytest.fixture(scope="module")
def shared_cluster(tmp_path_factory, request):
    """One 3-storage-node cluster for a whole module: for tests that each
    work in a directory of their own and stop nothing. Stopped, and its
    logs checked for sanitizer reports, after the module's last test."""
    make, finish = _make_cluster_factory(tmp_path_factory.mktemp("shared-cluster"), request)
    request.addfinalizer(finish)
    return make(3)
