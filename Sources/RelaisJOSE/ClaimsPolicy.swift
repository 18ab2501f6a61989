import FoundationEssentials
import RelaisCrypto

/// The claim checks a token must pass, in the order they run. Each failure is reported as
/// ``JOSEError/claimRejected(check:reason:)`` with its check, so logs say exactly which one failed;
/// the error's ``JOSEError/code`` is `jwt_` followed by the raw value (`jwt_aud`, `jwt_exp`, …).
public enum ClaimCheck: String, Sendable, CaseIterable {
    /// The payload is a JSON object.
    case payload
    /// The `typ` header equals the expected one.
    case type = "typ"
    /// `iss` equals the expected issuer exactly.
    case issuer = "iss"
    /// `aud` is or contains the expected audience.
    case audience = "aud"
    /// With several audiences, `azp` is present and equals the expected audience (OIDC Core §3.1.3.7);
    /// see ``ClaimsPolicy/checkAuthorizedParty``.
    case authorizedParty = "azp"
    /// `exp` is present and not past (with leeway).
    case expiration = "exp"
    /// `nbf`, when present, is not in the future (with leeway).
    case notBefore = "nbf"
    /// `iat`, when present or required, is not in the future and not older than the maximum age.
    case issuedAt = "iat"
    /// `nonce` equals the one sent with the authorization request.
    case nonce
    /// `at_hash`, when present, is the hash of the access token returned with the id_token.
    case accessTokenHash = "at_hash"
    /// `acr` is at least the required level in the ordered list.
    case authenticationLevel = "acr"
    /// A required claim is missing.
    case required
}

/// What a verified token's claims must satisfy: one explicit value, built per provider or per API.
///
/// A signature only proves who issued a token, not that it was meant for you: a token Relais
/// issued to another API verifies just as well. Set ``audience`` (and ``issuer``) for every
/// token you accept. Checks whose property is nil are skipped; ``expectedType`` should be set
/// too, so that one kind of token (an id_token) cannot be replayed as another (an access token).
///
/// ```swift
/// var policy = ClaimsPolicy(issuer: "https://oidc.franceconnect.gouv.fr/api/v2", audience: clientID, now: { clock.now })
/// policy.nonce = transaction.nonce
/// policy.minimumACR = "eidas1"
/// policy.acrOrder = ["eidas1", "eidas2", "eidas3"]
/// let claims = try policy.validate(jws)   // after jws.verify(with:)
/// ```
public struct ClaimsPolicy: Sendable {
    /// Expected `iss`, compared exactly. Nil skips the check (only for tokens whose signature already pins the issuer).
    public var issuer: String?
    /// Expected audience (our client id, or an API's identifier). `aud` must be it or an array
    /// that contains it. Nil skips the check, which is almost never right.
    public var audience: String?
    /// With several audiences, also require `azp` to equal ``audience`` (OpenID Connect Core
    /// §3.1.3.7, for id_tokens). Defaults to true. RFC 9068 access tokens name their client in
    /// `client_id`, not `azp`, and Relais issues one to several audiences when an app is configured
    /// so: set this to false to verify access tokens.
    public var checkAuthorizedParty = true
    /// Clock skew tolerated on `exp`, `nbf` and `iat`.
    public var leeway: Duration = .seconds(30)
    /// Reject tokens whose `iat` is older than this (requires `iat`).
    public var maxAge: Duration?
    /// Refuse tokens without `exp` (default true): a token that never expires cannot be withdrawn
    /// from a client that leaked it.
    public var requireExpiration = true
    /// Refuse tokens without `iat` (default false; setting ``maxAge`` requires it anyway).
    public var requireIssuedAt = false
    /// Expected `nonce`; nil skips the check.
    public var nonce: String?
    /// The access token returned with an id_token: its `at_hash`, when present, must be its
    /// ``JWSAlgorithm/tokenHash(_:)`` under the token's `alg` (OpenID Connect Core §3.1.3.8, where
    /// the code flow makes the claim optional); one that is not a string is refused. Nil skips the
    /// check. Only ``validate(_:)-(JWS)`` knows an `alg`: ``validate(claims:)`` refuses any `at_hash`
    /// while this is set.
    public var accessToken: String?
    /// Minimum `acr`, compared by position in ``acrOrder``.
    public var minimumACR: String?
    /// The `acr` values from weakest to strongest (`["eidas1", "eidas2", "eidas3"]`), which
    /// gives ``minimumACR`` its meaning; a token's `acr` absent from the list is refused.
    public var acrOrder: [String] = []
    /// Claims that must be present, whatever their value.
    public var requiredClaims: [String] = []
    /// Expected `typ` header (case-insensitive, `application/` prefix ignored, RFC 7515 §4.1.9); nil skips the check.
    public var expectedType: String?
    /// The time every check reads, in seconds since 1970.
    public var now: @Sendable () -> Double

