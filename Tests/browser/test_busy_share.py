"""Busy over the time the loop existed in the window (issue 39): a manual
thread run once, briefly, never sleeps, so busy / (busy + asleep) read
"busy 100 %" on its card. Its card now shows its busy time over the part of
the window it existed in: far below 100 %, and the title says over what.
Shares the session's page. No sleeps: WebDriverWait only."""

import re

from selenium.webdriver.common.by import By

from conftest import BASE, api
from test_dashboard import card_by_name, unique, wait


def test_a_manual_thread_run_once_is_not_busy(driver):
    name = unique("once")
    status, t = api("POST", "/api/threads", {"name": name, "run": {"style": "manual"}})
    assert status == 201, t
    tid = t["id"]
    try:
        # it exists a fifth of a second before it is run (a condition with a deadline)
        wait(driver, 10).until(lambda d: api("GET", f"/api/threads/{tid}")[1]["load"]["coveredSeconds"] >= 0.2)
        status, exit_ = api("POST", f"/api/threads/{tid}/run", {"seconds": 0})
        assert status == 200, exit_
        status, snap = api("GET", f"/api/threads/{tid}")
        load = snap["load"]
        assert load["sleptMs"] == 0 and load["busyMs"] > 0, load  # busy / (busy + asleep) would be 100 %
        assert load["utilization"] < 0.5, load
        assert load["lifetimeUtilization"] < 0.5, load

        if not driver.find_elements(By.ID, "cards"):
            driver.get(BASE + "/?view=cards")
        card = wait(driver, 10).until(lambda d: card_by_name(d, name))
        util = card.find_element(By.CSS_SELECTOR, '[data-role="utilization"]')
        runs = card.find_element(By.CSS_SELECTOR, '[data-role="runs"]')
        wait(driver, 10).until(lambda d: runs.text == "1" and re.fullmatch(r"[0-9.]+ %", util.text))
        percent = float(util.text.split()[0])
        assert percent < 50, util.text
        assert util.get_attribute("title").startswith("busy share of "), util.get_attribute("title")
    finally:
        api("DELETE", f"/api/threads/{tid}")
