import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import RelaisConfig
import RelaisHTTPClient
import RelaisStore
import RelaisTestSupport
import ServiceLifecycle
import Synchronization
import Testing
import Tracing

@testable import RelaisServer

func quietLogger() -> Logger {
    var logger = Logger(label: "relais-test")
    logger.logLevel = .critical
    return logger
}

func testConfiguration(_ configure: (inout RelaisConfiguration) -> Void = { _ in }) -> RelaisConfiguration {
    var configuration = RelaisConfiguration()
    configuration.server.environment = .development
    configuration.server.port = 0
    configuration.store.kind = .embedded
    configuration.httpClient.maxConcurrentRequests = 2
    configure(&configuration)
    return configuration
}

/// How a test reaches the application: `.router` needs no socket; `.live` serves over loopback,
/// which `make test-fast` refuses (`FastTests`).
enum Transport { case router, live }

/// - Parameters:
///   - tracer: builds the dependencies as `serve` does with traces on (a traced store and client).
///   - routes: more routes, given the dependencies they may use.
func withApplication(
    _ configuration: RelaisConfiguration = testConfiguration(),
    store: (any KeyValueStore)? = nil,
    tracer: (any Tracer)? = nil,
    testing: Transport = .router,
    routes: @escaping (Router<RelaisRequestContext>, RelaisDependencies) -> Void = { _, _ in },
    _ body: @Sendable (any TestClientProtocol) async throws -> Void
) async throws {
    let dependencies =
        tracer.map { RelaisDependencies.make(for: configuration, logger: quietLogger(), tracer: $0) }
        ?? RelaisDependencies(store: store ?? EmbeddedStore(), httpClient: HTTPClient(configuration: configuration.httpClient))
    let app = RelaisApplication.makeApplication(
        configuration: configuration, dependencies: dependencies, logger: quietLogger(), additionalRoutes: { routes($0, dependencies) }
    )
    do {
        if testing == .live { try FastTests.refuse("serves the application over loopback (.live)") }
        try await app.test(testing == .live ? .live : .router, body)
    } catch {
        await dependencies.shutdown()
        throw error
    }
    await dependencies.shutdown()
}

struct ErrorBody: Decodable, Equatable {
    let error: String
    let error_description: String
    let request_id: String?
}

func decode<T: Decodable>(_ type: T.Type, _ buffer: ByteBuffer) throws -> T {
    try JSONDecoder().decode(type, from: Data(buffer.readableBytesView))
}

@Suite struct ServerTests {
    @Test func healthzAnswersWithARequestID() async throws {
        try await withApplication { client in
            try await client.execute(uri: "/healthz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"status":"ok"}"#)
                #expect(response.headers[.contentType] == "application/json")
                let id = try #require(response.headers[HTTPField.Name("X-Request-Id")!])
                #expect(id.count == 16)
            }
        }
    }

    @Test func aPlainIncomingRequestIDIsKeptAndAForgedOneReplaced() async throws {
        try await withApplication { client in
            let header = HTTPField.Name("X-Request-Id")!
            try await client.execute(uri: "/healthz", method: .get, headers: [header: "lb-1234.abc_DEF"]) { response in
                #expect(response.headers[header] == "lb-1234.abc_DEF")
            }
            try await client.execute(uri: "/healthz", method: .get, headers: [header: "evil\"} injected"]) { response in
                #expect(response.headers[header] != "evil\"} injected")
                #expect(response.headers[header]?.count == 16)
            }
        }
    }

    @Test func unknownRoutesGetTheUniformJSONError() async throws {
        try await withApplication { client in
            try await client.execute(uri: "/no/such/thing", method: .get) { response in
                #expect(response.status == .notFound)
                let body = try decode(ErrorBody.self, response.body)
                #expect(body.error == "not_found")
                #expect(body.request_id == response.headers[HTTPField.Name("X-Request-Id")!])
                #expect(response.headers[.cacheControl] == "no-store")
            }
        }
    }

