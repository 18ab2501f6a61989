"""Debian's nginx with auth_request to Relais' /auth, protecting a small upstream: the shipped
recipe (config/nginx-forward-auth.conf), run for real."""
import time
import unittest

import requests

from stack import EchoUpstream, Nginx, Stack, free_port, sign_in

COOKIE = "__Host-relais-session"


class NginxForwardAuth(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        port = free_port()
        cls.web_target = f"http://127.0.0.1:{port}/web/documents"
        cls.stack = Stack(apps_extra=f"""  web-app:
    redirect_uris: ["http://127.0.0.1/cb"]
    web_targets: [{cls.web_target}]
""").start()
        cls.upstream = EchoUpstream.start()
        cls.nginx = Nginx(cls.stack.relay, cls.upstream.server_address[1], port=port).start()
        cls.port = cls.nginx.port

    @classmethod
    def tearDownClass(cls):
        cls.nginx.stop()
        cls.upstream.shutdown()
        cls.stack.stop()

    def get(self, token=None, headers=None):
        EchoUpstream.seen.clear()
        all_headers = dict(headers or {})
        if token:
            all_headers["Authorization"] = "Bearer " + token
        return requests.get(f"http://127.0.0.1:{self.port}/orders", headers=all_headers, timeout=10)

    def test_a_valid_token_reaches_the_upstream_with_the_identity(self):
        tokens = sign_in(self.stack, "standard-client", identity="pierre")
        forged = {"X-Relais-Sub": "forged-admin", "x-relais-client": "admin-console", "X-Relais-Acr": "eidas3",
                  "X-Relais-Scope": "everything", "X-Relais-Session": "someone-elses"}
        response = self.get(tokens["access_token"], forged)
        self.assertEqual(response.status_code, 200, response.text)
        seen = response.json()
        self.assertEqual(seen["x-relais-client"], "standard-client")
        self.assertEqual(seen["x-relais-acr"], "eidas1")
        self.assertEqual(seen["x-relais-scope"], "openid profile email")
        self.assertNotEqual(seen["x-relais-sub"], "forged-admin")
        self.assertEqual(len(seen["x-relais-sub"]), 66)
        self.assertNotEqual(seen["x-relais-session"], "someone-elses")
        self.assertEqual(len(seen["x-relais-session"]), 32)
        self.assertNotIn("authorization", seen)
        # No forged value reached the upstream under any name.
        self.assertFalse(set(forged.values()) & set(seen.values()), seen)

    def test_writes_are_guarded_like_reads(self):
        # Writes through nginx are checked like reads (its auth_request subrequest asks Relais with GET
        # whatever the client's method; Envoy keeps the method, which the Swift tests cover).
        tokens = sign_in(self.stack, "standard-client", identity="pierre")
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            EchoUpstream.seen.clear()
            allowed = requests.request(method, f"http://127.0.0.1:{self.port}/orders/42", data=b'{"n": 1}',
                                       headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10)
            self.assertEqual(allowed.status_code, 200, f"{method}: {allowed.text}")
            self.assertEqual(allowed.json()["x-relais-client"], "standard-client")
            refused = requests.request(method, f"http://127.0.0.1:{self.port}/orders/42", data=b'{"n": 1}', timeout=10)
            self.assertEqual(refused.status_code, 401, method)
            self.assertEqual(len(EchoUpstream.seen), 1, method)

    def test_missing_tampered_expired_and_revoked_tokens_never_reach_the_upstream(self):
        missing = self.get()
        self.assertEqual(missing.status_code, 401)
        self.assertEqual(missing.headers.get("WWW-Authenticate"), 'Bearer realm="relais"')
        self.assertEqual(EchoUpstream.seen, [])

        tokens = sign_in(self.stack, "standard-client")
        tampered = self.get(tokens["access_token"][:-4] + "AAAA")
        self.assertEqual(tampered.status_code, 401)
        self.assertIn('error="invalid_token"', tampered.headers.get("WWW-Authenticate", ""))
        self.assertEqual(EchoUpstream.seen, [])

        self.assertEqual(self.get(tokens["access_token"]).status_code, 200)
        requests.post(self.stack.relay + "/revoke", data={"token": tokens["refresh_token"], "client_id": "standard-client"}, timeout=10)
        revoked = self.get(tokens["access_token"])
        self.assertEqual(revoked.status_code, 401)
        self.assertEqual(EchoUpstream.seen, [])

        short = sign_in(self.stack, "short-lived")
        self.assertEqual(self.get(short["access_token"]).status_code, 200)
        time.sleep(3.5)  # 1 s lifetime plus Relais' 2 s leeway
        expired = self.get(short["access_token"])
        self.assertEqual(expired.status_code, 401)
        self.assertEqual(EchoUpstream.seen, [])

    def test_a_session_code_opens_the_web_pages_and_only_them(self):
        tokens = sign_in(self.stack, "web-app", identity="pierre")
        bearer = {"Authorization": "Bearer " + tokens["access_token"]}
        issued = requests.post(self.stack.relay + "/session_code", headers=bearer, timeout=10).json()
        self.assertEqual(issued["target"], self.web_target)
        gateway = f"http://127.0.0.1:{self.port}"
        # The webview opens the code on the gateway's host (nginx passes /session to Relais).
        opened = requests.get(gateway + "/session", params={"code": issued["session_code"]}, allow_redirects=False, timeout=10)
        self.assertEqual(opened.status_code, 303, opened.text)
        self.assertEqual(opened.headers["Location"], self.web_target)
        set_cookie = opened.headers["Set-Cookie"]
        for attribute in ("Path=/", "Secure", "HttpOnly", "SameSite=Lax"):
            self.assertIn(attribute, set_cookie)
        cookie = {"Cookie": set_cookie.split(";")[0]}

        EchoUpstream.seen.clear()
        page = requests.get(self.web_target, headers=cookie, timeout=10)
        self.assertEqual(page.status_code, 200, page.text)
        self.assertEqual(page.json()["x-relais-client"], "web-app")
        self.assertEqual(page.json()["x-relais-acr"], "eidas1")
        self.assertEqual(len(page.json()["x-relais-sub"]), 66)
        # The pages take the cookie, not tokens; the APIs take tokens, not the cookie.
        self.assertEqual(requests.get(self.web_target, headers=bearer, timeout=10).status_code, 401)
        self.assertEqual(requests.get(gateway + "/orders", headers=cookie, timeout=10).status_code, 401)
        self.assertEqual(requests.get(gateway + "/orders", headers=bearer, timeout=10).status_code, 200)
        # The code was for one webview only.
        replay = requests.get(gateway + "/session", params={"code": issued["session_code"]}, allow_redirects=False, timeout=10)
        self.assertEqual(replay.status_code, 400)
        self.assertNotIn("Location", replay.headers)
        # Signing out in the app ends the web session too.
        self.assertEqual(requests.post(self.stack.relay + "/logout", headers=bearer, timeout=10).status_code, 204)
        EchoUpstream.seen.clear()
        self.assertEqual(requests.get(self.web_target, headers=cookie, timeout=10).status_code, 401)
        self.assertEqual(EchoUpstream.seen, [])


if __name__ == "__main__":
    unittest.main()