    /// A policy checking `iss` and `aud`, plus `exp` (required) with 30 s of leeway. Set the other
    /// properties for the remaining checks.
    ///
    /// - Parameter now: The time in seconds since 1970, read at each validation: the wall clock
    ///   (`{ Date().timeIntervalSince1970 }`) in production, a clock the tests move otherwise. It is
    ///   required so that no check reads the wall clock behind its caller's back.
    public init(issuer: String? = nil, audience: String? = nil, now: @escaping @Sendable () -> Double) {
        self.issuer = issuer
        self.audience = audience
        self.now = now
    }

    /// Runs every check on an already verified token and returns its claims.
    ///
    /// Call it after the signature is verified (``JWS/verify(with:)-(JWKSet)`` or
    /// ``JWKSCache/verify(_:)``): this method does not look at the signature.
    /// - Throws: ``JOSEError/claimRejected(check:reason:)`` naming the first check that failed.
    public func validate(_ jws: JWS) throws(JOSEError) -> VerifiedClaims {
        // The payload is indexed, not decoded: only the claims checked here are decoded now.
        guard let payload = JSONObjectView(jws.payload) else {
            throw .claimRejected(check: .payload, reason: "the payload is not a JSON object")
        }
        if let expectedType {
            let actual = jws.headerValue("typ")?.stringValue
            guard let actual, Self.normalizedType(actual) == Self.normalizedType(expectedType) else {
                throw .claimRejected(check: .type, reason: "typ is \(actual.map { "'\($0)'" } ?? "missing"), expected '\(expectedType)'")
            }
        }
        let verified = VerifiedClaims(storage: .indexed(payload))
        try check(verified, algorithm: jws.algorithm)
        return verified
    }

    /// Runs the claim checks on a claims object (for userinfo JSON that arrives unsigned over TLS).
    public func validate(claims: [String: JSONValue]) throws(JOSEError) -> VerifiedClaims {
        let verified = VerifiedClaims(claims: claims)
        try check(verified, algorithm: nil)
        return verified
    }

    private func check(_ claims: VerifiedClaims, algorithm: JWSAlgorithm?) throws(JOSEError) {
        let now = self.now()
        let leewaySeconds = Double(leeway.components.seconds)

        if let issuer {
            switch claims.compareString("iss", to: issuer) {
            case .equal: break
            case .missing, .notString: throw .claimRejected(check: .issuer, reason: "iss is missing")
            case .different: throw .claimRejected(check: .issuer, reason: "iss is '\(claims.issuer ?? "")', expected '\(issuer)'")
            }
        }
        if let audience {
            // One audience as a string is the common case, compared on the bytes.
            switch claims.compareString("aud", to: audience) {
            case .equal: break
            case .missing: throw .claimRejected(check: .audience, reason: "aud is missing")
            case .different: throw .claimRejected(check: .audience, reason: "aud does not contain '\(audience)'")
            case .notString:
                let audiences = claims.audience
                guard audiences.contains(audience) else { throw .claimRejected(check: .audience, reason: "aud does not contain '\(audience)'") }
                if audiences.count > 1, checkAuthorizedParty {
                    switch claims.compareString("azp", to: audience) {
                    case .equal: break
                    case .missing, .notString: throw .claimRejected(check: .authorizedParty, reason: "several audiences and no azp")
                    case .different:
                        throw .claimRejected(check: .authorizedParty, reason: "azp is '\(claims.string("azp") ?? "")', expected '\(audience)'")
                    }
                }
            }
        }
        let exp = try timestamp(claims, "exp", check: .expiration)
        if let exp {
            guard now < exp + leewaySeconds else { throw .claimRejected(check: .expiration, reason: "expired \(Int(now - exp)) s ago") }
        } else if requireExpiration {
            throw .claimRejected(check: .expiration, reason: "exp is missing")
        }
        if let nbf = try timestamp(claims, "nbf", check: .notBefore), nbf > now + leewaySeconds {
            throw .claimRejected(check: .notBefore, reason: "not valid for another \(Int(nbf - now)) s")
        }
        let iat = try timestamp(claims, "iat", check: .issuedAt)
        if let iat {
            guard iat <= now + leewaySeconds else { throw .claimRejected(check: .issuedAt, reason: "issued \(Int(iat - now)) s in the future") }
            if let maxAge, now - iat > Double(maxAge.components.seconds) + leewaySeconds {
                throw .claimRejected(check: .issuedAt, reason: "issued \(Int(now - iat)) s ago, more than the allowed \(maxAge.components.seconds) s")
            }
        } else if requireIssuedAt || maxAge != nil {
            throw .claimRejected(check: .issuedAt, reason: "iat is missing")
        }
        if let nonce {
            // The nonce is a secret of the sign-in transaction: compare in constant time, never echo it.
            switch claims.compareString("nonce", to: nonce, constantTime: true) {
            case .equal: break
            case .missing, .notString: throw .claimRejected(check: .nonce, reason: "nonce is missing")
            case .different: throw .claimRejected(check: .nonce, reason: "nonce does not match the authorization request")
            }
        }
        if let accessToken { try checkAccessTokenHash(claims, accessToken: accessToken, algorithm: algorithm) }
        if let minimumACR {
            guard let actual = claims["acr"]?.stringValue else { throw .claimRejected(check: .authenticationLevel, reason: "acr is missing") }
            guard let required = acrOrder.firstIndex(of: minimumACR) else {
                throw .claimRejected(check: .authenticationLevel, reason: "'\(minimumACR)' is not in the configured acr order")
            }
            guard let level = acrOrder.firstIndex(of: actual) else {
                throw .claimRejected(check: .authenticationLevel, reason: "acr '\(actual)' is not a known level")
            }
            guard level >= required else { throw .claimRejected(check: .authenticationLevel, reason: "acr '\(actual)' is below '\(minimumACR)'") }
        }
        for name in requiredClaims where claims[name] == nil || claims[name] == .null {
            throw .claimRejected(check: .required, reason: "claim '\(name)' is missing")
        }
    }

