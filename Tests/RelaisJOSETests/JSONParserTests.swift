import Foundation
import RelaisCrypto
import RelaisJOSE
import RelaisTestSupport
import Testing

@Suite(.tags(.fast)) struct JSONParserTests {
    @Test func theCompactSerializerWritesWhatJSONEncoderWrites() throws {
        let values: [JSONValue] = [
            .object([
                "iss": .string("https://idp.example/api/v2"), "quote": .string("a \"b\" \\ c/d"), "control": .string("tab\tline\nbell\u{7}"),
                "unicode": .string("Zoé 😀 €"), "n": .number(1_795_334_017), "neg": .number(-42), "half": .number(1.5), "tiny": .number(0.000_01),
                "big": .number(1e20), "flags": .array([.bool(true), .bool(false), .null]), "nested": .object(["b": .number(2), "a": .array([])]),
                "Zed": .string(""), "émoji": .object([:]),
            ]),
            .array([.string("x"), .number(3.25)]),
            .string("plain"),
            .string("\"\u{1}runs between escapes\u{1F}\\"),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        for value in values {
            let expected = String(decoding: try encoder.encode(value), as: UTF8.self)
            #expect(String(decoding: value.serialized(), as: UTF8.self) == expected)
            #expect(JSONValue.parse(value.serialized()) == value)
        }
    }

    private func parse(_ text: String) -> JSONValue? { JSONValue.parse(Array(text.utf8)) }

    @Test func parsesEveryKindOfValue() {
        #expect(
            parse(#"{"a":[1,-2.5,3e2,true,false,null],"b":{"c":"d"},"e":""}"#)
                == .object([
                    "a": .array([.number(1), .number(-2.5), .number(300), .bool(true), .bool(false), .null]),
                    "b": .object(["c": .string("d")]), "e": .string(""),
                ]))
        #expect(parse(" \n\t{ } ") == .object([:]))
        #expect(parse("[]") == .array([]))
        #expect(parse("0") == .number(0))
    }

    @Test func decodesEscapesAndUnicode() {
        #expect(parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{08}\u{0C}\n\r\t"))
        #expect(parse(#""\u00e9\u20AC\uD83D\uDE00 Zoé""#) == .string("é€😀 Zoé"))
    }

    @Test func refusesWhatRFC8259AndJOSERefuse() {
        for bad in [
            #"{"alg":"HS256","alg":"none"}"#,  // duplicate member (RFC 7515 §4)
            #"{"a":1,}"#, "[1,]", #"{"a" 1}"#, "{a:1}", "'x'", #""unterminated"#, "01", "1.", ".5", "-", "1e", "+1",
            "nul", "tru", #""\x""#, #""\uD83D""#, #""\uDE00""#, #""\u12G4""#, "\"tab\there\"", "{} {}", "[1] x", "",
            String(repeating: "[", count: 100) + String(repeating: "]", count: 100),  // deeper than the cap
            "1e999",  // not finite
        ] {
            #expect(parse(bad) == nil, "\(bad)")
        }
        #expect(JSONValue.parse([0x22, 0xC3, 0x28, 0x22]) == nil)  // invalid UTF-8 in a string
        #expect(JSONValue.object(from: Array("[1]".utf8)) == nil)
    }

    @Test func aTokenWithADuplicateAlgIsMalformed() {
        let header = "eyJhbGciOiJIUzI1NiIsImFsZyI6Im5vbmUifQ"  // {"alg":"HS256","alg":"none"}
        #expect(throws: JOSEError.malformedToken(reason: "the header is not base64url-encoded JSON")) { try JWS.parse("\(header).e30.AA") }
    }
}

@Suite(.tags(.fast)) struct ClaimsIndexTests {
    private func claims(_ json: String) throws -> VerifiedClaims {
        let key = JWK(symmetric: Array(repeating: 1, count: 32))
        var policy = ClaimsPolicy(now: { 0 })
        policy.requireExpiration = false
        return try policy.validate(try JWS.parse(JWS.sign(payload: Array(json.utf8), with: key, algorithm: .hs256)))
    }

    @Test func indexedClaimsDecodeOnDemandLikeAFullParse() throws {
        let json = #"{"sub":"a\"b","gi\u0076en_name":"Zoé","aud":["x","y"],"n":1.5e1,"o":{"p":[true,null]},"e":""}"#
        let verified = try claims(json)
        #expect(verified.claims == JSONValue.object(from: Array(json.utf8)))
        #expect(verified.subject == "a\"b")
        #expect(verified.string("given_name") == "Zoé")  // an escaped name matches its decoded form
        #expect(verified.audience == ["x", "y"])
        #expect(verified["n"] == .number(15))
        #expect(verified.names == ["sub", "given_name", "aud", "n", "o", "e"])
        #expect(verified["missing"] == nil)
    }

    @Test func duplicatesAreRefusedEvenWhenOneNameIsEscaped() throws {
        #expect(throws: JOSEError.claimRejected(check: .payload, reason: "the payload is not a JSON object")) {
            try claims(#"{"sub":"a","s\u0075b":"b"}"#)
        }
        #expect(throws: JOSEError.self) { try claims(#"{"sub":"a","sub":"b"}"#) }
        #expect(throws: JOSEError.self) { try claims(#"{"sub":"a" "x":1}"#) }
        #expect(throws: JOSEError.self) { try claims("{\"sub\":\"raw\ttab\"}") }  // a raw control character
        #expect(try claims(#"{"sub":"escaped\ttab"}"#).subject == "escaped\ttab")
        #expect(throws: JOSEError.self) { try claims(#"{"sub":"a"} trailing"#) }
    }

    @Test func stringClaimsCompareOnTheirDecodedValue() throws {
        // Escaped forms of the expected values must match, and lookalikes must not.
        let key = JWK(symmetric: Array(repeating: 1, count: 32))
        var policy = ClaimsPolicy(issuer: "https://idp.example/api/v2", audience: "app", now: { 0 })
        policy.requireExpiration = false
        policy.nonce = "nonce-0123456789abcdefghij"
        func check(_ json: String) -> JOSEError? {
            do {
                _ = try policy.validate(try JWS.parse(JWS.sign(payload: Array(json.utf8), with: key, algorithm: .hs256)))
                return nil
            } catch {
                return error
            }
        }
        #expect(check(#"{"iss":"https:\/\/idp.example\/api\/v2","aud":"\u0061pp","nonce":"nonce-0123456789abcdefghi\u006a"}"#) == nil)
        #expect(check(#"{"iss":"https://idp.example/api/v2","aud":"app","nonce":"nonce-0123456789abcdefghij"}"#) == nil)
        #expect(
            check(#"{"iss":"https:\/\/idp.example\/api\/v3","aud":"app","nonce":"nonce-0123456789abcdefghij"}"#)
                == .claimRejected(check: .issuer, reason: "iss is 'https://idp.example/api/v3', expected 'https://idp.example/api/v2'"))
        #expect(check(#"{"iss":42,"aud":"app","nonce":"nonce-0123456789abcdefghij"}"#) == .claimRejected(check: .issuer, reason: "iss is missing"))
        #expect(
            check(#"{"iss":"https://idp.example/api/v2","aud":"ap","nonce":"nonce-0123456789abcdefghij"}"#)
                == .claimRejected(check: .audience, reason: "aud does not contain 'app'"))
        #expect(
            check(#"{"iss":"https://idp.example/api/v2","aud":null,"nonce":"nonce-0123456789abcdefghij"}"#)
                == .claimRejected(check: .audience, reason: "aud does not contain 'app'"))
        #expect(check(#"{"iss":"https://idp.example/api/v2","aud":["app","api"],"azp":"\u0061pp","nonce":"nonce-0123456789abcdefghij"}"#) == nil)
        #expect(
            check(#"{"iss":"https://idp.example/api/v2","aud":["app","api"],"azp":"api","nonce":"nonce-0123456789abcdefghij"}"#)
                == .claimRejected(check: .authorizedParty, reason: "azp is 'api', expected 'app'"))
        #expect(
            check(#"{"iss":"https://idp.example/api/v2","aud":"app","nonce":"nonce-0123456789abcdefghiJ"}"#)
                == .claimRejected(check: .nonce, reason: "nonce does not match the authorization request"))
        #expect(
            check(#"{"iss":"https://idp.example/api/v2","aud":"app","nonce":["nonce-0123456789abcdefghij"]}"#)
                == .claimRejected(check: .nonce, reason: "nonce is missing"))
    }

    @Test func decodedClaimsGoThroughTheSameComparisons() throws {
        var policy = ClaimsPolicy(issuer: "https://idp.example", audience: "app", now: { 0 })
        policy.requireExpiration = false
        policy.nonce = "nonce-0123456789abcdefghij"
        let good: [String: JSONValue] = ["iss": .string("https://idp.example"), "aud": .array([.string("app")]), "nonce": .string("nonce-0123456789abcdefghij")]
        #expect(try policy.validate(claims: good).issuer == "https://idp.example")
        var wrongNonce = good
        wrongNonce["nonce"] = .string("nonce-0123456789abcdefghiX")
        #expect(throws: JOSEError.claimRejected(check: .nonce, reason: "nonce does not match the authorization request")) { try policy.validate(claims: wrongNonce) }
        var numericIssuer = good
        numericIssuer["iss"] = .number(1)
        #expect(throws: JOSEError.claimRejected(check: .issuer, reason: "iss is missing")) { try policy.validate(claims: numericIssuer) }
    }

    @Test func headerMembersAreIndexedWithTheSameStrictness() throws {
        let payload = Base64URL.encode(Array(#"{"sub":"x"}"#.utf8))
        func header(_ json: String) -> String { Base64URL.encode(Array(json.utf8)) + "." + payload + ".AAAA" }
        let escaped = try JWS.parse(header(#"{"\u0061lg":"HS256","kid":"k\u0031","typ":"JWT"}"#))
        #expect(escaped.algorithm == .hs256)
        #expect(escaped.keyID == "k1")
        #expect(escaped.header == ["alg": .string("HS256"), "kid": .string("k1"), "typ": .string("JWT")])
        #expect(throws: JOSEError.malformedToken(reason: "the header is not base64url-encoded JSON")) {
            try JWS.parse(header(#"{"alg":"HS256","\u0061lg":"none"}"#))
        }
        #expect(throws: JOSEError.unsupportedCriticalHeader(["exp"])) { try JWS.parse(header(#"{"alg":"HS256","crit":["exp"],"exp":1}"#)) }
    }
}
