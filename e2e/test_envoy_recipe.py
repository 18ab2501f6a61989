"""The shipped Envoy recipe (config/envoy-forward-auth.yaml), read as Envoy would read its structure.
No Envoy runs here (Debian packages none and no other build installs on these machines), so this
checks the configuration instead of the traffic: on every listener, every route goes through a
filter chain that removes each of Relais' identity headers before ext_authz asks Relais, lets
Relais' answers (and only those) through to the upstream, refuses when Relais is unreachable, and
forwards no client-sent identity header to Relais. Every listener also refuses headers spelled
with underscores, appends the peer to X-Forwarded-For, and replaces the client's description of
the request (X-Forwarded-Host/-Uri/-Method/-Proto) with Envoy's own. The nginx recipe is run for
real (test_nginx_forward_auth.py)."""
import os
import re
import unittest

import yaml

from stack import ROOT, identity_headers

RECIPE = os.path.join(ROOT, "config", "envoy-forward-auth.yaml")
HCM = "envoy.filters.network.http_connection_manager"
EXT_AUTHZ = "envoy.filters.http.ext_authz"
MUTATION = "envoy.filters.http.header_mutation"
# The guarded request as Relais checks a DPoP proof against it: the client's copies are not believed.
FORWARDED = ("x-forwarded-host", "x-forwarded-uri", "x-forwarded-method", "x-forwarded-proto")


def connection_managers(config):
    """(listener name, HttpConnectionManager config) for every filter chain of every listener."""
    for listener in config["static_resources"]["listeners"]:
        for chain in listener["filter_chains"]:
            for network_filter in chain["filters"]:
                if network_filter["name"] == HCM:
                    yield listener["name"], network_filter["typed_config"]


def removed_by(http_filter):
    return {m["remove"].lower() for m in http_filter["typed_config"]["mutations"].get("request_mutations", []) if "remove" in m}


def appended_by(http_filter):
    """{header: value} a header_mutation filter sets on the request."""
    return {m["append"]["header"]["key"].lower(): str(m["append"]["header"]["value"])
            for m in http_filter["typed_config"]["mutations"].get("request_mutations", []) if "append" in m}


def pattern_matches(patterns, header):
    return any(header == p.get("exact", "\0").lower() or ("prefix" in p and header.startswith(p["prefix"].lower())) for p in patterns)


