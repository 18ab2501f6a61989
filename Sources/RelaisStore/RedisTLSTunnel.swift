import COpenSSLTLS
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// TLS to Redis with OpenSSL, the project's one TLS library, under a plain NIO channel.
///
/// `open` connects to Redis and completes the TLS handshake (verifying the chain and the name),
/// then hands back one end of a local socket pair, which NIO adopts as a plain channel
/// (`ClientBootstrap.withConnectedSocket`). A dedicated thread pumps bytes between the other end
/// and the TLS session; the command timeouts still hold (a frozen Redis sends nothing through the
/// tunnel either). Closing the plain end ends the pump, which then closes the TLS session and the
/// TCP socket. One tunnel and one thread per connection: one connection per event loop and Redis
/// node, plus the announcement subscription's, so a handful.
/// OpenSSL stays the project's one TLS library (swift-nio-ssl would be a second).
enum RedisTLSTunnel {
    /// A write to a tunnel whose other side closed (the channel writing after the pump ended, or the
    /// pump or handshake writing to a Redis that went away) must fail with EPIPE, not kill the
    /// process: the first tunnel makes the process ignore SIGPIPE, as servers do.
    private static let sigpipeIgnored: Void = { _ = signal(SIGPIPE, SIG_IGN) }()

    /// Why a tunnel ended on the TLS side: the channel only sees its end close, so the connection
    /// reads this to say what happened (a refused client certificate, an alert, a reset).
    final class Outcome: Sendable {
        private let reason = Mutex<String?>(nil)
        var failure: String? { reason.withLock { $0 } }
        func fail(_ text: String) { reason.withLock { $0 = $0 ?? text } }
    }

    /// Returns the local descriptor the channel should use, and where the tunnel reports how it ended.
    /// ``open(host:port:tls:connectTimeout:)`` on a thread started for it (the one that then pumps
    /// would do, but starts only once the session is up): the blocking connect and handshake never
    /// run on an event loop, nor hold a shared pool's thread while a TLS Redis is slow to answer.
    static func openOffLoop(
        host: String, port: Int, tls: RedisConfiguration.TLS, connectTimeout: Duration
    ) async throws(RedisConnectionFailure) -> (descriptor: Int32, outcome: Outcome) {
        let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<(descriptor: Int32, outcome: Outcome), RedisConnectionFailure>, Never>) in
            let started = startThread {
                continuation.resume(returning: Result { () throws(RedisConnectionFailure) in try open(host: host, port: port, tls: tls, connectTimeout: connectTimeout) })
            }
            if !started { continuation.resume(returning: .failure(RedisConnectionFailure(message: "cannot start a thread for the TLS handshake", isStaleConnection: false))) }
        }
        return try result.get()
    }

    /// Blocking (connect and handshake): call it off the event loops, through ``openOffLoop``.
    static func open(host: String, port: Int, tls: RedisConfiguration.TLS, connectTimeout: Duration) throws(RedisConnectionFailure) -> (descriptor: Int32, outcome: Outcome) {
        BlockingCallCheck.check("TLS tunnel connect and handshake")
        _ = sigpipeIgnored
        let deadline = ContinuousClock.now + connectTimeout
        let socket = try connectTCP(host: host, port: port, deadline: deadline)
        let session = try TLSSession.handshake(socket: socket, host: host, port: port, tls: tls, deadline: deadline)
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            session.close()
            throw RedisConnectionFailure(message: "cannot create the TLS tunnel's socket pair: \(String(cString: strerror(errno)))", isStaleConnection: false)
        }
        setNonBlocking(pair[1])
        let outcome = Outcome()
        guard startThread({ session.pump(plain: pair[1], outcome: outcome) }) else {
            Glibc.close(pair[0])
            Glibc.close(pair[1])
            session.close()
            throw RedisConnectionFailure(message: "cannot start the TLS tunnel's thread", isStaleConnection: false)
        }
        return (pair[0], outcome)
    }

    /// A non-blocking connect bounded by the deadline, trying each address of the host in turn.
    private static func connectTCP(host: String, port: Int, deadline: ContinuousClock.Instant) throws(RedisConnectionFailure) -> Int32 {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw RedisConnectionFailure(message: "cannot connect to \(host):\(port): \(String(cString: gai_strerror(status)))", isStaleConnection: false)
        }
        defer { freeaddrinfo(list) }
        var reason = "no address"
        var current: UnsafeMutablePointer<addrinfo>? = first
        while let entry = current {
            current = entry.pointee.ai_next
            let socket = Glibc.socket(entry.pointee.ai_family, entry.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), entry.pointee.ai_protocol)
            guard socket >= 0 else {
                reason = String(cString: strerror(errno))
                continue
            }
            setNonBlocking(socket)
            var one: Int32 = 1
            _ = setsockopt(socket, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if connect(socket, entry.pointee.ai_addr, entry.pointee.ai_addrlen) == 0 { return socket }
            guard errno == EINPROGRESS else {
                reason = String(cString: strerror(errno))
                Glibc.close(socket)
                continue
            }
            guard wait(socket, for: Int16(POLLOUT), until: deadline) else {
                reason = "connect timed out"
                Glibc.close(socket)
                continue
            }
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(socket, SOL_SOCKET, SO_ERROR, &error, &length)
            if error == 0 { return socket }
            reason = String(cString: strerror(error))
            Glibc.close(socket)
        }
        throw RedisConnectionFailure(message: "cannot connect to \(host):\(port): \(reason)", isStaleConnection: false)
    }

    static func setNonBlocking(_ descriptor: Int32) {
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
    }

    /// Waits until `descriptor` is ready for `events` or the deadline passes; false on timeout.
    static func wait(_ descriptor: Int32, for events: Int16, until deadline: ContinuousClock.Instant) -> Bool {
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return false }
            let (seconds, attoseconds) = remaining.components
            let milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            var entry = pollfd(fd: descriptor, events: events, revents: 0)
            let ready = poll(&entry, 1, milliseconds)
            if ready > 0 { return true }
            if ready < 0 && errno != EINTR { return false }
        }
    }

    private final class ThreadBody {
        let run: () -> Void
        init(_ run: @escaping () -> Void) { self.run = run }
    }

    private static func startThread(_ body: @escaping () -> Void) -> Bool {
        let context = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().run()
                return nil
            }, context)
        guard created == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            return false
        }
        pthread_detach(thread)
        return true
    }
}

