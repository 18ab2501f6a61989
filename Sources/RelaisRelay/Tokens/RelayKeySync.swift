import ServiceLifecycle
import Synchronization

/// Keeps the running relay's generated development keys in step with the store, every
/// ``RelayKeys/checkInterval``: so that an instance signs and seals with the key every instance
/// shares, puts back one the store lost, and adopts one another instance wrote first (``RelayKeys``).
/// A reload builds a relay with keys of its own: ``follow(_:)`` points the service at them.
final class RelayKeySync: Service, Sendable {
    private let keys = Mutex<RelayKeys?>(nil)
    /// Waits for the next round; tests run rounds instead of waiting.
    private let wait: @Sendable (Duration) async throws -> Void

    convenience init() {
        self.init(wait: { try await Task.sleep(for: $0) })
    }

    init(wait: @escaping @Sendable (Duration) async throws -> Void) {
        self.wait = wait
    }

    /// From now on, the keys of `relay` (configured keys: each round does nothing).
    func follow(_ relay: Relay) {
        keys.withLock { $0 = relay.keys }
    }

    /// Until graceful shutdown (or cancellation) ends the wait.
    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                try await self.wait(RelayKeys.checkInterval)
                await self.keys.withLock { $0 }?.synchronize()
            }
        }
    }
}
