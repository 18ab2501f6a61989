public import Logging
import Metrics
import NIOPosix
import Synchronization

/// ``KeyValueStore`` on Redis (≥ 6.2, for GETDEL) through hiredis.
///
/// hiredis calls block, so they run on the store's own worker threads, one pooled connection per
/// thread at most. Calls wait in one queue; a worker takes every waiting call (up to a batch) and
/// pipelines them on its connection, so under load a wake-up and a round trip serve many calls.
/// A connection that fails is dropped; the next call opens a new one, which is how the store
/// recovers after a Redis restart. While Redis is down every call fails fast with
/// ``StoreError/storeUnavailable(reason:)``: refused at once, or after the connect/command timeout.
///
/// Two bounds keep a frozen Redis (connections open, nothing answers) from holding requests: a
/// call never waits past its request's ``StoreBudget``, and after ``breakerThreshold`` failed
/// calls in a row a circuit breaker opens: calls fail at once while one PING every
/// ``probeInterval`` checks Redis in the background, and the first answer closes it.
public final class RedisStore: KeyValueStore {
    public let configuration: RedisConfiguration
    private let connector: RedisConnector
    private let threadPool: NIOThreadPool
    private let idle = Mutex<[RedisConnection]>([])
    private let queue = Mutex<CommandQueue>(CommandQueue())
    private let isShutdown = Atomic<Bool>(false)
    private let logger: Logger
    private let breaker = Mutex(Breaker())

    static let maxBatch = 64
    /// Failed calls in a row (each after a real attempt) that open the circuit.
    public static let breakerThreshold = 3
    public static let probeInterval: Duration = .milliseconds(500)

    private struct Breaker {
        var failuresInARow = 0
        var isOpen = false
        var probe: Task<Void, Never>?
    }

    private struct Pending {
        var arguments: [[UInt8]]
        /// A call still waiting at this instant fails without touching Redis: when Redis hangs,
        /// queued calls fail in about one timeout instead of piling up.
        var deadline: ContinuousClock.Instant
        var continuation: CheckedContinuation<RedisReply, any Error>
    }

    private struct CommandQueue {
        var pending: [Pending] = []
        var workers = 0
    }

    public init(configuration: RedisConfiguration, logger: Logger = Logger(label: "relais.store.redis")) {
        self.configuration = configuration
        self.connector = RedisConnector(configuration: configuration)
        self.logger = logger
        self.threadPool = NIOThreadPool(numberOfThreads: max(1, configuration.poolSize))
        threadPool.start()
    }

    // MARK: - KeyValueStore

    public func set(_ key: String, _ value: [UInt8], ttl: Duration?) async throws {
        var arguments = [bytes("SET"), prefixed(key), value]
        if let ttl { arguments += [bytes("PX"), bytes(String(ttl.storeMilliseconds))] }
        try await execute("SET", key: key, arguments).expectOK()
    }

    public func get(_ key: String) async throws -> [UInt8]? {
        try await execute("GET", key: key, [bytes("GET"), prefixed(key)]).optionalBytes()
    }

    public func getAndDelete(_ key: String) async throws -> [UInt8]? {
        try await execute("GETDEL", key: key, [bytes("GETDEL"), prefixed(key)]).optionalBytes()
    }

    public func delete(_ key: String) async throws -> Bool {
        try await execute("DEL", key: key, [bytes("DEL"), prefixed(key)]).integer() == 1
    }

    public func setIfAbsent(_ key: String, _ value: [UInt8], ttl: Duration) async throws -> Bool {
        let reply = try await execute(
            "SET",
            key: key,
            [bytes("SET"), prefixed(key), value, bytes("NX"), bytes("PX"), bytes(String(ttl.storeMilliseconds))]
        )
        switch reply {
        case .status("OK"): return true
        case .null: return false
        default: throw StoreError.commandFailed(reason: "unexpected reply to SET NX")
        }
    }

