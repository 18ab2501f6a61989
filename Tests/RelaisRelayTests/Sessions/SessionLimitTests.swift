import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisRelay

/// `sessions.max_per_subject`: one person's index of sessions never grows past the limit; a sign-in
/// beyond it ends their oldest sessions, never the new one, and says so in security events.
@Suite(.tags(.fast)) struct SessionLimitTests {
    private static func sessionIDs(_ fixture: RelayRouteTests.Fixture) async throws -> Set<String> {
        try await fixture.sessions.sessions(ofSubject: "sub-1", provider: "fc")
    }

    @Test func aSignInBeyondTheLimitEndsTheOldestSessions() async throws {
        let fixture = RelayRouteTests.Fixture { $0.relay.maxSessionsPerSubject = 3 }
        try await fixture.test { client in
            var opened: [String] = []
            for _ in 0..<5 {
                let before = try await Self.sessionIDs(fixture)
                _ = try await RelayRouteTests.accessToken(fixture, client)
                let after = try await Self.sessionIDs(fixture)
                opened += after.subtracting(before)
                fixture.clock.advance(by: .seconds(1))
            }
            #expect(opened.count == 5)
            // The two oldest ended; the three newest live on, the last one among them.
            #expect(try await Self.sessionIDs(fixture) == Set(opened.suffix(3)))
            for sid in opened.prefix(2) { #expect(try await !fixture.sessions.isLive(sid)) }
            for sid in opened.suffix(3) { #expect(try await fixture.sessions.isLive(sid)) }
            let evicted = fixture.events.named(.sessionEvicted)
            #expect(evicted.count == 2 && evicted.allSatisfy { $0["limit"] == .string("3") && $0["outcome"] == .string("success") })

            // An index entry whose session already ended is dropped first: no live session pays for it.
            _ = try await fixture.store.delete(RelayStore.Key.session(opened[2]))
            _ = try await RelayRouteTests.accessToken(fixture, client)
            let now = try await Self.sessionIDs(fixture)
            #expect(now.count == 3 && !now.contains(opened[2]) && now.isSuperset(of: opened.suffix(2)))
            #expect(fixture.events.named(.sessionEvicted).count == 2)
        }
    }

    /// A person with more sessions than one batch of reads: ended ones in any batch leave the index
    /// without counting, and only the oldest live one beyond the limit ends.
    @Test func aTrimOverSeveralBatchesCountsOnlyLiveSessions() async throws {
        let limit = RedisStore.readBatch + 72
        let fixture = RelayRouteTests.Fixture { $0.relay.maxSessionsPerSubject = limit }
        let sessions = fixture.sessions
        func open(_ index: Int) async throws -> [String]? {
            let now = fixture.clock.now
            let record = SessionRecord(
                clientID: "app", subject: "sub-1", providerID: "fc", scopes: ["openid"], acr: nil, createdAt: now + Double(index), expiresAt: now + 3600,
                sealedIdentity: "sealed")
            return try await sessions.open(record, sid: "s\(index)", providerSessionID: nil, once: .claim("mark-\(index)", mark: [1], ttl: .seconds(60)), also: [])
        }
        for index in 0..<limit { #expect(try await open(index) == []) }
        // Two ended in two different batches, whatever order the index lists them in.
        for ended in [3, limit - 5] { #expect(try await fixture.store.delete(RelayStore.Key.session("s\(ended)"))) }
        // Over the limit by its entries, not by its live sessions: nothing ends, the two leave.
        #expect(try await open(limit) == [])
        var indexed = try await Self.sessionIDs(fixture)
        #expect(indexed.count == limit - 1 && !indexed.contains("s3") && !indexed.contains("s\(limit - 5)"))
        // One live session too many now: the oldest ends (s0), never the new one.
        #expect(try await open(limit + 1) == [])
        #expect(try await open(limit + 2) == ["s0"])
        indexed = try await Self.sessionIDs(fixture)
        #expect(indexed.count == limit && !indexed.contains("s0") && indexed.contains("s\(limit + 2)"))
        #expect(try await !sessions.isLive("s0"))
        #expect(try await sessions.isLive("s1"))
    }

    /// Every sign-in of a person at the limit trims their index: it reads their sessions in
    /// batches, so it costs the store a few calls more than a sign-in below the limit, however
    /// high the limit (one read per session made such a sign-in cost twice the CPU at 50).
    @Test func aSignInAtTheLimitCostsAFewStoreCallsNotOnePerSession() async throws {
        let limit = 12
        let gate = InterposedStore.Gate()
        let fixture = RelayRouteTests.Fixture({ $0.relay.maxSessionsPerSubject = limit }, serving: { InterposedStore(base: $0, gate: gate) })
        try await fixture.test { client in
            func countedSignIn() async throws -> Int {
                let before = gate.calls.withLock { $0 }
                _ = try await InterposedStore.$caller.withValue(.first) { try await RelayRouteTests.accessToken(fixture, client) }
                fixture.clock.advance(by: .seconds(1))
                return gate.calls.withLock { $0 } - before
            }
            for _ in 0..<(limit - 1) { _ = try await countedSignIn() }
            let belowTheLimit = try await countedSignIn()  // the limit-th session: nothing to trim
            let atTheLimit = try await countedSignIn()  // one too many: the oldest ends
            #expect(try await Self.sessionIDs(fixture).count == limit)
            #expect(fixture.events.named(.sessionEvicted).count == 1)
            // The index comes listed by the step that opens the session; then the sessions' batched
            // read, and ending the oldest in one step: its deletion announced, the devices it
            // approved taken, its index entry removed.
            #expect(atTheLimit - belowTheLimit <= 2, "a sign-in below the limit: \(belowTheLimit) store calls; at it: \(atTheLimit)")
        }
    }
}
