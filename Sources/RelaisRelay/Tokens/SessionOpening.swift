import Logging
import RelaisConfig
import RelaisJOSE

/// Opening a session, the one step the code and device grants share: the sign-in's identity gets
/// its token secret, the tokens are minted, and `commit` writes the session and consumes what
/// opened it (a code, a device code) atomically with its indexes (``RelayStore/open(_:sid:providerSessionID:once:also:)``).
struct SessionOpening: Sendable {
    let sessions: RelayStore
    let vault: SessionVault
    let tokens: TokenIssuer
    let events: SecurityEventLog

    /// The token response; nil when `commit` found what opens the session consumed already (another
    /// request won). `what` names the sealed sign-in in a failure to open it; `via` is how the
    /// session was opened, for the security event.
    func open(
        _ session: SessionRecord, sid: String, app: AppSettings, nonce: String?, what: String, via: String, logger: Logger,
        commit: (SessionRecord) async throws -> [String]?
    ) async throws -> JSONValue? {
        let opened = try await vault.openForGrant(session.sealedIdentity, what: what, logger: logger)
        let (identity, sealed, secret) = try vault.withTokenSecret(opened, sealed: session.sealedIdentity)
        var session = session
        session.sealedIdentity = sealed
        let response = try tokens.issue(sid: sid, session: session, identity: identity, secret: secret, app: app, nonce: nonce)
        guard let evicted = try await commit(session) else { return nil }
        RelayMetrics.sessionOpened(client: app.clientID)
        events.record(
            .sessionOpened, client: app.clientID, provider: session.providerID, sid: sid, subject: session.subject,
            (session.acr.map { [("acr", $0)] } ?? []) + [("via", via)]
        )
        events.sessionsEvicted(evicted, client: app.clientID, provider: session.providerID, subject: session.subject, limit: sessions.settings.maxSessionsPerSubject)
        return response
    }
}
