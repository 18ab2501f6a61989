"""Authlib (PyPI), a standard OAuth 2.0 / OpenID Connect client, plays the app with nothing but
Relais' RFC 8414 metadata: authorization code + PKCE, token, userinfo, refresh, revocation."""
import re
import unittest

import requests
from authlib.common.security import generate_token
from authlib.integrations.requests_client import OAuth2Session
from joserfc import jwk, jwt
from joserfc.jwt import JWTClaimsRegistry

from stack import Stack


class StandardClient(unittest.TestCase):
    def test_authlib_runs_the_whole_contract_from_metadata(self):
        with Stack() as stack:
            metadata = requests.get(stack.relay + "/.well-known/oauth-authorization-server", timeout=10).json()
            client = OAuth2Session(
                client_id="standard-client", redirect_uri="http://127.0.0.1:54321/cb", scope="openid profile email",
                code_challenge_method="S256", token_endpoint_auth_method="none",
            )
            verifier, nonce = generate_token(48), generate_token(20)
            url, state = client.create_authorization_url(metadata["authorization_endpoint"], code_verifier=verifier, nonce=nonce)

            # The person, in the browser: Relais → provider login → identity → Relais → the app's redirect.
            browser = requests.Session()
            login_page = browser.get(url, timeout=10)  # follows Relais and the provider to the login page
            action = re.search(r'action="([^"]+)"', login_page.text).group(1)
            to_relay = browser.post(requests.compat.urljoin(login_page.url, action), data={"identity": "pierre"}, allow_redirects=False, timeout=10)
            to_app = browser.get(to_relay.headers["Location"], allow_redirects=False, timeout=10)
            redirect = to_app.headers["Location"]
            self.assertTrue(redirect.startswith("http://127.0.0.1:54321/cb?"), redirect)

            token = client.fetch_token(metadata["token_endpoint"], authorization_response=redirect, code_verifier=verifier)
            self.assertEqual(token["token_type"], "Bearer")
            keys = jwk.KeySet.import_key_set(requests.get(metadata["jwks_uri"], timeout=10).json())
            id_token = jwt.decode(token["id_token"], keys, algorithms=["ES256", "RS256"]).claims
            JWTClaimsRegistry(
                iss={"essential": True, "value": metadata["issuer"]}, aud={"essential": True, "value": "standard-client"},
                nonce={"essential": True, "value": nonce}, exp={"essential": True},
            ).validate(id_token)

            userinfo = client.get(metadata["userinfo_endpoint"]).json()
            self.assertEqual(userinfo["family_name"], "MERCIER")
            self.assertEqual(userinfo["sub"], id_token["sub"])

            refreshed = client.refresh_token(metadata["token_endpoint"], refresh_token=token["refresh_token"])
            self.assertNotEqual(refreshed["refresh_token"], token["refresh_token"])
            self.assertEqual(client.get(metadata["userinfo_endpoint"]).status_code, 200)

            revoked = client.revoke_token(metadata["revocation_endpoint"], token=refreshed["refresh_token"], token_type_hint="refresh_token")
            self.assertEqual(revoked.status_code, 200)
            after = requests.post(metadata["token_endpoint"], data={
                "grant_type": "refresh_token", "refresh_token": refreshed["refresh_token"], "client_id": "standard-client",
            }, timeout=10)
            self.assertEqual(after.json()["error"], "invalid_grant")
            self.assertEqual(client.get(metadata["userinfo_endpoint"]).status_code, 401)


if __name__ == "__main__":
    unittest.main()
