import Synchronization

/// Receives the announcements of ``KeyValueStore/deleteAnnouncing(_:_:)`` from every instance, and
/// knows how current it is: an in-process cache may trust what it holds only while the listener
/// is ``isCurrent``, that is while every announcement made more than ``window`` ago has surely
/// been delivered.
///
/// On Redis the subscription sends a PING every ``proofInterval``; an answer proves that every
/// message published before that PING was sent has arrived (Redis answers in order on one
/// connection), so the listener is current while the last answered PING was sent less than
/// ``window`` ago. A lost connection makes it not current at once, and ``onReset`` tells the
/// owner to drop what it cached, since announcements may have been missed.
public final class AnnouncementListener: Sendable {
    /// How often the Redis subscription proves itself.
    public static let proofInterval: Duration = .milliseconds(200)
    /// How old the last proof may be: a revocation is acted on by every instance within it.
    public static let window: Duration = .milliseconds(800)

    let onMessage: @Sendable (String) -> Void
    let onReset: @Sendable () -> Void
    /// When the last proven PING was sent; nil while not subscribed.
    private let provenAt = Mutex<ContinuousClock.Instant?>(nil)
    /// The embedded store delivers in-process: always current.
    private let alwaysCurrent = Atomic<Bool>(false)

    public init(onMessage: @escaping @Sendable (String) -> Void, onReset: @escaping @Sendable () -> Void) {
        self.onMessage = onMessage
        self.onReset = onReset
    }

    public var isCurrent: Bool {
        if alwaysCurrent.load(ordering: .relaxed) { return true }
        guard let proven = provenAt.withLock({ $0 }) else { return false }
        return ContinuousClock.now - proven < Self.window
    }

    func deliverInProcess() { alwaysCurrent.store(true, ordering: .relaxed) }

    /// A PING sent at `sent` was answered: everything published before it has been delivered.
    func proven(sentAt sent: ContinuousClock.Instant) {
        provenAt.withLock { current in
            if current.map({ $0 < sent }) ?? true { current = sent }
        }
    }

    /// The subscription is gone: not current until proven again, and the owner drops its cache.
    func lost() {
        let wasCurrent = provenAt.withLock { current -> Bool in
            defer { current = nil }
            return current != nil
        }
        if wasCurrent { onReset() }
    }
}

/// A store's listeners, held weakly: a relay rebuilt on reload drops its old cache with its old
/// listener instead of leaving it registered for the life of the process.
final class AnnouncementListeners: Sendable {
    private struct Reference: Sendable {
        weak var listener: AnnouncementListener?
    }

    private let references = Mutex<[Reference]>([])

    func add(_ listener: AnnouncementListener) {
        references.withLock { references in
            references.removeAll { $0.listener == nil }
            references.append(Reference(listener: listener))
        }
    }

    /// The listeners still alive.
    var all: [AnnouncementListener] { references.withLock { $0.compactMap(\.listener) } }
}
