import COpenSSL
import RelaisCrypto

/// The signature primitives, on OpenSSL EVP only. Callers have already checked that the key suits
/// the algorithm (``JWK/check(for:)``).
enum SignatureEngine {
    static func verify(_ algorithm: JWSAlgorithm, key: JWK, input: ArraySlice<UInt8>, signature: [UInt8]) throws(JOSEError) -> Bool {
        switch key.material {
        case .symmetric(let secret):
            let expected = try hmac(algorithm, secret: secret, data: input)
            return ConstantTime.equals(expected, signature)
        case .asymmetric(let openSSLKey):
            var der = signature
            switch algorithm.family {
            case .ecdsa(let curve):
                // JOSE carries r||s, each left-padded to the curve size; OpenSSL wants DER.
                guard signature.count == 2 * curve.coordinateSize else { return false }
                der = try ecdsaRawToDER(signature, coordinateSize: curve.coordinateSize)
            case .rsaPKCS1, .rsaPSS:
                // RFC 8017 §8.1.2 and §8.2.2: exactly the modulus' length. OpenSSL's PSS path takes a
                // shorter one, so that a signature with a leading zero byte would verify without it.
                guard signature.count == openSSLKey.size else { return false }
            default:
                break
            }
            if algorithm.family != .edDSA {
                // Hash once with the fetched digest, then verify the digest with a pooled context.
                let digest = try digest(algorithm, input)
                let verified = openSSLKey.withVerifyContext(for: algorithm) { context in
                    der.withUnsafeBufferPointer { sig in
                        digest.withUnsafeBufferPointer { d in EVP_PKEY_verify(context, sig.baseAddress, sig.count, d.baseAddress, d.count) }
                    } == 1
                }
                if let verified {
                    if !verified { OpenSSLErrors.clear() }
                    return verified
                }
            }
            return try withDigestContext(algorithm, key: openSSLKey, signing: false) { context in
                let result = der.withUnsafeBufferPointer { sig in
                    input.withUnsafeBufferPointer { data in
                        EVP_DigestVerify(context, sig.baseAddress, sig.count, data.baseAddress, data.count)
                    }
                }
                OpenSSLErrors.clear()
                return result == 1
            }
        }
    }

    static func sign(_ algorithm: JWSAlgorithm, key: JWK, input: [UInt8]) throws(JOSEError) -> [UInt8] {
        switch key.material {
        case .symmetric(let secret):
            return try hmac(algorithm, secret: secret, data: input[...])
        case .asymmetric(let openSSLKey):
            var pooled: [UInt8]?
            if algorithm.family != .edDSA {
                // As verification: the digest signed with a pooled context, not a new one per token.
                let digest = try digest(algorithm, input[...])
                pooled =
                    openSSLKey.withSignContext(for: algorithm) { context -> [UInt8]? in
                        digest.withUnsafeBufferPointer { d -> [UInt8]? in
                            var length = 0
                            guard EVP_PKEY_sign(context, nil, &length, d.baseAddress, d.count) == 1 else { return nil }
                            var output = [UInt8](zeroedBytes: length)
                            guard output.withUnsafeMutableBufferPointer({ EVP_PKEY_sign(context, $0.baseAddress, &length, d.baseAddress, d.count) }) == 1 else { return nil }
                            return Array(output.prefix(length))
                        }
                    } ?? nil
                if pooled == nil { OpenSSLErrors.clear() }
            }
            let signature: [UInt8]
            if let pooled { signature = pooled } else { signature = try oneOffSignature(algorithm, key: openSSLKey, input: input) }
            if case .ecdsa(let curve) = algorithm.family {
                return try ecdsaDERToRaw(signature, coordinateSize: curve.coordinateSize)
            }
            return signature
        }
    }

