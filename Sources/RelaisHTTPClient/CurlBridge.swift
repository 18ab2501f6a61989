import CCurl
import CLibc
import Logging
import NIOCore
import NIOPosix
import RelaisCrypto
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A client's connections to providers when it has event loops: each TCP connection is made and
/// read by a loop (a NIO channel), and libcurl speaks through a local Unix-domain connection whose
/// other end the loop owns too (``open(_:)``).
///
/// NIO cannot watch a descriptor it does not own, so libcurl's own sockets could only be waited on
/// by a thread of the client's. Through a local connection the loop that reads the provider's
/// answer copies it to libcurl's end and calls `curl_multi_socket_action` there and then: a call waits on
/// no other thread, and the reactor thread wakes only for libcurl's timer, for the sockets of its
/// DNS resolver thread and for the calls that must run there (``CurlMulti/mayStartOnCaller(_:)``).
/// Part of ``CurlMulti``: used under the client's lock only.
final class CurlBridges {
    /// The loop that makes and reads this client engine's connections.
    let loop: any EventLoop
    let connectTimeout: TimeAmount
    let logger: Logger
    /// Tells the client that libcurl's end of a connection is ready (``CurlEngine/bridgeReady(_:flags:)``).
    var notify: (@Sendable (curl_socket_t, Int32) -> Void)?
    /// libcurl's ends of the connections open, by descriptor.
    private(set) var open: [curl_socket_t: CurlBridge] = [:]
    /// Connections opened during the current call into libcurl, not accepted yet.
    private var pending: [(bridge: CurlBridge, listener: Int32, target: SocketAddress)] = []
    private var paths: [String] = []
    private let allocator = ByteBufferAllocator()
    /// After a ``pump()``: a provider's bytes still wait for room in one of libcurl's sockets.
    private(set) var holdingBytes = false
    private var polled: [CurlBridge] = []
    private var entries: [pollfd] = []

    init(loop: any EventLoop, connectTimeout: Duration, logger: Logger) {
        self.loop = loop
        let (seconds, attoseconds) = connectTimeout.components
        self.connectTimeout = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
        self.logger = logger
    }