    public func deleteIfEqual(_ key: String, _ value: [UInt8]) async throws -> Bool {
        let script = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"
        return try await execute("EVAL", key: key, [bytes("EVAL"), bytes(script), bytes("1"), prefixed(key), value]).integer() == 1
    }

    public func increment(_ key: String, window: Duration) async throws -> Int {
        // INCR and the deadline of a new counter in one step: a counter never outlives its window.
        let script = "local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n"
        return Int(try await execute("EVAL", key: key, [bytes("EVAL"), bytes(script), bytes("1"), prefixed(key), bytes(String(window.storeMilliseconds))]).integer())
    }

    public func expire(_ key: String, ttl: Duration) async throws -> Bool {
        try await execute("PEXPIRE", key: key, [bytes("PEXPIRE"), prefixed(key), bytes(String(ttl.storeMilliseconds))]).integer() == 1
    }

    public func timeToLive(_ key: String) async throws -> StoreTTL {
        switch try await execute("PTTL", key: key, [bytes("PTTL"), prefixed(key)]).integer() {
        case -2: .missing
        case -1: .persistent
        case let milliseconds: .expiresIn(.milliseconds(milliseconds))
        }
    }

    public func setAdd(_ key: String, member: String, ttl: Duration?) async throws {
        // One script, so the member and the set's lifetime change together.
        let script = """
            redis.call('SADD', KEYS[1], ARGV[1])
            if ARGV[2] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
            return 1
            """
        let milliseconds = ttl.map { String($0.storeMilliseconds) } ?? ""
        _ = try await execute("EVAL", key: key, [bytes("EVAL"), bytes(script), bytes("1"), prefixed(key), bytes(member), bytes(milliseconds)]).integer()
    }

    public func setRemove(_ key: String, member: String) async throws -> Bool {
        try await execute("SREM", key: key, [bytes("SREM"), prefixed(key), bytes(member)]).integer() == 1
    }

    public func setMembers(_ key: String) async throws -> Set<String> {
        guard case .array(let items) = try await execute("SMEMBERS", key: key, [bytes("SMEMBERS"), prefixed(key)]) else {
            throw StoreError.commandFailed(reason: "unexpected reply to SMEMBERS")
        }
        return Set(items.compactMap { item in
            if case .string(let value) = item { return String(decoding: value, as: UTF8.self) }
            return nil
        })
    }

    public func take(_ key: String, applying writes: [StoreWrite]) async throws -> [UInt8]? {
        try await execute("EVAL", key: key, RedisWriteScript.arguments(taking: key, writes, prefixed: prefixed)).optionalBytes()
    }

    public func apply(_ writes: [StoreWrite]) async throws {
        guard !writes.isEmpty else { return }
        guard case .integer = try await execute("EVAL", key: writes[0].key, RedisWriteScript.arguments(taking: nil, writes, prefixed: prefixed)) else {
            throw StoreError.commandFailed(reason: "unexpected reply to a write script")
        }
    }

    public func ping() async throws {
        guard case .status("PONG") = try await execute("PING", [bytes("PING")]) else {
            throw StoreError.commandFailed(reason: "unexpected reply to PING")
        }
    }

    public func shutdown() async throws {
        guard !isShutdown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        breaker.withLock { $0.probe }?.cancel()
        try await threadPool.shutdownGracefully()
        failQueued(with: .shutdown)
        idle.withLock { $0.removeAll() }
    }

    // MARK: - Execution

