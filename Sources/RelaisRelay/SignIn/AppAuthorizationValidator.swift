import RelaisConfig
import RelaisHTTPClient
import RelaisServer

/// The rules of Relais' `/authorize` for apps (RFC 6749 §4.1, RFC 7636, RFC 8252), as a pure
/// function of the parameters. An unknown client or redirect URI is answered with a page, never a
/// redirect: sending an error to an unverified URI would make Relais an open redirector.
struct AppAuthorizationValidator: Sendable {
    enum Outcome: Equatable {
        case valid(AppRequest)
        /// Answered with a page: the client or its redirect URI cannot be trusted.
        case refused(RelayError)
        /// Sent back to the app's verified redirect URI.
        case redirectError(RelayError, redirectURI: String, state: String?)
    }

    let apps: [String: AppSettings]
    let providers: [String: ProviderSettings]

    func validate(_ parameters: FormParameters) -> Outcome {
        if let repeated = parameters.repeatedNames.first(where: { $0 == "client_id" || $0 == "redirect_uri" }) {
            return .refused(RelayError(.invalidRequest, "The parameter '\(repeated)' is given more than once."))
        }
        guard let clientID = parameters["client_id"], !clientID.isEmpty else {
            return .refused(RelayError(.invalidRequest, "The client_id parameter is missing."))
        }
        guard let app = apps[clientID] else {
            return .refused(RelayError(.unknownClient, "No app is registered with this client_id."))
        }
        guard let redirectURI = parameters["redirect_uri"], !redirectURI.isEmpty else {
            return .refused(RelayError(.invalidRequest, "The redirect_uri parameter is missing."))
        }
        guard RedirectMatcher.matches(redirectURI, registered: app.redirectURIs) else {
            return .refused(RelayError(.invalidRedirectURI, "This redirect_uri is not registered for the app."))
        }

        let state = parameters["state"]
        func reject(_ code: RelayError.Code, _ description: String) -> Outcome {
            .redirectError(RelayError(code, description), redirectURI: redirectURI, state: state)
        }
        if let repeated = parameters.firstRepeatedName {
            return reject(.invalidRequest, "the parameter '\(repeated)' is given more than once")
        }
        guard let responseType = parameters["response_type"] else { return reject(.invalidRequest, "response_type is missing") }
        guard responseType == "code" else { return reject(.unsupportedResponseType, "only response_type=code is supported") }
        guard let challenge = parameters["code_challenge"], !challenge.isEmpty else {
            return reject(.invalidRequest, "code_challenge is required (PKCE, RFC 7636)")
        }
        guard parameters["code_challenge_method"] == "S256" else {
            return reject(.invalidRequest, "code_challenge_method must be S256")
        }
        guard PKCE.isValidChallenge(challenge) else {
            return reject(.invalidRequest, "code_challenge must be the 43-character base64url SHA-256 of the verifier")
        }
        var scopes = app.scopes
        if let scope = parameters["scope"] {
            scopes = scope.split(separator: " ").map(String.init)
            guard scopes.contains("openid") else { return reject(.invalidScope, "scope must include openid") }
            if let refused = scopes.first(where: { !app.scopes.contains($0) }) {
                return reject(.invalidScope, "scope '\(refused)' is not allowed for this app")
            }
        }
        var providerID = parameters["provider"] ?? app.providers[0]
        guard app.providers.contains(providerID), var provider = providers[providerID] else {
            return reject(.invalidRequest, "provider '\(providerID)' is not available to this app")
        }
        var acr = provider.acrValues
        if let requested = parameters["acr_values"] {
            // The lowest level the app accepts: Relais checks the provider reaches it, or steps up
            // to the provider that does (RFC 9470: FranceConnect to FranceConnect+).
            let levels = requested.split(separator: " ").map(String.init)
            if !provider.acrValuesSupported.contains(where: levels.contains), let next = provider.stepUpProvider, app.providers.contains(next),
                let stepUp = providers[next], stepUp.acrValuesSupported.contains(where: levels.contains)
            {
                (providerID, provider) = (next, stepUp)
            }
            guard let lowest = provider.acrValuesSupported.first(where: levels.contains) else {
                return reject(.invalidRequest, "acr_values must be among \(provider.acrValuesSupported.joined(separator: ", "))")
            }
            acr = lowest
        }
        // Which identity provider the person should use (FranceConnect's and ProConnect's idp_hint):
        // an opaque identifier, passed on as is, to a provider that takes it.
        let idpHint = parameters["idp_hint"]
        if let idpHint {
            guard provider.forwardsIDPHint else { return reject(.invalidRequest, "provider '\(providerID)' takes no idp_hint") }
            guard (1...256).contains(idpHint.utf8.count), idpHint.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                return reject(.invalidRequest, "idp_hint must be 1 to 256 visible ASCII characters")
            }
        }
        // A label for the person's session list ("Pixel 8 de Marie"): text, never markup or controls.
        // Bytes are bounded first: one character may carry any number of combining marks.
        let deviceName = parameters["device_name"]
        if let deviceName {
            guard deviceName.utf8.count <= 256, (1...64).contains(deviceName.count),
                !deviceName.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0.properties.generalCategory == .format })
            else {
                return reject(.invalidRequest, "device_name must be 1 to 64 characters (256 bytes), without control characters")
            }
        }
        var forceLogin = false
        var maxAge: Int?
        // OIDC max_age: the provider cannot say how old its session is, so any max_age asks for a
        // fresh login; /callback checks the provider's auth_time against it, and Relais' tokens
        // carry auth_time.
        if let text = parameters["max_age"] {
            guard let seconds = MaxAge.seconds(text) else { return reject(.invalidRequest, "max_age must be a number of seconds") }
            forceLogin = true
            maxAge = seconds
        }
        if let prompt = parameters["prompt"] {
            let values = prompt.split(separator: " ").map(String.init)
            if values.contains("none") {
                return reject(.loginRequired, "prompt=none is not supported: the provider always asks the person")
            }
            guard values.allSatisfy({ $0 == "login" || $0 == "consent" || $0 == "select_account" }) else {
                return reject(.invalidRequest, "prompt must be login, consent or select_account")
            }
            forceLogin = forceLogin || values.contains("login")
        }
        if let nonce = parameters["nonce"], nonce.utf8.count > 512 {
            return reject(.invalidRequest, "nonce is longer than 512 bytes")
        }
        if let state, state.utf8.count > 1024 {
            return .refused(RelayError(.invalidRequest, "The state parameter is longer than 1024 bytes."))
        }
        // RFC 9449 §10: the code will only be redeemed with a proof by this key (ignored with dpop: off).
        let dpopJKT = app.dpop == .off ? nil : parameters["dpop_jkt"]
        // A SHA-256 thumbprint has the shape of a PKCE S256 challenge: 43 base64url characters, 32 bytes.
        if let dpopJKT, !PKCE.isValidChallenge(dpopJKT) {
            return reject(.invalidRequest, "dpop_jkt must be the 43-character base64url SHA-256 thumbprint of the DPoP key")
        }
        var request = AppRequest(
            clientID: clientID, redirectURI: redirectURI, codeChallenge: challenge, state: state, scopes: scopes,
            nonce: parameters["nonce"], providerID: providerID, acr: acr, forceLogin: forceLogin
        )
        request.redemption.dpopJKT = dpopJKT
        request.upstream.idpHint = idpHint
        request.upstream.maxAge = maxAge
        request.deviceName = deviceName
        return .valid(request)
    }
}

