"""docs/openapi.yaml is a valid OpenAPI document, and schemathesis (PyPI) throws generated
requests at a live Relais from it: no 5xx, no undocumented status or content type, no response
that breaks its schema, and no partial session left in Redis afterwards."""
import json
import os
import subprocess
import unittest

from openapi_spec_validator import validate
from openapi_spec_validator.readers import read_from_filename

from stack import ARTIFACTS, ROOT, Stack, sign_in

SPEC = os.path.join(ROOT, "docs", "openapi.yaml")


class OpenAPIAndSchemathesis(unittest.TestCase):
    def test_the_description_is_valid_openapi(self):
        spec, _ = read_from_filename(SPEC)
        validate(spec)
        documented = set(spec["paths"])
        for path in ("/authorize", "/callback", "/token", "/userinfo", "/introspect", "/revoke", "/auth", "/logout", "/jwks.json", "/session_code", "/session"):
            self.assertIn(path, documented)

    def test_schemathesis_finds_no_server_error_or_schema_break(self):
        # Rate limits off, or most generated requests would only meet 429s.
        with Stack(relay_extra="rate_limit: {enabled: false}") as stack:
            token = sign_in(stack, "standard-client")["access_token"]
            os.makedirs(ARTIFACTS, exist_ok=True)
            result = subprocess.run(
                ["schemathesis", "run", SPEC, "--url", stack.relay,
                 "--checks", "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
                 "--max-examples", os.environ.get("SCHEMATHESIS_EXAMPLES", "40"), "--seed", "20261122",
                 "--phases", "examples,coverage,fuzzing", "--generation-allow-x00", "false",
                 "--header", f"Authorization: Bearer {token}"],
                capture_output=True, text=True, timeout=900, cwd=ROOT,
            )
            with open(os.path.join(ARTIFACTS, "schemathesis.txt"), "w") as report:
                report.write(result.stdout + result.stderr)
            self.assertEqual(result.returncode, 0, result.stdout[-4000:] + result.stderr[-2000:])

            # Every session in Redis is whole: the one sign-in above, if nothing revoked it.
            redis = ["redis-cli", "-p", str(stack.redis_port)]
            keys = subprocess.run(redis + ["--scan", "--pattern", "relais:session:*"], capture_output=True, text=True).stdout.split()
            self.assertLessEqual(len(keys), 1, keys)
            for key in keys:
                record = json.loads(subprocess.run(redis + ["GET", key], capture_output=True, text=True).stdout)
                self.assertTrue(record["client_id"] and record["sub"] and record["identity"], record)
                self.assertGreater(int(subprocess.run(redis + ["PTTL", key], capture_output=True, text=True).stdout), 0)


if __name__ == "__main__":
    unittest.main()
