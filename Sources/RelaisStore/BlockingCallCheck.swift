import Logging
import NIOPosix
import Synchronization

/// Reports a blocking Redis call made on an event loop, where it would stall every connection
/// and request of that loop. The TLS tunnel's connect and handshake are the one blocking step
/// left (hiredis only formats and parses); they belong on a thread of their own, and this makes
/// a mistake visible (an error log and ``RedisStore/blockingCallsOnEventLoop``) instead of a
/// silent slowdown.
enum BlockingCallCheck {
    static let count = Atomic<Int>(0)
    private static let logger = Logger(label: "relais.store.redis")

    /// Call first thing in every blocking function.
    static func check(_ what: StaticString) {
        guard MultiThreadedEventLoopGroup.currentEventLoop != nil else { return }
        count.add(1, ordering: .relaxed)
        logger.error("blocking Redis call on an event loop: it stalls every connection of that loop", metadata: ["call": "\(what)"])
    }
}

extension RedisStore {
    /// Blocking Redis calls made on an event loop since the process started: zero unless a
    /// blocking path is reached from a loop by mistake (tests check it stays so).
    public static var blockingCallsOnEventLoop: Int { BlockingCallCheck.count.load(ordering: .relaxed) }
}
