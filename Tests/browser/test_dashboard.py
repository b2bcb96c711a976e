"""The dashboard in real headless Chromium against a real runloopd.

Tests share one page (no reloads: the page must stay live on SSE). They run in
file order; the console check comes last. No sleeps: WebDriverWait only."""

import os
import re
import uuid

from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from conftest import api


def wait(driver, seconds=5):
    return WebDriverWait(driver, seconds, poll_frequency=0.05)


def unique(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def card_by_name(driver, name):
    for card in driver.find_elements(By.CSS_SELECTOR, "article.card[data-thread]"):
        if card.find_element(By.CSS_SELECTOR, ".card-name").text == name:
            return card
    return None


def create_from_form(driver, name, style="loop", seconds=None, keyboard=False):
    form = driver.find_element(By.ID, "create-form")
    name_input = form.find_element(By.NAME, "name")
    name_input.clear()
    Select(form.find_element(By.NAME, "style")).select_by_value(style)
    secs = form.find_element(By.NAME, "seconds")
    secs.clear()
    if seconds is not None:
        secs.send_keys(str(seconds))
    if keyboard:
        name_input.send_keys(name, Keys.ENTER)  # Enter in a field submits the form
    else:
        name_input.send_keys(name)
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    # the card comes over the event stream: 5 s ran out under two CPU hogs per core
    card = wait(driver, 30).until(lambda d: card_by_name(d, name))
    return card, card.get_attribute("data-thread")


def open_details(driver, card):
    card.find_element(By.CSS_SELECTOR, "[data-action=details]").click()
    tid = card.get_attribute("data-thread")
    wait(driver).until(lambda d: d.find_element(By.ID, "d-id").text == tid)


def test_page_is_live(driver):
    wait(driver).until(lambda d: d.find_element(By.ID, "conn-text").text == "live")
    driver.execute_script("window.__noReload = 'still here';")
    # the selector list came from /api/selectors and built the perform form
    options = Select(driver.find_element(By.CSS_SELECTOR, '[data-picker="perform"] select')).options
    assert {"echo", "sleep", "runNested"} <= {o.get_attribute("value") for o in options}


# The policy the server sends, minus frame-ancestors (a <meta> cannot carry it).
META_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'"
)


def csp_console_lines(entries):
    return [e for e in entries if "Content Security Policy" in e["message"] or "CSP violation" in e["message"]]


def test_csp_is_in_force(driver, console):
    meta = driver.execute_script("return document.querySelector('meta[http-equiv=\"Content-Security-Policy\"]').content")
    assert meta == META_CSP
    # a control: an inline script is refused, and the page's listener (Public/js/csp.js) records it
    driver.execute_script(
        "const s = document.createElement('script'); s.textContent = 'window.__inlineRan = true'; document.head.append(s); s.remove();"
    )
    # one report per policy in force: the page's <meta> and the server's Content-Security-Policy header
    wait(driver).until(lambda d: d.execute_script("return window.__cspViolations.length") == 2)
    assert driver.execute_script("return window.__inlineRan") is None
    violations = driver.execute_script("return window.__cspViolations.splice(0)")
    assert [v["directive"] for v in violations] == ["script-src-elem", "script-src-elem"]
    # its console lines are the control's, not the page's: take them out of the shared log
    wait(driver).until(lambda d: any("CSP violation" in e["message"] for e in console.collect()))
    control = csp_console_lines(console.entries)
    assert control and all("inline script" in e["message"] or "CSP violation" in e["message"] for e in control)
    console.entries[:] = [e for e in console.entries if e not in control]


def test_create_thread_from_form_shows_card(driver):
    name = unique("ui-create")
    card, tid = create_from_form(driver, name)
    assert re.fullmatch(r"t\d+", tid)
    status, snap = api("GET", f"/api/threads/{tid}")
    assert status == 200 and snap["name"] == name
    state = card.find_element(By.CSS_SELECTOR, "[data-role=state]")
    wait(driver).until(lambda d: state.text.split(" ")[0] in {"running", "waiting", "idle"})
    assert "loop" in card.find_element(By.CSS_SELECTOR, ".card-meta").text


def glyph_lefts(driver, el, text):
    """The left edge (CSS px) at which each character of `text`, inside el, is drawn."""
    return driver.execute_script(
        """
        const [el, text] = arguments;
        const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const at = node.data.indexOf(text);
          if (at < 0) continue;
          return [...text].map((_, i) => {
            const range = document.createRange();
            range.setStart(node, at + i);
            range.setEnd(node, at + i + 1);
            return range.getBoundingClientRect().left;
          });
        }
        return null;
        """,
        el,
        text,
    )


