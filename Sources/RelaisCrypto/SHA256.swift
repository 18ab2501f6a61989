import COpenSSL

/// SHA-256 through OpenSSL's one-shot EVP digest. Used to store token hashes instead of tokens.
public enum SHA256 {
    public static let byteCount = 32

    public static func hash<Bytes: Collection<UInt8>>(_ data: Bytes) -> [UInt8] {
        // Arrays and native strings' UTF-8 are contiguous already: hashed in place, not copied.
        if let digest = data.withContiguousStorageIfAvailable({ digest(of: UnsafeRawBufferPointer($0)) }) { return digest }
        return Array(data).withUnsafeBytes { digest(of: $0) }
    }

    public static func hash(_ string: some StringProtocol) -> [UInt8] {
        hash(string.utf8)
    }

    private static func digest(of input: UnsafeRawBufferPointer) -> [UInt8] {
        var length: UInt32 = 0
        let digest = [UInt8](uninitializedBytes: byteCount) { output, count in
            let status = EVP_Digest(input.baseAddress, input.count, output.baseAddress!, &length, FetchedDigests.shared.sha256, nil)
            precondition(status == 1 && length == UInt32(byteCount), "OpenSSL EVP_Digest(SHA-256) failed")
            count = byteCount
        }
        return digest
    }

    /// Lowercase hex of the SHA-256 of `string`: the form used in store keys.
    public static func hexHash(_ string: String) -> String {
        Hex.encode(hash(string))
    }
}

/// Message digests fetched from the default provider at first use and kept for the process: with
/// OpenSSL 3, passing `EVP_sha256()` makes every EVP_Digest or DigestVerifyInit fetch the
/// implementation again by name. Fetched EVP_MD objects are immutable and safe to share between
/// threads. Used here and by RelaisJOSE's signatures.
package final class FetchedDigests: @unchecked Sendable {
    package static let shared = FetchedDigests()
    package let sha256: OpaquePointer?
    package let sha384: OpaquePointer?
    package let sha512: OpaquePointer?

    private init() {
        sha256 = EVP_MD_fetch(nil, "SHA256", nil)
        sha384 = EVP_MD_fetch(nil, "SHA384", nil)
        sha512 = EVP_MD_fetch(nil, "SHA512", nil)
        // A digest OpenSSL cannot provide leaves its reason queued on this thread; its users fail
        // on the nil (and leave the queue empty in turn).
        if sha256 == nil || sha384 == nil || sha512 == nil { ERR_clear_error() }
    }
}
