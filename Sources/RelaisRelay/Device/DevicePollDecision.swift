/// What a device's poll comes to, decided from the request as the store answered it and the
/// approving session as read: the route reads, ``DeviceCodeGrant/decide(_:approver:_:now:lifetime:interval:)``
/// decides, the route performs (issue 34 §2).
enum DevicePollDecision: Sendable, Equatable {
    /// Approved: `session` opens as `sid`, in the step that consumes the device code.
    case open(sid: String, SessionRecord, providerSessionID: String?)
    /// Still pending, polled too soon, denied, expired, unknown or used (RFC 8628 §3.5).
    case refuse(RelayError)
}

extension DeviceCodeGrant {
    /// `approver`: the app session that approved, as read (nil when it has ended, or when no app
    /// approved). `interval` is the poll interval `slow_down` asks the device to keep.
    static func decide(
        _ poll: RelayStore.DevicePoll, approver: SessionRecord?, _ requester: TokenRequester, now: Double, lifetime: Duration, interval: Duration
    ) -> DevicePollDecision {
        switch poll {
        // RFC 8628 §3.5: expired_token is for a code that was issued and has expired.
        case .unknown: return .refuse(.invalidGrant("the device code is unknown"))
        case .expired: return .refuse(RelayError(.expiredToken, "the device code has expired"))
        case .foreign: return .refuse(.invalidGrant("the device code was issued to another client"))
        case .used: return .refuse(used)
        case .tooSoon: return .refuse(RelayError(.slowDown, "poll at most every \(interval.components.seconds) s"))
        case .pending: return .refuse(RelayError(.authorizationPending, "the request is waiting for approval"))
        case .decided(let sid, let request, let decision):
            guard decision.approved, let subject = decision.subject, let providerID = decision.providerID, let sealed = decision.sealedIdentity else {
                return .refuse(RelayError(.accessDenied, "the request was denied"))
            }
            // Approved by an app: the device's session is tied to the approving session, and never
            // outlives it (capped at its end, ended with it).
            var approverEnds = Double.infinity
            if decision.approverSID != nil {
                guard let approver else { return .refuse(approverGone) }
                approverEnds = approver.span.expiresAt
            }
            var session = SessionRecord(
                clientID: requester.clientID, subject: subject, providerID: providerID, scopes: request.scopes, acr: decision.acr, createdAt: now,
                expiresAt: min(now + Double(lifetime.components.seconds), approverEnds), sealedIdentity: sealed
            )
            session.origin.attested = requester.attested
            session.origin.dpopKey = requester.proofKey
            session.origin.approvedBy = decision.approverSID
            return .open(sid: sid, session, providerSessionID: decision.providerSessionID)
        }
    }

    static let used = RelayError.invalidGrant("the device code was already used")
    static let approverGone = RelayError(.accessDenied, "the app session that approved the request has ended since")
}

extension RelayStore.DevicePoll {
    /// How a stored request stands for a poll by `clientID` at `now`, before its interval and its
    /// decision are read: `.foreign`, `.expired`, or nil when the poll goes on.
    static func standing(of request: RelayStore.DeviceRequest, clientID: String, now: Double) -> Self? {
        guard request.clientID == clientID else { return .foreign }
        guard request.expiresAt > now else { return .expired }
        return nil
    }
}
