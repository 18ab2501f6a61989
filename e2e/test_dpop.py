"""An app with a DPoP key (RFC 9449), played by Python with joserfc: bound tokens at /token, proofs
at /userinfo and through Debian's nginx at /auth, and every refusal a careful app may run into."""
import base64
import hashlib
import json
import secrets
import time
import unittest

import requests
from joserfc import jws
from joserfc.jwk import ECKey

from stack import EchoUpstream, Nginx, Stack, sign_in


class AppKey:
    """The app instance's key: makes proofs, knows its thumbprint."""

    def __init__(self):
        self.key = ECKey.generate_key("P-256", private=True)

    @property
    def thumbprint(self):
        return self.key.thumbprint()

    def proof(self, method, url, access_token=None, jti=None, nonce=None):
        claims = {"jti": jti or secrets.token_urlsafe(16), "htm": method, "htu": url, "iat": int(time.time())}
        if access_token:
            claims["ath"] = base64.urlsafe_b64encode(hashlib.sha256(access_token.encode()).digest()).rstrip(b"=").decode()
        if nonce:
            claims["nonce"] = nonce
        header = {"alg": "ES256", "typ": "dpop+jwt", "jwk": self.key.as_dict(private=False)}
        return jws.serialize_compact(header, json.dumps(claims).encode(), self.key)


class DPoPApp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = Stack(trusted_proxies=["127.0.0.1"]).start()
        cls.token_url = cls.stack.relay + "/token"
        cls.upstream = EchoUpstream.start()
        cls.nginx = Nginx(cls.stack.relay, cls.upstream.server_address[1]).start()
        cls.port = cls.nginx.port

    @classmethod
    def tearDownClass(cls):
        cls.nginx.stop()
        cls.upstream.shutdown()
        cls.stack.stop()

    def bound_sign_in(self, key):
        tokens = sign_in(self.stack, "standard-client", token_headers={"DPoP": key.proof("POST", self.token_url)},
                         authorize_extra={"dpop_jkt": key.thumbprint})
        self.assertEqual(tokens["token_type"], "DPoP")
        return tokens

    def refresh(self, refresh_token, proof):
        headers = {"DPoP": proof} if proof else {}
        return requests.post(self.token_url, data={"grant_type": "refresh_token", "client_id": "standard-client", "refresh_token": refresh_token},
                             headers=headers, timeout=10)

    def test_bound_tokens_need_the_key_at_every_step(self):
        key = AppKey()
        tokens = self.bound_sign_in(key)
        access = tokens["access_token"]
        claims = json.loads(base64.urlsafe_b64decode(access.split(".")[1] + "=="))
        self.assertEqual(claims["cnf"], {"jkt": key.thumbprint})

        userinfo = self.stack.relay + "/userinfo"
        ok = requests.get(userinfo, headers={"Authorization": f"DPoP {access}", "DPoP": key.proof("GET", userinfo, access)}, timeout=10)
        self.assertEqual(ok.status_code, 200, ok.text)
        # A bound token used as a bearer token, a replayed proof, a proof for another URL: refused.
        bearer = requests.get(userinfo, headers={"Authorization": f"Bearer {access}"}, timeout=10)
        self.assertEqual(bearer.status_code, 401)
        self.assertTrue(bearer.headers["WWW-Authenticate"].startswith("DPoP "), bearer.headers)
        proof = key.proof("GET", userinfo, access)
        self.assertEqual(requests.get(userinfo, headers={"Authorization": f"DPoP {access}", "DPoP": proof}, timeout=10).status_code, 200)
        replay = requests.get(userinfo, headers={"Authorization": f"DPoP {access}", "DPoP": proof}, timeout=10)
        self.assertEqual(replay.status_code, 401)
        self.assertIn('error="invalid_dpop_proof"', replay.headers["WWW-Authenticate"])
        elsewhere = requests.get(userinfo, headers={"Authorization": f"DPoP {access}", "DPoP": key.proof("GET", self.stack.relay + "/other", access)}, timeout=10)
        self.assertEqual(elsewhere.status_code, 401)

        # Refresh: the same key works, another key does not, nor no proof at all.
        self.assertEqual(self.refresh(tokens["refresh_token"], AppKey().proof("POST", self.token_url)).json()["error"], "invalid_grant")
        self.assertEqual(self.refresh(tokens["refresh_token"], None).json()["error"], "invalid_grant")
        refreshed = self.refresh(tokens["refresh_token"], key.proof("POST", self.token_url))
        self.assertEqual(refreshed.status_code, 200, refreshed.text)
        self.assertEqual(refreshed.json()["token_type"], "DPoP")

    def test_a_code_bound_with_dpop_jkt_needs_that_key(self):
        key, other = AppKey(), AppKey()
        response = sign_in(self.stack, "standard-client", token_headers={"DPoP": other.proof("POST", self.token_url)},
                           authorize_extra={"dpop_jkt": key.thumbprint}, raw=True)
        self.assertEqual(response.status_code, 400)
        self.assertEqual(response.json()["error"], "invalid_grant")

    def test_nginx_forward_auth_checks_the_proof_for_the_guarded_request(self):
        key = AppKey()
        access = self.bound_sign_in(key)["access_token"]
        url = f"http://127.0.0.1:{self.port}/orders"
        ok = requests.get(url + "?page=2", headers={"Authorization": f"DPoP {access}", "DPoP": key.proof("GET", url, access)}, timeout=10)
        self.assertEqual(ok.status_code, 200, ok.text)
        self.assertEqual(ok.json()["x-relais-client"], "standard-client")
        # A proof made for Relais' own URL, not for the guarded one, and a bearer use: refused.
        wrong = requests.get(url, headers={"Authorization": f"DPoP {access}", "DPoP": key.proof("GET", self.stack.relay + "/auth", access)}, timeout=10)
        self.assertEqual(wrong.status_code, 401)
        self.assertEqual(requests.get(url, headers={"Authorization": f"Bearer {access}"}, timeout=10).status_code, 401)


if __name__ == "__main__":
    unittest.main()