class EnvoyRecipe(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(RECIPE) as handle:
            cls.config = yaml.safe_load(handle)
        cls.headers = [name.lower() for name in identity_headers()]

    def test_every_listener_strips_every_identity_header_before_ext_authz(self):
        managers = list(connection_managers(self.config))
        self.assertGreater(len(managers), 0)
        for listener, manager in managers:
            filters = manager["http_filters"]
            names = [f["name"] for f in filters]
            self.assertEqual(names.count(EXT_AUTHZ), 1, f"{listener}: {names}")
            check = names.index(EXT_AUTHZ)
            self.assertEqual(names[-1], "envoy.filters.http.router", listener)
            before = set().union(*[removed_by(f) for f in filters[:check] if f["name"] == MUTATION])
            for header in self.headers:
                self.assertIn(header, before, f"{listener}: {header} reaches ext_authz (and then the upstream) as the client sent it")
            # Nothing after the check removes what Relais answered.
            after = set().union(*[removed_by(f) for f in filters[check + 1:] if f["name"] == MUTATION])
            self.assertFalse(after & set(self.headers), f"{listener}: {after}")
            self.assertIn("authorization", after, f"{listener}: the token goes on to the upstream")

            authz = filters[check]["typed_config"]
            self.assertIs(authz["failure_mode_allow"], False, listener)
            allowed_up = authz["http_service"]["authorization_response"]["allowed_upstream_headers"]["patterns"]
            for header in self.headers:
                self.assertTrue(pattern_matches(allowed_up, header), f"{listener}: Relais' {header} is not passed to the upstream")
            # The client's identity headers are not forwarded to Relais either.
            to_relais = authz["http_service"]["authorization_request"]["allowed_headers"]["patterns"]
            self.assertFalse([h for h in self.headers if pattern_matches(to_relais, h)], listener)
            added = {h["key"].lower() for h in authz["http_service"]["authorization_request"].get("headers_to_add", [])}
            self.assertFalse(added & set(self.headers), listener)

    def test_every_listener_refuses_underscores_and_describes_the_request_itself(self):
        managers = list(connection_managers(self.config))
        self.assertGreater(len(managers), 0)
        for listener, manager in managers:
            # x_relais_sub is another header to Envoy but HTTP_X_RELAIS_SUB to CGI-style frameworks.
            options = manager.get("common_http_protocol_options", {})
            self.assertEqual(options.get("headers_with_underscores_action"), "REJECT_REQUEST", f"{listener}: underscored headers reach the upstream")
            # The peer's address is appended to X-Forwarded-For and the client's X-Forwarded-Proto
            # overwritten (Envoy trusts neither from an untrusted hop).
            self.assertIs(manager.get("use_remote_address"), True, f"{listener}: the client's X-Forwarded-For is taken as it is")
            self.assertEqual(manager.get("xff_num_trusted_hops", 0), 0, f"{listener}: the client's X-Forwarded-For and -Proto are believed")
            self.assertFalse(manager.get("skip_xff_append", False), listener)

            filters = manager["http_filters"]
            names = [f["name"] for f in filters]
            check = names.index(EXT_AUTHZ)
            before = set().union(*[removed_by(f) for f in filters[:check] if f["name"] == MUTATION])
            for header in FORWARDED:
                self.assertIn(header, before, f"{listener}: the client's {header} reaches Relais or the upstream")
            # Relais gets the guarded request from Envoy: pseudo-headers, and a scheme written here.
            added = {h["key"].lower(): str(h["value"]) for h in filters[check]["typed_config"]["http_service"]["authorization_request"].get("headers_to_add", [])}
            for header in FORWARDED:
                self.assertIn(header, added, f"{listener}: Relais cannot check a DPoP proof without {header}")
                for read in re.findall(r"%REQ\(([^)]*)\)%", added[header]):
                    self.assertTrue(read.startswith(":"), f"{listener}: {header} is read from the client's {read}")
            self.assertIn(added["x-forwarded-proto"], ("http", "https"), f"{listener}: the scheme is the client's choice")
            # After the check: the proof stops here, and only Envoy's own scheme is added.
            after = [f for f in filters[check + 1:] if f["name"] == MUTATION]
            self.assertIn("dpop", set().union(*[removed_by(f) for f in after]), f"{listener}: the DPoP proof goes on to the upstream")
            for http_filter in after:
                for header, value in appended_by(http_filter).items():
                    self.assertNotIn(header, set(self.headers) | (set(FORWARDED) - {"x-forwarded-proto"}), listener)
                    self.assertNotIn("%", value, f"{listener}: {header} is read from the request")

    def test_no_route_escapes_the_filter_chain_or_adds_an_identity_header(self):
        routes = 0
        for listener, manager in connection_managers(self.config):
            for host in manager["route_config"]["virtual_hosts"]:
                for scope, where in [(host, f"virtual host {host['name']}")] + [(r, f"route {r['match']}") for r in host["routes"]]:
                    # A per-route override could turn ext_authz or the header removal off for that route.
                    self.assertNotIn("typed_per_filter_config", scope, f"{listener}, {where}")
                    added = {h["header"]["key"].lower() for h in scope.get("request_headers_to_add", [])}
                    self.assertFalse(added & (set(self.headers) | set(FORWARDED)), f"{listener}, {where}")
                    # Route-level removal runs after ext_authz: it would drop Relais' answers, not the client's.
                    removed = {h.lower() for h in scope.get("request_headers_to_remove", [])}
                    self.assertFalse(removed & set(self.headers), f"{listener}, {where}")
                routes += len(host["routes"])
        self.assertGreater(routes, 0)


if __name__ == "__main__":
    unittest.main()
