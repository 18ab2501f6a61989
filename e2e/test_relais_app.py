"""relais-app, the terminal app built on RelaisKit, against Relais and the development providers
run as processes: it signs in through the provider's login page (this script plays the browser,
from the URL relais-app prints), with and without DPoP and the development attester, then calls
/userinfo, opens a web session, approves a device's request, steps up to eidas2 and signs out."""
import json
import os
import re
import subprocess
import tempfile
import unittest

import requests

from stack import ROOT, Stack

APP = os.path.join(ROOT, ".build", "debug", "relais-app")

APPS = """
  relais-app:
    redirect_uris: ["http://127.0.0.1/cb"]
    scopes: [openid, profile, birth, email]
    attestation: allowed
    device_grant: true
    device_approvers: [relais-app]
  demo-desktop:
    name: Relais démo (ordinateur)
    redirect_uris: ["http://127.0.0.1/cb"]
    scopes: [openid, profile, email]
    device_grant: true
    device_approvers: [relais-app]
"""


class RelaisApp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = Stack(apps_extra=APPS, fcplus=True).start()

    @classmethod
    def tearDownClass(cls):
        cls.stack.stop()

    def app(self, store, flags, *arguments):
        """The global options first, as the README shows them (relais-app also takes them after the command)."""
        return [APP, "--relay", self.stack.relay, "--client-id", "relais-app", "--store", store, *flags, *arguments]

    def run_app(self, store, flags, *arguments):
        done = subprocess.run(self.app(store, flags, *arguments), capture_output=True, text=True, timeout=60)
        self.assertEqual(done.returncode, 0, f"{arguments}: {done.stderr}")
        return done.stdout

    def sign_in(self, store, flags, identity="angela", extra=()):
        """relais-app sign-in --no-browser: the URL it prints, followed through the login page to its loopback port."""
        process = subprocess.Popen(self.app(store, flags, "sign-in", "--no-browser", *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            url = process.stdout.readline().strip()
            self.assertTrue(url.startswith(self.stack.relay + "/authorize?"), url)
            browser = requests.Session()
            page = browser.get(url, timeout=10)
            action = re.search(r'action="([^"]+)"', page.text).group(1)
            to_relay = browser.post(requests.compat.urljoin(page.url, action), data={"identity": identity}, allow_redirects=False, timeout=10)
            to_app = browser.get(to_relay.headers["Location"], allow_redirects=False, timeout=10)
            location = to_app.headers["Location"]
            self.assertRegex(location, r"^http://127\.0\.0\.1:\d+/cb\?")
            self.assertEqual(browser.get(location, timeout=10).status_code, 200)
            out, err = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        self.assertEqual(process.returncode, 0, err)
        return json.loads(out.strip().splitlines()[-1])

    def journey(self, flags):
        store = tempfile.mkdtemp(prefix="relais-app-")
        signed_in = self.sign_in(store, flags + ["--json"])
        self.assertEqual(signed_in["acr"], "eidas1")
        self.assertEqual(os.stat(store).st_mode & 0o777, 0o700)
        for name in os.listdir(store):
            self.assertEqual(os.stat(os.path.join(store, name)).st_mode & 0o777, 0o600, name)

        status = json.loads(self.run_app(store, flags + ["--json"], "status"))
        after = subprocess.run([APP, "status", "--json", "--relay", self.stack.relay, "--store", store, *flags], capture_output=True, text=True, timeout=60)
        self.assertEqual(json.loads(after.stdout), status)
        self.assertEqual(status["state"], "signed_in")
        if "--dpop" in flags:
            self.assertEqual(status["dpop_jkt"], signed_in["dpop_jkt"])
            self.assertEqual(status["attested"], "dev")
        else:
            self.assertNotIn("dpop_jkt", status)

        userinfo = json.loads(self.run_app(store, flags, "whoami"))
        self.assertEqual(userinfo["family_name"], "DUBOIS")
        called = self.run_app(store, flags, "call", self.stack.relay + "/userinfo")
        self.assertEqual(json.loads(called)["sub"], userinfo["sub"])

        # A web session: the URL sets Relais' cookie once.
        web = self.run_app(store, flags, "web-session").strip()
        opened = requests.get(web, allow_redirects=False, timeout=10)
        self.assertEqual(opened.status_code, 303)
        self.assertTrue(opened.headers.get("Set-Cookie", "").startswith("relais-session="), opened.headers)

        # A desktop's request, approved from the terminal after its context is shown: only with a
        # DPoP-bound session (Relais' default); a plain one hears dpop_required and stays signed in.
        device = requests.post(self.stack.relay + "/device_authorization", data={"client_id": "demo-desktop", "device_name": "kiosk"}, timeout=10).json()
        if "--dpop" in flags:
            approved = self.run_app(store, flags, "approve", device["verification_uri_complete"], "--yes")
            # The service's name for the app, when and from where, then the device's own words, marked.
            self.assertIn("Relais démo (ordinateur) (demo-desktop), asked at ", approved)
            self.assertIn(" from 127.0.0.1, asks for:", approved)
            self.assertIn('the device calls itself "kiosk" (its own words, not verified)', approved)
            self.assertIn("approved", approved)
        else:
            refused = subprocess.run(self.app(store, flags, "approve", device["verification_uri_complete"], "--yes"), capture_output=True, text=True, timeout=60)
            self.assertNotEqual(refused.returncode, 0)
            self.assertIn("dpop_required", refused.stderr)
            self.assertEqual(json.loads(self.run_app(store, flags + ["--json"], "status"))["state"], "signed_in")

        self.assertIn("*", self.run_app(store, flags, "sessions"))
        self.run_app(store, flags, "refresh")

        # eidas2 needed: the error names it; a step-up at FranceConnect+ gives it.
        refused = subprocess.run(self.app(store, flags, "whoami", "--acr", "eidas2"), capture_output=True, text=True, timeout=60)
        self.assertNotEqual(refused.returncode, 0)
        self.assertIn("step_up_required", refused.stderr)
        stepped = self.sign_in(store, flags + ["--json"], extra=("--acr", "eidas2"))
        self.assertEqual(stepped["acr"], "eidas2")
        self.run_app(store, flags, "whoami", "--acr", "eidas2")

        self.assertIn("signed out", self.run_app(store, flags, "sign-out"))
        after = subprocess.run(self.app(store, flags, "whoami"), capture_output=True, text=True, timeout=60)
        self.assertNotEqual(after.returncode, 0)
        self.assertIn("not_signed_in", after.stderr)

    def test_device_sign_in_on_the_terminal(self):
        """sign-in --device: the terminal shows a user code and polls; a signed-in relais-app approves it."""
        phone = tempfile.mkdtemp(prefix="relais-app-phone-")
        self.sign_in(phone, ["--dpop", "--json"])
        desktop = tempfile.mkdtemp(prefix="relais-app-desktop-")
        process = subprocess.Popen(self.app(desktop, ["--json"], "sign-in", "--device"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            shown = process.stdout.readline()
            code = re.search(r"code ([B-Z]{4}-[B-Z]{4})", shown).group(1)
            approved = self.run_app(phone, ["--dpop"], "approve", code, "--yes")
            self.assertIn("relais-app (relais-app), asked at ", approved)
            out, err = process.communicate(timeout=40)
        finally:
            if process.poll() is None:
                process.kill()
        self.assertEqual(process.returncode, 0, err)
        self.assertEqual(json.loads(out.strip().splitlines()[-1])["acr"], "eidas1")
        self.assertEqual(json.loads(self.run_app(desktop, [], "whoami"))["family_name"], "DUBOIS")

    def test_a_plain_app(self):
        self.journey([])

    def test_dpop_and_the_development_attester(self):
        self.journey(["--dpop", "--attest", "dev"])


if __name__ == "__main__":
    unittest.main()
