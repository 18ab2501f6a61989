import Logging
import NIOCore
import NIOPosix
import Synchronization

/// One Redis server as the store reaches it: one non-blocking connection per event loop, and its
/// circuit breaker. A standalone or Sentinel store has one; a cluster store has one per master.
///
/// A call runs on the event loop it is on (a request handler preferring its channel's loop), else
/// on the group's next one, and uses that loop's connection: its commands are written at once,
/// behind whatever is in flight (Redis pipelining), and the reply resumes the caller on that loop
/// without a thread hop. Connections open lazily; one that fails is dropped and the next call
/// opens a new one, which is how the node recovers after a Redis restart.
///
/// After ``RedisStore/breakerThreshold`` failed calls in a row the node's circuit opens: calls
/// fail at once while one PING every ``RedisStore/probeInterval`` checks the server in the
/// background, and the first answer closes it.
final class RedisNode: Sendable {
    let connector: RedisConnector
    private let configuration: RedisConfiguration
    private let group: MultiThreadedEventLoopGroup
    /// The group's loops: a caller on another group's loop is served on this group.
    private let loopList: [any EventLoop]
    private let loops: Set<ObjectIdentifier>
    private let connections = Mutex(Connections())
    private let breaker = Mutex(Breaker())
    private let logger: Logger

    private struct Breaker {
        var failuresInARow = 0
        var isOpen = false
        var probe: Task<Void, Never>?
    }

    private struct Connections {
        /// Per event loop: the connection, or the attempt to open it that callers wait for.
        var byLoop: [ObjectIdentifier: Entry] = [:]
        var isShutdown = false
    }

    private enum Entry {
        case opening(EventLoopFuture<RedisChannelConnection>)
        case open(RedisChannelConnection)
    }

    init(connector: RedisConnector, group: MultiThreadedEventLoopGroup = .singleton, logger: Logger) {
        self.connector = connector
        self.configuration = connector.configuration
        self.group = group
        self.loopList = Array(group.makeIterator())
        self.loops = Set(loopList.map { ObjectIdentifier($0) })
        self.logger = logger
    }

    /// Whether calls currently fail at once.
    var isCircuitOpen: Bool { breaker.withLock { $0.isOpen } }

    /// Sends `commands` in order on one connection and returns their replies (Redis errors among
    /// them, as replies). Throws ``StoreError/storeUnavailable(reason:)`` when the server cannot be
    /// reached or does not answer by `deadline` (the command timeout's end), or by `givesUpAt`, the
    /// caller's, when sooner. `probe` passes an open circuit. `repeatable`: the
    /// commands leave the same data and answer the same when run twice (reads, a SET), so they
    /// may be sent again when a connection closes unanswered after they were written.
    func run(
        _ commands: [[[UInt8]]], deadline: ContinuousClock.Instant, givesUpAt: ContinuousClock.Instant? = nil, probe: Bool = false, repeatable: Bool = false
    ) async throws -> [RedisReply] {
        guard !connections.withLock({ $0.isShutdown }) else { throw StoreError.shutdown }
        if !probe, isCircuitOpen {
            throw StoreError.storeUnavailable(reason: "circuit open: \(connector.target) failed \(RedisStore.breakerThreshold) calls in a row; probing it in the background")
        }
        do {
            let replies = try await execute(commands, deadline: deadline, givesUpAt: givesUpAt, repeatable: repeatable)
            if !probe { breaker.withLock { $0.failuresInARow = 0 } }
            return replies
        } catch {
            if case .storeUnavailable = error, !probe { recordFailure() }
            throw error
        }
    }

    func shutdown() async throws {
        let entries = connections.withLock { state -> [Entry] in
            guard !state.isShutdown else { return [] }
            state.isShutdown = true
            defer { state.byLoop.removeAll() }
            return Array(state.byLoop.values)
        }
        breaker.withLock { $0.probe }?.cancel()
        for case .open(let connection) in entries { try? await connection.channel.close() }
    }

