extension UpstreamError {
    /// Every code with its meaning, for docs/errors.md (`relais errors --markdown`). The app sees
    /// it at the start of `error_description`; the log line `sign-in failed` carries it too.
    public static let catalogue: [(code: String, meaning: String)] = [
        ("provider_unavailable", "Timeout, connection failure, incomplete response, HTTP 5xx or 429 from the provider (`temporarily_unavailable`)."),
        ("provider_invalid_response", "Discovery, token or userinfo answer unreadable: not JSON, fields missing, wrong issuer in discovery, unexpected status."),
        ("provider_rejected", "The provider's token endpoint refused the code exchange with an OAuth error (for example `invalid_grant`, `invalid_client`)."),
        (
            "provider_id_token_rejected",
            "The id_token failed the check named after the colon, one of the JOSE codes of §5: `jwt_nonce`, `jwt_iss`, `jwt_aud`, `jwt_exp`, `jwt_iat`, `jwt_acr` (level below the requested one), `jwt_at_hash` (`at_hash` not the hash of the access token returned with it), `jose_invalid_signature`, `jose_unsupported_alg` (including `none` and algorithms not in `id_token_algs`), `jose_no_matching_key` (unknown `kid` after a refetch, or no `kid` with several candidate keys), `jose_decryption_failed` (FranceConnect+)."
        ),
        ("provider_userinfo_rejected", "Userinfo's signature or claims failed, or its `sub` differs from the id_token's."),
        ("provider_callback_rejected", "The callback's `iss` is not the provider's (a mix-up attack), `iss` is missing where the provider always sends it, or there is no `code`."),
        ("provider_logout_token_rejected", "A back-channel logout token failed a check; the provider's operator reads which (see `POST /backchannel-logout` below)."),
    ]
}
