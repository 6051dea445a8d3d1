"""Slurm on two hosts (issue 17, docs/slurm.md): a real slurmctld and two
slurmd, each slurmd on a host of its own: a network namespace with its own
address on a private bridge (tests/integration/netns.py), beside a Strata
compute daemon of that host declaring its GPUs and advertising that
address. Debian's slurmd has no multiple-slurmd support, so the hosts are
namespaces rather than NodeName aliases on one address.

    root namespace: slurmctld (slurmscriptd runs the burst buffer script),
        Strata's mgmt+meta+storage and mem daemons, all on the bridge's
        root-side address (root_ip), the composer on loopback
    host1 (netns, 10.213.N.11): slurmd -N host1, stratad compute (node 11)
    host2 (netns, 10.213.N.12): slurmd -N host2, stratad compute (node 12)

Shown: gres.conf from 'strata slurm gres --names host[1-2]' maps each
NodeName to its host's compute node; a job on each host writes and reads
through its slice from inside its namespace (with the strata CLI, and
through the SPANK plugin's mount where it was built), sees its STRATA_*
variables, and its GPUs are its host's (the composition's GPU blocks carry that
host's address); a job on both hosts (-N2, Slurm's 'Nodes=host[1-2]')
gets one GPU of each; scancel mid-job brings the inventory back to its
baseline. The hostlists of burst_buffer.lua and of 'strata slurm gres'
are checked directly too, bad ones refused with the reason.

Needs root (slurmd, namespaces); skips, saying why, without slurm-wlm or
where network namespaces cannot be made. Every namespace, daemon, mount
and job process is removed on every way out of the module.
"""

import ctypes
import json
import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

import netns
from conftest import (STRATA, STRATAD, Cluster, free_port, run_strata, sanitizer_reports,
                      spawn, wait_until)
from test_slurm import (GPUS, JOB_USER, SLURM_USER, Slurm, _make_dirs, _missing, _no_mount,
                        _stop, _unmount_all, _write_plugstack)
from test_slurm import _write_conf as write_conf
from test_slurm import slurm_logs  # noqa: F401 (a fixture, on this module's slurm)

HOSTS = ("host1", "host2")
COMPUTE_ID = {"host1": 11, "host2": 12}     # Strata node id of each host's compute daemon
POOL = 1 << 30
MEM_POOL = 256 << 20
SCRIPT = Path(__file__).resolve().parents[2] / "contrib" / "slurm" / "burst_buffer.lua"


class Hosts(Slurm):
    """Slurm of test_slurm.py, its slurmd in the namespaces of a Fabric."""

    def __init__(self, base):
        super().__init__(base)
        self.fabric = None
        self.k = {}             # host -> its index in the fabric
        self.slurmd = {}        # host -> Popen
        self.compute = []       # Popen of the compute daemons

    def ip(self, host):
        return self.fabric.node_ip(self.k[host])

    def start_slurmd(self, host):
        # nsenter, not ip netns exec: slurmd needs /sys/fs/cgroup.
        self.slurmd[host] = spawn(self.fabric.nsenter_prefix(self.k[host]) +
                                  ["slurmd", "-D", "-N", host, "-f", self.conf],
                                  log_path=self.base / "log" / ("slurmd-%s.out" % host),
                                  what="slurmd %s" % host, env=self.env())

    def node_states(self):
        out = self.cmd("sinfo", "-h", "-N", "-o", "%N %T").stdout
        return dict(l.split() for l in out.splitlines() if len(l.split()) == 2)

    def systems(self, name):
        """Oem.Strata (with Id) of the composition called name, or None."""
        for s in self.compose_json("list")["Oem"]["Strata"]["Systems"]:
            if s.get("Name") == name:
                return dict(s["Oem"]["Strata"], Id=s["Id"])
        return None

    def log(self):
        out = [super().log()]
        for h in HOSTS:
            p = self.base / "log" / ("slurmd-%s.log" % h)
            if p.exists():
                out.append("---- slurmd-%s.log (tail)\n%s" % (h, "\n".join(
                    p.read_text(errors="replace").splitlines()[-30:])))
        return "\n".join(out)


def _write_conf(s, ctld_port, slurmd_port):
    """test_slurm.py's slurm.conf, slurmctld on the bridge's root side,
    one NodeName a host at its address."""
    nodes = "\n".join(
        "NodeName={h} NodeAddr={ip} CPUs=2 RealMemory=1000 Gres=gpu:h100_80gb:{g} State=UNKNOWN"
        .format(h=h, ip=s.ip(h), g=GPUS) for h in HOSTS)
    write_conf(s, ctld_port, slurmd_port, ctld_ip=s.fabric.root_ip, nodes=nodes)


