#!/usr/bin/env python3
"""Generates the cross-implementation JWS vectors in Tests/RelaisJOSETests/Vectors/jws.json.

Run once (the output is committed): python3 scripts/generate-jose-vectors.py
Needs joserfc (PyPI). Each vector is a key pair and a token that joserfc signed with it, so the
Swift tests check RelaisJOSE against an implementation nobody here wrote.
"""
import datetime
import json
import pathlib

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import NameOID
from joserfc import jwk, jws


def pem_forms(alg, key):
    """PEM encodings of the same key: PKCS#8, the traditional form, SubjectPublicKeyInfo, a certificate."""
    if alg.startswith("HS"):
        return None
    raw = key.raw_value
    private = raw if hasattr(raw, "private_bytes") else None
    public = private.public_key() if private else raw
    forms = {
        "pkcs8": private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()).decode(),
        "spki": public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode(),
    }
    if alg[:2] in ("RS", "PS", "ES"):
        forms["traditional"] = private.private_bytes(serialization.Encoding.PEM,
                                                     serialization.PrivateFormat.TraditionalOpenSSL,
                                                     serialization.NoEncryption()).decode()
    if alg == "ES256":
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "relais-test")])
        now = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
        certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(public)
                       .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=3650))
                       .sign(private, hashes.SHA256()))
        forms["certificate"] = certificate.public_bytes(serialization.Encoding.PEM).decode()
    return forms

ALGORITHMS = {
    "RS256": lambda: jwk.RSAKey.generate_key(2048),
    "RS384": lambda: jwk.RSAKey.generate_key(2048),
    "RS512": lambda: jwk.RSAKey.generate_key(2048),
    "PS256": lambda: jwk.RSAKey.generate_key(2048),
    "PS384": lambda: jwk.RSAKey.generate_key(3072),
    "PS512": lambda: jwk.RSAKey.generate_key(4096),
    "ES256": lambda: jwk.ECKey.generate_key("P-256"),
    "ES384": lambda: jwk.ECKey.generate_key("P-384"),
    "ES512": lambda: jwk.ECKey.generate_key("P-521"),
    "EdDSA": lambda: jwk.OKPKey.generate_key("Ed25519"),
    "HS256": lambda: jwk.OctKey.generate_key(256),
    "HS384": lambda: jwk.OctKey.generate_key(384),
    "HS512": lambda: jwk.OctKey.generate_key(512),
}

vectors = []
registry = jws.JWSRegistry(algorithms=list(ALGORITHMS))
for alg, make in ALGORITHMS.items():
    key = make()
    kid = f"joserfc-{alg.lower()}"
    private = dict(key.as_dict(private=True), kid=kid)
    public = dict(key.as_dict(private=False), kid=kid) if alg[:2] != "HS" else None
    payload = json.dumps({"iss": "https://idp.example/api/v2", "sub": "abc", "alg_under_test": alg, "nonce": "n" * 32},
                         separators=(",", ":"))
    token = jws.serialize_compact({"alg": alg, "kid": kid, "typ": "JWT"}, payload, key, registry=registry)
    vectors.append({"alg": alg, "private_jwk": private, "public_jwk": public, "payload": payload, "token": token,
                    "thumbprint": key.thumbprint(), "pem": pem_forms(alg, key)})

out = pathlib.Path(__file__).resolve().parent.parent / "Tests/RelaisJOSETests/Vectors/jws.json"
out.write_text(json.dumps({"generator": "joserfc", "vectors": vectors}, indent=1) + "\n")
print(f"wrote {len(vectors)} vectors to {out}")
