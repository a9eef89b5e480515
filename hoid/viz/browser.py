"""Open hoid's HTML pages in a real headless Chromium (Selenium) and read back what it drew.

The pages' promises (nothing fetched, no script errors, every node drawn, images that decode, a hover that
shows the line) only hold if a browser says so: the tests in tests/viz/test_browser.py and the page-size and
draw-time benchmark (benchmarks/viz_page.py) both open pages through `Browser`. Needs the `browser` extra
(`pip install selenium`) and a Chromium with its driver (Debian: `apt-get install chromium chromium-driver`);
HOID_CHROMIUM and HOID_CHROMEDRIVER name other binaries.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

INSTALL = "apt-get install chromium chromium-driver (Debian/Ubuntu) and pip install 'hoid[browser]' (selenium)"

# Before the page's own script: uncaught errors and rejections are kept, and the time of the first frame
# painted after the load event (two animation frames later) is what "drawn" means.
PROBE = """
window.__hoid = {errors: [], drawn: null};
addEventListener('error', e => __hoid.errors.push(String(e.message || e.type)), true);
addEventListener('unhandledrejection', e => __hoid.errors.push('unhandled rejection: ' + e.reason));
addEventListener('load', () => requestAnimationFrame(() => requestAnimationFrame(() => {
  __hoid.drawn = performance.now(); })));
"""


class BrowserMissing(RuntimeError):
    pass


def find_browser() -> tuple[str, str]:
    """(chromium, chromedriver) paths; `BrowserMissing` names what is absent and how to install it."""
    try:
        import selenium  # noqa: F401
    except ImportError as e:
        raise BrowserMissing(f"selenium is not installed: {INSTALL}") from e
    names = [os.environ["HOID_CHROMIUM"]] if os.environ.get("HOID_CHROMIUM") else \
        ["chromium", "chromium-browser", "google-chrome"]
    chromium = next((p for p in map(shutil.which, names) if p), None)  # which: on PATH, or a path that runs
    driver = shutil.which(os.environ.get("HOID_CHROMEDRIVER") or "chromedriver")
    if not chromium or not driver:
        raise BrowserMissing(f"no {'Chromium' if not chromium else 'chromedriver'} on PATH: {INSTALL}")
    return chromium, driver


class Browser:
    """One headless Chromium; `open(path)` loads a page and returns the errors it logged."""

    def __init__(self, width: int = 1280, height: int = 900):
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        chromium, driver = find_browser()
        options = webdriver.ChromeOptions()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    f"--window-size={width},{height}", "--hide-scrollbars"):
            options.add_argument(arg)
        # the performance log carries the DevTools network events: every request the page makes
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        self.driver = webdriver.Chrome(service=Service(driver), options=options)
        self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PROBE})
        self.version = f"Chromium {self.driver.capabilities.get('browserVersion')}"
        self.page = None

    def open(self, path) -> list[str]:
        """Load the file at `path`; the console's errors and the uncaught exceptions, as text."""
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver.get_log("browser")  # drop what an earlier page logged
        self.driver.get_log("performance")
        self.page = Path(path).resolve().as_uri()
        self.driver.get(self.page)
        WebDriverWait(self.driver, 60).until(lambda d: d.execute_script("return window.__hoid.drawn !== null"))
        return self.errors()

    def errors(self) -> list[str]:
        logged = [e["message"] for e in self.driver.get_log("browser") if e["level"] == "SEVERE"]
        return logged + self.js("return window.__hoid.errors.splice(0)")

    def js(self, script: str, *args):
        return self.driver.execute_script(script, *args)

    def drawn_ms(self) -> float:
        """Milliseconds from the start of navigation to the first frame painted after the load event."""
        return float(self.js("return window.__hoid.drawn"))

    def fetched(self) -> list[str]:
        """Every URL the page asked for since `open`, beyond itself and its inline data: URLs (failed
        requests included: a missing file is asked for too)."""
        import json

        urls = []
        for entry in self.driver.get_log("performance"):
            event = json.loads(entry["message"])["message"]
            if event["method"] == "Network.requestWillBeSent":
                url = event["params"]["request"]["url"]
                if url != self.page and not url.startswith("data:"):
                    urls.append(url)
        return urls

    def hover(self, selector: str):
        """Scroll the element into view and move the mouse onto it (a real pointer move, so :hover and
        mouseenter fire as for a person); returns the element."""
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By

        element = self.driver.find_element(By.CSS_SELECTOR, selector)
        self.js("arguments[0].scrollIntoView({block: 'center', inline: 'center'})", element)
        ActionChains(self.driver).move_to_element(element).perform()
        return element

    def click(self, selector: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver.find_element(By.CSS_SELECTOR, selector).click()

    def screenshot(self, path) -> Path:
        self.driver.save_screenshot(str(path))
        return Path(path)

    def close(self) -> None:
        self.driver.quit()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