def _kill_namespace_procs(fabric):
    """SIGKILL to whatever still runs in the fabric's namespaces (a job's
    processes a dead slurmd left): the namespaces go only with them."""
    for name in list(fabric.nodes.values()):
        r = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True,
                           timeout=10)
        for pid in r.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)
            except (OSError, ValueError):
                pass


def _start_compute(s, host, node1_args):
    """Host's Strata compute daemon, in its namespace, advertising its
    address; the cluster key and mgmt of the local cluster."""
    keep = [a for a in node1_args if a.startswith("--node.key_file=")]
    data = s.base / "strata" / ("compute-%s" % host)
    data.mkdir()
    argv = s.fabric.exec_prefix(s.k[host]) + [
        STRATAD, "--data", data, "--node.id=%d" % COMPUTE_ID[host], "--node.services=compute",
        "--node.listen=%s:0" % s.ip(host), "--node.metrics_listen=127.0.0.1:0",
        "--node.insecure=true", "--mgmt.address=%s" % s.cluster_mgmt(),
        "--compute.gpus=%dxH100-80GB" % GPUS] + keep
    s.compute.append(spawn(argv, log_path=data / "stratad.log", what="compute %s" % host))


@pytest.fixture(scope="module")
def slurm():
    """The two hosts (named slurm: test_slurm.py's slurm_logs asks for it)."""
    why = _missing()
    if why:
        pytest.skip(why)
    ok, why = netns.available()
    if not ok:
        pytest.skip("network namespaces unavailable: %s" % why)
    netns.sweep_stale()
    base = Path(tempfile.mkdtemp(prefix="strata-slurmhosts-", dir="/tmp"))
    base.chmod(0o755)
    s = Hosts(base)
    s.fabric = netns.Fabric()
    try:
        s.fabric.create()
        for k, h in enumerate(HOSTS, start=1):
            s.fabric.add_node(k)
            s.k[h] = k
        _make_dirs(base, HOSTS)

        # Strata's control, storage and mem daemons on the bridge's root
        # side (reachable from both hosts; plain TCP, the cluster key
        # still signs), the composer on loopback (the burst buffer script
        # runs in this namespace).
        s.cluster = Cluster(base / "strata" / "cluster", run_strata)
        r = run_strata("local", "up", "--dir", s.cluster.dir, "--nodes", "1", "--mem", "1",
                       "--daemon-flags",
                       "--storage.capacity=%d --mem.capacity=%d --node.listen=%s:0 "
                       "--node.insecure=true" % (POOL, MEM_POOL, s.fabric.root_ip), timeout=90)
        s.cluster.reload()
        assert r.returncode == 0, r.stdout + r.stderr
        assert s.cluster_mgmt().startswith(s.fabric.root_ip + ":"), s.cluster_mgmt()
        node1 = json.loads((s.cluster.dir / "cluster.json").read_text())["nodes"][0]["args"]
        for h in HOSTS:
            _start_compute(s, h, node1)
        wait_until(lambda: len(s.compose_json("inventory")["Oem"]["Strata"]["Inventory"]
                               ["ComputeNodes"]) == len(HOSTS), 30, interval=0.2,
                   what="both compute daemons in the composer's inventory")

        r = s.strata("slurm", "install", "--conf-dir", s.etc, "--state-dir", base / "bbstate",
                     "--slurm-user", SLURM_USER)
        assert r.returncode == 0, r.stdout + r.stderr
        # Slurm's hostlist, in the inventory's order (node 11, node 12).
        r = s.strata("slurm", "gres", "--names", "host[1-2]", "--files", base / "dev" / "nvidia",
                     "--out", s.etc / "gres.conf")
        assert r.returncode == 0, r.stdout + r.stderr
        _write_conf(s, free_port(), free_port())
        # The SPANK plugin where it was built: slurmd's mounts are in the
        # root mount namespace (nsenter --net), strata-fuse in the host's
        # network namespace.
        _write_plugstack(s)

        s.start_slurmctld()
        for h in HOSTS:
            s.start_slurmd(h)
        wait_until(lambda: s.node_states() == {h: "idle" for h in HOSTS}, 60, interval=0.3,
                   what="host1 and host2 idle")
        s.wait_pool()
        yield s
    except BaseException:
        print(s.log())
        raise
    finally:
        try:
            s.drain(JOB_USER)
        finally:
            # Each step whatever the one before did: the namespaces go last,
            # once nothing runs in them.
            problems = []
            steps = [lambda p=p: _stop(p) for p in
                     list(s.slurmd.values()) + list(reversed(s.procs)) + s.compute]
            steps += [lambda: problems.extend("mount left behind: " + m
                                              for m in _unmount_all(base)),
                      lambda: _kill_namespace_procs(s.fabric),
                      lambda: s.cluster and s.cluster.stop_all(),
                      lambda: problems.extend(s.fabric.destroy())]
            for step in steps:
                try:
                    step()
                except Exception as e:      # noqa: BLE001 (the others still run)
                    problems.append("teardown: %r" % e)
            for h in HOSTS:
                log = s.base / "strata" / ("compute-%s" % h) / "stratad.log"
                if log.exists():
                    problems += sanitizer_reports(log.read_text(errors="replace"))
            shutil.rmtree(base, ignore_errors=True)
            assert not problems, "left behind or reported: %r" % problems


