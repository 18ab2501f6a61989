import RelaisHTTPClient
import RelaisTestSupport
import Testing

@Suite(.tags(.fast)) struct FormParametersTests {
    /// application/x-www-form-urlencoded as the URL standard writes it: unreserved bytes as they
    /// are, space as `+`, every other byte (UTF-8 of non-ASCII included) as `%XX` in capitals.
    @Test func escapingKeepsUnreservedBytesOnly() {
        #expect(FormEncoding.escape("") == "")
        #expect(FormEncoding.escape("aZ09-._~") == "aZ09-._~")
        #expect(FormEncoding.escape("a b+c&d=e/f?") == "a+b%2Bc%26d%3De%2Ff%3F")
        #expect(FormEncoding.escape("Élodie ☃") == "%C3%89lodie+%E2%98%83")
        #expect(FormEncoding.escape(String(repeating: "%", count: 300)) == String(repeating: "%25", count: 300))
    }

    @Test func repeatedNamesAreReportedOnceInOrderOfFirstRepeat() throws {
        let form = try #require(FormParameters(encoded: "a=1&b=2&a=3&c=4&b=5&a=6&c=7&d=8"))
        #expect(form.repeatedNames == ["a", "b", "c"])
        #expect(try #require(FormParameters(encoded: "x=1&y=2")).repeatedNames.isEmpty)
    }

    /// Up to the field limit, every repeated name is reported once, and the first repeat is found.
    @Test func aFullFormOfRepeatedNamesIsReportedWhole() throws {
        let names = (0..<(FormParameters.maxFields / 2)).map { "n\($0)" }
        let form = try #require(FormParameters(encoded: (names + names).map { "\($0)=" }.joined(separator: "&")))
        #expect(form.pairs.count == FormParameters.maxFields)
        #expect(form.repeatedNames == names)
        #expect(form.firstRepeatedName == "n0")
        #expect(try #require(FormParameters(encoded: "a=1&b=2")).firstRepeatedName == nil)
    }

    /// A short query is checked by comparing names, a longer one through a set: both find the
    /// same first repeat, wherever it stands.
    @Test func theFirstRepeatIsFoundInShortAndLongForms() throws {
        for count in [2, 7, 8, 9, 40] {
            let names = (0..<count).map { "n\($0)" }
            #expect(try #require(FormParameters(encoded: names.map { "\($0)=1" }.joined(separator: "&"))).firstRepeatedName == nil, "\(count)")
            let repeated = names + [names[count / 2], names[0]]
            #expect(try #require(FormParameters(encoded: repeated.map { "\($0)=1" }.joined(separator: "&"))).firstRepeatedName == names[count / 2], "\(count)")
        }
        #expect(try #require(FormParameters(encoded: "session=1&session=0")).firstRepeatedName == "session")
    }

    /// The worst case the outside review found, a 64 KB body of thousands of tiny fields, is refused
    /// as soon as it passes the field limit: it is never parsed whole.
    @Test func aFormOverTheFieldLimitIsRefused() {
        let oneName = String(repeating: "a=&", count: 21_845)
        let distinct = (0..<9_000).map { "a\($0)=" }.joined(separator: "&")
        #expect(oneName.utf8.count > 60_000 && distinct.utf8.count > 60_000)
        #expect(FormParameters(encoded: oneName) == nil)
        #expect(FormParameters(encoded: distinct) == nil)
        let atTheLimit = (0..<FormParameters.maxFields).map { "a\($0)=" }.joined(separator: "&")
        #expect(FormParameters(encoded: atTheLimit)?.pairs.count == FormParameters.maxFields)
        #expect(FormParameters(encoded: atTheLimit + "&one=more") == nil)
        #expect(FormParameters(encoded: atTheLimit + "&&&") != nil)  // empty fields are not fields
    }

    /// Escaping copies runs of unreserved bytes whole and parsing finds fields with `memchr`:
    /// both agree with a byte-by-byte reference, and what one writes the other reads back, on
    /// texts mixing long runs with every character that must be escaped or splits a form.
    @Test func escapingAndParsingAgreeWithTheByteByByteReading() throws {
        func reference(_ text: String) -> String {
            var output = ""
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    output.unicodeScalars.append(Unicode.Scalar(byte))
                case UInt8(ascii: " "): output += "+"
                default: output += "%" + (byte < 16 ? "0" : "") + String(byte, radix: 16, uppercase: true)
                }
            }
            return output
        }
        let pieces = ["", "a", "Zz09-._~", String(repeating: "x", count: 700), " ", "+", "%", "&", "=", "/", "é", "☃", "%41", "a=b"]
        var generator = SplitMix64(seed: 35)
        for _ in 0..<300 {
            let name = (0..<Int.random(in: 1...3, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            let value = (0..<Int.random(in: 0...6, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined()
            #expect(FormEncoding.escape(name) == reference(name))
            #expect(FormEncoding.escape(value) == reference(value))
            let encoded = FormParameters.encode([(name, value), ("next", value)])
            #expect(encoded == reference(name) + "=" + reference(value) + "&next=" + reference(value))
            let form = try #require(FormParameters(encoded: encoded))
            #expect(form.pairs.map { [$0.name, $0.value] } == [[name, value], ["next", value]])
        }
    }

    /// A field is cut at its first `=`: later ones are the value's; a field without one is a name
    /// with an empty value; an escape anywhere in the field is decoded on both sides.
    @Test func fieldsAreCutAtTheirFirstEqualsSign() throws {
        let form = try #require(FormParameters(encoded: "a=b=c&flag&=x&n%41me=v+w&p+q=r%3D&&"))
        #expect(form.pairs.map { [$0.name, $0.value] } == [["a", "b=c"], ["flag", ""], ["", "x"], ["nAme", "v w"], ["p q", "r="]])
        #expect(try #require(FormParameters(encoded: "")).pairs.isEmpty)
    }

    @Test func malformedEscapesAreRefused() {
        #expect(FormParameters(encoded: "a=%ZZ") == nil)
        #expect(FormParameters(encoded: "a=%C3") == nil)  // not UTF-8
        #expect(FormParameters(encoded: "a=%C3%A9+b")?["a"] == "é b")
        // Invalid UTF-8 in either side is refused: an overlong form, a surrogate, a code point past
        // U+10FFFF, a stray continuation byte, a sequence cut short. A real U+FFFD is kept.
        for invalid in ["a=%C0%AF", "a=%ED%A0%80", "a=%F4%90%80%80", "a=x%80y", "a=%C3%A9%C3", "n%FFme=v", "a=%EF%BF"] {
            #expect(FormParameters(encoded: invalid) == nil, "\(invalid)")
        }
        #expect(FormParameters(encoded: "a=%EF%BF%BD+%F0%9F%99%82")?["a"] == "\u{FFFD} 🙂")
    }
}
