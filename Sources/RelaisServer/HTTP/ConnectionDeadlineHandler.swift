import NIOCore
import NIOHTTPTypes

/// Deadlines on a connection, so that a client that sends nothing, or sends slowly, cannot hold it:
/// - every request head must be complete within `server.header_timeout` of its first byte (a
///   trickled head, slowloris, is cut at that deadline however steady the trickle), on the first
///   request and on every later request of a kept-alive connection; the first head also within
///   `server.header_timeout` of the connection opening;
/// - a body must be complete within `server.idle_timeout` of its head;
/// - between requests on a kept-alive connection, the next head must start within
///   `server.idle_timeout` of the previous response.
/// Whatever is over its deadline is closed: whichever deadline comes first.
///
/// The handler sits after the HTTP decoder, which hands it whole heads only; the first byte of a
/// head is seen by its ``HeadStartObserver``, which it places at the front of the pipeline.
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
    /// Where the next bytes stand: between a request's end and the next head (`awaitingHead`),
    /// and whether the first byte of that head has arrived (`headStarted`).
    private var awaitingHead = true
    private var headStarted = false
    private var observer: (handler: HeadStartObserver, context: ChannelHandlerContext)?

    init(headerTimeout: TimeAmount, idleTimeout: TimeAmount) {
        self.headerTimeout = headerTimeout
        self.idleTimeout = idleTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let handler = HeadStartObserver { [weak self] in self?.headBytesArrived(context) }
        do {
            try context.pipeline.syncOperations.addHandler(handler, position: .first)
            observer = (handler, try context.pipeline.syncOperations.context(handler: handler))
        } catch {
            // A pipeline that refuses a handler is closing: nothing to time.
            context.close(promise: nil)
        }
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
        // Removed alone (the channel still open): its observer goes too. A closing channel removes both.
        if let observer, context.channel.isActive {
            context.pipeline.syncOperations.removeHandler(context: observer.context, promise: nil)
        }
        observer = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            requestsInProgress += 1
            (awaitingHead, headStarted) = (false, false)
            move(context, to: context.eventLoop.now + idleTimeout)
        case .body:
            break
        case .end:
            // The request is whole: the handler's own work is bounded elsewhere (store budget,
            // provider timeouts). Bytes from now on belong to the next head. A request answered
            // before its body ended (413 from the declared length) keeps the idle deadline its
            // response set: clearing it would leave the connection with none at all.
            awaitingHead = true
            if requestsInProgress > 0 { deadline = nil }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            requestsInProgress -= 1
            if requestsInProgress <= 0 {
                requestsInProgress = 0
                // A next head already begun while this one was answered has its header timeout
                // from now on: its client could not be answered sooner.
                move(context, to: context.eventLoop.now + (headStarted ? min(headerTimeout, idleTimeout) : idleTimeout))
            }
        }
        context.write(data, promise: promise)
    }

    /// Bytes arrived before the decoder: the first ones after a request's end start the next head,
    /// which must then be complete within the header timeout (or sooner, when the idle deadline
    /// comes first). While a request is being answered, its response starts that timeout.
    private func headBytesArrived(_ context: ChannelHandlerContext) {
        guard awaitingHead, !headStarted else { return }
        headStarted = true
        guard requestsInProgress == 0 else { return }
        let headDeadline = context.eventLoop.now + headerTimeout
        move(context, to: deadline.map { min($0, headDeadline) } ?? headDeadline)
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

/// Sees the connection's bytes before the HTTP decoder does and tells the
/// ``ConnectionDeadlineHandler`` that some arrived: the first byte of a head starts its header
/// timeout. Passes every byte on unchanged.
final class HeadStartObserver: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let bytesArrived: () -> Void

    init(bytesArrived: @escaping () -> Void) {
        self.bytesArrived = bytesArrived
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if unwrapInboundIn(data).readableBytes > 0 { bytesArrived() }
        context.fireChannelRead(data)
    }
}