def test_each_host_has_its_own_address_and_gpus(slurm_logs):
    s = slurm_logs
    gres = (s.etc / "gres.conf").read_text()
    for h in HOSTS:
        # The compute daemon advertises its host's address; gres.conf maps
        # the NodeName to it.
        assert "# strata node %d at %s:" % (COMPUTE_ID[h], s.ip(h)) in gres, gres
        assert "slurm.conf: NodeName=%s Gres=gpu:h100_80gb:%d" % (h, GPUS) in gres, gres
        node = s.cmd("scontrol", "show", "node", h).stdout
        assert "NodeAddr=%s " % s.ip(h) in node and "Gres=gpu:h100_80gb:%d" % GPUS in node, node


def _gpus_of(s, job):
    """[(node, index, address)] of the GPU composition of job, or None."""
    c = s.systems("slurm-job-%s-gpus" % job)
    return c and (c["State"], sorted((g["Node"], g["Index"], g["Address"]) for g in c["Gpus"]))


JOB = """#BB_LUA strata pool=strata capacity=64M mem=16M
echo "node=$SLURMD_NODENAME addr=$(ip -4 -o addr show dev eth0 | awk '{{print $4}}')"
echo "vol=$STRATA_VOLUME mgmt=$STRATA_MGMT ns=$STRATA_MEM_NS token=${{STRATA_TOKEN:+set}}"
head -c 1048576 /dev/urandom > $W/in-$SLURM_JOB_ID
{strata} put -q $W/in-$SLURM_JOB_ID "$STRATA_VOLUME/data" && echo put=ok
mkdir -p $W/out-$SLURM_JOB_ID
{strata} get -q "$STRATA_VOLUME/data" $W/out-$SLURM_JOB_ID && \
  cmp $W/in-$SLURM_JOB_ID $W/out-$SLURM_JOB_ID/data && echo read=same
if [ -n "$STRATA_VOLUME_DIR" ]; then
  cmp $W/in-$SLURM_JOB_ID "$STRATA_VOLUME_DIR/data" && echo mount=same
fi
rm -rf $W/in-$SLURM_JOB_ID $W/out-$SLURM_JOB_ID
touch $W/ready-$SLURM_JOB_ID
# Until the test has seen it running (at most 60 s).
for i in $(seq 600); do [ -e $W/go-$SLURM_JOB_ID ] && break; sleep 0.1; done
echo done
"""


