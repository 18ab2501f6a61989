import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisCrypto
import RelaisJOSE
@testable import RelaisRelay
import Testing

/// How `/auth`, `/userinfo` and `/introspect` read the credentials they are given: on the bytes,
/// since a gateway sends them with every request, and refusing what they cannot read.
@Suite struct ResourceCredentialTests {
    @Test func theAuthorizationSchemeIsReadCaseInsensitivelyAndTheTokenTrimmed() {
        #expect(BearerAuthenticator.credentials("Bearer abc")! == (false, "abc"))
        #expect(BearerAuthenticator.credentials("bEaReR  abc  ")! == (false, "abc"))
        #expect(BearerAuthenticator.credentials("DPoP abc")! == (true, "abc"))
        #expect(BearerAuthenticator.credentials("dpop abc")! == (true, "abc"))
        for refused in ["Bearer", "Bearer ", "Bearer    ", "Basic YTpi", "Bearerx abc", "Bear abc", "DPoPs abc", " Bearer abc", "Bearér abc", ""] {
            #expect(BearerAuthenticator.credentials(refused) == nil, "\(refused)")
        }
    }

    @Test func basicCredentialsAreFormDecodedOnBothSides() {
        let encoded = Base64.encode(Array("orders%3Aapi:s%C3%A9cret:with colon".utf8))
        let read = IntrospectRoute.basicCredentials("basic " + encoded)
        #expect(read?.id == "orders:api" && read?.secret == "sécret:with colon")
        #expect(IntrospectRoute.basicCredentials("Basic " + Base64.encode(Array("a:".utf8)))! == ("a", ""))
        // No colon, not base64, not UTF-8, an undecodable escape, another scheme.
        for refused in ["Basic " + Base64.encode(Array("nocolon".utf8)), "Basic ***", "Basic " + Base64.encode([0xFF, 0x3A, 0x61]), "Basic " + Base64.encode(Array("a%zz:b".utf8)), "Bearer YTpi"] {
            #expect(IntrospectRoute.basicCredentials(refused) == nil, "\(refused)")
        }
    }

    @Test func standardBase64PaddingIsOnlyAcceptedAtTheEnd() {
        #expect(Base64.decode("YQ==") == [0x61] && Base64.decode("YQ=") == [0x61] && Base64.decode("YQ") == [0x61])
        #expect(Base64.decode("YWJj") == Array("abc".utf8))
        for refused in ["Y=Q=", "=YQ", "YQ===", "YW=Jj", "YQ==\n"] {
            #expect(Base64.decode(refused) == nil, "\(refused)")
        }
    }

    /// The answer is the token's own, serialised once when it was first verified; a Basic header
    /// that cannot be read fails the caller even when the form carries valid credentials.
    @Test func introspectionAnswersFromTheVerifiedTokenAndFailsClosedOnAnUnreadableBasicHeader() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test { client in
            let token = try await RelayRouteTests.accessToken(fixture, client)
            func introspect(_ authorization: String?, _ fields: [(String, String)]) async throws -> TestResponse {
                var headers = RelayRouteTests.formHeaders
                if let authorization { headers[.authorization] = authorization }
                return try await client.execute(uri: "/introspect", method: .post, headers: headers, body: RelayRouteTests.form(fields))
            }
            let basic = "Basic " + Base64.encode(Array("api:api-secret-0123456789-0123456789".utf8))
            for _ in 0..<2 {  // first verification, then the cached token
                let answer = RelayRouteTests.json(try await introspect(basic, [("token", token)]))
                let payload = try #require(JSONValue.object(from: Base64URL.decode(String(token.split(separator: ".")[1]))!))
                #expect(answer["active"] == .bool(true) && answer["token_type"] == .string("Bearer"))
                for name in ["sub", "client_id", "scope", "exp", "iat", "iss", "aud", "acr", "sid", "jti", "idp"] {
                    #expect(answer[name] != nil && answer[name] == payload[name], "\(name)")
                }
                #expect(answer["nonce"] == nil && answer["auth_time"] == nil)
            }
            let formOnly = [("token", token), ("client_id", "api"), ("client_secret", "api-secret-0123456789-0123456789")]
            #expect(RelayRouteTests.json(try await introspect(nil, formOnly))["active"] == .bool(true))
            let unreadable = try await introspect("Basic ***", formOnly)
            #expect(unreadable.status == .unauthorized && RelayRouteTests.json(unreadable)["error"] == .string("invalid_client"))
            let wrong = try await introspect("Basic " + Base64.encode(Array("api:wrong".utf8)), formOnly)
            #expect(wrong.status == .unauthorized)
            // Not a Relais access token: inactive, however it looks.
            for other in ["refresh.token", "a.b.c", String(token.dropLast(2))] {
                #expect(String(buffer: try await introspect(basic, [("token", other)]).body) == #"{"active":false}"#, "\(other)")
            }
        }
    }
}
