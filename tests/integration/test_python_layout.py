"""The ctypes mirrors of libstrata's public structs (python/strata) have
the C headers' layout: each struct's size, and each field's offset and
size, as tests/integration/struct_layout (built with the tests from the
headers) prints them. Every C field must be mirrored, under its C name.
"""
import json
import subprocess

import pytest

from conftest import BUILD, REPO

PY = "/usr/bin/python3"
LAYOUT = BUILD / "tests" / "integration" / "struct_layout"


# Run in a child (no libstrata is loaded: the classes are plain ctypes).
MIRRORS = """
import ctypes, json
from strata import checkpoint, client, dataset, mem
m = {
    "strata_opts": client._Opts, "strata_stat": client._Stat,
    "strata_dirent": client._Dirent, "strata_statfs": client._Statfs,
    "strata_layout": client._Layout, "strata_cqe": client._Cqe,
    "strata_pack_opts": dataset._PackOpts,
    "strata_ckpt_tensor": checkpoint._Tensor, "strata_ckpt_save_opts": checkpoint._SaveOpts,
    "strata_ckpt_save_stats": checkpoint._SaveStats,
    "strata_ckpt_info": checkpoint._Info, "strata_ckpt_dst": checkpoint._Dst,
    "strata_ckpt_copy": checkpoint._Copy,
    "strata_mem_opts": mem._Opts, "strata_mem_item": mem._Item,
    "strata_mem_stats": mem._Stats,
}
print(json.dumps({k: {"class": "%s.%s" % (c.__module__, c.__qualname__), "size": ctypes.sizeof(c),
                      "fields": {f[0]: [getattr(c, f[0]).offset, getattr(c, f[0]).size]
                                 for f in c._fields_}}
                  for k, c in m.items()}))
"""


def test_ctypes_structs_match_headers():
    if subprocess.run([PY, "-c", "import numpy"], capture_output=True).returncode:
        pytest.skip("needs Debian's python3-numpy (strata.dataset imports it)")
    if not LAYOUT.exists():
        pytest.skip("%s not built" % LAYOUT)
    c = json.loads(subprocess.run([str(LAYOUT)], capture_output=True, text=True,
                                  check=True, timeout=30).stdout)
    r = subprocess.run([PY, "-c", MIRRORS], capture_output=True, text=True, timeout=60,
                       env={"PYTHONPATH": str(REPO / "python")})
    assert r.returncode == 0, r.stderr
    py = json.loads(r.stdout)
    assert sorted(c) == sorted(py), "struct_layout and the test list different structs"
    problems = []
    for name, have in py.items():
        want, cls = c[name], have["class"]
        if have["size"] != want["size"]:
            problems.append("%s: sizeof %d in C, %d in ctypes (%s)"
                            % (name, want["size"], have["size"], cls))
        for f in sorted(set(want["fields"]) - set(have["fields"])):
            problems.append("%s.%s: missing from %s" % (name, f, cls))
        for f in sorted(set(have["fields"]) - set(want["fields"])):
            problems.append("%s.%s: not in the C header (%s)" % (name, f, cls))
        for f, (off, size) in want["fields"].items():
            if f in have["fields"] and have["fields"][f] != [off, size]:
                problems.append("%s.%s: offset %d size %d in C, offset %d size %d in %s"
                                % (name, f, off, size, *have["fields"][f], cls))
    assert not problems, "\n".join(problems)