@pytest.mark.timeout(180)
def test_a_job_on_each_host_gets_its_hosts_gpus(slurm_logs):
    s = slurm_logs
    baseline = s.inventory()
    jobs = {}
    for h, ngpu in (("host1", 2), ("host2", 1)):
        path, out = s.script(JOB.format(strata=STRATA), name="on-%s" % h)
        r = s.cmd("sbatch", "--parsable", "-w", h, "--gres=gpu:%d" % ngpu, path, user=JOB_USER)
        assert r.returncode == 0, r.stderr
        jobs[h] = (r.stdout.strip().split(";")[0], out, ngpu)
    seen = {}
    for h, (job, out, ngpu) in jobs.items():
        # While it runs: its GPUs are composed, all of them its host's.
        seen[h] = wait_until(lambda: (lambda g: g if g and g[0] == "Composed" else None)(
            _gpus_of(s, job)), 60, interval=0.3, what="job %s's GPUs composed" % job)
        wait_until(lambda: (s.jobs / ("ready-%s" % job)).exists(), 60, interval=0.2,
                   what="job %s running" % job)
        (s.jobs / ("go-%s" % job)).touch()
    for h, (job, out, ngpu) in jobs.items():
        s.wait_gone(job)
        text = out.read_text()
        comp = s.wait_released(job)
        assert "node=%s addr=%s/24" % (h, s.ip(h)) in text, text
        assert "vol=/volumes/%s mgmt=%s ns=%s token=set" % (
            comp["Id"], s.cluster_mgmt(), comp["Id"]) in text, text
        assert "put=ok" in text and "read=same" in text and "done" in text, text
        # Through the SPANK plugin's strata-fuse mount on its host too.
        if _no_mount() is None:
            assert "mount=same" in text, text
        # Its GPUs: GPU 0..ngpu-1 of its host's compute node, at its address.
        assert [(g[0], g[1], g[2].rsplit(":", 1)[0]) for g in seen[h][1]] == \
            [(COMPUTE_ID[h], i, s.ip(h)) for i in range(ngpu)], seen[h]
        wait_until(lambda: _gpus_of(s, job)[0] == "Released", 30, interval=0.2,
                   what="job %s's GPUs released" % job)
    wait_until(lambda: s.inventory() == baseline, 30, interval=0.2,
               what="the inventory back to its baseline %r" % (baseline,))


@pytest.mark.timeout(180)
def test_a_job_on_both_hosts_and_scancel_releases_everything(slurm_logs):
    """-N2 --gres=gpu:1: Slurm prints the allocation as Nodes=host[1-2]
    (one line for both: the same CPUs and GPU index on each), which
    pre-run expands; the job gets GPU 0 of each host. scancel mid-job
    releases the slice, the memory and the GPUs, and deletes the volume."""
    s = slurm_logs
    baseline = s.inventory()
    path, out = s.script(JOB.format(strata=STRATA), name="both")
    r = s.cmd("sbatch", "--parsable", "-N2", "--gres=gpu:1", path, user=JOB_USER)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip().split(";")[0]
    try:
        wait_until(lambda: (s.jobs / ("ready-%s" % job)).exists(), 90, interval=0.3,
                   what="job %s running" % job)
    except AssertionError:
        print(s.cmd("scontrol", "show", "job", "-d", job).stdout)
        raise
    detail = s.cmd("scontrol", "show", "job", "-d", job).stdout
    assert "Nodes=host[1-2] " in detail, detail
    state, gpus = _gpus_of(s, job)
    assert state == "Composed" and [(g[0], g[1]) for g in gpus] == \
        [(COMPUTE_ID["host1"], 0), (COMPUTE_ID["host2"], 0)], gpus
    assert [g[2].rsplit(":", 1)[0] for g in gpus] == [s.ip("host1"), s.ip("host2")], gpus
    assert s.inventory()["gpus_free"] == baseline["gpus_free"] - 2
    comp = s.composition_of(job)
    text = out.read_text()
    assert "put=ok" in text and "read=same" in text, text
    assert s.cmd("scancel", job, user=JOB_USER).returncode == 0
    s.wait_gone(job)
    s.wait_released(job)
    wait_until(lambda: _gpus_of(s, job)[0] == "Released", 30, interval=0.2,
               what="job %s's GPUs released" % job)
    wait_until(lambda: s.inventory() == baseline, 30, interval=0.2,
               what="the inventory back to its baseline %r" % (baseline,))
    r = s.strata("stat", "/volumes/%s" % comp["Id"])
    assert r.returncode != 0, "volume /volumes/%s kept: %s" % (comp["Id"], r.stdout)
    assert s.node_states() == {h: "idle" for h in HOSTS}


