/// JWE key-management algorithms (RFC 7518 §4). RSA1_5 is deliberately absent (padding oracles).
public enum JWEKeyAlgorithm: String, Sendable, CaseIterable {
    case rsaOAEP = "RSA-OAEP"
    case rsaOAEP256 = "RSA-OAEP-256"
    case ecdhES = "ECDH-ES"
    case ecdhESA128KW = "ECDH-ES+A128KW"
    case ecdhESA256KW = "ECDH-ES+A256KW"
    case a128KW = "A128KW"
    case a256KW = "A256KW"
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

/// JWE content-encryption algorithms (RFC 7518 §5).
public enum JWEContentAlgorithm: String, Sendable, CaseIterable {
    case a128GCM = "A128GCM"
    case a256GCM = "A256GCM"
    case a128CBCHS256 = "A128CBC-HS256"
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
