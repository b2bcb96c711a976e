"""Token support, against a small authenticating proxy in front of runloopd
(it records how each request authenticated): a 401 makes the page ask once,
keep the token in sessionStorage and send `Authorization: Bearer` on every
request, the event stream included (read through fetch, not EventSource, so
the token never travels in a URL)."""

import http.client
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import BASE, api

TOKEN = "s3cret-token-0123456789"
UPSTREAM = urllib.parse.urlsplit(BASE)
HOP = {"connection", "keep-alive", "transfer-encoding", "content-length"}


class Proxy(BaseHTTPRequestHandler):
    seen = []  # (path, how it authenticated)
    targets = []  # every request target as sent, query included

    def log_message(self, *args):
        pass

    def _auth(self):
        if self.headers.get("Authorization") == "Bearer " + TOKEN:
            return "header"
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        if query.get("access_token") == [TOKEN]:
            return "query"
        return None

    def _handle(self):
        Proxy.targets.append(self.path)
        how = self._auth()
        if self.path.startswith("/api/") and how is None:
            body = json.dumps({"error": {"code": "unauthorized", "message": "a token is required", "field": None}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        Proxy.seen.append((urllib.parse.urlsplit(self.path).path, how))
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else None
        conn = http.client.HTTPConnection(UPSTREAM.hostname, UPSTREAM.port, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP | {"host", "authorization"}}
        conn.request(self.command, self.path, body=data, headers=headers)
        res = conn.getresponse()
        self.send_response(res.status)
        for k, v in res.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.end_headers()
        try:
            while True:
                chunk = res.read1(65536)
                if not chunk:
                    break
                self.wfile.write(chunk)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            conn.close()

    do_GET = do_POST = do_DELETE = do_HEAD = _handle


@pytest.fixture
def proxy(driver):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    # the page leaves the proxy's origin first: a page left on it would reconnect its
    # stream (it does when the threads it inspects change) to a closed port
    driver.get("about:blank")
    server.shutdown()
    server.server_close()


def sign_in(driver, proxy):
    """Opens the page through the proxy (a new origin: a fresh sessionStorage) and answers the token dialog."""
    driver.get(proxy + "/?view=cards")
    wait = WebDriverWait(driver, 10, poll_frequency=0.05)
    dialog = driver.find_element(By.ID, "token-dialog")
    wait.until(lambda d: dialog.get_attribute("open") is not None)
    field = dialog.find_element(By.NAME, "token")
    field.send_keys(TOKEN)
    dialog.find_element(By.CSS_SELECTOR, 'button[value="ok"]').click()
    wait.until(lambda d: d.find_element(By.ID, "conn-text").text == "live")
    return wait


def test_token_prompted_once_and_sent(driver, console, proxy):
    console.collect()  # earlier tests' entries were checked already
    wait = sign_in(driver, proxy)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "article.card[data-thread]"))
    assert driver.execute_script("return sessionStorage.getItem('runloopd.token')") == TOKEN
    assert ("/api/events", "header") in Proxy.seen
    assert ("/api/threads", "header") in Proxy.seen
    # asked once: the dialog is closed and stays closed
    assert driver.find_element(By.ID, "token-dialog").get_attribute("open") is None
    entries = driver.get_log("browser")
    bad = [
        e for e in entries
        if e["level"] == "SEVERE" and not ("status of 401" in e["message"] and e.get("source") == "network")
    ]
    assert bad == [], bad


def test_live_events_with_token_and_no_token_in_any_url(driver, console, proxy):
    seen_before = len(console.collect())
    Proxy.targets.clear()
    wait = sign_in(driver, proxy)
    # a thread with a 100 ms timer made behind the page's back: its card's fire count
    # rises with the event stream's timer events (a snapshot carries only the count at its time)
    status, thread = api("POST", "/api/threads", {"name": "token-live"})
    assert status == 201
    tid = thread["id"]
    assert api("POST", f"/api/threads/{tid}/timers", {"interval": 0.1})[0] == 201
    try:
        fires = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, f'article.card[data-thread="{tid}"] [data-role=fires]'))
        wait.until(lambda d: int(fires.text or 0) >= 3)
    finally:
        api("DELETE", f"/api/threads/{tid}")
    assert any(t.startswith("/api/events") for t in Proxy.targets)
    in_urls = [t for t in Proxy.targets if TOKEN in urllib.parse.unquote(t)]
    assert in_urls == [], in_urls
    # the browser's own record of what the page loaded and fetched agrees
    names = driver.execute_script(
        "return [location.href, ...performance.getEntriesByType('navigation').map((e) => e.name),"
        " ...performance.getEntriesByType('resource').map((e) => e.name)]"
    )
    assert any("/api/threads" in n for n in names)
    assert [n for n in names if TOKEN in urllib.parse.unquote(n)] == []
    bad = [e for e in console.collect()[seen_before:] if e["level"] == "SEVERE" and not ("status of 401" in e["message"] and e.get("source") == "network")]
    assert bad == [], bad
