"""The live dashboard in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from tests.service.conftest import LucyServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: install Debian's chromium and chromium-driver (scripts/setup.sh does)")
    profile = tempfile.mkdtemp(prefix="lucy-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 f"--user-data-dir={profile}", "--window-size=1280,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _wait(driver: webdriver.Chrome, timeout: float = 90) -> WebDriverWait:
    return WebDriverWait(driver, timeout, poll_frequency=0.25)


def test_dashboard_shows_streams_memory_and_answers(shared_server: LucyServer, videos: dict[str, Path],
                                                    browser: webdriver.Chrome) -> None:
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "lobby", "source": str(videos["c"])})
        assert r.status_code == 201, r.text
    browser.get(shared_server.url + "/")
    wait = _wait(browser)
    # The stream appears with its state; the dashboard selects it.
    row = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-stream="lobby"]')))
    row.click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "state-lobby"), "finished"))
    status = shared_server.wait_captioned("lobby")
    # Figures, the caption charts and the memory timeline fill in as the page polls.
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, 'tr[data-stream="lobby"] .captioned').text.strip()
               not in ("", "0.0 s"))
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline rect.node")) >= 3)
    wait.until(lambda d: int(d.find_element(By.CSS_SELECTOR, "#chart-lag path.series")
                             .get_attribute("data-points")) >= 2)
    assert browser.find_element(By.CSS_SELECTOR, "#chart-rate path.series").get_attribute("d").startswith("M")
    texts = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#nodes li .text")]
    assert len(texts) >= 3 and all(texts)
    assert browser.find_element(By.CSS_SELECTOR, 'tr[data-stream="lobby"] .ingested').text.strip() != "0.0 s"
    assert status["caption"]["coarse_nodes"] == 3
    # Ask: the trace shows step by step, then the answer with its evidence frame.
    box = browser.find_element(By.ID, "ask-input")
    box.send_keys("When does the store close?")
    browser.find_element(By.ID, "ask-button").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trace li.step")) >= 1)
    wait.until(EC.visibility_of_element_located((By.ID, "answer")))
    answer = browser.find_element(By.CSS_SELECTOR, "#answer .text").text
    steps = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#trace li.step")]
    assert answer and answer != "(no answer)"
    assert steps[0].startswith("#1 ") and any(" answer" in s for s in steps)
    with shared_server.client() as c:
        asked = c.get("/v1/streams/lobby/questions").json()["questions"]
    assert asked[0]["question"] == "When does the store close?"
    assert asked[0]["answer"]["answer"] == answer
    if asked[0]["answer"]["evidence"]:
        wait.until(lambda d: d.find_element(By.ID, "evidence-frame").get_attribute("src").startswith("blob:"))
        assert browser.execute_script("return document.getElementById('evidence-frame').naturalWidth") > 0
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] if hasattr(browser, "get_log") else []
    assert not errors, errors
