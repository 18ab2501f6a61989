import Metrics

/// What operators graph and alert on beyond request counts (exposed at `/metrics`): how sign-ins
/// end, sessions opened and ended, and the events that mean someone replays stolen material.
/// Dimensions are bounded by configuration (provider and app ids) and by fixed code lists.
enum RelayMetrics {
    /// Why a session ended.
    enum EndReason: String {
        case logout, revoked, backchannelLogout = "backchannel_logout", codeReplay = "code_replay", refreshReuse = "refresh_reuse"
        /// Replaced by a step-up sign-in of the same person.
        case steppedUp = "stepped_up"
        /// Ended by the person from another of their sessions (`DELETE /sessions/{id}`).
        case endedByUser = "ended_by_user"
        /// The token response could not be completed: the session was never handed out.
        case aborted
        /// The person's oldest, when a sign-in went over `sessions.max_per_subject`.
        case overLimit = "over_limit"
        /// A device session whose approving app session ended (RFC 8628 through `/device/approve`).
        case approverEnded = "approver_ended"
    }

    /// Signs that tokens or codes were captured and replayed.
    enum SecurityEvent: String {
        case codeReplay = "code_replay", refreshReuse = "refresh_reuse", logoutTokenReplay = "logout_token_replay"
    }

    /// A sign-in that came back from the provider: `ok`, `cancelled` (access_denied), or the error
    /// code that stopped it (`provider_id_token_rejected`, `transaction_expired`, ...).
    static func signIn(provider: String, client: String, outcome: String) {
        Counter(label: "relais_signins_total", dimensions: [("provider", provider), ("client_id", client), ("outcome", outcome)]).increment()
    }

    static func sessionOpened(client: String) {
        Counter(label: "relais_sessions_opened_total", dimensions: [("client_id", client)]).increment()
    }

    static func sessionsEnded(_ count: Int, reason: EndReason) {
        guard count > 0 else { return }
        Counter(label: "relais_sessions_ended_total", dimensions: [("reason", reason.rawValue)]).increment(by: count)
    }

    /// A platform proof at `/attest/*`: `ok` or the refusal code (a fixed list).
    static func attestation(platform: String, outcome: String) {
        Counter(label: "relais_attestations_total", dimensions: [("platform", platform), ("outcome", outcome)]).increment()
    }

    static func securityEvent(_ event: SecurityEvent) {
        Counter(label: "relais_security_events_total", dimensions: [("event", event.rawValue)]).increment()
    }
}
