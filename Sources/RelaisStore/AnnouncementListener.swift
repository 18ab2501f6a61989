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
///
/// The PINGs go only while someone relies on them: after ``quietAfter`` without a call to
/// ``isCurrent`` the subscription stops proving itself (an idle instance then wakes no thread and
/// sends Redis nothing), and the next call, answered false, sets it going again.
public final class AnnouncementListener: Sendable {
    /// How often the Redis subscription proves itself.
    public static let proofInterval: Duration = .milliseconds(200)
    /// How old the last proof may be: a revocation is acted on by every instance within it.
    public static let window: Duration = .milliseconds(800)
    /// How long the subscription goes on proving itself after the last call to ``isCurrent``.
    public static let quietAfter: Duration = .seconds(5)

    let onMessage: @Sendable (String) -> Void
    let onReset: @Sendable () -> Void
    /// When the last proven PING was sent; nil while not subscribed.
    private let provenAt = Mutex<ContinuousClock.Instant?>(nil)
    /// The embedded store delivers in-process: always current.
    private let alwaysCurrent = Atomic<Bool>(false)
    /// Tells the subscription that a reader relies on it.
    let demand = ReaderDemand()

    public init(onMessage: @escaping @Sendable (String) -> Void, onReset: @escaping @Sendable () -> Void) {
        self.onMessage = onMessage
        self.onReset = onReset
    }

    public var isCurrent: Bool {
        if alwaysCurrent.load(ordering: .relaxed) { return true }
        demand.readerAsked()
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
    /// While the subscription rests (``restUntilAsked()``): what wakes it.
    private let resting = Mutex<(@Sendable () -> Void)?>(nil)

    func add(_ listener: AnnouncementListener) {
        references.withLock { references in
            references.removeAll { $0.listener == nil }
            references.append(Reference(listener: listener))
        }
        if let wake = resting.withLock({ $0 }) { listener.demand.onAsk(wake) }
    }

    /// Returns at the next call of any listener's ``AnnouncementListener/isCurrent``, one added
    /// meanwhile included (or when the task is cancelled): no thread wakes for the subscription
    /// until then.
    func restUntilAsked() async {
        let resumed = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let resume: @Sendable () -> Void = { resumed.withLock { $0.take() }?.resume() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                resumed.withLock { $0 = continuation }
                resting.withLock { $0 = resume }
                for listener in all { listener.demand.onAsk(resume) }
                if Task.isCancelled { resume() }
            }
        } onCancel: {
            resume()
        }
        resting.withLock { $0 = nil }
        for listener in all { listener.demand.onAsk(nil) }
    }

    /// The listeners still alive.
    var all: [AnnouncementListener] { references.withLock { $0.compactMap(\.listener) } }
}

/// Whether a listener's reader asked since the subscription last looked, and how to wake the
/// subscription resting after a quiet spell. A reader's call costs one relaxed load once the flag
/// is set; setting it (at most once per proof interval) takes a lock.
final class ReaderDemand: Sendable {
    private let asked = Atomic<Bool>(false)
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)

    func readerAsked() {
        guard !asked.load(ordering: .relaxed) else { return }
        asked.store(true, ordering: .relaxed)
        wake.withLock { $0 }?()
    }

    /// Whether a reader asked since the last call, clearing it.
    func take() -> Bool { asked.exchange(false, ordering: .relaxed) }

    /// `action` runs at the next reader's call (at once if one came since ``take()``); nil: no longer.
    func onAsk(_ action: (@Sendable () -> Void)?) {
        wake.withLock { $0 = action }
        if action != nil, asked.load(ordering: .relaxed) { action?() }
    }
}
