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

    @Test func malformedEscapesAreRefused() {
        #expect(FormParameters(encoded: "a=%ZZ") == nil)
        #expect(FormParameters(encoded: "a=%C3") == nil)  // not UTF-8
        #expect(FormParameters(encoded: "a=%C3%A9+b")?["a"] == "é b")
    }
}
