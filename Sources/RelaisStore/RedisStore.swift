public import Logging
import Metrics
import NIOPosix
import Synchronization

/// ``KeyValueStore`` on Redis (≥ 6.2, for GETDEL) through hiredis: one server, the master that
/// Redis Sentinel names, or a Redis Cluster (``RedisCluster``).
///
/// Each server is a ``RedisNode``: one non-blocking connection per event loop (SwiftNIO owns the
/// socket, hiredis formats commands and parses replies), concurrent calls pipelined, a failed
/// connection dropped and reopened on the next call (how the store recovers after a Redis restart). While Redis is down every call fails fast with
/// ``StoreError/storeUnavailable(reason:)``: refused at once, or after the connect/command timeout.
///
/// Two bounds keep a frozen Redis (connections open, nothing answers) from holding requests: a
/// call never waits past its request's ``StoreBudget``, and after ``breakerThreshold`` failed
/// calls in a row to one server its circuit breaker opens: calls fail at once while one PING every
/// ``probeInterval`` checks it in the background, and the first answer closes it.
public final class RedisStore: KeyValueStore {
    public let configuration: RedisConfiguration
    private let topology: Topology
    private let subscriber: RedisSubscriber
    private let isShutdown = Atomic<Bool>(false)
    private let logger: Logger

    /// Failed calls in a row (each after a real attempt) that open a server's circuit.
    public static let breakerThreshold = 3
    public static let probeInterval: Duration = .milliseconds(500)

    private enum Topology {
        case single(RedisNode)
        case cluster(RedisCluster)
    }

    /// Connections live on `MultiThreadedEventLoopGroup.singleton`, Hummingbird's default group:
    /// a request handler running on its channel's loop gets its replies on that loop.
    public convenience init(configuration: RedisConfiguration, logger: Logger = Logger(label: "relais.store.redis")) {
        self.init(configuration: configuration, logger: logger, eventLoopGroup: .singleton)
    }

    /// On another group: tests that run their own code on a loop use one of their own, so that
    /// what they do there never delays other tests' connections.
    init(configuration: RedisConfiguration, logger: Logger = Logger(label: "relais.store.redis"), eventLoopGroup: MultiThreadedEventLoopGroup) {
        self.configuration = configuration
        self.logger = logger
        let connectors: [RedisConnector]
        var publishOnEveryMaster: RedisSubscriber.PublishOnEveryMaster?
        if let seeds = configuration.cluster {
            let cluster = RedisCluster(configuration: configuration, seeds: seeds, group: eventLoopGroup, logger: logger)
            topology = .cluster(cluster)
            connectors = seeds.map { RedisConnector(configuration: configuration, node: $0) }
            publishOnEveryMaster = { channel, message in await cluster.publishOnEveryMaster(channel, message) }
        } else {
            let connector = RedisConnector(configuration: configuration)
            topology = .single(RedisNode(connector: connector, group: eventLoopGroup, logger: logger))
            connectors = [connector]
        }
        subscriber = RedisSubscriber(
            channel: configuration.keyPrefix + "announcements", connectors: connectors, publishOnEveryMaster: publishOnEveryMaster, group: eventLoopGroup, logger: logger)
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

    /// GETs pipelined in one round trip: a person's sessions at `sessions.max_per_subject`'s
    /// default of 50 in one, and what a batch's replies hold in memory stays bounded.
    public static let readBatch = 128

    public func getMany(_ keys: [String]) async throws -> [[UInt8]?] {
        var values: [[UInt8]?] = []
        values.reserveCapacity(keys.count)
        guard case .single = topology else {
            // On a cluster each key may live on another node: side by side, a batch at a time.
            for start in stride(from: 0, to: keys.count, by: Self.readBatch) {
                let batch = keys[start..<min(start + Self.readBatch, keys.count)]
                values += try await withThrowingTaskGroup(of: (Int, [UInt8]?).self) { group in
                    for (index, key) in batch.enumerated() { group.addTask { (index, try await self.get(key)) } }
                    var read = [[UInt8]?](repeating: nil, count: batch.count)
                    for try await (index, value) in group { read[index] = value }
                    return read
                }
            }
            return values
        }
        for start in stride(from: 0, to: keys.count, by: Self.readBatch) {
            let batch = Array(keys[start..<min(start + Self.readBatch, keys.count)])
            // Its own label: one duration for the batch, which GET's latency would misreport.
            for reply in try await execute("GET_PIPELINE", batch.map { [bytes("GET"), prefixed($0)] }, key: { batch[$0] }) {
                values.append(try reply.optionalBytes())
            }
        }
        return values
    }

    public func getAndDelete(_ key: String) async throws -> [UInt8]? {
        try await execute("GETDEL", key: key, [bytes("GETDEL"), prefixed(key)]).optionalBytes()
    }

    public func delete(_ key: String) async throws -> Bool {
        try await execute("DEL", key: key, [bytes("DEL"), prefixed(key)]).integer() == 1
    }

    public func deleteAnnouncing(_ key: String, _ message: String, taking set: String?, leaving entry: SetEntry?) async throws -> (existed: Bool, taken: Set<String>) {
        // On one server the entry leaves its set in the same script; on a cluster the set lives on
        // another node (no shared hash tag), so it leaves once the script succeeded, best effort.
        guard let entry, case .cluster = topology else { return try await deleteAnnouncingInOneStep(key, message, taking: set, leaving: entry) }
        let outcome = try await deleteAnnouncingInOneStep(key, message, taking: set, leaving: nil)
        _ = try? await setRemove(entry.key, member: entry.member)
        return outcome
    }

    private func deleteAnnouncingInOneStep(_ key: String, _ message: String, taking set: String?, leaving entry: SetEntry?) async throws -> (existed: Bool, taken: Set<String>) {
        // One script: the key is gone exactly when every subscriber is told.
        let channel = bytes(configuration.keyPrefix + "announcements")
        guard set != nil || entry != nil else {
            let existed = try await execute("EVAL", key: key, [bytes("EVAL"), Self.deleteAnnouncingScript, bytes("1"), prefixed(key), channel, bytes(message)])
            return (try existed.integer() == 1, [])
        }
        // The set's only possible refusal (WRONGTYPE) comes from its SMEMBERS, before any write:
        // errors name it, and it shares the key's hash tag, so it picks the same cluster node.
        let keys = [prefixed(key)] + (set.map { [prefixed($0)] } ?? []) + (entry.map { [prefixed($0.key)] } ?? [])
        let reply = try await execute(
            "EVAL", key: set ?? key,
            [bytes("EVAL"), Self.deleteAnnouncingTakingScript, bytes(String(keys.count))] + keys + [channel, bytes(message), bytes(set == nil ? "0" : "1")]
                + (entry.map { [bytes($0.member)] } ?? []))
        guard case .array(let parts) = reply, parts.count == 2, case .integer(let existed) = parts[0], case .array(let members) = parts[1] else {
            throw StoreError.commandFailed(reason: "unexpected reply to the delete-and-take script")
        }
        return (existed == 1, RedisReply.stringSet(members))
    }

    public func listen(_ listener: AnnouncementListener) { subscriber.add(listener) }

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
        return try await execute("EVAL", key: key, [bytes("EVAL"), Self.deleteIfEqualScript, bytes("1"), prefixed(key), value]).integer() == 1
    }

