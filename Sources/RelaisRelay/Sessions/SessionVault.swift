import FoundationEssentials
import Logging
import RelaisConfig
import RelaisCrypto
import RelaisJOSE

/// Seals session payloads at rest: JWE `dir` + `A256GCM` under the active session key, its `kid` in
/// the header, so a key rotation keeps older sessions readable.
struct SessionVault: Sendable {
    let keys: RelayKeys
    /// Opened identities by the SHA-256 of their sealed form: /userinfo opens the same session's
    /// identity on every call, and unsealing costs more than the rest of the request.
    /// Bounded in bytes (`memory.identities`).
    let opened: MemoryCache<DigestKey, SessionIdentity>

    init(keys: RelayKeys, cacheBytes: Int = MemorySettings().identities) {
        self.keys = keys
        opened = MemoryCache(maxBytes: cacheBytes)
    }

    /// The identity of a session, from memory when this sealed form was opened before.
    func openIdentity(_ sealed: String) -> SessionIdentity? {
        let key = DigestKey(hashing: sealed)
        if let cached = opened.get(key, now: 0) { return cached }
        guard let identity = open(SessionIdentity.self, sealed) else { return nil }
        // Decoded claims take about twice their sealed (encrypted, base64url) form.
        opened.put(key, identity, bytes: 2 * sealed.utf8.count + 256, expiresAt: .infinity, now: 0)
        return identity
    }

    /// A sealed identity opened for a grant: when no key of this instance opens it, the keys are
    /// checked against the store once (generated keys may have changed, see ``RelayKeys``). Still
    /// unopenable: with generated keys a 503 (they are converging), with configured keys
    /// `invalid_grant` (the key was removed: the app must sign the user in again).
    func openForGrant(_ sealed: String, what: String, logger: Logger) async throws -> SessionIdentity {
        if let identity = open(SessionIdentity.self, sealed) { return identity }
        if let identity = await keys.retryingOnUnknownKey(.session, { open(SessionIdentity.self, sealed) }) { return identity }
        logger.error("\(what) was sealed with a session key this instance does not have", metadata: ["generated_keys": "\(keys.sessionKeysGenerated)"])
        if keys.sessionKeysGenerated { throw RelayError(.temporarilyUnavailable, "the development session keys are being synchronised; try again shortly") }
        throw RelayError.invalidGrant("\(what) was sealed with a session key that is no longer configured; sign in again")
    }

    /// ``openIdentity(_:)``, with one check of the keys against the store when it fails.
    func openIdentityAfterSync(_ sealed: String) async -> SessionIdentity? {
        if let identity = openIdentity(sealed) { return identity }
        return await keys.retryingOnUnknownKey(.session) { openIdentity(sealed) }
    }

    func seal(_ identity: SessionIdentity) throws -> String {
        try seal(bytes: identity.plaintext)
    }

    func open(_ type: SessionIdentity.Type, _ sealed: String) -> SessionIdentity? {
        open(bytes: sealed).flatMap(SessionIdentity.init(plaintext:))
    }

    /// Any payload, sealed as identities are (an authorization code's sign-in, ``SealedCode``).
    func seal(bytes plaintext: [UInt8]) throws -> String {
        try JWE.encrypt(plaintext, to: keys.ring.activeSessionKey, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
    }

    /// The plaintext, when one of this instance's session keys opens `sealed` (authenticated).
    func open(bytes sealed: String) -> [UInt8]? {
        try? JWE.parse(sealed).decrypt(with: keys.ring.sessionKeys).plaintext
    }
}
