"""The portal (issue 16, docs/composer.md "Portal"): the composer serves
/ui, and a real browser (Debian's headless Chromium, driven through its
DevTools protocol, tests/integration/cdp.py) signs in with the admin
token, sees the pools, composes through the form, watches the state
change, releases with the button and reads the usage per tenant. Every
step is checked against the Redfish API as well, and screenshots are kept
as test artifacts ($STRATA_ARTIFACTS, default BUILD/test-artifacts/portal).
Skips, saying why, where chromium or python3-websocket is missing."""

import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import cdp
from conftest import BUILD

RF = "/redfish/v1"
GPUS = 2


@pytest.fixture(scope="module")
def pc(module_cluster):
    return module_cluster(1, daemon_flags="--mem.capacity=64M", timeout=120,
                          local_args=["--mem", "1", "--compute", "1", "--gpus-per-node", str(GPUS)])


@pytest.fixture(scope="module")
def browser():
    why = cdp.missing()
    if why:
        pytest.skip(why)
    b = cdp.Browser()
    yield b
    b.close()


@pytest.fixture(scope="module")
def shots():
    d = Path(os.environ.get("STRATA_ARTIFACTS", str(BUILD / "test-artifacts"))) / "portal"
    d.mkdir(parents=True, exist_ok=True)
    return d


def base(c):
    return "http://" + json.loads((c.dir / "cluster.json").read_text())["composer"]


def admin(c):
    return (c.dir / "admin.token").read_text().strip()


def api(c, path):
    rq = urllib.request.Request(base(c) + RF + path)
    rq.add_header("Authorization", "Bearer " + admin(c))
    with urllib.request.urlopen(rq, timeout=30) as r:
        return json.load(r)


def raw(c, method, path):
    rq = urllib.request.Request(base(c) + path, method=method)
    try:
        with urllib.request.urlopen(rq, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def text_of(b, sel):
    return b.js("(document.querySelector(%s) || {}).textContent || ''" % json.dumps(sel))


def test_the_pages_are_served_without_data(pc):
    code, h, body = raw(pc, "GET", "/ui")
    assert code == 200 and h["Content-Type"].startswith("text/html"), (code, h)
    assert b'<script src="/ui/app.js">' in body
    assert "default-src 'self'" in h["Content-Security-Policy"]
    assert h["X-Content-Type-Options"] == "nosniff"
    for path, ctype in (("/ui/", "text/html"), ("/ui/app.js", "text/javascript"),
                        ("/ui/style.css", "text/css")):
        code, h, _ = raw(pc, "GET", path)
        assert code == 200 and h["Content-Type"].startswith(ctype), (path, code, h)
    code, _, body = raw(pc, "GET", "/ui/../redfish/v1/Systems")
    assert code in (401, 404), (code, body)          # never the data without a token
    code, _, body = raw(pc, "GET", "/ui/secrets")
    assert code == 404 and b"no such page" in body
    code, h, _ = raw(pc, "POST", "/ui/app.js")
    assert code == 405 and h["Allow"] == "GET, HEAD"


def test_compose_watch_release_through_the_page(pc, browser, shots):
    b = browser
    b.goto(base(pc) + "/ui")
    b.wait("document.readyState === 'complete' && !!document.getElementById('login-form')",
           what="the sign-in page")
    assert b.js("document.getElementById('app').hidden") is True
    b.screenshot(shots / "1-sign-in.png")

    # A token that is not one: refused, said on the page.
    b.js("document.getElementById('token').value = 'st1.bogus.token';"
         "document.getElementById('login-form').requestSubmit(); true")
    b.wait("document.getElementById('status').textContent.includes('refused')",
           what="the bad token refused")
    assert b.js("document.getElementById('app').hidden") is True

    b.js("document.getElementById('token').value = %s;"
         "document.getElementById('login-form').requestSubmit(); true" % json.dumps(admin(pc)))
    b.wait("document.body.dataset.ready === '1'", what="the pools and compositions read")
    b.wait("document.querySelector('#pool-gpus') && "
           "document.querySelector('#pool-gpus').textContent.includes('%d free of %d')" % (GPUS, GPUS),
           what="every GPU free")
    b.screenshot(shots / "2-pools.png")

    # Compose through the form.
    b.js("""(() => { const v = (id, x) => document.getElementById(id).value = x;
        v('c-gpus', '1'); v('c-storage', '1M'); v('c-memory', '8M'); v('c-tenant', 'portal');
        v('c-name', 'web1'); document.getElementById('compose-form').requestSubmit(); return true; })()""")
    msg = b.wait("(m => !m.hidden && m.textContent)(document.getElementById('message'))",
                 what="the compose answer")
    assert "Composed" in msg, msg
    sid = msg.split(":")[0]
    assert sid.startswith("comp-"), msg
    cred = b.js("document.getElementById('credential-text').value")
    assert cred.startswith("st1."), cred
    b.wait("(r => r && r.textContent.includes('Composed'))(document.getElementById('sys-%s'))" % sid,
           what="the new composition listed Composed")
    s = api(pc, "/Systems/" + sid)
    assert s["Name"] == "web1" and s["Oem"]["Strata"]["State"] == "Composed", s
    assert s["Oem"]["Strata"]["Tenant"] == "portal" and len(s["Oem"]["Strata"]["Gpus"]) == 1
    b.wait("document.querySelector('#pool-gpus').textContent.includes('%d free of %d')"
           % (GPUS - 1, GPUS), what="one GPU taken in the pools")
    b.wait("!!document.getElementById('usage-portal')", what="the tenant's usage row")
    b.screenshot(shots / "3-composed.png")

    # A request that does not fit: the composer's reason on the page.
    b.js("""(() => { const v = (id, x) => document.getElementById(id).value = x;
        v('c-gpus', '64'); v('c-storage', ''); v('c-memory', ''); v('c-name', 'toobig');
        document.getElementById('compose-form').requestSubmit(); return true; })()""")
    msg = b.wait("(m => m.textContent.startsWith('cannot compose') && m.textContent)"
                 "(document.getElementById('message'))", what="the refusal")
    assert "needs 64 GPUs, %d free" % (GPUS - 1) in msg, msg

    # Release with the button; watch the state change.
    b.js("document.querySelector('#sys-%s button.release').click(); true" % sid)
    b.wait("(r => r && r.textContent.includes('Released'))(document.getElementById('sys-%s'))" % sid,
           what="the composition Released")
    assert api(pc, "/Systems/" + sid)["Oem"]["Strata"]["State"] == "Released"
    b.wait("document.querySelector('#pool-gpus').textContent.includes('%d free of %d')"
           % (GPUS, GPUS), what="the GPU back in the pool")
    assert not b.js("!!document.querySelector('#sys-%s button.release')" % sid)
    usage = text_of(b, "#usage-portal")
    assert usage.startswith("portal"), usage
    b.screenshot(shots / "4-released.png")
    for n in ("1-sign-in", "2-pools", "3-composed", "4-released"):
        assert (shots / (n + ".png")).stat().st_size > 1000, n
