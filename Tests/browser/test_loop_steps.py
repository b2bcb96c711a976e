"""The run loop's own steps, live (issue 39): the detail panel's #loop-steps
section draws CF's ten steps and lights, for one recorded turn of a real run,
the steps the loop took, in order, with the callouts and what woke it
(Public/js/detail-steps.js). A manual thread runs once for 0.4 s with a
one-shot timer that signals a custom source at 0.1 s: its turns are recorded
(GET /turns), and scrubbing through them shows the run's entry, then a turn
woken by the timer (the timer fired in "handle", the source0 ran in step 4,
then the loop slept again), then the deadline's wake-up and the return. The
expected lights are derived here from the recorded turns themselves; a
screenshot of the lit timer turn goes to the artifacts. Shares the session's
page. No sleeps: WebDriverWait only."""

from selenium.webdriver.common.by import By

from conftest import api
from test_dashboard import card_by_name, open_details, screenshot, unique, viewport, wait

STEPS = ["entry", "timers", "sources", "sources0", "source1", "beforeWaiting", "sleep", "woke", "handle", "exit"]


def lit(driver):
    """{step id: its order} for the lit steps, and the notes by step id."""
    order, notes = {}, {}
    for li in driver.find_elements(By.CSS_SELECTOR, "#steps-list > li.step"):
        if li.get_attribute("data-lit") == "true":
            order[li.get_attribute("data-step")] = int(li.get_attribute("data-order"))
            notes[li.get_attribute("data-step")] = li.find_element(By.CSS_SELECTOR, ".step-note").text
    return order, notes


def shown_turn(driver):
    return driver.find_element(By.ID, "loop-steps").get_attribute("data-turn")


def scrub_to(driver, turn):
    """Presses Previous / Next until the panel shows `turn`."""
    for _ in range(100):
        now = int(shown_turn(driver) or 0)
        if now == turn:
            return
        driver.find_element(By.ID, "steps-next" if now < turn else "steps-prev").click()
        wait(driver).until(lambda d: shown_turn(d) != str(now))
    raise AssertionError(f"could not reach turn {turn}")


def test_steps_panel_lights_a_recorded_turn(driver, artifacts):
    name = unique("steps")
    status, t = api("POST", "/api/threads", {"name": name, "keepAlive": "port", "run": {"style": "manual"}})
    assert status == 201, t
    tid = t["id"]
    status, s = api("POST", f"/api/threads/{tid}/sources", {"kind": "custom", "action": {"selector": "count", "args": {"name": "fire"}}})
    assert status == 201, s
    status, tm = api(
        "POST", f"/api/threads/{tid}/timers", {"interval": 0.1, "repeats": False, "action": {"selector": "signal", "args": {"source": s["id"]}}}
    )
    assert status == 201, tm
    status, run = api("POST", f"/api/threads/{tid}/run", {"seconds": 0.4})
    assert status == 200 and run["exitReason"] == "timedOut", run
    status, page = api("GET", f"/api/threads/{tid}/turns")
    turns = [x for x in page["turns"] if x["run"] == run["run"]]
    # what the loop really did, as recorded: entry, a turn woken by the timer with the
    # timer and the source0 in it that went back to sleep, and the deadline's wake-up
    first, fired, last = turns[0], next(x for x in turns if x["wokeBy"] == {"kind": "timer", "id": tm["id"]}), turns[-1]
    assert first["wokeBy"]["kind"] == "none" and last["end"] == "exit" and last["wokeBy"]["kind"] == "timeout", turns
    assert [c["kind"] for c in fired["callouts"]] == ["timer", "source"] and fired["end"] == "sleep", fired

    wait(driver).until(lambda d: card_by_name(d, name))
    open_details(driver, card_by_name(driver, name))
    panel = driver.find_element(By.ID, "loop-steps")
    driver.execute_script("arguments[0].scrollIntoView()", panel)
    wait(driver, 10).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#steps-list > li.step")) == 10 and shown_turn(d))
    assert [li.get_attribute("data-step") for li in driver.find_elements(By.CSS_SELECTOR, "#steps-list > li.step")] == STEPS

    # the timer's turn: woke by the timer, handled it, a pass that ran the source0, then sleep
    scrub_to(driver, fired["turn"])
    order, notes = lit(driver)
    assert list(sorted(order, key=order.get)) == ["woke", "handle", "timers", "sources", "sources0", "source1", "beforeWaiting", "sleep"], order
    assert f"timer {tm['id']}" in notes["woke"] and "after sleeping" in notes["woke"]
    assert f"timer {tm['id']} (signal) ran" in notes["handle"]
    assert f"source {s['id']} (count) ran" in notes["sources0"]
    assert "slept" in notes["sleep"] and f"until turn {last['turn']}" in notes["sleep"]
    assert "entry" not in order and "exit" not in order
    assert driver.find_element(By.ID, "steps-path").text == "This turn took steps 8 → 9 → 2 → 3 → 4 → 5 → 6 → 7"
    assert f"Turn {fired['turn']} of run {run['run']}" in driver.find_element(By.ID, "steps-title").text
    try:
        viewport(driver, 1280, 900)
        screenshot(driver, artifacts, "loop-steps-1280.png", "document.getElementById('loop-steps').scrollIntoView()")
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    # the run's first turn: entered, a pass with nothing ready, then sleep
    scrub_to(driver, first["turn"])
    order, notes = lit(driver)
    assert list(sorted(order, key=order.get)) == ["entry", "timers", "sources", "source1", "beforeWaiting", "sleep"], order
    assert f"run {run['run']} entered mode default" in notes["entry"]

    # the last: woken by the deadline, nothing to handle, the run returned timedOut
    scrub_to(driver, last["turn"])
    order, notes = lit(driver)
    assert list(sorted(order, key=order.get)) == ["woke", "handle", "exit"], order
    assert "timeout" in notes["woke"] and "deadline" in notes["handle"]
    assert "returned timedOut (deadline)" in notes["exit"]
    api("DELETE", f"/api/threads/{tid}")
