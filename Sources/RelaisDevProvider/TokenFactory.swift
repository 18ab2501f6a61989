import FoundationEssentials
import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// Builds the id_tokens and userinfo responses FranceConnect would send, then applies the armed
/// faults: claims altered before signing, the signature or header broken after.
struct TokenFactory: Sendable {
    let issuer: String
    let mode: DevProviderConfiguration.Mode
    let keys: SigningKeys
    let idTokenLifetime: Duration

    /// Claims of an id_token (OIDC Core §2, FranceConnect's nine claims).
    func idTokenClaims(
        grant: CodeGrant, subject: String, accessToken: String, client: DevProviderConfiguration.Client, now: Int, faults: [Fault], includeSessionID: Bool = false
    ) throws -> [String: JSONValue] {
        // OIDC Core §3.1.3.6: with the hash of the alg the id_token is signed with.
        let algorithm = signingAlgorithm(for: client)
        var claims: [String: JSONValue] = [
            "iss": .string(issuer),
            "sub": .string(subject),
            "aud": .string(grant.request.clientID),
            "iat": .number(Double(now)),
            "exp": .number(Double(now) + Double(idTokenLifetime.components.seconds)),
            "auth_time": .number(Double(grant.authTime)),
            "nonce": .string(grant.request.nonce),
            "acr": .string(grant.request.acr),
            "at_hash": .string(try algorithm.tokenHash(accessToken)),
        ]
        if grant.request.wantsAMR { claims["amr"] = .array([.string("pwd")]) }
        if includeSessionID { claims["sid"] = .string(Self.publicSessionID(grant.sessionID)) }
        apply(faults, on: .idToken, to: &claims, now: now)
        if faults.has(.wrongNonce, on: .idToken) { claims["nonce"] = .string(grant.request.nonce + "-not-yours") }
        if faults.has(.staleAuthTime, on: .idToken) { claims["auth_time"] = .number(Double(now - 3600)) }
        if faults.has(.noAuthTime, on: .idToken) { claims["auth_time"] = nil }
        if faults.has(.wrongAccessTokenHash, on: .idToken) { claims["at_hash"] = .string(try algorithm.tokenHash(accessToken + "-not-yours")) }
        return claims
    }

    /// The `sid` clients see: derived from the browser session's id, which stays a secret (it is
    /// the session cookie's value).
    static func publicSessionID(_ sessionID: String) -> String {
        String(SHA256.hexHash("sid\u{0}" + sessionID).prefix(32))
    }

    /// Claims of a userinfo response: `sub`, the claims the granted scopes release, and (as a JWT)
    /// `iss`, `aud`, `iat`, `exp`.
    func userinfoClaims(grant: AccessGrant, identity: TestIdentity, now: Int, faults: [Fault]) -> [String: JSONValue] {
        var claims: [String: JSONValue] = ["sub": .string(grant.subject)]
        for name in ScopeCatalogue.claims(for: grant.scopes, in: mode.scopeCatalogue) {
            // FranceConnect+'s rnipp_* claims are the register's copy of the identity: here, the
            // test identity's own values.
            let source = name.hasPrefix("rnipp_") ? String(name.dropFirst("rnipp_".count)) : name
            if source == "given_name_array" {
                if let given = identity.claims["given_name"] { claims[name] = .array(given.split(separator: " ").map { .string(String($0)) }) }
            } else if let value = identity.claims[source] {
                claims[name] = .string(value)
            }
        }
        if mode != .v1 {
            claims["iss"] = .string(issuer)
            claims["aud"] = .string(grant.clientID)
            claims["iat"] = .number(Double(now))
            claims["exp"] = .number(Double(now) + Double(idTokenLifetime.components.seconds))
        }
        apply(faults, on: .userinfo, to: &claims, now: now)
        if faults.has(.subMismatch, on: .userinfo) { claims["sub"] = .string(grant.subject + "-someone-else") }
        return claims
    }

    private func apply(_ faults: [Fault], on target: Fault.Target, to claims: inout [String: JSONValue], now: Int) {
        if faults.has(.wrongIssuer, on: target) { claims["iss"] = .string(issuer + "-impostor") }
        if faults.has(.wrongAudience, on: target) { claims["aud"] = .string("another-client") }
        if faults.has(.expired, on: target) {
            claims["iat"] = .number(Double(now - 600))
            claims["exp"] = .number(Double(now - 300))
        }
    }

    /// Signs (and for FranceConnect+, encrypts) `claims` for `client`.
    func seal(_ claims: [String: JSONValue], for client: DevProviderConfiguration.Client, target: Fault.Target, faults: [Fault], encryptTo recipient: JWK?) throws -> String {
        let payload = JSONValue.object(claims).serialized()
        var token: String
        if faults.has(.algNone, on: target) {
            token = Base64URL.encode(JSONValue.object(["alg": .string("none"), "typ": .string("JWT")]).serialized()) + "." + Base64URL.encode(payload) + "."
        } else {
            let key: JWK
            let algorithm = signingAlgorithm(for: client)
            if mode == .v1 {
                key = JWK(symmetric: Array((client.secret ?? "").utf8))
            } else {
                let current = keys.current(algorithm)
                if faults.has(.missingKeyID, on: target), let pem = current.privateKeyPEM() {
                    key = try JWK(pem: pem, keyID: nil, use: "sig", algorithm: algorithm.rawValue)
                } else {
                    key = current
                }
            }
            // FranceConnect's JWS header has exactly alg and kid (api-token.feature: "l'entête du JWS a 2 propriétés").
            token = try JWS.sign(payload: payload, with: key, algorithm: algorithm)
            if faults.has(.badSignature, on: target) { token = Self.breakSignature(token) }
        }
        if let recipient {
            // FranceConnect+'s JWE protected header names the issuer and the audience beside alg, enc,
            // cty and kid (api-token.feature, api-userinfo.feature: "l'entête du JWE a 6 propriétés").
            token = try JWE.encrypt(
                Array(token.utf8), to: recipient, keyAlgorithm: client.encryptionAlgorithm, contentAlgorithm: .a256GCM,
                extraHeader: ["cty": .string("JWT"), "iss": .string(issuer), "aud": .string(client.id)]
            )
        }
        return token
    }

    /// What `client`'s id_tokens and signed userinfo are signed with: FranceConnect v1 signs with
    /// the client secret (HS256), FranceConnect+ with ES256, the others as the client is configured.
    func signingAlgorithm(for client: DevProviderConfiguration.Client) -> JWSAlgorithm {
        switch mode {
        case .v1: .hs256
        case .fcplus: .es256
        default: client.idTokenAlgorithm
        }
    }

    /// Flips bits of the signature while keeping valid base64url, so only the signature check fails.
    static func breakSignature(_ token: String) -> String {
        guard let dot = token.lastIndex(of: "."), var signature = Base64URL.decode(String(token[token.index(after: dot)...])), !signature.isEmpty else {
            return token
        }
        signature[signature.count / 2] ^= 0x5A
        return String(token[...dot]) + Base64URL.encode(signature)
    }
}
