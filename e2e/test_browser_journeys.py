"""Browser journeys with real Chromium: `make demo`'s banner, the demo app (reload, cancel, approving
a desktop after seeing its request), the desktop's QR page, a mobile app's private-use scheme,
cancel, logout, and a Relais restart in the middle of a sign-in."""
import base64
import hashlib
import io
import os
import re
import secrets
import signal
import socket
import subprocess
import threading
import time
import unittest
from urllib.parse import urlencode

import requests
import zxingcpp
from PIL import Image
from selenium.webdriver.support.ui import WebDriverWait

from browser import Browser, query
from stack import ARTIFACTS, BINARY, ROOT, Stack


def pkce():
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


# What a machine can check beyond axe: heading levels in order, a visible <label> for every field,
# live regions for results that appear without a page load.
PAGE_PROBLEMS = """
const problems = [];
let previous = 0;
for (const heading of document.querySelectorAll("h1, h2, h3, h4, h5, h6")) {
  if (!heading.getClientRects().length) continue;
  const level = Number(heading.tagName[1]);
  if (previous === 0 ? level !== 1 : level > previous + 1) problems.push(`heading h${level} after h${previous}: ${heading.textContent.trim()}`);
  previous = level;
}
for (const field of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
  if (!field.getClientRects().length) continue;
  const visible = [...(field.labels || [])].some(label => label.getClientRects().length && label.textContent.trim()
    && getComputedStyle(label).visibility !== "hidden" && label.getBoundingClientRect().width > 1);
  if (!visible) problems.push(`field #${field.id} has no visible label`);
}
for (const id of arguments[0]) {
  const element = document.getElementById(id);
  if (element && element.getAttribute("aria-live") !== "polite") problems.push(`#${id} is not aria-live="polite"`);
}
return problems;
"""

LIVE_REGIONS = ["status", "refresh-result", "approve-result", "approve-request"]


def page_problems(browser, live=LIVE_REGIONS):
    return browser.driver.execute_script(PAGE_PROBLEMS, list(live))


