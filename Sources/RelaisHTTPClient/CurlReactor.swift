import CCurl
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP client's one thread: owns a libcurl multi handle and drives it the way libcurl
/// documents for event-based applications. libcurl tells it which sockets to watch and when to
/// call back (``curlSocketCallback``, ``curlTimerCallback``); it waits for both in `epoll_wait`,
/// hands readiness and timeouts to `curl_multi_socket_action`, and completes calls from
/// `curl_multi_info_read`. Created, used and torn down on that thread only; not Sendable.
final class CurlReactor {
    private let mailbox: CurlMailbox
    private let configuration: HTTPClientConfiguration
    private let logger: Logger
    private let confinement: CurlConfinement
    private let limit: Int
    private let multi: UnsafeMutableRawPointer
    private let share: UnsafeMutableRawPointer
    private let epoll: Int32
    private let handles: CurlEasyHandles
    private let events: UnsafeMutablePointer<epoll_event>
    private static let eventCapacity: Int32 = 64

    /// When libcurl wants `curl_multi_socket_action(CURL_SOCKET_TIMEOUT)`; nil when it does not.
    private var timerDeadline: ContinuousClock.Instant?
    /// Calls beyond the bound on transfers in flight, in arrival order.
    private var waiting: [(job: CurlJob, continuation: CurlContinuation)] = []
    private var inFlight: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    init(mailbox: CurlMailbox, configuration: HTTPClientConfiguration, logger: Logger) {
        self.mailbox = mailbox
        self.configuration = configuration
        self.logger = logger
        confinement = CurlConfinement(owner: pthread_self(), logger: logger)
        limit = max(1, configuration.maxConcurrentRequests)
        handles = CurlEasyHandles(capacity: limit, confinement: confinement)
        guard let multi = curl_multi_init(), let share = curl_share_init() else {
            preconditionFailure("curl_multi_init or curl_share_init failed: out of memory")
        }
        self.multi = multi
        self.share = share
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        precondition(epoll >= 0, "epoll_create1 failed: \(errno)")
        events = .allocate(capacity: Int(Self.eventCapacity))
        setUp()
    }

