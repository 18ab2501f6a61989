"""An app that proves it is the genuine app (attestation-based client authentication), played by
Python with joserfc: a challenge, the development attester, the Client Attestation JWT and a PoP
at /token (with DPoP by the same instance key), refreshes by that instance only, and gateways
that admit only attested instances (/auth?attested=1, X-Relais-Attested through nginx)."""
import base64
import json
import secrets
import time
import unittest

import requests
from joserfc import jws
from joserfc.jwk import ECKey

from stack import EchoUpstream, Nginx, Stack, sign_in
from test_dpop import AppKey

ATTESTED_APP = """
  attested-app:
    redirect_uris: ["http://127.0.0.1/cb"]
    scopes: [openid, profile, email]
    attestation: required
"""


def claims(token):
    return json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))


class Instance(AppKey):
    """An app instance: one key for the attestation PoPs and the DPoP proofs."""

    def pop(self, relay, client_id="attested-app", jti=None):
        header = {"alg": "ES256", "typ": "oauth-client-attestation-pop+jwt"}
        body = {"iss": client_id, "aud": relay, "jti": jti or secrets.token_urlsafe(16), "iat": int(time.time())}
        return jws.serialize_compact(header, json.dumps(body).encode(), self.key)


class AttestedApp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = Stack(relay_extra=ATTESTED_APP, trusted_proxies=["127.0.0.1"]).start()
        cls.relay = cls.stack.relay
        cls.token_url = cls.relay + "/token"
        cls.upstream = EchoUpstream.start()
        cls.nginx = Nginx(cls.relay, cls.upstream.server_address[1]).start()

    @classmethod
    def tearDownClass(cls):
        cls.nginx.stop()
        cls.upstream.shutdown()
        cls.stack.stop()

    def attest(self, instance):
        challenge = requests.post(self.relay + "/attest/challenge", data={"client_id": "attested-app"}, timeout=10).json()["attestation_challenge"]
        response = requests.post(self.relay + "/attest/dev", data={
            "client_id": "attested-app", "challenge": challenge, "jwk": json.dumps(instance.key.as_dict(private=False)),
        }, timeout=10)
        self.assertEqual(response.status_code, 200, response.text)
        return response.json()["client_attestation"]

    def headers(self, instance, attestation, pop=None):
        return {
            "OAuth-Client-Attestation": attestation, "OAuth-Client-Attestation-PoP": pop or instance.pop(self.relay),
            "DPoP": instance.proof("POST", self.token_url),
        }

    def refresh(self, token, headers):
        return requests.post(self.token_url, data={"grant_type": "refresh_token", "client_id": "attested-app", "refresh_token": token},
                             headers=headers, timeout=10)

    def test_the_metadata_advertises_the_method_and_the_challenge_endpoint(self):
        metadata = requests.get(self.relay + "/.well-known/oauth-authorization-server", timeout=10).json()
        self.assertIn("attest_jwt_client_auth", metadata["token_endpoint_auth_methods_supported"])
        self.assertEqual(metadata["challenge_endpoint"], self.relay + "/attest/challenge")

    def test_an_attested_instance_signs_in_and_refreshes_alone(self):
        instance = Instance()
        attestation = self.attest(instance)
        self.assertEqual(claims(attestation)["cnf"]["jwk"]["x"], instance.key.as_dict(private=False)["x"])

        # Without the attestation a required app gets nothing.
        bare = sign_in(self.stack, "attested-app", token_headers={"DPoP": instance.proof("POST", self.token_url)}, raw=True)
        self.assertEqual(bare.status_code, 400)
        self.assertEqual(bare.json()["error"], "invalid_client_attestation")

        tokens = sign_in(self.stack, "attested-app", token_headers=self.headers(instance, attestation))
        self.assertEqual(tokens["token_type"], "DPoP")
        access = claims(tokens["access_token"])
        self.assertEqual(access["attested"], "dev")
        self.assertEqual(access["cnf"], {"jkt": instance.thumbprint})

        # Refresh: the same instance with a fresh PoP; not without the attestation, not another
        # instance, not a replayed PoP.
        no_attestation = self.refresh(tokens["refresh_token"], {"DPoP": instance.proof("POST", self.token_url)})
        self.assertEqual(no_attestation.json()["error"], "invalid_client_attestation")
        other = Instance()
        other_headers = self.headers(other, self.attest(other))
        other_headers["DPoP"] = instance.proof("POST", self.token_url)
        self.assertEqual(self.refresh(tokens["refresh_token"], other_headers).json()["error"], "invalid_client_attestation")
        pop = instance.pop(self.relay)
        refreshed = self.refresh(tokens["refresh_token"], self.headers(instance, attestation, pop))
        self.assertEqual(refreshed.status_code, 200, refreshed.text)
        replayed = self.refresh(refreshed.json()["refresh_token"], self.headers(instance, attestation, pop))
        self.assertEqual(replayed.json()["error"], "invalid_client_attestation")
        self.assertIn("jti", replayed.json()["error_description"])

        # Through nginx the API learns how the instance was attested.
        url = f"http://127.0.0.1:{self.nginx.port}/orders"
        token = refreshed.json()["access_token"]
        ok = requests.get(url, headers={"Authorization": f"DPoP {token}", "DPoP": instance.proof("GET", url, token)}, timeout=10)
        self.assertEqual(ok.status_code, 200, ok.text)
        self.assertEqual(ok.json()["x-relais-attested"], "dev")

        # /auth?attested=1 admits it, described by a trusted gateway.
        guarded = {"X-Forwarded-Method": "GET", "X-Forwarded-Proto": "https", "X-Forwarded-Host": "api.example.fr", "X-Forwarded-Uri": "/orders"}
        auth = requests.get(self.relay + "/auth?attested=1", headers={
            "Authorization": f"DPoP {token}", "DPoP": instance.proof("GET", "https://api.example.fr/orders", token), **guarded,
        }, timeout=10)
        self.assertEqual(auth.status_code, 200, auth.text)
        self.assertEqual(auth.headers["X-Relais-Attested"], "dev")

    def test_auth_attested_refuses_a_token_from_an_unattested_instance(self):
        tokens = sign_in(self.stack, "standard-client")
        refused = requests.get(self.relay + "/auth?attested=1", headers={"Authorization": f"Bearer {tokens['access_token']}"}, timeout=10)
        self.assertEqual(refused.status_code, 403)
        self.assertEqual(refused.json()["error"], "attestation_required")
        self.assertIn('error="attestation_required"', refused.headers["WWW-Authenticate"])
        plain = requests.get(self.relay + "/auth", headers={"Authorization": f"Bearer {tokens['access_token']}"}, timeout=10)
        self.assertEqual(plain.status_code, 200)
        self.assertEqual(plain.headers["X-Relais-Attested"], "")

    def test_a_challenge_serves_once(self):
        instance = Instance()
        challenge = requests.post(self.relay + "/attest/challenge", data={"client_id": "attested-app"}, timeout=10).json()["attestation_challenge"]
        jwk = json.dumps(instance.key.as_dict(private=False))
        first = requests.post(self.relay + "/attest/dev", data={"client_id": "attested-app", "challenge": challenge, "jwk": jwk}, timeout=10)
        self.assertEqual(first.status_code, 200)
        second = requests.post(self.relay + "/attest/dev", data={"client_id": "attested-app", "challenge": challenge, "jwk": jwk}, timeout=10)
        self.assertEqual(second.status_code, 400)
        self.assertEqual(second.json()["error"], "attestation_refused")
        self.assertTrue(second.json()["error_description"].startswith("attestation_challenge"))


if __name__ == "__main__":
    unittest.main()