/// Redirect URI comparison: exact, except a registered loopback URI matches any port (RFC 8252 §7.3),
/// since a native app listens on whatever port the system gives it.
enum RedirectMatcher {
    static func matches(_ candidate: String, registered: [String]) -> Bool {
        registered.contains { $0 == candidate || loopbackMatch(candidate, $0) }
    }

    private static func loopbackMatch(_ candidate: String, _ registered: String) -> Bool {
        guard let a = LoopbackURI(candidate), let b = LoopbackURI(registered) else { return false }
        return a.host == b.host && a.rest == b.rest
    }

    private struct LoopbackURI {
        var host: String
        var rest: String
        init?(_ uri: String) {
            let prefixes = ["http://127.0.0.1", "http://[::1]"]
            guard let prefix = prefixes.first(where: uri.hasPrefix) else { return nil }
            var remainder = Substring(uri.dropFirst(prefix.count))
            if remainder.first == ":" {
                remainder = remainder.dropFirst()
                let digits = remainder.prefix { $0.isASCII && $0.isNumber }  // never other scripts' digits
                guard !digits.isEmpty, digits.count <= 5 else { return nil }
                remainder = remainder.dropFirst(digits.count)
            }
            guard remainder.isEmpty || remainder.first == "/" || remainder.first == "?" else { return nil }
            host = prefix
            rest = String(remainder)
        }
    }
}
