import Logging
import NIOCore
import NIOPosix
import RelaisCrypto
import Synchronization

/// The store's subscription to its announcement channel, on a connection of its own in subscriber
/// mode (``RedisPushMode``): it delivers messages to the listeners and proves itself with a PING
/// every ``AnnouncementListener/proofInterval`` while a reader relies on it (see
/// ``AnnouncementListener``, ``AnnouncementListener/quietAfter``). A lost connection
/// makes every listener not current at once; the subscription reconnects every 250 ms until it is
/// back.
///
/// On a cluster, any node will do: Redis Cluster forwards every PUBLISH to all nodes, over its
/// bus. A PING answered by that node says nothing of what another master published and its bus
/// has not delivered yet, though: there each proof round also publishes a marker on every master
/// (``publishOnEveryMaster``), and the round proves the subscription once every marker came back
/// through it (a master's messages cross the bus in order).
final class RedisSubscriber: Sendable {
    private let channel: [UInt8]
    /// Where to subscribe, tried in turn.
    private let connectors: [RedisConnector]
    /// On a cluster: publishes `message(k)` on master k, and says on how many masters (nil when
    /// one of them did not take it).
    typealias PublishOnEveryMaster = @Sendable (_ channel: [UInt8], _ message: @Sendable (Int) -> [UInt8]) async -> Int?
    private let publishOnEveryMaster: PublishOnEveryMaster?
    /// Names this subscriber's markers among those of every instance.
    private let markerPrefix = "\u{1}proof \(SecureRandom.token(bits: 64)) "
    private let group: MultiThreadedEventLoopGroup
    private let logger: Logger
    private let listeners = AnnouncementListeners()
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let started = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)

    init(channel: String, connectors: [RedisConnector], publishOnEveryMaster: PublishOnEveryMaster? = nil, group: MultiThreadedEventLoopGroup, logger: Logger) {
        self.channel = Array(channel.utf8)
        self.connectors = connectors
        self.publishOnEveryMaster = publishOnEveryMaster
        self.group = group
        self.logger = logger
    }

    func add(_ listener: AnnouncementListener) {
        listeners.add(listener)
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // One loop for the whole subscription (its connection, its reads, its PINGs), and its tasks
        // run there: a proof never waits for a thread of Swift's global pool, which a busy process
        // may hold for longer than the proof window, making every cache of the instance bypassed.
        let executor = EventLoopTaskExecutor(group.next())
        let running = Task(executorPreference: executor) { [self] in await run(on: executor) }
        task.withLock { $0 = running }
    }

    func shutdown() async {
        stopped.store(true, ordering: .releasing)
        let running = task.withLock { $0 }
        running?.cancel()
        await running?.value
    }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) || Task.isCancelled }

    private func run(on executor: EventLoopTaskExecutor) async {
        var attempt = 0
        var failedBefore = false
        while !isStopped {
            let connector = connectors[attempt % connectors.count]
            attempt += 1
            do throws(RedisConnectionFailure) {
                let connection = try await connector.open(on: executor.eventLoop)
                defer { connection.close() }
                try await listen(on: connection, executor: executor) {
                    if failedBefore { logger.notice("announcement subscription restored", metadata: ["redis": "\(connector.target)"]) }
                    failedBefore = false
                }
            } catch {
                guard !isStopped else { break }
                for listener in listeners.all { listener.lost() }
                if !failedBefore {
                    logger.warning(
                        "announcement subscription lost: in-process session caches are bypassed until it is back",
                        metadata: ["redis": "\(connector.target)", "error": "\(error.message)"]
                    )
                }
                failedBefore = true
                try? await Task.sleep(for: .milliseconds(250))
            }
        }
        for listener in listeners.all { listener.lost() }
    }

    /// Subscribes, then reads messages and PING answers until the connection fails, a PING stays
    /// unanswered for three windows, or the store shuts down.
    private func listen(on connection: RedisChannelConnection, executor: EventLoopTaskExecutor, subscribed: () -> Void) async throws(RedisConnectionFailure) {
        let (replies, continuation) = AsyncStream.makeStream(of: RedisReply.self)
        connection.channel.closeFuture.whenComplete { _ in continuation.finish() }
        do {
            try await connection.channel.triggerUserOutboundEvent(RedisPushMode { continuation.yield($0) }).get()
        } catch {
            throw RedisConnectionFailure(message: "connection lost: \(error)", isStaleConnection: false)
        }
        let deadline = ContinuousClock.now + connection.commandTimeout
        _ = try await connection.replies([[Array("SUBSCRIBE".utf8), channel]], deadline: deadline)
        subscribed()
        let pings = Proofs(byMarkers: publishOnEveryMaster != nil)
        let listeners = self.listeners
        let (publishOnEveryMaster, channel, markerPrefix) = (self.publishOnEveryMaster, self.channel, self.markerPrefix)
        let pinger = Task(executorPreference: executor) {
            var lastAsked = ContinuousClock.now
            var round = 0
            while !Task.isCancelled {
                var now = ContinuousClock.now
                if let oldest = pings.oldest, now - oldest > AnnouncementListener.window * 3 {
                    pings.stall(now - oldest)
                    return connection.close()
                }
                if listeners.all.map({ $0.demand.take() }).contains(true) {
                    lastAsked = now
                } else if now - lastAsked > AnnouncementListener.quietAfter, pings.oldest == nil {
                    await listeners.restUntilAsked()
                    (now, lastAsked) = (ContinuousClock.now, ContinuousClock.now)
                }
                if let publishOnEveryMaster {
                    round += 1
                    pings.begin(round: round, at: now)
                    let masters = await publishOnEveryMaster(channel) { [round] master in Array("\(markerPrefix)\(round) \(master)".utf8) }
                    if let proof = pings.published(round: round, masters: masters) { for listener in listeners.all { listener.proven(sentAt: proof) } }
                }
                pings.sent(at: now)
                _ = try? await connection.replies([[Array("PING".utf8)]], deadline: now + connection.commandTimeout)
                try? await Task.sleep(for: AnnouncementListener.proofInterval)
            }
        }
        defer { pinger.cancel() }
        for await reply in replies {
            guard case .array(let parts) = reply, case .string(let kind)? = parts.first else { continue }
            switch String(decoding: kind, as: UTF8.self) {
            case "message":
                guard parts.count == 3, case .string(let payload) = parts[2] else { continue }
                let message = String(decoding: payload, as: UTF8.self)
                guard !message.hasPrefix(Self.markerStart) else {
                    // A proof marker: this subscriber's (round and master after its prefix), or
                    // another instance's, which no listener hears either.
                    guard message.hasPrefix(markerPrefix) else { continue }
                    let numbers = message.dropFirst(markerPrefix.count).split(separator: " ").compactMap { Int($0) }
                    guard numbers.count == 2, let proof = pings.heard(round: numbers[0], master: numbers[1]) else { continue }
                    for listener in listeners.all { listener.proven(sentAt: proof) }
                    continue
                }
                for listener in listeners.all { listener.onMessage(message) }
            case "pong":
                guard let proof = pings.answered() else { continue }
                for listener in listeners.all { listener.proven(sentAt: proof) }
            default:
                continue  // the subscription's confirmation
            }
        }
        guard !isStopped else { return }
        if let stalled = pings.stalled { throw RedisConnectionFailure(message: "no answer to PING for \(stalled)", isStaleConnection: false) }
        throw RedisConnectionFailure(message: "connection closed by Redis", isStaleConnection: false)
    }
}

