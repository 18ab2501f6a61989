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
}
