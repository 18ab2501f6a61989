#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Scans over the bytes of tokens, JSON and forms, shared by the parsers and encoders on the
/// sign-in path: `memchr` and a reduction LLVM vectorises read many bytes per instruction, where
/// a branch per byte costs four or five instructions a byte over tokens of kilobytes.
public enum ByteScan {
    /// The index of the first `byte` in `bytes`.
    public static func firstIndex(of byte: UInt8, in bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let base = bytes.baseAddress, let found = memchr(base, Int32(byte), bytes.count) else { return nil }
        return UnsafeRawPointer(found) - UnsafeRawPointer(base)
    }

    /// How many times `byte` occurs in `bytes`.
    public static func count(of byte: UInt8, in bytes: UnsafeBufferPointer<UInt8>) -> Int {
        var count = 0
        var rest = bytes
        while let index = firstIndex(of: byte, in: rest) {
            count += 1
            rest = UnsafeBufferPointer(rebasing: rest[(index + 1)...])
        }
        return count
    }

    /// The lowest and the highest byte of `bytes`: (0xFF, 0) when there is none. The lowest says
    /// whether a control character is there, the highest whether all of it is ASCII.
    public static func extremes(of bytes: UnsafeBufferPointer<UInt8>) -> (lowest: UInt8, highest: UInt8) {
        var lowest: UInt8 = 0xFF
        var highest: UInt8 = 0
        for byte in bytes {
            lowest = min(lowest, byte)
            highest = max(highest, byte)
        }
        return (lowest, highest)
    }

    /// RFC 3986's unreserved characters (§2.3): letters, digits, `-`, `.`, `_` and `~`.
    @inlinable
    public static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}
