"""Traces, as an operator's collector receives them: Relais and the development provider export
OTLP over HTTP (protobuf) to a real receiver decoding with opentelemetry-proto; one full sign-in
must arrive as one trace, the provider's spans under Relais' provider calls, with no secret in
any attribute. A collector that never answers must cost requests nothing: spans are dropped and
counted instead."""

import base64
import gzip
import http.server
import json
import socket
import threading
import time
import unittest
from urllib.parse import parse_qs, urlsplit

import requests
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from stack import Stack, free_port, sign_in

SERVER, CLIENT = 2, 3  # opentelemetry.proto.trace.v1.Span.SpanKind


class Receiver:
    """An OTLP/HTTP trace receiver: POST /v1/traces with an ExportTraceServiceRequest."""

    def __init__(self):
        self.port = free_port()
        self.spans = []
        self.content_types = set()
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest()
                request.ParseFromString(body)
                with receiver.lock:
                    receiver.content_types.add((self.path, self.headers.get("Content-Type")))
                    for resource_spans in request.resource_spans:
                        service = next((a.value.string_value for a in resource_spans.resource.attributes if a.key == "service.name"), None)
                        for scope_spans in resource_spans.scope_spans:
                            for span in scope_spans.spans:
                                receiver.spans.append((service, span))
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, predicate, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                spans = list(self.spans)
            if predicate(spans):
                return spans
            time.sleep(0.1)
        with self.lock:
            names = sorted({(service, span.name) for service, span in self.spans})
        raise AssertionError(f"the spans expected did not arrive within {timeout} s; received: {names}")

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def attribute_values(span):
    values = [span.name]
    for attribute in span.attributes:
        value = attribute.value
        values.append(f"{attribute.key}={value.string_value or value.int_value or value.bool_value or value.double_value}")
    for event in span.events:
        values.append(event.name)
        values += [f"{a.key}={a.value.string_value}" for a in event.attributes]
    values.append(span.status.message)
    return values


def attribute(span, key):
    for item in span.attributes:
        if item.key == key:
            return item.value.string_value or item.value.int_value
    return None


class Tracing(unittest.TestCase):
    def test_one_sign_in_is_one_trace_across_relais_and_the_provider_without_secrets(self):
        receiver = Receiver()
        self.addCleanup(receiver.stop)
        environment = {
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{receiver.port}",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        # The provider believes trace context from Relais on loopback, as it would from a trusted caller.
        with Stack(env=environment, provider_trusted_proxies=["127.0.0.1"]) as stack:
            trail = {}
            tokens = sign_in(stack, "standard-client", trail=trail)

            def complete(spans):
                names = {(service, span.name) for service, span in spans}
                return {("relais", "GET /callback"), ("relais", "POST /token"), ("relais-dev-provider", "POST /api/v2/token"),
                        ("relais-dev-provider", "GET /api/v2/userinfo")} <= names

            spans = receiver.wait_for(complete)

        self.assertEqual({("/v1/traces", "application/x-protobuf")}, receiver.content_types)
        relais = [span for service, span in spans if service == "relais"]
        provider = [span for service, span in spans if service == "relais-dev-provider"]
        callback = next(span for span in relais if span.name == "GET /callback")
        self.assertEqual(SERVER, callback.kind)
        self.assertEqual(302, attribute(callback, "http.response.status_code"))
        self.assertEqual("/callback", attribute(callback, "http.route"))

        # Relais' calls to the provider are client spans under the callback's span...
        under_callback = {span.name: span for span in relais if span.parent_span_id == callback.span_id}
        for name in ("provider token", "provider userinfo"):
            self.assertIn(name, under_callback, f"no {name} span under GET /callback: {sorted(under_callback)}")
            self.assertEqual(CLIENT, under_callback[name].kind)
            self.assertEqual(callback.trace_id, under_callback[name].trace_id)
        self.assertEqual(200, attribute(under_callback["provider token"], "http.response.status_code"))
        self.assertEqual("/api/v2/token", attribute(under_callback["provider token"], "url.path"))
        self.assertTrue(any(name.startswith("store ") for name in under_callback), f"no store span under GET /callback: {sorted(under_callback)}")
        store = next(span for name, span in under_callback.items() if name.startswith("store "))
        self.assertEqual("redis", attribute(store, "db.system.name"))

        # ...and the provider's own request spans are their children, in the same trace.
        provider_token = next(span for span in provider if span.name == "POST /api/v2/token")
        self.assertEqual(under_callback["provider token"].span_id, provider_token.parent_span_id)
        self.assertEqual(callback.trace_id, provider_token.trace_id)
        provider_userinfo = next(span for span in provider if span.name == "GET /api/v2/userinfo")
        self.assertEqual(under_callback["provider userinfo"].span_id, provider_userinfo.parent_span_id)

        # No token, code, state, nonce, verifier, sub or claim anywhere, in either service's spans.
        provider_query = parse_qs(urlsplit(trail["provider_page"]).query)
        callback_query = parse_qs(urlsplit(trail["callback"]).query)
        id_token_claims = json.loads(base64.urlsafe_b64decode(tokens["id_token"].split(".")[1] + "=="))
        secrets = {
            "app code": trail["code"], "verifier": trail["verifier"], "provider code": callback_query["code"][0],
            "provider state": callback_query["state"][0], "access token": tokens["access_token"],
            "refresh token": tokens["refresh_token"], "id token": tokens["id_token"], "sub": id_token_claims["sub"],
            "given name": "Angela", "family name": "DUBOIS", "email": "wossewodda",
        }
        for key in ("state", "nonce"):
            if key in provider_query:
                secrets[f"authorize {key}"] = provider_query[key][0]
        recorded = "\n".join(value for _, span in spans for value in attribute_values(span))
        for what, secret in secrets.items():
            self.assertNotIn(secret, recorded, f"the {what} appears in an exported span")

    def test_a_collector_that_never_answers_costs_requests_nothing_and_drops_are_counted(self):
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        self.addCleanup(silent.close)
        environment = {
            "OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{silent.getsockname()[1]}",
            "OTEL_BSP_SCHEDULE_DELAY": "50", "OTEL_BSP_MAX_QUEUE_SIZE": "4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "5000",
        }
        with Stack(env=environment) as stack:
            session = requests.Session()
            slowest = 0.0
            for _ in range(200):
                started = time.monotonic()
                self.assertEqual(200, session.get(stack.relay + "/healthz", timeout=10).status_code)
                slowest = max(slowest, time.monotonic() - started)
            # A request that waited for the collector would take its 5 s export timeout.
            self.assertLess(slowest, 2.0, "a request waited for the span exporter")
            deadline = time.monotonic() + 30
            dropped = 0
            while time.monotonic() < deadline and dropped == 0:
                metrics = session.get(stack.relay + "/metrics", timeout=10).text
                for line in metrics.splitlines():
                    if line.startswith("relais_trace_spans_dropped_total"):
                        dropped = float(line.split()[-1])
                time.sleep(0.2)
            self.assertGreater(dropped, 0, "relais_trace_spans_dropped_total never counted a dropped span")


if __name__ == "__main__":
    unittest.main()
