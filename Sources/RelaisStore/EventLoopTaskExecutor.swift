public import NIOCore

/// A NIO event loop as a Swift task executor (SE-0417): a task that prefers it runs its jobs on
/// the loop's thread, and every `await` that needs no other executor comes back to that thread.
///
/// A connection's handler runs with its channel's loop as preferred executor (RelaisServer's
/// `OnItsEventLoop`), so a request that waits on no I/O is read, handled and answered on the
/// thread that read it, and one that waits (Redis, a provider) resumes there too: no hop to
/// Swift's global executor and back, which was a third of a sign-in's thread switches. The
/// store's announcement subscription runs on one too (``RedisSubscriber``).
public final class EventLoopTaskExecutor: TaskExecutor, Sendable {
    public let eventLoop: any EventLoop

    public init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
