import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// Mints Relais' own tokens. The access token is a JWT (RFC 9068 profile, `typ: at+jwt`) signed by
/// the active key, that APIs verify offline with /jwks.json; the id_token carries the identity
/// claims the app's scopes grant, signed RS256 by the RSA key unless the app asks for ES256.
struct TokenMinter: Sendable {
    let issuer: String
    let keys: RelayKeys
    let clock: any RelaisClock

    struct Minted {
        var accessToken: String
        var idToken: String
        var expiresIn: Int
    }

    func mint(sid: String, session: SessionRecord, identity: SessionIdentity, app: AppSettings, nonce: String?, jkt: String? = nil) throws -> Minted {
        let keys = keys.ring
        let now = clock.now.rounded(.down)
        let lifetime = Double(app.accessTokenLifetime.components.seconds)
        let scope = session.scopes.joined(separator: " ")
        let audiences = Self.audiences(of: app, scopes: session.scopes, issuer: issuer)
        var access: [String: JSONValue] = [
            "iss": .string(issuer), "sub": .string(session.subject),
            "aud": audiences.count == 1 ? .string(audiences[0]) : .array(audiences.map { .string($0) }), "client_id": .string(app.clientID),
            "scope": .string(scope), "sid": .string(sid), "jti": .string(SecureRandom.token(bits: 128)),
            "iat": .number(now), "exp": .number(now + lifetime), "idp": .string(session.providerID),
        ]
        if let acr = session.acr { access["acr"] = .string(acr) }
        // RFC 9470 / 9068: resources compare it with their max_age.
        if let authTime = identity.authTime { access["auth_time"] = .number(authTime) }
        if let jkt { access["cnf"] = .object(["jkt": .string(jkt)]) }
        // APIs and `/auth?attested=1` tell tokens of attested app instances by this claim.
        if let attested = session.origin.attested { access["attested"] = .string(attested.platform) }
        let accessToken = try JWS.sign(
            payload: JSONValue.object(access).serialized(), with: keys.activeSigningKey, algorithm: keys.activeAlgorithm,
            extraHeader: ["typ": .string("at+jwt")]
        )

        var id: [String: JSONValue] = [
            "iss": .string(issuer), "sub": .string(session.subject), "aud": .string(app.clientID), "iat": .number(now),
            "exp": .number(now + lifetime), "sid": .string(sid), "idp": .string(session.providerID),
            "at_hash": .string(Base64URL.encode(SHA256.hash(Array(accessToken.utf8)).prefix(16))),
        ]
        if let acr = session.acr { id["acr"] = .string(acr) }
        if let amr = identity.amr { id["amr"] = .array(amr.map { .string($0) }) }
        if let authTime = identity.authTime { id["auth_time"] = .number(authTime) }
        if let nonce { id["nonce"] = .string(nonce) }
        for (name, value) in Self.grantedClaims(identity, scopes: session.scopes) { id[name] = value }
        // RS256 unless the app asked for ES256 (OpenID Connect Discovery 1.0 §3, Dynamic Registration §2).
        let signer = keys.idTokenSigner(app.idTokenAlgorithm)
        let idToken = try JWS.sign(payload: JSONValue.object(id).serialized(), with: signer.key, algorithm: signer.algorithm, extraHeader: ["typ": .string("JWT")])
        return Minted(accessToken: accessToken, idToken: idToken, expiresIn: Int(lifetime))
    }

    /// The `aud` of the app's access tokens (and what a web session of the app may open at `/auth`):
    /// its APIs, and Relais too when the token may read /userinfo, which refuses the others.
    static func audiences(of app: AppSettings, scopes: [String], issuer: String) -> [String] {
        app.audiences + (scopes.contains("openid") && !app.audiences.contains(issuer) ? [issuer] : [])
    }

    /// The identity claims the scopes release, nothing else.
    static func grantedClaims(_ identity: SessionIdentity, scopes: [String]) -> [String: JSONValue] {
        let allowed = ScopeCatalogue.claims(for: scopes)
        return identity.claims.filter { allowed.contains($0.key) }
    }
}
