import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisRelay

/// Redeeming a code against a store that pauses or fails between any two calls.
@Suite struct CodeRedemptionTests {
    static func signIn(_ fixture: RelayRouteTests.Fixture) async throws -> [(String, String)] {
        let verifier = SecureRandom.token(bits: 256)
        let app = AppRequest(
            clientID: "app", redirectURI: RelayRouteTests.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"],
            nonce: nil, providerID: "fc", acr: "eidas1", forceLogin: false
        )
        let code = try await RelayRouteTests.mintCode(fixture, app: app, acr: "eidas1")
        return [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", RelayRouteTests.redirect), ("code_verifier", verifier)]
    }

    /// A redemption whose `failingCall`-th store call fails (as `.first`): answered, or 503 and
    /// then answered on the app's retry. The first status, and the tokens in the end.
    static func redeem(_ client: any TestClientProtocol, _ fields: [(String, String)], failingCall call: Int) async throws -> (HTTPResponse.Status, [String: JSONValue]) {
        let first = try await InterposedStore.$caller.withValue(.first) {
            try await client.execute(uri: "/token", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form(fields))
        }
        guard first.status != .ok else { return (first.status, RelayRouteTests.json(first)) }
        #expect(first.status == .serviceUnavailable, "store call \(call) failed: \(RelayRouteTests.json(first))")
        let retry = try await client.execute(uri: "/token", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form(fields))
        #expect(retry.status == .ok, "store call \(call) failed, then the retry: \(RelayRouteTests.json(retry))")
        return (first.status, RelayRouteTests.json(retry))
    }

    /// A code sealed by an instance whose `code_lifetime` was longer (before a reload lowered it,
    /// or another instance of a rollout) stays single use for its whole life: its used-mark lives
    /// as long as the code does, not this instance's lifetime.
    @Test func aCodeSealedForLongerThanTodaysLifetimeIsStillUsedOnce() async throws {
        let fixture = RelayRouteTests.Fixture()
        let verifier = SecureRandom.token(bits: 256)
        let app = AppRequest(
            clientID: "app", redirectURI: RelayRouteTests.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"],
            nonce: nil, providerID: "fc", acr: "eidas1", forceLogin: false
        )
        let code = try await RelayRouteTests.mintCode(fixture, app: app, acr: "eidas1", lifetime: 3600)
        let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", RelayRouteTests.redirect), ("code_verifier", verifier)]
        try await fixture.test { client in
            let first = try await client.execute(uri: "/token", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form(fields))
            let refresh = try #require(RelayRouteTests.json(first)["refresh_token"]?.stringValue)
            let revoked = try await client.execute(
                uri: "/revoke", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form([("token", refresh), ("client_id", "app")]))
            #expect(revoked.status == .ok)
            fixture.clock.advance(by: .seconds(400))  // past this instance's 60 s and five minutes
            let again = try await client.execute(uri: "/token", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form(fields))
            #expect(again.status == .badRequest && RelayRouteTests.json(again)["error"] == .string("invalid_grant"))
        }
    }

    /// A store failure at any point of a redemption leaves the code redeemable (503, retry) or the
    /// session whole: never a consumed code without its session, nor a session without its refresh token.
    @Test(.tags(.fast)) func aStoreFailureAtAnyStepLeavesNothingHalfMade() async throws {
        var failingCall = 1
        while true {
            let gate = InterposedStore.Gate()
            let fixture = RelayRouteTests.Fixture(serving: { InterposedStore(base: $0, failFirstAt: failingCall, gate: gate) })
            let fields = try await Self.signIn(fixture)
            let call = failingCall
            try await fixture.test { client in
                let (_, tokens) = try await Self.redeem(client, fields, failingCall: call)
                guard let refresh = tokens["refresh_token"]?.stringValue else { return }
                let rotated = try await client.execute(
                    uri: "/token", method: .post, headers: RelayRouteTests.formHeaders,
                    body: RelayRouteTests.form([("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", refresh)])
                )
                #expect(rotated.status == .ok, "store call \(call) failed: the refresh token does not work")
            }
            // Past the first redemption's last store call: every call has failed once.
            if gate.calls.withLock({ $0 }) < failingCall { break }
            failingCall += 1
        }
        #expect(failingCall >= 4)
    }

    /// Two redemptions of one code, in every interleaving of their store calls: exactly one gets
    /// tokens and the session it opened ends (RFC 6749 §4.1.2).
    @Test func aCodeRedeemedTwiceConcurrentlyLeavesNoLiveSession() async throws {
        var pausePoint = 1
        while true {
            let paused = InterposedStore.Gate()
            let fixture = RelayRouteTests.Fixture(serving: { InterposedStore(base: $0, pauseFirstAfter: pausePoint, gate: paused) })
            let fields = try await Self.signIn(fixture)

            let firstRanToTheEnd = Mutex(false)
            let point = pausePoint
            try await fixture.test { client in
                let redeem: @Sendable () async throws -> TestResponse = {
                    try await client.execute(uri: "/token", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form(fields))
                }
                // The first redemption stops after its n-th store call; the second runs whole; then the first goes on.
                async let first = InterposedStore.$caller.withValue(.first) {
                    let response = try await redeem()
                    paused.finished()
                    return response
                }
                let stoppedEarly = await paused.waitUntilPausedOrDone()
                let second = try await InterposedStore.$caller.withValue(.second) { try await redeem() }
                paused.release()
                let responses = [try await first, second]
                firstRanToTheEnd.withLock { $0 = !stoppedEarly }

                let winners = responses.filter { $0.status == .ok }
                #expect(winners.count == 1, "pause after store call \(point): \(responses.map(\.status))")
                for loser in responses where loser.status != .ok {
                    #expect(RelayRouteTests.json(loser)["error"] == .string("invalid_grant"))
                }
                guard let winner = winners.first, let access = RelayRouteTests.json(winner)["access_token"]?.stringValue,
                    let sid = JSONValue.object(from: try JWS.parse(access).payload)?["sid"]?.stringValue
                else { return }
                #expect(try await fixture.sessions.session(sid) == nil, "pause after store call \(point): the session stayed open")
                let userinfo = try await client.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer \(access)"])
                #expect(userinfo.status == .unauthorized)
            }
            if firstRanToTheEnd.withLock({ $0 }) { break }
            pausePoint += 1
        }
        // The first redemption makes a handful of store calls: each was a pause point.
        #expect(pausePoint >= 3)
    }
}

/// The embedded store, interposed: the request marked `.first` stops after its n-th store call
/// until the test releases it, or its n-th store call fails as if Redis were unreachable; or every
/// compare-and-set finds the value changed (another instance keeps winning).
final class InterposedStore: KeyValueStore {
    enum Caller: Sendable { case first, second }
    @TaskLocal static var caller: Caller?

