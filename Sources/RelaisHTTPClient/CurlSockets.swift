import CCurl
import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The sockets libcurl asks to have watched (`CURLMOPT_SOCKETFUNCTION`), registered with the
/// reactor's epoll. Part of ``CurlMulti``: used under the client's lock only.
///
/// A connection a caller starts is not registered at once. To a nearby server it is usually made
/// by the time libcurl returns (on loopback, within `connect`): the caller checks without waiting
/// (``madeConnections()``) and lets libcurl send the request there and then. The reactor then
/// wakes once per exchange, for the answer, and not first for the connection; a connection not
/// made yet is registered for it as the caller lets go (``registerDeferred()``).
struct CurlSockets {
    private let epoll: Int32
    private let logger: Logger
    /// The sockets registered with epoll.
    private var registered: Set<curl_socket_t> = []
    /// Sockets libcurl asked a caller to watch for writing, with what it asked for.
    private var connecting: [curl_socket_t: Int32] = [:]
    /// Set while a caller drives libcurl.
    var deferringConnections = false
    /// The client's connections made by event loops, when it has loops.
    let bridges: CurlBridges?
    /// Bridged sockets for which libcurl changed what it waits for: nothing tells a loop to act on
    /// what was ready before (a socketpair is not in any epoll set), so they are checked at once.
    private var changedBridges: [curl_socket_t] = []

    init(epoll: Int32, logger: Logger, bridges: CurlBridges? = nil) {
        self.epoll = epoll
        self.logger = logger
        self.bridges = bridges
    }

    mutating func watch(_ socket: curl_socket_t, what: Int32) {
        if let bridge = bridges?.open[socket] {
            bridge.wants.store(what == CURL_POLL_REMOVE ? 0 : what, ordering: .relaxed)
            if what != CURL_POLL_REMOVE { changedBridges.append(socket) }
            return
        }
        guard what != CURL_POLL_REMOVE else {
            connecting[socket] = nil
            if registered.remove(socket) != nil {
                _ = epoll_ctl(epoll, EPOLL_CTL_DEL, socket, nil)  // libcurl may have closed it already
            }
            return
        }
        if deferringConnections && what & CURL_POLL_OUT != 0 {
            connecting[socket] = what
            return
        }
        connecting[socket] = nil
        register(socket, what: what)
    }

    /// The deferred sockets now writable or in error, with the flags to hand libcurl for each;
    /// asked with a zero-timeout `poll`, which never waits. They stay deferred: libcurl announces
    /// only a change of what it wants watched, so one that still wants the same after that action
    /// (a large body, sent a socket buffer at a time) says nothing, and must still be registered.
    mutating func madeConnections() -> [(socket: curl_socket_t, flags: Int32)] {
        guard !connecting.isEmpty else { return [] }
        var polled = connecting.keys.map { pollfd(fd: $0, events: Int16(POLLOUT), revents: 0) }
        guard poll(&polled, nfds_t(polled.count), 0) > 0 else { return [] }
        return polled.compactMap { entry in
            guard entry.revents != 0 else { return nil }
            var flags: Int32 = 0
            if entry.revents & Int16(POLLOUT) != 0 { flags |= CURL_CSELECT_OUT }
            if entry.revents & Int16(POLLERR | POLLHUP) != 0 { flags |= CURL_CSELECT_ERR }
            return (entry.fd, flags)
        }
    }

    /// The bridged sockets whose new interest is already met, with the flags to hand libcurl
    /// (a zero-timeout `poll`; later readiness is told by the loop that copies the bytes).
    mutating func readyBridges() -> [(socket: curl_socket_t, flags: Int32)] {
        guard let bridges, !changedBridges.isEmpty else { return [] }
        var polled: [pollfd] = changedBridges.compactMap { socket in
            guard let wants = bridges.open[socket]?.wants.load(ordering: .relaxed), wants != 0 else { return nil }
            let events = (wants & CURL_POLL_IN != 0 ? POLLIN : 0) | (wants & CURL_POLL_OUT != 0 ? POLLOUT : 0)
            return pollfd(fd: socket, events: Int16(events), revents: 0)
        }
        changedBridges.removeAll(keepingCapacity: true)
        guard !polled.isEmpty, poll(&polled, nfds_t(polled.count), 0) > 0 else { return [] }
        return polled.compactMap { entry in
            guard entry.revents != 0 else { return nil }
            var flags: Int32 = 0
            if entry.revents & Int16(POLLIN | POLLHUP) != 0 { flags |= CURL_CSELECT_IN }
            if entry.revents & Int16(POLLOUT) != 0 { flags |= CURL_CSELECT_OUT }
            if entry.revents & Int16(POLLERR) != 0 { flags |= CURL_CSELECT_ERR }
            return (entry.fd, flags)
        }
    }

    /// Registers what the caller left: connections not made yet, for the reactor to wait on.
    mutating func registerDeferred() {
        deferringConnections = false
        for (socket, what) in connecting { register(socket, what: what) }
        connecting.removeAll(keepingCapacity: true)
    }

    private mutating func register(_ socket: curl_socket_t, what: Int32) {
        var event = epoll_event()
        event.events = (what & CURL_POLL_IN != 0 ? EPOLLIN.rawValue : 0) | (what & CURL_POLL_OUT != 0 ? EPOLLOUT.rawValue : 0)
        event.data.fd = socket
        // What this object believes takes one system call; a socket closed without libcurl saying
        // so (epoll drops it) or a descriptor reused is met by the other operation.
        let (first, second) = registered.contains(socket) ? (EPOLL_CTL_MOD, EPOLL_CTL_ADD) : (EPOLL_CTL_ADD, EPOLL_CTL_MOD)
        if epoll_ctl(epoll, first, socket, &event) != 0 {
            guard errno == ENOENT || errno == EEXIST, epoll_ctl(epoll, second, socket, &event) == 0 else {
                registered.remove(socket)
                return logger.error("epoll_ctl failed for a libcurl socket", metadata: ["errno": "\(errno)"])
            }
        }
        registered.insert(socket)
    }
}
