import RelaisJOSE
import RelaisTestSupport
import Testing

/// OpenID Connect Core §3.1.3.8: `at_hash` is the left half of the hash of the access token, the
/// hash being `alg`'s (SHA-512 for EdDSA); the expected values are ``AccessTokenHash``'s.
@Suite(.tags(.fast)) struct AccessTokenHashTests {
    typealias Hash = AccessTokenHash

    @Test("each algorithm hashes with its own hash", arguments: JWSAlgorithm.allCases)
    func tokenHash(_ algorithm: JWSAlgorithm) throws {
        #expect(try algorithm.tokenHash(Hash.accessToken) == Hash.expected(for: algorithm))
    }

    private static let key = JWK(symmetric: Array(repeating: 42, count: 64), keyID: "k1")

    private func validate(_ atHash: JSONValue?, algorithm: JWSAlgorithm = .hs256, accessToken: String? = Hash.accessToken) throws -> VerifiedClaims {
        var claims: [String: JSONValue] = ["sub": .string("user"), "exp": .number(2_000_000_000)]
        claims["at_hash"] = atHash
        let jws = try JWS.parse(try JWS.sign(payload: JSONValue.object(claims).serialized(), with: Self.key, algorithm: algorithm))
        var policy = ClaimsPolicy(now: { 1_800_000_000 })
        policy.accessToken = accessToken
        return try policy.validate(jws)
    }

    @Test func theMatchingHashIsAccepted() throws {
        #expect(try validate(.string(Hash.sha256Half)).subject == "user")
        #expect(try validate(.string(Hash.sha384Half), algorithm: .hs384).subject == "user")
        #expect(try validate(.string(Hash.sha512Half), algorithm: .hs512).subject == "user")
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
            try validate(.string(Hash.sha256Half), algorithm: .hs384)
        }
        // Padded base64url is not the claim's form.
        #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash does not match the access token")) {
            try validate(.string(Hash.sha256Half + "=="))
        }
        #expect(JOSEError.claimRejected(check: .accessTokenHash, reason: "").code == "jwt_at_hash")
    }

    @Test func aHashThatIsNotAStringIsRefused() throws {
        for value: JSONValue in [.number(1), .null, .bool(true), .array([.string(Hash.sha256Half)])] {
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
        policy.accessToken = Hash.accessToken
        #expect(try policy.validate(claims: ["sub": .string("user")]).subject == "user")
        #expect(throws: JOSEError.claimRejected(check: .accessTokenHash, reason: "at_hash cannot be checked without the token's alg")) {
            try policy.validate(claims: ["sub": .string("user"), "at_hash": .string(Hash.sha256Half)])
        }
    }
}
