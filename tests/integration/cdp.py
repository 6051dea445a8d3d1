"""A headless Chromium driven through its DevTools protocol (CDP) over a
websocket (Debian's chromium and python3-websocket): enough to load a
page, run script in it, wait for a condition and take screenshots.

Chromium refuses to run as root with its sandbox, so it runs as an
unprivileged user ('nobody') in a profile directory of its own; it
listens for DevTools on a loopback port it picks itself
(DevToolsActivePort)."""

import base64
import json
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request

CHROMIUM = shutil.which("chromium")
USER = "nobody"


def missing():
    """Why a browser cannot be driven here, or None."""
    if not CHROMIUM:
        return "chromium is not installed (scripts/deps.sh installs it)"
    try:
        import websocket  # noqa: F401
    except ImportError:
        return "python3-websocket is not installed (scripts/deps.sh installs it)"
    if os.geteuid() != 0:
        return "the browser runs as '%s': needs root to switch to it" % USER
    return None


class Browser:
    def __init__(self, width=1280, height=1100, timeout=30):
        import websocket
        self.base = tempfile.mkdtemp(prefix="strata-chromium-", dir="/tmp")
        pw = pwd.getpwnam(USER)
        os.chown(self.base, pw.pw_uid, pw.pw_gid)
        os.chmod(self.base, 0o700)
        self.log = open(os.path.join(self.base + ".log"), "wb")
        prof = os.path.join(self.base, "profile")
        self.proc = subprocess.Popen(
            ["runuser", "-u", USER, "--", "env", "HOME=" + self.base, CHROMIUM,
             "--headless=new", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
             "--user-data-dir=" + prof, "--no-first-run", "--no-default-browser-check",
             "--disable-gpu", "--disable-extensions", "--window-size=%d,%d" % (width, height),
             "about:blank"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        port_file = os.path.join(prof, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        port = None
        while time.monotonic() < deadline and port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("chromium exited with %s; see %s.log" % (self.proc.returncode,
                                                                            self.base))
            try:
                with open(port_file) as f:
                    port = int(f.readline().strip())
            except (OSError, ValueError):
                time.sleep(0.1)
        if port is None:
            self.close()
            raise RuntimeError("chromium wrote no DevToolsActivePort in %d s" % timeout)
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=timeout) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        self.ws = websocket.create_connection(pages[0]["webSocketDebuggerUrl"], timeout=timeout)
        self.seq = 0
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method, **params):
        """Sends a command; returns its result (events before it are
        dropped)."""
        self.seq += 1
        me = self.seq
        self.ws.send(json.dumps({"id": me, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == me:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def goto(self, url):
        self.call("Page.navigate", url=url)

    def js(self, expr):
        """The value of a JavaScript expression (a promise is awaited)."""
        r = self.call("Runtime.evaluate", expression=expr, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError("script failed: %s" % r["exceptionDetails"])
        return r.get("result", {}).get("value")

    def wait(self, expr, timeout=30, what=None):
        """Waits until expr is truthy in the page; returns its value."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                last = self.js(expr)
            except RuntimeError:
                last = None
            if last:
                return last
            time.sleep(0.1)
        raise AssertionError("timed out after %d s waiting for %s" % (timeout, what or expr))

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.base, ignore_errors=True)