    /// A connection to `address` for libcurl: a Unix-domain socket of its own, which libcurl
    /// connects to a listening socket made for this one connection (`address` is rewritten to
    /// name it; libcurl allows that); once libcurl has connected (``startPending()``), a loop
    /// accepts the connection and makes the TCP one. nil when the address is not an IP one or
    /// the sockets cannot be made: libcurl then opens a socket of its own.
    ///
    /// Not a socketpair handed over as already connected (`CURL_SOCKOPT_ALREADY_CONNECTED`):
    /// libcurl 7.88 calls `connect` on such a socket all the same (curl issue #10626, fixed in
    /// 8.0), which fails on a Unix-domain one.
    func open(_ address: UnsafeMutablePointer<curl_sockaddr>) -> CurlBridge? {
        guard let notify, address.pointee.socktype == SOCK_STREAM.rawValue, let target = Self.socketAddress(address) else { return nil }
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        var name = sockaddr_un()
        name.sun_family = sa_family_t(AF_UNIX)
        guard let directory = Self.directory else { return nil }
        let path = directory + "/relais-http-" + SecureRandom.token(bits: 96)
        let length = withUnsafeMutableBytes(of: &name.sun_path) { sunPath in
            for (index, byte) in path.utf8.enumerated() { sunPath[index] = byte }
            return MemoryLayout<sockaddr_un>.offset(of: \sockaddr_un.sun_path)! + path.utf8.count + 1
        }
        let listener = socket(AF_UNIX, type, 0)
        guard listener >= 0 else { return nil }
        let bound = withUnsafePointer(to: &name) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(length)) } }
        let curlSocket = bound == 0 && listen(listener, 1) == 0 ? socket(AF_UNIX, type, 0) : -1
        guard curlSocket >= 0 else {
            logger.error("a provider connection's local sockets could not be made", metadata: ["errno": "\(errno)"])
            _ = Glibc.close(listener)
            if bound == 0 { _ = unlink(path) }
            return nil
        }
        let raw = UnsafeMutableRawPointer(address) + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        withUnsafeBytes(of: &name) { raw.copyMemory(from: $0.baseAddress!, byteCount: length) }
        address.pointee.family = AF_UNIX
        address.pointee.protocol = 0
        address.pointee.addrlen = UInt32(length)
        let bridge = CurlBridge(curlSocket: curlSocket, family: target.protocol.rawValue, notify: notify)
        open[curlSocket] = bridge
        pending.append((bridge, listener, target))
        paths.append(path)
        return bridge
    }

    /// Connections libcurl has connected to their listening sockets since the last call: each is
    /// accepted, and its loop makes the provider's connection.
    private func startPending() {
        guard !pending.isEmpty else { return }
        // Connected (or given up): the names are no longer needed.
        for path in paths { _ = unlink(path) }
        paths.removeAll(keepingCapacity: true)
        for (bridge, listener, target) in pending {
            bridge.start(listener: listener, to: target, on: loop, connectTimeout: connectTimeout, logger: logger)
        }
        pending.removeAll(keepingCapacity: true)
    }

    /// libcurl closes its end: the loop sees the end of file and closes the TCP connection.
    func close(_ socket: curl_socket_t) {
        _ = Glibc.close(socket)
        open.removeValue(forKey: socket)?.terminate()
    }

    /// Carries what is ready on our ends of the open connections (one `poll` that never waits):
    /// what libcurl wrote goes to the providers, what waited for room in its sockets goes in.
    /// Returns libcurl's sockets with something new to read (`IN`) or whose bytes were taken while
    /// it waits to write (`OUT`: it announces only changes of what it waits for).
    func pump() -> [(socket: curl_socket_t, flags: Int32)] {
        startPending()
        guard !open.isEmpty else { return [] }
        polled.removeAll(keepingCapacity: true)  // kept between calls: a pump follows every call into libcurl
        entries.removeAll(keepingCapacity: true)
        for bridge in open.values {
            guard let entry = bridge.pollEntry else { continue }
            polled.append(bridge)
            entries.append(entry)
        }
        holdingBytes = false
        guard !entries.isEmpty, poll(&entries, nfds_t(entries.count), 0) > 0 else { return [] }
        var ready: [(socket: curl_socket_t, flags: Int32)] = []
        for (bridge, entry) in zip(polled, entries) where entry.revents != 0 {
            var flags: Int32 = 0  // both when libcurl both wrote and can read
            if entry.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
                bridge.forwardFromCurl(allocator: allocator)
                if bridge.wants.load(ordering: .relaxed) & CURL_POLL_OUT != 0 { flags |= CURL_CSELECT_OUT }
            }
            if entry.revents & Int16(POLLOUT) != 0 {
                if bridge.forwardToCurl(nil) { flags |= CURL_CSELECT_IN }
                if bridge.isHoldingBytes { holdingBytes = true }
            }
            if flags != 0 { ready.append((bridge.curlSocket, flags)) }
        }
        return ready
    }
}

/// One provider connection: libcurl's end of the local connection, ours (a plain descriptor,
/// read and written without waiting), and the TCP connection, a channel of the engine's loop.
final class CurlBridge: Sendable {
    enum Failure: Int { case refused = 1, timedOut = 2 }

    let curlSocket: curl_socket_t
    /// The provider address's family (`PF_INET`, `PF_INET6`).
    let family: Int32
    /// What libcurl waits for on its end (`CURL_POLL_*`), set from its socket callback.
    let wants = Atomic<Int32>(0)
    let closedByCurl = Atomic<Bool>(false)
    private let failure = Atomic<Int>(0)
    private let notify: @Sendable (curl_socket_t, Int32) -> Void
    private let state = Mutex(State())

    /// Shared by the loop (the provider's side) and the holder of the client's lock (libcurl's).
    private struct State: Sendable {
        /// Our end of the local connection; -1 once closed.
        var ours: Int32 = -1
        var provider: (any Channel)?
        /// What libcurl wrote before the provider's connection was made.
        var toProvider: [ByteBuffer] = []
        /// What the provider sent that libcurl's socket had no room for yet.
        var toCurl: ByteBuffer?
        /// The provider ended the connection: our end stops writing once `toCurl` is out.
        var providerEnded = false
        /// The provider's connection is not read while `toCurl` waits.
        var providerPaused = false
    }

    init(curlSocket: curl_socket_t, family: Int32, notify: @escaping @Sendable (curl_socket_t, Int32) -> Void) {
        self.curlSocket = curlSocket
        self.family = family
        self.notify = notify
    }

