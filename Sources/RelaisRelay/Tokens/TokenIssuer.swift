import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// Mints a token response for a session; the caller stores the session it describes.
struct TokenIssuer: Sendable {
    let minter: TokenMinter

    /// `scopes` narrows the tokens below the session's (RFC 6749 §6); the session keeps its own.
    /// The refresh token is the session's generation `session.span.generation` (``SessionTokens``);
    /// with a DPoP key on the session (`origin.dpopKey`) the access token is bound to it (`cnf.jkt`,
    /// `token_type: DPoP`) and so is the refresh token.
    func issue(sid: String, session: SessionRecord, identity: SessionIdentity, secret: [UInt8], app: AppSettings, nonce: String?, scopes: [String]? = nil) throws -> JSONValue {
        var granted = session
        if let scopes { granted.scopes = scopes }
        let jkt = session.origin.dpopKey
        let minted = try minter.mint(sid: sid, session: granted, identity: identity, app: app, nonce: nonce, jkt: jkt)
        let refreshToken = SessionTokens.refreshToken(sid: sid, generation: session.span.generation, secret: secret)
        return .object([
            "access_token": .string(minted.accessToken), "token_type": .string(jkt == nil ? "Bearer" : "DPoP"), "expires_in": .number(Double(minted.expiresIn)),
            "refresh_token": .string(refreshToken), "id_token": .string(minted.idToken), "scope": .string(granted.scopes.joined(separator: " ")),
        ])
    }
}
