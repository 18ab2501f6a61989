import CCurl
import Logging
import NIOCore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What an HTTP client's callers and its reactor thread share: libcurl's multi handle behind one
/// lock, the mailbox for what is handed to the reactor, and the descriptors the reactor waits on.
///
/// A call starts on the calling thread (the event loop that runs the request handler): it takes
/// the lock if it is free, adds its transfer and lets libcurl send the request there and then.
/// The reactor thread waits for libcurl's sockets and timer, reads the answers and completes the
/// calls, which resume on their callers' executors. NIO cannot watch a descriptor it does not own,
/// so the waiting cannot move onto the loops; starting there saves the reactor a wake-up per call.
/// A call goes through the mailbox instead when the lock is taken (an event loop never waits for
/// it), or when libcurl could read a file for it or for a transfer in flight
/// (``CurlMulti/mayStartOnCaller(_:)``).
final class CurlEngine: Sendable {
    let mailbox = CurlMailbox()
    let epoll: Int32
    let timer: Int32
    let holder = CurlLockHolder()
    private let multi: Mutex<CurlMulti>
    /// Calls waiting for a slot, and transfers only the reactor may drive, as last seen (for tests).
    let waitingForSlot = Atomic<Int>(0)
    let reactorOnlyInFlight = Atomic<Int>(0)
    /// Calls whose transfer their caller started, calls handed to the reactor, and of those the
    /// ones that found the lock taken (for tests).
    let startedByCallers = Atomic<Int>(0)
    let handedToReactor = Atomic<Int>(0)
    let foundTheLockTaken = Atomic<Int>(0)
    /// Connections a caller found made and sent its request on (for tests).
    let connectionsMadeByCallers = Atomic<Int>(0)
    /// Bridged sockets libcurl was told of on the loop that copied their bytes, and those the
    /// reactor was asked to act on instead (for tests).
    let actionsOnLoops = Atomic<Int>(0)
    let actionsHandedToReactor = Atomic<Int>(0)
    /// The loop that makes and reads this engine's connections, if any.
    let bridgesLoop: (any EventLoop)?

    /// - Parameter loop: the event loop whose calls this engine serves, and which makes and reads
    ///   its connections (``CurlBridges``); nil for an engine whose reactor waits on libcurl's own sockets.
    init(configuration: HTTPClientConfiguration, logger: Logger, loop: (any EventLoop)?) {
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: \(errno)")
        timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC) | Int32(TFD_NONBLOCK))
        precondition(timer >= 0, "timerfd_create failed: \(errno)")
        let confinement = CurlConfinement(holder: holder, logger: logger)
        if loop != nil && CurlBridges.directory == nil {
            logger.warning("no writable /dev/shm or temporary directory: the HTTP client's reactor threads wait for the providers' answers")
        }
        let bridges = CurlBridges.directory == nil ? nil : loop.map { CurlBridges(loop: $0, connectTimeout: configuration.connectTimeout, logger: logger) }
        bridgesLoop = bridges?.loop
        multi = Mutex(CurlMulti(configuration: configuration, logger: logger, confinement: confinement, epoll: epoll, timer: timer, bridges: bridges))
        locked { $0.setUp() }
        locked { $0.sockets.bridges?.notify = { [weak self] socket, flags in self?.bridgeReady(socket, flags: flags) } }
        for descriptor in [mailbox.wakeDescriptor, timer] {
            var event = epoll_event()
            event.events = EPOLLIN.rawValue
            event.data.fd = descriptor
            precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, descriptor, &event) == 0, "epoll_ctl failed: \(errno)")
        }
    }

    // Closed only here, once the reactor has exited and no caller is left.
    deinit {
        close(epoll)
        close(timer)
    }

    /// Runs `body` with the lock, recording the holder for ``CurlConfinement`` and, as it ends,
    /// the figures tests read.
    func locked<Result: Sendable>(_ body: (CurlMulti) -> Result) -> Result {
        multi.withLock { multi in
            holder.enter()
            defer { leave(multi) }
            return body(multi)
        }
    }

    /// As ``locked(_:)``, or nil at once when another thread holds the lock.
    func lockedIfAvailable<Result: Sendable>(_ body: (CurlMulti) -> Result) -> Result? {
        multi.withLockIfAvailable { multi in
            holder.enter()
            defer { leave(multi) }
            return body(multi)
        }
    }

    private func leave(_ multi: CurlMulti) {
        waitingForSlot.store(multi.waitingCount, ordering: .relaxed)
        reactorOnlyInFlight.store(multi.reactorOnlyCount, ordering: .relaxed)
        connectionsMadeByCallers.store(multi.connectionsMadeOnCaller, ordering: .relaxed)
        holder.leave()
    }

    /// Starts the call here when the lock is free and no file may be read for it; otherwise hands
    /// it to the reactor.
    func submit(_ job: CurlJob, _ continuation: CurlContinuation) {
        let here: (completions: [CurlCompletion], wakeReactor: Bool)?? = lockedIfAvailable { multi in
            guard multi.mayStartOnCaller(job) else { return nil }
            multi.submit(job, continuation)
            let wakeReactor = multi.advance(onCaller: true)
            return (multi.takeCompleted(), wakeReactor)
        }
        guard let startedHere = here ?? nil else {
            handedToReactor.add(1, ordering: .relaxed)
            if here == nil { foundTheLockTaken.add(1, ordering: .relaxed) }
            return mailbox.submit(job, continuation)
        }
        startedByCallers.add(1, ordering: .relaxed)
        if startedHere.wakeReactor { mailbox.wake() }
        for completion in startedHere.completions { completion.continuation.resume(with: completion.result) }
    }

    /// A loop copied bytes to or from libcurl's end of a bridged connection (``CurlBridge``): libcurl
    /// acts on it here when the lock is free and a loop may drive libcurl, else the reactor does.
    func bridgeReady(_ socket: curl_socket_t, flags: Int32) {
        let here: (completions: [CurlCompletion], wakeReactor: Bool)?? = lockedIfAvailable { multi in
            guard multi.mayDriveOnCaller else { return nil }
            multi.act(on: socket, flags: flags)
            let wakeReactor = multi.advance(onCaller: true)
            return (multi.takeCompleted(), wakeReactor)
        }
        guard let actedHere = here ?? nil else {
            actionsHandedToReactor.add(1, ordering: .relaxed)
            return mailbox.ready(socket, flags: flags)
        }
        actionsOnLoops.add(1, ordering: .relaxed)
        if actedHere.wakeReactor { mailbox.wake() }
        for completion in actedHere.completions { completion.continuation.resume(with: completion.result) }
    }
}

