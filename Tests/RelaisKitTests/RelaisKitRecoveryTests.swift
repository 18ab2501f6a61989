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

    /// Tokens refreshed while the storage was locked are the live ones: `restore()` at unlock (as
    /// docs/client.md asks) writes them, and never reads back the stored, rotated-out ones.
    @Test func restoreAfterUnlockKeepsTokensRefreshedWhileLocked() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let client = harness.client("plain", storage: storage)
        try await client.signIn()
        storage.isLocked = true
        harness.clock.advance(by: .seconds(6 * 60))
        #expect(try await client.userinfo().isEmpty == false)
        storage.isLocked = false
        try await client.restore()
        harness.clock.advance(by: .seconds(45))  // past the rotated token's grace
        try await client.refresh()
        #expect(await client.state.session != nil)
    }

    /// A write that fails for another reason than a lock (a full disk, another process of the app
    /// writing the same item) after a refresh keeps the new tokens too, and writes them at the next call.
    @Test func tokensKeptWhenTheirWriteFailsAfterARefresh() async throws {
        let harness = try await KitHarness.launch()
        let storage = FailingWrites()
        let client = harness.client("plain", storage: storage)
        try await client.signIn()
        harness.clock.advance(by: .seconds(6 * 60))
        storage.failNextSessionWrite = true
        #expect(try await client.userinfo().isEmpty == false)
        #expect(!storage.failNextSessionWrite)  // the write was tried, and failed
        _ = try await client.status()  // the next call writes them
        harness.clock.advance(by: .seconds(45))
        let restarted = harness.client("plain", storage: storage)
        try await restarted.refresh()
        #expect(await restarted.state.session != nil)
    }

    /// A refresh still on its way when the person signs out is dropped: nothing is written back,
    /// and the client stays signed out.
    @Test func aRefreshAnsweredAfterASignOutIsDropped() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        let transport = HeldRefreshes()
        let client = harness.client("plain", storage: storage, transport: transport)
        try await client.signIn()
        let refreshing = Task { try await client.refresh() }
        await transport.refreshArrived()
        try await client.signOut()
        transport.release()
        await #expect(throws: RelaisKitError.self) { try await refreshing.value }
        #expect(try storage.read("plain.session") == nil)
        #expect(await client.state == .signedOut)
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

/// A storage whose next write of the session fails once, as a full disk or a Keychain write racing
/// another process of the app would.
final class FailingWrites: SecureStorage, @unchecked Sendable {
    private let inner = MemoryStorage()
    private let lock = NSLock()
    private var failing = false

    var failNextSessionWrite: Bool {
        get { lock.withLock { failing } }
        set { lock.withLock { failing = newValue } }
    }

    func read(_ key: String) throws -> Data? { try inner.read(key) }
    func delete(_ key: String) throws { try inner.delete(key) }

    func write(_ key: String, _ value: Data) throws {
        let fail = lock.withLock {
            defer { if key.hasSuffix(".session") { failing = false } }
            return failing && key.hasSuffix(".session")
        }
        if fail { throw RelaisKitError(.storageFailed, "the disk is full") }
        try inner.write(key, value)
    }
}

/// Holds each refresh's answer until ``release()``: a refresh still on its way.
final class HeldRefreshes: CountingTransport, @unchecked Sendable {
    private let (arrivals, arrival) = AsyncStream.makeStream(of: Void.self)
    private let (releases, releaser) = AsyncStream.makeStream(of: Void.self)

    override func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        let response = try await super.send(request)
        guard String(decoding: request.body ?? Data(), as: UTF8.self).contains("grant_type=refresh_token") else { return response }
        arrival.yield()
        for await _ in releases { break }
        return response
    }

    func refreshArrived() async { for await _ in arrivals { return } }
    func release() { releaser.yield() }
}