def port_free(port):
    """No server listens on the port (as servers do, SO_REUSEADDR: closed connections may linger)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


class MobileApp:
    """What a native app does around the browser tab: PKCE, state, and the code exchange."""

    redirect_uri = "com.example.app:/oauth2redirect"

    def __init__(self, stack):
        self.stack = stack
        self.verifier, challenge = pkce()
        self.state = secrets.token_urlsafe(16)
        self.nonce = secrets.token_urlsafe(16)
        self.authorize_url = stack.relay + "/authorize?" + urlencode({
            "response_type": "code", "client_id": "mobile-app", "redirect_uri": self.redirect_uri, "scope": "openid profile email",
            "state": self.state, "nonce": self.nonce, "code_challenge": challenge, "code_challenge_method": "S256",
        })

    def exchange(self, redirect):
        parameters = query(redirect)
        assert parameters["state"] == self.state, parameters
        assert parameters["iss"] == self.stack.relay, parameters
        response = requests.post(self.stack.relay + "/token", data={
            "grant_type": "authorization_code", "code": parameters["code"], "redirect_uri": self.redirect_uri,
            "client_id": "mobile-app", "code_verifier": self.verifier,
        }, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()

    def userinfo(self, tokens):
        response = requests.get(self.stack.relay + "/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10)
        assert response.status_code == 200, response.text
        return response.json()


class MakeDemo(unittest.TestCase):
    """`make demo` as a newcomer meets it: scripts/demo.sh (with the debug binary), then every link
    its banner prints, opened in Chromium, the first one being the demo app."""

    def test_every_link_the_banner_prints_works_and_the_first_is_the_demo_app(self):
        busy = [port for port in (8080, 8081, 8082, 8083) if not port_free(port)]
        if busy:
            self.skipTest(f"make demo's ports are taken: {busy}")
        browser = Browser("make-demo")
        log = open(os.path.join(ARTIFACTS, "make-demo.log"), "w")
        demo = subprocess.Popen(["scripts/demo.sh"], cwd=ROOT, env={**os.environ, "DEMO_BINARY": BINARY}, stdout=subprocess.PIPE, stderr=log,
                                text=True, start_new_session=True)
        lines = []
        reader = threading.Thread(target=lambda: [lines.append(line) for line in demo.stdout], daemon=True)
        reader.start()
        try:
            deadline = time.time() + 60
            while not any("Ctrl-C stops everything" in line for line in lines):
                self.assertIsNone(demo.poll(), "scripts/demo.sh stopped: " + "".join(lines))
                self.assertLess(time.time(), deadline, "no banner: " + "".join(lines))
                time.sleep(0.1)
            # The banner: the indented block that ends with "Ctrl-C" (Relais and the providers log
            # to the same standard output, each log line starting with its timestamp).
            end = next(i for i, line in enumerate(lines) if "Ctrl-C stops everything" in line)
            start = end
            while start > 0 and (lines[start - 1].startswith("  ") or not lines[start - 1].strip()):
                start -= 1
            banner = "".join(lines[start:end + 1])
            links = re.findall(r"https?://[^\s)]+", banner)
            self.assertGreaterEqual(len(links), 5, banner)
            self.assertEqual(links[0], "http://127.0.0.1:8080/demo/", banner)
            for link in links:
                answer = requests.get(link, timeout=10)
                self.assertEqual(answer.status_code, 200, f"{link}: {answer.status_code} {answer.text[:200]}")
                browser.open(link)
                self.assertNotIn("transaction_expired", browser.driver.page_source, link)
                self.assertFalse(browser.has("error"), link)
            # The first link is a working app: a sign-in through the three processes make demo starts.
            browser.open(links[0])
            browser.screenshot("make-demo-app")
            browser.click("sign-in")
            browser.click("identity-angela")
            self.assertEqual(browser.wait_for("welcome").text, "Bonjour Angela Claire Louise")
        finally:
            browser.close()
            log.close()
            if demo.poll() is None:
                os.killpg(demo.pid, signal.SIGTERM)
                try:
                    demo.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(demo.pid, signal.SIGKILL)
                    demo.wait()
            demo.stdout.close()


class DemoJourneys:
    """The demo app's and the desktop's journeys, on whatever serves the demo at `self.relay` with a
    Chromium in `self.browser`: the e2e stack below, and the compose demo in e2e/image."""

    # The desktop app of the demo's QR page: its client_id and the name the approver is shown.
    desktop_client = "desktop"
    desktop_name = "desktop"

    def test_demo_app_signs_in_and_shows_the_identity(self):
        browser = self.browser
        browser.open(self.relay + "/demo/")
        browser.screenshot("demo-app")
        browser.click("sign-in")
        browser.wait_for("identity-angela")
        browser.screenshot("provider-login")
        browser.click("identity-angela")
        welcome = browser.wait_for("welcome")
        browser.screenshot("signed-in")
        self.assertEqual(welcome.text, "Bonjour Angela Claire Louise")
        self.assertEqual(browser.driver.find_element("id", "claim-family_name").text, "DUBOIS")
        self.assertEqual(browser.driver.find_element("id", "acr").text, "eidas1")

    def test_demo_app_as_an_attested_app_with_dpop(self):
        browser = self.browser
        browser.open(self.relay + "/demo/")
        browser.click("attested")
        browser.click("sign-in")
        browser.wait_for("identity-pierre")
        browser.click("identity-pierre")
        welcome = browser.wait_for("welcome")
        browser.screenshot("signed-in-attested")
        self.assertIn("Pierre", welcome.text)
        find = lambda name: browser.driver.find_element("id", name).text
        self.assertEqual(find("token-type"), "DPoP")
        self.assertEqual(find("attested-by"), "dev")
        self.assertEqual(len(find("jkt")), 43)
        self.assertEqual(find("claim-family_name"), "MERCIER")

    def test_the_demo_app_opens_a_web_page_signed_in(self):
        browser = self.browser
        browser.open(self.relay + "/demo/")
        browser.click("sign-in")
        browser.click("identity-angela")
        browser.wait_for("welcome")
        browser.click("open-web")
        welcome = browser.wait_for("web-welcome")
        browser.screenshot("web-page-signed-in")
        self.assertEqual(welcome.text, "Connecté·e sur le web : Angela Claire Louise DUBOIS")
        self.assertTrue(browser.driver.current_url.endswith("/demo/web"), browser.driver.current_url)
        cookie = browser.driver.get_cookie("relais-session")
        # Plain http here: not Secure (so not __Host-), which Safari and WKWebView would drop.
        self.assertTrue(not cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Lax", cookie)
        # A reload is a new request to the page, with the cookie only.
        text = welcome.text
        browser.driver.refresh()
        self.assertEqual(browser.wait_for("web-welcome").text, text)

    def desktop_qr(self, desktop):
        """The desktop's QR code, read back from its pixels with zxing-cpp."""
        desktop.open(self.relay + "/demo/desktop")
        user_code = WebDriverWait(desktop.driver, 15).until(lambda d: d.find_element("id", "user-code").text if "-" in d.find_element("id", "user-code").text else None)
        WebDriverWait(desktop.driver, 15).until(lambda d: d.execute_script("return document.getElementById('qr').complete && document.getElementById('qr').naturalWidth > 0"))
        desktop.screenshot("desktop-qr")
        image = Image.open(io.BytesIO(desktop.driver.find_element("id", "qr").screenshot_as_png))
        decoded = [result.text for result in zxingcpp.read_barcodes(image)]
        self.assertEqual(decoded, [self.relay + "/device?user_code=" + user_code])
        return user_code, decoded[0]

    def test_a_desktop_signs_in_with_the_phone_that_scans_its_qr_code(self):
        desktop = Browser("desktop-qr")
        try:
            _, url = self.desktop_qr(desktop)
            # The phone opens the QR's link: the person checks the request and signs in there.
            phone = self.browser
            phone.open(url)
            phone.click("device-continue")
            self.assertEqual(phone.wait_for("device-app").text, self.desktop_client)
            self.assertEqual(phone.driver.find_element("id", "device-app-name").text, self.desktop_name)
            self.assertEqual(phone.driver.find_element("id", "device-name").text, "Ordinateur de démonstration")
            phone.screenshot("phone-confirms-device")
            phone.click("device-sign-in")
            phone.click("identity-pierre")
            phone.wait_for("device-approved")
            phone.screenshot("phone-approved-device")
            welcome = WebDriverWait(desktop.driver, 30).until(lambda d: d.find_element("id", "desktop-welcome"))
            desktop.screenshot("desktop-signed-in")
            self.assertEqual(welcome.text, "Bonjour Pierre")
        finally:
            desktop.close()

    def test_the_signed_in_phone_app_shows_the_request_then_approves_a_desktop(self):
        desktop = Browser("desktop-code")
        try:
            user_code, _ = self.desktop_qr(desktop)
            phone = self.browser
            phone.open(self.relay + "/demo/")
            phone.click("sign-in")
            phone.click("identity-angela")
            phone.wait_for("welcome")
            phone.driver.find_element("id", "approve-code").send_keys(user_code)
            phone.click("approve-device")
            # Relais' description first (/device/inspect), nothing decided yet.
            text = lambda element_id: phone.wait_for(element_id).text
            self.assertEqual(text("approve-app-name"), self.desktop_name)
            self.assertEqual(text("approve-client"), self.desktop_client)
            self.assertRegex(text("approve-time"), r"^\d\d:\d\d$")
            self.assertEqual(text("approve-address"), "127.0.0.1")
            self.assertEqual(text("approve-device-name"), "Ordinateur de démonstration")
            self.assertIn("ses propres mots", text("approve-description"))
            order = phone.driver.execute_script(
                "const ids = ['approve-app-name', 'approve-time', 'approve-address', 'approve-device-name'];"
                "return ids.every((id, i) => i === 0 || (document.getElementById(ids[i - 1]).compareDocumentPosition(document.getElementById(id)) & 4));")
            self.assertTrue(order, "the app's name, the time and the address come before the device's own words")
            self.assertEqual(phone.driver.find_element("id", "approve-result").text, "")
            self.assertEqual(page_problems(phone), [])
            phone.screenshot("phone-app-shows-the-request")
            time.sleep(1)
            self.assertFalse(desktop.has("desktop-welcome"), "the desktop was signed in before the person confirmed")
            phone.click("approve-confirm")
            WebDriverWait(phone.driver, 15).until(lambda d: d.find_element("id", "approve-result").text)
            self.assertEqual(phone.driver.find_element("id", "approve-result").text, self.desktop_name + " autorisé")
            self.assertFalse(phone.has("approve-confirm"))
            phone.screenshot("phone-app-approved-device")
            welcome = WebDriverWait(desktop.driver, 30).until(lambda d: d.find_element("id", "desktop-welcome"))
            self.assertEqual(welcome.text, "Bonjour Angela Claire Louise")
        finally:
            desktop.close()

    def test_the_desktop_says_when_its_code_expires_and_starts_again_after_a_denial(self):
        desktop = Browser("desktop-denied")
        try:
            first_code, url = self.desktop_qr(desktop)
            self.assertRegex(desktop.driver.find_element("id", "expires").text, r"^Ce code expire à \d\d:\d\d \(dans \d+ min\)\.$")
            self.assertEqual(page_problems(desktop, ["status"]), [])
            phone = self.browser
            phone.open(url)
            phone.click("device-continue")
            phone.click("device-deny")
            phone.wait_for("device-denied")
            denied = WebDriverWait(desktop.driver, 30).until(lambda d: d.find_element("id", "desktop-denied"))
            self.assertEqual(denied.text, "La demande a été refusée sur le téléphone.")
            self.assertNotIn("error", denied.get_attribute("class"))
            desktop.screenshot("desktop-denied")
            desktop.click("desktop-restart")
            second = WebDriverWait(desktop.driver, 15).until(
                lambda d: (lambda code: code if "-" in code and code != first_code else None)(d.find_element("id", "user-code").text))
            self.assertNotEqual(second, first_code)
            self.assertTrue(desktop.driver.find_element("id", "qr").is_displayed())
            self.assertIn("expire à", desktop.driver.find_element("id", "expires").text)
            desktop.screenshot("desktop-started-again")
        finally:
            desktop.close()

    def test_reloading_the_signed_in_demo_app_shows_the_session(self):
        browser = self.browser
        browser.open(self.relay + "/demo/")
        browser.click("sign-in")
        browser.click("identity-angela")
        browser.wait_for("welcome")
        self.assertTrue(browser.driver.current_url.endswith("/demo/callback"), browser.driver.current_url)
        browser.driver.refresh()
        self.assertEqual(browser.wait_for("welcome").text, "Bonjour Angela Claire Louise")
        self.assertFalse(browser.has("error"))
        browser.screenshot("signed-in-reloaded")
        # The session is the same one: its tokens still refresh.
        browser.click("refresh")
        WebDriverWait(browser.driver, 15).until(lambda driver: "Jetons rafraîchis (1)" in driver.find_element("id", "refresh-result").text)

    def test_a_cancel_at_the_provider_brings_the_demo_app_back_to_its_buttons(self):
        browser = self.browser
        browser.open(self.relay + "/demo/")
        browser.click("sign-in")
        browser.click("cancel")
        cancelled = browser.wait_for("cancelled")
        browser.screenshot("demo-cancelled")
        self.assertTrue(cancelled.text.startswith("Connexion annulée"), cancelled.text)
        self.assertNotIn("error", cancelled.get_attribute("class"))
        self.assertNotEqual(cancelled.value_of_css_property("color"), "rgba(206, 5, 0, 1)")
        self.assertFalse(browser.has("error"))
        self.assertTrue(browser.wait_for("sign-in").is_displayed())
        self.assertEqual(browser.driver.find_element("id", "status").get_attribute("aria-live"), "polite")
        # The buttons work again.
        browser.click("sign-in")
        browser.click("identity-angela")
        self.assertEqual(browser.wait_for("welcome").text, "Bonjour Angela Claire Louise")


