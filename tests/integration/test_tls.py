"""TLS for connections (issue 15, docs/security.md "Transport").

A cluster of two daemons (mgmt+meta, storage) with node.tls=on on
127.0.0.1, its certificate made by scripts/tls-cert.sh, serves the CLI
given the CA in STRATA_TLS_CA; a client without the CA, with another CA,
or reaching the node under a name its certificate does not carry is
refused with a clear error; a plain-TCP client is told the port wants TLS
(and the daemon logs why); a daemon beyond loopback without TLS does not
start unless node.insecure.
"""
import os
import re
import socket
import ssl
import stat
import subprocess

import pytest

import strata_wire as sw
from conftest import STRATA, Daemon, run, wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TLS_CERT = os.path.join(ROOT, "scripts", "tls-cert.sh")
ETLSREQ = -(4096 + 13)


def make_certs(out, *hosts):
    argv = [TLS_CERT, "--out", str(out)]
    for h in hosts:
        argv += ["--host", h]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return out


def tls_flags(certs):
    return ["--node.tls=on", "--node.tls_cert=%s" % (certs / "server.pem"),
            "--node.tls_key=%s" % (certs / "server.key"),
            "--node.tls_ca=%s" % (certs / "ca.pem")]


def strata(*args, ca=None, mgmt=None, timeout=60):
    e = {"STRATA_TOKEN": "", "STRATA_TOKEN_FILE": "", "STRATA_TLS_CA": ca or "",
         "STRATA_MGMT": mgmt or ""}
    return run([str(STRATA), *[str(a) for a in args]], timeout=timeout, env=e)


class TlsCluster:
    def __init__(self, base):
        self.certs = make_certs(base / "certs", "127.0.0.1")
        self.ca = str(self.certs / "ca.pem")
        self.meta = Daemon(base / "node1", node_id=1)
        self.meta.start(["--node.services=mgmt,meta", "--mgmt.replication=1",
                         "--mgmt.expect_nodes=1"] + tls_flags(self.certs))
        self.storage = Daemon(base / "node2", node_id=2)
        self.storage.start(["--node.services=storage", "--mgmt.address=%s" % self.meta.addr]
                           + tls_flags(self.certs))
        self.mgmt = self.meta.addr
        # Storage registered with mgmt and meta learned of its chain:
        # both went through TLS between the daemons.
        self.meta.wait_log(r"chain table length 0 -> 1", timeout=60)
        wait_until(lambda: strata("ls", "/", ca=self.ca, mgmt=self.mgmt).returncode == 0,
                   60, 0.2, "the TLS cluster to serve")

    def stop(self):
        problems = []
        for d in (self.storage, self.meta):
            d.stop()
            problems += d.sanitizer_reports()
        return problems


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    c = TlsCluster(tmp_path_factory.mktemp("tls"))
    yield c
    problems = c.stop()
    if problems:
        pytest.fail("\n".join(problems), pytrace=False)


def test_cert_script_makes_0600_keys(tls_cluster):
    for f in ("server.key", "ca.key"):
        assert stat.S_IMODE((tls_cluster.certs / f).stat().st_mode) == 0o600, f


def test_put_get_round_trips_byte_exact(tls_cluster, tmp_path):
    c = tls_cluster
    src = tmp_path / "src"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 12345))
    r = strata("put", "-q", src, "/big", ca=c.ca, mgmt=c.mgmt)
    assert r.returncode == 0, r.stderr
    dst = tmp_path / "dst"
    r = strata("get", "/big", dst, ca=c.ca, mgmt=c.mgmt)
    assert r.returncode == 0, r.stderr
    assert dst.read_bytes() == src.read_bytes()
    # Every connection says whether the kernel took over the records.
    assert re.search(r"TLS with '[^']+': TLSv1\.3, \S+, kTLS (off|send|receive)", c.storage.log)


