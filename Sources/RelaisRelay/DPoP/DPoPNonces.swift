import RelaisClock
import RelaisCrypto
import RelaisJOSE
import Synchronization

/// Server-provided DPoP nonces (RFC 9449 §8), for apps with `dpop_nonce: true`: a proof must then
/// carry a nonce the server issued recently, so a proof made in advance (on a stolen device
/// unlocked once) is refused. Stateless: a nonce is the HMAC of the current time window under a
/// key derived from Relais' active signing key, so every instance issues and accepts the same ones
/// without the store. The current and the previous window's nonces are accepted.
final class DPoPNonces: Sendable {
    static let period: Int = 60

    private let keys: RelayKeys
    private let clock: any RelaisClock
    /// The derived key, for the signing key it was derived from.
    private let derived = Mutex<(keyID: String?, key: [UInt8])?>(nil)

    init(keys: RelayKeys, clock: any RelaisClock) {
        self.keys = keys
        self.clock = clock
    }

    var current: String { nonce(window: clock.seconds / Self.period) }

    /// The nonces a proof may carry now.
    var accepted: [String] {
        let window = clock.seconds / Self.period
        return [nonce(window: window), nonce(window: window - 1)]
    }

    private func nonce(window: Int) -> String {
        Base64URL.encode(HMAC.sha256(key: key(), Array("dpop-nonce:\(window)".utf8)).prefix(24))
    }

    private func key() -> [UInt8] {
        let signing = keys.ring.activeSigningKey
        if let cached = derived.withLock({ $0 }), cached.keyID == signing.keyID { return cached.key }
        let key = SHA256.hash(Array(("relais dpop nonces\u{0}" + (signing.privateKeyPEM() ?? signing.thumbprint())).utf8))
        derived.withLock { $0 = (signing.keyID, key) }
        return key
    }
}