def test_names_are_bidi_isolated_and_show_their_hidden_characters(driver):
    """Issue 22: a thread named RIGHT-TO-LEFT OVERRIDE + "1t" must not read as
    thread t1. Its card shows the name in bidi isolation with the override as a
    visible escape (\\u202E in a span.ctl), "1t" drawn left to right; so does
    its timeline lane. A plain name is shown as it is."""
    spoof, plain = "\u202e1t", unique("plain-name")
    status, body = api("POST", "/api/threads", {"name": spoof})
    assert status == 201, body
    tid = body["id"]
    status, body = api("POST", "/api/threads", {"name": plain})
    assert status == 201, body
    plain_tid = body["id"]
    try:
        name = wait(driver).until(lambda d: d.find_element(By.CSS_SELECTOR, f'article.card[data-thread="{tid}"] .card-name'))
        wait(driver).until(lambda d: name.text == "\\u202E1t")
        assert "\u202e" not in name.get_attribute("textContent")  # the override itself is not in the page
        bdi = name.find_element(By.CSS_SELECTOR, "bdi.user")
        assert driver.execute_script("return getComputedStyle(arguments[0]).unicodeBidi", bdi) == "isolate"
        ctl = bdi.find_element(By.CSS_SELECTOR, "span.ctl")
        assert ctl.text == "\\u202E"
        one, t = glyph_lefts(driver, bdi, "1t")
        assert one < t, "1t is drawn reversed"
        lane = wait(driver).until(lambda d: d.find_element(By.CSS_SELECTOR, f'[data-lane="{tid}"] .lane-title bdi.user'))
        wait(driver).until(lambda d: lane.text == "\\u202E1t")

        plain_name = wait(driver).until(lambda d: d.find_element(By.CSS_SELECTOR, f'article.card[data-thread="{plain_tid}"] .card-name'))
        wait(driver).until(lambda d: plain_name.text == plain)
        assert plain_name.get_attribute("textContent") == plain
        assert plain_name.find_elements(By.CSS_SELECTOR, ".ctl") == []
        plain_bdi = plain_name.find_element(By.CSS_SELECTOR, "bdi.user")
        assert driver.execute_script("return getComputedStyle(arguments[0]).unicodeBidi", plain_bdi) == "isolate"
    finally:
        api("DELETE", f"/api/threads/{tid}")
        api("DELETE", f"/api/threads/{plain_tid}")


def timer_form(driver, interval):
    """The open detail panel's timer form and its interval field, with interval typed in."""
    form = driver.find_element(By.ID, "timer-form")
    field = form.find_element(By.NAME, "interval")
    field.clear()
    field.send_keys(interval)
    return form, field


def test_timer_fire_count_rises_live(driver):
    card, tid = create_from_form(driver, unique("ui-timer"))
    open_details(driver, card)
    form, _ = timer_form(driver, "0.1")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    result = form.find_element(By.CSS_SELECTOR, ".form-result")
    wait(driver).until(lambda d: "added" in result.text)
    timer_id = re.search(r"timer (\S+) added", result.text).group(1)
    row = wait(driver).until(
        EC.presence_of_element_located((By.CSS_SELECTOR, f'#timers-table tr[data-key="{timer_id}"]'))
    )
    fires_cell = row.find_element(By.CSS_SELECTOR, "td.fires")
    card_fires = card.find_element(By.CSS_SELECTOR, "[data-role=fires]")
    first = int(fires_cell.text.split()[0] or 0)
    # 100 ms timer: several fires within 2 s, shown without a reload
    wait(driver, 2).until(lambda d: int(fires_cell.text.split()[0]) >= first + 3)
    wait(driver, 2).until(lambda d: int(card_fires.text) >= 3)
    assert driver.execute_script("return window.__noReload") == "still here"


def test_bad_interval_shows_server_error_beside_form(driver):
    card, tid = create_from_form(driver, unique("ui-bad"))
    open_details(driver, card)
    status, body = api("POST", f"/api/threads/{tid}/timers", {"interval": -1})
    assert status == 400
    server_message = body["error"]["message"]
    form, interval = timer_form(driver, "-1")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    error = form.find_element(By.CSS_SELECTOR, ".form-error")
    wait(driver).until(lambda d: error.text == server_message)
    assert interval.get_attribute("aria-invalid") == "true"  # the field the server named
    assert error.is_displayed()


