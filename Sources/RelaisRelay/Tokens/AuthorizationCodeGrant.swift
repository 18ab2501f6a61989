import Logging
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// `grant_type=authorization_code` with PKCE: the code from /callback opens the session.
struct AuthorizationCodeGrant: Sendable {
    let sessions: SessionStore
    let vault: SessionVault
    let issuer: TokenIssuer

    func redeem(_ form: FormParameters, app: AppSettings, logger: Logger) async throws -> JSONValue {
        guard let code = form["code"], !code.isEmpty else { throw RelayError.invalidRequest("code is missing") }
        guard let redirectURI = form["redirect_uri"], !redirectURI.isEmpty else { throw RelayError.invalidRequest("redirect_uri is missing") }
        guard let verifier = form["code_verifier"], !verifier.isEmpty else { throw RelayError.invalidRequest("code_verifier is missing (PKCE)") }
        guard let record = try await sessions.takeCode(code) else {
            // A code used twice is a stolen or replayed code: the session it opened ends (RFC 6749 §4.1.2).
            if let sid = try await sessions.sessionOpened(byUsedCode: code) {
                try await sessions.revoke(sid, reason: .codeReplay)
                RelayMetrics.securityEvent(.codeReplay)
                logger.warning("authorization code replayed; session revoked", metadata: ["client_id": "\(app.clientID)"])
                throw RelayError.invalidGrant("the code was already used; the session it opened is revoked")
            }
            throw RelayError.invalidGrant("the code is unknown or expired")
        }
        guard record.app.clientID == app.clientID else { throw RelayError.invalidGrant("the code was issued to another client") }
        guard record.app.redirectURI == redirectURI else { throw RelayError.invalidGrant("redirect_uri differs from the authorization request") }
        guard PKCE.verify(verifier, against: record.app.codeChallenge) else { throw RelayError.invalidGrant("code_verifier does not match the code_challenge") }
        guard let identity = vault.open(SessionIdentity.self, record.sealedIdentity) else {
            throw RelayError(.serverError, "the sign-in cannot be opened (session key missing)")
        }
        let session = sessions.newSession(for: record)
        let sid = try await sessions.open(session, providerSessionID: record.providerSessionID)
        do {
            try await sessions.markCodeUsed(code, sid: sid)
            let response = try await issuer.issue(sid: sid, session: session, identity: identity, app: app, nonce: record.app.nonce)
            RelayMetrics.sessionOpened(client: app.clientID)
            logger.info("session opened", metadata: ["client_id": "\(app.clientID)", "provider": "\(session.providerID)"])
            return response
        } catch {
            // No half-open session: without its refresh token nobody could use or end it.
            _ = try? await sessions.revoke(sid, reason: .aborted)
            throw error
        }
    }
}
