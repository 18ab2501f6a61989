import Foundation
import RelaisClock
import Testing

@testable import RelaisKit

/// What the client recovers from without the person: a storage that locks in the middle of a
/// refresh, and a Client Attestation JWT that Relais says has expired before the app thought so.
@Suite struct RelaisKitRecoveryTests {
    @Test func tokensRefreshedWhileTheStorageIsLockedAreWrittenAfterwards() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let client = harness.client("plain", storage: storage)
        try await client.signIn()
        let before = try #require(try storage.decode(TokenRecord.self, "plain.session"))
        // The device locks; the access token expires; a call refreshes (the rotated refresh token
        // cannot be written) and succeeds.
        storage.isLocked = true
        harness.clock.advance(by: .seconds(6 * 60))
        #expect(try await client.userinfo().isEmpty == false)
        #expect(await client.state.session != nil)
        storage.isLocked = false
        #expect(try storage.decode(TokenRecord.self, "plain.session") == before)
        // The next call writes the live tokens first.
        #expect(try await client.userinfo().isEmpty == false)
        let after = try #require(try storage.decode(TokenRecord.self, "plain.session"))
        #expect(after.refreshToken != before.refreshToken)
        // So that the app, started again later, refreshes with the live token, not a replayed one.
        harness.clock.advance(by: .seconds(45))
        let restarted = harness.client("plain", storage: storage)
        try await restarted.refresh()
        #expect(await restarted.state.session?.sessionID == before.sessionID)
    }

    @Test func useFreshAttestationAttestsAgainOnce() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        try await harness.client("secure", storage: storage).signIn()
        // The app's clock was wrong when it stored the attestation: it believes it good for a day.
        var stored = try #require(try storage.decode(StoredAttestation.self, "secure.client-attestation"))
        stored.expiresAt = Date(timeIntervalSince1970: harness.clock.now + 86_400)
        try storage.encode(stored, "secure.client-attestation")
        harness.clock.advance(by: .seconds(3 * 60))  // past the app's client_attestation_lifetime (2m)
        let transport = CountingTransport()
        let client = harness.client("secure", storage: storage, transport: transport)
        try await client.refresh()
        #expect(transport.errors.contains("use_fresh_attestation"))
        #expect(transport.requests.filter { $0.url.path == "/attest/dev" }.count == 1)
        #expect(try storage.decode(StoredAttestation.self, "secure.client-attestation")?.jwt != stored.jwt)
    }
}
