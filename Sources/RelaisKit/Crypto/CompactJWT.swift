import Crypto
import Foundation

/// JWTs the app signs with its instance key: DPoP proofs and attestation PoPs (ES256, compact form).
enum CompactJWT {
    static func sign(header: [(String, JSONScalar)], claims: [(String, JSONScalar)], key: any ProofKey) throws -> String {
        let input = Base64URL.encode(Data(JSONReading.serialize(header).utf8)) + "." + Base64URL.encode(Data(JSONReading.serialize(claims).utf8))
        return input + "." + Base64URL.encode(try key.sign(Data(input.utf8)))
    }

    /// The payload of a JWT, unverified (the app reads its own tokens' `exp`, `acr`; Relais checks them).
    static func claims(_ token: String) -> [String: KitJSON]? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])) else { return nil }
        return JSONReading.object(payload)
    }

    /// A new random identifier (`jti`, PKCE verifier, state): `bits` of randomness, base64url.
    static func random(bits: Int = 256) -> String {
        var generator = SystemRandomNumberGenerator()
        return Base64URL.encode(Data((0..<(bits / 8)).map { _ in UInt8.random(in: 0...255, using: &generator) }))
    }

    static func sha256(_ text: String) -> String { Base64URL.encode(Data(SHA256.hash(data: Data(text.utf8)))) }
}
