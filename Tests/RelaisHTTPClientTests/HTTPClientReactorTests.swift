import CCurl
import CLibc
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOPosix
import RelaisServer
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisHTTPClient

#if canImport(Glibc)
import Glibc
#endif

/// The reactor: the bound on transfers in flight, connection reuse, cancellation and shutdown at
/// any point of a call, every error path, and the check that libcurl runs on the reactor only.
@Suite struct HTTPClientReactorTests {
    private func client(_ configure: (inout HTTPClientConfiguration) -> Void = { _ in }) -> HTTPClient {
        var configuration = HTTPClientConfiguration(maxConcurrentRequests: 4)
        configure(&configuration)
        return HTTPClient(configuration: configuration)
    }

    /// A router whose `/held` answers only when `release` yields, telling `arrival` it has the request.
    private func heldRouter() -> (Router<BasicRequestContext>, arrived: AsyncStream<Void>, release: AsyncStream<Void>.Continuation, hellos: Counter) {
        let (arrived, arrival) = AsyncStream.makeStream(of: Void.self)
        let (released, release) = AsyncStream.makeStream(of: Void.self)
        let hellos = Counter()
        let router = LoopbackHTTPServer.testRouter()
        router.get("/held") { _, _ in
            arrival.yield()
            var iterator = released.makeAsyncIterator()
            _ = await iterator.next()
            return "released"
        }
        router.get("/counted") { _, _ in
            hellos.add()
            return "counted"
        }
        // No Content-Length: only the write callback can see the body is over the limit.
        router.get("/chunked") { request, _ in
            let count = request.uri.queryParameters.get("count", as: Int.self) ?? 0
            return Response(
                status: .ok,
                body: ResponseBody { writer in
                    for _ in 0..<(count / 1000) { try await writer.write(ByteBuffer(repeating: UInt8(ascii: "x"), count: 1000)) }
                    try await writer.finish(nil)
                })
        }
        return (router, arrived, release, hellos)
    }

    final class Counter: Sendable {
        private let value = Atomic<Int>(0)
        func add() { value.add(1, ordering: .relaxed) }
        var count: Int { value.load(ordering: .relaxed) }
    }

