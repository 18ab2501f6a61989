import HTTPTypes
public import Hummingbird
import Logging
import NIOCore
import Synchronization

/// Cancelling the server task at the end of a test makes Hummingbird log shutdown noise at error level.
let quietLogger: Logger = {
    var logger = Logger(label: "loopback-test")
    logger.logLevel = .critical
    return logger
}()

/// A real Hummingbird server on 127.0.0.1 with an ephemeral port, for tests that need an HTTP peer.
public struct LoopbackHTTPServer: Sendable {
    public let port: Int
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Runs `body` while a server built from `router` listens; stops the server afterwards.
    public static func with<Result: Sendable>(
        router: Router<BasicRequestContext>,
        _ body: @Sendable (LoopbackHTTPServer) async throws -> Result
    ) async throws -> Result {
        try FastTests.refuse("starts a loopback HTTP server")
        let (portStream, portContinuation) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "loopback-test"),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: quietLogger
        )
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await app.runService(gracefulShutdownSignals: []) }
            var iterator = portStream.makeAsyncIterator()
            guard let port = await iterator.next(), port > 0 else {
                group.cancelAll()
                throw LoopbackServerError.didNotStart
            }
            do {
                let result = try await body(LoopbackHTTPServer(port: port))
                group.cancelAll()
                return result
            } catch {
                group.cancelAll()
                throw error
            }
        }
    }

    /// The router most HTTP-client tests use: fixed behaviours addressed by path.
    public static func testRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.get("/hello") { _, _ in "hello" }
        router.get("/status/{code}") { _, context in
            let code = try context.parameters.require("code", as: Int.self)
            return Response(status: .init(code: code), body: .init(byteBuffer: ByteBuffer(string: "status \(code)")))
        }
        router.get("/slow") { request, _ in
            let milliseconds = request.uri.queryParameters.get("ms", as: Int.self) ?? 1000
            try await Task.sleep(for: .milliseconds(milliseconds))
            return "slow"
        }
        router.get("/bytes") { request, _ in
            let count = request.uri.queryParameters.get("count", as: Int.self) ?? 0
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(repeating: UInt8(ascii: "x"), count: count)))
        }
        // Announces 100 bytes, sends 10, then drops the connection.
        router.get("/truncated") { _, _ in
            Response(
                status: .ok,
                body: ResponseBody(contentLength: 100) { writer in
                    try await writer.write(ByteBuffer(repeating: UInt8(ascii: "x"), count: 10))
                    throw LoopbackServerError.cutOnPurpose
                })
        }
        router.post("/echo") { request, _ in
            let body = try await request.body.collect(upTo: 1 << 20)
            var headers = HTTPFields()
            headers[.contentType] = request.headers[.contentType] ?? "application/octet-stream"
            if let custom = HTTPField.Name("X-Test"), let value = request.headers[custom] {
                headers[custom] = value
            }
            // Trace context, W3C's or the in-memory test tracer's, comes back for the tracing tests.
            for field in request.headers where field.name.canonicalName == "traceparent" || field.name.canonicalName.hasPrefix("in-memory-") {
                headers.append(field)
            }
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        router.put("/method") { request, _ in request.method.rawValue }
        router.delete("/method") { request, _ in request.method.rawValue }
        router.get("/redirect") { _, _ in
            Response(status: .found, headers: [.location: "/hello"])
        }
        router.get("/redirect-loop") { _, _ in
            Response(status: .found, headers: [.location: "/redirect-loop"])
        }
        return router
    }
}

public enum LoopbackServerError: Error { case didNotStart, cutOnPurpose }
