import COpenSSL

/// Comparisons whose duration does not depend on where two secrets differ.
public enum ConstantTime {
    /// True when both byte sequences are equal. Lengths are not secret (a length mismatch returns
    /// at once); the content comparison is CRYPTO_memcmp, which reads every byte.
    public static func equals(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
        guard lhs.count == rhs.count else { return false }
        guard let left = lhs.baseAddress, let right = rhs.baseAddress, lhs.count > 0 else { return true }
        return CRYPTO_memcmp(left, right, lhs.count) == 0
    }

    public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.withUnsafeBytes { left in rhs.withUnsafeBytes { right in equals(left, right) } }
    }

    public static func equals(_ lhs: String, _ rhs: String) -> Bool {
        var lhs = lhs, rhs = rhs
        return lhs.withUTF8 { left in rhs.withUTF8 { right in equals(UnsafeRawBufferPointer(left), UnsafeRawBufferPointer(right)) } }
    }
}
