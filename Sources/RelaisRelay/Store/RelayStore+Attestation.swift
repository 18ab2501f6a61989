import RelaisJOSE
import RelaisStore

/// What attestation keeps in the store: one-time challenges, App Attest keys with their counters,
/// and the `jti` of each attestation PoP (a proof is good once, on every instance).
extension RelayStore {
    /// A challenge lives five minutes and serves once, for the app it was issued to.
    static let challengeLifetime: Duration = .seconds(300)
    /// An App Attest key is attested once per install; it is kept while the app keeps using it.
    static let appAttestKeyLifetime: Duration = .seconds(400 * 86400)

    func saveChallenge(_ challenge: String, clientID: String) async throws {
        try await store.set(Key.attestationChallenge(challenge), Array(clientID.utf8), ttl: Self.challengeLifetime)
    }

    /// Consumes the challenge: true when it was issued to `clientID` and not used yet.
    func takeChallenge(_ challenge: String, clientID: String) async throws -> Bool {
        guard let owner = try await store.getAndDelete(Key.attestationChallenge(challenge)) else { return false }
        return owner == Array(clientID.utf8)
    }

    func appAttestKey(clientID: String, keyID: String) async throws -> AppAttestKeyRecord? {
        StoredJSON.decode(AppAttestKeyRecord.self, try await store.get(Key.appAttestKey(clientID: clientID, keyID: keyID)))
    }

    /// A newly attested key, with the marker of its counter (0), in one step.
    func saveAppAttestKey(_ record: AppAttestKeyRecord, clientID: String, keyID: String) async throws {
        try await store.apply([
            .set(Key.appAttestKey(clientID: clientID, keyID: keyID), StoredJSON.encode(record), ttl: Self.appAttestKeyLifetime),
            .set(Key.appAttestCounter(clientID: clientID, keyID: keyID, counter: record.counter), [1], ttl: Self.appAttestKeyLifetime),
        ])
    }

    /// Moves the counter from `previous` to `record.counter` only if `previous` is still the
    /// stored counter (its marker is taken): of two assertions checked against the same counter,
    /// one moves it and the other is refused.
    func advanceAppAttestCounter(from previous: UInt32, to record: AppAttestKeyRecord, clientID: String, keyID: String) async throws -> Bool {
        try await store.take(
            Key.appAttestCounter(clientID: clientID, keyID: keyID, counter: previous),
            applying: [
                .set(Key.appAttestKey(clientID: clientID, keyID: keyID), StoredJSON.encode(record), ttl: Self.appAttestKeyLifetime),
                .set(Key.appAttestCounter(clientID: clientID, keyID: keyID, counter: record.counter), [1], ttl: Self.appAttestKeyLifetime),
            ]
        ) != nil
    }

    /// Remembers an attestation PoP's `jti` for as long as the PoP is acceptable; false when seen.
    func rememberAttestationProof(thumbprint: String, tokenID: String, for window: Duration) async throws -> Bool {
        try await store.setIfAbsent(Key.attestationProof(thumbprint: thumbprint, tokenID: tokenID), [1], ttl: window)
    }
}

/// An attested App Attest key: its public key (uncompressed P-256 point, base64url) and the last
/// counter seen.
struct AppAttestKeyRecord: Codable, Sendable, Equatable {
    var publicKey: String
    var counter: UInt32
}
