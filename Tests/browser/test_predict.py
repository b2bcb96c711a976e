"""Predict, then run (issue 25), in the page: the Run form shows what
POST /api/threads/{id}/predict says the run would return, asked again as the
learner changes mode or seconds, and after the run the prediction beside the
outcome, agreement marked (Public/js/detail-predict.js); the Experiments
panel's "guess first" mode asks for the exit reason before each step that
ends a run and shows the real one and its cause beside the guess
(Public/js/lab.js, lab-guess.js). Shares the session's page (no reload). No
sleeps: WebDriverWait only."""

import contextlib
import re

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

from conftest import api
from test_dashboard import open_details, unique, wait
from test_lab import PLAY_DEADLINE, choose, experiments, failures_text, open_lab, step_states

EXITS = ["finished", "stopped", "timedOut", "handledSource"]
GUESS_EXPERIMENT = "testdemo1-empty-mode"  # two runs that end differently: finished, then handledSource
RUN_OR_STOP = re.compile(r"^/api/threads/[^/?#]+/(run|stop)$")


@pytest.fixture
def console_mark(console):
    """Where this test's console entries start (earlier tests check theirs)."""
    return len(console.collect())


def page_problems(driver, console, mark):
    """Script errors and CSP violations since mark (Chromium logs each 4xx an experiment step expects)."""
    network_4xx = re.compile(r"/api/\S* - Failed to load resource: the server responded with a status of 4\d\d")
    assert driver.execute_script("return window.__cspViolations") == []
    return [
        e
        for e in console.collect()[mark:]
        if e["level"] in ("SEVERE", "ERROR") and not (e.get("source") == "network" and network_4xx.search(e["message"]))
    ]


# ---- the Experiments panel: guess first -------------------------------------------------


def run_ending_steps(doc):
    """{step number: the exitReason its expectation names} for the steps the page asks a guess for."""
    out = {}
    for n, s in enumerate(doc["steps"], 1):
        req, expect = s["request"], s.get("expect", {})
        status = expect.get("status")
        if req.get("method", "GET").upper() == "POST" and RUN_OR_STOP.match(req["path"]) and (status is None or 200 <= status < 300):
            out[n] = expect.get("json", {}).get("exitReason")
    return out


def guessing_step(driver):
    """The step waiting for a guess, or None."""
    found = driver.find_elements(By.CSS_SELECTOR, '#lab-steps > li.lab-step[data-status="guessing"]')
    return found[0] if found else None


