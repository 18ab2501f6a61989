import CCurl
import Foundation
import Hummingbird
import NIOPosix
import RelaisTestSupport
import Testing

@testable import RelaisHTTPClient

@Suite struct HTTPClientTests {
    private func withServer(_ body: @Sendable (LoopbackHTTPServer) async throws -> Void) async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter(), body)
    }

    /// Bridged: a client with event loops, whose connections they make and read (the server's
    /// way); not bridged: its reactor thread waits on libcurl's own sockets.
    private func client(bridged: Bool, _ configure: (inout HTTPClientConfiguration) -> Void = { _ in }) -> HTTPClient {
        var configuration = HTTPClientConfiguration(maxConcurrentRequests: 4)
        configure(&configuration)
        return HTTPClient(configuration: configuration, eventLoopGroup: bridged ? .singleton : nil)
    }

    @Test(arguments: [false, true]) func getReturnsBodyAndHeaders(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged)
            defer { Task { try? await client.shutdown() } }
            let response = try await client.send(.init(url: server.baseURL + "/hello"))
            #expect(response.status == 200)
            #expect(response.bodyText == "hello")
            #expect(response.header("content-length") == "5")
        }
    }

    @Test(arguments: [false, true]) func errorStatusesAreDataNotErrors(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged)
            defer { Task { try? await client.shutdown() } }
            for code in [400, 401, 404, 500, 503] {
                let response = try await client.send(.init(url: server.baseURL + "/status/\(code)"))
                #expect(response.status == code)
                #expect(response.bodyText == "status \(code)")
            }
        }
    }

    @Test(arguments: [false, true]) func formPostSendsEncodedFieldsAndHeaders(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged)
            defer { Task { try? await client.shutdown() } }
            let request = HTTPClientRequest.form(
                url: server.baseURL + "/echo",
                fields: [("grant_type", "authorization_code"), ("redirect_uri", "https://a.example/cb?x=1&y=2"), ("name", "Émile Zola")],
                headers: [(name: "X-Test", value: "yes")]
            )
            let response = try await client.send(request)
            #expect(response.status == 200)
            #expect(response.header("content-type") == "application/x-www-form-urlencoded")
            #expect(response.header("x-test") == "yes")
            #expect(response.bodyText == "grant_type=authorization_code&redirect_uri=https%3A%2F%2Fa.example%2Fcb%3Fx%3D1%26y%3D2&name=%C3%89mile+Zola")
        }
    }

    @Test(arguments: [false, true]) func otherMethodsAreSent(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged)
            defer { Task { try? await client.shutdown() } }
            let put = try await client.send(.init(method: .put, url: server.baseURL + "/method", body: [1]))
            let delete = try await client.send(.init(method: .delete, url: server.baseURL + "/method"))
            #expect(put.bodyText == "PUT")
            #expect(delete.bodyText == "DELETE")
        }
    }

    @Test(arguments: [false, true]) func slowServerTimesOutWithinTheConfiguredTimeout(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged) { $0.totalTimeout = .milliseconds(300) }
            defer { Task { try? await client.shutdown() } }
            let start = ContinuousClock.now
            await #expect(throws: HTTPClientError.timeout) {
                try await client.send(.init(url: server.baseURL + "/slow?ms=20000"))
            }
            // Bounds are far from both the timeout and the server's 20 s, so a loaded machine cannot flip them.
            #expect(ContinuousClock.now - start < .seconds(8))
            // A per-request timeout overrides the client's.
            let response = try await client.send(.init(url: server.baseURL + "/slow?ms=400", timeout: .seconds(20)))
            #expect(response.bodyText == "slow")
        }
    }

    @Test(arguments: [false, true]) func theTotalTimeoutIncludesWaitingForAWorker(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged) {
                $0.maxConcurrentRequests = 1; $0.totalTimeout = .milliseconds(500)
            }
            let start = ContinuousClock.now
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<60 {
                    group.addTask {
                        do {
                            _ = try await client.send(.init(url: server.baseURL + "/slow?ms=20000"))
                            return false
                        } catch {
                            return (error as? HTTPClientError) == .timeout
                        }
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            // One worker, 60 slow calls: each times out within its own 500 ms; without the deadline
            // counting from the call, the last would wait 60 x 500 ms = 30 s. The bound sits halfway,
            // far from both, so a starved test process cannot flip it.
            #expect(outcomes == Array(repeating: true, count: 60))
            #expect(ContinuousClock.now - start < .seconds(15))
            try await client.shutdown()
        }
    }

    @Test(arguments: [false, true]) func closedPortIsConnectionRefused(bridged: Bool) async throws {
        let port = try FreePort.find()
        let client = client(bridged: bridged)
        defer { Task { try? await client.shutdown() } }
        await #expect(throws: HTTPClientError.connectionRefused(host: "127.0.0.1:\(port)")) {
            try await client.send(.init(url: "http://127.0.0.1:\(port)/"))
        }
    }

    @Test(arguments: [false, true]) func aResponseCutShortIsIncomplete(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged)
            defer { Task { try? await client.shutdown() } }
            await #expect(throws: HTTPClientError.incompleteResponse(host: "127.0.0.1:\(server.port)")) {
                try await client.send(.init(url: server.baseURL + "/truncated"))
            }
            // The pool drops the broken connection: the next request works.
            let next = try await client.send(.init(url: server.baseURL + "/hello"))
            #expect(next.bodyText == "hello")
        }
    }

    @Test(arguments: [false, true]) func oversizedResponseIsRejected(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged) { $0.maxResponseBytes = 1000 }
            defer { Task { try? await client.shutdown() } }
            let atLimit = try await client.send(.init(url: server.baseURL + "/bytes?count=1000"))
            #expect(atLimit.body.count == 1000)
            await #expect(throws: HTTPClientError.responseTooLarge(limit: 1000)) {
                try await client.send(.init(url: server.baseURL + "/bytes?count=1001"))
            }
            await #expect(throws: HTTPClientError.responseTooLarge(limit: 1000)) {
                try await client.send(.init(url: server.baseURL + "/bytes?count=200000"))
            }
        }
    }

    @Test(arguments: [false, true]) func redirectsAreOffByDefault(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged)
            defer { Task { try? await client.shutdown() } }
            let response = try await client.send(.init(url: server.baseURL + "/redirect"))
            #expect(response.status == 302)
            #expect(response.header("location") == "/hello")
        }
    }

    @Test(arguments: [false, true]) func redirectsFollowedWhenEnabledAndLoopsStop(bridged: Bool) async throws {
        try await withServer { server in
            let client = client(bridged: bridged) {
                $0.followRedirects = true; $0.maxRedirects = 3
            }
            defer { Task { try? await client.shutdown() } }
            let response = try await client.send(.init(url: server.baseURL + "/redirect"))
            #expect(response.status == 200)
            #expect(response.bodyText == "hello")
            await #expect(throws: HTTPClientError.tooManyRedirects) {
                try await client.send(.init(url: server.baseURL + "/redirect-loop"))
            }
        }
    }

    @Test(arguments: [false, true]) func nonHTTPSchemesAndMalformedURLsAreRefused(bridged: Bool) async throws {
        let client = client(bridged: bridged)
        defer { Task { try? await client.shutdown() } }
        for url in ["ftp://127.0.0.1/file", "file:///etc/passwd", "not a url", "gopher://127.0.0.1/"] {
            await #expect(throws: HTTPClientError.invalidURL) { try await client.send(.init(url: url)) }
        }
    }

    @Test(arguments: [false, true]) func keepAliveReusesOneConnectionAndCanBeTurnedOff(bridged: Bool) async throws {
        try await withServer { server in
            let reusing = client(bridged: bridged) { $0.maxConcurrentRequests = 1 }
            let fresh = client(bridged: bridged) {
                $0.maxConcurrentRequests = 1; $0.reuseConnections = false
            }
            defer {
                Task {
                    try? await reusing.shutdown(); try? await fresh.shutdown()
                }
            }
            var reusedConnections = 0
            var freshConnections = 0
            for _ in 0..<10 {
                reusedConnections += try await reusing.send(.init(url: server.baseURL + "/hello")).newConnections
                freshConnections += try await fresh.send(.init(url: server.baseURL + "/hello")).newConnections
            }
            #expect(reusedConnections == 1)
            #expect(freshConnections == 10)
        }
    }

    @Test(arguments: [false, true]) func cancellingTheTaskAbortsTheTransfer(bridged: Bool) async throws {
        let (arrived, arrival) = AsyncStream.makeStream(of: Void.self)
        let router = LoopbackHTTPServer.testRouter()
        router.get("/held") { _, _ in
            arrival.yield()
            try await Task.sleep(for: .seconds(30))
            return "held"
        }
        try await LoopbackHTTPServer.with(router: router) { server in
            let client = client(bridged: bridged)
            defer { Task { try? await client.shutdown() } }
            let start = ContinuousClock.now
            let task = Task { try await client.send(.init(url: server.baseURL + "/held")) }
            // Cancelled once the transfer is under way: the server has the request.
            var arrivals = arrived.makeAsyncIterator()
            _ = await arrivals.next()
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            // Well before the server's 30 s answer (room for a loaded machine: 12 s seen beside a busy core).
            #expect(ContinuousClock.now - start < .seconds(20))
        }
    }

    @Test(arguments: [false, true]) func proxyIsUsedUnlessTheHostIsExcluded(bridged: Bool) async throws {
        try await withServer { server in
            let deadProxy = try FreePort.find()
            let proxied = client(bridged: bridged) { $0.proxy = "http://127.0.0.1:\(deadProxy)" }
            let bypassing = client(bridged: bridged) {
                $0.proxy = "http://127.0.0.1:\(deadProxy)"; $0.noProxy = "127.0.0.1"
            }
            defer {
                Task {
                    try? await proxied.shutdown(); try? await bypassing.shutdown()
                }
            }
            await #expect(throws: HTTPClientError.connectionRefused(host: "127.0.0.1:\(server.port)")) {
                try await proxied.send(.init(url: server.baseURL + "/hello"))
            }
            let direct = try await bypassing.send(.init(url: server.baseURL + "/hello"))
            #expect(direct.status == 200)
        }
    }

    @Test(arguments: [false, true]) func shutDownClientRefusesRequests(bridged: Bool) async throws {
        let client = client(bridged: bridged)
        try await client.shutdown()
        await #expect(throws: HTTPClientError.shutdown) { try await client.send(.init(url: "http://127.0.0.1:1/")) }
    }

    @Test func curlCodesMapToTypedErrors() {
        func classify(_ code: CURLcode, exceeded: Bool = false) -> HTTPClientError {
            HTTPClient.classify(code, host: "idp.example:443", reason: "why", exceededLimit: exceeded, limit: 10)
        }
        #expect(classify(CURLE_COULDNT_RESOLVE_HOST) == .dnsFailure(host: "idp.example:443"))
        #expect(classify(CURLE_COULDNT_RESOLVE_PROXY) == .dnsFailure(host: "idp.example:443"))
        #expect(classify(CURLE_PEER_FAILED_VERIFICATION) == .tls(reason: "why"))
        #expect(classify(CURLE_OPERATION_TIMEDOUT) == .timeout)
        #expect(classify(CURLE_WRITE_ERROR, exceeded: true) == .responseTooLarge(limit: 10))
        #expect(classify(CURLE_WRITE_ERROR) == .transport(curlCode: Int(CURLE_WRITE_ERROR.rawValue), reason: "why"))
        #expect(classify(CURLE_RECV_ERROR).code == "http_transport_failure")
        #expect(classify(CURLE_PARTIAL_FILE) == .incompleteResponse(host: "idp.example:443"))
        #expect(classify(CURLE_GOT_NOTHING) == .incompleteResponse(host: "idp.example:443"))
        let alert = "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required"
        #expect(HTTPClient.classify(CURLE_RECV_ERROR, host: "h", reason: alert, exceededLimit: false, limit: 1) == .tls(reason: alert))
    }

    @Test func hostForMetricsNeverCarriesPathOrQuery() {
        #expect(HTTPClient.hostForMetrics("https://user:pw@idp.example:8443/token?code=secret") == "idp.example:8443")
        #expect(HTTPClient.hostForMetrics("http://127.0.0.1/x") == "127.0.0.1")
        #expect(HTTPClient.hostForMetrics("garbage") == "invalid")
    }
}
