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

/// Deadlines on a connection, so that a client that sends nothing, or sends slowly, cannot hold it:
/// - a request head must be complete within `server.header_timeout` of the connection opening
///   (a trickled head, slowloris, is cut at that deadline however steady the trickle);
/// - a body must be complete within `server.idle_timeout` of its head;
/// - between requests on a kept-alive connection, the next head must be complete within
///   `server.idle_timeout` of the previous response.
/// Whatever is over its deadline is closed.
///
/// A request moves the deadline three times (head, end, response): it only records the new
/// instant. The one timer fires at the earliest deadline it was set for; finding the deadline
/// moved later, it re-arms for it. A timer is scheduled (and cancelled) only when the deadline
/// comes sooner than the timer, so a busy kept-alive connection costs a clock read per request,
/// not a timer.
final class ConnectionDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headerTimeout: TimeAmount
    private let idleTimeout: TimeAmount
    /// When the connection is closed; nil while a whole request is being answered.
    private var deadline: NIODeadline?
    private var timer: (firesAt: NIODeadline, task: Scheduled<Void>)?
    private var requestsInProgress = 0

    init(headerTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { move(context, to: context.eventLoop.now + headerTimeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        move(context, to: context.eventLoop.now + headerTimeout)
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        timer?.task.cancel()
        timer = nil
        deadline = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            requestsInProgress += 1
            move(context, to: context.eventLoop.now + idleTimeout)
        case .body:
            break
        case .end:
            // The request is whole: the handler's own work is bounded elsewhere (store budget,
            // provider timeouts).
            deadline = nil
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            requestsInProgress -= 1
            if requestsInProgress <= 0 {
                requestsInProgress = 0
                move(context, to: context.eventLoop.now + idleTimeout)
            }
        }
        context.write(data, promise: promise)
    }

    private func move(_ context: ChannelHandlerContext, to instant: NIODeadline) {
        deadline = instant
        if let timer, timer.firesAt <= instant { return }
        arm(context, at: instant)
    }

    private func arm(_ context: ChannelHandlerContext, at instant: NIODeadline) {
        timer?.task.cancel()
        let task = context.eventLoop.assumeIsolated().scheduleTask(deadline: instant) { [self] in
            timer = nil
            // No deadline: a request is being answered; its response sets the next one.
            guard let deadline else { return }
            if deadline <= context.eventLoop.now {
                context.close(promise: nil)
            } else {
                arm(context, at: deadline)
            }
        }
        timer = (instant, task)
    }
}
