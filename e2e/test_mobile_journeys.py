"""The demo app's journeys in real Chromium, with three development providers: FranceConnect,
FranceConnect+ (its step-up provider) and ProConnect. Step-up (RFC 9470) refused for another person
and granted for the same one, refreshing and signing out, an agent signing in with ProConnect, and
the page at a phone's width (360 px)."""
import unittest

from selenium.webdriver.support.ui import WebDriverWait

from browser import Browser
from stack import Stack


class MobileJourneys(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = Stack(fcplus=True, proconnect=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.stack.stop()

    def setUp(self):
        self.browser = Browser(self.id().split(".")[-1])

    def tearDown(self):
        self.browser.close()

    def text(self, element_id):
        return self.browser.wait_for(element_id).text

    def sign_in_with_franceconnect(self, identity="angela"):
        browser = self.browser
        browser.open(self.stack.relay + "/demo/")
        browser.click("sign-in")
        browser.click(f"identity-{identity}")
        browser.wait_for("welcome")

    def test_step_up_to_franceconnect_plus_for_the_same_person_only(self):
        browser = self.browser
        self.sign_in_with_franceconnect()
        self.assertEqual(self.text("acr"), "eidas1")
        self.assertEqual(self.text("idp"), "franceconnect")
        browser.screenshot("signed-in-eidas1")

        # FranceConnect+ gives other subs: a sign-in there as someone else is refused.
        browser.click("step-up")
        browser.wait_for("identity-pierre")
        self.assertIn("FranceConnect+ (eIDAS substantiel)", browser.driver.find_element("id", "imitates").text)
        browser.screenshot("franceconnect-plus-login")
        browser.click("identity-pierre")
        error = browser.wait_for("error")
        self.assertIn("step_up_identity_mismatch", error.text)
        browser.screenshot("step-up-refused")
        # ... and the app keeps its eidas1 session.
        browser.click("back")
        self.assertEqual(self.text("acr"), "eidas1")

        browser.click("step-up")
        browser.click("identity-angela")
        WebDriverWait(browser.driver, 15).until(lambda driver: driver.find_element("id", "acr").text == "eidas2")
        self.assertEqual(self.text("idp"), "franceconnect-plus")
        self.assertEqual(self.text("claim-family_name"), "DUBOIS")
        self.assertFalse(browser.has("step-up"))  # FranceConnect+ has no step-up of its own
        browser.screenshot("stepped-up-eidas2")

    def test_refresh_then_sign_out_of_relais_and_the_provider(self):
        browser = self.browser
        self.sign_in_with_franceconnect("karima")
        browser.click("refresh")
        WebDriverWait(browser.driver, 15).until(lambda driver: "Jetons rafraîchis (1)" in driver.find_element("id", "refresh-result").text)
        browser.click("refresh")
        WebDriverWait(browser.driver, 15).until(lambda driver: "Jetons rafraîchis (2)" in driver.find_element("id", "refresh-result").text)
        browser.screenshot("refreshed")
        browser.click("sign-out")
        notice = browser.wait_for("signed-out")
        WebDriverWait(browser.driver, 15).until(lambda driver: notice.is_displayed())
        browser.screenshot("signed-out")
        # The provider's session ended too: the next sign-in asks again, with no "continue".
        browser.click("sign-in")
        browser.wait_for("identity-karima")
        self.assertFalse(browser.has("continue"))

    def test_an_agent_signs_in_with_proconnect(self):
        browser = self.browser
        browser.open(self.stack.relay + "/demo/")
        self.assertIn("S’identifier avec ProConnect", browser.wait_for("sign-in-proconnect").text.replace("\n", " "))
        browser.click("sign-in-proconnect")
        browser.wait_for("identity-yanis")
        self.assertIn("ProConnect", browser.driver.find_element("id", "imitates").text)
        browser.screenshot("proconnect-login")
        browser.click("identity-yanis")
        self.assertEqual(self.text("welcome"), "Bonjour Yanis")
        self.assertEqual(self.text("claim-usual_name"), "MOREAU")
        self.assertEqual(self.text("claim-siret"), "11000201100044")
        self.assertEqual(self.text("idp"), "proconnect")
        self.assertEqual(self.text("acr"), "eidas2")  # the level yanis's identity provider asserts
        self.assertFalse(browser.has("step-up"))
        browser.screenshot("proconnect-signed-in")

    def test_the_demo_is_readable_at_a_phones_width(self):
        browser = self.browser
        browser.driver.set_window_size(360, 800)
        width = lambda: browser.driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        browser.open(self.stack.relay + "/demo/")
        labels = browser.wait_for("sign-in").text.replace("\n", " ")
        self.assertEqual(labels, "S’identifier avec FranceConnect")
        self.assertTrue(browser.has("sign-in-proconnect"))
        self.assertFalse(browser.has("sign-in-franceconnect-plus"))  # reached by stepping up only
        scroll, inner = width()
        self.assertLessEqual(scroll, inner, "the start page scrolls sideways at 360 px")
        browser.screenshot("start-360px")
        browser.click("sign-in")
        browser.click("identity-angela")
        browser.wait_for("welcome")
        scroll, inner = width()
        self.assertLessEqual(scroll, inner, "the signed-in page scrolls sideways at 360 px")
        browser.screenshot("signed-in-360px")


if __name__ == "__main__":
    unittest.main()
