import Logging
import NIOCore
import NIOPosix
import Synchronization

/// Redis Cluster: each command goes to the master of its key's slot, with one ``RedisNode``
/// (connections, breaker) per master.
///
/// The slot map comes from `CLUSTER SLOTS`, asked of the known masters, then the seeds, then the
/// replicas, on first use and again (at most every ``refreshInterval``) whenever a node fails or
/// answers `MOVED`. `MOVED` is followed at once (the map learns the slot's new master), `ASK`
/// (a slot being migrated) once with `ASKING`, `TRYAGAIN` after a short pause. While a master is
/// down and before its replica takes over, calls for its slots fail with
/// ``StoreError/storeUnavailable(reason:)`` (503 to clients), never a 500.
///
/// Reads go to masters too: a replica may lag behind, and a session revoked on the master but still
/// on a replica must not be accepted.
final class RedisCluster: Sendable {
    private let configuration: RedisConfiguration
    private let seeds: [RedisConfiguration.Node]
    private let logger: Logger
    private let group: MultiThreadedEventLoopGroup
    private let state = Mutex(State())

    static let maxRedirections = 5
    static let refreshInterval: Duration = .milliseconds(100)

    private struct State {
        var map: RedisSlotMap?
        var nodes: [RedisConfiguration.Node: RedisNode] = [:]
        var refresh: Task<Void, Never>?
        var lastRefresh: ContinuousClock.Instant?
        /// Why the last refresh found no map, for the error of calls that need one.
        var lastFailure = ""
        var isShutdown = false
    }

    init(configuration: RedisConfiguration, seeds: [RedisConfiguration.Node], group: MultiThreadedEventLoopGroup, logger: Logger) {
        self.configuration = configuration
        self.group = group
        self.seeds = seeds
        self.logger = logger
    }

    /// Runs `command` on the master of `slot` (any master when nil), following redirections.
    func run(_ command: [[UInt8]], slot: Int?, deadline: ContinuousClock.Instant, givesUpAt: ContinuousClock.Instant?, repeatable: Bool) async throws -> RedisReply {
        var target = try await master(of: slot, until: givesUpAt)
        var asking = false
        var redirections = 0
        var migrating = false  // seen TRYAGAIN: a later timeout is the migration's, and says so
        while true {
            // A MOVED or ASK answer, or a retired node, counts against the bound; TRYAGAIN against the deadline.
            guard redirections <= Self.maxRedirections else {
                throw StoreError.storeUnavailable(reason: "Redis Cluster kept redirecting slot \(slot.map(String.init) ?? "-") (resharding in progress?)")
            }
            let replies: [RedisReply]
            do {
                replies = try await client(for: target).run(
                    asking ? [[Array("ASKING".utf8)], command] : [command], deadline: deadline, givesUpAt: givesUpAt, repeatable: repeatable)
            } catch StoreError.shutdown where !state.withLock({ $0.isShutdown }) {
                // A refresh retired this node (no longer a master) while the call was on its way.
                target = try await master(of: slot, until: givesUpAt)
                redirections += 1
                continue
            } catch let error as StoreError {
                guard case .storeUnavailable = error else { throw error }
                refreshSoon()
                throw migrating ? Self.migratingSlot(slot) : error
            }
            guard let reply = replies.last, case .error(let message) = reply else { return replies.last ?? .null }
            switch RedisRedirection(error: message, answeredBy: target.host) {
            case .moved(let movedSlot, let node):
                state.withLock { $0.map?.assign(movedSlot, to: node) }
                refreshSoon()
                target = node
                asking = false
                redirections += 1
            case .ask(_, let node):
                target = node
                asking = true
                redirections += 1
            case nil:
                if message.hasPrefix("TRYAGAIN") {
                    // A multi-key step during a slot's migration: its keys are on both sides for a moment.
                    migrating = true
                    guard ContinuousClock.now + .milliseconds(20) < min(deadline, givesUpAt ?? deadline) else { throw Self.migratingSlot(slot) }
                    try await Task.sleep(for: .milliseconds(20))
                    // From the slot's master again: the migration may have moved on meanwhile.
                    target = try await master(of: slot, until: givesUpAt)
                    asking = false
                    continue
                }
                if message.hasPrefix("CLUSTERDOWN") {
                    refreshSoon()
                    throw StoreError.storeUnavailable(reason: "Redis Cluster is down (\(message))")
                }
                return reply
            }
        }
    }

