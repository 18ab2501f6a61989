import HTTPTypes

extension RelayError {
    /// The stable codes of the relay. Clients, dashboards and alerts may match on them; the
    /// descriptions may change. docs/errors.md is generated from this list (`relais errors --markdown`).
    enum Code: String, CaseIterable, Sendable {
        case invalidRequest = "invalid_request"
        case unknownClient = "unknown_client"
        case invalidRedirectURI = "invalid_redirect_uri"
        case unsupportedResponseType = "unsupported_response_type"
        case invalidScope = "invalid_scope"
        case loginRequired = "login_required"
        case accessDenied = "access_denied"
        case consentRequired = "consent_required"
        case interactionRequired = "interaction_required"
        case transactionExpired = "transaction_expired"
        case invalidClient = "invalid_client"
        case invalidGrant = "invalid_grant"
        case unsupportedGrantType = "unsupported_grant_type"
        case missingToken = "missing_token"
        case invalidToken = "invalid_token"
        case insufficientScope = "insufficient_scope"
        case invalidDPoPProof = "invalid_dpop_proof"
        case useDPoPNonce = "use_dpop_nonce"
        case invalidClientAttestation = "invalid_client_attestation"
        case useFreshAttestation = "use_fresh_attestation"
        case attestationRefused = "attestation_refused"
        case attestationRequired = "attestation_required"
        case invalidTarget = "invalid_target"
        case invalidSessionCode = "invalid_session_code"
        case unauthorizedClient = "unauthorized_client"
        case authorizationPending = "authorization_pending"
        case slowDown = "slow_down"
        case expiredToken = "expired_token"
        case invalidUserCode = "invalid_user_code"
        case insufficientUserAuthentication = "insufficient_user_authentication"
        case stepUpIdentityMismatch = "step_up_identity_mismatch"
        case sessionNotFound = "session_not_found"
        case tooManyRequests = "too_many_requests"
        case temporarilyUnavailable = "temporarily_unavailable"
        case serverError = "server_error"

        /// What goes in `error`: a missing token is reported as `invalid_token` in the body and with
        /// no error at all in the challenge (RFC 6750 §3.1).
        var wireCode: String { self == .missingToken ? "invalid_token" : rawValue }

        var status: HTTPResponse.Status {
            switch self {
            case .invalidClient, .missingToken, .invalidToken, .insufficientUserAuthentication: .unauthorized
            case .insufficientScope, .attestationRequired: .forbidden
            case .sessionNotFound: .notFound
            case .tooManyRequests: .tooManyRequests
            case .temporarilyUnavailable: .serviceUnavailable
            case .serverError: .internalServerError
            default: .badRequest
            }
        }

        /// Whether a bearer endpoint answers it with a `WWW-Authenticate: Bearer` challenge.
        var challengesBearer: Bool {
            [.missingToken, .invalidToken, .insufficientScope, .insufficientUserAuthentication, .attestationRequired, .invalidRequest, .temporarilyUnavailable]
                .contains(self)
        }

        /// Errors a provider may send back that the app can act on as they are; any other provider
        /// error reaches the app as `server_error`.
        static let passedThroughFromProvider: Set<Code> = [.accessDenied, .loginRequired, .consentRequired, .interactionRequired, .temporarilyUnavailable]

        /// What the app gets for a provider's error at the callback: the errors it can act on as they
        /// are; `invalid_request` for one that blames the app's own request (ProConnect's
        /// `idp_hint_not_found`: the app's idp_hint names no identity provider it knows); otherwise
        /// `server_error`.
        static func fromProvider(_ error: String) -> Code {
            if error == "idp_hint_not_found" { return .invalidRequest }
            return Code(rawValue: error).flatMap { passedThroughFromProvider.contains($0) ? $0 : nil } ?? .serverError
        }

