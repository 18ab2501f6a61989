import CCurl
public import Logging
import Metrics
import NIOPosix
import Synchronization
public import Tracing

#if canImport(Glibc)
import Glibc
#endif

/// Outbound HTTP over libcurl.
///
/// `curl_easy_perform` blocks, so every transfer runs on the client's own worker threads
/// (a ``NIOThreadPool``), never on an event loop; callers simply `await`. Easy handles are pooled
/// and reused, which keeps connections to the same host alive between requests.
public final class HTTPClient: Sendable {
    public let configuration: HTTPClientConfiguration
    private let threadPool: NIOThreadPool
    private let handles: CurlHandlePool
    private let logger: Logger
    private let tracer: (any Tracer)?
    private let isShutdown = Atomic<Bool>(false)

    /// - Parameter tracer: when set, each request is a client span, child of the caller's
    ///   (``ServiceContext/current``), and carries its trace context (`traceparent`) to the server.
    public init(configuration: HTTPClientConfiguration = .init(), logger: Logger = Logger(label: "relais.http-client"), tracer: (any Tracer)? = nil) {
        self.configuration = configuration
        self.tracer = tracer
        self.threadPool = NIOThreadPool(numberOfThreads: max(1, configuration.maxConcurrentRequests))
        self.handles = CurlHandlePool(capacity: max(1, configuration.maxConcurrentRequests))
        self.logger = logger
        CurlGlobal.ensureInitialized()
        threadPool.start()
    }

