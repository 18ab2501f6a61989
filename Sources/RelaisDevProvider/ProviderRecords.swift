import FoundationEssentials
import RelaisCrypto

/// What the development provider keeps in the store, one Codable record per key family. Records are
/// JSON so a person can read them with `redis-cli GET`.
struct AuthorizationRequest: Codable, Sendable, Equatable {
    var clientID: String
    var redirectURI: String
    var scopes: [String]
    var state: String
    var nonce: String
    var acr: String
    var prompt: [String]
    /// `amr` asked for through the `claims` parameter.
    var wantsAMR: Bool
    /// ProConnect: the levels the service requires (`claims` with `essential`); the agent's identity
    /// provider must give one of them, or the service gets access_denied.
    var essentialACR: [String]?
    /// ProConnect: the identity provider the service named (`idp_hint`); only its agents are offered.
    var idpHint: String?
}

/// A login in progress: the validated request, waiting for the person to pick an identity.
struct Interaction: Codable, Sendable {
    var request: AuthorizationRequest
}

/// The browser's session at the provider (FranceConnect keeps one for 30 minutes).
struct BrowserSession: Codable, Sendable {
    var identityID: String
    var authTime: Int
}

/// An authorization code: single use, 30 seconds.
struct CodeGrant: Codable, Sendable {
    var request: AuthorizationRequest
    var identityID: String
    var authTime: Int
    var sessionID: String
}

/// An access token's grant: 60 seconds, userinfo only.
struct AccessGrant: Codable, Sendable {
    var clientID: String
    var identityID: String
    var scopes: [String]
    var subject: String
    var sessionID: String
}

/// An id_token the provider issued, so `/session/end` can recognise its `id_token_hint` in any
/// form (signed, HS256 or encrypted) and find the session to end.
struct IssuedIDToken: Codable, Sendable {
    var clientID: String
    var sessionID: String
}

enum StoreKeys {
    static func interaction(_ id: String) -> String { "interaction:\(id)" }
    static func session(_ id: String) -> String { "session:\(id)" }
    static func code(_ code: String) -> String { "code:\(hash(code))" }
    static func accessToken(_ token: String) -> String { "access-token:\(hash(token))" }
    static func assertion(client: String, jti: String) -> String { "assertion-jti:\(hash(client + "\u{0}" + jti))" }
    static func issuedIDToken(_ token: String) -> String { "id-token:\(hash(token))" }
    static let signingKeys = "signing-keys"
    static let pairwiseSalt = "pairwise-salt"
    static let faultIndex = "faults"
    static func fault(_ id: String) -> String { "fault:\(id)" }

    /// Tokens and codes are stored under their hash: reading the store does not yield usable credentials.
    private static func hash(_ value: String) -> String { SHA256.hexHash(value) }
}
