import COpenSSL

/// HMAC-SHA-256 through OpenSSL (for values Relais derives and checks itself, such as DPoP nonces,
/// derived refresh tokens, and security events' keyed hashes).
public enum HMAC {
    public static func sha256(key: [UInt8], _ data: [UInt8]) -> [UInt8] {
        // A copy of a context already bound to SHA-256: OpenSSL's one-shot EVP_Q_mac fetches the
        // MAC and the digest by name on every call, about fifty allocations and two lock rounds.
        guard let context = EVP_MAC_CTX_dup(HMACTemplate.sha256.context) else { preconditionFailure("OpenSSL EVP_MAC_CTX_dup failed") }
        defer { EVP_MAC_CTX_free(context) }
        var length = 0
        return [UInt8](uninitializedBytes: SHA256.byteCount) { output, count in
            // A key pointer is always given (an empty key too): NULL would mean "keep the previous key".
            let keyed = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1) { empty in
                key.withUnsafeBufferPointer { key in EVP_MAC_init(context, key.baseAddress ?? UnsafePointer(empty.baseAddress), key.count, nil) }
            }
            let updated = data.withUnsafeBufferPointer { input in EVP_MAC_update(context, input.baseAddress, input.count) }
            let finished = EVP_MAC_final(context, output.baseAddress, &length, SHA256.byteCount)
            precondition(keyed == 1 && updated == 1 && finished == 1 && length == SHA256.byteCount, "OpenSSL HMAC-SHA-256 failed")
            count = SHA256.byteCount
        }
    }
}

/// An HMAC context with its digest set and no key, made once per process and only ever copied
/// (``HMAC/sha256(key:_:)`` duplicates it), never used itself: reading it from several threads at
/// once is safe.
private final class HMACTemplate: @unchecked Sendable {
    static let sha256 = HMACTemplate(digest: "SHA256", size: SHA256.byteCount)
    let context: OpaquePointer

    private init(digest: String, size: Int) {
        guard let mac = EVP_MAC_fetch(nil, "HMAC", nil), let context = EVP_MAC_CTX_new(mac) else { preconditionFailure("OpenSSL has no HMAC") }
        EVP_MAC_free(mac)  // the context holds its own reference
        // OSSL_PARAM keeps pointers to its key and value: both C strings must outlive the set call.
        // (Passing the imported `OSSL_MAC_PARAM_DIGEST` String straight to the constructor made a
        // temporary that was gone by then: OpenSSL then found no "digest" parameter, accepted the
        // call, and the template had no digest; seen under glibc's checking allocator.)
        let set = OSSL_MAC_PARAM_DIGEST.withCString { key in
            digest.withCString { name in
                withUnsafeTemporaryAllocation(of: OSSL_PARAM.self, capacity: 2) { parameters in
                    parameters[0] = OSSL_PARAM_construct_utf8_string(key, UnsafeMutablePointer(mutating: name), 0)
                    parameters[1] = OSSL_PARAM_construct_end()
                    return EVP_MAC_CTX_set_params(context, parameters.baseAddress)
                }
            }
        }
        precondition(set == 1, "OpenSSL HMAC cannot use \(digest)")
        self.context = context
        // set_params succeeds when it finds no parameter it knows, and an unkeyed context reports
        // no size: a keyed copy shows whether the digest really took.
        guard let probe = EVP_MAC_CTX_dup(context) else { preconditionFailure("OpenSSL EVP_MAC_CTX_dup failed") }
        defer { EVP_MAC_CTX_free(probe) }
        let keyed = [UInt8](repeating: 0, count: 1).withUnsafeBufferPointer { EVP_MAC_init(probe, $0.baseAddress, $0.count, nil) }
        precondition(keyed == 1 && EVP_MAC_CTX_get_mac_size(probe) == size, "OpenSSL HMAC did not take \(digest)")
    }
}
