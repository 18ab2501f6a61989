/// What a code redemption comes to, decided from the code as read and the request alone: the
/// route reads, ``AuthorizationCodeGrant/decide(_:openedBy:_:now:lifetime:)`` decides, the route
/// performs (issue 34 §2).
enum CodeRedemption: Sendable, Equatable {
    /// Every check passed: `session` opens as `sid`, in the step that consumes the code.
    case open(sid: String, SessionRecord)
    /// A check failed: a code is good for one try, so it is burned.
    case burn(RelayError)
    case refuse(RelayError)
    /// The code already opened session `sid`: it was stolen or replayed (RFC 6749 §4.1.2), and the
    /// session it opened ends.
    case endAsReplayed(sid: String)
}

extension AuthorizationCodeGrant {
    /// What the app presented: the code, and what redeems it.
    struct Presented: Sendable {
        var requester: TokenRequester
        var code: String
        var redirectURI: String
        var verifier: String
        /// The code opened, once per request, when it is sealed and a session key opens it.
        var sealed: SealedCode? = nil
    }

    /// `record`: the code's sign-in, nil when the code is unknown, expired or (stored) consumed;
    /// `openedBy`: the live session the code opened, read only when there is no record.
    static func decide(_ record: RelayCode?, openedBy: String?, _ presented: Presented, now: Double, lifetime: Duration) -> CodeRedemption {
        guard let record else { return openedBy.map { .endAsReplayed(sid: $0) } ?? .refuse(unknown) }
        let requester = presented.requester
        guard record.app.clientID == requester.clientID else { return .burn(.invalidGrant("the code was issued to another client")) }
        guard record.app.redirectURI == presented.redirectURI else { return .burn(.invalidGrant("redirect_uri differs from the authorization request")) }
        guard PKCE.verify(presented.verifier, against: record.app.redemption.codeChallenge) else {
            return .burn(.invalidGrant("code_verifier does not match the code_challenge"))
        }
        if let bound = record.app.redemption.dpopJKT, requester.proofKey != bound {
            return .burn(.invalidGrant("the code is bound to a DPoP key (dpop_jkt): send a proof by that key"))
        }
        // Sealed with its session id (or stored under its session's tag): the code names its session.
        guard let sid = RelayStore.sessionID(in: presented.code) else { return .refuse(unknown) }
        var session = SessionRecord(opening: record, at: now, lifetime: lifetime)
        session.origin.attested = requester.attested
        session.origin.dpopKey = requester.proofKey
        return .open(sid: sid, session)
    }

    static let unknown = RelayError.invalidGrant("the code is unknown or expired")
}

extension SessionRecord {
    /// A new session record starting at `now`, for the sign-in in `code`.
    init(opening code: RelayCode, at now: Double, lifetime: Duration) {
        self.init(
            clientID: code.app.clientID, subject: code.subject, providerID: code.app.upstream.providerID, scopes: code.app.scopes, acr: code.acr,
            createdAt: now, expiresAt: now + Double(lifetime.components.seconds), sealedIdentity: code.sealedIdentity
        )
        origin.device = code.app.deviceName
    }
}
