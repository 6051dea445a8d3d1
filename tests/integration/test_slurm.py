"""Slurm (issue 17, docs/slurm.md): a real slurmctld and slurmd, started
here from a generated slurm.conf, with Strata's burst_buffer/lua script
installed by 'strata slurm install' and gres.conf written by 'strata slurm
gres'. Jobs are submitted as 'nobody' (burst_buffer/lua refuses root's
burst buffers) and check what a job sees and what it leaves behind:

- a job writes and reads through its slice and sees STRATA_* variables;
- malformed '#BB_LUA strata' lines are refused at sbatch with the reason;
- two jobs that together ask more than the pool holds run one after the
  other, the second held as BurstBufferResources; two jobs over the memory
  pool too, the second waiting in stage-in;
- scancel mid-job releases everything: the inventory returns to its
  baseline and the volume is gone;
- a job writing past its capacity gets EDQUOT;
- the job of docs/slurm.md runs as it is written there.

One host: slurm-wlm (Debian's, 22.05) runs with auth/none, one slurmd
(Debian's build has no multiple-slurmd support) declaring the composer's
GPUs (File= of dummy device files). Needs root (slurmd starts jobs as
their users; slurmctld runs as the 'slurm' user the package makes); skips,
saying why, when slurm-wlm is not installed (scripts/deps.sh installs it).
"""

import json
import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import (BUILD, REGISTRY, STRATA, Cluster, free_port, run_strata, spawn,
                      wait_until)

SLURM_USER = "slurm"
JOB_USER = "nobody"
OWNER_USER = "daemon"       # a job's user other than nobody (Debian's uid 1)
POOL = 2 << 30              # --storage.capacity of the one storage daemon, R=1
MEM_POOL = 512 << 20
GPUS = 2
SPANK = BUILD / "src" / "slurm" / "spank_strata.so"
STRATA_FUSE = BUILD / "src" / "fuse" / "strata-fuse"


def _no_mount():
    """Why the SPANK plugin cannot be tried here, or None."""
    if not SPANK.exists():
        return "spank_strata.so was not built (no slurm/spank.h: libslurm-dev)"
    if not os.path.exists("/dev/fuse") or not shutil.which("fusermount3"):
        return "no /dev/fuse or fusermount3"
    if not STRATA_FUSE.exists():
        return "strata-fuse was not built"
    return None


def _missing():
    for prog in ("slurmctld", "slurmd", "sbatch", "squeue", "scancel", "scontrol"):
        if not shutil.which(prog):
            return "slurm-wlm is not installed (no '%s'; scripts/deps.sh installs it)" % prog
    if not os.path.exists("/usr/lib/x86_64-linux-gnu/slurm-wlm/burst_buffer_lua.so") and \
            not any(Path(p).glob("**/burst_buffer_lua.so") for p in ("/usr/lib", "/usr/lib64")):
        return "slurm-wlm has no burst_buffer/lua plugin"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs as their users"
    for u in (SLURM_USER, JOB_USER, OWNER_USER):
        try:
            pwd.getpwnam(u)
        except KeyError:
            return "no user '%s' (slurm-wlm's package makes 'slurm')" % u
    return None


