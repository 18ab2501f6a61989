import COpenSSL

/// Cryptographically secure random bytes from OpenSSL's DRBG.
///
/// Every identifier an attacker must not guess (transaction keys, codes, session ids) comes from here.
public enum SecureRandom {
    /// Returns `count` random bytes. OpenSSL's RAND_bytes only fails when its DRBG cannot be seeded,
    /// in which case continuing would hand out predictable secrets: that is a crash, not an error.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "negative byte count")
        var buffer = [UInt8](repeating: 0, count: count)
        guard count > 0 else { return buffer }
        let status = buffer.withUnsafeMutableBytes { raw in
            RAND_bytes(raw.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(count))
        }
        precondition(status == 1, "OpenSSL RAND_bytes failed: the random generator is not seeded")
        return buffer
    }

    /// A URL-safe random token (base64url, no padding) carrying `bits` bits of entropy.
    public static func token(bits: Int = 256) -> String {
        Base64URL.encode(bytes((bits + 7) / 8))
    }
}
