import FoundationEssentials
import RelaisCrypto

/// A DPoP proof (RFC 9449) that passed every check of ``DPoPProofVerifier``: who holds the key,
/// and what to remember so it cannot be replayed.
public struct DPoPProof: Sendable {
    /// The proof's public key, from its `jwk` header.
    public let key: JWK
    /// The RFC 7638 thumbprint of ``key``: what a bound token carries as `cnf.jkt`.
    public let thumbprint: String
    /// The proof's `jti`. Remember it until ``issuedAt`` plus the verifier's window has passed,
    /// and refuse a proof that repeats it (RFC 9449 §11.1).
    public let tokenID: String
    /// The proof's `iat`, in seconds since 1970.
    public let issuedAt: Double
}

/// Why a DPoP proof was refused. ``code`` is stable; the reason never quotes key material.
public enum DPoPProofError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a compact JWS, or its header or claims have the wrong shape.
    case malformed(reason: String)
    /// `typ` is not `dpop+jwt`.
    case wrongType
    /// `alg` is symmetric, `none`, unknown, or not among the accepted ones.
    case unsupportedAlgorithm(String)
    /// The `jwk` header is missing, unreadable, private, or does not suit `alg`.
    case invalidKey(reason: String)
    /// The signature does not verify with the `jwk` header.
    case invalidSignature
    /// `htm` is not the request's method.
    case methodMismatch
    /// `htu` is not the request's URL (scheme, host, port and path, after normalisation).
    case urlMismatch
    /// `iat` is outside the accepted window.
    case stale
    /// `ath` is missing or not the hash of the access token presented with the proof.
    case accessTokenHashMismatch
    /// A server nonce is required and the proof carries none, or another.
    case nonceMismatch

    public var code: String {
        switch self {
        case .malformed: "dpop_malformed"
        case .wrongType: "dpop_typ"
        case .unsupportedAlgorithm: "dpop_alg"
        case .invalidKey: "dpop_jwk"
        case .invalidSignature: "dpop_signature"
        case .methodMismatch: "dpop_htm"
        case .urlMismatch: "dpop_htu"
        case .stale: "dpop_iat"
        case .accessTokenHashMismatch: "dpop_ath"
        case .nonceMismatch: "dpop_nonce"
        }
    }

    public var description: String {
        switch self {
        case .malformed(let reason): "\(code): \(reason)"
        case .wrongType: "\(code): typ must be dpop+jwt"
        case .unsupportedAlgorithm(let alg): "\(code): algorithm '\(alg)' is not accepted for DPoP proofs"
        case .invalidKey(let reason): "\(code): \(reason)"
        case .invalidSignature: "\(code): the proof's signature does not verify with its jwk"
        case .methodMismatch: "\(code): htm is not the request's method"
        case .urlMismatch: "\(code): htu is not the request's URL"
        case .stale: "\(code): iat is outside the accepted window"
        case .accessTokenHashMismatch: "\(code): ath is missing or not the hash of the access token"
        case .nonceMismatch: "\(code): the proof lacks the server's current nonce"
        }
    }

    /// Every code, with the check that failed (docs/errors.md is generated from it).
    public static let catalogue: [(code: String, check: String)] = [
        ("dpop_malformed", "Not a compact JWS; a header member or a claim (`jti`, `htm`, `htu`, `iat`) is missing or of the wrong type."),
        ("dpop_typ", "`typ` is not `dpop+jwt`."),
        ("dpop_alg", "`alg` is not an accepted asymmetric algorithm (HMAC and `none` never are)."),
        ("dpop_jwk", "The `jwk` header is missing, unreadable, carries a private part, or does not suit `alg`."),
        ("dpop_signature", "The signature does not verify with the proof's own `jwk`."),
        ("dpop_htm", "`htm` is not the method of the request the proof came with."),
        ("dpop_htu", "`htu` is not the request's URL (compared without query and fragment, after normalising case, default port and percent-encoding)."),
        ("dpop_iat", "`iat` is older than the window or further in the future than the leeway."),
        ("dpop_ath", "Presented with an access token: `ath` is missing or not the base64url SHA-256 of that token."),
        ("dpop_nonce", "The server requires its nonce and the proof carries none, or a stale one."),
    ]
}

/// Checks DPoP proofs (RFC 9449 §4.3): what an API protecting DPoP-bound Relais tokens runs on
/// each request, and what Relais runs at `/token`, `/userinfo` and `/auth`.
///
/// ```swift
/// let verifier = DPoPProofVerifier(now: { Date().timeIntervalSince1970 })
/// guard let header = dpopHeader else { return .unauthorized }  // exactly one DPoP header
/// let proof = try verifier.verify(
///     header, method: "GET", url: "https://api.example.fr/orders",
///     accessToken: token  // the token from `Authorization: DPoP <token>`
/// )
/// // The token's cnf.jkt must equal proof.thumbprint, and proof.tokenID must not have been
/// // seen within the window (keep a replay cache).
/// ```
///
/// Replay protection needs memory shared by every instance, so it is the caller's: remember
/// ``DPoPProof/tokenID`` for ``window`` plus ``leeway``. The article "Verify Relais access tokens
/// in your API" has a complete, tested example.
public struct DPoPProofVerifier: Sendable {
    /// The algorithms accepted (asymmetric only: a shared secret proves nothing about an app instance).
    public var algorithms: Set<JWSAlgorithm> = [.es256, .es384, .edDSA, .rs256, .ps256]
    /// How old a proof may be (its `iat`).
    public var window: Duration = .seconds(60)
    /// How far in the future `iat` may be (clock skew between the app and the server).
    public var leeway: Duration = .seconds(5)
    /// The time the `iat` window is checked against, in seconds since 1970.
    public var now: @Sendable () -> Double

