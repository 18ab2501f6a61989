import COpenSSL
import RelaisCrypto

/// Makes a new private signing key for an algorithm, named by a key ID (nil: none).
///
/// ``JWK/freshKey`` generates each key anew, as a deployment does. Code that makes keys when it
/// starts (a relay or a provider in development) takes one of these so that a test process can
/// hand out keys it generated once: an RSA-2048 key costs 0.2 to 1 s of CPU, a test process starts
/// hundreds of servers, and the CPU spent stalls every other test on the machine.
public typealias KeyGenerator = @Sendable (_ algorithm: JWSAlgorithm, _ keyID: String?) throws -> JWK

extension JWK {
    /// The ``KeyGenerator`` that generates every key anew with
    /// ``generate(for:keyID:use:pinAlgorithm:)`` (the algorithm pinned, `use` `sig`).
    public static let freshKey: KeyGenerator = { algorithm, keyID in try generate(for: algorithm, keyID: keyID) }

    /// Generates a new private key suited to `algorithm`: RSA 2048 (3072 for PS384, 4096 for
    /// PS512/RS512), EC on the algorithm's curve, Ed25519, or a random HMAC secret of the hash length.
    /// For Relais' own signing keys, the development provider and tests.
    /// `use` defaults to `sig`; pass `"enc"` (and `pinAlgorithm: false`) for an ECDH-ES or RSA-OAEP decryption key.
    public static func generate(for algorithm: JWSAlgorithm, keyID: String? = nil, use: String? = "sig", pinAlgorithm: Bool = true) throws(JOSEError) -> JWK {
        let pinned = pinAlgorithm ? algorithm.rawValue : nil
        switch algorithm.family {
        case .hmac:
            return JWK(symmetric: SecureRandom.bytes(algorithm.hashLength), keyID: keyID, algorithm: pinned)
        case .edDSA:
            return try JWK(openSSLKey: try generate(type: "ED25519") { _ in 1 }, keyID: keyID, use: use, algorithm: pinned)
        case .ecdsa(let curve):
            let key = try generate(type: "EC") { context in EVP_PKEY_CTX_set_group_name(context, curve.openSSLGroup) }
            return try JWK(openSSLKey: key, keyID: keyID, use: use, algorithm: pinned)
        case .rsaPKCS1, .rsaPSS:
            let bits: Int32 =
                switch algorithm {
                case .ps384: 3072
                case .ps512, .rs512: 4096
                default: 2048
                }
            let key = try generate(type: "RSA") { context in EVP_PKEY_CTX_set_rsa_keygen_bits(context, bits) }
            return try JWK(openSSLKey: key, keyID: keyID, use: use, algorithm: pinned)
        }
    }

    /// An EC key pair on `curve` (ECDH-ES ephemeral keys).
    static func generateEC(curve: Curve) throws(JOSEError) -> JWK {
        let key = try generate(type: "EC") { context in EVP_PKEY_CTX_set_group_name(context, curve.openSSLGroup) }
        return try JWK(openSSLKey: key, keyID: nil, use: nil, algorithm: nil)
    }

    private static func generate(type: String, configure: (OpaquePointer) -> Int32) throws(JOSEError) -> OpenSSLKey {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, type, nil) else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "no OpenSSL key type \(type)")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, configure(context) == 1, EVP_PKEY_generate(context, &key) == 1, let key else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "\(type) key generation failed")
        }
        return OpenSSLKey(taking: key)
    }
}
