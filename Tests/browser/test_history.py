"""The History panel (Public/js/history.js) and its Fleet tab (Public/js/fleet.js)
against the server's real history store (run.sh gives it a temporary
--data-dir): a thread's life made over the API (performs ok and failed, a
stop, its end) read back from GET /api/history as rows with one-line
summaries; a filter by type; paging by cursor; a run-exit opened to its cause;
the Threads tab with the ended thread and how it ended; the Fleet tab with this
instance up and a link to its dashboard; Escape closes. Shares the session's
page (no reload). No sleeps: WebDriverWait only."""

import re

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from conftest import api
from test_dashboard import screenshot, unique, viewport, wait

PERFORMS = 22  # the paging thread's performs: pages of 10, 10 and 2


@pytest.fixture(scope="module", autouse=True)
def console_mark(console):
    """Where this module's console entries start (earlier modules check theirs)."""
    return len(console.collect())


def history(thread=None, **query):
    q = "&".join(f"{k}={v}" for k, v in {"thread": thread, "limit": 200, **query}.items() if v is not None)
    status, data = api("GET", "/api/history?" + q)
    assert status == 200, data
    return data["events"]


def kept_thread(tid, instance):
    status, data = api("GET", f"/api/history/threads?instance={instance}")
    assert status == 200, data
    return next((t for t in data["threads"] if t["thread"] == tid), None)


@pytest.fixture(scope="module")
def story(driver):
    """A thread's life over the API, waited for until the store has kept it:
    created, a perform that works, one that fails, stopped (a run-exit caused by
    the stop request), ended (DELETE)."""
    name = unique("hist")
    status, created = api("POST", "/api/threads", {"name": name})
    assert status == 201, created
    tid = created["id"]
    for selector in ("count", "fail"):
        status, answer = api("POST", f"/api/threads/{tid}/perform", {"selector": selector, "args": {}})
        assert status == 202, answer
    wait(driver, 10).until(lambda d: len(history(tid, type="perform")) == 2)
    status, stopped = api("POST", f"/api/threads/{tid}/stop")
    assert status == 200 and stopped["cause"]["code"] == "stop_request", stopped
    status, ended = api("DELETE", f"/api/threads/{tid}")
    assert status == 200, ended
    status, fleet = api("GET", "/api/fleet")
    assert status == 200, fleet
    me = next(i for i in fleet["instances"] if i["self"])
    kept = wait(driver, 10).until(lambda d: (t := kept_thread(tid, me["id"])) and t["endedHow"] and t)
    wait(driver, 10).until(lambda d: any(e["event"] == "thread" and e["data"]["change"] == "exited" for e in history(tid)))
    return {"tid": tid, "name": name, "instance": me["id"], "boot": me["boot"], "kept": kept, "fleet": fleet, "me": me}


# ---- page helpers -------------------------------------------------------------------


def panel_open(d):
    return d.find_element(By.ID, "history").is_displayed()


def open_history(driver):
    """The panel open on its Events tab."""
    wait(driver).until(lambda d: d.find_element(By.ID, "conn-text").text == "live")
    if not panel_open(driver):
        driver.find_element(By.ID, "history-button").click()
        wait(driver).until(panel_open)
    tab(driver, "events")
    return driver.find_element(By.ID, "history")


def tab(driver, name):
    t = driver.find_element(By.ID, f"hist-tab-{name}")
    if t.get_attribute("aria-selected") != "true":
        t.click()
    wait(driver).until(lambda d: d.find_element(By.ID, f"hist-{name}").is_displayed())


def rows(d):
    """The event rows shown: {event, thread, instance, boot, cursor, summary} (none while loading)."""
    return d.execute_script(
        """
        const list = document.getElementById('hist-list');
        if (list.getAttribute('aria-busy') === 'true') return null;
        return [...list.children].map((li) => ({
          event: li.dataset.event, thread: li.dataset.thread, instance: li.dataset.instance,
          boot: li.dataset.boot, cursor: Number(li.dataset.cursor),
          summary: li.querySelector('.hist-sum').textContent,
        }));
        """
    )


