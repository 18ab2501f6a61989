import COpenSSL
import RelaisCrypto

/// A JSON Web Key (RFC 7517): RSA, EC (P-256/384/521), OKP (Ed25519) or oct, public or private.
///
/// Keys are immutable values; the OpenSSL key inside is built once at import and shared, so a key
/// can be used from any number of tasks at once. Import validates the key completely (an EC point
/// must be on its curve, an Ed25519 `x` must match its `d`), so a key that exists is usable.
///
/// ```swift
/// let key = try JWK(json: Array(#"{"kty":"EC","crv":"P-256","x":"…","y":"…"}"#.utf8))
/// try JWS.parse(token).verify(with: key)
/// ```
public struct JWK: Sendable {
    /// The `kty` member: the key's family.
    public enum KeyType: String, Sendable, Codable {
        /// An RSA key (RS*, PS*, RSA-OAEP*).
        case rsa = "RSA"
        /// An elliptic-curve key on P-256, P-384 or P-521 (ES*, ECDH-ES*).
        case ec = "EC"
        /// An octet key pair: Ed25519 (EdDSA).
        case okp = "OKP"
        /// A symmetric secret (HS*, AES key wrap, `dir`).
        case oct
    }

    /// The `crv` member of an EC or OKP key.
    public enum Curve: String, Sendable, Equatable {
        /// NIST P-256 (secp256r1), for ES256.
        case p256 = "P-256"
        /// NIST P-384 (secp384r1), for ES384.
        case p384 = "P-384"
        /// NIST P-521 (secp521r1), for ES512.
        case p521 = "P-521"
        /// Ed25519, for EdDSA.
        case ed25519 = "Ed25519"

        /// Bytes of one coordinate (or of the raw Ed25519 key).
        var coordinateSize: Int {
            switch self {
            case .p256: 32
            case .p384: 48
            case .p521: 66
            case .ed25519: 32
            }
        }

        /// OpenSSL's name for the group.
        var openSSLGroup: String {
            switch self {
            case .p256: "prime256v1"
            case .p384: "secp384r1"
            case .p521: "secp521r1"
            case .ed25519: "ED25519"
            }
        }
    }

    enum Material: Sendable {
        case asymmetric(OpenSSLKey)
        case symmetric([UInt8])
    }

    /// `kty`: RSA, EC, OKP or oct.
    public let keyType: KeyType
    /// `kid`: how tokens name the key.
    public let keyID: String?
    /// `use`: `sig` or `enc` when the publisher restricted the key.
    public let use: String?
    /// `alg`: when present, the key is pinned to this algorithm and refuses any other.
    public let algorithm: String?
    /// `crv`: the curve of an EC or OKP key; nil for RSA and oct keys.
    public let curve: Curve?
    /// True when the key can sign (or decrypt): it holds private material, or it is symmetric.
    public let isPrivate: Bool
    let material: Material

    // MARK: - Import

    /// Reads a JWK from its JSON text.
    public init(json: [UInt8]) throws(JOSEError) {
        guard let object = JSONValue.object(from: json) else { throw .invalidKey(reason: "not a JSON object") }
        try self.init(object: object)
    }