    public func increment(_ key: String, window: Duration) async throws -> Int {
        // INCR and the deadline of a new counter in one step: a counter never outlives its window.
        return Int(try await execute("EVAL", key: key, [bytes("EVAL"), Self.incrementScript, bytes("1"), prefixed(key), bytes(String(window.storeMilliseconds))]).integer())
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

    @discardableResult
    public func setAdd(_ key: String, member: String, ttl: Duration?) async throws -> Int {
        // One script, so the member and the set's lifetime change together.
        let milliseconds = ttl.map { String($0.storeMilliseconds) } ?? ""
        return Int(try await execute("EVAL", key: key, [bytes("EVAL"), Self.setAddScript, bytes("1"), prefixed(key), bytes(member), bytes(milliseconds)]).integer())
    }

    public func setRemove(_ key: String, member: String) async throws -> Bool {
        try await execute("SREM", key: key, [bytes("SREM"), prefixed(key), bytes(member)]).integer() == 1
    }

    public func setMembers(_ key: String) async throws -> Set<String> {
        guard case .array(let items) = try await execute("SMEMBERS", key: key, [bytes("SMEMBERS"), prefixed(key)]) else {
            throw StoreError.commandFailed(reason: "unexpected reply to SMEMBERS")
        }
        return RedisReply.stringSet(items)
    }

    public func take(_ key: String, applying writes: [StoreWrite]) async throws -> [UInt8]? {
        try await execute("EVAL", key: key, RedisWriteScript.arguments(.take(key), writes, prefixed: prefixed)).optionalBytes()
    }

    public func once(_ guarded: OneTimeKey, applying writes: [StoreWrite], indexing memberships: [SetMembership]) async throws -> IndexedTake? {
        let key = guarded.key
        if case .cluster = topology {
            let slot = RedisSlotMap.slot(of: prefixed(key))
            if !(memberships.map(\.key) + writes.map(\.key)).allSatisfy({ RedisSlotMap.slot(of: prefixed($0)) == slot }) {
                return try await onceAcrossSlots(guarded, applying: writes, indexing: memberships)
            }
        }
        let reply = try await execute("EVAL", key: key, RedisIndexedTakeScript.arguments(guarded, writes, memberships, prefixed: prefixed))
        return try RedisIndexedTakeScript.outcome(reply, memberships)
    }

    /// The indexes first, each in its own slot, then the guarded step: a record is never without its indexes.
    private func onceAcrossSlots(_ guarded: OneTimeKey, applying writes: [StoreWrite], indexing memberships: [SetMembership]) async throws -> IndexedTake? {
        var sizes: [Int] = []
        var listed: [Set<String>?] = []
        for membership in memberships {
            let size = try await setAdd(membership.key, member: membership.member, ttl: membership.ttl)
            sizes.append(size)
            // On another node than the guarded step: listed by a call of its own.
            listed.append(size > (membership.listedAbove ?? .max) ? try await setMembers(membership.key) : nil)
        }
        let value: [UInt8]?
        switch guarded {
        case .take(let key): value = try await take(key, applying: writes)
        case .claim(let key, let mark, let ttl):
            let reply = try await execute("EVAL", key: key, RedisWriteScript.arguments(.claim(key, mark: mark, ttl: ttl), writes, prefixed: prefixed))
            value = try reply.optionalBytes()
        }
        guard let value else {
            // A claim refused because its records exist lost to the caller that wrote them, with
            // these same members (one session id): they are that caller's, and stay.
            if case .claim = guarded {
                for case .set(let key, _, _) in writes where (try? await get(key)) != nil { return nil }
            }
            for membership in memberships { _ = try? await setRemove(membership.key, member: membership.member) }
            return nil
        }
        return IndexedTake(value: value, setSizes: sizes, listed: listed)
    }

    public func apply(_ writes: [StoreWrite], ifEqual key: String, _ expected: [UInt8]) async throws -> Bool {
        switch try await execute("EVAL", key: key, RedisWriteScript.arguments(.ifEqual(key, expected), writes, prefixed: prefixed)) {
        case .integer(1): return true
        case .null: return false
        default: throw StoreError.commandFailed(reason: "unexpected reply to a write script")
        }
    }

    public func apply(_ writes: [StoreWrite]) async throws {
        guard !writes.isEmpty else { return }
        guard case .integer = try await execute("EVAL", key: writes[0].key, RedisWriteScript.arguments(.none, writes, prefixed: prefixed)) else {
            throw StoreError.commandFailed(reason: "unexpected reply to a write script")
        }
    }

    public func ping() async throws {
        if case .cluster(let cluster) = topology {
            guard !isShutdown.load(ordering: .acquiring) else { throw StoreError.shutdown }
            return try await cluster.ping(deadline: ContinuousClock.now + configuration.commandTimeout)
        }
        guard case .status("PONG") = try await execute("PING", [bytes("PING")]) else {
            throw StoreError.commandFailed(reason: "unexpected reply to PING")
        }
    }

    public func shutdown() async throws {
        guard !isShutdown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        await subscriber.shutdown()
        switch topology {
        case .single(let node): try await node.shutdown()
        case .cluster(let cluster): try await cluster.shutdown()
        }
    }

    // MARK: - Execution

    /// Runs one command; `key` (unprefixed) names the key in errors and, on a cluster, picks the
    /// node (every key of a multi-key script shares its hash tag).
    private func execute(_ name: String, key: String? = nil, _ arguments: [[UInt8]]) async throws -> RedisReply {
        try await execute(name, [arguments]) { _ in key }.first ?? .null
    }

    /// Runs `commands` (the one at index i on key `key(i)`, if any): on one server in one round
    /// trip, pipelined; on a cluster one after another, each on its key's node. Throws for the
    /// first that Redis refused.
    private func execute(_ name: String, _ commands: [[[UInt8]]], key: (Int) -> String?) async throws -> [RedisReply] {
        guard !isShutdown.load(ordering: .acquiring) else { throw StoreError.shutdown }
        let start = ContinuousClock.now
        let deadline = start + configuration.commandTimeout
        var givesUpAt: ContinuousClock.Instant?
        let allowance = StoreBudget.current
        if let allowance {
            guard let budget = allowance.deadline(from: start) else {
                throw StoreError.storeUnavailable(reason: "the request's store budget is spent (Redis slow or frozen)")
            }
            if budget < deadline { givesUpAt = budget }
        }
        let outcome: String
        defer {
            allowance?.spend(since: start)
            Metrics.Timer(
                label: "relais_store_command_duration_seconds",
                dimensions: [("command", name), ("outcome", outcome)],
                preferredDisplayUnit: .seconds
            ).recordNanoseconds((ContinuousClock.now - start).nanoseconds)
        }
        var replies: [RedisReply] = []
        do {
            switch topology {
            case .single(let node):
                replies = try await node.run(commands, deadline: deadline, givesUpAt: givesUpAt, repeatable: Self.repeatable.contains(name))
            case .cluster(let cluster):
                for (index, command) in commands.enumerated() {
                    let slot = key(index).map { RedisSlotMap.slot(of: prefixed($0)) }
                    replies.append(try await cluster.run(command, slot: slot, deadline: deadline, givesUpAt: givesUpAt, repeatable: Self.repeatable.contains(name)))
                }
            }
        } catch let error as StoreError {
            outcome = error.code
            logger.warning("redis command failed", metadata: ["command": "\(name)", "error": "\(error)"])
            throw error
        } catch {
            outcome = "cancelled"
            throw error
        }
        for (index, reply) in replies.enumerated() {
            guard case .error(let message) = reply else { continue }
            let error: StoreError =
                message.contains("WRONGTYPE")
                ? .wrongType(key: key(index) ?? "")
                : Self.refusalForNow(message).map { .storeUnavailable(reason: $0) } ?? .commandFailed(reason: message)
            outcome = error.code
            throw error
        }
        outcome = "ok"
        return replies
    }

    /// Why Redis refused a command for now, for the error replies that say the server cannot take
    /// it at the moment rather than that it is wrong; nil for any other reply. Each refuses the
    /// whole command (a write script stops at its first write), so nothing was written.
    static func refusalForNow(_ message: String) -> String? {
        let kind = message.prefix { $0 != " " }
        switch kind {
        case "READONLY": return "Redis answered as a read-only replica (failover in progress?)"
        // min-replicas-to-write: e.g. a replica just promoted, whose own replica is not back yet.
        case "NOREPLICAS": return "Redis refused the write: fewer replicas than its min-replicas-to-write are connected (NOREPLICAS)"
        // replica-serve-stale-data no: a replica that lost its master.
        case "MASTERDOWN": return "Redis is a replica that lost its master (MASTERDOWN)"
        case "LOADING": return "Redis is loading its data set after a restart (LOADING)"
        default: return nil
        }
    }

    /// A server setting (`CONFIG GET name`); nil when unset or when CONFIG is not allowed (managed
    /// services often rename or forbid it).
    public func serverSetting(_ name: String) async -> String? {
        guard case .array(let items)? = try? await execute("CONFIG", [bytes("CONFIG"), bytes("GET"), bytes(name)]), items.count == 2,
            case .string(let value) = items[1]
        else { return nil }
        return String(decoding: value, as: UTF8.self)
    }

    /// Whether calls currently fail at once (for tests and readiness): on a cluster, for some master.
    public var isCircuitOpen: Bool {
        switch topology {
        case .single(let node): node.isCircuitOpen
        case .cluster(let cluster): cluster.isCircuitOpen
        }
    }

    // MARK: - Helpers

    /// Calls that leave the same data and answer the same when run twice: after a connection
    /// closed unanswered, they alone are sent again (``RedisNode``). Not DEL or SREM (the second
    /// run answers "absent"), nor GETDEL or any script.
    private static let repeatable: Set<String> = ["GET", "GET_PIPELINE", "SET", "PEXPIRE", "PTTL", "SMEMBERS", "PING", "CONFIG"]

    // Scripts go out with every call: their bytes are made once.
    private static let deleteAnnouncingScript = Array("local n = redis.call('DEL', KEYS[1]) if n == 1 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end return n".utf8)
    /// When ARGV[3] is 1, takes the set KEYS[2]; with ARGV[4], that member then leaves the last
    /// key's set, by `pcall`: a value of another kind there is left as it is, not an error.
    private static let deleteAnnouncingTakingScript = Array(
        ("local taken = {} if ARGV[3] == '1' then taken = redis.call('SMEMBERS', KEYS[2]) end local n = redis.call('DEL', KEYS[1]) "
            + "if n == 1 then redis.call('PUBLISH', ARGV[1], ARGV[2]) end if #taken > 0 then redis.call('DEL', KEYS[2]) end "
            + "if ARGV[4] then redis.pcall('SREM', KEYS[#KEYS], ARGV[4]) end return {n, taken}").utf8)
    private static let deleteIfEqualScript = Array("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end".utf8)
    private static let setAddScript = Array(
        "redis.call('SADD', KEYS[1], ARGV[1]) if ARGV[2] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return redis.call('SCARD', KEYS[1])".utf8)
    private static let incrementScript = Array("local n = redis.call('INCR', KEYS[1]) if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return n".utf8)

    private func prefixed(_ key: String) -> [UInt8] { Array((configuration.keyPrefix + key).utf8) }
    private func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}