    /// EdDSA (which signs the message, not a digest), or a key no pooled context could be set up for.
    private static func oneOffSignature(_ algorithm: JWSAlgorithm, key openSSLKey: OpenSSLKey, input: [UInt8]) throws(JOSEError) -> [UInt8] {
        try withDigestContext(algorithm, key: openSSLKey, signing: true) { context throws(JOSEError) in
            var length = 0
            guard input.withUnsafeBufferPointer({ EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
                throw JOSEError.cryptoFailure(reason: "EVP_DigestSign (size) failed")  // the queue is cleared by withDigestContext
            }
            var output = [UInt8](zeroedBytes: length)
            let status = output.withUnsafeMutableBufferPointer { out in
                input.withUnsafeBufferPointer { data in EVP_DigestSign(context, out.baseAddress, &length, data.baseAddress, data.count) }
            }
            guard status == 1 else { throw JOSEError.cryptoFailure(reason: "EVP_DigestSign failed") }
            return Array(output.prefix(length))
        }
    }

    static func hmac(_ algorithm: JWSAlgorithm, secret: [UInt8], data: ArraySlice<UInt8>) throws(JOSEError) -> [UInt8] {
        try hmac(digestName: algorithm.digestName, secret: secret, data: data)
    }

    /// The signing input's digest, with the algorithm's fetched digest.
    private static func digest(_ algorithm: JWSAlgorithm, _ input: ArraySlice<UInt8>) throws(JOSEError) -> [UInt8] {
        try digest(algorithm.digest, input)
    }

    /// `input`'s digest with a fetched digest (SHA-256, SHA-384 or SHA-512).
    static func digest(_ md: OpaquePointer?, _ input: ArraySlice<UInt8>) throws(JOSEError) -> [UInt8] {
        var digest = [UInt8](zeroedBytes: 64)
        var length: UInt32 = 0
        let hashed = input.withUnsafeBufferPointer { data in
            digest.withUnsafeMutableBufferPointer { out in EVP_Digest(data.baseAddress, data.count, out.baseAddress, &length, md, nil) }
        }
        guard hashed == 1 else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "EVP_Digest failed")
        }
        digest.removeSubrange(Int(length)...)  // in place: no second buffer per signature
        return digest
    }

    static func hmac(digestName: String, secret: [UInt8], data: ArraySlice<UInt8>) throws(JOSEError) -> [UInt8] {
        var output = [UInt8](zeroedBytes: 64)
        var length = 0
        let result = secret.withUnsafeBufferPointer { key in
            data.withUnsafeBufferPointer { input in
                output.withUnsafeMutableBufferPointer { out in
                    EVP_Q_mac(nil, "HMAC", nil, digestName, nil, key.baseAddress, key.count, input.baseAddress, input.count, out.baseAddress, out.count, &length)
                }
            }
        }
        guard result != nil else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "HMAC failed")
        }
        return Array(output.prefix(length))
    }

    private static func withDigestContext<Result>(
        _ algorithm: JWSAlgorithm,
        key: OpenSSLKey,
        signing: Bool,
        _ body: (OpaquePointer) throws(JOSEError) -> Result
    ) throws(JOSEError) -> Result {
        guard let context = EVP_MD_CTX_new() else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "EVP_MD_CTX_new failed")
        }
        defer { EVP_MD_CTX_free(context) }
        var keyContext: OpaquePointer?
        let initialized =
            signing
            ? EVP_DigestSignInit(context, &keyContext, algorithm.digest, nil, key.pointer)
            : EVP_DigestVerifyInit(context, &keyContext, algorithm.digest, nil, key.pointer)
        guard initialized == 1 else {
            OpenSSLErrors.clear()
            throw .cryptoFailure(reason: "cannot initialise \(algorithm.rawValue) with this key")
        }
        if algorithm.family == .rsaPSS {
            // RFC 7518 §3.5: MGF1 with the same hash, salt as long as the hash.
            guard EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1,
                EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, Int32(algorithm.hashLength)) == 1
            else {
                OpenSSLErrors.clear()
                throw .cryptoFailure(reason: "cannot configure RSA-PSS")
            }
        }
        do {
            return try body(context)
        } catch {
            OpenSSLErrors.clear()
            throw error
        }
    }
}
