import CCurl
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A call's outcome, resumed by whoever held the client's lock once it has let go of it.
typealias CurlCompletion = (continuation: CurlContinuation, result: Result<HTTPClientResponse, any Error>)

/// libcurl's multi handle and the transfers in it, driven the way libcurl documents for
/// event-based applications: libcurl says which sockets to watch and when to call back
/// (``curlSocketCallback``, ``curlTimerCallback``), and readiness and timeouts go to
/// `curl_multi_socket_action`. Every method runs under the client's lock (``CurlEngine``), by
/// whichever thread holds it: the event loop that starts a transfer, which lets libcurl send the
/// request at once, or the reactor thread, which waits on the sockets and the timer in `epoll_wait`
/// and completes the transfers. Not Sendable: the lock is what hands it from thread to thread.
final class CurlMulti {
    let configuration: HTTPClientConfiguration
    private let logger: Logger
    let confinement: CurlConfinement
    private let limit: Int
    private let multi: UnsafeMutableRawPointer
    private let share: UnsafeMutableRawPointer
    private let timer: Int32
    private let handles: CurlEasyHandles
    /// When libcurl wants `curl_multi_socket_action(CURL_SOCKET_TIMEOUT)`; nil when it does not.
    private var curlDeadline: ContinuousClock.Instant?
    /// What the timer descriptor is set to; nil when disarmed.
    private var armedDeadline: ContinuousClock.Instant?
    /// Calls beyond the bound on transfers in flight, in arrival order.
    private var waiting: [(job: CurlJob, continuation: CurlContinuation, isRetry: Bool)] = []
    private var inFlight: [UnsafeMutableRawPointer: CurlTransfer] = [:]
    private var completed: [CurlCompletion] = []
    /// Set by the reactor once the client stops: new calls are refused, those made go on.
    var stopping = false
    /// A TLS handshake has completed, so libcurl holds the CA store in memory (its cache never
    /// expires here): from then on a TLS connection reads no file and may be made on an event loop.
    private(set) var caStoreLoaded = false
    /// Transfers in the multi handle that only the reactor may drive (``needsTheReactor(_:)``).
    /// While there is one, callers drive nothing: any call into libcurl may run any transfer's
    /// due steps, a TLS connection reading its files among them.
    private var reactorOnly = 0
    /// The sockets libcurl wants watched, as epoll has them, and the bridged ones.
    private(set) var sockets: CurlSockets
    /// Connections a caller found made and sent its request on (for tests).
    private(set) var connectionsMadeOnCaller = 0

    init(
        configuration: HTTPClientConfiguration, logger: Logger, confinement: CurlConfinement, epoll: Int32, timer: Int32, bridges: CurlBridges? = nil
    ) {
        self.configuration = configuration
        self.logger = logger
        self.confinement = confinement
        self.timer = timer
        sockets = CurlSockets(epoll: epoll, logger: logger, bridges: bridges)
        limit = max(1, configuration.maxConcurrentRequests)
        handles = CurlEasyHandles(capacity: limit, confinement: confinement)
        guard let multi = curl_multi_init(), let share = curl_share_init() else {
            preconditionFailure("curl_multi_init or curl_share_init failed: out of memory")
        }
        self.multi = multi
        self.share = share
    }

    /// Before any use, by the thread that created it, with the lock held.
    func setUp() {
        confinement.check("curl_multi_setopt")
        // DNS answers and TLS sessions are kept across easy handles, and so are connections, which
        // the multi handle's own cache would keep too: one cache either way, for every provider.
        // The share is used under the client's lock only, so it needs no lock callbacks.
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
    }

    var isIdle: Bool { inFlight.isEmpty && waiting.isEmpty }
    var waitingCount: Int { waiting.count }
    var inFlightCount: Int { inFlight.count }
    var reactorOnlyCount: Int { reactorOnly }

    /// Whether the calling thread (an event loop) may start this transfer and drive libcurl: not
    /// once the client stops, not while a transfer only the reactor may drive is in flight, and
    /// not for such a transfer.
    func mayStartOnCaller(_ job: CurlJob) -> Bool {
        mayDriveOnCaller && !needsTheReactor(job)
    }

    /// Whether an event loop may call into libcurl at all (to act on a bridged connection).
    var mayDriveOnCaller: Bool { !stopping && reactorOnly == 0 }

