import FoundationEssentials
import RelaisCrypto
import RelaisJOSE

/// Seals session payloads at rest: JWE `dir` + `A256GCM` under the active session key, its `kid` in
/// the header, so a key rotation keeps older sessions readable.
struct SessionVault: Sendable {
    let keys: RelayKeyRing
    /// Opened identities by the SHA-256 of their sealed form: /userinfo opens the same session's
    /// identity on every call, and unsealing costs more than the rest of the request.
    let opened = MemoryCache<[UInt8], SessionIdentity>(capacity: 10_000)

    /// The identity of a session, from memory when this sealed form was opened before.
    func openIdentity(_ sealed: String) -> SessionIdentity? {
        let key = SHA256.hash(Array(sealed.utf8))
        if let cached = opened.get(key, now: 0) { return cached }
        guard let identity = open(SessionIdentity.self, sealed) else { return nil }
        opened.put(key, identity, expiresAt: .infinity, now: 0)
        return identity
    }

    func seal<Value: Encodable>(_ value: Value) throws -> String {
        try JWE.encrypt(Array(try JSONEncoder().encode(value)), to: keys.activeSessionKey, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
    }

    func open<Value: Decodable>(_ type: Value.Type, _ sealed: String) -> Value? {
        guard let decrypted = try? JWE.parse(sealed).decrypt(with: keys.sessionKeys) else { return nil }
        return try? JSONDecoder().decode(type, from: Data(decrypted.plaintext))
    }

    func seal<Value: JSONRecord>(_ value: Value) throws -> String {
        try seal(json: value.json)
    }

    func open<Value: JSONRecord>(_ type: Value.Type, _ sealed: String) -> Value? {
        open(json: sealed)?.objectValue.flatMap(Value.init(json:))
    }

    func seal(json value: JSONValue) throws -> String {
        try JWE.encrypt(value.serialized(), to: keys.activeSessionKey, keyAlgorithm: .direct, contentAlgorithm: .a256GCM)
    }

    func open(json sealed: String) -> JSONValue? {
        guard let decrypted = try? JWE.parse(sealed).decrypt(with: keys.sessionKeys) else { return nil }
        return JSONValue.parse(decrypted.plaintext)
    }
}
