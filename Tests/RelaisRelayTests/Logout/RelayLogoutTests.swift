import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// `/revoke` and `/logout` through the relay's routes on the manual clock: what ends a session,
/// and what must not.
@Suite(.tags(.fast)) struct RelayLogoutTests {
    typealias Route = RelayRouteTests
    typealias Cross = RelayCrossSiteTests
    typealias DPoP = RelayDPoPTests

    static func revoke(_ client: any TestClientProtocol, _ token: String, hint: String) async throws -> TestResponse {
        try await client.execute(
            uri: "/revoke", method: .post, headers: Route.formHeaders, body: Route.form([("client_id", "app"), ("token", token), ("token_type_hint", hint)]))
    }

    static func sid(of tokens: [String: JSONValue]) throws -> String {
        let access = try #require(tokens["access_token"]?.stringValue)
        return try #require(try DPoP.claims(access)["sid"]?.stringValue)
    }

    /// RFC 7009 §2.1: the hint only orders the lookups; a token of the other type is still found.
    @Test func aWrongTokenTypeHintStillRevokes() async throws {
        let fixture = Cross.fixture()
        try await fixture.test { client in
            for (kind, hint) in [("refresh_token", "access_token"), ("access_token", "refresh_token")] {
                let tokens = try await Cross.tokens(fixture, client)
                let sid = try Self.sid(of: tokens)
                let revoked = try await Self.revoke(client, try #require(tokens[kind]?.stringValue), hint: hint)
                #expect(revoked.status == .ok, "\(kind)")
                #expect(try await fixture.sessions.session(sid) == nil, "a \(kind) sent with token_type_hint=\(hint) left its session live")
            }
        }
    }

    /// `POST /logout` with a token minted for an API only is refused, as `/sessions` refuses it:
    /// the API that received the person's token cannot end their session.
    @Test func anAPIsTokenCannotLogOut() async throws {
        let fixture = Cross.fixture()
        try await fixture.test { client in
            let access = try #require(try await Cross.tokens(fixture, client)["access_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(access)["sid"]?.stringValue)
            let forAnAPI = try await RelayResourceTests.resigned(access, fixture) { $0["aud"] = .string("orders-api") }
            let refused = try await client.execute(uri: "/logout", method: .post, headers: RelayResourceTests.bearer(forAnAPI))
            #expect(refused.status == .unauthorized && refused.headers[.wwwAuthenticate]?.contains(#"error="invalid_token""#) == true)
            #expect(try await fixture.sessions.session(sid) != nil, "a token for an API ended the session")
            #expect(try await client.execute(uri: "/logout", method: .post, headers: RelayResourceTests.bearer(access)).status == .noContent)
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// RFC 6749 §3.1: a parameter given twice is refused, never read as its first value.
    @Test func aRepeatedParameterAtLogoutIsRefused() async throws {
        let fixture = Cross.fixture()
        try await fixture.test { client in
            let tokens = try await Cross.tokens(fixture, client)
            let refresh = try #require(tokens["refresh_token"]?.stringValue)
            let sid = try Self.sid(of: tokens)
            for fields in [
                [("client_id", "app"), ("client_id", "other"), ("refresh_token", refresh)], [("client_id", "app"), ("refresh_token", refresh), ("refresh_token", "x")],
            ] {
                let refused = try await client.execute(uri: "/logout", method: .post, headers: Route.formHeaders, body: Route.form(fields))
                #expect(refused.status == .badRequest && Route.json(refused)["error"] == .string("invalid_request"), "\(fields.map(\.0))")
            }
            #expect(try await fixture.sessions.session(sid) != nil, "a request with a repeated parameter ended the session")
        }
    }

    /// A sibling subdomain (`Sec-Fetch-Site: same-site`) is another party: it gets the
    /// confirmation page, as a cross-site link does, and the session lives on.
    @Test func aLogoutFromASiblingSubdomainAsksFirst() async throws {
        let fixture = Cross.fixture()
        try await fixture.test { client in
            let idToken = try #require(try await Cross.tokens(fixture, client)["id_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(idToken)["sid"]?.stringValue)
            let asked = try await Cross.logout(client, idToken: idToken, headers: [Cross.site: "same-site"])
            #expect(asked.status == .ok && String(buffer: asked.body).contains("id=\"logout-confirm\""))
            #expect(try await fixture.sessions.session(sid) != nil, "a sibling subdomain ended the session without asking")
        }
    }
}