    private func setUp() {
        confinement.check("curl_multi_setopt")
        // DNS answers and TLS sessions are kept across easy handles, and so are connections, which
        // the multi handle's own cache would keep too: one cache either way, for every provider.
        // All users are on this thread, so the share handle needs no lock callbacks.
        for data in [CURL_LOCK_DATA_DNS, CURL_LOCK_DATA_SSL_SESSION, CURL_LOCK_DATA_CONNECT] {
            let code = relais_curl_share_setopt_lock_data(share, CURLSHOPT_SHARE, data)
            precondition(code == CURLSHE_OK, "curl_share_setopt failed: \(code)")
        }
        let this = Unmanaged.passUnretained(self).toOpaque()
        let codes = [
            relais_curl_multi_setopt_socket_callback(multi, CURLMOPT_SOCKETFUNCTION, curlSocketCallback),
            relais_curl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, this),
            relais_curl_multi_setopt_timer_callback(multi, CURLMOPT_TIMERFUNCTION, curlTimerCallback),
            relais_curl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, this),
            // The bound on transfers in flight bounds connections too: idle ones are closed, oldest
            // first, to make room, and as many stay open for reuse.
            relais_curl_multi_setopt_long(multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, limit),
            relais_curl_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, limit),
        ]
        precondition(codes.allSatisfy { $0 == CURLM_OK }, "curl_multi_setopt failed: \(codes)")
        var wake = epoll_event()
        wake.events = EPOLLIN.rawValue
        wake.data.fd = mailbox.wakeDescriptor
        precondition(epoll_ctl(epoll, EPOLL_CTL_ADD, mailbox.wakeDescriptor, &wake) == 0, "epoll_ctl failed: \(errno)")
    }

    /// Until the mailbox is stopped and every call it accepted has completed; then frees it all.
    func run() {
        while true {
            let stopping = readMail()
            startWaiting()
            expireWaiting()
            if stopping && inFlight.isEmpty && waiting.isEmpty { break }
            mailbox.waitingForSlot.store(waiting.count, ordering: .relaxed)
            let count = epoll_wait(epoll, events, Self.eventCapacity, waitMilliseconds())
            for index in 0..<Int(max(0, count)) {
                let event = events[index]
                if event.data.fd == mailbox.wakeDescriptor {
                    mailbox.drainWakeups()
                } else {
                    act(on: event.data.fd, flags: Self.curlFlags(event.events))
                }
            }
            if let deadline = timerDeadline, deadline <= .now {
                act(on: CURL_SOCKET_TIMEOUT, flags: 0)
                // libcurl calls the timer function only when its earliest expiry changes, and the
                // milliseconds it gives are rounded down: woken a little early, it finds nothing due
                // and says nothing. Not cleared then, the timer would never fire again (a connect
                // timeout missed for good); so it is tried again shortly.
                if timerDeadline == deadline { timerDeadline = .now + .milliseconds(1) }
            }
            completeFinished()
        }
        tearDown()
    }

    // MARK: - Calls in and out

    /// New calls join the queue (or fail at once if already cancelled); cancellations take effect.
    private func readMail() -> Bool {
        let mail = mailbox.take()
        for (job, continuation) in mail.submitted {
            if job.cancelled.load(ordering: .acquiring) {
                continuation.resume(throwing: CancellationError())
            } else {
                waiting.append((job, continuation))
            }
        }
        for job in mail.cancelled { cancel(job) }
        return mail.stopping
    }

    private func startWaiting() {
        while inFlight.count < limit, !waiting.isEmpty {
            let (job, continuation) = waiting.removeFirst()
            start(job, continuation)
        }
    }

    /// Queued calls past their deadline fail as a transfer would: the total timeout counts from the call.
    private func expireWaiting() {
        guard !waiting.isEmpty else { return }
        let now = ContinuousClock.now
        waiting.removeAll { job, continuation in
            guard job.deadline <= now else { return false }
            continuation.resume(throwing: HTTPClientError.timeout)
            return true
        }
    }

    private func start(_ job: CurlJob, _ continuation: CurlContinuation, isRetry: Bool = false) {
        let remaining = job.deadline - .now
        guard remaining > .zero else { return continuation.resume(throwing: HTTPClientError.timeout) }
        let transfer = CurlTransfer(
            job: job, continuation: continuation, easy: handles.checkOut(), maxBytes: configuration.maxResponseBytes, isRetry: isRetry)
        do {
            try transfer.configure(configuration, timeout: remaining, share: share)
        } catch {
            handles.checkIn(transfer.easy)
            return continuation.resume(throwing: error)
        }
        confinement.check("curl_multi_add_handle")
        let code = curl_multi_add_handle(multi, transfer.easy.raw)
        guard code == CURLM_OK else {
            handles.checkIn(transfer.easy)
            let reason = String(cString: curl_multi_strerror(code))
            return continuation.resume(throwing: HTTPClientError.transport(curlCode: Int(code.rawValue), reason: reason))
        }
        inFlight[transfer.easy.raw] = transfer
    }

    /// Takes the transfer out of libcurl at once: its connection is closed, the handle reused.
    private func cancel(_ job: CurlJob) {
        if let index = waiting.firstIndex(where: { $0.job === job }) {
            waiting.remove(at: index).continuation.resume(throwing: CancellationError())
        } else if let transfer = inFlight.values.first(where: { $0.job === job }) {
            finish(transfer, with: .failure(CancellationError()))
        }
    }

    private func completeFinished() {
        confinement.check("curl_multi_info_read")
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            // The message is libcurl's until the handle is removed: read it first.
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle, let transfer = inFlight[easy] else { continue }
            let code = message.pointee.data.result
            if transfer.deservesAFreshConnection(code) {
                // Its slot passes to the second attempt: the bound on transfers holds.
                release(transfer)
                start(transfer.job, transfer.continuation, isRetry: true)
                continue
            }
            finish(transfer, with: transfer.outcome(code, limit: configuration.maxResponseBytes).mapError { $0 as any Error })
        }
    }

    private func finish(_ transfer: CurlTransfer, with result: Result<HTTPClientResponse, any Error>) {
        release(transfer)
        transfer.continuation.resume(with: result)
    }

    private func release(_ transfer: CurlTransfer) {
        confinement.check("curl_multi_remove_handle")
        inFlight[transfer.easy.raw] = nil
        curl_multi_remove_handle(multi, transfer.easy.raw)
        handles.checkIn(transfer.easy)
    }

    // MARK: - libcurl's sockets and timer

    private func act(on socket: curl_socket_t, flags: Int32) {
        confinement.check("curl_multi_socket_action")
        var running: Int32 = 0
        let code = curl_multi_socket_action(multi, socket, flags, &running)
        if code != CURLM_OK {
            logger.error("curl_multi_socket_action failed", metadata: ["error": "\(String(cString: curl_multi_strerror(code)))"])
        }
    }

    private static func curlFlags(_ events: UInt32) -> Int32 {
        var flags: Int32 = 0
        // A hang-up is read as such (end of file), an error reported as one.
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue) != 0 { flags |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
        if events & EPOLLERR.rawValue != 0 { flags |= CURL_CSELECT_ERR }
        return flags
    }

    /// Called by libcurl from within `curl_multi_socket_action`: which events to wait for on a socket.
    fileprivate func watch(_ socket: curl_socket_t, what: Int32) {
        guard what != CURL_POLL_REMOVE else {
            _ = epoll_ctl(epoll, EPOLL_CTL_DEL, socket, nil)  // libcurl may have closed it already
            return
        }
        var event = epoll_event()
        event.events = (what & CURL_POLL_IN != 0 ? EPOLLIN.rawValue : 0) | (what & CURL_POLL_OUT != 0 ? EPOLLOUT.rawValue : 0)
        event.data.fd = socket
        if epoll_ctl(epoll, EPOLL_CTL_MOD, socket, &event) != 0, errno == ENOENT {
            if epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event) != 0 {
                logger.error("epoll_ctl failed for a libcurl socket", metadata: ["errno": "\(errno)"])
            }
        }
    }

    /// Called by libcurl: when it next wants a timeout action; -1 for none.
    fileprivate func setTimer(milliseconds: Int) {
        timerDeadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
    }

    /// Until libcurl's timer or, when calls wait for a slot, the earliest of their deadlines.
    private func waitMilliseconds() -> Int32 {
        var next = timerDeadline
        if inFlight.count >= limit, let earliest = waiting.lazy.map(\.job.deadline).min() {
            next = min(next ?? earliest, earliest)
        }
        guard let next else { return -1 }
        let left = next - .now
        return left <= .zero ? 0 : Int32(clamping: left.roundedUpMilliseconds)
    }

    private func tearDown() {
        handles.drain()
        // The easy handles are gone, so the share is no longer in use and can go after the multi.
        curl_multi_cleanup(multi)
        curl_share_cleanup(share)
        close(epoll)
        events.deallocate()
    }
}

