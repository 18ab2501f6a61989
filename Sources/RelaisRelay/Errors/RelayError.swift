import HTTPTypes
import Hummingbird
import Logging
import RelaisHTTPClient
import RelaisJOSE
import RelaisOIDC
import RelaisServer
import RelaisStore

/// Every refusal the relay gives, in one vocabulary: a stable ``Code`` (with its status and the
/// sentence for app developers, from which docs/errors.md is generated) and a description naming
/// what was wrong with this request. How it reaches the caller depends on the surface: an OAuth
/// JSON body (RFC 6749 §5.2), a bearer challenge (RFC 6750 §3), a redirect to the app's
/// registered URI, or an HTML page that never redirects.
struct RelayError: Error, Sendable, Equatable {
    var code: Code
    /// For the app developer and the log: names the failed check, never a token or claim value.
    var description: String
    /// Extra response headers (`Retry-After`, `WWW-Authenticate: Basic`).
    var headers: HTTPFields = [:]
    /// At a resource endpoint, challenge with the `DPoP` scheme (RFC 9449 §7.1): the token was
    /// DPoP-bound, or its proof failed.
    var challengesDPoP = false
    /// RFC 9470 §3: what the challenge asks of the next sign-in (`acr_values`, `max_age`).
    var stepUp: StepUp?
    /// On a page, the situation to explain when the code's own sentence is not precise enough.
    var pageMessage: PageMessage?
    /// Why, when one standard code covers several situations a client must tell apart (a refused
    /// refresh: the token replayed, the session ended, the wrong key): `error_reason` in the JSON
    /// body, stable, listed in docs/errors.md. The description stays for people reading logs.
    var reason: Reason?
    /// Why an access token was refused, where the relay itself acts on it; never rendered.
    var tokenFault: TokenFault?

    /// An expired token is not worth a check of the store's keys; one naming a key this instance
    /// lacks is (``RelayKeys``: another instance may have generated it).
    enum TokenFault: Sendable {
        case expired, unknownKey
    }

    enum Reason: String, Sendable, CaseIterable {
        /// A rotated refresh token came back: the session is revoked.
        case refreshTokenReused = "refresh_token_reused"
        /// The refresh token is unknown, or its session has ended (logout, revocation, expiry).
        case sessionEnded = "session_ended"
        /// The refresh token is bound to a DPoP key, and the proof is by another key (or missing).
        case dpopKeyMismatch = "dpop_key_mismatch"
        /// A device's session whose approving app session has ended.
        case approverEnded = "approver_ended"
        /// The token was issued to another client.
        case otherClient = "other_client"

        /// For docs/errors.md.
        var meaning: String {
            switch self {
            case .refreshTokenReused: "A rotated refresh token came back after the grace window: it leaked or two copies of the app refreshed; the session is revoked."
            case .sessionEnded: "The refresh token is unknown, or its session has ended (logout, revocation, `/sessions`, expiry)."
            case .dpopKeyMismatch: "The refresh token is bound to a DPoP key and the proof is by another key, or missing (or a proof came for an unbound token)."
            case .approverEnded: "A device's session (RFC 8628) whose approving app session has ended: it ended with it."
            case .otherClient: "The refresh token was issued to another app."
            }
        }
    }

    struct StepUp: Sendable, Equatable {
        var acrValues: String?
        var maxAge: Int?

