import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisOIDC

private func invalid(_ check: String) -> Expected { .refused("provider_invalid_response", check: check) }

extension Case {
    /// What the token endpoint may answer to the code exchange.
    static let tokenAnswers: [Case] = [
        Case("200 with both tokens", .accepted) { _ in },
        Case("200, token_type bearer in lower case", .accepted) { $0.tokenFields["token_type"] = .string("bearer") },
        Case("200 without id_token", invalid("no id_token")) { $0.tokenIncludesIDToken = false },
        Case("200 without access_token", invalid("no access_token")) { $0.tokenFields["access_token"] = nil },
        Case("200, access_token not a string", invalid("no access_token")) { $0.tokenFields["access_token"] = .number(7) },
        Case("200, token_type not Bearer", invalid("token_type 'DPoP'")) { $0.tokenFields["token_type"] = .string("DPoP") },
        // RFC 6749 §5.1: token_type is REQUIRED.
        Case("200 without token_type", invalid("no token_type")) { $0.tokenFields["token_type"] = nil },
        Case("200, not JSON", invalid("not a JSON object")) { $0.tokenRawBody = "<html>ok</html>" },
        Case("200, an id_token that fails its checks", .refused("provider_id_token_rejected", check: "jwt_nonce")) {
            $0.idToken.claims["nonce"] = .string("nonce-2")
        },
        // The access token the id_token's at_hash is checked against is the one returned with it.
        Case("200, at_hash of the access token returned", .accepted) { $0.idToken.claims["at_hash"] = .string(AccessTokenHash.sha256Half) },
        Case("200, at_hash of another access token", .refused("provider_id_token_rejected", check: "jwt_at_hash")) {
            $0.idToken.claims["at_hash"] = .string(AccessTokenHash.sha256Half)
            $0.tokenFields["access_token"] = .string("access-2")
        },
        Case("400 invalid_grant", .refused("provider_rejected", check: "invalid_grant", mentioning: "the code expired")) {
            $0.tokenStatus = 400
            $0.tokenRawBody = #"{"error":"invalid_grant","error_description":"the code expired"}"#
        },
        Case("401 invalid_client", .refused("provider_rejected", check: "invalid_client")) {
            $0.tokenStatus = 401
            $0.tokenRawBody = #"{"error":"invalid_client"}"#
        },
        Case("400 without an OAuth error", invalid("HTTP 400")) {
            $0.tokenStatus = 400
            $0.tokenRawBody = "bad request"
        },
        Case("503", .refused("provider_unavailable", check: "HTTP 503")) { $0.tokenStatus = 503 },
        Case("429", .refused("provider_unavailable", check: "HTTP 429")) { $0.tokenStatus = 429 },
        Case("500 with an OAuth error", .refused("provider_unavailable", check: "HTTP 500")) {
            $0.tokenStatus = 500
            $0.tokenRawBody = #"{"error":"server_error"}"#
        },
    ]
}

@Suite struct TokenEndpointTests {
    @Test("token endpoint answers", arguments: Case.tokenAnswers)
    func tokenAnswer(_ row: Case) async throws {
        try await Harness.run(row.setup) { harness in
            let identity = await row.expected.verify { () async throws(UpstreamError) in try await harness.signIn() }
            #expect(harness.double.hits(.token) == 1)
            if let identity { #expect(identity.subject == "user-1") }
            // Userinfo is only asked once the tokens are in hand and the id_token verified.
            #expect(harness.double.hits(.userinfo) == (identity == nil ? 0 : 1))
        }
    }

    /// The form fields of the last token request, and its Authorization header.
    private func tokenRequest(_ harness: Harness) throws -> (form: FormParameters, authorization: String?) {
        let request = try #require(harness.double.lastRequest(.token))
        return (try #require(FormParameters(encoded: request.body)), request.authorization)
    }

    /// The provider's own words reach the app's redirect: its error and description are cut (64 and
    /// 200 characters), as /callback cuts the description it is given.
    @Test func theProvidersRefusalIsCutBeforeItReachesTheApp() {
        let refusal = UpstreamError.rejected(error: String(repeating: "e", count: 5000), description: String(repeating: "x", count: 5000))
        #expect(refusal.description.contains(String(repeating: "x", count: 200) + ")"))
        #expect(!refusal.description.contains(String(repeating: "x", count: 201)))
        #expect(!refusal.description.contains(String(repeating: "e", count: 65)))
    }

    @Test func clientSecretPostSendsTheSecretInTheForm() async throws {
        try await Harness.run { harness in
            _ = try await harness.signIn()
            let (form, authorization) = try tokenRequest(harness)
            #expect(authorization == nil)
            #expect(form["grant_type"] == "authorization_code")
            #expect(form["code"] == "code-1")
            #expect(form["redirect_uri"] == "https://relais.example/callback")
            #expect(form["code_verifier"] == "verifier-1")
            #expect(form["client_id"] == TestKeys.clientID)
            #expect(form["client_secret"] == TestKeys.clientSecret)
        }
    }

    @Test func clientSecretBasicFormEncodesBothPartsBeforeBase64() async throws {
        let clientID = "relais client:1"
        try await Harness.run({
            $0.settings.clientID = clientID
            $0.settings.clientAuthentication = .clientSecretBasic
            $0.idToken.claims["aud"] = .string(clientID)
        }) { harness in
            _ = try await harness.signIn()
            let (form, authorization) = try tokenRequest(harness)
            #expect(authorization == "Basic " + Base64.encode(Array("relais+client%3A1:\(TestKeys.clientSecret)".utf8)))
            #expect(form["client_secret"] == nil)
            #expect(form["client_id"] == nil)
        }
    }

    @Test func privateKeyJWTSignsAShortLivedAssertionForTheTokenEndpoint() async throws {
        try await Harness.run({
            $0.settings.clientAuthentication = .privateKeyJWT
            $0.settings.clientKey = TestKeys.clientKey
        }) { harness in
            _ = try await harness.signIn()
            let (form, authorization) = try tokenRequest(harness)
            #expect(authorization == nil)
            #expect(form["client_secret"] == nil)
            #expect(form["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
            let assertion = try JWS.parse(try #require(form["client_assertion"]))
            try assertion.verify(with: TestKeys.publicHalf(TestKeys.clientKey))
            var policy = ClaimsPolicy(issuer: TestKeys.clientID, audience: harness.scenario.issuer + "/token", now: { harness.clock.now })
            policy.requireIssuedAt = true
            policy.requiredClaims = ["jti"]
            let claims = try policy.validate(assertion)
            #expect(claims.subject == TestKeys.clientID)
            #expect(claims.expiration == Harness.start + 60)
        }
    }

    @Test func privateKeyJWTWithoutAKeyIsRefusedBeforeAnyRequest() async throws {
        try await Harness.run({ $0.settings.clientAuthentication = .privateKeyJWT }) { harness in
            await invalid("no client key").verify { () async throws(UpstreamError) in try await harness.signIn() }
            #expect(harness.double.hits(.token) == 0)
        }
    }
}
