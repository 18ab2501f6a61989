import RelaisJOSE
import Testing

@Suite struct JSONParserTests {
    private func parse(_ text: String) -> JSONValue? { JSONValue.parse(Array(text.utf8)) }

    @Test func parsesEveryKindOfValue() {
        #expect(parse(#"{"a":[1,-2.5,3e2,true,false,null],"b":{"c":"d"},"e":""}"#) == .object([
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

@Suite struct ClaimsIndexTests {
    private func claims(_ json: String) throws -> VerifiedClaims {
        let key = JWK(symmetric: Array(repeating: 1, count: 32))
        var policy = ClaimsPolicy()
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
}
