import RelaisTestSupport
import Testing

@testable import RelaisJOSE

/// The parser reads a string without escapes by `memchr` and one reduction, and falls back to its
/// byte-by-byte reading for the rest: both paths must accept and refuse the same texts, whether the
/// string is decoded (``JSONValue/parse(_:)``) or only checked (an unread member of a token's
/// claims, ``JSONObjectView``).
@Suite(.tags(.fast)) struct JSONStringScanTests {
    private func parse(_ bytes: [UInt8]) -> JSONValue? { JSONValue.parse(bytes) }
    private func member(_ bytes: [UInt8]) -> [UInt8] { Array(#"{"a":"#.utf8) + bytes + Array(#","b":1}"#.utf8) }

    @Test func plainStringsOfEveryLengthAreRead() {
        for length in [0, 1, 15, 16, 17, 31, 32, 33, 64, 2_500] {
            let text = String(repeating: "aZ9-_.~", count: length / 7 + 1).prefix(length)
            let quoted = Array("\"\(text)\"".utf8)
            #expect(parse(quoted) == .string(String(text)), "\(length)")
            #expect(JSONObjectView(member(quoted))?["b"] == .number(1), "\(length)")
        }
        #expect(parse(Array("\"Zoé 😀 €\"".utf8)) == .string("Zoé 😀 €"))
    }

    @Test func aQuoteFoundAfterAnEscapeIsReadAsEscaped() {
        // memchr's first quote is the escaped one: the byte-by-byte path reads the whole string.
        let text = Array(#""abc\"def""#.utf8)
        #expect(parse(text) == .string("abc\"def"))
        #expect(JSONObjectView(member(text))?["a"] == .string("abc\"def"))
        #expect(parse(Array(#""\\""#.utf8)) == .string("\\"))
        #expect(parse(Array(#""x\\" tail""#.utf8)) == nil)  // the string ends at the unescaped quote
    }

    @Test func controlCharactersAndBadUTF8AreRefusedOnBothPaths() {
        let refused: [[UInt8]] = [
            Array("\"a".utf8) + [0x01] + Array("b\"".utf8),  // a control character in plain text
            Array("\"".utf8) + Array(repeating: UInt8(ascii: "a"), count: 100) + [0x1F] + Array("\"".utf8),
            Array("\"a".utf8) + [0x0A] + Array("\\n\"".utf8),  // a control character before an escape
            [0x22, 0xC3, 0x28, 0x22],  // invalid UTF-8
            [0x22, 0x61, 0xFF, 0x22],
            Array("\"unterminated".utf8),
            Array("\"".utf8) + Array(repeating: UInt8(ascii: "a"), count: 3_000),  // long and unterminated
            Array(#""ends in an escape\"#.utf8),
        ]
        for bytes in refused {
            #expect(parse(bytes) == nil, "\(bytes.prefix(12))")
            #expect(JSONObjectView(member(bytes)) == nil, "\(bytes.prefix(12))")
        }
    }
}
