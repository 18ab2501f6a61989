public import RelaisJOSE
import Synchronization

/// Signing keys for the development providers a test process starts. Generating an RSA-2048 key
/// costs 0.2 to 1 s of CPU, and every provider needs one (and one more per rotation): RSA keys
/// come from a few generated once per process, handed out in turn under the `kid` asked for, so
/// consecutive keys always differ. EC keys are cheap and always fresh.
public enum TestKeys {
    private static let rsaPool: [String] = (0..<3).map { _ in (try? JWK.generate(for: .rs256).privateKeyPEM()) ?? nil }.compactMap { $0 }
    private static let next = Atomic<Int>(0)

    /// One RSA key's PEM, the same for the whole process: what a test relay in development would
    /// otherwise generate for each fixture (`RelayStore.Key.rsaSigningKey`), seeded in its store.
    public static var developmentRSAPEM: [UInt8] { Array((rsaPool.first ?? "").utf8) }

    /// A ``KeyGenerator``-shaped function for `DevProviderRunner.run(generateKey:)`.
    public static func generate(_ algorithm: JWSAlgorithm, keyID: String) throws -> JWK {
        guard algorithm == .rs256, !rsaPool.isEmpty else { return try JWK.generate(for: algorithm, keyID: keyID) }
        let index = next.add(1, ordering: .relaxed).oldValue % rsaPool.count
        return try JWK(pem: rsaPool[index], keyID: keyID, use: "sig", algorithm: algorithm.rawValue)
    }
}
