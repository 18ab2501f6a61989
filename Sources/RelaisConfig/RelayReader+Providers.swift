import Configuration
import RelaisCrypto
import RelaisJOSE

/// `providers.<id>`: a preset, then the keys that override it, then the checks that need both.
extension ValueReader {
    mutating func readProvider(id: String, environment: RelaisConfiguration.Environment, publicBaseURL: String) -> ProviderSettings {
        let base = "providers.\(id)"
        let preset = choice("\(base).preset", default: ProviderDefaults.oidc)
        let issuer = text("\(base).issuer") ?? ""
        if issuer.isEmpty {
            problem(
                "\(base).issuer", "set the provider's issuer (FranceConnect v2: https://oidc.franceconnect.gouv.fr/api/v2, ProConnect: https://auth.agentconnect.gouv.fr/api/v2)")
        } else {
            checkURL("\(base).issuer", issuer, environment: environment)
        }
        let clientID = text("\(base).client_id") ?? ""
        if clientID.isEmpty { problem("\(base).client_id", "set the client_id the provider registered for Relais") }
        var provider = ProviderSettings(id: id, preset: preset, issuer: issuer, clientID: clientID)
        provider.discovery = boolean("\(base).discovery") ?? provider.discovery
        provider.authorizationEndpoint = endpoint("\(base).authorization_endpoint", environment)
        provider.tokenEndpoint = endpoint("\(base).token_endpoint", environment)
        provider.userinfoEndpoint = endpoint("\(base).userinfo_endpoint", environment)
        provider.jwksURI = endpoint("\(base).jwks_uri", environment)
        provider.endSessionEndpoint = endpoint("\(base).end_session_endpoint", environment)
        provider.clientSecret = secret("\(base).client_secret")
        provider.clientAuthentication = choice("\(base).client_auth", default: provider.clientAuthentication)
        if let path = text("\(base).client_key_file") { provider.clientKey = privateKey(path, key: "\(base).client_key_file", signing: true) }
        provider.scopes = list("\(base).scopes") ?? provider.scopes
        if !provider.scopes.contains("openid") { problem("\(base).scopes", "must include openid") }
        if let acr = text("\(base).acr_values") { provider.acrValues = acr }
        provider.acrOrder = list("\(base).acr_order") ?? provider.acrOrder
        provider.acrValuesSupported = list("\(base).acr_values_supported") ?? provider.preset.acrValuesSupported ?? provider.acrOrder
        provider.acrRequest = choice("\(base).acr_request", default: provider.acrRequest)
        // A level sent by default that acr_order lacks fails every sign-in's acr check: refused here.
        for level in (provider.acrValues ?? "").split(separator: " ") where !provider.acrOrder.isEmpty && !provider.acrOrder.contains(String(level)) {
            problem(
                "\(base).acr_values",
                "'\(level)' is not a level of acr_order (\(provider.acrOrder.joined(separator: ", "))), so no sign-in could reach it; "
                    + "name one of those levels, or add it to acr_order")
        }
        provider.forwardsIDPHint = boolean("\(base).forward_idp_hint") ?? provider.forwardsIDPHint
        provider.stepUpProvider = text("\(base).step_up_provider")
        provider.idTokenAlgorithms = algorithms("\(base).id_token_algs") ?? provider.idTokenAlgorithms
        provider.userinfoAlgorithms = algorithms("\(base).userinfo_signing_algs")
        provider.requireEncryptedIDToken = boolean("\(base).require_encrypted_id_token") ?? provider.requireEncryptedIDToken
        provider.userinfoFormat = choice("\(base).userinfo_format", default: provider.userinfoFormat)
        provider.userinfoTokenIn = choice("\(base).userinfo_token_in", default: provider.userinfoTokenIn)
        provider.decryptionKeys = (list("\(base).decryption_key_files") ?? []).compactMap {
            privateKey($0, key: "\(base).decryption_key_files", signing: false)
        }
        provider.pkce = boolean("\(base).pkce") ?? provider.pkce
        if let policy = text("\(base).require_callback_iss") {
            // true and false, from when this was a yes/no setting, read as always and never.
            switch policy.lowercased() {
            case "auto": provider.requireCallbackIssuer = .auto
            case "always", "true": provider.requireCallbackIssuer = .always
            case "never", "false": provider.requireCallbackIssuer = .never
            default: problem("\(base).require_callback_iss", "expected one of auto, always, never; got '\(policy)'")
            }
        }
        provider.backchannelLogout = boolean("\(base).backchannel_logout") ?? provider.backchannelLogout
        provider.postLogoutRedirectURI = text("\(base).post_logout_redirect_uri") ?? "\(publicBaseURL)/logout/callback"
        provider.timeout = duration("\(base).timeout")
        provider.jwksRefetchInterval = duration("\(base).jwks_refetch_interval", atLeast: .seconds(1)) ?? provider.jwksRefetchInterval

        switch provider.clientAuthentication {
        case .clientSecretPost, .clientSecretBasic:
            if provider.clientSecret == nil { problem("\(base).client_secret", "\(provider.clientAuthentication.rawValue) needs client_secret (or client_secret_file)") }
        case .privateKeyJWT:
            if provider.clientKey == nil { problem("\(base).client_key_file", "private_key_jwt needs a private key file (EC P-256 or RSA)") }
        }
        if provider.idTokenAlgorithms.contains(where: \.isSymmetric) && (provider.clientSecret?.utf8.count ?? 0) < 32 {
            problem("\(base).client_secret", "HS256 id_tokens are checked with the client secret: it needs at least 32 bytes")
        }
        if !provider.discovery {
            if provider.authorizationEndpoint == nil { problem("\(base).authorization_endpoint", "required when discovery is off") }
            if provider.tokenEndpoint == nil { problem("\(base).token_endpoint", "required when discovery is off") }
            if provider.jwksURI == nil && provider.idTokenAlgorithms.contains(where: { !$0.isSymmetric }) {
                problem("\(base).jwks_uri", "required when discovery is off and id_tokens are signed with a public key")
            }
        }
        // In development a key is generated instead (readRelaySections), with a warning.
        if environment != .development && provider.decryptionKeys.isEmpty {
            if provider.userinfoFormat == .jwe {
                problem("\(base).decryption_key_files", "userinfo_format jwe (FranceConnect+) needs Relais' private decryption keys")
            } else if provider.requireEncryptedIDToken {
                problem("\(base).decryption_key_files", "require_encrypted_id_token needs Relais' private decryption keys")
            }
        }
        return provider
    }

    /// A list of JWS algorithm names; nil when the key is absent.
    mutating func algorithms(_ key: String) -> [JWSAlgorithm]? {
        guard let names = list(key) else { return nil }
        var algorithms: [JWSAlgorithm] = []
        for name in names {
            if let algorithm = JWSAlgorithm(rawValue: name) {
                algorithms.append(algorithm)
            } else {
                problem(key, "unknown algorithm '\(name)' (RS256, ES256, PS256, EdDSA, HS256, ...)")
            }
        }
        return algorithms
    }

    mutating func endpoint(_ key: String, _ environment: RelaisConfiguration.Environment) -> String? {
        guard let url = text(key) else { return nil }
        checkURL(key, url, environment: environment)
        return url
    }
}
