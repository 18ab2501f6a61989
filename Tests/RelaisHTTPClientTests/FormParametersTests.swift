import RelaisHTTPClient
import Testing

@Suite struct FormParametersTests {
    @Test func repeatedNamesAreReportedOnceInOrderOfFirstRepeat() throws {
        let form = try #require(FormParameters(encoded: "a=1&b=2&a=3&c=4&b=5&a=6&c=7&d=8"))
        #expect(form.repeatedNames == ["a", "b", "c"])
        #expect(try #require(FormParameters(encoded: "x=1&y=2")).repeatedNames.isEmpty)
    }

    /// The worst case the outside review found: thousands of distinct names, each given twice
    /// (a 64 KB body). Every one is reported, once.
    @Test func aFormOfThousandsOfRepeatedNamesIsReportedWhole() throws {
        let names = (0..<8_000).map { "n\($0)" }
        let body = (names + names).map { "\($0)=" }.joined(separator: "&")
        #expect(body.utf8.count > 60_000)
        let form = try #require(FormParameters(encoded: body))
        #expect(form.repeatedNames == names)
    }

    @Test func malformedEscapesAreRefused() {
        #expect(FormParameters(encoded: "a=%ZZ") == nil)
        #expect(FormParameters(encoded: "a=%C3") == nil)  // not UTF-8
        #expect(FormParameters(encoded: "a=%C3%A9+b")?["a"] == "é b")
    }
}