    /// A transfer for which libcurl could read a file. A TLS connection reads the CA bundle until a
    /// first handshake has cached it, and a client certificate and key at every handshake; without
    /// peer verification libcurl still reads the bundle, but never caches it. A redirect may lead
    /// to TLS; a connection through an HTTPS proxy reads the proxy's CA files (kept apart from the
    /// providers' store) at every handshake.
    private func needsTheReactor(_ job: CurlJob) -> Bool {
        if Self.isHTTPS(configuration.proxy) { return true }
        guard Self.isHTTPS(job.request.url) || configuration.followRedirects else { return false }
        let tls = configuration.tls
        return !caStoreLoaded || !tls.verifyPeer || tls.clientCertificatePath != nil || tls.clientKeyPath != nil
    }

    /// Schemes are case-insensitive (RFC 3986 §3.1), and so is libcurl.
    private static func isHTTPS(_ url: String?) -> Bool {
        // Asked for every call: compared in place, ASCII letters folded to lower case.
        guard let url else { return false }
        return url.utf8.prefix(6).elementsEqual("https:".utf8) { $0 | 0x20 == $1 }
    }

    // MARK: - Calls in and out

    /// A new call joins the queue and starts if a slot is free (fails at once if already cancelled).
    func submit(_ job: CurlJob, _ continuation: CurlContinuation) {
        if job.cancelled.load(ordering: .acquiring) {
            completed.append((continuation, .failure(CancellationError())))
        } else {
            waiting.append((job, continuation, false))
        }
    }

    /// What is due: calls that can start, expired waits, libcurl's timer, finished transfers; then
    /// the timer descriptor set to the next thing due. Every holder of the lock ends with this.
    /// On a caller's thread, calls that may read a file stay queued for the reactor; the result
    /// says whether any did, so that the caller wakes the reactor to start them.
    func advance(onCaller: Bool) -> Bool {
        expireWaiting()
        sockets.deferringConnections = onCaller
        var leftForTheReactor = false
        while true {
            if startWaiting(onCaller: onCaller) { leftForTheReactor = true }
            runDueTimer()
            if onCaller { driveMadeConnections() }
            if driveReadyBridges() { leftForTheReactor = true }
            completeFinished()
            // Completions may have freed slots: go round again while a queued call can use one.
            guard inFlight.count < limit, waiting.contains(where: { !onCaller || mayStartOnCaller($0.job) }) else { break }
        }
        // A free slot and a queued call the caller may not start: the reactor starts it now.
        if onCaller && inFlight.count < limit && !waiting.isEmpty { leftForTheReactor = true }
        sockets.registerDeferred()
        rearm()
        return leftForTheReactor
    }

    /// Starts queued calls while slots are free; true when one was left for the reactor.
    private func startWaiting(onCaller: Bool) -> Bool {
        var index = 0
        var skipped = false
        while inFlight.count < limit, index < waiting.count {
            guard !onCaller || mayStartOnCaller(waiting[index].job) else {
                index += 1
                skipped = true
                continue
            }
            let (job, continuation, isRetry) = waiting.remove(at: index)
            start(job, continuation, isRetry: isRetry)
        }
        return skipped
    }

    /// Lets libcurl go on, on the caller, with the connections it started that are already made
    /// (``CurlSockets``); the others are left to the reactor.
    private func driveMadeConnections() {
        for (socket, flags) in sockets.madeConnections() {
            act(on: socket, flags: flags)
            connectionsMadeOnCaller += 1
        }
    }

    /// Lets libcurl go on with the bridged sockets whose new interest is already met; what it does
    /// then may change interests again, so a few rounds.
    /// Also carries the bytes between libcurl's connections and the loop's (``CurlBridges/pump()``),
    /// round after round while each gives libcurl something to read; true when bytes still wait
    /// after the last round (a large answer): the reactor goes on with them.
    @discardableResult
    private func driveReadyBridges() -> Bool {
        guard let bridges = sockets.bridges else { return false }
        for _ in 0..<64 {
            let pumped = bridges.pump()
            let ready = sockets.readyBridges()
            if ready.isEmpty && pumped.isEmpty { return false }
            for (socket, flags) in ready { act(on: socket, flags: flags) }
            for (socket, flags) in pumped { act(on: socket, flags: flags) }
        }
        return bridges.holdingBytes
    }

