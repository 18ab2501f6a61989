import FoundationEssentials
import Synchronization

/// Where every time decision in the relay and the OpenID Connect client reads the time: token
/// `iat`/`exp`, transaction, code and session lifetimes, refresh grace, rate-limit windows, replay
/// windows, provider metadata and key caches. Production uses ``SystemClock``; tests use
/// ``ManualClock`` and move time instead of sleeping.
public protocol RelaisClock: Sendable {
    /// Wall time in seconds since 1970: what goes into tokens and stored records.
    var now: Double { get }
    /// Monotonic time, for measuring ages and deadlines that must not jump with the wall clock.
    var instant: ContinuousClock.Instant { get }
}

extension RelaisClock {
    /// Whole seconds since 1970, as JWT `iat`/`exp` carry them.
    public var seconds: Int { Int(now) }
}

/// The machine's clocks.
public struct SystemClock: RelaisClock {
    public init() {}
    public var now: Double { Date().timeIntervalSince1970 }
    public var instant: ContinuousClock.Instant { ContinuousClock.now }
}

/// A clock that only moves when told to: both readings advance together by ``advance(by:)``.
public final class ManualClock: RelaisClock {
    private let start: (wall: Double, instant: ContinuousClock.Instant)
    private let offset = Mutex<Duration>(.zero)

    /// Starts at `wall` seconds since 1970 (the machine's time by default, so tokens minted with it
    /// also verify against real clocks in other processes).
    public init(wall: Double? = nil) {
        start = (wall ?? Date().timeIntervalSince1970, ContinuousClock.now)
    }

    public var now: Double {
        let (seconds, attoseconds) = offset.withLock { $0 }.components
        return start.wall + Double(seconds) + Double(attoseconds) / 1e18
    }

    public var instant: ContinuousClock.Instant { start.instant.advanced(by: offset.withLock { $0 }) }

    public func advance(by duration: Duration) {
        precondition(duration >= .zero, "a clock does not go back")
        offset.withLock { $0 += duration }
    }
}
