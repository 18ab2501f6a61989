import RelaisStore
import RelaisTestSupport
import Testing

/// Redis Sentinel with real processes: a master, a replica and a sentinel on loopback. The store
/// asks the sentinel for the master, survives a failover, and says clearly when no sentinel helps.
@Suite struct RedisSentinelTests {
    /// A master with one replica (linked), and a sentinel that knows both.
    private struct Deployment {
        let master: RedisServerProcess
        let replica: RedisServerProcess
        let sentinel: RedisSentinelProcess

        /// With `tls`, every process speaks only TLS: clients, replication and the sentinel.
        static func launch(withReplica: Bool = true, tls: TestCertificates? = nil) async throws -> Deployment {
            // No diskless-sync delay (5 s by default): the replica links at once.
            let master = try await RedisServerProcess.launch(extraArguments: ["--repl-diskless-sync-delay", "0"], tls: tls)
            let replica = try await RedisServerProcess.launch(extraArguments: withReplica ? ["--replicaof", "127.0.0.1", String(master.port)] : [], tls: tls)
            for _ in 0..<400 where withReplica {
                if await replica.cli(["info", "replication"])?.contains("master_link_status:up") == true { break }
                try await Task.sleep(for: .milliseconds(25))
            }
            let sentinel = try await RedisSentinelProcess.launch(monitoring: master, replicas: withReplica ? 1 : 0)
            return Deployment(master: master, replica: replica, sentinel: sentinel)
        }

        func stop() {
            sentinel.stop()
            master.stop()
            replica.stop()
        }
    }

