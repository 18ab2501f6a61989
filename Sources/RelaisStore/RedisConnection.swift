import CHiredis

#if canImport(Glibc)
import Glibc
#endif

/// One blocking hiredis connection: since the store moved to NIO's event loops
/// (``RedisChannelConnection``), only the announcement subscription uses it, on a thread of its
/// own. Every blocking call goes through ``BlockingCallCheck``, which reports one made on an event
/// loop.
///
/// `@unchecked Sendable`: a C context held by one thread at a time (the subscriber's loop owns it).
final class RedisConnection: @unchecked Sendable {
    private let context: UnsafeMutablePointer<redisContext>
    /// For `rediss://`: how the TLS tunnel ended, which hiredis alone sees as a closed socket.
    private let tunnel: RedisTLSTunnel.Outcome?
    /// The socket's reply timeout as last set (the command timeout, or less for a batch whose
    /// requests' store budgets end sooner).
    private var replyTimeout: Duration

    private init(context: UnsafeMutablePointer<redisContext>, tunnel: RedisTLSTunnel.Outcome?, replyTimeout: Duration) {
        self.context = context
        self.tunnel = tunnel
        self.replyTimeout = replyTimeout
    }

    deinit { redisFree(context) }

    /// Connects, then authenticates and selects the database. Throws a failure naming the step.
    /// With Sentinel, `address` is the master the sentinels named; otherwise the configured host.
    static func open(_ configuration: RedisConfiguration, address: (host: String, port: Int)? = nil) throws(RedisConnectionFailure) -> RedisConnection {
        let (host, port) = address ?? (configuration.host, configuration.port)
        let connection = try connect(host: host, port: port, configuration: configuration)
        try connection.authenticate(username: configuration.username, password: configuration.password)
        if configuration.database != 0 {
            if case .error(let message) = try connection.command([Array("SELECT".utf8), Array(String(configuration.database).utf8)]) {
                throw RedisConnectionFailure(message: "cannot select database \(configuration.database): \(message)", isStaleConnection: false)
            }
        }
        return connection
    }

    /// A TCP (or, for `rediss://`, TLS) connection with the configured timeouts, not yet authenticated.
    static func connect(host: String, port: Int, configuration: RedisConfiguration) throws(RedisConnectionFailure) -> RedisConnection {
        BlockingCallCheck.check("hiredis connect")
        let connected: UnsafeMutablePointer<redisContext>?
        var tunnel: RedisTLSTunnel.Outcome?
        if let tls = configuration.tls {
            let opened = try RedisTLSTunnel.open(host: host, port: port, tls: tls, connectTimeout: configuration.connectTimeout)
            connected = redisConnectFd(opened.descriptor)
            if connected == nil { close(opened.descriptor) }
            tunnel = opened.outcome
        } else {
            connected = redisConnectWithTimeout(host, Int32(port), timeval(configuration.connectTimeout))
        }
        guard let context = connected else {
            throw RedisConnectionFailure(message: "cannot allocate a Redis context", isStaleConnection: false)
        }
        if context.pointee.err != 0 {
            let reason = String(cString: relais_redis_errstr(context))
            redisFree(context)
            throw RedisConnectionFailure(message: "cannot connect to \(host):\(port): \(reason)", isStaleConnection: false)
        }
        let connection = RedisConnection(context: context, tunnel: tunnel, replyTimeout: configuration.commandTimeout)
        guard redisSetTimeout(context, timeval(configuration.commandTimeout)) == REDIS_OK else {
            throw RedisConnectionFailure(message: "cannot set the command timeout", isStaleConnection: false)
        }
        return connection
    }

    /// `AUTH [username] password` when a password is set.
    func authenticate(username: String?, password: String?) throws(RedisConnectionFailure) {
        guard let password else { return }
        var auth: [[UInt8]] = [Array("AUTH".utf8)]
        if let username { auth.append(Array(username.utf8)) }
        auth.append(Array(password.utf8))
        // The reply text (WRONGPASS …) never contains the password; the password is never logged.
        if case .error(let message) = try command(auth) {
            throw RedisConnectionFailure(message: "authentication failed: \(message)", isStaleConnection: false)
        }
    }

    /// Sends one command with binary-safe arguments (explicit lengths, no C strings) and waits for
    /// its reply, at most the command timeout.
    func command(_ arguments: [[UInt8]]) throws(RedisConnectionFailure) -> RedisReply {
        switch pipeline([arguments])[0] {
        case .success(let reply): return reply
        case .failure(let failure): throw failure
        }
    }

