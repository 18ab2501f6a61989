import Foundation

/// The tokens of one session, as kept in ``SecureStorage`` under ``StorageKeys/session``.
struct TokenRecord: Codable, Sendable, Equatable {
    var accessToken: String
    var refreshToken: String?
    var idToken: String?
    /// `DPoP` or `Bearer`.
    var tokenType: String
    var expiresAt: Date
    var acr: String?
    var sessionID: String?
    /// The thumbprint the tokens are bound to (`cnf.jkt`), nil for bearer tokens.
    var dpopThumbprint: String?
    var attested: String?

    init(answer: [String: KitJSON], previous: TokenRecord?, now: Date) throws {
        guard let access = answer.string("access_token"), let type = answer.string("token_type") else {
            throw RelaisKitError(.invalidResponse, "the token answer has no access_token or token_type")
        }
        let claims = CompactJWT.claims(access) ?? [:]
        accessToken = access
        refreshToken = answer.string("refresh_token") ?? previous?.refreshToken
        idToken = answer.string("id_token") ?? previous?.idToken
        tokenType = type
        expiresAt = now.addingTimeInterval(TimeInterval(answer.int("expires_in") ?? 300))
        acr = claims.string("acr") ?? previous?.acr
        sessionID = claims.string("sid") ?? previous?.sessionID
        dpopThumbprint = claims.object("cnf")?.string("jkt")
        attested = claims.string("attested")
    }

    var summary: SessionSummary {
        SessionSummary(acr: acr, accessTokenExpiresAt: expiresAt, dpopThumbprint: dpopThumbprint, attested: attested, sessionID: sessionID)
    }
}

/// The instance key as stored: its kind and the adapter's representation.
struct StoredKey: Codable, Sendable {
    var kind: ProofKeyKind
    var representation: Data
}

/// A Client Attestation JWT from Relais' attester, kept until shortly before it expires.
struct StoredAttestation: Codable, Sendable {
    var jwt: String
    var expiresAt: Date
    /// The instance key it names (`cnf.jwk`).
    var thumbprint: String
}

/// The names under which the client keeps its records, prefixed by the client id.
struct StorageKeys: Sendable {
    let prefix: String
    var session: String { prefix + ".session" }
    var instanceKey: String { prefix + ".instance-key" }
    var attestation: String { prefix + ".client-attestation" }
    var appAttestKeyID: String { prefix + ".app-attest-key-id" }
}

extension SecureStorage {
    func decode<T: Decodable>(_ type: T.Type, _ key: String) throws -> T? {
        guard let data = try read(key) else { return nil }
        return try? JSONDecoder().decode(type, from: data)
    }

    func encode(_ value: some Encodable, _ key: String) throws {
        try write(key, try JSONEncoder().encode(value))
    }
}
