/// What a refresh comes to, decided from the session as read and the request alone: the route
/// reads, ``RefreshGrant/decide(_:_:now:grace:)`` decides, the route performs (issue 34 §2).
enum RefreshDecision: Sendable, Equatable {
    /// The live generation came: `next` (one generation on) replaces the record read, by
    /// compare-and-set.
    case rotate(next: SessionRecord)
    /// The previous generation within the grace window (the app lost the answer): the live
    /// generation again, with a new access token; nothing is written.
    case resend(SessionRecord)
    /// An older generation, or the previous one after the window: the session ends as replayed.
    case endAsReplayed(SessionRecord)
    /// A device session whose approving app session has ended: it ends too (fail closed, in case
    /// ending it along with its approver did not get through).
    case endWithApprover
    case refuse(RelayError)
}

extension RefreshGrant {
    /// The session a derived refresh token names, as read: its record, the token secret sealed in
    /// its identity, and whether the session that approved it (a device's) has ended.
    struct SessionRead: Sendable {
        var session: SessionRecord
        var secret: [UInt8]?
        var approverEnded = false
    }

    /// What the app presented: a derived token (its session and generation) and the scopes it
    /// asks for, if narrower.
    struct Presented: Sendable {
        var requester: TokenRequester
        var token: String
        var sid: String
        var generation: Int
        var scopes: [String]?
    }

    /// The decision, in the order the checks have always run: the token is checked before anything
    /// about its session is told; a replay is told before the request's own faults.
    static func decide(_ read: SessionRead?, _ presented: Presented, now: Double, grace: Duration) -> RefreshDecision {
        guard let read, let secret = read.secret, presented.generation <= read.session.span.generation,
            SessionTokens.isRefreshToken(presented.token, sid: presented.sid, generation: presented.generation, secret: secret)
        else { return .refuse(unknown) }
        let session = read.session
        let requester = presented.requester
        guard session.clientID == requester.clientID else { return .refuse(otherClient) }
        if let mismatch = bindingRefusal(session.origin.dpopKey, requester.proofKey) { return .refuse(mismatch) }
        if read.approverEnded { return .endWithApprover }
        if presented.generation < session.span.generation {
            guard presented.generation == session.span.generation - 1, let refreshedAt = session.span.refreshedAt,
                now - refreshedAt <= Double(grace.components.seconds)
            else { return .endAsReplayed(session) }
            return issueRefusal(session, requester.attested?.thumbprint, presented.scopes).map(RefreshDecision.refuse) ?? .resend(session)
        }
        var next = session
        next.span.generation += 1
        next.span.refreshedAt = now
        return issueRefusal(next, requester.attested?.thumbprint, presented.scopes).map(RefreshDecision.refuse) ?? .rotate(next: next)
    }

    static let unknown = RelayError.invalidGrant("the refresh token is unknown, or its session has ended", .sessionEnded)
    static let otherClient = RelayError.invalidGrant("the refresh token was issued to another client", .otherClient)
    static let approverGone = RelayError.invalidGrant("the app session that approved this device has ended, and this session with it", .approverEnded)

    /// RFC 9449 §5: a bound refresh token needs a proof by its key; an unbound one stays unbound.
    static func bindingRefusal(_ jkt: String?, _ proofKey: String?) -> RelayError? {
        guard jkt != proofKey else { return nil }
        return RelayError.invalidGrant(
            jkt == nil ? "the refresh token is not bound to a DPoP key: refresh without a DPoP proof" : "the refresh token is bound to a DPoP key: send a proof by that key",
            .dpopKeyMismatch
        )
    }

    /// Why `session`'s tokens may not be issued for this request: a session opened by an attested
    /// app instance is refreshed by that instance only (its attestation, for the same instance key,
    /// comes with every refresh), and RFC 6749 §6 lets a refresh repeat or narrow the granted
    /// scopes, never widen them.
    static func issueRefusal(_ session: SessionRecord, _ attestedKey: String?, _ scopes: [String]?) -> RelayError? {
        if let key = session.origin.attested?.thumbprint, attestedKey != key {
            return RelayError(.invalidClientAttestation, "this session was opened by an attested app instance: refresh with that instance's client attestation")
        }
        if let scopes, let wider = scopes.first(where: { !session.scopes.contains($0) }) {
            return RelayError(.invalidScope, "scope '\(wider)' was not granted at sign-in")
        }
        return nil
    }
}
