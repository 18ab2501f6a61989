import Hummingbird
import Logging
import RelaisConfig
import RelaisJOSE
import RelaisServer

/// What apps and APIs discover about Relais: RFC 8414 / OpenID Discovery metadata and the JWKS.
struct MetadataRoutes: RelayRoutes {
    let issuer: String
    let apps: [AppSettings]
    let providers: [ProviderSettings]
    let keys: RelayKeys
    /// `grant_types_supported`, from the grants `/token` answers (``TokenGrants``).
    let grantTypes: [String]

    func register(on router: some RouterMethods<RelaisRequestContext>) {
        let document = metadata()
        let serialized = document.serialized()
        router.get("/.well-known/oauth-authorization-server") { _, _ in RelayResponse.publicDocument(serialized, contentType: "application/json") }
        router.get("/.well-known/openid-configuration") { _, _ in RelayResponse.publicDocument(serialized, contentType: "application/json") }
        // Generated development keys may change (see RelayKeys): served as they are now.
        let signingKeys = keys.ring.signingKeys.publicJSON()
        router.get("/jwks.json") { [keys] _, _ in
            return RelayResponse.publicDocument(keys.signingKeysGenerated ? keys.ring.signingKeys.publicJSON() : signingKeys, contentType: "application/jwk-set+json")
        }
        // The jwks_uri to register at providers: the public halves of Relais' client keys
        // (private_key_jwt assertions, `use: sig`) and of its decryption keys (FranceConnect+
        // encrypts id_tokens and userinfo to them, `use: enc`).
        let providerKeys = JWKSet(keys: providers.flatMap { ($0.clientKey.map { [$0] } ?? []) + $0.decryptionKeys }).publicJSON()
        router.get("/jwks/provider.json") { _, _ in RelayResponse.publicDocument(providerKeys, contentType: "application/jwk-set+json") }
    }

    func metadata() -> JSONValue {
        func strings(_ values: [String]) -> JSONValue { .array(values.map { .string($0) }) }
        let scopes = Set(apps.flatMap(\.scopes)).sorted()
        var document: [String: JSONValue] = [
            "issuer": .string(issuer),
            "authorization_endpoint": .string(issuer + "/authorize"),
            "token_endpoint": .string(issuer + "/token"),
            "userinfo_endpoint": .string(issuer + "/userinfo"),
            "jwks_uri": .string(issuer + "/jwks.json"),
            "introspection_endpoint": .string(issuer + "/introspect"),
            "revocation_endpoint": .string(issuer + "/revoke"),
            "end_session_endpoint": .string(issuer + "/logout"),
            "introspection_endpoint_auth_methods_supported": strings(["client_secret_basic", "client_secret_post"]),
            "revocation_endpoint_auth_methods_supported": strings(["none"]),
            "response_types_supported": strings(["code"]),
            "response_modes_supported": strings(["query"]),
            "grant_types_supported": strings(grantTypes),
            "code_challenge_methods_supported": strings(["S256"]),
            "dpop_signing_alg_values_supported": strings(DPoPGuard.algorithms.split(separator: " ").map(String.init)),
            "token_endpoint_auth_methods_supported": strings(apps.contains { $0.attestation != .off } ? ["none", "attest_jwt_client_auth"] : ["none"]),
            "subject_types_supported": strings(["public"]),
            "id_token_signing_alg_values_supported": strings(keys.ring.idTokenAlgorithms),
            "scopes_supported": strings(scopes),
            "claims_supported": strings(["sub", "acr", "amr", "auth_time", "sid", "idp"] + ScopeCatalogue.identityClaims.sorted()),
            "authorization_response_iss_parameter_supported": .bool(true),
            "prompt_values_supported": strings(["login", "consent", "select_account"]),
        ]
        // draft-ietf-oauth-attestation-based-client-auth §10: where to get a challenge, which algorithms.
        if apps.contains(where: { $0.attestation != .off }) {
            document["challenge_endpoint"] = .string(issuer + "/attest/challenge")
            let algorithms = strings(ClientAttestationGuard.algorithms.map(\.rawValue))
            document["client_attestation_signing_alg_values_supported"] = algorithms
            document["client_attestation_pop_signing_alg_values_supported"] = algorithms
        }
        // RFC 8628 §4.
        if apps.contains(where: { $0.deviceGrant != nil }) { document["device_authorization_endpoint"] = .string(issuer + "/device_authorization") }
        return .object(document)
    }
}