    /// Where the first redemption stands: running, paused (waiting for `release`) or done.
    final class Gate: Sendable {
        private struct State {
            var paused = false
            var released = false
            var watcher: CheckedContinuation<Bool, Never>?
            var sleeper: CheckedContinuation<Void, Never>?
        }
        private let state = Mutex(State())
        /// Store calls the first redemption made.
        let calls = Mutex(0)

        /// True when the first redemption paused; false when it finished without reaching its pause.
        func waitUntilPausedOrDone() async -> Bool {
            await withCheckedContinuation { continuation in
                let paused = state.withLock { state -> Bool? in
                    if state.paused { return true }
                    if state.released { return false }
                    state.watcher = continuation
                    return nil
                }
                if let paused { continuation.resume(returning: paused) }
            }
        }

        func pause() async {
            await withCheckedContinuation { continuation in
                let (watcher, resumeNow) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, Bool) in
                    state.paused = true
                    if state.released { return (state.watcher.take(), true) }
                    state.sleeper = continuation
                    return (state.watcher.take(), false)
                }
                watcher?.resume(returning: true)
                if resumeNow { continuation.resume() }
            }
        }

        /// The first redemption answered without pausing.
        func finished() {
            let watcher = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                state.released = true
                return state.watcher.take()
            }
            watcher?.resume(returning: false)
        }

        func release() {
            let sleeper = state.withLock { state -> CheckedContinuation<Void, Never>? in
                state.released = true
                return state.sleeper.take()
            }
            sleeper?.resume()
        }
    }

    private let base: EmbeddedStore
    private let pauseFirstAfter: Int?
    private let failFirstAt: Int?
    private let gate: Gate
    private let losesEverySwap: Bool
    /// Every call it names (the method's name, such as `setRemove(_:member:)`, and the key) fails,
    /// whoever makes it.
    private let fails: @Sendable (_ operation: String, _ key: String) -> Bool

    init(
        base: EmbeddedStore, pauseFirstAfter: Int? = nil, failFirstAt: Int? = nil, gate: Gate = Gate(), losesEverySwap: Bool = false,
        failing fails: @escaping @Sendable (_ operation: String, _ key: String) -> Bool = { _, _ in false }
    ) {
        self.base = base
        self.pauseFirstAfter = pauseFirstAfter
        self.failFirstAt = failFirstAt
        self.gate = gate
        self.losesEverySwap = losesEverySwap
        self.fails = fails
    }

    private func call<Result>(_ key: String? = nil, operation: String = #function, _ body: () async throws -> Result) async throws -> Result {
        if let key, fails(operation, key) { throw StoreError.storeUnavailable(reason: "injected failure on \(key)") }
        let index =
            Self.caller == .first
            ? gate.calls.withLock {
                $0 += 1; return $0
            } : nil
        if let index, index == failFirstAt { throw StoreError.storeUnavailable(reason: "injected failure") }
        let result = try await body()
        if let index, index == pauseFirstAfter { await gate.pause() }
        return result
    }

    func set(_ key: String, _ value: [UInt8], ttl: Duration?) async throws { try await call(key) { try await base.set(key, value, ttl: ttl) } }
    func get(_ key: String) async throws -> [UInt8]? { try await call(key) { try await base.get(key) } }
    func getMany(_ keys: [String]) async throws -> [[UInt8]?] { try await call { try await base.getMany(keys) } }
    func getAndDelete(_ key: String) async throws -> [UInt8]? { try await call(key) { try await base.getAndDelete(key) } }
    func delete(_ key: String) async throws -> Bool { try await call(key) { try await base.delete(key) } }
    func deleteAnnouncing(_ key: String, _ message: String, taking set: String?, leaving entry: SetEntry?) async throws -> (existed: Bool, taken: Set<String>) {
        try await call(key) { try await base.deleteAnnouncing(key, message, taking: set, leaving: entry) }
    }
    func listen(_ listener: AnnouncementListener) { base.listen(listener) }
    func setIfAbsent(_ key: String, _ value: [UInt8], ttl: Duration) async throws -> Bool { try await call(key) { try await base.setIfAbsent(key, value, ttl: ttl) } }
    func deleteIfEqual(_ key: String, _ value: [UInt8]) async throws -> Bool { try await call(key) { try await base.deleteIfEqual(key, value) } }
    func expire(_ key: String, ttl: Duration) async throws -> Bool { try await call(key) { try await base.expire(key, ttl: ttl) } }
    func timeToLive(_ key: String) async throws -> StoreTTL { try await call(key) { try await base.timeToLive(key) } }
    func increment(_ key: String, window: Duration) async throws -> Int { try await call(key) { try await base.increment(key, window: window) } }
    func setAdd(_ key: String, member: String, ttl: Duration?) async throws -> Int { try await call(key) { try await base.setAdd(key, member: member, ttl: ttl) } }
    func setRemove(_ key: String, member: String) async throws -> Bool { try await call(key) { try await base.setRemove(key, member: member) } }
    func setMembers(_ key: String) async throws -> Set<String> { try await call(key) { try await base.setMembers(key) } }
    func take(_ key: String, applying writes: [StoreWrite]) async throws -> [UInt8]? { try await call(key) { try await base.take(key, applying: writes) } }
    func once(_ guarded: OneTimeKey, applying writes: [StoreWrite], indexing memberships: [SetMembership]) async throws -> IndexedTake? {
        try await call { try await base.once(guarded, applying: writes, indexing: memberships) }
    }
    func apply(_ writes: [StoreWrite], ifEqual key: String, _ expected: [UInt8]) async throws -> Bool {
        try await call { losesEverySwap ? false : try await base.apply(writes, ifEqual: key, expected) }
    }
    func apply(_ writes: [StoreWrite]) async throws { try await call { try await base.apply(writes) } }
    func ping() async throws { try await base.ping() }
    func shutdown() async throws { try await base.shutdown() }
}

