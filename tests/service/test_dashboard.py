"""The live dashboard in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
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


def test_dashboard_searches_memory_as_one_types(shared_server: LucyServer, videos: dict[str, Path],
                                                browser: webdriver.Chrome) -> None:
    from lucy.memory.nodes import MemoryNode
    from lucy.memory.sqlite_store import DB_NAME, SQLiteMemoryStore

    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "plaza", "source": str(videos["a"])})
        assert r.status_code == 201, r.text
    shared_server.wait_captioned("plaza")
    # Captions are untrusted text: one that looks like HTML must show as text.
    trap = '<img src=x onerror="document.title=\'owned\'"> a van with PLATE <b>KX</b> at the gate'
    store = SQLiteMemoryStore(shared_server.data / DB_NAME)
    try:
        store.add(MemoryNode(stream="plaza", level="fine", start=30, end=40, text=trap, origin="question:1"))
    finally:
        store.close()
    browser.get(shared_server.url + "/")
    wait = _wait(browser)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'tr[data-stream="plaza"]'))).click()
    box = browser.find_element(By.ID, "search-input")
    box.send_keys("plate KX")  # no Enter: the search runs when typing pauses
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#search-results li.hit")) >= 2)
    cards = browser.find_elements(By.CSS_SELECTOR, "#search-results li.hit")
    first = next(c for c in cards if "PLATE KX-4821" in c.find_element(By.CSS_SELECTOR, ".caption").text)
    assert {m.text.lower() for m in first.find_elements(By.CSS_SELECTOR, ".caption mark")} >= {"plate", "kx"}
    assert first.find_element(By.CSS_SELECTOR, ".level").text == "coarse"
    assert first.find_element(By.CSS_SELECTOR, ".when").text == "0.0 s–60.0 s"
    # its thumbnail loads (fetched with the token, shown from a blob URL)
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelector('#search-results li.hit img.thumb'); return i && i.naturalWidth > 0"))
    # the HTML-looking caption is text: no element made from it, nothing run
    trapped = next(c for c in cards if "onerror" in c.text)
    assert '<img src=x onerror="document.title=' in trapped.find_element(By.CSS_SELECTOR, ".caption").text
    assert not trapped.find_elements(By.CSS_SELECTOR, ".caption img, .caption b")
    assert browser.title.startswith("Lucy") and "owned" not in browser.title
    # a click shows the whole caption; another folds it again
    text_before = first.find_element(By.CSS_SELECTOR, ".caption").text
    first.click()
    wait.until(lambda d: first.get_attribute("aria-expanded") == "true")
    full = first.find_element(By.CSS_SELECTOR, ".caption").text
    assert len(full) >= len(text_before) and "Motion" in full
    browser.set_window_size(1400, 1000)
    browser.execute_script("document.getElementById('search-panel').scrollIntoView()")
    wait.until(lambda d: d.execute_script("return [...document.querySelectorAll('#search-results img.thumb')]"
                                          ".every((i) => i.naturalWidth > 0)"))
    browser.save_screenshot("/tmp/lucy-search-1400.png")
    first.click()
    wait.until(lambda d: first.get_attribute("aria-expanded") == "false")
    browser.set_window_size(390, 844)
    browser.execute_script("document.getElementById('search-panel').scrollIntoView()")
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390  # no sideways scrolling
    browser.save_screenshot("/tmp/lucy-search-390.png")
    browser.set_window_size(1280, 1000)
    # nothing found, then an error, each said in the panel
    box.clear()
    box.send_keys("zzqx")
    box.send_keys(Keys.ENTER)
    level = browser.find_element(By.ID, "search-level")
    level.send_keys("speech")  # the video has no sound: nothing at this level
    wait.until(EC.text_to_be_present_in_element((By.ID, "search-status"), "No memory of plaza matches"))
    assert not browser.find_elements(By.CSS_SELECTOR, "#search-results li.hit")
    box.clear()
    box.send_keys("x" * 10)
    browser.execute_script("document.getElementById('search-input').maxLength = 600; "
                           "document.getElementById('search-input').value = 'y'.repeat(501);")
    box.send_keys(Keys.ENTER)
    wait.until(EC.text_to_be_present_in_element((By.ID, "search-status"), "Search failed:"))
    assert "error" in browser.find_element(By.ID, "search-status").get_attribute("class")


def listed(driver: webdriver.Chrome) -> list[str]:
    """The texts of the watch list's items, read in one call (the list is redrawn live: elements found one call
    earlier may be gone by the next)."""
    return driver.execute_script("return [...document.querySelectorAll('#watch-list li')].map(li => li.textContent)")


def test_dashboard_watches_panel_adds_lists_alerts_and_deletes(shared_server: LucyServer, videos: dict[str, Path],
                                                                browser: webdriver.Chrome) -> None:
    from tests.service.test_watches import store_alert

    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "dock", "source": str(videos["b"])})
        assert r.status_code == 201, r.text
    shared_server.wait_captioned("dock")
    browser.get(shared_server.url + "/")
    wait = _wait(browser)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'tr[data-stream="dock"]'))).click()
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#watches-panel .stream-name"), "dock"))
    # add a watch through the form: it is listed, and stored for the stream
    question = "Tell me when a <b>DEPARTURES</b> board is shown"  # untrusted text: shown as text
    browser.find_element(By.ID, "watch-question").send_keys(question)
    browser.find_element(By.ID, "watch-cooldown").send_keys("120")
    browser.find_element(By.CSS_SELECTOR, "#watch-form button[type=submit]").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "watch-result"), "watching"))
    wait.until(lambda d: any(question in text for text in listed(d)))
    assert browser.find_element(By.ID, "watch-question").get_attribute("value") == ""
    with shared_server.client() as c:
        (watch,) = c.get("/v1/streams/dock/watches").json()["watches"]
    assert watch["question"] == question and watch["cooldown_seconds"] == 120
    assert not browser.find_elements(By.CSS_SELECTOR, "#watch-list li b")
    # an alert stored as the stream's checker stores one shows up live, with its frame
    assert not browser.find_elements(By.CSS_SELECTOR, "#alert-list li.alert")
    store_alert(shared_server, watch["id"], "dock", question, 60.0)
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#alert-list li.alert")) == 1)
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelector('#alert-list li.alert img.thumb'); return i && i.naturalWidth > 0"))
    shown = browser.find_element(By.CSS_SELECTOR, "#alert-list li.alert").text
    assert "60.0 s–2:00" in shown and question in shown and "<b>seen</b> at 60" in shown
    store_alert(shared_server, watch["id"], "dock", question, 120.0)  # the newest first
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#alert-list li.alert")) == 2)
    assert "2:00–3:00" in browser.find_element(By.CSS_SELECTOR, "#alert-list li.alert").text
    wait.until(lambda d: d.execute_script("return [...document.querySelectorAll('#alert-list img.thumb')]"
                                          ".every((i) => i.naturalWidth > 0)"))
    for width, height in ((1400, 1000), (390, 844)):
        browser.set_window_size(width, height)
        browser.execute_script("document.getElementById('watches-panel').scrollIntoView()")
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
        assert browser.execute_script("const p = document.getElementById('watches-panel');"
                                      "return p.scrollWidth <= p.clientWidth")  # not inside the panel either
        browser.save_screenshot(f"/tmp/lucy-watches-{width}.png")
    browser.set_window_size(1280, 1000)
    # delete it with its button: gone from the list and the API; its alerts stay as history
    browser.execute_script("document.getElementById('watches-panel').scrollIntoView()")

    def click_delete(d: webdriver.Chrome) -> bool:
        try:  # the list is redrawn as the page refreshes it: find the button afresh until a click lands
            (item,) = [li for li in d.find_elements(By.CSS_SELECTOR, "#watch-list li") if question in li.text]
            item.find_element(By.TAG_NAME, "button").click()
            return True
        except StaleElementReferenceException:
            return False

    wait.until(click_delete)
    wait.until(lambda d: not any(question in text for text in listed(d)))
    with shared_server.client() as c:
        assert c.get("/v1/streams/dock/watches").json()["watches"] == []
        assert len(c.get("/v1/streams/dock/alerts").json()["alerts"]) == 2
    assert len(browser.find_elements(By.CSS_SELECTOR, "#alert-list li.alert")) == 2
