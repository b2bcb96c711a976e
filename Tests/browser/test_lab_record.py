"""Issue 24 in the Experiments panel: a session recorded in the page is
downloaded as an experiment that `runloopd play` replays with no difference,
and the page plays a recorded session with a background run. No sleeps:
WebDriverWait only."""

import json
import os
import re
import subprocess
import threading
import uuid

import pytest
from selenium.webdriver.common.by import By

from conftest import api
from test_dashboard import wait
from test_lab import PLAY_DEADLINE, card_ids, choose, chosen_ids, failures_text, open_lab, step_states
from test_lab_paths import crafted_experiment, play_crafted


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
    with crafted_experiment(driver, crafted, {}):
        play_crafted(driver, crafted, steps=4)
        assert step_states(driver) == ["pass"] * 4, failures_text(driver)
        assert driver.find_element(By.ID, "lab-summary").text == "4 of 4 steps passed."
