import CCurl
import Glibc
import Synchronization

/// A call: what to send and by when. `cancelled` is set by the calling task, so that a submission
/// reaching the multi handle after its cancellation is refused there.
final class CurlJob: Sendable {
    let request: HTTPClientRequest
    let deadline: ContinuousClock.Instant
    let cancelled = Atomic<Bool>(false)

    init(request: HTTPClientRequest, deadline: ContinuousClock.Instant) {
        self.request = request
        self.deadline = deadline
    }
}

typealias CurlContinuation = CheckedContinuation<HTTPClientResponse, any Error>

/// One libcurl easy handle, kept between transfers for its options' allocations; connections live
/// in the multi (and share) handle, not here. Used under the client's lock only.
final class CurlEasyHandle {
    let raw: UnsafeMutableRawPointer

    init() {
        guard let handle = curl_easy_init() else {
            preconditionFailure("curl_easy_init failed: out of memory")
        }
        raw = handle
    }

    deinit { curl_easy_cleanup(raw) }
}

/// Idle easy handles, reused as a free list. Used under the client's lock only, which it checks.
final class CurlEasyHandles {
    private var idle: [CurlEasyHandle] = []
    private let capacity: Int
    private let confinement: CurlConfinement

    init(capacity: Int, confinement: CurlConfinement) {
        self.capacity = capacity
        self.confinement = confinement
    }

    func checkOut() -> CurlEasyHandle {
        confinement.check("curl_easy_init")
        return idle.popLast() ?? CurlEasyHandle()
    }

    /// Reset clears every option (and the pointers into the finished transfer's state).
    func checkIn(_ handle: CurlEasyHandle) {
        confinement.check("curl_easy_reset")
        curl_easy_reset(handle.raw)
        if idle.count < capacity { idle.append(handle) }
    }

    func drain() {
        confinement.check("curl_easy_cleanup")
        idle.removeAll()
    }
}

enum CurlGlobal {
    // curl_global_init is not thread-safe: a static let runs it exactly once.
    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    static func ensureInitialized() {
        precondition(initialized, "curl_global_init failed")
    }
}

/// What the C callbacks write into during one transfer. Lives exactly as long as the transfer.
final class CurlTransferState {
    var body: [UInt8] = []
    var headers: [(name: String, value: String)] = []
    /// Header bytes of the responses so far, held to the same limit as the body: a server sending
    /// endless header lines is cut off like one sending an endless body.
    var headerBytes = 0
    let maxBytes: Int
    var exceededLimit = false
    /// The client's bridges when it has event loops, and the connections this transfer opened.
    var bridges: CurlBridges?
    var opened: [CurlBridge] = []
    let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)

    init(maxBytes: Int) {
        self.maxBytes = maxBytes
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
    }

    deinit { errorBuffer.deallocate() }

    var errorMessage: String { String(cString: errorBuffer) }

    /// The first connection of this transfer that its loop could not make, if one could not.
    var connectFailure: (failure: CurlBridge.Failure, family: Int32)? {
        for bridge in opened { if let failure = bridge.connectFailure { return (failure, bridge.family) } }
        return nil
    }
}

/// A transfer in the multi handle until it completes or is cancelled. Used under the client's lock.
final class CurlTransfer {
    let job: CurlJob
    let continuation: CurlContinuation
    let easy: CurlEasyHandle
    let state: CurlTransferState
    /// A second attempt, on a connection of its own (see `deservesAFreshConnection`).
    let isRetry: Bool
    /// Only the reactor may drive it while it is in flight (``CurlMulti``).
    var needsTheReactor = false
    /// `CURLOPT_IPRESOLVE`: one family only on a second attempt after the other's was refused.
    let ipResolve: Int
    private var headerList: UnsafeMutablePointer<curl_slist>?

    init(job: CurlJob, continuation: CurlContinuation, easy: CurlEasyHandle, maxBytes: Int, isRetry: Bool = false, ipResolve: Int = Int(CURL_IPRESOLVE_WHATEVER)) {
        self.ipResolve = ipResolve
        self.job = job
        self.continuation = continuation
        self.easy = easy
        self.state = CurlTransferState(maxBytes: maxBytes)
        self.isRetry = isRetry
    }

