#!/usr/bin/env python3
"""Checks tokens produced by RelaisJOSE with joserfc, an implementation nobody here wrote.

Input (a JSON file path as argument): {"jws": [{"alg", "token", "public_jwk"}], "jwe": [{"alg", "enc",
"token", "private_jwk", "plaintext"}]}. Prints one line per item ("ok ..." or "FAIL ...") and exits
non-zero if any item fails. Run by the Swift test JOSECrossCheckTests.
"""
import json
import sys
import warnings

from joserfc import jwe, jwk, jws

warnings.simplefilter("ignore")
items = json.load(open(sys.argv[1]))
jws_registry = jws.JWSRegistry(algorithms=sorted({item["alg"] for item in items["jws"]}))
jwe_registry = jwe.JWERegistry(algorithms=sorted({i["alg"] for i in items["jwe"]} | {i["enc"] for i in items["jwe"]}))
failures = 0
for item in items["jws"]:
    try:
        key = jwk.import_key(item["public_jwk"])
        result = jws.deserialize_compact(item["token"], key, registry=jws_registry)
        assert result.payload == item["payload"].encode(), "payload differs"
        print("ok jws", item["alg"])
    except Exception as error:  # noqa: BLE001 - report every failure, keep going
        failures += 1
        print("FAIL jws", item["alg"], repr(error))
for item in items["jwe"]:
    try:
        key = jwk.import_key(item["private_jwk"])
        result = jwe.decrypt_compact(item["token"], key, registry=jwe_registry)
        assert result.plaintext == item["plaintext"].encode(), "plaintext differs"
        print("ok jwe", item["alg"], item["enc"])
    except Exception as error:  # noqa: BLE001
        failures += 1
        print("FAIL jwe", item["alg"], item["enc"], repr(error))
sys.exit(1 if failures else 0)
