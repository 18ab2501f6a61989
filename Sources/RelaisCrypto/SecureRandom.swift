#if canImport(Glibc)
import CLibc
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Cryptographically secure random bytes from the kernel's generator.
///
/// Every identifier an attacker must not guess (transaction keys, codes, session ids) comes from here.
/// Linux's `getrandom(2)` blocks only until the kernel's pool is first seeded at boot, never after;
/// OpenSSL's `RAND_bytes` draws from a generator seeded the same way but takes locks and a `getpid`
/// system call on every call, three times the cost (a sign-in draws six times).
public enum SecureRandom {
    /// Returns `count` random bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        precondition(count >= 0, "negative byte count")
        return [UInt8](uninitializedBytes: count) { buffer, initialized in
            fill(buffer)
            initialized = count
        }
    }

    /// A URL-safe random token (base64url, no padding) carrying `bits` bits of entropy.
    public static func token(bits: Int = 256) -> String {
        Base64URL.encode(bytes((bits + 7) / 8))
    }

    /// Fills `buffer`. A failure other than an interrupted call would hand out predictable
    /// secrets: that is a crash, not an error.
    static func fill(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        guard let base = buffer.baseAddress else { return }
        #if canImport(Glibc)
        var filled = 0
        while filled < buffer.count {
            // Up to 256 bytes come whole; a longer request may be cut short by a signal.
            let got = getrandom(base + filled, buffer.count - filled, 0)
            if got < 0 {
                precondition(errno == EINTR, "getrandom failed (errno \(errno)): no secure random bytes")
                continue
            }
            filled += got
        }
        #else
        arc4random_buf(base, buffer.count)
        #endif
    }
}
