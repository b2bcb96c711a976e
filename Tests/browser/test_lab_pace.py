"""Experiments at a learner's pace (issue 39), in the page.

A step shows what is done (its `say`) before it is played and what happens
(its `then`) only once it answered; with Guess first on, nothing a learner
reads before a guess tells how a run ends (test_no_step_text_before_the_guess_
tells_the_outcome, in every browser run). Steps joined by `withNext` are played
as one by Step, so a timed action counts from the run it aims at however long
the learner pauses: test_every_experiment_at_a_learners_pace steps every
experiment with a pause before each Step and before each guess, Guess first
on, and every step passes. That one is long (about 10 minutes at 3 s on 4
pages): it runs only when LAB_PACE_SECONDS is set (`make test-lab-pace`, which
CI runs beside `make test-hardening`).

The pause is the learner's, the condition under test, not a synchronisation:
everything the test waits for is a WebDriverWait on the page's own state."""

import os
import re
import shutil
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from conftest import BASE, api
from test_dashboard import wait
from test_lab import choose, experiments, failures_text, open_lab, step_states

EXIT_WORDS = re.compile(r"\b(finished|stopped|timedOut|handledSource)\b")
RUN_OR_STOP = re.compile(r"^/api/threads/[^/?#]+/(run|stop)(?:[?#]|$)")
PACE = float(os.environ.get("LAB_PACE_SECONDS", "0") or 0)
PAGES = int(os.environ.get("LAB_PACE_PAGES", "4"))
ONLY = [x for x in os.environ.get("LAB_PACE_ONLY", "").split(",") if x]  # some experiments' ids (a rerun)
STEP_DEADLINE = 60  # seconds for one group of steps to answer (its until-steps wait a few seconds at most)


def ends_run(step):
    """Public/js/lab-guess.js endsRun: a POST to …/run or …/stop not expected to fail, or one expecting an exitReason."""
    req, expect = step["request"], step.get("expect", {})
    status = expect.get("status")
    if req.get("method", "GET").upper() != "POST" or (status is not None and not 200 <= status < 300):
        return False
    return bool(RUN_OR_STOP.match(req["path"])) or "exitReason" in expect.get("json", {})


def unplayed_texts(driver):
    """{step: what a learner reads of each step not played yet}, the guess buttons and their own guesses left out."""
    return driver.execute_script(
        """
        const out = {};
        for (const li of document.querySelectorAll('#lab-steps > li.lab-step')) {
          if (!['pending', 'guessing'].includes(li.dataset.status)) continue;
          const copy = li.cloneNode(true);
          for (const own of copy.querySelectorAll('.lab-guess, .lab-guess-out')) own.remove();
          out[li.dataset.step] = copy.textContent;
        }
        return out;
        """
    )


def outcome_words(driver):
    """{step: the exit reasons its text names} for the unplayed steps that name any."""
    found = {}
    for n, text in unplayed_texts(driver).items():
        words = sorted(set(EXIT_WORDS.findall(text)))
        if words:
            found[int(n)] = (words, " ".join(text.split())[:300])
    return found


def guessing(driver):
    found = driver.find_elements(By.CSS_SELECTOR, '#lab-steps > li.lab-step[data-status="guessing"]')
    return found[0] if found else None


def next_guess(driver, run):
    """After a press of Step: the step that asks for a guess, or None once the step played (the run
    paused or done); within STEP_DEADLINE."""
    state = wait(driver, STEP_DEADLINE).until(
        lambda d: guessing(d) or (run.get_attribute("data-state") in ("paused", "done") and "played")
    )
    return None if state == "played" else state


def set_guess_first(driver, on):
    toggle = driver.find_element(By.ID, "lab-guess-first")
    if toggle.is_selected() != on:
        toggle.click()


