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
    /// When the last proven PING was sent, in nanoseconds since ``origin``; `Int64.min` while not
    /// subscribed. An atomic, not a lock: every session check of every event loop reads it.
    private let provenAt = Atomic<Int64>(.min)
    private static let origin = ContinuousClock.now
    private static let windowNanoseconds = nanoseconds(window)
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
        let proven = provenAt.load(ordering: .acquiring)
        guard proven != .min else { return false }
        return Self.nanoseconds(ContinuousClock.now - Self.origin) - proven < Self.windowNanoseconds
    }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    func deliverInProcess() { alwaysCurrent.store(true, ordering: .relaxed) }

    /// A PING sent at `sent` was answered: everything published before it has been delivered.
    func proven(sentAt sent: ContinuousClock.Instant) {
        let value = Self.nanoseconds(sent - Self.origin)
        var current = provenAt.load(ordering: .relaxed)
        // Releasing: a reader that sees this proof also sees the announcements delivered before it.
        while current == .min || current < value {
            let (exchanged, original) = provenAt.compareExchange(expected: current, desired: value, ordering: .acquiringAndReleasing)
            if exchanged { return }
            current = original
        }
    }

    /// The subscription is gone: not current until proven again, and the owner drops its cache.
    func lost() {
        if provenAt.exchange(.min, ordering: .acquiringAndReleasing) != .min { onReset() }
    }
}

/// A store's listeners, held weakly: a relay rebuilt on reload drops its old cache with its old
/// listener instead of leaving it registered for the life of the process.
final class AnnouncementListeners: Sendable {
    private struct Reference: Sendable {
        weak var listener: AnnouncementListener?
    }

    private let references = Mutex<[Reference]>([])
    /// While the subscription rests (``restUntilAsked()``): that rest's number and what wakes it.
    private let resting = Mutex<(rest: Int, wake: @Sendable () -> Void)?>(nil)
    private let rests = Atomic<Int>(0)

    func add(_ listener: AnnouncementListener) {
        references.withLock { references in
            references.removeAll { $0.listener == nil }
            references.append(Reference(listener: listener))
        }
        if let (rest, wake) = resting.withLock({ $0 }) { listener.demand.onAsk(wake, rest: rest) }
    }

    /// Returns at the next call of any listener's ``AnnouncementListener/isCurrent``, one added
    /// meanwhile included (or when the task is cancelled): no thread wakes for the subscription
    /// until then.
    func restUntilAsked() async {
        // Numbered, so that a rest ending late (a pinger of a connection gone) never clears what a
        // later one registered.
        let rest = rests.add(1, ordering: .relaxed).newValue
        let resumed = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let resume: @Sendable () -> Void = { resumed.withLock { $0.take() }?.resume() }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                resumed.withLock { $0 = continuation }
                resting.withLock { $0 = (rest, resume) }
                for listener in all { listener.demand.onAsk(resume, rest: rest) }
                if Task.isCancelled { resume() }
            }
        } onCancel: {
            resume()
        }
        resting.withLock { if $0?.rest == rest { $0 = nil } }
        for listener in all { listener.demand.forget(rest: rest) }
    }

    /// The listeners still alive.
    var all: [AnnouncementListener] { references.withLock { $0.compactMap(\.listener) } }
}

/// Whether a listener's reader asked since the subscription last looked, and how to wake the
/// subscription resting after a quiet spell. A reader's call costs one relaxed load once the flag
/// is set; setting it (at most once per proof interval) takes a lock.
final class ReaderDemand: Sendable {
    private let asked = Atomic<Bool>(false)
    private let wake = Mutex<(rest: Int, action: @Sendable () -> Void)?>(nil)

    func readerAsked() {
        guard !asked.load(ordering: .relaxed) else { return }
        asked.store(true, ordering: .relaxed)
        wake.withLock { $0?.action }?()
    }

    /// Whether a reader asked since the last call, clearing it.
    func take() -> Bool { asked.exchange(false, ordering: .relaxed) }

    /// `action` runs at the next reader's call (at once if one came since ``take()``), unless a
    /// later rest registered its own.
    func onAsk(_ action: @escaping @Sendable () -> Void, rest: Int) {
        let registered = wake.withLock { current -> Bool in
            guard (current?.rest ?? .min) <= rest else { return false }
            current = (rest, action)
            return true
        }
        if registered, asked.load(ordering: .relaxed) { action() }
    }

    /// Rest `rest` is over: its action runs no more.
    func forget(rest: Int) {
        wake.withLock { if $0?.rest == rest { $0 = nil } }
    }
}
