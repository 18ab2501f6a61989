import Foundation
import RelaisClock
import RelaisTestSupport
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

    /// A device whose clock is off by more than Relais' window for a proof's `iat` (5 s ahead,
    /// 60 s back): the first refusal names `dpop_iat` (or `jwt_iat`), the client takes Relais'
    /// clock from that answer's `Date` header, and every proof from then on is on time.
    @Test(arguments: [30.0, -90.0])
    func aDeviceClockFarOffIsCorrectedFromRelaisAnswer(skew: TimeInterval) async throws {
        let harness = try await KitHarness.launch()
        let transport = RelayClockDates(harness.clock)
        let client = harness.client("secure", transport: transport, clockSkew: skew)
        try await client.signIn()
        #expect(try await client.userinfo().isEmpty == false)
        try await client.refresh()
        // One refusal taught it, on the first proof; none after.
        let refusals = transport.errors.filter { $0 == "invalid_dpop_proof" || $0 == "invalid_client_attestation" }
        #expect(refusals.count == 1, "\(transport.errors)")
    }

    @Test(.tags(.fast)) func relaisDateHeaderIsRead() {
        #expect(RelayClock.parse("Sun, 06 Nov 1994 08:49:37 GMT") == Date(timeIntervalSince1970: 784_111_777))
        for junk in ["", "Sun, 06 Nov 1994 08:49:37 CET", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT"] {
            #expect(RelayClock.parse(junk) == nil, "\(junk)")
        }
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

/// Answers dated by the harness's manual clock, the one its Relais checks proofs against: a real
/// Relais dates its answers (Hummingbird, from the machine's clock) by the clock it checks with.
final class RelayClockDates: CountingTransport, @unchecked Sendable {
    private let clock: ManualClock

    init(_ clock: ManualClock) { self.clock = clock }

    override func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var response = try await super.send(request)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        response.headers.removeAll { $0.name.lowercased() == "date" }
        response.headers.append((name: "Date", value: formatter.string(from: Date(timeIntervalSince1970: clock.now))))
        return response
    }
}
