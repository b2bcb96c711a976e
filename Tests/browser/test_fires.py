"""A card's timer fires on a page opened after they happened.

The page counts timer events as they come, but a page opened later never saw
them: the card then shows the thread's lifetime count from its snapshot, the
fires of timers since invalidated included."""

import uuid

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from conftest import api


def test_card_counts_fires_from_before_the_page(driver, base_url, console):
    status, thread = api("POST", "/api/threads", {"name": f"fires-{uuid.uuid4().hex[:6]}", "keepAlive": "none", "run": {"style": "manual"}})
    assert status == 201, thread
    tid = thread["id"]
    try:
        # a one-shot and a three-fire timer: both fire and are invalidated during one run
        assert api("POST", f"/api/threads/{tid}/timers", {"interval": 0.02, "repeats": False})[0] == 201
        assert api("POST", f"/api/threads/{tid}/timers", {"interval": 0.02, "maxFires": 3})[0] == 201
        status, run = api("POST", f"/api/threads/{tid}/run", {"seconds": 10})
        assert status == 200 and run["exitReason"] == "finished", run
        status, snap = api("GET", f"/api/threads/{tid}")
        assert status == 200 and snap["timerFires"] == 4 and snap["counts"]["timers"] == 0, snap

        seen = len(console.collect())
        driver.get(base_url + "/?view=cards")  # a page that saw none of the fires
        card = f'article.card[data-thread="{tid}"] [data-role=fires]'
        WebDriverWait(driver, 10, poll_frequency=0.05).until(
            lambda d: d.execute_script(f"return document.querySelector('{card}')?.textContent") == "4"
        )
        severe = [e for e in console.collect()[seen:] if e["level"] == "SEVERE"]
        assert not severe, severe
    finally:
        api("DELETE", f"/api/threads/{tid}")