    /// The completions made under the lock, to resume once it is released.
    func takeCompleted() -> [CurlCompletion] {
        defer { completed.removeAll(keepingCapacity: true) }
        return completed
    }

    /// Queued calls past their deadline fail as a transfer would: the total timeout counts from the call.
    private func expireWaiting() {
        guard !waiting.isEmpty else { return }
        let now = ContinuousClock.now
        waiting.removeAll { job, continuation, _ in
            guard job.deadline <= now else { return false }
            completed.append((continuation, .failure(HTTPClientError.timeout)))
            return true
        }
    }

    private func start(_ job: CurlJob, _ continuation: CurlContinuation, isRetry: Bool = false, ipResolve: Int = Int(CURL_IPRESOLVE_WHATEVER)) {
        let remaining = job.deadline - .now
        guard remaining > .zero else { return completed.append((continuation, .failure(HTTPClientError.timeout))) }
        let transfer = CurlTransfer(
            job: job, continuation: continuation, easy: handles.checkOut(), maxBytes: configuration.maxResponseBytes, isRetry: isRetry,
            ipResolve: ipResolve)
        do {
            try transfer.configure(configuration, timeout: remaining, share: share, bridges: sockets.bridges, ipResolve: ipResolve)
        } catch {
            handles.checkIn(transfer.easy)
            return completed.append((continuation, .failure(error)))
        }
        confinement.check("curl_multi_add_handle")
        let code = curl_multi_add_handle(multi, transfer.easy.raw)
        guard code == CURLM_OK else {
            handles.checkIn(transfer.easy)
            let reason = String(cString: curl_multi_strerror(code))
            return completed.append((continuation, .failure(HTTPClientError.transport(curlCode: Int(code.rawValue), reason: reason))))
        }
        inFlight[transfer.easy.raw] = transfer
        transfer.needsTheReactor = needsTheReactor(job)
        if transfer.needsTheReactor { reactorOnly += 1 }
    }

    /// Takes the transfer out of libcurl at once: its connection is closed, the handle reused.
    func cancel(_ job: CurlJob) {
        if let index = waiting.firstIndex(where: { $0.job === job }) {
            completed.append((waiting.remove(at: index).continuation, .failure(CancellationError())))
        } else if let transfer = inFlight.values.first(where: { $0.job === job }) {
            finish(transfer, with: .failure(CancellationError()))
        }
    }

    /// Completes what libcurl reports done. A caller meets only transfers it may drive (none other
    /// is in flight while it holds the lock), so a retry starts wherever its first attempt ran.
    private func completeFinished() {
        confinement.check("curl_multi_info_read")
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            // The message is libcurl's until the handle is removed: read it first.
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle, let transfer = inFlight[easy] else { continue }
            let code = message.pointee.data.result
            if !caStoreLoaded { caStoreLoaded = transfer.completedATLSHandshake }
            if let outcome = transfer.bridgedOutcome(code) {
                switch outcome {
                case .retry(let ipResolve):
                    release(transfer)
                    start(transfer.job, transfer.continuation, isRetry: true, ipResolve: ipResolve)
                case .failure(let error): finish(transfer, with: .failure(error))
                }
                continue
            }
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
        completed.append((transfer.continuation, result))
    }

    private func release(_ transfer: CurlTransfer) {
        confinement.check("curl_multi_remove_handle")
        inFlight[transfer.easy.raw] = nil
        if transfer.needsTheReactor { reactorOnly -= 1 }
        curl_multi_remove_handle(multi, transfer.easy.raw)
        handles.checkIn(transfer.easy)
    }

    // MARK: - libcurl's sockets and timer

    /// A socket libcurl watches is ready (or in error).
    func act(on socket: curl_socket_t, events: UInt32) {
        var flags: Int32 = 0
        // A hang-up is read as such (end of file), an error reported as one.
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue) != 0 { flags |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { flags |= CURL_CSELECT_OUT }
        if events & EPOLLERR.rawValue != 0 { flags |= CURL_CSELECT_ERR }
        act(on: socket, flags: flags)
    }

    func act(on socket: curl_socket_t, flags: Int32) {
        confinement.check("curl_multi_socket_action")
        var running: Int32 = 0
        let code = curl_multi_socket_action(multi, socket, flags, &running)
        if code != CURLM_OK {
            logger.error("curl_multi_socket_action failed", metadata: ["error": "\(String(cString: curl_multi_strerror(code)))"])
        }
    }

