import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// One caller's commands for one connection: sent in order (`ASKING` before its command), their
/// replies returned together. Redis answers in order, so the promise is the one at the head of
/// the handler's queue when the replies come.
struct RedisRequest: Sendable {
    var commands: [[[UInt8]]]
    /// The command timeout: a request still unanswered then fails, and closes its connection.
    var deadline: ContinuousClock.Instant
    /// When its caller stops waiting, if sooner (its request's store budget nearly spent): the
    /// request alone fails then (see ``RedisProtocolHandler``).
    var givesUpAt: ContinuousClock.Instant?
    var promise: EventLoopPromise<[RedisReply]>
}

/// Switches a connection to subscriber mode (after its handshake): every reply from then on
/// (subscription confirmations, messages, PING answers) goes to `deliver`, and requests are
/// written without waiting for replies. `deliver` runs on the channel's event loop.
struct RedisPushMode: Sendable {
    var deliver: @Sendable (RedisReply) -> Void
}

/// Speaks RESP on a NIO channel with hiredis as the codec: each request is formatted and written
/// as it comes (pipelining: no waiting for earlier replies), and replies complete the waiting
/// requests first in, first out.
///
/// A request with no reply by its deadline (the command timeout) closes the connection: Redis is
/// stuck or gone, and a reply arriving later would be taken for the next request's. Every
/// request still waiting then fails, as on any close. A request whose caller gives up sooner
/// (its store budget nearly spent) fails alone and keeps its place in the queue, so that its late
/// reply is read and dropped: one caller's short wait must not fail the callers pipelined with it.
///
/// Not `Sendable`: it lives in its channel's pipeline, used on that channel's event loop only.
final class RedisProtocolHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = RedisRequest
    typealias OutboundOut = ByteBuffer

    private struct Waiting {
        var id: UInt64
        var expected: Int
        var replies: [RedisReply] = []
        var promise: EventLoopPromise<[RedisReply]>
        /// For a caller's deadline sooner than the command timeout: the rest of that timeout.
        var untilStuck: Duration
        var timeout: NIOScheduledCallback?
        /// Its caller was failed at its own deadline: its replies are read and dropped.
        var abandoned = false
    }

    private var waiting = CircularBuffer<Waiting>()
    private var nextID: UInt64 = 0
    private let reader = RedisReplyReader()
    /// For `rediss://`: how the TLS tunnel ended, which the channel alone sees as a closed socket.
    private let tunnel: RedisTLSTunnel.Outcome?
    /// Set once the connection is unusable: later requests fail at once with it.
    private var closedBecause: RedisConnectionFailure?
    /// Subscriber mode: replies are pushed here, none is matched to a request.
    private var pushes: (@Sendable (RedisReply) -> Void)?

    init(tunnel: RedisTLSTunnel.Outcome? = nil) {
        self.tunnel = tunnel
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        let request = unwrapOutboundIn(data)
        if closedBecause != nil || !context.channel.isActive {
            // Never sent, so safe to retry on a fresh connection: the caller may have picked this
            // one just before it closed.
            let reason = closedBecause?.message ?? "connection closed" + tlsFailure
            request.promise.fail(RedisConnectionFailure(message: reason, isStaleConnection: true, neverSent: true))
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        let now = ContinuousClock.now
        let delay = request.deadline - now
        let callersDelay = request.givesUpAt.map { $0 - now }
        guard delay > .zero, callersDelay.map({ $0 > .zero }) ?? true else {
            // Its time ran out before it could be sent (a busy machine): fail it alone, unsent,
            // rather than close the connection under the other callers' requests.
            request.promise.fail(RedisConnectionFailure(message: "no reply within the command timeout (not sent)", isStaleConnection: false))
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        guard !request.commands.isEmpty else {
            request.promise.succeed([])
            promise?.succeed()
            return
        }
        var buffer = context.channel.allocator.buffer(capacity: 64 * request.commands.count)
        for command in request.commands where !RedisCommandEncoding.append(command, to: &buffer) {
            request.promise.fail(RedisConnectionFailure(message: "cannot format the command (out of memory)", isStaleConnection: false))
            promise?.fail(ChannelError.ioOnClosedChannel)
            return
        }
        if pushes != nil {
            // Subscriber mode: what comes back is pushed, so the request is done once written.
            request.promise.succeed([])
            context.write(wrapOutboundOut(buffer), promise: promise)
            return
        }
        nextID &+= 1
        var entry = Waiting(id: nextID, expected: request.commands.count, promise: request.promise, untilStuck: .zero)
        if let callersDelay, callersDelay < delay {
            entry.untilStuck = delay - callersDelay
            entry.timeout = schedule(entry.id, stuck: false, in: callersDelay, context)
        } else {
            entry.timeout = schedule(entry.id, stuck: true, in: delay, context)
        }
        waiting.append(entry)
        context.write(wrapOutboundOut(buffer), promise: promise)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let buffer = unwrapInboundIn(data)
        do throws(RedisReplyReader.ProtocolError) {
            let unread = buffer.withUnsafeReadableBytes { bytes -> RedisReplyReader.ProtocolError? in
                do throws(RedisReplyReader.ProtocolError) {
                    try reader.feed(bytes)
                    return nil
                } catch {
                    return error
                }
            }
            if let unread { throw unread }
            while let reply = try reader.next() {
                if let pushes {
                    pushes(reply)
                    continue
                }
                guard !waiting.isEmpty else {
                    return fail(context, RedisConnectionFailure(message: "Redis sent a reply no command asked for", isStaleConnection: false))
                }
                waiting[waiting.startIndex].replies.append(reply)
                if waiting[waiting.startIndex].replies.count == waiting[waiting.startIndex].expected {
                    let done = waiting.removeFirst()
                    done.timeout?.cancel()
                    if !done.abandoned { done.promise.succeed(done.replies) }
                }
            }
        } catch {
            fail(context, RedisConnectionFailure(message: error.message, isStaleConnection: false))
        }
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let mode = event as? RedisPushMode else { return context.triggerUserOutboundEvent(event, promise: promise) }
        pushes = mode.deliver
        promise?.succeed()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset or a broken pipe is how a restarted Redis shows on a connection opened before.
        let reset = (error as? IOError).map { [ECONNRESET, EPIPE].contains($0.errnoCode) } ?? false
        fail(context, RedisConnectionFailure(message: "connection lost: \(error)" + tlsFailure, isStaleConnection: reset))
    }

    func channelInactive(context: ChannelHandlerContext) {
        failWaiting(closedBecause ?? RedisConnectionFailure(message: "connection closed by Redis" + tlsFailure, isStaleConnection: true))
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        failWaiting(closedBecause ?? RedisConnectionFailure(message: "connection closed" + tlsFailure, isStaleConnection: true))
    }

    /// How the TLS tunnel ended, for messages, since the channel only sees its socket close.
    private var tlsFailure: String { tunnel?.failure.map { " (\($0))" } ?? "" }

    private func schedule(_ id: UInt64, stuck: Bool, in delay: Duration, _ context: ChannelHandlerContext) -> NIOScheduledCallback? {
        try? context.eventLoop.assumeIsolated().scheduleCallback(
            in: .nanoseconds(delay.nanoseconds),
            handler: DeadlineHandler(handler: self, context: context, id: id, stuck: stuck)
        )
    }

    /// Request `id` is still unanswered at its caller's deadline, or after the command timeout
    /// (`stuck`): replies come in order, so Redis is then stuck or gone.
    fileprivate func deadlinePassed(_ context: ChannelHandlerContext, id: UInt64, stuck: Bool) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        guard !stuck else {
            return fail(context, RedisConnectionFailure(message: "no reply within the command timeout (connection closed)", isStaleConnection: false))
        }
        // Its caller gave up first: it alone fails, and the connection is watched on.
        waiting[index].abandoned = true
        waiting[index].promise.fail(RedisConnectionFailure(message: "no reply within the request's store budget", isStaleConnection: false))
        waiting[index].timeout = schedule(id, stuck: true, in: waiting[index].untilStuck, context)
    }

    /// Closes first, then fails the waiting requests: a caller that resumes at once must find the
    /// connection closed, not pick it again.
    private func fail(_ context: ChannelHandlerContext, _ failure: RedisConnectionFailure) {
        if closedBecause == nil { closedBecause = failure }
        context.close(promise: nil)
        failWaiting(failure)
    }

    /// A request that got some of its replies is not stale: part of it ran.
    private func failWaiting(_ failure: RedisConnectionFailure) {
        while let entry = waiting.popFirst() {
            entry.timeout?.cancel()
            guard !entry.abandoned else { continue }
            var own = failure
            own.isStaleConnection = failure.isStaleConnection && entry.replies.isEmpty
            entry.promise.fail(own)
        }
    }
}

/// Fires at a request's deadline, on the channel's event loop (scheduled through
/// `assumeIsolated()`, so it may hold the handler and its context).
private struct DeadlineHandler: NIOScheduledCallbackHandler {
    let handler: RedisProtocolHandler
    let context: ChannelHandlerContext
    let id: UInt64
    let stuck: Bool

    func handleScheduledCallback(eventLoop: some EventLoop) {
        handler.deadlinePassed(context, id: id, stuck: stuck)
    }
}