        /// Where the error is answered, for the catalogue.
        var surfaces: String {
            switch self {
            case .invalidRequest: "every endpoint: page, redirect or JSON"
            case .unknownClient, .invalidRedirectURI: "`/authorize`, `GET /logout` (page)"
            case .unsupportedResponseType, .loginRequired: "`/authorize` (redirect)"
            case .invalidScope: "`/authorize` (redirect), `/token`"
            case .accessDenied, .consentRequired, .interactionRequired: "`/callback` (redirect); `access_denied` also at `/token` (device_code grant)"
            case .transactionExpired: "`/callback`, `/logout/callback` (page)"
            case .invalidClient: "`/token`, `/revoke`, `/device_authorization`, `/introspect`, `/attest/*`"
            case .invalidGrant: "`/token`, `POST /logout`"
            case .unsupportedGrantType: "`/token`"
            case .invalidDPoPProof: "`/token` (400), `/userinfo` (401 with a `DPoP` challenge)"
            case .useDPoPNonce: "`/token`"
            case .invalidClientAttestation, .useFreshAttestation: "`/token`"
            case .attestationRefused: "`/attest/apple`, `/attest/apple/assertion`, `/attest/android`, `/attest/dev`"
            case .attestationRequired: "`/auth` (bearer)"
            case .invalidTarget: "`POST /session_code`"
            case .invalidSessionCode: "`GET /session` (page)"
            case .unauthorizedClient: "`/device_authorization`, `/token`"
            case .authorizationPending, .slowDown, .expiredToken: "`/token` (device_code grant)"
            case .invalidUserCode: "`POST /device/inspect`, `POST /device/approve`, `/device` (page)"
            case .insufficientUserAuthentication: "`/auth`, `/userinfo` (401 with a Bearer or DPoP challenge)"
            case .stepUpIdentityMismatch: "`/callback` (redirect)"
            case .sessionNotFound: "`DELETE /sessions/{id}`"
            case .missingToken, .invalidToken, .insufficientScope: "`/userinfo`, `/auth`, `POST /logout` (bearer)"
            case .tooManyRequests: "`/authorize`, `/callback` (page), `/token`"
            case .temporarilyUnavailable: "every endpoint"
            case .serverError: "`/authorize`, `/callback` (redirect), `/token`"
            }
        }

