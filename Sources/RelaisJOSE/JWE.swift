import RelaisCrypto

/// A JWE in compact serialization (RFC 7516 §7.1), as FranceConnect+ sends id_tokens and userinfo:
/// signed first, then encrypted to the relying party's public key (`cty: JWT`).
///
/// ```swift
/// let jwe = try JWE.parse(encryptedIDToken)
/// let decrypted = try jwe.decrypt(with: ourDecryptionKeys)     // picks the key by kid
/// let jws = try JWS.parse(decrypted.plaintextString)            // the nested, signed JWT
/// try await providerKeys.verify(jws)
/// ```
///
/// Decryption proves nothing about who wrote the plaintext (anyone can encrypt to a public key):
/// always verify the nested JWS afterwards.
public struct JWE: Sendable {
    /// The decoded protected header.
    public let header: [String: JSONValue]
    /// `alg`: how the content-encryption key was sent.
    public let keyAlgorithm: JWEKeyAlgorithm
    /// `enc`: how the content was encrypted.
    public let contentAlgorithm: JWEContentAlgorithm
    /// `kid`: which of the recipient's keys the token was encrypted to, when the sender says.
    public let keyID: String?
    let protectedHeader: [UInt8]  // the base64url text: the AAD
    let encryptedKey: [UInt8]
    let iv: [UInt8]
    let ciphertext: [UInt8]
    let tag: [UInt8]

    /// The result of a successful decryption.
    public struct Decrypted: Sendable {
        /// The JWE's protected header.
        public let header: [String: JSONValue]
        /// The decrypted bytes: for a nested JWT, the compact JWS to verify next.
        public let plaintext: [UInt8]
        /// The key that decrypted the token.
        public let key: JWK
        /// ``plaintext`` as UTF-8 text (invalid sequences replaced), ready for ``JWS/parse(_:maxLength:)``.
        public var plaintextString: String { String(decoding: plaintext, as: UTF8.self) }
        /// True when `cty` says the plaintext is itself a JWT (a nested, signed token).
        public var isNestedJWT: Bool { header["cty"]?.stringValue.map { ClaimsPolicy.normalizedType($0) == "jwt" } ?? false }
    }

    /// Parses `header.encryptedKey.iv.ciphertext.tag`.
    ///
    /// - Throws: ``JOSEError/tokenTooLarge(limit:)``, ``JOSEError/malformedToken(reason:)``,
    ///   ``JOSEError/unsupportedAlgorithm(_:)`` (also for `RSA1_5` and `zip`), ``JOSEError/unsupportedCriticalHeader(_:)``.
    public static func parse(_ compact: String, maxLength: Int = JWS.defaultMaxLength * 2) throws(JOSEError) -> JWE {
        let bytes = Array(compact.utf8)
        guard bytes.count <= maxLength else { throw .tokenTooLarge(limit: maxLength) }
        let segments = CompactSerialization.segments(of: bytes).map { bytes[$0] }
        guard segments.count == 5 else {
            throw .malformedToken(reason: segments.count == 3 ? "this is a JWS (3 segments), not a JWE" : "expected 5 segments, found \(segments.count)")
        }
        guard let headerBytes = Base64URL.decode(bytes: segments[0]), let header = JSONValue.object(from: headerBytes) else {
            throw .malformedToken(reason: "the header is not base64url-encoded JSON")
        }
        var decoded: [[UInt8]] = []
        for (index, name) in [(1, "encrypted key"), (2, "iv"), (3, "ciphertext"), (4, "tag")] {
            guard let value = Base64URL.decode(bytes: segments[index]) else { throw .malformedToken(reason: "the \(name) is not base64url") }
            decoded.append(value)
        }
        guard let algName = header["alg"]?.stringValue, let keyAlgorithm = JWEKeyAlgorithm(rawValue: algName) else {
            throw .unsupportedAlgorithm(header["alg"]?.stringValue ?? "(missing)")
        }
        guard let encName = header["enc"]?.stringValue, let contentAlgorithm = JWEContentAlgorithm(rawValue: encName) else {
            throw .unsupportedAlgorithm(header["enc"]?.stringValue ?? "(enc missing)")
        }
        // Compression invites decompression bombs and length leaks; no provider of ours uses it.
        if header["zip"] != nil { throw .unsupportedAlgorithm("zip") }
        try CriticalHeader.check(header["crit"])
        if let kid = header["kid"], kid.stringValue == nil { throw .malformedToken(reason: "'kid' must be a string") }
        return JWE(
            header: header, keyAlgorithm: keyAlgorithm, contentAlgorithm: contentAlgorithm, keyID: header["kid"]?.stringValue,
            protectedHeader: Array(segments[0]), encryptedKey: decoded[0], iv: decoded[1], ciphertext: decoded[2], tag: decoded[3]
        )
    }

