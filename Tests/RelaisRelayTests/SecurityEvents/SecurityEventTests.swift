import Foundation
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

/// The security event log (docs/security-events.md): its line, and the events of each flow,
/// through the relay's routes on the manual clock.
@Suite struct SecurityEventTests {
    typealias Route = RelayRouteTests
    typealias Sessions = RelayUserSessionTests

    static let hashKey = Array("events-key-0123456789-0123456789-0123".utf8)
    static let common = ["version", "event", "time", "outcome", "reason", "client_id", "provider", "sid", "sub", "ip", "user_agent", "request_id"]

    static func fixture(_ change: @escaping (inout RelaisConfiguration) -> Void = { _ in }) -> Route.Fixture {
        Route.Fixture { configuration in
            configuration.securityEvents.hashKey = Self.hashKey
            change(&configuration)
        }
    }

    static func hash(_ label: String, _ value: String) -> String {
        SecurityEventLog(sink: nil, hashKey: hashKey, clock: ManualClock()).hash(label, value)
    }

    @Test(.tags(.fast)) func aLineHasTheDocumentedFieldsAndNamesNobody() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            let agent = #"Relais "test" \ agent é"#
            let response = try await RelayDPoPTests.redeem(fixture, client, subject: "sub-1", headers: [.userAgent: agent])
            let signed = try Sessions.Signed(response)
            let events = fixture.events.all
            #expect(fixture.events.names == ["session.opened"])
            let event = try #require(events.first)
            for field in Self.common { #expect(event[field] != nil, "\(field) is always present") }
            #expect(event["version"] == .number(1) && event["outcome"] == .string("success") && event["reason"] == .null)
            #expect(event["time"] == .string(LogText.timestamp(fixture.clock.now)))
            #expect(event["client_id"] == .string("app") && event["provider"] == .string("fc"))
            #expect(event["acr"] == .string("eidas1") && event["via"] == .string("code"))
            // Keyed hashes, 128 bits: the SIEM correlates without learning the sid or the sub.
            #expect(event["sid"] == .string(Self.hash("sid", signed.sid)) && event["sub"] == .string(Self.hash("sub", "sub-1")))
            #expect(event["sub"]?.stringValue?.count == 22 && event["sid"] != event["sub"])
            // The formula docs/operations.md gives operators to find a person's events.
            #expect(event["sub"] == .string(Base64URL.encode(HMAC.sha256(key: Self.hashKey, Array("sub:sub-1".utf8)).prefix(16))))
            #expect(event["user_agent"] == .string(agent))
            #expect(event["request_id"]?.stringValue?.isEmpty == false)
            #expect(!fixture.events.text.contains(signed.sid) && !fixture.events.text.contains("sub-1") && !fixture.events.text.contains("eyJ"))
            // The same person in another session: the same sub hash, another sid hash.
            _ = try await RelayDPoPTests.redeem(fixture, client, subject: "sub-1", headers: [:])
            let second = try #require(fixture.events.all.last)
            #expect(second["sub"] == event["sub"] && second["sid"] != event["sid"] && second["user_agent"] == .null)
        }
    }

    @Test(.tags(.fast)) func withoutAConfiguredKeyTheInstancesShareOneFromTheStore() async throws {
        let fixture = Route.Fixture()
        try await fixture.test { client in
            _ = try await RelayDPoPTests.redeem(fixture, client, subject: "sub-1", headers: [:])
        }
        let stored = try #require(try await fixture.sessions.sharedValue(.eventHashKey, proposing: [1, 2, 3]))
        #expect(stored.count == 32)
        let expected = SecurityEventLog(sink: nil, hashKey: stored, clock: ManualClock()).hash("sub", "sub-1")
        #expect(fixture.events.all.first?["sub"] == .string(expected))
    }

    @Test(.tags(.fast)) func replaysRevocationsAndLogoutsAreRecorded() async throws {
        let fixture = Self.fixture { $0.adminToken = RelayUserSessionTests.adminToken }
        try await fixture.test { client in
            // A code used twice: the session it opened ends, and the event names it.
            let fields = try await CodeRedemptionTests.signIn(fixture)
            let first = try Sessions.Signed(try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(fields)))
            #expect(try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: Route.form(fields)).status == .badRequest)
            let replay = try #require(fixture.events.named(.codeReplayed).first)
            #expect(replay["outcome"] == .string("failure") && replay["reason"] == .string("invalid_grant"))
            #expect(replay["sid"] == .string(Self.hash("sid", first.sid)) && replay["sub"] == .string(Self.hash("sub", "sub-1")))

            // A rotated refresh token used after the grace window.
            let second = try await Sessions.signIn(fixture, client)
            #expect(try await RelayDPoPTests.refresh(client, second.refresh, proof: nil).status == .ok)
            fixture.clock.advance(by: .seconds(31))
            #expect(try await RelayDPoPTests.refresh(client, second.refresh, proof: nil).status == .badRequest)
            let reuse = try #require(fixture.events.named(.refreshReused).first)
            #expect(reuse["sid"] == .string(Self.hash("sid", second.sid)) && reuse["client_id"] == .string("app"))

            // The app revokes, the app logs out, the person ends a session.
            let third = try await Sessions.signIn(fixture, client)
            let revoke = Route.form([("client_id", "app"), ("token", third.refresh)])
            #expect(try await client.execute(uri: "/revoke", method: .post, headers: Route.formHeaders, body: revoke).status == .ok)
            #expect(fixture.events.named(.sessionRevoked).first?["sid"] == .string(Self.hash("sid", third.sid)))
            let fourth = try await Sessions.signIn(fixture, client)
            #expect(try await client.execute(uri: "/logout", method: .post, headers: fourth.bearer).status == .noContent)
            let logout = try #require(fixture.events.named(.logout).first)
            #expect(logout["sid"] == .string(Self.hash("sid", fourth.sid)) && logout["scope"] == .string("app"))
            #expect(logout["sub"] == .string(Self.hash("sub", "sub-1")))
            let fifth = try await Sessions.signIn(fixture, client), sixth = try await Sessions.signIn(fixture, client)
            #expect(try await client.execute(uri: "/sessions/\(sixth.sid)", method: .delete, headers: fifth.bearer).status == .noContent)
            #expect(fixture.events.named(.sessionEndedByUser).first?["sid"] == .string(Self.hash("sid", sixth.sid)))

            // The operator: refused without the credential, then every session of the person.
            var headers = Route.formHeaders
            #expect(try await client.execute(uri: "/admin/sessions/revoke", method: .post, headers: headers, body: Route.form([("sub", "sub-1")])).status == .unauthorized)
            #expect(fixture.events.named(.adminRefused).first?["reason"] == .string("invalid_token"))
            headers[.authorization] = "Bearer " + RelayUserSessionTests.adminToken
            #expect(try await client.execute(uri: "/admin/sessions/revoke", method: .post, headers: headers, body: Route.form([("sub", "sub-1")])).status == .ok)
            let admin = try #require(fixture.events.named(.adminSessionsRevoked).first)
            #expect(admin["sub"] == .string(Self.hash("sub", "sub-1")) && admin["sessions"] == .string("1") && admin["outcome"] == .string("success"))
            #expect(!fixture.events.text.contains("sub-1"))
        }
    }

    /// `/auth` is registered outside the middleware that names a request as its events' origin
    /// (its in-memory answers record none); its full path names it itself.
    @Test func aProofRefusedAtForwardAuthIsRecordedWithItsRequest() async throws {
        let fixture = Self.fixture { $0.server.trustedProxies = ["127.0.0.1/32", "::1/128"] }
        try await fixture.test(.live) { client in
            let key = try RelayDPoPTests.AppKey(fixture.clock)
            let redeemed = try await RelayDPoPTests.redeem(fixture, client, headers: [DPoPGuard.header: try key.proof("POST", RelayDPoPTests.tokenURL)])
            let access = try #require(Route.json(redeemed)["access_token"]?.stringValue)
            let headers: HTTPFields = [
                .authorization: "DPoP \(access)", DPoPGuard.header: try key.proof("GET", "https://api.example.fr/orders", accessToken: access),
                HTTPField.Name("X-Forwarded-Method")!: "DELETE", HTTPField.Name("X-Forwarded-Proto")!: "https",
                HTTPField.Name("X-Forwarded-Host")!: "api.example.fr", HTTPField.Name("X-Forwarded-Uri")!: "/orders",
                HTTPField.Name("X-Request-Id")!: "gateway-request-7", .userAgent: "orders-app/2.1",
            ]
            #expect(try await client.execute(uri: "/auth", method: .get, headers: headers).status == .unauthorized)
            let refused = try #require(fixture.events.named(.dpopRefused).first)
            #expect(refused["request_id"] == .string("gateway-request-7") && refused["user_agent"] == .string("orders-app/2.1"))
            #expect(refused["ip"]?.stringValue?.isEmpty == false)
        }
    }

    @Test(.tags(.fast)) func refusedProofsAndAttestationsAndRateLimitsAreRecorded() async throws {
        let form = Route.form([("grant_type", "refresh_token"), ("client_id", "app"), ("refresh_token", "x")])
        let dpop = Self.fixture { configuration in
            configuration.apps[0].dpop = .required
            configuration.rateLimit.perClient = 3
        }
        try await dpop.test { client in
            // No DPoP proof from an app that must send one.
            #expect(try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: form).status == .badRequest)
            let refused = try #require(dpop.events.named(.dpopRefused).first)
            #expect(refused["reason"] == .string("invalid_dpop_proof") && refused["client_id"] == .string("app"))
            // Over the app's limit: one event for the window, however many requests are refused.
            for _ in 0..<4 { _ = try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: form) }
            #expect(dpop.events.named(.rateLimited).count == 1)
            #expect(dpop.events.named(.rateLimited).first?["limit"] == .string("client"))
        }
        let attested = RelayAttestationTests.fixture(.required) { $0.securityEvents.hashKey = Self.hashKey }
        try await attested.test { client in
            // No client attestation from an app that must be attested.
            #expect(try await client.execute(uri: "/token", method: .post, headers: Route.formHeaders, body: form).status == .badRequest)
            let refused = try #require(attested.events.named(.attestationRefused).first)
            #expect(refused["platform"] == .string("client_attestation") && refused["reason"] == .string("invalid_client_attestation"))
        }
    }

    @Test(.tags(.fast)) func aCallbackForNoSignInAndARefusedLogoutTokenAreRecorded() async throws {
        let fixture = Self.fixture()
        try await fixture.test { client in
            #expect(try await client.execute(uri: "/callback?state=unknown&code=c", method: .get).status == .badRequest)
            let failed = try #require(fixture.events.named(.signInFailed).first)
            #expect(failed["reason"] == .string("transaction_expired") && failed["outcome"] == .string("failure"))
            let body = Route.form([("logout_token", "not-a-token")])
            #expect(try await client.execute(uri: "/backchannel-logout", method: .post, headers: Route.formHeaders, body: body).status == .badRequest)
            #expect(fixture.events.named(.backchannelLogoutRefused).first?["reason"] == .string("invalid_request"))
        }
    }

    @Test(.tags(.fast)) func offMeansNoEvents() async throws {
        let fixture = Self.fixture { $0.securityEvents.enabled = false }
        try await fixture.test { client in
            _ = try await Sessions.signIn(fixture, client)
        }
        #expect(fixture.events.all.isEmpty)
    }

    @Test(.tags(.fast)) func aFileOutputIsAppendedToAndAnUnwritableOneStopsTheStart() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("relais-events-\(UUID().uuidString).jsonl").path
        try "earlier line\n".write(toFile: path, atomically: true, encoding: .utf8)
        let sink = try DescriptorEventSink(.file(path))
        SecurityEventLog(sink: sink, hashKey: Self.hashKey, clock: ManualClock()).record(.adminRefused, reason: "invalid_token")
        let lines = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2 && lines[0] == "earlier line")
        #expect(JSONValue.object(from: Array(lines[1].utf8))?["event"] == .string("admin.refused"))
        #expect(throws: RelayStartupError.self) { try DescriptorEventSink(.file("/nonexistent-dir/events.jsonl")) }
        // A write the system refuses (a full disk) is counted for alerting, and the request goes on.
        RelaisMetrics.bootstrap()
        func lost() -> Double {
            let text = String(decoding: RelaisMetrics.exposition(), as: UTF8.self)
            return text.split(separator: "\n").first { $0.hasPrefix("relais_security_events_lost_total ") }.flatMap { Double($0.split(separator: " ")[1]) } ?? 0
        }
        let before = lost()
        SecurityEventLog(sink: try DescriptorEventSink(.file("/dev/full")), hashKey: Self.hashKey, clock: ManualClock()).record(.adminRefused)
        #expect(lost() == before + 1)
        var configuration = RelaisConfiguration()
        configuration.server.environment = .development
        configuration.securityEvents.output = .file("/nonexistent-dir/events.jsonl")
        let http = HTTPClient()
        await #expect(throws: RelayStartupError.self) {
            _ = try await Relay(
                configuration: configuration, store: EmbeddedStore(clock: ManualClock()), httpClient: http, clock: ManualClock(), generateKey: TestKeys.generator())
        }
        try await http.shutdown()
    }
}

