import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySessionsAndProvidersChain {
    /// `POST /backchannel-logout` against a real development provider whose signing key the test
    /// also holds, so it can write the logout tokens a generic OpenID provider would send
    /// (FranceConnect sends none), including every kind of bad one.
    @Suite struct RelayBackchannelLogoutTests {
        struct Setup {
            let harness: RelayHarness
            let key: JWK

            static func launch(providerClient: String = "", store: String = "  kind: embedded") async throws -> Setup {
                // No kid: the provider publishes this one key under its thumbprint, and a token without
                // a kid is accepted when exactly one key matches.
                let key = try JWK.generate(for: .es256)
                let path = FileManager.default.temporaryDirectory.appendingPathComponent("relais-bcl-\(UUID().uuidString).pem").path
                try #require(key.privateKeyPEM()).write(toFile: path, atomically: true, encoding: .utf8)
                let harness = try await RelayHarness.launch(
                    store: store, providerClient: providerClient, providerExtra: "    backchannel_logout: true\n", providerSettings: "  signing_key_file: \(path)"
                )
                return Setup(harness: harness, key: key)
            }

            /// A logout token as the provider would write it; `change` edits the claims first.
            func logoutToken(
                subject: String?, sid: String? = nil, key: JWK? = nil, typ: String? = "logout+jwt", _ change: (inout [String: JSONValue]) -> Void = { _ in }
            ) throws -> String {
                var claims: [String: JSONValue] = [
                    "iss": .string(harness.providerIssuer), "aud": .string("relais"), "iat": .number(harness.clock.now.rounded(.down)),
                    "jti": .string(SecureRandom.token(bits: 128)),
                    "events": .object(["http://schemas.openid.net/event/backchannel-logout": .object([:])]),
                ]
                if let subject { claims["sub"] = .string(subject) }
                if let sid { claims["sid"] = .string(sid) }
                change(&claims)
                return try JWS.sign(payload: JSONValue.object(claims).serialized(), with: key ?? self.key, algorithm: .es256, extraHeader: typ.map { ["typ": .string($0)] } ?? [:])
            }

            func send(_ token: String) async throws -> HTTPClientResponse {
                try await harness.post(harness.issuer + "/backchannel-logout", [("logout_token", token)])
            }

            func subject(of tokens: [String: JSONValue]) throws -> String {
                let accessToken = try #require(tokens["access_token"]?.stringValue)
                return try #require(JSONValue.object(from: try JWS.parse(accessToken).payload)?["sub"]?.stringValue)
            }

            func isLive(_ tokens: [String: JSONValue]) async throws -> Bool {
                try await harness.refresh(try #require(tokens["refresh_token"]?.stringValue)).status == 200
            }
        }

        @Test func aLogoutTokenEndsEveryRelaisSessionOfThatPersonAndNoOther() async throws {
            let setup = try await Setup.launch()
            let before = try await setup.harness.metrics()
            let first = try await setup.harness.tokens(identity: "angela")
            let second = try await setup.harness.tokens(identity: "angela")
            let other = try await setup.harness.tokens(identity: "pierre")
            let subject = try setup.subject(of: first)

            let response = try await setup.send(try setup.logoutToken(subject: subject))
            #expect(response.status == 200)
            #expect(response.header("cache-control") == "no-store")
            #expect(try await setup.harness.userinfo(try #require(first["access_token"]?.stringValue)).status == 401)
            #expect(try await setup.isLive(first) == false)
            #expect(try await setup.isLive(second) == false)
            #expect(try await setup.isLive(other) == true)
            // A provider session id Relais never saw (the development provider sends no sid): nothing
            // to end, which is still a success.
            let unknownSid = try await setup.send(try setup.logoutToken(subject: nil, sid: "unknown-provider-session"))
            #expect(unknownSid.status == 200)
            #expect(try await setup.isLive(other) == true)
            #expect(try await setup.harness.metrics(since: before)[#"relais_sessions_ended_total{reason="backchannel_logout"}"#] == 2)
        }

        @Test func aProviderSessionIDEndsOnlyTheRelaisSessionsOpenedFromIt() async throws {
            // The development provider sends `sid` when asked, as generic providers do.
            let setup = try await Setup.launch(providerClient: "\n    id_token_sid: true")
            let first = try await setup.harness.tokens(identity: "angela")
            let firstProviderSession = try #require(setup.harness.providerCookie?.split(separator: "=", maxSplits: 1).last.map(String.init))
            setup.harness.providerCookie = nil  // a new login at the provider: another provider session
            let second = try await setup.harness.tokens(identity: "angela")
            #expect(setup.harness.providerCookie?.hasSuffix(firstProviderSession) == false)
            // The provider's sid is derived from its session (docs/dev-provider.md).
            let sid = String(SHA256.hexHash("sid\u{0}" + firstProviderSession).prefix(32))

            #expect(try await setup.send(try setup.logoutToken(subject: nil, sid: sid)).status == 200)
            #expect(try await setup.isLive(first) == false)
            #expect(try await setup.isLive(second) == true)
            // sid and sub together: the sid's sessions of that sub only; another person's sub ends nothing.
            let third = try await setup.harness.tokens(identity: "angela")  // same provider session as `second`
            let secondProviderSession = try #require(setup.harness.providerCookie?.split(separator: "=", maxSplits: 1).last.map(String.init))
            let secondSid = String(SHA256.hexHash("sid\u{0}" + secondProviderSession).prefix(32))
            #expect(try await setup.send(try setup.logoutToken(subject: "not-angela", sid: secondSid)).status == 200)
            #expect(try await setup.isLive(third) == true)
            #expect(try await setup.send(try setup.logoutToken(subject: try setup.subject(of: third), sid: secondSid)).status == 200)
            #expect(try await setup.isLive(third) == false)
        }

        @Test func everyBadLogoutTokenIsRefusedWithItsReasonAndEndsNothing() async throws {
            let setup = try await Setup.launch()
            let before = try await setup.harness.metrics()
            let tokens = try await setup.harness.tokens(identity: "angela")
            let subject = try setup.subject(of: tokens)
            let otherKey = try JWK.generate(for: .es256)
            let replayed = try setup.logoutToken(subject: "someone-else")
            #expect(try await setup.send(replayed).status == 200)

            let cases: [(String, String)] = [
                (try setup.logoutToken(subject: subject, key: otherKey), "provider_logout_token_rejected: jose_invalid_signature: the signature does not verify"),
                (try setup.logoutToken(subject: subject) { $0["aud"] = .string("another-client") }, "provider_logout_token_rejected: jwt_aud:"),
                (
                    try setup.logoutToken(subject: subject) { $0["iat"] = .number(setup.harness.clock.now.rounded(.down) - 3600) },
                    "provider_logout_token_rejected: jwt_iat: issued 3600 s ago, more than the allowed 300 s"
                ),
                (try setup.logoutToken(subject: subject) { $0["iat"] = nil }, "provider_logout_token_rejected: jwt_iat:"),
                (try setup.logoutToken(subject: subject) { $0["exp"] = .number(setup.harness.clock.now - 60) }, "provider_logout_token_rejected: jwt_exp:"),
                (try setup.logoutToken(subject: subject) { $0["jti"] = nil }, "provider_logout_token_rejected: jwt_required: claim 'jti' is missing"),
                (try setup.logoutToken(subject: subject) { $0["events"] = nil }, "provider_logout_token_rejected: jwt_required: claim 'events' is missing"),
                (
                    try setup.logoutToken(subject: subject) { $0["events"] = .object(["http://schemas.openid.net/event/other": .object([:])]) },
                    "provider_logout_token_rejected: events has no http://schemas.openid.net/event/backchannel-logout member"
                ),
                (
                    try setup.logoutToken(subject: subject) { $0["nonce"] = .string("n-0123456789012345678901") },
                    "provider_logout_token_rejected: a logout token must not carry a nonce"
                ),
                (try setup.logoutToken(subject: nil), "provider_logout_token_rejected: neither sub nor sid names whom to log out"),
                (try setup.logoutToken(subject: subject, typ: "JWT"), "provider_logout_token_rejected: typ is 'jwt', not logout+jwt"),
                (try setup.logoutToken(subject: subject) { $0["iss"] = .string("https://unknown.example/op") }, "no provider with back-channel logout enabled issued this token"),
                (replayed, "provider_logout_token_rejected: this jti was already used (replay)"),
                ("not-a-jwt", "provider_logout_token_rejected: jose_malformed"),
            ]
            for (token, expected) in cases {
                let response = try await setup.send(token)
                #expect(response.status == 400, "\(expected)")
                let body = JSONValue.object(from: response.body)
                #expect(body?["error"] == .string("invalid_request"))
                // The check's name, then its reason: matched on the start where the reason has numbers.
                #expect(body?["error_description"]?.stringValue?.hasPrefix(expected) == true, "\(body?["error_description"]?.stringValue ?? "nil") for \(expected)")
            }
            let missing = try await setup.harness.post(setup.harness.issuer + "/backchannel-logout", [("token", "x")])
            #expect(JSONValue.object(from: missing.body)?["error_description"] == .string("logout_token is missing"))
            #expect(try await setup.isLive(tokens))
            let metrics = try await setup.harness.metrics(since: before)
            #expect(metrics[#"relais_security_events_total{event="logout_token_replay"}"#] == 1)
            #expect(metrics[#"relais_sessions_ended_total{reason="backchannel_logout"}"#] == nil)
        }

        @Test func withTheStoreDownTheProviderIsToldToRetry() async throws {
            let redis = try await RedisServerProcess.launch()
            defer { redis.stop() }
            let setup = try await Setup.launch(store: "  kind: redis\n  redis:\n    url: \(redis.url)\n    command_timeout: 500ms\n    connect_timeout: 500ms")
            let tokens = try await setup.harness.tokens(identity: "angela")
            let token = try setup.logoutToken(subject: try setup.subject(of: tokens))
            redis.pause()  // frozen, so its data is still there afterwards
            let response = try await setup.send(token)
            #expect(response.status == 503)
            #expect(JSONValue.object(from: response.body)?["error"] == .string("temporarily_unavailable"))
            // Nothing was ended or remembered: the same token works once the store is back.
            redis.resume()
            #expect(try await setup.isLive(tokens))
            #expect(try await setup.send(token).status == 200)
            #expect(try await setup.isLive(tokens) == false)
        }

        @Test func aProviderWithoutBackchannelLogoutIsNotHeard() async throws {
            let harness = try await RelayHarness.launch()
            let tokens = try await harness.tokens(identity: "angela")
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            let subject = try #require(JSONValue.object(from: try JWS.parse(accessToken).payload)?["sub"]?.stringValue)
            // Even a well-formed token (signed by some key) is refused: the provider was not enabled.
            let key = try JWK.generate(for: .es256)
            let claims: JSONValue = .object([
                "iss": .string(harness.providerIssuer), "aud": .string("relais"), "iat": .number(harness.clock.now), "jti": .string("j1"),
                "sub": .string(subject), "events": .object(["http://schemas.openid.net/event/backchannel-logout": .object([:])]),
            ])
            let response = try await harness.post(
                harness.issuer + "/backchannel-logout", [("logout_token", try JWS.sign(payload: claims.serialized(), with: key, algorithm: .es256))])
            #expect(response.status == 400)
            #expect(JSONValue.object(from: response.body)?["error_description"] == .string("no provider with back-channel logout enabled issued this token"))
            #expect(try await harness.userinfo(accessToken).status == 200)
        }
    }
}
