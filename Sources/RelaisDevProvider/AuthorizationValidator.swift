import FoundationEssentials
import RelaisConfig
import RelaisJOSE
import RelaisConfig
import RelaisServer
import RelaisHTTPClient

/// The `/authorize` rules of FranceConnect, as a pure function of the parameters: the route only
/// performs what the outcome says. Errors about the client or its redirect URI cannot be sent back
/// to the client safely, so they are pages; every other error goes back to the redirect URI.
struct AuthorizationValidator {
    enum Outcome: Equatable {
        case valid(AuthorizationRequest)
        /// An HTML page with FranceConnect's error code; never a redirect.
        case errorPage(ErrorPage)
        /// 303 to the client with `error`, `error_description`, `state`, `iss`.
        case redirectError(redirectURI: String, state: String?, error: String, description: String)
    }

    struct ErrorPage: Equatable {
        var code: String
        var message: String
    }

    static let minimumNonceLength = 22
    static let knownParameters: Set<String> = [
        "response_type", "client_id", "redirect_uri", "scope", "state", "nonce", "acr_values", "prompt", "claims", "idp_hint", "ui_locales",
    ]

    let mode: DevProviderConfiguration.Mode
    let clients: [String: DevProviderConfiguration.Client]
    /// The identity providers the test identities sign in with (their `idp_id`): what `idp_hint` may name.
    var identityProviders: Set<String> = []

    /// Levels the mode accepts, lowest first.
    var acceptedLevels: [String] {
        switch mode {
        case .fcplus: ["eidas2", "eidas3"]
        case .proconnect: DevProviderConfiguration.proConnectLevels
        case .v1, .v2: ["eidas1"]
        }
    }

    func validate(_ parameters: FormParameters) -> Outcome {
        if let repeated = parameters.repeatedNames.first, repeated == "client_id" || repeated == "redirect_uri" {
            return .errorPage(ErrorPage(code: "Y030007", message: "The parameter '\(repeated)' is given more than once."))
        }
        guard let clientID = parameters["client_id"], !clientID.isEmpty else {
            return .errorPage(ErrorPage(code: "Y030007", message: "The client_id parameter is missing."))
        }
        guard let client = clients[clientID] else {
            return .errorPage(ErrorPage(code: "Y04EA6EF", message: "No service provider is registered with this client_id."))
        }
        guard let redirectURI = parameters["redirect_uri"], !redirectURI.isEmpty else {
            return .errorPage(ErrorPage(code: "Y030007", message: "The redirect_uri parameter is missing."))
        }
        guard client.redirectURIs.contains(redirectURI) else {
            return .errorPage(ErrorPage(code: "Y04C013C", message: "This redirect_uri is not registered for the service provider."))
        }

        // From here on the client and its redirect URI are trusted: errors go back to it.
        let state = parameters["state"]
        func reject(_ error: String, _ description: String) -> Outcome {
            .redirectError(redirectURI: redirectURI, state: state, error: error, description: description)
        }
        if mode == .proconnect { return validateProConnect(parameters, clientID: clientID, redirectURI: redirectURI, reject: reject) }
        if let repeated = parameters.firstRepeatedName {
            return reject("invalid_request", "the parameter '\(repeated)' is given more than once")
        }
        if let unknown = parameters.names.first(where: { !Self.knownParameters.contains($0) }) {
            return reject("invalid_request", "unknown parameter '\(unknown)'")
        }
        guard let responseType = parameters["response_type"], !responseType.isEmpty else {
            return reject("invalid_request", "missing required parameter 'response_type'")
        }
        guard responseType == "code" else {
            return reject("unsupported_response_type", "unsupported response_type requested")
        }
        guard let state, !state.isEmpty else {
            return reject("invalid_request", "missing required parameter 'state'")
        }
        let scopes = (parameters["scope"] ?? "").split(separator: " ").map(String.init)
        guard scopes.contains("openid") else {
            return reject("invalid_request", "openid scope must be requested when using the acr_values parameter")
        }
        if let unknown = scopes.first(where: { ScopeCatalogue.claimsByScope[$0] == nil }) {
            return reject("invalid_scope", "requested scope '\(unknown)' is not allowed")
        }
        guard let nonce = parameters["nonce"], !nonce.isEmpty else {
            return reject("invalid_request", "missing required parameter 'nonce'")
        }
        guard nonce.count >= Self.minimumNonceLength else {
            return reject("invalid_request", "nonce must be at least \(Self.minimumNonceLength) characters long")
        }
        guard let acrValues = parameters["acr_values"], !acrValues.isEmpty else {
            return reject("invalid_request", "missing required parameter 'acr_values'")
        }
        let requested = acrValues.split(separator: " ").map(String.init)
        guard requested.allSatisfy(acceptedLevels.contains) else {
            return reject("invalid_acr", "acr_values must be among: \(acceptedLevels.joined(separator: ", "))")
        }
        // The lowest level asked for is the one performed (FranceConnect+ behaviour).
        let acr = acceptedLevels.first(where: requested.contains)!
        let prompt = (parameters["prompt"] ?? "").split(separator: " ").map(String.init)
        if let bad = prompt.first(where: { $0 != "login" && $0 != "consent" }) {
            return reject("invalid_request", "prompt '\(bad)' is not supported (only login and consent)")
        }
        var wantsAMR = false
        if let claims = parameters["claims"] {
            guard let object = JSONValue.object(from: Array(claims.utf8)) else {
                return reject("invalid_request", "claims must be a JSON object")
            }
            wantsAMR = object["id_token"]?.objectValue?["amr"] != nil
        }
        return .valid(
            AuthorizationRequest(
                clientID: clientID, redirectURI: redirectURI, scopes: scopes, state: state, nonce: nonce, acr: acr, prompt: prompt,
                wantsAMR: wantsAMR
            )
        )
    }
}