    @Test func aHundredCallsRunAtMostFourAtATimeOnFourConnections() async throws {
        let server = try CountingHTTPServer(delay: .milliseconds(20))
        defer { server.stop() }
        let client = client()
        let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<100 { group.addTask { try await client.send(.init(url: server.baseURL + "/")).status } }
            return try await group.reduce(into: [Int]()) { $0.append($1) }
        }
        try await client.shutdown()
        #expect(statuses == Array(repeating: 200, count: 100))
        let counts = server.snapshot
        #expect(counts.requests == 100)
        #expect(counts.maxHandling <= 4)
        #expect(counts.maxOpen <= 4)
        #expect(counts.accepted <= 4)
    }

    @Test func theSecondCallReusesTheFirstOnesConnection() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server async throws in
            let client = client()
            defer { Task { try? await client.shutdown() } }
            let first = try await client.send(.init(url: server.baseURL + "/hello"))
            let second = try await client.send(.init(url: server.baseURL + "/hello"))
            #expect(first.newConnections == 1)
            #expect(second.newConnections == 0)
            #expect(second.bodyText == "hello")
        }
    }

    @Test(arguments: [true, false])
    func aServerThatClosesAfterEachAnswerStillServesEveryCall(announcesIt: Bool) async throws {
        // Announced (Connection: close), libcurl closes its side; unannounced, it finds the
        // connection dead when it next wants it, and connects again.
        let server = try CountingHTTPServer(answer: CountingHTTPServer.ok(close: announcesIt), closeAfterEachAnswer: true)
        defer { server.stop() }
        let client = client()
        for _ in 0..<5 {
            let response = try await client.send(.init(url: server.baseURL + "/"))
            #expect(response.bodyText == "ok")
            #expect(response.newConnections == 1)
        }
        let bodies = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await client.send(.init(url: server.baseURL + "/")).bodyText } }
            return try await group.reduce(into: [String]()) { $0.append($1) }
        }
        try await client.shutdown()
        #expect(bodies == Array(repeating: "ok", count: 20))
        #expect(server.snapshot.accepted == 25)
    }

    /// A body larger than the socket takes at once, on a kept connection, from a call its caller
    /// started: libcurl sends the rest as the socket drains, each time wanting to write again,
    /// which it does not announce anew. The socket must stay watched for it.
    @Test func aLargeBodyOnAKeptConnectionIsSentWhole() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server async throws in
            let client = client { $0.totalTimeout = .seconds(20) }
            defer { Task { try? await client.shutdown() } }
            let engine = client.engine
            let body = (0..<(512 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            let first = try await client.send(.init(method: .post, url: server.baseURL + "/echo", body: body))
            #expect(first.body == body)
            // Calls that find the lock taken go to the reactor: made until one was started here.
            var startedHere = false
            for _ in 0..<20 where !startedHere {
                let before = (engine.startedByCallers.load(ordering: .relaxed), engine.foundTheLockTaken.load(ordering: .relaxed))
                let echoed = try await client.send(.init(method: .post, url: server.baseURL + "/echo", body: body))
                #expect(echoed.body == body)
                #expect(echoed.newConnections == 0)
                startedHere = engine.startedByCallers.load(ordering: .relaxed) > before.0 && engine.foundTheLockTaken.load(ordering: .relaxed) == before.1
            }
            #expect(startedHere)
        }
    }

    /// On loopback a connection is made by the time `connect` returns: the caller sends the
    /// request on it there and then, so that the reactor wakes for the answer only, not first for
    /// the connection too.
    @Test func aConnectionMadeAtOnceCarriesItsRequestFromTheCaller() async throws {
        let server = try CountingHTTPServer(closeAfterEachAnswer: true)
        defer { server.stop() }
        let client = client()
        let calls = 6
        for _ in 0..<calls {
            let response = try await client.send(.init(url: server.baseURL + "/"))
            #expect(response.bodyText == "ok" && response.newConnections == 1)
        }
        let made = client.engine.connectionsMadeByCallers.load(ordering: .relaxed)
        try await client.shutdown()
        // A connection the kernel had not finished yet is left to the reactor: most, not all.
        #expect(made >= calls / 2)
        #expect(server.snapshot.accepted == calls)
    }

    @Test func aGetMeetingResetsOnEveryKeptConnectionIsSentAgainOnANewOne() async throws {
        // Eight kept-alive connections, each reset when reused (a server that closed them all):
        // libcurl's own retries take the next kept connection each time and give up after five;
        // the client's retry then forces a new connection.
        let (server, client, warm) = try await eightDoomedConnections { .init(url: $0) }
        defer { server.stop() }
        #expect(warm == 8)
        let response = try await client.send(.init(url: server.baseURL + "/"))
        try await client.shutdown()
        #expect(response.bodyText == "ok")
        #expect(response.newConnections == 1)
        #expect(server.snapshot.accepted == 9)
    }

    @Test func aPostThatWentOutIsNotSentAgainByTheClient() async throws {
        // The same server for a POST (a code exchange): the request went out on each connection,
        // so after libcurl's retries the client reports the failure instead of sending it again.
        let post: @Sendable (String) -> HTTPClientRequest = { HTTPClientRequest(method: .post, url: $0, body: Array("code=one-time".utf8)) }
        let (server, client, _) = try await eightDoomedConnections(post)
        defer { server.stop() }
        await #expect {
            try await client.send(post(server.baseURL + "/"))
        } throws: { error in
            guard case .transport(let code, _) = error as? HTTPClientError else { return false }
            return code == Int(CURLE_RECV_ERROR.rawValue)
        }
        try await client.shutdown()
        #expect(server.snapshot.accepted == 8)
    }

    /// A server that resets each connection when it is reused, and a client keeping eight of them,
    /// opened by eight `request`s at once (the server's delay keeps them apart); with the new
    /// connections they made.
    private func eightDoomedConnections(
        _ request: @escaping @Sendable (String) -> HTTPClientRequest
    ) async throws -> (CountingHTTPServer, HTTPClient, Int) {
        let server = try CountingHTTPServer(delay: .milliseconds(100), resetSecondRequest: true)
        let client = client { $0.maxConcurrentRequests = 8 }
        let opened = try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<8 { group.addTask { try await client.send(request(server.baseURL + "/")).newConnections } }
            return try await group.reduce(0, +)
        }
        return (server, client, opened)
    }

    @Test func libcurlsSocketsAreNotInheritedByChildProcesses() async throws {
        // Inherited, a connection outlives libcurl's close in any child started meanwhile (a
        // test's redis-server held one, and a server's reset never reached the client).
        let (router, arrived, release, _) = heldRouter()
        try await LoopbackHTTPServer.with(router: router) { server async throws in
            let client = client()
            defer { Task { try? await client.shutdown() } }
            let call = Task { try await client.send(.init(url: server.baseURL + "/held")) }
            var arrivals = arrived.makeAsyncIterator()
            _ = await arrivals.next()
            let sockets = Self.descriptorsConnected(toPort: server.port)
            release.yield()
            _ = try await call.value
            #expect(sockets.count == 1)
            #expect(sockets.allSatisfy { fcntl($0, F_GETFD) & FD_CLOEXEC != 0 })
        }
    }

    /// This process's sockets whose peer is 127.0.0.1:`port`: the client ends of connections to it.
    private static func descriptorsConnected(toPort port: Int) -> [Int32] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return names.compactMap(Int32.init).filter { descriptor in
            var address = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let named = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
            }
            return named == 0 && address.sin_family == sa_family_t(AF_INET) && Int(UInt16(bigEndian: address.sin_port)) == port
        }
    }

    @Test func cancellingAnInFlightCallReturnsAtOnceAndFreesItsSlot() async throws {
        let (router, arrived, release, _) = heldRouter()
        defer { release.finish() }
        try await LoopbackHTTPServer.with(router: router) { server async throws in
            let client = client { $0.maxConcurrentRequests = 1 }
            defer { Task { try? await client.shutdown() } }
            let task = Task { try await client.send(.init(url: server.baseURL + "/held")) }
            var arrivals = arrived.makeAsyncIterator()
            _ = await arrivals.next()
            let cancelled = ContinuousClock.now
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            // No progress check to wait for; the bound is only for a starved test process.
            #expect(ContinuousClock.now - cancelled < .seconds(5))
            // The one slot is free again: the next call goes through.
            #expect(try await client.send(.init(url: server.baseURL + "/hello")).bodyText == "hello")
        }
    }

    @Test func cancellingACallWaitingForASlotNeverSendsIt() async throws {
        let (router, arrived, release, counted) = heldRouter()
        try await LoopbackHTTPServer.with(router: router) { server async throws in
            let client = client { $0.maxConcurrentRequests = 1 }
            defer { Task { try? await client.shutdown() } }
            let holder = Task { try await client.send(.init(url: server.baseURL + "/held")) }
            var arrivals = arrived.makeAsyncIterator()
            _ = await arrivals.next()
            let waiter = Task { try await client.send(.init(url: server.baseURL + "/counted")) }
            #expect(try await eventually { client.engine.waitingForSlot.load(ordering: .relaxed) == 1 })
            waiter.cancel()
            await #expect(throws: CancellationError.self) { try await waiter.value }
            release.yield()
            #expect(try await holder.value.bodyText == "released")
            #expect(try await client.send(.init(url: server.baseURL + "/hello")).bodyText == "hello")
            #expect(counted.count == 0)
        }
    }

    @Test func aCallFromACancelledTaskIsNeverSent() async throws {
        let (router, _, _, counted) = heldRouter()
        try await LoopbackHTTPServer.with(router: router) { server async throws in
            let client = client()
            defer { Task { try? await client.shutdown() } }
            let (gate, _) = AsyncStream.makeStream(of: Void.self)
            let task = Task {
                // Returns once the task is cancelled: the call is made from a cancelled task.
                var iterator = gate.makeAsyncIterator()
                _ = await iterator.next()
                return try await client.send(.init(url: server.baseURL + "/counted"))
            }
            task.cancel()
            await #expect(throws: CancellationError.self) { try await task.value }
            #expect(counted.count == 0)
        }
    }

    @Test func aServerThatNeverAnswersTimesOutAndTheClientGoesOn() async throws {
        let listener = try SilentListener()
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server async throws in
            let client = client { $0.totalTimeout = .milliseconds(300) }
            defer { Task { try? await client.shutdown() } }
            await #expect(throws: HTTPClientError.timeout) { try await client.send(.init(url: listener.baseURL + "/")) }
            #expect(try await client.send(.init(url: server.baseURL + "/hello", timeout: .seconds(20))).bodyText == "hello")
        }
    }

    /// libcurl's connection phase includes the TLS handshake: a server that takes the TCP
    /// connection and never answers the ClientHello shows the connect timeout, not the total one.
    /// Timed from a loop of the test's own: in a full run, Swift's two cooperative threads can be
    /// held for seconds by other tests' blocking waits, and a task resumed there late would time
    /// the pool, not the client (22 s seen for a 300 ms timeout).
    @Test func aHandshakeNeverAnsweredHitsTheConnectTimeout() async throws {
        let listener = try SilentListener()
        let client = client {
            $0.connectTimeout = .milliseconds(300); $0.totalTimeout = .seconds(30)
        }
        defer { Task { try? await client.shutdown() } }
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let outcome = await Task(executorPreference: EventLoopTaskExecutor(group.next())) { () -> (error: HTTPClientError?, elapsed: Duration) in
            let start = ContinuousClock.now
            do {
                _ = try await client.send(.init(url: "https://127.0.0.1:\(listener.port)/"))
                return (nil, ContinuousClock.now - start)
            } catch {
                return (error as? HTTPClientError, ContinuousClock.now - start)
            }
        }.value
        try await group.shutdownGracefully()
        #expect(outcome.error == .timeout)
        // Far from the total timeout.
        #expect(outcome.elapsed < .seconds(10), "\(outcome.elapsed)")
    }

    @Test func aChunkedBodyOverTheLimitIsTooLarge() async throws {
        let (router, _, _, _) = heldRouter()
        try await LoopbackHTTPServer.with(router: router) { server async throws in
            let client = client { $0.maxResponseBytes = 5000 }
            defer { Task { try? await client.shutdown() } }
            #expect(try await client.send(.init(url: server.baseURL + "/chunked?count=5000")).body.count == 5000)
            await #expect(throws: HTTPClientError.responseTooLarge(limit: 5000)) {
                try await client.send(.init(url: server.baseURL + "/chunked?count=200000"))
            }
            #expect(try await client.send(.init(url: server.baseURL + "/hello")).bodyText == "hello")
        }
    }

    @Test func headerLinesOverTheLimitAreTooLarge() async throws {
        // 100 header lines of 100 bytes: under libcurl's own bounds (100 KiB a line, 300 KiB in
        // all), over the client's.
        let line = "X-Filler: " + String(repeating: "a", count: 88) + "\r\n"
        let answer = "HTTP/1.1 200 OK\r\n" + String(repeating: line, count: 100) + "Content-Length: 2\r\n\r\nok"
        let server = try CountingHTTPServer(answer: answer)
        defer { server.stop() }
        let tight = client { $0.maxResponseBytes = 5000 }
        await #expect(throws: HTTPClientError.responseTooLarge(limit: 5000)) {
            try await tight.send(.init(url: server.baseURL + "/"))
        }
        try await tight.shutdown()
        let roomy = client { $0.maxResponseBytes = 20000 }
        let response = try await roomy.send(.init(url: server.baseURL + "/"))
        try await roomy.shutdown()
        #expect(response.headers.count == 101)
        #expect(response.bodyText == "ok")
    }

    @Test func shutdownLetsTheCallsMadeFinishThenFreesEverything() async throws {
        let (router, arrived, release, counted) = heldRouter()
        try await LoopbackHTTPServer.with(router: router) { server async throws in
            let client = client { $0.maxConcurrentRequests = 1 }
            let inFlight = Task { try await client.send(.init(url: server.baseURL + "/held")) }
            var arrivals = arrived.makeAsyncIterator()
            _ = await arrivals.next()
            let queued = Task { try await client.send(.init(url: server.baseURL + "/counted")) }
            #expect(try await eventually { client.engine.waitingForSlot.load(ordering: .relaxed) == 1 })
            let shutdown = Task { try await client.shutdown() }
            #expect(try await eventually { client.engine.mailbox.isStopping })
            await #expect(throws: HTTPClientError.shutdown) { try await client.send(.init(url: server.baseURL + "/hello")) }
            release.yield()
            #expect(try await inFlight.value.bodyText == "released")
            #expect(try await queued.value.bodyText == "counted")
            try await shutdown.value
            try await client.shutdown()  // a second shutdown has nothing left to do
            #expect(counted.count == 1)
            await #expect(throws: HTTPClientError.shutdown) { try await client.send(.init(url: server.baseURL + "/hello")) }
        }
    }

    @Test func aStoppedMailboxRefusesCalls() async throws {
        let mailbox = CurlMailbox()
        mailbox.requestStop()
        let job = CurlJob(request: .init(url: "http://127.0.0.1:1/"), deadline: .now + .seconds(10))
        await #expect(throws: HTTPClientError.shutdown) {
            try await withCheckedThrowingContinuation { mailbox.submit(job, $0) }
        }
    }

    @Test func aClientReleasedWithoutShutdownStopsItsThread() async throws {
        weak var mailbox: CurlMailbox?
        do {
            let client = client()
            mailbox = client.engine.mailbox
        }
        // The reactor thread holds the mailbox until it exits.
        #expect(try await eventually { mailbox == nil })
    }

    @Test func transportFailuresAreTyped() async throws {
        let server = try CountingHTTPServer(answer: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        defer { server.stop() }
        let client = client()
        defer { Task { try? await client.shutdown() } }
        // An option libcurl refuses (a URL over its 8 MB input limit) fails the call, not the client.
        let huge = "http://127.0.0.1/" + String(repeating: "a", count: 8_000_001)
        await #expect { try await client.send(.init(url: huge)) } throws: {
            guard case .transport(let code, _)? = $0 as? HTTPClientError else { return false }
            return code == Int(CURLE_BAD_FUNCTION_ARGUMENT.rawValue)
        }
        // A malformed chunked body, on the same client and handle.
        await #expect { try await client.send(.init(url: server.baseURL + "/")) } throws: {
            ($0 as? HTTPClientError)?.code == "http_transport_failure"
        }
    }

    @Test func anUnknownHostIsADNSFailure() async throws {
        let client = client()
        defer { Task { try? await client.shutdown() } }
        await #expect(throws: HTTPClientError.dnsFailure(host: "relais-test.invalid")) {
            try await client.send(.init(url: "http://relais-test.invalid/"))
        }
    }

    @Test func callsStartOnTheirLoopResumeThereAndALibcurlCallWithoutTheLockIsCounted() async throws {
        try await BlockingCallChecks.shared.exclusively { try await callsStartOnTheirLoop() }
    }

    private func callsStartOnTheirLoop() async throws {
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server async throws in
            let client = client()
            defer { Task { try? await client.shutdown() } }
            let before = HTTPClient.blockingCallsOnEventLoop
            let executor = EventLoopTaskExecutor(MultiThreadedEventLoopGroup.singleton.next())
            let onLoop = try await Task(executorPreference: executor) {
                var onLoop: [Bool] = []
                for _ in 0..<5 {
                    onLoop.append(MultiThreadedEventLoopGroup.currentEventLoop != nil)
                    let response = try await client.send(.init(url: server.baseURL + "/hello"))
                    // Completed by the reactor thread, resumed on the caller's preferred executor.
                    onLoop.append(MultiThreadedEventLoopGroup.currentEventLoop != nil && response.status == 200)
                }
                return onLoop
            }.value
            #expect(onLoop == Array(repeating: true, count: 10))
            // Plain HTTP reads no file: each transfer was started by its caller, unless it found
            // the lock taken (the reactor finishing the call before), and none for another reason.
            let taken = client.engine.foundTheLockTaken.load(ordering: .relaxed)
            #expect(client.engine.startedByCallers.load(ordering: .relaxed) == 5 - taken)
            #expect(client.engine.handedToReactor.load(ordering: .relaxed) == taken)
            #expect(taken < 5)
            #expect(HTTPClient.blockingCallsOnEventLoop == before)

            // A deliberate violation: easy handles of this client, used without its lock.
            var quiet = Logger(label: "violation")
            quiet.logLevel = .critical
            let handles = CurlEasyHandles(capacity: 1, confinement: CurlConfinement(holder: client.engine.holder, logger: quiet))
            handles.checkIn(handles.checkOut())
            #expect(HTTPClient.blockingCallsOnEventLoop == before + 2)
        }
    }

    /// libcurl reads the CA bundle at a TLS connection until it has it cached: the first TLS call is
    /// started by the reactor, later ones by their callers, and those read no file (the bundle is
    /// deleted in between, and the next call, on a connection of its own, still verifies).
    @Test func theCABundleIsReadOnceOnTheReactorThenTLSCallsStartOnTheCaller() async throws {
        let certificates = try await TestCertificates.make()
        let bundle = FileManager.default.temporaryDirectory.appendingPathComponent("relais-ca-\(UUID().uuidString).pem").path
        try FileManager.default.copyItem(atPath: certificates.serverCertificate, toPath: bundle)
        defer { try? FileManager.default.removeItem(atPath: bundle) }
        try await TLSTests.withTLSServer(certificates) { port async throws in
            let client = client {
                $0.tls.caBundlePath = bundle
                $0.connectTimeout = .seconds(30)
                $0.totalTimeout = .seconds(60)
            }
            defer { Task { try? await client.shutdown() } }
            let first = try await client.send(.init(url: "https://127.0.0.1:\(port)/"))
            #expect(first.status == 200)
            #expect(client.engine.handedToReactor.load(ordering: .relaxed) == 1)
            #expect(client.engine.startedByCallers.load(ordering: .relaxed) == 0)
            try FileManager.default.removeItem(atPath: bundle)
            let second = try await client.send(.init(url: "https://127.0.0.1:\(port)/"))
            #expect(second.status == 200)
            #expect(second.newConnections == 1)
            #expect(client.engine.startedByCallers.load(ordering: .relaxed) == 1)
        }
    }

    /// While a call only the reactor may drive is in flight (a first TLS handshake, which reads
    /// the CA bundle, here one the server never answers), every call goes to the reactor: any call
    /// into libcurl may run that transfer's due steps. A scheme in capitals is HTTPS too.
    @Test func whileACallOnlyTheReactorMayDriveIsInFlightEveryCallGoesToIt() async throws {
        let silent = try SilentListener()
        try await LoopbackHTTPServer.with(router: LoopbackHTTPServer.testRouter()) { server async throws in
            let client = client {
                $0.connectTimeout = .seconds(30)
                $0.totalTimeout = .seconds(60)
            }
            defer { Task { try? await client.shutdown() } }
            let engine = client.engine
            // A call that finds the lock taken (the reactor busy) goes to the reactor whatever the
            // rule: plain calls are made until one was judged under the lock, and that one counts.
            func judgedPlainCall() async throws -> (startedHere: Bool, handedOver: Bool) {
                for _ in 0..<50 {
                    let before = (engine.startedByCallers.load(ordering: .relaxed), engine.handedToReactor.load(ordering: .relaxed))
                    let taken = engine.foundTheLockTaken.load(ordering: .relaxed)
                    #expect(try await client.send(.init(url: server.baseURL + "/hello")).bodyText == "hello")
                    guard engine.foundTheLockTaken.load(ordering: .relaxed) == taken else { continue }
                    return (engine.startedByCallers.load(ordering: .relaxed) > before.0, engine.handedToReactor.load(ordering: .relaxed) > before.1)
                }
                throw CancellationError()
            }
            let hanging = Task { try await client.send(.init(url: "HTTPS://127.0.0.1:\(silent.port)/")) }
            #expect(try await eventually { engine.reactorOnlyInFlight.load(ordering: .relaxed) == 1 })
            #expect(try await judgedPlainCall() == (startedHere: false, handedOver: true))
            hanging.cancel()
            await #expect(throws: CancellationError.self) { try await hanging.value }
            // Once it is gone, plain HTTP calls start on their caller again.
            #expect(try await eventually { engine.reactorOnlyInFlight.load(ordering: .relaxed) == 0 })
            #expect(try await judgedPlainCall() == (startedHere: true, handedOver: false))
        }
    }

    /// Through an HTTPS proxy every connection reads the proxy's CA files: every call goes to the
    /// reactor, plain HTTP ones included (here the proxy refuses the connection).
    @Test func throughAnHTTPSProxyEveryCallStartsOnTheReactor() async throws {
        let closed = try FreePort.find()
        let client = client { $0.proxy = "HTTPS://127.0.0.1:\(closed)" }
        defer { Task { try? await client.shutdown() } }
        for _ in 0..<2 {
            await #expect(throws: HTTPClientError.self) { try await client.send(.init(url: "http://127.0.0.1:\(closed)/")) }
        }
        #expect(client.engine.handedToReactor.load(ordering: .relaxed) == 2)
        #expect(client.engine.startedByCallers.load(ordering: .relaxed) == 0)
    }

    /// Without peer verification libcurl still reads the CA bundle at each handshake, and never
    /// caches it: such TLS calls always go to the reactor, the first handshake's success aside.
    @Test func withoutPeerVerificationTLSCallsAlwaysStartOnTheReactor() async throws {
        try await expectEveryTLSCallOnTheReactor(requireClientCertificate: false) { configuration, _ in
            configuration.tls.verifyPeer = false
            configuration.reuseConnections = false
        }
    }

    /// A client certificate and key are read at every TLS handshake: such calls always go to the reactor.
    @Test func withAClientCertificateTLSCallsAlwaysStartOnTheReactor() async throws {
        try await expectEveryTLSCallOnTheReactor(requireClientCertificate: true) { configuration, certificates in
            configuration.tls.caBundlePath = certificates.serverCertificate
            configuration.tls.clientCertificatePath = certificates.clientCertificate
            configuration.tls.clientKeyPath = certificates.clientKey
        }
    }

    /// Two TLS calls of a client configured by `configure`: both started by the reactor.
    private func expectEveryTLSCallOnTheReactor(
        requireClientCertificate: Bool, _ configure: @escaping (inout HTTPClientConfiguration, TestCertificates) -> Void
    ) async throws {
        let certificates = try await TestCertificates.make()
        try await TLSTests.withTLSServer(certificates, requireClientCertificate: requireClientCertificate) { port async throws in
            let client = client {
                configure(&$0, certificates)
                $0.connectTimeout = .seconds(30)
                $0.totalTimeout = .seconds(60)
            }
            defer { Task { try? await client.shutdown() } }
            for _ in 0..<2 {
                #expect(try await client.send(.init(url: "https://127.0.0.1:\(port)/")).status == 200)
            }
            #expect(client.engine.handedToReactor.load(ordering: .relaxed) == 2)
            #expect(client.engine.startedByCallers.load(ordering: .relaxed) == 0)
        }
    }
}

