public import RelaisJOSE

/// Everything `relais dev-provider` needs, validated. Every key is documented in
/// config/dev-provider.yaml.
public struct DevProviderConfiguration: Sendable {
    public var server: RelaisConfiguration.Server
    public var log = RelaisConfiguration.Log()
    public var store: RelaisConfiguration.Store
    public var provider = Provider()
    /// Registered clients, in file order.
    public var clients: [Client] = []
    /// Test identities shown on the login page, in file order.
    public var identities: [TestIdentity] = []

    /// The levels ProConnect gives, lowest first (`-mfa`: the same level with a second factor), and
    /// its level for company officers, outside that scale.
    public static let proConnectLevels = ["eidas0", "eidas0-mfa", "eidas1", "eidas1-mfa", "eidas2", "eidas3", "https://proconnect.gouv.fr/assurance/certification-dirigeant"]

    /// Which FranceConnect the provider imitates.
    public enum Mode: String, Sendable, CaseIterable {
        /// FranceConnect v2 (eidas1): discovery, ES256/RS256 id_token, userinfo as a signed JWT.
        case v2
        /// Legacy v1: `/api/v1/...`, HS256 id_token signed with the client secret, JSON userinfo, no discovery.
        case v1
        /// FranceConnect+ (eidas2/eidas3): id_token and userinfo signed ES256, then encrypted to the client.
        case fcplus
        /// ProConnect (civil servants and professionals): its scopes and claims (usual_name, uid,
        /// siret…), a public `sub`, levels asked through `claims` (essential) or `acr_values` (a
        /// hint), `idp_hint`, unknown parameters ignored; identities from
        /// config/dev-identities-proconnect.yaml by default.
        case proconnect

        /// The test identities file used when `provider.identities_file` is not set.
        public var defaultIdentitiesFile: String {
            self == .proconnect ? "config/dev-identities-proconnect.yaml" : "config/dev-identities.yaml"
        }

        /// The scopes this provider knows and the claims each releases.
        public var scopeCatalogue: [String: [String]] {
            switch self {
            case .proconnect: ScopeCatalogue.proConnect
            case .fcplus: ScopeCatalogue.franceConnectPlus
            case .v1, .v2: ScopeCatalogue.franceConnect
            }
        }
    }

    public struct Provider: Sendable, Equatable {
        public var mode: Mode = .v2
        /// Default: the mode's (`Mode.defaultIdentitiesFile`).
        public var identitiesFile = "config/dev-identities.yaml"
        /// A private JWK or PEM to sign with; without one, a key is generated once and kept in the store.
        public var signingKeyFile: String?
        /// Salt of the pairwise `sub`; without one, generated once and kept in the store.
        public var pairwiseSalt: String?
        public var codeLifetime: Duration = .seconds(30)
        public var accessTokenLifetime: Duration = .seconds(60)
        public var idTokenLifetime: Duration = .seconds(60)
        /// How long the provider remembers a signed-in browser (FranceConnect: 30 min).
        public var sessionLifetime: Duration = .seconds(30 * 60)
        /// Serves `/_test/...` (fault injection, key rotation). Never on a provider that others rely on.
        public var testAPI = true
        public init() {}
    }

    public enum ClientAuthentication: String, Sendable, CaseIterable {
        case clientSecretPost = "client_secret_post"
        case privateKeyJWT = "private_key_jwt"
    }

    public struct Client: Sendable {
        public var id: String
        public var secret: String?
        public var redirectURIs: [String] = []
        public var postLogoutRedirectURIs: [String] = []
        public var authentication: ClientAuthentication = .clientSecretPost
        /// The client's public keys: private_key_jwt assertions, and FranceConnect+ encryption.
        public var jwks: JWKSet?
        public var jwksURI: String?
        public var idTokenAlgorithm: JWSAlgorithm = .es256
        public var encryptionAlgorithm: JWEKeyAlgorithm = .rsaOAEP256
        /// Pairwise `sub` values are stable per sector: clients sharing one get the same `sub`.
        public var sectorIdentifier: String
        /// Faults applied to every request of this client (`token:status=503`; see the test API).
        public var faults: [String] = []
        /// Put the provider session's id in id_tokens (`sid`), as generic OpenID providers that
        /// support back-channel logout do. FranceConnect does not: off by default.
        public var idTokenSessionID = false
        /// The scopes the service is entitled to (`scopes`), as FranceConnect's habilitation lists
        /// them; nil: every scope of the mode's catalogue. A known scope outside it is refused
        /// (`invalid_scope`); an unknown one is dropped.
        public var scopes: [String]?

        public init(id: String) {
            self.id = id
            sectorIdentifier = id
        }
    }

    public init() {
        server = RelaisConfiguration.Server()
        server.environment = .development
        server.port = 8081
        server.publicBaseURL = "http://127.0.0.1:8081"
        store = RelaisConfiguration.Store()
        store.kind = .embedded
    }
}

/// A person on the development provider's login page: FranceConnect's identity-pivot claims, or a
/// ProConnect agent's.
public struct TestIdentity: Sendable, Equatable {
    public var id: String
    /// Claim name → value (`given_name`, `family_name`, `birthdate`, `gender`, `birthplace`,
    /// `birthcountry`, `email`, `preferred_username`; ProConnect: `usual_name`, `uid`, `siret`,
    /// `siren`, `organizational_unit`, `belonging_population`, `phone_number`, `idp_id`, and `acr`,
    /// the level its identity provider asserts, eidas1 when absent).
    public var claims: [String: String]

    public init(id: String, claims: [String: String]) {
        self.id = id
        self.claims = claims
    }

    public static func requiredClaims(for mode: DevProviderConfiguration.Mode) -> [String] {
        mode == .proconnect ? ["given_name", "usual_name", "email", "uid", "siret", "idp_id"] : ["given_name", "family_name", "birthdate", "gender", "birthcountry"]
    }

    public static func knownClaims(for mode: DevProviderConfiguration.Mode) -> Set<String> {
        mode == .proconnect
            ? ["given_name", "usual_name", "email", "uid", "siret", "siren", "organizational_unit", "belonging_population", "phone_number", "idp_id", "acr"]
            : ["given_name", "family_name", "birthdate", "gender", "birthplace", "birthcountry", "email", "preferred_username"]
    }
}
