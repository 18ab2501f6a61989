/// JWE key-management algorithms (RFC 7518 §4), named by their `alg` header value: how the
/// content-encryption key reaches the recipient.
///
/// RSA1_5 is deliberately absent: its padding check is an oracle (Bleichenbacher), and a token
/// that uses it fails to parse with ``JOSEError/unsupportedAlgorithm(_:)``.
public enum JWEKeyAlgorithm: String, Sendable, CaseIterable {
    /// RSAES-OAEP with SHA-1 and MGF1 with SHA-1, to the recipient's RSA key.
    case rsaOAEP = "RSA-OAEP"
    /// RSAES-OAEP with SHA-256 and MGF1 with SHA-256, to the recipient's RSA key.
    case rsaOAEP256 = "RSA-OAEP-256"
    /// ECDH-ES key agreement; the derived key is the content key (no encrypted key segment).
    case ecdhES = "ECDH-ES"
    /// ECDH-ES key agreement, then AES-128 key wrap of the content key.
    case ecdhESA128KW = "ECDH-ES+A128KW"
    /// ECDH-ES key agreement, then AES-256 key wrap of the content key.
    case ecdhESA256KW = "ECDH-ES+A256KW"
    /// AES-128 key wrap with a shared 16-byte key.
    case a128KW = "A128KW"
    /// AES-256 key wrap with a shared 32-byte key.
    case a256KW = "A256KW"
    /// The shared key is the content key itself.
    case direct = "dir"

    var keyType: JWK.KeyType {
        switch self {
        case .rsaOAEP, .rsaOAEP256: .rsa
        case .ecdhES, .ecdhESA128KW, .ecdhESA256KW: .ec
        case .a128KW, .a256KW, .direct: .oct
        }
    }

    /// Key-wrapping key length in bytes for the AES-KW variants.
    var wrapKeyLength: Int? {
        switch self {
        case .a128KW, .ecdhESA128KW: 16
        case .a256KW, .ecdhESA256KW: 32
        default: nil
        }
    }
}

/// JWE content-encryption algorithms (RFC 7518 §5), named by their `enc` header value. All are
/// authenticated: the header is bound to the ciphertext as additional data.
public enum JWEContentAlgorithm: String, Sendable, CaseIterable {
    /// AES-128 in Galois/Counter Mode.
    case a128GCM = "A128GCM"
    /// AES-256 in Galois/Counter Mode.
    case a256GCM = "A256GCM"
    /// AES-128-CBC with HMAC-SHA-256 (encrypt-then-MAC, RFC 7518 §5.2.3).
    case a128CBCHS256 = "A128CBC-HS256"
    /// AES-256-CBC with HMAC-SHA-512 (encrypt-then-MAC, RFC 7518 §5.2.5).
    case a256CBCHS512 = "A256CBC-HS512"

    /// Content-encryption key length in bytes (for CBC-HMAC: MAC key plus encryption key).
    var keyLength: Int {
        switch self {
        case .a128GCM: 16
        case .a256GCM: 32
        case .a128CBCHS256: 32
        case .a256CBCHS512: 64
        }
    }

    var ivLength: Int {
        switch self {
        case .a128GCM, .a256GCM: 12
        case .a128CBCHS256, .a256CBCHS512: 16
        }
    }
}
