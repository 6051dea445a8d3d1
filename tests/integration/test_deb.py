"""'make deb' (debian/, dpkg-buildpackage -us -uc -b) builds the four
packages, each with the files it should hold, and what they hold runs.

A package build is a full build of the tree, so this runs only with
STRATA_TEST_DEB=1 (make test runs the same sources' tests already):

    STRATA_TEST_DEB=1 STRATA_BUILD=$PWD/build-asan /usr/bin/python3 -m pytest \\
        -q -p no:cacheprovider tests/integration/test_deb.py

The packages are unpacked into a scratch root (dpkg -x), not installed:
from there stratad, strata and strata-fuse run, the shipped configuration
passes --check-config and starts a one-host cluster (its data directory
and port moved into the test's), 'strata status' says it is healthy, the
Python package from python3-strata writes and reads a file through the
libstrata of libstrata0, and 'systemd-analyze verify' accepts the unit.

Where systemd runs (PID 1, /run/systemd/system) and the test is root,
the packages are also installed for real (dpkg -i), the unit must be
active and the cluster healthy on 127.0.0.1:7300, and they are purged
afterwards.

With STRATA_TEST_DEB_CHROOT=1 as well (root, debootstrap, systemd-nspawn
from systemd-container, and the Debian archive reachable): a clean
Debian 12 minbase chroot (debootstrap) gets the packages with apt, which
brings what they depend on, and systemd; booted with systemd-nspawn, the
unit the package enabled must start stratad on the shipped configuration
and 'strata status' must say the cluster is healthy.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, run, spawn, free_port, wait_until

PY = "/usr/bin/python3"
ARCH_LIB = "usr/lib/x86_64-linux-gnu"

pytestmark = pytest.mark.skipif(
    os.environ.get("STRATA_TEST_DEB") != "1",
    reason="builds the whole tree as Debian packages: set STRATA_TEST_DEB=1")

# Package: the files (paths in the package) it must hold.
EXPECT = {
    "strata": {"usr/bin/stratad", "usr/bin/strata", "usr/bin/strata-fuse",
               "lib/systemd/system/stratad.service", "etc/strata/stratad.conf"},
    "libstrata0": {ARCH_LIB + "/libstrata.so.0", ARCH_LIB + "/libstrata.so.0.1.0"},
    "libstrata-dev": {"usr/include/strata/strata.h", "usr/include/strata/errors.h",
                      ARCH_LIB + "/libstrata.so", ARCH_LIB + "/pkgconfig/strata.pc"},
    "python3-strata": {"usr/lib/python3/dist-packages/strata/__init__.py",
                       "usr/lib/python3/dist-packages/strata/client.py",
                       "usr/lib/python3/dist-packages/strata/py.typed"},
}


def _contents(deb):
    r = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True,
                       check=True)
    # "-rwxr-xr-x root/root 123 2026-11-24 15:00 ./usr/bin/stratad[ -> target]"
    return {line.split()[5][2:] for line in r.stdout.splitlines()
            if not line.startswith("d")}


def _field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", str(deb), name], capture_output=True,
                          text=True, check=True).stdout.strip()


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    """Builds the packages once (make deb DEB_OUT=...); {package: path}."""
    out = tmp_path_factory.mktemp("deb")
    r = subprocess.run(["make", "-C", str(REPO), "deb", "DEB_OUT=%s" % out],
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert not (out / "src").exists(), "make deb left its copy of the tree"
    found = {}
    for deb in out.glob("*.deb"):
        found[_field(deb, "Package")] = deb
    return found


@pytest.fixture(scope="module")
def root(debs, tmp_path_factory):
    r = tmp_path_factory.mktemp("root")
    for pkg in EXPECT:
        subprocess.run(["dpkg-deb", "-x", str(debs[pkg]), str(r)], check=True)
    return r


@pytest.mark.timeout(1800)
def test_packages_hold_their_files(debs):
    assert set(EXPECT) <= set(debs), sorted(debs)
    for pkg, want in EXPECT.items():
        have = _contents(debs[pkg])
        assert want <= have, "%s lacks %s" % (pkg, sorted(want - have))
    # Nothing of the library in the daemon's package, nothing of the
    # daemon in the library's.
    assert not any("libstrata.so" in p for p in _contents(debs["strata"]))
    assert not any(p.startswith("usr/bin/") for p in _contents(debs["libstrata0"]))
    assert "libstrata0" in _field(debs["python3-strata"], "Depends")
    assert _field(debs["libstrata-dev"], "Depends").startswith("libstrata0 (= ")


@pytest.mark.timeout(1800)
def test_programs_run_from_the_packages(root):
    for argv in (["stratad", "--version"], ["stratad", "--help"], ["strata", "--help"],
                 ["strata-fuse", "--help"]):
        r = run([root / "usr/bin" / argv[0]] + argv[1:], timeout=30)
        assert r.returncode == 0, (argv, r.stdout, r.stderr)
        assert "usage" in (r.stdout + r.stderr) or "stratad 0.1.0" in r.stdout, argv
    # The unit names the installed paths (meson's prefix /usr, and /etc).
    unit = (root / "lib/systemd/system/stratad.service").read_text()
    assert "ExecStart=/usr/bin/stratad --config /etc/strata/stratad.conf" in unit
    r = run([root / "usr/bin/stratad", "--check-config", "--config",
             root / "etc/strata/stratad.conf"], timeout=30)
    assert r.returncode == 0, r.stderr


@pytest.mark.timeout(1800)
@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_unit_verifies(root, tmp_path):
    # The unit with its binary moved into the scratch root: verify checks
    # that each Exec* program exists.
    text = (root / "lib/systemd/system/stratad.service").read_text()
    unit = tmp_path / "stratad.service"
    unit.write_text(text.replace("/usr/bin/stratad", str(root / "usr/bin/stratad")))
    r = run(["systemd-analyze", "verify", unit], timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "stratad.service" not in r.stderr, r.stderr


@pytest.mark.timeout(1800)
def test_shipped_config_serves_python_client(root, tmp_path):
    port = free_port()
    mgmt = "127.0.0.1:%d" % port
    d = spawn([root / "usr/bin/stratad", "--config", root / "etc/strata/stratad.conf",
               "--node.data=%s" % (tmp_path / "data"), "--node.listen=%s" % mgmt],
              log_path=tmp_path / "stratad.log")
    try:
        def healthy():
            r = run([root / "usr/bin/strata", "status", "--mgmt", mgmt], timeout=30)
            return r.returncode == 0
        wait_until(healthy, 60, interval=0.2, what="strata status exit 0 on the shipped config")
        env = {"PYTHONPATH": str(root / "usr/lib/python3/dist-packages"),
               "LD_LIBRARY_PATH": str(root / ARCH_LIB), "STRATA_LIB": "",
               "STRATA_BUILD": "", "STRATA_TOKEN": "", "STRATA_TOKEN_FILE": ""}
        code = ("import strata\n"
                "assert strata.__file__.startswith(%r), strata.__file__\n"
                "import strata._lib as l\n"
                "c = strata.Client(%r)\n"
                "c.mkdir('/deb')\n"
                "c.write_bytes('/deb/f', b'x' * 100000)\n"
                "assert c.read_bytes('/deb/f') == b'x' * 100000\n"
                "print('ok', l.lib()._name)\n") % (str(root), mgmt)
        r = run([PY, "-c", code], timeout=60, env=env, cwd=tmp_path)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "ok libstrata.so.0" in r.stdout, r.stdout
    finally:
        d.terminate()
        d.wait(timeout=30)
    assert d.returncode == 0, (tmp_path / "stratad.log").read_text()[-3000:]


@pytest.mark.timeout(1800)
@pytest.mark.skipif(not os.path.isdir("/run/systemd/system") or os.geteuid() != 0,
                    reason="systemd is not PID 1 here (or not root): the packages are "
                           "checked unpacked, not installed")
def test_install_starts_the_daemon_through_systemd(debs):
    pkgs = [str(debs[p]) for p in EXPECT]
    r = subprocess.run(["dpkg", "-i"] + pkgs, capture_output=True, text=True, timeout=300)
    try:
        assert r.returncode == 0, r.stdout + r.stderr
        wait_until(lambda: subprocess.run(["systemctl", "is-active", "--quiet",
                                           "stratad"]).returncode == 0,
                   60, interval=0.5, what="stratad.service active")
        wait_until(lambda: subprocess.run(["/usr/bin/strata", "status", "--mgmt",
                                           "127.0.0.1:7300"], capture_output=True,
                                          timeout=30).returncode == 0,
                   60, interval=0.5, what="strata status exit 0 after dpkg -i")
    finally:
        subprocess.run(["dpkg", "--purge"] + list(EXPECT), capture_output=True, timeout=300)


# Runs once the booted chroot reaches multi-user: waits for the unit and a
# healthy cluster, writes what it saw to /root, and powers off.
CHECK_UNIT = """[Unit]
Description=test_deb: stratad started through systemd, then power off
After=stratad.service
[Service]
Type=oneshot
ExecStart=/bin/sh -c 'for i in $(seq 1 60); do systemctl is-active --quiet stratad && \\
  strata status --mgmt 127.0.0.1:7300 > /root/status.txt 2>&1 && echo ok > /root/ok && break; \\
  sleep 1; done; systemctl status stratad --no-pager > /root/unit.txt 2>&1'
