import RelaisTestSupport
import Testing

@testable import RelaisConfig

/// The schemas are what the readers ask for: a key is spelled once, where it is read.
@Suite(.tags(.fast)) struct SchemaSurveyTests {
    @Test func theRelaySchemaHoldsWhatItsReaderReads() throws {
        let schema = ConfigSchema.relay
        #expect(schema.environmentPrefix == "RELAIS_")
        #expect(schema.leafKeys.isSuperset(of: ["server.port", "store.redis.password", "store.redis.password_file", "relay.code_lifetime", "rate_limit.per_ip"]))
        #expect(schema.listKeys == ["forward_auth.audiences", "server.trusted_proxies", "store.redis.cluster", "store.redis.sentinel.nodes"])
        #expect(Set(schema.keyedSections.keys) == ["providers", "apps", "resource_servers", "signing.keys", "sessions.keys"])
        let providers = try #require(schema.keyedSections["providers"] ?? nil)
        #expect(providers.leafKeys.isSuperset(of: ["issuer", "client_id", "client_secret", "client_secret_file", "backchannel_logout"]))
        #expect(providers.listKeys == ["scopes", "acr_order", "acr_values_supported", "id_token_algs", "userinfo_signing_algs", "decryption_key_files"])
        // Keyed entries' keys never leak into the top level.
        #expect(!schema.leafKeys.contains { $0.hasPrefix("providers.") || $0.hasPrefix("apps.") })
        // The development provider's own section is not the relay's.
        #expect(!schema.leafKeys.contains("provider.mode"))
    }

    @Test func theDevelopmentProviderSchemaHoldsWhatItsReaderReads() throws {
        let schema = ConfigSchema.devProvider
        #expect(schema.environmentPrefix == "DEV_PROVIDER_")
        #expect(schema.leafKeys.isSuperset(of: ["provider.mode", "provider.identities_file", "server.port", "store.kind"]))
        #expect(!schema.leafKeys.contains("rate_limit.per_ip") && !schema.leafKeys.contains("metrics.enabled"))
        let clients = try #require(schema.keyedSections["clients"] ?? nil)
        #expect(clients.leafKeys.isSuperset(of: ["secret", "secret_file", "jwks_uri", "faults"]))
        #expect(clients.listKeys == ["redirect_uris", "post_logout_redirect_uris", "scopes"])
    }
}
