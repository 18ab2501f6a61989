import FoundationEssentials
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

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

    /// Every level FranceConnect knows, weakest first (`pickAcr`'s `knownAcrValues`).
    static let knownLevels = ["eidas1", "eidas2", "eidas3"]

    /// The level performed when none of those asked for is known: FranceConnect's default for the
    /// mode (`connexion-acr-fcp-low.feature` and `-fcp-high.feature`, rows `niveau_inconnu`).
    var defaultLevel: String { mode == .fcplus ? "eidas3" : "eidas1" }

    /// FranceConnect's `pickAcr` (`back/libs/core/src/transforms/acr.transform.ts`): the weakest
    /// known level among those asked for, else the default. Whether the mode allows it is checked
    /// after (`CoreAcrService.rejectInvalidAcr`).
    func pickLevel(_ requested: [String]) -> String {
        Self.knownLevels.first(where: requested.contains) ?? defaultLevel
    }

    /// Parameters FranceConnect's `AuthorizeParamsDto` requires (`back/apps/core-fcp/src/dto/
    /// authorize-params.dto.ts`): without one, its error page, before any redirect.
    static let requiredParameters = ["acr_values", "nonce", "state", "scope", "response_type"]

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

        if mode != .proconnect, let page = Self.parameterErrorPage(parameters) { return .errorPage(page) }

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
        let requestedScopes = (parameters["scope"] ?? "").split(separator: " ").map(String.init)
        guard requestedScopes.contains("openid") else {
            return reject("invalid_request", "openid scope must be requested when using the acr_values parameter")
        }
        // connexion-scope.feature: an unknown scope is dropped ("attribut scope inconnu ignoré");
        // a scope of the catalogue the service is not entitled to is refused.
        let scopes = requestedScopes.filter { mode.scopeCatalogue[$0] != nil }
        if let entitled = client.scopes, scopes.contains(where: { $0 != "openid" && !entitled.contains($0) }) {
            return reject("invalid_scope", "requested scope is not allowed")
        }
        let nonce = parameters["nonce"] ?? ""
        let acr = pickLevel((parameters["acr_values"] ?? "").split(separator: " ").map(String.init))
        guard acceptedLevels.contains(acr) else {
            return reject(
                "invalid_acr", "acr_value is not valid, should be equal one of these values, expected \(acceptedLevels.joined(separator: ",")), got \(acr)"
            )
        }
        let prompt = (parameters["prompt"] ?? "").split(separator: " ").map(String.init)
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

    /// What FranceConnect's parameter validation shows as its error page (HTTP 400, `Y030007`,
    /// the person stuck on FranceConnect) rather than sending back: a required parameter missing,
    /// a nonce under 22 characters, a `prompt` other than `login` and `consent`
    /// (`quality/fcp/cypress/integration/api/api-authorize.feature`, "erreur Y030007").
    static func parameterErrorPage(_ parameters: FormParameters) -> ErrorPage? {
        if let missing = requiredParameters.first(where: { parameters[$0] == nil }) {
            return ErrorPage(code: "Y030007", message: "Une erreur technique est survenue : le paramètre \(missing) est absent.")
        }
        if (parameters["nonce"] ?? "").count < minimumNonceLength {
            return ErrorPage(code: "Y030007", message: "Une erreur technique est survenue : le nonce doit compter au moins \(minimumNonceLength) caractères.")
        }
        if let prompt = parameters["prompt"] {
            let values = prompt.split(separator: " ")
            if values.isEmpty || values.contains(where: { $0 != "login" && $0 != "consent" }) {
                return ErrorPage(code: "Y030007", message: "Une erreur technique est survenue : la valeur de prompt n'est pas acceptée.")
            }
        }
        return nil
    }
}