        var parameters: String {
            (acrValues.map { #", acr_values="\#(RelayError.quotable($0))""# } ?? "") + (maxAge.map { ", max_age=\($0)" } ?? "")
        }
    }

    /// RFC 9470: the sign-in is too weak or too old for this resource.
    static func insufficientUserAuthentication(_ description: String, _ stepUp: StepUp) -> RelayError {
        var error = RelayError(.insufficientUserAuthentication, description)
        error.stepUp = stepUp
        return error
    }

    init(_ code: Code, _ description: String, headers: HTTPFields = [:], page: PageMessage? = nil) {
        self.code = code
        self.description = description
        self.headers = headers
        self.pageMessage = page
    }

    // MARK: - Frequent errors

    static func invalidRequest(_ description: String) -> RelayError { RelayError(.invalidRequest, description) }
    static func invalidGrant(_ description: String, _ reason: Reason? = nil) -> RelayError {
        var error = RelayError(.invalidGrant, description)
        error.reason = reason
        return error
    }
    static func invalidToken(_ description: String) -> RelayError { RelayError(.invalidToken, description) }
    static func insufficientScope(_ description: String) -> RelayError { RelayError(.insufficientScope, description) }
    static let storeUnavailable = RelayError(.temporarilyUnavailable, "Relais cannot reach its store right now; retry shortly")
    /// No `Authorization` header: RFC 6750 §3.1 says the challenge then carries no error code.
    static let missingToken = RelayError(.missingToken, "a Bearer access token is required")

    static func invalidDPoPProof(_ description: String) -> RelayError {
        var error = RelayError(.invalidDPoPProof, description)
        error.challengesDPoP = true
        return error
    }

    static func tooManyRequests(retryAfter seconds: Int) -> RelayError {
        RelayError(.tooManyRequests, "Too many attempts from this device or app: wait \(seconds) s, then try again.", headers: [.retryAfter: String(seconds)])
    }

    // MARK: - Surfaces

    enum Surface {
        /// RFC 6749 §5.2 JSON.
        case json
        /// JSON plus the RFC 6750 `WWW-Authenticate` challenge.
        case bearer
        /// The HTML page for people.
        case page
    }

    func response(_ surface: Surface, requestID: String) -> Response {
        switch surface {
        case .json: json(requestID: requestID)
        case .bearer: bearer(requestID: requestID)
        case .page: page(requestID: requestID)
        }
    }

    /// A route's refusal `error`, rendered on `surface`: a store failure is `temporarily_unavailable`
    /// (the details go to the log); anything else is rethrown, for the server's error middleware
    /// (413 for a body over the limit, 500 otherwise). The routes' groups call it through
    /// ``RelayErrorMiddleware``; the hot routes (forward-auth, /userinfo) call it themselves, without a middleware's
    /// async frame (docs/capacity.md, "The session check's path").
    static func rendered(_ error: any Error, _ surface: Surface, _ context: RelaisRequestContext) throws -> Response {
        switch error {
        case let error as RelayError:
            // A page shows people a sentence, the code and the request id, not the developer's
            // description: this line keeps it for support, under the same request id.
            if case .page = surface {
                context.logger.info("page refused", metadata: ["error": "\(error.code.wireCode)", "description": "\(error.description)"])
            }
            return error.response(surface, requestID: context.requestID)
        case let error as StoreError:
            context.logger.error("store unavailable", metadata: ["error": "\(error)"])
            return storeUnavailable.response(surface, requestID: context.requestID)
        default:
            throw error
        }
    }

    /// The OAuth JSON error body, with the request id the log line also carries.
    func json(requestID: String) -> Response {
        let body = JSONErrorBody.serialized(code: code.wireCode, description: description, reason: reason?.rawValue, requestID: requestID)
        return RelayResponse.json(code.status, serialized: body, headers: headers)
    }

    /// The JSON body with the RFC 6750 challenge, for endpoints that take an access token.
    func bearer(requestID: String) -> Response {
        var response = json(requestID: requestID)
        if challengesDPoP {
            // A resource refuses a proof with 401, the token endpoint with 400 (RFC 9449 §7.1, §5).
            if code == .invalidDPoPProof { response.status = .unauthorized }
            response.headers[.wwwAuthenticate] = dpopChallenge
        } else if code.challengesBearer {
            response.headers[.wwwAuthenticate] = challenge
        }
        return response
    }

    /// Text for a quoted value of a challenge, as RFC 6750 §3 allows in `error_description`
    /// (%x20-21 / %x23-5B / %x5D-7E): `"` and `\` become `'`, which could otherwise end the value
    /// early and let requester text add parameters; anything else outside it becomes `?`.
    static func quotable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.map { scalar in
                    switch scalar.value {
                    case 0x22, 0x5C: "'"
                    case 0x20...0x7E: scalar
                    default: "?"
                    }
                }))
    }

    /// RFC 9449 §7.1: `WWW-Authenticate: DPoP algs="…", error=…, error_description=…`.
    var dpopChallenge: String {
        let quoted = Self.quotable(description)
        return #"DPoP algs="\#(DPoPGuard.algorithms)", error="\#(code.wireCode)", error_description="\#(quoted)""# + (stepUp?.parameters ?? "")
    }

    /// RFC 6750 §3: `WWW-Authenticate: Bearer realm="relais", error=…, error_description=…`.
    var challenge: String {
        guard code != .missingToken, code != .temporarilyUnavailable else { return #"Bearer realm="relais""# }
        let quoted = Self.quotable(description)
        return #"Bearer realm="relais", error="\#(code.wireCode)", error_description="\#(quoted)""# + (stepUp?.parameters ?? "")
    }

    /// An HTML page for the person in the browser, in their language; never a redirect (the
    /// redirect URI may not be trusted, or the app to return to is unknown). It says what happened
    /// in words for people, the code, and the request's id for support; the developer's
    /// description goes to the log line the id names.
    func page(requestID: String) -> Response {
        let page = PageContext.now
        let strings = page.strings
        let advice =
            page.back.map { #"\#(strings[.errorAdviceDevice])</p><p><a id="error-back" href="\#(HTMLText.escape($0))">\#(strings[.backToDevice])</a>"# }
            ?? strings[.errorAdvice]
        var response = page.render(
            code.status, title: strings[.errorTitle],
            content: """
                <h1>\(strings[.errorHeading])</h1>
                <p id="error-message">\(HTMLText.escape(strings.message(self)))</p>
                <p>\(advice)</p>
                <p>\(strings[.codeLabel]) : <code id="error-code">\(HTMLText.escape(code.wireCode))</code><br>
                \(strings[.referenceLabel]) : <code id="request-id">\(HTMLText.escape(requestID))</code></p>
                """)
        for field in headers { response.headers.append(field) }
        return response
    }

    /// Back to the app's verified redirect URI with `error`, `error_description`, its `state` and
    /// `iss` (RFC 9207).
    func redirect(to redirectURI: String, state: String?, issuer: String) -> Response {
        var parameters = [("error", code.wireCode), ("error_description", description)]
        if let state { parameters.append(("state", state)) }
        parameters.append(("iss", issuer))
        return RelayResponse.redirect(FormParameters.url(redirectURI, adding: parameters))
    }
}

extension RelayError {
    /// A sign-in the provider made fail: a provider that is down is worth retrying, anything else
    /// is a `server_error` whose description starts with the provider code (docs/errors.md).
    init(upstream error: UpstreamError) {
        if case .unavailable = error {
            self.init(.temporarilyUnavailable, error.description)
        } else {
            self.init(.serverError, error.description)
        }
    }
}
