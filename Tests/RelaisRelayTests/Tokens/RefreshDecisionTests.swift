import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// `RefreshGrant.decide`, row by row: the session as read, what the app presented and the time, to
/// the action. No store, no clock: every branch and edge of the refresh rotation is one row.
@Suite(.tags(.fast)) struct RefreshDecisionTests {
    static let sid = RelayStore.newSessionID()
    static let secret = SessionTokens.newSecret()
    static let grace = Duration.seconds(30)
    /// The live generation is 3, rotated at 2000.
    static let live: SessionRecord = {
        var session = SessionRecord(
            clientID: "app", subject: "sub-1", providerID: "fc", scopes: ["openid", "profile"], acr: nil, createdAt: 1000, expiresAt: 1_000_000,
            sealedIdentity: "sealed"
        )
        session.span.generation = 3
        session.span.refreshedAt = 2000
        return session
    }()

    /// The action, with the refusal's code and reason (the `error_reason` docs/errors.md lists).
    enum Action: Sendable, Equatable {
        case rotate, resend, endAsReplayed, endWithApprover
        case refuse(RelayError.Code, RelayError.Reason?)
    }

    struct Row: Sendable, CustomTestStringConvertible {
        var testDescription: String
        var expected: Action
        var session: SessionRecord? = RefreshDecisionTests.live
        var secret: [UInt8]? = RefreshDecisionTests.secret
        var approverEnded = false
        var generation = 3
        /// A token other than the session's own of `generation` (forged).
        var token: String?
        var clientID = "app"
        var proofKey: String?
        var attestedKey: String?
        var scopes: [String]?
        var now: Double = 2010

        init(_ description: String, _ expected: Action, _ edit: (inout Row) -> Void = { _ in }) {
            testDescription = description
            self.expected = expected
            edit(&self)
        }
    }

    static let sessionEnded = Action.refuse(.invalidGrant, .sessionEnded)
    static let keyMismatch = Action.refuse(.invalidGrant, .dpopKeyMismatch)
    static let notAttested = Action.refuse(.invalidClientAttestation, nil)

    static let rows: [Row] = [
        Row("the live generation rotates", .rotate),
        // The token, before anything about its session.
        Row("no session: ended, expired or never opened", sessionEnded) { $0.session = nil },
        Row("an identity sealed without a token secret", sessionEnded) { $0.secret = nil },
        Row("a generation beyond the live one", sessionEnded) { $0.generation = 4 },
        Row("a forged token naming the live session", sessionEnded) { $0.token = sid + ".3.AAAAAAAAAAAAAAAAAAAAAAAAAAA" },
        Row("a token of another secret", sessionEnded) { $0.secret = SessionTokens.newSecret() },
        Row("a forged token of another client", sessionEnded) {
            $0.token = sid + ".3.x"; $0.clientID = "other"
        },
        // The client, then the DPoP binding.
        Row("another client", .refuse(.invalidGrant, .otherClient)) { $0.clientID = "other" },
        Row("another client with a wrong key", .refuse(.invalidGrant, .otherClient)) {
            $0.clientID = "other"; $0.proofKey = "k"
        },
        Row("a bound token without a proof", keyMismatch) { $0.session?.origin.dpopKey = "k" },
        Row("a bound token with another key's proof", keyMismatch) {
            $0.session?.origin.dpopKey = "k"; $0.proofKey = "k2"
        },
        Row("an unbound token with a proof", keyMismatch) { $0.proofKey = "k" },
        Row("a bound token with its key's proof", .rotate) {
            $0.session?.origin.dpopKey = "k"; $0.proofKey = "k"
        },
        // A device session whose approver ended: before the generation is weighed.
        Row("a device session whose approver ended", .endWithApprover) {
            $0.session?.origin.approvedBy = "approver"; $0.approverEnded = true
        },
        Row("an old generation of a device session whose approver ended", .endWithApprover) {
            $0.approverEnded = true; $0.generation = 1
        },
        Row("the binding before the approver", keyMismatch) {
            $0.approverEnded = true; $0.proofKey = "k"
        },
        // The previous generation: the grace window, to the second.
        Row("the previous generation within the window", .resend) {
            $0.generation = 2; $0.now = 2001
        },
        Row("the previous generation at the window's very edge", .resend) {
            $0.generation = 2; $0.now = 2030
        },
        Row("the previous generation just past the window", .endAsReplayed) {
            $0.generation = 2; $0.now = 2030.001
        },
        Row("the previous generation of a session never rotated since an upgrade", .endAsReplayed) {
            $0.generation = 2; $0.session?.span.refreshedAt = nil
        },
        Row("two generations old, within the window", .endAsReplayed) {
            $0.generation = 1; $0.now = 2001
        },
        Row("the sign-in's own token, long after", .endAsReplayed) {
            $0.generation = 0; $0.now = 500_000
        },
        Row("a replay before the attestation's fault", .endAsReplayed) {
            $0.generation = 1; $0.session?.origin.attested = ClientAttested(platform: "ios", thumbprint: "i")
        },
        // What may be issued: the attested instance, then the scopes.
        Row("an attested session without attestation", notAttested) { $0.session?.origin.attested = ClientAttested(platform: "ios", thumbprint: "i") },
        Row("an attested session from another instance", notAttested) {
            $0.session?.origin.attested = ClientAttested(platform: "ios", thumbprint: "i")
            $0.attestedKey = "i2"
        },
        Row("an attested session from its instance", .rotate) {
            $0.session?.origin.attested = ClientAttested(platform: "ios", thumbprint: "i"); $0.attestedKey = "i"
        },
        Row("a resend asks the attestation too", notAttested) {
            $0.generation = 2
            $0.session?.origin.attested = ClientAttested(platform: "ios", thumbprint: "i")
        },
        Row("the granted scopes", .rotate) { $0.scopes = ["openid", "profile"] },
        Row("narrower scopes", .rotate) { $0.scopes = ["openid"] },
        Row("a wider scope", .refuse(.invalidScope, nil)) { $0.scopes = ["openid", "email"] },
        Row("a resend with a wider scope", .refuse(.invalidScope, nil)) {
            $0.generation = 2; $0.scopes = ["email"]
        },
        Row("the attestation before the scopes", notAttested) {
            $0.session?.origin.attested = ClientAttested(platform: "ios", thumbprint: "i"); $0.scopes = ["email"]
        },
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) {
        let read = row.session.map { RefreshGrant.SessionRead(session: $0, secret: row.secret, approverEnded: row.approverEnded) }
        let token = row.token ?? SessionTokens.refreshToken(sid: Self.sid, generation: row.generation, secret: Self.secret)
        let attested = row.attestedKey.map { ClientAttested(platform: "ios", thumbprint: $0) }
        let requester = TokenRequester(clientID: row.clientID, proofKey: row.proofKey, attested: attested)
        let presented = RefreshGrant.Presented(requester: requester, token: token, sid: Self.sid, generation: row.generation, scopes: row.scopes)
        switch RefreshGrant.decide(read, presented, now: row.now, grace: Self.grace) {
        case .rotate(let next):
            #expect(row.expected == .rotate)
            // One generation on, rotated now; nothing else changes.
            var expected = row.session
            expected?.span.generation += 1
            expected?.span.refreshedAt = row.now
            #expect(next == expected)
        case .resend(let session):
            #expect(row.expected == .resend)
            #expect(session == row.session)
        case .endAsReplayed(let session):
            #expect(row.expected == .endAsReplayed)
            #expect(session == row.session)
        case .endWithApprover: #expect(row.expected == .endWithApprover)
        case .refuse(let error): #expect(row.expected == .refuse(error.code, error.reason), "\(error.description)")
        }
    }
}
