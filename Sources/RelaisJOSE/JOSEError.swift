/// Why a token, key or signature was refused. Each case names one check; ``code`` is stable and
/// listed in docs/errors.md, so logs and alerts can match on it.
public enum JOSEError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The compact serialization is not `header.payload.signature` (wrong segment count, bad base64url,
    /// a header that is not a JSON object).
    case malformedToken(reason: String)
    /// The token exceeds the configured size cap.
    case tokenTooLarge(limit: Int)
    /// `alg` is missing, unknown, or `none`.
    case unsupportedAlgorithm(String)
    /// The header lists `crit` parameters this implementation does not understand.
    case unsupportedCriticalHeader([String])
    /// The key cannot be used with the token's algorithm (wrong type, curve, size, or pinned `alg`).
    case keyAlgorithmMismatch(reason: String)
    /// The signature does not verify.
    case invalidSignature
    /// A JWK or PEM could not be read; the reason names the member.
    case invalidKey(reason: String)
    /// No key in the set matches the token (`kid`, `kty`, `alg`, `use`), or several do and the token has no `kid`.
    case noMatchingKey(reason: String)
    /// OpenSSL failed an operation that should not fail (out of memory, internal error).
    case cryptoFailure(reason: String)
    /// A JWE did not decrypt: wrong key, tampered ciphertext, header or tag. Deliberately one
    /// error for every cause, so that failures do not become an oracle.
    case decryptionFailed
    /// The key set could not be fetched and no earlier copy is available.
    case keySetUnavailable(reason: String)
    /// The signature is good but a claim check of the ``ClaimsPolicy`` failed; `check` names which.
    case claimRejected(check: ClaimCheck, reason: String)

    public var code: String {
        switch self {
        case .malformedToken: "jose_malformed"
        case .tokenTooLarge: "jose_too_large"
        case .unsupportedAlgorithm: "jose_unsupported_alg"
        case .unsupportedCriticalHeader: "jose_unsupported_crit"
        case .keyAlgorithmMismatch: "jose_key_alg_mismatch"
        case .invalidSignature: "jose_invalid_signature"
        case .invalidKey: "jose_invalid_key"
        case .noMatchingKey: "jose_no_matching_key"
        case .cryptoFailure: "jose_crypto_failure"
        case .decryptionFailed: "jose_decryption_failed"
        case .keySetUnavailable: "jose_jwks_unavailable"
        case .claimRejected(let check, _): "jwt_\(check.rawValue)"
        }
    }

    public var description: String {
        switch self {
        case .malformedToken(let reason): "\(code): \(reason)"
        case .tokenTooLarge(let limit): "\(code): token larger than \(limit) bytes"
        case .unsupportedAlgorithm(let alg): "\(code): algorithm '\(alg)' is not supported"
        case .unsupportedCriticalHeader(let names): "\(code): critical header parameters not understood: \(names.joined(separator: ", "))"
        case .keyAlgorithmMismatch(let reason): "\(code): \(reason)"
        case .invalidSignature: "\(code): the signature does not verify"
        case .invalidKey(let reason): "\(code): \(reason)"
        case .noMatchingKey(let reason): "\(code): \(reason)"
        case .cryptoFailure(let reason): "\(code): \(reason)"
        case .decryptionFailed: "\(code): the token could not be decrypted"
        case .keySetUnavailable(let reason): "\(code): \(reason)"
        case .claimRejected(_, let reason): "\(code): \(reason)"
        }
    }
}
