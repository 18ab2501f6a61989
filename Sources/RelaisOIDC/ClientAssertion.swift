import RelaisCrypto
import RelaisJOSE

/// `private_key_jwt` (RFC 7523 §2.2, OIDC Core §9): a short-lived JWT signed with Relais' client
/// key, naming the token endpoint as audience, with a fresh `jti` so it cannot be replayed.
enum ClientAssertion {
    static let type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    static func make(clientID: String, tokenEndpoint: String, key: JWK, now: Double) throws(JOSEError) -> String {
        let now = now.rounded(.down)
        let claims: [String: JSONValue] = [
            "iss": .string(clientID), "sub": .string(clientID), "aud": .string(tokenEndpoint),
            "jti": .string(SecureRandom.token(bits: 128)), "iat": .number(now), "exp": .number(now + 60),
        ]
        let algorithm: JWSAlgorithm = key.keyType == .rsa ? .rs256 : .es256
        return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: key, algorithm: algorithm, extraHeader: ["typ": .string("JWT")])
    }
}