    /// The caller's own loop when it runs on one of the group's. A caller on no loop of the group
    /// resumes on its own executor anyway: any loop will do, and one whose connection is open
    /// already saves opening another (and, while Redis hangs, a connect that cannot succeed).
    private func pickLoop() -> any EventLoop {
        if let current = MultiThreadedEventLoopGroup.currentEventLoop, loops.contains(ObjectIdentifier(current)) { return current }
        let next = group.next()
        return connections.withLock { state in
            func isOpen(_ loop: any EventLoop) -> Bool {
                if case .open? = state.byLoop[ObjectIdentifier(loop)] { return true }
                return false
            }
            return isOpen(next) ? next : loopList.first(where: isOpen) ?? next
        }
    }

    /// Retries once, on a fresh connection, when a connection opened before the call turns out to
    /// be closed by the server before any reply to it (a Redis that restarted), and when the server
    /// answers READONLY (it became a replica). A close cannot tell whether the old server ran
    /// commands it was sent before it went: only `repeatable` ones, or ones never written, are
    /// sent again, so that a claim or a counter is never applied twice.
    private func execute(
        _ commands: [[[UInt8]]], deadline: ContinuousClock.Instant, givesUpAt: ContinuousClock.Instant?, repeatable: Bool
    ) async throws(StoreError) -> [RedisReply] {
        let loop = pickLoop()
        var attempt = 0
        while true {
            attempt += 1
            let waitedFrom = ContinuousClock.now
            let (connection, reused) = try await connection(on: loop, givingUpAt: givesUpAt)
            // Opening a connection has its own bound (the connect timeout): the command's time
            // starts once it is open, so a slow connect on a busy machine does not eat it. The
            // caller's own time runs on.
            let commandDeadline = reused ? deadline : deadline + (ContinuousClock.now - waitedFrom)
            let replies: [RedisReply]
            do {
                replies = try await connection.replies(commands, deadline: commandDeadline, givesUpAt: givesUpAt.flatMap { $0 < commandDeadline ? $0 : nil })
            } catch {
                guard reused, error.isStaleConnection, repeatable || error.neverSent, attempt == 1 else {
                    if connections.withLock({ $0.isShutdown }) { throw StoreError.shutdown }
                    throw StoreError.storeUnavailable(reason: error.message)
                }
                // Only this connection: the other loops' ones see a server's close themselves
                // (NIO watches an idle socket, as a blocking pool could not), and closing them
                // would fail what is in flight on them.
                logger.info("redis connection was closed by the server; reconnecting", metadata: ["redis": "\(connector.target)"])
                continue
            }
            if connector.node == nil, replies.contains(where: Self.isReadOnlyRefusal) {
                // This node became a replica (a Sentinel failover): it executed no write of the
                // call, and reads are safe to repeat. Drop its connections, retry once on a fresh
                // one, which asks the sentinels (or DNS) for the master again. (A cluster node
                // answers MOVED instead, which the cluster follows.)
                dropAll()
                if attempt == 1 {
                    logger.info("redis answered as a read-only replica; reconnecting to the master", metadata: ["redis": "\(connector.target)"])
                    continue
                }
            }
            return replies
        }
    }

    /// The loop's connection, opened now if it has none; `reused` when it was open before. The
    /// opening is shared by every call on the loop and goes on whoever gives up: a call waits
    /// for it until `givingUpAt` at most (its request's store budget).
    private func connection(on loop: any EventLoop, givingUpAt: ContinuousClock.Instant?) async throws(StoreError) -> (RedisChannelConnection, reused: Bool) {
        let key = ObjectIdentifier(loop)
        enum Step {
            case use(RedisChannelConnection)
            case wait(EventLoopFuture<RedisChannelConnection>)
            case open(EventLoopPromise<RedisChannelConnection>)
            case shutdown
        }
        let step = connections.withLock { state -> Step in
            guard !state.isShutdown else { return .shutdown }
            switch state.byLoop[key] {
            case .open(let connection)? where connection.isActive: return .use(connection)
            case .opening(let attempt)?: return .wait(attempt)
            default:
                let promise = loop.makePromise(of: RedisChannelConnection.self)
                state.byLoop[key] = .opening(promise.futureResult)
                return .open(promise)
            }
        }
        let opening: EventLoopFuture<RedisChannelConnection>
        switch step {
        case .shutdown:
            throw StoreError.shutdown
        case .use(let connection):
            return (connection, true)
        case .wait(let attempt):
            opening = attempt
        case .open(let promise):
            Task { [self] in await open(promise, on: loop) }
            opening = promise.futureResult
        }
        do {
            return (
                try await Self.wait(
                    for: opening, until: givingUpAt,
                    failing: StoreError.storeUnavailable(reason: "the request's store budget is spent waiting for a connection to Redis")), false
            )
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError.storeUnavailable(reason: (error as? RedisConnectionFailure)?.message ?? "\(error)")
        }
    }