def test_gres_names_take_a_hostlist(slurm_logs):
    """'strata slurm gres --names': Slurm's hostlist, expanded; one that
    is not one is refused with the reason."""
    s = slurm_logs
    r = s.strata("slurm", "gres", "--names", "n[1-3,5]")
    assert r.returncode == 2 and "--names gives 4 name(s), the inventory lists 2" in r.stderr, \
        r.stderr
    r = s.strata("slurm", "gres", "--names", "gpu[08-09]x")
    assert r.returncode == 0 and "NodeName=gpu08x Name=gpu" in r.stdout and \
        "NodeName=gpu09x Name=gpu" in r.stdout, r.stdout + r.stderr
    r = s.strata("slurm", "gres", "--names", "a,b")
    assert r.returncode == 0 and "NodeName=b Name=gpu" in r.stdout, r.stderr
    for bad, why in (("n[3-1]", "'n[3-1]': '3-1' is not N or N-M with N <= M"),
                     ("n[1-2", "'n[1-2' has a '[' without its ']'"),
                     ("n[a]", "'n[a]': 'a' is not N or N-M"),
                     ("n[1-2]x[3]", "'n[1-2]x[3]' is not NAME or PREFIX[RANGES]SUFFIX"),
                     ("n[]", "'n[]' has an empty name or range"),
                     ("n1,", "'n1,' ends with ','"),
                     ("n[1,]", "'n[1,]': '1,' is not N or N-M"),
                     ("n[0-99999]", "'n[0-99999]' names more than 1024 nodes"),
                     ("", "an empty hostlist")):
        # Refused before the composer is asked (there is none at port 1).
        r = run_strata("slurm", "gres", "--names", bad, "--mgmt", "127.0.0.1:1",
                       "--composer", "127.0.0.1:1")
        assert r.returncode == 2 and "strata: slurm gres: --names: " + why in r.stderr, \
            (bad, r.stderr)


def _lua_expand(cases):
    """burst_buffer.lua's expand_hostlist on each case, run by Slurm's Lua
    (liblua5.1, the library burst_buffer/lua links): 'a b c' or 'error:
    why' per case."""
    try:
        lua = ctypes.CDLL("liblua5.1.so.0")
    except OSError as e:
        pytest.skip("no liblua5.1 (slurm-wlm's burst_buffer/lua needs it): %s" % e)
    lua.luaL_newstate.restype = ctypes.c_void_p
    lua.luaL_openlibs.argtypes = [ctypes.c_void_p]
    lua.luaL_loadbuffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                    ctypes.c_char_p]
    lua.lua_pcall.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    lua.lua_tolstring.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lua.lua_tolstring.restype = ctypes.c_char_p
    lua.lua_close.argtypes = [ctypes.c_void_p]
    # The script as Slurm loads it (a chunk), its local function returned.
    code = ("slurm = { SUCCESS = 0, ERROR = -1, log_error = function() end,"
            " log_info = function() end }\n"
            "local expand = (function()\n" + SCRIPT.read_text() +
            "\nreturn expand_hostlist\nend)()\n"
            "local out = {}\nfor _, s in ipairs({" + ",".join("[==[%s]==]" % c for c in cases) +
            "}) do\n  local t, e = expand(s)\n"
            "  out[#out + 1] = t and table.concat(t, ' ') or ('error: ' .. e)\nend\n"
            "return table.concat(out, '\\n')\n").encode()
    L = lua.luaL_newstate()
    try:
        lua.luaL_openlibs(L)
        assert lua.luaL_loadbuffer(L, code, len(code), b"=burst_buffer.lua") == 0, \
            lua.lua_tolstring(L, -1, None)
        rc = lua.lua_pcall(L, 0, 1, 0)
        text = lua.lua_tolstring(L, -1, None).decode()
        assert rc == 0, text
        return text.split("\n")
    finally:
        lua.lua_close(L)


def test_burst_buffer_expands_hostlists():
    got = _lua_expand(["n[1-3,5]", "host[1-2]", "a,b[01-03]x,c", "n1", "n[3-1]", "n[1-2",
                       "n[a]", "n[1-2]x[3]", "n[]", "n1,", ",n1", "n[1,]", "n[0-99999]", ""])
    bad = "is not N or N-M with N <= M, comma-separated (such as n[1-3,5])"
    one = "is not NAME or PREFIX[RANGES]SUFFIX (one bracket per name)"
    assert got == [
        "n1 n2 n3 n5", "host1 host2", "a b01x b02x b03x c", "n1",
        "error: 'n[3-1]': '3-1' " + bad,
        "error: 'n[1-2' " + one,
        "error: 'n[a]': 'a' " + bad,
        "error: 'n[1-2]x[3]' " + one,
        "error: 'n[]': '' " + bad,
        "error: 'n1,' ends with ','",
        "error: ',n1' " + one,
        "error: 'n[1,]': '1,' " + bad,
        "error: 'n[0-99999]' names more than 4096 nodes",
        "error: an empty hostlist",
    ], got
