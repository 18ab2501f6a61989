import HTTPTypes
import Hummingbird
import HummingbirdTesting
import RelaisClock
import RelaisConfig
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisStore
import RelaisTestSupport
import Testing

@testable import RelaisRelay

/// The person's own sessions (`GET /sessions`, `DELETE /sessions/{id}`) and the operator's
/// `POST /admin/sessions/revoke`, through the relay's routes on the manual clock.
@Suite(.tags(.fast)) struct RelayUserSessionTests {
    typealias Route = RelayRouteTests

    /// A signed-in app instance: its tokens and its session id.
    struct Signed {
        var access: String
        var refresh: String
        var sid: String

        init(_ response: TestResponse) throws {
            let tokens = Route.json(response)
            access = try #require(tokens["access_token"]?.stringValue, "\(tokens)")
            refresh = try #require(tokens["refresh_token"]?.stringValue)
            sid = try #require(try RelayDPoPTests.claims(access)["sid"]?.stringValue)
        }

        var bearer: HTTPFields { [.authorization: "Bearer " + access] }
    }

    static func signIn(_ fixture: Route.Fixture, _ client: any TestClientProtocol, subject: String = "sub-1", device: String? = nil) async throws -> Signed {
        try Signed(try await RelayDPoPTests.redeem(fixture, client, subject: subject, deviceName: device, headers: [:]))
    }

    static func list(_ client: any TestClientProtocol, _ signed: Signed) async throws -> [[String: JSONValue]] {
        let response = try await client.execute(uri: "/sessions", method: .get, headers: signed.bearer)
        #expect(response.status == .ok)
        return (Route.json(response)["sessions"]?.arrayValue ?? []).compactMap(\.objectValue)
    }

    @Test func thePersonSeesTheirSessionsAndEndsOne() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let started = fixture.clock.now.rounded(.down)
            let phone = try await Self.signIn(fixture, client, device: "Pixel 8 de Marie")
            fixture.clock.advance(by: .seconds(10))
            let tablet = try await Self.signIn(fixture, client)
            let someoneElse = try await Self.signIn(fixture, client, subject: "sub-2")

            let listed = try await Self.list(client, phone)
            #expect(listed.map { $0["id"]?.stringValue } == [tablet.sid, phone.sid])  // newest first, only sub-1's
            let mine = try #require(listed.last)
            #expect(mine["current"] == .bool(true) && listed.first?["current"] == .bool(false))
            #expect(mine["device"] == .string("Pixel 8 de Marie") && listed.first?["device"] == .null)
            #expect(mine["client_id"] == .string("app") && mine["acr"] == .string("eidas1") && mine["attested"] == .null)
            #expect(mine["created_at"] == .number(started) && mine["last_used_at"] == .number(started))

            // A refresh is a use.
            fixture.clock.advance(by: .seconds(60))
            let refreshed = try await RelayDPoPTests.refresh(client, phone.refresh, proof: nil)
            #expect(refreshed.status == .ok)
            let after = try await Self.list(client, tablet)
            #expect(after.first { $0["id"]?.stringValue == phone.sid }?["last_used_at"] == .number(started + 70))

            // Someone else's session, or none, is not found; theirs goes on.
            for id in [someoneElse.sid, "0123456789abcdef0123456789abcdef", "x"] {
                let refused = try await client.execute(uri: "/sessions/\(id)", method: .delete, headers: phone.bearer)
                #expect(refused.status == .notFound && Route.json(refused)["error"] == .string("session_not_found"))
            }
            #expect(try await client.execute(uri: "/userinfo", method: .get, headers: someoneElse.bearer).status == .ok)

            // Ending the tablet's session from the phone: its tokens stop at once.
            #expect(try await client.execute(uri: "/sessions/\(tablet.sid)", method: .delete, headers: phone.bearer).status == .noContent)
            #expect(try await client.execute(uri: "/userinfo", method: .get, headers: tablet.bearer).status == .unauthorized)
            #expect(Route.json(try await RelayDPoPTests.refresh(client, tablet.refresh, proof: nil))["error"] == .string("invalid_grant"))
            #expect(try await Self.list(client, phone).map { $0["id"]?.stringValue } == [phone.sid])

            // Ending one's own session is signing out.
            #expect(try await client.execute(uri: "/sessions/\(phone.sid)", method: .delete, headers: phone.bearer).status == .noContent)
            #expect(try await client.execute(uri: "/sessions", method: .get, headers: phone.bearer).status == .unauthorized)
        }
    }

    /// More sessions than one batch of reads: every live one is listed once, the ended ones not.
    @Test func aLongListComesWholeAcrossBatches() async throws {
        let fixture = Route.Fixture { $0.relay.maxSessionsPerSubject = 1000 }
        try await fixture.test { client in
            let count = RedisStore.readBatch + 30
            let now = fixture.clock.now
            for index in 0..<count {
                let record = SessionRecord(
                    clientID: "app", subject: "sub-1", providerID: "fc", scopes: ["openid"], acr: nil, createdAt: now - Double(count - index),
                    expiresAt: now + 3600, sealedIdentity: "sealed")
                _ = try await fixture.sessions.open(record, sid: "s\(index)", providerSessionID: nil, once: .claim("mark-\(index)", mark: [1], ttl: .seconds(60)), also: [])
            }
            for ended in [0, count - 1] { #expect(try await fixture.store.delete(RelayStore.Key.session("s\(ended)"))) }
            let signed = try await Self.signIn(fixture, client)
            let listed = try await Self.list(client, signed).compactMap { $0["id"]?.stringValue }
            #expect(listed == [signed.sid] + (1..<(count - 1)).reversed().map { "s\($0)" })
        }
    }

    @Test func onlyATokenReachesTheSessionList() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let none = try await client.execute(uri: "/sessions", method: .get)
            #expect(none.status == .unauthorized && none.headers[.wwwAuthenticate] == #"Bearer realm="relais""#)
            let garbage = try await client.execute(uri: "/sessions", method: .get, headers: [.authorization: "Bearer x.y.z"])
            #expect(garbage.status == .unauthorized && Route.json(garbage)["error"] == .string("invalid_token"))
            // The web session cookie is never a credential here: no site can end a session through a browser.
            let cookie = try await client.execute(uri: "/sessions/abc", method: .delete, headers: [.cookie: "__Host-relais-session=anything"])
            #expect(cookie.status == .unauthorized)
        }
    }

    static let adminToken = "admin-token-0123456789-0123456789-abcdef"

    @Test func theAdminEndsEveryoneOfAPersonWithItsTokenOnly() async throws {
        let off = Route.Fixture()
        try await off.test { client in
            let response = try await client.execute(uri: "/admin/sessions/revoke", method: .post, headers: Route.formHeaders, body: Route.form([("sub", "sub-1")]))
            #expect(response.status == .notFound)
        }
        let fixture = Route.Fixture { $0.adminToken = Self.adminToken }
        try await fixture.test { client in
            let first = try await Self.signIn(fixture, client), second = try await Self.signIn(fixture, client)
            let other = try await Self.signIn(fixture, client, subject: "sub-2")
            func admin(_ fields: [(String, String)], token: String? = Self.adminToken) async throws -> TestResponse {
                var headers = Route.formHeaders
                if let token { headers[.authorization] = "Bearer " + token }
                return try await client.execute(uri: "/admin/sessions/revoke", method: .post, headers: headers, body: Route.form(fields))
            }
            #expect(try await admin([("sub", "sub-1")], token: nil).status == .unauthorized)
            #expect(try await admin([("sub", "sub-1")], token: Self.adminToken + "x").status == .unauthorized)
            #expect(try await admin([("sub", "sub-1")], token: first.access).status == .unauthorized)  // a user's token is not the admin's
            #expect(Route.json(try await admin([]))["error_description"] == .string("sub is missing"))
            #expect(Route.json(try await admin([("sub", "sub-1"), ("provider", "nope")]))["error_description"] == .string("provider 'nope' is not configured"))
            #expect(Route.json(try await admin([("sub", "sub-1"), ("sub", "sub-2")]))["error"] == .string("invalid_request"))
            let done = try await admin([("sub", "sub-1")])
            #expect(done.status == .ok && Route.json(done)["revoked"] == .number(2))
            for ended in [first, second] {
                #expect(try await client.execute(uri: "/userinfo", method: .get, headers: ended.bearer).status == .unauthorized)
            }
            #expect(try await client.execute(uri: "/userinfo", method: .get, headers: other.bearer).status == .ok)
            #expect(Route.json(try await admin([("sub", "sub-1"), ("provider", "fc")]))["revoked"] == .number(0))
        }
    }

    @Test func aDeviceNameMustBeAShortLabel() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            let challenge = PKCE.challenge(for: SecureRandom.token(bits: 256))
            // The last one is a single character: an e with 300 combining accents.
            for bad in ["", String(repeating: "é", count: 65), "Pixel\u{0}8", "Pixel\u{202E}8", "e" + String(repeating: "\u{301}", count: 300)] {
                let query = FormParameters.encode([
                    ("client_id", "app"), ("redirect_uri", Route.redirect), ("response_type", "code"), ("state", "s1"), ("code_challenge", challenge),
                    ("code_challenge_method", "S256"), ("device_name", bad),
                ])
                let response = try await client.execute(uri: "/authorize?" + query, method: .get)
                let location = try #require(response.headers[.location])
                let answer = try #require(FormParameters(encoded: location.split(separator: "?", maxSplits: 1)[1]))
                #expect(answer["error_description"] == "device_name must be 1 to 64 characters (256 bytes), without control characters", "\(bad.debugDescription)")
            }
        }
    }
}

extension RelaySignInAndTokensChain {
    @Suite struct RelayDeviceNameTests {
        /// The label travels from /authorize through the provider and the code to the session list.
        @Test func theDeviceNameGivenAtSignInIsListed() async throws {
            let harness = try await RelayHarness.launch()
            var request = RelayHarness.AppRequest()
            request.extra = [("device_name", "iPhone de Léa")]
            let tokens = try await harness.tokens(request)
            let access = try #require(tokens["access_token"]?.stringValue)
            let response = try await harness.http.send(HTTPClientRequest(url: harness.issuer + "/sessions", headers: [(name: "Authorization", value: "Bearer " + access)]))
            let sessions = try #require(JSONValue.object(from: response.body)?["sessions"]?.arrayValue)
            #expect(sessions.count == 1 && sessions.first?.objectValue?["device"] == .string("iPhone de Léa"))
        }
    }
}
