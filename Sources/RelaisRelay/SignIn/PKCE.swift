import RelaisCrypto

/// Proof Key for Code Exchange (RFC 7636) with S256 only: `plain` would put the verifier in the URL.
enum PKCE {
    /// 43 to 128 unreserved characters (§4.1).
    static func isValidVerifier(_ verifier: String) -> Bool {
        (43...128).contains(verifier.utf8.count) && verifier.utf8.allSatisfy(ByteScan.isUnreserved)
    }

    /// A base64url SHA-256: 43 characters without padding.
    static func isValidChallenge(_ challenge: String) -> Bool {
        challenge.utf8.count == 43 && Base64URL.decode(challenge)?.count == 32
    }

    static func challenge(for verifier: String) -> String {
        Base64URL.encode(SHA256.hash(Array(verifier.utf8)))
    }

    /// Compares in constant time.
    static func verify(_ verifier: String, against challenge: String) -> Bool {
        isValidVerifier(verifier) && ConstantTime.equals(Self.challenge(for: verifier), challenge)
    }

    static func makeVerifier() -> String { SecureRandom.token(bits: 256) }
}
