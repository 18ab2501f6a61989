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

    /// A step-up the person cancels keeps the session, even when a call refreshed it while the
    /// browser was open (a sign-in at FranceConnect+ easily outlasts an access token): the refresh
    /// took the state back to signed in, and a cancellation keeps it there.
    @Test func aStepUpCancelledAfterABackgroundRefreshKeepsTheSession() async throws {
        let harness = try await KitHarness.launch()
        let held = ClientBox()
        // A session first, signed in by one client; the step-up by another on the same storage,
        // whose person cancels at the provider.
        let storage = MemoryStorage()
        let signedIn = harness.client("plain", storage: storage)
        try await signedIn.signIn()
        let stepping = harness.client("plain", storage: storage, identity: nil) {
            harness.clock.advance(by: .seconds(6 * 60))
            _ = try await held.client?.userinfo()
        }
        held.client = stepping
        _ = try await stepping.restore()
        let before = try #require(try storage.decode(TokenRecord.self, "plain.session"))
        await #expect(throws: RelaisKitError.self) { try await stepping.signIn(acr: "eidas2") }
        // The call made while the browser was open refreshed the session.
        #expect(try storage.decode(TokenRecord.self, "plain.session")?.refreshToken != before.refreshToken)
        guard case .signedIn = await stepping.state else {
            Issue.record("the session was held, and is: \(await stepping.state)")
            return
        }
        #expect(try await stepping.userinfo().isEmpty == false)
    }

    /// An error that is not the library's (an app's own transport failing) ends a refresh like a
    /// network failure: it comes out as `network`, and the state goes back to signed in (the
    /// session is kept), never left refreshing.
    @Test func aTransportErrorLeavesNoStateStuck() async throws {
        let harness = try await KitHarness.launch()
        let storage = MemoryStorage()
        try await harness.client("plain", storage: storage).signIn()
        let client = harness.client("plain", storage: storage, transport: FailingTokenRequests())
        _ = try await client.restore()
        let error = await #expect(throws: RelaisKitError.self) { try await client.refresh() }
        #expect(error?.code == .network)
        guard case .signedIn = await client.state else {
            Issue.record("the state is \(await client.state)")
            return
        }
    }

    /// An instance key that cannot be read now (a locked device) is the storage's state: the
    /// DPoP-bound session is kept, not ended as a lost key.
    @Test func aLockedInstanceKeyKeepsTheSession() async throws {
        let harness = try await KitHarness.launch()
        let storage = LockedKey()
        try await harness.client("secure", storage: storage).signIn()
        storage.keyLocked = true
        let client = harness.client("secure", storage: storage)
        await #expect(throws: RelaisKitError.self) { try await client.restore() }
        #expect(await client.state == .storageLocked)
        #expect(try storage.read("secure.session") != nil)
        storage.keyLocked = false
        #expect(try await client.userinfo().isEmpty == false)
    }

    /// The loopback listener takes its redirect path exactly (RFC 8252 §7.3): another path that
    /// starts the same, sent first by any local page or process, is answered 404 and the
    /// listener goes on waiting for the real redirect.
    @Test(.tags(.fast)) func theLoopbackListenerTakesItsPathExactly() async throws {
        let (opened, browser) = AsyncStream<Void>.makeStream()
        let listener = try LoopbackRedirectListener(path: "/cb") { _ in browser.yield() }
        let base = "http://127.0.0.1:\(listener.port)"
        async let redirect = listener.run(authorizationURL: URL(string: "https://relais.example/authorize")!)
        // Requests come once the browser is open, as they would: not before the listener runs.
        for await _ in opened { break }
        var statuses: [String] = []
        for path in ["/cbX?code=evil", "/cb/x?code=evil", "/c", "/cb?code=real&state=s"] {
            // A raw request, a connection each, as a browser or a local process would send it.
            let answer = try await RawConnection.blocking { [port = listener.port] in
                guard let connection = RawConnection(port: port) else { return "refused" }
                connection.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return connection.receive(timeout: .seconds(30))
            }
            statuses.append(String(answer.prefix { $0 != "\r\n" }))
        }
        #expect(statuses == ["HTTP/1.1 404 Not Found", "HTTP/1.1 404 Not Found", "HTTP/1.1 404 Not Found", "HTTP/1.1 200 OK"])
        #expect(try await redirect.absoluteString == base + "/cb?code=real&state=s")
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

final class ClientBox: @unchecked Sendable {
    var client: RelaisClient?
}

/// Token requests fail in the app's own transport, as a URLSession error would.
final class FailingTokenRequests: CountingTransport, @unchecked Sendable {
    struct Offline: Error {}

    override func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        if request.url.path.hasSuffix("/token") { throw Offline() }
        return try await super.send(request)
    }
}

/// A storage whose instance key alone cannot be read while `keyLocked`, as a key kept with a
/// stricter protection than the tokens would be before the device is unlocked.
final class LockedKey: SecureStorage, @unchecked Sendable {
    private let inner = MemoryStorage()
    private let lock = NSLock()
    private var locked = false

    var keyLocked: Bool {
        get { lock.withLock { locked } }
        set { lock.withLock { locked = newValue } }
    }

    func read(_ key: String) throws -> Data? {
        if key.hasSuffix(".instance-key"), keyLocked { throw RelaisKitError(.storageLocked, "the key is locked") }
        return try inner.read(key)
    }

    func write(_ key: String, _ value: Data) throws { try inner.write(key, value) }
    func delete(_ key: String) throws { try inner.delete(key) }
}
