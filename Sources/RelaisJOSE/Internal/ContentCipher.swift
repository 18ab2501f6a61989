import COpenSSL
import RelaisCrypto

/// Content encryption and decryption (RFC 7518 §5) on OpenSSL EVP.
enum ContentCipher {
    static func decrypt(
        _ algorithm: JWEContentAlgorithm, key: [UInt8], iv: [UInt8], aad: [UInt8], ciphertext: [UInt8], tag: [UInt8]
    ) throws(JOSEError) -> [UInt8] {
        guard key.count == algorithm.keyLength, iv.count == algorithm.ivLength else { throw .decryptionFailed }
        switch algorithm {
        case .a128GCM, .a256GCM:
            guard tag.count == 16 else { throw .decryptionFailed }
            return try gcm(encrypt: false, name: algorithm == .a128GCM ? "AES-128-GCM" : "AES-256-GCM", key: key, iv: iv, aad: aad, input: ciphertext, tag: tag).output
        case .a128CBCHS256, .a256CBCHS512:
            let half = key.count / 2
            let expected = try cbcTag(algorithm, macKey: Array(key[..<half]), aad: aad, iv: iv, ciphertext: ciphertext)
            // The tag is checked before anything is decrypted, in constant time.
            guard ConstantTime.equals(expected, tag) else { throw .decryptionFailed }
            return try cbc(encrypt: false, name: algorithm == .a128CBCHS256 ? "AES-128-CBC" : "AES-256-CBC", key: Array(key[half...]), iv: iv, input: ciphertext)
        }
    }

    static func encrypt(
        _ algorithm: JWEContentAlgorithm, key: [UInt8], iv: [UInt8], aad: [UInt8], plaintext: [UInt8]
    ) throws(JOSEError) -> (ciphertext: [UInt8], tag: [UInt8]) {
        switch algorithm {
        case .a128GCM, .a256GCM:
            let result = try gcm(encrypt: true, name: algorithm == .a128GCM ? "AES-128-GCM" : "AES-256-GCM", key: key, iv: iv, aad: aad, input: plaintext, tag: [])
            return (result.output, result.tag)
        case .a128CBCHS256, .a256CBCHS512:
            let half = key.count / 2
            let ciphertext = try cbc(encrypt: true, name: algorithm == .a128CBCHS256 ? "AES-128-CBC" : "AES-256-CBC", key: Array(key[half...]), iv: iv, input: plaintext)
            return (ciphertext, try cbcTag(algorithm, macKey: Array(key[..<half]), aad: aad, iv: iv, ciphertext: ciphertext))
        }
    }

    /// RFC 7518 §5.2.2.1: the first half of HMAC(MAC_KEY, AAD || IV || E || AL), AL the AAD length in bits.
    private static func cbcTag(_ algorithm: JWEContentAlgorithm, macKey: [UInt8], aad: [UInt8], iv: [UInt8], ciphertext: [UInt8]) throws(JOSEError) -> [UInt8] {
        let bits = UInt64(aad.count) * 8
        let al = (0..<8).map { UInt8(truncatingIfNeeded: bits >> (56 - 8 * UInt64($0))) }
        let mac = try SignatureEngine.hmac(digestName: algorithm == .a128CBCHS256 ? "SHA256" : "SHA512", secret: macKey, data: (aad + iv + ciphertext + al)[...])
        return Array(mac.prefix(macKey.count))
    }

