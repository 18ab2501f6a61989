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

/// Sign-in on another device (RFC 8628) through the relay's routes: the device's request and its
/// polls, approval by a signed-in app, the person's pages, the QR code, and the limits on guessing.
@Suite struct RelayDeviceTests {
    typealias Route = RelayRouteTests
    typealias DPoP = RelayDPoPTests
    static let grantType = "urn:ietf:params:oauth:grant-type:device_code"

    /// "app" is the signed-in phone app; "tv" is the device's app, approvable by "app".
    static func fixture(
        _ change: @escaping (inout RelaisConfiguration) -> Void = { _ in }, serving wrap: (EmbeddedStore) -> any KeyValueStore = { $0 }
    ) -> Route.Fixture {
        Route.Fixture(
            { configuration in
                var tv = AppSettings(clientID: "tv", redirectURIs: ["http://127.0.0.1/cb"], providers: ["fc"], scopes: ["openid", "profile"])
                tv.name = "Télévision du salon"
                var grant = AppSettings.DeviceGrant()
                grant.approvers = ["app"]
                tv.deviceGrant = grant
                configuration.apps.append(tv)
                change(&configuration)
            }, serving: wrap)
    }

    struct Started {
        let deviceCode: String
        let userCode: String
        let body: [String: JSONValue]
    }

    static func start(_ client: any TestClientProtocol, clientID: String = "tv", extra: [(String, String)] = []) async throws -> Started {
        let response = try await client.execute(
            uri: "/device_authorization", method: .post, headers: Route.formHeaders, body: Route.form([("client_id", clientID)] + extra)
        )
        #expect(response.status == .ok, "\(String(buffer: response.body))")
        let body = Route.json(response)
        return Started(deviceCode: try #require(body["device_code"]?.stringValue), userCode: try #require(body["user_code"]?.stringValue), body: body)
    }

    static func poll(_ client: any TestClientProtocol, _ deviceCode: String, clientID: String = "tv") async throws -> TestResponse {
        try await client.execute(
            uri: "/token", method: .post, headers: Route.formHeaders,
            body: Route.form([("grant_type", grantType), ("device_code", deviceCode), ("client_id", clientID)])
        )
    }

    static func error(_ response: TestResponse) -> String? { Route.json(response)["error"]?.stringValue }

    /// The signed-in phone app: its access token and, when DPoP-bound, the key it proves with.
    struct Phone {
        let access: String
        let key: DPoP.AppKey?
        var refresh: String? = nil

        var sid: String { (try? DPoP.claims(access)["sid"]?.stringValue) ?? nil ?? "" }
    }

    /// Approves (or inspects) with the phone's token: with a DPoP proof when it is bound.
    static func approve(
        _ client: any TestClientProtocol, _ phone: Phone, _ userCode: String, decision: String? = nil, path: String = "/device/approve"
    ) async throws -> TestResponse {
        var fields = [("user_code", userCode)]
        if let decision { fields.append(("decision", decision)) }
        var headers = Route.formHeaders
        if let key = phone.key {
            headers[.authorization] = "DPoP " + phone.access
            headers[DPoPGuard.header] = try key.proof("POST", Route.issuer + path, accessToken: phone.access)
        } else {
            headers[.authorization] = "Bearer " + phone.access
        }
        return try await client.execute(uri: path, method: .post, headers: headers, body: Route.form(fields))
    }

    /// A phone signed in now, with DPoP-bound tokens unless `bound` is false; `headers` add to its
    /// code redemption (an attestation).
    static func phone(_ fixture: Route.Fixture, _ client: any TestClientProtocol, bound: Bool = true, headers extra: HTTPFields = [:]) async throws -> Phone {
        let key = bound ? try DPoP.AppKey(fixture.clock) : nil
        var headers = extra
        if let key { headers[DPoPGuard.header] = try key.proof("POST", DPoP.tokenURL) }
        let response = try await DPoP.redeem(fixture, client, headers: headers)
        let tokens = Route.json(response)
        return Phone(access: try #require(tokens["access_token"]?.stringValue, "\(String(buffer: response.body))"), key: key, refresh: tokens["refresh_token"]?.stringValue)
    }

    @Test(.tags(.fast)) func theDeviceGetsWhatRFC8628Says() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let started = try await Self.start(client, extra: [("scope", "openid"), ("device_name", "Salon TV")])
            #expect(started.body["verification_uri"] == .string(Route.issuer + "/device"))
            #expect(started.body["verification_uri_complete"] == .string(Route.issuer + "/device?user_code=" + started.userCode))
            #expect(started.body["interval"] == .number(5))
            #expect(started.body["expires_in"] == .number(600))
            #expect(started.userCode.wholeMatch(of: /[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}/) != nil)
            #expect(RelayStore.sessionID(in: started.deviceCode) != nil)

            let metadata = Route.json(try await client.execute(uri: "/.well-known/openid-configuration", method: .get))
            #expect(metadata["device_authorization_endpoint"] == .string(Route.issuer + "/device_authorization"))
            #expect(metadata["grant_types_supported"]?.arrayValue?.contains(.string(Self.grantType)) == true)

            let refusals: [([(String, String)], HTTPResponse.Status, String)] = [
                ([("client_id", "nobody")], .unauthorized, "invalid_client"),
                ([("client_id", "app")], .badRequest, "unauthorized_client"),
                ([("client_id", "tv"), ("scope", "openid email")], .badRequest, "invalid_scope"),
                ([("client_id", "tv"), ("scope", "profile")], .badRequest, "invalid_scope"),
                ([("client_id", "tv"), ("device_name", "TV\u{202E}evil")], .badRequest, "invalid_request"),
                ([("client_id", "tv"), ("device_name", String(repeating: "x", count: 65))], .badRequest, "invalid_request"),
                ([("client_id", "tv"), ("client_id", "tv")], .badRequest, "invalid_request"),
            ]
            for (fields, status, code) in refusals {
                let response = try await client.execute(uri: "/device_authorization", method: .post, headers: Route.formHeaders, body: Route.form(fields))
                #expect(response.status == status && Self.error(response) == code, "\(fields)")
            }
            // The phone app is not registered for the device grant: it may not poll either.
            #expect(Self.error(try await Self.poll(client, started.deviceCode, clientID: "app")) == "unauthorized_client")
        }
    }

