"""Lanes that stay (issue 39): an ended thread's timeline lane keeps its
turns and run exits at their real times while they are in the window. The
page plays testdemo4 (four runs on its worker, spread over seconds; the
experiment deletes its threads at the end), then is reloaded — so nothing
of those threads reached it live, as for a learner who opens the dashboard
after an experiment, or watched the thread table — and "show ended" is
ticked: the worker's lane shows its turns, and one exit mark per run, at
distinct x positions whose spacing matches the runs' recorded times (the
server keeps an ended thread's turns and last exits: GET
/api/threads/{id}/turns?exits=true). Before, every ended lane showed one
exit tick, all at the same x (the page's load), and no turns. Shares the
session's page. No sleeps: WebDriverWait only."""

from datetime import datetime

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import BASE, api
from test_dashboard import wait
from test_lab import choose, experiments, failures_text, open_lab, step_states

EXPERIMENT = "testdemo4-signal-with-and-without-wakeup"
PLAY_DEADLINE = 60


def lane(driver, tid):
    found = driver.find_elements(By.CSS_SELECTOR, f'#lanes [data-lane="{tid}"]')
    return found[0] if found else None


def drawn(driver, tid):
    """{turns, exits: [x…]} as the lane was last drawn, or None while it is hidden."""
    box = lane(driver, tid)
    if box is None or not box.is_displayed():
        return None
    xs = box.get_attribute("data-exit-xs") or ""
    return {"turns": int(box.get_attribute("data-turns") or 0), "exits": [float(x) for x in xs.split(",") if x]}


def test_an_ended_threads_lane_keeps_its_turns_and_exits(driver):
    have = experiments()
    assert EXPERIMENT in have, sorted(have)
    if not driver.find_elements(By.ID, "lab-button"):
        driver.get(BASE + "/?view=cards")
    panel = open_lab(driver)
    run = choose(driver, panel, EXPERIMENT, have[EXPERIMENT])
    driver.find_element(By.ID, "lab-play").click()
    wait(driver, PLAY_DEADLINE).until(lambda d: run.get_attribute("data-state") == "done")
    assert step_states(driver) == ["pass"] * have[EXPERIMENT]["steps"], failures_text(driver)

    status, threads = api("GET", "/api/threads?limit=1000")
    assert status == 200
    worker = max((t for t in threads["threads"] if t["name"] == "testDemo4"), key=lambda t: int(t["id"][1:]))
    assert worker["state"] == "exited", worker  # the experiment deleted it
    tid = worker["id"]
    status, page = api("GET", f"/api/threads/{tid}/turns?limit=1000&exits=true")
    assert status == 200, page
    exits = page["exits"]
    assert len(exits) >= 4 and len(page["turns"]) >= 4, page  # four runs, a turn or more each

    # A fresh page: nothing of that thread came to it live.
    driver.get(BASE + "/?view=cards")
    wait(driver, 10).until(lambda d: d.find_element(By.ID, "conn-text").text == "live")
    window = Select(driver.find_element(By.ID, "tl-window"))
    before = window.first_selected_option.get_attribute("value")  # the page's own default, put back after
    window.select_by_value("60")
    show_ended = driver.find_element(By.ID, "show-ended")
    if not show_ended.is_selected():
        show_ended.click()
    try:
        got = wait(driver, 15).until(
            lambda d: (x := drawn(d, tid)) and x["turns"] >= len(page["turns"]) and len(x["exits"]) >= len(exits) and x
        )
        xs = sorted(got["exits"])
        assert len(xs) == len(exits), got
        times = sorted(datetime.fromisoformat(x["at"].replace("Z", "+00:00")).timestamp() * 1000 for x in exits)
        # spread over the lane, not one tick: the runs span a second or more (about 18 px at 60 s)
        assert xs[-1] - xs[0] >= 10, (xs, times)
        # spaced as the runs' recorded times are: one px-per-ms scale for every gap, and
        # runs 100 ms or more apart a pixel or more apart (two runs 30 ms apart may share one)
        scale = (xs[-1] - xs[0]) / (times[-1] - times[0])
        for (xa, xb), (ta, tb) in zip(zip(xs, xs[1:]), zip(times, times[1:])):
            assert abs((xb - xa) - (tb - ta) * scale) <= 2, (xs, times, scale)
            if tb - ta >= 100:
                assert xb - xa >= 1, (xs, times)
        # the exits are where they happened, not at the page's load: the newest is not at the right edge
        plot_right = driver.execute_script("return arguments[0].clientWidth - 4", lane(driver, tid))
        ms_since_last = driver.execute_script("return Date.now()") - times[-1]
        assert xs[-1] < plot_right - 0.5 * ms_since_last * scale, (xs, plot_right, ms_since_last, scale)
    finally:
        show_ended.click()
        Select(driver.find_element(By.ID, "tl-window")).select_by_value(before)
