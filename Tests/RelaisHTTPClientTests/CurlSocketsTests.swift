import CCurl
import CLibc
import Logging
import RelaisServer
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisHTTPClient

#if canImport(Glibc)
import Glibc
#endif

/// The epoll bookkeeping of libcurl's sockets (`CurlSockets`), against a real epoll set and real
/// sockets: what epoll reports is what was registered.
@Suite(.tags(.fast)) struct CurlSocketsTests {
    final class Lines: Sendable {
        let lines = Mutex<[String]>([])
    }

    let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
    let lines = Lines()

    var logger: Logger {
        let lines = self.lines
        return Logger(label: "curl-sockets-test") { label in
            LineLogHandler(label: label, level: .info, format: .text) { line in lines.lines.withLock { $0.append(line) } }
        }
    }

    func shut(_ descriptors: Int32...) {
        for descriptor in descriptors { close(descriptor) }
    }

    /// A connected pair of stream sockets: each end is writable at once.
    func pair() throws -> (Int32, Int32) {
        var ends: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        return (ends[0], ends[1])
    }

    /// The descriptors epoll reports ready now, with their events.
    func ready() -> [Int32: UInt32] {
        var events = [epoll_event](repeating: epoll_event(), count: 8)
        let count = Int(epoll_wait(epoll, &events, 8, 0))
        return Dictionary(uniqueKeysWithValues: events.prefix(max(0, count)).map { ($0.data.fd, $0.events) })
    }

    @Test func aSocketWatchedIsRegisteredAndRemovedAgain() throws {
        defer { close(epoll) }
        let (a, b) = try pair()
        defer { shut(a, b) }
        var sockets = CurlSockets(epoll: epoll, logger: logger)
        sockets.watch(a, what: CURL_POLL_OUT)
        #expect(ready()[a].map { $0 & EPOLLOUT.rawValue != 0 } == true)
        sockets.watch(a, what: CURL_POLL_REMOVE)
        #expect(ready()[a] == nil)
    }

    /// A socket closed without libcurl saying so leaves epoll; its number, given to another socket,
    /// is registered again (ADD after the MOD epoll refuses), not lost.
    @Test func aNumberReusedAfterAnUnannouncedCloseIsRegisteredAgain() throws {
        defer { close(epoll) }
        let (a, b) = try pair()
        defer { shut(a, b) }
        var sockets = CurlSockets(epoll: epoll, logger: logger)
        sockets.watch(a, what: CURL_POLL_OUT)
        let (c, d) = try pair()
        defer { shut(c, d) }
        // `a` now names another open file: epoll dropped the registration with the last reference.
        try #require(dup2(c, a) == a)
        #expect(ready()[a] == nil)
        sockets.watch(a, what: CURL_POLL_OUT)
        #expect(ready()[a] != nil)
        #expect(lines.lines.withLock { $0 }.isEmpty)
    }

    /// A socket already in the set (registered by another path) is modified (MOD after the ADD
    /// epoll refuses).
    @Test func aSocketAlreadyInTheSetIsModified() throws {
        defer { close(epoll) }
        let (a, b) = try pair()
        defer { shut(a, b) }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = a
        try #require(epoll_ctl(epoll, EPOLL_CTL_ADD, a, &event) == 0)
        #expect(ready()[a] == nil, "nothing to read yet")
        var sockets = CurlSockets(epoll: epoll, logger: logger)
        sockets.watch(a, what: CURL_POLL_OUT)
        #expect(ready()[a].map { $0 & EPOLLOUT.rawValue != 0 } == true)
        #expect(lines.lines.withLock { $0 }.isEmpty)
    }

    /// A descriptor epoll cannot take is logged with its errno (the transfer then meets its
    /// timeout); the sockets after it are registered as usual.
    @Test func aDescriptorEpollRefusesIsLogged() throws {
        defer { close(epoll) }
        var sockets = CurlSockets(epoll: epoll, logger: logger)
        sockets.watch(-1, what: CURL_POLL_IN)
        let logged = lines.lines.withLock { $0 }
        #expect(logged.count == 1 && logged.first?.contains("epoll_ctl failed for a libcurl socket") == true)
        #expect(logged.first?.contains("errno=\(EBADF)") == true)
        sockets.watch(-1, what: CURL_POLL_REMOVE)
        let (a, b) = try pair()
        defer { shut(a, b) }
        sockets.watch(a, what: CURL_POLL_OUT)
        #expect(ready()[a] != nil)
        #expect(lines.lines.withLock { $0 }.count == 1)
    }

    /// While a caller drives libcurl, a socket to watch for writing waits: one already writable is
    /// handed back to act on, with nothing registered; one that is not is registered as the caller
    /// lets go, and reported once it becomes writable. A socket handed back stays waiting until
    /// libcurl says what it wants next: libcurl announces changes only, so one it says nothing of
    /// (still writing a large body) is registered for writing as the caller lets go.
    @Test func aCallerActsOnMadeConnectionsAndLeavesTheOthersToTheReactor() throws {
        defer { close(epoll) }
        let (made, madePeer) = try pair()
        defer { shut(made, madePeer) }
        let (full, fullPeer) = try pair()
        defer { shut(full, fullPeer) }
        // `full` cannot be written to: its send buffer is filled and the peer reads nothing.
        _ = fcntl(full, F_SETFL, fcntl(full, F_GETFL) | O_NONBLOCK)
        let chunk = [UInt8](repeating: 0, count: 65_536)
        while write(full, chunk, chunk.count) > 0 {}
        var sockets = CurlSockets(epoll: epoll, logger: logger)
        sockets.deferringConnections = true
        sockets.watch(made, what: CURL_POLL_OUT)
        sockets.watch(full, what: CURL_POLL_OUT)
        #expect(ready().isEmpty, "nothing is registered while the caller drives libcurl")
        let acted = sockets.madeConnections()
        #expect(acted.map(\.socket) == [made] && acted.first?.flags == CURL_CSELECT_OUT)
        // Acting on it, libcurl sent the request and now wants the answer: registered for reading.
        sockets.watch(made, what: CURL_POLL_IN)
        #expect(sockets.madeConnections().isEmpty, "what libcurl said last holds")
        sockets.registerDeferred()
        #expect(!sockets.deferringConnections)
        #expect(ready().isEmpty, "the socket libcurl wants read has nothing to read; the full one is not writable")
        // The peer reads: the full socket becomes writable, and the reactor would hear of it.
        var sink = [UInt8](repeating: 0, count: 65_536)
        _ = fcntl(fullPeer, F_SETFL, fcntl(fullPeer, F_GETFL) | O_NONBLOCK)
        while read(fullPeer, &sink, sink.count) > 0 {}
        #expect(try #require(ready()[full]) & EPOLLOUT.rawValue != 0)
    }

    /// A socket handed back that libcurl says nothing more of still wants writing (the rest of a
    /// large body): it is registered for it as the caller lets go, not forgotten.
    @Test func aMadeConnectionLibcurlSaysNothingOfIsRegisteredAsItAskedBefore() throws {
        defer { close(epoll) }
        let (made, madePeer) = try pair()
        defer { shut(made, madePeer) }
        var sockets = CurlSockets(epoll: epoll, logger: logger)
        sockets.deferringConnections = true
        sockets.watch(made, what: CURL_POLL_INOUT)
        #expect(sockets.madeConnections().map(\.socket) == [made])
        #expect(ready().isEmpty)
        sockets.registerDeferred()
        #expect(try #require(ready()[made]) & EPOLLOUT.rawValue != 0)
    }
}