    /// A kept-alive connection the server had closed, met as a reset or an end of file before any
    /// byte of an answer. libcurl retries that itself, but on the next kept connection, as doomed
    /// when a provider has dropped them all, and gives up after five. One more try then, on a
    /// new connection, when that cannot run the request twice: a GET or HEAD (RFC 9110 §9.2.2),
    /// or any method when no byte of the request went out (Go's HTTP client has the same rule).
    func deservesAFreshConnection(_ code: CURLcode) -> Bool {
        guard !isRetry, code == CURLE_RECV_ERROR || code == CURLE_SEND_ERROR || code == CURLE_GOT_NOTHING else { return false }
        var connects = 0
        var headerBytes = 0
        var requestBytes = 0
        _ = relais_curl_getinfo_long(easy.raw, CURLINFO_NUM_CONNECTS, &connects)
        _ = relais_curl_getinfo_long(easy.raw, CURLINFO_HEADER_SIZE, &headerBytes)
        _ = relais_curl_getinfo_long(easy.raw, CURLINFO_REQUEST_SIZE, &requestBytes)
        guard connects == 0, headerBytes == 0, state.body.isEmpty else { return false }
        return job.request.method == .get || job.request.method == .head || requestBytes == 0
    }

    deinit { curl_slist_free_all(headerList) }

    enum BridgedOutcome {
        case retry(ipResolve: Int)
        case failure(HTTPClientError)
    }

    /// What a failed transfer's own connections (made by a loop, ``CurlBridges``) say of it; nil
    /// when nothing. libcurl took such a connection for made: the next address it would have
    /// tried (happy eyeballs) is the other family's, once, when the first was refused; when that
    /// family has no address, the refusal is the answer.
    func bridgedOutcome(_ code: CURLcode) -> BridgedOutcome? {
        guard code != CURLE_OK else { return nil }
        let host = HTTPClient.hostForMetrics(job.request.url)
        if let (failure, family) = state.connectFailure {
            guard failure == .refused else { return .failure(.timeout) }
            guard isRetry else { return .retry(ipResolve: Int(family == AF_INET6 ? CURL_IPRESOLVE_V4 : CURL_IPRESOLVE_V6)) }
            return .failure(.connectionRefused(host: host))
        }
        let noAddressOfThatFamily = code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY
        if noAddressOfThatFamily && ipResolve != CURL_IPRESOLVE_WHATEVER { return .failure(.connectionRefused(host: host)) }
        return nil
    }

    /// Whether this transfer made a TLS connection of its own (a reused one has no handshake time).
    var completedATLSHandshake: Bool {
        var microseconds: curl_off_t = 0
        _ = relais_curl_getinfo_offset(easy.raw, CURLINFO_APPCONNECT_TIME_T, &microseconds)
        return microseconds > 0
    }

    /// The response of a transfer libcurl reports done with `code`.
    func outcome(_ code: CURLcode, limit: Int) -> Result<HTTPClientResponse, HTTPClientError> {
        guard code == CURLE_OK else {
            let host = HTTPClient.hostForMetrics(job.request.url)
            return .failure(HTTPClient.classify(code, host: host, reason: state.errorMessage, exceededLimit: state.exceededLimit, limit: limit))
        }
        var status = 0
        _ = relais_curl_getinfo_long(easy.raw, CURLINFO_RESPONSE_CODE, &status)
        var connects = 0
        _ = relais_curl_getinfo_long(easy.raw, CURLINFO_NUM_CONNECTS, &connects)
        // With redirects off, a 3xx is returned as data; with them on, libcurl reports loops itself.
        return .success(HTTPClientResponse(status: status, headers: state.headers, body: state.body, newConnections: connects))
    }

