import Hummingbird
import RelaisConfig
import RelaisJOSE
import RelaisServer

/// `/.well-known/openid-configuration` and `/jwks` (v2 and FranceConnect+ only; v1 has neither).
struct DiscoveryRoutes {
    let provider: DevProvider

    func register(on router: Router<RelaisRequestContext>) {
        router.get("\(provider.prefix)/.well-known/openid-configuration") { _, _ in
            let faults = try await provider.faults.take([.discovery], clientID: nil)
            if let failure = await DevProvider.preempt(faults, on: .discovery) { return failure }
            return DevProvider.answer(document().serialized(), contentType: "application/json", faults, on: .discovery)
        }
        router.get("\(provider.prefix)/jwks") { _, _ in
            let faults = try await provider.faults.take([.jwks], clientID: nil)
            if let failure = await DevProvider.preempt(faults, on: .jwks) { return failure }
            return DevProvider.answer(provider.keys.publicSet.publicJSON(), contentType: "application/json", faults, on: .jwks)
        }
    }

    func document() -> JSONValue {
        let issuer = provider.issuer
        let mode = provider.configuration.provider.mode
        let fcplus = mode == .fcplus
        let catalogue = mode.scopeCatalogue
        func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
        var document: [String: JSONValue] = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string("\(issuer)/authorize"),
            "token_endpoint": .string("\(issuer)/token"),
            "userinfo_endpoint": .string("\(issuer)/userinfo"),
            "end_session_endpoint": .string("\(issuer)/session/end"),
            "jwks_uri": .string("\(issuer)/jwks"),
            "response_types_supported": strings(["code"]),
            "response_modes_supported": strings(["query"]),
            "grant_types_supported": strings(["authorization_code"]),
            "subject_types_supported": strings([mode == .proconnect ? "public" : "pairwise"]),
            "scopes_supported": strings(catalogue.keys.sorted()),
            "claims_supported": strings(["sub", "amr", "acr", "auth_time"] + Set(catalogue.values.joined()).subtracting(["sub"]).sorted()),
            "claims_parameter_supported": .bool(true),
            "request_parameter_supported": .bool(false),
            "acr_values_supported": strings(provider.validator.acceptedLevels),
            "id_token_signing_alg_values_supported": strings(fcplus ? ["ES256"] : ["ES256", "RS256"]),
            "userinfo_signing_alg_values_supported": strings(fcplus ? ["ES256"] : ["ES256", "RS256"]),
            "token_endpoint_auth_methods_supported": strings(["client_secret_post", "private_key_jwt"]),
            "token_endpoint_auth_signing_alg_values_supported": strings(["ES256", "RS256"]),
            "authorization_response_iss_parameter_supported": .bool(true),
            "frontchannel_logout_supported": .bool(false),
            "prompt_values_supported": strings(mode == .proconnect ? ["login", "consent", "none"] : ["login", "consent"]),
        ]
        if fcplus {
            for prefix in ["id_token", "userinfo"] {
                document["\(prefix)_encryption_alg_values_supported"] = strings(["RSA-OAEP", "RSA-OAEP-256", "ECDH-ES"])
                document["\(prefix)_encryption_enc_values_supported"] = strings(["A256GCM"])
            }
        }
        return .object(document)
    }
}