        /// When it happens.
        var meaning: String {
            switch self {
            case .invalidRequest:
                "A parameter is missing, repeated, malformed or too long; a form or query of more than 1,000 fields; PKCE is missing or not S256; the body is not a form; an unknown `provider` or `acr_values` outside the provider's levels; another scheme than Bearer; a `/auth` query that cannot be read, names a parameter `/auth` does not know, or gives one a value it does not take (`attested=maybe`, an empty `aud=`); two different client ids in one request (HTTP Basic and the form)."
            case .unknownClient: "No app is registered with this `client_id`."
            case .invalidRedirectURI:
                "The `redirect_uri` (or `post_logout_redirect_uri`) is not registered for the app. Matching is exact, except that a loopback `http://127.0.0.1/…` or `http://[::1]/…` entry accepts any port (RFC 8252 §7.3)."
            case .unsupportedResponseType: "`response_type` is not `code`."
            case .invalidScope: "`scope` lacks `openid`, names a scope the app may not have, or a refresh asks for a scope the sign-in did not grant."
            case .loginRequired: "`prompt=none`: providers always ask the person; or the provider answered it."
            case .accessDenied: "The person cancelled at the provider; at `/token` (device_code grant), the request was denied, or died after five wrong user codes."
            case .consentRequired, .interactionRequired: "Passed on as the provider sent it."
            case .transactionExpired: "The sign-in (or logout) is older than `relay.transaction_lifetime`, or this callback was already used (a replay)."
            case .invalidClient:
                "Unknown `client_id`, or an app's HTTP Basic credentials that cannot be read or carry a password (apps are public clients: `client_id` and an empty password; answered with `WWW-Authenticate: Basic`); at `/attest/*`, an app whose `attestation` is `off`; at `/introspect`, an unknown resource server or a wrong secret (`WWW-Authenticate: Basic`)."
            case .invalidGrant:
                "The code is unknown, expired, used (a second use revokes the session the first opened), issued to another app, for another `redirect_uri`, or its PKCE verifier does not match; the code or refresh token is bound to a DPoP key (`dpop_jkt`, or a DPoP sign-in) and the proof is missing or by another key; the refresh token is unknown, of another app, or reused after `relay.refresh_grace` (which revokes the session); the session has ended, or was sealed with a session key no longer configured; a `device_code` Relais never issued, or that expired more than `relay.device_code_lifetime` ago (RFC 8628 §3.5), or issued to another app, or already used."
            case .unsupportedGrantType: "A `grant_type` other than `authorization_code`, `refresh_token` and `urn:ietf:params:oauth:grant-type:device_code`."
            case .useDPoPNonce: "The app has `dpop_nonce: true` and the proof carries no nonce, or one older than about two minutes. The `DPoP-Nonce` header holds the current one."
            case .invalidDPoPProof:
                "The `DPoP` proof fails a check (its `dpop_*` code starts the description: see the DPoP table), is repeated (`jti` already used), several `DPoP` headers were sent, or the app's `dpop: required` and none was sent."
            case .invalidClientAttestation:
                "The app's `attestation` is `required` and the `OAuth-Client-Attestation` and `-PoP` headers are missing; one is missing or repeated; the attestation JWT is not signed by Relais or the app's `attester`, is not `oauth-client-attestation+jwt`, names another client (`sub`) or has no public `cnf.jwk`; the PoP is not signed by that key, not `oauth-client-attestation-pop+jwt`, not for Relais (`aud`), too old (`iat`, 60 s), replayed (`jti`), or carries an unknown challenge; or a refresh of a session opened by an attested instance comes without that instance's attestation."
            case .useFreshAttestation: "The Client Attestation JWT has expired (`apps.<id>.client_attestation_lifetime`)."
            case .attestationRefused:
                "The platform proof failed a check: the `error_description` starts with the check's code (see the attestation table): a wrong app id or package, a replayed or unknown challenge, a counter that did not increase, the other App Attest environment, an expired chain, a stale or foreign Play Integrity verdict."
            case .attestationRequired: "`/auth?attested=1`: the access token was issued to an app instance that did not attest (no `attested` claim)."
            case .invalidTarget: "The `target` is not one of the app's `web_targets` (exact match), or the app has none (outside development, where the demo page is the default)."
            case .invalidSessionCode:
                "The session code is unknown, expired (60 s), already used, or its session has ended. The page never redirects to the target then."
            case .unauthorizedClient:
                "The app is not registered for the device grant (`apps.<id>.device_grant`), or the approving app is not among its `device_approvers` (or is not attested when `device_approvers_attested` is set)."
            case .authorizationPending: "Nobody has approved or denied the device's request yet (RFC 8628 §3.5)."
            case .slowDown: "The device polled sooner than `relay.device_poll_interval` after its previous poll."
            case .expiredToken: "The device code has expired (`relay.device_code_lifetime`) without being used."
            case .insufficientUserAuthentication:
                "RFC 9470: the sign-in is below the `acr` the gateway (`/auth?acr=`) or the app (`/userinfo?acr=`) requires, or older than `max_age`; the challenge names `acr_values` and `max_age`."
            case .stepUpIdentityMismatch:
                "A step-up sign-in (`/authorize` with the app's `id_token_hint`) was made by another person than the session's: the identity pivot (given_name, family_name, birthdate, gender, birthplace, birthcountry) differs. The app's session is kept."
            case .sessionNotFound: "No live session of the token's person has this id: it has ended, or it is someone else's (which is not said)."
            case .invalidUserCode:
                "The user code is not 8 letters of RFC 8628's alphabet, no live request has it, or its second half is wrong (the fifth wrong one denies the device's request)."
            case .missingToken: "No `Authorization` header: the challenge is `Bearer realm=\"relais\"` with no error."
            case .invalidToken:
                "Bad signature, not a Relais access token (`typ` must be `at+jwt`), expired, minted for another audience (`aud`: `/userinfo` needs Relais' issuer, `/auth` the `?aud=` or `forward_auth.audiences` of the guarded API), or its session has ended (revoked, logged out, idle or past its lifetime)."
            case .insufficientScope: "`/userinfo` without `openid`; `/auth?scope=…` not granted."
            case .tooManyRequests: "A rate limit (`rate_limit.*`) is reached; `Retry-After` says when to retry."
            case .temporarilyUnavailable:
                "Relais' store is unreachable or its circuit is open (nothing is left half-made), another instance is still rotating the same refresh token after 3 s, generated development keys are still converging after a store data loss, or the provider is down, slow or answered 5xx/429 (`error_description` starts with `provider_unavailable`)."
            case .serverError:
                "The provider answered something Relais refuses (`error_description` starts with one of the provider codes below)."
            }
        }

