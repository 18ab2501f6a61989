import RelaisConfig
import RelaisJOSE
import RelaisTestSupport
import Testing

/// docs/extending.md, "Add a provider preset", followed in a test: a fourth family of providers is
/// one `ProviderDefaults` value, and a provider built from it has every setting from that value.
@Suite(.tags(.fast)) struct ProviderPresetRecipeTests {
    /// A throwaway preset, as a new one would be written beside the others in ProviderDefaults.swift.
    static let exampleIdP = ProviderDefaults(name: "example-idp", scopes: ["openid", "email", "badge"], idTokenAlgorithms: [.es384], userinfoFormat: .jws) {
        $0.discovery = false
        $0.acrOrder = ["basic", "badge", "badge-mfa"]
        $0.acrValues = "basic"
        $0.acrRequest = .claims
        $0.pkce = false
        $0.requireCallbackIssuer = .never
        $0.forwardsIDPHint = true
        $0.requireEncryptedIDToken = true
        $0.clientAuthentication = .privateKeyJWT
    }

    @Test func aFourthPresetIsOneValue() {
        let provider = ProviderSettings(id: "example", preset: Self.exampleIdP, issuer: "https://idp.example.fr", clientID: "relais")
        #expect(provider.preset == Self.exampleIdP && provider.preset != .oidc)
        #expect(!provider.discovery && provider.scopes == ["openid", "email", "badge"])
        #expect(provider.acrOrder == ["basic", "badge", "badge-mfa"] && provider.acrValues == "basic" && provider.acrRequest == .claims)
        // No acr_values_supported of its own: every level of its order.
        #expect(provider.acrValuesSupported == ["basic", "badge", "badge-mfa"])
        #expect(provider.idTokenAlgorithms == [.es384] && provider.userinfoFormat == .jws && provider.requireEncryptedIDToken)
        #expect(!provider.pkce && provider.requireCallbackIssuer == .never && provider.forwardsIDPHint && provider.clientAuthentication == .privateKeyJWT)
        // Only the built-in presets can be named in a file until the new one is listed in allCases.
        #expect(ProviderDefaults(rawValue: "example-idp") == nil && ProviderDefaults(rawValue: "proconnect") == .proconnect)
    }

    /// Each built-in preset, as the table "The presets at a glance" of docs/providers.md has it.
    @Test func theBuiltInPresetsAreTheColumnsOfTheProvidersPage() {
        #expect(ProviderDefaults.allCases.map(\.name) == ["franceconnect-v2", "franceconnect-plus", "franceconnect-v1", "proconnect", "oidc"])
        #expect(ProviderDefaults.allCases.map(\.discovery) == [true, true, false, true, true])
        #expect(ProviderDefaults.allCases.map(\.acrValues) == ["eidas1", "eidas2", "eidas1", nil, nil])
        #expect(ProviderDefaults.allCases.map(\.acrRequest) == [.acrValues, .acrValues, .acrValues, .claims, .acrValues])
        #expect(ProviderDefaults.allCases.map(\.userinfoFormat) == [.jws, .jwe, .json, .auto, .auto])
        #expect(ProviderDefaults.allCases.map(\.pkce) == [false, false, false, true, true])
        #expect(ProviderDefaults.allCases.map(\.forwardsIDPHint) == [true, true, false, true, false])
        #expect(ProviderDefaults.allCases.allSatisfy { $0.clientAuthentication == .clientSecretPost })
    }
}