    /// Picks our decryption key by `kid` (several keys coexist during rotation), or the single
    /// suitable key when the token has no `kid`, then decrypts.
    public func decrypt(with keys: JWKSet) throws(JOSEError) -> Decrypted {
        let usable = keys.keys.filter {
            $0.keyType == keyAlgorithm.keyType && $0.isPrivate && ($0.use == nil || $0.use == "enc") && ($0.algorithm == nil || $0.algorithm == keyAlgorithm.rawValue)
        }
        let key: JWK
        if let keyID {
            guard let match = usable.first(where: { $0.keyID == keyID }) else { throw .noMatchingKey(reason: "no \(keyAlgorithm.rawValue) decryption key with kid '\(keyID)'") }
            key = match
        } else {
            guard usable.count == 1 else {
                throw .noMatchingKey(
                    reason: usable.isEmpty ? "no decryption key suits \(keyAlgorithm.rawValue)" : "the token has no kid and \(usable.count) keys suit \(keyAlgorithm.rawValue)")
            }
            key = usable[0]
        }
        return try decrypt(with: key)
    }

    /// Decrypts with one key.
    /// - Throws: ``JOSEError/keyAlgorithmMismatch(reason:)`` when the key cannot serve `alg`;
    ///   ``JOSEError/decryptionFailed`` for every other failure (one error, so no oracle).
    public func decrypt(with key: JWK) throws(JOSEError) -> Decrypted {
        guard key.keyType == keyAlgorithm.keyType else {
            throw .keyAlgorithmMismatch(reason: "\(keyAlgorithm.rawValue) needs a \(keyAlgorithm.keyType.rawValue) key, this one is \(key.keyType.rawValue)")
        }
        if let pinned = key.algorithm, pinned != keyAlgorithm.rawValue {
            throw .keyAlgorithmMismatch(reason: "the key is pinned to \(pinned), the token uses \(keyAlgorithm.rawValue)")
        }
        guard key.isPrivate else { throw .keyAlgorithmMismatch(reason: "a public key cannot decrypt") }
        let cek = try contentKey(with: key)
        let plaintext = try ContentCipher.decrypt(contentAlgorithm, key: cek, iv: iv, aad: protectedHeader, ciphertext: ciphertext, tag: tag)
        return Decrypted(header: header, plaintext: plaintext, key: key)
    }

    private func contentKey(with key: JWK) throws(JOSEError) -> [UInt8] {
        let length = contentAlgorithm.keyLength
        switch (keyAlgorithm, key.material) {
        case (.rsaOAEP, .asymmetric(let openSSLKey)), (.rsaOAEP256, .asymmetric(let openSSLKey)):
            // RFC 7516 §11.5: a failed unwrap continues with a random key, so that it fails exactly
            // like a bad tag and reveals nothing about the padding.
            let unwrapped = try? KeyManagement.rsaOAEP(decrypt: true, keyAlgorithm, key: openSSLKey, input: encryptedKey)
            guard let unwrapped, unwrapped.count == length else { return SecureRandom.bytes(length) }
            return unwrapped
        case (.a128KW, .symmetric(let kek)), (.a256KW, .symmetric(let kek)):
            guard kek.count == keyAlgorithm.wrapKeyLength else {
                throw .keyAlgorithmMismatch(reason: "\(keyAlgorithm.rawValue) needs a \(keyAlgorithm.wrapKeyLength! * 8)-bit key")
            }
            let unwrapped = try KeyManagement.unwrap(kek: kek, wrapped: encryptedKey)
            guard unwrapped.count == length else { throw .decryptionFailed }
            return unwrapped
        case (.direct, .symmetric(let secret)):
            guard encryptedKey.isEmpty else { throw .decryptionFailed }
            guard secret.count == length else { throw .keyAlgorithmMismatch(reason: "dir with \(contentAlgorithm.rawValue) needs a \(length * 8)-bit key") }
            return secret
        case (.ecdhES, .asymmetric(let openSSLKey)), (.ecdhESA128KW, .asymmetric(let openSSLKey)), (.ecdhESA256KW, .asymmetric(let openSSLKey)):
            guard let epkObject = header["epk"]?.objectValue, let epk = try? JWK(object: epkObject), epk.keyType == .ec, epk.curve == key.curve,
                case .asymmetric(let peer) = epk.material
            else {
                // The ephemeral key must be a valid point on our key's curve (invalid-curve attacks).
                throw .decryptionFailed
            }
            let z = try KeyManagement.ecdhSharedSecret(privateKey: openSSLKey, peer: peer)
            let partyU = try party("apu")
            let partyV = try party("apv")
            if keyAlgorithm == .ecdhES {
                guard encryptedKey.isEmpty else { throw .decryptionFailed }
                return KeyManagement.concatKDF(sharedSecret: z, algorithmID: contentAlgorithm.rawValue, partyU: partyU, partyV: partyV, keyLength: length)
            }
            let kek = KeyManagement.concatKDF(sharedSecret: z, algorithmID: keyAlgorithm.rawValue, partyU: partyU, partyV: partyV, keyLength: keyAlgorithm.wrapKeyLength!)
            let unwrapped = try KeyManagement.unwrap(kek: kek, wrapped: encryptedKey)
            guard unwrapped.count == length else { throw .decryptionFailed }
            return unwrapped
        default:
            throw .keyAlgorithmMismatch(reason: "\(keyAlgorithm.rawValue) cannot use this key")
        }
    }