def test_guess_first_plays_an_experiment(driver, console, console_mark):
    """Guess first on: Play all stops before each run-ending step with four
    buttons (the API's exit reasons), focus on the first; one guess is made
    with the keyboard (right), one with a click (wrong); each step then runs
    and shows the real exit reason and cause beside the guess; the summary
    counts the right guesses."""
    have = experiments()
    if GUESS_EXPERIMENT not in have:
        pytest.skip(f"the server does not list {GUESS_EXPERIMENT}")
    doc = api("GET", f"/api/experiments/{GUESS_EXPERIMENT}")[1]
    expected = run_ending_steps(doc)
    assert len(expected) >= 2 and all(expected.values()), expected
    total = have[GUESS_EXPERIMENT]["steps"]

    panel = open_lab(driver)
    toggle = driver.find_element(By.ID, "lab-guess-first")
    run = choose(driver, panel, GUESS_EXPERIMENT, have[GUESS_EXPERIMENT])
    if not toggle.is_selected():
        toggle.click()
    try:
        driver.find_element(By.ID, "lab-play").click()
        guesses = {}
        while True:
            li = wait(driver, PLAY_DEADLINE).until(lambda d: guessing_step(d) or (run.get_attribute("data-state") == "done" and "done"))
            if li == "done":
                break
            n = int(li.get_attribute("data-step"))
            assert n in expected, f"step {n} asked for a guess; run-ending steps: {sorted(expected)}"
            assert run.get_attribute("data-state") == "guessing"
            # not sent yet: the steps before it are answered, it and the rest are not
            assert step_states(driver)[n:] == ["pending"] * (total - n)
            buttons = li.find_elements(By.CSS_SELECTOR, ".lab-guess button[data-guess]")
            assert [b.text for b in buttons] == EXITS
            assert driver.switch_to.active_element == buttons[0]
            assert "Step %d ends a run" % n in driver.find_element(By.ID, "lab-summary").text
            # the expectation does not give the answer away
            expect = li.find_element(By.CSS_SELECTOR, ".lab-expect").text
            assert "exitReason" not in expect and "cause." not in expect and "guess first" in expect, expect
            real = expected[n]
            if not guesses:
                # the keyboard: Tab to the right exit reason, Enter
                guess = real
                for _ in range(EXITS.index(guess)):
                    driver.switch_to.active_element.send_keys(Keys.TAB)
                assert driver.switch_to.active_element.get_attribute("data-guess") == guess
                driver.switch_to.active_element.send_keys(Keys.ENTER)
            else:
                guess = next(x for x in EXITS if x != real)
                li.find_element(By.CSS_SELECTOR, f'.lab-guess button[data-guess="{guess}"]').click()
            guesses[n] = guess
            out = wait(driver, PLAY_DEADLINE).until(
                lambda d: d.find_element(By.CSS_SELECTOR, f'#lab-steps > li[data-step="{n}"] .lab-guess-out:not([data-verdict="pending"])')
            )
            # focus followed the guess to its outcome (or, Play all going on, to the next step's guess)
            focused = driver.switch_to.active_element
            assert focused == out or focused.get_attribute("data-guess") in EXITS, focused.get_attribute("outerHTML")
            assert out.get_attribute("data-guess") == guess
            assert out.get_attribute("data-exit") == real
            assert out.get_attribute("data-verdict") == ("right" if guess == real else "wrong")
            assert out.get_attribute("data-cause"), "the cause code is shown"
            text = out.text
            assert f"you guessed {guess}; the run returned {real}" in text
            assert ("Right" if guess == real else "Wrong") in text
            assert "cause " + out.get_attribute("data-cause") in text
        assert sorted(guesses) == sorted(expected), (guesses, expected)
        assert step_states(driver) == ["pass"] * total, failures_text(driver)
        right = sum(1 for n, g in guesses.items() if g == expected[n])
        assert right == 1 and len(guesses) >= 2
        assert run.get_attribute("data-guesses") == str(len(guesses))
        assert run.get_attribute("data-guesses-right") == str(right)
        assert driver.find_element(By.ID, "lab-summary").text == f"{total} of {total} steps passed. Your guesses: {right} of {len(guesses)} right."
        # the steps that end no run asked for nothing
        asked = {int(li.get_attribute("data-step")) for li in driver.find_elements(By.CSS_SELECTOR, "#lab-steps > li.lab-step") if li.find_elements(By.CSS_SELECTOR, ".lab-guess-out")}
        assert asked == set(expected)
    finally:
        if toggle.is_selected():
            toggle.click()
    assert page_problems(driver, console, console_mark) == []


# ---- the Run form: the prediction, live, then beside the outcome -------------------------


def prediction(driver):
    box = driver.find_element(By.ID, "run-predict")
    return box.get_attribute("data-state"), box.get_attribute("data-exit"), box.get_attribute("data-cause")


def set_input(driver, name, value):
    field = driver.find_element(By.ID, "run-form").find_element(By.NAME, name)
    field.clear()
    if value:
        field.send_keys(value)


def server_prediction(tid, body):
    status, answer = api("POST", f"/api/threads/{tid}/predict", body)
    assert status == 200, answer
    return answer["prediction"]