def set_filters(driver, thread="", types=(), instance=None, limit="50"):
    """Fills the filter form like a user (each change reloads) and waits for the rows."""
    form = driver.find_element(By.ID, "hist-filters")
    form.find_element(By.ID, "hist-clear").click()
    if instance is not None:
        Select(form.find_element(By.NAME, "instance")).select_by_value(instance)
    Select(form.find_element(By.NAME, "limit")).select_by_value(limit)
    for t in types:
        form.find_element(By.CSS_SELECTOR, f'input[name=type][value="{t}"]').click()
    field = form.find_element(By.NAME, "thread")
    field.clear()
    field.send_keys(thread, Keys.ENTER)  # Enter reads the history again


def rows_where(driver, pred, seconds=10):
    """Waits until the rows shown are not empty and all satisfy pred; returns them."""
    return wait(driver, seconds).until(lambda d: (r := rows(d)) and all(pred(x) for x in r) and r)


# ---- tests ----------------------------------------------------------------------------


def test_history_lists_a_threads_events_with_summaries(driver, story):
    panel = open_history(driver)
    assert driver.find_element(By.ID, "history-button").get_attribute("aria-expanded") == "true"
    assert driver.execute_script("return document.getElementById('history').contains(document.activeElement)")
    tid, name = story["tid"], story["name"]
    set_filters(driver, thread=tid)
    shown = rows_where(driver, lambda r: r["thread"] == tid)
    kept = history(tid)
    # newest first, exactly what the store kept for the thread
    assert [r["cursor"] for r in shown] == [int(e["cursor"]) for e in kept]
    assert [r["cursor"] for r in shown] == sorted((r["cursor"] for r in shown), reverse=True)
    by_event = {}
    for r in shown:
        assert r["instance"] == story["instance"]
        by_event.setdefault(r["event"], []).append(r["summary"])
    assert "count ok" in by_event["perform"]
    assert any(s.startswith("fail failed") for s in by_event["perform"]), by_event["perform"]
    assert any(s.startswith("stopped in default") and "cause stop_request" in s for s in by_event["run-exit"]), by_event["run-exit"]
    assert f"POST /api/threads/{tid}/stop → 200" in by_event["request"]
    assert f"DELETE /api/threads/{tid} → 200" in by_event["request"]
    assert f"created “{name}” (loop)" in by_event["thread"]
    assert "exited" in " ".join(by_event["thread"])
    # the store's status line
    store = panel.find_element(By.ID, "hist-store").text
    assert store.startswith("Store: sqlite") and " up " in store + " ", store


def test_filter_by_type(driver, story):
    open_history(driver)
    set_filters(driver, thread=story["tid"], types=("run-exit",))
    shown = rows_where(driver, lambda r: r["event"] == "run-exit" and r["thread"] == story["tid"])
    assert len(shown) == len(history(story["tid"], type="run-exit")) >= 1  # the stop (and the end's, if it was running)
    # two types at once
    driver.find_element(By.CSS_SELECTOR, 'input[name=type][value="perform"]').click()
    shown = rows_where(driver, lambda r: r["event"] in ("run-exit", "perform") and r["thread"] == story["tid"])
    assert {r["event"] for r in shown} == {"run-exit", "perform"}


