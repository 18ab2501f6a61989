import Foundation
public import Testing

extension Tag {
    /// Tests that need no process, no Redis and no socket: pure code, and routes driven through
    /// Hummingbird's router test framework (`.router`). `make test-fast` runs only these.
    @Tag public static var fast: Self
}

/// `make test-fast` runs the tests tagged ``Testing/Tag/fast`` (scripts/fast-tests.py finds them,
/// as SwiftPM cannot filter by tag) with `RELAIS_TEST_FAST=1`; every
/// helper that starts a process, a server or a listener (`ChildProcess`, `FreePort`,
/// `InProcessServer`, `LoopbackHTTPServer`, the `.live` router setup) calls ``refuse(_:)`` first,
/// so that a test tagged fast by mistake fails loudly there instead of making the fast run slow
/// or flaky.
public enum FastTests {
    /// Whether this run is `make test-fast`.
    public static let isFastRun = ProcessInfo.processInfo.environment["RELAIS_TEST_FAST"] == "1"

    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    /// Throws in a fast run: `what` (a redis-server, a loopback server...) is not for fast tests.
    public static func refuse(_ what: String) throws {
        guard isFastRun else { return }
        throw Refusal(description: "RELAIS_TEST_FAST=1 and this test \(what): remove its .fast tag")
    }
}
