"""Sign-in on another device (RFC 8628) with a plain-HTTP device client (requests), as a TV or a
CLI would do it: it polls /token at the interval Relais gives, while a signed-in app approves."""
import time
import unittest

import requests

from stack import Stack, sign_in
from test_dpop import AppKey

GRANT = "urn:ietf:params:oauth:grant-type:device_code"


class DeviceFlow(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stack = Stack().start()

    @classmethod
    def tearDownClass(cls):
        cls.stack.stop()

    def bound_phone(self, identity="angela"):
        """The signed-in phone app, with DPoP-bound tokens: only those may approve by default."""
        key = AppKey()
        tokens = sign_in(self.stack, "standard-client", identity=identity, token_headers={"DPoP": key.proof("POST", self.stack.relay + "/token")})
        self.assertEqual(tokens["token_type"], "DPoP")
        return key, tokens

    def with_proof(self, phone, path):
        key, tokens = phone
        return {"Authorization": "DPoP " + tokens["access_token"],
                "DPoP": key.proof("POST", self.stack.relay + path, access_token=tokens["access_token"])}

    def poll(self, device_code):
        return requests.post(self.stack.relay + "/token", data={"grant_type": GRANT, "device_code": device_code, "client_id": "desktop"}, timeout=10)

    def test_a_device_client_polls_until_a_signed_in_app_approves(self):
        metadata = requests.get(self.stack.relay + "/.well-known/openid-configuration", timeout=10).json()
        self.assertEqual(metadata["device_authorization_endpoint"], self.stack.relay + "/device_authorization")
        started = requests.post(metadata["device_authorization_endpoint"], data={"client_id": "desktop", "scope": "openid profile", "device_name": "CLI"}, timeout=10).json()
        self.assertEqual(started["interval"], 5)
        interval = started["interval"]

        first = self.poll(started["device_code"])
        self.assertEqual((first.status_code, first.json()["error"]), (400, "authorization_pending"))
        self.assertEqual(self.poll(started["device_code"]).json()["error"], "slow_down")

        phone = self.bound_phone(identity="pierre")
        # A bearer token alone cannot approve: it could be a leaked one.
        bearer = requests.post(self.stack.relay + "/device/approve", data={"user_code": started["user_code"]},
                               headers={"Authorization": "Bearer " + phone[1]["access_token"]}, timeout=10)
        self.assertEqual(bearer.status_code, 401, bearer.text)
        self.assertTrue(bearer.headers["WWW-Authenticate"].startswith("DPoP "), bearer.headers)
        inspected = requests.post(self.stack.relay + "/device/inspect", data={"user_code": started["user_code"]},
                                  headers=self.with_proof(phone, "/device/inspect"), timeout=10).json()
        self.assertEqual((inspected["client_id"], inspected["device"], inspected["scope"]), ("desktop", "CLI", "openid profile"))
        self.assertEqual(inspected["device_written_by"], "requester")
        self.assertEqual(inspected["requester_address"], "127.0.0.1")
        approved = requests.post(self.stack.relay + "/device/approve", data={"user_code": started["user_code"]},
                                 headers=self.with_proof(phone, "/device/approve"), timeout=10)
        self.assertEqual(approved.status_code, 200, approved.text)

        tokens = None
        deadline = time.time() + 30
        while time.time() < deadline:
            time.sleep(interval)
            answer = self.poll(started["device_code"])
            if answer.status_code == 200:
                tokens = answer.json()
                break
            error = answer.json()["error"]
            self.assertIn(error, ("authorization_pending", "slow_down"))
            if error == "slow_down":
                interval += 5
        self.assertIsNotNone(tokens)
        userinfo = requests.get(self.stack.relay + "/userinfo", headers={"Authorization": "Bearer " + tokens["access_token"]}, timeout=10).json()
        self.assertEqual(userinfo["family_name"], "MERCIER")
        self.assertEqual(tokens["scope"], "openid profile")
        # Its own session, refreshable, tied to the phone's: the phone's logout ends it too.
        refreshed = requests.post(self.stack.relay + "/token", data={"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": "desktop"}, timeout=10)
        self.assertEqual(refreshed.status_code, 200, refreshed.text)
        logout = requests.post(self.stack.relay + "/logout", headers=self.with_proof(phone, "/logout"), timeout=10)
        self.assertEqual(logout.status_code, 204, logout.text)
        again = requests.post(self.stack.relay + "/token", data={"grant_type": "refresh_token", "refresh_token": refreshed.json()["refresh_token"], "client_id": "desktop"}, timeout=10)
        self.assertEqual((again.status_code, again.json()["error"]), (400, "invalid_grant"))
        time.sleep(interval)
        self.assertEqual(self.poll(started["device_code"]).json()["error"], "invalid_grant")

    def test_a_denied_request_and_an_app_that_may_not_approve(self):
        started = requests.post(self.stack.relay + "/device_authorization", data={"client_id": "desktop"}, timeout=10).json()
        outsider = sign_in(self.stack, "mobile-app", redirect_uri="com.example.app:/oauth2redirect")
        refused = requests.post(self.stack.relay + "/device/approve", data={"user_code": started["user_code"]},
                                headers={"Authorization": "Bearer " + outsider["access_token"]}, timeout=10)
        self.assertEqual((refused.status_code, refused.json()["error"]), (400, "unauthorized_client"))
        phone = self.bound_phone()
        denied = requests.post(self.stack.relay + "/device/approve", data={"user_code": started["user_code"], "decision": "deny"},
                               headers=self.with_proof(phone, "/device/approve"), timeout=10)
        self.assertEqual(denied.json()["approved"], False)
        self.assertEqual(self.poll(started["device_code"]).json()["error"], "access_denied")


if __name__ == "__main__":
    unittest.main()
