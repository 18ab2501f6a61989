import COpenSSL
import RelaisCrypto

/// A JWS signing algorithm (RFC 7518 §3, RFC 8037), named by its `alg` header value.
///
/// `none` is deliberately not representable: a token that claims it fails to parse with
/// ``JOSEError/unsupportedAlgorithm(_:)``, so no code path can accept an unsigned token.
public enum JWSAlgorithm: String, Sendable, CaseIterable, Codable {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (keys of 2048 bits or more).
    case rs256 = "RS256"
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    case rs384 = "RS384"
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    case rs512 = "RS512"
    /// RSASSA-PSS with SHA-256 and MGF1 with SHA-256.
    case ps256 = "PS256"
    /// RSASSA-PSS with SHA-384 and MGF1 with SHA-384.
    case ps384 = "PS384"
    /// RSASSA-PSS with SHA-512 and MGF1 with SHA-512.
    case ps512 = "PS512"
    /// ECDSA on P-256 with SHA-256: what Relais signs its own tokens with by default.
    case es256 = "ES256"
    /// ECDSA on P-384 with SHA-384.
    case es384 = "ES384"
    /// ECDSA on P-521 with SHA-512.
    case es512 = "ES512"
    /// EdDSA with Ed25519 (RFC 8037).
    case edDSA = "EdDSA"
    /// HMAC with SHA-256, keyed by a shared secret of at least 32 bytes.
    case hs256 = "HS256"
    /// HMAC with SHA-384, keyed by a shared secret of at least 48 bytes.
    case hs384 = "HS384"
    /// HMAC with SHA-512, keyed by a shared secret of at least 64 bytes.
    case hs512 = "HS512"

    /// True for the HMAC algorithms, whose key is a shared secret (FranceConnect v1 signs with the client secret).
    public var isSymmetric: Bool { family == .hmac }

    enum Family: Equatable {
        case rsaPKCS1, rsaPSS, ecdsa(curve: JWK.Curve), edDSA, hmac
    }

    var family: Family {
        switch self {
        case .rs256, .rs384, .rs512: .rsaPKCS1
        case .ps256, .ps384, .ps512: .rsaPSS
        case .es256: .ecdsa(curve: .p256)
        case .es384: .ecdsa(curve: .p384)
        case .es512: .ecdsa(curve: .p521)
        case .edDSA: .edDSA
        case .hs256, .hs384, .hs512: .hmac
        }
    }

    /// Digest length in bytes (the HMAC minimum key length, the PSS salt length).
    var hashLength: Int {
        switch self {
        case .rs256, .ps256, .es256, .hs256: 32
        case .rs384, .ps384, .es384, .hs384: 48
        case .rs512, .ps512, .es512, .hs512: 64
        case .edDSA: 0
        }
    }

    var digestName: String {
        switch hashLength {
        case 32: "SHA256"
        case 48: "SHA384"
        default: "SHA512"
        }
    }

    /// The digest, fetched once per process: with OpenSSL 3, passing EVP_sha256() makes every
    /// DigestVerifyInit fetch the implementation again, which costs as much as an ECDSA verify.
    var digest: OpaquePointer? {
        switch hashLength {
        case 32: FetchedDigests.shared.sha256
        case 48: FetchedDigests.shared.sha384
        case 64: FetchedDigests.shared.sha512
        default: nil  // EdDSA hashes internally
        }
    }

    /// OpenID Connect's `at_hash` (or `c_hash`) of `token`, for an id_token signed with this
    /// algorithm (Core 1.0 §3.1.3.6, §3.3.2.11): the left-most half of the hash of the token's
    /// ASCII octets, base64url without padding. The hash is the one `alg` names: SHA-256 for
    /// RS256, PS256, ES256 and HS256, SHA-384 for the *384 and SHA-512 for the *512. EdDSA (here
    /// always Ed25519) names none: SHA-512, Ed25519's own, as the OpenID errata and FAPI specify.
    public func tokenHash(_ token: String) throws(JOSEError) -> String {
        let hash = try SignatureEngine.digest(digest ?? FetchedDigests.shared.sha512, Array(token.utf8)[...])
        return Base64URL.encode(hash.prefix(hash.count / 2))
    }

    /// The key type a key must have to be used with this algorithm.
    public var keyType: JWK.KeyType {
        switch family {
        case .rsaPKCS1, .rsaPSS: .rsa
        case .ecdsa: .ec
        case .edDSA: .okp
        case .hmac: .oct
        }
    }
}
