"""The dashboard's perform form with via block (issue 38): a block perform is sent
with "via":"block", runs and shows its result; one queued into a mode the loop
never runs is listed as pending with via block. No sleeps: WebDriverWait only."""

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from conftest import api
from test_dashboard import open_perform_form, wait


def test_perform_form_sends_a_block(driver):
    form, tid = open_perform_form(driver, "ui-block", "log")
    message = form.find_element(By.CSS_SELECTOR, 'input[data-field="args.message"]')
    message.clear()
    message.send_keys("hello from a block")
    Select(form.find_element(By.NAME, "via")).select_by_value("block")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    result = form.find_element(By.CSS_SELECTOR, ".form-result")
    wait(driver).until(lambda d: "log ok" in result.text)
    log = driver.find_element(By.ID, "log-lines")
    wait(driver).until(lambda d: "hello from a block" in log.text)

    # Into a mode the thread never runs, without waiting: pending, listed as a block.
    form.find_element(By.NAME, "waitUntilDone").click()
    modes = form.find_element(By.NAME, "modes")
    modes.clear()
    modes.send_keys("nowhere")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(driver).until(lambda d: "queued as a block" in result.text)
    status, body = api("GET", f"/api/threads/{tid}/perform")
    assert status == 200
    assert [p["via"] for p in body["pending"]] == ["block"]
    table = driver.find_element(By.ID, "pending-table")
    wait(driver).until(lambda d: "block" in table.text and "nowhere" in table.text)
    # Leave the form as the other tests expect it.
    form.find_element(By.NAME, "waitUntilDone").click()
    modes.clear()
    Select(form.find_element(By.NAME, "via")).select_by_value("selector")
