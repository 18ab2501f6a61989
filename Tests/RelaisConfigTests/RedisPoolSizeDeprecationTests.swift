import Foundation
import RelaisConfig
import RelaisTestSupport
import Testing

/// `store.redis.pool_size` (issue 35): the store runs on the event loops and has no pool; the key
/// is still accepted for one release, with a warning, so that existing configurations start.
@Suite(.tags(.fast)) struct RedisPoolSizeDeprecationTests {
    private static let examplePath: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("config/relais.example.yaml").path
    }()

    @Test func poolSizeIsAcceptedWithADeprecationWarning() async throws {
        let configuration = try await ConfigurationLoader.load(filePath: Self.examplePath, environment: ["RELAIS_STORE_REDIS_POOL_SIZE": "4"], generateKey: TestKeys.generator())
        #expect(configuration.warnings.contains { $0.hasPrefix("store.redis.pool_size: deprecated and ignored") })
    }

    @Test func withoutPoolSizeThereIsNoWarning() async throws {
        let configuration = try await ConfigurationLoader.load(filePath: Self.examplePath, environment: [:], generateKey: TestKeys.generator())
        #expect(!configuration.warnings.contains { $0.contains("pool_size") })
    }
}
