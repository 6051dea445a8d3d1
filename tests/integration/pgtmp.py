"""A throwaway PostgreSQL server for integration tests, made and stopped by
tests/pg_tmp.sh (the script the unit tests use too): initdb and pg_ctl as the
postgres user, a unix socket in a private temporary directory, bounded waits.

    pg = PgServer.start_or_skip()   # pytest.skip when PostgreSQL is absent
    uri = pg.create_db("name")      # postgresql:///name?host=...
    pg.stop(); pg.start()           # the same cluster down and up again
    pg.destroy()                    # stop -m immediate, remove the directory
"""

import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "pg_tmp.sh"
PGBIN = Path("/usr/lib/postgresql/15/bin")
SKIP = 77


class PgServer:
    def __init__(self, directory):
        self.dir = Path(directory)
        self.uri = None

    @classmethod
    def start_or_skip(cls):
        # Short: the socket path (DIR/.s.PGSQL.5432) must fit in sun_path.
        pg = cls(tempfile.mkdtemp(prefix="strata-pg.", dir="/tmp"))
        r = pg._script("start")
        if r.returncode == SKIP:
            shutil.rmtree(pg.dir, ignore_errors=True)
            pytest.skip(r.stderr.strip() or "no PostgreSQL")
        if r.returncode != 0:
            pg.destroy()
            raise AssertionError("pg_tmp.sh start failed:\n%s%s" % (r.stderr, pg.log_tail()))
        pg.uri = r.stdout.strip()
        return pg

    def _script(self, what, timeout=90):
        return subprocess.run([str(SCRIPT), what, str(self.dir)], capture_output=True,
                              text=True, timeout=timeout)

    def start(self):
        r = self._script("start")
        assert r.returncode == 0, r.stderr + self.log_tail()

    def stop(self):
        r = self._script("stop")
        assert r.returncode == 0, r.stderr

    def destroy(self):
        try:
            self._script("stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def psql(self, sql, db="postgres"):
        r = subprocess.run([str(PGBIN / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1",
                            "-h", str(self.dir), "-U", "postgres", "-d", db, "-c", sql],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, "psql %r: %s" % (sql, r.stderr)
        return r.stdout

    def db_uri(self, name):
        return "postgresql:///%s?host=%s&port=5432&user=postgres" % (name, self.dir)

    def create_db(self, name):
        self.psql("CREATE DATABASE %s" % name)
        return self.db_uri(name)

    def log_tail(self, n=30):
        try:
            return "\n".join((self.dir / "server.log").read_text().splitlines()[-n:])
        except OSError:
            return ""
