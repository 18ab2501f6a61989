import RelaisCrypto

/// A JWS in compact serialization (RFC 7515 §7.1), parsed but not yet trusted.
///
/// Parsing checks the shape; ``verify(with:)-(JWK)`` checks the signature; a ``ClaimsPolicy``
/// checks the claims. Nothing in ``payload`` should be believed before a verify call returns,
/// and nothing in it should be acted on before the claims are checked.
///
/// ```swift
/// let jws = try JWS.parse(idToken)
/// try jws.verify(with: providerKeys)               // selects the key by alg and kid
/// let claims = try policy.validate(jws)            // iss, aud, exp, …
/// ```
public struct JWS: Sendable {
    /// Largest token accepted by default: FranceConnect tokens are a few KiB.
    public static let defaultMaxLength = 16 * 1024

    /// The decoded protected header.
    public var header: [String: JSONValue] { protectedHeader.dictionary }
    /// The header as sent, decoded member by member when read.
    let protectedHeader: JSONObjectView
    /// `alg`, already checked to be a supported algorithm (never `none`).
    public let algorithm: JWSAlgorithm
    /// `kid`: which key of the issuer's set signed the token, when the issuer says.
    public let keyID: String?
    /// The decoded payload bytes (JSON claims for a JWT).
    public let payload: [UInt8]
    /// `header.payload` as sent: a view into the token's bytes, not a copy.
    let signingInput: ArraySlice<UInt8>
    let signature: [UInt8]

    /// Parses `header.payload.signature`.
    ///
    /// - Parameters:
    ///   - compact: The token as received, without the `Bearer ` prefix.
    ///   - maxLength: Tokens longer than this many bytes are refused before any decoding, so a
    ///     caller cannot make the server decode megabytes.
    /// - Throws: ``JOSEError/tokenTooLarge(limit:)``, ``JOSEError/malformedToken(reason:)``,
    ///   ``JOSEError/unsupportedAlgorithm(_:)`` (including `none`), ``JOSEError/unsupportedCriticalHeader(_:)``.
    public static func parse(_ compact: String, maxLength: Int = defaultMaxLength) throws(JOSEError) -> JWS {
        let bytes = Array(compact.utf8)
        guard bytes.count <= maxLength else { throw .tokenTooLarge(limit: maxLength) }
        let segments = CompactSerialization.segments(of: bytes)
        guard segments.count == 3 else {
            let count = segments.count
            throw .malformedToken(reason: count == 5 ? "this is a JWE (5 segments): decrypt it first" : "expected 3 segments, found \(count)")
        }
        let firstDot = segments[0].upperBound
        let secondDot = segments[1].upperBound
        guard let headerBytes = Base64URL.decode(bytes: bytes[..<firstDot]),
            let header = JSONObjectView(headerBytes)
        else {
            throw .malformedToken(reason: "the header is not base64url-encoded JSON")
        }
        guard let payload = Base64URL.decode(bytes: bytes[(firstDot + 1)..<secondDot]) else {
            throw .malformedToken(reason: "the payload is not base64url")
        }
        guard let signature = Base64URL.decode(bytes: bytes[(secondDot + 1)...]) else {
            throw .malformedToken(reason: "the signature is not base64url")
        }
        guard let algName = header["alg"]?.stringValue else { throw .unsupportedAlgorithm(header["alg"] == nil ? "(missing)" : "(not a string)") }
        guard let algorithm = JWSAlgorithm(rawValue: algName) else { throw .unsupportedAlgorithm(algName) }
        try CriticalHeader.check(header["crit"])
        let keyID: String?
        if let kid = header["kid"] {
            guard let text = kid.stringValue else { throw .malformedToken(reason: "'kid' must be a string") }
            keyID = text
        } else {
            keyID = nil
        }
        return JWS(
            protectedHeader: header,
            algorithm: algorithm,
            keyID: keyID,
            payload: payload,
            signingInput: bytes[..<secondDot],
            signature: signature
        )
    }

    /// One header parameter, decoded.
    func headerValue(_ name: String) -> JSONValue? { protectedHeader[name] }

    /// Verifies the signature with `key`, after checking that the key suits the token's algorithm.
    /// - Throws: ``JOSEError/keyAlgorithmMismatch(reason:)`` or ``JOSEError/invalidSignature``.
    public func verify(with key: JWK) throws(JOSEError) {
        try key.check(for: algorithm)
        guard try SignatureEngine.verify(algorithm, key: key, input: signingInput, signature: signature) else {
            throw .invalidSignature
        }
    }

    /// Selects the key from `keys` (see ``JWKSet/key(for:keyID:)``), verifies, and returns the key used.
    @discardableResult
    public func verify(with keys: JWKSet) throws(JOSEError) -> JWK {
        let key = try keys.key(for: algorithm, keyID: keyID)
        try verify(with: key)
        return key
    }

    /// Signs `payload` and returns the compact serialization. The header carries `alg`, the key's
    /// `kid` when it has one, and `extraHeader` (e.g. `typ`).
    ///
    /// - Throws: ``JOSEError/keyAlgorithmMismatch(reason:)`` when the key does not suit `algorithm`
    ///   or is a public key.
    public static func sign(
        payload: [UInt8],
        with key: JWK,
        algorithm: JWSAlgorithm,
        extraHeader: [String: JSONValue] = [:]
    ) throws(JOSEError) -> String {
        try key.check(for: algorithm)
        guard key.isPrivate else { throw .keyAlgorithmMismatch(reason: "a public key cannot sign") }
        var header = extraHeader
        header["alg"] = .string(algorithm.rawValue)
        if let keyID = key.keyID { header["kid"] = .string(keyID) }
        let input = Base64URL.encode(JSONValue.object(header).serialized()) + "." + Base64URL.encode(payload)
        let signature = try SignatureEngine.sign(algorithm, key: key, input: Array(input.utf8))
        return input + "." + Base64URL.encode(signature)
    }
}