def test_a_perform_and_its_request_are_two_rows_with_one_cursor(driver):
    """Waited-for performs: a perform and the request that answered it share a
    store row when the request came at most 0.1 s after it with the next id
    (docs/history.md), so one cursor; the panel shows two rows with ids of their
    own, each opening its own details. On a busy machine a request may come
    later (or a stall warning take the id between): that pair keeps two rows,
    and the panel must show exactly what the store says. Performs go on until
    one pair shares a row (at most 12)."""
    status, created = api("POST", "/api/threads", {"name": unique("pair"), "run": {"style": "loop"}})
    assert status == 201, created
    tid = created["id"]
    kept = []
    for n in range(12):
        status, answer = api("POST", f"/api/threads/{tid}/perform", {"selector": "echo", "args": {"n": n}, "waitUntilDone": True})
        assert status == 200, answer
        kept = wait(driver, 10).until(lambda d: (e := history(tid, type="perform,request")) and len(e) == 2 * (n + 1) and e)
        if n >= 2 and any(kept[i]["cursor"] == kept[i + 1]["cursor"] for i in range(0, len(kept), 2)):
            break
    assert [e["event"] for e in kept] == ["request", "perform"] * (len(kept) // 2)  # newest first
    shared = [i for i in range(0, len(kept), 2) if kept[i]["cursor"] == kept[i + 1]["cursor"]]
    assert shared, f"no perform shared a row with its request in {len(kept) // 2}: {kept}"
    open_history(driver)
    set_filters(driver, thread=tid, types=("perform", "request"))
    shown = wait(driver, 10).until(lambda d: (r := rows(d)) and len(r) == len(kept) and all(x["thread"] == tid for x in r) and r)
    assert [(r["event"], r["cursor"]) for r in shown] == [(e["event"], int(e["cursor"])) for e in kept]
    for pair in range(0, len(shown), 2):
        assert shown[pair]["summary"].startswith(f"POST /api/threads/{tid}/perform → 200"), shown[pair]
    ids = driver.execute_script("return [...document.querySelectorAll('#hist-list > li')].map((li) => li.id)")
    assert len(ids) == len(kept) and len(set(ids)) == len(kept), ids
    # a shared row's request: its details are its own, beside the closed perform's
    items = driver.find_elements(By.CSS_SELECTOR, "#hist-list > li")
    request, perform = items[shared[0]], items[shared[0] + 1]
    request.find_element(By.CSS_SELECTOR, ".hist-row").click()
    detail = wait(driver).until(lambda d: (box := request.find_elements(By.CSS_SELECTOR, ".hist-detail")) and box[0])
    assert '"answer"' in detail.text and '"method"' in detail.text, detail.text
    assert perform.find_elements(By.CSS_SELECTOR, ".hist-detail") == []
    assert len(set(driver.execute_script("return [...document.querySelectorAll('[id]')].map((e) => e.id)"))) == len(
        driver.execute_script("return [...document.querySelectorAll('[id]')]")
    )
    api("DELETE", f"/api/threads/{tid}")


def test_run_exit_details_show_its_cause(driver, story):
    open_history(driver)
    tid = story["tid"]
    set_filters(driver, thread=tid, types=("run-exit",))
    rows_where(driver, lambda r: r["event"] == "run-exit" and r["thread"] == tid)
    row = next(
        li
        for li in driver.find_elements(By.CSS_SELECTOR, "#hist-list > li")
        if "stop_request" in li.find_element(By.CSS_SELECTOR, ".hist-sum").text
    )
    button = row.find_element(By.CSS_SELECTOR, "button.hist-row")
    button.click()
    box = wait(driver).until(lambda d: (b := row.find_elements(By.CSS_SELECTOR, ".hist-detail")) and b[0].is_displayed() and b[0])
    assert button.get_attribute("aria-expanded") == "true"
    assert box.get_attribute("id") == button.get_attribute("aria-controls")
    cause = box.find_element(By.CSS_SELECTOR, ".hist-cause-code dd").text
    message = box.find_element(By.CSS_SELECTOR, ".hist-cause dd").text
    assert cause == "stop_request"
    assert message == f"POST /api/threads/{tid}/stop called CFRunLoopStop"
    assert box.find_element(By.CSS_SELECTOR, ".hist-key dd").text.startswith("stopped (code 2) in default")
    assert '"exitReason": "stopped"' in box.find_element(By.CSS_SELECTOR, "pre.hist-json").text
    button.click()  # closes again
    wait(driver).until(lambda d: not box.is_displayed())


def test_paging_older_newer_back_to_newest(driver):
    status, created = api("POST", "/api/threads", {"name": unique("hist-pages")})
    assert status == 201, created
    tid = created["id"]
    for n in range(PERFORMS):
        status, answer = api("POST", f"/api/threads/{tid}/perform", {"selector": "count", "args": {"by": n + 1}})
        assert status == 202, answer
    wait(driver, 10).until(lambda d: len(history(tid, type="perform")) == PERFORMS)
    open_history(driver)
    set_filters(driver, thread=tid, types=("perform",), limit="10")
    buttons = {n: driver.find_element(By.ID, f"hist-{n}") for n in ("older", "newer", "newest")}
    disabled = lambda n: buttons[n].get_attribute("aria-disabled") == "true"  # noqa: E731
    page_text = lambda d: d.find_element(By.ID, "hist-page").text  # noqa: E731

    first = rows_where(driver, lambda r: r["thread"] == tid and r["event"] == "perform")
    assert len(first) == 10 and not disabled("older") and disabled("newer") and disabled("newest")
    assert page_text(driver).startswith("Events 1–10, newest first")

    buttons["older"].click()
    second = wait(driver, 10).until(lambda d: (r := rows(d)) and r[0]["cursor"] < first[-1]["cursor"] and r)
    assert len(second) == 10 and not disabled("newer") and not disabled("newest")
    assert page_text(driver).startswith("Events 11–20")

    buttons["older"].click()
    third = wait(driver, 10).until(lambda d: (r := rows(d)) and r[0]["cursor"] < second[-1]["cursor"] and r)
    assert len(third) == PERFORMS - 20
    wait(driver).until(lambda d: disabled("older"))
    assert "the oldest kept" in page_text(driver)
    # all of them, once each, newest first
    cursors = [r["cursor"] for r in first + second + third]
    assert cursors == sorted(set(cursors), reverse=True)
    assert cursors == [int(e["cursor"]) for e in history(tid, type="perform")]

    buttons["newer"].click()
    wait(driver, 10).until(lambda d: (r := rows(d)) and [x["cursor"] for x in r] == [x["cursor"] for x in second])
    buttons["newest"].click()
    wait(driver, 10).until(lambda d: (r := rows(d)) and [x["cursor"] for x in r] == [x["cursor"] for x in first])
    wait(driver).until(lambda d: disabled("newer") and disabled("newest") and not disabled("older"))
    api("DELETE", f"/api/threads/{tid}")


def test_threads_tab_shows_the_ended_thread_and_filters_by_it(driver, story):
    open_history(driver)
    set_filters(driver)  # all instances, no thread
    tab(driver, "threads")
    tid, inst, kept = story["tid"], story["instance"], story["kept"]
    selector = f'#hist-thread-list > li[data-thread="{tid}"][data-instance="{inst}"][data-boot="{story["boot"]}"]'
    item = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, selector))
    assert item.get_attribute("data-ended-how") == kept["endedHow"]
    assert item.get_attribute("data-live") == "false"
    assert kept["endedHow"] in item.find_element(By.CSS_SELECTOR, ".hist-how").text
    assert story["name"] in item.text and f"boot {story['boot']}" in item.text
    # a live thread of this start reads live
    status, live = api("POST", "/api/threads", {"name": unique("hist-live")})
    assert status == 201, live
    driver.find_element(By.ID, "hist-tab-events").click()
    tab(driver, "threads")  # reads the threads again
    live_item = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, f'#hist-thread-list > li[data-thread="{live["id"]}"][data-boot="{story["boot"]}"]'))
    assert live_item.get_attribute("data-live") == "true" and live_item.find_element(By.CSS_SELECTOR, ".hist-how").text == "live"
    api("DELETE", f"/api/threads/{live['id']}")

    # picking the ended thread shows its events: instance + thread, its boot said
    driver.find_element(By.CSS_SELECTOR, selector + " button").click()
    wait(driver).until(lambda d: d.find_element(By.ID, "hist-tab-events").get_attribute("aria-selected") == "true")
    form = driver.find_element(By.ID, "hist-filters")
    assert form.find_element(By.NAME, "thread").get_attribute("value") == tid
    assert Select(form.find_element(By.NAME, "instance")).first_selected_option.get_attribute("value") == inst
    focus = driver.find_element(By.ID, "hist-focus")
    assert focus.is_displayed() and tid in focus.text and f"boot {story['boot']}" in focus.text
    shown = rows_where(driver, lambda r: r["thread"] == tid and r["instance"] == inst)
    assert len(shown) == len(history(tid, instance=inst))


