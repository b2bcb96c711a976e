"""The Experiments panel (Public/js/lab.js): the header button opens it, it
lists the server's experiments (GET /api/experiments, from experiments/), and
playing real experiments in the page — Step, Reset, Play all — shows every
step ✓ with a summary "N of N steps passed", while the experiment's threads
appear on the dashboard. A crafted experiment whose paths would leave this
server's API is refused step by step. Shares the session's page (no reload).
No sleeps: WebDriverWait only."""

import json
import os
import re
import subprocess
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest
from selenium.webdriver.common.by import By

from conftest import BASE, api
from test_dashboard import no_horizontal_overflow, viewport, wait

# Played with Play all, in this order, when the server has them; any other
# experiment fills in so that at least three are played.
PREFERRED = ["testdemo1-empty-mode", "keep-alive-three-ways", "nested-runs-exit-reasons"]
AT_LEAST = 3
PLAY_DEADLINE = 60  # seconds for one experiment (its until-steps wait a few seconds at most)


def experiments():
    status, data = api("GET", "/api/experiments")
    assert status == 200, data
    return {x["id"]: x for x in data["experiments"]}


def chosen_ids():
    have = experiments()
    ids = [i for i in PREFERRED if i in have] + sorted(i for i in have if i not in PREFERRED)
    assert len(ids) >= AT_LEAST, f"the server lists only {sorted(have)} (is experiments/ in its working directory?)"
    return ids[:AT_LEAST], have


def open_lab(driver):
    wait(driver).until(lambda d: d.find_element(By.ID, "conn-text").text == "live")
    button = driver.find_element(By.ID, "lab-button")
    if driver.find_element(By.ID, "lab").is_displayed():
        return driver.find_element(By.ID, "lab")
    button.click()
    panel = wait(driver).until(lambda d: d.find_element(By.ID, "lab") if d.find_element(By.ID, "lab").is_displayed() else None)
    assert button.get_attribute("aria-expanded") == "true"
    return panel


def choose(driver, panel, eid, summary):
    pick = wait(driver, 10).until(lambda d: panel.find_element(By.CSS_SELECTOR, f'[data-experiment="{eid}"]'))
    pick.click()
    run = wait(driver, 10).until(
        lambda d: d.find_element(By.ID, "lab-run")
        if d.find_element(By.ID, "lab-run").get_attribute("data-experiment") == eid
        and len(d.find_elements(By.CSS_SELECTOR, "#lab-steps > li.lab-step")) == summary["steps"]
        else None
    )
    assert pick.get_attribute("aria-current") == "true"
    assert driver.find_element(By.ID, "lab-title").text == summary["title"]
    assert squash(driver.find_element(By.ID, "lab-explanation").text) == squash(summary["explanation"])
    return run


def squash(text):
    return " ".join(text.split())


def step_states(driver):
    return [li.get_attribute("data-status") for li in driver.find_elements(By.CSS_SELECTOR, "#lab-steps > li.lab-step")]


def failures_text(driver):
    """The failed steps as the page shows them (say, request, differences): the assertion message."""
    lines = []
    for li in driver.find_elements(By.CSS_SELECTOR, '#lab-steps > li.lab-step[data-status="fail"]'):
        lines.append(li.get_attribute("data-step") + ". " + li.find_element(By.CSS_SELECTOR, ".lab-say").text)
        lines.append("   " + li.find_element(By.CSS_SELECTOR, ".lab-req").text)
        for row in li.find_elements(By.CSS_SELECTOR, "tr.lab-diff"):
            what, expected, actual = (c.text for c in row.find_elements(By.CSS_SELECTOR, "th, td"))
            lines.append(f"   {what}: expected {expected}, actual {actual}")
    return "\n".join(lines)


def card_ids(driver):
    return {c.get_attribute("data-thread") for c in driver.find_elements(By.CSS_SELECTOR, "article.card[data-thread]")}