class Slurm:
    """The daemons and the directories of one test module."""

    def __init__(self, base):
        self.base = base
        self.etc = base / "etc"
        self.jobs = base / "jobs"
        self.conf = self.etc / "slurm.conf"
        self.cluster = None
        self.procs = []
        self.nseq = 0

    def env(self):
        """The environment of Slurm's commands, and of the jobs they
        submit: no STRATA_* (a job's come from the burst buffer)."""
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_CONF": str(self.conf),
                "HOME": str(self.jobs), "LANG": "C"}

    def cmd(self, *args, user=None, timeout=30):
        argv = [str(a) for a in args]
        if user:
            argv = ["runuser", "-u", user, "--"] + argv
        return subprocess.run(argv, env=self.env(), cwd=str(self.jobs), capture_output=True,
                              text=True, timeout=timeout)

    def strata(self, *args, timeout=30):
        return run_strata(*args, "--dir", self.cluster.dir, timeout=timeout)

    def cluster_mgmt(self):
        return json.loads((self.cluster.dir / "cluster.json").read_text())["mgmt"]

    def compose_json(self, *args):
        r = self.strata("compose", *args, "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    def inventory(self):
        inv = self.compose_json("inventory")["Oem"]["Strata"]["Inventory"]
        return {"storage": inv["Storage"]["Used"], "memory": inv["Memory"]["Used"],
                "gpus_free": inv["Gpus"]["Free"]}

    def composition_of(self, job):
        """The composition named slurm-job-JOB (its Oem.Strata), or None."""
        for s in self.compose_json("list")["Oem"]["Strata"]["Systems"]:
            if s.get("Name") == "slurm-job-%s" % job:
                return dict(s["Oem"]["Strata"], Id=s["Id"])
        return None

    def script(self, body, name=None):
        """A job script in jobs/ (readable by the job's user); its output
        goes to jobs/NAME.out."""
        self.nseq += 1
        name = name or "job%d" % self.nseq
        path = self.jobs / (name + ".sh")
        out = self.jobs / (name + ".out")
        # W: a directory the job's user writes in (its HOME is /nonexistent).
        lines = body.split("\n")
        n = next((i for i, l in enumerate(lines) if not l.startswith("#")), len(lines))
        head, rest = "\n".join(lines[:n]), "\n".join(lines[n:])
        # (An empty line before the directives: Slurm and the script skip it.)
        text = "#!/bin/bash\n#SBATCH -o %s\n#SBATCH -t 2\n\n%s\nW=%s\n%s" % (out, head, self.jobs, rest)
        path.write_text(text)
        path.chmod(0o755)
        return path, out

    def sbatch(self, body, name=None, user=JOB_USER):
        path, out = self.script(body, name)
        r = self.cmd("sbatch", "--parsable", path, user=user)
        assert r.returncode == 0, "sbatch refused %s:\n%s%s" % (path, r.stdout, r.stderr)
        return r.stdout.strip().split(";")[0], out

    def job_state(self, job):
        """(state, reason) from squeue, or None once the job left the queue."""
        r = self.cmd("squeue", "-h", "-j", job, "-o", "%T|%r")
        line = r.stdout.strip()
        if r.returncode != 0 or not line:
            return None
        return tuple(line.split("|", 1))

    def wait_gone(self, job, timeout=90):
        wait_until(lambda: self.job_state(job) is None, timeout, interval=0.2,
                   what="job %s to leave the queue" % job)

    def wait_released(self, job, timeout=60):
        """The job's composition Released (teardown ran)."""
        return wait_until(lambda: (lambda c: c if c and c["State"] == "Released" else None)(
            self.composition_of(job)), timeout, interval=0.2,
            what="job %s's composition to be released" % job)

    def start_slurmd(self):
        self.procs.append(spawn(["slurmd", "-D", "-N", "n1", "-f", self.conf],
                                log_path=self.base / "log" / "slurmd.out", what="slurmd",
                                env=self.env()))
        wait_until(lambda: re.search(r"\bidle\b", self.cmd("sinfo", "-h", "-o", "%T").stdout),
                   60, interval=0.2, what="node n1 idle")

    def start_slurmctld(self):
        """slurmctld, once it answers and reports the strata pool."""
        self.procs.append(spawn(["slurmctld", "-D", "-f", self.conf],
                                log_path=self.base / "log" / "ctld.out", what="slurmctld",
                                env=self.env()))
        wait_until(lambda: self.cmd("scontrol", "ping").returncode == 0, 30, interval=0.2,
                   what="slurmctld to answer")

    def wait_pool(self):
        wait_until(lambda: "PoolName[0]=strata" in
                   self.cmd("scontrol", "show", "burstbuffer").stdout, 30, interval=0.2,
                   what="the strata pool reported to Slurm")

    def drain(self, *users):
        """With slurmctld running: cancels the users' jobs and waits (60 s
        at most) for the queue to empty."""
        if not self.procs or self.procs[0].poll() is not None:
            return
        for u in users:
            self.cmd("scancel", "-u", u)
        try:
            wait_until(lambda: not self.cmd("squeue", "-h").stdout.strip(), 60, interval=0.2,
                       what="the queue to drain")
        except AssertionError:
            pass

    def log(self):
        out = []
        for f in ("slurmctld.log", "slurmd-n1.log"):
            try:
                out.append("---- %s (tail)\n%s" % (f, "\n".join(
                    (self.base / "log" / f).read_text(errors="replace").splitlines()[-40:])))
            except OSError:
                pass
        return "\n".join(out)


def _times(out):
    """(start, end) a job printed as 'start T' and 'end T'."""
    t = dict(l.split() for l in out.read_text().splitlines()
             if l.split()[:1] in (["start"], ["end"]))
    return float(t["start"]), float(t["end"])


def _write_conf(s, ctld_port, slurmd_port, ctld_ip="127.0.0.1", nodes=None):
    """slurm.conf: slurmctld at ctld_ip, the nodes given as NodeName lines
    (default: n1 on this host over loopback). Each slurmd's pid and log
    files are its node's (%n): test_slurm_hosts.py runs two."""
    host = socket.gethostname()
    b = s.base
    nodes = nodes or ("NodeName=n1 NodeHostname={host} NodeAddr=127.0.0.1 CPUs=4 RealMemory=2000 "
                      "Gres=gpu:h100_80gb:{gpus} State=UNKNOWN".format(host=host, gpus=GPUS))
    s.conf.write_text("""# Generated by tests/integration/test_slurm.py
ClusterName=stratatest
SlurmctldHost={host}({ctld_ip})
SlurmctldPort={ctld}
SlurmdPort={slurmd}
SlurmUser={user}
AuthType=auth/none
CredType=cred/none
StateSaveLocation={b}/state
SlurmdSpoolDir={b}/spool/%n
SlurmctldPidFile={b}/run/slurmctld.pid
SlurmdPidFile={b}/run/slurmd-%n.pid
SlurmctldLogFile={b}/log/slurmctld.log
SlurmdLogFile={b}/log/slurmd-%n.log
SlurmctldDebug=debug
SlurmdDebug=info
DebugFlags=BurstBuffer
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=2
SlurmdTimeout=10
JobRequeue=0
BurstBufferType=burst_buffer/lua
PlugStackConfig={b}/etc/plugstack.conf
GresTypes=gpu
{nodes}
PartitionName=batch Nodes=ALL Default=YES MaxTime=10 State=UP
""".format(host=host, ctld_ip=ctld_ip, ctld=ctld_port, slurmd=slurmd_port, user=SLURM_USER,
           b=b, nodes=nodes))


def _write_plugstack(s):
    """plugstack.conf: the SPANK plugin where it was built, mounting under
    base/mnt (everyone's, sticky); empty otherwise."""
    (s.base / "mnt").mkdir()
    (s.base / "mnt").chmod(0o1777)
    (s.etc / "plugstack.conf").write_text(
        "optional %s mount_root=%s strata_fuse=%s\n" % (SPANK, s.base / "mnt", STRATA_FUSE)
        if _no_mount() is None else "")


def _unmount_all(base, timeout=20):
    """Lazily unmounts every mount under base (strata-fuse mounts the
    SPANK plugin made and a dead step left), and waits for their
    strata-fuse to exit, killing one that does not."""
    with open("/proc/mounts") as f:
        points = [l.split()[1] for l in f if l.split()[1].startswith(str(base) + "/")]
    for m in points:
        subprocess.run(["fusermount3", "-u", "-z", m], capture_output=True, timeout=30)

    def fuse_pids():
        out = []
        for name in os.listdir("/proc"):
            try:
                with open("/proc/%s/cmdline" % name, "rb") as f:
                    argv = f.read().split(b"\0")
            except (OSError, ValueError):
                continue
            if argv and argv[0].endswith(b"strata-fuse") and any(
                    a.decode(errors="replace") in points for a in argv[1:2]):
                out.append(int(name))
        return out
    deadline = time.monotonic() + timeout
    while fuse_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in fuse_pids():
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    return points


def _stop(p, timeout=20):
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass
            p.wait(timeout=10)
    REGISTRY.discard(p.pid)


def _make_dirs(base, nodes):
    """Slurm's directories under base (state and log SlurmUser's, jobs/
    everyone's), a spool directory per node, and dev/nvidiaN."""
    slurm_pw = pwd.getpwnam(SLURM_USER)
    for d in ["etc", "state", "log", "run", "dev", "jobs", "strata"] + ["spool/" + n for n in nodes]:
        (base / d).mkdir(parents=True, exist_ok=True)
    for d in ("state", "log"):
        os.chown(base / d, slurm_pw.pw_uid, slurm_pw.pw_gid)
    (base / "jobs").chmod(0o1777)
    # Stand-ins for /dev/nvidiaN: slurmd wants character devices (these
    # are /dev/null's numbers; nothing opens them).
    for i in range(GPUS):
        os.mknod(base / "dev" / ("nvidia%d" % i), 0o666 | stat.S_IFCHR, os.makedev(1, 3))


@pytest.fixture(scope="module")
def slurm():
    why = _missing()
    if why:
        pytest.skip(why)
    # Outside pytest's 0700 tmp tree: the slurm user and the job's user
    # must reach the configuration, the binaries and the job directory.
    base = Path(tempfile.mkdtemp(prefix="strata-slurm-", dir="/tmp"))
    base.chmod(0o755)
    s = Slurm(base)
    try:
        _make_dirs(base, ["n1"])

        # Strata: one storage daemon of 2 GiB (R=1), a mem node of 512
        # MiB, a compute node declaring 2 GPUs; the composer beside mgmt.
        s.cluster = Cluster(base / "strata" / "cluster", run_strata)
        r = run_strata("local", "up", "--dir", s.cluster.dir, "--nodes", "1", "--mem", "1",
                       "--compute", "1", "--gpus-per-node", str(GPUS), "--daemon-flags",
                       "--storage.capacity=%d --mem.capacity=%d" % (POOL, MEM_POOL), timeout=90)
        s.cluster.reload()
        assert r.returncode == 0, r.stdout + r.stderr

        r = s.strata("slurm", "install", "--conf-dir", s.etc, "--state-dir", base / "bbstate",
                     "--slurm-user", SLURM_USER, "--datasets", "/datasets", "--results",
                     "/results")
        assert r.returncode == 0, r.stdout + r.stderr
        r = s.strata("slurm", "gres", "--names", "n1", "--files", base / "dev" / "nvidia",
                     "--out", s.etc / "gres.conf")
        assert r.returncode == 0, r.stdout + r.stderr
        _write_conf(s, free_port(), free_port())
        _write_plugstack(s)

        s.start_slurmctld()
        s.start_slurmd()
        s.wait_pool()
        yield s
    except BaseException:
        print(s.log())
        raise
    finally:
        try:
            s.drain(JOB_USER, OWNER_USER)
        finally:
            for p in reversed(s.procs):
                _stop(p)
            left = _unmount_all(base)
            if s.cluster:
                s.cluster.stop_all()
            shutil.rmtree(base, ignore_errors=True)
            assert not left, "mounts left behind: %r" % left


@pytest.fixture
def slurm_logs(slurm, request):
    yield slurm
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(slurm.log())


def test_gres_from_the_inventory(slurm_logs):
    s = slurm_logs
    gres = (s.etc / "gres.conf").read_text()
    assert "NodeName=n1 Name=gpu Type=h100_80gb File=%s/dev/nvidia[0-1]" % s.base in gres
    node = s.cmd("scontrol", "show", "node", "n1").stdout
    assert "Gres=gpu:h100_80gb:2" in node, node
    bb = s.cmd("scontrol", "show", "burstbuffer").stdout
    assert "PoolName[0]=strata Granularity=1MiB TotalSpace=2GiB" in bb, bb


@pytest.mark.timeout(120)
@pytest.mark.timeout(120)
def test_the_gpus_slurm_gives_become_the_jobs_gpu_blocks(slurm_logs):
    """--gres=gpu:1: pre-run composes exactly the GPU Slurm gave the job
    (its IDX on the node gres.conf maps to a Strata compute node), for the
    job's user, while the job runs; teardown releases it with the slice."""
    s = slurm_logs
    baseline = s.inventory()
    job, out = s.sbatch("""#BB_LUA strata pool=strata capacity=8M
#SBATCH --gres=gpu:1
echo "cuda=$CUDA_VISIBLE_DEVICES"
sleep 4
""")
    comp = wait_until(lambda: (lambda c: c if c and c["State"] == "Composed" else None)(
        s.composition_of(job + "-gpus")), 60, interval=0.2, what="job %s's GPUs composed" % job)
    assert len(comp["Gpus"]) == 1, comp
    assert comp["Owner"]["Uid"] == pwd.getpwnam(JOB_USER).pw_uid, comp
    s.wait_gone(job)
    text = out.read_text()
    m = re.search(r"cuda=(\d+)", text)
    assert m, text
    # Slurm's index on the node is the GPU block's index.
    assert comp["Gpus"][0]["Index"] == int(m.group(1)), (comp, text)
    assert comp["CudaVisibleDevices"] == {str(comp["Gpus"][0]["Node"]): m.group(1)}, comp
    s.wait_released(job + "-gpus")
    s.wait_released(job)
    wait_until(lambda: s.inventory() == baseline, 30, interval=0.2,
               what="the inventory back to its baseline")


def test_job_writes_and_reads_through_its_slice(slurm_logs):
    s = slurm_logs
    job, out = s.sbatch("""#BB_LUA strata pool=strata capacity=64M mem=16M
env | grep '^STRATA_' | grep -v '^STRATA_TOKEN=' | sort
[ -n "$STRATA_TOKEN" ] && echo token=set
echo "written by job $SLURM_JOB_ID" > "$W/in-$SLURM_JOB_ID"
{strata} put "$W/in-$SLURM_JOB_ID" "$STRATA_VOLUME/hello" && echo put=ok
echo "read: $({strata} cat "$STRATA_VOLUME/hello")"
{strata} ls /volumes >/dev/null 2>&1 || echo outside=refused
rm -f "$W/in-$SLURM_JOB_ID"
echo done
""".format(strata=STRATA))
    s.wait_gone(job)
    text = out.read_text()
    assert text.rstrip().endswith("done"), text
    comp = s.wait_released(job)
    cid = comp["Id"]
    assert "STRATA_COMPOSITION=%s" % cid in text
    assert "STRATA_VOLUME=/volumes/%s" % cid in text
    assert "STRATA_MEM_NS=%s" % cid in text
    assert "STRATA_MGMT=%s" % comp["Addresses"]["Mgmt"] in text
    assert "token=set" in text and "put=ok" in text, text
    assert "read: written by job %s" % job in text, text
    # The job's credential reaches its volume, not the volumes beside it.
    assert "outside=refused" in text, text
    assert comp["Tenant"] == JOB_USER and comp["Volume"]["Size"] == 64 << 20
    assert comp["Memory"]["Size"] == 16 << 20


BAD = [
    ("#BB_LUA strata pool=strata capacity=64Q", "capacity='64Q' is not a size"),
    ("#BB_LUA strata pool=strata capacity=1M color=blue", "unknown key 'color'"),
    ("#BB_LUA strata pool=strata capacity=1M capacity=2M", "'capacity=' is given twice"),
    ("#BB_LUA other pool=strata capacity=1M", "start with 'strata'"),
    ("#BB_LUA strata pool=strata capacity=1M mem=", "'mem=' has no value"),
    ("#BB_LUA strata pool=strata capacity=1M mem=lots", "mem='lots' is not a size"),
    ("#BB_LUA strata pool=strata capacity=1M junk", "'junk' is not key=value"),
    ("#BB_LUA strata mem=1M pool=strata", "pool= without capacity="),
    ("#BB_LUA strata", "asks for nothing"),
    ("#BB_LUA strata pool=strata capacity=1M\n#BB_LUA strata mem=1M", "more than one"),
    ("#BB_LUA strata pool=strata capacity=1M stage_out=/tmp/x", "stage_out='/tmp/x' is not a path under /results/"),
    ("#BB_LUA strata pool=strata capacity=1M stage_out=/results/a/../../b", "is not a path under /results/"),
    ("#BB_LUA strata mem=1M stage_out=/results/a", "stage_out= needs capacity="),
    ("#BB_LUA strata pool=strata capacity=1M dataset=/etc/passwd", "dataset='/etc/passwd' is not a path under /datasets/"),
    ("#BB_LUA strata pool=strata capacity=1M dataset=/datasets/../etc", "is not a path under /datasets/"),
    ("#BB_LUA strata pool=strata capacity=1M dataset=/datasets/", "is not a path under /datasets/"),
    ("#BB_LUA strata pool=strata capacity=1M dataset=/datasets/a;rm", "is not a path under /datasets/"),
    ("#BB_LUA strata mem=1M dataset=/datasets/a", "dataset= needs capacity="),
    ("#BB_LUA strata pool=strata capacity=1T", "asks for 1 TiB, the Strata storage pool holds 2 GiB"),
    ("#BB_LUA strata pool=strata capacity=1M mem=1G", "asks for 1 GiB, the Strata memory pool holds 512 MiB"),
    # Slurm's own refusals, before the script: capacity= without pool=,
    # a pool nobody reports.
    ("#BB_LUA strata capacity=1M", "Burst Buffer request invalid"),
    ("#BB_LUA strata pool=elsewhere capacity=1M", "Burst Buffer request invalid"),
]


@pytest.mark.timeout(120)
def test_malformed_requests_are_refused_at_sbatch(slurm_logs):
    s = slurm_logs
    before = len(s.compose_json("list")["Oem"]["Strata"]["Systems"])
    for i, (line, why) in enumerate(BAD):
        path, _ = s.script(line + "\ntrue\n", name="bad%d" % i)
        r = s.cmd("sbatch", path, user=JOB_USER)
        assert r.returncode != 0, "accepted: %r\n%s" % (line, r.stdout)
        assert why in r.stderr, "%r: %s" % (line, r.stderr)
        if "Burst Buffer request invalid" not in why:
            assert "strata: " in r.stderr, r.stderr
    assert len(s.compose_json("list")["Oem"]["Strata"]["Systems"]) == before


@pytest.mark.timeout(180)
def test_jobs_past_the_pool_run_one_after_the_other(slurm_logs):
    s = slurm_logs
    body = """#BB_LUA strata pool=strata capacity=1280M
echo start $(date +%s.%N)
sleep 4
echo end $(date +%s.%N)
"""
    a, out_a = s.sbatch(body)
    b, out_b = s.sbatch(body)
    # While a holds its 1280 MiB, b (as much again, of 2 GiB) waits for the pool.
    wait_until(lambda: s.job_state(a) and s.job_state(a)[0] == "RUNNING", 60, interval=0.2,
               what="job %s running" % a)
    st = s.job_state(b)
    assert st and st[0] == "PENDING" and st[1] == "BurstBufferResources", st
    s.wait_gone(a)
    s.wait_gone(b, timeout=120)

    a_start, a_end = _times(out_a)
    b_start, b_end = _times(out_b)
    assert b_start >= a_end, (a_start, a_end, b_start, b_end)
    s.wait_released(a)
    s.wait_released(b)


@pytest.mark.timeout(150)
def test_scancel_mid_job_releases_everything(slurm_logs):
    s = slurm_logs
    baseline = s.inventory()
    job, out = s.sbatch("""#BB_LUA strata pool=strata capacity=32M mem=8M
echo data > "$W/c-$SLURM_JOB_ID"
{strata} put -q "$W/c-$SLURM_JOB_ID" "$STRATA_VOLUME/x" && echo running
rm -f "$W/c-$SLURM_JOB_ID"
sleep 300
""".format(strata=STRATA))
    wait_until(lambda: out.exists() and "running" in out.read_text(), 60, interval=0.2,
               what="job %s running with its volume" % job)
    comp = s.composition_of(job)
    assert comp and comp["State"] == "Composed", comp
    vol = comp["Volume"]["Path"]
    held = s.inventory()
    assert held["storage"] == baseline["storage"] + (32 << 20), held
    assert held["memory"] == baseline["memory"] + (8 << 20), held
    assert Path(vol).name in s.strata("ls", "/volumes").stdout

    r = s.cmd("scancel", job, user=JOB_USER)
    assert r.returncode == 0, r.stderr
    s.wait_gone(job)
    s.wait_released(job)
    wait_until(lambda: s.inventory() == baseline, 30, interval=0.2,
               what="the inventory back to its baseline %r" % (baseline,))
    assert Path(vol).name not in s.strata("ls", "/volumes").stdout
    state = sorted(p.name for p in (s.base / "bbstate").iterdir() if p.name.startswith(job + "."))
    assert state == [], state


@pytest.mark.timeout(120)
def test_write_past_capacity_gets_edquot(slurm_logs):
    s = slurm_logs
    job, out = s.sbatch("""#BB_LUA strata pool=strata capacity=8M
f="$W/q-$SLURM_JOB_ID"
head -c 4194304 /dev/zero > "$f"
{strata} put -q "$f" "$STRATA_VOLUME/small"; echo small_rc=$?
head -c 16777216 /dev/zero > "$f"
{strata} put -q "$f" "$STRATA_VOLUME/big"; echo big_rc=$?
rm -f "$f"
""".format(strata=STRATA))
    s.wait_gone(job)
    text = out.read_text()
    assert "small_rc=0" in text, text
    assert "big_rc=1" in text, text
    assert "Disk quota exceeded" in text, text
    s.wait_released(job)


def test_install_refuses_a_missing_slurm_user(slurm_logs):
    s = slurm_logs
    r = s.strata("slurm", "install", "--conf-dir", s.base / "etc", "--slurm-user",
                 "no-such-user-17")
    assert r.returncode == 1
    assert "no user 'no-such-user-17'" in r.stderr, r.stderr
    r = s.strata("slurm", "install", "--conf-dir", s.base / "nowhere")
    assert r.returncode == 1 and "is not a directory" in r.stderr, r.stderr
    r = s.strata("slurm", "gres", "--names", "a,b")
    assert r.returncode == 2 and "--names gives 2 name(s)" in r.stderr, r.stderr
    for bad in ("datasets", "/", "/datasets/", "/data sets"):
        r = s.strata("slurm", "install", "--conf-dir", s.etc, "--datasets", bad)
        assert r.returncode == 2 and "--datasets and --results are absolute paths" in r.stderr, \
            (bad, r.stderr)
    r = s.strata("slurm", "install", "--conf-dir", s.etc, "--results", "/results/")
    assert r.returncode == 2 and "--datasets and --results are absolute paths" in r.stderr, \
        r.stderr
    r = s.strata("slurm", "install", "--conf-dir", s.etc, "--tenant", "group")
    assert r.returncode == 2 and "--tenant is 'user'" in r.stderr, r.stderr
    r = s.strata("slurm", "gres", "--conf-dir", s.etc)
    assert r.returncode == 2 and "is an option of 'slurm install'" in r.stderr, r.stderr


def test_install_again_keeps_the_token(slurm_logs):
    """A second install rewrites the script and its settings and keeps
    SlurmUser's token (still SlurmUser's, 0600)."""
    s = slurm_logs
    tok = s.etc / "strata-slurm.token"
    before = tok.read_text()
    r = s.strata("slurm", "install", "--conf-dir", s.etc, "--state-dir", s.base / "bbstate",
                 "--slurm-user", SLURM_USER, "--datasets", "/datasets", "--results", "/results")
    assert r.returncode == 0, r.stderr
    assert "kept the token in %s" % tok in r.stdout
    st = tok.stat()
    assert tok.read_text() == before
    assert (st.st_mode & 0o777, st.st_uid) == (0o600, pwd.getpwnam(SLURM_USER).pw_uid)
    conf = (s.etc / "strata_bb.conf").read_text()
    assert "datasets = /datasets\n" in conf and "results = /results\n" in conf, conf
    assert "token_file = %s\n" % tok in conf, conf
    assert (s.etc / "burst_buffer.lua").read_bytes() == \
        (Path(__file__).resolve().parents[2] / "contrib" / "slurm" / "burst_buffer.lua").read_bytes()


@pytest.mark.timeout(120)
def test_the_job_of_the_docs_runs_as_is(slurm_logs):
    """docs/slurm.md's job, copied as is, with strata on PATH."""
    s = slurm_logs
    doc = (Path(__file__).resolve().parents[2] / "docs" / "slurm.md").read_text()
    script = re.search(r"```bash\n(#!/bin/bash\n.*?)```", doc, re.S).group(1)
    path = s.jobs / "example.sh"
    path.write_text(script)
    path.chmod(0o755)
    env = dict(s.env(), PATH="%s:%s" % (Path(STRATA).parent, s.env()["PATH"]))
    r = subprocess.run(["runuser", "-u", JOB_USER, "--", "sbatch", "--parsable", str(path)],
                       env=env, cwd=str(s.jobs), capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip().split(";")[0]
    s.wait_gone(job)
    text = (s.jobs / ("strata-example-%s.out" % job)).read_text()
    assert "resumed from step-100.ckpt" in text, text
    comp = s.wait_released(job)
    assert "slice /volumes/%s (composition %s)" % (comp["Id"], comp["Id"]) in text, text
    assert comp["Volume"]["Size"] == 1 << 30 and comp["Memory"]["Size"] == 256 << 20


@pytest.mark.timeout(150)
def test_memory_past_the_pool_waits_in_stage_in(slurm_logs):
    """Memory is not a Slurm pool: a job whose mem= does not fit now is
    accepted and waits in stage-in (the composer refusing, setup
    retrying) until the job holding the memory is done."""
    s = slurm_logs
    body = "#BB_LUA strata mem=384M\necho start $(date +%s.%N)\nsleep 4\necho end $(date +%s.%N)\n"
    a, out_a = s.sbatch(body)
    wait_until(lambda: s.job_state(a) and s.job_state(a)[0] == "RUNNING", 60, interval=0.2,
               what="job %s running" % a)
    b, out_b = s.sbatch(body)
    wait_until(lambda: "BurstBufferState=staging-in" in s.cmd("scontrol", "show", "job", b).stdout,
               30, interval=0.2, what="job %s staging in" % b)
    assert s.job_state(b)[0] == "PENDING"
    s.wait_gone(a)
    s.wait_gone(b, timeout=120)

    assert _times(out_b)[0] >= _times(out_a)[1]
    s.wait_released(a)
    s.wait_released(b)


def _mounted(path):
    with open("/proc/mounts") as f:
        return any(l.split()[1] == str(path) for l in f)


@pytest.mark.timeout(120)
def test_spank_mounts_the_volume_with_strata_fuse(slurm_logs):
    why = _no_mount()
    if why:
        pytest.skip(why)
    s = slurm_logs
    job, out = s.sbatch("""#BB_LUA strata pool=strata capacity=8M
echo "mount=$STRATA_MOUNT dir=$STRATA_VOLUME_DIR"
grep -q " $STRATA_MOUNT fuse" /proc/mounts && echo mounted
echo "private=$(stat -c '%a %U' "$(dirname "$STRATA_MOUNT")")"
echo "through fuse $SLURM_JOB_ID" > "$STRATA_VOLUME_DIR/viafuse" && echo write=ok
srun -n1 bash -c 'echo "step mount=$STRATA_MOUNT read=$(cat "$STRATA_VOLUME_DIR/viafuse")"'
echo "read: $({strata} cat "$STRATA_VOLUME/viafuse")"
head -c 16777216 /dev/zero > "$STRATA_VOLUME_DIR/big" 2>"$W/fuse-err-$SLURM_JOB_ID"; echo big_rc=$?
cat "$W/fuse-err-$SLURM_JOB_ID"; rm -f "$W/fuse-err-$SLURM_JOB_ID"
""".format(strata=STRATA))
    s.wait_gone(job)
    text = out.read_text()
    private = s.base / "mnt" / ("strata-%s.batch" % job)
    mnt = private / "mnt"
    comp = s.wait_released(job)
    assert "mount=%s dir=%s/volumes/%s" % (mnt, mnt, comp["Id"]) in text, text
    assert "mounted" in text and "write=ok" in text, text
    assert "read: through fuse %s" % job in text, text
    # Past the slice's capacity through the mount: EDQUOT.
    assert "big_rc=1" in text and "Disk quota exceeded" in text, text
    assert "private=700 nobody" in text, text
    # An srun step gets a mount of its own, which sees the batch step's file.
    assert "step mount=%s read=through fuse %s" % (private.parent / ("strata-%s.0" % job) / "mnt",
                                                   job) in text, text
    # The step's end unmounted it and removed the mount point.
    wait_until(lambda: not _mounted(mnt) and not private.exists(), 20, interval=0.2,
               what="%s unmounted and removed" % mnt)


@pytest.mark.timeout(120)
def test_spank_strata_mount_no_and_bad_values(slurm_logs):
    why = _no_mount()
    if why:
        pytest.skip(why)
    s = slurm_logs
    job, out = s.sbatch("#BB_LUA strata pool=strata capacity=8M\n#SBATCH --strata-mount=no\n"
                        "echo \"mount=[$STRATA_MOUNT] vol=$STRATA_VOLUME\"\n")
    s.wait_gone(job)
    text = out.read_text()
    assert "mount=[] vol=/volumes/" in text, text
    assert not (s.base / "mnt" / ("strata-%s.batch" % job)).exists()
    s.wait_released(job)
    path, _ = s.script("#BB_LUA strata pool=strata capacity=8M\n#SBATCH --strata-mount=maybe\ntrue\n",
                       name="badmount")
    r = s.cmd("sbatch", path, user=JOB_USER)
    assert r.returncode != 0 and "--strata-mount=maybe: give yes or no" in r.stderr, r.stderr


@pytest.mark.timeout(120)
def test_spank_a_failed_mount_is_said_and_the_node_stays(slurm_logs):
    """A mount that fails (here a credential that is not one): the step
    runs without STRATA_MOUNT, STRATA_MOUNT_ERROR says why, nothing is
    left on the node, and the node stays in service."""
    why = _no_mount()
    if why:
        pytest.skip(why)
    s = slurm_logs
    path, out = s.script('echo "mount=[$STRATA_MOUNT] error=[$STRATA_MOUNT_ERROR]"\n', name="badcred")
    r = s.cmd("sbatch", "--parsable", "--export=ALL,STRATA_VOLUME=/volumes/none,"
              "STRATA_TOKEN=st1.not-a-token,STRATA_MGMT=%s" % s.cluster_mgmt(), path, user=JOB_USER)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip().split(";")[0]
    s.wait_gone(job)
    text = out.read_text()
    assert "mount=[] error=[strata-fuse '%s' could not mount the volume" % STRATA_FUSE in text, text
    assert not (s.base / "mnt" / ("strata-%s.batch" % job)).exists()
    state = s.cmd("sinfo", "-h", "-o", "%T").stdout.strip()
    assert state in ("idle", "mixed", "allocated"), state


@pytest.mark.timeout(150)
def test_scancel_of_a_waiting_job_composes_nothing(slurm_logs):
    """A job cancelled while it waits for the pool never composed: its
    teardown finds nothing to release and the pool is whole after."""
    s = slurm_logs
    baseline = s.inventory()
    a, out_a = s.sbatch("#BB_LUA strata pool=strata capacity=1280M\necho running\nsleep 300\n")
    b, _ = s.sbatch("#BB_LUA strata pool=strata capacity=1280M\necho b ran\n")
    wait_until(lambda: out_a.exists() and "running" in out_a.read_text(), 60, interval=0.2,
               what="job %s running" % a)
    st = s.job_state(b)
    assert st == ("PENDING", "BurstBufferResources"), st
    assert s.cmd("scancel", b, user=JOB_USER).returncode == 0
    s.wait_gone(b)
    assert s.cmd("scancel", a, user=JOB_USER).returncode == 0
    s.wait_gone(a)
    s.wait_released(a)
    assert s.composition_of(b) is None
    wait_until(lambda: s.inventory() == baseline, 30, interval=0.2,
               what="the inventory back to its baseline %r" % (baseline,))
    state = sorted(p.name for p in (s.base / "bbstate").iterdir()
                   if p.name.split(".")[0] in (a, b))
    assert state == [], state


def _stage_in_refused(s, dataset, user):
    """Submits a job staging in dataset as user, waits until Slurm holds it
    for its failed stage-in (the reason names the dataset), cancels it,
    and checks that its composition is released, the pools back where
    they were and the job never ran. Returns 'scontrol show job' of the
    held job."""
    baseline = s.inventory()
    job, out = s.sbatch("#BB_LUA strata pool=strata capacity=16M dataset=%s\necho ran\n" % dataset,
                        user=user)
    text = wait_until(lambda: (lambda t: t if "stage-in of " + dataset in t else None)(
        s.cmd("scontrol", "show", "job", job).stdout), 60, interval=0.3,
        what="job %s's stage-in refused" % job)
    assert s.cmd("scancel", job, user=user).returncode == 0
    s.wait_gone(job)
    s.wait_released(job)
    wait_until(lambda: s.inventory() == baseline, 30, interval=0.2,
               what="the inventory back to its baseline")
    assert not out.exists() or "ran" not in out.read_text()
    return text

@pytest.mark.timeout(150)
def test_dataset_is_staged_in_to_the_slice(slurm_logs):
    s = slurm_logs
    src = s.base / "jobs" / "dataset"
    src.mkdir(exist_ok=True)
    for i in range(3):
        (src / ("shard-%d" % i)).write_bytes(bytes([i]) * (100000 + i))
    r = s.strata("mkdir", "-p", "/datasets")
    assert r.returncode == 0, r.stderr
    r = s.strata("put", "-q", src, "/datasets/mnist")
    assert r.returncode == 0, r.stderr
    job, out = s.sbatch("""#BB_LUA strata pool=strata capacity=16M dataset=/datasets/mnist
echo "dataset=$STRATA_DATASET"
{strata} du -s "$STRATA_DATASET"
{strata} ls /datasets >/dev/null 2>&1 || echo datasets=unreachable
""".format(strata=STRATA))
    s.wait_gone(job)
    text = out.read_text()
    comp = s.wait_released(job)
    assert "dataset=/volumes/%s/mnist" % comp["Id"] in text, text
    assert "%d\t3\t/volumes/%s/mnist" % (3 * 100000 + 3, comp["Id"]) in text, text
    # The job reads its copy; the datasets themselves stay out of its reach.
    assert "datasets=unreachable" in text, text

    # A dataset that is not there: stage-in fails, Slurm holds the job
    # with the reason; cancelled, its composition is released.
    text = _stage_in_refused(s, "/datasets/nope", JOB_USER)
    assert "Priority=0" in text, text


@pytest.mark.timeout(240)
def test_the_job_user_owns_its_slice_stages_in_and_out(slurm_logs):
    """A job of a user other than nobody: its slice is that user's, its
    credential acts as that user, so stage-in reads only a dataset the
    user may read, and stage_out= copies the slice, as the user, to a
    place the user may write."""
    s = slurm_logs
    pw = pwd.getpwnam(OWNER_USER)
    src = s.base / "jobs" / "owned-ds"
    src.mkdir(exist_ok=True)
    (src / "shard-0").write_bytes(b"s" * 5000)
    s.strata("rm", "-r", "-f", "/results/owned", "/datasets/owned", "/datasets/private")
    for cmd in (("mkdir", "-p", "/datasets", "/results/owned"), ("put", "-q", src, "/datasets/owned"),
                ("put", "-q", src, "/datasets/private"), ("chmod", "700", "/datasets/private"),
                ("chown", "%d:%d" % (pw.pw_uid, pw.pw_gid), "/results/owned")):
        r = s.strata(*cmd)
        assert r.returncode == 0, (cmd, r.stderr)
    job, out = s.sbatch("""#BB_LUA strata pool=strata capacity=16M dataset=/datasets/owned stage_out=/results/owned
id -u
echo "result of $(id -u)" > $W/owned-result
{strata} put -q $W/owned-result "$STRATA_VOLUME/result" && echo put=ok
{strata} stat "$STRATA_VOLUME" | grep Uid
if [ -n "$STRATA_VOLUME_DIR" ]; then
  echo "through the mount" > "$STRATA_VOLUME_DIR/viafuse" && echo mount-write=ok
fi
""".format(strata=STRATA), user=OWNER_USER)
    s.wait_gone(job)
    text = out.read_text()
    comp = s.wait_released(job)
    assert comp["Owner"] == {"Uid": pw.pw_uid, "Gid": pw.pw_gid}, comp
    assert {"Path": "/datasets/owned", "Access": "r"} in comp["Paths"], comp
    assert {"Path": "/results/owned", "Access": "rw"} in comp["Paths"], comp
    assert "put=ok" in text and re.search(r"Uid: %d\b" % pw.pw_uid, text), text
    # The volume is the user's: the mount (default_permissions) lets them in.
    if _no_mount() is None:
        assert "mount-write=ok" in text, text
    # Staged out after the job to STAGE_OUT/job-ID, as the job's user:
    # the result and the staged-in dataset, theirs.
    r = s.strata("cat", "/results/owned/job-%s/result" % job)
    assert r.returncode == 0 and r.stdout == "result of %d\n" % pw.pw_uid, (r.stdout, r.stderr)
    r = s.strata("stat", "/results/owned/job-%s/owned/shard-0" % job)
    assert r.returncode == 0 and re.search(r"Uid: %d\b" % pw.pw_uid, r.stdout), r.stdout

    # A dataset the user may not read: stage-in is refused with the
    # reason, whatever SlurmUser could read.
    text = _stage_in_refused(s, "/datasets/private", OWNER_USER)
    assert "Permission denied" in text, text


def _job_pids(job):
    """The slurmstepd of job and the job's processes (SLURM_JOB_ID=job)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read()
            with open("/proc/%s/environ" % name, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if cmd.startswith(b"slurmstepd: [%s." % job.encode()) or \
                ("SLURM_JOB_ID=%s" % job).encode() in env:
            out.append(int(name))
    return out


@pytest.mark.timeout(180)
def test_node_failure_releases_everything(slurm_logs):
    """The node dies under a running job (slurmd and the job's processes
    killed): Slurm ends the job NODE_FAIL once slurmd misses its
    SlurmdTimeout, teardown releases the composition, and the node comes
    back when slurmd starts again. Runs last: it restarts slurmd."""
    s = slurm_logs
    baseline = s.inventory()
    job, out = s.sbatch("#BB_LUA strata pool=strata capacity=32M mem=8M\necho running\nsleep 300\n")
    wait_until(lambda: out.exists() and "running" in out.read_text(), 60, interval=0.2,
               what="job %s running" % job)
    assert s.composition_of(job)["State"] == "Composed"
    slurmd = s.procs.pop()
    try:
        os.killpg(slurmd.pid, signal.SIGKILL)
    except OSError:
        pass
    slurmd.wait(timeout=10)
    REGISTRY.discard(slurmd.pid)
    for pid in _job_pids(job):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    # What the dead node held is gone with it: its mount of the volume.
    _unmount_all(s.base)
    try:
        wait_until(lambda: s.job_state(job) is None, 90, interval=0.5,
                   what="job %s ended by the node's failure" % job)
        comp = s.wait_released(job)
        assert comp["State"] == "Released"
        wait_until(lambda: s.inventory() == baseline, 30, interval=0.2,
                   what="the inventory back to its baseline")
        st = s.cmd("scontrol", "show", "job", job).stdout
        assert "JobState=NODE_FAIL" in st or not st.strip(), st
    finally:
        s.start_slurmd()