def test_fleet_shows_this_instance_up_with_its_dashboard(driver, story):
    wait(driver).until(lambda d: d.find_element(By.ID, "conn-text").text == "live")
    fleet_button = driver.find_element(By.ID, "fleet-button")
    if panel_open(driver):
        driver.find_element(By.ID, "hist-close").click()
        wait(driver).until(lambda d: not panel_open(d))
    fleet_button.click()
    wait(driver).until(lambda d: d.find_element(By.ID, "hist-fleet").is_displayed())
    assert fleet_button.get_attribute("aria-expanded") == "true"
    assert driver.find_element(By.ID, "history-button").get_attribute("aria-expanded") == "false"
    me = story["me"]
    item = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, f'#fleet-list > li[data-instance="{me["id"]}"]'))
    assert item.get_attribute("data-self") == "true" and item.get_attribute("data-health") == "up"
    assert item.find_element(By.CSS_SELECTOR, ".fleet-health").text == "up"
    assert item.find_element(By.CSS_SELECTOR, ".fleet-self").is_displayed()
    assert me["version"] in item.text and me["host"] in item.text
    link = item.find_element(By.CSS_SELECTOR, "a.fleet-link")
    assert link.get_attribute("href") == me["dashboard"]
    assert link.get_attribute("target") == "_blank" and "noopener" in link.get_attribute("rel").split()
    note = driver.find_element(By.ID, "fleet-note").text
    assert "SQLite" in note and "fleet of one" in note
    # its History button: the events of that instance only
    item.find_element(By.CSS_SELECTOR, '[data-action="history"]').click()
    wait(driver).until(lambda d: d.find_element(By.ID, "hist-events").is_displayed())
    assert Select(driver.find_element(By.NAME, "instance")).first_selected_option.get_attribute("value") == me["id"]
    assert driver.find_element(By.NAME, "thread").get_attribute("value") == ""
    wait(driver, 10).until(lambda d: (r := rows(d)) and all(x["instance"] == me["id"] for x in r) and {x["thread"] for x in r} - {story["tid"]})