    /// Generous timeouts: these tests are about whom the store reaches, not how fast, and their
    /// first calls come while the suite starts a hundred redis-servers on two cores.
    private func makeStore(_ configure: (inout RedisConfiguration) -> Void) -> RedisStore {
        var configuration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(10), poolSize: 2)
        configure(&configuration)
        return RedisStore(configuration: configuration)
    }

    private static func unavailable(_ error: any Error, because fragment: String) -> Bool {
        guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
        return reason.contains(fragment)
    }

    @Test(arguments: [false, true])
    func theStoreFollowsTheMasterThroughAFailover(overTLS: Bool) async throws {
        let certificates = overTLS ? try await TestCertificates.make() : nil
        let deployment = try await Deployment.launch(tls: certificates)
        defer { deployment.stop() }
        // The URL's host and port are deliberately wrong: with Sentinel only the sentinels count.
        // A dead sentinel listed first is skipped.
        let deadSentinel = try FreePort.find()
        let store = makeStore {
            $0.port = 1
            // Over TLS, the sentinels and the master are verified against the test CA.
            if let certificates { $0.tls = .init(caBundlePath: certificates.serverCertificate) }
            $0.sentinel = .init(
                masterName: deployment.sentinel.masterName,
                nodes: [
                    .init(host: "127.0.0.1", port: deadSentinel), .init(host: "127.0.0.1", port: deployment.sentinel.port),
                ])
        }
        try await store.set("before", [1], ttl: nil)
        #expect(await deployment.master.cli(["get", "relais:before"])?.hasPrefix("\u{1}") == true)  // it went to the master
        // Replication is asynchronous: let the write reach the replica before the master dies.
        for _ in 0..<200 where await deployment.replica.cli(["get", "relais:before"])?.hasPrefix("\u{1}") != true {
            try await Task.sleep(for: .milliseconds(25))
        }

        // The master dies; the sentinel promotes the replica (about a second to notice, then the election).
        deployment.master.stop(abruptly: true)
        var recovered = false
        for _ in 0..<300 {
            if (try? await store.set("after", [2], ttl: nil)) != nil {
                recovered = true
                break
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(recovered, "the store never reached the promoted replica")
        #expect(await deployment.sentinel.masterPort() == deployment.replica.port)
        #expect(try await store.get("before") == [1])  // replicated before the failover
        #expect(try await store.get("after") == [2])
        try await store.shutdown()
    }

    @Test func aPooledConnectionToADemotedMasterIsReplacedTransparently() async throws {
        let deployment = try await Deployment.launch()
        defer { deployment.stop() }
        let store = makeStore {
            $0.poolSize = 1
            $0.sentinel = .init(masterName: deployment.sentinel.masterName, nodes: [.init(host: "127.0.0.1", port: deployment.sentinel.port)])
        }
        try await store.set("k", [1], ttl: nil)  // one pooled connection, to the current master
        // A planned failover: the old master stays up but becomes a replica, so the pooled
        // connection now answers writes with READONLY.
        #expect(await deployment.sentinel.cli(["sentinel", "failover", deployment.sentinel.masterName])?.hasPrefix("OK") == true)
        for _ in 0..<300 where await deployment.sentinel.masterPort() != deployment.replica.port {
            try await Task.sleep(for: .milliseconds(50))
        }
        try #require(await deployment.sentinel.masterPort() == deployment.replica.port)
        // The sentinel demotes the old master when it next looks at it (within 10 s); do it now,
        // as it would, to keep the test short.
        _ = await deployment.master.cli(["replicaof", "127.0.0.1", String(deployment.replica.port)])
        try #require(await deployment.master.cli(["role"])?.hasPrefix("slave") == true)
        // The write is refused by the demoted node, retried once on a fresh connection to the new master.
        try await store.set("k", [2], ttl: nil)
        #expect(await deployment.replica.cli(["get", "relais:k"])?.hasPrefix("\u{2}") == true)
        try await store.shutdown()
    }

    @Test func withoutAUsefulSentinelCallsFailWithTheReasons() async throws {
        let deployment = try await Deployment.launch(withReplica: false)
        defer { deployment.stop() }
        let unknownMaster = makeStore {
            $0.sentinel = .init(masterName: "no-such-master", nodes: [.init(host: "127.0.0.1", port: deployment.sentinel.port)])
        }
        await #expect { try await unknownMaster.ping() } throws: {
            Self.unavailable($0, because: "no sentinel named a master: sentinel 127.0.0.1:\(deployment.sentinel.port): does not know the master 'no-such-master'")
        }
        try await unknownMaster.shutdown()
        let deadPort = try FreePort.find()
        let noSentinel = makeStore { $0.sentinel = .init(masterName: deployment.sentinel.masterName, nodes: [.init(host: "127.0.0.1", port: deadPort)]) }
        await #expect { try await noSentinel.ping() } throws: { Self.unavailable($0, because: "cannot connect to 127.0.0.1:\(deadPort)") }
        try await noSentinel.shutdown()
    }

    @Test func aSentinelNamingANodeThatIsNotAMasterIsRefused() async throws {
        let deployment = try await Deployment.launch()
        defer { deployment.stop() }
        // A second sentinel told to watch the replica as if it were the master: what a sentinel
        // answers for a moment during a failover.
        let confused = try await RedisSentinelProcess.launch(monitoring: deployment.replica, masterName: "confused", replicas: 0)
        defer { confused.stop() }
        let store = makeStore { $0.sentinel = .init(masterName: "confused", nodes: [.init(host: "127.0.0.1", port: confused.port)]) }
        await #expect { try await store.ping() } throws: {
            Self.unavailable($0, because: "the sentinels named 127.0.0.1:\(deployment.replica.port) as master 'confused', but it is not a master")
        }
        try await store.shutdown()
    }

    @Test func sentinelNodesParse() {
        typealias Node = RedisConfiguration.Node
        #expect(Node(parsing: "sentinel-1", defaultPort: 26379) == Node(host: "sentinel-1", port: 26379))
        #expect(Node(parsing: "10.0.0.5:26380", defaultPort: 26379) == Node(host: "10.0.0.5", port: 26380))
        #expect(Node(parsing: "[::1]:26381", defaultPort: 26379) == Node(host: "::1", port: 26381))
        #expect(Node(parsing: "[::1]", defaultPort: 26379)?.port == 26379)
        #expect(Node(parsing: "[::1]:26381", defaultPort: 26379)?.description == "[::1]:26381")
        for bad in ["", ":26379", "host:", "host:99999", "host:x", "[::1]x", "two words:1"] {
            #expect(Node(parsing: bad, defaultPort: 26379) == nil, "\(bad)")
        }
    }
}