    /// One writer for every JSON error body (the server's and the relay's): keys sorted, the
    /// optional members left out, nothing escaped that JSON does not require.
    @Test func everyJSONErrorBodyIsWrittenOneWay() {
        let full = JSONErrorBody.serialized(code: "invalid_grant", description: "a \"b\"/c", reason: "session_ended", requestID: "r-1")
        #expect(String(decoding: full, as: UTF8.self) == #"{"error":"invalid_grant","error_description":"a \"b\"/c","error_reason":"session_ended","request_id":"r-1"}"#)
        let bare = JSONErrorBody.serialized(code: "not_found", description: "No such endpoint.", requestID: nil)
        #expect(String(decoding: bare, as: UTF8.self) == #"{"error":"not_found","error_description":"No such endpoint."}"#)
    }

    @Test func oversizedBodiesAreRefusedWith413() async throws {
        let configuration = testConfiguration { $0.server.maxBodyBytes = 1024 }
        try await withApplication(configuration) { client in
            // Declared too large: refused before reading.
            try await client.execute(uri: "/healthz", method: .post, body: ByteBuffer(repeating: 0x61, count: 4096)) { response in
                #expect(response.status == .contentTooLarge)
                let body = try decode(ErrorBody.self, response.body)
                #expect(body.error == "request_too_large")
            }
            // Within the limit, the request reaches routing (POST /healthz has no handler: 405, GET only).
            try await client.execute(uri: "/healthz", method: .post, body: ByteBuffer(repeating: 0x61, count: 512)) { response in
                #expect(response.status == .methodNotAllowed)
            }
        }
    }

