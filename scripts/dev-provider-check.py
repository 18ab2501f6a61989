#!/usr/bin/env python3
"""Walks a sign-in at the development provider with requests and checks every answer with joserfc:
software nobody here wrote, so the provider is not only verified by Relais' own code.

Usage: dev-provider-check.py ISSUER CLIENT_ID CLIENT_SECRET REDIRECT_URI [PRIVATE_KEY_PEM RSA|EC]
With a private key the provider is checked in FranceConnect+ mode: eidas2, and the id_token and
userinfo are decrypted with that key before their signatures are verified.
Prints one line per check ("ok ..." or "FAIL ...") and exits non-zero if any check fails.
Run by the Swift test DevProviderCrossCheckTests; `make test` installs requests and joserfc.
"""
import base64
import html
import json
import re
import secrets
import sys
import time
import warnings
from urllib.parse import parse_qs, urlsplit

import requests
from joserfc.registry import HeaderParameter
from joserfc import jwe, jwk, jwt
from joserfc.jwt import JWTClaimsRegistry

warnings.simplefilter("ignore")
issuer, client_id, client_secret, redirect_uri = sys.argv[1:5]
decryption_key = jwk.import_key(open(sys.argv[5], "rb").read(), sys.argv[6]) if len(sys.argv) > 6 else None
acr = "eidas2" if decryption_key else "eidas1"
failures = 0


def signed(token, name):
    """The signed token inside a FranceConnect+ JWE (or the token itself)."""
    if decryption_key is None:
        return token
    # FranceConnect+ replicates iss and aud in the JWE protected header (RFC 7519 §5.3).
    replicated = {"iss": HeaderParameter("Issuer", "str"), "aud": HeaderParameter("Audience", "str")}
    registry = jwe.JWERegistry(header_registry=replicated, algorithms=["RSA-OAEP", "RSA-OAEP-256", "ECDH-ES", "A256GCM"])
    decrypted = jwe.decrypt_compact(token, decryption_key, registry=registry)
    check(name + " is a nested JWT (cty)", decrypted.protected.get("cty") == "JWT" and decrypted.protected.get("enc") == "A256GCM")
    check(name + " JWE header names iss and aud", decrypted.protected.get("iss") == issuer and decrypted.protected.get("aud") == client_id,
          decrypted.protected)
    inner = json.loads(base64.urlsafe_b64decode(decrypted.plaintext.decode().split(".")[0] + "=="))
    check(name + " JWS header is exactly alg and kid", sorted(inner) == ["alg", "kid"], inner)
    return decrypted.plaintext.decode()


def check(name, condition, detail=""):
    global failures
    if condition:
        print("ok", name)
    else:
        failures += 1
        print("FAIL", name, detail)


session = requests.Session()
discovery = session.get(issuer + "/.well-known/openid-configuration", timeout=10)
config = discovery.json()
check("discovery is JSON", discovery.headers["Content-Type"].startswith("application/json"))
check("discovery issuer", config["issuer"] == issuer, config.get("issuer"))
for field in ("authorization_endpoint", "token_endpoint", "userinfo_endpoint", "jwks_uri", "end_session_endpoint"):
    check("discovery " + field, config.get(field, "").startswith(issuer + "/"), config.get(field))
check("discovery acr values", config.get("acr_values_supported") == (["eidas2", "eidas3"] if decryption_key else ["eidas1"]))
check("discovery iss parameter", config.get("authorization_response_iss_parameter_supported") is True)
keys = jwk.KeySet.import_key_set(session.get(config["jwks_uri"], timeout=10).json())
check("jwks holds public keys", len(keys.keys) >= 1 and all(not key.is_private for key in keys.keys))

nonce, state = secrets.token_hex(32), secrets.token_hex(16)
authorize = session.get(config["authorization_endpoint"], allow_redirects=False, timeout=10, params={
    "response_type": "code", "client_id": client_id, "redirect_uri": redirect_uri, "scope": "openid identite_pivot email",
    "state": state, "nonce": nonce, "acr_values": acr,
})
check("authorize redirects to the login page", authorize.status_code == 303, authorize.status_code)
page = session.get(authorize.headers["Location"], timeout=10)
action = html.unescape(re.search(r'<form method="post" action="([^"]+)"', page.text).group(1))
check("login page lists identities", 'id="identity-angela"' in page.text)
login = session.post(requests.compat.urljoin(page.url, action), data={"identity": "angela"}, allow_redirects=False, timeout=10)
callback = urlsplit(login.headers["Location"])
query = parse_qs(callback.query)
check("callback to the redirect URI", login.headers["Location"].startswith(redirect_uri + "?"))
check("callback state", query["state"] == [state])
check("callback iss (RFC 9207)", query["iss"] == [issuer])

token = session.post(config["token_endpoint"], timeout=10, data={
    "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": redirect_uri,
    "client_id": client_id, "client_secret": client_secret,
})
body = token.json()
check("token response", token.status_code == 200 and body.get("token_type") == "Bearer" and body.get("expires_in") == 60, token.text)
check("no refresh token", "refresh_token" not in body)

id_token = jwt.decode(signed(body["id_token"], "id_token"), keys, algorithms=["ES256", "RS256"])
registry = JWTClaimsRegistry(now=int(time.time()), leeway=30, iss={"essential": True, "value": issuer},
                             aud={"essential": True, "value": client_id}, nonce={"essential": True, "value": nonce},
                             acr={"essential": True, "value": acr}, exp={"essential": True}, sub={"essential": True})
try:
    registry.validate(id_token.claims)
    check("id_token claims", True)
except Exception as error:  # noqa: BLE001
    check("id_token claims", False, repr(error))
check("id_token kid", id_token.header.get("kid") in [key.kid for key in keys.keys])
check("id_token JWS header is exactly alg and kid (FranceConnect's, no typ)", sorted(id_token.header) == ["alg", "kid"], id_token.header)

userinfo = session.get(config["userinfo_endpoint"], headers={"Authorization": "Bearer " + body["access_token"]}, timeout=10)
check("userinfo is a JWT", userinfo.headers["Content-Type"] == "application/jwt", userinfo.headers.get("Content-Type"))
claims = jwt.decode(signed(userinfo.text, "userinfo"), keys, algorithms=["ES256", "RS256"]).claims
check("userinfo sub equals id_token sub", claims.get("sub") == id_token.claims["sub"])
check("userinfo iss and aud", claims.get("iss") == issuer and claims.get("aud") == client_id)
check("userinfo identity pivot", claims.get("family_name") == "DUBOIS" and claims.get("birthplace") == "75107" and claims.get("email"))
check("userinfo scopes respected", "preferred_username" not in claims)

reused = session.post(config["token_endpoint"], timeout=10, data={
    "grant_type": "authorization_code", "code": query["code"][0], "redirect_uri": redirect_uri,
    "client_id": client_id, "client_secret": client_secret,
})
check("a code works once", reused.status_code == 400 and reused.json().get("error") == "invalid_grant", reused.text)
sys.exit(1 if failures else 0)
