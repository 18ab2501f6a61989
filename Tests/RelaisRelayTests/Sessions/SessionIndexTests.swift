import RelaisClock
import RelaisConfig
import RelaisStore
import RelaisTestSupport
import Synchronization
import Testing

@testable import RelaisRelay

/// A person's index of sessions is how a back-channel logout finds their sessions: whatever store
/// call fails while a session ends, it never lives on outside its index.
@Suite(.tags(.fast)) struct SessionIndexTests {
    @Test func aSessionEndingWhenAStoreCallFailsIsNeverLiveOutsideItsIndex() async throws {
        var failing = 1
        var endedDespiteAFailure = false
        while true {
            let gate = InterposedStore.Gate()
            let fixture = RelayRouteTests.Fixture(serving: { InterposedStore(base: $0, failFirstAt: failing, gate: gate) })
            // Through the interposed store, as the relay's routes call it.
            let sessions = RelayStore(store: fixture.served, settings: fixture.configuration.relay, clock: fixture.clock)
            let now = fixture.clock.now
            let record = SessionRecord(
                clientID: "app", subject: "sub-1", providerID: "fc", scopes: ["openid"], acr: nil, createdAt: now, expiresAt: now + 3600,
                sealedIdentity: "sealed")
            _ = try await sessions.open(record, sid: "s1", providerSessionID: nil, once: .claim("mark", mark: [1], ttl: .seconds(60)), also: [])
            let revoked = try? await InterposedStore.$caller.withValue(.first) { try await sessions.revoke("s1", reason: .logout) }
            let live = try await sessions.session("s1") != nil
            let indexed = try await sessions.sessions(ofSubject: "sub-1", provider: "fc").contains("s1")
            #expect(!live || indexed, "store call \(failing) failed: the session lives on, out of its index")
            // Ended: the caller hears so, even when only the clean-up after it failed.
            #expect(live == (revoked == nil), "store call \(failing) failed")
            if revoked == true, indexed { endedDespiteAFailure = true }
            // Past the revocation's last call nothing fails: it ends the session and its entry.
            if gate.calls.withLock({ $0 }) < failing {
                #expect(revoked == true && !live && !indexed)
                break
            }
            failing += 1
        }
        // The record read, then one step that ends the session and removes its entry (on one store
        // node; on a cluster the entry leaves just after, inside that call, best effort): no call
        // can fail between the two, so no stale entry is left behind either.
        #expect(failing == 3)
        #expect(!endedDespiteAFailure)
    }
}
