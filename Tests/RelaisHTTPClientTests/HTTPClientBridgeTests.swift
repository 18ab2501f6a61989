import CCurl
import CLibc
import Foundation
import Logging
import NIOCore
import NIOPosix
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisHTTPClient

#if canImport(Glibc)
import Glibc
#endif

/// Connections made and read by event loops (``CurlBridges``): libcurl's end is a local socket,
/// the TCP connection a NIO channel of the engine's loop. What libcurl would have seen of a TCP
/// connection it made itself must come through: refusals, timeouts, large answers, reuse.
@Suite struct HTTPClientBridgeTests {
    private func client(_ configure: (inout HTTPClientConfiguration) -> Void = { _ in }) -> HTTPClient {
        var configuration = HTTPClientConfiguration(maxConcurrentRequests: 4)
        configure(&configuration)
        return HTTPClient(configuration: configuration, eventLoopGroup: .singleton)
    }

    /// A call made on a loop is answered there: libcurl acts on the loop that read the answer,
    /// the reactor never, and the call resumes on its loop.
    @Test func aCallOnALoopIsCarriedAndCompletedByThatLoop() async throws {
        try await BlockingCallChecks.shared.exclusively { try await callOnALoop() }
    }

    private func callOnALoop() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server in
            let before = HTTPClient.blockingCallsOnEventLoop
            let client = client()
            defer { Task { try? await client.shutdown() } }
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            let resumedOnItsLoop = try await Task(executorPreference: EventLoopTaskExecutor(loop)) {
                var resumed = 0
                for _ in 0..<5 {
                    let response = try await client.send(.init(url: server.baseURL + "/hello"))
                    #expect(response.bodyText == "hello")
                    if loop.inEventLoop { resumed += 1 }
                }
                return resumed
            }.value
            #expect(resumedOnItsLoop == 5)
            let engine = try #require(client.engines.first { $0.engine.bridgesLoop === loop }?.engine)
            #expect(engine.actionsOnLoops.load(ordering: .relaxed) >= 5)
            #expect(engine.actionsHandedToReactor.load(ordering: .relaxed) == 0)
            #expect(HTTPClient.blockingCallsOnEventLoop == before)
        }
    }

    /// libcurl takes the local connection for made whatever the provider's address does, so the
    /// other family is tried once when the first refuses: `localhost` is ::1 and 127.0.0.1 to
    /// libcurl, and the server listens on 127.0.0.1 only.
    @Test func aNameWhoseFirstAddressRefusesIsReachedOnTheOther() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server in
            let client = client()
            defer { Task { try? await client.shutdown() } }
            for _ in 0..<3 {
                let response = try await client.send(.init(url: "http://localhost:\(server.port)/hello"))
                #expect(response.bodyText == "hello")
            }
        }
    }

    @Test func aNameRefusedOnEveryAddressIsConnectionRefused() async throws {
        let port = try FreePort.find()
        let client = client()
        defer { Task { try? await client.shutdown() } }
        await #expect(throws: HTTPClientError.connectionRefused(host: "localhost:\(port)")) {
            try await client.send(.init(url: "http://localhost:\(port)/"))
        }
    }

    /// A listen queue that is full drops the SYN: the loop's connect timeout, not the total one.
    @Test func aConnectionNeverMadeHitsTheConnectTimeout() async throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(listener) }
        let port = try FreePort.find()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(bound == 0 && listen(listener, 0) == 0)
        // The queue is filled, and never accepted from, until a connection is no longer made:
        // how many places a backlog of 0 leaves is the kernel's affair, so they are counted.
        var fillers: [Int32] = []
        defer { for filler in fillers { close(filler) } }
        var full = false
        for _ in 0..<16 where !full {
            let filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            fillers.append(filler)
            _ = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            var made = pollfd(fd: filler, events: Int16(POLLOUT), revents: 0)
            full = poll(&made, 1, 1000) == 0
        }
        try #require(full, "the listen queue never filled")
        // Timed on a loop of the test's own, which also makes the connection: in a full run, Swift's
        // cooperative threads can be held for seconds by other tests' blocking waits.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let client = HTTPClient(
            configuration: .init(connectTimeout: .milliseconds(300), totalTimeout: .seconds(30), maxConcurrentRequests: 1), eventLoopGroup: group)
        let outcome = await Task(executorPreference: EventLoopTaskExecutor(group.next())) { () -> (error: HTTPClientError?, elapsed: Duration) in
            let start = ContinuousClock.now
            do {
                _ = try await client.send(.init(url: "http://127.0.0.1:\(port)/"))
                return (nil, ContinuousClock.now - start)
            } catch {
                return (error as? HTTPClientError, ContinuousClock.now - start)
            }
        }.value
        try await client.shutdown()
        try await group.shutdownGracefully()
        #expect(outcome.error == .timeout)
        // Far from the total timeout.
        #expect(outcome.elapsed < .seconds(10), "\(outcome.elapsed)")
    }

    /// Answers far larger than a socket's buffer go through in pieces, each told to libcurl.
    @Test func aLargeAnswerComesWhole() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server in
            let client = client { $0.maxResponseBytes = 8_000_000 }
            defer { Task { try? await client.shutdown() } }
            let response = try await client.send(.init(url: server.baseURL + "/bytes?count=3000000"))
            #expect(response.body.count == 3_000_000)
            let again = try await client.send(.init(url: server.baseURL + "/bytes?count=3000000"))
            #expect(again.body.count == 3_000_000)
            #expect(again.newConnections == 0)
        }
    }

    /// A request far larger than a socket's buffer reaches the provider whole: what libcurl writes
    /// is read from the local connection for as long as each read fills the room it was given.
    @Test func aLargeRequestGoesWhole() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server in
            let client = client { $0.maxResponseBytes = 2_000_000 }
            defer { Task { try? await client.shutdown() } }
            let body = (0..<900_000).map { UInt8(truncatingIfNeeded: $0 % 251) }
            let response = try await client.send(.init(method: .post, url: server.baseURL + "/echo", body: body, timeout: .seconds(10)))
            #expect(response.status == 200)
            #expect(response.body == body)
        }
    }

    /// Kept-alive connections are reused, and their local names are gone from the file system.
    @Test func connectionsAreReusedAndLeaveNoSocketFiles() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server in
            let client = client { $0.maxConcurrentRequests = 1 }
            var connections = 0
            for _ in 0..<10 { connections += try await client.send(.init(url: server.baseURL + "/hello")).newConnections }
            #expect(connections == 1)
            try await client.shutdown()
            let left = try FileManager.default.contentsOfDirectory(atPath: try #require(CurlBridges.directory)).filter { $0.hasPrefix("relais-http-") }
            #expect(left.isEmpty, "\(left)")
        }
    }

    /// Only this process may use a connection's local socket: another one's connection is passed over.
    @Test func anotherProcessCannotTakeALocalConnection() async throws {
        let path = try #require(CurlBridges.directory) + "/relais-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        defer {
            close(listener)
            unlink(path)
        }
        var name = sockaddr_un()
        name.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &name.sun_path) { sunPath in
            for (index, byte) in path.utf8.enumerated() { sunPath[index] = byte }
        }
        let bound = withUnsafePointer(to: &name) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 1) == 0)
        let script = "import socket, time; s = socket.socket(socket.AF_UNIX); s.connect('\(path)'); time.sleep(5)"
        let other = try ChildProcess.spawn("/usr/bin/python3", ["-c", script])
        defer { other.terminate() }
        var waiting = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        try #require(poll(&waiting, 1, 5000) == 1, "the other process never connected")
        // Its connection is passed over: nothing of this process is waiting.
        #expect(relais_accept_from_self(listener) == -1)
        #expect(errno == EAGAIN)
        // This process's own connection is taken.
        let own = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(own) }
        let connected = withUnsafePointer(to: &name) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(own, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(connected == 0)
        let accepted = relais_accept_from_self(listener)
        #expect(accepted >= 0)
        if accepted >= 0 { close(accepted) }
    }

    /// libcurl may close a connection's socket in the very call that opened it (a transfer whose
    /// time ran out as it started), before the loop takes the connection over: no provider
    /// connection is made for it, which nothing would ever close.
    @Test func aLocalConnectionClosedBeforeItIsCarriedMakesNoProviderConnection() async throws {
        let provider = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(provider) }
        var target = sockaddr_in()
        target.sin_family = sa_family_t(AF_INET)
        target.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &target) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(provider, $0, length) == 0 && listen(provider, 8) == 0 && getsockname(provider, $0, &length) == 0 }
        }
        try #require(listening)
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let bridges = CurlBridges(loop: loop, connectTimeout: .seconds(5), logger: Logger(label: "test"))
        bridges.notify = { _, _ in }
        // libcurl's address structure has room for any socket address (a Unix one once rewritten).
        let raw = UnsafeMutableRawPointer.allocate(byteCount: 256, alignment: 8)
        defer { raw.deallocate() }
        let address = raw.bindMemory(to: curl_sockaddr.self, capacity: 1)
        let addressBytes = raw + MemoryLayout<curl_sockaddr>.offset(of: \curl_sockaddr.addr)!
        for closedFirst in [true, false] {
            // Rewritten by each open: set afresh.
            raw.initializeMemory(as: UInt8.self, repeating: 0, count: 256)
            address.pointee.family = AF_INET
            address.pointee.socktype = Int32(SOCK_STREAM.rawValue)
            address.pointee.protocol = Int32(IPPROTO_TCP)
            address.pointee.addrlen = UInt32(MemoryLayout<sockaddr_in>.size)
            withUnsafeBytes(of: &target) { addressBytes.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            let bridge = try #require(bridges.open(address))
            // What libcurl does with the rewritten address: connects its socket to the listening one.
            let connected = connect(bridge.curlSocket, addressBytes.assumingMemoryBound(to: sockaddr.self), socklen_t(address.pointee.addrlen))
            try #require(connected == 0)
            if closedFirst { bridges.close(bridge.curlSocket) }
            _ = bridges.pump()  // the loop takes over the connections libcurl has connected
            // The loop has run what was handed to it: a connection it started is in the queue.
            try await loop.submit {}.get()
            var waiting = pollfd(fd: provider, events: Int16(POLLIN), revents: 0)
            let arrived = poll(&waiting, 1, closedFirst ? 200 : 5000) == 1
            // The one carried is the control: without it, the absence would prove nothing.
            #expect(arrived == !closedFirst)
            if arrived { close(accept(provider, nil, nil)) }
            if !closedFirst { bridges.close(bridge.curlSocket) }
        }
    }

    /// What a test prints when a call stalls (``CurlEngine/diagnosis``) describes the call in flight
    /// and both sides of its connection.
    @Test func aCallInFlightIsDescribedByItsEngine() async throws {
        let server = try CountingHTTPServer(delay: .seconds(5))
        defer { server.stop() }
        let client = client { $0.maxConcurrentRequests = 1 }
        let call = Task { try await client.send(.init(url: server.baseURL + "/")) }
        let deadline = ContinuousClock.now + .seconds(30)
        while server.snapshot.handling == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        try #require(server.snapshot.handling == 1, "the request never reached the server")
        let diagnosis = client.engines[0].engine.diagnosis
        #expect(diagnosis.hasPrefix("1 in flight, 0 waiting, 0 for the reactor only, libcurl's timer due in "), "\(diagnosis)")
        #expect(diagnosis.contains("readable false, our end open, provider active (ended false, paused false), 0 buffers for the provider, 0 bytes for libcurl"), "\(diagnosis)")
        call.cancel()
        await #expect(throws: CancellationError.self) { try await call.value }
        #expect(client.engines[0].engine.diagnosis.hasPrefix("0 in flight"))
        try await client.shutdown()
    }
}
