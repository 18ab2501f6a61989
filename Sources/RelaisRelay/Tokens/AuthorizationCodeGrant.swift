import Logging
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// `grant_type=authorization_code` with PKCE: the code from /callback opens the session.
struct AuthorizationCodeGrant: TokenGrant {
    static let grantType = "authorization_code"

    let sessions: SessionStore
    let vault: SessionVault
    let issuer: TokenIssuer
    let events: SecurityEventLog

    func answer(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard let code = form["code"], !code.isEmpty else { throw RelayError.invalidRequest("code is missing") }
        guard let redirectURI = form["redirect_uri"], !redirectURI.isEmpty else { throw RelayError.invalidRequest("redirect_uri is missing") }
        guard let verifier = form["code_verifier"], !verifier.isEmpty else { throw RelayError.invalidRequest("code_verifier is missing (PKCE)") }
        guard let record = try await sessions.peekCode(code) else {
            if let sid = try await sessionOpened(by: code) { throw try await replayed(sid, app: app, logger: logger) }
            throw RelayError.invalidGrant("the code is unknown or expired")
        }
        do {
            guard record.app.clientID == app.clientID else { throw RelayError.invalidGrant("the code was issued to another client") }
            guard record.app.redirectURI == redirectURI else { throw RelayError.invalidGrant("redirect_uri differs from the authorization request") }
            guard PKCE.verify(verifier, against: record.app.redemption.codeChallenge) else { throw RelayError.invalidGrant("code_verifier does not match the code_challenge") }
            if let bound = record.app.redemption.dpopJKT, proof?.thumbprint != bound {
                throw RelayError.invalidGrant("the code is bound to a DPoP key (dpop_jkt): send a proof by that key")
            }
        } catch {
            // A code is good for one try: a failed one burns it.
            try await sessions.discardCode(code)
            throw error
        }
        let opened = try await vault.openForGrant(record.sealedIdentity, what: "the sign-in", logger: logger)
        // Found under its session's tag, so the code names its session.
        guard let sid = SessionStore.sessionID(in: code) else { throw RelayError.invalidGrant("the code is unknown or expired") }
        let (identity, sealed, secret) = try vault.withTokenSecret(opened, sealed: record.sealedIdentity)
        var session = sessions.newSession(for: record)
        session.sealedIdentity = sealed
        session.origin.attested = attested
        session.origin.dpopKey = proof?.thumbprint
        let response = try issuer.issue(sid: sid, session: session, identity: identity, secret: secret, app: app, nonce: record.app.nonce)
        // The code is consumed in the same atomic step that writes the session: a request that lost
        // the race finds the session the code opened, and ends it (RFC 6749 §4.1.2), in every interleaving.
        guard let evicted = try await sessions.redeem(code: code, opening: session, sid: sid, providerSessionID: record.providerSessionID) else {
            guard let winner = try await sessionOpened(by: code) else { throw RelayError.invalidGrant("the code is unknown or expired") }
            throw try await replayed(winner, app: app, logger: logger)
        }
        RelayMetrics.sessionOpened(client: app.clientID)
        // A step-up's new session takes the place of the old one (same person, higher level). The new
        // session is committed: ending the old one is clean-up, and its failure must not turn the
        // answer into an error (the app's retry would then be taken for a replayed code).
        if let replaced = record.replaces {
            do {
                try await sessions.revoke(replaced, reason: .steppedUp)
            } catch {
                logger.warning("the stepped-up session could not be ended now; it ends at its idle timeout", metadata: ["error": "\(error)"])
            }
        }
        logger.info("session opened", metadata: ["client_id": "\(app.clientID)", "provider": "\(session.providerID)"])
        events.record(
            .sessionOpened, client: app.clientID, provider: session.providerID, sid: sid, subject: session.subject,
            (session.acr.map { [("acr", $0)] } ?? []) + [("via", "code")]
        )
        events.sessionsEvicted(evicted, client: app.clientID, provider: session.providerID, subject: session.subject, limit: sessions.settings.maxSessionsPerSubject)
        return response
    }

    /// The live session `code` opened, when it is that session's code (derived from its secret).
    private func sessionOpened(by code: String) async throws -> String? {
        guard let sid = SessionStore.sessionID(in: code), let session = try await sessions.session(sid),
            let secret = await vault.openIdentityAfterSync(session.sealedIdentity)?.tokenSecret, SessionTokens.isCode(code, sid: sid, secret: secret)
        else { return nil }
        return sid
    }

    /// A code used twice is a stolen or replayed code: the session it opened ends.
    private func replayed(_ sid: String, app: AppSettings, logger: Logger) async throws -> RelayError {
        let session = try? await sessions.session(sid)
        try await sessions.revoke(sid, reason: .codeReplay)
        events.record(.codeReplayed, reason: RelayError.Code.invalidGrant.rawValue, client: app.clientID, provider: session?.providerID, sid: sid, subject: session?.subject)
        RelayMetrics.securityEvent(.codeReplay)
        logger.warning("authorization code replayed; session revoked", metadata: ["client_id": "\(app.clientID)"])
        return RelayError.invalidGrant("the code was already used; the session it opened is revoked")
    }
}