def test_stop_loop_thread_shows_stopped(driver):
    # 30 s runs: the run after the stop does not time out during the test
    card, tid = create_from_form(driver, unique("ui-stop"), style="loop", seconds=30)
    state = card.find_element(By.CSS_SELECTOR, "[data-role=state]")
    wait(driver).until(lambda d: state.text.startswith("waiting"))
    # its first run is under way and none has returned: the card says so, not a bare 0
    runs = card.find_element(By.CSS_SELECTOR, "[data-role=runs]")
    under_way = card.find_element(By.CSS_SELECTOR, "[data-role=runs-under-way]")
    wait(driver).until(lambda d: runs.text == "0" and under_way.text == "+1 under way")
    card.find_element(By.CSS_SELECTOR, "[data-action=stop]").click()
    badge = card.find_element(By.CSS_SELECTOR, "[data-role=last-exit]")
    wait(driver).until(lambda d: badge.text.startswith("stopped"))
    assert "ex-stopped" in badge.get_attribute("class")
    assert "stop → stopped" in card.find_element(By.CSS_SELECTOR, "[data-role=result]").text
    count = card.find_element(By.CSS_SELECTOR, 'dd[data-exit="stopped"]')
    wait(driver).until(lambda d: count.text == "1")
    wait(driver).until(lambda d: runs.text == "1" and under_way.text == "+1 under way")  # its next run began


def test_manual_run_shows_timed_out(driver):
    card, tid = create_from_form(driver, unique("ui-manual"), style="manual", keyboard=True)
    seconds = card.find_element(By.CSS_SELECTOR, "input.run-seconds")
    wait(driver).until(lambda d: seconds.is_displayed())
    seconds.clear()
    seconds.send_keys("0.3", Keys.ENTER)  # keyboard: Enter in the seconds field runs
    result = card.find_element(By.CSS_SELECTOR, "[data-role=result]")
    wait(driver, 5).until(lambda d: "timedOut" in result.text)
    badge = card.find_element(By.CSS_SELECTOR, "[data-role=last-exit]")
    wait(driver).until(lambda d: badge.text.startswith("timedOut"))
    runs = card.find_element(By.CSS_SELECTOR, "[data-role=runs]")
    under_way = card.find_element(By.CSS_SELECTOR, "[data-role=runs-under-way]")
    wait(driver).until(lambda d: runs.text == "1" and not under_way.is_displayed())  # returned, none under way
    status, snap = api("GET", f"/api/threads/{tid}")
    assert snap["exits"]["timedOut"] == 1 and snap["lastExit"]["exitReason"] == "timedOut"
    assert 250 <= snap["lastExit"]["durationMs"] <= 1500


def test_end_thread_from_detail_panel(driver):
    card, tid = create_from_form(driver, unique("ui-end"))
    open_details(driver, card)
    driver.find_element(By.CSS_SELECTOR, '[data-d-action="end"]').click()
    result = driver.find_element(By.ID, "d-actions-result")
    wait(driver, 20).until(lambda d: "thread ended" in result.text)
    state = card.find_element(By.CSS_SELECTOR, "[data-role=state]")
    wait(driver).until(lambda d: state.text == "exited")
    assert "st-exited" in state.get_attribute("class")


def test_observe_feeds_timeline(driver):
    card, tid = create_from_form(driver, unique("ui-observe"))
    button = card.find_element(By.CSS_SELECTOR, "[data-action=observe]")
    button.click()
    wait(driver).until(lambda d: button.get_attribute("aria-pressed") == "true")
    # the observer is on the server (turns are drawn whether or not one exists)
    status, body = api("GET", f"/api/threads/{tid}/observers")
    assert status == 200 and any(o["valid"] for o in body["observers"])
    # pressing it again invalidates the observer on the server
    button.click()
    wait(driver).until(lambda d: button.get_attribute("aria-pressed") == "false")
    status, body = api("GET", f"/api/threads/{tid}/observers")
    assert status == 200
    assert body["observers"] and not any(o["valid"] for o in body["observers"])


def open_perform_form(driver, name, selector):
    """A new thread named after `name`, its details open and their perform form set to `selector`:
    (the form, the thread's id)."""
    card, tid = create_from_form(driver, unique(name))
    open_details(driver, card)
    form = driver.find_element(By.ID, "perform-form")
    Select(form.find_element(By.CSS_SELECTOR, '[data-picker="perform"] select')).select_by_value(selector)
    return form, tid


def test_perform_with_generated_form_shows_result(driver):
    form, _ = open_perform_form(driver, "ui-perform", "log")
    message = form.find_element(By.CSS_SELECTOR, 'input[data-field="args.message"]')
    message.send_keys("hello from the browser")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    result = form.find_element(By.CSS_SELECTOR, ".form-result")
    wait(driver).until(lambda d: "log ok" in result.text)
    log = driver.find_element(By.ID, "log-lines")
    wait(driver).until(lambda d: "hello from the browser" in log.text)
    # without waitUntilDone: 202 first, the outcome arrives later on the event stream
    Select(form.find_element(By.CSS_SELECTOR, '[data-picker="perform"] select')).select_by_value("fail")
    form.find_element(By.NAME, "waitUntilDone").click()
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver).until(lambda d: "fail failed" in result.text and "failed on purpose" in result.text)
    form.find_element(By.NAME, "waitUntilDone").click()


