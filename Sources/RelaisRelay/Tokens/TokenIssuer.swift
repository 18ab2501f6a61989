import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// Mints a token response for a session and stores its new refresh token.
struct TokenIssuer: Sendable {
    let minter: TokenMinter
    let sessions: SessionStore

    /// `scopes` narrows the tokens below the session's (RFC 6749 §6); the session keeps its own.
    func issue(sid: String, session: SessionRecord, identity: SessionIdentity, app: AppSettings, nonce: String?, scopes: [String]? = nil) async throws -> JSONValue {
        var granted = session
        if let scopes { granted.scopes = scopes }
        let minted = try minter.mint(sid: sid, session: granted, identity: identity, app: app, nonce: nonce)
        let refreshToken = SecureRandom.token(bits: 256)
        try await sessions.saveRefresh(RefreshRecord(sid: sid, clientID: app.clientID), token: refreshToken, ttl: sessions.ttl(for: session) ?? .seconds(1))
        return .object([
            "access_token": .string(minted.accessToken), "token_type": .string("Bearer"), "expires_in": .number(Double(minted.expiresIn)),
            "refresh_token": .string(refreshToken), "id_token": .string(minted.idToken), "scope": .string(granted.scopes.joined(separator: " ")),
        ])
    }
}
