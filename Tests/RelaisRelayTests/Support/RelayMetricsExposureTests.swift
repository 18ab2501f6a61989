import RelaisHTTPClient
import RelaisTestSupport
import Testing

/// Where `/metrics` is served and who may read it: by default on the public port to anyone (the
/// README says so); `metrics.listen` moves it to its own listener, `metrics.bearer_token` closes it.
@Suite struct RelayMetricsExposureTests {
    static let token = "metrics-scraper-token-0123456789"

    static func relay(_ metrics: String) async throws -> InProcessServer {
        try await InProcessServer.launch(.relay) { port in
            """
            server: {environment: development, port: \(port), public_base_url: "http://127.0.0.1:\(port)"}
            log: {level: error}
            store: {kind: embedded}
            metrics: {\(metrics)}
            """
        }
    }

    @Test func metricsOnTheirOwnListenerBehindABearerToken() async throws {
        let metricsPort = try FreePort.find()
        let server = try await Self.relay("listen: \"127.0.0.1:\(metricsPort)\", bearer_token: \(Self.token)")
        defer { server.stop() }
        let http = HTTPClient(configuration: .init())
        // Not on the public port any more.
        #expect(try await http.send(.init(url: server.baseURL + "/metrics")).status == 404)
        #expect(try await http.send(.init(url: server.baseURL + "/healthz")).status == 200)
        let url = "http://127.0.0.1:\(metricsPort)/metrics"
        let anonymous = try await http.send(.init(url: url))
        #expect(anonymous.status == 401 && anonymous.header("www-authenticate") == #"Bearer realm="metrics""#)
        #expect(try await http.send(.init(url: url, headers: [(name: "Authorization", value: "Bearer wrong-token-wrong-token-00")])).status == 401)
        let scraped = try await http.send(.init(url: url, headers: [(name: "Authorization", value: "Bearer \(Self.token)")]))
        #expect(scraped.status == 200 && String(decoding: scraped.body, as: UTF8.self).contains("relais_http_requests_total"))
        try await http.shutdown()
    }

    @Test func aBearerTokenAlsoGuardsThePublicPort() async throws {
        let server = try await Self.relay("bearer_token: \(Self.token)")
        defer { server.stop() }
        let http = HTTPClient(configuration: .init())
        #expect(try await http.send(.init(url: server.baseURL + "/metrics")).status == 401)
        #expect(try await http.send(.init(url: server.baseURL + "/metrics", headers: [(name: "Authorization", value: "Bearer \(Self.token)")])).status == 200)
        try await http.shutdown()
    }
}