extension RelaySignInAndTokensChain {
    /// Security events of real sign-ins against the development provider, read from the file the
    /// relay appends them to: who signed in and how it ended, never a token, a code or a claim.
    @Suite struct SecurityEventSignInTests {
        @Test func aSignInAndACancelledOneAreRecordedWithoutTokensOrClaims() async throws {
            let harness = try await RelayHarness.launch()
            let tokens = try await harness.tokens()
            let access = try #require(tokens["access_token"]?.stringValue)
            let claims = try RelayDPoPTests.claims(access)
            let cancelled = try await harness.callback(try await harness.throughProvider(RelayHarness.AppRequest(), identity: nil))
            #expect(cancelled.status == 302)

            let events = harness.securityEvents()
            #expect(events.map { $0["event"]?.stringValue } == ["sign_in.succeeded", "session.opened", "sign_in.failed"])
            let (succeeded, opened, failed) = (events[0], events[1], events[2])
            #expect(succeeded["provider"] == .string("fc") && succeeded["client_id"] == .string("app") && succeeded["acr"] == .string("eidas1"))
            #expect(succeeded["ip"] == .string("127.0.0.1") && succeeded["sid"] == .null)
            // One person: the sign-in's sub hash is the session's.
            #expect(succeeded["sub"] != .null && succeeded["sub"] == opened["sub"])
            #expect(opened["sid"] != .null && opened["via"] == .string("code"))
            #expect(failed["reason"] == .string("access_denied") && failed["outcome"] == .string("failure") && failed["provider"] == .string("fc"))

            let text = harness.securityEventText()
            let subject = try #require(claims["sub"]?.stringValue), sid = try #require(claims["sid"]?.stringValue)
            for secret in [subject, sid, access, try #require(tokens["refresh_token"]?.stringValue), "Angela"] {
                #expect(!text.contains(secret), "the events name \(secret.prefix(12))")
            }
            // No JWT at all; a bare "eyJ" can occur in a random request id.
            #expect(!text.contains(try Regex(#"eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\."#)), "the events hold a JWT")
        }
    }
}

@Suite(.tags(.fast)) struct SecurityEventCatalogueTests {
    /// docs/security-events.md is `relais security-events --markdown`: regenerate it when this fails.
    @Test func theCommittedSchemaIsTheGeneratedOne() throws {
        let path = RelaisProcess.packageRoot.appendingPathComponent("docs/security-events.md").path
        let committed = try String(contentsOfFile: path, encoding: .utf8)
        #expect(committed == SecurityEventCatalogue.markdown(), "docs/security-events.md is stale: run `.build/debug/relais security-events --markdown > docs/security-events.md`")
    }

    /// Every field an event sets is explained, and every event has its meaning.
    @Test func everyEventFieldIsDocumented() {
        for kind in SecurityEventKind.allCases {
            #expect(!kind.meaning.isEmpty)
            for field in kind.fields { #expect(SecurityEventCatalogue.eventFields[field] != nil, "\(kind.rawValue).\(field)") }
        }
    }
}
