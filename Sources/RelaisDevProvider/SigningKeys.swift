import FoundationEssentials
import RelaisConfig
import RelaisCrypto
import RelaisJOSE
import RelaisServer
import RelaisStore
import Synchronization

/// The provider's signing keys: one ES256 and one RS256 key per generation, the newest generation
/// signing, the previous one still published (as a provider does during a rotation). Generated keys
/// are kept in the store, so a provider backed by Redis keeps its keys across restarts.
final class SigningKeys: Sendable {
    struct Stored: Codable {
        struct Key: Codable {
            var kid: String
            var alg: String
            var pem: String
        }
        /// Newest generation first.
        var generations: [[Key]]
    }

    private struct Generation {
        var es256: JWK
        var rs256: JWK
    }

    private let state: Mutex<[Generation]>
    private let store: any KeyValueStore
    /// A configured key (`provider.signing_key_file`) is never rotated away.
    private let pinned: Bool
    private let generate: KeyGenerator

    private init(generations: [Generation], store: any KeyValueStore, pinned: Bool, generate: @escaping KeyGenerator) {
        state = Mutex(generations)
        self.store = store
        self.pinned = pinned
        self.generate = generate
    }

    /// Loads the keys from `keyFile` (one private key, both algorithms then use it if it suits them),
    /// or from the store, or generates and stores them.
    static func load(keyFile: String?, store: any KeyValueStore, generate: @escaping KeyGenerator) async throws -> SigningKeys {
        if let keyFile {
            let text: String
            switch ConfigurationLoader.readFile(keyFile) {
            case .success(let contents): text = contents
            case .failure(let problem): throw DevProviderError.startup(problem.message)
            }
            let key: JWK
            do {
                key = text.contains("-----BEGIN") ? try JWK(pem: text, use: "sig") : try JWK(json: Array(text.utf8))
            } catch {
                throw DevProviderError.startup("provider.signing_key_file: \(keyFile) holds no usable key (\(error.code))")
            }
            guard key.isPrivate, key.keyType == .rsa || (key.keyType == .ec && key.curve == .p256), let pem = key.privateKeyPEM() else {
                throw DevProviderError.startup("provider.signing_key_file must hold a private EC P-256 or RSA key")
            }
            // A PEM has no kid: name the key by its RFC 7638 thumbprint, pinned to its algorithm.
            let algorithm = key.keyType == .ec ? "ES256" : "RS256"
            let named = try JWK(pem: pem, keyID: key.keyID ?? key.thumbprint(), use: "sig", algorithm: algorithm)
            // The other algorithm gets a generated key, so every client setting keeps working.
            let generated = try makeGeneration(generate)
            let generation = key.keyType == .ec ? Generation(es256: named, rs256: generated.rs256) : Generation(es256: generated.es256, rs256: named)
            return SigningKeys(generations: [generation], store: store, pinned: true, generate: generate)
        }
        if let stored = StoredJSON.decode(Stored.self, try await store.get(StoreKeys.signingKeys)), let generations = try? decode(stored), !generations.isEmpty {
            return SigningKeys(generations: generations, store: store, pinned: false, generate: generate)
        }
        let fresh = try makeGeneration(generate)
        let record = StoredJSON.encode(encode([fresh]))
        // Two instances starting together on one Redis agree on one set: the first write wins.
        if try await store.setIfAbsent(StoreKeys.signingKeys, record, ttl: .seconds(10 * 365 * 86400)) {
            return SigningKeys(generations: [fresh], store: store, pinned: false, generate: generate)
        }
        guard let stored = StoredJSON.decode(Stored.self, try await store.get(StoreKeys.signingKeys)), let generations = try? decode(stored) else {
            throw DevProviderError.startup("the stored signing keys cannot be read")
        }
        return SigningKeys(generations: generations, store: store, pinned: false, generate: generate)
    }

    /// The key that signs with `algorithm` now.
    func current(_ algorithm: JWSAlgorithm) -> JWK {
        state.withLock { algorithm == .rs256 ? $0[0].rs256 : $0[0].es256 }
    }

    /// Every published key (public parts), newest first.
    var publicSet: JWKSet {
        JWKSet(keys: state.withLock { $0.flatMap { [$0.es256, $0.rs256] } })
    }

    /// Starts a new generation; the previous one stays published, older ones are dropped.
    /// Returns the new ES256 and RS256 `kid`s.
    func rotate() async throws -> [String] {
        guard !pinned else { throw DevProviderError.keysPinned }
        let fresh = try Self.makeGeneration(generate)
        let generations = state.withLock { generations in
            generations = [fresh] + generations.prefix(1)
            return generations
        }
        try await store.set(StoreKeys.signingKeys, StoredJSON.encode(Self.encode(generations)), ttl: .seconds(10 * 365 * 86400))
        return [fresh.es256.keyID ?? "", fresh.rs256.keyID ?? ""]
    }

    private static func makeGeneration(_ generate: KeyGenerator) throws -> Generation {
        let stamp = SecureRandom.token(bits: 48)
        return Generation(es256: try generate(.es256, "dev:ES256:\(stamp)"), rs256: try generate(.rs256, "dev:RS256:\(stamp)"))
    }

    private static func encode(_ generations: [Generation]) -> Stored {
        Stored(
            generations: generations.map { generation in
                [generation.es256, generation.rs256].map { Stored.Key(kid: $0.keyID ?? "", alg: $0.algorithm ?? "", pem: $0.privateKeyPEM() ?? "") }
            }
        )
    }

    private static func decode(_ stored: Stored) throws -> [Generation] {
        try stored.generations.map { keys in
            let parsed = try keys.map { try JWK(pem: $0.pem, keyID: $0.kid, use: "sig", algorithm: $0.alg) }
            guard let es256 = parsed.first(where: { $0.keyType == .ec }), let rs256 = parsed.first(where: { $0.keyType == .rsa }) else {
                throw DevProviderError.startup("a stored key generation lacks its EC or RSA key")
            }
            return Generation(es256: es256, rs256: rs256)
        }
    }
}
