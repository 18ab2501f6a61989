import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// Findings 3 and 8 of the review: what another site can make a browser do to a person's sessions.
/// A session code opened cross-site, or over another person's web session, signs nobody in without
/// asking; a logout needs a fresh hint for the session it names and asks when another site sent
/// the person; revoking or logging out with a DPoP-bound refresh token takes a proof by its key.
@Suite(.tags(.fast)) struct RelayCrossSiteTests {
    typealias Route = RelayRouteTests
    typealias DPoP = RelayDPoPTests
    typealias Codes = RelaySessionCodeTests

    static let site = SecFetchSite.header
    static let cookieHeader = HTTPField.Name("Cookie")!
    static let loggedOut = "https://app.example.fr/logged-out"

    static func fixture() -> Route.Fixture {
        Route.Fixture { configuration in
            configuration.apps[0].webTargets = Codes.targets
            configuration.apps[0].postLogoutRedirectURIs = [loggedOut]
        }
    }

    /// A signed-in person (`subject`): their tokens.
    static func tokens(_ fixture: Route.Fixture, _ client: any TestClientProtocol, subject: String = "sub-1", headers: HTTPFields = [:]) async throws -> [String: JSONValue] {
        Route.json(try await DPoP.redeem(fixture, client, subject: subject, headers: headers))
    }

    static func code(_ client: any TestClientProtocol, _ tokens: [String: JSONValue]) async throws -> String {
        let access = try #require(tokens["access_token"]?.stringValue)
        return try #require(Route.json(try await Codes.sessionCode(client, access, refresh: tokens["refresh_token"]?.stringValue))["session_code"]?.stringValue)
    }

    static func open(_ client: any TestClientProtocol, _ code: String, headers: HTTPFields) async throws -> TestResponse {
        try await client.execute(uri: "/session?" + FormParameters.encode([("code", code)]), method: .get, headers: headers)
    }

    static func confirm(_ client: any TestClientProtocol, _ code: String, headers: HTTPFields) async throws -> TestResponse {
        var all = Route.formHeaders
        all.append(contentsOf: headers)
        return try await client.execute(uri: "/session", method: .post, headers: all, body: Route.form([("code", code)]))
    }

    @Test func aSessionCodeOpenedFromAnotherSiteSignsNobodyIn() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let code = try await Self.code(client, try await Self.tokens(fixture, client))
            // Another site, a sibling subdomain of Relais' (same-site) included: another party too.
            for site in ["cross-site", "same-site"] {
                let refused = try await Self.open(client, code, headers: [Self.site: site])
                #expect(refused.status == .badRequest && refused.headers[.setCookie] == nil, "\(site)")
                #expect(String(buffer: refused.body).contains("Ce lien a été ouvert depuis un autre site."), "\(site)")
            }
            // Refused before anything was consumed: the app's own webview (Sec-Fetch-Site: none) still opens it.
            let opened = try await Self.open(client, code, headers: [Self.site: "none"])
            #expect(opened.status == .seeOther && opened.headers[.setCookie] != nil)
        }
    }

    @Test func anotherPersonsWebSessionIsNeverReplacedWithoutAsking() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            // This browser's person.
            let mine = try Codes.cookie(try await Self.open(client, try await Self.code(client, try await Self.tokens(fixture, client)), headers: [:]))
            // The same person's new code replaces the web session without a question.
            let same = try await Self.open(
                client, try await Self.code(client, try await Self.tokens(fixture, client)), headers: [Self.cookieHeader: "\(RelayRouteTests.sessionCookie)=\(mine)"])
            #expect(same.status == .seeOther && same.headers[.setCookie] != nil)
            let withMine: HTTPFields = [Self.cookieHeader: "\(RelayRouteTests.sessionCookie)=\(try Codes.cookie(same))"]

            // An attacker's code, in a link that is not cross-site (a webview, an old browser).
            let theirs = try await Self.code(client, try await Self.tokens(fixture, client, subject: "sub-attacker"))
            let asked = try await Self.open(client, theirs, headers: withMine)
            #expect(asked.status == .ok && asked.headers[.setCookie] == nil)
            let page = String(buffer: asked.body)
            #expect(page.contains("id=\"signed-in-as\"") && page.contains("id=\"link-signs-in\"") && page.contains("id=\"session-switch\""))
            // Forms from elsewhere are refused, and leave the code as it was.
            #expect(try await Self.confirm(client, theirs, headers: [Self.site: "cross-site"]).status == .badRequest)
            #expect(try await Self.confirm(client, theirs, headers: [:]).status == .badRequest)
            #expect(try await Self.confirm(client, theirs, headers: [.origin: "https://evil.example"]).status == .badRequest)
            // The person's answer from Relais' page takes the code, once.
            let switched = try await Self.confirm(client, theirs, headers: [Self.site: "same-origin"])
            #expect(switched.status == .seeOther && switched.headers[.setCookie] != nil)
            #expect(try await Self.confirm(client, theirs, headers: [Self.site: "same-origin"]).status == .badRequest)
            // A browser without Fetch Metadata: its Origin must be Relais'.
            let another = try await Self.code(client, try await Self.tokens(fixture, client, subject: "sub-attacker"))
            #expect(try await Self.confirm(client, another, headers: [.origin: SecFetchSite.origin(of: Route.issuer)]).status == .seeOther)
        }
    }

    /// A new web session in a browser closes the one its cookie replaces (another person's after
    /// "Continue as", or the same person's): a copy of the old cookie opens nothing any more.
    @Test func aReplacedWebSessionCloses() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let first = try Codes.cookie(try await Self.open(client, try await Self.code(client, try await Self.tokens(fixture, client)), headers: [:]))
            let again = try await Self.open(
                client, try await Self.code(client, try await Self.tokens(fixture, client)), headers: [Self.cookieHeader: "\(RelayRouteTests.sessionCookie)=\(first)"])
            let second = try Codes.cookie(again)
            #expect(try await !fixture.sessions.webSessionIsOpen(first), "the same person's earlier web session is still open")
            let theirs = try await Self.code(client, try await Self.tokens(fixture, client, subject: "sub-2"))
            var headers: HTTPFields = [Self.site: "same-origin"]
            headers[Self.cookieHeader] = "\(RelayRouteTests.sessionCookie)=\(second)"
            let switched = try await Self.confirm(client, theirs, headers: headers)
            #expect(switched.status == .seeOther)
            #expect(try await !fixture.sessions.webSessionIsOpen(second), "the previous person's web session is still open after the switch")
            #expect(try await fixture.sessions.webSessionIsOpen(try Codes.cookie(switched)))
        }
    }

    static func logout(_ client: any TestClientProtocol, idToken: String, headers: HTTPFields = [:]) async throws -> TestResponse {
        let query = FormParameters.encode([("client_id", "app"), ("post_logout_redirect_uri", loggedOut), ("state", "st"), ("id_token_hint", idToken)])
        return try await client.execute(uri: "/logout?" + query, method: .get, headers: headers)
    }

    @Test func aLogoutFromAnotherSiteAsksFirst() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let tokens = try await Self.tokens(fixture, client)
            let idToken = try #require(tokens["id_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(idToken)["sid"]?.stringValue)
            let asked = try await Self.logout(client, idToken: idToken, headers: [Self.site: "cross-site"])
            #expect(asked.status == .ok && String(buffer: asked.body).contains("id=\"logout-confirm\""))
            #expect(try await fixture.sessions.session(sid) != nil, "a cross-site link ended the session without asking")
            var confirm = Route.formHeaders
            confirm[Self.site] = "cross-site"
            let fields = [("client_id", "app"), ("post_logout_redirect_uri", Self.loggedOut), ("state", "st"), ("id_token_hint", idToken)]
            #expect(try await client.execute(uri: "/logout/confirm", method: .post, headers: confirm, body: Route.form(fields)).status == .badRequest)
            #expect(try await fixture.sessions.session(sid) != nil)
            confirm[Self.site] = "same-origin"
            let done = try await client.execute(uri: "/logout/confirm", method: .post, headers: confirm, body: Route.form(fields))
            #expect(done.status == .found || done.status == .seeOther, "\(done.status)")
            #expect(done.headers[.location]?.hasPrefix(Self.loggedOut) == true)
            #expect(try await fixture.sessions.session(sid) == nil)
        }
        // The app's own navigation (Sec-Fetch-Site: none, or none sent) signs out at once.
        try await fixture.test { client in
            let idToken = try #require(try await Self.tokens(fixture, client)["id_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(idToken)["sid"]?.stringValue)
            let done = try await Self.logout(client, idToken: idToken, headers: [Self.site: "none"])
            #expect(done.headers[.location]?.hasPrefix(Self.loggedOut) == true)
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }

    @Test func aLogoutHintMustBeRecentAndOfTheSessionItNames() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let tokens = try await Self.tokens(fixture, client)
            let idToken = try #require(tokens["id_token"]?.stringValue)
            var claims = try DPoP.claims(idToken)
            let sid = try #require(claims["sid"]?.stringValue)
            // Signed by Relais for this app, naming this live session, but for another person.
            let keys = try await RelayKeys.load(fixture.configuration.keys, store: fixture.sessions).ring
            claims["sub"] = .string("sub-somebody-else")
            let forged = try JWS.sign(payload: JSONValue.object(claims).serialized(), with: keys.activeSigningKey, algorithm: keys.activeAlgorithm)
            let refused = try await Self.logout(client, idToken: forged)
            #expect(refused.status == .badRequest && String(buffer: refused.body).contains("ne correspond pas à votre session"))
            #expect(try await fixture.sessions.session(sid) != nil)
            // Older than any session lives: refused, even though it still verifies.
            fixture.clock.advance(by: fixture.configuration.relay.sessionLifetime + .seconds(1))
            let old = try await Self.logout(client, idToken: idToken)
            #expect(old.status == .badRequest && String(buffer: old.body).contains("trop ancienne"))
        }
    }

    @Test func revokingOrLoggingOutWithABoundRefreshTokenTakesAProof() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let key = try DPoP.AppKey(fixture.clock)
            let tokens = try await Self.tokens(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", DPoP.tokenURL)])
            let refresh = try #require(tokens["refresh_token"]?.stringValue)
            let access = try #require(tokens["access_token"]?.stringValue)
            let sid = try #require(try DPoP.claims(access)["sid"]?.stringValue)
            func revoke(_ proof: String?) async throws -> TestResponse {
                var headers = Route.formHeaders
                if let proof { headers[DPoPGuard.header] = proof }
                return try await client.execute(uri: "/revoke", method: .post, headers: headers, body: Route.form([("client_id", "app"), ("token", refresh)]))
            }
            let bare = try await revoke(nil)
            #expect(bare.status == .badRequest && Route.json(bare)["error"] == .string("invalid_dpop_proof"))
            let otherKey = try await revoke(try DPoP.AppKey(fixture.clock).proof("POST", Route.issuer + "/revoke"))
            #expect(Route.json(otherKey)["error"] == .string("invalid_dpop_proof"))
            // POST /logout with the refresh token: the same rule.
            let logout = try await client.execute(
                uri: "/logout", method: .post, headers: Route.formHeaders, body: Route.form([("client_id", "app"), ("refresh_token", refresh)])
            )
            #expect(Route.json(logout)["error"] == .string("invalid_dpop_proof"))
            #expect(try await fixture.sessions.session(sid) != nil, "a refusal ended the session")
            #expect(try await revoke(try key.proof("POST", Route.issuer + "/revoke")).status == .ok)
            #expect(try await fixture.sessions.session(sid) == nil)
        }
    }
}
