import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// Relais' own keys: the signing keys (all published, the active one signs) and the session keys
/// (the active one seals, all open). In development without configured keys, one of each is
/// generated and kept in the store, so every instance on one Redis shares them.
struct RelayKeyRing: Sendable {
    let signingKeys: JWKSet
    let activeSigningKey: JWK
    let sessionKeys: JWKSet
    let activeSessionKey: JWK

    var activeAlgorithm: JWSAlgorithm { activeSigningKey.keyType == .rsa ? .rs256 : .es256 }

    static func load(_ settings: RelayKeySettings, store: SessionStore) async throws -> RelayKeyRing {
        var signing = settings.signingKeys
        var active = settings.activeSigningKey.flatMap { id in signing.first { $0.keyID == id } }
        if signing.isEmpty {
            let generated = try JWK.generate(for: .es256)
            let pem = Array((generated.privateKeyPEM() ?? "").utf8)
            guard let stored = try await store.sharedValue(.signingKey, proposing: pem) else { throw RelayStartupError("the generated signing key could not be stored") }
            let key = try JWK(pem: String(decoding: stored, as: UTF8.self))
            let named = try JWK(pem: String(decoding: stored, as: UTF8.self), keyID: "dev-" + key.thumbprint().prefix(12), use: "sig", algorithm: "ES256")
            signing = [named]
            active = named
        }
        var sessions = settings.sessionKeys.map { JWK(symmetric: $0.key, keyID: $0.id, algorithm: "dir") }
        var activeSession = settings.activeSessionKey.flatMap { id in sessions.first { $0.keyID == id } }
        if sessions.isEmpty {
            let proposed = Array(Base64URL.encode(SecureRandom.bytes(32)).utf8)
            guard let stored = try await store.sharedValue(.sessionKey, proposing: proposed), let bytes = Base64URL.decode(String(decoding: stored, as: UTF8.self)), bytes.count == 32 else {
                throw RelayStartupError("the generated session key could not be stored")
            }
            let key = JWK(symmetric: bytes, keyID: "dev-session", algorithm: "dir")
            sessions = [key]
            activeSession = key
        }
        guard let active, let activeSession else { throw RelayStartupError("no active signing or session key") }
        return RelayKeyRing(signingKeys: JWKSet(keys: signing), activeSigningKey: active, sessionKeys: JWKSet(keys: sessions), activeSessionKey: activeSession)
    }
}

struct RelayStartupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = "relay_startup: " + description }
}