def test_experiments_panel_lists_the_servers_experiments(driver):
    have = experiments()
    panel = open_lab(driver)
    wait(driver, 10).until(lambda d: len(panel.find_elements(By.CSS_SELECTOR, "#lab-list [data-experiment]")) == len(have))
    for eid, x in have.items():
        item = panel.find_element(By.CSS_SELECTOR, f'[data-experiment="{eid}"]').find_element(By.XPATH, "..")
        assert x["title"] in item.text
        if x["source"]["article"]:
            assert x["source"]["article"] in item.text
        if x["source"]["url"].startswith(("http://", "https://")):
            assert item.find_element(By.CSS_SELECTOR, "a").get_attribute("href") == x["source"]["url"]


def test_step_then_reset(driver):
    (eid, *_), have = chosen_ids()
    panel = open_lab(driver)
    run = choose(driver, panel, eid, have[eid])
    assert set(step_states(driver)) == {"pending"}
    before = card_ids(driver)
    driver.find_element(By.ID, "lab-step").click()
    wait(driver, 10).until(lambda d: step_states(d)[0] in ("pass", "fail") and run.get_attribute("data-state") == "paused")
    assert step_states(driver)[0] == "pass", failures_text(driver)
    assert set(step_states(driver)[1:]) == {"pending"}
    first = driver.find_element(By.CSS_SELECTOR, '#lab-steps > li[data-step="1"]')
    assert first.find_element(By.CSS_SELECTOR, ".lab-mark").text == "✓"
    assert "${" not in first.find_element(By.CSS_SELECTOR, ".lab-req").text  # the request as sent
    total = have[eid]["steps"]
    assert driver.find_element(By.ID, "lab-summary").text.startswith(f"1 of {total} steps played")
    driver.find_element(By.ID, "lab-reset").click()
    wait(driver).until(lambda d: set(step_states(d)) == {"pending"} and run.get_attribute("data-state") == "idle")
    # Reset leaves the server alone: end what the first step created
    for tid in card_ids(driver) - before:
        api("DELETE", f"/api/threads/{tid}")


