import COpenSSL

/// Comparisons whose duration does not depend on where two secrets differ.
public enum ConstantTime {
    /// True when both byte sequences are equal. Lengths are not secret (a length mismatch returns
    /// at once); the content comparison is CRYPTO_memcmp, which reads every byte.
    public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard !lhs.isEmpty else { return true }
        return lhs.withUnsafeBytes { left in
            rhs.withUnsafeBytes { right in
                CRYPTO_memcmp(left.baseAddress, right.baseAddress, left.count) == 0
            }
        }
    }

    public static func equals(_ lhs: String, _ rhs: String) -> Bool {
        equals(Array(lhs.utf8), Array(rhs.utf8))
    }
}
