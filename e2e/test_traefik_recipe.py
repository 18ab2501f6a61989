"""The shipped Traefik recipe (config/traefik-forward-auth.yaml, with its static configuration
config/traefik-static.yaml), read as Traefik would read its structure. No Traefik runs here (no
build installs on these machines), so this checks the configuration instead of the traffic: every
router goes through a chain that clears the client's identity headers before forwardAuth asks
Relais, lets Relais' answers (and only those) replace every X-Relais-* header and its aliases,
describes the guarded request from Traefik's own view, and keeps the token and its proof from the
upstream; every entry point refuses underscored header names and trusts no client X-Forwarded-*.
The nginx recipe is run for real (test_nginx_forward_auth.py)."""
import os
import re
import unittest

import yaml

from stack import ROOT, identity_headers

RECIPE = os.path.join(ROOT, "config", "traefik-forward-auth.yaml")
STATIC = os.path.join(ROOT, "config", "traefik-static.yaml")
# The guarded request as Relais checks a DPoP proof against it: Relais' only, never the client's.
RELAIS_ONLY = ("X-Forwarded-Uri", "X-Forwarded-Method")


def aliases(header):
    """The names a CGI-style framework reads as `header`: every dash written as another character
    Go keeps apart (underscore, dot), in the case Go canonicalizes them to and in lower case."""
    words = header.split("-")
    forms = []
    for separator in ("_", "."):
        joined = separator.join(words)
        forms += [joined[0].upper() + joined[1:].lower(), joined.lower()]
    return forms


class TraefikRecipe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(RECIPE) as handle:
            cls.config = yaml.safe_load(handle)
        with open(STATIC) as handle:
            cls.static = yaml.safe_load(handle)
        cls.headers = identity_headers()
        cls.middlewares = cls.config["http"]["middlewares"]

    def chain(self, names, seen=()):
        """A router's middlewares in the order Traefik runs them, chains expanded."""
        flat = []
        for name in names:
            self.assertNotIn(name, seen, f"chain loop at {name}")
            self.assertIn(name, self.middlewares, f"unknown middleware {name} (another provider's?)")
            middleware = self.middlewares[name]
            if "chain" in middleware:
                flat += self.chain(middleware["chain"]["middlewares"], seen + (name,))
            else:
                flat.append((name, middleware))
        return flat

    @staticmethod
    def request_headers(middleware):
        """{lower-cased name: value} a headers middleware sets ("" removes the header)."""
        custom = middleware.get("headers", {}).get("customRequestHeaders", {}) or {}
        return {name.lower(): value for name, value in custom.items()}

    def routers(self):
        routers = self.config["http"]["routers"]
        self.assertGreater(len(routers), 0)
        return routers.items()

    def test_every_router_clears_checks_then_drops_the_token(self):
        for router, spec in self.routers():
            chain = self.chain(spec.get("middlewares", []))
            checks = [i for i, (_, middleware) in enumerate(chain) if "forwardAuth" in middleware]
            self.assertEqual(len(checks), 1, f"{router}: {[name for name, _ in chain]}")
            check = checks[0]
            before, after = chain[:check], chain[check + 1:]
            cleared = {name for _, m in before for name, value in self.request_headers(m).items() if value == ""}
            for header in self.headers + list(RELAIS_ONLY):
                self.assertIn(header.lower(), cleared, f"{router}: the client's {header} reaches Relais or the upstream")
            # Nothing after the check touches Relais' answers or writes a request description.
            for name, middleware in after:
                for header, value in self.request_headers(middleware).items():
                    self.assertNotIn(header, {h.lower() for h in self.headers}, f"{router}: {name} overrides Relais' answer")
                    if header in {h.lower() for h in RELAIS_ONLY}:
                        self.assertEqual(value, "", f"{router}: {name} writes {header}")
            dropped = {name for _, m in after for name, value in self.request_headers(m).items() if value == ""}
            self.assertIn("authorization", dropped, f"{router}: the token goes on to the upstream")
            self.assertIn("dpop", dropped, f"{router}: the DPoP proof goes on to the upstream")
            # Nothing before the check writes an identity header or a request description either.
            for name, middleware in before:
                for header, value in self.request_headers(middleware).items():
                    if header in {h.lower() for h in self.headers + list(RELAIS_ONLY)}:
                        self.assertEqual(value, "", f"{router}: {name} writes {header}")

    def test_forward_auth_takes_relais_answers_over_every_alias(self):
        auths = [(name, m["forwardAuth"]) for name, m in self.middlewares.items() if "forwardAuth" in m]
        self.assertGreater(len(auths), 0)
        for name, auth in auths:
            self.assertRegex(auth["address"], r"^RELAIS_URL/auth(\?|$)", name)
            # Explicitly false: the client's X-Forwarded-* are dropped and Traefik writes its own.
            self.assertIs(auth.get("trustForwardHeader"), False, f"{name}: the client's X-Forwarded-* reach Relais")
            regex = re.compile(auth["authResponseHeadersRegex"])
            for header in self.headers:
                # As Relais answers it (copied) and as a client could send it (removed).
                for form in [header] + aliases(header) + [header.lower(), header.upper()]:
                    self.assertTrue(regex.search(form), f"{name}: a client's {form} survives the check")
            # Only Relais' identity headers: a broader regex would strip the request.
            for other in ("Authorization", "DPoP", "Cookie", "Content-Type", "X-Forwarded-For", "X-Request-Id", "Host"):
                self.assertFalse(regex.search(other), f"{name}: {other} is replaced by Relais' answer")
            # Relais gets the token and its proof, never a client's identity header.
            sent = [h.lower() for h in auth.get("authRequestHeaders", [])]
            self.assertIn("authorization", sent, name)
            self.assertIn("dpop", sent, name)
            self.assertFalse({h.lower() for h in self.headers} & set(sent), name)
            self.assertFalse({h.lower() for h in RELAIS_ONLY} & set(sent), name)

    def test_every_entry_point_refuses_underscores_and_trusts_no_forwarded_header(self):
        entry_points = self.static["entryPoints"]
        used = {ep for _, spec in self.routers() for ep in spec.get("entryPoints", [])}
        # A router without entryPoints would listen on every one: each must be checked below.
        self.assertTrue(used, "routers name no entry point")
        self.assertLessEqual(used, set(entry_points), "a router listens on an entry point this file does not configure")
        for name, entry in entry_points.items():
            http = entry.get("http", {})
            strategy = http.get("aliasHeadersStrategy", http.get("underscoreHeadersStrategy"))
            self.assertIn(strategy, ("reject", "delete"), f"{name}: X_Relais_Sub reaches the upstream")
            forwarded = entry.get("forwardedHeaders", {})
            self.assertIsNot(forwarded.get("insecure", False), True, f"{name}: the client's X-Forwarded-* are believed")
            self.assertNotIn("0.0.0.0/0", forwarded.get("trustedIPs", []), name)
            # Entry-point middlewares run first on every router: none may write an identity header.
            for middleware in http.get("middlewares", []):
                local = middleware.split("@")[0]
                if local in self.middlewares:
                    written = set(self.request_headers(self.middlewares[local]))
                    self.assertFalse(written & {h.lower() for h in self.headers}, f"{name}: {middleware}")
        self.assertTrue(self.static["providers"]["file"]["filename"].endswith("traefik-forward-auth.yaml"))


if __name__ == "__main__":
    unittest.main()
