public import RelaisJOSE

/// Why a sign-in with a provider failed after the browser came back. Each code is stable and
/// listed in docs/errors.md; `oauthError` is what the app receives.
public enum UpstreamError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The provider did not answer in time, could not be reached, or answered 5xx/429.
    case unavailable(String)
    /// The provider answered something unreadable: not JSON, fields missing, an unexpected status.
    case invalidResponse(String)
    /// The provider's token endpoint refused the exchange with an OAuth error.
    case rejected(error: String, description: String)
    /// The id_token failed a check (signature, iss, aud, exp, iat, nonce, at_hash, acr, ...).
    case idTokenRejected(JOSEError)
    /// Userinfo failed a check: its signature or claims, or a `sub` other than the id_token's.
    case userinfoRejected(String)
    /// The callback itself is wrong: `iss` missing or another issuer (RFC 9207), no `code`.
    case callbackRejected(String)
    /// A back-channel logout token failed a check (OpenID Connect Back-Channel Logout 1.0 §2.6).
    case logoutTokenRejected(String)

    public var code: String {
        switch self {
        case .unavailable: "provider_unavailable"
        case .invalidResponse: "provider_invalid_response"
        case .rejected: "provider_rejected"
        case .idTokenRejected: "provider_id_token_rejected"
        case .userinfoRejected: "provider_userinfo_rejected"
        case .callbackRejected: "provider_callback_rejected"
        case .logoutTokenRejected: "provider_logout_token_rejected"
        }
    }

    /// The OAuth error the app gets: a provider that is down is worth retrying, anything else is not.
    public var oauthError: String {
        if case .unavailable = self { return "temporarily_unavailable" }
        return "server_error"
    }

    /// For the app and the log: names the failed check, never a token or a claim value.
    public var description: String {
        switch self {
        case .unavailable(let reason): "\(code): \(reason)"
        case .invalidResponse(let reason): "\(code): \(reason)"
        // The provider's own words, cut as /callback cuts its error_description: they reach the app's redirect.
        case .rejected(let error, let description): "\(code): the provider refused the code exchange (\(error.prefix(64)): \(description.prefix(200)))"
        case .idTokenRejected(let error): "\(code): \(error.code)"
        case .userinfoRejected(let reason): "\(code): \(reason)"
        case .callbackRejected(let reason): "\(code): \(reason)"
        case .logoutTokenRejected(let reason): "\(code): \(reason)"
        }
    }
}
