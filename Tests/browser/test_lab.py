"""The Experiments panel (Public/js/lab.js): the header button opens it, it
lists the server's experiments (GET /api/experiments, from experiments/), and
playing real experiments in the page — Step, Reset, Play all — shows every
step ✓ with a summary "N of N steps passed", while the experiment's threads
appear on the dashboard. A crafted experiment whose paths would leave this
server's API is refused step by step (test_lab_paths.py); a session is
recorded and replayed (test_lab_record.py). Shares the session's page (no
reload). No sleeps: WebDriverWait only."""

import re

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import api
from test_dashboard import screenshot, viewport, wait
from test_explain import pause_timeline, resume_timeline

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
    # An ended thread's lane shows while its end is inside the timeline's window
    # (10 s by default). Freeze a 60 s window now that the last experiment is
    # done: its threads' ends stay inside however slowly the page goes on (under
    # two CPU hogs per core the lanes were checked more than 10 s, then more than
    # 60 s after the threads ended, and were rightly hidden: issue 41).
    window = Select(driver.find_element(By.ID, "tl-window"))
    window_before = window.first_selected_option.get_attribute("value")
    window.select_by_value("60")
    was_paused = driver.find_element(By.ID, "tl-pause").get_attribute("aria-pressed") == "true"
    pause_timeline(driver)
    show_ended = driver.find_element(By.ID, "show-ended")
    was_ticked = show_ended.is_selected()
    try:
        # the experiments' threads reached the dashboard's cards (over the live event stream),
        # and their lanes show what they just did (ended ones, once "show ended" is ticked)
        new = wait(driver, 10).until(lambda d: card_ids(d) - cards_before)
        if not was_ticked:
            show_ended.click()
        # an ended thread's lane is drawn from its /turns?exits=true answer
        wait(driver, 60).until(
            lambda d: any(lane.is_displayed() for tid in new for lane in d.find_elements(By.CSS_SELECTOR, f'[data-lane="{tid}"]'))
        )
        viewport(driver, 1280, 900)
        # the lanes (main column) beside the played steps (the sticky side column)
        screenshot(
            driver,
            artifacts,
            "experiments-1280.png",
            """
            window.scrollTo(0, document.getElementById('timeline').offsetTop - 8);
            const side = document.getElementById('detail');
            side.scrollTop = document.getElementById('lab-run').offsetTop - 8;
            """,
        )
        viewport(driver, 390, 844, mobile=True)
        screenshot(driver, artifacts, "experiments-390.png", "document.getElementById('lab-run').scrollIntoView()")  # the open panel fits a phone too
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        if not was_ticked and show_ended.is_selected():
            show_ended.click()
        if not was_paused:
            resume_timeline(driver)
        window.select_by_value(window_before)

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