def test_play_all_three_experiments(driver, artifacts, console):
    ids, have = chosen_ids()
    seen_before = len(console.collect())  # earlier tests check their own entries
    panel = open_lab(driver)
    cards_before = card_ids(driver)
    for eid in ids:
        total = have[eid]["steps"]
        run = choose(driver, panel, eid, have[eid])
        driver.find_element(By.ID, "lab-play").click()
        wait(driver, PLAY_DEADLINE).until(lambda d: run.get_attribute("data-state") == "done")
        states = step_states(driver)
        assert states == ["pass"] * total, f"{eid}:\n{failures_text(driver)}"
        marks = [m.text for m in driver.find_elements(By.CSS_SELECTOR, "#lab-steps .lab-mark")]
        assert marks == ["✓"] * total
        assert driver.find_element(By.ID, "lab-summary").text == f"{total} of {total} steps passed."
        assert run.get_attribute("data-passed") == str(total) and run.get_attribute("data-failed") == "0"
        # Play all and Step have nothing left to play
        assert driver.find_element(By.ID, "lab-play").get_attribute("aria-disabled") == "true"
    # the experiments' threads reached the dashboard's cards (over the live event stream),
    # and their lanes show what they just did (ended ones, once "show ended" is ticked)
    new = wait(driver, 10).until(lambda d: card_ids(d) - cards_before)
    show_ended = driver.find_element(By.ID, "show-ended")
    was_ticked = show_ended.is_selected()
    if not was_ticked:
        show_ended.click()
    wait(driver, 10).until(
        lambda d: any(lane.is_displayed() for tid in new for lane in d.find_elements(By.CSS_SELECTOR, f'[data-lane="{tid}"]'))
    )

    try:
        viewport(driver, 1280, 900)
        # the lanes (main column) beside the played steps (the sticky side column)
        driver.execute_script(
            """
            window.scrollTo(0, document.getElementById('timeline').offsetTop - 8);
            const side = document.getElementById('detail');
            side.scrollTop = document.getElementById('lab-run').offsetTop - 8;
            """
        )
        wait(driver).until(no_horizontal_overflow)
        assert driver.save_screenshot(os.path.join(artifacts, "experiments-1280.png"))
        viewport(driver, 390, 844, mobile=True)
        driver.execute_script("document.getElementById('lab-run').scrollIntoView()")
        wait(driver).until(no_horizontal_overflow)  # the open panel fits a phone too
        assert driver.save_screenshot(os.path.join(artifacts, "experiments-390.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        if not was_ticked:
            show_ended.click()

    # no script error and no CSP violation; Chromium logs every 4xx answer a step
    # may expect (a 404 for an ended thread…) as a network error: those are fine
    assert driver.execute_script("return window.__cspViolations") == []
    network_4xx = re.compile(r"/api/\S* - Failed to load resource: the server responded with a status of 4\d\d")
    problems = [
        e
        for e in console.collect()[seen_before:]
        if e["level"] in ("SEVERE", "ERROR") and not (e.get("source") == "network" and network_4xx.search(e["message"]))
    ]
    assert problems == [], problems


# ---- issue 22: a step's path must be an API path of this server --------------------

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

    panel = open_lab(driver)
    driver.execute_script(FAKE_FETCH, crafted, values)
    try:
        driver.find_element(By.ID, "lab-close").click()  # reopening lists the experiments again
        panel = open_lab(driver)
        run = choose(driver, panel, eid, {"title": crafted["title"], "explanation": crafted["explanation"], "steps": 8})
        driver.find_element(By.ID, "lab-play").click()
        wait(driver, PLAY_DEADLINE).until(lambda d: run.get_attribute("data-state") == "done")
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
    finally:
        driver.execute_script("if (window.__realFetch) window.fetch = window.__realFetch")
    assert any(u.endswith("/api/version") for u in fetched), fetched  # the plain step was sent
    assert [u for u in fetched if "127.0.0.2" in u or "healthz" in u] == [], fetched
    assert driver.execute_script("return window.__cspViolations") == []  # not even tried
    assert Counter.seen == []
    status, threads = api("GET", "/api/threads")
    assert status == 200 and not any(t["name"] == name for t in threads["threads"])


# ---- issue 24: record a session in the page, replay it with runloopd play ----------


def test_record_a_session_and_download_it_for_play(driver, tmp_path):
    """Record, play an experiment in the page, Stop and download: the page
    downloads GET /api/journal since the recording began, holding exactly the
    requests made meanwhile, and `runloopd play` replays that file on a fresh
    (embedded) server with no difference."""
    (eid, *_), have = chosen_ids()
    panel = open_lab(driver)
    cards_before = card_ids(driver)
    record = driver.find_element(By.ID, "lab-record")
    assert record.get_attribute("aria-pressed") == "false"
    record.click()
    wait(driver, 10).until(lambda d: record.get_attribute("aria-pressed") == "true")
    assert record.text == "Stop and download"
    assert "Recording" in driver.find_element(By.ID, "lab-record-status").text

    run = choose(driver, panel, eid, have[eid])
    driver.find_element(By.ID, "lab-play").click()
    wait(driver, PLAY_DEADLINE).until(lambda d: run.get_attribute("data-state") == "done")
    assert set(step_states(driver)) == {"pass"}, failures_text(driver)
    doc = api("GET", f"/api/experiments/{eid}")[1]
    changes = [s["request"] for s in doc["steps"] if s["request"].get("method", "GET").upper() in ("POST", "DELETE")]
    assert changes, f"{eid} changes nothing: pick an experiment with POST steps"

    # the download lands in tmp_path (the page's CSP keeps fetch off blob: URLs)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(tmp_path)})
    record.click()
    link = driver.find_element(By.ID, "lab-record-download")
    wait(driver, 10).until(lambda d: record.get_attribute("aria-pressed") == "false" and link.is_displayed())
    name = link.get_attribute("download")
    assert name.startswith("runloopd-session-") and name.endswith(".json")
    assert link.get_attribute("href").startswith("blob:")
    file = tmp_path / name
    wait(driver, 20).until(lambda d: file.exists() and file.stat().st_size > 0)
    text = file.read_text()
    session = json.loads(text)
    steps = session["steps"]
    assert int(link.get_attribute("data-steps")) == len(steps)
    # exactly the experiment's state-changing requests, in order (ids captured as ${…})
    assert [(s["request"]["method"], re.sub(r"\$\{[^}]*\}", "X", s["request"]["path"])) for s in steps] == [
        (c["method"].upper(), re.sub(r"\$\{[^}]*\}", "X", c["path"])) for c in changes
    ]
    assert f"Recorded {len(steps)} request" in driver.find_element(By.ID, "lab-record-status").text

    binary = os.environ.get("RUNLOOPD_BIN")
    if not binary:
        pytest.skip("RUNLOOPD_BIN is not set (run through Tests/browser/run.sh)")
    played = subprocess.run([binary, "play", str(file), "--diff"], capture_output=True, text=True, timeout=120)
    assert played.returncode == 0, played.stdout + played.stderr
    assert "1 of 1 experiments passed" in played.stdout
    # what the experiment created on the dashboard's server
    for tid in card_ids(driver) - cards_before:
        api("DELETE", f"/api/threads/{tid}")


def test_the_page_plays_a_recorded_session_with_a_background_run(driver):
    """A session recorded on the server (a blocking run sent in the background,
    the stop sent while it runs), served to the page as an experiment: the
    page sends the run, waits until the thread is inside it, sends the stop,
    and both steps pass (stopped), as runloopd play does."""
    name = "lab-bg-" + uuid.uuid4().hex[:6]
    since = api("GET", "/api/journal?limit=1&since=99999999999")[1]["journalSeq"]
    status, thread = api("POST", "/api/threads", {"name": name, "run": {"style": "manual"}})
    assert status == 201, thread
    tid = thread["id"]
    answers = {}
    runner = threading.Thread(target=lambda: answers.update(run=api("POST", f"/api/threads/{tid}/run", {"seconds": 20})))
    runner.start()
    wait(driver, 10).until(lambda d: api("GET", f"/api/threads/{tid}")[1]["state"] == "waiting")
    assert api("POST", f"/api/threads/{tid}/stop")[1]["exitReason"] == "stopped"
    runner.join(20)
    assert answers["run"][1]["exitReason"] == "stopped"
    assert api("DELETE", f"/api/threads/{tid}")[0] == 200
    session = api("GET", f"/api/journal?since={since}")[1]
    steps = session["steps"]
    assert [s["request"]["path"].rsplit("/", 1)[-1] for s in steps] == ["threads", "run", "stop", "${" + tid + "}"]
    assert steps[1].get("background") is True  # answered after the stop arrived

    eid = "recorded-" + uuid.uuid4().hex[:6]
    crafted = {**session, "id": eid, "title": "A recorded background run and its stop"}
    panel = open_lab(driver)
    driver.execute_script(FAKE_FETCH, crafted, {})
    try:
        driver.find_element(By.ID, "lab-close").click()  # reopening lists the experiments again
        panel = open_lab(driver)
        run = choose(driver, panel, eid, {"title": crafted["title"], "explanation": crafted["explanation"], "steps": 4})
        driver.find_element(By.ID, "lab-play").click()
        wait(driver, PLAY_DEADLINE).until(lambda d: run.get_attribute("data-state") == "done")
        assert step_states(driver) == ["pass"] * 4, failures_text(driver)
        assert driver.find_element(By.ID, "lab-summary").text == "4 of 4 steps passed."
    finally:
        driver.execute_script("if (window.__realFetch) window.fetch = window.__realFetch")
