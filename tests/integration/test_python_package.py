"""python/ installs offline with Debian's packages only (pip with
setuptools from python3-setuptools, no index): the package holds strata
and nothing else (no benchmark, no module named torch), ships py.typed,
and declares the fsspec entry point, through which fsspec finds the
"strata" protocol without strata.fsspec being imported first.

The tree is copied first: setuptools builds in place, and the test leaves
the checkout as it was.
"""
import shutil
import subprocess

import pytest

from conftest import REPO

PY = "/usr/bin/python3"


def _can_build():
    return all(subprocess.run([PY] + a, capture_output=True).returncode == 0
               for a in (["-c", "import setuptools"], ["-m", "pip", "--version"]))


@pytest.mark.timeout(180)
@pytest.mark.skipif(not _can_build(), reason="needs Debian's python3-pip and python3-setuptools")
def test_pip_install_offline(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(REPO / "python", src,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    r = subprocess.run([PY, "-m", "pip", "install", "--no-index", "--no-build-isolation",
                        "--no-deps", "--disable-pip-version-check", "--target", str(target),
                        str(src)], capture_output=True, text=True, timeout=170)
    assert r.returncode == 0, r.stdout + r.stderr
    pkg = target / "strata"
    mods = sorted(p.name for p in pkg.glob("*.py"))
    assert mods == ["__init__.py", "_lib.py", "checkpoint.py", "checkpoint_tier.py", "client.py",
                    "dataset.py", "fsspec.py", "mem.py", "offload.py", "pytorch.py"], mods
    assert (pkg / "py.typed").exists()
    assert sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info")) \
        == ["strata"]
    eps = next(target.glob("strata-*.dist-info")) / "entry_points.txt"
    assert "strata = strata.fsspec:StrataFileSystem" in eps.read_text()
    have_fsspec = subprocess.run([PY, "-c", "import fsspec"], capture_output=True).returncode == 0
    code = "import strata; assert strata.__file__.startswith(%r), strata.__file__\n" % str(target)
    if have_fsspec:
        code += ("import sys, fsspec\n"
                 "cls = fsspec.get_filesystem_class('strata')\n"
                 "assert cls.__module__ == 'strata.fsspec', cls\n")
    r = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env={"PYTHONPATH": str(target)})
    assert r.returncode == 0, r.stderr
