"""The demo app's journeys in real Chromium, with three development providers: FranceConnect,
FranceConnect+ (its step-up provider) and ProConnect. Step-up (RFC 9470) refused for another person
and granted for the same one, refreshing and signing out, an agent signing in with ProConnect, the
DSFR's buttons with each brand's own logo, and the page at 320, 390 and 1280 px."""
import unittest

from selenium.webdriver.support.ui import WebDriverWait

from browser import Browser
from stack import Stack
from test_browser_journeys import page_problems

# Where a claim's name breaks inside a word (a line break after a character that is neither "_"
# nor a space), from the position of each character on the screen.
BREAKS_INSIDE_WORDS = r"""
const broken = [];
for (const cell of document.querySelectorAll("#claims th")) {
  const characters = [];
  const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      const range = document.createRange();
      range.setStart(node, i);
      range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (rect) characters.push([node.data[i], rect.top]);
    }
  }
  for (let i = 1; i < characters.length; i++) {
    if (characters[i][1] > characters[i - 1][1] + 2 && !/[_\s]/.test(characters[i - 1][0])) broken.push(cell.textContent);
  }
}
return broken;
"""

# The ::before logo of a DSFR connect button: its image (a data: URI) and its width.
LOGO = "const style = getComputedStyle(document.getElementById(arguments[0]), '::before'); return [style.backgroundImage, style.width];"


class MobileJourneys(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = Stack(fcplus=True, proconnect=True).start()
        cls.relay = cls.stack.relay  # e2e/image runs these journeys on the compose demo too

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
        browser.open(self.relay + "/demo/")
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
        browser.open(self.relay + "/demo/")
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

    def test_the_buttons_are_the_dsfr_component_with_each_brands_logo(self):
        browser = self.browser
        browser.open(self.relay + "/demo/")
        franceconnect, proconnect = browser.wait_for("sign-in"), browser.wait_for("sign-in-proconnect")
        self.assertEqual(franceconnect.get_attribute("class"), "fr-connect")
        self.assertEqual(proconnect.get_attribute("class"), "fr-connect fr-connect--pro")
        fc_logo, fc_width = browser.driver.execute_script(LOGO, "sign-in")
        pc_logo, pc_width = browser.driver.execute_script(LOGO, "sign-in-proconnect")
        # The DSFR's own drawings: the FranceConnect hexagon (40×48) and the ProConnect mark (55×48).
        self.assertIn("viewBox='0 0 40 48'", fc_logo)
        self.assertIn("viewBox='0 0 55 48'", pc_logo)
        self.assertNotEqual(fc_logo, pc_logo)
        self.assertNotEqual(fc_width, pc_width)
        self.assertIn("DSFR v1.15.2 | SPDX-License-Identifier: Etalab-2.0", browser.driver.page_source)
        for group in browser.driver.find_elements("css selector", ".fr-connect-group"):
            link = group.find_element("css selector", "p a")
            self.assertTrue(link.text.startswith("Qu’est-ce que "), link.text)
            self.assertEqual(link.get_attribute("target"), "_blank")
        browser.screenshot("dsfr-buttons")
        # FranceConnect+ (the step-up): the same logo and the component's "+".
        browser.click("sign-in")
        browser.click("identity-angela")
        step_up = browser.wait_for("step-up")
        self.assertEqual(step_up.get_attribute("class"), "fr-connect fr-connect--plus")
        self.assertEqual(browser.driver.execute_script(LOGO, "step-up")[0], fc_logo)
        plus = browser.driver.execute_script("return getComputedStyle(arguments[0], '::after').content", step_up)
        self.assertEqual(plus, '"+"')

    def test_the_signed_in_page_has_a_hierarchy_of_actions_and_announces_results(self):
        browser = self.browser
        self.sign_in_with_franceconnect()
        style = lambda element_id: browser.driver.execute_script(
            "const s = getComputedStyle(document.getElementById(arguments[0])); return [s.backgroundColor, s.color, s.boxShadow];", element_id)
        primary, secondary = style("refresh"), style("sign-out")
        self.assertEqual(primary[0], "rgb(0, 0, 145)", "refreshing is a primary action (filled blue France)")
        self.assertEqual(secondary[0], "rgba(0, 0, 0, 0)", "signing out is a secondary action (outlined)")
        self.assertEqual(secondary[1], "rgb(0, 0, 145)")
        self.assertIn("inset", secondary[2])
        self.assertEqual(style("open-web")[0], primary[0])
        for element_id in ("status", "refresh-result", "approve-result", "approve-request"):
            self.assertEqual(browser.driver.find_element("id", element_id).get_attribute("aria-live"), "polite", element_id)
        self.assertEqual(page_problems(browser), [])
        label = browser.driver.execute_script("return document.getElementById('approve-code').labels[0].textContent")
        self.assertTrue(label.startswith("Code affiché par l’appareil"), label)

    def test_the_demo_is_readable_at_320_390_and_1280_px(self):
        browser = self.browser
        width = lambda: browser.driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        # At 390 px a two-column table broke "given_name_array" as "given_name_arra" + "y".
        for size in (320, 390, 1280):
            with self.subTest(width=size):
                browser.driver.set_window_size(size, 900)
                browser.driver.delete_all_cookies()
                browser.open(self.relay + "/demo/")
                browser.driver.execute_script("sessionStorage.clear()")
                browser.open(self.relay + "/demo/")
                labels = browser.wait_for("sign-in").text.replace("\n", " ")
                self.assertEqual(labels, "S’identifier avec FranceConnect")
                self.assertTrue(browser.has("sign-in-proconnect"))
                self.assertFalse(browser.has("sign-in-franceconnect-plus"))  # reached by stepping up only
                scroll, inner = width()
                self.assertLessEqual(scroll, inner, f"the start page scrolls sideways at {size} px")
                self.assertEqual(page_problems(browser), [])
                browser.screenshot(f"start-{size}px")
                browser.click("sign-in")
                browser.click("identity-pierre")
                browser.wait_for("welcome")
                scroll, inner = width()
                self.assertLessEqual(scroll, inner, f"the signed-in page scrolls sideways at {size} px")
                self.assertEqual(browser.driver.execute_script(BREAKS_INSIDE_WORDS), [], f"claim names broken inside a word at {size} px")
                self.assertEqual(page_problems(browser), [])
                browser.screenshot(f"signed-in-{size}px")
                browser.click("sign-out")
                browser.wait_for("signed-out")

if __name__ == "__main__":
    unittest.main()