ExecStartPost=/bin/systemctl poweroff --no-block
[Install]
WantedBy=multi-user.target
"""


@pytest.mark.timeout(1800)
@pytest.mark.skipif(os.environ.get("STRATA_TEST_DEB_CHROOT") != "1" or os.geteuid() != 0
                    or not shutil.which("debootstrap") or not shutil.which("systemd-nspawn"),
                    reason="set STRATA_TEST_DEB_CHROOT=1, as root, with debootstrap and "
                           "systemd-nspawn, and the Debian archive reachable")
def test_installs_and_starts_in_a_booted_clean_chroot(debs, tmp_path):
    c = tmp_path / "chroot"
    try:
        r = subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(c)],
                           capture_output=True, text=True, timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        (c / "tmp/debs").mkdir(parents=True)
        for pkg in EXPECT:
            shutil.copy(debs[pkg], c / "tmp/debs")
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "update", "-qq"],
                     ["apt-get", "install", "-y", "-qq", "--no-install-recommends",
                      "systemd", "systemd-sysv", "dbus"]
                     + ["/tmp/debs/" + debs[p].name for p in EXPECT]):
            r = subprocess.run(["chroot", str(c)] + argv, capture_output=True, text=True,
                               timeout=900, env=env)
            assert r.returncode == 0, (argv, r.stdout[-3000:], r.stderr[-3000:])
        r = subprocess.run(["chroot", str(c), "systemctl", "is-enabled", "stratad"],
                           capture_output=True, text=True, timeout=60)
        assert r.stdout.strip() == "enabled", r.stdout + r.stderr
        (c / "etc/systemd/system/test-deb-check.service").write_text(CHECK_UNIT)
        subprocess.run(["chroot", str(c), "systemctl", "enable", "test-deb-check.service"],
                       check=True, capture_output=True, timeout=60)
        r = subprocess.run(["systemd-nspawn", "-q", "-D", str(c), "--boot", "--register=no",
                            "--keep-unit", "--private-network"],
                           capture_output=True, text=True, timeout=300)
        unit = (c / "root/unit.txt").read_text() if (c / "root/unit.txt").exists() else ""
        assert (c / "root/ok").exists(), (r.stdout[-3000:], unit)
        status = (c / "root/status.txt").read_text()
        assert "health     ok" in status, status
        assert "active (running)" in unit, unit
    finally:
        shutil.rmtree(c, ignore_errors=True)
