/// Every security event Relais writes, by its stable name. docs/security-events.md is generated
/// from this list (`relais security-events --markdown`): a name, once published, never changes
/// meaning; new events get new names.
public enum SecurityEventKind: String, CaseIterable, Sendable {
    case signInSucceeded = "sign_in.succeeded"
    case signInFailed = "sign_in.failed"
    case stepUpRefused = "step_up.refused"
    case sessionOpened = "session.opened"
    case codeReplayed = "token.code_replayed"
    case refreshReused = "token.refresh_reused"
    case sessionRevoked = "session.revoked"
    case logout = "session.logout"
    case backchannelLogout = "session.backchannel_logout"
    case backchannelLogoutRefused = "backchannel_logout.refused"
    case sessionEndedByUser = "session.ended_by_user"
    case sessionEvicted = "session.evicted"
    case deviceDecided = "device.decided"
    case attestationSucceeded = "attestation.succeeded"
    case attestationRefused = "attestation.refused"
    case dpopRefused = "dpop.refused"
    case rateLimited = "rate_limit.hit"
    case adminSessionsRevoked = "admin.sessions_revoked"
    case adminRefused = "admin.refused"

    public enum Outcome: String, Sendable { case success, failure }

    public var outcome: Outcome {
        switch self {
        case .signInSucceeded, .sessionOpened, .sessionRevoked, .logout, .backchannelLogout, .sessionEndedByUser, .deviceDecided,
            .attestationSucceeded, .adminSessionsRevoked, .sessionEvicted:
            .success
        case .signInFailed, .stepUpRefused, .codeReplayed, .refreshReused, .backchannelLogoutRefused, .attestationRefused, .dpopRefused,
            .rateLimited, .adminRefused:
            .failure
        }
    }

    /// When it is written, and what it means for whoever watches.
    public var meaning: String {
        switch self {
        case .signInSucceeded: "The provider signed the person in and every token checked out; the app receives a one-time code."
        case .signInFailed: "A sign-in ended in an error at the callback: the provider refused or failed, a token did not verify, the person cancelled."
        case .stepUpRefused: "A step-up was completed by another person than the session's: the session stays as it was."
        case .sessionOpened: "An app redeemed its code (or a device its approval) and got tokens: a session starts."
        case .codeReplayed: "A code was presented a second time: it may have been stolen, so the session it opened is revoked."
        case .refreshReused: "A rotated refresh token came back: the previous one after the grace window, or any older one. It may have been stolen, so the session is revoked."
        case .sessionRevoked: "The app revoked a token at /revoke (RFC 7009), ending its session."
        case .logout: "The app ended a session at /logout; `scope` says whether the browser also went to the provider's logout."
        case .backchannelLogout: "The provider's back-channel logout token ended the sessions of a provider session."
        case .backchannelLogoutRefused: "A back-channel logout token did not verify or was replayed."
        case .sessionEndedByUser: "The person ended one of their sessions (DELETE /sessions/{id})."
        case .sessionEvicted: "A new sign-in took the person over `sessions.max_per_subject` live sessions: their oldest session ended (one event each)."
        case .deviceDecided: "A signed-in app approved or refused another device's sign-in request (RFC 8628)."
        case .attestationSucceeded: "An app instance proved it is the genuine app on a genuine device and got a client attestation."
        case .attestationRefused: "An attestation, or a client attestation at /token, was refused."
        case .dpopRefused: "A DPoP proof (RFC 9449) was missing, invalid, replayed or by the wrong key."
        case .rateLimited: "A client address or an app went over its rate limit."
        case .adminSessionsRevoked: "An operator ended every session of a person (POST /admin/sessions/revoke)."
        case .adminRefused: "A call to an admin endpoint came without the admin credential."
        }
    }

    /// The fields this event sets besides the common ones.
    public var fields: [String] {
        switch self {
        case .signInSucceeded: ["acr", "via"]
        case .sessionOpened: ["acr", "via"]
        case .logout: ["scope"]
        case .backchannelLogout: ["sessions"]
        case .deviceDecided: ["decision"]
        case .attestationSucceeded, .attestationRefused: ["platform"]
        case .rateLimited, .sessionEvicted: ["limit"]
        case .adminSessionsRevoked: ["sessions"]
        default: []
        }
    }
}
