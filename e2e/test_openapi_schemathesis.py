"""docs/openapi.yaml is a valid OpenAPI document, and schemathesis (PyPI) throws generated
requests at a live Relais from it with every check on (--checks all) and its stateful phase, for
several seeds: no 5xx, no undocumented status, header or content type, no response that breaks its
schema, schema-valid requests accepted and invalid ones refused, undeclared methods answered 405
with Allow, and no partial session left in Redis afterwards."""
import json
import os
import subprocess
import tempfile
import unittest

from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from stack import ARTIFACTS, ROOT, Stack, sign_in

SPEC = os.path.join(ROOT, "docs", "openapi.yaml")

ADMIN_TOKEN = "schemathesis-admin-token-0123456789-abcdef"

# Run from a temporary directory, with no cache: nothing is written into the repository.
#
# Every check is on. One allowance: a schema says which requests are well formed, not which
# one-time values exist. Where a parameter must name something live (a registered app with its
# exact redirect URI, a sign-in's state, a session or user code, a device_grant app) or be a proof
# (an attestation, a signed logout token), or be sent from Relais' own page (the confirmation pages'
# forms: Sec-Fetch-Site or Origin), a well-formed request with an unknown value is refused
# with 400 and the error the RFCs give (RFC 6749 §4.1.2.1 and §5.2, RFC 8628 §3.5, OpenID Connect
# Back-Channel Logout §2.8): positive data may get that 400 there, and nowhere else. schemathesis
# itself exempts the token endpoint on the same grounds (the oauth2 scheme's tokenUrl).
SCHEMATHESIS_CONFIG = """
headers = {{ Authorization = "Bearer {token}" }}

[cache]
enabled = false

# POST /logout and DELETE /sessions/{{id}} end sessions: each gets a token of its own, of other
# people, so the one every other operation uses stays live (the stateful phase would otherwise
# delete it, following GET /sessions to DELETE /sessions/{{id}}).
[[operations]]
include-path = "/logout"
include-method = "POST"
headers = {{ Authorization = "Bearer {other_token}" }}

[[operations]]
include-path = "/sessions/{{id}}"
include-method = "DELETE"
headers = {{ Authorization = "Bearer {third_token}" }}

[[operations]]
include-path-regex = "^/(authorize|callback|logout|logout/callback|logout/confirm|session|device|device/.+|device_authorization|attest/.+|backchannel-logout)$"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
"""


class OpenAPIAndSchemathesis(unittest.TestCase):
    def test_the_description_is_valid_openapi(self):
        spec, _ = read_from_filename(SPEC)
        validate(spec)
        documented = set(spec["paths"])
        for path in ("/authorize", "/callback", "/token", "/userinfo", "/introspect", "/revoke", "/auth", "/logout", "/jwks.json", "/session_code", "/session"):
            self.assertIn(path, documented)

    def test_schemathesis_with_every_check_finds_nothing(self):
        # Rate limits off, or most generated requests would only meet 429s. The admin endpoint on,
        # so that its refusals (401 without the admin token) are what is checked, not a 404.
        admin_token_file = os.path.join(tempfile.mkdtemp(prefix="relais-admin-"), "token")
        with open(admin_token_file, "w") as handle:
            handle.write(ADMIN_TOKEN)
        with Stack(relay_extra=f"rate_limit: {{enabled: false}}\nadmin: {{token_file: {admin_token_file}}}") as stack:
            token = sign_in(stack, "standard-client")["access_token"]
            os.makedirs(ARTIFACTS, exist_ok=True)
            reports = []
            # Several seeds: each draws other examples, and the stateful phase other sequences.
            seeds = [int(seed) for seed in os.environ.get("SCHEMATHESIS_SEEDS", "20261122,20261125,33").split(",")]
            with tempfile.TemporaryDirectory(prefix="relais-schemathesis-") as directory:
                config = os.path.join(directory, "schemathesis.toml")
                with open(config, "w") as handle:
                    handle.write(SCHEMATHESIS_CONFIG.format(
                        token=token, other_token=sign_in(stack, "standard-client", identity="pierre")["access_token"],
                        third_token=sign_in(stack, "standard-client", identity="karima")["access_token"]))
                for seed in seeds:
                    result = subprocess.run(
                        ["schemathesis", "--config-file", config, "run", SPEC, "--url", stack.relay, "--checks", "all",
                         "--max-examples", os.environ.get("SCHEMATHESIS_EXAMPLES", "30"), "--seed", str(seed),
                         # One worker: with two, hypothesis' threads parse lambdas concurrently and
                         # CPython 3.11's ast module (one recursion counter per interpreter) fails with
                         # "SystemError: AST constructor recursion depth mismatch", seen in 2 of 3 runs.
                         "--phases", "examples,coverage,fuzzing,stateful", "--generation-allow-x00", "false", "--workers", "1"],
                        capture_output=True, text=True, timeout=900, cwd=directory,
                    )
                    reports.append(f"=== seed {seed}: exit {result.returncode}\n{result.stdout}{result.stderr}")
                    if result.returncode != 0:
                        break
            with open(os.path.join(ARTIFACTS, "schemathesis.txt"), "w") as report:
                report.write("\n".join(reports))
            self.assertEqual(result.returncode, 0, f"seed {seed}: " + result.stdout[-6000:] + result.stderr[-2000:])

            # Every session in Redis is whole: the three sign-ins above, those nothing revoked.
            redis = ["redis-cli", "-p", str(stack.redis_port)]
            keys = subprocess.run(redis + ["--scan", "--pattern", "relais:session:*"], capture_output=True, text=True).stdout.split()
            self.assertLessEqual(len(keys), 3, keys)
            for key in keys:
                # Session records are Relais' compact binary form (first byte 0xC1: flags, then the
                # client_id, sub and provider as length-prefixed strings), or JSON from older versions.
                record = subprocess.run(redis + ["--raw", "GET", key], capture_output=True).stdout.rstrip(b"\n")
                if record[:1] == b"\xc1":
                    self.assertIn(b"standard-client", record[:64], record[:64])
                    self.assertGreater(len(record), 100, "a session record cut short")
                else:
                    parsed = json.loads(record)
                    self.assertTrue(parsed["client_id"] and parsed["sub"] and parsed["identity"], parsed)
                self.assertGreater(int(subprocess.run(redis + ["PTTL", key], capture_output=True, text=True).stdout), 0)


if __name__ == "__main__":
    unittest.main()
