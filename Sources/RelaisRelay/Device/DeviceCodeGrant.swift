import Logging
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// `grant_type=urn:ietf:params:oauth:grant-type:device_code` (RFC 8628 §3.4): the device polls
/// until its request is decided, then gets its tokens exactly once.
struct DeviceCodeGrant: TokenGrant {
    static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    let sessions: RelayStore
    let vault: SessionVault
    let tokens: TokenIssuer
    let events: SecurityEventLog

    /// Listed only where an app may use it (`apps.<id>.device_grant`).
    func isOffered(to apps: [AppSettings]) -> Bool { apps.contains { $0.deviceGrant != nil } }

    func answer(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard app.deviceGrant != nil else { throw RelayError(.unauthorizedClient, "this app is not registered for the device grant (apps.\(app.clientID).device_grant)") }
        guard let deviceCode = form["device_code"], !deviceCode.isEmpty, deviceCode.utf8.count <= 256 else { throw RelayError.invalidRequest("device_code is missing") }
        let poll = try await sessions.pollDevice(deviceCode, clientID: app.clientID, interval: sessions.settings.devicePollInterval)
        var decided: RelayStore.DeviceDecision?
        if case .decided(_, _, let decision) = poll { decided = decision }
        // The approving session is read only for an approval that names one.
        var approver: SessionRecord?
        if let decided, decided.approved, let approverSID = decided.approverSID { approver = try await sessions.session(approverSID) }
        let requester = TokenRequester(app: app, proof: proof, attested: attested)
        let settings = sessions.settings
        switch Self.decide(poll, approver: approver, requester, now: sessions.clock.now, lifetime: settings.sessionLifetime, interval: settings.devicePollInterval) {
        case .refuse(let error): throw error
        case .open(let sid, let session, let providerSessionID):
            if let approver = session.origin.approvedBy { try await sessions.linkApproved(sid, to: approver) }
            let opening = SessionOpening(sessions: sessions, vault: vault, tokens: tokens, events: events)
            let response = try await opening.open(session, sid: sid, app: app, nonce: nil, what: "the approving sign-in", via: "device", logger: logger) {
                guard let evicted = try await sessions.redeemDevice(deviceCode, opening: $0, sid: sid, providerSessionID: providerSessionID) else { return nil }
                // The approver may have ended between the read above and the link: then this one ends too.
                if try await sessions.approverEnded($0) {
                    _ = try? await sessions.revoke(sid, reason: .approverEnded)
                    throw Self.approverGone
                }
                return evicted
            }
            guard let response else { throw Self.used }
            logger.info(
                "session opened on another device", metadata: ["client_id": "\(app.clientID)", "provider": "\(session.providerID)", "via": "\(decided?.via ?? "")"]
            )
            return response
        }
    }
}