    /// Sends the request and returns the response, whatever its status.
    /// - Throws: ``HTTPClientError`` when no response was received; `CancellationError` when the
    ///   calling task was cancelled (the transfer is aborted at libcurl's next progress check).
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
        let cancellation = CurlCancellation()
        let start = ContinuousClock.now
        let host = Self.hostForMetrics(request.url)
        do {
            let response = try await withTaskCancellationHandler {
                try await threadPool.runIfActive { [self] in
                    // The total timeout counts from the call, not from when a worker picked it up.
                    let remaining = (request.timeout ?? configuration.totalTimeout) - (ContinuousClock.now - start)
                    guard remaining > .zero else { throw HTTPClientError.timeout }
                    return try perform(request, timeout: remaining, cancellation: cancellation)
                }
            } onCancel: {
                cancellation.flag.store(true, ordering: .relaxed)
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

    /// Stops the worker threads after in-flight transfers finish; later calls throw `.shutdown`.
    public func shutdown() async throws {
        guard !isShutdown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        try await threadPool.shutdownGracefully()
        handles.drain()
    }

    // MARK: - The transfer itself (runs on a worker thread)

    private func perform(_ request: HTTPClientRequest, timeout: Duration, cancellation: CurlCancellation) throws -> HTTPClientResponse {
        if cancellation.flag.load(ordering: .relaxed) { throw CancellationError() }
        let handle = handles.checkOut()
        let state = CurlTransferState(maxBytes: configuration.maxResponseBytes)
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }

        let curl = handle.raw
        // Reset clears every option but keeps the handle's live connections and DNS cache.
        curl_easy_reset(curl)
        try configure(curl, for: request, timeout: timeout, state: state, cancellation: cancellation, headerList: &headerList)

        let code = curl_easy_perform(curl)
        // The handle goes back only after perform: its connection cache is what keep-alive reuses.
        defer { handles.checkIn(handle) }
        if code != CURLE_OK {
            if cancellation.flag.load(ordering: .relaxed) { throw CancellationError() }
            throw Self.classify(code, host: Self.hostForMetrics(request.url), reason: state.errorMessage, exceededLimit: state.exceededLimit, limit: configuration.maxResponseBytes)
        }
        var status = 0
        _ = relais_curl_getinfo_long(curl, CURLINFO_RESPONSE_CODE, &status)
        var connects = 0
        _ = relais_curl_getinfo_long(curl, CURLINFO_NUM_CONNECTS, &connects)
        // With redirects off, a 3xx is returned as data; with them on, libcurl reports loops itself.
        return HTTPClientResponse(status: status, headers: state.headers, body: state.body, newConnections: connects)
    }

    private func configure(
        _ curl: UnsafeMutableRawPointer,
        for request: HTTPClientRequest,
        timeout: Duration,
        state: CurlTransferState,
        cancellation: CurlCancellation,
        headerList: inout UnsafeMutablePointer<curl_slist>?
    ) throws {
        func check(_ code: CURLcode) throws {
            if code != CURLE_OK {
                throw Self.classify(code, host: Self.hostForMetrics(request.url), reason: state.errorMessage, exceededLimit: false, limit: configuration.maxResponseBytes)
            }
        }
        func set(_ option: CURLoption, _ value: Int) throws { try check(relais_curl_setopt_long(curl, option, value)) }
        func set(_ option: CURLoption, _ value: String) throws { try check(relais_curl_setopt_string(curl, option, value)) }

        try set(CURLOPT_URL, request.url)
        try set(CURLOPT_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_NOSIGNAL, 1)  // timeouts must not use SIGALRM in a multi-threaded process
        try check(relais_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, state.errorBuffer))

        try set(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.roundedUpMilliseconds)
        try set(CURLOPT_TIMEOUT_MS, timeout.roundedUpMilliseconds)
        try check(relais_curl_setopt_offset(curl, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(configuration.maxResponseBytes)))

        try set(CURLOPT_FOLLOWLOCATION, configuration.followRedirects ? 1 : 0)
        try set(CURLOPT_MAXREDIRS, configuration.maxRedirects)
        if !configuration.reuseConnections {
            try set(CURLOPT_FRESH_CONNECT, 1)
            try set(CURLOPT_FORBID_REUSE, 1)
        }

        try set(CURLOPT_SSL_VERIFYPEER, configuration.tls.verifyPeer ? 1 : 0)
        try set(CURLOPT_SSL_VERIFYHOST, configuration.tls.verifyPeer ? 2 : 0)
        if let path = configuration.tls.caBundlePath { try set(CURLOPT_CAINFO, path) }
        if let path = configuration.tls.clientCertificatePath { try set(CURLOPT_SSLCERT, path) }
        if let path = configuration.tls.clientKeyPath { try set(CURLOPT_SSLKEY, path) }
        if let password = configuration.tls.clientKeyPassword { try set(CURLOPT_KEYPASSWD, password) }
        // An explicit empty proxy disables libcurl's reading of http_proxy/https_proxy: only config decides.
        try set(CURLOPT_PROXY, configuration.proxy ?? "")
        if let noProxy = configuration.noProxy { try set(CURLOPT_NOPROXY, noProxy) }
        try set(CURLOPT_USERAGENT, configuration.userAgent)

        switch request.method {
        case .get: try set(CURLOPT_HTTPGET, 1)
        case .head: try set(CURLOPT_NOBODY, 1)
        case .post: try set(CURLOPT_POST, 1)
        case .put, .delete, .patch: try set(CURLOPT_CUSTOMREQUEST, request.method.rawValue)
        }
        if let body = request.body {
            try check(relais_curl_setopt_offset(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            // COPYPOSTFIELDS copies: the Swift array need not outlive this call.
            try body.withUnsafeBufferPointer { buffer in
                try check(relais_curl_setopt_pointer(curl, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!)))
            }
        }

        // "Expect:" stops libcurl's 100-continue round trip on POST bodies.
        for line in request.headers.map({ "\($0.name): \($0.value)" }) + ["Expect:"] {
            guard let appended = curl_slist_append(headerList, line) else { throw HTTPClientError.transport(curlCode: -1, reason: "out of memory") }
            headerList = appended
        }
        try check(relais_curl_setopt_slist(curl, CURLOPT_HTTPHEADER, headerList))

        let userData = Unmanaged.passUnretained(state).toOpaque()
        try check(relais_curl_setopt_callback(curl, CURLOPT_WRITEFUNCTION, curlWriteCallback))
        try check(relais_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, userData))
        try check(relais_curl_setopt_callback(curl, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
        try check(relais_curl_setopt_pointer(curl, CURLOPT_HEADERDATA, userData))
        try set(CURLOPT_NOPROGRESS, 0)
        try check(relais_curl_setopt_progress(curl, CURLOPT_XFERINFOFUNCTION, curlProgressCallback))
        try check(relais_curl_setopt_pointer(curl, CURLOPT_XFERINFODATA, Unmanaged.passUnretained(cancellation).toOpaque()))
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