class BrowserJourneys(DemoJourneys, unittest.TestCase):
    """The demo's journeys on the e2e stack (Redis, the development provider), then a mobile app's."""

    def setUp(self):
        self.stack = Stack().start()
        self.relay = self.stack.relay
        self.browser = Browser(self.id().split(".")[-1])

    def tearDown(self):
        self.browser.close()
        self.stack.stop()

    def test_a_private_scheme_app_receives_its_code(self):
        app = MobileApp(self.stack)
        self.browser.open(app.authorize_url)
        self.browser.wait_for("identity-pierre")
        self.browser.screenshot("provider-login")
        self.browser.click("identity-pierre")
        tokens = app.exchange(self.browser.app_redirect(MobileApp.redirect_uri))
        self.assertEqual(app.userinfo(tokens)["family_name"], "MERCIER")

    def test_cancel_at_the_provider_reaches_the_app(self):
        app = MobileApp(self.stack)
        self.browser.open(app.authorize_url)
        self.browser.wait_for("cancel")
        self.browser.screenshot("provider-login")
        self.browser.click("cancel")
        redirect = query(self.browser.app_redirect(MobileApp.redirect_uri))
        self.assertEqual(redirect["error"], "access_denied")
        self.assertEqual(redirect["state"], app.state)

    def test_logout_ends_the_provider_session_too(self):
        app = MobileApp(self.stack)
        self.browser.open(app.authorize_url)
        self.browser.wait_for("identity-karima")
        self.browser.screenshot("provider-login")
        self.browser.click("identity-karima")
        tokens = app.exchange(self.browser.app_redirect(MobileApp.redirect_uri))
        # Signed in at the provider: the next sign-in offers to continue.
        again = MobileApp(self.stack)
        self.browser.open(again.authorize_url)
        self.browser.wait_for("continue")
        self.browser.screenshot("provider-remembers")
        self.browser.open(self.stack.relay + "/logout?" + urlencode({
            "client_id": "mobile-app", "post_logout_redirect_uri": "com.example.app:/logged-out", "state": "bye",
            "id_token_hint": tokens["id_token"],
        }))
        self.assertEqual(query(self.browser.app_redirect("com.example.app:/logged-out"))["state"], "bye")
        after = MobileApp(self.stack)
        self.browser.open(after.authorize_url)
        self.browser.wait_for("identity-angela")
        self.browser.screenshot("provider-forgot")
        self.assertFalse(self.browser.has("continue"))
        refused = requests.get(self.stack.relay + "/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10)
        self.assertEqual(refused.status_code, 401)

    def test_a_relais_restart_mid_sign_in_loses_nothing(self):
        app = MobileApp(self.stack)
        self.browser.open(app.authorize_url)
        self.browser.wait_for("identity-angela")
        self.browser.screenshot("provider-login-before-restart")
        self.stack.restart_relay()  # the login transaction is in Redis, not in the process
        self.browser.click("identity-angela")
        tokens = app.exchange(self.browser.app_redirect(MobileApp.redirect_uri))
        self.assertEqual(app.userinfo(tokens)["given_name"], "Angela Claire Louise")


if __name__ == "__main__":
    unittest.main()
