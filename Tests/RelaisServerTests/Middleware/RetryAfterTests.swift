import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisServer
import RelaisTestSupport
import Testing

/// Every 503 of the application as `serve` assembles it carries `Retry-After`, whether a route
/// returned it or threw it; a delay a route chose is kept, and no other status gets one.
@Suite(.tags(.fast)) struct RetryAfterTests {
    static func routes(_ router: Router<RelaisRequestContext>, _: RelaisDependencies) {
        router.get("/returned") { _, _ in Response(status: .serviceUnavailable) }
        router.get("/thrown") { _, _ -> Response in throw APIError(.serviceUnavailable, code: "temporarily_unavailable", description: "store down") }
        router.get("/chosen") { _, _ in Response(status: .serviceUnavailable, headers: [.retryAfter: "30"]) }
        router.get("/limited") { _, _ in Response(status: .tooManyRequests, headers: [.retryAfter: "12"]) }
        router.get("/failed") { _, _ -> Response in throw CancellationError() }
    }

    @Test func every503SaysWhenToRetry() async throws {
        try await withApplication(routes: Self.routes) { client in
            for uri in ["/returned", "/thrown"] {
                try await client.execute(uri: uri, method: .get) { response in
                    #expect(response.status == .serviceUnavailable, "\(uri)")
                    #expect(response.headers[.retryAfter] == String(RetryAfterMiddleware.seconds), "\(uri)")
                }
            }
            try await client.execute(uri: "/thrown", method: .get) { response in
                let body = try decode(ErrorBody.self, response.body)
                #expect(body.error == "temporarily_unavailable")
            }
            try await client.execute(uri: "/chosen", method: .get) { response in
                #expect(response.headers[fields: .retryAfter].map(\.value) == ["30"])
            }
        }
    }

    @Test func otherAnswersAreLeftAlone() async throws {
        try await withApplication(routes: Self.routes) { client in
            try await client.execute(uri: "/limited", method: .get) { response in
                #expect(response.headers[.retryAfter] == "12")
            }
            for (uri, status) in [("/healthz", HTTPResponse.Status.ok), ("/failed", .internalServerError), ("/nowhere", .notFound)] {
                try await client.execute(uri: uri, method: .get) { response in
                    #expect(response.status == status, "\(uri)")
                    #expect(response.headers[.retryAfter] == nil, "\(uri)")
                }
            }
        }
    }
}
