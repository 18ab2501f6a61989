import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import Synchronization

/// Relais' own keys at one moment: the signing keys (all published, the active one signs access
/// tokens, the RSA one RS256 id_tokens) and the session keys (the active one seals, all open).
struct RelayKeyRing: Sendable {
    var signingKeys: JWKSet
    var activeSigningKey: JWK
    /// OpenID Connect Discovery 1.0 §3: RS256 must be offered for id_tokens, whatever signs the rest.
    var rsaSigningKey: JWK
    var sessionKeys: JWKSet
    var activeSessionKey: JWK

    var activeAlgorithm: JWSAlgorithm { activeSigningKey.keyType == .rsa ? .rs256 : .es256 }

    /// The key and algorithm of an app's id_tokens: RS256 by the RSA key, or ES256 by the active
    /// key when the app asks for it (configuration refuses ES256 with an RSA active key).
    func idTokenSigner(_ algorithm: AppSettings.IDTokenAlgorithm) -> (key: JWK, algorithm: JWSAlgorithm) {
        algorithm == .es256 && activeSigningKey.keyType == .ec ? (activeSigningKey, .es256) : (rsaSigningKey, .rs256)
    }

    /// What `id_token_signing_alg_values_supported` advertises.
    var idTokenAlgorithms: [String] { activeSigningKey.keyType == .ec ? ["RS256", "ES256"] : ["RS256"] }
}

/// Relais' keys as the routes use them. Configured keys never change. In development without
/// configured keys, one of each is generated and kept in the store, so every instance on one
/// Redis shares them; and because Redis may lose them (a restart without persistence), each
/// instance checks the store again every few seconds (``RelayKeySync``) and whenever a token or a
/// sealed record names a key it lacks (``retryingOnUnknownKey(_:_:)``): it puts its key back when
/// the store lost it, and adopts the store's key when another instance wrote a new one first,
/// keeping its previous keys to check what they signed or sealed. So instances converge on one
/// key again instead of failing each other's tokens for good.
final class RelayKeys: Sendable {
    private struct State {
        var ring: RelayKeyRing
        /// The stored forms of the generated active keys (PEM, base64url); nil when configured.
        var sharedSigning: [UInt8]?
        var sharedRSA: [UInt8]?
        var sharedSession: [UInt8]?
        var lastCheck: ContinuousClock.Instant?
    }

    private let state: Mutex<State>
    /// The store of the generated keys; nil when both kinds are configured.
    private let shared: RelayStore?

    /// How often the store is read again by ``RelayKeySync``, and at most on failures.
    static let checkInterval: Duration = .seconds(5)
    static let failureCheckInterval: Duration = .seconds(1)
    /// Previous generated keys kept to verify and open what they produced.
    static let keptPrevious = 3

    /// Whether the signing or the session keys were generated (development) rather than configured.
    let signingKeysGenerated: Bool
    let sessionKeysGenerated: Bool

    var ring: RelayKeyRing { state.withLock { $0.ring } }

    init(ring: RelayKeyRing) {
        state = Mutex(State(ring: ring))
        shared = nil
        signingKeysGenerated = false
        sessionKeysGenerated = false
    }

    private init(state: State, shared: RelayStore) {
        self.state = Mutex(state)
        self.shared = shared
        signingKeysGenerated = state.sharedSigning != nil || state.sharedRSA != nil
        sessionKeysGenerated = state.sharedSession != nil
    }

    /// `generateKey` makes the keys development generates (``JWK/freshKey`` but in tests).
    static func load(_ settings: RelayKeySettings, store: RelayStore, generateKey: KeyGenerator = JWK.freshKey) async throws -> RelayKeys {
        var signing = settings.signingKeys
        var active = settings.activeSigningKey.flatMap { id in signing.first { $0.keyID == id } }
        var sharedSigning: [UInt8]?
        if signing.isEmpty {
            let proposed = Array((try generateKey(.es256, nil).privateKeyPEM() ?? "").utf8)
            guard let stored = try await store.sharedValue(.signingKey, proposing: proposed), let key = signingKey(stored, .es256) else {
                throw RelayStartupError("the generated signing key could not be stored")
            }
            signing = [key]
            active = key
            sharedSigning = stored
        }
        var rsa = settings.activeRSAKey.flatMap { id in signing.first { $0.keyID == id && $0.keyType == .rsa } }
        var sharedRSA: [UInt8]?
        if rsa == nil {
            // Development without an RSA key: one for every instance, made by the first (2048 bits).
            let stored = try await store.sharedValue(.rsaSigningKey) { Array((try generateKey(.rs256, nil).privateKeyPEM() ?? "").utf8) }
            guard let stored, let key = signingKey(stored, .rs256) else { throw RelayStartupError("the generated RSA signing key could not be stored") }
            signing.append(key)
            rsa = key
            sharedRSA = stored
        }
        var sessions = settings.sessionKeys.map { JWK(symmetric: $0.key, keyID: $0.id, algorithm: "dir") }
        var activeSession = settings.activeSessionKey.flatMap { id in sessions.first { $0.keyID == id } }
        var sharedSession: [UInt8]?
        if sessions.isEmpty {
            let proposed = Array(Base64URL.encode(SecureRandom.bytes(32)).utf8)
            guard let stored = try await store.sharedValue(.sessionKey, proposing: proposed), let key = sessionKey(stored) else {
                throw RelayStartupError("the generated session key could not be stored")
            }
            sessions = [key]
            activeSession = key
            sharedSession = stored
        }
        guard let active, let rsa, let activeSession else { throw RelayStartupError("no active signing or session key") }
        let ring = RelayKeyRing(
            signingKeys: JWKSet(keys: signing), activeSigningKey: active, rsaSigningKey: rsa, sessionKeys: JWKSet(keys: sessions), activeSessionKey: activeSession
        )
        guard sharedSigning != nil || sharedRSA != nil || sharedSession != nil else { return RelayKeys(ring: ring) }
        let state = State(ring: ring, sharedSigning: sharedSigning, sharedRSA: sharedRSA, sharedSession: sharedSession, lastCheck: store.clock.instant)
        return RelayKeys(state: state, shared: store)
    }

