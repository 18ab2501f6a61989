import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

/// RFC 9449 §4.3: each check of a DPoP proof, wrong in turn.
@Suite(.tags(.fast)) struct DPoPProofTests {
    static let url = "https://relais.example.fr/token"
    static let now = 1_795_334_017.0

    struct Proof {
        var algorithm: JWSAlgorithm = .es256
        var header: [String: JSONValue] = [:]
        var claims: [String: JSONValue] = ["jti": .string("proof-1"), "htm": .string("POST"), "htu": .string(DPoPProofTests.url), "iat": .number(DPoPProofTests.now)]
        var dropJWK = false

        func sign(_ key: JWK, headerKey: JWK? = nil) throws -> String {
            var header = header
            if header["typ"] == nil { header["typ"] = .string("dpop+jwt") }
            if !dropJWK, header["jwk"] == nil { header["jwk"] = .object(try #require((headerKey ?? key).publicJSON())) }
            return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: key, algorithm: algorithm, extraHeader: header)
        }
    }

    static var verifier: DPoPProofVerifier {
        DPoPProofVerifier(now: { DPoPProofTests.now })
    }

    @Test func aValidProofGivesTheKeysThumbprint() throws {
        for algorithm in [JWSAlgorithm.es256, .es384, .edDSA, .ps256] {
            let key = try JWK.generate(for: algorithm, pinAlgorithm: false)
            var proof = Proof()
            proof.algorithm = algorithm
            let verified = try Self.verifier.verify(try proof.sign(key), method: "POST", url: Self.url)
            #expect(verified.thumbprint == key.thumbprint(), "\(algorithm)")
            #expect(verified.tokenID == "proof-1" && verified.issuedAt == Self.now)
        }
    }

    @Test func theURLIsComparedAfterNormalisationWithoutQueryOrFragment() throws {
        let key = try JWK.generate(for: .es256)
        for htu in ["HTTPS://Relais.Example.FR:443/token", "https://relais.example.fr/%74oken", "https://relais.example.fr/token?x=1#f"] {
            var proof = Proof()
            proof.claims["htu"] = .string(htu)
            #expect(throws: Never.self, "\(htu)") { try Self.verifier.verify(try proof.sign(key), method: "POST", url: Self.url + "?client=1") }
        }
        #expect(DPoPProofVerifier.normalizedURL("HTTP://H:80") == "http://h/")
        #expect(DPoPProofVerifier.normalizedURL("https://h/a%2fb%7e") == "https://h/a%2Fb~")
        for bad in ["/token", "ftp://h/x", "https:///x", "https://user@h/x", "https://h/%zz", "https://h/%4"] {
            #expect(DPoPProofVerifier.normalizedURL(bad) == nil, "\(bad)")
        }
        // Linear in the input: a long run of escapes is one pass.
        let long = "https://h/" + String(repeating: "%41", count: 100_000)
        #expect(DPoPProofVerifier.normalizedURL(long) == "https://h/" + String(repeating: "A", count: 100_000))
    }

    @Test func eachRefusalNamesItsCheck() throws {
        let key = try JWK.generate(for: .es256)
        let other = try JWK.generate(for: .es256)
        let rfc7515Private: [String: JSONValue] = [
            "kty": .string("EC"), "crv": .string("P-256"), "x": .string("f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"), "y": .string("x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"),
            "d": .string("jpsQnnGQmL-YBIffH1136cLYh8f9tUJNjpPdfa-34uE"),
        ]
        let hmac = JWK(symmetric: Array(repeating: 1, count: 32))
        func refusal(
            _ change: (inout Proof) -> Void, signer: JWK? = nil, headerKey: JWK? = nil, method: String = "POST", accessToken: String? = nil, nonces: [String] = []
        ) throws -> String? {
            var proof = Proof()
            change(&proof)
            do {
                _ = try Self.verifier.verify(try proof.sign(signer ?? key, headerKey: headerKey), method: method, url: Self.url, accessToken: accessToken, nonces: nonces)
                return nil
            } catch let error as DPoPProofError {
                return error.code
            }
        }
        #expect(try refusal { _ in } == nil)
        #expect(try refusal { $0.header["typ"] = .string("JWT") } == "dpop_typ")
        #expect(
            try refusal(
                {
                    $0.algorithm = .hs256; $0.header["jwk"] = .object(["kty": .string("EC")])
                }, signer: hmac) == "dpop_alg")
        #expect(try refusal { $0.dropJWK = true } == "dpop_jwk")
        #expect(try refusal { $0.header["jwk"] = .object(rfc7515Private) } == "dpop_jwk")
        #expect(try refusal({ _ in }, headerKey: other) == "dpop_signature")
        #expect(try refusal({ _ in }, method: "GET") == "dpop_htm")
        #expect(try refusal { $0.claims["htu"] = .string("https://relais.example.fr/userinfo") } == "dpop_htu")
        #expect(try refusal { $0.claims["htu"] = .string("https://evil.example/token") } == "dpop_htu")
        #expect(try refusal { $0.claims["iat"] = .number(Self.now - 61) } == "dpop_iat")
        #expect(try refusal { $0.claims["iat"] = .number(Self.now + 6) } == "dpop_iat")
        #expect(try refusal { $0.claims["iat"] = .string("now") } == "dpop_malformed")
        #expect(try refusal { $0.claims["jti"] = nil } == "dpop_malformed")
        #expect(try refusal { $0.claims["htm"] = nil } == "dpop_malformed")
        // With an access token: ath is its hash.
        let ath = Base64URL.encode(SHA256.hash(Array("the-token".utf8)))
        #expect(try refusal({ $0.claims["ath"] = .string(ath) }, accessToken: "the-token") == nil)
        #expect(try refusal({ _ in }, accessToken: "the-token") == "dpop_ath")
        #expect(try refusal({ $0.claims["ath"] = .string(ath) }, accessToken: "another-token") == "dpop_ath")
        // A server nonce, when required.
        #expect(try refusal({ $0.claims["nonce"] = .string("n-1") }, nonces: ["n-1"]) == nil)
        #expect(try refusal({ $0.claims["nonce"] = .string("n-0") }, nonces: ["n-1", "n-0"]) == nil)
        #expect(try refusal({ _ in }, nonces: ["n-1"]) == "dpop_nonce")
        #expect(try refusal({ $0.claims["nonce"] = .string("n-0") }, nonces: ["n-1"]) == "dpop_nonce")
        // Not a JWS at all, or alg none.
        #expect(throws: DPoPProofError.malformed(reason: "jose_malformed: expected 3 segments, found 1")) { try Self.verifier.verify("garbage", method: "POST", url: Self.url) }
        let none = Base64URL.encode(Array(#"{"alg":"none","typ":"dpop+jwt"}"#.utf8)) + "." + Base64URL.encode(Array("{}".utf8)) + "."
        #expect(throws: DPoPProofError.unsupportedAlgorithm("none")) { try Self.verifier.verify(none, method: "POST", url: Self.url) }
    }
}