    /// libcurl's timer, whenever it is due: at once after a transfer is added (libcurl asks for
    /// that with a timeout of 0, and the request then goes out on the thread that added it).
    private func runDueTimer() {
        while let deadline = curlDeadline, deadline <= .now {
            act(on: CURL_SOCKET_TIMEOUT, flags: 0)
            // libcurl calls the timer function only when its earliest expiry changes, and the
            // milliseconds it gives are rounded down: woken a little early, it finds nothing due
            // and says nothing. Then it is asked when it is next due. Retrying every millisecond
            // instead spun an idle client's reactor at 1 kHz for good whenever libcurl had dropped
            // its expiry without saying so (seen with gdb: `curl_multi_timeout` answering -1).
            if curlDeadline == deadline { curlDeadline = nextDeadlineFromLibcurl() }
        }
    }

    /// When libcurl next wants a timeout action, asked: nil for never, a millisecond at least.
    private func nextDeadlineFromLibcurl() -> ContinuousClock.Instant? {
        confinement.check("curl_multi_timeout")
        var milliseconds = -1
        guard curl_multi_timeout(multi, &milliseconds) == CURLM_OK, milliseconds >= 0 else { return nil }
        return .now + .milliseconds(max(milliseconds, 1))
    }

    /// libcurl's deadline as this object holds it (tests).
    var timerDeadline: ContinuousClock.Instant? { curlDeadline }

    /// Sets the timer descriptor to libcurl's deadline or, when calls wait for a slot, the earliest
    /// of theirs. Only an earlier deadline is written: a timer left early wakes the reactor once,
    /// which finds nothing due and sets it again, cheaper than a system call per change.
    private func rearm() {
        var next = curlDeadline
        if inFlight.count >= limit, let earliest = waiting.lazy.map(\.job.deadline).min() {
            next = min(next ?? earliest, earliest)
        }
        guard let next else { return }
        if let armed = armedDeadline, armed <= next, armed > .now { return }
        let (seconds, attoseconds) = max(next - .now, .nanoseconds(1)).components
        var value = itimerspec()
        value.it_value.tv_sec = Int(seconds)
        // A zero it_value disarms: never less than a nanosecond.
        value.it_value.tv_nsec = max(1, Int(attoseconds / 1_000_000_000))
        if timerfd_settime(timer, 0, &value, nil) != 0 {
            logger.error("timerfd_settime failed for the HTTP client's timer", metadata: ["errno": "\(errno)"])
        }
        armedDeadline = next
    }

    /// The timer descriptor fired: it is disarmed until ``advance()`` sets it again.
    func timerFired() {
        var expirations: UInt64 = 0
        _ = read(timer, &expirations, MemoryLayout<UInt64>.size)
        armedDeadline = nil
    }

    /// Called by libcurl from within `curl_multi_socket_action`: which events to wait for on a
    /// socket. epoll_ctl may be called while the reactor waits: the change applies to that wait.
    fileprivate func watch(_ socket: curl_socket_t, what: Int32) {
        sockets.watch(socket, what: what)
    }

    /// Called by libcurl: when it next wants a timeout action; -1 for none.
    func setTimer(milliseconds: Int) {
        curlDeadline = milliseconds < 0 ? nil : .now + .milliseconds(milliseconds)
    }

    /// Frees libcurl's handles; nothing may use this object afterwards.
    func tearDown() {
        handles.drain()
        confinement.check("curl_multi_cleanup")
        // The easy handles are gone, so the share is no longer in use and can go after the multi.
        curl_multi_cleanup(multi)
        curl_share_cleanup(share)
    }
}

// C callbacks: no captures; the multi arrives through the user-data pointer, under the lock of
// the thread that called into libcurl.
private let curlSocketCallback: curl_socket_callback = { _, socket, what, userData, _ in
    Unmanaged<CurlMulti>.fromOpaque(userData!).takeUnretainedValue().watch(socket, what: what)
    return 0
}

private let curlTimerCallback: curl_multi_timer_callback = { _, milliseconds, userData in
    Unmanaged<CurlMulti>.fromOpaque(userData!).takeUnretainedValue().setTimer(milliseconds: milliseconds)
    return 0
}
