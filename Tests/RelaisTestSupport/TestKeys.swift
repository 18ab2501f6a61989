public import RelaisJOSE
import Synchronization

/// Keys for the servers a test process starts and for the tests themselves. Generating an RSA-2048
/// key costs 0.2 to 1 s of CPU on the cooperative thread that asks, and a full run starts hundreds
/// of relays and providers: generated anew, their keys held both threads of a 2-core machine for a
/// minute and made the store suites' short timeouts expire. RSA keys come from a few generated
/// once per process; EC keys are cheap and always fresh.
public enum TestKeys {
    private static let rsaPool: [String] = (0..<3).map { _ in (try? JWK.generate(for: .rs256).privateKeyPEM()) ?? nil }.compactMap { $0 }

    /// One RSA key's PEM, the same for the whole process: what a test relay in development would
    /// otherwise generate for each fixture (`RelayStore.Key.rsaSigningKey`), seeded in its store.
    public static var developmentRSAPEM: [UInt8] { Array((rsaPool.first ?? "").utf8) }

    /// A ``KeyGenerator`` for one server a test starts (`generateKey:`): its RS256 keys come from
    /// the pool in turn, so each key it makes differs from its previous one (a rotation).
    public static func generator() -> KeyGenerator {
        let next = Counter()
        return { algorithm, keyID in
            guard algorithm == .rs256 else { return try JWK.generate(for: algorithm, keyID: keyID) }
            return try rsa(next.value.add(1, ordering: .relaxed).oldValue, keyID: keyID)
        }
    }

    /// RSA-2048 key number `slot` of the pool (keys of two slots below 3 differ), named as asked:
    /// what `JWK.generate(for: .rs256, keyID:use:pinAlgorithm:)` makes, for a test that needs an RSA
    /// key but does not test its generation.
    public static func rsa(_ slot: Int = 0, keyID: String? = nil, use: String? = "sig", pinAlgorithm: Bool = true) throws -> JWK {
        guard !rsaPool.isEmpty else { return try JWK.generate(for: .rs256, keyID: keyID, use: use, pinAlgorithm: pinAlgorithm) }
        return try JWK(pem: rsaPool[slot % rsaPool.count], keyID: keyID, use: use, algorithm: pinAlgorithm ? JWSAlgorithm.rs256.rawValue : nil)
    }

    /// A fresh key, generated on a thread of its own: for the tests of generation itself, whose
    /// RSA keys (up to 4096 bits, seconds of CPU here) would otherwise hold a concurrency thread.
    public static func generatedOffThePool(for algorithm: JWSAlgorithm, keyID: String? = nil) async throws -> JWK {
        try await RawConnection.blocking { Result { try JWK.generate(for: algorithm, keyID: keyID) } }.get()
    }

    private final class Counter: Sendable {
        let value = Atomic<Int>(0)
    }
}
