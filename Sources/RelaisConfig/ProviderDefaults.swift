public import RelaisJOSE

/// What a provider's `preset` sets: one value per provider family, whose fields are the rows of
/// "The presets at a glance" in docs/providers.md. `providers.<id>` starts from one, and any key set
/// beside `preset` overrides it. A new preset is one more value here, listed in ``allCases``
/// (docs/extending.md).
public struct ProviderDefaults: Sendable, Equatable, RawRepresentable, CaseIterable {
    /// The `preset` value in configuration.
    public var name: String
    /// Read endpoints from `{issuer}/.well-known/openid-configuration`.
    public var discovery = true
    public var scopes: [String]
    /// Levels from lowest to highest (`acr_order`).
    public var acrOrder: [String] = []
    /// The levels the provider gives (`acr_values_supported`); nil: every level of `acr_order`,
    /// as configured.
    public var acrValuesSupported: [String]?
    /// How a level is asked (`acr_request`).
    public var acrRequest = ProviderSettings.ACRRequest.acrValues
    /// The level sent when the app asks for none (`acr_values`).
    public var acrValues: String?
    public var idTokenAlgorithms: [JWSAlgorithm]
    public var userinfoFormat: ProviderSettings.UserinfoFormat
    /// PKCE towards the provider.
    public var pkce = true
    /// `iss` in the callback (RFC 9207).
    public var requireCallbackIssuer = ProviderSettings.CallbackIssuer.auto
    /// Pass an app's `idp_hint` on (`forward_idp_hint`).
    public var forwardsIDPHint = false
    /// Refuse an id_token that is signed but not encrypted.
    public var requireEncryptedIDToken = false
    /// Every preset: ProConnect does not take `client_secret_basic`.
    public var clientAuthentication = ProviderSettings.ClientAuthentication.clientSecretPost

    public init(
        name: String, scopes: [String], idTokenAlgorithms: [JWSAlgorithm], userinfoFormat: ProviderSettings.UserinfoFormat,
        _ change: (inout ProviderDefaults) -> Void = { _ in }
    ) {
        self.name = name
        self.scopes = scopes
        self.idTokenAlgorithms = idTokenAlgorithms
        self.userinfoFormat = userinfoFormat
        change(&self)
    }

    /// FranceConnect v2, for the public.
    public static let franceconnectV2 = ProviderDefaults(
        name: "franceconnect-v2", scopes: ["openid", "identite_pivot", "email"], idTokenAlgorithms: [.es256, .rs256], userinfoFormat: .jws
    ) {
        $0.acrOrder = ["eidas1", "eidas2", "eidas3"]
        $0.acrValuesSupported = ["eidas1"]
        $0.acrValues = "eidas1"
        // FranceConnect refuses unknown parameters.
        $0.pkce = false
        $0.requireCallbackIssuer = .always
        $0.forwardsIDPHint = true
    }

    /// FranceConnect+, for sensitive services: its tokens are signed, then encrypted to Relais.
    public static let franceconnectPlus = ProviderDefaults(
        name: "franceconnect-plus", scopes: ["openid", "identite_pivot", "email"], idTokenAlgorithms: [.es256], userinfoFormat: .jwe
    ) {
        $0.acrOrder = ["eidas1", "eidas2", "eidas3"]
        $0.acrValuesSupported = ["eidas2", "eidas3"]
        $0.acrValues = "eidas2"
        $0.pkce = false
        $0.requireCallbackIssuer = .always
        $0.forwardsIDPHint = true
        $0.requireEncryptedIDToken = true
    }

    /// FranceConnect v1 (legacy): no discovery, HS256 id_tokens with the client secret.
    public static let franceconnectV1 = ProviderDefaults(
        name: "franceconnect-v1", scopes: ["openid", "identite_pivot", "email"], idTokenAlgorithms: [.hs256], userinfoFormat: .json
    ) {
        $0.discovery = false
        $0.acrOrder = ["eidas1", "eidas2", "eidas3"]
        $0.acrValuesSupported = ["eidas1"]
        $0.acrValues = "eidas1"
        $0.pkce = false
    }

    /// ProConnect (ex-AgentConnect), FranceConnect's sibling for civil servants and professionals.
    public static let proconnect = ProviderDefaults(
        // The claims ProConnect always has (its "identité pivot" of an agent).
        name: "proconnect", scopes: ["openid", "given_name", "usual_name", "email", "uid", "siret"], idTokenAlgorithms: [.es256, .rs256],
        // A signed JWT when the service registered a signing algorithm, JSON otherwise.
        userinfoFormat: .auto
    ) {
        // `-mfa`: the same level with a second factor.
        $0.acrOrder = ["eidas0", "eidas0-mfa", "eidas1", "eidas1-mfa", "eidas2", "eidas3"]
        $0.acrRequest = .claims
        $0.requireCallbackIssuer = .always
        $0.forwardsIDPHint = true
    }

    /// Any other OpenID Connect provider.
    public static let oidc = ProviderDefaults(
        name: "oidc", scopes: ["openid", "profile", "email"], idTokenAlgorithms: [.rs256, .es256, .ps256, .edDSA], userinfoFormat: .auto
    )

    /// The presets configuration may name, in the order its error messages list them.
    public static let allCases: [ProviderDefaults] = [franceconnectV2, franceconnectPlus, franceconnectV1, proconnect, oidc]

    public var rawValue: String { name }
    public init?(rawValue: String) {
        guard let found = Self.allCases.first(where: { $0.name == rawValue }) else { return nil }
        self = found
    }

    /// A preset is its name: two values of one name are one preset.
    public static func == (lhs: ProviderDefaults, rhs: ProviderDefaults) -> Bool { lhs.name == rhs.name }
}
