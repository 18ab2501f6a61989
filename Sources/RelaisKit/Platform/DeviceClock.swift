public import Foundation

/// Where the library reads the time. Tests move a clock instead of sleeping.
public protocol RelaisKitClock: Sendable {
    var now: Date { get }
}

/// The device's clock: the one place RelaisKit reads it (it builds on iOS with Foundation only,
/// so it has no RelaisClock).
public struct SystemClock: RelaisKitClock {
    public init() {}
    public var now: Date { Date() }
}
