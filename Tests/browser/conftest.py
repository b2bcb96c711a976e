"""Fixtures for the dashboard browser tests: one headless Chromium per session,
pointed at the runloopd that run.sh started (RUNLOOPD_URL)."""

import json
import os
import shutil
import urllib.error
import urllib.request

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

BASE = os.environ.get("RUNLOOPD_URL", "http://127.0.0.1:8080")
ARTIFACTS = os.environ.get(
    "ARTIFACTS_DIR", os.path.join(os.path.dirname(__file__), "..", "..", ".build", "artifacts")
)


def api(method, path, body=None, timeout=10):
    """Calls the server directly (for setup and for the server's own error text)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(BASE + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, json.loads(res.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class ConsoleLog:
    """Browser log entries gathered across tests (get_log empties Chrome's buffer)."""

    def __init__(self, driver):
        self.driver = driver
        self.entries = []

    def collect(self):
        self.entries.extend(self.driver.get_log("browser"))
        return self.entries


@pytest.fixture(scope="session")
def base_url():
    return BASE


@pytest.fixture(scope="session")
def artifacts():
    os.makedirs(ARTIFACTS, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def driver():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1280,900",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    drv = webdriver.Chrome(service=service, options=opts)
    # chromedriver's answers may take minutes on a machine with two CPU hogs
    # per core beside the suite (issue 41: 120 s, Selenium's default, ran out
    # twice): a wait is a deadline on the page's state, not on chromedriver.
    drv.command_executor._client_config.timeout = 600
    # An async script's own deadline (Selenium's default 30 s): the page may
    # still be busy with a thousand threads' end (test_scale.py) when the
    # next file's script starts; under two hogs per core 30 s ran out.
    drv.set_script_timeout(300)
    drv.set_window_size(1280, 900)
    # The tests share this page and leave threads behind; they are about the cards, so the
    # page shows cards whatever the count (test_scale.py switches to the table).
    drv.get(BASE + "/?view=cards")
    yield drv
    drv.quit()


@pytest.fixture(scope="session")
def console(driver):
    return ConsoleLog(driver)
