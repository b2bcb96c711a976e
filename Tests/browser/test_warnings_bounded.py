"""A long warnings list stays bounded (issue 39): many warnings scroll inside
#warnings-list instead of pushing the timeline off screen. Twelve threads
each get a mode_misnamed warning (a timer in "defualt": raised at once);
the list then holds them all but is no taller than its bound, scrolls, and
the timeline's heading starts within a screen of the warnings' heading.
Shares the session's page. No sleeps: WebDriverWait only."""

from selenium.webdriver.common.by import By

from conftest import BASE, api
from test_dashboard import unique, wait


def misnamed(made, count, prefix):
    """Adds to `made` `count` manual threads, each with a timer in "defualt":
    a mode_misnamed warning each, raised at once."""
    for _ in range(count):
        status, t = api("POST", "/api/threads", {"name": unique(prefix), "run": {"style": "manual"}})
        assert status == 201, t
        made.append(t["id"])
        status, body = api("POST", f"/api/threads/{t['id']}/timers", {"interval": 1, "mode": "defualt"})
        assert status == 201, body


def test_many_warnings_scroll_inside_a_bounded_list(driver):
    made = []
    try:
        misnamed(made, 12, "warn")
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


def test_a_crowded_list_says_what_it_leaves_out_and_shows_it(driver):
    """More than 50 warnings: the list shows 50, the newest among them, says
    how many more there are, and "Show all" shows every one."""
    made = []
    try:
        misnamed(made, 55, "crowd")
        if not driver.find_elements(By.ID, "warnings-list"):
            driver.get(BASE + "/?view=cards")
        status, listed = api("GET", "/api/warnings")
        assert status == 200, listed
        total = len(listed["warnings"])
        assert total > 50, total
        items = "#warnings-list > li"
        newest = f'#warnings-list > li[data-thread="{made[-1]}"][data-code="mode_misnamed"]'
        wait(driver, 10).until(lambda d: d.find_elements(By.CSS_SELECTOR, newest))
        # One look at the panel (a script: the list, its note and its toggle at
        # one moment), once the page has every warning the API listed.
        def panel(d):
            return d.execute_script(
                "const t = (id) => document.getElementById(id).textContent;"
                "return {shown: document.querySelectorAll('#warnings-list > li').length,"
                " visible: !document.getElementById('warnings-more').hidden,"
                " text: t('warnings-more-text'), toggle: t('warnings-more-toggle')};"
            )

        def of(text):
            return int(text.split(" of ")[1].split(" ")[0]) if " of " in text else 0

        seen = wait(driver, 10).until(lambda d: (x := panel(d)) and x["visible"] and of(x["text"]) >= total and x)
        n = of(seen["text"])
        assert seen["shown"] == 50, seen
        assert f"{n - 50} more" in seen["text"], seen
        assert seen["toggle"] == f"Show all {n}", seen
        toggle = driver.find_element(By.ID, "warnings-more-toggle")
        toggle.click()
        wait(driver, 10).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, items)) >= n)
        assert all(driver.find_elements(By.CSS_SELECTOR, f'#warnings-list > li[data-thread="{tid}"]') for tid in made)
        assert driver.find_element(By.ID, "warnings-more-toggle").text == "Show the first 50"
        driver.find_element(By.ID, "warnings-more-toggle").click()
        wait(driver, 10).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, items)) == 50)
    finally:
        for tid in made:
            api("DELETE", f"/api/threads/{tid}")
