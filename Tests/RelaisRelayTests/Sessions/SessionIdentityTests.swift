import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// The sealed identity's plaintext: a compact form whose id_token segments are bytes, JSON
/// identities sealed before still read (without a token secret), and damage reads as absent.
@Suite(.tags(.fast)) struct SessionIdentityTests {
    static let idToken =
        "eyJhbGciOiJFUzI1NiIsImtpZCI6ImRldjpFUzI1NjpjcVlOUVduaiIsInR5cCI6IkpXVCJ9.eyJhY3IiOiJlaWRhczEiLCJzdWIiOiI3ZmUxZTcwODA4ZDQ4NDUzIn0"
        + ".BkklbFoEByi_FDDFssLslEQKU7pmQfWgy73P7ek1I2lVGdY9gGqdMq_3Mhgv_yeLxAtaWDdJU2c5kPxzhU7SqQ"
    static let claims: [String: JSONValue] = [
        "given_name": .string("Angela Claire Louise"), "family_name": .string("DUBOIS"), "birthdate": .string("1962-08-24"),
        "given_name_array": .array([.string("Angela"), .string("Claire")]), "email_verified": .bool(true), "n": .number(3),
    ]

    @Test(arguments: [(nil, nil, true), (["fc", "pwd"], 1_795_563_534, true), (nil, 1_795_563_534.5, false), ([], nil, false)] as [([String]?, Double?, Bool)])
    func everyFieldComesBack(amr: [String]?, authTime: Double?, withSecret: Bool) throws {
        let identity = SessionIdentity(claims: Self.claims, amr: amr, authTime: authTime, providerIDToken: Self.idToken, tokenSecret: withSecret ? SessionTokens.newSecret() : nil)
        let plaintext = identity.plaintext
        #expect(plaintext.first == SessionIdentity.compactFormat)
        #expect(SessionIdentity(plaintext: plaintext) == identity)
    }

    /// The id_token's base64url was most of the identity; its bytes take a quarter less.
    @Test func theCompactFormIsSmallerThanTheJSONBefore() throws {
        let identity = SessionIdentity(claims: Self.claims, amr: ["fc"], authTime: 1_795_563_534, providerIDToken: Self.idToken, tokenSecret: nil)
        let json = JSONValue.object([
            "claims": .object(Self.claims), "provider_id_token": .string(Self.idToken), "amr": .array([.string("fc")]), "auth_time": .number(1_795_563_534),
        ]).serialized()
        #expect(Double(identity.plaintext.count) <= 0.85 * Double(json.count), "compact \(identity.plaintext.count) B, JSON \(json.count) B")
        #expect(SessionIdentity(plaintext: json) == identity)
    }

    /// An id_token that would not come back byte for byte (its signature covers the text) is kept as text.
    @Test(arguments: ["not-a-jws", Self.idToken + "B", "a..c", ""])
    func anIDTokenThatWouldNotComeBackIdenticalIsKeptAsText(_ text: String) throws {
        let identity = SessionIdentity(claims: [:], amr: nil, authTime: nil, providerIDToken: text)
        #expect(SessionIdentity(plaintext: identity.plaintext)?.providerIDToken == text)
    }

    @Test func aDamagedPlaintextReadsAsAbsent() throws {
        let plaintext = SessionIdentity(claims: Self.claims, amr: ["fc"], authTime: 1, providerIDToken: Self.idToken).plaintext
        for length in 0..<plaintext.count { #expect(SessionIdentity(plaintext: Array(plaintext.prefix(length))) == nil, "cut at \(length)") }
        #expect(SessionIdentity(plaintext: plaintext + [0]) == nil)
        var flags = plaintext
        flags[1] |= 0x08
        #expect(SessionIdentity(plaintext: flags) == nil)
        // A secret of another length is refused rather than used.
        var short = SessionIdentity(claims: [:], amr: nil, authTime: nil, providerIDToken: "x")
        short.tokenSecret = [1, 2, 3]
        #expect(SessionIdentity(plaintext: short.plaintext) == nil)
        #expect(SessionIdentity(plaintext: Array(#"{"claims":[]}"#.utf8)) == nil)
    }
}
