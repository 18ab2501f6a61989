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

/// Session codes: an app's tokens turned into a web session in its webview (`POST /session_code`,
/// `GET /session`), and that session's cookie at `/auth`. The cookie opens nothing else.
@Suite struct RelaySessionCodeTests {
    typealias Route = RelayRouteTests
    typealias DPoP = RelayDPoPTests

    static let targets = ["https://app.example.fr/documents", "https://app.example.fr/profile"]
    static let cookieHeader = HTTPField.Name("Cookie")!

    static func fixture(targets: [String] = targets) -> Route.Fixture {
        Route.Fixture { configuration in configuration.apps[0].webTargets = targets }
    }

    /// Signs in (a code redeemed at /token): the access and refresh tokens.
    static func signIn(_ fixture: Route.Fixture, _ client: any TestClientProtocol) async throws -> (access: String, refresh: String) {
        let tokens = Route.json(try await DPoP.redeem(fixture, client, headers: [:]))
        return (try #require(tokens["access_token"]?.stringValue), try #require(tokens["refresh_token"]?.stringValue))
    }

    /// `refresh`: the session's refresh token, which an unbound (Bearer) token needs beside it.
    static func sessionCode(_ client: any TestClientProtocol, _ access: String, refresh: String?, target: String? = nil) async throws -> TestResponse {
        var headers: HTTPFields = [.authorization: "Bearer " + access]
        var body = ByteBuffer()
        let fields = (target.map { [("target", $0)] } ?? []) + (refresh.map { [("refresh_token", $0)] } ?? [])
        if !fields.isEmpty {
            headers[.contentType] = "application/x-www-form-urlencoded"
            body = Route.form(fields)
        }
        return try await client.execute(uri: "/session_code", method: .post, headers: headers, body: body)
    }

    static func open(_ client: any TestClientProtocol, _ code: String) async throws -> TestResponse {
        try await client.execute(uri: "/session?" + FormParameters.encode([("code", code)]), method: .get)
    }

    /// The cookie's value from a Set-Cookie header.
    static func cookie(_ response: TestResponse) throws -> String {
        let setCookie = try #require(response.headers[.setCookie])
        let pair = try #require(setCookie.split(separator: ";").first)
        #expect(pair.hasPrefix(RelayRouteTests.sessionCookie + "="))
        return String(pair.dropFirst(RelayRouteTests.sessionCookie.count + 1))
    }

    static func auth(_ client: any TestClientProtocol, query: String, cookie: String?, token: String? = nil) async throws -> TestResponse {
        var headers: HTTPFields = [:]
        if let cookie { headers[cookieHeader] = "other=1; \(RelayRouteTests.sessionCookie)=\(cookie)" }
        if let token { headers[.authorization] = "Bearer " + token }
        return try await client.execute(uri: "/auth" + query, method: .get, headers: headers)
    }

    @Test(.tags(.fast)) func aCodeOpensOneWebSessionThatAuthAccepts() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let issued = try await Self.sessionCode(client, access, refresh: refresh)
            #expect(issued.status == .ok)
            #expect(issued.headers[.cacheControl] == "no-store")
            let body = Route.json(issued)
            let code = try #require(body["session_code"]?.stringValue)
            #expect(body["expires_in"] == .number(60))
            #expect(body["target"] == .string(Self.targets[0]))
            #expect(body["session_uri"] == .string(Route.issuer + "/session?" + FormParameters.encode([("code", code)])))
            // Stored by hash only.
            #expect(try await fixture.store.get(RelayStore.Key.sessionCode(code)) != nil)
            #expect(try await fixture.store.get(code) == nil)

            let opened = try await Self.open(client, code)
            #expect(opened.status == .seeOther)
            #expect(opened.headers[.location] == Self.targets[0])
            #expect(opened.headers[.referrerPolicy] == "no-referrer")
            let setCookie = try #require(opened.headers[.setCookie])
            let sid = try #require(RelayStore.sessionID(in: code))
            let session = try #require(try await fixture.sessions.session(sid))
            let remaining = Int(session.span.expiresAt - fixture.clock.now)
            for attribute in ["Max-Age=\(remaining)", "Path=/", "Secure", "HttpOnly", "SameSite=Lax"] {
                #expect(setCookie.contains("; \(attribute)"), "\(setCookie)")
            }
            #expect(!setCookie.lowercased().contains("domain="))
            let cookie = try Self.cookie(opened)

            // Once only: the replay is a page that never redirects.
            let replay = try await Self.open(client, code)
            #expect(replay.status == .badRequest)
            #expect(replay.headers[.location] == nil && replay.headers[.setCookie] == nil)
            #expect(String(buffer: replay.body).contains("invalid_session_code"))

            for query in ["?via=cookie", "?via=both"] {
                let allowed = try await Self.auth(client, query: query, cookie: cookie)
                #expect(allowed.status == .ok, "\(query)")
                #expect(allowed.headers[HTTPField.Name("X-Relais-Sub")!] == "sub-1")
                #expect(allowed.headers[HTTPField.Name("X-Relais-Client")!] == "app")
                #expect(allowed.headers[HTTPField.Name("X-Relais-Acr")!] == "eidas1")
            }
            // Over https only the `__Host-` name counts: the same value under the plain-http name
            // (which a sibling subdomain or a plain-http response could set) opens nothing.
            let unprefixed: HTTPFields = [Self.cookieHeader: "relais-session=\(cookie)"]
            #expect(try await client.execute(uri: "/auth?via=cookie", method: .get, headers: unprefixed).status == .unauthorized)
            // Tokens only unless the gateway says otherwise; an unreadable `via` fails closed.
            #expect(try await Self.auth(client, query: "", cookie: cookie).status == .unauthorized)
            #expect(try await Self.auth(client, query: "?via=token", cookie: cookie).status == .unauthorized)
            #expect(try await Self.auth(client, query: "?via=cookies", cookie: cookie).status == .badRequest)
            #expect(try await Self.auth(client, query: "?via=cookie", cookie: "x" + cookie).status == .unauthorized)
            #expect(try await Self.auth(client, query: "?via=cookie", cookie: nil).status == .unauthorized)
            // The cookie's app's audiences: a page for another API is not opened.
            #expect(try await Self.auth(client, query: "?via=cookie&aud=orders-api", cookie: cookie).status == .unauthorized)
            #expect(try await Self.auth(client, query: "?via=cookie&aud=app", cookie: cookie).status == .ok)
            // With both, a token present is the one checked.
            #expect(try await Self.auth(client, query: "?via=both", cookie: cookie, token: "not-a-token").status == .unauthorized)
        }
    }

    @Test(.tags(.fast)) func targetsAreTheAppsOwnOnly() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let second = try await Self.sessionCode(client, access, refresh: refresh, target: Self.targets[1])
            #expect(Route.json(second)["target"] == .string(Self.targets[1]))
            let opened = try await Self.open(client, try #require(Route.json(second)["session_code"]?.stringValue))
            #expect(opened.headers[.location] == Self.targets[1])

            for target in ["https://evil.example/", Self.targets[0] + "/../x", Self.targets[0].uppercased()] {
                let refused = try await Self.sessionCode(client, access, refresh: refresh, target: target)
                #expect(refused.status == .badRequest)
                #expect(Route.json(refused)["error"] == .string("invalid_target"))
            }
            let repeated = try await client.execute(
                uri: "/session_code", method: .post, headers: [.authorization: "Bearer " + access, .contentType: "application/x-www-form-urlencoded"],
                body: Route.form([("target", Self.targets[0]), ("target", Self.targets[1])])
            )
            #expect(Route.json(repeated)["error"] == .string("invalid_request"))
            let notAForm = try await client.execute(
                uri: "/session_code", method: .post, headers: [.authorization: "Bearer " + access, .contentType: "application/json"], body: ByteBuffer(string: "{}")
            )
            #expect(Route.json(notAForm)["error"] == .string("invalid_request"))
        }
    }

    @Test(.tags(.fast)) func withoutTargetsDevelopmentOpensTheDemoPage() async throws {
        let fixture = Self.fixture(targets: [])
        try await fixture.test { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let issued = Route.json(try await Self.sessionCode(client, access, refresh: refresh))
            #expect(issued["target"] == .string(Route.issuer + DemoAppRoutes.webPath))
            let refused = try await Self.sessionCode(client, access, refresh: refresh, target: "https://app.example.fr/documents")
            #expect(Route.json(refused)["error"] == .string("invalid_target"))
        }
    }

    @Test(.tags(.fast)) func codesExpireWithTheClockAndForeignCodesOpenNothing() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let code = try #require(Route.json(try await Self.sessionCode(client, access, refresh: refresh))["session_code"]?.stringValue)
            fixture.clock.advance(by: .seconds(61))
            let late = try await Self.open(client, code)
            #expect(late.status == .badRequest && late.headers[.setCookie] == nil && late.headers[.location] == nil)

            let fresh = try #require(Route.json(try await Self.sessionCode(client, access, refresh: refresh))["session_code"]?.stringValue)
            let sid = try #require(RelayStore.sessionID(in: fresh))
            // Another random part with the same session, another session's id, no code, junk.
            for forged in [RelayStore.newToken(for: sid), RelayStore.newToken(for: RelayStore.newSessionID()), "", "junk", String(repeating: "a", count: 5000)] {
                let refused = try await Self.open(client, forged)
                #expect(refused.status == .badRequest, "\(forged.prefix(40))")
                #expect(refused.headers[.location] == nil)
            }
            let repeated = try await client.execute(uri: "/session?code=\(fresh)&code=\(fresh)", method: .get)
            #expect(repeated.status == .badRequest)
            // Still usable after all that.
            #expect(try await Self.open(client, fresh).status == .seeOther)
        }
    }

    @Test func concurrentOpeningsOfOneCodeGiveOneWebSession() async throws {
        let fixture = Self.fixture()
        try await fixture.test(.live) { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let code = try #require(Route.json(try await Self.sessionCode(client, access, refresh: refresh))["session_code"]?.stringValue)
            let statuses = try await withThrowingTaskGroup(of: HTTPResponse.Status.self) { group in
                for _ in 0..<12 { group.addTask { try await Self.open(client, code).status } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == .seeOther }.count == 1)
            #expect(statuses.filter { $0 == .badRequest }.count == 11)
        }
    }

    @Test(.tags(.fast)) func endingTheSessionEndsItsWebSessions() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let code = try #require(Route.json(try await Self.sessionCode(client, access, refresh: refresh))["session_code"]?.stringValue)
            let cookie = try Self.cookie(try await Self.open(client, code))
            #expect(try await Self.auth(client, query: "?via=cookie", cookie: cookie).status == .ok)
            // A code issued before the session ends opens nothing after.
            let pending = try #require(Route.json(try await Self.sessionCode(client, access, refresh: refresh))["session_code"]?.stringValue)
            let revoked = try await client.execute(
                uri: "/revoke", method: .post, headers: Route.formHeaders, body: Route.form([("token", refresh), ("client_id", "app")])
            )
            #expect(revoked.status == .ok)
            #expect(try await Self.auth(client, query: "?via=cookie", cookie: cookie).status == .unauthorized)
            #expect(try await Self.open(client, pending).status == .badRequest)
        }
    }

    /// CSRF: the cookie is never a credential for anything but `/auth`.
    @Test(.tags(.fast)) func theCookieOpensNothingElse() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let code = try #require(Route.json(try await Self.sessionCode(client, access, refresh: refresh))["session_code"]?.stringValue)
            let cookie = try Self.cookie(try await Self.open(client, code))
            let cookieOnly: HTTPFields = [Self.cookieHeader: "\(RelayRouteTests.sessionCookie)=\(cookie)", .contentType: "application/x-www-form-urlencoded"]
            for (method, path) in [(HTTPRequest.Method.get, "/userinfo"), (.post, "/userinfo"), (.post, "/session_code"), (.post, "/logout"), (.post, "/introspect")] {
                let response = try await client.execute(uri: path, method: method, headers: cookieOnly, body: Route.form([("token", cookie)]))
                // 401 where a token is expected; POST /logout without one asks for a token or a refresh token (400).
                #expect(response.status == (path == "/logout" ? .badRequest : .unauthorized), "\(method) \(path)")
            }
            let token = try await client.execute(
                uri: "/token", method: .post, headers: cookieOnly, body: Route.form([("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", cookie)])
            )
            #expect(Route.json(token)["error"] == .string("invalid_grant"))
            let revoke = try await client.execute(uri: "/revoke", method: .post, headers: cookieOnly, body: Route.form([("token", cookie), ("client_id", "app")]))
            #expect(revoke.status == .ok)  // RFC 7009: an unknown token is answered 200 and nothing happens
            #expect(try await Self.auth(client, query: "?via=cookie", cookie: cookie).status == .ok)
        }
    }

    /// The web session outlives the access token (every API the app calls sees it): an unbound
    /// token alone opens none. The session's refresh token must come beside it, the live one or the
    /// one just before it, and of this very session.
    @Test(.tags(.fast)) func aBearerTokenNeedsItsSessionsRefreshTokenBesideIt() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let (access, refresh) = try await Self.signIn(fixture, client)
            let alone = try await Self.sessionCode(client, access, refresh: nil)
            #expect(alone.status == .badRequest && Route.json(alone)["error"] == .string("invalid_request"))
            let (_, otherRefresh) = try await Self.signIn(fixture, client)
            for wrong in [otherRefresh, refresh + "x", "not-a-token"] {
                let refused = try await Self.sessionCode(client, access, refresh: wrong)
                #expect(refused.status == .badRequest && Route.json(refused)["error"] == .string("invalid_grant"), "\(wrong)")
            }
            // Two rotations later the first refresh token is two generations old: no longer the
            // app's. The one before the live one still is (an app that lost a rotation's answer).
            var generations = [refresh]
            for _ in 0..<2 {
                let rotated = try await client.execute(
                    uri: "/token", method: .post, headers: Route.formHeaders,
                    body: Route.form([("grant_type", "refresh_token"), ("refresh_token", generations.last!), ("client_id", "app")]))
                generations.append(try #require(Route.json(rotated)["refresh_token"]?.stringValue))
            }
            #expect(Route.json(try await Self.sessionCode(client, access, refresh: generations[0]))["error"] == .string("invalid_grant"))
            for accepted in generations[1...] {
                #expect(Route.json(try await Self.sessionCode(client, access, refresh: accepted))["session_code"] != nil)
            }
        }
    }

    @Test(.tags(.fast)) func aBoundTokenNeedsItsProof() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let key = try DPoP.AppKey(fixture.clock)
            let tokens = Route.json(try await DPoP.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", DPoP.tokenURL)]))
            let access = try #require(tokens["access_token"]?.stringValue)
            #expect(try await Self.sessionCode(client, access, refresh: nil).status == .unauthorized)
            let url = Route.issuer + "/session_code"
            let wrongURL = try await client.execute(
                uri: "/session_code", method: .post, headers: [.authorization: "DPoP " + access, DPoPGuard.header: try key.proof("POST", DPoP.tokenURL, accessToken: access)]
            )
            #expect(wrongURL.status == .unauthorized)
            let proved = try await client.execute(
                uri: "/session_code", method: .post, headers: [.authorization: "DPoP " + access, DPoPGuard.header: try key.proof("POST", url, accessToken: access)]
            )
            #expect(proved.status == .ok)
            #expect(Route.json(proved)["session_code"] != nil)
        }
    }
}
