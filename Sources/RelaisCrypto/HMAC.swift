import COpenSSL

/// HMAC-SHA-256 through OpenSSL (for values Relais derives and checks itself, such as DPoP nonces).
public enum HMAC {
    public static func sha256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: SHA256.byteCount)
        var length = 0
        let status = key.withUnsafeBufferPointer { key in
            data.withUnsafeBufferPointer { input in
                output.withUnsafeMutableBufferPointer { out in
                    EVP_Q_mac(nil, "HMAC", nil, "SHA256", nil, key.baseAddress, key.count, input.baseAddress, input.count, out.baseAddress, out.count, &length)
                }
            }
        }
        precondition(status != nil && length == SHA256.byteCount, "OpenSSL HMAC-SHA-256 failed")
        return output
    }
}