    enum Kind {
        case signing, session
    }

    /// For a token or a sealed record that named a key of `kind` this instance lacks: with generated
    /// keys another instance may have made it, so the store is read (at most once a second) and
    /// `attempt` runs once more. Nil with configured keys: there is nothing to learn.
    func retryingOnUnknownKey<T, E: Error>(_ kind: Kind, _ attempt: () throws(E) -> T?) async throws(E) -> T? {
        guard kind == .signing ? signingKeysGenerated : sessionKeysGenerated else { return nil }
        await synchronize(afterFailure: true)
        return try attempt()
    }

    /// Checks the generated keys against the store when the last check is older than the interval
    /// (`afterFailure`: the shorter one). Configured keys: nothing to do. A store failure keeps
    /// the keys as they are (the request fails on its own store calls).
    func synchronize(afterFailure: Bool = false) async {
        guard let shared else { return }
        let now = shared.clock.instant
        let due = state.withLock { state -> (signing: [UInt8]?, rsa: [UInt8]?, session: [UInt8]?)? in
            let interval = afterFailure ? Self.failureCheckInterval : Self.checkInterval
            if let last = state.lastCheck, now - last < interval { return nil }
            state.lastCheck = now
            return (state.sharedSigning, state.sharedRSA, state.sharedSession)
        }
        guard let due else { return }
        // The store answers with its value, or ours when it had lost it (put back at once).
        var storedSigning: [UInt8]?
        if let ours = due.signing { storedSigning = try? await shared.sharedValue(.signingKey, proposing: ours) }
        var storedRSA: [UInt8]?
        if let ours = due.rsa { storedRSA = try? await shared.sharedValue(.rsaSigningKey, proposing: ours) }
        var storedSession: [UInt8]?
        if let ours = due.session { storedSession = try? await shared.sharedValue(.sessionKey, proposing: ours) }
        state.withLock { state in
            if let stored = storedSigning, stored != state.sharedSigning, let key = Self.signingKey(stored, .es256) {
                state.ring.activeSigningKey = key
                state.ring.signingKeys = Self.adopting(key, into: state.ring.signingKeys)
                state.sharedSigning = stored
            }
            if let stored = storedRSA, stored != state.sharedRSA, let key = Self.signingKey(stored, .rs256) {
                state.ring.rsaSigningKey = key
                state.ring.signingKeys = Self.adopting(key, into: state.ring.signingKeys)
                state.sharedRSA = stored
            }
            if let stored = storedSession, stored != state.sharedSession, let key = Self.sessionKey(stored) {
                state.ring.activeSessionKey = key
                state.ring.sessionKeys = JWKSet(keys: [key] + state.ring.sessionKeys.keys.filter { $0.keyID != key.keyID }.prefix(Self.keptPrevious))
                state.sharedSession = stored
            }
        }
    }

    /// The published signing keys once `key` is active: it, the previous keys of its type (as many
    /// as ``keptPrevious``), and every key of the other type untouched. Counted per type: the
    /// ES256 keys adopted one after another must never push the RS256 key that signs id_tokens
    /// out of the JWKS (apps could no longer verify their id_tokens).
    private static func adopting(_ key: JWK, into keys: JWKSet) -> JWKSet {
        let previous = keys.keys.filter { $0.keyType == key.keyType && $0.keyID != key.keyID }.prefix(keptPrevious)
        return JWKSet(keys: [key] + previous + keys.keys.filter { $0.keyType != key.keyType })
    }

    /// A generated signing key (EC for ES256, RSA for RS256) from its stored PEM, named by its
    /// thumbprint.
    private static func signingKey(_ stored: [UInt8], _ algorithm: JWSAlgorithm) -> JWK? {
        let pem = String(decoding: stored, as: UTF8.self)
        guard let key = try? JWK(pem: pem), key.keyType == (algorithm == .rs256 ? JWK.KeyType.rsa : .ec) else { return nil }
        let prefix = algorithm == .rs256 ? "dev-rsa-" : "dev-"
        return try? JWK(pem: pem, keyID: prefix + key.thumbprint().prefix(12), use: "sig", algorithm: algorithm.rawValue)
    }

    /// A generated session key from its stored base64url form, named by a digest of it (two
    /// generated keys must never share a `kid`).
    private static func sessionKey(_ stored: [UInt8]) -> JWK? {
        guard let bytes = Base64URL.decode(String(decoding: stored, as: UTF8.self)), bytes.count == 32 else { return nil }
        return JWK(symmetric: bytes, keyID: "dev-session-" + Hex.encode(Array(SHA256.hash(bytes).prefix(6))), algorithm: "dir")
    }
}

struct RelayStartupError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = "relay_startup: " + description }
}