    /// Runs one command; `key` (unprefixed) names the key in errors. `probe` passes an open circuit.
    private func execute(_ name: String, key: String? = nil, _ arguments: [[UInt8]], probe: Bool = false) async throws -> RedisReply {
        guard !isShutdown.load(ordering: .acquiring) else { throw StoreError.shutdown }
        let start = ContinuousClock.now
        var deadline = start + configuration.commandTimeout
        if let budget = StoreBudget.deadline {
            guard start < budget else { throw StoreError.storeUnavailable(reason: "the request's store budget is spent (Redis slow or frozen)") }
            deadline = min(deadline, budget)
        }
        if !probe, breaker.withLock({ $0.isOpen }) {
            throw StoreError.storeUnavailable(reason: "circuit open: Redis failed \(Self.breakerThreshold) calls in a row; probing it in the background")
        }
        let outcome: String
        defer {
            Metrics.Timer(
                label: "relais_store_command_duration_seconds",
                dimensions: [("command", name), ("outcome", outcome)],
                preferredDisplayUnit: .seconds
            ).recordNanoseconds((ContinuousClock.now - start).nanoseconds)
        }
        let reply: RedisReply
        do {
            reply = try await withCheckedThrowingContinuation { continuation in
                let startWorker = queue.withLock { queue -> Bool in
                    queue.pending.append(Pending(arguments: arguments, deadline: deadline, continuation: continuation))
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
        } catch let error as StoreError {
            outcome = error.code
            logger.warning("redis command failed", metadata: ["command": "\(name)", "error": "\(error)"])
            if case .storeUnavailable = error, !probe { recordFailure() }
            throw error
        } catch {
            outcome = "cancelled"
            throw error
        }
        if case .error(let message) = reply {
            let error: StoreError =
                message.contains("WRONGTYPE") ? .wrongType(key: key ?? "")
                : message.hasPrefix("READONLY") ? .storeUnavailable(reason: "Redis answered as a read-only replica (failover in progress?)")
                : .commandFailed(reason: message)
            outcome = error.code
            throw error
        }
        outcome = "ok"
        if !probe { breaker.withLock { $0.failuresInARow = 0 } }
        return reply
    }

    /// Counts a failed call; the one that reaches the threshold opens the circuit and starts the probe.
    private func recordFailure() {
        let opened = breaker.withLock { state -> Bool in
            state.failuresInARow += 1
            guard !state.isOpen, state.failuresInARow >= Self.breakerThreshold else { return false }
            state.isOpen = true
            return true
        }
        guard opened else { return }
        logger.error("redis failed \(Self.breakerThreshold) calls in a row: circuit open, answering 503 at once while probing Redis every \(Self.probeInterval)")
        let probe = Task { [self] in
            while !Task.isCancelled, !isShutdown.load(ordering: .acquiring) {
                try? await Task.sleep(for: Self.probeInterval)
                guard (try? await execute("PING", [bytes("PING")], probe: true)) != nil else { continue }
                breaker.withLock { state in
                    state.isOpen = false
                    state.failuresInARow = 0
                    state.probe = nil
                }
                logger.notice("redis answers again: circuit closed")
                return
            }
        }
        breaker.withLock { $0.probe = probe }
    }

    /// A server setting (`CONFIG GET name`); nil when unset or when CONFIG is not allowed (managed
    /// services often rename or forbid it).
    public func serverSetting(_ name: String) async -> String? {
        guard case .array(let items)? = try? await execute("CONFIG", [bytes("CONFIG"), bytes("GET"), bytes(name)]), items.count == 2,
            case .string(let value) = items[1]
        else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// Whether calls currently fail at once (for tests and readiness).
    public var isCircuitOpen: Bool { breaker.withLock { $0.isOpen } }

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
            let batchDeadline = live.map(\.deadline).max()
            for (call, result) in zip(live, executeBlocking(live.map(\.arguments), deadline: batchDeadline)) { call.continuation.resume(with: result) }
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
                if results.contains(where: Self.isReadOnlyRefusal) {
                    // This node became a replica (a failover): it executed no write of the batch,
                    // and reads are safe to repeat. Drop it and its pool mates, retry once on a
                    // fresh connection, which asks the sentinels (or DNS) for the master again.
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

    // MARK: - Helpers

    private func prefixed(_ key: String) -> [UInt8] { Array((configuration.keyPrefix + key).utf8) }
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