extension CurlReactor {
    private final class Start: Sendable {
        let mailbox: CurlMailbox
        let configuration: HTTPClientConfiguration
        let logger: Logger

        init(mailbox: CurlMailbox, configuration: HTTPClientConfiguration, logger: Logger) {
            self.mailbox = mailbox
            self.configuration = configuration
            self.logger = logger
        }
    }

    /// Starts the reactor thread; it runs until the mailbox is stopped and its calls are done.
    static func spawn(mailbox: CurlMailbox, configuration: HTTPClientConfiguration, logger: Logger) -> pthread_t {
        let start = Unmanaged.passRetained(Start(mailbox: mailbox, configuration: configuration, logger: logger)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                let reactor = CurlReactor(mailbox: start.mailbox, configuration: start.configuration, logger: start.logger)
                reactor.run()
                start.mailbox.markExited()
                return nil
            }, start)
        precondition(result == 0, "cannot start the HTTP client's reactor thread: \(result)")
        return thread
    }
}

// C callbacks: no captures; the reactor arrives through the user-data pointer.
private let curlSocketCallback: curl_socket_callback = { _, socket, what, userData, _ in
    Unmanaged<CurlReactor>.fromOpaque(userData!).takeUnretainedValue().watch(socket, what: what)
    return 0
}

private let curlTimerCallback: curl_multi_timer_callback = { _, milliseconds, userData in
    Unmanaged<CurlReactor>.fromOpaque(userData!).takeUnretainedValue().setTimer(milliseconds: milliseconds)
    return 0
}
