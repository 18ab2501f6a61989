import InMemoryTracing
import RelaisTestSupport
import Testing
import Tracing

@testable import RelaisHTTPClient

/// With a tracer, each request is a client span, child of the caller's, and carries the trace
/// context to the server; the query, headers and body are never recorded.
@Suite struct HTTPClientTracingTests {
    @Test func aRequestIsAChildSpanThatCarriesItsContext() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server in
            let tracer = InMemoryTracer()
            let client = HTTPClient(configuration: .init(maxConcurrentRequests: 2), tracer: tracer)
            defer { Task { try? await client.shutdown() } }
            let response = try await tracer.withSpan("GET /callback", ofKind: .server) { _ in
                try await client.send(
                    .form(
                        url: server.baseURL + "/echo?code=query-secret", fields: [("code", "body-secret")],
                        headers: [(name: "Authorization", value: "Basic header-secret")], operation: "provider token"
                    ))
            }
            #expect(response.status == 200)
            let spans = tracer.finishedSpans
            let parent = try #require(spans.first { $0.operationName == "GET /callback" })
            let span = try #require(spans.first { $0.operationName == "provider token" })
            #expect(span.kind == .client)
            #expect(span.parentSpanID == parent.spanID)
            // The server received this span's context, not the parent's.
            #expect(response.header(InMemoryTracer.spanIDKey) == span.spanID)
            #expect(response.header(InMemoryTracer.traceIDKey) == parent.traceID)
            #expect(span.attributes["http.request.method"]?.toSpanAttribute() == "POST")
            #expect(span.attributes["server.address"]?.toSpanAttribute() == "127.0.0.1")
            #expect(span.attributes["server.port"]?.toSpanAttribute() == .int64(Int64(server.port)))
            #expect(span.attributes["url.path"]?.toSpanAttribute() == "/echo")
            #expect(span.attributes["http.response.status_code"]?.toSpanAttribute() == 200)
            let recorded = "\(span.attributes)"
            for secret in ["query-secret", "body-secret", "header-secret"] { #expect(!recorded.contains(secret)) }
        }
    }

    @Test func aFailureSetsOnlyItsCode() async throws {
        let listener = try SilentListener()
        let tracer = InMemoryTracer()
        let client = HTTPClient(configuration: .init(totalTimeout: .milliseconds(300), maxConcurrentRequests: 1), tracer: tracer)
        defer { Task { try? await client.shutdown() } }
        await #expect(throws: HTTPClientError.self) {
            try await client.send(.init(url: "http://127.0.0.1:\(listener.port)/userinfo?access_token=secret"))
        }
        let span = try #require(tracer.finishedSpans.first)
        #expect(span.operationName == "GET")
        #expect(span.status == SpanStatus(code: .error, message: "http_timeout"))
        #expect(!"\(span.attributes)".contains("secret"))
    }

    @Test(arguments: [
        ("https://user:pw@idp.example:8443/token?code=x#f", "idp.example:8443", "idp.example", 8443, "/token"),
        ("http://[::1]:8080/a/b?c", "[::1]:8080", "::1", 8080, "/a/b"),
        ("https://[::1]/x", "[::1]", "::1", 443, "/x"),
        ("http://example.org", "example.org", "example.org", 80, "/"),
        ("HTTPS://example.org?q", "example.org", "example.org", 443, "/"),
        ("https://a@b@idp.example/x#y", "idp.example", "idp.example", 443, "/x"),
        ("http:///p?x", "invalid", "", 80, "/p"),
        ("garbage", "invalid", "", 443, "/"),
        ("http://h\u{E9}te.example:99999999999999999999/", "h\u{E9}te.example:99999999999999999999", "h\u{E9}te.example", 80, "/"),
    ])
    func theTargetKeepsOnlyServerAndPath(url: String, authority: String, host: String, port: Int, path: String) {
        let target = HTTPClientTarget(url)
        #expect(target.authority == authority)
        #expect(target.host == host)
        #expect(target.port == port)
        #expect(target.path == path)
    }
}
