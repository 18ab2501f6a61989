/// A stable error code: what an app switches on. RelaisKit's own codes are listed below; Relais'
/// own `error` values (docs/errors.md §7) come through as ``relay(_:)`` with the same spelling.
public struct RelaisKitErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code as docs/client.md spells it.
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The person closed the browser or cancelled at the provider (`access_denied`).
    public static let cancelled = Self("cancelled")
    /// The session ended elsewhere: logout, revocation, "end this session" on another device,
    /// the provider's back-channel logout, or its lifetime.
    public static let sessionEnded = Self("session_ended")
    /// Relais saw an old refresh token again and revoked the session: the token leaked or two
    /// copies of the app refreshed with the same token.
    public static let refreshTokenReused = Self("refresh_token_reused")
    /// The platform proof was refused (`attestation_refused`), or the app could not make one.
    public static let attestationRefused = Self("attestation_refused")
    /// The instance key that the session's tokens are bound to is gone or is another key (a
    /// restored backup, a wiped enclave): the session cannot be used from this instance.
    public static let keyLost = Self("key_lost")
    /// The secure storage cannot be read now (a locked device before first unlock, Keychain
    /// `errSecInteractionNotAllowed`). Not a sign-out: retry when the device is unlocked.
    public static let storageLocked = Self("storage_locked")
    /// The secure storage failed for another reason.
    public static let storageFailed = Self("storage_failed")
    /// No answer from Relais (offline, timeout, DNS, TLS).
    public static let network = Self("network")
    /// Relais answered something this library cannot read.
    public static let invalidResponse = Self("invalid_response")
    /// The resource needs a higher authentication level: sign in again with ``RelaisKitError/acr``.
    public static let stepUpRequired = Self("step_up_required")
    /// An operation that needs a session was called while signed out.
    public static let notSignedIn = Self("not_signed_in")
    /// The redirect did not carry the `state` this sign-in sent, or no code.
    public static let invalidCallback = Self("invalid_callback")
    /// The call needs a DPoP-bound token (RFC 9449 §7.1: Relais challenged with `DPoP` a `Bearer`
    /// token), as approving a device does by default: sign in with DPoP (`Configuration.dpop`).
    /// The session is untouched.
    public static let dpopRequired = Self("dpop_required")
    /// The device code expired before anybody approved it (RFC 8628 `expired_token`).
    public static let deviceCodeExpired = Self("device_code_expired")
    /// The request given to the library cannot be sent (bad URL, option misuse).
    public static let invalidArgument = Self("invalid_argument")

    /// Relais' own `error` value, unchanged (`invalid_target`, `invalid_user_code`, `unauthorized_client`…).
    public static func relay(_ code: String) -> Self { Self(code) }
}

/// Every error RelaisKit throws: a stable ``code`` and a message for logs (never a token).
public struct RelaisKitError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What happened, stable across releases: switch on it.
    public let code: RelaisKitErrorCode
    /// For logs and support: never a token, never shown as is to people.
    public let message: String
    /// For ``RelaisKitErrorCode/stepUpRequired``: the level the resource asked for.
    public var acr: String?
    /// For ``RelaisKitErrorCode/stepUpRequired``: the maximum age of the sign-in, in seconds.
    public var maxAge: Int?
    /// The HTTP status of Relais' answer, when there was one.
    public var status: Int?
    /// Relais' `error_reason`, when its answer had one (docs/errors.md §7): why a standard code
    /// such as `invalid_grant` was given.
    public var relayReason: String?

    public init(_ code: RelaisKitErrorCode, _ message: String, status: Int? = nil) {
        self.code = code
        self.message = message
        self.status = status
    }

    public var description: String { "\(code.rawValue): \(message)" }

    /// Any error as RelaisKit's: its own as it is, a cancelled task as ``RelaisKitErrorCode/cancelled``,
    /// anything else (an app's own transport, the platform) as ``RelaisKitErrorCode/network``, named
    /// by its type only (its text may hold a URL with a code in it).
    init(wrapping error: any Error) {
        switch error {
        case let own as RelaisKitError: self = own
        case is CancellationError: self.init(.cancelled, "the task was cancelled")
        default: self.init(.network, "the request failed (\(type(of: error)))")
        }
    }

    /// Whether the session survives this error (the app keeps its tokens and may retry).
    public var keepsSession: Bool {
        switch code {
        case .sessionEnded, .refreshTokenReused, .keyLost: false
        default: true
        }
    }
}
