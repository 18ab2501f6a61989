import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// A new refresh token and what it stands for, not yet stored: the grant stores it in the same
/// atomic step as the change it belongs to (a session opened, a token rotated).
struct IssuedRefresh: Sendable {
    let token: String
    let record: RefreshRecord
}

/// Mints a token response for a session; the caller stores its refresh token.
struct TokenIssuer: Sendable {
    let minter: TokenMinter

    struct Issued: Sendable {
        let response: JSONValue
        let refresh: IssuedRefresh
    }

    /// `scopes` narrows the tokens below the session's (RFC 6749 §6); the session keeps its own.
    /// With `jkt` (a DPoP key's thumbprint) the access token is bound to it (`cnf.jkt`,
    /// `token_type: DPoP`) and so is the refresh token.
    func issue(
        sid: String, session: SessionRecord, identity: SessionIdentity, app: AppSettings, nonce: String?, scopes: [String]? = nil, jkt: String? = nil
    ) throws -> Issued {
        var granted = session
        if let scopes { granted.scopes = scopes }
        let minted = try minter.mint(sid: sid, session: granted, identity: identity, app: app, nonce: nonce, jkt: jkt)
        let refreshToken = SessionStore.newToken(for: sid)
        let response: JSONValue = .object([
            "access_token": .string(minted.accessToken), "token_type": .string(jkt == nil ? "Bearer" : "DPoP"), "expires_in": .number(Double(minted.expiresIn)),
            "refresh_token": .string(refreshToken), "id_token": .string(minted.idToken), "scope": .string(granted.scopes.joined(separator: " ")),
        ])
        let record = RefreshRecord(sid: sid, clientID: app.clientID, jkt: jkt)
        return Issued(response: response, refresh: IssuedRefresh(token: refreshToken, record: record))
    }
}
