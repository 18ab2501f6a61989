"""Debian's nginx with auth_request to Relais' /auth, protecting a small upstream: the shipped
recipe (config/nginx-forward-auth.conf), run for real."""
import http.client
import os
import re
import time
import unittest

import requests

from stack import ROOT, EchoUpstream, Nginx, Stack, free_port, identity_headers, sign_in

# The stack's Relais is on plain http: its cookies are not Secure, so not __Host- (BrowserCookies).
COOKIE = "relais-session"
HEADERS = identity_headers()
# The guarded request as the gateway describes it (Relais checks DPoP proofs against the last four).
FORWARDED = ("X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Forwarded-Uri", "X-Forwarded-Method")
# A proof goes to Relais (it is the client's, and Relais checks it), never to the upstream.
FORGED_PROOF = ("DPoP", "forged-proof")


def forged_headers():
    """Every identity header forged, as a client could spell it: as named, lower and upper case,
    twice, and with underscores (which some frameworks read as the same name); and the client's
    own X-Forwarded-*. Every value starts with "forged"."""
    lines = []
    for name in HEADERS + list(FORWARDED):
        short = name.rsplit("-", 1)[1].lower()
        lines += [(name, f"forged-{short}"), (name, f"forged-{short}-again"), (name.lower(), f"forged-lower-{short}"),
                  (name.upper(), f"forged-upper-{short}"), (name.replace("-", "_"), f"forged-underscore-{short}")]
    return lines


def forwarding(lines):
    """The X-Forwarded-* and DPoP header lines one request arrived with, names lower-cased."""
    names = {name.lower() for name in FORWARDED} | {"dpop"}
    return sorted((name.lower(), value) for name, value in lines if name.lower().replace("_", "-") in names)


def as_nginx_sees_it(port, path, for_relais):
    """What the recipe forwards for a request to 127.0.0.1:port/path: nginx's own view. Relais' auth
    subrequests also get the guarded request's method, Host (with its port) and URI."""
    lines = [("x-forwarded-for", "127.0.0.1"), ("x-forwarded-proto", "http")]
    if for_relais:
        lines += [("x-forwarded-host", f"127.0.0.1:{port}"), ("x-forwarded-method", "GET"), ("x-forwarded-uri", path)]
    else:
        lines += [("x-forwarded-host", "127.0.0.1")]
    return sorted(lines)


