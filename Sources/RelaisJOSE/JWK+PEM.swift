import COpenSSL

extension JWK {
    /// Reads a PEM key: a private key (`PRIVATE KEY`, `RSA PRIVATE KEY`, `EC PRIVATE KEY`), a public
    /// key (`PUBLIC KEY`) or a certificate (`CERTIFICATE`, whose public key is taken). RSA, EC
    /// P-256/384/521 and Ed25519 keys are supported. Encrypted private keys are refused.
    public init(pem: String, keyID: String? = nil, use: String? = nil, algorithm: String? = nil) throws(JOSEError) {
        let bytes = Array(pem.utf8)
        func read(_ reader: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
            bytes.withUnsafeBufferPointer { buffer in
                guard let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count)) else { return nil }
                defer { BIO_free(bio) }
                return reader(bio)
            }
        }
        let key: OpaquePointer?
        if pem.contains("PRIVATE KEY-----") {
            if pem.contains("ENCRYPTED") { throw .invalidKey(reason: "encrypted PEM private keys are not supported; decrypt it first") }
            key = read { PEM_read_bio_PrivateKey($0, nil, nil, nil) }
        } else if pem.contains("-----BEGIN CERTIFICATE-----") {
            key = read { bio in
                guard let certificate = PEM_read_bio_X509(bio, nil, nil, nil) else { return nil }
                defer { X509_free(certificate) }
                return X509_get_pubkey(certificate)
            }
        } else {
            key = read { PEM_read_bio_PUBKEY($0, nil, nil, nil) }
        }
        guard let key else {
            OpenSSLErrors.clear()
            throw .invalidKey(reason: "not a PEM private key, public key or certificate")
        }
        try self.init(openSSLKey: OpenSSLKey(taking: key), keyID: keyID, use: use, algorithm: algorithm)
    }

    init(openSSLKey key: OpenSSLKey, keyID: String?, use: String?, algorithm: String?) throws(JOSEError) {
        let keyType: KeyType
        let curve: Curve?
        switch key.baseID {
        case EVP_PKEY_RSA:
            keyType = .rsa
            curve = nil
        case EVP_PKEY_EC:
            keyType = .ec
            switch key.utf8String(OSSL_PKEY_PARAM_GROUP_NAME) {
            case "prime256v1", "P-256": curve = .p256
            case "secp384r1", "P-384": curve = .p384
            case "secp521r1", "P-521": curve = .p521
            case let other: throw .invalidKey(reason: "unsupported EC curve '\(other ?? "unknown")'")
            }
        case EVP_PKEY_ED25519:
            keyType = .okp
            curve = .ed25519
        default:
            throw .invalidKey(reason: "unsupported key type (RSA, EC P-256/384/521 and Ed25519 only)")
        }
        self.init(keyType: keyType, keyID: keyID, use: use, algorithm: algorithm, curve: curve, isPrivate: key.hasPrivateKey, material: .asymmetric(key))
    }
}

extension JWK {
    /// The private key as PKCS#8 PEM (unencrypted): how Relais' own signing and decryption keys are
    /// stored in files and secrets. Nil for public and symmetric keys.
    public func privateKeyPEM() -> String? {
        guard isPrivate, case .asymmetric(let key) = material else { return nil }
        return writePEM { PEM_write_bio_PrivateKey($0, key.pointer, nil, nil, 0, nil, nil) }
    }

    /// The public key as SubjectPublicKeyInfo PEM. Nil for symmetric keys.
    public func publicKeyPEM() -> String? {
        guard case .asymmetric(let key) = material else { return nil }
        return writePEM { PEM_write_bio_PUBKEY($0, key.pointer) }
    }

    private func writePEM(_ write: (OpaquePointer) -> Int32) -> String? {
        guard let bio = BIO_new(BIO_s_mem()) else {
            OpenSSLErrors.clear()
            return nil
        }
        defer { BIO_free(bio) }
        guard write(bio) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        let pending = Int(BIO_ctrl_pending(bio))
        var bytes = [UInt8](repeating: 0, count: pending)
        let read = bytes.withUnsafeMutableBytes { BIO_read(bio, $0.baseAddress, Int32(pending)) }
        guard read == pending else {
            OpenSSLErrors.clear()
            return nil
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
