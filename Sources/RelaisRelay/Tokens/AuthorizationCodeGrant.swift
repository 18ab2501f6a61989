import Logging
import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisStore

/// `grant_type=authorization_code` with PKCE: the code from /callback opens the session.
struct AuthorizationCodeGrant: TokenGrant {
    static let grantType = "authorization_code"

    let sessions: RelayStore
    let vault: SessionVault
    let tokens: TokenIssuer
    let events: SecurityEventLog

    func answer(_ form: FormParameters, app: AppSettings, proof: DPoPProof?, attested: ClientAttested?, logger: Logger) async throws -> JSONValue {
        guard let code = form["code"], !code.isEmpty else { throw RelayError.invalidRequest("code is missing") }
        guard let redirectURI = form["redirect_uri"], !redirectURI.isEmpty else { throw RelayError.invalidRequest("redirect_uri is missing") }
        guard let verifier = form["code_verifier"], !verifier.isEmpty else { throw RelayError.invalidRequest("code_verifier is missing (PKCE)") }
        let requester = TokenRequester(app: app, proof: proof, attested: attested)
        var presented = Presented(requester: requester, code: code, redirectURI: redirectURI, verifier: verifier)
        if SealedCode.hasSealedShape(code) { presented.sealed = await SealedCode.open(code, vault: vault) }
        let found = try await find(presented)
        let openedBy = found == nil ? try await sessionOpened(by: presented) : nil
        switch Self.decide(found?.record, openedBy: openedBy, presented, now: sessions.clock.now, lifetime: sessions.settings.sessionLifetime) {
        case .refuse(let error): throw error
        case .burn(let error):
            // Burned by its mark; a mark already set means the code was used: a replay.
            if let found, try await !sessions.burnCode(found.once), let sid = try await sessionOpened(by: presented) {
                throw try await replayed(sid, app: app, logger: logger)
            }
            throw error
        case .endAsReplayed(let sid): throw try await replayed(sid, app: app, logger: logger)
        case .open(let sid, let session):
            guard let found else { throw Self.unknown }
            return try await open(session, sid: sid, found, presented, app: app, logger: logger)
        }
    }

    /// A presented code's sign-in and what lets it open a session once; nil when the code is
    /// unknown, forged, expired, or (a stored code) consumed.
    private func find(_ presented: Presented) async throws -> (record: RelayCode, once: OneTimeKey)? {
        guard SealedCode.hasSealedShape(presented.code) else { return try await sessions.storedCode(presented.code) }
        guard let sealed = presented.sealed, sealed.expiresAt > sessions.clock.now else { return nil }
        return (sealed.record, sessions.usedMark(ofCodeFor: sealed.sid, expiresAt: sealed.expiresAt))
    }

    /// Performs `.open`. The code's used-mark is claimed in the same atomic step that writes the
    /// session: a request that lost the race finds the session the code opened, and ends it
    /// (RFC 6749 §4.1.2), in every interleaving.
    private func open(
        _ session: SessionRecord, sid: String, _ found: (record: RelayCode, once: OneTimeKey), _ presented: Presented, app: AppSettings, logger: Logger
    ) async throws -> JSONValue {
        let opening = SessionOpening(sessions: sessions, vault: vault, tokens: tokens, events: events)
        let record = found.record
        let response = try await opening.open(session, sid: sid, app: app, nonce: record.app.nonce, what: "the sign-in", via: "code", logger: logger) {
            try await sessions.open($0, sid: sid, providerSessionID: record.providerSessionID, once: found.once, also: [])
        }
        guard let response else {
            // Lost the race: decided again on what the winner left.
            let again = Self.decide(nil, openedBy: try await sessionOpened(by: presented), presented, now: sessions.clock.now, lifetime: sessions.settings.sessionLifetime)
            if case .endAsReplayed(let winner) = again { throw try await replayed(winner, app: app, logger: logger) }
            throw Self.unknown
        }
        // A step-up's new session takes the place of the old one (same person, higher level). The new
        // session is committed: ending the old one is clean-up, and its failure must not turn the
        // answer into an error (the app's retry would then be taken for a replayed code).
        if let replaced = record.replaces {
            do {
                // The devices the old session approved stay signed in, under the new one.
                try await sessions.moveApprovals(of: replaced, to: sid)
            } catch {
                logger.warning("the devices the stepped-up session approved could not be moved to the new session; they end with it", metadata: ["error": "\(error)"])
            }
            do {
                try await sessions.revoke(replaced, reason: .steppedUp)
            } catch {
                logger.warning("the stepped-up session could not be ended now; it ends at its idle timeout", metadata: ["error": "\(error)"])
            }
        }
        logger.info("session opened", metadata: ["client_id": "\(app.clientID)", "provider": "\(session.providerID)"])
        return response
    }

    /// The live session `code` opened: a sealed code names it (authenticated, expired or not), so
    /// the session exists only if this code opened it; a stored code is derived from its secret.
    private func sessionOpened(by presented: Presented) async throws -> String? {
        let code = presented.code
        if SealedCode.hasSealedShape(code) {
            guard let sid = presented.sealed?.sid, try await sessions.session(sid) != nil else { return nil }
            return sid
        }
        guard let sid = RelayStore.sessionID(in: code), let session = try await sessions.session(sid),
            let secret = await vault.openIdentityAfterSync(session.sealedIdentity)?.tokenSecret, SessionTokens.isStoredCode(code, sid: sid, secret: secret)
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