def raw_get(port, path, headers):
    """GET with exactly these header lines (requests would merge repeated names); status, body, headers."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path)
        for name, value in headers:
            connection.putheader(name, value)
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read(), response.headers
    finally:
        connection.close()


def forged_arrivals(received):
    """The header lines, among requests an echo received, that carry a forged value."""
    return [(path, name, value) for path, lines in received for name, value in lines if "forged" in value.lower()]


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
                  "X-Relais-Scope": "everything", "X-Relais-Session": "someone-elses", "X-Relais-Attested": "ios"}
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
        self.assertNotIn("x-relais-attested", seen)
        # No forged value reached the upstream under any name.
        self.assertFalse(set(forged.values()) & set(seen.values()), seen)

    def test_every_location_replaces_or_clears_every_forged_identity_header(self):
        # The shipped recipe, location by location: each sets or clears all of Relais' identity headers.
        with open(os.path.join(ROOT, "config", "nginx-forward-auth.conf")) as handle:
            recipe = handle.read()
        locations = re.findall(r"^    location\s+([^{]+)\{(.*?)\n    \}", recipe, re.S | re.M)
        self.assertEqual(len(locations), 5, [name for name, _ in locations])
        for name, body in locations:
            for header in HEADERS + list(FORWARDED) + ["DPoP"]:
                self.assertRegex(body, rf"proxy_set_header\s+{header}\s", f"location {name.strip()} leaves {header} as the client sent it")

        # Live: all of them forged on the API and on the web pages; the upstream gets Relais' values only.
        tokens = sign_in(self.stack, "web-app", identity="pierre")
        bearer = ("Authorization", "Bearer " + tokens["access_token"])
        EchoUpstream.received.clear()
        EchoUpstream.seen.clear()
        status, body, _ = raw_get(self.port, "/orders", [bearer, FORGED_PROOF] + forged_headers())
        self.assertEqual(status, 200, body)
        # The API gets nginx's X-Forwarded-*, no X-Forwarded-Uri/-Method, and no proof.
        self.assertEqual(forwarding(EchoUpstream.received[-1][1]), as_nginx_sees_it(self.port, "/orders", for_relais=False))
        seen = EchoUpstream.seen[-1]
        self.assertEqual(seen["x-relais-client"], "web-app")
        self.assertEqual(seen["x-relais-acr"], "eidas1")
        self.assertEqual(seen["x-relais-scope"], "openid profile email")
        self.assertEqual(len(seen["x-relais-sub"]), 66)
        self.assertEqual(len(seen["x-relais-session"]), 32)
        # Relais answered X-Relais-Attested empty (no attestation): nginx then sends none at all.
        self.assertNotIn("x-relais-attested", seen)
        self.assertEqual(forged_arrivals(EchoUpstream.received), [])
        # Each identity header arrived once, under its own name only (no underscore twin).
        names = [name.lower() for name, _ in EchoUpstream.received[-1][1] if name.lower().replace("_", "-").startswith("x-relais-")]
        self.assertEqual(sorted(names), sorted(set(names)), names)
        self.assertTrue(all("_" not in name for name in names), names)

        # A Bearer token alone opens no web session: the session's refresh token comes beside it.
        issued = requests.post(self.stack.relay + "/session_code", headers=dict([bearer]), data={"refresh_token": tokens["refresh_token"]}, timeout=10).json()
        status, _, opened = raw_get(self.port, "/session?code=" + issued["session_code"], forged_headers())
        self.assertEqual(status, 303)
        cookie = ("Cookie", opened["Set-Cookie"].split(";")[0])
        EchoUpstream.received.clear()
        EchoUpstream.seen.clear()
        status, body, _ = raw_get(self.port, "/web/documents", [cookie, FORGED_PROOF] + forged_headers())
        self.assertEqual(status, 200, body)
        self.assertEqual(forwarding(EchoUpstream.received[-1][1]), as_nginx_sees_it(self.port, "/web/documents", for_relais=False))
        seen = EchoUpstream.seen[-1]
        self.assertEqual(seen["x-relais-client"], "web-app")
        self.assertEqual(seen["x-relais-scope"], "openid profile email")
        self.assertEqual(len(seen["x-relais-session"]), 32)
        self.assertNotIn("x-relais-attested", seen)
        self.assertEqual(forged_arrivals(EchoUpstream.received), [])

        # The pages get the browser's other cookies, never Relais' own (a credential for
        # /auth?via=cookie), wherever it stands among them.
        relais_cookie = cookie[1]
        signin = "relais-signin=" + "s" * 43
        # The name Relais gives it over https goes too.
        https_signin = "__Host-relais-signin=" + "s" * 43
        for sent, expected in (
            ("theme=dark; " + relais_cookie + "; lang=fr", "theme=dark; lang=fr"),
            (relais_cookie + "; lang=fr", "lang=fr"),
            ("theme=dark;" + relais_cookie, "theme=dark"),
            (signin + "; theme=dark; " + relais_cookie, "theme=dark"),
            (relais_cookie, None),
            ("a=1; " + https_signin + "; " + relais_cookie, "a=1"),
            ("relais-sessions=kept; " + relais_cookie, "relais-sessions=kept"),
        ):
            status, body, _ = raw_get(self.port, "/web/documents", [("Cookie", sent)])
            self.assertEqual(status, 200, body)
            cookies = [value for name, value in EchoUpstream.received[-1][1] if name.lower() == "cookie"]
            self.assertEqual(cookies, [expected] if expected else [], sent)

        # Refused requests reach nothing, forged headers or not.
        for path, credentials in (("/orders", []), ("/web/documents", []), ("/orders", [cookie]), ("/web/documents", [bearer])):
            EchoUpstream.received.clear()
            status, _, _ = raw_get(self.port, path, credentials + forged_headers())
            self.assertEqual(status, 401, path)
            self.assertEqual(EchoUpstream.received, [], path)

    def test_what_relais_receives_through_the_recipe_carries_no_forged_identity(self):
        # The same recipe with an echo where Relais would be: the auth subrequests of both guarded
        # locations and /session reach "Relais" without the client's identity headers (the echo
        # also says yes to every check, so the guarded requests go on to the upstream: without them too).
        echo = EchoUpstream.start()
        gateway = Nginx(f"http://127.0.0.1:{echo.server_address[1]}", self.upstream.server_address[1]).start()
        try:
            EchoUpstream.received.clear()
            for path in ("/orders", "/web/documents", "/session?code=x"):
                status, body, _ = raw_get(gateway.port, path, [("Authorization", "Bearer x"), ("Cookie", "a=b"), FORGED_PROOF] + forged_headers())
                self.assertEqual(status, 200, f"{path}: {body}")
            paths = [path for path, _ in EchoUpstream.received]
            self.assertEqual(sorted(paths), sorted(["/auth?session=1", "/orders", "/auth?via=cookie", "/web/documents", "/session?code=x"]), paths)
            # Only the token check gets the client's proof: Relais checks it against nginx's description.
            self.assertEqual([(path, name.lower(), value) for path, name, value in forged_arrivals(EchoUpstream.received)],
                             [("/auth?session=1", "dpop", FORGED_PROOF[1])])
            arrived = dict(EchoUpstream.received)
            self.assertEqual(forwarding(arrived["/auth?session=1"]),
                             sorted(as_nginx_sees_it(gateway.port, "/orders", for_relais=True) + [("dpop", FORGED_PROOF[1])]))
            self.assertEqual(forwarding(arrived["/auth?via=cookie"]), as_nginx_sees_it(gateway.port, "/web/documents", for_relais=True))
            self.assertEqual(forwarding(arrived["/session?code=x"]), as_nginx_sees_it(gateway.port, "/session?code=x", for_relais=False))
            for path in ("/orders", "/web/documents"):
                self.assertEqual(forwarding(arrived[path]), as_nginx_sees_it(gateway.port, path, for_relais=False), path)
        finally:
            gateway.stop()
            echo.shutdown()

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
        issued = requests.post(self.stack.relay + "/session_code", headers=bearer, data={"refresh_token": tokens["refresh_token"]}, timeout=10).json()
        self.assertEqual(issued["target"], self.web_target)
        gateway = f"http://127.0.0.1:{self.port}"
        # The webview opens the code on the gateway's host (nginx passes /session to Relais).
        opened = requests.get(gateway + "/session", params={"code": issued["session_code"]}, allow_redirects=False, timeout=10)
        self.assertEqual(opened.status_code, 303, opened.text)
        self.assertEqual(opened.headers["Location"], self.web_target)
        set_cookie = opened.headers["Set-Cookie"]
        for attribute in ("Path=/", "HttpOnly", "SameSite=Lax"):
            self.assertIn(attribute, set_cookie)
        self.assertNotIn("Secure", set_cookie)  # plain http: Secure (and __Host-) only over https
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
