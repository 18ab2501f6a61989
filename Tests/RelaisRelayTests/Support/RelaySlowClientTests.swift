import Foundation
import RelaisHTTPClient
import RelaisTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension RelaySignInAndTokensChain {
    /// Clients that connect and send nothing, or trickle their request: each connection has
    /// deadlines and the number of connections a bound, so `/healthz` keeps answering and nothing
    /// leaks. The real binary (its descriptors are counted in /proc), real sockets, real time
    /// (1–2 s deadlines); the latency under this load is measured by `make bench`, not here.
    @Suite(.serialized) struct RelaySlowClientTests {
        static func relay(_ server: String) async throws -> RelaisProcess {
            try await RelaisProcess.launch("serve") { port in
                """
                server: {environment: development, port: \(port), public_base_url: "http://127.0.0.1:\(port)", \(server)}
                log: {level: error}
                store: {kind: embedded}
                """
            }
        }

        /// The 3,000 idle and 500 trickling connections, scaled down when this process's
        /// descriptor limit (raised to its hard limit) leaves less room.
        static func affordable() -> (idle: Int, trickling: Int) {
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            if limit.rlim_cur < limit.rlim_max {
                limit.rlim_cur = limit.rlim_max
                setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            }
            let used = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
            let scale = min(1.0, Double(Int(min(limit.rlim_cur, 1 << 20)) - used - 1000) / 3500)
            return (Int(3000 * scale), Int(500 * scale))
        }

        static func healthz(_ server: RelaisProcess, _ http: HTTPClient) async throws -> (Int, Duration) {
            let start = ContinuousClock.now
            let response = try await http.send(.init(url: server.baseURL + "/healthz"))
            return (response.status, ContinuousClock.now - start)
        }

        @Test func idleAndTricklingConnectionsAreCutAndHealthzKeepsAnswering() async throws {
            let (idleCount, tricklingCount) = Self.affordable()
            try #require(idleCount >= 300, "the descriptor limit leaves room for \(idleCount) idle connections only")
            let server = try await Self.relay("header_timeout: 1s, idle_timeout: 2s")
            defer { server.stop() }
            let http = HTTPClient(configuration: .init(maxConcurrentRequests: 4))
            #expect(try await Self.healthz(server, http).0 == 200)
            let baseline = try #require(server.openDescriptors)
            try await Self.hostileLoad(server, http, idle: idleCount, trickling: tricklingCount)
            // Once the clients let go too, the server's descriptors are back where they were.
            let settled = try await eventually(within: .seconds(5)) { (server.openDescriptors ?? .max) <= baseline + 5 }
            #expect(settled, "descriptors: \(server.openDescriptors ?? -1), before: \(baseline)")
            try await http.shutdown()
        }

        /// Opens the connections, trickles, checks, and lets every client socket go before it returns.
        static func hostileLoad(_ server: RelaisProcess, _ http: HTTPClient, idle idleCount: Int, trickling tricklingCount: Int) async throws {
            let connections = try await RawConnection.blocking { () -> [RawConnection] in
                (0..<(idleCount + tricklingCount)).compactMap { _ in RawConnection(port: server.port) }
            }
            #expect(connections.count == idleCount + tricklingCount)
            // The trickling ones send a request head a byte every 100 ms until the server cuts them:
            // a steady trickle must not keep a connection past the header deadline.
            let trickling = Array(connections.suffix(tricklingCount))
            let stop = Atomic<Bool>(false)
            let head = Array("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".utf8)
            let trickle = Task {
                try await RawConnection.blocking {
                    var step = 0
                    while !stop.load(ordering: .relaxed), step < 300 {
                        for connection in trickling { connection.send(String(decoding: [head[min(step, head.count - 1)]], as: UTF8.self)) }
                        step += 1
                        usleep(100_000)
                    }
                }
            }
            // Meanwhile /healthz answers on a new connection.
            let (status, latency) = try await Self.healthz(server, http)
            #expect(status == 200 && latency < .seconds(2), "\(latency) with \(connections.count) hostile connections open")

            // The server closes every one of them, about a second after accepting it.
            let allClosed = try await eventually(within: .seconds(15)) { connections.allSatisfy(\.isClosedByServer) }
            stop.store(true, ordering: .relaxed)
            try await trickle.value
            #expect(allClosed, "\(connections.filter { !$0.isClosedByServer }.count) of \(connections.count) connections are still open")
            #expect(try await Self.healthz(server, http).0 == 200)
        }

        @Test func aConnectionOverTheLimitIsClosedAtOnce() async throws {
            let server = try await Self.relay("max_connections: 20, header_timeout: 5s")
            defer { server.stop() }
            // 25 connections, one after the other: 20 stay open (19 if the launcher's readiness check
            // still holds one), the others are closed at once. Accepted connections are spread over
            // the event loops, which may count them in another order than they were opened, so which
            // ones are closed is not fixed: how many is.
            let held = try await RawConnection.blocking { () -> [RawConnection] in
                (0..<25).compactMap { _ in RawConnection(port: server.port) }
            }
            #expect(held.count == 25)
            // The server closes those over the limit as it accepts them: wait until it has.
            _ = try await eventually { held.filter(\.isClosedByServer).count >= 5 }
            let open = held.map { !$0.isClosedByServer }
            #expect((19...20).contains(open.filter { $0 }.count), "\(open)")
            // Room again once they leave (as soon as the server has seen them close).
            _ = consume held
            let http = HTTPClient(configuration: .init())
            var answered = false
            for _ in 0..<50 where !answered {
                answered = (try? await Self.healthz(server, http).0) == 200
                if !answered { try await Task.sleep(for: .milliseconds(100)) }
            }
            #expect(answered)
            try await http.shutdown()
        }

        @Test func idleKeepAliveAndStalledBodiesAreClosedAfterTheIdleTimeout() async throws {
            let server = try await Self.relay("header_timeout: 5s, idle_timeout: 1s")
            defer { server.stop() }
            let (answered, keptAliveClosed, stalledClosed) = try await RawConnection.blocking { () -> (String, Bool, Bool) in
                guard let keptAlive = RawConnection(port: server.port), let stalled = RawConnection(port: server.port) else { return ("", false, false) }
                keptAlive.send("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let answer = keptAlive.receive(timeout: .milliseconds(800))
                stalled.send("POST /token HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\nab")
                var waited = 0
                while waited < 40, !(keptAlive.isClosedByServer && stalled.isClosedByServer) {
                    usleep(100_000)
                    waited += 1
                }
                return (answer, keptAlive.isClosedByServer, stalled.isClosedByServer)
            }
            #expect(answered.hasPrefix("HTTP/1.1 200"))
            #expect(keptAliveClosed, "a kept-alive connection idle past idle_timeout stays open")
            #expect(stalledClosed, "a body stalled past idle_timeout stays open")
        }
    }
}
