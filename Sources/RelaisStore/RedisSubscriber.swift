import Logging
import NIOCore
import NIOPosix
import Synchronization

/// The store's subscription to its announcement channel, on a connection of its own in subscriber
/// mode (``RedisPushMode``): it delivers messages to the listeners and proves itself with a PING
/// every ``AnnouncementListener/proofInterval`` while a reader relies on it (see
/// ``AnnouncementListener``, ``AnnouncementListener/quietAfter``). A lost connection
/// makes every listener not current at once; the subscription reconnects every 250 ms until it is
/// back.
///
/// On a cluster, any node will do: Redis Cluster forwards every PUBLISH to all nodes.
final class RedisSubscriber: Sendable {
    private let channel: [UInt8]
    /// Where to subscribe, tried in turn.
    private let connectors: [RedisConnector]
    private let group: MultiThreadedEventLoopGroup
    private let logger: Logger
    private let listeners = AnnouncementListeners()
    private let task = Mutex<Task<Void, Never>?>(nil)
    private let started = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)

    init(channel: String, connectors: [RedisConnector], group: MultiThreadedEventLoopGroup, logger: Logger) {
        self.channel = Array(channel.utf8)
        self.connectors = connectors
        self.group = group
        self.logger = logger
    }

    func add(_ listener: AnnouncementListener) {
        listeners.add(listener)
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let running = Task { [self] in await run() }
        task.withLock { $0 = running }
    }

    func shutdown() async {
        stopped.store(true, ordering: .releasing)
        let running = task.withLock { $0 }
        running?.cancel()
        await running?.value
    }

    private var isStopped: Bool { stopped.load(ordering: .acquiring) || Task.isCancelled }

    private func run() async {
        var attempt = 0
        var failedBefore = false
        while !isStopped {
            let connector = connectors[attempt % connectors.count]
            attempt += 1
            do throws(RedisConnectionFailure) {
                let connection = try await connector.open(on: group.next())
                defer { connection.close() }
                try await listen(on: connection) {
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
    private func listen(on connection: RedisChannelConnection, subscribed: () -> Void) async throws(RedisConnectionFailure) {
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
        let pings = PingsInFlight()
        let listeners = self.listeners
        let pinger = Task {
            var lastAsked = ContinuousClock.now
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
                for listener in listeners.all { listener.onMessage(message) }
            case "pong":
                guard let sent = pings.answered() else { continue }
                for listener in listeners.all { listener.proven(sentAt: sent) }
            default:
                continue  // the subscription's confirmation
            }
        }
        guard !isStopped else { return }
        if let stalled = pings.stalled { throw RedisConnectionFailure(message: "no answer to PING for \(stalled)", isStaleConnection: false) }
        throw RedisConnectionFailure(message: "connection closed by Redis", isStaleConnection: false)
    }
}

/// The subscription's PINGs not answered yet, oldest first (Redis answers in order).
private final class PingsInFlight: Sendable {
    private struct State {
        var sent: [ContinuousClock.Instant] = []
        var stalled: Duration?
    }

    private let state = Mutex(State())

    var oldest: ContinuousClock.Instant? { state.withLock { $0.sent.first } }
    var stalled: Duration? { state.withLock { $0.stalled } }
    func sent(at instant: ContinuousClock.Instant) { state.withLock { $0.sent.append(instant) } }
    func stall(_ duration: Duration) { state.withLock { $0.stalled = duration } }

    /// When the PING just answered was sent.
    func answered() -> ContinuousClock.Instant? {
        state.withLock { $0.sent.isEmpty ? nil : $0.sent.removeFirst() }
    }
}
