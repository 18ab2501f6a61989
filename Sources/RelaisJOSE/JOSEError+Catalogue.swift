extension JOSEError {
    /// Every code a refusal can carry, each with the check that failed: what docs/errors.md lists
    /// (`relais errors --markdown` generates it from this list).
    public static let catalogue: [(code: String, check: String)] = [
        (
            "jose_malformed",
            "Compact serialization: segment count (a 5-segment JWE is named as such), base64url, header not a JSON object, duplicate member names, `kid` not a string, malformed `crit`."
        ),
        ("jose_too_large", "The token exceeds the size cap (16 KiB by default)."),
        ("jose_unsupported_alg", "`alg` missing, unknown, or `none`; for a JWE also `enc`, `RSA1_5` (padding oracles) and `zip` (decompression bombs)."),
        ("jose_unsupported_crit", "`crit` lists a header parameter Relais does not process."),
        (
            "jose_key_alg_mismatch",
            "The key does not suit `alg`. For example, an RSA or EC key offered for an HMAC token; the wrong curve; RSA under 2048 bits; an HMAC key shorter than the hash; a key pinned to another `alg`; a public key asked to sign."
        ),
        ("jose_invalid_signature", "The signature does not verify (tampered payload or signature, wrong key, wrong length)."),
        ("jose_invalid_key", "A JWK, JWKS or PEM cannot be read. The reason names the member (`'x' is not base64url`, `'dp' is missing`, point not on the curve, encrypted PEM)."),
        (
            "jose_decryption_failed",
            "A JWE did not decrypt. Wrong key, tampered header, key, IV, ciphertext or tag, or an ephemeral key off the curve all give this one code: distinct errors would be an oracle."
        ),
        ("jose_no_matching_key", "No key carries the token's `kid`; or, without a `kid`, zero or several keys suit the algorithm."),
        ("jose_jwks_unavailable", "The JWKS could not be fetched and no earlier copy exists."),
        ("jose_crypto_failure", "OpenSSL failed an operation that should not fail."),
        ("jwt_payload", "The payload is not a JSON object."),
        ("jwt_typ", "The `typ` header differs from the expected one."),
        ("jwt_iss", "`iss` is missing or not the expected issuer."),
        ("jwt_aud", "`aud` is missing or lacks the expected audience."),
        ("jwt_azp", "Several audiences and `azp` is missing or not the expected one."),
        ("jwt_exp", "Expired (beyond the leeway), missing, or not a number."),
        ("jwt_nbf", "Not yet valid."),
        ("jwt_iat", "Issued in the future, older than the maximum age, or missing when a maximum age is set."),
        ("jwt_nonce", "Missing, or different from the authorization request's. The value is never echoed."),
        (
            "jwt_at_hash",
            "`at_hash` is not a string, or not the left half of the hash of the access token returned with the id_token (the hash of its `alg`: SHA-256, SHA-384 or SHA-512; SHA-512 for EdDSA). An id_token without `at_hash` is accepted."
        ),
        ("jwt_acr", "Missing, unknown, or below the required level in the ordered list (`eidas1 < eidas2 < eidas3`)."),
        ("jwt_required", "A required claim is missing."),
    ]
}
