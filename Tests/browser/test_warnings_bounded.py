"""A long warnings list stays bounded (issue 39): many warnings scroll inside
#warnings-list instead of pushing the timeline off screen. Twelve threads
each get a mode_misnamed warning (a timer in "defualt": raised at once);
the list then holds them all but is no taller than its bound, scrolls, and
the timeline's heading starts within a screen of the warnings' heading.
Shares the session's page. No sleeps: WebDriverWait only."""

from selenium.webdriver.common.by import By

from conftest import BASE, api
from test_dashboard import unique, wait


def test_many_warnings_scroll_inside_a_bounded_list(driver):
    made = []
    try:
        for _ in range(12):
            status, t = api("POST", "/api/threads", {"name": unique("warn"), "run": {"style": "manual"}})
            assert status == 201, t
            made.append(t["id"])
            status, body = api("POST", f"/api/threads/{t['id']}/timers", {"interval": 1, "mode": "defualt"})
            assert status == 201, body
        if not driver.find_elements(By.ID, "warnings-list"):
            driver.get(BASE + "/?view=cards")  # an earlier test left the dashboard (the token page)
        ul = wait(driver, 10).until(lambda d: d.find_element(By.ID, "warnings-list"))
        wait(driver, 10).until(
            lambda d: sum(1 for tid in made if d.find_elements(By.CSS_SELECTOR, f'#warnings-list [data-thread="{tid}"]')) == len(made)
            or len(d.find_elements(By.CSS_SELECTOR, "#warnings-list > li")) >= len(made)
        )
        box = driver.execute_script(
            "const u = arguments[0]; const rem = parseFloat(getComputedStyle(document.documentElement).fontSize);"
            "return {client: u.clientHeight, scroll: u.scrollHeight, bound: 16 * rem,"
            " gap: document.getElementById('timeline-h').getBoundingClientRect().top - document.getElementById('warnings-h').getBoundingClientRect().top,"
            " screen: window.innerHeight};",
            ul,
        )
        assert box["client"] <= box["bound"] + 1, box
        assert box["scroll"] > box["client"], box  # it holds more than it shows: it scrolls
        assert box["gap"] < box["screen"], box  # the timeline is within a screen of the warnings
    finally:
        for tid in made:
            api("DELETE", f"/api/threads/{tid}")
