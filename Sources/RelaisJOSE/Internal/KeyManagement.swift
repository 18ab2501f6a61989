import COpenSSL
import RelaisCrypto

/// Key management (RFC 7518 §4): recovering or producing the content-encryption key (CEK).
enum KeyManagement {
    // MARK: RSA-OAEP

    static func rsaOAEP(decrypt: Bool, _ algorithm: JWEKeyAlgorithm, key: OpenSSLKey, input: [UInt8]) throws(JOSEError) -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, key.pointer, nil) else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "EVP_PKEY_CTX_new failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        let digest = algorithm == .rsaOAEP256 ? "SHA256" : "SHA1"
        guard (decrypt ? EVP_PKEY_decrypt_init(context) : EVP_PKEY_encrypt_init(context)) == 1,
            EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_OAEP_PADDING) == 1,
            EVP_PKEY_CTX_set_rsa_oaep_md_name(context, digest, nil) == 1,
            EVP_PKEY_CTX_set_rsa_mgf1_md_name(context, digest, nil) == 1
        else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "cannot configure \(algorithm.rawValue)")
        }
        var length = 0
        let sized = input.withUnsafeBufferPointer { i in
            decrypt ? EVP_PKEY_decrypt(context, nil, &length, i.baseAddress, i.count) : EVP_PKEY_encrypt(context, nil, &length, i.baseAddress, i.count)
        }
        guard sized == 1 else {
            OpenSSLErrors.clear()
            throw .decryptionFailed
        }
        var output = [UInt8](zeroedBytes: length)
        let done = output.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer { i in
                decrypt ? EVP_PKEY_decrypt(context, out.baseAddress, &length, i.baseAddress, i.count) : EVP_PKEY_encrypt(context, out.baseAddress, &length, i.baseAddress, i.count)
            }
        }
        guard done == 1 else {
            OpenSSLErrors.clear()
            throw .decryptionFailed
        }
        return Array(output.prefix(length))
    }

    // MARK: ECDH-ES

    /// The shared secret Z between our private key and the peer's public key.
    static func ecdhSharedSecret(privateKey: OpenSSLKey, peer: OpenSSLKey) throws(JOSEError) -> [UInt8] {
        guard let context = EVP_PKEY_CTX_new_from_pkey(nil, privateKey.pointer, nil) else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "EVP_PKEY_CTX_new failed")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer.pointer) == 1,
            EVP_PKEY_derive(context, nil, &length) == 1
        else {
            OpenSSLErrors.clear()
            throw .decryptionFailed
        }
        var secret = [UInt8](zeroedBytes: length)
        guard secret.withUnsafeMutableBufferPointer({ EVP_PKEY_derive(context, $0.baseAddress, &length) }) == 1 else {
            OpenSSLErrors.clear()
            throw .decryptionFailed
        }
        return Array(secret.prefix(length))
    }

    /// Concat KDF (NIST SP 800-56A §5.8.1) with SHA-256, as RFC 7518 §4.6.2 specifies.
    static func concatKDF(sharedSecret: [UInt8], algorithmID: String, partyU: [UInt8], partyV: [UInt8], keyLength: Int) -> [UInt8] {
        func lengthPrefixed(_ data: [UInt8]) -> [UInt8] { bigEndian32(data.count) + data }
        let otherInfo = lengthPrefixed(Array(algorithmID.utf8)) + lengthPrefixed(partyU) + lengthPrefixed(partyV) + bigEndian32(keyLength * 8)
        var derived: [UInt8] = []
        var counter = 1
        while derived.count < keyLength {
            derived += SHA256.hash(bigEndian32(counter) + sharedSecret + otherInfo)
            counter += 1
        }
        return Array(derived.prefix(keyLength))
    }

    private static func bigEndian32(_ value: Int) -> [UInt8] {
        [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16), UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }
}
