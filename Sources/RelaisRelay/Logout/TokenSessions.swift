import RelaisClock
import RelaisConfig
import RelaisJOSE

/// Finds the session a token names, for revocation and logout: a refresh token through its
/// record, one of Relais' own access tokens or id_tokens through its signed `sid` (expired ones
/// too: revocation and logout come late).
struct TokenSessions: Sendable {
    let sessions: RelayStore
    let vault: SessionVault
    let keys: RelayKeys
    let issuer: String

    /// The session a refresh or access token of `clientID` belongs to; nil for anything else.
    /// `hint` (RFC 7009 §2.1 `token_type_hint`) only orders the lookups: a token of the other
    /// type is still found.
    func session(ofToken token: String, clientID: String, hint: String?) async throws -> String? {
        if hint == "access_token", let sid = session(ofAccessToken: token, clientID: clientID) { return sid }
        if let sid = try await session(ofRefreshToken: token, clientID: clientID) { return sid }
        return hint == "access_token" ? nil : session(ofAccessToken: token, clientID: clientID)
    }

    private func session(ofRefreshToken token: String, clientID: String) async throws -> String? {
        // Any generation the session issued names it, as every rotated token did before.
        if let (sid, generation) = SessionTokens.parseRefresh(token) {
            guard let session = try await sessions.session(sid), session.clientID == clientID, generation <= session.span.generation,
                let secret = await vault.openIdentityAfterSync(session.sealedIdentity)?.tokenSecret,
                SessionTokens.isRefreshToken(token, sid: sid, generation: generation, secret: secret)
            else { return nil }
            return sid
        }
        guard let record = try await sessions.earlierVersionRefreshRecord(token) else { return nil }
        return record.clientID == clientID ? record.sid : nil
    }

    /// An expired access token still names its grant: revoking it ends the session when that
    /// still exists (RFC 7009 §2.1 lets revocation reach the whole grant).
    /// Only a token minted for Relais (its `aud` names the issuer): an API that received one minted
    /// for it alone must not end the person's session with it.
    private func session(ofAccessToken token: String, clientID: String) -> String? {
        var policy = lateTokenPolicy(audience: issuer)
        policy.checkAuthorizedParty = false  // access tokens name their app in client_id (RFC 9068)
        guard let claims = verified(token, policy), claims.string("client_id") == clientID else { return nil }
        return claims.string("sid")
    }

    /// The session named by one of Relais' own id_tokens for `clientID`, however old.
    func session(ofIDToken token: String, clientID: String) -> String? {
        let policy = lateTokenPolicy(audience: clientID)
        return verified(token, policy)?.string("sid")
    }

    /// What a logout's `id_token_hint` names.
    enum LogoutHint {
        /// Not one of Relais' id_tokens for this app: it names nothing.
        case none
        /// It names a session that has ended: nothing left to end.
        case ended
        /// It names the session `POST /logout` ended moments ago: the provider's remains.
        case signedOut(sid: String, SessionRecord)
        /// Signed by Relais for this app, but older than any session lives, or minted for another
        /// session than the live one it names: refused, never acted on.
        case refused(String, PageMessage)
        case live(sid: String, SessionRecord)
    }

    /// An `id_token_hint` at logout: it must be younger than a session's absolute lifetime, and its
    /// session must be the one it was minted for (same app, same person, begun before it).
    func logoutHint(_ token: String, clientID: String) async throws -> LogoutHint {
        let policy = lateTokenPolicy(audience: clientID)
        guard let claims = verified(token, policy), let sid = claims.string("sid"), let issuedAt = claims["iat"]?.numberValue else { return .none }
        let lifetime = Double(sessions.settings.sessionLifetime.components.seconds)
        guard sessions.clock.now - issuedAt <= lifetime else { return .refused("The id_token_hint is older than any session lives.", .logoutHintTooOld) }
        func minted(for session: SessionRecord) -> Bool {
            session.clientID == clientID && claims.string("sub") == session.subject && issuedAt + 2 >= session.span.createdAt
        }
        guard let session = try await sessions.session(sid) else {
            guard let gone = try await sessions.signedOutSession(sid), minted(for: gone) else { return .ended }
            return .signedOut(sid: sid, gone)
        }
        guard minted(for: session) else { return .refused("The id_token_hint was not issued for this session.", .logoutHintOtherSession) }
        return .live(sid: sid, session)
    }

    /// The app an id_token of Relais' was issued to (its one `aud`), for a logout request that
    /// names no `client_id`: OpenID Connect RP-Initiated Logout makes it optional beside the hint,
    /// and AppAuth does not send it. nil when the hint is not Relais' own, or names several.
    func clientOfLogoutHint(_ token: String) -> String? {
        let policy = lateTokenPolicy(audience: nil)
        guard let claims = verified(token, policy), claims.audience.count == 1 else { return nil }
        return claims.audience[0]
    }

    private var now: @Sendable () -> Double { { [clock = sessions.clock] in clock.now } }

    /// One of Relais' own tokens however old: revocation and logout come late, so neither expiry
    /// nor age refuses it here (each caller bounds what it accepts).
    private func lateTokenPolicy(audience: String?) -> ClaimsPolicy {
        var policy = ClaimsPolicy(issuer: issuer, audience: audience, now: now)
        policy.requireExpiration = false
        policy.leeway = .seconds(365 * 86400)
        return policy
    }

    private func verified(_ token: String, _ policy: ClaimsPolicy) -> VerifiedClaims? {
        guard let jws = try? JWS.parse(token), (try? jws.verify(with: keys.ring.signingKeys)) != nil else { return nil }
        return try? policy.validate(jws)
    }
}
