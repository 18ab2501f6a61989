import Logging
import NIOPosix
import Synchronization

/// One Redis server as the store reaches it: its pooled connections, the worker threads that use
/// them, and its circuit breaker. A standalone or Sentinel store has one; a cluster store has one
/// per master.
///
/// hiredis calls block, so they run on the node's own worker threads, one pooled connection per
/// thread at most. Calls wait in one queue; a worker takes every waiting call (up to a batch) and
/// pipelines them on its connection, so under load a wake-up and a round trip serve many calls.
/// A connection that fails is dropped; the next call opens a new one, which is how the node
/// recovers after a Redis restart.
///
/// After ``RedisStore/breakerThreshold`` failed calls in a row the node's circuit opens: calls
/// fail at once while one PING every ``RedisStore/probeInterval`` checks the server in the
/// background, and the first answer closes it.
final class RedisNode: Sendable {
    let connector: RedisConnector
    private let configuration: RedisConfiguration
    private let threadPool: NIOThreadPool
    private let idle = Mutex<[RedisConnection]>([])
    private let queue = Mutex<CommandQueue>(CommandQueue())
    private let isShutdown = Atomic<Bool>(false)
    private let breaker = Mutex(Breaker())
    private let logger: Logger

    static let maxBatch = 64

    private struct Breaker {
        var failuresInARow = 0
        var isOpen = false
        var probe: Task<Void, Never>?
    }

    /// One caller's commands: sent in order on one connection (`ASKING` before its command).
    private struct Pending {
        var commands: [[[UInt8]]]
        /// A call still waiting at this instant fails without touching Redis: when Redis hangs,
        /// queued calls fail in about one timeout instead of piling up.
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<[RedisReply], any Error>
    }

    private struct CommandQueue {
        var pending: [Pending] = []
        var workers = 0
    }

    init(connector: RedisConnector, logger: Logger) {
        self.connector = connector
        self.configuration = connector.configuration
        self.logger = logger
        self.threadPool = NIOThreadPool(numberOfThreads: max(1, configuration.poolSize))
        threadPool.start()
    }

    /// Whether calls currently fail at once.
    var isCircuitOpen: Bool { breaker.withLock { $0.isOpen } }

    /// Sends `commands` in order on one connection and returns their replies (Redis errors among
    /// them, as replies). Throws ``StoreError/storeUnavailable(reason:)`` when the server cannot be
    /// reached or does not answer by `deadline`. `probe` passes an open circuit.
    func run(_ commands: [[[UInt8]]], deadline: ContinuousClock.Instant, probe: Bool = false) async throws -> [RedisReply] {
        guard !isShutdown.load(ordering: .acquiring) else { throw StoreError.shutdown }
        if !probe, isCircuitOpen {
            throw StoreError.storeUnavailable(reason: "circuit open: \(connector.target) failed \(RedisStore.breakerThreshold) calls in a row; probing it in the background")
        }
        do {
            let replies = try await withCheckedThrowingContinuation { continuation in
                let startWorker = queue.withLock { queue -> Bool in
                    queue.pending.append(Pending(commands: commands, deadline: deadline, continuation: continuation))
                    guard queue.workers < max(1, configuration.poolSize) else { return false }
                    queue.workers += 1
                    return true
                }
                if startWorker {
                    threadPool.submit { [self] state in
                        guard case .active = state else { return failQueued(with: .shutdown) }
                        drain()
                    }
                }
            }
            if !probe { breaker.withLock { $0.failuresInARow = 0 } }
            return replies
        } catch let error as StoreError {
            if case .storeUnavailable = error, !probe { recordFailure() }
            throw error
        }
    }