/// libcurl's timer as the reactor keeps it.
@Suite(.tags(.fast)) struct CurlTimerTests {
    /// A deadline libcurl dropped without saying so (it calls its timer function only when its
    /// earliest expiry changes) is asked about once due, and cleared: an idle client's reactor is
    /// not woken every millisecond for good, as it was (seen at 1 kHz with gdb on an idle relay).
    @Test func aDeadlineLibcurlNoLongerHasIsClearedNotRetriedForever() throws {
        let holder = CurlLockHolder()
        holder.enter()
        defer { holder.leave() }
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        let timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_CLOEXEC) | Int32(TFD_NONBLOCK))
        try #require(epoll >= 0 && timer >= 0)
        defer {
            close(epoll)
            close(timer)
        }
        let logger = Logger(label: "curl-timer-test")
        let before = HTTPClient.unguardedCurlCalls.load(ordering: .relaxed)
        let multi = CurlMulti(
            configuration: HTTPClientConfiguration(), logger: logger, confinement: CurlConfinement(holder: holder, logger: logger), epoll: epoll, timer: timer
        )
        multi.setUp()
        defer { multi.tearDown() }
        // libcurl asked for a timeout action now, then dropped that expiry (nothing is in flight).
        multi.setTimer(milliseconds: 0)
        #expect(multi.timerDeadline != nil)
        _ = multi.advance(onCaller: false)
        #expect(multi.timerDeadline == nil, "the reactor would wake again in a millisecond, and again")
        #expect(HTTPClient.unguardedCurlCalls.load(ordering: .relaxed) == before)
    }
}
