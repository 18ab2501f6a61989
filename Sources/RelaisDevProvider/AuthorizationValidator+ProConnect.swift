import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE

/// ProConnect's `/authorize` rules, as its federation applies them: unknown parameters are ignored
/// (not refused, unlike FranceConnect), `nonce` is optional, unknown scopes are dropped, a level is
/// required through `claims` (`essential`) or wished for through `acr_values`, and `idp_hint`
/// must name a known identity provider.
extension AuthorizationValidator {
    func validateProConnect(
        _ parameters: FormParameters, clientID: String, redirectURI: String, reject: (String, String) -> Outcome
    ) -> Outcome {
        if let repeated = parameters.firstRepeatedName {
            return reject("invalid_request", "the parameter '\(repeated)' is given more than once")
        }
        guard let responseType = parameters["response_type"], !responseType.isEmpty else {
            return reject("invalid_request", "missing required parameter 'response_type'")
        }
        guard responseType == "code" else { return reject("unsupported_response_type", "unsupported response_type requested") }
        guard let state = parameters["state"], !state.isEmpty else { return reject("invalid_request", "missing required parameter 'state'") }
        let requested = (parameters["scope"] ?? "").split(separator: " ").map(String.init)
        guard requested.contains("openid") else { return reject("invalid_request", "openid scope must be requested") }
        let scopes = requested.filter { mode.scopeCatalogue[$0] != nil }
        let nonce = parameters["nonce"] ?? ""
        guard nonce.utf8.count <= 512 else { return reject("invalid_request", "nonce must be at most 512 characters") }
        let prompt = (parameters["prompt"] ?? "").split(separator: " ").map(String.init)
        if let bad = prompt.first(where: { !["login", "consent", "none"].contains($0) }) {
            return reject("invalid_request", "unsupported prompt value requested (\(bad))")
        }
        if prompt.contains("none") {
            guard prompt.count == 1 else { return reject("invalid_request", "prompt none must only be used alone") }
            // The development provider never signs in silently: as ProConnect without a session.
            return reject("login_required", "End-User authentication is required")
        }
        if let hint = parameters["idp_hint"], !identityProviders.contains(hint) {
            return reject("idp_hint_not_found", "the identity provider named by idp_hint is unknown")
        }
        var wantsAMR = false
        var essential: [String]?
        if let text = parameters["claims"] {
            guard let claims = JSONValue.object(from: Array(text.utf8)) else { return reject("invalid_request", "claims must be a JSON object") }
            let idToken = claims["id_token"]?.objectValue ?? [:]
            wantsAMR = idToken["amr"] != nil
            if let acr = idToken["acr"]?.objectValue, acr["essential"] == .bool(true) {
                let values = (acr["values"]?.arrayValue ?? []).compactMap(\.stringValue) + [acr["value"]?.stringValue].compactMap { $0 }
                let supported = values.filter(acceptedLevels.contains)
                guard !supported.isEmpty else { return reject("access_denied", "requested ACRs could not be satisfied") }
                essential = supported
            }
        }
        // acr_values alone is a wish, filtered to known levels; beside a required claim it is required too.
        let wished = (parameters["acr_values"] ?? "").split(separator: " ").map(String.init).filter(acceptedLevels.contains)
        if let required = essential { essential = required + wished.filter { !required.contains($0) } }
        var request = AuthorizationRequest(
            clientID: clientID, redirectURI: redirectURI, scopes: scopes, state: state, nonce: nonce,
            acr: wished.first ?? "eidas1", prompt: prompt, wantsAMR: wantsAMR
        )
        request.essentialACR = essential
        request.idpHint = parameters["idp_hint"]
        return .valid(request)
    }
}
