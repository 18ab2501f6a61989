import Logging
import NIOCore
import NIOPosix
import RelaisServer
import RelaisTestSupport
import Testing

@testable import RelaisStore

/// The store on NIO's event loops: one connection per loop and server, calls pipelined on it, a
/// connection closed when a reply is late, and reconnection after Redis went away. Each test
/// runs its code on a group of its own, whose stalls (process launches) touch no other test.
@Suite struct RedisEventLoopTests {
    private func configuration(_ server: RedisServerProcess, commandTimeout: Duration = .seconds(10)) throws -> RedisConfiguration {
        var configuration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: commandTimeout)
        try configuration.apply(url: server.url)
        return configuration
    }

    private func connectedClients(_ server: RedisServerProcess) async -> Int? {
        await server.cli(["info", "clients"])?.split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("connected_clients:") }.flatMap { Int($0.split(separator: ":")[1]) }
    }

    /// 200 concurrent GETs from tasks on one loop share its one connection, and each gets the
    /// value of its own key.
    @Test func concurrentCallsOnOneLoopArePipelinedOnOneConnection() async throws {
        let server = try await RedisServerProcess.launch()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let store = RedisStore(configuration: try configuration(server), eventLoopGroup: group)
        let executor = EventLoopTaskExecutor(group.next())
        let mismatches = try await withTaskExecutorPreference(executor) {
            for index in 0..<200 { try await store.set("key\(index)", Array("value \(index)".utf8), ttl: .seconds(60)) }
            return try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<200 {
                    group.addTask { try await store.get("key\(index)") == Array("value \(index)".utf8) ? 0 : 1 }
                }
                return try await group.reduce(0, +)
            }
        }
        #expect(mismatches == 0)
        #expect(await connectedClients(server) == 2)  // the store's one connection, and redis-cli
        try await store.shutdown()
        try await group.shutdownGracefully()
        server.stop()
    }

    /// A node on a loop of its own, against a fresh redis-server: `body` runs on that loop with the
    /// node and its connection's client id (`CLIENT ID` asked once: a later answer tells whether
    /// the connection is the same).
    private func withNode(_ body: (RedisNode, _ clientID: @Sendable () async throws -> [RedisReply]) async throws -> Void) async throws {
        let server = try await RedisServerProcess.launch()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let node = RedisNode(connector: RedisConnector(configuration: try configuration(server)), group: group, logger: .init(label: "test"))
        try await withTaskExecutorPreference(EventLoopTaskExecutor(group.next())) {
            try await body(node) { try await node.run([[Array("CLIENT".utf8), Array("ID".utf8)]], deadline: ContinuousClock.now + .seconds(10)) }
        }
        try await node.shutdown()
        try await group.shutdownGracefully()
        server.stop()
    }

    /// A command with no reply within the command timeout fails, closes its connection (with what
    /// was pipelined behind it), and the next call opens a new one.
    @Test func aPassedCommandTimeoutClosesTheConnectionAndTheNextCallSucceeds() async throws {
        try await withNode { node, clientID in
            let first = try await clientID()
            // BLPOP waits 5 s for a list that never fills: past a 200 ms command timeout.
            async let blocked = node.run([[Array("BLPOP".utf8), Array("never".utf8), Array("5".utf8)]], deadline: ContinuousClock.now + .milliseconds(200))
            async let behind = node.run([[Array("GET".utf8), Array("k".utf8)]], deadline: ContinuousClock.now + .seconds(10))
            var outcomes: [Result<[RedisReply], any Error>] = []
            do { outcomes.append(.success(try await blocked)) } catch { outcomes.append(.failure(error)) }
            do { outcomes.append(.success(try await behind)) } catch { outcomes.append(.failure(error)) }
            for outcome in outcomes {
                guard case .failure(StoreError.storeUnavailable(let reason)) = outcome else {
                    Issue.record("expected store_unavailable, got \(outcome)")
                    continue
                }
                #expect(reason.contains("no reply within the command timeout"))
            }
            #expect(try await clientID() != first)  // a new connection
        }
    }

    /// A caller that gives up before the command timeout (its request's store budget nearly
    /// spent) fails alone: the calls pipelined with it on the connection get their own replies,
    /// the late reply to its command is read and dropped, and the connection stays.
    @Test func aCallersShortDeadlineFailsItAloneAndTheConnectionStays() async throws {
        try await withNode { node, clientID in
            let first = try await clientID()
            // BLPOP waits 1 s for a list that never fills: past its caller's 200 ms, within the 10 s timeout.
            async let blocked = node.run(
                [[Array("BLPOP".utf8), Array("never".utf8), Array("1".utf8)]], deadline: ContinuousClock.now + .seconds(10), givesUpAt: ContinuousClock.now + .milliseconds(200))
            async let behind = node.run([[Array("SET".utf8), Array("k".utf8), Array("v".utf8)]], deadline: ContinuousClock.now + .seconds(10))
            var reason: String?
            do { _ = try await blocked } catch StoreError.storeUnavailable(let why) { reason = why }
            #expect(reason?.contains("store budget") == true, "\(reason ?? "no failure")")
            #expect(try await behind == [.status("OK")])
            #expect(try await node.run([[Array("GET".utf8), Array("k".utf8)]], deadline: ContinuousClock.now + .seconds(10)) == [.string(Array("v".utf8))])
            #expect(try await clientID() == first)  // the same connection
            #expect(!node.isCircuitOpen)
        }
    }

    /// A connection Redis closed (a restart, a client kill) is replaced on the next call.
    @Test func theNodeReconnectsAfterRedisRestartsOrDropsItsConnection() async throws {
        let server = try await RedisServerProcess.launch()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let store = RedisStore(configuration: try configuration(server), eventLoopGroup: group)
        try await withTaskExecutorPreference(EventLoopTaskExecutor(group.next())) {
            try await store.set("a", [1], ttl: nil)
            try await server.restart()
            try await store.set("b", [2], ttl: nil)
            #expect(try await store.get("b") == [2])
            _ = await server.cli(["client", "kill", "type", "normal", "skipme", "yes"])
            #expect(try await store.get("b") == [2])
        }
        try await store.shutdown()
        try await group.shutdownGracefully()
        server.stop()
    }

    /// Calls from a task on no event loop, or on another group's loop, are served too.
    @Test func callsOffTheGroupsLoopsAreServed() async throws {
        let server = try await RedisServerProcess.launch()
        let store = RedisStore(configuration: try configuration(server))
        try await store.set("k", [1], ttl: nil)
        let other = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let value = try await withTaskExecutorPreference(EventLoopTaskExecutor(other.next())) { try await store.get("k") }
        #expect(value == [1])
        try await store.shutdown()
        try await other.shutdownGracefully()
        server.stop()
    }

    /// A server that answers READONLY is asked again once on a fresh connection (after a
    /// failover the new one reaches the master); a replica that stays one is store_unavailable.
    @Test func aReplicaThatStaysOneIsUnavailableAfterOneRetry() async throws {
        let master = try await RedisServerProcess.launch()
        let replica = try await RedisServerProcess.launch(extraArguments: ["--replicaof", "127.0.0.1", String(master.port)])
        let store = RedisStore(configuration: try configuration(replica))
        #expect(try await store.get("k") == nil)  // reads are served
        await #expect {
            try await store.set("k", [1], ttl: nil)
        } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.contains("read-only replica")
        }
        try await store.shutdown()
        replica.stop()
        master.stop()
    }

    @Test func callsAfterShutdownFailWithShutdown() async throws {
        let server = try await RedisServerProcess.launch()
        let node = RedisNode(connector: RedisConnector(configuration: try configuration(server)), logger: .init(label: "test"))
        _ = try await node.run([[Array("PING".utf8)]], deadline: ContinuousClock.now + .seconds(10))
        try await node.shutdown()
        await #expect(throws: StoreError.shutdown) { try await node.run([[Array("PING".utf8)]], deadline: ContinuousClock.now + .seconds(10)) }
        server.stop()
    }
}