    func configure(
        _ configuration: HTTPClientConfiguration, timeout: Duration, share: UnsafeMutableRawPointer, bridges: CurlBridges?, ipResolve: Int = Int(CURL_IPRESOLVE_WHATEVER)
    ) throws(HTTPClientError) {
        let curl = easy.raw
        let request = job.request
        func check(_ code: CURLcode) throws(HTTPClientError) {
            if code != CURLE_OK {
                let host = HTTPClient.hostForMetrics(request.url)
                throw HTTPClient.classify(code, host: host, reason: state.errorMessage, exceededLimit: false, limit: configuration.maxResponseBytes)
            }
        }
        func set(_ option: CURLoption, _ value: Int) throws(HTTPClientError) { try check(relais_curl_setopt_long(curl, option, value)) }
        func set(_ option: CURLoption, _ value: String) throws(HTTPClientError) { try check(relais_curl_setopt_string(curl, option, value)) }

        try check(relais_curl_setopt_pointer(curl, CURLOPT_SHARE, share))
        try set(CURLOPT_URL, request.url)
        try set(CURLOPT_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        try set(CURLOPT_NOSIGNAL, 1)  // timeouts must not use SIGALRM in a multi-threaded process
        // A transfer given up while its host name is being resolved does not wait for the resolver
        // thread's getaddrinfo (which may take seconds): whichever thread drives libcurl then, an
        // event loop among them, never blocks on DNS. The abandoned lookup ends on its own thread.
        try set(CURLOPT_QUICK_EXIT, 1)
        try check(relais_curl_setopt_pointer(curl, CURLOPT_ERRORBUFFER, state.errorBuffer))

        try set(CURLOPT_IPRESOLVE, ipResolve)
        try set(CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeout.roundedUpMilliseconds)
        try set(CURLOPT_TIMEOUT_MS, timeout.roundedUpMilliseconds)
        try check(relais_curl_setopt_offset(curl, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(configuration.maxResponseBytes)))

        try set(CURLOPT_FOLLOWLOCATION, configuration.followRedirects ? 1 : 0)
        try set(CURLOPT_MAXREDIRS, configuration.maxRedirects)
        if !configuration.reuseConnections || isRetry {
            try set(CURLOPT_FRESH_CONNECT, 1)
        }
        if !configuration.reuseConnections {
            try set(CURLOPT_FORBID_REUSE, 1)
        }

        try set(CURLOPT_SSL_VERIFYPEER, configuration.tls.verifyPeer ? 1 : 0)
        try set(CURLOPT_SSL_VERIFYHOST, configuration.tls.verifyPeer ? 2 : 0)
        if let path = configuration.tls.caBundlePath { try set(CURLOPT_CAINFO, path) }
        // The CA store is read from disk once, at the client's first TLS connection, and kept (as
        // Go keeps its system pool): later connections, made on event loops, read no file. libcurl
        // caches a store that comes from a bundle file only, so the directory of hashed
        // certificates built in beside Debian's bundle (/etc/ssl/certs, the same CAs, each read
        // when a chain needs it) is left out: trust is the bundle's, the system's or the configured one.
        try check(relais_curl_setopt_pointer(curl, CURLOPT_CAPATH, nil))
        try set(CURLOPT_CA_CACHE_TIMEOUT, -1)
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
            let code = body.withUnsafeBufferPointer { buffer in
                relais_curl_setopt_pointer(curl, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!))
            }
            try check(code)
        }

        // "Expect:" stops libcurl's 100-continue round trip on POST bodies.
        for line in request.headers.map({ "\($0.name): \($0.value)" }) + ["Expect:"] {
            guard let appended = curl_slist_append(headerList, line) else { throw HTTPClientError.transport(curlCode: -1, reason: "out of memory") }
            headerList = appended
        }
        try check(relais_curl_setopt_slist(curl, CURLOPT_HTTPHEADER, headerList))