    private func party(_ name: String) throws(JOSEError) -> [UInt8] {
        guard let value = header[name] else { return [] }
        guard let text = value.stringValue, let bytes = Base64URL.decode(text) else { throw .malformedToken(reason: "'\(name)' is not base64url") }
        return bytes
    }

    // MARK: - Encryption

    /// Encrypts `plaintext` to `recipient` (a public RSA or EC key, or a shared oct key).
    /// Used by the development provider (FranceConnect+ mode) and by tests.
    public static func encrypt(
        _ plaintext: [UInt8],
        to recipient: JWK,
        keyAlgorithm: JWEKeyAlgorithm,
        contentAlgorithm: JWEContentAlgorithm,
        extraHeader: [String: JSONValue] = [:]
    ) throws(JOSEError) -> String {
        guard recipient.keyType == keyAlgorithm.keyType else {
            throw .keyAlgorithmMismatch(reason: "\(keyAlgorithm.rawValue) needs a \(keyAlgorithm.keyType.rawValue) key, this one is \(recipient.keyType.rawValue)")
        }
        var header = extraHeader
        header["alg"] = .string(keyAlgorithm.rawValue)
        header["enc"] = .string(contentAlgorithm.rawValue)
        if let keyID = recipient.keyID { header["kid"] = .string(keyID) }
        let length = contentAlgorithm.keyLength
        var cek = SecureRandom.bytes(length)
        var encryptedKey: [UInt8] = []

        switch (keyAlgorithm, recipient.material) {
        case (.rsaOAEP, .asymmetric(let key)), (.rsaOAEP256, .asymmetric(let key)):
            encryptedKey = try KeyManagement.rsaOAEP(decrypt: false, keyAlgorithm, key: key, input: cek)
        case (.a128KW, .symmetric(let kek)), (.a256KW, .symmetric(let kek)):
            guard kek.count == keyAlgorithm.wrapKeyLength else {
                throw .keyAlgorithmMismatch(reason: "\(keyAlgorithm.rawValue) needs a \(keyAlgorithm.wrapKeyLength! * 8)-bit key")
            }
            encryptedKey = try ContentCipher.keyWrap(encrypt: true, kek: kek, input: cek)
        case (.direct, .symmetric(let secret)):
            guard secret.count == length else { throw .keyAlgorithmMismatch(reason: "dir with \(contentAlgorithm.rawValue) needs a \(length * 8)-bit key") }
            cek = secret
        case (.ecdhES, .asymmetric(let peer)), (.ecdhESA128KW, .asymmetric(let peer)), (.ecdhESA256KW, .asymmetric(let peer)):
            guard let curve = recipient.curve else { throw .keyAlgorithmMismatch(reason: "an EC key is needed") }
            let ephemeral = try JWK.generateEC(curve: curve)
            guard case .asymmetric(let ephemeralKey) = ephemeral.material, var epk = ephemeral.publicJSON() else { throw .cryptoFailure(reason: "ephemeral key") }
            epk["use"] = nil
            epk["alg"] = nil
            header["epk"] = .object(epk)
            let z = try KeyManagement.ecdhSharedSecret(privateKey: ephemeralKey, peer: peer)
            if keyAlgorithm == .ecdhES {
                cek = KeyManagement.concatKDF(sharedSecret: z, algorithmID: contentAlgorithm.rawValue, partyU: [], partyV: [], keyLength: length)
            } else {
                let kek = KeyManagement.concatKDF(sharedSecret: z, algorithmID: keyAlgorithm.rawValue, partyU: [], partyV: [], keyLength: keyAlgorithm.wrapKeyLength!)
                encryptedKey = try ContentCipher.keyWrap(encrypt: true, kek: kek, input: cek)
            }
        default:
            throw .keyAlgorithmMismatch(reason: "\(keyAlgorithm.rawValue) cannot use this key")
        }

        let protected = Base64URL.encode(JSONValue.object(header).serialized())
        let iv = SecureRandom.bytes(contentAlgorithm.ivLength)
        let (ciphertext, tag) = try ContentCipher.encrypt(contentAlgorithm, key: cek, iv: iv, aad: Array(protected.utf8), plaintext: plaintext)
        return [protected, Base64URL.encode(encryptedKey), Base64URL.encode(iv), Base64URL.encode(ciphertext), Base64URL.encode(tag)].joined(separator: ".")
    }
}

extension KeyManagement {
    static func unwrap(kek: [UInt8], wrapped: [UInt8]) throws(JOSEError) -> [UInt8] {
        try ContentCipher.keyWrap(encrypt: false, kek: kek, input: wrapped)
    }
}
