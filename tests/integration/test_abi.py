"""libstrata's ABI: what the shared library exports, what it links, and its
version (issue 13). The library is the client alone: no namespace
database, chunk store, listener or config parser inside a training
process, and every exported symbol is declared in include/strata/."""
import re
import subprocess
from pathlib import Path

from conftest import BUILD

ROOT = Path(__file__).resolve().parents[2]
LIB = BUILD / "libstrata.so"
API_TEST = BUILD / "tests/integration/api_test"
NODE = "STRATA_1.0"


def nm(*args):
    r = subprocess.run(["nm", *args, str(LIB)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [l.split() for l in r.stdout.splitlines() if l.strip()]


def declared():
    """Function names declared in the public headers (comments removed)."""
    names = set()
    for h in sorted((ROOT / "include/strata").glob("*.h")):
        text = re.sub(r"/\*.*?\*/", "", h.read_text(), flags=re.S)
        names |= set(re.findall(r"\b(strata_[a-z0-9_]+)\s*\(", text))
    return names


def test_exports_are_the_public_api():
    exported = {}
    for f in nm("-D", "--defined-only"):
        name, _, node = f[-1].partition("@@")
        if f[-2] == "A" and name == NODE:
            continue  # the version node itself
        exported[name] = node
    pub = declared()
    assert pub, "no declarations found under include/strata"
    assert set(exported) - pub == set(), "exported but not declared: %s" % sorted(
        set(exported) - pub)
    assert pub - set(exported) == set(), "declared but not exported: %s" % sorted(
        pub - set(exported))
    wrong = {n: v for n, v in exported.items() if v != NODE}
    assert not wrong, "symbols outside %s: %s" % (NODE, wrong)


def test_no_server_inside():
    # Nothing the library calls comes from the servers' dependencies ...
    undefined = [f[-1] for f in nm("-D", "--undefined-only")]
    bad = [u for u in undefined if re.match(r"(sqlite3_|ini_parse|MHD_|io_uring_)", u)]
    assert not bad, "libstrata calls server dependencies: %s" % bad
    r = subprocess.run(["readelf", "-d", str(LIB)], capture_output=True, text=True, timeout=60)
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", r.stdout)
    assert needed, r.stdout
    for lib in ("libsqlite3", "libinih", "libmicrohttpd", "liburing"):
        assert not any(n.startswith(lib) for n in needed), (lib, needed)
    # ... and no server module is compiled in, even as a local symbol.
    code = {f[-1] for f in nm() if len(f) == 3 and f[1] in "tT"}
    server = [s for s in code if re.match(
        r"(chunk_store_|chunk_index_|ns_open|ns_create|mgmt_store_|store_sqlite|"
        r"rpc_server_|listener_|cfg_load_|cfg_apply_args|mem_pool_|svc_reply)", s)]
    assert not server, "server code in libstrata: %s" % sorted(server)[:20]


def test_version():
    project = re.search(r"version\s*:\s*'([0-9.]+)'", (ROOT / "meson.build").read_text())
    assert project, "no version in meson.build"
    r = subprocess.run([str(API_TEST), "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    header, library, packed = r.stdout.split()
    assert header == library == project.group(1), (r.stdout, project.group(1))
    assert packed == "1"
    # The soname's version is the project's, too.
    assert (BUILD / ("libstrata.so." + project.group(1))).exists()


def include_graph():
    """module -> the other modules of src/ whose headers it includes."""
    graph = {}
    for f in sorted((ROOT / "src").rglob("*.[ch]")):
        mod = f.relative_to(ROOT / "src").parts[0]
        deps = graph.setdefault(mod, set())
        for inc in re.findall(r'^#include "([a-z_]+)/', f.read_text(), re.M):
            if inc != mod and inc != "strata":
                deps.add(inc)
    return graph


def documented_graph():
    text = (ROOT / "docs/architecture.md").read_text()
    block = text.split("## Module graph", 1)[1].split("```", 2)[1]
    graph = {}
    for line in block.strip().splitlines():
        mod, _, deps = line.partition("->")
        graph[mod.strip()] = set() if "nothing" in deps else set(deps.split())
    return graph


def test_module_graph_is_documented_and_acyclic():
    graph = include_graph()
    assert graph == documented_graph(), "docs/architecture.md's module graph is stale: %s" % (
        {m: sorted(d) for m, d in sorted(graph.items())},)
    done, path = set(), []

    def visit(m):
        assert m not in path, "include cycle: %s" % " -> ".join(path + [m])
        if m in done:
            return
        path.append(m)
        for d in sorted(graph.get(m, ())):
            visit(d)
        path.pop()
        done.add(m)

    for m in graph:
        visit(m)
    # libstrata's modules include no server module.
    for m in ("common", "net", "proto", "client"):
        assert graph[m] <= {"common", "net", "proto"}, (m, graph[m])