def test_screenshots_escape_and_console(driver, story, artifacts, console, console_mark):
    if panel_open(driver):  # opened by the Fleet button: open it again by History
        driver.find_element(By.ID, "hist-close").click()
        wait(driver).until(lambda d: not panel_open(d))
    open_history(driver)
    set_filters(driver, thread=story["tid"])
    rows_where(driver, lambda r: r["thread"] == story["tid"])
    # a run-exit opened, as an operator would read it
    row = next(li for li in driver.find_elements(By.CSS_SELECTOR, '#hist-list > li[data-event="run-exit"]') if "stop_request" in li.text)
    row.find_element(By.CSS_SELECTOR, "button.hist-row").click()
    wait(driver).until(lambda d: row.find_element(By.CSS_SELECTOR, ".hist-detail").is_displayed())
    try:
        viewport(driver, 1280, 900)
        screenshot(driver, artifacts, "history-1280.png", "window.scrollTo(0, document.getElementById('history').getBoundingClientRect().top + window.scrollY - 8)")
        viewport(driver, 390, 844, mobile=True)
        screenshot(driver, artifacts, "history-390.png", "document.getElementById('hist-page').scrollIntoView()")  # the open panel fits a phone
        viewport(driver, 1280, 900)
        tab(driver, "fleet")
        wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#fleet-list > li"))
        screenshot(driver, artifacts, "fleet-1280.png", "window.scrollTo(0, document.getElementById('history').getBoundingClientRect().top + window.scrollY - 8)")
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    # Escape closes the panel; the focus goes back to the header button that opened it
    tab(driver, "events")
    driver.find_element(By.ID, "hist-tab-events").send_keys(Keys.ESCAPE)
    wait(driver).until(lambda d: not panel_open(d))
    assert driver.execute_script("return document.activeElement.id") == "history-button"
    assert driver.find_element(By.ID, "history-button").get_attribute("aria-expanded") == "false"

    assert driver.execute_script("return window.__cspViolations") == []
    problems = [e for e in console.collect()[console_mark:] if e["level"] in ("SEVERE", "ERROR")]
    assert problems == [], problems