def test_client_without_ca_is_told_tls_is_required(tls_cluster):
    c = tls_cluster
    r = strata("ls", "/", mgmt=c.mgmt)
    assert r.returncode == 1
    assert "the server requires TLS" in r.stderr and "STRATA_TLS_CA" in r.stderr, r.stderr
    c.meta.wait_log(r"refused '[^']+': plain TCP on a TLS port")


def test_client_with_another_ca_is_refused(tls_cluster, tmp_path):
    other = make_certs(tmp_path / "other", "127.0.0.1")
    r = strata("ls", "/", ca=other / "ca.pem", mgmt=tls_cluster.mgmt)
    assert r.returncode == 1
    assert "TLS handshake failed: certificate not trusted" in r.stderr, r.stderr
    assert "certificate is not accepted" in r.stderr, r.stderr
    tls_cluster.meta.wait_log(r"TLS handshake failed")


def test_certificate_must_name_the_host(tls_cluster):
    # The certificate names 127.0.0.1 only: "localhost" is another name.
    port = tls_cluster.mgmt.rsplit(":", 1)[1]
    r = strata("ls", "/", ca=tls_cluster.ca, mgmt="localhost:" + port)
    assert r.returncode == 1
    assert "TLS handshake failed" in r.stderr, r.stderr


def test_a_ca_that_does_not_load_is_an_error(tls_cluster, tmp_path):
    bogus = tmp_path / "bogus.pem"
    bogus.write_text("not a certificate\n")
    r = strata("ls", "/", ca=bogus, mgmt=tls_cluster.mgmt)
    assert r.returncode == 1
    assert "STRATA_TLS_CA" in r.stderr, r.stderr


def test_plain_wire_client_gets_a_refusal(tls_cluster):
    with pytest.raises(sw.WireError) as e:
        sw.Client(tls_cluster.mgmt, hello=True, timeout=10)
    assert e.value.status == ETLSREQ


def test_python_ssl_client_speaks_to_the_daemon(tls_cluster):
    """An independent TLS stack (Python's ssl) verifies the certificate
    and the host, then speaks the framed protocol through it."""
    ctx = ssl.create_default_context(cafile=tls_cluster.ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    host, port = tls_cluster.mgmt.rsplit(":", 1)
    cl = sw.Client(tls_cluster.mgmt, hello=False, timeout=10)
    cl.sock.close()
    raw = socket.create_connection((host, int(port)), timeout=10)
    cl.sock = ctx.wrap_socket(raw, server_hostname=host)
    assert cl.sock.version() == "TLSv1.3"
    reply = cl.hello()
    assert reply is not None
    cl.sock.close()


def test_beyond_loopback_without_tls_needs_insecure(daemon_factory, tmp_path):
    key = tmp_path / "cluster.key"
    r = strata("keygen", key)
    assert r.returncode == 0, r.stderr
    flags = ["--node.listen=0.0.0.0:0", "--node.advertise=127.0.0.1",
             "--node.key_file=%s" % key]
    d = daemon_factory(extra_flags=flags, start=False)
    with pytest.raises(Exception):
        d.start(flags)
    assert "without TLS" in d.log and "node.insecure=true" in d.log, d.log_tail()
    d2 = daemon_factory(extra_flags=flags + ["--node.insecure=true"], name="insecure")
    assert "no TLS on '0.0.0.0:0'" in d2.log, d2.log_tail()


def test_tls_key_must_be_0600(daemon_factory, tmp_path):
    certs = make_certs(tmp_path / "certs", "127.0.0.1")
    os.chmod(certs / "server.key", 0o644)
    d = daemon_factory(start=False)
    with pytest.raises(Exception):
        d.start(tls_flags(certs))
    assert "chmod 600" in d.log, d.log_tail()


def test_tls_on_needs_a_certificate(daemon_factory):
    d = daemon_factory(start=False)
    with pytest.raises(Exception):
        d.start(["--node.tls=on"])
    assert "set node.tls_cert" in d.log, d.log_tail()
