"""The live dashboard in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium)."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

from tests.service.conftest import LucyServer

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# The browser's only way off this machine is a proxy on a closed loopback port (Chromium never proxies loopback
# itself): whatever network the machine has, a page that asks anything of another origin (a CDN) gets nothing.
DEAD_PROXY = "http://127.0.0.1:9"
# Screenshots for a person to look at, in this test process's own folder: parallel xdist workers and concurrent runs
# never write the same file.
SHOTS = Path(tempfile.gettempdir()) / f"lucy-dash-shots-{os.getpid()}"


def _screenshot(driver: webdriver.Chrome, name: str) -> None:
    SHOTS.mkdir(exist_ok=True)
    driver.save_screenshot(str(SHOTS / name))


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    """One headless Chromium for the module's tests (each test loads the page afresh)."""
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            pytest.fail(f"{path} is missing: install Debian's chromium and chromium-driver (scripts/setup.sh does)")
    profile = tempfile.mkdtemp(prefix="lucy-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                 f"--user-data-dir={profile}", "--window-size=1280,1000", f"--proxy-server={DEAD_PROXY}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for CSP and load errors
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    driver.set_window_size(1280, 1000)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _read(driver: webdriver.Chrome, selector: str, attribute: str | None = None) -> str | None:
    """An element's text (or ``attribute``), read in one script call: the page redraws charts and rows as updates
    are pushed, so an element found in one call may be gone by the next."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]);"
        "return e === null ? null : (arguments[1] ? e.getAttribute(arguments[1]) : e.textContent);",
        selector, attribute)


def _wait(driver: webdriver.Chrome, timeout: float = 90) -> WebDriverWait:
    # a redraw between finding an element and reading it is retried, not a failure
    return WebDriverWait(driver, timeout, poll_frequency=0.25, ignored_exceptions=(StaleElementReferenceException,))


def _open(driver: webdriver.Chrome, url: str) -> WebDriverWait:
    """Load the dashboard afresh at the default size; the wait for what follows."""
    driver.set_window_size(1280, 1000)
    driver.get(url + "/")
    return _wait(driver)


# The widest marker of every visible numbered list (or "100. ", whichever is wider: the lists grow as the page runs)
# against the room its list leaves for it (a marker wider than the list's left padding is clipped by the scrolling
# box around it: "l3." for 13).
CLIPPED_NUMBERS = """
const canvas = document.createElement('canvas').getContext('2d');
const out = [];
for (const ol of document.querySelectorAll('ol')) {
  const items = ol.querySelectorAll(':scope > li');
  const style = getComputedStyle(ol);
  if (!items.length || style.listStyleType === 'none' || ol.offsetParent === null) continue;
  const start = ol.reversed ? items.length : (ol.start || 1);
  const widest = Math.max(start, ol.reversed ? 1 : start + items.length - 1, 100);  // room for 3 digits at least
  const f = getComputedStyle(items[0]);
  canvas.font = `${f.fontStyle} ${f.fontWeight} ${f.fontSize} ${f.fontFamily}`;
  const need = canvas.measureText(widest + '. ').width;
  if (need > parseFloat(style.paddingLeft)) out.push([ol.id, widest, need, style.paddingLeft]);
}
return out;
"""

# fetch/XHR requests the page made so far, apart from the live thumbnails' (those follow pushed updates)
REQUESTS = ("return performance.getEntriesByType('resource').filter((e) => "
            "['fetch', 'xmlhttprequest'].includes(e.initiatorType) && !e.name.includes('/frames/latest')).length")

H_MM_SS = re.compile(r"^\d{1,2}:\d{2}:\d{2}$")


def test_dashboard_shows_streams_memory_and_answers(shared_server: LucyServer, videos: dict[str, Path],
                                                    browser: webdriver.Chrome) -> None:
    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "lobby", "source": str(videos["c"])})
        assert r.status_code == 201, r.text
    wait = _open(browser, shared_server.url)
    # The stream appears with its state; the dashboard selects it.
    row = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, 'tr[data-stream="lobby"]')))
    row.click()
    status = shared_server.wait_captioned("lobby")  # however slow the machine; then the page says so at once
    wait.until(EC.text_to_be_present_in_element((By.ID, "state-lobby"), "finished"))
    # Figures, the caption charts and the memory timeline fill in as the server pushes them; times read h:mm:ss.
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, 'tr[data-stream="lobby"] .captioned').text.strip() == "2:30")
    assert (_read(browser, 'tr[data-stream="lobby"] .ingested') or "").strip() == "2:30"
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#timeline rect.node")) >= 3)
    wait.until(lambda d: int(d.find_element(By.CSS_SELECTOR, "#chart-lag path.series")
                             .get_attribute("data-points")) >= 2)
    assert (_read(browser, "#chart-rate path.series", "d") or "").startswith("M")
    texts = browser.execute_script(  # in one call: the list is redrawn as nodes are pushed
        "return [...document.querySelectorAll('#nodes li .text')].map((e) => e.textContent)")
    assert len(texts) >= 3 and all(texts)
    assert status["caption"]["coarse_nodes"] == 3
    # the charts have time axes (wall clock, h:mm:ss); the timeline's axis is media time
    def tick_texts(selector: str) -> list[str]:  # in one call: the charts are redrawn on every pushed tick
        return browser.execute_script(
            "return [...document.querySelectorAll(arguments[0])].map((e) => e.textContent)", selector)

    for chart in ("chart-lag", "chart-rate", "chart-host"):
        ticks = tick_texts(f"#{chart} text.tick-time")
        assert len(ticks) >= 2 and all(H_MM_SS.match(t) for t in ticks), (chart, ticks)
    assert "2:30" in tick_texts("#timeline text.tick-time")
    # the live thumbnail: the stream's newest frame
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelector('tr[data-stream=\"lobby\"] td.thumb img'); return i && i.naturalWidth > 0"))
    with shared_server.client() as c:
        latest = c.get("/v1/streams/lobby/frames/latest")
    assert latest.headers["content-type"] == "image/jpeg"
    shown = float(latest.headers["X-Lucy-Frame-Time"])
    assert 149 <= shown < 150
    title = f"frame at 2:{shown - 120:04.1f}".replace(".0", "")  # the newest frame, once the page has seen it
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, 'tr[data-stream="lobby"] td.thumb img').get_attribute(
        "title") == title)
    # host CPU and memory, pushed: the page makes no requests while updates keep arriving
    wait.until(EC.text_to_be_present_in_element((By.ID, "host"), "CPU "))
    assert re.search(r"memory [\d.]+ [kMGT]B / [\d.]+ [kMGT]B", browser.find_element(By.ID, "host").text)
    ticks, requests = int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-ticks")), \
        browser.execute_script(REQUESTS)
    time.sleep(5)  # ten ticks at the test server's 0.5-s interval
    assert int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-ticks")) >= ticks + 3
    assert browser.execute_script(REQUESTS) == requests, "the dashboard polled"
    assert browser.find_element(By.ID, "health").text == "live"
    # Ask: the trace shows step by step, then the answer with its evidence frame.
    box = browser.find_element(By.ID, "ask-input")
    question = "When does the store close?"
    box.send_keys(question)
    browser.find_element(By.ID, "ask-button").click()
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#trace li.step")) >= 1)
    wait.until(EC.visibility_of_element_located((By.ID, "answer")))
    answer = browser.find_element(By.CSS_SELECTOR, "#answer .text").text
    steps = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#trace li.step")]
    assert answer and answer != "(no answer)"
    assert steps[0].startswith("#1 ") and any(" answer" in s for s in steps)
    with shared_server.client() as c:
        asked = c.get("/v1/streams/lobby/questions").json()["questions"]
    assert asked[0]["question"] == question
    assert asked[0]["answer"]["answer"] == answer
    if asked[0]["answer"]["evidence"]:
        wait.until(lambda d: d.find_element(By.ID, "evidence-frame").get_attribute("src").startswith("blob:"))
        assert browser.execute_script("return document.getElementById('evidence-frame').naturalWidth") > 0
    # the question history lists it, newest first, with its answer
    wait.until(lambda d: d.execute_script(
        "const q = document.querySelector('#question-list li.question .q .text'); return q && q.textContent")
        == question)
    asked_at, answered = browser.execute_script(  # in one call: the list is redrawn when a question is answered
        "const li = document.querySelector('#question-list li.question');"
        "return [li.querySelector('.asked').textContent, li.querySelector('.a .text').textContent]")
    assert answer in answered and H_MM_SS.match(asked_at)
    # a question asked elsewhere (the API) shows up too: the pushed figures say one more was answered
    with shared_server.client() as c:
        assert c.post("/v1/streams/lobby/questions", json={"question": "What colour is the background?"}
                      ).status_code == 200
    wait.until(lambda d: d.execute_script(
        "return document.querySelectorAll('#question-list li.question').length") == 2)
    # "every stream": the same box asks across all of them (POST /v1/questions), not the selected stream
    browser.find_element(By.ID, "ask-all").click()
    box.clear()
    box.send_keys(question)
    browser.find_element(By.ID, "ask-button").click()
    wait.until(lambda d: d.find_element(By.ID, "ask-button").is_enabled()
               and d.find_element(By.ID, "answer").is_displayed()
               and d.find_elements(By.CSS_SELECTOR, "#trace li.step"))
    assert browser.find_element(By.CSS_SELECTOR, "#answer .text").text not in ("", "(no answer)")
    assert browser.execute_script(  # asked of every stream (with one stream in the data directory, of it alone)
        "return performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname === "
        "'/v1/questions').length") == 1
    browser.find_element(By.ID, "ask-all").click()  # back to the selected stream
    assert not browser.execute_script(CLIPPED_NUMBERS)
    for width, height in ((1400, 1000), (390, 844)):
        browser.set_window_size(width, height)
        time.sleep(0.5)  # charts redraw to the new width
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
        assert not browser.execute_script(CLIPPED_NUMBERS)
        _screenshot(browser, f"dash-top-{width}.png")
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
    wait = _open(browser, shared_server.url)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'tr[data-stream="plaza"]'))).click()
    box = browser.find_element(By.ID, "search-input")
    box.send_keys("plate KX")  # no Enter: the search runs when typing pauses
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#search-results li.hit")) >= 2)
    cards = browser.find_elements(By.CSS_SELECTOR, "#search-results li.hit")
    first = next(c for c in cards if "PLATE KX-4821" in c.find_element(By.CSS_SELECTOR, ".caption").text)
    assert {m.text.lower() for m in first.find_elements(By.CSS_SELECTOR, ".caption mark")} >= {"plate", "kx"}
    assert first.find_element(By.CSS_SELECTOR, ".level").text == "coarse"
    assert first.find_element(By.CSS_SELECTOR, ".when").text == "0:00–1:00"
    # folded, a hit shows the server's snippet: the line that matched best, not the caption's first lines
    with shared_server.client() as c:
        found = c.get("/v1/streams/plaza/search", params={"q": "plate KX"}).json()
    snippet = next(h["snippet"] for h in found["hits"] if "PLATE KX-4821" in h["text"])
    assert first.find_element(By.CSS_SELECTOR, ".caption").text == snippet
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
    _screenshot(browser, "dash-search-1400.png")
    first.click()
    wait.until(lambda d: first.get_attribute("aria-expanded") == "false")
    browser.set_window_size(390, 844)
    browser.execute_script("document.getElementById('search-panel').scrollIntoView()")
    assert browser.execute_script("return document.documentElement.scrollWidth") <= 390  # no sideways scrolling
    _screenshot(browser, "dash-search-390.png")
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


def _shoot(driver: webdriver.Chrome, panel: str, name: str) -> None:
    """A screenshot of ``panel`` at 1400 and 390 px into :data:`SHOTS` (looked at by hand), each without sideways
    scrolling of the page."""
    for width, height in ((1400, 1000), (390, 844)):
        driver.set_window_size(width, height)
        driver.execute_script("document.getElementById(arguments[0]).scrollIntoView()", panel)
        time.sleep(0.5)  # charts redraw to the new width
        assert driver.execute_script("return document.documentElement.scrollWidth") <= width, (name, width)
        _screenshot(driver, f"{name}-{width}.png")
    driver.set_window_size(1280, 1000)


def test_dashboard_history_opens_answers_memory_groups_by_span_and_finished_charts_fold(
        shared_server: LucyServer, videos: dict[str, Path], browser: webdriver.Chrome) -> None:
    from lucy.memory.nodes import MemoryNode
    from lucy.memory.sqlite_store import DB_NAME, SQLiteMemoryStore

    with shared_server.client() as c:
        r = c.post("/v1/streams", json={"name": "atrium", "source": str(videos["b"])})
        assert r.status_code == 201, r.text
    shared_server.wait_captioned("atrium")
    # deeper captions of the second coarse span (60-120 s), as a question's backtracking writes them
    store = SQLiteMemoryStore(shared_server.data / DB_NAME)
    try:
        store.add(MemoryNode(stream="atrium", level="fine", start=70, end=80, text="fine: a board at the platform",
                             origin="question:1"))
        store.add(MemoryNode(stream="atrium", level="ultra_fine", start=72, end=74,
                             text="ultra: the board reads DEPARTS", origin="question:1"))
        # a summary over the three coarse spans, as a long stream's question writes one (lucy/query/summaries.py)
        store.add(MemoryNode(stream="atrium", level="summary1", start=0, end=150,
                             text="summary: a platform, then its departures board", origin="question:1"))
    finally:
        store.close()
    options = ["a red car", "a departures board", "a <b>dog</b>"]  # untrusted text: shown as text
    with shared_server.client() as c:
        r = c.post("/v1/streams/atrium/questions", json={"question": "What is shown at 1:20?", "options": options})
        assert r.status_code == 200, r.text
        answer = r.json()
        (asked,) = c.get("/v1/streams/atrium/questions").json()["questions"]
    # the history gives each evidence span the URL of its frame (as search hits have), or None
    assert asked["options"] == options and asked["answer"]["evidence"] == [
        {**e, "frame_url": f"/v1/streams/atrium/frames?t={(e['start'] + e['end']) / 2:.3f}"}
        for e in answer["evidence"]]
    browser.get_log("browser")  # what earlier tests logged is theirs
    wait = _open(browser, shared_server.url)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'tr[data-stream="atrium"]'))).click()
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#questions-panel .stream-name"), "atrium"))

    # A finished stream's charts are folded under a line of its final figures; a click opens them.
    wait.until(EC.text_to_be_present_in_element((By.ID, "caption-summary"), "captioned 2:30 of 2:30"))
    assert browser.execute_script("return document.getElementById('caption-charts').open") is False
    assert "3 coarse captions" in browser.find_element(By.ID, "caption-summary").text
    assert not browser.find_element(By.ID, "chart-lag").is_displayed()
    _shoot(browser, "caption-charts", "folded")
    browser.execute_script("window.scrollTo(0, 0)")
    browser.find_element(By.ID, "caption-summary").click()
    wait.until(lambda d: d.find_element(By.ID, "chart-lag").is_displayed())
    # the lag chart shows the band of one coarse span (the stream's preset: 60 s), and says why
    assert "1:00" in (_read(browser, "#chart-lag text.band-label") or "")
    assert "a coarse span closes every 1:00" in browser.find_element(By.ID, "lag-note").text
    # A live stream's saw-tooth (up to one span, plus 5 s for its caption) has no red part; a backlog does.
    red_points = browser.execute_script("""
      const svg = document.getElementById('chart-lag'), out = [];
      for (const lags of [[0, 30, 59, 65, 2, 40, 64, 3], [0, 60, 90, 125, 150]]) {
        chart(svg, [{ name: 'lag', colour: '#2f6fdf', points: lags.map((v, i) => ({ t: 1e9 + 5 * i, v: v })) }],
              { timeValues: true, band: lagBand() });
        const edge = Number(svg.querySelector('clipPath[id$="-above"] rect').getAttribute('height'));
        const ys = svg.querySelector('path.over').getAttribute('d').split(/[ML]/).filter(Boolean)
          .map((xy) => Number(xy.trim().split(' ')[1]));
        out.push(ys.filter((y) => y < edge).length);
      }
      drawSelected();
      return out;""")
    assert red_points == [0, 2], red_points
    time.sleep(1.5)  # a few pushed ticks: the user's choice holds while the figures update
    assert browser.execute_script("return document.getElementById('caption-charts').open") is True

    # Memory: one entry per coarse span, newest first, each a coarse caption; deeper ones fold under their span.
    wait.until(lambda d: d.execute_script("return document.querySelectorAll('#nodes > li.span').length") == 3)
    entries = browser.execute_script(
        "return [...document.querySelectorAll('#nodes > li.span')].map((li) => [li.dataset.start,"
        " li.querySelector('summary .badge').textContent, li.querySelector('summary .text').textContent])")
    assert [e[0] for e in entries] == ["120", "60", "0"]
    assert all(level == "coarse" and text for _, level, text in entries), entries
    # Looked up and checked in one script: the list is drawn again as the feed updates, and an element found in one
    # call can be gone (stale) by the next.
    assert browser.execute_script(
        "const hit = [...document.querySelectorAll('body *')].find((e) => [...e.childNodes].some("
        "  (n) => n.nodeType === Node.TEXT_NODE && n.textContent.includes('fine: a board')));"
        "return hit === undefined ? 'missing' : hit.getClientRects().length > 0") is False  # folded, not shown
    span = browser.find_element(By.CSS_SELECTOR, '#nodes > li.span[data-start="60"] > details > summary')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", span)
    span.send_keys(Keys.ENTER)  # keyboard: a span opens with Enter
    wait.until(lambda d: d.execute_script(
        "return [...document.querySelectorAll('#nodes li.span[data-start=\"60\"] li.child .text')]"
        ".map((e) => e.textContent).includes('fine: a board at the platform')"))
    fine = browser.find_element(By.XPATH, "//li[contains(@class, 'child')][.//span[text()='fine: a board at the "
                                          "platform']]")
    assert "1 ultra-fine" in fine.text and fine.find_element(By.CSS_SELECTOR, ".badge").text == "fine"
    ultra = fine.find_element(By.XPATH, ".//span[text()='ultra: the board reads DEPARTS']")
    assert not ultra.is_displayed()
    fine.find_element(By.TAG_NAME, "summary").click()
    wait.until(lambda d: ultra.is_displayed())
    # other spans stay folded: nothing of theirs was read
    assert not browser.find_elements(By.CSS_SELECTOR, '#nodes li.span[data-start="0"] li.child')
    # Summaries cover several spans: listed apart above them, folded under a line that counts them.
    summaries = browser.find_element(By.ID, "summaries")
    assert summaries.is_displayed() and summaries.get_attribute("open") is None
    assert browser.find_element(By.ID, "summaries-summary").text == "1 summary of longer stretches (1 level)"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", summaries)
    browser.find_element(By.ID, "summaries-summary").click()
    wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "#summary-nodes li").is_displayed())
    listed_summaries = browser.execute_script(
        "return [...document.querySelectorAll('#summary-nodes li')].map((li) => [li.dataset.level,"
        " li.querySelector('.badge').textContent, li.querySelector('.text').textContent])")
    assert listed_summaries == [["summary1", "summary1", "summary: a platform, then its departures board"]]
    _shoot(browser, "summaries", "summaries")
    _shoot(browser, "nodes", "memory")

    # The history: the options asked (the one chosen marked); a click opens answer, trace and evidence.
    wait.until(lambda d: d.execute_script("return document.querySelectorAll('#question-list li.question').length"))
    shown = browser.execute_script(
        "return [...document.querySelectorAll('#question-list li.question ul.options li')].map((e) => e.textContent)")
    assert len(shown) == 3 and all(o in s for o, s in zip(options, shown, strict=True)), shown
    assert not browser.find_elements(By.CSS_SELECTOR, "#question-list ul.options b")
    if answer.get("option_index") is not None:
        chosen = browser.find_elements(By.CSS_SELECTOR, "#question-list ul.options li.chosen")
        assert [e.text for e in chosen] == [shown[answer["option_index"]].strip()]
    detail = browser.find_element(By.CSS_SELECTOR, "#question-list li.question .detail")
    assert not detail.is_displayed()
    summary = browser.find_element(By.CSS_SELECTOR, "#question-list li.question summary")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", summary)
    summary.click()
    wait.until(lambda d: detail.is_displayed())
    rounds = f"{answer['iterations']} round{'' if answer['iterations'] == 1 else 's'} · "
    assert rounds in detail.find_element(By.CSS_SELECTOR, ".figures").text
    steps = [e.text for e in detail.find_elements(By.CSS_SELECTOR, "ol.trace li.step")]
    assert len(steps) == len(answer["trace"]) and steps[0].startswith("#1 ")
    items = detail.find_elements(By.CSS_SELECTOR, ".evidence-item")
    assert len(items) == len(answer["evidence"])
    if items:
        wait.until(lambda d: d.execute_script(
            "return [...document.querySelectorAll('#question-list .evidence-item img.thumb')]"
            ".every((i) => i.naturalWidth > 0)"))
    # it stays open when the list is loaded again (another question answered)
    with shared_server.client() as c:
        r = c.post("/v1/streams/atrium/questions", json={"question": "What colour is the background at 0:30?"})
        assert r.status_code == 200 and r.json()["evidence"], r.text
    wait.until(lambda d: d.execute_script("return document.querySelectorAll('#question-list li.question').length")
               == 2)
    assert browser.execute_script("return document.querySelectorAll('#question-list details[open]').length") == 1
    assert browser.find_element(By.CSS_SELECTOR, "#question-list li.question:nth-child(2) .detail").is_displayed()
    # the new one's evidence comes with its frames (fetched with the token)
    browser.find_element(By.CSS_SELECTOR, "#question-list li.question:nth-child(1) summary").click()
    wait.until(lambda d: d.execute_script(
        "const i = [...document.querySelectorAll('#question-list li.question:nth-child(1) .evidence-item img.thumb')];"
        "return i.length > 0 && i.every((e) => e.naturalWidth > 0)"))
    _shoot(browser, "questions-panel", "history")
    browser.execute_script("window.scrollTo(0, 0)")
    _shoot(browser, "streams-panel", "top")
    assert not browser.execute_script(CLIPPED_NUMBERS)
    # Many spans come a page at a time: 25 more coarse spans, the newest 20 listed, the rest on "older spans".
    store = SQLiteMemoryStore(shared_server.data / DB_NAME)
    try:
        for i in range(3, 28):
            store.add(MemoryNode(stream="atrium", level="coarse", start=60 * i, end=60 * (i + 1), text=f"span {i}"))
    finally:
        store.close()
    wait = _open(browser, shared_server.url)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, 'tr[data-stream="atrium"]'))).click()
    starts = "return [...document.querySelectorAll('#nodes > li.span')].map((li) => Number(li.dataset.start))"
    wait.until(lambda d: len(d.execute_script(starts)) == 20)
    assert browser.execute_script(starts) == [60 * i for i in range(27, 7, -1)]
    older = browser.find_element(By.ID, "older-spans")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", older)
    older.click()
    wait.until(lambda d: len(d.execute_script(starts)) == 28)
    assert browser.execute_script(starts) == [60 * i for i in range(27, -1, -1)]
    assert not older.is_displayed()
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


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
    wait = _open(browser, shared_server.url)
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
    assert "1:00–2:00" in shown and question in shown and "<b>seen</b> at 60" in shown
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
        _screenshot(browser, f"dash-watches-{width}.png")
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


def test_dashboard_adds_a_paced_stream_with_a_preset_stops_and_deletes_it(
        shared_server: LucyServer, videos: dict[str, Path], browser: webdriver.Chrome) -> None:
    wait = _open(browser, shared_server.url)
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#add-preset option"))
    browser.find_element(By.CSS_SELECTOR, "#add-stream summary").click()
    browser.find_element(By.ID, "add-name").send_keys("kiosk")
    browser.find_element(By.ID, "add-source").send_keys(str(videos["a"]))
    Select(browser.find_element(By.ID, "add-preset")).select_by_value("videomme-short")
    browser.find_element(By.ID, "add-realtime").click()
    browser.find_element(By.CSS_SELECTOR, "#add-form button[type=submit]").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "add-result"), "started kiosk"))
    status = shared_server.stream("kiosk")
    assert status["realtime"] is True and status["preset"] == "videomme-short"
    assert _read(browser, "#streams-panel .stream-name, .stream-name") == "kiosk"
    # paced like a camera: it runs, its thumbnail shows what it sees
    wait.until(EC.text_to_be_present_in_element((By.ID, "state-kiosk"), "recording"))
    # its charts are open, the lag chart with the band of one coarse span of its preset (60 s): what is normal
    assert browser.execute_script("return document.getElementById('caption-charts').open") is True
    wait.until(lambda d: "1:00" in (_read(d, "#chart-lag text.band-label") or ""))
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelector('tr[data-stream=\"kiosk\"] td.thumb img'); return i && i.naturalWidth > 0"))
    for width, height in ((1400, 1000), (390, 844)):
        browser.set_window_size(width, height)
        time.sleep(0.5)
        assert browser.execute_script("return document.documentElement.scrollWidth") <= width  # no sideways scroll
        assert browser.execute_script("const p = document.querySelector('#streams-panel .scroll');"
                                      "return p.scrollWidth <= p.clientWidth")  # every column fits, buttons too
        _screenshot(browser, f"dash-streams-{width}.png")
    browser.set_window_size(1280, 1000)
    # stop: it stays listed, stopped, with its memory; no stop button any more
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-stream="kiosk"]')
    row.find_element(By.CSS_SELECTOR, "button.stop").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "state-kiosk"), "stopped"))
    wait.until(EC.text_to_be_present_in_element((By.ID, "stream-result"), "stopped kiosk"))
    assert not row.find_element(By.CSS_SELECTOR, "button.stop").is_displayed()
    stopped = shared_server.stream("kiosk")
    assert stopped["state"] == "stopped" and not stopped["managed"] and stopped["ingested_until"] > 0
    # delete takes a second click; then the stream is gone, frames and memory too
    delete = row.find_element(By.CSS_SELECTOR, "button.delete")
    delete.click()
    assert delete.text == "delete all?"
    assert shared_server.stream("kiosk")["state"] == "stopped"  # one click deletes nothing
    delete.click()
    wait.until(lambda d: not d.find_elements(By.CSS_SELECTOR, 'tr[data-stream="kiosk"]'))
    wait.until(EC.text_to_be_present_in_element((By.ID, "stream-result"), "deleted kiosk"))
    with shared_server.client() as c:
        assert c.get("/v1/streams/kiosk").status_code == 404
        assert "kiosk" not in [s["name"] for s in c.get("/v1/streams").json()["streams"]]
    assert _read(browser, ".stream-name") != "kiosk"  # another stream is selected


def test_dashboard_feed_and_latest_frame_over_http(shared_server: LucyServer, videos: dict[str, Path]) -> None:
    """The feed's wire format (what the page reads) and the thumbnail's cache validation, without a browser."""
    events: list[tuple[str, dict[str, Any]]] = []

    def gate_seen() -> bool:
        ticks = [e["streams"]["gate"] for k, e in events if k == "tick" and "gate" in e.get("streams", {})]
        nodes = [e for k, e in events if k == "node" and e["stream"] == "gate"]
        return len(ticks) >= 2 and bool(nodes)

    with shared_server.client() as c, shared_server.client() as other:
        with c.stream("GET", "/v1/dashboard/events", headers={"Accept": "text/event-stream"}) as res:
            assert res.status_code == 200 and res.headers["content-type"].startswith("text/event-stream")
            kind, deadline = "", time.monotonic() + 120
            for line in res.iter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    events.append((kind, json.loads(line[5:])))
                    if len(events) == 1:  # the hello: now the stream starts
                        r = other.post("/v1/streams", json={"name": "gate", "source": str(videos["short"])})
                        assert r.status_code == 201, r.text
                if gate_seen() or time.monotonic() > deadline:
                    break
        assert gate_seen(), events[-5:]
        kind, hello = events[0]
        assert kind == "hello" and "gate" not in {s["name"] for s in hello["streams"]}
        assert 0 <= hello["host"]["cpu_percent"] <= 100 and hello["host"]["memory_total_bytes"] > 0
        assert "videomme-short" in hello["presets"] and hello["default_preset"] == "live"
        assert hello["coarse_span_seconds"]["live"] == 60 and hello["coarse_span_seconds"]["egomem"] == 800
        ticks = [e for k, e in events if k == "tick"]
        assert any(t.get("host", {}).get("memory_total_bytes") for t in ticks)  # host figures each interval
        first, *later = [t["streams"]["gate"] for t in ticks if "gate" in t["streams"]]
        assert first["name"] == "gate" and "source" in first  # all of it the first time
        assert later and all("name" not in t and "source" not in t for t in later)  # then only what changed
        node = next(e for k, e in events if k == "node" and e["stream"] == "gate")
        assert node["level"] and len(node["text"]) <= 401
        shared_server.wait_captioned("gate")
        frame = c.get("/v1/streams/gate/frames/latest", params={"width": 64})
        assert frame.status_code == 200 and frame.content[:2] == b"\xff\xd8"
        again = c.get("/v1/streams/gate/frames/latest", params={"width": 64},
                      headers={"If-None-Match": frame.headers["ETag"]})
        assert again.status_code == 304 and not again.content
        assert c.get("/v1/streams/nobody/frames/latest").status_code == 404


def test_dashboard_asks_for_the_token_then_follows_the_feed(lucy_server: Callable[..., LucyServer],
                                                             browser: webdriver.Chrome) -> None:
    token = "dashboard-token-0123456789abcdef"
    server = lucy_server(token=token)
    wait = _open(browser, server.url)
    wait.until(EC.visibility_of_element_located((By.ID, "token-box")))  # the feed was refused: 401
    assert browser.find_element(By.ID, "health").text != "live"
    browser.find_element(By.ID, "token-input").send_keys(token)
    browser.find_element(By.CSS_SELECTOR, "#token-form button").click()
    wait.until(EC.text_to_be_present_in_element((By.ID, "health"), "live"))  # reconnected at once, with the token
    assert not browser.find_element(By.ID, "token-box").is_displayed()
    assert browser.find_element(By.ID, "no-streams").is_displayed()
    wait.until(EC.text_to_be_present_in_element((By.ID, "host"), "CPU "))
    browser.execute_script("sessionStorage.clear()")  # the module's other tests use servers without a token


# Every resource the page loaded, and the console's errors (a CSP refusal or a failed load is logged as one).
LOADED = "return performance.getEntriesByType('resource').map(e => e.name);"


def test_dashboard_trace_text_reads_well(shared_server: LucyServer, browser: webdriver.Chrome) -> None:
    """The page's trace lines and answer figures: what to look for cut at a word (one line), tokens only where a
    model counted them, "1 round" but "2 rounds"."""
    _open(browser, shared_server.url).until(lambda d: d.execute_script("return typeof traceLine === 'function'"))
    instruction = ("Read all on-screen text exactly and note colours and counts of objects; needed to answer: At "
                   "what time does the\ntrain leave?")
    line = browser.execute_script(
        "return traceLine({index: 4, agent: 'caption', level: 'fine', start: 40, end: 50, detail: 'fine again', "
        "instruction: arguments[0], error: null, prompt_tokens: 0, completion_tokens: 0})", instruction)
    look_for = line.split(" | look for: ")[1]
    assert line.startswith("#4 caption fine 0:40–0:50 | fine again") and "\n" not in line and "tok" not in line
    assert look_for.endswith("…") and len(look_for) <= 100 and look_for[:-1].split()[-1] in instruction.split()
    counted = browser.execute_script(
        "return traceLine({index: 1, agent: 'answer', start: null, end: null, prompt_tokens: 321, "
        "completion_tokens: 45})")
    assert counted.endswith("[321+45 tok]")
    figures = browser.execute_script("return [answerFigures({iterations: 1, llm_calls: 1, caption_calls: 1, "
                                     "prompt_tokens: 0, completion_tokens: 0}), answerFigures({iterations: 2, "
                                     "llm_calls: 3, caption_calls: 0, prompt_tokens: 10, completion_tokens: 5})]")
    assert figures == ["1 round · 1 LLM call · 1 caption", "2 rounds · 3 LLM calls · 0 captions · 10+5 tokens"]


def _console_errors(driver: webdriver.Chrome) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]


def test_api_docs_render_offline_from_lucys_own_files(shared_server: LucyServer, browser: webdriver.Chrome) -> None:
    """/docs (Swagger UI) and /redoc (ReDoc) draw the API from this server alone: Chromium here has no network, so
    a CDN page would stay blank; the pages' strict policy (no other origin, inline scripts by hash) refuses
    nothing they need."""
    with pytest.raises(WebDriverException, match="ERR_PROXY_CONNECTION_FAILED"):  # no request leaves loopback,
        browser.get("http://192.0.2.1/")  # whatever network this machine has (TEST-NET-1)
    browser.get_log("browser")  # what earlier tests left in the console
    browser.get(shared_server.url + "/docs")
    wait = _wait(browser, 60)
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, ".opblock")))
    assert "Lucy" in browser.find_element(By.CSS_SELECTOR, ".info .title").text
    paths = {e.text for e in browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path")}
    assert {"/v1/streams", "/v1/chat/completions"} <= paths, paths
    loaded = browser.execute_script(LOADED)
    assert any(u.endswith("/docs/static/swagger-ui-bundle.js") for u in loaded), loaded
    assert all(u.startswith(shared_server.url) for u in loaded), loaded
    assert _console_errors(browser) == []

    browser.get(shared_server.url + "/redoc")
    wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "[data-section-id]")))
    wait.until(lambda d: "Lucy" in d.find_element(By.TAG_NAME, "h1").text)
    assert "/v1/streams" in browser.find_element(By.TAG_NAME, "body").text
    loaded = browser.execute_script(LOADED)
    assert any(u.endswith("/docs/static/redoc.standalone.js") for u in loaded), loaded
    # ReDoc's sidebar asked for the "API docs by Redocly" logo from its CDN, which the policy refused (a console
    # error on every visit): the bundle is served without that address, so nothing is asked of another origin
    elsewhere = [u for u in loaded if not u.startswith((shared_server.url, "blob:"))]
    assert elsewhere == [], loaded
    assert "API docs by Redocly" in browser.find_element(By.TAG_NAME, "body").text  # the attribution stays
    assert _console_errors(browser) == []


def test_dashboard_lists_tracked_objects_with_snapshots_and_marks(shared_server: LucyServer,
                                                                   browser: webdriver.Chrome) -> None:
    """The selected stream's tracked objects: newest first, label, times, motion and attributes as text (data read
    from video, never markup), the snapshot of each one that has it, a mark each on the strip; a click shows the
    frame of its best view."""
    from lucy.perception.objects import Observations
    from tests.service.test_objects import FILLED, record, stored_stream, track

    name = "objdash"
    tracks = [*FILLED.tracks, track(5, "<img src=x onerror=alert(1)>", 50.0, 52.0)]
    stored_stream(shared_server.data, Observations(stream=name, until=0.0), name=name)
    record(shared_server.data, Observations(stream=name, until=60.0, tracks=[
        dataclasses.replace(t, stream=name) for t in tracks]))
    wait = _open(browser, shared_server.url)
    wait.until(EC.element_to_be_clickable((By.CSS_SELECTOR, f'tr[data-stream="{name}"]'))).click()
    wait.until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, "#objects-panel .stream-name"), name))
    wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#object-list li.object")) == 5)
    items = browser.find_elements(By.CSS_SELECTOR, "#object-list li.object")
    assert [i.get_attribute("data-id") for i in items] == ["5", "4", "3", "2", "1"]  # newest first
    assert items[0].find_element(By.CSS_SELECTOR, "b.label").text == "<img src=x onerror=alert(1)>"
    assert not browser.find_elements(By.CSS_SELECTOR, "#object-list li.object div img")  # text, not an element
    assert "colour <b>brown</b>" in items[1].text and not items[1].find_elements(By.CSS_SELECTOR, ".attributes b")
    person = items[3].text
    assert "person #2" in person and "0:02–0:08" in person and "moving" in person and "upper red" in person
    assert "stationary" in items[4].text and "still in view" in items[4].text
    assert "active" in items[4].get_attribute("class")
    wait.until(lambda d: d.execute_script(
        "const i = document.querySelector('#object-list li[data-id=\"2\"] img.thumb'); return i && i.naturalWidth > 0"))
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#object-list li[data-id="3"] .thumb.none'))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#object-marks rect.object")) == 5
    assert "5 objects" in _read(browser, "#objects-note")
    browser.find_element(By.CSS_SELECTOR, '#object-list li[data-id="2"]').click()
    wait.until(lambda d: d.execute_script("const i = document.getElementById('evidence-frame');"
                                          "return !i.hidden && i.naturalWidth > 0"))
    assert "0:02.5" in browser.find_element(By.ID, "evidence-frame").get_attribute("title")
    _screenshot(browser, "dash-objects.png")
