import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@Suite(.tags(.fast)) struct ClaimsPolicyTests {
    static let now = 1_800_000_000.0
    static let key = JWK(symmetric: Array(repeating: 42, count: 32), keyID: "k1")

    private func token(_ claims: [String: JSONValue], typ: String? = "JWT") throws -> JWS {
        let header: [String: JSONValue] = typ.map { ["typ": .string($0)] } ?? [:]
        let compact = try JWS.sign(payload: JSONValue.object(claims).serialized(), with: Self.key, algorithm: .hs256, extraHeader: header)
        let jws = try JWS.parse(compact)
        try jws.verify(with: Self.key)
        return jws
    }

    private var base: [String: JSONValue] {
        [
            "iss": .string("https://idp.example/api/v2"), "aud": .string("client-1"), "sub": .string("user"),
            "exp": .number(Self.now + 60), "iat": .number(Self.now - 5), "nonce": .string(String(repeating: "n", count: 32)),
            "acr": .string("eidas2"),
        ]
    }

    private var policy: ClaimsPolicy {
        var policy = ClaimsPolicy(issuer: "https://idp.example/api/v2", audience: "client-1", now: { Self.now })
        policy.nonce = String(repeating: "n", count: 32)
        policy.minimumACR = "eidas1"
        policy.acrOrder = ["eidas1", "eidas2", "eidas3"]
        policy.maxAge = .seconds(300)
        policy.expectedType = "JWT"
        return policy
    }

    private func rejection(_ claims: [String: JSONValue], typ: String? = "JWT", _ adjust: (inout ClaimsPolicy) -> Void = { _ in }) throws -> String? {
        var policy = self.policy
        adjust(&policy)
        do {
            _ = try policy.validate(try token(claims, typ: typ))
            return nil
        } catch let error as JOSEError {
            return error.code
        }
    }

    @Test func aGoodTokenPassesEveryCheck() throws {
        let claims = try policy.validate(try token(base))
        #expect(claims.subject == "user")
        #expect(claims.audience == ["client-1"])
        #expect(claims.acr == "eidas2")
    }

    @Test func eachCheckFailsWithItsOwnCode() throws {
        func with(_ name: String, _ value: JSONValue?) -> [String: JSONValue] {
            var claims = base
            claims[name] = value
            return claims
        }
        #expect(try rejection(with("iss", .string("https://evil.example/api/v2"))) == "jwt_iss")
        #expect(try rejection(with("iss", nil)) == "jwt_iss")
        #expect(try rejection(with("aud", .string("other-client"))) == "jwt_aud")
        #expect(try rejection(with("aud", nil)) == "jwt_aud")
        #expect(try rejection(with("aud", .array([.string("client-1"), .string("other")]))) == "jwt_azp")
        #expect(try rejection(with("exp", .number(Self.now - 31))) == "jwt_exp")  // past the 30 s leeway
        #expect(try rejection(with("exp", .number(Self.now - 10))) == nil)  // within it
        #expect(try rejection(with("exp", nil)) == "jwt_exp")
        #expect(try rejection(with("exp", .string("tomorrow"))) == "jwt_exp")
        #expect(try rejection(with("nbf", .number(Self.now + 120))) == "jwt_nbf")
        #expect(try rejection(with("iat", .number(Self.now + 120))) == "jwt_iat")
        #expect(try rejection(with("iat", .number(Self.now - 400))) == "jwt_iat")  // older than max age
        #expect(try rejection(with("iat", nil)) == "jwt_iat")  // max age needs iat
        #expect(try rejection(with("nonce", .string("replayed-nonce-from-another-login"))) == "jwt_nonce")
        #expect(try rejection(with("nonce", nil)) == "jwt_nonce")
        #expect(try rejection(with("acr", .string("eidas1"))) { $0.minimumACR = "eidas2" } == "jwt_acr")
        #expect(try rejection(with("acr", .string("eidas3"))) { $0.minimumACR = "eidas2" } == nil)
        #expect(try rejection(with("acr", .string("loa-unknown"))) == "jwt_acr")
        #expect(try rejection(with("acr", nil)) == "jwt_acr")
        #expect(try rejection(base) { $0.requiredClaims = ["given_name"] } == "jwt_required")
        #expect(try rejection(base, typ: "at+jwt") == "jwt_typ")
        #expect(try rejection(base, typ: nil) == "jwt_typ")
        #expect(try rejection(base, typ: "application/JWT") == nil)
    }

    /// A caller acts on one check by its case, not by matching the code or the description.
    @Test func theFailedCheckIsTyped() throws {
        var claims = base
        claims["exp"] = .number(Self.now - 120)
        #expect(throws: JOSEError.claimRejected(check: .expiration, reason: "expired 120 s ago")) { try policy.validate(try token(claims)) }
        #expect(JOSEError.claimRejected(check: .expiration, reason: "").failedCheck == .expiration)
        #expect(JOSEError.invalidSignature.failedCheck == nil)
    }

    @Test func severalAudiencesNeedTheMatchingAzp() throws {
        var claims = base
        claims["aud"] = .array([.string("client-1"), .string("api")])
        claims["azp"] = .string("client-1")
        #expect(try rejection(claims) == nil)
        claims["azp"] = .string("api")
        #expect(try rejection(claims) == "jwt_azp")
    }

    @Test func accessTokensForSeveralAudiencesNeedNoAzpWhenTheCheckIsOff() throws {
        var claims = base
        claims["aud"] = .array([.string("api-a"), .string("client-1")])
        #expect(try rejection(claims) == "jwt_azp")
        #expect(try rejection(claims) { $0.checkAuthorizedParty = false } == nil)
        // The audience itself is still checked.
        claims["aud"] = .array([.string("api-a"), .string("api-b")])
        #expect(try rejection(claims) { $0.checkAuthorizedParty = false } == "jwt_aud")
    }

    @Test func aNonJSONPayloadIsRejected() throws {
        let compact = try JWS.sign(payload: Array("not json".utf8), with: Self.key, algorithm: .hs256)
        #expect(throws: JOSEError.claimRejected(check: .payload, reason: "the payload is not a JSON object")) { try policy.validate(try JWS.parse(compact)) }
    }

    @Test func theNonceIsNeverEchoedInTheError() throws {
        var claims = base
        claims["nonce"] = .string("attacker-controlled-value")
        do {
            _ = try policy.validate(try token(claims))
            Issue.record("expected a nonce rejection")
        } catch let error as JOSEError {
            #expect(!error.description.contains("attacker-controlled-value"))
            #expect(!error.description.contains(String(repeating: "n", count: 32)))
        }
    }
}
