import COpenSSL

/// SHA-256 through OpenSSL's one-shot EVP digest. Used to store token hashes instead of tokens.
public enum SHA256 {
    public static let byteCount = 32

    public static func hash<Bytes: Collection<UInt8>>(_ data: Bytes) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: byteCount)
        var length: UInt32 = 0
        let status: Int32 = Array(data).withUnsafeBytes { input in
            digest.withUnsafeMutableBytes { output in
                EVP_Digest(
                    input.baseAddress, input.count,
                    output.baseAddress!.assumingMemoryBound(to: UInt8.self), &length,
                    EVP_sha256(), nil
                )
            }
        }
        precondition(status == 1 && length == UInt32(byteCount), "OpenSSL EVP_Digest(SHA-256) failed")
        return digest
    }

    public static func hash(_ string: String) -> [UInt8] {
        hash(Array(string.utf8))
    }

    /// Lowercase hex of the SHA-256 of `string`: the form used in store keys.
    public static func hexHash(_ string: String) -> String {
        Hex.encode(hash(string))
    }
}
