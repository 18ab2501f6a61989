import RelaisClock
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer

/// The registered clients' public keys: inline, or fetched from their `jwks_uri` through the
/// libcurl client and cached (refetched when an assertion names an unknown `kid`).
struct ClientKeys: Sendable {
    private let inline: [String: JWKSet]
    private let caches: [String: JWKSCache]

    init(clients: [DevProviderConfiguration.Client], httpClient: HTTPClient, clock: any RelaisClock) {
        var inline: [String: JWKSet] = [:]
        var caches: [String: JWKSCache] = [:]
        for client in clients {
            if let jwks = client.jwks { inline[client.id] = jwks }
            if let uri = client.jwksURI {
                caches[client.id] = JWKSCache(
                    url: uri, fetcher: HTTPKeySetFetcher(client: httpClient, operation: "client jwks"), maxAge: .seconds(300), minimumRefetchInterval: .seconds(5),
                    clock: { clock.instant })
            }
        }
        self.inline = inline
        self.caches = caches
    }

    /// The key that verifies a client assertion.
    func verificationKey(client: String, algorithm: JWSAlgorithm, keyID: String?) async throws -> JWK {
        if let set = inline[client] { return try set.key(for: algorithm, keyID: keyID) }
        guard let cache = caches[client] else { throw JOSEError.noMatchingKey(reason: "the client has no registered keys") }
        return try await cache.key(for: algorithm, keyID: keyID)
    }

    /// The client's encryption key for `algorithm` (FranceConnect+).
    func encryptionKey(client: String, algorithm: JWEKeyAlgorithm) async throws -> JWK {
        let set: JWKSet
        if let inlineSet = inline[client] {
            set = inlineSet
        } else if let cache = caches[client] {
            set = try await cache.currentSet()
        } else {
            throw JOSEError.noMatchingKey(reason: "the client has no registered keys")
        }
        let wanted: JWK.KeyType = algorithm == .ecdhES ? .ec : .rsa
        let candidates = set.keys.filter { $0.keyType == wanted && $0.use != "sig" && ($0.algorithm == nil || $0.algorithm == algorithm.rawValue) }
        guard let key = candidates.first else {
            throw JOSEError.noMatchingKey(reason: "no \(wanted.rawValue) encryption key for \(algorithm.rawValue) among the client's keys")
        }
        return key
    }
}
