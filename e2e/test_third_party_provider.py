"""A third-party OpenID Provider from PyPI (oidc-provider-mock, built on Authlib's provider side)
as Relais' upstream through the generic `oidc` preset: sign-in with PKCE and nonce, id_token
(RS256) and userinfo verified, refresh, and logout through its end-session endpoint."""
import base64
import hashlib
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
import unittest
from urllib.parse import parse_qs, urlencode, urlsplit

import requests

from stack import Stack, free_port


def provider_command():
    executable = shutil.which("oidc-provider-mock")
    return [executable] if executable else [sys.executable, "-m", "oidc_provider_mock"]


class ThirdPartyProvider(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.port = free_port()
        cls.issuer = f"http://127.0.0.1:{cls.port}"
        cls.op = subprocess.Popen(
            provider_command() + ["--port", str(cls.port), "--require-nonce", "true",
                                  "--user-claims", '{"sub": "alice", "email": "alice@example.fr", "given_name": "Alice", "family_name": "MARTIN"}'],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                if requests.get(cls.issuer + "/.well-known/openid-configuration", timeout=1).status_code == 200:
                    break
            except requests.ConnectionError:
                time.sleep(0.1)
        cls.stack = Stack(providers_extra=f"""  generic:
    preset: oidc
    issuer: {cls.issuer}
    client_id: relais-e2e
    client_secret: any-secret-the-mock-accepts
    scopes: [openid, profile, email]
""").start()

    @classmethod
    def tearDownClass(cls):
        cls.stack.stop()
        cls.op.terminate()
        cls.op.wait(timeout=10)

    def sign_in(self):
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        browser = requests.Session()
        to_provider = browser.get(self.stack.relay + "/authorize?" + urlencode({
            "response_type": "code", "client_id": "standard-client", "redirect_uri": "http://127.0.0.1:54321/cb", "state": "third-party",
            "nonce": "app-nonce", "code_challenge": challenge, "code_challenge_method": "S256", "provider": "generic",
        }), allow_redirects=False, timeout=10).headers["Location"]
        sent = parse_qs(urlsplit(to_provider).query)
        self.assertTrue(to_provider.startswith(self.issuer + "/oauth2/authorize?"), to_provider)
        self.assertEqual(sent["code_challenge_method"], ["S256"])  # PKCE towards a generic provider
        form = browser.get(to_provider, timeout=10)
        self.assertIn('name="sub"', form.text)
        to_relay = browser.post(to_provider, data={"sub": "alice"}, allow_redirects=False, timeout=10).headers["Location"]
        self.assertTrue(to_relay.startswith(self.stack.relay + "/callback?"), to_relay)
        to_app = browser.get(to_relay, allow_redirects=False, timeout=10).headers["Location"]
        answer = parse_qs(urlsplit(to_app).query)
        self.assertIn("code", answer, to_app)
        tokens = requests.post(self.stack.relay + "/token", data={
            "grant_type": "authorization_code", "code": answer["code"][0], "redirect_uri": "http://127.0.0.1:54321/cb",
            "client_id": "standard-client", "code_verifier": verifier,
        }, timeout=10)
        self.assertEqual(tokens.status_code, 200, tokens.text)
        return browser, tokens.json()

    def test_sign_in_refresh_and_logout_through_a_third_party_provider(self):
        browser, tokens = self.sign_in()
        userinfo = requests.get(self.stack.relay + "/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10).json()
        self.assertEqual(userinfo["sub"], "alice")
        self.assertEqual(userinfo["email"], "alice@example.fr")
        self.assertEqual(userinfo["family_name"], "MARTIN")
        refreshed = requests.post(self.stack.relay + "/token", data={
            "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": "standard-client"}, timeout=10)
        self.assertEqual(refreshed.status_code, 200, refreshed.text)

        # Logout: Relais → the provider's end_session endpoint → Relais → the app.
        to_provider = browser.get(self.stack.relay + "/logout?" + urlencode({
            "client_id": "mobile-app", "post_logout_redirect_uri": "com.example.app:/logged-out", "state": "bye",
            "id_token_hint": tokens["id_token"],
        }), allow_redirects=False, timeout=10)
        self.assertEqual(to_provider.status_code, 302)
        self.assertFalse(to_provider.headers["Location"].startswith(self.issuer), "the id_token was for standard-client, not mobile-app")
        to_provider = browser.get(self.stack.relay + "/logout?" + urlencode({
            "client_id": "standard-client", "post_logout_redirect_uri": "http://127.0.0.1:54321/logged-out", "state": "bye",
            "id_token_hint": tokens["id_token"],
        }), allow_redirects=False, timeout=10)
        location = to_provider.headers.get("Location", "")
        self.assertTrue(location.startswith(self.issuer + "/oauth2/end_session?"), location)
        # This provider asks the person to confirm, like many do.
        confirm = browser.get(location, timeout=10)
        action = re.search(r'<form method="post" action="([^"]+)"', confirm.text).group(1)
        hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]+)"', confirm.text))
        back = browser.post(requests.compat.urljoin(location, action), data={k: v.replace("&amp;", "&") for k, v in hidden.items()}, allow_redirects=False, timeout=10)
        relay_callback = back.headers.get("Location", "")
        self.assertTrue(relay_callback.startswith(self.stack.relay + "/logout/callback?"), (back.status_code, back.text[:300]))
        to_app = browser.get(relay_callback, allow_redirects=False, timeout=10).headers["Location"]
        self.assertEqual(to_app, "http://127.0.0.1:54321/logged-out?state=bye")
        gone = requests.get(self.stack.relay + "/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10)
        self.assertEqual(gone.status_code, 401)


if __name__ == "__main__":
    unittest.main()