extension CurlEngine {
    /// The engine's state in a few lines, for a test whose call stalled. Never waits for the lock
    /// (a stall could be a holder that never lets go): tries for about a second, then says so.
    var diagnosis: String {
        for _ in 0..<1000 {
            if let text = lockedIfAvailable(describe) { return text }
            usleep(1000)
        }
        return "the client's lock stayed held for a second"
    }

    private func describe(_ multi: CurlMulti) -> String {
        let timer = multi.timerDeadline.map { "due in \($0 - .now)" } ?? "not set"
        let head =
            "\(multi.inFlightCount) in flight, \(multi.waitingCount) waiting, \(multi.reactorOnlyCount) for the reactor only, "
            + "libcurl's timer \(timer), CA store loaded \(multi.caStoreLoaded)"
        return ([head] + (multi.sockets.bridges?.open.values.map(\.diagnosis) ?? [])).joined(separator: "\n")
    }
}

/// The reactor: the HTTP client's one thread, waiting in `epoll_wait` for libcurl's sockets, its
/// timer and the mailbox, and handing what is ready to the multi handle under the lock.
final class CurlReactor {
    private let engine: CurlEngine
    private let events: UnsafeMutablePointer<epoll_event>
    private static let eventCapacity: Int32 = 64

    init(engine: CurlEngine) {
        self.engine = engine
        events = .allocate(capacity: Int(Self.eventCapacity))
    }

    deinit { events.deallocate() }

    /// Until the mailbox is stopped and every call made has completed; then frees libcurl's handles.
    func run() {
        while true {
            let count = Int(max(0, epoll_wait(engine.epoll, events, Self.eventCapacity, -1)))
            var mail: CurlMailbox.Mail?
            for index in 0..<count where events[index].data.fd == engine.mailbox.wakeDescriptor {
                // Drained before the mail is read: a submission after this read wakes the next wait.
                engine.mailbox.drainWakeups()
                mail = engine.mailbox.take()
            }
            let (completions, exiting) = engine.locked { multi in
                if let mail {
                    for (job, continuation) in mail.submitted { multi.submit(job, continuation) }
                    for job in mail.cancelled { multi.cancel(job) }
                    for (socket, flags) in mail.ready { multi.act(on: socket, flags: flags) }
                    if mail.stopping { multi.stopping = true }
                }
                for index in 0..<count {
                    let event = events[index]
                    if event.data.fd == engine.timer {
                        multi.timerFired()
                    } else if event.data.fd != engine.mailbox.wakeDescriptor {
                        multi.act(on: event.data.fd, events: event.events)
                    }
                }
                // More to do (a large answer carried for 64 rounds, each giving libcurl something
                // to read): the next wait returns at once.
                if multi.advance(onCaller: false) { engine.mailbox.wake() }
                let exiting = multi.stopping && multi.isIdle
                if exiting { multi.tearDown() }
                return (multi.takeCompleted(), exiting)
            }
            for completion in completions { completion.continuation.resume(with: completion.result) }
            if exiting { return }
        }
    }
}

extension CurlReactor {
    private final class Start: Sendable {
        let engine: CurlEngine

        init(engine: CurlEngine) { self.engine = engine }
    }

    /// Starts the reactor thread; it runs until the mailbox is stopped and its calls are done.
    static func spawn(engine: CurlEngine) -> pthread_t {
        let start = Unmanaged.passRetained(Start(engine: engine)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                CurlReactor(engine: start.engine).run()
                start.engine.mailbox.markExited()
                return nil
            }, start)
        precondition(result == 0, "cannot start the HTTP client's reactor thread: \(result)")
        return thread
    }
}
