"""Drives the graph page in headless Chromium through Selenium, for tests/e2e/ui.rs.

Usage: python ui_browser.py SPEC.json, where the spec is
  {"base": "http://127.0.0.1:PORT", "chromium": PATH, "chromedriver": PATH,
   "roundtrip": [m, ...],
   "pages": [{"path": "/?start=...", "wait": true,
              "actions": [["type"|"select"|"click"|"hover", css, text] | ["wait", js], ...]}]}

Opens each page, waits until the chart is drawn (#chart[data-points]) or an error is shown
(unless "wait" is false), optionally acts on the form (typing, choosing, clicking, hovering, waiting for
a script to return true) and waits again, and prints one JSON object on stdout with what the
page showed and what the browser logged. The checks are the test's; this script only reports.
"""

import json
import sys
import tempfile

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait

WAIT_S = 20

DONE_JS = """
const chart = document.getElementById('chart');
const error = document.getElementById('error');
return (chart && chart.hasAttribute('data-points')) || (error && !error.hidden);
"""

STATE_JS = """
const chart = document.getElementById('chart');
const error = document.getElementById('error');
return {
  url: location.href,
  points: chart.getAttribute('data-points'),
  error: error.hidden ? null : error.textContent,
  status: document.getElementById('status').textContent,
  body: document.getElementById('body').textContent,
  curl: document.getElementById('curl').textContent,
  link: document.getElementById('link').value,
  canvases: chart.querySelectorAll('canvas').length,
  legend: Array.from(chart.querySelectorAll('.u-legend .u-series .u-label'))
    .map((e) => e.textContent),
  lists: Object.fromEntries(['metric', 'tagk', 'tagv'].map((l) => [l,
    Array.from(document.querySelectorAll(`#${l}-list option`)).map((o) => o.value)])),
  resources: performance.getEntriesByType('resource').map((e) => e.name),
};
"""


def start_driver(spec, profile):
    options = webdriver.ChromeOptions()
    options.binary_location = spec["chromium"]
    for flag in [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = Service(executable_path=spec["chromedriver"])
    driver = webdriver.Chrome(service=service, options=options)
    driver.set_page_load_timeout(WAIT_S)
    driver.set_script_timeout(WAIT_S)
    return driver


def act(driver, action):
    kind, css, *rest = action
    el = driver.find_element(By.CSS_SELECTOR, css) if kind != "wait" else None
    if kind == "type":
        el.clear()
        el.send_keys(rest[0])
    elif kind == "select":
        Select(el).select_by_value(rest[0])
    elif kind == "click":
        el.click()
    elif kind == "hover":
        ActionChains(driver).move_to_element(el).perform()
    elif kind == "wait":
        WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(css))
    else:
        raise ValueError(f"unknown action {kind}")


def wait_done(driver):
    WebDriverWait(driver, WAIT_S).until(lambda d: d.execute_script(DONE_JS))


def visit(driver, spec, page):
    driver.get(spec["base"] + page["path"])
    if page.get("wait", True):
        wait_done(driver)
    result = {"loaded": driver.execute_script(STATE_JS)}
    if page.get("actions"):
        driver.execute_script("document.getElementById('chart').removeAttribute('data-points')")
        for action in page["actions"]:
            act(driver, action)
        if page.get("wait", True):
            wait_done(driver)
        result["acted"] = driver.execute_script(STATE_JS)
    if page.get("screenshot"):
        driver.save_screenshot(page["screenshot"])
    result["log"] = driver.get_log("browser")
    return result


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        spec = json.load(f)
    with tempfile.TemporaryDirectory(prefix="strata-chromium-") as profile:
        driver = start_driver(spec, profile)
        try:
            out = {"pages": [visit(driver, spec, page) for page in spec["pages"]]}
            out["roundtrip"] = driver.execute_script(
                "return arguments[0].map((m) => window.strataUi.formatM(window.strataUi.parseM(m)));",
                spec.get("roundtrip", []),
            )
            out["log"] = driver.get_log("browser")
        finally:
            driver.quit()
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