def test_run_form_shows_the_prediction_live_then_beside_the_outcome(driver, console, console_mark):
    """A manual thread with its keep-alive port: in default for 0.2 s the
    form predicts timedOut (deadline, at 200 ms); another mode name, an empty
    custom mode, turns it into finished (mode_missing); 0.3 s in default,
    timedOut at 300 ms. Each is what the server predicts for the same body.
    Run: the prediction and what happened side by side, marked agree."""
    status, thread = api("POST", "/api/threads", {"name": unique("predict"), "keepAlive": "port", "run": {"style": "manual"}})
    assert status == 201, thread
    tid = thread["id"]
    try:
        card = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, f'article.card[data-thread="{tid}"]'))
        open_details(driver, card)
        box = driver.find_element(By.ID, "run-predict")
        set_input(driver, "mode", "")
        set_input(driver, "seconds", "0.2")
        expected = server_prediction(tid, {"seconds": 0.2})
        assert (expected["exitReason"], expected["cause"]["code"]) == ("timedOut", "deadline")
        wait(driver, 10).until(lambda d: prediction(d) == ("ready", "timedOut", "deadline") and "200.0 ms" in box.text)
        assert box.get_attribute("data-certain") == "true"
        for reason in expected["reasons"]:
            assert reason in box.text

        set_input(driver, "mode", "nowhere")
        expected = server_prediction(tid, {"mode": "nowhere", "seconds": 0.2})
        assert expected["exitReason"] == "finished"
        wait(driver, 10).until(lambda d: prediction(d) == ("ready", "finished", expected["cause"]["code"]))

        set_input(driver, "mode", "default")
        set_input(driver, "seconds", "0.3")
        expected = server_prediction(tid, {"mode": "default", "seconds": 0.3})
        assert (expected["exitReason"], expected["cause"]["code"], expected["atMs"]) == ("timedOut", "deadline", 300)
        wait(driver, 10).until(lambda d: prediction(d) == ("ready", "timedOut", "deadline") and "300.0 ms" in box.text)

        # the Explain section: GET /why's prediction for each mode
        why = api("GET", f"/api/threads/{tid}/why")[1]
        default = next(m for m in why["modes"] if m["mode"] == "default")
        # read in one script: the section is drawn again as the thread changes (a stale element otherwise)
        read = 'const e = document.querySelector(arguments[0]); return e && [e.getAttribute("data-exit"), e.innerText]'
        exit_reason, text = wait(driver, 10).until(lambda d: d.execute_script(read, '#d-why-modes li[data-mode="default"] .why-predict'))
        assert exit_reason == (default["prediction"]["exitReason"] or "")
        assert "no deadline" in text and text.endswith("no return by itself (it sleeps until a stop, a wake-up, a perform queued or a timer added)"), text  # its keep-alive port
        # each prediction says which run it is about (issue 39): this one a run with no deadline, the form's its own
        form_line = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, "#run-predict .predict-line"))
        assert "for the run this form would start" in form_line.text, form_line.text

        form = driver.find_element(By.ID, "run-form")
        form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        compare = wait(driver, 10).until(lambda d: d.find_element(By.ID, "run-compare") if d.find_element(By.ID, "run-compare").is_displayed() else None)
        result = form.find_element(By.CSS_SELECTOR, ".form-result").text
        assert result.startswith("run → timedOut"), result
        assert compare.get_attribute("data-agree") == "true"
        predicted = compare.find_element(By.CSS_SELECTOR, '[data-side="predicted"]').text
        happened = compare.find_element(By.CSS_SELECTOR, '[data-side="happened"]').text
        assert "timedOut · deadline · at 300.0 ms" in predicted
        assert re.search(r"timedOut · deadline · after \d", happened), happened
        verdict = compare.find_element(By.CSS_SELECTOR, ".predict-verdict").text
        assert "agree: predicted timedOut (deadline), happened timedOut (deadline)" in verdict
        # the form asks again for the next run (the loop's run count changed): still there, still ready
        wait(driver, 10).until(lambda d: prediction(d) == ("ready", "timedOut", "deadline"))
    finally:
        api("DELETE", f"/api/threads/{tid}")
    assert page_problems(driver, console, console_mark) == []


