import HTTPTypes
import Hummingbird
import HummingbirdTesting
import InMemoryTracing
import RelaisConfig
import RelaisStore
import Testing
import Tracing

@testable import RelaisServer

/// The server span of each request, and its store spans, with swift-distributed-tracing's
/// in-memory tracer over real loopback connections (the peer address decides whether an incoming
/// trace context is believed).
@Suite struct TraceMiddlewareTests {
    static let traceHeader = HTTPField.Name(InMemoryTracer.traceIDKey)!
    static let spanHeader = HTTPField.Name(InMemoryTracer.spanIDKey)!

    private func withTracedApplication(
        trustedProxies: [String] = [],
        _ body: @Sendable (any TestClientProtocol) async throws -> Void
    ) async throws -> [FinishedInMemorySpan] {
        let tracer = InMemoryTracer()
        try await withApplication(
            testConfiguration { $0.server.trustedProxies = trustedProxies }, tracer: tracer, testing: .live,
            routes: { router, dependencies in
                router.get("/things/{id}") { _, _ in
                    _ = try await dependencies.store.get("thing:secret-key")
                    return "ok"
                }
                router.get("/broken") { _, _ -> String in throw HTTPError(.serviceUnavailable) }
            }, body)
        return tracer.finishedSpans
    }

    @Test func eachRequestIsAServerSpanNamedByItsRouteWithoutItsQueryOrPath() async throws {
        let spans = try await withTracedApplication { client in
            try await client.execute(uri: "/things/identifier-123?code=the-code&state=the-state", method: .get, headers: [.userAgent: "app/1"]) { response in
                #expect(response.status == .ok)
            }
        }
        let server = try #require(spans.first { $0.kind == .server })
        #expect(server.operationName == "GET /things/{id}")
        #expect(server.attributes["http.route"]?.toSpanAttribute() == "/things/{id}")
        #expect(server.attributes["http.request.method"]?.toSpanAttribute() == "GET")
        #expect(server.attributes["http.response.status_code"]?.toSpanAttribute() == 200)
        #expect(server.attributes["relais.request_id"] != nil)
        #expect(server.parentSpanID == nil)
        // The store call is a child span; neither records a key, a query value or the path.
        let store = try #require(spans.first { $0.operationName == "store get" })
        #expect(store.kind == .client)
        #expect(store.parentSpanID == server.spanID)
        #expect(store.traceID == server.traceID)
        #expect(store.attributes["db.system.name"]?.toSpanAttribute() == "relais.embedded")
        #expect(store.attributes["db.operation.name"]?.toSpanAttribute() == "get")
        let recorded = spans.map { "\($0.operationName) \($0.attributes)" }.joined(separator: "\n")
        for secret in ["the-code", "the-state", "identifier-123", "secret-key", "app/1"] {
            #expect(!recorded.contains(secret), "\(secret) recorded in \(recorded)")
        }
    }

    @Test func aServerErrorMarksTheSpan() async throws {
        let spans = try await withTracedApplication { client in
            try await client.execute(uri: "/broken", method: .get) { response in
                // ErrorMiddleware (inside the span) renders every 5xx as a 500 without details.
                #expect(response.status == .internalServerError)
            }
        }
        let server = try #require(spans.first { $0.kind == .server })
        #expect(server.operationName == "GET /broken")
        #expect(server.attributes["http.response.status_code"]?.toSpanAttribute() == 500)
        #expect(server.status?.code == .error)
    }

    @Test func anIncomingTraceContextIsIgnoredFromAnUntrustedPeer() async throws {
        let spans = try await withTracedApplication { client in
            try await client.execute(uri: "/healthz", method: .get, headers: [Self.traceHeader: "forged-trace", Self.spanHeader: "forged-span"]) { _ in }
        }
        let server = try #require(spans.first { $0.kind == .server })
        #expect(server.traceID != "forged-trace")
        #expect(server.parentSpanID == nil)
    }

    @Test func anIncomingTraceContextIsJoinedFromATrustedProxy() async throws {
        let spans = try await withTracedApplication(trustedProxies: ["127.0.0.1", "::1"]) { client in
            try await client.execute(uri: "/healthz", method: .get, headers: [Self.traceHeader: "gateway-trace", Self.spanHeader: "gateway-span"]) { _ in }
        }
        let server = try #require(spans.first { $0.kind == .server })
        #expect(server.traceID == "gateway-trace")
        #expect(server.parentSpanID == "gateway-span")
    }
}