    @Test func readyzReflectsTheRedisStore() async throws {
        let redis = try await RedisServerProcess.launch()
        // Generous timeouts: readiness follows the store's state; a stopped Redis refuses at once.
        var redisConfiguration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(10), poolSize: 1)
        try redisConfiguration.apply(url: redis.url)
        let store = RedisStore(configuration: redisConfiguration, logger: quietLogger())
        // Connected first: a request's store budget may not cover a first connection while the
        // suite starts its redis-servers.
        #expect(try await eventually { (try? await store.ping()) != nil })
        try await withApplication(store: store) { client in
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .ok)
                #expect(String(buffer: response.body) == #"{"status":"ready","checks":{"store":"ok"}}"#)
            }
            redis.stop()
            let start = ContinuousClock.now
            try await client.execute(uri: "/readyz", method: .get) { response in
                #expect(response.status == .serviceUnavailable)
                #expect(String(buffer: response.body) == #"{"status":"unavailable","checks":{"store":"store_unavailable"}}"#)
            }
            #expect(ContinuousClock.now - start < .seconds(20))  // answered, not hung on the dead store
            try await redis.start()
            // Ready again once the store reconnects (its first call after the restart may fail).
            #expect(
                try await eventually(every: .milliseconds(100)) {
                    try await client.execute(uri: "/readyz", method: .get) { $0.status == .ok }
                })
        }
        redis.stop()
    }

    @Test func metricsExposeRequestsStoreAndOutboundLatency() async throws {
        let redis = try await RedisServerProcess.launch()
        var redisConfiguration = RedisConfiguration(poolSize: 1)
        try redisConfiguration.apply(url: redis.url)
        let store = RedisStore(configuration: redisConfiguration, logger: quietLogger())
        try await withApplication(store: store) { client in
            try await client.execute(uri: "/readyz", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/healthz", method: .get) { #expect($0.status == .ok) }
            try await client.execute(uri: "/healthz", method: .get) { #expect($0.status == .ok) }
            // A method of the client's invention is counted, as "other": it cannot add series.
            for invented in ["BREW", "WHEN"] {
                try await client.execute(uri: "/healthz", method: HTTPRequest.Method(invented)!) { #expect($0.status.code >= 400) }
            }
            // An outbound request through the libcurl client lands in the same registry.
            let outbound = HTTPClient(configuration: .init(maxConcurrentRequests: 1))
            _ = try? await outbound.send(.init(url: "http://127.0.0.1:\(try FreePort.find())/"))
            try await outbound.shutdown()
            try await client.execute(uri: "/metrics", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("text/plain; version=0.0.4") == true)
                let text = String(buffer: response.body)
                #expect(text.contains(#"relais_http_requests_total{route="/healthz",method="GET",status="200"} "#))
                #expect(text.contains(#"method="other""#) && !text.contains("BREW") && !text.contains("WHEN"))
                #expect(text.contains(#"relais_http_request_duration_seconds_bucket{route="/readyz",method="GET",status="200""#))
                #expect(text.contains(#"relais_store_command_duration_seconds_bucket{command="PING",outcome="ok""#))
                #expect(text.contains(#"relais_http_client_request_duration_seconds_bucket{host="127.0.0.1:"#))
                #expect(text.contains(#"outcome="http_connection_refused""#))
            }
        }
        redis.stop()
    }

    @Test func gracefulShutdownDrainsInFlightRequests() async throws {
        let configuration = testConfiguration()
        let dependencies = RelaisDependencies(store: EmbeddedStore(), httpClient: HTTPClient(configuration: configuration.httpClient))
        let (ports, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let (slowStarted, slowStartedContinuation) = AsyncStream.makeStream(of: Void.self)
        let group = ServerSkeleton.makeServiceGroup(
            configuration: configuration,
            dependencies: dependencies,
            logger: quietLogger(),
            signals: [],
            onServerRunning: { channel in portContinuation.yield(channel.localAddress?.port ?? 0) },
            additionalRoutes: { router in
                router.get("/test/slow") { _, _ in
                    slowStartedContinuation.yield()
                    // Still in flight when the shutdown begins: what the test drains.
                    try await Task.sleep(for: .milliseconds(800))
                    return "finished"
                }
            }
        )
        let client = HTTPClient(configuration: .init(maxConcurrentRequests: 2))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var iterator = ports.makeAsyncIterator()
            let port = try #require(await iterator.next())
            let slow = Task { try await client.send(.init(url: "http://127.0.0.1:\(port)/test/slow")) }
            // Shut down once the request is in its handler.
            var started = slowStarted.makeAsyncIterator()
            _ = await started.next()
            await group.triggerGracefulShutdown()
            let response = try await slow.value
            #expect(response.status == 200)
            #expect(response.bodyText == "finished")
            // The drain watcher may not have been scheduled yet when the shutdown began: wait for it.
            #expect(try await eventually { dependencies.drainState.isDraining })
            try await tasks.waitForAll()
        }
        // The listener is closed once the group has stopped.
        let port = try FreePort.find()
        await #expect(throws: HTTPClientError.self) { try await client.send(.init(url: "http://127.0.0.1:\(port)/healthz")) }
        try await client.shutdown()
        await dependencies.shutdown()
    }

    @Test func jsonLogLinesAreValidJSON() throws {
        let quoted = LogText.quoted("a \"quote\", a \\ and a\nnewline\u{1}")
        #expect(quoted == #""a \"quote\", a \\ and a\nnewline\u0001""#)
        let encoded = LogText.json(.dictionary(["b": .array([.string("x"), .stringConvertible(2)]), "a": .string("y")]))
        #expect(encoded == #"{"a":"y","b":["x","2"]}"#)
        let object = try JSONSerialization.jsonObject(with: Data(encoded.utf8)) as? [String: Any]
        #expect(object?["a"] as? String == "y")
        let timestamp = LogText.timestamp()
        #expect(timestamp.count == 24 && timestamp.hasSuffix("Z"))
        #expect(LogText.timestamp(0) == "1970-01-01T00:00:00.000Z")
        #expect(LogText.timestamp(951_782_400.5) == "2000-02-29T00:00:00.500Z")
        #expect(LogText.timestamp(1_795_334_017.123) == "2026-11-22T07:53:37.123Z")
        #expect(LogText.timestamp(4_102_444_799.999) == "2099-12-31T23:59:59.999Z")
    }
}

/// The text log format: one event, one line, whatever the strings in it.
@Suite struct TextLogTests {
    final class Capture: Sendable {
        let lines = Mutex<[String]>([])
    }

    @Test func requestBorneStringsCannotForgeOrHideLines() {
        let capture = Capture()
        var logger = Logger(label: "relais.test") { label in LineLogHandler(label: label, level: .trace, format: .text) { line in capture.lines.withLock { $0.append(line) } } }
        logger[metadataKey: "request_id"] = "r-1"
        logger.warning(
            "provider returned an error\nfake line",
            metadata: [
                "error": "server_error\n2026-01-01T00:00:00.000Z critical relais: FORGED", "empty": "", "plain": "fc",
                "quote": #"a "b" = c\"#, "bidi": "abc\u{202E}fed\u{2028}\u{85}\u{7F}\u{1B}[2K\r\t",
            ]
        )
        let lines = capture.lines.withLock { $0 }
        #expect(lines.count == 1)
        let line = lines[0]
        #expect(line.hasSuffix("\n") && line.dropLast().allSatisfy { $0 != "\n" && $0 != "\r" })
        #expect(line.dropLast().unicodeScalars.allSatisfy { $0.value >= 0x20 && !(0x7F...0x9F).contains($0.value) && ![0x2028, 0x202E].contains($0.value) })
        let body = line.drop { $0 != " " }.dropFirst()
        #expect(body.hasPrefix("warning relais.test: provider returned an error\\nfake line "))
        #expect(line.contains(#" error="server_error\n2026-01-01T00:00:00.000Z critical relais: FORGED""#))
        #expect(line.contains(#" empty="" "#) && line.contains(" plain=fc ") && line.contains(" request_id=r-1"))
        #expect(line.contains(#" quote="a \"b\" = c\\""#))
        #expect(line.contains(#" bidi=abc\u202efed\u2028\u0085\u007f\u001b[2K\r\t "#))
    }

    /// A quote followed by a combining mark is one Character but still a quote to a JSON parser.
    @Test func jsonLinesEscapeEveryQuoteScalar() throws {
        let quoted = LogText.quoted("a\"\u{301}b\u{2028}")
        #expect(quoted == "\"a\\\"\u{301}b\\u2028\"")
        let parsed = try JSONSerialization.jsonObject(with: Data(("[" + quoted + "]").utf8)) as? [String]
        #expect(parsed == ["a\"\u{301}b\u{2028}"])
    }

    /// Escaped scalar by scalar as before the byte-wise writer: every C0 and C1 control, DEL, the
    /// line separators, overrides and isolates; any other scalar of one to four bytes as it is.
    @Test func everyScalarIsEscapedOrKeptAsItIs() {
        let kept = "plain é © \u{A0} € … \u{2027} \u{202F} \u{2065} \u{206A} 😀 \u{10FFFF} \u{FFFD}"
        #expect(LogText.escaped(kept) == kept)
        let samples: [(String, String)] = [
            ("\u{0}\u{1F}\u{7F}", #"\u0000\u001f\u007f"#), ("\u{80}\u{9F}", #"\u0080\u009f"#),
            ("x\u{2028}y\u{2029}\u{202A}\u{202E}z", #"x\u2028y\u2029\u202a\u202ez"#), ("\u{2066}\u{2069}", #"\u2066\u2069"#),
            ("é\\\"😀\n", #"é\\"😀\n"#),
        ]
        for (input, expected) in samples { #expect(LogText.escaped(input) == expected) }
        #expect(LogText.escaped("\"", quotes: true) == #"\""#)
    }

    /// Printable ASCII is kept whole, from the space to the tilde; one special byte anywhere in it
    /// still takes the escaping path.
    @Test func printableASCIIIsKeptWholeAndEachSpecialByteStillEscaped() {
        let printable = String(decoding: Array(0x20...0x7E).filter { $0 != 0x5C }, as: UTF8.self)
        #expect(LogText.escaped(printable) == printable)
        #expect(LogText.escaped(printable, quotes: true) == printable.replacingOccurrences(of: "\"", with: #"\""#))
        #expect(LogText.escaped("") == "" && LogText.escaped("", quotes: true) == "")
        let long = String(repeating: "Mozilla/5.0 (X11) ", count: 20)
        for (special, expected) in [("\\", #"\\"#), ("\u{7F}", #"\u007f"#), ("\u{1F}", #"\u001f"#), ("\n", #"\n"#), ("\u{85}", #"\u0085"#)] {
            #expect(LogText.escaped(long + special + long) == long + expected + long)
            #expect(LogText.escaped(special + long) == expected + long)
            #expect(LogText.escaped(long + special) == long + expected)
        }
        #expect(LogText.escaped(long + "\"" + long) == long + "\"" + long)
        #expect(LogText.escaped(long + "\"" + long, quotes: true) == long + #"\""# + long)
    }
}
