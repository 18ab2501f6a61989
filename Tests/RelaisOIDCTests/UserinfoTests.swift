import RelaisConfig
import RelaisJOSE
import Testing

@testable import RelaisOIDC

private func userinfoRejected(_ check: String) -> Expected { .refused("provider_userinfo_rejected", check: check) }

extension Case {
    /// The userinfo answer in each shape a provider may send, right and wrong, through a whole sign-in.
    static let userinfoAnswers: [Case] = [
        Case("JSON", .accepted) { _ in },
        Case("JSON, format json", .accepted) { $0.settings.userinfoFormat = .json },
        Case("JSON not an object", .refused("provider_invalid_response", check: "not a JSON object")) {
            $0.userinfoBody = .raw(#"["sub","user-1"]"#, contentType: "application/json")
        },
        Case("JSON, sub other than the id_token's", userinfoRejected("differs")) { $0.userinfo.claims["sub"] = .string("user-2") },
        Case("JSON, sub missing", userinfoRejected("differs")) { $0.userinfo.claims["sub"] = nil },
        Case("JWS, chosen by Content-Type", .accepted) { $0.userinfoBody = .jwt },
        Case("JWS between ASCII spaces, tabs and a CRLF", .accepted) { $0.userinfoBody = .jwtWrapped(before: " \t", after: "\r\n") },
        Case("JWS after a no-break space (not ASCII whitespace)", userinfoRejected("(jose_malformed)")) {
            $0.userinfoBody = .jwtWrapped(before: "\u{A0}", after: "")
        },
        Case("JWS, format jws", .accepted) {
            $0.settings.userinfoFormat = .jws
            $0.userinfoBody = .jwt
        },
        Case("JWS without iss and aud", .accepted) {
            $0.userinfoBody = .jwt
            $0.userinfo.claims["iss"] = nil
            $0.userinfo.claims["aud"] = nil
        },
        Case("JWS, aud array holding ours", .accepted) {
            $0.userinfoBody = .jwt
            $0.userinfo.claims["aud"] = .array([.string("other"), .string(TestKeys.clientID)])
        },
        Case("JWS, iss other", userinfoRejected("(jwt_iss)")) {
            $0.userinfoBody = .jwt
            $0.userinfo.claims["iss"] = .string("https://elsewhere.example")
        },
        Case("JWS, aud not ours", userinfoRejected("(jwt_aud)")) {
            $0.userinfoBody = .jwt
            $0.userinfo.claims["aud"] = .string("another-client")
        },
        Case("JWS, sub other than the id_token's", userinfoRejected("differs")) {
            $0.userinfoBody = .jwt
            $0.userinfo.claims["sub"] = .string("user-2")
        },
        Case("JWS, expired", userinfoRejected("(jwt_exp)")) {
            $0.userinfoBody = .jwt
            $0.userinfo.claims["exp"] = .number($0.now - 60)
        },
        Case("JWS signed by an unpublished key", userinfoRejected("(jose_no_matching_key)")) {
            $0.userinfoBody = .jwt
            $0.userinfo.signer = TestKeys.stranger
        },
        Case("JWS payload changed after signing", userinfoRejected("(jose_invalid_signature)")) {
            $0.userinfoBody = .jwt
            $0.userinfo.shape = .tampered
        },
        Case("JWS, alg not configured", userinfoRejected("(jose_unsupported_alg)")) {
            $0.userinfoBody = .jwt
            $0.userinfo.algorithm = .es384
        },
        Case("JWS, alg accepted for userinfo only (userinfo_signing_algs)", .accepted) {
            $0.settings.userinfoAlgorithms = [.es384]
            $0.userinfoBody = .jwt
            $0.userinfo.algorithm = .es384
        },
        Case("JWS, an id_token alg when userinfo_signing_algs leaves it out", userinfoRejected("(jose_unsupported_alg)")) {
            $0.settings.userinfoAlgorithms = [.es384]
            $0.userinfoBody = .jwt
        },
        Case("JWS, alg none", userinfoRejected("(jose_unsupported_alg)")) {
            $0.userinfoBody = .jwt
            $0.userinfo.shape = .unsigned
        },
        Case("JWE, format jwe", .accepted) {
            $0.settings.userinfoFormat = .jwe
            $0.userinfoBody = .jwt
            $0.userinfo.shape = .encrypted(.init())
        },
        Case("JWE (ECDH-ES), chosen by Content-Type", .accepted) {
            $0.userinfoBody = .jwt
            $0.userinfo.shape = .encrypted(.init(keyAlgorithm: .ecdhES, recipient: TestKeys.encryptionEC))
        },
        Case("format jwe, a plain JWS", userinfoRejected("(jose_malformed)")) {
            $0.settings.userinfoFormat = .jwe
            $0.userinfoBody = .jwt
        },
        Case("format jwe, a JWE to another key", userinfoRejected("(jose_decryption_failed)")) {
            $0.settings.userinfoFormat = .jwe
            $0.userinfoBody = .jwt
            $0.userinfo.shape = .encrypted(.init(recipient: TestKeys.foreignRSA))
        },
        Case("format jwe, a JWE of bare claims", userinfoRejected("(jose_malformed)")) {
            $0.settings.userinfoFormat = .jwe
            $0.userinfoBody = .jwt
            $0.userinfo.shape = .encrypted(.init(cty: nil, claimsOnly: true))
        },
        Case("format jws, a JSON body", userinfoRejected("(jose_malformed)")) { $0.settings.userinfoFormat = .jws },
        Case("format json, a JWS body", .refused("provider_invalid_response", check: "not a JSON object")) {
            $0.settings.userinfoFormat = .json
            $0.userinfoBody = .jwt
        },
        Case("HTTP 500", .refused("provider_unavailable", check: "HTTP 500")) { $0.userinfoStatus = 500 },
        Case("HTTP 429", .refused("provider_unavailable", check: "HTTP 429")) { $0.userinfoStatus = 429 },
        Case("HTTP 401", .refused("provider_invalid_response", check: "HTTP 401")) { $0.userinfoStatus = 401 },
        Case("FranceConnect+ preset: JWE id_token and JWE userinfo", .accepted) {
            var settings = ProviderSettings(id: "fcp", preset: .franceconnectPlus, issuer: $0.issuer, clientID: TestKeys.clientID)
            settings.clientSecret = TestKeys.clientSecret
            settings.decryptionKeys = $0.settings.decryptionKeys
            $0.settings = settings
            $0.idToken.shape = .encrypted(.init(keyAlgorithm: .ecdhES, recipient: TestKeys.encryptionEC))
            $0.userinfoBody = .jwt
            $0.userinfo.shape = .encrypted(.init(keyAlgorithm: .ecdhES, recipient: TestKeys.encryptionEC))
        },
    ]
}

@Suite struct UserinfoTests {
    @Test("userinfo answers", arguments: Case.userinfoAnswers)
    func userinfo(_ row: Case) async throws {
        try await Harness.run(row.setup) { harness in
            let identity = await row.expected.verify { () async throws(UpstreamError) in try await harness.signIn() }
            #expect(harness.double.hits(.userinfo) == 1)
            #expect(harness.double.lastRequest(.userinfo)?.authorization == "Bearer access-1")
            guard let identity else { return }
            #expect(identity.subject == "user-1")
            #expect(identity.idToken == harness.idToken)
            #expect(identity.sessionID == "session-1")
            #expect(identity.acr == "eidas2")
            // Merged: given_name from the id_token, family_name and email from userinfo; no
            // registered claim is released as an identity claim.
            #expect(identity.claims == ["given_name": .string("Angela"), "family_name": .string("Dubois"), "email": .string("angela@example.test")])
        }
    }

    @Test func withoutAUserinfoEndpointTheIDTokenAloneSpeaks() async throws {
        try await Harness.run({ $0.discovery["userinfo_endpoint"] = nil }) { harness in
            let identity = try await harness.signIn()
            #expect(identity.claims == ["given_name": .string("Angela")])
            #expect(harness.double.hits(.userinfo) == 0)
        }
    }
}