    /// Sends several commands in one write, then reads their replies in order (Redis pipelining):
    /// one round trip and one wake-up for a batch instead of one per command. After a failure the
    /// remaining commands get the same failure and the connection must be dropped.
    ///
    /// With a `deadline`, replies are awaited until then at most (never longer than the command
    /// timeout the connection was opened with): a request's store budget bounds the socket wait too.
    func pipeline(_ commands: [[[UInt8]]], deadline: ContinuousClock.Instant? = nil, commandTimeout: Duration? = nil) -> [Result<RedisReply, RedisConnectionFailure>] {
        BlockingCallCheck.check("hiredis command")
        if let deadline, let commandTimeout {
            let wanted = min(commandTimeout, max(.milliseconds(1), deadline - ContinuousClock.now))
            // setsockopt only when it changes by more than a few milliseconds.
            if wanted < replyTimeout - .milliseconds(5) || wanted > replyTimeout + .milliseconds(5), redisSetTimeout(context, timeval(wanted)) == REDIS_OK {
                replyTimeout = wanted
            }
        }
        for arguments in commands {
            if !append(arguments) {
                return Array(repeating: .failure(RedisConnectionFailure(message: "cannot queue the command (out of memory)", isStaleConnection: false)), count: commands.count)
            }
        }
        var results: [Result<RedisReply, RedisConnectionFailure>] = []
        results.reserveCapacity(commands.count)
        for _ in commands {
            var replyPointer: UnsafeMutableRawPointer?
            guard redisGetReply(context, &replyPointer) == REDIS_OK, let replyPointer else {
                let failure = currentFailure()
                while results.count < commands.count { results.append(.failure(failure)) }
                return results
            }
            results.append(.success(RedisReply(replyPointer.assumingMemoryBound(to: redisReply.self))))
            freeReplyObject(replyPointer)
        }
        return results
    }

    /// Queues one command in hiredis' output buffer (hiredis copies the arguments).
    private func append(_ arguments: [[UInt8]]) -> Bool {
        RedisCommandEncoding.withArgv(arguments) { argc, argv, argvlen in
            redisAppendCommandArgv(context, argc, argv, argvlen) == REDIS_OK
        }
    }

    // MARK: - Subscriber mode

    /// Sends a command without waiting for its reply (a subscription's SUBSCRIBE and PINGs).
    func send(_ arguments: [[UInt8]]) throws(RedisConnectionFailure) {
        BlockingCallCheck.check("hiredis send")
        guard append(arguments) else { throw RedisConnectionFailure(message: "cannot queue the command (out of memory)", isStaleConnection: false) }
        var done: Int32 = 0
        while done == 0 {
            guard redisBufferWrite(context, &done) == REDIS_OK else { throw currentFailure() }
        }
    }

    /// The replies that arrive within `timeout` (none when nothing came): poll first, so the
    /// socket's reply timeout never fires and breaks the connection while a subscription is idle.
    func receive(within timeout: Duration) throws(RedisConnectionFailure) -> [RedisReply] {
        BlockingCallCheck.check("hiredis receive")
        var replies = try buffered()
        guard replies.isEmpty else { return replies }
        var descriptor = pollfd(fd: context.pointee.fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(min(timeout.nanoseconds / 1_000_000, 60_000))
        let ready = poll(&descriptor, 1, milliseconds)
        guard ready > 0 else {
            if ready < 0, errno != EINTR { throw RedisConnectionFailure(message: "poll failed (errno \(errno))", isStaleConnection: false) }
            return []
        }
        guard redisBufferRead(context) == REDIS_OK else { throw currentFailure() }
        replies = try buffered()
        return replies
    }

    /// Complete replies already read into hiredis' buffer.
    private func buffered() throws(RedisConnectionFailure) -> [RedisReply] {
        var replies: [RedisReply] = []
        while true {
            var replyPointer: UnsafeMutableRawPointer?
            guard redisGetReplyFromReader(context, &replyPointer) == REDIS_OK else { throw currentFailure() }
            guard let replyPointer else { return replies }
            replies.append(RedisReply(replyPointer.assumingMemoryBound(to: redisReply.self)))
            freeReplyObject(replyPointer)
        }
    }

    private func currentFailure() -> RedisConnectionFailure {
        let code = context.pointee.err
        let systemError = errno
        let reason = String(cString: relais_redis_errstr(context))
        let stale = code == REDIS_ERR_EOF || (code == REDIS_ERR_IO && (systemError == ECONNRESET || systemError == EPIPE))
        let timedOut = code == REDIS_ERR_IO && (systemError == EAGAIN || systemError == EWOULDBLOCK)
        var message = timedOut ? "no reply within the command timeout" : (reason.isEmpty ? "connection lost" : reason)
        if !timedOut, let tlsFailure = tunnel?.failure { message += " (\(tlsFailure))" }
        return RedisConnectionFailure(message: message, isStaleConnection: stale)
    }
}

private func timeval(_ duration: Duration) -> Glibc.timeval {
    let (seconds, attoseconds) = duration.components
    return Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int(attoseconds / 1_000_000_000_000))
}
