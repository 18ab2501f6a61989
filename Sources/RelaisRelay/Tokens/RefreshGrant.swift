import Logging
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE

/// `grant_type=refresh_token`: the refresh token rotates on every use. A session's refresh tokens
/// are generations derived from its secret (``SessionTokens``), and a rotation is one
/// compare-and-set of the session record, so exactly one request rotates each generation across
/// every instance. The previous generation gets an answer within the grace window (the app lost
/// the response); any older one, or the previous after the window, ends the session (a replay).
struct RefreshGrant: TokenGrant {
    static let grantType = "refresh_token"

    let sessions: RelayStore
    let vault: SessionVault
    let tokens: TokenIssuer
    let grace: Duration
    let events: SecurityEventLog

    /// Compare-and-set attempts: each lost one means another rotation or a revocation landed
    /// since the read, and a fresh read then decides.
    static let attempts = 3

    struct Request {
        let token: String
        let scopes: [String]?
        let app: AppSettings
        let proof: DPoPProof?
        let attested: ClientAttested?
    }

    func answer(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard let token = form["refresh_token"], !token.isEmpty else { throw RelayError.invalidRequest("refresh_token is missing") }
        // RFC 6749 §6: a refresh may repeat or narrow the granted scopes, never widen them.
        let scopes = form["scope"].map { $0.split(separator: " ").map(String.init) }
        let request = Request(token: token, scopes: scopes, app: app, proof: proof, attested: attested)
        guard let (sid, generation) = SessionTokens.parseRefresh(token) else { return try await rotateLegacy(request, logger: logger) }
        for _ in 0..<Self.attempts {
            if let response = try await rotate(request, sid: sid, generation: generation, logger: logger) { return response }
        }
        throw RelayError.storeUnavailable
    }

    /// One read, its decision, and the action: a rotation's compare-and-set is nil when the
    /// session changed in between.
    private func rotate(_ request: Request, sid: String, generation: Int, logger: Logger) async throws -> JSONValue? {
        let found = try await sessions.storedSession(sid)
        var identity: SessionIdentity?
        var read: SessionRead?
        if let session = found?.record {
            let opened = try await vault.openForGrant(session.sealedIdentity, what: "the session", logger: logger)
            identity = opened
            read = SessionRead(session: session, secret: opened.tokenSecret, approverEnded: try await sessions.approverEnded(session))
        }
        let requester = TokenRequester(app: request.app, proof: request.proof, attested: request.attested)
        let presented = Presented(requester: requester, token: request.token, sid: sid, generation: generation, scopes: request.scopes)
        let decision = Self.decide(read, presented, now: sessions.clock.now, grace: grace)
        if case .refuse(let error) = decision { throw error }
        // Every other decision was made on a session read with its secret.
        guard let stored = found?.stored, let identity, let secret = identity.tokenSecret else { throw Self.unknown }
        switch decision {
        case .refuse(let error): throw error
        case .endWithApprover:
            // A step-up moves a device to its approver's successor before the approver ends: once
            // the approver is seen gone, a record that changed since the read may have been moved.
            if try await sessions.storedSession(sid)?.stored != stored { return nil }
            _ = try? await sessions.revoke(sid, reason: .approverEnded)
            throw Self.approverGone
        case .endAsReplayed(let session): throw try await replayed(sid, session, app: request.app, logger: logger)
        case .resend(let session): return try issue(request, sid: sid, session: session, identity: identity, secret: secret)
        case .rotate(let next):
            let response = try issue(request, sid: sid, session: next, identity: identity, secret: secret)
            return try await sessions.replace(sid, stored: stored, with: next) ? response : nil
        }
    }

    func issue(_ request: Request, sid: String, session: SessionRecord, identity: SessionIdentity, secret: [UInt8]) throws -> JSONValue {
        if let refusal = Self.issueRefusal(session, request.attested?.thumbprint, request.scopes) { throw refusal }
        return try tokens.issue(sid: sid, session: session, identity: identity, secret: secret, app: request.app, nonce: nil, scopes: request.scopes)
    }

    /// RFC 9449 §5, for the tokens of an earlier version (``rotateLegacy(_:logger:attempt:)``).
    static func checkBinding(_ jkt: String?, _ proof: DPoPProof?) throws {
        if let refusal = bindingRefusal(jkt, proof?.thumbprint) { throw refusal }
    }

    /// The attested instance's check alone, for the tokens of an earlier version.
    static func checkAttestation(_ session: SessionRecord, _ attested: ClientAttested?) throws {
        if let refusal = issueRefusal(session, attested?.thumbprint, nil) { throw refusal }
    }

    /// A refresh token used again after its rotation's grace window: it was stolen and replayed
    /// (or the app misbehaves), so the session ends.
    func replayed(_ sid: String, _ session: SessionRecord, app: AppSettings, logger: Logger) async throws -> RelayError {
        try await sessions.revoke(sid, reason: .refreshReuse)
        events.record(.refreshReused, reason: RelayError.Code.invalidGrant.rawValue, client: app.clientID, provider: session.providerID, sid: sid, subject: session.subject)
        RelayMetrics.securityEvent(.refreshReuse)
        logger.warning("refresh token reused after rotation; session revoked", metadata: ["client_id": "\(app.clientID)"])
        return RelayError.invalidGrant("the refresh token was already used; the session is revoked", .refreshTokenReused)
    }
}
