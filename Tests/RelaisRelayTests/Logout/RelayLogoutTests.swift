import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisConfig
import RelaisHTTPClient
import RelaisJOSE
import RelaisTestSupport
import Synchronization
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
            // Nor in the refresh_token field, nor at /revoke: a token minted for an API alone names
            // no session there either (/revoke answers 200 whatever it found, RFC 7009 §2.2).
            let viaField = try await client.execute(
                uri: "/logout", method: .post, headers: Route.formHeaders, body: Route.form([("client_id", "app"), ("refresh_token", forAnAPI)]))
            #expect(viaField.status == .badRequest)
            let viaRevoke = try await client.execute(
                uri: "/revoke", method: .post, headers: Route.formHeaders, body: Route.form([("client_id", "app"), ("token", forAnAPI)]))
            #expect(viaRevoke.status == .ok)
            #expect(try await fixture.sessions.session(sid) != nil, "a token for an API ended the session through refresh_token or /revoke")
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

    /// RP-Initiated Logout 1.0 §2: the end_session_endpoint takes POST. A browser's form (no
    /// access token, no refresh_token) is the browser logout: the same checks, answered in HTML.
    @Test func aBrowsersFormPostedToLogoutSignsOut() async throws {
        let fixture = Cross.fixture()
        try await fixture.test { client in
            func post(_ fields: [(String, String)], site: String) async throws -> TestResponse {
                var headers = Route.formHeaders
                headers[Cross.site] = site
                return try await client.execute(uri: "/logout", method: .post, headers: headers, body: Route.form(fields))
            }
            let idToken = try #require(try await Cross.tokens(fixture, client)["id_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(idToken)["sid"]?.stringValue)
            let fields = [("id_token_hint", idToken), ("post_logout_redirect_uri", Cross.loggedOut), ("state", "st")]
            // From another site: the confirmation page, and the session lives on.
            let asked = try await post(fields, site: "cross-site")
            #expect(asked.status == .ok && String(buffer: asked.body).contains("id=\"logout-confirm\""))
            #expect(try await fixture.sessions.session(sid) != nil)
            // A refusal is a page for the person, not JSON.
            let refused = try await post([("post_logout_redirect_uri", Cross.loggedOut)], site: "none")
            #expect(refused.status == .badRequest && refused.headers[.contentType]?.hasPrefix("text/html") == true)
            #expect(String(buffer: refused.body).contains(#"id="error-code">unknown_client<"#))
            let done = try await post(fields, site: "none")
            #expect(done.status == .found && done.headers[.location] == Cross.loggedOut + "?state=st", "\(done.status)")
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// post_logout_redirect_uri is optional (RP-Initiated Logout §2): without it the session named
    /// by the hint ends all the same, and a page says the person is signed out.
    @Test func aLogoutWithoutRedirectEndsTheSessionOnAPage() async throws {
        let fixture = Cross.fixture()
        try await fixture.test { client in
            let idToken = try #require(try await Cross.tokens(fixture, client)["id_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(idToken)["sid"]?.stringValue)
            let query = FormParameters.encode([("id_token_hint", idToken)])
            let page = try await client.execute(uri: "/logout?" + query, method: .get, headers: [.acceptLanguage: "en"])
            #expect(page.status == .ok && String(buffer: page.body).contains(#"<h1 id="logged-out">You are signed out</h1>"#))
            #expect(try await fixture.sessions.session(sid) == nil, "the session named by the hint lives on")
            let french = try await client.execute(uri: "/logout?client_id=app", method: .get, headers: [.acceptLanguage: "fr"])
            #expect(french.status == .ok && String(buffer: french.body).contains("Vous êtes déconnecté"))
        }
    }

    // MARK: - After the commit, clean-up

    /// The operator's revocation: a person's index that cannot be trimmed never stops their other
    /// sessions from ending, nor turns the answer into an error.
    @Test func anIndexThatCannotBeTrimmedStopsNoAdminRevocation() async throws {
        let fixture = Route.Fixture(
            { $0.adminToken = RelayUserSessionTests.adminToken },
            serving: { InterposedStore(base: $0, failing: { operation, _ in operation.hasPrefix("setRemove(") }) })
        try await fixture.test { client in
            let first = try await RelayUserSessionTests.signIn(fixture, client), second = try await RelayUserSessionTests.signIn(fixture, client)
            var headers = Route.formHeaders
            headers[.authorization] = "Bearer " + RelayUserSessionTests.adminToken
            let done = try await client.execute(uri: "/admin/sessions/revoke", method: .post, headers: headers, body: Route.form([("sub", "sub-1")]))
            #expect(done.status == .ok && Route.json(done)["revoked"] == .number(2), "\(done.status) \(Route.json(done))")
            #expect(try await fixture.sessions.session(first.sid) == nil)
            #expect(try await fixture.sessions.session(second.sid) == nil)
        }
    }

    /// Once GET /logout has ended the session, a store that cannot save the provider's round trip
    /// sends the person back to the app, signed out, never to an error page.
    @Test func aLogoutThatCannotBeSavedStillGoesBackToTheApp() async throws {
        let failing = Mutex(false)
        let fixture = Route.Fixture(
            { configuration in
                configuration.apps[0].postLogoutRedirectURIs = [Cross.loggedOut]
                configuration.providers[0].discovery = false
                configuration.providers[0].authorizationEndpoint = "https://provider.example/authorize"
                configuration.providers[0].tokenEndpoint = "https://provider.example/token"
                configuration.providers[0].endSessionEndpoint = "https://provider.example/logout"
            },
            serving: { InterposedStore(base: $0, failing: { operation, key in failing.withLock { $0 } && operation.hasPrefix("set(") && key.hasPrefix("logout:") }) })
        try await fixture.test { client in
            // The store answering: through the provider's end-session endpoint.
            let through = try await Cross.logout(client, idToken: try #require(try await Cross.tokens(fixture, client)["id_token"]?.stringValue))
            #expect(through.status == .found && through.headers[.location]?.hasPrefix("https://provider.example/logout?") == true)
            failing.withLock { $0 = true }
            let idToken = try #require(try await Cross.tokens(fixture, client)["id_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(idToken)["sid"]?.stringValue)
            let back = try await Cross.logout(client, idToken: idToken)
            #expect(back.status == .found && back.headers[.location] == Cross.loggedOut + "?state=st", "\(back.status)")
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    /// Anyone can post a forged logout token, and checking one may fetch the provider's keys:
    /// /backchannel-logout counts against the client address's rate limit first.
    /// A provider may send many logout tokens at once from one address: past the per-address limit
    /// of the sign-in routes, each is still heard (a forged one still refused on its own merits).
    @Test func backchannelLogoutIsNotLimitedByAddress() async throws {
        let fixture = Route.Fixture {
            $0.rateLimit.perIP = 2
            $0.providers[0].backchannelLogout = true
        }
        try await fixture.test { client in
            let forged = Route.form([("logout_token", "eyJhbGciOiJFUzI1NiJ9.eyJpc3MiOiJ4In0.c2ln")])
            for _ in 0..<5 {
                let refused = try await client.execute(uri: "/backchannel-logout", method: .post, headers: Route.formHeaders, body: forged)
                #expect(refused.status == .badRequest && Route.json(refused)["error"] == .string("invalid_request"))
            }
        }
    }
}