def test_no_step_text_before_the_guess_tells_the_outcome(driver):
    """With Guess first on, every experiment as chosen (nothing played): no
    step's text, expectation included, names an exit reason; a step that has
    a `then` does not show it. Then one experiment is stepped with its guesses:
    at each guess nothing unplayed names an exit reason, and once a guessed
    step answered, its `then` is shown and names the real exit reason."""
    have = experiments()
    panel = open_lab(driver)
    try:
        for eid, summary in sorted(have.items()):
            choose(driver, panel, eid, summary)
            set_guess_first(driver, True)  # its toggle shows once an experiment is chosen
            assert outcome_words(driver) == {}, eid
            assert driver.find_elements(By.CSS_SELECTOR, "#lab-steps .lab-then") == [], eid

        eid = "testdemo4-signal-with-and-without-wakeup"
        if eid not in have:
            pytest.skip(f"the server does not list {eid}")
        doc = api("GET", f"/api/experiments/{eid}")[1]
        run = choose(driver, panel, eid, have[eid])
        guessed = {}
        while run.get_attribute("data-state") != "done":
            driver.find_element(By.ID, "lab-step").click()
            while (state := next_guess(driver, run)) is not None:
                n = int(state.get_attribute("data-step"))
                assert outcome_words(driver) == {}, f"step {n}"
                real = doc["steps"][n - 1]["expect"]["json"]["exitReason"]
                guessed[n] = real
                state.find_element(By.CSS_SELECTOR, f'.lab-guess button[data-guess="{real}"]').click()
        assert step_states(driver) == ["pass"] * len(doc["steps"]), failures_text(driver)
        assert sorted(guessed) == [n for n, s in enumerate(doc["steps"], 1) if ends_run(s)]
        for n in guessed:
            li = driver.find_element(By.CSS_SELECTOR, f'#lab-steps > li[data-step="{n}"]')
            then = li.find_element(By.CSS_SELECTOR, ".lab-then").text
            assert then == doc["steps"][n - 1]["then"]
            assert guessed[n] in then
            assert li.find_element(By.CSS_SELECTOR, ".lab-guess-out").get_attribute("data-verdict") == "right"
        assert run.get_attribute("data-guesses-right") == str(len(guessed))
    finally:
        set_guess_first(driver, False)


# ---- every experiment at a learner's pace -------------------------------------------------


def new_page():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=opts)
    drv.get(BASE + "/?view=cards")
    return drv


def step_at_pace(drv, eid, summary):
    """Steps one experiment with Guess first on: PACE seconds before each Step and
    before each guess (always the right one). Returns the failures, "" when every step passed."""
    doc = api("GET", f"/api/experiments/{eid}")[1]
    panel = open_lab(drv)
    run = choose(drv, panel, eid, summary)
    set_guess_first(drv, True)
    presses = 0
    while run.get_attribute("data-state") != "done":
        time.sleep(PACE)  # the learner reads and thinks before pressing Step
        drv.find_element(By.ID, "lab-step").click()
        presses += 1
        while (state := next_guess(drv, run)) is not None:
            n = int(state.get_attribute("data-step"))
            leaks = outcome_words(drv)
            if leaks:
                return f"{eid}: before the guess of step {n}, unplayed steps name an exit: {leaks}"
            real = doc["steps"][n - 1].get("expect", {}).get("json", {}).get("exitReason")
            time.sleep(PACE)  # and before picking the guess
            state.find_element(By.CSS_SELECTOR, f'.lab-guess button[data-guess="{real or "finished"}"]').click()
    states = step_states(drv)
    if states != ["pass"] * len(doc["steps"]):
        return f"{eid} ({presses} presses of Step):\n{failures_text(drv)}"
    return ""


@pytest.mark.skipif(PACE <= 0, reason="long: set LAB_PACE_SECONDS (make test-lab-pace)")
def test_every_experiment_at_a_learners_pace():
    have = experiments()
    ids = sorted(i for i in have if not ONLY or i in ONLY)
    shards = [shard for shard in (ids[i::PAGES] for i in range(PAGES)) if shard]
    print(f"stepping {len(ids)} experiments at {PACE} s a step on {PAGES} pages")

    def play(shard):
        drv = new_page()
        problems = []
        try:
            for eid in shard:
                started = time.monotonic()
                try:
                    problem = step_at_pace(drv, eid, have[eid])
                except Exception:  # a page that stopped answering: report it with the rest
                    problem = f"{eid}: {traceback.format_exc()}"
                print(f"  {'PASS' if not problem else 'FAIL'} {eid} ({time.monotonic() - started:.0f} s)")
                if problem:
                    problems.append(problem)
        finally:
            drv.quit()
        return problems

    with ThreadPoolExecutor(len(shards)) as pool:
        problems = [p for found in pool.map(play, shards) for p in found]
    assert problems == [], "\n\n".join(problems)