    private static func gcm(encrypt: Bool, name: String, key: [UInt8], iv: [UInt8], aad: [UInt8], input: [UInt8], tag: [UInt8]) throws(JOSEError) -> (output: [UInt8], tag: [UInt8])
    {
        try withCipher(name) { context, cipher throws(JOSEError) in
            let initialized = key.withUnsafeBufferPointer { k in
                iv.withUnsafeBufferPointer { v in
                    encrypt ? EVP_EncryptInit_ex2(context, cipher, k.baseAddress, v.baseAddress, nil) : EVP_DecryptInit_ex2(context, cipher, k.baseAddress, v.baseAddress, nil)
                }
            }
            guard initialized == 1 else { throw JOSEError.cryptoFailure(reason: "\(name) init failed") }
            var length: Int32 = 0
            let aadOK = aad.withUnsafeBufferPointer { a in
                encrypt ? EVP_EncryptUpdate(context, nil, &length, a.baseAddress, Int32(a.count)) : EVP_DecryptUpdate(context, nil, &length, a.baseAddress, Int32(a.count))
            }
            guard aadOK == 1 else { throw JOSEError.cryptoFailure(reason: "\(name) AAD failed") }
            var output = [UInt8](zeroedBytes: input.count + 16)
            var written: Int32 = 0
            let updated = output.withUnsafeMutableBufferPointer { out in
                input.withUnsafeBufferPointer { i in
                    encrypt
                        ? EVP_EncryptUpdate(context, out.baseAddress, &written, i.baseAddress, Int32(i.count))
                        : EVP_DecryptUpdate(context, out.baseAddress, &written, i.baseAddress, Int32(i.count))
                }
            }
            guard updated == 1 else { throw JOSEError.decryptionFailed }
            if encrypt {
                var final: Int32 = 0
                guard output.withUnsafeMutableBufferPointer({ EVP_EncryptFinal_ex(context, $0.baseAddress! + Int(written), &final) }) == 1 else {
                    throw JOSEError.cryptoFailure(reason: "\(name) final failed")
                }
                var tag = [UInt8](zeroedBytes: 16)
                guard tag.withUnsafeMutableBytes({ EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, $0.baseAddress) }) == 1 else {
                    throw JOSEError.cryptoFailure(reason: "\(name) tag failed")
                }
                return (Array(output.prefix(Int(written + final))), tag)
            }
            var expectedTag = tag
            guard expectedTag.withUnsafeMutableBytes({ EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, $0.baseAddress) }) == 1 else {
                throw JOSEError.cryptoFailure(reason: "\(name) tag failed")
            }
            var final: Int32 = 0
            // DecryptFinal checks the tag; on mismatch the plaintext written so far is discarded.
            guard output.withUnsafeMutableBufferPointer({ EVP_DecryptFinal_ex(context, $0.baseAddress! + Int(written), &final) }) == 1 else {
                throw JOSEError.decryptionFailed
            }
            return (Array(output.prefix(Int(written + final))), [])
        }
    }

    private static func cbc(encrypt: Bool, name: String, key: [UInt8], iv: [UInt8], input: [UInt8]) throws(JOSEError) -> [UInt8] {
        try withCipher(name) { context, cipher throws(JOSEError) in
            let initialized = key.withUnsafeBufferPointer { k in
                iv.withUnsafeBufferPointer { v in
                    encrypt ? EVP_EncryptInit_ex2(context, cipher, k.baseAddress, v.baseAddress, nil) : EVP_DecryptInit_ex2(context, cipher, k.baseAddress, v.baseAddress, nil)
                }
            }
            guard initialized == 1 else { throw JOSEError.cryptoFailure(reason: "\(name) init failed") }
            return try updateAndFinish(context, encrypt: encrypt, input: input)
        }
    }

    /// One Update and one Final over the whole input (CBC with padding, key wrap).
    private static func updateAndFinish(_ context: OpaquePointer, encrypt: Bool, input: [UInt8]) throws(JOSEError) -> [UInt8] {
        var output = [UInt8](zeroedBytes: input.count + 32)
        var written: Int32 = 0
        var final: Int32 = 0
        let ok = output.withUnsafeMutableBufferPointer { out in
            input.withUnsafeBufferPointer { i in
                if encrypt {
                    return EVP_EncryptUpdate(context, out.baseAddress, &written, i.baseAddress, Int32(i.count)) == 1
                        && EVP_EncryptFinal_ex(context, out.baseAddress! + Int(written), &final) == 1
                }
                return EVP_DecryptUpdate(context, out.baseAddress, &written, i.baseAddress, Int32(i.count)) == 1
                    && EVP_DecryptFinal_ex(context, out.baseAddress! + Int(written), &final) == 1
            }
        }
        guard ok else { throw JOSEError.decryptionFailed }
        return Array(output.prefix(Int(written + final)))
    }

    /// AES key wrap (RFC 3394) for A128KW/A256KW and the ECDH-ES+AxxxKW variants.
    static func keyWrap(encrypt: Bool, kek: [UInt8], input: [UInt8]) throws(JOSEError) -> [UInt8] {
        try withCipher(kek.count == 16 ? "AES-128-WRAP" : "AES-256-WRAP") { context, cipher throws(JOSEError) in
            EVP_CIPHER_CTX_set_flags(context, Int32(EVP_CIPHER_CTX_FLAG_WRAP_ALLOW))
            let initialized = kek.withUnsafeBufferPointer { k in
                encrypt ? EVP_EncryptInit_ex2(context, cipher, k.baseAddress, nil, nil) : EVP_DecryptInit_ex2(context, cipher, k.baseAddress, nil, nil)
            }
            guard initialized == 1, input.count >= 16 || encrypt, input.count % 8 == 0 else { throw JOSEError.decryptionFailed }
            return try updateAndFinish(context, encrypt: encrypt, input: input)
        }
    }

    private static func withCipher<Result>(_ name: String, _ body: (OpaquePointer, OpaquePointer) throws(JOSEError) -> Result) throws(JOSEError) -> Result {
        guard let cipher = EVP_CIPHER_fetch(nil, name, nil) else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "cipher \(name) unavailable")
        }
        defer { EVP_CIPHER_free(cipher) }
        guard let context = EVP_CIPHER_CTX_new() else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "EVP_CIPHER_CTX_new failed")
        }
        defer { EVP_CIPHER_CTX_free(context) }
        do {
            let result = try body(context, cipher)
            return result
        } catch {
            OpenSSLErrors.clear()
            throw error
        }
    }
}
