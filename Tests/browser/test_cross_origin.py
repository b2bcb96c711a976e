"""Issue 12 in a real browser: a page from another origin (a second port on
127.0.0.1) fires the requests a hostile page can send without a preflight,
and runloopd's state is unchanged afterwards; a DNS name rebound to runloopd
gets nothing.

Uses its own Chromium (the dashboard tests share one live page). No sleeps:
WebDriverWait on the page's own "done" signal."""

import json
import re
import shutil
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.ui import WebDriverWait

from conftest import BASE, api

EVIL_PAGE = """<!doctype html>
<meta charset="utf-8">
<title>evil</title>
<iframe id="sandboxed" sandbox="allow-scripts"></iframe>
<script>
const target = %(target)s;
const victim = %(victim)s;
// What any page may send without a preflight: bodyless or text/plain POSTs
// in no-cors mode (the answer is opaque, the request still goes out).
const simple = (path, init) =>
  fetch(target + path, Object.assign({method: 'POST', mode: 'no-cors'}, init || {}))
    .then(r => 'sent:' + r.type, e => 'error:' + e);
window.results = 'running';
// A sandboxed frame has an opaque origin: its requests carry Origin: null.
const fromNullOrigin = new Promise(resolve => {
  addEventListener('message', e => resolve('null-origin:' + e.data));
  document.getElementById('sandboxed').srcdoc =
    '<script>fetch(' + JSON.stringify(target + '/api/threads') + ', {method: "POST", mode: "no-cors"})' +
    '.then(() => parent.postMessage("sent", "*"), e => parent.postMessage("error", "*"))<\\/script>';
});
Promise.allSettled([
  simple('/api/threads'),
  simple('/api/threads/' + victim + '/stop'),
  simple('/api/threads/' + victim + '/wakeup'),
  simple('/api/threads', {body: JSON.stringify({name: 'evil-text-plain'}), headers: {'Content-Type': 'text/plain'}}),
  // Needs a preflight (DELETE, JSON): refused, so the DELETE is never sent.
  fetch(target + '/api/threads/' + victim, {method: 'DELETE'}).then(r => 'read:' + r.status, e => 'blocked'),
  fetch(target + '/api/threads', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'})
    .then(r => 'read:' + r.status, e => 'blocked'),
  // A read: the answer is withheld from this origin (no CORS headers).
  fetch(target + '/api/threads').then(r => r.text(), e => 'blocked'),
  fromNullOrigin,
]).then(results => {
  window.results = results.map(r => r.value);
  document.title = 'done';
});
</script>
"""


def refusals(status):
    """runloopd_http_requests_total summed over every route for one status."""
    with urllib.request.urlopen(BASE + "/metrics", timeout=10) as res:
        text = res.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("runloopd_http_requests_total{") and f'status="{status}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def chromium(*extra):
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", *extra):
        opts.add_argument(arg)
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    return webdriver.Chrome(service=service, options=opts)


@pytest.fixture(scope="module")
def browser():
    # rebind.test resolves to 127.0.0.1: what a rebinding attacker's DNS answers.
    drv = chromium("--host-resolver-rules=MAP rebind.test 127.0.0.1")
    yield drv
    drv.quit()


@pytest.fixture
def victim():
    status, body = api("POST", "/api/threads", {"name": "xo-victim"})
    assert status == 201, body
    tid = body["id"]
    WebDriverWait(None, 10, poll_frequency=0.05).until(
        lambda _: api("GET", f"/api/threads/{tid}")[1]["state"] == "waiting"
    )
    yield tid
    api("DELETE", f"/api/threads/{tid}")


@pytest.fixture
def evil_origin(victim):
    """A server on a second 127.0.0.1 port serving the hostile page."""
    page = (EVIL_PAGE % {"target": json.dumps(BASE), "victim": json.dumps(victim)}).encode()

    class Evil(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Evil)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def state():
    status, body = api("GET", "/api/threads")
    assert status == 200
    return {t["id"]: (t["name"], t["exits"]["stopped"], t["endedAt"]) for t in body["threads"]}


def test_page_from_another_origin_changes_nothing(browser, evil_origin, victim):
    assert urlsplit(evil_origin).port != urlsplit(BASE).port
    before = state()
    refused_before = refusals(403)
    browser.get(evil_origin + "/")
    WebDriverWait(browser, 15, poll_frequency=0.05).until(lambda d: d.title == "done")
    results = browser.execute_script("return window.results")
    # The simple requests did go out; their answers are withheld from the page
    # (opaque, or a network error: Cross-Origin-Resource-Policy: same-origin).
    # The preflighted ones never went out, and the read was withheld.
    sent = {"sent:opaque", "error:TypeError: Failed to fetch"}
    assert all(r in sent for r in results[:4]), results
    assert results[4:7] == ["blocked"] * 3, results
    assert results[7] in {"null-origin:sent", "null-origin:error"}, results
    # runloopd saw and refused them: 4 simple POSTs, the null-origin POST, 2 preflights.
    WebDriverWait(None, 10, poll_frequency=0.05).until(lambda _: refusals(403) >= refused_before + 7)
    after = state()
    assert after == before, (before, after)
    assert victim in after and after[victim][1] == 0  # never stopped
    assert not any(name.startswith("evil") for name, _, _ in after.values())


def test_rebound_dns_name_reads_and_changes_nothing(browser, victim):
    """A page at http://rebind.test:<runloopd's port>/ after its name was rebound
    to 127.0.0.1: runloopd answers it 421, so the page is not even served."""
    port = urlsplit(BASE).port
    before = state()
    browser.get(f"http://rebind.test:{port}/api/threads")
    body = browser.find_element("tag name", "body").text
    assert "misdirected_host" in body and victim not in body, body
    browser.get(f"http://rebind.test:{port}/")
    body = browser.find_element("tag name", "body").text
    assert "misdirected_host" in body, body
    # From that page (same-origin to itself, so no Origin check applies): the Host check alone refuses it.
    outcome = browser.execute_async_script(
        """const done = arguments[arguments.length - 1];
        fetch('/api/threads', {method: 'POST', headers: {'Content-Type': 'application/json'}, body: '{}'})
          .then(r => r.json().then(j => done(r.status + ' ' + j.error.code)), e => done('error ' + e));"""
    )
    assert outcome == "421 misdirected_host", outcome
    assert state() == before


def test_dashboard_headers_under_csp():
    with urllib.request.urlopen(BASE + "/", timeout=10) as res:
        csp = res.headers["Content-Security-Policy"]
        assert res.headers["X-Frame-Options"] == "DENY"
        assert res.headers["Referrer-Policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in csp and "script-src 'self';" in csp
    assert not re.search(r"unsafe-(inline|eval)", csp)
