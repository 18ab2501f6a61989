import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// What APIs and gateways rely on: a token opens only what it was minted for.
@Suite(.tags(.fast)) struct RelayResourceTests {
    typealias Route = RelayRouteTests

    /// The claims of an access token the fixture minted, changed and signed again with Relais' key:
    /// a token Relais could have minted for another app or API.
    static func resigned(_ token: String, _ fixture: Route.Fixture, _ change: (inout [String: JSONValue]) -> Void) async throws -> String {
        let keys = try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions).ring
        var claims = try #require(JSONValue.object(from: try JWS.parse(token).payload))
        change(&claims)
        return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: keys.activeSigningKey, algorithm: keys.activeAlgorithm, extraHeader: ["typ": .string("at+jwt")])
    }

    static func bearer(_ token: String) -> HTTPFields { [.authorization: "Bearer \(token)"] }

    @Test func userinfoTakesOnlyTokensMintedForRelais() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let token = try await Route.accessToken(fixture, client)
            #expect(try await client.execute(uri: "/userinfo", method: .get, headers: Self.bearer(token)).status == .ok)
            let forAnAPI = try await Self.resigned(token, fixture) { $0["aud"] = .string("orders-api") }
            let refused = try await client.execute(uri: "/userinfo", method: .get, headers: Self.bearer(forAnAPI))
            #expect(refused.status == .unauthorized && refused.headers[.wwwAuthenticate]?.contains(#"error="invalid_token""#) == true)
            #expect(Route.json(refused)["error_description"] == .string("the access token is not for Relais' /userinfo (aud)"))
            // The audience first: a step-up asked of a token that is not for /userinfo at all
            // would send the app to sign in again for nothing.
            let asked = try await client.execute(uri: "/userinfo?acr=eidas3", method: .get, headers: Self.bearer(forAnAPI))
            #expect(asked.status == .unauthorized && Route.json(asked)["error"] == .string("invalid_token"))
        }
    }

    @Test func forwardAuthChecksTheAudienceTheGatewayNames() async throws {
        let fixture = Route.Fixture {
            $0.apps[0].audiences = ["orders-api"]
            $0.forwardAuth.audiences = ["payments-api", "ledger-api"]
        }
        try await fixture.test { client in
            let token = try await Route.accessToken(fixture, client)
            let claims = try #require(JSONValue.object(from: try JWS.parse(token).payload))
            #expect(claims["aud"] == .array([.string("orders-api"), .string(Route.issuer)]))
            for (path, status) in [
                ("/auth?aud=orders-api", HTTPResponse.Status.ok), ("/auth?aud=payments-api+orders-api", .ok), ("/auth?aud=payments-api", .unauthorized),
                // Without ?aud=, forward_auth.audiences applies; under /auth/… the client's query is ignored.
                ("/auth", .unauthorized), ("/auth/orders?aud=orders-api", .unauthorized), ("/auth/?aud=orders-api", .unauthorized),
            ] {
                let response = try await client.execute(uri: path, method: .get, headers: Self.bearer(token))
                #expect(response.status == status, "\(path)")
                if status == .unauthorized {
                    #expect(Route.json(response)["error_description"] == .string("the access token is not for this API (aud)"), "\(path)")
                    #expect(response.headers[.wwwAuthenticate]?.contains(#"error="invalid_token""#) == true, "\(path)")
                }
            }
            let forPayments = try await Self.resigned(token, fixture) { $0["aud"] = .string("payments-api") }
            #expect(try await client.execute(uri: "/auth/pay", method: .get, headers: Self.bearer(forPayments)).status == .ok)
        }
    }

    /// A gateway copies Relais' identity headers over the client's: each is answered on every 200,
    /// empty when the token has no value for it, so a forged one never survives.
    @Test func everyIdentityHeaderIsAnsweredEvenWhenEmpty() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let token = try await Route.accessToken(fixture, client)
            let withoutACR = try await Self.resigned(token, fixture) { $0["acr"] = nil }
            let response = try await client.execute(uri: "/auth", method: .get, headers: Self.bearer(withoutACR))
            #expect(response.status == .ok)
            for name in ["X-Relais-Sub", "X-Relais-Client", "X-Relais-Acr", "X-Relais-Scope", "X-Relais-Session"] {
                #expect(response.headers[HTTPField.Name(name)!] != nil, "\(name)")
            }
            #expect(response.headers[HTTPField.Name("X-Relais-Acr")!] == "")
        }
    }

    /// RFC 7009 §2.1: revoking an access token long expired still ends the grant it belongs to.
    @Test func revokingAnExpiredAccessTokenEndsItsSession() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let token = try await Route.accessToken(fixture, client)
            let sid = try #require(JSONValue.object(from: try JWS.parse(token).payload)?["sid"]?.stringValue)
            fixture.clock.advance(by: .seconds(10 * 60))
            #expect(try await fixture.sessions.session(sid) != nil)
            let expired = try await client.execute(uri: "/userinfo", method: .get, headers: Self.bearer(token))
            #expect(Route.json(expired)["error_description"] == .string("the access token has expired"))
            // Another app's revocation does nothing.
            let other = try await client.execute(
                uri: "/revoke", method: .post, headers: Route.formHeaders, body: Route.form([("token", token), ("client_id", "other")])
            )
            #expect(other.status == .unauthorized)
            #expect(try await fixture.sessions.session(sid) != nil)
            let revoke = try await client.execute(
                uri: "/revoke", method: .post, headers: Route.formHeaders,
                body: Route.form([("token", token), ("client_id", "app"), ("token_type_hint", "access_token")])
            )
            #expect(revoke.status == .ok)
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }
}