def timeline_pixels(driver, tid, rgb, rows):
    """Pixels of the thread's lane canvas within 110 of the colour rgb in each channel
    (marks are antialiased), right of the lane names (72 px), in the given lanes (14 px each:
    0 turns, 1 stalls, 2 timer, 3 source, 4 perform, 5 run exit)."""
    return driver.execute_script(
        """
        const [tid, rgb, [first, last]] = arguments;
        const c = document.querySelector(`[data-lane="${tid}"] canvas`);
        if (!c || !c.width) return 0;
        const scale = c.width / c.clientWidth;
        const x0 = Math.ceil(72 * scale), y0 = Math.floor(first * 14 * scale), y1 = Math.ceil((last + 1) * 14 * scale);
        const px = c.getContext('2d').getImageData(x0, y0, c.width - x0, y1 - y0).data;
        let n = 0;
        for (let i = 0; i < px.length; i += 4)
          if ([0, 1, 2].every((k) => Math.abs(px[i + k] - rgb[k]) < 110 && px[i + k] < 200)) n++;
        return n;
        """,
        tid,
        rgb,
        rows,
    )


def test_main_flows_cause_no_csp_violations(driver, console):
    # create, open the detail panel, add a timer, observe, perform: under the page's CSP
    card, tid = create_from_form(driver, unique("ui-csp"))
    open_details(driver, card)
    form, _ = timer_form(driver, "0.1")
    Select(form.find_element(By.CSS_SELECTOR, '[data-picker="timer-action"] select')).select_by_value("count")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver).until(lambda d: "added" in form.find_element(By.CSS_SELECTOR, ".form-result").text)
    observe = card.find_element(By.CSS_SELECTOR, "[data-action=observe]")
    observe.click()
    wait(driver).until(lambda d: observe.get_attribute("aria-pressed") == "true")
    perform = driver.find_element(By.ID, "perform-form")
    Select(perform.find_element(By.CSS_SELECTOR, '[data-picker="perform"] select')).select_by_value("echo")
    perform.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver).until(lambda d: "echo ok" in perform.find_element(By.CSS_SELECTOR, ".form-result").text)
    # the live timeline draws this thread's timer fires (#b45309) and its turns (#1f2937)
    wait(driver).until(lambda d: timeline_pixels(d, tid, [0xB4, 0x53, 0x09], [2, 2]) > 0)
    wait(driver).until(lambda d: timeline_pixels(d, tid, [0x1F, 0x29, 0x37], [0, 0]) > 0)
    observe.click()
    wait(driver).until(lambda d: observe.get_attribute("aria-pressed") == "false")
    # no violation, neither recorded by the page's listener nor reported by Chromium
    # (the console also holds any from parsing index.html, before a script ran)
    assert driver.execute_script("return window.__cspViolations") == []
    assert csp_console_lines(console.collect()) == []


def viewport(driver, width, height, mobile=False):
    """An exact CSS viewport (window sizes include browser chrome)."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile},
    )
    wait(driver).until(lambda d: d.execute_script("return window.innerWidth") == width)


def no_horizontal_overflow(d):
    return d.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")


def screenshot(driver, artifacts, name, scroll_js):
    """Saves artifacts/name once the page, scrolled by scroll_js, is no wider than the viewport."""
    driver.execute_script(scroll_js)
    wait(driver).until(no_horizontal_overflow)
    assert driver.save_screenshot(os.path.join(artifacts, name))


def test_screenshots(driver, artifacts):
    try:
        viewport(driver, 1280, 900)
        screenshot(driver, artifacts, "dashboard-1280.png", "window.scrollTo(0, 0); document.getElementById('detail').scrollTop = 0")
        viewport(driver, 390, 844, mobile=True)
        screenshot(driver, artifacts, "dashboard-390.png", "window.scrollTo(0, 0)")  # nothing wider than a phone
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_console_has_no_errors(driver, console):
    entries = console.collect()
    expected_network = re.compile(r"/api/threads/t\d+/timers - Failed to load resource: the server responded with a status of 400")
    problems = [
        e
        for e in entries
        if e["level"] in ("SEVERE", "ERROR")
        # the deliberate bad-interval request (Chrome logs every 4xx fetch)
        and not (e.get("source") == "network" and expected_network.search(e["message"]))
    ]
    assert problems == [], problems
    assert driver.execute_script("return window.__noReload") == "still here"
