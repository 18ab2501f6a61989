import HTTPTypes
import RelaisHTTPClient
import RelaisTestSupport
import Testing

@testable import RelaisServer

/// Which requests carry a form body: the media type read on the bytes, case-insensitively, with
/// parameters allowed after it and nothing else.
@Suite(.tags(.fast)) struct FormContentTypeTests {
    @Test func aFormIsItsMediaTypeAndParametersOnly() {
        let forms = [
            "application/x-www-form-urlencoded", "Application/X-WWW-Form-Urlencoded", "application/x-www-form-urlencoded; charset=UTF-8",
            "application/x-www-form-urlencoded ;charset=utf-8", "application/x-www-form-urlencoded\t; charset=utf-8",
        ]
        for value in forms { #expect(FormParameters.isForm([.contentType: value]), "\(value)") }
        let others = [
            "application/json", "application/x-www-form-urlencodedx", "application/x-www-form-urlencoded, text/plain", "application/x-www-form",
            "multipart/form-data", "", "application/x\u{0D}www-form-urlencoded",
        ]
        for value in others { #expect(!FormParameters.isForm([.contentType: value]), "\(value)") }
        #expect(!FormParameters.isForm([:]))
        var twice = HTTPFields()
        twice.append(HTTPField(name: .contentType, value: "application/x-www-form-urlencoded"))
        twice.append(HTTPField(name: .contentType, value: "application/x-www-form-urlencoded"))
        #expect(!FormParameters.isForm(twice))
    }

    @Test func aFieldIsAbsentGivenOnceOrRepeated() {
        var fields: HTTPFields = [.accept: "a"]
        #expect(fields.occurrence(of: .authorization) == .absent)
        fields.append(HTTPField(name: .authorization, value: "Bearer x"))
        #expect(fields.occurrence(of: .authorization) == .once("Bearer x"))
        fields.append(HTTPField(name: .authorization, value: "Bearer x"))
        #expect(fields.occurrence(of: .authorization) == .repeated)
    }

    @Test func aComponentIsDecodedAsInAForm() {
        #expect(FormParameters.decodeComponent("a+b%20c%C3%A9"[...]) == "a b cé")
        #expect(FormParameters.decodeComponent("plain"[...]) == "plain")
        #expect(FormParameters.decodeComponent(""[...]) == "")
        for refused in ["%", "%4", "%zz", "%C3"] { #expect(FormParameters.decodeComponent(refused[...]) == nil, "\(refused)") }
    }
}
