import CCurl
public import Logging
import Metrics
import NIOCore
public import NIOPosix
import Synchronization
public import Tracing

#if canImport(Glibc)
import Glibc
#endif

/// Outbound HTTP over libcurl.
///
/// Every transfer runs through libcurl's multi interface, non-blocking (a DNS lookup given up is
/// not waited for: `CURLOPT_QUICK_EXIT`): the caller's thread (an event loop) starts it and sends
/// the request (``CurlEngine``), without a thread per request; callers simply `await`, and are
/// resumed on their own executor. Given an event loop group, the client has an engine per loop:
/// that loop makes and reads its connections and completes its calls (``CurlBridges``). Without
/// one, a reactor thread waits for the answers. Connections, DNS answers, TLS sessions and the CA
/// store are kept for reuse between requests.
public final class HTTPClient: Sendable {
    public let configuration: HTTPClientConfiguration
    /// The engines, each with its reactor thread (which waits for libcurl's timer and for what
    /// no loop can carry); the first serves callers that are on none of the group's loops.
    let engines: [(engine: CurlEngine, reactor: pthread_t)]
    private let engineByLoop: [ObjectIdentifier: CurlEngine]
    /// The first engine (the only one without a group).
    var engine: CurlEngine { engines[0].engine }
    private let logger: Logger
    private let tracer: (any Tracer)?
    private let isShutdown = Atomic<Bool>(false)

    static let unguardedCurlCalls = Atomic<Int>(0)

    /// libcurl calls made by any client without its lock (on an event loop or anywhere else), each
    /// also logged as an error: 0 unless the confinement the client relies on is broken. Under the
    /// lock only libcurl's multi interface is used, non-blocking, and while a transfer that could
    /// read a file (the CA bundle before it is cached, a client key) is in flight, only the reactor
    /// drives libcurl.
    public static var blockingCallsOnEventLoop: Int { unguardedCurlCalls.load(ordering: .relaxed) }

    /// - Parameter tracer: when set, each request is a client span, child of the caller's
    ///   (``ServiceContext/current``), and carries its trace context (`traceparent`) to the server.
    /// - Parameter eventLoopGroup: when set, connections are made and read by its loops, and libcurl
    ///   acts on the answers there (``CurlBridges``); without it, the reactor thread waits for them.
    public init(
        configuration: HTTPClientConfiguration = .init(), logger: Logger = Logger(label: "relais.http-client"), tracer: (any Tracer)? = nil,
        eventLoopGroup: MultiThreadedEventLoopGroup? = nil
    ) {
        self.configuration = configuration
        self.tracer = tracer
        self.logger = logger
        CurlGlobal.ensureInitialized()
        let loops: [(any EventLoop)?] = eventLoopGroup.map { Array($0.makeIterator()) } ?? [nil]
        var engines: [(engine: CurlEngine, reactor: pthread_t)] = []
        var engineByLoop: [ObjectIdentifier: CurlEngine] = [:]
        for loop in loops {
            let engine = CurlEngine(configuration: configuration, logger: logger, loop: loop)
            engines.append((engine, CurlReactor.spawn(engine: engine)))
            if let loop { engineByLoop[ObjectIdentifier(loop)] = engine }
        }
        self.engines = engines
        self.engineByLoop = engineByLoop
    }

    /// A client released without ``shutdown()`` still stops its threads, once their transfers are done.
    deinit {
        if !isShutdown.load(ordering: .acquiring) {
            for (engine, reactor) in engines {
                engine.mailbox.requestStop()
                pthread_detach(reactor)
            }
        }
    }

