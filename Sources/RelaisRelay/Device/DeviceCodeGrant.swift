import Logging
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// `grant_type=urn:ietf:params:oauth:grant-type:device_code` (RFC 8628 §3.4): the device polls
/// until its request is decided, then gets its tokens exactly once.
struct DeviceCodeGrant: TokenGrant {
    static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    let sessions: SessionStore
    let vault: SessionVault
    let issuer: TokenIssuer
    let events: SecurityEventLog

    /// Listed only where an app may use it (`apps.<id>.device_grant`).
    func isOffered(to apps: [AppSettings]) -> Bool { apps.contains { $0.deviceGrant != nil } }

    func answer(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard app.deviceGrant != nil else { throw RelayError(.unauthorizedClient, "this app is not registered for the device grant (apps.\(app.clientID).device_grant)") }
        guard let deviceCode = form["device_code"], !deviceCode.isEmpty, deviceCode.utf8.count <= 256 else { throw RelayError.invalidRequest("device_code is missing") }
        switch try await sessions.pollDevice(deviceCode, clientID: app.clientID, interval: sessions.settings.devicePollInterval) {
        // RFC 8628 §3.5: expired_token is for a code that was issued and has expired.
        case .unknown: throw RelayError.invalidGrant("the device code is unknown")
        case .expired: throw RelayError(.expiredToken, "the device code has expired")
        case .foreign: throw RelayError.invalidGrant("the device code was issued to another client")
        case .used: throw RelayError.invalidGrant("the device code was already used")
        case .tooSoon: throw RelayError(.slowDown, "poll at most every \(sessions.settings.devicePollInterval.components.seconds) s")
        case .pending: throw RelayError(.authorizationPending, "the request is waiting for approval")
        case .decided(let sid, let request, let decision):
            guard decision.approved, let subject = decision.subject, let providerID = decision.providerID, let sealed = decision.sealedIdentity else {
                throw RelayError(.accessDenied, "the request was denied")
            }
            // Approved by an app: the device's session is tied to the approving session, and never
            // outlives it (capped at its end, ended with it).
            var approverEnds: Double?
            if let approver = decision.approverSID {
                guard let approving = try await sessions.session(approver) else {
                    throw RelayError(.accessDenied, "the app session that approved the request has ended since")
                }
                approverEnds = approving.span.expiresAt
            }
            let opened = try await vault.openForGrant(sealed, what: "the approving sign-in", logger: logger)
            let (identity, resealed, secret) = try vault.withTokenSecret(opened, sealed: sealed)
            let now = sessions.clock.now
            var session = SessionRecord(
                clientID: app.clientID, subject: subject, providerID: providerID, scopes: request.scopes, acr: decision.acr, createdAt: now,
                expiresAt: min(now + Double(sessions.settings.sessionLifetime.components.seconds), approverEnds ?? .infinity), sealedIdentity: resealed
            )
            session.origin.attested = attested
            session.origin.dpopKey = proof?.thumbprint
            session.origin.approvedBy = decision.approverSID
            let response = try issuer.issue(sid: sid, session: session, identity: identity, secret: secret, app: app, nonce: nil)
            if let approver = decision.approverSID { try await sessions.linkApproved(sid, to: approver) }
            guard let evicted = try await sessions.redeemDevice(deviceCode, opening: session, sid: sid, providerSessionID: decision.providerSessionID) else {
                throw RelayError.invalidGrant("the device code was already used")
            }
            // The approver may have ended between the read above and the link: then this one ends too.
            if try await sessions.approverEnded(session) {
                _ = try? await sessions.revoke(sid, reason: .approverEnded)
                throw RelayError(.accessDenied, "the app session that approved the request has ended since")
            }
            RelayMetrics.sessionOpened(client: app.clientID)
            events.record(
                .sessionOpened, client: app.clientID, provider: providerID, sid: sid, subject: subject, (decision.acr.map { [("acr", $0)] } ?? []) + [("via", "device")]
            )
            events.sessionsEvicted(evicted, client: app.clientID, provider: providerID, subject: subject, limit: sessions.settings.maxSessionsPerSubject)
            logger.info("session opened on another device", metadata: ["client_id": "\(app.clientID)", "provider": "\(providerID)", "via": "\(decision.via ?? "")"])
            return response
        }
    }
}