    /// - Parameter now: The time in seconds since 1970: the wall clock
    ///   (`{ Date().timeIntervalSince1970 }`) in production, a clock the tests move otherwise.
    public init(now: @escaping @Sendable () -> Double) {
        self.now = now
    }

    /// Verifies `proof`, sent with a `method` request to `url`.
    /// - Parameters:
    ///   - accessToken: The token presented with the proof (`Authorization: DPoP …`); its hash must
    ///     be the proof's `ath`. Nil at the token endpoint.
    ///   - nonces: The server nonces the proof may carry (the current one and, while it rotates, the
    ///     previous one); empty when none is required.
    /// - Throws: ``DPoPProofError`` naming the check that failed.
    public func verify(_ proof: String, method: String, url: String, accessToken: String? = nil, nonces: [String] = []) throws(DPoPProofError) -> DPoPProof {
        let jws: JWS
        do {
            jws = try JWS.parse(proof, maxLength: 8 * 1024)
        } catch .unsupportedAlgorithm(let alg) {
            throw .unsupportedAlgorithm(alg)
        } catch {
            throw .malformed(reason: error.description)
        }
        guard jws.header["typ"]?.stringValue == "dpop+jwt" else { throw .wrongType }
        guard algorithms.contains(jws.algorithm), !jws.algorithm.isSymmetric else { throw .unsupportedAlgorithm(jws.algorithm.rawValue) }
        guard case .object(let members)? = jws.header["jwk"] else { throw .invalidKey(reason: "the jwk header is missing or not an object") }
        let key: JWK
        do {
            key = try JWK(object: members)
        } catch {
            throw .invalidKey(reason: error.description)
        }
        guard !key.isPrivate, key.keyType != .oct else { throw .invalidKey(reason: "the jwk header must be a public key") }
        do {
            try jws.verify(with: key)
        } catch .invalidSignature {
            throw .invalidSignature
        } catch {
            throw .invalidKey(reason: error.description)
        }
        guard case .object(let claims)? = JSONValue.parse(jws.payload) else { throw .malformed(reason: "the payload is not a JSON object") }
        guard let tokenID = claims["jti"]?.stringValue, !tokenID.isEmpty, tokenID.utf8.count <= 256 else { throw .malformed(reason: "jti is missing") }
        guard let htm = claims["htm"]?.stringValue, let htu = claims["htu"]?.stringValue else { throw .malformed(reason: "htm or htu is missing") }
        guard let issuedAt = claims["iat"]?.numberValue else { throw .malformed(reason: "iat is missing or not a number") }
        guard htm == method else { throw .methodMismatch }
        guard let proofURL = Self.normalizedURL(htu), let requestURL = Self.normalizedURL(url), proofURL == requestURL else { throw .urlMismatch }
        let current = now()
        guard issuedAt <= current + Self.seconds(leeway), issuedAt >= current - Self.seconds(window) else { throw .stale }
        if let accessToken {
            let expected = Base64URL.encode(SHA256.hash(Array(accessToken.utf8)))
            guard let ath = claims["ath"]?.stringValue, ConstantTime.equals(ath, expected) else { throw .accessTokenHashMismatch }
        }
        if !nonces.isEmpty {
            guard let sent = claims["nonce"]?.stringValue, nonces.contains(where: { ConstantTime.equals(sent, $0) }) else { throw .nonceMismatch }
        }
        return DPoPProof(key: key, thumbprint: key.thumbprint(), tokenID: tokenID, issuedAt: issuedAt)
    }

    /// `scheme://host[:port]/path` without query and fragment, with RFC 3986 §6.2.2–6.2.3
    /// normalisation: scheme and host in lower case, the default port dropped, an empty path as
    /// `/`, percent-encodings in upper case and unreserved characters decoded. Nil when `url` is
    /// not an absolute http(s) URL. Linear in the URL's length.
    public static func normalizedURL(_ url: String) -> String? {
        var text = Substring(url)
        if let cut = text.firstIndex(where: { $0 == "?" || $0 == "#" }) { text = text[..<cut] }
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { return nil }
        let scheme = text[..<colon].lowercased()
        guard scheme == "https" || scheme == "http" else { return nil }
        let rest = text[text.index(colon, offsetBy: 3)...]
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        var authority = rest[..<authorityEnd].lowercased()
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        let defaultPort = scheme == "https" ? ":443" : ":80"
        if authority.hasSuffix(defaultPort) { authority.removeLast(defaultPort.count) }
        let path = rest[authorityEnd...]
        guard let normalizedPath = normalizedPercentEncoding(path.isEmpty ? "/" : path) else { return nil }
        return scheme + "://" + authority + normalizedPath
    }

    private static func normalizedPercentEncoding(_ text: Substring) -> String? {
        var output: [UInt8] = []
        output.reserveCapacity(text.utf8.count)
        var bytes = text.utf8.makeIterator()
        while let byte = bytes.next() {
            guard byte == UInt8(ascii: "%") else {
                output.append(byte)
                continue
            }
            guard let high = bytes.next().flatMap(Hex.value(of:)), let low = bytes.next().flatMap(Hex.value(of:)) else { return nil }
            let decoded = high << 4 | low
            if ByteScan.isUnreserved(decoded) {
                output.append(decoded)
            } else {
                output += [UInt8(ascii: "%"), hexDigit(high), hexDigit(low)]
            }
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "A") + value - 10 }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
