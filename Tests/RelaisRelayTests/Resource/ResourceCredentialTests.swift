import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisCrypto
import RelaisTestSupport
import Testing

@testable import RelaisJOSE
@testable import RelaisRelay

/// How `/auth`, `/userinfo` and `/introspect` read the credentials they are given: on the bytes,
/// since a gateway sends them with every request, and refusing what they cannot read.
@Suite(.tags(.fast)) struct ResourceCredentialTests {
    @Test func theAuthorizationSchemeIsReadCaseInsensitivelyAndTheTokenTrimmed() {
        #expect(BearerAuthenticator.credentials("Bearer abc")! == (false, "abc"))
        #expect(BearerAuthenticator.credentials("bEaReR  abc  ")! == (false, "abc"))
        #expect(BearerAuthenticator.credentials("DPoP abc")! == (true, "abc"))
        #expect(BearerAuthenticator.credentials("dpop abc")! == (true, "abc"))
        for refused in ["Bearer", "Bearer ", "Bearer    ", "Basic YTpi", "Bearerx abc", "Bear abc", "DPoPs abc", " Bearer abc", "Bearér abc", ""] {
            #expect(BearerAuthenticator.credentials(refused) == nil, "\(refused)")
        }
    }

    /// RFC 6750 §3.1: one method per request. Two Authorization headers are refused, not joined,
    /// also when the token in them was verified before (the in-memory answer does not apply).
    @Test func twoAuthorizationHeadersAreRefused() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test { client in
            let token = try await RelayRouteTests.accessToken(fixture, client)
            #expect(try await client.execute(uri: "/auth", method: .get, headers: [.authorization: "Bearer \(token)"]).status == .ok)
            var twice = HTTPFields()
            twice.append(HTTPField(name: .authorization, value: "Bearer \(token)"))
            twice.append(HTTPField(name: .authorization, value: "Bearer \(token)"))
            for uri in ["/auth", "/auth?session=0", "/userinfo"] {
                let response = try await client.execute(uri: uri, method: .get, headers: twice)
                #expect(response.status == .badRequest, "\(uri)")
                #expect(RelayRouteTests.json(response)["error"] == .string("invalid_request"), "\(uri)")
            }
        }
    }

    /// A gateway's repeated checks of one token are answered from memory: the same identity
    /// headers as the first, full check, and the same refusals for what the query asks.
    @Test func repeatedForwardAuthChecksAnswerAsTheFirst() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test { client in
            let token = try await RelayRouteTests.accessToken(fixture, client)
            let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
            func identity(_ response: TestResponse) -> [String] {
                response.headers.filter { $0.name.canonicalName.hasPrefix("x-relais-") || $0.name == .cacheControl }.map { "\($0.name)=\($0.value)" }
            }
            let first = try await client.execute(uri: "/auth", method: .get, headers: bearer)
            #expect(first.status == .ok && identity(first).count == 7 && first.headers[.contentLength] == "0")
            for _ in 0..<2 {
                let again = try await client.execute(uri: "/auth", method: .get, headers: bearer)
                #expect(again.status == .ok && identity(again) == identity(first))
            }
            try await Self.expectRefusals(
                client, bearer,
                [
                    ("/auth?scope=openid+orders", .forbidden, "insufficient_scope"), ("/auth?attested=1", .forbidden, "attestation_required"),
                    ("/auth?acr=eidas3", .unauthorized, "insufficient_user_authentication"), ("/auth?max_age=x", .badRequest, "invalid_request"),
                    ("/auth?via=other", .badRequest, "invalid_request"), ("/auth?aud=orders-api", .unauthorized, "invalid_token"),
                ])
            // The session known live a moment ago ends: the next check is refused at once.
            try await Self.expectEndedAfterRevoking(token, client, bearer, at: "/auth")
            // Without the session check the token alone still answers, until it expires.
            #expect(try await client.execute(uri: "/auth?session=0", method: .get, headers: bearer).status == .ok)
        }
    }

    /// `/userinfo` answered from memory (a body rendered before, its session known live) answers
    /// as the full path does, and leaves every requirement of a query to the full path: a step-up
    /// asked with `?acr=` or `?max_age=` is never answered from the body in memory.
    @Test func repeatedUserinfoCallsAnswerAsTheFirstAndKeepTheirRequirements() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test { client in
            let token = try await RelayRouteTests.accessToken(fixture, client)
            let bearer: HTTPFields = [.authorization: "Bearer \(token)"]
            let first = try await client.execute(uri: "/userinfo", method: .get, headers: bearer)
            #expect(first.status == .ok && first.headers[.cacheControl] == "no-store")
            for method in [HTTPRequest.Method.get, .post] {
                let again = try await client.execute(uri: "/userinfo", method: method, headers: bearer)
                #expect(again.status == .ok && again.body == first.body && again.headers[.cacheControl] == "no-store", "\(method)")
            }
            #expect(try await client.execute(uri: "/userinfo?acr=eidas1", method: .get, headers: bearer).status == .ok)
            try await Self.expectRefusals(
                client, bearer,
                [
                    ("/userinfo?acr=eidas3", .unauthorized, "insufficient_user_authentication"), ("/userinfo?max_age=x", .badRequest, "invalid_request"),
                    ("/userinfo?acr=eidas1&acr=eidas1", .badRequest, "invalid_request"),
                    // A requirement misspelt or of another form is refused, never dropped (as at /auth).
                    ("/userinfo?acr_values=eidas3", .badRequest, "invalid_request"), ("/userinfo?max-age=0", .badRequest, "invalid_request"),
                    ("/userinfo?max_age=+5", .badRequest, "invalid_request"), ("/userinfo?acr=", .badRequest, "invalid_request"),
                    ("/auth?max_age=+5", .badRequest, "invalid_request"),
                    // An acr that would end the challenge's quoted value early is no level at all.
                    ("/userinfo?acr=x%22,error=%22invalid_token", .badRequest, "invalid_request"),
                    ("/auth?acr=x%22,error=%22invalid_token", .badRequest, "invalid_request"), ("/auth?acr=x%5C", .badRequest, "invalid_request"),
                ])
            try await Self.expectEndedAfterRevoking(token, client, bearer, at: "/userinfo")
        }
    }

    /// POST /userinfo: a form body's `acr` and `max_age` hold as the query's do (and are never
    /// answered from the body in memory); anything else in it, a repeat across query and body, or
    /// a body that is not a form is refused, never ignored.
    @Test func aPostedUserinfoKeepsTheRequirementsOfItsForm() async throws {
        let fixture = RelayRouteTests.Fixture()
        try await fixture.test { client in
            let token = try await RelayRouteTests.accessToken(fixture, client)
            // Its body is now in memory.
            #expect(try await client.execute(uri: "/userinfo", method: .get, headers: [.authorization: "Bearer \(token)"]).status == .ok)
            var form = RelayRouteTests.formHeaders
            form[.authorization] = "Bearer \(token)"
            let cases: [(String, [(String, String)], HTTPResponse.Status, String?)] = [
                ("", [("acr", "eidas3")], .unauthorized, "insufficient_user_authentication"),
                ("", [("max_age", "x")], .badRequest, "invalid_request"),
                ("", [("access_token", token)], .badRequest, "invalid_request"),
                ("?acr=eidas1", [("acr", "eidas1")], .badRequest, "invalid_request"),
                ("", [("acr", "eidas1")], .ok, nil),
                ("", [], .ok, nil),
            ]
            for (query, fields, status, code) in cases {
                let response = try await client.execute(uri: "/userinfo" + query, method: .post, headers: form, body: RelayRouteTests.form(fields))
                #expect(response.status == status, "\(query) \(fields)")
                if let code { #expect(RelayRouteTests.json(response)["error"] == .string(code), "\(fields)") }
            }
            // A body-less POST may still name a type: nothing to read, nothing refused.
            let empty = try await client.execute(
                uri: "/userinfo", method: .post, headers: [.authorization: "Bearer \(token)", .contentType: "application/json", .contentLength: "0"])
            #expect(empty.status == .ok, "\(RelayRouteTests.json(empty))")
            let json = try await client.execute(
                uri: "/userinfo", method: .post, headers: [.authorization: "Bearer \(token)", .contentType: "application/json"], body: ByteBuffer(string: #"{"acr":"eidas3"}"#))
            #expect(json.status == .badRequest && RelayRouteTests.json(json)["error"] == .string("invalid_request"))
        }
    }

    /// Each request refused with its status and error code.
    static func expectRefusals(_ client: any TestClientProtocol, _ headers: HTTPFields, _ refusals: [(String, HTTPResponse.Status, String)]) async throws {
        for (uri, status, code) in refusals {
            let response = try await client.execute(uri: uri, method: .get, headers: headers)
            #expect(response.status == status && RelayRouteTests.json(response)["error"] == .string(code), "\(uri)")
        }
    }

    /// The token's session revoked: `uri` refuses it at once, with the Bearer challenge.
    static func expectEndedAfterRevoking(_ token: String, _ client: any TestClientProtocol, _ headers: HTTPFields, at uri: String) async throws {
        let revoke = try await client.execute(
            uri: "/revoke", method: .post, headers: RelayRouteTests.formHeaders, body: RelayRouteTests.form([("token", token), ("client_id", "app")])
        )
        #expect(revoke.status == .ok)
        let ended = try await client.execute(uri: uri, method: .get, headers: headers)
        #expect(ended.status == .unauthorized && RelayRouteTests.json(ended)["error_description"] == .string("the session has ended"), "\(uri)")
        #expect(ended.headers[.wwwAuthenticate]?.hasPrefix("Bearer") == true, "\(uri)")
    }

    /// A token's forward-auth headers are built once, and again only for other header names
    /// (a reload that renames them).
    @Test func aTokensForwardHeadersAreBuiltOncePerSetOfNames() {
        let claims = VerifiedClaims(claims: ["sub": .string("s"), "client_id": .string("app"), "sid": .string("sid"), "scope": .string("openid")])
        let token = BearerAuthenticator.AccessToken(subject: "s", clientID: "app", sid: "sid", claims: claims)
        var builds = 0
        func headers(_ names: [String]) -> HTTPFields {
            token.forwardHeaders(names: names.map { HTTPField.Name($0)! }) {
                builds += 1
                return HTTPFields(names.map { HTTPField(name: HTTPField.Name($0)!, value: "\(builds)") })
            }
        }
        #expect(headers(["X-A"]) == [HTTPField.Name("X-A")!: "1"])
        #expect(headers(["X-A"]) == [HTTPField.Name("X-A")!: "1"] && builds == 1)
        #expect(headers(["X-B"]) == [HTTPField.Name("X-B")!: "2"] && builds == 2)
    }

    @Test func basicCredentialsAreFormDecodedOnBothSides() {
        let encoded = Base64.encode(Array("orders%3Aapi:s%C3%A9cret:with colon".utf8))
        let read = IntrospectRoute.basicCredentials("basic " + encoded)
        #expect(read?.id == "orders:api" && read?.secret == "sécret:with colon")
        #expect(IntrospectRoute.basicCredentials("Basic " + Base64.encode(Array("a:".utf8)))! == ("a", ""))
        // No colon, not base64, not UTF-8, an undecodable escape, another scheme.
        for refused in [
            "Basic " + Base64.encode(Array("nocolon".utf8)), "Basic ***", "Basic " + Base64.encode([0xFF, 0x3A, 0x61]), "Basic " + Base64.encode(Array("a%zz:b".utf8)),
            "Bearer YTpi",
        ] {
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