/// One client TLS session over a connected non-blocking socket, owned by the tunnel's thread once
/// the handshake is done.
private final class TLSSession {
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let socket: Int32

    private init(context: OpaquePointer, ssl: OpaquePointer, socket: Int32) {
        self.context = context
        self.ssl = ssl
        self.socket = socket
    }

    static func handshake(
        socket: Int32, host: String, port: Int, tls: RedisConfiguration.TLS, deadline: ContinuousClock.Instant
    ) throws(RedisConnectionFailure) -> TLSSession {
        /// `what` has read its reason already: the thread's OpenSSL error queue is emptied, so that
        /// a later failure on this thread does not report this one's (a failed verification
        /// queues an error nothing reads).
        func failure(_ what: String) -> RedisConnectionFailure {
            ERR_clear_error()
            return RedisConnectionFailure(message: "TLS with \(host):\(port): \(what)", isStaleConnection: false)
        }
        // The session owns the socket from here: every failure below closes it.
        guard let context = SSL_CTX_new(TLS_client_method()) else {
            Glibc.close(socket)
            throw failure("cannot create a TLS context\(Self.openSSLReason())")
        }
        relais_ssl_ctx_require_tls12(context)
        relais_ssl_ctx_allow_partial_writes(context)
        if tls.verifyPeer {
            SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
            let loaded = tls.caBundlePath.map { SSL_CTX_load_verify_locations(context, $0, nil) } ?? SSL_CTX_set_default_verify_paths(context)
            guard loaded == 1 else {
                SSL_CTX_free(context)
                Glibc.close(socket)
                throw failure("cannot load the CA bundle\(Self.openSSLReason())")
            }
        }
        if let certificate = tls.clientCertificatePath, let key = tls.clientKeyPath {
            guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1, SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1,
                SSL_CTX_check_private_key(context) == 1
            else {
                SSL_CTX_free(context)
                Glibc.close(socket)
                throw failure("cannot load the client certificate and key\(Self.openSSLReason())")
            }
        }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            Glibc.close(socket)
            throw failure("cannot create a TLS session\(Self.openSSLReason())")
        }
        let session = TLSSession(context: context, ssl: ssl, socket: socket)
        let name = tls.serverName ?? host
        let isAddress = Self.isIPAddress(name)
        if !isAddress { relais_ssl_set_server_name(ssl, name) }
        if tls.verifyPeer {
            let named = isAddress ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) : SSL_set1_host(ssl, name)
            guard named == 1 else {
                session.free()
                throw failure("cannot set the name to verify ('\(name)')")
            }
        }
        SSL_set_fd(ssl, socket)
        while true {
            ERR_clear_error()
            let result = SSL_connect(ssl)
            if result == 1 { return session }
            let error = SSL_get_error(ssl, result)
            let events: Int16
            switch error {
            case SSL_ERROR_WANT_READ: events = Int16(POLLIN)
            case SSL_ERROR_WANT_WRITE: events = Int16(POLLOUT)
            default:
                let verification = SSL_get_verify_result(ssl)
                let reason =
                    verification != X509_V_OK
                    ? "certificate verification failed: \(String(cString: X509_verify_cert_error_string(verification)))"
                    : "handshake failed\(Self.openSSLReason())"
                session.free()
                throw failure(reason)
            }
            guard RedisTLSTunnel.wait(socket, for: events, until: deadline) else {
                session.free()
                throw failure("handshake timed out")
            }
        }
    }

    /// Moves bytes both ways until either side closes or fails, then releases everything.
    /// `plain` is the tunnel's end of the socket pair (non-blocking). An end on the TLS side is
    /// reported to `outcome` before the channel's end closes, so the channel's error can name it.
    func pump(plain: Int32, outcome: RedisTLSTunnel.Outcome) {
        defer {
            close()
            Glibc.close(plain)
        }
        let capacity = 16 * 1024
        let upward = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)  // channel → Redis
        let downward = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)  // Redis → channel
        defer {
            upward.deallocate()
            downward.deallocate()
        }
        var up = (start: 0, end: 0)
        var down = (start: 0, end: 0)
        while true {
            var progressed = false
            var tlsWants: Int16 = 0
            if up.start == up.end {
                let count = read(plain, upward.baseAddress, capacity)
                if count > 0 {
                    up = (0, count)
                    progressed = true
                } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                    return  // the channel closed its end: the connection is done
                }
            }
            if up.start < up.end {
                ERR_clear_error()
                let written = SSL_write(ssl, upward.baseAddress! + up.start, Int32(up.end - up.start))
                if written > 0 {
                    up.start += Int(written)
                    progressed = true
                } else {
                    guard let wants = Self.wants(SSL_get_error(ssl, written)) else { return outcome.fail(Self.ended(ssl, written)) }
                    tlsWants |= wants
                }
            }
            if down.start == down.end {
                ERR_clear_error()
                let count = SSL_read(ssl, downward.baseAddress, Int32(capacity))
                if count > 0 {
                    down = (0, Int(count))
                    progressed = true
                } else {
                    guard let wants = Self.wants(SSL_get_error(ssl, count)) else { return outcome.fail(Self.ended(ssl, count)) }
                    tlsWants |= wants
                }
            }
            if down.start < down.end {
                let count = write(plain, downward.baseAddress! + down.start, down.end - down.start)
                if count > 0 {
                    down.start += count
                    progressed = true
                } else if count < 0 && errno != EAGAIN && errno != EINTR {
                    return
                }
            }
            if progressed { continue }
            var plainEvents: Int16 = 0
            if up.start == up.end { plainEvents |= Int16(POLLIN) }
            if down.start < down.end { plainEvents |= Int16(POLLOUT) }
            var entries = [pollfd(fd: plain, events: plainEvents, revents: 0), pollfd(fd: socket, events: tlsWants, revents: 0)]
            if poll(&entries, 2, -1) < 0 && errno != EINTR { return }
            // the channel went away while a write towards Redis was stuck: nothing left to deliver.
            if entries[0].revents & Int16(POLLHUP | POLLERR | POLLNVAL) != 0 && entries[0].revents & Int16(POLLIN) == 0 { return }
            if entries[1].revents & Int16(POLLERR | POLLNVAL) != 0 {
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(socket, SOL_SOCKET, SO_ERROR, &error, &length)
                return outcome.fail("TLS session ended: \(error == 0 ? "socket error" : String(cString: strerror(error)))")
            }
        }
    }

    /// How the session ended, in words, for a result of SSL_read or SSL_write that is final.
    private static func ended(_ ssl: OpaquePointer, _ result: Int32) -> String {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_ZERO_RETURN: return "TLS session ended: closed by Redis"
        case SSL_ERROR_SYSCALL: return "TLS session ended: \(errno == 0 ? "connection closed by Redis" : String(cString: strerror(errno)))"
        default:
            let reason = openSSLReason()
            return "TLS session ended: " + (reason.isEmpty ? "protocol error" : String(reason.dropFirst(2)))
        }
    }

    /// The poll events a retry needs, or nil when the session is over.
    private static func wants(_ error: Int32) -> Int16? {
        switch error {
        case SSL_ERROR_WANT_READ: Int16(POLLIN)
        case SSL_ERROR_WANT_WRITE: Int16(POLLOUT)
        default: nil
        }
    }

    /// Best-effort close_notify, then frees the session and closes the TCP socket.
    func close() {
        SSL_shutdown(ssl)
        free()
    }

    private func free() {
        SSL_free(ssl)
        SSL_CTX_free(context)
        Glibc.close(socket)
    }

    /// The first queued OpenSSL error, as `": reason"` (empty when none); the queue is then
    /// emptied: a failure can queue several errors (a missing CA file queues three).
    private static func openSSLReason() -> String {
        let code = ERR_get_error()
        ERR_clear_error()
        guard code != 0 else { return "" }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return ": " + String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func isIPAddress(_ name: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }
}