def test_a_count_the_runs_start_decides_reads_as_one_range_however_often_asked(driver, console, console_mark):
    """Issue 38's learner saw the form flip between 4 and 5 fires, and
    between certain and not, across a 0.5 ms window. A 100 ms repeating
    timer: how many times it fires in a 0.35 s or a 0.45 s run depends on
    where in its period the run begins. Asked again and again (each time at
    another point of the period), the form reads one range, the server's,
    and "not certain", every time."""
    status, thread = api("POST", "/api/threads", {"name": unique("range"), "keepAlive": "port", "run": {"style": "manual"}})
    assert status == 201, thread
    tid = thread["id"]
    try:
        status, timer = api("POST", f"/api/threads/{tid}/timers", {"delay": 0.1, "interval": 0.1, "repeats": True})
        assert status == 201, timer
        card = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, f'article.card[data-thread="{tid}"]'))
        open_details(driver, card)
        set_input(driver, "mode", "")
        read = 'const e = document.querySelector("#run-predict"); return e && [e.getAttribute("data-state"), e.getAttribute("data-certain"), e.innerText]'
        fires = re.compile(r" · (\d+) to (\d+) timer fires \(")
        seen = {"0.35": set(), "0.45": set()}
        for seconds in ["0.35", "0.45"] * 4:
            set_input(driver, "seconds", seconds)
            ms = f"at {float(seconds) * 1000:.1f} ms"
            state, certain, text = wait(driver, 10).until(
                lambda d: (lambda r: r if r and r[0] == "ready" and ms in r[2] else None)(d.execute_script(read))
            )
            found = fires.search(text)
            assert found and certain == "false" and " · not certain" in text, text
            seen[seconds].add((int(found.group(1)), int(found.group(2))))
        for seconds, ranges in seen.items():
            server = server_prediction(tid, {"seconds": float(seconds)})
            assert not server["certain"] and ranges == {(server["timerFiresRange"]["min"], server["timerFiresRange"]["max"])}, (seconds, ranges, server)
    finally:
        api("DELETE", f"/api/threads/{tid}")
    assert page_problems(driver, console, console_mark) == []


def test_run_form_lists_the_nested_runs_a_callout_starts(driver, console, console_mark):
    """A timer whose fire runs the loop nested in an empty mode (runNested,
    tracking): the form's prediction lists that nested run with its own exit
    (finished, mode_missing), as the server predicts it."""
    status, thread = api("POST", "/api/threads", {"name": unique("nested"), "keepAlive": "port", "run": {"style": "manual"}})
    assert status == 201, thread
    tid = thread["id"]
    try:
        action = {"selector": "runNested", "args": {"mode": "tracking", "seconds": 0.1}}
        status, _ = api("POST", f"/api/threads/{tid}/timers", {"interval": 0.1, "repeats": False, "action": action})
        assert status == 201
        expected = server_prediction(tid, {"seconds": 0.3})
        assert [(n["mode"], n["exitReason"], n["cause"]["code"]) for n in expected["nested"]] == [("tracking", "finished", "mode_missing")]
        card = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, f'article.card[data-thread="{tid}"]'))
        open_details(driver, card)
        set_input(driver, "mode", "")
        set_input(driver, "seconds", "0.3")
        read = 'return [...document.querySelectorAll("#run-predict .predict-nested-run")].map((e) => [e.dataset.exit, e.dataset.cause, e.innerText])'
        runs = wait(driver, 10).until(lambda d: d.execute_script(read) or None)
        assert [(e, c) for e, c, _ in runs] == [("finished", "mode_missing")], runs
        assert runs[0][2].startswith("tracking for 0.1 s: finished · mode_missing"), runs
    finally:
        api("DELETE", f"/api/threads/{tid}")
    assert page_problems(driver, console, console_mark) == []


# Served in the page for /predict only: a server without the endpoint (its 404).
NO_PREDICT = """
window.__realFetch = window.__realFetch || window.fetch;
window.fetch = async (input, init) => {
  const url = new URL(String(input instanceof Request ? input.url : input), location.origin);
  if (url.origin === location.origin && /^\\/api\\/threads\\/[^/]+\\/predict$/.test(url.pathname)) {
    const body = {error: {code: 'not_found', field: null, message: 'no endpoint ' + url.pathname}};
    return new Response(JSON.stringify(body), {status: 404, headers: {'Content-Type': 'application/json'}});
  }
  return window.__realFetch(input, init);
};
"""


