public import HummingbirdCore
public import Logging
public import NIOCore
import NIOPosix
public import RelaisStore

/// One ``EventLoopTaskExecutor`` per loop of a group, made once: a connection finds its loop's in
/// a dictionary instead of allocating an executor per connection.
public struct EventLoopExecutors: Sendable {
    private let byLoop: [ObjectIdentifier: EventLoopTaskExecutor]

    public init(_ group: any EventLoopGroup) {
        var byLoop: [ObjectIdentifier: EventLoopTaskExecutor] = [:]
        for loop in group.makeIterator() { byLoop[ObjectIdentifier(loop)] = EventLoopTaskExecutor(loop) }
        self.byLoop = byLoop
    }

    /// The executor of `loop`; a loop of another group (none in the server) gets one of its own.
    public func executor(for loop: any EventLoop) -> EventLoopTaskExecutor {
        byLoop[ObjectIdentifier(loop)] ?? EventLoopTaskExecutor(loop)
    }

    /// The executors of the group Hummingbird's application runs on by default.
    public static let singleton = EventLoopExecutors(MultiThreadedEventLoopGroup.singleton)
}

/// A server child channel whose connection handler runs on the channel's own event loop: the
/// task Hummingbird starts per connection takes the loop as its preferred executor before it reads
/// the first request.
public struct OnItsEventLoop<Inner: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Inner.Value
    let inner: Inner
    let executors: EventLoopExecutors

    public init(_ inner: Inner, executors: EventLoopExecutors = .singleton) {
        self.inner = inner
        self.executors = executors
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        inner.setup(channel: channel, logger: logger)
    }

    public func handle(value: Value, logger: Logger) async {
        await withTaskExecutorPreference(executors.executor(for: value.channel.eventLoop)) {
            await inner.handle(value: value, logger: logger)
        }
    }
}

extension HTTPServerBuilder {
    /// HTTP/1.1 as Hummingbird's `.http1(configuration:)`, each connection handled on its event loop.
    public static func http1OnEventLoops(configuration: HTTP1Channel.Configuration, executors: EventLoopExecutors = .singleton) -> HTTPServerBuilder {
        .init { responder in OnItsEventLoop(HTTP1Channel(responder: responder, configuration: configuration), executors: executors) }
    }
}
