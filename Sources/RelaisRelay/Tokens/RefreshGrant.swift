import Logging
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisClock

/// `grant_type=refresh_token`: the refresh token rotates on every use. A session's refresh tokens
/// are generations derived from its secret (``SessionTokens``), and a rotation is one
/// compare-and-set of the session record, so exactly one request rotates each generation across
/// every instance. The previous generation gets an answer within the grace window (the app lost
/// the response); any older one, or the previous after the window, ends the session (a replay).
struct RefreshGrant: TokenGrant {
    static let grantType = "refresh_token"

    let sessions: SessionStore
    let vault: SessionVault
    let issuer: TokenIssuer
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

    /// One read and compare-and-set; nil when the session changed in between.
    private func rotate(_ request: Request, sid: String, generation: Int, logger: Logger) async throws -> JSONValue? {
        guard let (session, stored) = try await sessions.storedSession(sid) else { throw Self.unknown }
        let identity = try await vault.openForGrant(session.sealedIdentity, what: "the session", logger: logger)
        // The token is checked before anything about its session is told.
        guard let secret = identity.tokenSecret, generation <= session.span.generation,
            SessionTokens.isRefreshToken(request.token, sid: sid, generation: generation, secret: secret)
        else { throw Self.unknown }
        guard session.clientID == request.app.clientID else { throw RelayError.invalidGrant("the refresh token was issued to another client", .otherClient) }
        try Self.checkBinding(session.origin.dpopKey, request.proof)
        // A device session lives only while the app session that approved it does: fail closed here
        // even if ending it along with its approver did not get through.
        if try await sessions.approverEnded(session) {
            _ = try? await sessions.revoke(sid, reason: .approverEnded)
            throw RelayError.invalidGrant("the app session that approved this device has ended, and this session with it", .approverEnded)
        }
        if generation < session.span.generation {
            guard generation == session.span.generation - 1, let refreshedAt = session.span.refreshedAt,
                sessions.clock.now - refreshedAt <= Double(grace.components.seconds)
            else { throw try await replayed(sid, session, app: request.app, logger: logger) }
            // Within the grace window: the live generation again, with a new access token.
            return try issue(request, sid: sid, session: session, identity: identity, secret: secret)
        }
        var next = session
        next.span.generation += 1
        next.span.refreshedAt = sessions.clock.now
        let response = try issue(request, sid: sid, session: next, identity: identity, secret: secret)
        return try await sessions.replace(sid, stored: stored, with: next) ? response : nil
    }

    func issue(_ request: Request, sid: String, session: SessionRecord, identity: SessionIdentity, secret: [UInt8]) throws -> JSONValue {
        try Self.checkAttestation(session, request.attested)
        if let scopes = request.scopes, let wider = scopes.first(where: { !session.scopes.contains($0) }) {
            throw RelayError(.invalidScope, "scope '\(wider)' was not granted at sign-in")
        }
        return try issuer.issue(sid: sid, session: session, identity: identity, secret: secret, app: request.app, nonce: nil, scopes: request.scopes)
    }

    static let unknown = RelayError.invalidGrant("the refresh token is unknown, or its session has ended", .sessionEnded)

    /// RFC 9449 §5: a bound refresh token needs a proof by its key; an unbound one stays unbound.
    static func checkBinding(_ jkt: String?, _ proof: DPoPProof?) throws {
        guard jkt == proof?.thumbprint else {
            throw RelayError.invalidGrant(
                jkt == nil ? "the refresh token is not bound to a DPoP key: refresh without a DPoP proof" : "the refresh token is bound to a DPoP key: send a proof by that key",
                .dpopKeyMismatch
            )
        }
    }

    /// A session opened by an attested app instance is refreshed by that instance only: its
    /// attestation, for the same instance key, comes with every refresh.
    static func checkAttestation(_ session: SessionRecord, _ attested: ClientAttested?) throws {
        guard let key = session.origin.attested?.thumbprint else { return }
        guard attested?.thumbprint == key else {
            throw RelayError(.invalidClientAttestation, "this session was opened by an attested app instance: refresh with that instance's client attestation")
        }
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