    /// Reads a JWK from a parsed JSON object (a member of a JWKS `keys` array).
    public init(object: [String: JSONValue]) throws(JOSEError) {
        func string(_ name: String) throws(JOSEError) -> String? {
            guard let value = object[name] else { return nil }
            guard let text = value.stringValue else { throw .invalidKey(reason: "'\(name)' must be a string") }
            return text
        }
        func bytes(_ name: String, required: Bool = true) throws(JOSEError) -> [UInt8]? {
            guard let text = try string(name) else {
                if required { throw .invalidKey(reason: "'\(name)' is missing") }
                return nil
            }
            guard let decoded = Base64URL.decode(text) else { throw .invalidKey(reason: "'\(name)' is not base64url") }
            return decoded
        }

        guard let ktyText = try string("kty") else { throw .invalidKey(reason: "'kty' is missing") }
        guard let kty = KeyType(rawValue: ktyText) else { throw .invalidKey(reason: "unsupported kty '\(ktyText)'") }
        keyType = kty
        keyID = try string("kid")
        use = try string("use")
        algorithm = try string("alg")

        switch kty {
        case .oct:
            let secret = try bytes("k")!
            guard !secret.isEmpty else { throw .invalidKey(reason: "'k' is empty") }
            curve = nil
            isPrivate = true
            material = .symmetric(secret)

        case .rsa:
            let n = try bytes("n")!.droppingLeadingZeros()
            let e = try bytes("e")!.droppingLeadingZeros()
            guard !n.isEmpty, !e.isEmpty else { throw .invalidKey(reason: "'n' and 'e' must not be zero") }
            // Bounded before OpenSSL sees them: each verification costs an exponentiation by `e`
            // modulo `n`, and a DPoP proof brings its own key. Real keys use e = 65537 and at most
            // 8192 bits (OpenSSL's own bounds are 16384 bits, and `e` of any size below 3073 bits).
            guard n.count <= 1024 else { throw .invalidKey(reason: "RSA keys over 8192 bits are refused") }
            guard e.count <= 4, e.last.map({ $0 & 1 == 1 }) == true, e != [1] else {
                throw .invalidKey(reason: "an RSA exponent 'e' must be odd, at least 3 and under 2^32")
            }
            let d = try bytes("d", required: false)
            curve = nil
            isPrivate = d != nil
            let key = try OpenSSLKey.fromData(type: "RSA", isPrivate: d != nil) { builder throws(JOSEError) in
                try builder.bigNumber(OSSL_PKEY_PARAM_RSA_N, n)
                try builder.bigNumber(OSSL_PKEY_PARAM_RSA_E, e)
                if let d {
                    // OpenSSL signs with the CRT form: a private JWK must carry all of it. (The
                    // OSSL_PKEY_PARAM_RSA_FACTOR1… macros are concatenations Swift cannot import.)
                    try builder.bigNumber(OSSL_PKEY_PARAM_RSA_D, d)
                    try builder.bigNumber("rsa-factor1", try bytes("p")!)
                    try builder.bigNumber("rsa-factor2", try bytes("q")!)
                    try builder.bigNumber("rsa-exponent1", try bytes("dp")!)
                    try builder.bigNumber("rsa-exponent2", try bytes("dq")!)
                    try builder.bigNumber("rsa-coefficient1", try bytes("qi")!)
                }
            }
            material = .asymmetric(key)

        case .ec:
            guard let crvText = try string("crv") else { throw .invalidKey(reason: "'crv' is missing") }
            guard let crv = Curve(rawValue: crvText), crv != .ed25519 else { throw .invalidKey(reason: "unsupported EC curve '\(crvText)'") }
            let x = try bytes("x")!
            let y = try bytes("y")!
            guard x.count == crv.coordinateSize, y.count == crv.coordinateSize else {
                throw .invalidKey(reason: "'x' and 'y' must be \(crv.coordinateSize) bytes for \(crv.rawValue)")
            }
            let d = try bytes("d", required: false)
            if let d, d.count != crv.coordinateSize { throw .invalidKey(reason: "'d' must be \(crv.coordinateSize) bytes for \(crv.rawValue)") }
            curve = crv
            isPrivate = d != nil
            // OpenSSL decodes the uncompressed point 04||x||y and refuses a point not on the curve.
            let key = try OpenSSLKey.fromData(type: "EC", isPrivate: d != nil) { builder throws(JOSEError) in
                try builder.utf8(OSSL_PKEY_PARAM_GROUP_NAME, crv.openSSLGroup)
                try builder.octets(OSSL_PKEY_PARAM_PUB_KEY, [0x04] + x + y)
                if let d { try builder.bigNumber(OSSL_PKEY_PARAM_PRIV_KEY, d) }
            }
            material = .asymmetric(key)

        case .okp:
            guard let crvText = try string("crv") else { throw .invalidKey(reason: "'crv' is missing") }
            guard crvText == Curve.ed25519.rawValue else { throw .invalidKey(reason: "unsupported OKP curve '\(crvText)' (Ed25519 only)") }
            let x = try bytes("x")!
            guard x.count == 32 else { throw .invalidKey(reason: "'x' must be 32 bytes for Ed25519") }
            let d = try bytes("d", required: false)
            curve = .ed25519
            isPrivate = d != nil
            let pointer: OpaquePointer?
            if let d {
                guard d.count == 32 else { throw .invalidKey(reason: "'d' must be 32 bytes for Ed25519") }
                pointer = d.withUnsafeBufferPointer { EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) }
            } else {
                pointer = x.withUnsafeBufferPointer { EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) }
            }
            guard let pointer else {
                OpenSSLErrors.clear()
                throw .invalidKey(reason: "OpenSSL rejected the Ed25519 key")
            }
            let key = OpenSSLKey(taking: pointer)
            if d != nil, key.rawPublicKey() != x { throw .invalidKey(reason: "'x' does not match the private key 'd'") }
            material = .asymmetric(key)
        }
    }

    /// A symmetric key (HS256/384/512, and the HS256 id_tokens of FranceConnect v1, keyed by the client secret).
    public init(symmetric secret: [UInt8], keyID: String? = nil, algorithm: String? = nil) {
        keyType = .oct
        self.keyID = keyID
        use = nil
        self.algorithm = algorithm
        curve = nil
        isPrivate = true
        material = .symmetric(secret)
    }

    init(keyType: KeyType, keyID: String?, use: String?, algorithm: String?, curve: Curve?, isPrivate: Bool, material: Material) {
        self.keyType = keyType
        self.keyID = keyID
        self.use = use
        self.algorithm = algorithm
        self.curve = curve
        self.isPrivate = isPrivate
        self.material = material
    }

    // MARK: - Checks

    /// Refuses the key for `algorithm` unless its type, curve and size suit it, and any pinned `alg` is that one.
    /// This is where an RSA or EC public key is kept from "verifying" an HMAC token.
    public func check(for algorithm: JWSAlgorithm) throws(JOSEError) {
        if let pinned = self.algorithm, pinned != algorithm.rawValue {
            throw .keyAlgorithmMismatch(reason: "the key is pinned to \(pinned), the token uses \(algorithm.rawValue)")
        }
        guard keyType == algorithm.keyType else {
            throw .keyAlgorithmMismatch(reason: "\(algorithm.rawValue) needs a \(algorithm.keyType.rawValue) key, this one is \(keyType.rawValue)")
        }
        switch (algorithm.family, material) {
        case (.ecdsa(let expected), _):
            guard curve == expected else {
                throw .keyAlgorithmMismatch(reason: "\(algorithm.rawValue) needs curve \(expected.rawValue), the key is on \(curve?.rawValue ?? "none")")
            }
        case (.rsaPKCS1, .asymmetric(let key)), (.rsaPSS, .asymmetric(let key)):
            guard key.bits >= 2048 else { throw .keyAlgorithmMismatch(reason: "RSA keys shorter than 2048 bits are refused (this one: \(key.bits))") }
        case (.hmac, .symmetric(let secret)):
            guard secret.count >= algorithm.hashLength else {
                throw .keyAlgorithmMismatch(reason: "\(algorithm.rawValue) needs a key of at least \(algorithm.hashLength) bytes (RFC 7518 §3.2)")
            }
        default:
            break
        }
    }

    // MARK: - Export

    /// The public members only (never `d`, `p`, `q`, … nor an oct `k`); nil for symmetric keys,
    /// which have no public half. This is what a JWKS endpoint publishes.
    public func publicJSON() -> [String: JSONValue]? {
        guard var members = requiredPublicMembers() else { return nil }
        if let keyID { members["kid"] = .string(keyID) }
        if let use { members["use"] = .string(use) }
        if let algorithm { members["alg"] = .string(algorithm) }
        return members
    }

    /// The RFC 7638 thumbprint (SHA-256, base64url): the required members in lexicographic order, no whitespace.
    public func thumbprint() -> String {
        let members: [String: JSONValue]
        if case .symmetric(let secret) = material {
            members = ["k": .string(Base64URL.encode(secret)), "kty": .string("oct")]
        } else {
            members = requiredPublicMembers() ?? [:]
        }
        let canonical = "{" + members.keys.sorted().map { "\"\($0)\":\"\(members[$0]?.stringValue ?? "")\"" }.joined(separator: ",") + "}"
        return Base64URL.encode(SHA256.hash(canonical))
    }

    private func requiredPublicMembers() -> [String: JSONValue]? {
        guard case .asymmetric(let key) = material else { return nil }
        switch keyType {
        case .rsa:
            guard let n = key.bigNumber(OSSL_PKEY_PARAM_RSA_N), let e = key.bigNumber(OSSL_PKEY_PARAM_RSA_E) else { return nil }
            return ["kty": .string("RSA"), "n": .string(Base64URL.encode(n)), "e": .string(Base64URL.encode(e))]
        case .ec:
            guard let curve, let point = key.octetString(OSSL_PKEY_PARAM_PUB_KEY), point.count == 1 + 2 * curve.coordinateSize else { return nil }
            return [
                "kty": .string("EC"), "crv": .string(curve.rawValue),
                "x": .string(Base64URL.encode(point[1...curve.coordinateSize])),
                "y": .string(Base64URL.encode(point[(1 + curve.coordinateSize)...])),
            ]
        case .okp:
            guard let x = key.rawPublicKey() else { return nil }
            return ["kty": .string("OKP"), "crv": .string("Ed25519"), "x": .string(Base64URL.encode(x))]
        case .oct:
            return nil
        }
    }
}

extension Array where Element == UInt8 {
    func droppingLeadingZeros() -> [UInt8] {
        Array(drop { $0 == 0 })
    }
}