    private static func migratingSlot(_ slot: Int?) -> StoreError {
        .storeUnavailable(reason: "Redis Cluster is migrating slot \(slot.map(String.init) ?? "-") (TRYAGAIN until the deadline)")
    }

    /// Succeeds when at least one master answers PING: the cluster is reachable (a single master
    /// being down shows as 503 on its own slots, not as the whole instance unready).
    func ping(deadline: ContinuousClock.Instant) async throws {
        let masters = try await currentMap().masters
        var reasons: [String] = []
        for master in masters {
            do {
                if case .status("PONG")? = try await client(for: master).run([[Array("PING".utf8)]], deadline: deadline, repeatable: true).first { return }
                reasons.append("\(master): unexpected reply to PING")
            } catch let error as StoreError {
                reasons.append("\(master): \(error.description)")
            }
        }
        refreshSoon()
        throw StoreError.storeUnavailable(reason: "no Redis Cluster master answered PING: " + reasons.joined(separator: "; "))
    }

    /// Publishes `message(k)` on the k-th master of the current map, all at once: the number of
    /// masters when every one took it, nil otherwise (one is down or slow: no proof this round).
    /// Waits a proof's window at most.
    func publishOnEveryMaster(_ channel: [UInt8], _ message: (Int) -> [UInt8]) async -> Int? {
        let now = ContinuousClock.now
        let (deadline, givesUpAt) = (now + configuration.commandTimeout, now + AnnouncementListener.window)
        guard let masters = try? await currentMap().masters, !masters.isEmpty else { return nil }
        let commands = masters.indices.map { [[Array("PUBLISH".utf8), channel, message($0)]] }
        let nodes = masters.map(client(for:))
        let giving = givesUpAt < deadline ? givesUpAt : nil
        let published = await withTaskGroup(of: Bool.self) { group in
            for (node, command) in zip(nodes, commands) {
                group.addTask {
                    guard case .integer? = try? await node.run(command, deadline: deadline, givesUpAt: giving, repeatable: true).first else { return false }
                    return true
                }
            }
            return await group.reduce(true) { $0 && $1 }
        }
        return published ? masters.count : nil
    }

    /// Whether any master's circuit is open.
    var isCircuitOpen: Bool { state.withLock { Array($0.nodes.values) }.contains { $0.isCircuitOpen } }

    func shutdown() async throws {
        let (nodes, refresh) = state.withLock { state in
            state.isShutdown = true
            defer { state.nodes.removeAll() }
            return (Array(state.nodes.values), state.refresh)
        }
        refresh?.cancel()
        for node in nodes { try await node.shutdown() }
    }

    // MARK: - Slot map

    private func master(of slot: Int?, until givesUpAt: ContinuousClock.Instant?) async throws -> RedisConfiguration.Node {
        let map = try await currentMap(until: givesUpAt)
        guard let master = slot.map(map.master(of:)) ?? map.masters.first else {
            refreshSoon()
            throw StoreError.storeUnavailable(reason: "no Redis Cluster master serves slot \(slot.map(String.init) ?? "-") (failover in progress?)")
        }
        return master
    }