        // Unretained: the multi holds the transfer (and so its state) until libcurl is done with it.
        let userData = Unmanaged.passUnretained(state).toOpaque()
        try check(relais_curl_setopt_callback(curl, CURLOPT_WRITEFUNCTION, curlWriteCallback))
        try check(relais_curl_setopt_pointer(curl, CURLOPT_WRITEDATA, userData))
        try check(relais_curl_setopt_callback(curl, CURLOPT_HEADERFUNCTION, curlHeaderCallback))
        try check(relais_curl_setopt_pointer(curl, CURLOPT_HEADERDATA, userData))
        try check(relais_curl_setopt_opensocket_callback(curl, curlOpenSocketCallback))
        try check(relais_curl_setopt_pointer(curl, CURLOPT_OPENSOCKETDATA, userData))
        state.bridges = bridges
        if let bridges {
            let bridgesData = Unmanaged.passUnretained(bridges).toOpaque()
            // Kept by the connection, which may outlive this transfer: the bridges live as long as the multi.
            try check(relais_curl_setopt_closesocket_callback(curl, curlBridgedCloseSocketCallback))
            try check(relais_curl_setopt_pointer(curl, CURLOPT_CLOSESOCKETDATA, bridgesData))
        }
    }
}

// C callbacks: no captures; the transfer state arrives through the user-data pointer.

/// libcurl's sockets: a bridge's end when the client has event loops (``CurlBridges``), else a
/// socket of libcurl's own, opened close-on-exec as every other descriptor here: a child process
/// started meanwhile (a hook, a test's redis-server) would otherwise hold a provider connection
/// open after libcurl closed it, and the provider would never see it end.
let curlOpenSocketCallback: curl_opensocket_callback = { userData, _, address in
    guard let address else { return CURL_SOCKET_BAD }
    let state = Unmanaged<CurlTransferState>.fromOpaque(userData!).takeUnretainedValue()
    if let bridge = state.bridges?.open(address) {
        state.opened.append(bridge)
        return bridge.curlSocket
    }
    return socket(address.pointee.family, address.pointee.socktype | Int32(SOCK_CLOEXEC.rawValue), address.pointee.protocol)
}

/// Called for every socket a bridged transfer's connection closes, bridged or not; the client's
/// bridges arrive through the user-data pointer, under the client's lock.
let curlBridgedCloseSocketCallback: curl_closesocket_callback = { userData, socket in
    Unmanaged<CurlBridges>.fromOpaque(userData!).takeUnretainedValue().close(socket)
    return 0
}

let curlWriteCallback: relais_curl_data_callback = { data, size, count, userData in
    let state = Unmanaged<CurlTransferState>.fromOpaque(userData!).takeUnretainedValue()
    let length = size * count
    guard state.body.count + length <= state.maxBytes else {
        state.exceededLimit = true
        return 0  // a short write makes libcurl abort with CURLE_WRITE_ERROR
    }
    if length > 0, let data {
        data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
            state.body.append(contentsOf: UnsafeBufferPointer(start: bytes, count: length))
        }
    }
    return length
}

let curlHeaderCallback: relais_curl_data_callback = { data, size, count, userData in
    let state = Unmanaged<CurlTransferState>.fromOpaque(userData!).takeUnretainedValue()
    let length = size * count
    guard let data, length > 0 else { return length }
    state.headerBytes += length
    guard state.headerBytes <= state.maxBytes else {
        state.exceededLimit = true
        return 0  // as for the body: libcurl aborts with CURLE_WRITE_ERROR
    }
    data.withMemoryRebound(to: UInt8.self, capacity: length) { start in
        // Read as bytes: names and values are split at the first colon and trimmed of HTTP's
        // whitespace (and the line's CRLF) without walking Characters.
        let line = UnsafeBufferPointer(start: start, count: length)
        if line.starts(with: "HTTP/".utf8) {
            state.headers.removeAll()  // a new response (after a redirect or a 100 Continue) starts over
        } else if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
            state.headers.append((name: trimmedText(line, 0..<colon), value: trimmedText(line, colon + 1..<length)))
        }
    }
    return length
}

/// The bytes in `range` without leading or trailing spaces, tabs, CR or LF, as text.
private func trimmedText(_ line: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> String {
    func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
    var lower = range.lowerBound
    var upper = range.upperBound
    while lower < upper, isSpace(line[lower]) { lower += 1 }
    while upper > lower, isSpace(line[upper - 1]) { upper -= 1 }
    return String(decoding: UnsafeBufferPointer(rebasing: line[lower..<upper]), as: UTF8.self)
}