    @Test(.tags(.fast)) func pollsWaitThenGetTokensExactlyOnce() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let started = try await Self.start(client)
            #expect(Self.error(try await Self.poll(client, started.deviceCode)) == "authorization_pending")
            #expect(Self.error(try await Self.poll(client, started.deviceCode)) == "slow_down")
            fixture.clock.advance(by: .seconds(5))
            #expect(Self.error(try await Self.poll(client, started.deviceCode)) == "authorization_pending")

            let access = try await Self.phone(fixture, client)
            let inspected = try await Self.approve(client, access, started.userCode.lowercased(), path: "/device/inspect")
            #expect(Route.json(inspected)["client_id"] == .string("tv"))
            #expect(Route.json(inspected)["scope"] == .string("openid profile"))
            let approved = try await Self.approve(client, access, started.userCode)
            #expect(approved.status == .ok)
            #expect(Route.json(approved)["approved"] == .bool(true))
            // Decided once.
            #expect(Self.error(try await Self.approve(client, access, started.userCode, decision: "deny")) == "invalid_user_code")

            fixture.clock.advance(by: .seconds(5))
            let tokens = try await Self.poll(client, started.deviceCode)
            #expect(tokens.status == .ok, "\(String(buffer: tokens.body))")
            let claims = try DPoP.claims(try #require(Route.json(tokens)["access_token"]?.stringValue))
            let phoneClaims = try DPoP.claims(access.access)
            #expect(claims["client_id"] == .string("tv"))
            #expect(claims["sub"] == phoneClaims["sub"])
            #expect(claims["acr"] == phoneClaims["acr"])
            #expect(claims["sid"] != phoneClaims["sid"])
            #expect(claims["scope"] == .string("openid profile"))
            #expect(Route.json(tokens)["refresh_token"] != nil)

            fixture.clock.advance(by: .seconds(5))
            let again = try await Self.poll(client, started.deviceCode)
            #expect(Self.error(again) == "invalid_grant")
            // Another app cannot poll a device code it did not ask for.
            let other = try await Self.start(client)
            fixture.clock.advance(by: .seconds(5))
            #expect(Self.error(try await Self.poll(client, other.deviceCode, clientID: "app")) == "unauthorized_client")
        }
    }

    @Test(.tags(.fast)) func deniedExpiredAndUnknownRequests() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let access = try await Self.phone(fixture, client)
            let denied = try await Self.start(client)
            #expect(Route.json(try await Self.approve(client, access, denied.userCode, decision: "deny"))["approved"] == .bool(false))
            #expect(Self.error(try await Self.poll(client, denied.deviceCode)) == "access_denied")
            #expect(Self.error(try await Self.approve(client, access, denied.userCode, decision: "maybe")) == "invalid_request")

            let late = try await Self.start(client)
            fixture.clock.advance(by: .seconds(601))
            #expect(Self.error(try await Self.poll(client, late.deviceCode)) == "expired_token")
            let fresh = try await Self.phone(fixture, client)
            #expect(Self.error(try await Self.approve(client, fresh, late.userCode)) == "invalid_user_code")
            // RFC 8628 §3.5: a code never issued is invalid_grant, not expired_token.
            #expect(Self.error(try await Self.poll(client, "junk")) == "invalid_grant")
            let never = try await Self.start(client).deviceCode.dropLast(4) + "AAAA"
            #expect(Self.error(try await Self.poll(client, String(never))) == "invalid_grant")
            // Long after its expiry, the record is gone: unknown then.
            fixture.clock.advance(by: .seconds(600))
            #expect(Self.error(try await Self.poll(client, late.deviceCode)) == "invalid_grant")
            #expect(Self.error(try await Self.poll(client, "")) == "invalid_request")
        }
    }

    @Test func concurrentPollsOfAnApprovedRequestOpenOneSession() async throws {
        let fixture = Self.fixture()
        try await fixture.test(.live) { client in
            let started = try await Self.start(client)
            let access = try await Self.phone(fixture, client)
            #expect(try await Self.approve(client, access, started.userCode).status == .ok)
            let statuses = try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<10 { group.addTask { Self.error(try await Self.poll(client, started.deviceCode)) ?? "tokens" } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == "tokens" }.count == 1, "\(statuses)")
            // The others were too soon, or came after the device code was used.
            #expect(statuses.filter { $0 == "slow_down" || $0 == "invalid_grant" }.count == 9, "\(statuses)")
        }
        // And at the store, past the poll marker: of two redemptions, one opens the session.
        let sessions = fixture.sessions
        let sid = RelayStore.newSessionID()
        let deviceCode = RelayStore.newToken(for: sid)
        let request = RelayStore.DeviceRequest(clientID: "tv", scopes: ["openid"], device: nil, expiresAt: fixture.clock.now + 600)
        #expect(try await sessions.saveDeviceRequest(request, deviceCode: deviceCode, userCode: UserCode.random()))
        let session = SessionRecord(
            clientID: "tv", subject: "s", providerID: "fc", scopes: ["openid"], acr: nil, createdAt: 0, expiresAt: fixture.clock.now + 60, sealedIdentity: "x")
        let opened = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<2 {
                group.addTask {
                    try await sessions.redeemDevice(deviceCode, opening: session, sid: sid, providerSessionID: nil) != nil
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(opened.filter { $0 }.count == 1 && opened.count == 2)
    }

    @Test(.tags(.fast)) func approversFollowTheDeviceAppsRules() async throws {
        let fixture = Self.fixture { configuration in
            configuration.apps[1].deviceGrant?.attestedApprovers = true
            configuration.apps[0].attestation = .allowed
            configuration.relay.devAttester = true
        }
        try await fixture.test { client in
            let started = try await Self.start(client)
            let unattested = try await Self.phone(fixture, client)
            #expect(Self.error(try await Self.approve(client, unattested, started.userCode)) == "unauthorized_client")
            #expect(try await Self.approve(client, Phone(access: "not-a-token", key: nil), started.userCode).status == .unauthorized)
            #expect(Self.error(try await Self.approve(client, unattested, "BCDF")) == "invalid_user_code")
            // An attested phone may.
            let instance = try RelayAttestationTests.Instance(fixture.clock)
            let attestation = try await RelayAttestationTests.devAttestation(client, instance)
            let attested = try await Self.phone(fixture, client, headers: try instance.headers(attestation))
            #expect(try await Self.approve(client, attested, started.userCode).status == .ok)
        }
        let others = Self.fixture { configuration in configuration.apps[1].deviceGrant?.approvers = [] }
        try await others.test { client in
            let started = try await Self.start(client)
            let access = try await Self.phone(others, client)
            #expect(Self.error(try await Self.approve(client, access, started.userCode)) == "unauthorized_client")
        }
    }

    /// Finding 4 of the review: guesses cost the guesser, never the request's owner, and say
    /// nothing about which first halves are live.
    @Test(.tags(.fast)) func guessingCostsTheGuesserNotTheRequest() async throws {
        let fixture = Self.fixture { configuration in configuration.rateLimit.userCodesPerIP = 6 }
        try await fixture.test { client in
            let started = try await Self.start(client)
            let phone = try await Self.phone(fixture, client)
            let handle = started.userCode.prefix(4)
            let wrongs = UserCode.alphabet.map { String(repeating: $0, count: 4) }.filter { $0 != String(started.userCode.suffix(4)) }
            let unknownHandle = UserCode.alphabet.map { String(repeating: $0, count: 4) }.first { $0 != String(handle) }!
            // A live first half with a wrong second, and an unknown first half: the same answer.
            var descriptions: Set<String> = []
            for attempt in 0..<6 {
                let guess = attempt % 2 == 0 ? handle + "-" + wrongs[attempt] : unknownHandle + "-" + wrongs[attempt]
                let refused = try await client.execute(uri: "/device", method: .post, headers: Route.formHeaders, body: Route.form([("user_code", guess)]))
                #expect(refused.status == .badRequest)
                // The page refills the field with the guess; all else is the same.
                let page = String(buffer: refused.body)
                #expect(page.contains(#"value="\#(guess)""#))
                descriptions.insert(page.split(separator: #"value="\#(guess)""#).joined())
            }
            #expect(descriptions.count == 1, "\(descriptions)")
            // The guesser's seventh attempt in the window is refused, even with the right code.
            let limited = try await client.execute(uri: "/device", method: .post, headers: Route.formHeaders, body: Route.form([("user_code", started.userCode)]))
            #expect(limited.status == .tooManyRequests)
            // The request lives on: its owner's app approves it, and the device gets its tokens.
            #expect(try await Self.approve(client, phone, started.userCode).status == .ok)
            fixture.clock.advance(by: .seconds(5))
            #expect(try await Self.poll(client, started.deviceCode).status == .ok)
            // At the API too, one answer for an unknown and a wrong code.
            let other = try await Self.start(client)
            let wrongHalf = Self.error(try await Self.approve(client, phone, other.userCode.prefix(4) + "-" + wrongs[0]))
            var apiDescriptions: Set<String> = []
            for guess in [other.userCode.prefix(4) + "-" + (wrongs.first { $0 != String(other.userCode.suffix(4)) })!, unknownHandle + "-BCDF"] {
                apiDescriptions.insert(Route.json(try await Self.approve(client, phone, guess))["error_description"]?.stringValue ?? "")
            }
            #expect(wrongHalf == "invalid_user_code" && apiDescriptions.count == 1, "\(apiDescriptions)")
        }
        // Everyone's anonymous attempts together are bounded; a signed-in app's are not in that bucket.
        let everyone = Self.fixture { configuration in configuration.rateLimit.userCodes = 2 }
        try await everyone.test { client in
            let started = try await Self.start(client)
            let phone = try await Self.phone(everyone, client)
            for _ in 0..<2 {
                let wrong = try await client.execute(uri: "/device", method: .post, headers: Route.formHeaders, body: Route.form([("user_code", "BCDF-GHJK")]))
                #expect(wrong.status == .badRequest)
            }
            #expect(try await client.execute(uri: "/device", method: .post, headers: Route.formHeaders, body: Route.form([("user_code", "BCDF-GHJK")])).status == .tooManyRequests)
            #expect(try await Self.approve(client, phone, started.userCode).status == .ok)
        }
        // Per signed-in session: its own bucket, the per-address limit's size.
        let perApp = Self.fixture { configuration in configuration.rateLimit.userCodesPerIP = 2 }
        try await perApp.test { client in
            let phone = try await Self.phone(perApp, client)
            for _ in 0..<2 { #expect(Self.error(try await Self.approve(client, phone, "BCDF-GHJK")) == "invalid_user_code") }
            #expect(try await Self.approve(client, phone, "BCDF-GHJK").status == .tooManyRequests)
            // Another session of the person is another bucket.
            #expect(Self.error(try await Self.approve(client, try await Self.phone(perApp, client), "BCDF-GHJK")) == "invalid_user_code")
        }
    }

    /// An IPv6 /64 is one guesser: addresses that differ only in their last 64 bits share a limit.
    @Test func anIPv6SlashSixtyFourIsOneGuesser() async throws {
        #expect(IPNetwork.limitKey("2001:db8:1:2:aaaa::1") == IPNetwork.limitKey("2001:db8:1:2:ffff:1:2:3"))
        #expect(IPNetwork.limitKey("2001:db8:1:2::1") != IPNetwork.limitKey("2001:db8:1:3::1"))
        #expect(IPNetwork.limitKey("2001:db8:1:2::1") == "2001:0db8:0001:0002::/64")
        #expect(IPNetwork.limitKey("::ffff:192.0.2.7") == "192.0.2.7" && IPNetwork.limitKey("192.0.2.7") == "192.0.2.7")
        #expect(IPNetwork.limitKey("not an address") == "not an address")
        let fixture = Self.fixture { configuration in
            configuration.server.trustedProxies = ["127.0.0.1/32", "::1/128"]
            configuration.rateLimit.userCodesPerIP = 3
        }
        try await fixture.test(.live) { client in
            let guess: @Sendable (String) async throws -> HTTPResponse.Status = { address in
                var headers = Route.formHeaders
                headers[.xForwardedFor] = address
                return try await client.execute(uri: "/device", method: .post, headers: headers, body: Route.form([("user_code", "BCDF-GHJK")])).status
            }
            var statuses: [HTTPResponse.Status] = []
            // Three addresses of one /64, then a fourth of it, then one of the next /64.
            for address in ["2001:db8:7:7::1", "2001:db8:7:7::2", "2001:db8:7:7::3", "2001:db8:7:7:abcd::99", "2001:db8:7:8::1"] {
                statuses.append(try await guess(address))
            }
            #expect(statuses == [.badRequest, .badRequest, .badRequest, .tooManyRequests, .badRequest])
        }
    }

    /// An app approved the request: the browser's "Deny" must not say "denied" while the device
    /// gets its tokens, and no sign-in starts for a decided request.
    @Test(.tags(.fast)) func aDecidedRequestCannotBeDeniedFromThePage() async throws {
        let fixture = RelayDeviceApprovalTests.fixture()
        try await fixture.test { client in
            let phone = try await Self.phone(fixture, client)
            let started = try await Self.start(client)
            #expect(try await Self.approve(client, phone, started.userCode).status == .ok)
            var fromOurPage = Route.formHeaders
            fromOurPage[.origin] = Route.issuer
            for path in ["/device/deny", "/device/sign-in"] {
                let late = try await client.execute(uri: path, method: .post, headers: fromOurPage, body: Route.form([("user_code", started.userCode)]))
                #expect(late.status == .badRequest && late.headers[.location] == nil, "\(path)")
                #expect(!String(buffer: late.body).contains("device-denied"), "\(path)")
                #expect(String(buffer: late.body).contains("déjà été acceptée ou refusée"), "\(path): \(String(buffer: late.body))")
                // The way back is the device's page, not "try again from the app".
                #expect(String(buffer: late.body).contains(#"<a id="error-back" href="/device">Retour à la page de l'appareil</a>"#), "\(path)")
            }
            // Elsewhere, an error page sends the person back to the app.
            let appError = String(buffer: try await client.execute(uri: "/authorize?response_type=code", method: .get).body)
            #expect(appError.contains("réessayez depuis l'application") && !appError.contains("error-back"))
            fixture.clock.advance(by: .seconds(5))
            let tokens = Route.json(try await Self.poll(client, started.deviceCode))
            #expect(tokens["access_token"] != nil, "\(tokens)")
        }
    }

    @Test func thePersonsPagesAndTheQRCode() async throws {
        let fixture = Self.fixture()
        try await fixture.test(.live) { client in
            let started = try await Self.start(client, extra: [("device_name", "Salon <TV>")])
            let entry = try await client.execute(uri: "/device?user_code=" + started.userCode.lowercased(), method: .get)
            #expect(entry.status == .ok && entry.headers[.xFrameOptions] == "DENY")
            #expect(String(buffer: entry.body).contains("value=\"\(started.userCode)\""))
            let junkEntry = String(buffer: try await client.execute(uri: "/device?user_code=%22%3E%3Cscript%3E", method: .get).body)
            #expect(!junkEntry.contains("<script>"))

            let confirm = try await client.execute(uri: "/device", method: .post, headers: Route.formHeaders, body: Route.form([("user_code", started.userCode)]))
            let page = String(buffer: confirm.body)
            #expect(page.contains("<code id=\"device-app\">tv</code>"))
            // What Relais knows comes first (the app's name, time, address); the device's own label
            // after it, marked as the device's words.
            #expect(page.contains("<strong id=\"device-app-name\">Télévision du salon</strong>"))
            #expect(page.contains("id=\"device-time\"") && page.contains("id=\"device-address\""))
            let label = try #require(page.firstRange(of: "Nom donné par l'appareil lui-même (non vérifié)"))
            #expect(page.firstRange(of: "Salon &lt;TV&gt;")!.lowerBound > label.lowerBound)
            #expect(page.firstRange(of: "device-app-name")!.lowerBound < label.lowerBound)
            let wrong = try await client.execute(uri: "/device", method: .post, headers: Route.formHeaders, body: Route.form([("user_code", "BCDF-GHJK")]))
            // A mistyped code: the form again, its error announced (role=alert) and tied to the field.
            let again = String(buffer: wrong.body)
            #expect(wrong.status == .badRequest && again.contains(#"id="device-error" class="error" role="alert""#))
            #expect(again.contains(#"<label for="user-code">"#) && again.contains(#"aria-describedby="device-error""#))
            // What was typed stays in the field to correct, escaped, and no longer than the field takes.
            #expect(again.contains(#"name="user_code" value="BCDF-GHJK""#))
            let marked = try await client.execute(
                uri: "/device", method: .post, headers: Route.formHeaders, body: Route.form([("user_code", "<b>\"X-1234567890")]))
            #expect(marked.status == .badRequest && String(buffer: marked.body).contains(#"name="user_code" value="&lt;b&gt;&quot;X-123""#))

            // A browser too old for Fetch Metadata: its Origin says the form is Relais' own.
            var fromOurPage = Route.formHeaders
            fromOurPage[.origin] = Route.issuer
            let deny = try await client.execute(uri: "/device/deny", method: .post, headers: fromOurPage, body: Route.form([("user_code", started.userCode)]))
            #expect(String(buffer: deny.body).contains("device-denied"))
            #expect(Self.error(try await Self.poll(client, started.deviceCode)) == "access_denied")
            // Decided: denying again, or signing in to approve, says so and changes nothing.
            for path in ["/device/deny", "/device/sign-in"] {
                let late = try await client.execute(uri: path, method: .post, headers: fromOurPage, body: Route.form([("user_code", started.userCode)]))
                #expect(late.status == .badRequest && late.headers[.location] == nil, "\(path)")
                #expect(String(buffer: late.body).contains("déjà été acceptée ou refusée"), "\(path): \(String(buffer: late.body))")
            }

            let qr = try await client.execute(uri: "/device/qr.svg?user_code=" + started.userCode, method: .get)
            #expect(qr.status == .ok && qr.headers[.contentType] == "image/svg+xml")
            #expect(String(buffer: qr.body).hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
            for junk in ["", "BCDF", "AAAA-AAAA", String(repeating: "B", count: 5000)] {
                #expect(try await client.execute(uri: "/device/qr.svg?user_code=" + junk, method: .get).status == .badRequest)
            }
        }
    }
}