    /// Opens the loop's connection, for every call waiting on `promise`.
    private func open(_ promise: EventLoopPromise<RedisChannelConnection>, on loop: any EventLoop) async {
        let key = ObjectIdentifier(loop)
        let connection: RedisChannelConnection
        do {
            connection = try await connector.open(on: loop)
        } catch {
            let isShutdown = connections.withLock { state in
                state.byLoop[key] = nil
                return state.isShutdown
            }
            // Shut down meanwhile: say so, as every call after the shutdown does.
            return promise.fail(isShutdown ? StoreError.shutdown : error)
        }
        let kept = connections.withLock { state -> Bool in
            guard !state.isShutdown else { return false }
            state.byLoop[key] = .open(connection)
            return true
        }
        guard kept else {
            connection.close()
            return promise.fail(StoreError.shutdown)
        }
        // A connection that closes (Redis went away, a deadline passed) leaves its slot.
        connection.channel.closeFuture.whenComplete { [self] _ in
            connections.withLock { state in
                if case .open(let current)? = state.byLoop[key], current.channel === connection.channel { state.byLoop[key] = nil }
            }
        }
        promise.succeed(connection)
    }

    /// `future`'s value, or `failure` at `deadline` if it has none by then (nil: no bound). What is
    /// waited for goes on for whoever else waits on it.
    static func wait<Value: Sendable>(for future: EventLoopFuture<Value>, until deadline: ContinuousClock.Instant?, failing failure: StoreError) async throws -> Value {
        guard let deadline else { return try await future.get() }
        let bounded = future.eventLoop.makePromise(of: Value.self)
        future.cascade(to: bounded)
        let timer = future.eventLoop.scheduleTask(in: .nanoseconds((deadline - ContinuousClock.now).nanoseconds)) { bounded.fail(failure) }
        bounded.futureResult.whenComplete { _ in timer.cancel() }
        return try await bounded.futureResult.get()
    }

    /// Closes every open connection: they all reach a server that was demoted, and stays up.
    private func dropAll() {
        let dropped = connections.withLock { state -> [RedisChannelConnection] in
            var dropped: [RedisChannelConnection] = []
            for (key, entry) in state.byLoop {
                guard case .open(let connection) = entry else { continue }
                dropped.append(connection)
                state.byLoop[key] = nil
            }
            return dropped
        }
        for connection in dropped { connection.close() }
    }

    /// Counts a failed call; the one that reaches the threshold opens the circuit and starts the probe.
    private func recordFailure() {
        let opened = breaker.withLock { state -> Bool in
            state.failuresInARow += 1
            guard !state.isOpen, state.failuresInARow >= RedisStore.breakerThreshold else { return false }
            state.isOpen = true
            return true
        }
        guard opened else { return }
        logger.error(
            "redis failed \(RedisStore.breakerThreshold) calls in a row: circuit open, answering 503 at once while probing it every \(RedisStore.probeInterval)",
            metadata: ["redis": "\(connector.target)"]
        )
        let probe = Task { [self] in
            while !Task.isCancelled, !connections.withLock({ $0.isShutdown }) {
                try? await Task.sleep(for: RedisStore.probeInterval)
                let deadline = ContinuousClock.now + configuration.commandTimeout
                guard case .status("PONG")? = try? await run([[Array("PING".utf8)]], deadline: deadline, probe: true, repeatable: true).first else { continue }
                breaker.withLock { state in
                    state.isOpen = false
                    state.failuresInARow = 0
                    state.probe = nil
                }
                logger.notice("redis answers again: circuit closed", metadata: ["redis": "\(connector.target)"])
                return
            }
        }
        breaker.withLock { $0.probe = probe }
    }

    private static func isReadOnlyRefusal(_ reply: RedisReply) -> Bool {
        if case .error(let message) = reply { return message.hasPrefix("READONLY") }
        return false
    }
}
