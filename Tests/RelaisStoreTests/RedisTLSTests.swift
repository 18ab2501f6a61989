import Foundation
import RelaisStore
import RelaisTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `rediss://`: a real `redis-server` speaking TLS only, reached through Relais' tunnel (hiredis
/// 0.14 has no TLS). The conformance suite also runs over TLS; these are the TLS-specific cases.
@Suite struct RedisTLSTests {
    /// Generous timeouts, as in the conformance suite: a store's first calls come while the suite
    /// starts a hundred redis-servers on two cores, and a test that is not about a timeout must
    /// fail only on a wrong answer. A test of a timeout sets its own, once its store is warm.
    private func makeStore(_ server: RedisServerProcess, _ configure: (inout RedisConfiguration) -> Void = { _ in }) throws -> RedisStore {
        var configuration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(10), poolSize: 2)
        try configuration.apply(url: server.url)
        configuration.tls?.caBundlePath = server.tls?.serverCertificate
        configure(&configuration)
        return RedisStore(configuration: configuration)
    }

    private static func unavailable(_ error: any Error, because fragment: String) -> Bool {
        guard case .storeUnavailable(let reason)? = error as? StoreError else { return false }
        return reason.contains(fragment)
    }

    /// What `redis-cli` (over TLS) reports as connected clients, itself included.
    private func connectedClients(_ server: RedisServerProcess) async -> Int? {
        await server.cli(["info", "clients"])?.split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("connected_clients:") }.flatMap { Int($0.split(separator: ":")[1]) }
    }

    @Test func theServerIsVerifiedAgainstTheConfiguredCA() async throws {
        let server = try await RedisServerProcess.launch(tls: try await TestCertificates.make())
        // The system's CAs do not know the test certificate.
        let untrusted = try makeStore(server) { $0.tls?.caBundlePath = nil }
        await #expect { try await untrusted.ping() } throws: { Self.unavailable($0, because: "certificate verification failed") }
        try await untrusted.shutdown()
        // Trusted, but under another name than the certificate's.
        let misnamed = try makeStore(server) { $0.tls?.serverName = "redis.example.org" }
        await #expect { try await misnamed.ping() } throws: { Self.unavailable($0, because: "certificate verification failed: hostname mismatch") }
        try await misnamed.shutdown()
        // Development only: verification off.
        let unverified = try makeStore(server) { $0.tls = RedisConfiguration.TLS(verifyPeer: false) }
        try await unverified.ping()
        try await unverified.shutdown()
        let trusted = try makeStore(server)
        try await trusted.set("k", Array("over tls".utf8), ttl: .seconds(10))
        #expect(try await trusted.get("k") == Array("over tls".utf8))
        try await trusted.shutdown()
        server.stop()
    }

    @Test func unusableTLSFilesAndASilentServerAreNamed() async throws {
        let certificates = try await TestCertificates.make()
        let server = try await RedisServerProcess.launch(tls: certificates)
        // A CA file that holds no certificate.
        let notPEM = FileManager.default.temporaryDirectory.appendingPathComponent("relais-not-pem-\(UUID().uuidString)").path
        try "not a certificate".write(toFile: notPEM, atomically: true, encoding: .utf8)
        let badCA = try makeStore(server) { $0.tls?.caBundlePath = notPEM }
        await #expect { try await badCA.ping() } throws: { Self.unavailable($0, because: "cannot load the CA bundle") }
        try await badCA.shutdown()
        // A client certificate with another certificate's key.
        let mismatched = try makeStore(server) {
            $0.tls?.clientCertificatePath = certificates.clientCertificate
            $0.tls?.clientKeyPath = certificates.serverKey
        }
        await #expect { try await mismatched.ping() } throws: { Self.unavailable($0, because: "cannot load the client certificate and key") }
        try await mismatched.shutdown()
        server.stop()

        // A port that accepts TCP connections but never answers the TLS handshake.
        let listener = try SilentListener()
        let port = listener.port
        var configuration = RedisConfiguration(connectTimeout: .milliseconds(400), commandTimeout: .milliseconds(400))
        try configuration.apply(url: "rediss://127.0.0.1:\(port)")
        let silent = RedisStore(configuration: configuration)
        await #expect { try await silent.ping() } throws: { Self.unavailable($0, because: "handshake timed out") }
        try await silent.shutdown()
        withExtendedLifetime(listener) {}
    }

    @Test func aPlainClientIsRefusedByATLSServerAndTheReverse() async throws {
        let tlsServer = try await RedisServerProcess.launch(tls: try await TestCertificates.make())
        let plain = try makeStore(tlsServer) { $0.tls = nil }
        await #expect { try await plain.ping() } throws: { ($0 as? StoreError)?.code == "store_unavailable" }
        try await plain.shutdown()
        tlsServer.stop()

        let plainServer = try await RedisServerProcess.launch()
        var configuration = RedisConfiguration(connectTimeout: .seconds(10), commandTimeout: .seconds(10))
        try configuration.apply(url: "rediss://127.0.0.1:\(plainServer.port)")
        let tls = RedisStore(configuration: configuration)
        await #expect { try await tls.ping() } throws: { Self.unavailable($0, because: "TLS with 127.0.0.1:\(plainServer.port)") }
        try await tls.shutdown()
        plainServer.stop()
    }

    @Test func mutualTLSPresentsTheClientCertificate() async throws {
        let certificates = try await TestCertificates.make()
        let server = try await RedisServerProcess.launch(tls: certificates, requireClientCertificate: true)
        let anonymous = try makeStore(server)
        // TLS 1.3: the client's handshake completes; Redis then refuses with an alert and drops the
        // connection. The tunnel reports the TLS side's end (the alert, or the reset that follows
        // it, depending on timing), so the reason says more than "connection closed".
        await #expect { try await anonymous.ping() } throws: { Self.unavailable($0, because: "(TLS session ended: ") }
        try await anonymous.shutdown()
        let identified = try makeStore(server) {
            $0.tls?.clientCertificatePath = certificates.clientCertificate
            $0.tls?.clientKeyPath = certificates.clientKey
        }
        try await identified.set("k", [7], ttl: nil)
        #expect(try await identified.get("k") == [7])
        try await identified.shutdown()
        server.stop()
    }

    @Test func aRestartedTLSRedisIsReachedOnTheNextCall() async throws {
        let server = try await RedisServerProcess.launch(tls: try await TestCertificates.make())
        let store = try makeStore(server)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<16 { group.addTask { try await store.set("k\(index)", [1], ttl: nil) } }
            try await group.waitForAll()
        }
        try await server.restart()
        try await store.set("after", [2], ttl: nil)
        #expect(try await store.get("after") == [2])
        try await store.shutdown()
        server.stop()
    }

    @Test func aHungTLSRedisFailsWithinTheCommandTimeoutThenRecovers() async throws {
        let server = try await RedisServerProcess.launch(tls: try await TestCertificates.make())
        let store = try makeStore(server) { $0.commandTimeout = .milliseconds(300) }
        try await RedisStoreTests.eventually { try await store.ping() }  // warm: the timeout is tested on a working connection
        server.pause()
        let start = ContinuousClock.now
        await #expect { try await store.get("k") } throws: { Self.unavailable($0, because: "timeout") }
        #expect(ContinuousClock.now - start < .seconds(8))  // without the timeout through the tunnel, this never returns
        server.resume()
        try await RedisStoreTests.eventually { try await store.ping() }
        try await store.shutdown()
        server.stop()
    }

    @Test func shuttingTheStoreDownClosesItsTLSConnections() async throws {
        let server = try await RedisServerProcess.launch(tls: try await TestCertificates.make())
        let store = try makeStore(server) { $0.poolSize = 3 }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<24 { group.addTask { try await store.set("k\(index)", [1], ttl: nil) } }
            try await group.waitForAll()
        }
        let during = try #require(await connectedClients(server))
        #expect(during >= 2)  // the store's connections, plus redis-cli itself
        try await store.shutdown()
        // Each tunnel ends when hiredis closes its side; Redis then sees the TLS connection close.
        var after = during
        for _ in 0..<100 where after > 1 {
            try await Task.sleep(for: .milliseconds(50))
            after = try #require(await connectedClients(server))
        }
        #expect(after == 1)
        server.stop()
    }
}
