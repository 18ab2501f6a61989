"""A real Chromium (Debian's chromium + chromium-driver) driven by Selenium, as a person signing in
through an app's browser tab. Redirects to an app's private-use scheme cannot load in a browser;
like a webview delegate, the test reads them from the browser's network log instead."""
import json
import os
import time
from urllib.parse import parse_qs, urlsplit

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions
from selenium.webdriver.support.ui import WebDriverWait

from stack import ARTIFACTS


class Browser:
    def __init__(self, name, language=None, size="900,1000"):
        """`language`: what the browser asks pages for (Accept-Language), as a person set it."""
        options = webdriver.ChromeOptions()
        for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={size}"):
            options.add_argument(argument)
        if language:
            options.add_argument(f"--lang={language}")
            options.add_experimental_option("prefs", {"intl.accept_languages": language})
        options.binary_location = "/usr/bin/chromium"
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        self.driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
        self.name = name
        self.step = 0
        os.makedirs(ARTIFACTS, exist_ok=True)

    def close(self):
        self.driver.quit()

    def open(self, url):
        self.driver.get(url)

    def wait_for(self, element_id, timeout=15):
        return WebDriverWait(self.driver, timeout).until(expected_conditions.presence_of_element_located((By.ID, element_id)))

    def click(self, element_id):
        self.wait_for(element_id).click()

    def has(self, element_id):
        return len(self.driver.find_elements(By.ID, element_id)) > 0

    def screenshot(self, label):
        self.step += 1
        self.driver.save_screenshot(os.path.join(ARTIFACTS, f"{self.name}-{self.step:02d}-{label}.png"))

    def app_redirect(self, prefix, timeout=15):
        """The first navigation to `prefix` (an app's private-use scheme), from the network log."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            for entry in self.driver.get_log("performance"):
                message = json.loads(entry["message"])["message"]
                if message.get("method") == "Network.requestWillBeSent":
                    url = message["params"]["request"]["url"]
                    if url.startswith(prefix):
                        return url
            time.sleep(0.1)
        raise AssertionError(f"no navigation to {prefix}")


def query(url):
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}
