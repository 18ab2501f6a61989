import NIOCore
import NIOPosix

/// One non-blocking connection to Redis: a NIO channel on one event loop, whose
/// ``RedisProtocolHandler`` formats and parses with hiredis. NIO owns the socket; every caller
/// on the loop shares the connection, their commands pipelined.
struct RedisChannelConnection: Sendable {
    let channel: any Channel
    /// The configured command timeout, for commands outside a store call (the subscription's).
    var commandTimeout: Duration = .seconds(1)
    /// For `rediss://`: how the TLS tunnel ended, which the channel alone sees as a closed socket.
    var tunnel: RedisTLSTunnel.Outcome?

    var isActive: Bool { channel.isActive }

    /// Writes `commands` at once (behind whatever is in flight) and returns their replies, on the
    /// channel's event loop. Fails with a ``RedisConnectionFailure``.
    func send(_ commands: [[[UInt8]]], deadline: ContinuousClock.Instant, givesUpAt: ContinuousClock.Instant? = nil) -> EventLoopFuture<[RedisReply]> {
        let promise = channel.eventLoop.makePromise(of: [RedisReply].self)
        // A write that never reached the handler (the channel was already torn down) still
        // completes the caller's promise; completing it twice is a no-op.
        channel.writeAndFlush(RedisRequest(commands: commands, deadline: deadline, givesUpAt: givesUpAt, promise: promise)).whenFailure { [tunnel] _ in
            let tlsFailure = tunnel?.failure.map { " (\($0))" } ?? ""
            promise.fail(RedisConnectionFailure(message: "connection closed" + tlsFailure, isStaleConnection: true, neverSent: true))
        }
        return promise.futureResult
    }

    /// `deadline` is the command timeout's end; `givesUpAt`, the caller's, when sooner.
    func replies(
        _ commands: [[[UInt8]]], deadline: ContinuousClock.Instant, givesUpAt: ContinuousClock.Instant? = nil
    ) async throws(RedisConnectionFailure) -> [RedisReply] {
        do {
            return try await send(commands, deadline: deadline, givesUpAt: givesUpAt).get()
        } catch let failure as RedisConnectionFailure {
            throw failure
        } catch {
            throw RedisConnectionFailure(message: "connection lost: \(error)", isStaleConnection: false)
        }
    }

    func command(_ arguments: [[UInt8]], deadline: ContinuousClock.Instant) async throws(RedisConnectionFailure) -> RedisReply {
        try await replies([arguments], deadline: deadline).first ?? .null
    }

    func close() {
        channel.close(promise: nil)
    }

    /// Connects, then authenticates and selects the database, on `loop`. Throws a failure naming
    /// the step. With Sentinel, `address` is the master the sentinels named; without one, the
    /// configured socket or host.
    static func open(
        _ configuration: RedisConfiguration, address: (host: String, port: Int)? = nil, on loop: any EventLoop
    ) async throws(RedisConnectionFailure) -> RedisChannelConnection {
        let connection: RedisChannelConnection
        if address == nil, let path = configuration.socketPath {
            connection = try await connect(socketPath: path, configuration: configuration, on: loop)
        } else {
            let (host, port) = address ?? (configuration.host, configuration.port)
            connection = try await connect(host: host, port: port, configuration: configuration, on: loop)
        }
        do throws(RedisConnectionFailure) {
            let deadline = ContinuousClock.now + configuration.commandTimeout
            try await connection.authenticate(username: configuration.username, password: configuration.password, deadline: deadline)
            if configuration.database != 0 {
                let select = [Array("SELECT".utf8), Array(String(configuration.database).utf8)]
                if case .error(let message) = try await connection.command(select, deadline: deadline) {
                    throw RedisConnectionFailure(message: "cannot select database \(configuration.database): \(message)", isStaleConnection: false)
                }
            }
            return connection
        } catch {
            connection.close()
            throw error
        }
    }

    /// A TCP (or, for `rediss://`, TLS) connection within the connect timeout, not yet authenticated.
    static func connect(
        host: String, port: Int, configuration: RedisConfiguration, on loop: any EventLoop
    ) async throws(RedisConnectionFailure) -> RedisChannelConnection {
        let bootstrap = ClientBootstrap(group: loop).connectTimeout(.nanoseconds(configuration.connectTimeout.nanoseconds))
        do {
            guard let tls = configuration.tls else {
                let channel = try await bootstrap.channelInitializer(Self.initializer(tunnel: nil)).connect(host: host, port: port).get()
                return RedisChannelConnection(channel: channel, commandTimeout: configuration.commandTimeout)
            }
            // The tunnel (OpenSSL, on a thread of its own) hands back a plain local socket for NIO
            // to adopt. Its connect and handshake block: never on an event loop.
            let opened = try await RedisTLSTunnel.openOffLoop(host: host, port: port, tls: tls, connectTimeout: configuration.connectTimeout)
            let channel = try await bootstrap.channelInitializer(Self.initializer(tunnel: opened.outcome)).withConnectedSocket(opened.descriptor).get()
            return RedisChannelConnection(channel: channel, commandTimeout: configuration.commandTimeout, tunnel: opened.outcome)
        } catch let failure as RedisConnectionFailure {
            throw failure
        } catch {
            throw RedisConnectionFailure(message: "cannot connect to \(host):\(port): \(error)", isStaleConnection: false)
        }
    }

    /// A connection to a Redis on this machine through its Unix-domain socket, not yet authenticated.
    static func connect(socketPath: String, configuration: RedisConfiguration, on loop: any EventLoop) async throws(RedisConnectionFailure) -> RedisChannelConnection {
        let bootstrap = ClientBootstrap(group: loop).connectTimeout(.nanoseconds(configuration.connectTimeout.nanoseconds))
        do {
            let channel = try await bootstrap.channelInitializer(Self.initializer(tunnel: nil)).connect(unixDomainSocketPath: socketPath).get()
            return RedisChannelConnection(channel: channel, commandTimeout: configuration.commandTimeout)
        } catch {
            throw RedisConnectionFailure(message: "cannot connect to unix:\(socketPath): \(error)", isStaleConnection: false)
        }
    }

    private static func initializer(tunnel: RedisTLSTunnel.Outcome?) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.makeCompletedFuture {
                try channel.pipeline.syncOperations.addHandler(RedisProtocolHandler(tunnel: tunnel))
            }
        }
    }

    /// `AUTH [username] password` when a password is set.
    func authenticate(username: String?, password: String?, deadline: ContinuousClock.Instant) async throws(RedisConnectionFailure) {
        guard let password else { return }
        var auth: [[UInt8]] = [Array("AUTH".utf8)]
        if let username { auth.append(Array(username.utf8)) }
        auth.append(Array(password.utf8))
        // The reply text (WRONGPASS …) never contains the password; the password is never logged.
        if case .error(let message) = try await command(auth, deadline: deadline) {
            throw RedisConnectionFailure(message: "authentication failed: \(message)", isStaleConnection: false)
        }
    }
}