    /// `at_hash`, when present: never echoed, as it is derived from a bearer token.
    private func checkAccessTokenHash(_ claims: VerifiedClaims, accessToken: String, algorithm: JWSAlgorithm?) throws(JOSEError) {
        guard claims["at_hash"] != nil else { return }
        guard let algorithm else { throw .claimRejected(check: .accessTokenHash, reason: "at_hash cannot be checked without the token's alg") }
        switch claims.compareString("at_hash", to: try algorithm.tokenHash(accessToken)) {
        case .equal, .missing: break
        case .notString: throw .claimRejected(check: .accessTokenHash, reason: "at_hash is not a string")
        case .different: throw .claimRejected(check: .accessTokenHash, reason: "at_hash does not match the access token")
        }
    }

    private func timestamp(_ claims: VerifiedClaims, _ name: String, check: ClaimCheck) throws(JOSEError) -> Double? {
        guard let value = claims[name] else { return nil }
        guard let number = value.numberValue, number.isFinite else {
            throw .claimRejected(check: check, reason: "\(name) must be a number of seconds since 1970")
        }
        return number
    }

    static func normalizedType(_ type: String) -> String {
        let lowered = type.lowercased()
        return lowered.hasPrefix("application/") ? String(lowered.dropFirst("application/".count)) : lowered
    }
}

/// Claims that passed a ``ClaimsPolicy``, with typed accessors for the registered ones.
///
/// Only ``ClaimsPolicy`` creates values of this type, so holding one means the checks ran.
/// Claims from a token stay in their JSON text until read: each accessor decodes one member.
/// The accessors return nil for a claim that is absent or of another JSON type.
public struct VerifiedClaims: Sendable, Equatable {
    enum Storage: Sendable, Equatable {
        case indexed(JSONObjectView)
        case decoded([String: JSONValue])
    }

    let storage: Storage

    init(storage: Storage) { self.storage = storage }

    init(claims: [String: JSONValue]) { storage = .decoded(claims) }

    /// Every claim, decoded.
    public var claims: [String: JSONValue] {
        switch storage {
        case .decoded(let claims): claims
        case .indexed(let payload): payload.dictionary
        }
    }

    /// The names of the claims present.
    public var names: Set<String> {
        switch storage {
        case .decoded(let claims): Set(claims.keys)
        case .indexed(let payload): Set(payload.names)
        }
    }

    /// One claim, decoded; nil when absent.
    public subscript(_ name: String) -> JSONValue? {
        switch storage {
        case .decoded(let claims): claims[name]
        case .indexed(let payload): payload[name]
        }
    }

    func compareString(_ name: String, to expected: String, constantTime: Bool = false) -> StringComparison {
        switch storage {
        case .indexed(let payload):
            return payload.compareString(name, to: expected, constantTime: constantTime)
        case .decoded(let claims):
            guard let value = claims[name] else { return .missing }
            guard let actual = value.stringValue else { return .notString }
            return (constantTime ? ConstantTime.equals(actual, expected) : actual == expected) ? .equal : .different
        }
    }

    /// A claim that is a string (`client_id`, `scope`, `sid`, …); nil when absent or not a string.
    public func string(_ name: String) -> String? { self[name]?.stringValue }

    /// `iss`: who issued the token.
    public var issuer: String? { string("iss") }
    /// `sub`: whom the token is about: the signed-in user.
    public var subject: String? { string("sub") }
    /// `nonce`: the value bound to the authorization request (id_tokens).
    public var nonce: String? { string("nonce") }
    /// `acr`: the authentication context class the user signed in with (`eidas1`, `eidas2`, …).
    public var acr: String? { string("acr") }
    /// `aud` as a list, whether the token carries one string or an array.
    public var audience: [String] {
        switch self["aud"] {
        case .string(let single): [single]
        case .array(let many): many.compactMap(\.stringValue)
        default: []
        }
    }
    /// `exp`, in seconds since 1970.
    public var expiration: Double? { self["exp"]?.numberValue }
    /// `iat`, in seconds since 1970.
    public var issuedAt: Double? { self["iat"]?.numberValue }

    /// Equal when the claims are equal, whether they were read from a token or given decoded.
    public static func == (lhs: VerifiedClaims, rhs: VerifiedClaims) -> Bool { lhs.claims == rhs.claims }
}