    /// The map, asked for now if there is none yet: a call waits for it until `givesUpAt` at most
    /// (its request's store budget; the asking goes on for the calls after it).
    private func currentMap(until givesUpAt: ContinuousClock.Instant? = nil) async throws -> RedisSlotMap {
        if let map = state.withLock({ $0.map }) { return map }
        if let refresh = startRefresh(force: true) {
            // Past the budget the map is simply not there yet: said below.
            _ = try? await RedisNode.wait(
                for: group.next().makeFutureWithTask { await refresh.value }, until: givesUpAt, failing: .storeUnavailable(reason: "the store budget is spent"))
        }
        guard let map = state.withLock({ $0.map }) else {
            let failure = state.withLock { $0.lastFailure }
            throw StoreError.storeUnavailable(reason: "no Redis Cluster node gave its slot map" + (failure.isEmpty ? " yet (the request's store budget is spent)" : ": " + failure))
        }
        return map
    }

    private func refreshSoon() { _ = startRefresh(force: false) }

    /// The refresh under way, or a new one when the last ended over ``refreshInterval`` ago (or
    /// `force`); nil when none is needed.
    private func startRefresh(force: Bool) -> Task<Void, Never>? {
        state.withLock { state -> Task<Void, Never>? in
            if let running = state.refresh { return running }
            guard !state.isShutdown else { return nil }
            if !force, let last = state.lastRefresh, ContinuousClock.now - last < Self.refreshInterval { return nil }
            let task = Task { [self] in await refresh() }
            state.refresh = task
            return task
        }
    }

    private func refresh() async {
        let known = state.withLock { $0.map }
        var candidates: [RedisConfiguration.Node] = []
        for node in (known?.masters ?? []) + seeds + (known?.replicas ?? []) where !candidates.contains(node) { candidates.append(node) }
        // On connections of its own: a refresh never waits behind a busy node's commands.
        let outcome = await Self.askSlotMap(of: candidates, configuration: configuration, on: group.next())
        let (retired, changed) = state.withLock { state -> ([RedisNode], Bool) in
            state.refresh = nil
            state.lastRefresh = ContinuousClock.now
            switch outcome {
            case .failure(let error):
                state.lastFailure = error.description
                return ([], false)
            case .success(let map):
                let changed = state.map?.masters != map.masters
                state.map = map
                let gone = state.nodes.keys.filter { !map.masters.contains($0) }
                return (gone.compactMap { state.nodes.removeValue(forKey: $0) }, changed)
            }
        }
        if changed, case .success(let map) = outcome {
            logger.notice("redis cluster map", metadata: ["masters": "\(map.masters.map(\.description).joined(separator: " "))", "slots": "\(map.coveredSlots)"])
        }
        // A former master (dead, or now a replica) keeps no connections nor probe.
        for node in retired { try? await node.shutdown() }
    }

    /// The first node that answers `CLUSTER SLOTS` with a map gives it.
    private static func askSlotMap(
        of candidates: [RedisConfiguration.Node], configuration: RedisConfiguration, on loop: any EventLoop
    ) async -> Result<RedisSlotMap, StoreError> {
        var reasons: [String] = []
        for node in candidates {
            do {
                let connection = try await RedisChannelConnection.open(configuration, address: (node.host, node.port), on: loop)
                defer { connection.close() }
                let reply = try await connection.command([Array("CLUSTER".utf8), Array("SLOTS".utf8)], deadline: ContinuousClock.now + configuration.commandTimeout)
                if case .error(let message) = reply {
                    reasons.append("\(node): \(message)")
                    continue
                }
                let map = try RedisSlotMap(clusterSlots: reply, askedHost: node.host)
                guard !map.masters.isEmpty else {
                    reasons.append("\(node): serves no slot (not part of a cluster yet?)")
                    continue
                }
                return .success(map)
            } catch let failure as RedisConnectionFailure {
                reasons.append("\(node): \(failure.message)")
            } catch {
                reasons.append("\(node): \(error)")
            }
        }
        return .failure(.storeUnavailable(reason: reasons.joined(separator: "; ")))
    }

    private func client(for node: RedisConfiguration.Node) -> RedisNode {
        state.withLock { state in
            if let existing = state.nodes[node] { return existing }
            let created = RedisNode(connector: RedisConnector(configuration: configuration, node: node), group: group, logger: logger)
            state.nodes[node] = created
            return created
        }
    }
}
