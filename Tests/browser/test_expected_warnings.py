"""Warnings an experiment raises on purpose (issue 39). An experiment's
`expectedWarnings` (timer-due-during-a-handler: its source handler blocks
the loop 300 ms on purpose, a `stall`) are listed under its explanation, and
once it is played in the page the stall on the thread it created shows in
the Warnings panel muted, "expected by this experiment", with the reason,
its badge grey and its card not counting it. A stall on a thread no
experiment made (the same 300 ms handler, made here through the API) still
shows as a warning: its severity's colour, no "expected". Shares the
session's page. No sleeps: WebDriverWait only."""

from selenium.webdriver.common.by import By

from conftest import BASE, api
from test_dashboard import unique, wait
from test_lab import choose, experiments, failures_text, open_lab, step_states

EXPERIMENT = "timer-due-during-a-handler"
PLAY_DEADLINE = 60


def warning_item(driver, thread, code):
    """What the panel shows of one warning, read in one script (the list is
    redrawn when a warning changes: an element found, then read in several
    calls, can be replaced in between), or None when it is not shown."""
    return driver.execute_script(
        "const li = document.querySelector(`#warnings-list > li[data-thread=\"${arguments[0]}\"][data-code=\"${arguments[1]}\"]`);"
        "if (!li) return null;"
        "const badge = li.querySelector('.badge.sev');"
        "return {expected: li.dataset.expected, classes: [...li.classList], text: li.innerText,"
        " badgeClasses: [...badge.classList], badgeText: badge.textContent,"
        " badgeColour: getComputedStyle(badge).backgroundColor};",
        thread,
        code,
    )


def stall_on_a_thread_of_our_own():
    """A manual thread whose source handler sleeps 300 ms, run once: a stall no experiment declared."""
    status, t = api("POST", "/api/threads", {"name": unique("unplanned"), "run": {"style": "manual"}})
    assert status == 201, t
    status, s = api("POST", f"/api/threads/{t['id']}/sources", {"kind": "custom", "action": {"selector": "sleep", "args": {"ms": 300}}})
    assert status == 201, s
    status, body = api("POST", f"/api/threads/{t['id']}/sources/{s['id']}/signal", {"wakeup": False})
    assert status == 200, body
    status, body = api("POST", f"/api/threads/{t['id']}/run", {"seconds": 2, "returnAfterSourceHandled": True})
    assert status == 200 and body["exitReason"] == "handledSource", body
    return t["id"]


def test_an_expected_warning_is_muted_an_unexpected_one_is_not(driver):
    have = experiments()
    assert EXPERIMENT in have, sorted(have)
    status, doc = api("GET", f"/api/experiments/{EXPERIMENT}")
    assert status == 200 and doc["expectedWarnings"][0]["code"] == "stall", doc
    reason = doc["expectedWarnings"][0]["reason"]
    if not driver.find_elements(By.ID, "lab-button"):
        driver.get(BASE + "/?view=cards")  # an earlier test left the dashboard
    panel = open_lab(driver)
    run = choose(driver, panel, EXPERIMENT, have[EXPERIMENT])
    listed = driver.find_element(By.ID, "lab-expected")
    assert listed.is_displayed() and "stall" in listed.text and " ".join(reason.split()) in " ".join(listed.text.split())
    driver.find_element(By.ID, "lab-play").click()
    wait(driver, PLAY_DEADLINE).until(lambda d: run.get_attribute("data-state") == "done")
    assert step_states(driver) == ["pass"] * have[EXPERIMENT]["steps"], failures_text(driver)
    status, threads = api("GET", "/api/threads?limit=1000")
    assert status == 200
    planned = max((t for t in threads["threads"] if t["name"] == "busy"), key=lambda t: int(t["id"][1:]))["id"]

    unplanned = stall_on_a_thread_of_our_own()
    try:
        # both stalls reach the panel (a warning event, or its 3 s reload)
        wait(driver, 15).until(lambda d: warning_item(d, planned, "stall") and warning_item(d, unplanned, "stall"))
        expected = warning_item(driver, planned, "stall")
        assert expected["expected"] == "true", expected
        assert "expected" in expected["classes"], expected
        text = " ".join(expected["text"].split())
        assert "expected by this experiment" in text and " ".join(reason.split()) in text, text
        assert "sev-expected" in expected["badgeClasses"], expected
        grey = expected["badgeColour"]

        surprise = warning_item(driver, unplanned, "stall")
        assert surprise["expected"] == "false", surprise
        assert "expected" not in surprise["classes"], surprise
        assert "expected by this experiment" not in surprise["text"], surprise
        severity = surprise["badgeText"].strip()
        assert severity in ("micro", "hang", "severe"), severity
        assert f"sev-{severity}" in surprise["badgeClasses"], surprise
        assert surprise["badgeColour"] != grey, (surprise, grey)  # its severity's colour, not the muted grey
        # the unexpected one comes first
        # read in one script: the list re-renders as warnings come, and an item
        # found then read in two steps can be gone in between (stale element)
        items = driver.execute_script(
            "return [...document.querySelectorAll('#warnings-list > li')].map(li => li.dataset.thread)")
        assert items.index(unplanned) < items.index(planned), items
    finally:
        api("DELETE", f"/api/threads/{unplanned}")
