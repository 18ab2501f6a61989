import RelaisJOSE
import RelaisTestSupport
import Testing

/// OpenID Connect Core §3.1.3.8: `at_hash` is the left half of the hash of the access token, the
/// hash being `alg`'s (SHA-512 for EdDSA). Expected values computed apart, with
/// `printf access-1 | openssl dgst -shaN -binary | head -c N/2 | base64url`.
@Suite(.tags(.fast)) struct AccessTokenHashTests {
    static let accessToken = "access-1"
    static let sha256Half = "9MKET0Y7WpOlF96BtnoJyA"
    static let sha384Half = "BKKVvCkq9Iw_B35-CEucCIiT4hka5Okk"
    static let sha512Half = "j_gttPifZFS_g6b4IrJKODpmGFP9qoL7SCZg8t8jzpU"

    /// The `at_hash` of ``accessToken`` in a token signed with `algorithm`.
    static func expected(for algorithm: JWSAlgorithm) -> String {
        switch algorithm {
        case .rs256, .ps256, .es256, .hs256: sha256Half
        case .rs384, .ps384, .es384, .hs384: sha384Half
        case .rs512, .ps512, .es512, .hs512, .edDSA: sha512Half
        }
    }

    @Test("each algorithm hashes with its own hash", arguments: JWSAlgorithm.allCases)
    func tokenHash(_ algorithm: JWSAlgorithm) throws {
        #expect(try algorithm.tokenHash(Self.accessToken) == Self.expected(for: algorithm))
    }

    private static let key = JWK(symmetric: Array(repeating: 42, count: 64), keyID: "k1")

    private func validate(_ atHash: JSONValue?, algorithm: JWSAlgorithm = .hs256, accessToken: String? = accessToken) throws -> VerifiedClaims {
        var claims: [String: JSONValue] = ["sub": .string("user"), "exp": .number(2_000_000_000)]
        claims["at_hash"] = atHash
        let jws = try JWS.parse(try JWS.sign(payload: JSONValue.object(claims).serialized(), with: Self.key, algorithm: algorithm))
        var policy = ClaimsPolicy(now: { 1_800_000_000 })
        policy.accessToken = accessToken
        return try policy.validate(jws)
    }

    @Test func theMatchingHashIsAccepted() throws {
        #expect(try validate(.string(Self.sha256Half)).subject == "user")
        #expect(try validate(.string(Self.sha384Half), algorithm: .hs384).subject == "user")
        #expect(try validate(.string(Self.sha512Half), algorithm: .hs512).subject == "user")
    }

    @Test func anAbsentHashIsAccepted() throws {
        #expect(try validate(nil).subject == "user")
    }

    @Test func aWrongHashIsRefusedWithoutEchoingIt() throws {
        let wrong = try JWSAlgorithm.hs256.tokenHash("access-2")
        #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash does not match the access token")) {
            try validate(.string(wrong))
        }
        // The hash of another alg's length: a SHA-256 half in an HS384 token.
        #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash does not match the access token")) {
            try validate(.string(Self.sha256Half), algorithm: .hs384)
        }
        // Padded base64url is not the claim's form.
        #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash does not match the access token")) {
            try validate(.string(Self.sha256Half + "=="))
        }
        #expect(JOSEError.claimRejected(check: .accessTokenHash, reason: "").code == "jwt_at_hash")
    }

    @Test func aHashThatIsNotAStringIsRefused() throws {
        for value: JSONValue in [.number(1), .null, .bool(true), .array([.string(Self.sha256Half)])] {
            #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash is not a string")) { try validate(value) }
        }
    }

    @Test func withoutAnAccessTokenNothingIsChecked() throws {
        #expect(try validate(.string("anything"), accessToken: nil).subject == "user")
    }

    /// Unsigned claims have no alg to pick the hash: an at_hash there cannot be shown right.
    @Test func claimsWithoutATokenCannotProveTheirHash() throws {
        var policy = ClaimsPolicy(now: { 1_800_000_000 })
        policy.requireExpiration = false
        policy.accessToken = Self.accessToken
        #expect(try policy.validate(claims: ["sub": .string("user")]).subject == "user")
        #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash cannot be checked without the token's alg")) {
            try policy.validate(claims: ["sub": .string("user"), "at_hash": .string(Self.sha256Half)])
        }
    }
}
