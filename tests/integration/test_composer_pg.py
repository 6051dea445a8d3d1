"""The composer's compositions in PostgreSQL (issues 16 and 18,
docs/composer.md "State"): with 'strata local up --meta-store postgresql'
mgmt's state is in PostgreSQL and the composer follows mgmt.store, so its
compositions and GPU allocations are in the same database (tables
composer_*) and node 1's data directory holds no composer.db. A
composition made through the API survives a kill -9 of node 1 and
'strata local start': read back from PostgreSQL, with its GPUs still
held (a compose that needs them is refused), and released after it.
composer.store's checks name the key.

PostgreSQL is started by 'local up' (the recipe of tests/pg_tmp.sh); the
module is skipped without its binaries (or, as root, without a 'postgres'
user to run them as)."""

import json
import os
import subprocess

import pytest

from conftest import STRATAD, Cluster, wait_until
from pgtmp import PGBIN
from test_composer import RF, _answers, compose, error_of, http, release
from test_meta_ha import _finish, _have_pg, _strata_fn

pytestmark = pytest.mark.skipif(_have_pg() is not None, reason=_have_pg() or "")

GPUS = 2
BOUND_S = 60


@pytest.fixture(scope="module")
def pc(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("comppg") / "cluster", _strata_fn)
    try:
        c.up(1, timeout=120, local_args=("--meta-store", "postgresql", "--compute", "1",
                                         "--gpus-per-node", str(GPUS)))
    except BaseException:
        if (c.dir / "cluster.json").exists():
            c.stop_all()
        raise
    yield c
    _finish(c)


def _psql(c, sql):
    """sql's rows (text, '|' between columns) in the cluster's database."""
    j = json.loads((c.dir / "cluster.json").read_text())["postgresql"]
    uri = j["uri"]
    r = subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                        "-d", uri, "-c", sql], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, PGPASSFILE=j["passfile"]))
    assert r.returncode == 0, "psql %r: %s" % (sql, r.stderr)
    return r.stdout.strip()


def _gpus_up(c):
    code, svc = http(c, "GET", RF + "/CompositionService")
    return code == 200 and svc["Oem"]["Strata"]["Inventory"]["Gpus"]["Total"] == GPUS