@contextlib.contextmanager
def run_form_with(driver, name, script):
    """A new manual thread's run form (default mode, 0.05 s) open in its card, with `script`
    run in the page first (it wraps fetch); yields the form. The page's own fetch is put back
    and the thread deleted after."""
    status, thread = api("POST", "/api/threads", {"name": unique(name), "run": {"style": "manual"}})
    assert status == 201, thread
    tid = thread["id"]
    driver.execute_script(script)
    try:
        card = wait(driver, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, f'article.card[data-thread="{tid}"]'))
        open_details(driver, card)
        set_input(driver, "mode", "")
        set_input(driver, "seconds", "0.05")
        yield driver.find_element(By.ID, "run-form")
    finally:
        driver.execute_script("if (window.__realFetch) window.fetch = window.__realFetch")
        api("DELETE", f"/api/threads/{tid}")


def run_and_compare(driver, form):
    """Submits the run form; the comparison of prediction and run once it shows."""
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    return wait(driver, 10).until(
        lambda d: d.find_element(By.ID, "run-compare") if d.find_element(By.ID, "run-compare").is_displayed() else None)


def test_run_form_without_a_predict_endpoint_says_so_and_still_runs(driver):
    """Against a server that answers 404 "no endpoint" for /predict the form
    says there is no prediction, the run still works, and the comparison says
    there is nothing to compare."""
    with run_form_with(driver, "nopredict", NO_PREDICT) as form:
        box = driver.find_element(By.ID, "run-predict")
        wait(driver, 10).until(lambda d: box.get_attribute("data-state") == "unavailable")
        assert "no prediction: this server has no POST /api/threads/{id}/predict" in box.text
        compare = run_and_compare(driver, form)
        assert compare.get_attribute("data-agree") == "unknown"
        assert "Nothing to compare" in compare.text
        assert "timedOut" in compare.find_element(By.CSS_SELECTOR, '[data-side="happened"]').text
        assert form.find_element(By.CSS_SELECTOR, ".form-result").text.startswith("run → timedOut")


# Served in the page for /predict only: a prediction that will be wrong (a run of
# an idle manual thread with its keep-alive port times out; it does not finish).
WRONG_PREDICTION = """
window.__realFetch = window.__realFetch || window.fetch;
window.fetch = async (input, init) => {
  const url = new URL(String(input instanceof Request ? input.url : input), location.origin);
  if (url.origin === location.origin && /^\\/api\\/threads\\/[^/]+\\/predict$/.test(url.pathname)) {
    const prediction = {exitReason: 'finished', cause: {code: 'mode_empty', message: 'a made-up cause'}, atMs: 0, windowMs: null,
      certain: true, race: null, reasons: ['a made-up reason']};
    return new Response(JSON.stringify({thread: 'x', mode: 'default', seconds: 0.05, returnAfterSourceHandled: false, prediction}),
      {status: 200, headers: {'Content-Type': 'application/json'}});
  }
  return window.__realFetch(input, init);
};
"""


def test_a_run_that_differs_from_its_prediction_is_marked_differ(driver):
    """The comparison names both sides when they disagree (a prediction made
    up in the page: the real predictor agrees with this run)."""
    with run_form_with(driver, "differ", WRONG_PREDICTION) as form:
        wait(driver, 10).until(lambda d: prediction(d) == ("ready", "finished", "mode_empty"))
        assert "a made-up reason" in driver.find_element(By.ID, "run-predict").text
        compare = run_and_compare(driver, form)
        assert compare.get_attribute("data-agree") == "false"
        verdict = compare.find_element(By.CSS_SELECTOR, ".predict-verdict").text
        assert "differ: predicted finished (mode_empty), happened timedOut (deadline)" in verdict, verdict
        assert "finished · mode_empty · at once" in compare.find_element(By.CSS_SELECTOR, '[data-side="predicted"]').text
        assert "timedOut · deadline" in compare.find_element(By.CSS_SELECTOR, '[data-side="happened"]').text
