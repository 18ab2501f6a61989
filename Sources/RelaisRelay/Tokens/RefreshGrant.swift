import Logging
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisClock

/// `grant_type=refresh_token`: the refresh token rotates on every use, with a grace window for a
/// lost response and one rotation across instances (a lock in the store).
struct RefreshGrant: Sendable {
    let sessions: SessionStore
    let vault: SessionVault
    let issuer: TokenIssuer
    let grace: Duration
    let events: SecurityEventLog

    /// How long a request waits for another instance that is rotating the same refresh token.
    static let rotationWait: Duration = .seconds(3)
    static let lockLifetime: Duration = .seconds(10)
    static let lockPoll: Duration = .milliseconds(25)

    func rotate(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard let token = form["refresh_token"], !token.isEmpty else { throw RelayError.invalidRequest("refresh_token is missing") }
        // RFC 6749 §6: a refresh may repeat or narrow the granted scopes, never widen them.
        let requestedScopes = form["scope"].map { $0.split(separator: " ").map(String.init) }
        let owner = Array(SecureRandom.token(bits: 96).utf8)
        // Waiting for another instance's store write takes real time, whatever the injected clock says.
        let deadline = ContinuousClock.now + Self.rotationWait
        // The lock holder rotates; the others wait for its result and answer from the grace cache.
        while !(try await sessions.lockRefresh(token, owner: owner, lifetime: Self.lockLifetime)) {
            if let record = try await sessions.refresh(token), record.rotatedAt != nil {
                return try await answerRotated(record, app: app, proof: proof, attested: attested, logger: logger)
            }
            guard ContinuousClock.now < deadline else { throw RelayError.storeUnavailable }
            try await Task.sleep(for: Self.lockPoll)
        }
        let response: JSONValue
        do {
            response = try await rotateLocked(token, scopes: requestedScopes, app: app, proof: proof, attested: attested, logger: logger)
        } catch {
            await sessions.unlockRefresh(token, owner: owner)
            throw error
        }
        await sessions.unlockRefresh(token, owner: owner)
        return response
    }

    private func rotateLocked(_ token: String, scopes: [String]?, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard let record = try await sessions.refresh(token) else { throw RelayError.invalidGrant("the refresh token is unknown or expired") }
        guard record.clientID == app.clientID else { throw RelayError.invalidGrant("the refresh token was issued to another client") }
        try Self.checkBinding(record, proof)
        if record.rotatedAt != nil { return try await answerRotated(record, app: app, proof: proof, attested: attested, logger: logger) }
        guard let session = try await sessions.session(record.sid), session.clientID == app.clientID else {
            throw RelayError.invalidGrant("the session has ended")
        }
        try Self.checkAttestation(session, attested)
        let identity = try await vault.openForGrant(session.sealedIdentity, what: "the session", logger: logger)
        await vault.keys.synchronize()
        if let scopes, let wider = scopes.first(where: { !session.scopes.contains($0) }) {
            throw RelayError(.invalidScope, "scope '\(wider)' was not granted at sign-in")
        }
        let issued = try issuer.issue(sid: record.sid, session: session, identity: identity, app: app, nonce: nil, scopes: scopes, jkt: record.jkt)
        var rotated = record
        rotated.rotatedAt = sessions.clock.now
        rotated.sealedSuccessor = try vault.seal(json: issued.response)
        try await sessions.rotate(token, to: rotated, successor: issued.refresh, ttl: sessions.ttl(for: session) ?? .seconds(1))
        try await sessions.touch(record.sid, session)
        return issued.response
    }

    /// RFC 9449 §5: a bound refresh token needs a proof by its key; an unbound one stays unbound.
    static func checkBinding(_ record: RefreshRecord, _ proof: DPoPProof?) throws {
        guard record.jkt == proof?.thumbprint else {
            throw RelayError.invalidGrant(
                record.jkt == nil ? "the refresh token is not bound to a DPoP key: refresh without a DPoP proof" : "the refresh token is bound to a DPoP key: send a proof by that key"
            )
        }
    }

    /// A session opened by an attested app instance is refreshed by that instance only: its
    /// attestation, for the same instance key, comes with every refresh.
    static func checkAttestation(_ session: SessionRecord, _ attested: ClientAttested?) throws {
        guard let key = session.attested?.thumbprint else { return }
        guard attested?.thumbprint == key else {
            throw RelayError(.invalidClientAttestation, "this session was opened by an attested app instance: refresh with that instance's client attestation")
        }
    }

    /// A refresh token that was already rotated: the same answer within the grace window (the app
    /// lost the first one), the end of the session after it (the token was stolen and replayed).
    private func answerRotated(_ record: RefreshRecord, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard record.clientID == app.clientID else { throw RelayError.invalidGrant("the refresh token was issued to another client") }
        try Self.checkBinding(record, proof)
        let age = sessions.clock.now - (record.rotatedAt ?? 0)
        if age <= Double(grace.components.seconds), let sealed = record.sealedSuccessor,
            let response = vault.open(json: sealed), let session = try await sessions.session(record.sid)
        {
            try Self.checkAttestation(session, attested)
            return response
        }
        let session = try? await sessions.session(record.sid)
        try await sessions.revoke(record.sid, reason: .refreshReuse)
        events.record(
            .refreshReused, reason: RelayError.Code.invalidGrant.rawValue, client: app.clientID, provider: session?.providerID, sid: record.sid, subject: session?.subject
        )
        RelayMetrics.securityEvent(.refreshReuse)
        logger.warning("refresh token reused after rotation; session revoked", metadata: ["client_id": "\(app.clientID)"])
        throw RelayError.invalidGrant("the refresh token was already used; the session is revoked")
    }
}
