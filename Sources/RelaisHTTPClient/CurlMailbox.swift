import CCurl
import Logging
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How other threads talk to the reactor: calls it is to start, cancellations and the stop request
/// go into a locked queue, and an eventfd in the reactor's epoll set wakes it to read them.
///
/// An eventfd rather than `curl_multi_wakeup`: the wakeup only interrupts `curl_multi_poll`, and
/// the reactor waits in its own `epoll_wait` (libcurl's event-based API, whose cost per wakeup
/// follows the ready sockets, not the transfers in flight), so one more descriptor in that set is
/// the simplest correct wake.
final class CurlMailbox: Sendable {
    struct Mail {
        var submitted: [(job: CurlJob, continuation: CurlContinuation)] = []
        var cancelled: [CurlJob] = []
        /// Bridged sockets to act on, with their `CURL_CSELECT_*` flags.
        var ready: [(socket: Int32, flags: Int32)] = []
        var stopping = false
    }

    private struct State {
        var mail = Mail()
        var exited = false
        var onExit: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Mutex(State())
    let wakeDescriptor: Int32

    init() {
        wakeDescriptor = eventfd(0, Int32(EFD_CLOEXEC) | Int32(EFD_NONBLOCK))
        precondition(wakeDescriptor >= 0, "eventfd failed: \(errno)")
    }

    // Closed only here, once nothing can write to it: after the reactor's exit, writes are harmless.
    deinit { close(wakeDescriptor) }

    /// Hands a call to the reactor, or fails it with `.shutdown` once the client is stopping.
    func submit(_ job: CurlJob, _ continuation: CurlContinuation) {
        let accepted = state.withLock { state in
            guard !state.mail.stopping else { return false }
            state.mail.submitted.append((job, continuation))
            return true
        }
        guard accepted else { return continuation.resume(throwing: HTTPClientError.shutdown) }
        wake()
    }

    /// The flag first: a cancellation that overtakes its submission is seen when the job arrives.
    func cancel(_ job: CurlJob) {
        job.cancelled.store(true, ordering: .releasing)
        state.withLock { state in
            if !state.exited { state.mail.cancelled.append(job) }
        }
        wake()
    }

    /// A bridged socket for the reactor to act on (a loop found the lock taken).
    func ready(_ socket: Int32, flags: Int32) {
        let accepted = state.withLock { state in
            guard !state.exited else { return false }
            state.mail.ready.append((socket, flags))
            return true
        }
        if accepted { wake() }
    }

    /// Refuses new calls; the reactor runs those it has, frees libcurl's handles and exits.
    func stop() async {
        await withCheckedContinuation { continuation in
            let exited = state.withLock { state in
                state.mail.stopping = true
                if !state.exited { state.onExit.append(continuation) }
                return state.exited
            }
            if exited { continuation.resume() } else { wake() }
        }
    }

    var isStopping: Bool { state.withLock { $0.mail.stopping } }

    /// Like ``stop()`` without waiting, for a client released without a shutdown.
    func requestStop() {
        state.withLock { $0.mail.stopping = true }
        wake()
    }

    // MARK: - Reactor side

    func take() -> Mail {
        state.withLock { state in
            let mail = state.mail
            state.mail = Mail(stopping: state.mail.stopping)
            return mail
        }
    }

    func markExited() {
        let waiting = state.withLock { state in
            state.exited = true
            defer { state.onExit = [] }
            return state.onExit
        }
        for continuation in waiting { continuation.resume() }
    }

    func wake() {
        var one: UInt64 = 1
        _ = write(wakeDescriptor, &one, MemoryLayout<UInt64>.size)  // EAGAIN: already pending, as good
    }

    func drainWakeups() {
        var count: UInt64 = 0
        _ = read(wakeDescriptor, &count, MemoryLayout<UInt64>.size)
    }
}

/// libcurl handles are not thread-safe: every libcurl call of a client is made with its lock held
/// (``CurlEngine/locked(_:)``), by a caller starting a transfer or by the reactor. Code about to
/// call libcurl asks here first; a call without the lock is logged as an error and counted in
/// ``HTTPClient/blockingCallsOnEventLoop``, which tests check stays at zero.
struct CurlConfinement: Sendable {
    let holder: CurlLockHolder
    let logger: Logger

    func check(_ operation: StaticString) {
        guard !holder.isCurrentThread else { return }
        HTTPClient.unguardedCurlCalls.wrappingAdd(1, ordering: .relaxed)
        logger.error(
            "libcurl called without the HTTP client's lock",
            metadata: ["operation": "\(operation)", "on_event_loop": "\(MultiThreadedEventLoopGroup.currentEventLoop != nil)"]
        )
    }
}

/// The thread holding a client's lock, if any: set on entry, cleared on exit.
final class CurlLockHolder: Sendable {
    private let thread = Atomic<UInt>(0)

    func enter() { thread.store(UInt(pthread_self()), ordering: .relaxed) }
    func leave() { thread.store(0, ordering: .relaxed) }
    var isCurrentThread: Bool { thread.load(ordering: .relaxed) == UInt(pthread_self()) }
}
