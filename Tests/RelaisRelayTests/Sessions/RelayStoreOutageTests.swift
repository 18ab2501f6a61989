import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisConfig
import RelaisJOSE
import RelaisRelay
import RelaisStore
import RelaisTestSupport
import Testing

/// The relay against a Redis that hangs (connections open, nothing answers).
@Suite struct RelayStoreOutageTests {
    /// One budget per request across its store calls (rate limit, refresh lock, refresh record…):
    /// a 503 after about one `store.request_budget`, not one command timeout per call.
    @Test func aRequestToAFrozenRedisWaitsOneBudget() async throws {
        let redis = try await RedisServerProcess.launch()
        defer { redis.stop() }
        var redisConfiguration = RedisConfiguration(connectTimeout: .seconds(1), commandTimeout: .seconds(10), poolSize: 2)
        try redisConfiguration.apply(url: redis.url)
        let store = RedisStore(configuration: redisConfiguration)
        let fixture = RelayRouteTests.Fixture({ $0.store.requestBudget = .seconds(1) }, serving: { _ in store })
        try await fixture.test { client in
            redis.pause()
            defer { redis.resume() }
            let start = ContinuousClock.now
            let response = try await client.execute(
                uri: "/token", method: .post, headers: RelayRouteTests.formHeaders,
                body: RelayRouteTests.form([("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", "some-token")])
            )
            let elapsed = ContinuousClock.now - start
            #expect(response.status == .serviceUnavailable)
            #expect(RelayRouteTests.json(response)["error"] == .string("temporarily_unavailable"))
            // Its calls waiting out the 10 s command timeout each would take 20 s or more (seen with a
            // 2 s timeout: 6.1 s without the budget, 1.1 s with it). The bound leaves a busy machine
            // 8 s of scheduling delay: with every test and a compiler on 2 cores, 6.7 s was seen once,
            // the test process's concurrency threads being held by other tests' blocking waits.
            #expect(elapsed < .seconds(9), "\(elapsed)")
        }
        try await store.shutdown()
    }
}

/// A production start-up says when Redis would lose the sessions on a restart.
@Suite struct RedisPersistenceWarningTests {
    @Test(
        arguments: [
            (["--appendonly", "yes"], nil),
            (
                [],
                "Redis runs without its append-only file (appendonly no) and without RDB snapshots: a Redis restart signs every user out; set appendonly yes (docs/operations.md)"
            ),
            (
                ["--save", "900 1"],
                "Redis runs without its append-only file (appendonly no): a Redis restart loses the sessions opened since its last RDB snapshot (save 900 1); set appendonly yes (docs/operations.md)"
            ),
        ] as [([String], String?)])
    func theWarningFollowsRedisPersistence(arguments: [String], expected: String?) async throws {
        let redis = try await RedisServerProcess.launch(extraArguments: arguments)
        defer { redis.stop() }
        var configuration = RedisConfiguration()
        try configuration.apply(url: redis.url)
        let store = RedisStore(configuration: configuration)
        #expect(await RelayRunner.persistenceWarning(store) == expected)
        #expect(await RelayRunner.persistenceWarning(EmbeddedStore()) == nil)
        try await store.shutdown()
    }
}
