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