    /// Sends the request and returns the response, whatever its status.
    /// - Throws: ``HTTPClientError`` when no response was received; `CancellationError` when the
    ///   calling task was cancelled (the transfer is aborted at once, its connection closed).
    public func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        guard let tracer else { return try await transfer(request) }
        return try await traced(request, tracer: tracer)
    }

    /// The span records the method, the server, the path (never the query, headers or body, which
    /// carry codes and tokens), the status and libcurl's new connections; a failure, its code only.
    private func traced(_ request: HTTPClientRequest, tracer: any Tracer) async throws -> HTTPClientResponse {
        let span = tracer.startSpan(request.operation ?? request.method.rawValue, context: ServiceContext.current ?? .topLevel, ofKind: .client)
        defer { span.end() }
        let target = HTTPClientTarget(request.url)
        span.attributes["http.request.method"] = request.method.rawValue
        span.attributes["server.address"] = target.host
        span.attributes["server.port"] = target.port
        span.attributes["url.path"] = target.path
        var propagated = request
        tracer.inject(span.context, into: &propagated.headers, using: HeaderListInjector())
        do {
            let response = try await transfer(propagated)
            span.attributes["http.response.status_code"] = response.status
            span.attributes["relais.http.new_connections"] = response.newConnections
            if response.status >= 500 { span.setStatus(SpanStatus(code: .error)) }
            return response
        } catch {
            span.setStatus(SpanStatus(code: .error, message: (error as? HTTPClientError)?.code ?? "cancelled"))
            throw error
        }
    }

    private func transfer(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        guard !isShutdown.load(ordering: .acquiring) else { throw HTTPClientError.shutdown }
        let start = ContinuousClock.now
        let host = Self.hostForMetrics(request.url)
        // The total timeout counts from the call, not from when the transfer got a slot.
        let job = CurlJob(request: request, deadline: start + (request.timeout ?? configuration.totalTimeout))
        // The calling loop's engine: the answer is read and the call completed on this thread.
        let engine = MultiThreadedEventLoopGroup.currentEventLoop.flatMap { engineByLoop[ObjectIdentifier($0)] } ?? engines[0].engine
        do {
            let response = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in engine.submit(job, continuation) }
            } onCancel: {
                engine.mailbox.cancel(job)
            }
            record(host: host, outcome: String(response.status), since: start)
            logger.debug(
                "outbound request",
                metadata: ["method": "\(request.method.rawValue)", "host": "\(host)", "status": "\(response.status)"]
            )
            return response
        } catch let error as HTTPClientError {
            record(host: host, outcome: error.code, since: start)
            logger.debug("outbound request failed", metadata: ["host": "\(host)", "error": "\(error.code)"])
            throw error
        } catch {
            record(host: host, outcome: "cancelled", since: start)
            throw error
        }
    }

    /// Refuses new calls, lets those already made finish (each within its own timeout), then stops
    /// the reactor threads once they have freed every libcurl handle; later calls throw `.shutdown`.
    public func shutdown() async throws {
        guard !isShutdown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for (engine, reactor) in engines {
            await engine.mailbox.stop()
            // The thread has nothing left to do but return: the join does not wait for work.
            pthread_join(reactor, nil)
        }
    }

    /// Maps a libcurl result to the typed error callers handle.
    static func classify(_ code: CURLcode, host: String, reason rawReason: String, exceededLimit: Bool, limit: Int) -> HTTPClientError {
        let reason = rawReason.isEmpty ? String(cString: curl_easy_strerror(code)) : rawReason
        switch code {
        case CURLE_OPERATION_TIMEDOUT:
            return .timeout
        case CURLE_COULDNT_CONNECT:
            return .connectionRefused(host: host)
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return .dnsFailure(host: host)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_CRL_BADFILE,
            CURLE_SSL_ENGINE_NOTFOUND, CURLE_SSL_ENGINE_SETFAILED, CURLE_SSL_INVALIDCERTSTATUS, CURLE_SSL_CLIENTCERT:
            return .tls(reason: reason)
        case CURLE_WRITE_ERROR where exceededLimit, CURLE_FILESIZE_EXCEEDED:
            return .responseTooLarge(limit: limit)
        case CURLE_RECV_ERROR where reason.contains("SSL routines"), CURLE_SEND_ERROR where reason.contains("SSL routines"):
            // With TLS 1.3 the server judges the client certificate after the handshake, so a
            // refused certificate arrives as a TLS alert on the first read.
            return .tls(reason: reason)
        case CURLE_PARTIAL_FILE, CURLE_GOT_NOTHING:
            return .incompleteResponse(host: host)
        case CURLE_TOO_MANY_REDIRECTS:
            return .tooManyRedirects
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return .invalidURL
        default:
            return .transport(curlCode: Int(code.rawValue), reason: reason)
        }
    }

    private func record(host: String, outcome: String, since start: ContinuousClock.Instant) {
        Metrics.Timer(
            label: "relais_http_client_request_duration_seconds",
            dimensions: [("host", host), ("outcome", outcome)],
            preferredDisplayUnit: .seconds
        ).recordInterval(since: start)
    }

    /// "host:port" of a URL, for metrics and logs: never the path or query, which may carry codes.
    static func hostForMetrics(_ url: String) -> String { HTTPClientTarget(url).authority }
}

extension Metrics.Timer {
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        let (seconds, attoseconds) = elapsed.components
        recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