        /// What the app developer (or operator) should do about it.
        var advice: String {
            switch self {
            case .invalidRequest, .unsupportedResponseType, .unsupportedGrantType: "Fix the request: it is a bug in the caller."
            case .unknownClient, .invalidRedirectURI: "Register the app or the URI in `apps.<id>`, or fix the request."
            case .invalidScope: "Ask only for the app's configured `scopes`."
            case .loginRequired, .consentRequired, .interactionRequired: "Start an interactive sign-in."
            case .accessDenied: "Show the signed-out state and offer to sign in again."
            case .transactionExpired: "Start the sign-in again from the app."
            case .invalidClient: "Use a registered `client_id` (and, for resource servers, the right secret)."
            case .invalidGrant: "Sign the person in again; a replay means the code or token leaked."
            case .useDPoPNonce: "Make a new proof with the `DPoP-Nonce` value as `nonce` and retry; keep the latest nonce from each response."
            case .invalidDPoPProof: "Send one fresh proof per request, signed by the app instance's key, for this method and URL (and `ath` with an access token)."
            case .invalidClientAttestation: "Send a fresh PoP signed by the instance key with every token request, with the Client Attestation JWT from `/attest/*`."
            case .useFreshAttestation: "Attest again (`/attest/apple/assertion` on iOS, `/attest/android`), then retry."
            case .attestationRefused: "Fix the app's settings or the request as the code says; get a new challenge for each attempt."
            case .attestationRequired: "Sign in from the genuine app, which attests its instance at `/token`."
            case .invalidTarget: "List the page in `apps.<id>.web_targets`, or send one of those."
            case .invalidSessionCode: "Ask for a new code (`POST /session_code`) each time the webview opens, and open it at once."
            case .unauthorizedClient: "Register the app for the device grant, or approve from one of its `device_approvers`."
            case .authorizationPending: "Keep polling at the `interval`."
            case .slowDown: "Add 5 seconds to the polling interval (RFC 8628 §3.5)."
            case .expiredToken: "Start again with `POST /device_authorization`."
            case .invalidUserCode: "Check the code shown on the device, or scan its QR code."
            case .insufficientUserAuthentication:
                "Sign in again with `/authorize?acr_values=…` (and `max_age`) and the current `id_token_hint`; Relais picks the provider that gives the level."
            case .stepUpIdentityMismatch: "Tell the person the step-up must be done by the same person; keep using the current tokens."
            case .sessionNotFound: "Refresh the list (`GET /sessions`): the session is already gone."
            case .missingToken, .invalidToken: "Refresh the access token, or sign in again when the refresh fails."
            case .insufficientScope: "Sign in again with the scope the API needs."
            case .tooManyRequests: "Wait for `Retry-After` seconds."
            case .temporarilyUnavailable: "Retry shortly; offer a retry button."
            case .serverError: "Show a generic error; the operator finds the details in the log with the request id."
            }
        }
    }
}