@pytest.mark.timeout(300)
def test_compositions_live_in_postgresql_across_a_kill9(pc):
    c = pc
    node1 = c.node(1)
    wait_until(lambda: _gpus_up(c), BOUND_S, 0.2, "the compute node's GPUs in the inventory")
    code, body = compose(c, Name="pg-kept", Gpus={"Count": GPUS})
    assert code == 201, body
    sid = body["Id"]
    assert body["Oem"]["Strata"]["State"] == "Composed", body
    held = [(g["Node"], g["Index"], g["Model"]) for g in body["Oem"]["Strata"]["Gpus"]]
    # In PostgreSQL, nowhere else.
    assert not (node1.data / "composer.db").exists()
    assert _psql(c, "SELECT id, name, state FROM composer_compositions") == "%s|pg-kept|2" % sid
    assert _psql(c, "SELECT count(*) FROM composer_gpus WHERE comp = '%s'" % sid) == str(GPUS)
    assert _psql(c, "SELECT version FROM schema_version WHERE component = 'composer'") == "1"
    assert "PostgreSQL" in node1.log and "composer schema version 1" in node1.log

    # kill -9 of node 1 (mgmt, meta, composer), then 'strata local start'.
    node1.kill9()
    r = _strata_fn("local", "start", "--dir", c.dir, "--node", "1", timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    c.reload()
    wait_until(lambda: _answers(c), BOUND_S, 0.1, "the composer to answer after the restart")
    assert "1 composition(s) loaded, 1 holding resources" in c.node(1).log

    code, s = http(c, "GET", RF + "/Systems/" + sid)
    assert code == 200, s
    assert s["Name"] == "pg-kept"
    assert s["Oem"]["Strata"]["State"] == "Composed", s
    # What was stored (the address and zone come with the node's next
    # announcement).
    assert [(g["Node"], g["Index"], g["Model"]) for g in s["Oem"]["Strata"]["Gpus"]] == held
    assert not (c.node(1).data / "composer.db").exists()
    # Its GPUs are still its own: nothing free to compose with.
    wait_until(lambda: _gpus_up(c), BOUND_S, 0.2, "the compute node to announce again")
    code, body = compose(c, Gpus={"Count": 1})
    assert code == 409 and "0 free" in error_of(body), body
    # Released: the rows say so, the GPUs are free again.
    release(c, sid)
    assert _psql(c, "SELECT state FROM composer_compositions WHERE id = '%s'" % sid) == "5"
    assert _psql(c, "SELECT count(*) FROM composer_gpus") == "0"
    code, body = compose(c, Gpus={"Count": 1})
    assert code == 201, body
    release(c, body["Id"])


@pytest.mark.parametrize("flags,says", [
    (["--composer.store=mysql://u:secret@h/db"],
     "key 'composer.store': unknown store 'mysql'"),
    (["--composer.store_passfile=/nonexistent"],
     "key 'composer.store_passfile' is set but 'composer.store' is not a postgresql:// URI"),
    (["--composer.store=postgresql:///x", "--composer.store_passfile=/nonexistent/pass"],
     "key 'composer.store_passfile': password file '/nonexistent/pass'"),
])
def test_bad_store_keys_are_refused(tmp_path, flags, says):
    r = subprocess.run([str(STRATAD), "--check-config", "--data", str(tmp_path), *flags],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert says in r.stderr, r.stderr
    assert "secret" not in r.stderr


def test_compositions_left_in_composer_db_stop_the_start(tmp_path, run_stratad):
    """A node whose mgmt.store moved to PostgreSQL with compositions still
    in DATA/composer.db: the composer refuses to start rather than forget
    them, and says how to keep them; composer.store=sqlite starts."""
    import sqlite3
    from pgtmp import PgServer
    data = tmp_path / "d"
    data.mkdir()
    db = sqlite3.connect(data / "composer.db")
    db.executescript(
        "CREATE TABLE compositions (seq INTEGER PRIMARY KEY, id TEXT UNIQUE NOT NULL,"
        " name TEXT NOT NULL, tenant TEXT NOT NULL, state INTEGER NOT NULL,"
        " reason TEXT NOT NULL, gpu_count INTEGER NOT NULL, gpu_model TEXT NOT NULL,"
        " same_node INTEGER NOT NULL, storage INTEGER NOT NULL, memory INTEGER NOT NULL,"
        " retain INTEGER NOT NULL, created INTEGER NOT NULL, changed INTEGER NOT NULL,"
        " expires INTEGER NOT NULL, mem_share INTEGER NOT NULL, mem_nodes INTEGER NOT NULL,"
        " token_id TEXT NOT NULL, gpus TEXT NOT NULL);"
        "INSERT INTO compositions VALUES (1, 'comp-1', 'old', 't', 2, '', 0, '', 0, 1048576,"
        " 0, 0, 1, 1, 0, 0, 0, '', '');")
    db.commit()
    db.close()
    key = tmp_path / "key"
    assert _strata_fn("keygen", key).returncode == 0
    pg = PgServer.start_or_skip()
    try:
        uri = pg.create_db("leftover")
        base = ["--data", data, "--node.services=composer", "--node.key_file=%s" % key,
                "--node.listen=127.0.0.1:0", "--composer.listen=127.0.0.1:0",
                "--mgmt.store=%s" % uri]
        r = run_stratad(*base, timeout=60)
        assert r.returncode != 0, r.stderr
        assert ("holds 1 composition(s) and the store in PostgreSQL (mgmt.store) none: they"
                " would be forgotten; set composer.store=sqlite") in r.stderr, r.stderr
        assert pg.psql("SELECT count(*) FROM composer_compositions", db="leftover").strip() == "0"
        # composer.store=sqlite: the file is read (checked by --check-config
        # here: a full start needs a cluster around it).
        r = run_stratad("--check-config", *base, "--composer.store=sqlite")
        assert r.returncode == 0, r.stderr
    finally:
        pg.destroy()
