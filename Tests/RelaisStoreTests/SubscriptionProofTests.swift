import RelaisTestSupport
import Testing

@testable import RelaisStore

/// What proves a cluster subscription current: an answered PING, and a round of markers heard back
/// from every master. Markers come from a channel anyone with Redis access may publish on.
@Suite(.tags(.fast)) struct SubscriptionProofTests {
    @Test func aRoundProvesOnlyWithEveryMastersOwnMarker() {
        let proofs = Proofs(byMarkers: true)
        let start = ContinuousClock.now
        proofs.sent(at: start)
        #expect(proofs.answered() == nil)  // a PING alone proves nothing on a cluster
        proofs.begin(round: 1, at: start)
        #expect(proofs.published(round: 1, masters: 2) == nil)
        // Markers naming masters that are not the round's, however many, complete nothing.
        for forged in [2, 5, 999, 1000, 1_000_000, -1] { #expect(proofs.heard(round: 1, master: forged) == nil) }
        #expect(proofs.heard(round: 1, master: 0) == nil)
        #expect(proofs.heard(round: 1, master: 1) == start)
        // A round that did not go out on every master proves nothing, and is forgotten.
        proofs.begin(round: 2, at: start + .seconds(1))
        #expect(proofs.published(round: 2, masters: nil) == nil)
        #expect(proofs.heard(round: 2, master: 0) == nil)
    }
}
