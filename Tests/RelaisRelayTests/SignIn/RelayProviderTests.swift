import Foundation
import RelaisClock
import RelaisCrypto
import RelaisHTTPClient
import RelaisJOSE
import RelaisServer
import RelaisTestSupport
import Testing

extension RelaySessionsAndProvidersChain {
    /// Every way the provider can fail ends in a clear OAuth error at the app, with nothing stored;
    /// FranceConnect v1 and FranceConnect+; several Relais instances on one Redis.
    @Suite struct RelayProviderTests {
        /// Signs in with `fault` armed at the provider; returns the app's error.
        private func appError(_ harness: RelayHarness, after fault: String) async throws -> String? {
            try await harness.armProvider(fault)
            let request = RelayHarness.AppRequest()
            let toRelay = try await harness.throughProvider(request)
            let response = try await harness.callback(toRelay)
            #expect(response.status == 302)
            let query = try RelayHarness.query(try #require(response.header("location")))
            #expect(query["state"] == request.state)
            #expect(query["code"] == nil)
            return query.oauthError
        }

        /// OpenID Connect Core §3.1.2.1: with max_age the id_token carries auth_time, and a provider
        /// sign-in older than max_age (a provider that ignored prompt=login) is refused, as is one
        /// with no auth_time at all, which cannot show it is recent (fail closed).
        @Test func maxAgeIsHeldAgainstTheProvidersSignIn() async throws {
            let harness = try await RelayHarness.launch()
            var stale = RelayHarness.AppRequest()
            stale.extra = [("max_age", "600")]
            try await harness.armProvider("id_token:stale_auth_time")
            let refused = try await harness.callback(try await harness.throughProvider(stale))
            let query = try RelayHarness.query(try #require(refused.header("location")))
            #expect(query["code"] == nil)
            #expect(query.oauthError == "server_error: provider_callback_rejected: the provider's sign-in (auth_time) is older than the app's max_age")

            var unsaid = RelayHarness.AppRequest()
            unsaid.extra = [("max_age", "600")]
            try await harness.armProvider("id_token:no_auth_time")
            let unproven = try RelayHarness.query(try #require(try await harness.callback(try await harness.throughProvider(unsaid)).header("location")))
            #expect(unproven["code"] == nil)
            #expect(unproven.oauthError == "server_error: provider_callback_rejected: the provider gave no auth_time, so the app's max_age cannot be held")

            // Within max_age, the provider's own auth_time goes into Relais' id_token.
            var fresh = RelayHarness.AppRequest()
            fresh.extra = [("max_age", "600")]
            let freshCode = try #require(try await harness.signIn(fresh)["code"])
            let tokens = try #require(JSONValue.object(from: try await harness.exchange(freshCode, fresh).body))
            let idToken = try JWS.parse(try #require(tokens["id_token"]?.stringValue))
            let authTime = try #require(JSONValue.object(from: idToken.payload)?["auth_time"]?.numberValue)
            #expect(harness.clock.now - authTime <= 600)
        }

        @Test func everyProviderFaultEndsInASpecificErrorAtTheApp() async throws {
            let harness = try await RelayHarness.launch()
            let cases: [(String, String)] = [
                ("id_token:wrong_nonce", "server_error: provider_id_token_rejected: jwt_nonce"),
                ("id_token:wrong_iss", "server_error: provider_id_token_rejected: jwt_iss"),
                ("id_token:wrong_aud", "server_error: provider_id_token_rejected: jwt_aud"),
                ("id_token:expired", "server_error: provider_id_token_rejected: jwt_exp"),
                ("id_token:bad_signature", "server_error: provider_id_token_rejected: jose_invalid_signature"),
                ("id_token:alg_none", "server_error: provider_id_token_rejected: jose_unsupported_alg"),
                ("id_token:wrong_at_hash", "server_error: provider_id_token_rejected: jwt_at_hash"),
                ("userinfo:sub_mismatch", "server_error: provider_userinfo_rejected: userinfo 'sub' differs from the id_token's"),
                ("userinfo:bad_signature", "server_error: provider_userinfo_rejected: userinfo JWT rejected (jose_invalid_signature)"),
                ("token:status=500", "temporarily_unavailable: provider_unavailable: the token endpoint answered HTTP 500"),
                ("token:status=503", "temporarily_unavailable: provider_unavailable: the token endpoint answered HTTP 503"),
                ("token:malformed", "server_error: provider_invalid_response: the token response is not a JSON object"),
                ("userinfo:status=503", "temporarily_unavailable: provider_unavailable: userinfo answered HTTP 503"),
            ]
            for (fault, expected) in cases {
                #expect(try await appError(harness, after: fault) == expected, "\(fault)")
            }
            let truncated = try await appError(harness, after: "token:truncated")
            #expect(truncated?.hasPrefix("temporarily_unavailable: provider_unavailable: http_incomplete_response") == true)
            // And a clean sign-in still works afterwards.
            _ = try await harness.tokens()
        }

        @Test func aSlowProviderGivesTheAppTemporarilyUnavailableWithinTheTimeout() async throws {
            let harness = try await RelayHarness.launch(providerExtra: "    timeout: 1s\n")
            try await harness.armProvider("token:delay=20000")
            let toRelay = try await harness.throughProvider(RelayHarness.AppRequest())
            let start = ContinuousClock.now
            let response = try await harness.callback(toRelay)
            let elapsed = ContinuousClock.now - start
            let location = try #require(response.header("location"))
            #expect(try RelayHarness.query(location).oauthError?.hasPrefix("temporarily_unavailable: provider_unavailable: http_timeout") == true)
            // The app hears back after Relais' 1 s timeout, long before the provider's 20 s answer.
            #expect(elapsed >= .milliseconds(900) && elapsed < .seconds(10))

            // The provider's JWKS too: its fetch is bound by the provider's timeout (1 s), not the
            // HTTP client's (the harness' 3 s).
            let cold = try await RelayHarness.launch(providerExtra: "    timeout: 1s\n")
            try await cold.armProvider("jwks:delay=20000")
            let coldToRelay = try await cold.throughProvider(RelayHarness.AppRequest())
            let coldStart = ContinuousClock.now
            let coldResponse = try await cold.callback(coldToRelay)
            let coldElapsed = ContinuousClock.now - coldStart
            let coldQuery = try RelayHarness.query(try #require(coldResponse.header("location")))
            #expect(coldQuery["code"] == nil, "\(coldQuery.oauthError ?? "")")
            #expect(coldQuery.oauthError == "server_error: provider_id_token_rejected: jose_jwks_unavailable")
            #expect(coldElapsed < .milliseconds(2500), "\(coldElapsed)")
        }

        @Test func aMissingKidOrARotatedKeyIsStillVerified() async throws {
            let harness = try await RelayHarness.launch(providerExtra: "    jwks_refetch_interval: 1s\n")
            _ = try await harness.tokens()  // the JWKS is now cached
            harness.clock.advance(by: .milliseconds(1100))
            let rotated = try await harness.http.send(HTTPClientRequest(method: .post, url: harness.provider.baseURL + "/_test/rotate-keys"))
            #expect(rotated.status == 200)
            _ = try await harness.tokens()  // unknown kid → refetch → accepted
            // Without a kid, two published ES256 keys are ambiguous: refused rather than guessed.
            #expect(try await appError(harness, after: "id_token:missing_kid") == "server_error: provider_id_token_rejected: jose_no_matching_key")
        }

        @Test func franceConnectV1SignsInWithTheClientSecret() async throws {
            let harness = try await RelayHarness.launch(mode: "v1")
            let tokens = try await harness.tokens()
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            let claims = try #require(JSONValue.object(from: try await harness.userinfo(accessToken).body))
            #expect(claims["family_name"] == .string("DUBOIS"))
        }

        @Test func franceConnectPlusTokensAreDecryptedAndVerified() async throws {
            let key = try TestKeys.rsa(use: "enc", pinAlgorithm: false)
            let harness = try await RelayHarness.launch(mode: "fcplus", fcplusKey: key)
            let published = try JWKSet(json: try await harness.get(harness.issuer + "/jwks/provider.json").body)
            #expect(published.keys.map(\.keyID) == [key.thumbprint()] && published.keys.allSatisfy { !$0.isPrivate && $0.use == "enc" })
            var request = RelayHarness.AppRequest()
            request.extra = [("acr_values", "eidas3")]
            let tokens = try await harness.tokens(request)
            let access = try JWS.parse(try #require(tokens["access_token"]?.stringValue))
            #expect(try ClaimsPolicy(now: { harness.clock.now }).validate(access).acr == "eidas3")
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            let claims = try #require(JSONValue.object(from: try await harness.userinfo(accessToken).body))
            #expect(claims["given_name"] == .string("Angela Claire Louise"))
        }

        @Test func twoRelaisInstancesOnOneRedisFinishEachOthersFlows() async throws {
            let redis = try await RedisServerProcess.launch()
            defer { redis.stop() }
            let harness = try await RelayHarness.launch(instances: 2, store: "  kind: redis\n  redis:\n    url: \(redis.url)")
            let (a, b) = (harness.relays[0], harness.relays[1])
            let request = RelayHarness.AppRequest()
            let toRelay = try await harness.throughProvider(request, relay: a)
            let response = try await harness.callback(toRelay, relay: b)
            let location = try #require(response.header("location"))
            let code = try #require(try RelayHarness.query(location)["code"])
            let tokens = try #require(JSONValue.object(from: try await harness.exchange(code, request, relay: a).body))
            let refreshToken = try #require(tokens["refresh_token"]?.stringValue)
            let refreshed = try await harness.refresh(refreshToken, relay: b)
            #expect(refreshed.status == 200)
            // Both instances sign with the same generated key and open the same sealed session:
            // a retry at the other instance gets the same new refresh token.
            let retry = try await harness.refresh(refreshToken, relay: a)
            #expect(retry.status == 200)
            #expect(JSONValue.object(from: retry.body)?["refresh_token"] == JSONValue.object(from: refreshed.body)?["refresh_token"])
            let keysA = try await harness.get(a.baseURL + "/jwks.json").body
            let keysB = try await harness.get(b.baseURL + "/jwks.json").body
            #expect(keysA == keysB)
            // A restarted instance loses nothing.
            try await a.restart()
            let afterRestart = try await harness.refresh(try #require(JSONValue.object(from: refreshed.body)?["refresh_token"]?.stringValue), relay: a)
            #expect(afterRestart.status == 200)
        }

        /// RFC 6750 §2.2: a provider that takes the userinfo access token only as a form field.
        @Test func aProviderThatTakesTheUserinfoTokenOnlyInTheBody() async throws {
            let inHeader = try await RelayHarness.launch()
            #expect(try await appError(inHeader, after: "userinfo:token_in_body_only") == "server_error: provider_invalid_response: userinfo answered HTTP 401")
            let inBody = try await RelayHarness.launch(providerExtra: "    userinfo_token_in: body\n")
            try await inBody.armProvider("userinfo:token_in_body_only")
            let tokens = try await inBody.tokens()
            #expect(tokens["access_token"] != nil)
            // The identity came through: userinfo answered the body form.
            let access = try #require(tokens["access_token"]?.stringValue)
            let userinfo = try #require(JSONValue.object(from: try await inBody.userinfo(access).body))
            #expect(userinfo["given_name"] != nil)
        }

        /// The provider rotates its signing keys between two sign-ins a second apart: the second id_token
        /// names a kid the relay fetched no JWKS for, and the relay refetches at once.
        @Test func aProviderKeyRotationBetweenTwoSignInsIsFollowed() async throws {
            let harness = try await RelayHarness.launch()
            #expect(try await harness.tokens()["access_token"] != nil)
            let rotated = try await harness.http.send(HTTPClientRequest(method: .post, url: harness.provider.baseURL + "/_test/rotate-keys"))
            try #require(rotated.status == 200)
            harness.clock.advance(by: .seconds(1))
            #expect(try await harness.tokens()["access_token"] != nil)
        }

        @Test func redisDownMidFlowGivesTemporarilyUnavailableAndNoSession() async throws {
            let redis = try await RedisServerProcess.launch()
            defer { redis.stop() }
            let harness = try await RelayHarness.launch(store: "  kind: redis\n  redis:\n    url: \(redis.url)\n    command_timeout: 500ms\n    connect_timeout: 500ms")
            let request = RelayHarness.AppRequest()
            let toRelay = try await harness.throughProvider(request)
            let response = try await harness.callback(toRelay)
            let location = try #require(response.header("location"))
            let code = try #require(try RelayHarness.query(location)["code"])
            redis.stop()
            let exchange = try await harness.exchange(code, request)
            #expect(exchange.status == 503)
            #expect(JSONValue.object(from: exchange.body)?["error"] == .string("temporarily_unavailable"))
            let authorize = try await harness.get(FormParameters.url(harness.issuer + "/authorize", adding: RelayHarness.AppRequest().parameters))
            let query = try RelayHarness.query(try #require(authorize.header("location")))
            #expect(query["error"] == "temporarily_unavailable")
            try await redis.start()
            // The failures opened the store's circuit: it closes at the first answer of its background probe.
            let deadline = ContinuousClock.now + .seconds(10)
            while try await harness.get(harness.issuer + "/readyz").status != 200, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            // Nothing half-done survived: the code is still single-use and the flow can be retried.
            let retry = try await harness.exchange(code, request)
            #expect(retry.status == 200 || JSONValue.object(from: retry.body)?["error"] == .string("invalid_grant"))
            _ = try await harness.tokens()
        }

        @Test func relaisKeepsItsSessionsInARedisReachedOverTLS() async throws {
            let certificates = try await TestCertificates.make()
            let redis = try await RedisServerProcess.launch(tls: certificates, requireClientCertificate: true)
            defer { redis.stop() }
            let harness = try await RelayHarness.launch(
                store: """
                      kind: redis
                      redis:
                        url: \(redis.url)
                        tls:
                          ca_bundle: \(certificates.serverCertificate)
                          client_certificate: \(certificates.clientCertificate)
                          client_key: \(certificates.clientKey)
                    """)
            let tokens = try await harness.tokens()
            let accessToken = try #require(tokens["access_token"]?.stringValue)
            #expect(try await harness.userinfo(accessToken).status == 200)
            let refreshed = try await harness.refresh(try #require(tokens["refresh_token"]?.stringValue))
            #expect(refreshed.status == 200)
            // The relay's readiness check goes through the same tunnel.
            #expect(try await harness.get(harness.issuer + "/readyz").status == 200)
        }

        @Test func relaisAuthenticatesWithPrivateKeyJWT() async throws {
            let key = try JWK.generate(for: .es256, keyID: "relais-client-key")
            let path = FileManager.default.temporaryDirectory.appendingPathComponent("relais-client-\(UUID().uuidString).pem").path
            try #require(key.privateKeyPEM()).write(toFile: path, atomically: true, encoding: .utf8)
            // As in production: the provider reads Relais' public client key from /jwks/provider.json.
            let harness = try await RelayHarness.launch(
                providerClient: "\n    token_endpoint_auth_method: private_key_jwt\n    jwks_uri: RELAY/jwks/provider.json",
                providerExtra: "    client_auth: private_key_jwt\n    client_key_file: \(path)\n"
            )
            let published = try JWKSet(json: try await harness.get(harness.issuer + "/jwks/provider.json").body)
            #expect(published.keys.map(\.keyID) == [key.thumbprint()] && published.keys.allSatisfy { !$0.isPrivate && $0.use == "sig" })
            _ = try await harness.tokens()
            _ = try await harness.tokens()  // a fresh jti each time: the provider refuses replays
        }

        @Test func clientSecretBasicAndPKCEAreSentWhenConfigured() async throws {
            // FranceConnect (and so the development provider) refuses both: the refusals prove Relais sent them.
            let basic = try await RelayHarness.launch(providerExtra: "    client_auth: client_secret_basic\n")
            let toRelay = try await basic.throughProvider(RelayHarness.AppRequest())
            let refused = try RelayHarness.query(try #require(try await basic.callback(toRelay).header("location")))
            #expect(
                refused.oauthError?.hasPrefix(
                    "server_error: provider_rejected: the provider refused the code exchange (invalid_client: client authentication failed (client_secret_basic is not supported))")
                    == true)

            let pkce = try await RelayHarness.launch(providerExtra: "    pkce: true\n")
            let start = try await pkce.get(FormParameters.url(pkce.issuer + "/authorize", adding: RelayHarness.AppRequest().parameters))
            let toProvider = try RelayHarness.query(try #require(start.header("location")))
            #expect(toProvider["code_challenge_method"] == "S256" && toProvider["code_challenge"]?.count == 43)
        }
    }
}
