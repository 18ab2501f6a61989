#!/usr/bin/env python3
"""Generates the cross-implementation JWE vectors in Tests/RelaisJOSETests/Vectors/jwe.json.

Run once (the output is committed): python3 scripts/generate-jwe-vectors.py
Needs joserfc (PyPI). Every key-management algorithm Relais supports is paired with every content
encryption algorithm, and two nested tokens are shaped like FranceConnect+'s (an ES256 JWT,
then encrypted, cty JWT).
"""
import json
import pathlib
import warnings

from joserfc import jwe, jwk, jws

warnings.simplefilter("ignore")
KEY_ALGS = ["RSA-OAEP", "RSA-OAEP-256", "ECDH-ES", "ECDH-ES+A128KW", "ECDH-ES+A256KW", "A128KW", "A256KW", "dir"]
ENCS = {"A128GCM": 128, "A256GCM": 256, "A128CBC-HS256": 256, "A256CBC-HS512": 512}
registry = jwe.JWERegistry(algorithms=KEY_ALGS + list(ENCS))

rsa = jwk.RSAKey.generate_key(2048)
ec = jwk.ECKey.generate_key("P-256")
kw = {"A128KW": jwk.OctKey.generate_key(128), "A256KW": jwk.OctKey.generate_key(256)}
dir_keys = {enc: jwk.OctKey.generate_key(bits) for enc, bits in ENCS.items()}


def key_for(alg, enc):
    if alg.startswith("RSA"):
        return rsa, "rsa-enc"
    if alg.startswith("ECDH"):
        return ec, "ec-enc"
    if alg == "dir":
        return dir_keys[enc], f"dir-{enc.lower()}"
    return kw[alg], alg.lower()


vectors = []
for alg in KEY_ALGS:
    for enc in ENCS:
        key, kid = key_for(alg, enc)
        plaintext = json.dumps({"sub": "abc", "alg": alg, "enc": enc, "given_name": "Zoé"}, ensure_ascii=False)
        token = jwe.encrypt_compact({"alg": alg, "enc": enc, "kid": kid}, plaintext.encode(), key, registry=registry)
        vectors.append({"alg": alg, "enc": enc, "private_jwk": dict(key.as_dict(private=True), kid=kid),
                        "plaintext": plaintext, "token": token})

signer = jwk.ECKey.generate_key("P-256")
nested = []
for alg in ["RSA-OAEP-256", "ECDH-ES"]:
    key, kid = key_for(alg, "A256GCM")
    claims = json.dumps({"iss": "https://auth.franceconnect.example/api/v2", "sub": "pairwise-sub", "acr": "eidas2"})
    signed = jws.serialize_compact({"alg": "ES256", "kid": "fcplus-sig"}, claims, signer)
    token = jwe.encrypt_compact({"alg": alg, "enc": "A256GCM", "kid": kid, "cty": "JWT"}, signed.encode(), key,
                                registry=registry)
    nested.append({"alg": alg, "decryption_jwk": dict(key.as_dict(private=True), kid=kid),
                   "signing_public_jwk": dict(signer.as_dict(private=False), kid="fcplus-sig"),
                   "claims": claims, "token": token})

out = pathlib.Path(__file__).resolve().parent.parent / "Tests/RelaisJOSETests/Vectors/jwe.json"
out.write_text(json.dumps({"generator": "joserfc", "vectors": vectors, "nested": nested}, indent=1, ensure_ascii=False) + "\n")
print(f"wrote {len(vectors)} vectors and {len(nested)} nested tokens to {out}")