/// Blocking calls never run on an event loop: the counter stays still through the store contract
/// run from a loop, and moves when a blocking call is made on one on purpose.
/// Serialized: the second test moves the process-wide counter the first watches.
@Suite(.serialized) struct BlockingCallCheckTests {
    @Test func theStoreContractRunFromAnEventLoopMakesNoBlockingCall() async throws {
        try await BlockingCallChecks.shared.exclusively { try await storeContractFromAnEventLoop() }
    }

    private func storeContractFromAnEventLoop() async throws {
        let before = RedisStore.blockingCallsOnEventLoop
        // A loop of its own: the test's process launches must not stall the stores' loops.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        try await withTaskExecutorPreference(EventLoopTaskExecutor(group.next())) {
            // One kind at a time, the cluster last: beside the suite's own run (which starts every
            // case at once), fewer processes spawn together on a two-core machine.
            for kind in [StoreKind.redis, .redisTLS, .redisUnix, .redisCluster] {
                try await StoreConformanceTests().wholeContract(kind: kind)
            }
        }
        try await group.shutdownGracefully()
        #expect(RedisStore.blockingCallsOnEventLoop == before)
    }

    @Test func aBlockingCallOnAnEventLoopIsCounted() async throws {
        try await BlockingCallChecks.shared.exclusively { try await blockingCallOnAnEventLoop() }
    }

    private func blockingCallOnAnEventLoop() async throws {
        let port = try FreePort.find()
        let tls = RedisConfiguration.TLS()
        let before = RedisStore.blockingCallsOnEventLoop
        // The TLS tunnel's blocking connect (refused at once here): off the loops, not counted.
        _ = try? RedisTLSTunnel.open(host: "127.0.0.1", port: port, tls: tls, connectTimeout: .milliseconds(300))
        #expect(RedisStore.blockingCallsOnEventLoop == before)
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        try await group.next().submit {
            _ = try? RedisTLSTunnel.open(host: "127.0.0.1", port: port, tls: tls, connectTimeout: .milliseconds(300))
        }.get()
        try await group.shutdownGracefully()
        #expect(RedisStore.blockingCallsOnEventLoop == before + 1)
    }
}