    /// Why the TCP connection could not be made, if it could not.
    var connectFailure: Failure? { Failure(rawValue: failure.load(ordering: .acquiring)) }

    /// libcurl's end is ready for `flags` (`CURL_CSELECT_*`): the client lets libcurl act on it.
    func tell(_ flags: Int32) {
        guard !closedByCurl.load(ordering: .relaxed) else { return }
        notify(curlSocket, flags)
    }

    /// Under the client's lock, right after libcurl connected: our end is accepted (checked to
    /// come from this process), and the loop makes the provider's connection.
    fileprivate func start(listener: Int32, to address: SocketAddress, on loop: any EventLoop, connectTimeout: TimeAmount, logger: Logger) {
        let ours = relais_accept_from_self(listener)
        let error = errno
        _ = Glibc.close(listener)
        guard ours >= 0 else {
            // libcurl gave the connection up before connecting: nothing to carry. (Another
            // process's connection, in the microseconds the name exists, is passed over.)
            return logger.error("a provider connection's local socket was not connected by libcurl", metadata: ["errno": "\(error)"])
        }
        // libcurl may have closed its end before this call (a connection it gave up at once):
        // no provider connection is made for it, or it would stay open with no one to end it.
        let closed = state.withLock { state in
            if closedByCurl.load(ordering: .relaxed) { return true }
            state.ours = ours
            return false
        }
        guard !closed else { return Self.end(ours) }
        ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .channelOption(ChannelOptions.tcpOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(ProviderSideHandler(bridge: self)) }
            }
            .connect(to: address)
            .whenComplete { result in
                switch result {
                case .success(let provider): self.connected(provider)
                case .failure(let error): self.failed(error)
                }
            }
    }

    private func connected(_ provider: any Channel) {
        let (pending, open) = state.withLock { state in
            state.provider = provider
            defer { state.toProvider = [] }
            return (state.toProvider, state.ours >= 0)
        }
        guard open else { return provider.close(promise: nil) }
        for buffer in pending { provider.write(buffer, promise: nil) }
        if !pending.isEmpty { provider.flush() }
    }

    /// The connection could not be made: our end is closed, libcurl reads the end of file, and
    /// the client reports the failure (``CurlTransferState/connectFailure``).
    private func failed(_ error: any Error) {
        if case ChannelError.connectTimeout = error {
            failure.store(Failure.timedOut.rawValue, ordering: .releasing)
        } else {
            failure.store(Failure.refused.rawValue, ordering: .releasing)
        }
        closeOurs()
        tell(CURL_CSELECT_IN)
    }

    private func closeOurs() {
        state.withLock { state in
            Self.end(state.ours)
            state.ours = -1
        }
    }

    /// Ends our side of the local connection, shut down first: libcurl reads the end of file even
    /// if a child process started meanwhile holds a copy of the descriptor.
    private static func end(_ descriptor: Int32) {
        guard descriptor >= 0 else { return }
        _ = shutdown(descriptor, Int32(SHUT_RDWR))
        _ = Glibc.close(descriptor)
    }

    /// libcurl closed its end: ours and the provider's connection go too.
    fileprivate func terminate() {
        closedByCurl.store(true, ordering: .relaxed)
        let provider = state.withLock { state in
            Self.end(state.ours)
            state.ours = -1
            return state.provider
        }
        provider?.close(promise: nil)
    }

    /// What `poll` is to wait for on our end: what libcurl wrote, and room for what waits for it.
    fileprivate var pollEntry: pollfd? {
        state.withLock { state in
            guard state.ours >= 0 else { return nil }
            return pollfd(fd: state.ours, events: Int16(POLLIN) | (state.toCurl == nil ? 0 : Int16(POLLOUT)), revents: 0)
        }
    }

    /// What libcurl wrote goes to the provider (kept until the connection is made). An end of file
    /// (libcurl shut its end) ends the provider's connection.
    fileprivate func forwardFromCurl(allocator: ByteBufferAllocator) {
        // Channel calls are made outside the lock: a failed write closes the channel, whose
        // handler takes the lock.
        let (read, ended, provider) = state.withLock { state -> (ByteBuffer?, Bool, (any Channel)?) in
            guard state.ours >= 0 else { return (nil, false, nil) }
            // One buffer, grown while reads fill what they are given: a request is one read.
            var read: ByteBuffer?
            var ended = false
            while true {
                var buffer = read ?? allocator.buffer(capacity: 4096)
                // A read that fills all it was offered (maybe more than asked) may have left bytes.
                var (count, offered) = (0, 0)
                buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: max(buffer.writableBytes, 4096)) { bytes in
                    offered = bytes.count
                    count = Glibc.read(state.ours, bytes.baseAddress, bytes.count)
                    return max(count, 0)
                }
                if count > 0 { read = buffer }
                ended = count == 0
                guard count == offered else { break }
            }
            guard let provider = state.provider else {
                if let read { state.toProvider.append(read) }
                return (nil, false, nil)
            }
            return (read, ended, provider)
        }
        guard let provider else { return }
        if let read { provider.writeAndFlush(read, promise: nil) }
        if ended { provider.close(promise: nil) }
    }

    /// The provider's bytes go to libcurl's socket; what finds no room waits (and the provider's
    /// connection is not read meanwhile). True when libcurl has something new to read.
    fileprivate func forwardToCurl(_ buffer: ByteBuffer?) -> Bool {
        let (wrote, pause, provider) = state.withLock { state -> (Bool, Bool?, (any Channel)?) in
            guard state.ours >= 0 else { return (false, nil, nil) }
            if var incoming = buffer {
                if state.toCurl == nil { state.toCurl = incoming } else { state.toCurl!.writeBuffer(&incoming) }
            }
            guard var pending = state.toCurl else { return (false, nil, nil) }
            var wrote = false
            while pending.readableBytes > 0 {
                let count = pending.withUnsafeReadableBytes { Glibc.write(state.ours, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                pending.moveReaderIndex(forwardBy: count)
                wrote = true
            }
            let drained = pending.readableBytes == 0
            state.toCurl = drained ? nil : pending
            if drained && state.providerEnded { _ = shutdown(state.ours, Int32(SHUT_WR)) }
            // Reading the provider stops while bytes wait, and starts again once they are in.
            guard state.providerPaused == drained else { return (wrote, nil, state.provider) }
            state.providerPaused = !drained
            return (wrote, !drained, state.provider)
        }
        if let pause, let provider {
            // From the lock holder's thread, which may be another loop or the reactor.
            provider.setOption(ChannelOptions.autoRead, value: !pause).whenFailure { _ in }
        }
        return wrote
    }

    /// One line for a test whose call stalled: each side's state (no bytes, no addresses).
    var diagnosis: String {
        let (ours, provider, toProvider, toCurl, ended, paused) = state.withLock {
            ($0.ours >= 0, $0.provider, $0.toProvider.count, $0.toCurl?.readableBytes ?? 0, $0.providerEnded, $0.providerPaused)
        }
        let side = provider.map { $0.isActive ? "active" : "inactive" } ?? "not connected"
        // Bytes in libcurl's socket that it was not told of would be a lost wake-up.
        var unread = pollfd(fd: curlSocket, events: Int16(POLLIN), revents: 0)
        let readable = poll(&unread, 1, 0) == 1 && unread.revents & Int16(POLLIN) != 0
        return "socket \(curlSocket): libcurl waits for \(wants.load(ordering: .relaxed)), closed by libcurl \(closedByCurl.load(ordering: .relaxed)), "
            + "readable \(readable), our end \(ours ? "open" : "closed"), provider \(side) (ended \(ended), paused \(paused)), "
            + "\(toProvider) buffers for the provider, \(toCurl) bytes for libcurl"
    }

    /// Whether bytes of the provider's still wait for room in libcurl's socket.
    fileprivate var isHoldingBytes: Bool { state.withLock { $0.toCurl != nil } }

    /// On the loop: the provider ended the connection; libcurl reads the end of file after what
    /// is still on its way to it.
    fileprivate func providerEnded() {
        state.withLock { state in
            state.providerEnded = true
            if state.toCurl == nil, state.ours >= 0 { _ = shutdown(state.ours, Int32(SHUT_WR)) }
        }
        tell(CURL_CSELECT_IN)
    }
}

/// The provider's connection: what it sends goes to libcurl, which is told at once.
private final class ProviderSideHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer
    let bridge: CurlBridge

    init(bridge: CurlBridge) { self.bridge = bridge }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if bridge.forwardToCurl(unwrapInboundIn(data)) { bridge.tell(CURL_CSELECT_IN) }
    }

    func channelInactive(context: ChannelHandlerContext) {
        bridge.providerEnded()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
