import Logging
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The store's subscription to its announcement channel, on a thread of its own (blocking hiredis
/// calls, never on an event loop: ``BlockingCallCheck`` reports one there): it delivers
/// messages to the listeners and proves itself with a PING every
/// ``AnnouncementListener/proofInterval`` (see ``AnnouncementListener``). A lost connection makes
/// every listener not current at once; the subscription reconnects every 250 ms until it is back.
///
/// On a cluster, any node will do: Redis Cluster forwards every PUBLISH to all nodes.
final class RedisSubscriber: Sendable {
    private let channel: [UInt8]
    /// Where to subscribe, tried in turn.
    private let connectors: [RedisConnector]
    private let logger: Logger
    private let listeners = AnnouncementListeners()
    private let thread = NIOThreadPool(numberOfThreads: 1)
    private let started = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)

    init(channel: String, connectors: [RedisConnector], logger: Logger) {
        self.channel = Array(channel.utf8)
        self.connectors = connectors
        self.logger = logger
    }

    func add(_ listener: AnnouncementListener) {
        listeners.add(listener)
        guard !started.exchange(true, ordering: .acquiringAndReleasing) else { return }
        thread.start()
        thread.submit { [self] state in
            guard case .active = state else { return }
            run()
        }
    }

    func shutdown() async throws {
        stopped.store(true, ordering: .releasing)
        // The loop notices within one poll (50 ms) and returns; the pool then ends.
        if started.load(ordering: .acquiring) { try await thread.shutdownGracefully() }
    }

    private func run() {
        var attempt = 0
        var failedBefore = false
        while !stopped.load(ordering: .acquiring) {
            let connector = connectors[attempt % connectors.count]
            attempt += 1
            do {
                let connection = try connector.openBlocking()
                try connection.send([Array("SUBSCRIBE".utf8), channel])
                if failedBefore { logger.notice("announcement subscription restored", metadata: ["redis": "\(connector.target)"]) }
                failedBefore = false
                try listen(on: connection)
            } catch {
                for listener in listeners.all { listener.lost() }
                if !failedBefore {
                    logger.warning(
                        "announcement subscription lost: in-process session caches are bypassed until it is back",
                        metadata: ["redis": "\(connector.target)", "error": "\(error.message)"]
                    )
                }
                failedBefore = true
                usleep(250_000)
            }
        }
        for listener in listeners.all { listener.lost() }
    }

    /// Reads messages and PING answers until the connection fails, a PING stays unanswered for
    /// three windows, or the store shuts down.
    private func listen(on connection: RedisConnection) throws(RedisConnectionFailure) {
        var pingsInFlight: [ContinuousClock.Instant] = []
        var nextPing = ContinuousClock.now
        while !stopped.load(ordering: .acquiring) {
            let now = ContinuousClock.now
            if now >= nextPing {
                try connection.send([Array("PING".utf8)])
                pingsInFlight.append(now)
                nextPing = now + AnnouncementListener.proofInterval
            }
            if let oldest = pingsInFlight.first, now - oldest > AnnouncementListener.window * 3 {
                throw RedisConnectionFailure(message: "no answer to PING for \(now - oldest)", isStaleConnection: false)
            }
            for reply in try connection.receive(within: .milliseconds(50)) {
                guard case .array(let parts) = reply, case .string(let kind)? = parts.first else { continue }
                switch String(decoding: kind, as: UTF8.self) {
                case "message":
                    guard parts.count == 3, case .string(let payload) = parts[2] else { continue }
                    let message = String(decoding: payload, as: UTF8.self)
                    for listener in listeners.all { listener.onMessage(message) }
                case "pong":
                    guard !pingsInFlight.isEmpty else { continue }
                    let sent = pingsInFlight.removeFirst()
                    for listener in listeners.all { listener.proven(sentAt: sent) }
                default:
                    continue  // the subscription's confirmation
                }
            }
        }
    }
}