/// A step-up's redemption against a store that fails at any one of its calls: the new session is
/// either not written (503, and the retry succeeds) or written and answered; ending the session it
/// replaces is clean-up, so its failure never turns the answer into an error that makes the app's
/// retry look like a replayed code.
@Suite(.tags(.fast)) struct StepUpRedemptionTests {
    @Test func aFailureAfterTheNewSessionIsCommittedStillAnswersTheTokens() async throws {
        var failingCall = 1
        let answeredDespiteAFailure = Mutex(false)
        while true {
            let gate = InterposedStore.Gate()
            let fixture = RelayRouteTests.Fixture(serving: { InterposedStore(base: $0, failFirstAt: failingCall, gate: gate) })
            let call = failingCall
            try await fixture.test { client in
                // The session being stepped up, opened without failures.
                let old = try #require(
                    RelayRouteTests.json(
                        try await client.execute(
                            uri: "/token", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form(try await CodeRedemptionTests.signIn(fixture))
                        ))["access_token"]?.stringValue)
                let oldSID = try #require(JSONValue.object(from: try JWS.parse(old).payload)?["sid"]?.stringValue)
                let verifier = SecureRandom.token(bits: 256)
                let app = AppRequest(
                    clientID: "app", redirectURI: RelayRouteTests.redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"],
                    nonce: nil, providerID: "fc", acr: "eidas2", forceLogin: false
                )
                let code = try await RelayRouteTests.mintCode(fixture, app: app, acr: "eidas2", replaces: oldSID)
                let fields = [("grant_type", "authorization_code"), ("client_id", "app"), ("code", code), ("redirect_uri", RelayRouteTests.redirect), ("code_verifier", verifier)]
                let (first, tokens) = try await CodeRedemptionTests.redeem(client, fields, failingCall: call)
                if first == .ok, gate.calls.withLock({ $0 }) >= call {
                    answeredDespiteAFailure.withLock { $0 = true }
                }
                #expect(tokens["access_token"] != nil, "store call \(call) failed: no tokens in the end")
                #expect(!fixture.events.names.contains("token.code_replayed"), "store call \(call) failed: the retry was taken for a replay")
            }
            if gate.calls.withLock({ $0 }) < failingCall { break }
            failingCall += 1
        }
        // One of the failing calls came after the commit (ending the old session), and was answered.
        #expect(answeredDespiteAFailure.withLock { $0 })
    }
}
