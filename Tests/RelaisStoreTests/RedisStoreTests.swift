import RelaisTestSupport
import Testing

@testable import RelaisStore

/// What only Redis has: restarts, outages, authentication, databases, key prefixes.
@Suite struct RedisStoreTests {
    /// Generous timeouts, as in the conformance suite: a store's first calls come while the suite
    /// starts a hundred redis-servers on two cores, and a test that is not about a timeout must
    /// fail only on a wrong answer. A test of a timeout sets its own, once its store is warm.
    private func makeStore(_ server: RedisServerProcess, _ configure: (inout RedisConfiguration) -> Void = { _ in }) throws -> RedisStore {
        var configuration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(10), poolSize: 2)
        try configuration.apply(url: server.url)
        configure(&configuration)
        return RedisStore(configuration: configuration)
    }

    @Test func nextCallAfterARedisRestartSucceeds() async throws {
        let server = try await RedisServerProcess.launch()
        let store = try makeStore(server)
        // Warm both pooled connections, so each is stale after the restart.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<16 { group.addTask { try await store.set("k\(index)", [1], ttl: nil) } }
            try await group.waitForAll()
        }
        try await server.restart()
        try await store.set("after", Array("restart".utf8), ttl: .seconds(10))
        #expect(try await store.get("after") == Array("restart".utf8))
        #expect(try await store.get("k0") == nil)  // no persistence configured: the old data is gone
        try await store.shutdown()
        server.stop()
    }

    @Test func callsFailFastWithStoreUnavailableWhileRedisIsDownThenRecover() async throws {
        let server = try await RedisServerProcess.launch()
        let store = try makeStore(server) {
            $0.connectTimeout = .seconds(2); $0.commandTimeout = .seconds(2)
        }
        try await Self.eventually { try await store.ping() }
        server.stop()
        for _ in 0..<3 {
            let start = ContinuousClock.now
            await #expect { try await store.get("k") } throws: { ($0 as? StoreError)?.code == "store_unavailable" }
            #expect(ContinuousClock.now - start < .seconds(12))  // a refused connection, not a hang (room for a loaded machine)
        }
        try await server.start()
        // Three failures in a row opened the circuit: the background probe closes it within its interval.
        try await Self.eventually { try await store.set("back", [1], ttl: nil) }
        #expect(try await store.get("back") == [1])
        try await store.shutdown()
        server.stop()
    }

    /// Redis' refusals that mean "not now" are `store_unavailable` (503 with Retry-After), not an
    /// unexpected `store_command_failed`: a master left without replicas under
    /// min-replicas-to-write (what follows a failover until the failed node is back), and a replica
    /// that lost its master. Nothing is written; the store works again once Redis can take writes.
    @Test func redisRefusalsForNowAreUnavailableAndLeaveNothingWritten() async throws {
        let master = try await RedisServerProcess.launch(extraArguments: ["--min-replicas-to-write", "1"])
        let store = try makeStore(master)
        for write in [{ try await store.set("k", [1], ttl: nil) }, { _ = try await store.setAdd("s", member: "m", ttl: .seconds(5)) }] as [() async throws -> Void] {
            await #expect { try await write() } throws: { error in
                guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
                return reason.contains("NOREPLICAS") && reason.contains("min-replicas-to-write")
            }
        }
        #expect(try await store.get("k") == nil)  // reads are still served, and nothing was written
        #expect(await master.cli(["config", "set", "min-replicas-to-write", "0"])?.hasPrefix("OK") == true)
        try await store.set("k", [2], ttl: nil)
        #expect(try await store.get("k") == [2])
        try await store.shutdown()

        // A replica whose master is gone, told not to serve stale data.
        let gone = try FreePort.find()
        let replica = try await RedisServerProcess.launch(extraArguments: ["--replicaof", "127.0.0.1", String(gone), "--replica-serve-stale-data", "no"])
        let stale = try makeStore(replica)
        await #expect { _ = try await stale.get("k") } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.contains("MASTERDOWN")
        }
        try await stale.shutdown()
        replica.stop()
        master.stop()
    }

    @Test func everyOtherErrorReplyIsACommandFailure() {
        #expect(RedisStore.refusalForNow("NOREPLICAS Not enough good replicas to write.") != nil)
        #expect(RedisStore.refusalForNow("LOADING Redis is loading the dataset in memory") != nil)
        #expect(RedisStore.refusalForNow("READONLY You can't write against a read only replica.") != nil)
        #expect(RedisStore.refusalForNow("ERR unknown command 'FOO'") == nil)
        #expect(RedisStore.refusalForNow("NOSCRIPT No matching script.") == nil)
        #expect(RedisStore.refusalForNow("LOADINGX") == nil)
    }

    @Test func aHungRedisFailsCallsWithinTheCommandTimeout() async throws {
        let server = try await RedisServerProcess.launch()
        let store = try makeStore(server) { $0.commandTimeout = .milliseconds(300) }
        try await Self.eventually { try await store.ping() }  // warm: the timeout is tested on a working connection
        server.pause()
        let start = ContinuousClock.now
        await #expect { try await store.get("k") } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.contains("timeout")
        }
        #expect(ContinuousClock.now - start < .seconds(8))  // without the command timeout, this never returns
        server.resume()
        try await Self.eventually { try await store.ping() }
        try await store.shutdown()
        server.stop()
    }

    @Test func queuedCallsBehindAHungRedisFailWithinAboutOneTimeout() async throws {
        let server = try await RedisServerProcess.launch()
        let store = try makeStore(server) {
            $0.commandTimeout = .milliseconds(400); $0.poolSize = 1
        }
        try await Self.eventually { try await store.ping() }
        server.pause()
        let start = ContinuousClock.now
        let failures = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<80 {
                group.addTask {
                    do {
                        _ = try await store.get("k\(index)")
                        return 0
                    } catch let error as StoreError {
                        return error.code == "store_unavailable" ? 1 : 0
                    }
                }
            }
            return try await group.reduce(0, +)
        }
        // One worker, eighty calls: without the queue deadline the last would wait 80 x 400 ms = 32 s.
        // The bound sits halfway, leaving room for a loaded machine while staying far below that.
        #expect(failures == 80)
        #expect(ContinuousClock.now - start < .seconds(16))
        server.resume()
        try await Self.eventually { try await store.ping() }
        try await store.shutdown()
        server.stop()
    }

    /// Retries `body` until it succeeds (an open circuit closes within one probe interval). The
    /// window is long: on a busy CI machine, a ping with a 300 ms command timeout once failed for
    /// over ten seconds; only a failing test waits it out.
    static func eventually(within limit: Duration = .seconds(60), _ body: () async throws -> Void) async throws {
        let deadline = ContinuousClock.now + limit
        while true {
            do {
                return try await body()
            } catch  where ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }

    /// One budget for all the calls of a request: against a frozen Redis the first call waits out
    /// the command timeout, and the next ones fail at once instead of waiting one timeout each.
    @Test func aRequestsCallsShareOneBudget() async throws {
        let server = try await RedisServerProcess.launch()
        let store = try makeStore(server) { $0.commandTimeout = .seconds(10) }
        try await store.ping()
        server.pause()
        let start = ContinuousClock.now
        var reasons: [String] = []
        await StoreBudget.withBudget(.seconds(1)) {
            for index in 0..<3 {
                do {
                    _ = try await store.get("k\(index)")
                } catch let error as StoreError {
                    if case .storeUnavailable(let reason) = error { reasons.append(reason) }
                } catch {}
            }
        }
        let elapsed = ContinuousClock.now - start
        #expect(reasons.count == 3)
        #expect(reasons.dropFirst().allSatisfy { $0.contains("store budget is spent") }, "\(reasons)")
        // Three command timeouts would take 30 s; one budget is 1 s, which bounds even the first
        // call's wait for a reply (the bound leaves a loaded machine 8 s of scheduling delay).
        #expect(elapsed < .seconds(9), "\(elapsed)")
        #expect(!store.isCircuitOpen)  // one real failure only
        server.resume()
        try await store.ping()
        try await store.shutdown()
        server.stop()
    }

    /// The budget counts the store's waits only: a request that first waited on something else
    /// (at `/callback`, the provider's token endpoint) longer than its whole budget still reads
    /// and writes the store afterwards.
    @Test func timeSpentOutsideTheStoreLeavesTheBudgetWhole() async throws {
        let server = try await RedisServerProcess.launch()
        let store = try makeStore(server) { $0.commandTimeout = .seconds(10) }
        try await store.set("k", [1], ttl: nil)
        // A budget of 2 s, room for a get on a loaded machine (200 ms was not always enough).
        let value = try await StoreBudget.withBudget(.seconds(2)) {
            // Stands for a provider taking 2.5 s to answer: time passes, none of it on the store.
            try await Task.sleep(for: .milliseconds(2500))
            return try await store.get("k")
        }
        #expect(value == [1])
        try await store.shutdown()
        server.stop()
    }

    /// Opening a connection counts against the budget too: against a frozen Redis that wants a
    /// password, a fresh store's first call gives up when its budget is spent, not after AUTH's
    /// command timeout; the opening goes on for the calls after it, which use it once Redis is back.
    @Test func theBudgetBoundsTheWaitForAConnection() async throws {
        let server = try await RedisServerProcess.launch(extraArguments: ["--requirepass", "secret"])
        let store = try makeStore(server) {
            $0.password = "secret"
            $0.connectTimeout = .milliseconds(500)
            // Far from the bound below, so that a machine loaded enough to stretch the budget's
            // 300 ms to seconds (6.1 s was seen beside a release build) still tells the two apart.
            $0.commandTimeout = .seconds(60)
        }
        server.pause()
        let start = ContinuousClock.now
        await #expect {
            try await StoreBudget.withBudget(.milliseconds(300)) { try await store.get("k") }
        } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.contains("store budget is spent")
        }
        // Well under AUTH's 60 s command timeout.
        #expect(ContinuousClock.now - start < .seconds(20), "\(ContinuousClock.now - start)")
        server.resume()
        try await store.set("k", [7], ttl: nil)
        #expect(try await store.get("k") == [7])
        try await store.shutdown()
        server.stop()
    }

    /// Repeated failures open the circuit: calls then fail at once, a background PING watches Redis,
    /// and the first answer closes it.
    @Test func aFrozenRedisOpensTheCircuitAndItsRecoveryClosesIt() async throws {
        let server = try await RedisServerProcess.launch()
        let store = try makeStore(server) { $0.commandTimeout = .milliseconds(400) }
        try await Self.eventually { try await store.ping() }
        server.pause()
        for index in 0..<RedisStore.breakerThreshold {
            await #expect(throws: StoreError.self) { try await store.get("k\(index)") }
        }
        #expect(store.isCircuitOpen)
        let start = ContinuousClock.now
        await #expect { try await store.get("fast") } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.hasPrefix("circuit open")
        }
        // Not a wait on Redis: no command timeout passed.
        #expect(ContinuousClock.now - start < .milliseconds(300))
        server.resume()
        try await Self.eventually { try await store.set("after", [2], ttl: nil) }
        #expect(!store.isCircuitOpen)
        #expect(try await store.get("after") == [2])
        try await store.shutdown()
        server.stop()
    }

    @Test func unreachableRedisIsUnavailableNotAHang() async throws {
        var configuration = RedisConfiguration(connectTimeout: .milliseconds(300), commandTimeout: .milliseconds(300))
        try configuration.apply(url: "redis://127.0.0.1:\(try FreePort.find())")
        let store = RedisStore(configuration: configuration)
        await #expect { try await store.ping() } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.contains("cannot connect")
        }
        try await store.shutdown()
    }

    @Test func aclUserAuthenticatesAndWrongPasswordIsUnavailable() async throws {
        let server = try await RedisServerProcess.launch(extraArguments: [
            "--user", "default", "off",
            "--user", "relais", "on", ">s3cret-pass", "~relais:*", "+@all",
        ])
        let store = try makeStore(server) {
            $0.username = "relais"; $0.password = "s3cret-pass"
        }
        try await store.set("k", [42], ttl: nil)
        #expect(try await store.get("k") == [42])
        try await store.shutdown()

        let wrong = try makeStore(server) {
            $0.username = "relais"; $0.password = "wrong"
        }
        await #expect { try await wrong.ping() } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.contains("authentication failed") && !reason.contains("wrong")
        }
        try await wrong.shutdown()
        server.stop()
    }

    @Test func passwordOnlyAuthFromTheURL() async throws {
        let server = try await RedisServerProcess.launch(extraArguments: ["--requirepass", "p@ss:word"])
        var configuration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(10))
        try configuration.apply(url: "redis://:p%40ss%3Aword@127.0.0.1:\(server.port)/0")
        #expect(configuration.password == "p@ss:word" && configuration.username == nil)
        let store = RedisStore(configuration: configuration)
        try await store.ping()
        try await store.shutdown()
        server.stop()
    }

    @Test func databaseIndexAndKeyPrefixIsolateDeployments() async throws {
        let server = try await RedisServerProcess.launch()
        let a = try makeStore(server) {
            $0.database = 1; $0.keyPrefix = "a:"
        }
        let b = try makeStore(server) {
            $0.database = 1; $0.keyPrefix = "b:"
        }
        let c = try makeStore(server) {
            $0.database = 2; $0.keyPrefix = "a:"
        }
        try await a.set("k", [1], ttl: nil)
        try await b.set("k", [2], ttl: nil)
        #expect(try await a.get("k") == [1])
        #expect(try await b.get("k") == [2])
        #expect(try await c.get("k") == nil)
        for store in [a, b, c] { try await store.shutdown() }
        server.stop()
    }

    @Test func redisURLParsing() throws {
        var configuration = RedisConfiguration()
        try configuration.apply(url: "redis://user:pw@redis.internal:6380/3")
        #expect(configuration.host == "redis.internal" && configuration.port == 6380)
        #expect(configuration.username == "user" && configuration.password == "pw" && configuration.database == 3)
        try configuration.apply(url: "redis://[::1]:7000")
        #expect(configuration.host == "::1" && configuration.port == 7000)
        #expect(configuration.tls == nil)
        try configuration.apply(url: "rediss://cache.example:6380")
        #expect(configuration.tls == RedisConfiguration.TLS() && configuration.host == "cache.example")
        configuration.tls?.caBundlePath = "/etc/ca.pem"
        try configuration.apply(url: "rediss://cache.example:6381")
        #expect(configuration.tls?.caBundlePath == "/etc/ca.pem")  // settings made before survive a new rediss URL
        try configuration.apply(url: "redis://cache.example:6379")
        #expect(configuration.tls == nil)
        #expect(throws: RedisConfiguration.URLError.unsupportedScheme("https")) { try configuration.apply(url: "https://h:1") }
        #expect(throws: RedisConfiguration.URLError.invalidPort("99999")) { try configuration.apply(url: "redis://h:99999") }
        #expect(throws: RedisConfiguration.URLError.invalidDatabase) { try configuration.apply(url: "redis://h/x") }
        #expect(throws: RedisConfiguration.URLError.missingHost) { try configuration.apply(url: "redis://:1") }
    }

    /// A socket nobody listens on fails the call as unavailable, naming the socket (never the URL's
    /// credentials), and nothing is tried over TCP.
    @Test func aMissingUnixSocketIsUnavailableAndNamed() async throws {
        var configuration = RedisConfiguration(connectTimeout: .seconds(2), commandTimeout: .seconds(2))
        let path = "/tmp/relais-no-redis-\(try FreePort.find()).sock"
        try configuration.apply(url: "unix://relais:s3cret@\(path)")
        let store = RedisStore(configuration: configuration)
        await #expect { _ = try await store.get("k") } throws: { error in
            guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
            return reason.contains("unix:\(path)") && !reason.contains("s3cret")
        }
        try await store.shutdown()
    }

    @Test func unixSocketURLParsing() throws {
        var configuration = RedisConfiguration()
        try configuration.apply(url: "rediss://cache.example:6380")
        try configuration.apply(url: "unix:///run/redis/redis.sock")
        #expect(configuration.socketPath == "/run/redis/redis.sock" && configuration.tls == nil && configuration.database == 0)
        #expect(configuration.target == "unix:/run/redis/redis.sock")
        try configuration.apply(url: "redis+unix://relais:p%40ss@/var/run/redis%20a.sock?db=4")
        #expect(configuration.socketPath == "/var/run/redis a.sock" && configuration.database == 4)
        #expect(configuration.username == "relais" && configuration.password == "p@ss")
        try configuration.apply(url: "unix://secret@/r.sock")
        #expect(configuration.password == "secret")
        // A redis:// URL afterwards goes back to TCP.
        try configuration.apply(url: "redis://h:7000")
        #expect(configuration.socketPath == nil && configuration.target == "h:7000")

        let refusals: [(String, RedisConfiguration.URLError)] = [
            ("unix://relative.sock", .invalidSocketPath("the path must be absolute")),
            ("unix://host/run/redis.sock", .invalidSocketPath("the text before the path is not user[:password]@")),
            ("unix:///r%00.sock", .invalidSocketPath("the path contains a NUL byte")),
            ("unix:///re%dis.sock", .invalidEscape),
            ("unix:///r%ff.sock", .invalidEscape),
            ("unix://u:p%4@/r.sock", .invalidEscape),
            ("redis://u:p%zz@h", .invalidEscape),
            ("unix:///run/redis/", .invalidSocketPath("the path names a directory, not a socket")),
            ("unix:///", .invalidSocketPath("the path names a directory, not a socket")),
            ("unix:///" + String(repeating: "a", count: 107), .invalidSocketPath("the path is longer than 107 bytes")),
            ("unix:///r.sock?db=1&db=2", .unsupportedQuery("db")),
            ("unix:///r.sock?password=x", .unsupportedQuery("password")),
            ("unix:///r.sock?db", .unsupportedQuery("db")),
            ("unix:///r.sock?db=x", .invalidDatabase),
        ]
        let before = configuration
        for (url, error) in refusals {
            #expect(throws: error, "\(url)") { try configuration.apply(url: url) }
        }
        // A refused URL changes nothing, not even what it had read before the refusal.
        #expect(throws: RedisConfiguration.URLError.invalidSocketPath("the path names a directory, not a socket")) {
            try configuration.apply(url: "unix://other:pw@/run/")
        }
        #expect(configuration == before)
        // An error never shows a password, whole or in part.
        for url in ["unix://:s3cret/run/redis.sock", "redis://user:s3/cret@h:1"] {
            #expect(throws: RedisConfiguration.URLError.self, "\(url)") {
                do {
                    try configuration.apply(url: url)
                } catch {
                    #expect(!"\(error)".contains("s3"), "\(error)")
                    throw error
                }
            }
        }
    }
}
