"""Issue 22 in the Experiments panel: a step whose path would leave this
server's API (another host, a scheme, a backslash, outside /api/, hidden
characters) is refused in the page and never sent. No sleeps: WebDriverWait only."""

import threading
import uuid
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By

from conftest import BASE, api
from test_dashboard import wait
from test_lab import PLAY_DEADLINE, choose, failures_text, open_lab, step_states


# Installed in the page: serves a crafted experiment (one the server itself
# would refuse to load) as if GET /api/experiments had listed it, answers
# /api/lab-test-capture with values for its ${var}s, and records the URL of
# every fetch the page makes. Everything else goes to the real fetch.
FAKE_FETCH = """
const [crafted, values] = arguments;
window.__labFetches = [];
window.__realFetch = window.__realFetch || window.fetch;
const json = (body) => new Response(JSON.stringify(body), {status: 200, headers: {'Content-Type': 'application/json'}});
window.fetch = async (input, init) => {
  const url = String(input instanceof Request ? input.url : input);
  window.__labFetches.push(url);
  const u = new URL(url, location.origin);
  if (u.origin === location.origin && u.pathname === '/api/experiments') {
    const list = await (await window.__realFetch(input, init)).json();
    list.experiments.push({id: crafted.id, title: crafted.title, source: crafted.source, explanation: crafted.explanation, steps: crafted.steps.length});
    return json(list);
  }
  if (u.origin === location.origin && u.pathname === '/api/experiments/' + crafted.id) return json(crafted);
  if (u.origin === location.origin && u.pathname === '/api/lab-test-capture') return json(values);
  return window.__realFetch(input, init);
};
"""


@contextmanager
def crafted_experiment(driver, crafted, values):
    """While in the block, the page lists `crafted` as one of the server's
    experiments and answers its captures with `values` (FAKE_FETCH)."""
    open_lab(driver)
    driver.execute_script(FAKE_FETCH, crafted, values)
    try:
        yield
    finally:
        driver.execute_script("if (window.__realFetch) window.fetch = window.__realFetch")


def play_crafted(driver, crafted, steps):
    """Reopens the panel (which lists the experiments again), picks `crafted`
    and plays it to the end; returns its card."""
    driver.find_element(By.ID, "lab-close").click()
    panel = open_lab(driver)
    summary = {"title": crafted["title"], "explanation": crafted["explanation"], "steps": steps}
    run = choose(driver, panel, crafted["id"], summary)
    driver.find_element(By.ID, "lab-play").click()
    wait(driver, PLAY_DEADLINE).until(lambda d: run.get_attribute("data-state") == "done")
    return run


class Counter(BaseHTTPRequestHandler):
    """Counts every request a listener gets (none is expected)."""

    seen = []

    def log_message(self, *args):
        pass

    def _any(self):
        Counter.seen.append(f"{self.command} {self.path}")
        self.send_response(204)
        self.end_headers()

    do_GET = do_POST = do_OPTIONS = do_DELETE = _any


@pytest.fixture
def other_host():
    """A listener on 127.0.0.2 at runloopd's port: where a crafted path would lead."""
    port = urlsplit(BASE).port
    try:
        server = ThreadingHTTPServer(("127.0.0.2", port), Counter)
    except OSError as e:
        pytest.skip(f"cannot listen on 127.0.0.2:{port} ({e})")
    Counter.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.2:{port}"
    server.shutdown()
    server.server_close()


def test_a_step_whose_path_leaves_this_servers_api_is_not_sent(driver, other_host):
    """A crafted experiment (served to the page as if the server listed it) whose
    paths lead to another host, outside /api/, or get there through a captured
    ${var}: those steps are refused in the page with the reason shown, nothing
    is fetched for them (not even an attempt CSP would block), and the plain
    steps around them still play."""
    eid = "crafted-" + uuid.uuid4().hex[:6]
    name = "lab-xo-" + uuid.uuid4().hex[:6]

    def create(path):
        return {"request": {"method": "POST", "path": path, "body": {"name": name}}, "expect": {"status": 201}}

    crafted = {
        "id": eid,
        "title": "Crafted paths",
        "source": {"article": "a test", "url": "", "section": ""},
        "explanation": "Steps whose requests would leave this server's API.",
        "steps": [
            {"say": "another host", **create(f"//{other_host}/api/threads")},
            {"say": "a scheme", **create(f"http://{other_host}/api/threads")},
            {"say": "a backslash", **create(f"/\\{other_host}/api/threads")},
            {"say": "outside /api/", "request": {"path": "/api/../healthz"}, "expect": {"status": 200}},
            {
                "say": "values to capture",
                "request": {"path": "/api/lab-test-capture"},
                "capture": {"next": "next", "up": "up"},
                "expect": {"status": 200},
            },
            {"say": "another host through a variable", **create("${next}")},
            {"say": "outside /api/ through a variable", "request": {"path": "/api/threads/${up}"}, "expect": {"status": 200}},
            {"say": "a plain step", "request": {"path": "/api/version"}, "expect": {"status": 200}},
        ],
    }
    values = {"next": f"//{other_host}/api/threads", "up": "%2e%2e/%2E%2E/healthz"}
    refused = [1, 2, 3, 4, 6, 7]

    with crafted_experiment(driver, crafted, values):
        play_crafted(driver, crafted, steps=8)
        states = step_states(driver)
        assert states == ["fail" if n in refused else "pass" for n in range(1, 9)], failures_text(driver)
        for n in range(1, 9):
            li = driver.find_element(By.CSS_SELECTOR, f'#lab-steps > li[data-step="{n}"]')
            if n in refused:
                assert li.get_attribute("data-refused") == "true"
                error = li.find_element(By.CSS_SELECTOR, ".lab-refused").text
                assert error.startswith("not sent: request.path is not an API path of this server ("), error
                assert li.find_element(By.CSS_SELECTOR, ".lab-answer").text == "→ not sent"
            else:
                assert li.get_attribute("data-refused") is None
        # the variable was filled in before the check: the request shown is the one refused
        step6 = driver.find_element(By.CSS_SELECTOR, '#lab-steps > li[data-step="6"] .lab-req code').text
        assert step6 == f"POST //{other_host}/api/threads"
        fetched = driver.execute_script("return window.__labFetches")
    assert any(u.endswith("/api/version") for u in fetched), fetched  # the plain step was sent
    assert [u for u in fetched if "127.0.0.2" in u or "healthz" in u] == [], fetched
    assert driver.execute_script("return window.__cspViolations") == []  # not even tried
    assert Counter.seen == []
    status, threads = api("GET", "/api/threads")
    assert status == 200 and not any(t["name"] == name for t in threads["threads"])
