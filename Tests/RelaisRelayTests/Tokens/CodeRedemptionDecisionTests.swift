import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// `AuthorizationCodeGrant.decide`, row by row: the code as read (or the session it opened), what
/// the app presented and the time, to the action. No store, no clock.
@Suite(.tags(.fast)) struct CodeRedemptionDecisionTests {
    static let sid = RelayStore.newSessionID()
    static let code = sid + ".sealed-sign-in"
    static let verifier = PKCE.makeVerifier()
    static let redirect = "https://app.example/callback"
    static let lifetime = Duration.seconds(3600)
    static let record = RelayCode(
        app: AppRequest(
            clientID: "app", redirectURI: redirect, codeChallenge: PKCE.challenge(for: verifier), state: nil, scopes: ["openid"], nonce: "n",
            providerID: "fc", acr: "eidas1", forceLogin: false
        ),
        subject: "sub-1", acr: "eidas1", sealedIdentity: "sealed", providerSessionID: "provider-sid"
    )

    enum Action: Sendable, Equatable {
        case open
        /// The refusal's description (all are `invalid_grant`).
        case burn(String)
        case refuse(String)
        case endAsReplayed
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var expected: Action
        var record: RelayCode? = CodeRedemptionDecisionTests.record
        /// The live session the code opened, read when the code is gone.
        var openedBy: String?
        var code = CodeRedemptionDecisionTests.code
        var clientID = "app"
        var redirectURI = CodeRedemptionDecisionTests.redirect
        var verifier = CodeRedemptionDecisionTests.verifier
        var proofKey: String?
        var attested: ClientAttested?

        init(_ description: String, _ expected: Action, _ edit: (inout Row) -> Void = { _ in }) {
            testDescription = description
            self.expected = expected
            edit(&self)
        }
    }

    static let unknown = Action.refuse("the code is unknown or expired")
    static let otherKey = Action.burn("the code is bound to a DPoP key (dpop_jkt): send a proof by that key")

    static let rows: [Row] = [
        Row("every check passes", .open),
        // A code that is gone: never issued, expired, or redeemed already.
        Row("an unknown or expired code", unknown) { $0.record = nil },
        Row("a code whose session is open: replayed", .endAsReplayed) {
            $0.record = nil; $0.openedBy = sid
        },
        Row("a replay is told before the request's faults", .endAsReplayed) {
            $0.record = nil; $0.openedBy = sid; $0.verifier = "wrong"
        },
        // The checks that burn the code, in their order.
        Row("another client", .burn("the code was issued to another client")) { $0.clientID = "other" },
        Row("the client before the verifier", .burn("the code was issued to another client")) {
            $0.clientID = "other"; $0.verifier = "wrong"
        },
        Row("another redirect_uri", .burn("redirect_uri differs from the authorization request")) { $0.redirectURI = redirect + "/" },
        Row("the redirect before the verifier", .burn("redirect_uri differs from the authorization request")) {
            $0.redirectURI = "https://other.example"
            $0.verifier = "wrong"
        },
        Row("a wrong code_verifier", .burn("code_verifier does not match the code_challenge")) { $0.verifier = PKCE.makeVerifier() },
        Row("a bound code without a proof", otherKey) { $0.record?.app.redemption.dpopJKT = "k" },
        Row("a bound code with another key's proof", otherKey) {
            $0.record?.app.redemption.dpopJKT = "k"; $0.proofKey = "k2"
        },
        Row("a bound code with its key's proof", .open) {
            $0.record?.app.redemption.dpopJKT = "k"; $0.proofKey = "k"
        },
        Row("an unbound code with a proof: the session is bound", .open) { $0.proofKey = "k" },
        Row("an attested instance", .open) { $0.attested = ClientAttested(platform: "android", thumbprint: "i") },
        Row("a device label", .open) { $0.record?.app.deviceName = "Pixel" },
        Row("a stored code that names no session", unknown) { $0.code = "not-a-session-code" },
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) throws {
        let requester = TokenRequester(clientID: row.clientID, proofKey: row.proofKey, attested: row.attested)
        let presented = AuthorizationCodeGrant.Presented(requester: requester, code: row.code, redirectURI: row.redirectURI, verifier: row.verifier)
        let now = 5000.0
        switch AuthorizationCodeGrant.decide(row.record, openedBy: row.openedBy, presented, now: now, lifetime: Self.lifetime) {
        case .open(let sid, let session):
            #expect(row.expected == .open)
            #expect(sid == Self.sid)
            let record = try #require(row.record)
            #expect(session.clientID == "app" && session.subject == "sub-1" && session.providerID == "fc" && session.scopes == ["openid"])
            #expect(session.acr == "eidas1" && session.sealedIdentity == "sealed")
            #expect(session.span == SessionRecord.Span(createdAt: now, expiresAt: now + 3600))
            #expect(session.origin == SessionRecord.Origin(attested: row.attested, device: record.app.deviceName, dpopKey: row.proofKey))
        case .burn(let error):
            #expect(error.code == .invalidGrant && error.reason == nil)
            #expect(row.expected == .burn(error.description))
        case .refuse(let error):
            #expect(error.code == .invalidGrant && error.reason == nil)
            #expect(row.expected == .refuse(error.description))
        case .endAsReplayed(let sid):
            #expect(row.expected == .endAsReplayed)
            #expect(sid == Self.sid)
        }
    }
}
