import NIOCore
import NIOHTTPTypes
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How many connections are open, against `server.max_connections`: one over the limit is closed
/// as soon as it is accepted, never queued, so idle or slow clients cannot take every descriptor.
public final class ConnectionLimit: Sendable {
    public let maximum: Int
    private let open = Atomic<Int>(0)

    public init(maximum: Int) {
        self.maximum = maximum
    }

    public var openConnections: Int { open.load(ordering: .relaxed) }

    /// Counts a new connection; false when it is over the limit (it is counted all the same, and
    /// ``leave()`` is called when it closes).
    func enter() -> Bool { open.wrappingAdd(1, ordering: .relaxed).newValue <= maximum }
    func leave() { open.wrappingSubtract(1, ordering: .relaxed) }

    /// The default: what the process may open (RLIMIT_NOFILE, raised to its hard limit first)
    /// minus room for Redis, provider connections and files; at least 64.
    public static func defaultMaximum() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { limit = raised }
        }
        let descriptors = Int(min(limit.rlim_cur, 1 << 20))  // RLIM_INFINITY is the largest value: capped too
        return max(64, descriptors - 256)
    }
}

/// Counts the connection it sits on against the ``ConnectionLimit``; closes it when over.
final class ConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let limit: ConnectionLimit
    private var counted = false

    init(limit: ConnectionLimit) {
        self.limit = limit
    }

    func handlerAdded(context: ChannelHandlerContext) {
        counted = true
        if !limit.enter() { context.close(promise: nil) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if counted { limit.leave() }
        counted = false
    }
}