extension RedisSubscriber {
    /// What every proof marker starts with, whichever instance published it.
    static let markerStart = "\u{1}proof "
}

/// What proves a subscription current: its PINGs not answered yet, oldest first (Redis answers in
/// order), and on a cluster its rounds of markers not all heard yet. The proof is when the last
/// answered PING was sent, or on a cluster the older of that and the last round fully heard.
final class Proofs: Sendable {
    private struct Round {
        var sent: ContinuousClock.Instant
        var masters: Int?
        var heard: Set<Int> = []
    }

    private struct State {
        var sent: [ContinuousClock.Instant] = []
        var stalled: Duration?
        var lastPing: ContinuousClock.Instant?
        var rounds: [Int: Round] = [:]
        var lastRound: ContinuousClock.Instant?

        var proof: ContinuousClock.Instant? {
            guard let lastPing else { return nil }
            guard byMarkers else { return lastPing }
            return lastRound.map { min($0, lastPing) }
        }
        let byMarkers: Bool

        /// Round `number` is complete when every master's marker came: everything published before
        /// it on any master has come too. Rounds before it are then of no use.
        mutating func check(_ number: Int) -> ContinuousClock.Instant? {
            // Every master's own index: a marker naming one past them (anyone may publish on the
            // channel) completes nothing.
            guard let round = rounds[number], let masters = round.masters, round.heard.isSuperset(of: 0..<masters) else { return nil }
            lastRound = max(lastRound ?? round.sent, round.sent)
            rounds = rounds.filter { $0.key > number }
            return proof
        }
    }

    /// Rounds kept waiting at most: while a master is down none completes.
    private static let roundsKept = 16
    /// Redis Cluster's own ceiling on nodes: a marker naming a master beyond it is not counted,
    /// so that what a round holds stays bounded.
    private static let mostMasters = 1000
    private let state: Mutex<State>

    init(byMarkers: Bool) { state = Mutex(State(byMarkers: byMarkers)) }

    var oldest: ContinuousClock.Instant? { state.withLock { $0.sent.first } }
    var stalled: Duration? { state.withLock { $0.stalled } }
    func sent(at instant: ContinuousClock.Instant) { state.withLock { $0.sent.append(instant) } }
    func stall(_ duration: Duration) { state.withLock { $0.stalled = duration } }

    /// A PING was answered: the proof it makes, if any.
    func answered() -> ContinuousClock.Instant? {
        state.withLock { state in
            guard !state.sent.isEmpty else { return nil }
            state.lastPing = state.sent.removeFirst()
            return state.proof
        }
    }

    /// Round `number` starts (before its markers go, which may come back before they are counted).
    func begin(round number: Int, at instant: ContinuousClock.Instant) {
        state.withLock { state in
            state.rounds[number] = Round(sent: instant)
            if state.rounds.count > Self.roundsKept, let oldest = state.rounds.keys.min() { state.rounds[oldest] = nil }
        }
    }

    /// Round `number`'s markers went out on `masters` masters (nil: not on all): the proof it makes, if any.
    func published(round number: Int, masters: Int?) -> ContinuousClock.Instant? {
        state.withLock { state in
            guard let masters else {
                state.rounds[number] = nil
                return nil
            }
            state.rounds[number]?.masters = masters
            return state.check(number)
        }
    }

    /// Master `master`'s marker of round `number` came: the proof it makes, if any.
    func heard(round number: Int, master: Int) -> ContinuousClock.Instant? {
        state.withLock { state in
            guard state.rounds[number] != nil, (0..<Self.mostMasters).contains(master) else { return nil }
            state.rounds[number]?.heard.insert(master)
            return state.check(number)
        }
    }
}
