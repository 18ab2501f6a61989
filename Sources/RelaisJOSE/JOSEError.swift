/// Why a token, key or signature was refused.
///
/// Every throwing API of RelaisJOSE throws this one type (typed `throws(JOSEError)`), so a caller
/// can switch over the cases without casting. Each case names one check; ``code`` is a stable,
/// machine-readable string (also listed in Relais' `docs/errors.md`) that logs, metrics and alerts
/// can match on, and ``description`` adds the human reason.
///
/// Never send ``description`` to the party that presented the token: it says which check failed
/// and why, which helps an attacker more than a client. Answer a generic error (for a bearer token,
/// `401` with `error="invalid_token"`) and log the description server-side.
public enum JOSEError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The compact serialization is not `header.payload.signature` (wrong segment count, bad base64url,
    /// a header that is not a JSON object). Code `jose_malformed`.
    case malformedToken(reason: String)
    /// The token exceeds the configured size cap, checked before any decoding. Code `jose_too_large`.
    case tokenTooLarge(limit: Int)
    /// `alg` is missing, unknown, or `none` (for a JWE also `enc`, or `zip`). Code `jose_unsupported_alg`.
    case unsupportedAlgorithm(String)
    /// The header lists `crit` parameters this implementation does not understand (RFC 7515 §4.1.11).
    /// Code `jose_unsupported_crit`.
    case unsupportedCriticalHeader([String])
    /// The key cannot be used with the token's algorithm (wrong type, curve, size, or pinned `alg`).
    /// This is what stops an RSA public key from "verifying" an HMAC token. Code `jose_key_alg_mismatch`.
    case keyAlgorithmMismatch(reason: String)
    /// The signature does not verify: tampered token or a key other than the signer's.
    /// Code `jose_invalid_signature`.
    case invalidSignature
    /// A JWK, JWK Set or PEM could not be read; the reason names the member. Code `jose_invalid_key`.
    case invalidKey(reason: String)
    /// No key in the set matches the token (`kid`, `kty`, `alg`, `use`), or several do and the token has no `kid`.
    /// Code `jose_no_matching_key`.
    case noMatchingKey(reason: String)
    /// OpenSSL failed an operation that should not fail (out of memory, internal error).
    /// Code `jose_crypto_failure`.
    case cryptoFailure(reason: String)
    /// A JWE did not decrypt: wrong key, tampered ciphertext, header or tag. Deliberately one
    /// error for every cause, so that failures do not become an oracle. Code `jose_decryption_failed`.
    case decryptionFailed
    /// The key set could not be fetched and no earlier copy is available. The token itself may be
    /// fine: this is an outage, not a forgery. Code `jose_jwks_unavailable`.
    case keySetUnavailable(reason: String)
    /// The signature is good but a claim check of the ``ClaimsPolicy`` failed; `check` names which.
    /// Code `jwt_` followed by the check's raw value (`jwt_aud`, `jwt_exp`, …).
    case claimRejected(check: ClaimCheck, reason: String)

    /// The stable, machine-readable name of the failure: `jose_…` for token, key and signature
    /// errors, `jwt_<check>` for claim checks. Safe to log and to use as a metric label.
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

    /// The claim check that failed, for ``claimRejected(check:reason:)``; nil for every other
    /// error. A caller that acts on one check tests it here, not on ``code`` or ``description``:
    ///
    /// ```swift
    /// if error.failedCheck == .expiration { /* ask the client to refresh */ }
    /// ```
    public var failedCheck: ClaimCheck? {
        if case .claimRejected(let check, _) = self { check } else { nil }
    }

    /// ``code``, a colon, and the reason in words, for server logs. It never contains key
    /// material or a nonce, but it can contain claim values (`iss`, `azp`, `acr`).
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