    func shutdown() async throws {
        guard !isShutdown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        breaker.withLock { $0.probe }?.cancel()
        try await threadPool.shutdownGracefully()
        failQueued(with: .shutdown)
        idle.withLock { $0.removeAll() }
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
            while !Task.isCancelled, !isShutdown.load(ordering: .acquiring) {
                try? await Task.sleep(for: RedisStore.probeInterval)
                let deadline = ContinuousClock.now + configuration.commandTimeout
                guard case .status("PONG")? = try? await run([[Array("PING".utf8)]], deadline: deadline, probe: true).first else { continue }
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

    /// A worker: takes the waiting calls in order, a batch at a time, until none is left.
    private func drain() {
        while true {
            let batch = queue.withLock { queue -> [Pending] in
                guard !queue.pending.isEmpty else {
                    queue.workers -= 1
                    return []
                }
                let count = min(Self.maxBatch, queue.pending.count)
                defer { queue.pending.removeFirst(count) }
                return Array(queue.pending.prefix(count))
            }
            guard !batch.isEmpty else { return }
            let now = ContinuousClock.now
            var live: [Pending] = []
            for call in batch {
                if now < call.deadline {
                    live.append(call)
                } else {
                    call.continuation.resume(throwing: StoreError.storeUnavailable(reason: "no connection was free within the command timeout (Redis slow or overloaded)"))
                }
            }
            guard !live.isEmpty else { continue }
            let results = executeBlocking(live.flatMap(\.commands), deadline: live.map(\.deadline).max())
            var offset = 0
            for call in live {
                let mine = results[offset..<offset + call.commands.count]
                offset += call.commands.count
                if case .failure(let error)? = mine.first(where: { if case .failure = $0 { true } else { false } }) {
                    call.continuation.resume(throwing: error)
                } else {
                    call.continuation.resume(returning: mine.map { if case .success(let reply) = $0 { reply } else { .null } })
                }
            }
        }
    }

    private func failQueued(with error: StoreError) {
        let calls = queue.withLock { queue -> [Pending] in
            defer {
                queue.pending.removeAll()
                queue.workers = 0
            }
            return queue.pending
        }
        for call in calls { call.continuation.resume(throwing: error) }
    }

    /// Runs on a worker thread. Retries once, on a fresh connection, only when a pooled connection
    /// turns out to be closed by the server before the first reply (the batch never reached a live Redis).
    private func executeBlocking(_ commands: [[[UInt8]]], deadline: ContinuousClock.Instant?) -> [Result<RedisReply, StoreError>] {
        var attempt = 0
        while true {
            attempt += 1
            let pooled = idle.withLock { $0.popLast() }
            let connection: RedisConnection
            if let pooled {
                connection = pooled
            } else {
                do {
                    connection = try connector.open()
                } catch {
                    return Array(repeating: .failure(.storeUnavailable(reason: error.message)), count: commands.count)
                }
            }
            let results = connection.pipeline(commands, deadline: deadline, commandTimeout: configuration.commandTimeout)
            guard case .failure(let failure)? = results.first(where: { if case .failure = $0 { true } else { false } }) else {
                if connector.node == nil, results.contains(where: Self.isReadOnlyRefusal) {
                    // This node became a replica (a Sentinel failover): it executed no write of the
                    // batch, and reads are safe to repeat. Drop it and its pool mates, retry once on
                    // a fresh connection, which asks the sentinels (or DNS) for the master again.
                    // (A cluster node answers MOVED instead, which the cluster follows.)
                    idle.withLock { $0.removeAll() }
                    if attempt == 1 {
                        logger.info("redis answered as a read-only replica; reconnecting to the master")
                        continue
                    }
                    return results.map { result in result.mapError { StoreError.storeUnavailable(reason: $0.message) } }
                }
                idle.withLock { $0.append(connection) }
                return results.map { result in result.mapError { _ in StoreError.storeUnavailable(reason: "connection lost") } }
            }
            let failedFirst = if case .failure = results[0] { true } else { false }
            if pooled != nil, failure.isStaleConnection, failedFirst, attempt == 1 {
                // The other idle connections date from the same server: drop them too.
                idle.withLock { $0.removeAll() }
                logger.info("redis connection was closed by the server; reconnecting")
                continue
            }
            return results.map { result in result.mapError { StoreError.storeUnavailable(reason: $0.message) } }
        }
    }

    private static func isReadOnlyRefusal(_ result: Result<RedisReply, RedisConnectionFailure>) -> Bool {
        if case .success(.error(let message)) = result { return message.hasPrefix("READONLY") }
        return false
    }
}
